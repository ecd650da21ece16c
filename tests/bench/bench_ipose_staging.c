/*
 * bench_ipose_staging: what the interposer's staging costs a plain MPI
 * program on sparse datatypes, modelled on MPICH's pt2pt/sendself (a rank
 * sending large derived datatypes to itself).
 *
 * Run under ptsc-run with PTSC_STAGING=always: without a device that
 * stages host buffers, through the code a device buffer takes but for the
 * copy primitive (memcpy for cudaMemcpy). In one run, interleaved, `plain`
 * calls PMPI_* (MPI itself, past the interposer) and `staged` the MPI_*
 * calls the interposer stages. Cases:
 *   self   every rank: Irecv from itself, Send, Wait (sendself);
 *   pair   ranks 0 and 1 exchange: Irecv, Send, Wait;
 *   gatherv  Allgatherv of dense doubles into blocks with gaps between
 *          them (the v collectives' block staging).
 * The point-to-point type is 8-byte blocks (doubles) at a stride of
 * STRIDE bytes, the send and the receive interleaved in one allocation:
 * BLOCKS * 8 bytes of data over BLOCKS * STRIDE bytes of span. Each value
 * is the median of ROUNDS interleaved rounds, in milliseconds per
 * operation, with staged / plain. Received data is checked.
 *
 *   mpiexec -n 2 ptsc-run bench_ipose_staging [--quick]
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 5
#define STRIDE 512

static int rank, size, failed;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { SELF, PAIR, GATHERV, NCASES };
static const char *case_name[] = {"self", "pair", "gatherv"};

/* One operation of case `c`, through MPI (staged) or PMPI (plain). */
static void op(int c, int staged, char *base, MPI_Datatype vec, double *gs, double *gr, int n,
               const int *counts, const int *displs)
{
    int (*irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *) =
        staged ? MPI_Irecv : PMPI_Irecv;
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm) = staged ? MPI_Send : PMPI_Send;
    int (*wait)(MPI_Request *, MPI_Status *) = staged ? MPI_Wait : PMPI_Wait;
    MPI_Request r;
    if (c == GATHERV) {
        (staged ? MPI_Allgatherv : PMPI_Allgatherv)(gs, n, MPI_DOUBLE, gr, counts, displs, MPI_DOUBLE,
                                                    MPI_COMM_WORLD);
        return;
    }
    int peer = c == SELF ? rank : rank ^ 1;
    if (peer >= size)
        return;
    irecv(base + 8, 1, vec, peer, 7, MPI_COMM_WORLD, &r);
    send(base, 1, vec, peer, 7, MPI_COMM_WORLD);
    wait(&r, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    int blocks = quick ? 1 << 12 : 1 << 19, reps = quick ? 2 : 10, gn = quick ? 1 << 10 : 1 << 19;
    size_t span = (size_t)blocks * STRIDE;
    char *base = malloc(span + 16);
    double *gs = malloc((size_t)gn * sizeof *gs), *gr = malloc((size_t)gn * 2 * (size_t)size * sizeof *gr);
    int *counts = malloc((size_t)size * sizeof *counts), *displs = malloc((size_t)size * sizeof *displs);
    if (!base || !gs || !gr || !counts || !displs)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(base, 0, span + 16); /* pages touched before the timing */
    memset(gr, 0, (size_t)gn * 2 * (size_t)size * sizeof *gr);
    for (int i = 0; i < gn; i++)
        gs[i] = rank * 1e6 + i;
    for (int i = 0; i < size; i++)
        counts[i] = gn, displs[i] = 2 * i * gn; /* a gap of gn doubles after each block */
    MPI_Datatype vec;
    MPI_Type_vector(blocks, 1, STRIDE / 8, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);

    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    unsigned long staged0 = 0, staged1 = 0;
    if (!query || !query(NULL, NULL, NULL, &staged0)) {
        if (rank == 0)
            fprintf(stderr,
                    "bench_ipose_staging: FAIL: run it under ptsc-run (the interposer is not active)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double t[NCASES][2][ROUNDS];
    for (int k = 0; k < ROUNDS; k++)
        for (int c = 0; c < NCASES; c++)
            for (int s = 0; s < 2; s++) {
                double *v = (double *)(void *)base;
                for (int b = 0; b < blocks; b++) /* new data, and the receive's blocks cleared */
                    v[(size_t)b * (STRIDE / 8)] = rank + 0.5 * b + k, v[(size_t)b * (STRIDE / 8) + 1] = -1;
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = now();
                for (int i = 0; i < reps; i++)
                    op(c, s, base, vec, gs, gr, gn, counts, displs);
                double dt = (now() - t0) / reps, slowest = 0;
                PMPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                t[c][s][k] = slowest * 1e3;
                int peer = c == SELF ? rank : rank ^ 1;
                if (c != GATHERV && peer < size)
                    for (int b = 0; b < blocks; b++)
                        if (v[(size_t)b * (STRIDE / 8) + 1] != peer + 0.5 * b + k) {
                            fprintf(stderr, "bench_ipose_staging: FAIL: %s block %d\n", case_name[c], b);
                            failed++;
                            break;
                        }
                if (c == GATHERV)
                    for (int r = 0; r < size; r++)
                        if (gr[2 * (size_t)r * (size_t)gn + (size_t)gn - 1] != r * 1e6 + gn - 1 ||
                            gr[2 * (size_t)r * (size_t)gn + (size_t)gn] != 0) {
                            fprintf(stderr, "bench_ipose_staging: FAIL: allgatherv block %d\n", r);
                            failed++;
                        }
            }
    query(NULL, NULL, NULL, &staged1);
    if (rank == 0) {
        printf(
            "bench_ipose_staging: %d ranks, %d blocks of 8 B at stride %d B (%.1f MB of data over %.1f MB), "
            "allgatherv %d doubles per rank; ms per operation, median of %d rounds\n\n",
            size, blocks, STRIDE, blocks * 8 / 1e6, (double)span / 1e6, gn, ROUNDS);
        printf("| case | plain ms | staged ms | staged / plain |\n|---|---|---|---|\n");
        for (int c = 0; c < NCASES; c++) {
            qsort(t[c][0], ROUNDS, sizeof(double), cmp);
            qsort(t[c][1], ROUNDS, sizeof(double), cmp);
            double p = t[c][0][ROUNDS / 2], s = t[c][1][ROUNDS / 2];
            printf("| %s | %.2f | %.2f | %.2f |\n", case_name[c], p, s, s / p);
        }
        printf("\nbuffers staged by the interposer: %lu\n", staged1 - staged0);
    }
    if (staged1 == staged0 && rank == 0) {
        fprintf(stderr, "bench_ipose_staging: FAIL: nothing was staged (PTSC_STAGING=always?)\n");
        failed++;
    }
    MPI_Type_free(&vec);
    free(base);
    free(gs);
    free(gr);
    free(counts);
    free(displs);
    MPI_Finalize();
    return failed != 0;
}
