// Device code shared by the kernel translation units of the GPU tests
// (gpu_kernels.cu, gpu_kernels_legacy.cu): each gets its own static copy,
// so no relocatable device code is needed.
#ifndef PTSC_GPU_KERNELS_DEV_CUH
#define PTSC_GPU_KERNELS_DEV_CUH

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

// Few enough blocks to be resident together, so that every block spins
// before any element is written.
static unsigned ptsc_tk_grid(size_t n)
{
    size_t g = (n + 255) / 256;
    return g == 0 ? 1 : g > 512 ? 512 : (unsigned)g;
}

#endif
