/*
 * The benchmarks' kernel: `work` rounds of arithmetic over a buffer, on a
 * deliberately small grid so that kernels of several threads can run side
 * by side, which is what makes a device-wide sync visibly costly.
 */
#include <cuda_runtime.h>

#include "bench_pattern.h"

__global__ void bench_busy_kernel(float *buf, size_t n, int work)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = buf[i];
        for (int k = 0; k < work; k++)
            x = x * 0.999f + 0.5f;
        buf[i] = x;
    }
}

extern "C" int bench_kernel_launch(float *buf, size_t n, int work, void *stream)
{
    bench_busy_kernel<<<16, 256, 0, (cudaStream_t)stream>>>(buf, n, work);
    return (int)cudaGetLastError();
}

/* One thread that spins for `ns` nanoseconds of GPU time (globaltimer): a
 * kernel that keeps the stream busy for a known while. */
__global__ void bench_spin_kernel(long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((long long)(t - t0) < ns);
}

extern "C" int bench_spin_launch(long long ns, void *stream)
{
    bench_spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ns);
    return (int)cudaGetLastError();
}

/* Fill `n` words with bench_pattern(i, seed): a produced, checkable buffer. */
__global__ void bench_fill_kernel(unsigned *buf, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = bench_pattern(i, seed);
}

extern "C" int bench_fill_launch(unsigned *buf, size_t n, unsigned seed, void *stream)
{
    bench_fill_kernel<<<256, 256, 0, (cudaStream_t)stream>>>(buf, n, seed);
    return (int)cudaGetLastError();
}
