/*
 * Buffer classes and their per-thread cache.
 *
 * cudaPointerGetAttributes costs 140-230 ns per call on an H200, more than
 * a stream sync's fixed cost, and programs send the same few buffers over
 * and over. Each thread therefore keeps a small direct-mapped cache keyed
 * by the exact pointer.
 *
 * Why a stale entry is harmless: memory can be freed and its address
 * reused for another class at any time, and ptsc is not told. The cache
 * therefore stores only classes whose staleness can cost an extra sync or
 * an extra staging copy, never a missing one:
 *  - DEVICE and MANAGED: both need the sync and (on the staging path) are
 *    staged. Whatever the address holds later, a sync is merely extra and
 *    a staging copy still works, because copies use cudaMemcpyDefault,
 *    which reads and writes any kind of memory.
 *  - PINNED: needs the sync but is not staged. If the address later held
 *    device memory, a stale PINNED would hand a device pointer to an MPI
 *    that cannot read it; so PINNED is cached only when nothing is staged
 *    (CUDA-aware MPI reads any class). On the staging path pinned buffers
 *    are classified afresh each time.
 *  - HOST (pageable) is never cached: an address that becomes pinned
 *    (cudaHostRegister) or device memory must be seen at once.
 * ptsc_mem_forget drops every entry of every thread by bumping a global
 * epoch that entries are tagged with; it is optional.
 *
 * The cache is a static _Thread_local array private to this file rather
 * than a field of ptsc__tls_t: nothing else reads it, and it keeps 4 KiB
 * out of the shared thread-local block.
 */
#include "ptsc_internal.h"

#include <stdint.h>

#define PTSC__MEMCACHE_BITS 8
#define PTSC__MEMCACHE_SIZE (1u << PTSC__MEMCACHE_BITS)

typedef struct {
    const void *p;  /* exact pointer; NULL: empty (NULL is never looked up) */
    unsigned epoch; /* ptsc__g.mem_epoch when stored */
    int cls;        /* ptsc_memclass_t */
} ptsc__memcache_entry_t;

static _Thread_local ptsc__memcache_entry_t ptsc__memcache[PTSC__MEMCACHE_SIZE];

/* Fibonacci hashing: buffers are often aligned to large powers of two, so
 * the low bits alone would put them all in a few slots. */
static inline unsigned ptsc__memcache_slot(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15);
    return (unsigned)(x >> (64 - PTSC__MEMCACHE_BITS));
}

/* Whether a class may be cached on this process's transfer path (see above). */
static inline int ptsc__memcache_keeps(ptsc_memclass_t c)
{
    return c == PTSC_MEM_DEVICE || c == PTSC_MEM_MANAGED || (c == PTSC_MEM_PINNED && !ptsc__g.staging);
}

int ptsc__mem_classify(const void *p, ptsc_memclass_t *cls)
{
    ptsc__memcache_entry_t *e;
    ptsc_memclass_t c;
    unsigned epoch;
    int rc;

    /* Host-only run: no device memory can exist, and no CUDA call is made. */
    if (ptsc__g.ndevices == 0 || p == NULL) {
        *cls = PTSC_MEM_HOST;
        return PTSC_OK;
    }
    /* Relaxed is enough: a thread ordered after ptsc_mem_forget (by a
     * barrier, a lock, a message) sees the new epoch by coherence; an
     * unordered one may hit an old entry, which is harmless (see above). */
    epoch = atomic_load_explicit(&ptsc__g.mem_epoch, memory_order_relaxed);
    e = &ptsc__memcache[ptsc__memcache_slot(p)];
    if (e->p == p && e->epoch == epoch) {
        *cls = (ptsc_memclass_t)e->cls;
        return PTSC_OK;
    }
    rc = ptsc__gpu_classify(p, &c);
    if (rc != PTSC_OK)
        return rc;
    if (ptsc__memcache_keeps(c)) {
        e->p = p;
        e->epoch = epoch;
        e->cls = (int)c;
    } else if (e->p == p) {
        /* The address changed class to one that is not kept: drop it. */
        e->p = NULL;
    }
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
int ptsc__mem_needs_staging(ptsc_memclass_t c)
{
    return ptsc__g.staging && (c == PTSC_MEM_DEVICE || c == PTSC_MEM_MANAGED);
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
