/*
 * Hang diagnostics (PTSC_TIMEOUT). Each thread index has a wait record in
 * ptsc__waits: before a blocking MPI call or an engine wait loop, the thread
 * owning the index writes what it waits for (call, peer, tag, bytes) and the
 * time it started, and clears the time afterwards. A watchdog thread,
 * started by ptsc_init only when PTSC_TIMEOUT is set, scans the records a
 * few times per timeout and prints one line to stderr per wait that has
 * lasted longer than the timeout. With PTSC_TIMEOUT unset ptsc__waits stays
 * NULL and a blocking call costs one branch.
 *
 * The records live in an array indexed by thread slot, not in the
 * contexts, so that the watchdog never reads a context that its thread may
 * free at any time: the array lives from init until finalize has released
 * every context and stopped the watchdog.
 */
#include "ptsc_internal.h"

#include <stdlib.h>
#include <time.h>

ptsc__wait_t *ptsc__waits;

static struct {
    pthread_t thread;
    atomic_int stop;
    int running;
    int n;              /* records in ptsc__waits */
    uint64_t timeout;   /* ns */
    uint64_t *reported; /* per record: `since` of the wait last reported (watchdog thread only) */
} wd;

void ptsc__wait_publish(int index, const char *call, int kind, int rank, int thread, int tag, size_t bytes)
{
    ptsc__wait_t *w = &ptsc__waits[index];
    atomic_store_explicit(&w->since, 0, memory_order_relaxed);
    atomic_store_explicit(&w->call, call, memory_order_relaxed);
    atomic_store_explicit(&w->kind, kind, memory_order_relaxed);
    atomic_store_explicit(&w->rank, rank, memory_order_relaxed);
    atomic_store_explicit(&w->thread, thread, memory_order_relaxed);
    atomic_store_explicit(&w->tag, tag, memory_order_relaxed);
    atomic_store_explicit(&w->bytes, bytes, memory_order_relaxed);
    uint64_t now = ptsc__now_ns();
    /* Release: a reader that sees this time sees the fields above. */
    atomic_store_explicit(&w->since, now ? now : 1, memory_order_release);
}

static void peer_text(char *buf, size_t n, int rank, int thread)
{
    char r[32];
    if (rank < 0)
        snprintf(r, sizeof r, "any rank");
    else
        snprintf(r, sizeof r, "rank %d", rank);
    snprintf(buf, n, "%s thread %d", r, thread);
}

static void report(int index, const ptsc__wait_t *w, uint64_t since, uint64_t now)
{
    const char *call = atomic_load_explicit(&w->call, memory_order_relaxed);
    int kind = atomic_load_explicit(&w->kind, memory_order_relaxed);
    int rank = atomic_load_explicit(&w->rank, memory_order_relaxed);
    int thread = atomic_load_explicit(&w->thread, memory_order_relaxed);
    int tag = atomic_load_explicit(&w->tag, memory_order_relaxed);
    size_t bytes = atomic_load_explicit(&w->bytes, memory_order_relaxed);
    /* The owner may have finished (or begun another wait) while the fields
     * were read: report only a wait that was the same throughout. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&w->since, memory_order_relaxed) != since)
        return;
    char what[160], peer[64];
    peer_text(peer, sizeof peer, rank, thread);
    switch (kind) {
    case PTSC__WAIT_SEND:
        snprintf(what, sizeof what, "to send to %s, tag %d, %zu bytes", peer, tag, bytes);
        break;
    case PTSC__WAIT_RECV:
        snprintf(what, sizeof what, "for a message from %s, tag %d, up to %zu bytes", peer, tag, bytes);
        break;
    case PTSC__WAIT_PROBE:
        snprintf(what, sizeof what, "for a message from %s, tag %d (probe)", peer, tag);
        break;
    case PTSC__WAIT_COLL:
        if (rank >= 0)
            snprintf(what, sizeof what, "for the other ranks of lane %d, root rank %d, %zu bytes", index,
                     rank, bytes);
        else
            snprintf(what, sizeof what, "for the other ranks of lane %d, %zu bytes", index, bytes);
        break;
    default:
        snprintf(what, sizeof what, "for any of %zu requests to complete", bytes);
        break;
    }
    fprintf(stderr, "[ptsc r%d t%d] timeout: %s has waited %.1f s %s (PTSC_TIMEOUT=%llu)\n", ptsc__g.rank,
            index, call ? call : "ptsc", (double)(now - since) / 1e9, what,
            (unsigned long long)(wd.timeout / 1000000000u));
    fflush(stderr);
}

static void *watch(void *arg)
{
    (void)arg;
    /* A few scans per timeout, and a stop noticed within 50 ms. */
    uint64_t period = wd.timeout / 4 < 50000000u ? wd.timeout / 4 : 50000000u;
    uint64_t scan_every = wd.timeout / 4 < 250000000u ? wd.timeout / 4 : 250000000u, last = 0;
    while (!atomic_load(&wd.stop)) {
        struct timespec ts = {(time_t)(period / 1000000000u), (long)(period % 1000000000u)};
        nanosleep(&ts, NULL);
        uint64_t now = ptsc__now_ns();
        if (now - last < scan_every)
            continue;
        last = now;
        for (int i = 0; i < wd.n; i++) {
            uint64_t since = atomic_load_explicit(&ptsc__waits[i].since, memory_order_acquire);
            if (since == 0 || since == wd.reported[i] || now - since < wd.timeout)
                continue;
            wd.reported[i] = since; /* once per stuck call */
            report(i, &ptsc__waits[i], since, now);
        }
    }
    return NULL;
}

int ptsc__watchdog_start(int nthreads)
{
    if (ptsc__g.cfg.timeout <= 0)
        return PTSC_OK;
    wd.n = nthreads;
    wd.timeout = (uint64_t)ptsc__g.cfg.timeout * 1000000000u;
    wd.reported = calloc((size_t)nthreads, sizeof *wd.reported);
    ptsc__wait_t *w = calloc((size_t)nthreads, sizeof *w);
    if (!wd.reported || !w) {
        free(wd.reported);
        free(w);
        wd.reported = NULL;
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: PTSC_TIMEOUT wait records");
    }
    ptsc__waits = w;
    atomic_store(&wd.stop, 0);
    if (pthread_create(&wd.thread, NULL, watch, NULL) != 0) {
        ptsc__watchdog_stop();
        return ptsc__err(PTSC_ERR_INTERNAL, "ptsc_init: PTSC_TIMEOUT: cannot start the watchdog thread");
    }
    wd.running = 1;
    return PTSC_OK;
}

void ptsc__watchdog_stop(void)
{
    if (wd.running) {
        atomic_store(&wd.stop, 1);
        pthread_join(wd.thread, NULL);
        wd.running = 0;
    }
    free(ptsc__waits);
    free(wd.reported);
    ptsc__waits = NULL;
    wd.reported = NULL;
}
