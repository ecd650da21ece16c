/*
 * A message for thread j is never received by thread k != j. Threads attach
 * with ptsc_omp_attach inside the program's own OpenMP region.
 *
 * Part 1: every thread posts, for one tag, a receive from every (rank,
 * thread); then every thread sends to every (rank, thread) with that same
 * tag, each payload naming its destination. Wrong isolation shows up as a
 * payload naming another destination.
 *
 * Part 2: every thread posts a receive from (rank 0, thread 0) with a fresh
 * tag, but (rank 0, thread 0) sends only to thread 0 of each rank. Threads
 * other than 0 must still find their receive incomplete after thread 0 got
 * its message; then the remaining messages are sent and all complete.
 */
#include "mpi_common.h"

#include <omp.h>

enum { TAG1 = 21, TAG2 = 22, WORDS = 64 };

static int R, T;

/* All threads of all ranks have reached this point. */
static int everyone(ptsc_ctx_t *ctx)
{
#pragma omp barrier
    CHECK_OK(ptsc_barrier(ctx));
#pragma omp barrier
    return PTSC_OK;
}

static int part1(ptsc_ctx_t *ctx)
{
    int P = R * T, n = WORDS;
    uint32_t *rb = malloc((size_t)P * n * sizeof *rb), *sb = malloc((size_t)P * n * sizeof *sb);
    ptsc_request_t *req = malloc((size_t)(2 * P) * sizeof *req);
    /* Post in reverse so that, on a shared queue, the later sender's message
     * would meet the wrong receive first. */
    for (int g = P - 1; g >= 0; g--) {
        memset(rb + (size_t)g * n, 0xEE, (size_t)n * sizeof *rb);
        CHECK_OK(ptsc_irecv(ctx, rb + (size_t)g * n, n, MPI_UINT32_T, g / T, g % T, TAG1, &req[g]));
    }
    CHECK_OK(everyone(ctx));
    for (int g = 0; g < P; g++) {
        fill(sb + (size_t)g * n, n, g_rank, g_me, g / T, g % T, 100);
        CHECK_OK(ptsc_isend(ctx, sb + (size_t)g * n, n, MPI_UINT32_T, g / T, g % T, TAG1, &req[P + g]));
    }
    CHECK_OK(ptsc_waitall(2 * P, req));
    for (int g = 0; g < P; g++)
        VERIFY(rb + (size_t)g * n, n, g / T, g % T, g_rank, g_me, 100);
    free(rb);
    free(sb);
    free(req);
    return PTSC_OK;
}

static int part2(ptsc_ctx_t *ctx)
{
    uint32_t in[WORDS], out[WORDS];
    ptsc_request_t r = PTSC_REQUEST_NULL;
    memset(in, 0xEE, sizeof in);
    CHECK_OK(ptsc_irecv(ctx, in, WORDS, MPI_UINT32_T, 0, 0, TAG2, &r));
    CHECK_OK(everyone(ctx));
    if (g_rank == 0 && g_me == 0) {
        for (int d = 0; d < R; d++) {
            fill(out, WORDS, 0, 0, d, 0, 200);
            CHECK_OK(ptsc_send(ctx, out, WORDS, MPI_UINT32_T, d, 0, TAG2));
        }
    }
    if (g_me == 0) {
        CHECK_OK(ptsc_wait(&r));
        VERIFY(in, WORDS, 0, 0, g_rank, 0, 200);
    }
    /* Thread 0 of every rank has its message: anything that leaked to another
     * thread has been matched by now, if it ever will be. */
    CHECK_OK(everyone(ctx));
    if (g_me != 0) {
        int done = -1;
        for (int i = 0; i < 100; i++) {
            CHECK_OK(ptsc_test(&r, &done));
            if (done)
                break;
        }
        CHECK(
            !done,
            "receive from (0,0) completed although (0,0) sent only to thread 0; got header (%d,%d)->(%d,%d)",
            (int)in[0], (int)in[1], (int)in[2], (int)in[3]);
    }
    CHECK_OK(everyone(ctx));
    if (g_rank == 0 && g_me == 0) {
        for (int d = 0; d < R; d++)
            for (int j = 1; j < T; j++) {
                fill(out, WORDS, 0, 0, d, j, 201);
                CHECK_OK(ptsc_send(ctx, out, WORDS, MPI_UINT32_T, d, j, TAG2));
            }
    }
    if (g_me != 0 && r != PTSC_REQUEST_NULL) {
        CHECK_OK(ptsc_wait(&r));
        VERIFY(in, WORDS, 0, 0, g_rank, g_me, 201);
    }
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
#pragma omp parallel num_threads(T)
    {
        ptsc_ctx_t *ctx = NULL;
        g_me = omp_get_thread_num();
        int rc = ptsc_omp_attach(&ctx);
        if (rc != PTSC_OK || omp_get_num_threads() != T) {
            /* Without every thread the exchanges below would hang: stop. */
            test_fail(__FILE__, __LINE__, "ptsc_omp_attach: %s: %s (team of %d)", ptsc_status_name(rc),
                      ptsc_last_error(), omp_get_num_threads());
            fflush(stderr);
            exit(1);
        }
        int index = -1;
        ptsc_ctx_index(ctx, &index);
        if (index != g_me)
            test_fail(__FILE__, __LINE__, "ptsc_omp_attach gave index %d to OpenMP thread %d", index, g_me);
        if (part1(ctx) == PTSC_OK)
            part2(ctx);
        rc = ptsc_thread_detach();
        if (rc != PTSC_OK)
            test_fail(__FILE__, __LINE__, "ptsc_thread_detach: %s: %s", ptsc_status_name(rc),
                      ptsc_last_error());
    }
    return test_finish("mpi_isolation");
}
