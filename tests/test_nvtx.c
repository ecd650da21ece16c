/* NVTX ranges (nvtx.c): with PTSC_NVTX=1 every range opened is closed on
 * the thread that opened it, error paths included, and ranges are named as
 * documented; with PTSC_NVTX unset or 0 no NVTX call is made at all. No
 * profiler is needed: the module counts its calls and each thread's open
 * ranges. Both wire formats run: plain, and staged (PTSC_STAGING=always,
 * 4 KiB chunks), where host buffers go through the staging ring. */
#include "test_util.h"

#include "ptsc_internal.h"

#include <pthread.h>

TestSuite(nvtx, .init = ptsc_test_clean_env, .timeout = 60);

#define BIG 16384 /* ints: 64 KiB, 16 pieces when staged */

static int sbuf[BIG], rbuf[BIG];

static void expect_depth(const char *after)
{
    cr_assert_eq(ptsc__nvtx_depth(), 0, "after %s: %d NVTX ranges still open (last \"%s\")", after,
                 ptsc__nvtx_depth(), ptsc__nvtx_last());
}

/* Traffic of thread `me` with itself: messages, syncs, collectives, and
 * calls that fail before and inside the engine. Data is checked. */
static void traffic(ptsc_ctx_t *ctx, int me)
{
    ptsc_request_t req;
    for (int i = 0; i < BIG; i++)
        sbuf[i] = i * 3 + me;
    memset(rbuf, 0, sizeof rbuf);
    /* A large message (framed, through the ring when staged). */
    PTSC_ASSERT_OK(ptsc_isend(ctx, sbuf, BIG, MPI_INT, 0, me, 7, &req));
    PTSC_ASSERT_OK(ptsc_recv(ctx, rbuf, BIG, MPI_INT, 0, me, 7));
    PTSC_ASSERT_OK(ptsc_wait(&req));
    cr_assert(memcmp(sbuf, rbuf, sizeof rbuf) == 0, "64 KiB message arrived corrupted");
    expect_depth("a 64 KiB message");
    /* Small ones. A send to oneself is waited for only after its receive
     * was posted: MPI may hold a standard send until it is matched (MPICH
     * does for a message to the same process). */
    int x = 41 + me, y = 0;
    PTSC_ASSERT_OK(ptsc_sendrecv(ctx, &x, 1, MPI_INT, 0, me, 8, &y, 1, MPI_INT, 0, me, 8));
    cr_assert_eq(y, x);
    PTSC_ASSERT_OK(ptsc_isend(ctx, &x, 1, MPI_INT, 0, me, 9, &req));
    y = 0;
    PTSC_ASSERT_OK(ptsc_recv(ctx, &y, 1, MPI_INT, 0, me, 9));
    PTSC_ASSERT_OK(ptsc_wait(&req));
    cr_assert_eq(y, x);
    expect_depth("small messages");
    /* Errors: a refused argument, and a message larger than the receive
     * buffer (refused inside the engine, after its ranges opened). */
    PTSC_ASSERT_ERR(ptsc_send(ctx, &x, 1, MPI_INT, 5, me, 1), PTSC_ERR_RANK);
    PTSC_ASSERT_OK(ptsc_isend(ctx, sbuf, 64, MPI_INT, 0, me, 10, &req));
    PTSC_ASSERT_ERR(ptsc_recv(ctx, rbuf, 8, MPI_INT, 0, me, 10), PTSC_ERR_TRUNCATE);
    PTSC_ASSERT_OK(ptsc_wait(&req));
    PTSC_ASSERT_ERR(ptsc_sync(ctx, (ptsc_scope_t)99), PTSC_ERR_ARG);
    expect_depth("failed calls");
    PTSC_ASSERT_OK(ptsc_sync(ctx, PTSC_SCOPE_THREAD));
    PTSC_ASSERT_OK(ptsc_sync(ctx, PTSC_SCOPE_DEVICE));
    /* Collectives over lanes and over every thread. */
    PTSC_ASSERT_OK(ptsc_barrier(ctx));
    PTSC_ASSERT_OK(ptsc_bcast(ctx, sbuf, 256, MPI_INT, 0));
    PTSC_ASSERT_OK(ptsc_allreduce(ctx, sbuf, rbuf, 256, MPI_INT, MPI_SUM));
    cr_assert_eq(rbuf[255], sbuf[255]);
    PTSC_ASSERT_OK(ptsc_allgather(ctx, sbuf, 4, MPI_INT, rbuf, 4, MPI_INT));
    PTSC_ASSERT_ERR(ptsc_bcast(ctx, sbuf, 1, MPI_INT, 3), PTSC_ERR_RANK);
    PTSC_ASSERT_OK(ptsc_world_barrier(ctx, 1));
    x = 5, y = 0;
    PTSC_ASSERT_OK(ptsc_world_allreduce(ctx, 1, &x, &y, 1, MPI_INT, MPI_SUM));
    cr_assert_eq(y, 5);
    expect_depth("collectives");
}

/* Whether the last run staged host buffers (only without a device). */
static int staged_host;

static void run(const char *nvtx, const char *staging)
{
    ptsc_test_clean_env();
    if (nvtx)
        setenv("PTSC_NVTX", nvtx, 1);
    if (staging) {
        setenv("PTSC_STAGING", staging, 1);
        setenv("PTSC_STAGING_CHUNK", "4k", 1);
    }
    ptsc_test_init(2, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    staged_host = ptsc__g.stage_host;
    traffic(ctx, 0);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

static void expect_balanced(unsigned long min_pushes)
{
    unsigned long push, pop, names;
    ptsc__nvtx_counts(&push, &pop, &names);
    cr_assert_eq(push, pop, "%lu NVTX ranges pushed, %lu popped", push, pop);
    cr_assert_geq(push, min_pushes, "only %lu NVTX ranges pushed", push);
    cr_assert_geq(names, 1, "no thread was named");
    expect_depth("finalize");
}

static void expect_silent(void)
{
    unsigned long push, pop, names;
    ptsc__nvtx_counts(&push, &pop, &names);
    cr_assert(push == 0 && pop == 0 && names == 0,
              "PTSC_NVTX off made NVTX calls: %lu pushes, %lu pops, %lu names", push, pop, names);
    expect_depth("finalize");
}

/* Messages: 6 waits or blocking calls at least, 6 collectives, 2 syncs
 * (without a device no sync runs), plus the ring's copies when staged. */
Test(nvtx, on_plain_balanced)
{
    run("1", "never");
    expect_balanced(12);
}
Test(nvtx, on_staged_balanced)
{
    run("1", "always");
    /* 16 pieces copied in, 16 out, where host buffers are staged (no
     * device); with a device, host buffers travel plain in every format. */
    expect_balanced(12 + (staged_host ? 2 * 16 : 0));
}
Test(nvtx, off_makes_no_call)
{
    run("0", "always");
    expect_silent();
}
Test(nvtx, unset_makes_no_call)
{
    run(NULL, "never");
    expect_silent();
}

/* Range names, as a timeline shows them. */
Test(nvtx, names)
{
    setenv("PTSC_NVTX", "yes", 1);
    setenv("PTSC_STAGING", "always", 1);
    setenv("PTSC_STAGING_CHUNK", "4k", 1);
    ptsc_test_init(4, NULL);
    ptsc_ctx_t *ctx;
    /* Without a device, even thread indices push host buffers through the
     * staging ring (engine.c), odd ones send them as they are. With a
     * device, host buffers are never staged and the names say so. */
    const char *st = ptsc__g.stage_host ? " staged" : "";
    char want[64];
    PTSC_ASSERT_OK(ptsc_thread_attach(2, &ctx));
    ptsc_request_t req;
    int x = 1, y = 0;
    PTSC_ASSERT_OK(ptsc_isend(ctx, &x, 1, MPI_INT, 0, 2, 7, &req));
    PTSC_ASSERT_OK(ptsc_recv(ctx, &y, 1, MPI_INT, 0, 2, 7));
    snprintf(want, sizeof want, "ptsc_recv r0 t2 tag 7 4 B%s", st);
    cr_expect_str_eq(ptsc__nvtx_last(), want);
    PTSC_ASSERT_OK(ptsc_wait(&req));
    snprintf(want, sizeof want, "ptsc_isend r0 t2 tag 7 4 B%s", st);
    cr_expect_str_eq(ptsc__nvtx_last(), want);
    /* A framed message: starting it copies its first pieces into the ring. */
    PTSC_ASSERT_OK(ptsc_isend(ctx, sbuf, 1536, MPI_INT, 0, 2, 8, &req));
    if (ptsc__g.stage_host)
        cr_expect(strncmp(ptsc__nvtx_last(), "stage D2H ", 10) == 0, "last range \"%s\"", ptsc__nvtx_last());
    PTSC_ASSERT_OK(ptsc_recv(ctx, rbuf, 1536, MPI_INT, PTSC_ANY_RANK, 2, 8));
    /* Its pieces are copied out of the ring while the receive waits, or
     * all at its start. */
    snprintf(want, sizeof want, "ptsc_recv rany t2 tag 8 6 KiB%s", st);
    cr_expect(strncmp(ptsc__nvtx_last(), "stage H2D ", 10) == 0 || strcmp(ptsc__nvtx_last(), want) == 0,
              "last range \"%s\"", ptsc__nvtx_last());
    PTSC_ASSERT_OK(ptsc_wait(&req));
    snprintf(want, sizeof want, "ptsc_isend r0 t2 tag 8 6 KiB%s", st);
    cr_expect_str_eq(ptsc__nvtx_last(), want);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    /* Odd thread: plain MPI messages (not staged). */
    PTSC_ASSERT_OK(ptsc_thread_attach(3, &ctx));
    PTSC_ASSERT_OK(ptsc_isend(ctx, &x, 1, MPI_INT, 0, 3, 9, &req));
    PTSC_ASSERT_OK(ptsc_recv(ctx, &y, 1, MPI_INT, 0, 3, 9));
    cr_expect_str_eq(ptsc__nvtx_last(), "ptsc_recv r0 t3 tag 9 4 B");
    PTSC_ASSERT_OK(ptsc_wait(&req));
    PTSC_ASSERT_OK(ptsc_barrier(ctx));
    cr_expect_str_eq(ptsc__nvtx_last(), "ptsc_barrier");
    expect_depth("named ranges");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

/* Every thread balances its own ranges: two threads exchange messages. */
static void *peer(void *arg)
{
    (void)arg;
    ptsc_ctx_t *ctx;
    static int v[BIG];
    PTSC_ASSERT_OK(ptsc_thread_attach(1, &ctx));
    for (int k = 0; k < 4; k++) {
        PTSC_ASSERT_OK(ptsc_recv(ctx, v, BIG, MPI_INT, 0, 0, k));
        PTSC_ASSERT_OK(ptsc_send(ctx, v, BIG, MPI_INT, 0, 0, k));
    }
    expect_depth("thread 1's messages");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    return NULL;
}

Test(nvtx, threads_balanced)
{
    setenv("PTSC_NVTX", "1", 1);
    setenv("PTSC_STAGING", "always", 1);
    setenv("PTSC_STAGING_CHUNK", "4k", 1);
    ptsc_test_init(2, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, peer, NULL), 0);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < BIG; i++)
            sbuf[i] = i + k;
        PTSC_ASSERT_OK(ptsc_send(ctx, sbuf, BIG, MPI_INT, 0, 1, k));
        PTSC_ASSERT_OK(ptsc_recv(ctx, rbuf, BIG, MPI_INT, 0, 1, k));
        cr_assert(memcmp(sbuf, rbuf, sizeof rbuf) == 0, "round %d: data differs", k);
    }
    pthread_join(t, NULL);
    expect_depth("thread 0's messages");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    unsigned long push, pop, names;
    ptsc__nvtx_counts(&push, &pop, &names);
    cr_assert_eq(push, pop);
    cr_assert_eq(names, 2, "%lu threads named, 2 attached", names);
    ptsc_test_finalize();
}
