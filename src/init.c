/* Process life cycle: ptsc_init, ptsc_finalize and what they report. */
#include "ptsc_internal.h"

#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Init and lanes must agree on every rank: a rank with other lanes or another
 * message protocol would mismatch messages, so a difference fails init on all
 * ranks alike (every rank sees the same reduced values). */
static int check_agreement(MPI_Comm world)
{
    long long mine[4] = {ptsc__g.nthreads, ptsc__g.cfg.comm, ptsc__g.framed,
                         (long long)ptsc__g.cfg.staging_chunk};
    long long v[8], hi[8];
    for (int i = 0; i < 4; i++) {
        v[i] = mine[i];
        v[i + 4] = -mine[i];
    }
    int rc = MPI_Allreduce(v, hi, 8, MPI_LONG_LONG, MPI_MAX, world);
    if (rc != MPI_SUCCESS)
        return ptsc__err_mpi(rc, "ptsc_init: MPI_Allreduce");
    static const char *what[4] = {"PTSC_MAX_THREADS", "PTSC_COMM", "staging (PTSC_STAGING, PTSC_CUDA_AWARE)",
                                  "PTSC_STAGING_CHUNK"};
    for (int i = 0; i < 4; i++)
        if (hi[i] != -hi[i + 4])
            return ptsc__err(
                PTSC_ERR_CONFIG,
                "ptsc_init: ranks disagree on %s (values %lld..%lld); set it alike on every rank", what[i],
                -hi[i + 4], hi[i]);
    return PTSC_OK;
}

static int setup_node(MPI_Comm world)
{
    MPI_Comm node;
    int rc = MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return ptsc__err_mpi(rc, "ptsc_init: MPI_Comm_split_type");
    MPI_Comm_rank(node, &ptsc__g.local_rank);
    MPI_Comm_size(node, &ptsc__g.local_size);
    MPI_Comm_free(&node);
    return PTSC_OK;
}

static int init_mpi(int *argc, char ***argv)
{
    int flag = 0, provided = MPI_THREAD_SINGLE;
    MPI_Finalized(&flag);
    if (flag)
        return ptsc__err(PTSC_ERR_MPI, "ptsc_init: MPI has already been finalized");
    MPI_Initialized(&flag);
    if (!flag) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return ptsc__err(PTSC_ERR_MPI, "ptsc_init: MPI_Init_thread failed (%d)", rc);
        ptsc__g.own_mpi = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
        return ptsc__err(PTSC_ERR_THREAD_LEVEL,
                         "ptsc_init: MPI provides thread level %d, ptsc needs MPI_THREAD_MULTIPLE (%d); %s",
                         provided, MPI_THREAD_MULTIPLE,
                         ptsc__g.own_mpi
                             ? "this MPI library lacks thread support"
                             : "initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
    return PTSC_OK;
}

static int choose_paths(void)
{
    const ptsc__config_t *c = &ptsc__g.cfg;
    int rc = ptsc__gpu_init(&ptsc__g.ndevices);
    if (rc != PTSC_OK)
        return rc;
    if (c->cuda_aware == PTSC__TRI_AUTO)
        ptsc__g.cuda_aware = ptsc__mpi_cuda_support() == 1;
    else
        ptsc__g.cuda_aware = c->cuda_aware == PTSC__TRI_YES;
    /* Without a device nothing needs staging, but `always` still selects the
     * pieces wire format, so that format is exercised on CPU-only machines. */
    if (ptsc__g.ndevices == 0)
        ptsc__g.staging = c->staging == PTSC__STAGING_ALWAYS;
    else if (c->staging == PTSC__STAGING_AUTO)
        ptsc__g.staging = !ptsc__g.cuda_aware;
    else
        ptsc__g.staging = c->staging == PTSC__STAGING_ALWAYS;
    /* A job that stages frames its messages above a chunk (engine.c); without
     * a device, `always` sends host buffers through the ring instead, so the
     * staging state machine runs on CPU-only machines too. */
    ptsc__g.framed = ptsc__g.staging;
    ptsc__g.stage_host = ptsc__g.staging && ptsc__g.ndevices == 0;
    /* On a CUDA-aware MPI, device messages below PTSC_DIRECT_MIN are staged
     * (one slot, so never above a chunk); auto is the crossover measured on
     * an H200 (docs/perf). */
    size_t dmin = c->direct_min == PTSC__SIZE_AUTO ? PTSC__DIRECT_MIN_AUTO : c->direct_min;
    ptsc__g.direct_min = ptsc__g.cuda_aware && !ptsc__g.staging ? dmin : 0;
    if (ptsc__g.direct_min > c->staging_chunk)
        ptsc__g.direct_min = c->staging_chunk;
    if (ptsc__g.ndevices > 0 && !ptsc__g.staging && !ptsc__g.cuda_aware)
        ptsc__log(PTSC__LOG_WARN, "PTSC_STAGING=never with an MPI that is not CUDA-aware: device buffers "
                                  "will reach MPI as they are");
    return PTSC_OK;
}

/* The first collective of init: every rank tells whether its own
 * configuration loaded (`cfg_rc`), so that a rank with a bad PTSC_* value
 * fails init with its own detail and every other rank learns of it, rather
 * than waiting in a collective the failed rank never joins. */
static int agree_config_loaded(MPI_Comm world, int cfg_rc)
{
    char detail[PTSC__DETAIL_LEN];
    snprintf(detail, sizeof detail, "%s", ptsc__tls()->detail);
    int v[2] = {cfg_rc != PTSC_OK, cfg_rc != PTSC_OK ? -ptsc__g.rank : INT_MIN}, hi[2];
    int mrc = MPI_Allreduce(v, hi, 2, MPI_INT, MPI_MAX, world);
    if (mrc != MPI_SUCCESS)
        return ptsc__err_mpi(mrc, "ptsc_init: MPI_Allreduce");
    if (cfg_rc != PTSC_OK) {
        ptsc__err_set_detail(detail);
        return cfg_rc;
    }
    if (hi[0])
        return ptsc__err(
            PTSC_ERR_CONFIG,
            "ptsc_init: rank %d has a bad PTSC_* value (its ptsc_init names it); set it alike on "
            "every rank",
            -hi[1]);
    return PTSC_OK;
}

/* PTSC_COMM=dup duplicates MPI_COMM_WORLD once per thread slot; an MPI with
 * fewer communicators than that (MPICH 4.0: "Too many communicators", about
 * 2045 per process) fails a duplicate on every rank alike. */
static int lanes_failed(int rc)
{
    if (rc != PTSC_ERR_MPI || ptsc__g.cfg.comm == PTSC__COMM_SHARED)
        return rc;
    char detail[PTSC__DETAIL_LEN];
    snprintf(detail, sizeof detail, "%s", ptsc__tls()->detail);
    return ptsc__err(PTSC_ERR_CONFIG,
                     "ptsc_init: MPI could not create the %d lanes of PTSC_MAX_THREADS=%d (PTSC_COMM=dup "
                     "duplicates MPI_COMM_WORLD once per slot; MPICH 4.0 has about 2045 communicators per "
                     "process): lower PTSC_MAX_THREADS or use PTSC_COMM=shared (%s)",
                     ptsc__g.nthreads, ptsc__g.nthreads, detail);
}

/* Init's collective part, from the first agreement on; `cfg_rc` is how
 * this rank's configuration loaded. */
static int init_collective(MPI_Comm world, int cfg_rc)
{
    int rc = agree_config_loaded(world, cfg_rc);
    if (rc != PTSC_OK)
        return rc;
    if (ptsc__g.rank == 0)
        ptsc__config_warn_unknown();
    ptsc__g.nthreads = ptsc__config_slots_now(&ptsc__g.cfg, NULL, NULL, 0);
    if ((rc = setup_node(world)) != PTSC_OK || (rc = choose_paths()) != PTSC_OK ||
        (rc = check_agreement(world)) != PTSC_OK)
        goto undo_gpu;
    if ((rc = lanes_failed(ptsc__lanes_create(world))) != PTSC_OK)
        goto undo_gpu;
    if ((rc = ptsc__world_setup(world)) != PTSC_OK)
        goto undo_world;
    if ((rc = ptsc__enqueue_setup(world)) != PTSC_OK)
        goto undo_world;
    if ((rc = ptsc__watchdog_start(ptsc__g.nthreads)) != PTSC_OK)
        goto undo_enqueue;
    if ((rc = ptsc__ctx_setup()) != PTSC_OK) {
        ptsc__watchdog_stop();
        goto undo_enqueue;
    }
    if ((rc = ptsc__engine_setup()) != PTSC_OK) {
        ptsc__ctx_teardown();
        ptsc__watchdog_stop();
        goto undo_enqueue;
    }
    /* A new epoch, never an old one (a store of 1 would revive entries of
     * an earlier init): every table is empty now, and with tracking on
     * (started above, in ptsc__gpu_init) every later change bumps it. */
    atomic_fetch_add(&ptsc__g.mem_epoch, 1u);
    atomic_store(&ptsc__g.devmask, 0ul);
    return PTSC_OK;

undo_enqueue:
    ptsc__enqueue_teardown();
undo_world:
    ptsc__world_teardown();
    ptsc__lanes_free();
undo_gpu:
    ptsc__gpu_finalize();
    return rc;
}

static int init_body(int *argc, char ***argv)
{
    /* A bad configuration fails init only after the other ranks were told
     * (agree_config_loaded): MPI is initialised all the same. */
    int cfg_rc = ptsc__config_load(&ptsc__g.cfg);
    char cfg_detail[PTSC__DETAIL_LEN];
    snprintf(cfg_detail, sizeof cfg_detail, "%s", ptsc__tls()->detail);
    int rc = init_mpi(argc, argv);
    if (rc != PTSC_OK && cfg_rc != PTSC_OK) {
        rc = cfg_rc; /* the configuration's detail, which came first */
        ptsc__err_set_detail(cfg_detail);
    }
    if (rc == PTSC_OK) {
        MPI_Comm world = MPI_COMM_WORLD;
        MPI_Comm_rank(world, &ptsc__g.rank);
        MPI_Comm_size(world, &ptsc__g.nranks);
        /* Init's collectives return their errors (duplicating many lanes
         * can run out of communicators); the program's handler is back
         * once init ends. */
        MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
        MPI_Comm_get_errhandler(world, &handler);
        MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
        rc = init_collective(world, cfg_rc);
        MPI_Comm_set_errhandler(world, handler);
        MPI_Errhandler_free(&handler);
    }
    if (rc == PTSC_OK)
        return PTSC_OK;
    /* A failed init leaves MPI as it found it only where ptsc started it and
     * nothing else can use it: the thread level is final for the process. */
    if (ptsc__g.own_mpi && rc == PTSC_ERR_THREAD_LEVEL) {
        MPI_Finalize();
        ptsc__g.own_mpi = 0;
    }
    ptsc__log(PTSC__LOG_ERROR, "%s", ptsc__tls()->detail);
    return rc;
}

/* One ptsc_init runs at a time (state INIT); a call that finds another one
 * running waits for its outcome. */
int ptsc_init(int *argc, char ***argv)
{
    ptsc__err_clear();
    int waited = 0;
    pthread_mutex_lock(&ptsc__g.lock);
    int state = atomic_load(&ptsc__g.state);
    while (state == PTSC__STATE_INIT) {
        waited = 1;
        pthread_cond_wait(&ptsc__g.cond, &ptsc__g.lock);
        state = atomic_load(&ptsc__g.state);
    }
    if (state == PTSC__STATE_NONE)
        atomic_store(&ptsc__g.state, PTSC__STATE_INIT);
    pthread_mutex_unlock(&ptsc__g.lock);
    if (state == PTSC__STATE_READY)
        return ptsc__err(PTSC_ERR_ALREADY_INITIALIZED, "ptsc_init: %s",
                         waited ? "initialised meanwhile by a ptsc_init of another thread"
                                : "already initialised");
    if (state != PTSC__STATE_NONE)
        return ptsc__err(PTSC_ERR_FINALIZED,
                         "ptsc_init: ptsc cannot be initialised again after ptsc_finalize");

    int rc = init_body(argc, argv);
    pthread_mutex_lock(&ptsc__g.lock);
    if (rc == PTSC_OK)
        ptsc__log_set_rank(ptsc__g.rank);
    atomic_store_explicit(&ptsc__g.state, rc == PTSC_OK ? PTSC__STATE_READY : PTSC__STATE_NONE,
                          memory_order_release);
    pthread_cond_broadcast(&ptsc__g.cond);
    pthread_mutex_unlock(&ptsc__g.lock);
    if (rc == PTSC_OK) {
        if (ptsc__g.cfg.print_config && ptsc__g.rank == 0) {
            printf("ptsc %s: %d ranks x %d threads, %d devices, cuda-aware %s, staging %s\n",
                   PTSC_VERSION_STRING, ptsc__g.nranks, ptsc__g.nthreads, ptsc__g.ndevices,
                   ptsc__g.cuda_aware ? "yes" : "no", ptsc__g.staging ? "on" : "off");
            ptsc__config_print(&ptsc__g.cfg, stdout);
            fflush(stdout);
        }
        ptsc__log(PTSC__LOG_INFO, "initialised: %d ranks x %d threads, %d devices", ptsc__g.nranks,
                  ptsc__g.nthreads, ptsc__g.ndevices);
    }
    return rc;
}

/*
 * Finalize against thread exit and detach (include/ptsc.h): the state turns
 * FINALIZING under the lock, so from then on no thread starts to attach or
 * release a context; those already attaching or releasing (ptsc__g.transit)
 * are waited for; then every context still in a slot is this thread's to
 * release (ptsc__ctx_teardown), and a thread that exits now leaves it alone.
 */
int ptsc_finalize(void)
{
    int rc = ptsc__check_ready("ptsc_finalize");
    if (rc != PTSC_OK)
        return rc;
    pthread_mutex_lock(&ptsc__g.lock);
    int expected = PTSC__STATE_READY;
    if (!atomic_compare_exchange_strong(&ptsc__g.state, &expected, PTSC__STATE_FINALIZING)) {
        pthread_mutex_unlock(&ptsc__g.lock);
        return ptsc__err(PTSC_ERR_FINALIZED, "ptsc_finalize: already called by another thread");
    }
    ptsc__log_set_rank(-1);
    while (ptsc__g.transit > 0)
        pthread_cond_wait(&ptsc__g.cond, &ptsc__g.lock);
    pthread_mutex_unlock(&ptsc__g.lock);
    if (ptsc__g.cfg.stats)
        ptsc__ctx_print_stats(stderr);
    /* Enqueued operations first: streams may wait for them. Then the agent
     * stops: finalize drains every context itself. */
    ptsc__enqueue_teardown();
    ptsc__progress_stop();
    ptsc__ctx_teardown();
    ptsc__progress_teardown();
    ptsc__watchdog_stop();
    ptsc__world_teardown();
    ptsc__lanes_free();
    ptsc__gpu_finalize();
    atomic_store_explicit(&ptsc__g.state, PTSC__STATE_DONE, memory_order_release);
    /* Releasing the contexts may have recorded details of their own (a
     * drained request); the call succeeded. */
    ptsc__err_clear();
    if (ptsc__g.own_mpi) {
        int mrc = MPI_Finalize();
        if (mrc != MPI_SUCCESS)
            return ptsc__err(PTSC_ERR_MPI, "ptsc_finalize: MPI_Finalize failed (%d)", mrc);
    }
    return PTSC_OK;
}

int ptsc_initialized(int *flag)
{
    if (!flag)
        return ptsc__err_query(PTSC_ERR_ARG, "ptsc_initialized: flag is NULL");
    *flag = atomic_load(&ptsc__g.state) == PTSC__STATE_READY;
    return PTSC_OK;
}

int ptsc_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = PTSC_VERSION_MAJOR;
    if (minor)
        *minor = PTSC_VERSION_MINOR;
    if (patch)
        *patch = PTSC_VERSION_PATCH;
    return PTSC_OK;
}

const char *ptsc_version_string(void) { return PTSC_VERSION_STRING; }

int ptsc_rank(int *rank)
{
    int rc = ptsc__check_ready_query("ptsc_rank");
    if (rc != PTSC_OK)
        return rc;
    if (!rank)
        return ptsc__err_query(PTSC_ERR_ARG, "ptsc_rank: rank is NULL");
    *rank = ptsc__g.rank;
    return PTSC_OK;
}

int ptsc_size(int *nranks, int *nthreads)
{
    int rc = ptsc__check_ready_query("ptsc_size");
    if (rc != PTSC_OK)
        return rc;
    if (nranks)
        *nranks = ptsc__g.nranks;
    if (nthreads)
        *nthreads = ptsc__g.nthreads;
    return PTSC_OK;
}

int ptsc_tag_max(int *tag_max)
{
    int rc = ptsc__check_ready_query("ptsc_tag_max");
    if (rc != PTSC_OK)
        return rc;
    if (!tag_max)
        return ptsc__err_query(PTSC_ERR_ARG, "ptsc_tag_max: tag_max is NULL");
    *tag_max = ptsc__g.tag_max;
    return PTSC_OK;
}

int ptsc_features(int *cuda, int *cuda_aware, int *staging)
{
    int rc = ptsc__check_ready_query("ptsc_features");
    if (rc != PTSC_OK)
        return rc;
    if (cuda)
        *cuda = ptsc__g.ndevices > 0;
    if (cuda_aware)
        *cuda_aware = ptsc__g.cuda_aware;
    if (staging)
        *staging = ptsc__g.staging;
    return PTSC_OK;
}
