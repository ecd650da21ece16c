/*
 * The request calls beside wait/test (waitany, testall, testsome, cancel,
 * request_free) and the collectives beside those of mpi_coll (gather,
 * scatter, their v forms, allgatherv, alltoallv, reduce_scatter_block,
 * scan, exscan), on every thread's lane at once from ptsc_omp_run.
 *
 * Thread t of rank r talks to thread t of the next and previous ranks.
 * Requests are made to complete out of order by holding messages back until
 * the receiver acknowledges (tag ACK), so which request completes first is
 * known. Collectives use uneven counts, gaps between blocks (which must keep
 * their contents) and a non-commutative operation (composition of affine
 * maps modulo 2^32), so a fold out of rank order shows.
 */
#include "mpi_common.h"

#include <omp.h>

enum { NITER = 3, ACK = 99, BIGW = 24000, SENTINEL = -7 };

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
    ab[0] = 2u * (unsigned)r + 3u + (unsigned)t + 4u * (unsigned)k;
    ab[1] = 7u * (unsigned)r + (unsigned)it + (unsigned)k;
}

/* x_lo o ... o x_hi, element k. */
static void affine_fold(int lo, int hi, int t, int it, int k, unsigned *ab)
{
    affine_of(hi, t, it, k, ab);
    for (int r = hi - 1; r >= lo; r--) {
        unsigned x[2];
        int one = 1;
        affine_of(r, t, it, k, x);
        compose(x, ab, &one, NULL);
    }
}

static int val(int r, int t, int it, int k) { return ((r * 31 + t) * 97 + it) * 1000 + k; }

static int ack_send(ptsc_ctx_t *ctx, int rank, int t, int v)
{
    CHECK_OK(ptsc_send(ctx, &v, 1, MPI_INT, rank, t, ACK));
    return PTSC_OK;
}

static int ack_recv(ptsc_ctx_t *ctx, int rank, int t, int want)
{
    int v = -1;
    CHECK_OK(ptsc_recv(ctx, &v, 1, MPI_INT, rank, t, ACK));
    CHECK(v == want, "ack from rank %d: %d, expected %d", rank, v, want);
    return PTSC_OK;
}

/* Point-to-point: requests completing out of order, cancel, free. */
static int requests(ptsc_ctx_t *ctx, int t, int it)
{
    const int me = g_rank, to = (me + 1) % R, from = (me - 1 + R) % R;
    enum { W = HDR + 12 };
    uint32_t out[4][W], in[4][W];
    ptsc_request_t rr[4], sr[4] = {0};
    ptsc_info_t info;
    int index = -2, flag = -1, outcount = -2, idx[4];

    /* All NULL: PTSC_UNDEFINED. */
    for (int i = 0; i < 4; i++)
        rr[i] = PTSC_REQUEST_NULL;
    CHECK_OK(ptsc_waitany(4, rr, &index, &info));
    CHECK(index == PTSC_UNDEFINED, "waitany over NULL requests: index %d", index);
    CHECK_OK(ptsc_testsome(4, rr, &outcount, idx, NULL));
    CHECK(outcount == PTSC_UNDEFINED, "testsome over NULL requests: outcount %d", outcount);
    CHECK_OK(ptsc_testall(4, rr, &flag));
    CHECK(flag == 1, "testall over NULL requests: flag %d", flag);

    /* waitany: tags 10, 11, 12 posted, sent 12, then 11, then 10. */
    for (int i = 0; i < 3; i++) {
        memset(in[i], 0, sizeof in[i]);
        CHECK_OK(ptsc_irecv(ctx, in[i], W, MPI_UNSIGNED, from, t, 10 + i, &rr[i]));
    }
    for (int step = 0; step < 3; step++) {
        int tag = 12 - step, i = tag - 10;
        fill(out[i], W, me, t, to, t, tag + 100 * it);
        CHECK_OK(ptsc_isend(ctx, out[i], W, MPI_UNSIGNED, to, t, tag, &sr[i]));
        CHECK_OK(ptsc_waitany(3, rr, &index, &info));
        CHECK(index == i, "waitany step %d: index %d, expected %d (only tag %d was sent)", step, index, i,
              tag);
        if (index >= 0 && index < 3) {
            CHECK(rr[index] == PTSC_REQUEST_NULL, "waitany left request %d set", index);
            VERIFY(in[index], W, from, t, me, t, 10 + index + 100 * it);
        }
        CHECK(info.tag == tag && info.rank == from && info.thread == t && info.error == PTSC_OK &&
                  info.bytes == sizeof in[0],
              "waitany info: tag %d rank %d thread %d error %d bytes %zu", info.tag, info.rank, info.thread,
              info.error, info.bytes);
        CHECK_OK(ack_send(ctx, from, t, step));
        CHECK_OK(ack_recv(ctx, to, t, step));
    }
    CHECK_OK(ptsc_waitall(3, sr));

    /* testsome: tags 30..33 posted, 33 and 31 sent; testall stays 0 until 30
     * and 32 come, and touches nothing meanwhile. */
    for (int i = 0; i < 4; i++) {
        memset(in[i], 0, sizeof in[i]);
        CHECK_OK(ptsc_irecv(ctx, in[i], W, MPI_UNSIGNED, from, t, 30 + i, &rr[i]));
    }
    for (int i = 3; i >= 1; i -= 2) {
        fill(out[i], W, me, t, to, t, 30 + i + 100 * it);
        CHECK_OK(ptsc_isend(ctx, out[i], W, MPI_UNSIGNED, to, t, 30 + i, &sr[i]));
    }
    int got = 0, seen[4] = {0};
    ptsc_info_t infos[4];
    for (long spins = 0; got < 2 && spins < 100000000L; spins++) {
        CHECK_OK(ptsc_testsome(4, rr, &outcount, idx, infos));
        for (int k = 0; k < outcount; k++) {
            int i = idx[k];
            CHECK(i == 1 || i == 3, "testsome completed request %d, which nothing was sent to", i);
            if (i < 0 || i > 3)
                continue;
            seen[i]++;
            got++;
            CHECK(infos[k].tag == 30 + i && infos[k].rank == from && infos[k].error == PTSC_OK,
                  "testsome info %d: tag %d rank %d error %d", k, infos[k].tag, infos[k].rank,
                  infos[k].error);
            VERIFY(in[i], W, from, t, me, t, 30 + i + 100 * it);
        }
    }
    CHECK(got == 2 && seen[1] == 1 && seen[3] == 1, "testsome: %d completions (%d of 1, %d of 3)", got,
          seen[1], seen[3]);
    CHECK_OK(ptsc_testall(4, rr, &flag));
    CHECK(flag == 0 && rr[0] && rr[2], "testall with two receives unmatched: flag %d", flag);
    CHECK_OK(ack_send(ctx, from, t, 30));
    CHECK_OK(ack_recv(ctx, to, t, 30));
    for (int i = 0; i <= 2; i += 2) {
        fill(out[i], W, me, t, to, t, 30 + i + 100 * it);
        CHECK_OK(ptsc_isend(ctx, out[i], W, MPI_UNSIGNED, to, t, 30 + i, &sr[i]));
    }
    flag = 0;
    for (long spins = 0; !flag && spins < 100000000L; spins++)
        CHECK_OK(ptsc_testall(4, rr, &flag));
    CHECK(flag == 1 && !rr[0] && !rr[1] && !rr[2] && !rr[3], "testall never completed");
    VERIFY(in[0], W, from, t, me, t, 30 + 100 * it);
    VERIFY(in[2], W, from, t, me, t, 32 + 100 * it);
    CHECK_OK(ptsc_waitall(4, sr));

    /* cancel: an unmatched receive is cancelled and leaves its message to
     * the next receive; a send and a matched receive complete normally. */
    memset(in[0], 0xab, sizeof in[0]);
    CHECK_OK(ptsc_irecv(ctx, in[0], W, MPI_UNSIGNED, from, t, 40, &rr[0]));
    CHECK_OK(ptsc_cancel(&rr[0]));
    CHECK(rr[0] != PTSC_REQUEST_NULL, "ptsc_cancel reset the handle");
    int rc = ptsc_wait_info(&rr[0], &info);
    CHECK(rc == PTSC_ERR_CANCELLED && info.error == PTSC_ERR_CANCELLED && rr[0] == PTSC_REQUEST_NULL,
          "wait of a cancelled receive: %s (info.error %d): %s", ptsc_status_name(rc), info.error,
          ptsc_last_error());
    CHECK(in[0][0] == 0xabababab && in[0][W - 1] == 0xabababab, "a cancelled receive wrote its buffer");
    CHECK_OK(ack_send(ctx, from, t, 40));
    CHECK_OK(ack_recv(ctx, to, t, 40));
    fill(out[0], W, me, t, to, t, 40 + 100 * it);
    fill(out[1], W, me, t, to, t, 41 + 100 * it);
    CHECK_OK(ptsc_isend(ctx, out[0], W, MPI_UNSIGNED, to, t, 40, &sr[0]));
    CHECK_OK(ptsc_isend(ctx, out[1], W, MPI_UNSIGNED, to, t, 41, &sr[1]));
    CHECK_OK(ptsc_cancel(&sr[1])); /* not cancellable: still delivered */
    CHECK_OK(ptsc_recv(ctx, in[0], W, MPI_UNSIGNED, from, t, 40));
    VERIFY(in[0], W, from, t, me, t, 40 + 100 * it);
    CHECK_OK(ptsc_probe(ctx, from, t, 41, &info)); /* the message is there: the receive matches it */
    CHECK_OK(ptsc_irecv(ctx, in[1], W, MPI_UNSIGNED, from, t, 41, &rr[1]));
    CHECK_OK(ptsc_cancel(&rr[1]));
    CHECK_OK(ptsc_wait(&rr[1]));
    VERIFY(in[1], W, from, t, me, t, 41 + 100 * it);
    CHECK_OK(ptsc_waitall(2, sr));

    /* request_free: a large send freed in flight still arrives whole; a
     * receive in flight is refused and stays valid. */
    uint32_t *big = malloc(sizeof *big * BIGW), *bigin = malloc(sizeof *bigin * BIGW);
    fill(big, BIGW, me, t, to, t, 50 + 100 * it);
    CHECK_OK(ptsc_irecv(ctx, in[2], W, MPI_UNSIGNED, from, t, 51, &rr[2]));
    rc = ptsc_request_free(&rr[2]);
    CHECK(rc == PTSC_ERR_PENDING && rr[2] != PTSC_REQUEST_NULL, "request_free of a receive: %s",
          ptsc_status_name(rc));
    CHECK_OK(ptsc_isend(ctx, big, BIGW, MPI_UNSIGNED, to, t, 50, &sr[0]));
    CHECK_OK(ptsc_request_free(&sr[0]));
    CHECK(sr[0] == PTSC_REQUEST_NULL, "request_free left the handle set");
    CHECK_OK(ptsc_recv(ctx, bigin, BIGW, MPI_UNSIGNED, from, t, 50));
    VERIFY(bigin, BIGW, from, t, me, t, 50 + 100 * it);
    /* The freed send has arrived (the peer acknowledges after its receive). */
    CHECK_OK(ack_send(ctx, from, t, 50));
    CHECK_OK(ack_recv(ctx, to, t, 50));
    fill(out[2], W, me, t, to, t, 51 + 100 * it);
    CHECK_OK(ptsc_send(ctx, out[2], W, MPI_UNSIGNED, to, t, 51));
    CHECK_OK(ptsc_wait(&rr[2]));
    VERIFY(in[2], W, from, t, me, t, 51 + 100 * it);
    free(big);
    free(bigin);
    return PTSC_OK;
}

/* Collectives. */
static int collectives(ptsc_ctx_t *ctx, int t, int it, int big)
{
    const int me = g_rank, root = (t + it) % R;
    const int scale = big ? 700 : 1; /* big: blocks of thousands of elements */
    int cnt[64], dsp[64], rcnt[64], rdsp[64];
    size_t cap = (size_t)(R * (3 * scale + 4) + 16) * (size_t)(R + 1);
    int *sb = malloc(sizeof(int) * cap), *rb = malloc(sizeof(int) * cap);

    /* gather, then gather in place at the root. */
    int two[2] = {val(me, t, it, 0), val(me, t, it, 1)};
    for (size_t k = 0; k < cap; k++)
        rb[k] = SENTINEL;
    CHECK_OK(ptsc_gather(ctx, two, 2, MPI_INT, rb, 2, MPI_INT, root));
    if (me == root)
        for (int i = 0; i < R; i++)
            CHECK(rb[2 * i] == val(i, t, it, 0) && rb[2 * i + 1] == val(i, t, it, 1),
                  "gather it %d: block %d is (%d,%d)", it, i, rb[2 * i], rb[2 * i + 1]);
    if (me == root) {
        for (size_t k = 0; k < cap; k++)
            rb[k] = SENTINEL;
        rb[2 * me] = val(me, t, it, 0);
        rb[2 * me + 1] = val(me, t, it, 1);
    }
    CHECK_OK(ptsc_gather(ctx, me == root ? MPI_IN_PLACE : two, 2, MPI_INT, rb, 2, MPI_INT, root));
    if (me == root)
        for (int i = 0; i < R; i++)
            CHECK(rb[2 * i] == val(i, t, it, 0) && rb[2 * i + 1] == val(i, t, it, 1),
                  "gather in place it %d: block %d is (%d,%d)", it, i, rb[2 * i], rb[2 * i + 1]);

    /* scatter: block i for rank i. */
    if (me == root)
        for (int i = 0; i < R; i++) {
            sb[2 * i] = val(i, t, it, 5);
            sb[2 * i + 1] = val(root, t, it, 6);
        }
    two[0] = two[1] = SENTINEL;
    CHECK_OK(ptsc_scatter(ctx, sb, 2, MPI_INT, two, 2, MPI_INT, root));
    CHECK(two[0] == val(me, t, it, 5) && two[1] == val(root, t, it, 6), "scatter it %d: got (%d,%d)", it,
          two[0], two[1]);

    /* gatherv: rank i sends (i + t) % 3 * scale + 1 elements; the root lays
     * the blocks out in reverse rank order with a one-element gap after each. */
    int off = 0;
    for (int i = R - 1; i >= 0; i--) {
        cnt[i] = (i + t) % 3 * scale + 1;
        dsp[i] = off;
        off += cnt[i] + 1;
    }
    for (int k = 0; k < cnt[me]; k++)
        sb[k] = val(me, t, it, 10 + k);
    for (size_t k = 0; k < cap; k++)
        rb[k] = SENTINEL;
    CHECK_OK(ptsc_gatherv(ctx, sb, cnt[me], MPI_INT, rb, me == root ? cnt : NULL, me == root ? dsp : NULL,
                          MPI_INT, root));
    if (me == root)
        for (int i = 0; i < R; i++) {
            for (int k = 0; k < cnt[i]; k++)
                if (rb[dsp[i] + k] != val(i, t, it, 10 + k)) {
                    CHECK(0, "gatherv it %d: block %d element %d is %d", it, i, k, rb[dsp[i] + k]);
                    break;
                }
            CHECK(rb[dsp[i] + cnt[i]] == SENTINEL, "gatherv it %d: the gap after block %d was written", it,
                  i);
        }

    /* scatterv with the same layout, from the root. */
    if (me == root)
        for (int i = 0; i < R; i++)
            for (int k = 0; k < cnt[i]; k++)
                sb[dsp[i] + k] = val(i, t, it, 20 + k);
    for (size_t k = 0; k < cap; k++)
        rb[k] = SENTINEL;
    CHECK_OK(ptsc_scatterv(ctx, sb, me == root ? cnt : NULL, me == root ? dsp : NULL, MPI_INT, rb, cnt[me],
                           MPI_INT, root));
    for (int k = 0; k < cnt[me]; k++)
        if (rb[k] != val(me, t, it, 20 + k)) {
            CHECK(0, "scatterv it %d: element %d is %d", it, k, rb[k]);
            break;
        }
    CHECK(rb[cnt[me]] == SENTINEL, "scatterv it %d: wrote past its count", it);

    /* allgatherv, same layout, on every rank. */
    for (int k = 0; k < cnt[me]; k++)
        sb[k] = val(me, t, it, 30 + k);
    for (size_t k = 0; k < cap; k++)
        rb[k] = SENTINEL;
    CHECK_OK(ptsc_allgatherv(ctx, sb, cnt[me], MPI_INT, rb, cnt, dsp, MPI_INT));
    for (int i = 0; i < R; i++) {
        for (int k = 0; k < cnt[i]; k++)
            if (rb[dsp[i] + k] != val(i, t, it, 30 + k)) {
                CHECK(0, "allgatherv it %d: block %d element %d is %d", it, i, k, rb[dsp[i] + k]);
                break;
            }
        CHECK(rb[dsp[i] + cnt[i]] == SENTINEL, "allgatherv it %d: the gap after block %d was written", it, i);
    }

    /* alltoallv: me sends (me + d + t) % 3 * scale elements to d (some zero),
     * packed; receives laid out in reverse order with gaps. */
    off = 0;
    for (int d = 0; d < R; d++) {
        cnt[d] = (me + d + t) % 3 * scale;
        dsp[d] = off;
        for (int k = 0; k < cnt[d]; k++)
            sb[off + k] = val(me, t, it, 1000 * d + k);
        off += cnt[d];
    }
    off = 0;
    for (int s = R - 1; s >= 0; s--) {
        rcnt[s] = (s + me + t) % 3 * scale;
        rdsp[s] = off;
        off += rcnt[s] + 1;
    }
    for (size_t k = 0; k < cap; k++)
        rb[k] = SENTINEL;
    CHECK_OK(ptsc_alltoallv(ctx, sb, cnt, dsp, MPI_INT, rb, rcnt, rdsp, MPI_INT));
    for (int s = 0; s < R; s++) {
        for (int k = 0; k < rcnt[s]; k++)
            if (rb[rdsp[s] + k] != val(s, t, it, 1000 * me + k)) {
                CHECK(0, "alltoallv it %d: block from %d element %d is %d", it, s, k, rb[rdsp[s] + k]);
                break;
            }
        CHECK(rb[rdsp[s] + rcnt[s]] == SENTINEL, "alltoallv it %d: the gap after block %d was written", it,
              s);
    }

    /* Non-commutative reductions: reduce_scatter_block, scan, exscan. */
    enum { NA = 5 };
    unsigned *ain = malloc(sizeof(unsigned) * 2 * NA * (size_t)R), aout[2 * NA], want[2];
    for (int b = 0; b < R; b++)
        for (int k = 0; k < NA; k++)
            affine_of(me, t, it, 100 * b + k, &ain[2 * (b * NA + k)]);
    memset(aout, 0xff, sizeof aout);
    CHECK_OK(ptsc_reduce_scatter_block(ctx, ain, aout, NA, affine_type, compose_op));
    for (int k = 0; k < NA; k++) {
        affine_fold(0, R - 1, t, it, 100 * me + k, want);
        CHECK(aout[2 * k] == want[0] && aout[2 * k + 1] == want[1],
              "reduce_scatter_block it %d: element %d is (%u,%u), expected (%u,%u)", it, k, aout[2 * k],
              aout[2 * k + 1], want[0], want[1]);
    }
    for (int k = 0; k < NA; k++)
        affine_of(me, t, it, k, &ain[2 * k]);
    memset(aout, 0xff, sizeof aout);
    CHECK_OK(ptsc_scan(ctx, ain, aout, NA, affine_type, compose_op));
    for (int k = 0; k < NA; k++) {
        affine_fold(0, me, t, it, k, want);
        CHECK(aout[2 * k] == want[0] && aout[2 * k + 1] == want[1],
              "scan it %d: element %d is (%u,%u), expected (%u,%u) (ranks folded out of order?)", it, k,
              aout[2 * k], aout[2 * k + 1], want[0], want[1]);
    }
    memset(aout, 0xff, sizeof aout);
    CHECK_OK(ptsc_exscan(ctx, ain, aout, NA, affine_type, compose_op));
    for (int k = 0; k < NA && me > 0; k++) {
        affine_fold(0, me - 1, t, it, k, want);
        CHECK(aout[2 * k] == want[0] && aout[2 * k + 1] == want[1],
              "exscan it %d: element %d is (%u,%u), expected (%u,%u) (ranks folded out of order?)", it, k,
              aout[2 * k], aout[2 * k + 1], want[0], want[1]);
    }
    /* In place, with a sum: scan of (r + 1) is (r + 1)(r + 2) / 2. */
    long long ls[3] = {me + 1, 10LL * (me + 1), t};
    CHECK_OK(ptsc_scan(ctx, MPI_IN_PLACE, ls, 3, MPI_LONG_LONG, MPI_SUM));
    CHECK(ls[0] == (me + 1) * (me + 2) / 2 && ls[1] == 10LL * (me + 1) * (me + 2) / 2 &&
              ls[2] == (long long)t * (me + 1),
          "scan in place it %d: (%lld,%lld,%lld)", it, ls[0], ls[1], ls[2]);
    free(ain);
    free(sb);
    free(rb);
    return PTSC_OK;
}

static int body(ptsc_ctx_t *ctx, void *arg)
{
    int t = -1;
    (void)arg;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    for (int it = 0; it < NITER; it++) {
        CHECK_OK(requests(ctx, t, it));
        CHECK_OK(collectives(ctx, t, it, it == NITER - 1));
    }
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    if (R > 64) {
        fprintf(stderr, "FAIL mpi_api supports up to 64 ranks\n");
        return 1;
    }
    MPI_Op_create(compose, 0, &compose_op);
    MPI_Type_contiguous(2, MPI_UNSIGNED, &affine_type);
    MPI_Type_commit(&affine_type);
    int rc = ptsc_omp_run(T, body, NULL);
    MPI_Type_free(&affine_type);
    MPI_Op_free(&compose_op);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    return test_finish("mpi_api");
}
