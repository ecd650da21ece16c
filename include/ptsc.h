/**
 * @file ptsc.h
 * @brief ptsc: per-thread stream and communicator coordination for
 *        MPI + threads + CUDA programs. The one header a program includes.
 *
 * Every worker thread of a rank gets a context (ptsc_ctx_t): its thread
 * index, its GPU, its bound stream and its communicator lane. Before MPI
 * reads or writes a buffer, ptsc performs exactly the synchronisation the
 * buffer needs at the scope the policy names (PTSC_SYNC_SCOPE), and stages
 * device buffers through pinned host memory when MPI is not CUDA-aware.
 *
 * Conventions:
 *  - Every call returns a ptsc_status_t (PTSC_OK or a negative error) and
 *    never aborts the process. On error, ptsc_last_error() holds a
 *    thread-local detail message (MPI's or CUDA's own text where relevant);
 *    see ptsc_last_error for what clears it.
 *  - Output arguments are written only on success.
 *  - Calls taking a `ptsc_ctx_t *ctx` must be made by the thread that owns
 *    the context (PTSC_ERR_WRONG_THREAD otherwise). Passing ctx = NULL means
 *    "the calling thread's context", attaching the thread lazily.
 *  - Peers are addressed by (rank, thread): rank in the world communicator
 *    of ptsc_init, thread an index in [0, ptsc_max_threads).
 */
#ifndef PTSC_H
#define PTSC_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include <ptsc/status.h>
#include <ptsc/version.h>

#if defined(_WIN32)
#define PTSC_API
#else
#define PTSC_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque per-thread context. */
typedef struct ptsc_ctx ptsc_ctx_t;

/** Handle of a non-blocking operation; PTSC_REQUEST_NULL when none or done. */
typedef struct ptsc_request *ptsc_request_t;
#define PTSC_REQUEST_NULL ((ptsc_request_t)0)

/** In receives and probes: a message from the given thread index of any rank. */
#define PTSC_ANY_RANK (-1)

/**
 * What a completed receive (or a probe) saw, like MPI_Status: where the
 * message came from and how large it was.
 */
typedef struct {
    int rank;     /**< Source rank. */
    int thread;   /**< Source thread index. */
    int tag;      /**< Tag as sent. */
    int error;    /**< PTSC_OK, or the receive's error (PTSC_ERR_TRUNCATE: the message was larger). */
    size_t bytes; /**< Bytes received; from a probe, the size of the waiting message. A truncated
                       receive reports the capacity of its buffer (what it could hold). */
} ptsc_info_t;

/**
 * What is synchronised before MPI touches a buffer that needs it. GLOBAL
 * and DEVICE act on every device that a thread of this rank was bound to.
 */
typedef enum {
    PTSC_SCOPE_DEFAULT = -1, /**< In calls taking a scope: the context's own scope. */
    PTSC_SCOPE_AUTO = 0,     /**< THREAD for an explicitly attached thread, GLOBAL otherwise. */
    PTSC_SCOPE_NONE = 1,     /**< Nothing: the caller has synchronised. */
    PTSC_SCOPE_THREAD = 2,   /**< The thread's bound stream, and work queued before on the legacy stream. */
    PTSC_SCOPE_GLOBAL = 3,   /**< The legacy default stream: all blocking streams. */
    PTSC_SCOPE_DEVICE = 4    /**< cudaDeviceSynchronize: everything. */
} ptsc_scope_t;

/** Kind of stream bound to each thread (PTSC_STREAM). */
typedef enum {
    PTSC_STREAM_PER_THREAD = 0, /**< cudaStreamPerThread. */
    PTSC_STREAM_OWNED = 1,      /**< A blocking stream created for the thread. */
    PTSC_STREAM_LEGACY = 2      /**< cudaStreamLegacy. */
} ptsc_stream_kind_t;

/** Class of a buffer's memory; only the first three ever need a sync. */
typedef enum {
    PTSC_MEM_DEVICE = 0,  /**< cudaMalloc memory. */
    PTSC_MEM_MANAGED = 1, /**< cudaMallocManaged memory. */
    PTSC_MEM_PINNED = 2,  /**< Page-locked host memory (cudaMallocHost, cudaHostRegister). */
    PTSC_MEM_HOST = 3     /**< Plain pageable host memory. */
} ptsc_memclass_t;

/** Per-thread counters (also printed at finalize with PTSC_STATS=1). */
typedef struct {
    uint64_t syncs;         /**< Synchronisations performed. */
    uint64_t sync_ns;       /**< Wall time spent in them, nanoseconds (0 unless PTSC_STATS=1). */
    uint64_t skipped_syncs; /**< Buffers that needed no sync (pageable host). */
    uint64_t sends;         /**< Messages sent (point-to-point). */
    uint64_t recvs;         /**< Messages received (point-to-point). */
    uint64_t bytes_sent;    /**< Point-to-point payload bytes sent. */
    uint64_t bytes_recv;    /**< Point-to-point payload bytes received. */
    uint64_t staged_bytes;  /**< Bytes copied through pinned staging buffers. */
    uint64_t collectives;   /**< Collective calls. */
    uint64_t races;         /**< Hand-overs the race check saw while the producing work still ran. */
} ptsc_stats_t;

/* ------------------------------------------------------------------------ */
/* Process                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Initialise ptsc. Reads the PTSC_* environment, initialises MPI with
 * MPI_THREAD_MULTIPLE if the program has not, or checks the level it got,
 * then creates the communicator lanes collectively (every rank must call).
 * Call from one thread (normally main) before any other ptsc call. Calls
 * from several threads at once are serialised: one initialises; the others
 * wait for it and return PTSC_ERR_ALREADY_INITIALIZED (ptsc is then ready
 * for them too), or, if it failed, try again themselves.
 * @param argc,argv passed to MPI_Init_thread; may be NULL.
 * @return PTSC_OK; PTSC_ERR_ALREADY_INITIALIZED; PTSC_ERR_FINALIZED (no
 *         re-init after finalize, nor while it runs); PTSC_ERR_CONFIG (bad variable, named in
 *         ptsc_last_error); PTSC_ERR_THREAD_LEVEL; PTSC_ERR_MPI; PTSC_ERR_CUDA.
 */
PTSC_API int ptsc_init(int *argc, char ***argv);

/**
 * Free every context, lane, stream and staging buffer; finalise MPI only
 * if ptsc_init initialised it. Collective; call from the thread that called
 * ptsc_init.
 *
 * Other threads: finalize first makes every later ptsc call of any thread
 * return PTSC_ERR_FINALIZED (ptsc_thread_attach, ptsc_self and
 * ptsc_thread_detach included), then waits for the attaches, detaches and
 * thread exits already under way to finish, then takes over the contexts of
 * threads still attached and frees them (their requests drained as at
 * thread exit). A thread attached at that point may stay alive or exit,
 * during finalize or after it: its context is freed exactly once, by
 * finalize, and its later calls return PTSC_ERR_FINALIZED. What remains the
 * program's duty: no other thread may be inside a ptsc call (or use its
 * stream, lane or requests) once finalize has begun; stop them first. Every
 * stream with enqueued operations (ptsc_*_enqueue) must have been
 * synchronised (ptsc_enqueue_sync), and no launch of a graph that captured
 * them may be in flight: finalize stops their proxy, and a stream that
 * reaches such an operation afterwards waits for ever.
 * @return PTSC_OK; PTSC_ERR_NOT_INITIALIZED; PTSC_ERR_FINALIZED (already
 *         finalized, or being finalized by another thread); PTSC_ERR_MPI.
 */
PTSC_API int ptsc_finalize(void);

/** @param[out] flag 1 between ptsc_init and ptsc_finalize, else 0. Any thread. */
PTSC_API int ptsc_initialized(int *flag);

/** Runtime version; any argument may be NULL. Any thread, any time. */
PTSC_API int ptsc_version(int *major, int *minor, int *patch);

/** "major.minor.patch" of the library actually loaded. Any thread, any time. */
PTSC_API const char *ptsc_version_string(void);

/** Message of a status code ("unknown status" for other values). Any thread. */
PTSC_API const char *ptsc_status_string(int status);

/** Enumerator name of a status code, e.g. "PTSC_ERR_TAG". Any thread. */
PTSC_API const char *ptsc_status_name(int status);

/**
 * Detail of the calling thread's last error: which call, which argument or
 * variable, and MPI's or CUDA's own message. Thread-local; never NULL.
 *
 * - Operations (every call not listed below) clear it when they start, so
 *   after one returns PTSC_OK it is the empty string, and after one fails
 *   it holds that failure.
 * - Queries (ptsc_initialized, ptsc_rank, ptsc_size, ptsc_tag_max,
 *   ptsc_features and the ptsc_ctx_* getters other than ptsc_ctx_set_scope)
 *   never clear it. One that fails sets its own detail, except while the
 *   detail holds a failure of an operation that ptsc_last_error() has not
 *   returned yet: that detail is kept (the query still returns its status),
 *   so a program can ask for its rank or thread index while reporting an
 *   error without losing the error's detail.
 * - ptsc_version, ptsc_version_string, ptsc_status_string, ptsc_status_name
 *   and ptsc_mem_forget never change it; ptsc_mem_class and
 *   ptsc_config_print set it when they fail and leave it when they succeed.
 * - ptsc_omp_run that fails copies the failing thread's detail here.
 *
 * The string stays valid until the thread's next ptsc call. Calling this
 * marks the detail as read.
 */
PTSC_API const char *ptsc_last_error(void);

/**
 * Records a failure found outside ptsc as the calling thread's last error,
 * as a failing ptsc operation would: ptsc_last_error() then returns
 * `detail` (truncated to its buffer). For bindings and wrappers built on
 * this API that refuse an argument before calling ptsc (the Fortran module
 * refuses a non-contiguous buffer this way). Any thread, before
 * ptsc_init and after ptsc_finalize too.
 * @param status a PTSC_ERR_* code (not PTSC_OK).
 * @param detail the message, e.g. "ptsc_send: buf is not contiguous".
 * @return status; PTSC_ERR_ARG (and that detail) when status is PTSC_OK or
 *         not a ptsc status, or detail is NULL.
 */
PTSC_API int ptsc_set_error(int status, const char *detail);

/** @param[out] rank this process's rank in the world communicator. */
PTSC_API int ptsc_rank(int *rank);

/** @param[out] nranks ranks; @param[out] nthreads thread slots per rank (PTSC_MAX_THREADS). Either may be
 * NULL. */
PTSC_API int ptsc_size(int *nranks, int *nthreads);

/** @param[out] tag_max largest tag accepted by the point-to-point calls. */
PTSC_API int ptsc_tag_max(int *tag_max);

/**
 * Features this library was built with and found at init (any may be NULL):
 * @param[out] cuda 1 when built with CUDA and a device was found.
 * @param[out] cuda_aware 1 when device buffers go to MPI directly.
 * @param[out] staging 1 when device buffers are staged through host memory.
 */
PTSC_API int ptsc_features(int *cuda, int *cuda_aware, int *staging);

/**
 * Print the effective configuration (every PTSC_* variable, its value and
 * whether it came from the default or the environment) to `out` (a FILE *;
 * NULL means stdout). Usable before ptsc_init: then it shows what init
 * would use, or returns PTSC_ERR_CONFIG for a bad value.
 */
PTSC_API int ptsc_config_print(void *out);

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Attach the calling thread as thread `index` of this rank: selects its
 * device, binds its stream, gives it its lane. For pthreads and any thread
 * that knows its index. An index is free again once its thread detached or
 * ended (the exit destructor ran, which is before pthread_join returns); a
 * new holder receives the messages addressed to the index that the old one
 * did not receive, since peers address (rank, index), not a thread.
 * @param[out] ctx the new context (may be NULL).
 * @return PTSC_OK; PTSC_ERR_THREAD (index out of [0, nthreads));
 *         PTSC_ERR_THREAD_TAKEN (a live thread holds it);
 *         PTSC_ERR_ALREADY_ATTACHED; PTSC_ERR_CUDA; init errors.
 */
PTSC_API int ptsc_thread_attach(int index, ptsc_ctx_t **ctx);

/**
 * Attach inside the program's own `#pragma omp parallel`, with index
 * omp_get_thread_num(). If the thread is already attached with that index,
 * returns its context. Inside an active region nested in another active one
 * (omp_get_active_level() > 1) it returns PTSC_ERR_NESTED, since inner
 * thread numbers repeat across the outer threads: inner threads compute an
 * index and call ptsc_thread_attach. Nesting of inactive regions (teams of
 * one) is allowed; the index is the thread number at the active level.
 */
PTSC_API int ptsc_omp_attach(ptsc_ctx_t **ctx);

/**
 * The calling thread's context, attaching it lazily if it has none. Any
 * call given ctx = NULL does the same. The lazy index rule:
 *  - outside any active OpenMP parallel region (plain pthreads, the main
 *    thread): the lowest free index;
 *  - inside an active region: the OpenMP thread number, as ptsc_omp_attach,
 *    so that peers addressing (rank, t) reach OpenMP thread t. If that index
 *    is held by another live thread: PTSC_ERR_THREAD_TAKEN; if it is not
 *    below PTSC_MAX_THREADS: PTSC_ERR_THREAD. Never another index;
 *  - inside an active region nested in another: PTSC_ERR_NESTED (thread
 *    numbers repeat there; compute an index and use ptsc_thread_attach).
 * A lazily attached thread counts as "not known" for the auto scope, which
 * then syncs globally, because its earlier GPU work may be on any stream.
 * @return PTSC_OK; PTSC_ERR_THREAD (no free index, or the OpenMP thread
 *         number is out of range); PTSC_ERR_THREAD_TAKEN; PTSC_ERR_NESTED.
 */
PTSC_API int ptsc_self(ptsc_ctx_t **ctx);

/**
 * Detach the calling thread: waits for its stream, frees its context and
 * releases its index. Refused with PTSC_ERR_PENDING, the thread staying
 * attached, while requests it started are not complete: wait for them
 * first. A thread that exits attached is detached by a thread-exit
 * destructor, which completes its sends and matched receives and cancels
 * receives that no message matched yet (logged as a warning).
 * @return PTSC_OK; PTSC_ERR_NOT_ATTACHED; PTSC_ERR_PENDING;
 *         PTSC_ERR_FINALIZED (also while ptsc_finalize runs: it frees the
 *         context then).
 */
PTSC_API int ptsc_thread_detach(void);

/*
 * Context getters (queries, see ptsc_last_error). Like every call taking a
 * context, they accept only the calling thread's own context: another
 * thread's (or one whose thread detached or ended) gives
 * PTSC_ERR_WRONG_THREAD without the context being read, since its owner
 * changes its scope and counters without a lock and may free it at any
 * time. A thread that needs another's values asks that thread for them.
 */
/** @param[out] index the context's thread index. */
PTSC_API int ptsc_ctx_index(const ptsc_ctx_t *ctx, int *index);
/** @param[out] device the context's CUDA device, or -1 without a GPU. */
PTSC_API int ptsc_ctx_device(const ptsc_ctx_t *ctx, int *device);
/** @param[out] stream the bound stream (a cudaStream_t), or NULL without a GPU. Put the thread's kernels on
 * it. */
PTSC_API int ptsc_ctx_stream(const ptsc_ctx_t *ctx, void **stream);
/**
 * @param[out] comm the thread's lane, owned by ptsc. With PTSC_COMM=dup a
 * communicator over this thread index on every rank, free for the program's
 * own collectives from this thread. With PTSC_COMM=shared every thread gets
 * the same communicator: use it for point-to-point only, since MPI forbids
 * concurrent collectives on one communicator.
 */
PTSC_API int ptsc_ctx_comm(const ptsc_ctx_t *ctx, MPI_Comm *comm);
/** @param[out] scope the context's scope (as set, so possibly PTSC_SCOPE_AUTO). */
PTSC_API int ptsc_ctx_scope(const ptsc_ctx_t *ctx, ptsc_scope_t *scope);
/** Set the context's scope; @param[out] old the previous one (may be NULL), for restoring after a call. */
PTSC_API int ptsc_ctx_set_scope(ptsc_ctx_t *ctx, ptsc_scope_t scope, ptsc_scope_t *old);
/** @param[out] stats the context's counters. */
PTSC_API int ptsc_ctx_stats(const ptsc_ctx_t *ctx, ptsc_stats_t *stats);

/* ------------------------------------------------------------------------ */
/* Synchronisation and memory                                                */
/* ------------------------------------------------------------------------ */

/**
 * Synchronise at `scope` (PTSC_SCOPE_DEFAULT: the context's) now.
 * @return PTSC_OK; PTSC_ERR_CAPTURING if that would sync a stream under
 *         graph capture (the capture is left intact); PTSC_ERR_CUDA.
 */
PTSC_API int ptsc_sync(ptsc_ctx_t *ctx, ptsc_scope_t scope);

/** Classify `ptr`'s memory (cached per thread; see ptsc_mem_forget). Any thread. */
PTSC_API int ptsc_mem_class(const void *ptr, ptsc_memclass_t *cls);

/**
 * Drop every cached classification, in every thread. Any thread.
 * Under the default PTSC_MEM_CACHE=safe it is optional: only classes whose
 * staleness can cost an extra sync or copy, never a missing one, are cached.
 * Under PTSC_MEM_CACHE=host (pageable answers cached too) the program must
 * call it after it registers host memory or allocates or frees CUDA memory
 * while it communicates; otherwise a sync can be missed, or a device pointer
 * handed to an MPI that is not CUDA-aware.
 */
PTSC_API int ptsc_mem_forget(void);

/* ------------------------------------------------------------------------ */
/* Point-to-point: (rank, thread) addressing over the lanes                  */
/* ------------------------------------------------------------------------ */

/**
 * Send `count` elements of `type` from `buf` to thread `thread` of rank
 * `rank`. A device buffer is synchronised per scope, then sent directly
 * (CUDA-aware MPI) or staged. Returns when `buf` may be reused.
 * @return PTSC_OK; PTSC_ERR_NULL_BUFFER; PTSC_ERR_COUNT; PTSC_ERR_ARG (bad
 *         datatype); PTSC_ERR_RANK; PTSC_ERR_THREAD; PTSC_ERR_TAG;
 *         PTSC_ERR_CAPTURING; PTSC_ERR_RACE; PTSC_ERR_MPI; PTSC_ERR_CUDA.
 */
PTSC_API int ptsc_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                       int tag);

/**
 * Receive from thread `thread` of rank `rank`. A staged device receive is
 * complete for the thread's stream: the data lands in `buf` through a copy
 * queued on the bound stream, so the next kernel on it sees the data.
 * @return as ptsc_send, plus PTSC_ERR_TRUNCATE.
 */
PTSC_API int ptsc_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread,
                       int tag);

/**
 * ptsc_recv that also reports the source, tag and size of the message
 * (`info` may be NULL). With rank = PTSC_ANY_RANK it receives from thread
 * `thread` of any rank; info->rank says which.
 */
PTSC_API int ptsc_recv_info(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread,
                            int tag, ptsc_info_t *info);

/**
 * Wait for a message from (rank, thread) with `tag` (rank may be
 * PTSC_ANY_RANK) without receiving it; `info` gets its source and size.
 * The next matching receive of this thread gets that message.
 */
PTSC_API int ptsc_probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, ptsc_info_t *info);

/** Non-blocking ptsc_probe: *flag = 1 and `info` filled when a message waits, else *flag = 0. */
PTSC_API int ptsc_iprobe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info);

/**
 * Non-blocking ptsc_send. Returns at once, even while the thread's stream
 * is busy: a staged buffer's copies and pieces, and a message larger than
 * MPI's eager sizes, progress while the thread computes or blocks elsewhere
 * (the progress agent, PTSC_PROGRESS=thread; with PTSC_PROGRESS=caller only
 * when the owning thread calls into ptsc). Complete with ptsc_wait,
 * ptsc_waitall or ptsc_test.
 */
PTSC_API int ptsc_isend(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                        int tag, ptsc_request_t *req);

/** Non-blocking ptsc_recv (rank may be PTSC_ANY_RANK); complete with ptsc_wait, ptsc_waitall or ptsc_test. */
PTSC_API int ptsc_irecv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread,
                        int tag, ptsc_request_t *req);

/** Send and receive at once (no deadlock on a ring); buffers must not overlap. */
PTSC_API int ptsc_sendrecv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, int dest_rank,
                           int dest_thread, int stag, void *rbuf, int rcount, MPI_Datatype rtype,
                           int src_rank, int src_thread, int rtag);

/**
 * Complete a request and set *req to PTSC_REQUEST_NULL (a NULL request is
 * complete at once). Must be called by the thread that started it.
 */
PTSC_API int ptsc_wait(ptsc_request_t *req);

/** Complete `n` requests; returns the first error, but completes all. */
PTSC_API int ptsc_waitall(int n, ptsc_request_t reqs[]);

/** @param[out] done 1 (and *req set to NULL) when complete, else 0. */
PTSC_API int ptsc_test(ptsc_request_t *req, int *done);

/** ptsc_wait that also fills `info` (may be NULL) for a receive. */
PTSC_API int ptsc_wait_info(ptsc_request_t *req, ptsc_info_t *info);

/** ptsc_test that also fills `info` (may be NULL) for a receive once it is done. */
PTSC_API int ptsc_test_info(ptsc_request_t *req, int *done, ptsc_info_t *info);

/* ------------------------------------------------------------------------ */
/* Stream-ordered point-to-point: queued on a CUDA stream                   */
/* ------------------------------------------------------------------------ */

/** Handle of a stream-ordered non-blocking operation (ptsc_isend_enqueue, ptsc_irecv_enqueue). */
typedef struct ptsc_stream_request *ptsc_stream_request_t;
#define PTSC_STREAM_REQUEST_NULL ((ptsc_stream_request_t)0)

/**
 * Queue a send on `stream` (NULL: the thread's bound stream; a
 * cudaStream_t otherwise, never the legacy default stream) and return at
 * once. When the stream reaches it, the message (device, managed or pinned
 * memory; a contiguous datatype) is copied into a pinned staging block on
 * the stream and sent; work queued after it on the stream runs once the
 * send completed (the buffer may be written again). Without a device the
 * stream is the calling thread: the call returns when the send completed.
 *
 * Enqueued messages match enqueued receives only (their own communicator),
 * in the order the streams reach them, per (peer thread, tag). The calls
 * may be captured into a CUDA graph: each launch of the graph then sends
 * again, with no allocation per launch; such an operation lives until its
 * graph and every instance of it are destroyed (or ptsc_finalize); one
 * instance of such a graph may run at a time. A failure found later (a
 * truncated message, a failed MPI call) is returned by the thread's next
 * ptsc_enqueue_sync; the stream goes on all the same, never waiting
 * forever. The datatype (and an allreduce's operation) must stay valid
 * until the operation completed, or as long as a graph holds it.
 *
 * A waiting stream blocks the hardware queue CUDA mapped it to, and other
 * streams on that queue with it: set CUDA_DEVICE_MAX_CONNECTIONS=32 (before
 * CUDA starts) so that each thread's stream has its own queue, or one
 * thread's enqueued receive may hold up the send of another thread that it
 * waits for. Likewise, while any thread of the rank has enqueued work in
 * flight, no thread of it may call what CUDA makes wait for the whole
 * device (cudaFree, cudaFreeHost, cudaHostAlloc, cudaHostUnregister, a
 * synchronous cudaMemcpy while the waiting stream is a blocking one): the
 * device does not go idle while a stream waits for a thread stuck in such
 * a call. Allocate before the first enqueued call, free after every
 * thread's ptsc_enqueue_sync (docs/design.md, "Stream-ordered calls").
 * Staging blocks come from a pinned pool of PTSC_ENQUEUE_POOL bytes per
 * chunk, taken only while nothing is in flight, for the same reason. For
 * the same reason too, a program that enqueues should not run under
 * ptsc-run, whose syncs wait for every blocking stream (a warning says so).
 * @return PTSC_OK; PTSC_ERR_NULL_BUFFER; PTSC_ERR_COUNT; PTSC_ERR_ARG (bad
 *         datatype, the legacy stream, a stream without a device);
 *         PTSC_ERR_RANK (also PTSC_ANY_RANK); PTSC_ERR_THREAD; PTSC_ERR_TAG
 *         (see ptsc_enqueue_tag_max); PTSC_ERR_UNSUPPORTED (a datatype with
 *         holes, pageable host memory with a device, a driver without stream
 *         memory operations); PTSC_ERR_NO_MEMORY (the pool is used up while
 *         operations are in flight: raise PTSC_ENQUEUE_POOL); PTSC_ERR_CUDA;
 *         PTSC_ERR_CAPTURING; or an earlier operation's failure.
 */
PTSC_API int ptsc_send_enqueue(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank,
                               int thread, int tag, void *stream);

/**
 * Queue a receive on `stream`: the stream waits until the message arrived,
 * copies it into `buf`, and goes on; the next kernel on it sees the data.
 * A longer message fills the buffer and is reported as PTSC_ERR_TRUNCATE
 * (later, see ptsc_send_enqueue). Without a device: a blocking receive.
 * @return as ptsc_send_enqueue.
 */
PTSC_API int ptsc_recv_enqueue(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread,
                               int tag, void *stream);

/**
 * Queue the start of a send: the stream goes on once the message is
 * posted to MPI. Complete it with ptsc_wait_enqueue (queued on a stream
 * of the same thread, or in the same graph capture); until then the send
 * buffer's staging copy is in use, `buf` itself is free once the stream is
 * past this call.
 */
PTSC_API int ptsc_isend_enqueue(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank,
                                int thread, int tag, void *stream, ptsc_stream_request_t *req);

/** Queue the start of a receive; ptsc_wait_enqueue copies the message into `buf` in stream order. */
PTSC_API int ptsc_irecv_enqueue(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank,
                                int thread, int tag, void *stream, ptsc_stream_request_t *req);

/**
 * Queue the completion of `*req` on `stream` (NULL: the bound stream) and
 * set `*req` to PTSC_STREAM_REQUEST_NULL: work queued after it on the
 * stream runs once the operation completed (a receive's data in its
 * buffer). A null request is complete at once.
 */
PTSC_API int ptsc_wait_enqueue(ptsc_stream_request_t *req, void *stream);

/**
 * Synchronise `stream` (NULL: the bound stream) with the host and return
 * the first failure of the thread's enqueued operations not yet reported.
 */
PTSC_API int ptsc_enqueue_sync(ptsc_ctx_t *ctx, void *stream);

/**
 * Queue an allreduce over the lane (thread `index` of every rank, as
 * ptsc_allreduce) on `stream`: the stream copies `sbuf` (MPI_IN_PLACE:
 * `rbuf`) into a staging block, waits until every rank's contribution is
 * folded (in rank order, so every rank gets the same bits and
 * non-commutative operations their MPI meaning), and copies the result
 * into `rbuf`. Every rank's thread of the index must call it, in the same
 * order, which is the order its streams reach the calls (so one stream, or
 * streams ordered with each other); it matches no host-side collective. A contiguous datatype; a
 * predefined operation on a datatype MPI defines it for, or any operation
 * of MPI_Op_create (both must outlive a graph that captured the call).
 * @return as ptsc_send_enqueue (PTSC_ERR_UNSUPPORTED also for an
 *         operation not defined on the datatype), PTSC_ERR_ARG for MPI_OP_NULL.
 */
PTSC_API int ptsc_allreduce_enqueue(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count,
                                    MPI_Datatype type, MPI_Op op, void *stream);

/** Largest tag of the enqueued calls (their tags share MPI's tag space with the thread indices). */
PTSC_API int ptsc_enqueue_tag_max(int *tag_max);

/*
 * Arrays of requests, as MPI's: NULL requests (PTSC_REQUEST_NULL) are
 * skipped, every request completed is set to NULL, and all must be the
 * calling thread's. Where several complete, the first error is returned
 * and its detail names the request's index; the others complete all the
 * same. An `info` entry of a receive is as ptsc_wait_info fills it; that of
 * a send has rank, thread and tag -1, bytes 0 and error its status.
 * Argument errors (PTSC_ERR_ARG, PTSC_ERR_WRONG_THREAD) change nothing.
 */

/** The index ptsc_waitany and ptsc_testsome report when every request is NULL. */
#define PTSC_UNDEFINED MPI_UNDEFINED

/**
 * Wait until one of the `n` requests completes: *index is its position (the
 * lowest of those complete), it is set to NULL and `info` (may be NULL)
 * describes it; its status is returned. All NULL (or n = 0): *index =
 * PTSC_UNDEFINED at once.
 */
PTSC_API int ptsc_waitany(int n, ptsc_request_t reqs[], int *index, ptsc_info_t *info);

/**
 * *flag = 1 when every request is complete: all are then completed and set
 * to NULL (the first error returned). Otherwise *flag = 0 and no request is
 * touched, as MPI_Testall.
 */
PTSC_API int ptsc_testall(int n, ptsc_request_t reqs[], int *flag);

/**
 * Complete the requests that are complete now: *outcount of them, their
 * positions in indices[0 .. *outcount) and their infos in infos[] at the
 * same places (`infos` may be NULL; `indices` holds up to n). All NULL (or
 * n = 0): *outcount = PTSC_UNDEFINED.
 */
PTSC_API int ptsc_testsome(int n, ptsc_request_t reqs[], int *outcount, int indices[], ptsc_info_t infos[]);

/**
 * Ask for a request to be cancelled; complete it afterwards with a wait or
 * test as usual (the handle stays valid). A receive that no message has
 * matched yet is cancelled: its wait or test returns PTSC_ERR_CANCELLED
 * (info.error too), nothing was written to its buffer and the message it
 * would have matched goes to the next matching receive. A send, or a
 * receive a message already matched, is not cancellable: it completes
 * normally (MPI leaves a matched receive alone too, and ptsc never takes a
 * send back); so does a collective (ptsc_ibarrier, ...: MPI does not define
 * cancelling one). A NULL request is a no-op.
 * @return PTSC_OK; PTSC_ERR_ARG (req NULL); PTSC_ERR_WRONG_THREAD.
 */
PTSC_API int ptsc_cancel(ptsc_request_t *req);

/**
 * Release a request without waiting for it and set *req to NULL.
 * - complete already: completed here; returns its status;
 * - a send in flight: completes in the background, progressed by the
 *   thread's later ptsc calls; its buffer must stay untouched until some
 *   later synchronisation shows the message arrived. Its message is never
 *   lost: detaching the thread, its exit and ptsc_finalize wait for it. An
 *   error it meets later is logged (PTSC_LOG) since nobody waits for it;
 * - a receive in flight: refused with PTSC_ERR_PENDING, *req unchanged
 *   (its buffer would be written at a time the program cannot know): wait,
 *   test or ptsc_cancel it;
 * - a collective in flight (ptsc_ibarrier, ...): refused the same way, with
 *   PTSC_ERR_PENDING and *req unchanged: wait for it or test it.
 * A NULL request is a no-op.
 */
PTSC_API int ptsc_request_free(ptsc_request_t *req);

/* ------------------------------------------------------------------------ */
/* Collectives over the calling thread's lane: thread t of every rank.       */
/* Roots are ranks. Buffers follow the scope rules like point-to-point.       */
/* ------------------------------------------------------------------------ */

PTSC_API int ptsc_barrier(ptsc_ctx_t *ctx);
PTSC_API int ptsc_bcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int root);
PTSC_API int ptsc_reduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                         MPI_Op op, int root);
PTSC_API int ptsc_allreduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                            MPI_Op op);
PTSC_API int ptsc_allgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                            int rcount, MPI_Datatype rtype);
PTSC_API int ptsc_alltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                           int rcount, MPI_Datatype rtype);

/*
 * The rest of MPI's blocking collectives, with MPI's arguments and meaning,
 * over the same lane and with the same buffer rules. Arguments MPI declares
 * insignificant at a rank (a gather's receive side off the root, a
 * scatter's send side off it) are not checked there and may be NULL.
 * Counts and displacements (in elements of the datatype's extent) must not
 * be negative (PTSC_ERR_COUNT, PTSC_ERR_ARG; a NULL count or displacement
 * array: PTSC_ERR_ARG); the detail names the rank whose entry is wrong.
 * MPI_IN_PLACE: as the send buffer of a gather at its root, the receive
 * buffer of a scatter at its root (both modes), the send buffer of
 * allgatherv and alltoallv (PTSC_COMM=dup only; PTSC_ERR_UNSUPPORTED with
 * shared, like allgather and alltoall), the send buffer of the reductions.
 * Reductions keep the ranks' order (x_0 op x_1 op ...), so non-commutative
 * operations are safe in both modes; a predefined operation on a derived
 * datatype is PTSC_ERR_UNSUPPORTED as for ptsc_reduce. A staged device
 * receive buffer of a v-collective is copied in first, so that the gaps
 * between blocks keep their contents.
 */
PTSC_API int ptsc_gather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                         int rcount, MPI_Datatype rtype, int root);
PTSC_API int ptsc_scatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                          int rcount, MPI_Datatype rtype, int root);
PTSC_API int ptsc_gatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                          const int rcounts[], const int displs[], MPI_Datatype rtype, int root);
PTSC_API int ptsc_scatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                           MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root);
PTSC_API int ptsc_allgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                             const int rcounts[], const int displs[], MPI_Datatype rtype);
PTSC_API int ptsc_alltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                            MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                            MPI_Datatype rtype);
/** Reduce `count` elements per rank of sbuf (nranks x count), rank i getting block i in rbuf (count). */
PTSC_API int ptsc_reduce_scatter_block(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count,
                                       MPI_Datatype type, MPI_Op op);
/** rbuf at rank r = x_0 op ... op x_r. */
PTSC_API int ptsc_scan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                       MPI_Op op);
/** rbuf at rank r > 0 = x_0 op ... op x_{r-1}; rank 0's rbuf is left as MPI leaves it (undefined). */
PTSC_API int ptsc_exscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                         MPI_Op op);

/*
 * Non-blocking forms of the lane collectives, with MPI's semantics
 * (MPI_Ibarrier, MPI_Ibcast, ...): the same arguments, checks, statuses and
 * buffer rules as the blocking form, plus the request, which ptsc_wait,
 * ptsc_test and the array calls complete. The call returns at once, before
 * the other ranks joined: a program may start one, then exchange the
 * point-to-point messages its peers need before they start theirs, then
 * wait. Thread t of every rank must start the collectives of its lane in
 * the same order (blocking and non-blocking forms alike), as MPI requires
 * on one communicator; several may be in flight at once and complete in
 * any order.
 *
 * Buffers: synchronised (per scope) and, where MPI cannot read them,
 * staged at the call; a staged result is copied back on the thread's
 * stream when the request completes. Buffers, and the count and
 * displacement arrays of the v forms, must stay untouched until then.
 *
 * Progress: with PTSC_COMM=dup these are MPI's own non-blocking
 * collectives on the lane. With PTSC_COMM=shared they are schedules of
 * point-to-point messages that move only when the starting thread calls
 * into ptsc (a wait or test, another start, any blocking call), like
 * ptsc_isend's staged pieces; a thread that computes for a long time
 * between start and wait may call ptsc_test now and then. At most
 * ptsc_tag_max() + 1 collectives of a lane may be in flight at once there.
 *
 * Requests: ptsc_cancel leaves a collective to complete normally (MPI does
 * not define cancelling one); ptsc_request_free refuses one in flight with
 * PTSC_ERR_PENDING (its buffers are still in use) and completes a finished
 * one. Thread exit and ptsc_finalize complete the collectives in flight,
 * which needs the other ranks to take part, as MPI's would.
 * @return as the blocking form, plus PTSC_ERR_ARG for a NULL request pointer.
 */
PTSC_API int ptsc_ibarrier(ptsc_ctx_t *ctx, ptsc_request_t *req);
PTSC_API int ptsc_ibcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int root,
                         ptsc_request_t *req);
PTSC_API int ptsc_ireduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                          MPI_Op op, int root, ptsc_request_t *req);
PTSC_API int ptsc_iallreduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                             MPI_Op op, ptsc_request_t *req);
PTSC_API int ptsc_iscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                        MPI_Op op, ptsc_request_t *req);
PTSC_API int ptsc_iexscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                          MPI_Op op, ptsc_request_t *req);
PTSC_API int ptsc_ireduce_scatter_block(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count,
                                        MPI_Datatype type, MPI_Op op, ptsc_request_t *req);
PTSC_API int ptsc_igather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                          int rcount, MPI_Datatype rtype, int root, ptsc_request_t *req);
PTSC_API int ptsc_iscatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                           int rcount, MPI_Datatype rtype, int root, ptsc_request_t *req);
PTSC_API int ptsc_iallgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                             int rcount, MPI_Datatype rtype, ptsc_request_t *req);
PTSC_API int ptsc_ialltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                            int rcount, MPI_Datatype rtype, ptsc_request_t *req);
PTSC_API int ptsc_igatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                           const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                           ptsc_request_t *req);
PTSC_API int ptsc_iscatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                            MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                            ptsc_request_t *req);
PTSC_API int ptsc_iallgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                              const int rcounts[], const int displs[], MPI_Datatype rtype,
                              ptsc_request_t *req);
PTSC_API int ptsc_ialltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                             MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                             MPI_Datatype rtype, ptsc_request_t *req);

/* ------------------------------------------------------------------------ */
/* World collectives: every thread of every rank                             */
/* ------------------------------------------------------------------------ */

/*
 * Collectives over threads 0 .. nthreads-1 of every rank (docs/design.md,
 * "World collectives"). Every participating thread of every rank makes the
 * same call with the same nthreads, count, datatype, op and root; a rank's
 * world calls come one at a time, in the same order on every rank. The
 * threads of a rank combine in shared memory and one thread per rank makes
 * one MPI collective on a communicator of ptsc's own (never a lane), in
 * both PTSC_COMM modes.
 *
 * nthreads: the number of threads per rank taking part, equal on every
 * rank; they are the threads attached as indices 0 .. nthreads-1.
 * PTSC_WORLD_TEAM means the calling OpenMP team (every thread of a
 * ptsc_omp_run region, or of the program's region whose threads attached
 * with ptsc_omp_attach); a pthreads program passes its count. A thread
 * whose index is not below nthreads gets PTSC_ERR_THREAD and takes no part;
 * it must not start its next world call before the others finished theirs.
 *
 * Agreement and errors: the thread count, the call, count, element size,
 * op and root are compared between the threads of a rank and between
 * ranks; a difference, or a failed argument check on any participating
 * thread of any rank, fails the call on every thread of every rank with
 * PTSC_ERR_MISMATCH (the thread whose arguments were wrong gets its own
 * status), and nothing is written. What cannot be detected, as in MPI: a
 * thread that never calls, or that fails before it is known as a
 * participant (a context of another thread, an index not below nthreads)
 * leaves the others waiting; allreduce compares the count and datatype only
 * after its one collective, so a count that differs between ranks is
 * erroneous there.
 *
 * Roots are (rank, thread) pairs. Datatypes: reductions take MPI's
 * predefined operations on the predefined datatypes MPI defines them for
 * (PTSC_ERR_UNSUPPORTED otherwise); bcast and allgather take datatypes
 * without holes. Buffers follow the lane collectives' rules: synchronised
 * per scope; a device buffer is copied to the thread's pinned memory, the
 * result combined on the host and copied back on the thread's stream.
 *
 * Reductions are deterministic: with p_r = x(r,0) op x(r,1) op ... op
 * x(r,nthreads-1), left to right in thread index order, every thread gets
 * p_0 op p_1 op ... op p_(nranks-1), left to right in rank order, the same
 * bits on every rank and in every run.
 */

/** nthreads of a world call: the size of the calling OpenMP team (inside an active parallel region). */
#define PTSC_WORLD_TEAM 0

/** Return once every participating thread of every rank has called. */
PTSC_API int ptsc_world_barrier(ptsc_ctx_t *ctx, int nthreads);
/** `buf` of thread root_thread of rank root_rank to `buf` of every participating thread. */
PTSC_API int ptsc_world_bcast(ptsc_ctx_t *ctx, int nthreads, void *buf, int count, MPI_Datatype type,
                              int root_rank, int root_thread);
/**
 * Reduce `count` elements of every thread's sbuf into rbuf of thread
 * root_thread of rank root_rank (rbuf is ignored elsewhere and may be NULL
 * there). sbuf may be MPI_IN_PLACE at the root thread (input in rbuf).
 */
PTSC_API int ptsc_world_reduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                               MPI_Datatype type, MPI_Op op, int root_rank, int root_thread);
/** Every thread's rbuf gets the reduction of every thread's sbuf (sbuf may be MPI_IN_PLACE). */
PTSC_API int ptsc_world_allreduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                                  MPI_Datatype type, MPI_Op op);
/**
 * Every thread's rbuf (nranks x nthreads x count elements) gets the `count`
 * elements of thread t of rank r at block r * nthreads + t.
 */
PTSC_API int ptsc_world_allgather(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, int count,
                                  MPI_Datatype type, void *rbuf);

/* ------------------------------------------------------------------------ */
/* OpenMP helpers                                                            */
/* ------------------------------------------------------------------------ */

/** Body run on each thread by ptsc_omp_run. Return PTSC_OK or an error. */
typedef int (*ptsc_thread_fn)(ptsc_ctx_t *ctx, void *arg);

/**
 * Open a parallel region of `nthreads` threads (<= 0: min(omp_get_max_threads,
 * PTSC_MAX_THREADS)), attach each as its OpenMP thread number, call
 * fn(ctx, arg), and detach the threads it attached. Call from outside any
 * parallel region (PTSC_ERR_NESTED otherwise). fn runs on every thread or
 * on none: if OpenMP gives fewer threads, or any thread cannot attach, no
 * thread runs it (a body waiting for its peers would wait forever).
 * @return PTSC_OK, or the error of the lowest-numbered thread that failed
 *         (its detail is copied to the caller's ptsc_last_error).
 */
PTSC_API int ptsc_omp_run(int nthreads, ptsc_thread_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

/* Typed stream accessor for programs that include the CUDA runtime first. */
#if defined(__CUDA_RUNTIME_H__) || defined(__CUDA_RUNTIME_API_H__)
static inline cudaStream_t ptsc_ctx_cuda_stream(const ptsc_ctx_t *ctx)
{
    void *s = 0;
    return ptsc_ctx_stream(ctx, &s) == PTSC_OK ? (cudaStream_t)s : (cudaStream_t)0;
}
#endif

#endif /* PTSC_H */
