/*
 * The GPU layer on the CUDA runtime API. Plain C: only cuda_runtime_api.h,
 * no kernels, so the host compiler builds it and it links to cudart.
 *
 * Every failing CUDA call is turned into PTSC_ERR_CUDA with CUDA's own name
 * and message in the thread's detail string, after cudaGetLastError() has
 * cleared the (non-sticky) error, so that a later, unrelated CUDA call in
 * the program does not report our failure as its own (NCCL's CUDACHECK).
 * Errors that only mean "a stream is being captured" become
 * PTSC_ERR_CAPTURING instead, so that callers can tell the user what to do.
 *
 * This file never uses stream 0: every call names its stream explicitly
 * (cudaStreamPerThread, cudaStreamLegacy or an owned handle), so it behaves
 * the same whether or not it is compiled with per-thread default streams.
 */
#include "ptsc_internal.h"

#include <cuda.h> /* the driver's types and flags of the stream memory operations only */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* Capture-related errors: the operation was refused because of a capture. */
static int ptsc__gpu_is_capture_error(cudaError_t e)
{
    return e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureInvalidated ||
           e == cudaErrorStreamCaptureImplicit || e == cudaErrorStreamCaptureWrongThread ||
           e == cudaErrorStreamCaptureUnmatched || e == cudaErrorStreamCaptureUnjoined ||
           e == cudaErrorStreamCaptureIsolation || e == cudaErrorStreamCaptureMerge;
}

/* Errors that mean "no usable GPU here": host-only mode, not a failure. */
static int ptsc__gpu_is_absent_error(cudaError_t e)
{
    return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary ||
           e == cudaErrorDevicesUnavailable || e == cudaErrorSystemDriverMismatch ||
           e == cudaErrorCompatNotSupportedOnDevice || e == cudaErrorInitializationError ||
           e == cudaErrorNotPermitted || e == cudaErrorSystemNotReady ||
           e == cudaErrorCallRequiresNewerDriver;
}

/* Record a CUDA failure of `what` and return the matching ptsc status. */
static int ptsc__gpu_fail(cudaError_t e, const char *what)
{
    (void)cudaGetLastError();
    if (ptsc__gpu_is_capture_error(e))
        return ptsc__err(PTSC_ERR_CAPTURING, "%s: %s (%s): a stream is being graph-captured", what,
                         cudaGetErrorString(e), cudaGetErrorName(e));
    return ptsc__err(PTSC_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define PTSC__CUDA_TRY(call, what)                  \
    do {                                            \
        cudaError_t ptsc__e = (call);               \
        if (ptsc__e != cudaSuccess)                 \
            return ptsc__gpu_fail(ptsc__e, (what)); \
    } while (0)

int ptsc__gpu_init(int *ndevices)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (!ptsc__gpu_is_absent_error(e))
            return ptsc__gpu_fail(e, "cudaGetDeviceCount");
        /* A node without a driver or device runs host-only: every buffer
         * is then pageable host memory, since none other can exist. */
        ptsc__log(
            e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? PTSC__LOG_INFO : PTSC__LOG_WARN,
            "no usable CUDA device (%s: %s); running host-only", cudaGetErrorName(e), cudaGetErrorString(e));
        n = 0;
    }
    *ndevices = n;
    /* Track CUDA's memory calls (memtrack.c), so the class cache may keep
     * pageable answers (memory.c). Only with a device: without one no CUDA
     * memory exists, nothing is classified, and CUPTI is not touched. Only
     * in the default mode: `off` caches nothing and `host` has the
     * program's promise instead; both leave CUPTI's one subscriber to other
     * tools. */
    ptsc__g.mem_tracked = n > 0 && ptsc__g.cfg.mem_cache == PTSC__MEMCACHE_SAFE && ptsc__memtrack_start();
    return PTSC_OK;
}

static void grave_flush(void); /* pinned frees held back (below) */
static atomic_int frees_held;

void ptsc__gpu_finalize(void)
{
    /* Owned streams and staging buffers belong to contexts and are freed at
     * detach. No cudaDeviceReset: the program may go on using CUDA after
     * ptsc_finalize. Tracking stops here (a later init starts it again). */
    ptsc__memtrack_stop();
    ptsc__g.mem_tracked = 0;
    atomic_store(&frees_held, 0);
    grave_flush();
}

int ptsc__gpu_describe(int d, char *buf, size_t n)
{
    struct cudaDeviceProp p;
    if (buf == NULL || n == 0)
        return ptsc__err(PTSC_ERR_ARG, "ptsc__gpu_describe: empty output buffer");
    PTSC__CUDA_TRY(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    p.name[sizeof p.name - 1] = '\0';
    snprintf(buf, n, "%s, cc %d.%d, %.0f GiB, %d SMs, PCI %04x:%02x:%02x.0", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount,
             (unsigned)p.pciDomainID, (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
    return PTSC_OK;
}

void ptsc__gpu_versions(int *runtime, int *driver)
{
    int r = 0, d = 0;
    if (cudaRuntimeGetVersion(&r) != cudaSuccess) {
        (void)cudaGetLastError();
        r = 0;
    }
    /* Reports 0 (with success) when no driver is installed. */
    if (cudaDriverGetVersion(&d) != cudaSuccess) {
        (void)cudaGetLastError();
        d = 0;
    }
    if (runtime)
        *runtime = r;
    if (driver)
        *driver = d;
}

int ptsc__gpu_set_device(int device)
{
    PTSC__CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    return PTSC_OK;
}

int ptsc__gpu_stream_bind(int kind, void **stream)
{
    cudaStream_t s;
    switch (kind) {
    case PTSC_STREAM_PER_THREAD:
        s = cudaStreamPerThread;
        break;
    case PTSC_STREAM_OWNED:
        /* Blocking (cudaStreamDefault), so a legacy-stream sync (the global
         * scope) covers it, as it covers the per-thread streams. */
        PTSC__CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamDefault), "cudaStreamCreateWithFlags");
        break;
    case PTSC_STREAM_LEGACY:
        s = cudaStreamLegacy;
        break;
    default:
        return ptsc__err(PTSC_ERR_ARG, "ptsc__gpu_stream_bind: unknown stream kind %d", kind);
    }
    *stream = (void *)s;
    return PTSC_OK;
}

void ptsc__gpu_stream_release(int kind, void *stream)
{
    if (kind == PTSC_STREAM_OWNED && stream != NULL) {
        /* Called at detach or thread exit, possibly while the runtime is
         * unloading at process exit: nothing useful can be done on error. */
        if (cudaStreamDestroy((cudaStream_t)stream) != cudaSuccess)
            (void)cudaGetLastError();
    }
}

/* Waits for the work queued on `stream` only: on a per-thread or owned
 * stream it returns while earlier legacy-stream work still runs (the thread
 * scope records an event instead, see sync.c). */
int ptsc__gpu_stream_sync(void *stream)
{
    PTSC__CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
    return PTSC_OK;
}

int ptsc__gpu_legacy_sync(void)
{
    PTSC__CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(cudaStreamLegacy)");
    return PTSC_OK;
}

int ptsc__gpu_device_sync(void)
{
    PTSC__CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return PTSC_OK;
}

/*
 * Capture status of one stream, through cudaStreamIsCapturing only: that
 * query is documented as legal during capture and never invalidates one.
 * On cudaStreamLegacy it fails with cudaErrorStreamCaptureImplicit while
 * any blocking stream of the current device (every per-thread default
 * stream and every stream created without cudaStreamNonBlocking, whatever
 * thread owns it) is capturing; that is exactly "using the legacy stream
 * now would break a capture", so it counts as capturing. An invalidated
 * capture counts too: the stream stays unusable until its EndCapture.
 */
static int ptsc__gpu_stream_capturing(cudaStream_t s, int *capturing, const char *what)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &st);
    if (e == cudaErrorStreamCaptureImplicit) {
        (void)cudaGetLastError();
        *capturing = 1;
        return PTSC_OK;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ptsc__err(PTSC_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    *capturing = st != cudaStreamCaptureStatusNone;
    return PTSC_OK;
}

/*
 * What each scope covers (the scope must be resolved: AUTO and DEFAULT are
 * treated like GLOBAL, the broadest check that is still cheap):
 *
 *  THREAD  The bound stream. Recording an event on a stream that is not
 *          capturing and waiting for it, or syncing that stream, is legal
 *          while other streams capture (CUDA forbids syncing the capturing
 *          stream itself, the legacy stream while a blocking stream
 *          captures, and the device while any stream captures). The event's
 *          implicit dependency is on the legacy stream, which is never
 *          captured itself, so one query is complete.
 *  GLOBAL  The bound stream and cudaStreamLegacy. The legacy query reports
 *          every capture on a blocking stream of the device, in any thread
 *          and any capture mode, which is the whole set of captures that a
 *          legacy-stream sync would break (non-blocking streams do not
 *          synchronise with it).
 *  DEVICE  Same two queries. Not covered: a capture running in ANOTHER
 *          thread on a stream created with cudaStreamNonBlocking. CUDA has
 *          no query for "some stream of this context is capturing", and the
 *          handles of the program's own streams are unknown to ptsc. Such a
 *          cudaDeviceSynchronize fails with a capture error, which the sync
 *          functions above report as PTSC_ERR_CAPTURING, but CUDA then has
 *          invalidated that other capture. Programs that capture on
 *          non-blocking streams should not use the device scope.
 *
 * Cost: one query (~0.1 us) for THREAD, two for GLOBAL and DEVICE.
 */
int ptsc__gpu_capturing(void *stream, int scope, int *capturing)
{
    int c = 0, rc;
    if (scope == PTSC_SCOPE_NONE) {
        *capturing = 0;
        return PTSC_OK;
    }
    rc = ptsc__gpu_stream_capturing((cudaStream_t)stream, &c, "cudaStreamIsCapturing(bound stream)");
    if (rc != PTSC_OK)
        return rc;
    if (!c && scope != PTSC_SCOPE_THREAD && (cudaStream_t)stream != cudaStreamLegacy) {
        rc = ptsc__gpu_stream_capturing(cudaStreamLegacy, &c, "cudaStreamIsCapturing(cudaStreamLegacy)");
        if (rc != PTSC_OK)
            return rc;
    }
    *capturing = c;
    return PTSC_OK;
}

int ptsc__gpu_classify(const void *p, ptsc_memclass_t *cls)
{
    struct cudaPointerAttributes a;
    cudaError_t e;
    if (p == NULL) {
        *cls = PTSC_MEM_HOST;
        return PTSC_OK;
    }
    memset(&a, 0, sizeof a);
    e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        /* Drivers before CUDA 11 answered cudaErrorInvalidValue for plain
         * host pointers; without a driver or device no device memory can
         * exist. Both mean pageable host memory. */
        if (e == cudaErrorInvalidValue || ptsc__gpu_is_absent_error(e)) {
            *cls = PTSC_MEM_HOST;
            return PTSC_OK;
        }
        return ptsc__err(PTSC_ERR_CUDA, "cudaPointerGetAttributes(%p): %s (%s)", p, cudaGetErrorString(e),
                         cudaGetErrorName(e));
    }
    switch (a.type) {
    case cudaMemoryTypeDevice:
        *cls = PTSC_MEM_DEVICE;
        break;
    case cudaMemoryTypeManaged:
        *cls = PTSC_MEM_MANAGED;
        break;
    case cudaMemoryTypeHost:
        *cls = PTSC_MEM_PINNED;
        break;
    default: /* cudaMemoryTypeUnregistered */
        *cls = PTSC_MEM_HOST;
        break;
    }
    return PTSC_OK;
}

int ptsc__gpu_host_alloc(size_t n, void **p)
{
    void *q = NULL;
    /* Portable: pinned for every device's context, so a buffer stays valid
     * whatever device the owning thread uses. */
    PTSC__CUDA_TRY(cudaHostAlloc(&q, n, cudaHostAllocPortable), "cudaHostAlloc");
    *p = q;
    return PTSC_OK;
}

/* Pinned frees held back. cudaFreeHost waits for the device to go idle,
 * holding the context's lock, and the device does not go idle while a
 * stream waits on a word of an enqueued operation that a thread stuck
 * behind that lock has still to move (docs/design.md, "Stream-ordered
 * calls"). While enqueue.c holds frees (operations armed), the staging
 * pools' frees are kept here and done by the first free after the hold
 * ends, or at ptsc_finalize. */
static atomic_int frees_held;
static pthread_mutex_t grave_mu = PTHREAD_MUTEX_INITIALIZER;
static void **grave;
static size_t ngrave, capgrave;

/* hold_mu orders a free against the start of a hold: a hold waits for a
 * free that found none to finish, so no stream starts waiting on a word
 * while cudaFreeHost waits for the device. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;

void ptsc__gpu_frees_hold(int delta)
{
    if (delta > 0) {
        pthread_mutex_lock(&hold_mu);
        atomic_fetch_add(&frees_held, delta);
        pthread_mutex_unlock(&hold_mu);
    } else {
        atomic_fetch_add(&frees_held, delta);
    }
}

int ptsc__gpu_frees_held(void) { return atomic_load(&frees_held) > 0; }

static void free_now(void *p)
{
    if (cudaFreeHost(p) != cudaSuccess)
        (void)cudaGetLastError();
}

static void grave_flush(void)
{
    pthread_mutex_lock(&grave_mu);
    if (!ngrave) {
        pthread_mutex_unlock(&grave_mu);
        return;
    }
    void **g = grave;
    size_t n = ngrave;
    grave = NULL;
    ngrave = capgrave = 0;
    pthread_mutex_unlock(&grave_mu);
    for (size_t i = 0; i < n; i++)
        free_now(g[i]);
    free(g);
}

void ptsc__gpu_host_free(void *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&hold_mu);
    if (atomic_load(&frees_held) > 0) {
        pthread_mutex_lock(&grave_mu);
        if (ngrave == capgrave) {
            size_t cap = capgrave ? 2 * capgrave : 16;
            void **g = realloc(grave, cap * sizeof *g);
            if (g) {
                grave = g;
                capgrave = cap;
            }
        }
        int kept = ngrave < capgrave;
        if (kept)
            grave[ngrave++] = p;
        pthread_mutex_unlock(&grave_mu);
        if (kept) {
            pthread_mutex_unlock(&hold_mu);
            return; /* out of memory for the list: freed now, as before */
        }
    }
    free_now(p);
    grave_flush(); /* what was kept while the hold lasted */
    pthread_mutex_unlock(&hold_mu);
}

int ptsc__gpu_copy_async(void *dst, const void *src, size_t n, void *stream)
{
    PTSC__CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)stream), "cudaMemcpyAsync");
    return PTSC_OK;
}

int ptsc__gpu_copy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t rows, void *stream)
{
    PTSC__CUDA_TRY(
        cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault, (cudaStream_t)stream),
        "cudaMemcpy2DAsync");
    return PTSC_OK;
}

int ptsc__gpu_event_create(void **ev)
{
    cudaEvent_t e;
    /* No timing: cheaper to record and to query. */
    PTSC__CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    *ev = (void *)e;
    return PTSC_OK;
}

void ptsc__gpu_event_destroy(void *ev)
{
    if (ev != NULL && cudaEventDestroy((cudaEvent_t)ev) != cudaSuccess)
        (void)cudaGetLastError();
}

/* On a blocking stream the event also waits for the legacy-stream work
 * queued before it (CUDA's implicit synchronisation with the legacy stream);
 * on cudaStreamLegacy, for every blocking stream's earlier work. */
int ptsc__gpu_event_record(void *ev, void *stream)
{
    PTSC__CUDA_TRY(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream), "cudaEventRecord");
    return PTSC_OK;
}

int ptsc__gpu_event_done(void *ev, int *done)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess) {
        *done = 1;
        return PTSC_OK;
    }
    if (e == cudaErrorNotReady) {
        *done = 0;
        return PTSC_OK;
    }
    return ptsc__gpu_fail(e, "cudaEventQuery");
}

/* Later work queued on `stream` waits for the event's work (no host wait). */
int ptsc__gpu_stream_wait(void *stream, void *ev)
{
    PTSC__CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0), "cudaStreamWaitEvent");
    return PTSC_OK;
}

int ptsc__gpu_event_sync(void *ev)
{
    PTSC__CUDA_TRY(cudaEventSynchronize((cudaEvent_t)ev), "cudaEventSynchronize");
    return PTSC_OK;
}

/* ---- Stream memory operations (enqueue.c) ---------------------------------
 * cuStreamWriteValue32 / cuStreamWaitValue32 are driver calls; the runtime
 * hands out their entry points (cudaGetDriverEntryPoint*), so libptsc still
 * links cudart only. The types are the driver's own (cuda.h, types only). */
typedef CUresult (*ptsc__memop_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static ptsc__memop_fn ptsc__write32_fn, ptsc__wait32_fn;
static pthread_once_t ptsc__memop_once = PTHREAD_ONCE_INIT;

static void ptsc__memop_load(void)
{
    enum cudaDriverEntryPointQueryResult q1 = cudaDriverEntryPointSymbolNotFound, q2 = q1;
    void *w = NULL, *v = NULL;
#if CUDART_VERSION >= 12050
    cudaError_t e1 =
        cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000, cudaEnableDefault, &q1);
    cudaError_t e2 =
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &v, 12000, cudaEnableDefault, &q2);
#else
    cudaError_t e1 = cudaGetDriverEntryPoint("cuStreamWriteValue32", &w, cudaEnableDefault, &q1);
    cudaError_t e2 = cudaGetDriverEntryPoint("cuStreamWaitValue32", &v, cudaEnableDefault, &q2);
#endif
    if (e1 != cudaSuccess || e2 != cudaSuccess || q1 != cudaDriverEntryPointSuccess ||
        q2 != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return;
    }
    ptsc__write32_fn = (ptsc__memop_fn)w;
    ptsc__wait32_fn = (ptsc__memop_fn)v;
}

static int ptsc__memop_ready(const char *what)
{
    pthread_once(&ptsc__memop_once, ptsc__memop_load);
    if (!ptsc__write32_fn || !ptsc__wait32_fn)
        return ptsc__err(PTSC_ERR_UNSUPPORTED,
                         "%s: the driver gives no cuStreamWriteValue32/cuStreamWaitValue32", what);
    return PTSC_OK;
}

static int ptsc__memop_fail(CUresult r, const char *what)
{
    (void)cudaGetLastError();
    if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        return ptsc__err(PTSC_ERR_CAPTURING, "%s: refused under graph capture (CUresult %d)", what, (int)r);
    return ptsc__err(PTSC_ERR_CUDA, "%s failed (CUresult %d)", what, (int)r);
}

/* One stream memory operation through `fn` (flags: the operation's). */
static int ptsc__memop(ptsc__memop_fn *fn, const char *what, void *stream, unsigned long long addr,
                       unsigned value, unsigned flags)
{
    int rc = ptsc__memop_ready(what);
    if (rc != PTSC_OK)
        return rc;
    CUresult r = (*fn)((CUstream)stream, (CUdeviceptr)addr, value, flags);
    return r == CUDA_SUCCESS ? PTSC_OK : ptsc__memop_fail(r, what);
}

int ptsc__gpu_write32(void *stream, unsigned long long addr, unsigned value)
{
    /* Default flags: a memory fence before the write, so what the stream
     * did before (a copy into a staging buffer) is visible with it. */
    return ptsc__memop(&ptsc__write32_fn, "cuStreamWriteValue32", stream, addr, value,
                       CU_STREAM_WRITE_VALUE_DEFAULT);
}

int ptsc__gpu_wait32(void *stream, unsigned long long addr, unsigned value)
{
    return ptsc__memop(&ptsc__wait32_fn, "cuStreamWaitValue32", stream, addr, value, CU_STREAM_WAIT_VALUE_EQ);
}

int ptsc__gpu_mapped_alloc(size_t n, void **host, unsigned long long *dev)
{
    void *q = NULL, *d = NULL;
    /* Called while the thread's stream may be under capture: an allocation
     * is not part of the graph, so the capture's rule against it is
     * relaxed for this thread meanwhile (as NCCL does). */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaHostAlloc(&q, n, cudaHostAllocPortable | cudaHostAllocMapped);
    const char *what = "cudaHostAlloc(mapped)";
    if (e == cudaSuccess && (e = cudaHostGetDevicePointer(&d, q, 0)) != cudaSuccess) {
        what = "cudaHostGetDevicePointer";
        (void)cudaFreeHost(q);
    }
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess)
        return ptsc__gpu_fail(e, what);
    *host = q;
    *dev = (unsigned long long)(uintptr_t)d;
    return PTSC_OK;
}

/* The capture sequence `stream` is in: its id (0: not capturing) and, if
 * asked, its graph. cudaStreamGetCaptureInfo gained an argument in CUDA 13. */
static int ptsc__capture_info(void *stream, unsigned long long *id, cudaGraph_t *graph)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long i = 0;
    cudaGraph_t g = NULL;
#if CUDART_VERSION >= 13000
    cudaError_t e = cudaStreamGetCaptureInfo((cudaStream_t)stream, &st, &i, &g, NULL, NULL, NULL);
#else
    cudaError_t e = cudaStreamGetCaptureInfo_v2((cudaStream_t)stream, &st, &i, &g, NULL, NULL);
#endif
    if (e != cudaSuccess)
        return ptsc__gpu_fail(e, "cudaStreamGetCaptureInfo");
    int active = st == cudaStreamCaptureStatusActive;
    *id = active ? i : 0;
    if (graph)
        *graph = active ? g : NULL;
    return PTSC_OK;
}

int ptsc__gpu_capture_release(void *stream, void (*fn)(void *), void *arg)
{
    unsigned long long id = 0;
    cudaGraph_t g = NULL;
    int rc = ptsc__capture_info(stream, &id, &g);
    if (rc != PTSC_OK)
        return rc;
    if (!g)
        return ptsc__err(PTSC_ERR_ARG, "the stream is not being captured");
    cudaUserObject_t obj;
    PTSC__CUDA_TRY(cudaUserObjectCreate(&obj, arg, fn, 1, cudaUserObjectNoDestructorSync),
                   "cudaUserObjectCreate");
    cudaError_t e = cudaGraphRetainUserObject(g, obj, 1, cudaGraphUserObjectMove);
    if (e != cudaSuccess) {
        (void)cudaUserObjectRelease(obj, 1); /* runs fn: the caller treats that as released */
        return ptsc__gpu_fail(e, "cudaGraphRetainUserObject");
    }
    return PTSC_OK;
}

int ptsc__gpu_memops(void) { return ptsc__memop_ready("stream-ordered calls"); }

/* libptsc-mpi (ptsc-run, or linked) in this process: its exported entry. */
int ptsc__gpu_interposed(void) { return dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer") != NULL; }

int ptsc__gpu_capture_id(void *stream, unsigned long long *id)
{
    return ptsc__capture_info(stream, id, NULL);
}
