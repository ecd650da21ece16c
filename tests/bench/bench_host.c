/*
 * bench_host: ptsc's own cost on host buffers, against the MPI calls a
 * program would make by hand.
 *
 *   ping-pong  ptsc_send/ptsc_recv of malloc'd buffers against
 *              MPI_Send/MPI_Recv on MPI_COMM_WORLD with one tag per thread
 *              pair, 8 B and the powers of 4 from 16 B to 1 MiB, with 1 and 8
 *              thread pairs (thread t of rank 0 with thread t of rank 1).
 *              Reported: half a round trip in microseconds (mean over the
 *              pairs) and ptsc / raw (above 1: ptsc is slower).
 *              A third variant, matched, receives as ptsc does by hand:
 *              MPI_Mprobe + MPI_Mrecv (ptsc's receive guard: a message
 *              larger than the buffer never reaches MPI as a truncation),
 *              so ptsc / matched is ptsc's cost over the safe receive and
 *              matched / raw the guard's own.
 *   rate       8 B messages streamed by each of T = 1, 2, 4, 8, 16 threads
 *              of rank 0 to its peer thread on rank 1 (one acknowledgement
 *              at the end), through ptsc's lanes against raw MPI on
 *              MPI_COMM_WORLD with one tag per pair. Reported: messages per
 *              second over all threads and ptsc / raw (below 1: ptsc is
 *              slower), and ptsc / matched as above.
 *
 * The lane layout (PTSC_COMM=dup or shared) is fixed at ptsc_init, so one
 * run measures the mode it was started with; tests/bench/run_all.py runs the
 * rate case once per mode and merges the tables. Every column is measured
 * in ROUNDS interleaved rounds (raw, ptsc, matched, then ptsc, matched, raw,
 * ...) and reported
 * as its median with the range over the rounds; the number of messages per
 * measurement is calibrated on the raw variant so that one takes about
 * --target-ms. The receiver checks the data of every measurement.
 *
 *   mpiexec -n 2 bench_host [--only pingpong|rate] [--target-ms M] [--quick]
 * Thread counts above PTSC_MAX_THREADS are skipped (set it to 16).
 */
#include "bench_util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 5
#define MAXT 16
#define PP_MAX_BYTES ((size_t)1 << 20)
#define RATE_BYTES 8
#define TAG_PP 100    /* + pair: raw ping-pong */
#define TAG_RATE 200  /* + pair: raw stream */
#define TAG_ACK 300   /* + pair: raw acknowledgement */
#define TAG_MPP 400   /* + pair: matched ping-pong */
#define TAG_MRATE 500 /* + pair: matched stream */

enum { V_RAW, V_PTSC, V_MATCHED, NVARIANTS };
static const char *const variant_name[NVARIANTS] = {"raw", "ptsc", "matched"};
enum { CASE_PINGPONG, CASE_RATE };

typedef struct {
    int rank, rounds, which;
    int T;        /* threads per rank in this phase */
    size_t bytes; /* message size */
    double target;
    int reps; /* round trips (ping-pong) or messages (rate) per measurement */
    double sec[NVARIANTS][ROUNDS][MAXT];
} phase_t;

/* Every thread of both ranks starts together. */
static void align(void)
{
#pragma omp barrier
#pragma omp master
    MPI_Barrier(MPI_COMM_WORLD);
#pragma omp barrier
}

static unsigned char pattern(int t, int round, int variant)
{
    return (unsigned char)(1 + t + 7 * round + 3 * variant);
}

/* A raw receive: MPI_Recv, or matched first (MPI_Mprobe + MPI_Mrecv). */
static void raw_recv(char *buf, int n, int peer, int tag, int matched)
{
    if (!matched) {
        MPI_Recv(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return;
    }
    MPI_Message m;
    MPI_Status st;
    MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &m, &st);
    MPI_Mrecv(buf, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
}

/* Round trips on MPI_COMM_WORLD, one tag per pair (and variant). */
static void pp_raw(char *buf, int n, int rank, int t, int reps, int matched)
{
    const int peer = 1 - rank, tag = (matched ? TAG_MPP : TAG_PP) + t;
    for (int r = 0; r < reps; r++) {
        if (rank == 0) {
            MPI_Send(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
            raw_recv(buf, n, peer, tag, matched);
        } else {
            raw_recv(buf, n, peer, tag, matched);
            MPI_Send(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        }
    }
}

static void pp_ptsc(ptsc_ctx_t *ctx, char *buf, int n, int rank, int t, int reps)
{
    const int peer = 1 - rank;
    for (int r = 0; r < reps; r++) {
        if (rank == 0) {
            BENCH_CHECK(ptsc_send(ctx, buf, n, MPI_BYTE, peer, t, 0));
            BENCH_CHECK(ptsc_recv(ctx, buf, n, MPI_BYTE, peer, t, 0));
        } else {
            BENCH_CHECK(ptsc_recv(ctx, buf, n, MPI_BYTE, peer, t, 0));
            BENCH_CHECK(ptsc_send(ctx, buf, n, MPI_BYTE, peer, t, 0));
        }
    }
}

/* `reps` messages from thread t of rank 0 to thread t of rank 1, then one
 * acknowledgement back. */
static void rate_raw(char *buf, int n, int rank, int t, int reps, int matched)
{
    const int peer = 1 - rank, tag = (matched ? TAG_MRATE : TAG_RATE) + t;
    char ack = 0;
    if (rank == 0) {
        for (int r = 0; r < reps; r++)
            MPI_Send(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        raw_recv(&ack, 1, peer, TAG_ACK + t, matched);
    } else {
        for (int r = 0; r < reps; r++)
            raw_recv(buf, n, peer, tag, matched);
        MPI_Send(&ack, 1, MPI_BYTE, peer, TAG_ACK + t, MPI_COMM_WORLD);
    }
}

static void rate_ptsc(ptsc_ctx_t *ctx, char *buf, int n, int rank, int t, int reps)
{
    const int peer = 1 - rank;
    char ack = 0;
    if (rank == 0) {
        for (int r = 0; r < reps; r++)
            BENCH_CHECK(ptsc_send(ctx, buf, n, MPI_BYTE, peer, t, 1));
        BENCH_CHECK(ptsc_recv(ctx, &ack, 1, MPI_BYTE, peer, t, 2));
    } else {
        for (int r = 0; r < reps; r++)
            BENCH_CHECK(ptsc_recv(ctx, buf, n, MPI_BYTE, peer, t, 1));
        BENCH_CHECK(ptsc_send(ctx, &ack, 1, MPI_BYTE, peer, t, 2));
    }
}

static void run_variant(ptsc_ctx_t *ctx, phase_t *ph, int which, int variant, char *buf, int t, int reps)
{
    const int n = (int)ph->bytes;
    const int matched = variant == V_MATCHED;
    if (which == CASE_PINGPONG && variant != V_PTSC)
        pp_raw(buf, n, ph->rank, t, reps, matched);
    else if (which == CASE_PINGPONG)
        pp_ptsc(ctx, buf, n, ph->rank, t, reps);
    else if (variant != V_PTSC)
        rate_raw(buf, n, ph->rank, t, reps, matched);
    else
        rate_ptsc(ctx, buf, n, ph->rank, t, reps);
}

/* One timed measurement; rank 1 then checks that rank 0's bytes arrived. */
static void measure(ptsc_ctx_t *ctx, phase_t *ph, int variant, int round, char *buf, int t)
{
    const unsigned char v = pattern(t, round, variant);
    memset(buf, ph->rank == 0 ? v : 0, ph->bytes);
    align();
    double t0 = bench_now();
    run_variant(ctx, ph, ph->which, variant, buf, t, ph->reps);
    ph->sec[variant][round][t] = bench_now() - t0;
    if (ph->rank == 1 && ((unsigned char)buf[0] != v || (unsigned char)buf[ph->bytes - 1] != v)) {
        fprintf(stderr, "bench_host: thread %d received %d/%d, expected %d (%s, %zu B, %s)\n", t,
                (unsigned char)buf[0], (unsigned char)buf[ph->bytes - 1], v,
                ph->which == CASE_PINGPONG ? "ping-pong" : "rate", ph->bytes, variant_name[variant]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static int phase_thread(ptsc_ctx_t *ctx, void *arg)
{
    phase_t *ph = arg;
    int t;
    BENCH_CHECK(ptsc_ctx_index(ctx, &t));
    char *buf = calloc(1, ph->bytes);
    if (!buf) {
        fprintf(stderr, "bench_host: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Warm-up: connections, matching structures, first touch. */
    for (int variant = 0; variant < NVARIANTS; variant++) {
        align();
        run_variant(ctx, ph, ph->which, variant, buf, t, 3);
    }
    /* Calibration on the raw variant: rank 0's slowest thread decides for all. */
    const int probe = ph->which == CASE_PINGPONG ? 10 : 100;
    align();
    double t0 = bench_now();
    run_variant(ctx, ph, ph->which, V_RAW, buf, t, probe);
    ph->sec[V_RAW][0][t] = bench_now() - t0;
#pragma omp barrier
#pragma omp master
    {
        double slowest = 1e-9;
        for (int i = 0; i < ph->T; i++)
            slowest = ph->sec[V_RAW][0][i] > slowest ? ph->sec[V_RAW][0][i] : slowest;
        double reps = ph->target * probe / slowest;
        ph->reps = reps < 3 ? 3 : reps > 1e6 ? 1000000 : (int)reps;
        MPI_Bcast(&ph->reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
#pragma omp barrier
    for (int k = 0; k < ph->rounds; k++) /* each round starts with the next variant */
        for (int j = 0; j < NVARIANTS; j++)
            measure(ctx, ph, (k + j) % NVARIANTS, k, buf, t);
    align();
    free(buf);
    return PTSC_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double med, lo, hi;
} stat_t;

/* Median and range of n values (sorts them). */
static stat_t stats(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stat_t s = {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1]};
    return s;
}

/* Per round: half a round trip in us, mean over the pairs (ping-pong), or
 * messages per second over all threads, timed by the slowest (rate). */
static double round_value(const phase_t *ph, int variant, int k)
{
    double sum = 0, slowest = 0;
    for (int t = 0; t < ph->T; t++) {
        sum += ph->sec[variant][k][t];
        slowest = ph->sec[variant][k][t] > slowest ? ph->sec[variant][k][t] : slowest;
    }
    if (ph->which == CASE_PINGPONG)
        return 1e6 * sum / ph->T / ph->reps / 2;
    return slowest > 0 ? (double)ph->T * ph->reps / slowest : 0;
}

/* One phase's figures (rank 0): each variant, and ptsc / raw and ptsc /
 * matched per round. */
typedef struct {
    stat_t raw, pt, ratio, matched, mratio;
} figures_t;

/* Runs one phase; on rank 0 fills its figures. */
static void run_phase(phase_t *ph, figures_t *f)
{
    BENCH_CHECK(ptsc_omp_run(ph->T, phase_thread, ph));
    double r[ROUNDS], p[ROUNDS], q[ROUNDS], m[ROUNDS], qm[ROUNDS];
    for (int k = 0; k < ph->rounds; k++) {
        r[k] = round_value(ph, V_RAW, k);
        p[k] = round_value(ph, V_PTSC, k);
        m[k] = round_value(ph, V_MATCHED, k);
        q[k] = r[k] > 0 ? p[k] / r[k] : 0;
        qm[k] = m[k] > 0 ? p[k] / m[k] : 0;
    }
    f->raw = stats(r, ph->rounds);
    f->pt = stats(p, ph->rounds);
    f->matched = stats(m, ph->rounds);
    f->ratio = stats(q, ph->rounds);
    f->mratio = stats(qm, ph->rounds);
}

int main(int argc, char **argv)
{
    BENCH_CHECK(ptsc_init(&argc, &argv));
    int rank, nranks, slots, quick = 0, do_pp = 1, do_rate = 1;
    long target_ms = 0;
    BENCH_CHECK(ptsc_rank(&rank));
    BENCH_CHECK(ptsc_size(&nranks, &slots));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc &&
                   (!strcmp(argv[i + 1], "pingpong") || !strcmp(argv[i + 1], "rate"))) {
            do_pp = !strcmp(argv[++i], "pingpong");
            do_rate = !do_pp;
        } else if (!strcmp(argv[i], "--target-ms") && i + 1 < argc &&
                   (target_ms = strtol(argv[i + 1], NULL, 0)) > 0) {
            i++;
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: bench_host [--only pingpong|rate] [--target-ms M] [--quick]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "bench_host: run it on exactly 2 ranks (got %d)\n", nranks);
        ptsc_finalize();
        return 2;
    }
    const char *mode = getenv("PTSC_COMM") && *getenv("PTSC_COMM") ? getenv("PTSC_COMM") : "dup";
    static phase_t ph; /* large; and zeroed */
    ph.rank = rank;
    ph.rounds = quick ? 2 : ROUNDS;
    char sz[32];

    if (do_pp) {
        static const size_t sizes[] = {8, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, PP_MAX_BYTES};
        static const int pairs[] = {1, 8};
        ph.which = CASE_PINGPONG;
        ph.target = 1e-3 * (double)(target_ms ? target_ms : quick ? 2 : 30);
        if (rank == 0)
            printf(
                "## bench_host: host-buffer ping-pong, ptsc_send/recv vs MPI_Send/Recv, PTSC_COMM=%s\n\n"
                "2 ranks; thread t of rank 0 with thread t of rank 1; raw: MPI_COMM_WORLD, one tag per "
                "pair. Half a round trip in us (mean over the pairs), median of %d interleaved rounds of "
                "about %.0f ms each, range over the rounds; ptsc / raw above 1 means ptsc is slower. "
                "Matched: raw with each receive matched first (MPI_Mprobe + MPI_Mrecv), the safe receive "
                "ptsc makes (its receive guard); ptsc / matched is ptsc's cost over it.\n\n"
                "| size | pairs | raw us | ptsc us | ptsc / raw | raw min..max | ptsc min..max | ptsc / raw "
                "min..max | matched us | ptsc / matched | ptsc / matched min..max |\n"
                "|---:|---:|---:|---:|---:|---|---|---|---:|---:|---|\n",
                mode, ph.rounds, 1e3 * ph.target);
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                ph.T = pairs[p];
                ph.bytes = sizes[s];
                if (ph.T > slots) {
                    if (rank == 0)
                        printf("| %s | %d | skipped: PTSC_MAX_THREADS is %d | | | | | | | | |\n",
                               bench_size_text(ph.bytes, sz, sizeof sz), ph.T, slots);
                    continue;
                }
                figures_t f;
                run_phase(&ph, &f);
                if (rank == 0)
                    printf("| %s | %d | %.2f | %.2f | %.3f | %.2f..%.2f | %.2f..%.2f | %.3f..%.3f | %.2f | "
                           "%.3f | "
                           "%.3f..%.3f |\n",
                           bench_size_text(ph.bytes, sz, sizeof sz), ph.T, f.raw.med, f.pt.med,
                           f.pt.med / f.raw.med, f.raw.lo, f.raw.hi, f.pt.lo, f.pt.hi, f.ratio.lo, f.ratio.hi,
                           f.matched.med, f.pt.med / f.matched.med, f.mratio.lo, f.mratio.hi);
                fflush(stdout);
            }
        }
        if (rank == 0)
            printf("\n");
    }

    if (do_rate) {
        static const int tlist[] = {1, 2, 4, 8, MAXT};
        ph.which = CASE_RATE;
        ph.bytes = RATE_BYTES;
        ph.target = 1e-3 * (double)(target_ms ? target_ms : quick ? 5 : 150);
        if (rank == 0)
            printf("## bench_host: lane message rate, %d B messages, PTSC_COMM=%s\n\n"
                   "2 ranks; each thread of rank 0 streams blocking sends to its peer thread on rank 1, one "
                   "acknowledgement at the end; raw: MPI_Send/Recv on MPI_COMM_WORLD, one tag per pair. "
                   "Messages per second over all threads, median of %d interleaved rounds of about %.0f ms "
                   "each, range over the rounds; ptsc / raw below 1 means ptsc is slower. Matched: raw with "
                   "each receive matched first (MPI_Mprobe + MPI_Mrecv), the safe receive ptsc makes.\n\n"
                   "| threads | raw msg/s | ptsc (%s) msg/s | ptsc / raw | raw min..max | ptsc min..max | "
                   "ptsc / raw min..max | matched msg/s | ptsc / matched | ptsc / matched min..max |\n"
                   "|---:|---:|---:|---:|---|---|---|---:|---:|---|\n",
                   RATE_BYTES, mode, ph.rounds, 1e3 * ph.target, mode);
        for (size_t k = 0; k < sizeof tlist / sizeof tlist[0]; k++) {
            ph.T = tlist[k];
            if (ph.T > slots) {
                if (rank == 0)
                    printf("| %d | skipped: PTSC_MAX_THREADS is %d | | | | | | | | |\n", ph.T, slots);
                continue;
            }
            figures_t f;
            run_phase(&ph, &f);
            if (rank == 0)
                printf("| %d | %.0f | %.0f | %.3f | %.0f..%.0f | %.0f..%.0f | %.3f..%.3f | %.0f | %.3f | "
                       "%.3f..%.3f |\n",
                       ph.T, f.raw.med, f.pt.med, f.pt.med / f.raw.med, f.raw.lo, f.raw.hi, f.pt.lo, f.pt.hi,
                       f.ratio.lo, f.ratio.hi, f.matched.med, f.pt.med / f.matched.med, f.mratio.lo,
                       f.mratio.hi);
            fflush(stdout);
        }
        if (rank == 0)
            printf("\n");
    }
    BENCH_CHECK(ptsc_finalize());
    return 0;
}
