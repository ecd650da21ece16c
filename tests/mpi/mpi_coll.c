/*
 * Collectives on every thread's lane at once, from ptsc_omp_run: thread t
 * of every rank runs barrier, bcast, reduce, allreduce, allgather and
 * alltoall with values that depend on t, while the other threads run
 * theirs, so traffic mixed between lanes shows up as wrong values. A
 * point-to-point receive stays posted across the collectives and must get
 * the one message meant for it, not collective traffic.
 *
 * Reductions with a non-commutative operation (composition of affine maps
 * x -> a x + b modulo 2^32, MPI_Op_create with commute = 0) must fold the
 * ranks in rank order, x_0 op x_1 op ... op x_{R-1}, in both PTSC_COMM modes.
 */
#include "mpi_common.h"

#include <omp.h>

enum { NITER = 6, BIG = 20000 };

static int R, T;
static MPI_Op compose_op;
static MPI_Datatype affine_type; /* two unsigned ints: (a, b) */

/* inout = in o inout, as MPI applies a user operation: in is the left operand. */
static void compose(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const unsigned *f = in;
    unsigned *g = inout;
    (void)type;
    for (int i = 0; i < *len; i++, f += 2, g += 2) {
        unsigned a = f[0] * g[0], b = f[0] * g[1] + f[1];
        g[0] = a;
        g[1] = b;
    }
}

static void affine_of(int r, int t, int it, int k, unsigned *ab)
{
    ab[0] = 2u * (unsigned)r + 3u + (unsigned)t;
    ab[1] = 7u * (unsigned)r + (unsigned)it + (unsigned)k;
}

/* x_0 o x_1 o ... o x_{R-1}, element k. */
static void affine_want(int t, int it, int k, unsigned *ab)
{
    affine_of(R - 1, t, it, k, ab);
    for (int r = R - 2; r >= 0; r--) {
        unsigned x[2];
        int one = 1;
        affine_of(r, t, it, k, x);
        compose(x, ab, &one, NULL);
    }
}

static int coll_body(ptsc_ctx_t *ctx, void *arg)
{
    int t = -1;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    const int me = g_rank;
    int *ibuf = malloc(sizeof(int) * (size_t)(BIG > 3 * R ? BIG : 3 * R));
    int *obuf = malloc(sizeof(int) * (size_t)(BIG > 3 * R ? BIG : 3 * R));
    long long *lbuf = malloc(sizeof(long long) * 8), *lres = malloc(sizeof(long long) * 8);
    double dres[2];

    /* A p2p message from (me+1, t) to (me, t) with tag 0: posted now,
     * sent only after all collectives. */
    int p2p_in = -1, p2p_out = 7000 + me * 10 + t;
    ptsc_request_t pending = PTSC_REQUEST_NULL;
    int from = (me + 1) % R, to = (me - 1 + R) % R;
    CHECK_OK(ptsc_irecv(ctx, &p2p_in, 1, MPI_INT, from, t, 0, &pending));

    for (int it = 0; it < NITER; it++) {
        CHECK_OK(ptsc_barrier(ctx));

        /* bcast from a root that changes with thread and iteration. */
        int root = (t + it) % R, n = it % 2 ? BIG : 17 + t;
        for (int k = 0; k < n; k++)
            ibuf[k] = me == root ? root * 1000003 + t * 10007 + it * 101 + k : -1;
        CHECK_OK(ptsc_bcast(ctx, ibuf, n, MPI_INT, root));
        for (int k = 0; k < n; k++)
            if (ibuf[k] != root * 1000003 + t * 10007 + it * 101 + k) {
                CHECK(0, "bcast it %d root %d: element %d of %d is %d, expected %d", it, root, k, n, ibuf[k],
                      root * 1000003 + t * 10007 + it * 101 + k);
                break;
            }

        /* reduce (sum) to another root. */
        root = (t + it + 1) % R;
        n = it % 3 == 2 ? BIG : 5;
        for (int k = 0; k < n; k++)
            obuf[k] = (me + 1) * (t + 1) * (k % 100 + 1) + it;
        for (int k = 0; k < n; k++)
            ibuf[k] = -1;
        CHECK_OK(ptsc_reduce(ctx, obuf, ibuf, n, MPI_INT, MPI_SUM, root));
        if (me == root)
            for (int k = 0; k < n; k++) {
                int want = R * (R + 1) / 2 * (t + 1) * (k % 100 + 1) + R * it;
                if (ibuf[k] != want) {
                    CHECK(0, "reduce it %d: element %d is %d, expected %d", it, k, ibuf[k], want);
                    break;
                }
            }

        /* allreduce: sum and max of 64-bit integers, sum of doubles. */
        for (int k = 0; k < 8; k++)
            lbuf[k] = (long long)(me + 1) * 1000000007LL * (k + 1) + t * 13 + it;
        CHECK_OK(ptsc_allreduce(ctx, lbuf, lres, 8, MPI_LONG_LONG, MPI_SUM));
        for (int k = 0; k < 8; k++) {
            long long want =
                (long long)R * (R + 1) / 2 * 1000000007LL * (k + 1) + (long long)R * (t * 13 + it);
            CHECK(lres[k] == want, "allreduce sum it %d: element %d is %lld, expected %lld", it, k, lres[k],
                  want);
        }
        CHECK_OK(ptsc_allreduce(ctx, lbuf, lres, 8, MPI_LONG_LONG, MPI_MAX));
        for (int k = 0; k < 8; k++) {
            long long want = (long long)R * 1000000007LL * (k + 1) + t * 13 + it;
            CHECK(lres[k] == want, "allreduce max it %d: element %d is %lld, expected %lld", it, k, lres[k],
                  want);
        }
        double dv[2] = {0.5 * (me + 1) + t, (double)it};
        CHECK_OK(ptsc_allreduce(ctx, dv, dres, 2, MPI_DOUBLE, MPI_SUM));
        CHECK(dres[0] == 0.5 * R * (R + 1) / 2 + (double)R * t && dres[1] == (double)R * it,
              "allreduce double it %d: %g %g", it, dres[0], dres[1]);

        /* reduce and allreduce with the non-commutative composition. */
        {
            enum { NA = 33 };
            unsigned in[2 * NA], out[2 * NA], want[2];
            for (int k = 0; k < NA; k++)
                affine_of(me, t, it, k, &in[2 * k]);
            memset(out, 0xff, sizeof out);
            root = (t + it) % R;
            if (it % 2)
                CHECK_OK(ptsc_allreduce(ctx, in, out, NA, affine_type, compose_op));
            else
                CHECK_OK(ptsc_reduce(ctx, in, out, NA, affine_type, compose_op, root));
            if (it % 2 || me == root)
                for (int k = 0; k < NA; k++) {
                    affine_want(t, it, k, want);
                    if (out[2 * k] != want[0] || out[2 * k + 1] != want[1]) {
                        CHECK(0,
                              "%s with a non-commutative op, it %d: element %d is (%u,%u), expected (%u,%u) "
                              "(ranks folded out of order?)",
                              it % 2 ? "allreduce" : "reduce", it, k, out[2 * k], out[2 * k + 1], want[0],
                              want[1]);
                        break;
                    }
                }
        }

        /* allgather: each rank contributes (rank, thread, iteration). */
        int mine[3] = {me, t, it};
        for (int k = 0; k < 3 * R; k++)
            ibuf[k] = -1;
        CHECK_OK(ptsc_allgather(ctx, mine, 3, MPI_INT, ibuf, 3, MPI_INT));
        for (int r = 0; r < R; r++)
            CHECK(ibuf[3 * r] == r && ibuf[3 * r + 1] == t && ibuf[3 * r + 2] == it,
                  "allgather it %d: block %d is (%d,%d,%d), expected (%d,%d,%d)", it, r, ibuf[3 * r],
                  ibuf[3 * r + 1], ibuf[3 * r + 2], r, t, it);

        /* alltoall: the block for rank d names (me, d, t, it). */
        for (int d = 0; d < R; d++) {
            obuf[3 * d] = me * 100 + d;
            obuf[3 * d + 1] = t;
            obuf[3 * d + 2] = it;
        }
        for (int k = 0; k < 3 * R; k++)
            ibuf[k] = -1;
        CHECK_OK(ptsc_alltoall(ctx, obuf, 3, MPI_INT, ibuf, 3, MPI_INT));
        for (int s = 0; s < R; s++)
            CHECK(ibuf[3 * s] == s * 100 + me && ibuf[3 * s + 1] == t && ibuf[3 * s + 2] == it,
                  "alltoall it %d: block from %d is (%d,%d,%d), expected (%d,%d,%d)", it, s, ibuf[3 * s],
                  ibuf[3 * s + 1], ibuf[3 * s + 2], s * 100 + me, t, it);
    }

    int done = -1;
    CHECK_OK(ptsc_test(&pending, &done));
    CHECK(done == 0, "the p2p receive posted before the collectives completed before its send (got %d)",
          p2p_in);
    CHECK_OK(ptsc_barrier(ctx));
    CHECK_OK(ptsc_send(ctx, &p2p_out, 1, MPI_INT, to, t, 0));
    CHECK_OK(ptsc_wait(&pending));
    CHECK(p2p_in == 7000 + from * 10 + t, "p2p across collectives: got %d, expected %d", p2p_in,
          7000 + from * 10 + t);

    ptsc_stats_t st;
    CHECK_OK(ptsc_ctx_stats(ctx, &st));
    CHECK(st.collectives >= (uint64_t)(NITER * 8), "stats: %llu collectives, expected at least %d",
          (unsigned long long)st.collectives, NITER * 8);
    free(ibuf);
    free(obuf);
    free(lbuf);
    free(lres);
    (void)arg;
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    MPI_Op_create(compose, 0, &compose_op);
    MPI_Type_contiguous(2, MPI_UNSIGNED, &affine_type);
    MPI_Type_commit(&affine_type);
    int rc = ptsc_omp_run(T, coll_body, NULL);
    MPI_Type_free(&affine_type);
    MPI_Op_free(&compose_op);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    return test_finish("mpi_coll");
}
