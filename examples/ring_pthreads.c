/*
 * A ring over ranks with plain pthreads: thread t of every rank passes a
 * block of doubles to thread t of the next rank, once per rank, so every
 * block travels all the way round and comes home. Each thread attaches
 * itself with ptsc_thread_attach(t) (no OpenMP needed), and after every
 * step checks what it received against the closed form of the block's
 * origin. The blocks live in device memory when there is a CUDA device
 * (uploaded on the thread's bound stream: ptsc waits for that copy before
 * MPI reads the buffer) and in host memory when not.
 *
 * Run: mpiexec -n 2 ./ring_pthreads [-t THREADS] [-n DOUBLES] [--device | --host]
 *
 * Exit status: 0 PASS, 1 FAIL or error, 2 bad usage, 77 --device without a
 * usable device (the test-suite "skipped" code).
 */
#ifdef RING_CUDA
#include <cuda_runtime.h> /* before ptsc.h: ptsc.h then offers ptsc_ctx_cuda_stream */
#endif
#include <ptsc.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_SKIP = 77, TAG_RING = 7 };

typedef struct {
    int rank, nranks, nthreads, n, device;
} job_t;

typedef struct {
    const job_t *job;
    int t;
    long bad; /* elements that differed from the closed form, or -1 on an error */
} worker_t;

/* Element i of the block that thread t of rank r starts with: exact in a double. */
static double value(int r, int t, int i) { return r * 1e6 + t * 1e3 + (i % 997); }

/* A failed thread would leave its peers on other ranks waiting for its
 * block forever: report and stop the whole job instead. */
#define CHECK(call)                                                                       \
    do {                                                                                  \
        int check_rc_ = (call);                                                           \
        if (check_rc_ != PTSC_OK) {                                                       \
            fprintf(stderr, "ring_pthreads: thread %d: %s failed: %s: %s\n", w->t, #call, \
                    ptsc_status_name(check_rc_), ptsc_last_error());                      \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

#ifdef RING_CUDA
#define CHECK_CUDA(call)                                                              \
    do {                                                                              \
        cudaError_t check_err_ = (call);                                              \
        if (check_err_ != cudaSuccess) {                                              \
            fprintf(stderr, "ring_pthreads: thread %d: %s failed: %s\n", w->t, #call, \
                    cudaGetErrorString(check_err_));                                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                             \
        }                                                                             \
    } while (0)
#endif

static void *worker(void *arg)
{
    worker_t *w = arg;
    const job_t *job = w->job;
    const int n = job->n, t = w->t;
    const size_t bytes = (size_t)n * sizeof(double);
    ptsc_ctx_t *ctx = NULL;
    /* The index is the address: peers send to (rank, t), whichever pthread holds t. */
    CHECK(ptsc_thread_attach(t, &ctx));

    double *host = malloc(bytes), *buf[2] = {NULL, NULL};
    if (!host) {
        fprintf(stderr, "ring_pthreads: out of host memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < n; i++)
        host[i] = value(job->rank, t, i);
#ifdef RING_CUDA
    cudaStream_t stream = ptsc_ctx_cuda_stream(ctx);
    if (job->device) {
        CHECK_CUDA(cudaMalloc((void **)&buf[0], bytes));
        CHECK_CUDA(cudaMalloc((void **)&buf[1], bytes));
        /* Queued on the thread's stream; ptsc waits for it before the send. */
        CHECK_CUDA(cudaMemcpyAsync(buf[0], host, bytes, cudaMemcpyHostToDevice, stream));
    }
#endif
    if (!job->device) {
        buf[0] = malloc(bytes);
        buf[1] = malloc(bytes);
        if (!buf[0] || !buf[1]) {
            fprintf(stderr, "ring_pthreads: out of host memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memcpy(buf[0], host, bytes);
    }

    const int P = job->nranks, right = (job->rank + 1) % P, left = (job->rank + P - 1) % P;
    double first_sum = 0;
    long bad = 0;
    for (int step = 1; step <= P; step++) {
        double *out = buf[(step - 1) % 2], *in = buf[step % 2];
        CHECK(
            ptsc_sendrecv(ctx, out, n, MPI_DOUBLE, right, t, TAG_RING, in, n, MPI_DOUBLE, left, t, TAG_RING));
        /* A receive lands on the thread's stream (device path): a copy
         * queued there after it sees the data. */
        const double *got = in;
#ifdef RING_CUDA
        if (job->device) {
            CHECK_CUDA(cudaMemcpyAsync(host, in, bytes, cudaMemcpyDeviceToHost, stream));
            CHECK_CUDA(cudaStreamSynchronize(stream));
            got = host;
        }
#endif
        /* After `step` steps thread t holds the block rank - step started with. */
        int origin = ((job->rank - step) % P + P) % P;
        for (int i = 0; i < n; i++) {
            if (got[i] != value(origin, t, i)) {
                if (bad < 3)
                    fprintf(stderr,
                            "ring_pthreads: rank %d thread %d step %d: element %d is %.1f, expected %.1f\n",
                            job->rank, t, step, i, got[i], value(origin, t, i));
                bad++;
            }
        }
        first_sum += got[0];
    }
    /* Every block passed through once: the first elements add up to
     * sum over r of value(r, t, 0) = 1e6 * P (P - 1) / 2 + 1e3 * t * P. */
    double expect = 1e6 * P * (P - 1) / 2.0 + 1e3 * t * P;
    if (first_sum != expect) {
        fprintf(stderr, "ring_pthreads: rank %d thread %d: first elements sum to %.1f, expected %.1f\n",
                job->rank, t, first_sum, expect);
        bad++;
    }

#ifdef RING_CUDA
    if (job->device) {
        CHECK_CUDA(cudaFree(buf[0]));
        CHECK_CUDA(cudaFree(buf[1]));
    }
#endif
    if (!job->device) {
        free(buf[0]);
        free(buf[1]);
    }
    free(host);
    CHECK(ptsc_thread_detach());
    w->bad = bad;
    return NULL;
}

static void usage(FILE *out)
{
    fputs("usage: ring_pthreads [-t THREADS] [-n DOUBLES] [--device | --host]\n"
          "  -t THREADS          pthreads per rank (default 4)\n"
          "  -n DOUBLES          block size (default 3000, 24000 bytes)\n"
          "  --device, --host    where the blocks live (default: device when there is one)\n",
          out);
}

static int positive_arg(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 1 || v > 1 << 24)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    job_t job = {.nthreads = 4, .n = 3000};
    int want = -1; /* -1 default, 0 host, 1 device */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-t") && i + 1 < argc && positive_arg(argv[i + 1], &job.nthreads) == 0)
            i++;
        else if (!strcmp(a, "-n") && i + 1 < argc && positive_arg(argv[i + 1], &job.n) == 0)
            i++;
        else if (!strcmp(a, "--device"))
            want = 1;
        else if (!strcmp(a, "--host"))
            want = 0;
        else {
            fprintf(stderr, "ring_pthreads: bad argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }

    int rc = ptsc_init(&argc, &argv);
    if (rc != PTSC_OK) {
        fprintf(stderr, "ring_pthreads: ptsc_init: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        return 1;
    }
    int slots = 0, cuda = 0;
    ptsc_rank(&job.rank);
    ptsc_size(&job.nranks, &slots);
    ptsc_features(&cuda, NULL, NULL);
    const char *why_not = NULL;
#ifndef RING_CUDA
    why_not = "this example was built without the CUDA runtime";
#endif
    if (!why_not && !cuda)
        why_not = "ptsc found no CUDA device";
    job.device = want == 1 || (want == -1 && !why_not);
    if (job.device && why_not) {
        if (job.rank == 0)
            printf("ring_pthreads: SKIP: --device asked but %s\n", why_not);
        ptsc_finalize();
        return EXIT_SKIP;
    }
    if (job.nthreads > slots) {
        if (job.rank == 0)
            fprintf(stderr,
                    "ring_pthreads: %d threads need %d thread slots, this rank has %d: set "
                    "PTSC_MAX_THREADS=%d on every rank\n",
                    job.nthreads, job.nthreads, slots, job.nthreads);
        ptsc_finalize();
        return 1;
    }

    worker_t *w = calloc((size_t)job.nthreads, sizeof *w);
    pthread_t *tid = calloc((size_t)job.nthreads, sizeof *tid);
    if (!w || !tid) {
        fprintf(stderr, "ring_pthreads: out of host memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int t = 0; t < job.nthreads; t++) {
        w[t] = (worker_t){.job = &job, .t = t, .bad = -1};
        if (pthread_create(&tid[t], NULL, worker, &w[t]) != 0) {
            fprintf(stderr, "ring_pthreads: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    long bad = 0;
    for (int t = 0; t < job.nthreads; t++) {
        pthread_join(tid[t], NULL);
        bad += w[t].bad < 0 ? 1 : w[t].bad;
    }
    free(w);
    free(tid);

    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (job.rank == 0)
        printf("ring_pthreads: %s: %d ranks x %d pthreads, %d doubles per block on %s, %d thread slots per "
               "rank, %ld bad element(s)\n",
               total == 0 ? "PASS" : "FAIL", job.nranks, job.nthreads, job.n,
               job.device ? "the device" : "the host", slots, total);
    rc = ptsc_finalize();
    if (rc != PTSC_OK) {
        fprintf(stderr, "ring_pthreads: ptsc_finalize: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        return 1;
    }
    return total == 0 ? 0 : 1;
}
