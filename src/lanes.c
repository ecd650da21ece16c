/*
 * Communicator lanes and (rank, thread) addressing.
 *
 * PTSC_COMM=dup: lane t is a duplicate of MPI_COMM_WORLD, created for every
 * thread index t in the same order on every rank during ptsc_init (never
 * from concurrent threads: MPI_Comm_dup is collective). A message for thread
 * j travels on lane j, so only thread j's receives can match it; the sender's
 * thread index and the message kind ride in the tag:
 *     mpi_tag = (x * 2 + kind) * T + src_thread
 * where kind 0 is a message's first (or only) part, x its tag, and kind 1 a
 * continuation piece of a framed message, x the message's id (engine.c).
 * Collectives of thread t run on lane t, whose collective context MPI keeps
 * apart from its point-to-point traffic.
 *
 * PTSC_COMM=shared: one duplicate for everything; both thread indices ride
 * in the tag: mpi_tag = ((x * 3 + kind) * T + src) * T + dst, with kind 2
 * for the collectives ptsc builds from point-to-point messages (MPI
 * collectives on one communicator cannot run from concurrent threads).
 *
 * The usable tag range, [0, ptsc_tag_max()], follows from MPI_TAG_UB; the
 * same range numbers the ids of framed messages (modulo its size).
 */
#include "ptsc_internal.h"

#include <stdlib.h>

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

long long ptsc__lanes_tag_ub(void)
{
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    return flag && ub ? *ub : 32767; /* the standard's minimum */
}

int ptsc__lanes_create(MPI_Comm world)
{
    int T = ptsc__g.nthreads, shared = ptsc__g.cfg.comm == PTSC__COMM_SHARED;
    long long tag_ub = ptsc__lanes_tag_ub();
    long long space = shared ? (tag_ub + 1) / (3LL * T * T) : (tag_ub + 1) / (2LL * T);
    if (space < 1)
        return ptsc__err(
            PTSC_ERR_CONFIG,
            "ptsc_init: PTSC_MAX_THREADS=%d leaves no tags under MPI_TAG_UB=%lld with PTSC_COMM=%s", T,
            tag_ub, shared ? "shared" : "dup");
    ptsc__g.tag_max = (int)(space - 1);

    ptsc__g.nlanes = shared ? 1 : T;
    ptsc__g.lanes = calloc((size_t)ptsc__g.nlanes, sizeof(MPI_Comm));
    if (!ptsc__g.lanes)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: lanes");
    for (int i = 0; i < ptsc__g.nlanes; i++) {
        int rc = MPI_Comm_dup(world, &ptsc__g.lanes[i]);
        if (rc != MPI_SUCCESS) {
            ptsc__g.nlanes = i;
            ptsc__lanes_free();
            return ptsc__err_mpi(rc, "ptsc_init: MPI_Comm_dup of a lane");
        }
        /* Errors come back as statuses; MPI must never abort the program for ptsc. */
        MPI_Comm_set_errhandler(ptsc__g.lanes[i], MPI_ERRORS_RETURN);
        char name[MPI_MAX_OBJECT_NAME];
        snprintf(name, sizeof name, shared ? "ptsc shared lane" : "ptsc lane %d", i);
        MPI_Comm_set_name(ptsc__g.lanes[i], name);
    }
    return PTSC_OK;
}

void ptsc__lanes_free(void)
{
    for (int i = 0; i < ptsc__g.nlanes; i++)
        MPI_Comm_free(&ptsc__g.lanes[i]);
    free(ptsc__g.lanes);
    ptsc__g.lanes = NULL;
    ptsc__g.nlanes = 0;
}

static void addr(int src, int dst, int peer, int x, int kind, ptsc__addr_t *a)
{
    int T = ptsc__g.nthreads;
    a->rank = peer;
    if (ptsc__g.cfg.comm == PTSC__COMM_SHARED) {
        a->comm = ptsc__g.lanes[0];
        a->tag = ((x * 3 + kind) * T + src) * T + dst;
    } else {
        a->comm = ptsc__g.lanes[dst];
        a->tag = (x * 2 + kind) * T + src;
    }
}

int ptsc__lanes_send_addr(int me, int rank, int thread, int tag, ptsc__addr_t *a)
{
    addr(me, thread, rank, tag, PTSC__KIND_FIRST, a);
    return PTSC_OK;
}

int ptsc__lanes_recv_addr(int me, int rank, int thread, int tag, ptsc__addr_t *a)
{
    addr(thread, me, rank == PTSC_ANY_RANK ? MPI_ANY_SOURCE : rank, tag, PTSC__KIND_FIRST, a);
    return PTSC_OK;
}

void ptsc__lanes_cont_addr(int src, int dst, int peer, unsigned id, ptsc__addr_t *a)
{
    addr(src, dst, peer, (int)(id % (unsigned)(ptsc__g.tag_max + 1)), PTSC__KIND_CONT, a);
}

void ptsc__lanes_decode(int mpi_tag, int *src_thread, int *tag)
{
    int T = ptsc__g.nthreads;
    if (ptsc__g.cfg.comm == PTSC__COMM_SHARED)
        mpi_tag /= T;
    *src_thread = mpi_tag % T;
    *tag = mpi_tag / T / (ptsc__g.cfg.comm == PTSC__COMM_SHARED ? 3 : 2);
}

void ptsc__lanes_coll_addr(int me, int rank, int tag, ptsc__addr_t *a) { addr(me, me, rank, tag, 2, a); }

MPI_Comm ptsc__lanes_coll_comm(int me)
{
    return ptsc__g.cfg.comm == PTSC__COMM_SHARED ? ptsc__g.lanes[0] : ptsc__g.lanes[me];
}

int ptsc__mpi_cuda_support(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    /* Open MPI declares MPIX_Query_cuda_support wherever it defines the macro;
     * the run-time answer is the one that counts (the library may differ
     * from the headers a program was built with). */
    return MPIX_Query_cuda_support();
#else
    return -1;
#endif
}
