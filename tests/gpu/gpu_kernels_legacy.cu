// The kernel launch of CUDA code compiled the default way: `<<<grid,
// block>>>` with no stream argument, in a translation unit compiled WITHOUT
// `--default-stream per-thread`, so it runs on the legacy default stream
// whatever thread launches it. test_gpu_producers uses it as the producer
// that most existing CUDA code is: not on the bound stream of ptsc.
#include "gpu_kernels_dev.cuh"

// nvcc defines this macro for --default-stream per-thread (and programs may
// define it themselves); this file would then launch on the per-thread
// stream and stop standing for default-compiled code.
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "gpu_kernels_legacy.cu must be compiled without --default-stream per-thread"
#endif

extern "C" cudaError_t ptsc_tk_spin_fill_default(int *buf, size_t n, int seed, unsigned spin_us)
{
    ptsc_tk_spin_fill_k<<<ptsc_tk_grid(n), 256>>>(buf, n, seed, 1000ull * spin_us);
    return cudaGetLastError();
}
