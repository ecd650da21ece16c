/*
 * The one internal header: shared state, the module interfaces and the GPU
 * layer contract. Internal non-static functions are named ptsc__<module>_*.
 * A module calls only modules below it: the files form a layered DAG
 * (docs/design.md, Dependencies), which tests/check_layers.py checks.
 *
 * Modules (one file per concern):
 *   status.c   status strings, thread-local error detail, logging
 *   state.c    process state (ptsc__g) and the readiness check
 *   config.c   the PTSC_* variable table, parsing, printing
 *   init.c     process life cycle (ptsc_init / ptsc_finalize), features
 *   context.c  per-thread contexts: attach, detach, accessors, TLS
 *   lanes.c    communicator lanes, (rank, thread) addressing, tags
 *   sync.c     the scope policy: what is synchronised before MPI
 *   memory.c   buffer classes and their per-thread cache
 *   staging.c  per-thread pinned buffers of any size (collectives)
 *   ring.c     the staging ring: bounded chunk-sized pinned slots (engine)
 *   engine.c   the transfer engine: protocol, requests, matching, progress
 *   progress.c the progress agent: drives work a thread left in flight
 *   args.c     argument checks and datatype helpers
 *   p2p.c      point-to-point public calls over the engine
 *   coll_prep.c  lane collectives' checks and staging (both forms)
 *   coll.c     collectives over lanes: the blocking calls
 *   icoll.c    collective schedules: non-blocking collectives (and every
 *              PTSC_COMM=shared lane collective)
 *   watchdog.c hang diagnostics (PTSC_TIMEOUT)
 *   omp.c      OpenMP helpers
 *   world.c    collectives over every thread of every rank
 *   nvtx.c     NVTX ranges for Nsight Systems (PTSC_NVTX)
 *   gpu_cuda.c / gpu_none.c   the GPU layer (one is built)
 */
#ifndef PTSC_INTERNAL_H
#define PTSC_INTERNAL_H

#include "ptsc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define PTSC__DETAIL_LEN 512
#define PTSC__MAX_DEVLIST 64
#define PTSC__MAX_THREADS_LIMIT 4096
/* A size variable set to auto (0 is a valid size). */
#define PTSC__SIZE_AUTO SIZE_MAX
/* PTSC_DIRECT_MIN=auto: device messages below this go staged on a CUDA-aware MPI. */
#define PTSC__DIRECT_MIN_AUTO ((size_t)1 << 20)

/* ------------------------------------------------------------------------ */
/* status.c: errors and logging                                              */
/* ------------------------------------------------------------------------ */

enum { PTSC__LOG_ERROR = 0, PTSC__LOG_WARN, PTSC__LOG_INFO, PTSC__LOG_DEBUG };

/* Record `status` with a printf-style detail for ptsc_last_error; returns status. */
int ptsc__err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* PTSC_ERR_MPI with MPI's own message for `mpi_rc`, prefixed by `what`. */
int ptsc__err_mpi(int mpi_rc, const char *what);
/* Log a line carrying rank and thread, if `level` <= PTSC_LOG. */
void ptsc__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The rank log lines carry: set when init succeeds, -1 when finalize begins
 * (lines name rank -1 and no thread while ptsc is not ready). */
void ptsc__log_set_rank(int rank);
/* Copy another thread's detail into the caller's (used by ptsc_omp_run). */
void ptsc__err_set_detail(const char *detail);
/* ptsc__err for queries (ptsc_rank, the ptsc_ctx_* getters, ...): the detail
 * is left alone while it holds an unread failure of an operation. */
int ptsc__err_query(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empty the caller's detail; every operation starts with it. */
void ptsc__err_clear(void);

/* ------------------------------------------------------------------------ */
/* config.c: the PTSC_* table                                                */
/* ------------------------------------------------------------------------ */

enum { PTSC__CHECK_OFF = 0, PTSC__CHECK_WARN, PTSC__CHECK_ERROR };
enum { PTSC__COMM_DUP = 0, PTSC__COMM_SHARED };
enum { PTSC__MAP_RANK = 0, PTSC__MAP_THREAD, PTSC__MAP_LIST };
enum { PTSC__TRI_AUTO = 0, PTSC__TRI_YES, PTSC__TRI_NO };
enum { PTSC__STAGING_AUTO = 0, PTSC__STAGING_ALWAYS, PTSC__STAGING_NEVER };
/* PTSC_MEM_CACHE (memory.c): what the per-thread class cache may keep. */
enum { PTSC__MEMCACHE_SAFE = 0, PTSC__MEMCACHE_HOST, PTSC__MEMCACHE_OFF };
/* PTSC_PROGRESS (progress.c): who drives work a thread left in flight. */
enum { PTSC__PROGRESS_THREAD = 0, PTSC__PROGRESS_CALLER };

typedef struct {
    int sync_scope;  /* ptsc_scope_t */
    int sync_check;  /* PTSC__CHECK_* */
    int stream;      /* ptsc_stream_kind_t */
    int comm;        /* PTSC__COMM_* */
    int max_threads; /* 0: auto (ptsc__config_slots) */
    int device_map;  /* PTSC__MAP_* */
    int ndevlist;    /* entries of devlist when device_map is a list */
    int devlist[PTSC__MAX_DEVLIST];
    int cuda_aware; /* PTSC__TRI_* */
    int staging;    /* PTSC__STAGING_* */
    size_t staging_chunk;
    int staging_depth;   /* slots per staging ring */
    size_t direct_min;   /* PTSC__SIZE_AUTO: auto */
    size_t enqueue_pool; /* PTSC_ENQUEUE_POOL: bytes of a chunk of enqueue.c's pool */
    int progress;        /* PTSC__PROGRESS_* */
    int mem_cache;       /* PTSC__MEMCACHE_* */
    int log;             /* PTSC__LOG_* */
    int stats;
    int print_config;
    int timeout;                 /* PTSC_TIMEOUT seconds; 0: off */
    int nvtx;                    /* PTSC_NVTX: NVTX ranges (nvtx.c) */
    unsigned long long from_env; /* bit i: row i of the table was set in the environment */
} ptsc__config_t;

/* Parse the environment into `cfg`. PTSC_ERR_CONFIG names the variable and what it accepts. */
int ptsc__config_load(ptsc__config_t *cfg);
/* Warn about PTSC_* variables that are not in the table, suggesting the closest name. */
void ptsc__config_warn_unknown(void);
/* Human-readable table of every variable: value, source, doc line. */
void ptsc__config_print(const ptsc__config_t *cfg, FILE *out);
/* docs/ENV.md, generated from the table. */
void ptsc__config_markdown(FILE *out);
/* Rows of the table: count, and row i's name, default, accepted values
 * (written to buf) and doc line; NULL for i out of range. */
int ptsc__config_count(void);
const char *ptsc__config_name(int i);
const char *ptsc__config_default(int i);
const char *ptsc__config_accepts(int i, char *buf, size_t n);
const char *ptsc__config_doc(int i);
/* Log level in effect (read before init too, for early messages). */
extern int ptsc__log_level;
/* Thread slots per rank. PTSC_MAX_THREADS when set (max_threads > 0); auto
 * is the largest of PTSC__SLOTS_FLOOR, omp_get_max_threads(), the product
 * of the OMP_NUM_THREADS list and OMP_THREAD_LIMIT (0: unset) capped at
 * PTSC__SLOTS_LIMIT_CAP, never above PTSC__MAX_THREADS_LIMIT. `source`
 * (may be NULL) gets the input that decided, `why` (may be NULL) a line
 * saying so. ptsc__config_slots_now reads the inputs of this process. */
#define PTSC__SLOTS_FLOOR 16
#define PTSC__SLOTS_LIMIT_CAP 256
enum {
    PTSC__SLOTS_SET = 0,
    PTSC__SLOTS_BY_FLOOR,
    PTSC__SLOTS_BY_OMP_MAX,
    PTSC__SLOTS_BY_OMP_NUM,
    PTSC__SLOTS_BY_OMP_LIMIT
};
int ptsc__config_slots(int max_threads, int omp_max, const char *omp_num_threads, int thread_limit,
                       int *source, char *why, size_t n);
int ptsc__config_slots_now(const ptsc__config_t *cfg, int *source, char *why, size_t n);

/* ------------------------------------------------------------------------ */
/* state.c: process state                                                    */
/* ------------------------------------------------------------------------ */

/* NONE -> INIT -> READY -> FINALIZING -> DONE; a failed init goes back to NONE.
 * INIT and FINALIZING are entered under ptsc__g.lock (init.c). */
enum {
    PTSC__STATE_NONE = 0,
    PTSC__STATE_READY = 1,
    PTSC__STATE_DONE = 2,
    PTSC__STATE_INIT = 3,      /* one ptsc_init runs; others wait on ptsc__g.cond */
    PTSC__STATE_FINALIZING = 4 /* ptsc_finalize runs: attach, detach and thread exit back off */
};

typedef struct ptsc__stagebuf ptsc__stagebuf_t;

/* Framed messages start with this header (engine.c). */
#define PTSC__HDR_BYTES 16

/* A staging ring slot (ring.c): one chunk plus a header of pinned memory. */
typedef struct {
    char *host;  /* NULL until first used */
    void *event; /* recorded after the copies queued on the slot */
    int busy;
    int ran;      /* the event was seen complete since the last copy (no query needed) */
    int unrec;    /* a copy out of the slot is queued with no event after it yet (ring.c) */
    pthread_t by; /* the thread that queued the last copy (its stream, PTSC_STREAM=per-thread) */
} ptsc__slot_t;

typedef struct {
    ptsc__slot_t *slots;
    int n;
} ptsc__ring_t;

enum { PTSC__RING_SEND = 0, PTSC__RING_RECV = 1 };

struct ptsc__stash; /* probed messages not yet received (engine.c) */

struct ptsc_ctx {
    int index;       /* thread slot, also the lane where this thread receives */
    int device;      /* CUDA device, -1 without a GPU */
    int stream_kind; /* ptsc_stream_kind_t */
    void *stream;    /* cudaStream_t, NULL without a GPU */
    int scope;       /* ptsc_scope_t as set */
    int lazy;        /* attached by ptsc_self: unknown to the auto rule */
    pthread_t owner;
    ptsc_stats_t stats;
    /* Each module's part, released by that module (context.c calls them in
     * turn: ptsc__engine_release, ptsc__stage_destroy, ptsc__sync_ctx_release). */
    struct {
        ptsc__stagebuf_t *free;    /* idle pinned buffers */
        ptsc__stagebuf_t *pending; /* released, waiting for their copy to finish */
    } pool;                        /* staging.c */
    struct {
        void *event; /* thread-scope sync and race check; NULL until first used */
    } sync;          /* sync.c */
    /* The transfer engine (engine.c): requests in flight, in the order they
     * started, and the number the program has not completed yet. */
    struct {
        struct ptsc_request *req_free; /* recycled request objects */
        struct ptsc_request *active, *active_tail;
        int outstanding;
        uint64_t idle_since;       /* ptsc__engine_idle: when the current idle stretch began (0: busy) */
        unsigned next_id;          /* ids of framed messages this thread sends */
        struct ptsc__stash *stash; /* probed, not yet received */
        void *qstream; /* where copies are queued now: stream, or agent.stream while the agent drives */
        unsigned long queued; /* copies queued on qstream (ring.c, engine.c) */
    } eng;
    ptsc__ring_t ring[2]; /* ring.c: PTSC__RING_SEND, PTSC__RING_RECV; released by the engine */
    /* The progress agent's hand-over (engine.c, progress.c). This and the
     * engine's part are touched only under the index's engine lock while
     * PTSC_PROGRESS=thread. */
    struct {
        void *stream;     /* PTSC_STREAM=per-thread: the agent's own stream for this context (owned) */
        void *hand_ev;    /* recorded on stream when work is handed off; agent.stream waits for it */
        void *back_ev;    /* recorded on agent.stream; stream waits for it when the owner comes back */
        int hand_pending; /* hand_ev recorded, agent.stream has not waited for it yet */
        int hand_new;     /* a request started since hand_ev was last recorded */
        int queued;       /* the agent queued copies on agent.stream that stream has not waited for */
        int driving;      /* the agent drives now (icoll.c leaves collective results to the owner) */
        int held;         /* the owner's own: it took its index's lock at its engine entry (progress.c) */
        unsigned long long staged; /* staged bytes counted by the agent, added to stats by the owner */
    } agent;
};

/* Count staged bytes: the agent must not write the counters the owner reads
 * and writes outside the engine lock (collectives), so it counts aside. */
static inline void ptsc__count_staged(ptsc_ctx_t *ctx, size_t n)
{
    if (ctx->agent.driving)
        ctx->agent.staged += n;
    else
        ctx->stats.staged_bytes += n;
}

typedef struct {
    atomic_int state; /* PTSC__STATE_* */
    ptsc__config_t cfg;
    int rank, nranks, nthreads;
    int local_rank, local_size;
    int own_mpi;     /* ptsc_init called MPI_Init_thread */
    MPI_Comm *lanes; /* nthreads lanes (dup) or 1 (shared) */
    int nlanes;
    int tag_max;
    int ndevices;         /* usable CUDA devices; 0: host-only */
    int cuda_aware;       /* device pointers go to MPI directly */
    int staging;          /* device buffers are staged through pinned memory */
    int framed;           /* messages above a chunk may travel framed (engine.c); all ranks agree */
    int stage_host;       /* no device, PTSC_STAGING=always: host buffers exercise the ring */
    size_t direct_min;    /* CUDA-aware: device messages below this are staged */
    pthread_mutex_t lock; /* guards slots[], retired[], transit, and the INIT / FINALIZING transitions */
    pthread_cond_t cond;  /* signalled when transit drops to 0 and when an init ends */
    int transit;          /* contexts being attached or released by their own thread (context.c) */
    ptsc_ctx_t **slots;
    atomic_int nheld;      /* slots[] entries that are not NULL (context.c); read without the lock */
    ptsc_stats_t *retired; /* counters of detached contexts, per index */
    /* Probed messages a released context left, per index: the next holder
     * of the index takes them over, finalize drains the rest (engine.c).
     * Used only by the index's holder or by the thread that releases it. */
    struct ptsc__stash **stash_left;
    pthread_key_t key;
    atomic_ullong mem_epoch; /* bumped by ptsc_mem_forget, init and tracked CUDA memory calls; never wraps */
    int mem_tracked;         /* CUDA's memory calls bump mem_epoch (memtrack.c); set by ptsc__gpu_init */
    atomic_ulong devmask;    /* bit d: some context of this rank was bound to device d (< 64) */
} ptsc__global_t;

extern ptsc__global_t ptsc__g;

/* Thread-local state (status.c), reached only through ptsc__tls(). */
typedef struct {
    ptsc_ctx_t *ctx;
    char detail[PTSC__DETAIL_LEN];
    int unread; /* detail holds a failure of an operation that ptsc_last_error() has not returned */
} ptsc__tls_t;
ptsc__tls_t *ptsc__tls(void);

/* PTSC_OK when initialised, else PTSC_ERR_NOT_INITIALIZED / PTSC_ERR_FINALIZED with detail.
 * Operations start with it: it clears the caller's detail first. */
int ptsc__check_ready(const char *call);
/* The same for queries: the detail is neither cleared nor replaced while unread. */
int ptsc__check_ready_query(const char *call);

/* ------------------------------------------------------------------------ */
/* context.c                                                                 */
/* ------------------------------------------------------------------------ */

/* Resolve `ctx` for a call: NULL means the caller's (lazily attached); a
 * context of another thread is PTSC_ERR_WRONG_THREAD. Checks init too. */
int ptsc__ctx_resolve(ptsc_ctx_t **ctx, const char *call);
/* Called by init / finalize. */
int ptsc__ctx_setup(void);
void ptsc__ctx_teardown(void);
/* Sum of every thread's counters, live and retired, per index (stats print). */
void ptsc__ctx_print_stats(FILE *out);

/* ------------------------------------------------------------------------ */
/* lanes.c                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    MPI_Comm comm;
    int rank; /* MPI source/destination */
    int tag;  /* encoded MPI tag */
} ptsc__addr_t;

/* MPI_TAG_UB of MPI_COMM_WORLD (32767, the standard's minimum, if unset). */
long long ptsc__lanes_tag_ub(void);
int ptsc__lanes_create(MPI_Comm world);
void ptsc__lanes_free(void);
/* Where a message from thread `me` to (rank, thread) with `tag` goes. */
int ptsc__lanes_send_addr(int me, int rank, int thread, int tag, ptsc__addr_t *a);
/* Where thread `me` receives a message from (rank, thread) with `tag`. */
int ptsc__lanes_recv_addr(int me, int rank, int thread, int tag, ptsc__addr_t *a);
/* Kinds of message parts (see lanes.c): a message's first part, and the
 * continuation pieces of a framed message, addressed by the message's id. */
enum { PTSC__KIND_FIRST = 0, PTSC__KIND_CONT = 1 };
/* Where the continuation pieces of framed message `id` from thread `src` to
 * thread `dst` travel; `peer` is the rank on the other side. */
void ptsc__lanes_cont_addr(int src, int dst, int peer, unsigned id, ptsc__addr_t *a);
/* Source thread and tag of a received first part, from its MPI tag. */
void ptsc__lanes_decode(int mpi_tag, int *src_thread, int *tag);
/* The communicator a thread's collectives use (its lane). */
MPI_Comm ptsc__lanes_coll_comm(int me);
/* PTSC_COMM=shared: where thread `me`'s collective messages to or from
 * `rank` go (a tag space apart from point-to-point). */
void ptsc__lanes_coll_addr(int me, int rank, int tag, ptsc__addr_t *a);
/* MPI_Query / MPIX_Query_cuda_support; -1 when the MPI cannot tell. */
int ptsc__mpi_cuda_support(void);

/* ------------------------------------------------------------------------ */
/* world.c: collectives over every thread of every rank                      */
/* ------------------------------------------------------------------------ */

/* Its own communicator (a dup of `world`) and round state; init / finalize.
 * Teardown is safe after a failed or no setup. */
int ptsc__world_setup(MPI_Comm world);
void ptsc__world_teardown(void);

/* What a buffer is for, in the one rule that decides whether it is staged
 * through pinned host memory (ptsc__mem_staged); the caller's staging
 * memory follows from it: the ring, the pool or a host copy. */
typedef enum {
    PTSC__FOR_MESSAGE,   /* a ptsc message (engine.c): the ring */
    PTSC__FOR_MPI,       /* a collective's buffer MPI reads or writes (coll_prep.c, world.c): the pool */
    PTSC__FOR_HOST,      /* a buffer the host itself combines (host-side reductions): the pool */
    PTSC__FOR_PLAIN_MPI, /* a plain MPI call's buffer (interpose.c): a host copy */
} ptsc__use_t;

/* ------------------------------------------------------------------------ */
/* sync.c: the scope policy                                                  */
/* ------------------------------------------------------------------------ */

/* The scope a context's calls use: `scope` with DEFAULT and AUTO resolved. */
int ptsc__sync_resolve(const ptsc_ctx_t *ctx, int scope);
/* Synchronise at `scope` (resolved here), counting it. */
int ptsc__sync_scope(ptsc_ctx_t *ctx, int scope);
/* Make a buffer of class `cls` safe for MPI per the context's scope.
 * `staged`: the buffer is copied on the context's stream before MPI sees
 * it, which already orders it after the thread's own work and earlier
 * legacy-stream work, so the thread scope needs no sync. Runs the race
 * check on direct hand-overs that no sync ordered (scope none).
 * `call` names the API call for messages. */
int ptsc__sync_buffer(ptsc_ctx_t *ctx, ptsc_memclass_t cls, int staged, const char *call);
/* ptsc__sync_buffer for the engine: where the sync is the thread scope's
 * event, it is recorded on `ev` and *deferred = 1: the buffer may reach MPI
 * once `ev` completed. Otherwise the sync is performed here. */
int ptsc__sync_buffer_deferred(ptsc_ctx_t *ctx, ptsc_memclass_t cls, int staged, void *ev, int *deferred,
                               const char *call);
/* Everything a buffer needs before MPI touches it: classify `buf`, decide
 * whether it is staged (*staged), and sync per scope. NULL buffers are host. */
int ptsc__sync_prepare(ptsc_ctx_t *ctx, const void *buf, ptsc__use_t use, int *staged, const char *call);
/* Free what the sync module keeps in a context (its event). Called when the
 * context is released, with the context's device current. */
void ptsc__sync_ctx_release(ptsc_ctx_t *ctx);
/* The configured scope for a thread without a context (interpose.c);
 * `stream`: the stream the program named for the thread, or NULL. */
int ptsc__sync_unbound(void *stream, int *did);
/* The race check for such a thread whose scope is none: *busy = 1 while
 * work on its stream (as above) runs; 0 under any other scope. */
int ptsc__sync_unbound_busy(void *stream, int *busy);
/* "auto", "none", "thread", "global", "device". */
const char *ptsc__scope_name(int scope);

/* ------------------------------------------------------------------------ */
/* memory.c: buffer classes                                                  */
/* ------------------------------------------------------------------------ */

/* Classify with the per-thread cache; always PTSC_MEM_HOST without a GPU. */
int ptsc__mem_classify(const void *p, ptsc_memclass_t *cls);

/* The class cache as pure functions over one thread's tables (memory.c
 * explains the rule; unit-tested on machines without a GPU). */
#define PTSC__MEMCACHE_BITS 8
#define PTSC__MEMCACHE_SIZE (1u << PTSC__MEMCACHE_BITS)
#define PTSC__MEMCACHE_BLOCK_SHIFT 12 /* 4 KiB, the smallest host page */
typedef struct {
    uintptr_t key;  /* block number or exact address; with epoch 0 the entry is empty */
    uint64_t epoch; /* ptsc__g.mem_epoch when stored (init bumps it: >= 1) */
    int cls;        /* ptsc_memclass_t */
} ptsc__memcache_entry_t;
typedef struct {
    ptsc__memcache_entry_t block[PTSC__MEMCACHE_SIZE]; /* DEVICE, MANAGED, PINNED: per 4 KiB block */
    ptsc__memcache_entry_t exact[PTSC__MEMCACHE_SIZE]; /* HOST (PTSC_MEM_CACHE=host): per address */
} ptsc__memcache_t;
/* How an answer of class `c` may be kept under PTSC_MEM_CACHE `mode`, with
 * staging on or off: not at all, for its 4 KiB block, or for its exact address. */
enum { PTSC__MEMKEEP_NONE = 0, PTSC__MEMKEEP_BLOCK, PTSC__MEMKEEP_EXACT };
/* `tracked`: every CUDA memory call bumps the epoch (ptsc__g.mem_tracked). */
int ptsc__memcache_rule(int mode, int tracked, int staging, ptsc_memclass_t c);
/* 1 when pageable HOST answers are kept (per exact address): mode host, or safe and tracked. */
int ptsc__memcache_keeps_host(int mode, int tracked);
/* 1 and *cls when `p` has an entry of `epoch`; block entries win over exact ones. */
int ptsc__memcache_lookup(const ptsc__memcache_t *mc, const void *p, uint64_t epoch, int mode, int tracked,
                          ptsc_memclass_t *cls);
/* Keep class `cls` of `p` as `rule` (PTSC__MEMKEEP_*) says. */
void ptsc__memcache_store(ptsc__memcache_t *mc, const void *p, uint64_t epoch, int rule, ptsc_memclass_t cls);
/* 1 when a buffer of this class must be synchronised before MPI. */
static inline int ptsc__mem_needs_sync(ptsc_memclass_t c) { return c != PTSC_MEM_HOST; }
/* 1 when a buffer of class `c`, `bytes` long (contiguous or not), used as
 * `use` by the thread of index `index`, travels through pinned host memory;
 * 0 when MPI or the host reads it where it is. The only place that chooses
 * a path. */
int ptsc__mem_staged(ptsc_memclass_t c, ptsc__use_t use, size_t bytes, int contig, int index);

/* ------------------------------------------------------------------------ */
/* staging.c: per-thread pinned buffers                                      */
/* ------------------------------------------------------------------------ */

struct ptsc__stagebuf {
    void *host;  /* pinned host memory */
    size_t size; /* capacity in bytes */
    void *event; /* recorded on release; the buffer is idle once it completes */
    ptsc__stagebuf_t *next;
};

/* A pinned buffer of at least `bytes`, owned by the context until released. */
int ptsc__stage_acquire(ptsc_ctx_t *ctx, size_t bytes, ptsc__stagebuf_t **sb);
/* Give a buffer back. With `after_stream`, work queued on the context's
 * stream may still read or write it: it is reused only after that work. */
int ptsc__stage_release(ptsc_ctx_t *ctx, ptsc__stagebuf_t *sb, int after_stream);
/* Wait for pending buffers and free the whole pool (detach). */
void ptsc__stage_destroy(ptsc_ctx_t *ctx);

/* ------------------------------------------------------------------------ */
/* ring.c: bounded staging slots for the engine                              */
/* ------------------------------------------------------------------------ */

/* An idle slot for direction `dir`, or *slot = NULL when all are busy. A
 * receive may get a slot of the send ring; a send whose first write to the
 * slot is a copy on the context's stream (`ordered`) one whose copies are
 * still queued there. */
int ptsc__ring_get(ptsc_ctx_t *ctx, int dir, int ordered, ptsc__slot_t **slot);
/* Give a slot back: at once (no copy is queued on it), or with a copy still
 * queued (the slot is reused only after it ran, or by an `ordered` send,
 * whose copy the stream orders after it). */
void ptsc__ring_put(ptsc__slot_t *slot);
void ptsc__ring_put_after(ptsc__slot_t *slot);
/* Free the slots whose queued copies completed (an event query each). */
void ptsc__ring_reclaim(ptsc_ctx_t *ctx);
/* Record the events that lazy copies on this thread's stream left out
 * (before the progress agent, on another stream, may look at the slots). */
void ptsc__ring_settle(ptsc_ctx_t *ctx);
/* Copy on the context's stream (memcpy without a device), then: record the
 * slot's event (RECORD); record it only once someone asks whether the copy
 * ran (LAZY: ring.c says when that pays); or wait for the stream (SYNC: a
 * blocking call with nothing else in flight, engine.c). */
enum { PTSC__COPY_RECORD = 0, PTSC__COPY_LAZY, PTSC__COPY_SYNC };
int ptsc__ring_copy(ptsc_ctx_t *ctx, ptsc__slot_t *slot, void *dst, const void *src, size_t n, int how);
/* Whether the copies queued on the slot ran: an event query, unless one
 * already saw them complete; ptsc__ring_wait blocks until they did. */
int ptsc__ring_done(ptsc_ctx_t *ctx, ptsc__slot_t *slot, int *done);
int ptsc__ring_wait(ptsc_ctx_t *ctx, ptsc__slot_t *slot);
/* Free both rings (their copies are waited for). */
void ptsc__ring_destroy(ptsc_ctx_t *ctx);

/* ------------------------------------------------------------------------ */
/* progress.c: the progress agent                                            */
/* ------------------------------------------------------------------------ */

/* The engine's pass for the agent, run under the index's lock: drives ctx;
 * returns 1 while work remains that only ptsc can move, and sets in *moved
 * PTSC__DRIVE_MOVED when anything moved, PTSC__DRIVE_IN_MPI when part of
 * the remaining work is in MPI's hands (only MPI calls move it). */
enum { PTSC__DRIVE_MOVED = 1, PTSC__DRIVE_IN_MPI = 2 };
typedef int (*ptsc__drive_fn)(ptsc_ctx_t *ctx, int *moved);
/* Init: the per-index locks and, with agent = 1, the agent thread. */
int ptsc__progress_setup(int nthreads, int agent, ptsc__drive_fn drive);
/* Finalize: stop the agent (before contexts are released), then free the
 * locks (after). */
void ptsc__progress_stop(void);
void ptsc__progress_teardown(void);
int ptsc__progress_agent_on(void);
unsigned long long ptsc__progress_sweeps(void);
/* The owner's engine section: enter takes the index's lock only while the
 * index's want is raised (the agent may be in the context); leave raises
 * (want = 1) or lowers the index's want and drops the lock if taken. */
void ptsc__progress_enter(ptsc_ctx_t *ctx);
void ptsc__progress_leave(ptsc_ctx_t *ctx, int want);
/* Before a context is freed: the agent lets go of it. */
void ptsc__progress_forget(ptsc_ctx_t *ctx);

/* ------------------------------------------------------------------------ */
/* engine.c: the transfer engine                                             */
/* ------------------------------------------------------------------------ */

/* Init: the progress agent with the engine's pass (PTSC_PROGRESS). Every
 * call below runs in the context's engine section (progress.c). */
int ptsc__engine_setup(void);
/* Whether ptsc__engine_start would take this buffer (its refusals, e.g. a
 * non-contiguous type that cannot be staged), without starting anything. */
int ptsc__engine_admit(const ptsc_ctx_t *ctx, int is_recv, const void *buf, MPI_Datatype type, size_t bytes,
                       const char *call);
/* Start a send or receive; `rank` may be PTSC_ANY_RANK for receives. */
int ptsc__engine_start(ptsc_ctx_t *ctx, int is_recv, void *buf, int count, MPI_Datatype type, size_t bytes,
                       int rank, int thread, int tag, const char *call, struct ptsc_request **out);
/* Complete (blocking) or test a request; fills info for receives (may be NULL). */
int ptsc__engine_wait(struct ptsc_request *r, ptsc_info_t *info);
int ptsc__engine_test(struct ptsc_request *r, int *done, ptsc_info_t *info);
/* One progress pass over the context's requests in flight; 1 when any moved. */
int ptsc__engine_progress(ptsc_ctx_t *ctx);
/* Every waiting loop of a thread calls this once per poll, with whether
 * the poll moved anything: it spins for the first PTSC__SPIN_NS of an idle
 * stretch, yields the core after that, and sleeps between polls (outside
 * its engine section, so the agent drives meanwhile) once the stretch is
 * longer than PTSC__NAP_AFTER_NS (engine.c). */
#define PTSC__SPIN_NS 50000u
#define PTSC__NAP_AFTER_NS 1000000u
void ptsc__engine_idle(ptsc_ctx_t *ctx, int moved);
/* Whether a request is complete (no progress made). */
int ptsc__engine_done(const struct ptsc_request *r);
/* Probe for a message; blocking unless `flag` is non-NULL. */
int ptsc__engine_probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info);
/* Blocking send / receive without a request object where the path allows. */
int ptsc__engine_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                      int thread, int tag, const char *call);
int ptsc__engine_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, size_t bytes, int rank,
                      int thread, int tag, ptsc_info_t *info, const char *call);
/* Cancel a receive just started (no message matched yet) or complete it. */
int ptsc__engine_cancel(struct ptsc_request *r);
/* ptsc_cancel: a receive no message matched completes with
 * PTSC_ERR_CANCELLED; anything else is left to complete normally. */
void ptsc__engine_cancel_mark(struct ptsc_request *r);
/* ptsc_request_free: a complete request is completed (its status returned);
 * a send in flight completes in the background; a receive in flight is
 * refused (PTSC_ERR_PENDING, *kept = 1: the request stays valid). */
int ptsc__engine_free(struct ptsc_request *r, int *kept, const char *call);
ptsc_ctx_t *ptsc__request_ctx(const struct ptsc_request *r);
/* A request object back on its thread's free list: a handle to it is a
 * stale copy of one that a wait, test or free completed (a recycled object
 * is not told apart from the new request it became). */
int ptsc__request_stale(const struct ptsc_request *r);
/* Mark (on = 1) or unmark a request while an array call checks its array;
 * returns the mark it had (1: the request is in the array twice). */
int ptsc__request_mark(struct ptsc_request *r, int on);
/* Thread exit or finalize: complete what can complete, cancel receives no
 * message matched, free requests and stash. Returns how many were pending. */
int ptsc__engine_drain(ptsc_ctx_t *ctx);
/* Requests the program started and has not completed. */
static inline int ptsc__engine_pending(const ptsc_ctx_t *ctx) { return ctx->eng.outstanding; }
/* Free the context's engine state (requests must be drained); its probed
 * messages no receive took stay with its index (ptsc__g.stash_left). */
void ptsc__engine_release(ptsc_ctx_t *ctx);
/* A new holder of an index takes over what the last one probed. */
void ptsc__engine_adopt(ptsc_ctx_t *ctx);
/* Finalize: receive and drop the probed messages no holder took, whole
 * (a framed message's pieces too), and free ptsc__g.stash_left. */
void ptsc__engine_stash_drain(void);

/* A request that is not a point-to-point message: a lane collective
 * (icoll.c) brings its own operations on its state `op`, so the engine
 * drives it without knowing what it is (the messages are the engine's own
 * and have none). begin: start MPI's part (once, before the first
 * progress). progress: advance (*moved = 1 when anything changed),
 * returning 1 once complete with the status in *rc (results in place, MPI
 * holds nothing of it). ready: only the owner's finish is left (the agent
 * completed it in MPI). free: release `op`, complete or not. */
struct ptsc__req_ops {
    int (*begin)(void *op);
    int (*progress)(void *op, int *moved, int *rc);
    int (*ready)(const void *op);
    void (*free)(void *op);
};
/* Start such a request: ops->begin runs first; `op` then advances in every
 * progress pass of the thread. Point-to-point ordering skips it; waits on
 * it count as collective waits (PTSC_TIMEOUT). `root` (-1: none) and
 * `bytes` are for diagnostics. On failure `op` still belongs to the caller. */
int ptsc__engine_start_ops(ptsc_ctx_t *ctx, const struct ptsc__req_ops *ops, void *op, int root, size_t bytes,
                           const char *call, struct ptsc_request **out);

/* ------------------------------------------------------------------------ */
/* args.c: argument checks and datatype helpers                              */
/* ------------------------------------------------------------------------ */

/* Check a (buf, count, type) argument triple; *bytes = count * type size
 * (MPI_Type_size_x: types above 2 GiB are fine; the product must fit). */
int ptsc__check_buf(const void *buf, int count, MPI_Datatype type, const char *call, size_t *bytes);
/* The same for one side of a call with two buffers: `side` ("send",
 * "receive") prefixes the argument the detail names. */
int ptsc__check_buf_side(const void *buf, int count, MPI_Datatype type, const char *call, const char *side,
                         size_t *bytes);
/* Point-to-point: NULL is MPI_BOTTOM, valid with a datatype of absolute
 * addresses; `side` may be NULL. */
int ptsc__check_buf_bottom(const void *buf, int count, MPI_Datatype type, const char *call, const char *side,
                           size_t *bytes);
/* 1 when `type` is laid out as its bytes in order (no holes, lower bound 0). */
int ptsc__type_is_contiguous(MPI_Datatype type);
/* PTSC_ERR_UNSUPPORTED unless `type` has no holes (byte copies and pieces need that). */
int ptsc__check_contiguous(MPI_Datatype type, const char *call);
/* Where `count` elements of a datatype lie: bytes [lo, lo + span) relative
 * to the buffer pointer, from the true lower bound and true extent. dense:
 * no holes, so the span is exactly the data. */
typedef struct {
    MPI_Count size, extent, lo, span;
    int dense;
} ptsc__layout_t;
/* The layout of `count` elements of `t`; PTSC_ERR_ARG for a type
 * that is not committed, PTSC_ERR_UNSUPPORTED beyond the address space. */
int ptsc__layout_of(MPI_Datatype t, int count, ptsc__layout_t *L, const char *call);

/* ------------------------------------------------------------------------ */
/* flatten.c: a datatype's type map as runs of bytes (libptsc-mpi's staging)  */
/* ------------------------------------------------------------------------ */

/* `n` runs of `len` bytes, the k-th at byte `off + k * stride` of the
 * buffer (n == 1: one run, stride == len). */
typedef struct {
    MPI_Aint off, len, stride, n;
} ptsc__run_t;
/* Groups of runs in type-map order, adjacent ones merged, the whole list
 * repeated `reps` times `step` bytes apart where reps > 1 (an array of
 * elements of several groups each); `bytes`: the sum of all the runs'
 * lengths (the data). Zeroed: empty. */
typedef struct {
    ptsc__run_t *r;
    size_t n, cap;
    MPI_Count bytes;
    MPI_Aint reps, step;
} ptsc__flat_t;
/* Append the runs of `count` elements of committed `t` at byte `at` of a
 * buffer to `f` (into an empty `f`, an element of several groups becomes
 * a pattern of `count` reps). PTSC_ERR_UNSUPPORTED for a type it cannot
 * read (more than 2^24 groups; a type map that overlaps itself where it
 * is read back by unpacking; a darray over INT_MAX bytes), or
 * PTSC_ERR_NO_MEMORY. */
int ptsc__flatten(MPI_Datatype t, MPI_Count count, MPI_Aint at, ptsc__flat_t *f);
/* Append `len` bytes at `off` (one run). */
int ptsc__flat_add(ptsc__flat_t *f, MPI_Aint off, MPI_Aint len);
void ptsc__flat_free(ptsc__flat_t *f);

/* ------------------------------------------------------------------------ */
/* coll_prep.c, coll.c, icoll.c: lane collectives                            */
/* ------------------------------------------------------------------------ */

/* A lane collective runs in three steps, shared by the blocking and the
 * non-blocking forms: coll_prep.c's ptsc__coll_prep_* check the arguments,
 * synchronise and stage the buffers (ptsc__coll_t); the collective runs
 * (MPI's blocking one in coll.c, MPI's non-blocking one or a schedule in
 * icoll.c); ptsc__coll_finish copies staged results back and releases the
 * staging buffers. */
enum {
    PTSC__C_BARRIER = 0,
    PTSC__C_BCAST,
    PTSC__C_REDUCE,
    PTSC__C_ALLREDUCE,
    PTSC__C_SCAN,
    PTSC__C_EXSCAN,
    PTSC__C_RSB, /* reduce_scatter_block */
    PTSC__C_GATHER,
    PTSC__C_SCATTER,
    PTSC__C_ALLGATHER,
    PTSC__C_ALLTOALL
};

/* One side of a collective: `count` elements (or with counts / displs,
 * counts[i] elements at displs[i] extents for rank i); per_peer: one block
 * per rank. As given to ptsc__coll_prep_exchange, buf is the caller's; in
 * ptsc__coll_t it is what MPI sees (a staged copy, MPI_IN_PLACE or NULL). */
typedef struct {
    void *buf;
    int count;
    const int *counts, *displs;
    MPI_Datatype type;
    int per_peer;
} ptsc__side_t;

/* A buffer as the caller gave it and as MPI sees it (staged or not). */
typedef struct {
    const void *user;     /* caller's buffer (or MPI_IN_PLACE / NULL) */
    void *wire;           /* what MPI sees */
    ptsc__stagebuf_t *sb; /* pinned copy when staged */
    size_t bytes;
} ptsc__cbuf_t;

typedef struct {
    int kind; /* PTSC__C_* */
    int v;    /* counts and displacements per rank */
    int root; /* rooted calls; -1 otherwise */
    /* Reductions and bcast: snd.count is the input's elements (count x
     * nranks for reduce_scatter_block), rcv.count the result's. */
    ptsc__side_t snd, rcv;
    MPI_Op op;
    int sends, recvs; /* this rank has a send / receive side */
    int s_in_place, r_in_place;
    int copy_out;     /* a staged receive buffer is copied back at the end */
    ptsc__layout_t L; /* PTSC_COMM=shared reductions: the input's layout */
    size_t bytes;     /* for diagnostics */
    ptsc__cbuf_t s, r;
    const char *call;
} ptsc__coll_t;

int ptsc__coll_prep_barrier(ptsc_ctx_t **ctx, const char *call, ptsc__coll_t *c);
int ptsc__coll_prep_bcast(ptsc_ctx_t **ctx, void *buf, int count, MPI_Datatype type, int root,
                          const char *call, ptsc__coll_t *c);
/* kind: PTSC__C_REDUCE .. PTSC__C_RSB. */
int ptsc__coll_prep_reduce(ptsc_ctx_t **ctx, int kind, const void *sbuf, void *rbuf, int count,
                           MPI_Datatype type, MPI_Op op, int root, const char *call, ptsc__coll_t *c);
/* kind: PTSC__C_GATHER .. PTSC__C_ALLTOALL. */
int ptsc__coll_prep_exchange(ptsc_ctx_t **ctx, int kind, int v, int root, const ptsc__side_t *sx,
                             const ptsc__side_t *rx, const char *call, ptsc__coll_t *c);
/* Copy a staged result back (on the thread's stream) and release the
 * staging buffers; returns `rc`, or the first error of its own. */
int ptsc__coll_finish(ptsc_ctx_t *ctx, ptsc__coll_t *c, int rc);
/* 1 with PTSC_COMM=shared: collectives are schedules of point-to-point messages. */
int ptsc__coll_shared(void);

/* Start the prepared collective `c` as a request: MPI's non-blocking
 * collective on the lane (PTSC_COMM=dup), or a schedule (shared). Always
 * takes `c` over: on failure it is finished (staging released) here. */
int ptsc__icoll_start(ptsc_ctx_t *ctx, const ptsc__coll_t *c, struct ptsc_request **out);

/* ------------------------------------------------------------------------ */
/* enqueue.c: stream-ordered point-to-point (ptsc_*_enqueue)                */
/* ------------------------------------------------------------------------ */

/* Init: the enqueued calls' communicator (collective) and tables. Finalize:
 * drain, stop the proxy thread, free the blocks and the communicator. */
int ptsc__enqueue_setup(MPI_Comm world);
void ptsc__enqueue_teardown(void);
/* Operations armed and not yet recycled (tests: a destroyed graph's go). */
int ptsc__enqueue_live(void);

/* ------------------------------------------------------------------------ */
/* GPU layer: gpu_cuda.c, or gpu_none.c where every call is a no-op or      */
/* PTSC_ERR_NO_DEVICE. Errors carry CUDA's message in the detail.            */
/* ------------------------------------------------------------------------ */

/* Number of usable devices; 0 (not an error) when there is no driver or device.
 * With a device (and PTSC_MEM_CACHE not off: read cfg first) it also starts
 * tracking CUDA's memory calls and sets ptsc__g.mem_tracked; finalize stops it. */
int ptsc__gpu_init(int *ndevices);
void ptsc__gpu_finalize(void);
/* Node-wide description of device `d` for ptsc-info: "NVIDIA H200, cc 9.0, 139 GiB". */
int ptsc__gpu_describe(int d, char *buf, size_t n);
/* Runtime and driver versions (0 when absent). */
void ptsc__gpu_versions(int *runtime, int *driver);
int ptsc__gpu_set_device(int device);
/* Bind a stream of `kind` on the current device; release undoes an owned one. */
int ptsc__gpu_stream_bind(int kind, void **stream);
void ptsc__gpu_stream_release(int kind, void *stream);
int ptsc__gpu_stream_sync(void *stream);
int ptsc__gpu_legacy_sync(void);
int ptsc__gpu_device_sync(void);
/* *capturing = 1 when syncing at `scope` would touch a stream under capture. */
int ptsc__gpu_capturing(void *stream, int scope, int *capturing);
int ptsc__gpu_classify(const void *p, ptsc_memclass_t *cls);
int ptsc__gpu_host_alloc(size_t n, void **p);
void ptsc__gpu_host_free(void *p);
/* +1 / -1: while held (enqueued operations armed), ptsc__gpu_host_free keeps
 * its pinned frees for later (cudaFreeHost waits for the device). */
void ptsc__gpu_frees_hold(int delta);
/* Whether frees are held now: the staging pools then keep what they would trim. */
int ptsc__gpu_frees_held(void);
/* cudaMemcpyAsync with cudaMemcpyDefault on `stream`. */
int ptsc__gpu_copy_async(void *dst, const void *src, size_t n, void *stream);
/* cudaMemcpy2DAsync with cudaMemcpyDefault: `rows` runs of `width` bytes,
 * `spitch` apart at `src`, to `dpitch` apart at `dst` (pitches >= width). */
int ptsc__gpu_copy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t rows, void *stream);
/* Events. Recorded on a blocking stream (per-thread, owned), an event also
 * completes only after the legacy-stream work queued before the record:
 * the thread scope and the race check rely on that (sync.c). */
int ptsc__gpu_event_create(void **ev);
void ptsc__gpu_event_destroy(void *ev);
int ptsc__gpu_event_record(void *ev, void *stream);
int ptsc__gpu_event_done(void *ev, int *done);
int ptsc__gpu_event_sync(void *ev);
/* Work queued on `stream` after this waits for `ev` (cudaStreamWaitEvent). */
int ptsc__gpu_stream_wait(void *stream, void *ev);
/* Stream memory operations (enqueue.c): queue on `stream` a write of
 * `value` to the 32-bit word at device address `addr` (after the work
 * before it, with a fence), or a wait until that word equals `value`.
 * PTSC_ERR_UNSUPPORTED where the driver lacks them. */
int ptsc__gpu_write32(void *stream, unsigned long long addr, unsigned value);
int ptsc__gpu_wait32(void *stream, unsigned long long addr, unsigned value);
/* Call fn(arg) when the graph that `stream` is being captured into, and
 * every graph instantiated from it, are destroyed (a user object moved into
 * the graph). fn runs on a thread of CUDA's and must not call CUDA. On a
 * failure after the object was made, fn has run already. */
int ptsc__gpu_capture_release(void *stream, void (*fn)(void *), void *arg);
/* PTSC_OK when the driver has the stream memory operations. */
int ptsc__gpu_memops(void);
/* Whether libptsc-mpi is loaded in this process (0 without CUDA). */
int ptsc__gpu_interposed(void);
/* The id of the capture sequence `stream` is in; 0 when not capturing. */
int ptsc__gpu_capture_id(void *stream, unsigned long long *id);
/* Pinned host memory mapped for every device; *dev: its device address.
 * Freed by ptsc__gpu_host_free. */
int ptsc__gpu_mapped_alloc(size_t n, void **host, unsigned long long *dev);

/* memtrack.c (CUDA builds; gpu_none.c has stubs): a CUPTI subscriber that
 * bumps ptsc__g.mem_epoch at the exit of every driver call that allocates,
 * frees, registers or maps memory. start returns 1 when tracking is active
 * (idempotent), stop undoes it (safe without a start); status is one line
 * for ptsc-info: how tracking went, or why it is off. */
int ptsc__memtrack_start(void);
void ptsc__memtrack_stop(void);
const char *ptsc__memtrack_status(void);

/* ------------------------------------------------------------------------ */
/* watchdog.c: hang diagnostics (PTSC_TIMEOUT)                               */
/* ------------------------------------------------------------------------ */

/* What the blocking call of a thread index waits for; written by the thread
 * that owns the index, read by the watchdog thread. */
enum { PTSC__WAIT_SEND = 0, PTSC__WAIT_RECV, PTSC__WAIT_PROBE, PTSC__WAIT_COLL, PTSC__WAIT_ANY };
typedef struct {
    _Atomic uint64_t since; /* ptsc__now_ns() when the wait began; 0: not waiting */
    _Atomic(const char *) call;
    atomic_int kind;         /* PTSC__WAIT_* */
    atomic_int rank, thread; /* peer (rank -1: any rank; collectives: the root or -1) */
    atomic_int tag;          /* -1 where none */
    _Atomic size_t bytes;    /* PTSC__WAIT_ANY: the number of requests */
} ptsc__wait_t;
/* One record per thread index while PTSC_TIMEOUT is on; NULL otherwise. */
extern ptsc__wait_t *ptsc__waits;
void ptsc__wait_publish(int index, const char *call, int kind, int rank, int thread, int tag, size_t bytes);
/* Around every blocking MPI call and wait loop; one branch when off. */
static inline void ptsc__wait_begin(const ptsc_ctx_t *ctx, const char *call, int kind, int rank, int thread,
                                    int tag, size_t bytes)
{
    if (ptsc__waits)
        ptsc__wait_publish(ctx->index, call, kind, rank, thread, tag, bytes);
}
static inline void ptsc__wait_end(const ptsc_ctx_t *ctx)
{
    if (ptsc__waits)
        atomic_store_explicit(&ptsc__waits[ctx->index].since, 0, memory_order_release);
}
/* Start the watchdog thread when PTSC_TIMEOUT is set (init); stop it and
 * free the records (finalize, after every context is released). */
int ptsc__watchdog_start(int nthreads);
void ptsc__watchdog_stop(void);

/* ------------------------------------------------------------------------ */
/* nvtx.c: NVTX ranges (PTSC_NVTX)                                           */
/* ------------------------------------------------------------------------ */

/* Off, each of these is one branch on the flag: arguments are not even
 * evaluated. Every push is matched by a pop on the same thread. */
void ptsc__nvtx_push_on(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ptsc__nvtx_push_msg_on(const char *call, int rank, int thread, int tag, size_t bytes, int staged);
void ptsc__nvtx_push_copy_on(int to_host, size_t bytes);
void ptsc__nvtx_pop_on(void);
void ptsc__nvtx_name_thread_on(int index);
#define PTSC__NVTX_ON __builtin_expect(ptsc__g.cfg.nvtx, 0)
/* A range named by a printf format: "sync thread". */
#define ptsc__nvtx_push(...)                 \
    do {                                     \
        if (PTSC__NVTX_ON)                   \
            ptsc__nvtx_push_on(__VA_ARGS__); \
    } while (0)
/* A point-to-point range: "ptsc_send r1 t3 tag 7 64 KiB staged" (peer,
 * thread or tag below 0 read "any"). */
#define ptsc__nvtx_push_msg(call, rank, thread, tag, bytes, staged)                     \
    do {                                                                                \
        if (PTSC__NVTX_ON)                                                              \
            ptsc__nvtx_push_msg_on((call), (rank), (thread), (tag), (bytes), (staged)); \
    } while (0)
/* A staging copy: "stage D2H 64 KiB" (to_host) or "stage H2D 64 KiB". */
#define ptsc__nvtx_push_copy(to_host, bytes)             \
    do {                                                 \
        if (PTSC__NVTX_ON)                               \
            ptsc__nvtx_push_copy_on((to_host), (bytes)); \
    } while (0)
#define ptsc__nvtx_pop()         \
    do {                         \
        if (PTSC__NVTX_ON)       \
            ptsc__nvtx_pop_on(); \
    } while (0)
/* ptsc__nvtx_pop, passing a status through: `return ptsc__nvtx_pop_rc(rc);`. */
static inline int ptsc__nvtx_pop_rc(int rc)
{
    ptsc__nvtx_pop();
    return rc;
}
/* Name the calling OS thread "ptsc r<rank> t<index>" (context attach). */
#define ptsc__nvtx_name_thread(index)         \
    do {                                      \
        if (PTSC__NVTX_ON)                    \
            ptsc__nvtx_name_thread_on(index); \
    } while (0)
/* For tests: ranges open on the calling thread, the name of its last range,
 * and the calls made so far by every thread. */
int ptsc__nvtx_depth(void);
const char *ptsc__nvtx_last(void);
void ptsc__nvtx_counts(unsigned long *pushes, unsigned long *pops, unsigned long *names);

/* ------------------------------------------------------------------------ */
/* libptsc-mpi: the interposer's parts its Fortran entry points share        */
/* ------------------------------------------------------------------------ */

/* Defined in interpose.c and used by interpose_fortran.c only (both built
 * into libptsc-mpi alone, never into libptsc): the Fortran entry points do
 * the same work as the C ones around the MPI library's own Fortran
 * functions. Return values are MPI error codes. */

/* A buffer as MPI sees it: the caller's, or its host copy when staged. */
typedef struct ptsc__mbuf {
    char *user;         /* the caller's buffer */
    char *host;         /* the host copy, NULL: not staged */
    MPI_Count lo, span; /* it holds bytes [lo, lo + span) of user; packed: lo 0, span the data's bytes */
    int back;           /* copy host -> user when the operation completes */
    int packed;         /* the host copy is the type map's bytes in order: MPI gets span MPI_PACKED */
    int unfilled;       /* a receive's host copy not filled first (MPI writes all of it) */
    int gap;            /* packed with a gap after the first byte: MPI gets 1 of wtype (interpose.c) */
    MPI_Datatype wtype; /* gap: that type */
    int wtype_own;      /* wtype is this buffer's, freed with the host copy (else the cache's) */
    size_t cap;         /* the host copy's allocation (the interposer's pool) */
    ptsc__flat_t runs;  /* the bytes copied in and back; none: all of the span */
} ptsc__mbuf_t;
struct ptsc__pending; /* a request with work left at its completion */

/* After the program's MPI_Init*: configuration, devices; before
 * MPI_Finalize: the statistics line and the release of everything. */
void ptsc__ipose_start(void);
void ptsc__ipose_stop(void);
/* Sync and stage one buffer of a point-to-point call (`recv`: 1, MPI writes
 * it; 2, MPI sends it, then writes it, as *_replace does; `dest`: the rank a send goes to in `comm`, or -1);
 * both sides of a collective (`suse`, `ruse`: whether each side is a buffer here). */
int ptsc__ipose_prep(ptsc__mbuf_t *b, const void *buf, MPI_Count count, MPI_Datatype type, int recv,
                     MPI_Comm comm, int dest, const char *call);
int ptsc__ipose_prep_coll(ptsc__mbuf_t *s, ptsc__mbuf_t *r, MPI_Comm comm, const void *sbuf, MPI_Count scount,
                          MPI_Datatype stype, int suse, void *rbuf, MPI_Count rcount, MPI_Datatype rtype,
                          int ruse, const char *call);
/* The same for the v forms: a side with counts (and displacements, in
 * elements of its type) is one block per rank, staged block by block. */
int ptsc__ipose_prep_coll_v(ptsc__mbuf_t *s, ptsc__mbuf_t *r, MPI_Comm comm, const void *sbuf,
                            MPI_Count scount, const int *scounts, const int *sdispls, MPI_Datatype stype,
                            int suse, void *rbuf, MPI_Count rcount, const int *rcounts, const int *rdispls,
                            MPI_Datatype rtype, int ruse, const char *call);
/* What MPI gets: the host copy (shifted by its lower bound) or the buffer;
 * a point-to-point call's count and Fortran datatype handle (the packed
 * copy's, or the caller's). */
void *ptsc__ipose_wire(const ptsc__mbuf_t *b);
MPI_Fint ptsc__ipose_fcount(const ptsc__mbuf_t *b, MPI_Fint count);
MPI_Fint ptsc__ipose_ftype(const ptsc__mbuf_t *b, MPI_Fint type);
/* A blocking call's end (`b` may be NULL); a non-blocking call's start
 * (`b2`: a collective's receive side, or NULL; p2p: may be cancelled);
 * a persistent init's (`recv`, class found by the prep). */
int ptsc__ipose_done(int mrc, ptsc__mbuf_t *a, ptsc__mbuf_t *b, MPI_Comm comm, const char *call);
int ptsc__ipose_track(int mrc, MPI_Request *req, ptsc__mbuf_t *b, ptsc__mbuf_t *b2, int p2p,
                      const char *call);
int ptsc__ipose_pinit_prep(ptsc__mbuf_t *b, const void *buf, int count, MPI_Datatype type, int recv,
                           MPI_Comm comm, int dest, int *cls, const char *call);
int ptsc__ipose_pinit_track(int mrc, MPI_Request *req, ptsc__mbuf_t *b, int cls, const char *call);
/* An error of the interposer to the communicator's handler. */
int ptsc__ipose_raise(MPI_Comm comm, int rc);
/* Requests: whether any has work left; the entries of reqs[0 .. n) taken
 * out of the table (out[i], or NULL); after the call, each concluded
 * (`done`: completed, status `st` or NULL; `now`: the handle MPI left) or
 * started (Start/Startall: prepared before, put back after); Request_free's
 * detach of a running one. */
int ptsc__ipose_busy(void);
int ptsc__ipose_take(int n, const MPI_Request *reqs, struct ptsc__pending **out);
int ptsc__ipose_conclude(struct ptsc__pending *p, int done, const MPI_Status *st, MPI_Request now);
int ptsc__ipose_start_prep(struct ptsc__pending *p);
void ptsc__ipose_start_done(struct ptsc__pending *p, int mrc, MPI_Request now);
/* Request_free of an entry taken out: 1 when it was detached (MPI keeps
 * running it; the caller returns at once), 0 when the caller frees it in
 * MPI (the entry is gone). */
int ptsc__ipose_free(struct ptsc__pending *p);

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

uint64_t ptsc__now_ns(void);
/* Sleep ns nanoseconds, at least 1 us and at most PTSC__NAP_MAX_NS. */
#define PTSC__NAP_MAX_NS 50000u
void ptsc__nap_ns(uint64_t ns);

#endif /* PTSC_INTERNAL_H */
