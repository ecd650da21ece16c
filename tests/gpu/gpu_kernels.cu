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
