/*
 * Per-thread contexts. The calling thread's context lives in one
 * thread-local pointer (ptsc__tls()->ctx); the process keeps one slot per
 * thread index so that an index is held by at most one live thread. A
 * pthread key destructor detaches a thread that exits attached.
 */
#include "ptsc_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static void free_ctx(ptsc_ctx_t *ctx);

static void on_thread_exit(void *p)
{
    /* After ptsc_finalize the key is deleted and this never runs; the state
     * check covers a thread that exits during finalize. */
    if (p && atomic_load(&ptsc__g.state) == PTSC__STATE_READY)
        free_ctx(p);
}

int ptsc__ctx_setup(void)
{
    size_t n = (size_t)ptsc__g.nthreads;
    ptsc__g.slots = calloc(n, sizeof *ptsc__g.slots);
    ptsc__g.retired = calloc(n, sizeof *ptsc__g.retired);
    if (!ptsc__g.slots || !ptsc__g.retired || pthread_key_create(&ptsc__g.key, on_thread_exit) != 0) {
        free(ptsc__g.slots);
        free(ptsc__g.retired);
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: thread slots");
    }
    return PTSC_OK;
}

static void add_stats(ptsc_stats_t *to, const ptsc_stats_t *s)
{
    uint64_t *t = (uint64_t *)to;
    const uint64_t *f = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof *s / sizeof(uint64_t); i++)
        t[i] += f[i];
}

/* Release what a context holds. Runs on the owning thread (detach, thread
 * exit) or on the finalizing thread once the owner stopped using ptsc. */
static void release_ctx(ptsc_ctx_t *ctx)
{
    if (ctx->stream)
        ptsc__gpu_set_device(ctx->device);
    /* Requests still in flight are completed or cancelled first, so that no
     * MPI request outlives the context and no buffer is freed under a copy. */
    ptsc__engine_drain(ctx);
    if (ctx->stream)
        ptsc__gpu_stream_sync(ctx->stream); /* staged copies may still read pool buffers */
    ptsc__engine_release(ctx);
    ptsc__stage_destroy(ctx);
    ptsc__sync_ctx_release(ctx);
    if (ctx->stream)
        ptsc__gpu_stream_release(ctx->stream_kind, ctx->stream);
}

static void free_ctx(ptsc_ctx_t *ctx)
{
    release_ctx(ctx);
    pthread_mutex_lock(&ptsc__g.lock);
    add_stats(&ptsc__g.retired[ctx->index], &ctx->stats);
    ptsc__g.slots[ctx->index] = NULL;
    pthread_mutex_unlock(&ptsc__g.lock);
    if (ptsc__tls()->ctx == ctx)
        ptsc__tls()->ctx = NULL;
    free(ctx);
}

void ptsc__ctx_teardown(void)
{
    /* Contexts of threads still attached are freed here; their threads must
     * no longer use ptsc (documented), so their dangling thread-local pointer
     * is never read again: every call checks the state first. */
    pthread_key_delete(ptsc__g.key);
    for (int i = 0; i < ptsc__g.nthreads; i++) {
        ptsc_ctx_t *ctx = ptsc__g.slots[i];
        if (ctx) {
            release_ctx(ctx);
            free(ctx);
        }
    }
    ptsc__tls()->ctx = NULL;
    free(ptsc__g.slots);
    free(ptsc__g.retired);
    ptsc__g.slots = NULL;
    ptsc__g.retired = NULL;
}

static int pick_device(int index, int *device)
{
    const ptsc__config_t *c = &ptsc__g.cfg;
    int n = ptsc__g.ndevices;
    if (n == 0) {
        *device = -1;
        return PTSC_OK;
    }
    int d;
    switch (c->device_map) {
    case PTSC__MAP_THREAD:
        d = index % n;
        break;
    case PTSC__MAP_LIST:
        d = c->devlist[(ptsc__g.local_rank * ptsc__g.nthreads + index) % c->ndevlist];
        if (d >= n)
            return ptsc__err(PTSC_ERR_CONFIG,
                             "ptsc attach: PTSC_DEVICE_MAP names device %d but %d %s visible", d, n,
                             n == 1 ? "is" : "are");
        break;
    default:
        d = ptsc__g.local_rank % n;
    }
    *device = d;
    return PTSC_OK;
}

static int attach(int index, int lazy, ptsc_ctx_t **out)
{
    ptsc_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc attach: context");
    pthread_mutex_lock(&ptsc__g.lock);
    if (ptsc__g.slots[index]) {
        pthread_mutex_unlock(&ptsc__g.lock);
        free(ctx);
        return ptsc__err(PTSC_ERR_THREAD_TAKEN, "ptsc attach: thread index %d is held by another live thread",
                         index);
    }
    ptsc__g.slots[index] = ctx; /* reserved; filled in below, outside the lock */
    pthread_mutex_unlock(&ptsc__g.lock);

    ctx->index = index;
    ctx->lazy = lazy;
    ctx->owner = pthread_self();
    ctx->scope = ptsc__g.cfg.sync_scope;
    ctx->stream_kind = ptsc__g.cfg.stream;
    int rc = pick_device(index, &ctx->device);
    if (rc == PTSC_OK && ctx->device >= 0) {
        if (ctx->device < 64)
            atomic_fetch_or(&ptsc__g.devmask, 1ul << ctx->device);
        rc = ptsc__gpu_set_device(ctx->device);
        if (rc == PTSC_OK)
            rc = ptsc__gpu_stream_bind(ctx->stream_kind, &ctx->stream);
    }
    if (rc != PTSC_OK) {
        pthread_mutex_lock(&ptsc__g.lock);
        ptsc__g.slots[index] = NULL;
        pthread_mutex_unlock(&ptsc__g.lock);
        free(ctx);
        return rc;
    }
    pthread_setspecific(ptsc__g.key, ctx);
    ptsc__tls()->ctx = ctx;
    ptsc__log(PTSC__LOG_DEBUG, "attached thread %d (device %d%s)", index, ctx->device,
              lazy ? ", lazily" : "");
    if (out)
        *out = ctx;
    return PTSC_OK;
}

int ptsc_thread_attach(int index, ptsc_ctx_t **ctx)
{
    int rc = ptsc__check_ready("ptsc_thread_attach");
    if (rc != PTSC_OK)
        return rc;
    if (index < 0 || index >= ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD,
                         "ptsc_thread_attach: index %d is outside [0, %d) (PTSC_MAX_THREADS)", index,
                         ptsc__g.nthreads);
    ptsc_ctx_t *self = ptsc__tls()->ctx;
    if (self)
        return ptsc__err(PTSC_ERR_ALREADY_ATTACHED, "ptsc_thread_attach: this thread is attached as index %d",
                         self->index);
    return attach(index, 0, ctx);
}

/* OpenMP thread number in the innermost active region, or PTSC_ERR_NESTED. */
static int omp_index(int *index)
{
    if (omp_get_active_level() > 1)
        return ptsc__err(PTSC_ERR_NESTED,
                         "ptsc_omp_attach: called in a nested parallel region (active level %d); "
                         "compute an index and call ptsc_thread_attach",
                         omp_get_active_level());
    int level = omp_get_level();
    *index = 0;
    for (int l = 1; l <= level; l++)
        if (omp_get_team_size(l) > 1)
            *index = omp_get_ancestor_thread_num(l);
    return PTSC_OK;
}

int ptsc_omp_attach(ptsc_ctx_t **ctx)
{
    int rc = ptsc__check_ready("ptsc_omp_attach");
    int index = 0;
    if (rc != PTSC_OK || (rc = omp_index(&index)) != PTSC_OK)
        return rc;
    if (index >= ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD,
                         "ptsc_omp_attach: OpenMP thread %d is outside [0, %d) (PTSC_MAX_THREADS)", index,
                         ptsc__g.nthreads);
    ptsc_ctx_t *self = ptsc__tls()->ctx;
    if (self) {
        if (self->index != index)
            return ptsc__err(PTSC_ERR_ALREADY_ATTACHED,
                             "ptsc_omp_attach: OpenMP thread %d is already attached as index %d", index,
                             self->index);
        self->lazy = 0; /* now known to the auto rule */
        if (ctx)
            *ctx = self;
        return PTSC_OK;
    }
    return attach(index, 0, ctx);
}

int ptsc_self(ptsc_ctx_t **ctx)
{
    int rc = ptsc__check_ready("ptsc_self");
    if (rc != PTSC_OK)
        return rc;
    ptsc_ctx_t *self = ptsc__tls()->ctx;
    if (self) {
        if (ctx)
            *ctx = self;
        return PTSC_OK;
    }
    int first = 0;
    if (omp_get_active_level() == 1 && omp_index(&first) == PTSC_OK && first < ptsc__g.nthreads &&
        attach(first, 1, ctx) == PTSC_OK)
        return PTSC_OK;
    for (int i = 0; i < ptsc__g.nthreads; i++) {
        rc = attach(i, 1, ctx);
        if (rc != PTSC_ERR_THREAD_TAKEN)
            return rc;
    }
    return ptsc__err(PTSC_ERR_THREAD, "ptsc_self: all %d thread slots are taken; raise PTSC_MAX_THREADS",
                     ptsc__g.nthreads);
}

int ptsc_thread_detach(void)
{
    int rc = ptsc__check_ready("ptsc_thread_detach");
    if (rc != PTSC_OK)
        return rc;
    ptsc_ctx_t *self = ptsc__tls()->ctx;
    if (!self)
        return ptsc__err(PTSC_ERR_NOT_ATTACHED, "ptsc_thread_detach: this thread is not attached");
    if (self->outstanding > 0)
        return ptsc__err(PTSC_ERR_PENDING,
                         "ptsc_thread_detach: thread %d has %d request(s) not completed; complete them with "
                         "ptsc_wait, ptsc_waitall or ptsc_test first (the thread stays attached)",
                         self->index, self->outstanding);
    pthread_setspecific(ptsc__g.key, NULL);
    free_ctx(self);
    return PTSC_OK;
}

int ptsc__ctx_resolve(ptsc_ctx_t **ctx, const char *call)
{
    int rc = ptsc__check_ready(call);
    if (rc != PTSC_OK)
        return rc;
    if (!*ctx)
        return ptsc_self(ctx);
    if (!pthread_equal((*ctx)->owner, pthread_self()))
        return ptsc__err(PTSC_ERR_WRONG_THREAD, "%s: context of thread index %d used from another thread",
                         call, (*ctx)->index);
    return PTSC_OK;
}

/* Accessors: checked like every public call, output written on success only. */
#define PTSC__ACCESSOR(fn, type, expr)                                                  \
    int fn(const ptsc_ctx_t *ctx, type *out)                                            \
    {                                                                                   \
        int rc = ptsc__check_ready(#fn);                                                \
        if (rc != PTSC_OK)                                                              \
            return rc;                                                                  \
        if (!ctx || !out)                                                               \
            return ptsc__err(PTSC_ERR_ARG, #fn ": %s is NULL", ctx ? "output" : "ctx"); \
        *out = (expr);                                                                  \
        return PTSC_OK;                                                                 \
    }

PTSC__ACCESSOR(ptsc_ctx_index, int, ctx->index)
PTSC__ACCESSOR(ptsc_ctx_device, int, ctx->device)
PTSC__ACCESSOR(ptsc_ctx_stream, void *, ctx->stream)
PTSC__ACCESSOR(ptsc_ctx_comm, MPI_Comm, ptsc__lanes_coll_comm(ctx->index))
PTSC__ACCESSOR(ptsc_ctx_scope, ptsc_scope_t, (ptsc_scope_t)ctx->scope)
PTSC__ACCESSOR(ptsc_ctx_stats, ptsc_stats_t, ctx->stats)

int ptsc_ctx_set_scope(ptsc_ctx_t *ctx, ptsc_scope_t scope, ptsc_scope_t *old)
{
    int rc = ptsc__ctx_resolve(&ctx, "ptsc_ctx_set_scope");
    if (rc != PTSC_OK)
        return rc;
    if (scope < PTSC_SCOPE_AUTO || scope > PTSC_SCOPE_DEVICE)
        return ptsc__err(PTSC_ERR_ARG,
                         "ptsc_ctx_set_scope: %d is not a scope (auto, none, thread, global, device)",
                         (int)scope);
    if (old)
        *old = (ptsc_scope_t)ctx->scope;
    ctx->scope = scope;
    return PTSC_OK;
}

void ptsc__ctx_print_stats(FILE *out)
{
    pthread_mutex_lock(&ptsc__g.lock);
    for (int i = 0; i < ptsc__g.nthreads; i++) {
        ptsc_stats_t s = ptsc__g.retired[i];
        if (ptsc__g.slots[i])
            add_stats(&s, &ptsc__g.slots[i]->stats);
        if (!s.syncs && !s.skipped_syncs && !s.sends && !s.recvs && !s.collectives)
            continue;
        fprintf(
            out,
            "[ptsc r%d t%d] stats: syncs %llu (%.3f ms) skipped %llu sends %llu (%llu B) recvs %llu (%llu B) "
            "staged %llu B collectives %llu races %llu\n",
            ptsc__g.rank, i, (unsigned long long)s.syncs, s.sync_ns / 1e6,
            (unsigned long long)s.skipped_syncs, (unsigned long long)s.sends,
            (unsigned long long)s.bytes_sent, (unsigned long long)s.recvs, (unsigned long long)s.bytes_recv,
            (unsigned long long)s.staged_bytes, (unsigned long long)s.collectives,
            (unsigned long long)s.races);
    }
    pthread_mutex_unlock(&ptsc__g.lock);
}
