/* The scope rule as a pure function (sync.c), checked without a GPU: on a
 * host-only run every sync is skipped, so the resolution of the auto scope
 * shows nowhere else. */
#include "ptsc_internal.h"
#include "test_util.h"

TestSuite(sync_resolve, .init = ptsc_test_clean_env, .timeout = 60);

static const ptsc_scope_t explicit_scopes[] = {PTSC_SCOPE_NONE, PTSC_SCOPE_THREAD, PTSC_SCOPE_GLOBAL,
                                               PTSC_SCOPE_DEVICE};

Test(sync_resolve, auto_is_thread_for_an_attached_thread)
{
    ptsc_ctx_t ctx = {.scope = PTSC_SCOPE_AUTO, .lazy = 0};
    cr_expect_eq(ptsc__sync_resolve(&ctx, PTSC_SCOPE_AUTO), PTSC_SCOPE_THREAD);
    cr_expect_eq(ptsc__sync_resolve(&ctx, PTSC_SCOPE_DEFAULT), PTSC_SCOPE_THREAD);
}

Test(sync_resolve, auto_is_global_for_a_lazy_thread_or_no_context)
{
    ptsc_ctx_t ctx = {.scope = PTSC_SCOPE_AUTO, .lazy = 1};
    cr_expect_eq(ptsc__sync_resolve(&ctx, PTSC_SCOPE_AUTO), PTSC_SCOPE_GLOBAL);
    cr_expect_eq(ptsc__sync_resolve(&ctx, PTSC_SCOPE_DEFAULT), PTSC_SCOPE_GLOBAL);
    cr_expect_eq(ptsc__sync_resolve(NULL, PTSC_SCOPE_AUTO), PTSC_SCOPE_GLOBAL);
}

Test(sync_resolve, explicit_scopes_stay)
{
    for (int lazy = 0; lazy < 2; lazy++)
        for (size_t i = 0; i < sizeof explicit_scopes / sizeof explicit_scopes[0]; i++) {
            ptsc_ctx_t ctx = {.scope = explicit_scopes[i], .lazy = lazy};
            cr_expect_eq(ptsc__sync_resolve(&ctx, explicit_scopes[i]), explicit_scopes[i]);
            cr_expect_eq(ptsc__sync_resolve(&ctx, PTSC_SCOPE_DEFAULT), explicit_scopes[i],
                         "the context's scope %d, lazy %d", explicit_scopes[i], lazy);
        }
}
