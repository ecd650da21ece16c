/* The PTSC_* table: defaults, every accepted form, every rejected class,
 * the unknown-variable warning, and what ptsc_init does with a bad value. */
#include "ptsc_internal.h"
#include "test_util.h"

#include <criterion/redirect.h>

TestSuite(config, .init = ptsc_test_clean_env, .timeout = 60);

/* Index of `name` in the table, failing the test when it is absent. */
static int row_of(const char *name)
{
    for (int i = 0; i < ptsc__config_count(); i++)
        if (strcmp(ptsc__config_name(i), name) == 0)
            return i;
    cr_assert_fail("%s is not in the PTSC_* table", name);
    return -1;
}

static ptsc__config_t load_ok(const char *name, const char *value)
{
    ptsc__config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    setenv(name, value, 1);
    int rc = ptsc__config_load(&cfg);
    cr_assert_eq(rc, PTSC_OK, "%s=\"%s\" rejected with %s: %s", name, value, ptsc_status_name(rc),
                 ptsc_last_error());
    cr_expect(cfg.from_env & (1ull << row_of(name)), "%s=\"%s\" not marked as set in the environment", name,
              value);
    unsetenv(name);
    return cfg;
}

/* A bad value: PTSC_ERR_CONFIG, the variable named in the detail, and the
 * output left untouched (outputs are written only on success). */
static void load_bad(const char *name, const char *value)
{
    ptsc__config_t cfg, before;
    memset(&cfg, 0xA5, sizeof cfg);
    before = cfg;
    setenv(name, value, 1);
    int rc = ptsc__config_load(&cfg);
    cr_expect_eq(rc, PTSC_ERR_CONFIG, "%s=\"%s\" gave %s, expected PTSC_ERR_CONFIG", name, value,
                 ptsc_status_name(rc));
    cr_expect(strstr(ptsc_last_error(), name) != NULL, "%s=\"%s\": detail \"%s\" does not name the variable",
              name, value, ptsc_last_error());
    cr_expect(memcmp(&cfg, &before, sizeof cfg) == 0, "%s=\"%s\": config written although loading failed",
              name, value);
    unsetenv(name);
}

Test(config, table_names_are_distinct_and_prefixed)
{
    int n = ptsc__config_count();
    cr_assert_gt(n, 0);
    cr_assert_leq(n, 64, "from_env has 64 bits; the table has %d rows", n);
    for (int i = 0; i < n; i++) {
        const char *a = ptsc__config_name(i);
        cr_assert_not_null(a, "row %d has no name", i);
        cr_expect_eq(strncmp(a, "PTSC_", 5), 0, "row %d: %s lacks the PTSC_ prefix", i, a);
        for (int j = 0; j < i; j++)
            cr_expect_str_neq(a, ptsc__config_name(j), "rows %d and %d are both %s", i, j, a);
    }
    cr_expect_null(ptsc__config_name(n));
    cr_expect_null(ptsc__config_name(-1));
}

Test(config, defaults)
{
    ptsc__config_t cfg;
    memset(&cfg, 0xA5, sizeof cfg);
    PTSC_ASSERT_OK(ptsc__config_load(&cfg));
    cr_expect_eq(cfg.sync_scope, PTSC_SCOPE_AUTO);
    cr_expect_eq(cfg.sync_check, PTSC__CHECK_OFF);
    cr_expect_eq(cfg.stream, PTSC_STREAM_PER_THREAD);
    cr_expect_eq(cfg.comm, PTSC__COMM_DUP);
    cr_expect_eq(cfg.max_threads, 0, "PTSC_MAX_THREADS default is auto (0)");
    cr_expect_eq(cfg.device_map, PTSC__MAP_RANK);
    cr_expect_eq(cfg.cuda_aware, PTSC__TRI_AUTO);
    cr_expect_eq(cfg.staging, PTSC__STAGING_AUTO);
    cr_expect_eq(cfg.staging_chunk, (size_t)4 << 20, "PTSC_STAGING_CHUNK default is 4MiB, got %zu",
                 cfg.staging_chunk);
    cr_expect_eq(cfg.log, PTSC__LOG_WARN);
    cr_expect_eq(cfg.stats, 0);
    cr_expect_eq(cfg.print_config, 0);
    cr_expect_eq(cfg.from_env, 0ull, "nothing is set, yet from_env is %#llx", cfg.from_env);
}

Test(config, sync_scope_values)
{
    static const struct {
        const char *s;
        int v;
    } ok[] = {{"auto", PTSC_SCOPE_AUTO},
              {"none", PTSC_SCOPE_NONE},
              {"thread", PTSC_SCOPE_THREAD},
              {"global", PTSC_SCOPE_GLOBAL},
              {"device", PTSC_SCOPE_DEVICE}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_expect_eq(load_ok("PTSC_SYNC_SCOPE", ok[i].s).sync_scope, ok[i].v, "PTSC_SYNC_SCOPE=%s", ok[i].s);
    load_bad("PTSC_SYNC_SCOPE", "bogus");
    load_bad("PTSC_SYNC_SCOPE", "");
    load_bad("PTSC_SYNC_SCOPE", "threads");
    load_bad("PTSC_SYNC_SCOPE", "thread ");
    load_bad("PTSC_SYNC_SCOPE", "2");
}

Test(config, bad_enum_detail_lists_accepted_values)
{
    load_bad("PTSC_SYNC_SCOPE", "bogus");
    const char *d = ptsc_last_error();
    cr_expect(strstr(d, "bogus") != NULL, "detail \"%s\" does not quote the bad value", d);
    const char *choices[] = {"auto", "none", "thread", "global", "device"};
    for (int i = 0; i < 5; i++)
        cr_expect(strstr(d, choices[i]) != NULL, "detail \"%s\" does not list \"%s\"", d, choices[i]);
}

Test(config, enum_values)
{
    cr_expect_eq(load_ok("PTSC_SYNC_CHECK", "off").sync_check, PTSC__CHECK_OFF);
    cr_expect_eq(load_ok("PTSC_SYNC_CHECK", "warn").sync_check, PTSC__CHECK_WARN);
    cr_expect_eq(load_ok("PTSC_SYNC_CHECK", "error").sync_check, PTSC__CHECK_ERROR);
    load_bad("PTSC_SYNC_CHECK", "bogus");

    cr_expect_eq(load_ok("PTSC_STREAM", "per-thread").stream, PTSC_STREAM_PER_THREAD);
    cr_expect_eq(load_ok("PTSC_STREAM", "owned").stream, PTSC_STREAM_OWNED);
    cr_expect_eq(load_ok("PTSC_STREAM", "legacy").stream, PTSC_STREAM_LEGACY);
    load_bad("PTSC_STREAM", "bogus");
    load_bad("PTSC_STREAM", "per_thread");

    cr_expect_eq(load_ok("PTSC_COMM", "dup").comm, PTSC__COMM_DUP);
    cr_expect_eq(load_ok("PTSC_COMM", "shared").comm, PTSC__COMM_SHARED);
    load_bad("PTSC_COMM", "bogus");

    cr_expect_eq(load_ok("PTSC_CUDA_AWARE", "auto").cuda_aware, PTSC__TRI_AUTO);
    cr_expect_eq(load_ok("PTSC_CUDA_AWARE", "yes").cuda_aware, PTSC__TRI_YES);
    cr_expect_eq(load_ok("PTSC_CUDA_AWARE", "no").cuda_aware, PTSC__TRI_NO);
    load_bad("PTSC_CUDA_AWARE", "bogus");

    cr_expect_eq(load_ok("PTSC_STAGING", "auto").staging, PTSC__STAGING_AUTO);
    cr_expect_eq(load_ok("PTSC_STAGING", "always").staging, PTSC__STAGING_ALWAYS);
    cr_expect_eq(load_ok("PTSC_STAGING", "never").staging, PTSC__STAGING_NEVER);
    load_bad("PTSC_STAGING", "bogus");

    cr_expect_eq(load_ok("PTSC_LOG", "error").log, PTSC__LOG_ERROR);
    cr_expect_eq(load_ok("PTSC_LOG", "warn").log, PTSC__LOG_WARN);
    cr_expect_eq(load_ok("PTSC_LOG", "info").log, PTSC__LOG_INFO);
    cr_expect_eq(load_ok("PTSC_LOG", "debug").log, PTSC__LOG_DEBUG);
    load_bad("PTSC_LOG", "bogus");
}

Test(config, booleans)
{
    const char *yes[] = {"1", "yes", "on", "true"}, *no[] = {"0", "no", "off", "false"};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(load_ok("PTSC_STATS", yes[i]).stats, 1, "PTSC_STATS=%s", yes[i]);
        cr_expect_eq(load_ok("PTSC_STATS", no[i]).stats, 0, "PTSC_STATS=%s", no[i]);
        cr_expect_eq(load_ok("PTSC_PRINT_CONFIG", yes[i]).print_config, 1, "PTSC_PRINT_CONFIG=%s", yes[i]);
        cr_expect_eq(load_ok("PTSC_PRINT_CONFIG", no[i]).print_config, 0, "PTSC_PRINT_CONFIG=%s", no[i]);
    }
    load_bad("PTSC_STATS", "2");
    load_bad("PTSC_STATS", "bogus");
    load_bad("PTSC_STATS", "");
    load_bad("PTSC_PRINT_CONFIG", "-1");
}

Test(config, max_threads_good)
{
    cr_expect_eq(load_ok("PTSC_MAX_THREADS", "auto").max_threads, 0);
    cr_expect_eq(load_ok("PTSC_MAX_THREADS", "1").max_threads, 1);
    cr_expect_eq(load_ok("PTSC_MAX_THREADS", "4").max_threads, 4);
    cr_expect_eq(load_ok("PTSC_MAX_THREADS", "64").max_threads, 64);
}

Test(config, max_threads_bad)
{
    const char *bad[] = {"0",          "-1",      "-4",   "99999999999999999999",
                         "2147483648", "1000000", "4x",   "4.0",
                         "",           "four",    "0x4",  " 4",
                         "4 ",         "auto4",   "bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        load_bad("PTSC_MAX_THREADS", bad[i]);
}

/* PTSC_MAX_THREADS=auto: the largest of the floor, omp_get_max_threads(),
 * the OMP_NUM_THREADS product and OMP_THREAD_LIMIT (capped), each input
 * named when it decides. */
static int slots_of(int max_threads, int omp_max, const char *num, int limit, int expect_source)
{
    char why[256] = "";
    int source = -1;
    int n = ptsc__config_slots(max_threads, omp_max, num, limit, &source, why, sizeof why);
    cr_expect_eq(source, expect_source, "slots(%d, %d, %s, %d): source %d, expected %d (\"%s\")", max_threads,
                 omp_max, num ? num : "NULL", limit, source, expect_source, why);
    static const char *const names[] = {"PTSC_MAX_THREADS", "floor", "omp_get_max_threads()",
                                        "OMP_NUM_THREADS", "OMP_THREAD_LIMIT"};
    cr_expect(strstr(why, names[expect_source]) != NULL, "why \"%s\" does not name %s", why,
              names[expect_source]);
    return n;
}

Test(config, slots_set_wins)
{
    cr_expect_eq(slots_of(3, 64, "32", 128, PTSC__SLOTS_SET), 3, "PTSC_MAX_THREADS=3 must be used as is");
    cr_expect_eq(slots_of(1, 2, NULL, 0, PTSC__SLOTS_SET), 1);
    cr_expect_eq(slots_of(PTSC__MAX_THREADS_LIMIT, 2, NULL, 0, PTSC__SLOTS_SET), PTSC__MAX_THREADS_LIMIT);
}

Test(config, slots_floor_covers_small_machines)
{
    /* 2 cores, nothing set: a num_threads(4) region must still find slots. */
    int n = slots_of(0, 2, NULL, 0, PTSC__SLOTS_BY_FLOOR);
    cr_expect_eq(n, PTSC__SLOTS_FLOOR);
    cr_expect_geq(n, 4, "the default leaves a num_threads(4) region on 2 cores without slots");
    cr_expect_eq(slots_of(0, 1, "8", 0, PTSC__SLOTS_BY_FLOOR), PTSC__SLOTS_FLOOR);
    cr_expect_eq(slots_of(0, 2, NULL, 8, PTSC__SLOTS_BY_FLOOR), PTSC__SLOTS_FLOOR);
}

Test(config, slots_follow_omp)
{
    cr_expect_eq(slots_of(0, 48, NULL, 0, PTSC__SLOTS_BY_OMP_MAX), 48);
    cr_expect_eq(slots_of(0, PTSC__SLOTS_FLOOR, NULL, 0, PTSC__SLOTS_BY_OMP_MAX), PTSC__SLOTS_FLOOR);
    cr_expect_eq(slots_of(0, 32, "32", 0, PTSC__SLOTS_BY_OMP_NUM), 32, "a tie names OMP_NUM_THREADS");
    cr_expect_eq(slots_of(0, 2, "24", 0, PTSC__SLOTS_BY_OMP_NUM), 24);
    /* A list is one entry per nesting level: nested teams need the product. */
    cr_expect_eq(slots_of(0, 8, "8,4", 0, PTSC__SLOTS_BY_OMP_NUM), 32);
    cr_expect_eq(slots_of(0, 8, " 8 , 3 ", 0, PTSC__SLOTS_BY_OMP_NUM), 24);
    cr_expect_eq(slots_of(0, 8, "64,64,64", 0, PTSC__SLOTS_BY_OMP_NUM), PTSC__MAX_THREADS_LIMIT,
                 "the product must stop at the slot limit");
    cr_expect_eq(slots_of(0, 2, "99999999999", 0, PTSC__SLOTS_BY_OMP_NUM), PTSC__MAX_THREADS_LIMIT);
}

Test(config, slots_thread_limit_is_capped)
{
    cr_expect_eq(slots_of(0, 2, NULL, 100, PTSC__SLOTS_BY_OMP_LIMIT), 100);
    cr_expect_eq(slots_of(0, 2, NULL, 1 << 30, PTSC__SLOTS_BY_OMP_LIMIT), PTSC__SLOTS_LIMIT_CAP);
    cr_expect_eq(slots_of(0, 300, NULL, 1 << 30, PTSC__SLOTS_BY_OMP_MAX), 300);
    cr_expect_eq(slots_of(0, 2, "512", 1 << 30, PTSC__SLOTS_BY_OMP_NUM), 512);
}

Test(config, slots_ignore_malformed_omp_num_threads)
{
    const char *bad[] = {"", "x", "4x", "0", "-4", "4,", ",4", "4,,2", "4,0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[256] = "";
        int n = ptsc__config_slots(0, 2, bad[i], 0, NULL, why, sizeof why);
        cr_expect_eq(n, PTSC__SLOTS_FLOOR, "OMP_NUM_THREADS=\"%s\" gave %d slots", bad[i], n);
        cr_expect(strstr(why, "ignored") != NULL, "OMP_NUM_THREADS=\"%s\": why \"%s\" lacks \"ignored\"",
                  bad[i], why);
    }
}

Test(config, slots_now_reads_the_environment)
{
    ptsc__config_t cfg;
    setenv("OMP_NUM_THREADS", "40", 1);
    PTSC_ASSERT_OK(ptsc__config_load(&cfg));
    int source = -1;
    cr_expect_eq(ptsc__config_slots_now(&cfg, &source, NULL, 0), 40);
    cr_expect_eq(source, PTSC__SLOTS_BY_OMP_NUM);
    setenv("PTSC_MAX_THREADS", "5", 1);
    PTSC_ASSERT_OK(ptsc__config_load(&cfg));
    cr_expect_eq(ptsc__config_slots_now(&cfg, &source, NULL, 0), 5);
    cr_expect_eq(source, PTSC__SLOTS_SET);
    unsetenv("OMP_NUM_THREADS");
}

Test(config, staging_chunk_units)
{
    static const struct {
        const char *s;
        size_t v;
    } ok[] = {{"4096", 4096},
              {"512k", (size_t)512 << 10},
              {"512K", (size_t)512 << 10},
              {"512KiB", (size_t)512 << 10},
              {"4m", (size_t)4 << 20},
              {"4M", (size_t)4 << 20},
              {"4MiB", (size_t)4 << 20},
              {"1g", (size_t)1 << 30},
              {"1G", (size_t)1 << 30},
              {"1GiB", (size_t)1 << 30},
              {"1048576", (size_t)1 << 20}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t got = load_ok("PTSC_STAGING_CHUNK", ok[i].s).staging_chunk;
        cr_expect_eq(got, ok[i].v, "PTSC_STAGING_CHUNK=%s gave %zu, expected %zu", ok[i].s, got, ok[i].v);
    }
}

Test(config, staging_chunk_bad)
{
    const char *bad[] = {"4XB",          "-1",  "",     "0",   "MiB",   "4 MiB",  "4MB",
                         "4Mi",          "4kk", "1.5M", "4Gb", "bogus", "0x1000", "99999999999999999999",
                         "99999999999G", "-4M"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        load_bad("PTSC_STAGING_CHUNK", bad[i]);
}

Test(config, device_map_values)
{
    ptsc__config_t c = load_ok("PTSC_DEVICE_MAP", "rank");
    cr_expect_eq(c.device_map, PTSC__MAP_RANK);
    c = load_ok("PTSC_DEVICE_MAP", "thread");
    cr_expect_eq(c.device_map, PTSC__MAP_THREAD);
    c = load_ok("PTSC_DEVICE_MAP", "3");
    cr_expect_eq(c.device_map, PTSC__MAP_LIST);
    cr_expect_eq(c.ndevlist, 1);
    cr_expect_eq(c.devlist[0], 3);
    c = load_ok("PTSC_DEVICE_MAP", "0,1,3,2");
    cr_assert_eq(c.device_map, PTSC__MAP_LIST);
    cr_assert_eq(c.ndevlist, 4, "0,1,3,2 parsed as %d entries", c.ndevlist);
    const int want[] = {0, 1, 3, 2};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(c.devlist[i], want[i], "entry %d: %d, expected %d", i, c.devlist[i], want[i]);
}

Test(config, device_map_bad)
{
    const char *bad[] = {"0,,1", "a",   "",     ",",     "0,",  ",0",   "-1",
                         "0,-1", "0;1", "1 ,2", "ranks", "0,a", "bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        load_bad("PTSC_DEVICE_MAP", bad[i]);
}

Test(config, device_map_list_too_long)
{
    char buf[4 * PTSC__MAX_DEVLIST + 16] = "";
    for (int i = 0; i <= PTSC__MAX_DEVLIST; i++)
        strcat(buf, i ? ",0" : "0");
    load_bad("PTSC_DEVICE_MAP", buf);
}

/* Every row rejects garbage: a row added later without validation fails here. */
Test(config, every_variable_rejects_garbage)
{
    for (int i = 0; i < ptsc__config_count(); i++)
        load_bad(ptsc__config_name(i), "bogus-value!");
}

Test(config, first_bad_variable_is_named_and_others_ignored)
{
    setenv("PTSC_SYNC_SCOPE", "thread", 1);
    load_bad("PTSC_COMM", "bogus");
    cr_expect(strstr(ptsc_last_error(), "PTSC_SYNC_SCOPE") == NULL, "a good variable is blamed: \"%s\"",
              ptsc_last_error());
}

Test(config, from_env_marks_only_set_variables)
{
    setenv("PTSC_COMM", "dup", 1); /* the default value, but set */
    setenv("PTSC_LOG", "info", 1);
    ptsc__config_t cfg;
    PTSC_ASSERT_OK(ptsc__config_load(&cfg));
    unsigned long long want = (1ull << row_of("PTSC_COMM")) | (1ull << row_of("PTSC_LOG"));
    cr_expect_eq(cfg.from_env, want, "from_env %#llx, expected %#llx", cfg.from_env, want);
}

static char *read_all(FILE *f)
{
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

/* How many times `needle` occurs in `hay`. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

Test(config, unknown_variable_warns_with_closest_name, .init = cr_redirect_stderr)
{
    ptsc_test_clean_env();
    setenv("PTSC_SYNC_SCOP", "thread", 1);
    ptsc__config_warn_unknown();
    fflush(stderr);
    const char *err = read_all(cr_get_redirected_stderr());
    /* The typo is quoted once and the suggestion once: "PTSC_SYNC_SCOP" then
     * occurs twice, one of them followed by the E of PTSC_SYNC_SCOPE. */
    cr_expect(strstr(err, "PTSC_SYNC_SCOPE") != NULL, "no suggestion of PTSC_SYNC_SCOPE in stderr: \"%s\"",
              err);
    cr_expect_geq(count_of(err, "PTSC_SYNC_SCOP"), 2, "stderr does not quote both names: \"%s\"", err);
}

Test(config, known_variables_draw_no_warning, .init = cr_redirect_stderr)
{
    ptsc_test_clean_env();
    for (int i = 0; i < ptsc__config_count(); i++)
        setenv(ptsc__config_name(i), "x", 1);
    ptsc__config_warn_unknown();
    fflush(stderr);
    const char *err = read_all(cr_get_redirected_stderr());
    cr_expect_str_empty(err, "warning about known variables: \"%s\"", err);
}

Test(config, init_warns_about_unknown_variable, .init = cr_redirect_stderr)
{
    ptsc_test_clean_env();
    setenv("PTSC_MAX_THREAD", "2", 1);
    setenv("PTSC_MAX_THREADS", "2", 1);
    PTSC_ASSERT_OK(ptsc_init(NULL, NULL));
    PTSC_ASSERT_OK(ptsc_finalize());
    fflush(stderr);
    const char *err = read_all(cr_get_redirected_stderr());
    cr_expect(strstr(err, "PTSC_MAX_THREADS") != NULL && count_of(err, "PTSC_MAX_THREAD") >= 2,
              "ptsc_init did not warn about PTSC_MAX_THREAD, suggesting PTSC_MAX_THREADS: \"%s\"", err);
}

Test(config, init_rejects_bad_scope)
{
    setenv("PTSC_SYNC_SCOPE", "bogus", 1);
    PTSC_ASSERT_RC(ptsc_init(NULL, NULL), PTSC_ERR_CONFIG);
    cr_expect(strstr(ptsc_last_error(), "PTSC_SYNC_SCOPE") != NULL,
              "detail \"%s\" does not name PTSC_SYNC_SCOPE", ptsc_last_error());
    int flag = -1;
    PTSC_ASSERT_OK(ptsc_initialized(&flag));
    cr_expect_eq(flag, 0, "ptsc_initialized says 1 after a failed init");
    /* A failed init is not a finalize: with the value fixed, init succeeds. */
    unsetenv("PTSC_SYNC_SCOPE");
    setenv("PTSC_MAX_THREADS", "2", 1);
    PTSC_ASSERT_OK(ptsc_init(NULL, NULL));
    PTSC_ASSERT_OK(ptsc_finalize());
}

Test(config, init_rejects_each_bad_variable)
{
    const char *vars[] = {"PTSC_MAX_THREADS", "PTSC_STAGING_CHUNK", "PTSC_DEVICE_MAP", "PTSC_COMM"};
    const char *vals[] = {"0", "4XB", "0,,1", "bogus"};
    for (int i = 0; i < 4; i++) {
        setenv(vars[i], vals[i], 1);
        PTSC_ASSERT_RC(ptsc_init(NULL, NULL), PTSC_ERR_CONFIG);
        cr_expect(strstr(ptsc_last_error(), vars[i]) != NULL, "%s=%s: detail \"%s\" does not name it",
                  vars[i], vals[i], ptsc_last_error());
        unsetenv(vars[i]);
    }
}

Test(config, config_print_before_init, .init = cr_redirect_stdout)
{
    ptsc_test_clean_env();
    setenv("PTSC_COMM", "shared", 1);
    PTSC_ASSERT_OK(ptsc_config_print(NULL));
    fflush(stdout);
    const char *out = read_all(cr_get_redirected_stdout());
    for (int i = 0; i < ptsc__config_count(); i++)
        cr_expect(strstr(out, ptsc__config_name(i)) != NULL, "%s missing from ptsc_config_print",
                  ptsc__config_name(i));
    cr_expect(strstr(out, "shared") != NULL, "PTSC_COMM=shared not shown: \"%s\"", out);
}

Test(config, config_print_bad_value)
{
    setenv("PTSC_STAGING_CHUNK", "-1", 1);
    PTSC_ASSERT_RC(ptsc_config_print(stderr), PTSC_ERR_CONFIG);
    cr_expect(strstr(ptsc_last_error(), "PTSC_STAGING_CHUNK") != NULL, "detail \"%s\"", ptsc_last_error());
}

Test(config, markdown_lists_every_variable)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    ptsc__config_markdown(f);
    fclose(f);
    for (int i = 0; i < ptsc__config_count(); i++)
        cr_expect(strstr(buf, ptsc__config_name(i)) != NULL, "%s missing from docs markdown",
                  ptsc__config_name(i));
    free(buf);
}
