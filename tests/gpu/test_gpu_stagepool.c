/*
 * The staging pool (staging.c) on a real device, through the internal
 * interface: size rounding, reuse, "never reused before its copy
 * finished", the idle cap, and destroy with a pending buffer. One rank.
 */
#include "gpu_test.h"
#include "ptsc_internal.h"

static size_t idle_bytes(ptsc_ctx_t *ctx, int *n)
{
    size_t b = 0;
    *n = 0;
    for (ptsc__stagebuf_t *sb = ctx->pool.free; sb; sb = sb->next, ++*n)
        b += sb->size;
    return b;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_stagepool"), n = 0;
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "1", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    ptsc_ctx_t *ctx = NULL;
    GT_OK(ptsc_thread_attach(0, &ctx));
    if (ctx == NULL) {
        ptsc_finalize();
        return 1;
    }
    cudaStream_t s = gt_stream(ctx);
    void *dev = NULL;
    GT_CUDA(cudaMalloc(&dev, 1u << 16));
    ptsc__stagebuf_t *a = NULL, *b = NULL, *c = NULL;

    /* Rounding: at least 64 KiB, powers of two; buffers are pinned. */
    GT_OK(ptsc__stage_acquire(ctx, 1000, &a));
    GT_CHECK(a && a->size == (64u << 10), "1000 bytes -> %zu", a ? a->size : 0);
    ptsc_memclass_t cls = PTSC_MEM_HOST;
    GT_OK(ptsc_mem_class(a->host, &cls));
    GT_CHECK(cls == PTSC_MEM_PINNED, "staging buffer class %d, expected pinned", (int)cls);
    GT_OK(ptsc__stage_acquire(ctx, (100u << 10) + 1, &b));
    GT_CHECK(b && b->size == (128u << 10), "100 KiB + 1 -> %zu", b ? b->size : 0);
    /* Released without pending work: reused at once, best fit. */
    GT_OK(ptsc__stage_release(ctx, a, 0));
    GT_OK(ptsc__stage_release(ctx, b, 0));
    GT_OK(ptsc__stage_acquire(ctx, 10, &c));
    GT_CHECK(c == a, "small request did not reuse the smallest idle buffer");

    /* Released behind a busy stream: not reused until the stream passed it. */
    GT_CUDA(ptsc_tk_spin(200000, s));
    /* Pinned host to device: truly asynchronous (a host-to-host copy would
     * be performed at once, waiting for the stream first). */
    GT_CUDA(cudaMemcpyAsync(dev, c->host, 64, cudaMemcpyDefault, s));
    GT_OK(ptsc__stage_release(ctx, c, 1));
    ptsc__stagebuf_t *e = NULL;
    GT_OK(ptsc__stage_acquire(ctx, 10, &e));
    GT_CHECK(e != c, "a buffer was reused while the copy queued before its release had not run");
    GT_CUDA(cudaStreamSynchronize(s));
    ptsc__stagebuf_t *f = NULL;
    GT_OK(ptsc__stage_acquire(ctx, 10, &f));
    GT_CHECK(f == c, "the buffer was not reused after its stream finished");
    GT_OK(ptsc__stage_release(ctx, e, 0));
    GT_OK(ptsc__stage_release(ctx, f, 0));

    /* Idle cap: three 128 MiB buffers released; at most 256 MiB stay idle. */
    ptsc__stagebuf_t *big[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        GT_OK(ptsc__stage_acquire(ctx, 100u << 20, &big[i]));
    for (int i = 0; i < 3; i++)
        GT_OK(ptsc__stage_release(ctx, big[i], 0));
    size_t idle = idle_bytes(ctx, &n);
    GT_CHECK(idle <= (256u << 20) || n == 1, "%zu bytes idle in %d buffers after the cap", idle, n);
    printf("pool: %d idle buffers, %zu KiB idle after releasing 3 x 128 MiB\n", n, idle >> 10);

    /* Destroy while a buffer is pending: must wait, not crash. */
    ptsc__stagebuf_t *p = NULL;
    GT_OK(ptsc__stage_acquire(ctx, 1u << 20, &p));
    GT_CUDA(ptsc_tk_spin(100000, s));
    GT_CUDA(cudaMemcpyAsync(dev, p->host, 4096, cudaMemcpyDefault, s));
    GT_OK(ptsc__stage_release(ctx, p, 1));
    double t0 = gt_now_ms();
    ptsc__stage_destroy(ctx);
    printf("pool: destroy with a pending buffer took %.1f ms\n", gt_now_ms() - t0);
    GT_CHECK(ctx->pool.free == NULL && ctx->pool.pending == NULL, "pool not empty after destroy");

    GT_CUDA(cudaFree(dev));
    GT_OK(ptsc_thread_detach());
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_stagepool");
}
