/*
 * ptsc_init failures that only one rank sees, or that MPI reports: every
 * rank must return a status (none may hang or abort), the same one, and the
 * detail must name the cause.
 *
 *   mpi_init_fail config   the last rank has a bad PTSC_SYNC_SCOPE: it
 *                          returns PTSC_ERR_CONFIG naming the variable, the
 *                          other ranks PTSC_ERR_CONFIG naming that rank.
 *   mpi_init_fail threads  PTSC_MAX_THREADS=N (argument) with PTSC_COMM=dup:
 *                          either init works on every rank (the MPI has the
 *                          communicators) or every rank returns
 *                          PTSC_ERR_CONFIG naming PTSC_MAX_THREADS.
 *
 * The program initialises MPI itself, so it can compare the ranks' statuses
 * after a failed ptsc_init. A hang is caught by ctest's timeout.
 */
#include <mpi.h>
#include <ptsc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "FAIL [rank %d] %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            failures++;                                                          \
        }                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    int provided, rank, nranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *mode = argc > 1 ? argv[1] : "config";
    int expect_config = 0;
    if (strcmp(mode, "config") == 0) {
        if (rank == nranks - 1)
            setenv("PTSC_SYNC_SCOPE", "bogus", 1);
        expect_config = 1;
    } else if (strcmp(mode, "threads") == 0 && argc > 2) {
        setenv("PTSC_MAX_THREADS", argv[2], 1);
        setenv("PTSC_COMM", "dup", 1);
    } else {
        fprintf(stderr, "usage: mpi_init_fail config | threads N\n");
        return 2;
    }
    int rc = ptsc_init(&argc, &argv);
    char detail[512];
    snprintf(detail, sizeof detail, "%s", ptsc_last_error());
    printf("rank %d: ptsc_init returned %s: %s\n", rank, ptsc_status_name(rc), detail);
    fflush(stdout);

    /* The same status on every rank. */
    int lo, hi;
    MPI_Allreduce(&rc, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&rc, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "ranks returned different statuses (%s .. %s)", ptsc_status_name(lo),
          ptsc_status_name(hi));
    if (expect_config) {
        CHECK(rc == PTSC_ERR_CONFIG, "expected PTSC_ERR_CONFIG, got %s", ptsc_status_name(rc));
        if (rank == nranks - 1)
            CHECK(strstr(detail, "PTSC_SYNC_SCOPE") != NULL, "the detail does not name PTSC_SYNC_SCOPE");
        else {
            char who[32];
            snprintf(who, sizeof who, "rank %d", nranks - 1);
            CHECK(strstr(detail, who) != NULL, "the detail does not name %s", who);
        }
    } else {
        CHECK(rc == PTSC_OK || rc == PTSC_ERR_CONFIG, "expected PTSC_OK or PTSC_ERR_CONFIG, got %s",
              ptsc_status_name(rc));
        if (rc == PTSC_ERR_CONFIG)
            CHECK(strstr(detail, "PTSC_MAX_THREADS") != NULL, "the detail does not name PTSC_MAX_THREADS");
    }
    if (rc == PTSC_OK)
        CHECK(ptsc_finalize() == PTSC_OK, "ptsc_finalize: %s", ptsc_last_error());
    /* MPI still works after a failed init. */
    int one = 1, sum = 0;
    CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS && sum == nranks,
          "MPI_Allreduce after ptsc_init");
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(all ? "FAILED mpi_init_fail %s\n" : "PASSED mpi_init_fail %s\n", mode);
    MPI_Finalize();
    return all != 0;
}
