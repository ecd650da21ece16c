/*
 * The scope policy: the one place that decides and performs what is
 * synchronised before MPI reads or writes a buffer. It touches the GPU only
 * through the ptsc__gpu_* layer and a context's counters.
 *
 *   none    nothing (the caller has synchronised)
 *   thread  the thread's bound stream and the work queued earlier on the
 *           legacy default stream, not other threads' streams (see
 *           thread_sync for how, per PTSC_STREAM kind)
 *   global  cudaStreamLegacy: every blocking stream, on each device the
 *           rank's threads were bound to
 *   device  cudaDeviceSynchronize, on each of those devices
 *   auto    thread for an explicitly attached thread, global otherwise
 */
#include "ptsc_internal.h"

static const char *const scope_names[] = {"auto", "none", "thread", "global", "device"};

int ptsc__sync_resolve(const ptsc_ctx_t *ctx, int scope)
{
    if (scope == PTSC_SCOPE_DEFAULT)
        scope = ctx ? ctx->scope : ptsc__g.cfg.sync_scope;
    if (scope == PTSC_SCOPE_AUTO)
        scope = ctx && !ctx->lazy ? PTSC_SCOPE_THREAD : PTSC_SCOPE_GLOBAL;
    return scope;
}

/* PTSC_ERR_CAPTURING when acting at `scope` would touch a stream under capture. */
static int check_capture(ptsc_ctx_t *ctx, int scope)
{
    int capturing = 0, rc = ptsc__gpu_capturing(ctx->stream, scope, &capturing);
    if (rc != PTSC_OK || !capturing)
        return rc;
    return ptsc__err(
        PTSC_ERR_CAPTURING,
        "a %s-scope sync or staging copy would touch a stream under graph capture; the capture is "
        "left intact: end it first, or communicate outside the captured region",
        scope_names[scope]);
}

/* The global or device sync of one device. */
static int wide_sync(int scope)
{
    return scope == PTSC_SCOPE_GLOBAL ? ptsc__gpu_legacy_sync() : ptsc__gpu_device_sync();
}

/* Global and device scopes cover every device this rank's threads were
 * bound to (PTSC_DEVICE_MAP=thread or a list can spread them): a buffer on
 * another GPU may be produced there. The calling thread's device goes
 * first and is current again afterwards. Capture is checked on the calling
 * thread's device only. */
static int wide_sync_all(ptsc_ctx_t *ctx, int scope)
{
    int rc = wide_sync(scope);
    unsigned long others = atomic_load_explicit(&ptsc__g.devmask, memory_order_relaxed);
    if (ctx->device >= 0 && ctx->device < 64)
        others &= ~(1ul << ctx->device);
    for (int d = 0; others && rc == PTSC_OK && d < 64; d++) {
        if (!(others & (1ul << d)))
            continue;
        others &= ~(1ul << d);
        if ((rc = ptsc__gpu_set_device(d)) == PTSC_OK)
            rc = wide_sync(scope);
        int back = ptsc__gpu_set_device(ctx->device);
        if (rc == PTSC_OK)
            rc = back;
    }
    return rc;
}

/* The context's reusable event, created on first use (on the context's
 * device, which is current during its calls). Released by
 * ptsc__sync_ctx_release. */
static int ctx_event(ptsc_ctx_t *ctx, void **ev)
{
    if (ctx->sync.event == NULL) {
        int rc = ptsc__gpu_event_create(&ctx->sync.event);
        if (rc != PTSC_OK)
            return rc;
    }
    *ev = ctx->sync.event;
    return PTSC_OK;
}

/*
 * The thread scope. Most CUDA code is compiled without per-thread default
 * streams, so a kernel launched with no stream argument runs on the legacy
 * default stream, not on the thread's bound stream: cudaStreamSynchronize
 * of a per-thread or owned stream returns while such a kernel still runs
 * (measured on the H200), and MPI would read stale data. But every blocking
 * stream (per-thread default streams and streams created without
 * cudaStreamNonBlocking) waits for the legacy-stream work queued before
 * anything queued on it. So an event recorded on the bound stream completes
 * after this thread's work on it AND after earlier legacy-stream work, and
 * still not after other threads' blocking streams: exactly the thread
 * scope, at about 0.7 us idle instead of 0.4 us for a stream sync.
 *
 * Per PTSC_STREAM kind:
 *   per-thread  event on cudaStreamPerThread (a blocking stream).
 *   owned       event on the owned stream, created blocking for this reason
 *               and for the global scope.
 *   legacy      the bound stream IS the legacy stream: a plain stream sync,
 *               which already waits for every blocking stream of the device
 *               (other threads' too), so here thread is as wide as global.
 */
static int thread_sync(ptsc_ctx_t *ctx)
{
    void *ev = NULL;
    if (ctx->stream_kind == PTSC_STREAM_LEGACY)
        return ptsc__gpu_stream_sync(ctx->stream);
    int rc = ctx_event(ctx, &ev);
    if (rc == PTSC_OK)
        rc = ptsc__gpu_event_record(ev, ctx->stream);
    return rc != PTSC_OK ? rc : ptsc__gpu_event_sync(ev);
}

/*
 * The race check: *busy = 1 when work the thread scope would wait for (the
 * bound stream and earlier legacy-stream work, as above) has not finished.
 * An event recorded on the bound stream and queried, not cudaStreamQuery:
 * querying a per-thread or owned stream does not see a kernel still running
 * on the legacy stream. What it cannot see: kernels on non-blocking streams
 * and on other threads' blocking streams (nothing orders the bound stream
 * after those, and CUDA has no query that tells their work from unrelated
 * work). With PTSC_STREAM=legacy it reports busy while ANY blocking stream
 * of the device is busy, related to the buffer or not. The bound stream was
 * checked for capture before (recording on a capturing stream would add a
 * node to the graph, and querying that event would break the capture).
 */
static int thread_busy(ptsc_ctx_t *ctx, int *busy)
{
    void *ev = NULL;
    int done = 1, rc = ctx_event(ctx, &ev);
    if (rc == PTSC_OK && (rc = ptsc__gpu_event_record(ev, ctx->stream)) == PTSC_OK)
        rc = ptsc__gpu_event_done(ev, &done);
    *busy = !done;
    return rc;
}

/*
 * A thread ptsc has no context for (libptsc-mpi, src/interpose.c): the
 * scope the configuration names, resolved as for an unattached thread
 * (auto is global), on the current device. The thread scope records an
 * event of the thread's own on its per-thread default stream, as
 * thread_sync does for PTSC_STREAM=per-thread, or on `stream` where the
 * program named the thread's stream (then auto is thread too: the program
 * said which stream its buffers come from). The event goes with the
 * thread. *did: something was waited for.
 */
static pthread_key_t unbound_key;
static pthread_once_t unbound_once = PTHREAD_ONCE_INIT;
static void unbound_ev_destroy(void *ev) { ptsc__gpu_event_destroy(ev); }
static void unbound_key_create(void) { pthread_key_create(&unbound_key, unbound_ev_destroy); }

static int unbound_scope(void *stream)
{
    if (stream && ptsc__g.cfg.sync_scope == PTSC_SCOPE_AUTO)
        return PTSC_SCOPE_THREAD;
    return ptsc__sync_resolve(NULL, PTSC_SCOPE_DEFAULT);
}

/* The thread's event recorded on its stream (named, or per-thread). */
static int unbound_record(void *stream, void **ev)
{
    pthread_once(&unbound_once, unbound_key_create);
    *ev = pthread_getspecific(unbound_key);
    int rc = *ev ? PTSC_OK : ptsc__gpu_event_create(ev);
    if (rc == PTSC_OK && !pthread_getspecific(unbound_key))
        pthread_setspecific(unbound_key, *ev);
    if (rc == PTSC_OK && !stream)
        rc = ptsc__gpu_stream_bind(PTSC_STREAM_PER_THREAD, &stream);
    return rc == PTSC_OK ? ptsc__gpu_event_record(*ev, stream) : rc;
}

int ptsc__sync_unbound(void *stream, int *did)
{
    int scope = unbound_scope(stream), rc;
    void *ev;
    *did = 0;
    if (scope == PTSC_SCOPE_NONE || ptsc__g.ndevices == 0)
        return PTSC_OK;
    if (scope == PTSC_SCOPE_THREAD) {
        rc = unbound_record(stream, &ev);
        if (rc == PTSC_OK)
            rc = ptsc__gpu_event_sync(ev);
    } else {
        rc = wide_sync(scope);
    }
    *did = rc == PTSC_OK;
    return rc;
}

/* The race check for such a thread where its scope syncs nothing: *busy =
 * 1 when work on its stream (named, or per-thread with the legacy-stream
 * work queued before) has not finished. */
int ptsc__sync_unbound_busy(void *stream, int *busy)
{
    void *ev;
    int done = 1, rc = PTSC_OK;
    if (ptsc__g.ndevices > 0 && unbound_scope(stream) == PTSC_SCOPE_NONE &&
        (rc = unbound_record(stream, &ev)) == PTSC_OK)
        rc = ptsc__gpu_event_done(ev, &done);
    *busy = !done;
    return rc;
}

const char *ptsc__scope_name(int scope)
{
    return scope >= 0 && scope < (int)(sizeof scope_names / sizeof scope_names[0]) ? scope_names[scope] : "?";
}

void ptsc__sync_ctx_release(ptsc_ctx_t *ctx)
{
    /* cudaEventDestroy on an event still pending returns at once; CUDA frees
     * it when it completes. */
    if (ctx->sync.event != NULL)
        ptsc__gpu_event_destroy(ctx->sync.event);
    ctx->sync.event = NULL;
}

/* Perform a resolved, non-none scope's sync (capture already checked),
 * counting it. Its time is measured only with PTSC_STATS=1: the two clock
 * reads would otherwise be paid on every sync for a counter that only the
 * statistics use (ptsc_ctx_stats' sync_ns stays 0 without it). */
static int perform(ptsc_ctx_t *ctx, int scope)
{
    ctx->stats.syncs++;
    ptsc__nvtx_push("sync %s", scope_names[scope]);
    if (!ptsc__g.cfg.stats)
        return ptsc__nvtx_pop_rc(scope == PTSC_SCOPE_THREAD ? thread_sync(ctx) : wide_sync_all(ctx, scope));
    uint64_t t0 = ptsc__now_ns();
    int rc = scope == PTSC_SCOPE_THREAD ? thread_sync(ctx) : wide_sync_all(ctx, scope);
    ctx->stats.sync_ns += ptsc__now_ns() - t0;
    return ptsc__nvtx_pop_rc(rc);
}

int ptsc__sync_scope(ptsc_ctx_t *ctx, int scope)
{
    scope = ptsc__sync_resolve(ctx, scope);
    if (scope == PTSC_SCOPE_NONE || ptsc__g.ndevices == 0)
        return PTSC_OK;
    int rc = check_capture(ctx, scope);
    return rc != PTSC_OK ? rc : perform(ctx, scope);
}

int ptsc__sync_buffer(ptsc_ctx_t *ctx, ptsc_memclass_t cls, int staged, const char *call)
{
    if (!ptsc__mem_needs_sync(cls) || ptsc__g.ndevices == 0) {
        ctx->stats.skipped_syncs++;
        return PTSC_OK;
    }
    int scope = ptsc__sync_resolve(ctx, PTSC_SCOPE_DEFAULT);
    /* A staged buffer is copied on the thread's own stream, behind the work
     * the thread queued there and, the bound stream being a blocking stream
     * (or the legacy stream itself), behind the legacy-stream work queued
     * before: what the thread scope covers, so it needs no sync. Whatever
     * the scope, the bound stream is checked for capture (one query):
     * staging copies on a capturing stream, or a CUDA-aware MPI's own CUDA
     * calls under a global-mode capture, would break it. */
    int sync = scope != PTSC_SCOPE_NONE && !(staged && scope == PTSC_SCOPE_THREAD);
    int rc = check_capture(ctx, sync ? scope : PTSC_SCOPE_THREAD);
    if (rc == PTSC_OK && sync)
        rc = perform(ctx, scope);
    /* The race check looks only where a hand-over is unordered: on the
     * direct path with no sync performed. After any scope's sync the bound
     * stream and earlier legacy work are complete by construction; a staged
     * copy is ordered after them. */
    if (rc != PTSC_OK || staged || sync || ptsc__g.cfg.sync_check == PTSC__CHECK_OFF)
        return rc;
    int busy = 0;
    if ((rc = thread_busy(ctx, &busy)) != PTSC_OK || !busy)
        return rc;
    ctx->stats.races++;
    if (ptsc__g.cfg.sync_check == PTSC__CHECK_ERROR)
        return ptsc__err(PTSC_ERR_RACE,
                         "%s: rank %d thread %d hands a device buffer to MPI while GPU work it may depend on "
                         "is still running (its stream, or earlier work on the legacy default stream; "
                         "scope %s); synchronise or use a wider PTSC_SYNC_SCOPE",
                         call, ptsc__g.rank, ctx->index, scope_names[scope]);
    ptsc__log(PTSC__LOG_WARN,
              "%s: device buffer handed to MPI while the thread's stream or earlier legacy-stream work is "
              "still running (scope %s)",
              call, scope_names[scope]);
    return PTSC_OK;
}

int ptsc__sync_buffer_deferred(ptsc_ctx_t *ctx, ptsc_memclass_t cls, int staged, void *ev, int *deferred,
                               const char *call)
{
    *deferred = 0;
    /* The thread scope's sync is an event on the bound stream (see
     * thread_sync): recorded on the caller's event, the engine hands the
     * buffer to MPI once it completed instead of waiting here, so that a
     * non-blocking call returns at once. Other scopes, the legacy bound
     * stream and the race check take the blocking form. */
    if (ev && !staged && ptsc__mem_needs_sync(cls) && ptsc__g.ndevices > 0 &&
        ctx->stream_kind != PTSC_STREAM_LEGACY && ptsc__g.cfg.sync_check == PTSC__CHECK_OFF &&
        ptsc__sync_resolve(ctx, PTSC_SCOPE_DEFAULT) == PTSC_SCOPE_THREAD) {
        int rc = check_capture(ctx, PTSC_SCOPE_THREAD);
        if (rc == PTSC_OK)
            rc = ptsc__gpu_event_record(ev, ctx->stream);
        if (rc == PTSC_OK) {
            ctx->stats.syncs++;
            *deferred = 1;
        }
        return rc;
    }
    return ptsc__sync_buffer(ctx, cls, staged, call);
}

int ptsc__sync_prepare(ptsc_ctx_t *ctx, const void *buf, ptsc__use_t use, int *staged, const char *call)
{
    ptsc_memclass_t cls = PTSC_MEM_HOST;
    int rc = buf ? ptsc__mem_classify(buf, &cls) : PTSC_OK;
    if (rc != PTSC_OK)
        return rc;
    *staged = ptsc__mem_staged(cls, use, 0, 1, ctx->index);
    return ptsc__sync_buffer(ctx, cls, *staged, call);
}
