/*
 * Producer x scope matrix: which GPU work each sync scope orders a send
 * after, checked against what docs/design.md promises.
 *
 * Two ranks, NT threads each. In every cell, for `rounds` rounds, thread t
 * of rank 0 has a kernel spin for `spin_us` and then fill its 4 MiB device
 * buffer with a round-specific pattern, and calls ptsc_send at once; thread
 * t of rank 1 receives into a device buffer and counts the wrong elements
 * with a kernel. A message with any wrong element is stale. Producers:
 *
 *   bound      the kernel on the sender's bound stream (ptsc_ctx_stream)
 *   legacy     `<<<grid, block>>>` with no stream, from a translation unit
 *              compiled without per-thread default streams
 *              (gpu_kernels_legacy.cu): the legacy default stream, as most
 *              CUDA code launches
 *   nonblock   a stream the sending thread created with cudaStreamNonBlocking
 *   other      a blocking stream created by ANOTHER thread: a helper thread
 *              launches the kernel, then tells the sender on the host (a
 *              mutex, no GPU sync), and the sender sends
 *   lazy       cudaStreamPerThread, from a thread attached lazily by
 *              ptsc_self (so `auto` means global for it)
 *
 * The first four run on explicitly attached threads (ptsc_thread_attach),
 * `lazy` on fresh threads afterwards. Scopes: none, thread, global, device,
 * auto. covered() states the promise, from the path (staged when MPI is not
 * CUDA-aware: the staging copy on the bound stream then orders the send;
 * read per cell from the sender's staged_bytes counter) and the
 * PTSC_STREAM kind (read back from the bound stream). A covered
 * cell must have 0 stale messages; an uncovered one at least 1 in its
 * rounds x NT messages, so the test fails if it cannot see the race. Rank
 * 1 prints the matrix as a markdown table (stale messages per cell) for
 * docs/design.md.
 *
 * Several sending threads: on the H200 with Open MPI's smcuda a single
 * sending thread almost never showed the race on the direct path, eight
 * always did (see test_gpu_race.c).
 *
 * Usage: test_gpu_producers [rounds [spin_us]] (defaults 10, 5000).
 */
#include "gpu_test.h"

#include <pthread.h>
#include <stdint.h>

#define NT 8
#define BYTES (4u << 20)
#define NELEM (BYTES / sizeof(int))

enum { P_BOUND, P_LEGACY, P_NONBLOCK, P_OTHER, P_LAZY, NPROD };
static const char *const prod_name[NPROD] = {
    "bound stream", "legacy default stream (default-compiled `<<<g, b>>>`)", "own non-blocking stream",
    "another thread's blocking stream", "cudaStreamPerThread, lazily attached thread"};

enum { K_PER_THREAD, K_OWNED, K_LEGACY };
static const char *const kind_name[] = {"per-thread", "owned", "legacy"};

static const ptsc_scope_t scopes[] = {PTSC_SCOPE_NONE, PTSC_SCOPE_THREAD, PTSC_SCOPE_GLOBAL,
                                      PTSC_SCOPE_DEVICE, PTSC_SCOPE_AUTO};
static const char *const scope_name[] = {"auto", "none", "thread", "global", "device"};
#define NSC (int)(sizeof scopes / sizeof scopes[0])

static int rounds = 10;
static unsigned spin_us = 5000;
static int staged, kind = -1;

static pthread_barrier_t bar;
static atomic_ullong stale_cur, staged_cur;
static unsigned long long stale[NPROD][NSC]; /* rank 1 */
static int cell_staged[NPROD][NSC];          /* rank 0, then sent to rank 1 */

/*
 * What docs/design.md promises: 1 when a send of a buffer written by
 * `producer` is ordered after that kernel at `scope`.
 *
 *  - device waits for everything; nothing else waits for a non-blocking
 *    stream.
 *  - auto is thread for an explicitly attached thread, global for a lazy
 *    one (the `lazy` producer's sender).
 *  - global (cudaStreamLegacy) waits for every blocking stream: the bound
 *    stream, the legacy stream, per-thread streams, other threads' streams.
 *  - thread waits, through an event recorded on the bound stream, for the
 *    bound stream and the legacy-stream work queued before; with
 *    PTSC_STREAM=legacy the bound stream is the legacy stream, whose sync
 *    waits for every blocking stream. On the staging path the copy queued
 *    on the bound stream orders exactly the same work, so there `none`
 *    covers what `thread` covers (and thread performs no sync).
 *  - none on the direct path: nothing.
 */
static int covered(int producer, ptsc_scope_t scope, int is_staged, int stream_kind)
{
    if (scope == PTSC_SCOPE_AUTO)
        scope = producer == P_LAZY ? PTSC_SCOPE_GLOBAL : PTSC_SCOPE_THREAD;
    if (scope == PTSC_SCOPE_DEVICE)
        return 1;
    if (producer == P_NONBLOCK)
        return 0;
    if (scope == PTSC_SCOPE_GLOBAL)
        return 1;
    if (scope == PTSC_SCOPE_NONE && !is_staged)
        return 0;
    if (stream_kind == K_LEGACY)
        return 1;
    return producer == P_BOUND || producer == P_LEGACY || (producer == P_LAZY && stream_kind == K_PER_THREAD);
}

/* The helper of `other`: owns a blocking stream and fills on request. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int device;
    int *buf;
    int seed;
    int pending; /* 1: a fill is asked for; back to 0 once launched */
    int quit;
} helper_t;

static void *helper_main(void *p)
{
    helper_t *h = p;
    cudaStream_t s = NULL;
    GT_CUDA(cudaSetDevice(h->device));
    GT_CUDA(cudaStreamCreate(&s)); /* blocking: cudaStreamDefault */
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->pending && !h->quit)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->quit)
            break;
        GT_CUDA(ptsc_tk_spin_fill(h->buf, NELEM, h->seed, spin_us, s));
        h->pending = 0;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    GT_CUDA(cudaStreamSynchronize(s));
    GT_CUDA(cudaStreamDestroy(s));
    return NULL;
}

/* Host-side handoff only: returns once the helper has launched the kernel. */
static void helper_fill(helper_t *h, int *buf, int seed)
{
    pthread_mutex_lock(&h->mu);
    h->buf = buf;
    h->seed = seed;
    h->pending = 1;
    pthread_cond_broadcast(&h->cv);
    while (h->pending)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

typedef struct {
    ptsc_ctx_t *ctx;
    int t;
    cudaStream_t bound, nonblock;
    helper_t *helper;
    int *buf;
    unsigned long long *bad; /* pinned counter (rank 1) */
} sender_t;

static void produce(sender_t *w, int producer, int seed)
{
    switch (producer) {
    case P_BOUND:
        GT_CUDA(ptsc_tk_spin_fill(w->buf, NELEM, seed, spin_us, w->bound));
        break;
    case P_LEGACY:
        GT_CUDA(ptsc_tk_spin_fill_default(w->buf, NELEM, seed, spin_us));
        break;
    case P_NONBLOCK:
        GT_CUDA(ptsc_tk_spin_fill(w->buf, NELEM, seed, spin_us, w->nonblock));
        break;
    case P_OTHER:
        helper_fill(w->helper, w->buf, seed);
        break;
    default: /* P_LAZY */
        GT_CUDA(ptsc_tk_spin_fill(w->buf, NELEM, seed, spin_us, cudaStreamPerThread));
        break;
    }
}

/* One cell: `rounds` messages per thread, then rank 1's thread 0 files the count. */
static void run_cell(sender_t *w, int producer, int sc)
{
    ptsc_stats_t before, after;
    GT_OK(ptsc_ctx_set_scope(w->ctx, scopes[sc], NULL));
    GT_OK(ptsc_ctx_stats(w->ctx, &before));
    for (int r = 0; r < rounds; r++) {
        int seed = ((producer * NSC + sc) * rounds + r) * NT + w->t + 1;
        if (gt_rank == 0) {
            produce(w, producer, seed);
            GT_OK(ptsc_send(w->ctx, w->buf, (int)NELEM, MPI_INT, 1, w->t, r));
        } else {
            GT_OK(ptsc_recv(w->ctx, w->buf, (int)NELEM, MPI_INT, 0, w->t, r));
            *w->bad = 0;
            GT_CUDA(ptsc_tk_count_bad(w->buf, NELEM, seed, w->bad, w->bound));
            GT_CUDA(cudaStreamSynchronize(w->bound));
            if (*w->bad)
                atomic_fetch_add(&stale_cur, 1);
        }
    }
    /* The path the sends took, from the sender's counters: the staging
     * flag of ptsc_features is the rule, but the engine may also stage
     * smaller device messages on a CUDA-aware MPI (PTSC_DIRECT_MIN). */
    GT_OK(ptsc_ctx_stats(w->ctx, &after));
    if (gt_rank == 0)
        atomic_fetch_add(&staged_cur, after.staged_bytes - before.staged_bytes);
    /* Uncovered cells leave kernels running on some stream: drain them all. */
    GT_CUDA(cudaDeviceSynchronize());
    pthread_barrier_wait(&bar);
    if (gt_rank == 1 && w->t == 0)
        stale[producer][sc] = atomic_exchange(&stale_cur, 0);
    if (gt_rank == 0 && w->t == 0)
        cell_staged[producer][sc] = atomic_exchange(&staged_cur, 0) > 0;
    pthread_barrier_wait(&bar);
}

static int stream_kind(cudaStream_t s)
{
    return s == cudaStreamPerThread ? K_PER_THREAD : s == cudaStreamLegacy ? K_LEGACY : K_OWNED;
}

/* Common set-up of a sending or receiving thread once it has a context. */
static int sender_init(sender_t *w, ptsc_ctx_t *ctx)
{
    w->ctx = ctx;
    GT_OK(ptsc_ctx_index(ctx, &w->t));
    w->bound = gt_stream(ctx);
    GT_CUDA(cudaMalloc((void **)&w->buf, BYTES));
    GT_CUDA(cudaMallocHost((void **)&w->bad, sizeof *w->bad));
    if (w->buf == NULL || w->bad == NULL || w->t < 0 || w->t >= NT)
        return 0;
    GT_CUDA(ptsc_tk_spin_fill(w->buf, NELEM, 0, 0, w->bound));
    GT_CUDA(cudaStreamSynchronize(w->bound));
    return 1;
}

static void sender_free(sender_t *w)
{
    GT_CUDA(cudaFree(w->buf));
    GT_CUDA(cudaFreeHost(w->bad));
}

/* Explicitly attached threads: producers bound, legacy, nonblock, other. */
static void *attached_main(void *arg)
{
    sender_t w = {0};
    helper_t h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    ptsc_ctx_t *ctx = NULL;
    int t = (int)(intptr_t)arg, ok;

    GT_OK(ptsc_thread_attach(t, &ctx));
    ok = ctx != NULL && sender_init(&w, ctx);
    if (ok) {
        if (t == 0)
            kind = stream_kind(w.bound);
        GT_OK(ptsc_ctx_device(ctx, &h.device));
        GT_CUDA(cudaStreamCreateWithFlags(&w.nonblock, cudaStreamNonBlocking));
        w.helper = &h;
        if (gt_rank == 0 && pthread_create(&h.th, NULL, helper_main, &h) != 0) {
            gt_fail(__FILE__, __LINE__, "pthread_create of the helper failed");
            ok = 0;
        }
    }
    /* Every thread passes the same barriers, even one that failed to set up
     * (it then sends nothing, and its peer's receives fail visibly). */
    pthread_barrier_wait(&bar);
    for (int p = P_BOUND; p <= P_OTHER; p++)
        for (int sc = 0; sc < NSC; sc++) {
            if (ok)
                run_cell(&w, p, sc);
            else {
                pthread_barrier_wait(&bar);
                pthread_barrier_wait(&bar);
            }
        }
    if (ok) {
        if (gt_rank == 0) {
            pthread_mutex_lock(&h.mu);
            h.quit = 1;
            pthread_cond_broadcast(&h.cv);
            pthread_mutex_unlock(&h.mu);
            pthread_join(h.th, NULL);
        }
        GT_CUDA(cudaStreamDestroy(w.nonblock));
        sender_free(&w);
    }
    if (ctx != NULL)
        GT_OK(ptsc_thread_detach());
    return NULL;
}

/* Lazily attached threads (ptsc_self): producer lazy. Indices are whatever
 * ptsc_self gave; thread t of rank 0 still talks to thread t of rank 1. */
static void *lazy_main(void *unused)
{
    sender_t w = {0};
    ptsc_ctx_t *ctx = NULL;
    (void)unused;
    GT_OK(ptsc_self(&ctx));
    int ok = ctx != NULL && sender_init(&w, ctx);
    pthread_barrier_wait(&bar);
    for (int sc = 0; sc < NSC; sc++) {
        if (ok)
            run_cell(&w, P_LAZY, sc);
        else {
            pthread_barrier_wait(&bar);
            pthread_barrier_wait(&bar);
        }
    }
    if (ok)
        sender_free(&w);
    return NULL; /* the lazy context is released at thread exit */
}

static void run_phase(void *(*fn)(void *))
{
    pthread_t th[NT];
    pthread_barrier_init(&bar, NULL, NT);
    for (int i = 0; i < NT; i++)
        pthread_create(&th[i], NULL, fn, (void *)(intptr_t)i);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
}

static void report(void)
{
    int msgs = rounds * NT;
    if (kind < 0) {
        gt_fail(__FILE__, __LINE__, "thread 0 did not start: no matrix");
        return;
    }
    printf("\ntest_gpu_producers: path %s, PTSC_STREAM=%s, %d threads x %d rounds of 4 MiB per cell, spin "
           "%u us\n",
           staged ? "staged" : "direct", kind_name[kind], NT, rounds, spin_us);
    printf("Stale messages of %d per cell. \"yes\": the scope covers the producer (docs/design.md), 0 "
           "asserted; \"no\": not covered, >= 1 asserted (the race is visible). A cell whose sends took "
           "the other path than the job's says which.\n\n",
           msgs);
    printf("| producer (%s, PTSC_STREAM=%s) |", staged ? "staged" : "direct", kind_name[kind]);
    for (int sc = 0; sc < NSC; sc++)
        printf(" %s |", scope_name[scopes[sc]]);
    printf("\n|---|");
    for (int sc = 0; sc < NSC; sc++)
        printf("---|");
    printf("\n");
    for (int p = 0; p < NPROD; p++) {
        printf("| %s |", prod_name[p]);
        for (int sc = 0; sc < NSC; sc++) {
            int cov = covered(p, scopes[sc], cell_staged[p][sc], kind);
            unsigned long long st = stale[p][sc];
            int bad = cov ? st != 0 : st == 0;
            printf(" %s: %llu%s%s |", cov ? "yes" : "no", st,
                   cell_staged[p][sc] == staged ? ""
                   : cell_staged[p][sc]         ? " (staged)"
                                                : " (direct)",
                   bad ? " FAIL" : "");
        }
        printf("\n");
    }
    printf("\n");
    fflush(stdout);
    for (int p = 0; p < NPROD; p++)
        for (int sc = 0; sc < NSC; sc++) {
            int cov = covered(p, scopes[sc], cell_staged[p][sc], kind);
            unsigned long long st = stale[p][sc];
            if (cov && st != 0)
                gt_fail(__FILE__, __LINE__,
                        "producer %s, scope %s, %s path, PTSC_STREAM=%s: %llu/%d stale messages where "
                        "docs/design.md promises none",
                        prod_name[p], scope_name[scopes[sc]], cell_staged[p][sc] ? "staged" : "direct",
                        kind_name[kind], st, msgs);
            if (!cov && st == 0)
                gt_fail(__FILE__, __LINE__,
                        "producer %s, scope %s, %s path, PTSC_STREAM=%s: no stale message in %d although the "
                        "scope does not cover this producer: the test cannot see the race here (spin %u us; "
                        "more rounds or a longer spin?)",
                        prod_name[p], scope_name[scopes[sc]], cell_staged[p][sc] ? "staged" : "direct",
                        kind_name[kind], msgs, spin_us);
        }
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_producers"), nranks = 0;
    if (rc)
        return rc;
    if (argc > 1 && atoi(argv[1]) > 0)
        rounds = atoi(argv[1]);
    if (argc > 2 && atoi(argv[2]) > 0)
        spin_us = (unsigned)atoi(argv[2]);
    setenv("PTSC_MAX_THREADS", "8", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    GT_OK(ptsc_size(&nranks, NULL));
    if (nranks != 2) {
        if (gt_rank == 0)
            printf("SKIP test_gpu_producers: needs exactly 2 ranks, got %d\n", nranks);
        ptsc_finalize();
        return GT_SKIP;
    }
    gt_path(&staged);
    run_phase(attached_main);
    run_phase(lazy_main);
    /* Rank 1 judges the cells: it needs the path each cell's sends took. */
    if (gt_rank == 0)
        MPI_Send(cell_staged, NPROD * NSC, MPI_INT, 1, 0, MPI_COMM_WORLD);
    else
        MPI_Recv(cell_staged, NPROD * NSC, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (gt_rank == 1)
        report();
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_producers");
}
