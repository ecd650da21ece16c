/*
 * MPI's progress rule: once a non-blocking operation is started and its
 * partner is posted, it completes, whatever the starting thread does next.
 *
 * Each pattern pairs thread t of rank r with thread T-1-t of rank r^1 (an
 * even number of ranks is needed). One side
 * of each pair, A, starts a non-blocking operation, then makes a blocking
 * collective (or computes without calling ptsc), then waits; the other
 * side, B, makes the blocking counterpart, then the same collective:
 *
 *   isend  A: ptsc_isend, COLL, ptsc_wait     B: ptsc_recv, COLL
 *   irecv  A: ptsc_irecv, COLL, ptsc_wait     B: ptsc_send, COLL
 *   pair   both: ptsc_irecv + ptsc_isend, COLL, ptsc_waitall
 *
 * COLL is one of
 *   barrier, allreduce              the lane collectives (ptsc_barrier, ptsc_allreduce)
 *   world_barrier, world_allreduce  every thread of every rank (ptsc_world_*)
 *   mpi_barrier, mpi_allreduce      MPI's own: MPI_COMM_WORLD for thread 0,
 *                                   a duplicate of it per other thread index
 *                                   (MPI forbids concurrent collectives on
 *                                   one communicator)
 *   sleep, busy                     computation without a ptsc call: 20 ms of
 *                                   nanosleep, 10 ms of busy loop
 * and each runs with a message of one piece (4000 bytes, under a 4 KiB
 * PTSC_STAGING_CHUNK) and of many (100000 bytes). Which side of a pair is A
 * alternates with the rank and the thread, so every rank starts operations
 * and blocks on them in the same pattern. Each pattern runs twice: with both
 * sides starting at once, and with B starting 5 ms late, so that A is inside
 * its collective (or computation) before the message comes (whether an
 * early message was seen before A left ptsc is otherwise left to chance).
 *
 * In a pattern where B blocks before its collective, B can only reach the
 * collective once A's message has moved, while A sits in the collective:
 * if ptsc moves a message only when its owner thread calls ptsc, the
 * pattern hangs. Every pattern must complete, with every byte of the
 * message checked, the part of the receive buffer past it untouched, the
 * receive's info (source, tag, size) and the collective's result checked.
 * For the computation patterns, how long the blocking side waited is
 * printed with MPI_PROGRESS_VERBOSE=1 (whether the message moved during the
 * computation is a matter of performance, not checked here).
 *
 * A hang fails within seconds: a watchdog ends the job when a thread has
 * spent MPI_PROGRESS_DEADLINE seconds (default 10, 60 in sanitizer builds)
 * in one pattern, naming the pattern and the call each thread of the rank
 * is in. PTSC_TIMEOUT is set to half that deadline unless the environment
 * sets it, so that ptsc's own watchdog says what each blocking call waits
 * for.
 *
 * Usage: mpi_progress [REGEX]: only the patterns whose name (op.coll.size,
 * e.g. isend.world_barrier.many) matches the extended regular expression.
 * MPI_PROGRESS_THREADS=n uses threads 0..n-1 (default: every thread slot,
 * PTSC_MAX_THREADS).
 */
#include "mpi_common.h"

#include <regex.h>
#include <stdatomic.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

enum { OP_ISEND, OP_IRECV, OP_PAIR, NOPS };
enum { C_BARRIER, C_ALLREDUCE, C_WBARRIER, C_WALLREDUCE, C_MBARRIER, C_MALLREDUCE, C_SLEEP, C_BUSY, NCOLLS };
enum { S_ONE, S_MANY, NSIZES };

static const char *const op_name[NOPS] = {"isend", "irecv", "pair"};
static const char *const coll_name[NCOLLS] = {"barrier",         "allreduce",   "world_barrier",
                                              "world_allreduce", "mpi_barrier", "mpi_allreduce",
                                              "sleep",           "busy"};
static const char *const coll_call[NCOLLS] = {
    "ptsc_barrier", "ptsc_allreduce", "ptsc_world_barrier",      "ptsc_world_allreduce",
    "MPI_Barrier",  "MPI_Allreduce",  "computation (nanosleep)", "computation (busy loop)"};
static const int size_bytes[NSIZES] = {4000, 100000};
static const char *const size_name[NSIZES] = {"one", "many"};

enum { NPAT = NOPS * NCOLLS * NSIZES, ROUNDS = 2, LATE_MS = 5, SLACK = 64, PAD = 0xA5, NRED = 3 };

static int R, T, VERBOSE;
static double DEADLINE;
static int selected[NPAT];
static MPI_Comm *mpicomm; /* [T]: the communicator of MPI's own collectives for each thread index */
static _Thread_local char g_pname[64]; /* the name of the calling thread's pattern, for messages */

static void pattern_of(int p, int *op, int *coll, int *size)
{
    *size = p % NSIZES;
    *coll = p / NSIZES % NCOLLS;
    *op = p / (NSIZES * NCOLLS);
}

static void pattern_name(int p, char *buf, size_t n)
{
    if (p == NPAT) { /* the watchdog's name for the detach after the last pattern */
        snprintf(buf, n, "(after the last pattern)");
        return;
    }
    int op, coll, size;
    pattern_of(p, &op, &coll, &size);
    snprintf(buf, n, "%s.%s.%s", op_name[op], coll_name[coll], size_name[size]);
}

/* ------------------------------------------------------------------------ */
/* Where each thread is, for the watchdog                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    _Atomic int pat; /* pattern index, -1 between patterns */
    _Atomic int round;
    _Atomic(const char *) stage; /* the call the thread is in */
    _Atomic long long since_ns;  /* when the pattern started */
    int peer_rank, peer_thread, is_a;
} where_t;

static where_t *g_where; /* [T] */
static _Atomic int g_stop;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void at(int t, const char *stage) { atomic_store(&g_where[t].stage, stage); }

static void *pattern_watchdog(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        long long now = now_ns();
        int stuck = -1;
        for (int t = 0; t < T; t++) {
            int p = atomic_load(&g_where[t].pat);
            if (p >= 0 && (double)(now - atomic_load(&g_where[t].since_ns)) * 1e-9 > DEADLINE)
                stuck = t;
        }
        if (stuck < 0)
            continue;
        char name[64];
        const char *comm = getenv("PTSC_COMM"), *st = getenv("PTSC_STAGING"),
                   *ch = getenv("PTSC_STAGING_CHUNK");
        fprintf(
            stderr,
            "FAIL [rank %d] mpi_progress: a pattern did not complete within %.0f s (%d ranks x %d threads, "
            "PTSC_COMM=%s PTSC_STAGING=%s PTSC_STAGING_CHUNK=%s):\n",
            g_rank, DEADLINE, R, T, comm ? comm : "dup", st ? st : "auto", ch ? ch : "default");
        for (int t = 0; t < T; t++) {
            int p = atomic_load(&g_where[t].pat);
            if (p < 0) {
                fprintf(stderr,
                        "  [rank %d thread %d] in no pattern (finished, or about to start the next)\n",
                        g_rank, t);
                continue;
            }
            pattern_name(p, name, sizeof name);
            fprintf(stderr,
                    "  [rank %d thread %d] pattern %s round %d, side %s (peer rank %d thread %d): in %s for "
                    "%.1f s\n",
                    g_rank, t, name, atomic_load(&g_where[t].round), g_where[t].is_a ? "A" : "B",
                    g_where[t].peer_rank, g_where[t].peer_thread, atomic_load(&g_where[t].stage),
                    (double)(now - atomic_load(&g_where[t].since_ns)) * 1e-9);
        }
        fflush(stderr);
        /* Give the other ranks' watchdogs a moment to say where they are. */
        struct timespec grace = {1, 0};
        nanosleep(&grace, NULL);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* One pattern on one thread                                                 */
/* ------------------------------------------------------------------------ */

static int red_value(int p, int r, int t, int k) { return 1 + p * 7 + r * 1000 + t * 100 + k; }

static void compute(int coll)
{
    if (coll == C_SLEEP) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    } else {
        long long t0 = now_ns();
        volatile unsigned x = 1;
        while (now_ns() - t0 < 10 * 1000 * 1000)
            x = x * 1664525u + 1013904223u;
    }
}

/* The collective (or computation) of pattern p; checks its result. */
static void collective(ptsc_ctx_t *ctx, int t, int p, int coll)
{
    int in[NRED], out[NRED], rc;
    for (int k = 0; k < NRED; k++) {
        in[k] = red_value(p, g_rank, t, k);
        out[k] = -1;
    }
    at(t, coll_call[coll]);
    switch (coll) {
    case C_BARRIER:
        rc = ptsc_barrier(ctx);
        CHECK(rc == PTSC_OK, "%s: ptsc_barrier: %s: %s", g_pname, ptsc_status_name(rc), ptsc_last_error());
        break;
    case C_WBARRIER:
        rc = ptsc_world_barrier(ctx, T);
        CHECK(rc == PTSC_OK, "%s: ptsc_world_barrier: %s: %s", g_pname, ptsc_status_name(rc),
              ptsc_last_error());
        break;
    case C_MBARRIER:
        rc = MPI_Barrier(mpicomm[t]);
        CHECK(rc == MPI_SUCCESS, "%s: MPI_Barrier returned %d", g_pname, rc);
        break;
    case C_ALLREDUCE:
    case C_WALLREDUCE:
    case C_MALLREDUCE:
        if (coll == C_ALLREDUCE) {
            rc = ptsc_allreduce(ctx, in, out, NRED, MPI_INT, MPI_SUM);
            CHECK(rc == PTSC_OK, "%s: ptsc_allreduce: %s: %s", g_pname, ptsc_status_name(rc),
                  ptsc_last_error());
        } else if (coll == C_WALLREDUCE) {
            rc = ptsc_world_allreduce(ctx, T, in, out, NRED, MPI_INT, MPI_SUM);
            CHECK(rc == PTSC_OK, "%s: ptsc_world_allreduce: %s: %s", g_pname, ptsc_status_name(rc),
                  ptsc_last_error());
        } else {
            rc = MPI_Allreduce(in, out, NRED, MPI_INT, MPI_SUM, mpicomm[t]);
            CHECK(rc == MPI_SUCCESS, "%s: MPI_Allreduce returned %d", g_pname, rc);
            rc = rc == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI;
        }
        if (rc != PTSC_OK)
            break;
        for (int k = 0; k < NRED; k++) {
            int want = 0;
            for (int r = 0; r < R; r++)
                if (coll == C_WALLREDUCE)
                    for (int u = 0; u < T; u++)
                        want += red_value(p, r, u, k);
                else
                    want += red_value(p, r, t, k);
            CHECK(out[k] == want, "%s: %s element %d is %d, expected %d", g_pname, coll_call[coll], k, out[k],
                  want);
        }
        break;
    default:
        compute(coll);
        break;
    }
}

/* Message of pattern p from (sr, st): `bytes` bytes of words that name the route and the pattern. */
static void fill_msg(uint32_t *b, int bytes, int p, int sr, int st, int dr, int dt)
{
    for (int k = 0; k < bytes / 4; k++)
        b[k] = word(sr, st, dr, dt, p, k);
}

static void check_msg(const char *what, int p, const unsigned char *rb, int bytes, int sr, int st, int dr,
                      int dt, int rc, const ptsc_info_t *info)
{
    const char *name = g_pname;
    (void)p;
    CHECK(rc == PTSC_OK, "%s: %s: %s: %s", name, what, ptsc_status_name(rc), ptsc_last_error());
    if (rc != PTSC_OK)
        return;
    if (info)
        CHECK(info->rank == sr && info->thread == st && info->tag == p && info->bytes == (size_t)bytes &&
                  info->error == PTSC_OK,
              "%s: %s: info says source (%d,%d) tag %d, %zu bytes, error %d; expected (%d,%d) tag %d, "
              "%d bytes",
              name, what, info->rank, info->thread, info->tag, info->bytes, info->error, sr, st, p, bytes);
    for (int i = 0; i < bytes; i++) {
        uint32_t w = word(sr, st, dr, dt, p, i / 4);
        unsigned char want = (unsigned char)(w >> (8 * (i % 4)));
        if (rb[i] != want) {
            CHECK(0, "%s: %s: byte %d of %d is %#x, expected %#x (message from (%d,%d))", name, what, i,
                  bytes, rb[i], want, sr, st);
            return;
        }
    }
    for (int i = bytes; i < bytes + SLACK; i++)
        if (rb[i] != PAD) {
            CHECK(0, "%s: %s: receive buffer byte %d written past the %d-byte message", name, what, i, bytes);
            return;
        }
}

/* Round `round` of pattern p on thread t. In round 1 side B (in a pair: the side that is not A) sleeps
 * LATE_MS before its first call, so that side A is inside its collective when the message comes. */
static void run_pattern(ptsc_ctx_t *ctx, int t, int p, int round, uint32_t *sbw, unsigned char *rb)
{
    int op, coll, size;
    pattern_of(p, &op, &coll, &size);
    pattern_name(p, g_pname, sizeof g_pname);
    snprintf(g_pname + strlen(g_pname), sizeof g_pname - strlen(g_pname), " round %d", round);
    int id = p + NPAT * round; /* the tag, and the seed of the payload and of the reduced values */
    where_t *w = &g_where[t];
    int pr = w->peer_rank, pt = w->peer_thread, bytes = size_bytes[size], cap = bytes + SLACK;
    fill_msg(sbw, bytes, id, g_rank, t, pr, pt);
    memset(rb, PAD, (size_t)cap);
    ptsc_info_t info;
    memset(&info, 0xff, sizeof info);
    atomic_store(&w->since_ns, now_ns());
    at(t, "start");
    atomic_store(&w->round, round);
    atomic_store(&w->pat, p);
    double t0 = now_s(), blocked = 0;

    if (round == 1 && !w->is_a) {
        at(t, "nanosleep (late partner)");
        struct timespec late = {0, LATE_MS * 1000 * 1000};
        nanosleep(&late, NULL);
        t0 = now_s();
    }
    if (op == OP_PAIR) {
        ptsc_request_t req[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
        at(t, "ptsc_irecv");
        int rc = ptsc_irecv(ctx, rb, cap, MPI_BYTE, pr, pt, id, &req[0]);
        CHECK(rc == PTSC_OK, "%s: ptsc_irecv: %s: %s", g_pname, ptsc_status_name(rc), ptsc_last_error());
        at(t, "ptsc_isend");
        rc = ptsc_isend(ctx, sbw, bytes, MPI_BYTE, pr, pt, id, &req[1]);
        CHECK(rc == PTSC_OK, "%s: ptsc_isend: %s: %s", g_pname, ptsc_status_name(rc), ptsc_last_error());
        collective(ctx, t, id, coll);
        at(t, "ptsc_wait (receive)");
        rc = ptsc_wait_info(&req[0], &info);
        check_msg("ptsc_irecv + ptsc_wait_info", id, rb, bytes, pr, pt, g_rank, t, rc, &info);
        at(t, "ptsc_wait (send)");
        rc = ptsc_wait(&req[1]);
        CHECK(rc == PTSC_OK, "%s: ptsc_wait (isend): %s: %s", g_pname, ptsc_status_name(rc),
              ptsc_last_error());
    } else if (w->is_a) {
        ptsc_request_t req = PTSC_REQUEST_NULL;
        int rc;
        if (op == OP_ISEND) {
            at(t, "ptsc_isend");
            rc = ptsc_isend(ctx, sbw, bytes, MPI_BYTE, pr, pt, id, &req);
        } else {
            at(t, "ptsc_irecv");
            rc = ptsc_irecv(ctx, rb, cap, MPI_BYTE, pr, pt, id, &req);
        }
        CHECK(rc == PTSC_OK, "%s: %s: %s: %s", g_pname, op_name[op], ptsc_status_name(rc), ptsc_last_error());
        collective(ctx, t, id, coll);
        at(t, "ptsc_wait");
        if (op == OP_ISEND) {
            rc = ptsc_wait(&req);
            CHECK(rc == PTSC_OK, "%s: ptsc_wait (isend): %s: %s", g_pname, ptsc_status_name(rc),
                  ptsc_last_error());
        } else {
            rc = ptsc_wait_info(&req, &info);
            check_msg("ptsc_irecv + ptsc_wait_info", id, rb, bytes, pr, pt, g_rank, t, rc, &info);
        }
    } else {
        int rc;
        if (op == OP_ISEND) {
            at(t, "ptsc_recv");
            rc = ptsc_recv_info(ctx, rb, cap, MPI_BYTE, pr, pt, id, &info);
            blocked = now_s() - t0;
            check_msg("ptsc_recv_info", id, rb, bytes, pr, pt, g_rank, t, rc, &info);
        } else {
            at(t, "ptsc_send");
            rc = ptsc_send(ctx, sbw, bytes, MPI_BYTE, pr, pt, id);
            blocked = now_s() - t0;
            CHECK(rc == PTSC_OK, "%s: ptsc_send: %s: %s", g_pname, ptsc_status_name(rc), ptsc_last_error());
        }
        collective(ctx, t, id, coll);
    }
    atomic_store(&w->pat, -1);
    if (VERBOSE && (coll == C_SLEEP || coll == C_BUSY) && op != OP_PAIR && !w->is_a)
        printf("mpi_progress: [rank %d thread %d] %s: the blocking %s returned after %.1f ms (A computes %d "
               "ms)\n",
               g_rank, t, g_pname, op == OP_ISEND ? "ptsc_recv" : "ptsc_send", blocked * 1e3,
               coll == C_SLEEP ? 20 : 10);
}

static int worker(int t)
{
    ptsc_ctx_t *ctx = NULL;
    g_me = t;
    CHECK_OK(ptsc_thread_attach(t, &ctx));
    uint32_t *sbw = malloc((size_t)size_bytes[S_MANY]);
    unsigned char *rb = malloc((size_t)size_bytes[S_MANY] + SLACK);
    if (!sbw || !rb) {
        CHECK(0, "out of memory");
        exit(2);
    }
    for (int p = 0; p < NPAT; p++)
        if (selected[p]) {
            for (int round = 0; round < ROUNDS; round++)
                run_pattern(ctx, t, p, round, sbw, rb);
            if (__atomic_load_n(&g_failures, __ATOMIC_SEQ_CST) > 25)
                break;
        }
    free(sbw);
    free(rb);
    atomic_store(&g_where[t].since_ns, now_ns());
    at(t, "ptsc_thread_detach");
    atomic_store(&g_where[t].pat, NPAT); /* watched too: a detach that cannot drain hangs as well */
    int rc = ptsc_thread_detach();
    atomic_store(&g_where[t].pat, -1);
    CHECK(rc == PTSC_OK, "ptsc_thread_detach: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    return rc;
}

static void *thread_main(void *arg)
{
    worker((int)(intptr_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *dl = getenv("MPI_PROGRESS_DEADLINE");
    DEADLINE = dl && atof(dl) > 0 ? atof(dl) : SANITIZED ? 60 : 10;
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%d", (int)(DEADLINE / 2) > 0 ? (int)(DEADLINE / 2) : 1);
    setenv("PTSC_TIMEOUT", tmo, 0);
    const char *vb = getenv("MPI_PROGRESS_VERBOSE");
    VERBOSE = vb && strcmp(vb, "1") == 0;

    int nthreads = test_init(&argc, &argv, &R);
    T = nthreads;
    const char *te = getenv("MPI_PROGRESS_THREADS");
    if (te && atoi(te) > 0 && atoi(te) < nthreads)
        T = atoi(te);

    regex_t re;
    int use_re = argc > 1;
    if (use_re && regcomp(&re, argv[1], REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "FAIL mpi_progress: bad pattern regex '%s'\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int nsel = 0;
    for (int p = 0; p < NPAT; p++) {
        char name[64];
        pattern_name(p, name, sizeof name);
        selected[p] = !use_re || regexec(&re, name, 0, NULL, 0) == 0;
        nsel += selected[p];
    }
    if (use_re)
        regfree(&re);
    CHECK(nsel > 0, "no pattern matches '%s'", argv[1]);
    if (R % 2 != 0) {
        CHECK(0, "mpi_progress pairs ranks 0-1, 2-3, ...: it needs an even number of ranks, not %d", R);
        return test_finish("mpi_progress");
    }

    g_where = calloc((size_t)T, sizeof *g_where);
    mpicomm = calloc((size_t)T, sizeof *mpicomm);
    for (int t = 0; t < T; t++) {
        atomic_init(&g_where[t].pat, -1);
        atomic_init(&g_where[t].round, 0);
        atomic_init(&g_where[t].stage, "start");
        atomic_init(&g_where[t].since_ns, 0);
        /* Pairs: rank r with r^1, thread t with T-1-t. Side A: the lower rank XOR the parity of
         * min(t, T-1-t), which both sides of a pair agree on. */
        int pr = g_rank ^ 1, m = t < T - 1 - t ? t : T - 1 - t;
        g_where[t].peer_rank = pr;
        g_where[t].peer_thread = T - 1 - t;
        g_where[t].is_a = (g_rank < pr) ^ (m & 1);
        if (t == 0)
            mpicomm[t] = MPI_COMM_WORLD;
        else
            MPI_Comm_dup(MPI_COMM_WORLD, &mpicomm[t]);
    }
    if (g_rank == 0) {
        const char *comm = getenv("PTSC_COMM"), *st = getenv("PTSC_STAGING"),
                   *ch = getenv("PTSC_STAGING_CHUNK");
        printf("mpi_progress: %d ranks x %d threads, PTSC_COMM=%s PTSC_STAGING=%s PTSC_STAGING_CHUNK=%s, %d "
               "patterns, deadline %.0f s each\n",
               R, T, comm ? comm : "dup", st ? st : "auto", ch ? ch : "default", nsel, DEADLINE);
        fflush(stdout);
    }
    pthread_t wd;
    pthread_create(&wd, NULL, pattern_watchdog, NULL);
    pthread_t *th = malloc((size_t)T * sizeof *th);
    for (int t = 0; t < T; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    free(th);
    atomic_store(&g_stop, 1);
    pthread_join(wd, NULL);
    for (int t = 1; t < T; t++)
        MPI_Comm_free(&mpicomm[t]);
    free(mpicomm);
    free(g_where);
    return test_finish("mpi_progress");
}
