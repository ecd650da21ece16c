/*
 * libptsc-mpi's Fortran entry points: what src/interpose.c does for C MPI
 * calls (sync, staging, statistics, race check), for Fortran programs whose
 * MPI calls never reach the C symbols it wraps.
 *
 * Each wrapper does the interposer's work before the call (class lookup,
 * sync, host copy), calls the MPI library's own Fortran function (the next
 * definition of the same name, dlsym(RTLD_NEXT)) with the host copy in
 * place of a staged buffer, and finishes after it (copy back, request
 * table). Calling MPI's own Fortran function keeps its handling of the
 * Fortran sentinels (MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS(ES)_IGNORE: the
 * addresses of common-block or module variables) and of Fortran statuses,
 * logicals and optional IERROR arguments; the wrapper only needs to know
 * which buffer arguments are sentinels, so that it neither counts nor
 * stages them.
 *
 * Which functions, per MPI (docs/design.md, "Fortran programs"):
 *
 *  - Open MPI: every binding (mpif.h, `use mpi`, `use mpi_f08`) ends in
 *    libmpi_mpifh's functions `ompi_<call>_f`, which call the C layer
 *    through PMPI_ (never the C MPI_ symbols). A program reaches them by
 *    one of thirteen names, all one function in libmpi_mpifh (mpi_send_,
 *    mpi_send__, mpi_send, MPI_SEND, their pmpi_ / PMPI_ twins, MPI_Send_f,
 *    MPI_Send_f08, PMPI_Send_f, PMPI_Send_f08, ompi_send_f); mpi_f08's
 *    functions in libmpi_usempif08 call `ompi_<call>_f`, and the
 *    pmpi_test*_ family, through the PLT. So every name is wrapped; none of
 *    them calls another, so no call is seen twice. Sentinels: Open MPI
 *    compares a buffer with the address of the common block
 *    mpi_fortran_in_place_ / mpi_fortran_bottom_ (in each name mangling),
 *    found here the same way (dlsym of those names).
 *  - MPICH: mpif.h and `use mpi` (libmpichfort's mpi_send_ ...) and
 *    mpi_f08's buffer calls (mpi_send_f08ts_ through MPIR_*_cdesc) call the
 *    C MPI_ symbols, so interpose.c sees them; mpi_f08's init, finalize,
 *    completion, start and request-free functions (mpi_wait_f08_, and the
 *    pmpir_*_f08_ profiling names) call PMPI_ directly and are wrapped
 *    here. A request is the same integer in C and Fortran.
 *
 * Every wrapped name is a row of one table per MPI (FORTRAN_CALLS); the
 * work of each call is one function (f_<call>), shared by its names.
 */
#include "ptsc_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#define PTSC_MPI_API __attribute__((visibility("default")))

typedef struct ptsc__pending pending_t;
typedef ptsc__mbuf_t mbuf_t;

/* The MPI library's own function behind a wrapped name, found once. */
static void *resolve(_Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        if (!f)
            ptsc__log(PTSC__LOG_ERROR, "libptsc-mpi: %s: no such function after this library", name);
        atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}

/* An IERROR argument: optional in mpi_f08 (NULL when left out). */
#define IERR(ierr, own) ((ierr) ? (ierr) : &(own))

static void no_real(MPI_Fint *e) { *e = MPI_ERR_INTERN; }

#if defined(OPEN_MPI)
/* ------------------------------------------------------------------------ */
/* Open MPI: buffers                                                         */
/* ------------------------------------------------------------------------ */

/* The Fortran MPI_IN_PLACE and MPI_BOTTOM: the addresses of Open MPI's
 * common blocks, in each name mangling a compiler may use; what
 * libmpi_mpifh compares buffers with resolves to the first of each name in
 * the process, as dlsym(RTLD_DEFAULT) finds it. */
static const void *sentinels[8];
static pthread_once_t sentinels_once = PTHREAD_ONCE_INIT;

static void find_sentinels(void)
{
    static const char *const names[8] = {
        "mpi_fortran_in_place_", "mpi_fortran_in_place__", "mpi_fortran_in_place", "MPI_FORTRAN_IN_PLACE",
        "mpi_fortran_bottom_",   "mpi_fortran_bottom__",   "mpi_fortran_bottom",   "MPI_FORTRAN_BOTTOM"};
    for (int i = 0; i < 8; i++)
        sentinels[i] = dlsym(RTLD_DEFAULT, names[i]);
}

/* A buffer argument as the interposer sees it: NULL for the sentinels
 * (not a buffer, as MPI_IN_PLACE and MPI_BOTTOM in C). */
static void *fbuf(void *p)
{
    pthread_once(&sentinels_once, find_sentinels);
    for (int i = 0; i < 8; i++)
        if (p && p == sentinels[i])
            return NULL;
    return p;
}

/* What MPI's function gets: the host copy, or the caller's argument as it
 * came (a sentinel too). */
static void *fwire(const mbuf_t *b, void *arg) { return b->host ? ptsc__ipose_wire(b) : arg; }

static MPI_Comm fcomm(const MPI_Fint *c) { return PMPI_Comm_f2c(*c); }
static MPI_Datatype ftype(const MPI_Fint *t) { return PMPI_Type_f2c(*t); }

/* An error of the interposer before MPI's function ran: the
 * communicator's handler, IERROR, and no request. */
static void fail_before(MPI_Comm comm, int rc, MPI_Fint *e, MPI_Fint *req)
{
    *e = (MPI_Fint)ptsc__ipose_raise(comm, rc);
    if (req)
        *req = PMPI_Request_c2f(MPI_REQUEST_NULL);
}

/* A non-blocking call's request into the table (by its C handle; the
 * Fortran one names the same request). */
static void ftrack(MPI_Fint *e, MPI_Fint *req, mbuf_t *b, mbuf_t *b2, int p2p, const char *call)
{
    if (!b->host && (!b2 || !b2->host))
        return;
    MPI_Request c = *e == MPI_SUCCESS ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;
    int rc = ptsc__ipose_track(*e, &c, b, b2, p2p, call);
    if (*e == MPI_SUCCESS) {
        *e = (MPI_Fint)rc;
        *req = PMPI_Request_c2f(c);
    }
}

static int fsize(MPI_Comm comm)
{
    int n = 0;
    PMPI_Comm_size(comm, &n);
    return n;
}

/* Whether this process is a rooted call's root (its rank, or MPI_ROOT on
 * an intercommunicator). */
static int froot(MPI_Comm comm, int root)
{
    int inter = 0, r = -1;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        return root == MPI_ROOT;
    PMPI_Comm_rank(comm, &r);
    return r == root;
}

/* The parameters of each call, as Open MPI's Fortran functions take them
 * (everything by reference), and the names they are passed on by. */
#define P_send                                                                                  \
    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, \
     MPI_Fint *ierr)
#define A_send (buf, count, type, peer, tag, comm, ierr)
#define P_isend                                                                                 \
    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, \
     MPI_Fint *req, MPI_Fint *ierr)
#define A_isend (buf, count, type, peer, tag, comm, req, ierr)
#define P_recv                                                                                  \
    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, \
     MPI_Fint *st, MPI_Fint *ierr)
#define A_recv (buf, count, type, peer, tag, comm, st, ierr)
#define P_sendrecv                                                                                      \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, MPI_Fint *dest, MPI_Fint *stag, void *rbuf,         \
     MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *source, MPI_Fint *rtag, MPI_Fint *comm, MPI_Fint *st, \
     MPI_Fint *ierr)
#define A_sendrecv (sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st, ierr)
#define P_sendrecv_replace                                                                         \
    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *stag, MPI_Fint *source, \
     MPI_Fint *rtag, MPI_Fint *comm, MPI_Fint *st, MPI_Fint *ierr)
#define A_sendrecv_replace (buf, count, type, dest, stag, source, rtag, comm, st, ierr)
#define P_mrecv (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *msg, MPI_Fint *st, MPI_Fint *ierr)
#define A_mrecv (buf, count, type, msg, st, ierr)
#define P_bcast (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
#define A_bcast (buf, count, type, root, comm, ierr)
#define P_ibcast                                                                                \
    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, \
     MPI_Fint *ierr)
#define A_ibcast (buf, count, type, root, comm, req, ierr)
#define P_reduce                                                                                            \
    (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, \
     MPI_Fint *ierr)
#define A_reduce (sbuf, rbuf, count, type, op, root, comm, ierr)
#define P_ireduce                                                                                           \
    (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, \
     MPI_Fint *req, MPI_Fint *ierr)
#define A_ireduce (sbuf, rbuf, count, type, op, root, comm, req, ierr)
#define P_allred \
    (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
#define A_allred (sbuf, rbuf, count, type, op, comm, ierr)
#define P_iallred                                                                                          \
    (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, \
     MPI_Fint *ierr)
#define A_iallred (sbuf, rbuf, count, type, op, comm, req, ierr)
#define P_gather                                                                                   \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, \
     MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
#define A_gather (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr)
#define P_igather                                                                                  \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, \
     MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
#define A_igather (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, ierr)
#define P_allgather                                                                                \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, \
     MPI_Fint *comm, MPI_Fint *ierr)
#define A_allgather (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr)
#define P_iallgather                                                                               \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, \
     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
#define A_iallgather (sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr)
#define P_gatherv                                                                                    \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, \
     MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
#define A_gatherv (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, ierr)
#define P_igatherv                                                                                   \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, \
     MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
#define A_igatherv (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req, ierr)
#define P_scatterv                                                                                   \
    (void *sbuf, MPI_Fint *scounts, MPI_Fint *displs, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, \
     MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
#define A_scatterv (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, ierr)
#define P_iscatterv                                                                                  \
    (void *sbuf, MPI_Fint *scounts, MPI_Fint *displs, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, \
     MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
#define A_iscatterv (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req, ierr)
#define P_allgatherv                                                                                 \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, \
     MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
#define A_allgatherv (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, ierr)
#define P_iallgatherv                                                                                \
    (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, \
     MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
#define A_iallgatherv (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req, ierr)
#define P_alltoallv                                                                                    \
    (void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, \
     MPI_Fint *rdispls, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
#define A_alltoallv (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, ierr)
#define P_ialltoallv                                                                                   \
    (void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, \
     MPI_Fint *rdispls, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
#define A_ialltoallv (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req, ierr)
#define P_redscat \
    (void *sbuf, void *rbuf, MPI_Fint *rcounts, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
#define A_redscat (sbuf, rbuf, rcounts, type, op, comm, ierr)
#define P_iredscat                                                                                           \
    (void *sbuf, void *rbuf, MPI_Fint *rcounts, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, \
     MPI_Fint *ierr)
#define A_iredscat (sbuf, rbuf, rcounts, type, op, comm, req, ierr)

/* Blocking point-to-point. */
static void f_send(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer,
                   MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t b;
    int rc = ptsc__ipose_prep(&b, fbuf(buf), *count, ftype(type), 0, c, *peer, call);
    if (rc != MPI_SUCCESS)
        return fail_before(c, rc, e, NULL);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_send)real)(fwire(&b, buf), &wc, &wt, peer, tag, comm, e);
    *e = (MPI_Fint)ptsc__ipose_done(*e, &b, NULL, c, call);
}

static void f_recv(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer,
                   MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t b;
    int rc = ptsc__ipose_prep(&b, fbuf(buf), *count, ftype(type), 1, c, -1, call);
    if (rc != MPI_SUCCESS)
        return fail_before(c, rc, e, NULL);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_recv)real)(fwire(&b, buf), &wc, &wt, peer, tag, comm, st, e);
    *e = (MPI_Fint)ptsc__ipose_done(*e, &b, NULL, c, call);
}

/* Non-blocking point-to-point: the send forms (`recv` 0) and Irecv. */
static void isend_or_irecv(int recv, void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type,
                           MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t b;
    int rc = ptsc__ipose_prep(&b, fbuf(buf), *count, ftype(type), recv, c, recv ? -1 : *peer, call);
    if (rc != MPI_SUCCESS)
        return fail_before(c, rc, e, req);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_isend)real)(fwire(&b, buf), &wc, &wt, peer, tag, comm, req, e);
    ftrack(e, req, &b, NULL, 1, call);
}

static void f_isend(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer,
                    MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    isend_or_irecv(0, real, call, buf, count, type, peer, tag, comm, req, ierr);
}

static void f_irecv(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer,
                    MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    isend_or_irecv(1, real, call, buf, count, type, peer, tag, comm, req, ierr);
}

/* Persistent inits: MPI bound to the host copy where staging applies;
 * each start fills it (f_start). */
static void pinit(int recv, void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type,
                  MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t b;
    int cls = 0;
    int rc =
        ptsc__ipose_pinit_prep(&b, fbuf(buf), *count, ftype(type), recv, c, recv ? -1 : *peer, &cls, call);
    if (rc != MPI_SUCCESS)
        return fail_before(c, rc, e, req);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_isend)real)(fwire(&b, buf), &wc, &wt, peer, tag, comm, req, e);
    MPI_Request r = *e == MPI_SUCCESS ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;
    rc = ptsc__ipose_pinit_track(*e, &r, &b, cls, call);
    if (*e == MPI_SUCCESS && rc != MPI_SUCCESS) {
        *e = (MPI_Fint)rc;
        *req = PMPI_Request_c2f(MPI_REQUEST_NULL);
    }
}

static void f_send_init(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type,
                        MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    pinit(0, real, call, buf, count, type, peer, tag, comm, req, ierr);
}

static void f_recv_init(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type,
                        MPI_Fint *peer, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    pinit(1, real, call, buf, count, type, peer, tag, comm, req, ierr);
}

static void f_sendrecv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                       MPI_Fint *dest, MPI_Fint *stag, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype,
                       MPI_Fint *source, MPI_Fint *rtag, MPI_Fint *comm, MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    int rc = ptsc__ipose_prep(&s, fbuf(sbuf), *scount, ftype(stype), 0, c, *dest, call);
    if (rc != MPI_SUCCESS)
        return fail_before(c, rc, e, NULL);
    if ((rc = ptsc__ipose_prep(&r, fbuf(rbuf), *rcount, ftype(rtype), 1, c, -1, call)) != MPI_SUCCESS) {
        s.back = 0; /* nothing was sent: the send's copy goes */
        (void)ptsc__ipose_done(MPI_SUCCESS, &s, NULL, MPI_COMM_NULL, call);
        return fail_before(c, rc, e, NULL);
    }
    MPI_Fint swc = ptsc__ipose_fcount(&s, *scount), swt = ptsc__ipose_ftype(&s, *stype);
    MPI_Fint rwc = ptsc__ipose_fcount(&r, *rcount), rwt = ptsc__ipose_ftype(&r, *rtype);
    ((void(*) P_sendrecv)real)(fwire(&s, sbuf), &swc, &swt, dest, stag, fwire(&r, rbuf), &rwc, &rwt, source,
                               rtag, comm, st, e);
    *e = (MPI_Fint)ptsc__ipose_done(*e, &s, &r, c, call);
}

static void f_sendrecv_replace(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type,
                               MPI_Fint *dest, MPI_Fint *stag, MPI_Fint *source, MPI_Fint *rtag,
                               MPI_Fint *comm, MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t b;
    int rc = ptsc__ipose_prep(&b, fbuf(buf), *count, ftype(type), 2, c, *dest, call);
    if (rc != MPI_SUCCESS)
        return fail_before(c, rc, e, NULL);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_sendrecv_replace)real)(fwire(&b, buf), &wc, &wt, dest, stag, source, rtag, comm, st, e);
    *e = (MPI_Fint)ptsc__ipose_done(*e, &b, NULL, c, call);
}

/* Matched receives: no communicator at hand, the code is returned. */
static void f_mrecv(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *msg,
                    MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    mbuf_t b;
    int rc = ptsc__ipose_prep(&b, fbuf(buf), *count, ftype(type), 1, MPI_COMM_NULL, -1, call);
    if (rc != MPI_SUCCESS)
        return fail_before(MPI_COMM_NULL, rc, e, NULL);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_mrecv)real)(fwire(&b, buf), &wc, &wt, msg, st, e);
    *e = (MPI_Fint)ptsc__ipose_done(*e, &b, NULL, MPI_COMM_NULL, call);
}

static void f_imrecv(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *msg,
                     MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    mbuf_t b;
    int rc = ptsc__ipose_prep(&b, fbuf(buf), *count, ftype(type), 1, MPI_COMM_NULL, -1, call);
    if (rc != MPI_SUCCESS)
        return fail_before(MPI_COMM_NULL, rc, e, req);
    MPI_Fint wc = ptsc__ipose_fcount(&b, *count), wt = ptsc__ipose_ftype(&b, *type);
    ((void(*) P_mrecv)real)(fwire(&b, buf), &wc, &wt, msg, req, e);
    ftrack(e, req, &b, NULL, 1, call);
}

/* ------------------------------------------------------------------------ */
/* Open MPI: collectives                                                     */
/* ------------------------------------------------------------------------ */

/* Both sides of a collective: `s` of scount x stype where `suse`, `r` of
 * rcount x rtype where `ruse`; an error raised. */
static int cprep(mbuf_t *s, mbuf_t *r, MPI_Comm c, void *sbuf, MPI_Count scount, MPI_Fint *stype, int suse,
                 void *rbuf, MPI_Count rcount, MPI_Fint *rtype, int ruse, MPI_Fint *e, MPI_Fint *req,
                 const char *call)
{
    int rc = ptsc__ipose_prep_coll(s, r, c, fbuf(sbuf), scount, stype ? ftype(stype) : MPI_DATATYPE_NULL,
                                   suse, fbuf(rbuf), rcount, ftype(rtype), ruse, call);
    if (rc != MPI_SUCCESS)
        fail_before(c, rc, e, req);
    return rc;
}

/* The end of a collective: blocking (req NULL) or started. */
static void cdone(MPI_Fint *e, MPI_Fint *req, mbuf_t *s, mbuf_t *r, MPI_Comm c, const char *call)
{
    if (req)
        ftrack(e, req, s, r, 0, call);
    else
        *e = (MPI_Fint)ptsc__ipose_done(*e, s, r, c, call);
}

/* Bcast: a receive everywhere (the root's copy comes back unchanged). */
static void bcast(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root,
                  MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    if (cprep(&s, &r, c, NULL, 0, NULL, 0, buf, *count, type, 1, e, req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_ibcast)real)(fwire(&r, buf), count, type, root, comm, req, e);
    else
        ((void(*) P_bcast)real)(fwire(&r, buf), count, type, root, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_bcast(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root,
                    MPI_Fint *comm, MPI_Fint *ierr)
{
    bcast(real, call, buf, count, type, root, comm, NULL, ierr);
}

static void f_ibcast(void *real, const char *call, void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    bcast(real, call, buf, count, type, root, comm, req, ierr);
}

/* Reduce: the result at the root only. */
static void reduce(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                   MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    if (cprep(&s, &r, c, sbuf, *count, type, 1, rbuf, *count, type, froot(c, *root), e, req, call) !=
        MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_ireduce)real)(fwire(&s, sbuf), fwire(&r, rbuf), count, type, op, root, comm, req, e);
    else
        ((void(*) P_reduce)real)(fwire(&s, sbuf), fwire(&r, rbuf), count, type, op, root, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_reduce(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                     MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    reduce(real, call, sbuf, rbuf, count, type, op, root, comm, NULL, ierr);
}

static void f_ireduce(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                      MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    reduce(real, call, sbuf, rbuf, count, type, op, root, comm, req, ierr);
}

/* Allreduce, Scan, Exscan (`blocks` 1) and Reduce_scatter_block (`blocks`
 * 0: the input is size blocks of count, of rbuf in place). */
static void allred(int rsb, void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count,
                   MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    MPI_Count n = rsb ? (MPI_Count)*count * fsize(c) : *count;
    MPI_Count rn = rsb && !fbuf(sbuf) ? n : *count;
    if (cprep(&s, &r, c, sbuf, n, type, 1, rbuf, rn, type, 1, e, req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_iallred)real)(fwire(&s, sbuf), fwire(&r, rbuf), count, type, op, comm, req, e);
    else
        ((void(*) P_allred)real)(fwire(&s, sbuf), fwire(&r, rbuf), count, type, op, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_allred(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                     MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    allred(0, real, call, sbuf, rbuf, count, type, op, comm, NULL, ierr);
}

static void f_iallred(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                      MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    allred(0, real, call, sbuf, rbuf, count, type, op, comm, req, ierr);
}

static void f_rsb(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                  MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    allred(1, real, call, sbuf, rbuf, count, type, op, comm, NULL, ierr);
}

static void f_irsb(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                   MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    allred(1, real, call, sbuf, rbuf, count, type, op, comm, req, ierr);
}

/* Gather and Scatter (`scatter`): the side of size blocks counts at the
 * root only. */
static void gather(int scatter, void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                   void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm,
                   MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    int at_root = froot(c, *root), n = at_root ? fsize(c) : 0;
    if (cprep(&s, &r, c, sbuf, (MPI_Count)*scount * (scatter ? n : 1), stype, scatter ? at_root : 1, rbuf,
              (MPI_Count)*rcount * (scatter ? 1 : n), rtype, scatter ? 1 : at_root, e, req,
              call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_igather)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcount, rtype, root, comm,
                                  req, e);
    else
        ((void(*) P_gather)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcount, rtype, root, comm,
                                 e);
    cdone(e, req, &s, &r, c, call);
}

static void f_gather(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                     MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    gather(0, real, call, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, NULL, ierr);
}

static void f_igather(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                      MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req,
                      MPI_Fint *ierr)
{
    gather(0, real, call, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, ierr);
}

static void f_scatter(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                      MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    gather(1, real, call, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, NULL, ierr);
}

static void f_iscatter(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                       void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm,
                       MPI_Fint *req, MPI_Fint *ierr)
{
    gather(1, real, call, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req, ierr);
}

/* Allgather and Alltoall (`a2a`: the send side is size blocks too). */
static void allgather(int a2a, void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                      void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req,
                      MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    int n = fsize(c);
    if (cprep(&s, &r, c, sbuf, (MPI_Count)*scount * (a2a ? n : 1), stype, 1, rbuf, (MPI_Count)*rcount * n,
              rtype, 1, e, req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_iallgather)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcount, rtype, comm,
                                     req, e);
    else
        ((void(*) P_allgather)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcount, rtype, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_allgather(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                        void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    allgather(0, real, call, sbuf, scount, stype, rbuf, rcount, rtype, comm, NULL, ierr);
}

static void f_iallgather(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                         void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req,
                         MPI_Fint *ierr)
{
    allgather(0, real, call, sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr);
}

static void f_alltoall(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                       void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    allgather(1, real, call, sbuf, scount, stype, rbuf, rcount, rtype, comm, NULL, ierr);
}

static void f_ialltoall(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                        void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req,
                        MPI_Fint *ierr)
{
    allgather(1, real, call, sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr);
}
/* The v forms: a side given by counts (and displacements) is one block per
 * rank, staged block by block (interpose.c). */
static int vprep(mbuf_t *s, mbuf_t *r, MPI_Comm c, void *sbuf, const MPI_Fint *scount,
                 const MPI_Fint *scounts, const MPI_Fint *sdispls, MPI_Fint *stype, int suse, void *rbuf,
                 const MPI_Fint *rcount, const MPI_Fint *rcounts, const MPI_Fint *rdispls, MPI_Fint *rtype,
                 int ruse, MPI_Fint *e, MPI_Fint *req, const char *call)
{
    int rc = ptsc__ipose_prep_coll_v(s, r, c, fbuf(sbuf), scount ? *scount : 0, scounts, sdispls,
                                     ftype(stype), suse, fbuf(rbuf), rcount ? *rcount : 0, rcounts, rdispls,
                                     ftype(rtype), ruse, call);
    if (rc != MPI_SUCCESS)
        fail_before(c, rc, e, req);
    return rc;
}

static void gatherv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                    MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm,
                    MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    if (vprep(&s, &r, c, sbuf, scount, NULL, NULL, stype, 1, rbuf, NULL, rcounts, displs, rtype,
              froot(c, *root), e, req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_igatherv)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcounts, displs, rtype,
                                   root, comm, req, e);
    else
        ((void(*) P_gatherv)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcounts, displs, rtype,
                                  root, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_gatherv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                      MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm,
                      MPI_Fint *ierr)
{
    gatherv(real, call, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, NULL, ierr);
}

static void f_igatherv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                       void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *root,
                       MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    gatherv(real, call, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req, ierr);
}

static void scatterv(void *real, const char *call, void *sbuf, MPI_Fint *scounts, MPI_Fint *displs,
                     MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    if (vprep(&s, &r, c, sbuf, NULL, scounts, displs, stype, froot(c, *root), rbuf, rcount, NULL, NULL, rtype,
              1, e, req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_iscatterv)real)(fwire(&s, sbuf), scounts, displs, stype, fwire(&r, rbuf), rcount, rtype,
                                    root, comm, req, e);
    else
        ((void(*) P_scatterv)real)(fwire(&s, sbuf), scounts, displs, stype, fwire(&r, rbuf), rcount, rtype,
                                   root, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_scatterv(void *real, const char *call, void *sbuf, MPI_Fint *scounts, MPI_Fint *displs,
                       MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root,
                       MPI_Fint *comm, MPI_Fint *ierr)
{
    scatterv(real, call, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, NULL, ierr);
}

static void f_iscatterv(void *real, const char *call, void *sbuf, MPI_Fint *scounts, MPI_Fint *displs,
                        MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root,
                        MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    scatterv(real, call, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req, ierr);
}

static void allgatherv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                       void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                       MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    if (vprep(&s, &r, c, sbuf, scount, NULL, NULL, stype, 1, rbuf, NULL, rcounts, displs, rtype, 1, e, req,
              call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_iallgatherv)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcounts, displs, rtype,
                                      comm, req, e);
    else
        ((void(*) P_allgatherv)real)(fwire(&s, sbuf), scount, stype, fwire(&r, rbuf), rcounts, displs, rtype,
                                     comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_allgatherv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                         void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                         MPI_Fint *ierr)
{
    allgatherv(real, call, sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, NULL, ierr);
}

static void f_iallgatherv(void *real, const char *call, void *sbuf, MPI_Fint *scount, MPI_Fint *stype,
                          void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                          MPI_Fint *req, MPI_Fint *ierr)
{
    allgatherv(real, call, sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req, ierr);
}

static void alltoallv(void *real, const char *call, void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls,
                      MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                      MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    if (vprep(&s, &r, c, sbuf, NULL, scounts, sdispls, stype, 1, rbuf, NULL, rcounts, rdispls, rtype, 1, e,
              req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_ialltoallv)real)(fwire(&s, sbuf), scounts, sdispls, stype, fwire(&r, rbuf), rcounts,
                                     rdispls, rtype, comm, req, e);
    else
        ((void(*) P_alltoallv)real)(fwire(&s, sbuf), scounts, sdispls, stype, fwire(&r, rbuf), rcounts,
                                    rdispls, rtype, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_alltoallv(void *real, const char *call, void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls,
                        MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                        MPI_Fint *comm, MPI_Fint *ierr)
{
    alltoallv(real, call, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, NULL, ierr);
}

static void f_ialltoallv(void *real, const char *call, void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls,
                         MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                         MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    alltoallv(real, call, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req, ierr);
}

/* Reduce_scatter: the input is the sum of the counts (in place: at rbuf),
 * the result this rank's count. */
static void redscat(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *rcounts, MPI_Fint *type,
                    MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    MPI_Comm c = fcomm(comm);
    mbuf_t s, r;
    int n = fsize(c), me = -1;
    MPI_Count total = 0;
    PMPI_Comm_rank(c, &me);
    for (int i = 0; rcounts && i < n; i++)
        total += rcounts[i] > 0 ? rcounts[i] : 0;
    MPI_Count mine = !fbuf(sbuf) ? total : rcounts && me >= 0 && me < n ? rcounts[me] : 0;
    if (cprep(&s, &r, c, sbuf, total, type, 1, rbuf, mine, type, 1, e, req, call) != MPI_SUCCESS)
        return;
    if (req)
        ((void(*) P_iredscat)real)(fwire(&s, sbuf), fwire(&r, rbuf), rcounts, type, op, comm, req, e);
    else
        ((void(*) P_redscat)real)(fwire(&s, sbuf), fwire(&r, rbuf), rcounts, type, op, comm, e);
    cdone(e, req, &s, &r, c, call);
}

static void f_redscat(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *rcounts, MPI_Fint *type,
                      MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    redscat(real, call, sbuf, rbuf, rcounts, type, op, comm, NULL, ierr);
}

static void f_iredscat(void *real, const char *call, void *sbuf, void *rbuf, MPI_Fint *rcounts,
                       MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    redscat(real, call, sbuf, rbuf, rcounts, type, op, comm, req, ierr);
}
#endif /* OPEN_MPI */

/* ------------------------------------------------------------------------ */
/* Start, end and completion (both MPIs)                                     */
/* ------------------------------------------------------------------------ */

/* Fortran arguments are passed by reference in every binding, and mpi_f08's
 * handle types hold one integer, so one parameter list serves mpif.h,
 * `use mpi` and mpi_f08 (Open MPI's ompi_*_f and MPICH's *_f08_ alike). */
#define P_init (MPI_Fint * ierr)
#define A_init (ierr)
#define P_init_thread (MPI_Fint * required, MPI_Fint * provided, MPI_Fint * ierr)
#define A_init_thread (required, provided, ierr)
#define P_wait (MPI_Fint * req, MPI_Fint * st, MPI_Fint * ierr)
#define A_wait (req, st, ierr)
#define P_test (MPI_Fint * req, MPI_Fint * flag, MPI_Fint * st, MPI_Fint * ierr)
#define A_test (req, flag, st, ierr)
#define P_waitall (MPI_Fint * count, MPI_Fint * reqs, MPI_Fint * sts, MPI_Fint * ierr)
#define A_waitall (count, reqs, sts, ierr)
#define P_testall (MPI_Fint * count, MPI_Fint * reqs, MPI_Fint * flag, MPI_Fint * sts, MPI_Fint * ierr)
#define A_testall (count, reqs, flag, sts, ierr)
#define P_waitany (MPI_Fint * count, MPI_Fint * reqs, MPI_Fint * index, MPI_Fint * st, MPI_Fint * ierr)
#define A_waitany (count, reqs, index, st, ierr)
#define P_testany \
    (MPI_Fint * count, MPI_Fint * reqs, MPI_Fint * index, MPI_Fint * flag, MPI_Fint * st, MPI_Fint * ierr)
#define A_testany (count, reqs, index, flag, st, ierr)
#define P_waitsome                                                                               \
    (MPI_Fint * count, MPI_Fint * reqs, MPI_Fint * outcount, MPI_Fint * indices, MPI_Fint * sts, \
     MPI_Fint * ierr)
#define A_waitsome (count, reqs, outcount, indices, sts, ierr)
#define P_start (MPI_Fint * req, MPI_Fint * ierr)
#define A_start (req, ierr)
#define P_startall (MPI_Fint * count, MPI_Fint * reqs, MPI_Fint * ierr)
#define A_startall (count, reqs, ierr)

static void f_init(void *real, const char *call, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    (void)call;
    ((void(*) P_init)real)(e);
    if (*e == MPI_SUCCESS)
        ptsc__ipose_start();
}

static void f_init_thread(void *real, const char *call, MPI_Fint *required, MPI_Fint *provided,
                          MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    (void)call;
    ((void(*) P_init_thread)real)(required, provided, e);
    if (*e == MPI_SUCCESS)
        ptsc__ipose_start();
}

static void f_finalize(void *real, const char *call, MPI_Fint *ierr)
{
    (void)call;
    ptsc__ipose_stop();
    ((void(*) P_init)real)(ierr);
}

/* The entries of n Fortran requests, taken out of the table before MPI's
 * completion call (each concluded after it); on the stack up to 16. */
typedef struct {
    pending_t *few[16], **p;
    MPI_Request fewc[16], *c;
    int n;
} taken_t;

static int take(taken_t *t, int n, const MPI_Fint *reqs)
{
    t->n = n > 0 ? n : 0;
    t->p = t->n <= 16 ? t->few : malloc((size_t)t->n * sizeof *t->p);
    t->c = t->n <= 16 ? t->fewc : malloc((size_t)t->n * sizeof *t->c);
    if (!t->p || !t->c) {
        if (t->p != t->few)
            free(t->p);
        if (t->c != t->fewc)
            free(t->c);
        ptsc__err(PTSC_ERR_NO_MEMORY, "request handles");
        ptsc__log(PTSC__LOG_ERROR, "libptsc-mpi: a Fortran completion call: %s", ptsc_last_error());
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < t->n; i++)
        t->c[i] = PMPI_Request_f2c(reqs[i]);
    return ptsc__ipose_take(t->n, t->c, t->p);
}

/* After the call: entry i settled when `done(i)` says its request
 * completed, kept under the handle MPI left otherwise (a request MPI nulled
 * is settled too: interpose.c's conclude). A status is not looked at: a
 * cancelled receive's host copy goes back unchanged (it holds the buffer's
 * own bytes, copied in at the start). */
static int conclude_all(taken_t *t, const MPI_Fint *reqs, const char *done)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < t->n; i++) {
        int r = ptsc__ipose_conclude(t->p[i], done && done[i], NULL, PMPI_Request_f2c(reqs[i]));
        rc = rc != MPI_SUCCESS ? rc : r;
    }
    if (t->p != t->few)
        free(t->p);
    if (t->c != t->fewc)
        free(t->c);
    return rc;
}

/* The result: MPI's error first, then the interposer's. */
static void result(MPI_Fint *e, int rc)
{
    if (*e == MPI_SUCCESS)
        *e = (MPI_Fint)rc;
}

static void f_wait(void *real, const char *call, MPI_Fint *req, MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (!ptsc__ipose_busy() || take(&t, 1, req) != MPI_SUCCESS)
        return ((void(*) P_wait)real)(req, st, e);
    ((void(*) P_wait)real)(req, st, e);
    result(e, conclude_all(&t, req, "\1"));
}

static void f_test(void *real, const char *call, MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (!ptsc__ipose_busy() || take(&t, 1, req) != MPI_SUCCESS)
        return ((void(*) P_test)real)(req, flag, st, e);
    *flag = 0;
    ((void(*) P_test)real)(req, flag, st, e);
    char done = *flag != 0;
    result(e, conclude_all(&t, req, &done));
}

/* Waitall, Testall, Waitany, Testany, Waitsome, Testsome: which requests
 * completed, from what MPI's function returned. Indices are Fortran's,
 * from 1, but MPICH 4.0's mpi_f08 returns them from 0 (pmodels/mpich#6270,
 * fixed in 4.1), and mpi_f08's are the only ones wrapped for MPICH. */
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
#define FIRST 0
#else
#define FIRST 1
#endif
static char *marks(int n, char *few)
{
    char *d = n <= 16 ? few : calloc((size_t)n, 1);
    if (d == few)
        for (int i = 0; i < 16; i++)
            few[i] = 0;
    return d;
}

static void f_waitall(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *sts,
                      MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (!ptsc__ipose_busy() || *count <= 0 || take(&t, *count, reqs) != MPI_SUCCESS)
        return ((void(*) P_waitall)real)(count, reqs, sts, e);
    ((void(*) P_waitall)real)(count, reqs, sts, e);
    char few[16], *d = marks(t.n, few);
    for (int i = 0; d && i < t.n; i++)
        d[i] = *e == MPI_SUCCESS;
    result(e, conclude_all(&t, reqs, d));
    if (d != few)
        free(d);
}

static void f_testall(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *flag,
                      MPI_Fint *sts, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (!ptsc__ipose_busy() || *count <= 0 || take(&t, *count, reqs) != MPI_SUCCESS)
        return ((void(*) P_testall)real)(count, reqs, flag, sts, e);
    *flag = 0;
    ((void(*) P_testall)real)(count, reqs, flag, sts, e);
    char few[16], *d = marks(t.n, few);
    for (int i = 0; d && i < t.n; i++)
        d[i] = *e == MPI_SUCCESS && *flag;
    result(e, conclude_all(&t, reqs, d));
    if (d != few)
        free(d);
}

static void f_waitany(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index,
                      MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (!ptsc__ipose_busy() || *count <= 0 || take(&t, *count, reqs) != MPI_SUCCESS)
        return ((void(*) P_waitany)real)(count, reqs, index, st, e);
    *index = MPI_UNDEFINED;
    ((void(*) P_waitany)real)(count, reqs, index, st, e);
    char few[16], *d = marks(t.n, few);
    if (d && *index != MPI_UNDEFINED && *index >= FIRST && *index < t.n + FIRST)
        d[*index - FIRST] = 1;
    result(e, conclude_all(&t, reqs, d));
    if (d != few)
        free(d);
}

static void f_testany(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index,
                      MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (!ptsc__ipose_busy() || *count <= 0 || take(&t, *count, reqs) != MPI_SUCCESS)
        return ((void(*) P_testany)real)(count, reqs, index, flag, st, e);
    *index = MPI_UNDEFINED;
    *flag = 0;
    ((void(*) P_testany)real)(count, reqs, index, flag, st, e);
    char few[16], *d = marks(t.n, few);
    if (d && *flag && *index != MPI_UNDEFINED && *index >= FIRST && *index < t.n + FIRST)
        d[*index - FIRST] = 1;
    result(e, conclude_all(&t, reqs, d));
    if (d != few)
        free(d);
}

/* Waitsome and Testsome (`test`): one parameter list. */
static void some(int test, void *real, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
                 MPI_Fint *sts, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)test;
    if (!ptsc__ipose_busy() || *count <= 0 || take(&t, *count, reqs) != MPI_SUCCESS)
        return ((void(*) P_waitsome)real)(count, reqs, outcount, indices, sts, e);
    *outcount = 0;
    ((void(*) P_waitsome)real)(count, reqs, outcount, indices, sts, e);
    char few[16], *d = marks(t.n, few);
    for (int k = 0; d && *outcount != MPI_UNDEFINED && k < *outcount; k++)
        if (indices[k] >= FIRST && indices[k] < t.n + FIRST)
            d[indices[k] - FIRST] = 1;
    result(e, conclude_all(&t, reqs, d));
    if (d != few)
        free(d);
}

static void f_waitsome(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *outcount,
                       MPI_Fint *indices, MPI_Fint *sts, MPI_Fint *ierr)
{
    (void)call;
    some(0, real, count, reqs, outcount, indices, sts, ierr);
}

static void f_testsome(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *outcount,
                       MPI_Fint *indices, MPI_Fint *sts, MPI_Fint *ierr)
{
    (void)call;
    some(1, real, count, reqs, outcount, indices, sts, ierr);
}

/* Start and Startall: each persistent request's sync and host copy first;
 * the entry then follows the handle MPI leaves. */
static void starts(void *real, int all, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    int n = all ? *count : 1;
    if (!ptsc__ipose_busy() || n <= 0 || take(&t, n, reqs) != MPI_SUCCESS) {
        if (all)
            ((void(*) P_startall)real)(count, reqs, e);
        else
            ((void(*) P_start)real)(reqs, e);
        return;
    }
    int rc = MPI_SUCCESS;
    for (int i = 0; rc == MPI_SUCCESS && i < n; i++)
        rc = ptsc__ipose_start_prep(t.p[i]);
    *e = (MPI_Fint)rc;
    if (rc == MPI_SUCCESS) {
        if (all)
            ((void(*) P_startall)real)(count, reqs, e);
        else
            ((void(*) P_start)real)(reqs, e);
    }
    for (int i = 0; i < n; i++)
        ptsc__ipose_start_done(t.p[i], *e, PMPI_Request_f2c(reqs[i]));
    if (t.p != t.few)
        free(t.p);
    if (t.c != t.fewc)
        free(t.c);
}

static void f_start(void *real, const char *call, MPI_Fint *req, MPI_Fint *ierr)
{
    (void)call;
    starts(real, 0, NULL, req, ierr);
}

static void f_startall(void *real, const char *call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr)
{
    (void)call;
    starts(real, 1, count, reqs, ierr);
}

/* Request_free returns at once: a running request with a host copy is
 * detached (interpose.c settles it later), an inactive persistent one
 * freed in MPI too. */
static void f_request_free(void *real, const char *call, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Fint own, *e = IERR(ierr, own);
    taken_t t;
    (void)call;
    if (ptsc__ipose_busy() && take(&t, 1, req) == MPI_SUCCESS && t.p[0] && ptsc__ipose_free(t.p[0])) {
        *req = PMPI_Request_c2f(MPI_REQUEST_NULL);
        *e = MPI_SUCCESS;
        return;
    }
    ((void(*) P_start)real)(req, e);
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

/* One row per call: X(work, parameters, arguments, lower, UPPER, Mixed). */
#define COMMON_CALLS(X)                                                                   \
    X(f_init, P_init, A_init, init, INIT, Init)                                           \
    X(f_init_thread, P_init_thread, A_init_thread, init_thread, INIT_THREAD, Init_thread) \
    X(f_finalize, P_init, A_init, finalize, FINALIZE, Finalize)                           \
    X(f_wait, P_wait, A_wait, wait, WAIT, Wait)                                           \
    X(f_test, P_test, A_test, test, TEST, Test)                                           \
    X(f_waitall, P_waitall, A_waitall, waitall, WAITALL, Waitall)                         \
    X(f_testall, P_testall, A_testall, testall, TESTALL, Testall)                         \
    X(f_waitany, P_waitany, A_waitany, waitany, WAITANY, Waitany)                         \
    X(f_testany, P_testany, A_testany, testany, TESTANY, Testany)                         \
    X(f_waitsome, P_waitsome, A_waitsome, waitsome, WAITSOME, Waitsome)                   \
    X(f_testsome, P_waitsome, A_waitsome, testsome, TESTSOME, Testsome)                   \
    X(f_start, P_start, A_start, start, START, Start)                                     \
    X(f_startall, P_startall, A_startall, startall, STARTALL, Startall)                   \
    X(f_request_free, P_start, A_start, request_free, REQUEST_FREE, Request_free)

#if defined(OPEN_MPI)
#define FORTRAN_CALLS(X)                                                                                 \
    COMMON_CALLS(X)                                                                                      \
    X(f_send, P_send, A_send, send, SEND, Send)                                                          \
    X(f_send, P_send, A_send, ssend, SSEND, Ssend)                                                       \
    X(f_send, P_send, A_send, bsend, BSEND, Bsend)                                                       \
    X(f_send, P_send, A_send, rsend, RSEND, Rsend)                                                       \
    X(f_isend, P_isend, A_isend, isend, ISEND, Isend)                                                    \
    X(f_isend, P_isend, A_isend, issend, ISSEND, Issend)                                                 \
    X(f_isend, P_isend, A_isend, ibsend, IBSEND, Ibsend)                                                 \
    X(f_isend, P_isend, A_isend, irsend, IRSEND, Irsend)                                                 \
    X(f_recv, P_recv, A_recv, recv, RECV, Recv)                                                          \
    X(f_irecv, P_isend, A_isend, irecv, IRECV, Irecv)                                                    \
    X(f_send_init, P_isend, A_isend, send_init, SEND_INIT, Send_init)                                    \
    X(f_send_init, P_isend, A_isend, ssend_init, SSEND_INIT, Ssend_init)                                 \
    X(f_send_init, P_isend, A_isend, bsend_init, BSEND_INIT, Bsend_init)                                 \
    X(f_send_init, P_isend, A_isend, rsend_init, RSEND_INIT, Rsend_init)                                 \
    X(f_recv_init, P_isend, A_isend, recv_init, RECV_INIT, Recv_init)                                    \
    X(f_sendrecv, P_sendrecv, A_sendrecv, sendrecv, SENDRECV, Sendrecv)                                  \
    X(f_sendrecv_replace, P_sendrecv_replace, A_sendrecv_replace, sendrecv_replace, SENDRECV_REPLACE,    \
      Sendrecv_replace)                                                                                  \
    X(f_mrecv, P_mrecv, A_mrecv, mrecv, MRECV, Mrecv)                                                    \
    X(f_imrecv, P_mrecv, A_mrecv, imrecv, IMRECV, Imrecv)                                                \
    X(f_bcast, P_bcast, A_bcast, bcast, BCAST, Bcast)                                                    \
    X(f_ibcast, P_ibcast, A_ibcast, ibcast, IBCAST, Ibcast)                                              \
    X(f_reduce, P_reduce, A_reduce, reduce, REDUCE, Reduce)                                              \
    X(f_ireduce, P_ireduce, A_ireduce, ireduce, IREDUCE, Ireduce)                                        \
    X(f_allred, P_allred, A_allred, allreduce, ALLREDUCE, Allreduce)                                     \
    X(f_iallred, P_iallred, A_iallred, iallreduce, IALLREDUCE, Iallreduce)                               \
    X(f_allred, P_allred, A_allred, scan, SCAN, Scan)                                                    \
    X(f_iallred, P_iallred, A_iallred, iscan, ISCAN, Iscan)                                              \
    X(f_allred, P_allred, A_allred, exscan, EXSCAN, Exscan)                                              \
    X(f_iallred, P_iallred, A_iallred, iexscan, IEXSCAN, Iexscan)                                        \
    X(f_rsb, P_allred, A_allred, reduce_scatter_block, REDUCE_SCATTER_BLOCK, Reduce_scatter_block)       \
    X(f_irsb, P_iallred, A_iallred, ireduce_scatter_block, IREDUCE_SCATTER_BLOCK, Ireduce_scatter_block) \
    X(f_gather, P_gather, A_gather, gather, GATHER, Gather)                                              \
    X(f_igather, P_igather, A_igather, igather, IGATHER, Igather)                                        \
    X(f_scatter, P_gather, A_gather, scatter, SCATTER, Scatter)                                          \
    X(f_iscatter, P_igather, A_igather, iscatter, ISCATTER, Iscatter)                                    \
    X(f_allgather, P_allgather, A_allgather, allgather, ALLGATHER, Allgather)                            \
    X(f_iallgather, P_iallgather, A_iallgather, iallgather, IALLGATHER, Iallgather)                      \
    X(f_alltoall, P_allgather, A_allgather, alltoall, ALLTOALL, Alltoall)                                \
    X(f_ialltoall, P_iallgather, A_iallgather, ialltoall, IALLTOALL, Ialltoall)                          \
    X(f_gatherv, P_gatherv, A_gatherv, gatherv, GATHERV, Gatherv)                                        \
    X(f_igatherv, P_igatherv, A_igatherv, igatherv, IGATHERV, Igatherv)                                  \
    X(f_scatterv, P_scatterv, A_scatterv, scatterv, SCATTERV, Scatterv)                                  \
    X(f_iscatterv, P_iscatterv, A_iscatterv, iscatterv, ISCATTERV, Iscatterv)                            \
    X(f_allgatherv, P_allgatherv, A_allgatherv, allgatherv, ALLGATHERV, Allgatherv)                      \
    X(f_iallgatherv, P_iallgatherv, A_iallgatherv, iallgatherv, IALLGATHERV, Iallgatherv)                \
    X(f_alltoallv, P_alltoallv, A_alltoallv, alltoallv, ALLTOALLV, Alltoallv)                            \
    X(f_ialltoallv, P_ialltoallv, A_ialltoallv, ialltoallv, IALLTOALLV, Ialltoallv)                      \
    X(f_redscat, P_redscat, A_redscat, reduce_scatter, REDUCE_SCATTER, Reduce_scatter)                   \
    X(f_iredscat, P_iredscat, A_iredscat, ireduce_scatter, IREDUCE_SCATTER, Ireduce_scatter)

/* Open MPI: the thirteen names of one libmpi_mpifh function. (clang-format
 * does not settle on a layout for this one.) */
/* clang-format off */
#define NAMES(Y, work, P, A, lo, UP, Mx)   \
    Y(ompi_##lo##_f, work, P, A, Mx)       \
    Y(mpi_##lo##_, work, P, A, Mx)         \
    Y(mpi_##lo##__, work, P, A, Mx)        \
    Y(mpi_##lo, work, P, A, Mx)            \
    Y(MPI_##UP, work, P, A, Mx)            \
    Y(pmpi_##lo##_, work, P, A, Mx)        \
    Y(pmpi_##lo##__, work, P, A, Mx)       \
    Y(pmpi_##lo, work, P, A, Mx)           \
    Y(PMPI_##UP, work, P, A, Mx)           \
    Y(MPI_##Mx##_f, work, P, A, Mx)        \
    Y(MPI_##Mx##_f08, work, P, A, Mx)      \
    Y(PMPI_##Mx##_f, work, P, A, Mx)       \
    Y(PMPI_##Mx##_f08, work, P, A, Mx)
/* clang-format on */
#elif defined(MPICH)
/* MPICH: mpi_f08's functions (its mpif.h and `use mpi` reach C MPI_*). */
#define FORTRAN_CALLS(X) COMMON_CALLS(X)
#define NAMES(Y, work, P, A, lo, UP, Mx) \
    Y(mpi_##lo##_f08_, work, P, A, Mx) Y(pmpir_##lo##_f08_, work, P, A, Mx)
#else
#define FORTRAN_CALLS(X)
#endif

/* Each name: its own slot for MPI's function, and a wrapper that hands it
 * to the call's work. Every parameter list ends in `ierr`. */
#define UNPAREN(...) __VA_ARGS__
#define ONE_NAME(name, work, P, A, Mx)             \
    static _Atomic(void *) slot_##name;            \
    PTSC_MPI_API void name P;                      \
    PTSC_MPI_API void name P                       \
    {                                              \
        void *real = resolve(&slot_##name, #name); \
        if (real)                                  \
            work(real, "MPI_" #Mx, UNPAREN A);     \
        else if (ierr)                             \
            no_real(ierr);                         \
    }
#define ONE_CALL(work, P, A, lo, UP, Mx) NAMES(ONE_NAME, work, P, A, lo, UP, Mx)
FORTRAN_CALLS(ONE_CALL)
