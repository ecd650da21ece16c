/*
 * C shims behind the Fortran module `ptsc` (fortran/ptsc.F90): what a
 * bind(C) interface cannot reach directly. MPI handles come from Fortran
 * as MPI_Fint (mpif.h and `use mpi` handles, or an mpi_f08 handle's
 * MPI_VAL) and are converted with MPI's own f2c/c2f calls; an OpenMP
 * thread body written in Fortran is called through a C trampoline; the
 * constants the module declares are looked up by name for the test that
 * compares them (tests/fortran/f_constants.F90). Every other argument is
 * checked by the ptsc call it forwards to, as for a C caller.
 */
#include "ptsc.h"

#include <string.h>

/* Exported from libptsc_fortran (built with hidden visibility). */
#define PTSC_F_API __attribute__((visibility("default")))

/* The prototypes live in the Fortran module's interfaces; these keep
 * -Wmissing-prototypes satisfied and the C side consistent. */
typedef struct {
    ptsc_ctx_t *p;
} ptsc_f_ctx;
typedef int (*ptsc_f_thread_fn)(ptsc_f_ctx ctx, void *arg);

PTSC_F_API int ptsc_f_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Fint type, int rank, int thread,
                           int tag);
PTSC_F_API int ptsc_f_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Fint type, int rank, int thread,
                           int tag);
PTSC_F_API int ptsc_f_isend(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Fint type, int rank, int thread,
                            int tag, ptsc_request_t *req);
PTSC_F_API int ptsc_f_irecv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Fint type, int rank, int thread,
                            int tag, ptsc_request_t *req);
PTSC_F_API int ptsc_f_sendrecv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, int dest_rank,
                               int dest_thread, int stag, void *rbuf, int rcount, MPI_Fint rtype,
                               int src_rank, int src_thread, int rtag);
PTSC_F_API int ptsc_f_bcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Fint type, int root);
PTSC_F_API int ptsc_f_reduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Fint type,
                             MPI_Fint op, int root);
PTSC_F_API int ptsc_f_allreduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Fint type,
                                MPI_Fint op);
PTSC_F_API int ptsc_f_scan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Fint type,
                           MPI_Fint op);
PTSC_F_API int ptsc_f_exscan(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Fint type,
                             MPI_Fint op);
PTSC_F_API int ptsc_f_reduce_scatter_block(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count,
                                           MPI_Fint type, MPI_Fint op);
PTSC_F_API int ptsc_f_allgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                                int rcount, MPI_Fint rtype);
PTSC_F_API int ptsc_f_alltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                               int rcount, MPI_Fint rtype);
PTSC_F_API int ptsc_f_gather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                             int rcount, MPI_Fint rtype, int root);
PTSC_F_API int ptsc_f_scatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                              int rcount, MPI_Fint rtype, int root);
PTSC_F_API int ptsc_f_gatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                              const int rcounts[], const int displs[], MPI_Fint rtype, int root);
PTSC_F_API int ptsc_f_scatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                               MPI_Fint stype, void *rbuf, int rcount, MPI_Fint rtype, int root);
PTSC_F_API int ptsc_f_allgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                                 const int rcounts[], const int displs[], MPI_Fint rtype);
PTSC_F_API int ptsc_f_alltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                                MPI_Fint stype, void *rbuf, const int rcounts[], const int rdispls[],
                                MPI_Fint rtype);
PTSC_F_API int ptsc_f_world_bcast(ptsc_ctx_t *ctx, int nthreads, void *buf, int count, MPI_Fint type,
                                  int root_rank, int root_thread);
PTSC_F_API int ptsc_f_world_reduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                                   MPI_Fint type, MPI_Fint op, int root_rank, int root_thread);
PTSC_F_API int ptsc_f_world_allreduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                                      MPI_Fint type, MPI_Fint op);
PTSC_F_API int ptsc_f_world_allgather(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, int count,
                                      MPI_Fint type, void *rbuf);
PTSC_F_API int ptsc_f_ctx_comm(const ptsc_ctx_t *ctx, MPI_Fint *comm);
PTSC_F_API int ptsc_f_omp_run(int nthreads, ptsc_f_thread_fn fn, void *arg);
PTSC_F_API int ptsc_f_constant(const char *name, int *value);

/* Handles are converted only while MPI is up (f2c before MPI_Init or
 * after MPI_Finalize is undefined); otherwise the null handle goes on, and
 * the ptsc call reports that it is not initialised. */
static int mpi_up(void)
{
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    return up && !down;
}
static MPI_Datatype T(MPI_Fint t) { return mpi_up() ? MPI_Type_f2c(t) : MPI_DATATYPE_NULL; }
static MPI_Op O(MPI_Fint o) { return mpi_up() ? MPI_Op_f2c(o) : MPI_OP_NULL; }

/* World reductions fold a rank's threads in ptsc itself, for MPI's
 * predefined C types: a Fortran one goes as the C type of its size and
 * kind (the bytes are the same). Others are left to ptsc to judge. */
static MPI_Datatype world_type(MPI_Fint t)
{
    MPI_Datatype c = T(t);
    if (c == MPI_DATATYPE_NULL)
        return c;
    if (c == MPI_DOUBLE_PRECISION || c == MPI_REAL8)
        return MPI_DOUBLE;
    if (c == MPI_REAL || c == MPI_REAL4)
        return sizeof(float) == 4 ? MPI_FLOAT : c;
    if (c == MPI_INTEGER || c == MPI_INTEGER4)
        return sizeof(MPI_Fint) == sizeof(int) || c == MPI_INTEGER4 ? MPI_INT32_T : c;
    if (c == MPI_INTEGER8)
        return MPI_INT64_T;
    return c;
}

int ptsc_f_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Fint type, int rank, int thread, int tag)
{
    return ptsc_send(ctx, buf, count, T(type), rank, thread, tag);
}

int ptsc_f_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Fint type, int rank, int thread, int tag)
{
    return ptsc_recv(ctx, buf, count, T(type), rank, thread, tag);
}

int ptsc_f_isend(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Fint type, int rank, int thread, int tag,
                 ptsc_request_t *req)
{
    return ptsc_isend(ctx, buf, count, T(type), rank, thread, tag, req);
}

int ptsc_f_irecv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Fint type, int rank, int thread, int tag,
                 ptsc_request_t *req)
{
    return ptsc_irecv(ctx, buf, count, T(type), rank, thread, tag, req);
}

int ptsc_f_sendrecv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, int dest_rank,
                    int dest_thread, int stag, void *rbuf, int rcount, MPI_Fint rtype, int src_rank,
                    int src_thread, int rtag)
{
    return ptsc_sendrecv(ctx, sbuf, scount, T(stype), dest_rank, dest_thread, stag, rbuf, rcount, T(rtype),
                         src_rank, src_thread, rtag);
}

int ptsc_f_bcast(ptsc_ctx_t *ctx, void *buf, int count, MPI_Fint type, int root)
{
    return ptsc_bcast(ctx, buf, count, T(type), root);
}

int ptsc_f_reduce(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Fint type, MPI_Fint op,
                  int root)
{
    return ptsc_reduce(ctx, sbuf, rbuf, count, T(type), O(op), root);
}

/* Calls shaped (ctx, sbuf, rbuf, count, type, op). */
#define REDUCE_SHIM(name)                                                                                   \
    int ptsc_f_##name(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Fint type, MPI_Fint op) \
    {                                                                                                       \
        return ptsc_##name(ctx, sbuf, rbuf, count, T(type), O(op));                                         \
    }
REDUCE_SHIM(allreduce)
REDUCE_SHIM(scan)
REDUCE_SHIM(exscan)
REDUCE_SHIM(reduce_scatter_block)

int ptsc_f_allgather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf, int rcount,
                     MPI_Fint rtype)
{
    return ptsc_allgather(ctx, sbuf, scount, T(stype), rbuf, rcount, T(rtype));
}

int ptsc_f_alltoall(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf, int rcount,
                    MPI_Fint rtype)
{
    return ptsc_alltoall(ctx, sbuf, scount, T(stype), rbuf, rcount, T(rtype));
}

int ptsc_f_gather(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf, int rcount,
                  MPI_Fint rtype, int root)
{
    return ptsc_gather(ctx, sbuf, scount, T(stype), rbuf, rcount, T(rtype), root);
}

int ptsc_f_scatter(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf, int rcount,
                   MPI_Fint rtype, int root)
{
    return ptsc_scatter(ctx, sbuf, scount, T(stype), rbuf, rcount, T(rtype), root);
}

/* The v forms: counts and displacements are Fortran default integers
 * (MPI_Fint, the C int here), in elements of the type as in C. */
int ptsc_f_gatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Fint rtype, int root)
{
    return ptsc_gatherv(ctx, sbuf, scount, T(stype), rbuf, rcounts, displs, T(rtype), root);
}

int ptsc_f_scatterv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int displs[],
                    MPI_Fint stype, void *rbuf, int rcount, MPI_Fint rtype, int root)
{
    return ptsc_scatterv(ctx, sbuf, scounts, displs, T(stype), rbuf, rcount, T(rtype), root);
}

int ptsc_f_allgatherv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Fint stype, void *rbuf,
                      const int rcounts[], const int displs[], MPI_Fint rtype)
{
    return ptsc_allgatherv(ctx, sbuf, scount, T(stype), rbuf, rcounts, displs, T(rtype));
}

int ptsc_f_alltoallv(ptsc_ctx_t *ctx, const void *sbuf, const int scounts[], const int sdispls[],
                     MPI_Fint stype, void *rbuf, const int rcounts[], const int rdispls[], MPI_Fint rtype)
{
    return ptsc_alltoallv(ctx, sbuf, scounts, sdispls, T(stype), rbuf, rcounts, rdispls, T(rtype));
}

int ptsc_f_world_bcast(ptsc_ctx_t *ctx, int nthreads, void *buf, int count, MPI_Fint type, int root_rank,
                       int root_thread)
{
    return ptsc_world_bcast(ctx, nthreads, buf, count, T(type), root_rank, root_thread);
}

int ptsc_f_world_reduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count, MPI_Fint type,
                        MPI_Fint op, int root_rank, int root_thread)
{
    return ptsc_world_reduce(ctx, nthreads, sbuf, rbuf, count, world_type(type), O(op), root_rank,
                             root_thread);
}

int ptsc_f_world_allreduce(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, void *rbuf, int count,
                           MPI_Fint type, MPI_Fint op)
{
    return ptsc_world_allreduce(ctx, nthreads, sbuf, rbuf, count, world_type(type), O(op));
}

int ptsc_f_world_allgather(ptsc_ctx_t *ctx, int nthreads, const void *sbuf, int count, MPI_Fint type,
                           void *rbuf)
{
    return ptsc_world_allgather(ctx, nthreads, sbuf, count, T(type), rbuf);
}

/* The lane's communicator as a Fortran handle; set only on success. */
int ptsc_f_ctx_comm(const ptsc_ctx_t *ctx, MPI_Fint *comm)
{
    MPI_Comm c = MPI_COMM_NULL;
    if (!comm)
        return PTSC_ERR_ARG;
    int rc = ptsc_ctx_comm(ctx, &c);
    if (rc == PTSC_OK)
        *comm = MPI_Comm_c2f(c);
    return rc;
}

/* ptsc_omp_run with a Fortran body: the body gets the context as the
 * module's bind(C) type (a struct of one pointer), by value. */
typedef struct {
    ptsc_f_thread_fn fn;
    void *arg;
} trampoline_t;

static int trampoline(ptsc_ctx_t *ctx, void *arg)
{
    const trampoline_t *t = arg;
    ptsc_f_ctx c = {ctx};
    return t->fn(c, t->arg);
}

int ptsc_f_omp_run(int nthreads, ptsc_f_thread_fn fn, void *arg)
{
    if (!fn)
        return PTSC_ERR_ARG;
    trampoline_t t = {fn, arg};
    return ptsc_omp_run(nthreads, trampoline, &t);
}

/* The C value of a constant the module declares, by name (the test
 * f_constants compares them). PTSC_ERR_ARG for a name not known here. */
static const struct {
    const char *name;
    int value;
} constants[] = {
#define PTSC_F_CONST(name, value, msg) {#name, name},
    PTSC_STATUS_LIST(PTSC_F_CONST)
#undef PTSC_F_CONST
        {"PTSC_STATUS_COUNT", PTSC_STATUS_COUNT},
    {"PTSC_ANY_RANK", PTSC_ANY_RANK},
    {"PTSC_UNDEFINED", PTSC_UNDEFINED},
    {"PTSC_WORLD_TEAM", PTSC_WORLD_TEAM},
    {"PTSC_SCOPE_DEFAULT", PTSC_SCOPE_DEFAULT},
    {"PTSC_SCOPE_AUTO", PTSC_SCOPE_AUTO},
    {"PTSC_SCOPE_NONE", PTSC_SCOPE_NONE},
    {"PTSC_SCOPE_THREAD", PTSC_SCOPE_THREAD},
    {"PTSC_SCOPE_GLOBAL", PTSC_SCOPE_GLOBAL},
    {"PTSC_SCOPE_DEVICE", PTSC_SCOPE_DEVICE},
    {"PTSC_MEM_DEVICE", PTSC_MEM_DEVICE},
    {"PTSC_MEM_MANAGED", PTSC_MEM_MANAGED},
    {"PTSC_MEM_PINNED", PTSC_MEM_PINNED},
    {"PTSC_MEM_HOST", PTSC_MEM_HOST},
};

int ptsc_f_constant(const char *name, int *value)
{
    if (!name || !value)
        return PTSC_ERR_ARG;
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (strcmp(name, constants[i].name) == 0) {
            *value = constants[i].value;
            return PTSC_OK;
        }
    return PTSC_ERR_ARG;
}
