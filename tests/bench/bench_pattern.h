/*
 * The benchmarks' checkable payload: word i of a buffer filled with `seed`.
 * Shared by the host code and the device kernel (bench_kernels.cu), so a
 * receiver can check on the host what a kernel produced on the sender.
 */
#ifndef PTSC_BENCH_PATTERN_H
#define PTSC_BENCH_PATTERN_H

#ifdef __CUDACC__
#define BENCH_HD __host__ __device__
#else
#define BENCH_HD
#endif

static inline BENCH_HD unsigned bench_pattern(unsigned long long i, unsigned seed)
{
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (unsigned long long)seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    return (unsigned)(x ^ (x >> 29));
}

#endif /* PTSC_BENCH_PATTERN_H */
