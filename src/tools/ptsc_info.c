/*
 * ptsc-info: what this build of ptsc contains, what it finds at run time,
 * and the configuration it would use (in the spirit of ompi_info and
 * ucx_info). Linked against ptsc_internal so it can read the variable
 * table and the GPU layer directly instead of duplicating them.
 *
 *   ptsc-info              build features, runtime findings, configuration,
 *                          and every PTSC_* variable with its documentation
 *   ptsc-info -c           the effective configuration only, and the number
 *                          of thread slots with the input that decided it
 *   ptsc-info --markdown   docs/ENV.md, generated from the table
 *
 * It runs as a singleton MPI process (no mpiexec needed). A bad PTSC_*
 * value makes it print the detail and exit 1, as ptsc_init would fail.
 */
#define _POSIX_C_SOURCE 200809L

#include "ptsc_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT, where the MPI has it */
#endif
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

enum { MODE_FULL, MODE_CONFIG, MODE_MARKDOWN };

static void usage(FILE *out)
{
    fputs("usage: ptsc-info [-c | --config] [--markdown] [-h | --help]\n"
          "  (none)       build features, runtime findings, configuration and variable reference\n"
          "  -c, --config effective configuration only (value and source of every PTSC_* variable)\n"
          "  --markdown   the variable reference as markdown (this is docs/ENV.md)\n"
          "  -h, --help   this text\n"
          "Exit status: 0 on success, 1 on a bad configuration or a failed init, 2 on bad usage.\n",
          out);
}

/* Report a failed call the way a user can act on: status name, then the detail. */
static int fail(const char *what, int rc)
{
    const char *detail = ptsc_last_error();
    fprintf(stderr, "ptsc-info: %s failed: %s (%s)%s%s\n", what, ptsc_status_name(rc), ptsc_status_string(rc),
            detail[0] ? ": " : "", detail);
    return 1;
}

static const char *openmp_version_name(long v)
{
    static const struct {
        long date;
        const char *name;
    } table[] = {{202411, "6.0"}, {202111, "5.2"}, {202011, "5.1"}, {201811, "5.0"},
                 {201511, "4.5"}, {201307, "4.0"}, {201107, "3.1"}, {200805, "3.0"}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (v >= table[i].date)
            return table[i].name;
    return "older than 3.0";
}

/* CUDA encodes versions as 1000 * major + 10 * minor. */
static void cuda_version_text(int v, char *buf, size_t n)
{
    if (v <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* Print `text` wrapped at `width` columns, every line indented by `indent`. */
static void print_wrapped(const char *text, int indent, int width)
{
    const char *p = text;
    while (*p) {
        int avail = width - indent;
        int len = (int)strlen(p);
        int cut = len;
        if (len > avail) {
            cut = avail;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0) /* one word longer than the line: let it overflow */
                cut = (int)strcspn(p, " ");
        }
        printf("%*s%.*s\n", indent, "", cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
}

/* The variable reference, from the table of config.c. */
static int print_variable_reference(void)
{
    printf("Variables:\n");
    for (int i = 0; i < ptsc__config_count(); i++) {
        char accepts[256], line[320];
        printf("  %s (default: %s)\n", ptsc__config_name(i), ptsc__config_default(i));
        print_wrapped(ptsc__config_doc(i), 6, 80);
        snprintf(line, sizeof line, "Accepts %s.", ptsc__config_accepts(i, accepts, sizeof accepts));
        print_wrapped(line, 6, 80);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int mode = MODE_FULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
            mode = MODE_CONFIG;
        } else if (strcmp(argv[i], "--markdown") == 0) {
            mode = MODE_MARKDOWN;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "ptsc-info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    /* The reference depends on the table only, never on the environment,
     * so the generated docs/ENV.md is the same wherever it is made. */
    if (mode == MODE_MARKDOWN) {
        ptsc__config_markdown(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }

    /* Parse before MPI starts, so a bad value is reported without the
     * cost (or the noise) of bringing MPI up. */
    ptsc__config_t cfg;
    int rc = ptsc__config_load(&cfg);
    if (rc != PTSC_OK)
        return fail("reading the PTSC_* environment", rc);
    ptsc__config_warn_unknown();

    if (mode == MODE_CONFIG) {
        char why[256];
        int slots = ptsc__config_slots_now(&cfg, NULL, why, sizeof why);
        printf("Configuration (value, source):\n");
        ptsc__config_print(&cfg, stdout);
        printf("Thread slots per rank: %d, %s\n", slots, why);
        return 0;
    }

    printf("ptsc %s\n\nBuild:\n", ptsc_version_string());
    printf("  %-34s %s (compiled against headers %s)\n", "library version:", ptsc_version_string(),
           PTSC_VERSION_STRING);
#ifdef PTSC_HAVE_CUDA
    printf("  %-34s %s\n", "CUDA layer:", "yes (gpu_cuda.c)");
#else
    printf("  %-34s %s\n", "CUDA layer:", "no (gpu_none.c: every sync is a no-op)");
#endif
#ifdef _OPENMP
    printf("  %-34s %ld (OpenMP %s)\n", "OpenMP:", (long)_OPENMP, openmp_version_name((long)_OPENMP));
#else
    printf("  %-34s %s\n", "OpenMP:", "not enabled in this tool's compile");
#endif
    {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        /* Callable before MPI_Init by the standard. Only the first line:
         * Open MPI appends its repository and release date. */
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n")] = '\0';
        printf("  %-34s %s (MPI %d.%d headers)\n", "MPI library:", lib, MPI_VERSION, MPI_SUBVERSION);
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    printf("  %-34s %s\n", "MPI CUDA-aware (compile time):", "yes (MPIX_CUDA_AWARE_SUPPORT = 1)");
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
    printf("  %-34s %s\n", "MPI CUDA-aware (compile time):", "no (MPIX_CUDA_AWARE_SUPPORT = 0)");
#else
    printf("  %-34s %s\n",
           "MPI CUDA-aware (compile time):", "unknown (no MPIX_CUDA_AWARE_SUPPORT in mpi-ext.h)");
#endif

    rc = ptsc_init(&argc, &argv);
    if (rc != PTSC_OK)
        return fail("ptsc_init", rc);

    int cuda = 0, cuda_aware = 0, staging = 0, nranks = 0, nthreads = 0, tag_max = 0;
    ptsc_features(&cuda, &cuda_aware, &staging);
    ptsc_size(&nranks, &nthreads);
    ptsc_tag_max(&tag_max);
    int mpi_cuda = ptsc__mpi_cuda_support();
    int runtime = 0, driver = 0;
    char rt_text[32], drv_text[32];
    ptsc__gpu_versions(&runtime, &driver);
    cuda_version_text(runtime, rt_text, sizeof rt_text);
    cuda_version_text(driver, drv_text, sizeof drv_text);

    printf("\nRuntime:\n");
    printf("  %-34s %d rank(s), %d thread slot(s) per rank, tag max %d\n", "processes:", nranks, nthreads,
           tag_max);
    {
        char why[256];
        ptsc__config_slots_now(&ptsc__g.cfg, NULL, why, sizeof why);
        printf("  %-34s %d, %s\n", "thread slots (PTSC_MAX_THREADS):", nthreads, why);
    }
    printf("  %-34s %s\n", "MPI CUDA-aware (run time):",
           mpi_cuda > 0    ? "yes (MPIX_Query_cuda_support)"
           : mpi_cuda == 0 ? "no (MPIX_Query_cuda_support)"
                           : "unknown (the MPI cannot tell)");
    printf("  %-34s %s / %s\n", "CUDA runtime / driver:", rt_text, drv_text);
    printf("  %-34s %d\n", "CUDA devices:", ptsc__g.ndevices);
    for (int d = 0; d < ptsc__g.ndevices; d++) {
        char desc[256];
        if (ptsc__gpu_describe(d, desc, sizeof desc) == PTSC_OK)
            printf("    %d: %s\n", d, desc);
        else
            printf("    %d: (cannot describe: %s)\n", d, ptsc_last_error());
    }
    printf("  %-34s %s\n", "device buffers to MPI:",
           !cuda                   ? "n/a (no device: host buffers only, syncs are no-ops)"
           : cuda_aware && staging ? "direct, staging also enabled"
           : cuda_aware            ? "direct (CUDA-aware MPI)"
           : staging               ? "staged through pinned host memory"
                     : "neither: device buffers are refused (PTSC_STAGING=never without CUDA-aware MPI)");
    /* The class cache's rule for pageable buffers (memory.c, memtrack.c). */
    {
        char line[512];
        const int mc = ptsc__g.cfg.mem_cache;
        if (!cuda)
            snprintf(line, sizeof line,
                     "n/a (no device: every buffer is pageable host memory, no CUDA call)");
        else if (ptsc__g.mem_tracked)
            snprintf(line, sizeof line,
                     "tracked (CUPTI callbacks): pageable buffers cached per address, dropped at every CUDA "
                     "memory call");
        else if (mc == PTSC__MEMCACHE_OFF)
            snprintf(line, sizeof line, "not tracked (PTSC_MEM_CACHE=off): every buffer asked every call");
        else if (mc == PTSC__MEMCACHE_HOST)
            snprintf(line, sizeof line,
                     "not tracked (PTSC_MEM_CACHE=host): pageable buffers cached per address, the program "
                     "calls ptsc_mem_forget");
        else
            snprintf(line, sizeof line, "not tracked (%s): pageable buffers %s", ptsc__memtrack_status(),
                     mc == PTSC__MEMCACHE_HOST ? "cached per address (PTSC_MEM_CACHE=host: the program calls "
                                                 "ptsc_mem_forget)"
                                               : "asked every call (~0.1 us each)");
        printf("  %-34s %s\n", "CUDA memory calls:", line);
    }
    /* libptsc-mpi (src/interpose.c), where ptsc-run or LD_PRELOAD loaded it. */
    typedef int (*interposer_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    interposer_t interposer = (interposer_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    printf("  %-34s %s\n", "plain MPI calls (libptsc-mpi):",
           !interposer ? "not intercepted (ptsc-run PROGRAM loads the interposer)"
           : interposer(NULL, NULL, NULL, NULL)
               ? "intercepted: point-to-point, persistent, collectives (blocking, non-blocking, v and w), "
                 "one-sided; calls that take a buffer get PTSC_SYNC_SCOPE first (auto acts as global unless "
                 "the thread named its stream, ptsc_mpi_set_stream), device buffers staged where MPI is not "
                 "CUDA-aware (PTSC_STAGING; one-sided calls and intercommunicators refuse them)"
               : "libptsc-mpi loaded but not active (its error is above)");

    printf("\nConfiguration (value, source):\n");
    ptsc__config_print(&ptsc__g.cfg, stdout);
    printf("\n");
    int out = print_variable_reference();

    rc = ptsc_finalize();
    if (rc != PTSC_OK)
        return fail("ptsc_finalize", rc);
    return out;
}
