/*
 * libptsc-mpi: the scope policy applied to plain MPI calls, for programs
 * that call MPI directly (C written for a CUDA-aware MPI, mpi4py, bindings
 * that reach libmpi's C symbols). Loaded before libmpi (`ptsc-run`, or
 * LD_PRELOAD, or linked before libmpi), it defines the MPI calls that take
 * a buffer, and before MPI reads or writes a device, managed or pinned
 * buffer it synchronises as PTSC_SYNC_SCOPE says, then forwards the call to
 * its PMPI_ entry point unchanged. Host buffers are forwarded after the
 * class lookup alone (no CUDA call without a device).
 *
 * It is a separate shared library built from the same objects as libptsc
 * (the class cache of memory.c, the GPU layer, the variable table), not a
 * second implementation; it does not call ptsc_init (which needs
 * MPI_THREAD_MULTIPLE and creates lanes), only the parts that make no MPI
 * call: configuration, device discovery and the class cache, set up right
 * after the program's MPI_Init or MPI_Init_thread. Its copy of ptsc's
 * state is private to it (hidden symbols), so a program that also links
 * libptsc keeps two independent copies.
 *
 * Scopes, for threads ptsc does not know:
 *   auto, global  the legacy default stream (every blocking stream);
 *   thread        an event recorded on the calling thread's per-thread
 *                 default stream and waited for (code built with
 *                 --default-stream per-thread; also waits for legacy-stream
 *                 work queued before);
 *   device        cudaDeviceSynchronize;
 *   none          nothing.
 * A failed sync is not passed to MPI: the call returns MPI_ERR_OTHER (the
 * communicator's error handler is not invoked) and ptsc logs the reason.
 *
 * Not yet here: staging for an MPI that is not CUDA-aware, persistent
 * requests (MPI_Start), one-sided calls, the race check and a call to name
 * a thread's stream; docs/design.md lists what is intercepted.
 */
#include "ptsc_internal.h"

#include <pthread.h>

#define PTSC_MPI_API __attribute__((visibility("default")))

static atomic_int ready; /* set up after MPI_Init*; cleared at MPI_Finalize */
static atomic_ulong n_calls, n_synced, n_failed;
static pthread_key_t ev_key;

static void ev_destroy(void *ev) { ptsc__gpu_event_destroy(ev); }

static const char *scope_name(int scope)
{
    static const char *const names[] = {"auto", "none", "thread", "global", "device"};
    return scope >= 0 && scope < 5 ? names[scope] : "?";
}

/* The configuration, devices and class cache; logs and stays off on error
 * (calls are then forwarded unchanged). */
static void setup(void)
{
    int rc = ptsc__config_load(&ptsc__g.cfg);
    if (rc == PTSC_OK) {
        rc = ptsc__gpu_init(&ptsc__g.ndevices);
    }
    if (rc != PTSC_OK) {
        ptsc__log(PTSC__LOG_ERROR, "libptsc-mpi: not active: %s", ptsc_last_error());
        return;
    }
    atomic_store(&ptsc__g.mem_epoch, 1u);
    if (ptsc__g.ndevices > 0)
        pthread_key_create(&ev_key, ev_destroy);
    atomic_store(&ready, 1);
}

/* The thread scope for a thread ptsc does not know: its per-thread default
 * stream, through an event of its own (src/sync.c explains the event). */
static int thread_sync(void)
{
    void *ev = pthread_getspecific(ev_key), *stream;
    int rc = PTSC_OK;
    if (!ev) {
        if ((rc = ptsc__gpu_event_create(&ev)) != PTSC_OK)
            return rc;
        pthread_setspecific(ev_key, ev);
    }
    if ((rc = ptsc__gpu_stream_bind(PTSC_STREAM_PER_THREAD, &stream)) == PTSC_OK &&
        (rc = ptsc__gpu_event_record(ev, stream)) == PTSC_OK)
        rc = ptsc__gpu_event_sync(ev);
    return rc;
}

/* Before MPI touches `buf`: MPI_SUCCESS, or MPI_ERR_OTHER when the class
 * lookup or the sync failed. */
static int before(const void *buf, const char *call)
{
    if (!atomic_load_explicit(&ready, memory_order_acquire) || !buf || buf == MPI_IN_PLACE ||
        buf == MPI_BOTTOM)
        return MPI_SUCCESS;
    atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
    ptsc_memclass_t cls;
    int rc = ptsc__mem_classify(buf, &cls);
    if (rc == PTSC_OK && ptsc__mem_needs_sync(cls)) {
        int scope = ptsc__g.cfg.sync_scope == PTSC_SCOPE_AUTO ? PTSC_SCOPE_GLOBAL : ptsc__g.cfg.sync_scope;
        rc = scope == PTSC_SCOPE_NONE     ? PTSC_OK
             : scope == PTSC_SCOPE_THREAD ? thread_sync()
             : scope == PTSC_SCOPE_GLOBAL ? ptsc__gpu_legacy_sync()
                                          : ptsc__gpu_device_sync();
        if (rc == PTSC_OK && scope != PTSC_SCOPE_NONE)
            atomic_fetch_add_explicit(&n_synced, 1, memory_order_relaxed);
    }
    if (rc == PTSC_OK)
        return MPI_SUCCESS;
    atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
    ptsc__log(PTSC__LOG_ERROR, "libptsc-mpi: %s: %s", call, ptsc_last_error());
    return MPI_ERR_OTHER;
}

/* Two buffers (send and receive side of one call). */
static int before2(const void *a, const void *b, const char *call)
{
    int rc = before(a, call);
    return rc != MPI_SUCCESS ? rc : before(b, call);
}

/*
 * Counters of this process: buffer arguments seen, syncs made, failures.
 * 1 while the interposer is active (between MPI_Init and MPI_Finalize).
 * Found with dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer") by ptsc-info and
 * tests, so programs need no header.
 */
PTSC_MPI_API int ptsc_mpi_interposer(unsigned long *calls, unsigned long *synced, unsigned long *failed);
int ptsc_mpi_interposer(unsigned long *calls, unsigned long *synced, unsigned long *failed)
{
    if (calls)
        *calls = atomic_load(&n_calls);
    if (synced)
        *synced = atomic_load(&n_synced);
    if (failed)
        *failed = atomic_load(&n_failed);
    return atomic_load(&ready);
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

PTSC_MPI_API int MPI_Finalize(void)
{
    if (atomic_exchange(&ready, 0)) {
        if (ptsc__g.cfg.stats) {
            int rank = -1;
            PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
            fprintf(stderr, "[ptsc-mpi r%d] buffers %lu synced %lu failed %lu (scope %s)\n", rank,
                    atomic_load(&n_calls), atomic_load(&n_synced), atomic_load(&n_failed),
                    scope_name(ptsc__g.cfg.sync_scope));
        }
        ptsc__gpu_finalize();
    }
    return PMPI_Finalize();
}

/* ------------------------------------------------------------------------ */
/* Point-to-point                                                            */
/* ------------------------------------------------------------------------ */

#define CHECKED(expr)                \
    do {                             \
        int ptsc_rc_ = (expr);       \
        if (ptsc_rc_ != MPI_SUCCESS) \
            return ptsc_rc_;         \
    } while (0)

#define SEND_LIKE(NAME)                                                                           \
    PTSC_MPI_API int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, \
                                MPI_Comm comm)                                                    \
    {                                                                                             \
        CHECKED(before(buf, "MPI_" #NAME));                                                       \
        return PMPI_##NAME(buf, count, type, dest, tag, comm);                                    \
    }
SEND_LIKE(Send)
SEND_LIKE(Ssend)
SEND_LIKE(Bsend)
SEND_LIKE(Rsend)

#define ISEND_LIKE(NAME)                                                                          \
    PTSC_MPI_API int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, \
                                MPI_Comm comm, MPI_Request *req)                                  \
    {                                                                                             \
        CHECKED(before(buf, "MPI_" #NAME));                                                       \
        return PMPI_##NAME(buf, count, type, dest, tag, comm, req);                               \
    }
ISEND_LIKE(Isend)
ISEND_LIKE(Issend)
ISEND_LIKE(Ibsend)
ISEND_LIKE(Irsend)

PTSC_MPI_API int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                          MPI_Status *status)
{
    CHECKED(before(buf, "MPI_Recv"));
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

PTSC_MPI_API int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                           MPI_Request *req)
{
    CHECKED(before(buf, "MPI_Irecv"));
    return PMPI_Irecv(buf, count, type, source, tag, comm, req);
}

PTSC_MPI_API int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Status *status)
{
    CHECKED(before(buf, "MPI_Mrecv"));
    return PMPI_Mrecv(buf, count, type, msg, status);
}

PTSC_MPI_API int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *msg, MPI_Request *req)
{
    CHECKED(before(buf, "MPI_Imrecv"));
    return PMPI_Imrecv(buf, count, type, msg, req);
}

PTSC_MPI_API int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                              void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                              MPI_Status *status)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Sendrecv"));
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status);
}

PTSC_MPI_API int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag, int source,
                                      int rtag, MPI_Comm comm, MPI_Status *status)
{
    CHECKED(before(buf, "MPI_Sendrecv_replace"));
    return PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, status);
}

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */

PTSC_MPI_API int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    CHECKED(before(buf, "MPI_Bcast"));
    return PMPI_Bcast(buf, count, type, root, comm);
}

PTSC_MPI_API int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                            MPI_Request *req)
{
    CHECKED(before(buf, "MPI_Ibcast"));
    return PMPI_Ibcast(buf, count, type, root, comm, req);
}

PTSC_MPI_API int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                            MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Reduce"));
    return PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
}

PTSC_MPI_API int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                             MPI_Comm comm, MPI_Request *req)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Ireduce"));
    return PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req);
}

/* Calls shaped (sbuf, rbuf, count, type, op, comm): allreduce and scans. */
#define REDUCE_LIKE(NAME, INAME)                                                                        \
    PTSC_MPI_API int MPI_##NAME(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,  \
                                MPI_Comm comm)                                                          \
    {                                                                                                   \
        CHECKED(before2(sbuf, rbuf, "MPI_" #NAME));                                                     \
        return PMPI_##NAME(sbuf, rbuf, count, type, op, comm);                                          \
    }                                                                                                   \
    PTSC_MPI_API int MPI_##INAME(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, \
                                 MPI_Comm comm, MPI_Request *req)                                       \
    {                                                                                                   \
        CHECKED(before2(sbuf, rbuf, "MPI_" #INAME));                                                    \
        return PMPI_##INAME(sbuf, rbuf, count, type, op, comm, req);                                    \
    }
REDUCE_LIKE(Allreduce, Iallreduce)
REDUCE_LIKE(Scan, Iscan)
REDUCE_LIKE(Exscan, Iexscan)

PTSC_MPI_API int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                                          MPI_Op op, MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Reduce_scatter_block"));
    return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm);
}

PTSC_MPI_API int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                                    MPI_Op op, MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Reduce_scatter"));
    return PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm);
}

/* Calls shaped (sbuf, scount, stype, rbuf, rcount, rtype, [root,] comm). */
#define GATHER_ROOT(NAME, INAME)                                                                           \
    PTSC_MPI_API int MPI_##NAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,  \
                                MPI_Datatype rtype, int root, MPI_Comm comm)                               \
    {                                                                                                      \
        CHECKED(before2(sbuf, rbuf, "MPI_" #NAME));                                                        \
        return PMPI_##NAME(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);                          \
    }                                                                                                      \
    PTSC_MPI_API int MPI_##INAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, \
                                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)            \
    {                                                                                                      \
        CHECKED(before2(sbuf, rbuf, "MPI_" #INAME));                                                       \
        return PMPI_##INAME(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);                    \
    }
GATHER_ROOT(Gather, Igather)
GATHER_ROOT(Scatter, Iscatter)

#define GATHER_ALL(NAME, INAME)                                                                            \
    PTSC_MPI_API int MPI_##NAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,  \
                                MPI_Datatype rtype, MPI_Comm comm)                                         \
    {                                                                                                      \
        CHECKED(before2(sbuf, rbuf, "MPI_" #NAME));                                                        \
        return PMPI_##NAME(sbuf, scount, stype, rbuf, rcount, rtype, comm);                                \
    }                                                                                                      \
    PTSC_MPI_API int MPI_##INAME(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, \
                                 MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)                      \
    {                                                                                                      \
        CHECKED(before2(sbuf, rbuf, "MPI_" #INAME));                                                       \
        return PMPI_##INAME(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);                          \
    }
GATHER_ALL(Allgather, Iallgather)
GATHER_ALL(Alltoall, Ialltoall)

PTSC_MPI_API int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                             const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                             MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Gatherv"));
    return PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
}

PTSC_MPI_API int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                              void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Scatterv"));
    return PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
}

PTSC_MPI_API int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                                const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Allgatherv"));
    return PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
}

PTSC_MPI_API int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                               void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                               MPI_Comm comm)
{
    CHECKED(before2(sbuf, rbuf, "MPI_Alltoallv"));
    return PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
}
