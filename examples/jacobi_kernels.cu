/*
 * GPU half of examples/jacobi.c: the stencil kernel and the few CUDA calls
 * the example needs, behind C wrappers so jacobi.c stays plain C and builds
 * without the CUDA headers. Streams cross the boundary as void *, exactly as
 * ptsc_ctx_stream hands them out.
 *
 * Every wrapper returns 0 or a cudaError_t value; jk_error() gives its text.
 */
#include <cuda_runtime.h>

/* Same expression, same order as step_host in jacobi.c: the sum has no
 * multiply-add to contract, so host and device results agree bit for bit. */
__global__ void jacobi_step_kernel(double *__restrict__ v, const double *__restrict__ u, int rows, int cols)
{
    const int w = cols + 2;
    const int j = 1 + blockIdx.x * blockDim.x + threadIdx.x;
    const int i = 1 + blockIdx.y * blockDim.y + threadIdx.y;
    if (i <= rows && j <= cols)
        v[i * w + j] =
            0.25 * ((u[(i - 1) * w + j] + u[(i + 1) * w + j]) + (u[i * w + j - 1] + u[i * w + j + 1]));
}

extern "C" {

const char *jk_error(int code) { return cudaGetErrorString((cudaError_t)code); }

/* The thread's device is current already (ptsc selects it at attach); the
 * explicit set documents the assumption and costs nothing. */
int jk_alloc(int device, size_t bytes, void **p)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMalloc(p, bytes);
    return (int)e;
}

int jk_free(void *p) { return (int)cudaFree(p); }

/* Queued on the thread's stream, so later kernels and ptsc's sync of that
 * stream order after it; from pageable memory it returns once `src` may be
 * reused. */
int jk_upload(void *dst, const void *src, size_t bytes, void *stream)
{
    return (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream);
}

/* One Jacobi sweep over the block's rows x cols interior; (rows+2) x (cols+2)
 * arrays, halo rows and boundary columns included. */
int jk_step(double *v, const double *u, int rows, int cols, void *stream)
{
    const dim3 block(64, 4);
    const dim3 grid((unsigned)(cols + block.x - 1) / block.x, (unsigned)(rows + block.y - 1) / block.y);
    if (grid.y > 65535u) /* the launch limit of gridDim.y */
        return (int)cudaErrorInvalidConfiguration;
    jacobi_step_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(v, u, rows, cols);
    return (int)cudaGetLastError();
}

/* --exchange graph: a stream of the thread's own to capture on, the
 * capture, and the launches of the instantiated graph. */
int jk_stream_create(void **s)
{
    return (int)cudaStreamCreateWithFlags((cudaStream_t *)s, cudaStreamNonBlocking);
}

int jk_stream_destroy(void *s) { return (int)cudaStreamDestroy((cudaStream_t)s); }

int jk_stream_sync(void *s) { return (int)cudaStreamSynchronize((cudaStream_t)s); }

/* Thread-local: other threads capture or allocate at the same time. */
int jk_capture_begin(void *s)
{
    return (int)cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal);
}

int jk_capture_end(void *s, void **exec)
{
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)s, &g);
    if (e == cudaSuccess)
        e = cudaGraphInstantiate((cudaGraphExec_t *)exec, g, 0);
    if (g)
        (void)cudaGraphDestroy(g);
    return (int)e;
}

int jk_graph_launch(void *exec, void *s)
{
    return (int)cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s);
}

int jk_graph_free(void *exec) { return (int)cudaGraphExecDestroy((cudaGraphExec_t)exec); }

} /* extern "C" */
