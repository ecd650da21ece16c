/*
 * Several GPUs per node. Skips (77, with the reason) below two devices.
 *
 *   test_gpu_multi thread   one rank, PTSC_DEVICE_MAP=thread, 4 threads:
 *     each thread is bound to device t % n and its stream is on it; a
 *     global-scope and a device-scope sync of thread 0 wait for a long
 *     kernel of thread 1 on another device; a thread-scope sync does not.
 *   test_gpu_multi rank     2 ranks, PTSC_DEVICE_MAP=rank: every thread of
 *     rank r is on device r; device buffers filled by a spinning kernel go
 *     both ways between the ranks (staged or direct), checked element by
 *     element.
 */
#include "gpu_test.h"

#include <pthread.h>

#define NT 4
#define N (1 << 20)

static int ndev, mode_rank;
static pthread_barrier_t bar;
static cudaEvent_t long_done; /* recorded by thread 1 after its long kernel */

static void *thread_mode(void *p)
{
    int t = (int)(intptr_t)p, dev = -1, cur = -1;
    ptsc_ctx_t *ctx = NULL;
    GT_OK(ptsc_thread_attach(t, &ctx));
    if (!ctx)
        return NULL;
    GT_OK(ptsc_ctx_device(ctx, &dev));
    GT_CUDA(cudaGetDevice(&cur));
    GT_CHECK(dev == t % ndev && cur == dev, "thread %d: device %d, current %d, expected %d", t, dev, cur,
             t % ndev);
    void *sv = NULL;
    GT_OK(ptsc_ctx_stream(ctx, &sv));
    cudaStream_t s = (cudaStream_t)sv;

    static const ptsc_scope_t scopes[] = {PTSC_SCOPE_THREAD, PTSC_SCOPE_GLOBAL, PTSC_SCOPE_DEVICE};
    for (int k = 0; k < 3; k++) {
        if (t == 1) {
            GT_CUDA(ptsc_tk_spin(300000, s)); /* 300 ms on device 1 */
            GT_CUDA(cudaEventRecord(long_done, s));
        }
        pthread_barrier_wait(&bar);
        if (t == 0) {
            double t0 = gt_now_ms();
            GT_OK(ptsc_sync(ctx, scopes[k]));
            double ms = gt_now_ms() - t0;
            cudaError_t q = cudaEventQuery(long_done);
            int done = q == cudaSuccess;
            (void)cudaGetLastError();
            int want = scopes[k] != PTSC_SCOPE_THREAD;
            printf("| %-6s | device 0 waits for device 1: %-3s | %7.1f ms | expected %s |\n",
                   k == 0   ? "thread"
                   : k == 1 ? "global"
                            : "device",
                   done ? "yes" : "no", ms, want ? "yes" : "no");
            GT_CHECK(done == want, "scope %d: other device's kernel %s after the sync", (int)scopes[k],
                     done ? "done" : "not done");
            GT_CUDA(cudaGetDevice(&cur));
            GT_CHECK(cur == dev, "the sync left device %d current, expected %d", cur, dev);
        }
        if (t == 1)
            GT_CUDA(cudaStreamSynchronize(s));
        pthread_barrier_wait(&bar);
    }
    GT_OK(ptsc_thread_detach());
    return NULL;
}

static void *rank_mode(void *p)
{
    int t = (int)(intptr_t)p, dev = -1, nranks = 0;
    ptsc_ctx_t *ctx = NULL;
    int *out = NULL, *in = NULL;
    GT_OK(ptsc_thread_attach(t, &ctx));
    if (!ctx)
        return NULL;
    GT_OK(ptsc_size(&nranks, NULL));
    GT_OK(ptsc_ctx_device(ctx, &dev));
    GT_CHECK(dev == gt_rank % ndev, "rank %d thread %d on device %d", gt_rank, t, dev);
    void *sv = NULL;
    GT_OK(ptsc_ctx_stream(ctx, &sv));
    cudaStream_t s = (cudaStream_t)sv;
    GT_CUDA(cudaMalloc((void **)&out, N * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&in, N * sizeof(int)));
    int peer = (gt_rank + 1) % nranks;
    for (int r = 0; r < 3; r++) {
        GT_CUDA(ptsc_tk_spin_fill(out, N, (gt_rank * NT + t) * 8 + r, 2000, s));
        GT_OK(ptsc_sendrecv(ctx, out, N, MPI_INT, peer, t, r, in, N, MPI_INT, peer, t, r));
        unsigned long long bad = gt_count_bad(in, N, (peer * NT + t) * 8 + r, s);
        GT_CHECK(bad == 0, "thread %d round %d: %llu of %d elements wrong", t, r, bad, N);
    }
    GT_CUDA(cudaFree(out));
    GT_CUDA(cudaFree(in));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_multi");
    if (rc)
        return rc;
    GT_CUDA(cudaGetDeviceCount(&ndev));
    if (ndev < 2) {
        printf("SKIP test_gpu_multi: needs 2 or more CUDA devices, %d visible\n", ndev);
        return GT_SKIP;
    }
    mode_rank = argc > 1 && strcmp(argv[1], "rank") == 0;
    setenv("PTSC_MAX_THREADS", "4", 1);
    setenv("PTSC_DEVICE_MAP", mode_rank ? "rank" : "thread", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    if (!mode_rank) {
        GT_CUDA(cudaSetDevice(1));
        GT_CUDA(cudaEventCreateWithFlags(&long_done, cudaEventDisableTiming));
    }
    pthread_barrier_init(&bar, NULL, NT);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, mode_rank ? rank_mode : thread_mode, (void *)(intptr_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar);
    if (!mode_rank)
        GT_CUDA(cudaEventDestroy(long_done));
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_multi");
}
