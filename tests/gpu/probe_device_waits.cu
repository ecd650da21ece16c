// Which CUDA calls wait for a stream that is blocked in cuStreamWaitValue32?
//
//   probe_device_waits [p]
//
// A stream (a non-blocking one, or with `p` the per-thread default stream,
// a blocking one) waits on a word of mapped memory that a helper thread
// raises one second later; meanwhile the main thread makes one CUDA call,
// timed. A call that took about a second waited for the device to go idle:
// while enqueued work is in flight, no thread of the process may make it
// (docs/design.md, "Stream-ordered calls", which records a run). Not a
// ctest: it measures CUDA, not ptsc.
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static volatile unsigned *word;
static double now()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static void *release(void *)
{
    usleep(1000000);
    __atomic_store_n(word, 1u, __ATOMIC_SEQ_CST);
    return 0;
}
__global__ void k(int *p)
{
    if (p)
        *p = 1;
}
#define C(x)                                     \
    do {                                         \
        auto e_ = (x);                           \
        if (e_)                                  \
            printf("  %s -> %d\n", #x, (int)e_); \
    } while (0)
int main(int argc, char **argv)
{
    int perthread = argc > 1 && argv[1][0] == 'p';
    C(cudaSetDevice(0));
    C(cudaFree(0));
    C(cudaHostAlloc((void **)&word, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    cudaStream_t s, o;
    C(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    C(cudaStreamCreateWithFlags(&o, cudaStreamNonBlocking));
    if (perthread)
        s = cudaStreamPerThread;
    printf("waiting stream: %s\n", perthread ? "per-thread default" : "non-blocking created");
    void *dp = 0, *hp = 0, *pg = malloc(1 << 20);
    int *dq = 0;
    C(cudaMalloc((void **)&dq, 4096));
    cudaEvent_t ev;
    cudaStream_t s2;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    C(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    C(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
    k<<<1, 1, 0, s2>>>(dq);
    C(cudaStreamEndCapture(s2, &g));
    const char *names[] = {"cudaMalloc 1 MiB",
                           "cudaFree",
                           "cudaHostAlloc 64 KiB mapped",
                           "cudaFreeHost",
                           "cudaHostRegister 1 MiB",
                           "cudaHostUnregister",
                           "cudaStreamCreate",
                           "cudaEventCreate",
                           "cudaMemcpyAsync H2D other stream + sync",
                           "kernel other stream + sync",
                           "cudaMemcpy D2H (legacy)",
                           "cudaGraphInstantiate",
                           "cudaGraphLaunch other + sync",
                           "cudaGraphExecDestroy",
                           "cudaMallocAsync+FreeAsync other",
                           "cudaMemset (legacy)"};
    int n = sizeof names / sizeof *names;
    for (int i = 0; i < n; i++) {
        *word = 0;
        CUdeviceptr a = (CUdeviceptr)word;
        C(cuStreamWaitValue32((CUstream)s, a, 1, CU_STREAM_WAIT_VALUE_EQ));
        k<<<1, 1, 0, s>>>(0);
        usleep(1000);
        pthread_t th;
        pthread_create(&th, 0, release, 0);
        double t0 = now();
        switch (i) {
        case 0:
            C(cudaMalloc(&dp, 1 << 20));
            break;
        case 1:
            C(cudaFree(dp));
            break;
        case 2:
            C(cudaHostAlloc(&hp, 1 << 16, cudaHostAllocMapped | cudaHostAllocPortable));
            break;
        case 3:
            C(cudaFreeHost(hp));
            break;
        case 4:
            C(cudaHostRegister(pg, 1 << 20, cudaHostRegisterMapped));
            break;
        case 5:
            C(cudaHostUnregister(pg));
            break;
        case 6:
            C(cudaStreamCreate(&s2));
            break;
        case 7:
            C(cudaEventCreate(&ev));
            break;
        case 8:
            C(cudaMemcpyAsync(dq, pg, 4096, cudaMemcpyHostToDevice, o));
            C(cudaStreamSynchronize(o));
            break;
        case 9:
            k<<<1, 1, 0, o>>>(dq);
            C(cudaStreamSynchronize(o));
            break;
        case 10:
            C(cudaMemcpy(pg, dq, 4096, cudaMemcpyDeviceToHost));
            break;
        case 11:
            C(cudaGraphInstantiate(&ge, g, 0));
            break;
        case 12:
            C(cudaGraphLaunch(ge, o));
            C(cudaStreamSynchronize(o));
            break;
        case 13:
            C(cudaGraphExecDestroy(ge));
            break;
        case 14: {
            void *q;
            C(cudaMallocAsync(&q, 1 << 20, o));
            C(cudaFreeAsync(q, o));
            C(cudaStreamSynchronize(o));
        } break;
        case 15:
            C(cudaMemset(dq, 0, 4096));
            break;
        }
        double dt = now() - t0;
        pthread_join(th, 0);
        C(cudaStreamSynchronize(s));
        printf("%-40s %8.3f s %s\n", names[i], dt, dt > 0.5 ? "WAITS for the blocked stream" : "");
    }
    return 0;
}
