/*
 * World collectives (every thread of every rank) on device buffers.
 *
 * Two ranks x 4 threads. Every input is written by a kernel that first
 * spins for a millisecond on the thread's bound stream, so a collective
 * that read it without the scope's sync (or without ordering its copy)
 * would see stale data; every output is read back on the same stream with
 * no other sync. XOR is the reduction: exact, and a missing or doubled
 * contribution of any (rank, thread) changes the result.
 *
 * Run under PTSC_COMM=dup and shared, and with PTSC_STAGING=always.
 */
#include "gpu_test.h"

#include <pthread.h>

#define NT 4
#define N 100000 /* ints per block */
#define SPIN_US 1000

static int nranks;

static int seed_of(int rank, int t, int k) { return ((k * 16 + rank) * NT + t) * 11 + 3; }

static void *worker(void *p)
{
    int t = (int)(intptr_t)p;
    ptsc_ctx_t *ctx = NULL;
    int *a = NULL, *b = NULL;
    size_t all = (size_t)N * (size_t)nranks * NT;

    GT_OK(ptsc_thread_attach(t, &ctx));
    if (!ctx)
        return NULL;
    void *sv = NULL;
    GT_OK(ptsc_ctx_stream(ctx, &sv));
    cudaStream_t s = (cudaStream_t)sv;
    GT_CUDA(cudaMalloc((void **)&a, all * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&b, all * sizeof(int)));

    /* bcast from (rank 1, thread 2): every thread ends with its block. */
    int root = gt_rank == 1 && t == 2;
    GT_CUDA(ptsc_tk_spin_fill(a, N, root ? seed_of(1, 2, 0) : 0, SPIN_US, s));
    GT_OK(ptsc_world_bcast(ctx, NT, a, N, MPI_INT, 1, 2));
    unsigned long long bad = gt_count_bad(a, N, seed_of(1, 2, 0), s);
    GT_CHECK(bad == 0, "world bcast, thread %d: %llu of %d elements stale", t, bad, N);

    /* allreduce: XOR over every (rank, thread) block. */
    GT_CUDA(ptsc_tk_spin_fill(a, N, seed_of(gt_rank, t, 1), SPIN_US, s));
    GT_OK(ptsc_world_allreduce(ctx, NT, a, b, N, MPI_INT, MPI_BXOR));
    int *h = malloc((size_t)N * sizeof *h);
    if (h) {
        GT_CUDA(cudaMemcpyAsync(h, b, (size_t)N * sizeof *h, cudaMemcpyDeviceToHost, s));
        GT_CUDA(cudaStreamSynchronize(s));
        size_t wrong = 0;
        for (size_t i = 0; i < N; i++) {
            int want = 0;
            for (int r = 0; r < nranks; r++)
                for (int u = 0; u < NT; u++)
                    want ^= ptsc_tk_pattern(seed_of(r, u, 1), i);
            wrong += h[i] != want;
        }
        GT_CHECK(wrong == 0, "world allreduce, thread %d: %zu of %d elements wrong", t, wrong, N);
        free(h);
    }

    /* allgather: block (r * NT + u) of the result is (rank r, thread u)'s. */
    GT_CUDA(ptsc_tk_spin_fill(a, N, seed_of(gt_rank, t, 2), SPIN_US, s));
    GT_OK(ptsc_world_allgather(ctx, NT, a, N, MPI_INT, b));
    for (int r = 0; r < nranks; r++)
        for (int u = 0; u < NT; u++) {
            bad = gt_count_bad(b + ((size_t)r * NT + (size_t)u) * N, N, seed_of(r, u, 2), s);
            GT_CHECK(bad == 0, "world allgather, thread %d, block of (%d, %d): %llu wrong", t, r, u, bad);
        }

    GT_CUDA(cudaFree(a));
    GT_CUDA(cudaFree(b));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_world");
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "4", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    GT_OK(ptsc_size(&nranks, NULL));
    if (gt_rank == 0)
        printf("test_gpu_world: %d ranks x %d threads, %s path, PTSC_COMM=%s\n", nranks, NT, gt_path(NULL),
               getenv("PTSC_COMM") ? getenv("PTSC_COMM") : "dup");
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_world");
}
