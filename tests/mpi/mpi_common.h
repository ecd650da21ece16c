/*
 * Shared by the MPI test programs: failure reporting that names rank,
 * thread and the check, payloads that identify their route, and the run's
 * verdict. A program prints every failed check (up to a limit) and exits
 * non-zero; ctest's TIMEOUT turns a hang into a failure.
 */
#ifndef PTSC_MPI_COMMON_H
#define PTSC_MPI_COMMON_H

#include <ptsc.h>

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_failures;              /* this rank's failed checks, all threads */
static _Thread_local int g_me = -1; /* the calling thread's ptsc index, for messages */
static int g_rank = -1;

static void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void test_fail(const char *file, int line, const char *fmt, ...)
{
    int n = __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
    if (n > 25)
        return; /* the first failures say what is wrong; thousands more hide it */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL [rank %d thread %d] %s:%d: %s\n", g_rank, g_me, file, line, msg);
    fflush(stderr);
}

#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond))                                    \
            test_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* A ptsc call that must succeed; returns from the enclosing int function on
 * failure, because what follows would only pile up consequential errors. */
#define CHECK_OK(call)                                                                        \
    do {                                                                                      \
        int rc_ = (call);                                                                     \
        if (rc_ != PTSC_OK) {                                                                 \
            test_fail(__FILE__, __LINE__, "%s returned %s: %s", #call, ptsc_status_name(rc_), \
                      ptsc_last_error());                                                     \
            return rc_;                                                                       \
        }                                                                                     \
    } while (0)

/* Payload of the message from (sr, st) to (dr, dt) in `round`: a header
 * naming the route, then words that depend on the route and the position,
 * so a misrouted, reordered or corrupted message fails the check. */
enum { HDR = 5 };

static inline uint32_t mix(uint32_t h, uint32_t v)
{
    h ^= v + 0x9E3779B9u + (h << 6) + (h >> 2);
    return h * 0x85EBCA6Bu;
}

static inline uint32_t word(int sr, int st, int dr, int dt, int round, int k)
{
    uint32_t h = mix(mix(mix(mix(mix(0x1234567u, (uint32_t)sr), (uint32_t)st), (uint32_t)dr), (uint32_t)dt),
                     (uint32_t)round);
    return mix(h, (uint32_t)k);
}

/* Words in the message of a route: small (eager) for most routes, large
 * (rendezvous, pipelined paths) for some, varying with the round. */
static inline int msg_len(int sr, int st, int dr, int dt, int round)
{
    return (sr + st + dr + dt + round) % 4 == 0 ? 24000 : HDR + 3 + (st * 5 + dt + round) % 29;
}

static inline void fill(uint32_t *b, int n, int sr, int st, int dr, int dt, int round)
{
    b[0] = (uint32_t)sr;
    b[1] = (uint32_t)st;
    b[2] = (uint32_t)dr;
    b[3] = (uint32_t)dt;
    b[4] = (uint32_t)round;
    for (int k = HDR; k < n; k++)
        b[k] = word(sr, st, dr, dt, round, k);
}

/* 1 when `b` is exactly the message from (sr, st) to (dr, dt) in `round`;
 * otherwise reports what arrived instead. */
static inline int verify(const char *file, int line, const uint32_t *b, int n, int sr, int st, int dr, int dt,
                         int round)
{
    if (b[0] != (uint32_t)sr || b[1] != (uint32_t)st || b[2] != (uint32_t)dr || b[3] != (uint32_t)dt ||
        b[4] != (uint32_t)round) {
        test_fail(file, line,
                  "expected message (%d,%d)->(%d,%d) round %d, got header (%d,%d)->(%d,%d) round %d "
                  "(misrouted or not received)",
                  sr, st, dr, dt, round, (int)b[0], (int)b[1], (int)b[2], (int)b[3], (int)b[4]);
        return 0;
    }
    for (int k = HDR; k < n; k++)
        if (b[k] != word(sr, st, dr, dt, round, k)) {
            test_fail(file, line, "message (%d,%d)->(%d,%d) round %d: word %d of %d is %#x, expected %#x", sr,
                      st, dr, dt, round, k, n, b[k], word(sr, st, dr, dt, round, k));
            return 0;
        }
    return 1;
}
#define VERIFY(b, n, sr, st, dr, dt, round) verify(__FILE__, __LINE__, b, n, sr, st, dr, dt, round)

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * One pause of a polling loop: a yield for the first 256 polls, then a
 * 20 us sleep. Loops that only ever yield starved the thread with work for
 * seconds to minutes when a 2-core machine ran several such programs
 * (docs/design.md, "The stall of spinning threads"). `n` counts the
 * loop's polls; start it at 0.
 */
static inline void test_pause(unsigned *n)
{
    if ((*n)++ < 256) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

/*
 * A dump of every thread of this process, for a program that stopped
 * moving: first what the kernel says of each (state, where it sleeps, the
 * system call and its arguments: a futex address shared by two threads
 * shows who waits for whom), read from /proc without stopping anyone; then
 * each thread's own stack, printed by the thread from a signal handler, one
 * thread after the other (a handler that waits long for its core says the
 * threads are starved of cores). The caller notes a stall that ends right
 * after the dump. Linux only; elsewhere it says so.
 */
#ifdef __linux__
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile sig_atomic_t g_dump_done;
static void dump_handler(int sig)
{
    (void)sig;
    void *pc[48];
    int n = backtrace(pc, 48);
    backtrace_symbols_fd(pc, n, 2);
    g_dump_done = 1;
}

static inline void read_line(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(buf, (int)cap, f))
        buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
}

static inline void thread_dump(const char *why)
{
    char path[96], comm[64], stat[512], wchan[64], sc[256];
    pid_t self = (pid_t)syscall(SYS_gettid);
    fprintf(stderr, "[rank %d] thread dump (%s), pid %d, dumping thread %d:\n", g_rank, why, (int)getpid(),
            (int)self);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    int tids[256], nt = 0;
    for (struct dirent *de; (de = readdir(d)) && nt < 256;) {
        if (de->d_name[0] == '.')
            continue;
        int tid = atoi(de->d_name);
        tids[nt++] = tid;
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
        read_line(path, comm, sizeof comm);
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
        read_line(path, stat, sizeof stat);
        snprintf(path, sizeof path, "/proc/self/task/%d/wchan", tid);
        read_line(path, wchan, sizeof wchan);
        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
        read_line(path, sc, sizeof sc);
        const char *st = strrchr(stat, ')'); /* state follows the command in parentheses */
        fprintf(stderr, "[rank %d]   task %d (%s) state %c wchan %s syscall %s\n", g_rank, tid, comm,
                st && st[1] ? st[2] : '?', wchan[0] ? wchan : "-", sc);
        /* In the kernel and not interruptible (D): where, if /proc shows it (root). */
        snprintf(path, sizeof path, "/proc/self/task/%d/stack", tid);
        FILE *kf = st && st[1] == ' ' && st[2] == 'D' ? fopen(path, "r") : NULL;
        for (char line[160]; kf && fgets(line, sizeof line, kf);)
            fprintf(stderr, "[rank %d]     kernel %s", g_rank, line);
        if (kf)
            fclose(kf);
    }
    closedir(d);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = dump_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGURG, &sa, &old);
    void *warm[1];
    (void)backtrace(warm, 1); /* loads the unwinder outside a handler */
    for (int k = 0; k < nt; k++) {
        if (tids[k] == self)
            continue;
        fprintf(stderr, "[rank %d] stack of task %d:\n", g_rank, tids[k]);
        g_dump_done = 0;
        if (syscall(SYS_tgkill, getpid(), tids[k], SIGURG) != 0)
            continue;
        for (int w = 0; w < 1000 && !g_dump_done; w++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    sigaction(SIGURG, &old, NULL);
    fflush(stderr);
}
#else
static inline void thread_dump(const char *why)
{
    fprintf(stderr, "[rank %d] thread dump (%s): not available on this system\n", g_rank, why);
}
#endif

/*
 * Watchdog: a misrouted message usually leaves some receive waiting forever.
 * Rather than wait for ctest's TIMEOUT, abort the job 10 s after the first
 * failed check, or when the run exceeds PTSCTEST_DEADLINE seconds (default
 * 90, under the ctest TIMEOUT so the reason gets printed; not PTSC_*: ptsc
 * warns about PTSC_ variables it does not know).
 */
static int g_done;
static pthread_t g_watchdog;

static void *watchdog(void *arg)
{
    const char *env = getenv("PTSCTEST_DEADLINE");
    double deadline = env ? atof(env) : 90.0, t0 = now_s(), first_fail = 0;
    (void)arg;
    while (!__atomic_load_n(&g_done, __ATOMIC_SEQ_CST)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double t = now_s();
        if (first_fail == 0 && __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST) > 0)
            first_fail = t;
        if ((first_fail > 0 && t - first_fail > 10) || t - t0 > deadline) {
            fprintf(stderr, "FAIL [rank %d] watchdog: %s after %.0f s; aborting the job\n", g_rank,
                    first_fail > 0 ? "stuck after a failed check" : "no completion", t - t0);
            if (first_fail == 0)
                thread_dump("no completion");
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    return NULL;
}

/* ptsc_init with the checks every program needs; returns the thread count. */
static inline int test_init(int *argc, char ***argv, int *nranks)
{
    int rc = ptsc_init(argc, argv);
    if (rc != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_init: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        exit(1);
    }
    int nthreads = 0;
    ptsc_rank(&g_rank);
    ptsc_size(nranks, &nthreads);
    pthread_create(&g_watchdog, NULL, watchdog, NULL);
    return nthreads;
}

/* Every rank learns the total of failed checks; rank 0 prints the verdict.
 * Returns the exit status. */
static inline int test_finish(const char *name)
{
    int mine = __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST), total = 0, nranks = 0, nthreads = 0;
    ptsc_size(&nranks, &nthreads);
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const char *comm = getenv("PTSC_COMM");
    if (g_rank == 0)
        printf("%s %s: %d ranks x %d threads, PTSC_COMM=%s, %d failed checks\n", total ? "FAILED" : "PASSED",
               name, nranks, nthreads, comm ? comm : "dup", total);
    fflush(stdout);
    __atomic_store_n(&g_done, 1, __ATOMIC_SEQ_CST);
    pthread_join(g_watchdog, NULL);
    int rc = ptsc_finalize();
    if (rc != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_finalize: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        return 1;
    }
    return total ? 1 : 0;
}

#endif /* PTSC_MPI_COMMON_H */
