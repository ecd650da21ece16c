/* Lanes: (rank, thread) addressing and tags, in PTSC_COMM=dup and shared,
 * checked on the computed addresses and on real messages between threads
 * of a one-rank (singleton) run. */
#include "ptsc_internal.h"
#include "test_util.h"

#include <pthread.h>

TestSuite(lanes, .init = ptsc_test_clean_env, .timeout = 60);

#define T 4

static int same_comm(MPI_Comm a, MPI_Comm b)
{
    int r = MPI_UNEQUAL;
    MPI_Comm_compare(a, b, &r);
    return r == MPI_IDENT;
}

static int tag_ub(void)
{
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    cr_assert(flag && ub, "MPI_TAG_UB not available");
    return *ub;
}

/* A message from thread i to (rank 0, thread j) goes where thread j of rank
 * 0 receives from (rank 0, thread i), and nowhere any other receive looks. */
static void check_addressing(const char *comm)
{
    ptsc_test_init(T, comm);
    int nthreads = 0, tag_max = -1;
    PTSC_ASSERT_OK(ptsc_size(NULL, &nthreads));
    cr_assert_eq(nthreads, T);
    PTSC_ASSERT_OK(ptsc_tag_max(&tag_max));
    cr_assert_gt(tag_max, 0);
    const int ub = tag_ub();
    const int tags[] = {0, 1, 2, tag_max / 2, tag_max - 1, tag_max};
    enum { NT = sizeof tags / sizeof tags[0] };
    static ptsc__addr_t seen[NT * T * T];
    int n = 0;
    for (int t = 0; t < NT; t++) {
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) {
                ptsc__addr_t s, r;
                PTSC_ASSERT_OK(ptsc__lanes_send_addr(i, 0, j, tags[t], &s));
                PTSC_ASSERT_OK(ptsc__lanes_recv_addr(j, 0, i, tags[t], &r));
                cr_assert(same_comm(s.comm, r.comm), "%s: %d->%d tag %d: send and receive on different comms",
                          comm, i, j, tags[t]);
                cr_assert_eq(s.tag, r.tag, "%s: %d->%d tag %d: send tag %d, receive tag %d", comm, i, j,
                             tags[t], s.tag, r.tag);
                int src_thread = -1, tag = -1;
                ptsc__lanes_decode(s.tag, &src_thread, &tag);
                cr_assert(src_thread == i && tag == tags[t],
                          "%s: %d->%d tag %d decodes to source thread %d, tag %d", comm, i, j, tags[t],
                          src_thread, tag);
                cr_assert_eq(s.rank, 0, "%s: destination rank %d, expected 0", comm, s.rank);
                cr_assert_eq(r.rank, 0, "%s: source rank %d, expected 0", comm, r.rank);
                cr_assert(s.tag >= 0 && s.tag <= ub,
                          "%s: %d->%d tag %d encodes to %d outside [0, MPI_TAG_UB=%d]", comm, i, j, tags[t],
                          s.tag, ub);
                int cmp = MPI_IDENT;
                MPI_Comm_compare(s.comm, MPI_COMM_WORLD, &cmp);
                cr_assert_eq(cmp, MPI_CONGRUENT, "%s: lane is not a private duplicate of MPI_COMM_WORLD",
                             comm);
                for (int k = 0; k < n; k++)
                    cr_assert(!(seen[k].tag == s.tag && same_comm(seen[k].comm, s.comm)),
                              "%s: %d->%d tag %d shares (comm, MPI tag %d) with an earlier (src, dst, tag)",
                              comm, i, j, tags[t], s.tag);
                seen[n++] = s;
            }
        }
    }
    ptsc_test_finalize();
}

Test(lanes, addressing_dup) { check_addressing("dup"); }
Test(lanes, addressing_shared) { check_addressing("shared"); }

/* Collective traffic that ptsc builds from point-to-point messages (shared
 * lanes) must never match a point-to-point receive. */
Test(lanes, collective_addresses_apart_from_p2p)
{
    ptsc_test_init(T, "shared");
    int tag_max = -1;
    PTSC_ASSERT_OK(ptsc_tag_max(&tag_max));
    const int tags[] = {0, 1, 2, 3, tag_max};
    ptsc__addr_t colls[5 * T];
    for (int a = 0; a < 5; a++) {
        for (int me = 0; me < T; me++) {
            ptsc__addr_t c;
            ptsc__lanes_coll_addr(me, 0, tags[a], &c);
            /* Threads' collectives run at once on the one communicator: each
             * (thread, tag) needs its own address. */
            for (int k = 0; k < a * T + me; k++)
                cr_assert(!(colls[k].tag == c.tag && same_comm(colls[k].comm, c.comm)),
                          "collective address of thread %d tag %d equals that of thread %d tag %d", me,
                          tags[a], k % T, tags[k / T]);
            colls[a * T + me] = c;
            for (int b = 0; b < 5; b++)
                for (int i = 0; i < T; i++)
                    for (int j = 0; j < T; j++) {
                        ptsc__addr_t s;
                        PTSC_ASSERT_OK(ptsc__lanes_send_addr(i, 0, j, tags[b], &s));
                        cr_assert(!(s.tag == c.tag && same_comm(s.comm, c.comm)),
                                  "collective address of thread %d tag %d equals p2p %d->%d tag %d", me,
                                  tags[a], i, j, tags[b]);
                    }
        }
    }
    ptsc_test_finalize();
}

Test(lanes, ctx_comm_is_a_lane_per_thread_dup)
{
    ptsc_test_init(2, "dup");
    ptsc_ctx_t *ctx;
    MPI_Comm c0, c1;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    PTSC_ASSERT_OK(ptsc_ctx_comm(ctx, &c0));
    PTSC_ASSERT_OK(ptsc_thread_detach());
    PTSC_ASSERT_OK(ptsc_thread_attach(1, &ctx));
    PTSC_ASSERT_OK(ptsc_ctx_comm(ctx, &c1));
    cr_assert_neq(c0, MPI_COMM_NULL);
    cr_assert(!same_comm(c0, c1), "threads 0 and 1 share a lane in PTSC_COMM=dup");
    cr_assert(!same_comm(c0, MPI_COMM_WORLD), "lane is MPI_COMM_WORLD itself");
    int size = 0;
    MPI_Comm_size(c1, &size);
    cr_assert_eq(size, 1, "lane of a one-rank run has %d ranks", size);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(lanes, tag_max_fits_mpi_tag_ub)
{
    ptsc_test_init(T, "dup");
    int dup_max = -1;
    PTSC_ASSERT_OK(ptsc_tag_max(&dup_max));
    cr_expect_geq(dup_max, 32767 / T - 1, "tag_max %d is smaller than MPI's guaranteed range allows",
                  dup_max);
    cr_expect_leq(dup_max, tag_ub());
    ptsc_test_finalize();
}

/* Real messages between threads of one process: every thread sends to every
 * thread (itself included) with the same tag and a payload naming sender and
 * receiver; every receive must get exactly the message meant for it. */
#define NMSG 16

struct exchange {
    pthread_barrier_t posted;
    int tag;
    int failures;
    char why[T][256];
};

static void *exchange_thread(void *p)
{
    struct exchange *x = p;
    int me;
    ptsc_ctx_t *ctx = NULL;
    int rbuf[T][NMSG], sbuf[T][NMSG];
    ptsc_request_t req[2 * T];
    int rc = PTSC_OK;
    /* Index from the barrier order is not deterministic: take it from the slot. */
    for (me = 0; me < T; me++)
        if (ptsc_thread_attach(me, &ctx) == PTSC_OK)
            break;
    if (me == T) {
        snprintf(x->why[0], 256, "no free slot: %s", ptsc_last_error());
        __atomic_add_fetch(&x->failures, 1, __ATOMIC_SEQ_CST);
        pthread_barrier_wait(&x->posted);
        return NULL;
    }
    for (int j = 0; j < T; j++) {
        for (int k = 0; k < NMSG; k++)
            rbuf[j][k] = -1;
        if (rc == PTSC_OK)
            rc = ptsc_irecv(ctx, rbuf[j], NMSG, MPI_INT, 0, j, x->tag, &req[j]);
    }
    pthread_barrier_wait(&x->posted);
    for (int j = 0; j < T; j++) {
        for (int k = 0; k < NMSG; k++)
            sbuf[j][k] = (me * 100 + j) * 1000 + k;
        if (rc == PTSC_OK)
            rc = ptsc_isend(ctx, sbuf[j], NMSG, MPI_INT, 0, j, x->tag, &req[T + j]);
    }
    if (rc == PTSC_OK)
        rc = ptsc_waitall(2 * T, req);
    if (rc != PTSC_OK) {
        snprintf(x->why[me], 256, "thread %d: %s: %s", me, ptsc_status_name(rc), ptsc_last_error());
        __atomic_add_fetch(&x->failures, 1, __ATOMIC_SEQ_CST);
    } else {
        for (int j = 0; j < T; j++)
            for (int k = 0; k < NMSG; k++)
                if (rbuf[j][k] != (j * 100 + me) * 1000 + k) {
                    snprintf(
                        x->why[me], 256,
                        "thread %d, message from thread %d, element %d: got %d (from %d to %d), expected %d",
                        me, j, k, rbuf[j][k], rbuf[j][k] / 100000, rbuf[j][k] / 1000 % 100,
                        (j * 100 + me) * 1000 + k);
                    __atomic_add_fetch(&x->failures, 1, __ATOMIC_SEQ_CST);
                    j = T;
                    break;
                }
    }
    ptsc_thread_detach();
    return NULL;
}

static void thread_exchange(const char *comm, int use_tag_max)
{
    ptsc_test_init(T, comm);
    struct exchange x;
    memset(&x, 0, sizeof x);
    if (use_tag_max)
        PTSC_ASSERT_OK(ptsc_tag_max(&x.tag));
    else
        x.tag = 3;
    pthread_barrier_init(&x.posted, NULL, T);
    pthread_t th[T];
    for (int i = 0; i < T; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, exchange_thread, &x), 0);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++)
        cr_expect_str_empty(x.why[i], "%s", x.why[i]);
    cr_assert_eq(x.failures, 0, "%s, tag %d: %d threads failed", comm, x.tag, x.failures);
    pthread_barrier_destroy(&x.posted);
    ptsc_test_finalize();
}

Test(lanes, thread_exchange_dup) { thread_exchange("dup", 0); }
Test(lanes, thread_exchange_shared) { thread_exchange("shared", 0); }
Test(lanes, thread_exchange_at_tag_max_dup) { thread_exchange("dup", 1); }
Test(lanes, thread_exchange_at_tag_max_shared) { thread_exchange("shared", 1); }

/* Tags keep messages apart: with a receive for tag 2 posted first, the
 * tag-1 message sent first must wait for the tag-1 receive. */
static void tags_apart(const char *comm)
{
    ptsc_test_init(1, comm);
    ptsc_ctx_t *ctx;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    int a = 0, b = 0, one = 111, two = 222;
    ptsc_request_t r[4];
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &b, 1, MPI_INT, 0, 0, 2, &r[0]));
    PTSC_ASSERT_OK(ptsc_isend(ctx, &one, 1, MPI_INT, 0, 0, 1, &r[1]));
    PTSC_ASSERT_OK(ptsc_isend(ctx, &two, 1, MPI_INT, 0, 0, 2, &r[2]));
    PTSC_ASSERT_OK(ptsc_irecv(ctx, &a, 1, MPI_INT, 0, 0, 1, &r[3]));
    PTSC_ASSERT_OK(ptsc_waitall(4, r));
    for (int i = 0; i < 4; i++)
        cr_expect_eq(r[i], PTSC_REQUEST_NULL, "request %d not reset by ptsc_waitall", i);
    cr_expect_eq(a, 111, "%s: tag-1 receive got %d", comm, a);
    cr_expect_eq(b, 222, "%s: tag-2 receive got %d", comm, b);
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(lanes, tags_apart_dup) { tags_apart("dup"); }
Test(lanes, tags_apart_shared) { tags_apart("shared"); }

static void tag_range(const char *comm)
{
    ptsc_test_init(2, comm);
    ptsc_ctx_t *ctx;
    int tag_max = -1, x = 0;
    ptsc_request_t r = PTSC_REQUEST_NULL;
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
    PTSC_ASSERT_OK(ptsc_tag_max(&tag_max));
    PTSC_ASSERT_ERR(ptsc_isend(ctx, &x, 1, MPI_INT, 0, 1, tag_max + 1, &r), PTSC_ERR_TAG);
    PTSC_ASSERT_ERR(ptsc_irecv(ctx, &x, 1, MPI_INT, 0, 1, tag_max + 1, &r), PTSC_ERR_TAG);
    PTSC_ASSERT_ERR(ptsc_isend(ctx, &x, 1, MPI_INT, 0, 1, -1, &r), PTSC_ERR_TAG);
    PTSC_ASSERT_ERR(ptsc_irecv(ctx, &x, 1, MPI_INT, 0, 1, -1, &r), PTSC_ERR_TAG);
    if (tag_max < 0x7fffffff) /* INT_MAX would overflow any encoding */
        PTSC_ASSERT_ERR(ptsc_isend(ctx, &x, 1, MPI_INT, 0, 1, 0x7fffffff, &r), PTSC_ERR_TAG);
    cr_expect_eq(r, PTSC_REQUEST_NULL, "request written by a failing call");
    PTSC_ASSERT_OK(ptsc_thread_detach());
    ptsc_test_finalize();
}

Test(lanes, tag_range_dup) { tag_range("dup"); }
Test(lanes, tag_range_shared) { tag_range("shared"); }

Test(lanes, shared_has_smaller_tag_range)
{
    /* Documented trade-off of PTSC_COMM=shared: thread bits eat tag space. */
    ptsc_test_init(T, "shared");
    int shared_max = -1;
    PTSC_ASSERT_OK(ptsc_tag_max(&shared_max));
    int ub = tag_ub();
    cr_expect_leq((long long)shared_max * T * T, ub,
                  "shared tag_max %d leaves no room for %d x %d thread bits", shared_max, T, T);
    ptsc_test_finalize();
}
