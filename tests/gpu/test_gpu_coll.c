/*
 * Collectives on device buffers, from several threads at once.
 *
 * Two ranks x 4 threads; thread t of every rank runs bcast, reduce,
 * allreduce (also in place), allgather and alltoall on its lane with
 * cudaMalloc buffers. Every input is written by a kernel that first spins
 * for a millisecond on the thread's bound stream, so a collective that read
 * it without the scope's sync (or without ordering the staging copy) would
 * see stale data; every output is read back on the same stream, behind
 * ptsc's copies, with no other sync. XOR is the reduction: exact, and a
 * missing or doubled contribution changes the result.
 *
 * Run under PTSC_COMM=dup and shared, and with PTSC_STAGING=always.
 */
#include "gpu_test.h"

#include <pthread.h>

#define NT 4
#define N 300000 /* ints per block: 1.2 MB */
#define SPIN_US 1000

static int nranks;

static int seed_of(int rank, int t, int k) { return ((k * 16 + rank) * NT + t) * 7 + 1; }

/* Device -> host on the thread's stream (behind ptsc's copies), then wait. */
static int *to_host(const int *dev, size_t n, cudaStream_t s)
{
    int *h = malloc(n * sizeof *h);
    if (!h)
        return NULL;
    GT_CUDA(cudaMemcpyAsync(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost, s));
    GT_CUDA(cudaStreamSynchronize(s));
    return h;
}

static void check_xor(const char *what, const int *h, int t, int k, int has_result)
{
    if (!has_result || !h)
        return;
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        int want = 0;
        for (int r = 0; r < nranks; r++)
            want ^= ptsc_tk_pattern(seed_of(r, t, k), i);
        bad += h[i] != want;
    }
    GT_CHECK(bad == 0, "%s, thread %d: %zu of %d elements wrong", what, t, bad, N);
}

static void *worker(void *p)
{
    int t = (int)(intptr_t)p;
    ptsc_ctx_t *ctx = NULL;
    int *a = NULL, *b = NULL;
    size_t all = (size_t)N * (size_t)nranks;

    GT_OK(ptsc_thread_attach(t, &ctx));
    if (!ctx)
        return NULL;
    void *sv = NULL;
    GT_OK(ptsc_ctx_stream(ctx, &sv));
    cudaStream_t s = (cudaStream_t)sv;
    GT_CUDA(cudaMalloc((void **)&a, all * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&b, all * sizeof(int)));

    /* bcast from rank 1: every rank ends with rank 1's block. */
    if (gt_rank == 1)
        GT_CUDA(ptsc_tk_spin_fill(a, N, seed_of(1, t, 0), SPIN_US, s));
    else
        GT_CUDA(ptsc_tk_spin_fill(a, N, 0, SPIN_US, s));
    GT_OK(ptsc_bcast(ctx, a, N, MPI_INT, 1));
    unsigned long long bad = gt_count_bad(a, N, seed_of(1, t, 0), s);
    GT_CHECK(bad == 0, "bcast, thread %d: %llu of %d elements stale", t, bad, N);

    /* reduce to rank 0 and allreduce, XOR of every rank's block. */
    GT_CUDA(ptsc_tk_spin_fill(a, N, seed_of(gt_rank, t, 1), SPIN_US, s));
    GT_OK(ptsc_reduce(ctx, a, b, N, MPI_INT, MPI_BXOR, 0));
    int *h = to_host(b, N, s);
    check_xor("reduce", h, t, 1, gt_rank == 0);
    free(h);

    GT_CUDA(ptsc_tk_spin_fill(a, N, seed_of(gt_rank, t, 2), SPIN_US, s));
    GT_OK(ptsc_allreduce(ctx, a, b, N, MPI_INT, MPI_BXOR));
    h = to_host(b, N, s);
    check_xor("allreduce", h, t, 2, 1);
    free(h);

    GT_CUDA(ptsc_tk_spin_fill(b, N, seed_of(gt_rank, t, 3), SPIN_US, s));
    GT_OK(ptsc_allreduce(ctx, MPI_IN_PLACE, b, N, MPI_INT, MPI_BXOR));
    h = to_host(b, N, s);
    check_xor("allreduce in place", h, t, 3, 1);
    free(h);

    /* allgather: block r of the result is rank r's block. */
    GT_CUDA(ptsc_tk_spin_fill(a, N, seed_of(gt_rank, t, 4), SPIN_US, s));
    GT_OK(ptsc_allgather(ctx, a, N, MPI_INT, b, N, MPI_INT));
    for (int r = 0; r < nranks; r++) {
        bad = gt_count_bad(b + (size_t)r * N, N, seed_of(r, t, 4), s);
        GT_CHECK(bad == 0, "allgather, thread %d, block of rank %d: %llu wrong", t, r, bad);
    }

    /* alltoall: block j sent to rank j carries (sender, j); block r received
     * from rank r must carry (r, me). */
    for (int j = 0; j < nranks; j++)
        GT_CUDA(ptsc_tk_spin_fill(a + (size_t)j * N, N, seed_of(gt_rank, t, 5 + j), SPIN_US, s));
    GT_OK(ptsc_alltoall(ctx, a, N, MPI_INT, b, N, MPI_INT));
    for (int r = 0; r < nranks; r++) {
        bad = gt_count_bad(b + (size_t)r * N, N, seed_of(r, t, 5 + gt_rank), s);
        GT_CHECK(bad == 0, "alltoall, thread %d, block from rank %d: %llu wrong", t, r, bad);
    }

    ptsc_stats_t st;
    GT_OK(ptsc_ctx_stats(ctx, &st));
    GT_CHECK(st.collectives == 6, "thread %d counted %llu collectives, ran 6", t,
             (unsigned long long)st.collectives);
    GT_CUDA(cudaFree(a));
    GT_CUDA(cudaFree(b));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_coll");
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
        printf("test_gpu_coll: %d ranks x %d threads, %s path, PTSC_COMM=%s\n", nranks, NT, gt_path(NULL),
               getenv("PTSC_COMM") ? getenv("PTSC_COMM") : "dup");
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_coll");
}
