/*
 * Small harness shared by the GPU test programs. They are MPI programs run
 * by ctest under mpiexec, so they use no test framework: each check prints
 * what failed (with rank and ptsc's detail) and counts; main returns 1 when
 * anything failed, 77 (ctest's SKIP_RETURN_CODE) when there is no device.
 */
#ifndef PTSC_GPU_TEST_H
#define PTSC_GPU_TEST_H

#include <ptsc.h>

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_kernels.h"

#define GT_SKIP 77

static atomic_int gt_failures;
static int gt_rank = -1;

static inline void gt_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    char msg[1024];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL [rank %d] %s:%d: %s\n", gt_rank, file, line, msg);
    fflush(stderr);
    atomic_fetch_add(&gt_failures, 1);
}

/* A condition, with a printf-style explanation when it is false. */
#define GT_CHECK(cond, ...)                                                        \
    do {                                                                           \
        if (!(cond))                                                               \
            gt_fail(__FILE__, __LINE__, "check (" #cond ") failed: " __VA_ARGS__); \
    } while (0)

/* A ptsc call that must return `expected`. */
#define GT_RC(call, expected)                                                                 \
    do {                                                                                      \
        int gt_rc_ = (call), gt_exp_ = (expected);                                            \
        if (gt_rc_ != gt_exp_)                                                                \
            gt_fail(__FILE__, __LINE__, "%s returned %s, expected %s; detail: \"%s\"", #call, \
                    ptsc_status_name(gt_rc_), ptsc_status_name(gt_exp_), ptsc_last_error());  \
    } while (0)
#define GT_OK(call) GT_RC(call, PTSC_OK)

/* A CUDA call that must succeed. */
#define GT_CUDA(call)                                                                    \
    do {                                                                                 \
        cudaError_t gt_e_ = (call);                                                      \
        if (gt_e_ != cudaSuccess)                                                        \
            gt_fail(__FILE__, __LINE__, "%s: %s (%s)", #call, cudaGetErrorString(gt_e_), \
                    cudaGetErrorName(gt_e_));                                            \
    } while (0)

/* Before MPI: 77 with a visible reason when this node has no usable GPU. */
static inline int gt_require_gpu(const char *prog)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP %s: no CUDA device (%s)\n", prog,
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
        fflush(stdout);
        (void)cudaGetLastError();
        return GT_SKIP;
    }
    return 0;
}

static inline const char *gt_class_name(ptsc_memclass_t c)
{
    return c == PTSC_MEM_DEVICE    ? "device"
           : c == PTSC_MEM_MANAGED ? "managed"
           : c == PTSC_MEM_PINNED  ? "pinned"
                                   : "host";
}

/* ptsc_mem_class of `ptr` must be `expected`. */
#define GT_CLASS(ptr, expected)                                                            \
    do {                                                                                   \
        ptsc_memclass_t gt_c_ = (ptsc_memclass_t)-1;                                       \
        GT_OK(ptsc_mem_class((ptr), &gt_c_));                                              \
        GT_CHECK(gt_c_ == (expected), "%s is %s, expected %s", #ptr, gt_class_name(gt_c_), \
                 gt_class_name(expected));                                                 \
    } while (0)

static inline double gt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The bound stream of a context as a cudaStream_t. */
static inline cudaStream_t gt_stream(ptsc_ctx_t *ctx)
{
    void *s = NULL;
    GT_OK(ptsc_ctx_stream(ctx, &s));
    return (cudaStream_t)s;
}

/* Elements of `buf` (device, managed or pinned) that differ from the
 * pattern of `seed`, counted by a kernel queued on `s` behind whatever the
 * stream already holds; synchronises `s` to read the count. */
static inline unsigned long long gt_count_bad(const int *buf, size_t n, int seed, cudaStream_t s)
{
    unsigned long long *bad = NULL, h = ~0ull;
    GT_CUDA(cudaMallocHost((void **)&bad, sizeof *bad));
    if (bad == NULL)
        return h;
    *bad = 0;
    GT_CUDA(ptsc_tk_count_bad(buf, n, seed, bad, s));
    GT_CUDA(cudaStreamSynchronize(s));
    h = *bad;
    cudaFreeHost(bad);
    return h;
}

/* The same on the host, for pageable or pinned buffers. */
static inline unsigned long long gt_count_bad_host(const int *buf, size_t n, int seed)
{
    unsigned long long bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += buf[i] != ptsc_tk_pattern(seed, i);
    return bad;
}

static inline const char *gt_size_str(size_t b, char *out, size_t n)
{
    if (b >= (1u << 20))
        snprintf(out, n, "%zu MiB", b >> 20);
    else
        snprintf(out, n, "%zu KiB", b >> 10);
    return out;
}

/* Common exit: every rank reports, the process returns 1 on any failure. */
static inline int gt_finish(const char *prog)
{
    int f = atomic_load(&gt_failures);
    printf("%s [rank %d]: %s (%d failed checks)\n", prog, gt_rank, f ? "FAILED" : "passed", f);
    fflush(stdout);
    return f ? 1 : 0;
}

/* Which transfer path device buffers take, for messages and expectations. */
static inline const char *gt_path(int *staging)
{
    int cuda = 0, aware = 0, st = 0;
    GT_OK(ptsc_features(&cuda, &aware, &st));
    if (staging)
        *staging = st;
    return st ? "staged" : "direct";
}

#endif
