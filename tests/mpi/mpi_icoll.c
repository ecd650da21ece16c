/*
 * Non-blocking lane collectives, every thread on its lane at once
 * (ptsc_omp_run): thread t of every rank runs the same sequence with
 * values that depend on (rank, thread, iteration, element), so traffic
 * mixed between lanes or between collectives shows up as wrong values.
 *
 *  - starts that must not block: rank 0 starts ibarrier, ibcast and
 *    iallreduce, checks that the barrier is not complete (the others have
 *    not started), and only then sends every other rank the token it
 *    waits for before starting its own; a start that waited for the other
 *    ranks would hang here;
 *  - every non-blocking collective (the v forms, scans and
 *    reduce_scatter_block included) in flight at once, with blocking
 *    collectives and a point-to-point ring exchange between the starts,
 *    completed in another order each iteration: waitall on a reversed
 *    array, waitany, test and testsome polling;
 *  - reductions with a non-commutative operation (2x2 matrix product
 *    modulo 2^32): the result must be M_0 M_1 ... M_{R-1} in rank order;
 *  - a blocking collective that must progress an earlier non-blocking one
 *    a peer waits for (rank 0: iallreduce, barrier, wait; others:
 *    iallreduce, wait, barrier);
 *  - ptsc_cancel of a collective leaves it to complete; ptsc_request_free
 *    of one in flight is refused with PTSC_ERR_PENDING;
 *  - collectives left in flight at the end of ptsc_omp_run are drained
 *    (it returns PTSC_ERR_PENDING) and the lanes work afterwards.
 */
#include "mpi_common.h"

#include <omp.h>

enum { NITER = 3, BIG = 20000, NA = 5 };

static int R, T;
static MPI_Op matmul_op;
static MPI_Datatype mat_type; /* four unsigned ints: a 2x2 matrix, row major */

/* inout = in x inout: MPI passes the earlier rank's operand as `in`. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const unsigned *a = in;
    unsigned *b = inout;
    (void)type;
    for (int i = 0; i < *len; i++, a += 4, b += 4) {
        unsigned c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                         a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

static void mat_of(int r, int t, int it, int k, unsigned *m)
{
    m[0] = 1u + (unsigned)r + (unsigned)k;
    m[1] = (unsigned)t + 2u * (unsigned)r + 1u;
    m[2] = (unsigned)it + 3u * (unsigned)r;
    m[3] = 1u + (unsigned)(k % 3);
}

/* M_lo x M_{lo+1} x ... x M_{hi-1}, element k. */
static void mat_want(int lo, int hi, int t, int it, int k, unsigned *m)
{
    unsigned x[4];
    int one = 1;
    m[0] = m[3] = 1;
    m[1] = m[2] = 0;
    for (int r = hi - 1; r >= lo; r--) {
        mat_of(r, t, it, k, x);
        matmul(x, m, &one, NULL);
    }
}

static int check_mats(const unsigned *got, int n, int lo, int hi, int t, int it, int k0, const char *what)
{
    for (int k = 0; k < n; k++) {
        unsigned w[4];
        mat_want(lo, hi, t, it, k0 + k, w);
        if (memcmp(w, &got[4 * k], sizeof w) != 0) {
            CHECK(0,
                  "%s it %d: matrix %d is (%u %u %u %u), expected (%u %u %u %u) (ranks folded out of order?)",
                  what, it, k, got[4 * k], got[4 * k + 1], got[4 * k + 2], got[4 * k + 3], w[0], w[1], w[2],
                  w[3]);
            return 0;
        }
    }
    return 1;
}

static int bval(int root, int t, int it, int k) { return root * 1000003 + t * 10007 + it * 101 + k; }

/* Complete n requests in the style of iteration `it`. */
static int complete_all(int n, ptsc_request_t *reqs, int it)
{
    if (it % 3 == 0) {
        ptsc_request_t rev[32];
        for (int i = 0; i < n; i++)
            rev[i] = reqs[n - 1 - i];
        CHECK_OK(ptsc_waitall(n, rev));
        for (int i = 0; i < n; i++) {
            CHECK(rev[i] == PTSC_REQUEST_NULL, "waitall left request %d set", i);
            reqs[i] = PTSC_REQUEST_NULL;
        }
    } else if (it % 3 == 1) {
        for (int left = n; left > 0; left--) {
            int idx = -1;
            CHECK_OK(ptsc_waitany(n, reqs, &idx, NULL));
            CHECK(idx >= 0 && idx < n && reqs[idx] == PTSC_REQUEST_NULL, "waitany index %d", idx);
        }
        int idx = 0;
        CHECK_OK(ptsc_waitany(n, reqs, &idx, NULL));
        CHECK(idx == PTSC_UNDEFINED, "waitany on completed requests gave index %d", idx);
    } else {
        /* Test from the last to the first, then testsome until none is left. */
        int left = n;
        for (int i = n - 1; i >= 0; i--) {
            int done = 0;
            CHECK_OK(ptsc_test(&reqs[i], &done));
            left -= done;
        }
        while (left > 0) {
            int outcount = 0, indices[32];
            CHECK_OK(ptsc_testsome(n, reqs, &outcount, indices, NULL));
            CHECK(outcount != PTSC_UNDEFINED, "testsome: undefined with %d requests left", left);
            left -= outcount;
        }
        int flag = 0;
        CHECK_OK(ptsc_testall(n, reqs, &flag));
        CHECK(flag == 1, "testall after every request completed: flag %d", flag);
    }
    return PTSC_OK;
}

/* Starts that must not wait for the other ranks. */
static int no_block(ptsc_ctx_t *ctx, int t)
{
    const int me = g_rank;
    int token = -1, buf[NA], sum[NA], in[NA];
    ptsc_request_t req[3];
    for (int k = 0; k < NA; k++) {
        buf[k] = me == 0 ? bval(0, t, 99, k) : -1;
        in[k] = (me + 1) * (k + 1) + t;
        sum[k] = -1;
    }
    if (me == 0) {
        CHECK_OK(ptsc_ibarrier(ctx, &req[0]));
        CHECK_OK(ptsc_ibcast(ctx, buf, NA, MPI_INT, 0, &req[1]));
        CHECK_OK(ptsc_iallreduce(ctx, in, sum, NA, MPI_INT, MPI_SUM, &req[2]));
        if (R > 1) {
            int done = 1;
            ptsc_request_t copy = req[0];
            CHECK_OK(ptsc_test(&req[0], &done));
            CHECK(done == 0, "ibarrier completed before the other ranks started theirs");
            /* Not cancellable, and not freed while in flight. */
            CHECK_OK(ptsc_cancel(&req[0]));
            int rc = ptsc_request_free(&req[0]);
            CHECK(rc == PTSC_ERR_PENDING && req[0] == copy,
                  "ptsc_request_free of a collective in flight returned %s (expected PTSC_ERR_PENDING)",
                  ptsc_status_name(rc));
        }
        for (int p = 1; p < R; p++) {
            token = 500 + p * 10 + t;
            CHECK_OK(ptsc_send(ctx, &token, 1, MPI_INT, p, t, 1));
        }
    } else {
        CHECK_OK(ptsc_recv(ctx, &token, 1, MPI_INT, 0, t, 1));
        CHECK(token == 500 + me * 10 + t, "token %d, expected %d", token, 500 + me * 10 + t);
        CHECK_OK(ptsc_ibarrier(ctx, &req[0]));
        CHECK_OK(ptsc_ibcast(ctx, buf, NA, MPI_INT, 0, &req[1]));
        CHECK_OK(ptsc_iallreduce(ctx, in, sum, NA, MPI_INT, MPI_SUM, &req[2]));
    }
    CHECK_OK(ptsc_wait(&req[2]));
    CHECK_OK(ptsc_waitall(2, req));
    for (int k = 0; k < NA; k++) {
        CHECK(buf[k] == bval(0, t, 99, k), "ibcast after the token: element %d is %d", k, buf[k]);
        int want = R * (R + 1) / 2 * (k + 1) + R * t;
        CHECK(sum[k] == want, "iallreduce after the token: element %d is %d, expected %d", k, sum[k], want);
    }
    return PTSC_OK;
}

/* A blocking collective progresses an earlier non-blocking one that a peer
 * is waiting for. */
static int blocking_progresses(ptsc_ctx_t *ctx, int t)
{
    unsigned in[4 * NA], out[4 * NA];
    ptsc_request_t req;
    for (int k = 0; k < NA; k++)
        mat_of(g_rank, t, 7, k, &in[4 * k]);
    CHECK_OK(ptsc_iallreduce(ctx, in, out, NA, mat_type, matmul_op, &req));
    if (g_rank == 0) {
        CHECK_OK(ptsc_barrier(ctx));
        CHECK_OK(ptsc_wait(&req));
    } else {
        CHECK_OK(ptsc_wait(&req));
        CHECK_OK(ptsc_barrier(ctx));
    }
    check_mats(out, NA, 0, R, t, 7, 0, "iallreduce across a blocking barrier");
    return PTSC_OK;
}

static int body(ptsc_ctx_t *ctx, void *arg)
{
    (void)arg;
    int t = -1;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    const int me = g_rank;
    CHECK_OK(no_block(ctx, t));
    CHECK_OK(blocking_progresses(ctx, t));

    int *bc = malloc(sizeof(int) * BIG);
    unsigned red[4 * NA], all[4 * NA], mine[4 * NA], scan[4 * NA], exs[4 * NA];
    unsigned *rsb_in = malloc(sizeof(unsigned) * 4 * 2 * (size_t)R), rsb_out[4 * 2];
    int ag[3 * 64], a2a_s[3 * 64], a2a_r[3 * 64], g[3 * 64], sc_s[3 * 64], sc_r[3];
    int gv_s[64], gv_r[256], gv_counts[64], gv_displs[64], sv_r[64], agv_r[256];
    int av_s[256], av_r[256], av_sc[64], av_sd[64], av_rc[64], av_rd[64];
    int blk_in[NA], blk_out[NA];
    CHECK(R <= 60, "at most 60 ranks (%d)", R);

    for (int it = 0; it < NITER; it++) {
        ptsc_request_t q[16];
        int nq = 0, root = (t + it) % R, groot = (t + it + 1) % R;
        int n = it == 1 ? BIG : 17 + t;

        /* Inputs and poisoned outputs. */
        for (int k = 0; k < n; k++)
            bc[k] = me == root ? bval(root, t, it, k) : -1;
        for (int k = 0; k < NA; k++) {
            mat_of(me, t, it, k, &mine[4 * k]);
            blk_in[k] = (me + 1) * 10 + t + it;
        }
        memset(red, 0xff, sizeof red);
        memset(all, 0xff, sizeof all);
        memset(scan, 0xff, sizeof scan);
        memset(exs, 0xee, sizeof exs);
        memset(rsb_out, 0xff, sizeof rsb_out);
        for (int i = 0; i < R; i++)
            for (int k = 0; k < 2; k++)
                mat_of(me, t, it, i * 2 + k, &rsb_in[4 * (i * 2 + k)]);
        int mine3[3] = {me, t, it};
        for (int d = 0; d < R; d++) {
            a2a_s[3 * d] = me * 100 + d;
            a2a_s[3 * d + 1] = t;
            a2a_s[3 * d + 2] = it;
            sc_s[3 * d] = me * 1000 + d;
            sc_s[3 * d + 1] = t;
            sc_s[3 * d + 2] = it;
        }
        for (int k = 0; k < 3 * R; k++)
            ag[k] = a2a_r[k] = g[k] = -1;
        sc_r[0] = sc_r[1] = sc_r[2] = -1;
        /* v forms: rank r's block has r + 1 elements, one element of gap
         * between blocks (which must keep its -7). */
        int at = 0, av_at = 0;
        for (int r = 0; r < R; r++) {
            gv_counts[r] = r + 1;
            gv_displs[r] = at;
            at += r + 2;
            av_sc[r] = (me + r) % 3 + 1;
            av_rc[r] = (r + me) % 3 + 1;
            av_sd[r] = 4 * r;
            av_rd[r] = av_at;
            av_at += av_rc[r] + 1;
            for (int j = 0; j < av_sc[r]; j++)
                av_s[4 * r + j] = me * 1000 + r * 10 + j + it;
        }
        for (int j = 0; j <= me; j++)
            gv_s[j] = me * 100 + j + t + it;
        for (int k = 0; k < at; k++)
            gv_r[k] = agv_r[k] = -7;
        for (int k = 0; k < av_at; k++)
            av_r[k] = -7;
        for (int j = 0; j < 64; j++)
            sv_r[j] = -7;
        int sv_src[256]; /* the root scatters from blocks laid out as gatherv's */
        if (me == root)
            for (int r = 0; r < R; r++)
                for (int j = 0; j <= r; j++)
                    sv_src[gv_displs[r] + j] = r * 100 + j + t + it + 5000;

        /* Start everything, with blocking collectives and point-to-point
         * traffic between the starts. */
        CHECK_OK(ptsc_ibcast(ctx, bc, n, MPI_INT, root, &q[nq++]));
        CHECK_OK(ptsc_ireduce(ctx, mine, red, NA, mat_type, matmul_op, root, &q[nq++]));
        CHECK_OK(ptsc_iallreduce(ctx, mine, all, NA, mat_type, matmul_op, &q[nq++]));
        CHECK_OK(ptsc_iscan(ctx, mine, scan, NA, mat_type, matmul_op, &q[nq++]));
        CHECK_OK(ptsc_iexscan(ctx, mine, exs, NA, mat_type, matmul_op, &q[nq++]));
        CHECK_OK(ptsc_allreduce(ctx, blk_in, blk_out, NA, MPI_INT, MPI_SUM));
        for (int k = 0; k < NA; k++) {
            int want = R * (R + 1) / 2 * 10 + R * (t + it);
            CHECK(blk_out[k] == want, "blocking allreduce among non-blocking ones, it %d: %d, expected %d",
                  it, blk_out[k], want);
        }
        CHECK_OK(ptsc_ireduce_scatter_block(ctx, rsb_in, rsb_out, 2, mat_type, matmul_op, &q[nq++]));
        CHECK_OK(ptsc_iallgather(ctx, mine3, 3, MPI_INT, ag, 3, MPI_INT, &q[nq++]));
        CHECK_OK(ptsc_ialltoall(ctx, a2a_s, 3, MPI_INT, a2a_r, 3, MPI_INT, &q[nq++]));
        {
            /* A ring exchange while all of them are in flight. */
            int out = 9000 + me * 10 + t + it, inv = -1, from = (me - 1 + R) % R;
            ptsc_request_t s;
            CHECK_OK(ptsc_isend(ctx, &out, 1, MPI_INT, (me + 1) % R, t, 100 + it, &s));
            CHECK_OK(ptsc_recv(ctx, &inv, 1, MPI_INT, from, t, 100 + it));
            CHECK_OK(ptsc_wait(&s));
            CHECK(inv == 9000 + from * 10 + t + it, "ring message among collectives: %d", inv);
        }
        CHECK_OK(ptsc_igather(ctx, mine3, 3, MPI_INT, g, 3, MPI_INT, groot, &q[nq++]));
        CHECK_OK(ptsc_iscatter(ctx, sc_s, 3, MPI_INT, sc_r, 3, MPI_INT, groot, &q[nq++]));
        CHECK_OK(
            ptsc_igatherv(ctx, gv_s, me + 1, MPI_INT, gv_r, gv_counts, gv_displs, MPI_INT, root, &q[nq++]));
        CHECK_OK(ptsc_iscatterv(ctx, sv_src, gv_counts, gv_displs, MPI_INT, sv_r, me + 1, MPI_INT, root,
                                &q[nq++]));
        CHECK_OK(
            ptsc_iallgatherv(ctx, gv_s, me + 1, MPI_INT, agv_r, gv_counts, gv_displs, MPI_INT, &q[nq++]));
        CHECK_OK(ptsc_ialltoallv(ctx, av_s, av_sc, av_sd, MPI_INT, av_r, av_rc, av_rd, MPI_INT, &q[nq++]));
        CHECK_OK(ptsc_ibarrier(ctx, &q[nq++]));
        /* Cancelling a collective changes nothing. */
        CHECK_OK(ptsc_cancel(&q[0]));
        CHECK_OK(complete_all(nq, q, it));

        /* Check. */
        for (int k = 0; k < n; k++)
            if (bc[k] != bval(root, t, it, k)) {
                CHECK(0, "ibcast it %d root %d: element %d of %d is %d, expected %d", it, root, k, n, bc[k],
                      bval(root, t, it, k));
                break;
            }
        if (me == root)
            check_mats(red, NA, 0, R, t, it, 0, "ireduce");
        check_mats(all, NA, 0, R, t, it, 0, "iallreduce");
        check_mats(scan, NA, 0, me + 1, t, it, 0, "iscan");
        if (me > 0)
            check_mats(exs, NA, 0, me, t, it, 0, "iexscan");
        check_mats(rsb_out, 2, 0, R, t, it, me * 2, "ireduce_scatter_block");
        for (int r = 0; r < R; r++) {
            CHECK(ag[3 * r] == r && ag[3 * r + 1] == t && ag[3 * r + 2] == it,
                  "iallgather it %d: block %d is (%d,%d,%d)", it, r, ag[3 * r], ag[3 * r + 1], ag[3 * r + 2]);
            CHECK(a2a_r[3 * r] == r * 100 + me && a2a_r[3 * r + 1] == t && a2a_r[3 * r + 2] == it,
                  "ialltoall it %d: block from %d is (%d,%d,%d)", it, r, a2a_r[3 * r], a2a_r[3 * r + 1],
                  a2a_r[3 * r + 2]);
            if (me == groot)
                CHECK(g[3 * r] == r && g[3 * r + 1] == t && g[3 * r + 2] == it,
                      "igather it %d: block %d is (%d,%d,%d)", it, r, g[3 * r], g[3 * r + 1], g[3 * r + 2]);
            for (int j = 0; j <= r + 1; j++) {
                int want = j <= r ? r * 100 + j + t + it : -7;
                if (me == root)
                    CHECK(gv_r[gv_displs[r] + j] == want,
                          "igatherv it %d: rank %d element %d is %d, expected %d", it, r, j,
                          gv_r[gv_displs[r] + j], want);
                CHECK(agv_r[gv_displs[r] + j] == want,
                      "iallgatherv it %d: rank %d element %d is %d, expected %d", it, r, j,
                      agv_r[gv_displs[r] + j], want);
            }
            for (int j = 0; j <= av_rc[r]; j++) {
                int want = j < av_rc[r] ? r * 1000 + me * 10 + j + it : -7;
                CHECK(av_r[av_rd[r] + j] == want, "ialltoallv it %d: from %d element %d is %d, expected %d",
                      it, r, j, av_r[av_rd[r] + j], want);
            }
        }
        CHECK(sc_r[0] == groot * 1000 + me && sc_r[1] == t && sc_r[2] == it, "iscatter it %d: (%d,%d,%d)", it,
              sc_r[0], sc_r[1], sc_r[2]);
        for (int j = 0; j <= me + 1; j++) {
            int want = j <= me ? me * 100 + j + t + it + 5000 : -7;
            CHECK(sv_r[j] == want, "iscatterv it %d: element %d is %d, expected %d", it, j, sv_r[j], want);
        }
    }
    free(bc);
    free(rsb_in);
    return PTSC_OK;
}

/* Leave an ibarrier and an iallreduce in flight: ptsc_omp_run drains them. */
static int leave_pending(ptsc_ctx_t *ctx, void *arg)
{
    static _Thread_local int in[2], out[2];
    ptsc_request_t a, b;
    (void)arg;
    in[0] = in[1] = 1;
    CHECK_OK(ptsc_ibarrier(ctx, &a));
    CHECK_OK(ptsc_iallreduce(ctx, in, out, 2, MPI_INT, MPI_SUM, &b));
    return PTSC_OK;
}

static int after_drain(ptsc_ctx_t *ctx, void *arg)
{
    int t = -1, one = 1, sum = 0;
    (void)arg;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    ptsc_request_t r;
    CHECK_OK(ptsc_iallreduce(ctx, &one, &sum, 1, MPI_INT, MPI_SUM, &r));
    CHECK_OK(ptsc_wait(&r));
    CHECK(sum == R, "iallreduce after a drain: %d, expected %d", sum, R);
    CHECK_OK(ptsc_barrier(ctx));
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    MPI_Op_create(matmul, 0, &matmul_op);
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mat_type);
    MPI_Type_commit(&mat_type);
    int rc = ptsc_omp_run(T, body, NULL);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    rc = ptsc_omp_run(T, leave_pending, NULL);
    CHECK(rc == PTSC_ERR_PENDING,
          "ptsc_omp_run with collectives left in flight: %s (expected PTSC_ERR_PENDING)",
          ptsc_status_name(rc));
    rc = ptsc_omp_run(T, after_drain, NULL);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run after the drain: %s: %s", ptsc_status_name(rc),
          ptsc_last_error());
    MPI_Type_free(&mat_type);
    MPI_Op_free(&matmul_op);
    return test_finish("mpi_icoll");
}
