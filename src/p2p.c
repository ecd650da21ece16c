/*
 * Point-to-point calls and requests.
 *
 * Two wire formats, chosen for the whole job at init (all ranks agree):
 *
 *  - direct (staging off): one MPI message with the caller's count and
 *    datatype, straight from the caller's buffer (host, or device on a
 *    CUDA-aware MPI).
 *  - pieces (staging on): the message travels as MPI_BYTE pieces of
 *    PTSC_STAGING_CHUNK bytes; the piece shorter than a chunk (possibly
 *    empty) ends it, so a message below the chunk size is one piece. Every
 *    rank uses this format for every buffer, so sender and receiver agree
 *    whatever memory each side has. Device buffers are staged through a
 *    pinned buffer of the thread: a send queues one device-to-host copy per
 *    piece on the thread's stream and posts each piece as soon as its copy
 *    is done (the copy of piece k+1 overlaps the transfer of piece k); a
 *    receive posts every piece at once and queues each piece's host-to-device
 *    copy on the thread's stream as it arrives, so the next kernel on that
 *    stream sees the data without a host sync. A message of at least one
 *    chunk must be received with the size it was sent with; a mismatch is
 *    reported as PTSC_ERR_TRUNCATE.
 */
#include "ptsc_internal.h"

#include <stdlib.h>
#include <string.h>

struct ptsc_request {
    struct ptsc_request *next; /* free-list link: first member (context.c frees through it) */
    ptsc_ctx_t *ctx;
    int is_recv;
    int npieces;      /* 0: direct format, one request in mpi[0] */
    MPI_Request *mpi; /* npieces requests, or one */
    MPI_Request mpi_one;
    char *user;           /* the caller's buffer */
    ptsc__stagebuf_t *sb; /* pinned copy of a staged buffer */
    size_t bytes;         /* send: size; receive: capacity */
    size_t received;      /* receive: bytes arrived so far */
    MPI_Datatype type;    /* direct receives: to count what arrived */
    int rc;               /* first error seen while completing */
};

/* ------------------------------------------------------------------------ */
/* Argument checks                                                           */
/* ------------------------------------------------------------------------ */

int ptsc__check_buf(const void *buf, int count, MPI_Datatype type, const char *call, size_t *bytes)
{
    if (count < 0)
        return ptsc__err(PTSC_ERR_COUNT, "%s: count %d is negative", call, count);
    if (type == MPI_DATATYPE_NULL)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is MPI_DATATYPE_NULL", call);
    if (!buf && count > 0)
        return ptsc__err(PTSC_ERR_NULL_BUFFER, "%s: buffer is NULL with count %d", call, count);
    int size = 0;
    if (MPI_Type_size(type, &size) != MPI_SUCCESS || size < 0)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", call);
    *bytes = (size_t)count * (size_t)size;
    return PTSC_OK;
}

static int check_peer(int rank, int thread, int tag, const char *call)
{
    if (rank < 0 || rank >= ptsc__g.nranks)
        return ptsc__err(PTSC_ERR_RANK, "%s: rank %d is outside [0, %d)", call, rank, ptsc__g.nranks);
    if (thread < 0 || thread >= ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD, "%s: thread %d is outside [0, %d) (PTSC_MAX_THREADS)", call, thread,
                         ptsc__g.nthreads);
    if (tag < 0 || tag > ptsc__g.tag_max)
        return ptsc__err(PTSC_ERR_TAG, "%s: tag %d is outside [0, %d] (ptsc_tag_max)", call, tag,
                         ptsc__g.tag_max);
    return PTSC_OK;
}

/* The pieces format moves bytes, so it needs a datatype without holes. */
int ptsc__check_contiguous(MPI_Datatype type, const char *call)
{
    MPI_Aint lb, extent, tlb, textent;
    int size;
    MPI_Type_size(type, &size);
    MPI_Type_get_extent(type, &lb, &extent);
    MPI_Type_get_true_extent(type, &tlb, &textent);
    if (lb != 0 || tlb != 0 || extent != size || textent != size)
        return ptsc__err(
            PTSC_ERR_UNSUPPORTED,
            "%s: non-contiguous datatypes are not supported while staging is on (pack the data first)", call);
    return PTSC_OK;
}

static int start_check(ptsc_ctx_t **ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                       int tag, const char *call, size_t *bytes)
{
    int rc = ptsc__ctx_resolve(ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf(buf, count, type, call, bytes);
    if (rc == PTSC_OK)
        rc = check_peer(rank, thread, tag, call);
    if (rc == PTSC_OK && ptsc__g.staging && count > 0)
        rc = ptsc__check_contiguous(type, call);
    return rc;
}

static int mpi_status(int mpi_rc, const char *what)
{
    int cls = MPI_ERR_OTHER;
    MPI_Error_class(mpi_rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
        return ptsc__err(PTSC_ERR_TRUNCATE, "%s: the message is larger than the receive buffer", what);
    return ptsc__err_mpi(mpi_rc, what);
}

/* ------------------------------------------------------------------------ */
/* Request objects and events, recycled per context                         */
/* ------------------------------------------------------------------------ */

static struct ptsc_request *req_get(ptsc_ctx_t *ctx)
{
    struct ptsc_request *r = ctx->req_free;
    if (r)
        ctx->req_free = r->next;
    else if (!(r = malloc(sizeof *r)))
        return NULL;
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->mpi = &r->mpi_one;
    r->mpi_one = MPI_REQUEST_NULL;
    return r;
}

static void req_put(struct ptsc_request *r)
{
    if (r->mpi != &r->mpi_one)
        free(r->mpi);
    r->next = r->ctx->req_free;
    r->ctx->req_free = r;
}

static int event_get(ptsc_ctx_t *ctx, void **ev)
{
    if (ctx->nev_free > 0) {
        *ev = ctx->ev_free[--ctx->nev_free];
        return PTSC_OK;
    }
    return ptsc__gpu_event_create(ev);
}

static void event_put(ptsc_ctx_t *ctx, void *ev)
{
    if (ctx->nev_free == ctx->cap_ev_free) {
        int cap = ctx->cap_ev_free ? 2 * ctx->cap_ev_free : 16;
        void **grown = realloc(ctx->ev_free, (size_t)cap * sizeof *grown);
        if (!grown) {
            ptsc__gpu_event_destroy(ev);
            return;
        }
        ctx->ev_free = grown;
        ctx->cap_ev_free = cap;
    }
    ctx->ev_free[ctx->nev_free++] = ev;
}

/* ------------------------------------------------------------------------ */
/* Starting operations                                                       */
/* ------------------------------------------------------------------------ */

static size_t piece_len(size_t total, int k)
{
    size_t chunk = ptsc__g.cfg.staging_chunk, off = (size_t)k * chunk;
    return total - off < chunk ? total - off : chunk;
}

static int alloc_pieces(struct ptsc_request *r, size_t total)
{
    r->npieces = (int)(total / ptsc__g.cfg.staging_chunk) + 1;
    if (r->npieces > 1 && !(r->mpi = malloc((size_t)r->npieces * sizeof *r->mpi))) {
        r->mpi = &r->mpi_one;
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc: %d message pieces", r->npieces);
    }
    for (int k = 0; k < r->npieces; k++)
        r->mpi[k] = MPI_REQUEST_NULL;
    return PTSC_OK;
}

/* Queue the device-to-host copies of a staged send, then post each piece as
 * its copy completes. Returns with every piece posted. */
static int post_send_pieces(struct ptsc_request *r, const ptsc__addr_t *a, int staged, const char *call)
{
    ptsc_ctx_t *ctx = r->ctx;
    size_t chunk = ptsc__g.cfg.staging_chunk;
    void *evs_one[1], **evs = evs_one;
    int rc = alloc_pieces(r, r->bytes), nev = 0;
    const char *wire = r->user;
    if (rc == PTSC_OK && staged) {
        if (r->npieces > 1 && !(evs = malloc((size_t)r->npieces * sizeof *evs)))
            return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: events", call);
        rc = ptsc__stage_acquire(ctx, r->bytes, &r->sb);
        for (int k = 0; rc == PTSC_OK && k < r->npieces; k++, nev++) {
            size_t len = piece_len(r->bytes, k);
            if (len > 0)
                rc = ptsc__gpu_copy_async((char *)r->sb->host + k * chunk, r->user + k * chunk, len,
                                          ctx->stream);
            if (rc == PTSC_OK && (rc = event_get(ctx, &evs[k])) == PTSC_OK &&
                (rc = ptsc__gpu_event_record(evs[k], ctx->stream)) != PTSC_OK)
                event_put(ctx, evs[k]);
            if (rc != PTSC_OK)
                break;
        }
        if (rc == PTSC_OK) {
            wire = r->sb->host;
            ctx->stats.staged_bytes += r->bytes;
        }
    }
    for (int k = 0; rc == PTSC_OK && k < r->npieces; k++) {
        if (staged)
            rc = ptsc__gpu_event_sync(evs[k]);
        if (rc != PTSC_OK)
            break;
        int mrc = MPI_Isend(wire + k * chunk, (int)piece_len(r->bytes, k), MPI_BYTE, a->rank, a->tag, a->comm,
                            &r->mpi[k]);
        if (mrc != MPI_SUCCESS)
            rc = ptsc__err_mpi(mrc, call);
    }
    for (int k = 0; k < nev; k++)
        event_put(ctx, evs[k]);
    if (evs != evs_one)
        free(evs);
    return rc;
}

static int post_recv_pieces(struct ptsc_request *r, const ptsc__addr_t *a, int staged, const char *call)
{
    size_t chunk = ptsc__g.cfg.staging_chunk;
    int rc = alloc_pieces(r, r->bytes);
    char *wire = r->user;
    if (rc == PTSC_OK && staged && r->bytes > 0 &&
        (rc = ptsc__stage_acquire(r->ctx, r->bytes, &r->sb)) == PTSC_OK)
        wire = r->sb->host;
    for (int k = 0; rc == PTSC_OK && k < r->npieces; k++) {
        int mrc = MPI_Irecv(wire + k * chunk, (int)piece_len(r->bytes, k), MPI_BYTE, a->rank, a->tag, a->comm,
                            &r->mpi[k]);
        if (mrc != MPI_SUCCESS)
            rc = ptsc__err_mpi(mrc, call);
    }
    return rc;
}

static int finish(struct ptsc_request *r);

static int start(ptsc_ctx_t *ctx, int is_recv, const void *buf, int count, MPI_Datatype type, size_t bytes,
                 int rank, int thread, int tag, const char *call, struct ptsc_request **out)
{
    ptsc__addr_t a;
    if (is_recv)
        ptsc__lanes_recv_addr(ctx->index, rank, thread, tag, &a);
    else
        ptsc__lanes_send_addr(ctx->index, rank, thread, tag, &a);
    int staged = 0;
    int rc = ptsc__sync_prepare(ctx, buf, &staged, call);
    if (rc != PTSC_OK)
        return rc;
    struct ptsc_request *r = req_get(ctx);
    if (!r)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: request", call);
    r->is_recv = is_recv;
    r->user = (char *)buf;
    r->bytes = bytes;
    r->type = type;
    if (!ptsc__g.staging) {
        int mrc = is_recv ? MPI_Irecv((void *)buf, count, type, a.rank, a.tag, a.comm, r->mpi)
                          : MPI_Isend(buf, count, type, a.rank, a.tag, a.comm, r->mpi);
        if (mrc != MPI_SUCCESS)
            rc = ptsc__err_mpi(mrc, call);
    } else {
        rc = is_recv ? post_recv_pieces(r, &a, staged, call) : post_send_pieces(r, &a, staged, call);
    }
    if (rc != PTSC_OK) {
        /* Pieces already posted are completed (or cancelled) before the
         * request is dropped, so no MPI request outlives it. */
        r->rc = rc;
        finish(r);
        return rc;
    }
    if (is_recv)
        ctx->stats.recvs++;
    else {
        ctx->stats.sends++;
        ctx->stats.bytes_sent += bytes;
    }
    *out = r;
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* Completion                                                                */
/* ------------------------------------------------------------------------ */

static void cancel_rest(struct ptsc_request *r)
{
    for (int k = 0; k < r->npieces; k++) {
        if (r->mpi[k] != MPI_REQUEST_NULL) {
            if (r->is_recv)
                MPI_Cancel(&r->mpi[k]);
            MPI_Wait(&r->mpi[k], MPI_STATUS_IGNORE);
        }
    }
}

/* A receive piece arrived: check its size and queue its copy to the device. */
static int piece_arrived(struct ptsc_request *r, int k, MPI_Status *st)
{
    int n = 0;
    MPI_Get_count(st, MPI_BYTE, &n);
    size_t expect = piece_len(r->bytes, k);
    if (r->npieces > 1 && (size_t)n != expect)
        return ptsc__err(
            PTSC_ERR_TRUNCATE,
            "ptsc receive: piece %d of a %zu-byte receive carried %d bytes, expected %zu; messages of "
            "at least PTSC_STAGING_CHUNK must be received with the size they were sent with",
            k, r->bytes, n, expect);
    r->received += (size_t)n;
    if (r->sb && n > 0) {
        size_t off = (size_t)k * ptsc__g.cfg.staging_chunk;
        r->ctx->stats.staged_bytes += (size_t)n;
        return ptsc__gpu_copy_async(r->user + off, (char *)r->sb->host + off, (size_t)n, r->ctx->stream);
    }
    return PTSC_OK;
}

/* Drive a request to completion (blocking) or one step (test). Returns 1 in
 * *done when every MPI request of it has completed. */
static void progress(struct ptsc_request *r, int blocking, int *done)
{
    int n = r->npieces ? r->npieces : 1;
    *done = 1;
    for (int k = 0; k < n; k++) {
        if (r->mpi[k] == MPI_REQUEST_NULL)
            continue;
        MPI_Status st;
        int flag = 1, mrc;
        mrc = blocking ? MPI_Wait(&r->mpi[k], &st) : MPI_Test(&r->mpi[k], &flag, &st);
        if (mrc == MPI_SUCCESS && !flag) {
            *done = 0;
            continue;
        }
        if (mrc != MPI_SUCCESS) {
            if (r->rc == PTSC_OK)
                r->rc = mpi_status(mrc, r->is_recv ? "ptsc receive" : "ptsc send");
            continue;
        }
        if (!r->is_recv || r->rc != PTSC_OK)
            continue;
        if (r->npieces) {
            int rc = piece_arrived(r, k, &st);
            if (rc != PTSC_OK) {
                r->rc = rc;
                cancel_rest(r);
            }
        } else {
            int count = 0, size = 0;
            MPI_Get_count(&st, r->type, &count);
            MPI_Type_size(r->type, &size);
            r->received = (size_t)count * (size_t)size;
        }
    }
}

/* Release what a completed (or failed) request holds; returns its status. */
static int finish(struct ptsc_request *r)
{
    int rc = r->rc;
    if (rc != PTSC_OK)
        cancel_rest(r);
    if (r->sb) {
        /* A receive's copies to the device are queued on the stream: the
         * buffer is reused only once they ran. A send's copies are done. */
        int src = ptsc__stage_release(r->ctx, r->sb, r->is_recv);
        if (rc == PTSC_OK)
            rc = src;
    }
    if (r->is_recv)
        r->ctx->stats.bytes_recv += r->received;
    req_put(r);
    return rc;
}

static int check_req(ptsc_request_t *req, const char *call)
{
    int rc = ptsc__check_ready(call);
    if (rc != PTSC_OK)
        return rc;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "%s: request pointer is NULL", call);
    if (*req && !pthread_equal((*req)->ctx->owner, pthread_self()))
        return ptsc__err(PTSC_ERR_WRONG_THREAD, "%s: request started by thread index %d", call,
                         (*req)->ctx->index);
    return PTSC_OK;
}

int ptsc_wait(ptsc_request_t *req)
{
    int rc = check_req(req, "ptsc_wait"), done;
    if (rc != PTSC_OK || !*req)
        return rc;
    progress(*req, 1, &done);
    rc = finish(*req);
    *req = PTSC_REQUEST_NULL;
    return rc;
}

int ptsc_test(ptsc_request_t *req, int *done)
{
    int rc = check_req(req, "ptsc_test");
    if (rc != PTSC_OK)
        return rc;
    if (!done)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_test: done is NULL");
    if (!*req) {
        *done = 1;
        return PTSC_OK;
    }
    int d;
    progress(*req, 0, &d);
    if (d) {
        rc = finish(*req);
        *req = PTSC_REQUEST_NULL;
    }
    *done = d;
    return rc;
}

int ptsc_waitall(int n, ptsc_request_t reqs[])
{
    int rc = ptsc__check_ready("ptsc_waitall");
    if (rc != PTSC_OK)
        return rc;
    if (n < 0 || (n > 0 && !reqs))
        return ptsc__err(PTSC_ERR_ARG, "ptsc_waitall: %s",
                         n < 0 ? "negative count" : "request array is NULL");
    for (int i = 0; i < n; i++)
        if ((rc = check_req(&reqs[i], "ptsc_waitall")) != PTSC_OK)
            return rc;
    /* Every piece of every request was posted when it started, so waiting in
     * order cannot deadlock: MPI progresses all of them meanwhile. */
    int first = PTSC_OK;
    char detail[PTSC__DETAIL_LEN] = "";
    for (int i = 0; i < n; i++) {
        rc = ptsc_wait(&reqs[i]);
        if (rc != PTSC_OK && first == PTSC_OK) {
            first = rc;
            snprintf(detail, sizeof detail, "ptsc_waitall: request %d: %s", i, ptsc_last_error());
        }
    }
    if (first != PTSC_OK)
        ptsc__err_set_detail(detail);
    return first;
}

/* ------------------------------------------------------------------------ */
/* Public calls                                                              */
/* ------------------------------------------------------------------------ */

int ptsc_isend(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
               ptsc_request_t *req)
{
    size_t bytes = 0;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_isend: request pointer is NULL");
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, "ptsc_isend", &bytes);
    return rc != PTSC_OK ? rc : start(ctx, 0, buf, count, type, bytes, rank, thread, tag, "ptsc_isend", req);
}

int ptsc_irecv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
               ptsc_request_t *req)
{
    size_t bytes = 0;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_irecv: request pointer is NULL");
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, "ptsc_irecv", &bytes);
    return rc != PTSC_OK ? rc : start(ctx, 1, buf, count, type, bytes, rank, thread, tag, "ptsc_irecv", req);
}

int ptsc_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread, int tag)
{
    size_t bytes = 0;
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, "ptsc_send", &bytes);
    if (rc != PTSC_OK)
        return rc;
    if (!ptsc__g.staging) {
        /* Direct format: no request object on the common path. */
        int staged;
        ptsc__addr_t a;
        if ((rc = ptsc__sync_prepare(ctx, buf, &staged, "ptsc_send")) != PTSC_OK)
            return rc;
        ptsc__lanes_send_addr(ctx->index, rank, thread, tag, &a);
        int mrc = MPI_Send(buf, count, type, a.rank, a.tag, a.comm);
        if (mrc != MPI_SUCCESS)
            return ptsc__err_mpi(mrc, "ptsc_send");
        ctx->stats.sends++;
        ctx->stats.bytes_sent += bytes;
        return PTSC_OK;
    }
    ptsc_request_t r;
    rc = start(ctx, 0, buf, count, type, bytes, rank, thread, tag, "ptsc_send", &r);
    return rc != PTSC_OK ? rc : ptsc_wait(&r);
}

int ptsc_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag)
{
    size_t bytes = 0;
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, "ptsc_recv", &bytes);
    if (rc != PTSC_OK)
        return rc;
    if (!ptsc__g.staging) {
        int staged, n = 0, size = 0;
        ptsc__addr_t a;
        MPI_Status st;
        if ((rc = ptsc__sync_prepare(ctx, buf, &staged, "ptsc_recv")) != PTSC_OK)
            return rc;
        ptsc__lanes_recv_addr(ctx->index, rank, thread, tag, &a);
        int mrc = MPI_Recv(buf, count, type, a.rank, a.tag, a.comm, &st);
        if (mrc != MPI_SUCCESS)
            return mpi_status(mrc, "ptsc_recv");
        MPI_Get_count(&st, type, &n);
        MPI_Type_size(type, &size);
        ctx->stats.recvs++;
        ctx->stats.bytes_recv += (size_t)n * (size_t)size;
        return PTSC_OK;
    }
    ptsc_request_t r;
    rc = start(ctx, 1, buf, count, type, bytes, rank, thread, tag, "ptsc_recv", &r);
    return rc != PTSC_OK ? rc : ptsc_wait(&r);
}

int ptsc_sendrecv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, int dest_rank,
                  int dest_thread, int stag, void *rbuf, int rcount, MPI_Datatype rtype, int src_rank,
                  int src_thread, int rtag)
{
    size_t sbytes = 0, rbytes = 0;
    int rc = start_check(&ctx, rbuf, rcount, rtype, src_rank, src_thread, rtag, "ptsc_sendrecv", &rbytes);
    if (rc == PTSC_OK)
        rc = start_check(&ctx, sbuf, scount, stype, dest_rank, dest_thread, stag, "ptsc_sendrecv", &sbytes);
    if (rc != PTSC_OK)
        return rc;
    ptsc_request_t r[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    rc = start(ctx, 1, rbuf, rcount, rtype, rbytes, src_rank, src_thread, rtag, "ptsc_sendrecv", &r[0]);
    if (rc != PTSC_OK)
        return rc;
    rc = start(ctx, 0, sbuf, scount, stype, sbytes, dest_rank, dest_thread, stag, "ptsc_sendrecv", &r[1]);
    if (rc != PTSC_OK) {
        /* The receive is already posted: cancel it rather than lose it later. */
        r[0]->rc = rc;
        finish(r[0]);
        return rc;
    }
    return ptsc_waitall(2, r);
}
