/*
 * Every public call of include/ptsc.h with each class of bad argument: NULL
 * pointers, negative counts, bad ranks, threads, tags and roots,
 * MPI_DATATYPE_NULL and uncommitted datatypes, MPI_OP_NULL, scopes outside
 * the enum, request pointers that are NULL (the non-blocking collectives'
 * too), requests of another thread,
 * another thread's context, and calls before ptsc_init and after
 * ptsc_finalize. Each row names the call, the status it must return and a
 * word the detail (ptsc_last_error) must contain: the argument at fault.
 *
 * Calls that take no argument that can be bad are not in the tables:
 * ptsc_version (every output may be NULL), ptsc_version_string,
 * ptsc_status_string and ptsc_status_name (any value has an answer),
 * ptsc_last_error and ptsc_mem_forget.
 */
#include "test_util.h"

#include <limits.h>

#include <pthread.h>

TestSuite(bad_input, .init = ptsc_test_clean_env, .timeout = 60);

typedef struct {
    const char *call;      /* the call as written in the table */
    int (*fn)(void);       /* makes it */
    int status;            /* what it must return */
    const char *in_detail; /* a word ptsc_last_error() must contain */
} row_t;

/* What the rows use. One rank, PTSC_MAX_THREADS=2. */
static ptsc_ctx_t *ctx;       /* the test thread's context, index 0 */
static ptsc_ctx_t *other_ctx; /* the helper thread's context, index 1 */
static ptsc_request_t other_req, null_req = PTSC_REQUEST_NULL;
static ptsc_stream_request_t null_sreq = PTSC_STREAM_REQUEST_NULL, sreq;
static MPI_Datatype uncommitted = MPI_DATATYPE_NULL;
/* 2^30 doubles (8 GiB, a description only): INT_MAX of them exceed the
 * address space; 2 do not. */
static MPI_Datatype huge = MPI_DATATYPE_NULL;
static int buf[64], rbuf[64], flag, idx, outcount, indices[4], one[1] = {1}, zero[1] = {0}, neg[1] = {-1};
static ptsc_request_t reqs[2];
static ptsc_info_t info;
static ptsc_stats_t stats;
static ptsc_scope_t scope_out;
static int tag_max;

static int body_ok(ptsc_ctx_t *c, void *arg)
{
    (void)c;
    (void)arg;
    return PTSC_OK;
}

/* clang-format off */
/* X(id, status, word in the detail, call): calls made between init and
 * finalize by the attached test thread. */
#define ROWS_READY(X) \
    /* Process */ \
    X(initialized_null, PTSC_ERR_ARG, "flag", ptsc_initialized(NULL)) \
    X(rank_null, PTSC_ERR_ARG, "rank", ptsc_rank(NULL)) \
    X(tag_max_null, PTSC_ERR_ARG, "tag_max", ptsc_tag_max(NULL)) \
    X(init_twice, PTSC_ERR_ALREADY_INITIALIZED, "ptsc_init", ptsc_init(NULL, NULL)) \
    /* Threads */ \
    X(attach_neg, PTSC_ERR_THREAD, "index", ptsc_thread_attach(-1, NULL)) \
    X(attach_high, PTSC_ERR_THREAD, "index", ptsc_thread_attach(2, NULL)) \
    X(attach_again, PTSC_ERR_ALREADY_ATTACHED, "attached", ptsc_thread_attach(0, NULL)) \
    /* Context getters: NULL context, NULL output, another thread's context */ \
    X(ctx_index_null_ctx, PTSC_ERR_ARG, "ctx is NULL", ptsc_ctx_index(NULL, &idx)) \
    X(ctx_index_null, PTSC_ERR_ARG, "index is NULL", ptsc_ctx_index(ctx, NULL)) \
    X(ctx_device_null, PTSC_ERR_ARG, "device is NULL", ptsc_ctx_device(ctx, NULL)) \
    X(ctx_stream_null, PTSC_ERR_ARG, "stream is NULL", ptsc_ctx_stream(ctx, NULL)) \
    X(ctx_comm_null, PTSC_ERR_ARG, "comm is NULL", ptsc_ctx_comm(ctx, NULL)) \
    X(ctx_scope_null, PTSC_ERR_ARG, "scope is NULL", ptsc_ctx_scope(ctx, NULL)) \
    X(ctx_stats_null, PTSC_ERR_ARG, "stats is NULL", ptsc_ctx_stats(ctx, NULL)) \
    X(ctx_index_other, PTSC_ERR_WRONG_THREAD, "context", ptsc_ctx_index(other_ctx, &idx)) \
    X(ctx_stats_other, PTSC_ERR_WRONG_THREAD, "context", ptsc_ctx_stats(other_ctx, &stats)) \
    X(set_scope_high, PTSC_ERR_ARG, "scope", ptsc_ctx_set_scope(ctx, (ptsc_scope_t)99, &scope_out)) \
    X(set_scope_default, PTSC_ERR_ARG, "scope", ptsc_ctx_set_scope(ctx, PTSC_SCOPE_DEFAULT, NULL)) \
    X(set_scope_neg, PTSC_ERR_ARG, "scope", ptsc_ctx_set_scope(ctx, (ptsc_scope_t)-7, NULL)) \
    X(set_scope_other, PTSC_ERR_WRONG_THREAD, "context", ptsc_ctx_set_scope(other_ctx, PTSC_SCOPE_NONE, NULL)) \
    /* Synchronisation and memory */ \
    X(sync_high, PTSC_ERR_ARG, "scope", ptsc_sync(ctx, (ptsc_scope_t)5)) \
    X(sync_neg, PTSC_ERR_ARG, "scope", ptsc_sync(ctx, (ptsc_scope_t)-2)) \
    X(sync_other, PTSC_ERR_WRONG_THREAD, "context", ptsc_sync(other_ctx, PTSC_SCOPE_NONE)) \
    X(mem_class_null, PTSC_ERR_ARG, "cls", ptsc_mem_class(buf, NULL)) \
    /* ptsc_send */ \
    X(send_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_send(ctx, NULL, 1, MPI_INT, 0, 1, 0)) \
    X(send_neg_count, PTSC_ERR_COUNT, "count", ptsc_send(ctx, buf, -1, MPI_INT, 0, 1, 0)) \
    X(send_null_type, PTSC_ERR_ARG, "datatype", ptsc_send(ctx, buf, 1, MPI_DATATYPE_NULL, 0, 1, 0)) \
    X(send_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_send(ctx, buf, 1, uncommitted, 0, 1, 0)) \
    X(send_rank_high, PTSC_ERR_RANK, "rank", ptsc_send(ctx, buf, 1, MPI_INT, 1, 1, 0)) \
    X(send_rank_any, PTSC_ERR_RANK, "rank", ptsc_send(ctx, buf, 1, MPI_INT, PTSC_ANY_RANK, 1, 0)) \
    X(send_thread_high, PTSC_ERR_THREAD, "thread", ptsc_send(ctx, buf, 1, MPI_INT, 0, 2, 0)) \
    X(send_thread_neg, PTSC_ERR_THREAD, "thread", ptsc_send(ctx, buf, 1, MPI_INT, 0, -1, 0)) \
    X(send_tag_neg, PTSC_ERR_TAG, "tag", ptsc_send(ctx, buf, 1, MPI_INT, 0, 1, -1)) \
    X(send_tag_high, PTSC_ERR_TAG, "tag", ptsc_send(ctx, buf, 1, MPI_INT, 0, 1, tag_max + 1)) \
    X(send_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_send(other_ctx, buf, 1, MPI_INT, 0, 1, 0)) \
    X(send_huge, PTSC_ERR_COUNT, "elements exceeds", ptsc_send(ctx, buf, INT_MAX, huge, 0, 1, 0)) \
    X(recv_huge, PTSC_ERR_COUNT, "elements exceeds", ptsc_recv(ctx, buf, INT_MAX, huge, 0, 1, 0)) \
    /* ptsc_recv, ptsc_recv_info */ \
    X(recv_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_recv(ctx, NULL, 1, MPI_INT, 0, 1, 0)) \
    X(recv_neg_count, PTSC_ERR_COUNT, "count", ptsc_recv(ctx, buf, -5, MPI_INT, 0, 1, 0)) \
    X(recv_null_type, PTSC_ERR_ARG, "datatype", ptsc_recv(ctx, buf, 1, MPI_DATATYPE_NULL, 0, 1, 0)) \
    X(recv_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_recv(ctx, buf, 1, uncommitted, 0, 1, 0)) \
    X(recv_rank_high, PTSC_ERR_RANK, "rank", ptsc_recv(ctx, buf, 1, MPI_INT, 3, 1, 0)) \
    X(recv_rank_neg, PTSC_ERR_RANK, "rank", ptsc_recv(ctx, buf, 1, MPI_INT, -2, 1, 0)) \
    X(recv_thread_high, PTSC_ERR_THREAD, "thread", ptsc_recv(ctx, buf, 1, MPI_INT, 0, 9, 0)) \
    X(recv_tag_high, PTSC_ERR_TAG, "tag", ptsc_recv(ctx, buf, 1, MPI_INT, 0, 1, tag_max + 1)) \
    X(recv_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_recv(other_ctx, buf, 1, MPI_INT, 0, 1, 0)) \
    X(recv_info_neg_count, PTSC_ERR_COUNT, "count", ptsc_recv_info(ctx, buf, -1, MPI_INT, 0, 1, 0, &info)) \
    X(recv_info_tag_neg, PTSC_ERR_TAG, "tag", ptsc_recv_info(ctx, buf, 1, MPI_INT, 0, 1, -3, &info)) \
    /* ptsc_probe, ptsc_iprobe */ \
    X(probe_rank_high, PTSC_ERR_RANK, "rank", ptsc_probe(ctx, 1, 1, 0, &info)) \
    X(probe_thread_neg, PTSC_ERR_THREAD, "thread", ptsc_probe(ctx, 0, -1, 0, &info)) \
    X(probe_tag_neg, PTSC_ERR_TAG, "tag", ptsc_probe(ctx, 0, 1, -1, &info)) \
    X(probe_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_probe(other_ctx, 0, 1, 0, &info)) \
    X(iprobe_null_flag, PTSC_ERR_ARG, "flag", ptsc_iprobe(ctx, 0, 1, 0, NULL, &info)) \
    X(iprobe_rank_high, PTSC_ERR_RANK, "rank", ptsc_iprobe(ctx, 1, 1, 0, &flag, &info)) \
    X(iprobe_tag_high, PTSC_ERR_TAG, "tag", ptsc_iprobe(ctx, 0, 1, tag_max + 1, &flag, &info)) \
    /* ptsc_isend, ptsc_irecv */ \
    X(isend_null_req, PTSC_ERR_ARG, "request", ptsc_isend(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL)) \
    X(isend_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_isend(ctx, NULL, 2, MPI_INT, 0, 1, 0, &reqs[0])) \
    X(isend_neg_count, PTSC_ERR_COUNT, "count", ptsc_isend(ctx, buf, -1, MPI_INT, 0, 1, 0, &reqs[0])) \
    X(isend_null_type, PTSC_ERR_ARG, "datatype", ptsc_isend(ctx, buf, 1, MPI_DATATYPE_NULL, 0, 1, 0, &reqs[0])) \
    X(isend_rank_any, PTSC_ERR_RANK, "rank", ptsc_isend(ctx, buf, 1, MPI_INT, PTSC_ANY_RANK, 1, 0, &reqs[0])) \
    X(isend_thread_high, PTSC_ERR_THREAD, "thread", ptsc_isend(ctx, buf, 1, MPI_INT, 0, 2, 0, &reqs[0])) \
    X(isend_tag_neg, PTSC_ERR_TAG, "tag", ptsc_isend(ctx, buf, 1, MPI_INT, 0, 1, -1, &reqs[0])) \
    X(irecv_null_req, PTSC_ERR_ARG, "request", ptsc_irecv(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL)) \
    X(irecv_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_irecv(ctx, NULL, 1, MPI_INT, 0, 1, 0, &reqs[0])) \
    X(irecv_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_irecv(ctx, buf, 1, uncommitted, 0, 1, 0, &reqs[0])) \
    X(irecv_rank_high, PTSC_ERR_RANK, "rank", ptsc_irecv(ctx, buf, 1, MPI_INT, 1, 1, 0, &reqs[0])) \
    X(irecv_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_irecv(other_ctx, buf, 1, MPI_INT, 0, 1, 0, &reqs[0])) \
    /* ptsc_sendrecv: each side names itself */ \
    X(sendrecv_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", \
      ptsc_sendrecv(ctx, NULL, 1, MPI_INT, 0, 1, 0, rbuf, 1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", \
      ptsc_sendrecv(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL, 1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_neg_scount, PTSC_ERR_COUNT, "send count", \
      ptsc_sendrecv(ctx, buf, -1, MPI_INT, 0, 1, 0, rbuf, 1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_neg_rcount, PTSC_ERR_COUNT, "receive count", \
      ptsc_sendrecv(ctx, buf, 1, MPI_INT, 0, 1, 0, rbuf, -1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_null_stype, PTSC_ERR_ARG, "send datatype", \
      ptsc_sendrecv(ctx, buf, 1, MPI_DATATYPE_NULL, 0, 1, 0, rbuf, 1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_null_rtype, PTSC_ERR_ARG, "receive datatype", \
      ptsc_sendrecv(ctx, buf, 1, MPI_INT, 0, 1, 0, rbuf, 1, MPI_DATATYPE_NULL, 0, 1, 0)) \
    X(sendrecv_dest_rank, PTSC_ERR_RANK, "rank 1", \
      ptsc_sendrecv(ctx, buf, 1, MPI_INT, 1, 1, 0, rbuf, 1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_src_thread, PTSC_ERR_THREAD, "thread 5", \
      ptsc_sendrecv(ctx, buf, 1, MPI_INT, 0, 1, 0, rbuf, 1, MPI_INT, 0, 5, 0)) \
    X(sendrecv_stag, PTSC_ERR_TAG, "tag -4", \
      ptsc_sendrecv(ctx, buf, 1, MPI_INT, 0, 1, -4, rbuf, 1, MPI_INT, 0, 1, 0)) \
    X(sendrecv_other_ctx, PTSC_ERR_WRONG_THREAD, "context", \
      ptsc_sendrecv(other_ctx, buf, 1, MPI_INT, 0, 1, 0, rbuf, 1, MPI_INT, 0, 1, 0)) \
    /* Requests: NULL request pointers, another thread's request, bad arrays */ \
    X(wait_null, PTSC_ERR_ARG, "request", ptsc_wait(NULL)) \
    X(wait_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_wait(&other_req)) \
    X(wait_info_null, PTSC_ERR_ARG, "request", ptsc_wait_info(NULL, &info)) \
    X(test_null, PTSC_ERR_ARG, "request", ptsc_test(NULL, &flag)) \
    X(test_null_done, PTSC_ERR_ARG, "done", ptsc_test(&null_req, NULL)) \
    X(test_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_test(&other_req, &flag)) \
    X(test_info_null_done, PTSC_ERR_ARG, "done", ptsc_test_info(&null_req, NULL, &info)) \
    X(waitall_neg, PTSC_ERR_ARG, "count", ptsc_waitall(-1, reqs)) \
    X(waitall_null, PTSC_ERR_ARG, "request array", ptsc_waitall(2, NULL)) \
    X(waitall_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_waitall(1, &other_req)) \
    X(waitany_neg, PTSC_ERR_ARG, "count", ptsc_waitany(-1, reqs, &idx, &info)) \
    X(waitany_null, PTSC_ERR_ARG, "request array", ptsc_waitany(1, NULL, &idx, &info)) \
    X(waitany_null_index, PTSC_ERR_ARG, "index", ptsc_waitany(2, reqs, NULL, &info)) \
    X(waitany_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_waitany(1, &other_req, &idx, &info)) \
    X(testall_neg, PTSC_ERR_ARG, "count", ptsc_testall(-3, reqs, &flag)) \
    X(testall_null, PTSC_ERR_ARG, "request array", ptsc_testall(1, NULL, &flag)) \
    X(testall_null_flag, PTSC_ERR_ARG, "flag", ptsc_testall(2, reqs, NULL)) \
    X(testsome_neg, PTSC_ERR_ARG, "count", ptsc_testsome(-1, reqs, &outcount, indices, NULL)) \
    X(testsome_null, PTSC_ERR_ARG, "request array", ptsc_testsome(1, NULL, &outcount, indices, NULL)) \
    X(testsome_null_outcount, PTSC_ERR_ARG, "outcount", ptsc_testsome(2, reqs, NULL, indices, NULL)) \
    X(testsome_null_indices, PTSC_ERR_ARG, "indices", ptsc_testsome(2, reqs, &outcount, NULL, NULL)) \
    X(testsome_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_testsome(1, &other_req, &outcount, indices, NULL)) \
    X(cancel_null, PTSC_ERR_ARG, "request", ptsc_cancel(NULL)) \
    X(cancel_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_cancel(&other_req)) \
    X(request_free_null, PTSC_ERR_ARG, "request", ptsc_request_free(NULL)) \
    X(request_free_other, PTSC_ERR_WRONG_THREAD, "request", ptsc_request_free(&other_req)) \
    /* Collectives */ \
    X(barrier_other, PTSC_ERR_WRONG_THREAD, "context", ptsc_barrier(other_ctx)) \
    X(bcast_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_bcast(ctx, NULL, 1, MPI_INT, 0)) \
    X(bcast_neg_count, PTSC_ERR_COUNT, "count", ptsc_bcast(ctx, buf, -1, MPI_INT, 0)) \
    X(bcast_null_type, PTSC_ERR_ARG, "datatype", ptsc_bcast(ctx, buf, 1, MPI_DATATYPE_NULL, 0)) \
    X(bcast_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_bcast(ctx, buf, 1, uncommitted, 0)) \
    X(bcast_root_high, PTSC_ERR_RANK, "root", ptsc_bcast(ctx, buf, 1, MPI_INT, 1)) \
    X(bcast_root_neg, PTSC_ERR_RANK, "root", ptsc_bcast(ctx, buf, 1, MPI_INT, -1)) \
    X(bcast_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_bcast(other_ctx, buf, 1, MPI_INT, 0)) \
    X(reduce_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_reduce(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM, 0)) \
    X(reduce_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_reduce(ctx, buf, NULL, 1, MPI_INT, MPI_SUM, 0)) \
    X(reduce_neg_count, PTSC_ERR_COUNT, "count", ptsc_reduce(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM, 0)) \
    X(reduce_null_type, PTSC_ERR_ARG, "datatype", ptsc_reduce(ctx, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, 0)) \
    X(reduce_null_op, PTSC_ERR_ARG, "op", ptsc_reduce(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL, 0)) \
    X(reduce_root_high, PTSC_ERR_RANK, "root", ptsc_reduce(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, 1)) \
    X(allreduce_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_allreduce(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(allreduce_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_allreduce(ctx, buf, NULL, 1, MPI_INT, MPI_SUM)) \
    X(allreduce_neg_count, PTSC_ERR_COUNT, "count", ptsc_allreduce(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM)) \
    X(allreduce_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_allreduce(ctx, buf, rbuf, 1, uncommitted, MPI_SUM)) \
    X(allreduce_null_op, PTSC_ERR_ARG, "op", ptsc_allreduce(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL)) \
    X(allreduce_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_allreduce(other_ctx, buf, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(scan_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_scan(ctx, buf, NULL, 1, MPI_INT, MPI_SUM)) \
    X(scan_neg_count, PTSC_ERR_COUNT, "count", ptsc_scan(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM)) \
    X(scan_null_op, PTSC_ERR_ARG, "op", ptsc_scan(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL)) \
    X(exscan_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_exscan(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(exscan_null_type, PTSC_ERR_ARG, "datatype", ptsc_exscan(ctx, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM)) \
    X(rsb_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_reduce_scatter_block(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(rsb_neg_count, PTSC_ERR_COUNT, "count", ptsc_reduce_scatter_block(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM)) \
    X(rsb_null_op, PTSC_ERR_ARG, "op", ptsc_reduce_scatter_block(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL)) \
    X(allgather_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_allgather(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT)) \
    X(allgather_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_allgather(ctx, buf, 1, MPI_INT, NULL, 1, MPI_INT)) \
    X(allgather_neg_scount, PTSC_ERR_COUNT, "send count", ptsc_allgather(ctx, buf, -1, MPI_INT, rbuf, 1, MPI_INT)) \
    X(allgather_neg_rcount, PTSC_ERR_COUNT, "receive count", ptsc_allgather(ctx, buf, 1, MPI_INT, rbuf, -1, MPI_INT)) \
    X(allgather_null_stype, PTSC_ERR_ARG, "send datatype", ptsc_allgather(ctx, buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_INT)) \
    X(allgather_null_rtype, PTSC_ERR_ARG, "receive datatype", ptsc_allgather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_DATATYPE_NULL)) \
    X(alltoall_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_alltoall(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT)) \
    X(alltoall_neg_rcount, PTSC_ERR_COUNT, "receive count", ptsc_alltoall(ctx, buf, 1, MPI_INT, rbuf, -2, MPI_INT)) \
    X(alltoall_uncommitted, PTSC_ERR_ARG, "send datatype", ptsc_alltoall(ctx, buf, 1, uncommitted, rbuf, 1, MPI_INT)) \
    X(gather_root_high, PTSC_ERR_RANK, "root", ptsc_gather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 1)) \
    X(gather_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_gather(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(gather_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_gather(ctx, buf, 1, MPI_INT, NULL, 1, MPI_INT, 0)) \
    X(gather_neg_rcount, PTSC_ERR_COUNT, "receive count", ptsc_gather(ctx, buf, 1, MPI_INT, rbuf, -1, MPI_INT, 0)) \
    X(scatter_root_neg, PTSC_ERR_RANK, "root", ptsc_scatter(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, -1)) \
    X(scatter_null_stype, PTSC_ERR_ARG, "send datatype", ptsc_scatter(ctx, buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_INT, 0)) \
    X(scatter_neg_scount, PTSC_ERR_COUNT, "send count", ptsc_scatter(ctx, buf, -1, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(gatherv_null_counts, PTSC_ERR_ARG, "count array", ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, NULL, zero, MPI_INT, 0)) \
    X(gatherv_null_displs, PTSC_ERR_ARG, "displacement array", ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, one, NULL, MPI_INT, 0)) \
    X(gatherv_neg_count, PTSC_ERR_COUNT, "rank 0", ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, neg, zero, MPI_INT, 0)) \
    X(gatherv_neg_displ, PTSC_ERR_ARG, "displacement", ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, one, neg, MPI_INT, 0)) \
    X(gatherv_root_high, PTSC_ERR_RANK, "root", ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT, 2)) \
    X(scatterv_null_counts, PTSC_ERR_ARG, "count array", ptsc_scatterv(ctx, buf, NULL, zero, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(scatterv_neg_displ, PTSC_ERR_ARG, "displacement", ptsc_scatterv(ctx, buf, one, neg, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(scatterv_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_scatterv(ctx, buf, one, zero, MPI_INT, NULL, 1, MPI_INT, 0)) \
    X(allgatherv_null_displs, PTSC_ERR_ARG, "displacement array", ptsc_allgatherv(ctx, buf, 1, MPI_INT, rbuf, one, NULL, MPI_INT)) \
    X(allgatherv_neg_count, PTSC_ERR_COUNT, "receive count", ptsc_allgatherv(ctx, buf, 1, MPI_INT, rbuf, neg, zero, MPI_INT)) \
    X(allgatherv_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_allgatherv(ctx, NULL, 1, MPI_INT, rbuf, one, zero, MPI_INT)) \
    X(alltoallv_null_scounts, PTSC_ERR_ARG, "send count array", ptsc_alltoallv(ctx, buf, NULL, zero, MPI_INT, rbuf, one, zero, MPI_INT)) \
    X(alltoallv_null_rdispls, PTSC_ERR_ARG, "receive displacement array", ptsc_alltoallv(ctx, buf, one, zero, MPI_INT, rbuf, one, NULL, MPI_INT)) \
    X(alltoallv_neg_scount, PTSC_ERR_COUNT, "send count", ptsc_alltoallv(ctx, buf, neg, zero, MPI_INT, rbuf, one, zero, MPI_INT)) \
    X(alltoallv_null_rtype, PTSC_ERR_ARG, "receive datatype", ptsc_alltoallv(ctx, buf, one, zero, MPI_INT, rbuf, one, zero, MPI_DATATYPE_NULL)) \
    X(alltoallv_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_alltoallv(other_ctx, buf, one, zero, MPI_INT, rbuf, one, zero, MPI_INT)) \
    /* Non-blocking collectives: the request pointer, and the blocking form's checks */ \
    X(ibarrier_null_req, PTSC_ERR_ARG, "request", ptsc_ibarrier(ctx, NULL)) \
    X(ibarrier_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_ibarrier(other_ctx, &reqs[0])) \
    X(ibcast_null_req, PTSC_ERR_ARG, "request", ptsc_ibcast(ctx, buf, 1, MPI_INT, 0, NULL)) \
    X(ibcast_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_ibcast(ctx, NULL, 1, MPI_INT, 0, &reqs[0])) \
    X(ibcast_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_ibcast(ctx, buf, 1, uncommitted, 0, &reqs[0])) \
    X(ibcast_root_high, PTSC_ERR_RANK, "root", ptsc_ibcast(ctx, buf, 1, MPI_INT, 1, &reqs[0])) \
    X(ireduce_null_req, PTSC_ERR_ARG, "request", ptsc_ireduce(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, 0, NULL)) \
    X(ireduce_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_ireduce(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM, 0, &reqs[0])) \
    X(ireduce_null_op, PTSC_ERR_ARG, "op", ptsc_ireduce(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL, 0, &reqs[0])) \
    X(ireduce_root_neg, PTSC_ERR_RANK, "root", ptsc_ireduce(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, -1, &reqs[0])) \
    X(iallreduce_null_req, PTSC_ERR_ARG, "request", ptsc_iallreduce(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, NULL)) \
    X(iallreduce_neg_count, PTSC_ERR_COUNT, "count", ptsc_iallreduce(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(iallreduce_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_iallreduce(ctx, buf, NULL, 1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(iallreduce_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_iallreduce(other_ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(iscan_null_req, PTSC_ERR_ARG, "request", ptsc_iscan(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, NULL)) \
    X(iscan_null_type, PTSC_ERR_ARG, "datatype", ptsc_iscan(ctx, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, &reqs[0])) \
    X(iexscan_null_req, PTSC_ERR_ARG, "request", ptsc_iexscan(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, NULL)) \
    X(iexscan_null_op, PTSC_ERR_ARG, "op", ptsc_iexscan(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL, &reqs[0])) \
    X(irsb_null_req, PTSC_ERR_ARG, "request", ptsc_ireduce_scatter_block(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, NULL)) \
    X(irsb_neg_count, PTSC_ERR_COUNT, "count", ptsc_ireduce_scatter_block(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(iallgather_null_req, PTSC_ERR_ARG, "request", ptsc_iallgather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, NULL)) \
    X(iallgather_null_rtype, PTSC_ERR_ARG, "receive datatype", ptsc_iallgather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_DATATYPE_NULL, &reqs[0])) \
    X(iallgather_neg_scount, PTSC_ERR_COUNT, "send count", ptsc_iallgather(ctx, buf, -1, MPI_INT, rbuf, 1, MPI_INT, &reqs[0])) \
    X(ialltoall_null_req, PTSC_ERR_ARG, "request", ptsc_ialltoall(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, NULL)) \
    X(ialltoall_null_sbuf, PTSC_ERR_NULL_BUFFER, "send buffer", ptsc_ialltoall(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT, &reqs[0])) \
    X(igather_null_req, PTSC_ERR_ARG, "request", ptsc_igather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 0, NULL)) \
    X(igather_root_high, PTSC_ERR_RANK, "root", ptsc_igather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 1, &reqs[0])) \
    X(igather_neg_rcount, PTSC_ERR_COUNT, "receive count", ptsc_igather(ctx, buf, 1, MPI_INT, rbuf, -1, MPI_INT, 0, &reqs[0])) \
    X(iscatter_null_req, PTSC_ERR_ARG, "request", ptsc_iscatter(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 0, NULL)) \
    X(iscatter_null_stype, PTSC_ERR_ARG, "send datatype", ptsc_iscatter(ctx, buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_INT, 0, &reqs[0])) \
    X(iscatter_null_rbuf, PTSC_ERR_NULL_BUFFER, "receive buffer", ptsc_iscatter(ctx, buf, 1, MPI_INT, NULL, 1, MPI_INT, 0, &reqs[0])) \
    X(igatherv_null_req, PTSC_ERR_ARG, "request", ptsc_igatherv(ctx, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT, 0, NULL)) \
    X(igatherv_null_counts, PTSC_ERR_ARG, "count array", ptsc_igatherv(ctx, buf, 1, MPI_INT, rbuf, NULL, zero, MPI_INT, 0, &reqs[0])) \
    X(igatherv_neg_count, PTSC_ERR_COUNT, "rank 0", ptsc_igatherv(ctx, buf, 1, MPI_INT, rbuf, neg, zero, MPI_INT, 0, &reqs[0])) \
    X(iscatterv_null_req, PTSC_ERR_ARG, "request", ptsc_iscatterv(ctx, buf, one, zero, MPI_INT, rbuf, 1, MPI_INT, 0, NULL)) \
    X(iscatterv_neg_displ, PTSC_ERR_ARG, "displacement", ptsc_iscatterv(ctx, buf, one, neg, MPI_INT, rbuf, 1, MPI_INT, 0, &reqs[0])) \
    X(iscatterv_root_high, PTSC_ERR_RANK, "root", ptsc_iscatterv(ctx, buf, one, zero, MPI_INT, rbuf, 1, MPI_INT, 3, &reqs[0])) \
    X(iallgatherv_null_req, PTSC_ERR_ARG, "request", ptsc_iallgatherv(ctx, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT, NULL)) \
    X(iallgatherv_null_displs, PTSC_ERR_ARG, "displacement array", ptsc_iallgatherv(ctx, buf, 1, MPI_INT, rbuf, one, NULL, MPI_INT, &reqs[0])) \
    X(ialltoallv_null_req, PTSC_ERR_ARG, "request", ptsc_ialltoallv(ctx, buf, one, zero, MPI_INT, rbuf, one, zero, MPI_INT, NULL)) \
    X(ialltoallv_null_scounts, PTSC_ERR_ARG, "send count array", ptsc_ialltoallv(ctx, buf, NULL, zero, MPI_INT, rbuf, one, zero, MPI_INT, &reqs[0])) \
    X(ialltoallv_null_rtype, PTSC_ERR_ARG, "receive datatype", ptsc_ialltoallv(ctx, buf, one, zero, MPI_INT, rbuf, one, zero, MPI_DATATYPE_NULL, &reqs[0])) \
    /* Stream-ordered calls */ \
    X(send_enqueue_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_send_enqueue(ctx, NULL, 1, MPI_INT, 0, 1, 0, NULL)) \
    X(send_enqueue_neg_count, PTSC_ERR_COUNT, "count", ptsc_send_enqueue(ctx, buf, -1, MPI_INT, 0, 1, 0, NULL)) \
    X(send_enqueue_uncommitted, PTSC_ERR_ARG, "datatype", ptsc_send_enqueue(ctx, buf, 1, uncommitted, 0, 1, 0, NULL)) \
    X(send_enqueue_rank_high, PTSC_ERR_RANK, "rank", ptsc_send_enqueue(ctx, buf, 1, MPI_INT, 1, 1, 0, NULL)) \
    X(send_enqueue_thread_high, PTSC_ERR_THREAD, "thread", ptsc_send_enqueue(ctx, buf, 1, MPI_INT, 0, 9, 0, NULL)) \
    X(send_enqueue_tag_neg, PTSC_ERR_TAG, "tag", ptsc_send_enqueue(ctx, buf, 1, MPI_INT, 0, 1, -1, NULL)) \
    X(send_enqueue_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_send_enqueue(other_ctx, buf, 1, MPI_INT, 0, 1, 0, NULL)) \
    X(send_enqueue_stream_no_device, PTSC_ERR_ARG, "stream", ptsc_send_enqueue(ctx, buf, 1, MPI_INT, 0, 1, 0, buf)) \
    X(recv_enqueue_any_rank, PTSC_ERR_RANK, "PTSC_ANY_RANK", ptsc_recv_enqueue(ctx, buf, 1, MPI_INT, PTSC_ANY_RANK, 1, 0, NULL)) \
    X(recv_enqueue_null_buf, PTSC_ERR_NULL_BUFFER, "buffer", ptsc_recv_enqueue(ctx, NULL, 1, MPI_INT, 0, 1, 0, NULL)) \
    X(isend_enqueue_null_req, PTSC_ERR_ARG, "request", ptsc_isend_enqueue(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL, NULL)) \
    X(irecv_enqueue_null_req, PTSC_ERR_ARG, "request", ptsc_irecv_enqueue(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL, NULL)) \
    X(irecv_enqueue_rank_neg, PTSC_ERR_RANK, "rank", ptsc_irecv_enqueue(ctx, buf, 1, MPI_INT, -2, 1, 0, NULL, &sreq)) \
    X(wait_enqueue_null, PTSC_ERR_ARG, "request", ptsc_wait_enqueue(NULL, NULL)) \
    X(enqueue_sync_other_ctx, PTSC_ERR_WRONG_THREAD, "context", ptsc_enqueue_sync(other_ctx, NULL)) \
    X(enqueue_tag_max_null, PTSC_ERR_ARG, "tag_max", ptsc_enqueue_tag_max(NULL)) \
    /* OpenMP helpers */ \
    X(omp_run_null_fn, PTSC_ERR_ARG, "fn", ptsc_omp_run(2, NULL, NULL)) \
    X(omp_run_too_many, PTSC_ERR_THREAD, "threads", ptsc_omp_run(3, body_ok, NULL))

/* Calls before ptsc_init (PTSC_ERR_NOT_INITIALIZED) and after
 * ptsc_finalize (PTSC_ERR_FINALIZED): the detail names the call. */
#define ROWS_NOT_READY(X) \
    X(nr_finalize, "ptsc_finalize", ptsc_finalize()) \
    X(nr_rank, "ptsc_rank", ptsc_rank(&idx)) \
    X(nr_size, "ptsc_size", ptsc_size(&idx, &idx)) \
    X(nr_tag_max, "ptsc_tag_max", ptsc_tag_max(&idx)) \
    X(nr_features, "ptsc_features", ptsc_features(NULL, NULL, NULL)) \
    X(nr_attach, "ptsc_thread_attach", ptsc_thread_attach(0, NULL)) \
    X(nr_omp_attach, "ptsc_omp_attach", ptsc_omp_attach(NULL)) \
    X(nr_self, "ptsc_self", ptsc_self(NULL)) \
    X(nr_detach, "ptsc_thread_detach", ptsc_thread_detach()) \
    X(nr_ctx_index, "ptsc_ctx_index", ptsc_ctx_index(NULL, &idx)) \
    X(nr_ctx_set_scope, "ptsc_ctx_set_scope", ptsc_ctx_set_scope(NULL, PTSC_SCOPE_NONE, NULL)) \
    X(nr_sync, "ptsc_sync", ptsc_sync(NULL, PTSC_SCOPE_DEFAULT)) \
    X(nr_send, "ptsc_send", ptsc_send(NULL, buf, 1, MPI_INT, 0, 0, 0)) \
    X(nr_recv, "ptsc_recv", ptsc_recv(NULL, buf, 1, MPI_INT, 0, 0, 0)) \
    X(nr_recv_info, "ptsc_recv", ptsc_recv_info(NULL, buf, 1, MPI_INT, 0, 0, 0, &info)) \
    X(nr_probe, "ptsc_probe", ptsc_probe(NULL, 0, 0, 0, &info)) \
    X(nr_iprobe, "ptsc_iprobe", ptsc_iprobe(NULL, 0, 0, 0, &flag, &info)) \
    X(nr_isend, "ptsc_isend", ptsc_isend(NULL, buf, 1, MPI_INT, 0, 0, 0, &reqs[0])) \
    X(nr_irecv, "ptsc_irecv", ptsc_irecv(NULL, buf, 1, MPI_INT, 0, 0, 0, &reqs[0])) \
    X(nr_sendrecv, "ptsc_sendrecv", ptsc_sendrecv(NULL, buf, 1, MPI_INT, 0, 0, 0, rbuf, 1, MPI_INT, 0, 0, 0)) \
    X(nr_wait, "ptsc_wait", ptsc_wait(&null_req)) \
    X(nr_waitall, "ptsc_waitall", ptsc_waitall(0, reqs)) \
    X(nr_test, "ptsc_test", ptsc_test(&null_req, &flag)) \
    X(nr_waitany, "ptsc_waitany", ptsc_waitany(0, reqs, &idx, NULL)) \
    X(nr_testall, "ptsc_testall", ptsc_testall(0, reqs, &flag)) \
    X(nr_testsome, "ptsc_testsome", ptsc_testsome(0, reqs, &outcount, indices, NULL)) \
    X(nr_cancel, "ptsc_cancel", ptsc_cancel(&null_req)) \
    X(nr_request_free, "ptsc_request_free", ptsc_request_free(&null_req)) \
    X(nr_barrier, "ptsc_barrier", ptsc_barrier(NULL)) \
    X(nr_bcast, "ptsc_bcast", ptsc_bcast(NULL, buf, 1, MPI_INT, 0)) \
    X(nr_reduce, "ptsc_reduce", ptsc_reduce(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM, 0)) \
    X(nr_allreduce, "ptsc_allreduce", ptsc_allreduce(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(nr_allgather, "ptsc_allgather", ptsc_allgather(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT)) \
    X(nr_alltoall, "ptsc_alltoall", ptsc_alltoall(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT)) \
    X(nr_gather, "ptsc_gather", ptsc_gather(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(nr_scatter, "ptsc_scatter", ptsc_scatter(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(nr_gatherv, "ptsc_gatherv", ptsc_gatherv(NULL, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT, 0)) \
    X(nr_scatterv, "ptsc_scatterv", ptsc_scatterv(NULL, buf, one, zero, MPI_INT, rbuf, 1, MPI_INT, 0)) \
    X(nr_allgatherv, "ptsc_allgatherv", ptsc_allgatherv(NULL, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT)) \
    X(nr_alltoallv, "ptsc_alltoallv", ptsc_alltoallv(NULL, buf, one, zero, MPI_INT, rbuf, one, zero, MPI_INT)) \
    X(nr_rsb, "ptsc_reduce_scatter_block", ptsc_reduce_scatter_block(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(nr_scan, "ptsc_scan", ptsc_scan(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(nr_exscan, "ptsc_exscan", ptsc_exscan(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM)) \
    X(nr_ibarrier, "ptsc_ibarrier", ptsc_ibarrier(NULL, &reqs[0])) \
    X(nr_ibcast, "ptsc_ibcast", ptsc_ibcast(NULL, buf, 1, MPI_INT, 0, &reqs[0])) \
    X(nr_ireduce, "ptsc_ireduce", ptsc_ireduce(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM, 0, &reqs[0])) \
    X(nr_iallreduce, "ptsc_iallreduce", ptsc_iallreduce(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(nr_iscan, "ptsc_iscan", ptsc_iscan(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(nr_iexscan, "ptsc_iexscan", ptsc_iexscan(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(nr_irsb, "ptsc_ireduce_scatter_block", ptsc_ireduce_scatter_block(NULL, buf, rbuf, 1, MPI_INT, MPI_SUM, &reqs[0])) \
    X(nr_iallgather, "ptsc_iallgather", ptsc_iallgather(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT, &reqs[0])) \
    X(nr_ialltoall, "ptsc_ialltoall", ptsc_ialltoall(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT, &reqs[0])) \
    X(nr_igather, "ptsc_igather", ptsc_igather(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 0, &reqs[0])) \
    X(nr_iscatter, "ptsc_iscatter", ptsc_iscatter(NULL, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 0, &reqs[0])) \
    X(nr_igatherv, "ptsc_igatherv", ptsc_igatherv(NULL, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT, 0, &reqs[0])) \
    X(nr_iscatterv, "ptsc_iscatterv", ptsc_iscatterv(NULL, buf, one, zero, MPI_INT, rbuf, 1, MPI_INT, 0, &reqs[0])) \
    X(nr_iallgatherv, "ptsc_iallgatherv", ptsc_iallgatherv(NULL, buf, 1, MPI_INT, rbuf, one, zero, MPI_INT, &reqs[0])) \
    X(nr_ialltoallv, "ptsc_ialltoallv", ptsc_ialltoallv(NULL, buf, one, zero, MPI_INT, rbuf, one, zero, MPI_INT, &reqs[0])) \
    X(nr_send_enqueue, "ptsc_send_enqueue", ptsc_send_enqueue(NULL, buf, 1, MPI_INT, 0, 0, 0, NULL)) \
    X(nr_recv_enqueue, "ptsc_recv_enqueue", ptsc_recv_enqueue(NULL, buf, 1, MPI_INT, 0, 0, 0, NULL)) \
    X(nr_isend_enqueue, "ptsc_isend_enqueue", ptsc_isend_enqueue(NULL, buf, 1, MPI_INT, 0, 0, 0, NULL, &sreq)) \
    X(nr_irecv_enqueue, "ptsc_irecv_enqueue", ptsc_irecv_enqueue(NULL, buf, 1, MPI_INT, 0, 0, 0, NULL, NULL)) \
    X(nr_wait_enqueue, "ptsc_wait_enqueue", ptsc_wait_enqueue(&null_sreq, NULL)) \
    X(nr_enqueue_sync, "ptsc_enqueue_sync", ptsc_enqueue_sync(NULL, NULL)) \
    X(nr_enqueue_tag_max, "ptsc_enqueue_tag_max", ptsc_enqueue_tag_max(&idx)) \
    X(nr_omp_run, "ptsc_omp_run", ptsc_omp_run(1, body_ok, NULL))
/* clang-format on */

#define DEFINE_FN(id, status, word, call) \
    static int id(void) { return call; }
ROWS_READY(DEFINE_FN)
#define DEFINE_ROW(id, status, word, call) {#call, id, status, word},
static const row_t rows_ready[] = {ROWS_READY(DEFINE_ROW)};

#define DEFINE_NR_FN(id, word, call) \
    static int id(void) { return call; }
ROWS_NOT_READY(DEFINE_NR_FN)
#define DEFINE_NR_ROW(id, word, call) {#call, id, 0, word},
static const row_t rows_not_ready[] = {ROWS_NOT_READY(DEFINE_NR_ROW)};

/* Run one row: the detail must be fresh (not left from an earlier error),
 * carry the row's word, and the status must be the row's. Returns 1 when
 * the row passed. */
static int run_row(const row_t *r, int status)
{
    char sentinel[512];
    ptsc_last_error(); /* mark read, so that the sentinel query may set its own detail */
    if (r->fn == initialized_null)
        ptsc_mem_class(NULL, NULL);
    else
        ptsc_initialized(NULL);
    snprintf(sentinel, sizeof sentinel, "%s", ptsc_last_error());
    int rc = r->fn();
    const char *d = ptsc_last_error();
    int ok = 1;
    if (rc != status) {
        cr_log_error("%s returned %s, expected %s; detail: \"%s\"", r->call, ptsc_status_name(rc),
                     ptsc_status_name(status), d);
        ok = 0;
    } else if (strcmp(d, sentinel) == 0 || d[0] == '\0') {
        cr_log_error("%s returned %s without a detail of its own (\"%s\")", r->call, ptsc_status_name(rc), d);
        ok = 0;
    } else if (!strstr(d, r->in_detail)) {
        cr_log_error("%s returned %s; its detail \"%s\" does not contain \"%s\"", r->call,
                     ptsc_status_name(rc), d, r->in_detail);
        ok = 0;
    }
    return ok;
}

static int run_rows(const row_t *rows, size_t n, int status_override, int use_override)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += !run_row(&rows[i], use_override ? status_override : rows[i].status);
    return failed;
}

/* The helper thread: attached as index 1, it posts a receive that nothing
 * matches (its request is "another thread's"), then waits to be told to
 * cancel it and detach. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase; /* 1: helper ready; 2: helper may finish */
static int helper_rc;

static void *helper(void *arg)
{
    (void)arg;
    static int hbuf[4];
    int rc = ptsc_thread_attach(1, &other_ctx);
    if (rc == PTSC_OK)
        rc = ptsc_irecv(other_ctx, hbuf, 4, MPI_INT, 0, 0, 99, &other_req);
    pthread_mutex_lock(&mu);
    helper_rc = rc;
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (phase != 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    if (rc == PTSC_OK) {
        ptsc_cancel(&other_req);
        rc = ptsc_wait(&other_req);
        helper_rc = rc == PTSC_ERR_CANCELLED ? PTSC_OK : rc;
        ptsc_thread_detach();
    }
    return NULL;
}

Test(bad_input, every_call_while_ready)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    PTSC_ASSERT_OK(ptsc_tag_max(&tag_max));
    cr_assert_eq(MPI_Type_contiguous(2, MPI_INT, &uncommitted), MPI_SUCCESS);
    cr_assert_eq(MPI_Type_contiguous(1 << 30, MPI_DOUBLE, &huge), MPI_SUCCESS);
    cr_assert_eq(MPI_Type_commit(&huge), MPI_SUCCESS);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, helper, NULL), 0);
    pthread_mutex_lock(&mu);
    while (phase != 1)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    cr_assert_eq(helper_rc, PTSC_OK, "helper thread: %s", ptsc_status_name(helper_rc));

    size_t n = sizeof rows_ready / sizeof rows_ready[0];
    reqs[0] = reqs[1] = PTSC_REQUEST_NULL;
    int failed = run_rows(rows_ready, n, 0, 0);
    cr_expect_eq(failed, 0, "%d of %zu rows failed (listed above)", failed, n);
    /* Refused calls wrote no request, sent and received nothing. */
    cr_expect(reqs[0] == PTSC_REQUEST_NULL && reqs[1] == PTSC_REQUEST_NULL, "a refused call wrote a request");
    ptsc_stats_t st;
    PTSC_ASSERT_OK(ptsc_ctx_stats(ctx, &st));
    cr_expect(st.sends == 0 && st.recvs == 0 && st.collectives == 0,
              "refused calls counted %llu sends, %llu receives, %llu collectives",
              (unsigned long long)st.sends, (unsigned long long)st.recvs, (unsigned long long)st.collectives);

    pthread_mutex_lock(&mu);
    phase = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    cr_expect_eq(helper_rc, PTSC_OK, "helper thread ended with %s", ptsc_status_name(helper_rc));
    MPI_Type_free(&uncommitted);
    MPI_Type_free(&huge);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

/* A NULL request (what a completed request's handle becomes) is complete:
 * every request call accepts it and returns at once. */
Test(bad_input, completed_requests_are_null_and_accepted)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    int v = 7, w = 0;
    ptsc_request_t r[2];
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &w, 1, MPI_INT, 0, 0, 3, &r[0]));
    PTSC_ASSERT_OK(ptsc_isend(ctx, &v, 1, MPI_INT, 0, 0, 3, &r[1]));
    PTSC_ASSERT_OK(ptsc_waitall(2, r));
    cr_expect(r[0] == PTSC_REQUEST_NULL && r[1] == PTSC_REQUEST_NULL, "completed requests were not reset");
    cr_expect_eq(w, 7);
    int done = 0, index = 0, count = 0, ind[2];
    PTSC_ASSERT_OK(ptsc_wait(&r[0]));
    PTSC_ASSERT_OK(ptsc_test(&r[0], &done));
    cr_expect_eq(done, 1);
    PTSC_ASSERT_OK(ptsc_waitall(2, r));
    PTSC_ASSERT_OK(ptsc_waitany(2, r, &index, NULL));
    cr_expect_eq(index, PTSC_UNDEFINED);
    PTSC_ASSERT_OK(ptsc_testall(2, r, &done));
    cr_expect_eq(done, 1);
    PTSC_ASSERT_OK(ptsc_testsome(2, r, &count, ind, NULL));
    cr_expect_eq(count, PTSC_UNDEFINED);
    PTSC_ASSERT_OK(ptsc_cancel(&r[0]));
    PTSC_ASSERT_OK(ptsc_request_free(&r[0]));
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(bad_input, every_call_before_init)
{
    size_t n = sizeof rows_not_ready / sizeof rows_not_ready[0];
    int failed = run_rows(rows_not_ready, n, PTSC_ERR_NOT_INITIALIZED, 1);
    cr_expect_eq(failed, 0, "%d of %zu rows failed (listed above)", failed, n);
    int f = -1;
    PTSC_ASSERT_OK(ptsc_initialized(&f));
    cr_expect_eq(f, 0);
}

Test(bad_input, every_call_after_finalize)
{
    ptsc_test_init(2, NULL);
    ptsc_test_finalize();
    size_t n = sizeof rows_not_ready / sizeof rows_not_ready[0];
    int failed = run_rows(rows_not_ready, n, PTSC_ERR_FINALIZED, 1);
    cr_expect_eq(failed, 0, "%d of %zu rows failed (listed above)", failed, n);
    PTSC_ASSERT_ERR(ptsc_init(NULL, NULL), PTSC_ERR_FINALIZED);
}

/* A bad variable: ptsc_init refuses with the variable named, and stays
 * usable for a corrected retry. */
Test(bad_input, init_with_bad_config)
{
    setenv("PTSC_TIMEOUT", "-1", 1);
    PTSC_ASSERT_ERR(ptsc_init(NULL, NULL), PTSC_ERR_CONFIG);
    cr_expect(strstr(ptsc_last_error(), "PTSC_TIMEOUT") != NULL, "detail: %s", ptsc_last_error());
    PTSC_ASSERT_ERR(ptsc_config_print(NULL), PTSC_ERR_CONFIG);
    cr_expect(strstr(ptsc_last_error(), "PTSC_TIMEOUT") != NULL, "detail: %s", ptsc_last_error());
    unsetenv("PTSC_TIMEOUT");
    ptsc_test_init(1, NULL);
    ptsc_test_finalize();
}
