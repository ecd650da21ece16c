/*
 * The stream-ordered calls (ptsc_*_enqueue) with device buffers: the host
 * thread queues kernels and communication on its stream and synchronises
 * only at the end of each case. Two ranks x NT threads; thread t of rank r
 * pairs with thread t of rank 1-r. Every received byte is counted by a
 * kernel queued after the receive on the same stream (so the test also
 * checks that the next kernel sees the message), into mapped memory read
 * after ptsc_enqueue_sync.
 *
 *   order   NMSG messages behind a spinning producer kernel each, one tag:
 *           ptsc_isend_enqueue x NMSG, then the waits; the receiver posts
 *           ptsc_irecv_enqueue x NMSG, the waits, then one count per
 *           message with its own seed (non-overtaking, and the data).
 *   sizes   blocking ping-pong, 4 B .. 4 MiB: rank 0 fills (kernel), sends,
 *           receives the reply, counts it; rank 1 receives, counts, fills
 *           the reply, sends it; nothing waits on the host in between.
 *   graph   one exchange captured into a CUDA graph on a stream of the
 *           thread's own (fill with the launch count as seed, isend,
 *           irecv, both waits, count the peer's data for the same launch,
 *           an allreduce of rank 0's fill and rank 1's zeros, count the sum
 *           against the fill, launch count + 1), launched GRAPH_LAUNCHES
 *           times back to back: every launch must exchange and reduce its
 *           own data, and the count must reach GRAPH_LAUNCHES.
 *   allred  ptsc_allreduce_enqueue of device ints behind a producer kernel,
 *           in place and not, 4 B .. 4 MiB, checked on the host.
 * At the end no operation may be left: the captured ones are recycled when
 * their graphs are destroyed.
 *
 *   errors  a 400-byte message into a 40-byte receive (PTSC_ERR_TRUNCATE at
 *           the sync, the next message whole); the legacy stream and
 *           pageable host memory refused; a captured request's wait outside
 *           its capture refused, and a one-shot request's wait inside one.
 *
 * Skips (77) without a device.
 */
#include "gpu_test.h"

#include "ptsc_internal.h" /* ptsc__enqueue_live */

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

#define NT 4
#define NMSG 8
#define SPIN_US 300
#define GRAPH_LAUNCHES 1000
#define GRAPH_INTS 16384

static int rank_, peer_;
static unsigned long long *bad_; /* mapped: per thread */

#define SEED(t, k) (1000 * (t) + (k))

/* Every device buffer of a thread, allocated before any thread of the rank
 * enqueues and freed after every one has synchronised (a barrier each
 * side): cudaFree, and CUDA's other calls that wait for the device, must
 * not run while a stream of the process may wait for a word that another
 * thread has still to move (docs/design.md, "Stream-ordered calls"). */
typedef struct {
    int *order[NMSG];       /* ORDER_INTS each */
    int *a, *r;             /* sizes and allreduce: SIZES_INTS each */
    int *sb, *rb, *ab, *ar; /* graph: GRAPH_INTS each */
    unsigned *iter;         /* graph: launches counted on the device */
    char *big, *small;      /* errors: 400 and 40 bytes */
} bufs_t;

#define ORDER_INTS 50000      /* 200 KB: above every eager size */
#define SIZES_INTS (1u << 20) /* 4 MiB */
static pthread_barrier_t bar_;

static void order_case(ptsc_ctx_t *ctx, int t, cudaStream_t s, int sender, bufs_t *B)
{
    size_t n = ORDER_INTS;
    int **b = B->order;
    ptsc_stream_request_t rq[NMSG];
    if (sender) {
        for (int k = 0; k < NMSG; k++) {
            GT_CUDA(ptsc_tk_spin_fill(b[k], n, SEED(t, k), SPIN_US, s));
            GT_OK(ptsc_isend_enqueue(ctx, b[k], (int)n, MPI_INT, peer_, t, 5, NULL, &rq[k]));
        }
        for (int k = 0; k < NMSG; k++)
            GT_OK(ptsc_wait_enqueue(&rq[k], NULL));
    } else {
        for (int k = 0; k < NMSG; k++)
            GT_OK(ptsc_irecv_enqueue(ctx, b[k], (int)n, MPI_INT, peer_, t, 5, NULL, &rq[k]));
        for (int k = 0; k < NMSG; k++)
            GT_OK(ptsc_wait_enqueue(&rq[k], NULL));
        for (int k = 0; k < NMSG; k++)
            GT_CUDA(ptsc_tk_count_bad(b[k], n, SEED(t, k), &bad_[t], s));
    }
    GT_OK(ptsc_enqueue_sync(ctx, NULL));
    GT_CHECK(bad_[t] == 0, "order: thread %d: %llu bad elements in %d messages of one tag", t, bad_[t], NMSG);
    bad_[t] = 0;
}

static void sizes_case(ptsc_ctx_t *ctx, int t, cudaStream_t s, bufs_t *B)
{
    size_t max = SIZES_INTS;
    int *a = B->a, *r = B->r;
    for (size_t n = 1, k = 0; n <= max; n *= 8, k++) {
        int seed = SEED(t, 100 + (int)k), reply = SEED(t, 200 + (int)k);
        if (rank_ == 0) {
            GT_CUDA(ptsc_tk_spin_fill(a, n, seed, SPIN_US, s));
            GT_OK(ptsc_send_enqueue(ctx, a, (int)n, MPI_INT, peer_, t, 6, NULL));
            GT_OK(ptsc_recv_enqueue(ctx, r, (int)n, MPI_INT, peer_, t, 7, NULL));
            GT_CUDA(ptsc_tk_count_bad(r, n, reply, &bad_[t], s));
        } else {
            GT_OK(ptsc_recv_enqueue(ctx, r, (int)n, MPI_INT, peer_, t, 6, NULL));
            GT_CUDA(ptsc_tk_count_bad(r, n, seed, &bad_[t], s));
            GT_CUDA(ptsc_tk_spin_fill(a, n, reply, SPIN_US, s));
            GT_OK(ptsc_send_enqueue(ctx, a, (int)n, MPI_INT, peer_, t, 7, NULL));
        }
    }
    GT_OK(ptsc_enqueue_sync(ctx, NULL));
    GT_CHECK(bad_[t] == 0, "sizes: thread %d: %llu bad elements", t, bad_[t]);
    bad_[t] = 0;
}

static void graph_case(ptsc_ctx_t *ctx, int t, bufs_t *B)
{
    cudaStream_t g = NULL;
    int *sb = B->sb, *rb = B->rb, *ab = B->ab, *ar = B->ar;
    unsigned *iter = B->iter, launches = 0;
    GT_CUDA(cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking));
    GT_CUDA(cudaMemsetAsync(iter, 0, sizeof *iter, g));
    GT_CUDA(cudaStreamSynchronize(g));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    ptsc_stream_request_t sr = NULL, rr = NULL, stale = NULL;
    int base_me = 10000 * (rank_ + 1) + 100 * t, base_peer = 10000 * (peer_ + 1) + 100 * t;
    GT_CUDA(cudaStreamBeginCapture(g, cudaStreamCaptureModeThreadLocal));
    int rc = PTSC_OK;
    GT_CUDA(ptsc_tk_fill_iter(sb, GRAPH_INTS, base_me, iter, g));
    if (rc == PTSC_OK)
        rc = ptsc_isend_enqueue(ctx, sb, GRAPH_INTS, MPI_INT, peer_, t, 8, g, &sr);
    if (rc == PTSC_OK)
        rc = ptsc_irecv_enqueue(ctx, rb, GRAPH_INTS, MPI_INT, peer_, t, 8, g, &rr);
    stale = sr;
    if (rc == PTSC_OK)
        rc = ptsc_wait_enqueue(&sr, g);
    if (rc == PTSC_OK)
        rc = ptsc_wait_enqueue(&rr, g);
    GT_CUDA(ptsc_tk_count_bad_iter(rb, GRAPH_INTS, base_peer, iter, &bad_[t], g));
    if (rank_ == 0)
        GT_CUDA(ptsc_tk_fill_iter(ab, GRAPH_INTS, 7 + t, iter, g));
    else
        GT_CUDA(cudaMemsetAsync(ab, 0, GRAPH_INTS * sizeof(int), g));
    if (rc == PTSC_OK)
        rc = ptsc_allreduce_enqueue(ctx, ab, ar, GRAPH_INTS, MPI_INT, MPI_SUM, g);
    GT_CUDA(ptsc_tk_count_bad_iter(ar, GRAPH_INTS, 7 + t, iter, &bad_[t], g));
    GT_CUDA(ptsc_tk_inc(iter, g));
    GT_CHECK(rc == PTSC_OK, "graph: thread %d: an enqueue call under capture returned %s: %s", t,
             ptsc_status_name(rc), ptsc_last_error());
    cudaError_t e = cudaStreamEndCapture(g, &graph);
    GT_CHECK(e == cudaSuccess, "graph: cudaStreamEndCapture: %s", cudaGetErrorString(e));
    if (rc == PTSC_OK && e == cudaSuccess) {
        GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
        double t0 = gt_now_ms();
        for (int i = 0; i < GRAPH_LAUNCHES; i++)
            GT_CUDA(cudaGraphLaunch(exec, g));
        GT_CUDA(cudaStreamSynchronize(g));
        double ms = gt_now_ms() - t0;
        GT_OK(ptsc_enqueue_sync(ctx, NULL));
        GT_CUDA(cudaMemcpyAsync(&launches, iter, sizeof launches, cudaMemcpyDeviceToHost, g));
        GT_CUDA(cudaStreamSynchronize(g));
        GT_CHECK(launches == GRAPH_LAUNCHES, "graph: thread %d: %u launches counted, expected %d", t,
                 launches, GRAPH_LAUNCHES);
        GT_CHECK(bad_[t] == 0, "graph: thread %d: %llu bad elements over %d launches", t, bad_[t],
                 GRAPH_LAUNCHES);
        if (t == 0 && rank_ == 0)
            printf("graph: %d launches of a %d-byte exchange in %.1f ms (%.1f us each)\n", GRAPH_LAUNCHES,
                   GRAPH_INTS * 4, ms, 1000.0 * ms / GRAPH_LAUNCHES);
        GT_CUDA(cudaGraphExecDestroy(exec));
    } else {
        (void)cudaGetLastError();
    }
    /* A request started under capture is waited for in its capture only. */
    if (stale)
        GT_RC(ptsc_wait_enqueue(&stale, NULL), PTSC_ERR_ARG);
    if (graph)
        GT_CUDA(cudaGraphDestroy(graph));
    bad_[t] = 0;
    GT_CUDA(cudaStreamDestroy(g));
}

static void allreduce_case(ptsc_ctx_t *ctx, int t, cudaStream_t s, bufs_t *B)
{
    size_t max = SIZES_INTS;
    int *d = B->a, *r = B->r, *h = malloc(max * sizeof(int));
    for (size_t n = 1, k = 0; n <= max && h; n *= 16, k++) {
        /* rank 0: the pattern, rank 1: the pattern of another seed; the sum is checked on the host. */
        int seed = SEED(t, 400 + (int)k) + 37 * rank_, in_place = k % 2;
        GT_CUDA(ptsc_tk_spin_fill(d, n, seed, SPIN_US, s));
        GT_OK(ptsc_allreduce_enqueue(ctx, in_place ? MPI_IN_PLACE : d, in_place ? d : r, (int)n, MPI_INT,
                                     MPI_SUM, NULL));
        GT_OK(ptsc_enqueue_sync(ctx, NULL));
        GT_CUDA(cudaMemcpyAsync(h, in_place ? d : r, n * sizeof(int), cudaMemcpyDeviceToHost, s));
        GT_CUDA(cudaStreamSynchronize(s));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += h[i] != (int)((unsigned)ptsc_tk_pattern(SEED(t, 400 + (int)k), i) +
                                 (unsigned)ptsc_tk_pattern(SEED(t, 400 + (int)k) + 37, i));
        GT_CHECK(bad == 0, "allreduce: thread %d, %zu ints%s: %zu wrong", t, n, in_place ? " in place" : "",
                 bad);
    }
    free(h);
}

static void errors_case(ptsc_ctx_t *ctx, int t, cudaStream_t s, bufs_t *B)
{
    char *big = B->big, *small = B->small, host[8];
    GT_RC(ptsc_send_enqueue(ctx, big, 40, MPI_CHAR, peer_, t, 9, (void *)cudaStreamLegacy), PTSC_ERR_ARG);
    GT_RC(ptsc_send_enqueue(ctx, host, 8, MPI_CHAR, peer_, t, 9, NULL), PTSC_ERR_UNSUPPORTED);
    GT_CUDA(ptsc_tk_spin_fill((int *)big, 100, SEED(t, 300), SPIN_US, s));
    if (rank_ == 0) {
        GT_OK(ptsc_send_enqueue(ctx, big, 400, MPI_CHAR, peer_, t, 9, NULL));
        GT_OK(ptsc_send_enqueue(ctx, big, 40, MPI_CHAR, peer_, t, 9, NULL));
        GT_OK(ptsc_enqueue_sync(ctx, NULL));
    } else {
        GT_OK(ptsc_recv_enqueue(ctx, small, 40, MPI_CHAR, peer_, t, 9, NULL));
        GT_RC(ptsc_enqueue_sync(ctx, NULL), PTSC_ERR_TRUNCATE);
        GT_CUDA(cudaMemsetAsync(small, 0, 40, s));
        GT_OK(ptsc_recv_enqueue(ctx, small, 40, MPI_CHAR, peer_, t, 9, NULL));
        GT_CUDA(ptsc_tk_count_bad((int *)small, 10, SEED(t, 300), &bad_[t], s));
        GT_OK(ptsc_enqueue_sync(ctx, NULL));
        GT_CHECK(bad_[t] == 0, "errors: thread %d: the message after a truncated one has %llu bad ints", t,
                 bad_[t]);
        bad_[t] = 0;
    }
    /* A request started outside capture is not waited for inside one. */
    ptsc_stream_request_t q = NULL;
    cudaStream_t g2 = NULL;
    cudaGraph_t graph = NULL;
    GT_OK(ptsc_irecv_enqueue(ctx, small, 4, MPI_CHAR, peer_, t, 10, NULL, &q));
    GT_CUDA(cudaStreamCreateWithFlags(&g2, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamBeginCapture(g2, cudaStreamCaptureModeThreadLocal));
    GT_RC(ptsc_wait_enqueue(&q, g2), PTSC_ERR_ARG);
    GT_CUDA(cudaStreamEndCapture(g2, &graph));
    if (graph)
        GT_CUDA(cudaGraphDestroy(graph));
    GT_CUDA(cudaStreamDestroy(g2));
    GT_OK(ptsc_send_enqueue(ctx, big, 4, MPI_CHAR, peer_, t, 10, NULL));
    GT_OK(ptsc_wait_enqueue(&q, NULL));
    GT_OK(ptsc_enqueue_sync(ctx, NULL));
}

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    GT_OK(ptsc_thread_attach(t, &ctx));
    if (!ctx) { /* counted as a failure; the others still meet it twice */
        pthread_barrier_wait(&bar_);
        pthread_barrier_wait(&bar_);
        return NULL;
    }
    cudaStream_t s = gt_stream(ctx);
    bufs_t B;
    memset(&B, 0, sizeof B);
    for (int k = 0; k < NMSG; k++)
        GT_CUDA(cudaMalloc((void **)&B.order[k], ORDER_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.a, SIZES_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.r, SIZES_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.sb, GRAPH_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.rb, GRAPH_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.ab, GRAPH_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.ar, GRAPH_INTS * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&B.iter, sizeof *B.iter));
    GT_CUDA(cudaMalloc((void **)&B.big, 400));
    GT_CUDA(cudaMalloc((void **)&B.small, 40));
    GT_CUDA(cudaMemsetAsync(B.iter, 0, sizeof *B.iter, s));
    GT_CUDA(cudaStreamSynchronize(s));
    pthread_barrier_wait(&bar_);
    int low = rank_ < peer_;
    for (int round = 0; round < 2; round++)
        order_case(ctx, t, s, low ^ round, &B);
    sizes_case(ctx, t, s, &B);
    graph_case(ctx, t, &B);
    allreduce_case(ctx, t, s, &B);
    errors_case(ctx, t, s, &B);
    GT_OK(ptsc_enqueue_sync(ctx, NULL));
    pthread_barrier_wait(&bar_);
    for (int k = 0; k < NMSG; k++)
        GT_CUDA(cudaFree(B.order[k]));
    void *all[] = {B.a, B.r, B.sb, B.rb, B.ab, B.ar, B.iter, B.big, B.small};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        GT_CUDA(cudaFree(all[k]));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    /* A queue per stream: a thread's enqueued wait never holds up another
     * thread's stream (docs/design.md, "Stream-ordered calls"). */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    int skip = gt_require_gpu("test_gpu_enqueue");
    if (skip)
        return skip;
    setenv("PTSC_MAX_THREADS", "4", 0);
    /* Blocks in flight at once: 4 threads x (8 x 200 KB, or 4 MiB each
     * way, or an allreduce's 2 x 4 MiB at the root), and what the free
     * lists keep of each size class. */
    setenv("PTSC_ENQUEUE_POOL", "256MiB", 0);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    int nranks = 0, nthreads = 0;
    ptsc_rank(&rank_);
    gt_rank = rank_;
    ptsc_size(&nranks, &nthreads);
    if (nranks != 2 || nthreads < NT) {
        fprintf(stderr, "FAIL test_gpu_enqueue: needs 2 ranks and PTSC_MAX_THREADS >= %d\n", NT);
        ptsc_finalize();
        return 1;
    }
    peer_ = 1 - rank_;
    GT_CUDA(cudaHostAlloc((void **)&bad_, NT * sizeof *bad_, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(bad_, 0, NT * sizeof *bad_);
    pthread_t th[NT];
    pthread_barrier_init(&bar_, NULL, NT);
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar_);
    GT_CUDA(cudaFreeHost(bad_));
    /* Every graph is destroyed and every one-shot operation done: the proxy
     * recycles them all (a captured one when CUDA destroys its graph). */
    int live = -1;
    for (int k = 0; k < 200 && (live = ptsc__enqueue_live()) != 0; k++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    GT_CHECK(live == 0, "%d enqueued operations still live 2 s after every graph was destroyed", live);
    int mine = atomic_load(&gt_failures), total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank_ == 0)
        printf("%s test_gpu_enqueue: %d failed checks\n", total ? "FAILED" : "PASSED", total);
    ptsc_finalize();
    return total ? 1 : 0;
}
