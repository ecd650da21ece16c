/* The scope policy on a host-only run: every scope is valid and a no-op,
 * invalid scopes are refused, and host buffers never need a sync. */
#include "test_util.h"

TestSuite(sync, .init = ptsc_test_clean_env, .timeout = 60);

static const ptsc_scope_t scopes[] = {PTSC_SCOPE_DEFAULT, PTSC_SCOPE_AUTO,   PTSC_SCOPE_NONE,
                                      PTSC_SCOPE_THREAD,  PTSC_SCOPE_GLOBAL, PTSC_SCOPE_DEVICE};
#define NSCOPES ((int)(sizeof scopes / sizeof scopes[0]))

static int have_gpu(void)
{
    int cuda = 0;
    PTSC_ASSERT_OK(ptsc_features(&cuda, NULL, NULL));
    return cuda;
}

Test(sync, every_scope_succeeds_without_gpu)
{
    ptsc_test_init(2, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    for (int i = 0; i < NSCOPES; i++)
        PTSC_ASSERT_OK(ptsc_sync(ctx, scopes[i]));
    if (!have_gpu()) {
        ptsc_stats_t st;
        PTSC_ASSERT_OK(ptsc_ctx_stats(ctx, &st));
        cr_expect_eq(st.races, 0);
    }
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(sync, every_context_scope_succeeds)
{
    ptsc_test_init(2, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(1, &ctx));
    for (int i = 1; i < NSCOPES; i++) {
        PTSC_ASSERT_OK(ptsc_ctx_set_scope(ctx, scopes[i], NULL));
        PTSC_ASSERT_OK(ptsc_sync(ctx, PTSC_SCOPE_DEFAULT));
    }
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(sync, env_scope_succeeds)
{
    const char *names[] = {"auto", "none", "thread", "global", "device"};
    FILE *devnull = fopen("/dev/null", "w");
    cr_assert_not_null(devnull);
    for (int i = 0; i < 5; i++) {
        /* One init per process: check that each value loads here, sync below. */
        setenv("PTSC_SYNC_SCOPE", names[i], 1);
        PTSC_ASSERT_OK(ptsc_config_print(devnull));
    }
    fclose(devnull);
    setenv("PTSC_SYNC_SCOPE", "device", 1);
    ptsc_test_init(1, NULL);
    PTSC_ASSERT_OK(ptsc_sync(NULL, PTSC_SCOPE_DEFAULT));
    ptsc_test_finalize();
}

Test(sync, lazily_attached_thread_syncs)
{
    ptsc_test_init(2, NULL);
    for (int i = 0; i < NSCOPES; i++)
        PTSC_ASSERT_OK(ptsc_sync(NULL, scopes[i]));
    ptsc_test_finalize();
}

Test(sync, invalid_scope_is_refused)
{
    ptsc_test_init(2, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    const int bad[] = {5, 6, 42, -2, -100, 0x7fffffff};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        PTSC_ASSERT_ERR(ptsc_sync(ctx, (ptsc_scope_t)bad[i]), PTSC_ERR_ARG);
        PTSC_ASSERT_ERR(ptsc_sync(NULL, (ptsc_scope_t)bad[i]), PTSC_ERR_ARG);
    }
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(sync, host_memory_class)
{
    ptsc_test_init(1, NULL);
    int stack_buf[4];
    static int static_buf[4];
    int *heap = malloc(64 * sizeof *heap);
    ptsc_memclass_t c = PTSC_MEM_DEVICE;
    if (!have_gpu()) {
        PTSC_ASSERT_OK(ptsc_mem_class(stack_buf, &c));
        cr_expect_eq(c, PTSC_MEM_HOST);
        c = PTSC_MEM_DEVICE;
        PTSC_ASSERT_OK(ptsc_mem_class(static_buf, &c));
        cr_expect_eq(c, PTSC_MEM_HOST);
        c = PTSC_MEM_DEVICE;
        PTSC_ASSERT_OK(ptsc_mem_class(heap + 3, &c));
        cr_expect_eq(c, PTSC_MEM_HOST);
    }
    c = PTSC_MEM_DEVICE;
    PTSC_ASSERT_OK(ptsc_mem_class(heap, &c));
    cr_expect_eq(c, PTSC_MEM_HOST, "malloc memory classified as %d", c);
    PTSC_ASSERT_OK(ptsc_mem_forget());
    c = PTSC_MEM_DEVICE;
    PTSC_ASSERT_OK(ptsc_mem_class(heap, &c));
    cr_expect_eq(c, PTSC_MEM_HOST);
    PTSC_ASSERT_ERR(ptsc_mem_class(heap, NULL), PTSC_ERR_ARG);
    free(heap);
    ptsc_test_finalize();
}

/* Host buffers need no sync: sends and receives count skipped syncs and
 * never syncs. */
Test(sync, host_buffers_skip_the_sync)
{
    ptsc_test_init(1, NULL);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    PTSC_ASSERT_OK(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_DEVICE, NULL));
    int a = 5, b = 0;
    PTSC_ASSERT_OK(ptsc_sendrecv(ctx, &a, 1, MPI_INT, 0, 0, 1, &b, 1, MPI_INT, 0, 0, 1));
    cr_expect_eq(b, 5);
    ptsc_stats_t st;
    PTSC_ASSERT_OK(ptsc_ctx_stats(ctx, &st));
    cr_expect_eq(st.syncs, 0, "%llu syncs for pageable host buffers", (unsigned long long)st.syncs);
    cr_expect_geq(st.skipped_syncs, 2, "skipped_syncs %llu after a sendrecv of host buffers",
                  (unsigned long long)st.skipped_syncs);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}
