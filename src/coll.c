/*
 * Collectives over the calling thread's lane: thread t of every rank takes
 * part, roots are ranks. This file runs the blocking calls; icoll.c runs
 * the non-blocking ones and the schedules (below). Both forms share the
 * checks and the staging of coll_prep.c (ptsc__coll_prep_*,
 * ptsc__coll_finish), which sits below both, since the blocking calls
 * start schedules.
 *
 * Buffers follow the point-to-point rules: synchronised per scope, and
 * staged through the thread's pinned buffers when MPI cannot read them
 * (inputs copied in and synchronised once at the call, outputs copied back
 * on the thread's stream with no host sync when the collective completes).
 *
 * PTSC_COMM=dup runs MPI's own collectives on lane t (blocking ones here,
 * non-blocking ones in icoll.c). PTSC_COMM=shared has one communicator, on
 * which MPI forbids concurrent collectives from several threads, so ptsc
 * builds them from point-to-point messages in the lane's collective tag
 * space: the schedules of icoll.c, which the blocking calls start and wait
 * for (so that a blocking call also progresses the thread's earlier
 * non-blocking ones, which a peer may be waiting for). Reductions there run
 * on the host (MPI_Reduce_local), so device buffers are staged for them.
 *
 * Derived datatypes: the messages carry them as they are, so holes of the
 * caller's buffers are never written; the shared-mode reduction keeps its
 * scratch by the type's true extent and lower bound and copies with
 * MPI_Pack / MPI_Unpack. A predefined operation applies only to predefined
 * datatypes in the MPI standard and is refused on a derived one in both modes
 * (PTSC_ERR_UNSUPPORTED): MPI_Reduce_local would report it on
 * MPI_COMM_WORLD's error handler, which aborts by default.
 */
#include "ptsc_internal.h"

static int mpi_rc(int mrc, const char *call)
{
    return mrc == MPI_SUCCESS ? PTSC_OK : ptsc__err_mpi(mrc, call);
}

/* ------------------------------------------------------------------------ */
/* Blocking calls                                                            */
/* ------------------------------------------------------------------------ */

/* MPI's blocking collective for a prepared call (PTSC_COMM=dup). */
static int mpi_blocking(int me, const ptsc__coll_t *c)
{
    MPI_Comm comm = ptsc__lanes_coll_comm(me);
    const ptsc__side_t *sx = &c->snd, *rx = &c->rcv;
    void *sw = c->s_in_place ? MPI_IN_PLACE : sx->buf, *rw = c->r_in_place ? MPI_IN_PLACE : rx->buf;
    int v = c->v, root = c->root;
    switch (c->kind) {
    case PTSC__C_BARRIER:
        return MPI_Barrier(comm);
    case PTSC__C_BCAST:
        return MPI_Bcast(rw, rx->count, rx->type, root, comm);
    case PTSC__C_REDUCE:
        return MPI_Reduce(sw, rw, rx->count, rx->type, c->op, root, comm);
    case PTSC__C_ALLREDUCE:
        return MPI_Allreduce(sw, rw, rx->count, rx->type, c->op, comm);
    case PTSC__C_SCAN:
        return MPI_Scan(sw, rw, rx->count, rx->type, c->op, comm);
    case PTSC__C_EXSCAN:
        return MPI_Exscan(sw, rw, rx->count, rx->type, c->op, comm);
    case PTSC__C_RSB:
        return MPI_Reduce_scatter_block(sw, rw, rx->count, rx->type, c->op, comm);
    case PTSC__C_GATHER:
        return v ? MPI_Gatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, root, comm)
                 : MPI_Gather(sw, sx->count, sx->type, rw, rx->count, rx->type, root, comm);
    case PTSC__C_SCATTER:
        return v ? MPI_Scatterv(sw, sx->counts, sx->displs, sx->type, rw, rx->count, rx->type, root, comm)
                 : MPI_Scatter(sw, sx->count, sx->type, rw, rx->count, rx->type, root, comm);
    case PTSC__C_ALLGATHER:
        /* MPICH 4.0.2's MPI_Allgatherv on one process writes at
         * displacement 0 whatever displs says; a gatherv to the only
         * rank means the same and is right there. */
        if (v && ptsc__g.nranks == 1)
            return MPI_Gatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, 0, comm);
        return v ? MPI_Allgatherv(sw, sx->count, sx->type, rw, rx->counts, rx->displs, rx->type, comm)
                 : MPI_Allgather(sw, sx->count, sx->type, rw, rx->count, rx->type, comm);
    default:
        return v ? MPI_Alltoallv(sw, sx->counts, sx->displs, sx->type, rw, rx->counts, rx->displs, rx->type,
                                 comm)
                 : MPI_Alltoall(sw, sx->count, sx->type, rw, rx->count, rx->type, comm);
    }
}

/* Run a prepared call to its end: MPI's blocking collective (dup), or its
 * schedule, started and waited for (shared). */
static int run(ptsc_ctx_t *ctx, int rc, ptsc__coll_t *c)
{
    if (rc != PTSC_OK)
        return rc;
    if (c->kind == PTSC__C_BARRIER)
        ptsc__nvtx_push("%s", c->call);
    else if (c->kind == PTSC__C_BCAST)
        ptsc__nvtx_push("%s root %d %zu B", c->call, c->root, c->bytes);
    else
        ptsc__nvtx_push("%s %zu B", c->call, c->bytes);
    if (ptsc__coll_shared()) {
        struct ptsc_request *r;
        rc = ptsc__icoll_start(ctx, c, &r);
        return ptsc__nvtx_pop_rc(rc != PTSC_OK ? rc : ptsc__engine_wait(r, NULL));
    }
    ptsc__wait_begin(ctx, c->call, PTSC__WAIT_COLL, c->root, -1, -1, c->bytes);
    int mrc = mpi_blocking(ctx->index, c);
    ptsc__wait_end(ctx);
    ptsc__nvtx_pop();
    return ptsc__coll_finish(ctx, c, mpi_rc(mrc, c->call));
}

int ptsc_barrier(ptsc_ctx_t *ctx)
{
    ptsc__coll_t c;
    return run(ctx, ptsc__coll_prep_barrier(&ctx, "ptsc_barrier", &c), &c);
}

int ptsc_bcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int root)
{
    ptsc__coll_t c;
    return run(ctx, ptsc__coll_prep_bcast(&ctx, buf, count, type, root, "ptsc_bcast", &c), &c);
}

static int reduce_common(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                         MPI_Op op, int root, int kind, const char *call)
{
    ptsc__coll_t c;
    return run(ctx, ptsc__coll_prep_reduce(&ctx, kind, sbuf, rbuf, count, type, op, root, call, &c), &c);
}

int ptsc_reduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                int root)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, root, PTSC__C_REDUCE, "ptsc_reduce");
}

int ptsc_allreduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, PTSC__C_ALLREDUCE, "ptsc_allreduce");
}

int ptsc_scan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, PTSC__C_SCAN, "ptsc_scan");
}

int ptsc_exscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, PTSC__C_EXSCAN, "ptsc_exscan");
}

int ptsc_reduce_scatter_block(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                              MPI_Op op)
{
    return reduce_common(ctx, sbuf, rbuf, count, type, op, 0, PTSC__C_RSB, "ptsc_reduce_scatter_block");
}

static int exchange_common(ptsc_ctx_t *ctx, int kind, int v, int root, const ptsc__side_t *sx,
                           const ptsc__side_t *rx, const char *call)
{
    ptsc__coll_t c;
    return run(ctx, ptsc__coll_prep_exchange(&ctx, kind, v, root, sx, rx, call, &c), &c);
}

#define SIDE(b, n, ns, ds, t, pp) (&(ptsc__side_t){(void *)(b), (n), (ns), (ds), (t), (pp)})

int ptsc_allgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype)
{
    return exchange_common(ctx, PTSC__C_ALLGATHER, 0, 0, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_allgather");
}

int ptsc_alltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype)
{
    return exchange_common(ctx, PTSC__C_ALLTOALL, 0, 0, SIDE(sbuf, scount, NULL, NULL, stype, 1),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_alltoall");
}

int ptsc_gather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, PTSC__C_GATHER, 0, root, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 1), "ptsc_gather");
}

int ptsc_scatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, PTSC__C_SCATTER, 0, root, SIDE(sbuf, scount, NULL, NULL, stype, 1),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 0), "ptsc_scatter");
}

int ptsc_gatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                 const int rcounts[], const int displs[], MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, PTSC__C_GATHER, 1, root, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, 0, rcounts, displs, rtype, 1), "ptsc_gatherv");
}

int ptsc_scatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                  MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root)
{
    return exchange_common(ctx, PTSC__C_SCATTER, 1, root, SIDE(sbuf, 0, scounts, displs, stype, 1),
                           SIDE(rbuf, rcount, NULL, NULL, rtype, 0), "ptsc_scatterv");
}

int ptsc_allgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                    const int rcounts[], const int displs[], MPI_Datatype rtype)
{
    return exchange_common(ctx, PTSC__C_ALLGATHER, 1, 0, SIDE(sbuf, scount, NULL, NULL, stype, 0),
                           SIDE(rbuf, 0, rcounts, displs, rtype, 1), "ptsc_allgatherv");
}

int ptsc_alltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                   MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                   MPI_Datatype rtype)
{
    return exchange_common(ctx, PTSC__C_ALLTOALL, 1, 0, SIDE(sbuf, 0, scounts, sdispls, stype, 1),
                           SIDE(rbuf, 0, rcounts, rdispls, rtype, 1), "ptsc_alltoallv");
}
