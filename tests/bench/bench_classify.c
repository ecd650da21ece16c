/*
 * bench_classify: the price of knowing what a buffer is.
 *
 * ptsc must classify every buffer it hands to MPI (device, managed, pinned
 * or pageable host) to know whether it needs a sync or staging. The raw
 * answer, cudaPointerGetAttributes, costs 100-230 ns on an H200; ptsc keeps
 * a per-thread cache of the answers whose staleness is harmless: device,
 * managed and (without staging, or while CUDA's memory calls are tracked)
 * pinned memory per 4 KiB block, so offsets into one allocation share
 * entries (src/memory.c). Pageable host answers are cached per address
 * while the memory calls are tracked (src/memtrack.c), or with
 * PTSC_MEM_CACHE=host, where the program promises to call ptsc_mem_forget
 * after it pins or allocates CUDA memory.
 *
 * Reported per class, in ns per call: ptsc_mem_class on a warm cache, on a
 * miss (after ptsc_mem_forget, whose atomic increment is included), and the
 * raw call, with the raw / cached ratio; then a halo-like case, calls that
 * cycle through N offsets (1000 bytes apart, so several per block) into one
 * 1 MiB allocation, for N = 64 and 1024.
 *
 * The cache mode is read at ptsc_init, once per process. Run without
 * PTSC_MEM_CACHE on a machine with a device and outside mpiexec, this
 * program measures the default mode and then runs itself again with
 * PTSC_MEM_CACHE=host, so one run shows both; with PTSC_MEM_CACHE set it
 * measures that mode only. Under mpiexec every rank measures and rank 0
 * prints.
 *
 *   bench_classify [--calls N] [--quick]
 */
#include "bench_util.h"

#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

typedef struct {
    const char *name;
    void *p;
} buffer_t;

static double ns_per_call(double sec, long calls) { return 1e9 * sec / (double)calls; }

/* Calls cycle through n addresses p + offs[i]; n = 1 is one buffer. */
static double time_cached(const char *p, const size_t *offs, int n, long calls)
{
    ptsc_memclass_t c;
    for (int i = 0; i < n; i++)
        BENCH_CHECK(ptsc_mem_class(p + offs[i], &c)); /* fill the cache */
    double t0 = bench_now();
    for (long i = 0, k = 0; i < calls; i++, k = k + 1 == n ? 0 : k + 1)
        BENCH_CHECK(ptsc_mem_class(p + offs[k], &c));
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
static double time_raw(const char *p, const size_t *offs, int n, long calls)
{
    int type;
    if (bench_gpu_pointer_attr(p, &type) != PTSC_OK)
        return -1;
    double t0 = bench_now();
    for (long i = 0, k = 0; i < calls; i++, k = k + 1 == n ? 0 : k + 1)
        if (bench_gpu_pointer_attr(p + offs[k], &type) != PTSC_OK)
            return -1;
    return ns_per_call(bench_now() - t0, calls);
}

static void row(const char *name, double cached, double miss, double raw)
{
    printf("| %s | %.1f | ", name, cached);
    if (miss >= 0)
        printf("%.1f | ", miss);
    else
        printf("- | ");
    if (raw >= 0)
        printf("%.1f | %.1f |\n", raw, raw / cached);
    else
        printf("n/a | - |\n");
}

/* Started by mpiexec (or another launcher): no second run of itself. */
static int under_launcher(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") || getenv("PMI_SIZE");
}

/* This program again, with PTSC_MEM_CACHE=`mode`; its exit status. */
static int run_again(char **argv, const char *mode)
{
    pid_t pid;
    int st = 0;
    setenv("PTSC_MEM_CACHE", mode, 1);
    fflush(stdout);
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) {
        fprintf(stderr, "bench_classify: cannot run itself again with PTSC_MEM_CACHE=%s\n", mode);
        return 1;
    }
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 1;
    return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    const char *mode_env = getenv("PTSC_MEM_CACHE");
    const char *mode = mode_env ? mode_env : "safe (default)";
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
    enum { NOFF = 1024 };
    static size_t offs[NOFF];
    for (int i = 0; i < NOFF; i++)
        offs[i] = (size_t)i * 1000 + 8;

    if (rank == 0) {
        printf("## bench_classify: buffer classification cost, PTSC_MEM_CACHE=%s, %ld calls each\n\n", mode,
               calls);
        int staging = 0;
        BENCH_CHECK(ptsc_features(NULL, NULL, &staging));
        if (gpu)
            printf(
                "Staging is %s in this run, so pinned buffers are %s (see src/memory.c). Pageable host "
                "buffers are %s.\n\n",
                staging ? "on" : "off",
                staging
                    ? "cached per 4 KiB block while CUDA's memory calls are tracked, else classified afresh "
                      "every call"
                    : "cached per 4 KiB block",
                mode_env && !strcmp(mode_env, "host")
                    ? "cached per address"
                    : "cached per address while CUDA's memory calls are tracked (src/memtrack.c; ptsc-info "
                      "says whether they are), else classified afresh every call");
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
        double cached = time_cached(bufs[k].p, offs, 1, calls), miss = time_miss(bufs[k].p, calls);
        double raw = gpu ? time_raw(bufs[k].p, offs, 1, calls) : -1;
        if (rank == 0)
            row(bufs[k].name, cached, miss, raw);
    }
    /* Offsets into one allocation: device (ranges of blocks) and pageable host. */
    const int kinds[2] = {0, 3}, counts[2] = {64, NOFF};
    for (int k = 0; k < 2; k++) {
        if (!bufs[kinds[k]].p)
            continue;
        for (int j = 0; j < 2; j++) {
            double cached = time_cached(bufs[kinds[k]].p, offs, counts[j], calls);
            double raw = gpu ? time_raw(bufs[kinds[k]].p, offs, counts[j], calls) : -1;
            char name[128];
            snprintf(name, sizeof name, "%s, %d offsets 1000 B apart",
                     kinds[k] == 0 ? "device" : "pageable host", counts[j]);
            if (rank == 0)
                row(name, cached, -1, raw);
        }
    }
    if (rank == 0) {
        if (!gpu)
            printf("\n(device, managed and pinned rows need a device.)\n");
        printf("\n");
    }

    if (gpu) {
        bench_gpu_free(bufs[0].p);
        bench_gpu_free(bufs[1].p);
        bench_gpu_free_pinned(bufs[2].p);
    }
    free(bufs[3].p);
    int nranks = 1;
    BENCH_CHECK(ptsc_size(&nranks, NULL));
    BENCH_CHECK(ptsc_finalize());
    /* The fast mode too, in a process of its own. */
    if (gpu && !mode_env && nranks == 1 && !under_launcher())
        return run_again(argv, "host");
    return 0;
}
