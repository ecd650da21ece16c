/*
 * The interposer's staging of large sparse datatypes: the types whose
 * flattening does not grow with the data.
 *
 *   darray   a darray whose one element spans 72 MB (every other column of
 *            a 3000 x 3000 array of doubles): its runs are read from its
 *            span once (a darray is read back by unpacking).
 *   structs  9 M elements of a struct with padding (two runs each that
 *            do not merge, 18 M runs): one pattern repeated, not a run list of the array.
 *
 * Each type is sent by a rank to itself, with MPI_Sendrecv (the send keeps
 * the caller's type, the receive is packed) and with Isend + Irecv, into a
 * buffer marked beforehand: the type map must carry the sent values and
 * every other byte must keep the mark. Run with PTSC_STAGING=always (host
 * buffers staged; the interposer must have staged) and =never; each prints
 * the seconds of each case, so the two runs compare staged with plain.
 *
 *   mpi_interpose_big
 */
#include <mpi.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "mpi_interpose_big FAIL line %d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            failed++;                                                      \
        }                                                                  \
    } while (0)

enum { MARK = 0xEE };

/* Send `count` elements of `t` from a buffer of `bytes` bytes to this rank
 * into one marked the same size, both ways; `in_map` says whether byte b
 * is in the type map. */
static void exchange(const char *name, MPI_Datatype t, int count, size_t bytes, int (*in_map)(size_t))
{
    unsigned char *s = malloc(bytes), *r = malloc(bytes);
    CHECK(s && r, "%s: no memory for %zu bytes", name, bytes);
    if (!s || !r)
        goto out;
    for (size_t b = 0; b < bytes; b++)
        s[b] = (unsigned char)(b * 131u + (b >> 16));
    for (int how = 0; how < 2; how++) {
        memset(r, MARK, bytes);
        double t0 = MPI_Wtime();
        int rc;
        if (how == 0) {
            rc = MPI_Sendrecv(s, count, t, 0, 7, r, count, t, 0, 7, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        } else {
            MPI_Request q[2];
            rc = MPI_Irecv(r, count, t, 0, 8, MPI_COMM_SELF, &q[0]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(s, count, t, 0, 8, MPI_COMM_SELF, &q[1]);
            for (int i = 0; rc == MPI_SUCCESS && i < 2; i++) /* not Waitall: MPICH's header warns */
                rc = MPI_Wait(&q[i], MPI_STATUS_IGNORE);
        }
        double sec = MPI_Wtime() - t0;
        CHECK(rc == MPI_SUCCESS, "%s (%s): MPI error %d", name, how ? "isend/irecv" : "sendrecv", rc);
        size_t bad = 0, first = bytes;
        for (size_t b = 0; b < bytes; b++)
            if (r[b] != (in_map(b) ? s[b] : MARK)) {
                if (!bad++)
                    first = b;
            }
        CHECK(bad == 0, "%s (%s): %zu bytes wrong, the first at %zu", name, how ? "isend/irecv" : "sendrecv",
              bad, first);
        printf("mpi_interpose_big: %s %s %.3f s\n", name, how ? "isend/irecv" : "sendrecv", sec);
    }
out:
    free(s);
    free(r);
}

#define N 3000
/* darray: columns of an even index of an N x N array of doubles (C order). */
static int darray_map(size_t b) { return (b / sizeof(double)) % N % 2 == 0; }

/* { int a; double b; } resized to 24 bytes: bytes 0..3 and 8..15 of each
 * 24 (no run continues the one before, so that no two merge). */
static int struct_map(size_t b) { return b % 24 < 4 || (b % 24 >= 8 && b % 24 < 16); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    /* Rank 0 of two in the second dimension, cyclic: every other column. */
    int gs[2] = {N, N}, ds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        da[2] = {MPI_DISTRIBUTE_DFLT_DARG, 1}, ps[2] = {1, 2};
    MPI_Datatype darray;
    MPI_Type_create_darray(2, 0, 2, gs, ds, da, ps, MPI_ORDER_C, MPI_DOUBLE, &darray);
    MPI_Type_commit(&darray);
    exchange("darray", darray, 1, (size_t)N * N * sizeof(double), darray_map);
    MPI_Type_free(&darray);

    int bl[2] = {1, 1};
    MPI_Aint at[2] = {0, 8};
    MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE}, st, structs;
    MPI_Type_create_struct(2, bl, at, ty, &st);
    MPI_Type_create_resized(st, 0, 24, &structs);
    MPI_Type_free(&st);
    MPI_Type_commit(&structs);
    const int count = 9000000;
    exchange("structs", structs, count, (size_t)count * 24, struct_map);
    MPI_Type_free(&structs);

    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    const char *staging = getenv("PTSC_STAGING");
    unsigned long staged = 0, calls = 0;
    CHECK(query && query(&calls, NULL, NULL, &staged), "the interposer is not active");
    if (staging && !strcmp(staging, "always"))
        CHECK(staged >= 8, "PTSC_STAGING=always staged %lu buffers, not 8", staged);
    else
        CHECK(staged == 0, "PTSC_STAGING=%s staged %lu buffers", staging ? staging : "(unset)", staged);
    printf(failed ? "mpi_interpose_big: FAILED (%d checks)\n" : "PASSED mpi_interpose_big%.0d\n", failed);
    MPI_Finalize();
    return failed != 0;
}
