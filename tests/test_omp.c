/* OpenMP helpers: ptsc_omp_run and ptsc_omp_attach. */
#include "test_util.h"

#include <omp.h>

TestSuite(omp, .init = ptsc_test_clean_env, .timeout = 60);

#define T 4

struct seen {
    int calls;
    int by_index[T];
    int omp_num[T];
    int bad_ctx;
    int team;
};

static int record(ptsc_ctx_t *ctx, void *arg)
{
    struct seen *s = arg;
    int index = -1;
    ptsc_ctx_t *self = NULL;
    if (ptsc_ctx_index(ctx, &index) != PTSC_OK || index < 0 || index >= T)
        return PTSC_ERR_INTERNAL;
    /* The context handed to fn is the calling thread's own. */
    if (ptsc_self(&self) != PTSC_OK || self != ctx)
        __atomic_add_fetch(&s->bad_ctx, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->by_index[index], 1, __ATOMIC_SEQ_CST);
    s->omp_num[index] = omp_get_thread_num();
    s->team = omp_get_num_threads();
    return PTSC_OK;
}

Test(omp, run_calls_fn_on_every_thread_with_distinct_indices)
{
    ptsc_test_init(T, NULL);
    struct seen s;
    memset(&s, 0, sizeof s);
    PTSC_ASSERT_OK(ptsc_omp_run(T, record, &s));
    cr_expect_eq(s.calls, T, "fn ran %d times for %d threads", s.calls, T);
    cr_expect_eq(s.team, T);
    cr_expect_eq(s.bad_ctx, 0, "fn got a context that is not its thread's own");
    for (int i = 0; i < T; i++) {
        cr_expect_eq(s.by_index[i], 1, "index %d ran %d times", i, s.by_index[i]);
        cr_expect_eq(s.omp_num[i], i, "index %d ran on OpenMP thread %d", i, s.omp_num[i]);
    }
    ptsc_test_finalize();
}

Test(omp, run_detaches_the_threads_it_attached)
{
    ptsc_test_init(T, NULL);
    struct seen s;
    memset(&s, 0, sizeof s);
    PTSC_ASSERT_OK(ptsc_omp_run(T, record, &s));
    /* OpenMP keeps its pool threads alive: had they stayed attached, these
     * indices would still be taken. */
    for (int i = 0; i < T; i++) {
        PTSC_ASSERT_OK(ptsc_thread_attach(i, NULL));
        PTSC_ASSERT_OK(ptsc_thread_detach());
    }
    /* And a second run works the same. */
    memset(&s, 0, sizeof s);
    PTSC_ASSERT_OK(ptsc_omp_run(T, record, &s));
    cr_expect_eq(s.calls, T);
    ptsc_test_finalize();
}

Test(omp, run_keeps_an_attached_caller_attached)
{
    ptsc_test_init(T, NULL);
    ptsc_ctx_t *ctx = NULL, *after = NULL;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    struct seen s;
    memset(&s, 0, sizeof s);
    PTSC_ASSERT_OK(ptsc_omp_run(2, record, &s));
    cr_expect_eq(s.calls, 2);
    PTSC_ASSERT_OK(ptsc_self(&after));
    cr_expect_eq(after, ctx, "the caller's context changed across ptsc_omp_run");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(omp, run_default_thread_count)
{
    ptsc_test_init(T, NULL);
    struct seen s;
    omp_set_num_threads(3);
    memset(&s, 0, sizeof s);
    PTSC_ASSERT_OK(ptsc_omp_run(0, record, &s));
    cr_expect_eq(s.calls, 3, "nthreads 0 with omp max 3, PTSC_MAX_THREADS 4: %d calls", s.calls);
    omp_set_num_threads(8);
    memset(&s, 0, sizeof s);
    PTSC_ASSERT_OK(ptsc_omp_run(-1, record, &s));
    cr_expect_eq(s.calls, T, "nthreads -1 with omp max 8, PTSC_MAX_THREADS 4: %d calls", s.calls);
    ptsc_test_finalize();
}

Test(omp, run_more_threads_than_slots_fails)
{
    ptsc_test_init(2, NULL);
    struct seen s;
    memset(&s, 0, sizeof s);
    int rc = ptsc_omp_run(3, record, &s);
    cr_expect_lt(rc, 0, "3 threads on 2 slots succeeded");
    cr_expect_str_not_empty(ptsc_last_error());
    cr_expect_eq(s.calls, 0, "fn ran %d times although the run failed", s.calls);
    ptsc_test_finalize();
}

Test(omp, run_null_fn)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_ERR(ptsc_omp_run(2, NULL, NULL), PTSC_ERR_ARG);
    ptsc_test_finalize();
}

/* Threads 1 and 3 fail with different real errors; the run reports thread
 * 1's status and its detail, whatever order they finish in. */
struct fail {
    char detail[T][512];
};

static int fail_some(ptsc_ctx_t *ctx, void *arg)
{
    struct fail *f = arg;
    int index = -1, rc = PTSC_OK, x = 0;
    ptsc_ctx_index(ctx, &index);
    if (index == 3)
        rc = ptsc_send(ctx, &x, -5, MPI_INT, 0, 0, 0); /* PTSC_ERR_COUNT */
    else if (index == 1)
        rc = ptsc_sync(ctx, (ptsc_scope_t)42); /* PTSC_ERR_ARG */
    if (rc != PTSC_OK)
        snprintf(f->detail[index], sizeof f->detail[index], "%s", ptsc_last_error());
    return rc;
}

Test(omp, run_returns_lowest_failing_thread_status)
{
    ptsc_test_init(T, NULL);
    struct fail f;
    memset(&f, 0, sizeof f);
    PTSC_ASSERT_RC(ptsc_omp_run(T, fail_some, &f), PTSC_ERR_ARG);
    cr_assert_str_not_empty(f.detail[1], "thread 1 recorded no detail");
    cr_expect(strstr(ptsc_last_error(), f.detail[1]) != NULL,
              "caller's detail \"%s\" does not carry thread 1's \"%s\"", ptsc_last_error(), f.detail[1]);
    cr_expect(strstr(ptsc_last_error(), f.detail[3]) == NULL || f.detail[3][0] == '\0',
              "caller's detail is thread 3's: \"%s\"", ptsc_last_error());
    /* The failing threads were detached too. */
    for (int i = 0; i < T; i++) {
        PTSC_ASSERT_OK(ptsc_thread_attach(i, NULL));
        PTSC_ASSERT_OK(ptsc_thread_detach());
    }
    ptsc_test_finalize();
}

static int fail_only_3(ptsc_ctx_t *ctx, void *arg)
{
    int index = -1;
    ptsc_ctx_index(ctx, &index);
    return index == 3 ? ptsc_recv(ctx, NULL, 4, MPI_INT, 0, 0, 0) : PTSC_OK; /* PTSC_ERR_NULL_BUFFER */
}

Test(omp, run_propagates_a_single_error)
{
    ptsc_test_init(T, NULL);
    PTSC_ASSERT_RC(ptsc_omp_run(T, fail_only_3, NULL), PTSC_ERR_NULL_BUFFER);
    cr_expect_str_not_empty(ptsc_last_error());
    ptsc_test_finalize();
}

/* The caller is attached as index 1: OpenMP thread 0 cannot attach (it is
 * attached as another index) nor can thread 1 (its index is taken). Then no
 * thread runs fn: a body that waits for its peers would wait forever. */
Test(omp, run_runs_no_thread_when_one_cannot_attach)
{
    ptsc_test_init(T, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(1, NULL));
    struct seen s;
    memset(&s, 0, sizeof s);
    int rc = ptsc_omp_run(T, record, &s);
    cr_expect_neq(rc, PTSC_OK, "ptsc_omp_run succeeded although two threads could not attach");
    cr_expect_eq(s.calls, 0, "fn ran on %d threads although two could not attach", s.calls);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    /* The threads that did attach were detached again. */
    for (int i = 0; i < T; i++) {
        PTSC_ASSERT_OK(ptsc_thread_attach(i, NULL));
        PTSC_ASSERT_OK(ptsc_thread_detach());
    }
    ptsc_test_finalize();
}

static int nested_run(ptsc_ctx_t *ctx, void *arg)
{
    int *rcs = arg, index = -1;
    struct seen s;
    memset(&s, 0, sizeof s);
    ptsc_ctx_index(ctx, &index);
    rcs[index] = ptsc_omp_run(2, record, &s);
    return s.calls == 0 ? PTSC_OK : PTSC_ERR_INTERNAL;
}

Test(omp, nested_run_is_refused)
{
    ptsc_test_init(T, NULL);
    int rcs[T];
    for (int i = 0; i < T; i++)
        rcs[i] = 1;
    PTSC_ASSERT_OK(ptsc_omp_run(T, nested_run, rcs));
    for (int i = 0; i < T; i++)
        PTSC_ASSERT_RC(rcs[i], PTSC_ERR_NESTED);
    ptsc_test_finalize();
}

Test(omp, run_inside_program_region_is_refused)
{
    ptsc_test_init(T, NULL);
    int rcs[2] = {1, 1};
#pragma omp parallel num_threads(2)
    {
        struct seen s;
        memset(&s, 0, sizeof s);
        rcs[omp_get_thread_num()] = ptsc_omp_run(2, record, &s);
    }
    PTSC_ASSERT_RC(rcs[0], PTSC_ERR_NESTED);
    PTSC_ASSERT_RC(rcs[1], PTSC_ERR_NESTED);
    ptsc_test_finalize();
}

Test(omp, attach_in_program_region)
{
    ptsc_test_init(T, NULL);
    int idx[T], rcs[T], again[T];
    for (int i = 0; i < T; i++)
        idx[i] = rcs[i] = again[i] = -100;
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num();
        ptsc_ctx_t *ctx = NULL, *ctx2 = NULL;
        rcs[t] = ptsc_omp_attach(&ctx);
        if (rcs[t] == PTSC_OK)
            ptsc_ctx_index(ctx, &idx[t]);
        /* A second call returns the same context. */
        again[t] = ptsc_omp_attach(&ctx2);
        if (again[t] == PTSC_OK && ctx2 != ctx)
            again[t] = PTSC_ERR_INTERNAL;
        ptsc_thread_detach();
    }
    for (int t = 0; t < T; t++) {
        PTSC_ASSERT_RC(rcs[t], PTSC_OK);
        PTSC_ASSERT_RC(again[t], PTSC_OK);
        cr_expect_eq(idx[t], t, "OpenMP thread %d attached as %d", t, idx[t]);
    }
    ptsc_test_finalize();
}

Test(omp, attach_in_nested_region_is_refused)
{
    ptsc_test_init(T, NULL);
    int rcs[2][2] = {{1, 1}, {1, 1}}, levels[2][2] = {{0, 0}, {0, 0}};
    omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2)
    {
        int outer = omp_get_thread_num();
#pragma omp parallel num_threads(2)
        {
            ptsc_ctx_t *ctx = NULL;
            int inner = omp_get_thread_num();
            levels[outer][inner] = omp_get_active_level();
            rcs[outer][inner] = ptsc_omp_attach(&ctx);
            if (rcs[outer][inner] == PTSC_OK)
                ptsc_thread_detach();
        }
    }
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 2; i++) {
            cr_expect_eq(levels[o][i], 2, "nested region not active (level %d)", levels[o][i]);
            PTSC_ASSERT_RC(rcs[o][i], PTSC_ERR_NESTED);
        }
    ptsc_test_finalize();
}

/* The work of a team: every thread of ptsc_omp_run sends to every other
 * thread of the rank and receives from each, over its own lane. */
static int ring(ptsc_ctx_t *ctx, void *arg)
{
    int me = -1, n = T, *bad = arg;
    ptsc_ctx_index(ctx, &me);
    int out = 1000 + me, in = -1;
    int rc =
        ptsc_sendrecv(ctx, &out, 1, MPI_INT, 0, (me + 1) % n, 7, &in, 1, MPI_INT, 0, (me + n - 1) % n, 7);
    if (rc == PTSC_OK && in != 1000 + (me + n - 1) % n)
        __atomic_add_fetch(bad, 1, __ATOMIC_SEQ_CST);
    return rc;
}

Test(omp, run_threads_can_message_each_other)
{
    ptsc_test_init(T, NULL);
    int bad = 0;
    PTSC_ASSERT_OK(ptsc_omp_run(T, ring, &bad));
    cr_expect_eq(bad, 0, "%d threads received the wrong value on the ring", bad);
    ptsc_test_finalize();
}
