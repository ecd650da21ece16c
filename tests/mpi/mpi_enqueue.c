/*
 * The stream-ordered calls (ptsc_*_enqueue) on host buffers: without a
 * device the "stream" is the calling thread, so every step runs through the
 * same words, proxy thread and MPI calls as on a GPU, and the data can be
 * checked here. Ranks pair up (r with r^1), thread t with thread t.
 *
 *   order     both sides start MSGS non-blocking operations of one tag (the
 *             receiver posts first, then a barrier, then the sender sends,
 *             so every receive waits while its message arrives), then wait
 *             in order: each message must land in the receive of its rank
 *             in the sequence (non-overtaking), with every word right.
 *   sizes     blocking send/receive ping-pong over sizes from 0 bytes to
 *             1 MiB (rendezvous), the reply carrying the round; each
 *             receive 7 words longer than its message, whose tail must stay
 *             as it was.
 *   progress  isend_enqueue of 1 MiB, then MPI_Barrier (on a duplicate of
 *             the world per thread), then wait: the proxy moves the message
 *             while the thread sits in MPI; the peer receives, then the same
 *             barrier.
 *   trunc     a 400-byte message into a 40-byte receive: the receive is
 *             filled with the first 40 bytes and ptsc_enqueue_sync returns
 *             PTSC_ERR_TRUNCATE; the next message (tag alike) arrives whole.
 *   allreduce ptsc_allreduce_enqueue over each thread's lane (thread t of
 *             every rank): a sum of 1000 ints, a maximum in place, and a
 *             non-commutative operation of MPI_Op_create whose answer
 *             spells the ranks in order (1, 12, 1234, ...).
 *   diff      a seeded random schedule per thread pair (batches of
 *             non-blocking sends and receives both ways, sizes 0 .. 40 KB,
 *             three tags, receive buffers up to 16 bytes longer than their
 *             message, waits in a random order) run twice, through
 *             ptsc_isend / ptsc_irecv / ptsc_wait and through the enqueued
 *             calls: every receive buffer, tail included, must hold the
 *             same bytes both times.
 *   args      bad arguments: each refused with its status, nothing sent.
 *
 * `mpi_enqueue timeout` runs only this: rank 1 posts an enqueued receive
 * that rank 0 answers 3 s later; with PTSC_TIMEOUT=1 the proxy must name
 * the receive meanwhile (the ctest entry matches the line), and the
 * message must still arrive.
 *
 * `mpi_enqueue pool` (run with PTSC_ENQUEUE_POOL=64k) runs only this: rank
 * 0 starts four 16000-byte isends, which fill the pool, and a fifth, which
 * must be refused with PTSC_ERR_NO_MEMORY and send nothing; rank 1 receives
 * the four. Once both are synchronised the pool grows: a 200000-byte
 * message goes through, then one of the refused isend's tag, which must be
 * the one that arrives.
 *
 * Skips (77) on a rank with a device: tests/gpu/test_gpu_enqueue.c covers
 * device buffers.
 */
#include <ptsc.h>

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_common.h"

#define MSGS 24
#define ROUNDS 6

static int R, T;
static MPI_Comm *bar; /* per thread index: a duplicate of the world for MPI_Barrier */

static int order(ptsc_ctx_t *ctx, int t, int peer, int sender, int round)
{
    int tag = 3 + round % 2;
    static const int lens[4] = {HDR + 1, HDR + 40, 3000, 70000};
    uint32_t *b[MSGS];
    ptsc_stream_request_t rq[MSGS];
    for (int i = 0; i < MSGS; i++) {
        int n = lens[(i + round) % 4];
        b[i] = calloc((size_t)n, sizeof(uint32_t));
        if (sender)
            fill(b[i], n, g_rank, t, peer, t, round * MSGS + i);
    }
    if (!sender)
        for (int i = 0; i < MSGS; i++)
            CHECK_OK(ptsc_irecv_enqueue(ctx, b[i], lens[(i + round) % 4], MPI_UINT32_T, peer, t, tag, NULL,
                                        &rq[i]));
    MPI_Barrier(bar[t]);
    if (sender)
        for (int i = 0; i < MSGS; i++)
            CHECK_OK(ptsc_isend_enqueue(ctx, b[i], lens[(i + round) % 4], MPI_UINT32_T, peer, t, tag, NULL,
                                        &rq[i]));
    for (int i = 0; i < MSGS; i++)
        CHECK_OK(ptsc_wait_enqueue(&rq[i], NULL));
    for (int i = 0; i < MSGS; i++) {
        CHECK(rq[i] == PTSC_STREAM_REQUEST_NULL, "request %d not reset by its wait", i);
        if (!sender)
            VERIFY(b[i], lens[(i + round) % 4], peer, t, g_rank, t, round * MSGS + i);
        free(b[i]);
    }
    return ptsc_enqueue_sync(ctx, NULL);
}

static int sizes(ptsc_ctx_t *ctx, int t, int peer, int sender)
{
    static const int words[] = {0, 1, 2, HDR + 3, 1000, 4097, 65536, 262144};
    enum { NS = sizeof words / sizeof words[0] };
    uint32_t *b = malloc((262144 + 7) * sizeof(uint32_t)), reply = 0;
    for (int k = 0; k < NS; k++) {
        int n = words[k];
        if (sender) {
            if (n >= HDR)
                fill(b, n, g_rank, t, peer, t, 1000 + k);
            else
                for (int i = 0; i < n; i++)
                    b[i] = 0xAB00u + (uint32_t)(k * 8 + i);
            CHECK_OK(ptsc_send_enqueue(ctx, b, n, MPI_UINT32_T, peer, t, 9, NULL));
            CHECK_OK(ptsc_recv_enqueue(ctx, &reply, 1, MPI_UINT32_T, peer, t, 10, NULL));
            CHECK(reply == (uint32_t)(k * 7 + 1), "size %d words: reply %u, expected %d", n, reply,
                  k * 7 + 1);
        } else {
            /* A buffer 7 words longer than the message: MPI leaves the rest alone. */
            for (int i = 0; i < n + 7; i++)
                b[i] = 0xEE000000u + (uint32_t)i;
            CHECK_OK(ptsc_recv_enqueue(ctx, b, n + 7, MPI_UINT32_T, peer, t, 9, NULL));
            for (int i = n; i < n + 7; i++)
                CHECK(b[i] == 0xEE000000u + (uint32_t)i,
                      "size %d words into %d: word %d past the message is %#x", n, n + 7, i, b[i]);
            if (n >= HDR)
                VERIFY(b, n, peer, t, g_rank, t, 1000 + k);
            else
                for (int i = 0; i < n; i++)
                    CHECK(b[i] == 0xAB00u + (uint32_t)(k * 8 + i), "size %d: word %d is %#x", n, i, b[i]);
            reply = (uint32_t)(k * 7 + 1);
            CHECK_OK(ptsc_send_enqueue(ctx, &reply, 1, MPI_UINT32_T, peer, t, 10, NULL));
        }
    }
    free(b);
    return ptsc_enqueue_sync(ctx, NULL);
}

static int progress(ptsc_ctx_t *ctx, int t, int peer, int sender)
{
    int n = 262144; /* 1 MiB: a rendezvous in every MPI */
    uint32_t *b = calloc((size_t)n, sizeof(uint32_t));
    ptsc_stream_request_t rq;
    if (sender) {
        fill(b, n, g_rank, t, peer, t, 77);
        CHECK_OK(ptsc_isend_enqueue(ctx, b, n, MPI_UINT32_T, peer, t, 11, NULL, &rq));
        MPI_Barrier(bar[t]); /* the peer's receive completes only if the proxy moves the send */
        CHECK_OK(ptsc_wait_enqueue(&rq, NULL));
    } else {
        CHECK_OK(ptsc_recv_enqueue(ctx, b, n, MPI_UINT32_T, peer, t, 11, NULL));
        MPI_Barrier(bar[t]);
        VERIFY(b, n, peer, t, g_rank, t, 77);
    }
    free(b);
    return ptsc_enqueue_sync(ctx, NULL);
}

static int trunc_case(ptsc_ctx_t *ctx, int t, int peer, int sender)
{
    char big[400], small[40];
    for (int i = 0; i < 400; i++)
        big[i] = (char)(i * 7 + t);
    if (sender) {
        CHECK_OK(ptsc_send_enqueue(ctx, big, 400, MPI_CHAR, peer, t, 12, NULL));
        CHECK_OK(ptsc_send_enqueue(ctx, big + 1, 40, MPI_CHAR, peer, t, 12, NULL));
        return ptsc_enqueue_sync(ctx, NULL);
    }
    memset(small, 0, sizeof small);
    CHECK_OK(ptsc_recv_enqueue(ctx, small, 40, MPI_CHAR, peer, t, 12, NULL));
    int rc = ptsc_enqueue_sync(ctx, NULL);
    CHECK(rc == PTSC_ERR_TRUNCATE,
          "a 400-byte message into 40 bytes: sync returned %s, expected PTSC_ERR_TRUNCATE",
          ptsc_status_name(rc));
    CHECK(strstr(ptsc_last_error(), "400 bytes") != NULL, "the truncation's detail names no size: \"%s\"",
          ptsc_last_error());
    CHECK(memcmp(small, big, 40) == 0, "a truncated receive holds other bytes than the message's first 40");
    CHECK(ptsc_enqueue_sync(ctx, NULL) == PTSC_OK, "the truncation is reported twice");
    memset(small, 0, sizeof small);
    CHECK_OK(ptsc_recv_enqueue(ctx, small, 40, MPI_CHAR, peer, t, 12, NULL));
    CHECK(memcmp(small, big + 1, 40) == 0, "the message after a truncated one did not arrive whole");
    return ptsc_enqueue_sync(ctx, NULL);
}

/* in op inout, digit by digit: x0 op x1 op ... gives the digits of x0, x1, ... in order. */
static void digits(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++)
        ((long long *)inout)[i] = ((long long *)in)[i] * 10 + ((long long *)inout)[i];
}

static int allreduce(ptsc_ctx_t *ctx, int t)
{
    enum { N = 1000 };
    int *a = malloc(N * sizeof(int)), *b = malloc(N * sizeof(int));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            a[i] = g_rank * 1000 + t * 7 + i + round, b[i] = -1;
        CHECK_OK(ptsc_allreduce_enqueue(ctx, a, b, N, MPI_INT, MPI_SUM, NULL));
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += b[i] != 1000 * R * (R - 1) / 2 + R * (t * 7 + i + round);
        CHECK(bad == 0, "allreduce sum, thread %d round %d: %d of %d wrong (b[0] = %d)", t, round, bad, N,
              b[0]);
        for (int i = 0; i < N; i++)
            a[i] = (i + g_rank) % R;
        CHECK_OK(ptsc_allreduce_enqueue(ctx, MPI_IN_PLACE, a, N, MPI_INT, MPI_MAX, NULL));
        bad = 0;
        for (int i = 0; i < N; i++)
            bad += a[i] != R - 1;
        CHECK(bad == 0, "allreduce max in place, thread %d: %d of %d wrong", t, bad, N);
    }
    MPI_Op op;
    MPI_Op_create(digits, 0, &op);
    long long x[3] = {g_rank + 1, g_rank + 1, 0}, y[3], want = 0;
    for (int r = 0; r < R; r++)
        want = want * 10 + r + 1;
    CHECK_OK(ptsc_allreduce_enqueue(ctx, x, y, 3, MPI_LONG_LONG, op, NULL));
    CHECK(y[0] == want && y[1] == want && y[2] == 0,
          "non-commutative allreduce: %lld %lld %lld, expected %lld", y[0], y[1], y[2], want);
    MPI_Op_free(&op);
    free(a);
    free(b);
    return ptsc_enqueue_sync(ctx, NULL);
}

/* The differential case: a schedule both sides of a pair derive from one seed. */
enum { DBATCH = 6, DBATCHES = 12, DOPS = DBATCH * DBATCHES, DMAX = 40000 };
typedef struct {
    int from_low; /* the lower rank sends */
    int bytes, extra, tag;
} dop_t;

static uint32_t rnd(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* One pass of the schedule; rec[i]: the checksum of receive i's whole buffer (0 for a send). */
static int diff_pass(ptsc_ctx_t *ctx, int t, int peer, int enqueued, const dop_t *ops, uint64_t *rec)
{
    int low = g_rank < peer;
    unsigned char *buf[DBATCH];
    for (int k = 0; k < DBATCH; k++)
        buf[k] = malloc(DMAX + 16);
    uint32_t order_seed = 99u + (uint32_t)t;
    for (int b = 0; b < DBATCHES; b++) {
        ptsc_request_t rq[DBATCH];
        ptsc_stream_request_t sq[DBATCH];
        for (int k = 0; k < DBATCH; k++) {
            const dop_t *o = &ops[b * DBATCH + k];
            int i = b * DBATCH + k, sending = o->from_low == low;
            if (sending) {
                for (int j = 0; j < o->bytes; j++)
                    buf[k][j] = (unsigned char)(i * 31 + j * 7 + g_rank);
                if (enqueued)
                    CHECK_OK(
                        ptsc_isend_enqueue(ctx, buf[k], o->bytes, MPI_BYTE, peer, t, o->tag, NULL, &sq[k]));
                else
                    CHECK_OK(ptsc_isend(ctx, buf[k], o->bytes, MPI_BYTE, peer, t, o->tag, &rq[k]));
            } else {
                for (int j = 0; j < o->bytes + o->extra; j++)
                    buf[k][j] = (unsigned char)(0xA0 + j);
                if (enqueued)
                    CHECK_OK(ptsc_irecv_enqueue(ctx, buf[k], o->bytes + o->extra, MPI_BYTE, peer, t, o->tag,
                                                NULL, &sq[k]));
                else
                    CHECK_OK(ptsc_irecv(ctx, buf[k], o->bytes + o->extra, MPI_BYTE, peer, t, o->tag, &rq[k]));
            }
        }
        int perm[DBATCH];
        for (int k = 0; k < DBATCH; k++)
            perm[k] = k;
        for (int k = DBATCH - 1; k > 0; k--) { /* waits in a random order (the same both passes) */
            int j = (int)(rnd(&order_seed) % (uint32_t)(k + 1)), x = perm[k];
            perm[k] = perm[j];
            perm[j] = x;
        }
        for (int k = 0; k < DBATCH; k++) {
            if (enqueued)
                CHECK_OK(ptsc_wait_enqueue(&sq[perm[k]], NULL));
            else
                CHECK_OK(ptsc_wait(&rq[perm[k]]));
        }
        for (int k = 0; k < DBATCH; k++) {
            const dop_t *o = &ops[b * DBATCH + k];
            rec[b * DBATCH + k] = o->from_low == low ? 0 : fnv(buf[k], (size_t)(o->bytes + o->extra));
        }
    }
    for (int k = 0; k < DBATCH; k++)
        free(buf[k]);
    return enqueued ? ptsc_enqueue_sync(ctx, NULL) : PTSC_OK;
}

static int diff_case(ptsc_ctx_t *ctx, int t, int peer)
{
    dop_t ops[DOPS];
    uint32_t x = 12345u + 977u * (uint32_t)(t + 1) + 131u * (uint32_t)(g_rank < peer ? g_rank : peer);
    for (int i = 0; i < DOPS; i++) {
        uint32_t r = rnd(&x);
        ops[i].from_low = (int)(r & 1);
        ops[i].tag = (int)((r >> 1) % 3);
        ops[i].bytes = (r >> 3) % 4 == 0 ? (int)(rnd(&x) % DMAX) : (int)(rnd(&x) % 200);
        ops[i].extra = (int)(rnd(&x) % 17);
    }
    uint64_t a[DOPS], e[DOPS];
    CHECK_OK(diff_pass(ctx, t, peer, 0, ops, a));
    CHECK_OK(diff_pass(ctx, t, peer, 1, ops, e));
    int differ = 0;
    for (int i = 0; i < DOPS; i++)
        differ += a[i] != e[i];
    CHECK(differ == 0,
          "diff: thread %d: %d of %d receive buffers differ between ptsc_irecv and the enqueued calls", t,
          differ, DOPS);
    return PTSC_OK;
}

#define REFUSED(call, status)                                                                         \
    do {                                                                                              \
        int rc_ = (call);                                                                             \
        CHECK(rc_ == (status), "%s returned %s, expected %s (%s)", #call, ptsc_status_name(rc_),      \
              ptsc_status_name(status), ptsc_last_error());                                           \
        CHECK(rc_ == PTSC_OK || ptsc_last_error()[0] != '\0', "%s: a refusal with no detail", #call); \
    } while (0)

static int args(ptsc_ctx_t *ctx, int t, int peer)
{
    int x[4] = {0}, tmax = -1;
    ptsc_stream_request_t rq = PTSC_STREAM_REQUEST_NULL;
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    CHECK_OK(ptsc_enqueue_tag_max(&tmax));
    CHECK(tmax >= 32767 / (T * T) - 1 && tmax >= 12, "enqueue tag max %d", tmax);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_INT, R, t, 0, NULL), PTSC_ERR_RANK);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_INT, -1, t, 0, NULL), PTSC_ERR_RANK);
    REFUSED(ptsc_recv_enqueue(ctx, x, 1, MPI_INT, PTSC_ANY_RANK, t, 0, NULL), PTSC_ERR_RANK);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_INT, peer, T, 0, NULL), PTSC_ERR_THREAD);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_INT, peer, t, tmax + 1, NULL), PTSC_ERR_TAG);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_INT, peer, t, -1, NULL), PTSC_ERR_TAG);
    REFUSED(ptsc_send_enqueue(ctx, x, -1, MPI_INT, peer, t, 0, NULL), PTSC_ERR_COUNT);
    REFUSED(ptsc_send_enqueue(ctx, NULL, 1, MPI_INT, peer, t, 0, NULL), PTSC_ERR_NULL_BUFFER);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_DATATYPE_NULL, peer, t, 0, NULL), PTSC_ERR_ARG);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, vec, peer, t, 0, NULL), PTSC_ERR_UNSUPPORTED);
    REFUSED(ptsc_send_enqueue(ctx, x, 1, MPI_INT, peer, t, 0, (void *)&rq),
            PTSC_ERR_ARG); /* a stream, no device */
    REFUSED(ptsc_isend_enqueue(ctx, x, 1, MPI_INT, peer, t, 0, NULL, NULL), PTSC_ERR_ARG);
    REFUSED(ptsc_irecv_enqueue(ctx, x, 1, MPI_INT, peer, t, 0, NULL, NULL), PTSC_ERR_ARG);
    REFUSED(ptsc_wait_enqueue(NULL, NULL), PTSC_ERR_ARG);
    REFUSED(ptsc_wait_enqueue(&rq, NULL), PTSC_OK); /* a null request is complete */
    REFUSED(ptsc_enqueue_tag_max(NULL), PTSC_ERR_ARG);
    REFUSED(ptsc_allreduce_enqueue(ctx, x, x + 1, 1, MPI_BYTE, MPI_SUM, NULL), PTSC_ERR_UNSUPPORTED);
    REFUSED(ptsc_allreduce_enqueue(ctx, x, x + 1, 1, MPI_INT, MPI_OP_NULL, NULL), PTSC_ERR_ARG);
    REFUSED(ptsc_allreduce_enqueue(ctx, x, x + 2, 1, vec, MPI_SUM, NULL), PTSC_ERR_UNSUPPORTED);
    REFUSED(ptsc_allreduce_enqueue(ctx, x, NULL, 1, MPI_INT, MPI_SUM, NULL), PTSC_ERR_NULL_BUFFER);
    MPI_Type_free(&vec);
    /* Nothing of the above was sent: a message now is the first the peer gets. */
    x[0] = 1000 + t;
    if (g_rank < peer) {
        CHECK_OK(ptsc_send_enqueue(ctx, x, 1, MPI_INT, peer, t, 0, NULL));
    } else {
        CHECK_OK(ptsc_recv_enqueue(ctx, x, 1, MPI_INT, peer, t, 0, NULL));
        CHECK(x[0] == 1000 + t, "after the refused calls the first message holds %d, expected %d", x[0],
              1000 + t);
    }
    return ptsc_enqueue_sync(ctx, NULL);
}

static int timeout_case(ptsc_ctx_t *ctx)
{
    int x = 0;
    ptsc_stream_request_t rq;
    if (g_rank == 1) {
        CHECK_OK(ptsc_irecv_enqueue(ctx, &x, 1, MPI_INT, 0, 0, 99, NULL, &rq));
        MPI_Barrier(bar[0]);
        CHECK_OK(ptsc_wait_enqueue(&rq, NULL));
        CHECK(x == 4242, "the late message holds %d", x);
    } else if (g_rank == 0) {
        MPI_Barrier(bar[0]);
        struct timespec ts = {3, 0};
        nanosleep(&ts, NULL);
        x = 4242;
        CHECK_OK(ptsc_send_enqueue(ctx, &x, 1, MPI_INT, 1, 0, 99, NULL));
    }
    return ptsc_enqueue_sync(ctx, NULL);
}

static int pool_case(ptsc_ctx_t *ctx)
{
    enum { N = 4, SMALL = 4000, BIG = 50000 };
    int *m = calloc((size_t)(N * SMALL + BIG), sizeof(int)), x = 0, rc = PTSC_OK;
    ptsc_stream_request_t rq[N + 1];
    CHECK(m != NULL, "out of memory");
    if (!m)
        return PTSC_ERR_NO_MEMORY;
    if (g_rank == 0) {
        for (int i = 0; i < N * SMALL + BIG; i++)
            m[i] = 7 * i + 1;
        for (int k = 0; k < N; k++)
            CHECK_OK(ptsc_isend_enqueue(ctx, m + k * SMALL, SMALL, MPI_INT, 1, 0, 5, NULL, &rq[k]));
        rc = ptsc_isend_enqueue(ctx, m, SMALL, MPI_INT, 1, 0, 6, NULL, &rq[N]);
        CHECK(rc == PTSC_ERR_NO_MEMORY && strstr(ptsc_last_error(), "PTSC_ENQUEUE_POOL"),
              "a fifth isend into a full pool returned %s: %s", ptsc_status_name(rc), ptsc_last_error());
        MPI_Barrier(bar[0]);
        for (int k = 0; k < N; k++)
            CHECK_OK(ptsc_wait_enqueue(&rq[k], NULL));
        CHECK_OK(ptsc_enqueue_sync(ctx, NULL));
        CHECK_OK(ptsc_send_enqueue(ctx, m + N * SMALL, BIG, MPI_INT, 1, 0, 5, NULL));
        x = 777;
        CHECK_OK(ptsc_send_enqueue(ctx, &x, 1, MPI_INT, 1, 0, 6, NULL));
    } else if (g_rank == 1) {
        MPI_Barrier(bar[0]);
        for (int k = 0; k < N; k++)
            CHECK_OK(ptsc_recv_enqueue(ctx, m + k * SMALL, SMALL, MPI_INT, 0, 0, 5, NULL));
        CHECK_OK(ptsc_enqueue_sync(ctx, NULL));
        CHECK_OK(ptsc_recv_enqueue(ctx, m + N * SMALL, BIG, MPI_INT, 0, 0, 5, NULL));
        CHECK_OK(ptsc_recv_enqueue(ctx, &x, 1, MPI_INT, 0, 0, 6, NULL));
        CHECK_OK(ptsc_enqueue_sync(ctx, NULL));
        int bad = 0;
        for (int i = 0; i < N * SMALL + BIG; i++)
            bad += m[i] != 7 * i + 1;
        CHECK(bad == 0, "%d of %d ints wrong after the pool filled and grew", bad, N * SMALL + BIG);
        CHECK(x == 777, "the refused isend's tag brought %d, expected the later message (777)", x);
    }
    free(m);
    return ptsc_enqueue_sync(ctx, NULL);
}

static int run(int t)
{
    ptsc_ctx_t *ctx = NULL;
    g_me = t;
    CHECK_OK(ptsc_thread_attach(t, &ctx));
    int peer = g_rank ^ 1, low = g_rank < peer;
    CHECK_OK(args(ctx, t, peer));
    for (int round = 0; round < ROUNDS; round++)
        CHECK_OK(order(ctx, t, peer, low ^ (round & 1), round));
    CHECK_OK(sizes(ctx, t, peer, low));
    CHECK_OK(sizes(ctx, t, peer, !low));
    CHECK_OK(progress(ctx, t, peer, low));
    CHECK_OK(progress(ctx, t, peer, !low));
    CHECK_OK(trunc_case(ctx, t, peer, low));
    CHECK_OK(allreduce(ctx, t));
    CHECK_OK(diff_case(ctx, t, peer));
    return ptsc_thread_detach();
}

static void *thread_main(void *arg)
{
    run((int)(intptr_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    int cuda = 0, aware = 0, staging = 0;
    ptsc_features(&cuda, &aware, &staging);
    if (cuda) {
        if (g_rank == 0)
            printf("SKIP mpi_enqueue: a device is present (tests/gpu/test_gpu_enqueue.c covers it)\n");
        __atomic_store_n(&g_done, 1, __ATOMIC_SEQ_CST);
        pthread_join(g_watchdog, NULL);
        ptsc_finalize();
        return 77;
    }
    if (R % 2) {
        CHECK(0, "mpi_enqueue pairs ranks 0-1, 2-3, ...: %d ranks", R);
        return test_finish("mpi_enqueue");
    }
    bar = calloc((size_t)T, sizeof *bar);
    for (int t = 0; t < T; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &bar[t]);
    if (argc > 1 && (!strcmp(argv[1], "timeout") || !strcmp(argv[1], "pool"))) {
        ptsc_ctx_t *ctx = NULL;
        g_me = 0;
        if (ptsc_thread_attach(0, &ctx) == PTSC_OK) {
            int rc = argv[1][0] == 't' ? timeout_case(ctx) : pool_case(ctx);
            CHECK(rc == PTSC_OK, "%s case: %s: %s", argv[1], ptsc_status_name(rc), ptsc_last_error());
            ptsc_thread_detach();
        }
        for (int t = 0; t < T; t++)
            MPI_Comm_free(&bar[t]);
        free(bar);
        return test_finish("mpi_enqueue");
    }
    pthread_t th[64];
    for (int t = 0; t < T && t < 64; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < T && t < 64; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < T; t++)
        MPI_Comm_free(&bar[t]);
    free(bar);
    return test_finish("mpi_enqueue");
}
