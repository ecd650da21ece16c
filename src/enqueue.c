/*
 * Stream-ordered point-to-point calls (ptsc_*_enqueue): the operation is
 * queued on a CUDA stream between the program's kernels, and the host
 * thread goes on at once.
 *
 * Each operation has a cell of four 32-bit words in mapped pinned memory
 * and, for a message of bytes, a staging copy in the same pinned block.
 * The stream and this module's proxy thread hand the operation back and
 * forth through the words; the stream writes them with cuStreamWriteValue32
 * and waits on them with cuStreamWaitValue32, the proxy reads and writes
 * them from the host:
 *
 *   REQ   stream -> proxy: the stream reached the operation (its send copy
 *         is in the staging block); the proxy lowers it when it takes it.
 *   ACK   proxy -> stream: a non-blocking operation is posted to MPI (the
 *         stream goes on; the next operation is posted after it, so MPI's
 *         order is the stream's order); the stream lowers it.
 *   DONE  proxy -> stream: the MPI operation completed (a received message
 *         is in the staging block); the stream lowers it and copies out.
 *   FIN   stream -> proxy: the stream is past its last use of the block;
 *         the proxy recycles a one-shot operation's block.
 *
 * Every value is 0 or 1 and each word is raised by one side and lowered by
 * the other, so the same queued words work again when a captured graph is
 * launched again: an operation captured into a graph lives as long as the
 * graph (a CUDA user object tells when it is destroyed) and goes round
 * REQ -> (ACK) -> DONE once per launch, with no allocation per launch.
 *
 * MPI only ever sees host memory here (the staging block): a stream that
 * waits on a word blocks its hardware queue, and an MPI copy between device
 * buffers could be queued behind it, so no MPI call that the proxy makes
 * needs the device. Its calls are the PMPI_ entry points: under ptsc-run
 * the MPI_ ones are libptsc-mpi's, which would synchronise the blocking
 * streams before MPI touches the (pinned) block, while one of them waits
 * for this very proxy. The messages travel on a communicator of their own
 * (a duplicate of the world taken at init), addressed by (rank, thread,
 * tag) as the lanes are; they match only enqueued calls. Receives are
 * matched with MPI_Improbe/MPI_Imrecv, in the order the stream posted them:
 * a receive is probed only while no earlier pending receive of the same
 * source and tag waits, so MPI's non-overtaking order holds; the matched
 * probe also knows a message's size before anything is written, so a
 * longer message is reported as truncated and never written past the
 * block (Open MPI 4.1 writes a longer contiguous message past the end of a
 * contiguous receive buffer).
 *
 * Without a device the "stream" is the calling thread: each queued step
 * runs at once (a word write is a store, a wait polls), so the proxy, the
 * words and the MPI side run, and are tested, on machines with no GPU.
 *
 * Errors found by the proxy (a truncated message, a failed MPI call) raise
 * DONE all the same, so no stream waits forever; they are returned by the
 * thread's next ptsc_enqueue_sync. With PTSC_TIMEOUT the
 * proxy names every operation that MPI has held longer than that.
 */
#include "ptsc_internal.h"

#include <pthread.h>
#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { W_REQ = 0, W_ACK, W_DONE, W_FIN, W_N };
enum { K_SEND = 0, K_RECV, K_ISEND, K_IRECV, K_ALLREDUCE };
/* Proxy side: waiting for REQ, probing, MPI holds it, waiting for FIN;
 * an allreduce's root gathering the contributions. */
enum { P_IDLE = 0, P_PROBE, P_MPI, P_FIN, P_GATHER };

#define CELL 64    /* the words' cell, a cache line before the staging bytes */
#define NCLASS 112 /* block sizes: four steps per doubling, CELL .. beyond 2 GiB */

/* A captured operation's tie to its graph: CUDA calls graph_gone when the
 * graph and every instance of it are destroyed, and the proxy then
 * recycles the operation. State 0: both live; 1: the graph is gone; 2: the
 * operation is gone. Whichever side comes second frees the tie. */
typedef struct {
    atomic_int state;
} tie_t;

static void graph_gone(void *p)
{
    tie_t *t = p;
    if (atomic_exchange(&t->state, 1) == 2)
        free(t);
}

static void tie_drop(tie_t *t)
{
    if (t && atomic_exchange(&t->state, 2) == 1)
        free(t);
}

struct ptsc_stream_request {
    struct ptsc_stream_request *next; /* in the proxy's list */
    int kind;
    atomic_int persistent;       /* captured into a graph: kept until finalize */
    atomic_int broken;           /* its call failed half-way: answered, never moved */
    tie_t *tie;                  /* captured: recycled with its graph (NULL: kept until finalize) */
    unsigned long long cap_id;   /* captured: the capture sequence it belongs to */
    int index;                   /* the owner's thread index */
    int rank, thread, tag, mtag; /* peer and tag as given; mtag: on the wire */
    size_t bytes;                /* send: the message; receive: the capacity */
    void *buf;                   /* the program's buffer */
    _Atomic unsigned *w;         /* the cell, host view */
    unsigned long long dw;       /* the cell, device address (0 without a device) */
    char *block;                 /* cell + staging bytes */
    int cls, dev;                /* the block's size class; pinned and mapped */
    /* The proxy's own. */
    int st;
    int acked;               /* ACK raised for this round (isend, irecv) */
    int spoiled;             /* MPI may still read or write the block after a failure: never reused */
    unsigned long long seq;  /* order in which the stream posted it */
    MPI_Request mr[2], *mrs; /* mrs: nmr requests MPI holds (mr, or an allreduce root's own array) */
    int nmr;
    /* An allreduce: the lane's reduction, its data one `bytes` slot per rank at the root. */
    int count;
    MPI_Datatype type;
    MPI_Op op;
    uint64_t since;
    int warned;
};
typedef struct ptsc_stream_request op_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
    pthread_t tid;
    op_t *incoming;               /* armed, not yet taken by the proxy (under mu) */
    op_t *ops;                    /* the proxy's own list */
    atomic_int live;              /* ops armed and not yet recycled */
    char *free_blocks[2][NCLASS]; /* [with a device][size class] */
    struct pool {                 /* [with a device]: where blocks are carved from */
        struct chunk *chunks;     /* every allocation, for finalize */
        char *next;               /* the uncarved rest of the newest chunk */
        int keep;                 /* a block MPI may still touch was dropped: chunks never freed */
        size_t left;
        unsigned long long next_d; /* its device address */
        size_t taken;              /* bytes of every chunk */
    } pool[2];
    MPI_Comm comm;  /* point-to-point */
    MPI_Comm ccomm; /* allreduce: tags 2 * thread (to the root), 2 * thread + 1 (the result) */
    int tag_max;
    unsigned long long seq;
    atomic_int *err; /* per index: the first failure not yet reported */
    char (*detail)[PTSC__DETAIL_LEN];
} Q = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER,
       .comm = MPI_COMM_NULL,
       .ccomm = MPI_COMM_NULL};

static const char *const kind_name[] = {"ptsc_send_enqueue", "ptsc_recv_enqueue", "ptsc_isend_enqueue",
                                        "ptsc_irecv_enqueue", "ptsc_allreduce_enqueue"};

static int on_device(const ptsc_ctx_t *ctx) { return ptsc__g.ndevices > 0 && ctx->device >= 0; }

static unsigned word(op_t *o, int k) { return atomic_load_explicit(&o->w[k], memory_order_acquire); }
static void set_word(op_t *o, int k, unsigned v) { atomic_store_explicit(&o->w[k], v, memory_order_release); }

/* ---- blocks: cell + staging bytes, pinned and mapped with a device ----- */

/* Block sizes: CELL << c/4 and a quarter more per step of c % 4, in whole
 * cells (from 256 bytes up, at most a fifth of a block of its own class
 * is unused). */
static size_t class_size(int c)
{
    size_t base = (size_t)CELL << (c / 4), n = base + (base / 4) * (size_t)(c % 4);
    return (n + CELL - 1) & ~(size_t)(CELL - 1); /* whole cells: blocks stay cache-line aligned */
}

static int class_of(size_t n)
{
    int c = 0;
    while (c < NCLASS && class_size(c) < n)
        c++;
    return c;
}

/* The pool. Blocks are carved from chunks of PTSC_ENQUEUE_POOL bytes (or
 * one block's size, if larger) and go back to a free list of their size
 * class, never to the system, until finalize. A chunk is allocated only
 * while no operation is armed (Q.live == 0, checked and held under Q.mu,
 * so none can be armed meanwhile): with a device it is pinned memory, and
 * CUDA's pinned allocation (like cudaFree) can wait for the device to go
 * idle, which it never does while a stream waits for a word that this
 * process's threads have still to move (docs/design.md, "Stream-ordered
 * calls"). The same rule holds without a device, so that a program meets
 * the same limit on every machine. Called with Q.mu held. */
struct chunk {
    struct chunk *next;
    char *base;
};

#define GROW_WAIT_NS 200000000ull /* 200 ms: the proxy recycles within a nap, longer on a loaded machine */

/* A free block of class c or of up to one doubling larger (at most half
 * of it unused); NULL if none. Called with Q.mu held. */
static char *free_get(int dev, int *c, unsigned long long *d)
{
    for (int k = *c; k < NCLASS && k < *c + 4; k++) {
        char *b = Q.free_blocks[dev][k];
        if (b) {
            Q.free_blocks[dev][k] = *(char **)(b + CELL - sizeof(char *));
            *c = k;
            /* A free block's device address is kept in its cell's last bytes. */
            memcpy(d, b + CELL - 2 * sizeof *d, sizeof *d);
            return b;
        }
    }
    return NULL;
}

/* The current chunk's next `n` bytes, or NULL if it has not so many left.
 * Called with Q.mu held. */
static char *carve(struct pool *P, int dev, size_t n, unsigned long long *d)
{
    if (P->left < n)
        return NULL;
    char *b = P->next;
    *d = dev ? P->next_d : 0;
    P->next += n;
    P->next_d += dev ? n : 0;
    P->left -= n;
    return b;
}

/* A new chunk for a block of `need` bytes (class *c): *b, *d the block. A
 * block larger than PTSC_ENQUEUE_POOL gets a chunk of its own, and the rest
 * of the current chunk stays in use. Called with Q.mu held; drops it
 * meanwhile only to wait, briefly, for operations whose streams are done
 * but which the proxy has not recycled yet (within a nap of it); a block
 * recycled meanwhile, or room that another thread's growth made, is taken
 * instead. */
static int pool_grow(int dev, size_t need, int *c, const char *call, char **b, unsigned long long *d)
{
    struct pool *P = &Q.pool[dev];
    for (uint64_t t0 = ptsc__now_ns(); atomic_load(&Q.live) != 0 && ptsc__now_ns() - t0 < GROW_WAIT_NS;) {
        pthread_mutex_unlock(&Q.mu);
        ptsc__nap_ns(50000);
        pthread_mutex_lock(&Q.mu);
        if ((*b = free_get(dev, c, d)) != NULL || (*b = carve(P, dev, need, d)) != NULL)
            return PTSC_OK;
    }
    if (atomic_load(&Q.live) != 0)
        return ptsc__err(PTSC_ERR_NO_MEMORY,
                         "%s: the enqueued calls' pinned pool is used up (%zu bytes in chunks of "
                         "PTSC_ENQUEUE_POOL, %d operations in flight or captured, %zu bytes asked); it grows "
                         "only while no enqueued operation is in flight (a pinned allocation now could "
                         "wait for a stream that waits for this process): raise PTSC_ENQUEUE_POOL",
                         call, P->taken, atomic_load(&Q.live), need);
    size_t pool = (ptsc__g.cfg.enqueue_pool + CELL - 1) & ~(size_t)(CELL - 1);
    int own = need > pool; /* a chunk of its own */
    size_t n = own ? need : pool;
    struct chunk *k = malloc(sizeof *k);
    char *m = NULL;
    unsigned long long md = 0;
    if (!k)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: pool chunk", call);
    if (dev) {
        int rc = ptsc__gpu_mapped_alloc(n, (void **)&m, &md);
        if (rc != PTSC_OK) {
            free(k);
            return rc;
        }
    } else if (!(m = aligned_alloc(CELL, n))) {
        free(k);
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: %zu bytes for the enqueued calls' pool", call, n);
    }
    k->base = m;
    k->next = P->chunks;
    P->chunks = k;
    P->taken += n;
    if (!own) {
        P->next = m + need;
        P->next_d = md ? md + need : 0;
        P->left = n - need;
    }
    *b = m;
    *d = md;
    return PTSC_OK;
}

static int block_get(op_t *o, size_t bytes, int dev)
{
    dev = !!dev;
    int c = class_of(CELL + bytes);
    if (c >= NCLASS)
        return ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: %zu bytes is too large", kind_name[o->kind], bytes);
    size_t n = class_size(c);
    struct pool *P = &Q.pool[dev];
    int rc = PTSC_OK;
    unsigned long long d = 0;
    pthread_mutex_lock(&Q.mu);
    /* A free block, or the current chunk's next, or a new chunk; after a
     * failed growth, a block freed while it waited. */
    char *b = free_get(dev, &c, &d);
    if (!b)
        b = carve(P, dev, n, &d);
    if (!b && (rc = pool_grow(dev, n, &c, kind_name[o->kind], &b, &d)) != PTSC_OK &&
        (b = free_get(dev, &c, &d)) != NULL) {
        ptsc__err_clear();
        rc = PTSC_OK;
    }
    pthread_mutex_unlock(&Q.mu);
    if (rc != PTSC_OK)
        return rc;
    o->block = b;
    o->cls = c;
    o->dev = dev;
    o->dw = d;
    o->w = (_Atomic unsigned *)b;
    for (int k = 0; k < W_N; k++)
        atomic_init(&o->w[k], 0u);
    return PTSC_OK;
}

static void block_put(op_t *o)
{
    memcpy(o->block + CELL - 2 * sizeof o->dw, &o->dw, sizeof o->dw);
    pthread_mutex_lock(&Q.mu);
    *(char **)(o->block + CELL - sizeof(char *)) = Q.free_blocks[o->dev][o->cls];
    Q.free_blocks[o->dev][o->cls] = o->block;
    pthread_mutex_unlock(&Q.mu);
}

static void op_free(op_t *o)
{
    tie_drop(o->tie);
    if (o->mrs && o->mrs != o->mr)
        free(o->mrs);
    free(o);
}

/* ---- errors kept for the owner ------------------------------------------ */

static void fail(op_t *o, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(op_t *o, int rc, const char *fmt, ...)
{
    int none = PTSC_OK;
    pthread_mutex_lock(&Q.mu);
    if (atomic_compare_exchange_strong(&Q.err[o->index], &none, rc)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(Q.detail[o->index], PTSC__DETAIL_LEN, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&Q.mu);
}

/* The first failure of the thread's enqueued operations since the last one
 * reported, as the call's status (with its detail). */
static int take_error(int index)
{
    if (atomic_load(&Q.err[index]) == PTSC_OK)
        return PTSC_OK;
    pthread_mutex_lock(&Q.mu);
    int rc = atomic_exchange(&Q.err[index], PTSC_OK);
    char d[PTSC__DETAIL_LEN];
    snprintf(d, sizeof d, "%s", Q.detail[index]);
    pthread_mutex_unlock(&Q.mu);
    return rc == PTSC_OK ? PTSC_OK : ptsc__err(rc, "%s", d);
}

/* ---- the proxy ------------------------------------------------------------ */

/* Release the stream's waits for this round: ACK (if start did not raise
 * it: a failure before the operation was posted), then DONE. ACK is raised
 * once per round only: raised again after the stream lowered it, it would
 * let the next launch of a graph pass its wait before the proxy posted. */
static void finish(op_t *o)
{
    if ((o->kind == K_ISEND || o->kind == K_IRECV) && !o->acked)
        set_word(o, W_ACK, 1);
    o->acked = 0;
    set_word(o, W_DONE, 1);
    o->st = atomic_load(&o->persistent) ? P_IDLE : P_FIN;
}

static void fail_mpi(op_t *o, int mrc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(mrc, s, &n);
    fail(o, PTSC_ERR_MPI, "%s (rank %d, thread %d, tag %d): %s failed: %s", kind_name[o->kind], o->rank,
         o->thread, o->tag, what, s);
    finish(o);
}

/* The allreduce of a lane (thread `index` of every rank): each rank sends
 * its contribution to rank 0, which folds them in rank order (x0 op x1 op
 * ... , so a non-commutative operation gives MPI's answer, and every rank
 * the same bits) with MPI_Reduce_local and sends the result back. */
static int slot_bytes(const op_t *o) { return (int)o->bytes; }

/* After a failure of some of an allreduce's requests: cancel what receives,
 * let the sends go, and keep the block out of reuse (MPI may still touch it). */
static void allreduce_abandon(op_t *o)
{
    for (int k = 0; k < o->nmr; k++) {
        if (o->mrs[k] == MPI_REQUEST_NULL)
            continue;
        int is_recv = o->st == P_GATHER || (o->mrs == o->mr && k == 1);
        if (is_recv)
            PMPI_Cancel(&o->mrs[k]);
        PMPI_Request_free(&o->mrs[k]);
    }
    o->spoiled = 1;
}

static void allreduce_start(op_t *o)
{
    int n = ptsc__g.nranks, mrc = MPI_SUCCESS, t = o->index;
    char *d = o->block + CELL;
    if (n == 1) {
        finish(o);
        return;
    }
    if (ptsc__g.rank != 0) { /* the contribution from slot 0, the result into slot 1 */
        o->mr[0] = o->mr[1] = MPI_REQUEST_NULL;
        o->mrs = o->mr;
        o->nmr = 2;
        if ((mrc = PMPI_Irecv(d + o->bytes, slot_bytes(o), MPI_BYTE, 0, 2 * t + 1, Q.ccomm, &o->mr[1])) !=
                MPI_SUCCESS ||
            (mrc = PMPI_Isend(d, slot_bytes(o), MPI_BYTE, 0, 2 * t, Q.ccomm, &o->mr[0])) != MPI_SUCCESS) {
            o->st = P_MPI;
            allreduce_abandon(o);
            fail_mpi(o, mrc, "MPI_Irecv/MPI_Isend of an allreduce");
            return;
        }
        o->st = P_MPI;
        return;
    }
    for (int r = 1; r < n; r++)
        o->mrs[r - 1] = MPI_REQUEST_NULL;
    o->nmr = n - 1;
    o->st = P_GATHER;
    for (int r = 1; r < n && mrc == MPI_SUCCESS; r++)
        mrc =
            PMPI_Irecv(d + (size_t)r * o->bytes, slot_bytes(o), MPI_BYTE, r, 2 * t, Q.ccomm, &o->mrs[r - 1]);
    if (mrc != MPI_SUCCESS) {
        allreduce_abandon(o);
        fail_mpi(o, mrc, "MPI_Irecv of an allreduce's contribution");
    }
}

/* The root has every contribution: fold, then send the result to each rank. */
static void allreduce_fold(op_t *o)
{
    int n = ptsc__g.nranks, mrc = MPI_SUCCESS, t = o->index;
    char *d = o->block + CELL;
    for (int r = 1; r < n && mrc == MPI_SUCCESS; r++) /* x_r = acc op x_r, in rank order */
        mrc = PMPI_Reduce_local(d + (size_t)(r - 1) * o->bytes, d + (size_t)r * o->bytes, o->count, o->type,
                                o->op);
    if (mrc != MPI_SUCCESS) {
        fail_mpi(o, mrc, "MPI_Reduce_local");
        return;
    }
    memcpy(d, d + (size_t)(n - 1) * o->bytes, o->bytes);
    o->st = P_MPI;
    for (int r = 1; r < n; r++)
        o->mrs[r - 1] = MPI_REQUEST_NULL;
    for (int r = 1; r < n && mrc == MPI_SUCCESS; r++)
        mrc = PMPI_Isend(d, slot_bytes(o), MPI_BYTE, r, 2 * t + 1, Q.ccomm, &o->mrs[r - 1]);
    if (mrc != MPI_SUCCESS) {
        allreduce_abandon(o);
        fail_mpi(o, mrc, "MPI_Isend of an allreduce's result");
    }
}

static void start(op_t *o)
{
    o->seq = ++Q.seq;
    o->since = ptsc__now_ns();
    o->warned = 0;
    o->acked = 0;
    if (atomic_load(&o->broken)) { /* its call failed half-way: release the stream, move nothing */
        finish(o);
        return;
    }
    if (o->kind == K_SEND || o->kind == K_ISEND) {
        int mrc = PMPI_Isend(o->block + CELL, (int)o->bytes, MPI_BYTE, o->rank, o->mtag, Q.comm, &o->mr[0]);
        if (mrc != MPI_SUCCESS) {
            fail_mpi(o, mrc, "MPI_Isend");
            return;
        }
        o->mrs = o->mr;
        o->nmr = 1;
        o->st = P_MPI;
    } else if (o->kind == K_ALLREDUCE) {
        allreduce_start(o);
    } else {
        o->st = P_PROBE;
    }
    if ((o->kind == K_ISEND || o->kind == K_IRECV) && o->st != P_IDLE && o->st != P_FIN) {
        set_word(o, W_ACK, 1);
        o->acked = 1;
    }
}

/* A receive waits while an earlier pending one of the same source and tag
 * has not matched: messages match receives in the order they were posted. */
static int overtakes(const op_t *o)
{
    for (const op_t *p = Q.ops; p; p = p->next)
        if (p != o && p->st == P_PROBE && p->seq < o->seq && p->rank == o->rank && p->mtag == o->mtag)
            return 1;
    return 0;
}

static int probe(op_t *o)
{
    int flag = 0, n = 0;
    MPI_Message m;
    MPI_Status s;
    if (overtakes(o))
        return 0;
    int mrc = PMPI_Improbe(o->rank, o->mtag, Q.comm, &flag, &m, &s);
    if (mrc != MPI_SUCCESS) {
        fail_mpi(o, mrc, "MPI_Improbe");
        return 1;
    }
    if (!flag)
        return 0;
    PMPI_Get_count(&s, MPI_BYTE, &n);
    if ((size_t)n <= o->bytes) {
        if ((mrc = PMPI_Imrecv(o->block + CELL, n, MPI_BYTE, &m, &o->mr[0])) != MPI_SUCCESS) {
            fail_mpi(o, mrc, "MPI_Imrecv");
        } else {
            o->mrs = o->mr;
            o->nmr = 1;
            o->st = P_MPI;
        }
        return 1;
    }
    /* Longer than the buffer: take it whole aside, keep what fits. */
    char *tmp = malloc((size_t)n);
    if (!tmp) {
        fail(o, PTSC_ERR_NO_MEMORY, "%s: %d bytes to take a truncated message aside", kind_name[o->kind], n);
        PMPI_Mrecv(NULL, 0, MPI_BYTE, &m, MPI_STATUS_IGNORE); /* MPI reports the truncation; dropped */
        finish(o);
        return 1;
    }
    mrc = PMPI_Mrecv(tmp, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
    if (mrc == MPI_SUCCESS) {
        memcpy(o->block + CELL, tmp, o->bytes);
        fail(o, PTSC_ERR_TRUNCATE,
             "%s (rank %d, thread %d, tag %d): a message of %d bytes for a buffer of %zu", kind_name[o->kind],
             o->rank, o->thread, o->tag, n, o->bytes);
        finish(o);
    } else {
        fail_mpi(o, mrc, "MPI_Mrecv");
    }
    free(tmp);
    return 1;
}

static void watch(op_t *o, uint64_t now)
{
    int t = ptsc__g.cfg.timeout;
    /* `now` is read once per pass, before an operation started later in the
     * same pass: since > now there, not a wait of some 2^64 ns. */
    if (!t || o->warned || now <= o->since || now - o->since < (uint64_t)t * 1000000000ull)
        return;
    o->warned = 1;
    ptsc__log(
        PTSC__LOG_WARN,
        "%s of thread %d %s rank %d thread %d, tag %d, %zu bytes: %s for %d s (PTSC_TIMEOUT); its stream "
        "waits for it",
        kind_name[o->kind], o->index, o->kind == K_SEND || o->kind == K_ISEND ? "to" : "from", o->rank,
        o->thread, o->tag, o->bytes, o->st == P_PROBE ? "no matching message" : "not complete", t);
}

/* MPI_Testall, one request at a time (GCC 12 takes MPICH's
 * MPI_STATUSES_IGNORE for an array of no elements and warns). */
static int test_all(op_t *o, int *flag)
{
    *flag = 1;
    for (int k = 0; k < o->nmr; k++) {
        MPI_Status st;
        int f = 1, mrc = o->mrs[k] == MPI_REQUEST_NULL ? MPI_SUCCESS : PMPI_Test(&o->mrs[k], &f, &st);
        if (mrc != MPI_SUCCESS)
            return mrc;
        *flag &= f;
    }
    return MPI_SUCCESS;
}

/* An operation out of the proxy's list for good: its block back to the
 * free lists (unless MPI may still touch it), the operation freed. */
static void recycle(op_t *o)
{
    if (!o->spoiled)
        block_put(o);
    else
        Q.pool[o->dev].keep = 1; /* the proxy's own: teardown reads it after joining it */
    op_free(o);
    atomic_fetch_sub(&Q.live, 1);
    ptsc__gpu_frees_hold(-1);
}

/* One pass over every operation; 1 when anything moved. *busy: MPI holds some. */
static int pass(int *busy)
{
    int moved = 0;
    uint64_t now = 0;
    *busy = 0;
    for (op_t **pp = &Q.ops; *pp;) {
        op_t *o = *pp;
        int flag = 0;
        switch (o->st) {
        case P_IDLE:
            if (word(o, W_REQ)) {
                set_word(o, W_REQ, 0);
                start(o);
                moved = 1;
            } else if (o->tie && atomic_load(&o->tie->state) == 1) { /* its graph is gone */
                *pp = o->next;
                recycle(o);
                moved = 1;
                continue;
            }
            break;
        case P_PROBE:
            moved |= probe(o);
            break;
        case P_MPI:
        case P_GATHER: {
            int mrc = test_all(o, &flag);
            if (mrc != MPI_SUCCESS) {
                if (o->kind == K_ALLREDUCE)
                    allreduce_abandon(o);
                fail_mpi(o, mrc, "MPI_Test");
            } else if (flag && o->st == P_GATHER) {
                allreduce_fold(o);
            } else if (flag) {
                if (o->kind == K_ALLREDUCE && ptsc__g.rank != 0) /* the result, into the slot copied out */
                    memcpy(o->block + CELL, o->block + CELL + o->bytes, o->bytes);
                finish(o);
            }
            moved |= flag || mrc != MPI_SUCCESS;
            break;
        }
        case P_FIN:
            /* The stream is past its last step: FIN, and for isend and irecv
             * ACK lowered too (the wait may run on another stream than the
             * start, whose lowering could otherwise land on a reused block). */
            if (word(o, W_FIN) && ((o->kind != K_ISEND && o->kind != K_IRECV) || !word(o, W_ACK))) {
                *pp = o->next;
                recycle(o);
                moved = 1;
                continue;
            }
            break;
        }
        if (o->st == P_PROBE || o->st == P_MPI || o->st == P_GATHER) {
            *busy = 1;
            if (!now)
                now = ptsc__now_ns();
            watch(o, now);
        }
        pp = &o->next;
    }
    return moved;
}

/* Take the operations armed since the last pass, in the order they were armed. */
static void take_incoming(void)
{
    pthread_mutex_lock(&Q.mu);
    op_t *in = Q.incoming;
    Q.incoming = NULL;
    pthread_mutex_unlock(&Q.mu);
    op_t *rev = NULL;
    while (in) {
        op_t *n = in->next;
        in->next = rev;
        rev = in;
        in = n;
    }
    op_t **tail = &Q.ops;
    while (*tail)
        tail = &(*tail)->next;
    *tail = rev;
}

/* How the proxy waits between passes. It yields for a few passes after
 * the last one that moved something. Then, for POLL_NS after the last
 * movement (a stream reaches its next operation, or MPI moves a large
 * message one protocol step per call, within microseconds, and every
 * pause adds its length to an operation of a halo loop): on a machine of
 * at least SPIN_CPUS cores it goes on yielding, unless a yield came back
 * more than OVERRUN_NS late (the cores are taken: the next CROWDED looks
 * are naps); on fewer cores it naps 1, 2, 4, 8 us, because there threads
 * that only yield starve the one with work (on the 2-core CI machine a
 * proxy that yielded made a host-buffer ping-pong of bench_enqueue take
 * 215 us per message instead of 9; docs/design.md, "The stall of spinning
 * threads"). After the window it naps up to 50 us while MPI holds work and
 * up to 500 us otherwise (streams that have not reached their operations,
 * graphs not launched: at most 2000 wake-ups a second, a cost not yet
 * measured). Its timer slack is 1 us,
 * so naps last what they ask for. With no operation at all it sleeps on
 * the condition. */
#define POLL_NS 5000000ull
#define SPIN_CPUS 8
#define OVERRUN_NS 50000ull
#define CROWDED 64

static void *proxy_main(void *arg)
{
    (void)arg;
#ifdef __linux__
    (void)prctl(PR_SET_TIMERSLACK, 1000ul);
#endif
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int spin = ncpu >= SPIN_CPUS, idle = 0, crowded = 0;
    uint64_t last = ptsc__now_ns();
    for (;;) {
        pthread_mutex_lock(&Q.mu);
        while (!Q.stop && !Q.incoming && atomic_load(&Q.live) == 0)
            pthread_cond_wait(&Q.cv, &Q.mu);
        int stop = Q.stop;
        pthread_mutex_unlock(&Q.mu);
        if (stop)
            break; /* finalize drains on its own thread */
        take_incoming();
        int busy = 0;
        if (pass(&busy)) {
            idle = 0;
            last = ptsc__now_ns();
            continue;
        }
        idle += idle < 64;
        uint64_t t0 = ptsc__now_ns(), quiet = t0 - last;
        if (idle < 8 || (spin && !crowded && quiet < POLL_NS)) {
            sched_yield();
            if (ptsc__now_ns() - t0 > OVERRUN_NS)
                crowded = CROWDED;
            continue;
        }
        uint64_t cap = quiet < POLL_NS ? 8000ull : busy ? 50000ull : 500000ull;
        uint64_t ns = 1000ull << (idle - 8 < 9 ? idle - 8 : 9);
        ns = ns < cap ? ns : cap;
        ptsc__nap_ns(ns);
        if (ptsc__now_ns() - t0 > ns + OVERRUN_NS)
            crowded = CROWDED;
        else if (crowded)
            crowded--;
    }
    return NULL;
}

static int arm(op_t *o)
{
    ptsc__gpu_frees_hold(1); /* no cudaFreeHost in ptsc while a stream may wait (gpu_cuda.c) */
    pthread_mutex_lock(&Q.mu);
    if (!Q.running) {
        if (pthread_create(&Q.tid, NULL, proxy_main, NULL) != 0) {
            pthread_mutex_unlock(&Q.mu);
            ptsc__gpu_frees_hold(-1);
            return ptsc__err(PTSC_ERR_INTERNAL, "%s: cannot start the stream proxy thread",
                             kind_name[o->kind]);
        }
        Q.running = 1;
    }
    o->next = Q.incoming;
    Q.incoming = o;
    atomic_fetch_add(&Q.live, 1);
    pthread_cond_signal(&Q.cv);
    pthread_mutex_unlock(&Q.mu);
    return PTSC_OK;
}

/* ---- the stream's side ---------------------------------------------------- */

typedef struct {
    void *stream; /* NULL without a device: the calling thread */
    int dev;
} lane_t;

static int s_write(const lane_t *L, op_t *o, int k, unsigned v)
{
    if (!L->dev) {
        set_word(o, k, v);
        return PTSC_OK;
    }
    return ptsc__gpu_write32(L->stream, o->dw + (unsigned long long)k * sizeof(unsigned), v);
}

static int s_wait(const lane_t *L, op_t *o, int k, unsigned v)
{
    if (L->dev)
        return ptsc__gpu_wait32(L->stream, o->dw + (unsigned long long)k * sizeof(unsigned), v);
    for (unsigned spins = 0; word(o, k) != v; spins++) {
        if (spins < 64)
            sched_yield();
        else
            ptsc__nap_ns(spins < 1024 ? 2000 : 20000);
    }
    return PTSC_OK;
}

static int s_copy(const lane_t *L, void *dst, const void *src, size_t n)
{
    if (!n)
        return PTSC_OK;
    if (!L->dev) {
        memcpy(dst, src, n);
        return PTSC_OK;
    }
    return ptsc__gpu_copy_async(dst, src, n, L->stream);
}

/* The stream a call queues on: the thread's bound stream, or the one named. */
static int lane_of(ptsc_ctx_t *ctx, void *stream, const char *call, lane_t *L)
{
    L->dev = on_device(ctx);
    if (!L->dev) {
        if (stream)
            return ptsc__err(PTSC_ERR_ARG, "%s: a stream was named, but the thread has no device", call);
        L->stream = NULL;
        return PTSC_OK;
    }
    L->stream = stream ? stream : ctx->stream;
    if (L->stream == NULL || L->stream == (void *)0x1) /* stream 0, cudaStreamLegacy */
        return ptsc__err(PTSC_ERR_ARG,
                         "%s: the legacy default stream cannot wait for a message without stalling every "
                         "blocking stream; name another stream (PTSC_STREAM=per-thread or owned binds one)",
                         call);
    /* Under ptsc-run the program's and the engine's MPI calls on device
     * memory pass libptsc-mpi, whose sync (scope auto: the legacy stream)
     * waits for every blocking stream, one parked on an enqueued receive
     * too: said once, as the program may make no such call. Looked up
     * once per process, not per call. */
    static atomic_int looked;
    if (!atomic_load_explicit(&looked, memory_order_relaxed) && !atomic_exchange(&looked, 1) &&
        ptsc__gpu_interposed())
        ptsc__log(
            PTSC__LOG_WARN,
            "%s: libptsc-mpi (ptsc-run) is loaded: its syncs before MPI calls on device memory wait for "
            "every blocking stream, also one waiting for an enqueued message; such calls while "
            "enqueued operations are in flight can hang (docs/design.md, \"Stream-ordered calls\")",
            call);
    return ptsc__gpu_memops();
}

/* Pageable host memory cannot be copied in stream order. Under capture the
 * capture itself refuses a copy from it (and no query is made then). */
static int check_buffer(const lane_t *L, const void *buf, size_t bytes, int capturing, const char *call)
{
    if (!L->dev || !bytes || capturing)
        return PTSC_OK;
    ptsc_memclass_t c;
    int rc = ptsc__mem_classify(buf, &c);
    if (rc == PTSC_OK && c == PTSC_MEM_HOST)
        rc = ptsc__err(PTSC_ERR_UNSUPPORTED,
                       "%s: pageable host memory cannot be copied in stream order; use device, managed or "
                       "pinned memory",
                       call);
    return rc;
}

static int check_args(ptsc_ctx_t **ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                      int tag, const char *call, size_t *bytes)
{
    int rc = ptsc__ctx_resolve(ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf(buf, count, type, call, bytes);
    if (rc == PTSC_OK && *bytes && !ptsc__type_is_contiguous(type))
        rc =
            ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: only contiguous datatypes are staged in stream order", call);
    if (rc == PTSC_OK && *bytes > (size_t)INT32_MAX)
        rc = ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: %zu bytes; at most 2 GiB - 1 per enqueued message", call,
                       *bytes);
    if (rc != PTSC_OK)
        return rc;
    if (rank == PTSC_ANY_RANK)
        return ptsc__err(PTSC_ERR_RANK, "%s: PTSC_ANY_RANK is not supported in stream order", call);
    if (rank < 0 || rank >= ptsc__g.nranks)
        return ptsc__err(PTSC_ERR_RANK, "%s: rank %d is outside [0, %d)", call, rank, ptsc__g.nranks);
    if (thread < 0 || thread >= ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD, "%s: thread %d is outside [0, %d) (PTSC_MAX_THREADS)", call, thread,
                         ptsc__g.nthreads);
    if (tag < 0 || tag > Q.tag_max)
        return ptsc__err(PTSC_ERR_TAG, "%s: tag %d is outside [0, %d] (the enqueued calls' tag range)", call,
                         tag, Q.tag_max);
    return PTSC_OK;
}

/* Queue an operation's steps on the stream (see the top of the file); `in`:
 * what is copied into the block first (NULL: nothing). */
static int queue(op_t *o, const lane_t *L, const void *in, op_t **out)
{
    char *pin = o->block + CELL;
    int rc = PTSC_OK, kind = o->kind, blocking = kind == K_SEND || kind == K_RECV || kind == K_ALLREDUCE;
    /* Captured: recycled when its graph is destroyed. Without the tie (it
     * could not be made) it stays until finalize. */
    if (atomic_load(&o->persistent) && ptsc__gpu_capture_id(L->stream, &o->cap_id) != PTSC_OK)
        ptsc__err_clear(); /* cap_id 0: no wait will match it (ptsc_wait_enqueue) */
    if (atomic_load(&o->persistent) && (o->tie = malloc(sizeof *o->tie)) != NULL) {
        atomic_init(&o->tie->state, 0);
        if (ptsc__gpu_capture_release(L->stream, graph_gone, o->tie) != PTSC_OK) {
            tie_drop(o->tie); /* graph_gone may still run for an object made and released */
            o->tie = NULL;
            ptsc__err_clear();
        }
    }
    /* From the first queued step on, the block is the stream's. */
    int queued = 0, armed = 0;
    if (in && (rc = s_copy(L, pin, in, o->bytes)) == PTSC_OK)
        queued = 1;
    if (rc == PTSC_OK && (rc = s_write(L, o, W_REQ, 1)) == PTSC_OK) {
        queued = 1;
        if ((rc = arm(o)) == PTSC_OK)
            armed = 1;
    }
    if (rc == PTSC_OK) {
        if (blocking) { /* wait DONE; lower it; copy out; FIN */
            if ((rc = s_wait(L, o, W_DONE, 1)) == PTSC_OK && (rc = s_write(L, o, W_DONE, 0)) == PTSC_OK &&
                (kind == K_SEND || (rc = s_copy(L, o->buf, pin, o->bytes)) == PTSC_OK))
                rc = s_write(L, o, W_FIN, 1);
        } else { /* wait until posted; lower it (ptsc_wait_enqueue does the rest) */
            if ((rc = s_wait(L, o, W_ACK, 1)) == PTSC_OK)
                rc = s_write(L, o, W_ACK, 0);
        }
    }
    if (rc != PTSC_OK) {
        if (!queued) {
            block_put(o);
            op_free(o);
            return rc;
        }
        /* The stream may still write the words: the proxy keeps the block
         * until finalize and answers the stream. Not armed (its thread
         * could not start): the block is left alone for good. */
        atomic_store(&o->persistent, 1);
        atomic_store(&o->broken, 1);
        if (!armed)
            (void)arm(o);
        return rc;
    }
    if (out)
        *out = o;
    return PTSC_OK;
}

/* A point-to-point call: checks, then its steps. */
static int enqueue(ptsc_ctx_t *ctx, int kind, void *buf, int count, MPI_Datatype type, int rank, int thread,
                   int tag, void *stream, op_t **out)
{
    const char *call = kind_name[kind];
    size_t bytes = 0;
    lane_t L;
    int rc = check_args(&ctx, buf, count, type, rank, thread, tag, call, &bytes);
    if (rc == PTSC_OK)
        rc = lane_of(ctx, stream, call, &L);
    int capturing = 0;
    if (rc == PTSC_OK && L.dev)
        rc = ptsc__gpu_capturing(L.stream, PTSC_SCOPE_THREAD, &capturing);
    if (rc == PTSC_OK)
        rc = check_buffer(&L, buf, bytes, capturing, call);
    if (rc != PTSC_OK)
        return rc;
    op_t *o = calloc(1, sizeof *o);
    if (!o)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: operation", call);
    o->kind = kind;
    atomic_init(&o->persistent, capturing);
    atomic_init(&o->broken, 0);
    o->index = ctx->index;
    o->rank = rank;
    o->thread = thread;
    o->tag = tag;
    o->bytes = bytes;
    o->buf = buf;
    int T = ptsc__g.nthreads;
    int src = kind == K_SEND || kind == K_ISEND ? ctx->index : thread;
    int dst = kind == K_SEND || kind == K_ISEND ? thread : ctx->index;
    o->mtag = (tag * T + src) * T + dst;
    if ((rc = block_get(o, bytes, L.dev)) != PTSC_OK) {
        op_free(o);
        return rc;
    }
    /* A receive's block starts as a copy of its buffer: a shorter message
     * then leaves the rest of the buffer as it was when the copy out
     * writes the whole block back (MPI writes only what arrived). */
    return queue(o, &L, buf, out);
}

/* ---- the calls -------------------------------------------------------------- */

/* Predefined operations on predefined datatypes: the pairs MPI defines
 * (MPI_Reduce_local, called by the proxy, reports others through
 * MPI_COMM_WORLD's error handler, which aborts by default). */
static int op_suits(MPI_Op op, MPI_Datatype t)
{
    static const MPI_Datatype ints[] = {
        MPI_INT,         MPI_LONG,          MPI_SHORT,          MPI_LONG_LONG,
        MPI_UNSIGNED,    MPI_UNSIGNED_LONG, MPI_UNSIGNED_SHORT, MPI_UNSIGNED_LONG_LONG,
        MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_INT8_T,         MPI_INT16_T,
        MPI_INT32_T,     MPI_INT64_T,       MPI_UINT8_T,        MPI_UINT16_T,
        MPI_UINT32_T,    MPI_UINT64_T};
    static const MPI_Datatype floats[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE};
    static const MPI_Datatype pairs[] = {MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT,
                                         MPI_SHORT_INT};
    int in_ints = 0, in_floats = 0, in_pairs = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        in_ints |= t == ints[i];
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        in_floats |= t == floats[i];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        in_pairs |= t == pairs[i];
    if (op == MPI_SUM || op == MPI_PROD || op == MPI_MAX || op == MPI_MIN)
        return in_ints || in_floats;
    if (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR)
        return in_ints || t == MPI_BYTE;
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
        return in_ints || t == MPI_C_BOOL;
    if (op == MPI_MAXLOC || op == MPI_MINLOC)
        return in_pairs;
    return op == MPI_REPLACE || op == MPI_NO_OP ? 0 : -1; /* -1: a user's operation */
}

int ptsc_allreduce_enqueue(ptsc_ctx_t *ctx, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                           MPI_Op op, void *stream)
{
    const char *call = "ptsc_allreduce_enqueue";
    size_t bytes = 0, sbytes = 0;
    lane_t L;
    int in_place = sbuf == MPI_IN_PLACE, capturing = 0;
    int rc = ptsc__ctx_resolve(&ctx, call);
    if (rc == PTSC_OK)
        rc = ptsc__check_buf_side(rbuf, count, type, call, "receive", &bytes);
    if (rc == PTSC_OK && !in_place)
        rc = ptsc__check_buf_side(sbuf, count, type, call, "send", &sbytes);
    if (rc == PTSC_OK && op == MPI_OP_NULL)
        rc = ptsc__err(PTSC_ERR_ARG, "%s: op is MPI_OP_NULL", call);
    if (rc == PTSC_OK && bytes && !ptsc__type_is_contiguous(type))
        rc =
            ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: only contiguous datatypes are staged in stream order", call);
    if (rc == PTSC_OK && bytes * (size_t)ptsc__g.nranks > (size_t)INT32_MAX)
        rc = ptsc__err(PTSC_ERR_UNSUPPORTED, "%s: %zu bytes x %d ranks; at most 2 GiB - 1 at the root", call,
                       bytes, ptsc__g.nranks);
    if (rc == PTSC_OK && op_suits(op, type) == 0)
        rc =
            ptsc__err(PTSC_ERR_UNSUPPORTED,
                      "%s: this predefined operation is not defined on this datatype in stream order "
                      "(sums, products, maxima and minima of integers and floating types; bitwise operations "
                      "of integers and MPI_BYTE; logical ones of integers and MPI_C_BOOL; MAXLOC and MINLOC "
                      "of pair types; or an operation of MPI_Op_create)",
                      call);
    if (rc == PTSC_OK)
        rc = lane_of(ctx, stream, call, &L);
    if (rc == PTSC_OK && L.dev)
        rc = ptsc__gpu_capturing(L.stream, PTSC_SCOPE_THREAD, &capturing);
    if (rc == PTSC_OK)
        rc = check_buffer(&L, rbuf, bytes, capturing, call);
    if (rc == PTSC_OK && !in_place)
        rc = check_buffer(&L, sbuf, bytes, capturing, call);
    if (rc != PTSC_OK)
        return rc;
    int root = ptsc__g.rank == 0 && ptsc__g.nranks > 1;
    op_t *o = calloc(1, sizeof *o);
    if (o && root && !(o->mrs = calloc((size_t)ptsc__g.nranks - 1, sizeof *o->mrs))) {
        free(o);
        o = NULL;
    }
    if (!o)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "%s: operation", call);
    o->kind = K_ALLREDUCE;
    atomic_init(&o->persistent, capturing);
    atomic_init(&o->broken, 0);
    o->index = ctx->index;
    o->rank = o->thread = -1;
    o->tag = -1;
    o->bytes = bytes;
    o->buf = rbuf;
    o->count = count;
    o->type = type;
    o->op = op;
    /* The root: a slot per rank; the others: the contribution and the result. */
    size_t need = root ? bytes * (size_t)ptsc__g.nranks : ptsc__g.nranks > 1 ? 2 * bytes : bytes;
    if ((rc = block_get(o, need, L.dev)) != PTSC_OK) {
        op_free(o);
        return rc;
    }
    return queue(o, &L, in_place ? rbuf : sbuf, NULL);
}

int ptsc_send_enqueue(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                      int tag, void *stream)
{
    return enqueue(ctx, K_SEND, (void *)buf, count, type, rank, thread, tag, stream, NULL);
}

int ptsc_recv_enqueue(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread, int tag,
                      void *stream)
{
    return enqueue(ctx, K_RECV, buf, count, type, rank, thread, tag, stream, NULL);
}

static int start_i(ptsc_ctx_t *ctx, int kind, void *buf, int count, MPI_Datatype type, int rank, int thread,
                   int tag, void *stream, ptsc_stream_request_t *req)
{
    if (!req) {
        int rc = ptsc__check_ready(kind_name[kind]);
        return rc != PTSC_OK ? rc : ptsc__err(PTSC_ERR_ARG, "%s: request pointer is NULL", kind_name[kind]);
    }
    *req = NULL;
    return enqueue(ctx, kind, buf, count, type, rank, thread, tag, stream, req);
}

int ptsc_isend_enqueue(ptsc_ctx_t *ctx, const void *buf, int count, MPI_Datatype type, int rank, int thread,
                       int tag, void *stream, ptsc_stream_request_t *req)
{
    return start_i(ctx, K_ISEND, (void *)buf, count, type, rank, thread, tag, stream, req);
}

int ptsc_irecv_enqueue(ptsc_ctx_t *ctx, void *buf, int count, MPI_Datatype type, int rank, int thread,
                       int tag, void *stream, ptsc_stream_request_t *req)
{
    return start_i(ctx, K_IRECV, buf, count, type, rank, thread, tag, stream, req);
}

int ptsc_wait_enqueue(ptsc_stream_request_t *req, void *stream)
{
    const char *call = "ptsc_wait_enqueue";
    ptsc_ctx_t *ctx = NULL;
    int rc = ptsc__ctx_resolve(&ctx, call);
    if (rc != PTSC_OK)
        return rc;
    if (!req)
        return ptsc__err(PTSC_ERR_ARG, "%s: request pointer is NULL", call);
    op_t *o = *req;
    if (!o)
        return PTSC_OK; /* a null request is complete */
    if (o->index != ctx->index)
        return ptsc__err(PTSC_ERR_WRONG_THREAD, "%s: the request was started by thread index %d", call,
                         o->index);
    lane_t L;
    unsigned long long cap = 0;
    if ((rc = lane_of(ctx, stream, call, &L)) != PTSC_OK ||
        (L.dev && (rc = ptsc__gpu_capture_id(L.stream, &cap)) != PTSC_OK))
        return rc;
    /* Start and wait in the same capture, or both outside one: a wait in a
     * graph would run again at every launch, on a one-shot request long
     * recycled, or outlive the graph of a captured one. */
    int persistent = atomic_load(&o->persistent) && !atomic_load(&o->broken);
    if (persistent && cap != o->cap_id)
        return ptsc__err(PTSC_ERR_ARG,
                         "%s: the request was started under graph capture; wait for it in the same capture",
                         call);
    if (!persistent && cap)
        return ptsc__err(PTSC_ERR_ARG,
                         "%s: the request was started outside graph capture; wait for it outside capture too",
                         call);
    /* wait DONE; lower it; copy out (a receive); FIN */
    if ((rc = s_wait(&L, o, W_DONE, 1)) == PTSC_OK && (rc = s_write(&L, o, W_DONE, 0)) == PTSC_OK &&
        (o->kind == K_ISEND || (rc = s_copy(&L, o->buf, o->block + CELL, o->bytes)) == PTSC_OK))
        rc = s_write(&L, o, W_FIN, 1);
    if (rc != PTSC_OK)
        return rc; /* the handle stays: the stream's steps are incomplete */
    *req = NULL;
    return PTSC_OK;
}

int ptsc_enqueue_sync(ptsc_ctx_t *ctx, void *stream)
{
    const char *call = "ptsc_enqueue_sync";
    int rc = ptsc__ctx_resolve(&ctx, call);
    lane_t L;
    if (rc == PTSC_OK)
        rc = lane_of(ctx, stream, call, &L);
    if (rc == PTSC_OK && L.dev)
        rc = ptsc__gpu_stream_sync(L.stream);
    if (rc != PTSC_OK)
        return rc;
    return take_error(ctx->index);
}

int ptsc_enqueue_tag_max(int *tag_max)
{
    int rc = ptsc__check_ready_query("ptsc_enqueue_tag_max");
    if (rc != PTSC_OK)
        return rc;
    if (!tag_max)
        return ptsc__err_query(PTSC_ERR_ARG, "ptsc_enqueue_tag_max: tag_max is NULL");
    *tag_max = Q.tag_max;
    return PTSC_OK;
}

/* ---- init and finalize -------------------------------------------------------- */

int ptsc__enqueue_setup(MPI_Comm world)
{
    int T = ptsc__g.nthreads, rc = PTSC_OK, mrc = MPI_SUCCESS;
    long long space = (ptsc__lanes_tag_ub() + 1) / ((long long)T * T);
    Q.tag_max = (int)(space - 1 < ptsc__g.tag_max ? space - 1 : ptsc__g.tag_max);
    Q.seq = 0;
    Q.stop = Q.running = 0;
    Q.ops = Q.incoming = NULL;
    atomic_store(&Q.live, 0);
    Q.err = calloc((size_t)T, sizeof *Q.err);
    Q.detail = calloc((size_t)T, sizeof *Q.detail);
    if (!Q.err || !Q.detail) {
        rc = ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_init: enqueue tables");
        goto fail;
    }
    for (int i = 0; i < T; i++)
        atomic_init(&Q.err[i], PTSC_OK);
    if ((mrc = MPI_Comm_dup(world, &Q.comm)) == MPI_SUCCESS &&
        (mrc = MPI_Comm_dup(world, &Q.ccomm)) != MPI_SUCCESS)
        MPI_Comm_free(&Q.comm);
    if (mrc != MPI_SUCCESS) {
        Q.comm = Q.ccomm = MPI_COMM_NULL; /* teardown then does nothing */
        rc = ptsc__err_mpi(mrc, "ptsc_init: MPI_Comm_dup for the enqueued calls");
        goto fail;
    }
    MPI_Comm_set_errhandler(Q.comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(Q.ccomm, MPI_ERRORS_RETURN);
    MPI_Comm_set_name(Q.comm, "ptsc enqueue");
    MPI_Comm_set_name(Q.ccomm, "ptsc enqueue allreduce");
    return PTSC_OK;
fail:
    free(Q.err);
    free(Q.detail);
    Q.err = NULL;
    Q.detail = NULL;
    return rc;
}

/* Finalize: the proxy drains what MPI holds; what no stream reached, or
 * what never matched, is given up after DRAIN_NS without movement (its
 * stream is released, its block left alone), with a warning. */
#define DRAIN_NS 2000000000ull

static void drain(void)
{
    uint64_t last = ptsc__now_ns();
    for (;;) {
        take_incoming();
        int busy = 0, left = 0;
        if (pass(&busy))
            last = ptsc__now_ns();
        for (op_t *o = Q.ops; o; o = o->next)
            left += !atomic_load(&o->persistent) || o->st != P_IDLE;
        if (!left || ptsc__now_ns() - last > DRAIN_NS)
            break;
        ptsc__nap_ns(busy ? 1000 : 20000);
    }
}

void ptsc__enqueue_teardown(void)
{
    if (Q.comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&Q.mu);
    int running = Q.running;
    Q.stop = 1;
    pthread_cond_signal(&Q.cv);
    pthread_mutex_unlock(&Q.mu);
    if (running)
        pthread_join(Q.tid, NULL);
    drain();
    int keep[2] = {0, 0}; /* a block of that pool may still be used: its chunks stay */
    for (op_t *o = Q.ops, *n; o; o = n) {
        n = o->next;
        /* A captured operation whose graph lives may still be reached by a
         * launch: its block stays (as does a block MPI may still touch). One
         * without a tie (its user object could not be made) is kept until
         * finalize: its graph may live too. */
        int graph_lives = atomic_load(&o->persistent) && (!o->tie || atomic_load(&o->tie->state) == 0);
        int done = atomic_load(&o->persistent) && o->st == P_IDLE && !o->w[W_REQ];
        if (!done) {
            ptsc__log(PTSC__LOG_WARN,
                      "ptsc_finalize: %s of thread %d %s rank %d thread %d, tag %d never completed",
                      kind_name[o->kind], o->index, o->kind == K_SEND || o->kind == K_ISEND ? "to" : "from",
                      o->rank, o->thread, o->tag);
            for (int k = 0; (o->st == P_MPI || o->st == P_GATHER) && k < o->nmr; k++) {
                if (o->mrs[k] == MPI_REQUEST_NULL)
                    continue;
                if (o->kind == K_RECV || o->kind == K_IRECV || o->st == P_GATHER ||
                    (o->kind == K_ALLREDUCE && o->mrs == o->mr && k == 1))
                    PMPI_Cancel(&o->mrs[k]);
                PMPI_Request_free(&o->mrs[k]);
            }
            set_word(o, W_ACK, 1); /* no stream waits forever */
            set_word(o, W_DONE, 1);
        }
        keep[o->dev] |= !done || graph_lives || o->spoiled;
        op_free(o);
    }
    Q.ops = NULL;
    for (int dev = 0; dev < 2; dev++)
        for (struct chunk *k = Q.pool[dev].chunks, *n; k; k = n) {
            n = k->next;
            if (keep[dev] || Q.pool[dev].keep)
                ; /* left alone for good */
            else if (dev)
                ptsc__gpu_host_free(k->base);
            else
                free(k->base);
            free(k);
        }
    memset(Q.free_blocks, 0, sizeof Q.free_blocks);
    memset(Q.pool, 0, sizeof Q.pool);
    MPI_Comm_free(&Q.comm);
    MPI_Comm_free(&Q.ccomm);
    Q.comm = Q.ccomm = MPI_COMM_NULL;
    free(Q.err);
    free(Q.detail);
    Q.err = NULL;
    Q.detail = NULL;
    Q.running = Q.stop = 0;
    ptsc__gpu_frees_hold(-atomic_load(&Q.live)); /* what finalize gave up or keeps */
    atomic_store(&Q.live, 0);
}

int ptsc__enqueue_live(void) { return atomic_load(&Q.live); }
