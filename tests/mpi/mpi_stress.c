/*
 * Stress test: every (rank, thread) endpoint exchanges many messages of
 * random size with random peers under random tags, mixing blocking and
 * non-blocking point-to-point calls, with collectives on every thread's lane
 * between rounds. Bounded in rounds and messages; stops by itself.
 *
 * Usage: mpi_stress [ROUNDS [MSGS [SEED]]]
 *   ROUNDS  rounds (default 16)
 *   MSGS    messages each endpoint sends per round (default 12)
 *   SEED    seed of the schedule (default 1)
 *   MPI_STRESS_MEM=device in the environment puts every buffer ptsc sees in
 *   device memory (built with CUDA only; default host, see below).
 * The defaults keep a run at 2 ranks x 16 threads on two cores to a few
 * seconds. A larger setting for a GPU machine (many cores):
 *   mpiexec -n 4 env PTSC_MAX_THREADS=16 OMP_NUM_THREADS=16 mpi_stress 200 32
 * (about 400 000 messages); PTSCTEST_DEADLINE raises the watchdog's limit.
 *
 * Schedule: G = R * T endpoints, endpoint e = rank * T + thread. In round r,
 * endpoint s sends MSGS messages; message k goes to a destination endpoint,
 * with a tag, a payload size (0 bytes to three 4 KiB chunks, some up to
 * 64 KiB), a receive capacity (sometimes larger than the message) and a send
 * style (ptsc_send or ptsc_isend), all drawn from a hash of (SEED, r, s, k).
 * Every thread derives the whole schedule itself, so each receiver knows
 * which messages it gets, in which order, without talking.
 *
 * Messages: a header (sender rank, sender thread, round, sequence number of
 * the (sender, receiver) channel, payload length, checksum of the payload)
 * followed by the payload; messages of size 0 carry no header and are
 * checked by the source and size the receive reports. The receiver checks
 * source, length, checksum, that the bytes past the message in its buffer
 * are untouched, and the sequence number: receives of a channel are posted
 * in channel order with the tag of each message, so MPI's non-overtaking
 * rule gives each slot exactly the message with the slot's sequence number.
 * A sequence number already received counts as duplicated, any other wrong
 * one, a wrong length or checksum as corrupted; an expected message that
 * never completed counts as lost.
 *
 * Deadlock freedom, by construction. (1) Rounds are separated globally: a
 * round ends with ptsc_allreduce and ptsc_bcast on the thread's lane (thread
 * t of every rank), then an OpenMP barrier of the rank's threads. A thread
 * that passed the barrier of round r knows that every thread of its rank
 * passed its lane collectives of round r, hence that every endpoint of every
 * rank entered them, hence finished its point-to-point work of round r. So
 * no message of round r+1 is sent before all receives of round r completed,
 * and collectives only wait for endpoints that are already inside the same
 * collective, with no request of theirs pending. (2) Within a round each
 * thread first posts all its receives with ptsc_irecv (which never blocks),
 * then starts its sends in order, then completes all its requests (wait,
 * waitall or test polling, in random order). A blocking ptsc_send waits only
 * for a receive that its destination posts before any blocking call of the
 * round, and every receive of the round has exactly one matching send in
 * that round, so every send and receive is matched and each thread's
 * waiting ends. With the staging format, a thread's requests progress in
 * each of its ptsc calls, including a blocking send.
 *
 * Device buffers (MPI_STRESS_MEM=device): each thread builds a payload in
 * pinned host memory and copies it into a device send buffer with
 * cudaMemcpyAsync on its ptsc stream, then hands the device buffer to
 * ptsc_send or ptsc_isend without synchronising: ptsc must wait for the copy
 * per its scope before MPI or its staging reads the buffer. Receive buffers
 * are device memory, filled with the pattern by cudaMemsetAsync on the same
 * stream (again without a sync), of the capacity the schedule gives; once
 * the round's requests completed, each is copied back to pinned host memory
 * on the stream, the stream is synchronised and the host copy checked as in
 * host mode (source, length, checksum, sequence, bytes past the message).
 * The lane allreduce and bcast use device buffers the same way. Without a
 * device, or when the buffers would reach an MPI that is not CUDA-aware
 * unstaged (PTSC_STAGING=never), the program prints
 * "mpi_stress: SKIPPED (...)" and exits 0.
 *
 * At the end rank 0 prints the totals over all ranks:
 *   mpi_stress: sent S received R lost L duplicated D corrupted C wall W s
 * and the run fails unless lost = duplicated = corrupted = 0 and
 * sent = received = the messages of the schedule.
 */
#include "mpi_common.h"

#include <omp.h>
#ifdef MPI_STRESS_CUDA
#include <cuda_runtime.h>
#endif

enum { HDR_BYTES = 24, MAX_PAYLOAD = 64 * 1024, MAX_EXTRA = 4096, BCAST_MAX = 3000 };

typedef struct {
    int32_t rank, thread, round;
    uint32_t seq, len, csum;
} hdr_t;

static int g_rounds = 16, g_msgs = 12;
static uint64_t g_seed = 1;
static int g_nranks, g_nthreads;
static int g_dev; /* MPI_STRESS_MEM=device: the buffers ptsc sees are device memory */

static uint64_t g_sent, g_received, g_lost, g_dup, g_corrupt, g_expected;

static inline uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t h4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return splitmix(splitmix(splitmix(splitmix(g_seed ^ a) ^ b) ^ c) ^ d);
}

/* One message of the schedule. */
typedef struct {
    int dst, tag, len, cap, blocking;
} plan_t;

static plan_t plan(int round, int src, int k)
{
    int G = g_nranks * g_nthreads;
    uint64_t h = h4((uint64_t)round, (uint64_t)src, (uint64_t)k, 0x51);
    uint64_t h2 = splitmix(h);
    plan_t p;
    p.dst = (int)(h % (uint64_t)G);
    p.tag = (int)((h >> 20) % 1000);
    int cls = (int)((h >> 32) % 100);
    if (cls < 10)
        p.len = 0;
    else if (cls < 40)
        p.len = HDR_BYTES + (int)(h2 % 200);
    else if (cls < 95)
        p.len = HDR_BYTES + (int)(h2 % (3 * 4096 + 100));
    else
        p.len = HDR_BYTES + (int)(h2 % (MAX_PAYLOAD - HDR_BYTES));
    p.cap = p.len + (((h2 >> 40) % 3 == 0) ? (int)((h2 >> 44) % MAX_EXTRA) + 1 : 0);
    p.blocking = (int)((h >> 50) & 1);
    return p;
}

static inline uint8_t pbyte(int src, uint32_t seq, int i)
{
    return (uint8_t)(splitmix(((uint64_t)src << 40) ^ ((uint64_t)seq << 20) ^ (uint64_t)(i >> 3)) >>
                     (8 * (i & 7)));
}

static uint32_t checksum(const uint8_t *b, int n)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

/*
 * Device memory and copies on the thread's stream (device mode only). Each
 * returns PTSC_OK, or reports the CUDA error as a failed check and returns
 * PTSC_ERR_CUDA. Built without CUDA, device mode skips before reaching them.
 */
#ifdef MPI_STRESS_CUDA
static int cu(cudaError_t e, const char *what, int line)
{
    if (e == cudaSuccess)
        return PTSC_OK;
    test_fail(__FILE__, line, "%s: %s", what, cudaGetErrorString(e));
    return PTSC_ERR_CUDA;
}
#define CU(call) cu((call), #call, __LINE__)
#endif

static int dev_alloc(uint8_t **d, size_t n, int pinned_host)
{
    *d = NULL;
#ifdef MPI_STRESS_CUDA
    return pinned_host ? CU(cudaMallocHost((void **)d, n ? n : 1)) : CU(cudaMalloc((void **)d, n ? n : 1));
#else
    (void)n;
    (void)pinned_host;
    return PTSC_ERR_UNSUPPORTED;
#endif
}

static void dev_free(uint8_t *d, int pinned_host)
{
#ifdef MPI_STRESS_CUDA
    if (d)
        (void)CU(pinned_host ? cudaFreeHost(d) : cudaFree(d));
#else
    (void)d;
    (void)pinned_host;
#endif
}

/* dst <- src, n bytes, queued on `stream`; to_device says the direction. */
static int dev_copy(void *dst, const void *src, size_t n, int to_device, void *stream)
{
#ifdef MPI_STRESS_CUDA
    if (n == 0)
        return PTSC_OK;
    return CU(cudaMemcpyAsync(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                              (cudaStream_t)stream));
#else
    (void)dst;
    (void)src;
    (void)n;
    (void)to_device;
    (void)stream;
    return PTSC_ERR_UNSUPPORTED;
#endif
}

static int dev_fill(void *d, int v, size_t n, void *stream)
{
#ifdef MPI_STRESS_CUDA
    return n ? CU(cudaMemsetAsync(d, v, n, (cudaStream_t)stream)) : PTSC_OK;
#else
    (void)d;
    (void)v;
    (void)n;
    (void)stream;
    return PTSC_ERR_UNSUPPORTED;
#endif
}

static int dev_sync(void *stream)
{
#ifdef MPI_STRESS_CUDA
    return CU(cudaStreamSynchronize((cudaStream_t)stream));
#else
    (void)stream;
    return PTSC_ERR_UNSUPPORTED;
#endif
}

/* Returns from the enclosing int function when a device call failed (already reported). */
#define DEV_OK(call)         \
    do {                     \
        int drc_ = (call);   \
        if (drc_ != PTSC_OK) \
            return drc_;     \
    } while (0)

/* A thread's device-mode buffers: device memory for ptsc, pinned host memory for the program. */
typedef struct {
    void *stream;           /* the thread's ptsc stream (a cudaStream_t) */
    uint8_t *dsend, *hsend; /* MSGS send buffers of MAX_PAYLOAD bytes, and where their payloads are built */
    uint8_t *drecv, *hrecv; /* a round's receive buffers and their host copies */
    uint8_t *dcoll, *hcoll; /* allreduce input and output, then the bcast buffer */
    size_t recv_bytes;
} devbufs_t;

enum { COLL_IN = 0, COLL_OUT = 16, COLL_BCAST = 256, COLL_BYTES = COLL_BCAST + BCAST_MAX };

/* Where a receive buffer of `cap` bytes starts after one that ended at `off` (device mode). */
static size_t dev_next(size_t off, int cap) { return (off + (size_t)cap + 1 + 255) & ~(size_t)255; }

/* A receive slot: the message it must hold. */
typedef struct {
    int src, tag, len, cap;
    uint32_t seq;
    uint8_t *buf;  /* host mode: the receive buffer; device mode: its host copy */
    uint8_t *dbuf; /* device mode: the receive buffer */
} slot_t;

typedef struct {
    uint32_t *send_seq; /* next sequence number to each destination endpoint */
    uint32_t *recv_seq; /* next sequence number expected from each source endpoint */
    uint32_t *got_seq;  /* sequence numbers received in order from each source (for duplicates) */
    uint64_t sent, received, lost, dup, corrupt, expected;
} tstate_t;

static void check_slot(tstate_t *ts, const slot_t *s, int done, int rc, const ptsc_info_t *info,
                       int have_info, int me)
{
    int sr = s->src / g_nthreads, st = s->src % g_nthreads;
    if (!done) {
        ts->lost++;
        test_fail(__FILE__, __LINE__, "lost: message seq %u from (%d,%d) to %d never completed", s->seq, sr,
                  st, me);
        return;
    }
    if (rc != PTSC_OK) {
        ts->corrupt++;
        test_fail(__FILE__, __LINE__, "receive seq %u from (%d,%d): %s", s->seq, sr, st,
                  ptsc_status_name(rc));
        return;
    }
    if (have_info && (info->rank != sr || info->thread != st || info->bytes != (size_t)s->len)) {
        ts->corrupt++;
        test_fail(__FILE__, __LINE__, "seq %u from (%d,%d): info says (%d,%d) %zu bytes, expected %d", s->seq,
                  sr, st, info->rank, info->thread, info->bytes, s->len);
        return;
    }
    for (int i = s->len; i < s->cap; i++)
        if (s->buf[i] != 0xA5) {
            ts->corrupt++;
            test_fail(__FILE__, __LINE__, "seq %u from (%d,%d): byte %d past the %d-byte message overwritten",
                      s->seq, sr, st, i, s->len);
            return;
        }
    if (s->len == 0) {
        ts->received++;
        ts->got_seq[s->src]++;
        return;
    }
    hdr_t h;
    memcpy(&h, s->buf, sizeof h);
    if (h.rank != sr || h.thread != st) {
        ts->corrupt++;
        test_fail(__FILE__, __LINE__, "slot for seq %u from (%d,%d) got a message of (%d,%d)", s->seq, sr, st,
                  h.rank, h.thread);
        return;
    }
    if (h.seq != s->seq) {
        if (h.seq < ts->got_seq[s->src]) {
            ts->dup++;
            test_fail(__FILE__, __LINE__, "duplicate: seq %u from (%d,%d) again (slot of seq %u)", h.seq, sr,
                      st, s->seq);
        } else {
            ts->corrupt++;
            test_fail(__FILE__, __LINE__, "order: seq %u from (%d,%d) arrived in the slot of seq %u", h.seq,
                      sr, st, s->seq);
        }
        return;
    }
    if (h.len != (uint32_t)s->len || h.csum != checksum(s->buf + HDR_BYTES, s->len - HDR_BYTES)) {
        ts->corrupt++;
        test_fail(__FILE__, __LINE__, "corrupted: seq %u from (%d,%d): length %u (expected %d) or checksum",
                  h.seq, sr, st, h.len, s->len);
        return;
    }
    ts->received++;
    ts->got_seq[s->src]++;
}

static void shuffle(int *a, int n, uint64_t *rng)
{
    for (int i = n - 1; i > 0; i--) {
        *rng = splitmix(*rng);
        int j = (int)(*rng % (uint64_t)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int round_p2p(ptsc_ctx_t *ctx, tstate_t *ts, int round, int me, slot_t *slots, int maxslots,
                     ptsc_request_t *reqs, ptsc_info_t *infos, int *done, int *order, uint8_t **sbufs,
                     const devbufs_t *dv)
{
    int G = g_nranks * g_nthreads;
    int nrecv = 0, nreq = 0;
    /* 1. Post every receive of the round, channel by channel in order. */
    for (int s = 0; s < G; s++)
        for (int k = 0; k < g_msgs; k++) {
            plan_t p = plan(round, s, k);
            if (p.dst != me)
                continue;
            CHECK(nrecv < maxslots, "too many receives");
            if (nrecv >= maxslots)
                return PTSC_ERR_ARG;
            slot_t *sl = &slots[nrecv];
            sl->src = s;
            sl->tag = p.tag;
            sl->len = p.len;
            sl->cap = p.cap;
            sl->seq = ts->recv_seq[s]++;
            uint8_t *rb = sl->buf;
            if (g_dev) { /* the pattern lands through the stream; ptsc syncs before MPI writes */
                rb = sl->dbuf;
                DEV_OK(dev_fill(rb, 0xA5, (size_t)p.cap, dv->stream));
            } else {
                memset(rb, 0xA5, (size_t)p.cap);
            }
            CHECK_OK(
                ptsc_irecv(ctx, rb, p.cap, MPI_BYTE, s / g_nthreads, s % g_nthreads, p.tag, &reqs[nreq]));
            done[nreq] = 0;
            nreq++;
            nrecv++;
            ts->expected++;
        }
    /* 2. Sends in order; blocking or not. */
    for (int k = 0; k < g_msgs; k++) {
        plan_t p = plan(round, me, k);
        uint8_t *b = sbufs[k];
        uint32_t seq = ts->send_seq[p.dst]++;
        if (p.len > 0) {
            int n = p.len - HDR_BYTES;
            for (int i = 0; i < n; i++)
                b[HDR_BYTES + i] = pbyte(me, seq, i);
            hdr_t h = {g_rank, me % g_nthreads, round, seq, (uint32_t)p.len, checksum(b + HDR_BYTES, n)};
            memcpy(b, &h, sizeof h);
        }
        if (g_dev) { /* copied on the stream, not waited for: ptsc syncs per its scope before reading */
            uint8_t *d = dv->dsend + (size_t)k * MAX_PAYLOAD;
            DEV_OK(dev_copy(d, b, (size_t)p.len, 1, dv->stream));
            b = d;
        }
        if (p.blocking) {
            CHECK_OK(ptsc_send(ctx, b, p.len, MPI_BYTE, p.dst / g_nthreads, p.dst % g_nthreads, p.tag));
            ts->sent++;
        } else {
            CHECK_OK(ptsc_isend(ctx, b, p.len, MPI_BYTE, p.dst / g_nthreads, p.dst % g_nthreads, p.tag,
                                &reqs[nreq]));
            done[nreq] = 0;
            nreq++;
        }
    }
    /* 3. Complete everything, in a random order and style. */
    int *rcs = done + maxslots + g_msgs;
    for (int i = 0; i < nreq; i++)
        rcs[i] = PTSC_OK;
    uint64_t rng = h4((uint64_t)round, (uint64_t)me, 7, 0x77);
    for (int i = 0; i < nreq; i++)
        order[i] = i;
    shuffle(order, nreq, &rng);
    int style = (int)(splitmix(rng) % 3);
    if (style == 0) { /* ptsc_wait_info, random order */
        for (int i = 0; i < nreq; i++) {
            int j = order[i];
            rcs[j] = ptsc_wait_info(&reqs[j], &infos[j]);
            done[j] = 1;
        }
    } else if (style == 1) { /* ptsc_waitall */
        int rc = ptsc_waitall(nreq, reqs);
        CHECK(rc == PTSC_OK, "ptsc_waitall: %s: %s", ptsc_status_name(rc), ptsc_last_error());
        for (int i = 0; i < nreq; i++)
            done[i] = 1, rcs[i] = rc;
    } else { /* ptsc_test_info polling, random order */
        int left = nreq;
        double t0 = now_s();
        while (left > 0 && now_s() - t0 < 60) {
            for (int i = 0; i < nreq; i++) {
                int j = order[i];
                if (done[j])
                    continue;
                int flag = 0;
                rcs[j] = ptsc_test_info(&reqs[j], &flag, &infos[j]);
                if (rcs[j] != PTSC_OK || flag)
                    done[j] = 1, left--;
            }
        }
    }
    if (g_dev) { /* the received bytes, and the pattern past them, back to the host */
        for (int j = 0; j < nrecv; j++)
            if (done[j])
                DEV_OK(dev_copy(slots[j].buf, slots[j].dbuf, (size_t)slots[j].cap, 0, dv->stream));
        DEV_OK(dev_sync(dv->stream));
    }
    for (int j = 0; j < nreq; j++) {
        if (j < nrecv)
            check_slot(ts, &slots[j], done[j], rcs[j], &infos[j], style != 1, me);
        else if (done[j] && rcs[j] == PTSC_OK)
            ts->sent++;
        else
            test_fail(__FILE__, __LINE__, "isend %d of round %d: %s", j - nrecv, round,
                      done[j] ? ptsc_status_name(rcs[j]) : "never completed");
    }
    return PTSC_OK;
}

/* Lane collectives: an allreduce with a known sum and a bcast of checkable bytes. */
static int round_coll(ptsc_ctx_t *ctx, int round, int t, const devbufs_t *dv)
{
    int64_t in[2] = {(int64_t)(g_rank + 1) * 1000 + t * 7 + round, 1}, out[2] = {0, 0};
    if (g_dev) { /* input and a garbage output through the stream, unsynchronised */
        memcpy(dv->hcoll + COLL_IN, in, sizeof in);
        DEV_OK(dev_copy(dv->dcoll + COLL_IN, dv->hcoll + COLL_IN, sizeof in, 1, dv->stream));
        DEV_OK(dev_fill(dv->dcoll + COLL_OUT, 0xFF, sizeof out, dv->stream));
        CHECK_OK(ptsc_allreduce(ctx, dv->dcoll + COLL_IN, dv->dcoll + COLL_OUT, 2, MPI_INT64_T, MPI_SUM));
        DEV_OK(dev_copy(dv->hcoll + COLL_OUT, dv->dcoll + COLL_OUT, sizeof out, 0, dv->stream));
        DEV_OK(dev_sync(dv->stream));
        memcpy(out, dv->hcoll + COLL_OUT, sizeof out);
    } else {
        CHECK_OK(ptsc_allreduce(ctx, in, out, 2, MPI_INT64_T, MPI_SUM));
    }
    int64_t want = 0;
    for (int r = 0; r < g_nranks; r++)
        want += (int64_t)(r + 1) * 1000 + t * 7 + round;
    CHECK(out[0] == want && out[1] == g_nranks, "allreduce round %d: %lld %lld, expected %lld %d", round,
          (long long)out[0], (long long)out[1], (long long)want, g_nranks);
    int root = (round + t) % g_nranks;
    int n = (int)(h4((uint64_t)round, (uint64_t)t, 3, 0xBC) % BCAST_MAX);
    uint8_t hbuf[BCAST_MAX], *buf = g_dev ? dv->hcoll + COLL_BCAST : hbuf;
    for (int i = 0; i < n; i++)
        buf[i] = g_rank == root ? pbyte(t + 1000, (uint32_t)round, i) : 0;
    if (g_dev) {
        uint8_t *d = dv->dcoll + COLL_BCAST;
        if (g_rank == root)
            DEV_OK(dev_copy(d, buf, (size_t)n, 1, dv->stream));
        else
            DEV_OK(dev_fill(d, 0, (size_t)n, dv->stream));
        CHECK_OK(ptsc_bcast(ctx, d, n, MPI_BYTE, root));
        DEV_OK(dev_copy(buf, d, (size_t)n, 0, dv->stream));
        DEV_OK(dev_sync(dv->stream));
    } else {
        CHECK_OK(ptsc_bcast(ctx, buf, n, MPI_BYTE, root));
    }
    for (int i = 0; i < n; i++)
        if (buf[i] != pbyte(t + 1000, (uint32_t)round, i)) {
            test_fail(__FILE__, __LINE__, "bcast round %d root %d: byte %d of %d wrong", round, root, i, n);
            break;
        }
    return PTSC_OK;
}

/* Device mode: the thread's buffers, the receive area as large as the largest round of the schedule needs. */
static int dev_setup(ptsc_ctx_t *ctx, devbufs_t *dv, int me, uint8_t **sbufs)
{
    int G = g_nranks * g_nthreads;
    CHECK_OK(ptsc_ctx_stream(ctx, &dv->stream));
    CHECK(dv->stream != NULL, "device mode: the thread has no stream");
    for (int round = 0; round < g_rounds; round++) {
        size_t off = 0;
        for (int s = 0; s < G; s++)
            for (int k = 0; k < g_msgs; k++) {
                plan_t p = plan(round, s, k);
                if (p.dst == me)
                    off = dev_next(off, p.cap);
            }
        if (off > dv->recv_bytes)
            dv->recv_bytes = off;
    }
    DEV_OK(dev_alloc(&dv->dsend, (size_t)g_msgs * MAX_PAYLOAD, 0));
    DEV_OK(dev_alloc(&dv->hsend, (size_t)g_msgs * MAX_PAYLOAD, 1));
    DEV_OK(dev_alloc(&dv->drecv, dv->recv_bytes, 0));
    DEV_OK(dev_alloc(&dv->hrecv, dv->recv_bytes, 1));
    DEV_OK(dev_alloc(&dv->dcoll, COLL_BYTES, 0));
    DEV_OK(dev_alloc(&dv->hcoll, COLL_BYTES, 1));
    for (int k = 0; k < g_msgs; k++)
        sbufs[k] = dv->hsend + (size_t)k * MAX_PAYLOAD;
    return PTSC_OK;
}

static void dev_release(devbufs_t *dv)
{
    dev_free(dv->dsend, 0);
    dev_free(dv->hsend, 1);
    dev_free(dv->drecv, 0);
    dev_free(dv->hrecv, 1);
    dev_free(dv->dcoll, 0);
    dev_free(dv->hcoll, 1);
}

static int body(ptsc_ctx_t *ctx, void *arg)
{
    (void)arg;
    int t = 0;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    int G = g_nranks * g_nthreads, me = g_rank * g_nthreads + t;
    CHECK(omp_get_num_threads() == g_nthreads, "parallel region of %d threads, expected %d",
          omp_get_num_threads(), g_nthreads);
    tstate_t ts = {0};
    ts.send_seq = calloc((size_t)G, sizeof(uint32_t));
    ts.recv_seq = calloc((size_t)G, sizeof(uint32_t));
    ts.got_seq = calloc((size_t)G, sizeof(uint32_t));
    int maxslots = G * g_msgs, maxreq = maxslots + g_msgs;
    slot_t *slots = calloc((size_t)maxslots, sizeof *slots);
    ptsc_request_t *reqs = calloc((size_t)maxreq, sizeof *reqs);
    ptsc_info_t *infos = calloc((size_t)maxreq, sizeof *infos);
    int *done = calloc(2 * (size_t)maxreq, sizeof(int)), *order = calloc((size_t)maxreq, sizeof(int));
    uint8_t **sbufs = calloc((size_t)g_msgs, sizeof *sbufs);
    devbufs_t dv = {0};
    int rc = PTSC_OK;
    if (g_dev)
        rc = dev_setup(ctx, &dv, me, sbufs);
    else
        for (int k = 0; k < g_msgs; k++)
            sbufs[k] = malloc(MAX_PAYLOAD);
    /* Host mode: receive buffers are allocated lazily by size need, one pool per slot. */
    for (int i = 0; i < maxslots; i++)
        slots[i].buf = slots[i].dbuf = NULL;
    for (int round = 0; round < g_rounds && rc == PTSC_OK; round++) {
        /* Buffers sized for this round's receives. */
        int n = 0;
        size_t off = 0;
        for (int s = 0; s < G; s++)
            for (int k = 0; k < g_msgs; k++) {
                plan_t p = plan(round, s, k);
                if (p.dst == me) {
                    if (g_dev) {
                        slots[n].dbuf = dv.drecv + off;
                        slots[n].buf = dv.hrecv + off;
                        off = dev_next(off, p.cap);
                    } else {
                        slots[n].buf = realloc(slots[n].buf, (size_t)p.cap + 1);
                    }
                    n++;
                }
            }
        rc = round_p2p(ctx, &ts, round, me, slots, maxslots, reqs, infos, done, order, sbufs, &dv);
        if (rc == PTSC_OK)
            rc = round_coll(ctx, round, t, &dv);
#pragma omp barrier
    }
    for (int s = 0; s < G; s++)
        CHECK(ts.got_seq[s] == ts.recv_seq[s], "from endpoint %d: %u messages received in order, %u expected",
              s, ts.got_seq[s], ts.recv_seq[s]);
    __atomic_add_fetch(&g_sent, ts.sent, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_received, ts.received, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_lost, ts.lost + (ts.expected - ts.received - ts.lost - ts.dup - ts.corrupt),
                       __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_dup, ts.dup, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_corrupt, ts.corrupt, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_expected, ts.expected, __ATOMIC_SEQ_CST);
    if (g_dev) {
        dev_release(&dv);
    } else {
        for (int i = 0; i < maxslots; i++)
            free(slots[i].buf);
        for (int k = 0; k < g_msgs; k++)
            free(sbufs[k]);
    }
    free(sbufs);
    free(order);
    free(done);
    free(infos);
    free(reqs);
    free(slots);
    free(ts.got_seq);
    free(ts.recv_seq);
    free(ts.send_seq);
    return rc;
}

/* Ends a run that cannot use device buffers here: rank 0 says why; exit status 0. */
static int skip_run(const char *why)
{
    if (g_rank == 0)
        printf("mpi_stress: SKIPPED (%s)\n", why);
    fflush(stdout);
    __atomic_store_n(&g_done, 1, __ATOMIC_SEQ_CST);
    pthread_join(g_watchdog, NULL);
    ptsc_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    const char *mem = getenv("MPI_STRESS_MEM");
    if (mem && strcmp(mem, "device") == 0) {
        g_dev = 1;
        int ndev = 0;
#ifdef MPI_STRESS_CUDA
        if (cudaGetDeviceCount(&ndev) != cudaSuccess)
            ndev = 0;
#endif
        if (ndev == 0) { /* before MPI starts: every rank says it */
            printf("mpi_stress: SKIPPED (no CUDA device)\n");
            return 0;
        }
    } else if (mem && strcmp(mem, "host") != 0) {
        fprintf(stderr, "FAIL mpi_stress: MPI_STRESS_MEM=%s: host or device\n", mem);
        return 2;
    }
    g_nthreads = test_init(&argc, &argv, &g_nranks);
    if (g_dev) {
        int cuda = 0, aware = 0, staging = 0;
        int frc = ptsc_features(&cuda, &aware, &staging);
        CHECK(frc == PTSC_OK, "ptsc_features: %s", ptsc_status_name(frc));
        if (!cuda)
            return skip_run("no CUDA device");
        /* PTSC_STAGING=never on an MPI that is not CUDA-aware: ptsc warns and
         * hands device pointers to MPI as they are, which MPI reads as host
         * memory; not a configuration to stress. */
        if (!staging && !aware)
            return skip_run("PTSC_STAGING=never needs a CUDA-aware MPI");
        if (g_rank == 0)
            printf("mpi_stress: device buffers; ptsc staging %s, MPI CUDA-aware %s\n", staging ? "on" : "off",
                   aware ? "yes" : "no");
    }
    if (argc > 1)
        g_rounds = atoi(argv[1]);
    if (argc > 2)
        g_msgs = atoi(argv[2]);
    if (argc > 3)
        g_seed = strtoull(argv[3], NULL, 0);
    CHECK(g_rounds > 0 && g_msgs > 0, "bad arguments: rounds %d messages %d", g_rounds, g_msgs);
    if (g_rounds <= 0 || g_msgs <= 0)
        return test_finish("mpi_stress");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    int rc = ptsc_omp_run(g_nthreads, body, NULL);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    MPI_Barrier(MPI_COMM_WORLD);
    double wall = now_s() - t0;
    uint64_t mine[6] = {g_sent, g_received, g_lost, g_dup, g_corrupt, g_expected}, tot[6];
    MPI_Allreduce(mine, tot, 6, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    uint64_t schedule = (uint64_t)g_nranks * (uint64_t)g_nthreads * (uint64_t)g_msgs * (uint64_t)g_rounds;
    if (g_rank == 0) {
        printf("mpi_stress: sent %llu received %llu lost %llu duplicated %llu corrupted %llu wall %.2f s\n",
               (unsigned long long)tot[0], (unsigned long long)tot[1], (unsigned long long)tot[2],
               (unsigned long long)tot[3], (unsigned long long)tot[4], wall);
        fflush(stdout);
        CHECK(tot[2] == 0 && tot[3] == 0 && tot[4] == 0, "lost %llu duplicated %llu corrupted %llu",
              (unsigned long long)tot[2], (unsigned long long)tot[3], (unsigned long long)tot[4]);
        CHECK(tot[0] == schedule && tot[1] == schedule && tot[5] == schedule,
              "sent %llu received %llu expected %llu, the schedule has %llu", (unsigned long long)tot[0],
              (unsigned long long)tot[1], (unsigned long long)tot[5], (unsigned long long)schedule);
    }
    return test_finish("mpi_stress");
}
