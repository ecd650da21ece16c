/*
 * Life cycle across ranks: init from two threads at once, the lazy-attach
 * index rule with a helper pthread holding index 0 (peers address OpenMP
 * thread t as (rank, t)), an index reused after its thread ended (the new
 * holder receives what peers sent to the index), and ptsc_finalize while
 * some attached threads exit and others stay attached (their later calls
 * are refused). The program initialises MPI itself, so the verdict is
 * reduced after ptsc_finalize. Plain C, so it also runs under
 * ThreadSanitizer (Criterion does not).
 */
#include "mpi_common.h"

#include <omp.h>

static int T, nranks, next_rank, prev_rank;

/* ------------------------------------------------------------------------ */

static void *init_thread(void *p)
{
    int *rc = p;
    *rc = ptsc_init(NULL, NULL);
    return NULL;
}

static int init_twice_at_once(void)
{
    int rc[2] = {1, 1};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, init_thread, &rc[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int ok = (rc[0] == PTSC_OK) + (rc[1] == PTSC_OK);
    int again = (rc[0] == PTSC_ERR_ALREADY_INITIALIZED) + (rc[1] == PTSC_ERR_ALREADY_INITIALIZED);
    CHECK(ok == 1 && again == 1, "ptsc_init from two threads returned %s and %s", ptsc_status_name(rc[0]),
          ptsc_status_name(rc[1]));
    return ok >= 1 ? PTSC_OK : PTSC_ERR_INTERNAL;
}

/* ------------------------------------------------------------------------ */

struct holder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int attached, release, rc;
};

static void *holder_main(void *p)
{
    struct holder *h = p;
    int rc = ptsc_thread_attach(0, NULL);
    pthread_mutex_lock(&h->mu);
    h->rc = rc;
    h->attached = 1;
    pthread_cond_broadcast(&h->cv);
    while (!h->release)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    if (rc == PTSC_OK)
        ptsc_thread_detach();
    return NULL;
}

/* With a helper holding index 0, OpenMP threads 1..T-1 attach lazily (ctx
 * NULL) as their thread numbers and exchange messages with the same thread
 * number of the neighbour ranks; thread 0 gets PTSC_ERR_THREAD_TAKEN. */
static int lazy_rule_with_helper(void)
{
    struct holder h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    pthread_create(&th, NULL, holder_main, &h);
    pthread_mutex_lock(&h.mu);
    while (!h.attached)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    CHECK(h.rc == PTSC_OK, "helper attach: %s", ptsc_status_name(h.rc));
    MPI_Barrier(MPI_COMM_WORLD); /* every rank's helper holds index 0 */

#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num();
        ptsc_ctx_t *ctx = NULL;
        int rc = ptsc_self(&ctx), idx = -1;
        if (t == 0) {
            CHECK(rc == PTSC_ERR_THREAD_TAKEN,
                  "OpenMP thread 0 (index 0 held by a helper): ptsc_self gave %s", ptsc_status_name(rc));
        } else if (rc != PTSC_OK || ptsc_ctx_index(ctx, &idx) != PTSC_OK || idx != t) {
            CHECK(0, "OpenMP thread %d attached lazily as index %d (%s)", t, idx, ptsc_status_name(rc));
        } else if (nranks > 1) {
            g_me = t;
            uint32_t out[64], in[64];
            int n = HDR + 10 + t;
            memset(in, 0, sizeof in);
            fill(out, n, g_rank, t, next_rank, t, 1);
            rc = ptsc_sendrecv(NULL, out, n, MPI_UINT32_T, next_rank, t, 7, in, n, MPI_UINT32_T, prev_rank, t,
                               7);
            CHECK(rc == PTSC_OK, "sendrecv: %s: %s", ptsc_status_name(rc), ptsc_last_error());
            if (rc == PTSC_OK)
                VERIFY(in, n, prev_rank, t, g_rank, t, 1);
        }
#pragma omp barrier
        if (rc == PTSC_OK)
            CHECK(ptsc_thread_detach() == PTSC_OK, "detach: %s", ptsc_last_error());
    }
    pthread_mutex_lock(&h.mu);
    h.release = 1;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(th, NULL);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */

struct reuse {
    ptsc_ctx_t *stale;
    int rc, got_ok;
};

static void *attach_and_end(void *p)
{
    struct reuse *r = p;
    r->rc = ptsc_thread_attach(1, &r->stale);
    return NULL; /* ends attached: the exit destructor frees index 1 */
}

static void *new_holder(void *p)
{
    struct reuse *r = p;
    ptsc_ctx_t *ctx = NULL;
    g_me = 1;
    r->rc = ptsc_thread_attach(1, &ctx);
    if (r->rc != PTSC_OK)
        return NULL;
    if (ctx != r->stale) {
        int x = -1, rc = ptsc_ctx_index(r->stale, &x);
        CHECK(rc == PTSC_ERR_WRONG_THREAD, "the ended thread's context read by the new holder: %s",
              ptsc_status_name(rc));
    }
    uint32_t in[32];
    memset(in, 0, sizeof in);
    int rc = ptsc_recv(ctx, in, 20, MPI_UINT32_T, prev_rank, 0, 9);
    CHECK(rc == PTSC_OK, "recv by the new holder of index 1: %s: %s", ptsc_status_name(rc),
          ptsc_last_error());
    r->got_ok = rc == PTSC_OK && VERIFY(in, 20, prev_rank, 0, g_rank, 1, 2);
    ptsc_thread_detach();
    return NULL;
}

/* Index 1's thread ends attached; peers send to (rank, 1) meanwhile; a new
 * thread takes index 1 and receives it. */
static int index_reused_after_thread_ended(void)
{
    struct reuse r = {0};
    pthread_t th;
    pthread_create(&th, NULL, attach_and_end, &r);
    pthread_join(th, NULL);
    CHECK(r.rc == PTSC_OK, "attach 1: %s", ptsc_status_name(r.rc));
    g_me = 0;
    CHECK_OK(ptsc_thread_attach(0, NULL));
    uint32_t out[32];
    fill(out, 20, g_rank, 0, next_rank, 1, 2);
    CHECK_OK(ptsc_send(NULL, out, 20, MPI_UINT32_T, next_rank, 1, 9));
    struct reuse r2 = {.stale = r.stale};
    pthread_create(&th, NULL, new_holder, &r2);
    pthread_join(th, NULL);
    CHECK(r2.rc == PTSC_OK && r2.got_ok, "new holder of index 1: %s", ptsc_status_name(r2.rc));
    CHECK_OK(ptsc_thread_detach());
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */

struct worker {
    int index, stay, rc, rc_after[3];
};

static pthread_barrier_t start_bar, done_bar;

static void *worker_main(void *p)
{
    struct worker *w = p;
    g_me = w->index;
    w->rc = ptsc_thread_attach(w->index, NULL);
    if (w->rc == PTSC_OK && nranks > 1) {
        uint32_t out[64], in[64];
        int n = HDR + 20;
        memset(in, 0, sizeof in);
        fill(out, n, g_rank, w->index, next_rank, w->index, 3);
        w->rc = ptsc_sendrecv(NULL, out, n, MPI_UINT32_T, next_rank, w->index, 11, in, n, MPI_UINT32_T,
                              prev_rank, w->index, 11);
        if (w->rc == PTSC_OK && !VERIFY(in, n, prev_rank, w->index, g_rank, w->index, 3))
            w->rc = PTSC_ERR_INTERNAL;
    }
    pthread_barrier_wait(&start_bar);
    if (!w->stay)
        return NULL; /* exits attached while the main thread finalizes */
    pthread_barrier_wait(&done_bar);
    ptsc_ctx_t *ctx = NULL;
    w->rc_after[0] = ptsc_sync(NULL, PTSC_SCOPE_NONE);
    w->rc_after[1] = ptsc_self(&ctx);
    w->rc_after[2] = ptsc_thread_detach();
    return NULL;
}

static void finalize_while_threads_exit(void)
{
    struct worker w[64];
    pthread_t th[64];
    int n = T - 1, stay = 0;
    for (int i = 0; i < n; i++)
        stay += (w[i].stay = i % 2 == 1);
    pthread_barrier_init(&start_bar, NULL, (unsigned)n + 1);
    pthread_barrier_init(&done_bar, NULL, (unsigned)stay + 1);
    for (int i = 0; i < n; i++) {
        w[i].index = i + 1;
        w[i].rc = PTSC_ERR_INTERNAL;
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    g_me = 0;
    int rc = ptsc_thread_attach(0, NULL);
    CHECK(rc == PTSC_OK, "attach 0: %s", ptsc_status_name(rc));
    pthread_barrier_wait(&start_bar);
    rc = ptsc_finalize();
    CHECK(rc == PTSC_OK, "ptsc_finalize with threads exiting and attached: %s: %s", ptsc_status_name(rc),
          ptsc_last_error());
    pthread_barrier_wait(&done_bar);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].rc == PTSC_OK, "worker %d: %s", w[i].index, ptsc_status_name(w[i].rc));
        for (int k = 0; w[i].stay && k < 3; k++)
            CHECK(w[i].rc_after[k] == PTSC_ERR_FINALIZED, "worker %d, call %d after finalize: %s", w[i].index,
                  k, ptsc_status_name(w[i].rc_after[k]));
    }
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    next_rank = (g_rank + 1) % nranks;
    prev_rank = (g_rank + nranks - 1) % nranks;
    pthread_create(&g_watchdog, NULL, watchdog, NULL);
    if (init_twice_at_once() == PTSC_OK) {
        ptsc_size(NULL, &T);
        if (T < 2 || T > 64)
            CHECK(0, "needs 2..64 thread slots, PTSC_MAX_THREADS gives %d", T);
        else {
            lazy_rule_with_helper();
            MPI_Barrier(MPI_COMM_WORLD);
            index_reused_after_thread_ended();
            MPI_Barrier(MPI_COMM_WORLD);
            finalize_while_threads_exit();
        }
    }
    int mine = __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST), total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const char *comm = getenv("PTSC_COMM");
    if (g_rank == 0)
        printf("%s mpi_lifecycle: %d ranks x %d threads, PTSC_COMM=%s, %d failed checks\n",
               total ? "FAILED" : "PASSED", nranks, T, comm ? comm : "dup", total);
    fflush(stdout);
    __atomic_store_n(&g_done, 1, __ATOMIC_SEQ_CST);
    pthread_join(g_watchdog, NULL);
    MPI_Finalize();
    return total ? 1 : 0;
}
