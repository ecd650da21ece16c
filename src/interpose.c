/*
 * libptsc-mpi: the scope policy applied to plain MPI calls, for programs
 * that call MPI directly (C written for a CUDA-aware MPI, mpi4py, bindings
 * that reach libmpi's C symbols). Loaded before libmpi (`ptsc-run`, or
 * LD_PRELOAD, or linked before libmpi), it defines the MPI calls that take
 * a buffer, and before MPI reads or writes a device, managed or pinned
 * buffer it synchronises as PTSC_SYNC_SCOPE says, then forwards the call to
 * its PMPI_ entry point. Host buffers are forwarded after the class lookup
 * alone (no CUDA call without a device).
 *
 * It is a separate shared library built from the same objects as libptsc
 * (the class cache of memory.c, the GPU layer, the variable table, the
 * datatype layout of args.c), not a second implementation; it does not call
 * ptsc_init (which needs MPI_THREAD_MULTIPLE and creates lanes), only the
 * parts that make no MPI call: configuration, device discovery and the
 * class cache, set up right after the program's MPI_Init or
 * MPI_Init_thread. Its copy of ptsc's state is private to it (hidden
 * symbols, src/interpose.map).
 *
 * Scopes, for threads ptsc does not know:
 *   auto, global  the legacy default stream (every blocking stream);
 *   thread        an event recorded on the calling thread's per-thread
 *                 default stream and waited for (code built with
 *                 --default-stream per-thread; also waits for legacy-stream
 *                 work queued before);
 *   device        cudaDeviceSynchronize;
 *   none          nothing.
 * A failed sync or copy ends the call before MPI: the communicator's error
 * handler gets MPI_ERR_OTHER (or the code of what failed), as for an error
 * of MPI's, and ptsc logs the reason.
 *
 * Staging (PTSC_STAGING: auto stages where MPI is not CUDA-aware, always,
 * never): after the sync, the bytes of a device or managed buffer's type
 * map (flatten.c's runs; holes are never copied, so a receive leaves them
 * as they were) are copied to a pooled host copy: packed and handed to MPI
 * as MPI_PACKED for point-to-point calls from C, laid out as the span with
 * the caller's count and datatype for collectives and Fortran. A
 * receive's copy goes back to the device when the call completes: at once
 * for a blocking call, in the Wait / Test call that completes a
 * non-blocking one (the request stays the program's own MPI request; a
 * table maps it to its copy). MPIX_Query_cuda_support answers 1 while
 * staging is on. Staged: point-to-point, persistent requests, and every
 * collective on an intracommunicator, blocking and non-blocking (the v and
 * w forms block by block: a receive copies back only its blocks, the
 * gaps between them stay the program's); collectives on an
 * intercommunicator refuse a device buffer that would need staging
 * (MPI_ERR_BUFFER, with the reason logged). Without a device,
 * PTSC_STAGING=always stages host buffers, so CPU-only machines run the
 * staging code. MPI-4's partitioned inits refuse device, managed and
 * pinned memory (MPI_ERR_BUFFER): their partitions are written after the
 * start, where no sync or copy of this library could reach them.
 *
 * Persistent requests: Send_init / Recv_init note the buffer (and bind MPI
 * to its host copy where staging applies); each MPI_Start / MPI_Startall
 * syncs and fills the copy, and the completion call copies a receive back.
 *
 * The race check (PTSC_SYNC_CHECK) looks where the scope syncs nothing
 * (none): a device buffer handed over while the thread's stream runs is
 * counted (ptsc_mpi_races), warned about or refused. ptsc_mpi_set_stream
 * names a thread's stream for programs whose work is elsewhere.
 * docs/design.md lists what is intercepted.
 */
#include "ptsc/mpi.h"
#include "ptsc_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#define PTSC_MPI_API __attribute__((visibility("default")))

static atomic_int ready; /* set up after MPI_Init*; cleared at MPI_Finalize */
/* Counters, one block per thread (a shared atomic would put a contended
 * cache line on every call): written by their thread alone, summed by
 * ptsc_mpi_interposer. Blocks live to the process end. */
enum { C_CALLS, C_SYNCED, C_FAILED, C_STAGED, C_RACES, NCOUNT };
typedef struct counts {
    atomic_ulong n[NCOUNT];
    struct counts *next;
} counts_t;
/* initial-exec: the library is loaded at start (preloaded or linked), and
 * the general model would cost a call per access. */
static _Thread_local counts_t *my_counts __attribute__((tls_model("initial-exec")));
static counts_t *all_counts;
static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;
static counts_t no_counts; /* where a thread counts if its block could not be allocated */

static void bump(int which)
{
    counts_t *c = my_counts;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (c) {
            pthread_mutex_lock(&counts_lock);
            c->next = all_counts;
            all_counts = c;
            pthread_mutex_unlock(&counts_lock);
        } else {
            c = &no_counts;
        }
        my_counts = c;
    }
    if (c == &no_counts)
        atomic_fetch_add_explicit(&c->n[which], 1, memory_order_relaxed);
    else
        atomic_store_explicit(&c->n[which], atomic_load_explicit(&c->n[which], memory_order_relaxed) + 1,
                              memory_order_relaxed);
}

static unsigned long total(int which)
{
    unsigned long t = atomic_load_explicit(&no_counts.n[which], memory_order_relaxed);
    pthread_mutex_lock(&counts_lock);
    for (counts_t *c = all_counts; c; c = c->next)
        t += atomic_load_explicit(&c->n[which], memory_order_relaxed);
    pthread_mutex_unlock(&counts_lock);
    return t;
}

/* MPI's own answer, past this library's MPIX_Query_cuda_support. */
static int mpi_cuda_aware(void)
{
    int (*real)(void) = (int (*)(void))dlsym(RTLD_NEXT, "MPIX_Query_cuda_support");
    return real ? real() == 1 : 0;
}

/* The configuration, devices and class cache; logs and stays off on error
 * (calls are then forwarded unchanged). */
static void setup(void)
{
    int rc = ptsc__config_load(&ptsc__g.cfg);
    if (rc == PTSC_OK)
        rc = ptsc__gpu_init(&ptsc__g.ndevices);
    if (rc != PTSC_OK) {
        ptsc__log(PTSC__LOG_ERROR, "libptsc-mpi: not active: %s", ptsc_last_error());
        return;
    }
    /* PTSC_MEM_CACHE=host relies on the program calling ptsc_mem_forget,
     * which a program that does not know ptsc never does. */
    if (ptsc__g.cfg.mem_cache == PTSC__MEMCACHE_HOST) {
        ptsc__log(PTSC__LOG_WARN, "libptsc-mpi: PTSC_MEM_CACHE=host needs ptsc_mem_forget calls; using safe");
        ptsc__g.cfg.mem_cache = PTSC__MEMCACHE_SAFE;
    }
    const ptsc__config_t *c = &ptsc__g.cfg;
    int aware = c->cuda_aware == PTSC__TRI_AUTO ? mpi_cuda_aware() : c->cuda_aware == PTSC__TRI_YES;
    /* Device and managed buffers are staged; without a device, `always`
     * stages host buffers (tests). The class cache's rule for pinned
     * answers reads the first (memory.c). */
    ptsc__g.staging = c->staging == PTSC__STAGING_ALWAYS || (c->staging == PTSC__STAGING_AUTO && !aware);
    ptsc__g.stage_host = ptsc__g.ndevices == 0 && c->staging == PTSC__STAGING_ALWAYS;
    /* A new epoch, never an old one (a store of 1 would revive entries of
     * an earlier init): every table is empty now, and with tracking on
     * (started above, in ptsc__gpu_init) every later change bumps it. */
    atomic_fetch_add(&ptsc__g.mem_epoch, 1u);
    atomic_store(&ready, 1);
}

static int fail(const char *call, int mpi_err)
{
    bump(C_FAILED);
    ptsc__log(PTSC__LOG_ERROR, "libptsc-mpi: %s: %s", call, ptsc_last_error());
    return mpi_err;
}

/* The caller's buffer, or its host copy when staged (the internal header
 * defines it: the Fortran entry points hold them too). */
typedef ptsc__mbuf_t mbuf_t;

/* ------------------------------------------------------------------------ */
/* Host copies: memory and copies                                            */
/* ------------------------------------------------------------------------ */

/* The host copies' memory, reused: a buffer goes back to an idle list when
 * its operation is done and the next call of a size that fits takes it,
 * so a program pays no allocation (and, with a device, no page-locking:
 * cudaHostAlloc costs about a millisecond per 100 MB) per call. One list
 * for the process, under a lock: a non-blocking call's copy is released
 * by whichever thread completes it. Sizes are rounded up to one of eight
 * classes per power of two (pool_round; at least POOL_MIN); a call takes
 * the smallest idle buffer that fits and is at most POOL_SPARE times its
 * size (a small packed copy must not take the one large span-shaped
 * buffer a program reuses). At most POOL_SLOTS buffers stay idle, and
 * POOL_IDLE_MAX bytes besides the largest, so that a program whose one
 * large copy exceeds the cap keeps it beside its small ones; the largest
 * of the others go first. Pinned with a device (the GPU layer's host
 * allocation), malloc without. Freed at MPI_Finalize. */
#define POOL_MIN ((size_t)64 << 10)
#define POOL_IDLE_MAX ((size_t)256 << 20)
#define POOL_SLOTS 16
#define POOL_SPARE 4

static struct {
    pthread_mutex_t lock;
    int n;
    size_t bytes;
    struct {
        void *p;
        size_t cap;
    } idle[POOL_SLOTS + 1];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void pool_free(void *p)
{
    if (ptsc__g.ndevices > 0)
        ptsc__gpu_host_free(p);
    else
        free(p);
}

/* The size a buffer of `need` bytes is allocated at: POOL_MIN, else
 * `need` rounded up to an eighth of the power of two below it (at most
 * 1/8 more than asked: pinned memory is scarce), so that sizes fall into
 * few classes that later calls can reuse. 0 on overflow. */
static size_t pool_round(size_t need)
{
    if (need <= POOL_MIN)
        return POOL_MIN;
    size_t p = POOL_MIN;
    while (p <= need / 2)
        p <<= 1;
    size_t g = p / 8;
    return need > SIZE_MAX - g ? 0 : (need + g - 1) / g * g;
}

/* Host memory of at least `need` bytes (*cap: its size), or NULL with the
 * error set. */
static void *pool_get(size_t need, size_t *cap)
{
    size_t round = pool_round(need);
    if (round < need)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%zu bytes of host memory to stage a buffer", need), NULL;
    pthread_mutex_lock(&pool.lock);
    int best = -1;
    for (int i = 0; i < pool.n; i++)
        if (pool.idle[i].cap >= need && pool.idle[i].cap / POOL_SPARE <= round &&
            (best < 0 || pool.idle[i].cap < pool.idle[best].cap))
            best = i;
    if (best >= 0) {
        void *p = pool.idle[best].p;
        *cap = pool.idle[best].cap;
        pool.bytes -= *cap;
        pool.idle[best] = pool.idle[--pool.n];
        pthread_mutex_unlock(&pool.lock);
        return p;
    }
    pthread_mutex_unlock(&pool.lock);
    void *p = NULL;
    if (ptsc__g.ndevices > 0) {
        if (ptsc__gpu_host_alloc(round, &p) != PTSC_OK)
            return NULL;
    } else if (!(p = malloc(round))) {
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%zu bytes of host memory to stage a buffer", round), NULL;
    }
    *cap = round;
    return p;
}

/* Back to the idle list; beyond its limits, the largest buffers but the
 * largest of all are freed. */
static void pool_put(void *p, size_t cap)
{
    if (!p)
        return;
    void *evict[POOL_SLOTS + 1];
    int n_evict = 0;
    pthread_mutex_lock(&pool.lock);
    pool.idle[pool.n].p = p;
    pool.idle[pool.n++].cap = cap;
    pool.bytes += cap;
    for (;;) {
        int top = 0, next = -1;
        for (int i = 1; i < pool.n; i++)
            if (pool.idle[i].cap > pool.idle[top].cap)
                top = i;
        for (int i = 0; i < pool.n; i++)
            if (i != top && (next < 0 || pool.idle[i].cap > pool.idle[next].cap))
                next = i;
        if (next < 0 || (pool.n <= POOL_SLOTS && pool.bytes - pool.idle[top].cap <= POOL_IDLE_MAX))
            break;
        evict[n_evict++] = pool.idle[next].p;
        pool.bytes -= pool.idle[next].cap;
        pool.idle[next] = pool.idle[--pool.n];
    }
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < n_evict; i++)
        pool_free(evict[i]);
}

/* Every idle buffer freed (MPI_Finalize, after the requests' copies). */
static void pool_drain(void)
{
    pthread_mutex_lock(&pool.lock);
    while (pool.n > 0)
        pool_free(pool.idle[--pool.n].p);
    pool.bytes = 0;
    pthread_mutex_unlock(&pool.lock);
}

/* `rows` runs of `width` bytes, `sstep` apart at `src`, to `dstep` apart at
 * `dst`: memcpy on the host (no device), else queued on `stream` (one
 * cudaMemcpy2DAsync where the pitches allow). */
static int copy_rows(char *dst, MPI_Aint dstep, const char *src, MPI_Aint sstep, MPI_Aint width,
                     MPI_Aint rows, void *stream)
{
    if (!stream) {
        if (width == 8) /* a common element: a fixed-size copy the compiler inlines */
            for (MPI_Aint k = 0; k < rows; k++)
                memcpy(dst + k * dstep, src + k * sstep, 8);
        else
            for (MPI_Aint k = 0; k < rows; k++)
                memcpy(dst + k * dstep, src + k * sstep, (size_t)width);
        return PTSC_OK;
    }
    if (rows > 1 && dstep >= width && sstep >= width && dstep <= INT_MAX && sstep <= INT_MAX)
        return ptsc__gpu_copy2d_async(dst, (size_t)dstep, src, (size_t)sstep, (size_t)width, (size_t)rows,
                                      stream);
    int rc = PTSC_OK;
    for (MPI_Aint k = 0; rc == PTSC_OK && k < rows; k++)
        rc = ptsc__gpu_copy_async(dst + k * dstep, src + k * sstep, (size_t)width, stream);
    return rc;
}

/* Between a caller's buffer and its host copy (`back`: host to caller),
 * complete on return: the runs of its type map, or all of the span where
 * it has none. The host side of a run lies at the run's place in the span,
 * or in a packed copy at its place in type-map order. A pattern repeated
 * `reps` times is copied rep by rep on the host; on a device, run by run
 * of the pattern with one 2D copy over the reps where that makes fewer
 * copies. A host buffer (PTSC_STAGING=always without a device) takes the
 * same path, with memcpy for the copy. On a device the thread's stream is
 * synchronised even when a copy failed: no copy may still run into a host
 * copy that goes back to the pool. */
static int copy_runs(const mbuf_t *b, int back)
{
    void *s = NULL;
    int rc = ptsc__g.ndevices > 0 ? ptsc__gpu_stream_bind(PTSC_STREAM_PER_THREAD, &s) : PTSC_OK;
    ptsc__run_t all = {b->lo, b->span, b->span, 1};
    const ptsc__run_t *r = b->runs.n ? b->runs.r : &all;
    size_t n = b->runs.n ? b->runs.n : 1;
    MPI_Aint reps = b->runs.n && b->runs.reps > 1 ? b->runs.reps : 1, step = b->runs.step;
    MPI_Aint per = (MPI_Aint)(b->runs.bytes / reps); /* packed bytes of one rep */
    MPI_Aint runs = 0;                               /* copies run by run of the pattern */
    if (back && b->gap)
        b->host[1] = b->host[0]; /* the first byte, from before the gap (gap_type) */
    for (size_t i = 0; reps > 1 && i < n; i++)
        runs += r[i].n;
    if (s && reps > 1 && runs < reps * (MPI_Aint)n) {
        MPI_Aint at = 0; /* packed: where the group starts in one rep */
        for (size_t i = 0; rc == PTSC_OK && i < n; i++) {
            const ptsc__run_t *g = &r[i];
            for (MPI_Aint j = 0; rc == PTSC_OK && j < g->n; j++) {
                MPI_Aint off = g->off + j * g->stride;
                char *u = b->user + off,
                     *h = b->packed ? b->host + b->gap + at + j * g->len : b->host + (off - b->lo);
                MPI_Aint hstep = b->packed ? per : step;
                rc = back ? copy_rows(u, step, h, hstep, g->len, reps, s)
                          : copy_rows(h, hstep, u, step, g->len, reps, s);
            }
            at += g->len * g->n;
        }
    } else {
        MPI_Aint at = 0; /* packed: where the group starts in the host copy */
        for (MPI_Aint k = 0; rc == PTSC_OK && k < reps; k++)
            for (size_t i = 0; rc == PTSC_OK && i < n; i++) {
                const ptsc__run_t *g = &r[i];
                MPI_Aint off = g->off + k * step;
                char *u = b->user + off, *h = b->packed ? b->host + b->gap + at : b->host + (off - b->lo);
                MPI_Aint hstep = b->packed ? g->len : g->stride;
                rc = back ? copy_rows(u, g->stride, h, hstep, g->len, g->n, s)
                          : copy_rows(h, hstep, u, g->stride, g->len, g->n, s);
                at += g->len * g->n;
            }
    }
    if (s) {
        int src = ptsc__gpu_stream_sync(s);
        rc = rc == PTSC_OK ? src : rc;
    }
    if (!back && b->gap)
        b->host[0] = b->host[1];
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Buffers as MPI sees them                                                  */
/* ------------------------------------------------------------------------ */

/* Direction of a buffer: MPI reads it, writes some of it (its host copy
 * is filled first, so what MPI leaves goes back unchanged), or writes all
 * of its type map (a collective's receive: no fill). */
enum { SEND, RECV, FILL, BOTH }; /* BOTH: sent, then received into (the *_replace calls) */
/* Whether the call can stage, and whether it passes MPI the count and
 * datatype that wcount and wtype give (a packed host copy). */
enum { MAY_STAGE, MAY_PACK, NO_STAGE };

static void *wire(const mbuf_t *b) { return b->host ? b->host - b->lo : b->user; }

/* The stream the program named for this thread (ptsc_mpi_set_stream), or
 * NULL: its per-thread default stream. */
static _Thread_local void *named_stream;

/* The race check where the scope syncs nothing (PTSC_SYNC_CHECK): a
 * buffer handed to MPI while the thread's stream still runs is counted and
 * reported, or refused. */
static int race_check(const char *call)
{
    int busy = 0;
    if (ptsc__sync_unbound_busy(named_stream, &busy) != PTSC_OK)
        return fail(call, MPI_ERR_OTHER);
    if (!busy)
        return MPI_SUCCESS;
    bump(C_RACES);
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (ptsc__g.cfg.sync_check == PTSC__CHECK_ERROR) {
        ptsc__err(PTSC_ERR_RACE,
                  "%s: rank %d hands MPI a device buffer while work on the thread's stream is still running "
                  "(scope none); synchronise first, or run with PTSC_SYNC_SCOPE unset",
                  call, rank);
        return fail(call, MPI_ERR_OTHER);
    }
    ptsc__log(PTSC__LOG_WARN,
              "libptsc-mpi: %s: rank %d hands MPI a device buffer while work on the thread's stream is still "
              "running",
              call, rank);
    return MPI_SUCCESS;
}

/* The sync PTSC_SYNC_SCOPE asks for before MPI touches memory of `cls`
 * (src/sync.c decides, as for any thread ptsc has no context for). */
static int sync_for(ptsc_memclass_t cls, const char *call)
{
    int did = 0;
    if (!ptsc__mem_needs_sync(cls))
        return MPI_SUCCESS;
    if (ptsc__sync_unbound(named_stream, &did) != PTSC_OK)
        return fail(call, MPI_ERR_OTHER);
    if (did)
        bump(C_SYNCED);
    else if (ptsc__g.cfg.sync_check != PTSC__CHECK_OFF)
        return race_check(call);
    return MPI_SUCCESS;
}

/* The received bytes back into the caller's buffer. */
static int copy_back(const mbuf_t *b) { return copy_runs(b, 1); }

/* The host copy, its runs and its wire type freed: the buffer is the
 * caller's again (also for a plan that failed half-way). */
static void release(mbuf_t *b)
{
    if (b->gap && b->wtype_own)
        PMPI_Type_free(&b->wtype);
    pool_put(b->host, b->cap);
    ptsc__flat_free(&b->runs);
    b->host = NULL;
    b->cap = 0;
    b->packed = b->gap = 0;
}

static int is_device(ptsc_memclass_t cls) { return cls == PTSC_MEM_DEVICE || cls == PTSC_MEM_MANAGED; }

/* Whether a buffer of class `cls` needs a host copy (the library's path
 * rule, ptsc__mem_staged). */
static int stages(ptsc_memclass_t cls) { return ptsc__mem_staged(cls, PTSC__FOR_PLAIN_MPI, 0, 1, 0); }

/* The MPI error for a failed plan: memory, or a type this library cannot
 * read. */
static int plan_error(int rc) { return rc == PTSC_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_TYPE; }

/* Open MPI 4.1 writes all of a longer contiguous message into a contiguous
 * receive buffer, past its end (a receive of count 0 or 1 int included;
 * MPICH 4.0 stops at the buffer). A packed message is contiguous where
 * the program's derived type was not, and a staged receive's host copy
 * would take the overflow. Under Open MPI a packed host copy therefore
 * has a one-byte gap after its first byte, and MPI gets it as one element
 * of gap_type: byte 0 at 0, the rest from 2, a type Open MPI does not
 * treat as contiguous. The packed bytes lie from host + 1 (copy_runs); a
 * send moves the first to host[0] and a receive moves it back. Receives
 * of dense types are packed so too, with the gap, so that no staged
 * point-to-point receive can be written past its host copy. */
#ifdef OPEN_MPI
#define GAPPED 1
#else
#define GAPPED 0
#endif

static int gap_type(int n, MPI_Datatype *t)
{
    int len[2] = {1, n - 1};
    MPI_Aint at[2] = {0, 2};
    if (PMPI_Type_create_hindexed(2, len, at, MPI_PACKED, t) != MPI_SUCCESS)
        return MPI_ERR_INTERN;
    if (PMPI_Type_commit(t) != MPI_SUCCESS)
        return PMPI_Type_free(t), MPI_ERR_INTERN;
    return MPI_SUCCESS;
}

/* The gap types of the first GAP_CACHE sizes, kept until MPI_Finalize:
 * making, committing and freeing one per call cost a small staged message
 * about a tenth of a microsecond (docs/perf). Entries are only appended,
 * under the lock, and published by the count (release), so a lookup reads
 * without the lock; past GAP_CACHE sizes each call makes its own. */
#define GAP_CACHE 64
static struct {
    pthread_mutex_t lock;
    atomic_int n;
    struct {
        int size;
        MPI_Datatype type;
    } e[GAP_CACHE];
} gaps = {.lock = PTHREAD_MUTEX_INITIALIZER};

static MPI_Datatype gap_cached(int n, int upto)
{
    for (int i = 0; i < upto; i++)
        if (gaps.e[i].size == n)
            return gaps.e[i].type;
    return MPI_DATATYPE_NULL;
}

/* b->wtype for a gap of `n` bytes; b->wtype_own when the buffer frees it. */
static int gap_type_for(mbuf_t *b, int n)
{
    MPI_Datatype t = gap_cached(n, atomic_load_explicit(&gaps.n, memory_order_acquire));
    if (t != MPI_DATATYPE_NULL) {
        b->wtype = t;
        return MPI_SUCCESS;
    }
    pthread_mutex_lock(&gaps.lock);
    int k = atomic_load_explicit(&gaps.n, memory_order_relaxed), rc = MPI_SUCCESS;
    if ((t = gap_cached(n, k)) == MPI_DATATYPE_NULL && (rc = gap_type(n, &t)) == MPI_SUCCESS) {
        if (k < GAP_CACHE) {
            gaps.e[k].size = n;
            gaps.e[k].type = t;
            atomic_store_explicit(&gaps.n, k + 1, memory_order_release);
        } else {
            b->wtype_own = 1; /* the cache is full */
        }
    }
    pthread_mutex_unlock(&gaps.lock);
    b->wtype = t;
    return rc;
}

/* MPI_Finalize: the cached types freed. */
static void gap_drain(void)
{
    pthread_mutex_lock(&gaps.lock);
    for (int i = atomic_load_explicit(&gaps.n, memory_order_relaxed); i-- > 0;)
        PMPI_Type_free(&gaps.e[i].type);
    atomic_store_explicit(&gaps.n, 0, memory_order_release);
    pthread_mutex_unlock(&gaps.lock);
}

/* The host copy's memory where staging applies to `count` elements of
 * `type` at b->user (class `cls`); nothing is copied yet. A datatype with
 * holes is flattened into the runs of its type map, which are all that is
 * copied; where the call passes what wcount and wtype say (`can` MAY_PACK:
 * point-to-point from C), the host copy is those bytes packed in type-map
 * order and MPI gets them as MPI_PACKED, else (collectives, whose
 * reductions and per-rank type signatures need the caller's type, and the
 * Fortran entry points) it is laid out as the span and MPI gets the
 * caller's count and type. */
static int stage_plan(mbuf_t *b, ptsc_memclass_t cls, MPI_Count count, MPI_Datatype type, int dir, int can,
                      const char *call)
{
    if (!stages(cls))
        return MPI_SUCCESS;
    if (can == NO_STAGE) {
        if (!is_device(cls))
            return MPI_SUCCESS; /* a host buffer staged only to test the staging code */
        ptsc__err(PTSC_ERR_UNSUPPORTED,
                  "a device buffer needs staging (MPI is not CUDA-aware), which libptsc-mpi does not do for "
                  "this call yet");
        return fail(call, MPI_ERR_BUFFER);
    }
    ptsc__layout_t L;
    if (count <= 0 || type == MPI_DATATYPE_NULL)
        return MPI_SUCCESS; /* nothing to copy; MPI itself judges the arguments, on the call's communicator */
    if (count > INT_MAX) {
        ptsc__err(PTSC_ERR_UNSUPPORTED, "more than INT_MAX elements to stage");
        return fail(call, MPI_ERR_COUNT);
    }
    if (ptsc__layout_of(type, (int)count, &L, call) != PTSC_OK)
        return fail(call, MPI_ERR_TYPE);
    if (L.span <= 0)
        return MPI_SUCCESS;
    if (!L.dense || (GAPPED && can == MAY_PACK && dir != SEND)) {
        int rc = L.dense ? ptsc__flat_add(&b->runs, (MPI_Aint)L.lo, (MPI_Aint)L.span)
                         : ptsc__flatten(type, count, 0, &b->runs);
        if (rc != PTSC_OK) {
            release(b);
            return fail(call, plan_error(rc));
        }
        b->packed = can == MAY_PACK && b->runs.bytes <= INT_MAX;
        b->gap = GAPPED && b->packed && (b->runs.bytes >= 2 || dir == RECV);
    }
    b->lo = b->packed ? 0 : L.lo;
    b->span = b->packed ? b->runs.bytes : L.span;
    /* A one-byte receive (not a *_replace one, whose copy is also sent) has no gap type of its size (one byte
     * is always contiguous, and Open MPI would write a longer message past the host copy): MPI gets two
     * bytes' room behind the gap, so a message of three bytes or more is MPI's MPI_ERR_TRUNCATE; one of two
     * is taken whole and its first byte goes back, and that truncation MPI cannot report (docs/design.md, the
     * interposer's staging). */
    if (b->gap && b->span < 2)
        b->span = 2;
    b->back = dir != SEND;
    if (b->gap && gap_type_for(b, (int)b->span) != MPI_SUCCESS) {
        release(b); /* a failed gap_type_for leaves no type of the buffer's own */
        ptsc__err(PTSC_ERR_NO_MEMORY, "the datatype of a staged message could not be made");
        return fail(call, MPI_ERR_INTERN);
    }
    if (!(b->host = pool_get((size_t)b->span + (size_t)b->gap, &b->cap))) {
        release(b);
        return fail(call, MPI_ERR_NO_MEM);
    }
    bump(C_STAGED);
    return MPI_SUCCESS;
}

/* What MPI gets as count and datatype for a buffer whose call passes them
 * (MAY_PACK): the packed bytes, or the caller's. */
static int wcount(const mbuf_t *b, int count) { return b->gap ? 1 : b->packed ? (int)b->span : count; }
static MPI_Datatype wtype(const mbuf_t *b, MPI_Datatype type)
{
    return b->gap ? b->wtype : b->packed ? MPI_PACKED : type;
}

/* Fill the host copy from the caller's buffer: the type map's bytes. A
 * receive's copy holds them too, so that a shorter message leaves the
 * rest of the buffer unchanged when all of them go back. */
static int stage_in(mbuf_t *b, const char *call)
{
    if (!b->host || copy_runs(b, 0) == PTSC_OK)
        return MPI_SUCCESS;
    return fail(call, MPI_ERR_OTHER);
}

/* The blocks of a v or w collective's buffer: block i is counts[i]
 * elements of types[i] (or of `type` for all) at displs[i] elements of
 * that type (v) or bytes (w). */
typedef struct {
    int n;
    const int *counts, *displs;
    const MPI_Datatype *types; /* w: one type per block; NULL: `type` */
    MPI_Datatype type;
} blocks_t;

static MPI_Datatype block_type(const blocks_t *v, int i) { return v->types ? v->types[i] : v->type; }

/* Where block i lies: it starts at byte *at of the buffer, its data lies
 * in bytes [*lo, *lo + *span); *dense: no holes. */
static int block_at(const blocks_t *v, int i, MPI_Count *at, MPI_Count *lo, MPI_Count *span, int *dense,
                    const char *call)
{
    ptsc__layout_t L;
    if (ptsc__layout_of(block_type(v, i), v->counts[i], &L, call) != PTSC_OK)
        return MPI_ERR_TYPE;
    *at = (MPI_Count)v->displs[i] * (v->types ? 1 : L.extent);
    *lo = *at + L.lo;
    *span = L.span;
    *dense = L.dense;
    return MPI_SUCCESS;
}

/* The host copy of a v or w buffer: laid out as the bytes from its lowest
 * block to the end of its highest, MPI gets the caller's arguments, and
 * only the blocks' type maps are copied in and back (what lies between the
 * blocks is not the call's). Nothing is copied yet. */
static int stage_plan_blocks(mbuf_t *b, ptsc_memclass_t cls, const blocks_t *v, int dir, int can,
                             const char *call)
{
    if (!stages(cls))
        return MPI_SUCCESS;
    if (can == NO_STAGE)
        return stage_plan(b, cls, 0, MPI_DATATYPE_NULL, dir, can, call);
    if (!v->counts || !v->displs) {
        ptsc__err(PTSC_ERR_ARG, "a count or displacement array is NULL");
        return fail(call, MPI_ERR_ARG);
    }
    MPI_Count lo = 0, hi = 0, at, l, n;
    int any = 0, dense, rc = PTSC_OK;
    for (int i = 0; rc == PTSC_OK && i < v->n; i++) {
        if (v->counts[i] <= 0 || block_type(v, i) == MPI_DATATYPE_NULL)
            continue; /* MPI judges negative counts */
        if (block_at(v, i, &at, &l, &n, &dense, call) != MPI_SUCCESS) {
            release(b);
            return fail(call, MPI_ERR_TYPE);
        }
        if (n <= 0)
            continue;
        lo = any && lo < l ? lo : l;
        hi = any && hi > l + n ? hi : l + n;
        any = 1;
        rc = dense ? ptsc__flat_add(&b->runs, (MPI_Aint)l, (MPI_Aint)n)
                   : ptsc__flatten(block_type(v, i), v->counts[i], (MPI_Aint)at, &b->runs);
    }
    if (rc != PTSC_OK) {
        release(b);
        return fail(call, plan_error(rc));
    }
    if (!any)
        return MPI_SUCCESS;
    b->lo = lo;
    b->span = hi - lo;
    b->back = dir != SEND;
    if (!(b->host = pool_get((size_t)b->span, &b->cap))) {
        release(b);
        return fail(call, MPI_ERR_NO_MEM);
    }
    bump(C_STAGED);
    return MPI_SUCCESS;
}

/* Whether the interposer acts on `buf`: active, and a buffer (not NULL,
 * MPI_IN_PLACE or MPI_BOTTOM). */
static int acts_on(const void *buf)
{
    return atomic_load_explicit(&ready, memory_order_acquire) && buf && buf != MPI_IN_PLACE &&
           buf != MPI_BOTTOM;
}

static void progress_detached(int wait);

enum { LOOK = -1 }; /* a class not known yet: lookup asks */

/* The class of a buffer argument (counted): `known` where a collective
 * found it before (coll), else looked up now; *cls is HOST for the ones
 * MPI defines as no buffer. */
static int lookup(const void *buf, int known, ptsc_memclass_t *cls, const char *call)
{
    *cls = PTSC_MEM_HOST;
    if (!acts_on(buf))
        return MPI_SUCCESS;
    progress_detached(0);
    bump(C_CALLS);
    if (known != LOOK)
        return *cls = (ptsc_memclass_t)known, MPI_SUCCESS;
    return ptsc__mem_classify(buf, cls) == PTSC_OK ? MPI_SUCCESS : fail(call, MPI_ERR_OTHER);
}

/* Before MPI touches `count` elements of `type` at `buf` (or the blocks
 * `v`): the sync, then the host copy where staging applies. `known`: the
 * buffer's class where the caller knows it, or LOOK. MPI_SUCCESS or an MPI
 * error code. */
static int prep_any(mbuf_t *b, const void *buf, MPI_Count count, MPI_Datatype type, const blocks_t *v,
                    int dir, int can, int known, const char *call)
{
    memset(b, 0, sizeof *b);
    b->user = (char *)buf;
    ptsc_memclass_t cls;
    int rc = lookup(buf, known, &cls, call); /* HOST for what is no buffer */
    /* Host memory with nothing to stage (every buffer on a machine without
     * a device): no sync, no copy. */
    if (rc != MPI_SUCCESS || (cls == PTSC_MEM_HOST && !ptsc__g.stage_host) || !acts_on(buf))
        return rc;
    rc = sync_for(cls, call);
    if (rc == MPI_SUCCESS)
        rc = v ? stage_plan_blocks(b, cls, v, dir, can, call)
               : stage_plan(b, cls, count, type, dir, can, call);
    if (rc == MPI_SUCCESS && dir != FILL && (rc = stage_in(b, call)) != MPI_SUCCESS)
        release(b);
    b->unfilled = dir == FILL && b->host;
    return rc;
}

static int prep(mbuf_t *b, const void *buf, MPI_Count count, MPI_Datatype type, int dir, int can,
                const char *call)
{
    return prep_any(b, buf, count, type, NULL, dir, can, LOOK, call);
}

/* After MPI is done with the buffer: a received copy goes back (unless
 * `keep`, a cancelled receive); the host copy is freed. */
static int finish(mbuf_t *b, int keep, const char *call)
{
    if (!b->host)
        return MPI_SUCCESS;
    int rc = b->back && !keep ? copy_back(b) : PTSC_OK;
    release(b);
    return rc == PTSC_OK ? MPI_SUCCESS : fail(call, MPI_ERR_OTHER);
}

/* An error of this library (not MPI's, which MPI has reported) goes to the
 * communicator's error handler, as MPI's own would (fatal by default). */
static int raise_on(MPI_Comm comm, int rc)
{
    if (rc != MPI_SUCCESS && comm != MPI_COMM_NULL)
        PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

/* The result of a call with staged buffers: MPI's error first. A host
 * copy that was not filled before the call (FILL) does not go back when
 * the call failed: MPI may not have written it. */
static int done1(int mrc, mbuf_t *a, MPI_Comm comm, const char *call)
{
    int frc = finish(a, mrc != MPI_SUCCESS && a->unfilled, call);
    return mrc != MPI_SUCCESS ? mrc : raise_on(comm, frc);
}
static int done2(int mrc, mbuf_t *a, mbuf_t *b, MPI_Comm comm, const char *call)
{
    int frc = finish(a, mrc != MPI_SUCCESS && a->unfilled, call),
        grc = finish(b, mrc != MPI_SUCCESS && b->unfilled, call);
    return mrc != MPI_SUCCESS ? mrc : raise_on(comm, frc != MPI_SUCCESS ? frc : grc);
}

/* ------------------------------------------------------------------------ */
/* Requests with host copies                                                 */
/* ------------------------------------------------------------------------ */

/* A request whose completion has work to do: a non-blocking operation's
 * host copy (until it completes), or a persistent request on memory that
 * needs a sync or a copy at each start (until MPI_Request_free).
 *
 * Ownership: an entry is in the table only while its handle is live and no
 * call is working on it. A call that is given handles (Wait, Test and their
 * array forms, Start, Startall, Request_free) takes their entries out of
 * the table before it calls MPI, and owns them from then on: once MPI has
 * completed a request, another thread's new request may get the same handle
 * value at once, and must not find the old entry. After MPI returns, the
 * owner settles the entries of the requests that completed (and frees them)
 * and puts the others back under the handle MPI left in the caller's
 * array: MPI_Start may return a new handle for a persistent request (Open
 * MPI does for a send the network still holds), and the entry follows it.
 * Two calls never work on one request at once (MPI forbids it), so no
 * entry is taken by two owners. A request the program freed while it was
 * still running is `detached`: the entry keeps MPI's handle, is skipped by
 * the program's calls, and is settled by later calls into this library,
 * or at MPI_Finalize. */
typedef struct ptsc__pending {
    MPI_Request req;
    mbuf_t b, b2; /* b2: a non-blocking collective's receive side */
    const char *call;
    int p2p;             /* point-to-point: may be cancelled (a collective's status is undefined) */
    int persistent;      /* Send_init / Recv_init */
    int active;          /* persistent: started and not completed */
    int detached;        /* freed by the program while running; req is ours */
    ptsc_memclass_t cls; /* persistent: the buffer's class, for the sync at each start */
    struct ptsc__pending *next;
} pending_t;

static pthread_mutex_t pend_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t detach_lock = PTHREAD_MUTEX_INITIALIZER; /* one thread progresses detached ones */
static pending_t *pend;
static atomic_int n_pending, n_detached;

static int same_req(MPI_Request a, MPI_Request b) { return memcmp(&a, &b, sizeof a) == 0; }

static void link_pending(pending_t *p)
{
    pthread_mutex_lock(&pend_lock);
    p->next = pend;
    pend = p;
    atomic_fetch_add(&n_pending, 1);
    pthread_mutex_unlock(&pend_lock);
}

/* The first entry that `want` accepts, out of the table (the caller owns
 * it now), or NULL. Under pend_lock. */
static pending_t *take_locked(int (*want)(const pending_t *, MPI_Request), MPI_Request r)
{
    for (pending_t **pp = &pend; *pp; pp = &(*pp)->next)
        if (want(*pp, r)) {
            pending_t *p = *pp;
            *pp = p->next;
            atomic_fetch_sub(&n_pending, 1);
            return p;
        }
    return NULL;
}

static int is_live(const pending_t *p, MPI_Request r) { return !p->detached && same_req(p->req, r); }
static int is_detached(const pending_t *p, MPI_Request r) { return (void)r, p->detached; }

/* The entries of the program's requests reqs[0 .. n), taken out of the
 * table: out[i] for reqs[i], or NULL. One array may name a handle twice
 * (MPI_REQUEST_NULL, or a shared complete request of Open MPI's): each
 * occurrence takes an entry of its own, if any is left. */
static void take_all(int n, const MPI_Request *reqs, pending_t **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (!atomic_load(&n_pending))
        return;
    pthread_mutex_lock(&pend_lock);
    for (int i = 0; i < n; i++)
        if (!same_req(reqs[i], MPI_REQUEST_NULL))
            out[i] = take_locked(is_live, reqs[i]);
    pthread_mutex_unlock(&pend_lock);
}

static pending_t *take(MPI_Request r)
{
    pending_t *p;
    take_all(1, &r, &p);
    return p;
}

/* Remember a started operation's host copies (`b2` may be NULL); without
 * memory for the entry, wait for it. Only a point-to-point operation's
 * status says whether it was cancelled: a non-blocking collective cannot
 * be cancelled and the fields of its status are undefined (MPICH 4.0 left
 * them unwritten, and a cancelled bit read from the stack dropped a
 * staged Ireduce_scatter's result now and then). */
static int track_any(int mrc, MPI_Request *req, mbuf_t *b, mbuf_t *b2, int p2p, const char *call)
{
    mbuf_t none = {0};
    if (!b2)
        b2 = &none;
    if (!b->host && !b2->host)
        return mrc;
    if (mrc != MPI_SUCCESS) {
        release(b);
        release(b2);
        return mrc;
    }
    /* Complete already: finished now, with no entry. Open MPI returns one
     * shared, complete request object for operations that finished at
     * once (sends, collectives on one process), so such a handle may stand
     * for several operations and cannot name an entry. Finishing early is
     * invisible to the program, which may not touch the buffer before its
     * own completion call. */
    int flag = 0;
    MPI_Status st;
    memset(&st, 0, sizeof st);
    if (PMPI_Request_get_status(*req, &flag, &st) == MPI_SUCCESS && flag) {
        int cancelled = 0;
        if (p2p)
            PMPI_Test_cancelled(&st, &cancelled);
        int frc = finish(b, cancelled, call), grc = finish(b2, cancelled, call);
        return frc != MPI_SUCCESS ? frc : grc;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (!p) {
        int wrc = PMPI_Wait(req, &st);
        return done2(wrc, b, b2, MPI_COMM_NULL, call);
    }
    p->req = *req;
    p->b = *b;
    p->b2 = *b2;
    p->p2p = p2p;
    p->call = call;
    link_pending(p);
    return MPI_SUCCESS;
}

/* A point-to-point operation; a collective (its receive side `b2`, or NULL). */
static int track(int mrc, MPI_Request *req, mbuf_t *b, const char *call)
{
    return track_any(mrc, req, b, NULL, 1, call);
}

static int track2(int mrc, MPI_Request *req, mbuf_t *b, mbuf_t *b2, const char *call)
{
    return track_any(mrc, req, b, b2, 0, call);
}

/* The request of entry `p`, taken out of the table by the caller, completed
 * with `st` (an error status too; NULL: not known): a receive's host copy
 * goes back unless cancelled; a non-blocking operation's entry is freed, a
 * persistent one's stays the caller's, to be put back for its next start. */
static int settle(pending_t *p, const MPI_Status *st)
{
    if (!p)
        return MPI_SUCCESS;
    int cancelled = 0;
    if (p->p2p && st && st != MPI_STATUS_IGNORE)
        PMPI_Test_cancelled(st, &cancelled);
    if (!p->persistent) {
        int rc = finish(&p->b, cancelled, p->call), rc2 = finish(&p->b2, cancelled, p->call);
        free(p);
        rc = rc != MPI_SUCCESS ? rc : rc2;
        return rc;
    }
    int was = p->active;
    p->active = 0;
    if (!was || !p->b.host || !p->b.back || cancelled || copy_back(&p->b) == PTSC_OK)
        return MPI_SUCCESS;
    return fail(p->call, MPI_ERR_OTHER);
}

/* An entry taken out of the table whose request MPI no longer holds. */
static void drop(pending_t *p)
{
    release(&p->b);
    release(&p->b2);
    free(p);
}

/* An entry taken out of the table, after the call that took it: settled
 * if its request completed (`done`, with status `st`); kept under handle
 * `now`, what MPI left in the caller's argument, if MPI still holds it
 * (not completed, or persistent). A non-blocking operation whose handle MPI
 * has nulled without saying it completed (an error of another request in
 * the same call) is settled too: MPI holds it no more. */
static int conclude(pending_t *p, int done, const MPI_Status *st, MPI_Request now)
{
    if (!p)
        return MPI_SUCCESS;
    int persistent = p->persistent;
    if (!done && !persistent && same_req(now, MPI_REQUEST_NULL))
        done = 1, st = NULL;
    int rc = done ? settle(p, st) : MPI_SUCCESS; /* frees a non-persistent one */
    if (persistent && same_req(now, MPI_REQUEST_NULL)) {
        drop(p); /* Open MPI 4.1 nulls a persistent receive's handle when it completes in error */
        return rc;
    }
    if (!done || persistent) {
        p->req = now;
        link_pending(p);
    }
    return rc;
}

/* Detached requests that completed meanwhile: settled (a freed persistent
 * one also released in MPI). Called by the wrappers while any exist; one
 * thread at a time, the others go on. `wait`: all of them, at finalize. */
static void progress_detached(int wait)
{
    if (!atomic_load(&n_detached) ||
        (wait ? pthread_mutex_lock(&detach_lock) : pthread_mutex_trylock(&detach_lock)))
        return;
    for (;;) {
        pthread_mutex_lock(&pend_lock);
        pending_t *p = take_locked(is_detached, MPI_REQUEST_NULL);
        pthread_mutex_unlock(&pend_lock);
        int done = 0;
        MPI_Status st;
        if (p)
            wait ? (PMPI_Wait(&p->req, &st), done = 1) : PMPI_Test(&p->req, &done, &st);
        if (p && !done)
            link_pending(p);
        if (!p || !done)
            break; /* one at a time in the test form: later calls take the next */
        atomic_fetch_sub(&n_detached, 1);
        int persistent = p->persistent;
        settle(p, &st);
        if (persistent) {
            PMPI_Request_free(&p->req);
            drop(p);
        }
    }
    pthread_mutex_unlock(&detach_lock);
}

/*
 * Counters of this process: buffer arguments seen, syncs made, failures,
 * buffers staged. 1 while the interposer is active (between MPI_Init and
 * MPI_Finalize). Found with dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer") by
 * ptsc-info and tests, so programs need no header.
 */
PTSC_MPI_API int ptsc_mpi_interposer(unsigned long *calls, unsigned long *synced, unsigned long *failed,
                                     unsigned long *staged)
{
    if (calls)
        *calls = total(C_CALLS);
    if (synced)
        *synced = total(C_SYNCED);
    if (failed)
        *failed = total(C_FAILED);
    if (staged)
        *staged = total(C_STAGED);
    return atomic_load(&ready);
}

/* Buffers the race check found busy (PTSC_SYNC_CHECK with scope none). */
PTSC_MPI_API unsigned long ptsc_mpi_races(void) { return total(C_RACES); }

/*
 * The stream this thread's buffers come from, for programs whose work is
 * not on the per-thread default stream (task streams of CUDA.jl, CuPy's
 * current stream, non-blocking streams): the thread scope, and `auto`,
 * then sync that stream before MPI touches a buffer. NULL: back to the
 * per-thread default stream. The stream must stay valid while it is named.
 * Found with dlsym (or include/ptsc/mpi.h); MPI_SUCCESS.
 */
PTSC_MPI_API int ptsc_mpi_set_stream(void *stream)
{
    named_stream = stream;
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Start and end                                                             */
/* ------------------------------------------------------------------------ */

PTSC_MPI_API int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        setup();
    return rc;
}

PTSC_MPI_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        setup();
    return rc;
}

/* The statistics line and the release of everything, before the
 * program's MPI_Finalize (C or Fortran). */
void ptsc__ipose_stop(void)
{
    if (atomic_exchange(&ready, 0)) {
        if (ptsc__g.cfg.stats) {
            int rank = -1;
            PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
            fprintf(
                stderr,
                "[ptsc-mpi r%d] buffers %lu synced %lu staged %lu failed %lu races %lu (scope %s, staging "
                "%s)\n",
                rank, total(C_CALLS), total(C_SYNCED), total(C_STAGED), total(C_FAILED), total(C_RACES),
                ptsc__scope_name(ptsc__g.cfg.sync_scope), ptsc__g.staging ? "on" : "off");
        }
        progress_detached(1);
        if (atomic_load(&n_pending))
            ptsc__log(
                PTSC__LOG_WARN,
                "libptsc-mpi: MPI_Finalize with %d requests never completed or freed (their host copies "
                "are released)",
                atomic_load(&n_pending));
        while (pend) {
            pending_t *p = pend;
            pend = p->next;
            release(&p->b);
            release(&p->b2);
            free(p);
        }
        atomic_store(&n_pending, 0);
        pool_drain();
        gap_drain();
        ptsc__gpu_finalize();
    }
}

PTSC_MPI_API int MPI_Finalize(void)
{
    ptsc__ipose_stop();
    return PMPI_Finalize();
}

#if defined(MPIX_CUDA_AWARE_SUPPORT)
/* Programs that ask take their device path: with staging on, device
 * buffers work through this library. */
PTSC_MPI_API int MPIX_Query_cuda_support(void)
{
    return atomic_load(&ready) && ptsc__g.staging ? 1 : mpi_cuda_aware();
}
#endif

/* ------------------------------------------------------------------------ */
/* Completion                                                                */
/* ------------------------------------------------------------------------ */

#define CHECKED(expr)                \
    do {                             \
        int ptsc_rc_ = (expr);       \
        if (ptsc_rc_ != MPI_SUCCESS) \
            return ptsc_rc_;         \
    } while (0)
/* The same in a call on `obj`, whose error handler RAISE calls (raise_on
 * for a communicator, raise_win for a window); the request (if any) is set
 * to MPI_REQUEST_NULL, as nothing was started. */
#define CHECKED_RAISE(RAISE, obj, req, expr)   \
    do {                                       \
        int ptsc_rc_ = (expr);                 \
        if (ptsc_rc_ != MPI_SUCCESS) {         \
            MPI_Request *ptsc_req_ = (req);    \
            if (ptsc_req_)                     \
                *ptsc_req_ = MPI_REQUEST_NULL; \
            return RAISE((obj), ptsc_rc_);     \
        }                                      \
    } while (0)
#define CHECKED_ON(comm, req, expr) CHECKED_RAISE(raise_on, comm, req, expr)

/* The entries of `n` requests, taken out of the table before the call
 * (each must be concluded after it), and statuses where the caller
 * ignores them; on the stack up to 16. */
typedef struct {
    pending_t *few[16], **p;
    MPI_Status fews[16], *st;
} saved_t;

static void unsave(saved_t *s, MPI_Status *sts)
{
    if (s->p && s->p != s->few)
        free(s->p);
    if (s->st && s->st != sts && s->st != s->fews)
        free(s->st);
}

static int save(saved_t *s, int n, const MPI_Request *reqs, MPI_Status *sts)
{
    s->p = n <= 16 ? s->few : malloc((size_t)n * sizeof *s->p);
    s->st = sts != MPI_STATUSES_IGNORE ? sts : n <= 16 ? s->fews : malloc((size_t)n * sizeof *s->st);
    if (!s->p || !s->st) {
        unsave(s, sts);
        ptsc__err(PTSC_ERR_NO_MEMORY, "request handles");
        return fail("a completion call", MPI_ERR_NO_MEM);
    }
    take_all(n, reqs, s->p);
    return MPI_SUCCESS;
}

/* Whether request i of a Waitall / Testall that returned `mrc` completed:
 * with MPI_ERR_IN_STATUS, those whose status says MPI_ERR_PENDING did not. */
static int finished(int mrc, const MPI_Status *st)
{
    return mrc == MPI_SUCCESS || (mrc == MPI_ERR_IN_STATUS && st->MPI_ERROR != MPI_ERR_PENDING);
}

/* Whether the completion calls have anything to do (progressing detached
 * requests on the way). */
static int busy(void)
{
    progress_detached(0);
    return atomic_load(&n_pending) != 0;
}

PTSC_MPI_API int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    if (!busy())
        return PMPI_Wait(req, st);
    pending_t *p = take(*req);
    MPI_Status own, *s = st == MPI_STATUS_IGNORE ? &own : st;
    int mrc = PMPI_Wait(req, s), frc = conclude(p, 1, s, *req);
    return mrc != MPI_SUCCESS ? mrc : frc;
}

PTSC_MPI_API int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    if (!busy())
        return PMPI_Test(req, flag, st);
    pending_t *p = take(*req);
    MPI_Status own, *s = st == MPI_STATUS_IGNORE ? &own : st;
    *flag = 0;
    int mrc = PMPI_Test(req, flag, s), frc = conclude(p, *flag, s, *req);
    return mrc != MPI_SUCCESS ? mrc : frc;
}

/* Waitall and Testall. */
static int all(int wait, int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    saved_t s;
    CHECKED(save(&s, n, reqs, sts));
    int dummy = 1, *f = wait ? &dummy : flag;
    *f = wait;
    int mrc = wait ? PMPI_Waitall(n, reqs, s.st) : PMPI_Testall(n, reqs, flag, s.st), frc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        int rc = conclude(s.p[i], *f && finished(mrc, &s.st[i]), &s.st[i], reqs[i]);
        frc = frc != MPI_SUCCESS ? frc : rc;
    }
    unsave(&s, sts);
    return mrc != MPI_SUCCESS ? mrc : frc;
}

PTSC_MPI_API int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    return !busy() || n <= 0 ? PMPI_Waitall(n, reqs, sts) : all(1, n, reqs, NULL, sts);
}

PTSC_MPI_API int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    return !busy() || n <= 0 ? PMPI_Testall(n, reqs, flag, sts) : all(0, n, reqs, flag, sts);
}

/* Waitany and Testany: the completed one (an error status too) is *index. */
static int any(int wait, int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
    saved_t s;
    CHECKED(save(&s, n, reqs, MPI_STATUSES_IGNORE));
    MPI_Status own, *sp = st == MPI_STATUS_IGNORE ? &own : st;
    *index = MPI_UNDEFINED;
    int mrc = wait ? PMPI_Waitany(n, reqs, index, sp) : PMPI_Testany(n, reqs, index, flag, sp),
        frc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        int rc = conclude(s.p[i], i == *index, sp, reqs[i]);
        frc = frc != MPI_SUCCESS ? frc : rc;
    }
    unsave(&s, MPI_STATUSES_IGNORE);
    return mrc != MPI_SUCCESS ? mrc : frc;
}

PTSC_MPI_API int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
    return !busy() || n <= 0 ? PMPI_Waitany(n, reqs, index, st) : any(1, n, reqs, index, NULL, st);
}

PTSC_MPI_API int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
    return !busy() || n <= 0 ? PMPI_Testany(n, reqs, index, flag, st) : any(0, n, reqs, index, flag, st);
}

/* Waitsome and Testsome: the completed ones are indices[0 .. *outcount). */
static int some(int wait, int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    saved_t s;
    CHECKED(save(&s, n, reqs, sts));
    *outcount = 0;
    int mrc = wait ? PMPI_Waitsome(n, reqs, outcount, indices, s.st)
                   : PMPI_Testsome(n, reqs, outcount, indices, s.st);
    int frc = MPI_SUCCESS;
    for (int k = 0; *outcount != MPI_UNDEFINED && k < *outcount; k++) {
        int i = indices[k];
        if (i < 0 || i >= n || !s.p[i])
            continue;
        int rc = conclude(s.p[i], 1, &s.st[k], reqs[i]);
        s.p[i] = NULL;
        frc = frc != MPI_SUCCESS ? frc : rc;
    }
    for (int i = 0; i < n; i++)
        conclude(s.p[i], 0, NULL, reqs[i]);
    unsave(&s, sts);
    return mrc != MPI_SUCCESS ? mrc : frc;
}

PTSC_MPI_API int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    return !busy() || n <= 0 ? PMPI_Waitsome(n, reqs, outcount, indices, sts)
                             : some(1, n, reqs, outcount, indices, sts);
}

PTSC_MPI_API int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    return !busy() || n <= 0 ? PMPI_Testsome(n, reqs, outcount, indices, sts)
                             : some(0, n, reqs, outcount, indices, sts);
}

/* MPI_Request_free returns at once, as in MPI. A running operation with a
 * host copy is detached: the entry keeps MPI's handle, and later calls
 * settle it when it completes (at the latest MPI_Finalize). An inactive
 * persistent request is released at once. */
PTSC_MPI_API int MPI_Request_free(MPI_Request *req)
{
    pending_t *p = busy() ? take(*req) : NULL;
    if (!p || !ptsc__ipose_free(p))
        return PMPI_Request_free(req);
    *req = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Persistent requests                                                       */
/* ------------------------------------------------------------------------ */

/* How a send to `dest` may stage: packed, but under Open MPI a send to the
 * calling rank itself keeps the caller's type (span layout). Open MPI 4.1
 * does not report truncation of a contiguous message a rank sends to
 * itself (and with a receive of count 0 writes the buffer): a packed send
 * would turn a truncation the caller's derived type reports into a silent
 * one. MPICH 4.0 reports it (2 B to 1 MB, receives of half the message and
 * of nothing, checked in plain MPI). */
static int send_can(MPI_Comm comm, int dest)
{
    int me = -1;
    if (!GAPPED || !atomic_load_explicit(&ready, memory_order_acquire) || !ptsc__g.staging || dest < 0 ||
        comm == MPI_COMM_NULL || PMPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return MAY_PACK;
    return me == dest ? MAY_STAGE : MAY_PACK;
}

/* At Send_init / Recv_init: the class, and the host copy's memory where
 * staging applies (MPI binds the address now; it is filled at each start). */
static int pprep(mbuf_t *b, const void *buf, int count, MPI_Datatype type, int dir, int can,
                 ptsc_memclass_t *cls, const char *call)
{
    memset(b, 0, sizeof *b);
    b->user = (char *)buf;
    *cls = PTSC_MEM_HOST;
    if (!acts_on(buf))
        return MPI_SUCCESS;
    int rc = lookup(buf, LOOK, cls, call);
    return rc == MPI_SUCCESS ? stage_plan(b, *cls, count, type, dir, can, call) : rc;
}

static int ptrack(int mrc, MPI_Request *req, mbuf_t *b, ptsc_memclass_t cls, const char *call)
{
    if (mrc != MPI_SUCCESS) {
        release(b);
        return mrc;
    }
    if (!b->host && !ptsc__mem_needs_sync(cls))
        return MPI_SUCCESS;
    pending_t *p = calloc(1, sizeof *p);
    if (!p) {
        release(b);
        PMPI_Request_free(req);
        ptsc__err(PTSC_ERR_NO_MEMORY, "a persistent request's entry");
        return fail(call, MPI_ERR_NO_MEM);
    }
    p->req = *req;
    p->b = *b;
    p->call = call;
    p->p2p = 1;
    p->persistent = 1;
    p->cls = cls;
    link_pending(p);
    return MPI_SUCCESS;
}

#define PINIT_SEND(NAME)                                                                                    \
    PTSC_MPI_API int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag,           \
                                MPI_Comm comm, MPI_Request *req)                                            \
    {                                                                                                       \
        mbuf_t b;                                                                                           \
        ptsc_memclass_t cls;                                                                                \
        CHECKED_ON(comm, req, pprep(&b, buf, count, type, SEND, send_can(comm, dest), &cls, "MPI_" #NAME)); \
        return ptrack(PMPI_##NAME(wire(&b), wcount(&b, count), wtype(&b, type), dest, tag, comm, req), req, \
                      &b, cls, "MPI_" #NAME);                                                               \
    }
PINIT_SEND(Send_init)
PINIT_SEND(Ssend_init)
PINIT_SEND(Bsend_init)
PINIT_SEND(Rsend_init)

PTSC_MPI_API int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                               MPI_Request *req)
{
    mbuf_t b;
    ptsc_memclass_t cls;
    CHECKED_ON(comm, req, pprep(&b, buf, count, type, RECV, MAY_PACK, &cls, "MPI_Recv_init"));
    return ptrack(PMPI_Recv_init(wire(&b), wcount(&b, count), wtype(&b, type), source, tag, comm, req), req,
                  &b, cls, "MPI_Recv_init");
}

/* Before a start of the entry `p` (taken out of the table): the sync, and
 * the host copy filled from the caller's buffer. */
static int start_prep(pending_t *p)
{
    if (!p || !p->persistent)
        return MPI_SUCCESS;
    int rc = sync_for(p->cls, p->call);
    return rc == MPI_SUCCESS ? stage_in(&p->b, p->call) : rc;
}

/* After the start: the entry active if started, and back in the table
 * under the handle MPI_Start left, which may be a new one. */
static void start_done(pending_t *p, int mrc, MPI_Request now)
{
    if (!p)
        return;
    if (mrc == MPI_SUCCESS && p->persistent)
        p->active = 1;
    p->req = now; /* the handle MPI_Start left: maybe a new one */
    link_pending(p);
}

PTSC_MPI_API int MPI_Start(MPI_Request *req)
{
    if (!busy())
        return PMPI_Start(req);
    pending_t *p = take(*req);
    int mrc = start_prep(p);
    if (mrc == MPI_SUCCESS)
        mrc = PMPI_Start(req);
    start_done(p, mrc, *req);
    return mrc;
}

PTSC_MPI_API int MPI_Startall(int n, MPI_Request reqs[])
{
    if (!busy() || n <= 0)
        return PMPI_Startall(n, reqs);
    saved_t s;
    CHECKED(save(&s, n, reqs, MPI_STATUSES_IGNORE));
    int rc = MPI_SUCCESS;
    for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
        rc = start_prep(s.p[i]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Startall(n, reqs);
    for (int i = 0; i < n; i++)
        start_done(s.p[i], rc, reqs[i]);
    unsave(&s, MPI_STATUSES_IGNORE);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Point-to-point                                                            */
/* ------------------------------------------------------------------------ */

#define SEND_LIKE(NAME)                                                                                    \
    PTSC_MPI_API int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag,          \
                                MPI_Comm comm)                                                             \
    {                                                                                                      \
        mbuf_t b;                                                                                          \
        CHECKED_ON(comm, (MPI_Request *)NULL,                                                              \
                   prep(&b, buf, count, type, SEND, send_can(comm, dest), "MPI_" #NAME));                  \
        return done1(PMPI_##NAME(wire(&b), wcount(&b, count), wtype(&b, type), dest, tag, comm), &b, comm, \
                     "MPI_" #NAME);                                                                        \
    }
SEND_LIKE(Send)
SEND_LIKE(Ssend)
SEND_LIKE(Bsend)
SEND_LIKE(Rsend)

#define ISEND_LIKE(NAME)                                                                                   \
    PTSC_MPI_API int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag,          \
                                MPI_Comm comm, MPI_Request *req)                                           \
    {                                                                                                      \
        mbuf_t b;                                                                                          \
        CHECKED_ON(comm, req, prep(&b, buf, count, type, SEND, send_can(comm, dest), "MPI_" #NAME));       \
        return track(PMPI_##NAME(wire(&b), wcount(&b, count), wtype(&b, type), dest, tag, comm, req), req, \
                     &b, "MPI_" #NAME);                                                                    \
    }
ISEND_LIKE(Isend)
ISEND_LIKE(Issend)
ISEND_LIKE(Ibsend)
ISEND_LIKE(Irsend)

PTSC_MPI_API int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                          MPI_Status *status)
{
    mbuf_t b;
    CHECKED_ON(comm, (MPI_Request *)NULL, prep(&b, buf, count, type, RECV, MAY_PACK, "MPI_Recv"));
    return done1(PMPI_Recv(wire(&b), wcount(&b, count), wtype(&b, type), source, tag, comm, status), &b, comm,
                 "MPI_Recv");
}

PTSC_MPI_API int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                           MPI_Request *req)
{
    mbuf_t b;
    CHECKED_ON(comm, req, prep(&b, buf, count, type, RECV, MAY_PACK, "MPI_Irecv"));
    return track(PMPI_Irecv(wire(&b), wcount(&b, count), wtype(&b, type), source, tag, comm, req), req, &b,
                 "MPI_Irecv");
}

PTSC_MPI_API int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Status *status)
{
    mbuf_t b;
    CHECKED_ON(MPI_COMM_NULL, (MPI_Request *)NULL, prep(&b, buf, count, type, RECV, MAY_PACK, "MPI_Mrecv"));
    return done1(PMPI_Mrecv(wire(&b), wcount(&b, count), wtype(&b, type), msg, status), &b, MPI_COMM_NULL,
                 "MPI_Mrecv");
}

PTSC_MPI_API int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Request *req)
{
    mbuf_t b;
    CHECKED_ON(MPI_COMM_NULL, req, prep(&b, buf, count, type, RECV, MAY_PACK, "MPI_Imrecv"));
    return track(PMPI_Imrecv(wire(&b), wcount(&b, count), wtype(&b, type), msg, req), req, &b, "MPI_Imrecv");
}

PTSC_MPI_API int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                              void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                              MPI_Status *status)
{
    mbuf_t s, r;
    CHECKED_ON(comm, (MPI_Request *)NULL,
               prep(&s, sbuf, scount, stype, SEND, send_can(comm, dest), "MPI_Sendrecv"));
    int rc = prep(&r, rbuf, rcount, rtype, RECV, MAY_PACK, "MPI_Sendrecv");
    if (rc != MPI_SUCCESS) {
        (void)finish(&s, 0, "MPI_Sendrecv"); /* nothing was sent: the send's copy goes */
        return raise_on(comm, rc);
    }
    return done2(PMPI_Sendrecv(wire(&s), wcount(&s, scount), wtype(&s, stype), dest, stag, wire(&r),
                               wcount(&r, rcount), wtype(&r, rtype), source, rtag, comm, status),
                 &s, &r, comm, "MPI_Sendrecv");
}

PTSC_MPI_API int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag, int source,
                                      int rtag, MPI_Comm comm, MPI_Status *status)
{
    mbuf_t b;
    CHECKED_ON(comm, (MPI_Request *)NULL,
               prep(&b, buf, count, type, BOTH, send_can(comm, dest), "MPI_Sendrecv_replace"));
    return done1(PMPI_Sendrecv_replace(wire(&b), wcount(&b, count), wtype(&b, type), dest, stag, source, rtag,
                                       comm, status),
                 &b, comm, "MPI_Sendrecv_replace");
}

#if MPI_VERSION >= 4
/* MPI-4 calls, where mpi.h declares them (MPICH 4; not Open MPI 4.1). The
 * non-blocking send-receives are staged as the blocking ones, their host
 * copies settled by the completion call. */
PTSC_MPI_API int MPI_Isendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                               void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                               MPI_Comm comm, MPI_Request *req)
{
    mbuf_t s, r;
    CHECKED_ON(comm, req, prep(&s, sbuf, scount, stype, SEND, send_can(comm, dest), "MPI_Isendrecv"));
    int rc = prep(&r, rbuf, rcount, rtype, RECV, MAY_PACK, "MPI_Isendrecv");
    if (rc != MPI_SUCCESS) {
        (void)finish(&s, 1, "MPI_Isendrecv"); /* nothing was sent: the send's copy goes */
        CHECKED_ON(comm, req, rc);
    }
    return track_any(PMPI_Isendrecv(wire(&s), wcount(&s, scount), wtype(&s, stype), dest, stag, wire(&r),
                                    wcount(&r, rcount), wtype(&r, rtype), source, rtag, comm, req),
                     req, &s, &r, 1, "MPI_Isendrecv");
}

PTSC_MPI_API int MPI_Isendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag,
                                       int source, int rtag, MPI_Comm comm, MPI_Request *req)
{
    mbuf_t b;
    CHECKED_ON(comm, req, prep(&b, buf, count, type, BOTH, send_can(comm, dest), "MPI_Isendrecv_replace"));
    return track(PMPI_Isendrecv_replace(wire(&b), wcount(&b, count), wtype(&b, type), dest, stag, source,
                                        rtag, comm, req),
                 req, &b, "MPI_Isendrecv_replace");
}

/* Partitioned communication: the program fills (or reads) partitions
 * after MPI_Start, marked by MPI_Pready (or seen by MPI_Parrived), so
 * neither a sync nor a host copy at the start would cover them. A device,
 * managed or pinned buffer is refused (MPI_ERR_BUFFER, reason logged);
 * host buffers are forwarded (not staged, PTSC_STAGING=always too). */
static int part_prep(const void *buf, int partitions, MPI_Count count, MPI_Datatype type, const char *call)
{
    ptsc_memclass_t cls;
    int rc = lookup(buf, LOOK, &cls, call);
    if (rc != MPI_SUCCESS || !acts_on(buf) || !ptsc__mem_needs_sync(cls))
        return rc;
    (void)partitions, (void)count, (void)type;
    ptsc__err(PTSC_ERR_UNSUPPORTED,
              "partitioned communication on %s memory: its partitions are filled and marked ready after the "
              "start, which libptsc-mpi neither synchronises nor stages; use host memory",
              cls == PTSC_MEM_PINNED    ? "pinned"
              : cls == PTSC_MEM_MANAGED ? "managed"
                                        : "device");
    return fail(call, MPI_ERR_BUFFER);
}

PTSC_MPI_API int MPI_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype type, int dest,
                                int tag, MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
    CHECKED_ON(comm, req, part_prep(buf, partitions, count, type, "MPI_Psend_init"));
    return PMPI_Psend_init(buf, partitions, count, type, dest, tag, comm, info, req);
}

PTSC_MPI_API int MPI_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype type, int source,
                                int tag, MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
    CHECKED_ON(comm, req, part_prep(buf, partitions, count, type, "MPI_Precv_init"));
    return PMPI_Precv_init(buf, partitions, count, type, source, tag, comm, info, req);
}
#endif

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */

static int comm_rank(MPI_Comm comm)
{
    int r = -1;
    PMPI_Comm_rank(comm, &r);
    return r;
}

static int comm_size(MPI_Comm comm)
{
    int n = 0;
    PMPI_Comm_size(comm, &n);
    return n;
}

/* Whether this process is the root of a rooted call: its rank, or
 * MPI_ROOT on an intercommunicator. */
static int is_root(MPI_Comm comm, int root)
{
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    return inter ? root == MPI_ROOT : comm_rank(comm) == root;
}

/* What a collective knows before it prepares its buffers. First the
 * classes of the buffers it uses (use[SEND], use[RECV]: a rooted call's
 * buffer that counts at the root only is not looked at elsewhere), handed
 * on to prep, which counts them. Only where one of them stages is the
 * communicator asked (the host path makes no MPI query): its size n (the
 * blocks of gathers, scatters and v forms; 0 where not asked), and whether
 * it is an intercommunicator (blocks sized by the remote group), whose
 * buffers are synchronised, not staged: NO_STAGE, a device buffer that
 * needs staging is refused there. */
typedef struct {
    int use[2], cls[2]; /* cls: LOOK where not found (prep looks again) */
    int can, n;
    int partial; /* MPI may leave part of the receive buffer unwritten (Exscan's rank 0) */
} coll_t;

static coll_t coll(MPI_Comm comm, const void *sbuf, int suse, const void *rbuf, int ruse)
{
    coll_t c = {{suse, ruse}, {LOOK, LOOK}, MAY_STAGE, 0, 0};
    const void *buf[2] = {sbuf, rbuf};
    int ask = 0;
    for (int i = SEND; i <= RECV; i++) {
        ptsc_memclass_t cls = PTSC_MEM_HOST;
        if (!c.use[i] || !acts_on(buf[i]))
            continue;
        if (ptsc__mem_classify(buf[i], &cls) == PTSC_OK)
            c.cls[i] = (int)cls;
        ask = ask || c.cls[i] == LOOK || stages(cls);
    }
    if (ask) {
        int inter = 0;
        PMPI_Comm_test_inter(comm, &inter);
        c.can = inter ? NO_STAGE : MAY_STAGE;
        c.n = comm_size(comm);
    }
    return c;
}

/* Both buffers of a collective: the send side `scount` elements of `stype`
 * (or the blocks `sv`), the receive side `rcount` of `rtype` (or `rv`),
 * each where c->use says. */
static int prep2_any(mbuf_t *s, mbuf_t *r, const void *sbuf, MPI_Count scount, MPI_Datatype stype,
                     const blocks_t *sv, void *rbuf, MPI_Count rcount, MPI_Datatype rtype, const blocks_t *rv,
                     const coll_t *c, const char *call)
{
    memset(r, 0, sizeof *r);
    r->user = rbuf;
    int rc = prep_any(s, c->use[SEND] ? sbuf : NULL, scount, stype, sv, SEND, c->can, c->cls[SEND], call);
    s->user = (char *)sbuf;
    if (rc != MPI_SUCCESS)
        return rc;
    /* A collective writes all of its receive buffer (counts match), so
     * its copy need not be filled first, unless the buffer is also the
     * input (MPI_IN_PLACE, or NULL: not known here) or MPI may leave some
     * of it (Exscan). */
    int dir = !sbuf || sbuf == MPI_IN_PLACE || c->partial ? RECV : FILL;
    if (c->use[RECV] &&
        (rc = prep_any(r, rbuf, rcount, rtype, rv, dir, c->can, c->cls[RECV], call)) != MPI_SUCCESS)
        finish(s, 1, call);
    r->user = rbuf;
    return rc;
}

static int prep2(mbuf_t *s, mbuf_t *r, const void *sbuf, MPI_Count scount, MPI_Datatype stype, void *rbuf,
                 MPI_Count rcount, MPI_Datatype rtype, const coll_t *c, const char *call)
{
    return prep2_any(s, r, sbuf, scount, stype, NULL, rbuf, rcount, rtype, NULL, c, call);
}

PTSC_MPI_API int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    mbuf_t b;
    coll_t c = coll(comm, NULL, 0, buf, 1);
    /* A receive everywhere (the root's copy comes back unchanged). */
    CHECKED_ON(comm, (MPI_Request *)NULL,
               prep_any(&b, buf, count, type, NULL, RECV, c.can, c.cls[RECV], "MPI_Bcast"));
    return done1(PMPI_Bcast(wire(&b), count, type, root, comm), &b, comm, "MPI_Bcast");
}

PTSC_MPI_API int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                            MPI_Request *req)
{
    mbuf_t b;
    coll_t c = coll(comm, NULL, 0, buf, 1);
    CHECKED_ON(comm, req, prep_any(&b, buf, count, type, NULL, RECV, c.can, c.cls[RECV], "MPI_Ibcast"));
    return track2(PMPI_Ibcast(wire(&b), count, type, root, comm, req), req, &b, NULL, "MPI_Ibcast");
}

PTSC_MPI_API int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                            MPI_Comm comm)
{
    mbuf_t s, r;
    coll_t c = coll(comm, sbuf, 1, rbuf, is_root(comm, root));
    CHECKED_ON(comm, (MPI_Request *)NULL,
               prep2(&s, &r, sbuf, count, type, rbuf, count, type, &c, "MPI_Reduce"));
    return done2(PMPI_Reduce(wire(&s), wire(&r), count, type, op, root, comm), &s, &r, comm, "MPI_Reduce");
}

PTSC_MPI_API int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                             MPI_Comm comm, MPI_Request *req)
{
    mbuf_t s, r;
    coll_t c = coll(comm, sbuf, 1, rbuf, is_root(comm, root));
    CHECKED_ON(comm, req, prep2(&s, &r, sbuf, count, type, rbuf, count, type, &c, "MPI_Ireduce"));
    return track2(PMPI_Ireduce(wire(&s), wire(&r), count, type, op, root, comm, req), req, &s, &r,
                  "MPI_Ireduce");
}

/* Calls shaped (sbuf, rbuf, count, type, op, comm): allreduce and scans.
 * A non-blocking collective's host copies are settled by the completion
 * call, as a non-blocking receive's. */
#define REDUCE_LIKE(NAME, INAME, PARTIAL)                                                                 \
    PTSC_MPI_API int MPI_##NAME(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,    \
                                MPI_Comm comm)                                                            \
    {                                                                                                     \
        mbuf_t s, r;                                                                                      \
        coll_t c = coll(comm, sbuf, 1, rbuf, 1);                                                          \
        c.partial = PARTIAL;                                                                              \
        CHECKED_ON(comm, (MPI_Request *)NULL,                                                             \
                   prep2(&s, &r, sbuf, count, type, rbuf, count, type, &c, "MPI_" #NAME));                \
        return done2(PMPI_##NAME(wire(&s), wire(&r), count, type, op, comm), &s, &r, comm, "MPI_" #NAME); \
    }                                                                                                     \
    PTSC_MPI_API int MPI_##INAME(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,   \
                                 MPI_Comm comm, MPI_Request *req)                                         \
    {                                                                                                     \
        mbuf_t s, r;                                                                                      \
        coll_t c = coll(comm, sbuf, 1, rbuf, 1);                                                          \
        c.partial = PARTIAL;                                                                              \
        CHECKED_ON(comm, req, prep2(&s, &r, sbuf, count, type, rbuf, count, type, &c, "MPI_" #INAME));    \
        return track2(PMPI_##INAME(wire(&s), wire(&r), count, type, op, comm, req), req, &s, &r,          \
                      "MPI_" #INAME);                                                                     \
    }
REDUCE_LIKE(Allreduce, Iallreduce, 0)
REDUCE_LIKE(Scan, Iscan, 0)
REDUCE_LIKE(Exscan, Iexscan, 1)

PTSC_MPI_API int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                                          MPI_Op op, MPI_Comm comm)
{
    mbuf_t s, r;
    coll_t c = coll(comm, sbuf, 1, rbuf, 1);
    MPI_Count n = (MPI_Count)rcount * c.n;
    /* In place, the input is n blocks of rbuf. */
    CHECKED_ON(comm, (MPI_Request *)NULL,
               prep2(&s, &r, sbuf, n, type, rbuf, sbuf == MPI_IN_PLACE ? n : rcount, type, &c,
                     "MPI_Reduce_scatter_block"));
    return done2(PMPI_Reduce_scatter_block(wire(&s), wire(&r), rcount, type, op, comm), &s, &r, comm,
                 "MPI_Reduce_scatter_block");
}

PTSC_MPI_API int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                                           MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
    mbuf_t s, r;
    coll_t c = coll(comm, sbuf, 1, rbuf, 1);
    MPI_Count n = (MPI_Count)rcount * c.n;
    CHECKED_ON(comm, req,
               prep2(&s, &r, sbuf, n, type, rbuf, sbuf == MPI_IN_PLACE ? n : rcount, type, &c,
                     "MPI_Ireduce_scatter_block"));
    return track2(PMPI_Ireduce_scatter_block(wire(&s), wire(&r), rcount, type, op, comm, req), req, &s, &r,
                  "MPI_Ireduce_scatter_block");
}

/* Gathers and scatters: which side holds `size` blocks, and where it
 * matters (rooted calls: only at the root). */
#define GATHER_ROOT(NAME, INAME, SBLOCKS, RBLOCKS, SUSE, RUSE)                                              \
    PTSC_MPI_API int MPI_##NAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,   \
                                MPI_Datatype rtype, int root, MPI_Comm comm)                                \
    {                                                                                                       \
        mbuf_t s, r;                                                                                        \
        int at_root = is_root(comm, root);                                                                  \
        coll_t c = coll(comm, sbuf, SUSE, rbuf, RUSE);                                                      \
        CHECKED_ON(comm, (MPI_Request *)NULL,                                                               \
                   prep2(&s, &r, sbuf, (MPI_Count)scount *(SBLOCKS), stype, rbuf,                           \
                         (MPI_Count)rcount *(RBLOCKS), rtype, &c, "MPI_" #NAME));                           \
        return done2(PMPI_##NAME(wire(&s), scount, stype, wire(&r), rcount, rtype, root, comm), &s, &r,     \
                     comm, "MPI_" #NAME);                                                                   \
    }                                                                                                       \
    PTSC_MPI_API int MPI_##INAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,  \
                                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)             \
    {                                                                                                       \
        mbuf_t s, r;                                                                                        \
        int at_root = is_root(comm, root);                                                                  \
        coll_t c = coll(comm, sbuf, SUSE, rbuf, RUSE);                                                      \
        CHECKED_ON(comm, req,                                                                               \
                   prep2(&s, &r, sbuf, (MPI_Count)scount *(SBLOCKS), stype, rbuf,                           \
                         (MPI_Count)rcount *(RBLOCKS), rtype, &c, "MPI_" #INAME));                          \
        return track2(PMPI_##INAME(wire(&s), scount, stype, wire(&r), rcount, rtype, root, comm, req), req, \
                      &s, &r, "MPI_" #INAME);                                                               \
    }
GATHER_ROOT(Gather, Igather, 1, c.n, 1, at_root)
GATHER_ROOT(Scatter, Iscatter, c.n, 1, at_root, 1)

#define GATHER_ALL(NAME, INAME, SBLOCKS)                                                                   \
    PTSC_MPI_API int MPI_##NAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,  \
                                MPI_Datatype rtype, MPI_Comm comm)                                         \
    {                                                                                                      \
        mbuf_t s, r;                                                                                       \
        coll_t c = coll(comm, sbuf, 1, rbuf, 1);                                                           \
        CHECKED_ON(comm, (MPI_Request *)NULL,                                                              \
                   prep2(&s, &r, sbuf, (MPI_Count)scount *(SBLOCKS), stype, rbuf, (MPI_Count)rcount *c.n,  \
                         rtype, &c, "MPI_" #NAME));                                                        \
        return done2(PMPI_##NAME(wire(&s), scount, stype, wire(&r), rcount, rtype, comm), &s, &r, comm,    \
                     "MPI_" #NAME);                                                                        \
    }                                                                                                      \
    PTSC_MPI_API int MPI_##INAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, \
                                 MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)                      \
    {                                                                                                      \
        mbuf_t s, r;                                                                                       \
        coll_t c = coll(comm, sbuf, 1, rbuf, 1);                                                           \
        CHECKED_ON(comm, req,                                                                              \
                   prep2(&s, &r, sbuf, (MPI_Count)scount *(SBLOCKS), stype, rbuf, (MPI_Count)rcount *c.n,  \
                         rtype, &c, "MPI_" #INAME));                                                       \
        return track2(PMPI_##INAME(wire(&s), scount, stype, wire(&r), rcount, rtype, comm, req), req, &s,  \
                      &r, "MPI_" #INAME);                                                                  \
    }
GATHER_ALL(Allgather, Iallgather, 1)
GATHER_ALL(Alltoall, Ialltoall, c.n)

/* The v and w forms and reduce-scatter, blocking and non-blocking, staged
 * block by block (stage_plan_blocks). `c.n` blocks: one per rank of the
 * communicator (intercommunicators are not staged, coll). USE: the
 * arguments of coll after the communicator. */
#define UNPAREN(...) __VA_ARGS__
#define COLL_PAIR(NAME, INAME, PARAMS, USE, PREP, ARGS)                    \
    PTSC_MPI_API int MPI_##NAME(UNPAREN PARAMS)                            \
    {                                                                      \
        mbuf_t s, r;                                                       \
        const char *call = "MPI_" #NAME;                                   \
        coll_t c = coll(comm, UNPAREN USE);                                \
        CHECKED_ON(comm, (MPI_Request *)NULL, PREP);                       \
        return done2(PMPI_##NAME(UNPAREN ARGS), &s, &r, comm, call);       \
    }                                                                      \
    PTSC_MPI_API int MPI_##INAME(UNPAREN PARAMS, MPI_Request *req)         \
    {                                                                      \
        mbuf_t s, r;                                                       \
        const char *call = "MPI_" #INAME;                                  \
        coll_t c = coll(comm, UNPAREN USE);                                \
        CHECKED_ON(comm, req, PREP);                                       \
        return track2(PMPI_##INAME(UNPAREN ARGS, req), req, &s, &r, call); \
    }

COLL_PAIR(Gatherv, Igatherv,
          (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
           const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm),
          (sbuf, 1, rbuf, is_root(comm, root)),
          prep2_any(&s, &r, sbuf, scount, stype, NULL, rbuf, 0, rtype,
                    &(blocks_t){c.n, rcounts, displs, NULL, rtype}, &c, call),
          (wire(&s), scount, stype, wire(&r), rcounts, displs, rtype, root, comm))

COLL_PAIR(Scatterv, Iscatterv,
          (const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf,
           int rcount, MPI_Datatype rtype, int root, MPI_Comm comm),
          (sbuf, is_root(comm, root), rbuf, 1),
          prep2_any(&s, &r, sbuf, 0, stype, &(blocks_t){c.n, scounts, displs, NULL, stype}, rbuf, rcount,
                    rtype, NULL, &c, call),
          (wire(&s), scounts, displs, stype, wire(&r), rcount, rtype, root, comm))

COLL_PAIR(Allgatherv, Iallgatherv,
          (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
           const int displs[], MPI_Datatype rtype, MPI_Comm comm),
          (sbuf, 1, rbuf, 1),
          prep2_any(&s, &r, sbuf, scount, stype, NULL, rbuf, 0, rtype,
                    &(blocks_t){c.n, rcounts, displs, NULL, rtype}, &c, call),
          (wire(&s), scount, stype, wire(&r), rcounts, displs, rtype, comm))

COLL_PAIR(Alltoallv, Ialltoallv,
          (const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
           const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm),
          (sbuf, 1, rbuf, 1),
          prep2_any(&s, &r, sbuf, 0, stype, &(blocks_t){c.n, scounts, sdispls, NULL, stype}, rbuf, 0, rtype,
                    &(blocks_t){c.n, rcounts, rdispls, NULL, rtype}, &c, call),
          (wire(&s), scounts, sdispls, stype, wire(&r), rcounts, rdispls, rtype, comm))

/* Displacements in bytes, a type per block. */
COLL_PAIR(Alltoallw, Ialltoallw,
          (const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[],
           void *rbuf, const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm),
          (sbuf, 1, rbuf, 1),
          prep2_any(&s, &r, sbuf, 0, MPI_BYTE, &(blocks_t){c.n, scounts, sdispls, stypes, MPI_BYTE}, rbuf, 0,
                    MPI_BYTE, &(blocks_t){c.n, rcounts, rdispls, rtypes, MPI_BYTE}, &c, call),
          (wire(&s), scounts, sdispls, stypes, wire(&r), rcounts, rdispls, rtypes, comm))

/* The input is the sum of the counts (in place: at rbuf), the result this
 * rank's count (its rank asked only where a buffer stages: c.n > 0). */
static MPI_Count sum_counts(const int *c, int n)
{
    MPI_Count t = 0;
    for (int i = 0; c && i < n; i++)
        t += c[i] > 0 ? c[i] : 0;
    return t;
}

COLL_PAIR(Reduce_scatter, Ireduce_scatter,
          (const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm),
          (sbuf, 1, rbuf, 1),
          prep2(&s, &r, sbuf, sum_counts(rcounts, c.n), type, rbuf,
                sbuf == MPI_IN_PLACE ? sum_counts(rcounts, c.n)
                : rcounts && c.n > 0 ? rcounts[comm_rank(comm)]
                                     : 0,
                type, &c, call),
          (wire(&s), wire(&r), rcounts, type, op, comm))

/* ------------------------------------------------------------------------ */
/* One-sided                                                                 */
/* ------------------------------------------------------------------------ */

/* One-sided calls complete at a later synchronisation call (fence, flush,
 * unlock), not at a request this library could follow: their origin
 * buffers are synchronised, not staged; a device buffer that would need
 * staging is refused. Errors go to the window's handler. */
static int raise_win(MPI_Win win, int rc)
{
    if (rc != MPI_SUCCESS && win != MPI_WIN_NULL)
        PMPI_Win_call_errhandler(win, rc);
    return rc;
}

#define WIN_CHECKED(win, req, expr) CHECKED_RAISE(raise_win, win, req, expr)

/* The origin buffer of a one-sided call: the sync, no copy. */
static int rma_prep(const void *buf, int count, MPI_Datatype type, int dir, const char *call)
{
    mbuf_t b;
    return prep(&b, buf, count, type, dir, NO_STAGE, call);
}

/* The window's own memory, when a fence or a post opens it to the other
 * processes: the sync, if it is device, managed or pinned memory (not
 * counted as a buffer argument). */
static int win_sync(MPI_Win win, const char *call)
{
    void *base = NULL;
    int flag = 0;
    ptsc_memclass_t cls = PTSC_MEM_HOST;
    if (!atomic_load_explicit(&ready, memory_order_acquire) || win == MPI_WIN_NULL ||
        PMPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag) != MPI_SUCCESS || !flag || !base)
        return MPI_SUCCESS;
    if (ptsc__mem_classify(base, &cls) != PTSC_OK)
        return fail(call, MPI_ERR_OTHER);
    return sync_for(cls, call);
}

#define RMA_LIKE(NAME, RNAME, CONST, DIR)                                                                    \
    PTSC_MPI_API int MPI_##NAME(CONST void *obuf, int ocount, MPI_Datatype otype, int trank, MPI_Aint tdisp, \
                                int tcount, MPI_Datatype ttype, MPI_Win win)                                 \
    {                                                                                                        \
        WIN_CHECKED(win, (MPI_Request *)NULL, rma_prep(obuf, ocount, otype, DIR, "MPI_" #NAME));             \
        return PMPI_##NAME(obuf, ocount, otype, trank, tdisp, tcount, ttype, win);                           \
    }                                                                                                        \
    PTSC_MPI_API int MPI_##RNAME(CONST void *obuf, int ocount, MPI_Datatype otype, int trank,                \
                                 MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Win win,                \
                                 MPI_Request *req)                                                           \
    {                                                                                                        \
        WIN_CHECKED(win, req, rma_prep(obuf, ocount, otype, DIR, "MPI_" #RNAME));                            \
        return PMPI_##RNAME(obuf, ocount, otype, trank, tdisp, tcount, ttype, win, req);                     \
    }
RMA_LIKE(Put, Rput, const, SEND)
RMA_LIKE(Get, Rget, , RECV)

PTSC_MPI_API int MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int trank, MPI_Aint tdisp,
                                int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win)
{
    WIN_CHECKED(win, (MPI_Request *)NULL, rma_prep(obuf, ocount, otype, SEND, "MPI_Accumulate"));
    return PMPI_Accumulate(obuf, ocount, otype, trank, tdisp, tcount, ttype, op, win);
}

PTSC_MPI_API int MPI_Raccumulate(const void *obuf, int ocount, MPI_Datatype otype, int trank, MPI_Aint tdisp,
                                 int tcount, MPI_Datatype ttype, MPI_Op op, MPI_Win win, MPI_Request *req)
{
    WIN_CHECKED(win, req, rma_prep(obuf, ocount, otype, SEND, "MPI_Raccumulate"));
    return PMPI_Raccumulate(obuf, ocount, otype, trank, tdisp, tcount, ttype, op, win, req);
}

/* An origin buffer and a result buffer. */
static int rma_prep2(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf, int rcount,
                     MPI_Datatype rtype, const char *call)
{
    int rc = rma_prep(obuf, ocount, otype, SEND, call);
    return rc == MPI_SUCCESS ? rma_prep(rbuf, rcount, rtype, RECV, call) : rc;
}

PTSC_MPI_API int MPI_Get_accumulate(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf, int rcount,
                                    MPI_Datatype rtype, int trank, MPI_Aint tdisp, int tcount,
                                    MPI_Datatype ttype, MPI_Op op, MPI_Win win)
{
    WIN_CHECKED(win, (MPI_Request *)NULL,
                rma_prep2(obuf, ocount, otype, rbuf, rcount, rtype, "MPI_Get_accumulate"));
    return PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, trank, tdisp, tcount, ttype, op,
                               win);
}

PTSC_MPI_API int MPI_Rget_accumulate(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf, int rcount,
                                     MPI_Datatype rtype, int trank, MPI_Aint tdisp, int tcount,
                                     MPI_Datatype ttype, MPI_Op op, MPI_Win win, MPI_Request *req)
{
    WIN_CHECKED(win, req, rma_prep2(obuf, ocount, otype, rbuf, rcount, rtype, "MPI_Rget_accumulate"));
    return PMPI_Rget_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, trank, tdisp, tcount, ttype, op,
                                win, req);
}

PTSC_MPI_API int MPI_Fetch_and_op(const void *obuf, void *rbuf, MPI_Datatype type, int trank, MPI_Aint tdisp,
                                  MPI_Op op, MPI_Win win)
{
    WIN_CHECKED(win, (MPI_Request *)NULL, rma_prep2(obuf, 1, type, rbuf, 1, type, "MPI_Fetch_and_op"));
    return PMPI_Fetch_and_op(obuf, rbuf, type, trank, tdisp, op, win);
}

PTSC_MPI_API int MPI_Compare_and_swap(const void *obuf, const void *cbuf, void *rbuf, MPI_Datatype type,
                                      int trank, MPI_Aint tdisp, MPI_Win win)
{
    WIN_CHECKED(win, (MPI_Request *)NULL, rma_prep2(obuf, 1, type, rbuf, 1, type, "MPI_Compare_and_swap"));
    WIN_CHECKED(win, (MPI_Request *)NULL, rma_prep(cbuf, 1, type, SEND, "MPI_Compare_and_swap"));
    return PMPI_Compare_and_swap(obuf, cbuf, rbuf, type, trank, tdisp, win);
}

/* A window on device memory where MPI is not CUDA-aware would be read by
 * MPI on the host: refused. */
PTSC_MPI_API int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                                MPI_Win *win)
{
    mbuf_t b;
    CHECKED_ON(comm, (MPI_Request *)NULL, prep(&b, base, 0, MPI_BYTE, RECV, NO_STAGE, "MPI_Win_create"));
    return PMPI_Win_create(base, size, disp_unit, info, comm, win);
}

PTSC_MPI_API int MPI_Win_fence(int assert, MPI_Win win)
{
    WIN_CHECKED(win, (MPI_Request *)NULL, win_sync(win, "MPI_Win_fence"));
    return PMPI_Win_fence(assert, win);
}

PTSC_MPI_API int MPI_Win_post(MPI_Group group, int assert, MPI_Win win)
{
    WIN_CHECKED(win, (MPI_Request *)NULL, win_sync(win, "MPI_Win_post"));
    return PMPI_Win_post(group, assert, win);
}

/* ------------------------------------------------------------------------ */
/* For the Fortran entry points (interpose_fortran.c)                        */
/* ------------------------------------------------------------------------ */

/* After a Fortran MPI_Init*: set up once, should the MPI's Fortran
 * function have gone through the C MPI_Init* wrapper too. */
void ptsc__ipose_start(void)
{
    if (!atomic_load(&ready))
        setup();
}

/* Point-to-point from Fortran is packed as from C (a receive's copy with
 * the gap under Open MPI, where a longer message would otherwise be
 * written past it): MPI gets ptsc__ipose_fcount and ptsc__ipose_ftype. */
int ptsc__ipose_prep(mbuf_t *b, const void *buf, MPI_Count count, MPI_Datatype type, int recv, MPI_Comm comm,
                     int dest, const char *call)
{
    return prep(b, buf, count, type, recv == 2 ? BOTH : recv ? RECV : SEND, send_can(comm, dest), call);
}

MPI_Fint ptsc__ipose_fcount(const mbuf_t *b, MPI_Fint count) { return (MPI_Fint)wcount(b, (int)count); }

MPI_Fint ptsc__ipose_ftype(const mbuf_t *b, MPI_Fint type)
{
    return b->gap || b->packed ? PMPI_Type_c2f(wtype(b, MPI_DATATYPE_NULL)) : type;
}

int ptsc__ipose_prep_coll(mbuf_t *s, mbuf_t *r, MPI_Comm comm, const void *sbuf, MPI_Count scount,
                          MPI_Datatype stype, int suse, void *rbuf, MPI_Count rcount, MPI_Datatype rtype,
                          int ruse, const char *call)
{
    coll_t c = coll(comm, sbuf, suse, rbuf, ruse);
    c.partial = 1; /* the Fortran calls: receive copies filled first (Exscan too) */
    return prep2(s, r, sbuf, scount, stype, rbuf, rcount, rtype, &c, call);
}

int ptsc__ipose_prep_coll_v(mbuf_t *s, mbuf_t *r, MPI_Comm comm, const void *sbuf, MPI_Count scount,
                            const int *scounts, const int *sdispls, MPI_Datatype stype, int suse, void *rbuf,
                            MPI_Count rcount, const int *rcounts, const int *rdispls, MPI_Datatype rtype,
                            int ruse, const char *call)
{
    coll_t c = coll(comm, sbuf, suse, rbuf, ruse);
    c.partial = 1;
    blocks_t sv = {c.n, scounts, sdispls, NULL, stype}, rv = {c.n, rcounts, rdispls, NULL, rtype};
    return prep2_any(s, r, sbuf, scount, stype, scounts ? &sv : NULL, rbuf, rcount, rtype,
                     rcounts ? &rv : NULL, &c, call);
}

void *ptsc__ipose_wire(const mbuf_t *b) { return wire(b); }

int ptsc__ipose_done(int mrc, mbuf_t *a, mbuf_t *b, MPI_Comm comm, const char *call)
{
    return b ? done2(mrc, a, b, comm, call) : done1(mrc, a, comm, call);
}

int ptsc__ipose_track(int mrc, MPI_Request *req, mbuf_t *b, mbuf_t *b2, int p2p, const char *call)
{
    return track_any(mrc, req, b, b2, p2p, call);
}

int ptsc__ipose_pinit_prep(mbuf_t *b, const void *buf, int count, MPI_Datatype type, int recv, MPI_Comm comm,
                           int dest, int *cls, const char *call)
{
    ptsc_memclass_t c = PTSC_MEM_HOST;
    int rc = pprep(b, buf, count, type, recv ? RECV : SEND, send_can(comm, dest), &c, call);
    *cls = (int)c;
    return rc;
}

int ptsc__ipose_pinit_track(int mrc, MPI_Request *req, mbuf_t *b, int cls, const char *call)
{
    return ptrack(mrc, req, b, (ptsc_memclass_t)cls, call);
}

int ptsc__ipose_raise(MPI_Comm comm, int rc) { return raise_on(comm, rc); }

int ptsc__ipose_busy(void) { return busy(); }

int ptsc__ipose_take(int n, const MPI_Request *reqs, pending_t **out)
{
    take_all(n, reqs, out);
    return MPI_SUCCESS;
}

int ptsc__ipose_conclude(pending_t *p, int done, const MPI_Status *st, MPI_Request now)
{
    return conclude(p, done, st, now);
}

int ptsc__ipose_start_prep(pending_t *p) { return start_prep(p); }

void ptsc__ipose_start_done(pending_t *p, int mrc, MPI_Request now) { start_done(p, mrc, now); }

int ptsc__ipose_free(pending_t *p)
{
    if (p->persistent && !p->active) {
        drop(p);
        return 0;
    }
    p->detached = 1;
    atomic_fetch_add(&n_detached, 1);
    link_pending(p);
    return 1;
}
