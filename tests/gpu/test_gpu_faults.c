/*
 * GPU faults surface as statuses (docs/errors.md, "Faults"). One rank; the
 * messages go from a thread to itself. Usage: test_gpu_faults CASE, each
 * case its own ctest entry (its own process):
 *
 *  pointer  A freed or made-up device address classifies as host memory
 *           (CUDA knows no allocation there), so ptsc cannot tell it from a
 *           host buffer: not sent here (MPI would read it as host memory).
 *           A device buffer whose count runs past its allocation reaches
 *           CUDA in the staging copy: PTSC_ERR_CUDA naming cudaMemcpyAsync
 *           with CUDA's message, from ptsc_isend / its wait and from
 *           ptsc_send; the error is not sticky, so the thread's next device
 *           message arrives intact. Thread 1 sends itself verified device
 *           messages all along.
 *  devmap   PTSC_DEVICE_MAP=0,99 (set by ctest): thread 1 maps to device 99,
 *           which does not exist: its attach, explicit or lazy, fails with
 *           PTSC_ERR_CONFIG naming the variable, and again when retried;
 *           thread 0 (device 0) works.
 *  sticky   A kernel of the program writes through a bad address on the
 *           thread's stream (an illegal memory access: a sticky error that
 *           breaks the CUDA context for the whole process, hence its own
 *           process and the last thing it does). ptsc_sync, a send of a
 *           device buffer and an allreduce of device buffers then return
 *           PTSC_ERR_CUDA with CUDA's message, none hangs; ptsc_finalize
 *           returns.
 *
 * Without a device the program exits 77 (skipped).
 */
#include "gpu_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <unistd.h>

enum { TAG = 7, HELPER_TAG = 8, N_OK = 16384 /* ints */ };

static ptsc_ctx_t *g_ctx;

/* `hay` contains `needle`. */
static int has(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* Send `n` ints of `d` to this thread itself and receive them into a fresh
 * device buffer; 1 when they arrived intact. */
static int self_message(ptsc_ctx_t *ctx, const int *d, size_t n, int seed, int tag)
{
    int *r = NULL, ok = 0, me = 0;
    GT_OK(ptsc_ctx_index(ctx, &me));
    GT_CUDA(cudaMalloc((void **)&r, n * sizeof *r));
    if (!r)
        return 0;
    ptsc_request_t req = PTSC_REQUEST_NULL;
    int rc = ptsc_isend(ctx, d, (int)n, MPI_INT, gt_rank, me, tag, &req);
    GT_RC(rc, PTSC_OK);
    if (rc == PTSC_OK) {
        GT_OK(ptsc_recv(ctx, r, (int)n, MPI_INT, gt_rank, me, tag));
        GT_OK(ptsc_wait(&req));
        ok = gt_count_bad(r, n, seed, gt_stream(ctx)) == 0;
    }
    GT_CUDA(cudaFree(r));
    return ok;
}

/* ------------------------------------------------------------------------ */
/* pointer                                                                   */
/* ------------------------------------------------------------------------ */

static atomic_int helper_rounds, helper_stop, helper_bad;

/* Thread 1: device messages to itself, each checked, until told to stop. */
static void *helper(void *unused)
{
    ptsc_ctx_t *ctx = NULL;
    int *d = NULL;
    (void)unused;
    GT_OK(ptsc_thread_attach(1, &ctx));
    GT_CUDA(cudaMalloc((void **)&d, N_OK * sizeof *d));
    for (int round = 0; ctx && d && (!atomic_load(&helper_stop) || round < 4); round++) {
        GT_CUDA(ptsc_tk_spin_fill(d, N_OK, 100 + round, 0, gt_stream(ctx)));
        if (!self_message(ctx, d, N_OK, 100 + round, HELPER_TAG))
            atomic_fetch_add(&helper_bad, 1);
        atomic_fetch_add(&helper_rounds, 1);
    }
    GT_CUDA(cudaFree(d));
    if (ctx)
        GT_OK(ptsc_thread_detach());
    atomic_store(&helper_rounds, 1 << 20); /* never leave the main thread waiting */
    return NULL;
}

/* Complete `req` by polling for at most `secs`; *done says whether it did. */
static int poll_wait(ptsc_request_t *req, double secs, int *done)
{
    double t0 = gt_now_ms();
    int rc = PTSC_OK;
    *done = 0;
    while (rc == PTSC_OK && !*done && gt_now_ms() - t0 < secs * 1e3)
        rc = ptsc_test(req, done);
    if (rc != PTSC_OK)
        *done = 1;
    return rc;
}

static void case_pointer(ptsc_ctx_t *ctx)
{
    ptsc_memclass_t cls = PTSC_MEM_DEVICE;
    int *freed = NULL;
    /* A freed allocation and a made-up address: host memory to CUDA. */
    GT_CUDA(cudaMalloc((void **)&freed, 1 << 20));
    GT_CUDA(cudaFree(freed));
    GT_OK(ptsc_mem_forget());
    GT_OK(ptsc_mem_class(freed, &cls));
    GT_CHECK(cls == PTSC_MEM_HOST, "a freed device pointer classifies as %d, not as host memory (%d)",
             (int)cls, (int)PTSC_MEM_HOST);
    cls = PTSC_MEM_DEVICE;
    GT_OK(ptsc_mem_class((void *)(uintptr_t)0x10, &cls));
    GT_CHECK(cls == PTSC_MEM_HOST, "address 0x10 classifies as %d, not as host memory", (int)cls);

    /* A device buffer of 64 KiB sent as 128 KiB: staged (below the direct
     * minimum and the chunk), so CUDA's copy meets the bad range. */
    const size_t n = 16384, over = 2 * n;
    int *d = NULL;
    GT_CUDA(cudaMalloc((void **)&d, n * sizeof *d));
    if (!d)
        return;
    GT_CUDA(ptsc_tk_spin_fill(d, n, 7, 0, gt_stream(ctx)));
    ptsc_request_t req = PTSC_REQUEST_NULL;
    int rc = ptsc_isend(ctx, d, (int)over, MPI_INT, gt_rank, 0, TAG, &req), done = 1;
    if (rc == PTSC_OK)
        rc = poll_wait(&req, 10, &done);
    printf("pointer: ptsc_isend of %zu ints from a %zu-int allocation: %s: %s\n", over, n,
           ptsc_status_name(rc), ptsc_last_error());
    if (!done) {
        /* CUDA copied past the allocation without a word: take the message
         * off MPI's hands so that the run ends, and report it. */
        int *sink = malloc(over * sizeof *sink);
        GT_CHECK(0, "the send of a buffer past its allocation did not fail within 10 s");
        if (sink)
            GT_OK(ptsc_recv(ctx, sink, (int)over, MPI_INT, gt_rank, 0, TAG));
        GT_OK(ptsc_wait(&req));
        free(sink);
    } else {
        GT_RC(rc, PTSC_ERR_CUDA);
        GT_CHECK(has(ptsc_last_error(), "cudaMemcpyAsync") && has(ptsc_last_error(), "cudaError"),
                 "the detail names neither the CUDA call nor CUDA's error: \"%s\"", ptsc_last_error());
        rc = ptsc_send(ctx, d, (int)over, MPI_INT, gt_rank, 0, TAG);
        printf("pointer: ptsc_send of the same: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
        GT_RC(rc, PTSC_ERR_CUDA);
        GT_CHECK(has(ptsc_last_error(), "cudaMemcpyAsync"), "ptsc_send's detail: \"%s\"", ptsc_last_error());
    }
    /* Not sticky: the thread goes on. */
    GT_OK(ptsc_sync(ctx, PTSC_SCOPE_THREAD));
    GT_CUDA(cudaGetLastError());
    GT_CHECK(self_message(ctx, d, n, 7, TAG + 1), "the next device message after the failed ones");
    GT_CUDA(cudaFree(d));
}

/* ------------------------------------------------------------------------ */
/* devmap                                                                    */
/* ------------------------------------------------------------------------ */

static void *devmap_thread1(void *unused)
{
    ptsc_ctx_t *ctx = NULL;
    int host = 5;
    (void)unused;
    int rc = ptsc_thread_attach(1, &ctx);
    printf("devmap: ptsc_thread_attach(1): %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
    GT_RC(rc, PTSC_ERR_CONFIG);
    GT_CHECK(has(ptsc_last_error(), "PTSC_DEVICE_MAP") && has(ptsc_last_error(), "99"),
             "the detail names neither the variable nor the device: \"%s\"", ptsc_last_error());
    GT_CHECK(ctx == NULL, "a failed attach wrote the context");
    /* The index stays free and the thread unattached: the same again. */
    GT_RC(ptsc_thread_attach(1, &ctx), PTSC_ERR_CONFIG);
    /* Lazily: ptsc_self and a call with ctx NULL take the lowest free
     * index, 1 (the main thread holds 0). */
    GT_RC(ptsc_self(&ctx), PTSC_ERR_CONFIG);
    rc = ptsc_send(NULL, &host, 1, MPI_INT, gt_rank, 0, TAG);
    GT_RC(rc, PTSC_ERR_CONFIG);
    GT_CHECK(has(ptsc_last_error(), "PTSC_DEVICE_MAP"), "lazy attach's detail: \"%s\"", ptsc_last_error());
    GT_RC(ptsc_thread_detach(), PTSC_ERR_NOT_ATTACHED);
    return NULL;
}

static void case_devmap(ptsc_ctx_t *ctx)
{
    int dev = -1, *d = NULL;
    GT_OK(ptsc_ctx_device(ctx, &dev));
    GT_CHECK(dev == 0, "thread 0 is on device %d, PTSC_DEVICE_MAP=0,99 says 0", dev);
    pthread_t th;
    pthread_create(&th, NULL, devmap_thread1, NULL);
    pthread_join(th, NULL);
    GT_CUDA(cudaMalloc((void **)&d, N_OK * sizeof *d));
    if (!d)
        return;
    GT_CUDA(ptsc_tk_spin_fill(d, N_OK, 9, 0, gt_stream(ctx)));
    GT_CHECK(self_message(ctx, d, N_OK, 9, TAG), "thread 0's device message beside the failed attach");
    GT_CUDA(cudaFree(d));
}

/* ------------------------------------------------------------------------ */
/* sticky                                                                    */
/* ------------------------------------------------------------------------ */

/* `rc` must be PTSC_ERR_CUDA with CUDA's error name in the detail. */
static void expect_cuda(const char *what, int rc)
{
    printf("sticky: %s: %s: %s\n", what, ptsc_status_name(rc), ptsc_last_error());
    fflush(stdout);
    GT_CHECK(rc == PTSC_ERR_CUDA && has(ptsc_last_error(), "cudaError"), "%s: %s, detail \"%s\"", what,
             ptsc_status_name(rc), ptsc_last_error());
}

static void case_sticky(ptsc_ctx_t *ctx)
{
    int *d = NULL, *e = NULL;
    GT_CUDA(cudaMalloc((void **)&d, N_OK * sizeof *d));
    GT_CUDA(cudaMalloc((void **)&e, N_OK * sizeof *e));
    if (!d || !e)
        return;
    GT_CUDA(ptsc_tk_spin_fill(d, N_OK, 3, 0, gt_stream(ctx)));
    GT_CHECK(self_message(ctx, d, N_OK, 3, TAG), "a device message before the fault");
    /* The program's kernel writes through address 0x10 on the thread's stream. */
    GT_CUDA(ptsc_tk_spin_fill((int *)(uintptr_t)0x10, N_OK, 4, 0, gt_stream(ctx)));
    expect_cuda("ptsc_sync(thread) after the kernel", ptsc_sync(ctx, PTSC_SCOPE_THREAD));
    expect_cuda("ptsc_sync(device)", ptsc_sync(ctx, PTSC_SCOPE_DEVICE));

    /* A device send: refused before anything reaches MPI, or failed in its
     * request; it must not wait for a receive. */
    ptsc_request_t req = PTSC_REQUEST_NULL;
    int rc = ptsc_isend(ctx, d, N_OK, MPI_INT, gt_rank, 0, TAG, &req), done = 1;
    if (rc == PTSC_OK)
        rc = poll_wait(&req, 10, &done);
    GT_CHECK(done, "ptsc_isend of a device buffer after a sticky error: no status within 10 s");
    if (!done) {
        fflush(stdout);
        _exit(1); /* the send may wait forever; finalize would drain it */
    }
    expect_cuda("ptsc_isend of a device buffer", rc);

    /* A collective of device buffers (one rank: it reduces locally). */
    expect_cuda("ptsc_allreduce of device buffers", ptsc_allreduce(ctx, d, e, N_OK, MPI_INT, MPI_SUM));
    /* Host-only MPI traffic does not touch the device; whatever CUDA says
     * to ptsc's buffer classification is reported, not waited for. */
    int x = 1, y = 0;
    rc = ptsc_sendrecv(ctx, &x, 1, MPI_INT, gt_rank, 0, TAG, &y, 1, MPI_INT, gt_rank, 0, TAG);
    printf("sticky: a host message to itself: %s: %s\n", ptsc_status_name(rc), ptsc_last_error());
    GT_CHECK(rc == PTSC_OK ? y == 1 : rc == PTSC_ERR_CUDA, "host message: %s, y = %d", ptsc_status_name(rc),
             y);
    /* The allocations are left: cudaFree fails in a broken context too. */
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "pointer") != 0 && strcmp(mode, "devmap") != 0 && strcmp(mode, "sticky") != 0) {
        fprintf(stderr, "usage: %s pointer|devmap|sticky\n", argv[0]);
        return 2;
    }
    int rc = gt_require_gpu("test_gpu_faults");
    if (rc)
        return rc;
    setenv("PTSC_MAX_THREADS", "2", 1);
    if (ptsc_init(&argc, &argv) != PTSC_OK) {
        fprintf(stderr, "ptsc_init: %s\n", ptsc_last_error());
        return 1;
    }
    GT_OK(ptsc_rank(&gt_rank));
    GT_OK(ptsc_thread_attach(0, &g_ctx));
    if (g_ctx) {
        if (strcmp(mode, "pointer") == 0) {
            pthread_t th;
            pthread_create(&th, NULL, helper, NULL);
            while (atomic_load(&helper_rounds) < 2)
                sched_yield();
            case_pointer(g_ctx);
            atomic_store(&helper_stop, 1);
            pthread_join(th, NULL);
            GT_CHECK(atomic_load(&helper_bad) == 0, "thread 1 received %d corrupted messages",
                     atomic_load(&helper_bad));
        } else if (strcmp(mode, "devmap") == 0) {
            case_devmap(g_ctx);
        } else {
            case_sticky(g_ctx);
        }
    }
    char name[64];
    snprintf(name, sizeof name, "test_gpu_faults %s", mode);
    rc = gt_finish(name);
    /* After a sticky error the context's release meets CUDA errors; it
     * must still return. */
    int frc = ptsc_finalize();
    if (frc != PTSC_OK) {
        fprintf(stderr, "FAIL ptsc_finalize: %s: %s\n", ptsc_status_name(frc), ptsc_last_error());
        rc = 1;
    }
    return rc;
}
