/*
 * Faults surface as statuses: each fault below is made by thread 0 of
 * ranks 0 and 1 while threads 1 .. T-1 of every rank exchange verified
 * messages and run lane collectives at the same time; the fault must come
 * back as a ptsc status (with MPI's own text where MPI reported it), the
 * process must keep running and the other threads' data must be intact.
 * Two ranks (a mismatched broadcast on more ranks can hang inside MPI:
 * docs/errors.md, "Faults").
 *
 *  truncate    messages larger than the receive buffer (plain, and framed
 *              in a staging job): PTSC_ERR_TRUNCATE with info.bytes the
 *              capacity and the part that fits in the buffer; the next
 *              message on the channel arrives intact.
 *  bcast       a broadcast whose root passes more elements than the other
 *              rank: the root succeeds, the other rank gets PTSC_ERR_MPI
 *              with MPI's truncation message and nothing written past its
 *              count; with PTSC_COMM=shared the same through ptsc_ibcast
 *              with a sleep before the wait (the agent finds the failure:
 *              its detail must reach the waiting thread); the next
 *              broadcast and a barrier on the lane work.
 *  finalized   a receive posted from a peer whose rank then finalizes ptsc
 *              (MPI stays up: the program owns it): nothing can complete
 *              it, ptsc_test keeps answering "not done", ptsc_iprobe finds
 *              nothing, and ptsc_cancel completes it with
 *              PTSC_ERR_CANCELLED; meanwhile the other threads of the
 *              surviving rank exchange messages among themselves.
 *
 * Calls after the rank's own ptsc_finalize are covered by mpi_lifecycle
 * and test_bad_input.
 */
#include "mpi_common.h"

#include <ctype.h>
#include <sched.h>

enum { ROUNDS = 24, TAG_W = 5, TAG_T = 40, TAG_B = 41, TAG_F = 42, TOKEN_POSTED = 901, TOKEN_GONE = 902 };
enum { PH_CROSS = 0, PH_LOCAL = 1, PH_QUIT = 2 };

static int R, T;
static int g_phase, g_case; /* set by thread 0 before the start barrier */
static int g_started, g_fault_done;
static pthread_barrier_t g_bar; /* thread 0 and the workers of this rank */

/* ------------------------------------------------------------------------ */
/* The other threads' traffic                                                */
/* ------------------------------------------------------------------------ */

/* One round of worker t: a verified exchange with thread t of the
 * neighbour ranks (PH_CROSS) or with the neighbour workers of this rank
 * (PH_LOCAL), and every fourth round a verified allreduce on its lane. */
static int worker_round(ptsc_ctx_t *ctx, int t, int round)
{
    int to_r, to_t, from_r, from_t, rnd = g_case * 1000 + round;
    if (g_phase == PH_CROSS) {
        to_r = (g_rank + 1) % R, from_r = (g_rank + R - 1) % R;
        to_t = from_t = t;
    } else { /* ring over workers 1 .. T-1 of this rank */
        to_r = from_r = g_rank;
        to_t = t % (T - 1) + 1;
        from_t = (t + T - 3) % (T - 1) + 1;
    }
    int n = msg_len(g_rank, t, to_r, to_t, rnd), m = msg_len(from_r, from_t, g_rank, t, rnd);
    uint32_t *out = malloc((size_t)n * sizeof *out), *in = calloc((size_t)m, sizeof *in);
    if (!out || !in) {
        CHECK(0, "out of memory");
        free(out);
        free(in);
        return PTSC_ERR_NO_MEMORY;
    }
    fill(out, n, g_rank, t, to_r, to_t, rnd);
    int rc = ptsc_sendrecv(ctx, out, n, MPI_UINT32_T, to_r, to_t, TAG_W, in, m, MPI_UINT32_T, from_r, from_t,
                           TAG_W);
    CHECK(rc == PTSC_OK, "worker sendrecv round %d: %s: %s", round, ptsc_status_name(rc), ptsc_last_error());
    if (rc == PTSC_OK)
        VERIFY(in, m, from_r, from_t, g_rank, t, rnd);
    free(out);
    free(in);
    if (g_phase == PH_CROSS && round % 4 == 0) {
        long long mine[3] = {g_rank + 1, t, rnd}, sum[3] = {0, 0, 0};
        rc = ptsc_allreduce(ctx, mine, sum, 3, MPI_LONG_LONG, MPI_SUM);
        CHECK(rc == PTSC_OK, "worker allreduce round %d: %s: %s", round, ptsc_status_name(rc),
              ptsc_last_error());
        if (rc == PTSC_OK)
            CHECK(sum[0] == (long long)R * (R + 1) / 2 && sum[1] == (long long)R * t &&
                      sum[2] == (long long)R * rnd,
                  "worker allreduce round %d on lane %d: got %lld %lld %lld", round, t, sum[0], sum[1],
                  sum[2]);
    }
    return rc;
}

static void *worker_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = t;
    int rc = ptsc_thread_attach(t, &ctx);
    CHECK(rc == PTSC_OK, "attach %d: %s: %s", t, ptsc_status_name(rc), ptsc_last_error());
    for (;;) {
        pthread_barrier_wait(&g_bar); /* a case starts: g_phase, g_case set */
        if (g_phase == PH_QUIT)
            break;
        for (int round = 0; round < ROUNDS && rc == PTSC_OK; round++) {
            /* Thread 0 makes its fault while the workers are between a
             * quarter and three quarters of their rounds. */
            if (round == ROUNDS / 4)
                __atomic_add_fetch(&g_started, 1, __ATOMIC_SEQ_CST);
            if (round == 3 * ROUNDS / 4)
                for (unsigned n = 0; !__atomic_load_n(&g_fault_done, __ATOMIC_SEQ_CST);)
                    test_pause(&n);
            rc = worker_round(ctx, t, round);
        }
        if (rc != PTSC_OK) /* keep the barrier protocol going; the failure is counted */
            __atomic_add_fetch(&g_started, 1, __ATOMIC_SEQ_CST);
        pthread_barrier_wait(&g_bar); /* the case ends */
    }
    if (rc == PTSC_OK || ctx) {
        rc = ptsc_thread_detach();
        CHECK(rc == PTSC_OK, "detach %d: %s: %s", t, ptsc_status_name(rc), ptsc_last_error());
    }
    return NULL;
}

/* Thread 0: start the workers on a case and wait until they are under way. */
static void traffic_start(int phase, int c)
{
    g_phase = phase;
    g_case = c;
    __atomic_store_n(&g_started, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_fault_done, 0, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&g_bar);
    double t0 = now_s();
    for (unsigned n = 0; __atomic_load_n(&g_started, __ATOMIC_SEQ_CST) < T - 1 && now_s() - t0 < 60;)
        test_pause(&n);
}

static void traffic_end(void)
{
    __atomic_store_n(&g_fault_done, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&g_bar);
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */

static unsigned char pattern(int c, size_t i) { return (unsigned char)(c * 131 + i * 7 + (i >> 9)); }

/* `hay` contains `needle`, ignoring case. */
static int contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t k = 0;
        while (k < n && hay[k] && tolower((unsigned char)hay[k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == n)
            return 1;
    }
    return 0;
}

#define CHECK_RC(what, rc, want)                                                           \
    CHECK((rc) == (want), "%s: returned %s, expected %s (%s)", what, ptsc_status_name(rc), \
          ptsc_status_name(want), ptsc_last_error())

/* ------------------------------------------------------------------------ */
/* truncate                                                                  */
/* ------------------------------------------------------------------------ */

/* Message sizes and receive capacities: plain in both formats; above the
 * 4 KiB chunk of the staging format (framed there); and large. */
static const size_t trunc_cases[][2] = {{3000, 1000}, {5000, 4096}, {64 * 1024, 16 * 1024}};
enum { NEXT_BYTES = 2000 };

static int case_truncate(ptsc_ctx_t *ctx)
{
    const int n = (int)(sizeof trunc_cases / sizeof trunc_cases[0]);
    for (int i = 0; i < n; i++) {
        size_t big = trunc_cases[i][0], cap = trunc_cases[i][1];
        unsigned char *a = malloc(big), *b = malloc(NEXT_BYTES);
        if (!a || !b)
            return PTSC_ERR_NO_MEMORY;
        char what[128];
        snprintf(what, sizeof what, "truncate: %zu-byte message into %zu bytes (%s)", big, cap,
                 i % 2 ? "irecv + wait" : "recv");
        if (g_rank == 0) {
            for (size_t k = 0; k < big; k++)
                a[k] = pattern(i, k);
            for (size_t k = 0; k < NEXT_BYTES; k++)
                b[k] = pattern(i + 100, k);
            int rc = ptsc_send(ctx, a, (int)big, MPI_BYTE, 1, 0, TAG_T);
            CHECK_RC(what, rc, PTSC_OK);
            rc = ptsc_send(ctx, b, NEXT_BYTES, MPI_BYTE, 1, 0, TAG_T);
            CHECK_RC(what, rc, PTSC_OK);
        } else if (g_rank == 1) {
            memset(a, 0xEE, big);
            memset(b, 0xEE, NEXT_BYTES);
            ptsc_info_t info = {.rank = -7, .thread = -7, .tag = -7, .error = -7, .bytes = 0};
            int rc;
            if (i % 2) {
                ptsc_request_t r = PTSC_REQUEST_NULL;
                rc = ptsc_irecv(ctx, a, (int)cap, MPI_BYTE, 0, 0, TAG_T, &r);
                CHECK_RC(what, rc, PTSC_OK);
                rc = ptsc_wait_info(&r, &info);
            } else {
                rc = ptsc_recv_info(ctx, a, (int)cap, MPI_BYTE, 0, 0, TAG_T, &info);
            }
            const char *detail = ptsc_last_error();
            CHECK_RC(what, rc, PTSC_ERR_TRUNCATE);
            CHECK(contains(detail, "does not fit"), "%s: detail \"%s\" does not say what happened", what,
                  detail);
            CHECK(info.error == PTSC_ERR_TRUNCATE && info.bytes == cap && info.rank == 0 &&
                      info.thread == 0 && info.tag == TAG_T,
                  "%s: info error %s, bytes %zu (capacity %zu), source (%d,%d) tag %d", what,
                  ptsc_status_name(info.error), info.bytes, cap, info.rank, info.thread, info.tag);
            for (size_t k = 0; k < cap; k++)
                if (a[k] != pattern(i, k)) {
                    CHECK(0, "%s: byte %zu of the part that fits is %#x, expected %#x", what, k, a[k],
                          pattern(i, k));
                    break;
                }
            for (size_t k = cap; k < big; k++)
                if (a[k] != 0xEE) {
                    CHECK(0, "%s: byte %zu written past the %zu-byte receive", what, k, cap);
                    break;
                }
            rc = ptsc_recv_info(ctx, b, NEXT_BYTES, MPI_BYTE, 0, 0, TAG_T, &info);
            CHECK_RC("truncate: the next message on the channel", rc, PTSC_OK);
            CHECK(rc != PTSC_OK || info.bytes == NEXT_BYTES, "%s: the next message reports %zu bytes", what,
                  info.bytes);
            for (size_t k = 0; rc == PTSC_OK && k < NEXT_BYTES; k++)
                if (b[k] != pattern(i + 100, k)) {
                    CHECK(0, "%s: the next message: byte %zu is %#x, expected %#x", what, k, b[k],
                          pattern(i + 100, k));
                    break;
                }
        }
        free(a);
        free(b);
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* bcast                                                                     */
/* ------------------------------------------------------------------------ */

/* Small enough to travel eagerly in both MPIs: Open MPI 4.1 writes a large
 * truncated collective message past the buffer or hangs (docs/errors.md). */
enum { BC_ROOT = 64, BC_OTHER = 16, SENTINEL = -12345 };

/* The outcome of a broadcast through `call` whose root passed BC_ROOT
 * elements and the other rank BC_OTHER: the root succeeds; the other rank
 * gets PTSC_ERR_MPI naming the call and the truncation, and nothing past
 * its count. */
static void check_mismatch(const char *call, int rc, const int *v)
{
    const char *detail = ptsc_last_error();
    if (g_rank == 0) {
        CHECK_RC("bcast: the root of a mismatched broadcast", rc, PTSC_OK);
        return;
    }
    CHECK_RC("bcast: a rank receiving fewer elements than the root sends", rc, PTSC_ERR_MPI);
    CHECK(contains(detail, call) && contains(detail, "truncated"),
          "bcast: %s's detail \"%s\" names neither the call nor the truncation", call, detail);
    for (int k = BC_OTHER; k < BC_ROOT; k++)
        if (v[k] != SENTINEL) {
            CHECK(0, "bcast: %s wrote element %d past the count %d", call, k, BC_OTHER);
            break;
        }
}

static int case_bcast(ptsc_ctx_t *ctx)
{
    int v[BC_ROOT];
    for (int k = 0; k < BC_ROOT; k++)
        v[k] = g_rank == 0 ? 1000 + k : SENTINEL;
    int count = g_rank == 0 ? BC_ROOT : BC_OTHER;
    int rc = ptsc_bcast(ctx, v, count, MPI_INT, 0);
    check_mismatch("ptsc_bcast", rc, v);
    /* The same as a non-blocking broadcast whose thread sleeps before its
     * wait: the progress agent finds the failure, and its detail must
     * still reach the thread that waits (the agent's thread-local detail
     * is not the owner's). PTSC_COMM=shared only, where ptsc's own schedule
     * matches each message first: under PTSC_COMM=dup it is MPI's
     * non-blocking broadcast, and both MPIs abort on its truncation
     * through MPI_COMM_WORLD's handler (docs/errors.md). */
    const char *comm = getenv("PTSC_COMM");
    if (comm && !strcmp(comm, "shared")) {
        ptsc_request_t req = PTSC_REQUEST_NULL;
        for (int k = 0; k < BC_ROOT; k++)
            v[k] = g_rank == 0 ? 3000 + k : SENTINEL;
        rc = ptsc_ibcast(ctx, v, count, MPI_INT, 0, &req);
        CHECK_RC("bcast: ptsc_ibcast with more elements at the root", rc, PTSC_OK);
        if (rc == PTSC_OK) {
            usleep(100000);
            check_mismatch("ptsc_ibcast", ptsc_wait(&req), v);
        }
    }
    /* The lane still works: a broadcast with matching counts, then a barrier. */
    for (int k = 0; k < BC_ROOT; k++)
        v[k] = g_rank == 0 ? 2000 + k : SENTINEL;
    rc = ptsc_bcast(ctx, v, BC_OTHER, MPI_INT, 0);
    CHECK_RC("bcast: the next broadcast on the lane", rc, PTSC_OK);
    for (int k = 0; rc == PTSC_OK && k < BC_ROOT; k++) {
        int want = k < BC_OTHER || g_rank == 0 ? 2000 + k : SENTINEL;
        if (v[k] != want) {
            CHECK(0, "bcast: the next broadcast: element %d is %d, expected %d", k, v[k], want);
            break;
        }
    }
    rc = ptsc_barrier(ctx);
    CHECK_RC("bcast: a barrier after the mismatch", rc, PTSC_OK);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* finalized                                                                 */
/* ------------------------------------------------------------------------ */

/* Rank 0 thread 0 posts a receive from rank 1 thread 0, which never sends:
 * rank 1 finalizes ptsc instead. Tokens on MPI_COMM_WORLD (not a lane)
 * order the two. */
static int case_finalized_receiver(ptsc_ctx_t *ctx)
{
    int x = -1, token = 1, done = 1, flag = 1;
    ptsc_request_t r = PTSC_REQUEST_NULL;
    int rc = ptsc_irecv(ctx, &x, 1, MPI_INT, 1, 0, TAG_F, &r);
    CHECK_RC("finalized: irecv from rank 1", rc, PTSC_OK);
    MPI_Send(&token, 1, MPI_INT, 1, TOKEN_POSTED, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, 1, TOKEN_GONE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* Rank 1 has finalized ptsc: nothing will match the receive. */
    double t0 = now_s();
    while (rc == PTSC_OK && now_s() - t0 < 0.2) {
        rc = ptsc_test(&r, &done);
        CHECK_RC("finalized: test of the receive", rc, PTSC_OK);
        CHECK(!done, "finalized: a receive from a rank that finalized ptsc completed (x = %d)", x);
        if (done)
            return PTSC_OK;
    }
    ptsc_info_t info;
    rc = ptsc_iprobe(ctx, 1, 0, TAG_F, &flag, &info);
    CHECK_RC("finalized: iprobe", rc, PTSC_OK);
    CHECK(!flag, "finalized: iprobe found a message from a rank that finalized ptsc");
    rc = ptsc_cancel(&r);
    CHECK_RC("finalized: cancel", rc, PTSC_OK);
    rc = ptsc_wait(&r);
    CHECK_RC("finalized: wait of the cancelled receive", rc, PTSC_ERR_CANCELLED);
    CHECK(r == PTSC_REQUEST_NULL && x == -1, "finalized: request %p, x = %d after the cancelled receive",
          (void *)r, x);
    /* The thread goes on working: a message to itself. */
    int y = 77, z = 0;
    rc = ptsc_sendrecv(ctx, &y, 1, MPI_INT, 0, 0, TAG_F, &z, 1, MPI_INT, 0, 0, TAG_F);
    CHECK(rc == PTSC_OK && z == 77, "finalized: a message to itself afterwards: %s, got %d",
          ptsc_status_name(rc), z);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */

typedef int (*case_fn)(ptsc_ctx_t *);

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    pthread_create(&g_watchdog, NULL, watchdog, NULL);
    int rc = ptsc_init(&argc, &argv);
    CHECK(rc == PTSC_OK, "ptsc_init: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    if (rc == PTSC_OK)
        ptsc_size(NULL, &T);
    int ok = rc == PTSC_OK && R == 2 && T >= 2 && T <= 64;
    if (rc == PTSC_OK && !ok)
        CHECK(0, "needs 2 ranks and 2..64 thread slots, got %d ranks and %d slots", R, T);
    ptsc_ctx_t *ctx = NULL;
    pthread_t th[64];
    if (ok) {
        g_me = 0;
        pthread_barrier_init(&g_bar, NULL, (unsigned)T);
        for (int t = 1; t < T; t++)
            pthread_create(&th[t], NULL, worker_main, (void *)(intptr_t)t);
        rc = ptsc_thread_attach(0, &ctx);
        CHECK(rc == PTSC_OK, "attach 0: %s: %s", ptsc_status_name(rc), ptsc_last_error());
        static const case_fn cases[] = {case_truncate, case_bcast};
        for (int c = 0; c < 2; c++) {
            traffic_start(PH_CROSS, c);
            if (ctx)
                cases[c](ctx);
            traffic_end();
        }
        if (g_rank == 0) {
            traffic_start(PH_LOCAL, 2);
            if (ctx)
                case_finalized_receiver(ctx);
            traffic_end();
        } else {
            int token = 0;
            MPI_Recv(&token, 1, MPI_INT, 0, TOKEN_POSTED, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        g_phase = PH_QUIT;
        pthread_barrier_wait(&g_bar);
        for (int t = 1; t < T; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&g_bar);
    }
    if (rc == PTSC_OK || ok) {
        int frc = ptsc_finalize();
        CHECK(frc == PTSC_OK, "ptsc_finalize: %s: %s", ptsc_status_name(frc), ptsc_last_error());
    }
    if (ok && g_rank == 1) {
        int token = 1;
        MPI_Send(&token, 1, MPI_INT, 0, TOKEN_GONE, MPI_COMM_WORLD);
    }
    int mine = __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST), total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const char *comm = getenv("PTSC_COMM"), *staging = getenv("PTSC_STAGING");
    if (g_rank == 0)
        printf("%s mpi_faults: %d ranks x %d threads, PTSC_COMM=%s, PTSC_STAGING=%s, %d failed checks\n",
               total ? "FAILED" : "PASSED", R, T, comm ? comm : "dup", staging ? staging : "auto", total);
    fflush(stdout);
    __atomic_store_n(&g_done, 1, __ATOMIC_SEQ_CST);
    pthread_join(g_watchdog, NULL);
    MPI_Finalize();
    return total ? 1 : 0;
}
