/*
 * bench_staging: how device buffers best reach another rank.
 *
 *   direct  ptsc hands the device pointer to a CUDA-aware MPI;
 *   ceiling the lower of two bandwidths measured in the same rounds: MPI's
 *           own ping-pong of the pinned host buffer (no device copy) and a
 *           device-to-host cudaMemcpy of the size (rank 0 alone); no staged
 *           path can beat it. Reported as best staged / ceiling;
 *   direct by hand  the same written by hand: cudaStreamSynchronize of the
 *           thread's stream, then MPI_Send / MPI_Recv of the device buffer
 *           (what ptsc's thread scope replaces);
 *   auto    ptsc's default on a CUDA-aware MPI: staged below
 *           PTSC_DIRECT_MIN, direct above (the per-message path choice);
 *   staged  ptsc copies through the per-thread staging ring, pipelined in
 *           chunks of PTSC_STAGING_CHUNK (several chunk sizes);
 *   manual  what a program does by hand: cudaMemcpy to pinned memory, then
 *           MPI_Send (and MPI_Recv, then cudaMemcpy back);
 *   matched the same, the receive matched first (MPI_Mprobe + MPI_Mrecv),
 *           which is how ptsc receives (a message larger than the receive
 *           is then taken beside the buffer: see PTSC_RECV_GUARD): what a
 *           program pays by hand for MPI's truncation to be safe;
 *   stream  the same by hand the way ptsc's staged path does it: the copy
 *           on the thread's stream and a stream sync before MPI_Send; the
 *           receive matched first (MPI_Mprobe + MPI_Mrecv) and the copy back
 *           queued on the stream. ptsc's staged path against this column is
 *           ptsc's own cost; against manual, the cost of the mechanism.
 * A ping-pong between thread 0 of rank 0 and rank 1, for 4 KiB .. 64 MiB;
 * reported in GB/s (2 x bytes per round trip) with ratios to manual, and
 * auto against the better of manual and direct, and of matched and direct. Every column is measured
 * in ROUNDS interleaved rounds (manual, stream, direct, auto, staged, then
 * again) and reported as its median, so that drift of the machine during
 * the run does not land on one column.
 *
 * Then: how long ptsc_isend of a device buffer takes to return while a
 * 10 ms kernel is still running on the thread's stream (it must not wait
 * for it), on each path.
 *
 * The transfer path is normally fixed at ptsc_init for the whole job. To
 * compare them side by side in one run this benchmark links ptsc_internal
 * and switches ptsc__g's path fields and the chunk size between phases, on
 * both ranks at the same point with nothing in flight, dropping the staging
 * ring (its slots are one chunk). Programs must never do this: use
 * PTSC_STAGING / PTSC_STAGING_CHUNK / PTSC_DIRECT_MIN.
 *
 * Without a device it compares ptsc_send of host buffers with plain MPI,
 * i.e. the overhead of ptsc's layer.
 *
 *   mpiexec -n 2 bench_staging [--max-bytes B] [--chunks 262144,1048576,...] [--quick]
 */
#include "bench_util.h"
#include "ptsc_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAXCHUNKS 8

typedef struct {
    int rank, gpu;
    ptsc_ctx_t *ctx;
    void *dev;  /* device buffer (or host buffer without a GPU) */
    void *host; /* pinned host buffer for the manual path */
    int quick;
} bench_t;

/* Benchmark-only: switch the job's transfer path (see the top comment). */
static void set_path(bench_t *b, int staging, size_t chunk, size_t direct_min)
{
    MPI_Barrier(MPI_COMM_WORLD);
    ptsc__ring_destroy(b->ctx);
    ptsc__g.staging = staging;
    ptsc__g.framed = staging;
    ptsc__g.cfg.staging_chunk = chunk;
    ptsc__g.direct_min = direct_min;
    ptsc_mem_forget(); /* cached classes depend on the path */
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Microseconds ptsc_isend of a device buffer takes to return while a 10 ms
 * kernel runs on the thread's stream (median of a few); rank 1 receives. */
static double isend_behind_kernel(bench_t *b, size_t bytes)
{
    double us[5];
    void *stream = NULL;
    BENCH_CHECK(ptsc_ctx_stream(b->ctx, &stream));
    for (int i = 0; i < 5; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (b->rank == 0) {
            ptsc_request_t r;
            BENCH_CHECK(bench_gpu_spin(10 * 1000 * 1000LL, stream));
            double t0 = bench_now();
            BENCH_CHECK(ptsc_isend(b->ctx, b->dev, (int)bytes, MPI_BYTE, 1, 0, 3, &r));
            us[i] = (bench_now() - t0) * 1e6;
            BENCH_CHECK(ptsc_wait(&r));
        } else {
            BENCH_CHECK(ptsc_recv(b->ctx, b->dev, (int)bytes, MPI_BYTE, 0, 0, 3));
            us[i] = 0;
        }
    }
    BENCH_CHECK(ptsc_sync(b->ctx, PTSC_SCOPE_THREAD));
    for (int i = 1; i < 5; i++) /* insertion sort: median of five */
        for (int j = i; j > 0 && us[j] < us[j - 1]; j--) {
            double t = us[j];
            us[j] = us[j - 1];
            us[j - 1] = t;
        }
    return us[2];
}

/* Round trips per size, over all rounds: 1 GiB of traffic, at least 10
 * and at most 4000. At 64 KiB a round of 1000 / 5 round trips took 14 ms
 * on the H200 and the ratios moved by 5 % between runs; 4000 / 7 make
 * every sample at least 40 ms there. */
static int reps_for(size_t bytes, int quick)
{
    size_t r = (size_t)1 << 30;
    r /= bytes;
    r = r < 10 ? 10 : r > 4000 ? 4000 : r;
    return quick ? (int)(r / 10 < 3 ? 3 : r / 10) : (int)r;
}

/* Round trips through ptsc; returns seconds for `reps` of them. */
static double pingpong_ptsc(bench_t *b, size_t bytes, int reps)
{
    const int n = (int)bytes, peer = 1 - b->rank;
    double t0 = 0;
    for (int r = -2; r < reps; r++) { /* two warm-up round trips */
        if (r == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
        }
        if (b->rank == 0) {
            BENCH_CHECK(ptsc_send(b->ctx, b->dev, n, MPI_BYTE, peer, 0, 0));
            BENCH_CHECK(ptsc_recv(b->ctx, b->dev, n, MPI_BYTE, peer, 0, 0));
        } else {
            BENCH_CHECK(ptsc_recv(b->ctx, b->dev, n, MPI_BYTE, peer, 0, 0));
            BENCH_CHECK(ptsc_send(b->ctx, b->dev, n, MPI_BYTE, peer, 0, 0));
        }
    }
    /* A staged receive may still be copying to the device on the stream. */
    BENCH_CHECK(ptsc_sync(b->ctx, PTSC_SCOPE_THREAD));
    return bench_now() - t0;
}

enum { BY_HAND, BY_HAND_MATCHED, BY_HAND_STREAM, BY_HAND_DIRECT, BY_HAND_HOST };

/* The same round trips by hand on pinned memory (or plain MPI on the host
 * buffer without a GPU): cudaMemcpy + MPI_Send / MPI_Recv + cudaMemcpy, the
 * same with a matched receive (BY_HAND_MATCHED), or the copies on the
 * thread's stream with a matched receive, as ptsc stages (BY_HAND_STREAM). */
static double pingpong_manual(bench_t *b, size_t bytes, int reps, int how)
{
    const int on_stream = how == BY_HAND_STREAM, matched = how == BY_HAND_MATCHED || on_stream;
    const int n = (int)bytes, peer = 1 - b->rank, direct = how == BY_HAND_DIRECT;
    const int host_only = how == BY_HAND_HOST; /* MPI alone, on the pinned buffer */
    void *wire = b->gpu && !direct ? b->host : b->dev, *stream = NULL;
    BENCH_CHECK(ptsc_ctx_stream(b->ctx, &stream));
    double t0 = 0;
    for (int r = -2; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
        }
        for (int leg = 0; leg < 2; leg++) {
            if ((leg == 0) == (b->rank == 0)) {
                if (host_only) {
                    ;
                } else if (b->gpu && direct) {
                    BENCH_CHECK(bench_gpu_stream_sync(stream));
                } else if (b->gpu && on_stream) {
                    BENCH_CHECK(bench_gpu_copy_async(b->host, b->dev, bytes, stream));
                    BENCH_CHECK(bench_gpu_stream_sync(stream));
                } else if (b->gpu) {
                    BENCH_CHECK(bench_gpu_memcpy(b->host, b->dev, bytes));
                }
                MPI_Send(wire, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
            } else {
                if (matched) {
                    MPI_Message m;
                    MPI_Status st;
                    MPI_Mprobe(peer, 7, MPI_COMM_WORLD, &m, &st);
                    MPI_Mrecv(wire, n, MPI_BYTE, &m, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(wire, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                if (direct || host_only)
                    ;
                else if (b->gpu && on_stream) /* the next copy on the stream is ordered after it */
                    BENCH_CHECK(bench_gpu_copy_async(b->dev, b->host, bytes, stream));
                else if (b->gpu)
                    BENCH_CHECK(bench_gpu_memcpy(b->dev, b->host, bytes));
            }
        }
    }
    if (b->gpu && on_stream)
        BENCH_CHECK(bench_gpu_stream_sync(stream));
    return bench_now() - t0;
}

#define ROUNDS 7

/* GB/s of a device-to-host cudaMemcpy of `bytes` into the pinned buffer,
 * on rank 0 alone (the ranks share the GPU; in a ping-pong one rank copies
 * at a time); rank 1 gets 0. */
static double d2h_gbps(bench_t *b, size_t bytes, int reps)
{
    double t = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (b->rank == 0) {
        BENCH_CHECK(bench_gpu_memcpy(b->host, b->dev, bytes)); /* warm */
        double t0 = bench_now();
        for (int r = 0; r < reps; r++)
            BENCH_CHECK(bench_gpu_memcpy(b->host, b->dev, bytes));
        t = bench_now() - t0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return t > 0 ? (double)bytes * reps / t / 1e9 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double gbps(size_t bytes, int reps, double sec)
{
    return sec > 0 ? 2.0 * bytes * reps / sec / 1e9 : 0;
}

static int parse_chunks(const char *s, size_t *chunks)
{
    int n = 0;
    while (s && *s && n < MAXCHUNKS) {
        char *end;
        unsigned long long c = strtoull(s, &end, 0);
        if (c < 4096 || (*end != ',' && *end != '\0'))
            return -1;
        chunks[n++] = (size_t)c;
        s = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    BENCH_CHECK(ptsc_init(&argc, &argv));
    bench_t b = {0};
    int nranks;
    size_t max_bytes = (size_t)64 << 20;
    size_t chunks[MAXCHUNKS] = {(size_t)256 << 10, (size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20};
    int nchunks = 4;
    BENCH_CHECK(ptsc_rank(&b.rank));
    BENCH_CHECK(ptsc_size(&nranks, NULL));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            b.quick = 1;
            max_bytes = (size_t)4 << 20;
        } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
            max_bytes = (size_t)strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--chunks") && i + 1 < argc &&
                   (nchunks = parse_chunks(argv[++i], chunks)) > 0) {
            continue;
        } else {
            if (b.rank == 0)
                fprintf(stderr,
                        "usage: bench_staging [--max-bytes B] [--chunks C1,C2,...] [--quick]\n"
                        "  (chunks of at least 4096 bytes, at most %d)\n",
                        MAXCHUNKS);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nranks != 2) {
        if (b.rank == 0)
            fprintf(stderr, "bench_staging: run it on exactly 2 ranks (got %d)\n", nranks);
        ptsc_finalize();
        return 2;
    }
    if (max_bytes < 4096 || max_bytes > ((size_t)1 << 30)) {
        if (b.rank == 0)
            fprintf(stderr, "bench_staging: --max-bytes must be 4096 .. 1 GiB\n");
        ptsc_finalize();
        return 2;
    }
    /* An explicitly attached thread: the auto scope is then "thread". */
    BENCH_CHECK(ptsc_thread_attach(0, &b.ctx));
    b.gpu = bench_gpu_available();
    const int saved_staging = ptsc__g.staging;
    const size_t saved_chunk = ptsc__g.cfg.staging_chunk, saved_dmin = ptsc__g.direct_min;
    const size_t auto_dmin =
        ptsc__g.cfg.direct_min == PTSC__SIZE_AUTO ? PTSC__DIRECT_MIN_AUTO : ptsc__g.cfg.direct_min;
    if (b.gpu) {
        BENCH_CHECK(bench_gpu_malloc(&b.dev, max_bytes));
        BENCH_CHECK(bench_gpu_pinned(&b.host, max_bytes));
    } else if (!(b.dev = calloc(1, max_bytes))) {
        fprintf(stderr, "bench_staging: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Direct needs an MPI that reads device memory; ptsc__g.cuda_aware is
     * the effective answer (MPIX_Query_cuda_support or PTSC_CUDA_AWARE). */
    const int direct_ok = !b.gpu || ptsc__g.cuda_aware;
    char sz[32], cs[32];
    if (b.rank == 0) {
        printf("## bench_staging: device buffer ping-pong, 2 ranks, GB/s = 2 x size / round trip\n\n");
        if (!b.gpu)
            printf("No CUDA device (or CUDA not built): host buffers, so nothing is staged. Compared: plain "
                   "MPI_Send/Recv and ptsc_send/recv of the same pageable buffer.\n\n");
        else if (!direct_ok)
            printf("direct skipped: MPI is not CUDA-aware (MPIX_Query_cuda_support() = %d); set "
                   "PTSC_CUDA_AWARE=yes only if it really is.\n\n",
                   ptsc__mpi_cuda_support());
        if (b.gpu) {
            printf(
                "Median of %d interleaved rounds per column.\n\n| size | manual (cudaMemcpy + MPI) | matched "
                "(manual, receive by MPI_Mprobe + MPI_Mrecv) | stream (by hand as ptsc stages) | direct | "
                "direct "
                "by hand (stream sync + MPI) | "
                "auto "
                "(staged below %s) |",
                b.quick ? 1 : ROUNDS, bench_size_text(auto_dmin, cs, sizeof cs));
            for (int c = 0; c < nchunks; c++)
                printf(" staged, chunk %s |", bench_size_text(chunks[c], cs, sizeof cs));
            printf(
                " MPI host (pinned, no copy) | D2H copy | best staged / manual | best staged / stream | best "
                "staged / ceiling | direct / manual | auto / max(manual, direct) | auto / max(matched, "
                "direct) "
                "| direct / direct by hand |\n|---:|---:|---:|---:|---:|---:|---:|");
            for (int c = 0; c < nchunks; c++)
                printf("---:|");
            printf("---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        } else {
            printf("| size | MPI GB/s | ptsc GB/s | ptsc / MPI |\n|---:|---:|---:|---:|\n");
        }
    }

    /* Columns: manual, matched, stream, direct, direct by hand, auto, MPI on
     * the host buffer, the device-to-host copy, then staged per chunk. */
    enum { C_MANUAL, C_MATCHED, C_STREAM, C_DIRECT, C_DHAND, C_AUTO, C_HOST, C_D2H, C_STAGED };
    const int rounds = b.quick ? 1 : ROUNDS;
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        const int reps = (reps_for(bytes, b.quick) + rounds - 1) / rounds;
        double v[C_STAGED + MAXCHUNKS][ROUNDS] = {{0}}, col[C_STAGED + MAXCHUNKS] = {0};
        for (int k = 0; k < rounds; k++) {
            v[C_MANUAL][k] = gbps(bytes, reps, pingpong_manual(&b, bytes, reps, BY_HAND));
            if (b.gpu) {
                v[C_MATCHED][k] = gbps(bytes, reps, pingpong_manual(&b, bytes, reps, BY_HAND_MATCHED));
                v[C_STREAM][k] = gbps(bytes, reps, pingpong_manual(&b, bytes, reps, BY_HAND_STREAM));
                v[C_HOST][k] = gbps(bytes, reps, pingpong_manual(&b, bytes, reps, BY_HAND_HOST));
                v[C_D2H][k] = d2h_gbps(&b, bytes, reps);
            }
            if (direct_ok) {
                set_path(&b, 0, saved_chunk, 0);
                v[C_DIRECT][k] = gbps(bytes, reps, pingpong_ptsc(&b, bytes, reps));
                if (b.gpu) {
                    v[C_DHAND][k] = gbps(bytes, reps, pingpong_manual(&b, bytes, reps, BY_HAND_DIRECT));
                    set_path(&b, 0, saved_chunk, auto_dmin < saved_chunk ? auto_dmin : saved_chunk);
                    v[C_AUTO][k] = gbps(bytes, reps, pingpong_ptsc(&b, bytes, reps));
                }
            }
            for (int c = 0; b.gpu && c < nchunks; c++) {
                set_path(&b, 1, chunks[c], 0);
                v[C_STAGED + c][k] = gbps(bytes, reps, pingpong_ptsc(&b, bytes, reps));
            }
        }
        for (int c = 0; c < C_STAGED + nchunks; c++)
            col[c] = median(v[c], rounds);
        double manual = col[C_MANUAL], direct = col[C_DIRECT];
        if (!b.gpu) {
            if (b.rank == 0)
                printf("| %s | %.3f | %.3f | %.2f |\n", bench_size_text(bytes, sz, sizeof sz), manual, direct,
                       direct / manual);
            fflush(stdout);
            continue;
        }
        double best = 0;
        for (int c = 0; c < nchunks; c++)
            best = col[C_STAGED + c] > best ? col[C_STAGED + c] : best;
        if (b.rank == 0) {
            printf("| %s | %.2f | %.2f | %.2f | ", bench_size_text(bytes, sz, sizeof sz), manual,
                   col[C_MATCHED], col[C_STREAM]);
            if (direct_ok)
                printf("%.2f | %.2f | %.2f |", direct, col[C_DHAND], col[C_AUTO]);
            else
                printf("skipped | skipped | skipped |");
            for (int c = 0; c < nchunks; c++)
                printf(" %.2f |", col[C_STAGED + c]);
            double ceiling = col[C_HOST] < col[C_D2H] ? col[C_HOST] : col[C_D2H];
            printf(" %.2f | %.2f | %.2f | %.2f | %.2f |", col[C_HOST], col[C_D2H], best / manual,
                   best / col[C_STREAM], best / ceiling);
            double matched = col[C_MATCHED];
            if (direct_ok)
                printf(" %.2f | %.2f | %.2f | %.2f |\n", direct / manual,
                       col[C_AUTO] / (direct > manual ? direct : manual),
                       col[C_AUTO] / (direct > matched ? direct : matched), direct / col[C_DHAND]);
            else
                printf(" - | - | - | - |\n");
            fflush(stdout);
        }
    }
    if (b.gpu) {
        static const size_t isz[] = {(size_t)64 << 10, (size_t)4 << 20};
        if (b.rank == 0)
            printf("\n## ptsc_isend of a device buffer behind a 10 ms kernel on the thread's stream\n\n"
                   "Median of 5, microseconds until ptsc_isend returned.\n\n| size | path | isend returns "
                   "after (us) |\n|---:|---|---:|\n");
        for (int i = 0; i < 2 && isz[i] <= max_bytes; i++) {
            for (int path = 0; path < 3; path++) {
                if (path < 2 && !direct_ok)
                    continue;
                if (path == 0)
                    set_path(&b, 0, saved_chunk, 0);
                else if (path == 1)
                    set_path(&b, 0, saved_chunk, auto_dmin < saved_chunk ? auto_dmin : saved_chunk);
                else
                    set_path(&b, 1, saved_chunk, 0);
                double us = isend_behind_kernel(&b, isz[i]);
                if (b.rank == 0)
                    printf("| %s | %s | %.1f |\n", bench_size_text(isz[i], sz, sizeof sz),
                           path == 0   ? "direct"
                           : path == 1 ? "auto"
                                       : "staged",
                           us);
            }
        }
        fflush(stdout);
    }
    set_path(&b, saved_staging, saved_chunk, saved_dmin);
    if (b.gpu) {
        bench_gpu_free(b.dev);
        bench_gpu_free_pinned(b.host);
    } else {
        free(b.dev);
    }
    BENCH_CHECK(ptsc_thread_detach());
    BENCH_CHECK(ptsc_finalize());
    return 0;
}
