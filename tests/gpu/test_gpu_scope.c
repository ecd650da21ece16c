/*
 * What each scope waits for, measured with a long kernel of ANOTHER thread.
 * One rank. Thread A is attached to ptsc (per-thread stream); thread B is a
 * plain thread that launches a ~400 ms kernel and records an event after
 * it; A then syncs at some scope and looks at B's event:
 *
 *   thread  A's sync returns while B's kernel (on B's per-thread stream)
 *           still runs.
 *   global  A's sync waits for B's per-thread-stream kernel (per-thread
 *           streams are blocking streams: the legacy stream covers them).
 *   device  B's kernel on a NON-BLOCKING stream: a global sync returns
 *           before it ends, a device sync waits for it.
 *   auto    for a lazily attached thread (ptsc_self) it means global: it
 *           waits for B's per-thread kernel.
 */
#include "gpu_test.h"

#include <pthread.h>

#define LONG_US 400000u

enum { B_PER_THREAD = 0, B_NON_BLOCKING = 1, B_QUIT = 2 };

static pthread_barrier_t bar;
static int b_mode;
static cudaEvent_t b_event;
static int device;

/* B: for each round, launch the long kernel on the requested stream and
 * record the event, let A sync (two barriers), then drain. */
static void *thread_b(void *unused)
{
    cudaStream_t nb = NULL;
    (void)unused;
    GT_CUDA(cudaSetDevice(device));
    GT_CUDA(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    for (;;) {
        pthread_barrier_wait(&bar); /* round starts: b_mode set by A */
        if (b_mode == B_QUIT)
            break;
        cudaStream_t s = b_mode == B_NON_BLOCKING ? nb : cudaStreamPerThread;
        GT_CUDA(ptsc_tk_spin(LONG_US, s));
        GT_CUDA(cudaEventRecord(b_event, s));
        pthread_barrier_wait(&bar); /* kernel queued */
        pthread_barrier_wait(&bar); /* A has looked */
        GT_CUDA(cudaStreamSynchronize(s));
    }
    GT_CUDA(cudaStreamDestroy(nb));
    return NULL;
}

/* One round: B queues its kernel, A syncs with `scope` on `ctx` and reports
 * whether B's kernel had finished when the sync returned. */
static int round_done(ptsc_ctx_t *ctx, int mode, ptsc_scope_t scope, double *ms)
{
    b_mode = mode;
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    double t0 = gt_now_ms();
    GT_OK(ptsc_sync(ctx, scope));
    *ms = gt_now_ms() - t0;
    cudaError_t q = cudaEventQuery(b_event);
    if (q != cudaSuccess && q != cudaErrorNotReady)
        GT_CUDA(q);
    pthread_barrier_wait(&bar);
    return q == cudaSuccess;
}

typedef struct {
    ptsc_scope_t scope;
    int mode, lazy, expect_done;
    const char *what;
} case_t;

static void *thread_a(void *unused)
{
    ptsc_ctx_t *attached = NULL, *lazy = NULL;
    (void)unused;
    GT_OK(ptsc_thread_attach(0, &attached));
    if (attached == NULL) {
        /* Release main, then tell B to quit, so that nothing hangs. */
        pthread_barrier_wait(&bar);
        b_mode = B_QUIT;
        pthread_barrier_wait(&bar);
        return NULL;
    }
    GT_OK(ptsc_ctx_device(attached, &device));
    GT_CUDA(cudaEventCreateWithFlags(&b_event, cudaEventDisableTiming));
    pthread_barrier_wait(&bar); /* B may start now that device and event are set */

    static const case_t cases[] = {
        {PTSC_SCOPE_THREAD, B_PER_THREAD, 0, 0, "thread returns before another thread's kernel ends"},
        {PTSC_SCOPE_AUTO, B_PER_THREAD, 0, 0, "auto (attached thread = thread) returns early too"},
        {PTSC_SCOPE_GLOBAL, B_PER_THREAD, 0, 1, "global waits for another thread's per-thread stream"},
        {PTSC_SCOPE_DEVICE, B_PER_THREAD, 0, 1, "device waits for another thread's per-thread stream"},
        {PTSC_SCOPE_GLOBAL, B_NON_BLOCKING, 0, 0, "global does not wait for a non-blocking stream"},
        {PTSC_SCOPE_DEVICE, B_NON_BLOCKING, 0, 1, "device waits for a non-blocking stream"},
        {PTSC_SCOPE_AUTO, B_PER_THREAD, 1, 1, "auto (lazily attached thread = global) waits"},
    };
    printf("| scope  | B's stream   | attach | B's kernel done after sync | sync ms | expected | ok   |\n");
    printf("|--------|--------------|--------|----------------------------|---------|----------|------|\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const case_t *c = &cases[i];
        ptsc_ctx_t *ctx = attached;
        double ms = 0;
        if (c->lazy) {
            /* Swap A's identity: detach, then let ptsc_self attach lazily. */
            GT_OK(ptsc_thread_detach());
            GT_OK(ptsc_self(&lazy));
            ctx = lazy;
            attached = NULL;
        }
        int done = round_done(ctx, c->mode, c->scope, &ms);
        int ok = done == c->expect_done;
        printf("| %-6s | %-12s | %-6s | %-26s | %7.1f | %-8s | %-4s |\n",
               c->scope == PTSC_SCOPE_AUTO     ? "auto"
               : c->scope == PTSC_SCOPE_THREAD ? "thread"
               : c->scope == PTSC_SCOPE_GLOBAL ? "global"
                                               : "device",
               c->mode == B_PER_THREAD ? "per-thread" : "non-blocking", c->lazy ? "lazy" : "attach",
               done ? "yes" : "no", ms, c->expect_done ? "yes" : "no", ok ? "ok" : "FAIL");
        fflush(stdout);
        if (!ok)
            gt_fail(__FILE__, __LINE__, "%s: B's kernel %s finished when ptsc_sync returned (%.1f ms)",
                    c->what, done ? "had" : "had not", ms);
    }
    b_mode = B_QUIT;
    pthread_barrier_wait(&bar);
    GT_CUDA(cudaEventDestroy(b_event));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_scope");
    if (rc)
        return rc;
    /* The semantics below are those of per-thread default streams. */
    setenv("PTSC_STREAM", "per-thread", 1);
    setenv("PTSC_MAX_THREADS", "2", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    pthread_t a, b;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&a, NULL, thread_a, NULL);
    /* B starts once A has published the device and event. */
    pthread_barrier_wait(&bar);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&bar);
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_scope");
}
