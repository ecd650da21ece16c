/*
 * A plain MPI program (no ptsc call) for libptsc-mpi (src/interpose.c).
 * Every MPI call it makes that takes a buffer is one the interposer
 * defines: point-to-point, blocking and non-blocking collectives, MPI_IN_PLACE
 * and a matched receive. Each result is checked against its closed form.
 *
 * The same source is built twice: linked as a plain MPI program
 * (mpi_interpose) and linked with libptsc-mpi before libmpi
 * (mpi_interpose_linked). MPI_INTERPOSE_EXPECT=yes requires the
 * interposer to be active (linked, or preloaded by ptsc-run) and to have
 * seen exactly the buffers this program passed, in the calls that take
 * them (the program counts them as it calls); =no requires it to be
 * absent. So a wrapper that is missing, forwards wrong arguments, or is not
 * reached fails the test.
 *
 * Prints "PASSED mpi_interpose" on rank 0 when every rank passed.
 */
#include <dlfcn.h>
#include <mpi.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 64

static int rank, size, failed;
static unsigned long expect_bufs; /* buffer arguments passed to intercepted calls */

#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "mpi_interpose [rank %d] FAIL line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            failed++;                                                                  \
        }                                                                              \
    } while (0)
#define MPI_OK(call) CHECK((call) == MPI_SUCCESS, "%s failed", #call)
/* Count the buffers of one call (1 or 2; MPI_IN_PLACE is not a buffer, nor
 * a rooted call's buffer that counts at the root only, which MPI does not
 * look at elsewhere). */
#define BUFS(n) (expect_bufs += (n))

static int val(int from, int to, int k) { return from * 1000000 + to * 1000 + k; }

/* Ones over the stack the next calls will use: what such a call reads
 * without writing it first is then not zero by chance. */
static void __attribute__((noinline)) paint_stack(void)
{
    volatile unsigned char junk[16384];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = 0xff;
}

static void point_to_point(void)
{
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    int sb[N], rb[N];
    for (int k = 0; k < N; k++)
        sb[k] = val(rank, next, k);

    /* Send / Recv around the ring (even ranks send first). */
    memset(rb, 0, sizeof rb);
    if (rank % 2 == 0) {
        BUFS(2);
        MPI_OK(MPI_Send(sb, N, MPI_INT, next, 1, MPI_COMM_WORLD));
        MPI_OK(MPI_Recv(rb, N, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        BUFS(2);
        MPI_OK(MPI_Recv(rb, N, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Send(sb, N, MPI_INT, next, 1, MPI_COMM_WORLD));
    }
    for (int k = 0; k < N; k++)
        CHECK(rb[k] == val(prev, rank, k), "Send/Recv: element %d is %d", k, rb[k]);

    /* Isend / Irecv with a receive larger than the message, then Issend. */
    int big[2 * N];
    MPI_Request rq[2];
    /* Statuses, not MPI_STATUSES_IGNORE: GCC 12 reports a false
     * stringop-overflow on MPICH's definition of it. */
    MPI_Status st, sts[2];
    memset(big, 0, sizeof big);
    BUFS(2);
    MPI_OK(MPI_Irecv(big, 2 * N, MPI_INT, prev, 2, MPI_COMM_WORLD, &rq[0]));
    MPI_OK(MPI_Isend(sb, N, MPI_INT, next, 2, MPI_COMM_WORLD, &rq[1]));
    MPI_OK(MPI_Wait(&rq[0], &st));
    MPI_OK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    int got = -1;
    MPI_Get_count(&st, MPI_INT, &got);
    CHECK(got == N && big[N - 1] == val(prev, rank, N - 1) && big[N] == 0, "Isend/Irecv: count %d", got);
    BUFS(2);
    MPI_OK(MPI_Irecv(rb, N, MPI_INT, prev, 3, MPI_COMM_WORLD, &rq[0]));
    MPI_OK(MPI_Issend(sb, N, MPI_INT, next, 3, MPI_COMM_WORLD, &rq[1]));
    MPI_OK(MPI_Waitall(2, rq, sts));
    CHECK(rb[7] == val(prev, rank, 7), "Issend: %d", rb[7]);

    /* Sendrecv and Sendrecv_replace. */
    memset(rb, 0, sizeof rb);
    BUFS(2);
    MPI_OK(MPI_Sendrecv(sb, N, MPI_INT, next, 4, rb, N, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(rb[N - 1] == val(prev, rank, N - 1), "Sendrecv: %d", rb[N - 1]);
    int rep[N];
    memcpy(rep, sb, sizeof rep);
    BUFS(1);
    MPI_OK(MPI_Sendrecv_replace(rep, N, MPI_INT, next, 5, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(rep[3] == val(prev, rank, 3), "Sendrecv_replace: %d", rep[3]);

    /* Matched probe and receive (blocking and non-blocking). */
    MPI_Message msg;
    BUFS(1);
    MPI_OK(MPI_Isend(sb, N, MPI_INT, next, 6, MPI_COMM_WORLD, &rq[1]));
    MPI_OK(MPI_Mprobe(prev, 6, MPI_COMM_WORLD, &msg, &st));
    memset(rb, 0, sizeof rb);
    BUFS(1);
    MPI_OK(MPI_Mrecv(rb, N, MPI_INT, &msg, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    CHECK(rb[5] == val(prev, rank, 5), "Mrecv: %d", rb[5]);
    BUFS(1);
    MPI_OK(MPI_Isend(sb, N, MPI_INT, next, 7, MPI_COMM_WORLD, &rq[1]));
    MPI_OK(MPI_Mprobe(prev, 7, MPI_COMM_WORLD, &msg, &st));
    memset(rb, 0, sizeof rb);
    BUFS(1);
    MPI_OK(MPI_Imrecv(rb, N, MPI_INT, &msg, &rq[0]));
    MPI_OK(MPI_Waitall(2, rq, sts));
    CHECK(rb[9] == val(prev, rank, 9), "Imrecv: %d", rb[9]);
}

/* Completion calls on several requests at once, a freed send request and a
 * receive through a datatype with holes: what staging must get right (the
 * host copy goes back when, and only where, the message landed). */
static void completion_and_holes(void)
{
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    enum { K = 4 };
    int sb[K][N], rb[K][N];
    MPI_Request rr[K], sr[K];
    MPI_Status sts[K];
    for (int j = 0; j < K; j++)
        for (int k = 0; k < N; k++)
            sb[j][k] = val(rank, j, k);
    /* Waitany over receives, the sends completed by Testall polling. */
    memset(rb, 0, sizeof rb);
    for (int j = 0; j < K; j++) {
        BUFS(2);
        MPI_OK(MPI_Irecv(rb[j], N, MPI_INT, prev, 20 + j, MPI_COMM_WORLD, &rr[j]));
        MPI_OK(MPI_Isend(sb[j], N, MPI_INT, next, 20 + j, MPI_COMM_WORLD, &sr[j]));
    }
    for (int got = 0; got < K; got++) {
        int idx = -1;
        MPI_OK(MPI_Waitany(K, rr, &idx, &sts[0]));
        CHECK(idx >= 0 && idx < K && rb[idx][N - 1] == val(prev, idx, N - 1), "Waitany: index %d", idx);
    }
    for (int flag = 0; !flag;)
        MPI_OK(MPI_Testall(K, sr, &flag, sts));
    /* Testsome over receives, Waitsome over sends. */
    memset(rb, 0, sizeof rb);
    for (int j = 0; j < K; j++) {
        BUFS(2);
        MPI_OK(MPI_Irecv(rb[j], N, MPI_INT, prev, 30 + j, MPI_COMM_WORLD, &rr[j]));
        MPI_OK(MPI_Isend(sb[j], N, MPI_INT, next, 30 + j, MPI_COMM_WORLD, &sr[j]));
    }
    for (int left = K; left > 0;) {
        int out = 0, idx[K];
        MPI_OK(MPI_Testsome(K, rr, &out, idx, sts));
        for (int k = 0; out != MPI_UNDEFINED && k < out; k++, left--)
            CHECK(rb[idx[k]][3] == val(prev, idx[k], 3), "Testsome: request %d", idx[k]);
    }
    for (int left = K; left > 0;) {
        int out = 0, idx[K];
        MPI_OK(MPI_Waitsome(K, sr, &out, idx, sts));
        left -= out == MPI_UNDEFINED ? left : out;
    }
    /* A send whose request is freed, then a Test loop on the receive. */
    memset(rb, 0, sizeof rb);
    BUFS(2);
    MPI_OK(MPI_Irecv(rb[0], N, MPI_INT, prev, 40, MPI_COMM_WORLD, &rr[0]));
    MPI_OK(MPI_Isend(sb[1], N, MPI_INT, next, 40, MPI_COMM_WORLD, &sr[0]));
    MPI_OK(MPI_Request_free(&sr[0]));
    for (int flag = 0; !flag;)
        MPI_OK(MPI_Test(&rr[0], &flag, MPI_STATUS_IGNORE));
    CHECK(rb[0][2] == val(prev, 1, 2), "Request_free / Test: %d", rb[0][2]);
    /* Persistent requests, started three times with new data each time. */
    MPI_Request pr[2];
    BUFS(2);
    MPI_OK(MPI_Recv_init(rb[3], N, MPI_INT, prev, 45, MPI_COMM_WORLD, &pr[0]));
    MPI_OK(MPI_Send_init(sb[3], N, MPI_INT, next, 45, MPI_COMM_WORLD, &pr[1]));
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < N; k++)
            sb[3][k] = val(rank, 3, k) + round;
        memset(rb[3], 0, sizeof rb[3]);
        MPI_OK(MPI_Startall(2, pr));
        MPI_OK(MPI_Waitall(2, pr, sts));
        CHECK(rb[3][N - 1] == val(prev, 3, N - 1) + round, "persistent round %d: %d", round, rb[3][N - 1]);
    }
    MPI_OK(MPI_Start(&pr[0]));
    MPI_OK(MPI_Start(&pr[1]));
    for (int flag = 0; !flag;)
        MPI_OK(MPI_Test(&pr[0], &flag, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&pr[1], MPI_STATUS_IGNORE));
    CHECK(rb[3][1] == val(prev, 3, 1) + 2, "persistent with Start / Test: %d", rb[3][1]);
    MPI_OK(MPI_Request_free(&pr[0]));
    MPI_OK(MPI_Request_free(&pr[1]));
    /* Bad arguments reach MPI, which reports them through the call's
     * communicator (errors return here); the interposer does not crash on
     * them, staging or not. */
    MPI_Comm ecomm;
    MPI_Comm_dup(MPI_COMM_WORLD, &ecomm);
    MPI_Comm_set_errhandler(ecomm, MPI_ERRORS_RETURN);
    CHECK(MPI_Send(sb[0], -1, MPI_INT, next, 60, ecomm) != MPI_SUCCESS, "a negative count was accepted");
    CHECK(MPI_Send(sb[0], 1, MPI_DATATYPE_NULL, next, 60, ecomm) != MPI_SUCCESS,
          "MPI_DATATYPE_NULL was accepted");
    BUFS(2);
    MPI_Comm_free(&ecomm);
    /* Every other int of a 2N buffer: the holes must keep their sentinel. */
    MPI_Datatype every_other;
    MPI_Type_vector(N, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int wide[2 * N];
    for (int k = 0; k < 2 * N; k++)
        wide[k] = -7;
    BUFS(2);
    MPI_OK(MPI_Sendrecv(sb[2], N, MPI_INT, next, 50, wide, 1, every_other, prev, 50, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    int holes = 0, data = 0;
    for (int k = 0; k < 2 * N; k++) {
        if (k % 2)
            holes += wide[k] == -7;
        else
            data += wide[k] == val(prev, 2, k / 2);
    }
    CHECK(holes == N && data == N, "vector receive: %d of %d holes kept, %d of %d elements right", holes, N,
          data, N);
    MPI_Type_free(&every_other);
}

/* What a host copy must not get wrong (each once a defect of libptsc-mpi
 * under staging): a non-blocking receive into a column must not write back
 * the interior the program computed meanwhile; a freed send must not wait
 * for its receive; a request that completed with an error must not leave
 * its entry behind for a later request with the same handle; an in-place
 * reduce-scatter reads n blocks; an intercommunicator's blocks are sized by
 * the remote group. */
static void regressions(void)
{
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    MPI_Comm ecomm;
    MPI_Comm_dup(MPI_COMM_WORLD, &ecomm);
    MPI_Comm_set_errhandler(ecomm, MPI_ERRORS_RETURN);

    /* Halo column while the interior is computed. */
    enum { NY = 6, NX = 6 };
    double a[NY][NX], col_out[NY];
    MPI_Datatype col;
    MPI_Type_vector(NY, 1, NX, MPI_DOUBLE, &col);
    MPI_Type_commit(&col);
    memset(a, 0, sizeof a);
    for (int i = 0; i < NY; i++)
        col_out[i] = 1000 * rank + i;
    MPI_Request q[2];
    BUFS(2);
    MPI_OK(MPI_Irecv(&a[0][NX - 1], 1, col, prev, 70, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Isend(col_out, NY, MPI_DOUBLE, next, 70, MPI_COMM_WORLD, &q[1]));
    for (int i = 0; i < NY; i++)
        for (int j = 0; j < NX - 1; j++)
            a[i][j] = 1;
    MPI_Status sts[2];
    MPI_OK(MPI_Waitall(2, q, sts));
    int lost = 0, halo = 0;
    for (int i = 0; i < NY; i++) {
        for (int j = 0; j < NX - 1; j++)
            lost += a[i][j] != 1;
        halo += a[i][NX - 1] == 1000 * prev + i;
    }
    CHECK(lost == 0 && halo == NY, "halo column: %d interior elements reverted, %d of %d halo right", lost,
          halo, NY);
    MPI_Type_free(&col);

    /* A freed rendezvous-size send, then the receive (must not deadlock). */
    enum { BIG = 1 << 16 };
    int *big_out = malloc(BIG * sizeof(int)), *big_in = calloc(BIG, sizeof(int));
    for (int k = 0; k < BIG; k++)
        big_out[k] = val(rank, 0, k % 1000);
    BUFS(2);
    MPI_OK(MPI_Isend(big_out, BIG, MPI_INT, next, 71, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Request_free(&q[0]));
    MPI_OK(MPI_Recv(big_in, BIG, MPI_INT, prev, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(big_in[BIG - 1] == val(prev, 0, (BIG - 1) % 1000), "freed send: %d", big_in[BIG - 1]);
    /* The freed send's buffer may be reused once the peer has it. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* Truncation seen by MPI_Test, then an unrelated receive that may get
     * the freed handle: its data must be its own. Not under MPICH 4.0,
     * which reports a truncated request through MPI_COMM_WORLD's handler
     * and aborts, without any interposer (src/engine.c, PTSC_RECV_GUARD). */
    int mine[4] = {100, 101, 102, 103};
#if defined(MPICH_VERSION)
    mine[0] = 1, mine[3] = 4;
#else
    int four[4] = {1, 2, 3, 4}, two[2] = {0, 0};
    BUFS(2);
    MPI_OK(MPI_Irecv(two, 2, MPI_INT, prev, 72, ecomm, &q[0]));
    MPI_OK(MPI_Send(four, 4, MPI_INT, next, 72, ecomm));
    int flag = 0, trc = MPI_SUCCESS;
    while (!flag && (trc = MPI_Test(&q[0], &flag, &sts[0])) == MPI_SUCCESS)
        ;
    CHECK(trc != MPI_SUCCESS || sts[0].MPI_ERROR != MPI_SUCCESS, "a truncated receive reported success");
    BUFS(2);
    MPI_OK(MPI_Irecv(mine, 4, MPI_INT, prev, 73, MPI_COMM_WORLD, &q[0]));
    MPI_OK(MPI_Send(four, 4, MPI_INT, next, 73, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
#endif
    CHECK(mine[0] == 1 && mine[3] == 4, "a receive after a truncated one: %d %d", mine[0], mine[3]);

    /* Reduce_scatter_block in place: n blocks of 2 from rbuf. */
    int blocks[16];
    for (int k = 0; k < 2 * size; k++)
        blocks[k] = rank * 100 + k;
    BUFS(1);
    MPI_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, blocks, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    int tri = size * (size - 1) / 2;
    CHECK(blocks[0] == 100 * tri + size * 2 * rank && blocks[1] == 100 * tri + size * (2 * rank + 1),
          "Reduce_scatter_block in place: %d %d", blocks[0], blocks[1]);

    /* An intercommunicator: rank 0 against the others; Allgather gets one
     * block per remote rank. */
    MPI_Comm local, inter;
    int side = rank == 0 ? 0 : 1;
    MPI_Comm_split(MPI_COMM_WORLD, side, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, side ? 0 : 1, 74, &inter);
    int remote = 0, mineval = 500 + rank, got[8];
    MPI_Comm_remote_size(inter, &remote);
    for (int k = 0; k < 8; k++)
        got[k] = -1;
    BUFS(2);
    MPI_OK(MPI_Allgather(&mineval, 1, MPI_INT, got, 1, MPI_INT, inter));
    int right = 0;
    for (int k = 0; k < remote; k++)
        right += got[k] == 500 + (side ? k : k + 1);
    CHECK(right == remote && got[remote] == -1, "intercommunicator Allgather: %d of %d blocks right", right,
          remote);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    MPI_Comm_free(&ecomm);
    free(big_out);
    free(big_in);
}

static void collectives(void)
{
    int a[N], b[N * 8], c[N * 8];
    const int root = size - 1;
    MPI_Request rq;

    /* Bcast and Ibcast from the last rank. */
    for (int k = 0; k < N; k++)
        a[k] = rank == root ? val(root, 0, k) : -1;
    BUFS(1);
    MPI_OK(MPI_Bcast(a, N, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(a[N - 1] == val(root, 0, N - 1), "Bcast: %d", a[N - 1]);
    for (int k = 0; k < N; k++)
        a[k] = rank == root ? k + 7 : -1;
    BUFS(1);
    MPI_OK(MPI_Ibcast(a, N, MPI_INT, root, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(a[3] == 10, "Ibcast: %d", a[3]);

    /* Reductions of rank + k: the sum over ranks is size*k + size*(size-1)/2. */
    const int tri = size * (size - 1) / 2;
    for (int k = 0; k < N; k++)
        a[k] = rank + k;
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Allreduce(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(b[5] == size * 5 + tri, "Allreduce: %d", b[5]);
    memcpy(b, a, sizeof a);
    BUFS(1); /* MPI_IN_PLACE is not a buffer */
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(b[6] == size * 6 + tri, "Allreduce in place: %d", b[6]);
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Iallreduce(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(b[7] == size * 7 + tri, "Iallreduce: %d", b[7]);
    memset(b, 0, sizeof b);
    BUFS(rank == root ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Reduce(a, b, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
    CHECK(rank != root || b[8] == size * 8 + tri, "Reduce: %d", b[8]);
    memset(b, 0, sizeof b);
    BUFS(rank == 0 ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Ireduce(a, b, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(rank != 0 || b[9] == size * 9 + tri, "Ireduce: %d", b[9]);
    /* Prefixes: sum over ranks 0..r of (r' + k). */
    const int pre = rank * (rank + 1) / 2, expre = (rank - 1) * rank / 2;
    BUFS(2);
    MPI_OK(MPI_Scan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(b[2] == (rank + 1) * 2 + pre, "Scan: %d", b[2]);
    BUFS(2);
    MPI_OK(MPI_Iscan(a, c, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(c[2] == b[2], "Iscan: %d", c[2]);
    BUFS(2);
    MPI_OK(MPI_Exscan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rank == 0 || b[4] == rank * 4 + expre, "Exscan: %d", b[4]);
    BUFS(2);
    MPI_OK(MPI_Iexscan(a, c, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(rank == 0 || c[4] == b[4], "Iexscan: %d", c[4]);

    /* Reduce_scatter(_block): each rank gets 2 elements of the sum. */
    int part[2], counts[8], displs[8];
    for (int k = 0; k < 2 * size; k++)
        b[k] = rank * 100 + k;
    BUFS(2);
    MPI_OK(MPI_Reduce_scatter_block(b, part, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(part[1] == 100 * tri + size * (2 * rank + 1), "Reduce_scatter_block: %d", part[1]);
    for (int r = 0; r < size; r++)
        counts[r] = 2;
    part[0] = part[1] = 0;
    BUFS(2);
    MPI_OK(MPI_Reduce_scatter(b, part, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(part[0] == 100 * tri + size * (2 * rank), "Reduce_scatter: %d", part[0]);

    /* Gathers and scatters of 2 elements per rank. */
    int two[2] = {val(rank, 0, 0), val(rank, 0, 1)};
    for (int r = 0; r < size; r++) {
        counts[r] = 2;
        displs[r] = 2 * r;
    }
    memset(b, 0, sizeof b);
    BUFS(rank == root ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Gather(two, 2, MPI_INT, b, 2, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(rank != root || b[2 * (size - 1) + 1] == val(size - 1, 0, 1), "Gather");
    memset(b, 0, sizeof b);
    BUFS(rank == 0 ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Igather(two, 2, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(rank != 0 || b[2] == val(1, 0, 0), "Igather");
    memset(b, 0, sizeof b);
    BUFS(rank == root ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Gatherv(two, 2, MPI_INT, b, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(rank != root || b[1] == val(0, 0, 1), "Gatherv");
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Allgather(two, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD));
    CHECK(b[2 * (size - 1)] == val(size - 1, 0, 0), "Allgather");
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Iallgather(two, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(b[3] == val(1, 0, 1), "Iallgather");
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Allgatherv(two, 2, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD));
    CHECK(b[2] == val(1, 0, 0), "Allgatherv");
    for (int k = 0; k < 2 * size; k++)
        c[k] = val(rank, k / 2, k % 2);
    BUFS(rank == root ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Scatter(c, 2, MPI_INT, two, 2, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(two[1] == val(root, rank, 1), "Scatter: %d", two[1]);
    BUFS(rank == 0 ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Iscatter(c, 2, MPI_INT, two, 2, MPI_INT, 0, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(two[0] == val(0, rank, 0), "Iscatter: %d", two[0]);
    BUFS(rank == root ? 2 : 1); /* the other side counts at the root only */
    MPI_OK(MPI_Scatterv(c, counts, displs, MPI_INT, two, 2, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(two[0] == val(root, rank, 0), "Scatterv: %d", two[0]);
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Alltoall(c, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD));
    CHECK(b[2 * root + 1] == val(root, rank, 1), "Alltoall");
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Ialltoall(c, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(b[0] == val(0, rank, 0), "Ialltoall");
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Alltoallv(c, counts, displs, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD));
    CHECK(b[2 * root] == val(root, rank, 0), "Alltoallv");

    /* The non-blocking v forms, the w forms and the non-blocking
     * reduce-scatters (staged block by block like the others). */
    memset(b, 0, sizeof b);
    BUFS(rank == root ? 2 : 1);
    MPI_OK(MPI_Igatherv(two, 2, MPI_INT, b, counts, displs, MPI_INT, root, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(rank != root || b[0] == val(root, 0, 0), "Igatherv: %d", b[0]);
    BUFS(rank == root ? 2 : 1);
    MPI_OK(MPI_Iscatterv(c, counts, displs, MPI_INT, two, 2, MPI_INT, root, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(two[1] == val(root, rank, 1), "Iscatterv: %d", two[1]);
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Iallgatherv(two, 2, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(b[2 * root + 1] == val(root, root, 1), "Iallgatherv: %d", b[2 * root + 1]);
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Ialltoallv(c, counts, displs, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(b[2 * root] == val(root, rank, 0), "Ialltoallv");
    int bdispls[8];
    MPI_Datatype types[8];
    for (int r = 0; r < size; r++) {
        bdispls[r] = displs[r] * (int)sizeof(int);
        types[r] = MPI_INT;
    }
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Alltoallw(c, counts, bdispls, types, b, counts, bdispls, types, MPI_COMM_WORLD));
    CHECK(b[2 * root + 1] == val(root, rank, 1), "Alltoallw");
    memset(b, 0, sizeof b);
    BUFS(2);
    MPI_OK(MPI_Ialltoallw(c, counts, bdispls, types, b, counts, bdispls, types, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(b[0] == val(0, rank, 0), "Ialltoallw");
    for (int k = 0; k < 2 * size; k++)
        b[k] = rank * 100 + k;
    BUFS(2);
    MPI_OK(MPI_Ireduce_scatter_block(b, part, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(part[1] == 100 * tri + size * (2 * rank + 1), "Ireduce_scatter_block: %d", part[1]);
    part[0] = part[1] = 0;
    BUFS(2);
    MPI_OK(MPI_Ireduce_scatter(b, part, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(part[0] == 100 * tri + size * (2 * rank), "Ireduce_scatter: %d", part[0]);

    /* Two non-blocking collectives on a one-process communicator, waited
     * in order: Open MPI returns one shared, already complete request for
     * both, and each must be complete for the program at its own wait. */
    int x1 = rank + 1, x2 = rank + 2, y1 = 0, y2 = 0;
    MPI_Request r1, r2;
    BUFS(2);
    MPI_OK(MPI_Iallreduce(&x1, &y1, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF, &r1));
    BUFS(2);
    MPI_OK(MPI_Iallreduce(&x2, &y2, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF, &r2));
    MPI_OK(MPI_Wait(&r1, MPI_STATUS_IGNORE));
    CHECK(y1 == rank + 1, "Iallreduce on MPI_COMM_SELF, first of two: %d after its wait", y1);
    MPI_OK(MPI_Wait(&r2, MPI_STATUS_IGNORE));
    CHECK(y2 == rank + 2, "Iallreduce on MPI_COMM_SELF, second of two: %d", y2);

    /* A collective's status says nothing of cancellation (its fields are
     * undefined; MPICH 4.0 leaves them unwritten): with the stack below
     * the calls painted with ones, collectives that complete at their
     * start must still deliver their results. */
    for (int i = 0; i < 16; i++) {
        int x = rank + 10 + i, y = 0, z[2] = {0, 0};
        paint_stack();
        BUFS(2);
        MPI_OK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF, &rq));
        paint_stack();
        MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(y == rank + 10 + i, "Iallreduce on MPI_COMM_SELF under a painted stack: %d", y);
        int zz[2] = {x, x + 1};
        paint_stack();
        BUFS(2);
        MPI_OK(MPI_Ireduce_scatter(zz, z, (int[]){2}, MPI_INT, MPI_SUM, MPI_COMM_SELF, &rq));
        paint_stack();
        MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(z[0] == x && z[1] == x + 1, "Ireduce_scatter on MPI_COMM_SELF under a painted stack: %d %d",
              z[0], z[1]);
    }

    /* A v receive with gaps between its blocks, in reverse rank order: the
     * gaps are not the call's, the program writes them while the
     * non-blocking form runs, and they must keep the program's values
     * (staged, only the blocks' bytes go back). */
    int gdispls[8];
    for (int r = 0; r < size; r++)
        gdispls[r] = 3 * (size - 1 - r) + 1;
    two[0] = val(rank, 0, 0);
    two[1] = val(rank, 0, 1);
    for (int k = 0; k < 3 * size + 1; k++)
        b[k] = -5;
    BUFS(2);
    MPI_OK(MPI_Iallgatherv(two, 2, MPI_INT, b, counts, gdispls, MPI_INT, MPI_COMM_WORLD, &rq));
    for (int r = 0; r < size; r++)
        b[gdispls[r] - 1] = 1000 + r;
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int r = 0; r < size; r++) {
        CHECK(b[gdispls[r]] == val(r, 0, 0) && b[gdispls[r] + 1] == val(r, 0, 1),
              "Iallgatherv gaps: block %d", r);
        CHECK(b[gdispls[r] - 1] == 1000 + r, "Iallgatherv gaps: the gap before block %d is %d", r,
              b[gdispls[r] - 1]);
    }
}

/* One-sided: origin and result buffers are synchronised (never staged),
 * the window's own memory at each fence. Each rank exposes W ints; rank r
 * puts into, gets from and accumulates on rank (r + 1) % size. */
static void one_sided(void)
{
    enum { W = 8 };
    int win_mem[W], src[4], got[4], res[2], one = 1, cmp = -1, swapped = 0;
    const int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Win win;
    MPI_Request rq;
    for (int k = 0; k < W; k++)
        win_mem[k] = val(rank, rank, k);
    for (int k = 0; k < 4; k++)
        src[k] = val(rank, to, k);
    /* Some MPI builds have no one-sided component for MPI_Win_create on
     * their machine (Ubuntu's Open MPI 4.1.6 where single-copy transfers are
     * not allowed: MPI_ERR_WIN); the part is skipped there, on every rank. */
    BUFS(1);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int ok = MPI_Win_create(win_mem, sizeof win_mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
             MPI_SUCCESS,
        all_ok = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    BUFS(2);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (ok)
            MPI_Win_free(&win);
        if (rank == 0)
            printf("mpi_interpose: MPI_Win_create is not available with this MPI here; one-sided part "
                   "skipped\n");
        return;
    }
    MPI_OK(MPI_Win_fence(0, win));
    BUFS(1);
    MPI_OK(MPI_Put(src, 2, MPI_INT, to, 0, 2, MPI_INT, win));
    BUFS(1);
    MPI_OK(MPI_Get(got, 2, MPI_INT, to, 4, 2, MPI_INT, win));
    BUFS(1);
    MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, to, 6, 1, MPI_INT, MPI_SUM, win));
    BUFS(1);
    MPI_OK(MPI_Rput(src + 2, 1, MPI_INT, to, 2, 1, MPI_INT, win, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(win_mem[0] == val(from, rank, 0) && win_mem[1] == val(from, rank, 1), "Put: %d %d", win_mem[0],
          win_mem[1]);
    CHECK(win_mem[2] == val(from, rank, 2), "Rput: %d", win_mem[2]);
    CHECK(got[0] == val(to, to, 4) && got[1] == val(to, to, 5), "Get: %d %d", got[0], got[1]);
    CHECK(win_mem[6] == val(rank, rank, 6) + 1, "Accumulate: %d", win_mem[6]);
    BUFS(2);
    MPI_OK(MPI_Get_accumulate(&one, 1, MPI_INT, &res[0], 1, MPI_INT, to, 7, 1, MPI_INT, MPI_SUM, win));
    BUFS(2);
    MPI_OK(MPI_Fetch_and_op(&one, &res[1], MPI_INT, to, 7, MPI_SUM, win));
    BUFS(3);
    MPI_OK(MPI_Compare_and_swap(&one, &cmp, &swapped, MPI_INT, to, 3, win));
    MPI_OK(MPI_Win_fence(0, win));
    /* The two fetches saw 7's value before their own addition, in some order. */
    int base = val(to, to, 7);
    CHECK((res[0] == base && res[1] == base + 1) || (res[1] == base && res[0] == base + 1),
          "Get_accumulate / Fetch_and_op: %d %d", res[0], res[1]);
    CHECK(win_mem[7] == val(rank, rank, 7) + 2, "Fetch_and_op: %d", win_mem[7]);
    CHECK(swapped == val(to, to, 3) && win_mem[3] == val(rank, rank, 3), "Compare_and_swap: %d %d", swapped,
          win_mem[3]);
    MPI_OK(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 8) {
        if (rank == 0)
            fprintf(stderr, "mpi_interpose: FAIL: run it on 2 to 8 ranks\n");
        MPI_Finalize();
        return 1;
    }
    point_to_point();
    completion_and_holes();
    regressions();
    collectives();
    one_sided();

    /* The interposer, as the environment says it must be. */
    const char *want = getenv("MPI_INTERPOSE_EXPECT");
    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    if (want && strcmp(want, "yes") == 0) {
        unsigned long seen = 0, synced = 0, bad = 0;
        CHECK(query != NULL, "libptsc-mpi is not loaded");
        if (query) {
            unsigned long staged = 0;
            int active = query(&seen, &synced, &bad, &staged);
            CHECK(active == 1, "libptsc-mpi loaded but not active");
            CHECK(seen == expect_bufs, "libptsc-mpi saw %lu buffer arguments, the program passed %lu", seen,
                  expect_bufs);
            CHECK(synced == 0 && bad == 0, "host buffers: %lu syncs, %lu failures (expected none)", synced,
                  bad);
            /* PTSC_STAGING=always without a device stages host buffers in
             * the calls that can stage: most of this program's. */
            const char *st = getenv("PTSC_STAGING");
            int want_staged = st && strcmp(st, "always") == 0;
            CHECK(want_staged ? staged >= expect_bufs / 2 : staged == 0, "%lu of %lu buffer arguments staged",
                  staged, expect_bufs);
#if defined(MPIX_CUDA_AWARE_SUPPORT)
            /* Staging on: programs that ask are told to take their device path. */
            if (want_staged)
                CHECK(MPIX_Query_cuda_support() == 1, "MPIX_Query_cuda_support is %d while staging",
                      MPIX_Query_cuda_support());
#endif
            /* Its own calls: naming a stream (and back), the race count
             * (nothing to race with on host buffers). */
            int (*set_stream)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "ptsc_mpi_set_stream");
            unsigned long (*races)(void) = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "ptsc_mpi_races");
            CHECK(set_stream && set_stream(NULL) == MPI_SUCCESS, "ptsc_mpi_set_stream missing or failing");
            CHECK(races && races() == 0, "ptsc_mpi_races missing or nonzero on host buffers");
            if (rank == 0)
                printf("mpi_interpose: interposer active, %lu of %lu buffer arguments seen, %lu staged\n",
                       seen, expect_bufs, staged);
        }
    } else if (want && strcmp(want, "no") == 0) {
        CHECK(query == NULL, "libptsc-mpi is loaded but should not be");
    } else {
        CHECK(0, "set MPI_INTERPOSE_EXPECT to yes or no");
    }

    int all = 0;
    PMPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(all ? "mpi_interpose: %d failed checks\n" : "PASSED mpi_interpose (%d failed checks)\n", all);
    MPI_Finalize();
    return all != 0;
}
