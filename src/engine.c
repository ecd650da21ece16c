/*
 * The transfer engine: how one message travels, for point-to-point calls.
 *
 * Protocol. Every message is one of two shapes on the wire:
 *
 *  - plain: one MPI message on the (sender thread, receiver thread, tag)
 *    address of lanes.c. A host buffer travels with the caller's count and
 *    datatype, straight from the caller's memory; a device buffer goes
 *    straight to a CUDA-aware MPI, or is staged through one ring slot
 *    (ring.c) and travels as bytes.
 *  - framed: for messages larger than PTSC_STAGING_CHUNK in a job that
 *    stages (ptsc__g.framed, the same on every rank). The first part, on the
 *    same address, is a 16-byte header (total size, message id) followed by
 *    the first chunk: exactly chunk + 16 bytes. The other chunks follow as
 *    continuation pieces addressed by the message id (lanes.c kind CONT), so
 *    pieces of different messages never match each other, and messages of
 *    one channel that start later never overtake.
 *
 * Plain messages of a framed job are at most one chunk, so a receiver tells
 * the shapes apart from the size of the first part alone (a matched probe,
 * MPI_Improbe): larger than a chunk means framed. Neither side needs to know
 * the other's memory, a receive may be larger than the message (it completes
 * with the actual size) and a message larger than the receive is drained
 * whole (PTSC_ERR_TRUNCATE, the channel stays intact). Non-overtaking order
 * per (sender thread, receiver thread, tag) is MPI's own, on the first part.
 * In a job that never frames, receives match first too (the receive guard,
 * see "Starting" below): a message larger than the receive is taken beside
 * the buffer.
 *
 * Path per message. A host buffer is never copied (PTSC_STAGING=always on a
 * machine without a device is the exception, for testing: host buffers of
 * even thread indices then go through the ring). A device or managed buffer
 * is staged when MPI is not CUDA-aware or PTSC_STAGING=always; on a
 * CUDA-aware MPI it is staged below PTSC_DIRECT_MIN (a copy beats MPI's own
 * device path for small messages) and handed to MPI directly above it.
 *
 * Progress. A request is a list of pieces, each a small state machine:
 *   send, staged: IDLE -> COPY (device-to-host copy queued) -> MPI -> DONE
 *   recv, staged: IDLE -> MPI (into a slot) -> DONE (host-to-device copy queued)
 *   direct:       IDLE -> MPI -> DONE
 * Pieces start as ring slots allow and are posted to MPI in order. A
 * receive takes a slot only for a part that was sent (matched by a probe
 * first), so a slot never waits on a peer and the send and receive rings of
 * two threads cannot wait on each other. Every
 * call of the owning thread into ptsc runs a progress pass over its requests
 * in the order they started, so ptsc_isend returns at once and several
 * messages of a thread overlap; a thread that waits drives all of them.
 * A receive is complete when its data is in MPI's hands or queued on the
 * thread's stream: the next kernel there sees it (managed memory is waited
 * for, so that the host may read it at once). Blocking calls of a thread
 * with nothing in flight skip the request where one MPI call does the
 * same (see send_staged_now).
 */
#include "ptsc_internal.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define PTSC__MAGIC 0x70747363u /* "ptsc" */

typedef struct {
    uint64_t total;
    uint32_t id;
    uint32_t magic;
} hdr_t;
_Static_assert(sizeof(hdr_t) == PTSC__HDR_BYTES, "header size");

enum { P_IDLE = 0, P_COPY, P_MPI, P_DONE };
enum { R_MATCH = 0, R_RUN, R_DONE, R_FREE }; /* R_FREE: on the free list */

typedef struct {
    MPI_Request mreq;
    MPI_Message msg; /* staged continuation piece: matched before it takes a slot */
    ptsc__slot_t *slot;
    char *scratch; /* a received piece that does not fit the user's buffer as it is */
    int st;
} piece_t;

/* A probed message that no receive has taken yet. A probe matched it, so
 * its pieces are received as they come, as a receive's would be: the
 * sender's staging slots never wait on a message nobody receives yet. */
struct ptsc__stash {
    struct ptsc__stash *next;
    int src_rank, src_thread, tag;
    MPI_Message msg; /* plain: still to receive */
    size_t n;        /* size of the first part */
    char *first;     /* framed: the first part, already received */
    int npieces;     /* framed: its pieces; 1..npieces-1 are posted in pc */
    piece_t *pc;     /* their receives into scratch memory (P_MPI) */
};

struct ptsc_request {
    struct ptsc_request *next; /* free-list link: first member (context.c frees through it) */
    struct ptsc_request *anext;
    ptsc_ctx_t *ctx;
    int is_recv, staged, state, rc, framed;
    int whole; /* framed, sent as one MPI message: header and all data (see go_whole) */
    char *user;
    int count, contig;
    MPI_Datatype type;
    size_t bytes; /* send: size; receive: capacity */
    ptsc_memclass_t cls;
    int rank, thread, tag; /* the peer as given (rank may be PTSC_ANY_RANK) */
    ptsc__addr_t a;        /* address of the first part */
    size_t total;          /* size of the message; receives learn it on arrival */
    unsigned id;
    int src_rank;
    int npieces, nposted, ndone;
    piece_t one, *pc;
    hdr_t hdr;
    MPI_Datatype first_type; /* host framed first part: {header, first chunk} */
    MPI_Message msg;         /* receive: matched first part, to be received */
    size_t first_n;
    char *first; /* receive: first part received by a probe */
    void *ev;    /* the thread scope's deferred sync (kept across reuse) */
    int deferred;
    int freed;        /* ptsc_request_free: released by progress once done, not counted in outstanding */
    int listed;       /* ptsc__request_mark: seen once in the array of the call under way */
    char *pack;       /* truncated framed receive into a non-contiguous type: its first bytes */
    const char *call; /* the call that started it, for PTSC_TIMEOUT's diagnostic */
    char *detail;     /* the detail of the failure in r->rc, for the call that completes it */
    const struct req_kind *kind; /* a message or a lane collective (below) */
    /* A lane collective (icoll.c): its operations and their state. Such a
     * request has no pieces; each progress pass advances it. */
    const struct ptsc__req_ops *ops;
    void *op;
};

/* The kinds of request the engine drives: its own point-to-point messages
 * (pieces, matching, MPI's order) and the lane collectives icoll.c plugs in
 * through struct ptsc__req_ops. Whatever the engine does to a request that
 * differs by kind goes through this table (defined with the kinds' code
 * below), so no engine code asks which kind a request is. */
struct req_kind {
    void (*step)(struct ptsc_request *r, int *moved); /* one progress pass */
    /* Unfinished work that only ptsc moves (the progress agent's want), and
     * whether the agent may queue a copy that touches the caller's memory. */
    int (*needs_drive)(const struct ptsc_request *r);
    /* MPI holds part of it (a receive to match, a posted piece, a round of
     * a schedule): only MPI calls move it, so the agent polls rather than
     * sleeps while one is in flight (progress.c). */
    int (*in_mpi)(const struct ptsc_request *r);
    int (*may_copy_user)(const struct ptsc_request *r);
    int ordered; /* takes part in the point-to-point order (channel, matching, probes) */
    void (*wait_begin)(struct ptsc_request *r); /* NVTX range and PTSC_TIMEOUT's diagnostic */
    void (*cancel)(struct ptsc_request *r);     /* ptsc_cancel */
    void (*drain)(struct ptsc_request *r);      /* its thread ends with it in flight: let go */
    /* ptsc_request_free before it finished: PTSC_OK (it completes in the
     * background) or a refusal with *kept = 1. */
    int (*free_early)(struct ptsc_request *r, int *kept, const char *call);
    void (*release)(struct ptsc_request *r); /* what it holds beyond the common fields (req_put) */
};
static const struct req_kind msg_kind, coll_kind;

static size_t chunk(void) { return ptsc__g.cfg.staging_chunk; }

/* ------------------------------------------------------------------------ */
/* Path choice                                                               */
/* ------------------------------------------------------------------------ */

/* Whether a buffer of class `cls` and `bytes` travels through the ring. */
static int choose_staged(const ptsc_ctx_t *ctx, ptsc_memclass_t cls, size_t bytes, int contig)
{
    return ptsc__mem_staged(cls, PTSC__FOR_MESSAGE, bytes, contig, ctx->index);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static struct ptsc_request *req_get(ptsc_ctx_t *ctx)
{
    struct ptsc_request *r = ctx->eng.req_free;
    void *ev = NULL;
    if (r) {
        ctx->eng.req_free = r->next;
        ev = r->ev;
    } else if (!(r = malloc(sizeof *r))) {
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->ev = ev;
    r->ctx = ctx;
    r->pc = &r->one;
    r->one.mreq = MPI_REQUEST_NULL;
    r->one.msg = MPI_MESSAGE_NULL;
    r->msg = MPI_MESSAGE_NULL;
    r->first_type = MPI_DATATYPE_NULL;
    return r;
}

static void req_put(struct ptsc_request *r)
{
    ptsc_ctx_t *ctx = r->ctx;
    if (r->kind)
        r->kind->release(r);
    r->kind = NULL;
    if (r->pc != &r->one)
        free(r->pc);
    free(r->first);
    free(r->pack);
    free(r->detail);
    r->detail = NULL;
    r->state = R_FREE;
    if (r->first_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&r->first_type);
    r->next = ctx->eng.req_free;
    ctx->eng.req_free = r;
}

static void active_add(struct ptsc_request *r)
{
    ptsc_ctx_t *ctx = r->ctx;
    r->anext = NULL;
    if (ctx->eng.active_tail)
        ctx->eng.active_tail->anext = r;
    else
        ctx->eng.active = r;
    ctx->eng.active_tail = r;
}

static void active_remove(struct ptsc_request *r)
{
    ptsc_ctx_t *ctx = r->ctx;
    struct ptsc_request **pp = &ctx->eng.active, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->anext;
    }
    if (!*pp)
        return;
    *pp = r->anext;
    if (ctx->eng.active_tail == r)
        ctx->eng.active_tail = prev;
}

static int set_pieces(struct ptsc_request *r, int n)
{
    r->npieces = n;
    if (n > 1) {
        if (!(r->pc = calloc((size_t)n, sizeof *r->pc))) {
            r->pc = &r->one;
            r->npieces = 1;
            return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc: %d message pieces", n);
        }
        for (int k = 0; k < n; k++) {
            r->pc[k].mreq = MPI_REQUEST_NULL;
            r->pc[k].msg = MPI_MESSAGE_NULL;
        }
    }
    return PTSC_OK;
}

static void piece_range(const struct ptsc_request *r, int k, size_t *off, size_t *len)
{
    if (r->whole) {
        *off = 0;
        *len = r->total;
        return;
    }
    *off = (size_t)k * chunk();
    *len = r->total - *off < chunk() ? r->total - *off : chunk();
}

/* Record the request's first error. Its detail is kept with it: the failure
 * may be found by a progress pass of another call, and the call that
 * completes the request starts with an empty detail (complete() restores
 * it). Cancelled and drained receives get their detail where they complete. */
static void fail(struct ptsc_request *r, int rc)
{
    if (r->rc != PTSC_OK || rc == PTSC_OK)
        return;
    r->rc = rc;
    const char *d = ptsc__tls()->detail;
    size_t n = strlen(d);
    if (n && rc != PTSC_ERR_CANCELLED && rc != PTSC_ERR_PENDING && (r->detail = malloc(n + 1)))
        memcpy(r->detail, d, n + 1);
}

static int mpi_status(int mpi_rc, const char *what)
{
    int cls = MPI_ERR_OTHER;
    MPI_Error_class(mpi_rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
        return ptsc__err(PTSC_ERR_TRUNCATE, "%s: the message is larger than the receive buffer", what);
    return ptsc__err_mpi(mpi_rc, what);
}

static size_t status_bytes(const MPI_Status *st)
{
    /* MPI_Get_count is the cheaper call (Open MPI 4.1: about half the
     * instructions); it says MPI_UNDEFINED above INT_MAX bytes. */
    int c = 0;
    if (MPI_Get_count(st, MPI_BYTE, &c) == MPI_SUCCESS && c != MPI_UNDEFINED)
        return c > 0 ? (size_t)c : 0;
    MPI_Count n = 0;
    MPI_Get_elements_x(st, MPI_BYTE, &n);
    return n > 0 ? (size_t)n : 0;
}

/* ------------------------------------------------------------------------ */
/* Order                                                                     */
/* ------------------------------------------------------------------------ */

/* Whether request r may hand its first part to MPI now: its deferred sync
 * completed, and no earlier request of the thread on the same channel is
 * still waiting to post its own (MPI's order is the order of posting, so
 * a message or receive that waits for a slot or a sync holds back the ones
 * behind it). Framed jobs order receives by matching instead (progress). */
static int unmatched(const struct ptsc_request *q)
{
    return q->state == R_MATCH ||
           (q->state == R_RUN && q->nposted == 0 && q->msg == MPI_MESSAGE_NULL && !q->first && !q->framed);
}

/* Whether an earlier request of the thread on r's channel still waits to
 * post its first part (sends) or to match (receives). */
static int earlier_waiting(const struct ptsc_request *r)
{
    for (struct ptsc_request *q = r->ctx->eng.active; q && q != r; q = q->anext) {
        if (q->state == R_DONE || !q->kind->ordered || q->is_recv != r->is_recv || q->thread != r->thread ||
            q->tag != r->tag)
            continue;
        if (r->is_recv ? !unmatched(q) : q->nposted > 0)
            continue;
        if (q->rank == r->rank || q->rank == PTSC_ANY_RANK || r->rank == PTSC_ANY_RANK)
            return 1;
    }
    return 0;
}

static int may_post_first(struct ptsc_request *r)
{
    if (r->deferred) {
        int done = 0;
        if (ptsc__gpu_event_done(r->ev, &done) != PTSC_OK || !done)
            return 0; /* an event error shows again on the next pass */
        r->deferred = 0;
    }
    /* A matched receive's order is settled. */
    if (r->is_recv && (r->msg != MPI_MESSAGE_NULL || r->first || r->framed))
        return 1;
    return !earlier_waiting(r);
}

/* ------------------------------------------------------------------------ */
/* Sends                                                                     */
/* ------------------------------------------------------------------------ */

/* The first part of a framed host message in place, no copy: the header,
 * then the first `len` bytes of the user's buffer. */
static int make_first_type(struct ptsc_request *r, size_t len)
{
    int lens[2] = {PTSC__HDR_BYTES, (int)len};
    MPI_Aint disp[2];
    MPI_Datatype types[2] = {MPI_BYTE, MPI_BYTE};
    MPI_Get_address(&r->hdr, &disp[0]);
    MPI_Get_address(r->user, &disp[1]);
    if (r->first_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&r->first_type);
    int mrc = MPI_Type_create_struct(2, lens, disp, types, &r->first_type);
    if (mrc == MPI_SUCCESS)
        mrc = MPI_Type_commit(&r->first_type);
    return mrc == MPI_SUCCESS ? PTSC_OK : ptsc__err_mpi(mrc, "ptsc: header datatype");
}

static void piece_addr(const struct ptsc_request *r, int k, ptsc__addr_t *a)
{
    if (k == 0) {
        *a = r->a;
        return;
    }
    int me = r->ctx->index;
    if (r->is_recv)
        ptsc__lanes_cont_addr(r->thread, me, r->src_rank, r->id, a);
    else
        ptsc__lanes_cont_addr(me, r->thread, r->rank, r->id, a);
}

/* Continuation pieces are addressed by id modulo the id space (lanes.c). A
 * framed send posts its first part only while no earlier framed message of
 * the same channel with the same address is in flight (not complete: its
 * last piece goes with MPI_Issend, so complete means the receiver matched
 * all its pieces). A receive that matched a first part then finds on its
 * continuation address only the pieces of its own message. */
static int id_busy(const struct ptsc_request *r)
{
    unsigned space = (unsigned)ptsc__g.tag_max + 1;
    for (const struct ptsc_request *q = r->ctx->eng.active; q && q != r; q = q->anext)
        if (!q->is_recv && q->framed && !q->whole && q->state != R_DONE && q->rank == r->rank &&
            q->thread == r->thread && q->id % space == r->id % space)
            return 1;
    return 0;
}

/* A framed send whose continuation address is taken (id_busy) goes whole:
 * header and data in one MPI message, which needs no address of its own.
 * Waiting instead could wait forever: the message holding the address is
 * in flight, and the receiver may take it only after this one (MPI lets it
 * take a thread's messages of different tags in any order; a burst longer
 * than the id space is then enough). The receiver tells a whole message by
 * its size (above the first part's). Staged, it is copied into ordinary
 * memory, as MPI would buffer it; on the host it goes in place. */
static int go_whole(struct ptsc_request *r)
{
    if (r->total > (size_t)INT_MAX - PTSC__HDR_BYTES)
        return PTSC_OK; /* beyond one MPI count: wait for the address */
    r->whole = 1;
    r->npieces = 1;
    return r->staged ? PTSC_OK : make_first_type(r, r->total);
}

/* Whether every send slot is held by a first part that MPI holds until the
 * receiver matches it (continuation pieces hold slots only for messages
 * whose first part the receiver took, by a receive or a probe, which posts
 * their pieces at once, so they always complete). The receiver may take
 * those messages in any order (they are all in flight, as far as MPI is
 * concerned), so a send that waited for one of these slots could wait
 * forever. */
static int send_ring_stuck(ptsc_ctx_t *ctx)
{
    int held = 0;
    for (struct ptsc_request *q = ctx->eng.active; q; q = q->anext)
        if (!q->is_recv && q->staged && q->state == R_RUN && q->pc[0].slot && q->pc[0].st == P_MPI)
            held++;
    return held >= ctx->ring[PTSC__RING_SEND].n;
}

/* Stage piece k outside the ring, in ordinary memory, when the ring is
 * stuck (above). The copy is synchronous: it waits for the thread's stream.
 * Pinned memory stays bounded; this memory is what MPI itself would buffer. */
/* Copy n bytes between the caller's buffer and memory that is freed or
 * reused right after: through the thread's stream and waited for when the
 * device must copy (`gpu`, and a device is there), with memcpy otherwise. */
static int copy_now(ptsc_ctx_t *ctx, void *dst, const void *src, size_t n, int gpu)
{
    if (!gpu || ptsc__g.ndevices == 0 || n == 0) {
        if (n)
            memcpy(dst, src, n);
        return PTSC_OK;
    }
    ctx->eng.queued++;
    int rc = ptsc__gpu_copy_async(dst, src, n, ctx->eng.qstream);
    return rc == PTSC_OK ? ptsc__gpu_stream_sync(ctx->eng.qstream) : rc;
}

static int overflow_copy(struct ptsc_request *r, piece_t *p, size_t off, size_t len, int hdr)
{
    ptsc_ctx_t *ctx = r->ctx;
    if (!(p->scratch = malloc(len + (size_t)hdr + 1)))
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc send: %zu-byte overflow buffer", len + (size_t)hdr);
    if (hdr)
        memcpy(p->scratch, &r->hdr, PTSC__HDR_BYTES);
    p->st = P_COPY;
    ptsc__count_staged(ctx, len);
    return copy_now(ctx, p->scratch + hdr, r->user + off, len, 1);
}

/* Advance send piece k; *moved = 1 when its state changed. */
static void send_step(struct ptsc_request *r, int k, int *moved)
{
    piece_t *p = &r->pc[k];
    ptsc_ctx_t *ctx = r->ctx;
    size_t off, len;
    piece_range(r, k, &off, &len);
    int hdr = r->framed && k == 0 ? PTSC__HDR_BYTES : 0, rc = PTSC_OK;
    if (k == 0 && p->st == P_IDLE && r->framed && !r->whole && !earlier_waiting(r) && id_busy(r)) {
        if ((rc = go_whole(r)) != PTSC_OK)
            goto out;
        piece_range(r, k, &off, &len);
    }
    if (p->st == P_IDLE && r->staged) {
        /* First parts take slots in their channel's order, or a later one
         * could hold the slot an earlier one needs to go first. Continuation
         * pieces take slots only once the receiver matched the message (its
         * first part went with MPI_Issend and completed): until then the
         * receiver may want other messages first, and those need slots. */
        if (k == 0 && (earlier_waiting(r) || (r->framed && !r->whole && id_busy(r))))
            return;
        if (k > 0 && r->pc[0].st != P_DONE)
            return;
        if (r->whole) {
            rc = overflow_copy(r, p, off, len, hdr);
            *moved = 1;
            goto out;
        }
        if ((rc = ptsc__ring_get(ctx, PTSC__RING_SEND, !hdr, &p->slot)) != PTSC_OK)
            goto out;
        if (!p->slot) {
            if (!send_ring_stuck(ctx))
                return; /* a slot frees up soon */
            rc = overflow_copy(r, p, off, len, hdr);
            *moved = 1;
            goto out;
        }
        if (hdr)
            memcpy(p->slot->host, &r->hdr, PTSC__HDR_BYTES);
        p->st = P_COPY;
        *moved = 1;
        rc = ptsc__ring_copy(ctx, p->slot, p->slot->host + hdr, r->user + off, len, PTSC__COPY_RECORD);
        if (rc != PTSC_OK || ptsc__g.ndevices > 0)
            goto out; /* a device copy just queued has not run: ask on a later pass */
    }
    if (p->st == P_COPY && p->slot) {
        int done = 0;
        if ((rc = ptsc__ring_done(ctx, p->slot, &done)) != PTSC_OK || !done)
            goto out;
    }
    if ((p->st == P_IDLE || p->st == P_COPY) && k == r->nposted &&
        (k > 0 || (may_post_first(r) && !(r->framed && !r->whole && id_busy(r))))) {
        ptsc__addr_t a;
        piece_addr(r, k, &a);
        int mrc;
        if (r->framed && k > 0 && k == r->npieces - 1) /* the last piece: see id_busy */
            mrc = MPI_Issend(r->staged ? (p->slot ? p->slot->host : p->scratch) : r->user + off, (int)len,
                             MPI_BYTE, a.rank, a.tag, a.comm, &p->mreq);
        else if (r->staged && hdr)
            mrc = MPI_Issend(p->slot ? p->slot->host : p->scratch, (int)(len + hdr), MPI_BYTE, a.rank, a.tag,
                             a.comm, &p->mreq);
        else if (r->staged)
            mrc = MPI_Isend(p->slot ? p->slot->host : p->scratch, (int)(len + hdr), MPI_BYTE, a.rank, a.tag,
                            a.comm, &p->mreq);
        else if (!r->framed)
            mrc = MPI_Isend(r->user, r->count, r->type, a.rank, a.tag, a.comm, &p->mreq);
        else if (k == 0)
            mrc = MPI_Isend(MPI_BOTTOM, 1, r->first_type, a.rank, a.tag, a.comm, &p->mreq);
        else
            mrc = MPI_Isend(r->user + off, (int)len, MPI_BYTE, a.rank, a.tag, a.comm, &p->mreq);
        if (mrc != MPI_SUCCESS) {
            rc = ptsc__err_mpi(mrc, "ptsc send");
            goto out;
        }
        p->st = P_MPI;
        r->nposted++;
        *moved = 1;
    }
    if (p->st == P_MPI) {
        int flag = 0, mrc = MPI_Test(&p->mreq, &flag, MPI_STATUS_IGNORE);
        if (mrc != MPI_SUCCESS) {
            rc = ptsc__err_mpi(mrc, "ptsc send");
            goto out;
        }
        if (flag) {
            ptsc__ring_put(p->slot);
            p->slot = NULL;
            free(p->scratch);
            p->scratch = NULL;
            p->st = P_DONE;
            r->ndone++;
            *moved = 1;
        }
    }
out:
    if (rc != PTSC_OK)
        fail(r, rc);
}

/* ------------------------------------------------------------------------ */
/* Receives                                                                  */
/* ------------------------------------------------------------------------ */

/* Bytes of piece k that land in the user's buffer (what fits the capacity). */
static size_t piece_fit(const struct ptsc_request *r, size_t off, size_t len)
{
    if (!r->contig || off >= r->bytes)
        return 0;
    return r->bytes - off < len ? r->bytes - off : len;
}

/* A framed first part arrived (header at `h`): learn the message's shape. */
static int got_header(struct ptsc_request *r, const hdr_t *h)
{
    if (h->magic != PTSC__MAGIC || h->total <= chunk() ||
        (r->whole && h->total != r->first_n - PTSC__HDR_BYTES))
        return ptsc__err(PTSC_ERR_INTERNAL,
                         "ptsc receive: a %zu-byte first part from rank %d is not a ptsc frame (do all ranks "
                         "use the same PTSC_STAGING_CHUNK?)",
                         r->first_n, r->src_rank);
    r->hdr = *h;
    r->total = h->total;
    r->id = h->id;
    size_t n = r->whole ? 1 : (r->total + chunk() - 1) / chunk();
    if (n > (size_t)1 << 30)
        return ptsc__err(PTSC_ERR_UNSUPPORTED, "ptsc receive: %zu pieces", n);
    piece_t first = r->pc[0];
    int rc = set_pieces(r, (int)n);
    r->pc[0] = first;
    if (rc == PTSC_OK && r->total > r->bytes && !r->contig && !(r->pack = malloc(r->bytes ? r->bytes : 1)))
        rc = ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc receive: %zu bytes to unpack", r->bytes);
    else if (rc == PTSC_OK && r->total > r->bytes)
        rc = ptsc__err(PTSC_ERR_TRUNCATE,
                       "ptsc receive: a %zu-byte message from rank %d thread %d does not fit the %zu-byte "
                       "receive buffer (the message was drained; the channel is intact)",
                       (size_t)r->total, r->src_rank, r->thread, r->bytes);
    else if (rc == PTSC_OK && !r->contig)
        rc = ptsc__err(PTSC_ERR_UNSUPPORTED,
                       "ptsc receive: a %zu-byte framed message into a non-contiguous datatype (receive into "
                       "contiguous memory and unpack)",
                       (size_t)r->total);
    return rc;
}

/* The whole elements of the first `len` bytes of a message (as bytes: a
 * homogeneous job's data in type order), unpacked into a non-contiguous
 * host receive, as MPI fills a receive that a longer message truncated. */
static int unpack_first(struct ptsc_request *r, const char *data, size_t len)
{
    MPI_Count size = 0;
    if (r->cls != PTSC_MEM_HOST && r->cls != PTSC_MEM_PINNED)
        return PTSC_OK;
    if (MPI_Type_size_x(r->type, &size) != MPI_SUCCESS || size <= 0)
        return PTSC_OK;
    size_t n = len / (size_t)size < (size_t)r->count ? len / (size_t)size : (size_t)r->count;
    int pos = 0,
        mrc = MPI_Unpack(data, (int)(n * (size_t)size), &pos, r->user, (int)n, r->type, ptsc__g.lanes[0]);
    return mrc == MPI_SUCCESS ? PTSC_OK
                              : ptsc__err_mpi(mrc, "ptsc receive: MPI_Unpack of a truncated message");
}

/* A non-contiguous receive: a plain message taken beside the buffer (it
 * did not fit) is unpacked; a truncated framed one gathers its first bytes
 * (r->pack), unpacked when it completes. */
static int deliver_noncontig(struct ptsc_request *r, int k, const char *data, size_t len)
{
    if (!r->framed)
        return unpack_first(r, data, len);
    size_t off = (size_t)k * chunk();
    if (r->pack && off < r->bytes)
        memcpy(r->pack + off, data, r->bytes - off < len ? r->bytes - off : len);
    return PTSC_OK;
}

/* Hand the received part of piece k to the user's buffer. */
static int recv_deliver(struct ptsc_request *r, int k, const char *data, size_t len)
{
    if (!r->contig)
        return deliver_noncontig(r, k, data, len);
    size_t off = (size_t)k * chunk(), fit = piece_fit(r, off, len);
    if (!fit)
        return PTSC_OK;
    piece_t *p = &r->pc[k];
    /* The event after a message's last copy out of a slot is recorded only
     * when someone asks (ring.c): in a ping-pong the thread's next send
     * takes that slot in stream order and never asks. Earlier pieces'
     * slots are wanted back by the later pieces of the same message. */
    if (p->slot)
        return ptsc__ring_copy(r->ctx, p->slot, r->user + off, data, fit,
                               k == r->npieces - 1 && !r->ctx->agent.driving ? PTSC__COPY_LAZY
                                                                             : PTSC__COPY_RECORD);
    /* From scratch memory (a message that came beside the buffer), freed
     * next; a direct device receive needs the device to copy. */
    return copy_now(r->ctx, r->user + off, data, fit, r->cls == PTSC_MEM_DEVICE);
}

/* Post the receive of piece k. */
static int recv_post(struct ptsc_request *r, int k)
{
    piece_t *p = &r->pc[k];
    ptsc__addr_t a;
    piece_addr(r, k, &a);
    int framed0 = r->framed && k == 0, mrc;
    size_t off = 0, len = r->first_n;
    if (!framed0 && r->framed)
        piece_range(r, k, &off, &len);
    void *buf = NULL;
    int count = 0;
    MPI_Datatype type = MPI_BYTE;
    if (r->staged) {
        /* MPI is never given a count below the message's size (receives match first):
         * a plain message larger than the slot goes to ordinary memory. */
        if (p->slot) {
            buf = p->slot->host;
        } else { /* larger than a slot (recv_step took none) */
            if (!(p->scratch = malloc(len)))
                return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc receive: %zu-byte message", len);
            buf = p->scratch;
        }
        count = (int)len;
    } else if (!r->framed && r->msg != MPI_MESSAGE_NULL && r->first_n > r->bytes) {
        /* Matched and too large: received whole beside the buffer, so that
         * nothing is written past it (see self_or_any). */
        if (!(p->scratch = malloc(r->first_n)))
            return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc receive: %zu-byte message", r->first_n);
        buf = p->scratch;
        count = (int)r->first_n;
    } else if (!r->framed) {
        buf = r->user;
        count = r->count;
        type = r->type;
    } else if (framed0 && r->contig && r->bytes >= len - PTSC__HDR_BYTES) {
        int rc = make_first_type(r, len - PTSC__HDR_BYTES); /* the first chunk, or a whole message */
        if (rc != PTSC_OK)
            return rc;
        buf = MPI_BOTTOM;
        count = 1;
        type = r->first_type;
    } else if (!framed0 && piece_fit(r, off, len) == len) {
        buf = r->user + off;
        count = (int)len;
    } else {
        if (!(p->scratch = malloc(len ? len : 1)))
            return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc receive: %zu-byte piece", len);
        buf = p->scratch;
        count = (int)len;
    }
    if (k == 0 && r->msg != MPI_MESSAGE_NULL)
        mrc = MPI_Imrecv(buf, count, type, &r->msg, &p->mreq);
    else if (p->msg != MPI_MESSAGE_NULL)
        mrc = MPI_Imrecv(buf, count, type, &p->msg, &p->mreq);
    else
        mrc = MPI_Irecv(buf, count, type, a.rank, a.tag, a.comm, &p->mreq);
    return mrc == MPI_SUCCESS ? PTSC_OK : ptsc__err_mpi(mrc, "ptsc receive");
}

/* Piece k's MPI receive completed with status `st`. */
static int recv_arrived(struct ptsc_request *r, int k, const MPI_Status *st)
{
    piece_t *p = &r->pc[k];
    size_t n = status_bytes(st);
    int rc = PTSC_OK;
    if (k == 0 && r->src_rank < 0)
        r->src_rank = st->MPI_SOURCE;
    if (k == 0 && !r->framed) {
        r->total = n;
        if (r->staged && p->scratch) {
            /* Only a truncated message lands here; the scratch memory is
             * freed next, so its copy completes first. */
            rc = copy_now(r->ctx, r->user, p->scratch, piece_fit(r, 0, n), 1);
        } else if (r->staged) {
            rc = recv_deliver(r, 0, p->slot->host, n);
        } else if (p->scratch) {
            rc = recv_deliver(r, 0, p->scratch, n);
        }
        if (rc == PTSC_OK && n > r->bytes)
            rc = ptsc__err(PTSC_ERR_TRUNCATE,
                           "ptsc receive: a %zu-byte message does not fit the %zu-byte buffer", n, r->bytes);
        return rc;
    }
    if (k == 0) {
        const char *data;
        hdr_t h;
        if (r->staged || p->scratch) {
            const char *base = p->scratch ? p->scratch : p->slot->host;
            memcpy(&h, base, sizeof h);
            data = base + PTSC__HDR_BYTES;
        } else {
            h = r->hdr; /* received in place through the header datatype */
            data = NULL;
        }
        int hrc = got_header(r, &h);
        if (hrc == PTSC_ERR_INTERNAL || hrc == PTSC_ERR_NO_MEMORY)
            return hrc;
        if (hrc != PTSC_OK)
            fail(r, hrc); /* truncation or layout: keep draining the pieces */
        if (data) {
            size_t off, len;
            piece_range(r, 0, &off, &len);
            rc = recv_deliver(r, 0, data, len);
        }
        return rc;
    }
    if (p->scratch) /* beside the buffer, or a probed message's piece */
        return recv_deliver(r, k, p->scratch, n);
    if (r->staged)
        return recv_deliver(r, k, p->slot->host, n);
    return PTSC_OK;
}

/* Advance receive piece k (its message is matched). */
static void recv_step(struct ptsc_request *r, int k, int *moved)
{
    piece_t *p = &r->pc[k];
    int rc = PTSC_OK;
    if (p->st == P_IDLE) {
        if (k != r->nposted || (k == 0 && !may_post_first(r)))
            return;
        /* A slot is taken only for data that was sent (its part matched):
         * slots never wait on a peer, so the two rings cannot deadlock. */
        if (r->staged && k > 0 && p->msg == MPI_MESSAGE_NULL) {
            ptsc__addr_t a;
            MPI_Status st;
            int flag = 0;
            piece_addr(r, k, &a);
            int mrc = MPI_Improbe(a.rank, a.tag, a.comm, &flag, &p->msg, &st);
            if (mrc != MPI_SUCCESS) {
                rc = ptsc__err_mpi(mrc, "ptsc receive: MPI_Improbe");
                goto out;
            }
            if (!flag)
                return;
        }
        /* A first part larger than a slot (a whole frame, or a plain
         * message above the chunk) goes to ordinary memory: no slot. */
        int slotted = r->staged && !(k == 0 && r->first_n > chunk() + PTSC__HDR_BYTES);
        if (slotted && (rc = ptsc__ring_get(r->ctx, PTSC__RING_RECV, 0, &p->slot)) != PTSC_OK)
            goto out;
        if (slotted && !p->slot)
            return;
        if ((rc = recv_post(r, k)) != PTSC_OK)
            goto out;
        p->st = P_MPI;
        r->nposted++;
        *moved = 1;
    }
    if (p->st == P_MPI) {
        int flag = 0;
        MPI_Status st;
        int mrc = MPI_Test(&p->mreq, &flag, &st);
        if (mrc != MPI_SUCCESS) {
            rc = mpi_status(mrc, "ptsc receive");
            if (rc == PTSC_ERR_TRUNCATE) /* plain: MPI consumed the message */
                r->total = r->bytes;
            if (k == 0 && r->src_rank < 0)
                r->src_rank = st.MPI_SOURCE;
            ptsc__ring_put(p->slot); /* nothing was copied from it */
            p->slot = NULL;
            p->st = P_DONE;
            r->ndone++;
            *moved = 1;
            goto out;
        }
        if (!flag)
            return;
        *moved = 1;
        int cancelled = 0;
        MPI_Test_cancelled(&st, &cancelled);
        if (cancelled) { /* ptsc_cancel or thread exit: no message came */
            ptsc__ring_put(p->slot);
            p->slot = NULL;
            p->st = P_DONE;
            r->ndone++;
            rc = PTSC_ERR_CANCELLED;
            goto out;
        }
        rc = recv_arrived(r, k, &st);
        p = &r->pc[k]; /* the header may have grown the piece array */
        free(p->scratch);
        p->scratch = NULL;
        p->st = P_COPY;
        if (rc != PTSC_OK)
            goto out;
    }
    if (p->st == P_COPY) {
        /* A device receive is complete once its copy is queued on the
         * thread's stream; the slot returns when the copy ran. Managed
         * memory may be read by the host at once: wait for it. */
        if (p->slot && r->cls == PTSC_MEM_MANAGED && (rc = ptsc__ring_wait(r->ctx, p->slot)) != PTSC_OK)
            goto out;
        if (p->slot)
            ptsc__ring_put_after(p->slot);
        p->slot = NULL;
        p->st = P_DONE;
        r->ndone++;
        *moved = 1;
    }
out:
    if (rc != PTSC_OK) {
        fail(r, rc);
        if (p->st == P_COPY) {
            /* The copy may still be queued: the slot returns after it. */
            if (p->slot)
                ptsc__ring_put_after(p->slot);
            p->slot = NULL;
            p->st = P_DONE;
            r->ndone++;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Matching (framed jobs)                                                    */
/* ------------------------------------------------------------------------ */

static int spec_match(int rank, int thread, int tag, int src_rank, int src_thread, int src_tag)
{
    return thread == src_thread && tag == src_tag && (rank == PTSC_ANY_RANK || rank == src_rank);
}

/* The first part of a message is known: shape the request from its size. */
static int matched(struct ptsc_request *r, MPI_Message msg, size_t n, int src, char *first)
{
    r->msg = msg;
    r->first_n = n;
    r->src_rank = src;
    r->first = first;
    r->framed = ptsc__g.framed && n > chunk();
    r->whole = r->framed && n > chunk() + PTSC__HDR_BYTES; /* see go_whole */
    if (r->framed && n < chunk() + PTSC__HDR_BYTES)
        return ptsc__err(PTSC_ERR_INTERNAL,
                         "ptsc receive: a %zu-byte first part from rank %d is neither a plain message nor a "
                         "frame (do all ranks use the same PTSC_STAGING_CHUNK?)",
                         n, src);
    if (!r->framed && !r->staged)
        return PTSC_OK;
    if (r->framed && !r->staged && r->cls != PTSC_MEM_HOST && r->cls != PTSC_MEM_PINNED)
        return ptsc__err(PTSC_ERR_INTERNAL, "ptsc receive: framed message into an unstaged device buffer");
    r->total = r->framed ? 0 : n;
    return PTSC_OK;
}

/* Receive a matched message of n bytes and drop it, so that its sender
 * completes. */
static void drop_message(MPI_Message *msg, size_t n)
{
    char *tmp = malloc(n ? n : 1);
    if (tmp)
        MPI_Mrecv(tmp, (int)n, MPI_BYTE, msg, MPI_STATUS_IGNORE);
    free(tmp);
}

/* Free a stash entry; pieces still posted are received and dropped (their
 * sender completes only once they are). */
static void stash_free(struct ptsc__stash *s)
{
    if (s->msg != MPI_MESSAGE_NULL)
        drop_message(&s->msg, s->n);
    for (int k = 1; k < s->npieces; k++) {
        if (s->pc[k].st == P_MPI)
            MPI_Wait(&s->pc[k].mreq, MPI_STATUS_IGNORE);
        free(s->pc[k].scratch);
    }
    free(s->pc);
    free(s->first);
    free(s);
}

/* A probe received the first part of a framed message into s->first: post
 * the receives of its other pieces, into scratch memory. */
static int stash_post_pieces(ptsc_ctx_t *ctx, struct ptsc__stash *s)
{
    hdr_t h;
    memcpy(&h, s->first, sizeof h);
    if (h.magic != PTSC__MAGIC || h.total <= chunk() || s->n > chunk() + PTSC__HDR_BYTES)
        return PTSC_OK; /* not pieced: a whole message, or a bad one for the receive to report */
    size_t n = (size_t)((h.total + chunk() - 1) / chunk());
    if (n > (size_t)1 << 30 || !(s->pc = calloc(n, sizeof *s->pc)))
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc probe: %zu message pieces", n);
    s->npieces = (int)n;
    for (size_t k = 1; k < n; k++) {
        size_t off = k * chunk(), len = h.total - off < chunk() ? h.total - off : chunk();
        ptsc__addr_t a;
        ptsc__lanes_cont_addr(s->src_thread, ctx->index, s->src_rank, h.id, &a);
        piece_t *p = &s->pc[k];
        p->msg = MPI_MESSAGE_NULL;
        if (!(p->scratch = malloc(len)))
            return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc probe: %zu-byte piece", len);
        int mrc = MPI_Irecv(p->scratch, (int)len, MPI_BYTE, a.rank, a.tag, a.comm, &p->mreq);
        if (mrc != MPI_SUCCESS)
            return ptsc__err_mpi(mrc, "ptsc probe: a piece");
        p->st = P_MPI;
    }
    return PTSC_OK;
}

static struct ptsc__stash *stash_take(ptsc_ctx_t *ctx, int rank, int thread, int tag, int remove)
{
    for (struct ptsc__stash **pp = &ctx->eng.stash; *pp; pp = &(*pp)->next) {
        struct ptsc__stash *s = *pp;
        if (spec_match(rank, thread, tag, s->src_rank, s->src_thread, s->tag)) {
            if (remove)
                *pp = s->next;
            return s;
        }
    }
    return NULL;
}

/* A first part received by a probe: treat piece 0 as arrived; the probe's
 * receives of the other pieces become the request's. */
static int take_first(struct ptsc_request *r, struct ptsc__stash *s)
{
    piece_t *p = &r->pc[0];
    hdr_t h;
    memcpy(&h, r->first, sizeof h);
    p->st = P_COPY;
    r->nposted = 1;
    int rc = got_header(r, &h);
    if (rc == PTSC_ERR_INTERNAL || rc == PTSC_ERR_NO_MEMORY)
        return rc;
    if (rc != PTSC_OK)
        fail(r, rc);
    for (int k = 1; k < r->npieces && k < s->npieces; k++) {
        r->pc[k] = s->pc[k];
        s->pc[k].st = P_DONE;
        s->pc[k].scratch = NULL;
        r->nposted++;
    }
    /* Delivered at once: this path is rare (a probe of a framed message). */
    size_t off, len;
    piece_range(r, 0, &off, &len);
    size_t fit = piece_fit(r, 0, len);
    const char *data = r->first + PTSC__HDR_BYTES;
    if (!r->contig)
        return deliver_noncontig(r, 0, data, len);
    return copy_now(r->ctx, r->user, data, fit, r->staged);
}

/* Try to match a waiting receive; *moved = 1 when it did. */
static int try_match(struct ptsc_request *r, int *moved)
{
    ptsc_ctx_t *ctx = r->ctx;
    struct ptsc__stash *s = stash_take(ctx, r->rank, r->thread, r->tag, 1);
    int rc;
    if (s) {
        rc = matched(r, s->msg, s->n, s->src_rank, s->first);
        s->msg = MPI_MESSAGE_NULL; /* both the request's now */
        s->first = NULL;
        if (rc == PTSC_OK && r->framed && r->first) /* a probe's: received */
            rc = take_first(r, s);
        stash_free(s);
    } else {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        int mrc = MPI_Improbe(r->a.rank, r->a.tag, r->a.comm, &flag, &msg, &st);
        if (mrc != MPI_SUCCESS)
            return ptsc__err_mpi(mrc, "ptsc receive: MPI_Improbe");
        if (!flag)
            return PTSC_OK;
        rc = matched(r, msg, status_bytes(&st), st.MPI_SOURCE, NULL);
    }
    *moved = 1;
    r->state = R_RUN;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

/* A finished request stays on the active list until the program completes
 * it (wait or test), so that the context always knows what it holds. */
static void finish_if_done(struct ptsc_request *r)
{
    if (r->state == R_RUN && r->ndone == r->npieces)
        r->state = R_DONE;
}

/* After an error, pieces not yet posted are never posted, posted receives
 * are cancelled and the request completes when MPI let go of everything. */
static void abandon(struct ptsc_request *r)
{
    for (int k = 0; k < r->npieces; k++) {
        piece_t *p = &r->pc[k];
        if (p->st == P_MPI && p->mreq != MPI_REQUEST_NULL) {
            if (r->is_recv)
                MPI_Cancel(&p->mreq);
            MPI_Wait(&p->mreq, MPI_STATUS_IGNORE);
        }
        if (p->msg != MPI_MESSAGE_NULL) {
            size_t off, len;
            piece_range(r, k, &off, &len);
            drop_message(&p->msg, len);
        }
        if (p->slot) {
            (void)ptsc__ring_wait(r->ctx, p->slot);
            ptsc__ring_put(p->slot);
            p->slot = NULL;
        }
        free(p->scratch);
        p->scratch = NULL;
        p->st = P_DONE;
    }
    if (r->msg != MPI_MESSAGE_NULL) /* matched but never received: take it off MPI's hands */
        drop_message(&r->msg, r->first_n);
    r->ndone = r->npieces;
    r->state = R_RUN;
    finish_if_done(r);
}

/* A collective's request: its schedule, or MPI's request, moves on; once
 * complete, its results are in place and MPI holds nothing of it. */
static void coll_step(struct ptsc_request *r, int *moved)
{
    int rc = PTSC_OK;
    if (r->ops->progress(r->op, moved, &rc)) {
        fail(r, rc);
        r->state = R_DONE;
    }
}

/* A message: match a receive, then move each piece. */
static void msg_step(struct ptsc_request *r, int *moved)
{
    if (r->state == R_MATCH) {
        if (earlier_waiting(r))
            return;
        int rc = try_match(r, moved);
        if (rc != PTSC_OK) {
            fail(r, rc);
            abandon(r);
            return;
        }
        if (r->state == R_MATCH)
            return;
    }
    for (int k = 0; k < r->npieces; k++) {
        if (r->pc[k].st == P_DONE)
            continue;
        if (r->is_recv)
            recv_step(r, k, moved);
        else
            send_step(r, k, moved);
        /* Truncation and layout errors keep draining; others stop. */
        if (r->rc != PTSC_OK && r->rc != PTSC_ERR_TRUNCATE && r->rc != PTSC_ERR_UNSUPPORTED) {
            abandon(r);
            return;
        }
        if (r->pc[k].st == P_IDLE && k >= r->nposted)
            break; /* later pieces wait for this one (slots, order) */
    }
    finish_if_done(r);
}

/* A freed send that finished leaves the list here: nobody waits for it, so
 * an error it met can only be logged. */
static void release_freed(struct ptsc_request *r)
{
    if (r->rc != PTSC_OK)
        ptsc__log(PTSC__LOG_WARN,
                  "a send freed with ptsc_request_free (thread %d to rank %d thread %d, tag %d) "
                  "failed: %s",
                  r->ctx->index, r->rank, r->thread, r->tag, ptsc_status_name(r->rc));
    active_remove(r);
    req_put(r);
}

static int progress_pass(ptsc_ctx_t *ctx)
{
    int moved = 0;
    struct ptsc_request *r = ctx->eng.active, *next;
    for (; r; r = next) {
        next = r->anext;
        if (r->state == R_DONE)
            continue;
        r->kind->step(r, &moved);
        if (r->freed && r->state == R_DONE)
            release_freed(r);
    }
    return moved;
}

static int engine_progress(ptsc_ctx_t *ctx) { return ctx->eng.active ? progress_pass(ctx) : 0; }

/* ------------------------------------------------------------------------ */
/* Starting                                                                  */
/* ------------------------------------------------------------------------ */

/* Every receive matches its message first (a matched probe), even where the
 * job does not frame, so that a message larger than the receive
 * is taken beside the buffer and reported as a truncation. Open MPI 4.1.4
 * writes such a message past the end of the receive buffer when it travels
 * by its single-copy protocol (AddressSanitizer: heap-buffer-overflow in
 * mca_btl_vader_get_cma / mca_btl_self under
 * mca_pml_ob1_recv_request_get_frag, from a plain MPI_Recv too); MPICH 4.0
 * reports the truncation of a completed request through MPI_COMM_WORLD's
 * error handler, which aborts. Always on: there is no switch to turn it off
 * (docs/design.md). */

/* The path of a message and whether the engine takes it; nothing changes. */
static int admit(const ptsc_ctx_t *ctx, int is_recv, const void *buf, MPI_Datatype type, size_t bytes,
                 const char *call, ptsc_memclass_t *cls, int *contig, int *staged)
{
    *cls = PTSC_MEM_HOST;
    int rc = buf ? ptsc__mem_classify(buf, cls) : PTSC_OK;
    if (rc != PTSC_OK)
        return rc;
    *contig = ptsc__type_is_contiguous(type);
    *staged = choose_staged(ctx, *cls, bytes, *contig);
    if (*staged && !*contig)
        return ptsc__err(
            PTSC_ERR_UNSUPPORTED,
            "%s: a device buffer with a non-contiguous datatype cannot be staged (pack it first, "
            "or use a CUDA-aware MPI with PTSC_STAGING=auto)",
            call);
    int framed_send = !is_recv && ptsc__g.framed && bytes > chunk();
    if (framed_send && !*staged && !*contig)
        return ptsc__err(PTSC_ERR_UNSUPPORTED,
                         "%s: a message above PTSC_STAGING_CHUNK (%zu bytes) with a non-contiguous datatype "
                         "while staging is on (pack it first)",
                         call, chunk());
    /* Pieces are counted in an int. */
    if (framed_send && (bytes - 1) / chunk() >= (size_t)INT_MAX)
        return ptsc__err(PTSC_ERR_COUNT,
                         "%s: a %zu-byte message would travel in more than INT_MAX pieces of "
                         "PTSC_STAGING_CHUNK=%zu bytes",
                         call, bytes, chunk());
    return PTSC_OK;
}

int ptsc__engine_admit(const ptsc_ctx_t *ctx, int is_recv, const void *buf, MPI_Datatype type, size_t bytes,
                       const char *call)
{
    ptsc_memclass_t cls;
    int contig, staged;
    return admit(ctx, is_recv, buf, type, bytes, call, &cls, &contig, &staged);
}

static int engine_start(ptsc_ctx_t *ctx, int is_recv, void *buf, int count, MPI_Datatype type, size_t bytes,
                        int rank, int thread, int tag, const char *call, struct ptsc_request **out)
{
    ptsc_memclass_t cls;
    int contig, staged;
    int rc = admit(ctx, is_recv, buf, type, bytes, call, &cls, &contig, &staged);
    if (rc != PTSC_OK)
        return rc;
    int framed_send = !is_recv && ptsc__g.framed && bytes > chunk();
    engine_progress(ctx);
    struct ptsc_request *r = req_get(ctx);
    if (!r)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: request", call);
    r->kind = &msg_kind;
    /* A direct hand-over under the thread scope waits for an event instead
     * of blocking here (ptsc__sync_buffer_deferred). */
    if (!staged && cls != PTSC_MEM_HOST && !r->ev && ptsc__g.ndevices > 0)
        rc = ptsc__gpu_event_create(&r->ev);
    if (rc == PTSC_OK)
        rc = ptsc__sync_buffer_deferred(ctx, cls, staged, staged ? NULL : r->ev, &r->deferred, call);
    if (rc != PTSC_OK) {
        req_put(r);
        return rc;
    }
    r->is_recv = is_recv;
    r->staged = staged;
    r->user = buf;
    r->count = count;
    r->type = type;
    r->contig = contig;
    r->bytes = bytes;
    r->cls = cls;
    r->rank = rank;
    r->thread = thread;
    r->tag = tag;
    r->call = call;
    r->src_rank = is_recv ? (rank == PTSC_ANY_RANK ? -1 : rank) : ptsc__g.rank;
    r->npieces = 1;
    if (is_recv)
        ptsc__lanes_recv_addr(ctx->index, rank, thread, tag, &r->a);
    else
        ptsc__lanes_send_addr(ctx->index, rank, thread, tag, &r->a);
    if (!is_recv) {
        r->total = bytes;
        r->state = R_RUN;
        if (framed_send) {
            r->framed = 1;
            r->id = ctx->eng.next_id++;
            r->hdr = (hdr_t){.total = bytes, .id = r->id, .magic = PTSC__MAGIC};
            rc = set_pieces(r, (int)((bytes + chunk() - 1) / chunk()));
            if (rc == PTSC_OK && !staged)
                rc = make_first_type(r, chunk());
        }
        ctx->stats.sends++;
        ctx->stats.bytes_sent += bytes;
    } else {
        /* Without framing every message is plain: an unstaged receive is
         * posted now and MPI orders it; a staged one matches first, like
         * every receive of a framed job, so that it takes a slot only for a
         * message that was sent. */
        r->state = R_MATCH;
        ctx->stats.recvs++;
    }
    if (rc != PTSC_OK) {
        req_put(r);
        return rc;
    }
    ctx->eng.outstanding++;
    ctx->agent.hand_new = 1; /* leave(): the agent's stream must wait for what the owner queued until now */
    active_add(r);
    /* A pass in order, not a step of r alone: an earlier receive of the same
     * channel that found no message must match first. */
    progress_pass(ctx);
    *out = r;
    return PTSC_OK;
}

static int engine_start_ops(ptsc_ctx_t *ctx, const struct ptsc__req_ops *ops, void *op, int root,
                            size_t bytes, const char *call, struct ptsc_request **out)
{
    struct ptsc_request *r = req_get(ctx);
    if (!r)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: request", call);
    int rc = ops->begin(op);
    if (rc != PTSC_OK) {
        req_put(r);
        return rc;
    }
    /* No peer thread or tag: the point-to-point order never waits on it. */
    r->kind = &coll_kind;
    r->ops = ops;
    r->op = op;
    r->state = R_RUN;
    r->rank = root;
    r->thread = -1;
    r->tag = -1;
    r->bytes = bytes;
    r->call = call;
    ctx->eng.outstanding++;
    active_add(r);
    progress_pass(ctx);
    *out = r;
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* Completion                                                                */
/* ------------------------------------------------------------------------ */

static int complete(struct ptsc_request *r, ptsc_info_t *info)
{
    ptsc_ctx_t *ctx = r->ctx;
    int rc = r->rc;
    if (r->is_recv) {
        size_t got = r->total < r->bytes ? r->total : r->bytes;
        ctx->stats.bytes_recv += got;
        if (info)
            *info = (ptsc_info_t){r->src_rank, r->thread, r->tag, rc, got};
    }
    if (r->pack) {
        int urc = unpack_first(r, r->pack, r->bytes);
        rc = rc == PTSC_OK ? urc : rc;
    }
    if (rc != PTSC_OK && r->detail)
        ptsc__err_set_detail(r->detail);
    active_remove(r);
    if (!r->freed)
        ctx->eng.outstanding--;
    req_put(r);
    return rc;
}

static int engine_test(struct ptsc_request *r, int *done, ptsc_info_t *info)
{
    if (r->state != R_DONE)
        progress_pass(r->ctx);
    *done = r->state == R_DONE;
    return *done ? complete(r, info) : PTSC_OK;
}

static void enter(ptsc_ctx_t *ctx);
static void leave(ptsc_ctx_t *ctx);

/* Yielding on every idle poll costs a message a few microseconds (measured
 * on the H200: 64-256 KiB staged ping-pongs by hand lost 4-6 us per message
 * to a sched_yield per poll), so a waiting thread spins through short
 * waits and yields only once a wait has been idle for PTSC__SPIN_NS, which
 * keeps oversubscribed ranks (more threads than cores) moving. Past
 * PTSC__NAP_AFTER_NS it sleeps between polls, asking for a 64th of the
 * wait so far (16 to 50 us; with Linux's default timer slack of 50 us a
 * sleep lasts 65 to 100 us): threads that only ever yield starved the one
 * thread with work for seconds to minutes on an oversubscribed 2-core
 * machine (Linux 6.18; docs/design.md, "The stall of spinning threads"),
 * and a sleep both frees the core and puts the thread back in the
 * scheduler's queue afresh. Every caller is inside the engine section
 * (enter .. leave): the thread leaves it for the sleep, so that the agent
 * drives its work meanwhile instead of finding the index locked. */
static void idle(ptsc_ctx_t *ctx, int moved)
{
    if (moved) {
        ctx->eng.idle_since = 0;
        return;
    }
    uint64_t now = ptsc__now_ns();
    if (!ctx->eng.idle_since) {
        ctx->eng.idle_since = now;
        ptsc__ring_reclaim(ctx); /* off the critical path: see ring.c */
    } else if (now - ctx->eng.idle_since > PTSC__NAP_AFTER_NS) {
        leave(ctx);
        ptsc__nap_ns((now - ctx->eng.idle_since) / 64);
        enter(ctx);
    } else if (now - ctx->eng.idle_since > PTSC__SPIN_NS)
        sched_yield();
}

/* A wait whose only unfinished request is a one-piece staged send with its
 * copy to the slot queued has nothing else to drive: it blocks on the
 * copy's event (the driver spins on it) instead of polling it, which costs
 * an event query per pass (1.5-1.8 us on the H200) and sees the end later.
 * Multi-piece messages keep polling: their earlier pieces are in MPI's
 * hands meanwhile. An error of the event shows on the next pass's query. */
static void wait_lone_copy(struct ptsc_request *r)
{
    if (r->is_recv || !r->staged || r->npieces != 1 || r->pc[0].st != P_COPY || !r->pc[0].slot)
        return;
    for (struct ptsc_request *q = r->ctx->eng.active; q; q = q->anext)
        if (q != r && q->state != R_DONE)
            return;
    (void)ptsc__ring_wait(r->ctx, r->pc[0].slot);
}

static int engine_wait(struct ptsc_request *r, ptsc_info_t *info)
{
    ptsc_ctx_t *ctx = r->ctx;
    r->kind->wait_begin(r);
    while (r->state != R_DONE) {
        wait_lone_copy(r);
        idle(ctx, progress_pass(ctx));
    }
    ptsc__wait_end(ctx);
    ptsc__nvtx_pop();
    return complete(r, info);
}

ptsc_ctx_t *ptsc__request_ctx(const struct ptsc_request *r) { return r->ctx; }

int ptsc__request_stale(const struct ptsc_request *r)
{
    enter(r->ctx);
    int stale = r->state == R_FREE;
    leave(r->ctx);
    return stale;
}

int ptsc__request_mark(struct ptsc_request *r, int on)
{
    int was = r->listed; /* the owner's alone: the agent never reads it */
    r->listed = on;
    return was;
}

/* A receive that nothing matched yet (not even posted, or waiting for its
 * matched probe) completes at once as cancelled; one posted to MPI unmatched
 * (a job that neither frames nor guards) is cancelled in MPI, which decides:
 * it completes cancelled, or normally if a message matched it first. Sends
 * and matched receives are left to complete normally. */
static void msg_cancel(struct ptsc_request *r)
{
    if (!r->is_recv || r->state == R_DONE)
        return;
    if (unmatched(r)) {
        fail(r, PTSC_ERR_CANCELLED);
        r->ndone = r->npieces;
        r->state = R_RUN;
        finish_if_done(r);
    } else if (!r->framed && r->pc[0].st == P_MPI) {
        MPI_Cancel(&r->pc[0].mreq);
    }
}

static int engine_free(struct ptsc_request *r, int *kept, const char *call)
{
    *kept = 0;
    return r->state == R_DONE ? complete(r, NULL) : r->kind->free_early(r, kept, call);
}

static int coll_free_early(struct ptsc_request *r, int *kept, const char *call)
{
    *kept = 1;
    return ptsc__err(
        PTSC_ERR_PENDING,
        "%s: a collective in flight (%s) cannot be freed (its buffers are read and written until "
        "it completes); complete it with ptsc_wait or ptsc_test",
        call, r->call);
}

static int msg_free_early(struct ptsc_request *r, int *kept, const char *call)
{
    *kept = r->is_recv;
    if (r->is_recv)
        return ptsc__err(PTSC_ERR_PENDING,
                         "%s: a receive in flight cannot be freed (its buffer would be written at a time the "
                         "program cannot know); complete it with ptsc_wait or ptsc_test, or ptsc_cancel it",
                         call);
    r->freed = 1;
    r->ctx->eng.outstanding--;
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* Blocking calls without a request where the path allows                    */
/* ------------------------------------------------------------------------ */

/* Blocking calls with nothing of the thread in flight need no request
 * object: nothing else must progress meanwhile and no earlier message
 * orders them. A staged message of one piece then goes as a program writes
 * it by hand: the copy and a stream sync, one blocking MPI call, the copy
 * back queued on the stream (a request's event record, polled MPI calls
 * and progress passes cost a 64 KiB staged ping-pong 2-4 % on the H200).
 * Only for a thread alone in its rank: threads blocked in Open MPI's
 * blocking calls wait on each other's progress, which cost 8 threads of
 * staged traffic 97 % of their message rate (docs/design.md).
 * *done = 0 where it cannot (no slot is free now): the caller takes the
 * request's way. */
static int alone(void) { return atomic_load_explicit(&ptsc__g.nheld, memory_order_relaxed) == 1; }

static int send_staged_now(ptsc_ctx_t *ctx, const void *buf, size_t bytes, ptsc_memclass_t cls, int rank,
                           int thread, int tag, const char *call, int *done)
{
    ptsc__slot_t *s = NULL;
    int rc = ptsc__sync_buffer(ctx, cls, 1, call);
    if (rc == PTSC_OK)
        rc = ptsc__ring_get(ctx, PTSC__RING_SEND, 1, &s);
    if (rc != PTSC_OK || !s)
        return rc;
    *done = 1;
    if ((rc = ptsc__ring_copy(ctx, s, s->host, buf, bytes, PTSC__COPY_SYNC)) != PTSC_OK) {
        ptsc__ring_put_after(s);
        return rc;
    }
    ptsc__addr_t a;
    ptsc__lanes_send_addr(ctx->index, rank, thread, tag, &a);
    ptsc__nvtx_push_msg(call, rank, thread, tag, bytes, 1);
    ptsc__wait_begin(ctx, call, PTSC__WAIT_SEND, rank, thread, tag, bytes);
    int mrc = MPI_Send(s->host, (int)bytes, MPI_BYTE, a.rank, a.tag, a.comm);
    ptsc__wait_end(ctx);
    ptsc__nvtx_pop();
    ptsc__ring_put(s);
    if (mrc != MPI_SUCCESS)
        return ptsc__err_mpi(mrc, call);
    ctx->stats.sends++;
    ctx->stats.bytes_sent += bytes;
    return PTSC_OK;
}

static int engine_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                       int thread, int tag, const char *call)
{
    /* Nothing of this thread in flight, no framing: one plain MPI message
     * with no request object, from the caller's memory (host) or from a
     * ring slot (staged, one piece). */
    if (!ctx->eng.active && (!ptsc__g.framed || bytes <= chunk())) {
        ptsc_memclass_t cls = PTSC_MEM_HOST;
        int rc = buf ? ptsc__mem_classify(buf, &cls) : PTSC_OK, done = 0;
        if (rc != PTSC_OK)
            return rc;
        if (bytes <= chunk() && alone() && choose_staged(ctx, cls, bytes, 1) &&
            ptsc__type_is_contiguous(type) &&
            ((rc = send_staged_now(ctx, buf, bytes, cls, rank, thread, tag, call, &done)) != PTSC_OK || done))
            return rc;
        if ((cls == PTSC_MEM_HOST || cls == PTSC_MEM_PINNED) && !choose_staged(ctx, cls, bytes, 1)) {
            if ((rc = ptsc__sync_buffer(ctx, cls, 0, call)) != PTSC_OK)
                return rc;
            ptsc__addr_t a;
            ptsc__lanes_send_addr(ctx->index, rank, thread, tag, &a);
            ptsc__nvtx_push_msg(call, rank, thread, tag, bytes, 0);
            ptsc__wait_begin(ctx, call, PTSC__WAIT_SEND, rank, thread, tag, bytes);
            int mrc = MPI_Send(buf, count, type, a.rank, a.tag, a.comm);
            ptsc__wait_end(ctx);
            ptsc__nvtx_pop();
            if (mrc != MPI_SUCCESS)
                return ptsc__err_mpi(mrc, call);
            ctx->stats.sends++;
            ctx->stats.bytes_sent += bytes;
            return PTSC_OK;
        }
    }
    struct ptsc_request *r;
    int rc = engine_start(ctx, 0, (void *)buf, count, type, bytes, rank, thread, tag, call, &r);
    return rc != PTSC_OK ? rc : engine_wait(r, NULL);
}

/* A blocking receive whose message a probe already matched but which needs
 * a request (it does not fit, it is framed, or no slot is free now): the
 * message is stashed, and the request takes it from there. */
static int recv_matched(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                        int thread, int tag, MPI_Message msg, const MPI_Status *st, ptsc_info_t *info,
                        const char *call)
{
    struct ptsc__stash *s = calloc(1, sizeof *s);
    if (!s) {
        char sink;
        MPI_Mrecv(&sink, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: probe stash", call);
    }
    s->src_rank = st->MPI_SOURCE;
    s->src_thread = thread;
    s->tag = tag;
    s->msg = msg;
    s->n = status_bytes(st);
    s->next = ctx->eng.stash; /* the stash was empty: this is its first entry */
    ctx->eng.stash = s;
    struct ptsc_request *r;
    int rc = engine_start(ctx, 1, buf, count, type, bytes, rank, thread, tag, call, &r);
    return rc != PTSC_OK ? rc : engine_wait(r, info);
}

/* The receive side of send_staged_now: a blocking matched probe, then a
 * message of one piece that fits is received into a slot and its copy
 * queued on the stream; anything else (framed, larger than the receive or
 * than a slot, no slot free) goes the request's way with the message
 * matched. *done = 0 only where nothing was received. */
static int recv_staged_now(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, size_t bytes,
                           ptsc_memclass_t cls, int rank, int thread, int tag, ptsc_info_t *info,
                           const char *call, int *done)
{
    int rc = ptsc__sync_buffer(ctx, cls, 1, call);
    if (rc != PTSC_OK)
        return rc;
    *done = 1;
    ptsc__addr_t a;
    MPI_Status st;
    st.MPI_SOURCE = rank == PTSC_ANY_RANK ? -1 : rank;
    MPI_Message msg = MPI_MESSAGE_NULL;
    ptsc__slot_t *s = NULL;
    ptsc__lanes_recv_addr(ctx->index, rank, thread, tag, &a);
    ptsc__nvtx_push_msg(call, rank, thread, tag, bytes, 1);
    ptsc__wait_begin(ctx, call, PTSC__WAIT_RECV, rank, thread, tag, bytes);
    int mrc = MPI_Mprobe(a.rank, a.tag, a.comm, &msg, &st);
    size_t n = mrc == MPI_SUCCESS ? status_bytes(&st) : 0;
    /* A slot's failure shows again on the request's way. */
    if (mrc == MPI_SUCCESS && n <= bytes && n <= chunk() &&
        ptsc__ring_get(ctx, PTSC__RING_RECV, 0, &s) == PTSC_OK && s)
        mrc = MPI_Mrecv(s->host, (int)n, MPI_BYTE, &msg, &st);
    ptsc__wait_end(ctx);
    ptsc__nvtx_pop();
    if (mrc == MPI_SUCCESS && !s)
        return recv_matched(ctx, buf, count, type, bytes, rank, thread, tag, msg, &st, info, call);
    ctx->stats.recvs++;
    if (mrc != MPI_SUCCESS) {
        ptsc__ring_put(s); /* nothing was copied from it */
        rc = mpi_status(mrc, call);
        if (info)
            *info = (ptsc_info_t){st.MPI_SOURCE, thread, tag, rc, 0};
        return rc;
    }
    /* Managed memory may be read by the host at once: wait for the copy. */
    rc =
        ptsc__ring_copy(ctx, s, buf, s->host, n, cls == PTSC_MEM_MANAGED ? PTSC__COPY_SYNC : PTSC__COPY_LAZY);
    ptsc__ring_put_after(s);
    ctx->stats.bytes_recv += n;
    if (info)
        *info = (ptsc_info_t){st.MPI_SOURCE, thread, tag, rc, n};
    return rc;
}

static int engine_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                       int thread, int tag, ptsc_info_t *info, const char *call)
{
    /* Host memory, nothing of this thread in flight: one MPI receive with
     * no request object (guarded: a blocking matched probe first; a message
     * that does not fit, or a framed one's first part, larger than a chunk,
     * goes the request's way). A job that frames has plain messages of up
     * to a chunk, so a host receive there takes this path too: it went the
     * request's way before, at 0.4 us more per 8-byte message on the H100
     * staging build (docs/perf/h100-2026-12-07d-host-split.md). */
    if (!ctx->eng.active && !ctx->eng.stash) {
        ptsc_memclass_t cls = PTSC_MEM_HOST;
        int rc = buf ? ptsc__mem_classify(buf, &cls) : PTSC_OK, done = 0;
        if (rc != PTSC_OK)
            return rc;
        if (alone() && choose_staged(ctx, cls, bytes, 1) && ptsc__type_is_contiguous(type) &&
            ((rc = recv_staged_now(ctx, buf, count, type, bytes, cls, rank, thread, tag, info, call,
                                   &done)) != PTSC_OK ||
             done))
            return rc;
        if ((cls == PTSC_MEM_HOST || cls == PTSC_MEM_PINNED) && !choose_staged(ctx, cls, bytes, 1)) {
            if ((rc = ptsc__sync_buffer(ctx, cls, 0, call)) != PTSC_OK)
                return rc;
            ptsc__addr_t a;
            MPI_Status st;
            MPI_Message msg = MPI_MESSAGE_NULL;
            ptsc__lanes_recv_addr(ctx->index, rank, thread, tag, &a);
            ptsc__nvtx_push_msg(call, rank, thread, tag, bytes, 0);
            ptsc__wait_begin(ctx, call, PTSC__WAIT_RECV, rank, thread, tag, bytes);
            int mrc = MPI_Mprobe(a.rank, a.tag, a.comm, &msg, &st);
            size_t got = mrc == MPI_SUCCESS ? status_bytes(&st) : 0;
            if (got > bytes || (ptsc__g.framed && got > chunk())) {
                ptsc__wait_end(ctx);
                ptsc__nvtx_pop();
                return recv_matched(ctx, buf, count, type, bytes, rank, thread, tag, msg, &st, info, call);
            }
            if (mrc == MPI_SUCCESS)
                mrc = MPI_Mrecv(buf, count, type, &msg, &st);
            ptsc__wait_end(ctx);
            ptsc__nvtx_pop();
            ctx->stats.recvs++;
            if (mrc != MPI_SUCCESS) {
                rc = mpi_status(mrc, call);
                if (info)
                    *info = (ptsc_info_t){st.MPI_SOURCE, thread, tag, rc, bytes};
                return rc;
            }
            ctx->stats.bytes_recv += got; /* the probed size: it fitted */
            if (info)
                *info = (ptsc_info_t){st.MPI_SOURCE, thread, tag, PTSC_OK, got};
            return PTSC_OK;
        }
    }
    struct ptsc_request *r;
    int rc = engine_start(ctx, 1, buf, count, type, bytes, rank, thread, tag, call, &r);
    return rc != PTSC_OK ? rc : engine_wait(r, info);
}

/* ------------------------------------------------------------------------ */
/* Probing                                                                   */
/* ------------------------------------------------------------------------ */

static void probe_info(ptsc_info_t *info, int src, int thread, int tag, size_t bytes)
{
    if (info)
        *info = (ptsc_info_t){src, thread, tag, PTSC_OK, bytes};
}

static size_t stash_size(const struct ptsc__stash *s)
{
    if (!s->first)
        return s->n;
    hdr_t h;
    memcpy(&h, s->first, sizeof h);
    return (size_t)h.total;
}

/* Whether a receive the thread started and that is still unmatched would
 * take any message a probe of (rank, thread, tag) could see. */
static int receive_before(const ptsc_ctx_t *ctx, int rank, int thread, int tag)
{
    for (const struct ptsc_request *q = ctx->eng.active; q; q = q->anext)
        if (q->is_recv && q->kind->ordered && q->state != R_DONE && unmatched(q) && q->thread == thread &&
            q->tag == tag && (q->rank == rank || q->rank == PTSC_ANY_RANK))
            return 1;
    return 0;
}

static int engine_probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info)
{
    ptsc__addr_t a;
    ptsc__lanes_recv_addr(ctx->index, rank, thread, tag, &a);
    for (;;) {
        int moved = engine_progress(ctx);
        if (receive_before(ctx, rank, thread, tag)) {
            /* An earlier receive takes the next message first, as MPI's
             * posted receives do: the probe sees the one after it. */
            if (flag) {
                *flag = 0;
                return PTSC_OK;
            }
            idle(ctx, moved);
            continue;
        }
        if (!ptsc__g.framed) {
            int f = 0;
            MPI_Status st;
            int mrc = MPI_Iprobe(a.rank, a.tag, a.comm, &f, &st);
            if (mrc != MPI_SUCCESS)
                return ptsc__err_mpi(mrc, "ptsc probe");
            if (f) {
                probe_info(info, st.MPI_SOURCE, thread, tag, status_bytes(&st));
                if (flag)
                    *flag = 1;
                return PTSC_OK;
            }
        } else {
            struct ptsc__stash *s = stash_take(ctx, rank, thread, tag, 0);
            if (!s) {
                int f = 0;
                MPI_Message msg;
                MPI_Status st;
                int mrc = MPI_Improbe(a.rank, a.tag, a.comm, &f, &msg, &st);
                if (mrc != MPI_SUCCESS)
                    return ptsc__err_mpi(mrc, "ptsc probe");
                if (f) {
                    if (!(s = calloc(1, sizeof *s)))
                        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc probe");
                    s->src_rank = st.MPI_SOURCE;
                    s->src_thread = thread;
                    s->tag = tag;
                    s->n = status_bytes(&st);
                    s->msg = msg;
                    if (s->n > chunk()) {
                        /* Framed: the size is in the header, so receive the first part now. */
                        s->first = malloc(s->n);
                        mrc = s->first ? MPI_Mrecv(s->first, (int)s->n, MPI_BYTE, &s->msg, &st)
                                       : MPI_ERR_NO_MEM;
                        s->msg = MPI_MESSAGE_NULL;
                        int rc = mrc == MPI_SUCCESS ? stash_post_pieces(ctx, s)
                                                    : ptsc__err_mpi(mrc, "ptsc probe: first part");
                        if (rc != PTSC_OK) {
                            stash_free(s);
                            return rc;
                        }
                    }
                    /* Append: stashed messages keep their arrival order. */
                    struct ptsc__stash **pp = &ctx->eng.stash;
                    while (*pp)
                        pp = &(*pp)->next;
                    *pp = s;
                }
            }
            if (s) {
                probe_info(info, s->src_rank, thread, tag, stash_size(s));
                if (flag)
                    *flag = 1;
                return PTSC_OK;
            }
        }
        if (flag) {
            *flag = 0;
            return PTSC_OK;
        }
        idle(ctx, moved);
    }
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

/* A message whose thread ends: a receive that no message matched is
 * cancelled, one posted to MPI unmatched is cancelled in MPI; the rest
 * completes. */
static void msg_drain(struct ptsc_request *r)
{
    if (r->is_recv && r->state == R_MATCH) {
        fail(r, PTSC_ERR_PENDING);
        r->ndone = r->npieces;
        r->state = R_RUN;
        finish_if_done(r);
    } else if (r->is_recv && !ptsc__g.framed && r->pc[0].st == P_MPI) {
        MPI_Cancel(&r->pc[0].mreq);
    }
}

static int engine_drain(ptsc_ctx_t *ctx)
{
    int pending = ctx->eng.outstanding;
    /* Receives that no message matched yet are cancelled; everything else
     * (sends, matched receives, collectives, which MPI cannot cancel)
     * completes, so MPI holds no request of ours and no buffer is freed
     * under a copy. */
    for (struct ptsc_request *r = ctx->eng.active; r; r = r->anext)
        r->kind->drain(r);
    if (pending)
        ptsc__log(PTSC__LOG_WARN,
                  "%d request(s) of thread %d were still in flight at its end: sends, matched receives and "
                  "collectives were completed, receives no message matched were cancelled",
                  pending, ctx->index);
    for (;;) {
        int busy = 0;
        for (struct ptsc_request *r = ctx->eng.active; r; r = r->anext)
            busy |= r->state != R_DONE;
        if (!busy)
            break;
        idle(ctx, progress_pass(ctx));
    }
    while (ctx->eng.active)
        complete(ctx->eng.active, NULL);
    return pending;
}

static void engine_release(ptsc_ctx_t *ctx)
{
    /* A probed message belongs to the index, not to the thread that probed
     * it: the next holder receives it (a framed one's pieces still come on
     * the index's address), as it would have had nobody probed. */
    if (ctx->eng.stash && ptsc__g.stash_left) {
        struct ptsc__stash **pp = &ptsc__g.stash_left[ctx->index];
        while (*pp)
            pp = &(*pp)->next;
        *pp = ctx->eng.stash;
        ctx->eng.stash = NULL;
    }
    ptsc__ring_destroy(ctx);
    while (ctx->eng.req_free) {
        struct ptsc_request *r = ctx->eng.req_free;
        ctx->eng.req_free = r->next;
        if (r->ev)
            ptsc__gpu_event_destroy(r->ev);
        free(r);
    }
}

/* ------------------------------------------------------------------------ */
/* The engine's calls: the owner's section and the progress agent           */
/* ------------------------------------------------------------------------ */

/* Whether something of the context needs the agent: a receive to match, a
 * piece to copy or post, a deferred post behind an event, the next round of
 * a collective schedule, or a message above MPI's eager sizes whose only
 * piece MPI holds. MPI moves such a message (a rendezvous: both sides must
 * progress) only inside its own calls, so the agent tests it; without that
 * it waited for its owner's next call, and a computation did not overlap
 * it (bench_overlap). A message of up to DRIVE_MPI_MIN bytes MPI holds
 * travels eagerly: the fast paths (small host messages) pay no hand-off. */
#define DRIVE_MPI_MIN 4096
static int msg_needs_drive(const struct ptsc_request *r)
{
    /* A receive's size is known from its matched probe (first_n): r->total
     * is set for staged and framed receives only, so a direct receive (host,
     * or device memory on a CUDA-aware MPI) counted as small, and its
     * rendezvous waited for the owner's wait (bench_overlap, direct). */
    size_t size = r->is_recv ? (r->total > r->first_n ? r->total : r->first_n) : r->bytes;
    return r->state == R_MATCH || r->framed || r->npieces != 1 || r->pc[0].st != P_MPI ||
           size > DRIVE_MPI_MIN;
}

static int coll_needs_drive(const struct ptsc_request *r) { return !r->ops->ready(r->op); }

static int msg_in_mpi(const struct ptsc_request *r)
{
    if (r->state == R_MATCH)
        return 1;
    for (int k = 0; k < r->nposted && k < r->npieces; k++) /* pieces finish out of order */
        if (r->pc[k].st == P_MPI)
            return 1;
    return 0;
}

static int needs_drive(const ptsc_ctx_t *ctx)
{
    for (const struct ptsc_request *r = ctx->eng.active; r; r = r->anext)
        if (r->state != R_DONE && r->kind->needs_drive(r))
            return 1;
    return 0;
}

static int in_mpi(const ptsc_ctx_t *ctx)
{
    for (const struct ptsc_request *r = ctx->eng.active; r; r = r->anext)
        if (r->state != R_DONE && r->kind->in_mpi(r))
            return 1;
    return 0;
}

/* Whether the agent may queue a copy that touches the caller's memory: a
 * staged send with a piece not copied yet, or a receive into device memory.
 * A collective's copies are its owner's (ptsc__coll_finish). */
static int msg_may_copy_user(const struct ptsc_request *r)
{
    if (r->is_recv ? r->cls != PTSC_MEM_HOST : r->staged)
        for (int k = 0; k < r->npieces; k++)
            if (r->is_recv || r->pc[k].st == P_IDLE)
                return 1;
    return 0;
}

static int coll_may_copy_user(const struct ptsc_request *r)
{
    (void)r;
    return 0;
}

static int may_copy_user(const ptsc_ctx_t *ctx)
{
    for (const struct ptsc_request *r = ctx->eng.active; r; r = r->anext)
        if (r->state != R_DONE && r->kind->may_copy_user(r))
            return 1;
    return 0;
}

/* The two kinds of request (struct req_kind, at the top). */
static void msg_wait_begin(struct ptsc_request *r)
{
    ptsc__nvtx_push_msg(r->call, r->rank, r->thread, r->tag, r->bytes, r->staged);
    if (r->state != R_DONE)
        ptsc__wait_begin(r->ctx, r->call, r->is_recv ? PTSC__WAIT_RECV : PTSC__WAIT_SEND, r->rank, r->thread,
                         r->tag, r->bytes);
}

static void coll_wait_begin(struct ptsc_request *r)
{
    ptsc__nvtx_push("%s", r->call);
    if (r->state != R_DONE)
        ptsc__wait_begin(r->ctx, r->call, PTSC__WAIT_COLL, r->rank, r->thread, r->tag, r->bytes);
}

/* A collective is neither cancelled nor let go: MPI cannot cancel one, so
 * ptsc_cancel and its thread's end leave it to complete. */
static void coll_completes(struct ptsc_request *r) { (void)r; }

static void msg_release(struct ptsc_request *r) { (void)r; }

static void coll_release(struct ptsc_request *r)
{
    r->ops->free(r->op);
    r->ops = NULL;
    r->op = NULL;
}

static const struct req_kind msg_kind = {
    .step = msg_step,
    .needs_drive = msg_needs_drive,
    .in_mpi = msg_in_mpi,
    .may_copy_user = msg_may_copy_user,
    .ordered = 1,
    .wait_begin = msg_wait_begin,
    .cancel = msg_cancel,
    .drain = msg_drain,
    .free_early = msg_free_early,
    .release = msg_release,
};
static const struct req_kind coll_kind = {
    .step = coll_step,
    .needs_drive = coll_needs_drive,
    .in_mpi = coll_needs_drive,
    .may_copy_user = coll_may_copy_user,
    .ordered = 0,
    .wait_begin = coll_wait_begin,
    .cancel = coll_completes,
    .drain = coll_completes,
    .free_early = coll_free_early,
    .release = coll_release,
};

/* A per-thread stream (cudaStreamPerThread) means the calling thread's own
 * stream, so the agent queues the context's copies on a stream of its own,
 * ordered by events: it waits for everything the owner queued before the
 * hand-off (hand_ev), and the owner's stream waits for the agent's copies
 * when the owner comes back (back_ev), so that its next kernel sees a
 * received message as if the copy had gone on its own stream. On an owned
 * or the legacy stream the agent uses the context's stream itself. */
static int separate_stream(const ptsc_ctx_t *ctx)
{
    return ptsc__g.ndevices > 0 && ctx->stream && ctx->stream_kind == PTSC_STREAM_PER_THREAD;
}

static void enter(ptsc_ctx_t *ctx)
{
    ptsc__progress_enter(ctx);
    if (ctx->agent.staged) {
        ctx->stats.staged_bytes += ctx->agent.staged;
        ctx->agent.staged = 0;
    }
    if (ctx->agent.queued) {
        ctx->agent.queued = 0;
        int rc = ctx->agent.back_ev ? PTSC_OK : ptsc__gpu_event_create(&ctx->agent.back_ev);
        if (rc == PTSC_OK && (rc = ptsc__gpu_event_record(ctx->agent.back_ev, ctx->agent.stream)) == PTSC_OK)
            rc = ptsc__gpu_stream_wait(ctx->stream, ctx->agent.back_ev);
        if (rc != PTSC_OK && ctx->agent.stream) /* order by waiting instead */
            (void)ptsc__gpu_stream_sync(ctx->agent.stream);
    }
}

static void leave(ptsc_ctx_t *ctx)
{
    int want = ptsc__progress_agent_on() && needs_drive(ctx);
    if (want && separate_stream(ctx)) {
        /* One record covers every request started before it: only a start
         * since the last one needs a new record (not a wait or test). */
        if (ctx->agent.hand_new && may_copy_user(ctx)) {
            int rc = ctx->agent.hand_ev ? PTSC_OK : ptsc__gpu_event_create(&ctx->agent.hand_ev);
            if (rc == PTSC_OK)
                rc = ptsc__gpu_event_record(ctx->agent.hand_ev, ctx->stream);
            if (rc != PTSC_OK) {
                ptsc__progress_leave(ctx, 0); /* without the event the owner drives its own copies */
                return;
            }
            ctx->agent.hand_pending = 1;
            ctx->agent.hand_new = 0;
        }
        ptsc__ring_settle(ctx); /* lazy events on the owner's stream: the agent cannot record them */
    }
    ptsc__progress_leave(ctx, want);
}

/* The agent's pass over one context (progress.c, under the index's lock). */
static int agent_drive(ptsc_ctx_t *ctx, int *moved)
{
    *moved = 0;
    if (ptsc__g.ndevices > 0 && ctx->stream && ptsc__gpu_set_device(ctx->device) != PTSC_OK)
        return 0; /* the owner drives it on its next call */
    if (separate_stream(ctx)) {
        if (!ctx->agent.stream && ptsc__gpu_stream_bind(PTSC_STREAM_OWNED, &ctx->agent.stream) != PTSC_OK) {
            ctx->agent.stream = NULL;
            ptsc__log(PTSC__LOG_WARN,
                      "progress agent: no stream for thread %d (%s); its thread drives its "
                      "messages",
                      ctx->index, ptsc__tls()->detail);
            return 0;
        }
        if (ctx->agent.hand_pending &&
            ptsc__gpu_stream_wait(ctx->agent.stream, ctx->agent.hand_ev) != PTSC_OK)
            return 0;
        ctx->agent.hand_pending = 0;
        ctx->eng.qstream = ctx->agent.stream;
    }
    unsigned long queued = ctx->eng.queued;
    ctx->agent.driving = 1;
    *moved = progress_pass(ctx) ? PTSC__DRIVE_MOVED : 0;
    ctx->agent.driving = 0;
    if (ctx->eng.qstream != ctx->stream) {
        ctx->agent.queued |= ctx->eng.queued != queued;
        ctx->eng.qstream = ctx->stream;
    }
    if (!needs_drive(ctx))
        return 0;
    if (in_mpi(ctx))
        *moved |= PTSC__DRIVE_IN_MPI;
    return 1;
}

int ptsc__engine_setup(void)
{
    return ptsc__progress_setup(ptsc__g.nthreads, ptsc__g.cfg.progress == PTSC__PROGRESS_THREAD, agent_drive);
}

int ptsc__engine_start(ptsc_ctx_t *ctx, int is_recv, void *buf, int count, MPI_Datatype type, size_t bytes,
                       int rank, int thread, int tag, const char *call, struct ptsc_request **out)
{
    enter(ctx);
    int rc = engine_start(ctx, is_recv, buf, count, type, bytes, rank, thread, tag, call, out);
    leave(ctx);
    return rc;
}

int ptsc__engine_start_ops(ptsc_ctx_t *ctx, const struct ptsc__req_ops *ops, void *op, int root, size_t bytes,
                           const char *call, struct ptsc_request **out)
{
    enter(ctx);
    int rc = engine_start_ops(ctx, ops, op, root, bytes, call, out);
    leave(ctx);
    return rc;
}

int ptsc__engine_wait(struct ptsc_request *r, ptsc_info_t *info)
{
    ptsc_ctx_t *ctx = r->ctx;
    enter(ctx);
    int rc = engine_wait(r, info);
    leave(ctx);
    return rc;
}

int ptsc__engine_test(struct ptsc_request *r, int *done, ptsc_info_t *info)
{
    ptsc_ctx_t *ctx = r->ctx;
    enter(ctx);
    int rc = engine_test(r, done, info);
    leave(ctx);
    return rc;
}

int ptsc__engine_progress(ptsc_ctx_t *ctx)
{
    enter(ctx);
    int moved = engine_progress(ctx);
    leave(ctx);
    return moved;
}

void ptsc__engine_idle(ptsc_ctx_t *ctx, int moved)
{
    enter(ctx);
    idle(ctx, moved);
    leave(ctx);
}

int ptsc__engine_done(const struct ptsc_request *r)
{
    enter(r->ctx);
    int done = r->state == R_DONE;
    leave(r->ctx);
    return done;
}

void ptsc__engine_cancel_mark(struct ptsc_request *r)
{
    ptsc_ctx_t *ctx = r->ctx;
    enter(ctx);
    r->kind->cancel(r);
    leave(ctx);
}

int ptsc__engine_cancel(struct ptsc_request *r)
{
    ptsc_ctx_t *ctx = r->ctx;
    enter(ctx);
    r->kind->cancel(r);
    int rc = engine_wait(r, NULL);
    leave(ctx);
    return rc;
}

int ptsc__engine_free(struct ptsc_request *r, int *kept, const char *call)
{
    ptsc_ctx_t *ctx = r->ctx;
    enter(ctx);
    engine_progress(ctx);
    int rc = engine_free(r, kept, call);
    leave(ctx);
    return rc;
}

int ptsc__engine_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                      int thread, int tag, const char *call)
{
    enter(ctx);
    int rc = engine_send(ctx, buf, count, type, bytes, rank, thread, tag, call);
    leave(ctx);
    return rc;
}

int ptsc__engine_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                      int thread, int tag, ptsc_info_t *info, const char *call)
{
    enter(ctx);
    int rc = engine_recv(ctx, buf, count, type, bytes, rank, thread, tag, info, call);
    leave(ctx);
    return rc;
}

int ptsc__engine_probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info)
{
    enter(ctx);
    int rc = engine_probe(ctx, rank, thread, tag, flag, info);
    leave(ctx);
    return rc;
}

int ptsc__engine_drain(ptsc_ctx_t *ctx)
{
    enter(ctx);
    int pending = engine_drain(ctx);
    leave(ctx);
    return pending;
}

void ptsc__engine_release(ptsc_ctx_t *ctx)
{
    /* The agent lets go first; then nothing but this thread touches ctx. */
    ptsc__progress_forget(ctx);
    if (ctx->agent.stream) {
        (void)ptsc__gpu_stream_sync(ctx->agent.stream);
        ptsc__gpu_stream_release(PTSC_STREAM_OWNED, ctx->agent.stream);
        ctx->agent.stream = NULL;
    }
    if (ctx->agent.hand_ev)
        ptsc__gpu_event_destroy(ctx->agent.hand_ev);
    if (ctx->agent.back_ev)
        ptsc__gpu_event_destroy(ctx->agent.back_ev);
    ctx->agent.hand_ev = ctx->agent.back_ev = NULL;
    ctx->stats.staged_bytes += ctx->agent.staged;
    ctx->agent.staged = 0;
    engine_release(ctx);
}

void ptsc__engine_adopt(ptsc_ctx_t *ctx)
{
    if (!ptsc__g.stash_left)
        return;
    ctx->eng.stash = ptsc__g.stash_left[ctx->index];
    ptsc__g.stash_left[ctx->index] = NULL;
}

void ptsc__engine_stash_drain(void)
{
    for (int i = 0; ptsc__g.stash_left && i < ptsc__g.nthreads; i++) {
        while (ptsc__g.stash_left[i]) {
            struct ptsc__stash *s = ptsc__g.stash_left[i];
            ptsc__g.stash_left[i] = s->next;
            stash_free(s);
        }
    }
    free(ptsc__g.stash_left);
    ptsc__g.stash_left = NULL;
}
