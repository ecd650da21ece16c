/*
 * Point-to-point public calls: argument checks, then the transfer engine
 * (engine.c), which owns the protocol, the path of each message, requests
 * and progress.
 */
#include "ptsc_internal.h"

#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Argument checks                                                           */
/* ------------------------------------------------------------------------ */

/*
 * The size of the predefined datatypes programs send most, without a call
 * into MPI on every message; 0 for any other type (derived types are asked:
 * their handles may be freed and reused for another type). The MPI standard
 * binds each of these to its C type (MPI_BYTE is one byte), and every one is
 * contiguous with lower bound 0, so ptsc__type_is_contiguous may say yes at
 * once too. The unit tests compare each size with MPI_Type_size_x.
 */
static MPI_Count predefined_size(MPI_Datatype t)
{
    if (t == MPI_BYTE || t == MPI_CHAR || t == MPI_UNSIGNED_CHAR || t == MPI_SIGNED_CHAR || t == MPI_INT8_T ||
        t == MPI_UINT8_T)
        return 1;
    if (t == MPI_DOUBLE)
        return (MPI_Count)sizeof(double);
    if (t == MPI_FLOAT)
        return (MPI_Count)sizeof(float);
    if (t == MPI_INT)
        return (MPI_Count)sizeof(int);
    if (t == MPI_UNSIGNED)
        return (MPI_Count)sizeof(unsigned);
    if (t == MPI_LONG)
        return (MPI_Count)sizeof(long);
    if (t == MPI_UNSIGNED_LONG)
        return (MPI_Count)sizeof(unsigned long);
    if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT)
        return (MPI_Count)sizeof(long long);
    if (t == MPI_UNSIGNED_LONG_LONG)
        return (MPI_Count)sizeof(unsigned long long);
    if (t == MPI_SHORT)
        return (MPI_Count)sizeof(short);
    if (t == MPI_INT32_T || t == MPI_UINT32_T)
        return 4;
    if (t == MPI_INT64_T || t == MPI_UINT64_T)
        return 8;
    return 0;
}

int ptsc__check_buf(const void *buf, int count, MPI_Datatype type, const char *call, size_t *bytes)
{
    if (count < 0)
        return ptsc__err(PTSC_ERR_COUNT, "%s: count %d is negative", call, count);
    if (type == MPI_DATATYPE_NULL)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is MPI_DATATYPE_NULL", call);
    if (!buf && count > 0)
        return ptsc__err(PTSC_ERR_NULL_BUFFER, "%s: buffer is NULL with count %d", call, count);
    MPI_Count size = predefined_size(type);
    if (size == 0 && (MPI_Type_size_x(type, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0))
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", call);
    if (count > 0 && (uint64_t)size > SIZE_MAX / (uint64_t)count)
        return ptsc__err(PTSC_ERR_COUNT, "%s: %d elements of %lld bytes overflow a size_t", call, count,
                         (long long)size);
    *bytes = (size_t)count * (size_t)size;
    return PTSC_OK;
}

int ptsc__type_is_contiguous(MPI_Datatype type)
{
    MPI_Count size, lb, extent, tlb, textent;
    if (predefined_size(type) > 0)
        return 1;
    if (MPI_Type_size_x(type, &size) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    return lb == 0 && tlb == 0 && extent == size && textent == size;
}

/* Collectives stage whole buffers as bytes: they need a datatype without holes. */
int ptsc__check_contiguous(MPI_Datatype type, const char *call)
{
    if (ptsc__type_is_contiguous(type))
        return PTSC_OK;
    return ptsc__err(
        PTSC_ERR_UNSUPPORTED,
        "%s: non-contiguous datatypes are not supported while staging is on (pack the data first)", call);
}

static int check_peer(int rank, int thread, int tag, int any_rank, const char *call)
{
    if ((rank < 0 || rank >= ptsc__g.nranks) && !(any_rank && rank == PTSC_ANY_RANK))
        return ptsc__err(PTSC_ERR_RANK, "%s: rank %d is outside [0, %d)%s", call, rank, ptsc__g.nranks,
                         any_rank ? " and is not PTSC_ANY_RANK" : "");
    if (thread < 0 || thread >= ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD, "%s: thread %d is outside [0, %d) (PTSC_MAX_THREADS)", call, thread,
                         ptsc__g.nthreads);
    if (tag < 0 || tag > ptsc__g.tag_max)
        return ptsc__err(PTSC_ERR_TAG, "%s: tag %d is outside [0, %d] (ptsc_tag_max)", call, tag,
                         ptsc__g.tag_max);
    return PTSC_OK;
}

static int start_check(ptsc_ctx_t **ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                       int tag, int is_recv, const char *call, size_t *bytes)
{
    int rc = ptsc__ctx_resolve(ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf(buf, count, type, call, bytes);
    if (rc == PTSC_OK)
        rc = check_peer(rank, thread, tag, is_recv, call);
    return rc;
}

/* A request argument, once ptsc is known to be ready: non-NULL pointer, and
 * a request (if any) of the calling thread. */
static int check_req_owner(ptsc_request_t *req, const char *call)
{
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "%s: request pointer is NULL", call);
    if (*req && !pthread_equal(ptsc__request_ctx(*req)->owner, pthread_self()))
        return ptsc__err(PTSC_ERR_WRONG_THREAD, "%s: request started by thread index %d", call,
                         ptsc__request_ctx(*req)->index);
    return PTSC_OK;
}

static int check_req(ptsc_request_t *req, const char *call)
{
    int rc = ptsc__check_ready(call);
    return rc != PTSC_OK ? rc : check_req_owner(req, call);
}

/* Complete a checked request and reset the handle. */
static int wait_checked(ptsc_request_t *req, ptsc_info_t *info)
{
    if (!*req)
        return PTSC_OK;
    int rc = ptsc__engine_wait(*req, info);
    *req = PTSC_REQUEST_NULL;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Public calls                                                              */
/* ------------------------------------------------------------------------ */

int ptsc_send(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread, int tag)
{
    size_t bytes = 0;
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, 0, "ptsc_send", &bytes);
    return rc != PTSC_OK ? rc
                         : ptsc__engine_send(ctx, buf, count, type, bytes, rank, thread, tag, "ptsc_send");
}

int ptsc_recv_info(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
                   ptsc_info_t *info)
{
    size_t bytes = 0;
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, 1, "ptsc_recv", &bytes);
    return rc != PTSC_OK
               ? rc
               : ptsc__engine_recv(ctx, buf, count, type, bytes, rank, thread, tag, info, "ptsc_recv");
}

int ptsc_recv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag)
{
    return ptsc_recv_info(ctx, buf, count, type, rank, thread, tag, NULL);
}

int ptsc_isend(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
               ptsc_request_t *req)
{
    size_t bytes = 0;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_isend: request pointer is NULL");
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, 0, "ptsc_isend", &bytes);
    return rc != PTSC_OK ? rc
                         : ptsc__engine_start(ctx, 0, (void *)buf, count, type, bytes, rank, thread, tag,
                                              "ptsc_isend", req);
}

int ptsc_irecv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
               ptsc_request_t *req)
{
    size_t bytes = 0;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_irecv: request pointer is NULL");
    int rc = start_check(&ctx, buf, count, type, rank, thread, tag, 1, "ptsc_irecv", &bytes);
    return rc != PTSC_OK
               ? rc
               : ptsc__engine_start(ctx, 1, buf, count, type, bytes, rank, thread, tag, "ptsc_irecv", req);
}

int ptsc_sendrecv(ptsc_ctx_t *ctx, const void *sbuf, int scount, MPI_Datatype stype, int dest_rank,
                  int dest_thread, int stag, void *rbuf, int rcount, MPI_Datatype rtype, int src_rank,
                  int src_thread, int rtag)
{
    const char *call = "ptsc_sendrecv";
    size_t sbytes = 0, rbytes = 0;
    /* The context is resolved (ready, owner) once for both halves. */
    int rc = start_check(&ctx, rbuf, rcount, rtype, src_rank, src_thread, rtag, 1, call, &rbytes);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf(sbuf, scount, stype, call, &sbytes);
    if (rc == PTSC_OK)
        rc = check_peer(dest_rank, dest_thread, stag, 0, call);
    if (rc != PTSC_OK)
        return rc;
    ptsc_request_t r[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    rc = ptsc__engine_start(ctx, 1, rbuf, rcount, rtype, rbytes, src_rank, src_thread, rtag, call, &r[0]);
    if (rc != PTSC_OK)
        return rc;
    int src = ptsc__engine_start(ctx, 0, (void *)sbuf, scount, stype, sbytes, dest_rank, dest_thread, stag,
                                 call, &r[1]);
    /* The receive is posted either way: complete it (a failed send leaves a
     * peer that may never send, but the receive must not be lost silently:
     * the error is reported and the receive still completes). */
    if (src != PTSC_OK) {
        char detail[PTSC__DETAIL_LEN];
        snprintf(detail, sizeof detail, "%s", ptsc_last_error());
        ptsc__engine_cancel(r[0]);
        ptsc__err_set_detail(detail);
        return src;
    }
    return ptsc_waitall(2, r);
}

int ptsc_wait_info(ptsc_request_t *req, ptsc_info_t *info)
{
    int rc = check_req(req, "ptsc_wait");
    return rc != PTSC_OK ? rc : wait_checked(req, info);
}

int ptsc_wait(ptsc_request_t *req) { return ptsc_wait_info(req, NULL); }

int ptsc_test_info(ptsc_request_t *req, int *done, ptsc_info_t *info)
{
    int rc = check_req(req, "ptsc_test");
    if (rc != PTSC_OK)
        return rc;
    if (!done)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_test: done is NULL");
    if (!*req) {
        *done = 1;
        return PTSC_OK;
    }
    int d = 0;
    rc = ptsc__engine_test(*req, &d, info);
    if (d)
        *req = PTSC_REQUEST_NULL;
    *done = d;
    return rc;
}

int ptsc_test(ptsc_request_t *req, int *done) { return ptsc_test_info(req, done, NULL); }

int ptsc_waitall(int n, ptsc_request_t reqs[])
{
    int rc = ptsc__check_ready("ptsc_waitall");
    if (rc != PTSC_OK)
        return rc;
    if (n < 0 || (n > 0 && !reqs))
        return ptsc__err(PTSC_ERR_ARG, "ptsc_waitall: %s",
                         n < 0 ? "negative count" : "request array is NULL");
    for (int i = 0; i < n; i++)
        if ((rc = check_req_owner(&reqs[i], "ptsc_waitall")) != PTSC_OK)
            return rc;
    /* Waiting on one request progresses all of the thread's requests, so the
     * order cannot deadlock; every request completes even after an error. */
    int first = PTSC_OK;
    char detail[PTSC__DETAIL_LEN] = "";
    for (int i = 0; i < n; i++) {
        rc = wait_checked(&reqs[i], NULL);
        if (rc != PTSC_OK && first == PTSC_OK) {
            first = rc;
            snprintf(detail, sizeof detail, "ptsc_waitall: request %d: %s", i, ptsc_last_error());
        }
    }
    if (first != PTSC_OK)
        ptsc__err_set_detail(detail);
    return first;
}

static int probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info,
                 const char *call)
{
    int rc = ptsc__ctx_resolve(&ctx, call);
    if (rc == PTSC_OK)
        rc = check_peer(rank, thread, tag, 1, call);
    return rc != PTSC_OK ? rc : ptsc__engine_probe(ctx, rank, thread, tag, flag, info);
}

int ptsc_probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, ptsc_info_t *info)
{
    return probe(ctx, rank, thread, tag, NULL, info, "ptsc_probe");
}

int ptsc_iprobe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info)
{
    if (!flag)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_iprobe: flag is NULL");
    return probe(ctx, rank, thread, tag, flag, info, "ptsc_iprobe");
}
