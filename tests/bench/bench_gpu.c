/*
 * The benchmarks' GPU helpers: plain CUDA runtime calls from C, so only the
 * kernel itself needs nvcc (bench_kernels.cu). Without nvcc the "work" is a
 * cudaMemsetAsync, which still occupies the stream; without CUDA every call
 * reports PTSC_ERR_NO_DEVICE and the benchmarks fall back to host buffers.
 */
#include "bench_util.h"

#ifdef PTSC_HAVE_CUDA
#include <cuda_runtime_api.h>

#ifdef PTSC_HAVE_NVCC
/* bench_kernels.cu; returns a cudaError_t value. */
int bench_kernel_launch(float *buf, size_t n, int work, void *stream);
int bench_spin_launch(long long ns, void *stream);
int bench_fill_launch(unsigned *buf, size_t n, unsigned seed, void *stream);
#endif

static int cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return PTSC_OK;
    fprintf(stderr, "bench: %s: %s\n", what, cudaGetErrorString(e));
    return PTSC_ERR_CUDA;
}

int bench_gpu_available(void)
{
    int cuda = 0;
    return ptsc_features(&cuda, NULL, NULL) == PTSC_OK && cuda;
}

const char *bench_gpu_work_kind(void)
{
#ifdef PTSC_HAVE_NVCC
    return "kernel";
#else
    return "cudaMemsetAsync (built without nvcc)";
#endif
}

int bench_gpu_malloc(void **p, size_t bytes) { return cuda_check(cudaMalloc(p, bytes), "cudaMalloc"); }
int bench_gpu_managed(void **p, size_t bytes)
{
    return cuda_check(cudaMallocManaged(p, bytes, cudaMemAttachGlobal), "cudaMallocManaged");
}
int bench_gpu_pinned(void **p, size_t bytes)
{
    return cuda_check(cudaMallocHost(p, bytes), "cudaMallocHost");
}
void bench_gpu_free(void *p) { cudaFree(p); }
void bench_gpu_free_pinned(void *p) { cudaFreeHost(p); }

int bench_gpu_work(float *buf, size_t n, int work, void *stream)
{
#ifdef PTSC_HAVE_NVCC
    return cuda_check((cudaError_t)bench_kernel_launch(buf, n, work, stream), "bench kernel");
#else
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < work && e == cudaSuccess; i++)
        e = cudaMemsetAsync(buf, i & 0xff, n * sizeof *buf, (cudaStream_t)stream);
    return cuda_check(e, "cudaMemsetAsync");
#endif
}

int bench_gpu_spin(long long ns, void *stream)
{
#ifdef PTSC_HAVE_NVCC
    return cuda_check((cudaError_t)bench_spin_launch(ns, stream), "spin kernel");
#else
    (void)ns;
    (void)stream;
    return PTSC_ERR_UNSUPPORTED;
#endif
}

int bench_gpu_fill(void *buf, size_t bytes, unsigned seed, void *stream)
{
#ifdef PTSC_HAVE_NVCC
    return cuda_check((cudaError_t)bench_fill_launch(buf, bytes / sizeof(unsigned), seed, stream),
                      "fill kernel");
#else
    (void)buf;
    (void)bytes;
    (void)seed;
    (void)stream;
    return PTSC_ERR_UNSUPPORTED;
#endif
}

int bench_gpu_memcpy(void *dst, const void *src, size_t bytes)
{
    return cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

int bench_gpu_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    return cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream),
                      "cudaMemcpyAsync");
}

int bench_gpu_stream_sync(void *stream)
{
    return cuda_check(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

int bench_gpu_device_sync(void) { return cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

int bench_gpu_pointer_attr(const void *p, int *type)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear it, as ptsc's own classifier must */
        return PTSC_ERR_CUDA;
    }
    *type = (int)a.type;
    return PTSC_OK;
}

int bench_gpu_stream_create(void **s)
{
    return cuda_check(cudaStreamCreateWithFlags((cudaStream_t *)s, cudaStreamNonBlocking),
                      "cudaStreamCreate");
}

void bench_gpu_stream_destroy(void *s) { (void)cudaStreamDestroy((cudaStream_t)s); }

int bench_gpu_capture_begin(void *s)
{
    return cuda_check(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal),
                      "cudaStreamBeginCapture");
}

int bench_gpu_capture_end(void *s, void **exec)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)s, &g);
    if (e == cudaSuccess)
        e = cudaGraphInstantiate((cudaGraphExec_t *)exec, g, 0);
    if (g)
        (void)cudaGraphDestroy(g);
    return cuda_check(e, "cudaStreamEndCapture / cudaGraphInstantiate");
}

int bench_gpu_graph_launch(void *exec, void *s)
{
    return cuda_check(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s), "cudaGraphLaunch");
}

void bench_gpu_graph_free(void *exec) { (void)cudaGraphExecDestroy((cudaGraphExec_t)exec); }

#else /* no CUDA */

int bench_gpu_stream_create(void **s) { return (void)s, PTSC_ERR_NO_DEVICE; }
void bench_gpu_stream_destroy(void *s) { (void)s; }
int bench_gpu_capture_begin(void *s) { return (void)s, PTSC_ERR_NO_DEVICE; }
int bench_gpu_capture_end(void *s, void **exec) { return (void)s, (void)exec, PTSC_ERR_NO_DEVICE; }
int bench_gpu_graph_launch(void *exec, void *s) { return (void)exec, (void)s, PTSC_ERR_NO_DEVICE; }
void bench_gpu_graph_free(void *exec) { (void)exec; }

int bench_gpu_available(void) { return 0; }
const char *bench_gpu_work_kind(void) { return "none (built without CUDA)"; }
int bench_gpu_malloc(void **p, size_t bytes) { return (void)p, (void)bytes, PTSC_ERR_NO_DEVICE; }
int bench_gpu_managed(void **p, size_t bytes) { return (void)p, (void)bytes, PTSC_ERR_NO_DEVICE; }
int bench_gpu_pinned(void **p, size_t bytes) { return (void)p, (void)bytes, PTSC_ERR_NO_DEVICE; }
void bench_gpu_free(void *p) { (void)p; }
void bench_gpu_free_pinned(void *p) { (void)p; }
int bench_gpu_work(float *buf, size_t n, int work, void *stream)
{
    return (void)buf, (void)n, (void)work, (void)stream, PTSC_ERR_NO_DEVICE;
}
int bench_gpu_memcpy(void *dst, const void *src, size_t bytes)
{
    return (void)dst, (void)src, (void)bytes, PTSC_ERR_NO_DEVICE;
}
int bench_gpu_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    return (void)dst, (void)src, (void)bytes, (void)stream, PTSC_ERR_NO_DEVICE;
}
int bench_gpu_stream_sync(void *stream) { return (void)stream, PTSC_ERR_NO_DEVICE; }
int bench_gpu_device_sync(void) { return PTSC_ERR_NO_DEVICE; }
int bench_gpu_spin(long long ns, void *stream) { return (void)ns, (void)stream, PTSC_ERR_NO_DEVICE; }
int bench_gpu_fill(void *buf, size_t bytes, unsigned seed, void *stream)
{
    return (void)buf, (void)bytes, (void)seed, (void)stream, PTSC_ERR_NO_DEVICE;
}
int bench_gpu_pointer_attr(const void *p, int *type) { return (void)p, (void)type, PTSC_ERR_NO_DEVICE; }

#endif
