/*
 * The PTSC_* parser against random values: for every variable of the table,
 * tens of thousands of values (random bytes, long strings, numbers with
 * signs, whitespace, odd units and too many digits, case variants of the
 * accepted words, device lists). Each value must be either accepted with
 * the value an independent reading of the variable's "accepts" text gives,
 * or rejected with PTSC_ERR_CONFIG, the variable named in a printable detail
 * and the output left alone. Nothing may crash.
 *
 * The seed is printed; PTSC_FUZZ_SEED=<n> reruns one sequence, and
 * PTSC_FUZZ_ROUNDS=<n> sets the values per variable (default 20000, cut
 * short after 4 seconds in all).
 */
#include "ptsc_internal.h"
#include "test_util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

TestSuite(config_fuzz, .init = ptsc_test_clean_env, .timeout = 120);

static uint64_t rng;

static uint64_t next(void)
{
    /* xorshift64*: reproducible from the seed alone. */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static unsigned below(unsigned n) { return (unsigned)(next() % n); }

/* ------------------------------------------------------------------------ */
/* What a variable accepts, read from its "accepts" text                     */
/* ------------------------------------------------------------------------ */

enum { T_ENUM, T_INT, T_SIZE, T_BOOL, T_DEVMAP };

typedef struct {
    const char *name;
    int type;
    int has_auto;
    long long min, max;
    char words[16][32]; /* T_ENUM: the accepted words, value i is words[i] */
    int nwords;
    ptrdiff_t offset; /* field of ptsc__config_t, -1 when this test does not know it */
} spec_t;

static ptrdiff_t field_of(const char *name)
{
    static const struct {
        const char *name;
        size_t off;
    } f[] = {
        {"PTSC_SYNC_SCOPE", offsetof(ptsc__config_t, sync_scope)},
        {"PTSC_SYNC_CHECK", offsetof(ptsc__config_t, sync_check)},
        {"PTSC_STREAM", offsetof(ptsc__config_t, stream)},
        {"PTSC_COMM", offsetof(ptsc__config_t, comm)},
        {"PTSC_MAX_THREADS", offsetof(ptsc__config_t, max_threads)},
        {"PTSC_DEVICE_MAP", offsetof(ptsc__config_t, device_map)},
        {"PTSC_CUDA_AWARE", offsetof(ptsc__config_t, cuda_aware)},
        {"PTSC_STAGING", offsetof(ptsc__config_t, staging)},
        {"PTSC_STAGING_CHUNK", offsetof(ptsc__config_t, staging_chunk)},
        {"PTSC_STAGING_DEPTH", offsetof(ptsc__config_t, staging_depth)},
        {"PTSC_DIRECT_MIN", offsetof(ptsc__config_t, direct_min)},
        {"PTSC_MEM_CACHE", offsetof(ptsc__config_t, mem_cache)},
        {"PTSC_LOG", offsetof(ptsc__config_t, log)},
        {"PTSC_STATS", offsetof(ptsc__config_t, stats)},
        {"PTSC_PRINT_CONFIG", offsetof(ptsc__config_t, print_config)},
        {"PTSC_TIMEOUT", offsetof(ptsc__config_t, timeout)},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (strcmp(f[i].name, name) == 0)
            return (ptrdiff_t)f[i].off;
    return -1;
}

static spec_t spec_of(int row)
{
    spec_t s;
    memset(&s, 0, sizeof s);
    char acc[512];
    s.name = ptsc__config_name(row);
    ptsc__config_accepts(row, acc, sizeof acc);
    s.offset = field_of(s.name);
    const char *p = acc;
    if (strncmp(p, "auto or ", 8) == 0) {
        s.has_auto = 1;
        p += 8;
    }
    if (sscanf(p, "an integer %lld..%lld", &s.min, &s.max) == 2) {
        s.type = T_INT;
    } else if (sscanf(p, "a size %lld..%lld", &s.min, &s.max) == 2) {
        s.type = T_SIZE;
    } else if (strncmp(acc, "0 or 1", 6) == 0) {
        s.type = T_BOOL;
    } else if (strncmp(acc, "rank, thread or a comma list", 28) == 0) {
        s.type = T_DEVMAP;
    } else {
        /* "a, b or c" */
        s.type = T_ENUM;
        s.has_auto = 0;
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", acc);
        for (char *tok = strtok(tmp, " ,"); tok && s.nwords < 16; tok = strtok(NULL, " ,"))
            if (strcmp(tok, "or") != 0)
                snprintf(s.words[s.nwords++], sizeof s.words[0], "%s", tok);
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* The oracle: what the variable must make of a value                        */
/* ------------------------------------------------------------------------ */

/* A decimal of digits only (no sign, no space), at most LLONG_MAX; *end after it. */
static int digits(const char *s, long long *v, const char **end)
{
    if (!isdigit((unsigned char)*s))
        return 0;
    long long x = 0;
    for (; isdigit((unsigned char)*s); s++) {
        int d = *s - '0';
        if (x > (LLONG_MAX - d) / 10)
            return 0;
        x = x * 10 + d;
    }
    *v = x;
    *end = s;
    return 1;
}

typedef struct {
    int ok;
    long long value; /* T_INT, T_SIZE (SIZE_AUTO as -1), T_ENUM index, T_BOOL */
    int map;         /* T_DEVMAP */
    int n, list[PTSC__MAX_DEVLIST];
} expect_t;

static expect_t oracle(const spec_t *sp, const char *s)
{
    expect_t e = {0};
    long long v;
    const char *end;
    switch (sp->type) {
    case T_ENUM:
        for (int i = 0; i < sp->nwords; i++)
            if (strcmp(s, sp->words[i]) == 0) {
                e.ok = 1;
                e.value = i;
            }
        break;
    case T_BOOL: {
        static const char *w[] = {"0", "no", "off", "false", "1", "yes", "on", "true"};
        for (int i = 0; i < 8; i++)
            if (strcmp(s, w[i]) == 0) {
                e.ok = 1;
                e.value = i >= 4;
            }
        break;
    }
    case T_INT:
        if (sp->has_auto && strcmp(s, "auto") == 0) {
            e.ok = 1;
            e.value = 0;
        } else if (digits(s, &v, &end) && *end == '\0' && v >= sp->min && v <= sp->max) {
            e.ok = 1;
            e.value = v;
        }
        break;
    case T_SIZE:
        if (sp->has_auto && strcmp(s, "auto") == 0) {
            e.ok = 1;
            e.value = -1;
        } else if (digits(s, &v, &end)) {
            static const struct {
                const char *u;
                int shift;
            } units[] = {{"", 0},   {"k", 10},   {"K", 10}, {"KiB", 10}, {"m", 20},
                         {"M", 20}, {"MiB", 20}, {"g", 30}, {"G", 30},   {"GiB", 30}};
            for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
                if (strcmp(end, units[i].u) == 0 && v <= (LLONG_MAX >> units[i].shift)) {
                    long long b = v << units[i].shift;
                    if (b >= sp->min && b <= sp->max) {
                        e.ok = 1;
                        e.value = b;
                    }
                }
        }
        break;
    case T_DEVMAP:
        if (strcmp(s, "rank") == 0) {
            e.ok = 1;
            e.map = PTSC__MAP_RANK;
        } else if (strcmp(s, "thread") == 0) {
            e.ok = 1;
            e.map = PTSC__MAP_THREAD;
        } else {
            const char *p = s;
            for (;;) {
                if (e.n == PTSC__MAX_DEVLIST || !digits(p, &v, &end) || v > 1023)
                    return (expect_t){0};
                e.list[e.n++] = (int)v;
                if (*end == '\0')
                    break;
                if (*end != ',')
                    return (expect_t){0};
                p = end + 1;
            }
            e.ok = 1;
            e.map = PTSC__MAP_LIST;
        }
        break;
    }
    return e;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

static const char *const common_words[] = {
    "auto",   "none",       "thread", "global", "device", "off",   "warn",   "error", "owned",
    "legacy", "per-thread", "dup",    "shared", "yes",    "no",    "always", "never", "safe",
    "host",   "debug",      "info",   "rank",   "true",   "false", "on",     "0",     "1"};
static const char *const units[] = {"",      "k",   "K",  "KiB",      "m",           "M",   "MiB", "g",
                                    "G",     "GiB", "kb", "KB",       "Ki",          "b",   "B",   " k",
                                    "e3",    ".5",  "x",  "T",        "TiB",         "kiB", "k ",  "kk",
                                    "MiB\n", "\t",  "%",  "\xc2\xb5", "\xef\xbc\x91"};

#define VALUE_MAX 20000

static void append(char *v, size_t *n, const char *s)
{
    size_t l = strlen(s);
    if (*n + l >= VALUE_MAX)
        l = VALUE_MAX - 1 - *n;
    memcpy(v + *n, s, l);
    *n += l;
    v[*n] = '\0';
}

static void number(char *v, size_t *n, const spec_t *sp)
{
    char num[64];
    switch (below(6)) {
    case 0: /* near the bounds */
        snprintf(num, sizeof num, "%lld", (below(2) ? sp->min : sp->max) + (long long)below(5) - 2);
        break;
    case 1: /* anything in 64 bits */
        snprintf(num, sizeof num, "%lld", (long long)next());
        break;
    case 2: { /* too many digits */
        int k = 20 + (int)below(30);
        for (int i = 0; i < k; i++)
            num[i] = (char)('0' + below(10));
        num[k] = '\0';
        break;
    }
    case 3: /* small, with leading zeros sometimes */
        snprintf(num, sizeof num, "%s%u", below(4) == 0 ? "000" : "", below(100));
        break;
    case 4: /* exactly the bounds of the types */
        snprintf(num, sizeof num, "%s", below(2) ? "9223372036854775807" : "2147483648");
        break;
    default:
        snprintf(num, sizeof num, "%u", below(1u << 31));
        break;
    }
    append(v, n, num);
}

/* A value for the variable: one of several classes. */
static void make_value(char *v, const spec_t *sp)
{
    size_t n = 0;
    v[0] = '\0';
    switch (below(9)) {
    case 0: { /* random bytes, non-ASCII included, no NUL */
        int len = 1 + (int)below(300);
        for (int i = 0; i < len; i++)
            v[n++] = (char)(1 + below(255));
        v[n] = '\0';
        break;
    }
    case 1: { /* long strings */
        int len = 1000 + (int)below(VALUE_MAX - 1001);
        char c = below(2) ? (char)('0' + below(10)) : (char)('a' + below(26));
        memset(v, c, (size_t)len);
        v[len] = '\0';
        break;
    }
    case 2:
    case 3: { /* a number: sign, whitespace, unit */
        static const char *const pre[] = {"", "", "", "+", "-", " ", "\t", "0x", "--", "\xe2\x88\x92"};
        static const char *const post[] = {"", "", "", " ", "\n", "\t", ",", ";"};
        append(v, &n, pre[below(sizeof pre / sizeof pre[0])]);
        number(v, &n, sp);
        append(v, &n, units[below(sizeof units / sizeof units[0])]);
        append(v, &n, post[below(sizeof post / sizeof post[0])]);
        break;
    }
    case 4:
    case 5: { /* an accepted word, or another variable's, in case variants */
        const char *w = sp->type == T_ENUM && below(3)
                            ? sp->words[below((unsigned)sp->nwords)]
                            : common_words[below(sizeof common_words / sizeof common_words[0])];
        append(v, &n, w);
        for (size_t i = 0; i < n; i++)
            if (below(3) == 0)
                v[i] = (char)(below(2) ? toupper((unsigned char)v[i]) : tolower((unsigned char)v[i]));
        if (below(4) == 0)
            append(v, &n, below(2) ? " " : "\xc3\xa9");
        break;
    }
    case 6: { /* a comma list of numbers */
        int k = (int)below(80);
        for (int i = 0; i < k; i++) {
            if (i)
                append(v, &n, below(20) ? "," : ",,");
            char d[16];
            snprintf(d, sizeof d, "%d", below(10) ? (int)below(1100) : -(int)below(5));
            append(v, &n, d);
        }
        if (below(5) == 0)
            append(v, &n, ",");
        break;
    }
    case 7: /* exactly a valid value, to exercise the accepted side */
        if (sp->type == T_ENUM)
            append(v, &n, sp->words[below((unsigned)sp->nwords)]);
        else if (sp->type == T_BOOL)
            append(v, &n, below(2) ? "yes" : "0");
        else if (sp->type == T_DEVMAP)
            append(v, &n, below(2) ? "thread" : "0,1,2");
        else {
            char num[32];
            long long span = sp->max - sp->min;
            snprintf(num, sizeof num, "%lld", sp->min + (long long)(next() % (unsigned long long)(span + 1)));
            append(v, &n, num);
        }
        break;
    default: /* empty, or a lone unit */
        append(v, &n, below(2) ? "" : units[below(sizeof units / sizeof units[0])]);
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* The check                                                                 */
/* ------------------------------------------------------------------------ */

static char value[VALUE_MAX];

/* The value printed for a failure: escaped, cut. */
static const char *shown(const char *s)
{
    static char b[200];
    size_t k = 0;
    for (; *s && k + 5 < sizeof b - 20; s++) {
        unsigned char c = (unsigned char)*s;
        k += (size_t)snprintf(b + k, sizeof b - k, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
    }
    if (*s)
        snprintf(b + k, sizeof b - k, "...(%zu bytes)", strlen(s));
    return b;
}

/* 1 when the variable mishandled `value` (printed), else 0 for a value
 * rightly rejected and 2 for one rightly accepted. */
static int check_one(int row, const spec_t *sp, unsigned long long seed, long i)
{
    ptsc__config_t cfg, before;
    memset(&cfg, 0x5A, sizeof cfg);
    before = cfg;
    setenv(sp->name, value, 1);
    int rc = ptsc__config_load(&cfg);
    unsetenv(sp->name);
    ptsc__log_level = PTSC__LOG_WARN; /* an accepted PTSC_LOG=debug would log every rejection */
    expect_t e = oracle(sp, value);
    const char *d = ptsc_last_error();
#define FUZZ_FAIL(...)                                                                     \
    do {                                                                                   \
        cr_log_error("seed %llu, %s value %ld \"%s\": ", seed, sp->name, i, shown(value)); \
        cr_log_error(__VA_ARGS__);                                                         \
        return 1;                                                                          \
    } while (0)
    if (rc != PTSC_OK && rc != PTSC_ERR_CONFIG)
        FUZZ_FAIL("returned %s (%s)", ptsc_status_name(rc), d);
    if (rc == PTSC_ERR_CONFIG) {
        if (e.ok)
            FUZZ_FAIL("rejected a valid value: %s", d);
        if (!strstr(d, sp->name))
            FUZZ_FAIL("detail does not name the variable: %s", d);
        for (const char *p = d; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                FUZZ_FAIL("detail has an unprintable byte 0x%02x: %s", (unsigned char)*p, shown(d));
        if (memcmp(&cfg, &before, sizeof cfg) != 0)
            FUZZ_FAIL("config written although loading failed");
        return 0;
    }
    if (!e.ok)
        FUZZ_FAIL("accepted a value outside what %s accepts", sp->name);
    if (!(cfg.from_env & (1ull << row)))
        FUZZ_FAIL("accepted but not marked as set in the environment");
    if (sp->offset < 0)
        return 2; /* a variable this test does not know the field of: accept/reject checked only */
    const char *f = (const char *)&cfg + sp->offset;
    long long got;
    switch (sp->type) {
    case T_SIZE: {
        size_t z;
        memcpy(&z, f, sizeof z);
        got = z == PTSC__SIZE_AUTO ? -1 : (long long)z;
        break;
    }
    case T_DEVMAP:
        if (cfg.device_map != e.map)
            FUZZ_FAIL("device map %d, expected %d", cfg.device_map, e.map);
        if (e.map == PTSC__MAP_LIST &&
            (cfg.ndevlist != e.n || memcmp(cfg.devlist, e.list, sizeof(int) * (size_t)e.n)))
            FUZZ_FAIL("device list of %d entries, expected %d", cfg.ndevlist, e.n);
        return 2;
    default: {
        int x;
        memcpy(&x, f, sizeof x);
        got = x;
        break;
    }
    }
    if (got != e.value)
        FUZZ_FAIL("parsed as %lld, expected %lld", got, e.value);
    return 2;
#undef FUZZ_FAIL
}

Test(config_fuzz, random_values_per_variable)
{
    const char *env_seed = getenv("PTSC_FUZZ_SEED"), *env_rounds = getenv("PTSC_FUZZ_ROUNDS");
    unsigned long long seed = env_seed ? strtoull(env_seed, NULL, 10) : 20240611ull;
    long rounds = env_rounds ? atol(env_rounds) : 20000;
    /* The test's own settings are not PTSC_* variables of the table. */
    unsetenv("PTSC_FUZZ_SEED");
    unsetenv("PTSC_FUZZ_ROUNDS");
    cr_log_info("config_fuzz: seed %llu (PTSC_FUZZ_SEED=%llu reruns it), %ld values per variable", seed, seed,
                rounds);
    fprintf(stderr, "config_fuzz: seed %llu, %ld values per variable\n", seed, rounds);
    rng = seed ? seed : 1;
    int nvars = ptsc__config_count(), failures = 0;
    uint64_t t0 = ptsc__now_ns(), budget = 4000000000ull / (uint64_t)nvars; /* ~4 s in all */
    long total = 0, accepted = 0;
    for (int row = 0; row < nvars; row++) {
        spec_t sp = spec_of(row);
        if (sp.type == T_ENUM)
            cr_assert_gt(sp.nwords, 0, "%s: no words read from its accepts text", sp.name);
        uint64_t start = ptsc__now_ns();
        for (long i = 0; i < rounds && failures < 20; i++) {
            make_value(value, &sp);
            int r = check_one(row, &sp, seed, i);
            failures += r == 1;
            accepted += r == 2;
            total++;
            if ((i & 255) == 255 && ptsc__now_ns() - start > budget)
                break;
        }
    }
    fprintf(stderr, "config_fuzz: %ld values in %.2f s, %ld accepted, %d failures\n", total,
            (double)(ptsc__now_ns() - t0) / 1e9, accepted, failures);
    cr_expect_eq(failures, 0, "%d values were mishandled (listed above); seed %llu", failures, seed);
    cr_expect_gt(accepted, 0, "no value was accepted: the generator misses the valid side");
}
