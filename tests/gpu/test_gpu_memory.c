/*
 * Buffer classes, their per-thread cache, and transfers of managed and
 * pinned memory. Two ranks.
 *
 *  - Classes: cudaMalloc -> device (also inside the allocation), managed,
 *    cudaMallocHost -> pinned, malloc / stack / NULL -> host; before
 *    ptsc_init too (uncached).
 *  - Address reuse: a large malloc'd buffer is host, then after
 *    cudaHostRegister it must be pinned AT ONCE (pageable results are never
 *    cached); after cudaHostUnregister it may read pinned (a stale entry
 *    costs only a sync) until ptsc_mem_forget, then host. A device
 *    allocation freed and reallocated is device again.
 *  - Transfers: a kernel writes a managed (resp. pinned, mapped) buffer on
 *    the bound stream, ptsc_send with scope thread, and the receiver checks
 *    what lands in managed (resp. pinned, pageable) memory.
 */
#include "gpu_test.h"

#define N (1u << 20)

static void classes(void)
{
    int *d = NULL, *m = NULL, *pin = NULL, stack_var = 0;
    int *h = malloc(64);
    GT_CUDA(cudaMalloc((void **)&d, N * sizeof(int)));
    GT_CUDA(cudaMallocManaged((void **)&m, N * sizeof(int), cudaMemAttachGlobal));
    GT_CUDA(cudaMallocHost((void **)&pin, N * sizeof(int)));
    for (int pass = 0; pass < 2; pass++) { /* second pass: from the cache */
        GT_CLASS(d, PTSC_MEM_DEVICE);
        GT_CLASS(d + 1000, PTSC_MEM_DEVICE);
        GT_CLASS(m, PTSC_MEM_MANAGED);
        GT_CLASS(pin, PTSC_MEM_PINNED);
        GT_CLASS(h, PTSC_MEM_HOST);
        GT_CLASS(&stack_var, PTSC_MEM_HOST);
        GT_CLASS(NULL, PTSC_MEM_HOST);
    }
    GT_RC(ptsc_mem_class(d, NULL), PTSC_ERR_ARG);

    /* Address reuse: pageable -> registered -> unregistered. */
    size_t big = 64u << 20;
    char *reg = malloc(big);
    GT_CLASS(reg, PTSC_MEM_HOST);
    GT_CUDA(cudaHostRegister(reg, big, cudaHostRegisterDefault));
    GT_CLASS(reg, PTSC_MEM_PINNED);
    GT_CLASS(reg, PTSC_MEM_PINNED);
    GT_CUDA(cudaHostUnregister(reg));
    ptsc_memclass_t c = PTSC_MEM_DEVICE;
    GT_OK(ptsc_mem_class(reg, &c));
    GT_CHECK(c == PTSC_MEM_PINNED || c == PTSC_MEM_HOST, "unregistered buffer reads %s", gt_class_name(c));
    GT_OK(ptsc_mem_forget());
    GT_CLASS(reg, PTSC_MEM_HOST);
    free(reg);

    /* Device allocation freed and reallocated (often at the same address). */
    int *d2 = NULL;
    void *old = d;
    GT_CUDA(cudaFree(d));
    GT_CUDA(cudaMalloc((void **)&d2, N * sizeof(int)));
    GT_CLASS(d2, PTSC_MEM_DEVICE);
    printf("classes: device realloc %s the old address\n", (void *)d2 == old ? "reused" : "did not reuse");
    /* Device memory freed and the address turned into managed memory: any
     * class that needs a sync and staging is acceptable (stale is safe). */
    GT_CUDA(cudaFree(d2));
    int *m2 = NULL;
    GT_CUDA(cudaMallocManaged((void **)&m2, N * sizeof(int), cudaMemAttachGlobal));
    GT_OK(ptsc_mem_class(m2, &c));
    GT_CHECK(c == PTSC_MEM_MANAGED || ((void *)m2 == (void *)d2 && c == PTSC_MEM_DEVICE), "managed reads %s",
             gt_class_name(c));
    GT_CUDA(cudaFree(m2));
    GT_CUDA(cudaFree(m));
    GT_CUDA(cudaFreeHost(pin));
    free(h);
}

/* Send `src` (filled by a kernel on the bound stream) and check `dst`. */
static void transfer(ptsc_ctx_t *ctx, const char *what, int *src, int *dst, int dst_on_host, int seed)
{
    cudaStream_t s = gt_stream(ctx);
    if (gt_rank == 0) {
        GT_CUDA(ptsc_tk_spin_fill(src, N, seed, 2000, s));
        GT_OK(ptsc_send(ctx, src, N, MPI_INT, 1, 0, seed));
        GT_CUDA(cudaStreamSynchronize(s));
    } else {
        GT_OK(ptsc_recv(ctx, dst, N, MPI_INT, 0, 0, seed));
        unsigned long long bad =
            dst_on_host ? gt_count_bad_host(dst, N, seed) : gt_count_bad(dst, N, seed, s);
        GT_CHECK(bad == 0, "%s: %llu bad elements", what, bad);
        printf("transfer %-28s: %s\n", what, bad ? "FAIL" : "ok");
    }
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_memory");
    if (rc)
        return rc;
    /* Before init: uncached, straight from CUDA. */
    int *pre = NULL;
    GT_CUDA(cudaMalloc((void **)&pre, 64));
    GT_CLASS(pre, PTSC_MEM_DEVICE);
    GT_CUDA(cudaFree(pre));

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
    GT_OK(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_THREAD, NULL));
    classes();

    int *m = NULL, *pin = NULL, *d = NULL, *h = malloc(N * sizeof(int));
    GT_CUDA(cudaMallocManaged((void **)&m, N * sizeof(int), cudaMemAttachGlobal));
    GT_CUDA(cudaMallocHost((void **)&pin, N * sizeof(int)));
    GT_CUDA(cudaMalloc((void **)&d, N * sizeof(int)));
    transfer(ctx, "managed -> managed", m, m, 0, 1);
    transfer(ctx, "pinned (kernel-written) -> pinned", pin, pin, 1, 2);
    transfer(ctx, "device -> pageable host", d, h, 1, 3);
    transfer(ctx, "managed -> pinned", m, pin, 1, 4);
    transfer(ctx, "pinned -> device", pin, d, 0, 5);
    GT_CUDA(cudaFree(m));
    GT_CUDA(cudaFreeHost(pin));
    GT_CUDA(cudaFree(d));
    free(h);
    GT_OK(ptsc_thread_detach());
    GT_OK(ptsc_finalize());
    return gt_finish("test_gpu_memory");
}
