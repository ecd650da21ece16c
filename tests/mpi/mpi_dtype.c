/*
 * Collectives with derived datatypes, on every thread's lane at once: a
 * column of a matrix (MPI_Type_vector), resized types whose extent exceeds
 * their size, types with a nonzero (also negative) lower bound and one whose
 * lower bound differs from its true lower bound. Each call must give exact
 * results and leave the holes of the receive buffers as they were; buffers
 * are allocated to the exact span the datatype reaches, so a write past it
 * shows under a sanitizer. A non-commutative user operation (2x2 matrix
 * product) checks that reductions fold in rank order, x_0 op x_1 op ... op
 * x_{n-1}, in both PTSC_COMM modes. A predefined operation on a derived
 * datatype, which MPI defines only for predefined datatypes, must be refused
 * with PTSC_ERR_UNSUPPORTED, never abort the job or touch the buffers.
 */
#include "mpi_common.h"

#include <omp.h>

enum { NITER = 3, NR = 5, NC = 16, MAXOFF = 8, NTYPES = 10, BIGCOUNT = 40000 };

static const uint32_t SEND_HOLE = 0x0BADF00Du, RECV_HOLE = 0xDEADBEEFu, UNSET = 0x5EEDu;

/* A datatype of MPI_UNSIGNED words as the test knows it: one element holds
 * `nint` words at word offsets `off` from the element's base, elements are
 * `ext` words apart, and the buffer pointer lies `before` words into the
 * allocation (a column of a matrix has the other columns around it). */
typedef struct {
    const char *name;
    MPI_Datatype type;
    int count; /* elements per call */
    int nint;
    int off[MAXOFF];
    int ext, lb; /* extent and lower bound in words, as MPI must report them */
    int before;
    int mat; /* 4 words per element: a 2x2 matrix, reduced by the matrix product */
} dt_t;

static dt_t D[NTYPES];
static int ND;
static MPI_Op op_sum, op_mat;
static int R, T;

/* The range of words [lo, hi) relative to the buffer pointer that `count`
 * elements reach, extended to cover the allocation's leading words. */
static void span(const dt_t *d, int count, int *lo, int *hi)
{
    *lo = -d->before < 0 ? -d->before : 0;
    *hi = 0;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < d->nint; j++) {
            int p = i * d->ext + d->off[j];
            if (p < *lo)
                *lo = p;
            if (p + 1 > *hi)
                *hi = p + 1;
        }
}

/* A buffer of exactly the span: the returned pointer is what MPI gets;
 * *alloc is what to free, *n its words, *lo the pointer's offset into it. */
static uint32_t *buf_new(const dt_t *d, int count, uint32_t **alloc, int *n, int *lo)
{
    int hi;
    span(d, count, lo, &hi);
    *n = hi - *lo;
    *alloc = malloc(sizeof(uint32_t) * (size_t)*n);
    if (!*alloc) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return *alloc - *lo;
}

/* mask[k] = 1 when word k of the allocation belongs to an element. */
static char *data_mask(const dt_t *d, int count, int lo, int n)
{
    char *m = calloc((size_t)n, 1);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < d->nint; j++)
            m[i * d->ext + d->off[j] - lo] = 1;
    return m;
}

/* 1 when two of `count` elements share a word. */
static int overlaps(const dt_t *d, int count)
{
    int lo, hi, hit = 0;
    span(d, count, &lo, &hi);
    char *m = calloc((size_t)(hi - lo), 1);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < d->nint; j++)
            hit |= m[i * d->ext + d->off[j] - lo]++;
    free(m);
    return hit;
}

/* ------------------------------------------------------------------------ */
/* Values and user operations                                                */
/* ------------------------------------------------------------------------ */

/* Word j of element i contributed by (rank, thread) in round `it`. */
static uint32_t val(int rank, int t, int it, int i, int j)
{
    return (uint32_t)(rank + 1) * 7919u + (uint32_t)t * 104729u + (uint32_t)it * 31u + (uint32_t)i * 1009u +
           (uint32_t)j * 17u;
}

/* Matrix word j (row-major a b / c d) of element i for (rank, thread, it):
 * small distinct entries, so products of different ranks do not commute. */
static uint32_t mval(int rank, int t, int it, int i, int j)
{
    switch (j) {
    case 0:
        return (uint32_t)(rank + 2);
    case 1:
        return (uint32_t)(t + it + i + 1);
    case 2:
        return (uint32_t)((rank * 3 + i) % 5 + 1);
    default:
        return (uint32_t)(rank + t + 1);
    }
}

static uint32_t contrib(const dt_t *d, int rank, int t, int it, int i, int j)
{
    return d->mat ? mval(rank, t, it, i, j) : val(rank, t, it, i, j);
}

/* out = a x b for row-major 2x2 matrices, modulo 2^32. */
static void mat_mul(const uint32_t a[4], const uint32_t b[4], uint32_t out[4])
{
    uint32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                     a[2] * b[1] + a[3] * b[3]};
    memcpy(out, r, sizeof r);
}

/* Expected reduction of word j of element i over all ranks, in rank order. */
static uint32_t expected(const dt_t *d, int t, int it, int i, int j)
{
    if (!d->mat) {
        uint32_t s = 0;
        for (int r = 0; r < R; r++)
            s += val(r, t, it, i, j);
        return s;
    }
    uint32_t acc[4];
    for (int k = 0; k < 4; k++)
        acc[k] = mval(0, t, it, i, k);
    for (int r = 1; r < R; r++) {
        uint32_t m[4];
        for (int k = 0; k < 4; k++)
            m[k] = mval(r, t, it, i, k);
        mat_mul(acc, m, acc);
    }
    return acc[j];
}

static const dt_t *lookup(MPI_Datatype t)
{
    for (int k = 0; k < ND; k++)
        if (D[k].type == t)
            return &D[k];
    return NULL;
}

/* Sum of the words of each element, for any of the test's datatypes: it
 * strides by the datatype's layout, as a user operation must. */
static void sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const dt_t *d = lookup(*dt);
    if (!d) {
        test_fail(__FILE__, __LINE__, "sum op called with a datatype the test does not know");
        return;
    }
    for (int i = 0; i < *len; i++)
        for (int j = 0; j < d->nint; j++) {
            int p = i * d->ext + d->off[j];
            ((uint32_t *)inout)[p] += ((const uint32_t *)in)[p];
        }
}

/* inout = in x inout, element by element: not commutative. */
static void mat_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const dt_t *d = lookup(*dt);
    if (!d || !d->mat) {
        test_fail(__FILE__, __LINE__, "matrix op called with a datatype that is not a matrix type");
        return;
    }
    for (int i = 0; i < *len; i++) {
        uint32_t a[4], b[4], c[4];
        for (int k = 0; k < 4; k++) {
            a[k] = ((const uint32_t *)in)[i * d->ext + d->off[k]];
            b[k] = ((const uint32_t *)inout)[i * d->ext + d->off[k]];
        }
        mat_mul(a, b, c);
        for (int k = 0; k < 4; k++)
            ((uint32_t *)inout)[i * d->ext + d->off[k]] = c[k];
    }
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */

/* Fill the data words with f(i, j) and the holes with `hole`. */
typedef uint32_t (*val_fn)(const dt_t *d, int i, int j, const void *arg);

static void fill_buf(const dt_t *d, int count, uint32_t *base, int lo, int n, uint32_t hole, val_fn f,
                     const void *arg)
{
    for (int k = 0; k < n; k++)
        base[lo + k] = hole;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < d->nint; j++)
            base[i * d->ext + d->off[j]] = f(d, i, j, arg);
}

/* 1 when the data words are f(i, j) and the holes still `hole`; reports the first difference. */
static int check_buf(const char *what, const dt_t *d, int count, const uint32_t *base, int lo, int n,
                     uint32_t hole, val_fn f, const void *arg, int it)
{
    char *m = data_mask(d, count, lo, n);
    int ok = 1;
    for (int k = 0; k < n && ok; k++)
        if (!m[k] && base[lo + k] != hole) {
            CHECK(0, "%s %s it %d: hole word %d (offset %d) is %#x, expected it untouched (%#x)", what,
                  d->name, it, k, lo + k, base[lo + k], hole);
            ok = 0;
        }
    for (int i = 0; i < count && ok; i++)
        for (int j = 0; j < d->nint && ok; j++) {
            uint32_t got = base[i * d->ext + d->off[j]], want = f(d, i, j, arg);
            if (got != want) {
                CHECK(0, "%s %s it %d: element %d word %d is %#x, expected %#x", what, d->name, it, i, j, got,
                      want);
                ok = 0;
            }
        }
    free(m);
    return ok;
}

typedef struct {
    int rank, t, it, block_rank; /* block_rank >= 0: element i belongs to rank i / count of that type */
    int count;
} who_t;

static uint32_t f_contrib(const dt_t *d, int i, int j, const void *arg)
{
    const who_t *w = arg;
    return contrib(d, w->rank, w->t, w->it, i, j);
}

static uint32_t f_expected(const dt_t *d, int i, int j, const void *arg)
{
    const who_t *w = arg;
    return expected(d, w->t, w->it, i, j);
}

static uint32_t f_unset(const dt_t *d, int i, int j, const void *arg)
{
    (void)d;
    (void)i;
    (void)j;
    (void)arg;
    return UNSET;
}

/* Block b (of `count` elements) of a gathered buffer came from rank b; in
 * alltoall, element i of the block rank s sent to rank `rank` is
 * contrib(s, ..., rank * count + i). */
static uint32_t f_gathered(const dt_t *d, int i, int j, const void *arg)
{
    const who_t *w = arg;
    int b = i / w->count, e = i % w->count;
    return contrib(d, b, w->t, w->it, w->block_rank ? w->rank * w->count + e : e, j);
}

static uint32_t f_bcast(const dt_t *d, int i, int j, const void *arg)
{
    const who_t *w = arg;
    return contrib(d, 1000 + w->block_rank, w->t, w->it, i, j);
}

/* ------------------------------------------------------------------------ */
/* One datatype through every collective                                     */
/* ------------------------------------------------------------------------ */

static int run_type(ptsc_ctx_t *ctx, const dt_t *d, int t, int it)
{
    const int me = g_rank;
    const int c = d->count;
    MPI_Op op = d->mat ? op_mat : op_sum;
    who_t mine = {me, t, it, 0, c};
    int slo, sn, rlo, rn;
    uint32_t *sa, *ra;
    uint32_t *s = buf_new(d, c, &sa, &sn, &slo), *r = buf_new(d, c, &ra, &rn, &rlo);

    /* reduce to a root that moves with thread and round, then allreduce. */
    for (int all = 0; all < 2; all++) {
        int root = (t + it + all) % R;
        int gets = all || me == root;
        fill_buf(d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine);
        fill_buf(d, c, r, rlo, rn, RECV_HOLE, f_unset, NULL);
        const char *what = all ? "allreduce" : "reduce";
        if (all)
            CHECK_OK(ptsc_allreduce(ctx, s, r, c, d->type, op));
        else
            CHECK_OK(ptsc_reduce(ctx, s, r, c, d->type, op, root));
        check_buf(what, d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine, it); /* input untouched */
        check_buf(what, d, c, r, rlo, rn, RECV_HOLE, gets ? f_expected : f_unset, &mine, it);

        /* in place: the root's (or every rank's) input is its receive buffer. */
        fill_buf(d, c, r, rlo, rn, RECV_HOLE, f_contrib, &mine);
        fill_buf(d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine);
        what = all ? "allreduce in place" : "reduce in place";
        if (all)
            CHECK_OK(ptsc_allreduce(ctx, MPI_IN_PLACE, r, c, d->type, op));
        else if (me == root)
            CHECK_OK(ptsc_reduce(ctx, MPI_IN_PLACE, r, c, d->type, op, root));
        else
            CHECK_OK(ptsc_reduce(ctx, s, NULL, c, d->type, op, root));
        check_buf(what, d, c, r, rlo, rn, RECV_HOLE, gets ? f_expected : f_contrib, &mine, it);
    }

    /* A predefined operation on a derived datatype: refused, buffers untouched. */
    fill_buf(d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine);
    fill_buf(d, c, r, rlo, rn, RECV_HOLE, f_unset, NULL);
    int rc = ptsc_allreduce(ctx, s, r, c, d->type, MPI_SUM);
    CHECK(rc == PTSC_ERR_UNSUPPORTED,
          "allreduce MPI_SUM on %s returned %s (%s), expected PTSC_ERR_UNSUPPORTED", d->name,
          ptsc_status_name(rc), ptsc_last_error());
    rc = ptsc_reduce(ctx, s, r, c, d->type, MPI_SUM, 0);
    CHECK(rc == PTSC_ERR_UNSUPPORTED, "reduce MPI_SUM on %s returned %s (%s), expected PTSC_ERR_UNSUPPORTED",
          d->name, ptsc_status_name(rc), ptsc_last_error());
    check_buf("refused MPI_SUM", d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine, it);
    check_buf("refused MPI_SUM", d, c, r, rlo, rn, RECV_HOLE, f_unset, NULL, it);

    /* bcast from a root that moves with thread and round. */
    int root = (t + 2 * it + 1) % R;
    who_t bw = {me, t, it, root, c};
    if (me == root)
        fill_buf(d, c, r, rlo, rn, RECV_HOLE, f_bcast, &bw);
    else
        fill_buf(d, c, r, rlo, rn, RECV_HOLE, f_unset, NULL);
    CHECK_OK(ptsc_bcast(ctx, r, c, d->type, root));
    check_buf("bcast", d, c, r, rlo, rn, RECV_HOLE, f_bcast, &bw, it);
    free(sa);
    free(ra);

    /* allgather and alltoall: R blocks of c elements, laid out by the type
     * (skipped where so many elements would overlap: resized columns at
     * more than NC / 2 ranks). */
    if (overlaps(d, R * c))
        return PTSC_OK;
    int glo, gn, alo, an;
    uint32_t *ga, *aa;
    uint32_t *g = buf_new(d, R * c, &ga, &gn, &glo), *a = buf_new(d, R * c, &aa, &an, &alo);
    s = buf_new(d, c, &sa, &sn, &slo);
    fill_buf(d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine);
    fill_buf(d, R * c, g, glo, gn, RECV_HOLE, f_unset, NULL);
    CHECK_OK(ptsc_allgather(ctx, s, c, d->type, g, c, d->type));
    who_t gw = {me, t, it, 0, c};
    check_buf("allgather", d, R * c, g, glo, gn, RECV_HOLE, f_gathered, &gw, it);
    check_buf("allgather input", d, c, s, slo, sn, SEND_HOLE, f_contrib, &mine, it);

    /* alltoall: the send buffer (in g's layout) holds R blocks, block b for rank b. */
    fill_buf(d, R * c, g, glo, gn, SEND_HOLE, f_contrib, &mine);
    fill_buf(d, R * c, a, alo, an, RECV_HOLE, f_unset, NULL);
    CHECK_OK(ptsc_alltoall(ctx, g, c, d->type, a, c, d->type));
    gw.block_rank = 1;
    check_buf("alltoall", d, R * c, a, alo, an, RECV_HOLE, f_gathered, &gw, it);
    free(sa);
    free(ga);
    free(aa);
    return PTSC_OK;
}

static int body(ptsc_ctx_t *ctx, void *arg)
{
    int t = -1;
    (void)arg;
    CHECK_OK(ptsc_ctx_index(ctx, &t));
    g_me = t;
    /* Zero elements: nothing moves, nothing is written. */
    CHECK_OK(ptsc_allreduce(ctx, NULL, NULL, 0, D[0].type, op_sum));
    CHECK_OK(ptsc_reduce(ctx, NULL, NULL, 0, D[t % ND].type, D[t % ND].mat ? op_mat : op_sum, t % R));
    for (int it = 0; it < NITER; it++)
        for (int k = 0; k < ND; k++) {
            /* every thread runs the types in a different order */
            int rc = run_type(ctx, &D[(k + t) % ND], t, it);
            if (rc != PTSC_OK)
                return rc;
        }
    return PTSC_OK;
}

/* ------------------------------------------------------------------------ */
/* The datatypes                                                             */
/* ------------------------------------------------------------------------ */

static void add(const char *name, MPI_Datatype type, int count, int nint, const int *off, int ext, int lb,
                int before, int mat)
{
    dt_t *d = &D[ND++];
    d->name = name;
    d->type = type;
    d->count = count;
    d->nint = nint;
    memcpy(d->off, off, sizeof(int) * (size_t)nint);
    d->ext = ext;
    d->lb = lb;
    d->before = before;
    d->mat = mat;
    MPI_Type_commit(&d->type);
    /* The test's picture of the type must be MPI's. */
    MPI_Aint l, e, tl, te;
    int size;
    MPI_Type_get_extent(d->type, &l, &e);
    MPI_Type_get_true_extent(d->type, &tl, &te);
    MPI_Type_size(d->type, &size);
    int tmin = off[0], tmax = off[0];
    for (int j = 1; j < nint; j++) {
        tmin = off[j] < tmin ? off[j] : tmin;
        tmax = off[j] > tmax ? off[j] : tmax;
    }
    const MPI_Aint w = (MPI_Aint)sizeof(uint32_t);
    CHECK(l == lb * w && e == ext * w && tl == tmin * w && te == (tmax - tmin + 1) * w &&
              size == nint * (int)w,
          "datatype %s: MPI says lb %ld extent %ld true lb %ld true extent %ld size %d", name, (long)l,
          (long)e, (long)tl, (long)te, size);
}

static void make_types(void)
{
    MPI_Datatype col, t2, t3, mat, tmp;
    const MPI_Aint w = (MPI_Aint)sizeof(uint32_t);

    /* A column of an NR x NC row-major matrix: the last column, so the
     * allocation ends at its last word. */
    MPI_Type_vector(NR, 1, NC, MPI_UNSIGNED, &col);
    int coloff[NR];
    for (int k = 0; k < NR; k++)
        coloff[k] = k * NC;
    MPI_Type_dup(col, &tmp);
    add("column", tmp, 1, NR, coloff, (NR - 1) * NC + 1, 0, NC - 1, 0);

    /* Two adjacent columns: the column resized to one word (extent below true extent). */
    MPI_Type_create_resized(col, 0, w, &tmp);
    add("columns (resized)", tmp, 2, NR, coloff, 1, 0, NC - 2, 0);

    /* Two words, extent five words. */
    MPI_Type_contiguous(2, MPI_UNSIGNED, &t2);
    MPI_Type_create_resized(t2, 0, 5 * w, &tmp);
    add("gap (resized)", tmp, 3, 2, (const int[]){0, 1}, 5, 0, 0, 0);

    /* Many of them: the copies inside ptsc go in several pieces. */
    MPI_Type_create_resized(t2, 0, 5 * w, &tmp);
    add("gap x many", tmp, BIGCOUNT, 2, (const int[]){0, 1}, 5, 0, 0, 0);

    /* Lower bound 3 words: words 3 and 5. */
    MPI_Type_create_indexed_block(2, 1, (const int[]){3, 5}, MPI_UNSIGNED, &tmp);
    add("indexed (lb 3)", tmp, 2, 2, (const int[]){3, 5}, 3, 3, 0, 0);

    /* Negative lower bound: words -2 and 1. */
    MPI_Type_create_hindexed(2, (const int[]){1, 1}, (const MPI_Aint[]){-2 * w, 1 * w}, MPI_UNSIGNED, &tmp);
    add("hindexed (lb -2)", tmp, 2, 2, (const int[]){-2, 1}, 4, -2, 0, 0);

    /* Lower bound (2 words) above the true lower bound (0): three words, extent 5. */
    MPI_Type_contiguous(3, MPI_UNSIGNED, &t3);
    MPI_Type_create_resized(t3, 2 * w, 5 * w, &tmp);
    add("resized (lb 2, true lb 0)", tmp, 2, 3, (const int[]){0, 1, 2}, 5, 2, 0, 0);
    MPI_Type_free(&t3);

    /* 2x2 matrices for the non-commutative product: packed, with holes, with a negative lower bound. */
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mat);
    add("matrix", mat, 3, 4, (const int[]){0, 1, 2, 3}, 4, 0, 0, 1);
    MPI_Type_indexed(2, (const int[]){2, 2}, (const int[]){0, 3}, MPI_UNSIGNED, &t3);
    MPI_Type_create_resized(t3, 0, 7 * w, &tmp);
    add("matrix with holes", tmp, 2, 4, (const int[]){0, 1, 3, 4}, 7, 0, 0, 1);
    MPI_Type_create_hindexed(2, (const int[]){2, 2}, (const MPI_Aint[]){-3 * w, 2 * w}, MPI_UNSIGNED, &tmp);
    add("matrix (lb -3)", tmp, 2, 4, (const int[]){-3, -2, 2, 3}, 7, -3, 0, 1);

    MPI_Type_free(&t3);
    MPI_Type_free(&col);
    MPI_Type_free(&t2);
}

int main(int argc, char **argv)
{
    T = test_init(&argc, &argv, &R);
    make_types();
    MPI_Op_create(sum_fn, 1, &op_sum);
    MPI_Op_create(mat_fn, 0, &op_mat);

    /* The matrices really do not commute, so the order is tested. */
    uint32_t a[4], b[4], ab[4], ba[4];
    for (int k = 0; k < 4; k++) {
        a[k] = mval(0, 0, 0, 0, k);
        b[k] = mval(1, 0, 0, 0, k);
    }
    mat_mul(a, b, ab);
    mat_mul(b, a, ba);
    CHECK(memcmp(ab, ba, sizeof ab) != 0, "the test's matrices commute");

    int rc = ptsc_omp_run(T, body, NULL);
    CHECK(rc == PTSC_OK || g_failures > 0, "ptsc_omp_run: %s: %s", ptsc_status_name(rc), ptsc_last_error());
    for (int k = 0; k < ND; k++)
        MPI_Type_free(&D[k].type);
    MPI_Op_free(&op_sum);
    MPI_Op_free(&op_mat);
    return test_finish("mpi_dtype");
}
