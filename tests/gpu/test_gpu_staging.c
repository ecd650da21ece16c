/*
 * Device buffers through the transfer path (staged on a non-CUDA-aware MPI,
 * direct otherwise; PTSC_STAGING=always forces staging). Two ranks.
 *
 *  1. Receive, then a kernel on the same stream with no host sync: the
 *     kernel must see the data (a staged receive's host-to-device copy is
 *     queued on the bound stream before it). Sizes below, at and above the
 *     pipelining chunk (PTSC_STAGING_CHUNK, 4 MiB by default).
 *  2. Many outstanding isend/irecv per thread (4 threads x 48 messages of
 *     4 KiB .. 6 MiB), receives posted in reverse order, senders' buffers
 *     written by kernels on the bound stream just before each isend (scope
 *     thread): every message must arrive intact, in its own buffer.
 */
#include "gpu_test.h"

#include <pthread.h>

#define NT 4
#define NMSG 48

static int staging;

static size_t msg_elems(int m)
{
    static const size_t b[] = {4u << 10, 64u << 10, 1u << 20, (4u << 20) + 4096, 6u << 20, 12345 * 4};
    return b[m % 6] / sizeof(int);
}

static void *worker(void *p)
{
    int t = (int)(size_t)p;
    ptsc_ctx_t *ctx = NULL;
    GT_OK(ptsc_thread_attach(t, &ctx));
    if (ctx == NULL)
        return NULL;
    GT_OK(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_THREAD, NULL));
    cudaStream_t s = gt_stream(ctx);

    /* 1. recv -> kernel, no host sync between them. Thread 0 only. */
    if (t == 0) {
        static const size_t sz[] = {1u << 10, 1u << 20, 4u << 20, (16u << 20) + 12};
        for (int k = 0; k < 4; k++) {
            size_t n = sz[k] / sizeof(int);
            int *d = NULL;
            GT_CUDA(cudaMalloc((void **)&d, n * sizeof(int)));
            if (gt_rank == 0) {
                GT_CUDA(ptsc_tk_spin_fill(d, n, 100 + k, 500, s));
                GT_OK(ptsc_send(ctx, d, (int)n, MPI_INT, 1, 0, 100 + k));
            } else {
                GT_CUDA(ptsc_tk_spin_fill(d, n, -7, 0, s)); /* old contents, still queued */
                GT_OK(ptsc_recv(ctx, d, (int)n, MPI_INT, 0, 0, 100 + k));
                unsigned long long bad = gt_count_bad(d, n, 100 + k, s);
                GT_CHECK(bad == 0, "recv of %zu bytes then a kernel on the same stream: %llu bad elements",
                         n * sizeof(int), bad);
                printf("recv->kernel, %zu bytes, %s: %s\n", n * sizeof(int), staging ? "staged" : "direct",
                       bad ? "FAIL" : "ok");
            }
            GT_CUDA(cudaStreamSynchronize(s));
            GT_CUDA(cudaFree(d));
        }
    }

    /* 2. Many outstanding requests. */
    int *bufs[NMSG];
    ptsc_request_t reqs[NMSG];
    for (int m = 0; m < NMSG; m++) {
        bufs[m] = NULL;
        reqs[m] = PTSC_REQUEST_NULL;
        GT_CUDA(cudaMalloc((void **)&bufs[m], msg_elems(m) * sizeof(int)));
    }
    if (gt_rank == 0) {
        for (int m = 0; m < NMSG; m++) {
            GT_CUDA(ptsc_tk_spin_fill(bufs[m], msg_elems(m), t * 1000 + m, m % 8 == 0 ? 200 : 0, s));
            GT_OK(ptsc_isend(ctx, bufs[m], (int)msg_elems(m), MPI_INT, 1, t, m, &reqs[m]));
        }
        GT_OK(ptsc_waitall(NMSG, reqs));
    } else {
        for (int m = NMSG - 1; m >= 0; m--)
            GT_OK(ptsc_irecv(ctx, bufs[m], (int)msg_elems(m), MPI_INT, 0, t, m, &reqs[m]));
        GT_OK(ptsc_waitall(NMSG, reqs));
        unsigned long long bad_msgs = 0;
        for (int m = 0; m < NMSG; m++) {
            unsigned long long bad = gt_count_bad(bufs[m], msg_elems(m), t * 1000 + m, s);
            if (bad) {
                bad_msgs++;
                gt_fail(__FILE__, __LINE__, "thread %d message %d (%zu bytes): %llu bad elements", t, m,
                        msg_elems(m) * sizeof(int), bad);
            }
        }
        for (int m = 0; m < NMSG; m++)
            GT_CHECK(reqs[m] == PTSC_REQUEST_NULL, "request %d not reset by ptsc_waitall", m);
        printf("thread %d: %d outstanding isend/irecv (%s): %llu damaged\n", t, NMSG,
               staging ? "staged" : "direct", bad_msgs);
    }
    GT_CUDA(cudaStreamSynchronize(s));
    for (int m = 0; m < NMSG; m++)
        GT_CUDA(cudaFree(bufs[m]));
    ptsc_stats_t st;
    GT_OK(ptsc_ctx_stats(ctx, &st));
    if (staging)
        GT_CHECK(st.staged_bytes > 0, "thread %d: the staging path staged no bytes", t);
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_staging"), nranks = 0;
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "4", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    GT_OK(ptsc_size(&nranks, NULL));
    if (nranks != 2) {
        printf("SKIP test_gpu_staging: needs 2 ranks\n");
        ptsc_finalize();
        return GT_SKIP;
    }
    gt_path(&staging);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(size_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_staging");
}
