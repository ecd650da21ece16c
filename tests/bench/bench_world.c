/*
 * bench_world: an allreduce over every thread of every rank, ptsc's world
 * allreduce against the pattern programs write by hand.
 *
 *   hand-written   each thread writes its values to a per-thread array;
 *                  omp barrier; omp single: sum the threads' arrays in
 *                  thread order, MPI_Allreduce on a communicator of the
 *                  benchmark's own; the single's barrier; every thread
 *                  copies the result out
 *   ptsc           ptsc_world_allreduce(ctx, T, in, out, count, MPI_DOUBLE, MPI_SUM)
 *
 * Host buffers of doubles, T threads per rank (OMP_NUM_THREADS, within
 * PTSC_MAX_THREADS), counts 1 .. 64 Ki. The two forms alternate in 5
 * rounds; each row is the best round of each (microseconds per call, the
 * slowest rank's), and the ratio ptsc / hand-written of those times (above
 * 1: ptsc is slower). Results are checked (values whose sums are exact).
 *
 *   mpiexec -n 2 bench_world [--iters N] [--quick]
 */
#include "bench_util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 5, NCOUNTS = 5 };
static const int counts[NCOUNTS] = {1, 16, 1024, 16384, 65536};

static int R, rank, iters = 2000;
static MPI_Comm hand_comm;
static double *partial;         /* T x count: the hand-written pattern's per-thread array */
static double *global;          /* its result */
static double best[2][NCOUNTS]; /* seconds per call: [0] hand-written, [1] ptsc */
static int bad;

static double value(int r, int t, int k) { return (double)(r * 64 + t + (k % 7)); }

static double want(int T, int k)
{
    double s = 0;
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            s += value(r, t, k);
    return s;
}

static int body(ptsc_ctx_t *ctx, void *arg)
{
    (void)arg;
    int t = 0, T = omp_get_num_threads();
    BENCH_CHECK(ptsc_ctx_index(ctx, &t));
    double *in = malloc(sizeof(double) * (size_t)counts[NCOUNTS - 1]);
    double *out = malloc(sizeof(double) * (size_t)counts[NCOUNTS - 1]);
    if (!in || !out)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int c = 0; c < NCOUNTS; c++) {
        int n = counts[c], it_n = n >= 16384 ? (iters / 20 > 5 ? iters / 20 : 5) : iters;
        for (int k = 0; k < n; k++)
            in[k] = value(rank, t, k);
        for (int round = 0; round < ROUNDS; round++) {
            for (int form = 0; form < 2; form++) {
                memset(out, 0, sizeof(double) * (size_t)n);
#pragma omp barrier
#pragma omp single
                MPI_Barrier(hand_comm);
                double t0 = bench_now();
                for (int i = 0; i < it_n; i++) {
                    if (form == 1) {
                        BENCH_CHECK(ptsc_world_allreduce(ctx, T, in, out, n, MPI_DOUBLE, MPI_SUM));
                        continue;
                    }
                    memcpy(partial + (size_t)t * (size_t)n, in, sizeof(double) * (size_t)n);
#pragma omp barrier
#pragma omp single
                    {
                        for (int k = 0; k < n; k++) {
                            double s = partial[k];
                            for (int u = 1; u < T; u++)
                                s += partial[(size_t)u * (size_t)n + (size_t)k];
                            partial[k] = s;
                        }
                        MPI_Allreduce(partial, global, n, MPI_DOUBLE, MPI_SUM, hand_comm);
                    }
                    memcpy(out, global, sizeof(double) * (size_t)n);
                    /* The next iteration's copy into partial must wait for every reader of global. */
#pragma omp barrier
                }
                double dt = (bench_now() - t0) / it_n;
#pragma omp barrier
                if (t == 0) {
                    double worst = 0;
                    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, hand_comm);
                    if (round == 0 || worst < best[form][c])
                        best[form][c] = worst;
                }
                for (int k = 0; k < n; k++)
                    if (out[k] != want(T, k)) {
#pragma omp atomic write
                        bad = 1;
                        break;
                    }
            }
        }
    }
    free(in);
    free(out);
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            iters = 20;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
    }
    if (iters < 1)
        iters = 1;
    BENCH_CHECK(ptsc_init(&argc, &argv));
    int slots = 0;
    BENCH_CHECK(ptsc_rank(&rank));
    BENCH_CHECK(ptsc_size(&R, &slots));
    int T = omp_get_max_threads() < slots ? omp_get_max_threads() : slots;
    MPI_Comm_dup(MPI_COMM_WORLD, &hand_comm);
    partial = malloc(sizeof(double) * (size_t)T * (size_t)counts[NCOUNTS - 1]);
    global = malloc(sizeof(double) * (size_t)counts[NCOUNTS - 1]);
    if (!partial || !global)
        MPI_Abort(MPI_COMM_WORLD, 1);
    BENCH_CHECK(ptsc_omp_run(T, body, NULL));
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("## bench_world: allreduce of doubles over every thread of every rank\n\n");
        printf("%d ranks x %d threads, MPI_SUM of host doubles; best of %d rounds, %d calls each (%d from "
               "16384 doubles), slowest rank. hand-written: per-thread array + omp barrier + omp single "
               "(thread-order sum, MPI_Allreduce); ptsc: ptsc_world_allreduce.\n\n",
               R, T, ROUNDS, iters, iters / 20 > 5 ? iters / 20 : 5);
        printf("| doubles | hand-written us/call | ptsc us/call | ptsc / hand-written "
               "|\n|---:|---:|---:|---:|\n");
        for (int c = 0; c < NCOUNTS; c++)
            printf("| %d | %.2f | %.2f | %.2f |\n", counts[c], 1e6 * best[0][c], 1e6 * best[1][c],
                   best[1][c] / best[0][c]);
        printf("\nresults %s\n", any_bad ? "WRONG" : "checked");
    }
    MPI_Comm_free(&hand_comm);
    free(partial);
    free(global);
    BENCH_CHECK(ptsc_finalize());
    return any_bad ? 1 : 0;
}
