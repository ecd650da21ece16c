/*
 * Derived datatypes over device memory through libptsc-mpi: a plain MPI +
 * CUDA program (no ptsc call, no kernel) sends and receives sparse types
 * of a device matrix, where the interposer copies the type map's runs
 * between the device and its host copies (cudaMemcpy2DAsync per group of
 * equal runs: src/flatten.c, src/interpose.c).
 *
 * Two ranks. Per datatype (a column, a 2-d subarray, an indexed type with
 * uneven blocks, a resized struct of a double and an int, count 3), each
 * receive buffer is first set to a marker on the device; then:
 *   p2p    rank 0 MPI_Send, rank 1 MPI_Recv;
 *   ip2p   rank 1 MPI_Isend, rank 0 MPI_Irecv, MPI_Wait;
 *   self   MPI_Sendrecv of each rank to itself;
 *   bcast  MPI_Bcast from rank 0 into the receive buffer of rank 1 (rank 0
 *          sends from its send buffer's copy: in place).
 * The whole receive allocation is copied back to the host and compared
 * byte for byte with what MPI_Unpack of the sent bytes (MPI_Pack of a host
 * copy of the send matrix) gives over the same marker: the type map's
 * bytes must hold the data and every other byte the marker.
 *
 * Run with PTSC_STAGING=always (every device buffer staged, also on a
 * CUDA-aware MPI): the interposer must be active and have staged. Exits 77
 * (skipped) without a device.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 256
#define COLS 192
#define MARK 0xA5

static int rank, failed;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "test_gpu_interpose_dtype [rank %d] FAIL line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            failed++;                                                                             \
        }                                                                                         \
    } while (0)
#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s failed", #call)
#define MPI_OK(call) CHECK((call) == MPI_SUCCESS, "%s failed", #call)

enum { NTYPES = 4 };
static const char *type_name[NTYPES] = {"column", "subarray", "indexed", "struct x3"};

/* Datatype k (committed) and its count. */
static MPI_Datatype make_type(int k, int *count)
{
    MPI_Datatype t = MPI_DATATYPE_NULL, s;
    *count = 1;
    if (k == 0) { /* column 5 of the row-major matrix of doubles */
        MPI_Datatype col;
        MPI_Aint at = 5 * (MPI_Aint)sizeof(double);
        MPI_Type_vector(ROWS, 1, COLS, MPI_DOUBLE, &col);
        MPI_Type_create_hindexed_block(1, 1, &at, col, &t);
        MPI_Type_free(&col);
    } else if (k == 1) {
        int sizes[2] = {ROWS, COLS}, sub[2] = {ROWS / 2, COLS / 3}, starts[2] = {ROWS / 4, COLS / 5};
        MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
    } else if (k == 2) { /* ints of the matrix's bytes, blocks of 1..37 at growing gaps */
        int len[40], disp[40], at = 3;
        for (int i = 0; i < 40; i++) {
            len[i] = 1 + (i * 7) % 37;
            disp[i] = at;
            at += len[i] + 5 + i * 11;
        }
        MPI_Type_indexed(40, len, disp, MPI_INT, &t);
    } else { /* {double at 0, int at 12} in 40-byte records, 3 of them */
        int len[2] = {1, 1};
        MPI_Aint disp[2] = {0, 12};
        MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT};
        MPI_Type_create_struct(2, len, disp, types, &s);
        MPI_Type_create_resized(s, 0, 40, &t);
        MPI_Type_free(&s);
        *count = 3;
    }
    MPI_Type_commit(&t);
    return t;
}

/* What a receive of (count, t) into `mark` bytes of marker gives when the
 * sender sent (count, t) of `send`: MPI_Pack, then MPI_Unpack (neither
 * touches the interposer's staging: host memory, no communication). */
static void expected(const unsigned char *send, int count, MPI_Datatype t, unsigned char *out, size_t n)
{
    int psize = 0, pos = 0;
    MPI_Pack_size(count, t, MPI_COMM_SELF, &psize);
    char *packed = malloc((size_t)psize);
    memset(out, MARK, n);
    MPI_Pack(send, count, t, packed, psize, &pos, MPI_COMM_SELF);
    int upos = 0;
    MPI_Unpack(packed, pos, &upos, out, count, t, MPI_COMM_SELF);
    free(packed);
}

/* The receive buffer on the device against the expected bytes. */
static void compare(const void *dev, const unsigned char *want, size_t n, const char *what, int k)
{
    unsigned char *got = malloc(n);
    CUDA_OK(cudaMemcpy(got, dev, n, cudaMemcpyDeviceToHost));
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            bad++;
            if (first == n)
                first = i;
        }
    CHECK(bad == 0, "%s, %s: %zu bytes differ, the first at byte %zu (0x%02x, expected 0x%02x)", what,
          type_name[k], bad, first, first < n ? got[first] : 0, first < n ? want[first] : 0);
    free(got);
}

int main(int argc, char **argv)
{
    int provided = 0, nranks = 0, ndev = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0)
            printf("SKIPPED test_gpu_interpose_dtype: no CUDA device\n");
        MPI_Finalize();
        return 77;
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "test_gpu_interpose_dtype: FAIL: run it on 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    const size_t n = (size_t)ROWS * COLS * sizeof(double);
    unsigned char *host = malloc(n), *want = malloc(n);
    void *dsend = NULL, *drecv = NULL;
    CUDA_OK(cudaMalloc(&dsend, n));
    CUDA_OK(cudaMalloc(&drecv, n));
    for (size_t i = 0; i < n; i++) /* each rank's own data: a received byte says where it came from */
        host[i] = (unsigned char)(i * 131 + (size_t)rank * 71 + 1);
    CUDA_OK(cudaMemcpy(dsend, host, n, cudaMemcpyHostToDevice));
    unsigned char *peer = malloc(n); /* the other rank's send matrix, as the host knows it */
    for (size_t i = 0; i < n; i++)
        peer[i] = (unsigned char)(i * 131 + (size_t)(1 - rank) * 71 + 1);

    for (int k = 0; k < NTYPES; k++) {
        int count;
        MPI_Datatype t = make_type(k, &count);
        /* p2p: 0 -> 1 */
        CUDA_OK(cudaMemset(drecv, MARK, n));
        if (rank == 0)
            MPI_OK(MPI_Send(dsend, count, t, 1, 10 + k, MPI_COMM_WORLD));
        else {
            MPI_OK(MPI_Recv(drecv, count, t, 0, 10 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            expected(peer, count, t, want, n);
            compare(drecv, want, n, "MPI_Send/MPI_Recv", k);
        }
        /* ip2p: 1 -> 0, non-blocking both sides */
        CUDA_OK(cudaMemset(drecv, MARK, n));
        MPI_Request r;
        if (rank == 1)
            MPI_OK(MPI_Isend(dsend, count, t, 0, 20 + k, MPI_COMM_WORLD, &r));
        else
            MPI_OK(MPI_Irecv(drecv, count, t, 1, 20 + k, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        if (rank == 0) {
            expected(peer, count, t, want, n);
            compare(drecv, want, n, "MPI_Isend/MPI_Irecv", k);
        }
        /* self */
        CUDA_OK(cudaMemset(drecv, MARK, n));
        MPI_OK(MPI_Sendrecv(dsend, count, t, rank, 30 + k, drecv, count, t, rank, 30 + k, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
        expected(host, count, t, want, n);
        compare(drecv, want, n, "MPI_Sendrecv to itself", k);
        /* bcast from rank 0 */
        CUDA_OK(cudaMemset(drecv, MARK, n));
        MPI_OK(MPI_Bcast(rank == 0 ? dsend : drecv, count, t, 0, MPI_COMM_WORLD));
        if (rank == 1) {
            expected(peer, count, t, want, n);
            compare(drecv, want, n, "MPI_Bcast", k);
        }
        MPI_Type_free(&t);
    }

    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    unsigned long staged = 0;
    CHECK(query && query(NULL, NULL, NULL, &staged) == 1, "libptsc-mpi is not active");
    CHECK(staged > 0, "nothing was staged (run it with PTSC_STAGING=always)");
    cudaFree(dsend);
    cudaFree(drecv);
    free(host);
    free(want);
    free(peer);
    int all = 0;
    MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("PASSED test_gpu_interpose_dtype (%d datatypes, 4 paths, staged %lu buffers on rank 0)\n",
               NTYPES, staged);
    MPI_Finalize();
    return all ? 1 : 0;
}
