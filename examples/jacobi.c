/*
 * 2D Jacobi heat diffusion over MPI ranks x threads, on the GPU or the host.
 *
 * The NY x NX interior of the plate is cut into horizontal strips, one per
 * (rank, thread): block g = rank * T + thread holds rows [r0, r0 + nr) plus
 * one halo row above and below. Every iteration each block trades its edge
 * rows with blocks g - 1 and g + 1, which live on the same rank (another
 * thread) or on the neighbouring rank, through ptsc_isend / ptsc_irecv
 * addressed by (rank, thread). Then it applies the five-point stencil.
 *
 * On the device path each block lives in cudaMalloc memory and every kernel
 * goes on the thread's own bound stream. The halo rows go to ptsc straight
 * from device memory: ptsc waits for exactly this thread's stream before MPI
 * reads them (and stages them when MPI is not CUDA-aware), so there is no
 * cudaDeviceSynchronize here, and no thread waits for another's kernels.
 *
 * --exchange enqueue queues the halo exchange on the thread's stream
 * instead (ptsc_irecv_enqueue / ptsc_isend_enqueue / ptsc_wait_enqueue
 * between the kernels): the host thread only launches, and synchronises
 * once after the loop. --exchange graph (device) captures two iterations,
 * exchange and kernel each, into a CUDA graph and launches it ITERS / 2
 * times. Without a device, enqueue runs the same calls with the calling
 * thread as the stream.
 *
 * At the end every block is sent to (rank 0, thread 0), which compares the
 * plate with a serial run and prints a checksum and PASS or FAIL.
 *
 *   mpiexec -n 2 ./jacobi [-x NX] [-y NY] [-i ITERS] [-t THREADS] [--device | --host]
 *                         [--exchange host | enqueue | graph]
 *
 * Exit status: 0 PASS, 1 FAIL or error, 2 bad usage, 77 --device without a
 * usable device (the test-suite "skipped" code).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <ptsc.h>

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PTSC_HAVE_NVCC
/* jacobi_kernels.cu: return 0 or a cudaError_t value. */
const char *jk_error(int code);
int jk_alloc(int device, size_t bytes, void **p);
int jk_free(void *p);
int jk_upload(void *dst, const void *src, size_t bytes, void *stream);
int jk_step(double *v, const double *u, int rows, int cols, void *stream);
int jk_stream_create(void **s);
int jk_stream_destroy(void *s);
int jk_stream_sync(void *s);
int jk_capture_begin(void *s);
int jk_capture_end(void *s, void **exec);
int jk_graph_launch(void *exec, void *s);
int jk_graph_free(void *exec);
#endif

enum { TAG_DOWN = 1, TAG_UP = 2, TAG_GATHER = 3 };
enum { X_HOST = 0, X_ENQUEUE, X_GRAPH }; /* --exchange */
enum { EXIT_SKIP = 77 };

typedef struct {
    int nx, ny, iters;
    int nranks, rank, nthreads; /* T threads per rank, P = nranks * T blocks */
    int device;                 /* 1: blocks on the GPU */
    int exchange;               /* X_*: how the halos travel */
    double *plate;              /* rank 0: the gathered (ny+2) x (nx+2) result */
    double *seconds;            /* per thread: time of the iteration loop */
} job_t;

/* A failed thread would leave its neighbours, here and on other ranks,
 * waiting forever for its halo rows: stop the whole job instead. */
#define CHECK(call)                                                                            \
    do {                                                                                       \
        int check_rc_ = (call);                                                                \
        if (check_rc_ != PTSC_OK) {                                                            \
            fprintf(stderr, "jacobi: %s failed: %s: %s\n", #call, ptsc_status_name(check_rc_), \
                    ptsc_last_error());                                                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

#ifdef PTSC_HAVE_NVCC
#define CHECK_CUDA(call)                                                           \
    do {                                                                           \
        int check_e_ = (call);                                                     \
        if (check_e_ != 0) {                                                       \
            fprintf(stderr, "jacobi: %s failed: %s\n", #call, jk_error(check_e_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                          \
        }                                                                          \
    } while (0)
#endif

/* Initial plate: the top edge is hot, the left edge cools linearly from top
 * to bottom, the other edges and the interior start cold. Edges stay fixed. */
static double initial(int i, int j, int nx, int ny)
{
    (void)nx;
    if (i == 0)
        return 1.0;
    if (j == 0)
        return 1.0 - (double)i / (ny + 1);
    return 0.0;
}

/* Rows of block g: NY split as evenly as possible over P blocks. */
static void block_rows(int g, int nblocks, int ny, int *r0, int *nr)
{
    int base = ny / nblocks, rem = ny % nblocks;
    *nr = base + (g < rem);
    *r0 = g * base + (g < rem ? g : rem);
}

/* One sweep over rows 1..nr of a (nr+2) x (nx+2) array. */
static void step_host(double *restrict v, const double *restrict u, int nr, int nx)
{
    const size_t w = (size_t)nx + 2;
    for (size_t i = 1; i <= (size_t)nr; i++)
        for (size_t j = 1; j <= (size_t)nx; j++)
            v[i * w + j] =
                0.25 * ((u[(i - 1) * w + j] + u[(i + 1) * w + j]) + (u[i * w + j - 1] + u[i * w + j + 1]));
}

static double *alloc_plate(int rows, int nx, int row0, int ny)
{
    const size_t w = (size_t)nx + 2;
    double *p = malloc((size_t)(rows + 2) * w * sizeof *p);
    if (!p) {
        fprintf(stderr, "jacobi: out of host memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int k = 0; k < rows + 2; k++)
        for (int j = 0; j < nx + 2; j++)
            p[(size_t)k * w + (size_t)j] = initial(row0 + k, j, nx, ny);
    return p;
}

/* One iteration in stream order, on `stream` (NULL: the bound stream):
 * the halo rows of u queued as enqueued receives and sends, their waits,
 * then the sweep into v. Nothing here waits on the host (without a
 * device, the calls themselves are the stream). */
static void iterate_enqueued(ptsc_ctx_t *ctx, const job_t *job, double *u, double *v, int nr, int up,
                             int down, void *stream)
{
    const int w = job->nx + 2, T = job->nthreads;
    ptsc_stream_request_t req[4];
    int n = 0;
    if (up >= 0) {
        CHECK(ptsc_irecv_enqueue(ctx, u, w, MPI_DOUBLE, up / T, up % T, TAG_DOWN, stream, &req[n++]));
        CHECK(ptsc_isend_enqueue(ctx, u + w, w, MPI_DOUBLE, up / T, up % T, TAG_UP, stream, &req[n++]));
    }
    if (down >= 0) {
        CHECK(ptsc_irecv_enqueue(ctx, u + (size_t)(nr + 1) * w, w, MPI_DOUBLE, down / T, down % T, TAG_UP,
                                 stream, &req[n++]));
        CHECK(ptsc_isend_enqueue(ctx, u + (size_t)nr * w, w, MPI_DOUBLE, down / T, down % T, TAG_DOWN, stream,
                                 &req[n++]));
    }
    for (int k = 0; k < n; k++)
        CHECK(ptsc_wait_enqueue(&req[k], stream));
#ifdef PTSC_HAVE_NVCC
    if (job->device) {
        CHECK_CUDA(jk_step(v, u, nr, job->nx, stream));
        return;
    }
#endif
    step_host(v, u, nr, job->nx);
}

static int work(ptsc_ctx_t *ctx, void *arg)
{
    job_t *job = arg;
    const int nblocks = job->nranks * job->nthreads, w = job->nx + 2;
    int t, r0, nr;
    CHECK(ptsc_ctx_index(ctx, &t));
    if (omp_get_num_threads() != job->nthreads) {
        fprintf(stderr, "jacobi: got %d OpenMP threads, need %d (OMP_THREAD_LIMIT? OMP_DYNAMIC?)\n",
                omp_get_num_threads(), job->nthreads);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int g = job->rank * job->nthreads + t;
    block_rows(g, nblocks, job->ny, &r0, &nr);
    const size_t bytes = (size_t)(nr + 2) * (size_t)w * sizeof(double);

    /* u: current values, v: next; both keep the fixed edges. */
    double *u = alloc_plate(nr, job->nx, r0, job->ny), *v;
    void *stream = NULL;
    CHECK(ptsc_ctx_stream(ctx, &stream));
#ifdef PTSC_HAVE_NVCC
    double *host_init = u;
    if (job->device) {
        int dev;
        CHECK(ptsc_ctx_device(ctx, &dev));
        CHECK_CUDA(jk_alloc(dev, bytes, (void **)&u));
        CHECK_CUDA(jk_alloc(dev, bytes, (void **)&v));
        CHECK_CUDA(jk_upload(u, host_init, bytes, stream));
        CHECK_CUDA(jk_upload(v, host_init, bytes, stream));
        free(host_init);
    } else
#endif
    {
        v = malloc(bytes);
        if (!v) {
            fprintf(stderr, "jacobi: out of host memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memcpy(v, u, bytes);
    }

    /* No thread enqueues before every thread has allocated, and none frees
     * before every one is done (below): cudaFree, and CUDA's other calls
     * that wait for the device, would wait for a stream whose enqueued
     * receive waits for a thread stuck in that call (docs/design.md). */
#pragma omp barrier
    /* Neighbour blocks as (rank, thread); -1 where the plate's edge is. */
    const int up = g > 0 ? g - 1 : -1, down = g < nblocks - 1 ? g + 1 : -1;
    const int T = job->nthreads;
    double t0 = MPI_Wtime();
    if (job->exchange == X_ENQUEUE) {
        for (int it = 0; it < job->iters; it++) {
            iterate_enqueued(ctx, job, u, v, nr, up, down, NULL);
            double *swap = u;
            u = v;
            v = swap;
        }
        CHECK(ptsc_enqueue_sync(ctx, NULL)); /* the last kernel, and any failure found meanwhile */
    }
#ifdef PTSC_HAVE_NVCC
    if (job->exchange == X_GRAPH) {
        /* Two iterations, u -> v and v -> u, so the graph ends where it began. */
        void *gs = NULL, *exec = NULL;
        CHECK_CUDA(jk_stream_sync(stream)); /* the uploads, queued on the bound stream */
        CHECK_CUDA(jk_stream_create(&gs));
        CHECK_CUDA(jk_capture_begin(gs));
        iterate_enqueued(ctx, job, u, v, nr, up, down, gs);
        iterate_enqueued(ctx, job, v, u, nr, up, down, gs);
        CHECK_CUDA(jk_capture_end(gs, &exec));
        for (int it = 0; it + 1 < job->iters; it += 2)
            CHECK_CUDA(jk_graph_launch(exec, gs));
        if (job->iters % 2) {
            iterate_enqueued(ctx, job, u, v, nr, up, down, gs);
            double *swap = u;
            u = v;
            v = swap;
        }
        CHECK(ptsc_enqueue_sync(ctx, gs));
        CHECK_CUDA(jk_graph_free(exec));
        CHECK_CUDA(jk_stream_destroy(gs));
    }
#endif
    for (int it = 0; job->exchange == X_HOST && it < job->iters; it++) {
        ptsc_request_t req[4];
        int n = 0;
        /* Halo exchange. On the device path the first row was written by the
         * previous kernel on this thread's stream; ptsc_isend syncs that
         * stream (scope "thread" for an attached thread) before MPI sees it. */
        if (up >= 0) {
            CHECK(ptsc_irecv(ctx, u, w, MPI_DOUBLE, up / T, up % T, TAG_DOWN, &req[n++]));
            CHECK(ptsc_isend(ctx, u + w, w, MPI_DOUBLE, up / T, up % T, TAG_UP, &req[n++]));
        }
        if (down >= 0) {
            CHECK(ptsc_irecv(ctx, u + (size_t)(nr + 1) * w, w, MPI_DOUBLE, down / T, down % T, TAG_UP,
                             &req[n++]));
            CHECK(
                ptsc_isend(ctx, u + (size_t)nr * w, w, MPI_DOUBLE, down / T, down % T, TAG_DOWN, &req[n++]));
        }
        CHECK(ptsc_waitall(n, req));
        /* A staged receive is complete for this stream: its copy to the
         * device is queued ahead of the kernel below. */
#ifdef PTSC_HAVE_NVCC
        if (job->device)
            CHECK_CUDA(jk_step(v, u, nr, job->nx, stream));
        else
#endif
            step_host(v, u, nr, job->nx);
        double *swap = u;
        u = v;
        v = swap;
    }
    job->seconds[t] = MPI_Wtime() - t0;

    /* Gather: every block's interior rows to (0, 0), from device memory on
     * the device path. ptsc again waits for the last kernel first. */
    ptsc_request_t sreq;
    CHECK(ptsc_isend(ctx, u + w, nr * w, MPI_DOUBLE, 0, 0, TAG_GATHER, &sreq));
    if (g == 0) {
        for (int b = 0; b < nblocks; b++) {
            int b0, bn;
            block_rows(b, nblocks, job->ny, &b0, &bn);
            CHECK(ptsc_recv(ctx, job->plate + (size_t)(b0 + 1) * w, bn * w, MPI_DOUBLE, b / T, b % T,
                            TAG_GATHER));
        }
    }
    CHECK(ptsc_wait(&sreq));

#pragma omp barrier
#ifdef PTSC_HAVE_NVCC
    if (job->device) {
        CHECK_CUDA(jk_free(u));
        CHECK_CUDA(jk_free(v));
        return PTSC_OK;
    }
#endif
    free(u);
    free(v);
    return PTSC_OK;
}

static int parse_int(const char *opt, const char *s, int *out)
{
    char *end;
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || *end != '\0' || x < 1 || x > INT_MAX / 4) {
        fprintf(stderr, "jacobi: %s needs a positive integer\n", opt);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static void usage(FILE *out)
{
    fputs("usage: jacobi [-x NX] [-y NY] [-i ITERS] [-t THREADS] [--device | --host]\n"
          "  -x, --nx NX         interior columns (default 512)\n"
          "  -y, --ny NY         interior rows, at least ranks x threads (default 512)\n"
          "  -i, --iters ITERS   iterations (default 200)\n"
          "  -t, --threads T     threads per rank (default: OMP_NUM_THREADS, at most PTSC_MAX_THREADS)\n"
          "  --device, --host    where the blocks live (default: device when there is one and the\n"
          "                      kernels were compiled, else host)\n"
          "  --exchange MODE     host: ptsc_isend/irecv/waitall between the kernels (default);\n"
          "                      enqueue: the exchange queued on the thread's stream; graph\n"
          "                      (device): two iterations captured into a CUDA graph\n",
          out);
}

int main(int argc, char **argv)
{
    /* An enqueued receive makes its stream wait on the device for the
     * message; CUDA maps streams onto a few hardware queues (8 by default),
     * and a stream queued behind such a wait on the same queue waits too.
     * With a queue per thread's stream, one thread's wait never holds up
     * the copy of another thread's send. Read when CUDA starts: set first. */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    int rc = ptsc_init(&argc, &argv);
    if (rc != PTSC_OK) {
        fprintf(stderr, "jacobi: ptsc_init: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        return 1;
    }
    job_t job = {.nx = 512, .ny = 512, .iters = 200};
    int want = -1; /* -1 default, 0 host, 1 device */
    int slots, bad = 0;
    CHECK(ptsc_rank(&job.rank));
    CHECK(ptsc_size(&job.nranks, &slots));
    /* As ptsc_omp_run(0, ...): the OpenMP thread count, within the slots. */
    job.nthreads = omp_get_max_threads() < slots ? omp_get_max_threads() : slots;
    for (int i = 1; i < argc && !bad; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-x") || !strcmp(a, "--nx"))
            bad = parse_int(a, val, &job.nx), i++;
        else if (!strcmp(a, "-y") || !strcmp(a, "--ny"))
            bad = parse_int(a, val, &job.ny), i++;
        else if (!strcmp(a, "-i") || !strcmp(a, "--iters"))
            bad = parse_int(a, val, &job.iters), i++;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            bad = parse_int(a, val, &job.nthreads), i++;
        else if (!strcmp(a, "--device"))
            want = 1;
        else if (!strcmp(a, "--host"))
            want = 0;
        else if (!strcmp(a, "--exchange") && val && !strcmp(val, "host"))
            job.exchange = X_HOST, i++;
        else if (!strcmp(a, "--exchange") && val && !strcmp(val, "enqueue"))
            job.exchange = X_ENQUEUE, i++;
        else if (!strcmp(a, "--exchange") && val && !strcmp(val, "graph"))
            job.exchange = X_GRAPH, i++;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (job.rank == 0)
                usage(stdout);
            ptsc_finalize();
            return 0;
        } else {
            if (job.rank == 0) {
                fprintf(stderr, "jacobi: unknown option '%s'\n", a);
                usage(stderr);
            }
            bad = 1;
        }
    }
    const int nblocks = job.nranks * job.nthreads;
    if (!bad && job.nthreads > slots) {
        if (job.rank == 0)
            fprintf(stderr, "jacobi: %d threads asked, ptsc has %d slots: raise PTSC_MAX_THREADS\n",
                    job.nthreads, slots);
        bad = 1;
    }
    if (!bad && (job.ny < nblocks || (long long)(job.ny / nblocks + 1) * (job.nx + 2) > INT_MAX)) {
        if (job.rank == 0)
            fprintf(stderr,
                    "jacobi: NY must be at least ranks x threads = %d, and a block below 2^31 points\n",
                    nblocks);
        bad = 1;
    }

    /* The device path needs a device at run time and the kernels at build time. */
    int cuda = 0, cuda_aware = 0, staging = 0;
    CHECK(ptsc_features(&cuda, &cuda_aware, &staging));
    const char *why_not = NULL;
#ifndef PTSC_HAVE_NVCC
    why_not = "the example was built without nvcc (no kernels)";
#endif
    if (!why_not && !cuda)
        why_not = "ptsc found no CUDA device";
    job.device = want == 1 || (want == -1 && !why_not);
    if (!bad && job.device && why_not) {
        if (job.rank == 0)
            printf("jacobi: SKIP: --device asked but %s\n", why_not);
        ptsc_finalize();
        return EXIT_SKIP;
    }
    if (!bad && job.exchange == X_GRAPH && !job.device) {
        if (job.rank == 0)
            fprintf(stderr, "jacobi: --exchange graph needs the device path (CUDA graphs)\n");
        bad = 1;
    }
    if (bad) {
        ptsc_finalize();
        return 2;
    }

    if (job.rank == 0) {
        static const char *const xname[] = {"ptsc_isend/irecv", "enqueued on the stream",
                                            "enqueued, captured into a CUDA graph"};
        printf(
            "jacobi: %d x %d plate, %d iterations, %d ranks x %d threads = %d blocks, %s path%s, halos %s\n",
            job.nx, job.ny, job.iters, job.nranks, job.nthreads, nblocks, job.device ? "device" : "host",
            !job.device || job.exchange != X_HOST ? ""
            : cuda_aware                          ? " (CUDA-aware MPI: halos go direct)"
                                                  : " (halos staged through pinned host memory)",
            xname[job.exchange]);
        job.plate = alloc_plate(job.ny, job.nx, 0, job.ny);
    }
    job.seconds = calloc((size_t)job.nthreads, sizeof *job.seconds);
    if (!job.seconds) {
        fprintf(stderr, "jacobi: out of host memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(ptsc_omp_run(job.nthreads, work, &job));

    /* The slowest thread of any rank sets the pace. MPI on the side is fine:
     * the worker threads are done and ptsc's lanes are separate communicators. */
    double slowest = 0.0;
    for (int t = 0; t < job.nthreads; t++)
        slowest = job.seconds[t] > slowest ? job.seconds[t] : slowest;
    double all_slowest = 0.0;
    MPI_Reduce(&slowest, &all_slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    int pass = 1;
    if (job.rank == 0) {
        const size_t w = (size_t)job.nx + 2;
        double *ref = alloc_plate(job.ny, job.nx, 0, job.ny), *next = alloc_plate(job.ny, job.nx, 0, job.ny);
        for (int it = 0; it < job.iters; it++) {
            step_host(next, ref, job.ny, job.nx);
            double *swap = ref;
            ref = next;
            next = swap;
        }
        double sum = 0.0, ref_sum = 0.0, maxdiff = 0.0;
        long long wrong = 0;
        for (size_t i = 1; i <= (size_t)job.ny; i++) {
            for (size_t j = 1; j <= (size_t)job.nx; j++) {
                double a = job.plate[i * w + j], b = ref[i * w + j], d = fabs(a - b);
                sum += a;
                ref_sum += b;
                /* Same operations in the same order: expect exact agreement,
                 * but allow rounding noise should a compiler reassociate.
                 * Written so that a NaN counts as wrong. */
                if (!(d <= 1e-12))
                    wrong++;
                if (d > maxdiff)
                    maxdiff = d;
            }
        }
        pass = wrong == 0;
        printf("jacobi: %.3f s for %d iterations (%.1f Mpoint/s)\n", all_slowest, job.iters,
               all_slowest > 0 ? (double)job.nx * job.ny * job.iters / all_slowest / 1e6 : 0.0);
        printf("jacobi: checksum %.15e (serial reference %.15e), max |diff| %.3e, %lld points off\n", sum,
               ref_sum, maxdiff, wrong);
        printf("%s\n", pass ? "PASS" : "FAIL");
        free(ref);
        free(next);
        free(job.plate);
    }
    MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(job.seconds);
    rc = ptsc_finalize();
    if (rc != PTSC_OK) {
        fprintf(stderr, "jacobi: ptsc_finalize: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        return 1;
    }
    return pass ? 0 : 1;
}
