/*
 * bench_sync: what one scope sync costs on an idle GPU, per form.
 *
 * The thread scope must also cover work queued earlier on the legacy
 * default stream (kernels of default-compiled CUDA code), which
 * cudaStreamSynchronize of a per-thread or owned stream does not wait for.
 * ptsc records an event on the bound stream and waits for it instead
 * (src/sync.c). This measures, in one run and on the same idle device, the
 * price of each candidate and of the wider scopes, in ns per call, with the
 * ratio to a plain stream sync:
 *
 *   cudaStreamSynchronize(bound)            the thread scope before (misses legacy work)
 *   cudaEventRecord(bound) + EventSynchronize   the thread scope now
 *   cudaEventRecord(bound) + EventQuery     the race check (PTSC_SYNC_CHECK)
 *   cudaStreamSynchronize(cudaStreamLegacy) the global scope
 *   cudaDeviceSynchronize                   the device scope
 *   cudaStreamIsCapturing(bound)            the capture check ptsc makes first
 *   IsCapturing + EventRecord + EventSynchronize   the thread scope by hand,
 *                                           with the check: what ptsc_sync
 *                                           (thread) should cost
 *   clock_gettime x 2                       what timing a sync costs
 *                                           (ptsc does it with PTSC_STATS=1)
 *   ptsc_sync(ctx, thread / global / device / none)   the same through ptsc
 *
 * The bound stream is the context's (PTSC_STREAM; run_bench runs it with
 * per-thread and with owned). Each row is the best of 5 batches.
 *
 * One process is enough (an MPI singleton works).
 *
 *   bench_sync [--calls N] [--quick]
 */
#include "bench_util.h"

#include <stdlib.h>
#include <string.h>

#ifdef PTSC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define BATCHES 5

enum {
    F_STREAM_SYNC,
    F_EVENT_SYNC,
    F_EVENT_QUERY,
    F_LEGACY_SYNC,
    F_DEVICE_SYNC,
    F_CAPTURE_QUERY,
    F_CHECKED_EVENT_SYNC,
    F_CLOCK_PAIR,
    F_PTSC_THREAD,
    F_PTSC_GLOBAL,
    F_PTSC_DEVICE,
    F_PTSC_NONE,
    NFORMS
};

static const char *const form_name[NFORMS] = {
    "`cudaStreamSynchronize(bound)` (thread scope before: misses legacy-stream work)",
    "`cudaEventRecord(ev, bound)` + `cudaEventSynchronize(ev)` (thread scope now)",
    "`cudaEventRecord(ev, bound)` + `cudaEventQuery(ev)` (race check)",
    "`cudaStreamSynchronize(cudaStreamLegacy)` (global scope)",
    "`cudaDeviceSynchronize()` (device scope)",
    "`cudaStreamIsCapturing(bound)` (the capture check)",
    "`cudaStreamIsCapturing` + `cudaEventRecord` + `cudaEventSynchronize` (thread scope by hand, checked)",
    "`clock_gettime` x 2 (sync timing, only with PTSC_STATS=1)",
    "`ptsc_sync(ctx, PTSC_SCOPE_THREAD)`",
    "`ptsc_sync(ctx, PTSC_SCOPE_GLOBAL)`",
    "`ptsc_sync(ctx, PTSC_SCOPE_DEVICE)`",
    "`ptsc_sync(ctx, PTSC_SCOPE_NONE)` (call overhead)",
};

typedef struct {
    ptsc_ctx_t *ctx;
    void *stream;
    void *event;
} setup_t;

#ifdef PTSC_HAVE_CUDA
static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_sync: %s: %s\n", what, cudaGetErrorString(e));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}
#endif

/* One call of form `f`; 1 when the form exists in this build. */
static int one(const setup_t *s, int f)
{
    switch (f) {
    case F_PTSC_THREAD:
        BENCH_CHECK(ptsc_sync(s->ctx, PTSC_SCOPE_THREAD));
        return 1;
    case F_PTSC_GLOBAL:
        BENCH_CHECK(ptsc_sync(s->ctx, PTSC_SCOPE_GLOBAL));
        return 1;
    case F_PTSC_DEVICE:
        BENCH_CHECK(ptsc_sync(s->ctx, PTSC_SCOPE_DEVICE));
        return 1;
    case F_PTSC_NONE:
        BENCH_CHECK(ptsc_sync(s->ctx, PTSC_SCOPE_NONE));
        return 1;
    case F_CLOCK_PAIR: {
        static volatile double sink;
        sink = bench_now() - bench_now();
        (void)sink;
        return 1;
    }
    default:
        break;
    }
#ifdef PTSC_HAVE_CUDA
    if (s->event == NULL)
        return 0;
    cudaStream_t st = (cudaStream_t)s->stream;
    cudaEvent_t ev = (cudaEvent_t)s->event;
    cudaError_t q;
    enum cudaStreamCaptureStatus cs;
    switch (f) {
    case F_CAPTURE_QUERY:
        cuda_ok(cudaStreamIsCapturing(st, &cs), "cudaStreamIsCapturing");
        break;
    case F_CHECKED_EVENT_SYNC:
        cuda_ok(cudaStreamIsCapturing(st, &cs), "cudaStreamIsCapturing");
        if (cs == cudaStreamCaptureStatusNone) {
            cuda_ok(cudaEventRecord(ev, st), "cudaEventRecord");
            cuda_ok(cudaEventSynchronize(ev), "cudaEventSynchronize");
        }
        break;
    case F_STREAM_SYNC:
        cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize(bound)");
        break;
    case F_EVENT_SYNC:
        cuda_ok(cudaEventRecord(ev, st), "cudaEventRecord");
        cuda_ok(cudaEventSynchronize(ev), "cudaEventSynchronize");
        break;
    case F_EVENT_QUERY:
        cuda_ok(cudaEventRecord(ev, st), "cudaEventRecord");
        q = cudaEventQuery(ev);
        if (q != cudaErrorNotReady)
            cuda_ok(q, "cudaEventQuery");
        break;
    case F_LEGACY_SYNC:
        cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(cudaStreamLegacy)");
        break;
    default:
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        break;
    }
    return 1;
#else
    return 0;
#endif
}

/* ns per call of form `f`, best of BATCHES batches; < 0 when the form does not exist here. */
static double ns_per_call(const setup_t *s, int f, long calls)
{
    double best = -1;
    if (!one(s, f))
        return -1;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = bench_now();
        for (long i = 0; i < calls; i++)
            one(s, f);
        double ns = 1e9 * (bench_now() - t0) / (double)calls;
        best = best < 0 || ns < best ? ns : best;
    }
    return best;
}

/* Whether ptsc times its syncs in this run (PTSC_STATS set to a true value). */
static int stats_on(void)
{
    const char *v = getenv("PTSC_STATS");
    return v && (!strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "true"));
}

static const char *kind_text(void *stream)
{
#ifdef PTSC_HAVE_CUDA
    if ((cudaStream_t)stream == cudaStreamPerThread)
        return "per-thread (`cudaStreamPerThread`)";
    if ((cudaStream_t)stream == cudaStreamLegacy)
        return "legacy (`cudaStreamLegacy`: the thread scope is a stream sync of it)";
    return "owned (a blocking stream created for the thread)";
#else
    (void)stream;
    return "none (no CUDA)";
#endif
}

int main(int argc, char **argv)
{
    long calls = 100000;
    BENCH_CHECK(ptsc_init(&argc, &argv));
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            calls = 1000;
        } else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc && strtol(argv[i + 1], NULL, 0) > 0) {
            calls = strtol(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: bench_sync [--calls N] [--quick]\n");
            ptsc_finalize();
            return 2;
        }
    }
    int rank = 0;
    setup_t s = {0};
    BENCH_CHECK(ptsc_rank(&rank));
    BENCH_CHECK(ptsc_thread_attach(0, &s.ctx));
    BENCH_CHECK(ptsc_ctx_stream(s.ctx, &s.stream));
    int gpu = bench_gpu_available();
#ifdef PTSC_HAVE_CUDA
    if (gpu) {
        cudaEvent_t ev;
        cuda_ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        s.event = (void *)ev;
        cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
#endif
    double ns[NFORMS];
    for (int f = 0; f < NFORMS; f++)
        ns[f] = ns_per_call(&s, f, calls);

    if (rank == 0) {
        printf("## bench_sync: cost of one scope sync on an idle GPU\n\n");
        if (gpu)
            printf(
                "Bound stream: %s. PTSC_STATS=%s (sync timing %s). %ld calls per batch, best of %d batches; "
                "ratio to `cudaStreamSynchronize(bound)`.\n\n",
                kind_text(s.stream), getenv("PTSC_STATS") ? getenv("PTSC_STATS") : "0",
                stats_on() ? "on" : "off", calls, BATCHES);
        else
            printf("No CUDA device (or CUDA not built): only ptsc_sync, a no-op on host-only runs, is "
                   "measured (%ld calls per batch, best of %d).\n\n",
                   calls, BATCHES);
        printf("| form | ns/call | ratio to stream sync |\n|---|---:|---:|\n");
        for (int f = 0; f < NFORMS; f++) {
            if (ns[f] < 0)
                continue;
            if (ns[F_STREAM_SYNC] > 0)
                printf("| %s | %.0f | %.2f |\n", form_name[f], ns[f], ns[f] / ns[F_STREAM_SYNC]);
            else
                printf("| %s | %.0f | - |\n", form_name[f], ns[f]);
        }
        printf("\n");
        fflush(stdout);
    }
#ifdef PTSC_HAVE_CUDA
    if (s.event != NULL)
        cudaEventDestroy((cudaEvent_t)s.event);
#endif
    BENCH_CHECK(ptsc_thread_detach());
    BENCH_CHECK(ptsc_finalize());
    return 0;
}
