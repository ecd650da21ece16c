/*
 * The PTSC_* variables: one table, from which parsing, ptsc_config_print,
 * ptsc-info and docs/ENV.md all derive. To add a variable, add a row and a
 * field of ptsc__config_t; nothing else.
 */
#include "ptsc_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

typedef enum { VAR_ENUM, VAR_INT, VAR_SIZE, VAR_BOOL, VAR_DEVMAP } var_type_t;

typedef struct {
    const char *name;
    const char *def; /* default, as the user would write it */
    var_type_t type;
    size_t offset;              /* field of ptsc__config_t */
    const char *const *choices; /* VAR_ENUM: value i is choices[i]; NULL-terminated */
    long long min, max;         /* VAR_INT, VAR_SIZE */
    const char *doc;
} var_t;

static const char *const scope_choices[] = {"auto", "none", "thread", "global", "device", NULL};
static const char *const check_choices[] = {"off", "warn", "error", NULL};
static const char *const stream_choices[] = {"per-thread", "owned", "legacy", NULL};
static const char *const comm_choices[] = {"dup", "shared", NULL};
static const char *const tri_choices[] = {"auto", "yes", "no", NULL};
static const char *const staging_choices[] = {"auto", "always", "never", NULL};
static const char *const log_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const memcache_choices[] = {"safe", "host", "off", NULL};
static const char *const progress_choices[] = {"thread", "caller", NULL};

#define FIELD(f) offsetof(ptsc__config_t, f)

static const var_t vars[] = {
    {"PTSC_SYNC_SCOPE", "auto", VAR_ENUM, FIELD(sync_scope), scope_choices, 0, 0,
     "What is synchronised before MPI touches a device, managed or pinned buffer: auto (thread scope for "
     "attached threads, global for others), none, thread (the thread's stream and earlier legacy-stream "
     "work), global (legacy default stream), device (cudaDeviceSynchronize)."},
    {"PTSC_SYNC_CHECK", "off", VAR_ENUM, FIELD(sync_check), check_choices, 0, 0,
     "Race check: report a device buffer handed to MPI directly, with no sync, while work on the thread's "
     "stream or earlier legacy-stream work still runs, as a warning (warn) or as PTSC_ERR_RACE (error)."},
    {"PTSC_STREAM", "per-thread", VAR_ENUM, FIELD(stream), stream_choices, 0, 0,
     "Stream bound to each thread: per-thread (cudaStreamPerThread), owned (a blocking stream created per "
     "thread), legacy (cudaStreamLegacy)."},
    {"PTSC_COMM", "dup", VAR_ENUM, FIELD(comm), comm_choices, 0, 0,
     "dup: one communicator lane per thread index; shared: one communicator, threads kept apart by tag "
     "bits (smaller tag range, collectives serialised by lane tag space)."},
    {"PTSC_MAX_THREADS", "auto", VAR_INT, FIELD(max_threads), NULL, 1, PTSC__MAX_THREADS_LIMIT,
     "Thread slots (lanes) per rank: thread indices run from 0 to this minus 1. auto is the largest of 16, "
     "omp_get_max_threads(), the product of the OMP_NUM_THREADS list and OMP_THREAD_LIMIT where set (up to "
     "256); ptsc-info says which decided. Each slot costs a communicator (MPI_Comm_dup at init) with "
     "PTSC_COMM=dup, and MPICH 4.0 has about 2045 in all (more slots fail ptsc_init with "
     "PTSC_ERR_CONFIG on every rank: use PTSC_COMM=shared there); each slot shrinks the tag range "
     "(ptsc_tag_max), most with PTSC_COMM=shared. Must be equal on every rank."},
    {"PTSC_DEVICE_MAP", "rank", VAR_DEVMAP, FIELD(device_map), NULL, 0, 0,
     "Device of each thread: rank (node-local rank modulo devices), thread (thread index modulo devices), "
     "or a comma list of device numbers indexed by node-local rank * threads + thread, modulo its length."},
    {"PTSC_CUDA_AWARE", "auto", VAR_ENUM, FIELD(cuda_aware), tri_choices, 0, 0,
     "Whether MPI may be given device pointers: auto asks MPIX_Query_cuda_support(); yes or no override."},
    {"PTSC_STAGING", "auto", VAR_ENUM, FIELD(staging), staging_choices, 0, 0,
     "Stage device buffers through pinned host memory: auto (when MPI is not CUDA-aware), always, never "
     "(device buffers then need a CUDA-aware MPI)."},
    {"PTSC_STAGING_CHUNK", "4MiB", VAR_SIZE, FIELD(staging_chunk), NULL, 4096, 1LL << 30,
     "While staging is on, messages above this size travel framed in pieces of it, pipelined through the "
     "staging ring; the size of a ring slot (k, M, G suffixes "
     "are binary). Must be equal on every rank."},
    {"PTSC_STAGING_DEPTH", "4", VAR_INT, FIELD(staging_depth), NULL, 1, 64,
     "Chunk-sized pinned slots per thread for staged sends, and as many for staged receives: bounds the "
     "pinned memory of a thread and how many pieces it has in flight."},
    {"PTSC_DIRECT_MIN", "auto", VAR_SIZE, FIELD(direct_min), NULL, 0, 1LL << 30,
     "On a CUDA-aware MPI, device messages smaller than this are staged through pinned memory (faster for "
     "small messages), larger ones go to MPI directly; auto is 1MiB. Capped at PTSC_STAGING_CHUNK."},
    {"PTSC_ENQUEUE_POOL", "64MiB", VAR_SIZE, FIELD(enqueue_pool), NULL, 65536, 1LL << 40,
     "Pinned memory for the stream-ordered calls (ptsc_*_enqueue): their messages are staged in blocks "
     "of it. It is taken when no enqueued operation is in flight (a pinned allocation can wait for the "
     "device, and a stream may be waiting for this very process), and grows only at such moments; an "
     "enqueued call that finds it used up meanwhile returns PTSC_ERR_NO_MEMORY."},
    {"PTSC_PROGRESS", "thread", VAR_ENUM, FIELD(progress), progress_choices, 0, 0,
     "Who moves the parts of a message that MPI cannot move alone (pieces, staged copies, receive matching, "
     "posts deferred behind the thread scope's event) while their thread is away from ptsc: thread (a "
     "progress agent per rank, asleep while nothing is in flight; MPI's progress rule holds: a started "
     "operation completes whatever its thread does next), or caller (only the thread's own ptsc calls; a "
     "blocking collective or a computation between start and wait can then deadlock or stall)."},
    {"PTSC_MEM_CACHE", "safe", VAR_ENUM, FIELD(mem_cache), memcache_choices, 0, 0,
     "Per-thread cache of buffer classes: safe keeps device, managed and pinned answers per 4 KiB block "
     "(a stale one only costs a sync), and pageable host answers per address only while ptsc tracks CUDA's "
     "memory calls through CUPTI (every allocation, free or registration drops the cache; off without a "
     "device or when a profiler such as Nsight holds CUPTI, see ptsc-info), otherwise it classifies pageable "
     "buffers afresh on every call; host and off never subscribe to CUPTI (it has one subscriber per "
     "process: choose them when a CUPTI client started later, such as torch.profiler, needs it); host also "
     "keeps pageable answers per address (no CUDA call for a host buffer seen before), and then the "
     "program must call ptsc_mem_forget after it registers or allocates CUDA memory (cudaHostRegister, "
     "cudaMallocHost, cudaMallocManaged, cudaMalloc) while it communicates; off asks CUDA every time."},
    {"PTSC_LOG", "warn", VAR_ENUM, FIELD(log), log_choices, 0, 0,
     "Log level of messages on stderr; each line carries rank and thread."},
    {"PTSC_STATS", "0", VAR_BOOL, FIELD(stats), NULL, 0, 0,
     "Print per-thread counters (syncs, sync time, messages, staged bytes) at ptsc_finalize. Sync time is "
     "measured only with this on (no clock reads per sync otherwise): the sync_ns counter of "
     "ptsc_ctx_stats stays 0 without it."},
    {"PTSC_PRINT_CONFIG", "0", VAR_BOOL, FIELD(print_config), NULL, 0, 0,
     "Print the effective configuration on rank 0 at ptsc_init."},
    {"PTSC_TIMEOUT", "0", VAR_INT, FIELD(timeout), NULL, 0, 86400,
     "Hang diagnostics, in seconds (0: off). A blocking call (receive, send, probe, wait, collective) that "
     "waits longer prints once to stderr what it waits for: call, peer rank and thread, tag, bytes and for "
     "how long. The call goes on waiting. A watchdog thread does this; off, it costs nothing."},
    {"PTSC_NVTX", "0", VAR_BOOL, FIELD(nvtx), NULL, 0, 0,
     "NVTX ranges for Nsight Systems (nsys profile): syncs (\"sync thread\"), staging copies (\"stage D2H "
     "64 KiB\"), the blocking part of each point-to-point message (\"ptsc_send r1 t3 tag 7 64 KiB "
     "staged\") and collectives, in the ptsc domain; attached threads are named \"ptsc r0 t3\". Needs "
     "the CUDA layer (NVTX 3 from the toolkit, no library). Off, a range costs one branch."},
};

#define NVARS ((int)(sizeof vars / sizeof vars[0]))

int ptsc__config_count(void) { return NVARS; }

const char *ptsc__config_name(int i) { return i >= 0 && i < NVARS ? vars[i].name : NULL; }

const char *ptsc__config_default(int i) { return i >= 0 && i < NVARS ? vars[i].def : NULL; }

const char *ptsc__config_doc(int i) { return i >= 0 && i < NVARS ? vars[i].doc : NULL; }

static void choices_text(const var_t *v, char *buf, size_t n);

const char *ptsc__config_accepts(int i, char *buf, size_t n)
{
    if (i < 0 || i >= NVARS || !buf || n == 0)
        return NULL;
    choices_text(&vars[i], buf, n);
    return buf;
}

static const char *var_value(const var_t *v)
{
    const char *s = getenv(v->name);
    return s ? s : v->def;
}

/* "a, b or c" for messages and docs. */
static void choices_text(const var_t *v, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    switch (v->type) {
    case VAR_ENUM:
        for (int i = 0; v->choices[i] && len < n; i++)
            len += (size_t)snprintf(buf + len, n - len, "%s%s",
                                    i == 0              ? ""
                                    : v->choices[i + 1] ? ", "
                                                        : " or ",
                                    v->choices[i]);
        break;
    case VAR_INT:
        snprintf(buf, n, "%san integer %lld..%lld", strcmp(v->def, "auto") == 0 ? "auto or " : "", v->min,
                 v->max);
        break;
    case VAR_SIZE:
        snprintf(buf, n, "%sa size %lld..%lld bytes, optional suffix k, M, G (or KiB, MiB, GiB)",
                 strcmp(v->def, "auto") == 0 ? "auto or " : "", v->min, v->max);
        break;
    case VAR_BOOL:
        snprintf(buf, n, "0 or 1 (also no/yes, off/on, false/true)");
        break;
    case VAR_DEVMAP:
        snprintf(buf, n, "rank, thread or a comma list of device numbers (e.g. 0,1)");
        break;
    }
}

/* A value as a message can show it: bytes outside printable ASCII as \xNN,
 * and a long value cut after its first 48 bytes, its length given. */
static void value_text(const char *s, char *buf, size_t n)
{
    size_t len = strlen(s), k = 0, shown = len > 64 ? 48 : len;
    for (size_t i = 0; i < shown && k + 5 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
            buf[k++] = (char)c;
        else
            k += (size_t)snprintf(buf + k, n - k, "\\x%02x", c);
    }
    buf[k] = '\0';
    if (shown < len)
        snprintf(buf + k, n - k, "...\" (%zu bytes)", len);
    else
        snprintf(buf + k, n - k, "\"");
}

static int bad_value(const var_t *v, const char *s)
{
    char accepts[256], shown[256];
    choices_text(v, accepts, sizeof accepts);
    value_text(s, shown, sizeof shown);
    return ptsc__err(PTSC_ERR_CONFIG, "%s=\"%s is not valid: it accepts %s", v->name, shown, accepts);
}

static int parse_ll(const char *s, long long *out, const char **end)
{
    char *e;
    errno = 0;
    long long x = strtoll(s, &e, 10);
    if (e == s || errno == ERANGE || !isdigit((unsigned char)*s))
        return -1;
    *out = x;
    *end = e;
    return 0;
}

static int parse_size(const char *s, long long *out)
{
    static const struct {
        const char *suffix;
        int shift;
    } units[] = {{"", 0},   {"k", 10},   {"K", 10}, {"KiB", 10}, {"m", 20},
                 {"M", 20}, {"MiB", 20}, {"g", 30}, {"G", 30},   {"GiB", 30}};
    long long x;
    const char *end;
    if (parse_ll(s, &x, &end) != 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (x > (LLONG_MAX >> units[i].shift))
                return -1;
            *out = x << units[i].shift;
            return 0;
        }
    }
    return -1;
}

static int parse_devmap(const var_t *v, const char *s, ptsc__config_t *cfg)
{
    if (strcmp(s, "rank") == 0) {
        cfg->device_map = PTSC__MAP_RANK;
        return PTSC_OK;
    }
    if (strcmp(s, "thread") == 0) {
        cfg->device_map = PTSC__MAP_THREAD;
        return PTSC_OK;
    }
    int n = 0;
    const char *p = s;
    for (;;) {
        long long d;
        const char *end;
        if (n == PTSC__MAX_DEVLIST || parse_ll(p, &d, &end) != 0 || d > 1023)
            return bad_value(v, s);
        cfg->devlist[n++] = (int)d;
        if (*end == '\0')
            break;
        if (*end != ',')
            return bad_value(v, s);
        p = end + 1;
    }
    cfg->device_map = PTSC__MAP_LIST;
    cfg->ndevlist = n;
    return PTSC_OK;
}

static int parse_var(const var_t *v, const char *s, ptsc__config_t *cfg)
{
    char *field = (char *)cfg + v->offset;
    switch (v->type) {
    case VAR_ENUM:
        for (int i = 0; v->choices[i]; i++) {
            if (strcmp(s, v->choices[i]) == 0) {
                *(int *)field = i;
                return PTSC_OK;
            }
        }
        return bad_value(v, s);
    case VAR_INT: {
        long long x;
        const char *end;
        if (strcmp(s, "auto") == 0 && strcmp(v->def, "auto") == 0) {
            *(int *)field = 0;
            return PTSC_OK;
        }
        if (parse_ll(s, &x, &end) != 0 || *end != '\0' || x < v->min || x > v->max)
            return bad_value(v, s);
        *(int *)field = (int)x;
        return PTSC_OK;
    }
    case VAR_SIZE: {
        long long x;
        if (strcmp(s, "auto") == 0 && strcmp(v->def, "auto") == 0) {
            *(size_t *)field = PTSC__SIZE_AUTO;
            return PTSC_OK;
        }
        if (parse_size(s, &x) != 0 || x < v->min || x > v->max)
            return bad_value(v, s);
        *(size_t *)field = (size_t)x;
        return PTSC_OK;
    }
    case VAR_BOOL: {
        static const char *const yes[] = {"1", "yes", "on", "true"}, *const no[] = {"0", "no", "off",
                                                                                    "false"};
        for (int i = 0; i < 4; i++) {
            if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
                *(int *)field = strcmp(s, yes[i]) == 0;
                return PTSC_OK;
            }
        }
        return bad_value(v, s);
    }
    case VAR_DEVMAP:
        return parse_devmap(v, s, cfg);
    }
    return ptsc__err(PTSC_ERR_INTERNAL, "%s: unknown variable type", v->name);
}

int ptsc__config_load(ptsc__config_t *cfg)
{
    ptsc__config_t c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < NVARS; i++) {
        const char *env = getenv(vars[i].name);
        int rc = parse_var(&vars[i], env ? env : vars[i].def, &c);
        if (rc != PTSC_OK)
            return rc;
        if (env)
            c.from_env |= 1ull << i;
    }
    *cfg = c;
    ptsc__log_level = c.log;
    return PTSC_OK;
}

static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    }
    return d[la][lb];
}

void ptsc__config_warn_unknown(void)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "PTSC_", 5) != 0)
            continue;
        char name[128];
        size_t len = strcspn(*e, "=");
        if (len >= sizeof name)
            len = sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        int best = -1, best_d = 1 << 30;
        for (int i = 0; i < NVARS; i++) {
            int d = edit_distance(name, vars[i].name);
            if (d == 0) {
                best = -2;
                break;
            }
            if (d < best_d) {
                best_d = d;
                best = i;
            }
        }
        if (best == -2)
            continue;
        ptsc__log(PTSC__LOG_WARN, "unknown variable %s ignored; did you mean %s?", name, vars[best].name);
    }
}

void ptsc__config_print(const ptsc__config_t *cfg, FILE *out)
{
    for (int i = 0; i < NVARS; i++)
        fprintf(out, "  %-20s = %-12s (%s)\n", vars[i].name, var_value(&vars[i]),
                cfg->from_env & (1ull << i) ? "environment" : "default");
}

void ptsc__config_markdown(FILE *out)
{
    fputs(
        "# ptsc environment variables\n\n"
        "Generated by `ptsc-info --markdown` from the table in src/config.c; a test fails when they differ.\n"
        "A bad value makes `ptsc_init` fail with `PTSC_ERR_CONFIG` and a message naming the variable;\n"
        "an unknown `PTSC_*` variable draws a warning that suggests the closest name.\n\n"
        "| Variable | Default | Accepts | Description |\n|---|---|---|---|\n",
        out);
    for (int i = 0; i < NVARS; i++) {
        char accepts[256];
        choices_text(&vars[i], accepts, sizeof accepts);
        fprintf(out, "| `%s` | `%s` | %s | %s |\n", vars[i].name, vars[i].def, accepts, vars[i].doc);
    }
}

int ptsc_config_print(void *out)
{
    ptsc__config_t cfg;
    int rc = ptsc__config_load(&cfg);
    if (rc != PTSC_OK)
        return rc;
    ptsc__config_print(&cfg, out ? (FILE *)out : stdout);
    return PTSC_OK;
}

/* The product of an OMP_NUM_THREADS list ("8" or "4,2", one entry per
 * nesting level), capped at the slot limit; 0 when absent or malformed. */
static int omp_num_threads_product(const char *s)
{
    if (!s)
        return 0;
    long long prod = 1;
    const char *p = s;
    for (;;) {
        long long x;
        const char *end;
        while (*p == ' ')
            p++;
        if (parse_ll(p, &x, &end) != 0 || x < 1)
            return 0;
        prod = x >= PTSC__MAX_THREADS_LIMIT || prod * x >= PTSC__MAX_THREADS_LIMIT ? PTSC__MAX_THREADS_LIMIT
                                                                                   : prod * x;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == '\0')
            return (int)prod;
        if (*p != ',')
            return 0;
        p++;
    }
}

int ptsc__config_slots(int max_threads, int omp_max, const char *omp_num_threads, int thread_limit,
                       int *source, char *why, size_t n)
{
    int src, slots;
    if (max_threads > 0) {
        src = PTSC__SLOTS_SET;
        slots = max_threads;
    } else {
        int num = omp_num_threads_product(omp_num_threads);
        int limit = thread_limit > PTSC__SLOTS_LIMIT_CAP ? PTSC__SLOTS_LIMIT_CAP : thread_limit;
        /* Later inputs win ties: the reason named is the most specific one. */
        src = PTSC__SLOTS_BY_FLOOR;
        slots = PTSC__SLOTS_FLOOR;
        if (limit >= slots) {
            src = PTSC__SLOTS_BY_OMP_LIMIT;
            slots = limit;
        }
        if (omp_max >= slots) {
            src = PTSC__SLOTS_BY_OMP_MAX;
            slots = omp_max;
        }
        if (num >= slots) {
            src = PTSC__SLOTS_BY_OMP_NUM;
            slots = num;
        }
    }
    if (slots > PTSC__MAX_THREADS_LIMIT)
        slots = PTSC__MAX_THREADS_LIMIT;
    if (source)
        *source = src;
    if (why && n > 0) {
        static const char *const by[] = {"PTSC_MAX_THREADS", "the floor", "omp_get_max_threads()",
                                         "OMP_NUM_THREADS", "OMP_THREAD_LIMIT"};
        if (src == PTSC__SLOTS_SET) {
            snprintf(why, n, "set by PTSC_MAX_THREADS=%d", max_threads);
        } else {
            char num[32] = "unset", limit[32] = "unset";
            if (omp_num_threads)
                snprintf(num, sizeof num, "\"%.16s\"%s", omp_num_threads,
                         omp_num_threads_product(omp_num_threads) ? "" : " ignored");
            if (thread_limit > 0)
                snprintf(limit, sizeof limit, "%d", thread_limit);
            snprintf(why, n,
                     "auto: %s decided (floor %d, omp_get_max_threads() %d, OMP_NUM_THREADS %s, "
                     "OMP_THREAD_LIMIT %s counted up to %d)",
                     by[src], PTSC__SLOTS_FLOOR, omp_max, num, limit, PTSC__SLOTS_LIMIT_CAP);
        }
    }
    return slots;
}

int ptsc__config_slots_now(const ptsc__config_t *cfg, int *source, char *why, size_t n)
{
    int max = cfg->max_threads;
    if (max > 0)
        return ptsc__config_slots(max, 0, NULL, 0, source, why, n);
    /* OMP_THREAD_LIMIT counts only where the user set it: unset, runtimes
     * report their own ceiling (INT_MAX, or thousands), not a region size. */
    int limit = getenv("OMP_THREAD_LIMIT") ? omp_get_thread_limit() : 0;
    return ptsc__config_slots(0, omp_get_max_threads(), getenv("OMP_NUM_THREADS"), limit, source, why, n);
}
