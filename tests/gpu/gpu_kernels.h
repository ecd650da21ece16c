/*
 * Kernels for the GPU tests (gpu_kernels.cu, built by nvcc), callable from
 * the C test programs. Every launch goes on the stream it is given (but
 * ptsc_tk_spin_fill_default: the legacy default stream); none synchronises.
 * Errors are returned as cudaError_t values.
 */
#ifndef PTSC_GPU_KERNELS_H
#define PTSC_GPU_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __CUDACC__
#define PTSC_TK_HD __host__ __device__
#else
#define PTSC_TK_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The value the pattern of `seed` holds at index i (also used on the host). */
static inline PTSC_TK_HD int ptsc_tk_pattern(int seed, size_t i)
{
    return (int)((unsigned)seed * 0x9E3779B1u ^ (unsigned)(i * 2654435761u) ^ (unsigned)(i >> 7));
}

/* Spin `spin_us` microseconds (every block), then write the pattern of `seed`. */
cudaError_t ptsc_tk_spin_fill(int *buf, size_t n, int seed, unsigned spin_us, cudaStream_t s);
/* The same, launched as default-compiled CUDA code does: `<<<grid, block>>>`
 * with no stream, from a translation unit built without per-thread default
 * streams (gpu_kernels_legacy.cu), i.e. on the legacy default stream. */
cudaError_t ptsc_tk_spin_fill_default(int *buf, size_t n, int seed, unsigned spin_us);
/* Only spin: keeps `s` busy for `spin_us` microseconds. */
cudaError_t ptsc_tk_spin(unsigned spin_us, cudaStream_t s);
/* Add to *bad (device or mapped memory) the elements that differ from the pattern of `seed`. */
cudaError_t ptsc_tk_count_bad(const int *buf, size_t n, int seed, unsigned long long *bad, cudaStream_t s);
/* The pattern of seed `base + *iter` (iter in device memory), for graphs
 * whose every launch sends other data; its count of bad elements; ++*iter. */
cudaError_t ptsc_tk_fill_iter(int *buf, size_t n, int base, const unsigned *iter, cudaStream_t s);
cudaError_t ptsc_tk_count_bad_iter(const int *buf, size_t n, int base, const unsigned *iter,
                                   unsigned long long *bad, cudaStream_t s);
cudaError_t ptsc_tk_inc(unsigned *iter, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
