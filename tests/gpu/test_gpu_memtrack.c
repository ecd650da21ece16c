/*
 * Tracked CUDA memory calls (src/memtrack.c): with tracking active, the
 * default PTSC_MEM_CACHE=safe caches pageable answers per address, and
 * every CUDA memory call drops them at once, with no ptsc_mem_forget. One
 * rank; links ptsc_internal to read ptsc__g.mem_tracked and the epoch.
 *
 *  - malloc'd p -> HOST twice, the second from the cache (the epoch did not
 *    move and the call is far cheaper than cudaPointerGetAttributes);
 *  - cudaHostRegister(p) -> PINNED at once; cudaHostUnregister -> HOST;
 *  - cudaMallocHost / cudaFreeHost, then malloc'd memory (often the same
 *    address) -> HOST; cudaMalloc -> DEVICE; each memory call bumps the epoch.
 * Hits are shown by the epoch staying put between lookups and by the time
 * per call (printed, not asserted).
 * Without tracking (a profiler holds CUPTI) the classes are still checked,
 * and the test says so.
 */
#include "gpu_test.h"

#include "ptsc_internal.h"

static unsigned long long epoch(void) { return atomic_load(&ptsc__g.mem_epoch); }

/* ns per ptsc_mem_class of `p`, over n calls. */
static double ns_per_class(const void *p, int n)
{
    ptsc_memclass_t c;
    double t0 = gt_now_ms();
    for (int i = 0; i < n; i++)
        (void)ptsc_mem_class(p, &c);
    return (gt_now_ms() - t0) * 1e6 / n;
}

int main(int argc, char **argv)
{
    int rc = gt_require_gpu("test_gpu_memtrack");
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "1", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    const int tracked = ptsc__g.mem_tracked;
    printf("test_gpu_memtrack: CUDA memory calls %s (%s)\n", tracked ? "tracked" : "NOT tracked",
           ptsc__memtrack_status());

    size_t big = 16u << 20;
    char *p = malloc(big);
    GT_CHECK(p != NULL, "malloc");
    memset(p, 1, big);
    unsigned long long e0 = epoch();
    GT_CLASS(p, PTSC_MEM_HOST);
    GT_CLASS(p, PTSC_MEM_HOST); /* from the cache when tracked */
    GT_CHECK(epoch() == e0, "the epoch moved without a memory call: %llu -> %llu", e0, epoch());
    const int n = 1000000;
    double host_ns = ns_per_class(p, n);
    struct cudaPointerAttributes a;
    double t0 = gt_now_ms();
    for (int i = 0; i < n / 10; i++)
        (void)cudaPointerGetAttributes(&a, p);
    double cuda_ns = (gt_now_ms() - t0) * 1e6 / (n / 10);
    printf(
        "test_gpu_memtrack: ptsc_mem_class(pageable) %.1f ns/call, cudaPointerGetAttributes %.1f ns/call\n",
        host_ns, cuda_ns);
    /* Printed, not asserted (timing): tracked, the first is a cache hit (a hash). */

    /* Registered in place: pinned at once, with no ptsc_mem_forget. */
    GT_CUDA(cudaHostRegister(p, big, cudaHostRegisterDefault));
    if (tracked)
        GT_CHECK(epoch() > e0, "cudaHostRegister did not bump the epoch (%llu)", e0);
    GT_CLASS(p, PTSC_MEM_PINNED);
    GT_CLASS(p + 4096, PTSC_MEM_PINNED);
    GT_CUDA(cudaHostUnregister(p));
    GT_CLASS(p, PTSC_MEM_HOST);
    GT_CLASS(p, PTSC_MEM_HOST);
    free(p);

    /* Pinned allocation freed, then plain malloc (often at the same address). */
    char *pin = NULL;
    unsigned long long e1 = epoch();
    GT_CUDA(cudaMallocHost((void **)&pin, big));
    GT_CLASS(pin, PTSC_MEM_PINNED);
    GT_CUDA(cudaFreeHost(pin));
    if (tracked)
        GT_CHECK(epoch() >= e1 + 2, "cudaMallocHost + cudaFreeHost bumped the epoch %llu times",
                 epoch() - e1);
    char *q = malloc(big);
    GT_CHECK(q != NULL, "malloc");
    printf("test_gpu_memtrack: malloc after cudaFreeHost %s the address\n",
           q == pin ? "reused" : "did not reuse");
    GT_CLASS(q, PTSC_MEM_HOST);
    GT_CLASS(q, PTSC_MEM_HOST);

    /* A pageable address cached, then device memory. */
    int *d = NULL;
    GT_CUDA(cudaMalloc((void **)&d, 1 << 20));
    GT_CLASS(d, PTSC_MEM_DEVICE);
    GT_CLASS(d + 1000, PTSC_MEM_DEVICE);
    GT_CUDA(cudaFree(d));
    /* Managed memory too. */
    int *m = NULL;
    GT_CUDA(cudaMallocManaged((void **)&m, 1 << 20, cudaMemAttachGlobal));
    GT_CLASS(m, PTSC_MEM_MANAGED);
    GT_CUDA(cudaFree(m));
    GT_CLASS(q, PTSC_MEM_HOST);
    free(q);

    GT_OK(ptsc_finalize());
    GT_CHECK(ptsc__g.mem_tracked == 0, "tracking still recorded after ptsc_finalize");
    return gt_finish("test_gpu_memtrack");
}
