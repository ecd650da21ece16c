/*
 * The race check (PTSC_SYNC_CHECK=warn|error) with scope none: a device
 * buffer handed to MPI while the bound stream still runs the kernel that
 * writes it must be reported. One rank, sending to itself. Run twice by
 * ctest: `test_gpu_racecheck warn` and `... error`, with PTSC_SYNC_CHECK
 * and PTSC_SYNC_SCOPE=none set in the environment.
 *
 *   error: ptsc_isend returns PTSC_ERR_RACE, sends nothing, counts the race.
 *   warn:  ptsc_isend succeeds (a warning is logged) and counts the race.
 *   both:  once the stream is idle, no race is reported.
 *
 * The same with the kernel on the legacy default stream (a default-compiled
 * `<<<g, b>>>` launch, gpu_kernels_legacy.cu) instead of the bound stream:
 * the check records an event on the bound stream, which waits for earlier
 * legacy-stream work, so this producer is seen too (a cudaStreamQuery of
 * the bound stream would call it idle).
 *
 * On the staging path there is no race to report: the staging copy is
 * queued on the bound stream, behind the kernel (and behind earlier
 * legacy-stream work), so the data is ordered; the test then expects no
 * report and correct data, for both producers.
 *
 * Not seen, by design (docs/design.md): kernels on non-blocking streams and
 * on other threads' streams; not tested here.
 */
#include "gpu_test.h"

#define N 256

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_racecheck");
    if (rc)
        return rc;
    int want_error = argc > 1 && strcmp(argv[1], "error") == 0;
    setenv("PTSC_SYNC_CHECK", want_error ? "error" : "warn", 1);
    setenv("PTSC_SYNC_SCOPE", "none", 1);
    setenv("PTSC_MAX_THREADS", "1", 1);
    /* The race check watches direct hand-overs: on a CUDA-aware MPI, send
     * every size directly (small ones would otherwise be staged). */
    setenv("PTSC_DIRECT_MIN", "0", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    int staging = 0;
    const char *path = gt_path(&staging);
    ptsc_ctx_t *ctx = NULL;
    GT_OK(ptsc_thread_attach(0, &ctx));
    if (ctx == NULL) {
        ptsc_finalize();
        return 1;
    }
    cudaStream_t s = gt_stream(ctx);
    int *d = NULL, h[N];
    GT_CUDA(cudaMalloc((void **)&d, N * sizeof(int)));
    ptsc_stats_t st;

    /* Two producers of a 300 ms kernel that writes the buffer: the bound
     * stream, then the legacy default stream. Each is followed by a send
     * from the idle GPU, which must not be reported. */
    unsigned long long races = 0;
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *what = legacy ? "legacy default stream" : "bound stream";
        int seed = 42 + legacy, tag = 1 + 2 * legacy;
        if (legacy)
            GT_CUDA(ptsc_tk_spin_fill_default(d, N, seed, 300000));
        else
            GT_CUDA(ptsc_tk_spin_fill(d, N, seed, 300000, s));
        ptsc_request_t req = PTSC_REQUEST_NULL;
        int r = ptsc_isend(ctx, d, N, MPI_INT, 0, 0, tag, &req);
        GT_OK(ptsc_ctx_stats(ctx, &st));
        if (staging) {
            GT_RC(r, PTSC_OK);
            GT_CHECK(st.races == races, "%s: staged send reported %llu races", what,
                     (unsigned long long)(st.races - races));
        } else if (want_error) {
            GT_RC(r, PTSC_ERR_RACE);
            GT_CHECK(req == PTSC_REQUEST_NULL, "%s: a refused send returned a request", what);
            GT_CHECK(st.races == races + 1, "%s: races counter %llu, expected %llu", what,
                     (unsigned long long)st.races, races + 1);
            printf("error mode detail (%s): \"%s\"\n", what, ptsc_last_error());
        } else {
            GT_RC(r, PTSC_OK);
            GT_CHECK(st.races == races + 1, "%s: races counter %llu, expected %llu", what,
                     (unsigned long long)st.races, races + 1);
        }
        races = st.races;
        if (r == PTSC_OK) {
            GT_OK(ptsc_recv(ctx, h, N, MPI_INT, 0, 0, tag));
            GT_OK(ptsc_wait(&req));
            if (staging)
                GT_CHECK(gt_count_bad_host(h, N, seed) == 0,
                         "%s: staged send of a busy buffer delivered stale data", what);
        }
        GT_CUDA(cudaDeviceSynchronize());

        /* Idle GPU: no report, correct data. */
        r = ptsc_isend(ctx, d, N, MPI_INT, 0, 0, tag + 1, &req);
        GT_RC(r, PTSC_OK);
        if (r == PTSC_OK) {
            GT_OK(ptsc_recv(ctx, h, N, MPI_INT, 0, 0, tag + 1));
            GT_OK(ptsc_wait(&req));
            GT_CHECK(gt_count_bad_host(h, N, seed) == 0, "%s: data sent from an idle GPU is wrong", what);
        }
        ptsc_stats_t st2;
        GT_OK(ptsc_ctx_stats(ctx, &st2));
        GT_CHECK(st2.races == races, "%s: a send from an idle GPU was reported as a race", what);
        printf("race check %s, %s path, producer on the %s: busy send -> %s, races counted %llu\n",
               want_error ? "error" : "warn", path, what,
               staging      ? "ordered (no race)"
               : want_error ? "PTSC_ERR_RACE"
                            : "warning",
               (unsigned long long)st2.races);
    }

    GT_CUDA(cudaFree(d));
    GT_OK(ptsc_thread_detach());
    GT_OK(ptsc_finalize());
    return gt_finish(want_error ? "test_gpu_racecheck(error)" : "test_gpu_racecheck(warn)");
}
