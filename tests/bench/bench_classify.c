/*
 * bench_classify: the price of knowing what a buffer is.
 *
 * ptsc must classify every buffer it hands to MPI (device, managed, pinned
 * or pageable host) to know whether it needs a sync or staging. The raw
 * answer, cudaPointerGetAttributes, costs 140-230 ns on an H200; ptsc keeps
 * a per-thread cache of the classes where a stale answer is harmless.
 * Reported per class, in ns per call: ptsc_mem_class on a warm cache, on a
 * miss (after ptsc_mem_forget, whose atomic increment is included), and the
 * raw call, with the raw / cached ratio. Pageable host memory is never
 * cached (by design: it may be registered or reused at any time), so there
 * ptsc pays the raw price.
 *
 * One process is enough (it runs as an MPI singleton); under mpiexec every
 * rank measures and rank 0 prints.
 *
 *   bench_classify [--calls N] [--quick]
 */
#include "bench_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    void *p;
} buffer_t;

static double ns_per_call(double sec, long calls) { return 1e9 * sec / (double)calls; }

static double time_cached(const void *p, long calls)
{
    ptsc_memclass_t c;
    BENCH_CHECK(ptsc_mem_class(p, &c)); /* fill the cache */
    double t0 = bench_now();
    for (long i = 0; i < calls; i++)
        BENCH_CHECK(ptsc_mem_class(p, &c));
    return ns_per_call(bench_now() - t0, calls);
}

static double time_miss(const void *p, long calls)
{
    ptsc_memclass_t c;
    double t0 = bench_now();
    for (long i = 0; i < calls; i++) {
        BENCH_CHECK(ptsc_mem_forget());
        BENCH_CHECK(ptsc_mem_class(p, &c));
    }
    return ns_per_call(bench_now() - t0, calls);
}

/* Negative when the raw call is not available or fails for this pointer. */
static double time_raw(const void *p, long calls)
{
    int type;
    if (bench_gpu_pointer_attr(p, &type) != PTSC_OK)
        return -1;
    double t0 = bench_now();
    for (long i = 0; i < calls; i++)
        if (bench_gpu_pointer_attr(p, &type) != PTSC_OK)
            return -1;
    return ns_per_call(bench_now() - t0, calls);
}

int main(int argc, char **argv)
{
    BENCH_CHECK(ptsc_init(&argc, &argv));
    long calls = 1000000;
    int rank;
    BENCH_CHECK(ptsc_rank(&rank));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            calls = 20000;
        } else if (!strcmp(argv[i], "--calls") && i + 1 < argc &&
                   (calls = strtol(argv[i + 1], NULL, 0)) > 0) {
            i++;
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: bench_classify [--calls N] [--quick]\n");
            ptsc_finalize();
            return 2;
        }
    }
    const size_t bytes = (size_t)1 << 20;
    const int gpu = bench_gpu_available();
    buffer_t bufs[4] = {{"device (cudaMalloc)", NULL},
                        {"managed (cudaMallocManaged)", NULL},
                        {"pinned (cudaMallocHost)", NULL},
                        {"pageable host (malloc)", NULL}};
    if (gpu) {
        BENCH_CHECK(bench_gpu_malloc(&bufs[0].p, bytes));
        BENCH_CHECK(bench_gpu_managed(&bufs[1].p, bytes));
        BENCH_CHECK(bench_gpu_pinned(&bufs[2].p, bytes));
    }
    if (!(bufs[3].p = malloc(bytes))) {
        fprintf(stderr, "bench_classify: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    if (rank == 0) {
        printf("## bench_classify: buffer classification cost, %ld calls each\n\n", calls);
        int staging = 0;
        BENCH_CHECK(ptsc_features(NULL, NULL, &staging));
        if (gpu)
            printf("Staging is %s in this run, so pinned buffers are %s (see src/memory.c).\n\n",
                   staging ? "on" : "off", staging ? "classified afresh every call" : "cached");
        else
            printf(
                "No CUDA device (or CUDA not built): only pageable host memory exists, ptsc answers without "
                "any CUDA call, and the raw call is not measured.\n\n");
        printf("| buffer | ptsc_mem_class, cached (ns) | ptsc_mem_class, miss (ns) | "
               "cudaPointerGetAttributes (ns) "
               "| raw / cached |\n|---|---:|---:|---:|---:|\n");
    }
    for (int k = 0; k < 4; k++) {
        if (!bufs[k].p)
            continue;
        double cached = time_cached(bufs[k].p, calls), miss = time_miss(bufs[k].p, calls);
        double raw = gpu ? time_raw(bufs[k].p, calls) : -1;
        if (rank != 0)
            continue;
        printf("| %s | %.1f | %.1f | ", bufs[k].name, cached, miss);
        if (raw >= 0)
            printf("%.1f | %.1f |\n", raw, raw / cached);
        else
            printf("n/a | - |\n");
    }
    if (rank == 0 && !gpu)
        printf("\n(device, managed and pinned rows need a device.)\n");

    if (gpu) {
        bench_gpu_free(bufs[0].p);
        bench_gpu_free(bufs[1].p);
        bench_gpu_free_pinned(bufs[2].p);
    }
    free(bufs[3].p);
    BENCH_CHECK(ptsc_finalize());
    return 0;
}
