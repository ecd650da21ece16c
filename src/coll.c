/*
 * Collectives over the calling thread's lane: thread t of every rank takes
 * part, roots are ranks.
 *
 * Buffers follow the point-to-point rules: synchronised per scope, and
 * staged through the thread's pinned buffers when MPI cannot read them
 * (inputs copied in and synchronised once, outputs copied back on the
 * thread's stream with no host sync).
 *
 * PTSC_COMM=dup runs MPI's own collectives on lane t. PTSC_COMM=shared has
 * one communicator, on which MPI forbids concurrent collectives from several
 * threads, so ptsc builds them from point-to-point messages in the lane's
 * collective tag space: a dissemination barrier, a binomial broadcast, a
 * reduction folded at the root in rank order (correct for non-commutative
 * operations), scans as a chain in rank order, and linear gathers,
 * scatters and exchanges (one routine for every count and displacement
 * pattern). Reductions there run on the
 * host (MPI_Reduce_local), so device buffers are staged for them.
 *
 * Derived datatypes: the messages carry them as they are, so holes of the
 * caller's buffers are never written; the shared-mode reduction keeps its
 * scratch by the type's true extent and lower bound and copies with
 * MPI_Pack / MPI_Unpack. A predefined operation applies only to predefined
 * datatypes in the MPI standard and is refused on a derived one in both modes
 * (PTSC_ERR_UNSUPPORTED): MPI_Reduce_local would report it on
 * MPI_COMM_WORLD's error handler, which aborts by default.
 */
#include "ptsc_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const void *user;     /* caller's buffer (or MPI_IN_PLACE / NULL) */
    void *wire;           /* what MPI sees */
    ptsc__stagebuf_t *sb; /* pinned copy when staged */
    size_t bytes;
} cbuf_t;

static int shared_mode(void) { return ptsc__g.cfg.comm == PTSC__COMM_SHARED; }

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
    int staged = 0, rc = ptsc__sync_prepare(ctx, buf, &staged, call);
    if (rc != PTSC_OK)
        return rc;
    if (!staged && host_only) {
        ptsc_memclass_t cls;
        if ((rc = ptsc__mem_classify(buf, &cls)) != PTSC_OK)
            return rc;
        staged = cls == PTSC_MEM_DEVICE;
    }
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

static int mpi_rc(int mrc, const char *call)
{
    return mrc == MPI_SUCCESS ? PTSC_OK : ptsc__err_mpi(mrc, call);
}

/* ------------------------------------------------------------------------ */
/* PTSC_COMM=shared: collectives from point-to-point messages               */
/* ------------------------------------------------------------------------ */

/* Where `count` elements of a datatype lie: bytes [lo, lo + span) relative
 * to the buffer pointer, from the true lower bound and true extent (holes
 * inside the span belong to the caller). `dense`: no holes, the elements
 * follow each other, so the span is exactly the data. */
typedef struct {
    MPI_Count size, extent, lo, span;
    int dense;
} layout_t;

static int layout_of(MPI_Datatype t, int count, layout_t *L, const char *call)
{
    MPI_Count lb, true_lb, true_extent;
    memset(L, 0, sizeof *L);
    if (MPI_Type_size_x(t, &L->size) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(t, &lb, &L->extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(t, &true_lb, &true_extent) != MPI_SUCCESS || L->size == MPI_UNDEFINED ||
        L->extent == MPI_UNDEFINED || true_extent == MPI_UNDEFINED || L->size < 0)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", call);
    L->dense = L->size == true_extent && L->extent == L->size;
    if (count == 0 || L->size == 0)
        return PTSC_OK;
    /* (count - 1) * extent, each part bounded so the sum stays far from overflow. */
    const MPI_Count lim = PTRDIFF_MAX / 4;
    MPI_Count step = (MPI_Count)count - 1, mag = L->extent < 0 ? -L->extent : L->extent;
    if (mag > lim || (mag && step > lim / mag) || true_extent > lim || true_lb > lim || true_lb < -lim)
        return ptsc__err(PTSC_ERR_UNSUPPORTED,
                         "%s: %d elements of this datatype span more than the address space", call, count);
    MPI_Count reach = step * L->extent;
    L->lo = true_lb + (reach < 0 ? reach : 0);
    L->span = true_extent + (reach < 0 ? -reach : reach);
    return PTSC_OK;
}

/* Copy `count` elements of `t` from src to dst (same layout), writing only
 * the datatype's bytes: holes of dst are left as they were. Through
 * MPI_Pack / MPI_Unpack (local, thread-safe) in pieces of about PACK_CHUNK
 * bytes, since their sizes are ints; the caller checked that one element's
 * size fits. */
enum { PACK_CHUNK = 1 << 20 };

static int typed_copy(void *dst, const void *src, int count, MPI_Datatype t, const layout_t *L, MPI_Comm comm)
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

static int p_send(int me, int peer, const void *buf, int count, MPI_Datatype t)
{
    ptsc__addr_t a;
    ptsc__lanes_coll_addr(me, peer, 0, &a);
    return MPI_Send(buf, count, t, a.rank, a.tag, a.comm);
}

static int p_recv(int me, int peer, void *buf, int count, MPI_Datatype t)
{
    ptsc__addr_t a;
    ptsc__lanes_coll_addr(me, peer, 0, &a);
    return MPI_Recv(buf, count, t, a.rank, a.tag, a.comm, MPI_STATUS_IGNORE);
}

static int p_barrier(int me)
{
    int n = ptsc__g.nranks, r = ptsc__g.rank;
    for (int k = 1; k < n; k <<= 1) {
        ptsc__addr_t to, from;
        ptsc__lanes_coll_addr(me, (r + k) % n, 0, &to);
        ptsc__lanes_coll_addr(me, (r - k + n) % n, 0, &from);
        int mrc = MPI_Sendrecv(NULL, 0, MPI_BYTE, to.rank, to.tag, NULL, 0, MPI_BYTE, from.rank, from.tag,
                               to.comm, MPI_STATUS_IGNORE);
        if (mrc != MPI_SUCCESS)
            return mrc;
    }
    return MPI_SUCCESS;
}

static int p_bcast(int me, void *buf, int count, MPI_Datatype t, int root)
{
    int n = ptsc__g.nranks, vr = (ptsc__g.rank - root + n) % n, mask = 1, mrc = MPI_SUCCESS;
    while (mask < n) {
        if (vr & mask) {
            mrc = p_recv(me, (vr - mask + root) % n, buf, count, t);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0 && mrc == MPI_SUCCESS; mask >>= 1)
        if (vr + mask < n)
            mrc = p_send(me, (vr + mask + root) % n, buf, count, t);
    return mrc;
}

/* Root folds x_{n-1}, ..., x_0 as x_i op acc, so the result is
 * x_0 op x_1 op ... op x_{n-1} for any operation. The accumulator is the
 * receive buffer itself unless that holds the root's own input (in place);
 * scratch buffers cover the datatype's true span `L`, and every write into
 * the caller's buffer goes through the datatype, so holes stay untouched. */
static int p_reduce(int me, const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
                    const layout_t *L)
{
    int n = ptsc__g.nranks, r = ptsc__g.rank;
    const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    if (r != root)
        return p_send(me, root, mine, count, t);
    MPI_Comm comm = ptsc__lanes_coll_comm(me);
    size_t bytes = L->span > 0 ? (size_t)L->span : 1;
    int own_acc = sbuf == MPI_IN_PLACE && n > 1;
    char *tmp_mem = n > 1 ? malloc(bytes) : NULL, *acc_mem = own_acc ? malloc(bytes) : NULL;
    int mrc = (n > 1 && !tmp_mem) || (own_acc && !acc_mem) ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    /* Typed pointers whose span starts at the scratch memory. */
    char *tmp = tmp_mem ? tmp_mem - L->lo : NULL, *acc = own_acc ? (acc_mem ? acc_mem - L->lo : NULL) : rbuf;
    for (int i = n - 1; i >= 0 && mrc == MPI_SUCCESS; i--) {
        if (i == n - 1)
            mrc = i == r ? typed_copy(acc, mine, count, t, L, comm) : p_recv(me, i, acc, count, t);
        else if (i == r)
            mrc = MPI_Reduce_local(mine, acc, count, t, op);
        else if ((mrc = p_recv(me, i, tmp, count, t)) == MPI_SUCCESS)
            mrc = MPI_Reduce_local(tmp, acc, count, t, op);
    }
    if (mrc == MPI_SUCCESS && own_acc)
        mrc = typed_copy(rbuf, acc, count, t, L, comm);
    free(acc_mem);
    free(tmp_mem);
    return mrc;
}

/* One side (sends or receives) of a linear exchange. Peer i's block holds
 * counts[i] elements at displs[i] extents, or with a scalar count `count`
 * elements at i * count extents (`blocked`) or at the start. `peer` says
 * with whom: PEER_ALL, one rank, or PEER_NONE. */
enum { PEER_ALL = -1, PEER_NONE = -2 };

typedef struct {
    void *buf;
    int count;
    const int *counts, *displs;
    MPI_Datatype type;
    int peer, blocked;
} side_t;

static int side_block(const side_t *s, int i, MPI_Count ext, char **at, int *n)
{
    if (s->peer == PEER_NONE || (s->peer >= 0 && s->peer != i))
        return 0;
    *n = s->counts ? s->counts[i] : s->count;
    MPI_Aint first = s->displs ? s->displs[i] : (s->blocked ? (MPI_Aint)i * s->count : 0);
    *at = (char *)s->buf + first * (MPI_Aint)ext;
    return 1;
}

/* Every receive is posted first, then every send, then all are waited for;
 * MPI applies the lower bound itself, extents may be negative. `skip_self`:
 * the rank's own block is in place already (MPI_IN_PLACE at a root). */
static int p_exchange(int me, const side_t *snd, const side_t *rcv, int skip_self)
{
    int n = ptsc__g.nranks, mrc = MPI_SUCCESS, nreq = 0;
    MPI_Count lb, sext = 0, rext = 0;
    if ((mrc = MPI_Type_get_extent_x(snd->type, &lb, &sext)) != MPI_SUCCESS ||
        (mrc = MPI_Type_get_extent_x(rcv->type, &lb, &rext)) != MPI_SUCCESS)
        return mrc;
    MPI_Request *reqs = malloc(2 * (size_t)n * sizeof *reqs);
    if (!reqs)
        return MPI_ERR_NO_MEM;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n && mrc == MPI_SUCCESS; i++) {
            const side_t *s = pass ? snd : rcv;
            char *at;
            int cnt;
            if ((skip_self && i == ptsc__g.rank) || !side_block(s, i, pass ? sext : rext, &at, &cnt))
                continue;
            ptsc__addr_t a;
            ptsc__lanes_coll_addr(me, i, 0, &a);
            mrc = pass ? MPI_Isend(at, cnt, s->type, a.rank, a.tag, a.comm, &reqs[nreq++])
                       : MPI_Irecv(at, cnt, s->type, a.rank, a.tag, a.comm, &reqs[nreq++]);
        }
        /* GCC 12 with MPICH's mpi.h warns here (-Wstringop-overflow: "accessing
         * 20 bytes in a region of size 0"): MPICH defines MPI_STATUSES_IGNORE as
         * (MPI_Status *)1 and declares the parameter as an array, so GCC takes the
         * constant for a zero-size array. A false positive: MPI writes no status
         * when told to ignore them. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
    int wrc = MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
    free(reqs);
    return mrc != MPI_SUCCESS ? mrc : wrc;
}

/* Prefix reductions as a chain in rank order: rank r receives
 * P = x_0 op ... op x_{r-1} from r - 1 and passes P op x_r on, so the fold
 * keeps the ranks' order for any operation. Scan: rbuf = P op x_r;
 * exscan: rbuf = P (rank 0's is not written). */
static int p_scan(int me, const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int exclusive,
                  const layout_t *L)
{
    int n = ptsc__g.nranks, r = ptsc__g.rank, mrc = MPI_SUCCESS;
    MPI_Comm comm = ptsc__lanes_coll_comm(me);
    const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    size_t bytes = L->span > 0 ? (size_t)L->span : 1;
    char *pre_mem = r > 0 ? malloc(bytes) : NULL, *out_mem = exclusive ? malloc(bytes) : NULL;
    if ((r > 0 && !pre_mem) || (exclusive && !out_mem))
        mrc = MPI_ERR_NO_MEM;
    char *pre = pre_mem ? pre_mem - L->lo : NULL, *out = exclusive && out_mem ? out_mem - L->lo : rbuf;
    /* out = P op x_r (x_r alone at rank 0), what the next rank receives. */
    if (mrc == MPI_SUCCESS && r > 0)
        mrc = p_recv(me, r - 1, pre, count, t);
    if (mrc == MPI_SUCCESS)
        mrc = typed_copy(out, mine, count, t, L, comm);
    if (mrc == MPI_SUCCESS && r > 0)
        mrc = MPI_Reduce_local(pre, out, count, t, op);
    if (mrc == MPI_SUCCESS && r + 1 < n)
        mrc = p_send(me, r + 1, out, count, t);
    if (mrc == MPI_SUCCESS && exclusive && r > 0)
        mrc = typed_copy(rbuf, pre, count, t, L, comm);
    free(pre_mem);
    free(out_mem);
    return mrc;
}

/* ------------------------------------------------------------------------ */
/* Public calls                                                              */
/* ------------------------------------------------------------------------ */

int ptsc_barrier(ptsc_ctx_t *ctx)
{
    int rc = begin(&ctx, "ptsc_barrier");
    if (rc != PTSC_OK)
        return rc;
    int me = ctx->index;
    ctx->stats.collectives++;
    ptsc__nvtx_push("ptsc_barrier");
    ptsc__wait_begin(ctx, "ptsc_barrier", PTSC__WAIT_COLL, -1, -1, -1, 0);
    rc = shared_mode() ? p_barrier(me) : MPI_Barrier(ptsc__lanes_coll_comm(me));
    ptsc__wait_end(ctx);
    ptsc__nvtx_pop();
    return mpi_rc(rc, "ptsc_barrier");
}

int ptsc_bcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int root)
{
    const char *call = "ptsc_bcast";
    size_t bytes = 0;
    int rc = begin(&ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf(buf, count, type, call, &bytes);
    if (rc == PTSC_OK)
        rc = check_root(root, call);
    if (rc != PTSC_OK)
        return rc;
    int is_root = ptsc__g.rank == root, me = ctx->index;
    ctx->stats.collectives++;
    cbuf_t b;
    rc = cbuf_in(ctx, buf, bytes, type, is_root, 0, &b, call);
    if (rc == PTSC_OK)
        rc = cbuf_ready(ctx, &b, NULL);
    if (rc == PTSC_OK) {
        ptsc__nvtx_push("%s root %d %zu B", call, root, bytes);
        ptsc__wait_begin(ctx, call, PTSC__WAIT_COLL, root, -1, -1, bytes);
        rc = mpi_rc(shared_mode() ? p_bcast(me, b.wire, count, type, root)
                                  : MPI_Bcast(b.wire, count, type, root, ptsc__lanes_coll_comm(me)),
                    call);
        ptsc__wait_end(ctx);
        ptsc__nvtx_pop();
    }
    return cbuf_out(ctx, &b, !is_root, rc);
}

/* Reductions share their checks, staging and dispatch; they differ in who
 * gets a result and, for reduce_scatter_block, in the input's size (one
 * block of `count` elements per rank). */
enum { K_REDUCE, K_ALLREDUCE, K_SCAN, K_EXSCAN, K_RSB };

static int reduce_common(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                         MPI_Op op, int root, int kind, const char *call)
{
    size_t sbytes = 0, rbytes = 0;
    int n = ptsc__g.nranks, rc = begin(&ctx, call), in_place = sbuf == MPI_IN_PLACE;
    if (rc == PTSC_OK && kind == K_REDUCE)
        rc = check_root(root, call);
    /* Elements of the input: one block per rank for reduce_scatter_block. */
    int scount = count;
    if (rc == PTSC_OK && kind == K_RSB && count > 0 && count > INT_MAX / n)
        rc = ptsc__err(PTSC_ERR_COUNT, "%s: %d blocks of %d elements exceed an int", call, n, count);
    if (kind == K_RSB && rc == PTSC_OK)
        scount = count * n;
    int gets = kind != K_REDUCE || ptsc__g.rank == root;
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
    layout_t L;
    if (rc == PTSC_OK && shared_mode())
        rc = layout_of(type, scount, &L, call);
    if (rc == PTSC_OK && shared_mode() && !L.dense && L.size > INT_MAX)
        rc = ptsc__err(
            PTSC_ERR_UNSUPPORTED,
            "%s: PTSC_COMM=shared reduces a datatype with holes only up to INT_MAX bytes per element", call);
    if (rc != PTSC_OK)
        return rc;
    int me = ctx->index, host_only = shared_mode();
    /* Exscan leaves rank 0's result undefined, as MPI does: nothing is copied back there. */
    int writes = gets && !(kind == K_EXSCAN && ptsc__g.rank == 0);
    ctx->stats.collectives++;
    cbuf_t s = {0}, r = {0};
    rc = cbuf_in(ctx, sbuf, sbytes, type, 1, host_only, &s, call);
    if (rc == PTSC_OK && gets)
        rc = cbuf_in(ctx, rbuf, rbytes, type, in_place, host_only, &r, call);
    if (rc == PTSC_OK)
        rc = cbuf_ready(ctx, &s, &r);
    if (rc == PTSC_OK) {
        MPI_Comm comm = ptsc__lanes_coll_comm(me);
        const void *sw = in_place ? MPI_IN_PLACE : s.wire;
        int mrc = MPI_SUCCESS;
        ptsc__nvtx_push("%s %zu B", call, in_place ? rbytes : sbytes);
        ptsc__wait_begin(ctx, call, PTSC__WAIT_COLL, kind == K_REDUCE ? root : -1, -1, -1,
                         in_place ? rbytes : sbytes);
        if (!shared_mode()) {
            if (kind == K_REDUCE)
                mrc = MPI_Reduce(sw, gets ? r.wire : NULL, count, type, op, root, comm);
            else if (kind == K_ALLREDUCE)
                mrc = MPI_Allreduce(sw, r.wire, count, type, op, comm);
            else if (kind == K_SCAN)
                mrc = MPI_Scan(sw, r.wire, count, type, op, comm);
            else if (kind == K_EXSCAN)
                mrc = MPI_Exscan(sw, r.wire, count, type, op, comm);
            else
                mrc = MPI_Reduce_scatter_block(sw, r.wire, count, type, op, comm);
        } else if (kind == K_SCAN || kind == K_EXSCAN) {
            mrc = p_scan(me, sw, r.wire, count, type, op, kind == K_EXSCAN, &L);
        } else if (kind == K_RSB) {
            /* Reduced whole at rank 0 into scratch, then scattered. */
            char *acc_mem = ptsc__g.rank == 0 ? malloc(L.span > 0 ? (size_t)L.span : 1) : NULL;
            char *acc = acc_mem ? acc_mem - L.lo : NULL;
            if (ptsc__g.rank == 0 && !acc_mem)
                mrc = MPI_ERR_NO_MEM;
            if (mrc == MPI_SUCCESS)
                mrc = p_reduce(me, in_place ? r.wire : s.wire, acc, scount, type, op, 0, &L);
            side_t snd = {acc, count, NULL, NULL, type, ptsc__g.rank == 0 ? PEER_ALL : PEER_NONE, 1};
            side_t rcv = {r.wire, count, NULL, NULL, type, 0, 0};
            if (mrc == MPI_SUCCESS)
                mrc = p_exchange(me, &snd, &rcv, 0);
            free(acc_mem);
        } else {
            mrc = p_reduce(me, sw, gets ? r.wire : NULL, count, type, op, kind == K_ALLREDUCE ? 0 : root, &L);
            if (mrc == MPI_SUCCESS && kind == K_ALLREDUCE)
                mrc = p_bcast(me, r.wire, count, type, 0);
        }
        ptsc__wait_end(ctx);
        ptsc__nvtx_pop();
        rc = mpi_rc(mrc, call);
    }
    rc = cbuf_out(ctx, &s, 0, rc);
    return cbuf_out(ctx, &r, writes, rc);
}

int ptsc_reduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                int root)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, root, K_REDUCE, "ptsc_reduce");
}

int ptsc_allreduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, K_ALLREDUCE, "ptsc_allreduce");
}

int ptsc_scan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, K_SCAN, "ptsc_scan");
}

int ptsc_exscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, K_EXSCAN, "ptsc_exscan");
}

int ptsc_reduce_scatter_block(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                              MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, K_RSB, "ptsc_reduce_scatter_block");
}

/* Gathers, scatters and exchanges: `kind` says who sends and receives, `v`
 * that counts and displacements come per rank (arrays) instead of one
 * count. Arguments that MPI declares insignificant at a rank (a gather's
 * receive side off the root, a scatter's send side) are not checked there. */
enum { X_GATHER, X_SCATTER, X_ALLGATHER, X_ALLTOALL };

typedef struct {
    const void *buf;
    int count;
    const int *counts, *displs;
    MPI_Datatype type;
    int per_peer; /* one block per rank */
} xside_t;

/* One side's buffer and its size in bytes: `count` elements, `n` blocks of
 * `count`, or up to the furthest block of counts / displs. */
static int check_side(const xside_t *x, int v, const char *what, const char *call, size_t *bytes)
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
        if (*bytes > SIZE_MAX / (size_t)n)
            return ptsc__err(PTSC_ERR_COUNT, "%s: %d blocks of this size exceed the address space", call, n);
        *bytes *= (size_t)n;
    }
    return rc;
}

static int exchange_common(ptsc_ctx_t *ctx, int kind, int v, int root, const xside_t *sx, const xside_t *rx,
                           const char *call)
{
    size_t sbytes = 0, rbytes = 0;
    int rc = begin(&ctx, call), rooted = kind == X_GATHER || kind == X_SCATTER;
    if (rc == PTSC_OK && rooted)
        rc = check_root(root, call);
    if (rc != PTSC_OK)
        return rc;
    int is_root = ptsc__g.rank == root, s_in_place = sx->buf == MPI_IN_PLACE,
        r_in_place = rx->buf == MPI_IN_PLACE;
    int sends = kind != X_SCATTER || is_root, recvs = kind != X_GATHER || is_root;
    /* In place: a gather's send side at the root, a scatter's receive side at
     * the root, an allgather's or alltoall's send side (PTSC_COMM=dup). */
    int s_ok = kind == X_GATHER ? is_root : kind != X_SCATTER, r_ok = kind == X_SCATTER && is_root;
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
    int me = ctx->index, in_place = (sends && s_in_place) || (recvs && r_in_place);
    ctx->stats.collectives++;
    cbuf_t s = {0}, r = {0};
    /* A receive buffer is copied in when MPI does not write all of it: in
     * place, or with displacements that may leave gaps. */
    if (sends)
        rc = cbuf_in(ctx, sx->buf, sbytes, sx->type, 1, 0, &s, call);
    if (rc == PTSC_OK && recvs)
        rc = cbuf_in(ctx, rx->buf, rbytes, rx->type, in_place || (v && rx->per_peer), 0, &r, call);
    if (rc == PTSC_OK)
        rc = cbuf_ready(ctx, &s, &r);
    if (rc == PTSC_OK) {
        void *sw = s_in_place ? MPI_IN_PLACE : s.wire, *rw = r_in_place ? MPI_IN_PLACE : r.wire;
        MPI_Comm comm = ptsc__lanes_coll_comm(me);
        int mrc;
        ptsc__nvtx_push("%s %zu B", call, sends ? sbytes : rbytes);
        ptsc__wait_begin(ctx, call, PTSC__WAIT_COLL, rooted ? root : -1, -1, -1, sends ? sbytes : rbytes);
        if (shared_mode()) {
            int to = kind == X_GATHER ? root : PEER_ALL, from = kind == X_SCATTER ? root : PEER_ALL;
            side_t snd = {s.wire,      sx->count, sx->counts, sx->displs, sx->type, sends ? to : PEER_NONE,
                          sx->per_peer};
            side_t rcv = {r.wire,      rx->count, rx->counts, rx->displs, rx->type, recvs ? from : PEER_NONE,
                          rx->per_peer};
            mrc = p_exchange(me, &snd, &rcv, in_place);
        } else if (kind == X_GATHER) {
            mrc = v ? MPI_Gatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, root, comm)
                    : MPI_Gather(sw, sx->count, sx->type, rw, rx->count, rx->type, root, comm);
        } else if (kind == X_SCATTER) {
            mrc = v ? MPI_Scatterv(sw, sx->counts, sx->displs, sx->type, rw, rx->count, rx->type, root, comm)
                    : MPI_Scatter(sw, sx->count, sx->type, rw, rx->count, rx->type, root, comm);
        } else if (kind == X_ALLGATHER && v && ptsc__g.nranks == 1) {
            /* MPICH 4.0.2's MPI_Allgatherv on one process writes at
             * displacement 0 whatever displs says; a gatherv to the only
             * rank means the same and is right there. */
            mrc = MPI_Gatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, 0, comm);
        } else if (kind == X_ALLGATHER) {
            mrc = v ? MPI_Allgatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, comm)
                    : MPI_Allgather(sw, sx->count, sx->type, rw, rx->count, rx->type, comm);
        } else {
            mrc = v ? MPI_Alltoallv(sw, sx->counts, sx->displs, sx->type, rw, rx->counts, rx->displs,
                                    rx->type, comm)
                    : MPI_Alltoall(sw, sx->count, sx->type, rw, rx->count, rx->type, comm);
        }
        ptsc__wait_end(ctx);
        ptsc__nvtx_pop();
        rc = mpi_rc(mrc, call);
    }
    rc = cbuf_out(ctx, &s, 0, rc);
    return cbuf_out(ctx, &r, recvs, rc);
}

#define SIDE(b, n, ns, ds, t, pp) (&(xside_t){(b), (n), (ns), (ds), (t), (pp)})

int ptsc_allgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype)
{
    return exchange_common(ctx, X_ALLGATHER, 0, 0, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_allgather");
}

int ptsc_alltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype)
{
    return exchange_common(ctx, X_ALLTOALL, 0, 0, SIDE(sbuf, scount, NULL, NULL, stype, 1),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_alltoall");
}

int ptsc_gather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, X_GATHER, 0, root, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_gather");
}

int ptsc_scatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, X_SCATTER, 0, root, SIDE(sbuf, scount, NULL, NULL, stype, 1),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 0), "ptsc_scatter");
}

int ptsc_gatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                 const int rcounts[], const int displs[], MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, X_GATHER, 1, root, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, 0, rcounts, displs, rtype, 1), "ptsc_gatherv");
}

int ptsc_scatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                  MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, X_SCATTER, 1, root, SIDE(sbuf, 0, scounts, displs, stype, 1),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 0), "ptsc_scatterv");
}

int ptsc_allgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                    const int rcounts[], const int displs[], MPI_Datatype rtype)
{
    return exchange_common(ctx, X_ALLGATHER, 1, 0, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, 0, rcounts, displs, rtype, 1), "ptsc_allgatherv");
}

int ptsc_alltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                   MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                   MPI_Datatype rtype)
{
    return exchange_common(ctx, X_ALLTOALL, 1, 0, SIDE(sbuf, 0, scounts, sdispls, stype, 1),
                           SIDE(rbuf, 0, rcounts, rdispls, rtype, 1), "ptsc_alltoallv");
}
