/*
 * Per-thread pinned staging buffers.
 *
 * Each context owns a pool: pool.free holds idle buffers, pool.pending
 * buffers that were released while a copy queued on the context's stream
 * may still read or write them. A pending buffer carries an event recorded
 * on the stream at release; it moves back to the idle list only once that
 * event has completed, so a buffer is never handed out again before its
 * last copy finished. The pool belongs to one thread, so no lock is taken.
 *
 * Sizes are rounded up to a power of two (at least 64 KiB), so that the
 * few sizes a program uses map to few buffers and a freed buffer fits the
 * next request of similar size. Acquire takes the smallest idle buffer that
 * fits (best fit), else allocates one with cudaHostAlloc (~ms per 100 MB,
 * which is why buffers are kept).
 *
 * Idle cap: at most PTSC__STAGE_IDLE_MAX bytes (256 MiB) stay idle per
 * context; beyond it the largest idle buffers are freed, except the one
 * just released, so that a program whose messages (or pipeline chunks)
 * exceed the cap keeps one buffer and does not pay an allocation (and a
 * page-locking of the whole size) per message. The cap is checked on
 * release and after pending buffers return to the idle list. Pending
 * buffers are in use and do not count.
 */
#include "ptsc_internal.h"

#include <stdlib.h>

#define PTSC__STAGE_MIN ((size_t)64 << 10)
#define PTSC__STAGE_IDLE_MAX ((size_t)256 << 20)

/* Smallest power of two >= n and >= PTSC__STAGE_MIN; 0 on overflow. */
static size_t ptsc__stage_round(size_t n)
{
    size_t s = PTSC__STAGE_MIN;
    while (s < n) {
        if (s > (SIZE_MAX >> 1))
            return 0;
        s <<= 1;
    }
    return s;
}

static void ptsc__stage_free_one(ptsc__stagebuf_t *sb)
{
    ptsc__gpu_event_destroy(sb->event);
    ptsc__gpu_host_free(sb->host);
    free(sb);
}

/* Move pending buffers whose copies have finished to the idle list. */
static int ptsc__stage_reap(ptsc_ctx_t *ctx)
{
    ptsc__stagebuf_t **pp = &ctx->pool.pending;
    while (*pp != NULL) {
        ptsc__stagebuf_t *sb = *pp;
        int done = 0, rc = ptsc__gpu_event_done(sb->event, &done);
        if (rc != PTSC_OK)
            return rc;
        if (done) {
            *pp = sb->next;
            sb->next = ctx->pool.free;
            ctx->pool.free = sb;
        } else {
            pp = &sb->next;
        }
    }
    return PTSC_OK;
}

/* Free the largest idle buffers, other than `keep`, while idle bytes exceed the cap. */
static void ptsc__stage_trim(ptsc_ctx_t *ctx, const ptsc__stagebuf_t *keep)
{
    /* While enqueued operations are armed a free would only be held back
     * (ptsc__gpu_host_free): keep the buffers for reuse instead. */
    if (ptsc__gpu_frees_held())
        return;
    for (;;) {
        size_t idle = 0;
        ptsc__stagebuf_t **big = NULL, **pp;
        for (pp = &ctx->pool.free; *pp != NULL; pp = &(*pp)->next) {
            idle += (*pp)->size;
            if (*pp != keep && (big == NULL || (*pp)->size > (*big)->size))
                big = pp;
        }
        if (idle <= PTSC__STAGE_IDLE_MAX || big == NULL)
            return;
        {
            ptsc__stagebuf_t *sb = *big;
            *big = sb->next;
            ptsc__stage_free_one(sb);
        }
    }
}

int ptsc__stage_acquire(ptsc_ctx_t *ctx, size_t bytes, ptsc__stagebuf_t **out)
{
    ptsc__stagebuf_t **best = NULL, **pp, *sb;
    size_t size;
    int rc;

    if (ctx == NULL || out == NULL)
        return ptsc__err(PTSC_ERR_INTERNAL, "ptsc__stage_acquire: NULL argument");
    rc = ptsc__stage_reap(ctx);
    if (rc != PTSC_OK)
        return rc;
    for (pp = &ctx->pool.free; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->size >= bytes && (best == NULL || (*pp)->size < (*best)->size))
            best = pp;
    if (best != NULL) {
        sb = *best;
        *best = sb->next;
        sb->next = NULL;
        /* Reaping may have pushed the idle pool over the cap. */
        ptsc__stage_trim(ctx, NULL);
        *out = sb;
        return PTSC_OK;
    }

    ptsc__stage_trim(ctx, NULL); /* none fits: free excess before allocating */
    size = ptsc__stage_round(bytes);
    if (size == 0)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "staging buffer of %zu bytes: size overflows", bytes);
    sb = calloc(1, sizeof *sb);
    if (sb == NULL)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "staging buffer descriptor: out of memory");
    rc = ptsc__gpu_host_alloc(size, &sb->host);
    if (rc != PTSC_OK)
        goto undo_desc;
    rc = ptsc__gpu_event_create(&sb->event);
    if (rc != PTSC_OK)
        goto undo_host;
    sb->size = size;
    *out = sb;
    return PTSC_OK;

undo_host:
    ptsc__gpu_host_free(sb->host);
undo_desc:
    free(sb);
    return rc;
}

int ptsc__stage_release(ptsc_ctx_t *ctx, ptsc__stagebuf_t *sb, int after_stream)
{
    int rc;
    if (sb == NULL)
        return PTSC_OK;
    if (after_stream) {
        rc = ptsc__gpu_event_record(sb->event, ctx->stream);
        if (rc != PTSC_OK) {
            /* Without the event nothing proves the copy finished: wait for
             * the whole stream instead, and free the buffer if even that
             * fails, rather than ever reuse it too early. */
            if (ptsc__gpu_stream_sync(ctx->stream) != PTSC_OK) {
                ptsc__stage_free_one(sb);
                return rc;
            }
        } else {
            sb->next = ctx->pool.pending;
            ctx->pool.pending = sb;
            return PTSC_OK;
        }
    }
    sb->next = ctx->pool.free;
    ctx->pool.free = sb;
    ptsc__stage_trim(ctx, sb);
    return PTSC_OK;
}

void ptsc__stage_destroy(ptsc_ctx_t *ctx)
{
    ptsc__stagebuf_t *sb, *next;
    if (ctx == NULL)
        return;
    /* A pending buffer may still be the target of a copy: wait for it
     * before freeing (cudaFreeHost would also wait, but only for the whole
     * device). Errors are ignored: at thread or process exit the runtime
     * may already be gone, and the memory is released either way. */
    for (sb = ctx->pool.pending; sb != NULL; sb = next) {
        next = sb->next;
        (void)ptsc__gpu_event_sync(sb->event);
        ptsc__stage_free_one(sb);
    }
    for (sb = ctx->pool.free; sb != NULL; sb = next) {
        next = sb->next;
        ptsc__stage_free_one(sb);
    }
    ctx->pool.pending = NULL;
    ctx->pool.free = NULL;
}
