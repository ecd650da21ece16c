/* Argument checks of point-to-point calls and collectives: every bad input
 * returns its status with a detail, writes no output and sends nothing. */
#include "test_util.h"

#include <pthread.h>

TestSuite(p2p_args, .init = ptsc_test_clean_env, .timeout = 60);

static ptsc_ctx_t *ctx;
static int tag_max;
static int buf[8], rbuf[8];

static void setup(void)
{
    ptsc_test_clean_env();
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    PTSC_ASSERT_OK(ptsc_tag_max(&tag_max));
}

static void teardown(void)
{
    ptsc_thread_detach();
    ptsc_finalize();
}

/* Every (argument, bad value, status) class a (rank, thread, tag) call
 * checks, for one call shape. */
#define CHECK_PEER_ARGS(call_of)                                                    \
    do {                                                                            \
        PTSC_ASSERT_ERR(call_of(NULL, 1, MPI_INT, 0, 1, 0), PTSC_ERR_NULL_BUFFER);  \
        PTSC_ASSERT_ERR(call_of(buf, -1, MPI_INT, 0, 1, 0), PTSC_ERR_COUNT);        \
        PTSC_ASSERT_ERR(call_of(buf, -1000000, MPI_INT, 0, 1, 0), PTSC_ERR_COUNT);  \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_INT, 1, 1, 0), PTSC_ERR_RANK);          \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_INT, -2, 1, 0), PTSC_ERR_RANK);         \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_INT, 0, 2, 0), PTSC_ERR_THREAD);        \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_INT, 0, -1, 0), PTSC_ERR_THREAD);       \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_INT, 0, 1, -1), PTSC_ERR_TAG);          \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_INT, 0, 1, tag_max + 1), PTSC_ERR_TAG); \
        PTSC_ASSERT_ERR(call_of(buf, 1, MPI_DATATYPE_NULL, 0, 1, 0), PTSC_ERR_ARG); \
    } while (0)

#define SEND(b, n, t, r, th, tag) ptsc_send(ctx, b, n, t, r, th, tag)
#define RECV(b, n, t, r, th, tag) ptsc_recv(ctx, b, n, t, r, th, tag)
#define SR_SEND(b, n, t, r, th, tag) ptsc_sendrecv(ctx, b, n, t, r, th, tag, rbuf, 1, MPI_INT, 0, 1, 0)
#define SR_RECV(b, n, t, r, th, tag) ptsc_sendrecv(ctx, rbuf, 1, MPI_INT, 0, 1, 0, b, n, t, r, th, tag)

static ptsc_request_t req;
#define ISEND(b, n, t, r, th, tag) ptsc_isend(ctx, b, n, t, r, th, tag, &req)
#define IRECV(b, n, t, r, th, tag) ptsc_irecv(ctx, b, n, t, r, th, tag, &req)

/* Nothing was sent by the refused calls: a probe-like receive of a message
 * from thread 0 to thread 1 would otherwise find one. Checked through stats. */
static void expect_no_traffic(void)
{
    ptsc_stats_t st;
    PTSC_ASSERT_OK(ptsc_ctx_stats(ctx, &st));
    cr_expect_eq(st.sends, 0, "refused calls counted %llu sends", (unsigned long long)st.sends);
    cr_expect_eq(st.recvs, 0, "refused calls counted %llu receives", (unsigned long long)st.recvs);
    cr_expect_eq(st.collectives, 0, "refused calls counted %llu collectives",
                 (unsigned long long)st.collectives);
}

Test(p2p_args, send, .init = setup, .fini = teardown)
{
    CHECK_PEER_ARGS(SEND);
    /* PTSC_ANY_RANK is for receives only. */
    PTSC_ASSERT_ERR(SEND(buf, 1, MPI_INT, PTSC_ANY_RANK, 1, 0), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ISEND(buf, 1, MPI_INT, PTSC_ANY_RANK, 1, 0), PTSC_ERR_RANK);
    expect_no_traffic();
}

Test(p2p_args, recv, .init = setup, .fini = teardown)
{
    CHECK_PEER_ARGS(RECV);
    expect_no_traffic();
}

Test(p2p_args, sendrecv_send_side, .init = setup, .fini = teardown)
{
    CHECK_PEER_ARGS(SR_SEND);
    expect_no_traffic();
}

Test(p2p_args, sendrecv_recv_side, .init = setup, .fini = teardown)
{
    CHECK_PEER_ARGS(SR_RECV);
    expect_no_traffic();
}

Test(p2p_args, isend, .init = setup, .fini = teardown)
{
    req = PTSC_REQUEST_NULL;
    CHECK_PEER_ARGS(ISEND);
    cr_expect_eq(req, PTSC_REQUEST_NULL, "a refused isend wrote a request");
    PTSC_ASSERT_ERR(ptsc_isend(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL), PTSC_ERR_ARG);
    expect_no_traffic();
}

Test(p2p_args, irecv, .init = setup, .fini = teardown)
{
    req = PTSC_REQUEST_NULL;
    CHECK_PEER_ARGS(IRECV);
    cr_expect_eq(req, PTSC_REQUEST_NULL, "a refused irecv wrote a request");
    PTSC_ASSERT_ERR(ptsc_irecv(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL), PTSC_ERR_ARG);
    expect_no_traffic();
}

Test(p2p_args, null_buffer_with_zero_count_is_valid, .init = setup, .fini = teardown)
{
    ptsc_request_t r[2];
    PTSC_ASSERT_OK(ptsc_irecv(ctx, NULL, 0, MPI_INT, 0, 0, 4, &r[0]));
    PTSC_ASSERT_OK(ptsc_isend(ctx, NULL, 0, MPI_INT, 0, 0, 4, &r[1]));
    PTSC_ASSERT_OK(ptsc_waitall(2, r));
    PTSC_ASSERT_OK(ptsc_sendrecv(ctx, NULL, 0, MPI_INT, 0, 0, 5, NULL, 0, MPI_INT, 0, 0, 5));
}

Test(p2p_args, request_calls, .init = setup, .fini = teardown)
{
    ptsc_request_t r = PTSC_REQUEST_NULL, rs[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    int done = -1;
    PTSC_ASSERT_OK(ptsc_wait(&r)); /* a NULL request is complete at once */
    PTSC_ASSERT_OK(ptsc_waitall(2, rs));
    PTSC_ASSERT_OK(ptsc_waitall(0, NULL));
    PTSC_ASSERT_OK(ptsc_test(&r, &done));
    cr_expect_eq(done, 1, "ptsc_test of a NULL request says not done");
    PTSC_ASSERT_ERR(ptsc_wait(NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_waitall(1, NULL), PTSC_ERR_ARG);
    int rc = ptsc_waitall(-1, rs);
    cr_expect(rc == PTSC_ERR_COUNT || rc == PTSC_ERR_ARG, "ptsc_waitall(-1) returned %s",
              ptsc_status_name(rc));
    PTSC_ASSERT_ERR(ptsc_test(NULL, &done), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_test(&r, NULL), PTSC_ERR_ARG);
}

Test(p2p_args, test_polls_to_completion, .init = setup, .fini = teardown)
{
    int out[4] = {1, 2, 3, 4}, in[4] = {0};
    ptsc_request_t r, s;
    PTSC_ASSERT_OK(ptsc_irecv(ctx, in, 4, MPI_INT, 0, 0, 6, &r));
    int done = -1;
    PTSC_ASSERT_OK(ptsc_test(&r, &done));
    cr_expect_eq(done, 0, "receive done before anything was sent");
    cr_expect_neq(r, PTSC_REQUEST_NULL, "an incomplete request was reset");
    PTSC_ASSERT_OK(ptsc_isend(ctx, out, 4, MPI_INT, 0, 0, 6, &s));
    for (long spins = 0; r != PTSC_REQUEST_NULL && spins < 100000000L; spins++)
        PTSC_ASSERT_OK(ptsc_test(&r, &done));
    cr_assert_eq(r, PTSC_REQUEST_NULL, "receive never completed under ptsc_test");
    cr_expect_eq(done, 1);
    PTSC_ASSERT_OK(ptsc_wait(&s));
    cr_expect_eq(s, PTSC_REQUEST_NULL);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(in[i], out[i]);
}

Test(p2p_args, truncated_receive, .init = setup, .fini = teardown)
{
    int out[4] = {1, 2, 3, 4}, in[2] = {0};
    ptsc_request_t s;
    PTSC_ASSERT_OK(ptsc_isend(ctx, out, 4, MPI_INT, 0, 0, 8, &s));
    PTSC_ASSERT_ERR(ptsc_recv(ctx, in, 2, MPI_INT, 0, 0, 8), PTSC_ERR_TRUNCATE);
    PTSC_ASSERT_OK(ptsc_wait(&s));
}

Test(p2p_args, bcast, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_ERR(ptsc_bcast(ctx, NULL, 1, MPI_INT, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_bcast(ctx, buf, -1, MPI_INT, 0), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_bcast(ctx, buf, 1, MPI_INT, 1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_bcast(ctx, buf, 1, MPI_INT, -1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_bcast(ctx, buf, 1, MPI_DATATYPE_NULL, 0), PTSC_ERR_ARG);
    expect_no_traffic();
    PTSC_ASSERT_OK(ptsc_bcast(ctx, NULL, 0, MPI_INT, 0));
}

Test(p2p_args, reduce, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, buf, NULL, 1, MPI_INT, MPI_SUM, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM, 0), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, 1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, buf, rbuf, 1, MPI_INT, MPI_SUM, -1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_reduce(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL, 0), PTSC_ERR_ARG);
    expect_no_traffic();
}

Test(p2p_args, allreduce, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_ERR(ptsc_allreduce(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_allreduce(ctx, buf, NULL, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_allreduce(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_allreduce(ctx, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_allreduce(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL), PTSC_ERR_ARG);
    expect_no_traffic();
}

Test(p2p_args, allgather_and_alltoall, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_ERR(ptsc_allgather(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_allgather(ctx, buf, 1, MPI_INT, NULL, 1, MPI_INT), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_allgather(ctx, buf, -1, MPI_INT, rbuf, 1, MPI_INT), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_allgather(ctx, buf, 1, MPI_INT, rbuf, -1, MPI_INT), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_allgather(ctx, buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_INT), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_allgather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_DATATYPE_NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_alltoall(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_alltoall(ctx, buf, 1, MPI_INT, NULL, 1, MPI_INT), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_alltoall(ctx, buf, -1, MPI_INT, rbuf, 1, MPI_INT), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_alltoall(ctx, buf, 1, MPI_INT, rbuf, -1, MPI_INT), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_alltoall(ctx, buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_INT), PTSC_ERR_ARG);
    expect_no_traffic();
}

Test(p2p_args, one_rank_collectives_compute, .init = setup, .fini = teardown)
{
    int v[3] = {4, 5, 6}, r[3] = {0};
    PTSC_ASSERT_OK(ptsc_barrier(ctx));
    PTSC_ASSERT_OK(ptsc_bcast(ctx, v, 3, MPI_INT, 0));
    PTSC_ASSERT_OK(ptsc_allreduce(ctx, v, r, 3, MPI_INT, MPI_SUM));
    for (int i = 0; i < 3; i++)
        cr_expect_eq(r[i], v[i], "one-rank allreduce element %d: %d, expected %d", i, r[i], v[i]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_reduce(ctx, v, r, 3, MPI_INT, MPI_MAX, 0));
    cr_expect_eq(r[2], 6);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_allgather(ctx, v, 2, MPI_INT, r, 2, MPI_INT));
    cr_expect(r[0] == 4 && r[1] == 5, "allgather gave %d %d", r[0], r[1]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_alltoall(ctx, v, 1, MPI_INT, r, 1, MPI_INT));
    cr_expect_eq(r[0], 4);
}

Test(p2p_args, request_array_calls, .init = setup, .fini = teardown)
{
    ptsc_request_t rs[3] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    int index = -5, flag = -5, outcount = -5, idx[3] = {-5, -5, -5};
    ptsc_info_t info;
    PTSC_ASSERT_ERR(ptsc_waitany(1, NULL, &index, &info), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_waitany(-1, rs, &index, &info), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_waitany(3, rs, NULL, &info), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testall(1, NULL, &flag), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testall(-1, rs, &flag), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testall(3, rs, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testsome(1, NULL, &outcount, idx, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testsome(-1, rs, &outcount, idx, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testsome(3, rs, NULL, idx, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_testsome(3, rs, &outcount, NULL, NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_cancel(NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_request_free(NULL), PTSC_ERR_ARG);
    cr_expect(index == -5 && flag == -5 && outcount == -5 && idx[0] == -5, "a refused call wrote an output");
    /* All NULL: PTSC_UNDEFINED, and nothing to do. */
    PTSC_ASSERT_OK(ptsc_waitany(3, rs, &index, NULL));
    cr_expect_eq(index, PTSC_UNDEFINED);
    PTSC_ASSERT_OK(ptsc_waitany(0, NULL, &index, NULL));
    cr_expect_eq(index, PTSC_UNDEFINED);
    PTSC_ASSERT_OK(ptsc_testsome(3, rs, &outcount, idx, NULL));
    cr_expect_eq(outcount, PTSC_UNDEFINED);
    PTSC_ASSERT_OK(ptsc_testall(3, rs, &flag));
    cr_expect_eq(flag, 1);
    PTSC_ASSERT_OK(ptsc_cancel(&rs[0]));
    PTSC_ASSERT_OK(ptsc_request_free(&rs[0]));
    expect_no_traffic();
}

/* Requests of another thread are refused by every array call. */
static void *other_thread_req(void *arg)
{
    ptsc_request_t *r = arg;
    int index, flag, outcount, idx[1];
    ptsc_request_t mine[1] = {*r};
    ptsc_thread_attach(1, NULL);
    cr_expect_eq(ptsc_waitany(1, mine, &index, NULL), PTSC_ERR_WRONG_THREAD);
    cr_expect_eq(ptsc_testall(1, mine, &flag), PTSC_ERR_WRONG_THREAD);
    cr_expect_eq(ptsc_testsome(1, mine, &outcount, idx, NULL), PTSC_ERR_WRONG_THREAD);
    cr_expect_eq(ptsc_cancel(&mine[0]), PTSC_ERR_WRONG_THREAD);
    cr_expect_eq(ptsc_request_free(&mine[0]), PTSC_ERR_WRONG_THREAD);
    cr_expect_eq(mine[0], *r, "a refused call changed the handle");
    ptsc_thread_detach();
    return NULL;
}

Test(p2p_args, request_calls_wrong_thread, .init = setup, .fini = teardown)
{
    int in = -1, out = 42;
    ptsc_request_t r;
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &in, 1, MPI_INT, 0, 0, 3, &r));
    pthread_t th;
    pthread_create(&th, NULL, other_thread_req, &r);
    pthread_join(th, NULL);
    PTSC_ASSERT_OK(ptsc_send(ctx, &out, 1, MPI_INT, 0, 0, 3));
    PTSC_ASSERT_OK(ptsc_wait(&r));
    cr_expect_eq(in, 42);
}

/* Cancel: an unmatched receive completes cancelled and its message goes to
 * the next receive; a send completes normally. Free: a receive in flight is
 * refused, a send is completed in the background. */
Test(p2p_args, cancel_and_free, .init = setup, .fini = teardown)
{
    int in = -1, out = 7, out2 = 8;
    ptsc_request_t r, s;
    ptsc_info_t info;
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &in, 1, MPI_INT, 0, 0, 9, &r));
    PTSC_ASSERT_OK(ptsc_cancel(&r));
    cr_expect_neq(r, PTSC_REQUEST_NULL, "ptsc_cancel reset the handle");
    PTSC_ASSERT_ERR(ptsc_wait_info(&r, &info), PTSC_ERR_CANCELLED);
    cr_expect_eq(r, PTSC_REQUEST_NULL);
    cr_expect_eq(info.error, PTSC_ERR_CANCELLED);
    cr_expect_eq(in, -1, "a cancelled receive wrote its buffer");
    PTSC_ASSERT_OK(ptsc_isend(ctx, &out, 1, MPI_INT, 0, 0, 9, &s));
    PTSC_ASSERT_OK(ptsc_cancel(&s));
    PTSC_ASSERT_OK(ptsc_recv(ctx, &in, 1, MPI_INT, 0, 0, 9));
    cr_expect_eq(in, 7, "the message after a cancelled receive: %d", in);
    PTSC_ASSERT_OK(ptsc_wait(&s));

    in = -1;
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &in, 1, MPI_INT, 0, 0, 10, &r));
    PTSC_ASSERT_ERR(ptsc_request_free(&r), PTSC_ERR_PENDING);
    cr_assert_neq(r, PTSC_REQUEST_NULL, "a refused free reset the handle");
    PTSC_ASSERT_OK(ptsc_isend(ctx, &out2, 1, MPI_INT, 0, 0, 10, &s));
    PTSC_ASSERT_OK(ptsc_request_free(&s));
    cr_expect_eq(s, PTSC_REQUEST_NULL);
    PTSC_ASSERT_OK(ptsc_wait(&r));
    cr_expect_eq(in, 8);
    /* A cancelled receive reported by waitall and testsome, with its index. */
    ptsc_request_t rs[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &in, 1, MPI_INT, 0, 0, 11, &rs[1]));
    PTSC_ASSERT_OK(ptsc_cancel(&rs[1]));
    int outcount = -1, idx[2] = {-1, -1};
    ptsc_info_t infos[2];
    PTSC_ASSERT_ERR(ptsc_testsome(2, rs, &outcount, idx, infos), PTSC_ERR_CANCELLED);
    cr_expect(outcount == 1 && idx[0] == 1 && infos[0].error == PTSC_ERR_CANCELLED,
              "testsome of a cancelled receive: outcount %d index %d error %d", outcount, idx[0],
              infos[0].error);
    cr_expect(strstr(ptsc_last_error(), "request 1") != NULL, "detail does not name the request: %s",
              ptsc_last_error());
}

Test(p2p_args, gather_scatter_and_v, .init = setup, .fini = teardown)
{
    int c[1] = {1}, d[1] = {0}, neg[1] = {-1};
    PTSC_ASSERT_ERR(ptsc_gather(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_gather(ctx, buf, 1, MPI_INT, NULL, 1, MPI_INT, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_gather(ctx, buf, -1, MPI_INT, rbuf, 1, MPI_INT, 0), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_gather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_gather(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, -1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_gather(ctx, buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_gather(ctx, buf, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_scatter(ctx, NULL, 1, MPI_INT, rbuf, 1, MPI_INT, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_scatter(ctx, buf, 1, MPI_INT, rbuf, -1, MPI_INT, 0), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_scatter(ctx, buf, 1, MPI_INT, rbuf, 1, MPI_INT, 1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_scatter(ctx, MPI_IN_PLACE, 1, MPI_INT, rbuf, 1, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, NULL, d, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, c, NULL, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, neg, d, MPI_INT, 0), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, c, neg, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_gatherv(ctx, buf, 1, MPI_INT, NULL, c, d, MPI_INT, 0), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_gatherv(ctx, buf, 1, MPI_INT, rbuf, c, d, MPI_INT, 1), PTSC_ERR_RANK);
    PTSC_ASSERT_ERR(ptsc_scatterv(ctx, buf, NULL, d, MPI_INT, rbuf, 1, MPI_INT, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_scatterv(ctx, buf, neg, d, MPI_INT, rbuf, 1, MPI_INT, 0), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_scatterv(ctx, buf, c, d, MPI_INT, rbuf, 1, MPI_DATATYPE_NULL, 0), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_allgatherv(ctx, buf, 1, MPI_INT, rbuf, NULL, d, MPI_INT), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_allgatherv(ctx, buf, -1, MPI_INT, rbuf, c, d, MPI_INT), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_allgatherv(ctx, NULL, 1, MPI_INT, rbuf, c, d, MPI_INT), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_alltoallv(ctx, buf, c, NULL, MPI_INT, rbuf, c, d, MPI_INT), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_alltoallv(ctx, buf, c, d, MPI_INT, rbuf, neg, d, MPI_INT), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_alltoallv(ctx, buf, c, d, MPI_INT, NULL, c, d, MPI_INT), PTSC_ERR_NULL_BUFFER);
    expect_no_traffic();
}

Test(p2p_args, scan_exscan_reduce_scatter_block, .init = setup, .fini = teardown)
{
    PTSC_ASSERT_ERR(ptsc_scan(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_scan(ctx, buf, NULL, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_scan(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_scan(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_exscan(ctx, buf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_exscan(ctx, buf, NULL, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_exscan(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL), PTSC_ERR_ARG);
    PTSC_ASSERT_ERR(ptsc_reduce_scatter_block(ctx, NULL, rbuf, 1, MPI_INT, MPI_SUM), PTSC_ERR_NULL_BUFFER);
    PTSC_ASSERT_ERR(ptsc_reduce_scatter_block(ctx, buf, rbuf, -1, MPI_INT, MPI_SUM), PTSC_ERR_COUNT);
    PTSC_ASSERT_ERR(ptsc_reduce_scatter_block(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL), PTSC_ERR_ARG);
    expect_no_traffic();
}

Test(p2p_args, one_rank_new_collectives_compute, .init = setup, .fini = teardown)
{
    int v[3] = {4, 5, 6}, r[4] = {0, 0, 0, -1}, c[1] = {2}, d[1] = {1};
    PTSC_ASSERT_OK(ptsc_gather(ctx, v, 2, MPI_INT, r, 2, MPI_INT, 0));
    cr_expect(r[0] == 4 && r[1] == 5, "gather gave %d %d", r[0], r[1]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_scatter(ctx, v, 3, MPI_INT, r, 3, MPI_INT, 0));
    cr_expect(r[0] == 4 && r[2] == 6, "scatter gave %d %d", r[0], r[2]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_gatherv(ctx, v, 2, MPI_INT, r, c, d, MPI_INT, 0));
    cr_expect(r[0] == 0 && r[1] == 4 && r[2] == 5, "gatherv gave %d %d %d", r[0], r[1], r[2]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_allgatherv(ctx, v, 2, MPI_INT, r, c, d, MPI_INT));
    cr_expect(r[0] == 0 && r[1] == 4 && r[2] == 5, "allgatherv gave %d %d %d", r[0], r[1], r[2]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_scatterv(ctx, v, c, d, MPI_INT, r, 2, MPI_INT, 0));
    cr_expect(r[0] == 5 && r[1] == 6, "scatterv gave %d %d", r[0], r[1]);
    memset(r, 0, sizeof r);
    PTSC_ASSERT_OK(ptsc_alltoallv(ctx, v, c, d, MPI_INT, r, c, d, MPI_INT));
    cr_expect(r[0] == 0 && r[1] == 5 && r[2] == 6, "alltoallv gave %d %d %d", r[0], r[1], r[2]);
    PTSC_ASSERT_OK(ptsc_scan(ctx, v, r, 3, MPI_INT, MPI_SUM));
    cr_expect(r[0] == 4 && r[2] == 6, "scan gave %d %d", r[0], r[2]);
    PTSC_ASSERT_OK(ptsc_exscan(ctx, v, r, 3, MPI_INT, MPI_SUM));
    PTSC_ASSERT_OK(ptsc_reduce_scatter_block(ctx, v, r, 3, MPI_INT, MPI_SUM));
    cr_expect(r[0] == 4 && r[2] == 6, "reduce_scatter_block gave %d %d", r[0], r[2]);
}

/* MPI initialised by the program below MPI_THREAD_MULTIPLE: ptsc refuses. */
Test(p2p_args, mpi_thread_serialized_is_refused)
{
    int provided = -1;
    cr_assert_eq(MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided), MPI_SUCCESS);
    cr_assert_lt(provided, MPI_THREAD_MULTIPLE, "MPI gave MULTIPLE although SERIALIZED was asked");
    setenv("PTSC_MAX_THREADS", "2", 1);
    PTSC_ASSERT_ERR(ptsc_init(NULL, NULL), PTSC_ERR_THREAD_LEVEL);
    int flag = -1;
    PTSC_ASSERT_OK(ptsc_initialized(&flag));
    cr_expect_eq(flag, 0);
    int fin = 1;
    MPI_Finalized(&fin);
    cr_expect_eq(fin, 0, "ptsc finalised the program's MPI after refusing it");
    MPI_Finalize();
}

Test(p2p_args, mpi_thread_funneled_is_refused)
{
    int provided = -1;
    cr_assert_eq(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), MPI_SUCCESS);
    setenv("PTSC_MAX_THREADS", "2", 1);
    if (provided < MPI_THREAD_MULTIPLE)
        PTSC_ASSERT_ERR(ptsc_init(NULL, NULL), PTSC_ERR_THREAD_LEVEL);
    MPI_Finalize();
}
