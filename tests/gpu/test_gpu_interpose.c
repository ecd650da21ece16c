/*
 * The race in a plain MPI + pthreads + CUDA program (no ptsc call), with and
 * without libptsc-mpi (src/interpose.c).
 *
 * Two ranks, 8 threads each, MPI_THREAD_MULTIPLE. Thread t of rank 0 fills
 * its device buffer with a kernel on its per-thread default stream (a slow
 * kernel: it spins, then writes a new pattern) and hands the buffer to MPI
 * at once, with no sync, as code written for a CUDA-aware MPI does; thread
 * t of rank 1 receives into a device buffer and counts, with a kernel, the
 * elements that differ from the pattern. Point-to-point (MPI_Send /
 * MPI_Recv on MPI_COMM_WORLD, tag t) and a collective (MPI_Bcast on a
 * communicator of thread t's own), at 4, 16 and 64 MiB.
 *
 * GPU_INTERPOSE_EXPECT:
 *   race    some message must be stale (the test can see the race;
 *           test_gpu_race.c measured 2 to 9 of 40 at these sizes with 8
 *           threads on the H200's CUDA-aware Open MPI): without the
 *           interposer, or with it where its scope cannot see the work;
 *   clean   no message may be stale;
 *   broken  no interposer on an MPI that is not CUDA-aware: the program
 *           must fail (a stale or garbled message, or, as usual, a crash of
 *           MPI reading device memory on the host, which mpiexec reports).
 * GPU_INTERPOSE_ACTIVE=yes|no: whether libptsc-mpi must be active (default:
 * yes for clean, no otherwise).
 * GPU_INTERPOSE_STREAM: where each thread's kernels run: perthread (the
 * default: its per-thread default stream), nonblocking (a non-blocking
 * stream of its own, which no legacy-stream sync waits for), named (the
 * same, named to the interposer with ptsc_mpi_set_stream).
 * GPU_INTERPOSE_RACES=yes: the interposer's race check (PTSC_SYNC_CHECK with
 * scope none) must have counted busy buffers on the sending rank.
 * On an MPI that is not CUDA-aware the interposer stages (and answers
 * MPIX_Query_cuda_support with 1); without it the program cannot run there
 * and exits 77 (skipped), as it does without a device, except in broken
 * mode, which runs only there.
 */
#include "gpu_kernels.h"

#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#define NT 8
#define REPS 5
#define SPIN_US 3000

static const size_t sizes[] = {4u << 20, 16u << 20, 64u << 20};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

static int rank, failed;
static enum { PER_THREAD, NONBLOCKING, NAMED } stream_mode;
static int (*set_stream)(void *);
static MPI_Comm comms[NT];
static atomic_ulong stale_p2p, stale_bcast, msgs;
static pthread_barrier_t bar;

#define CUDA_OK(call)                                                                                     \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "test_gpu_interpose [rank %d] FAIL line %d: %s: %s\n", rank, __LINE__, #call, \
                    cudaGetErrorString(e_));                                                              \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                 \
        }                                                                                                 \
    } while (0)
#define MPI_OK(call)                                                                                   \
    do {                                                                                               \
        if ((call) != MPI_SUCCESS) {                                                                   \
            fprintf(stderr, "test_gpu_interpose [rank %d] FAIL line %d: %s\n", rank, __LINE__, #call); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                              \
        }                                                                                              \
    } while (0)

static unsigned long long count_bad(const int *buf, size_t n, int seed, cudaStream_t s)
{
    unsigned long long *bad, h = 0;
    CUDA_OK(cudaMalloc((void **)&bad, sizeof *bad));
    CUDA_OK(cudaMemsetAsync(bad, 0, sizeof *bad, s));
    CUDA_OK(ptsc_tk_count_bad(buf, n, seed, bad, s));
    CUDA_OK(cudaMemcpyAsync(&h, bad, sizeof h, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaFree(bad));
    return h;
}

static void *worker(void *p)
{
    const int t = (int)(size_t)p;
    cudaStream_t s = cudaStreamPerThread;
    int *buf;
    if (stream_mode != PER_THREAD)
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (stream_mode == NAMED)
        MPI_OK(set_stream(s));
    CUDA_OK(cudaMalloc((void **)&buf, sizes[NSIZES - 1]));
    for (int z = 0; z < NSIZES; z++) {
        size_t n = sizes[z] / sizeof(int);
        for (int r = 0; r < REPS; r++) {
            int seed = (z * REPS + r) * NT + t;
            /* Point-to-point. */
            if (rank == 0) {
                CUDA_OK(ptsc_tk_spin_fill(buf, n, seed, SPIN_US, s));
                MPI_OK(MPI_Send(buf, (int)n, MPI_INT, 1, t, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Recv(buf, (int)n, MPI_INT, 0, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                if (count_bad(buf, n, seed, s))
                    atomic_fetch_add(&stale_p2p, 1);
                atomic_fetch_add(&msgs, 1);
            }
            /* A collective from rank 0 on this thread's communicator. */
            seed += 1 << 20;
            if (rank == 0)
                CUDA_OK(ptsc_tk_spin_fill(buf, n, seed, SPIN_US, s));
            MPI_OK(MPI_Bcast(buf, (int)n, MPI_INT, 0, comms[t]));
            if (rank == 1 && count_bad(buf, n, seed, s))
                atomic_fetch_add(&stale_bcast, 1);
            /* Rank 0 drains its stream before the next fill (the unsafe
             * hand-over may leave the kernel running). */
            CUDA_OK(cudaStreamSynchronize(s));
        }
        pthread_barrier_wait(&bar);
    }
    CUDA_OK(cudaFree(buf));
    if (stream_mode == NAMED)
        MPI_OK(set_stream(NULL));
    if (stream_mode != PER_THREAD)
        CUDA_OK(cudaStreamDestroy(s));
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, size, ndev = 0, aware = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    aware = MPIX_Query_cuda_support();
#endif
    const char *want = getenv("GPU_INTERPOSE_EXPECT"), *act = getenv("GPU_INTERPOSE_ACTIVE"),
               *sm = getenv("GPU_INTERPOSE_STREAM"), *races = getenv("GPU_INTERPOSE_RACES");
    int expect_clean = want && strcmp(want, "clean") == 0, broken = want && strcmp(want, "broken") == 0;
    int expect_active = act ? strcmp(act, "yes") == 0 : expect_clean;
    stream_mode = !sm || strcmp(sm, "perthread") == 0 ? PER_THREAD
                  : strcmp(sm, "named") == 0          ? NAMED
                                                      : NONBLOCKING;
    set_stream = (int (*)(void *))dlsym(RTLD_DEFAULT, "ptsc_mpi_set_stream");
    /* With the interposer staging, MPIX_Query_cuda_support is its answer (1). */
    const char *skip = cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1 ? "no CUDA device"
                       : aware != 1 && !broken
                           ? "device buffers on an MPI that is not CUDA-aware, without libptsc-mpi"
                       : aware == 1 && broken           ? "MPI is CUDA-aware: nothing to break"
                       : provided < MPI_THREAD_MULTIPLE ? "MPI lacks MPI_THREAD_MULTIPLE"
                       : size != 2                      ? "run it on 2 ranks"
                                                        : NULL;
    if (skip) {
        if (rank == 0)
            printf("test_gpu_interpose: SKIPPED (%s)\n", skip);
        MPI_Finalize();
        return 77;
    }
    if (!want || (!expect_clean && !broken && strcmp(want, "race") != 0)) {
        fprintf(stderr, "test_gpu_interpose: FAIL: set GPU_INTERPOSE_EXPECT to race, clean or broken\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    if (expect_active != (query != NULL && query(NULL, NULL, NULL, NULL) == 1)) {
        fprintf(stderr, "test_gpu_interpose [rank %d] FAIL: libptsc-mpi is %s, GPU_INTERPOSE_ACTIVE=%s\n",
                rank, query ? "active" : "absent", expect_active ? "yes" : "no");
        failed++;
    }
    if (stream_mode == NAMED && !set_stream) {
        fprintf(stderr, "test_gpu_interpose [rank %d] FAIL: ptsc_mpi_set_stream not found\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int t = 0; t < NT; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_barrier_init(&bar, NULL, NT);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(size_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);

    unsigned long sp = atomic_load(&stale_p2p), sb = atomic_load(&stale_bcast), m = atomic_load(&msgs);
    if (rank == 1) {
        printf(
            "test_gpu_interpose: %s, %s streams: stale point-to-point %lu of %lu, stale bcast %lu of %lu\n",
            expect_active ? "with libptsc-mpi" : "without libptsc-mpi",
            stream_mode == PER_THREAD ? "per-thread"
            : stream_mode == NAMED    ? "named"
                                      : "non-blocking",
            sp, m, sb, m);
        if (broken && sp + sb > 0)
            printf("test_gpu_interpose: the failure shows without libptsc-mpi\n");
        if (expect_clean && (sp || sb)) {
            fprintf(stderr, "test_gpu_interpose FAIL: stale messages with the interposer active\n");
            failed++;
        }
        if (!expect_clean && sp + sb == 0) {
            fprintf(stderr,
                    "test_gpu_interpose FAIL: no stale message: the test cannot see the race it "
                    "guards against%s\n",
                    broken ? " (device buffers went through an MPI that is not CUDA-aware intact)" : "");
            failed++;
        }
    }
    unsigned long sums[2] = {0, 0};
    if (query && expect_clean) {
        query(&sums[0], &sums[1], NULL, NULL);
        if (sums[1] == 0) {
            fprintf(stderr, "test_gpu_interpose [rank %d] FAIL: the interposer made no sync\n", rank);
            failed++;
        }
    }
    unsigned long (*nraces)(void) = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "ptsc_mpi_races");
    if (races && strcmp(races, "yes") == 0 && rank == 0) {
        unsigned long n = nraces ? nraces() : 0;
        printf("test_gpu_interpose: the race check saw %lu busy buffers on the sending rank\n", n);
        if (n == 0) {
            fprintf(stderr, "test_gpu_interpose [rank 0] FAIL: the race check saw no busy buffer\n");
            failed++;
        }
    }
    int all = 0;
    MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int t = 0; t < NT; t++)
        MPI_Comm_free(&comms[t]);
    if (rank == 0)
        printf(all ? "test_gpu_interpose: %d failed checks\n" : "PASSED test_gpu_interpose (%d failed)\n",
               all);
    MPI_Finalize();
    return all != 0;
}
