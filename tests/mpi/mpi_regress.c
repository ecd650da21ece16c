/*
 * Named regression cases for the transfer engine, one per failure it once
 * had. Usage: mpi_regress CASE; ctest runs each case under
 * PTSC_STAGING=never and under PTSC_STAGING=always with a 4 KiB chunk (some
 * also with the default chunk), in both PTSC_COMM modes. Every case checks
 * the data itself and prints FAIL lines; "PASSED mpi_regress CASE" ends a
 * good run.
 *
 *  recv_larger        receive buffers larger than the message, below, at and
 *                     above the chunk and above 4 MiB; the next message on
 *                     the channel arrives intact.
 *  truncate_then_next a message larger than the receive gives
 *                     PTSC_ERR_TRUNCATE, info.bytes the capacity; the
 *                     next receives get the right data; the sender completes.
 *                     Across ranks, then between two threads of one rank.
 *  isend_many         several isends in flight from one thread to one peer,
 *                     small and large interleaved, completed in reverse order;
 *                     two tags received out of order.
 *  detach_pending     ptsc_thread_detach with a request in flight gives
 *                     PTSC_ERR_PENDING and the thread stays attached; after
 *                     ptsc_wait it detaches.
 *  exit_pending       a thread that exits attached with a send in flight and an
 *                     unmatched receive: the send arrives, the receive is
 *                     cancelled (a later message is not swallowed) and the
 *                     index is free again.
 *  big_type           a datatype above 2 GiB is accepted (count 0); a receive
 *                     of a partial element reports the bytes that arrived.
 *  probe              ptsc_probe / ptsc_iprobe report the size of the next
 *                     message; a receive sized from it gets the data.
 *  any_rank           PTSC_ANY_RANK receives from thread t of every other
 *                     rank; info.rank names each; order per sender holds.
 *  derived            derived datatypes with holes and a lower bound in
 *                     point-to-point and collectives: correct, holes
 *                     untouched, or refused with PTSC_ERR_UNSUPPORTED.
 *  id_wrap            framed messages whose ids meet modulo the id space
 *                     (ptsc_tag_max() + 1, made small: PTSC_COMM=shared with
 *                     many thread slots) are in flight together and received
 *                     out of order: each receive gets its own message;
 *                     the receiver waits for the last message before it
 *                     posts the receive of the one whose id it meets.
 *  probe_slots        a probed framed message whose receive comes last:
 *                     its pieces do not hold the sender's staging slots
 *                     that the messages received before it need.
 *  probe_handover     a thread probes plain and framed messages, then detaches
 *                     (or exits); the next holder of its index receives them
 *                     all, and the senders complete.
 *  dup_request        the same request twice in one array call, and a stale
 *                     copy of a completed handle, give PTSC_ERR_ARG and
 *                     change nothing; the thread's next receive works.
 *  trunc_noncontig    a message larger than a non-contiguous receive (plain,
 *                     and framed in the pieces format) gives PTSC_ERR_TRUNCATE
 *                     with the first elements in place, holes untouched.
 *  trunc_guard        a truncated receive writes nothing past the receive
 *                     buffer (also run with PTSC_RECV_GUARD=no in the
 *                     environment, a value that no longer exists).
 */
#include "mpi_common.h"

#include <pthread.h>

#define KIB 1024
#define MIB (1024 * 1024)
#define PATTERN 0xA5

static int R, T;

/* ------------------------------------------------------------------------ */
/* Payloads and checks                                                       */
/* ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t seed_of(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t s = 0x7e57ull;
    s ^= splitmix(&s) ^ a;
    s ^= splitmix(&s) ^ b;
    s ^= splitmix(&s) ^ c;
    s ^= splitmix(&s) ^ d;
    return splitmix(&s);
}

static void payload(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = splitmix(&s);
        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
}

static size_t payload_mismatch(const unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = splitmix(&s);
        const unsigned char *e = (const unsigned char *)&v;
        for (size_t j = 0; j < 8 && i + j < n; j++)
            if (b[i + j] != e[j])
                return i + j;
    }
    return n;
}

static unsigned char *msg_alloc(size_t n, uint64_t seed)
{
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        fprintf(stderr, "FAIL [rank %d] out of memory (%zu bytes)\n", g_rank, n);
        exit(2);
    }
    payload(b, n, seed);
    return b;
}

static unsigned char *rbuf_alloc(size_t cap)
{
    unsigned char *b = malloc(cap ? cap : 1);
    if (!b) {
        fprintf(stderr, "FAIL [rank %d] out of memory (%zu bytes)\n", g_rank, cap);
        exit(2);
    }
    memset(b, PATTERN, cap ? cap : 1);
    return b;
}

static void info_reset(ptsc_info_t *info)
{
    info->rank = info->thread = info->tag = info->error = -7;
    info->bytes = (size_t)-1;
}

/* A receive of `bytes` bytes with payload `seed` into a buffer of `cap`: the
 * data is right and nothing past it was written. Returns 1 when good. */
static int check_data(const char *file, int line, const char *what, const unsigned char *b, size_t bytes,
                      size_t cap, uint64_t seed)
{
    size_t bad = payload_mismatch(b, bytes, seed);
    if (bad != bytes) {
        test_fail(file, line, "%s: byte %zu of the %zu-byte message is wrong (buffer %zu bytes)", what, bad,
                  bytes, cap);
        return 0;
    }
    for (size_t i = bytes; i < cap; i++)
        if (b[i] != PATTERN) {
            test_fail(file, line, "%s: buffer byte %zu written, past the %zu-byte message (buffer %zu bytes)",
                      what, i, bytes, cap);
            return 0;
        }
    return 1;
}
#define CHECK_DATA(what, b, bytes, cap, seed) check_data(__FILE__, __LINE__, what, b, bytes, cap, seed)

/* rc and info of a completed receive: status `want`, `bytes` reported, source (rank, thread, tag). */
static void check_info(const char *file, int line, const char *what, int rc, const ptsc_info_t *info,
                       int want, size_t bytes, int rank, int thread, int tag)
{
    if (rc != want) {
        test_fail(file, line, "%s: returned %s, expected %s (%s)", what, ptsc_status_name(rc),
                  ptsc_status_name(want), ptsc_last_error());
        return;
    }
    if (info->bytes != bytes)
        test_fail(file, line, "%s: info.bytes is %zd, expected %zu", what, (ssize_t)info->bytes, bytes);
    if (info->rank != rank || info->thread != thread || info->tag != tag)
        test_fail(file, line, "%s: info names (%d,%d) tag %d, expected (%d,%d) tag %d", what, info->rank,
                  info->thread, info->tag, rank, thread, tag);
    if (info->error != want)
        test_fail(file, line, "%s: info.error is %d (%s), expected %s", what, info->error,
                  ptsc_status_name(info->error), ptsc_status_name(want));
}
#define CHECK_INFO(what, rc, info, want, bytes, rank, thread, tag) \
    check_info(__FILE__, __LINE__, what, rc, info, want, bytes, rank, thread, tag)

#define CHECK_RC(what, rc, want)                                                           \
    CHECK((rc) == (want), "%s: returned %s, expected %s (%s)", what, ptsc_status_name(rc), \
          ptsc_status_name(want), ptsc_last_error())

/* Complete a send by ptsc_test polling, so that a send that never completes
 * is reported as such rather than as a hang. */
static int finish_send(ptsc_request_t *req, const char *what)
{
    double t0 = now_s();
    int done = 0, rc = PTSC_OK;
    unsigned polls = 0;
    while (!done) {
        rc = ptsc_test(req, &done);
        if (rc != PTSC_OK)
            break;
        if (!done && now_s() - t0 > 30) {
            CHECK(0, "%s: the send is still incomplete after 30 s", what);
            return PTSC_ERR_INTERNAL;
        }
        if (!done)
            test_pause(&polls);
    }
    CHECK_RC(what, rc, PTSC_OK);
    return rc;
}

/* Poll a request for up to `secs` seconds. Returns 1 when it completed
 * (status in *rc, details in *info), 0 when it is still in flight: a
 * receive that waits forever is reported, not hung on. */
static int poll_done(ptsc_request_t *req, ptsc_info_t *info, double secs, int *rc)
{
    double t0 = now_s();
    int done = 0;
    *rc = PTSC_OK;
    while (!done && *rc == PTSC_OK && now_s() - t0 < secs)
        *rc = ptsc_test_info(req, &done, info);
    return done || *rc != PTSC_OK;
}

/* The 2-rank cases run between rank 0 and rank 1, thread 0 each; other ranks idle. */
static int need_two(void)
{
    CHECK(R >= 2, "this case needs at least 2 ranks, got %d", R);
    return R >= 2;
}

/* ------------------------------------------------------------------------ */
/* recv_larger                                                               */
/* ------------------------------------------------------------------------ */

static int case_recv_larger(ptsc_ctx_t *ctx)
{
    static const size_t sizes[] = {0,       1,           100,           4095,  4096,
                                   4097,    8192,        3 * 4096 + 17, 65536, 4 * MIB - 1,
                                   4 * MIB, 4 * MIB + 1, 5 * MIB + 3};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]), tag = 1;
    if (!need_two() || g_rank > 1)
        return PTSC_OK;
    int peer = 1 - g_rank, it = 0;
    for (int i = 0; i < nsizes; i++) {
        size_t s = sizes[i];
        size_t caps[6] = {s + 1, s + 4096, s + 4097, 2 * s + 1, s < 4 * MIB ? 4 * MIB : s + 3, 8 * MIB + 5};
        for (int c = 0; c < 6; c++, it++) {
            size_t cap = caps[c], s2 = it % 2 ? 10 : 3 * 4096 + 5;
            uint64_t seed1 = seed_of(1, (uint64_t)it, 1, 0), seed2 = seed_of(1, (uint64_t)it, 2, 0);
            char what[128];
            snprintf(what, sizeof what, "recv_larger: %zu-byte message into %zu bytes (mode %d)", s, cap,
                     it % 3);
            if (g_rank == 0) { /* sender: A then B, blocking, or both in flight */
                unsigned char *a = msg_alloc(s, seed1), *b = msg_alloc(s2, seed2);
                if (it % 3 == 2) {
                    ptsc_request_t r[2] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
                    CHECK_OK(ptsc_isend(ctx, a, (int)s, MPI_BYTE, peer, 0, tag, &r[0]));
                    CHECK_OK(ptsc_isend(ctx, b, (int)s2, MPI_BYTE, peer, 0, tag, &r[1]));
                    finish_send(&r[1], what);
                    finish_send(&r[0], what);
                } else {
                    CHECK_OK(ptsc_send(ctx, a, (int)s, MPI_BYTE, peer, 0, tag));
                    CHECK_OK(ptsc_send(ctx, b, (int)s2, MPI_BYTE, peer, 0, tag));
                }
                free(a);
                free(b);
            } else { /* receiver: A into the larger buffer, then B exactly sized */
                unsigned char *a = rbuf_alloc(cap), *b = rbuf_alloc(s2);
                ptsc_info_t info;
                info_reset(&info);
                int rc;
                if (it % 3 == 1) {
                    ptsc_request_t r = PTSC_REQUEST_NULL;
                    CHECK_OK(ptsc_irecv(ctx, a, (int)cap, MPI_BYTE, peer, 0, tag, &r));
                    rc = ptsc_wait_info(&r, &info);
                } else {
                    rc = ptsc_recv_info(ctx, a, (int)cap, MPI_BYTE, peer, 0, tag, &info);
                }
                CHECK_INFO(what, rc, &info, PTSC_OK, s, peer, 0, tag);
                if (rc == PTSC_OK)
                    CHECK_DATA(what, a, s, cap, seed1);
                info_reset(&info);
                rc = ptsc_recv_info(ctx, b, (int)s2, MPI_BYTE, peer, 0, tag, &info);
                char what2[256];
                snprintf(what2, sizeof what2, "%s, then the next %zu-byte message", what, s2);
                CHECK_INFO(what2, rc, &info, PTSC_OK, s2, peer, 0, tag);
                if (rc == PTSC_OK)
                    CHECK_DATA(what2, b, s2, s2, seed2);
                free(a);
                free(b);
            }
        }
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* truncate_then_next                                                        */
/* ------------------------------------------------------------------------ */

/* The truncation sequence between this thread and (prank, pthr): as the
 * sender (isends of the large message and the two after it) or as the
 * receiver (in three completion modes). `where` names the route. */
static int truncate_run(ptsc_ctx_t *ctx, int sender, int prank, int pthr, const char *where)
{
    static const size_t trunc[][2] = {{12 * KIB, 4 * KIB},
                                      {4097, 4096},
                                      {3 * 4096 + 17, 100},
                                      {1, 0},
                                      {8192, 4096},
                                      {5 * MIB + 3, 1 * MIB},
                                      {5 * MIB + 3, 4 * MIB},
                                      {4 * MIB + 1, 4 * MIB},
                                      {64 * KIB, 4097},
                                      {4095, 4081},
                                      {3000, 100},
                                      {1500, 1024}};
    const int n = (int)(sizeof trunc / sizeof trunc[0]), tag = 2;
    const size_t next_b = 4 * KIB, next_c = 12 * KIB;
    for (int mode = 0; mode < 3; mode++)
        for (int i = 0; i < n; i++) {
            size_t big = trunc[i][0], cap = trunc[i][1];
            uint64_t sa = seed_of(2, (uint64_t)i, (uint64_t)mode, 0),
                     sb = seed_of(2, (uint64_t)i, (uint64_t)mode, 1),
                     sc = seed_of(2, (uint64_t)i, (uint64_t)mode, 2);
            char what[192];
            snprintf(what, sizeof what, "truncate %s: %zu-byte message into %zu bytes (receiver mode %d)",
                     where, big, cap, mode);
            if (sender) {
                unsigned char *a = msg_alloc(big, sa), *b = msg_alloc(next_b, sb), *c = msg_alloc(next_c, sc);
                ptsc_request_t r[3] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
                CHECK_OK(ptsc_isend(ctx, a, (int)big, MPI_BYTE, prank, pthr, tag, &r[0]));
                CHECK_OK(ptsc_isend(ctx, b, (int)next_b, MPI_BYTE, prank, pthr, tag, &r[1]));
                CHECK_OK(ptsc_isend(ctx, c, (int)next_c, MPI_BYTE, prank, pthr, tag, &r[2]));
                char sw[256];
                snprintf(sw, sizeof sw, "%s: sender of the truncated message", what);
                finish_send(&r[0], sw);
                finish_send(&r[1], what);
                finish_send(&r[2], what);
                free(a);
                free(b);
                free(c);
            } else {
                unsigned char *a = rbuf_alloc(cap), *b = rbuf_alloc(next_b), *c = rbuf_alloc(next_c);
                ptsc_info_t ia, ib, ic;
                info_reset(&ia);
                info_reset(&ib);
                info_reset(&ic);
                int ra, rb, rc;
                if (mode == 0) { /* blocking, in order */
                    ra = ptsc_recv_info(ctx, a, (int)cap, MPI_BYTE, prank, pthr, tag, &ia);
                    rb = ptsc_recv_info(ctx, b, (int)next_b, MPI_BYTE, prank, pthr, tag, &ib);
                    rc = ptsc_recv_info(ctx, c, (int)next_c, MPI_BYTE, prank, pthr, tag, &ic);
                } else { /* all three posted at once; completed in order (1) or in reverse (2) */
                    ptsc_request_t r[3] = {PTSC_REQUEST_NULL, PTSC_REQUEST_NULL, PTSC_REQUEST_NULL};
                    CHECK_OK(ptsc_irecv(ctx, a, (int)cap, MPI_BYTE, prank, pthr, tag, &r[0]));
                    CHECK_OK(ptsc_irecv(ctx, b, (int)next_b, MPI_BYTE, prank, pthr, tag, &r[1]));
                    CHECK_OK(ptsc_irecv(ctx, c, (int)next_c, MPI_BYTE, prank, pthr, tag, &r[2]));
                    if (mode == 1) {
                        ra = ptsc_wait_info(&r[0], &ia);
                        rb = ptsc_wait_info(&r[1], &ib);
                        rc = ptsc_wait_info(&r[2], &ic);
                    } else {
                        rc = ptsc_wait_info(&r[2], &ic);
                        rb = ptsc_wait_info(&r[1], &ib);
                        ra = ptsc_wait_info(&r[0], &ia);
                    }
                    for (int k = 0; k < 3; k++)
                        CHECK(r[k] == PTSC_REQUEST_NULL, "%s: request %d not reset by ptsc_wait_info", what,
                              k);
                }
                CHECK_INFO(what, ra, &ia, PTSC_ERR_TRUNCATE, cap, prank, pthr, tag); /* bytes: the capacity */
                char w2[256];
                snprintf(w2, sizeof w2, "%s: the next %zu-byte message", what, next_b);
                CHECK_INFO(w2, rb, &ib, PTSC_OK, next_b, prank, pthr, tag);
                if (rb == PTSC_OK)
                    CHECK_DATA(w2, b, next_b, next_b, sb);
                snprintf(w2, sizeof w2, "%s: the %zu-byte message after the next", what, next_c);
                CHECK_INFO(w2, rc, &ic, PTSC_OK, next_c, prank, pthr, tag);
                if (rc == PTSC_OK)
                    CHECK_DATA(w2, c, next_c, next_c, sc);
                free(a);
                free(b);
                free(c);
            }
        }
    return PTSC_OK;
}

static void *truncate_local_sender(void *arg)
{
    ptsc_ctx_t *ctx = NULL;
    (void)arg;
    g_me = 1;
    int rc = ptsc_thread_attach(1, &ctx);
    CHECK_RC("truncate: attach thread 1", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    truncate_run(ctx, 1, g_rank, 0, "within a rank");
    rc = ptsc_thread_detach();
    CHECK_RC("truncate: detach thread 1", rc, PTSC_OK);
    return NULL;
}

/* Across ranks (rank 0 thread 0 to rank 1 thread 0), then within every rank
 * (thread 1 to thread 0), where MPI's shared-memory and self paths differ. */
static int case_truncate_then_next(ptsc_ctx_t *ctx)
{
    if (need_two() && g_rank <= 1)
        truncate_run(ctx, g_rank == 0, 1 - g_rank, 0, "across ranks");
    CHECK_OK(ptsc_barrier(ctx));
    if (T < 2) {
        CHECK(0, "truncate_then_next needs PTSC_MAX_THREADS >= 2, got %d", T);
        return PTSC_OK;
    }
    pthread_t th;
    pthread_create(&th, NULL, truncate_local_sender, NULL);
    truncate_run(ctx, 0, g_rank, 1, "within a rank");
    pthread_join(th, NULL);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* isend_many                                                                */
/* ------------------------------------------------------------------------ */

enum { NMANY = 10 };
static const size_t many_size[NMANY] = {10,   5 * MIB + 3, 100, 3 * 4096 + 17, 0,
                                        4097, 1 * MIB,     7,   4096,          65537};

/* Receive NMANY messages of phase `ph` from `peer` in order (blocking, or all
 * posted and completed in reverse). */
static int many_recv(ptsc_ctx_t *ctx, int peer, int ph, int tag, int posted)
{
    unsigned char *b[NMANY];
    ptsc_request_t r[NMANY];
    ptsc_info_t info[NMANY];
    int rc[NMANY];
    for (int k = 0; k < NMANY; k++) {
        b[k] = rbuf_alloc(many_size[k]);
        info_reset(&info[k]);
        r[k] = PTSC_REQUEST_NULL;
    }
    if (posted) {
        for (int k = 0; k < NMANY; k++)
            CHECK_OK(ptsc_irecv(ctx, b[k], (int)many_size[k], MPI_BYTE, peer, 0, tag, &r[k]));
        for (int k = NMANY - 1; k >= 0; k--)
            rc[k] = ptsc_wait_info(&r[k], &info[k]);
    } else {
        for (int k = 0; k < NMANY; k++)
            rc[k] = ptsc_recv_info(ctx, b[k], (int)many_size[k], MPI_BYTE, peer, 0, tag, &info[k]);
    }
    for (int k = 0; k < NMANY; k++) {
        char what[128];
        snprintf(what, sizeof what, "isend_many phase %d: message %d (%zu bytes, tag %d) from rank %d", ph, k,
                 many_size[k], tag, peer);
        CHECK_INFO(what, rc[k], &info[k], PTSC_OK, many_size[k], peer, 0, tag);
        if (rc[k] == PTSC_OK)
            CHECK_DATA(what, b[k], many_size[k], many_size[k],
                       seed_of(3, (uint64_t)ph, (uint64_t)peer, (uint64_t)k));
        free(b[k]);
    }
    return PTSC_OK;
}

/* Start NMANY isends of phase `ph` to `peer`; tags[k] per message. */
static int many_isend(ptsc_ctx_t *ctx, int peer, int ph, const int *tags, unsigned char **b,
                      ptsc_request_t *r)
{
    for (int k = 0; k < NMANY; k++) {
        b[k] = msg_alloc(many_size[k], seed_of(3, (uint64_t)ph, (uint64_t)g_rank, (uint64_t)k));
        r[k] = PTSC_REQUEST_NULL;
        CHECK_OK(ptsc_isend(ctx, b[k], (int)many_size[k], MPI_BYTE, peer, 0, tags[k], &r[k]));
    }
    return PTSC_OK;
}

static int case_isend_many(ptsc_ctx_t *ctx)
{
    if (!need_two() || g_rank > 1)
        return PTSC_OK;
    int peer = 1 - g_rank;
    unsigned char *b[NMANY];
    ptsc_request_t r[NMANY];
    int tags[NMANY];
    /* Phases 0 and 1: rank 0 sends, one tag; completes in reverse (wait, then test polling). */
    for (int ph = 0; ph < 2; ph++) {
        for (int k = 0; k < NMANY; k++)
            tags[k] = 5;
        if (g_rank == 0) {
            CHECK_OK(many_isend(ctx, peer, ph, tags, b, r));
            for (int k = NMANY - 1; k >= 0; k--) {
                char what[96];
                snprintf(what, sizeof what, "isend_many phase %d: isend %d", ph, k);
                if (ph == 0) {
                    int rc = ptsc_wait(&r[k]);
                    CHECK_RC(what, rc, PTSC_OK);
                } else {
                    finish_send(&r[k], what);
                }
                free(b[k]);
            }
        } else {
            many_recv(ctx, peer, ph, 5, ph == 1);
        }
    }
    /* Phase 2: two tags interleaved; the receiver takes every tag-7 message
     * before the tag-6 ones (allowed: all sends are in flight). */
    if (g_rank == 0) {
        for (int k = 0; k < NMANY; k++)
            tags[k] = 6 + k % 2;
        CHECK_OK(many_isend(ctx, peer, 2, tags, b, r));
        int rc = ptsc_waitall(NMANY, r);
        CHECK_RC("isend_many phase 2: waitall", rc, PTSC_OK);
        for (int k = 0; k < NMANY; k++)
            free(b[k]);
    } else {
        for (int pass = 0; pass < 2; pass++)
            for (int k = pass == 0 ? 1 : 0; k < NMANY; k += 2) {
                unsigned char *rb = rbuf_alloc(many_size[k] + 64);
                ptsc_info_t info;
                info_reset(&info);
                int tag = 6 + k % 2;
                int rc = ptsc_recv_info(ctx, rb, (int)many_size[k] + 64, MPI_BYTE, peer, 0, tag, &info);
                char what[128];
                snprintf(what, sizeof what, "isend_many phase 2: message %d (tag %d, %zu bytes), tag 7 first",
                         k, tag, many_size[k]);
                CHECK_INFO(what, rc, &info, PTSC_OK, many_size[k], peer, 0, tag);
                if (rc == PTSC_OK)
                    CHECK_DATA(what, rb, many_size[k], many_size[k] + 64,
                               seed_of(3, 2, (uint64_t)peer, (uint64_t)k));
                free(rb);
            }
    }
    /* Phase 3: both ways at once; each side sends everything, receives, then completes in reverse. */
    for (int k = 0; k < NMANY; k++)
        tags[k] = 8;
    CHECK_OK(many_isend(ctx, peer, 3, tags, b, r));
    many_recv(ctx, peer, 3, 8, g_rank == 1);
    for (int k = NMANY - 1; k >= 0; k--) {
        int rc = ptsc_wait(&r[k]);
        CHECK_RC("isend_many phase 3: wait", rc, PTSC_OK);
        free(b[k]);
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* detach_pending                                                            */
/* ------------------------------------------------------------------------ */

static int case_detach_pending(ptsc_ctx_t *ctx)
{
    const int tag_small = 5, tag_big = 6;
    const size_t big = 8 * MIB + 7, small = 100;
    int peer = need_two() && g_rank <= 1 ? 1 - g_rank : -1, rc;
    ptsc_ctx_t *self = NULL;
    ptsc_request_t rq = PTSC_REQUEST_NULL, sq = PTSC_REQUEST_NULL;
    unsigned char *rs = rbuf_alloc(small), *sbig = msg_alloc(big, seed_of(4, (uint64_t)g_rank, 1, 0));
    if (peer >= 0) {
        /* Only a receive in flight: nothing can match it before the barrier below. */
        CHECK_OK(ptsc_irecv(ctx, rs, (int)small, MPI_BYTE, peer, 0, tag_small, &rq));
        rc = ptsc_thread_detach();
        CHECK_RC("detach with a receive in flight", rc, PTSC_ERR_PENDING);
        rc = ptsc_self(&self);
        CHECK(rc == PTSC_OK && self == ctx, "after the refused detach, ptsc_self gives %p (%s), expected %p",
              (void *)self, ptsc_status_name(rc), (void *)ctx);
        int idx = -1;
        rc = ptsc_ctx_index(ctx, &idx);
        CHECK(rc == PTSC_OK && idx == 0, "after the refused detach: index %d (%s)", idx,
              ptsc_status_name(rc));
        rc = ptsc_thread_attach(0, NULL);
        CHECK_RC("attach after the refused detach", rc, PTSC_ERR_ALREADY_ATTACHED);
        /* A send in flight too: too large to complete before the peer receives it. */
        CHECK_OK(ptsc_isend(ctx, sbig, (int)big, MPI_BYTE, peer, 0, tag_big, &sq));
        rc = ptsc_thread_detach();
        CHECK_RC("detach with a send and a receive in flight", rc, PTSC_ERR_PENDING);
        int done = -1;
        rc = ptsc_test(&rq, &done); /* the context must still work */
        CHECK(rc == PTSC_OK && done == 0, "ptsc_test after the refused detach: %s, done %d",
              ptsc_status_name(rc), done);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (peer >= 0) {
        unsigned char *ssmall = msg_alloc(small, seed_of(4, (uint64_t)g_rank, 2, 0)), *rbig = rbuf_alloc(big);
        CHECK_OK(ptsc_send(ctx, ssmall, (int)small, MPI_BYTE, peer, 0, tag_small));
        ptsc_info_t info;
        info_reset(&info);
        rc = ptsc_recv_info(ctx, rbig, (int)big, MPI_BYTE, peer, 0, tag_big, &info);
        CHECK_INFO("detach_pending: large message", rc, &info, PTSC_OK, big, peer, 0, tag_big);
        if (rc == PTSC_OK)
            CHECK_DATA("detach_pending: large message", rbig, big, big, seed_of(4, (uint64_t)peer, 1, 0));
        info_reset(&info);
        rc = ptsc_wait_info(&rq, &info);
        CHECK_INFO("detach_pending: the pending receive", rc, &info, PTSC_OK, small, peer, 0, tag_small);
        if (rc == PTSC_OK)
            CHECK_DATA("detach_pending: the pending receive", rs, small, small,
                       seed_of(4, (uint64_t)peer, 2, 0));
        rc = ptsc_wait(&sq);
        CHECK_RC("detach_pending: the pending send", rc, PTSC_OK);
        free(ssmall);
        free(rbig);
    }
    free(rs);
    free(sbig);
    rc = ptsc_thread_detach();
    CHECK_RC("detach after every request completed", rc, PTSC_OK);
    rc = ptsc_thread_detach();
    CHECK_RC("second detach", rc, PTSC_ERR_NOT_ATTACHED);
    ptsc_ctx_t *again = NULL;
    rc = ptsc_thread_attach(0, &again);
    CHECK_RC("attach index 0 again", rc, PTSC_OK);
    if (rc == PTSC_OK) {
        rc = ptsc_barrier(again);
        CHECK_RC("barrier on the new context", rc, PTSC_OK);
    }
    return PTSC_OK; /* main detaches */
}

/* ------------------------------------------------------------------------ */
/* exit_pending                                                              */
/* ------------------------------------------------------------------------ */

enum { EXIT_T = 2, RECV_T = 3, EXIT_TAG = 9, CANCEL_TAG = 10 };
static const size_t exit_size = 3 * 4096 + 17, cancel_size = 5000;

/* Thread EXIT_T: sends to (peer, RECV_T), posts a receive that nothing will
 * match, and exits without waiting or detaching. */
static void *exiting_thread(void *arg)
{
    int peer = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = EXIT_T;
    int rc = ptsc_thread_attach(EXIT_T, &ctx);
    CHECK_RC("exit_pending: attach", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    /* Buffers deliberately leaked: the exit destructor may still use them. */
    unsigned char *sb = msg_alloc(exit_size, seed_of(5, (uint64_t)g_rank, 0, 0)),
                  *rb = rbuf_alloc(cancel_size);
    ptsc_request_t s = PTSC_REQUEST_NULL, r = PTSC_REQUEST_NULL;
    rc = ptsc_isend(ctx, sb, (int)exit_size, MPI_BYTE, peer, RECV_T, EXIT_TAG, &s);
    CHECK_RC("exit_pending: isend", rc, PTSC_OK);
    rc = ptsc_irecv(ctx, rb, (int)cancel_size, MPI_BYTE, peer, EXIT_T, CANCEL_TAG, &r);
    CHECK_RC("exit_pending: irecv", rc, PTSC_OK);
    return NULL;
}

static void *receiving_thread(void *arg)
{
    int peer = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = RECV_T;
    int rc = ptsc_thread_attach(RECV_T, &ctx);
    CHECK_RC("exit_pending: attach", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    unsigned char *rb = rbuf_alloc(exit_size);
    ptsc_info_t info;
    info_reset(&info);
    rc = ptsc_recv_info(ctx, rb, (int)exit_size, MPI_BYTE, peer, EXIT_T, EXIT_TAG, &info);
    CHECK_INFO("exit_pending: the message of the exited thread", rc, &info, PTSC_OK, exit_size, peer, EXIT_T,
               EXIT_TAG);
    if (rc == PTSC_OK)
        CHECK_DATA("exit_pending: the message of the exited thread", rb, exit_size, exit_size,
                   seed_of(5, (uint64_t)peer, 0, 0));
    free(rb);
    rc = ptsc_thread_detach();
    CHECK_RC("exit_pending: detach of the receiving thread", rc, PTSC_OK);
    return NULL;
}

/* A new thread on index EXIT_T: the cancelled receive must not take this message. */
static void *successor_thread(void *arg)
{
    int peer = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = EXIT_T;
    int rc = ptsc_thread_attach(EXIT_T, &ctx);
    CHECK_RC("exit_pending: attach the index the exited thread held", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    unsigned char *sb = msg_alloc(cancel_size, seed_of(5, (uint64_t)g_rank, 1, 0)),
                  *rb = rbuf_alloc(cancel_size);
    ptsc_request_t r = PTSC_REQUEST_NULL;
    ptsc_info_t info;
    info_reset(&info);
    rc = ptsc_irecv(ctx, rb, (int)cancel_size, MPI_BYTE, peer, EXIT_T, CANCEL_TAG, &r);
    CHECK_RC("exit_pending: irecv on the new thread", rc, PTSC_OK);
    rc = ptsc_send(ctx, sb, (int)cancel_size, MPI_BYTE, peer, EXIT_T, CANCEL_TAG);
    CHECK_RC("exit_pending: send from the new thread", rc, PTSC_OK);
    double t0 = now_s();
    int done = 0;
    while (!done && rc == PTSC_OK) {
        rc = ptsc_test_info(&r, &done, &info);
        if (!done && now_s() - t0 > 20) {
            CHECK(0, "exit_pending: the new thread's receive is not complete after 20 s (the exited "
                     "thread's cancelled receive took the message?)");
            return NULL;
        }
    }
    CHECK_INFO("exit_pending: message to the new thread", rc, &info, PTSC_OK, cancel_size, peer, EXIT_T,
               CANCEL_TAG);
    if (rc == PTSC_OK)
        CHECK_DATA("exit_pending: message to the new thread", rb, cancel_size, cancel_size,
                   seed_of(5, (uint64_t)peer, 1, 0));
    free(sb);
    free(rb);
    rc = ptsc_thread_detach();
    CHECK_RC("exit_pending: detach of the new thread", rc, PTSC_OK);
    return NULL;
}

static int case_exit_pending(ptsc_ctx_t *ctx)
{
    if (T < 4) {
        CHECK(0, "exit_pending needs PTSC_MAX_THREADS >= 4, got %d", T);
        return PTSC_OK;
    }
    int peer = need_two() && g_rank <= 1 ? 1 - g_rank : -1;
    if (peer >= 0) {
        pthread_t a, b;
        pthread_create(&b, NULL, receiving_thread, (void *)(intptr_t)peer);
        pthread_create(&a, NULL, exiting_thread, (void *)(intptr_t)peer);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    }
    CHECK_OK(ptsc_barrier(ctx)); /* both exits done on both ranks */
    if (peer >= 0) {
        pthread_t c;
        pthread_create(&c, NULL, successor_thread, (void *)(intptr_t)peer);
        pthread_join(c, NULL);
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* big_type                                                                  */
/* ------------------------------------------------------------------------ */

static int case_big_type(ptsc_ctx_t *ctx)
{
    MPI_Datatype gib, big;
    MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib);
    MPI_Type_contiguous(3, gib, &big);
    MPI_Type_commit(&big);
    int peer = need_two() && g_rank <= 1 ? 1 - g_rank : -1, rc;
    const int tag = 11;
    unsigned char dummy[16];
    memset(dummy, PATTERN, sizeof dummy);
    if (peer >= 0) {
        ptsc_info_t info;
        /* count 0 of a 3 GiB type: blocking, non-blocking, sendrecv */
        if (g_rank == 0) {
            rc = ptsc_send(ctx, dummy, 0, big, peer, 0, tag);
            CHECK_RC("big_type: ptsc_send count 0 of a 3 GiB type", rc, PTSC_OK);
            ptsc_request_t r = PTSC_REQUEST_NULL;
            rc = ptsc_isend(ctx, dummy, 0, big, peer, 0, tag, &r);
            CHECK_RC("big_type: ptsc_isend count 0 of a 3 GiB type", rc, PTSC_OK);
            rc = ptsc_wait(&r);
            CHECK_RC("big_type: ptsc_wait of it", rc, PTSC_OK);
        } else {
            info_reset(&info);
            rc = ptsc_recv_info(ctx, dummy, 0, big, peer, 0, tag, &info);
            CHECK_INFO("big_type: ptsc_recv_info count 0 of a 3 GiB type", rc, &info, PTSC_OK, 0, peer, 0,
                       tag);
            ptsc_request_t r = PTSC_REQUEST_NULL;
            info_reset(&info);
            rc = ptsc_irecv(ctx, dummy, 0, big, peer, 0, tag, &r);
            CHECK_RC("big_type: ptsc_irecv count 0 of a 3 GiB type", rc, PTSC_OK);
            rc = ptsc_wait_info(&r, &info);
            CHECK_INFO("big_type: ptsc_wait_info of it", rc, &info, PTSC_OK, 0, peer, 0, tag);
        }
        rc = ptsc_sendrecv(ctx, dummy, 0, big, peer, 0, tag + 1, dummy + 8, 0, big, peer, 0, tag + 1);
        CHECK_RC("big_type: ptsc_sendrecv count 0 of a 3 GiB type", rc, PTSC_OK);
        for (size_t i = 0; i < sizeof dummy; i++)
            CHECK(dummy[i] == PATTERN, "big_type: byte %zu of a count-0 receive buffer written", i);

        /* Partial element: 6 bytes into MPI_INT x 4; then 18 bytes into it (truncated); then 6 again. */
        const size_t sizes[3] = {6, 18, 6};
        for (int k = 0; k < 3; k++) {
            uint64_t seed = seed_of(6, (uint64_t)k, 0, 0);
            if (g_rank == 0) {
                unsigned char *m = msg_alloc(sizes[k], seed);
                rc = ptsc_send(ctx, m, (int)sizes[k], MPI_BYTE, peer, 0, tag + 2);
                CHECK_RC("big_type: send of the partial element", rc, PTSC_OK);
                free(m);
            } else {
                int ib[4];
                memset(ib, PATTERN, sizeof ib);
                ptsc_stats_t s0, s1;
                CHECK_OK(ptsc_ctx_stats(ctx, &s0));
                info_reset(&info);
                rc = ptsc_recv_info(ctx, ib, 4, MPI_INT, peer, 0, tag + 2, &info);
                CHECK_OK(ptsc_ctx_stats(ctx, &s1));
                char what[128];
                snprintf(what, sizeof what, "big_type: %zu bytes received as MPI_INT x 4", sizes[k]);
                int trunc = sizes[k] > sizeof ib;
                CHECK_INFO(what, rc, &info, trunc ? PTSC_ERR_TRUNCATE : PTSC_OK, trunc ? sizeof ib : sizes[k],
                           peer, 0, tag + 2);
                if (!trunc) {
                    if (rc == PTSC_OK)
                        CHECK_DATA(what, (unsigned char *)ib, sizes[k], sizeof ib, seed);
                    CHECK(s1.recvs == s0.recvs + 1, "%s: stats recvs went from %llu to %llu", what,
                          (unsigned long long)s0.recvs, (unsigned long long)s1.recvs);
                    CHECK(s1.bytes_recv == s0.bytes_recv + sizes[k],
                          "%s: stats bytes_recv went from %llu to %llu, expected +%zu", what,
                          (unsigned long long)s0.bytes_recv, (unsigned long long)s1.bytes_recv, sizes[k]);
                }
            }
        }
    }
    /* Collective with count 0 of the big type. */
    rc = ptsc_bcast(ctx, dummy, 0, big, 0);
    CHECK_RC("big_type: ptsc_bcast count 0 of a 3 GiB type", rc, PTSC_OK);
    rc = ptsc_allgather(ctx, dummy, 0, big, dummy + 8, 0, big);
    CHECK_RC("big_type: ptsc_allgather count 0 of a 3 GiB type", rc, PTSC_OK);
    MPI_Type_free(&big);
    MPI_Type_free(&gib);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* probe                                                                     */
/* ------------------------------------------------------------------------ */

static int case_probe(ptsc_ctx_t *ctx)
{
    if (!need_two() || g_rank > 1)
        return PTSC_OK;
    int peer = 1 - g_rank;
    enum { NP = 6 };
    /* message k: tag, size; the first goes on another tag and is probed last */
    static const int ptag[NP] = {8, 7, 7, 7, 7, 7};
    static const size_t psize[NP] = {100, 5 * MIB + 3, 3 * 4096 + 17, 0, 4097, 4 * MIB};
    for (int round = 0; round < 2; round++) { /* rank 0 sends, then rank 1 */
        int sender = round;
        if (g_rank == sender) {
            unsigned char *b[NP];
            ptsc_request_t r[NP];
            for (int k = 0; k < NP; k++) {
                b[k] = msg_alloc(psize[k], seed_of(7, (uint64_t)round, (uint64_t)k, 0));
                r[k] = PTSC_REQUEST_NULL;
                CHECK_OK(ptsc_isend(ctx, b[k], (int)psize[k], MPI_BYTE, peer, 0, ptag[k], &r[k]));
            }
            for (int k = 0; k < NP; k++) {
                finish_send(&r[k], "probe: isend");
                free(b[k]);
            }
            continue;
        }
        /* receiver: order of taking them: 1..5 on tag 7 (with various probes), then 0 on tag 8 */
        static const int order[NP] = {1, 2, 3, 4, 5, 0};
        for (int j = 0; j < NP; j++) {
            int k = order[j], tag = ptag[k], how = j % 4, src = peer, rc;
            ptsc_info_t pi;
            info_reset(&pi);
            char what[128];
            snprintf(what, sizeof what, "probe: message %d (%zu bytes, tag %d), probe mode %d", k, psize[k],
                     tag, how);
            if (how == 2)
                src = PTSC_ANY_RANK;
            if (how == 1 || how == 3) {
                int flag = 0;
                unsigned polls = 0;
                double t0 = now_s();
                while ((rc = ptsc_iprobe(ctx, src, 0, tag, &flag, &pi)) == PTSC_OK && !flag &&
                       now_s() - t0 < 30)
                    test_pause(&polls);
                CHECK(flag == 1, "%s: ptsc_iprobe found nothing in 30 s (%s)", what, ptsc_status_name(rc));
            } else {
                rc = ptsc_probe(ctx, src, 0, tag, &pi);
            }
            CHECK_INFO(what, rc, &pi, PTSC_OK, psize[k], peer, 0, tag);
            if (how == 0) { /* probing again finds the same message */
                ptsc_info_t p2;
                info_reset(&p2);
                rc = ptsc_probe(ctx, peer, 0, tag, &p2);
                CHECK_INFO("probe: a second probe", rc, &p2, PTSC_OK, psize[k], peer, 0, tag);
            }
            size_t cap = rc == PTSC_OK && pi.bytes == psize[k] ? pi.bytes : psize[k];
            if (how == 3)
                cap += 4096 + 1;
            unsigned char *rb = rbuf_alloc(cap);
            ptsc_info_t ri;
            info_reset(&ri);
            if (how == 1) {
                ptsc_request_t r = PTSC_REQUEST_NULL;
                CHECK_OK(ptsc_irecv(ctx, rb, (int)cap, MPI_BYTE, src, 0, tag, &r));
                rc = ptsc_wait_info(&r, &ri);
            } else {
                rc = ptsc_recv_info(ctx, rb, (int)cap, MPI_BYTE, src, 0, tag, &ri);
            }
            CHECK_INFO(what, rc, &ri, PTSC_OK, psize[k], peer, 0, tag);
            if (rc == PTSC_OK)
                CHECK_DATA(what, rb, psize[k], cap, seed_of(7, (uint64_t)round, (uint64_t)k, 0));
            free(rb);
        }
        /* Nothing is left on tag 7. */
        int flag = -1;
        ptsc_info_t pi;
        int rc = ptsc_iprobe(ctx, peer, 0, 7, &flag, &pi);
        CHECK(rc == PTSC_OK && flag == 0, "probe: ptsc_iprobe after all receives: %s, flag %d",
              ptsc_status_name(rc), flag);
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* any_rank                                                                  */
/* ------------------------------------------------------------------------ */

enum { ANY_TAG = 3, ANY_SEQ = 2 };

static size_t any_size(int src, int dst, int t, int seq)
{
    static const size_t s[] = {0, 17, 4096, 4097, 3 * 4096 + 17, 100000, 5 * MIB + 3};
    return s[(src * 7 + dst * 3 + t + seq * 5) % 7];
}

static int any_body(ptsc_ctx_t *ctx, int t)
{
    int nsend = (R - 1) * (ANY_SEQ + (T > 1)), ns = 0;
    if (nsend < 1)
        nsend = 1;
    unsigned char **sb = calloc((size_t)nsend, sizeof *sb);
    ptsc_request_t *sr = calloc((size_t)nsend, sizeof *sr);
    /* to thread t of every other rank ANY_SEQ messages; to thread t+1 one */
    for (int q = 0; q < R; q++) {
        if (q == g_rank)
            continue;
        for (int seq = 0; seq < ANY_SEQ; seq++, ns++) {
            size_t n = any_size(g_rank, q, t, seq);
            sb[ns] = msg_alloc(n, seed_of(8, (uint64_t)g_rank, (uint64_t)(q * 64 + t), (uint64_t)seq));
            CHECK_OK(ptsc_isend(ctx, sb[ns], (int)n, MPI_BYTE, q, t, ANY_TAG, &sr[ns]));
        }
        if (T > 1) {
            int u = (t + 1) % T;
            size_t n = any_size(g_rank, q, u, 9);
            sb[ns] = msg_alloc(n, seed_of(8, (uint64_t)g_rank, (uint64_t)(q * 64 + u), 9));
            CHECK_OK(ptsc_isend(ctx, sb[ns], (int)n, MPI_BYTE, q, u, ANY_TAG, &sr[ns]));
            ns++;
        }
    }
    /* Receive from thread t of any rank: ANY_SEQ from each, in order per sender. */
    size_t cap = 5 * MIB + 3 + 64;
    int *got = calloc((size_t)R, sizeof *got);
    unsigned char *rb = malloc(cap);
    for (int i = 0; i < (R - 1) * ANY_SEQ; i++) {
        memset(rb, PATTERN, cap);
        ptsc_info_t info;
        info_reset(&info);
        int rc = ptsc_recv_info(ctx, rb, (int)cap, MPI_BYTE, PTSC_ANY_RANK, t, ANY_TAG, &info);
        CHECK(rc == PTSC_OK, "any_rank: receive %d from thread %d of any rank: %s: %s", i, t,
              ptsc_status_name(rc), ptsc_last_error());
        int r = info.rank;
        if (rc != PTSC_OK || r < 0 || r >= R || r == g_rank || got[r] >= ANY_SEQ) {
            CHECK(0, "any_rank: receive %d: info.rank %d is not a rank with messages left", i, r);
            continue;
        }
        int seq = got[r]++;
        size_t n = any_size(r, g_rank, t, seq);
        char what[128];
        snprintf(what, sizeof what, "any_rank: message %d from (%d,%d) to thread %d", seq, r, t, t);
        CHECK_INFO(what, rc, &info, PTSC_OK, n, r, t, ANY_TAG);
        CHECK_DATA(what, rb, n, cap, seed_of(8, (uint64_t)r, (uint64_t)(g_rank * 64 + t), (uint64_t)seq));
    }
    /* From thread t-1 of any rank: all posted at once, completed in reverse. */
    if (T > 1) {
        int from = (t - 1 + T) % T, n = R - 1;
        size_t nz = (size_t)(n > 0 ? n : 1);
        unsigned char **b = calloc(nz, sizeof *b);
        ptsc_request_t *r = calloc(nz, sizeof *r);
        ptsc_info_t *inf = calloc(nz, sizeof *inf);
        int *rcs = calloc(nz, sizeof *rcs);
        memset(got, 0, (size_t)R * sizeof *got);
        for (int i = 0; i < n; i++) {
            b[i] = rbuf_alloc(cap);
            info_reset(&inf[i]);
            CHECK_OK(ptsc_irecv(ctx, b[i], (int)cap, MPI_BYTE, PTSC_ANY_RANK, from, ANY_TAG, &r[i]));
        }
        for (int i = n - 1; i >= 0; i--)
            rcs[i] = ptsc_wait_info(&r[i], &inf[i]);
        for (int i = 0; i < n; i++) {
            int q = inf[i].rank;
            if (rcs[i] != PTSC_OK || q < 0 || q >= R || q == g_rank || got[q]) {
                CHECK(0, "any_rank: irecv %d from thread %d of any rank: %s, info.rank %d", i, from,
                      ptsc_status_name(rcs[i]), q);
                continue;
            }
            got[q] = 1;
            size_t len = any_size(q, g_rank, t, 9);
            char what[128];
            snprintf(what, sizeof what, "any_rank: irecv of (%d,%d) -> thread %d", q, from, t);
            CHECK_INFO(what, rcs[i], &inf[i], PTSC_OK, len, q, from, ANY_TAG);
            CHECK_DATA(what, b[i], len, cap, seed_of(8, (uint64_t)q, (uint64_t)(g_rank * 64 + t), 9));
        }
        for (int i = 0; i < n; i++)
            free(b[i]);
        free(b);
        free(r);
        free(inf);
        free(rcs);
    }
    int rc = ptsc_waitall(ns, sr);
    CHECK_RC("any_rank: waitall of the sends", rc, PTSC_OK);
    for (int i = 0; i < ns; i++)
        free(sb[i]);
    free(sb);
    free(sr);
    free(got);
    free(rb);
    return PTSC_OK;
}

static void *any_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = t;
    if (ptsc_thread_attach(t, &ctx) != PTSC_OK) {
        CHECK(0, "attach %d: %s", t, ptsc_last_error());
        return NULL;
    }
    any_body(ctx, t);
    int rc = ptsc_thread_detach();
    CHECK_RC("any_rank: detach", rc, PTSC_OK);
    return NULL;
}

static int case_any_rank(ptsc_ctx_t *ctx)
{
    CHECK(R >= 3, "any_rank wants at least 3 ranks to be meaningful, got %d", R);
    /* thread 0 is the main thread's context; threads 1.. are pthreads */
    pthread_t *th = calloc((size_t)T, sizeof *th);
    for (int t = 1; t < T; t++)
        pthread_create(&th[t], NULL, any_thread, (void *)(intptr_t)t);
    any_body(ctx, 0);
    for (int t = 1; t < T; t++)
        pthread_join(th[t], NULL);
    free(th);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* derived                                                                   */
/* ------------------------------------------------------------------------ */

enum { ROWS = 8, COLS = 5 };

/* rc of a call with a derived datatype: PTSC_OK (then the data is checked)
 * or PTSC_ERR_UNSUPPORTED; anything else fails. Returns 1 when OK. */
static int derived_ok(const char *what, int rc)
{
    if (rc == PTSC_ERR_UNSUPPORTED) {
        if (g_rank == 0 && g_me == 0)
            printf("note: %s: PTSC_ERR_UNSUPPORTED (%s)\n", what, ptsc_last_error());
        return 0;
    }
    CHECK(rc == PTSC_OK, "%s: %s: %s", what, ptsc_status_name(rc), ptsc_last_error());
    return rc == PTSC_OK;
}

/* m[i][j] must be col_val(i, j) for j in cols (a bitmask) and `hole` elsewhere. */
static void check_matrix(const char *what, int m[ROWS][COLS], unsigned cols, int (*val)(int, int), int hole)
{
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            int want = (cols >> j) & 1 ? val(i, j) : hole;
            if (m[i][j] != want) {
                CHECK(0, "%s: element [%d][%d] is %d, expected %d%s", what, i, j, m[i][j], want,
                      (cols >> j) & 1 ? "" : " (a hole of the datatype: must be untouched)");
                return;
            }
        }
}

static int bval(int i, int j) { return 1000 * i + j + 7; }
/* A user sum over column types: element e of the `len` starts at e * extent and holds
 * ROWS ints at a stride of COLS; the holes between are not touched. */
static void column_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    MPI_Aint lb, extent;
    MPI_Type_get_extent(*dt, &lb, &extent);
    for (int e = 0; e < *len; e++) {
        const int *a = (const int *)((const char *)in + e * extent);
        int *b = (int *)((char *)inout + e * extent);
        for (int i = 0; i < ROWS; i++)
            b[i * COLS] += a[i * COLS];
    }
}

static int sum_val(int i, int j)
{
    int s = 0;
    for (int r = 0; r < R; r++)
        s += (r + 1) * (i * COLS + j + 1);
    return s;
}

static int case_derived(ptsc_ctx_t *ctx)
{
    MPI_Datatype col, colr, idx0, idx;
    MPI_Type_vector(ROWS, 1, COLS, MPI_INT, &col); /* one column of an int[ROWS][COLS] */
    MPI_Type_commit(&col);
    MPI_Type_create_resized(col, 0, (MPI_Aint)sizeof(int), &colr); /* count k: k adjacent columns */
    MPI_Type_commit(&colr);
    int displs[2] = {1, 3};
    MPI_Type_create_indexed_block(2, 1, displs, MPI_INT, &idx0);       /* ints 1 and 3: true lower bound 4 */
    MPI_Type_create_resized(idx0, 0, 4 * (MPI_Aint)sizeof(int), &idx); /* extent 4 ints: count k covers 4k */
    MPI_Type_commit(&idx);
    int m[ROWS][COLS], in[ROWS][COLS];
    const int hole = -5;
    int rc;

    /* bcast of column 2 from rank 0 */
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            m[i][j] = g_rank == 0 ? (j == 2 ? bval(i, j) : hole) : hole;
    rc = ptsc_bcast(ctx, &m[0][2], 1, col, 0);
    if (derived_ok("derived: bcast of a column (vector type)", rc))
        check_matrix("derived: bcast of a column", m, 1u << 2, bval, hole);

    /* reduce (sum) of column 1 to rank R-1, and allreduce of columns 3 and 4 (resized type, count 2) */
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            in[i][j] = (g_rank + 1) * (i * COLS + j + 1);
            m[i][j] = hole;
        }
    rc = ptsc_reduce(ctx, &in[0][1], &m[0][1], 1, col, MPI_SUM, R - 1);
    if (derived_ok("derived: reduce of a column (vector type, MPI_SUM)", rc) && g_rank == R - 1)
        check_matrix("derived: reduce of a column", m, 1u << 1, sum_val, hole);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            m[i][j] = hole;
    rc = ptsc_allreduce(ctx, &in[0][3], &m[0][3], 2, colr, MPI_SUM);
    if (derived_ok("derived: allreduce of two columns (resized vector type, MPI_SUM)", rc))
        check_matrix("derived: allreduce of two columns", m, (1u << 3) | (1u << 4), sum_val, hole);

    /* The same with a user operation, which MPI defines for derived datatypes. */
    MPI_Op colsum;
    MPI_Op_create(column_sum, 1, &colsum);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            m[i][j] = hole;
    rc = ptsc_reduce(ctx, &in[0][1], &m[0][1], 1, col, colsum, 0);
    if (derived_ok("derived: reduce of a column (vector type, user sum)", rc) && g_rank == 0)
        check_matrix("derived: reduce of a column with a user sum", m, 1u << 1, sum_val, hole);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            m[i][j] = hole;
    rc = ptsc_allreduce(ctx, &in[0][2], &m[0][2], 2, colr, colsum);
    if (derived_ok("derived: allreduce of two columns (resized vector type, user sum)", rc))
        check_matrix("derived: allreduce of two columns with a user sum", m, (1u << 2) | (1u << 3), sum_val,
                     hole);
    MPI_Op_free(&colsum);

    /* indexed type with a lower bound: bcast, then point-to-point */
    int v[16];
    for (int k = 0; k < 16; k++)
        v[k] = g_rank == 0 && (k % 2) ? 100 + k : hole;
    rc = ptsc_bcast(ctx, v, 4, idx, 0); /* extent 16 bytes: elements 1,3,5,...,15 */
    if (derived_ok("derived: bcast of an indexed type with a lower bound", rc))
        for (int k = 0; k < 16; k++) {
            int want = k % 2 ? 100 + k : hole;
            if (v[k] != want) {
                CHECK(0, "derived: bcast of an indexed type: element %d is %d, expected %d", k, v[k], want);
                break;
            }
        }
    if (R >= 2 && g_rank <= 1) {
        int peer = 1 - g_rank;
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) {
                in[i][j] = bval(i, j) + g_rank;
                m[i][j] = hole;
            }
        rc = ptsc_sendrecv(ctx, &in[0][0], 2, colr, peer, 0, 12, &m[0][0], 2, colr, peer, 0, 12);
        if (derived_ok("derived: sendrecv of two columns (resized vector type)", rc)) {
            for (int i = 0; i < ROWS; i++)
                for (int j = 0; j < COLS; j++) {
                    int want = j < 2 ? bval(i, j) + peer : hole;
                    if (m[i][j] != want) {
                        CHECK(0, "derived: sendrecv of two columns: element [%d][%d] is %d, expected %d", i,
                              j, m[i][j], want);
                        i = ROWS;
                        break;
                    }
                }
        }
    }
    MPI_Type_free(&idx);
    MPI_Type_free(&idx0);
    MPI_Type_free(&colr);
    MPI_Type_free(&col);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* id_wrap                                                                   */
/* ------------------------------------------------------------------------ */

/* 12388 bytes: a first part and three continuation pieces with a 4 KiB chunk. */
static const size_t wrap_size = 3 * 4096 + 100;
enum { WRAP_X = 1, WRAP_Y = 2, WRAP_FILL = 3, WRAP_WIN = 8 };

/* The sender side of one round from (this rank, thread s) to (peer, thread s):
 * X on tag WRAP_X, M - 1 fillers, then Y on tag WRAP_Y, whose id meets X's
 * modulo M; all in flight at once. */
static int wrap_send(ptsc_ctx_t *ctx, int peer, int s, int M, int round)
{
    int n = M + 1;
    unsigned char **b = calloc((size_t)n, sizeof *b);
    ptsc_request_t *r = calloc((size_t)n, sizeof *r);
    for (int k = 0; k < n; k++) {
        int tag = k == 0 ? WRAP_X : k == n - 1 ? WRAP_Y : WRAP_FILL;
        b[k] = msg_alloc(wrap_size, seed_of(20, (uint64_t)round, (uint64_t)s, (uint64_t)k));
        r[k] = PTSC_REQUEST_NULL;
        CHECK_OK(ptsc_isend(ctx, b[k], (int)wrap_size, MPI_BYTE, peer, s, tag, &r[k]));
    }
    MPI_Barrier(MPI_COMM_WORLD); /* everything is on its way before the receiver starts */
    for (int k = 0; k < n; k++) {
        char what[96];
        snprintf(what, sizeof what, "id_wrap round %d: isend %d of thread %d", round, k, s);
        finish_send(&r[k], what);
        free(b[k]);
    }
    free(b);
    free(r);
    return PTSC_OK;
}

/* The receiver: Y first, then X, then the fillers, all posted at once; in
 * round 1 Y is received before the others are posted (a plain MPI program
 * may: all are in flight), so Y cannot wait for X's id to free up. */
static int wrap_recv(ptsc_ctx_t *ctx, int peer, int s, int M, int round)
{
    int n = M + 1;
    unsigned char **b = calloc((size_t)n, sizeof *b);
    ptsc_request_t *r = calloc((size_t)n, sizeof *r);
    ptsc_info_t *info = calloc((size_t)n, sizeof *info);
    int *msg = calloc((size_t)n, sizeof *msg), *tags = calloc((size_t)n, sizeof *tags);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int j = 0; j < n; j++) { /* receive j takes message msg[j] */
        msg[j] = j == 0 ? n - 1 : j == 1 ? 0 : j - 1;
        tags[j] = j == 0 ? WRAP_Y : j == 1 ? WRAP_X : WRAP_FILL;
        b[j] = rbuf_alloc(wrap_size);
        info_reset(&info[j]);
        r[j] = PTSC_REQUEST_NULL;
        CHECK_OK(ptsc_irecv(ctx, b[j], (int)wrap_size, MPI_BYTE, peer, s, tags[j], &r[j]));
        int rc;
        if (round == 1 && j == 0 && !poll_done(&r[0], &info[0], 20, &rc))
            CHECK(0,
                  "id_wrap round 1: the last message (tag %d) from thread %d not received after 20 s "
                  "while the one whose id it meets waits unreceived",
                  WRAP_Y, s);
    }
    for (int j = 0; j < n; j++) {
        int rc = r[j] == PTSC_REQUEST_NULL ? info[j].error : ptsc_wait_info(&r[j], &info[j]);
        char what[128];
        snprintf(what, sizeof what, "id_wrap round %d: message %d of %d from thread %d (tag %d)", round,
                 msg[j], n, s, tags[j]);
        CHECK_INFO(what, rc, &info[j], PTSC_OK, wrap_size, peer, s, tags[j]);
        if (rc == PTSC_OK)
            CHECK_DATA(what, b[j], wrap_size, wrap_size,
                       seed_of(20, (uint64_t)round, (uint64_t)s, (uint64_t)msg[j]));
        free(b[j]);
    }
    free(b);
    free(r);
    free(info);
    free(msg);
    free(tags);
    return PTSC_OK;
}

/* Both ways at once between (this rank, thread s) and (peer, thread s):
 * 3 M framed messages each way, WRAP_WIN in flight, tags cycling, received
 * tag by tag in reverse order within each window. */
static int wrap_exchange(ptsc_ctx_t *ctx, int peer, int s, int M)
{
    int total = 3 * M;
    for (int base = 0; base < total; base += WRAP_WIN) {
        int w = total - base < WRAP_WIN ? total - base : WRAP_WIN;
        unsigned char *sb[WRAP_WIN], *rb[WRAP_WIN];
        ptsc_request_t sr[WRAP_WIN], rr[WRAP_WIN];
        int rmsg[WRAP_WIN], j = 0;
        for (int k = 0; k < w; k++) {
            int m = base + k;
            sb[k] = msg_alloc(wrap_size, seed_of(21, (uint64_t)g_rank, (uint64_t)s, (uint64_t)m));
            CHECK_OK(ptsc_isend(ctx, sb[k], (int)wrap_size, MPI_BYTE, peer, s, m % 3, &sr[k]));
        }
        for (int tag = 2; tag >= 0; tag--)
            for (int k = 0; k < w; k++)
                if ((base + k) % 3 == tag) {
                    rmsg[j] = base + k;
                    rb[j] = rbuf_alloc(wrap_size);
                    CHECK_OK(ptsc_irecv(ctx, rb[j], (int)wrap_size, MPI_BYTE, peer, s, tag, &rr[j]));
                    j++;
                }
        for (j = 0; j < w; j++) {
            ptsc_info_t info;
            info_reset(&info);
            int rc = ptsc_wait_info(&rr[j], &info);
            char what[128];
            snprintf(what, sizeof what, "id_wrap exchange: message %d from (%d,%d)", rmsg[j], peer, s);
            CHECK_INFO(what, rc, &info, PTSC_OK, wrap_size, peer, s, rmsg[j] % 3);
            if (rc == PTSC_OK)
                CHECK_DATA(what, rb[j], wrap_size, wrap_size,
                           seed_of(21, (uint64_t)peer, (uint64_t)s, (uint64_t)rmsg[j]));
            free(rb[j]);
        }
        int rc = ptsc_waitall(w, sr);
        CHECK_RC("id_wrap exchange: waitall of the sends", rc, PTSC_OK);
        for (int k = 0; k < w; k++)
            free(sb[k]);
    }
    return PTSC_OK;
}

static int wrap_M;

static void *wrap_thread1(void *arg)
{
    (void)arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = 1;
    int rc = ptsc_thread_attach(1, &ctx);
    CHECK_RC("id_wrap: attach 1", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    int peer = 1 - g_rank;
    for (int round = 0; round < 2; round++) {
        if (g_rank == 0)
            wrap_send(ctx, peer, 1, wrap_M, round);
        else
            wrap_recv(ctx, peer, 1, wrap_M, round);
    }
    wrap_exchange(ctx, peer, 1, wrap_M);
    rc = ptsc_thread_detach();
    CHECK_RC("id_wrap: detach 1", rc, PTSC_OK);
    return NULL;
}

static int case_id_wrap(ptsc_ctx_t *ctx)
{
    int tmax = 0;
    CHECK_OK(ptsc_tag_max(&tmax));
    wrap_M = tmax + 1;
    if (g_rank == 0 && g_me == 0)
        printf("note: id_wrap: %d thread slots, ids of framed messages modulo %d\n", T, wrap_M);
    if (wrap_M > 256) { /* the id space is too large to wrap in a short test */
        if (g_rank == 0)
            printf("note: id_wrap: id space %d, wrap not exercised\n", wrap_M);
        wrap_M = 256;
    }
    if (!need_two() || T < 2)
        return PTSC_OK;
    if (g_rank > 1) {
        /* The senders' barriers: two rounds of thread 1, two of thread 0. */
        for (int k = 0; k < 4; k++)
            MPI_Barrier(MPI_COMM_WORLD);
        return PTSC_OK;
    }
    /* Thread 1 (zero-copy framed sends where host buffers stage by thread
     * parity), then thread 0 (staged): one at a time, since the barriers are
     * on MPI_COMM_WORLD. */
    pthread_t th;
    pthread_create(&th, NULL, wrap_thread1, NULL);
    pthread_join(th, NULL);
    int peer = 1 - g_rank;
    for (int round = 0; round < 2; round++) {
        if (g_rank == 0)
            wrap_send(ctx, peer, 0, wrap_M, round);
        else
            wrap_recv(ctx, peer, 0, wrap_M, round);
    }
    wrap_exchange(ctx, peer, 0, wrap_M);
    return PTSC_OK;
}

/* Before ptsc_init: with PTSC_COMM=shared, choose PTSC_MAX_THREADS so that
 * the id space (the tag range) is about 40, from MPI's tag bound. MPI is
 * initialised here; the caller finalizes it. */
static void id_wrap_setup(int *argc, char ***argv)
{
    int provided = 0, *ub = NULL, flag = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    const char *comm = getenv("PTSC_COMM");
    if (!comm || strcmp(comm, "shared") != 0)
        return;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    double space = flag && ub ? (double)*ub + 1 : 32768.0;
    long t = 4096;
    while (t > 2 && 3.0 * 40.0 * (double)t * (double)t > space)
        t--;
    char v[32];
    snprintf(v, sizeof v, "%ld", t);
    setenv("PTSC_MAX_THREADS", v, 1);
}

/* ------------------------------------------------------------------------ */
/* probe_handover                                                            */
/* ------------------------------------------------------------------------ */

enum { HAND_T = 3, HAND_N = 4 };
/* Message k: from thread hand_from[k] of rank 0, tag 30 + k. */
static const int hand_from[HAND_N] = {0, 0, 1, 1};
static const size_t hand_size[HAND_N] = {100, 3 * 4096 + 17, 3 * 4096 + 17, 4000};

static uint64_t hand_seed(int round, int k) { return seed_of(22, (uint64_t)round, (uint64_t)k, 0); }

typedef struct {
    int round, peer;
} hand_arg_t;

/* Rank 1, index HAND_T: probe every message, then detach (round 0) or exit attached (round 1). */
static void *hand_prober(void *arg)
{
    const hand_arg_t *a = arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = HAND_T;
    int rc = ptsc_thread_attach(HAND_T, &ctx);
    CHECK_RC("probe_handover: attach the prober", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    for (int k = 0; k < HAND_N; k++) {
        ptsc_info_t pi;
        info_reset(&pi);
        rc = ptsc_probe(ctx, a->peer, hand_from[k], 30 + k, &pi);
        char what[96];
        snprintf(what, sizeof what, "probe_handover round %d: probe of message %d", a->round, k);
        CHECK_INFO(what, rc, &pi, PTSC_OK, hand_size[k], a->peer, hand_from[k], 30 + k);
    }
    if (a->round == 0) {
        rc = ptsc_thread_detach();
        CHECK_RC("probe_handover: detach of the prober", rc, PTSC_OK);
    }
    return NULL; /* round 1: exits attached */
}

/* Rank 1, index HAND_T again: receive what the prober left. */
static void *hand_heir(void *arg)
{
    const hand_arg_t *a = arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = HAND_T;
    int rc = ptsc_thread_attach(HAND_T, &ctx);
    CHECK_RC("probe_handover: attach the next holder", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    for (int k = HAND_N - 1; k >= 0; k--) {
        unsigned char *b = rbuf_alloc(hand_size[k]);
        ptsc_request_t r = PTSC_REQUEST_NULL;
        ptsc_info_t info;
        info_reset(&info);
        char what[128];
        snprintf(what, sizeof what, "probe_handover round %d: message %d (%zu bytes) to the next holder",
                 a->round, k, hand_size[k]);
        rc = ptsc_irecv(ctx, b, (int)hand_size[k], MPI_BYTE, a->peer, hand_from[k], 30 + k, &r);
        CHECK_RC(what, rc, PTSC_OK);
        double t0 = now_s();
        int done = 0;
        while (rc == PTSC_OK && !done) {
            rc = ptsc_test_info(&r, &done, &info);
            if (!done && now_s() - t0 > 20) {
                CHECK(0, "%s: not received after 20 s (lost with the prober?)", what);
                rc = ptsc_cancel(&r);
                rc = ptsc_wait(&r);
                free(b);
                return NULL;
            }
        }
        CHECK_INFO(what, rc, &info, PTSC_OK, hand_size[k], a->peer, hand_from[k], 30 + k);
        if (rc == PTSC_OK)
            CHECK_DATA(what, b, hand_size[k], hand_size[k], hand_seed(a->round, k));
        free(b);
    }
    rc = ptsc_thread_detach();
    CHECK_RC("probe_handover: detach of the next holder", rc, PTSC_OK);
    return NULL;
}

static void hand_send(ptsc_ctx_t *ctx, int peer, int me, int round)
{
    unsigned char *b[HAND_N] = {NULL};
    ptsc_request_t r[HAND_N];
    for (int k = 0; k < HAND_N; k++) {
        r[k] = PTSC_REQUEST_NULL;
        if (hand_from[k] != me)
            continue;
        b[k] = msg_alloc(hand_size[k], hand_seed(round, k));
        int rc = ptsc_isend(ctx, b[k], (int)hand_size[k], MPI_BYTE, peer, HAND_T, 30 + k, &r[k]);
        CHECK_RC("probe_handover: isend", rc, PTSC_OK);
    }
    for (int k = 0; k < HAND_N; k++)
        if (hand_from[k] == me) {
            char what[96];
            snprintf(what, sizeof what, "probe_handover round %d: send of message %d", round, k);
            finish_send(&r[k], what);
            free(b[k]);
        }
}

static void *hand_sender1(void *arg)
{
    const hand_arg_t *a = arg;
    ptsc_ctx_t *ctx = NULL;
    g_me = 1;
    int rc = ptsc_thread_attach(1, &ctx);
    CHECK_RC("probe_handover: attach sender 1", rc, PTSC_OK);
    if (rc != PTSC_OK)
        return NULL;
    hand_send(ctx, a->peer, 1, a->round);
    rc = ptsc_thread_detach();
    CHECK_RC("probe_handover: detach sender 1", rc, PTSC_OK);
    return NULL;
}

static int case_probe_handover(ptsc_ctx_t *ctx)
{
    if (T <= HAND_T) {
        CHECK(0, "probe_handover needs PTSC_MAX_THREADS > %d, got %d", HAND_T, T);
        return PTSC_OK;
    }
    if (!need_two())
        return PTSC_OK;
    for (int round = 0; round < 2; round++) {
        hand_arg_t a = {round, 1 - g_rank};
        if (g_rank == 0) {
            pthread_t th;
            pthread_create(&th, NULL, hand_sender1, &a);
            hand_send(ctx, a.peer, 0, round);
            pthread_join(th, NULL);
        } else if (g_rank == 1) {
            pthread_t th;
            pthread_create(&th, NULL, hand_prober, &a);
            pthread_join(th, NULL);
            pthread_create(&th, NULL, hand_heir, &a);
            pthread_join(th, NULL);
        }
        CHECK_OK(ptsc_barrier(ctx));
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* probe_slots                                                               */
/* ------------------------------------------------------------------------ */

/* Rank 0 thread 0 sends A (framed: 3 pieces in 4 KiB chunks, tag 50) to rank
 * 1 thread 0, which probes it and leaves it; once A's first part is taken,
 * rank 0 sends SLOT_C messages on tag 51, then D on tag 52, all framed. Rank
 * 1 receives D first, then the C messages, then A. A's pieces must not hold
 * rank 0's staging slots meanwhile (PTSC_STAGING_DEPTH, 4 by default): with
 * them held, the C messages' first parts fill the rest and D never starts. */
enum { SLOT_C = 4 };
static const size_t slot_size[SLOT_C + 2] = {3 * 4096 + 17, 2 * 4096 + 5, 2 * 4096 + 6,
                                             2 * 4096 + 7,  2 * 4096 + 8, 2 * 4096 + 9}; /* A, C..., D */
static int slot_tag(int k) { return k == 0 ? 50 : k <= SLOT_C ? 51 : 52; }
static uint64_t slot_seed(int k) { return seed_of(23, (uint64_t)k, 0, 0); }

static int slot_send(ptsc_ctx_t *ctx, int peer)
{
    unsigned char *b[SLOT_C + 2];
    ptsc_request_t r[SLOT_C + 2];
    for (int k = 0; k < SLOT_C + 2; k++) {
        b[k] = msg_alloc(slot_size[k], slot_seed(k));
        CHECK_OK(ptsc_isend(ctx, b[k], (int)slot_size[k], MPI_BYTE, peer, 0, slot_tag(k), &r[k]));
        if (k > 0)
            continue;
        MPI_Barrier(MPI_COMM_WORLD); /* the receiver probed A */
        double t0 = now_s();
        int done = 0;
        while (now_s() - t0 < 0.05 && !done) /* A's pieces take their slots */
            CHECK_OK(ptsc_test(&r[0], &done));
        if (done)
            r[0] = PTSC_REQUEST_NULL;
    }
    for (int k = 0; k < SLOT_C + 2; k++) {
        char what[64];
        snprintf(what, sizeof what, "probe_slots: send of message %d", k);
        if (r[k] != PTSC_REQUEST_NULL)
            finish_send(&r[k], what);
        free(b[k]);
    }
    return PTSC_OK;
}

static int slot_recv(ptsc_ctx_t *ctx, int peer)
{
    ptsc_info_t pi;
    info_reset(&pi);
    int rc = ptsc_probe(ctx, peer, 0, slot_tag(0), &pi);
    CHECK_INFO("probe_slots: probe of A", rc, &pi, PTSC_OK, slot_size[0], peer, 0, slot_tag(0));
    MPI_Barrier(MPI_COMM_WORLD);
    /* D, the C messages in order, then A. */
    static const int order[SLOT_C + 2] = {SLOT_C + 1, 1, 2, 3, 4, 0};
    unsigned char *b[SLOT_C + 2];
    ptsc_request_t r[SLOT_C + 2];
    ptsc_info_t info[SLOT_C + 2];
    for (int j = 0; j < SLOT_C + 2; j++) {
        int k = order[j];
        b[j] = rbuf_alloc(slot_size[k]);
        info_reset(&info[j]);
        CHECK_OK(ptsc_irecv(ctx, b[j], (int)slot_size[k], MPI_BYTE, peer, 0, slot_tag(k), &r[j]));
        if (j == 0 && !poll_done(&r[0], &info[0], 20, &rc))
            CHECK(0, "probe_slots: D not received after 20 s while the probed A waits for its receive");
    }
    for (int j = 0; j < SLOT_C + 2; j++) {
        int k = order[j];
        rc = r[j] == PTSC_REQUEST_NULL ? info[j].error : ptsc_wait_info(&r[j], &info[j]);
        char what[64];
        snprintf(what, sizeof what, "probe_slots: message %d", k);
        CHECK_INFO(what, rc, &info[j], PTSC_OK, slot_size[k], peer, 0, slot_tag(k));
        if (rc == PTSC_OK)
            CHECK_DATA(what, b[j], slot_size[k], slot_size[k], slot_seed(k));
        free(b[j]);
    }
    return PTSC_OK;
}

static int case_probe_slots(ptsc_ctx_t *ctx)
{
    if (!need_two())
        return PTSC_OK;
    if (g_rank == 0)
        return slot_send(ctx, 1);
    if (g_rank == 1)
        return slot_recv(ctx, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* dup_request                                                               */
/* ------------------------------------------------------------------------ */

/* The message of step k, to this rank's own thread 0 on tag 40. */
static int dup_exchange(ptsc_ctx_t *ctx, ptsc_request_t *r, int *buf, int k)
{
    int v = 1000 * g_rank + k;
    CHECK_OK(ptsc_send(ctx, &v, 1, MPI_INT, g_rank, 0, 40));
    int rc = ptsc_wait(r);
    CHECK(rc == PTSC_OK && *buf == v, "dup_request step %d: wait gave %s, value %d, expected %d", k,
          ptsc_status_name(rc), *buf, v);
    return rc;
}

static int case_dup_request(ptsc_ctx_t *ctx)
{
    int buf = -1, idx = -9, out = -9, flag = -9, idxs[3] = {-9, -9, -9};
    ptsc_request_t r = PTSC_REQUEST_NULL;
    CHECK_OK(ptsc_irecv(ctx, &buf, 1, MPI_INT, g_rank, 0, 40, &r));
    ptsc_request_t two[2] = {r, r}, three[3] = {r, PTSC_REQUEST_NULL, r};
    int rc = ptsc_waitall(2, two);
    CHECK_RC("dup_request: ptsc_waitall with one request twice", rc, PTSC_ERR_ARG);
    rc = ptsc_waitall(3, three);
    CHECK_RC("dup_request: ptsc_waitall with one request twice, NULL between", rc, PTSC_ERR_ARG);
    rc = ptsc_testall(2, two, &flag);
    CHECK_RC("dup_request: ptsc_testall with one request twice", rc, PTSC_ERR_ARG);
    rc = ptsc_testsome(3, three, &out, idxs, NULL);
    CHECK_RC("dup_request: ptsc_testsome with one request twice", rc, PTSC_ERR_ARG);
    rc = ptsc_waitany(2, two, &idx, NULL);
    CHECK_RC("dup_request: ptsc_waitany with one request twice", rc, PTSC_ERR_ARG);
    CHECK(two[0] == r && two[1] == r && three[0] == r && three[1] == PTSC_REQUEST_NULL && three[2] == r,
          "dup_request: a refused array call changed the array");
    CHECK(flag == -9 && out == -9 && idx == -9, "dup_request: a refused call wrote its outputs (%d %d %d)",
          flag, out, idx);
    ptsc_request_t copy = r;
    if (dup_exchange(ctx, &r, &buf, 1) != PTSC_OK)
        return PTSC_OK;
    /* A stale copy of the completed handle. */
    int done = -9;
    rc = ptsc_wait(&copy);
    CHECK_RC("dup_request: ptsc_wait of a stale copy of a completed request", rc, PTSC_ERR_ARG);
    rc = ptsc_test(&copy, &done);
    CHECK_RC("dup_request: ptsc_test of a stale copy", rc, PTSC_ERR_ARG);
    ptsc_request_t stale[1] = {copy};
    rc = ptsc_waitall(1, stale);
    CHECK_RC("dup_request: ptsc_waitall of a stale copy", rc, PTSC_ERR_ARG);
    /* The thread's next receives still work (a request freed twice made them spin). */
    for (int k = 2; k < 5; k++) {
        buf = -1;
        CHECK_OK(ptsc_irecv(ctx, &buf, 1, MPI_INT, g_rank, 0, 40, &r));
        if (dup_exchange(ctx, &r, &buf, k) != PTSC_OK)
            return PTSC_OK;
    }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* trunc_noncontig                                                           */
/* ------------------------------------------------------------------------ */

enum { TNC_HOLE = -77 };

static int case_trunc_noncontig(ptsc_ctx_t *ctx)
{
    /* Receives of `cap` ints at a stride of 2 (one vector element), from
     * messages of `n` ints: plain (below the 4 KiB chunk) and framed. */
    static const int caps[] = {100, 100, 1500, 600};
    static const int ns[] = {200, 3000, 3000, 1100};
    const int ncase = (int)(sizeof caps / sizeof caps[0]), tag = 41, next_tag = 42;
    if (!need_two() || g_rank > 1)
        return PTSC_OK;
    int peer = 1 - g_rank;
    for (int c = 0; c < ncase; c++)
        for (int mode = 0; mode < 2; mode++) {
            int n = ns[c], cap = caps[c];
            char what[128];
            snprintf(what, sizeof what, "trunc_noncontig: %d ints into %d at stride 2 (%s)", n, cap,
                     mode ? "irecv" : "recv");
            if (g_rank == 0) {
                int *m = malloc((size_t)n * sizeof *m), next = 4242 + c;
                for (int i = 0; i < n; i++)
                    m[i] = 7 * i + c + 1;
                CHECK_OK(ptsc_send(ctx, m, n, MPI_INT, peer, 0, tag));
                CHECK_OK(ptsc_send(ctx, &next, 1, MPI_INT, peer, 0, next_tag));
                free(m);
                continue;
            }
            MPI_Datatype vec;
            MPI_Type_vector(cap, 1, 2, MPI_INT, &vec);
            MPI_Type_commit(&vec);
            int *b = malloc((size_t)(2 * cap + 8) * sizeof *b);
            for (int i = 0; i < 2 * cap + 8; i++)
                b[i] = TNC_HOLE;
            ptsc_info_t info;
            info_reset(&info);
            int rc;
            if (mode) {
                ptsc_request_t r = PTSC_REQUEST_NULL;
                CHECK_OK(ptsc_irecv(ctx, b, 1, vec, peer, 0, tag, &r));
                rc = ptsc_wait_info(&r, &info);
            } else {
                rc = ptsc_recv_info(ctx, b, 1, vec, peer, 0, tag, &info);
            }
            CHECK_INFO(what, rc, &info, PTSC_ERR_TRUNCATE, (size_t)cap * sizeof(int), peer, 0, tag);
            int got = 0;
            for (int i = 0; i < cap; i++)
                got += b[2 * i] == 7 * i + c + 1;
            CHECK(got == cap, "%s: %d of the %d elements hold the message's first ones", what, got, cap);
            for (int i = 0; i < 2 * cap + 8; i++)
                if ((i % 2 || i >= 2 * cap) && b[i] != TNC_HOLE) {
                    CHECK(0, "%s: int %d (a hole or past the type) written: %d", what, i, b[i]);
                    break;
                }
            int next = -1;
            rc = ptsc_recv(ctx, &next, 1, MPI_INT, peer, 0, next_tag);
            CHECK(rc == PTSC_OK && next == 4242 + c, "%s: the next message: %s, %d", what,
                  ptsc_status_name(rc), next);
            MPI_Type_free(&vec);
            free(b);
        }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* trunc_guard                                                               */
/* ------------------------------------------------------------------------ */

static int case_trunc_guard(ptsc_ctx_t *ctx)
{
    /* n-byte messages into n/2 bytes of an n-byte buffer: the second half
     * must stay untouched. */
    static const size_t sizes[] = {2048, 8192, 65536, 1 * MIB};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]), tag = 43;
    if (!need_two() || g_rank > 1)
        return PTSC_OK;
    int peer = 1 - g_rank;
    for (int i = 0; i < nsizes; i++)
        for (int mode = 0; mode < 2; mode++) {
            size_t n = sizes[i], cap = n / 2;
            uint64_t seed = seed_of(23, (uint64_t)i, (uint64_t)mode, 0);
            char what[128];
            snprintf(what, sizeof what, "trunc_guard: %zu-byte message into %zu bytes (%s)", n, cap,
                     mode ? "irecv" : "recv");
            if (g_rank == 0) {
                unsigned char *m = msg_alloc(n, seed);
                CHECK_OK(ptsc_send(ctx, m, (int)n, MPI_BYTE, peer, 0, tag));
                free(m);
                continue;
            }
            unsigned char *b = rbuf_alloc(n);
            ptsc_info_t info;
            info_reset(&info);
            int rc;
            if (mode) {
                ptsc_request_t r = PTSC_REQUEST_NULL;
                CHECK_OK(ptsc_irecv(ctx, b, (int)cap, MPI_BYTE, peer, 0, tag, &r));
                rc = ptsc_wait_info(&r, &info);
            } else {
                rc = ptsc_recv_info(ctx, b, (int)cap, MPI_BYTE, peer, 0, tag, &info);
            }
            CHECK_INFO(what, rc, &info, PTSC_ERR_TRUNCATE, cap, peer, 0, tag);
            CHECK_DATA(what, b, cap, n, seed); /* the first cap bytes, nothing after */
            free(b);
        }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int (*fn)(ptsc_ctx_t *ctx);
} case_t;

static const case_t cases[] = {
    {"recv_larger", case_recv_larger},
    {"truncate_then_next", case_truncate_then_next},
    {"isend_many", case_isend_many},
    {"detach_pending", case_detach_pending},
    {"exit_pending", case_exit_pending},
    {"big_type", case_big_type},
    {"probe", case_probe},
    {"any_rank", case_any_rank},
    {"derived", case_derived},
    {"id_wrap", case_id_wrap},
    {"probe_handover", case_probe_handover},
    {"probe_slots", case_probe_slots},
    {"dup_request", case_dup_request},
    {"trunc_noncontig", case_trunc_noncontig},
    {"trunc_guard", case_trunc_guard},
};

int main(int argc, char **argv)
{
    const case_t *c = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0)
            c = &cases[i];
    if (!c) {
        fprintf(stderr, "usage: %s CASE; cases:", argv[0]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            fprintf(stderr, " %s", cases[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    int own_mpi = c->fn == case_id_wrap;
    if (own_mpi)
        id_wrap_setup(&argc, &argv);
    T = test_init(&argc, &argv, &R);
    ptsc_ctx_t *ctx = NULL;
    g_me = 0;
    int rc = ptsc_thread_attach(0, &ctx);
    CHECK(rc == PTSC_OK, "attach 0: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    if (rc == PTSC_OK) {
        c->fn(ctx);
        /* Everyone is done before anyone detaches (a detach waits for nothing of the peer). */
        ptsc_ctx_t *cur = NULL;
        if (ptsc_self(&cur) == PTSC_OK)
            ptsc_barrier(cur);
        rc = ptsc_thread_detach();
        CHECK(rc == PTSC_OK, "final detach: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    }
    char name[96];
    snprintf(name, sizeof name, "mpi_regress %s", c->name);
    rc = test_finish(name);
    if (own_mpi)
        MPI_Finalize();
    return rc;
}
