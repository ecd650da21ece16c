/*
 * The progress agent (PTSC_PROGRESS=thread): one thread per rank that
 * drives the outstanding work of contexts whose threads are away from ptsc
 * (computing, or blocked in a collective of ptsc's or of MPI's own), so that
 * a started operation completes whatever its thread does next (MPI's
 * progress rule) and messages move while the thread computes.
 *
 * Concurrency. An owner leaving the engine with work that only ptsc can
 * move (a piece to copy or post, a receive to match, a deferred post behind
 * an event) raises want[i]; only the owner raises it. The agent touches a
 * context's engine state (its requests, ring, stash) only while want[i] is
 * raised and only under the lock of its index, lk[i], which it only ever
 * try-locks, so it never waits for an owner; it lowers want[i] under that
 * lock, last, when nothing of the context needs driving any more. So an
 * owner entering the engine with want[i] down knows the agent is not there
 * and will not come (it lowered it after its last touch: release and
 * acquire order) and goes on without the lock: the fast paths (a blocking
 * host call, a small host isend) pay one atomic load. With want[i] raised
 * it takes the lock, holds it while it waits (it drives its own work then)
 * and waits for the agent at most one progress pass. The context pointer
 * the agent uses, ctx[i], is published before want[i] is raised and cleared
 * under lk[i], so a context is never freed while the agent holds it
 * (ptsc__progress_forget).
 *
 * Sleeping. With no index wanting, the agent lingers a short while (owners
 * then hand off without a system call) and then blocks on a condition
 * variable: an idle rank costs no core. While MPI holds part of the work
 * (a posted piece, a receive to match, a collective's round) it polls,
 * yielding the core between sweeps, for up to 5 ms after its last sweep
 * that moved something: MPI moves such a message one protocol step per
 * call on each side (with 4 us sleeps between looks, a 1 MiB staged
 * message still waited 0.2 of its transfer time after a computation twice
 * as long, and a CUDA-aware MPI's own pipeline 0.3 to 0.5). While only the
 * device's work is awaited (a kernel, a copy) it backs off from yielding
 * to sleeps of up to 4 us, so a long kernel costs a fraction of a core.
 * Yields that come back late, or sleeps that overrun, mean its cores are
 * oversubscribed: it then sleeps up to 50 us between looks for a while. It
 * polls at once again after a pass that moved something. Its timer slack
 * is 1 us (Linux), so a sleep lasts what it asks for: with the default
 * 50 us, every 20 us sleep took 55 to 70 us and MPI's own progress of a
 * message it holds (a rendezvous needs a call on both sides for each step)
 * went by those steps, too slowly to finish within a computation
 * (bench_overlap, docs/design.md).
 */
#include "ptsc_internal.h"

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <stdlib.h>

/* How long the agent keeps polling after the last want went down before it
 * blocks (owners hand off without waking it meanwhile) and its sleep
 * between looks meanwhile; the longest sleep between sweeps while work is
 * wanted (MPI moves a message it holds one protocol step per call, so the
 * agent looks often). */
#define LINGER_NS 2000000ull
#define LINGER_NAP_NS 20000l
#define NAP_NS 4000l
/* A nap that overran by more than OVERRUN_NS means the agent waited for a
 * core: the rank's cores are oversubscribed. The next CROWDED_NAPS naps
 * then last up to CROWDED_NAP_NS, so the agent does not take the cores
 * the owners need (4 us naps by several agents on 2 cores stalled random
 * multithreaded tests for minutes). */
#define OVERRUN_NS 50000ull
#define CROWDED_NAP_NS 50000l
#define CROWDED_NAPS 64
/* How long after the last sweep that moved something the agent keeps
 * polling work that MPI holds: longer than one protocol step of a large
 * message (a 4 MiB piece took 0.6 ms on the H100), short enough that a
 * receive posted long before its message, or a send whose receiver is
 * late, does not keep a core busy: after it the agent naps as for device
 * work. */
#define POLL_WINDOW_NS 5000000ull

static struct {
    int running; /* the agent thread exists */
    pthread_t tid;
    pthread_mutex_t mu; /* the condition's mutex */
    pthread_cond_t cv;
    atomic_int stop;
    atomic_int sleeping; /* the agent blocks (or is about to) on cv: an owner raising a want wakes it */
    atomic_int nwant;    /* indices whose want is raised */
    int n;
    pthread_mutex_t *lk; /* per thread index: its context's engine state */
    ptsc_ctx_t **ctx;    /* per index, under lk[i]: the context handed to the agent */
    atomic_int *want;  /* per index: raised by its owner, lowered by the owner or by the agent under lk[i] */
    atomic_int *claim; /* per index: its owner waits for lk[i]; the agent leaves the index alone */
    ptsc__drive_fn drive;
    atomic_ullong sweeps; /* sweeps of the agent (ptsc__progress_sweeps, tests and ptsc-info) */
} A;

static void lower_want(int i)
{
    if (atomic_load_explicit(&A.want[i], memory_order_relaxed)) {
        atomic_store_explicit(&A.want[i], 0, memory_order_release); /* after every touch of the context */
        atomic_fetch_sub(&A.nwant, 1);
    }
}

/* One sweep over the wanting indices: PTSC__DRIVE_MOVED when anything
 * moved, PTSC__DRIVE_IN_MPI when MPI holds part of the remaining work. */
static int sweep(void)
{
    int moved = 0;
    for (int i = 0; i < A.n; i++) {
        if (!atomic_load_explicit(&A.want[i], memory_order_acquire) ||
            atomic_load_explicit(&A.claim[i], memory_order_relaxed))
            continue; /* nothing wanted, or its owner is coming in and drives it */
        if (pthread_mutex_trylock(&A.lk[i]) != 0)
            continue; /* its owner is in ptsc and drives it */
        /* Raised, it stays raised while this holds the lock. Found down,
         * it is left alone: its owner may raise it again at any moment
         * without the lock (a context is published before its want is
         * raised and withdrawn with it, so a raised want has one). */
        if (atomic_load_explicit(&A.want[i], memory_order_acquire) && A.ctx[i]) {
            int m = 0;
            if (!A.drive(A.ctx[i], &m))
                lower_want(i);
            moved |= m;
        }
        pthread_mutex_unlock(&A.lk[i]);
    }
    atomic_fetch_add_explicit(&A.sweeps, 1, memory_order_relaxed);
    return moved;
}

static void *agent_main(void *arg)
{
    (void)arg;
    int idle = 0, crowded = 0;
#ifdef __linux__
    (void)prctl(PR_SET_TIMERSLACK, 1000ul); /* this thread's sleeps: 1 us late at most, not 50 */
#endif
    uint64_t quiet_since = 0, last_moved = ptsc__now_ns();
    for (;;) {
        if (atomic_load(&A.nwant) == 0) {
            idle = crowded = 0; /* the next burst of work starts afresh */
            uint64_t now = ptsc__now_ns();
            if (!quiet_since)
                quiet_since = now;
            if (now - quiet_since < LINGER_NS) {
                if (atomic_load(&A.stop))
                    break;
                ptsc__nap_ns(LINGER_NAP_NS);
                continue;
            }
            /* Raise sleeping, then look at nwant again: an owner raises
             * nwant, then looks at sleeping (both sequentially consistent),
             * so either it sees the agent asleep and signals under the
             * mutex, or the agent sees its want and does not sleep. */
            pthread_mutex_lock(&A.mu);
            atomic_store(&A.sleeping, 1);
            while (!atomic_load(&A.stop) && atomic_load(&A.nwant) == 0)
                pthread_cond_wait(&A.cv, &A.mu);
            atomic_store(&A.sleeping, 0);
            pthread_mutex_unlock(&A.mu);
            if (atomic_load(&A.stop))
                break;
        }
        if (quiet_since)
            last_moved = ptsc__now_ns(); /* a burst of work begins */
        quiet_since = 0;
        int swept = sweep();
        if (swept & PTSC__DRIVE_MOVED) {
            idle = 0;
            last_moved = ptsc__now_ns();
            continue;
        }
        /* Nothing moved. While MPI holds part of the work (a rendezvous
         * moves one protocol step per MPI call on each side) the agent
         * polls, yielding the core between sweeps, for up to
         * POLL_WINDOW_NS after the last sweep that moved something, unless
         * its cores are crowded: a yield that came back late means other
         * threads wanted the core. Otherwise (copies and kernels on the
         * device, a peer that is late) it yields for a few sweeps, then
         * naps 1, 2, 4 us and on; at most NAP_NS, or CROWDED_NAP_NS while
         * naps overran (see above). */
        idle += idle < 64; /* counts up to where the naps stop growing */
        uint64_t t0 = ptsc__now_ns();
        if ((swept & PTSC__DRIVE_IN_MPI) && !crowded && t0 - last_moved < POLL_WINDOW_NS) {
            sched_yield();
            if (ptsc__now_ns() - t0 > OVERRUN_NS)
                crowded = CROWDED_NAPS;
        } else if (idle < 16) {
            sched_yield();
        } else {
            long cap = crowded ? CROWDED_NAP_NS : NAP_NS, ns = 1000l << (idle < 22 ? idle - 16 : 6);
            ns = ns < cap ? ns : cap;
            ptsc__nap_ns((uint64_t)ns); /* 1 .. 50 us: within its bounds */
            if (ptsc__now_ns() - t0 > (uint64_t)ns + OVERRUN_NS)
                crowded = CROWDED_NAPS;
            else if (crowded)
                crowded--;
        }
        if (atomic_load(&A.stop))
            break;
    }
    return NULL;
}

int ptsc__progress_setup(int nthreads, int agent, ptsc__drive_fn drive)
{
    A.n = nthreads;
    A.drive = drive;
    atomic_store(&A.stop, 0);
    atomic_store(&A.sleeping, 0);
    atomic_store(&A.nwant, 0);
    atomic_store(&A.sweeps, 0);
    A.running = 0;
    A.lk = NULL;
    if (!agent)
        return PTSC_OK; /* PTSC_PROGRESS=caller: no locks, no agent */
    A.lk = calloc((size_t)nthreads, sizeof *A.lk);
    A.ctx = calloc((size_t)nthreads, sizeof *A.ctx);
    A.want = calloc((size_t)nthreads, sizeof *A.want);
    A.claim = calloc((size_t)nthreads, sizeof *A.claim);
    if (!A.lk || !A.ctx || !A.want || !A.claim) {
        free(A.lk);
        free(A.ctx);
        free(A.want);
        free(A.claim);
        A.lk = NULL;
        A.ctx = NULL;
        A.want = NULL;
        A.claim = NULL;
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: progress agent tables");
    }
    for (int i = 0; i < nthreads; i++) {
        pthread_mutex_init(&A.lk[i], NULL);
        atomic_init(&A.want[i], 0);
        atomic_init(&A.claim[i], 0);
    }
    pthread_mutex_init(&A.mu, NULL);
    pthread_cond_init(&A.cv, NULL);
    if (pthread_create(&A.tid, NULL, agent_main, NULL) != 0) {
        ptsc__progress_teardown();
        return ptsc__err(PTSC_ERR_INTERNAL,
                         "ptsc_init: cannot start the progress agent thread (PTSC_PROGRESS)");
    }
    A.running = 1;
    return PTSC_OK;
}

void ptsc__progress_stop(void)
{
    if (!A.running)
        return;
    pthread_mutex_lock(&A.mu);
    atomic_store(&A.stop, 1);
    pthread_cond_signal(&A.cv);
    pthread_mutex_unlock(&A.mu);
    pthread_join(A.tid, NULL);
    A.running = 0;
}

void ptsc__progress_teardown(void)
{
    ptsc__progress_stop();
    if (!A.lk)
        return;
    for (int i = 0; i < A.n; i++)
        pthread_mutex_destroy(&A.lk[i]);
    pthread_mutex_destroy(&A.mu);
    pthread_cond_destroy(&A.cv);
    free(A.lk);
    free(A.ctx);
    free(A.want);
    free(A.claim);
    A.lk = NULL;
    A.ctx = NULL;
    A.want = NULL;
    A.claim = NULL;
}

int ptsc__progress_agent_on(void) { return A.lk != NULL; }

unsigned long long ptsc__progress_sweeps(void) { return atomic_load(&A.sweeps); }

void ptsc__progress_enter(ptsc_ctx_t *ctx)
{
    if (!A.lk)
        return;
    int i = ctx->index;
    /* With want[i] down the agent is not in this context and will not come
     * until this owner raises it (see the top of the file). */
    ctx->agent.held = atomic_load_explicit(&A.want[i], memory_order_acquire) != 0;
    if (ctx->agent.held) {
        /* The claim keeps a polling agent from taking the lock again and
         * again between its sweeps while this owner waits for it (a mutex
         * is not fair): the owner waits one pass at most. */
        atomic_store_explicit(&A.claim[i], 1, memory_order_relaxed);
        pthread_mutex_lock(&A.lk[i]);
        atomic_store_explicit(&A.claim[i], 0, memory_order_relaxed);
    }
}

void ptsc__progress_leave(ptsc_ctx_t *ctx, int want)
{
    if (!A.lk)
        return;
    int i = ctx->index;
    if (!want) {
        lower_want(i); /* raised only if this owner holds lk[i] */
    } else if (!atomic_load_explicit(&A.want[i], memory_order_relaxed)) {
        /* Publish the context, count the want, then raise it: an agent that
         * sees it raised sees the context and the count. */
        A.ctx[i] = ctx;
        atomic_fetch_add(&A.nwant, 1);
        atomic_store_explicit(&A.want[i], 1, memory_order_release);
        /* Wake the agent only when it blocks; while it lingers or polls it
         * sees the raised want on its next sweep (see agent_main). */
        if (atomic_load(&A.sleeping)) {
            pthread_mutex_lock(&A.mu);
            pthread_cond_signal(&A.cv);
            pthread_mutex_unlock(&A.mu);
        }
    }
    if (ctx->agent.held) {
        ctx->agent.held = 0;
        pthread_mutex_unlock(&A.lk[i]);
    }
}

void ptsc__progress_forget(ptsc_ctx_t *ctx)
{
    if (!A.lk)
        return;
    int i = ctx->index;
    pthread_mutex_lock(&A.lk[i]);
    if (A.ctx[i] == ctx) {
        A.ctx[i] = NULL;
        lower_want(i);
    }
    pthread_mutex_unlock(&A.lk[i]);
}
