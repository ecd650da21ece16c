/* Status codes, their names and messages, and the thread-local detail. */
#include "test_util.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>

TestSuite(status, .init = ptsc_test_clean_env, .timeout = 60);

/* The X-macro list is the one source of truth: walk it here too, so a code
 * added to the list without a name or message is caught. */
static const struct {
    const char *name;
    int value;
    const char *msg;
} list[] = {
#define ROW(name, value, msg) {#name, value, msg},
    PTSC_STATUS_LIST(ROW)
#undef ROW
};
#define NLIST ((int)(sizeof list / sizeof list[0]))

Test(status, count_matches_list)
{
    cr_assert_eq(NLIST, PTSC_STATUS_COUNT, "PTSC_STATUS_LIST has %d rows, PTSC_STATUS_COUNT is %d", NLIST,
                 PTSC_STATUS_COUNT);
}

Test(status, codes_are_zero_then_consecutive_negatives)
{
    for (int i = 0; i < NLIST; i++)
        cr_expect_eq(list[i].value, -i, "row %d (%s) has value %d, expected %d", i, list[i].name,
                     list[i].value, -i);
    cr_assert_eq(PTSC_OK, 0);
}

Test(status, every_code_has_a_distinct_nonempty_string_and_name)
{
    const char *unknown = ptsc_status_string(INT_MIN);
    for (int i = 0; i < PTSC_STATUS_COUNT; i++) {
        int code = -i;
        const char *s = ptsc_status_string(code), *n = ptsc_status_name(code);
        cr_assert_not_null(s, "ptsc_status_string(%d) is NULL", code);
        cr_assert_not_null(n, "ptsc_status_name(%d) is NULL", code);
        cr_expect(s[0] != '\0', "ptsc_status_string(%d) is empty", code);
        cr_expect(n[0] != '\0', "ptsc_status_name(%d) is empty", code);
        cr_expect_str_neq(s, unknown, "code %d (%s) has the unknown-status message", code, n);
        cr_expect_eq(strncmp(n, "PTSC_", 5), 0, "name of %d is \"%s\", expected a PTSC_ prefix", code, n);
        for (int j = 0; j < i; j++) {
            cr_expect_str_neq(s, ptsc_status_string(-j), "codes %d and %d share the message \"%s\"", code, -j,
                              s);
            cr_expect_str_neq(n, ptsc_status_name(-j), "codes %d and %d share the name \"%s\"", code, -j, n);
        }
    }
}

Test(status, name_and_string_come_from_the_list)
{
    for (int i = 0; i < NLIST; i++) {
        cr_expect_str_eq(ptsc_status_name(list[i].value), list[i].name, "name of %d", list[i].value);
        cr_expect_str_eq(ptsc_status_string(list[i].value), list[i].msg, "message of %s", list[i].name);
    }
    cr_expect_str_eq(ptsc_status_name(PTSC_ERR_TAG), "PTSC_ERR_TAG");
}

Test(status, unknown_codes_give_unknown_status)
{
    const int bad[] = {1, 2, 100, -PTSC_STATUS_COUNT, -PTSC_STATUS_COUNT - 1, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *s = ptsc_status_string(bad[i]), *n = ptsc_status_name(bad[i]);
        cr_assert_not_null(s);
        cr_assert_not_null(n, "ptsc_status_name(%d) is NULL", bad[i]);
        cr_expect(strstr(s, "unknown") != NULL,
                  "ptsc_status_string(%d) = \"%s\", expected an unknown-status text", bad[i], s);
        for (int j = 0; j < PTSC_STATUS_COUNT; j++)
            cr_expect_str_neq(n, ptsc_status_name(-j), "unknown code %d is named like code %d (%s)", bad[i],
                              -j, n);
    }
}

Test(status, last_error_starts_empty)
{
    cr_assert_not_null(ptsc_last_error());
    cr_expect_str_empty(ptsc_last_error(), "fresh thread has detail \"%s\"", ptsc_last_error());
}

Test(status, last_error_set_by_a_failing_call)
{
    ptsc_ctx_t *ctx = NULL;
    PTSC_ASSERT_RC(ptsc_thread_attach(0, &ctx), PTSC_ERR_NOT_INITIALIZED);
    cr_expect_str_not_empty(ptsc_last_error(), "PTSC_ERR_NOT_INITIALIZED without a detail");
    cr_expect_null(ctx, "output argument written on failure");
    /* A different failure replaces the detail. */
    char first[512];
    snprintf(first, sizeof first, "%s", ptsc_last_error());
    PTSC_ASSERT_RC(ptsc_initialized(NULL), PTSC_ERR_ARG);
    cr_expect_str_not_empty(ptsc_last_error());
    cr_expect_str_neq(ptsc_last_error(), first, "detail not replaced by the next error");
}

Test(status, set_error_records_a_binding_refusal)
{
    /* What a binding's own argument check reports, before ptsc_init too. */
    PTSC_ASSERT_RC(ptsc_set_error(PTSC_ERR_ARG, "ptsc_send: buf is not contiguous"), PTSC_ERR_ARG);
    cr_expect_str_eq(ptsc_last_error(), "ptsc_send: buf is not contiguous");
    PTSC_ASSERT_RC(ptsc_set_error(PTSC_ERR_TAG, "x"), PTSC_ERR_TAG);
    cr_expect_str_eq(ptsc_last_error(), "x");
    /* Its own arguments are checked: no status to record, or no detail. */
    PTSC_ASSERT_RC(ptsc_set_error(PTSC_OK, "fine"), PTSC_ERR_ARG);
    cr_expect(strstr(ptsc_last_error(), "not a ptsc error code") != NULL, "detail \"%s\"", ptsc_last_error());
    PTSC_ASSERT_RC(ptsc_set_error(-12345, "what"), PTSC_ERR_ARG);
    cr_expect(strstr(ptsc_last_error(), "-12345") != NULL, "detail \"%s\"", ptsc_last_error());
    PTSC_ASSERT_RC(ptsc_set_error(PTSC_ERR_ARG, NULL), PTSC_ERR_ARG);
    cr_expect(strstr(ptsc_last_error(), "detail is NULL") != NULL, "detail \"%s\"", ptsc_last_error());
    /* A detail longer than the buffer is cut, not overrun. */
    char big[4096];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    PTSC_ASSERT_RC(ptsc_set_error(PTSC_ERR_ARG, big), PTSC_ERR_ARG);
    cr_expect_lt(strlen(ptsc_last_error()), sizeof big - 1);
    cr_expect_eq(ptsc_last_error()[0], 'a');
}

static void *fail_in_thread(void *arg)
{
    int *rc = arg;
    *rc = ptsc_rank(NULL);
    return NULL;
}

Test(status, last_error_is_thread_local)
{
    int rc = 0;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, fail_in_thread, &rc), 0);
    pthread_join(th, NULL);
    cr_assert_lt(rc, 0, "ptsc_rank(NULL) before init succeeded");
    cr_expect_str_empty(ptsc_last_error(), "another thread's error leaked into this thread: \"%s\"",
                        ptsc_last_error());
}

Test(status, version_matches_header)
{
    int major = -1, minor = -1, patch = -1;
    PTSC_ASSERT_OK(ptsc_version(&major, &minor, &patch));
    cr_expect_eq(major, PTSC_VERSION_MAJOR);
    cr_expect_eq(minor, PTSC_VERSION_MINOR);
    cr_expect_eq(patch, PTSC_VERSION_PATCH);
    PTSC_ASSERT_OK(ptsc_version(NULL, NULL, NULL));
    cr_assert_not_null(ptsc_version_string());
    cr_expect_str_eq(ptsc_version_string(), PTSC_VERSION_STRING);
}
