/*
 * Per-thread contexts. The calling thread's context lives in one
 * thread-local pointer (ptsc__tls()->ctx); the process keeps one slot per
 * thread index so that an index is held by at most one live thread. A
 * pthread key destructor detaches a thread that exits attached.
 *
 * Against ptsc_finalize (init.c): a context is attached and released by its
 * own thread only while the state is READY, checked under ptsc__g.lock, and
 * ptsc__g.transit counts those under way. Finalize turns the state
 * FINALIZING under the same lock, waits for transit to drop to 0, and then
 * owns every context left in a slot: no context is released twice, and no
 * thread touches the slots, the counters or the lanes while they are freed.
 */
#include "ptsc_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static void release_ctx(ptsc_ctx_t *ctx);

/* A thread starts releasing its own context: 0 when finalize has begun (the
 * context is finalize's then). */
static int begin_release(void)
{
    pthread_mutex_lock(&ptsc__g.lock);
    int ok = atomic_load(&ptsc__g.state) == PTSC__STATE_READY;
    if (ok)
        ptsc__g.transit++;
    pthread_mutex_unlock(&ptsc__g.lock);
    return ok;
}

static void end_transit(void)
{
    /* Called with the lock held. */
    if (--ptsc__g.transit == 0)
        pthread_cond_broadcast(&ptsc__g.cond);
}

static void add_stats(ptsc_stats_t *to, const ptsc_stats_t *s)
{
    uint64_t *t = (uint64_t *)to;
    const uint64_t *f = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof *s / sizeof(uint64_t); i++)
        t[i] += f[i];
}

/* Release and free the caller's own context; begin_release() returned 1. The
 * index stays held until the context is released, so a new holder of the
 * index never runs beside the old one's drain. */
static void free_own_ctx(ptsc_ctx_t *ctx)
{
    release_ctx(ctx);
    pthread_mutex_lock(&ptsc__g.lock);
    add_stats(&ptsc__g.retired[ctx->index], &ctx->stats);
    ptsc__g.slots[ctx->index] = NULL;
    atomic_fetch_sub(&ptsc__g.nheld, 1);
    end_transit();
    pthread_mutex_unlock(&ptsc__g.lock);
    if (ptsc__tls()->ctx == ctx)
        ptsc__tls()->ctx = NULL;
    free(ctx);
}

static void on_thread_exit(void *p)
{
    /* Once finalize has begun the context is finalize's (or already freed):
     * it is not dereferenced here. After finalize the key is deleted and this
     * normally never runs. */
    if (p && begin_release())
        free_own_ctx(p);
}

int ptsc__ctx_setup(void)
{
    size_t n = (size_t)ptsc__g.nthreads;
    ptsc__g.slots = calloc(n, sizeof *ptsc__g.slots);
    ptsc__g.retired = calloc(n, sizeof *ptsc__g.retired);
    ptsc__g.stash_left = calloc(n, sizeof *ptsc__g.stash_left);
    if (!ptsc__g.slots || !ptsc__g.retired || !ptsc__g.stash_left ||
        pthread_key_create(&ptsc__g.key, on_thread_exit) != 0) {
        free(ptsc__g.slots);
        free(ptsc__g.retired);
        free(ptsc__g.stash_left);
        ptsc__g.stash_left = NULL;
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: thread slots");
    }
    ptsc__g.transit = 0;
    atomic_store(&ptsc__g.nheld, 0);
    return PTSC_OK;
}

/* Release what a context holds. Runs on the owning thread (detach, thread
 * exit) or on the finalizing thread, which then owns it. */
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

void ptsc__ctx_teardown(void)
{
    /* State FINALIZING and no attach or release under way (init.c): every
     * context still in a slot is ours. Their threads must no longer use ptsc
     * (documented); their dangling thread-local pointer is never read again,
     * since every call checks the state first, and their exit destructor
     * backs off. */
    int n = ptsc__g.nthreads;
    ptsc_ctx_t **owned = ptsc__g.slots;
    pthread_mutex_lock(&ptsc__g.lock);
    ptsc__g.slots = NULL;
    pthread_mutex_unlock(&ptsc__g.lock);
    pthread_key_delete(ptsc__g.key);
    for (int i = 0; i < n; i++) {
        if (owned[i]) {
            release_ctx(owned[i]);
            free(owned[i]);
        }
    }
    ptsc__tls()->ctx = NULL;
    free(owned);
    ptsc__engine_stash_drain(); /* what no holder of an index received */
    pthread_mutex_lock(&ptsc__g.lock);
    free(ptsc__g.retired);
    ptsc__g.retired = NULL;
    pthread_mutex_unlock(&ptsc__g.lock);
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

/* Reserve slot `index` (-1: the lowest free one) for `ctx`, which becomes
 * "in transit" until attach finishes. */
static int reserve(int index, int lazy, ptsc_ctx_t *ctx, const char *call)
{
    pthread_mutex_lock(&ptsc__g.lock);
    int rc = PTSC_OK;
    if (atomic_load(&ptsc__g.state) != PTSC__STATE_READY) {
        rc = ptsc__err(PTSC_ERR_FINALIZED, "%s: ptsc_finalize is running", call);
    } else if (index < 0) {
        for (index = 0; index < ptsc__g.nthreads && ptsc__g.slots[index]; index++)
            ;
        if (index == ptsc__g.nthreads)
            rc = ptsc__err(PTSC_ERR_THREAD, "%s: all %d thread slots are taken; raise PTSC_MAX_THREADS", call,
                           ptsc__g.nthreads);
    } else if (ptsc__g.slots[index]) {
        rc = ptsc__err(PTSC_ERR_THREAD_TAKEN, "%s: thread index %d is held by another live thread", call,
                       index);
    }
    if (rc == PTSC_OK) {
        ctx->index = index;
        ctx->lazy = lazy;
        ctx->owner = pthread_self();
        ptsc__g.slots[index] = ctx; /* reserved; filled in by attach, outside the lock */
        atomic_fetch_add(&ptsc__g.nheld, 1);
        ptsc__g.transit++;
    }
    pthread_mutex_unlock(&ptsc__g.lock);
    return rc;
}

static int attach(int index, int lazy, ptsc_ctx_t **out, const char *call)
{
    ptsc_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: context", call);
    int rc = reserve(index, lazy, ctx, call);
    if (rc != PTSC_OK) {
        free(ctx);
        return rc;
    }
    index = ctx->index;
    ctx->scope = ptsc__g.cfg.sync_scope;
    ctx->stream_kind = ptsc__g.cfg.stream;
    rc = pick_device(index, &ctx->device);
    if (rc == PTSC_OK && ctx->device >= 0) {
        if (ctx->device < 64)
            atomic_fetch_or(&ptsc__g.devmask, 1ul << ctx->device);
        rc = ptsc__gpu_set_device(ctx->device);
        if (rc == PTSC_OK)
            rc = ptsc__gpu_stream_bind(ctx->stream_kind, &ctx->stream);
    }
    ctx->eng.qstream = ctx->stream;
    pthread_mutex_lock(&ptsc__g.lock);
    if (rc != PTSC_OK) {
        ptsc__g.slots[index] = NULL;
        atomic_fetch_sub(&ptsc__g.nheld, 1);
    }
    end_transit();
    pthread_mutex_unlock(&ptsc__g.lock);
    if (rc != PTSC_OK) {
        free(ctx);
        return rc;
    }
    ptsc__engine_adopt(ctx); /* what the last holder of the index probed */
    pthread_setspecific(ptsc__g.key, ctx);
    ptsc__tls()->ctx = ctx;
    ptsc__nvtx_name_thread(index);
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
    return attach(index, 0, ctx, "ptsc_thread_attach");
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
    return attach(index, 0, ctx, "ptsc_omp_attach");
}

/*
 * The lazy-attach rule (include/ptsc.h): outside any active parallel region
 * the lowest free index; in an active region the OpenMP thread number, or an
 * error (never another index: peers address the thread by that number);
 * in a nested active region PTSC_ERR_NESTED, since numbers repeat there.
 */
static int self_attach(ptsc_ctx_t **ctx, const char *call);

int ptsc_self(ptsc_ctx_t **ctx)
{
    int rc = ptsc__check_ready("ptsc_self");
    return rc != PTSC_OK ? rc : self_attach(ctx, "ptsc_self");
}

/* ptsc_self's rule; `call` is what the details name: the call the program
 * made (a lazy attach inside ptsc_send says "ptsc_send (lazy attach)"). */
static int self_attach(ptsc_ctx_t **ctx, const char *call)
{
    int rc;
    ptsc_ctx_t *self = ptsc__tls()->ctx;
    if (self) {
        if (ctx)
            *ctx = self;
        return PTSC_OK;
    }
    int active = omp_get_active_level();
    if (active == 0)
        return attach(-1, 1, ctx, call);
    if (active > 1)
        return ptsc__err(PTSC_ERR_NESTED,
                         "%s: lazy attach in a nested parallel region (active level %d), where OpenMP "
                         "thread numbers repeat; compute an index and call ptsc_thread_attach",
                         call, active);
    int t = 0;
    omp_index(&t);
    if (t >= ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD,
                         "%s: OpenMP thread %d attaches lazily as index %d, which is outside [0, %d) "
                         "(PTSC_MAX_THREADS)",
                         call, t, t, ptsc__g.nthreads);
    rc = attach(t, 1, ctx, call);
    if (rc == PTSC_ERR_THREAD_TAKEN)
        return ptsc__err(PTSC_ERR_THREAD_TAKEN,
                         "%s: OpenMP thread %d attaches lazily as index %d, which another live thread "
                         "holds; attach that thread or this one explicitly with ptsc_thread_attach",
                         call, t, t);
    return rc;
}

int ptsc_thread_detach(void)
{
    int rc = ptsc__check_ready("ptsc_thread_detach");
    if (rc != PTSC_OK)
        return rc;
    ptsc_ctx_t *self = ptsc__tls()->ctx;
    if (!self)
        return ptsc__err(PTSC_ERR_NOT_ATTACHED, "ptsc_thread_detach: this thread is not attached");
    if (self->eng.outstanding > 0)
        return ptsc__err(PTSC_ERR_PENDING,
                         "ptsc_thread_detach: thread %d has %d request(s) not completed; complete them with "
                         "ptsc_wait, ptsc_waitall or ptsc_test first (the thread stays attached)",
                         self->index, self->eng.outstanding);
    if (!begin_release())
        return ptsc__err(PTSC_ERR_FINALIZED,
                         "ptsc_thread_detach: ptsc_finalize is running; it releases this thread's context");
    pthread_setspecific(ptsc__g.key, NULL);
    free_own_ctx(self);
    ptsc__err_clear(); /* a drain on release may have left a detail */
    return PTSC_OK;
}

/* Detail for a context that is not the caller's: whose it is, when it is
 * still attached. Reads the slot table only, never the context itself. */
static int not_own(const ptsc_ctx_t *ctx, const char *call, int query)
{
    int index = -1;
    pthread_mutex_lock(&ptsc__g.lock);
    for (int i = 0; ptsc__g.slots && i < ptsc__g.nthreads; i++)
        if (ptsc__g.slots[i] == ctx)
            index = i;
    pthread_mutex_unlock(&ptsc__g.lock);
    int (*err)(int, const char *, ...) = query ? ptsc__err_query : ptsc__err;
    if (index >= 0)
        return err(PTSC_ERR_WRONG_THREAD,
                   "%s: context of thread index %d used from another thread (a context is used and read "
                   "only by the thread that owns it)",
                   call, index);
    return err(PTSC_ERR_WRONG_THREAD,
               "%s: not the calling thread's context, nor any attached thread's (its thread detached or "
               "ended)",
               call);
}

int ptsc__ctx_resolve(ptsc_ctx_t **ctx, const char *call)
{
    int rc = ptsc__check_ready(call);
    if (rc != PTSC_OK)
        return rc;
    if (!*ctx) {
        char lazy[64];
        snprintf(lazy, sizeof lazy, "%s (lazy attach)", call);
        return self_attach(ctx, lazy);
    }
    /* Compared with the caller's own context rather than read: the pointer
     * may be another thread's, or dangle after its thread ended. */
    if (*ctx != ptsc__tls()->ctx)
        return not_own(*ctx, call, 0);
    return PTSC_OK;
}

/* Accessors are queries: checked like every public call, owner only (the
 * owner changes the scope and counters without a lock), output written on
 * success only. */
static int check_accessor(const ptsc_ctx_t *ctx, const void *out, const char *call, const char *out_name)
{
    int rc = ptsc__check_ready_query(call);
    if (rc != PTSC_OK)
        return rc;
    if (!ctx || !out)
        return ptsc__err_query(PTSC_ERR_ARG, "%s: %s is NULL", call, ctx ? out_name : "ctx");
    if (ctx != ptsc__tls()->ctx)
        return not_own(ctx, call, 1);
    return PTSC_OK;
}

/* Accessors: checked like every public call, output written on success only. */
#define PTSC__ACCESSOR(fn, type, name, expr)           \
    int fn(const ptsc_ctx_t *ctx, type *out)           \
    {                                                  \
        int rc = check_accessor(ctx, out, #fn, #name); \
        if (rc != PTSC_OK)                             \
            return rc;                                 \
        *out = (expr);                                 \
        return PTSC_OK;                                \
    }

PTSC__ACCESSOR(ptsc_ctx_index, int, index, ctx->index)
PTSC__ACCESSOR(ptsc_ctx_device, int, device, ctx->device)
PTSC__ACCESSOR(ptsc_ctx_stream, void *, stream, ctx->stream)
PTSC__ACCESSOR(ptsc_ctx_comm, MPI_Comm, comm, ptsc__lanes_coll_comm(ctx->index))
PTSC__ACCESSOR(ptsc_ctx_scope, ptsc_scope_t, scope, (ptsc_scope_t)ctx->scope)
PTSC__ACCESSOR(ptsc_ctx_stats, ptsc_stats_t, stats, ctx->stats)

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

/* The public sync call resolves its context here, with the scope setter:
 * sync.c decides and performs what a scope means for a context it is given
 * and never attaches one (contexts sit above the scope policy). */
int ptsc_sync(ptsc_ctx_t *ctx, ptsc_scope_t scope)
{
    int rc = ptsc__ctx_resolve(&ctx, "ptsc_sync");
    if (rc != PTSC_OK)
        return rc;
    if (scope < PTSC_SCOPE_DEFAULT || scope > PTSC_SCOPE_DEVICE)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_sync: %d is not a scope", (int)scope);
    rc = ptsc__sync_scope(ctx, scope);
    if (rc == PTSC_ERR_CAPTURING || rc == PTSC_ERR_CUDA) {
        char d[PTSC__DETAIL_LEN];
        snprintf(d, sizeof d, "ptsc_sync: %s", ptsc_last_error());
        ptsc__err_set_detail(d);
    }
    return rc;
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
