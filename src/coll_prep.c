/*
 * Lane collectives, the first and last of their three steps (coll.c says
 * what the calls do): check a call's arguments, synchronise and stage its
 * buffers (ptsc__coll_prep_*), and once it ran, copy staged results back
 * and release the staging (ptsc__coll_finish). Shared by the blocking calls
 * (coll.c) and the non-blocking ones and schedules (icoll.c), below both.
 */
#include "ptsc_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef ptsc__cbuf_t cbuf_t;

static int shared_mode(void) { return ptsc__g.cfg.comm == PTSC__COMM_SHARED; }

int ptsc__coll_shared(void) { return shared_mode(); }

/* Sync (per scope) and, when needed, stage one buffer. `copy_in` copies the
 * caller's data into the staged copy; `host_only` stages device memory even
 * on a CUDA-aware MPI (host-side reductions). */
static int cbuf_in(ptsc_ctx_t *ctx, const void *buf, size_t bytes, MPI_Datatype type, int copy_in,
                   int host_only, cbuf_t *c, const char *call)
{
    c->user = buf;
    c->wire = (void *)buf;
    c->sb = NULL;
    c->bytes = bytes;
    if (!buf || buf == MPI_IN_PLACE || bytes == 0)
        return PTSC_OK;
    int staged = 0;
    int rc = ptsc__sync_prepare(ctx, buf, host_only ? PTSC__FOR_HOST : PTSC__FOR_MPI, &staged, call);
    if (rc != PTSC_OK)
        return rc;
    if (!staged)
        return PTSC_OK;
    if ((rc = ptsc__check_contiguous(type, call)) != PTSC_OK)
        return rc;
    if ((rc = ptsc__stage_acquire(ctx, bytes, &c->sb)) != PTSC_OK)
        return rc;
    c->wire = c->sb->host;
    if (copy_in) {
        ctx->stats.staged_bytes += bytes;
        ptsc__nvtx_push_copy(1, bytes);
        rc = ptsc__gpu_copy_async(c->wire, buf, bytes, ctx->stream);
        ptsc__nvtx_pop();
    }
    return rc;
}

/* Inputs were copied on the thread's stream: one sync covers them all. */
static int cbuf_ready(ptsc_ctx_t *ctx, const cbuf_t *a, const cbuf_t *b)
{
    if ((a && a->sb) || (b && b->sb))
        return ptsc__gpu_stream_sync(ctx->stream);
    return PTSC_OK;
}

static int cbuf_out(ptsc_ctx_t *ctx, cbuf_t *c, int copy_out, int rc)
{
    if (!c->sb)
        return rc;
    int out = rc == PTSC_OK && copy_out;
    if (out) {
        ctx->stats.staged_bytes += c->bytes;
        ptsc__nvtx_push_copy(0, c->bytes);
        rc = ptsc__gpu_copy_async((void *)c->user, c->wire, c->bytes, ctx->stream);
        ptsc__nvtx_pop();
    }
    int rrc = ptsc__stage_release(ctx, c->sb, out);
    c->sb = NULL;
    return rc != PTSC_OK ? rc : rrc;
}

int ptsc__coll_finish(ptsc_ctx_t *ctx, ptsc__coll_t *c, int rc)
{
    rc = cbuf_out(ctx, &c->s, 0, rc);
    return cbuf_out(ctx, &c->r, c->copy_out, rc);
}

/* Stage a prepared call's buffers: c->snd.buf and c->rcv.buf are the
 * caller's on entry and what MPI sees on return. On failure nothing stays
 * staged. */
static int stage(ptsc_ctx_t *ctx, ptsc__coll_t *c, size_t sbytes, size_t rbytes, int r_copy_in, int host_only)
{
    int rc = PTSC_OK;
    if (c->sends)
        rc = cbuf_in(ctx, c->snd.buf, sbytes, c->snd.type, 1, host_only, &c->s, c->call);
    if (rc == PTSC_OK && c->recvs)
        rc = cbuf_in(ctx, c->rcv.buf, rbytes, c->rcv.type, r_copy_in, host_only, &c->r, c->call);
    if (rc == PTSC_OK)
        rc = cbuf_ready(ctx, &c->s, &c->r);
    if (rc != PTSC_OK) {
        c->copy_out = 0;
        return ptsc__coll_finish(ctx, c, rc);
    }
    if (c->sends)
        c->snd.buf = c->s.wire;
    if (c->recvs)
        c->rcv.buf = c->r.wire;
    ctx->stats.collectives++;
    return PTSC_OK;
}

static void coll_init(ptsc__coll_t *c, int kind, int root, const char *call)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->root = root;
    c->op = MPI_OP_NULL;
    c->snd.type = c->rcv.type = MPI_DATATYPE_NULL;
    c->call = call;
}

static int begin(ptsc_ctx_t **ctx, const char *call) { return ptsc__ctx_resolve(ctx, call); }

static int check_root(int root, const char *call)
{
    if (root < 0 || root >= ptsc__g.nranks)
        return ptsc__err(PTSC_ERR_RANK, "%s: root %d is outside [0, %d)", call, root, ptsc__g.nranks);
    return PTSC_OK;
}

static int is_predefined_op(MPI_Op op)
{
    static const MPI_Op ops[] = {MPI_MAX, MPI_MIN,  MPI_SUM,  MPI_PROD,   MPI_LAND,   MPI_BAND,    MPI_LOR,
                                 MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (op == ops[i])
            return 1;
    return 0;
}

static int check_op(MPI_Op op, const char *call)
{
    return op == MPI_OP_NULL ? ptsc__err(PTSC_ERR_ARG, "%s: op is MPI_OP_NULL", call) : PTSC_OK;
}

/* The operation must suit the datatype (checked after the datatype is). A
 * predefined operation on a derived datatype is refused, the same in both
 * modes: MPI defines it only for predefined datatypes, Open MPI's
 * collectives return MPI_ERR_OP for it and its MPI_Reduce_local (the shared
 * mode's fold) aborts the job through MPI_COMM_WORLD's error handler. Pairs
 * of a predefined operation and a predefined datatype are left to MPI. */
static int check_op_type(MPI_Op op, MPI_Datatype type, const char *call)
{
    if (!is_predefined_op(op))
        return PTSC_OK;
    int ni, na, nd, combiner;
    if (MPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", call);
    if (combiner != MPI_COMBINER_NAMED)
        return ptsc__err(
            PTSC_ERR_UNSUPPORTED,
            "%s: a predefined operation (MPI_SUM, MPI_MAX, ...) on a derived datatype; MPI defines "
            "those for predefined datatypes only (use MPI_Op_create, or reduce the basic type)",
            call);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* Preparing a call: checks, sync, staging                                   */
/* ------------------------------------------------------------------------ */

int ptsc__coll_prep_barrier(ptsc_ctx_t **ctx, const char *call, ptsc__coll_t *c)
{
    coll_init(c, PTSC__C_BARRIER, -1, call);
    int rc = begin(ctx, call);
    return rc != PTSC_OK ? rc : stage(*ctx, c, 0, 0, 0, 0);
}

int ptsc__coll_prep_bcast(ptsc_ctx_t **ctx, void *buf, int count, MPI_Datatype type, int root,
                          const char *call, ptsc__coll_t *c)
{
    size_t bytes = 0;
    coll_init(c, PTSC__C_BCAST, root, call);
    int rc = begin(ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf(buf, count, type, call, &bytes);
    if (rc == PTSC_OK)
        rc = check_root(root, call);
    if (rc != PTSC_OK)
        return rc;
    int is_root = ptsc__g.rank == root;
    c->rcv = (ptsc__side_t){buf, count, NULL, NULL, type, 0};
    c->recvs = 1;
    c->copy_out = !is_root;
    c->bytes = bytes;
    return stage(*ctx, c, 0, bytes, is_root, 0);
}

/* Reductions share their checks and staging; they differ in who gets a
 * result and, for reduce_scatter_block, in the input's size (one block of
 * `count` elements per rank). */
int ptsc__coll_prep_reduce(ptsc_ctx_t **ctx, int kind, const void *sbuf, void *rbuf, int count,
                           MPI_Datatype type, MPI_Op op, int root, const char *call, ptsc__coll_t *c)
{
    size_t sbytes = 0, rbytes = 0;
    coll_init(c, kind, kind == PTSC__C_REDUCE ? root : -1, call);
    int n = ptsc__g.nranks, rc = begin(ctx, call), in_place = sbuf == MPI_IN_PLACE;
    if (rc == PTSC_OK && kind == PTSC__C_REDUCE)
        rc = check_root(root, call);
    /* Elements of the input: one block per rank for reduce_scatter_block. */
    int scount = count;
    if (rc == PTSC_OK && kind == PTSC__C_RSB && count > 0 && count > INT_MAX / n)
        rc = ptsc__err(PTSC_ERR_COUNT, "%s: %d blocks of %d elements exceed an int", call, n, count);
    if (kind == PTSC__C_RSB && rc == PTSC_OK)
        scount = count * n;
    int gets = kind != PTSC__C_REDUCE || ptsc__g.rank == root;
    if (rc == PTSC_OK)
        rc = check_op(op, call);
    if (rc == PTSC_OK && !in_place)
        rc = ptsc__check_buf_side(sbuf, scount, type, call, "send", &sbytes);
    if (rc == PTSC_OK && gets)
        rc = ptsc__check_buf_side(rbuf, in_place ? scount : count, type, call, "receive", &rbytes);
    if (rc == PTSC_OK && in_place && !gets)
        rc = ptsc__err(PTSC_ERR_ARG, "%s: MPI_IN_PLACE is only valid at the root", call);
    if (rc == PTSC_OK)
        rc = check_op_type(op, type, call);
    if (rc == PTSC_OK && shared_mode())
        rc = ptsc__layout_of(type, scount, &c->L, call);
    if (rc == PTSC_OK && shared_mode() && !c->L.dense && c->L.size > INT_MAX)
        rc = ptsc__err(
            PTSC_ERR_UNSUPPORTED,
            "%s: PTSC_COMM=shared reduces a datatype with holes only up to INT_MAX bytes per element", call);
    if (rc != PTSC_OK)
        return rc;
    c->snd = (ptsc__side_t){(void *)sbuf, scount, NULL, NULL, type, 0};
    c->rcv = (ptsc__side_t){gets ? rbuf : NULL, count, NULL, NULL, type, 0};
    c->op = op;
    c->sends = !in_place;
    c->recvs = gets;
    c->s_in_place = in_place;
    /* Exscan leaves rank 0's result undefined, as MPI does: nothing is copied back there. */
    c->copy_out = gets && !(kind == PTSC__C_EXSCAN && ptsc__g.rank == 0);
    c->bytes = in_place ? rbytes : sbytes;
    return stage(*ctx, c, sbytes, rbytes, in_place, shared_mode());
}

/* One side's buffer and its size in bytes: `count` elements, `n` blocks of
 * `count`, or up to the furthest block of counts / displs. */
static int check_side(const ptsc__side_t *x, int v, const char *what, const char *call, size_t *bytes)
{
    int n = ptsc__g.nranks, end = x->count;
    if (v) {
        if (!x->counts || !x->displs)
            return ptsc__err(PTSC_ERR_ARG, "%s: %s %s array is NULL", call, what,
                             x->counts ? "displacement" : "count");
        end = 0;
        for (int i = 0; i < n; i++) {
            if (x->counts[i] < 0)
                return ptsc__err(PTSC_ERR_COUNT, "%s: %s count %d (rank %d) is negative", call, what,
                                 x->counts[i], i);
            if (x->displs[i] < 0)
                return ptsc__err(PTSC_ERR_ARG, "%s: %s displacement %d (rank %d) is negative", call, what,
                                 x->displs[i], i);
            if (x->counts[i] > INT_MAX - x->displs[i])
                return ptsc__err(PTSC_ERR_COUNT, "%s: %s block of rank %d ends beyond INT_MAX elements", call,
                                 what, i);
            if (x->counts[i] > 0 && x->displs[i] + x->counts[i] > end)
                end = x->displs[i] + x->counts[i];
        }
    }
    int rc = ptsc__check_buf_side(x->buf, end, x->type, call, what, bytes);
    if (rc == PTSC_OK && !v && x->per_peer) {
        if (*bytes > (size_t)PTRDIFF_MAX / (size_t)n)
            return ptsc__err(PTSC_ERR_COUNT, "%s: %d blocks of this size exceed the address space", call, n);
        *bytes *= (size_t)n;
    }
    return rc;
}

/* Gathers, scatters and exchanges: `kind` says who sends and receives, `v`
 * that counts and displacements come per rank (arrays) instead of one
 * count. Arguments that MPI declares insignificant at a rank (a gather's
 * receive side off the root, a scatter's send side) are not checked there. */
int ptsc__coll_prep_exchange(ptsc_ctx_t **ctx, int kind, int v, int root, const ptsc__side_t *sx,
                             const ptsc__side_t *rx, const char *call, ptsc__coll_t *c)
{
    size_t sbytes = 0, rbytes = 0;
    int rooted = kind == PTSC__C_GATHER || kind == PTSC__C_SCATTER;
    coll_init(c, kind, rooted ? root : -1, call);
    int rc = begin(ctx, call);
    if (rc == PTSC_OK && rooted)
        rc = check_root(root, call);
    if (rc != PTSC_OK)
        return rc;
    int is_root = ptsc__g.rank == root, s_in_place = sx->buf == MPI_IN_PLACE,
        r_in_place = rx->buf == MPI_IN_PLACE;
    int sends = kind != PTSC__C_SCATTER || is_root, recvs = kind != PTSC__C_GATHER || is_root;
    /* In place: a gather's send side at the root, a scatter's receive side at
     * the root, an allgather's or alltoall's send side (PTSC_COMM=dup). */
    int s_ok = kind == PTSC__C_GATHER ? is_root : kind != PTSC__C_SCATTER,
        r_ok = kind == PTSC__C_SCATTER && is_root;
    if (sends && s_in_place && !s_ok)
        rc = ptsc__err(PTSC_ERR_ARG, "%s: MPI_IN_PLACE is not valid as the send buffer here", call);
    if (rc == PTSC_OK && recvs && r_in_place && !r_ok)
        rc = ptsc__err(PTSC_ERR_ARG, "%s: MPI_IN_PLACE is not valid as the receive buffer here", call);
    if (rc == PTSC_OK && sends && !s_in_place)
        rc = check_side(sx, v && sx->per_peer, "send", call, &sbytes);
    if (rc == PTSC_OK && recvs && !r_in_place)
        rc = check_side(rx, v && rx->per_peer, "receive", call, &rbytes);
    if (rc == PTSC_OK && s_in_place && !rooted && shared_mode())
        rc = ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: MPI_IN_PLACE is not supported with PTSC_COMM=shared", call);
    if (rc != PTSC_OK)
        return rc;
    c->v = v;
    c->snd = *sx;
    c->rcv = *rx;
    c->sends = sends;
    c->recvs = recvs;
    c->s_in_place = sends && s_in_place;
    c->r_in_place = recvs && r_in_place;
    c->copy_out = recvs;
    c->bytes = sends ? sbytes : rbytes;
    if (!sends)
        c->snd.buf = NULL;
    if (!recvs)
        c->rcv.buf = NULL;
    /* A receive buffer is copied in when MPI does not write all of it: in
     * place, or with displacements that may leave gaps. */
    int in_place = c->s_in_place || c->r_in_place;
    return stage(*ctx, c, sbytes, rbytes, in_place || (v && rx->per_peer), 0);
}
