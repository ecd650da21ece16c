/*
 * bench_interpose: what libptsc-mpi costs a plain MPI program on host
 * buffers.
 *
 * Two ranks, one thread each, ping-pong of malloc'd buffers from 8 B to
 * 64 KiB. In one run, interleaved: `raw` calls PMPI_Send / PMPI_Recv (MPI
 * itself, past the interposer) and `interposed` calls MPI_Send / MPI_Recv
 * (through libptsc-mpi, which this program is linked with). Half a round
 * trip in microseconds, median of 7 interleaved rounds with the range over
 * the rounds; interposed / raw above 1 means the interposer costs time.
 * Each measurement's length is calibrated on the raw variant (about 20 ms).
 *
 *   mpiexec -n 2 bench_interpose [--quick]
 * The program makes no ptsc call: it is the program the interposer is for.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 7
#define MAXB (64 << 10)

static int rank;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* `reps` round trips of `n` bytes; returns seconds. */
static double pingpong(int interposed, char *buf, int n, int reps)
{
    int peer = 1 - rank;
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            if (interposed) {
                MPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                PMPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                PMPI_Recv(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        } else {
            if (interposed) {
                MPI_Recv(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            } else {
                PMPI_Recv(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                PMPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
    }
    double t = now() - t0, slowest = 0;
    PMPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int size, quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "bench_interpose: run it on 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int (*active)(unsigned long *, unsigned long *, unsigned long *, unsigned long *) =
        (int (*)(unsigned long *, unsigned long *, unsigned long *, unsigned long *))dlsym(
            RTLD_DEFAULT, "ptsc_mpi_interposer");
    if (!active || active(NULL, NULL, NULL, NULL) != 1) {
        if (rank == 0)
            fprintf(stderr, "bench_interpose: libptsc-mpi is not active (link it or run under ptsc-run)\n");
        MPI_Finalize();
        return 1;
    }
    char *buf = calloc(MAXB, 1);
    if (rank == 0) {
        printf("## bench_interpose: host ping-pong through libptsc-mpi against PMPI, 2 ranks\n\n");
        printf("Half a round trip in us, median of %d interleaved rounds, range over the rounds; "
               "interposed / raw above 1 means the interposer costs time.\n\n",
               quick ? 2 : ROUNDS);
        printf("| size | raw us | interposed us | interposed / raw | raw min..max | interposed min..max |\n");
        printf("|---:|---:|---:|---:|---|---|\n");
    }
    const int rounds = quick ? 2 : ROUNDS;
    for (int n = 8; n <= MAXB; n *= 8) {
        /* Calibrate: reps for about 20 ms of raw round trips (2 ms quick). */
        int reps = 100;
        double t = pingpong(0, buf, n, reps), target = quick ? 0.002 : 0.02;
        reps = t > 0 ? (int)(reps * target / t) + 1 : 1000;
        PMPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
        double raw[ROUNDS], ip[ROUNDS];
        for (int r = 0; r < rounds; r++) {
            raw[r] = pingpong(0, buf, n, reps) / reps / 2 * 1e6;
            ip[r] = pingpong(1, buf, n, reps) / reps / 2 * 1e6;
        }
        qsort(raw, (size_t)rounds, sizeof *raw, cmp);
        qsort(ip, (size_t)rounds, sizeof *ip, cmp);
        if (rank == 0) {
            double rm = raw[rounds / 2], im = ip[rounds / 2];
            printf("| %d B | %.3f | %.3f | %.3f | %.3f..%.3f | %.3f..%.3f |\n", n, rm, im, im / rm, raw[0],
                   raw[rounds - 1], ip[0], ip[rounds - 1]);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
