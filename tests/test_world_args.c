/* Argument checks of the world collectives (ptsc_world_*), on one rank:
 * every bad input returns its status with a detail naming the argument,
 * writes nothing, and leaves the world usable; threads of a rank that
 * disagree all get PTSC_ERR_MISMATCH instead of waiting. */
#include "test_util.h"

#include <omp.h>
#include <pthread.h>

TestSuite(world_args, .init = ptsc_test_clean_env, .timeout = 60);

static ptsc_ctx_t *ctx;
static int buf[8], rbuf[8];

static void setup(void)
{
    ptsc_test_clean_env();
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
}

static void teardown(void)
{
    ptsc_thread_detach();
    ptsc_finalize();
}

#define DETAIL_HAS(what)                                                                                    \
    cr_expect(strstr(ptsc_last_error(), what) != NULL, "detail \"%s\" does not name %s", ptsc_last_error(), \
              what)

/* A world of one thread on one rank still works: the state is intact. */
static void expect_world_works(void)
{
    int x[2] = {3, 4}, y[2] = {0, 0};
    PTSC_ASSERT_OK(ptsc_world_allreduce(ctx, 1, x, y, 2, MPI_INT, MPI_SUM));
    cr_expect(y[0] == 3 && y[1] == 4, "allreduce of one thread gave %d %d", y[0], y[1]);
}

static void expect_rbuf_untouched(void)
{
    for (int i = 0; i < 8; i++)
        cr_expect_eq(rbuf[i], -9, "a refused call wrote rbuf[%d] = %d", i, rbuf[i]);
}

Test(world_args, not_initialized)
{
    PTSC_ASSERT_ERR(ptsc_world_barrier(NULL, 1), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_world_allreduce(NULL, 1, buf, rbuf, 1, MPI_INT, MPI_SUM), PTSC_ERR_NOT_INITIALIZED);
}

Test(world_args, thread_count, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_ERR(ptsc_world_barrier(ctx, -1), PTSC_ERR_THREAD);
    DETAIL_HAS("nthreads");
    PTSC_ASSERT_ERR(ptsc_world_barrier(ctx, 3), PTSC_ERR_THREAD); /* PTSC_MAX_THREADS is 2 */
    DETAIL_HAS("PTSC_MAX_THREADS");
    /* PTSC_WORLD_TEAM outside a parallel region. */
    PTSC_ASSERT_ERR(ptsc_world_barrier(ctx, PTSC_WORLD_TEAM), PTSC_ERR_ARG);
    DETAIL_HAS("PTSC_WORLD_TEAM");
    PTSC_ASSERT_OK(ptsc_world_barrier(ctx, 1));
    expect_world_works();
}

static void *index1_body(void *p)
{
    int *rc = p;
    ptsc_ctx_t *c = NULL;
    rc[0] = ptsc_thread_attach(1, &c);
    if (rc[0] == PTSC_OK) {
        rc[0] = ptsc_world_barrier(c, 1);
        snprintf((char *)(rc + 2), 256, "%s", ptsc_last_error());
        rc[1] = ptsc_thread_detach();
    }
    return NULL;
}

Test(world_args, index_outside_the_call, .init = setup, .fini = teardown)
{
    int rc[2 + 64] = {0};
    pthread_t th;
    pthread_create(&th, NULL, index1_body, rc);
    pthread_join(th, NULL);
    cr_expect_eq(rc[0], PTSC_ERR_THREAD, "index 1 in a world call of 1 thread: %s", ptsc_status_name(rc[0]));
    cr_expect(strstr((char *)(rc + 2), "does not take part") != NULL, "detail: %s", (char *)(rc + 2));
    cr_expect_eq(rc[1], PTSC_OK);
}

Test(world_args, buffers_counts_types, .init = setup, .fini = teardown)
{
    for (int i = 0; i < 8; i++)
        rbuf[i] = -9;
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, NULL, rbuf, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    DETAIL_HAS("send buffer");
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, NULL, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    DETAIL_HAS("receive buffer");
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, -1, MPI_INT, MPI_SUM), PTSC_ERR_COUNT);
    DETAIL_HAS("count");
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM), PTSC_ERR_ARG);
    DETAIL_HAS("datatype");
    PTSC_ASSERT_ERR(ptsc_world_bcast(ctx, 1, NULL, 2, MPI_INT, 0, 0), PTSC_ERR_NULL_BUFFER);
    DETAIL_HAS("buffer");
    PTSC_ASSERT_ERR(ptsc_world_allgather(ctx, 1, buf, 1, MPI_INT, NULL), PTSC_ERR_NULL_BUFFER);
    DETAIL_HAS("receive buffer");
    PTSC_ASSERT_ERR(ptsc_world_allgather(ctx, 1, MPI_IN_PLACE, 1, MPI_INT, rbuf), PTSC_ERR_ARG);
    DETAIL_HAS("MPI_IN_PLACE");
    PTSC_ASSERT_ERR(ptsc_world_allgather(ctx, 1, buf, -3, MPI_INT, rbuf), PTSC_ERR_COUNT);
    /* A datatype with holes cannot be copied as bytes. */
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    PTSC_ASSERT_ERR(ptsc_world_bcast(ctx, 1, buf, 1, vec, 0, 0), PTSC_ERR_UNSUPPORTED);
    DETAIL_HAS("holes");
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, vec, MPI_SUM), PTSC_ERR_UNSUPPORTED);
    MPI_Type_free(&vec);
    expect_rbuf_untouched();
    expect_world_works();
}

static void my_op(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)in, (void)inout, (void)len, (void)t;
}

Test(world_args, ops, .init = setup, .fini = teardown)
{
    for (int i = 0; i < 8; i++)
        rbuf[i] = -9;
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, MPI_INT, MPI_OP_NULL), PTSC_ERR_ARG);
    DETAIL_HAS("MPI_OP_NULL");
    MPI_Op op;
    MPI_Op_create(my_op, 1, &op);
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, MPI_INT, op), PTSC_ERR_UNSUPPORTED);
    DETAIL_HAS("predefined");
    MPI_Op_free(&op);
    /* Pairs MPI does not define: arithmetic on characters, MAXLOC on a plain int, BAND on a double. */
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, MPI_CHAR, MPI_SUM), PTSC_ERR_UNSUPPORTED);
    PTSC_ASSERT_ERR(ptsc_world_reduce(ctx, 1, buf, rbuf, 1, MPI_INT, MPI_MAXLOC, 0, 0), PTSC_ERR_UNSUPPORTED);
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, MPI_DOUBLE, MPI_BAND), PTSC_ERR_UNSUPPORTED);
    PTSC_ASSERT_ERR(ptsc_world_allreduce(ctx, 1, buf, rbuf, 1, MPI_INT, MPI_REPLACE), PTSC_ERR_UNSUPPORTED);
    expect_rbuf_untouched();
    /* A pair type with MAXLOC is fine. */
    struct {
        double v;
        int i;
    } in = {2.5, 7}, out = {0, 0};
    PTSC_ASSERT_OK(ptsc_world_allreduce(ctx, 1, &in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC));
    cr_expect(out.v == 2.5 && out.i == 7, "maxloc gave %g %d", out.v, out.i);
}

Test(world_args, roots, .init = setup, .fini = teardown)
{
    for (int i = 0; i < 8; i++)
        rbuf[i] = -9;
    PTSC_ASSERT_ERR(ptsc_world_bcast(ctx, 1, buf, 1, MPI_INT, 1, 0), PTSC_ERR_RANK); /* one rank */
    DETAIL_HAS("root rank");
    PTSC_ASSERT_ERR(ptsc_world_bcast(ctx, 1, buf, 1, MPI_INT, -1, 0), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_world_reduce(ctx, 1, buf, rbuf, 1, MPI_INT, MPI_SUM, 0, 1), PTSC_ERR_THREAD);
    DETAIL_HAS("root thread");
    PTSC_ASSERT_ERR(ptsc_world_reduce(ctx, 1, buf, rbuf, 1, MPI_INT, MPI_SUM, 0, -1), PTSC_ERR_THREAD);
    expect_rbuf_untouched();
    expect_world_works();
}

/* Count 0: nothing to read or write, NULL buffers allowed, the call still meets. */
Test(world_args, zero_count, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_OK(ptsc_world_allreduce(ctx, 1, NULL, NULL, 0, MPI_INT, MPI_SUM));
    PTSC_ASSERT_OK(ptsc_world_reduce(ctx, 1, NULL, NULL, 0, MPI_DOUBLE, MPI_MAX, 0, 0));
    PTSC_ASSERT_OK(ptsc_world_bcast(ctx, 1, NULL, 0, MPI_INT, 0, 0));
    PTSC_ASSERT_OK(ptsc_world_allgather(ctx, 1, NULL, 0, MPI_INT, NULL));
    expect_world_works();
}

/* Another thread's context. */
static ptsc_ctx_t *other;
static void *attach1(void *p)
{
    (void)p;
    ptsc_thread_attach(1, &other);
    return NULL; /* exits attached: its context is freed at thread exit */
}

Test(world_args, wrong_thread, .init = setup, .fini = teardown)
{
    pthread_t th;
    pthread_create(&th, NULL, attach1, NULL);
    pthread_join(th, NULL);
    PTSC_ASSERT_ERR(ptsc_world_barrier(other, 1), PTSC_ERR_WRONG_THREAD);
    expect_world_works();
}

/* Two threads of the rank disagree: both return, with PTSC_ERR_MISMATCH
 * (the thread whose own arguments failed: its own status). */
typedef struct {
    int index, count, null_buf;
    int rc;
    char detail[512];
} two_t;

static void *two_body(void *p)
{
    two_t *a = p;
    ptsc_ctx_t *c = NULL;
    if (a->index == 0) {
        c = ctx; /* the test's main thread owns index 0: use it from there */
    }
    if (a->index == 1 && ptsc_thread_attach(1, &c) != PTSC_OK) {
        a->rc = PTSC_ERR_INTERNAL;
        return NULL;
    }
    int x[2] = {1, 2}, y[2] = {-9, -9};
    a->rc = ptsc_world_allreduce(c, 2, a->null_buf ? NULL : x, y, a->count, MPI_INT, MPI_SUM);
    snprintf(a->detail, sizeof a->detail, "%s", ptsc_last_error());
    if (y[0] != -9)
        a->rc = PTSC_ERR_INTERNAL; /* wrote a result */
    if (a->index == 1)
        ptsc_thread_detach();
    return NULL;
}

static void run_two(two_t *a0, two_t *a1)
{
    pthread_t th;
    pthread_create(&th, NULL, two_body, a1);
    two_body(a0);
    pthread_join(th, NULL);
}

Test(world_args, threads_disagree, .init = setup, .fini = teardown)
{
    two_t a0 = {0, 1, 0, 0, ""}, a1 = {1, 2, 0, 0, ""};
    run_two(&a0, &a1);
    cr_expect_eq(a0.rc, PTSC_ERR_MISMATCH, "thread 0: %s: %s", ptsc_status_name(a0.rc), a0.detail);
    cr_expect_eq(a1.rc, PTSC_ERR_MISMATCH, "thread 1: %s: %s", ptsc_status_name(a1.rc), a1.detail);
    cr_expect(strstr(a0.detail, "disagree") != NULL, "detail: %s", a0.detail);

    two_t b0 = {0, 1, 1, 0, ""}, b1 = {1, 1, 0, 0, ""};
    run_two(&b0, &b1);
    cr_expect_eq(b0.rc, PTSC_ERR_NULL_BUFFER, "thread 0: %s: %s", ptsc_status_name(b0.rc), b0.detail);
    cr_expect_eq(b1.rc, PTSC_ERR_MISMATCH, "thread 1: %s: %s", ptsc_status_name(b1.rc), b1.detail);
    cr_expect(strstr(b1.detail, "thread 0 of rank 0 failed") != NULL, "detail: %s", b1.detail);
    expect_world_works();
}

/* PTSC_WORLD_TEAM in a ptsc_omp_run region: the team's two threads. */
static int team_body(ptsc_ctx_t *c, void *arg)
{
    int *sum = arg, t = 0;
    ptsc_ctx_index(c, &t);
    int x = t + 1, y = 0;
    int rc = ptsc_world_allreduce(c, PTSC_WORLD_TEAM, &x, &y, 1, MPI_INT, MPI_SUM);
    sum[t] = y;
    return rc;
}

Test(world_args, omp_team, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_OK(ptsc_thread_detach());
    int sum[2] = {0, 0};
    PTSC_ASSERT_OK(ptsc_omp_run(2, team_body, sum));
    cr_expect(sum[0] == 3 && sum[1] == 3, "team allreduce gave %d %d", sum[0], sum[1]);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
}
