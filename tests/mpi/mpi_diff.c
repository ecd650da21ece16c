/*
 * Differential test of the wire formats. One long, random but reproducible
 * schedule of point-to-point calls and collectives over every (rank,
 * thread) endpoint; every rank and thread derives the same schedule from a
 * fixed seed, so both sides of each message agree on its size, datatype,
 * receive capacity and completion style without talking.
 *
 * Usage: mpi_diff PREFIX [NOPS [SEED]]; MPI_DIFF_TRUNCATE=0 in the environment leaves
 * the deliberate truncations out (to look at other differences while one is open).
 * MPI_DIFF_DEVICE=1 puts every buffer in device memory (built with CUDA only):
 * payloads are written and read back through the thread's stream, so the
 * records of a device run must equal those of a host run.
 * Writes PREFIX.<rank>.txt: one line per operation of each thread (thread
 * 0's lines first, then thread 1's, ...), holding the operation index, the
 * status name, the byte count reported in ptsc_info_t and a checksum of the
 * receive buffer. Only things that do not depend on timing are recorded, so
 * the files of a run under PTSC_STAGING=never and of a run under the
 * staging format (any chunk) must be identical: diff_records.cmake checks
 * that. Independently of the records, every received byte is checked here
 * (payloads are a function of the operation and the route; the part of a
 * receive buffer past the message must stay untouched, as MPI requires),
 * and every failure is printed as a FAIL line.
 *
 * What the schedule covers: message sizes from 0 to several 4 KiB chunks,
 * chunk boundaries, a few messages of several MiB; receive buffers larger
 * than the message (some of 4 MiB and more); deliberate truncations (the
 * receive must report PTSC_ERR_TRUNCATE, info.bytes the capacity of its
 * buffer as ptsc.h specifies, and the channel must stay usable); every pair of endpoints including oneself;
 * tags 0..63 and ptsc_tag_max; blocking send/recv/recv_info, sendrecv,
 * isend/irecv completed by ptsc_wait_info in a random order or by
 * ptsc_waitall, ptsc_test/ptsc_test_info polling, probe and iprobe before
 * the receive, PTSC_ANY_RANK receives (each with a tag no other operation
 * uses, so the source is unambiguous), and barrier, bcast, reduce,
 * allreduce, allgather and alltoall on every thread's lane.
 *
 * MPI_DIFF_INTERLEAVE=1 adds operations (K_LATE, "late") that leave
 * requests outstanding over a collective or a computation: one side of a
 * pair starts isends, irecvs or both, then every endpoint makes the same
 * lane collective, world collective, collective of MPI's own, or sleeps
 * 1 ms, and only then waits; the other side makes the blocking counterpart
 * before the collective, so it completes only if the outstanding requests
 * move while their thread is in the collective or asleep (MPI's progress
 * rule). MPI_DIFF_INTERLEAVE=both leaves both sides non-blocking (needs no
 * such progress; to tell a progress hang from a fault of the schedule).
 * A watchdog ends the job when a thread spends MPI_DIFF_OP_DEADLINE seconds
 * in one operation (default 60), naming the operation.
 *
 * Deadlock freedom: each point-to-point operation pairs endpoint g with
 * g ^ mask (both sides of a pair are at the same operation; the lower
 * endpoint sends first), every request is completed before the thread moves
 * to its next operation, and a thread waiting at operation i only ever waits
 * for endpoints at operation i or earlier; in a K_LATE operation a blocking
 * call waits only for requests its partner started at the same operation.
 */
#include "mpi_common.h"

#include <pthread.h>
#include <stdatomic.h>
#ifdef MPI_DIFF_CUDA
#include <cuda_runtime.h>
#endif

#define KIB 1024
#define MIB (1024 * 1024)
#define PATTERN 0xA5 /* receive buffers are filled with it; what the message does not cover must keep it */
#define NTAGS 64     /* ordinary tags are 0..NTAGS-1 (and ptsc_tag_max); PTSC_ANY_RANK ops use their own */
#define MAXN 4       /* messages each way in one operation */

static int R, T, P, POW2, TAG_MAX, NOPS = 400;
static uint64_t SEED = 0x5eed2024u;
static int TRUNC = 1; /* MPI_DIFF_TRUNCATE=0 leaves truncations out (for diagnosis only) */
static pthread_barrier_t team;
static int DEV;        /* MPI_DIFF_DEVICE=1: buffers in device memory */
static int INTERLEAVE; /* MPI_DIFF_INTERLEAVE=1: K_LATE operations in the schedule; 2 (=both): only their
                        * mode where both sides are non-blocking (needs no progress outside waits) */
static MPI_Comm
    *g_mpicomm; /* [T]: a duplicate of MPI_COMM_WORLD per thread index, for MPI's own collectives */
static _Thread_local ptsc_ctx_t *g_ctx;

/* ------------------------------------------------------------------------ */
/* Reproducible randomness                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t hash5(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
    uint64_t s = SEED;
    s ^= splitmix(&s) ^ a;
    s ^= splitmix(&s) ^ b;
    s ^= splitmix(&s) ^ c;
    s ^= splitmix(&s) ^ d;
    s ^= splitmix(&s) ^ e;
    return splitmix(&s);
}

/* Payload bytes: a stream determined by `seed`. */
static void payload(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = splitmix(&s);
        memcpy(b + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = splitmix(&s);
        memcpy(b + i, &v, n - i);
    }
}

/* Offset of the first byte of b[0, n) that is not the payload of `seed`, or n. */
static size_t payload_mismatch(const unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = splitmix(&s);
        size_t m = n - i < 8 ? n - i : 8;
        if (memcmp(b + i, &v, m) != 0) {
            const unsigned char *e = (const unsigned char *)&v;
            for (size_t j = 0; j < m; j++)
                if (b[i + j] != e[j])
                    return i + j;
        }
    }
    return n;
}

static uint64_t checksum(const unsigned char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* ------------------------------------------------------------------------ */
/* Records: one growing text buffer per thread, written out at the end       */
/* ------------------------------------------------------------------------ */

typedef struct {
    char *s;
    size_t len, cap;
} rec_t;

static rec_t *g_rec; /* [T] */

static void rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void rec(const char *fmt, ...)
{
    rec_t *r = &g_rec[g_me];
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = (int)sizeof line - 1;
    if (r->len + (size_t)n + 2 > r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1 << 16;
        while (cap < r->len + (size_t)n + 2)
            cap *= 2;
        char *s = realloc(r->s, cap);
        if (!s)
            return;
        r->s = s;
        r->cap = cap;
    }
    memcpy(r->s + r->len, line, (size_t)n);
    r->len += (size_t)n;
    r->s[r->len++] = '\n';
}

/* ------------------------------------------------------------------------ */
/* The schedule                                                              */
/* ------------------------------------------------------------------------ */

enum kind {
    K_BLOCK,     /* send / recv (or recv_info), lower endpoint first */
    K_SENDRECV,  /* ptsc_sendrecv */
    K_NB,        /* isend / irecv, then wait_info in a random order, or waitall */
    K_TEST,      /* isend / irecv, then ptsc_test / ptsc_test_info polling */
    K_PROBE,     /* isend; probe or iprobe, receive sized by it */
    K_ANY,       /* receive from PTSC_ANY_RANK */
    K_ANYGATHER, /* thread t of a root rank receives from thread t of every other rank, PTSC_ANY_RANK */
    C_BARRIER,
    C_BCAST,
    C_REDUCE,
    C_ALLREDUCE,
    C_ALLGATHER,
    C_ALLTOALL,
    K_LATE, /* one side's operations outstanding over a collective or computation (MPI_DIFF_INTERLEAVE) */
    NKINDS
};

static const char *const kind_name[NKINDS] = {"block",  "sendrecv", "nb",       "test",  "probe",
                                              "any",    "anygath",  "barrier",  "bcast", "reduce",
                                              "allred", "allgath",  "alltoall", "late"};
/* K_LATE's weight is set in main: 0 unless MPI_DIFF_INTERLEAVE=1, so that the schedule without it
 * stays what it was. */
static int kind_weight[NKINDS] = {14, 9, 16, 10, 10, 8, 5, 3, 6, 5, 5, 4, 4, 0};

typedef struct {
    int index;
    int kind;
    int mask;  /* point-to-point partner: g ^ mask */
    int tag;   /* ordinary tag, or the op's own tag for PTSC_ANY_RANK */
    int n;     /* messages each way */
    int es;    /* element size: 1 (MPI_BYTE) or 4 (MPI_INT) */
    int flags; /* variant bits, per kind */
    int root;
    int perm[2 * MAXN]; /* completion order of the 2n requests */
} op_t;

static MPI_Datatype op_type(const op_t *o) { return o->es == 4 ? MPI_INT : MPI_BYTE; }

/* A tag no other operation uses (for PTSC_ANY_RANK, where only the tag tells operations apart). */
static int unique_tag(int index)
{
    int span = TAG_MAX - NTAGS; /* tags NTAGS .. TAG_MAX-1 */
    return NTAGS + index % (span > 0 ? span : 1);
}

static void gen_op(int index, op_t *o)
{
    uint64_t s = hash5(1, (uint64_t)index, 0, 0, 0);
    memset(o, 0, sizeof *o);
    o->index = index;
    int total = 0;
    for (int k = 0; k < NKINDS; k++)
        total += kind_weight[k];
    int w = (int)(splitmix(&s) % (uint64_t)total);
    for (o->kind = 0; w >= kind_weight[o->kind]; o->kind++)
        w -= kind_weight[o->kind];
    o->mask = (int)(splitmix(&s) % (uint64_t)POW2);
    uint64_t t = splitmix(&s);
    o->tag = t % 16 == 0 ? TAG_MAX : (int)(t % NTAGS);
    o->n = 1 + (int)(splitmix(&s) % MAXN);
    o->es = splitmix(&s) % 4 == 0 ? 4 : 1;
    o->flags = (int)(splitmix(&s) & 0xffff);
    o->root = (int)(splitmix(&s) % (uint64_t)R);
    for (int k = 0; k < 2 * MAXN; k++)
        o->perm[k] = k;
    for (int k = 2 * o->n - 1; k > 0; k--) { /* Fisher-Yates over the 2n requests used */
        int j = (int)(splitmix(&s) % (uint64_t)(k + 1)), x = o->perm[k];
        o->perm[k] = o->perm[j];
        o->perm[j] = x;
    }
    if (o->kind == K_ANY || o->kind == K_ANYGATHER)
        o->tag = unique_tag(index);
    if (o->kind == K_ANY)
        o->n = 1;
    if (o->kind == K_PROBE && o->n > 3)
        o->n = 3;
}

/* A message size: mostly around the 4 KiB chunk (below, at, above, several
 * chunks), sometimes up to 256 KiB, rarely several MiB. */
static size_t pick_size(uint64_t h, int allow_huge)
{
    uint64_t x = h >> 8;
    switch (h % 16) {
    case 0:
        return 0;
    case 1:
    case 2:
        return 1 + x % 64;
    case 3:
    case 4:
        return 1 + x % 4096;
    case 5:
        return 4095 + x % 3; /* 4095, 4096, 4097 */
    case 6:
        return 8191 + x % 3;
    case 7:
        return 3 * 4096 + 17;
    case 8:
    case 9:
        return 4096 + x % (3 * 4096 + 18);
    case 10:
        return 3 * 4096 + x % 64;
    case 11:
    case 12:
        return 1 + x % 70000;
    case 13:
        return 65536 + x % 3;
    case 14:
        return 1 + x % (256 * KIB);
    default:
        if (allow_huge && x % 16 == 0) {
            static const size_t huge[] = {4 * MIB - 1, 4 * MIB, 4 * MIB + 1, 5 * MIB + 3, 6 * MIB + 4096};
            return huge[(x >> 4) % 5];
        }
        return 3 * 4096 + 17;
    }
}

/* One message of a point-to-point operation, as both of its sides see it. */
typedef struct {
    size_t bytes; /* message size */
    size_t cap;   /* receive buffer size */
    int trunc;    /* cap < bytes: the receive must report PTSC_ERR_TRUNCATE */
    uint64_t seed;
} msg_t;

static void msg_params(const op_t *o, int src, int dst, int k, int allow_trunc, msg_t *m)
{
    uint64_t h1 = hash5(2, (uint64_t)o->index, (uint64_t)src, (uint64_t)dst, (uint64_t)k);
    uint64_t h2 = splitmix(&h1), h3 = splitmix(&h1);
    size_t es = (size_t)o->es;
    m->seed = hash5(3, (uint64_t)o->index, (uint64_t)src, (uint64_t)dst, (uint64_t)k);
    m->bytes = pick_size(h1, 1) / es * es;
    m->cap = m->bytes;
    m->trunc = 0;
    unsigned c = (unsigned)(h2 % 20);
    if (c >= 12 && c <= 17) { /* larger receive buffer */
        static const size_t extra[] = {1, 2, 3, 7, 8, 100, 4095, 4096, 4097, 3 * 4096 + 17, 65536};
        size_t e = extra[h3 % 11];
        if ((h3 >> 8) % 4 == 0)
            e = m->bytes + 1; /* twice the message */
        m->cap = m->bytes + (e + es - 1) / es * es;
    } else if (c == 18 && (h3 & 3) == 0) { /* a receive buffer of 4 MiB or more */
        size_t cap = 4 * MIB + (size_t)((h3 >> 4) % 3) * 4096 + es;
        m->cap = (cap > m->bytes ? cap : m->bytes + 4096) / es * es;
    } else if (c == 19 && allow_trunc && TRUNC && m->bytes >= es) { /* truncation */
        size_t elems = m->bytes / es;
        m->cap = (size_t)((h3 >> 4) % elems) * es;
        m->trunc = 1;
    }
}

/* Endpoint g is thread g % T of rank g / T. */
#define RANK_OF(g) ((g) / T)
#define THREAD_OF(g) ((g) % T)

/* ------------------------------------------------------------------------ */
/* Buffers and checks                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Buffers: host memory, or (MPI_DIFF_DEVICE=1) device memory from a per-thread
 * arena that is reset after every operation (cudaMalloc/cudaFree per message
 * would synchronise the whole device and hide what the test looks for). The
 * program writes and reads device buffers only through the thread's ptsc
 * stream, then waits for that stream: what a user of ptsc does.
 */
#define ARENA_BYTES ((size_t)128 << 20)

typedef struct {
    unsigned char *base, *put, *view; /* device arena; host scratch for writes and reads */
    size_t used, putcap, viewcap;
} arena_t;

static _Thread_local arena_t g_arena;

static void die_oom(size_t n)
{
    CHECK(0, "out of memory (%zu bytes)", n);
    exit(2);
}

#ifdef MPI_DIFF_CUDA
static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        CHECK(0, "%s: %s", what, cudaGetErrorString(e));
        exit(2);
    }
}

static cudaStream_t thread_stream(void)
{
    void *s = NULL;
    int rc = ptsc_ctx_stream(g_ctx, &s);
    CHECK(rc == PTSC_OK, "ptsc_ctx_stream: %s", ptsc_status_name(rc));
    return (cudaStream_t)s;
}
#endif

/* Host scratch of at least n bytes (grown as needed). */
static unsigned char *scratch(unsigned char **p, size_t *cap, size_t n)
{
    if (*cap < n) {
        free(*p);
        *cap = n > 65536 ? n : 65536;
        if (!(*p = malloc(*cap)))
            die_oom(*cap);
    }
    return *p;
}

static unsigned char *buf_alloc(size_t n)
{
    if (!DEV) {
        unsigned char *b = malloc(n ? n : 1);
        if (!b)
            die_oom(n);
        return b;
    }
#ifdef MPI_DIFF_CUDA
    if (!g_arena.base)
        cuda_ok(cudaMalloc((void **)&g_arena.base, ARENA_BYTES), "cudaMalloc (arena)");
    size_t at = (g_arena.used + 255) & ~(size_t)255;
    if (at + (n ? n : 1) > ARENA_BYTES)
        die_oom(n);
    g_arena.used = at + (n ? n : 1);
    return g_arena.base + at;
#else
    die_oom(n);
    return NULL;
#endif
}

static void buf_free(unsigned char *b)
{
    if (!DEV)
        free(b);
}

/* Called after every operation: its buffers are dead. */
static void arena_reset(void) { g_arena.used = 0; }

static void arena_release(void)
{
#ifdef MPI_DIFF_CUDA
    if (g_arena.base)
        cuda_ok(cudaFree(g_arena.base), "cudaFree (arena)");
#endif
    free(g_arena.put);
    free(g_arena.view);
    g_arena = (arena_t){0};
}

/* A host staging area to build the contents of an n-byte buffer in. */
static unsigned char *buf_stage(unsigned char *b, size_t n)
{
    return DEV ? scratch(&g_arena.put, &g_arena.putcap, n ? n : 1) : b;
}

/* Make the staged contents (buf_stage) the contents of b. */
static void buf_commit(unsigned char *b, size_t n)
{
#ifdef MPI_DIFF_CUDA
    if (DEV && n) {
        cudaStream_t s = thread_stream();
        cuda_ok(cudaMemcpyAsync(b, g_arena.put, n, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync to device");
        cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    }
#else
    (void)b;
    (void)n;
#endif
}

/* The contents of b as the host sees them once the thread's work is done. */
static const unsigned char *buf_view(const unsigned char *b, size_t n)
{
    if (!DEV)
        return b;
    unsigned char *h = scratch(&g_arena.view, &g_arena.viewcap, n ? n : 1);
#ifdef MPI_DIFF_CUDA
    cudaStream_t s = thread_stream();
    if (n)
        cuda_ok(cudaMemcpyAsync(h, b, n, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync to host");
    cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
#endif
    return h;
}

static unsigned char *send_buf(const msg_t *m)
{
    unsigned char *b = buf_alloc(m->bytes);
    payload(buf_stage(b, m->bytes), m->bytes, m->seed);
    buf_commit(b, m->bytes);
    return b;
}

static unsigned char *recv_buf(size_t cap)
{
    unsigned char *b = buf_alloc(cap);
    memset(buf_stage(b, cap), PATTERN, cap ? cap : 1);
    buf_commit(b, cap);
    return b;
}

static int count_of(size_t bytes, int es) { return (int)(bytes / (size_t)es); }

static void info_reset(ptsc_info_t *info)
{
    info->rank = -7;
    info->thread = -7;
    info->tag = -7;
    info->error = -7;
    info->bytes = (size_t)-1;
}

static const char *bytes_text(const ptsc_info_t *info, char *buf, size_t n)
{
    if (!info)
        snprintf(buf, n, "-");
    else if (info->bytes == (size_t)-1)
        snprintf(buf, n, "unset");
    else
        snprintf(buf, n, "%zu", info->bytes);
    return buf;
}

/*
 * Check and record a completed receive of message `m` from endpoint `src`.
 * rc: the status of the call that completed it; info: what it reported (NULL
 * when the call has none). A truncated receive must give PTSC_ERR_TRUNCATE
 * and report the capacity of its buffer in info.bytes; its buffer contents
 * are not defined, so only the size is recorded.
 */
static void check_recv(const op_t *o, const char *what, int k, int src, int tag, int rc,
                       const ptsc_info_t *info, const unsigned char *rb, const msg_t *m)
{
    int want = m->trunc ? PTSC_ERR_TRUNCATE : PTSC_OK;
    char bt[32];
    CHECK(rc == want,
          "op %d %s %s msg %d from endpoint %d (%zu bytes into %zu): returned %s, expected %s: %s", o->index,
          kind_name[o->kind], what, k, src, m->bytes, m->cap, ptsc_status_name(rc), ptsc_status_name(want),
          ptsc_last_error());
    if (info && (rc == PTSC_OK || rc == PTSC_ERR_TRUNCATE)) {
        size_t want_bytes = m->trunc ? m->cap : m->bytes; /* truncated: the capacity (ptsc.h) */
        CHECK(info->bytes == want_bytes,
              "op %d %s %s msg %d from %d: info.bytes %s, expected %zu (message %zu bytes, capacity %zu)",
              o->index, kind_name[o->kind], what, k, src, bytes_text(info, bt, sizeof bt), want_bytes,
              m->bytes, m->cap);
        CHECK(info->rank == RANK_OF(src) && info->thread == THREAD_OF(src) && info->tag == tag,
              "op %d %s %s msg %d: info names source (%d,%d) tag %d, expected (%d,%d) tag %d", o->index,
              kind_name[o->kind], what, k, info->rank, info->thread, info->tag, RANK_OF(src), THREAD_OF(src),
              tag);
        CHECK(info->error == rc, "op %d %s %s msg %d: info.error %d (%s), call returned %s", o->index,
              kind_name[o->kind], what, k, info->error, ptsc_status_name(info->error), ptsc_status_name(rc));
    }
    if (rc == PTSC_OK && !m->trunc) {
        rb = buf_view(rb, m->cap);
        size_t bad = payload_mismatch(rb, m->bytes, m->seed);
        CHECK(bad == m->bytes, "op %d %s %s msg %d from endpoint %d: byte %zu of %zu is wrong (capacity %zu)",
              o->index, kind_name[o->kind], what, k, src, bad, m->bytes, m->cap);
        for (size_t i = m->bytes; i < m->cap; i++)
            if (rb[i] != PATTERN) {
                CHECK(0,
                      "op %d %s %s msg %d from endpoint %d: receive buffer byte %zu written past the "
                      "%zu-byte message (capacity %zu)",
                      o->index, kind_name[o->kind], what, k, src, i, m->bytes, m->cap);
                break;
            }
        rec("t%d op%d %s %s k%d from%d: %s bytes=%s cap=%zu sum=%016llx", g_me, o->index, kind_name[o->kind],
            what, k, src, ptsc_status_name(rc), bytes_text(info, bt, sizeof bt), m->cap,
            (unsigned long long)checksum(rb, m->cap));
    } else {
        rec("t%d op%d %s %s k%d from%d: %s bytes=%s cap=%zu sum=-", g_me, o->index, kind_name[o->kind], what,
            k, src, ptsc_status_name(rc), bytes_text(info, bt, sizeof bt), m->cap);
    }
}

static void check_send(const op_t *o, const char *what, int k, int dst, int rc)
{
    CHECK(rc == PTSC_OK, "op %d %s %s msg %d to endpoint %d: %s: %s", o->index, kind_name[o->kind], what, k,
          dst, ptsc_status_name(rc), ptsc_last_error());
    rec("t%d op%d %s %s k%d to%d: %s", g_me, o->index, kind_name[o->kind], what, k, dst,
        ptsc_status_name(rc));
}

/* Whether endpoint g sends to / receives from its partner p in a one-way-capable operation:
 * dir 0 both ways, 1 lower to higher only, 2 higher to lower only (both for oneself). */
static int sends_to(int dir, int g, int p)
{
    return dir == 0 || (dir == 1 && g <= p) || (dir == 2 && g >= p);
}
static int recvs_from(int dir, int g, int p)
{
    return dir == 0 || (dir == 1 && g >= p) || (dir == 2 && g <= p);
}

/* ------------------------------------------------------------------------ */
/* Point-to-point operations                                                 */
/* ------------------------------------------------------------------------ */

/* Blocking: lower endpoint sends message k then receives message k, higher one the other way round. */
static void op_block(ptsc_ctx_t *ctx, const op_t *o, int g, int p)
{
    int dir = o->flags % 3, no_info = o->flags & 4, isend = o->flags & 8;
    MPI_Datatype ty = op_type(o);
    for (int k = 0; k < o->n; k++) {
        msg_t ms, mr;
        msg_params(o, g, p, k, 1, &ms);
        msg_params(o, p, g, k, 1, &mr);
        int do_send = sends_to(dir, g, p), do_recv = recvs_from(dir, g, p);
        unsigned char *sb = do_send ? send_buf(&ms) : NULL, *rb = do_recv ? recv_buf(mr.cap) : NULL;
        ptsc_info_t info;
        info_reset(&info);
        int rc;
        if (g == p) { /* oneself: a blocking send could wait for the receive */
            ptsc_request_t r = PTSC_REQUEST_NULL;
            rc = ptsc_irecv(ctx, rb, count_of(mr.cap, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag, &r);
            CHECK(rc == PTSC_OK, "op %d self irecv: %s: %s", o->index, ptsc_status_name(rc),
                  ptsc_last_error());
            int rs = ptsc_send(ctx, sb, count_of(ms.bytes, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag);
            check_send(o, "send", k, p, rs);
            rc = no_info ? ptsc_wait(&r) : ptsc_wait_info(&r, &info);
            check_recv(o, "wait", k, p, o->tag, rc, no_info ? NULL : &info, rb, &mr);
        } else {
            for (int step = 0; step < 2; step++) {
                int sending = (step == 0) == (g < p);
                if (sending && do_send) {
                    int rs;
                    if (isend) {
                        ptsc_request_t r = PTSC_REQUEST_NULL;
                        rs = ptsc_isend(ctx, sb, count_of(ms.bytes, o->es), ty, RANK_OF(p), THREAD_OF(p),
                                        o->tag, &r);
                        if (rs == PTSC_OK)
                            rs = ptsc_wait(&r);
                    } else {
                        rs = ptsc_send(ctx, sb, count_of(ms.bytes, o->es), ty, RANK_OF(p), THREAD_OF(p),
                                       o->tag);
                    }
                    check_send(o, isend ? "isend" : "send", k, p, rs);
                } else if (!sending && do_recv) {
                    if (no_info)
                        rc =
                            ptsc_recv(ctx, rb, count_of(mr.cap, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag);
                    else
                        rc = ptsc_recv_info(ctx, rb, count_of(mr.cap, o->es), ty, RANK_OF(p), THREAD_OF(p),
                                            o->tag, &info);
                    check_recv(o, no_info ? "recv" : "recv_info", k, p, o->tag, rc, no_info ? NULL : &info,
                               rb, &mr);
                }
            }
        }
        buf_free(sb);
        buf_free(rb);
    }
}

static void op_sendrecv(ptsc_ctx_t *ctx, const op_t *o, int g, int p)
{
    MPI_Datatype ty = op_type(o);
    for (int k = 0; k < o->n; k++) {
        msg_t ms, mr;
        msg_params(o, g, p, k, 1, &ms);
        msg_params(o, p, g, k, 1, &mr);
        unsigned char *sb = send_buf(&ms), *rb = recv_buf(mr.cap);
        int rc = ptsc_sendrecv(ctx, sb, count_of(ms.bytes, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag, rb,
                               count_of(mr.cap, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag);
        check_recv(o, "sendrecv", k, p, o->tag, rc, NULL, rb, &mr);
        buf_free(sb);
        buf_free(rb);
    }
}

/* A thread dump for the first operation of this process that polled in
 * vain for 60 s: where every thread is tells a stall of the machine's
 * scheduler from a message ptsc lost. Once: the dump signals every thread. */
static void dump_once(const char *why)
{
    static atomic_int dumped;
    if (!atomic_exchange(&dumped, 1))
        thread_dump(why);
}

/* Non-blocking: n messages each way; receives posted in order (or, with a
 * tag per message, in reverse), sends before or after them; completed by
 * wait_info / wait in a random order, by waitall, or by test polling. */
static void op_nonblocking(ptsc_ctx_t *ctx, const op_t *o, int g, int p, int poll)
{
    int sends_first = o->flags & 1, use_waitall = !poll && (o->flags & 2), tag_per_msg = o->flags & 4;
    int reverse_post = tag_per_msg && (o->flags & 8), no_info = o->flags & 16;
    MPI_Datatype ty = op_type(o);
    int n = o->n;
    msg_t ms[MAXN], mr[MAXN];
    unsigned char *sb[MAXN], *rb[MAXN];
    ptsc_request_t req[2 * MAXN];
    ptsc_info_t info[MAXN];
    int rcs[2 * MAXN], done_flag[2 * MAXN];
    for (int k = 0; k < n; k++) {
        msg_params(o, g, p, k, 1, &ms[k]);
        msg_params(o, p, g, k, 1, &mr[k]);
        sb[k] = send_buf(&ms[k]);
        rb[k] = recv_buf(mr[k].cap);
        info_reset(&info[k]);
    }
    for (int k = 0; k < 2 * n; k++) {
        req[k] = PTSC_REQUEST_NULL;
        rcs[k] = PTSC_OK;
        done_flag[k] = 0;
    }
    for (int phase = 0; phase < 2; phase++) {
        if ((phase == 0) == !sends_first) {
            for (int j = 0; j < n; j++) {
                int k = reverse_post ? n - 1 - j : j;
                int tag = tag_per_msg ? (o->tag + k) % NTAGS : o->tag;
                int rc = ptsc_irecv(ctx, rb[k], count_of(mr[k].cap, o->es), ty, RANK_OF(p), THREAD_OF(p), tag,
                                    &req[k]);
                CHECK(rc == PTSC_OK, "op %d irecv %d: %s: %s", o->index, k, ptsc_status_name(rc),
                      ptsc_last_error());
            }
        } else {
            for (int k = 0; k < n; k++) {
                int tag = tag_per_msg ? (o->tag + k) % NTAGS : o->tag;
                int rc = ptsc_isend(ctx, sb[k], count_of(ms[k].bytes, o->es), ty, RANK_OF(p), THREAD_OF(p),
                                    tag, &req[n + k]);
                CHECK(rc == PTSC_OK, "op %d isend %d: %s: %s", o->index, k, ptsc_status_name(rc),
                      ptsc_last_error());
            }
        }
    }
    if (use_waitall) {
        int any_trunc = 0;
        for (int k = 0; k < n; k++)
            any_trunc |= mr[k].trunc;
        int rc = ptsc_waitall(2 * n, req);
        int want = any_trunc ? PTSC_ERR_TRUNCATE : PTSC_OK;
        CHECK(rc == want, "op %d waitall returned %s, expected %s: %s", o->index, ptsc_status_name(rc),
              ptsc_status_name(want), ptsc_last_error());
        for (int k = 0; k < 2 * n; k++)
            CHECK(req[k] == PTSC_REQUEST_NULL, "op %d: waitall left request %d set", o->index, k);
        rec("t%d op%d %s waitall: %s", g_me, o->index, kind_name[o->kind], ptsc_status_name(rc));
        for (int k = 0; k < n; k++)
            rcs[k] = mr[k].trunc ? PTSC_ERR_TRUNCATE : PTSC_OK; /* not reported per request */
    } else if (!poll) {
        for (int j = 0; j < 2 * n; j++) {
            int k = o->perm[j];
            if (k < n)
                rcs[k] = no_info ? ptsc_wait(&req[k]) : ptsc_wait_info(&req[k], &info[k]);
            else
                rcs[k] = ptsc_wait(&req[k]);
            CHECK(req[k] == PTSC_REQUEST_NULL, "op %d: wait left request %d set (%s)", o->index, k,
                  ptsc_status_name(rcs[k]));
        }
    } else {
        double t0 = now_s();
        int left = 2 * n;
        unsigned polls = 0;
        while (left > 0) {
            for (int j = 0; j < 2 * n; j++) {
                int k = o->perm[j];
                if (done_flag[k])
                    continue;
                int d = -1, rc;
                if (k < n && !no_info)
                    rc = ptsc_test_info(&req[k], &d, &info[k]);
                else
                    rc = ptsc_test(&req[k], &d);
                if (rc != PTSC_OK || d == 1) { /* an error completes the request too */
                    CHECK(req[k] == PTSC_REQUEST_NULL,
                          "op %d: test completed request %d (%s) but left it set", o->index, k,
                          ptsc_status_name(rc));
                    CHECK(rc != PTSC_OK || d == 1, "op %d: test set done to %d", o->index, d);
                    rcs[k] = rc;
                    done_flag[k] = 1;
                    left--;
                } else {
                    CHECK(d == 0, "op %d: test set done to %d", o->index, d);
                    CHECK(req[k] != PTSC_REQUEST_NULL, "op %d: test not done but request %d reset", o->index,
                          k);
                }
            }
            if (left > 0)
                test_pause(&polls);
            if (left > 0 && now_s() - t0 > 60) {
                CHECK(0, "op %d: %d requests still incomplete after 60 s of ptsc_test polling", o->index,
                      left);
                dump_once("ptsc_test polling incomplete after 60 s");
                for (int k = 0; k < 2 * n; k++)
                    if (!done_flag[k])
                        rcs[k] = PTSC_ERR_PENDING; /* reported below as the status of an incomplete request */
                break;
            }
        }
    }
    for (int k = 0; k < n; k++) {
        int tag = tag_per_msg ? (o->tag + k) % NTAGS : o->tag;
        check_recv(o,
                   use_waitall ? "waitall"
                   : poll      ? "test"
                               : "wait",
                   k, p, tag, rcs[k], use_waitall || no_info ? NULL : &info[k], rb[k], &mr[k]);
    }
    for (int k = 0; k < n; k++)
        check_send(o, "isend", k, p, rcs[n + k]);
    for (int k = 0; k < n; k++) {
        buf_free(sb[k]);
        buf_free(rb[k]);
    }
}

/* Probe: send every message with isend, then for each: probe (or iprobe
 * until found), receive into a buffer of the probed size (or larger). */
static void op_probe(ptsc_ctx_t *ctx, const op_t *o, int g, int p)
{
    int use_iprobe = o->flags & 1, larger = o->flags & 2, any = o->flags & 4;
    int tag = any ? unique_tag(o->index) : o->tag, src_rank = any ? PTSC_ANY_RANK : RANK_OF(p);
    MPI_Datatype ty = op_type(o);
    int n = o->n;
    msg_t ms[MAXN], mr[MAXN];
    unsigned char *sb[MAXN];
    ptsc_request_t req[MAXN];
    for (int k = 0; k < n; k++) {
        msg_params(o, g, p, k, 0, &ms[k]);
        msg_params(o, p, g, k, 0, &mr[k]);
        sb[k] = send_buf(&ms[k]);
        req[k] = PTSC_REQUEST_NULL;
        int rc =
            ptsc_isend(ctx, sb[k], count_of(ms[k].bytes, o->es), ty, RANK_OF(p), THREAD_OF(p), tag, &req[k]);
        CHECK(rc == PTSC_OK, "op %d isend %d: %s: %s", o->index, k, ptsc_status_name(rc), ptsc_last_error());
    }
    for (int k = 0; k < n; k++) {
        ptsc_info_t pi;
        info_reset(&pi);
        int rc;
        if (use_iprobe) {
            int flag = 0;
            unsigned polls = 0;
            double t0 = now_s();
            do {
                rc = ptsc_iprobe(ctx, src_rank, THREAD_OF(p), tag, &flag, &pi);
                if (rc == PTSC_OK && !flag && now_s() - t0 > 60) {
                    CHECK(0, "op %d: no message found by ptsc_iprobe in 60 s", o->index);
                    dump_once("ptsc_iprobe found nothing in 60 s");
                    break;
                }
                if (rc == PTSC_OK && !flag)
                    test_pause(&polls);
            } while (rc == PTSC_OK && !flag);
        } else {
            rc = ptsc_probe(ctx, src_rank, THREAD_OF(p), tag, &pi);
        }
        char bt[32];
        CHECK(rc == PTSC_OK, "op %d %s msg %d: %s: %s", o->index, use_iprobe ? "iprobe" : "probe", k,
              ptsc_status_name(rc), ptsc_last_error());
        CHECK(pi.bytes == mr[k].bytes, "op %d %s msg %d from endpoint %d: info.bytes %s, expected %zu",
              o->index, use_iprobe ? "iprobe" : "probe", k, p, bytes_text(&pi, bt, sizeof bt), mr[k].bytes);
        CHECK(pi.rank == RANK_OF(p) && pi.thread == THREAD_OF(p) && pi.tag == tag,
              "op %d probe msg %d: source (%d,%d) tag %d, expected (%d,%d) tag %d", o->index, k, pi.rank,
              pi.thread, pi.tag, RANK_OF(p), THREAD_OF(p), tag);
        rec("t%d op%d probe%s k%d from%d: %s bytes=%s src=%d,%d tag=%d", g_me, o->index,
            use_iprobe ? "i" : "", k, p, ptsc_status_name(rc), bytes_text(&pi, bt, sizeof bt), pi.rank,
            pi.thread, pi.tag);
        /* Size the receive from the probe, unless it is plainly wrong. */
        size_t sz = rc == PTSC_OK && pi.bytes == mr[k].bytes ? pi.bytes : mr[k].bytes;
        mr[k].cap = larger ? sz + 4096 + (size_t)o->es : sz;
        unsigned char *rb = recv_buf(mr[k].cap);
        ptsc_info_t info;
        info_reset(&info);
        rc = ptsc_recv_info(ctx, rb, count_of(mr[k].cap, o->es), ty, src_rank, THREAD_OF(p), tag, &info);
        check_recv(o, "recv_info", k, p, tag, rc, &info, rb, &mr[k]);
        buf_free(rb);
    }
    for (int k = 0; k < n; k++) {
        int rc = ptsc_wait(&req[k]);
        check_send(o, "isend", k, p, rc);
        buf_free(sb[k]);
    }
}

/* PTSC_ANY_RANK with the partner's thread and this operation's own tag:
 * the lower endpoint sends first; the receive is blocking (recv_info) or
 * irecv + wait_info. */
static void op_any(ptsc_ctx_t *ctx, const op_t *o, int g, int p)
{
    int nonblocking = o->flags & 1;
    MPI_Datatype ty = op_type(o);
    msg_t ms, mr;
    msg_params(o, g, p, 0, 1, &ms);
    msg_params(o, p, g, 0, 1, &mr);
    unsigned char *sb = send_buf(&ms), *rb = recv_buf(mr.cap);
    ptsc_info_t info;
    info_reset(&info);
    int scount = count_of(ms.bytes, o->es), rcount = count_of(mr.cap, o->es);
    ptsc_request_t sr = PTSC_REQUEST_NULL, rr = PTSC_REQUEST_NULL;
    int rc, rs;
    if (g == p) { /* oneself: receive posted first */
        rc = ptsc_irecv(ctx, rb, rcount, ty, PTSC_ANY_RANK, THREAD_OF(p), o->tag, &rr);
        CHECK(rc == PTSC_OK, "op %d irecv any: %s: %s", o->index, ptsc_status_name(rc), ptsc_last_error());
        rs = ptsc_isend(ctx, sb, scount, ty, RANK_OF(p), THREAD_OF(p), o->tag, &sr);
        if (rs == PTSC_OK)
            rs = ptsc_wait(&sr);
        check_send(o, "isend", 0, p, rs);
        rc = ptsc_wait_info(&rr, &info);
        check_recv(o, "irecv_any", 0, p, o->tag, rc, &info, rb, &mr);
    } else {
        for (int step = 0; step < 2; step++) {
            if ((step == 0) == (g < p)) {
                rs = ptsc_send(ctx, sb, scount, ty, RANK_OF(p), THREAD_OF(p), o->tag);
                check_send(o, "send", 0, p, rs);
            } else if (nonblocking) {
                rc = ptsc_irecv(ctx, rb, rcount, ty, PTSC_ANY_RANK, THREAD_OF(p), o->tag, &rr);
                CHECK(rc == PTSC_OK, "op %d irecv any: %s: %s", o->index, ptsc_status_name(rc),
                      ptsc_last_error());
                rc = ptsc_wait_info(&rr, &info);
                check_recv(o, "irecv_any", 0, p, o->tag, rc, &info, rb, &mr);
            } else {
                rc = ptsc_recv_info(ctx, rb, rcount, ty, PTSC_ANY_RANK, THREAD_OF(p), o->tag, &info);
                check_recv(o, "recv_any", 0, p, o->tag, rc, &info, rb, &mr);
            }
        }
    }
    buf_free(sb);
    buf_free(rb);
}

/* Thread t of rank root receives one message from thread t of every other
 * rank with PTSC_ANY_RANK; arrival order varies, so results are recorded
 * in rank order. */
static void op_anygather(ptsc_ctx_t *ctx, const op_t *o, int t)
{
    MPI_Datatype ty = op_type(o);
    int root = o->root, me = g_rank * T + t, rootg = root * T + t;
    if (R < 2)
        return;
    if (g_rank != root) {
        msg_t m;
        msg_params(o, me, rootg, 0, 0, &m);
        unsigned char *sb = send_buf(&m);
        int rs = ptsc_send(ctx, sb, count_of(m.bytes, o->es), ty, root, t, o->tag);
        check_send(o, "send", 0, rootg, rs);
        buf_free(sb);
        return;
    }
    msg_t *m = calloc((size_t)R, sizeof *m);
    int *rcs = calloc((size_t)R, sizeof *rcs), *seen = calloc((size_t)R, sizeof *seen);
    ptsc_info_t *infos = calloc((size_t)R, sizeof *infos);
    unsigned char **bufs = calloc((size_t)R, sizeof *bufs);
    size_t cap = 0;
    for (int r = 0; r < R; r++) {
        msg_params(o, r * T + t, rootg, 0, 0, &m[r]);
        if (r != root && m[r].bytes > cap)
            cap = m[r].bytes;
    }
    cap += (size_t)(o->flags % 3) * 4096 + (size_t)o->es;
    for (int i = 0; i < R - 1; i++) {
        unsigned char *rb = recv_buf(cap);
        ptsc_info_t info;
        info_reset(&info);
        int rc = ptsc_recv_info(ctx, rb, count_of(cap, o->es), ty, PTSC_ANY_RANK, t, o->tag, &info);
        CHECK(rc == PTSC_OK, "op %d anygather receive %d: %s: %s", o->index, i, ptsc_status_name(rc),
              ptsc_last_error());
        if (rc != PTSC_OK || info.rank < 0 || info.rank >= R || info.rank == root || seen[info.rank]) {
            CHECK(0, "op %d anygather receive %d: source rank %d is not a sender still expected", o->index, i,
                  info.rank);
            buf_free(rb);
            continue;
        }
        seen[info.rank] = 1;
        rcs[info.rank] = rc;
        infos[info.rank] = info;
        bufs[info.rank] = rb;
    }
    for (int r = 0; r < R; r++) {
        if (r == root)
            continue;
        m[r].cap = cap;
        if (!seen[r]) {
            rec("t%d op%d anygath from%d: missing", g_me, o->index, r * T + t);
            continue;
        }
        check_recv(o, "recv_any", 0, r * T + t, o->tag, rcs[r], &infos[r], bufs[r], &m[r]);
        buf_free(bufs[r]);
    }
    free(m);
    free(rcs);
    free(seen);
    free(infos);
    free(bufs);
}

/* ------------------------------------------------------------------------ */
/* Collectives on the thread's lane                                          */
/* ------------------------------------------------------------------------ */

static int reduce_val(int index, int r, int t, int k)
{
    return (int)(hash5(5, (uint64_t)index, (uint64_t)r, (uint64_t)t, (uint64_t)k) % 100003);
}

static void coll_done(const op_t *o, const char *what, int rc, const unsigned char *b, size_t n)
{
    CHECK(rc == PTSC_OK, "op %d %s: %s: %s", o->index, what, ptsc_status_name(rc), ptsc_last_error());
    if (b)
        rec("t%d op%d %s: %s bytes=%zu sum=%016llx", g_me, o->index, what, ptsc_status_name(rc), n,
            (unsigned long long)checksum(b, n));
    else
        rec("t%d op%d %s: %s", g_me, o->index, what, ptsc_status_name(rc));
}

static void op_coll(ptsc_ctx_t *ctx, const op_t *o, int t)
{
    uint64_t h = hash5(4, (uint64_t)o->index, (uint64_t)t, 0, 0);
    char what[64];
    int rc;
    switch (o->kind) {
    case C_BARRIER:
        coll_done(o, "barrier", ptsc_barrier(ctx), NULL, 0);
        break;
    case C_BCAST: {
        int root = (o->root + t) % R;
        size_t bytes = pick_size(h, 1) / (size_t)o->es * (size_t)o->es;
        uint64_t seed = hash5(6, (uint64_t)o->index, (uint64_t)root, (uint64_t)t, 0);
        unsigned char *b = buf_alloc(bytes);
        unsigned char *init = buf_stage(b, bytes);
        if (g_rank == root)
            payload(init, bytes, seed);
        else
            memset(init, PATTERN, bytes);
        buf_commit(b, bytes);
        rc = ptsc_bcast(ctx, b, count_of(bytes, o->es), op_type(o), root);
        const unsigned char *got = buf_view(b, bytes);
        size_t bad = payload_mismatch(got, bytes, seed);
        CHECK(rc != PTSC_OK || bad == bytes, "op %d bcast root %d: byte %zu of %zu is wrong", o->index, root,
              bad, bytes);
        snprintf(what, sizeof what, "bcast root%d", root);
        coll_done(o, what, rc, got, bytes);
        buf_free(b);
        break;
    }
    case C_REDUCE:
    case C_ALLREDUCE: {
        int root = (o->root + t) % R, all = o->kind == C_ALLREDUCE, max = o->flags & 1;
        int n = (int)(pick_size(h, 0) / 4);
        size_t nb = sizeof(int) * (size_t)n;
        unsigned char *inb = buf_alloc(nb), *outb = buf_alloc(nb);
        int *in = (int *)buf_stage(inb, nb);
        for (int k = 0; k < n; k++)
            in[k] = reduce_val(o->index, g_rank, t, k);
        buf_commit(inb, nb);
        memset(buf_stage(outb, nb), 0xff, nb); /* -1 everywhere */
        buf_commit(outb, nb);
        rc = all ? ptsc_allreduce(ctx, inb, outb, n, MPI_INT, max ? MPI_MAX : MPI_SUM)
                 : ptsc_reduce(ctx, inb, outb, n, MPI_INT, max ? MPI_MAX : MPI_SUM, root);
        const int *out = (const int *)buf_view(outb, nb);
        int got_result = all || g_rank == root;
        if (rc == PTSC_OK && got_result)
            for (int k = 0; k < n; k++) {
                int want = 0;
                for (int r = 0; r < R; r++) {
                    int v = reduce_val(o->index, r, t, k);
                    want = max ? (v > want ? v : want) : want + v;
                }
                if (out[k] != want) {
                    CHECK(0, "op %d %s: element %d of %d is %d, expected %d", o->index,
                          all ? "allreduce" : "reduce", k, n, out[k], want);
                    break;
                }
            }
        if (all)
            snprintf(what, sizeof what, "allreduce %s n%d", max ? "max" : "sum", n);
        else
            snprintf(what, sizeof what, "reduce %s root%d n%d", max ? "max" : "sum", root, n);
        coll_done(o, what, rc, got_result ? (const unsigned char *)out : NULL, (size_t)n * 4);
        buf_free(inb);
        buf_free(outb);
        break;
    }
    case C_ALLGATHER:
    case C_ALLTOALL: {
        int a2a = o->kind == C_ALLTOALL;
        size_t s = pick_size(h, 0);
        if (s > 3 * 4096 + 17 && (h >> 40) % 4 != 0)
            s = s % (3 * 4096 + 18);
        s = s / (size_t)o->es * (size_t)o->es;
        unsigned char *sb = buf_alloc(s * (size_t)R), *rbd = recv_buf(s * (size_t)R);
        unsigned char *init = buf_stage(sb, s * (size_t)R);
        for (int r = 0; r < R; r++)
            payload(init + (size_t)r * s, s,
                    hash5(7, (uint64_t)o->index, (uint64_t)g_rank, (uint64_t)(a2a ? r : 0), (uint64_t)t));
        buf_commit(sb, s * (size_t)R);
        int cnt = count_of(s, o->es);
        rc = a2a ? ptsc_alltoall(ctx, sb, cnt, op_type(o), rbd, cnt, op_type(o))
                 : ptsc_allgather(ctx, sb, cnt, op_type(o), rbd, cnt, op_type(o));
        const unsigned char *rb = buf_view(rbd, s * (size_t)R);
        if (rc == PTSC_OK)
            for (int r = 0; r < R; r++) {
                uint64_t seed =
                    hash5(7, (uint64_t)o->index, (uint64_t)r, (uint64_t)(a2a ? g_rank : 0), (uint64_t)t);
                size_t bad = payload_mismatch(rb + (size_t)r * s, s, seed);
                if (bad != s) {
                    CHECK(0, "op %d %s: block of rank %d: byte %zu of %zu is wrong", o->index,
                          a2a ? "alltoall" : "allgather", r, bad, s);
                    break;
                }
            }
        snprintf(what, sizeof what, "%s s%zu", a2a ? "alltoall" : "allgather", s);
        coll_done(o, what, rc, rb, s * (size_t)R);
        buf_free(sb);
        buf_free(rbd);
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Operations outstanding over a collective or computation (K_LATE)          */
/* ------------------------------------------------------------------------ */

enum { I_BARRIER, I_ALLREDUCE, I_WBARRIER, I_WALLREDUCE, I_MBARRIER, I_MALLREDUCE, I_SLEEP, NINTERLUDES };
static const char *const interlude_name[NINTERLUDES] = {
    "ptsc_barrier",  "ptsc_allreduce", "ptsc_world_barrier", "ptsc_world_allreduce", "MPI_Barrier",
    "MPI_Allreduce", "sleep"};

/* What every endpoint does in the middle of a K_LATE operation, outstanding requests or not: a lane
 * collective (thread t of every rank), a world collective (every thread of every rank), one of MPI's
 * own on the thread's duplicate of MPI_COMM_WORLD, or 1 ms of computation without a ptsc call. */
static void interlude(ptsc_ctx_t *ctx, const op_t *o, int t, int which)
{
    enum { NV = 5 };
    int in[NV], out[NV], rc = PTSC_OK, world = which == I_WALLREDUCE;
    for (int k = 0; k < NV; k++) {
        in[k] = reduce_val(o->index, g_rank, t, k);
        out[k] = -1;
    }
    switch (which) {
    case I_BARRIER:
        rc = ptsc_barrier(ctx);
        break;
    case I_ALLREDUCE:
        rc = ptsc_allreduce(ctx, in, out, NV, MPI_INT, MPI_SUM);
        break;
    case I_WBARRIER:
        rc = ptsc_world_barrier(ctx, T);
        break;
    case I_WALLREDUCE:
        rc = ptsc_world_allreduce(ctx, T, in, out, NV, MPI_INT, MPI_SUM);
        break;
    case I_MBARRIER:
        rc = MPI_Barrier(g_mpicomm[t]) == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI;
        break;
    case I_MALLREDUCE:
        rc = MPI_Allreduce(in, out, NV, MPI_INT, MPI_SUM, g_mpicomm[t]) == MPI_SUCCESS ? PTSC_OK
                                                                                       : PTSC_ERR_MPI;
        break;
    default: {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
        break;
    }
    }
    CHECK(rc == PTSC_OK, "op %d late: %s: %s: %s", o->index, interlude_name[which], ptsc_status_name(rc),
          ptsc_last_error());
    int reduced = which == I_ALLREDUCE || which == I_WALLREDUCE || which == I_MALLREDUCE;
    if (rc == PTSC_OK && reduced)
        for (int k = 0; k < NV; k++) {
            int want = 0;
            for (int r = 0; r < R; r++)
                for (int u = world ? 0 : t; u < (world ? T : t + 1); u++)
                    want += reduce_val(o->index, r, u, k);
            CHECK(out[k] == want, "op %d late: %s element %d is %d, expected %d", o->index,
                  interlude_name[which], k, out[k], want);
        }
    if (reduced)
        rec("t%d op%d late %s: %s sum=%016llx", g_me, o->index, interlude_name[which], ptsc_status_name(rc),
            (unsigned long long)checksum((const unsigned char *)out, sizeof out));
    else
        rec("t%d op%d late %s: %s", g_me, o->index, interlude_name[which], ptsc_status_name(rc));
}

/*
 * K_LATE: side A starts its half of n messages non-blocking (mode 0: isends, 1: irecvs, 2: both), then
 * takes part in the interlude, then waits for its requests in a random order; side B makes the
 * blocking counterpart (mode 0: receives, 1: sends; mode 2: the same as A), sometimes after a short
 * delay so that A is surely inside the interlude, then takes part in the interlude. B's blocking calls
 * need A's outstanding requests to move while A is in the interlude: MPI's progress rule. Oneself:
 * both halves non-blocking; an endpoint without a partner only takes part in the interlude.
 */
static void op_late(ptsc_ctx_t *ctx, const op_t *o, int g, int p)
{
    int which = o->flags % NINTERLUDES, mode = INTERLEAVE == 2 ? 2 : (o->flags >> 3) % 3,
        a_low = (o->flags >> 5) & 1;
    int late = (o->flags >> 6) & 1, t = THREAD_OF(g);
    if (p >= P) {
        rec("t%d op%d late idle", g_me, o->index);
        interlude(ctx, o, t, which);
        return;
    }
    int is_a = g == p || (g < p) == a_low, both = g == p || mode == 2;
    int do_send = both || (is_a ? mode == 0 : mode == 1), do_recv = both || (is_a ? mode == 1 : mode == 0);
    int nonblocking = both || is_a, n = o->n;
    MPI_Datatype ty = op_type(o);
    msg_t ms[MAXN], mr[MAXN];
    unsigned char *sb[MAXN] = {0}, *rb[MAXN] = {0};
    ptsc_request_t req[2 * MAXN];
    ptsc_info_t info[MAXN];
    for (int k = 0; k < 2 * MAXN; k++)
        req[k] = PTSC_REQUEST_NULL;
    for (int k = 0; k < n; k++) {
        msg_params(o, g, p, k, 1, &ms[k]);
        msg_params(o, p, g, k, 1, &mr[k]);
        if (do_send)
            sb[k] = send_buf(&ms[k]);
        if (do_recv)
            rb[k] = recv_buf(mr[k].cap);
        info_reset(&info[k]);
    }
    if (late && !nonblocking) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int k = 0; k < n; k++) {
        int rc;
        if (do_recv && nonblocking) {
            rc = ptsc_irecv(ctx, rb[k], count_of(mr[k].cap, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag,
                            &req[k]);
            CHECK(rc == PTSC_OK, "op %d late irecv %d: %s: %s", o->index, k, ptsc_status_name(rc),
                  ptsc_last_error());
        } else if (do_recv) {
            rc = ptsc_recv_info(ctx, rb[k], count_of(mr[k].cap, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag,
                                &info[k]);
            check_recv(o, "recv_info", k, p, o->tag, rc, &info[k], rb[k], &mr[k]);
        }
    }
    for (int k = 0; k < n; k++) {
        int rc;
        if (do_send && nonblocking) {
            rc = ptsc_isend(ctx, sb[k], count_of(ms[k].bytes, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag,
                            &req[n + k]);
            CHECK(rc == PTSC_OK, "op %d late isend %d: %s: %s", o->index, k, ptsc_status_name(rc),
                  ptsc_last_error());
        } else if (do_send) {
            rc = ptsc_send(ctx, sb[k], count_of(ms[k].bytes, o->es), ty, RANK_OF(p), THREAD_OF(p), o->tag);
            check_send(o, "send", k, p, rc);
        }
    }
    interlude(ctx, o, t, which);
    if (nonblocking) {
        int rcs[2 * MAXN];
        for (int j = 0; j < 2 * n; j++) {
            int k = o->perm[j];
            rcs[k] = k < n ? ptsc_wait_info(&req[k], &info[k]) : ptsc_wait(&req[k]);
        }
        for (int k = 0; k < n; k++)
            if (do_recv)
                check_recv(o, "wait", k, p, o->tag, rcs[k], &info[k], rb[k], &mr[k]);
        for (int k = 0; k < n; k++)
            if (do_send)
                check_send(o, "isend", k, p, rcs[n + k]);
    }
    for (int k = 0; k < n; k++) {
        buf_free(sb[k]);
        buf_free(rb[k]);
    }
}

/*
 * Watchdog of the operations: a thread that spends MPI_DIFF_OP_DEADLINE seconds (default 60, 80 in
 * sanitizer builds) in one operation ends the job, naming the operation and its kind for every thread
 * of the rank, so that a hang fails naming where it is, before the run's deadline.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MPI_DIFF_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MPI_DIFF_SANITIZED 1
#endif
#endif
#ifndef MPI_DIFF_SANITIZED
#define MPI_DIFF_SANITIZED 0
#endif

static int *g_op_at;          /* [T]: the operation each thread is in, -1 when none */
static long long *g_op_since; /* [T]: when it started, ms of now_s() */
static int g_op_stop;

static void *op_watchdog(void *arg)
{
    const char *env = getenv("MPI_DIFF_OP_DEADLINE");
    double deadline = env && atof(env) > 0 ? atof(env) : MPI_DIFF_SANITIZED ? 80 : 60;
    (void)arg;
    while (!__atomic_load_n(&g_op_stop, __ATOMIC_SEQ_CST)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double now = now_s();
        int stuck = 0;
        for (int t = 0; t < T; t++)
            stuck |= __atomic_load_n(&g_op_at[t], __ATOMIC_SEQ_CST) >= 0 &&
                     now - 1e-3 * (double)__atomic_load_n(&g_op_since[t], __ATOMIC_SEQ_CST) > deadline;
        if (!stuck)
            continue;
        fprintf(stderr, "FAIL [rank %d] mpi_diff: an operation did not complete within %.0f s:\n", g_rank,
                deadline);
        for (int t = 0; t < T; t++) {
            int i = __atomic_load_n(&g_op_at[t], __ATOMIC_SEQ_CST);
            if (i < 0) {
                fprintf(stderr, "  [rank %d thread %d] done\n", g_rank, t);
                continue;
            }
            op_t o;
            gen_op(i, &o);
            int g = g_rank * T + t, p = g ^ o.mask;
            char late[96] = "";
            if (o.kind == K_LATE)
                snprintf(late, sizeof late, ", %s mode %d side %s", interlude_name[o.flags % NINTERLUDES],
                         INTERLEAVE == 2 ? 2 : (o.flags >> 3) % 3,
                         p >= P                                      ? "idle"
                         : g == p || (g < p) == ((o.flags >> 5) & 1) ? "A"
                                                                     : "B");
            fprintf(stderr, "  [rank %d thread %d] op %d (%s%s, partner endpoint %d, flags %#x) for %.1f s\n",
                    g_rank, t, i, kind_name[o.kind], late, p, (unsigned)o.flags,
                    now - 1e-3 * (double)__atomic_load_n(&g_op_since[t], __ATOMIC_SEQ_CST));
        }
        fflush(stderr);
        dump_once("an operation did not complete"); /* every thread's state and stack */
        struct timespec grace = {1, 0};             /* the other ranks' watchdogs may say where they are */
        nanosleep(&grace, NULL);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */

static int worker(int t)
{
    ptsc_ctx_t *ctx = NULL;
    g_me = t;
    CHECK_OK(ptsc_thread_attach(t, &ctx));
    g_ctx = ctx;
    int g = g_rank * T + t;
    pthread_barrier_wait(&team);
    for (int i = 0; i < NOPS; i++) {
        op_t o;
        gen_op(i, &o);
        __atomic_store_n(&g_op_since[t], (long long)(now_s() * 1e3), __ATOMIC_SEQ_CST);
        __atomic_store_n(&g_op_at[t], i, __ATOMIC_SEQ_CST);
        int p = g ^ o.mask;
        switch (o.kind) {
        case K_BLOCK:
        case K_SENDRECV:
        case K_NB:
        case K_TEST:
        case K_PROBE:
        case K_ANY:
            if (p >= P) {
                rec("t%d op%d %s idle", g_me, i, kind_name[o.kind]);
                break;
            }
            if (o.kind == K_BLOCK)
                op_block(ctx, &o, g, p);
            else if (o.kind == K_SENDRECV)
                op_sendrecv(ctx, &o, g, p);
            else if (o.kind == K_NB || o.kind == K_TEST)
                op_nonblocking(ctx, &o, g, p, o.kind == K_TEST);
            else if (o.kind == K_PROBE)
                op_probe(ctx, &o, g, p);
            else
                op_any(ctx, &o, g, p);
            break;
        case K_ANYGATHER:
            op_anygather(ctx, &o, t);
            break;
        case K_LATE:
            op_late(ctx, &o, g, p);
            break;
        default:
            op_coll(ctx, &o, t);
            break;
        }
        arena_reset();
        if (__atomic_load_n(&g_failures, __ATOMIC_SEQ_CST) > 25)
            break; /* enough to go on; the watchdog ends the job */
    }
    __atomic_store_n(&g_op_at[t], -1, __ATOMIC_SEQ_CST);
    arena_release();
    ptsc_stats_t st;
    if (ptsc_ctx_stats(ctx, &st) == PTSC_OK)
        rec("t%d stats sends=%llu recvs=%llu bytes_sent=%llu bytes_recv=%llu", g_me,
            (unsigned long long)st.sends, (unsigned long long)st.recvs, (unsigned long long)st.bytes_sent,
            (unsigned long long)st.bytes_recv);
    CHECK_OK(ptsc_thread_detach());
    return PTSC_OK;
}

static void *thread_main(void *arg)
{
    worker((int)(intptr_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s RECORD_PREFIX [NOPS [SEED]]\n", argv[0]);
        return 2;
    }
    const char *prefix = argv[1];
    if (argc > 2)
        NOPS = atoi(argv[2]);
    if (argc > 3)
        SEED = strtoull(argv[3], NULL, 0);
    const char *tenv = getenv("MPI_DIFF_TRUNCATE");
    if (tenv && strcmp(tenv, "0") == 0)
        TRUNC = 0;
    const char *ienv = getenv("MPI_DIFF_INTERLEAVE");
    INTERLEAVE = !ienv ? 0 : strcmp(ienv, "1") == 0 ? 1 : strcmp(ienv, "both") == 0 ? 2 : 0;
    if (INTERLEAVE)
        kind_weight[K_LATE] = 12;
    const char *denv = getenv("MPI_DIFF_DEVICE");
    DEV = denv && strcmp(denv, "1") == 0;
    if (DEV) {
        int ndev = 0;
#ifdef MPI_DIFF_CUDA
        if (cudaGetDeviceCount(&ndev) != cudaSuccess)
            ndev = 0;
#endif
        if (ndev == 0) {
            printf("mpi_diff: SKIPPED: MPI_DIFF_DEVICE=1 needs a CUDA device (and a build with CUDA)\n");
            return 77;
        }
    }
    T = test_init(&argc, &argv, &R);
    P = R * T;
    for (POW2 = 1; POW2 < P; POW2 <<= 1)
        ;
    int rc = ptsc_tag_max(&TAG_MAX);
    CHECK(rc == PTSC_OK && TAG_MAX > NTAGS, "ptsc_tag_max: %s, %d", ptsc_status_name(rc), TAG_MAX);
    g_rec = calloc((size_t)T, sizeof *g_rec);
    g_mpicomm = calloc((size_t)T, sizeof *g_mpicomm);
    g_op_at = malloc((size_t)T * sizeof *g_op_at);
    g_op_since = calloc((size_t)T, sizeof *g_op_since);
    for (int t = 0; t < T; t++) {
        g_op_at[t] = -1;
        if (INTERLEAVE)
            MPI_Comm_dup(MPI_COMM_WORLD, &g_mpicomm[t]);
    }
    pthread_t wd;
    pthread_create(&wd, NULL, op_watchdog, NULL);
    pthread_barrier_init(&team, NULL, (unsigned)T);
    pthread_t *th = malloc((size_t)T * sizeof *th);
    for (int t = 0; t < T; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    free(th);
    __atomic_store_n(&g_op_stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(wd, NULL);
    for (int t = 0; t < T && INTERLEAVE; t++)
        MPI_Comm_free(&g_mpicomm[t]);
    free(g_mpicomm);
    free(g_op_at);
    free(g_op_since);
    pthread_barrier_destroy(&team);

    char path[4096];
    snprintf(path, sizeof path, "%s.%d.txt", prefix, g_rank);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fprintf(f, "rank %d of %d, %d threads, %d ops, seed %#llx\n", g_rank, R, T, NOPS,
                (unsigned long long)SEED);
        for (int t = 0; t < T; t++)
            if (g_rec[t].len)
                fwrite(g_rec[t].s, 1, g_rec[t].len, f);
        fclose(f);
    }
    for (int t = 0; t < T; t++)
        free(g_rec[t].s);
    free(g_rec);
    return test_finish("mpi_diff");
}
