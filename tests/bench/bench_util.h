/*
 * Shared helpers of the benchmarks: a monotonic clock, a fail-fast check,
 * and the small GPU interface the benchmarks drive (bench_gpu.c with the
 * CUDA runtime, bench_kernels.cu for real kernels when nvcc is there).
 *
 * The benchmarks stop the whole job on the first failed call: a rank that
 * gave up would leave its peer blocked in a receive forever.
 */
#ifndef PTSC_BENCH_UTIL_H
#define PTSC_BENCH_UTIL_H

#include <ptsc.h>

#include <stddef.h>
#include <stdio.h>
#include <time.h>

#define BENCH_CHECK(call)                                                            \
    do {                                                                             \
        int bench_rc_ = (call);                                                      \
        if (bench_rc_ != PTSC_OK) {                                                  \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, \
                    ptsc_status_name(bench_rc_), ptsc_last_error());                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                            \
        }                                                                            \
    } while (0)

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A human size: 4 KiB, 64 MiB. */
static inline const char *bench_size_text(size_t bytes, char *buf, size_t n)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, n, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, n, "%zu KiB", bytes >> 10);
    else
        snprintf(buf, n, "%zu B", bytes);
    return buf;
}

/* ---- GPU side (bench_gpu.c). Every call returns PTSC_OK or PTSC_ERR_CUDA
 * with CUDA's message on stderr; without CUDA they return PTSC_ERR_NO_DEVICE. */

/* 1 when this build can run device benchmarks: CUDA compiled in and a device present. */
int bench_gpu_available(void);
/* Short description of how work is generated: "kernel", "cudaMemsetAsync" or "none". */
const char *bench_gpu_work_kind(void);
int bench_gpu_malloc(void **p, size_t bytes);
int bench_gpu_managed(void **p, size_t bytes);
int bench_gpu_pinned(void **p, size_t bytes);
void bench_gpu_free(void *p);
void bench_gpu_free_pinned(void *p);
/* Queue roughly `work` units of GPU work writing `buf` on `stream`. */
int bench_gpu_work(float *buf, size_t n, int work, void *stream);
int bench_gpu_memcpy(void *dst, const void *src, size_t bytes);
int bench_gpu_copy_async(void *dst, const void *src, size_t bytes, void *stream);
int bench_gpu_stream_sync(void *stream);
/* A kernel that keeps `stream` busy for `ns` nanoseconds (needs nvcc). */
int bench_gpu_spin(long long ns, void *stream);
/* Fill `bytes` (a multiple of 4) with bench_pattern(i, seed) by a kernel on
 * `stream` (needs nvcc: PTSC_ERR_UNSUPPORTED otherwise). */
int bench_gpu_fill(void *buf, size_t bytes, unsigned seed, void *stream);
int bench_gpu_device_sync(void);
/* CUDA graphs (bench_enqueue): a non-blocking stream, a thread-local
 * capture on it, the instantiated graph and its launches. */
int bench_gpu_stream_create(void **s);
void bench_gpu_stream_destroy(void *s);
int bench_gpu_capture_begin(void *s);
int bench_gpu_capture_end(void *s, void **exec);
int bench_gpu_graph_launch(void *exec, void *s);
void bench_gpu_graph_free(void *exec);
/* Raw cudaPointerGetAttributes, for bench_classify's comparison. */
int bench_gpu_pointer_attr(const void *p, int *type);

#endif /* PTSC_BENCH_UTIL_H */
