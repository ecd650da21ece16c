/*
 * The GPU layer without CUDA (PTSC_WITH_CUDA=OFF or no toolkit at build
 * time). There are no devices, every buffer is pageable host memory and
 * every sync is a no-op, so the same API runs on host buffers.
 *
 * The host is modelled as a device whose only stream is synchronous:
 * ptsc__gpu_host_alloc falls back to malloc, ptsc__gpu_copy_async copies at
 * once and events are always complete. Nothing calls these without a GPU
 * (staging needs device buffers), but with them staging.c and the p2p
 * staging path behave correctly here too, and their pool logic can be
 * unit-tested on machines without CUDA. Calls that need a real device
 * (set_device, describe) answer PTSC_ERR_NO_DEVICE.
 */
#include "ptsc_internal.h"

#include <stdlib.h>
#include <string.h>

/* The one "event": always complete. Non-NULL so callers can test for it. */
static char ptsc__gpu_none_event;

int ptsc__gpu_init(int *ndevices)
{
    *ndevices = 0;
    ptsc__g.mem_tracked = 0;
    return PTSC_OK;
}

void ptsc__gpu_finalize(void) {}

/* memtrack.c is built with gpu_cuda.c only: no CUDA memory, nothing to track. */
int ptsc__memtrack_start(void) { return 0; }

void ptsc__memtrack_stop(void) {}

const char *ptsc__memtrack_status(void) { return "ptsc was built without CUDA"; }

int ptsc__gpu_describe(int d, char *buf, size_t n)
{
    return ptsc__err(PTSC_ERR_NO_DEVICE, "device %d: ptsc was built without CUDA", d);
}

void ptsc__gpu_versions(int *runtime, int *driver)
{
    if (runtime)
        *runtime = 0;
    if (driver)
        *driver = 0;
}

int ptsc__gpu_set_device(int device)
{
    return ptsc__err(PTSC_ERR_NO_DEVICE, "cannot select device %d: ptsc was built without CUDA", device);
}

int ptsc__gpu_stream_bind(int kind, void **stream)
{
    /* Contexts without a GPU have no stream (ptsc_ctx_stream gives NULL). */
    *stream = NULL;
    return PTSC_OK;
}

void ptsc__gpu_stream_release(int kind, void *stream) {}

int ptsc__gpu_stream_sync(void *stream) { return PTSC_OK; }

int ptsc__gpu_legacy_sync(void) { return PTSC_OK; }

int ptsc__gpu_device_sync(void) { return PTSC_OK; }

int ptsc__gpu_capturing(void *stream, int scope, int *capturing)
{
    *capturing = 0;
    return PTSC_OK;
}

int ptsc__gpu_classify(const void *p, ptsc_memclass_t *cls)
{
    *cls = PTSC_MEM_HOST;
    return PTSC_OK;
}

int ptsc__gpu_host_alloc(size_t n, void **p)
{
    void *q = malloc(n ? n : 1);
    if (q == NULL)
        return ptsc__err(PTSC_ERR_NO_MEMORY, "malloc of %zu bytes for a host staging buffer failed", n);
    *p = q;
    return PTSC_OK;
}

void ptsc__gpu_host_free(void *p) { free(p); }

void ptsc__gpu_frees_hold(int delta) { (void)delta; }

int ptsc__gpu_frees_held(void) { return 0; }

int ptsc__gpu_copy_async(void *dst, const void *src, size_t n, void *stream)
{
    /* The host "stream" is synchronous: the copy is complete on return. */
    if (n > 0)
        memmove(dst, src, n);
    return PTSC_OK;
}

int ptsc__gpu_copy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t rows, void *stream)
{
    (void)stream;
    for (size_t i = 0; width > 0 && i < rows; i++)
        memmove((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
    return PTSC_OK;
}

int ptsc__gpu_event_create(void **ev)
{
    *ev = &ptsc__gpu_none_event;
    return PTSC_OK;
}

void ptsc__gpu_event_destroy(void *ev) {}

int ptsc__gpu_event_record(void *ev, void *stream) { return PTSC_OK; }

int ptsc__gpu_event_done(void *ev, int *done)
{
    *done = 1;
    return PTSC_OK;
}

int ptsc__gpu_event_sync(void *ev) { return PTSC_OK; }
int ptsc__gpu_stream_wait(void *stream, void *ev)
{
    (void)stream;
    (void)ev;
    return PTSC_OK;
}

/* Stream memory operations need a device (enqueue.c runs the host's own
 * form of them without one). */
int ptsc__gpu_write32(void *stream, unsigned long long addr, unsigned value)
{
    (void)stream;
    (void)addr;
    (void)value;
    return ptsc__err(PTSC_ERR_NO_DEVICE, "cuStreamWriteValue32: ptsc was built without CUDA");
}

int ptsc__gpu_wait32(void *stream, unsigned long long addr, unsigned value)
{
    (void)stream;
    (void)addr;
    (void)value;
    return ptsc__err(PTSC_ERR_NO_DEVICE, "cuStreamWaitValue32: ptsc was built without CUDA");
}

int ptsc__gpu_mapped_alloc(size_t n, void **host, unsigned long long *dev)
{
    (void)n;
    (void)host;
    (void)dev;
    return ptsc__err(PTSC_ERR_NO_DEVICE, "mapped host memory: ptsc was built without CUDA");
}

int ptsc__gpu_capture_release(void *stream, void (*fn)(void *), void *arg)
{
    (void)stream;
    (void)fn;
    (void)arg;
    return ptsc__err(PTSC_ERR_NO_DEVICE, "graph capture: ptsc was built without CUDA");
}

int ptsc__gpu_memops(void)
{
    return ptsc__err(PTSC_ERR_NO_DEVICE, "stream-ordered calls: ptsc was built without CUDA");
}

int ptsc__gpu_interposed(void) { return 0; }

int ptsc__gpu_capture_id(void *stream, unsigned long long *id)
{
    (void)stream;
    *id = 0;
    return PTSC_OK;
}
