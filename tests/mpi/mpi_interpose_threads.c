/*
 * libptsc-mpi (src/interpose.c) under MPI_THREAD_MULTIPLE: a plain MPI
 * program, linked with the interposer and run with PTSC_STAGING=always (no
 * device: host buffers are staged, so every request below has a host copy
 * in the interposer's request table).
 *
 *  threads     T threads per rank, each exchanging rounds of non-blocking
 *              messages with the same thread on the neighbouring ranks, all
 *              at once, each round completed another way: Waitall, Waitany,
 *              Testsome, Waitsome, Testany, Test, Testall, freed sends, and
 *              persistent requests restarted with new data. Messages of
 *              mixed sizes, so some requests complete at once (and MPI
 *              hands their handle values out again at once) while others
 *              wait. Every received element is checked.
 *  persistent  Send_init / Bsend_init / Recv_init started 20 times with new
 *              data each time (Start and Startall; completed by Wait, Test
 *              and Waitall): MPI_Start may return a new handle (Open MPI
 *              does for a send the network still holds), which the
 *              interposer must follow.
 *  mpi4        MPI-4 calls where mpi.h declares them: MPI_Isendrecv,
 *              MPI_Isendrecv_replace (staged) and partitioned
 *              communication (forwarded; MPI_Pready synchronises).
 *
 * MPI_INTERPOSE_THREADS=T and MPI_INTERPOSE_ROUNDS=R change the load.
 * Prints "PASSED mpi_interpose_threads" on rank 0 when every rank passed.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static atomic_int failed;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "mpi_interpose_threads [rank %d] FAIL line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            atomic_fetch_add(&failed, 1);                                                      \
        }                                                                                      \
    } while (0)
#define MPI_OK(call) CHECK((call) == MPI_SUCCESS, "%s failed", #call)

/* MPI_STATUSES_IGNORE, which GCC cannot see through to warn that MPICH's
 * declaration of an array argument is not met. */
static MPI_Status *__attribute__((noinline)) statuses_ignore(void) { return MPI_STATUSES_IGNORE; }

/* Element k of message j of round r from rank `from`, thread t. */
static int val(int from, int t, int r, int j, int k)
{
    return ((from * 64 + t) * 4096 + r * 16 + j) * 1024 + k;
}

enum { K = 4, MAXN = 3000, STYLES = 9 };
static int T = 8, R = 48;

/* Message j of a round: sizes from 1 to MAXN ints. */
static int count_of(int r, int j)
{
    static const int sizes[] = {1, 7, 64, 700, 3000, 2, 250, 1500};
    return sizes[(r + j * 3) % 8];
}

typedef struct {
    int t;
    int *sb[K], *rb[K]; /* MAXN ints each */
    int *freed[64];     /* the buffers of freed sends, released once all are received */
    int nfreed;
} worker_t;

static int check_recv(const worker_t *w, int prev, int r, int j)
{
    int n = count_of(r, j), bad = 0;
    for (int k = 0; k < n; k++)
        bad += w->rb[j][k] != val(prev, w->t, r, j, k);
    bad += w->rb[j][n] != -1; /* past the message: untouched */
    CHECK(bad == 0, "thread %d round %d (style %d) message %d: %d elements wrong (first %d, want %d)", w->t,
          r, r % STYLES, j, bad, w->rb[j][0], val(prev, w->t, r, j, 0));
    return bad;
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    MPI_Request req[2 * K], *rr = req, *sr = req + K;
    MPI_Status sts[2 * K];
    /* Persistent pairs, restarted by the persistent style. */
    MPI_Request pr[2 * K];
    for (int j = 0; j < K; j++) {
        MPI_OK(MPI_Recv_init(w->rb[j], MAXN, MPI_INT, prev, w->t * 64 + 40 + j, MPI_COMM_WORLD, &pr[j]));
        MPI_OK(MPI_Send_init(w->sb[j], MAXN, MPI_INT, next, w->t * 64 + 40 + j, MPI_COMM_WORLD, &pr[K + j]));
    }
    for (int r = 0; r < R; r++) {
        int style = r % STYLES, tag = w->t * 64 + (r % 2) * 16;
        for (int j = 0; j < K; j++) {
            for (int k = 0; k < MAXN; k++)
                w->sb[j][k] = val(rank, w->t, r, j, k);
            for (int k = 0; k <= MAXN; k++)
                w->rb[j][k] = -1;
        }
        if (style == 8) { /* persistent: full-size messages */
            MPI_OK(MPI_Startall(K, pr));
            for (int j = 0; j < K; j++)
                MPI_OK(MPI_Start(&pr[K + j]));
            MPI_OK(MPI_Waitall(2 * K, pr, sts));
            for (int j = 0; j < K; j++) {
                int bad = 0;
                for (int k = 0; k < MAXN; k++)
                    bad += w->rb[j][k] != val(prev, w->t, r, j, k);
                CHECK(bad == 0, "thread %d round %d persistent message %d: %d elements wrong", w->t, r, j,
                      bad);
            }
            continue;
        }
        for (int j = 0; j < K; j++)
            MPI_OK(MPI_Irecv(w->rb[j], count_of(r, j), MPI_INT, prev, tag + j, MPI_COMM_WORLD, &rr[j]));
        int *extra = NULL;
        for (int j = 0; j < K; j++) {
            const int *src = w->sb[j];
            if (style == 7 && w->nfreed < 64) { /* freed sends: a buffer of their own, kept to the end */
                extra = malloc(MAXN * sizeof *extra);
                memcpy(extra, w->sb[j], MAXN * sizeof *extra);
                w->freed[w->nfreed++] = extra;
                src = extra;
            }
            MPI_OK(MPI_Isend(src, count_of(r, j), MPI_INT, next, tag + j, MPI_COMM_WORLD, &sr[j]));
            if (src == extra)
                MPI_OK(MPI_Request_free(&sr[j]));
        }
        int left = 2 * K, idx[2 * K], out;
        switch (style) {
        case 0: /* Waitall, receives and sends together */
            MPI_OK(MPI_Waitall(2 * K, req, sts));
            break;
        case 1: /* Waitany */
            while (left-- > 0) {
                int i = -1;
                MPI_OK(MPI_Waitany(2 * K, req, &i, &sts[0]));
                CHECK(i != MPI_UNDEFINED, "Waitany: no request left with %d to go", left + 1);
            }
            break;
        case 2: /* Testsome polling */
            while (left > 0) {
                MPI_OK(MPI_Testsome(2 * K, req, &out, idx, sts));
                left -= out == MPI_UNDEFINED ? left : out;
            }
            break;
        case 3: /* Waitsome */
            while (left > 0) {
                MPI_OK(MPI_Waitsome(2 * K, req, &out, idx, statuses_ignore()));
                left -= out == MPI_UNDEFINED ? left : out;
            }
            break;
        case 4: /* Testany polling */
            while (left > 0) {
                int i = -1, flag = 0;
                MPI_OK(MPI_Testany(2 * K, req, &i, &flag, MPI_STATUS_IGNORE));
                left -= flag && i != MPI_UNDEFINED;
                if (flag && i == MPI_UNDEFINED)
                    left = 0;
            }
            break;
        case 5: /* Test, one request after the other, in reverse */
            for (int i = 2 * K - 1; i >= 0; i--)
                for (int flag = 0; !flag;)
                    MPI_OK(MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE));
            break;
        case 6: /* Testall polling; the sends by Wait */
            for (int flag = 0; !flag;)
                MPI_OK(MPI_Testall(K, rr, &flag, sts));
            for (int j = 0; j < K; j++)
                MPI_OK(MPI_Wait(&sr[j], MPI_STATUS_IGNORE));
            break;
        case 7: /* the sends were freed: the receives by Waitall */
            MPI_OK(MPI_Waitall(K, rr, statuses_ignore()));
            break;
        }
        for (int j = 0; j < 2 * K; j++)
            CHECK(req[j] == MPI_REQUEST_NULL || (style == 7 && j >= K), "round %d: request %d not completed",
                  r, j);
        for (int j = 0; j < K; j++)
            check_recv(w, prev, r, j);
    }
    for (int j = 0; j < 2 * K; j++)
        MPI_OK(MPI_Request_free(&pr[j]));
    return NULL;
}

static void threads(void)
{
    pthread_t tid[64];
    worker_t w[64];
    for (int t = 0; t < T; t++) {
        w[t].t = t;
        w[t].nfreed = 0;
        for (int j = 0; j < K; j++) {
            w[t].sb[j] = malloc(MAXN * sizeof(int));
            w[t].rb[j] = malloc((MAXN + 1) * sizeof(int));
        }
        pthread_create(&tid[t], NULL, worker, &w[t]);
    }
    for (int t = 0; t < T; t++)
        pthread_join(tid[t], NULL);
    /* Freed sends have been received once every rank's threads are done. */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < K; j++) {
            free(w[t].sb[j]);
            free(w[t].rb[j]);
        }
        for (int i = 0; i < w[t].nfreed; i++)
            free(w[t].freed[i]);
    }
}

/* Persistent sends of three kinds and a persistent receive, 20 starts each,
 * new data every time; even ranks send to the next odd one. */
static void persistent(void)
{
    enum { ITER = 20, KINDS = 3 };
    enum { N = 20000 };
    int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    if (peer >= size)
        return;
    int *buf[KINDS];
    MPI_Request pr[KINDS];
    int bsize = 0;
    MPI_Pack_size(N, MPI_INT, MPI_COMM_WORLD, &bsize);
    bsize = (bsize + MPI_BSEND_OVERHEAD) * ITER; /* room for every start's message */
    char *attach = malloc((size_t)bsize);
    MPI_OK(MPI_Buffer_attach(attach, bsize));
    for (int i = 0; i < KINDS; i++) {
        buf[i] = malloc(N * sizeof(int));
        if (rank % 2)
            MPI_OK(MPI_Recv_init(buf[i], N, MPI_INT, peer, 70 + i, MPI_COMM_WORLD, &pr[i]));
        else if (i == 1)
            MPI_OK(MPI_Bsend_init(buf[i], N, MPI_INT, peer, 70 + i, MPI_COMM_WORLD, &pr[i]));
        else if (i == 2)
            MPI_OK(MPI_Ssend_init(buf[i], N, MPI_INT, peer, 70 + i, MPI_COMM_WORLD, &pr[i]));
        else
            MPI_OK(MPI_Send_init(buf[i], N, MPI_INT, peer, 70 + i, MPI_COMM_WORLD, &pr[i]));
    }
    int moved[KINDS] = {0}, wrong = 0, bsend_wrong = 0;
#if defined(OPEN_MPI)
    const int ompi = 1;
#else
    const int ompi = 0;
#endif
    for (int it = 0; it < ITER; it++) {
        for (int i = 0; i < KINDS; i++)
            for (int k = 0; k < N; k++)
                buf[i][k] = rank % 2 ? -1 : val(rank, i, it, 0, k);
        MPI_Request before[KINDS];
        memcpy(before, pr, sizeof pr);
        if (it % 2) {
            MPI_OK(MPI_Startall(KINDS, pr));
        } else {
            for (int i = 0; i < KINDS; i++)
                MPI_OK(MPI_Start(&pr[i]));
        }
        for (int i = 0; i < KINDS; i++)
            moved[i] += memcmp(&before[i], &pr[i], sizeof pr[i]) != 0;
        switch (it % 3) {
        case 0:
            MPI_OK(MPI_Waitall(KINDS, pr, statuses_ignore()));
            break;
        case 1:
            for (int i = 0; i < KINDS; i++)
                MPI_OK(MPI_Wait(&pr[i], MPI_STATUS_IGNORE));
            break;
        default:
            for (int i = 0; i < KINDS; i++)
                for (int flag = 0; !flag;)
                    MPI_OK(MPI_Test(&pr[i], &flag, MPI_STATUS_IGNORE));
        }
        for (int i = 0; rank % 2 && i < KINDS; i++) {
            int bad = 0;
            for (int k = 0; k < N; k++)
                bad += buf[i][k] != val(peer, i, it, 0, k);
            bsend_wrong += i == 1 && bad;
            if (i == 1 && bad && ompi)
                continue; /* below */
            CHECK(bad == 0, "persistent kind %d start %d: %d elements wrong (first %d, want %d)", i, it, bad,
                  buf[i][0], val(peer, i, it, 0, 0));
            wrong += bad;
        }
    }
    /* Open MPI 4.1.4 itself sends a restarted persistent Bsend that it gave
     * a new request (the old one still in the network) from its attach
     * buffer now and then: wrong data at 0-2 of 20 starts at 2 ranks, up to
     * 8 at 4, without this library (PTSC_STAGING=never). Its data is not
     * checked there; that the entry follows the new handle is (an entry
     * left behind is reported by MPI_Finalize: "never completed"). */
    CHECK(ompi || bsend_wrong == 0, "persistent Bsend: wrong data at %d of %d starts", bsend_wrong, ITER);
    CHECK(wrong == 0, "persistent: %d elements wrong over %d starts", wrong, ITER);
    if (rank == 1)
        printf("mpi_interpose_threads: persistent Bsend: wrong data at %d of %d starts\n", bsend_wrong, ITER);
    if (rank == 0)
        printf("mpi_interpose_threads: persistent: new handles at %d, %d, %d of %d starts\n", moved[0],
               moved[1], moved[2], ITER);
    for (int i = 0; i < KINDS; i++) {
        MPI_OK(MPI_Request_free(&pr[i]));
        free(buf[i]);
    }
    void *det;
    MPI_OK(MPI_Buffer_detach(&det, &bsize));
    free(attach);
}

#if MPI_VERSION >= 4
/* Buffer arguments the interposer has seen in this process. */
static unsigned long seen(void)
{
    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    unsigned long n = 0;
    if (query)
        query(&n, NULL, NULL, NULL);
    return n;
}

/* Each call must reach the interposer (a wrapper that is missing passes
 * a device buffer unseen), and its data arrive. */
static void mpi4(void)
{
    unsigned long n0 = seen();
    enum { N = 1000, P = 4 };
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    int *sb = malloc(N * sizeof(int)), *rb = malloc(N * sizeof(int));
    for (int k = 0; k < N; k++)
        sb[k] = val(rank, 0, 1, 0, k), rb[k] = -1;
    MPI_Request req;
    MPI_OK(MPI_Isendrecv(sb, N, MPI_INT, next, 80, rb, N, MPI_INT, prev, 80, MPI_COMM_WORLD, &req));
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    int bad = 0;
    for (int k = 0; k < N; k++)
        bad += rb[k] != val(prev, 0, 1, 0, k);
    CHECK(bad == 0, "MPI_Isendrecv: %d elements wrong", bad);
    CHECK(seen() == n0 + 2, "MPI_Isendrecv: %ld buffers seen, not 2", (long)(seen() - n0));
    for (int k = 0; k < N; k++)
        rb[k] = val(rank, 0, 2, 0, k);
    MPI_OK(MPI_Isendrecv_replace(rb, N, MPI_INT, next, 81, prev, 81, MPI_COMM_WORLD, &req));
    for (int flag = 0; !flag;)
        MPI_OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    bad = 0;
    for (int k = 0; k < N; k++)
        bad += rb[k] != val(prev, 0, 2, 0, k);
    CHECK(bad == 0, "MPI_Isendrecv_replace: %d elements wrong", bad);
    CHECK(seen() == n0 + 3, "MPI_Isendrecv_replace: %ld buffers seen, not 1", (long)(seen() - n0 - 2));
    /* Partitioned: P partitions of N / P ints, twice. */
    MPI_Request pp[2]; /* send, receive */
    MPI_OK(MPI_Psend_init(sb, P, N / P, MPI_INT, next, 82, MPI_COMM_WORLD, MPI_INFO_NULL, &pp[0]));
    MPI_OK(MPI_Precv_init(rb, P, N / P, MPI_INT, prev, 82, MPI_COMM_WORLD, MPI_INFO_NULL, &pp[1]));
    CHECK(seen() == n0 + 5, "MPI_Psend_init, MPI_Precv_init: %ld buffers seen, not 2",
          (long)(seen() - n0 - 3));
    for (int it = 0; it < 2; it++) {
        for (int k = 0; k < N; k++)
            rb[k] = -1;
        MPI_OK(MPI_Start(&pp[1]));
        MPI_OK(MPI_Start(&pp[0]));
        for (int p = 0; p < P; p++) {
            for (int k = p * (N / P); k < (p + 1) * (N / P); k++)
                sb[k] = val(rank, 1, it, 0, k);
            if (p == 1)
                MPI_OK(MPI_Pready_range(1, 1, pp[0]));
            else if (p == 3) {
                int list[] = {3};
                MPI_OK(MPI_Pready_list(1, list, pp[0]));
            } else
                MPI_OK(MPI_Pready(p, pp[0]));
        }
        MPI_OK(MPI_Waitall(2, pp, statuses_ignore()));
        bad = 0;
        for (int k = 0; k < N; k++)
            bad += rb[k] != val(prev, 1, it, 0, k);
        CHECK(bad == 0, "partitioned round %d: %d elements wrong", it, bad);
    }
    MPI_OK(MPI_Request_free(&pp[0]));
    MPI_OK(MPI_Request_free(&pp[1]));
    free(sb);
    free(rb);
}
#endif

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *e = getenv("MPI_INTERPOSE_THREADS");
    if (e && atoi(e) > 0 && atoi(e) <= 64)
        T = atoi(e);
    if ((e = getenv("MPI_INTERPOSE_ROUNDS")) && atoi(e) > 0)
        R = atoi(e);
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    CHECK(size >= 2, "run it on 2 ranks or more");
    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    CHECK(query && query(NULL, NULL, NULL, NULL) == 1, "libptsc-mpi is not active");
    persistent();
    threads();
#if MPI_VERSION >= 4
    mpi4();
#endif
    unsigned long staged = 0;
    if (query)
        query(NULL, NULL, NULL, &staged);
    const char *st = getenv("PTSC_STAGING");
    if (st && strcmp(st, "always") == 0)
        CHECK(staged > (unsigned long)(T * R), "only %lu buffers staged", staged);
    int mine = atomic_load(&failed), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(all ? "mpi_interpose_threads: %d failed checks\n"
                   : "PASSED mpi_interpose_threads (%d failed checks)\n",
               all);
    MPI_Finalize();
    return all != 0;
}
