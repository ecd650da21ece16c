/*
 * The interposer's staging of derived datatypes, differentially: a plain
 * MPI program (linked with libptsc-mpi) sends and receives random sparse
 * datatypes (vector, hvector, indexed, hindexed, indexed_block,
 * hindexed_block, struct, subarray, darray, resized, dup, pair types,
 * nested), shorter messages and truncated ones, to itself and around a
 * ring, through every receive path (Recv, Irecv + Wait or Test, Mrecv,
 * Sendrecv, persistent Recv_init). While a non-blocking receive runs the
 * program writes a marker into every byte of the receive buffer that is
 * not in the type map, which must survive.
 *
 *   mpi_interpose_dtypes PREFIX [ROUNDS] [SEED]
 *
 * Each rank writes one line per round to PREFIX.<rank>.txt: the error
 * class, MPI_Get_count and MPI_Get_elements (not under MPICH: see
 * round_one) of the status with the receive type, and a hash of the whole receive allocation.
 * diff_records.cmake runs it with PTSC_STAGING=never and =always and the
 * records must be identical. Each run also checks itself: a round that is
 * not truncated must leave exactly what MPI_Unpack of the sent data gives
 * (MPI_Pack and MPI_Unpack pass the interposer unseen), with the holes
 * still marked, and the interposer must have staged (always) or not
 * (never) as the environment says.
 */
#include <mpi.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failed;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "mpi_interpose_dtypes [rank %d] FAIL line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            failed++;                                                                         \
        }                                                                                     \
    } while (0)
#define MPI_OK(call) CHECK((call) == MPI_SUCCESS, "%s failed", #call)

enum { MARK = 0xEE };

/* xorshift64*: the same sequence on every rank for one seed. */
static uint64_t rng;
static unsigned pick(unsigned n)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (unsigned)((rng * 2685821657736338717ull) >> 33) % n;
}

static void free_derived(MPI_Datatype *t)
{
    int ni, na, nd, comb;
    MPI_Type_get_envelope(*t, &ni, &na, &nd, &comb);
    if (comb != MPI_COMBINER_NAMED)
        MPI_Type_free(t);
}

/* A random datatype (not committed), `depth` levels of constructors at
 * most; its description is appended to `d`. Blocks never overlap (a
 * receive type must not), and their order is often not the memory order. */
static MPI_Datatype gen(int depth, char *d, size_t dn)
{
    static const MPI_Datatype base[] = {MPI_CHAR,   MPI_SHORT,      MPI_INT,
                                        MPI_DOUBLE, MPI_DOUBLE_INT, MPI_FLOAT_INT};
    static const char *base_name[] = {"char", "short", "int", "double", "double_int", "float_int"};
    unsigned k = depth == 0 ? 0 : pick(13);
    if (k == 0) {
        unsigned b = pick(6);
        snprintf(d + strlen(d), dn - strlen(d), "%s", base_name[b]);
        return base[b];
    }
    static const char *names[] = {"",        "contig", "vector",   "hvector", "indexed", "hindexed", "idxblk",
                                  "hidxblk", "struct", "subarray", "resized", "dup",     "darray"};
    snprintf(d + strlen(d), dn - strlen(d), "%s(", names[k]);
    MPI_Datatype c = gen(depth - 1, d, dn), t = MPI_DATATYPE_NULL;
    MPI_Aint lb, ext;
    MPI_Type_get_extent(c, &lb, &ext);
    int n = 1 + (int)pick(4), bl = 1 + (int)pick(3), bls[4], dis[4], slot = bl + 2 + (int)pick(3);
    MPI_Aint hdis[4];
    int perm[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; i--) { /* a permutation of the block slots */
        int j = (int)pick((unsigned)i + 1), x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    for (int i = 0; i < 4; i++) {
        bls[i] = 1 + (int)pick((unsigned)bl);
        dis[i] = perm[i] * slot;
        hdis[i] = (MPI_Aint)dis[i] * ext + (MPI_Aint)pick(2); /* unaligned too */
    }
    switch (k) {
    case 1:
        MPI_Type_contiguous(n, c, &t);
        break;
    case 2:
        MPI_Type_vector(n, bl, slot, c, &t);
        break;
    case 3:
        MPI_Type_create_hvector(n, bl, (MPI_Aint)slot * ext + 3, c, &t);
        break;
    case 4:
        MPI_Type_indexed(n, bls, dis, c, &t);
        break;
    case 5:
        MPI_Type_create_hindexed(n, bls, hdis, c, &t);
        break;
    case 6:
        MPI_Type_create_indexed_block(n, bl, dis, c, &t);
        break;
    case 7:
        MPI_Type_create_hindexed_block(n, bl, hdis, c, &t);
        break;
    case 8: {
        /* Fields of the child and of base types, in permuted slots of w
         * bytes: the child's [lb, lb + extent) starts its slot. */
        MPI_Datatype f[4];
        MPI_Aint fd[4];
        MPI_Aint w = ext * bl + 32;
        for (int i = 0; i < n; i++) {
            f[i] = i == 0 ? c : (i == 1 ? MPI_DOUBLE : MPI_SHORT);
            fd[i] = perm[i] * w + (MPI_Aint)pick(2) * 2 - (i == 0 ? lb : 0);
        }
        MPI_Type_create_struct(n, bls, fd, f, &t);
        snprintf(d + strlen(d), dn - strlen(d), "+%d", n);
        break;
    }
    case 9: {
        int sizes[3], subs[3], starts[3], nd = 2 + (int)pick(2);
        for (int i = 0; i < nd; i++) {
            sizes[i] = 2 + (int)pick(4);
            subs[i] = 1 + (int)pick((unsigned)sizes[i]);
            starts[i] = (int)pick((unsigned)(sizes[i] - subs[i] + 1));
        }
        MPI_Type_create_subarray(nd, sizes, subs, starts, pick(2) ? MPI_ORDER_C : MPI_ORDER_FORTRAN, c, &t);
        break;
    }
    case 10: /* a lower bound before the data and room after it */
        MPI_Type_create_resized(c, lb - (MPI_Aint)pick(3) * 4, ext + 8 + (MPI_Aint)pick(3) * 8, &t);
        break;
    case 11:
        MPI_Type_dup(c, &t);
        break;
    default: {
        int gs[2] = {3 + (int)pick(4), 3 + (int)pick(4)}, dist[2], darg[2], ps[2] = {2, 1};
        for (int i = 0; i < 2; i++) {
            dist[i] = pick(2) ? MPI_DISTRIBUTE_BLOCK : MPI_DISTRIBUTE_CYCLIC;
            darg[i] = dist[i] == MPI_DISTRIBUTE_CYCLIC && pick(2) ? 2 : MPI_DISTRIBUTE_DFLT_DARG;
        }
        if (pick(2))
            ps[0] = 1, ps[1] = 2;
        MPI_Type_create_darray(2, (int)pick(2), 2, gs, dist, darg, ps,
                               pick(2) ? MPI_ORDER_C : MPI_ORDER_FORTRAN, c, &t);
        break;
    }
    }
    /* The blocks above are laid out by the child's extent, which holds all
     * its data. A new type's data may lie outside its own [lb, lb + extent)
     * though: the explicit bounds of a resized, subarray or darray field
     * alone decide a struct's bounds (the other fields may lie outside), and
     * a subarray's or darray's bounds are 0 and the array's extent whatever
     * the child's lower bound. Consecutive elements of such a type, or the
     * blocks of a type built on it, would overlap: it is resized to hold its
     * data ("~" in the description). */
    MPI_Aint nlb, next, tlb, text;
    MPI_Type_get_extent(t, &nlb, &next);
    MPI_Type_get_true_extent(t, &tlb, &text);
    if (tlb < nlb || tlb + text > nlb + next) {
        MPI_Aint lo = tlb < nlb ? tlb : nlb, hi = tlb + text > nlb + next ? tlb + text : nlb + next;
        MPI_Datatype r;
        MPI_Type_create_resized(t, lo, hi - lo, &r);
        MPI_Type_free(&t);
        t = r;
        snprintf(d + strlen(d), dn - strlen(d), "~");
    }
    snprintf(d + strlen(d), dn - strlen(d), ")");
    free_derived(&c);
    return t;
}

/* Bytes [lo, hi) that `count` elements of `t` reach from the buffer
 * pointer. */
static void reach(MPI_Datatype t, int count, MPI_Aint *lo, MPI_Aint *hi)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    MPI_Aint last = count > 0 ? (MPI_Aint)(count - 1) * ext : 0;
    *lo = tlb + (last < 0 ? last : 0);
    *hi = tlb + text + (last > 0 ? last : 0);
}

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

enum { P_IRECV_WAIT, P_IRECV_TEST, P_RECV, P_MRECV, P_SENDRECV, P_PERSISTENT, NPATHS };
static const char *path_name[] = {"irecv_wait", "irecv_test", "recv", "mrecv", "sendrecv", "persistent"};

/* One round: every rank sends `scount` elements of `t` to `to` and
 * receives `rcount` of them from `from` through path `path`. */
static void round_one(FILE *out, int r, MPI_Datatype t, const char *desc, int scount, int rcount, int to,
                      int from, int path)
{
    MPI_Aint slo, shi, rlo, rhi, margin = 16;
    reach(t, scount, &slo, &shi);
    reach(t, rcount, &rlo, &rhi);
    size_t sn = (size_t)(shi - slo + 2 * margin), rn = (size_t)(rhi - rlo + 2 * margin);
    unsigned char *sa = malloc(sn), *ra = malloc(rn), *expect = malloc(rn), *holes = calloc(rn, 1);
    char *sbuf = (char *)sa + margin - slo, *rbuf = (char *)ra + margin - rlo;
    for (size_t i = 0; i < sn; i++)
        sa[i] = (unsigned char)(r * 131 + rank * 17 + i * 7 + 1);
    for (size_t i = 0; i < rn; i++)
        ra[i] = (unsigned char)(i * 3 + r);
    /* The receive's type map: all-ones unpacked into zeroes. */
    int tsize;
    MPI_Type_size(t, &tsize);
    size_t rbytes = (size_t)tsize * (size_t)rcount, sbytes = (size_t)tsize * (size_t)scount;
    unsigned char *ones = malloc(rbytes + sbytes + 1), *packed = malloc(sbytes + 1);
    memset(ones, 0xff, rbytes + 1);
    int pos = 0;
    MPI_OK(MPI_Unpack(ones, (int)rbytes, &pos, holes + margin - rlo, rcount, t, MPI_COMM_SELF));
    /* A receive type must not overlap: each byte of the message its own. */
    size_t mapped = 0;
    for (size_t i = 0; i < rn; i++)
        mapped += holes[i] != 0;
    CHECK(mapped == rbytes, "round %d %s: the receive type map overlaps (%d elements: %zu bytes of %zu)", r,
          desc, rcount, mapped, rbytes);
    /* The expected result: the holes marked, and the sender's data (same
     * pattern on every rank but for the rank term) unpacked. */
    memcpy(expect, ra, rn);
    for (size_t i = 0; i < rn; i++)
        if (!holes[i])
            expect[i] = MARK;
    unsigned char *peer = malloc(sn);
    for (size_t i = 0; i < sn; i++)
        peer[i] = (unsigned char)(r * 131 + from * 17 + i * 7 + 1);
    pos = 0;
    MPI_OK(MPI_Pack(peer + margin - slo, scount, t, packed, (int)sbytes + 1, &pos, MPI_COMM_SELF));
    int truncated = scount > rcount;
    if (!truncated) {
        pos = 0;
        MPI_OK(MPI_Unpack(packed, (int)sbytes + 1, &pos, expect + margin - rlo, scount, t, MPI_COMM_SELF));
    }

    MPI_Status st;
    MPI_Request sreq = MPI_REQUEST_NULL, rreq = MPI_REQUEST_NULL;
    int err = MPI_SUCCESS, tag = 100 + r;
    memset(&st, 0, sizeof st);
    /* Receives posted first get their holes written while they run. */
    if (path == P_IRECV_WAIT || path == P_IRECV_TEST) {
        MPI_Irecv(rbuf, rcount, t, from, tag, MPI_COMM_WORLD, &rreq);
    } else if (path == P_PERSISTENT) {
        MPI_Recv_init(rbuf, rcount, t, from, tag, MPI_COMM_WORLD, &rreq);
        MPI_Start(&rreq);
    }
    for (size_t i = 0; i < rn; i++)
        if (!holes[i])
            ra[i] = MARK;
    if (path == P_SENDRECV) {
        err = MPI_Sendrecv(sbuf, scount, t, to, tag, rbuf, rcount, t, from, tag, MPI_COMM_WORLD, &st);
    } else {
        if (r % 2)
            MPI_Isend(sbuf, scount, t, to, tag, MPI_COMM_WORLD, &sreq);
        else
            MPI_Issend(sbuf, scount, t, to, tag, MPI_COMM_WORLD, &sreq);
        if (path == P_RECV) {
            err = MPI_Recv(rbuf, rcount, t, from, tag, MPI_COMM_WORLD, &st);
        } else if (path == P_MRECV) {
            MPI_Message msg;
            MPI_OK(MPI_Mprobe(from, tag, MPI_COMM_WORLD, &msg, &st));
            err = MPI_Mrecv(rbuf, rcount, t, &msg, &st);
        } else if (path == P_IRECV_TEST) {
            int done = 0;
            while (!done && err == MPI_SUCCESS)
                err = MPI_Test(&rreq, &done, &st);
        } else {
            err = MPI_Wait(&rreq, &st);
        }
        MPI_OK(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    }
    if (path == P_PERSISTENT)
        MPI_Request_free(&rreq);
    int cls = MPI_SUCCESS, count = -2;
    MPI_Count elems = -2;
    MPI_Error_class(err, &cls);
    MPI_Get_count(&st, t, &count);
#ifndef MPICH_VERSION
    /* MPICH 4.0.2's MPI_Get_elements_x fails on several of these types in
     * plain MPI, with no interposer: a division by zero for
     * contig(vector(dup(float_int))) received by MPI_Irecv of 3 from a
     * message of 1, an assertion (get_elements_x.c line 268) for others.
     * Under MPICH the records carry MPI_Get_count only. */
    MPI_Get_elements_x(&st, t, &elems);
#endif
    fprintf(out, "round %d %s %s scount %d rcount %d: class %d count %d elements %lld hash %016llx\n", r,
            path_name[path], desc, scount, rcount, cls, count, (long long)elems,
            (unsigned long long)hash(ra, rn));
    /* Open MPI 4.1 does not report the truncation of a contiguous message a
     * rank sends itself (plain, and so staged): there the records alone
     * must agree. */
    CHECK(truncated ? cls == MPI_ERR_TRUNCATE || to == rank : cls == MPI_SUCCESS,
          "round %d: error class %d (truncated %d)", r, cls, truncated);
    if (!truncated) {
        CHECK(count == scount, "round %d %s %s: MPI_Get_count %d, sent %d", r, path_name[path], desc, count,
              scount);
        for (size_t i = 0; i < rn; i++)
            if (ra[i] != expect[i]) {
                CHECK(0, "round %d %s %s: byte %zd of the receive buffer is %#x, expected %#x (%s)", r,
                      path_name[path], desc, (ptrdiff_t)i - margin + rlo, ra[i], expect[i],
                      holes[i] ? "data" : "hole");
                break;
            }
    }
    /* Outside the receive's reach nothing changes (truncated rounds too). */
    for (MPI_Aint i = 0; i < margin; i++)
        CHECK(ra[i] == MARK && ra[rn - 1 - (size_t)i] == MARK, "round %d: the margin was written", r);
    free(sa);
    free(ra);
    free(expect);
    free(holes);
    free(ones);
    free(packed);
    free(peer);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc < 2) {
        fprintf(stderr, "usage: mpi_interpose_dtypes PREFIX [ROUNDS] [SEED]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 300;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 26;
    char file[4096];
    snprintf(file, sizeof file, "%s.%d.txt", argv[1], rank);
    FILE *out = fopen(file, "w");
    CHECK(out, "cannot write %s", file);
    if (!out)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int kinds[NPATHS] = {0};
    /* MPI_INTERPOSE_DTYPES_ROUND=r replays round r alone. */
    const char *only = getenv("MPI_INTERPOSE_DTYPES_ROUND");
    for (int r = only ? atoi(only) : 0; r < (only ? atoi(only) + 1 : rounds); r++) {
        rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)r + 1;
        char desc[2048] = "";
        MPI_Datatype t = gen(1 + (int)pick(3), desc, sizeof desc);
        MPI_Type_commit(&t);
        int scount = (int)pick(4), rcount = scount, how = (int)pick(10);
        if (how < 3)
            rcount = scount + 1 + (int)pick(2); /* a shorter message */
        else if (how < 5 && scount > 0)
            rcount = scount - 1; /* truncation */
        int path = (int)pick(NPATHS), self = r % 3 == 0;
        int to = self ? rank : (rank + 1) % size, from = self ? rank : (rank + size - 1) % size;
        round_one(out, r, t, desc, scount, rcount, to, from, path);
        kinds[path]++;
        free_derived(&t);
    }
    fclose(out);
    for (int p = 0; !only && p < NPATHS; p++)
        CHECK(kinds[p] > 0, "no round took path %s", path_name[p]);

    /* The interposer, staging as the environment says. */
    typedef int (*query_t)(unsigned long *, unsigned long *, unsigned long *, unsigned long *);
    query_t query = (query_t)dlsym(RTLD_DEFAULT, "ptsc_mpi_interposer");
    const char *staging = getenv("PTSC_STAGING");
    unsigned long staged = 0, calls = 0;
    CHECK(query && query(&calls, NULL, NULL, &staged), "the interposer is not active");
    if (staging && !strcmp(staging, "always"))
        CHECK(staged > 0, "PTSC_STAGING=always staged nothing");
    else
        CHECK(staged == 0, "PTSC_STAGING=%s staged %lu buffers", staging ? staging : "(unset)", staged);
    int all = 0;
    MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(all ? "mpi_interpose_dtypes: FAILED (%d checks)\n"
                   : "PASSED mpi_interpose_dtypes (%d rounds)\n",
               all ? all : rounds);
    MPI_Finalize();
    return all != 0;
}
