/*
 * PTSC_TIMEOUT: a blocking call that waits longer than the timeout gets one
 * line on stderr naming the call, the peer, the tag and the bytes. Run with
 * PTSC_TIMEOUT=1 on 2 ranks; ctest checks the lines (PASS_REGULAR_EXPRESSION).
 *
 * Thread 0 of rank 1 receives from thread 1 of rank 0 (tag 77), which sends
 * only after LATE seconds, long after the timeout fired; then it enters a
 * barrier of lane 0 that thread 0 of rank 0 enters only after 2 x LATE seconds. Everything arrives in the
 * end, so the program ends by itself, and the data received is checked. Thread 1 of rank 1 meanwhile
 * exchanges messages that complete at once: no line may name them.
 */
#include "mpi_common.h"

enum { NWORDS = 2000, TAG = 77, QUICK_TAG = 5 };
static const double LATE = 2.0; /* seconds; the test runs with PTSC_TIMEOUT=1 */

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int body(ptsc_ctx_t *ctx, void *arg)
{
    (void)arg;
    int t = -1;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    static int out[NWORDS], in[NWORDS];
    if (g_rank == 0 && t == 1) {
        for (int k = 0; k < NWORDS; k++)
            out[k] = 3 * k + 1;
        sleep_s(LATE);
        CHECK_OK(ptsc_send(ctx, out, NWORDS, MPI_INT, 1, 0, TAG));
    } else if (g_rank == 1 && t == 0) {
        double t0 = now_s();
        ptsc_info_t info;
        CHECK_OK(ptsc_recv_info(ctx, in, NWORDS, MPI_INT, 0, 1, TAG, &info));
        CHECK(now_s() - t0 > LATE - 0.5, "the receive returned after %.2f s, before the late send",
              now_s() - t0);
        CHECK(info.bytes == sizeof in, "received %zu bytes, expected %zu", info.bytes, sizeof in);
        for (int k = 0; k < NWORDS; k++)
            if (in[k] != 3 * k + 1) {
                CHECK(0, "word %d is %d, expected %d", k, in[k], 3 * k + 1);
                break;
            }
    } else if (t == 1) {
        /* Rank 1, thread 1: quick round trips with rank 0 thread 0... */
        int v = 0;
        for (int i = 0; i < 20; i++) {
            CHECK_OK(ptsc_recv(ctx, &v, 1, MPI_INT, 0, 0, QUICK_TAG));
            CHECK(v == i, "quick message %d carries %d", i, v);
            CHECK_OK(ptsc_send(ctx, &v, 1, MPI_INT, 0, 0, QUICK_TAG));
        }
    }
    if (g_rank == 0 && t == 0) {
        /* ...which thread 0 of rank 0 drives before its late barrier. */
        int v = -1;
        for (int i = 0; i < 20; i++) {
            CHECK_OK(ptsc_send(ctx, &i, 1, MPI_INT, 1, 1, QUICK_TAG));
            CHECK_OK(ptsc_recv(ctx, &v, 1, MPI_INT, 1, 1, QUICK_TAG));
            CHECK(v == i, "quick reply %d carries %d", i, v);
        }
        sleep_s(2 * LATE); /* rank 1's thread 0 reaches the barrier after LATE */
    }
    if (t == 0)
        CHECK_OK(ptsc_barrier(ctx));
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    int nranks = 0;
    test_init(&argc, &argv, &nranks);
    if (nranks != 2) {
        if (g_rank == 0)
            fprintf(stderr, "FAIL mpi_timeout needs exactly 2 ranks, got %d\n", nranks);
        return 1;
    }
    const char *timeout = getenv("PTSC_TIMEOUT");
    CHECK(timeout && atoi(timeout) == 1, "run with PTSC_TIMEOUT=1 (got %s)", timeout ? timeout : "unset");
    int rc = ptsc_omp_run(2, body, NULL);
    CHECK(rc == PTSC_OK, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    return test_finish("mpi_timeout");
}
