/*
 * Graph capture: a sync inside cudaStreamBeginCapture is illegal, and
 * ptsc must refuse it with PTSC_ERR_CAPTURING without breaking the capture.
 * One rank, two threads.
 *
 *  1. A captures on its own bound stream (global mode, the strictest):
 *     ptsc_sync at every scope and ptsc_send / ptsc_recv of a device buffer
 *     return PTSC_ERR_CAPTURING; ptsc_mem_class still works; the capture
 *     then ends successfully and the graph runs and fills the buffer.
 *  2. B captures on ITS per-thread stream (thread-local mode, so A is not
 *     restricted): A's thread sync is legal and succeeds; A's global and
 *     device syncs would use the legacy stream B's blocking stream depends
 *     on, so they return PTSC_ERR_CAPTURING; B's capture ends successfully.
 *  3. The same with B in global mode: A's global sync is refused and B's
 *     capture ends successfully.
 */
#include "gpu_test.h"

#include <pthread.h>

#define N 4096

static pthread_barrier_t bar;
static int device;
static enum cudaStreamCaptureMode b_mode_capture;
static int b_quit;

static void end_and_run(cudaStream_t s, const char *who, int *buf, int seed)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (e != cudaSuccess || g == NULL) {
        gt_fail(__FILE__, __LINE__, "%s: cudaStreamEndCapture failed after ptsc calls: %s", who,
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        return;
    }
    GT_CUDA(cudaGraphInstantiate(&x, g, 0));
    if (x != NULL) {
        GT_CUDA(cudaGraphLaunch(x, s));
        GT_CUDA(cudaStreamSynchronize(s));
        if (buf != NULL)
            GT_CHECK(gt_count_bad(buf, N, seed, s) == 0, "%s: the captured graph did not fill the buffer",
                     who);
        GT_CUDA(cudaGraphExecDestroy(x));
    }
    GT_CUDA(cudaGraphDestroy(g));
    printf("%s: capture ended and its graph ran\n", who);
}

static void *thread_b(void *unused)
{
    int *buf = NULL;
    (void)unused;
    GT_CUDA(cudaSetDevice(device));
    GT_CUDA(cudaMalloc((void **)&buf, N * sizeof(int)));
    for (;;) {
        pthread_barrier_wait(&bar);
        if (b_quit)
            break;
        GT_CUDA(cudaStreamBeginCapture(cudaStreamPerThread, b_mode_capture));
        GT_CUDA(ptsc_tk_spin_fill(buf, N, 11, 0, cudaStreamPerThread));
        pthread_barrier_wait(&bar); /* capturing */
        pthread_barrier_wait(&bar); /* A has tried */
        end_and_run(cudaStreamPerThread, "B", buf, 11);
    }
    GT_CUDA(cudaFree(buf));
    return NULL;
}

static void *thread_a(void *unused)
{
    ptsc_ctx_t *ctx = NULL;
    int *buf = NULL;
    ptsc_memclass_t cls = PTSC_MEM_HOST;
    (void)unused;
    GT_OK(ptsc_thread_attach(0, &ctx));
    if (ctx != NULL)
        GT_OK(ptsc_ctx_device(ctx, &device));
    pthread_barrier_wait(&bar); /* main starts B */
    if (ctx == NULL) {
        b_quit = 1;
        pthread_barrier_wait(&bar);
        return NULL;
    }
    cudaStream_t s = gt_stream(ctx);
    GT_CUDA(cudaMalloc((void **)&buf, N * sizeof(int)));

    /* 1. A's own bound stream. */
    GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    GT_CUDA(ptsc_tk_spin_fill(buf, N, 5, 0, s));
    GT_RC(ptsc_sync(ctx, PTSC_SCOPE_THREAD), PTSC_ERR_CAPTURING);
    GT_RC(ptsc_sync(ctx, PTSC_SCOPE_GLOBAL), PTSC_ERR_CAPTURING);
    GT_RC(ptsc_sync(ctx, PTSC_SCOPE_DEVICE), PTSC_ERR_CAPTURING);
    GT_RC(ptsc_sync(ctx, PTSC_SCOPE_AUTO), PTSC_ERR_CAPTURING);
    printf("A: ptsc_sync under capture: \"%s\"\n", ptsc_last_error());
    GT_OK(ptsc_sync(ctx, PTSC_SCOPE_NONE));
    GT_OK(ptsc_mem_class(buf, &cls));
    GT_CHECK(cls == PTSC_MEM_DEVICE, "class %d under capture", (int)cls);
    ptsc_scope_t old;
    GT_OK(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_THREAD, &old));
    int rs = ptsc_send(ctx, buf, N, MPI_INT, 0, 0, 1);
    GT_RC(rs, PTSC_ERR_CAPTURING);
    int rr = ptsc_recv(ctx, buf, N, MPI_INT, 0, 0, 2);
    GT_RC(rr, PTSC_ERR_CAPTURING);
    GT_OK(ptsc_ctx_set_scope(ctx, old, NULL));
    end_and_run(s, "A (own stream)", buf, 5);
    if (rs == PTSC_OK) {
        /* The send wrongly went out: drain it so that finalize does not hang. */
        int *h = malloc(N * sizeof(int));
        ptsc_recv(ctx, h, N, MPI_INT, 0, 0, 1);
        free(h);
    }

    /* 2 and 3. B's per-thread stream, thread-local then global mode. */
    const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeThreadLocal,
                                                cudaStreamCaptureModeGlobal};
    for (int m = 0; m < 2; m++) {
        b_mode_capture = modes[m];
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
        if (m == 0)
            GT_OK(ptsc_sync(ctx, PTSC_SCOPE_THREAD));
        GT_RC(ptsc_sync(ctx, PTSC_SCOPE_GLOBAL), PTSC_ERR_CAPTURING);
        GT_RC(ptsc_sync(ctx, PTSC_SCOPE_DEVICE), PTSC_ERR_CAPTURING);
        pthread_barrier_wait(&bar);
    }
    b_quit = 1;
    pthread_barrier_wait(&bar);
    GT_CUDA(cudaFree(buf));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_capture");
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "2", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    pthread_t a, b;
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_barrier_wait(&bar);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&bar);
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_capture");
}
