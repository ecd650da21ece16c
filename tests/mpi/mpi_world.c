/*
 * World collectives (ptsc_world_*): every thread of every rank.
 *
 *  - allreduce sums of per-(rank, thread) integers equal the closed form,
 *    small and large counts, in place, PTSC_WORLD_TEAM and explicit counts;
 *  - floating point sums whose result depends on the order equal, bit for
 *    bit, a serial reference folded in the documented order (threads in
 *    index order within a rank, then ranks in order), and differ from the
 *    reverse order (so the check can tell orders apart);
 *  - reduce (MPI_MAX and the ordered sum) to a root (rank, thread) that is
 *    not (0, 0): only the root thread's buffer is written;
 *  - bcast from a root (rank, thread) that is not (0, 0);
 *  - allgather blocks ordered by (rank, thread);
 *  - barrier: no thread leaves before every thread of its rank arrived;
 *  - disagreements give PTSC_ERR_MISMATCH on every participant, not a hang:
 *    a thread count that differs between ranks (allreduce and bcast), a
 *    count that differs between threads of a rank, a thread whose arguments
 *    fail (it gets its own status); a normal call works afterwards;
 *  - pthreads attached by hand with an explicit thread count.
 */
#include "mpi_common.h"

#include <math.h> /* NAN */
#include <omp.h>

enum { NITER = 4, BIG = 5000, NORD = 64 };

static int R, T;

static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Values of widely different magnitudes and both signs: their sum depends
 * on the order of the additions. */
static double ord_value(int r, int t, int k, int it)
{
    uint64_t h = splitmix(((uint64_t)r << 40) ^ ((uint64_t)t << 28) ^ ((uint64_t)k << 8) ^ (uint64_t)it);
    double m = (double)(h >> 11) / (double)(1ull << 53);
    int e = (int)((h >> 3) % 61) - 30;
    double scale = 1;
    for (; e > 0; e--)
        scale *= 2;
    for (; e < 0; e++)
        scale /= 2;
    return ((h & 1) ? -m : m) * scale;
}

/* The documented order: p_r = x(r,0) + ... + x(r,T-1), then p_0 + ... + p_(R-1). */
static double ord_want(int k, int it)
{
    double acc = 0;
    for (int r = 0; r < R; r++) {
        double p = ord_value(r, 0, k, it);
        for (int t = 1; t < T; t++)
            p = p + ord_value(r, t, k, it);
        acc = r == 0 ? p : acc + p;
    }
    return acc;
}

/* Another order (everything reversed), to show the values tell orders apart. */
static double ord_reverse(int k, int it)
{
    double acc = 0;
    for (int r = R - 1; r >= 0; r--) {
        double p = ord_value(r, T - 1, k, it);
        for (int t = T - 2; t >= 0; t--)
            p = p + ord_value(r, t, k, it);
        acc = r == R - 1 ? p : acc + p;
    }
    return acc;
}

static long long ival(int r, int t, int k, int it) { return 1000LL * r + 10LL * t + k + it; }

/* Sum over every (rank, thread) of ival: closed form. */
static long long isum(int k, int it)
{
    return 1000LL * T * ((long long)R * (R - 1) / 2) + 10LL * R * ((long long)T * (T - 1) / 2) +
           (long long)R * T * (k + it);
}

static int barrier_count; /* threads of this rank that reached the barrier */

static int world_body(ptsc_ctx_t *ctx, void *arg)
{
    (void)arg;
    int t = -1;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    const int me = g_rank;
    long long *lin = malloc(sizeof(long long) * BIG), *lout = malloc(sizeof(long long) * BIG);
    double *din = malloc(sizeof(double) * NORD), *dout = malloc(sizeof(double) * NORD);
    int *gath = malloc(sizeof(int) * 3 * (size_t)R * (size_t)T);
    if (!lin || !lout || !din || !dout || !gath) {
        CHECK(0, "out of memory");
        free(lin), free(lout), free(din), free(dout), free(gath);
        return PTSC_ERR_NO_MEMORY;
    }
    const int rroot = R - 1, troot = T - 1; /* a root that is not (0, 0) */

    for (int it = 0; it < NITER; it++) {
        /* Allreduce of integers, small (team) and large (explicit count). */
        for (int k = 0; k < 3; k++)
            lin[k] = ival(me, t, k, it);
        CHECK_OK(ptsc_world_allreduce(ctx, PTSC_WORLD_TEAM, lin, lout, 3, MPI_LONG_LONG, MPI_SUM));
        for (int k = 0; k < 3; k++)
            CHECK(lout[k] == isum(k, it), "allreduce it %d [%d] = %lld, want %lld", it, k, lout[k],
                  isum(k, it));
        for (int k = 0; k < BIG; k++)
            lin[k] = ival(me, t, k, it);
        CHECK_OK(ptsc_world_allreduce(ctx, T, lin, lout, BIG, MPI_LONG_LONG, MPI_SUM));
        for (int k = 0; k < BIG; k++)
            if (lout[k] != isum(k, it)) {
                CHECK(0, "allreduce(%d) it %d [%d] = %lld, want %lld", BIG, it, k, lout[k], isum(k, it));
                break;
            }
        /* In place. */
        for (int k = 0; k < 3; k++)
            lout[k] = ival(me, t, k, it);
        CHECK_OK(ptsc_world_allreduce(ctx, T, MPI_IN_PLACE, lout, 3, MPI_LONG_LONG, MPI_SUM));
        for (int k = 0; k < 3; k++)
            CHECK(lout[k] == isum(k, it), "in-place allreduce [%d] = %lld, want %lld", k, lout[k],
                  isum(k, it));

        /* Order: bit for bit the documented fold. */
        int differs = 0;
        for (int k = 0; k < NORD; k++) {
            din[k] = ord_value(me, t, k, it);
            dout[k] = NAN;
            double w = ord_want(k, it), rev = ord_reverse(k, it);
            differs += memcmp(&w, &rev, sizeof w) != 0;
        }
        CHECK(differs > 0, "the order test values sum alike in both orders: the test could not fail");
        CHECK_OK(ptsc_world_allreduce(ctx, T, din, dout, NORD, MPI_DOUBLE, MPI_SUM));
        for (int k = 0; k < NORD; k++) {
            double w = ord_want(k, it);
            CHECK(memcmp(&dout[k], &w, sizeof w) == 0, "ordered sum [%d] = %a, want %a (documented order)", k,
                  dout[k], w);
        }

        /* Reduce to (R-1, T-1): the ordered sum, and MPI_MAX. */
        for (int k = 0; k < NORD; k++)
            dout[k] = -1.5;
        CHECK_OK(ptsc_world_reduce(ctx, T, din, dout, NORD, MPI_DOUBLE, MPI_SUM, rroot, troot));
        int root_here = me == rroot && t == troot;
        for (int k = 0; k < NORD; k++) {
            double w = root_here ? ord_want(k, it) : -1.5;
            CHECK(memcmp(&dout[k], &w, sizeof w) == 0, "reduce [%d] at %s = %a, want %a", k,
                  root_here ? "the root" : "a non-root", dout[k], w);
        }
        long long mx = ival(me, t, 0, it), mxo = -1;
        CHECK_OK(
            ptsc_world_reduce(ctx, T, &mx, root_here ? &mxo : NULL, 1, MPI_LONG_LONG, MPI_MAX, rroot, troot));
        if (root_here)
            CHECK(mxo == ival(R - 1, T - 1, 0, it), "reduce max = %lld, want %lld", mxo,
                  ival(R - 1, T - 1, 0, it));

        /* Bcast from (R-1, T-1) (and from (R/2, 1) on even rounds). */
        int br = it % 2 ? rroot : R / 2, bt = it % 2 ? troot : 1 % T;
        for (int k = 0; k < BIG; k++)
            lout[k] = me == br && t == bt ? ival(br, bt, k, it) * 7 : -1;
        CHECK_OK(ptsc_world_bcast(ctx, T, lout, BIG, MPI_LONG_LONG, br, bt));
        for (int k = 0; k < BIG; k++)
            if (lout[k] != ival(br, bt, k, it) * 7) {
                CHECK(0, "bcast from (%d, %d) [%d] = %lld, want %lld", br, bt, k, lout[k],
                      ival(br, bt, k, it) * 7);
                break;
            }

        /* Allgather: block r * T + t holds (r, t, it). */
        int mine[3] = {me, t, it};
        for (int i = 0; i < 3 * R * T; i++)
            gath[i] = -1;
        CHECK_OK(ptsc_world_allgather(ctx, T, mine, 3, MPI_INT, gath));
        for (int r = 0; r < R; r++)
            for (int s = 0; s < T; s++) {
                const int *b = gath + 3 * (r * T + s);
                CHECK(b[0] == r && b[1] == s && b[2] == it, "allgather block (%d, %d) holds (%d, %d, %d)", r,
                      s, b[0], b[1], b[2]);
            }

        /* Barrier: every thread of the rank arrived before any leaves. */
        __atomic_add_fetch(&barrier_count, 1, __ATOMIC_SEQ_CST);
        CHECK_OK(ptsc_world_barrier(ctx, T));
        int seen = __atomic_load_n(&barrier_count, __ATOMIC_SEQ_CST);
        CHECK(seen >= (it + 1) * T, "barrier round %d left with %d arrivals, want %d", it, seen,
              (it + 1) * T);
        CHECK_OK(ptsc_world_barrier(ctx, T)); /* nobody counts the next round before all read this one */
    }

    /* Disagreements: every participant gets a status, nobody hangs. */
    {
        /* The last rank takes part with one thread fewer. */
        int n = me == R - 1 ? T - 1 : T;
        long long x = 1, y = -7;
        int rc = ptsc_world_allreduce(ctx, n, &x, &y, 1, MPI_LONG_LONG, MPI_SUM);
        if (t < n) {
            CHECK(rc == PTSC_ERR_MISMATCH, "allreduce with thread counts %d / %d: %s: %s", T, T - 1,
                  ptsc_status_name(rc), ptsc_last_error());
            CHECK(rc != PTSC_ERR_MISMATCH || strstr(ptsc_last_error(), "thread count"),
                  "mismatch detail does not name the thread count: %s", ptsc_last_error());
            CHECK(y == -7, "a failed allreduce wrote its result (%lld)", y);
        } else {
            CHECK(rc == PTSC_ERR_THREAD, "thread %d outside a world call of %d: %s", t, n,
                  ptsc_status_name(rc));
        }
        rc = ptsc_world_bcast(ctx, n, &x, 1, MPI_LONG_LONG, 0, 0);
        if (t < n)
            CHECK(rc == PTSC_ERR_MISMATCH && strstr(ptsc_last_error(), "thread count"),
                  "bcast with thread counts %d / %d: %s: %s", T, T - 1, ptsc_status_name(rc),
                  ptsc_last_error());

            /* The thread left out must not run ahead into the next world call
             * while the others still make these two. */
#pragma omp barrier

        /* Threads of a rank disagree on the count. */
        long long v[2] = {1, 2}, w[2] = {0, 0};
        rc = ptsc_world_allreduce(ctx, T, v, w, t == T - 1 ? 2 : 1, MPI_LONG_LONG, MPI_SUM);
        CHECK(rc == PTSC_ERR_MISMATCH, "allreduce with counts 1 / 2 in a rank: %s: %s", ptsc_status_name(rc),
              ptsc_last_error());

        /* Thread 0 of rank 0 passes a NULL buffer: it gets its own status, everybody else a mismatch. */
        int bad = me == 0 && t == 0;
        rc = ptsc_world_reduce(ctx, T, bad ? NULL : v, w, 2, MPI_LONG_LONG, MPI_SUM, 0, 0);
        if (bad)
            CHECK(rc == PTSC_ERR_NULL_BUFFER, "reduce with a NULL buffer: %s: %s", ptsc_status_name(rc),
                  ptsc_last_error());
        else
            CHECK(rc == PTSC_ERR_MISMATCH, "reduce where thread (0, 0) failed: %s: %s", ptsc_status_name(rc),
                  ptsc_last_error());

        /* And the world works again. */
        x = 1;
        CHECK_OK(ptsc_world_allreduce(ctx, T, &x, &y, 1, MPI_LONG_LONG, MPI_SUM));
        CHECK(y == (long long)R * T, "allreduce after the failures = %lld, want %d", y, R * T);
    }
    free(lin), free(lout), free(din), free(dout), free(gath);
    return PTSC_OK;
}

/* pthreads attached by hand, the count given explicitly. */
typedef struct {
    int index;
    int rc;
    long long got;
} pt_arg_t;

static void *pt_body(void *p)
{
    pt_arg_t *a = p;
    ptsc_ctx_t *ctx = NULL;
    g_me = a->index;
    a->rc = ptsc_thread_attach(a->index, &ctx);
    if (a->rc != PTSC_OK)
        return NULL;
    long long x = ival(g_rank, a->index, 0, 0);
    a->rc = ptsc_world_allreduce(ctx, T, &x, &a->got, 1, MPI_LONG_LONG, MPI_SUM);
    int drc = ptsc_thread_detach();
    if (a->rc == PTSC_OK)
        a->rc = drc;
    return NULL;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    int rc = ptsc_omp_run(T, world_body, NULL);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());

    pthread_t th[64];
    pt_arg_t args[64];
    int n = T < 64 ? T : 64;
    for (int i = 0; i < n; i++) {
        args[i] = (pt_arg_t){i, PTSC_ERR_INTERNAL, -1};
        pthread_create(&th[i], NULL, pt_body, &args[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].rc == PTSC_OK, "pthread %d: %s", i, ptsc_status_name(args[i].rc));
        CHECK(n < T || args[i].got == isum(0, 0), "pthread %d: allreduce = %lld, want %lld", i, args[i].got,
              isum(0, 0));
    }
    return test_finish("mpi_world");
}
