/*
 * An idle rank costs no core: with the progress agent on (PTSC_PROGRESS=thread,
 * the default), a rank whose threads make no ptsc call uses under 1 % of a
 * core, also after traffic that woke the agent.
 *
 * Each rank: MPI_Init_thread, then ptsc_init (the threads that appear in
 * between are ptsc's: the agent), attach, and a framed message that the
 * agent must drive: rank 0 ptsc_isend, rank 1 ptsc_irecv of 100000 bytes
 * (run it with PTSC_STAGING=always PTSC_STAGING_CHUNK=4096: 25 pieces), then
 * both compute for 100 ms without calling ptsc and wait; the data is
 * checked and the agent must have swept meanwhile. Then an exchange of the
 * stream-ordered calls (ptsc_send_enqueue / ptsc_recv_enqueue both ways and
 * ptsc_enqueue_sync: host buffers, so without a device the calling thread is
 * the stream), which starts the enqueue module's proxy thread; the reply is
 * checked. Then the rank sleeps
 * (3 s by default) without any ptsc or MPI call and measures the CPU time
 * used meanwhile: of the whole process (getrusage(RUSAGE_SELF): the agent,
 * the stream proxy, MPI's own threads, this program's watchdog) and of ptsc's threads alone
 * (/proc/self/task/<tid>/schedstat, or stat in clock ticks). CPU time, not
 * wall time, so a loaded machine does not make it fail. The whole process
 * must stay under 1 % of a core over the sleep (under 30 ms in 3 s); both
 * numbers are printed.
 *
 *   mpiexec -n 2 mpi_idle [SLEEP_SECONDS]
 */
#include "mpi_common.h"
#include "ptsc_internal.h" /* ptsc__progress_sweeps: the agent did run */

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#define BYTES 100000
#define MAX_TASKS 256
#define LIMIT_SHARE 0.01 /* of one core */

/* The thread ids of this process, sorted; returns how many. */
static int tasks(long *ids, int max)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < max;)
        if (e->d_name[0] != '.')
            ids[n++] = atol(e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j] < ids[j - 1]; j--) {
            long t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return n;
}

/* CPU seconds of thread `tid` of this process: schedstat (ns) where the
 * kernel has it, else utime + stime of stat (clock ticks); -1 if gone. */
static double task_cpu(long tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    FILE *f = fopen(path, "r");
    unsigned long long ns;
    if (f) {
        int ok = fscanf(f, "%llu", &ns) == 1;
        fclose(f);
        if (ok)
            return 1e-9 * (double)ns;
    }
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    if (!(f = fopen(path, "r")))
        return -1;
    char buf[1024];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double process_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

/* A framed message that only the agent can move while both threads compute. */
static int traffic(ptsc_ctx_t *ctx, int rank)
{
    unsigned char *buf = malloc(BYTES);
    if (!buf) {
        CHECK(0, "out of memory");
        return PTSC_ERR_NO_MEMORY;
    }
    for (int i = 0; i < BYTES; i++)
        buf[i] = rank == 0 ? (unsigned char)(i * 7 + 3) : 0;
    ptsc_request_t r;
    if (rank == 0)
        CHECK_OK(ptsc_isend(ctx, buf, BYTES, MPI_BYTE, 1, 0, 5, &r));
    else
        CHECK_OK(ptsc_irecv(ctx, buf, BYTES, MPI_BYTE, 0, 0, 5, &r));
    double t0 = now_s(); /* compute, no ptsc call */
    volatile unsigned long spin = 0;
    while (now_s() - t0 < 0.1)
        spin++;
    CHECK_OK(ptsc_wait(&r));
    int bad = 0;
    for (int i = 0; rank == 1 && i < BYTES && bad < 5; i++)
        if (buf[i] != (unsigned char)(i * 7 + 3)) {
            CHECK(0, "byte %d is %u, expected %u", i, buf[i], (unsigned char)(i * 7 + 3));
            bad++;
        }
    free(buf);
    return PTSC_OK;
}

/* A stream-ordered round trip: rank 0 sends a word and gets it back plus
 * one. Afterwards the stream proxy exists and has nothing armed. With a
 * device the word is pinned (pageable memory cannot be copied in stream
 * order) and the stream is the thread's bound one. */
static int enqueued(ptsc_ctx_t *ctx, int rank)
{
    uint32_t own = 0, *v = &own;
    if (ptsc__g.ndevices > 0 && ptsc__gpu_host_alloc(sizeof *v, (void **)&v) != PTSC_OK) {
        CHECK(0, "no pinned word: %s", ptsc_last_error());
        return PTSC_ERR_NO_MEMORY;
    }
    *v = rank == 0 ? 41u : 0u;
    if (rank == 0) {
        CHECK_OK(ptsc_send_enqueue(ctx, v, 1, MPI_UINT32_T, 1, 0, 6, NULL));
        CHECK_OK(ptsc_recv_enqueue(ctx, v, 1, MPI_UINT32_T, 1, 0, 7, NULL));
    } else {
        CHECK_OK(ptsc_recv_enqueue(ctx, v, 1, MPI_UINT32_T, 0, 0, 6, NULL));
        CHECK_OK(ptsc_enqueue_sync(ctx, NULL));
        ++*v;
        CHECK_OK(ptsc_send_enqueue(ctx, v, 1, MPI_UINT32_T, 0, 0, 7, NULL));
    }
    CHECK_OK(ptsc_enqueue_sync(ctx, NULL));
    CHECK(*v == 42u, "the enqueued round trip gave %u, expected 42", (unsigned)*v);
    if (v != &own)
        ptsc__gpu_host_free(v);
    return PTSC_OK;
}

int main(int argc, char **argv)
{
    double sleep_s = argc > 1 ? atof(argv[1]) : 3.0;
    if (sleep_s < 0.5 || sleep_s > 60) {
        fprintf(stderr, "usage: mpi_idle [SLEEP_SECONDS (0.5 .. 60, default 3)]\n");
        return 2;
    }
    int provided = 0, nranks = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    long before[MAX_TASKS], after[MAX_TASKS], mine[MAX_TASKS];
    int nb = tasks(before, MAX_TASKS);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_init: %s\n", ptsc_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int na = tasks(after, MAX_TASKS), nmine = 0;
    for (int i = 0; i < na; i++) { /* ptsc's threads: those ptsc_init started */
        int old = 0;
        for (int j = 0; j < nb && !old; j++)
            old = before[j] == after[i];
        if (!old)
            mine[nmine++] = after[i];
    }
    ptsc_rank(&g_rank);
    ptsc_size(&nranks, NULL);
    pthread_create(&g_watchdog, NULL, watchdog, NULL);
    long known[MAX_TASKS]; /* ptsc's, MPI's and this program's threads before the enqueued calls */
    int nknown = tasks(known, MAX_TASKS);
    const int agent = ptsc__progress_agent_on();
    if (nranks != 2) {
        if (g_rank == 0)
            fprintf(stderr, "FAIL mpi_idle: run it on 2 ranks (got %d)\n", nranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ptsc_ctx_t *ctx = NULL;
    if (ptsc_thread_attach(0, &ctx) != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_thread_attach: %s\n", ptsc_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    g_me = 0;
    unsigned long long sw0 = ptsc__progress_sweeps();
    traffic(ctx, g_rank);
    unsigned long long sw1 = ptsc__progress_sweeps();
    CHECK(!agent || sw1 > sw0, "the agent never swept during the framed message (%llu sweeps)", sw1 - sw0);
    enqueued(ctx, g_rank);
    long now[MAX_TASKS];
    int nnow = tasks(now, MAX_TASKS), nproxy = 0;
    for (int i = 0; i < nnow && nmine < MAX_TASKS; i++) { /* the threads the enqueued calls started */
        int old = 0;
        for (int j = 0; j < nknown && !old; j++)
            old = known[j] == now[i];
        if (!old)
            mine[nmine++] = now[i], nproxy++;
    }
    CHECK(nproxy >= 1, "the enqueued calls started no thread (the stream proxy)");
    MPI_Barrier(MPI_COMM_WORLD);

    /* Idle: no ptsc call, no MPI call. */
    double cpu0 = process_cpu(), t0 = now_s(), own0[MAX_TASKS];
    for (int i = 0; i < nmine; i++)
        own0[i] = task_cpu(mine[i]);
    struct timespec ts = {(time_t)sleep_s, (long)((sleep_s - (double)(time_t)sleep_s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
    double own = 0;
    for (int i = 0; i < nmine; i++) {
        double c = task_cpu(mine[i]);
        if (c >= 0 && own0[i] >= 0)
            own += c - own0[i];
    }
    double cpu = process_cpu() - cpu0, wall = now_s() - t0;
    unsigned long long sw2 = ptsc__progress_sweeps();

    const double limit = LIMIT_SHARE * wall;
    CHECK(cpu < limit, "the idle rank used %.1f ms of CPU in %.2f s (%.2f %% of a core; limit %.0f ms)",
          1e3 * cpu, wall, 100 * cpu / wall, 1e3 * limit);
    double r[5] = {1e3 * cpu, 1e3 * own, (double)(sw2 - sw1), (double)nmine, (double)(sw1 - sw0)}, all[10];
    MPI_Gather(r, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (g_rank == 0)
        for (int k = 0; k < 2; k++)
            printf("mpi_idle: rank %d, agent %s: idle %.2f s: process CPU %.2f ms (%.3f %% of a core, limit "
                   "%.0f ms), the %d thread(s) ptsc started (the agent, the stream proxy) %.2f ms; agent "
                   "sweeps: %.0f "
                   "during the framed message, "
                   "%.0f while "
                   "idle\n",
                   k, agent ? "on" : "off", wall, all[5 * k], 100 * all[5 * k] / 1e3 / wall, 1e3 * limit,
                   (int)all[5 * k + 3], all[5 * k + 1], all[5 * k + 4], all[5 * k + 2]);
    fflush(stdout);
    ptsc_thread_detach();
    int rc = test_finish("mpi_idle");
    MPI_Finalize();
    return rc;
}
