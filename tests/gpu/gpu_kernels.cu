// Kernels for the GPU tests. The spin uses %globaltimer (nanoseconds), so
// its length does not depend on the clock rate.
#include "gpu_kernels_dev.cuh"

static __global__ void ptsc_tk_count_bad_k(const int *buf, size_t n, int seed, unsigned long long *bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mine += buf[i] != ptsc_tk_pattern(seed, i);
    if (mine)
        atomicAdd(bad, mine);
}

extern "C" cudaError_t ptsc_tk_spin_fill(int *buf, size_t n, int seed, unsigned spin_us, cudaStream_t s)
{
    ptsc_tk_spin_fill_k<<<ptsc_tk_grid(n), 256, 0, s>>>(buf, n, seed, 1000ull * spin_us);
    return cudaGetLastError();
}

extern "C" cudaError_t ptsc_tk_spin(unsigned spin_us, cudaStream_t s)
{
    ptsc_tk_spin_fill_k<<<1, 32, 0, s>>>(nullptr, 0, 0, 1000ull * spin_us);
    return cudaGetLastError();
}

extern "C" cudaError_t ptsc_tk_count_bad(const int *buf, size_t n, int seed, unsigned long long *bad,
                                         cudaStream_t s)
{
    ptsc_tk_count_bad_k<<<ptsc_tk_grid(n), 256, 0, s>>>(buf, n, seed, bad);
    return cudaGetLastError();
}

// Graph replay (test_gpu_enqueue.c): the seed is `base` plus the launch
// count kept in device memory, so every launch of one captured graph has
// its own data.
static __global__ void ptsc_tk_fill_iter_k(int *buf, size_t n, int base, const unsigned *iter)
{
    int seed = base + (int)*iter;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = ptsc_tk_pattern(seed, i);
}

static __global__ void ptsc_tk_count_bad_iter_k(const int *buf, size_t n, int base, const unsigned *iter,
                                                unsigned long long *bad)
{
    int seed = base + (int)*iter;
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mine += buf[i] != ptsc_tk_pattern(seed, i);
    if (mine)
        atomicAdd(bad, mine);
}

static __global__ void ptsc_tk_inc_k(unsigned *iter) { *iter += 1; }

extern "C" cudaError_t ptsc_tk_fill_iter(int *buf, size_t n, int base, const unsigned *iter, cudaStream_t s)
{
    ptsc_tk_fill_iter_k<<<ptsc_tk_grid(n), 256, 0, s>>>(buf, n, base, iter);
    return cudaGetLastError();
}

extern "C" cudaError_t ptsc_tk_count_bad_iter(const int *buf, size_t n, int base, const unsigned *iter,
                                              unsigned long long *bad, cudaStream_t s)
{
    ptsc_tk_count_bad_iter_k<<<ptsc_tk_grid(n), 256, 0, s>>>(buf, n, base, iter, bad);
    return cudaGetLastError();
}

extern "C" cudaError_t ptsc_tk_inc(unsigned *iter, cudaStream_t s)
{
    ptsc_tk_inc_k<<<1, 1, 0, s>>>(iter);
    return cudaGetLastError();
}
