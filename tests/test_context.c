/* Process and thread life cycle: init, finalize, attach, detach, lazy
 * attach, thread exit, accessors and ownership of contexts. */
#include "test_util.h"

#include <omp.h>
#include <pthread.h>

TestSuite(context, .init = ptsc_test_clean_env, .timeout = 60);

Test(context, use_before_init)
{
    ptsc_ctx_t *ctx = NULL;
    int x = 0;
    PTSC_ASSERT_ERR(ptsc_thread_attach(0, &ctx), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_self(&ctx), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_omp_attach(&ctx), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_thread_detach(), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_rank(&x), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_size(&x, &x), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_tag_max(&x), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_features(&x, &x, &x), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_sync(NULL, PTSC_SCOPE_NONE), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_send(NULL, &x, 1, MPI_INT, 0, 0, 0), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_barrier(NULL), PTSC_ERR_NOT_INITIALIZED);
    PTSC_ASSERT_ERR(ptsc_finalize(), PTSC_ERR_NOT_INITIALIZED);
    cr_expect_null(ctx, "context written by a failing call");
    int flag = -1;
    PTSC_ASSERT_OK(ptsc_initialized(&flag));
    cr_expect_eq(flag, 0);
    int mpi = 1;
    MPI_Initialized(&mpi);
    cr_expect_eq(mpi, 0, "a failing call initialised MPI");
}

Test(context, init_and_finalize)
{
    int flag = -1, rank = -1, nranks = -1, nthreads = -1;
    ptsc_test_init(3, NULL);
    PTSC_ASSERT_OK(ptsc_initialized(&flag));
    cr_expect_eq(flag, 1);
    PTSC_ASSERT_OK(ptsc_rank(&rank));
    PTSC_ASSERT_OK(ptsc_size(&nranks, &nthreads));
    cr_expect_eq(rank, 0);
    cr_expect_eq(nranks, 1);
    cr_expect_eq(nthreads, 3, "PTSC_MAX_THREADS=3 but %d slots", nthreads);
    PTSC_ASSERT_OK(ptsc_size(NULL, NULL));
    int mpi = 0;
    MPI_Initialized(&mpi);
    cr_expect_eq(mpi, 1, "ptsc_init did not initialise MPI");
    int level = -1;
    MPI_Query_thread(&level);
    cr_expect_eq(level, MPI_THREAD_MULTIPLE);
    int cuda = -1, aware = -1, staging = -1;
    PTSC_ASSERT_OK(ptsc_features(&cuda, &aware, &staging));
    cr_expect(cuda == 0 || cuda == 1);
    if (!cuda)
        cr_expect_eq(staging, 0, "staging on without a GPU");
    PTSC_ASSERT_OK(ptsc_features(NULL, NULL, NULL));
    ptsc_test_finalize();
    PTSC_ASSERT_OK(ptsc_initialized(&flag));
    cr_expect_eq(flag, 0);
    int fin = 0;
    MPI_Finalized(&fin);
    cr_expect_eq(fin, 1, "ptsc_finalize did not finalise the MPI that ptsc_init started");
}

/* PTSC_MAX_THREADS=auto: omp_get_max_threads() where it is larger than the
 * floor of 16 slots (tests/test_config.c covers the whole rule). */
Test(context, max_threads_auto_follows_omp_max)
{
    setenv("PTSC_MAX_THREADS", "auto", 1);
    unsetenv("OMP_NUM_THREADS");
    unsetenv("OMP_THREAD_LIMIT");
    omp_set_num_threads(24);
    PTSC_ASSERT_OK(ptsc_init(NULL, NULL));
    int n = -1;
    PTSC_ASSERT_OK(ptsc_size(NULL, &n));
    cr_expect_eq(n, 24, "PTSC_MAX_THREADS=auto gave %d slots, omp_get_max_threads() is %d", n,
                 omp_get_max_threads());
    ptsc_test_finalize();
}

/* The default covers a region wider than omp_get_max_threads(), such as
 * num_threads(4) on a 2-core machine: every thread attaches. */
Test(context, max_threads_auto_covers_wider_region)
{
    unsetenv("OMP_NUM_THREADS");
    unsetenv("OMP_THREAD_LIMIT");
    omp_set_num_threads(2);
    PTSC_ASSERT_OK(ptsc_init(NULL, NULL));
    int n = -1, ok = 0, seen = 0;
    PTSC_ASSERT_OK(ptsc_size(NULL, &n));
    cr_expect_eq(n, 16, "PTSC_MAX_THREADS=auto with omp_get_max_threads() 2 gave %d slots", n);
#pragma omp parallel num_threads(4) reduction(+ : ok, seen)
    {
        ptsc_ctx_t *ctx = NULL;
        seen = 1;
        if (ptsc_omp_attach(&ctx) == PTSC_OK && ptsc_thread_detach() == PTSC_OK)
            ok = 1;
    }
    cr_expect_eq(seen, 4, "OpenMP gave %d threads of 4", seen);
    cr_expect_eq(ok, seen, "%d of %d threads of a num_threads(4) region attached", ok, seen);
    ptsc_test_finalize();
}

Test(context, double_init)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_ERR(ptsc_init(NULL, NULL), PTSC_ERR_ALREADY_INITIALIZED);
    int flag = 0;
    PTSC_ASSERT_OK(ptsc_initialized(&flag));
    cr_expect_eq(flag, 1, "a refused second init broke the first");
    ptsc_test_finalize();
}

Test(context, use_after_finalize)
{
    ptsc_test_init(2, NULL);
    ptsc_test_finalize();
    ptsc_ctx_t *ctx = NULL;
    int x = 0;
    PTSC_ASSERT_ERR(ptsc_init(NULL, NULL), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_finalize(), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_thread_attach(0, &ctx), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_self(&ctx), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_thread_detach(), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_rank(&x), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_sync(NULL, PTSC_SCOPE_NONE), PTSC_ERR_FINALIZED);
    PTSC_ASSERT_ERR(ptsc_recv(NULL, &x, 1, MPI_INT, 0, 0, 0), PTSC_ERR_FINALIZED);
    cr_expect_null(ctx);
}

Test(context, program_owned_mpi_is_left_running)
{
    int provided = -1;
    cr_assert_eq(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
    cr_assert_eq(provided, MPI_THREAD_MULTIPLE);
    ptsc_test_init(2, NULL);
    ptsc_test_finalize();
    int fin = 1;
    MPI_Finalized(&fin);
    cr_expect_eq(fin, 0, "ptsc_finalize finalised an MPI the program initialised");
    /* MPI is still usable by the program. */
    int one = 1, sum = 0;
    cr_expect_eq(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    cr_expect_eq(sum, 1);
    MPI_Finalize();
}

Test(context, attach_detach_and_accessors)
{
    setenv("PTSC_SYNC_SCOPE", "device", 1);
    ptsc_test_init(4, NULL);
    ptsc_ctx_t *ctx = NULL, *self = NULL;
    PTSC_ASSERT_OK(ptsc_thread_attach(2, &ctx));
    cr_assert_not_null(ctx);
    PTSC_ASSERT_OK(ptsc_self(&self));
    cr_expect_eq(self, ctx, "ptsc_self after attach returned another context");

    int index = -1, device = -7;
    void *stream = (void *)&index;
    MPI_Comm comm = MPI_COMM_NULL;
    ptsc_scope_t scope = PTSC_SCOPE_DEFAULT;
    ptsc_stats_t st;
    memset(&st, 0xff, sizeof st);
    PTSC_ASSERT_OK(ptsc_ctx_index(ctx, &index));
    cr_expect_eq(index, 2);
    PTSC_ASSERT_OK(ptsc_ctx_device(ctx, &device));
    int cuda = 0;
    PTSC_ASSERT_OK(ptsc_features(&cuda, NULL, NULL));
    if (!cuda) {
        cr_expect_eq(device, -1, "device %d without a GPU", device);
        PTSC_ASSERT_OK(ptsc_ctx_stream(ctx, &stream));
        cr_expect_null(stream, "stream without a GPU");
    } else {
        cr_expect_geq(device, 0);
    }
    PTSC_ASSERT_OK(ptsc_ctx_comm(ctx, &comm));
    cr_expect_neq(comm, MPI_COMM_NULL);
    PTSC_ASSERT_OK(ptsc_ctx_scope(ctx, &scope));
    cr_expect_eq(scope, PTSC_SCOPE_DEVICE, "PTSC_SYNC_SCOPE=device, context scope %d", scope);
    PTSC_ASSERT_OK(ptsc_ctx_stats(ctx, &st));
    cr_expect_eq(st.sends, 0);
    cr_expect_eq(st.recvs, 0);
    cr_expect_eq(st.collectives, 0);
    cr_expect_eq(st.syncs, 0);

    PTSC_ASSERT_ERR(ptsc_ctx_index(ctx, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_ctx_scope(ctx, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_ctx_stats(ctx, NULL), PTSC_ERR_ARG);

    PTSC_ASSERT_OK(ptsc_thread_detach());
    PTSC_ASSERT_ERR(ptsc_thread_detach(), PTSC_ERR_NOT_ATTACHED);
    /* The index is free again, for this thread too. */
    PTSC_ASSERT_OK(ptsc_thread_attach(2, &ctx));
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(context, attach_without_output)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(1, NULL));
    ptsc_ctx_t *ctx = NULL;
    int index = -1;
    PTSC_ASSERT_OK(ptsc_self(&ctx));
    PTSC_ASSERT_OK(ptsc_ctx_index(ctx, &index));
    cr_expect_eq(index, 1);
    ptsc_test_finalize(); /* with the thread still attached: finalize frees it */
}

Test(context, index_out_of_range)
{
    ptsc_test_init(4, NULL);
    ptsc_ctx_t *ctx = NULL;
    PTSC_ASSERT_ERR(ptsc_thread_attach(4, &ctx), PTSC_ERR_THREAD);
    PTSC_ASSERT_ERR(ptsc_thread_attach(-1, &ctx), PTSC_ERR_THREAD);
    PTSC_ASSERT_ERR(ptsc_thread_attach(1 << 30, &ctx), PTSC_ERR_THREAD);
    cr_expect_null(ctx);
    PTSC_ASSERT_OK(ptsc_thread_attach(3, &ctx));
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(context, double_attach)
{
    ptsc_test_init(4, NULL);
    ptsc_ctx_t *ctx = NULL, *other = NULL;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    PTSC_ASSERT_ERR(ptsc_thread_attach(1, &other), PTSC_ERR_ALREADY_ATTACHED);
    PTSC_ASSERT_ERR(ptsc_thread_attach(0, &other), PTSC_ERR_ALREADY_ATTACHED);
    cr_expect_null(other);
    /* The failed attaches left index 1 free and kept index 0. */
    int index = -1;
    PTSC_ASSERT_OK(ptsc_ctx_index(ctx, &index));
    cr_expect_eq(index, 0);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

struct attempt {
    int index;
    int rc;
    int detach;
    int got_index;
    ptsc_scope_t scope;
    ptsc_ctx_t *ctx;
};

static void *attach_thread(void *p)
{
    struct attempt *a = p;
    a->ctx = NULL;
    a->rc = ptsc_thread_attach(a->index, &a->ctx);
    if (a->rc == PTSC_OK) {
        ptsc_ctx_index(a->ctx, &a->got_index);
        ptsc_ctx_scope(a->ctx, &a->scope);
    }
    if (a->rc == PTSC_OK && a->detach)
        ptsc_thread_detach();
    return NULL;
}

static int attach_in_thread(int index, int detach)
{
    struct attempt a = {.index = index, .rc = 1, .detach = detach, .got_index = -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, attach_thread, &a), 0);
    pthread_join(th, NULL);
    return a.rc;
}

Test(context, index_taken_by_live_thread)
{
    ptsc_test_init(4, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(1, NULL));
    PTSC_ASSERT_RC(attach_in_thread(1, 1), PTSC_ERR_THREAD_TAKEN);
    PTSC_ASSERT_RC(attach_in_thread(2, 1), PTSC_OK);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    PTSC_ASSERT_RC(attach_in_thread(1, 1), PTSC_OK);
    ptsc_test_finalize();
}

Test(context, thread_exit_without_detach_frees_slot)
{
    ptsc_test_init(2, NULL);
    /* Both slots taken by threads that exit attached. */
    PTSC_ASSERT_RC(attach_in_thread(0, 0), PTSC_OK);
    PTSC_ASSERT_RC(attach_in_thread(1, 0), PTSC_OK);
    /* Their exit released the indices: other threads get them. */
    PTSC_ASSERT_RC(attach_in_thread(0, 0), PTSC_OK);
    PTSC_ASSERT_RC(attach_in_thread(1, 1), PTSC_OK);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, NULL));
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

static void *self_thread(void *p)
{
    struct attempt *a = p;
    ptsc_ctx_t *again = NULL;
    a->rc = ptsc_self(&a->ctx);
    if (a->rc == PTSC_OK) {
        ptsc_ctx_index(a->ctx, &a->got_index);
        /* A second call returns the same context, attaching nothing more. */
        if (ptsc_self(&again) != PTSC_OK || again != a->ctx)
            a->rc = PTSC_ERR_INTERNAL;
        if (a->detach && ptsc_thread_detach() != PTSC_OK)
            a->rc = PTSC_ERR_INTERNAL;
    }
    return NULL;
}

Test(context, self_attaches_lazily_to_lowest_free_index)
{
    ptsc_test_init(3, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, NULL));
    struct attempt a = {.rc = 1, .detach = 1, .got_index = -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, self_thread, &a), 0);
    pthread_join(th, NULL);
    PTSC_ASSERT_RC(a.rc, PTSC_OK);
    cr_expect_eq(a.got_index, 1, "lazy attach took index %d, expected the lowest free one (1)", a.got_index);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(context, self_with_all_slots_taken)
{
    ptsc_test_init(1, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, NULL));
    struct attempt a = {.rc = 1, .detach = 1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, self_thread, &a), 0);
    pthread_join(th, NULL);
    cr_expect_lt(a.rc, 0, "ptsc_self succeeded with every slot taken");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(context, null_ctx_means_calling_thread)
{
    ptsc_test_init(2, NULL);
    /* A call with ctx NULL attaches the thread lazily. */
    PTSC_ASSERT_OK(ptsc_sync(NULL, PTSC_SCOPE_NONE));
    ptsc_ctx_t *ctx = NULL;
    PTSC_ASSERT_OK(ptsc_self(&ctx));
    cr_assert_not_null(ctx);
    PTSC_ASSERT_OK(ptsc_ctx_set_scope(NULL, PTSC_SCOPE_GLOBAL, NULL));
    ptsc_scope_t s = PTSC_SCOPE_DEFAULT;
    PTSC_ASSERT_OK(ptsc_ctx_scope(ctx, &s));
    cr_expect_eq(s, PTSC_SCOPE_GLOBAL, "ptsc_ctx_set_scope(NULL, ...) did not change the caller's context");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

struct foreign {
    ptsc_ctx_t *ctx;
    int rc_sync, rc_send, rc_scope, rc_barrier;
};

static void *use_foreign(void *p)
{
    struct foreign *f = p;
    int x = 0;
    ptsc_request_t r = PTSC_REQUEST_NULL;
    f->rc_sync = ptsc_sync(f->ctx, PTSC_SCOPE_NONE);
    f->rc_send = ptsc_isend(f->ctx, &x, 1, MPI_INT, 0, 0, 0, &r);
    f->rc_scope = ptsc_ctx_set_scope(f->ctx, PTSC_SCOPE_NONE, NULL);
    f->rc_barrier = ptsc_barrier(f->ctx);
    if (r != PTSC_REQUEST_NULL)
        ptsc_wait(&r); /* only when the check is missing: avoid a leak */
    return NULL;
}

Test(context, context_used_from_another_thread)
{
    ptsc_test_init(2, NULL);
    struct foreign f;
    memset(&f, 0, sizeof f);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &f.ctx));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, use_foreign, &f), 0);
    pthread_join(th, NULL);
    PTSC_ASSERT_RC(f.rc_sync, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(f.rc_send, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(f.rc_scope, PTSC_ERR_WRONG_THREAD);
    PTSC_ASSERT_RC(f.rc_barrier, PTSC_ERR_WRONG_THREAD);
    ptsc_scope_t s;
    PTSC_ASSERT_OK(ptsc_ctx_scope(f.ctx, &s));
    cr_expect_neq(s, PTSC_SCOPE_NONE, "a foreign thread changed the scope");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(context, set_and_get_scope)
{
    ptsc_test_init(1, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    ptsc_scope_t s = PTSC_SCOPE_DEFAULT, old = PTSC_SCOPE_DEFAULT;
    PTSC_ASSERT_OK(ptsc_ctx_scope(ctx, &s));
    cr_expect_eq(s, PTSC_SCOPE_AUTO, "default scope is %d, expected auto", s);
    const ptsc_scope_t all[] = {PTSC_SCOPE_NONE, PTSC_SCOPE_THREAD, PTSC_SCOPE_GLOBAL, PTSC_SCOPE_DEVICE,
                                PTSC_SCOPE_AUTO};
    ptsc_scope_t prev = s;
    for (int i = 0; i < 5; i++) {
        PTSC_ASSERT_OK(ptsc_ctx_set_scope(ctx, all[i], &old));
        cr_expect_eq(old, prev, "old scope %d, expected %d", old, prev);
        PTSC_ASSERT_OK(ptsc_ctx_scope(ctx, &s));
        cr_expect_eq(s, all[i]);
        prev = all[i];
    }
    PTSC_ASSERT_OK(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_THREAD, NULL));
    old = (ptsc_scope_t)77;
    PTSC_ASSERT_ERR(ptsc_ctx_set_scope(ctx, (ptsc_scope_t)5, &old), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_ctx_set_scope(ctx, (ptsc_scope_t)-7, &old), PTSC_ERR_ARG);
    cr_expect_eq((int)old, 77, "old scope written by a failing call");
    PTSC_ASSERT_OK(ptsc_ctx_scope(ctx, &s));
    cr_expect_eq(s, PTSC_SCOPE_THREAD, "a rejected scope changed the context");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(context, scope_is_per_context)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, NULL));
    PTSC_ASSERT_OK(ptsc_ctx_set_scope(NULL, PTSC_SCOPE_DEVICE, NULL));
    struct attempt a = {.index = 1, .rc = 1, .detach = 0, .scope = PTSC_SCOPE_DEFAULT};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, attach_thread, &a), 0);
    pthread_join(th, NULL);
    PTSC_ASSERT_RC(a.rc, PTSC_OK);
    cr_expect_eq(a.scope, PTSC_SCOPE_AUTO, "another thread's scope (%d) leaked into a new context", a.scope);
    ptsc_ctx_t *me = NULL;
    ptsc_scope_t s = PTSC_SCOPE_DEFAULT;
    PTSC_ASSERT_OK(ptsc_self(&me));
    PTSC_ASSERT_OK(ptsc_ctx_scope(me, &s));
    cr_expect_eq(s, PTSC_SCOPE_DEVICE, "this thread's scope changed to %d", s);
    ptsc_test_finalize();
}

Test(context, stats_count_messages)
{
    ptsc_test_init(1, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    int out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8] = {0};
    ptsc_request_t r[2];
    PTSC_ASSERT_OK(ptsc_irecv(ctx, in, 8, MPI_INT, 0, 0, 9, &r[0]));
    PTSC_ASSERT_OK(ptsc_isend(ctx, out, 8, MPI_INT, 0, 0, 9, &r[1]));
    PTSC_ASSERT_OK(ptsc_waitall(2, r));
    PTSC_ASSERT_OK(ptsc_barrier(ctx));
    ptsc_stats_t st;
    PTSC_ASSERT_OK(ptsc_ctx_stats(ctx, &st));
    cr_expect_eq(st.sends, 1, "sends %llu", (unsigned long long)st.sends);
    cr_expect_eq(st.recvs, 1, "recvs %llu", (unsigned long long)st.recvs);
    cr_expect_eq(st.bytes_sent, sizeof out, "bytes_sent %llu", (unsigned long long)st.bytes_sent);
    cr_expect_eq(st.bytes_recv, sizeof in, "bytes_recv %llu", (unsigned long long)st.bytes_recv);
    cr_expect_eq(st.collectives, 1, "collectives %llu", (unsigned long long)st.collectives);
    cr_expect_eq(st.staged_bytes, 0, "host buffers were staged");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}
