/* Life-cycle faults: finalize while other threads exit or stay attached,
 * calls after finalize, init from two threads at once, the lazy-attach index
 * rule, stale contexts of ended threads, and what ptsc_last_error() holds. */
#include "test_util.h"

#include <omp.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(lifecycle, .init = ptsc_test_clean_env, .timeout = 120);

/* ------------------------------------------------------------------------ */
/* Finalize while other threads exit (each case in a fresh process)          */
/* ------------------------------------------------------------------------ */

#define FIN_THREADS 16

struct fin_worker {
    int index, stay;
    int rc_attach, rc_traffic, got;
    int rc_after_sync, rc_after_detach, rc_after_self;
};

static pthread_barrier_t fin_start, fin_done;

static void *fin_worker_main(void *p)
{
    struct fin_worker *w = p;
    int out = 1000 + w->index, in = -1;
    ptsc_request_t r[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    w->rc_attach = ptsc_thread_attach(w->index, NULL);
    /* Some traffic to itself, so the context has engine state and counters. */
    w->rc_traffic = ptsc_irecv(NULL, &in, 1, MPI_INT, 0, w->index, 5, &r[0]);
    if (w->rc_traffic == PTSC_OK)
        w->rc_traffic = ptsc_isend(NULL, &out, 1, MPI_INT, 0, w->index, 5, &r[1]);
    if (w->rc_traffic == PTSC_OK)
        w->rc_traffic = ptsc_waitall(2, r);
    w->got = in;
    pthread_barrier_wait(&fin_start);
    if (!w->stay)
        return NULL; /* exits attached, while the main thread finalizes */
    pthread_barrier_wait(&fin_done);
    /* ptsc_finalize took this thread's context over: every call is refused. */
    ptsc_ctx_t *ctx = NULL;
    w->rc_after_sync = ptsc_sync(NULL, PTSC_SCOPE_NONE);
    w->rc_after_self = ptsc_self(&ctx);
    w->rc_after_detach = ptsc_thread_detach();
    return NULL;
}

/* Runs in a forked child; returns its exit code (0: every check passed). */
static int finalize_while_threads_exit(void)
{
    setenv("PTSC_MAX_THREADS", "16", 1);
    if (ptsc_init(NULL, NULL) != PTSC_OK)
        return 10;
    struct fin_worker w[FIN_THREADS];
    pthread_t th[FIN_THREADS];
    pthread_barrier_init(&fin_start, NULL, FIN_THREADS);
    pthread_barrier_init(&fin_done, NULL, FIN_THREADS / 2);
    for (int i = 1; i < FIN_THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].index = i;
        w[i].stay = i % 2 == 0; /* 7 stay attached, 8 exit during finalize */
        w[i].rc_attach = w[i].rc_traffic = PTSC_ERR_INTERNAL;
        if (pthread_create(&th[i], NULL, fin_worker_main, &w[i]) != 0)
            return 11;
    }
    if (ptsc_thread_attach(0, NULL) != PTSC_OK)
        return 12;
    pthread_barrier_wait(&fin_start);
    int rc = ptsc_finalize();
    pthread_barrier_wait(&fin_done);
    for (int i = 1; i < FIN_THREADS; i++)
        pthread_join(th[i], NULL);
    if (rc != PTSC_OK) {
        fprintf(stderr, "ptsc_finalize: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        return 13;
    }
    for (int i = 1; i < FIN_THREADS; i++) {
        if (w[i].rc_attach != PTSC_OK || w[i].rc_traffic != PTSC_OK || w[i].got != 1000 + i) {
            fprintf(stderr, "thread %d: attach %d traffic %d got %d\n", i, w[i].rc_attach, w[i].rc_traffic,
                    w[i].got);
            return 14;
        }
        if (w[i].stay &&
            (w[i].rc_after_sync != PTSC_ERR_FINALIZED || w[i].rc_after_self != PTSC_ERR_FINALIZED ||
             w[i].rc_after_detach != PTSC_ERR_FINALIZED)) {
            fprintf(stderr, "thread %d after finalize: sync %s self %s detach %s\n", i,
                    ptsc_status_name(w[i].rc_after_sync), ptsc_status_name(w[i].rc_after_self),
                    ptsc_status_name(w[i].rc_after_detach));
            return 15;
        }
    }
    return 0;
}

static void expect_children_pass(int (*fn)(void), int reps, const char *what)
{
    for (int k = 0; k < reps; k++) {
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_neq(pid, -1, "fork failed");
        if (pid == 0)
            _exit(fn());
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status), "%s, run %d: the process died of signal %d", what, k,
                  WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        cr_assert_eq(WEXITSTATUS(status), 0, "%s, run %d: check %d failed", what, k, WEXITSTATUS(status));
    }
}

Test(lifecycle, finalize_while_threads_exit_or_stay_attached)
{
    expect_children_pass(finalize_while_threads_exit, 8, "finalize while 8 threads exit and 7 stay attached");
}

/* ------------------------------------------------------------------------ */
/* Init from two threads at once                                             */
/* ------------------------------------------------------------------------ */

static pthread_barrier_t init_bar;

static void *init_thread(void *p)
{
    int *rc = p;
    pthread_barrier_wait(&init_bar);
    *rc = ptsc_init(NULL, NULL);
    /* Whichever call returned, ptsc is ready for this thread now. */
    int flag = 0;
    if (ptsc_initialized(&flag) != PTSC_OK || !flag)
        *rc = PTSC_ERR_INTERNAL;
    return NULL;
}

Test(lifecycle, init_from_two_threads_at_once)
{
    setenv("PTSC_MAX_THREADS", "2", 1);
    int rc[2] = {1, 1};
    pthread_t th[2];
    pthread_barrier_init(&init_bar, NULL, 2);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, init_thread, &rc[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int ok = (rc[0] == PTSC_OK) + (rc[1] == PTSC_OK);
    int again = (rc[0] == PTSC_ERR_ALREADY_INITIALIZED) + (rc[1] == PTSC_ERR_ALREADY_INITIALIZED);
    cr_expect(ok == 1 && again == 1,
              "concurrent inits returned %s and %s; expected one PTSC_OK and one "
              "PTSC_ERR_ALREADY_INITIALIZED",
              ptsc_status_name(rc[0]), ptsc_status_name(rc[1]));
    int n = 0;
    PTSC_ASSERT_OK(ptsc_size(NULL, &n));
    cr_expect_eq(n, 2);
    ptsc_test_finalize();
}

/* ------------------------------------------------------------------------ */
/* The lazy-attach index rule                                                */
/* ------------------------------------------------------------------------ */

struct holder {
    int index, rc;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int attached, release;
};

static void *holder_main(void *p)
{
    struct holder *h = p;
    h->rc = ptsc_thread_attach(h->index, NULL);
    pthread_mutex_lock(&h->mu);
    h->attached = 1;
    pthread_cond_broadcast(&h->cv);
    while (!h->release)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    if (h->rc == PTSC_OK)
        ptsc_thread_detach();
    return NULL;
}

static void holder_start(struct holder *h, pthread_t *th, int index)
{
    memset(h, 0, sizeof *h);
    h->index = index;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    cr_assert_eq(pthread_create(th, NULL, holder_main, h), 0);
    pthread_mutex_lock(&h->mu);
    while (!h->attached)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    PTSC_ASSERT_RC(h->rc, PTSC_OK);
}

static void holder_stop(struct holder *h, pthread_t th)
{
    pthread_mutex_lock(&h->mu);
    h->release = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(th, NULL);
}

#define TEAM 3

/* Every thread of a team of TEAM attaches lazily; rc and index per thread. */
static void lazy_team(int rc[TEAM], int idx[TEAM], char detail[TEAM][512])
{
#pragma omp parallel num_threads(TEAM)
    {
        int t = omp_get_thread_num();
        ptsc_ctx_t *ctx = NULL;
        idx[t] = -1;
        rc[t] = omp_get_num_threads() == TEAM ? ptsc_self(&ctx) : PTSC_ERR_UNSUPPORTED;
        snprintf(detail[t], 512, "%s", ptsc_last_error());
        if (rc[t] == PTSC_OK)
            ptsc_ctx_index(ctx, &idx[t]);
#pragma omp barrier
        if (rc[t] == PTSC_OK)
            ptsc_thread_detach();
    }
}

Test(lifecycle, lazy_attach_takes_the_omp_thread_number_or_fails_clearly)
{
    ptsc_test_init(6, NULL);
    struct holder h;
    pthread_t th;
    holder_start(&h, &th, 0); /* a helper pthread holds index 0 */
    int rc[TEAM], idx[TEAM];
    char detail[TEAM][512];
    lazy_team(rc, idx, detail);
    /* OpenMP thread 0's index is taken: a clear error, not another index. */
    PTSC_ASSERT_RC(rc[0], PTSC_ERR_THREAD_TAKEN);
    cr_expect(strstr(detail[0], "OpenMP thread 0") != NULL, "detail \"%s\" does not name OpenMP thread 0",
              detail[0]);
    cr_expect_eq(idx[0], -1);
    for (int t = 1; t < TEAM; t++) {
        PTSC_ASSERT_RC(rc[t], PTSC_OK);
        cr_expect_eq(idx[t], t, "OpenMP thread %d attached lazily as index %d", t, idx[t]);
    }
    holder_stop(&h, th);

    /* A helper on an index outside the team changes nothing for the team. */
    holder_start(&h, &th, 4);
    lazy_team(rc, idx, detail);
    for (int t = 0; t < TEAM; t++) {
        PTSC_ASSERT_RC(rc[t], PTSC_OK);
        cr_expect_eq(idx[t], t, "OpenMP thread %d attached lazily as index %d", t, idx[t]);
    }
    holder_stop(&h, th);
    ptsc_test_finalize();
}

Test(lifecycle, lazy_attach_of_an_omp_thread_beyond_the_slots_fails)
{
    ptsc_test_init(2, NULL);
    int rc[TEAM], idx[TEAM];
    char detail[TEAM][512];
    lazy_team(rc, idx, detail);
    PTSC_ASSERT_RC(rc[0], PTSC_OK);
    PTSC_ASSERT_RC(rc[1], PTSC_OK);
    cr_expect_eq(idx[0], 0);
    cr_expect_eq(idx[1], 1);
    /* Thread 2 has no slot of its number: refused, not given a lower index. */
    PTSC_ASSERT_RC(rc[2], PTSC_ERR_THREAD);
    cr_expect(strstr(detail[2], "OpenMP thread 2") != NULL, "detail \"%s\"", detail[2]);
    ptsc_test_finalize();
}

Test(lifecycle, lazy_attach_in_a_nested_active_region_is_refused)
{
    ptsc_test_init(8, NULL);
    omp_set_max_active_levels(2);
    int rc[2][2];
    memset(rc, 0, sizeof rc);
#pragma omp parallel num_threads(2)
    {
        int outer = omp_get_thread_num();
#pragma omp parallel num_threads(2)
        {
            int inner = omp_get_thread_num();
            ptsc_ctx_t *ctx = NULL;
            int r = omp_get_active_level() == 2 ? ptsc_self(&ctx) : PTSC_ERR_UNSUPPORTED;
            rc[outer][inner] = r;
            if (r == PTSC_OK)
                ptsc_thread_detach();
        }
    }
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 2; i++)
            PTSC_ASSERT_RC(rc[o][i], PTSC_ERR_NESTED);
    ptsc_test_finalize();
}

static void *lazy_pthread(void *p)
{
    int *idx = p;
    ptsc_ctx_t *ctx = NULL;
    *idx = -1;
    if (ptsc_self(&ctx) == PTSC_OK) {
        ptsc_ctx_index(ctx, idx);
        ptsc_thread_detach();
    }
    return NULL;
}

Test(lifecycle, lazy_attach_of_a_plain_thread_takes_the_lowest_free_index)
{
    ptsc_test_init(4, NULL);
    struct holder h0, h1;
    pthread_t t0, t1, th;
    holder_start(&h0, &t0, 0);
    holder_start(&h1, &t1, 2);
    int idx = -1;
    cr_assert_eq(pthread_create(&th, NULL, lazy_pthread, &idx), 0);
    pthread_join(th, NULL);
    cr_expect_eq(idx, 1, "a plain thread attached lazily as index %d, expected the lowest free (1)", idx);
    holder_stop(&h0, t0);
    holder_stop(&h1, t1);
    ptsc_test_finalize();
}

/* ------------------------------------------------------------------------ */
/* Contexts of other and of ended threads                                    */
/* ------------------------------------------------------------------------ */

struct ended {
    ptsc_ctx_t *ctx;
    int rc, index;
    ptsc_ctx_t *stale;
    int rc_stale_index, rc_stale_sync, stale_is_own, got;
};

static void *attach_and_end(void *p)
{
    struct ended *e = p;
    e->rc = ptsc_thread_attach(1, &e->ctx);
    return NULL; /* ends attached */
}

static void *reuse_index(void *p)
{
    struct ended *e = p;
    ptsc_ctx_t *ctx = NULL;
    e->rc = ptsc_thread_attach(1, &ctx);
    if (e->rc != PTSC_OK)
        return NULL;
    ptsc_ctx_index(ctx, &e->index);
    e->stale_is_own = ctx == e->stale;
    int out = -1;
    e->rc_stale_index = ptsc_ctx_index(e->stale, &out);
    e->rc_stale_sync = ptsc_sync(e->stale, PTSC_SCOPE_NONE);
    /* The message sent to (0, 1) while nobody held index 1 is this thread's now. */
    e->got = -1;
    if (ptsc_recv(ctx, &e->got, 1, MPI_INT, 0, 0, 3) != PTSC_OK)
        e->got = -2;
    ptsc_thread_detach();
    return NULL;
}

Test(lifecycle, index_reused_after_its_thread_ended)
{
    ptsc_test_init(2, NULL);
    ptsc_ctx_t *me = NULL;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &me));
    struct ended e;
    memset(&e, 0, sizeof e);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, attach_and_end, &e), 0);
    pthread_join(th, NULL);
    PTSC_ASSERT_RC(e.rc, PTSC_OK);
    ptsc_ctx_t *stale = e.ctx;

    /* The ended thread's context is gone: refused without being read. */
    int x = -7;
    PTSC_ASSERT_ERR(ptsc_ctx_index(stale, &x), PTSC_ERR_WRONG_THREAD);
    cr_expect_eq(x, -7, "output written by a refused accessor");
    PTSC_ASSERT_ERR(ptsc_sync(stale, PTSC_SCOPE_NONE), PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_ERR(ptsc_send(stale, &x, 1, MPI_INT, 0, 0, 0), PTSC_ERR_WRONG_THREAD);

    /* A message to index 1 while no thread holds it waits for the next holder
     * (non-blocking: MPI may wait for the receive even of a small send). */
    int msg = 4242;
    ptsc_request_t sreq = PTSC_REQUEST_NULL;
    PTSC_ASSERT_OK(ptsc_isend(me, &msg, 1, MPI_INT, 0, 1, 3, &sreq));

    memset(&e, 0, sizeof e);
    e.stale = stale;
    cr_assert_eq(pthread_create(&th, NULL, reuse_index, &e), 0);
    pthread_join(th, NULL);
    PTSC_ASSERT_RC(e.rc, PTSC_OK);
    cr_expect_eq(e.index, 1);
    if (!e.stale_is_own) { /* the new context may sit at the old address: then it is this thread's own */
        PTSC_ASSERT_RC(e.rc_stale_index, PTSC_ERR_WRONG_THREAD);
        PTSC_ASSERT_RC(e.rc_stale_sync, PTSC_ERR_WRONG_THREAD);
    }
    cr_expect_eq(e.got, 4242, "the new holder of index 1 received %d", e.got);
    PTSC_ASSERT_OK(ptsc_wait(&sreq));
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

struct reader {
    ptsc_ctx_t *ctx;
    int rc_stats, rc_scope, rc_index, rc_device, rc_stream, rc_comm;
    ptsc_stats_t st;
    char detail[512];
};

static void *read_foreign(void *p)
{
    struct reader *r = p;
    ptsc_scope_t s;
    int i;
    void *sv;
    MPI_Comm c;
    memset(&r->st, 0xab, sizeof r->st);
    r->rc_stats = ptsc_ctx_stats(r->ctx, &r->st);
    snprintf(r->detail, sizeof r->detail, "%s", ptsc_last_error());
    r->rc_scope = ptsc_ctx_scope(r->ctx, &s);
    r->rc_index = ptsc_ctx_index(r->ctx, &i);
    r->rc_device = ptsc_ctx_device(r->ctx, &i);
    r->rc_stream = ptsc_ctx_stream(r->ctx, &sv);
    r->rc_comm = ptsc_ctx_comm(r->ctx, &c);
    return NULL;
}

Test(lifecycle, accessors_refuse_another_threads_context)
{
    ptsc_test_init(2, NULL);
    struct reader r;
    memset(&r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &r.ctx));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, read_foreign, &r), 0);
    pthread_join(th, NULL);
    PTSC_ASSERT_RC(r.rc_stats, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(r.rc_scope, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(r.rc_index, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(r.rc_device, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(r.rc_stream, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(r.rc_comm, PTSC_ERR_WRONG_THREAD);
    cr_expect(strstr(r.detail, "index 0") != NULL, "detail \"%s\" does not name the owner's index", r.detail);
    cr_expect_eq(r.st.sends, 0xababababababababull, "stats written by a refused call");
    /* The owner still reads its own. */
    ptsc_stats_t st;
    PTSC_ASSERT_OK(ptsc_ctx_stats(r.ctx, &st));
    cr_expect_eq(st.sends, 0);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

/* ------------------------------------------------------------------------ */
/* ptsc_last_error()                                                         */
/* ------------------------------------------------------------------------ */

Test(lifecycle, last_error_is_cleared_by_a_successful_operation)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_RC(ptsc_thread_attach(9, NULL), PTSC_ERR_THREAD);
    cr_assert_str_not_empty(ptsc_last_error());
    PTSC_ASSERT_OK(ptsc_sync(NULL, PTSC_SCOPE_NONE));
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_sync the detail is \"%s\"",
                        ptsc_last_error());

    int x = 5, y = 0;
    PTSC_ASSERT_RC(ptsc_send(NULL, &x, 1, MPI_INT, 0, 7, 0), PTSC_ERR_THREAD);
    cr_assert_str_not_empty(ptsc_last_error());
    ptsc_request_t r = PTSC_REQUEST_NULL;
    PTSC_ASSERT_OK(ptsc_irecv(NULL, &y, 1, MPI_INT, 0, 0, 1, &r));
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_irecv: \"%s\"", ptsc_last_error());
    PTSC_ASSERT_RC(ptsc_thread_attach(0, NULL), PTSC_ERR_ALREADY_ATTACHED);
    PTSC_ASSERT_OK(ptsc_send(NULL, &x, 1, MPI_INT, 0, 0, 1));
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_send: \"%s\"", ptsc_last_error());
    PTSC_ASSERT_RC(ptsc_thread_attach(0, NULL), PTSC_ERR_ALREADY_ATTACHED);
    PTSC_ASSERT_OK(ptsc_wait(&r));
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_wait: \"%s\"", ptsc_last_error());
    cr_expect_eq(y, 5);
    PTSC_ASSERT_RC(ptsc_thread_attach(0, NULL), PTSC_ERR_ALREADY_ATTACHED);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_thread_detach: \"%s\"",
                        ptsc_last_error());
    /* A lazy attach that succeeds leaves nothing behind either. */
    PTSC_ASSERT_OK(ptsc_self(NULL));
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_self: \"%s\"", ptsc_last_error());
    PTSC_ASSERT_RC(ptsc_thread_attach(0, NULL), PTSC_ERR_ALREADY_ATTACHED);
    ptsc_test_finalize();
    cr_expect_str_empty(ptsc_last_error(), "after a successful ptsc_finalize: \"%s\"", ptsc_last_error());
}

/* Without PTSC_ASSERT_RC, which reads ptsc_last_error() for its message. */
#define EXPECT_RC(call, expected) cr_expect_eq((call), (expected), "%s", #call)

Test(lifecycle, queries_keep_the_detail_of_a_failed_operation)
{
    ptsc_test_init(2, NULL);
    EXPECT_RC(ptsc_thread_attach(9, NULL), PTSC_ERR_THREAD);
    /* Successful queries, as a program makes while reporting, leave it. */
    int rank = -1, n = 0;
    ptsc_ctx_t *ctx = NULL;
    EXPECT_RC(ptsc_rank(&rank), PTSC_OK);
    EXPECT_RC(ptsc_size(NULL, &n), PTSC_OK);
    EXPECT_RC(ptsc_initialized(&n), PTSC_OK);
    /* So do failing queries while the detail is unread ... */
    EXPECT_RC(ptsc_rank(NULL), PTSC_ERR_ARG);
    EXPECT_RC(ptsc_ctx_index(ctx, &rank), PTSC_ERR_ARG);
    EXPECT_RC(ptsc_initialized(NULL), PTSC_ERR_ARG);
    char d[512];
    snprintf(d, sizeof d, "%s", ptsc_last_error());
    cr_expect(strstr(d, "ptsc_thread_attach") != NULL, "a query replaced the unread detail: \"%s\"", d);
    /* ... but once read, the next failure is reported. */
    EXPECT_RC(ptsc_rank(NULL), PTSC_ERR_ARG);
    snprintf(d, sizeof d, "%s", ptsc_last_error());
    cr_expect(strstr(d, "ptsc_rank") != NULL, "detail \"%s\"", d);
    ptsc_test_finalize();
}

Test(lifecycle, a_failed_init_keeps_its_detail_through_a_failing_query)
{
    setenv("PTSC_SYNC_SCOPE", "bogus", 1);
    EXPECT_RC(ptsc_init(NULL, NULL), PTSC_ERR_CONFIG);
    int rank = -1;
    /* The program asks for its rank to print with the error: refused, but the
     * detail still names the bad variable. */
    EXPECT_RC(ptsc_rank(&rank), PTSC_ERR_NOT_INITIALIZED);
    char d[512];
    snprintf(d, sizeof d, "%s", ptsc_last_error());
    cr_expect(strstr(d, "PTSC_SYNC_SCOPE") != NULL, "detail \"%s\"", d);
}
