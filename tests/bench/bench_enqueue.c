/*
 * Stream-ordered exchange (ptsc_*_enqueue) against the same exchange
 * synchronised by the host (ptsc_isend / ptsc_irecv after the thread
 * scope, then ptsc_waitall), side by side in one run: 2 ranks, one attached
 * thread each, device buffers (host buffers without a device: a smoke run,
 * the calling thread being the stream).
 *
 *   latency  half a ping-pong round trip, 8 B .. 4 MiB: ptsc_send /
 *            ptsc_recv against ptsc_send_enqueue / ptsc_recv_enqueue queued
 *            ITERS round trips at once, the stream synchronised at the end.
 *   halo     one iteration of a halo exchange with a kernel in flight: a
 *            kernel of KERNEL_US on the thread's stream, then an exchange of
 *            one message each way with the peer, ITERS times. "host": the
 *            host waits for each exchange (ptsc_waitall) before it launches
 *            the next kernel; "enqueued": kernel and exchange queued, the
 *            host never waits inside the loop; "graph": one iteration
 *            captured into a CUDA graph, launched ITERS times.
 *
 * Each cell is the median over ROUNDS rounds, the variants interleaved
 * within each round. Usage: bench_enqueue [--quick] [--kernel-us N]
 */
#include "bench_util.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int ROUNDS = 5, ITERS = 200, KERNEL_US = 20;
static int rank_, peer_, dev_;
static ptsc_ctx_t *ctx_;
static void *stream_;

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *buffer(size_t bytes)
{
    void *p = NULL;
    if (dev_)
        BENCH_CHECK(bench_gpu_malloc(&p, bytes ? bytes : 1));
    else if (!(p = calloc(1, bytes ? bytes : 1)))
        MPI_Abort(MPI_COMM_WORLD, 1);
    return p;
}

static void release(void *p)
{
    if (dev_)
        bench_gpu_free(p);
    else
        free(p);
}

static void sync_stream(void *s)
{
    if (dev_)
        BENCH_CHECK(bench_gpu_stream_sync(s));
}

static void kernel(void *s)
{
    if (dev_)
        BENCH_CHECK(bench_gpu_spin(1000ll * KERNEL_US, s));
}

/* ---- latency --------------------------------------------------------------- */

static double lat_host(char *b, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < ITERS; i++) {
        if (rank_ == 0) {
            BENCH_CHECK(ptsc_send(ctx_, b, n, MPI_BYTE, peer_, 0, 1));
            BENCH_CHECK(ptsc_recv(ctx_, b, n, MPI_BYTE, peer_, 0, 1));
        } else {
            BENCH_CHECK(ptsc_recv(ctx_, b, n, MPI_BYTE, peer_, 0, 1));
            BENCH_CHECK(ptsc_send(ctx_, b, n, MPI_BYTE, peer_, 0, 1));
        }
    }
    return (bench_now() - t0) / ITERS / 2;
}

static double lat_enqueued(char *b, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < ITERS; i++) {
        if (rank_ == 0) {
            BENCH_CHECK(ptsc_send_enqueue(ctx_, b, n, MPI_BYTE, peer_, 0, 1, NULL));
            BENCH_CHECK(ptsc_recv_enqueue(ctx_, b, n, MPI_BYTE, peer_, 0, 1, NULL));
        } else {
            BENCH_CHECK(ptsc_recv_enqueue(ctx_, b, n, MPI_BYTE, peer_, 0, 1, NULL));
            BENCH_CHECK(ptsc_send_enqueue(ctx_, b, n, MPI_BYTE, peer_, 0, 1, NULL));
        }
    }
    BENCH_CHECK(ptsc_enqueue_sync(ctx_, NULL));
    return (bench_now() - t0) / ITERS / 2;
}

/* ---- halo ------------------------------------------------------------------ */

static double halo_host(char *s, char *r, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < ITERS; i++) {
        ptsc_request_t q[2];
        kernel(stream_);
        BENCH_CHECK(ptsc_irecv(ctx_, r, n, MPI_BYTE, peer_, 0, 2, &q[0]));
        BENCH_CHECK(ptsc_isend(ctx_, s, n, MPI_BYTE, peer_, 0, 2, &q[1]));
        BENCH_CHECK(ptsc_waitall(2, q));
    }
    sync_stream(stream_);
    return (bench_now() - t0) / ITERS;
}

static void halo_step_enqueued(char *s, char *r, int n, void *stream)
{
    ptsc_stream_request_t q[2];
    kernel(stream ? stream : stream_);
    BENCH_CHECK(ptsc_irecv_enqueue(ctx_, r, n, MPI_BYTE, peer_, 0, 2, stream, &q[0]));
    BENCH_CHECK(ptsc_isend_enqueue(ctx_, s, n, MPI_BYTE, peer_, 0, 2, stream, &q[1]));
    BENCH_CHECK(ptsc_wait_enqueue(&q[0], stream));
    BENCH_CHECK(ptsc_wait_enqueue(&q[1], stream));
}

static double halo_enqueued(char *s, char *r, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < ITERS; i++)
        halo_step_enqueued(s, r, n, NULL);
    BENCH_CHECK(ptsc_enqueue_sync(ctx_, NULL));
    return (bench_now() - t0) / ITERS;
}

/* One captured iteration, launched ITERS times; 0 where there are no graphs. */
static double halo_graph(void *exec, void *gs)
{
    if (!exec)
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < ITERS; i++)
        BENCH_CHECK(bench_gpu_graph_launch(exec, gs));
    BENCH_CHECK(ptsc_enqueue_sync(ctx_, gs));
    return (bench_now() - t0) / ITERS;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            ROUNDS = 1, ITERS = 10;
        else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc)
            KERNEL_US = atoi(argv[++i]);
    }
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); /* as examples/jacobi.c */
    setenv("PTSC_ENQUEUE_POOL", "256MiB", 0);       /* every size at once: graphs keep their blocks */
    BENCH_CHECK(ptsc_init(&argc, &argv));
    int nranks = 0, nthreads = 0;
    BENCH_CHECK(ptsc_rank(&rank_));
    BENCH_CHECK(ptsc_size(&nranks, &nthreads));
    if (nranks != 2) {
        if (rank_ == 0)
            fprintf(stderr, "bench_enqueue: needs 2 ranks\n");
        ptsc_finalize();
        return 2;
    }
    peer_ = 1 - rank_;
    BENCH_CHECK(ptsc_thread_attach(0, &ctx_));
    BENCH_CHECK(ptsc_ctx_stream(ctx_, &stream_));
    int cuda = 0, aware = 0, staging = 0;
    BENCH_CHECK(ptsc_features(&cuda, &aware, &staging));
    dev_ = bench_gpu_available();
    if (rank_ == 0) {
        printf("### bench_enqueue: stream-ordered exchange against the host-synchronised one\n\n");
        printf("2 ranks, one attached thread each; %s buffers; ptsc_features: cuda %d, cuda_aware %d, "
               "staging %d; "
               "median of %d rounds of %d iterations, variants interleaved.\n\n",
               dev_ ? "device" : "host (no device: a smoke run)", cuda, aware, staging, ROUNDS, ITERS);
        printf("#### latency: half a ping-pong round trip\n\n");
        printf("| size | host-synchronised us | enqueued us | host / enqueued |\n|---:|---:|---:|---:|\n");
    }
    static const size_t sizes[] = {8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    char *a = buffer(4 << 20), *b = buffer(4 << 20);
    double *v1 = calloc((size_t)ROUNDS, sizeof(double)), *v2 = calloc((size_t)ROUNDS, sizeof(double)),
           *v3 = calloc((size_t)ROUNDS, sizeof(double));
    char txt[32];
    for (int k = 0; k < NS; k++) {
        int n = (int)sizes[k];
        lat_host(a, n), lat_enqueued(a, n); /* untimed: pools, blocks */
        for (int r = 0; r < ROUNDS; r++) {
            v1[r] = lat_host(a, n);
            v2[r] = lat_enqueued(a, n);
        }
        double h = median(v1, ROUNDS), e = median(v2, ROUNDS);
        if (rank_ == 0)
            printf("| %s | %.1f | %.1f | %.2f |\n", bench_size_text(sizes[k], txt, sizeof txt), 1e6 * h,
                   1e6 * e, h / e);
    }
    if (rank_ == 0) {
        printf("\n#### halo: one iteration, a kernel of %d us then one message each way\n\n",
               dev_ ? KERNEL_US : 0);
        printf("| size | host-synchronised us | enqueued us | graph us | host / enqueued | host / graph |\n"
               "|---:|---:|---:|---:|---:|---:|\n");
    }
    void *gs = NULL;
    if (dev_)
        BENCH_CHECK(bench_gpu_stream_create(&gs));
    for (int k = 0; k < NS; k++) {
        int n = (int)sizes[k];
        void *exec = NULL;
        if (dev_) {
            sync_stream(stream_);
            BENCH_CHECK(bench_gpu_capture_begin(gs));
            halo_step_enqueued(a, b, n, gs);
            BENCH_CHECK(bench_gpu_capture_end(gs, &exec));
        }
        halo_host(a, b, n), halo_enqueued(a, b, n), halo_graph(exec, gs);
        for (int r = 0; r < ROUNDS; r++) {
            v1[r] = halo_host(a, b, n);
            v2[r] = halo_enqueued(a, b, n);
            v3[r] = halo_graph(exec, gs);
        }
        double h = median(v1, ROUNDS), e = median(v2, ROUNDS), g = median(v3, ROUNDS);
        if (rank_ == 0) {
            if (exec)
                printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
                       bench_size_text(sizes[k], txt, sizeof txt), 1e6 * h, 1e6 * e, 1e6 * g, h / e, h / g);
            else
                printf("| %s | %.1f | %.1f | - | %.2f | - |\n", bench_size_text(sizes[k], txt, sizeof txt),
                       1e6 * h, 1e6 * e, h / e);
        }
        if (exec)
            bench_gpu_graph_free(exec);
    }
    if (gs)
        bench_gpu_stream_destroy(gs);
    if (rank_ == 0)
        printf("\nbench_enqueue: done\n");
    release(a);
    release(b);
    free(v1);
    free(v2);
    free(v3);
    BENCH_CHECK(ptsc_thread_detach());
    BENCH_CHECK(ptsc_finalize());
    return 0;
}
