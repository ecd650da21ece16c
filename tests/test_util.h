/*
 * Helpers shared by the Criterion unit tests. Criterion runs every test in
 * its own child process, so each test may call ptsc_init (an Open MPI
 * singleton: no mpiexec needed) and change the environment freely.
 */
#ifndef PTSC_TEST_UTIL_H
#define PTSC_TEST_UTIL_H

#include <criterion/criterion.h>
#include <ptsc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Drop every PTSC_* variable inherited from the shell or CI, so that a test
 * starts from the documented defaults and sets only what it checks. */
static inline void ptsc_test_clean_env(void)
{
    char names[64][128];
    int n = 0;
    for (char **e = environ; e && *e && n < 64; e++) {
        if (strncmp(*e, "PTSC_", 5) != 0)
            continue;
        size_t len = strcspn(*e, "=");
        if (len >= sizeof names[0])
            len = sizeof names[0] - 1;
        memcpy(names[n], *e, len);
        names[n][len] = '\0';
        n++;
    }
    for (int i = 0; i < n; i++)
        unsetenv(names[i]);
}

/* Assert that a ptsc call returns `expected`; on failure print both names
 * and the detail, which is what a developer needs first. */
#define PTSC_ASSERT_RC(call, expected)                                                                    \
    do {                                                                                                  \
        int ptsc_rc_ = (call);                                                                            \
        int ptsc_exp_ = (expected);                                                                       \
        cr_assert_eq(ptsc_rc_, ptsc_exp_, "%s returned %s (%d), expected %s (%d); detail: \"%s\"", #call, \
                     ptsc_status_name(ptsc_rc_), ptsc_rc_, ptsc_status_name(ptsc_exp_), ptsc_exp_,        \
                     ptsc_last_error());                                                                  \
    } while (0)

#define PTSC_ASSERT_OK(call) PTSC_ASSERT_RC(call, PTSC_OK)

/* Assert that `call` fails with `expected` and leaves a fresh detail: the
 * detail is first set to a known sentinel by another failing call, so a
 * detail left over from an earlier error does not count. */
#define PTSC_ASSERT_ERR(call, expected)                                                                      \
    do {                                                                                                     \
        char ptsc_sentinel_[512];                                                                            \
        ptsc_initialized(NULL);                                                                              \
        snprintf(ptsc_sentinel_, sizeof ptsc_sentinel_, "%s", ptsc_last_error());                            \
        PTSC_ASSERT_RC(call, expected);                                                                      \
        cr_assert(ptsc_last_error()[0] != '\0', "%s failed with %s but left ptsc_last_error() empty", #call, \
                  ptsc_status_name(expected));                                                               \
        cr_assert(strcmp(ptsc_last_error(), ptsc_sentinel_) != 0,                                            \
                  "%s failed with %s but did not set its own detail (still \"%s\")", #call,                  \
                  ptsc_status_name(expected), ptsc_sentinel_);                                               \
    } while (0)

/* ptsc_init as a one-rank singleton with `nthreads` slots and the lane
 * layout `comm` ("dup" or "shared"; NULL keeps the default). */
static inline void ptsc_test_init(int nthreads, const char *comm)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", nthreads);
    setenv("PTSC_MAX_THREADS", buf, 1);
    if (comm)
        setenv("PTSC_COMM", comm, 1);
    PTSC_ASSERT_OK(ptsc_init(NULL, NULL));
}

static inline void ptsc_test_finalize(void) { PTSC_ASSERT_OK(ptsc_finalize()); }

#endif /* PTSC_TEST_UTIL_H */
