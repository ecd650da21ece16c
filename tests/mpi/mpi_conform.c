/*
 * Conformance test against plain MPI. A seeded generator of small
 * multithreaded MPI programs; every program runs either through ptsc or,
 * with MPI_CONFORM_ORACLE=1, as the same schedule on plain MPI (the
 * oracle), and both write one record per receive, probe, cancel and
 * collective. diff_records.cmake runs the oracle and ptsc under the wire
 * formats and compares the records line by line.
 *
 * Usage: mpi_conform PREFIX [NPROGS [SEED0]]: runs the programs of seeds
 * SEED0 .. SEED0 + NPROGS - 1 (default 200 programs from seed 1) and writes
 * PREFIX.<rank>.txt. MPI_CONFORM_SEED=S runs the one program of seed S (the
 * seed every record line starts with), so a failing program is replayed by
 *   MPI_CONFORM_SEED=S MPI_CONFORM_ORACLE=1 mpiexec -n R mpi_conform /tmp/o
 *   MPI_CONFORM_SEED=S PTSC_STAGING=... mpiexec -n R mpi_conform /tmp/p
 *   diff /tmp/o.0.txt /tmp/p.0.txt
 * (the same number of ranks R as the failing run; the records of a seed do
 * not depend on the programs before it).
 *
 * Switches (environment, each on by default; =0 leaves the feature out):
 *   MPI_CONFORM_WRAP      with PTSC_COMM=shared, a tag space of a few dozen
 *                         tags (PTSC_MAX_THREADS raised before ptsc_init) so
 *                         that the ids of framed messages wrap within a burst
 *   MPI_CONFORM_PROBED    messages probed, not received, by a thread that
 *                         then detaches or exits; its successor receives them
 *   MPI_CONFORM_TRUNC_NC  truncation into a receive with a non-contiguous
 *                         datatype (MPI writes the first bytes)
 *   MPI_CONFORM_DUPREQ    (ptsc only, after the programs) ptsc_waitall given
 *                         one request twice must answer PTSC_ERR_ARG and
 *                         change nothing
 *   MPI_CONFORM_PROBE_PRE a probe after a pre-posted receive of the same
 *                         channel: it must see the next message, not the one
 *                         the posted receive matches
 *
 * A program: R ranks (all of the job) x NT threads (2..4), 2..5 phases.
 * In each phase every thread index of every rank, in this order:
 *   0. maybe a collective of its lane (thread t of every rank): barrier,
 *      allreduce or bcast (oracle: one duplicate of MPI_COMM_WORLD per index)
 *   1. receives the messages left over from the previous phase (below)
 *   2. posts its non-blocking receives, and a receive it will cancel (its
 *      message is sent only in the next phase, so it is unmatched)
 *   3. sends: isend, or a blocking send to a receive posted in step 2
 *   4. blocking receives (recv_info, probe or iprobe then recv_info,
 *      PTSC_ANY_RANK) in a shuffled order that keeps each channel's order
 *   5. completes its requests: waitall, wait_info in a shuffled order, or
 *      testsome polling; cancels first
 *   6. probes the messages it leaves to the next phase (leftovers)
 *   7. maybe hands its index over: detaches (or simply exits) and a new
 *      thread attaches the same index (it receives the leftovers)
 *   8. waits at a barrier of every thread of every rank (spinning, testing
 *      its carried sends so staged pieces progress)
 * Messages: 0 bytes to 5 chunks of 4 KiB, bursts of 44..60 framed messages
 * from one thread to another (ids wrap in a small tag space), datatypes
 * MPI_BYTE, MPI_INT, a vector and an indexed type with holes (non-contiguous
 * only up to 4 KiB, what ptsc supports while staging), receive buffers
 * equal, larger (bytes past the message keep their contents) or smaller
 * (truncation) than the message. Records: per receive the status, bytes,
 * source, tag and a checksum of the whole receive buffer (holes and the
 * bytes past the message included).
 *
 * Matching is deterministic: each channel (source endpoint, destination
 * endpoint, tag) is received in send order (non-overtaking), PTSC_ANY_RANK
 * receives, leftovers and cancelled receives use tags no other message of
 * the program uses, and pre-posted receives come first in their channel.
 * Deadlock freedom: every phase's sends are non-blocking except to
 * receives posted before any blocking call, and a blocking receive waits
 * only for a message whose sender starts it without waiting for anything.
 */
#include "mpi_common.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#define MAXT 4      /* threads per rank in a program (oracle tag = tag * MAXT + source thread) */
#define NORD 8      /* ordinary tags 0..NORD-1 */
#define NSPECIAL 32 /* unique tags NORD..NORD+NSPECIAL-1 */
#define MAXPH 5     /* phases */
#define MAXMSG 400  /* messages of a program */
#define CHUNK 4096  /* the piece size of the staged CI runs; non-contiguous messages stay within it */
#define RECLEN 200

static int R, ORACLE, MAXTHR;
static int TRACE; /* MPI_CONFORM_TRACE=1: each step on stderr (to find a hang) */
#define TR(...)                                          \
    do {                                                 \
        if (TRACE) {                                     \
            fprintf(stderr, "trace [rank %d] ", g_rank); \
            fprintf(stderr, __VA_ARGS__);                \
        }                                                \
    } while (0)
static int SW_WRAP = 1, SW_PROBED = 1, SW_TRUNC_NC = 1, SW_DUPREQ = 1, SW_PROBE_PRE = 1;
static MPI_Comm g_bar;                         /* barrier communicator */
static MPI_Comm g_p2p[MAXT], g_coll[MAXT];     /* oracle: per thread index */
static MPI_Datatype g_vec, g_idx;              /* with holes */
enum { DT_BYTE, DT_INT, DT_VEC, DT_IDX, NDT }; /* datatypes of the schedule */
static const char *const dt_name[NDT] = {"byte", "int", "vec", "idx"};
static MPI_Datatype dt_of(int d)
{
    return d == DT_BYTE ? MPI_BYTE : d == DT_INT ? MPI_INT : d == DT_VEC ? g_vec : g_idx;
}
static size_t dt_size[NDT], dt_extent[NDT];

/* ------------------------------------------------------------------------ */
/* Randomness                                                                */
/* ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n) { return n <= 1 ? 0 : (int)(splitmix(s) % (uint64_t)n); }

static void fill_bytes(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = splitmix(&s);
        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
}

static uint64_t checksum(const unsigned char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* ------------------------------------------------------------------------ */
/* The schedule                                                              */
/* ------------------------------------------------------------------------ */

enum { M_PRE, M_BLK, M_PROBE, M_IPROBE, M_ANY, M_LEFT }; /* how a message is received */
static const char *const m_name[] = {"pre", "blk", "probe", "iprobe", "any", "left"};
enum { H_NONE, H_DETACH, H_EXIT };
enum { C_NONE, C_BARRIER, C_ALLREDUCE, C_BCAST };
enum { W_ALL, W_EACH, W_SOME };

typedef struct {
    int phase, src, dst, tag, method;
    int probed; /* leftover probed by the holder that leaves it */
    int bsend;  /* sent with a blocking send (its receive is pre-posted) */
    int st, rt; /* datatypes */
    int scount, rcount;
    size_t bytes, cap; /* message and receive capacity, bytes of data */
    int trunc;
    int cancel_phase; /* >= 0: a receive for it is posted and cancelled in that phase */
    uint64_t seed;
} msg_t;

typedef struct {
    uint64_t seed;
    int NT, P, nph, nmsg;
    int coll[MAXPH], coll_root[MAXPH];
    int hand[MAXPH][4 * MAXT]; /* per phase and endpoint: H_* after the phase */
    int wstyle[MAXPH][4 * MAXT];
    msg_t m[MAXMSG];
} prog_t;

#define RANK_OF(pg, g) ((g) / (pg)->NT)
#define THREAD_OF(pg, g) ((g) % (pg)->NT)

/* Bytes of a message or capacity: mostly around the 4 KiB chunk. */
static size_t pick_bytes(uint64_t *s, int small)
{
    switch (rnd(s, 10)) {
    case 0:
        return 0;
    case 1:
    case 2:
        return 1 + (size_t)rnd(s, 64);
    case 3:
        return 4095 + (size_t)rnd(s, 3);
    case 4:
    case 5:
        return 1 + (size_t)rnd(s, 4096);
    default:
        return small ? 1 + (size_t)rnd(s, 4096) : 4097 + (size_t)rnd(s, 4 * 4096);
    }
}

static int g_special; /* next unique tag while generating */

static int special_tag(void) { return g_special < NSPECIAL ? NORD + g_special++ : -1; }

/* Fill in the datatypes, counts and capacity of m. */
static void shape(uint64_t *s, msg_t *m, int burst)
{
    m->st = burst ? rnd(s, 2) : rnd(s, NDT);
    int nc_recv_ok = !burst;
    m->rt = m->st == DT_BYTE ? DT_BYTE : (nc_recv_ok ? 1 + rnd(s, 3) : DT_INT);
    int noncontig = m->st >= DT_VEC || m->rt >= DT_VEC;
    size_t want = burst ? 4097 + (size_t)rnd(s, 3 * 4096) : pick_bytes(s, noncontig);
    size_t ss = dt_size[m->st];
    m->scount = (int)(want / ss);
    m->bytes = (size_t)m->scount * ss;
    size_t rs = dt_size[m->rt];
    int mode = burst ? rnd(s, 2) : rnd(s, 8); /* 0 equal, 1..4 larger, 5.. truncation */
    if (mode >= 5 && m->bytes > 0 && (m->rt < DT_VEC || SW_TRUNC_NC)) {
        m->rcount = rnd(s, (int)((m->bytes - 1) / rs) + 1); /* capacity < bytes */
        m->trunc = 1;
    } else if (mode == 0 && m->bytes % rs == 0) {
        m->rcount = (int)(m->bytes / rs);
    } else {
        m->rcount = (int)((m->bytes + rs - 1) / rs) + rnd(s, 4) + (m->bytes % rs == 0 ? 1 : 0);
        if (noncontig && (size_t)m->rcount * rs > CHUNK) /* a receive capacity within the chunk */
            m->rcount = (int)((m->bytes + rs - 1) / rs);
    }
    m->cap = (size_t)m->rcount * rs;
    m->trunc = m->cap < m->bytes;
}

static void gen(uint64_t seed, prog_t *pg)
{
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + 0x9e37;
    memset(pg, 0, sizeof *pg);
    g_special = 0;
    pg->seed = seed;
    pg->NT = 2 + rnd(&s, MAXTHR - 1);
    pg->P = R * pg->NT;
    pg->nph = 2 + rnd(&s, MAXPH - 1);
    int P = pg->P;
    for (int p = 0; p < pg->nph; p++) {
        int c = rnd(&s, 6);
        pg->coll[p] = c < 3 ? C_NONE : c == 3 ? C_BARRIER : c == 4 ? C_ALLREDUCE : C_BCAST;
        pg->coll_root[p] = rnd(&s, R);
        for (int g = 0; g < P; g++) {
            int h = rnd(&s, 10);
            pg->hand[p][g] = p == pg->nph - 1 ? H_NONE : h == 0 ? H_DETACH : h == 1 ? H_EXIT : H_NONE;
            pg->wstyle[p][g] = rnd(&s, 3);
        }
    }
    for (int p = 0; p < pg->nph; p++) {
        int n = 2 + rnd(&s, 11);
        int burst = rnd(&s, 5) == 0;
        int bsrc = rnd(&s, P), bdst = rnd(&s, P), nb = burst ? 44 + rnd(&s, 17) : 0;
        for (int k = 0; k < n + nb && pg->nmsg < MAXMSG - 2; k++) {
            msg_t *m = &pg->m[pg->nmsg];
            memset(m, 0, sizeof *m);
            m->phase = p;
            m->cancel_phase = -1;
            m->seed = splitmix(&s);
            int b = k >= n;
            m->src = b ? bsrc : rnd(&s, P);
            m->dst = b ? bdst : rnd(&s, P);
            m->tag = rnd(&s, NORD);
            int r = rnd(&s, 16);
            m->method = b        ? (r < 4 ? M_PRE : M_BLK)
                        : r < 5  ? M_PRE
                        : r < 9  ? M_BLK
                        : r < 11 ? M_PROBE
                        : r < 12 ? M_IPROBE
                        : r < 14 ? M_ANY
                                 : M_LEFT;
            if (m->method == M_LEFT && (p == pg->nph - 1 || pg->hand[p][m->src] != H_NONE))
                m->method = M_BLK; /* a leftover's sender must stay to complete it next phase */
            if (m->method == M_ANY || m->method == M_LEFT) {
                int t = special_tag();
                if (t < 0)
                    m->method = M_BLK;
                else
                    m->tag = t;
            }
            if (m->method == M_LEFT && SW_PROBED)
                m->probed = rnd(&s, 3) != 0;
            shape(&s, m, b);
            m->bsend = m->method == M_PRE && !b && rnd(&s, 3) == 0;
            pg->nmsg++;
            /* A message of the next phase whose receive is posted and cancelled in this one. */
            if (!b && p < pg->nph - 1 && rnd(&s, 10) == 0 && pg->nmsg < MAXMSG - 2) {
                int t = special_tag();
                if (t >= 0) {
                    msg_t *c = &pg->m[pg->nmsg++];
                    memset(c, 0, sizeof *c);
                    c->phase = p + 1;
                    c->cancel_phase = p;
                    c->seed = splitmix(&s);
                    c->src = rnd(&s, P);
                    c->dst = rnd(&s, P);
                    c->tag = t;
                    c->method = rnd(&s, 2) ? M_PRE : M_BLK;
                    shape(&s, c, 0);
                }
            }
        }
    }
    /* A pre-posted receive must come first in its channel: within a phase, a
     * message after a non-pre-posted one of the same channel is not pre-posted.
     * Without MPI_CONFORM_PROBE_PRE, a probe never follows a pre-posted
     * receive of its channel either. */
    for (int i = 0; i < pg->nmsg; i++) {
        msg_t *a = &pg->m[i];
        if (!SW_PROBE_PRE && (a->method == M_PROBE || a->method == M_IPROBE))
            for (int j = 0; j < i; j++) {
                msg_t *b = &pg->m[j];
                if (b->phase == a->phase && b->src == a->src && b->dst == a->dst && b->tag == a->tag &&
                    b->method == M_PRE)
                    a->method = M_BLK;
            }
        if (a->method != M_PRE)
            continue;
        for (int j = 0; j < i; j++) {
            msg_t *b = &pg->m[j];
            if (b->phase == a->phase && b->src == a->src && b->dst == a->dst && b->tag == a->tag &&
                b->method != M_PRE) {
                a->method = M_BLK;
                a->bsend = 0;
                break;
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    char recv[RECLEN], probe[RECLEN], send[RECLEN], cancel[RECLEN];
} mrec_t;

static prog_t g_pg;
static mrec_t g_rec[MAXMSG];
static char g_crec[MAXPH][MAXT][RECLEN];

static const char *st_text(int rc)
{
    switch (rc) {
    case PTSC_OK:
        return "OK";
    case PTSC_ERR_TRUNCATE:
        return "TRUNCATE";
    case PTSC_ERR_CANCELLED:
        return "CANCELLED";
    default:
        return ptsc_status_name(rc);
    }
}

/* MPI's error of a completed receive as a ptsc-like status. */
static int mpi_st(int err, MPI_Status *st)
{
    int cancelled = 0;
    MPI_Test_cancelled(st, &cancelled);
    if (cancelled)
        return PTSC_ERR_CANCELLED;
    if (err == MPI_SUCCESS)
        return PTSC_OK;
    int cls = 0;
    MPI_Error_class(err, &cls);
    return cls == MPI_ERR_TRUNCATE ? PTSC_ERR_TRUNCATE : PTSC_ERR_MPI;
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */

#define GUARD 16

static size_t span(int dt, int count) { return (size_t)count * dt_extent[dt] + GUARD; }

static unsigned char *recv_init(const msg_t *m)
{
    size_t n = span(m->rt, m->rcount);
    unsigned char *b = malloc(n);
    if (!b) {
        CHECK(0, "out of memory");
        exit(2);
    }
    fill_bytes(b, n, m->seed ^ 0x5555);
    return b;
}

static unsigned char *send_init(const msg_t *m)
{
    size_t n = span(m->st, m->scount);
    unsigned char *b = malloc(n);
    if (!b) {
        CHECK(0, "out of memory");
        exit(2);
    }
    fill_bytes(b, n, m->seed);
    return b;
}

/* ------------------------------------------------------------------------ */
/* One endpoint's requests                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    int msg;     /* message index */
    int is_recv; /* 1 receive, 2 cancelled receive */
    unsigned char *buf;
    unsigned char *whole; /* oracle, truncation: the whole message, unpacked into buf when complete */
    ptsc_request_t preq;
    MPI_Request mreq;
} req_t;

typedef struct {
    int g, t; /* endpoint and thread index */
    ptsc_ctx_t *ctx;
    req_t *rq;
    int nrq, caprq;
    req_t carried[MAXMSG]; /* leftover sends, completed next phase */
    int ncarried;
} ep_t;

static req_t *rq_add(ep_t *e)
{
    if (e->nrq == e->caprq) {
        e->caprq = e->caprq ? 2 * e->caprq : 64;
        e->rq = realloc(e->rq, (size_t)e->caprq * sizeof *e->rq);
        if (!e->rq)
            exit(2);
    }
    req_t *r = &e->rq[e->nrq++];
    memset(r, 0, sizeof *r);
    r->mreq = MPI_REQUEST_NULL;
    return r;
}

static void rec_recv(const msg_t *m, const char *how, int rc, size_t bytes, int srank, int sthread, int tag,
                     const unsigned char *b)
{
    int i = (int)(m - g_pg.m);
    snprintf(g_rec[i].recv, RECLEN, "s%llu m%d %s %s st=%s bytes=%zu src=%d,%d tag=%d sum=%016llx",
             (unsigned long long)g_pg.seed, i, m_name[m->method], how, st_text(rc), bytes, srank, sthread,
             tag, (unsigned long long)checksum(b, span(m->rt, m->rcount)));
}

/* A receive completed with info (ptsc) or status (oracle); records it. */
static void done_recv(const msg_t *m, const char *how, int rc, const ptsc_info_t *info, MPI_Status *st,
                      const unsigned char *b)
{
    int srank = -1, sthread = -1, tag = -1;
    size_t bytes = 0;
    if (rc == PTSC_ERR_CANCELLED) {
        /* nothing else defined */
    } else if (ORACLE) {
        int cnt = 0;
        MPI_Get_count(st, MPI_BYTE, &cnt);
        bytes = rc == PTSC_ERR_TRUNCATE ? m->cap : (size_t)cnt;
        srank = st->MPI_SOURCE;
        tag = st->MPI_TAG / MAXT;
        sthread = st->MPI_TAG % MAXT;
    } else if (info) {
        bytes = info->bytes;
        srank = info->rank;
        sthread = info->thread;
        tag = info->tag;
        CHECK(info->error == rc, "seed %llu message %d: info.error %s, returned %s",
              (unsigned long long)g_pg.seed, (int)(m - g_pg.m), st_text(info->error), st_text(rc));
    }
    rec_recv(m, how, rc, bytes, srank, sthread, tag, b);
}

/* ------------------------------------------------------------------------ */
/* Operations, ptsc or oracle                                                */
/* ------------------------------------------------------------------------ */

/*
 * The oracle's truncation: MPI's receive into a too small buffer is not
 * used, since Open MPI 4.1 writes past the buffer when the message came by
 * its get protocol (a truncated irecv of some KiB). The oracle receives the
 * whole message and unpacks the first `cap` bytes with the receive's
 * datatype: the contents MPI defines (the first bytes, in the datatype's
 * layout; holes and the rest untouched) and ptsc promises.
 */
static unsigned char *whole_buf(const msg_t *m)
{
    unsigned char *w = malloc(m->bytes ? m->bytes : 1);
    if (!w)
        exit(2);
    return w;
}

static int whole_done(const msg_t *m, unsigned char *w, unsigned char *buf, int rc)
{
    int pos = 0;
    if (rc == PTSC_OK) {
        MPI_Unpack(w, (int)m->cap, &pos, buf, m->rcount, dt_of(m->rt), MPI_COMM_WORLD);
        rc = PTSC_ERR_TRUNCATE;
    }
    free(w);
    return rc;
}

static int otag(int tag, int sthread) { return tag * MAXT + sthread; }

static void post_recv(ep_t *e, const msg_t *m, int cancel)
{
    req_t *r = rq_add(e);
    r->msg = (int)(m - g_pg.m);
    r->is_recv = cancel ? 2 : 1;
    r->buf = recv_init(m);
    int srank = RANK_OF(&g_pg, m->src), sthread = THREAD_OF(&g_pg, m->src);
    int rc;
    if (ORACLE && m->trunc) {
        r->whole = whole_buf(m);
        rc = MPI_Irecv(r->whole, (int)m->bytes, MPI_BYTE, srank, otag(m->tag, sthread), g_p2p[e->t],
                       &r->mreq) == MPI_SUCCESS
                 ? PTSC_OK
                 : PTSC_ERR_MPI;
    } else if (ORACLE)
        rc = MPI_Irecv(r->buf, m->rcount, dt_of(m->rt), srank, otag(m->tag, sthread), g_p2p[e->t],
                       &r->mreq) == MPI_SUCCESS
                 ? PTSC_OK
                 : PTSC_ERR_MPI;
    else
        rc = ptsc_irecv(e->ctx, r->buf, m->rcount, dt_of(m->rt), srank, sthread, m->tag, &r->preq);
    CHECK(rc == PTSC_OK, "seed %llu message %d: irecv: %s %s", (unsigned long long)g_pg.seed, r->msg,
          st_text(rc), ORACLE ? "" : ptsc_last_error());
}

static void do_send(ep_t *e, const msg_t *m, int carry)
{
    int i = (int)(m - g_pg.m);
    unsigned char *b = send_init(m);
    int drank = RANK_OF(&g_pg, m->dst), dthread = THREAD_OF(&g_pg, m->dst);
    int rc;
    if (m->bsend) {
        if (ORACLE)
            rc =
                MPI_Send(b, m->scount, dt_of(m->st), drank, otag(m->tag, e->t), g_p2p[dthread]) == MPI_SUCCESS
                    ? PTSC_OK
                    : PTSC_ERR_MPI;
        else
            rc = ptsc_send(e->ctx, b, m->scount, dt_of(m->st), drank, dthread, m->tag);
        snprintf(g_rec[i].send, RECLEN, "s%llu m%d send st=%s", (unsigned long long)g_pg.seed, i,
                 st_text(rc));
        free(b);
        return;
    }
    req_t *r = carry ? &e->carried[e->ncarried++] : rq_add(e);
    memset(r, 0, sizeof *r);
    r->msg = i;
    r->buf = b;
    r->mreq = MPI_REQUEST_NULL;
    if (ORACLE)
        rc = MPI_Isend(b, m->scount, dt_of(m->st), drank, otag(m->tag, e->t), g_p2p[dthread], &r->mreq) ==
                     MPI_SUCCESS
                 ? PTSC_OK
                 : PTSC_ERR_MPI;
    else
        rc = ptsc_isend(e->ctx, b, m->scount, dt_of(m->st), drank, dthread, m->tag, &r->preq);
    CHECK(rc == PTSC_OK, "seed %llu message %d: isend: %s %s", (unsigned long long)g_pg.seed, i, st_text(rc),
          ORACLE ? "" : ptsc_last_error());
}

/* A request r completed with rc (and info or status): record it, free it. */
static void req_done(req_t *r, const char *how, int rc, const ptsc_info_t *info, MPI_Status *st)
{
    const msg_t *m = &g_pg.m[r->msg];
    if (r->whole) {
        rc = whole_done(m, r->whole, r->buf, rc);
        r->whole = NULL;
    }
    if (r->is_recv == 2)
        snprintf(g_rec[r->msg].cancel, RECLEN, "s%llu m%d cancelled %s st=%s sum=%016llx",
                 (unsigned long long)g_pg.seed, r->msg, how, st_text(rc),
                 (unsigned long long)checksum(r->buf, span(m->rt, m->rcount)));
    else if (r->is_recv)
        done_recv(m, how, rc, info, st, r->buf);
    else
        snprintf(g_rec[r->msg].send, RECLEN, "s%llu m%d send %s st=%s", (unsigned long long)g_pg.seed, r->msg,
                 how, st_text(rc));
    free(r->buf);
    r->buf = NULL;
}

static void blocking_recv(ep_t *e, const msg_t *m)
{
    int i = (int)(m - g_pg.m);
    TR("endpoint %d: receive m%d (%s from %d tag %d)\n", e->g, i, m_name[m->method], m->src, m->tag);
    int any = m->method == M_ANY;
    int srank = RANK_OF(&g_pg, m->src), sthread = THREAD_OF(&g_pg, m->src);
    if (m->method == M_PROBE || m->method == M_IPROBE) {
        int rc = PTSC_OK, flag = 0, bytes = -1, pr = -1, pt = -1, ptag = -1;
        if (ORACLE) {
            MPI_Status st;
            if (m->method == M_PROBE)
                rc = MPI_Probe(srank, otag(m->tag, sthread), g_p2p[e->t], &st);
            else
                for (unsigned n = 0; (rc = MPI_Iprobe(srank, otag(m->tag, sthread), g_p2p[e->t], &flag,
                                                      &st)) == MPI_SUCCESS &&
                                     !flag;)
                    test_pause(&n);
            rc = rc == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            pr = st.MPI_SOURCE;
            ptag = st.MPI_TAG / MAXT;
            pt = st.MPI_TAG % MAXT;
        } else {
            ptsc_info_t info;
            memset(&info, 0xff, sizeof info);
            if (m->method == M_PROBE)
                rc = ptsc_probe(e->ctx, srank, sthread, m->tag, &info);
            else
                for (unsigned n = 0;
                     (rc = ptsc_iprobe(e->ctx, srank, sthread, m->tag, &flag, &info)) == PTSC_OK && !flag;)
                    test_pause(&n);
            bytes = (int)info.bytes;
            pr = info.rank;
            pt = info.thread;
            ptag = info.tag;
        }
        snprintf(g_rec[i].probe, RECLEN, "s%llu m%d %s st=%s bytes=%d src=%d,%d tag=%d",
                 (unsigned long long)g_pg.seed, i, m_name[m->method], st_text(rc), bytes, pr, pt, ptag);
    }
    unsigned char *b = recv_init(m);
    int rc;
    if (ORACLE && m->trunc) {
        MPI_Status st;
        unsigned char *w = whole_buf(m);
        rc = mpi_st(MPI_Recv(w, (int)m->bytes, MPI_BYTE, any ? MPI_ANY_SOURCE : srank, otag(m->tag, sthread),
                             g_p2p[e->t], &st),
                    &st);
        rc = whole_done(m, w, b, rc);
        done_recv(m, "recv", rc, NULL, &st, b);
    } else if (ORACLE) {
        MPI_Status st;
        rc = mpi_st(MPI_Recv(b, m->rcount, dt_of(m->rt), any ? MPI_ANY_SOURCE : srank, otag(m->tag, sthread),
                             g_p2p[e->t], &st),
                    &st);
        done_recv(m, "recv", rc, NULL, &st, b);
    } else {
        ptsc_info_t info;
        memset(&info, 0xff, sizeof info);
        rc = ptsc_recv_info(e->ctx, b, m->rcount, dt_of(m->rt), any ? PTSC_ANY_RANK : srank, sthread, m->tag,
                            &info);
        done_recv(m, "recv", rc, &info, NULL, b);
    }
    free(b);
}

/* A probe of a leftover by the holder that leaves it. */
static void probe_left(ep_t *e, const msg_t *m)
{
    int i = (int)(m - g_pg.m), srank = RANK_OF(&g_pg, m->src), sthread = THREAD_OF(&g_pg, m->src);
    int rc, bytes = -1, pr = -1, pt = -1, ptag = -1;
    if (ORACLE) {
        MPI_Status st;
        rc =
            MPI_Probe(srank, otag(m->tag, sthread), g_p2p[e->t], &st) == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        pr = st.MPI_SOURCE;
        ptag = st.MPI_TAG / MAXT;
        pt = st.MPI_TAG % MAXT;
    } else {
        ptsc_info_t info;
        rc = ptsc_probe(e->ctx, srank, sthread, m->tag, &info);
        bytes = (int)info.bytes;
        pr = info.rank;
        pt = info.thread;
        ptag = info.tag;
    }
    snprintf(g_rec[i].probe, RECLEN, "s%llu m%d probe-left st=%s bytes=%d src=%d,%d tag=%d",
             (unsigned long long)g_pg.seed, i, st_text(rc), bytes, pr, pt, ptag);
}

/* Step 5: complete e's requests in the phase's style. */
static void complete_all(ep_t *e, int style, uint64_t *s)
{
    int n = e->nrq;
    if (n <= 0)
        return;
    for (int k = 0; k < n; k++) /* cancels first */
        if (e->rq[k].is_recv == 2) {
            int rc = ORACLE ? (MPI_Cancel(&e->rq[k].mreq) == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI)
                            : ptsc_cancel(&e->rq[k].preq);
            CHECK(rc == PTSC_OK, "seed %llu: cancel: %s", (unsigned long long)g_pg.seed, st_text(rc));
        }
    ptsc_request_t *pr = calloc((size_t)n + 1, sizeof *pr);
    MPI_Request *mr = calloc((size_t)n, sizeof *mr);
    MPI_Status *sts = calloc((size_t)n, sizeof *sts);
    ptsc_info_t *infos = calloc((size_t)n, sizeof *infos);
    int *idx = calloc((size_t)n, sizeof *idx);
    for (int k = 0; k < n; k++) {
        pr[k] = e->rq[k].preq;
        mr[k] = e->rq[k].mreq;
    }
    if (style == W_ALL) {
        int rc =
            ORACLE ? (MPI_Waitall(n, mr, sts) == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI) : ptsc_waitall(n, pr);
        (void)rc; /* which error comes first is not fixed; per request below */
        for (int k = 0; k < n; k++) {
            CHECK(ORACLE || pr[k] == PTSC_REQUEST_NULL, "seed %llu: waitall left a request",
                  (unsigned long long)g_pg.seed);
            /* ptsc_waitall reports no per-request status: record what does not need it. */
            req_t *r = &e->rq[k];
            const msg_t *m = &g_pg.m[r->msg];
            if (r->whole) {
                whole_done(m, r->whole, r->buf, r->is_recv == 1 ? PTSC_OK : PTSC_ERR_CANCELLED);
                r->whole = NULL;
            }
            if (r->is_recv == 1)
                snprintf(g_rec[r->msg].recv, RECLEN, "s%llu m%d %s waitall sum=%016llx",
                         (unsigned long long)g_pg.seed, r->msg, m_name[m->method],
                         (unsigned long long)checksum(r->buf, span(m->rt, m->rcount)));
            else if (r->is_recv == 2)
                snprintf(g_rec[r->msg].cancel, RECLEN, "s%llu m%d cancelled waitall sum=%016llx",
                         (unsigned long long)g_pg.seed, r->msg,
                         (unsigned long long)checksum(r->buf, span(m->rt, m->rcount)));
            free(r->buf);
            r->buf = NULL;
        }
    } else if (style == W_EACH) {
        int *order = idx;
        for (int k = 0; k < n; k++)
            order[k] = k;
        for (int k = n - 1; k > 0; k--) {
            int j = rnd(s, k + 1), x = order[k];
            order[k] = order[j];
            order[j] = x;
        }
        for (int q = 0; q < n; q++) {
            int k = order[q];
            if (ORACLE) {
                MPI_Status st;
                int err = MPI_Wait(&mr[k], &st);
                req_done(&e->rq[k], "wait", mpi_st(err, &st), NULL, &st);
            } else {
                ptsc_info_t info;
                memset(&info, 0xff, sizeof info);
                int rc = ptsc_wait_info(&pr[k], &info);
                req_done(&e->rq[k], "wait", rc, &info, NULL);
            }
        }
    } else {
        int left = n;
        unsigned polls = 0;
        while (left > 0) {
            int out = 0;
            if (ORACLE) {
                int err = MPI_Testsome(n, mr, &out, idx, sts);
                if (out == MPI_UNDEFINED)
                    break;
                for (int q = 0; q < out; q++) {
                    int k = idx[q];
                    req_done(&e->rq[k], "testsome",
                             mpi_st(err == MPI_ERR_IN_STATUS ? sts[q].MPI_ERROR : err, &sts[q]), NULL,
                             &sts[q]);
                }
            } else {
                int rc = ptsc_testsome(n, pr, &out, idx, infos);
                CHECK(rc == PTSC_OK || out > 0, "seed %llu: testsome: %s %s", (unsigned long long)g_pg.seed,
                      st_text(rc), ptsc_last_error());
                if (out == PTSC_UNDEFINED || (rc != PTSC_OK && out <= 0))
                    break;
                for (int q = 0; q < out; q++) {
                    int k = idx[q];
                    req_done(&e->rq[k], "testsome", infos[q].error, &infos[q], NULL);
                }
            }
            left -= out;
            if (out == 0)
                test_pause(&polls);
        }
    }
    for (int k = 0; k < n; k++)
        if (e->rq[k].buf) {
            CHECK(0, "seed %llu: request of message %d never completed", (unsigned long long)g_pg.seed,
                  e->rq[k].msg);
            free(e->rq[k].buf);
        }
    e->nrq = 0;
    free(pr);
    free(mr);
    free(sts);
    free(infos);
    free(idx);
}

/* Test the carried leftover sends, or (wait) complete those sent before phase `before`. */
static void progress_carried(ep_t *e, int wait, int before)
{
    int keep = 0;
    for (int k = 0; k < e->ncarried; k++) {
        req_t *r = &e->carried[k];
        if (!r->buf)
            continue;
        if (wait && g_pg.m[r->msg].phase >= before) {
            e->carried[keep++] = *r;
            continue;
        }
        int done = 0, rc;
        if (ORACLE) {
            MPI_Status st;
            int err = wait ? MPI_Wait(&r->mreq, &st) : MPI_Test(&r->mreq, &done, &st);
            if (wait)
                done = 1;
            rc = err == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI;
        } else {
            rc = wait ? ptsc_wait(&r->preq) : ptsc_test(&r->preq, &done);
            if (wait)
                done = 1;
        }
        if (done || rc != PTSC_OK)
            req_done(r, "carried", rc, NULL, NULL);
    }
    if (wait)
        e->ncarried = keep;
}

/* ------------------------------------------------------------------------ */
/* Barrier of every thread of every rank; spins, progressing carried sends   */
/* ------------------------------------------------------------------------ */

static int g_bar_count, g_bar_gen;

static void barrier(ep_t *e, int nt)
{
    int gen = __atomic_load_n(&g_bar_gen, __ATOMIC_ACQUIRE);
    int arrived = __atomic_add_fetch(&g_bar_count, 1, __ATOMIC_ACQ_REL);
    if (arrived == nt) {
        MPI_Request r;
        MPI_Ibarrier(g_bar, &r);
        if (!e || e->ncarried == 0) {
            MPI_Wait(&r, MPI_STATUS_IGNORE); /* cheaper than polling, with MPICH's global lock */
        } else {
            int done = 0;
            for (unsigned n = 0; !done;) {
                MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                progress_carried(e, 0, 0);
                if (!done)
                    test_pause(&n);
            }
        }
        __atomic_store_n(&g_bar_count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&g_bar_gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    for (unsigned n = 0; __atomic_load_n(&g_bar_gen, __ATOMIC_ACQUIRE) == gen;) {
        if (e)
            progress_carried(e, 0, 0);
        test_pause(&n);
    }
}

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */
/* ------------------------------------------------------------------------ */

static void do_coll(ep_t *e, int p)
{
    int kind = g_pg.coll[p], root = g_pg.coll_root[p], rc = PTSC_OK;
    uint64_t sum = 0;
    if (kind == C_BARRIER) {
        rc = ORACLE ? (MPI_Barrier(g_coll[e->t]) == MPI_SUCCESS ? PTSC_OK : PTSC_ERR_MPI)
                    : ptsc_barrier(e->ctx);
    } else if (kind == C_ALLREDUCE) {
        int in[7], out[7];
        for (int k = 0; k < 7; k++) {
            in[k] = (int)((g_pg.seed * 31 + (uint64_t)p * 7 + (uint64_t)e->g * 13 + (uint64_t)k) % 1000);
            out[k] = -1;
        }
        rc = ORACLE
                 ? (MPI_Allreduce(in, out, 7, MPI_INT, MPI_SUM, g_coll[e->t]) == MPI_SUCCESS ? PTSC_OK
                                                                                             : PTSC_ERR_MPI)
                 : ptsc_allreduce(e->ctx, in, out, 7, MPI_INT, MPI_SUM);
        sum = checksum((unsigned char *)out, sizeof out);
    } else if (kind == C_BCAST) {
        unsigned char b[5000];
        fill_bytes(b, sizeof b, g_pg.seed + (uint64_t)(g_rank == root ? 1 : 2 + e->g));
        rc = ORACLE
                 ? (MPI_Bcast(b, (int)sizeof b, MPI_BYTE, root, g_coll[e->t]) == MPI_SUCCESS ? PTSC_OK
                                                                                             : PTSC_ERR_MPI)
                 : ptsc_bcast(e->ctx, b, (int)sizeof b, MPI_BYTE, root);
        sum = checksum(b, sizeof b);
    }
    snprintf(g_crec[p][e->t], RECLEN, "s%llu p%d t%d coll%d st=%s sum=%016llx", (unsigned long long)g_pg.seed,
             p, e->t, kind, st_text(rc), (unsigned long long)sum);
}

/* ------------------------------------------------------------------------ */
/* A thread index's holders                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    int t, phase; /* index, phase to start at (after a handover: its barrier) */
    pthread_t pred;
    int has_pred;
    ep_t *e;
} holder_arg_t;

static ep_t g_ep[MAXT];
static int g_done_count;

static void *holder(void *arg);

static int attach(ep_t *e)
{
    e->ctx = NULL;
    if (ORACLE)
        return PTSC_OK;
    int rc = ptsc_thread_attach(e->t, &e->ctx);
    CHECK(rc == PTSC_OK, "seed %llu: ptsc_thread_attach(%d): %s %s", (unsigned long long)g_pg.seed, e->t,
          st_text(rc), ptsc_last_error());
    return rc;
}

static void run_phases(ep_t *e, int from, int after_handover)
{
    const prog_t *pg = &g_pg;
    int g = e->g;
    for (int p = from; p < pg->nph; p++) {
        uint64_t s = pg->seed ^ ((uint64_t)p << 40) ^ ((uint64_t)g << 48);
        if (after_handover) {
            after_handover = 0;
            goto at_barrier;
        }
        TR("seed %llu phase %d endpoint %d: start (hand over after it: %d)\n", (unsigned long long)pg->seed,
           p, g, pg->hand[p][g]);
        /* 0. collective of the lane */
        if (pg->coll[p] != C_NONE)
            do_coll(e, p);
        /* 1. leftovers of the previous phase */
        for (int i = 0; i < pg->nmsg; i++)
            if (pg->m[i].dst == g && pg->m[i].method == M_LEFT && pg->m[i].phase == p - 1)
                blocking_recv(e, &pg->m[i]);
        /* 2. pre-posted receives; receives to cancel */
        for (int i = 0; i < pg->nmsg; i++) {
            const msg_t *m = &pg->m[i];
            if (m->dst == g && m->phase == p && m->method == M_PRE)
                post_recv(e, m, 0);
            if (m->dst == g && m->cancel_phase == p)
                post_recv(e, m, 1);
        }
        /* 3. sends, in message order (each channel in order) */
        for (int i = 0; i < pg->nmsg; i++) {
            const msg_t *m = &pg->m[i];
            if (m->src == g && m->phase == p)
                do_send(e, m, m->method == M_LEFT);
        }
        /* 4. blocking receives, shuffled, each channel in order */
        {
            int list[MAXMSG], n = 0;
            for (int i = 0; i < pg->nmsg; i++) {
                const msg_t *m = &pg->m[i];
                if (m->dst == g && m->phase == p && m->method != M_PRE && m->method != M_LEFT)
                    list[n++] = i;
            }
            int order[MAXMSG], used[MAXMSG];
            for (int k = 0; k < n; k++) {
                order[k] = list[k];
                used[k] = 0;
            }
            for (int k = n - 1; k > 0; k--) {
                int j = rnd(&s, k + 1), x = order[k];
                order[k] = order[j];
                order[j] = x;
            }
            for (int k = 0; k < n; k++) { /* the channel's next message in order */
                const msg_t *a = &pg->m[order[k]];
                for (int q = 0; q < n; q++) {
                    const msg_t *b = &pg->m[list[q]];
                    if (!used[q] && b->src == a->src && b->tag == a->tag) {
                        used[q] = 1;
                        blocking_recv(e, b);
                        break;
                    }
                }
            }
        }
        TR("endpoint %d: completing %d requests\n", g, e->nrq);
        /* 5. requests of this phase; sends carried from the previous one */
        complete_all(e, pg->wstyle[p][g], &s);
        progress_carried(e, 1, p);
        /* 6. probes of this phase's leftovers */
        for (int i = 0; i < pg->nmsg; i++) {
            const msg_t *m = &pg->m[i];
            if (m->dst == g && m->phase == p && m->method == M_LEFT && m->probed)
                probe_left(e, m);
        }
        /* 7. hand the index over */
        if (pg->hand[p][g] != H_NONE) {
            holder_arg_t *a = malloc(sizeof *a);
            a->t = e->t;
            a->phase = p;
            a->pred = pthread_self();
            a->has_pred = 1;
            a->e = e;
            if (!ORACLE && pg->hand[p][g] == H_DETACH) {
                int rc = ptsc_thread_detach();
                CHECK(rc == PTSC_OK, "seed %llu: ptsc_thread_detach: %s %s", (unsigned long long)pg->seed,
                      st_text(rc), ptsc_last_error());
            }
            pthread_t th;
            pthread_create(&th, NULL, holder, a);
            return; /* H_EXIT: the thread ends attached */
        }
    at_barrier:
        TR("endpoint %d: barrier\n", g);
        /* 8. every thread of every rank */
        barrier(e, pg->NT);
    }
    progress_carried(e, 1, pg->nph);
    if (!ORACLE) {
        int rc = ptsc_thread_detach();
        CHECK(rc == PTSC_OK, "seed %llu: final ptsc_thread_detach: %s %s", (unsigned long long)pg->seed,
              st_text(rc), ptsc_last_error());
    }
    __atomic_add_fetch(&g_done_count, 1, __ATOMIC_ACQ_REL);
}

static pthread_t g_last[MAXT];

static void *holder(void *arg)
{
    holder_arg_t a = *(holder_arg_t *)arg;
    free(arg);
    g_me = a.t;
    if (a.has_pred)
        pthread_join(a.pred, NULL); /* the index is free once its old holder has ended */
    g_last[a.t] = pthread_self();
    attach(a.e);
    run_phases(a.e, a.phase, a.has_pred);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Watchdog: a program that hangs names its seed                             */
/* ------------------------------------------------------------------------ */

static uint64_t g_cur_seed;
static int64_t g_cur_start_ms; /* 0: none running */
static int g_all_done;
static pthread_t g_dog;

/* Aborts the job when one program runs longer than MPI_CONFORM_STALL seconds
 * (default 30), or 10 s after the first failed check. */
static void *dog(void *arg)
{
    (void)arg;
    const char *env = getenv("MPI_CONFORM_STALL");
    double stall = env ? atof(env) : 30.0, first_fail = 0, dumped = 0;
    uint64_t dumped_seed = 0;
    while (!__atomic_load_n(&g_all_done, __ATOMIC_ACQUIRE)) {
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        double t = now_s(), start = 1e-3 * (double)__atomic_load_n(&g_cur_start_ms, __ATOMIC_ACQUIRE);
        if (first_fail == 0 && __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST) > 0)
            first_fail = t;
        uint64_t seed = __atomic_load_n(&g_cur_seed, __ATOMIC_ACQUIRE);
        if (dumped > 0 && (seed != dumped_seed || start == 0)) {
            /* The stalled program completed after the dump (its records are still compared). */
            fprintf(stderr,
                    "NOTE [rank %d] seed %llu: no completion for %.0f s, moved again within %.1f s of the "
                    "thread dump\n",
                    g_rank, (unsigned long long)dumped_seed, stall / 2, t - dumped);
            dumped = 0;
        }
        /* Half-way to the verdict: say where every thread is (mpi_common.h). */
        if (dumped == 0 && start > 0 && t - start > stall / 2) {
            char why[96];
            snprintf(why, sizeof why, "seed %llu: no completion after %.0f s", (unsigned long long)seed,
                     t - start);
            thread_dump(why);
            dumped = now_s();
            dumped_seed = seed;
        }
        if ((first_fail > 0 && t - first_fail > 10) || (start > 0 && t - start > stall)) {
            unsigned long long sd = (unsigned long long)__atomic_load_n(&g_cur_seed, __ATOMIC_ACQUIRE);
            fprintf(stderr,
                    "FAIL [rank %d] seed %llu: %s after %.0f s; aborting the job (replay with "
                    "MPI_CONFORM_SEED=%llu)\n",
                    g_rank, sd, first_fail > 0 ? "stuck after a failed check" : "no completion", t - start,
                    sd);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    return NULL;
}

static int run_program(uint64_t seed, FILE *out)
{
    __atomic_store_n(&g_cur_seed, seed, __ATOMIC_RELEASE);
    __atomic_store_n(&g_cur_start_ms, (int64_t)(now_s() * 1e3), __ATOMIC_RELEASE);
    gen(seed, &g_pg);
    memset(g_rec, 0, sizeof g_rec);
    memset(g_crec, 0, sizeof g_crec);
    int NT = g_pg.NT;
    if (TRACE && g_rank == 0)
        for (int i = 0; i < g_pg.nmsg; i++) {
            const msg_t *m = &g_pg.m[i];
            TR("seed %llu m%d: phase %d %d->%d tag %d %s%s%s %s x%d -> %s x%d bytes %zu cap %zu cancel %d\n",
               (unsigned long long)seed, i, m->phase, m->src, m->dst, m->tag, m_name[m->method],
               m->probed ? " probed" : "", m->bsend ? " bsend" : "", dt_name[m->st], m->scount,
               dt_name[m->rt], m->rcount, m->bytes, m->cap, m->cancel_phase);
        }
    __atomic_store_n(&g_done_count, 0, __ATOMIC_RELAXED);
    pthread_t first[MAXT];
    for (int t = 0; t < NT; t++) {
        ep_t *e = &g_ep[t];
        e->t = t;
        e->g = g_rank * NT + t;
        e->nrq = 0;
        e->ncarried = 0;
        holder_arg_t *a = malloc(sizeof *a);
        a->t = t;
        a->phase = 0;
        a->has_pred = 0;
        a->e = e;
        pthread_create(&first[t], NULL, holder, a);
    }
    while (__atomic_load_n(&g_done_count, __ATOMIC_ACQUIRE) < NT)
        nanosleep(&(struct timespec){0, 200000}, NULL);
    for (int t = 0; t < NT; t++)
        pthread_join(g_last[t], NULL);
    /* Records in a fixed order: collectives, then each message's lines. */
    for (int p = 0; p < g_pg.nph; p++)
        for (int t = 0; t < NT; t++)
            if (g_crec[p][t][0])
                fprintf(out, "%s\n", g_crec[p][t]);
    for (int i = 0; i < g_pg.nmsg; i++) {
        const mrec_t *r = &g_rec[i];
        const msg_t *m = &g_pg.m[i];
        int mine_dst = RANK_OF(&g_pg, m->dst) == g_rank, mine_src = RANK_OF(&g_pg, m->src) == g_rank;
        if (mine_dst) {
            if (m->method == M_PROBE || m->method == M_IPROBE || (m->method == M_LEFT && m->probed))
                fprintf(out, "%s\n", r->probe[0] ? r->probe : "probe missing");
            if (m->cancel_phase >= 0)
                fprintf(out, "%s\n", r->cancel[0] ? r->cancel : "cancel missing");
            fprintf(out, "%s %s->%s b=%zu c=%zu\n", r->recv[0] ? r->recv : "receive missing", dt_name[m->st],
                    dt_name[m->rt], m->bytes, m->cap);
        }
        if (mine_src && r->send[0] && strstr(r->send, "waitall") == NULL)
            fprintf(out, "%s\n", r->send);
    }
    fflush(out);
    /* The watchdog times programs only: what follows the last one (the
     * duplicate-request check, the closing allreduce) is not charged to it. */
    __atomic_store_n(&g_cur_start_ms, 0, __ATOMIC_RELEASE);
    return 0;
}

/* MPI_CONFORM_DUPREQ, after the programs (a failure leaves the thread's
 * requests unusable, so it comes last): ptsc_waitall given one request twice
 * answers PTSC_ERR_ARG and changes nothing; the requests then complete. */
static void *dupreq_thread(void *arg)
{
    (void)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = 0;
    int rc = ptsc_thread_attach(0, &ctx);
    CHECK(rc == PTSC_OK, "dupreq: attach: %s %s", st_text(rc), ptsc_last_error());
    if (rc != PTSC_OK)
        return NULL;
    int out[64], in[64];
    for (int k = 0; k < 64; k++) {
        out[k] = k * 7 + g_rank;
        in[k] = -1;
    }
    ptsc_request_t r[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
    CHECK(ptsc_irecv(ctx, in, 64, MPI_INT, g_rank, 0, 1, &r[0]) == PTSC_OK, "dupreq: irecv");
    CHECK(ptsc_isend(ctx, out, 64, MPI_INT, g_rank, 0, 1, &r[1]) == PTSC_OK, "dupreq: isend");
    ptsc_request_t dup[3] = {r[0], r[1], r[0]};
    rc = ptsc_waitall(3, dup);
    int kept = dup[0] == r[0] && dup[1] == r[1] && dup[2] == r[0];
    CHECK(rc == PTSC_ERR_ARG && kept,
          "ptsc_waitall with one request twice returned %s, requests %s (expected PTSC_ERR_ARG, nothing "
          "changed; MPI_CONFORM_DUPREQ=0 leaves this check out)",
          st_text(rc), kept ? "kept" : "completed");
    if (rc != PTSC_ERR_ARG) {
        fflush(stderr);
        _exit(1); /* the thread's request list may be corrupt: its next call could spin forever */
    }
    rc = ptsc_waitall(2, r);
    CHECK(rc == PTSC_OK && memcmp(in, out, sizeof in) == 0, "dupreq: the requests then: %s, data %s",
          st_text(rc), memcmp(in, out, sizeof in) == 0 ? "right" : "wrong");
    rc = ptsc_thread_detach();
    CHECK(rc == PTSC_OK, "dupreq: detach: %s %s", st_text(rc), ptsc_last_error());
    return NULL;
}

static int sw(const char *name)
{
    const char *v = getenv(name);
    return !(v && strcmp(v, "0") == 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s RECORD_PREFIX [NPROGS [SEED0]]\n", argv[0]);
        return 2;
    }
    const char *prefix = argv[1];
    long nprogs = argc > 2 ? atol(argv[2]) : 200;
    uint64_t seed0 = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
    const char *one = getenv("MPI_CONFORM_SEED");
    if (one && *one) {
        seed0 = strtoull(one, NULL, 0);
        nprogs = 1;
    }
    ORACLE = getenv("MPI_CONFORM_ORACLE") && strcmp(getenv("MPI_CONFORM_ORACLE"), "1") == 0;
    TRACE = getenv("MPI_CONFORM_TRACE") != NULL;
    SW_WRAP = sw("MPI_CONFORM_WRAP");
    SW_PROBED = sw("MPI_CONFORM_PROBED");
    SW_TRUNC_NC = sw("MPI_CONFORM_TRUNC_NC");
    SW_DUPREQ = sw("MPI_CONFORM_DUPREQ");
    SW_PROBE_PRE = sw("MPI_CONFORM_PROBE_PRE");

    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "FAIL: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (R > 4) {
        fprintf(stderr, "FAIL: programs have 2 to 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &g_bar);
    MAXTHR = MAXT;
    const char *comm = getenv("PTSC_COMM");
    int shared = comm && strcmp(comm, "shared") == 0;
    int tag_max = -1;
    if (ORACLE) {
        for (int t = 0; t < MAXT; t++) {
            MPI_Comm_dup(MPI_COMM_WORLD, &g_p2p[t]);
            MPI_Comm_dup(MPI_COMM_WORLD, &g_coll[t]);
            MPI_Comm_set_errhandler(g_p2p[t], MPI_ERRORS_RETURN);
        }
    } else {
        if (shared && SW_WRAP) {
            /* The largest thread count (up to 4096) that leaves at least 40 tags:
             * framed-message ids then wrap within a burst. */
            int *ub = NULL, flag = 0;
            MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
            long long tub = flag && ub ? *ub : 32767, T = 4;
            while (T < 4096 && (tub + 1) / (3 * (T + 1) * (T + 1)) >= NORD + NSPECIAL)
                T++;
            char v[32];
            snprintf(v, sizeof v, "%lld", T);
            setenv("PTSC_MAX_THREADS", v, 1);
        }
        int rc = ptsc_init(NULL, NULL);
        if (rc != PTSC_OK) {
            fprintf(stderr, "FAIL ptsc_init: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        int nthreads = 0;
        ptsc_size(NULL, &nthreads);
        ptsc_tag_max(&tag_max);
        if (nthreads < MAXT || tag_max < NORD + NSPECIAL - 1) {
            fprintf(stderr, "FAIL: needs %d thread slots and tags up to %d (have %d, %d)\n", MAXT,
                    NORD + NSPECIAL - 1, nthreads, tag_max);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    pthread_create(&g_dog, NULL, dog, NULL);
    {
        int bl[3] = {1, 3, 2}, dis[3] = {0, 2, 7};
        MPI_Datatype v, x;
        MPI_Type_vector(3, 2, 3, MPI_INT, &v); /* 2 ints, a hole of 1, ... */
        MPI_Type_create_resized(v, 0, 40, &g_vec);
        MPI_Type_indexed(3, bl, dis, MPI_INT, &x);
        MPI_Type_create_resized(x, 0, 44, &g_idx);
        MPI_Type_commit(&g_vec);
        MPI_Type_commit(&g_idx);
        MPI_Type_free(&v);
        MPI_Type_free(&x);
        for (int d = 0; d < NDT; d++) {
            int sz;
            MPI_Aint lb, ext;
            MPI_Type_size(dt_of(d), &sz);
            MPI_Type_get_extent(dt_of(d), &lb, &ext);
            dt_size[d] = (size_t)sz;
            dt_extent[d] = (size_t)ext;
        }
    }

    char path[4096];
    snprintf(path, sizeof path, "%s.%d.txt", prefix, g_rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "FAIL: cannot write %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(f, "rank %d of %d, %ld programs from seed %llu\n", g_rank, R, nprogs, (unsigned long long)seed0);
    fflush(f);
    double t0 = now_s();
    long ran = 0;
    for (long k = 0; k < nprogs; k++) {
        run_program(seed0 + (uint64_t)k, f);
        ran++;
        if (__atomic_load_n(&g_failures, __ATOMIC_SEQ_CST) > 0) {
            fprintf(stderr, "FAIL seed %llu: replay with MPI_CONFORM_SEED=%llu\n",
                    (unsigned long long)g_pg.seed, (unsigned long long)g_pg.seed);
            break;
        }
    }
    fclose(f);
    if (!ORACLE && SW_DUPREQ && __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST) == 0) {
        pthread_t th;
        pthread_create(&th, NULL, dupreq_thread, NULL);
        pthread_join(th, NULL);
    }
    int mine = __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST), total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("%s mpi_conform: %s, %d ranks, %ld programs (seeds %llu..%llu) in %.1f s, PTSC_COMM=%s, "
               "tag_max %d, "
               "%d failed checks\n",
               total ? "FAILED" : "PASSED", ORACLE ? "oracle (plain MPI)" : "ptsc", R, ran,
               (unsigned long long)seed0, (unsigned long long)(seed0 + (uint64_t)ran - 1), now_s() - t0,
               comm ? comm : "dup", tag_max, total);
    fflush(stdout);
    __atomic_store_n(&g_all_done, 1, __ATOMIC_RELEASE);
    pthread_join(g_dog, NULL);
    MPI_Type_free(&g_vec);
    MPI_Type_free(&g_idx);
    if (ORACLE)
        for (int t = 0; t < MAXT; t++) {
            MPI_Comm_free(&g_p2p[t]);
            MPI_Comm_free(&g_coll[t]);
        }
    else {
        int rc = ptsc_finalize();
        if (rc != PTSC_OK)
            fprintf(stderr, "FAIL ptsc_finalize: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
    }
    MPI_Comm_free(&g_bar);
    MPI_Finalize();
    return total ? 1 : 0;
}
