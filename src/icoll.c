/*
 * Non-blocking lane collectives, and the schedules that run every lane
 * collective with PTSC_COMM=shared (the blocking calls of coll.c start one
 * and wait for it).
 *
 * A call is checked, synchronised and staged by coll_prep.c at once, exactly as
 * its blocking form (ptsc__coll_prep_*), and becomes a request of the
 * engine (engine.c), completed by ptsc_wait, ptsc_test and the array calls.
 * Staged results are copied back on the thread's stream, and the staging
 * buffers released, when the request completes, never earlier.
 *
 * PTSC_COMM=dup: MPI's own non-blocking collective on the thread's lane
 * (MPI_Ibarrier, MPI_Ibcast, ...), started at the call and tested by every
 * progress pass of the thread.
 *
 * PTSC_COMM=shared: a schedule, libNBC style: a list of rounds, each a few
 * MPI_Isend / MPI_Irecv on the shared communicator and local steps (a fold
 * with MPI_Reduce_local, a datatype-aware copy). A round is posted once the
 * previous one completed, and its local steps run before its messages are
 * posted, in order; the thread's progress passes (every ptsc call it makes:
 * waits, tests, starts, probes) advance it. The algorithms: a dissemination
 * barrier, a binomial broadcast, a reduction folded at the root in rank
 * order, x_0 op x_1 op ... op x_{n-1} (the root receives x_{n-1}, ..., x_0
 * one round each and folds x_i op acc, correct for non-commutative
 * operations), allreduce as that reduction to rank 0 and a broadcast,
 * scans as a chain in rank order, reduce_scatter_block as a reduction at
 * rank 0 and a scatter, and one linear exchange for every gather, scatter
 * and all-to-all pattern (every receive posted first, then every send).
 *
 * Matching rule (shared). Every collective of lane t takes the lane's next
 * sequence number s, counted per thread index by every rank, and all of its
 * messages carry tag x = s mod (ptsc_tag_max() + 1) in the lane's collective
 * tag space (lanes.c). MPI requires every rank to start the collectives of a
 * lane in the same order, so the k-th collective of lane t has the same s on
 * every rank and its messages can match only each other's. The tag is
 * needed: a schedule posts its later rounds late, so a later collective of
 * the lane may post a receive from a peer before an earlier one posts its
 * own receive from that peer, and with one tag for all collectives MPI's
 * matching in posting order would hand the later one the earlier one's
 * message. Within one collective the rounds are posted in the same order on
 * both sides, so MPI's non-overtaking rule on (communicator, source, tag)
 * keeps two messages of a pair apart. A tag comes back after tag_max + 1
 * collectives of the lane, so at most that many (ptsc_tag_max() + 1) may be
 * in flight on one lane at once. The counter is kept per thread index, not
 * per context, so a thread that detaches and one that attaches the index
 * later continue its numbering, as the lane's other ranks do.
 */
#include "ptsc_internal.h"

#include <stdlib.h>
#include <string.h>

/* Collectives started on each lane (PTSC_COMM=shared); thread index t's
 * entry is touched only by the thread holding t (attach and detach order
 * the holders through the slot table's lock). */
static unsigned lane_seq[PTSC__MAX_THREADS_LIMIT];

/* ------------------------------------------------------------------------ */
/* Local steps                                                               */
/* ------------------------------------------------------------------------ */

/* Copy `count` elements of `t` from src to dst (same layout), writing only
 * the datatype's bytes: holes of dst are left as they were. Through
 * MPI_Pack / MPI_Unpack (local, thread-safe) in pieces of about PACK_CHUNK
 * bytes, since their sizes are ints; coll_prep.c checked that one element's
 * size fits. */
enum { PACK_CHUNK = 1 << 20 };

static int typed_copy(void *dst, const void *src, int count, MPI_Datatype t, const ptsc__layout_t *L,
                      MPI_Comm comm)
{
    if (L->span == 0 || dst == src)
        return MPI_SUCCESS;
    if (L->dense) {
        memcpy((char *)dst + L->lo, (const char *)src + L->lo, (size_t)L->span);
        return MPI_SUCCESS;
    }
    int per = L->size >= PACK_CHUNK ? 1 : (int)(PACK_CHUNK / L->size), psize = 0;
    if (per > count)
        per = count;
    int mrc = MPI_Pack_size(per, t, comm, &psize);
    if (mrc != MPI_SUCCESS)
        return mrc;
    char *packed = malloc(psize > 0 ? (size_t)psize : 1);
    if (!packed)
        return MPI_ERR_NO_MEM;
    for (int done = 0; done < count && mrc == MPI_SUCCESS;) {
        int m = count - done < per ? count - done : per, pos = 0, upos = 0;
        MPI_Aint off = (MPI_Aint)done * (MPI_Aint)L->extent;
        mrc = MPI_Pack((const char *)src + off, m, t, packed, psize, &pos, comm);
        if (mrc == MPI_SUCCESS)
            mrc = MPI_Unpack(packed, pos, &upos, (char *)dst + off, m, t, comm);
        done += m;
    }
    free(packed);
    return mrc;
}

/* ------------------------------------------------------------------------ */
/* Schedules                                                                 */
/* ------------------------------------------------------------------------ */

/* One action of a schedule. SEND / RECV: `count` elements of `type` at
 * `buf` with `peer`; FOLD: buf = src op buf (MPI_Reduce_local); COPY:
 * buf = src (typed_copy); END: the round ends, the next one is posted once
 * every message of this one completed. */
enum { A_SEND, A_RECV, A_FOLD, A_COPY, A_END };

typedef struct {
    int kind, peer, count;
    void *buf;
    const void *src;
    MPI_Datatype type;
} act_t;

enum { NSCRATCH = 2 };

struct ptsc__icoll {
    ptsc_ctx_t *ctx;
    ptsc__coll_t c;
    int shared;
    MPI_Request mreq;    /* dup: MPI's non-blocking collective */
    int x;               /* shared: the tag of this collective's messages */
    act_t *acts;         /* shared: the schedule */
    int nacts, cap, pos; /* actions, capacity, next to run */
    MPI_Request *reqs;   /* the current round's messages */
    int nreqs, *is_recv; /* and which are receives: R_POSTED, or R_PROBE */
    act_t **probe;       /* (guarded) a receive's action until matched */
    char *mem[NSCRATCH]; /* scratch memory (folds, prefixes) */
    int built_rc, done, rc;
    int ready;    /* complete in MPI, finish (copy back, release) left to the owner: the agent drove it */
    char *detail; /* the detail of the failure in rc, kept from the pass that found it: that pass may be
                     the agent's, whose thread-local detail the owner never sees */
};

static void add(struct ptsc__icoll *s, int kind, int peer, void *buf, const void *src, int count,
                MPI_Datatype type)
{
    if (s->built_rc != PTSC_OK)
        return;
    if (s->nacts == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        act_t *a = realloc(s->acts, (size_t)cap * sizeof *a);
        if (!a) {
            s->built_rc = ptsc__err(PTSC_ERR_NO_MEMORY, "%s: collective schedule", s->c.call);
            return;
        }
        s->acts = a;
        s->cap = cap;
    }
    s->acts[s->nacts++] = (act_t){kind, peer, count, buf, src, type};
}

static void send_to(struct ptsc__icoll *s, int peer, const void *buf, int count, MPI_Datatype t)
{
    add(s, A_SEND, peer, (void *)buf, NULL, count, t);
}
static void recv_from(struct ptsc__icoll *s, int peer, void *buf, int count, MPI_Datatype t)
{
    add(s, A_RECV, peer, buf, NULL, count, t);
}
static void fold(struct ptsc__icoll *s, void *acc, const void *x, int count, MPI_Datatype t)
{
    add(s, A_FOLD, -1, acc, x, count, t);
}
static void copy(struct ptsc__icoll *s, void *dst, const void *src, int count, MPI_Datatype t)
{
    add(s, A_COPY, -1, dst, src, count, t);
}
static void end_round(struct ptsc__icoll *s) { add(s, A_END, -1, NULL, NULL, 0, MPI_DATATYPE_NULL); }

/* Scratch memory k over the datatype's true span, as a typed pointer (the
 * span starts at the memory). */
static char *scratch(struct ptsc__icoll *s, int k)
{
    const ptsc__layout_t *L = &s->c.L;
    if (s->built_rc != PTSC_OK)
        return NULL;
    if (!(s->mem[k] = malloc(L->span > 0 ? (size_t)L->span : 1))) {
        s->built_rc =
            ptsc__err(PTSC_ERR_NO_MEMORY, "%s: %lld bytes of scratch memory", s->c.call, (long long)L->span);
        return NULL;
    }
    return s->mem[k] - L->lo;
}

static void b_barrier(struct ptsc__icoll *s)
{
    int n = ptsc__g.nranks, r = ptsc__g.rank;
    for (int k = 1; k < n; k <<= 1) {
        recv_from(s, (r - k + n) % n, NULL, 0, MPI_BYTE);
        send_to(s, (r + k) % n, NULL, 0, MPI_BYTE);
        end_round(s);
    }
}

static void b_bcast(struct ptsc__icoll *s, void *buf, int count, MPI_Datatype t, int root)
{
    int n = ptsc__g.nranks, vr = (ptsc__g.rank - root + n) % n, mask = 1;
    while (mask < n) {
        if (vr & mask) {
            recv_from(s, (vr - mask + root) % n, buf, count, t);
            end_round(s);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < n)
            send_to(s, (vr + mask + root) % n, buf, count, t);
    end_round(s);
}

/* The root folds x_{n-1}, ..., x_0 as x_i op acc, so the result is
 * x_0 op x_1 op ... op x_{n-1} for any operation. The accumulator is the
 * receive buffer itself unless that holds the root's own input (in place). */
static void b_reduce(struct ptsc__icoll *s, const void *sbuf, void *rbuf, int count, MPI_Datatype t, int root)
{
    int n = ptsc__g.nranks, r = ptsc__g.rank;
    const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    if (r != root) {
        send_to(s, root, mine, count, t);
        end_round(s);
        return;
    }
    int own_acc = sbuf == MPI_IN_PLACE && n > 1;
    char *tmp = n > 1 ? scratch(s, 0) : NULL, *acc = own_acc ? scratch(s, 1) : rbuf;
    for (int i = n - 1; i >= 0; i--) {
        if (i == n - 1 && i == r) {
            copy(s, acc, mine, count, t);
        } else if (i == n - 1) {
            recv_from(s, i, acc, count, t);
            end_round(s);
        } else if (i == r) {
            fold(s, acc, mine, count, t);
        } else {
            recv_from(s, i, tmp, count, t);
            end_round(s);
            fold(s, acc, tmp, count, t);
        }
    }
    if (own_acc)
        copy(s, rbuf, acc, count, t);
    end_round(s);
}

/* Prefix reductions as a chain in rank order: rank r receives
 * P = x_0 op ... op x_{r-1} from r - 1 and passes P op x_r on. Scan:
 * rbuf = P op x_r; exscan: rbuf = P (rank 0's is not written). */
static void b_scan(struct ptsc__icoll *s, const void *sbuf, void *rbuf, int count, MPI_Datatype t,
                   int exclusive)
{
    int n = ptsc__g.nranks, r = ptsc__g.rank;
    const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    char *pre = r > 0 ? scratch(s, 0) : NULL, *out = exclusive ? scratch(s, 1) : rbuf;
    if (r > 0) {
        recv_from(s, r - 1, pre, count, t);
        end_round(s);
    }
    copy(s, out, mine, count, t);
    if (r > 0)
        fold(s, out, pre, count, t);
    if (r + 1 < n)
        send_to(s, r + 1, out, count, t);
    if (exclusive && r > 0)
        copy(s, rbuf, pre, count, t);
    end_round(s);
}

/* One side (sends or receives) of a linear exchange: rank i's block holds
 * counts[i] elements at displs[i] extents, or `count` elements at i * count
 * extents (per_peer) or at the start. `peer`: PEER_ALL, one rank, or
 * PEER_NONE. */
enum { PEER_ALL = -1, PEER_NONE = -2 };

static int side_block(const ptsc__side_t *x, int peer, int i, MPI_Count ext, char **at, int *n)
{
    if (peer == PEER_NONE || (peer >= 0 && peer != i))
        return 0;
    *n = x->counts ? x->counts[i] : x->count;
    MPI_Aint first = x->displs ? x->displs[i] : (x->per_peer ? (MPI_Aint)i * x->count : 0);
    *at = (char *)x->buf + first * (MPI_Aint)ext;
    return 1;
}

/* One round: every receive, then every send. `skip_self`: the rank's own
 * block is in place already (MPI_IN_PLACE at a root). */
static void b_exchange(struct ptsc__icoll *s, const ptsc__side_t *snd, int to, const ptsc__side_t *rcv,
                       int from, int skip_self)
{
    MPI_Count lb, sext = 0, rext = 0;
    if ((to != PEER_NONE && MPI_Type_get_extent_x(snd->type, &lb, &sext) != MPI_SUCCESS) ||
        (from != PEER_NONE && MPI_Type_get_extent_x(rcv->type, &lb, &rext) != MPI_SUCCESS)) {
        s->built_rc = ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", s->c.call);
        return;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < ptsc__g.nranks; i++) {
            char *at;
            int cnt;
            if ((skip_self && i == ptsc__g.rank) ||
                !side_block(pass ? snd : rcv, pass ? to : from, i, pass ? sext : rext, &at, &cnt))
                continue;
            if (pass)
                send_to(s, i, at, cnt, snd->type);
            else
                recv_from(s, i, at, cnt, rcv->type);
        }
    end_round(s);
}

static void build(struct ptsc__icoll *s)
{
    ptsc__coll_t *c = &s->c;
    const void *sw = c->s_in_place ? MPI_IN_PLACE : c->snd.buf;
    void *rw = c->rcv.buf;
    MPI_Datatype t = c->rcv.type;
    int count = c->rcv.count;
    switch (c->kind) {
    case PTSC__C_BARRIER:
        b_barrier(s);
        break;
    case PTSC__C_BCAST:
        b_bcast(s, rw, count, t, c->root);
        break;
    case PTSC__C_REDUCE:
    case PTSC__C_ALLREDUCE:
        b_reduce(s, sw, rw, count, c->snd.type, c->kind == PTSC__C_REDUCE ? c->root : 0);
        if (c->kind == PTSC__C_ALLREDUCE)
            b_bcast(s, rw, count, t, 0);
        break;
    case PTSC__C_SCAN:
    case PTSC__C_EXSCAN:
        b_scan(s, sw, rw, count, t, c->kind == PTSC__C_EXSCAN);
        break;
    case PTSC__C_RSB: {
        /* Reduced whole at rank 0 into scratch, then scattered. */
        char *acc = ptsc__g.rank == 0 ? scratch(s, 1) : NULL;
        b_reduce(s, c->s_in_place ? rw : sw, acc, c->snd.count, t, 0);
        ptsc__side_t snd = {acc, count, NULL, NULL, t, 1}, rcv = {rw, count, NULL, NULL, t, 0};
        b_exchange(s, &snd, ptsc__g.rank == 0 ? PEER_ALL : PEER_NONE, &rcv, 0, 0);
        break;
    }
    default: {
        int to = c->kind == PTSC__C_GATHER ? c->root : PEER_ALL;
        int from = c->kind == PTSC__C_SCATTER ? c->root : PEER_ALL;
        b_exchange(s, &c->snd, c->sends ? to : PEER_NONE, &c->rcv, c->recvs ? from : PEER_NONE,
                   c->s_in_place || c->r_in_place);
        break;
    }
    }
}

/* ------------------------------------------------------------------------ */
/* Running a schedule                                                        */
/* ------------------------------------------------------------------------ */

/* A receive of the schedule is posted (R_POSTED) or, where the job guards
 * its receives (PTSC_RECV_GUARD, engine.c), waits for a matched probe
 * first (R_PROBE): MPI is then never handed a message larger than the
 * receive (MPICH aborts on the truncation of a completed request), and
 * such a message is drained beside the buffer and reported as MPI would,
 * PTSC_ERR_MPI with "message truncated". */
enum { R_SEND = 0, R_POSTED = 1, R_PROBE = 2 };

/* After an error: receives still posted are cancelled, and every message
 * of the round is waited for, so that MPI holds nothing of the schedule. */
static void abandon_round(struct ptsc__icoll *s)
{
    for (int k = 0; k < s->nreqs; k++)
        if (s->reqs[k] != MPI_REQUEST_NULL && s->is_recv[k] == R_POSTED)
            MPI_Cancel(&s->reqs[k]);
    for (int k = 0; k < s->nreqs; k++)
        if (s->reqs[k] != MPI_REQUEST_NULL)
            MPI_Wait(&s->reqs[k], MPI_STATUS_IGNORE);
    s->nreqs = 0;
}

/* Post the next round (its local steps run first, in order). */
static int post_round(struct ptsc__icoll *s)
{
    MPI_Comm comm = ptsc__lanes_coll_comm(s->ctx->index);
    while (s->pos < s->nacts) {
        act_t *a = &s->acts[s->pos++];
        int mrc = MPI_SUCCESS;
        if (a->kind == A_END)
            break;
        if (a->kind == A_SEND || a->kind == A_RECV) {
            ptsc__addr_t ad;
            ptsc__lanes_coll_addr(s->ctx->index, a->peer, s->x, &ad);
            int k = s->nreqs++;
            s->reqs[k] = MPI_REQUEST_NULL;
            s->probe[k] = NULL;
            s->is_recv[k] = a->kind == A_SEND ? R_SEND : R_PROBE;
            if (s->is_recv[k] == R_PROBE)
                s->probe[k] = a;
            else
                mrc = a->kind == A_SEND
                          ? MPI_Isend(a->buf, a->count, a->type, ad.rank, ad.tag, ad.comm, &s->reqs[k])
                          : MPI_Irecv(a->buf, a->count, a->type, ad.rank, ad.tag, ad.comm, &s->reqs[k]);
        } else if (a->kind == A_FOLD) {
            mrc = MPI_Reduce_local(a->src, a->buf, a->count, a->type, s->c.op);
        } else {
            mrc = typed_copy(a->buf, a->src, a->count, a->type, &s->c.L, comm);
        }
        if (mrc != MPI_SUCCESS)
            return mrc;
    }
    return MPI_SUCCESS;
}

/* Match the guarded receive k if its message arrived: 1 when posted (or
 * failed: *mrc, *rc), 0 when not there yet. A message larger than the
 * receive is received whole into scratch memory and reported. */
static int match_recv(struct ptsc__icoll *s, int k, int *mrc, int *rc)
{
    const act_t *a = s->probe[k];
    ptsc__addr_t ad;
    ptsc__lanes_coll_addr(s->ctx->index, a->peer, s->x, &ad);
    MPI_Message msg;
    MPI_Status st;
    int flag = 0;
    MPI_Count got = 0, tsize = 0;
    if ((*mrc = MPI_Improbe(ad.rank, ad.tag, ad.comm, &flag, &msg, &st)) != MPI_SUCCESS || !flag)
        return *mrc != MPI_SUCCESS;
    s->is_recv[k] = R_POSTED;
    s->probe[k] = NULL;
    if ((*mrc = MPI_Get_elements_x(&st, MPI_BYTE, &got)) == MPI_SUCCESS)
        *mrc = MPI_Type_size_x(a->type, &tsize);
    if (*mrc == MPI_SUCCESS && got <= (MPI_Count)a->count * tsize)
        return (*mrc = MPI_Imrecv(a->buf, a->count, a->type, &msg, &s->reqs[k])), 1;
    char *drain = *mrc == MPI_SUCCESS ? malloc(got > 0 ? (size_t)got : 1) : NULL;
    if (*mrc == MPI_SUCCESS && !drain) {
        *rc = ptsc__err(PTSC_ERR_NO_MEMORY, "%s: %lld bytes to drain a truncated message", s->c.call,
                        (long long)got);
        return 1; /* the matched message is left unreceived, as the engine does */
    }
    if (*mrc == MPI_SUCCESS)
        *mrc = MPI_Mrecv(drain, (int)got, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    free(drain);
    if (*mrc == MPI_SUCCESS)
        *rc =
            ptsc__err(PTSC_ERR_MPI, "%s: message truncated: %lld bytes from rank %d into a %lld-byte receive",
                      s->c.call, (long long)got, a->peer, (long long)a->count * tsize);
    return 1;
}

/* Advance the schedule as far as it goes without waiting; 1 when done. */
static int sched_step(struct ptsc__icoll *s, int *moved)
{
    for (;;) {
        for (int k = 0; k < s->nreqs; k++) {
            if (s->is_recv[k] == R_PROBE) {
                int mrc = MPI_SUCCESS, rc = PTSC_OK;
                if (!match_recv(s, k, &mrc, &rc))
                    return 0;
                *moved = 1;
                if (mrc != MPI_SUCCESS || rc != PTSC_OK) {
                    abandon_round(s);
                    s->rc = rc != PTSC_OK ? rc : ptsc__err_mpi(mrc, s->c.call);
                    return 1;
                }
            }
            if (s->reqs[k] == MPI_REQUEST_NULL)
                continue;
            int flag = 0, mrc = MPI_Test(&s->reqs[k], &flag, MPI_STATUS_IGNORE);
            if (mrc != MPI_SUCCESS) {
                s->reqs[k] = MPI_REQUEST_NULL;
                abandon_round(s);
                s->rc = ptsc__err_mpi(mrc, s->c.call);
                return 1;
            }
            if (!flag)
                return 0;
            *moved = 1;
        }
        s->nreqs = 0;
        if (s->pos == s->nacts)
            return 1;
        int mrc = post_round(s);
        *moved = 1;
        if (mrc != MPI_SUCCESS) {
            abandon_round(s);
            s->rc = ptsc__err_mpi(mrc, s->c.call);
            return 1;
        }
    }
}

/* MPI's non-blocking collective for a prepared call (PTSC_COMM=dup). */
static int mpi_start(struct ptsc__icoll *s)
{
    const ptsc__coll_t *c = &s->c;
    MPI_Comm comm = ptsc__lanes_coll_comm(s->ctx->index);
    const ptsc__side_t *sx = &c->snd, *rx = &c->rcv;
    void *sw = c->s_in_place ? MPI_IN_PLACE : sx->buf, *rw = c->r_in_place ? MPI_IN_PLACE : rx->buf;
    int v = c->v, root = c->root;
    MPI_Request *q = &s->mreq;
    switch (c->kind) {
    case PTSC__C_BARRIER:
        return MPI_Ibarrier(comm, q);
    case PTSC__C_BCAST:
        return MPI_Ibcast(rw, rx->count, rx->type, root, comm, q);
    case PTSC__C_REDUCE:
        return MPI_Ireduce(sw, rw, rx->count, rx->type, c->op, root, comm, q);
    case PTSC__C_ALLREDUCE:
        return MPI_Iallreduce(sw, rw, rx->count, rx->type, c->op, comm, q);
    case PTSC__C_SCAN:
        return MPI_Iscan(sw, rw, rx->count, rx->type, c->op, comm, q);
    case PTSC__C_EXSCAN:
        return MPI_Iexscan(sw, rw, rx->count, rx->type, c->op, comm, q);
    case PTSC__C_RSB:
        return MPI_Ireduce_scatter_block(sw, rw, rx->count, rx->type, c->op, comm, q);
    case PTSC__C_GATHER:
        return v ? MPI_Igatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, root, comm, q)
                 : MPI_Igather(sw, sx->count, sx->type, rw, rx->count, rx->type, root, comm, q);
    case PTSC__C_SCATTER:
        return v ? MPI_Iscatterv(sw, sx->counts, sx->displs, sx->type, rw, rx->count, rx->type, root, comm, q)
                 : MPI_Iscatter(sw, sx->count, sx->type, rw, rx->count, rx->type, root, comm, q);
    case PTSC__C_ALLGATHER:
        /* As in coll.c: MPICH 4.0.2's allgatherv on one process ignores displs. */
        if (v && ptsc__g.nranks == 1)
            return MPI_Igatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, 0, comm, q);
        return v ? MPI_Iallgatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, comm, q)
                 : MPI_Iallgather(sw, sx->count, sx->type, rw, rx->count, rx->type, comm, q);
    default:
        return v ? MPI_Ialltoallv(sw, sx->counts, sx->displs, sx->type, rw, rx->counts, rx->displs, rx->type,
                                  comm, q)
                 : MPI_Ialltoall(sw, sx->count, sx->type, rw, rx->count, rx->type, comm, q);
    }
}

static void release_scratch(struct ptsc__icoll *s)
{
    for (int k = 0; k < NSCRATCH; k++) {
        free(s->mem[k]);
        s->mem[k] = NULL;
    }
}

/* The request operations the engine drives a collective through
 * (struct ptsc__req_ops). */
static int icoll_ready(const void *op)
{
    const struct ptsc__icoll *s = op;
    return s->ready;
}

static void icoll_free(void *op)
{
    struct ptsc__icoll *s = op;
    release_scratch(s);
    free(s->acts);
    free(s->reqs);
    free(s->is_recv);
    free(s->probe);
    free(s->detail);
    free(s);
}

static int icoll_begin(void *op)
{
    struct ptsc__icoll *s = op;
    if (s->shared)
        return PTSC_OK; /* the first progress pass posts the first round */
    int mrc = mpi_start(s);
    return mrc == MPI_SUCCESS ? PTSC_OK : ptsc__err_mpi(mrc, s->c.call);
}

static int icoll_progress(void *op, int *moved, int *rc)
{
    struct ptsc__icoll *s = op;
    if (s->done) {
        *rc = s->rc;
        return 1;
    }
    if (s->ready) {
        if (s->ctx->agent.driving)
            return 0;
    } else if (s->shared) {
        if (!sched_step(s, moved))
            return 0;
    } else {
        int flag = 0, mrc = MPI_Test(&s->mreq, &flag, MPI_STATUS_IGNORE);
        if (mrc == MPI_SUCCESS && !flag)
            return 0;
        if (mrc != MPI_SUCCESS)
            s->rc = ptsc__err_mpi(mrc, s->c.call);
    }
    *moved = 1;
    if (s->rc != PTSC_OK && !s->detail)
        s->detail = strdup(ptsc__tls()->detail); /* this thread's: the pass that found it */
    /* The progress agent leaves the results to the owner: copying staged
     * results back goes on the owner's stream, and the staging pool is the
     * owner's (collectives use it outside the engine lock). */
    if (s->ctx->agent.driving) {
        s->ready = 1;
        return 0;
    }
    /* Complete: copy back, release the staging and scratch memory. The
     * failure's detail goes to the completing thread (the engine keeps it
     * with the request). */
    s->done = 1;
    if (s->rc != PTSC_OK && s->detail)
        ptsc__err_set_detail(s->detail);
    s->rc = ptsc__coll_finish(s->ctx, &s->c, s->rc);
    release_scratch(s);
    *rc = s->rc;
    return 1;
}

static const struct ptsc__req_ops icoll_ops = {icoll_begin, icoll_progress, icoll_ready, icoll_free};

int ptsc__icoll_start(ptsc_ctx_t *ctx, const ptsc__coll_t *c, struct ptsc_request **out)
{
    ptsc__coll_t copy_of_c = *c;
    int n = ptsc__g.nranks, rc = PTSC_OK;
    struct ptsc__icoll *s = calloc(1, sizeof *s);
    if (!s) {
        rc = ptsc__err(PTSC_ERR_NO_MEMORY, "%s: collective request", c->call);
        return ptsc__coll_finish(ctx, &copy_of_c, rc);
    }
    s->ctx = ctx;
    s->c = *c;
    s->shared = ptsc__coll_shared();
    s->mreq = MPI_REQUEST_NULL;
    if (s->shared) {
        s->x = (int)(lane_seq[ctx->index]++ % ((unsigned)ptsc__g.tag_max + 1u));
        /* A round has at most one receive and one send per rank. */
        s->reqs = malloc(2 * (size_t)n * sizeof *s->reqs);
        s->is_recv = malloc(2 * (size_t)n * sizeof *s->is_recv);
        s->probe = malloc(2 * (size_t)n * sizeof *s->probe);
        if (!s->reqs || !s->is_recv || !s->probe)
            s->built_rc = ptsc__err(PTSC_ERR_NO_MEMORY, "%s: collective schedule", c->call);
        build(s);
        rc = s->built_rc;
    }
    if (rc == PTSC_OK)
        rc = ptsc__engine_start_ops(ctx, &icoll_ops, s, c->root, c->bytes, c->call, out);
    if (rc != PTSC_OK) {
        rc = ptsc__coll_finish(ctx, &s->c, rc);
        icoll_free(s);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Public calls                                                              */
/* ------------------------------------------------------------------------ */

/* Start a prepared call (prep_rc: its preparation's status) into *req. */
static int start(ptsc_ctx_t *ctx, int prep_rc, ptsc__coll_t *c, ptsc_request_t *req)
{
    if (prep_rc != PTSC_OK)
        return prep_rc;
    ptsc__nvtx_push("%s %zu B", c->call, c->bytes);
    struct ptsc_request *r;
    int rc = ptsc__icoll_start(ctx, c, &r);
    if (rc == PTSC_OK)
        *req = r;
    return ptsc__nvtx_pop_rc(rc);
}

static int null_req(const ptsc_request_t *req, const char *call)
{
    /* Not initialised comes first, as in every call. */
    int rc = ptsc__check_ready(call);
    if (rc != PTSC_OK)
        return rc;
    return req ? PTSC_OK : ptsc__err(PTSC_ERR_ARG, "%s: request pointer is NULL", call);
}

#define SIDE(b, n, ns, ds, t, pp) (&(ptsc__side_t){(void *)(b), (n), (ns), (ds), (t), (pp)})

int ptsc_ibarrier(ptsc_ctx_t *ctx, ptsc_request_t *req)
{
    const char *call = "ptsc_ibarrier";
    ptsc__coll_t c;
    int rc = null_req(req, call);
    return rc != PTSC_OK ? rc : start(ctx, ptsc__coll_prep_barrier(&ctx, call, &c), &c, req);
}

int ptsc_ibcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int root, ptsc_request_t *req)
{
    const char *call = "ptsc_ibcast";
    ptsc__coll_t c;
    int rc = null_req(req, call);
    return rc != PTSC_OK ? rc
                         : start(ctx, ptsc__coll_prep_bcast(&ctx, buf, count, type, root, call, &c), &c, req);
}

static int ireduce_common(ptsc_ctx_t *ctx, int kind, const void *sbuf, void *rbuf, int count,
                          MPI_Datatype type, MPI_Op op, int root, const char *call, ptsc_request_t *req)
{
    ptsc__coll_t c;
    int rc = null_req(req, call);
    return rc != PTSC_OK
               ? rc
               : start(ctx, ptsc__coll_prep_reduce(&ctx, kind, sbuf, rbuf, count, type, op, root, call, &c),
                       &c, req);
}

int ptsc_ireduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                 int root, ptsc_request_t *req)
{
    return ireduce_common(ctx, PTSC__C_REDUCE, sbuf, rbuf, count, type, op, root, "ptsc_ireduce", req);
}

int ptsc_iallreduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    ptsc_request_t *req)
{
    return ireduce_common(ctx, PTSC__C_ALLREDUCE, sbuf, rbuf, count, type, op, 0, "ptsc_iallreduce", req);
}

int ptsc_iscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
               ptsc_request_t *req)
{
    return ireduce_common(ctx, PTSC__C_SCAN, sbuf, rbuf, count, type, op, 0, "ptsc_iscan", req);
}

int ptsc_iexscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                 ptsc_request_t *req)
{
    return ireduce_common(ctx, PTSC__C_EXSCAN, sbuf, rbuf, count, type, op, 0, "ptsc_iexscan", req);
}

int ptsc_ireduce_scatter_block(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                               MPI_Op op, ptsc_request_t *req)
{
    return ireduce_common(ctx, PTSC__C_RSB, sbuf, rbuf, count, type, op, 0, "ptsc_ireduce_scatter_block",
                          req);
}

static int iexchange(ptsc_ctx_t *ctx, int kind, int v, int root, const ptsc__side_t *sx,
                     const ptsc__side_t *rx, const char *call, ptsc_request_t *req)
{
    ptsc__coll_t c;
    int rc = null_req(req, call);
    return rc != PTSC_OK
               ? rc
               : start(ctx, ptsc__coll_prep_exchange(&ctx, kind, v, root, sx, rx, call, &c), &c, req);
}

int ptsc_iallgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                    MPI_Datatype rtype, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_ALLGATHER, 0, 0, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                     SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_iallgather", req);
}

int ptsc_ialltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_ALLTOALL, 0, 0, SIDE(sbuf, scount, NULL, NULL, stype, 1),
                     SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_ialltoall", req);
}

int ptsc_igather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_GATHER, 0, root, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                     SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_igather", req);
}

int ptsc_iscatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, int root, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_SCATTER, 0, root, SIDE(sbuf, scount, NULL, NULL, stype, 1),
                     SIDE(rbuf, rcount, NULL, NULL, rtype, 0), "ptsc_iscatter", req);
}

int ptsc_igatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                  const int rcounts[], const int displs[], MPI_Datatype rtype, int root, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_GATHER, 1, root, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                     SIDE(rbuf, 0, rcounts, displs, rtype, 1), "ptsc_igatherv", req);
}

int ptsc_iscatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                   MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                   ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_SCATTER, 1, root, SIDE(sbuf, 0, scounts, displs, stype, 1),
                     SIDE(rbuf, rcount, NULL, NULL, rtype, 0), "ptsc_iscatterv", req);
}

int ptsc_iallgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                     const int rcounts[], const int displs[], MPI_Datatype rtype, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_ALLGATHER, 1, 0, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                     SIDE(rbuf, 0, rcounts, displs, rtype, 1), "ptsc_iallgatherv", req);
}

int ptsc_ialltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                    MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                    MPI_Datatype rtype, ptsc_request_t *req)
{
    return iexchange(ctx, PTSC__C_ALLTOALL, 1, 0, SIDE(sbuf, 0, scounts, sdispls, stype, 1),
                     SIDE(rbuf, 0, rcounts, rdispls, rtype, 1), "ptsc_ialltoallv", req);
}
