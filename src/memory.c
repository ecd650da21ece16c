/*
 * Buffer classes and their per-thread cache.
 *
 * cudaPointerGetAttributes costs 100-230 ns per call on an H200, more than
 * a message's own overhead, and programs send the same buffers, or buffers
 * at many offsets into the same allocations, over and over. Each thread
 * therefore keeps two small direct-mapped tables:
 *
 *  - a range table keyed by 4 KiB block (address >> 12) for the classes
 *    that need a sync: DEVICE and MANAGED, and PINNED when nothing is
 *    staged or CUDA's memory calls are tracked. One entry covers every
 *    offset into its block, so a halo exchange at many offsets into one
 *    allocation hits after one miss per block it touches.
 *  - an exact table keyed by address for pageable HOST answers, used with
 *    PTSC_MEM_CACHE=host (the fast mode below) and, in the default mode,
 *    when CUDA's memory calls are tracked (below).
 *
 * The rule (docs/design.md, "Buffer classes"): a cached answer may be
 * stale (memory is freed and its address reused, or host memory is pinned
 * later, and ptsc is not told), so the default mode caches only answers
 * whose staleness costs an extra sync or copy, never a missing one:
 *  - DEVICE and MANAGED: both are synced and, on the staging path, staged.
 *    Whatever the address holds later, a sync is merely extra and a staging
 *    copy still works (copies use cudaMemcpyDefault, which reads and writes
 *    any memory). A CUDA-aware MPI inspects the pointer itself.
 *  - PINNED: synced, not staged. Were the address later device memory, a
 *    stale PINNED would hand a device pointer to an MPI that cannot read
 *    it; so PINNED is cached only when nothing is staged (MPI reads every
 *    class) or when CUDA's memory calls are tracked (the address cannot
 *    become device memory without a free and an allocation, each a bump).
 *    Untracked, on the staging path pinned buffers are classified afresh.
 *  - HOST: its staleness is the dangerous kind: cudaHostRegister pins
 *    memory in place, and a freed address may come back from cudaMallocHost
 *    or cudaMallocManaged; a stale HOST answer would skip the sync (and, for
 *    device memory, the staging) that the new memory needs. So HOST is
 *    cached only where ptsc learns of every such change: tracked (below),
 *    or promised by the program (PTSC_MEM_CACHE=host).
 *
 * Tracked (memtrack.c): with a device, ptsc subscribes to CUPTI's callbacks
 * of every driver call that allocates, frees, registers or maps memory, and
 * each such call bumps the epoch at its exit, which drops every entry of
 * every thread. Then the default mode also keeps HOST, per exact address
 * (never per block: see PTSC_MEM_CACHE=host below). UCX's memory-type cache
 * intercepts allocation calls too, but there the hooks are the knowledge: a
 * miss means "host", so memory allocated before its hooks (or by a call
 * they do not cover) is taken for host. Here every answer still comes from
 * cudaPointerGetAttributes, and the callbacks only invalidate: an
 * allocation made before the subscription cannot matter, because nothing is
 * cached before it (entries are stored only between ptsc_init and
 * ptsc_finalize, and init bumps the epoch after subscribing, so every older
 * entry is dead), and what the first answer after it reports is the memory
 * as it is, whoever allocated it. What must hold is that no change after
 * the subscription escapes a callback; the table in memtrack.c lists the
 * calls. Tracking is off without a device, without CUPTI, when
 * cuptiSubscribe fails (a profiler such as Nsight holds CUPTI's one
 * subscriber) and with PTSC_MEM_CACHE=off; the default mode then never
 * caches HOST, as above.
 *
 * Why a 4 KiB block is the range: the host maps memory in whole pages (4 KiB
 * is the smallest page of the platforms ptsc runs on), and device and
 * managed memory occupy reserved pages of the one unified address space, so
 * a block holding device or managed memory holds no pageable memory. Pinned
 * memory is tracked by CUDA per byte range, so a block holding a pinned
 * buffer may also hold pageable bytes: those then count as PINNED, which
 * only adds a sync. Every error of this rule is towards a sync.
 *
 * PTSC_MEM_CACHE=host also caches HOST, for exact addresses only (a block
 * may hold a registered range beside pageable bytes, so a block-wide HOST
 * entry could hide pinned memory that never changed). The program then
 * promises to call ptsc_mem_forget after it registers or allocates CUDA
 * memory (cudaHostRegister, cudaMallocHost, cudaHostAlloc, cudaMallocManaged,
 * cudaMalloc) at a time when it may have passed pageable buffers to ptsc.
 * PTSC_MEM_CACHE=off asks CUDA on every call.
 *
 * ptsc_mem_forget drops every entry of every thread by bumping a global
 * 64-bit epoch that entries are tagged with (it cannot wrap back onto an
 * old entry); tracked memory calls and ptsc_init bump the same epoch. The
 * tables are a static _Thread_local private to this file: nothing else
 * reads them.
 */
#include "ptsc_internal.h"

#include <stdint.h>

static _Thread_local ptsc__memcache_t ptsc__memcache;

/* Fibonacci hashing: buffers are often aligned to large powers of two, so
 * the low bits alone would put them all in a few slots. */
static inline unsigned memcache_slot(uintptr_t key)
{
    uint64_t x = (uint64_t)key * UINT64_C(0x9E3779B97F4A7C15);
    return (unsigned)(x >> (64 - PTSC__MEMCACHE_BITS));
}

int ptsc__memcache_keeps_host(int mode, int tracked)
{
    return mode == PTSC__MEMCACHE_HOST || (mode == PTSC__MEMCACHE_SAFE && tracked);
}

int ptsc__memcache_rule(int mode, int tracked, int staging, ptsc_memclass_t c)
{
    if (mode == PTSC__MEMCACHE_OFF)
        return PTSC__MEMKEEP_NONE;
    switch (c) {
    case PTSC_MEM_DEVICE:
    case PTSC_MEM_MANAGED:
        return PTSC__MEMKEEP_BLOCK;
    case PTSC_MEM_PINNED:
        /* While staging, a stale pinned answer would hand a device pointer
         * to an MPI that cannot read it; tracked, no address changes class
         * without a bump (a free and an allocation, both tracked). */
        return staging && !tracked ? PTSC__MEMKEEP_NONE : PTSC__MEMKEEP_BLOCK;
    default:
        /* Never per block, even when tracked: a block may hold a registered
         * range beside pageable bytes, and nothing changes there to bump. */
        return ptsc__memcache_keeps_host(mode, tracked) ? PTSC__MEMKEEP_EXACT : PTSC__MEMKEEP_NONE;
    }
}

int ptsc__memcache_lookup(const ptsc__memcache_t *mc, const void *p, uint64_t epoch, int mode, int tracked,
                          ptsc_memclass_t *cls)
{
    uintptr_t a = (uintptr_t)p, block = a >> PTSC__MEMCACHE_BLOCK_SHIFT;
    const ptsc__memcache_entry_t *e = &mc->block[memcache_slot(block)];
    /* Block entries first: they only ever say "needs a sync", so where both
     * tables answer (an address reused since), the safer answer wins. */
    if (e->key == block && e->epoch == epoch) {
        *cls = (ptsc_memclass_t)e->cls;
        return 1;
    }
    if (ptsc__memcache_keeps_host(mode, tracked)) {
        e = &mc->exact[memcache_slot(a)];
        if (e->key == a && e->epoch == epoch) {
            *cls = (ptsc_memclass_t)e->cls;
            return 1;
        }
    }
    return 0;
}

void ptsc__memcache_store(ptsc__memcache_t *mc, const void *p, uint64_t epoch, int rule, ptsc_memclass_t cls)
{
    uintptr_t a = (uintptr_t)p;
    ptsc__memcache_entry_t *e;
    if (rule == PTSC__MEMKEEP_BLOCK) {
        a >>= PTSC__MEMCACHE_BLOCK_SHIFT;
        e = &mc->block[memcache_slot(a)];
    } else if (rule == PTSC__MEMKEEP_EXACT) {
        e = &mc->exact[memcache_slot(a)];
    } else {
        return;
    }
    e->key = a;
    e->epoch = epoch;
    e->cls = (int)cls;
}

int ptsc__mem_classify(const void *p, ptsc_memclass_t *cls)
{
    /* Host-only run: no device memory can exist, and no CUDA call is made. */
    if (ptsc__g.ndevices == 0 || p == NULL) {
        *cls = PTSC_MEM_HOST;
        return PTSC_OK;
    }
    const int mode = ptsc__g.cfg.mem_cache, tracked = ptsc__g.mem_tracked;
    /* Acquire, paired with the sequentially consistent bumps: a thread that
     * reads an epoch also sees every CUDA memory call whose exit (tracked)
     * made it, so what CUDA answers below is no older than the epoch it is
     * stored under. A thread ordered after ptsc_mem_forget or a tracked call
     * (by a barrier, a lock, a message) reads that epoch or a later one; an
     * unordered one may still hit an old entry, which is the program's race
     * (and PTSC_MEM_CACHE=host orders by contract). On x86 this is a plain
     * load. */
    uint64_t epoch = atomic_load_explicit(&ptsc__g.mem_epoch, memory_order_acquire);
    if (ptsc__memcache_lookup(&ptsc__memcache, p, epoch, mode, tracked, cls))
        return PTSC_OK;
    ptsc_memclass_t c;
    int rc = ptsc__gpu_classify(p, &c);
    if (rc != PTSC_OK)
        return rc;
    ptsc__memcache_store(&ptsc__memcache, p, epoch, ptsc__memcache_rule(mode, tracked, ptsc__g.staging, c),
                         c);
    *cls = c;
    return PTSC_OK;
}

/*
 * Managed memory is staged as well as device memory. A non-CUDA-aware MPI
 * could read it from the host, but only through page faults that migrate
 * it page by page (slow for large messages), and on GPUs without
 * concurrent managed access the host may not touch it while any kernel
 * runs, which the thread scope does not exclude. Staging copies it on the
 * thread's stream instead, which is ordered and fast, and keeps the rule
 * "a stale DEVICE/MANAGED cache entry only costs a copy" true.
 * Pinned host memory is readable by any MPI once synchronised: not staged.
 */
static int device_class(ptsc_memclass_t c) { return c == PTSC_MEM_DEVICE || c == PTSC_MEM_MANAGED; }

/*
 * The path rule, for every caller:
 * - staging on (MPI is not CUDA-aware, or PTSC_STAGING=always): device and
 *   managed buffers are staged for MPI;
 * - a CUDA-aware MPI takes device buffers directly, except a contiguous
 *   message below PTSC_DIRECT_MIN (staged: cheaper than MPI's own device
 *   path for small sizes);
 * - a combination on the host reads device memory only through a staged
 *   copy, on any MPI (managed memory it reads in place, once synchronised);
 * - with no device and PTSC_STAGING=always, host buffers exercise the
 *   staging code: a contiguous message of an even thread index (so that
 *   the odd ones keep the direct path in the same run) and every plain MPI
 *   buffer of the interposer.
 */
int ptsc__mem_staged(ptsc_memclass_t c, ptsc__use_t use, size_t bytes, int contig, int index)
{
    switch (use) {
    case PTSC__FOR_MESSAGE:
        if (bytes == 0)
            return 0;
        if (device_class(c))
            return ptsc__g.staging || (contig && bytes < ptsc__g.direct_min);
        return c == PTSC_MEM_HOST && ptsc__g.stage_host && contig && index % 2 == 0;
    case PTSC__FOR_HOST:
        return (ptsc__g.staging && device_class(c)) || c == PTSC_MEM_DEVICE;
    case PTSC__FOR_PLAIN_MPI:
        return (ptsc__g.staging && device_class(c)) || (ptsc__g.stage_host && c == PTSC_MEM_HOST);
    case PTSC__FOR_MPI:
    default:
        return ptsc__g.staging && device_class(c);
    }
}

/*
 * Public. Between ptsc_init and ptsc_finalize it uses the cache. Before
 * init (and after finalize) it still answers, without the cache, by asking
 * CUDA directly; without a driver or device that answer is PTSC_MEM_HOST.
 * A NULL pointer is PTSC_MEM_HOST.
 */
int ptsc_mem_class(const void *ptr, ptsc_memclass_t *cls)
{
    ptsc_memclass_t c;
    int rc;
    if (cls == NULL)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_mem_class: cls (the output pointer) is NULL");
    if (atomic_load_explicit(&ptsc__g.state, memory_order_acquire) == PTSC__STATE_READY)
        rc = ptsc__mem_classify(ptr, &c);
    else
        rc = ptsc__gpu_classify(ptr, &c);
    if (rc != PTSC_OK)
        return rc;
    *cls = c;
    return PTSC_OK;
}

int ptsc_mem_forget(void)
{
    atomic_fetch_add(&ptsc__g.mem_epoch, 1u);
    return PTSC_OK;
}
