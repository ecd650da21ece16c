/*
 * bench_overlap: does a message move while its thread computes?
 *
 * 2 ranks, one attached thread each. Per size (4 KiB .. 64 MiB, powers of
 * 4) and round:
 *   1. a buffer is produced: on the sender a kernel on the thread's bound
 *      stream writes a checkable pattern (not waited for), on the receiver
 *      another pattern (poison, waited for) so that stale data fails;
 *   2. rank 0 ptsc_isend, rank 1 ptsc_irecv;
 *   3. both compute on the host without calling ptsc: a busy loop of twice
 *      the size's transfer time (--compute-factor F: F times; the transfer
 *      measured first by a ptsc ping-pong of the size, half a round trip);
 *   4. ptsc_wait. Reported: the time from the end of the computation to
 *      the wait's return on each rank (median over the rounds) and the
 *      larger of the two against the transfer time. The receiver checks
 *      every byte of every round.
 * Beside it, in the same rounds, the same program by hand (MPI alone, no
 * ptsc): on a CUDA-aware MPI cudaStreamSynchronize of the stream and then
 * MPI_Isend / MPI_Irecv on the device buffer; on another MPI the sender
 * copies to pinned memory (cudaMemcpyAsync on the stream, synchronized)
 * and MPI_Isend's it, the receiver MPI_Irecv's into pinned memory and
 * queues the copy to the device after MPI_Wait; without a device,
 * MPI_Isend / MPI_Irecv of the host buffer. The same computation, then
 * MPI_Wait, timed the same way.
 *
 * The path is the run's (ptsc reads its variables once, at ptsc_init), so a
 * run measures one path and one progress mode; the program says which it
 * got (ptsc_features and the effective PTSC_* values):
 *   staged   PTSC_STAGING=always (or auto on an MPI that is not
 *            CUDA-aware), the default 4 MiB chunk: one piece up to 4 MiB;
 *   framed   the same with a small PTSC_STAGING_CHUNK (256k): large
 *            messages in many pieces;
 *   direct   PTSC_STAGING=never PTSC_DIRECT_MIN=0 on a CUDA-aware MPI
 *            (rows below PTSC_DIRECT_MIN are staged and say so); skipped
 *            rows when MPI is not CUDA-aware;
 * and PTSC_PROGRESS=thread (the agent moves the message during the
 * computation) or caller (only the wait moves it). Without a device the
 * buffers are host memory: PTSC_STAGING=always then still sends thread 0's
 * messages through the staging ring, framed above the chunk.
 *
 *   mpiexec -n 2 bench_overlap [--quick] [--max-bytes B] [--rounds N]
 *   (tests/bench/run_all.py runs it per path and progress mode)
 */
#include "bench_pattern.h"
#include "bench_util.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 31
#define TAG_OVERLAP 1
#define TAG_PINGPONG 2
#define MPI_TAG_HAND 11

typedef struct {
    int rank, gpu, quick, rounds;
    ptsc_ctx_t *ctx;
    void *stream;
    void *buf;       /* the message: device memory, or host memory without a device */
    void *pinned;    /* by hand on an MPI that is not CUDA-aware */
    unsigned *check; /* the receiver's host copy for checking (device runs) */
    int staging, cuda_aware, hand_direct;
    size_t chunk, direct_min;
    char progress[32];
    long checked, bad;
} ov_t;

/* An effective PTSC_* value as ptsc_config_print shows it ("" if absent). */
static void config_value(const char *name, char *out, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    out[0] = '\0';
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    ptsc_config_print(f);
    fclose(f);
    size_t nl = strlen(name);
    for (const char *p = text; p && *p;) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, name, nl) && (p[nl] == ' ' || p[nl] == '=')) {
            const char *v = strchr(p, '=');
            if (v) {
                v++;
                while (*v == ' ')
                    v++;
                size_t k = strcspn(v, " \n");
                k = k < n - 1 ? k : n - 1;
                memcpy(out, v, k);
                out[k] = '\0';
            }
            break;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    free(text);
}

/* "4MiB", "256k", "4096" as bytes; `dflt` for anything else ("auto"). */
static size_t parse_size(const char *s, size_t dflt)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return dflt;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        break;
    default:
        break;
    }
    return (size_t)v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The host computation: a busy loop that calls neither ptsc nor MPI. */
static void compute(double seconds)
{
    volatile unsigned long spin = 0;
    const double end = bench_now() + seconds;
    while (bench_now() < end)
        spin++;
}

/* Fill the message buffer with bench_pattern(., seed): a kernel on the
 * thread's stream (not waited for), or the host. */
static void produce(ov_t *b, size_t bytes, unsigned seed)
{
    if (b->gpu) {
        BENCH_CHECK(bench_gpu_fill(b->buf, bytes, seed, b->stream));
        return;
    }
    unsigned *w = b->buf;
    for (size_t i = 0; i < bytes / sizeof *w; i++)
        w[i] = bench_pattern(i, seed);
}

/* The receiver checks every word of the message (stream work finished). */
static void check(ov_t *b, size_t bytes, unsigned seed, const char *what)
{
    const unsigned *w = b->buf;
    if (b->gpu) {
        BENCH_CHECK(bench_gpu_stream_sync(b->stream));
        BENCH_CHECK(bench_gpu_memcpy(b->check, b->buf, bytes));
        w = b->check;
    }
    b->checked++;
    for (size_t i = 0; i < bytes / sizeof *w; i++)
        if (w[i] != bench_pattern(i, seed)) {
            char sz[32];
            fprintf(stderr, "bench_overlap: FAIL: %s, %s: word %zu is 0x%08x, expected 0x%08x\n", what,
                    bench_size_text(bytes, sz, sizeof sz), i, w[i], bench_pattern(i, seed));
            b->bad++;
            return;
        }
}

/* Half a round trip through ptsc (seconds), over `reps` round trips; the
 * same on both ranks (rank 0's clock). */
static double transfer_ptsc(ov_t *b, size_t bytes, int reps)
{
    const int n = (int)bytes, peer = 1 - b->rank;
    double t0 = 0, t = 0;
    for (int r = -1; r < reps; r++) {
        if (r == 0) {
            BENCH_CHECK(ptsc_sync(b->ctx, PTSC_SCOPE_THREAD));
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
        }
        if (b->rank == 0) {
            BENCH_CHECK(ptsc_send(b->ctx, b->buf, n, MPI_BYTE, peer, 0, TAG_PINGPONG));
            BENCH_CHECK(ptsc_recv(b->ctx, b->buf, n, MPI_BYTE, peer, 0, TAG_PINGPONG));
        } else {
            BENCH_CHECK(ptsc_recv(b->ctx, b->buf, n, MPI_BYTE, peer, 0, TAG_PINGPONG));
            BENCH_CHECK(ptsc_send(b->ctx, b->buf, n, MPI_BYTE, peer, 0, TAG_PINGPONG));
        }
    }
    BENCH_CHECK(ptsc_sync(b->ctx, PTSC_SCOPE_THREAD));
    t = (bench_now() - t0) / reps / 2;
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

/* The same by hand (see the top comment). */
static double transfer_hand(ov_t *b, size_t bytes, int reps)
{
    const int n = (int)bytes, peer = 1 - b->rank;
    void *wire = b->gpu && !b->hand_direct ? b->pinned : b->buf;
    double t0 = 0, t = 0;
    for (int r = -1; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
        }
        for (int leg = 0; leg < 2; leg++) {
            if ((leg == 0) == (b->rank == 0)) {
                if (b->gpu && !b->hand_direct)
                    BENCH_CHECK(bench_gpu_copy_async(b->pinned, b->buf, bytes, b->stream));
                if (b->gpu)
                    BENCH_CHECK(bench_gpu_stream_sync(b->stream));
                MPI_Send(wire, n, MPI_BYTE, peer, MPI_TAG_HAND, MPI_COMM_WORLD);
            } else {
                MPI_Recv(wire, n, MPI_BYTE, peer, MPI_TAG_HAND, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (b->gpu && !b->hand_direct)
                    BENCH_CHECK(bench_gpu_copy_async(b->buf, b->pinned, bytes, b->stream));
            }
        }
    }
    if (b->gpu)
        BENCH_CHECK(bench_gpu_stream_sync(b->stream));
    t = (bench_now() - t0) / reps / 2;
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

/* One round through ptsc: produce, start, compute, wait. Returns this
 * rank's microseconds from the end of the computation to the wait's return. */
static double overlap_ptsc(ov_t *b, size_t bytes, double compute_s, unsigned seed)
{
    if (b->rank == 1) { /* poison, finished before the receive may write */
        produce(b, bytes, ~seed);
        BENCH_CHECK(ptsc_sync(b->ctx, PTSC_SCOPE_THREAD));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ptsc_request_t r;
    if (b->rank == 0) {
        produce(b, bytes, seed); /* the isend starts behind this kernel */
        BENCH_CHECK(ptsc_isend(b->ctx, b->buf, (int)bytes, MPI_BYTE, 1, 0, TAG_OVERLAP, &r));
    } else {
        BENCH_CHECK(ptsc_irecv(b->ctx, b->buf, (int)bytes, MPI_BYTE, 0, 0, TAG_OVERLAP, &r));
    }
    compute(compute_s);
    double t1 = bench_now();
    BENCH_CHECK(ptsc_wait(&r));
    double us = (bench_now() - t1) * 1e6;
    if (b->rank == 1) {
        BENCH_CHECK(ptsc_sync(b->ctx, PTSC_SCOPE_THREAD));
        check(b, bytes, seed, "ptsc");
    }
    return us;
}

/* The same round by hand. */
static double overlap_hand(ov_t *b, size_t bytes, double compute_s, unsigned seed)
{
    const int staged = b->gpu && !b->hand_direct;
    void *wire = staged ? b->pinned : b->buf;
    if (b->rank == 1) {
        produce(b, bytes, ~seed);
        if (b->gpu)
            BENCH_CHECK(bench_gpu_stream_sync(b->stream));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Request r;
    if (b->rank == 0) {
        produce(b, bytes, seed);
        if (staged)
            BENCH_CHECK(bench_gpu_copy_async(b->pinned, b->buf, bytes, b->stream));
        if (b->gpu)
            BENCH_CHECK(bench_gpu_stream_sync(b->stream));
        MPI_Isend(wire, (int)bytes, MPI_BYTE, 1, MPI_TAG_HAND, MPI_COMM_WORLD, &r);
    } else {
        MPI_Irecv(wire, (int)bytes, MPI_BYTE, 0, MPI_TAG_HAND, MPI_COMM_WORLD, &r);
    }
    compute(compute_s);
    double t1 = bench_now();
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (b->rank == 1 && staged)
        BENCH_CHECK(bench_gpu_copy_async(b->buf, b->pinned, bytes, b->stream));
    double us = (bench_now() - t1) * 1e6;
    if (b->rank == 1)
        check(b, bytes, seed, "by hand");
    return us;
}

int main(int argc, char **argv)
{
    BENCH_CHECK(ptsc_init(&argc, &argv));
    ov_t b = {0};
    int nranks;
    size_t max_bytes = (size_t)64 << 20;
    BENCH_CHECK(ptsc_rank(&b.rank));
    BENCH_CHECK(ptsc_size(&nranks, NULL));
    b.rounds = 7;
    int rounds_set = 0;
    double factor = 2.0; /* the computation, in transfer times */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            b.quick = 1;
        } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
            max_bytes = parse_size(argv[++i], 0);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            b.rounds = atoi(argv[++i]);
            rounds_set = 1;
        } else if (!strcmp(argv[i], "--compute-factor") && i + 1 < argc) {
            factor = atof(argv[++i]);
        } else {
            if (b.rank == 0)
                fprintf(stderr,
                        "usage: bench_overlap [--quick] [--max-bytes B] [--rounds N (1..%d)] "
                        "[--compute-factor F (0.5..64, default 2)]\n",
                        MAX_ROUNDS);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (b.quick) {
        max_bytes = max_bytes < ((size_t)1 << 20) ? max_bytes : (size_t)1 << 20;
        b.rounds = rounds_set ? b.rounds : 3;
    }
    if (nranks != 2 || b.rounds < 1 || b.rounds > MAX_ROUNDS || max_bytes < 4096 ||
        max_bytes > ((size_t)1 << 30) || !(factor >= 0.5 && factor <= 64)) {
        if (b.rank == 0)
            fprintf(stderr,
                    "bench_overlap: 2 ranks (got %d), --rounds 1..%d, --max-bytes 4096 .. 1 GiB, "
                    "--compute-factor 0.5..64\n",
                    nranks, MAX_ROUNDS);
        ptsc_finalize();
        return 2;
    }

    /* The path this run got. */
    int cuda = 0;
    BENCH_CHECK(ptsc_features(&cuda, &b.cuda_aware, &b.staging));
    char v[64];
    config_value("PTSC_STAGING_CHUNK", v, sizeof v);
    b.chunk = parse_size(v, (size_t)4 << 20);
    config_value("PTSC_DIRECT_MIN", v, sizeof v);
    b.direct_min = b.cuda_aware && !b.staging ? parse_size(v, (size_t)1 << 20) : 0;
    b.direct_min = b.direct_min < b.chunk ? b.direct_min : b.chunk;
    config_value("PTSC_PROGRESS", b.progress, sizeof b.progress);
    b.gpu = bench_gpu_available();
    b.hand_direct = b.cuda_aware;
    const char *path = b.staging ? (b.chunk >= ((size_t)4 << 20) ? "staged" : "framed") : "direct";
    const int skip = !b.staging && !b.cuda_aware;

    BENCH_CHECK(ptsc_thread_attach(0, &b.ctx));
    BENCH_CHECK(ptsc_ctx_stream(b.ctx, &b.stream));
    if (b.gpu) {
        BENCH_CHECK(bench_gpu_malloc(&b.buf, max_bytes));
        BENCH_CHECK(bench_gpu_pinned(&b.pinned, max_bytes));
        if (!(b.check = malloc(max_bytes))) {
            fprintf(stderr, "bench_overlap: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (bench_gpu_fill(b.buf, 4096, 1, b.stream) != PTSC_OK) {
            if (b.rank == 0)
                fprintf(stderr, "bench_overlap: the device run needs the fill kernel (a build with nvcc)\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else if (!(b.buf = malloc(max_bytes))) {
        fprintf(stderr, "bench_overlap: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    char sz[32], cs[32];
    if (b.rank == 0) {
        printf("## bench_overlap: a message while its thread computes, path %s, PTSC_PROGRESS=%s\n\n", path,
               b.progress);
        printf(
            "2 ranks, one attached thread each; %s buffers; ptsc_features: cuda %d, cuda_aware %d, staging "
            "%d; "
            "PTSC_STAGING_CHUNK %s. Per round: %s, rank 0 ptsc_isend / rank 1 ptsc_irecv, both compute "
            "on the host without calling ptsc for %g times the transfer time (half a ptsc ping-pong round "
            "trip of the size), then ptsc_wait. Wait = from the end of the computation to the wait's return, "
            "median of %d rounds; wait / transfer takes the larger of the two ranks. By hand, in the same "
            "rounds and with the same computation: %s, then MPI_Wait. The receiver checks every byte of "
            "every round. Goal: the wait under 5 %% of the transfer from 1 MiB up.\n\n",
            b.gpu ? "device" : "host (no device)", cuda, b.cuda_aware, b.staging,
            bench_size_text(b.chunk, cs, sizeof cs),
            b.gpu ? "a kernel on the thread's stream produces the message (not waited for)"
                  : "the host produces the message",
            factor, b.rounds,
            !b.gpu          ? "MPI_Isend / MPI_Irecv of the host buffer"
            : b.hand_direct ? "cudaStreamSynchronize, MPI_Isend / MPI_Irecv of the device buffer"
                            : "cudaMemcpyAsync to pinned memory + cudaStreamSynchronize, MPI_Isend / "
                              "MPI_Irecv into pinned memory, cudaMemcpyAsync to the device after MPI_Wait");
        printf(
            "| size | path | pieces | progress | transfer us | compute us | send wait us | recv wait us | "
            "wait / transfer | by hand transfer us | by hand send wait us | by hand recv wait us | by hand "
            "wait / transfer |\n|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        const char *text = bench_size_text(bytes, sz, sizeof sz);
        if (skip) {
            if (b.rank == 0)
                printf("| %s | direct | - | %s | skipped: MPI is not CUDA-aware | | | | | | | | |\n", text,
                       b.progress);
            continue;
        }
        size_t pieces = b.staging && bytes > b.chunk ? (bytes + b.chunk - 1) / b.chunk : 1;
        const char *row_path = !b.staging && bytes < b.direct_min ? "staged (below PTSC_DIRECT_MIN)" : path;
        size_t r = ((size_t)256 << 20) / bytes;
        const int reps = b.quick ? 3 : (int)(r < 3 ? 3 : r > 200 ? 200 : r);
        double t = transfer_ptsc(&b, bytes, reps), th = transfer_hand(&b, bytes, reps);
        double w[4][MAX_ROUNDS], all[4 * MAX_ROUNDS], mine[2 * MAX_ROUNDS] = {0};
        for (int k = 0; k < b.rounds; k++) {
            unsigned seed = (unsigned)(bytes >> 12) * 131u + (unsigned)k * 7u;
            if (k % 2 == 0) {
                mine[k] = overlap_ptsc(&b, bytes, factor * t, seed);
                mine[MAX_ROUNDS + k] = overlap_hand(&b, bytes, factor * t, seed + 1);
            } else {
                mine[MAX_ROUNDS + k] = overlap_hand(&b, bytes, factor * t, seed + 1);
                mine[k] = overlap_ptsc(&b, bytes, factor * t, seed);
            }
        }
        MPI_Gather(mine, 2 * MAX_ROUNDS, MPI_DOUBLE, all, 2 * MAX_ROUNDS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (b.rank != 0)
            continue;
        /* w: ptsc send (rank 0), ptsc recv (rank 1), by hand send, by hand recv. */
        for (int k = 0; k < b.rounds; k++) {
            w[0][k] = all[k];
            w[1][k] = all[2 * MAX_ROUNDS + k];
            w[2][k] = all[MAX_ROUNDS + k];
            w[3][k] = all[3 * MAX_ROUNDS + k];
        }
        double m[4];
        for (int c = 0; c < 4; c++)
            m[c] = median(w[c], b.rounds);
        double wp = m[0] > m[1] ? m[0] : m[1], wh = m[2] > m[3] ? m[2] : m[3];
        printf("| %s | %s | %zu | %s | %.1f | %.1f | %.1f | %.1f | %.3f | %.1f | %.1f | %.1f | %.3f |\n",
               text, row_path, pieces, b.progress, 1e6 * t, 1e6 * factor * t, m[0], m[1], wp / (1e6 * t),
               1e6 * th, m[2], m[3], wh / (1e6 * t));
        fflush(stdout);
    }
    long res[2] = {b.checked, b.bad}, tot[2] = {0, 0};
    MPI_Allreduce(res, tot, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (b.rank == 0) { /* the receiver checked */
        if (tot[1])
            printf("\nbench_overlap: FAILED: %ld of %ld received messages wrong\n", tot[1], tot[0]);
        else
            printf("\nbench_overlap: %ld received messages checked, all correct\n", tot[0]);
        fflush(stdout);
    }
    if (b.gpu) {
        bench_gpu_free(b.buf);
        bench_gpu_free_pinned(b.pinned);
        free(b.check);
    } else {
        free(b.buf);
    }
    BENCH_CHECK(ptsc_thread_detach());
    BENCH_CHECK(ptsc_finalize());
    return tot[1] || (!skip && tot[0] == 0) ? 1 : 0;
}
