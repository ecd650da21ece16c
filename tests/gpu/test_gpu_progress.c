/*
 * MPI's progress rule with device buffers (tests/mpi/mpi_progress.c on the
 * GPU): a non-blocking operation whose partner is posted completes while
 * its thread sits in a blocking collective or computes without calling ptsc.
 *
 * Two ranks x NT threads; thread t of rank r pairs with thread NT-1-t of
 * rank 1-r. Side A starts a non-blocking operation, then a blocking
 * collective (or computation), then waits; side B makes the blocking
 * counterpart, then the same collective:
 *
 *   isend  A: spin-fill kernel, ptsc_isend, COLL, ptsc_wait    B: ptsc_recv, COLL
 *   irecv  A: spin kernel, ptsc_irecv, COLL, ptsc_wait          B: spin-fill kernel, ptsc_send, COLL
 *   pair   both: spin-fill kernel, ptsc_irecv + ptsc_isend, COLL, ptsc_waitall
 *
 * Every buffer is device memory; a send buffer is written by a kernel that
 * first spins SPIN_US on the thread's bound stream, so the message starts
 * behind running work (a staged copy waiting on its event, a direct send
 * deferred to the thread scope's event, pieces of a framed message), and a
 * receive buffer is behind a spinning kernel too. COLL: ptsc_barrier,
 * ptsc_allreduce, ptsc_world_barrier, ptsc_world_allreduce, MPI_Barrier,
 * MPI_Allreduce (on a duplicate of MPI_COMM_WORLD per thread index), or
 * 20 ms of computation. Messages of one piece (4000 bytes) and of many
 * (1.5 MiB: 384 pieces of a 4 KiB PTSC_STAGING_CHUNK, above
 * PTSC_DIRECT_MIN's default). The received data is counted by a kernel on
 * the thread's stream after the wait. Each pattern runs twice: both sides
 * at once, and B 5 ms late (A surely inside its collective).
 *
 * A thread that spends DEADLINE_S in one pattern ends the job with the
 * pattern and the call of every thread (GPU_PROGRESS_DEADLINE overrides).
 * Skips (77) without a device, and where PTSC_STAGING=never meets an MPI
 * that is not CUDA-aware. Usage: test_gpu_progress [REGEX] (patterns whose
 * name, e.g. isend.world_barrier.many, matches).
 */
#include "gpu_test.h"

#include <mpi.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>

#define NT 4
#define SPIN_US 2000
#define DEADLINE_S 20.0

enum { OP_ISEND, OP_IRECV, OP_PAIR, NOPS };
enum { C_BARRIER, C_ALLREDUCE, C_WBARRIER, C_WALLREDUCE, C_MBARRIER, C_MALLREDUCE, C_COMPUTE, NCOLLS };
enum { NSIZES = 2, NPAT = NOPS * NCOLLS * NSIZES, ROUNDS = 2, NRED = 3 };

static const char *const op_name[NOPS] = {"isend", "irecv", "pair"};
static const char *const coll_name[NCOLLS] = {
    "barrier", "allreduce", "world_barrier", "world_allreduce", "mpi_barrier", "mpi_allreduce", "compute"};
static const size_t size_ints[NSIZES] = {1000, 393216};
static const char *const size_name[NSIZES] = {"one", "many"};

static int nranks, selected[NPAT];
static double deadline_s = DEADLINE_S;
static MPI_Comm mcomm[NT];

/* Where each thread is, for the watchdog. */
static atomic_int w_pat[NT], w_round[NT];
static _Atomic(const char *) w_stage[NT];
static _Atomic long long w_since_ms[NT];
static atomic_int w_stop;

static void pattern_name(int p, char *buf, size_t n)
{
    snprintf(buf, n, "%s.%s.%s", op_name[p / (NSIZES * NCOLLS)], coll_name[p / NSIZES % NCOLLS],
             size_name[p % NSIZES]);
}

static void *watchdog(void *arg)
{
    (void)arg;
    while (!atomic_load(&w_stop)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double now = gt_now_ms();
        int stuck = 0;
        for (int t = 0; t < NT; t++)
            stuck |=
                atomic_load(&w_pat[t]) >= 0 && now - (double)atomic_load(&w_since_ms[t]) > deadline_s * 1e3;
        if (!stuck)
            continue;
        fprintf(stderr, "FAIL [rank %d] test_gpu_progress: a pattern did not complete within %.0f s:\n",
                gt_rank, deadline_s);
        for (int t = 0; t < NT; t++) {
            int p = atomic_load(&w_pat[t]);
            char name[64] = "(none)";
            if (p >= 0)
                pattern_name(p, name, sizeof name);
            fprintf(stderr, "  [rank %d thread %d] pattern %s round %d: in %s\n", gt_rank, t, name,
                    atomic_load(&w_round[t]), p >= 0 ? atomic_load(&w_stage[t]) : "no pattern");
        }
        fflush(stderr);
        struct timespec grace = {1, 0};
        nanosleep(&grace, NULL);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    return NULL;
}

static int red_value(int id, int r, int t, int k) { return 1 + id * 7 + r * 1000 + t * 100 + k; }

static void collective(ptsc_ctx_t *ctx, int t, int id, int coll, const char *name)
{
    int in[NRED], out[NRED];
    for (int k = 0; k < NRED; k++) {
        in[k] = red_value(id, gt_rank, t, k);
        out[k] = -1;
    }
    switch (coll) {
    case C_BARRIER:
        atomic_store(&w_stage[t], "ptsc_barrier");
        GT_OK(ptsc_barrier(ctx));
        return;
    case C_WBARRIER:
        atomic_store(&w_stage[t], "ptsc_world_barrier");
        GT_OK(ptsc_world_barrier(ctx, NT));
        return;
    case C_MBARRIER:
        atomic_store(&w_stage[t], "MPI_Barrier");
        GT_CHECK(MPI_Barrier(mcomm[t]) == MPI_SUCCESS, "%s: MPI_Barrier", name);
        return;
    case C_COMPUTE: {
        atomic_store(&w_stage[t], "computation");
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        return;
    }
    case C_ALLREDUCE:
        atomic_store(&w_stage[t], "ptsc_allreduce");
        GT_OK(ptsc_allreduce(ctx, in, out, NRED, MPI_INT, MPI_SUM));
        break;
    case C_WALLREDUCE:
        atomic_store(&w_stage[t], "ptsc_world_allreduce");
        GT_OK(ptsc_world_allreduce(ctx, NT, in, out, NRED, MPI_INT, MPI_SUM));
        break;
    default:
        atomic_store(&w_stage[t], "MPI_Allreduce");
        GT_CHECK(MPI_Allreduce(in, out, NRED, MPI_INT, MPI_SUM, mcomm[t]) == MPI_SUCCESS, "%s: MPI_Allreduce",
                 name);
        break;
    }
    for (int k = 0; k < NRED; k++) {
        int want = 0;
        for (int r = 0; r < nranks; r++)
            for (int u = coll == C_WALLREDUCE ? 0 : t; u < (coll == C_WALLREDUCE ? NT : t + 1); u++)
                want += red_value(id, r, u, k);
        GT_CHECK(out[k] == want, "%s: element %d of the allreduce is %d, expected %d", name, k, out[k], want);
    }
}

/* The pattern of the message from (r, t) in pattern-round `id`. */
static int seed_of(int id, int r, int t) { return (id * 4 + r) * NT + t + 1; }

static void run_pattern(ptsc_ctx_t *ctx, int t, int p, int round, int *sbuf, int *rbuf)
{
    int op = p / (NSIZES * NCOLLS), coll = p / NSIZES % NCOLLS, id = p + NPAT * round;
    int pr = 1 - gt_rank, pt = NT - 1 - t, m = t < NT - 1 - t ? t : NT - 1 - t;
    int is_a = (gt_rank == 0) ^ (m & 1);
    size_t n = size_ints[p % NSIZES];
    int cnt = (int)n;
    char name[80];
    pattern_name(p, name, sizeof name);
    snprintf(name + strlen(name), sizeof name - strlen(name), " round %d", round);
    cudaStream_t s = gt_stream(ctx);
    GT_CUDA(cudaMemsetAsync(rbuf, 0, n * sizeof(int), s));
    GT_CUDA(cudaStreamSynchronize(s));

    atomic_store(&w_since_ms[t], (long long)gt_now_ms());
    atomic_store(&w_stage[t], "start");
    atomic_store(&w_round[t], round);
    atomic_store(&w_pat[t], p);
    if (round == 1 && !is_a) {
        struct timespec late = {0, 5 * 1000 * 1000};
        nanosleep(&late, NULL);
    }
    int sends = op == OP_PAIR || (op == OP_ISEND) == is_a, recvs = op == OP_PAIR || (op == OP_IRECV) == is_a;
    if (sends)
        GT_CUDA(ptsc_tk_spin_fill(sbuf, n, seed_of(id, gt_rank, t), SPIN_US, s));
    if (recvs)
        GT_CUDA(ptsc_tk_spin(SPIN_US, s));
    if (op == OP_PAIR || is_a) {
        ptsc_request_t req[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
        if (recvs) {
            atomic_store(&w_stage[t], "ptsc_irecv");
            GT_OK(ptsc_irecv(ctx, rbuf, cnt, MPI_INT, pr, pt, id, &req[0]));
        }
        if (sends) {
            atomic_store(&w_stage[t], "ptsc_isend");
            GT_OK(ptsc_isend(ctx, sbuf, cnt, MPI_INT, pr, pt, id, &req[1]));
        }
        collective(ctx, t, id, coll, name);
        atomic_store(&w_stage[t], "ptsc_waitall");
        GT_OK(ptsc_waitall(2, req));
    } else {
        if (recvs) {
            atomic_store(&w_stage[t], "ptsc_recv");
            GT_OK(ptsc_recv(ctx, rbuf, cnt, MPI_INT, pr, pt, id));
        } else {
            atomic_store(&w_stage[t], "ptsc_send");
            GT_OK(ptsc_send(ctx, sbuf, cnt, MPI_INT, pr, pt, id));
        }
        collective(ctx, t, id, coll, name);
    }
    atomic_store(&w_pat[t], -1);
    if (recvs) {
        unsigned long long bad = gt_count_bad(rbuf, n, seed_of(id, pr, pt), s);
        GT_CHECK(bad == 0, "%s, thread %d: %llu of %zu received elements wrong", name, t, bad, n);
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    int *sbuf = NULL, *rbuf = NULL;
    GT_OK(ptsc_thread_attach(t, &ctx));
    if (!ctx)
        return NULL;
    GT_CUDA(cudaMalloc((void **)&sbuf, size_ints[NSIZES - 1] * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&rbuf, size_ints[NSIZES - 1] * sizeof(int)));
    for (int p = 0; p < NPAT && sbuf && rbuf; p++)
        for (int round = 0; round < ROUNDS && selected[p]; round++)
            run_pattern(ctx, t, p, round, sbuf, rbuf);
    GT_CUDA(cudaFree(sbuf));
    GT_CUDA(cudaFree(rbuf));
    GT_OK(ptsc_thread_detach());
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_progress");
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "4", 1);
    const char *dl = getenv("GPU_PROGRESS_DEADLINE");
    if (dl && atof(dl) > 0)
        deadline_s = atof(dl);
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%d", (int)(deadline_s / 2));
    setenv("PTSC_TIMEOUT", tmo, 0);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    GT_OK(ptsc_size(&nranks, NULL));
    int cuda = 0, aware = 0, staging = 0;
    GT_OK(ptsc_features(&cuda, &aware, &staging));
    if (nranks != 2 || (!staging && !aware)) {
        if (gt_rank == 0)
            printf("SKIPPED test_gpu_progress: %s\n",
                   nranks != 2 ? "needs 2 ranks" : "PTSC_STAGING=never needs a CUDA-aware MPI");
        fflush(stdout);
        ptsc_finalize();
        return GT_SKIP;
    }
    regex_t re;
    int use_re = argc > 1 && regcomp(&re, argv[1], REG_EXTENDED | REG_NOSUB) == 0;
    for (int p = 0; p < NPAT; p++) {
        char name[64];
        pattern_name(p, name, sizeof name);
        selected[p] = !use_re || regexec(&re, name, 0, NULL, 0) == 0;
    }
    if (use_re)
        regfree(&re);
    for (int t = 0; t < NT; t++) {
        atomic_init(&w_pat[t], -1);
        atomic_init(&w_round[t], 0);
        atomic_init(&w_stage[t], "start");
        atomic_init(&w_since_ms[t], 0);
        MPI_Comm_dup(MPI_COMM_WORLD, &mcomm[t]);
    }
    if (gt_rank == 0)
        printf("test_gpu_progress: 2 ranks x %d threads, %s path, PTSC_COMM=%s, PTSC_STAGING=%s, chunk %s\n",
               NT, gt_path(NULL), getenv("PTSC_COMM") ? getenv("PTSC_COMM") : "dup",
               getenv("PTSC_STAGING") ? getenv("PTSC_STAGING") : "auto",
               getenv("PTSC_STAGING_CHUNK") ? getenv("PTSC_STAGING_CHUNK") : "default");
    pthread_t wd, th[NT];
    pthread_create(&wd, NULL, watchdog, NULL);
    for (int t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    atomic_store(&w_stop, 1);
    pthread_join(wd, NULL);
    for (int t = 0; t < NT; t++)
        MPI_Comm_free(&mcomm[t]);
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_progress");
}
