/*
 * Point-to-point between every (rank, thread) pair, from pthreads attached
 * with ptsc_thread_attach: blocking sendrecv, blocking send/recv in a
 * deadlock-free pairing, non-blocking with ptsc_waitall, and non-blocking
 * completed by ptsc_test polling. Every payload names its route, so a
 * message delivered to the wrong thread, rank or receive is reported.
 */
#include "mpi_common.h"

#include <pthread.h>

static int R, T, P; /* ranks, threads per rank, endpoints */
static pthread_barrier_t team;

/* Endpoint g is thread g % T of rank g / T. */
#define RANK_OF(g) ((g) / T)
#define THREAD_OF(g) ((g) % T)

static uint32_t *alloc_msg(int n)
{
    uint32_t *b = malloc((size_t)n * sizeof *b);
    if (b)
        memset(b, 0xEE, (size_t)n * sizeof *b);
    return b;
}

/* Round 0: at shift s, send to g + s and receive from g - s in one
 * ptsc_sendrecv; every shift is a permutation, so nothing can deadlock. */
static int phase_sendrecv(ptsc_ctx_t *ctx, int g)
{
    const int round = 0, tag = 10;
    for (int s = 0; s < P; s++) {
        int d = (g + s) % P, f = (g - s + P) % P;
        int ns = msg_len(g_rank, g_me, RANK_OF(d), THREAD_OF(d), round);
        int nr = msg_len(RANK_OF(f), THREAD_OF(f), g_rank, g_me, round);
        uint32_t *sb = alloc_msg(ns), *rb = alloc_msg(nr);
        fill(sb, ns, g_rank, g_me, RANK_OF(d), THREAD_OF(d), round);
        int rc = ptsc_sendrecv(ctx, sb, ns, MPI_UINT32_T, RANK_OF(d), THREAD_OF(d), tag, rb, nr, MPI_UINT32_T,
                               RANK_OF(f), THREAD_OF(f), tag);
        CHECK(rc == PTSC_OK, "sendrecv shift %d: %s: %s", s, ptsc_status_name(rc), ptsc_last_error());
        if (rc == PTSC_OK)
            VERIFY(rb, nr, RANK_OF(f), THREAD_OF(f), g_rank, g_me, round);
        free(sb);
        free(rb);
        if (rc != PTSC_OK)
            return rc;
    }
    return PTSC_OK;
}

/* Round 1: blocking ptsc_send / ptsc_recv. At step s endpoint g pairs with
 * g XOR s (a perfect matching); the lower endpoint sends first. Steps whose
 * partner does not exist (P not a power of two) are skipped by both. */
static int phase_blocking(ptsc_ctx_t *ctx, int g)
{
    const int round = 1, tag = 11;
    int pow2 = 1;
    while (pow2 < P)
        pow2 <<= 1;
    for (int s = 0; s < pow2; s++) {
        int p = g ^ s;
        if (p >= P)
            continue;
        int ns = msg_len(g_rank, g_me, RANK_OF(p), THREAD_OF(p), round);
        int nr = msg_len(RANK_OF(p), THREAD_OF(p), g_rank, g_me, round);
        uint32_t *sb = alloc_msg(ns), *rb = alloc_msg(nr);
        fill(sb, ns, g_rank, g_me, RANK_OF(p), THREAD_OF(p), round);
        int rc;
        if (p == g) {
            /* Oneself: a blocking send to oneself could wait for the receive. */
            ptsc_request_t r;
            rc = ptsc_irecv(ctx, rb, nr, MPI_UINT32_T, g_rank, g_me, tag, &r);
            if (rc == PTSC_OK)
                rc = ptsc_send(ctx, sb, ns, MPI_UINT32_T, g_rank, g_me, tag);
            if (rc == PTSC_OK)
                rc = ptsc_wait(&r);
        } else if (g < p) {
            rc = ptsc_send(ctx, sb, ns, MPI_UINT32_T, RANK_OF(p), THREAD_OF(p), tag);
            if (rc == PTSC_OK)
                rc = ptsc_recv(ctx, rb, nr, MPI_UINT32_T, RANK_OF(p), THREAD_OF(p), tag);
        } else {
            rc = ptsc_recv(ctx, rb, nr, MPI_UINT32_T, RANK_OF(p), THREAD_OF(p), tag);
            if (rc == PTSC_OK)
                rc = ptsc_send(ctx, sb, ns, MPI_UINT32_T, RANK_OF(p), THREAD_OF(p), tag);
        }
        CHECK(rc == PTSC_OK, "blocking exchange with endpoint %d: %s: %s", p, ptsc_status_name(rc),
              ptsc_last_error());
        if (rc == PTSC_OK)
            VERIFY(rb, nr, RANK_OF(p), THREAD_OF(p), g_rank, g_me, round);
        free(sb);
        free(rb);
        if (rc != PTSC_OK)
            return rc;
    }
    return PTSC_OK;
}

/* Rounds 2 and 3 (or 4 and 5): to every endpoint two messages with the same
 * tag, received in order; completion by ptsc_waitall or ptsc_test polling. */
static int phase_nonblocking(ptsc_ctx_t *ctx, int first_round, int tag, int poll)
{
    int n = 2 * P;
    uint32_t **sb = calloc((size_t)n, sizeof *sb), **rb = calloc((size_t)n, sizeof *rb);
    int *nr = calloc((size_t)n, sizeof *nr);
    ptsc_request_t *req = calloc((size_t)(2 * n), sizeof *req);
    int rc = PTSC_OK;
    for (int i = 0; i < n && rc == PTSC_OK; i++) {
        int f = i / 2, round = first_round + i % 2;
        nr[i] = msg_len(RANK_OF(f), THREAD_OF(f), g_rank, g_me, round);
        rb[i] = alloc_msg(nr[i]);
        rc = ptsc_irecv(ctx, rb[i], nr[i], MPI_UINT32_T, RANK_OF(f), THREAD_OF(f), tag, &req[i]);
        CHECK(rc == PTSC_OK, "irecv %d: %s: %s", i, ptsc_status_name(rc), ptsc_last_error());
    }
    for (int i = 0; i < n && rc == PTSC_OK; i++) {
        int d = i / 2, round = first_round + i % 2;
        int ns = msg_len(g_rank, g_me, RANK_OF(d), THREAD_OF(d), round);
        sb[i] = alloc_msg(ns);
        fill(sb[i], ns, g_rank, g_me, RANK_OF(d), THREAD_OF(d), round);
        rc = ptsc_isend(ctx, sb[i], ns, MPI_UINT32_T, RANK_OF(d), THREAD_OF(d), tag, &req[n + i]);
        CHECK(rc == PTSC_OK, "isend %d: %s: %s", i, ptsc_status_name(rc), ptsc_last_error());
    }
    if (rc == PTSC_OK && !poll) {
        rc = ptsc_waitall(2 * n, req);
        CHECK(rc == PTSC_OK, "waitall: %s: %s", ptsc_status_name(rc), ptsc_last_error());
        for (int i = 0; i < 2 * n; i++)
            CHECK(req[i] == PTSC_REQUEST_NULL, "request %d not reset by ptsc_waitall", i);
    } else if (rc == PTSC_OK) {
        double t0 = now_s();
        int left = 2 * n;
        while (left > 0 && rc == PTSC_OK) {
            for (int i = 0; i < 2 * n && rc == PTSC_OK; i++) {
                if (req[i] == PTSC_REQUEST_NULL)
                    continue;
                int done = -1;
                rc = ptsc_test(&req[i], &done);
                CHECK(rc == PTSC_OK, "ptsc_test %d: %s: %s", i, ptsc_status_name(rc), ptsc_last_error());
                CHECK(done == 0 || done == 1, "ptsc_test set done to %d", done);
                if (done == 1) {
                    CHECK(req[i] == PTSC_REQUEST_NULL, "ptsc_test done but request %d not reset", i);
                    left--;
                } else {
                    CHECK(req[i] != PTSC_REQUEST_NULL, "ptsc_test not done but request %d reset", i);
                }
            }
            if (now_s() - t0 > 60) {
                CHECK(0, "%d requests still incomplete after 60 s of ptsc_test polling", left);
                rc = PTSC_ERR_INTERNAL;
            }
        }
    }
    if (rc == PTSC_OK)
        for (int i = 0; i < n; i++)
            VERIFY(rb[i], nr[i], RANK_OF(i / 2), THREAD_OF(i / 2), g_rank, g_me, first_round + i % 2);
    for (int i = 0; i < n; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(nr);
    free(req);
    return rc;
}

static int worker(int t)
{
    ptsc_ctx_t *ctx = NULL;
    g_me = t;
    CHECK_OK(ptsc_thread_attach(t, &ctx));
    int g = g_rank * T + t;
    pthread_barrier_wait(&team);
    int rc = phase_sendrecv(ctx, g);
    if (rc == PTSC_OK)
        rc = phase_blocking(ctx, g);
    if (rc == PTSC_OK)
        rc = phase_nonblocking(ctx, 2, 12, 0);
    if (rc == PTSC_OK)
        rc = phase_nonblocking(ctx, 4, 13, 1);
    ptsc_stats_t st;
    if (rc == PTSC_OK && ptsc_ctx_stats(ctx, &st) == PTSC_OK) {
        /* P messages each way in each of the first two phases, 2P in each of the last two. */
        CHECK(st.sends == (uint64_t)(6 * P), "stats: %llu sends, expected %d", (unsigned long long)st.sends,
              6 * P);
        CHECK(st.recvs == (uint64_t)(6 * P), "stats: %llu receives, expected %d",
              (unsigned long long)st.recvs, 6 * P);
    }
    CHECK_OK(ptsc_thread_detach());
    return rc;
}

static void *thread_main(void *arg)
{
    worker((int)(intptr_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    P = R * T;
    pthread_barrier_init(&team, NULL, (unsigned)T);
    pthread_t *th = malloc((size_t)T * sizeof *th);
    for (int t = 0; t < T; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    free(th);
    pthread_barrier_destroy(&team);
    return test_finish("mpi_p2p");
}
