/*
 * The agent drives a plain receive that MPI holds (no staging, no framing):
 * rank 1 ptsc_irecv's a 4 MiB host message and then sleeps (no ptsc or MPI
 * call), rank 0 ptsc_isend's it and waits. Where MPI moves a large message
 * only inside calls on both sides (Open MPI's shared memory without its
 * single-copy mechanism, OMPI_MCA_btl_vader_single_copy_mechanism=none,
 * as ctest runs it), the send completes during the receiver's sleep only if
 * the receiver's agent calls MPI for the receive. Until the agent counted
 * such a receive by its matched size, it saw one of size 0 (small: MPI
 * takes it at once) and left it to its owner's wait.
 *
 *   mpiexec -n 2 mpi_drive_recv [SLEEP_SECONDS]
 *
 * PTSC_PROGRESS=thread (default): rank 0's wait must end before half the
 * sleep. MPI_DRIVE_RECV_EXPECT=slow (ctest's PTSC_PROGRESS=caller run, the
 * control): it must last past half the sleep, which shows that this MPI
 * needs the receiver's calls and so that the first run can fail. Every byte
 * is checked on rank 1.
 */
#include "mpi_common.h"

#include <unistd.h>

#define BYTES ((size_t)4 << 20)

int main(int argc, char **argv)
{
    int nranks = 0;
    test_init(&argc, &argv, &nranks);
    double sleep_s = argc > 1 ? atof(argv[1]) : 3.0;
    const char *expect = getenv("MPI_DRIVE_RECV_EXPECT");
    int slow = expect && !strcmp(expect, "slow");
    if (nranks != 2 || sleep_s < 0.5) {
        if (g_rank == 0)
            fprintf(stderr,
                    "FAIL mpi_drive_recv: 2 ranks and a sleep of 0.5 s or more (got %d ranks, %.1f s)\n",
                    nranks, sleep_s);
        return 1;
    }
    ptsc_ctx_t *ctx = NULL;
    CHECK_OK(ptsc_thread_attach(0, &ctx));
    unsigned char *buf = malloc(BYTES);
    CHECK(buf != NULL, "out of memory");
    for (size_t i = 0; i < BYTES; i++)
        buf[i] = g_rank == 0 ? (unsigned char)(i * 7 + 3) : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    ptsc_request_t r;
    if (g_rank == 1) {
        CHECK_OK(ptsc_irecv(ctx, buf, (int)BYTES, MPI_BYTE, 0, 0, 9, &r));
        struct timespec ts = {(time_t)sleep_s, (long)((sleep_s - (double)(time_t)sleep_s) * 1e9)};
        nanosleep(&ts, NULL); /* no ptsc or MPI call meanwhile */
        CHECK_OK(ptsc_wait(&r));
        size_t bad = 0;
        for (size_t i = 0; i < BYTES; i++)
            bad += buf[i] != (unsigned char)(i * 7 + 3);
        CHECK(bad == 0, "%zu of %zu received bytes wrong", bad, BYTES);
    } else {
        usleep(100000); /* the receive is posted (and matched by the agent) first */
        double t0 = now_s();
        CHECK_OK(ptsc_isend(ctx, buf, (int)BYTES, MPI_BYTE, 1, 0, 9, &r));
        CHECK_OK(ptsc_wait(&r));
        double took = now_s() - t0;
        printf("mpi_drive_recv: the send of %zu bytes took %.3f s while the receiver slept %.1f s (expected: "
               "%s)\n",
               BYTES, took, sleep_s, slow ? "past half the sleep" : "before half the sleep");
        if (slow)
            CHECK(took > sleep_s / 2,
                  "the send completed in %.3f s without the receiver's calls: this MPI does "
                  "not need them, so the agent's part is not shown",
                  took);
        else
            CHECK(took < sleep_s / 2,
                  "the send took %.3f s: the receiver's agent did not drive its receive while it slept",
                  took);
    }
    free(buf);
    CHECK_OK(ptsc_thread_detach());
    return test_finish("mpi_drive_recv");
}
