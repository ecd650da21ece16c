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
        rc = ptsc__check_buf_bottom(buf, count, type, call, NULL, bytes);
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
    if (*req && ptsc__request_stale(*req))
        return ptsc__err(PTSC_ERR_ARG,
                         "%s: the request was already completed (a copy of a handle that a wait, test or "
                         "ptsc_request_free reset to PTSC_REQUEST_NULL)",
                         call);
    return PTSC_OK;
}

static int check_req(ptsc_request_t *req, const char *call)
{
    int rc = ptsc__check_ready(call);
    return rc != PTSC_OK ? rc : check_req_owner(req, call);
}

/* The detail of a request that completed with an error found in an earlier
 * progress pass (the detail of that pass is gone): name the status. */
static int req_status(int rc)
{
    if (rc == PTSC_OK || ptsc__tls()->detail[0])
        return rc;
    if (rc == PTSC_ERR_CANCELLED)
        return ptsc__err(rc, "ptsc: the receive was cancelled (ptsc_cancel) before a message matched it");
    return ptsc__err(rc, "ptsc: request completed with %s", ptsc_status_name(rc));
}

/* Complete a checked request and reset the handle. */
static int wait_checked(ptsc_request_t *req, ptsc_info_t *info)
{
    if (!*req)
        return PTSC_OK;
    int rc = ptsc__engine_wait(*req, info);
    *req = PTSC_REQUEST_NULL;
    return req_status(rc);
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
    int rc = ptsc__check_ready("ptsc_isend");
    if (rc != PTSC_OK)
        return rc;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_isend: request pointer is NULL");
    rc = start_check(&ctx, buf, count, type, rank, thread, tag, 0, "ptsc_isend", &bytes);
    return rc != PTSC_OK ? rc
                         : ptsc__engine_start(ctx, 0, (void *)buf, count, type, bytes, rank, thread, tag,
                                              "ptsc_isend", req);
}

int ptsc_irecv(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
               ptsc_request_t *req)
{
    size_t bytes = 0;
    int rc = ptsc__check_ready("ptsc_irecv");
    if (rc != PTSC_OK)
        return rc;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_irecv: request pointer is NULL");
    rc = start_check(&ctx, buf, count, type, rank, thread, tag, 1, "ptsc_irecv", &bytes);
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
    int rc = ptsc__ctx_resolve(&ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf_bottom(sbuf, scount, stype, call, "send", &sbytes);
    if (rc == PTSC_OK)
        rc = check_peer(dest_rank, dest_thread, stag, 0, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf_bottom(rbuf, rcount, rtype, call, "receive", &rbytes);
    if (rc == PTSC_OK)
        rc = check_peer(src_rank, src_thread, rtag, 1, call);
    /* Both halves are admitted before either starts: a send refused after
     * the receive matched would have consumed the incoming message. */
    if (rc == PTSC_OK)
        rc = ptsc__engine_admit(ctx, 1, rbuf, rtype, rbytes, call);
    if (rc == PTSC_OK)
        rc = ptsc__engine_admit(ctx, 0, sbuf, stype, sbytes, call);
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
    return req_status(rc);
}

int ptsc_test(ptsc_request_t *req, int *done) { return ptsc_test_info(req, done, NULL); }

/* An array of requests: a count, an array, every request the caller's own.
 * `*ctx` gets the context of the first request (NULL when all are NULL). */
static int check_req_array(int n, ptsc_request_t reqs[], const char *call, ptsc_ctx_t **ctx)
{
    int rc = ptsc__check_ready(call);
    if (rc != PTSC_OK)
        return rc;
    if (n < 0 || (n > 0 && !reqs))
        return ptsc__err(PTSC_ERR_ARG, "%s: %s", call, n < 0 ? "negative count" : "request array is NULL");
    *ctx = NULL;
    for (int i = 0; i < n; i++) {
        if ((rc = check_req_owner(&reqs[i], call)) != PTSC_OK)
            return rc;
        if (reqs[i] && !*ctx)
            *ctx = ptsc__request_ctx(reqs[i]);
    }
    /* A request twice would complete twice (and be recycled twice): refused,
     * nothing changed. One mark per request, cleared again before returning. */
    int dup = -1;
    for (int i = 0; i < n && dup < 0; i++)
        if (reqs[i] && ptsc__request_mark(reqs[i], 1))
            dup = i;
    for (int i = 0; i < n; i++)
        if (reqs[i])
            ptsc__request_mark(reqs[i], 0);
    if (dup >= 0) {
        int first = 0;
        while (reqs[first] != reqs[dup])
            first++;
        return ptsc__err(PTSC_ERR_ARG, "%s: requests %d and %d are the same request", call, first, dup);
    }
    return PTSC_OK;
}

/* The first error among the requests an array call completes, with the
 * index of its request in the detail; the others complete all the same. */
typedef struct {
    int rc;
    char detail[PTSC__DETAIL_LEN];
} first_err_t;

static void note_err(first_err_t *f, int rc, const char *call, int i)
{
    if (rc != PTSC_OK && f->rc == PTSC_OK) {
        f->rc = rc;
        snprintf(f->detail, sizeof f->detail, "%s: request %d: %s", call, i, ptsc_last_error());
    }
}

static int first_err(const first_err_t *f)
{
    if (f->rc != PTSC_OK)
        ptsc__err_set_detail(f->detail);
    return f->rc;
}

/* Complete request i of an array into `info` (may be NULL); a send's entry
 * names no peer (-1) and carries only its status. */
static int complete_one(ptsc_request_t *req, ptsc_info_t *info)
{
    if (info)
        *info = (ptsc_info_t){-1, -1, -1, PTSC_OK, 0};
    int rc = wait_checked(req, info);
    if (info)
        info->error = rc;
    return rc;
}

int ptsc_waitall(int n, ptsc_request_t reqs[])
{
    ptsc_ctx_t *ctx;
    int rc = check_req_array(n, reqs, "ptsc_waitall", &ctx);
    if (rc != PTSC_OK)
        return rc;
    /* Waiting on one request progresses all of the thread's requests, so the
     * order cannot deadlock; every request completes even after an error. */
    first_err_t f = {PTSC_OK, ""};
    for (int i = 0; i < n; i++)
        note_err(&f, wait_checked(&reqs[i], NULL), "ptsc_waitall", i);
    return first_err(&f);
}

int ptsc_waitany(int n, ptsc_request_t reqs[], int *index, ptsc_info_t *info)
{
    const char *call = "ptsc_waitany";
    ptsc_ctx_t *ctx;
    int rc = check_req_array(n, reqs, call, &ctx);
    if (rc != PTSC_OK)
        return rc;
    if (!index)
        return ptsc__err(PTSC_ERR_ARG, "%s: index is NULL", call);
    if (!ctx) {
        *index = PTSC_UNDEFINED;
        return PTSC_OK;
    }
    ptsc__wait_begin(ctx, call, PTSC__WAIT_ANY, -1, -1, -1, (size_t)n);
    for (;;) {
        int moved = ptsc__engine_progress(ctx);
        for (int i = 0; i < n; i++)
            if (reqs[i] && ptsc__engine_done(reqs[i])) {
                ptsc__wait_end(ctx);
                *index = i;
                if ((rc = complete_one(&reqs[i], info)) != PTSC_OK) {
                    first_err_t f = {PTSC_OK, ""};
                    note_err(&f, rc, call, i);
                    rc = first_err(&f);
                }
                return rc;
            }
        ptsc__engine_idle(ctx, moved);
    }
}

int ptsc_testall(int n, ptsc_request_t reqs[], int *flag)
{
    const char *call = "ptsc_testall";
    ptsc_ctx_t *ctx;
    int rc = check_req_array(n, reqs, call, &ctx);
    if (rc != PTSC_OK)
        return rc;
    if (!flag)
        return ptsc__err(PTSC_ERR_ARG, "%s: flag is NULL", call);
    if (ctx)
        ptsc__engine_progress(ctx);
    for (int i = 0; i < n; i++)
        if (reqs[i] && !ptsc__engine_done(reqs[i])) {
            *flag = 0; /* none is completed unless all are */
            return PTSC_OK;
        }
    first_err_t f = {PTSC_OK, ""};
    for (int i = 0; i < n; i++)
        note_err(&f, wait_checked(&reqs[i], NULL), call, i);
    *flag = 1;
    return first_err(&f);
}

int ptsc_testsome(int n, ptsc_request_t reqs[], int *outcount, int indices[], ptsc_info_t infos[])
{
    const char *call = "ptsc_testsome";
    ptsc_ctx_t *ctx;
    int rc = check_req_array(n, reqs, call, &ctx);
    if (rc != PTSC_OK)
        return rc;
    if (!outcount || (n > 0 && !indices))
        return ptsc__err(PTSC_ERR_ARG, "%s: %s is NULL", call, outcount ? "indices" : "outcount");
    if (!ctx) {
        *outcount = PTSC_UNDEFINED;
        return PTSC_OK;
    }
    ptsc__engine_progress(ctx);
    first_err_t f = {PTSC_OK, ""};
    int k = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i] && ptsc__engine_done(reqs[i])) {
            indices[k] = i;
            note_err(&f, complete_one(&reqs[i], infos ? &infos[k] : NULL), call, i);
            k++;
        }
    *outcount = k;
    return first_err(&f);
}

int ptsc_cancel(ptsc_request_t *req)
{
    int rc = check_req(req, "ptsc_cancel");
    if (rc == PTSC_OK && *req)
        ptsc__engine_cancel_mark(*req);
    return rc;
}

int ptsc_request_free(ptsc_request_t *req)
{
    int rc = check_req(req, "ptsc_request_free");
    if (rc != PTSC_OK || !*req)
        return rc;
    int kept = 0;
    rc = ptsc__engine_free(*req, &kept, "ptsc_request_free");
    if (kept)
        return rc; /* a receive in flight: refused, the handle stays valid */
    *req = PTSC_REQUEST_NULL;
    return req_status(rc);
}

static int probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info,
                 const char *call)
{
    int rc = ptsc__ctx_resolve(&ctx, call);
    if (rc == PTSC_OK)
        rc = check_peer(rank, thread, tag, 1, call);
    if (rc != PTSC_OK)
        return rc;
    if (!flag)
        ptsc__wait_begin(ctx, call, PTSC__WAIT_PROBE, rank, thread, tag, 0);
    rc = ptsc__engine_probe(ctx, rank, thread, tag, flag, info);
    ptsc__wait_end(ctx);
    return rc;
}

int ptsc_probe(ptsc_ctx_t *ctx, int rank, int thread, int tag, ptsc_info_t *info)
{
    return probe(ctx, rank, thread, tag, NULL, info, "ptsc_probe");
}

int ptsc_iprobe(ptsc_ctx_t *ctx, int rank, int thread, int tag, int *flag, ptsc_info_t *info)
{
    int rc = ptsc__check_ready("ptsc_iprobe");
    if (rc != PTSC_OK)
        return rc;
    if (!flag)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_iprobe: flag is NULL");
    return probe(ctx, rank, thread, tag, flag, info, "ptsc_iprobe");
}
