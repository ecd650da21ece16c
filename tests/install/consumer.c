/* Links against an installed ptsc and makes real MPI calls through it, so a
 * program that loads a second MPI (or the wrong one) fails here. Run under
 * mpiexec -n 2: ptsc_init, an MPI_Allreduce over MPI_COMM_WORLD, a ring of
 * ptsc_sendrecv between thread 0 of every rank, ptsc_finalize. Rank 0
 * prints what proves the right library and MPI loaded. */
#include <ptsc.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer: %s: %s: %s\n", what, ptsc_status_name(rc), ptsc_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int major = -1;
    ptsc_version(&major, NULL, NULL);
    if (major != PTSC_VERSION_MAJOR || strcmp(ptsc_version_string(), PTSC_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: header %s but library %s\n", PTSC_VERSION_STRING, ptsc_version_string());
        return 1;
    }
    int rc = ptsc_init(&argc, &argv);
    if (rc != PTSC_OK)
        return fail("ptsc_init", rc);
    int rank = -1, nranks = 0;
    ptsc_ctx_t *ctx = NULL;
    if ((rc = ptsc_rank(&rank)) != PTSC_OK || (rc = ptsc_size(&nranks, NULL)) != PTSC_OK)
        return fail("ptsc_rank/ptsc_size", rc);
    if ((rc = ptsc_thread_attach(0, &ctx)) != PTSC_OK)
        return fail("ptsc_thread_attach", rc);

    int one = 1, sum = 0;
    if (MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS || sum != nranks) {
        fprintf(stderr, "consumer: MPI_Allreduce gave %d, want %d\n", sum, nranks);
        return 1;
    }
    int from = -1, prev = (rank + nranks - 1) % nranks;
    rc = ptsc_sendrecv(ctx, &rank, 1, MPI_INT, (rank + 1) % nranks, 0, 7, &from, 1, MPI_INT, prev, 0, 7);
    if (rc != PTSC_OK)
        return fail("ptsc_sendrecv", rc);
    if (from != prev) {
        fprintf(stderr, "consumer: rank %d received %d, want %d\n", rank, from, prev);
        return 1;
    }

    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0'; /* the first part names the MPI and its version */
    if (rank == 0)
        printf("consumer: ptsc %s, %s, %d ranks, allreduce %d, ring ok, MPI: %s\n", ptsc_version_string(),
               ptsc_status_name(PTSC_ERR_TAG), nranks, sum, lib);
    if ((rc = ptsc_thread_detach()) != PTSC_OK)
        return fail("ptsc_thread_detach", rc);
    if ((rc = ptsc_finalize()) != PTSC_OK)
        return fail("ptsc_finalize", rc);
    return 0;
}
