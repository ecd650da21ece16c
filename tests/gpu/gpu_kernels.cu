// Kernels for the GPU tests. The spin uses %globaltimer (nanoseconds), so
// its length does not depend on the clock rate.
#include "gpu_kernels.h"

static __device__ __forceinline__ unsigned long long ptsc_tk_now(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ void ptsc_tk_spin_block(unsigned long long ns)
{
    if (ns == 0)
        return;
    if (threadIdx.x == 0) {
        unsigned long long t0 = ptsc_tk_now();
        while (ptsc_tk_now() - t0 < ns) {
        }
    }
    __syncthreads();
}

static __global__ void ptsc_tk_spin_fill_k(int *buf, size_t n, int seed, unsigned long long ns)
{
    ptsc_tk_spin_block(ns);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = ptsc_tk_pattern(seed, i);
}

static __global__ void ptsc_tk_count_bad_k(const int *buf, size_t n, int seed, unsigned long long *bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mine += buf[i] != ptsc_tk_pattern(seed, i);
    if (mine)
        atomicAdd(bad, mine);
}

// Few enough blocks to be resident together, so that every block spins
// before any element is written.
static unsigned ptsc_tk_grid(size_t n)
{
    size_t g = (n + 255) / 256;
    return g == 0 ? 1 : g > 512 ? 512 : (unsigned)g;
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
