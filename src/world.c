/*
 * Collectives over every thread of every rank (the "world of threads").
 *
 * Who takes part: threads 0 .. n-1 of every rank, n given at each call
 * (PTSC_WORLD_TEAM: the calling OpenMP team) and equal on every thread and
 * every rank. World calls of a rank are made by those n threads together,
 * one call at a time, in the same order on every rank, as MPI collectives
 * on one communicator.
 *
 * How a call runs (hierarchical):
 *  1. Each thread checks its arguments, syncs its buffers per scope and
 *     makes its input readable on the host (a device buffer is copied to
 *     one of the thread's pinned buffers), then arrives at the rank's round:
 *     it publishes the host pointer of its input under the round's lock.
 *     The first arrival describes the round (call, n, count, datatype, op,
 *     root); a later thread that describes another call, or whose arguments
 *     failed, marks the round failed.
 *  2. The last thread to arrive is the combiner: it folds the inputs in
 *     thread index order on the host (MPI_Reduce_local), makes the rank's
 *     one MPI collective on a communicator of world.c's own (never a lane:
 *     it cannot mix with lane traffic; one combiner at a time uses it, so
 *     both PTSC_COMM modes are safe), folds the ranks' partials in rank
 *     order, and releases the round.
 *  3. Every thread copies its result from the round's scratch memory (a
 *     device buffer through a pinned buffer and a copy on the thread's
 *     stream, as the lane collectives do) and returns.
 *
 * Agreement: the thread count, call, count, element size, op and root are
 * compared across ranks in the same MPI collective round (allreduce: a
 * header in each rank's gathered block; the others: one MPI_Allreduce of
 * the header before the data), and a failure of any thread of any rank
 * fails the call on every thread of every rank (PTSC_ERR_MISMATCH; the
 * thread whose arguments were wrong gets its own status), so no rank is
 * left waiting in a collective the others skipped.
 *
 * Deterministic reductions: with p_r = x_{r,0} op x_{r,1} op ... op
 * x_{r,n-1} (left to right, thread index order), the result is p_0 op p_1
 * op ... op p_{R-1} (left to right, rank order) on every rank, the same
 * bits in every run. Each step is MPI_Reduce_local(x, acc): acc = x op acc,
 * which is acc op x since MPI's predefined operations are commutative.
 * The ranks' partials are gathered (allreduce: MPI_Allgather; reduce:
 * MPI_Gather to the root rank) rather than reduced by MPI, whose order is
 * its own.
 *
 * Waiting: a thread waiting for its round spins with sched_yield for
 * PTSC__SPIN_NS, then sleeps on the round's condition variable.
 */
#include "ptsc_internal.h"

#include <limits.h>
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { W_BARRIER, W_BCAST, W_REDUCE, W_ALLREDUCE, W_ALLGATHER };
static const char *const kind_name[] = {"ptsc_world_barrier", "ptsc_world_bcast", "ptsc_world_reduce",
                                        "ptsc_world_allreduce", "ptsc_world_allgather"};

/* What a call is, as every participant must describe it alike. */
typedef struct {
    int kind, n, count, root_rank, root_thread, opi;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Count size;   /* bytes of one element's data */
    MPI_Count extent; /* stride of elements */
    size_t span;      /* bytes `count` elements occupy: (count - 1) * extent + true extent */
} wdesc_t;

/* Verdict of a finished round, kept per parity of the round number: a
 * thread may start the next round before a slower one has read this. */
typedef struct {
    int status;
    char detail[PTSC__DETAIL_LEN];
    const char *res; /* the result in scratch memory */
} wout_t;

static struct {
    MPI_Comm comm;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    atomic_uint gen; /* rounds released so far */
    /* The open round, under lock. */
    int arrived;
    wdesc_t desc;
    int failed; /* a participant failed or described another call */
    char fail_detail[PTSC__DETAIL_LEN];
    const void **in; /* per thread index: host pointer of its input */
    wout_t out[2];
    /* Participants of the last round that have not yet copied its outcome
     * and result: the next combiner waits for none before it overwrites
     * them (a thread left out of the next rounds may still be reading). */
    atomic_int readers;
    /* Scratch memory, used by one combiner at a time. */
    char *scratch;
    size_t scratch_cap;
} W = {.comm = MPI_COMM_NULL, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

int ptsc__world_setup(MPI_Comm world)
{
    W.in = calloc((size_t)ptsc__g.nthreads, sizeof *W.in);
    if (!W.in)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: world collective slots");
    int rc = MPI_Comm_dup(world, &W.comm);
    if (rc != MPI_SUCCESS) {
        free(W.in);
        W.in = NULL;
        return ptsc__err_mpi(rc, "ptsc_init: MPI_Comm_dup of the world collective communicator");
    }
    MPI_Comm_set_errhandler(W.comm, MPI_ERRORS_RETURN);
    W.arrived = 0;
    W.failed = 0;
    return PTSC_OK;
}

void ptsc__world_teardown(void)
{
    if (W.comm != MPI_COMM_NULL)
        MPI_Comm_free(&W.comm);
    W.comm = MPI_COMM_NULL;
    free(W.in);
    W.in = NULL;
    free(W.scratch);
    W.scratch = NULL;
    W.scratch_cap = 0;
}

/* ------------------------------------------------------------------------ */
/* Argument checks                                                           */
/* ------------------------------------------------------------------------ */

/* MPI's predefined reduction operations (MPI_REPLACE and MPI_NO_OP are for
 * one-sided calls only), and the datatype classes each applies to (MPI 3.1,
 * 5.9.2). The index of an op travels in the cross-rank header. */
enum { C_INT = 1, C_FLOAT = 2, C_LOGICAL = 4, C_COMPLEX = 8, C_BYTE = 16, C_PAIR = 32 };

static int op_index(MPI_Op op, int *classes)
{
    const struct {
        MPI_Op op;
        int classes;
    } ops[] = {{MPI_MAX, C_INT | C_FLOAT},
               {MPI_MIN, C_INT | C_FLOAT},
               {MPI_SUM, C_INT | C_FLOAT | C_COMPLEX},
               {MPI_PROD, C_INT | C_FLOAT | C_COMPLEX},
               {MPI_LAND, C_INT | C_LOGICAL},
               {MPI_LOR, C_INT | C_LOGICAL},
               {MPI_LXOR, C_INT | C_LOGICAL},
               {MPI_BAND, C_INT | C_BYTE},
               {MPI_BOR, C_INT | C_BYTE},
               {MPI_BXOR, C_INT | C_BYTE},
               {MPI_MAXLOC, C_PAIR},
               {MPI_MINLOC, C_PAIR}};
    for (int i = 0; i < (int)(sizeof ops / sizeof ops[0]); i++)
        if (op == ops[i].op) {
            *classes = ops[i].classes;
            return i;
        }
    return -1;
}

static int type_class(MPI_Datatype t)
{
    const MPI_Datatype ints[] = {MPI_INT,
                                 MPI_LONG,
                                 MPI_SHORT,
                                 MPI_UNSIGNED_SHORT,
                                 MPI_UNSIGNED,
                                 MPI_UNSIGNED_LONG,
                                 MPI_LONG_LONG_INT,
                                 MPI_LONG_LONG,
                                 MPI_UNSIGNED_LONG_LONG,
                                 MPI_SIGNED_CHAR,
                                 MPI_UNSIGNED_CHAR,
                                 MPI_INT8_T,
                                 MPI_INT16_T,
                                 MPI_INT32_T,
                                 MPI_INT64_T,
                                 MPI_UINT8_T,
                                 MPI_UINT16_T,
                                 MPI_UINT32_T,
                                 MPI_UINT64_T,
                                 MPI_AINT,
                                 MPI_OFFSET,
                                 MPI_COUNT};
    const MPI_Datatype floats[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE};
    const MPI_Datatype complexes[] = {MPI_C_COMPLEX, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
                                      MPI_C_LONG_DOUBLE_COMPLEX};
    const MPI_Datatype pairs[] = {MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT,
                                  MPI_2INT,      MPI_SHORT_INT,  MPI_LONG_DOUBLE_INT};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (t == ints[i])
            return C_INT;
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        if (t == floats[i])
            return C_FLOAT;
    for (size_t i = 0; i < sizeof complexes / sizeof complexes[0]; i++)
        if (t == complexes[i])
            return C_COMPLEX;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (t == pairs[i])
            return C_PAIR;
    if (t == MPI_C_BOOL)
        return C_LOGICAL;
    if (t == MPI_BYTE)
        return C_BYTE;
    return 0;
}

/* The participating thread count: `nthreads`, or the OpenMP team's size. */
static int team_size(int nthreads, int me, int *n, const char *call)
{
    if (nthreads == PTSC_WORLD_TEAM) {
        int active = omp_get_active_level();
        if (active == 0)
            return ptsc__err(PTSC_ERR_ARG,
                             "%s: nthreads is PTSC_WORLD_TEAM outside an active OpenMP parallel region; "
                             "pass the number of threads taking part",
                             call);
        if (active > 1)
            return ptsc__err(PTSC_ERR_NESTED,
                             "%s: nthreads is PTSC_WORLD_TEAM in a nested parallel region (active level "
                             "%d); pass the number of threads taking part",
                             call, active);
        nthreads = 1;
        for (int l = 1; l <= omp_get_level(); l++)
            if (omp_get_team_size(l) > 1)
                nthreads = omp_get_team_size(l);
    }
    if (nthreads < 1 || nthreads > ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD, "%s: nthreads %d is outside [1, %d] (PTSC_MAX_THREADS)", call,
                         nthreads, ptsc__g.nthreads);
    if (me >= nthreads)
        return ptsc__err(PTSC_ERR_THREAD,
                         "%s: thread index %d does not take part in a world call of %d threads (indices "
                         "0..%d)",
                         call, me, nthreads, nthreads - 1);
    *n = nthreads;
    return PTSC_OK;
}

/* Datatype, count and op of the call; fills size, extent and span. */
static int check_type(wdesc_t *d, const char *call)
{
    MPI_Count lb, tlb, textent;
    if (d->count < 0)
        return ptsc__err(PTSC_ERR_COUNT, "%s: count %d is negative", call, d->count);
    if (d->type == MPI_DATATYPE_NULL)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is MPI_DATATYPE_NULL", call);
    if (MPI_Type_size_x(d->type, &d->size) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(d->type, &lb, &d->extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(d->type, &tlb, &textent) != MPI_SUCCESS || d->size == MPI_UNDEFINED ||
        d->size < 0 || d->extent < 0 || textent < 0)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", call);
    if (d->kind == W_REDUCE || d->kind == W_ALLREDUCE) {
        int classes = 0, tc = type_class(d->type);
        if (d->op == MPI_OP_NULL)
            return ptsc__err(PTSC_ERR_ARG, "%s: op is MPI_OP_NULL", call);
        d->opi = op_index(d->op, &classes);
        if (d->opi < 0)
            return ptsc__err(PTSC_ERR_UNSUPPORTED,
                             "%s: op is not one of MPI's predefined reduction operations (world reductions "
                             "fold on the host with those only)",
                             call);
        if (!(classes & tc))
            return ptsc__err(PTSC_ERR_UNSUPPORTED,
                             "%s: the op is not defined on this datatype (world reductions take MPI's "
                             "predefined operation and predefined datatype pairs)",
                             call);
    } else if (d->kind != W_BARRIER && !ptsc__type_is_contiguous(d->type)) {
        return ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: the datatype has holes; world calls copy whole bytes",
                         call);
    }
    if (d->count > 0 && (d->extent > 0 || textent > 0)) {
        MPI_Count step = (MPI_Count)d->count - 1;
        if ((d->extent > 0 && step > (MPI_Count)(SIZE_MAX / 4) / d->extent) ||
            textent > (MPI_Count)(SIZE_MAX / 4))
            return ptsc__err(PTSC_ERR_COUNT, "%s: %d elements exceed the address space", call, d->count);
        d->span = (size_t)(step * d->extent + textent);
    }
    if (d->kind == W_ALLGATHER) {
        long long per_rank = (long long)d->n * d->count;
        if (per_rank > INT_MAX || (d->span > 0 && (size_t)d->n * (size_t)ptsc__g.nranks > SIZE_MAX / d->span))
            return ptsc__err(PTSC_ERR_COUNT, "%s: %d threads x %d elements exceed an int per rank", call,
                             d->n, d->count);
    }
    return PTSC_OK;
}

static int check_root(const wdesc_t *d, const char *call)
{
    if (d->root_rank < 0 || d->root_rank >= ptsc__g.nranks)
        return ptsc__err(PTSC_ERR_RANK, "%s: root rank %d is outside [0, %d)", call, d->root_rank,
                         ptsc__g.nranks);
    if (d->root_thread < 0 || d->root_thread >= d->n)
        return ptsc__err(PTSC_ERR_THREAD, "%s: root thread %d is outside the call's threads [0, %d)", call,
                         d->root_thread, d->n);
    return PTSC_OK;
}

static int check_buf(const void *buf, const wdesc_t *d, const char *what, const char *call)
{
    if (!buf && d->count > 0)
        return ptsc__err(PTSC_ERR_NULL_BUFFER, "%s: %s is NULL with count %d", call, what, d->count);
    if (buf == MPI_IN_PLACE)
        return ptsc__err(PTSC_ERR_ARG, "%s: MPI_IN_PLACE is not valid as the %s here", call, what);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* Buffers: host views of device memory (the lane collectives' rules)        */
/* ------------------------------------------------------------------------ */

typedef struct {
    void *user;
    const void *host; /* what the combiner reads */
    ptsc__stagebuf_t *sb;
    int device; /* written through a pinned buffer and the thread's stream */
} wbuf_t;

/* Sync `buf` per scope and tell whether the host may touch it directly. */
static int prepare(ptsc_ctx_t *ctx, void *buf, wbuf_t *w, const char *call)
{
    memset(w, 0, sizeof *w);
    w->user = buf;
    w->host = buf;
    if (!buf)
        return PTSC_OK;
    int staged = 0, rc = ptsc__sync_prepare(ctx, buf, PTSC__FOR_HOST, &staged, call);
    w->device = staged;
    return rc;
}

/* An input readable by the combiner: a device buffer is copied to a pinned one. */
static int input(ptsc_ctx_t *ctx, wbuf_t *w, size_t bytes, MPI_Datatype type, const char *call)
{
    if (!w->device || bytes == 0)
        return PTSC_OK;
    int rc = ptsc__check_contiguous(type, call);
    if (rc == PTSC_OK)
        rc = ptsc__stage_acquire(ctx, bytes, &w->sb);
    if (rc == PTSC_OK) {
        ctx->stats.staged_bytes += bytes;
        ptsc__nvtx_push_copy(1, bytes);
        rc = ptsc__gpu_copy_async(w->sb->host, w->user, bytes, ctx->stream);
        ptsc__nvtx_pop();
        w->host = w->sb->host;
    }
    if (rc == PTSC_OK)
        rc = ptsc__gpu_stream_sync(ctx->stream);
    return rc;
}

/* The result into the caller's buffer; a device buffer through a pinned
 * one, by a copy queued on the thread's stream. */
static int output(ptsc_ctx_t *ctx, const wbuf_t *w, const void *res, size_t bytes, MPI_Datatype type,
                  const char *call)
{
    if (bytes == 0 || w->user == res)
        return PTSC_OK;
    if (!w->device) {
        memcpy(w->user, res, bytes);
        return PTSC_OK;
    }
    ptsc__stagebuf_t *sb = NULL;
    int rc = ptsc__check_contiguous(type, call);
    if (rc == PTSC_OK)
        rc = ptsc__stage_acquire(ctx, bytes, &sb);
    if (rc != PTSC_OK)
        return rc;
    memcpy(sb->host, res, bytes);
    ctx->stats.staged_bytes += bytes;
    ptsc__nvtx_push_copy(0, bytes);
    rc = ptsc__gpu_copy_async(w->user, sb->host, bytes, ctx->stream);
    ptsc__nvtx_pop();
    int rrc = ptsc__stage_release(ctx, sb, rc == PTSC_OK);
    return rc != PTSC_OK ? rc : rrc;
}

static void release_input(ptsc_ctx_t *ctx, wbuf_t *w)
{
    if (w->sb)
        ptsc__stage_release(ctx, w->sb, 0);
    w->sb = NULL;
}

/* ------------------------------------------------------------------------ */
/* The combiner: local fold, one MPI collective, cross-rank fold             */
/* ------------------------------------------------------------------------ */

static int scratch(size_t bytes, char **p)
{
    if (bytes < 64)
        bytes = 64; /* never a NULL scratch, even for count 0 */
    if (bytes > W.scratch_cap) {
        char *s = realloc(W.scratch, bytes);
        if (!s)
            return ptsc__err(PTSC_ERR_NO_MEMORY, "world collective: %zu bytes of scratch memory", bytes);
        W.scratch = s;
        W.scratch_cap = bytes;
    }
    *p = W.scratch;
    return PTSC_OK;
}

static int mpi_rc(int mrc, const char *what)
{
    return mrc == MPI_SUCCESS ? PTSC_OK : ptsc__err_mpi(mrc, what);
}

/* acc = x_0 op x_1 op ... op x_{m-1}, left to right; x_i at base + i * stride
 * or, with base NULL, at W.in[i]. */
static int fold(char *acc, const char *base, size_t stride, int m, const wdesc_t *d, const char *call)
{
    if (d->span == 0)
        return PTSC_OK;
    const void *first = base ? base : W.in[0];
    if (acc != first)
        memcpy(acc, first, d->span);
    for (int i = 1; i < m; i++) {
        const void *x = base ? base + (size_t)i * stride : W.in[i];
        int mrc = MPI_Reduce_local(x, acc, d->count, d->type, d->op);
        if (mrc != MPI_SUCCESS)
            return ptsc__err_mpi(mrc, call);
    }
    return PTSC_OK;
}

/* The header every rank compares: what the call is, and whether it failed. */
enum { H_N, H_KIND, H_COUNT, H_SIZE, H_OP, H_ROOT_RANK, H_ROOT_THREAD, H_FIELDS };
static const char *const field_name[H_FIELDS] = {"thread count", "call",      "count",      "element size",
                                                 "op",           "root rank", "root thread"};

static void header(const wdesc_t *d, long long h[H_FIELDS])
{
    h[H_N] = d->n;
    h[H_KIND] = d->kind;
    h[H_COUNT] = d->count;
    h[H_SIZE] = (long long)d->size;
    h[H_OP] = d->opi;
    h[H_ROOT_RANK] = d->root_rank;
    h[H_ROOT_THREAD] = d->root_thread;
}

/* One MPI_Allreduce: every rank learns whether all describe the same call
 * and whether some rank's round failed (the highest such rank). */
static int agree(const wdesc_t *d, int failed, const char *call)
{
    long long h[H_FIELDS], v[2 * H_FIELDS + 1], hi[2 * H_FIELDS + 1];
    header(d, h);
    for (int i = 0; i < H_FIELDS; i++) {
        v[i] = h[i];
        v[H_FIELDS + i] = -h[i];
    }
    v[2 * H_FIELDS] = failed ? ptsc__g.rank : -1;
    int rc = mpi_rc(MPI_Allreduce(v, hi, 2 * H_FIELDS + 1, MPI_LONG_LONG, MPI_MAX, W.comm), call);
    if (rc != PTSC_OK)
        return rc;
    if (hi[2 * H_FIELDS] >= 0 && !failed)
        return ptsc__err(PTSC_ERR_MISMATCH, "%s: the call failed on rank %lld (its threads have the reason)",
                         call, hi[2 * H_FIELDS]);
    for (int i = 0; i < H_FIELDS && !failed; i++)
        if (hi[i] != -hi[H_FIELDS + i])
            return ptsc__err(PTSC_ERR_MISMATCH, "%s: ranks disagree on the %s (values %lld..%lld)", call,
                             field_name[i], -hi[H_FIELDS + i], hi[i]);
    return PTSC_OK;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Allreduce: each rank's block is its header and its partial; one
 * MPI_Allgather moves them, then every rank folds the partials in rank order. */
enum { HDR_BYTES = 64 };

static int run_allreduce(const wdesc_t *d, int failed, const char **res, const char *call)
{
    int R = ptsc__g.nranks;
    size_t body = align64(d->span), B = HDR_BYTES + body;
    if (B > (size_t)INT_MAX)
        return ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: %zu bytes per rank exceed an int", call, d->span);
    char *s;
    int rc = scratch(B * (size_t)(R + 1), &s);
    if (rc != PTSC_OK)
        return rc; /* no memory to take part in the gather: as MPI, the other ranks are left waiting */
    char *mine = s, *all = s + B;
    long long h[H_FIELDS + 1];
    header(d, h);
    h[H_FIELDS] = failed;
    memset(mine, 0, HDR_BYTES);
    memcpy(mine, h, sizeof h);
    if (!failed && d->span > 0)
        rc = fold(mine + HDR_BYTES, NULL, 0, d->n, d, call);
    if (rc != PTSC_OK)
        h[H_FIELDS] = 1, memcpy(mine, h, sizeof h);
    int mrc = MPI_Allgather(mine, (int)B, MPI_BYTE, all, (int)B, MPI_BYTE, W.comm);
    if (mrc != MPI_SUCCESS)
        return ptsc__err_mpi(mrc, call);
    if (rc != PTSC_OK)
        return rc;
    for (int r = 0; r < R; r++) {
        long long g[H_FIELDS + 1];
        memcpy(g, all + (size_t)r * B, sizeof g);
        if (g[H_FIELDS] && !failed)
            return ptsc__err(PTSC_ERR_MISMATCH,
                             "%s: the call failed on rank %d (its threads have the reason)", call, r);
        for (int i = 0; i < H_FIELDS && !failed; i++)
            if (g[i] != h[i])
                return ptsc__err(PTSC_ERR_MISMATCH,
                                 "%s: ranks disagree on the %s (rank %d: %lld, rank %d: %lld)", call,
                                 field_name[i], ptsc__g.rank, h[i], r, g[i]);
    }
    if (failed)
        return PTSC_ERR_MISMATCH;
    rc = d->span > 0 ? fold(all + HDR_BYTES, all + HDR_BYTES, B, R, d, call) : PTSC_OK;
    *res = all + HDR_BYTES;
    return rc;
}

static int run_round(const wdesc_t *d, int failed, const char **res, const char *call)
{
    if (d->kind == W_ALLREDUCE)
        return run_allreduce(d, failed, res, call);
    int R = ptsc__g.nranks, n = d->n, me = ptsc__g.rank;
    /* Scratch first, so that a rank without it fails the agreement rather
     * than the data collective. */
    size_t stride = (size_t)d->count * (size_t)d->extent, need = 0;
    if (d->kind == W_BCAST)
        need = d->span;
    else if (d->kind == W_REDUCE)
        need = align64(d->span) + (me == d->root_rank ? stride * (size_t)R : 0);
    else if (d->kind == W_ALLGATHER)
        need = d->span * (size_t)n * (size_t)(R + 1);
    char *s = NULL;
    int arc = failed ? PTSC_OK : scratch(need, &s);
    int rc = agree(d, failed || arc != PTSC_OK, call);
    if (failed)
        return PTSC_ERR_MISMATCH;
    if (arc != PTSC_OK || rc != PTSC_OK)
        return arc != PTSC_OK ? arc : rc;
    switch (d->kind) {
    case W_BARRIER:
        return PTSC_OK; /* the agreement was the barrier */
    case W_BCAST:
        /* Every rank's threads read the one buffer of the root rank. */
        if (me == d->root_rank && d->span > 0)
            memcpy(s, W.in[d->root_thread], d->span);
        *res = s;
        return mpi_rc(MPI_Bcast(s, d->count, d->type, d->root_rank, W.comm), call);
    case W_REDUCE: {
        char *all = s + align64(d->span);
        rc = fold(s, NULL, 0, n, d, call);
        if (rc == PTSC_OK)
            rc = mpi_rc(MPI_Gather(s, d->count, d->type, me == d->root_rank ? all : NULL, d->count, d->type,
                                   d->root_rank, W.comm),
                        call);
        if (rc == PTSC_OK && me == d->root_rank)
            rc = fold(all, all, stride, R, d, call);
        *res = all;
        return rc;
    }
    default: { /* W_ALLGATHER: the rank's threads' blocks in index order, then every rank's */
        size_t block = d->span * (size_t)n;
        for (int t = 0; t < n && d->span > 0; t++)
            memcpy(s + (size_t)t * d->span, W.in[t], d->span);
        *res = s + block;
        return mpi_rc(MPI_Allgather(s, n * d->count, d->type, s + block, n * d->count, d->type, W.comm),
                      call);
    }
    }
}

/* ------------------------------------------------------------------------ */
/* The round                                                                 */
/* ------------------------------------------------------------------------ */

static int same_call(const wdesc_t *a, const wdesc_t *b)
{
    return a->kind == b->kind && a->n == b->n && a->count == b->count && a->type == b->type &&
           a->op == b->op && a->root_rank == b->root_rank && a->root_thread == b->root_thread;
}

static void wait_release(unsigned gen)
{
    uint64_t t0 = ptsc__now_ns();
    while (atomic_load_explicit(&W.gen, memory_order_acquire) == gen) {
        if (ptsc__now_ns() - t0 > PTSC__SPIN_NS) {
            pthread_mutex_lock(&W.lock);
            while (atomic_load_explicit(&W.gen, memory_order_acquire) == gen)
                pthread_cond_wait(&W.cond, &W.lock);
            pthread_mutex_unlock(&W.lock);
            return;
        }
        sched_yield();
    }
}

/*
 * Take part in the rank's round as thread `me` with input `in` (host
 * readable) and `own` (PTSC_OK, or this thread's failure, which fails the
 * round everywhere). Returns the round's status; *res is its result.
 */
static int take_part(int me, const wdesc_t *d, const void *in, int own, const char **res, const char *call)
{
    pthread_mutex_lock(&W.lock);
    unsigned gen = atomic_load_explicit(&W.gen, memory_order_relaxed);
    if (W.arrived == 0) {
        W.desc = *d;
        W.failed = 0;
        W.fail_detail[0] = '\0';
    }
    if (!W.failed && own != PTSC_OK) {
        W.failed = 1;
        snprintf(W.fail_detail, sizeof W.fail_detail, "%s: thread %d of rank %d failed: %.380s", call, me,
                 ptsc__g.rank, ptsc__tls()->detail);
    } else if (!W.failed && !same_call(&W.desc, d)) {
        W.failed = 1;
        snprintf(W.fail_detail, sizeof W.fail_detail,
                 "%s: threads of rank %d disagree: thread %d calls %s with %d threads, count %d, root "
                 "(%d, %d), where another calls %s with %d threads, count %d, root (%d, %d) (or another "
                 "datatype or op)",
                 call, ptsc__g.rank, me, kind_name[d->kind], d->n, d->count, d->root_rank, d->root_thread,
                 kind_name[W.desc.kind], W.desc.n, W.desc.count, W.desc.root_rank, W.desc.root_thread);
    }
    W.in[me] = in;
    int last = ++W.arrived == W.desc.n;
    pthread_mutex_unlock(&W.lock);
    wout_t *out = &W.out[gen & 1];
    if (last) {
        /* Every participant has arrived: the round is this thread's. */
        /* The combiner's own detail is its call's, not the round's. */
        ptsc__tls_t *tl = ptsc__tls();
        char saved[PTSC__DETAIL_LEN];
        int unread = tl->unread;
        memcpy(saved, tl->detail, sizeof saved);
        const char *r = NULL;
        while (atomic_load_explicit(&W.readers, memory_order_acquire) > 0)
            sched_yield();
        int rc = run_round(&W.desc, W.failed, &r, call);
        out->status = rc;
        out->res = r;
        if (W.failed)
            snprintf(out->detail, sizeof out->detail, "%s", W.fail_detail);
        else
            snprintf(out->detail, sizeof out->detail, "%s", rc == PTSC_OK ? "" : tl->detail);
        memcpy(tl->detail, saved, sizeof saved);
        tl->unread = unread;
        pthread_mutex_lock(&W.lock);
        atomic_store_explicit(&W.readers, W.arrived, memory_order_relaxed);
        W.arrived = 0;
        atomic_store_explicit(&W.gen, gen + 1, memory_order_release);
        pthread_cond_broadcast(&W.cond);
        pthread_mutex_unlock(&W.lock);
    } else {
        wait_release(gen);
    }
    *res = out->res;
    if (own != PTSC_OK)
        return own;
    return out->status == PTSC_OK ? PTSC_OK : ptsc__err(out->status, "%s", out->detail);
}

/*
 * One world call. `sbuf` is the thread's input (NULL for barrier; the
 * buffer itself for bcast), `rbuf` where its result goes (NULL where it
 * gets none).
 */
static int world_call(ptsc_ctx_t *ctx, int nthreads, wdesc_t *d, const void *sbuf, void *rbuf)
{
    const char *call = kind_name[d->kind];
    int rc = ptsc__ctx_resolve(&ctx, call);
    if (rc == PTSC_OK)
        rc = team_size(nthreads, ctx->index, &d->n, call);
    if (rc != PTSC_OK)
        return rc; /* not a participant: nothing to tell the others */
    int me = ctx->index, R = ptsc__g.nranks;
    int root_here = ptsc__g.rank == d->root_rank && me == d->root_thread;
    int in_place = sbuf == MPI_IN_PLACE;
    /* Which buffers this thread reads and writes, and how many bytes of each. */
    int reads = d->kind != W_BARRIER && (d->kind != W_BCAST || root_here);
    int writes = d->kind == W_ALLREDUCE || d->kind == W_ALLGATHER || (d->kind == W_REDUCE && root_here) ||
                 (d->kind == W_BCAST && !root_here);
    if (d->kind == W_BARRIER)
        d->type = MPI_BYTE;
    rc = check_type(d, call);
    if (rc == PTSC_OK && (d->kind == W_BCAST || d->kind == W_REDUCE))
        rc = check_root(d, call);
    if (rc == PTSC_OK && in_place && !(d->kind == W_ALLREDUCE || (d->kind == W_REDUCE && root_here)))
        rc = ptsc__err(PTSC_ERR_ARG,
                       "%s: MPI_IN_PLACE is only valid as the send buffer of allreduce, and of "
                       "reduce at the root thread",
                       call);
    if (rc == PTSC_OK && reads && !in_place)
        rc = check_buf(sbuf, d, d->kind == W_BCAST ? "buffer" : "send buffer", call);
    if (rc == PTSC_OK && writes)
        rc = check_buf(rbuf, d, d->kind == W_BCAST ? "buffer" : "receive buffer", call);
    size_t out_bytes = d->kind == W_ALLGATHER ? d->span * (size_t)d->n * (size_t)R : d->span;
    /* In place (and bcast) one buffer is read, then written. */
    const void *src = in_place ? rbuf : sbuf;
    wbuf_t s = {0}, r = {0};
    if (rc == PTSC_OK) {
        ctx->stats.collectives++;
        if (reads)
            rc = prepare(ctx, (void *)src, &s, call);
        if (rc == PTSC_OK && writes) {
            if (reads && rbuf == src)
                r = s;
            else
                rc = prepare(ctx, rbuf, &r, call);
        }
        if (rc == PTSC_OK && reads)
            rc = input(ctx, &s, d->span, d->type, call);
    }
    const char *res = NULL;
    int own = rc;
    ptsc__nvtx_push("%s %d threads %zu B", call, d->n, out_bytes);
    rc = take_part(me, d, reads ? s.host : NULL, own, &res, call);
    ptsc__nvtx_pop();
    release_input(ctx, &s);
    if (rc == PTSC_OK && writes)
        rc = output(ctx, &r, res, out_bytes, d->type, call);
    atomic_fetch_sub_explicit(&W.readers, 1, memory_order_release); /* done with the round's outcome */
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Public calls                                                              */
/* ------------------------------------------------------------------------ */

#define WDESC(k, cnt, t, o, rr, rt)  \
    (&(wdesc_t){.kind = (k),         \
                .count = (cnt),      \
                .type = (t),         \
                .op = (o),           \
                .root_rank = (rr),   \
                .root_thread = (rt), \
                .opi = -1})

int ptsc_world_barrier(ptsc_ctx_t *ctx, int nthreads)
{
    return world_call(ctx, nthreads, WDESC(W_BARRIER, 0, MPI_BYTE, MPI_OP_NULL, 0, 0), NULL, NULL);
}

int ptsc_world_bcast(ptsc_ctx_t *ctx, int nthreads, void *buf, int count, MPI_Datatype type, int root_rank,
                     int root_thread)
{
    return world_call(ctx, nthreads, WDESC(W_BCAST, count, type, MPI_OP_NULL, root_rank, root_thread), buf,
                      buf);
}

int ptsc_world_reduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                      MPI_Datatype type, MPI_Op op, int root_rank, int root_thread)
{
    return world_call(ctx, nthreads, WDESC(W_REDUCE, count, type, op, root_rank, root_thread), sbuf, rbuf);
}

int ptsc_world_allreduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                         MPI_Datatype type, MPI_Op op)
{
    return world_call(ctx, nthreads, WDESC(W_ALLREDUCE, count, type, op, 0, 0), sbuf, rbuf);
}

int ptsc_world_allgather(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, int count, MPI_Datatype type,
                         void *rbuf)
{
    return world_call(ctx, nthreads, WDESC(W_ALLGATHER, count, type, MPI_OP_NULL, 0, 0), sbuf, rbuf);
}
