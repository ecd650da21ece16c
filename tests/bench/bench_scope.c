/*
 * bench_scope: what each sync scope costs when several threads of a rank
 * feed the GPU at once.
 *
 * Two ranks; T threads each. Thread t of rank 0 queues GPU
 * work on its bound stream and then ptsc_sends the device buffer to thread t
 * of rank 1, which receives it and queues its own work on it. The scope
 * decides what ptsc waits for before MPI touches the buffer:
 *   thread  only this thread's stream: threads overlap;
 *   global  the legacy stream, i.e. every blocking stream of the device;
 *   device  cudaDeviceSynchronize: every thread waits for every kernel;
 *   none    nothing (unsafe: the receiver may get stale data), a lower bound.
 * Two more variants: `by hand`, cudaDeviceSynchronize() before every send
 * and receive with ptsc's scope none (what code written without ptsc
 * does), and `no communication`, the GPU work alone (the ceiling: the rate
 * the threads' kernels allow). Reported: messages per second over all
 * threads, the thread scope against the ceiling, the others against the
 * thread scope, and the mean time of one sync.
 *
 * A second table gives thread 0 `--imbalance` times more work per message
 * than the others (one slow worker, as in a load-imbalanced code) and
 * reports the message rate of the other threads alone: a global or device
 * sync makes them wait for thread 0's long kernels, the thread scope does
 * not.
 *
 * Without a device the buffers are pageable host memory, which needs no
 * sync at all: the table then shows the cost of the scope machinery alone
 * (every column should be equal).
 *
 * Each variant's R rounds run in K blocks (--blocks, default 5); block b
 * runs the variants in an order rotated by b, so the comparison does not
 * favour whichever variant runs first or last, after one untimed pass over
 * all of them; a rate is the median over the blocks.
 *
 *   mpiexec -n 2 bench_scope [--reps R] [--blocks K] [--bytes B] [--work W] [--quick]
 * T = 1, 2, 4, 8, 16; thread counts above PTSC_MAX_THREADS are skipped
 * (set it to 16).
 */
#include "bench_util.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 16
#define MAXB 32 /* blocks */

/* The variants of a phase: ptsc's four scopes, the hand-written habit and
 * the ceiling. */
enum { V_THREAD, V_GLOBAL, V_DEVICE, V_NONE, V_HABIT, V_CEILING, NVAR };
static const ptsc_scope_t scopes[NVAR] = {PTSC_SCOPE_THREAD, PTSC_SCOPE_GLOBAL, PTSC_SCOPE_DEVICE,
                                          PTSC_SCOPE_NONE,   PTSC_SCOPE_NONE,   PTSC_SCOPE_NONE};

typedef struct {
    int reps, blocks, work, gpu, rank;
    int imbalance; /* thread 0's work is multiplied by this (1: balanced) */
    size_t bytes;
    double sec[NVAR][MAXT][MAXB]; /* per variant, thread and block */
    uint64_t syncs[NVAR][MAXT], sync_ns[NVAR][MAXT];
} run_t;

/* Every thread of both ranks starts a phase together: the OpenMP barrier
 * gathers this rank's threads, the lane barrier pairs thread t with its
 * peer, and through the peer's OpenMP barrier all of them. */
static void align(ptsc_ctx_t *ctx)
{
#pragma omp barrier
    BENCH_CHECK(ptsc_barrier(ctx));
}

/* One iteration: rank 0 computes and sends, rank 1 receives and computes.
 * V_HABIT syncs the whole device by hand before MPI touches the buffer and
 * lets ptsc sync nothing (scope none), as code written without ptsc does;
 * V_CEILING computes and does not communicate. */
static void one_round(ptsc_ctx_t *ctx, run_t *run, int v, float *buf, void *stream, int t, int n)
{
    int work = t == 0 ? run->work * run->imbalance : run->work;
    if (run->rank == 0 && run->gpu)
        BENCH_CHECK(bench_gpu_work(buf, run->bytes / sizeof(float), work, stream));
    if (v == V_CEILING) {
        if (run->rank != 0 && run->gpu)
            BENCH_CHECK(bench_gpu_work(buf, run->bytes / sizeof(float), work, stream));
        return;
    }
    if (v == V_HABIT && run->gpu)
        BENCH_CHECK(bench_gpu_device_sync());
    if (run->rank == 0) {
        BENCH_CHECK(ptsc_send(ctx, buf, n, MPI_FLOAT, 1, t, 0));
    } else {
        BENCH_CHECK(ptsc_recv(ctx, buf, n, MPI_FLOAT, 0, t, 0));
        if (run->gpu)
            BENCH_CHECK(bench_gpu_work(buf, run->bytes / sizeof(float), work, stream));
    }
}

static int block_reps(const run_t *run, int b)
{
    return run->reps / run->blocks + (b < run->reps % run->blocks);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Variant s's message rate with T threads, the median over the blocks: all
 * T threads' messages over the slowest thread's time (balanced), or the
 * sum of threads 1..T-1's own rates (imbalanced: thread 0 is the slow one). */
static double rate_of(const run_t *run, int s, int T, int others)
{
    double r[MAXB];
    for (int b = 0; b < run->blocks; b++) {
        double slowest = 0, sum = 0;
        for (int t = others ? 1 : 0; t < T; t++) {
            double sec = run->sec[s][t][b];
            slowest = sec > slowest ? sec : slowest;
            sum += sec > 0 ? block_reps(run, b) / sec : 0;
        }
        r[b] = others ? sum : slowest > 0 ? (double)T * block_reps(run, b) / slowest : 0;
    }
    qsort(r, (size_t)run->blocks, sizeof r[0], cmp_double);
    return run->blocks % 2 ? r[run->blocks / 2] : 0.5 * (r[run->blocks / 2 - 1] + r[run->blocks / 2]);
}

static int run_threads(ptsc_ctx_t *ctx, void *arg)
{
    run_t *run = arg;
    int t;
    void *stream = NULL;
    float *buf = NULL;
    const int n = (int)(run->bytes / sizeof(float));
    BENCH_CHECK(ptsc_ctx_index(ctx, &t));
    BENCH_CHECK(ptsc_ctx_stream(ctx, &stream));
    if (run->gpu) {
        BENCH_CHECK(bench_gpu_malloc((void **)&buf, run->bytes));
    } else if (!(buf = calloc((size_t)n, sizeof *buf))) {
        fprintf(stderr, "bench_scope: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (int s = 0; s < NVAR; s++)
        run->syncs[s][t] = run->sync_ns[s][t] = 0;
    /* One untimed pass over every variant first: a thread's first messages
     * pay one-time costs (its staging slots' pinned memory, events, lane
     * connections) that would otherwise all fall on whichever variant runs
     * first. */
    for (int s = 0; s < NVAR; s++) {
        BENCH_CHECK(ptsc_ctx_set_scope(ctx, scopes[s], NULL));
        for (int r = 0; r < 3; r++)
            one_round(ctx, run, s, buf, stream, t, n);
        BENCH_CHECK(ptsc_sync(ctx, PTSC_SCOPE_THREAD));
    }
    /* The rounds of each variant are split into blocks, and block b runs the
     * variants in an order rotated by b, so that no variant always runs
     * first (a cold GPU, pool growth) or right after the same neighbour. */
    for (int b = 0; b < run->blocks; b++) {
        const int reps = block_reps(run, b);
        for (int i = 0; i < NVAR; i++) {
            const int s = (b + i) % NVAR;
            ptsc_stats_t before, after;
            BENCH_CHECK(ptsc_ctx_set_scope(ctx, scopes[s], NULL));
            one_round(ctx, run, s, buf, stream, t, n); /* untimed: the new scope */
            BENCH_CHECK(ptsc_sync(ctx, PTSC_SCOPE_THREAD));
            align(ctx);
            BENCH_CHECK(ptsc_ctx_stats(ctx, &before));
            double t0 = bench_now();
            for (int r = 0; r < reps; r++)
                one_round(ctx, run, s, buf, stream, t, n);
            /* The last round's work counts too. */
            BENCH_CHECK(ptsc_sync(ctx, PTSC_SCOPE_THREAD));
            run->sec[s][t][b] = bench_now() - t0;
            BENCH_CHECK(ptsc_ctx_stats(ctx, &after));
            run->syncs[s][t] += after.syncs - before.syncs;
            run->sync_ns[s][t] += after.sync_ns - before.sync_ns;
            align(ctx);
        }
    }
    BENCH_CHECK(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_AUTO, NULL));
    if (run->gpu)
        bench_gpu_free(buf);
    else
        free(buf);
    return PTSC_OK;
}

static int arg_int(int argc, char **argv, int *i, const char *name, long *out)
{
    if (strcmp(argv[*i], name) != 0)
        return 0;
    if (*i + 1 >= argc || (*out = strtol(argv[*i + 1], NULL, 0)) <= 0) {
        fprintf(stderr, "bench_scope: %s needs a positive number\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    (*i)++;
    return 1;
}

int main(int argc, char **argv)
{
    BENCH_CHECK(ptsc_init(&argc, &argv));
    int nranks, slots;
    static run_t run; /* large; and zeroed */
    BENCH_CHECK(ptsc_rank(&run.rank));
    BENCH_CHECK(ptsc_size(&nranks, &slots));
    run.gpu = bench_gpu_available();
    long reps = run.gpu ? 200 : 2000, blocks = 5, bytes = 256 << 10, work = 200, imbalance = 50;
    for (int i = 1; i < argc; i++) {
        if (arg_int(argc, argv, &i, "--reps", &reps) || arg_int(argc, argv, &i, "--blocks", &blocks) ||
            arg_int(argc, argv, &i, "--bytes", &bytes) || arg_int(argc, argv, &i, "--work", &work) ||
            arg_int(argc, argv, &i, "--imbalance", &imbalance))
            continue;
        if (strcmp(argv[i], "--quick") == 0) {
            reps = 20;
            continue;
        }
        if (run.rank == 0)
            fprintf(stderr,
                    "usage: bench_scope [--reps R] [--blocks K] [--bytes B] [--work W] [--imbalance F] "
                    "[--quick]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (nranks != 2) {
        if (run.rank == 0)
            fprintf(stderr, "bench_scope: run it on exactly 2 ranks (got %d)\n", nranks);
        ptsc_finalize();
        return 2;
    }
    run.reps = (int)reps;
    run.blocks = (int)(blocks < reps ? blocks : reps);
    run.blocks = run.blocks > MAXB ? MAXB : run.blocks;
    run.work = (int)work;
    run.imbalance = 1;
    run.bytes = (size_t)bytes / sizeof(float) * sizeof(float);

    int cuda_aware = 0, staging = 0;
    BENCH_CHECK(ptsc_features(NULL, &cuda_aware, &staging));
    char sz[32];
    if (run.rank == 0) {
        printf("## bench_scope: sync scope before ptsc_send of a device buffer\n\n");
        if (run.gpu)
            printf("2 ranks, %d messages of %s per thread per scope in %d blocks of rotated order, GPU "
                   "work per message: %s x %d; transfer path: %s.\n\n",
                   run.reps, bench_size_text(run.bytes, sz, sizeof sz), run.blocks, bench_gpu_work_kind(),
                   run.work,
                   cuda_aware ? "direct (CUDA-aware MPI)"
                   : staging  ? "staged"
                              : "direct");
        else
            printf("No CUDA device (or CUDA not built): host buffers, every scope is a no-op, so this "
                   "measures the overhead of the scope logic alone. 2 ranks, %d messages of %s per "
                   "thread.\n\n",
                   run.reps, bench_size_text(run.bytes, sz, sizeof sz));
        printf("Columns: messages/s over all threads under each scope (the median over the blocks); `by "
               "hand`: cudaDeviceSynchronize() "
               "before every send and receive and ptsc's scope none (the habit of code written without "
               "ptsc); `no communication`: the same GPU work without sending (the ceiling).\n\n");
        printf("| threads | thread msg/s | global msg/s | device msg/s | none (unsafe) msg/s | by hand "
               "(cudaDeviceSynchronize) msg/s | no communication msg/s | thread / no communication | by hand "
               "/ thread | global / thread | device / thread | none / thread | mean sync us (thread / "
               "global / device) |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    }

    static const int tlist[] = {1, 2, 4, 8, MAXT};
    for (size_t k = 0; k < sizeof tlist / sizeof tlist[0]; k++) {
        const int T = tlist[k];
        if (T > slots) {
            if (run.rank == 0)
                printf("| %d | skipped: PTSC_MAX_THREADS is %d | | | | | | | | | | | |\n", T, slots);
            continue;
        }
        BENCH_CHECK(ptsc_omp_run(T, run_threads, &run));
        if (run.rank != 0)
            continue;
        double rate[NVAR], sync_us[NVAR];
        for (int s = 0; s < NVAR; s++) {
            uint64_t syncs = 0, ns = 0;
            for (int t = 0; t < T; t++) {
                syncs += run.syncs[s][t];
                ns += run.sync_ns[s][t];
            }
            rate[s] = rate_of(&run, s, T, 0);
            sync_us[s] = syncs ? 1e-3 * (double)ns / (double)syncs : 0;
        }
        printf("| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f / "
               "%.1f / "
               "%.1f |\n",
               T, rate[V_THREAD], rate[V_GLOBAL], rate[V_DEVICE], rate[V_NONE], rate[V_HABIT],
               rate[V_CEILING], rate[V_THREAD] / rate[V_CEILING], rate[V_HABIT] / rate[V_THREAD],
               rate[V_GLOBAL] / rate[V_THREAD], rate[V_DEVICE] / rate[V_THREAD],
               rate[V_NONE] / rate[V_THREAD], sync_us[V_THREAD], sync_us[V_GLOBAL], sync_us[V_DEVICE]);
        fflush(stdout);
    }
    /* One slow worker: thread 0 does `imbalance` times the work. */
    run.imbalance = (int)imbalance;
    if (run.rank == 0) {
        printf("\n## bench_scope, imbalanced: thread 0 does %dx the GPU work; rate of the other threads\n\n",
               run.imbalance);
        printf("| threads | thread msg/s | global msg/s | device msg/s | none (unsafe) msg/s | by hand "
               "(cudaDeviceSynchronize) msg/s | no communication msg/s | global / thread | device / thread | "
               "by hand / thread |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    for (size_t k = 1; k < sizeof tlist / sizeof tlist[0]; k++) {
        const int T = tlist[k];
        if (T > slots)
            continue;
        BENCH_CHECK(ptsc_omp_run(T, run_threads, &run));
        if (run.rank != 0)
            continue;
        double rate[NVAR];
        for (int s = 0; s < NVAR; s++)
            rate[s] = rate_of(&run, s, T, 1);
        printf("| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f |\n", T, rate[V_THREAD],
               rate[V_GLOBAL], rate[V_DEVICE], rate[V_NONE], rate[V_HABIT], rate[V_CEILING],
               rate[V_GLOBAL] / rate[V_THREAD], rate[V_DEVICE] / rate[V_THREAD],
               rate[V_HABIT] / rate[V_THREAD]);
        fflush(stdout);
    }
    BENCH_CHECK(ptsc_finalize());
    return 0;
}
