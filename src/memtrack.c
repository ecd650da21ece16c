/*
 * Tracking CUDA's memory calls for the class cache (memory.c).
 *
 * A cached pageable HOST answer goes stale when the address becomes CUDA
 * memory: cudaHostRegister pins it in place, or it is freed and comes back
 * from cudaMallocHost, cudaMallocManaged, cudaMalloc or a virtual-memory
 * mapping. Every such change goes through a driver API call, so one CUPTI
 * callback subscriber on the driver domain sees them all, whoever makes
 * them (the program, a library, the CUDA runtime on the program's behalf,
 * ptsc's own staging buffers), and bumps ptsc__g.mem_epoch, which drops
 * every thread's cache entries (memory.c). With that in place the default
 * mode (PTSC_MEM_CACHE=safe) caches pageable answers per exact address too.
 *
 * Exit, not entry: the epoch moves after the call's effect is in place, so
 * a classification that read the old epoch (and may have seen the memory
 * before the change) is stored under an epoch that is already dead, and a
 * classification that reads the new epoch runs after the change. The
 * callback's fetch-add is sequentially consistent (a release) and
 * memory.c's load an acquire, so a thread that sees the new epoch also sees
 * the change in CUDA's tables.
 *
 * Cost: only the callback ids of the table below are enabled, never the
 * whole domain, so kernel launches, copies and syncs run no callback; a
 * memory call pays one CUPTI dispatch and one atomic add, and every thread
 * then misses once per buffer. Any thread may make these calls; the
 * callback runs on that thread, touches nothing but the atomic epoch, and
 * so needs no lock. ptsc's own pinned staging buffers (cudaHostAlloc at
 * attach, cudaFreeHost at detach) bump it too: rare, and harmless.
 *
 * CUPTI has one subscriber per process (CUDA 13.0): where a tool holds it
 * already (Nsight Systems, Nsight Compute, compute-sanitizer, cuda-gdb, a
 * profiler linked into the program), cuptiSubscribe fails, tracking stays
 * off and memory.c keeps its untracked rule. Conversely, while ptsc holds
 * it, a CUPTI client that subscribes later (torch.profiler's kineto, for
 * one) fails; PTSC_MEM_CACHE=off never subscribes.
 *
 * Built without CUPTI (PTSC_HAVE_CUPTI unset: CMake found no CUDA::cupti),
 * tracking is never active.
 */
#include "ptsc_internal.h"

#include <stdio.h>

static char ptsc__memtrack_why[160] = "not started";

#ifdef PTSC_HAVE_CUPTI
#include <cupti.h>

/*
 * Every driver call that allocates, frees, registers, unregisters, maps or
 * unmaps memory in the process's unified address space, from
 * cupti_driver_cbid.h (CUDA 13.0), with its _v2 and per-thread-stream
 * (_ptsz) variants. Only a call that makes an address CUDA memory can make a
 * cached HOST answer wrong; the frees, unmaps and trims are here as well so
 * that block entries of released memory go too (a stale one costs an extra
 * sync or copy, never a missing one). The runtime's cudaMalloc* and
 * cudaHostRegister/Unregister, cudaFree*, cudaMallocAsync and cudaFreeAsync
 * reach the driver through these.
 */
static const CUpti_CallbackId ptsc__memtrack_cbids[] = {
    /* Pinned host memory: registered in place, or allocated pinned. */
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    /* Device and managed memory. */
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    /* Stream-ordered allocation (a pool grows inside these calls). */
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
    /* Virtual memory management: physical memory mapped at an address. */
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    /* Another process's memory mapped here (IPC, pool export). */
    CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle,
    CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2,
    CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer,
    /* Graph memory nodes: the address is fixed when the node is made. */
    CUPTI_DRIVER_TRACE_CBID_cuGraphAddMemAllocNode,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGraphMemTrim,
};

static CUpti_SubscriberHandle ptsc__memtrack_sub;

static void CUPTIAPI ptsc__memtrack_cb(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                       const void *cbdata)
{
    const CUpti_CallbackData *d = cbdata;
    (void)userdata;
    (void)cbid;
    /* Only the ids above are enabled; the domain check is for the reader. */
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && d->callbackSite == CUPTI_API_EXIT)
        atomic_fetch_add(&ptsc__g.mem_epoch, 1u);
}

static void ptsc__memtrack_failed(const char *what, CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == NULL)
        s = "unknown CUPTI error";
    snprintf(ptsc__memtrack_why, sizeof ptsc__memtrack_why, "%s: %s%s", what, s,
             r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                 ? " (a tool such as Nsight or compute-sanitizer holds CUPTI's one subscriber)"
                 : "");
    ptsc__log(PTSC__LOG_INFO,
              "CUDA memory calls not tracked (%s): pageable buffers are classified on every call",
              ptsc__memtrack_why);
}

int ptsc__memtrack_start(void)
{
    if (ptsc__memtrack_sub != NULL)
        return 1;
    CUpti_SubscriberHandle sub = NULL;
    CUptiResult r = cuptiSubscribe(&sub, ptsc__memtrack_cb, NULL);
    if (r != CUPTI_SUCCESS) {
        ptsc__memtrack_failed("cuptiSubscribe", r);
        return 0;
    }
    for (size_t i = 0; i < sizeof ptsc__memtrack_cbids / sizeof ptsc__memtrack_cbids[0]; i++) {
        r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, ptsc__memtrack_cbids[i]);
        if (r != CUPTI_SUCCESS) {
            /* A missing id would leave a hole: all or nothing. */
            (void)cuptiUnsubscribe(sub);
            ptsc__memtrack_failed("cuptiEnableCallback", r);
            return 0;
        }
    }
    ptsc__memtrack_sub = sub;
    snprintf(ptsc__memtrack_why, sizeof ptsc__memtrack_why, "tracked through CUPTI (%zu driver calls)",
             sizeof ptsc__memtrack_cbids / sizeof ptsc__memtrack_cbids[0]);
    return 1;
}

void ptsc__memtrack_stop(void)
{
    if (ptsc__memtrack_sub == NULL)
        return;
    /* No callback runs after this returns; one running now only bumps the
     * epoch, which lives as long as the library. */
    (void)cuptiUnsubscribe(ptsc__memtrack_sub);
    ptsc__memtrack_sub = NULL;
    snprintf(ptsc__memtrack_why, sizeof ptsc__memtrack_why, "stopped (ptsc finalized)");
}

#else /* !PTSC_HAVE_CUPTI */

int ptsc__memtrack_start(void)
{
    snprintf(ptsc__memtrack_why, sizeof ptsc__memtrack_why, "ptsc was built without CUPTI");
    return 0;
}

void ptsc__memtrack_stop(void) {}

#endif

const char *ptsc__memtrack_status(void) { return ptsc__memtrack_why; }
