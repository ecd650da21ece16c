/*
 * The staging ring: per-thread pinned buffers of one chunk each, through
 * which the transfer engine (engine.c) stages device buffers piece by piece.
 *
 * Each context owns two rings, one for sends and one for receives, of
 * PTSC_STAGING_DEPTH slots each (allocated on first use). Pinned memory per
 * thread is therefore bounded by 2 x depth x (chunk + header) whatever the
 * message sizes. The two rings are separate so that sends always progress:
 * a thread whose receive slots all wait for data from a peer can still
 * stage the sends that the peer waits for. A receive may borrow an idle
 * send slot (ptsc__ring_get says why); it holds it only while a message
 * that was already sent arrives, so that rule still holds.
 *
 * A slot is handed out when idle, or, to a send whose first write to it is
 * a copy on the context's stream, with copies still queued on that stream
 * (the new copy runs after them). Otherwise the engine gives a slot back
 * only after every copy queued on it ran (it waits on the slot's event),
 * so a slot is never rewritten under a copy, on error paths included.
 * That stream order holds only where the queued copies and the new one go
 * to the same stream: with PTSC_STREAM=per-thread, a context drained by
 * another thread (ptsc_finalize, context.c) queues on that thread's own
 * per-thread stream, so a slot remembers which thread queued its last copy
 * and is taken in stream order only by that thread (same_stream).
 *
 * The event after a message's last copy out of a slot (device-bound) is
 * recorded lazily, when someone first asks whether the slot is free: in a
 * ping-pong the thread's next send takes that slot in stream order and
 * never asks, which saved an event record per message (about 1 us per
 * round trip on the H200). Recorded late, the event also covers work the
 * program queued on the stream since; that only delays a slot the
 * thread's later copies would queue behind anyway.
 *
 * Without a device (PTSC_STAGING=always on a CPU-only machine) the slots are
 * plain memory, copies are memcpy and events are always complete: the same
 * state machine runs, which is how CPU-only CI exercises it.
 */
#include "ptsc_internal.h"

#include <stdlib.h>
#include <string.h>

static int have_gpu(void) { return ptsc__g.ndevices > 0; }

/* Whether a copy queued now on ctx's stream is ordered after the copies
 * queued on slot s: the same stream, unless the stream is the per-thread
 * default stream and another thread queued them. */
static int same_stream(const ptsc_ctx_t *ctx, const ptsc__slot_t *s)
{
    return ctx->stream_kind != PTSC_STREAM_PER_THREAD || pthread_equal(s->by, pthread_self());
}

/* Record the event a lazy copy left out. On another thread's per-thread
 * stream it cannot be recorded from here: wait for the whole device
 * (drains at finalize only). */
static int settle(ptsc_ctx_t *ctx, ptsc__slot_t *s)
{
    if (!s->unrec)
        return PTSC_OK;
    s->unrec = 0;
    if (same_stream(ctx, s))
        return ptsc__gpu_event_record(s->event, ctx->eng.qstream);
    int rc = ptsc__gpu_device_sync();
    s->ran = rc == PTSC_OK;
    return rc;
}

static size_t slot_bytes(void) { return ptsc__g.cfg.staging_chunk + PTSC__HDR_BYTES; }

static void slot_free(ptsc_ctx_t *ctx, ptsc__slot_t *s)
{
    if (!s->host)
        return;
    if (have_gpu()) {
        (void)ptsc__ring_wait(ctx, s);
        ptsc__gpu_event_destroy(s->event);
        ptsc__gpu_host_free(s->host);
    } else {
        free(s->host);
    }
    s->host = NULL;
    s->event = NULL;
}

static int slot_alloc(ptsc__slot_t *s)
{
    if (!have_gpu()) {
        s->host = malloc(slot_bytes());
        return s->host ? PTSC_OK : ptsc__err(PTSC_ERR_NO_MEMORY, "staging slot of %zu bytes", slot_bytes());
    }
    void *host = NULL, *ev = NULL;
    int rc = ptsc__gpu_host_alloc(slot_bytes(), &host);
    if (rc == PTSC_OK && (rc = ptsc__gpu_event_create(&ev)) != PTSC_OK)
        ptsc__gpu_host_free(host);
    if (rc == PTSC_OK) {
        s->host = host;
        s->event = ev;
    }
    return rc;
}

static int ring_init(ptsc__ring_t *r)
{
    if (r->slots)
        return PTSC_OK;
    r->n = ptsc__g.cfg.staging_depth;
    if (!(r->slots = calloc((size_t)r->n, sizeof *r->slots)))
        return ptsc__err(PTSC_ERR_NO_MEMORY, "staging ring of %d slots", r->n);
    return PTSC_OK;
}

/* A slot of ring r that is allocated and idle (b = 0), or has copies
 * queued on ctx's stream (b = 2), or NULL. */
static ptsc__slot_t *find(const ptsc_ctx_t *ctx, ptsc__ring_t *r, int b)
{
    for (int i = 0; i < r->n; i++)
        if (r->slots[i].busy == b && r->slots[i].host && (b != 2 || same_stream(ctx, &r->slots[i])))
            return &r->slots[i];
    return NULL;
}

/* Which slot a piece takes decides where its bytes sit in the host's
 * caches: a ping-pong through one buffer per rank ran 64-256 KiB messages
 * 2-10 % faster on the H200 than through separate send and receive
 * buffers (the device's copies and MPI's single copy find the lines
 * there). So a receive first borrows an idle send slot (it holds it only
 * for a message already matched, so sends never wait on a peer for it),
 * and a send whose first write to the slot is a copy on the thread's
 * stream (`ordered`) takes a slot whose copies are still queued there: its
 * copy runs after them in stream order, with no event query. */
int ptsc__ring_get(ptsc_ctx_t *ctx, int dir, int ordered, ptsc__slot_t **out)
{
    ptsc__ring_t *r = &ctx->ring[dir], *send = &ctx->ring[PTSC__RING_SEND];
    *out = NULL;
    int rc = ring_init(r);
    if (rc == PTSC_OK && dir == PTSC__RING_RECV)
        rc = ring_init(send);
    if (rc != PTSC_OK)
        return rc;
    if (dir == PTSC__RING_RECV)
        *out = find(ctx, send, 0);
    else if (ordered)
        *out = find(ctx, send, 2);
    /* A free slot, then one whose copies completed (an event query, which
     * ptsc__ring_reclaim normally did already), then a new one. */
    if (!*out)
        *out = find(ctx, r, 0);
    ptsc__slot_t *fresh = NULL;
    for (int i = 0; i < r->n && !*out; i++) {
        ptsc__slot_t *s = &r->slots[i];
        if (s->busy == 2) {
            int done = 0;
            if ((rc = ptsc__ring_done(ctx, s, &done)) != PTSC_OK)
                return rc;
            if (done)
                *out = s;
        } else if (!s->busy && !fresh) {
            fresh = s;
        }
    }
    if (!*out && fresh) {
        if ((rc = slot_alloc(fresh)) != PTSC_OK)
            return rc;
        *out = fresh;
    }
    if (*out)
        (*out)->busy = 1;
    return PTSC_OK; /* none: the caller tries again on a later pass */
}

/* Slots given back with copies still queued (ptsc__ring_put_after) are free
 * once their event completed. Finding out is an event query, 1.5-1.8 us on
 * the H200: on a receive's critical path (matched, then a slot, then
 * MPI_Imrecv) it was most of what ptsc added to a staged message. The
 * engine calls this when a wait turns idle (ptsc__engine_idle), so that
 * the slot is already free when the message arrives. */
void ptsc__ring_reclaim(ptsc_ctx_t *ctx)
{
    for (int d = 0; d < 2; d++) {
        ptsc__ring_t *r = &ctx->ring[d];
        for (int i = 0; r->slots && i < r->n; i++) {
            int done = 0;
            if (r->slots[i].busy == 2 && ptsc__ring_done(ctx, &r->slots[i], &done) == PTSC_OK && done)
                r->slots[i].busy = 0;
        }
    }
}

void ptsc__ring_settle(ptsc_ctx_t *ctx)
{
    for (int d = 0; d < 2; d++) {
        ptsc__ring_t *r = &ctx->ring[d];
        for (int i = 0; r->slots && i < r->n; i++)
            if (r->slots[i].unrec && same_stream(ctx, &r->slots[i]))
                (void)settle(ctx, &r->slots[i]);
    }
}

void ptsc__ring_put(ptsc__slot_t *s)
{
    if (s)
        s->busy = 0;
}

void ptsc__ring_put_after(ptsc__slot_t *s)
{
    if (s)
        s->busy = 2;
}

int ptsc__ring_copy(ptsc_ctx_t *ctx, ptsc__slot_t *s, void *dst, const void *src, size_t n, int how)
{
    ptsc__nvtx_push_copy((uintptr_t)dst - (uintptr_t)s->host <= PTSC__HDR_BYTES, n); /* into the slot: D2H */
    if (!have_gpu()) {
        if (n)
            memcpy(dst, src, n);
        ptsc__count_staged(ctx, n);
        return ptsc__nvtx_pop_rc(PTSC_OK);
    }
    s->ran = 0;
    s->by = pthread_self();
    int rc = n ? ptsc__gpu_copy_async(dst, src, n, ctx->eng.qstream) : PTSC_OK;
    ctx->eng.queued++;
    /* Until an event follows the copy (or the stream was waited for), the
     * slot is settled when someone asks (settle). */
    s->unrec = 1;
    if (rc == PTSC_OK && how == PTSC__COPY_RECORD &&
        (rc = ptsc__gpu_event_record(s->event, ctx->eng.qstream)) == PTSC_OK)
        s->unrec = 0;
    else if (rc == PTSC_OK && how == PTSC__COPY_SYNC &&
             (rc = ptsc__gpu_stream_sync(ctx->eng.qstream)) == PTSC_OK) {
        s->unrec = 0;
        s->ran = 1;
    }
    if (rc == PTSC_OK)
        ptsc__count_staged(ctx, n);
    return ptsc__nvtx_pop_rc(rc);
}

/* An event query costs 1.5-1.8 us on the H200: once one saw the copies
 * complete, the slot remembers it until its next copy. */
int ptsc__ring_done(ptsc_ctx_t *ctx, ptsc__slot_t *s, int *done)
{
    *done = 1;
    if (!have_gpu() || s->ran)
        return PTSC_OK;
    int rc = settle(ctx, s);
    if (rc != PTSC_OK || s->ran)
        return rc;
    rc = ptsc__gpu_event_done(s->event, done);
    s->ran = rc == PTSC_OK && *done;
    return rc;
}

int ptsc__ring_wait(ptsc_ctx_t *ctx, ptsc__slot_t *s)
{
    if (!have_gpu() || s->ran)
        return PTSC_OK;
    int rc = settle(ctx, s);
    if (rc != PTSC_OK || s->ran)
        return rc;
    rc = ptsc__gpu_event_sync(s->event);
    s->ran = rc == PTSC_OK;
    return rc;
}

void ptsc__ring_destroy(ptsc_ctx_t *ctx)
{
    for (int d = 0; d < 2; d++) {
        ptsc__ring_t *r = &ctx->ring[d];
        for (int i = 0; r->slots && i < r->n; i++)
            slot_free(ctx, &r->slots[i]);
        free(r->slots);
        r->slots = NULL;
        r->n = 0;
    }
}
