/*
 * A datatype's type map as runs of bytes, in type-map order.
 *
 * The interposer's staging (interpose.c) copies between a caller's buffer
 * and its host copy; with a datatype that has holes it copies only the
 * bytes of the type map, run by run, so that the work is proportional to
 * the data and not to the span (a sparse vector may carry a few MB over
 * hundreds of MB). The runs come from the datatype's construction, read
 * back with MPI_Type_get_envelope / MPI_Type_get_contents, so their number
 * is that of the type's description, not of its bytes: a vector is one
 * group of equal runs at equal stride, however long.
 *
 * A group is `n` runs of `len` bytes, the k-th at `off + k * stride`.
 * Groups are appended in type-map order, and adjacent ones are merged
 * (a run right after the previous one lengthens it; a run of the same
 * length at the previous group's stride extends the group), so packing
 * the runs in order gives MPI_Pack's bytes on a homogeneous system.
 *
 * Every combiner of MPI 3.1 is read from its construction. A DARRAY's
 * elements lie in address order; where they lie is read from the bytes
 * MPI_Unpack writes into the span of the same darray built over a one-byte
 * type (a cost of its span, once per call), and each element is its old
 * type's runs. A combiner this file does not know is read by unpacking
 * the positions of one element's bytes into its span (type-map order), up
 * to UNPACK_MAX bytes of span.
 *
 * An array of `count` elements whose element is several groups (a struct
 * with padding) is one pattern repeated `reps` times at the extent, not
 * count copies of it, so that its size does not grow with the count; a
 * flattening beyond RUNS_MAX groups is refused (PTSC_ERR_UNSUPPORTED).
 */
#include "ptsc_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RUNS_MAX ((size_t)1 << 24)      /* groups in one flattening (512 MiB of them) */
#define UNPACK_MAX ((MPI_Count)1 << 26) /* span of one element found by unpacking */

void ptsc__flat_free(ptsc__flat_t *f)
{
    free(f->r);
    memset(f, 0, sizeof *f);
}

static int push(ptsc__flat_t *f, MPI_Aint off, MPI_Aint len, MPI_Aint stride, MPI_Aint n);

/* A repeated pattern written out as groups, before more are appended. */
static int expand(ptsc__flat_t *f)
{
    ptsc__flat_t pat = *f;
    memset(f, 0, sizeof *f);
    int rc = PTSC_OK;
    for (MPI_Aint k = 0; rc == PTSC_OK && k < pat.reps; k++)
        for (size_t i = 0; rc == PTSC_OK && i < pat.n; i++)
            rc = push(f, pat.r[i].off + k * pat.step, pat.r[i].len, pat.r[i].stride, pat.r[i].n);
    free(pat.r);
    return rc;
}

/* Append `n` runs of `len` bytes at `off + k * stride`, merged with the
 * last group where they continue it. */
static int push(ptsc__flat_t *f, MPI_Aint off, MPI_Aint len, MPI_Aint stride, MPI_Aint n)
{
    if (len <= 0 || n <= 0)
        return PTSC_OK;
    if (f->reps > 1) {
        int rc = expand(f);
        if (rc != PTSC_OK)
            return rc;
    }
    if (n == 1 || stride == len) {
        len *= n;
        n = 1;
        stride = len;
    }
    f->bytes += (MPI_Count)len * n;
    if (f->n > 0) {
        ptsc__run_t *l = &f->r[f->n - 1];
        if (l->n == 1 && n == 1 && l->off + l->len == off) {
            l->len += len;
            l->stride = l->len;
            return PTSC_OK;
        }
        MPI_Aint s = l->n == 1 ? off - l->off : l->stride;
        if (l->len == len && s > len && off == l->off + l->n * s && (n == 1 || stride == s)) {
            l->stride = s;
            l->n += n;
            return PTSC_OK;
        }
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 16;
        ptsc__run_t *r = f->n >= RUNS_MAX ? NULL : realloc(f->r, cap * sizeof *r);
        if (!r)
            return ptsc__err(f->n >= RUNS_MAX ? PTSC_ERR_UNSUPPORTED : PTSC_ERR_NO_MEMORY,
                             "a datatype of more than %zu runs of bytes to stage", f->n);
        f->r = r;
        f->cap = cap;
    }
    f->r[f->n++] = (ptsc__run_t){off, len, stride, n};
    return PTSC_OK;
}

/* `reps` copies of `src` at `at + k * step`, appended to `dst`. A source
 * of one group that repeats at `step` becomes one group. */
static int repeat(ptsc__flat_t *dst, const ptsc__flat_t *src, MPI_Aint reps, MPI_Aint step, MPI_Aint at)
{
    if (src->n == 1) {
        const ptsc__run_t *g = &src->r[0];
        if (g->n == 1)
            return push(dst, g->off + at, g->len, step, reps);
        if (g->n * g->stride == step)
            return push(dst, g->off + at, g->len, g->stride, g->n * reps);
    }
    int rc = PTSC_OK;
    for (MPI_Aint k = 0; rc == PTSC_OK && k < reps; k++)
        for (size_t i = 0; rc == PTSC_OK && i < src->n; i++) {
            const ptsc__run_t *g = &src->r[i];
            rc = push(dst, g->off + at + k * step, g->len, g->stride, g->n);
        }
    return rc;
}

static MPI_Aint extent_of(MPI_Datatype t)
{
    MPI_Aint lb = 0, ext = 0;
    PMPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

static int flatten_one(MPI_Datatype t, ptsc__flat_t *f);

/* `bl` elements of `t` at byte `at`, appended to `dst`. */
static int block(ptsc__flat_t *dst, MPI_Datatype t, MPI_Aint bl, MPI_Aint at)
{
    ptsc__flat_t one = {0};
    int rc = flatten_one(t, &one);
    if (rc == PTSC_OK)
        rc = repeat(dst, &one, bl, extent_of(t), at);
    ptsc__flat_free(&one);
    return rc;
}

/* A committed duplicate of a type that get_contents returned (such a part
 * is not committed; MPI_Unpack needs it to be). */
static int committed_dup(MPI_Datatype t0, MPI_Datatype *t)
{
    if (PMPI_Type_dup(t0, t) != MPI_SUCCESS)
        return PTSC_ERR_ARG;
    if (PMPI_Type_commit(t) != MPI_SUCCESS)
        return PMPI_Type_free(t), PTSC_ERR_ARG;
    return PTSC_OK;
}

/* The runs of one element, found by unpacking the positions of its bytes
 * (four passes of one byte of each position, and one of all-ones for
 * where data lies) into its span: any datatype, at the cost of its span. */
static int by_unpack(MPI_Datatype t0, ptsc__flat_t *f)
{
    MPI_Datatype t;
    if (committed_dup(t0, &t) != PTSC_OK)
        return ptsc__err(PTSC_ERR_ARG, "a datatype to stage could not be duplicated");
    MPI_Count size = 0, tlb = 0, text = 0;
    PMPI_Type_size_x(t, &size);
    PMPI_Type_get_true_extent_x(t, &tlb, &text);
    if (size > INT_MAX || size > UINT32_MAX || text > UNPACK_MAX)
        return PMPI_Type_free(&t),
               ptsc__err(PTSC_ERR_UNSUPPORTED,
                         "a datatype of a combiner unknown to staging spanning %lld bytes: staging reads its "
                         "type map up to %lld bytes",
                         (long long)text, (long long)UNPACK_MAX);
    unsigned char *in = malloc(size > 0 ? (size_t)size : 1), *out = malloc(text > 0 ? (size_t)text : 1);
    unsigned char *have = calloc(text > 0 ? (size_t)text : 1, 1);
    uint32_t *pos = calloc(text > 0 ? (size_t)text : 1, sizeof *pos);
    MPI_Aint *where = malloc(size > 0 ? (size_t)size * sizeof *where : 1);
    int rc =
        in && out && have && pos && where ? PTSC_OK : ptsc__err(PTSC_ERR_NO_MEMORY, "a datatype's type map");
    for (int pass = 0; rc == PTSC_OK && pass < 5; pass++) {
        for (MPI_Count k = 0; k < size; k++)
            in[k] = pass == 4 ? 0xff : (unsigned char)((uint32_t)k >> (8 * pass));
        memset(out, 0, (size_t)text);
        int at = 0;
        if (PMPI_Unpack(in, (int)size, &at, pass == 4 ? have - tlb : out - tlb, 1, t, MPI_COMM_SELF) !=
            MPI_SUCCESS) {
            rc = ptsc__err(PTSC_ERR_UNSUPPORTED, "MPI_Unpack of a datatype's type map failed");
            break;
        }
        for (MPI_Count m = 0; pass < 4 && m < text; m++)
            pos[m] |= (uint32_t)out[m] << (8 * pass);
    }
    for (MPI_Count k = 0; rc == PTSC_OK && k < size; k++)
        where[k] = (MPI_Aint)tlb - 1; /* no byte of the span: not found */
    for (MPI_Count m = 0; rc == PTSC_OK && m < text; m++)
        if (have[m] && pos[m] < (uint32_t)size)
            where[pos[m]] = (MPI_Aint)(tlb + m);
    for (MPI_Count k = 0; rc == PTSC_OK && k < size; k++)
        rc = where[k] >= tlb ? push(f, where[k], 1, 1, 1)
                             : ptsc__err(PTSC_ERR_UNSUPPORTED, "a datatype whose type map overlaps itself");
    free(in);
    free(out);
    free(have);
    free(pos);
    free(where);
    PMPI_Type_free(&t);
    return rc;
}

/* A darray's runs. Its elements lie in the span in address order (the
 * darray's type-map order), each laid out as its old type: the same
 * darray over a one-byte type of the old type's extent shows where, by
 * the bytes that MPI_Unpack of it writes into its span, and each stretch
 * of adjacent elements is the old type's runs repeated. ints: size, rank,
 * ndims, gsizes, distribs, dargs, psizes, order. */
static int by_darray(MPI_Datatype t, const int *ints, MPI_Datatype old, ptsc__flat_t *f)
{
    MPI_Aint ext = extent_of(old);
    if (ext <= 0)
        return by_unpack(t, f);
    int nd = ints[2];
    MPI_Datatype slot = MPI_DATATYPE_NULL, d = MPI_DATATYPE_NULL;
    if (PMPI_Type_create_resized(MPI_BYTE, 0, ext, &slot) != MPI_SUCCESS ||
        PMPI_Type_create_darray(ints[0], ints[1], nd, ints + 3, ints + 3 + nd, ints + 3 + 2 * nd,
                                ints + 3 + 3 * nd, ints[3 + 4 * nd], slot, &d) != MPI_SUCCESS ||
        PMPI_Type_commit(&d) != MPI_SUCCESS) {
        if (slot != MPI_DATATYPE_NULL)
            PMPI_Type_free(&slot);
        if (d != MPI_DATATYPE_NULL)
            PMPI_Type_free(&d);
        return ptsc__err(PTSC_ERR_UNSUPPORTED, "a darray to stage could not be rebuilt");
    }
    MPI_Count n = 0, tlb = 0, text = 0;
    PMPI_Type_size_x(d, &n);
    PMPI_Type_get_true_extent_x(d, &tlb, &text);
    int rc = n > INT_MAX || text < 0 || (unsigned long long)text > SIZE_MAX
                 ? ptsc__err(PTSC_ERR_UNSUPPORTED, "a darray of more than INT_MAX elements to stage")
                 : PTSC_OK;
    unsigned char *in = rc == PTSC_OK ? malloc(n > 0 ? (size_t)n : 1) : NULL;
    unsigned char *have = rc == PTSC_OK ? calloc(text > 0 ? (size_t)text : 1, 1) : NULL;
    if (rc == PTSC_OK && (!in || !have))
        rc = ptsc__err(PTSC_ERR_NO_MEMORY, "%lld bytes to read a darray's layout", (long long)text);
    int at = 0;
    if (rc == PTSC_OK && n > 0) {
        memset(in, 0xff, (size_t)n);
        if (PMPI_Unpack(in, (int)n, &at, have - tlb, 1, d, MPI_COMM_SELF) != MPI_SUCCESS)
            rc = ptsc__err(PTSC_ERR_UNSUPPORTED, "MPI_Unpack of a darray's layout failed");
    }
    ptsc__flat_t one = {0};
    if (rc == PTSC_OK && n > 0)
        rc = flatten_one(old, &one);
    /* Elements start at multiples of the extent from the first. */
    MPI_Count seen = 0;
    for (MPI_Count m = 0; rc == PTSC_OK && m < text; m += ext) {
        if (!have[m])
            continue;
        MPI_Count e = m;
        while (e < text && have[e])
            e += ext;
        rc = repeat(f, &one, (MPI_Aint)((e - m) / ext), ext, (MPI_Aint)(tlb + m));
        seen += (e - m) / ext;
        m = e - ext;
    }
    if (rc == PTSC_OK && seen != n)
        rc = ptsc__err(PTSC_ERR_UNSUPPORTED, "a darray whose layout could not be read");
    ptsc__flat_free(&one);
    free(in);
    free(have);
    PMPI_Type_free(&d);
    PMPI_Type_free(&slot);
    return rc;
}

/* A named type: its bytes, or the two parts of a pair type, whose padding
 * is no data. */
static int named(MPI_Datatype t, ptsc__flat_t *f)
{
#define PAIR(TYPE, A, B)                                                                        \
    if (t == TYPE) {                                                                            \
        struct pair {                                                                           \
            A a;                                                                                \
            B b;                                                                                \
        };                                                                                      \
        int rc = push(f, offsetof(struct pair, a), sizeof(A), sizeof(A), 1);                    \
        return rc == PTSC_OK ? push(f, offsetof(struct pair, b), sizeof(B), sizeof(B), 1) : rc; \
    }
    PAIR(MPI_FLOAT_INT, float, int)
    PAIR(MPI_DOUBLE_INT, double, int)
    PAIR(MPI_LONG_INT, long, int)
    PAIR(MPI_SHORT_INT, short, int)
    PAIR(MPI_LONG_DOUBLE_INT, long double, int)
#undef PAIR
    MPI_Count size = 0, lb = 0, ext = 0;
    PMPI_Type_size_x(t, &size);
    PMPI_Type_get_true_extent_x(t, &lb, &ext);
    if (size == ext)
        return push(f, (MPI_Aint)lb, (MPI_Aint)size, (MPI_Aint)size, 1);
    return by_unpack(t, f);
}

/* Subarray: the innermost dimension's row, repeated outwards. ints:
 * ndims, sizes, subsizes, starts, order. */
static int subarray(const int *ints, MPI_Datatype old, ptsc__flat_t *f)
{
    int nd = ints[0], order = ints[1 + 3 * nd];
    const int *sizes = ints + 1, *subs = ints + 1 + nd, *starts = ints + 1 + 2 * nd;
    ptsc__flat_t cur = {0}, next = {0};
    int rc = flatten_one(old, &cur);
    MPI_Aint step = extent_of(old);
    for (int i = 0; rc == PTSC_OK && i < nd; i++) {
        int d = order == MPI_ORDER_C ? nd - 1 - i : i; /* fastest first */
        rc = repeat(&next, &cur, subs[d], step, (MPI_Aint)starts[d] * step);
        step *= sizes[d];
        ptsc__flat_free(&cur);
        cur = next;
        memset(&next, 0, sizeof next);
    }
    if (rc == PTSC_OK)
        rc = repeat(f, &cur, 1, 0, 0);
    ptsc__flat_free(&cur);
    return rc;
}

/* The runs of one element of `t`, relative to the buffer pointer. */
static int from_contents(MPI_Datatype t, int comb, int ni, int na, int nd, ptsc__flat_t *f)
{
    int *ints = malloc((size_t)(ni > 0 ? ni : 1) * sizeof *ints);
    MPI_Aint *ads = malloc((size_t)(na > 0 ? na : 1) * sizeof *ads);
    MPI_Datatype *tys = malloc((size_t)(nd > 0 ? nd : 1) * sizeof *tys);
    int rc = ints && ads && tys ? PTSC_OK : ptsc__err(PTSC_ERR_NO_MEMORY, "a datatype's contents");
    if (rc == PTSC_OK && PMPI_Type_get_contents(t, ni, na, nd, ints, ads, tys) != MPI_SUCCESS)
        rc = ptsc__err(PTSC_ERR_ARG, "MPI_Type_get_contents failed on a datatype to stage"), nd = 0;
    if (rc != PTSC_OK)
        nd = 0;
    MPI_Aint ext = rc == PTSC_OK && nd > 0 ? extent_of(tys[0]) : 0;
    switch (rc == PTSC_OK ? comb : -1) {
    case -1:
        break;
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
        rc = block(f, tys[0], 1, 0);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = block(f, tys[0], ints[0], 0);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        ptsc__flat_t b = {0};
        MPI_Aint stride = comb == MPI_COMBINER_VECTOR ? (MPI_Aint)ints[2] * ext : ads[0];
        rc = block(&b, tys[0], ints[1], 0);
        if (rc == PTSC_OK)
            rc = repeat(f, &b, ints[0], stride, 0);
        ptsc__flat_free(&b);
        break;
    }
    case MPI_COMBINER_INDEXED:
        for (int i = 0; rc == PTSC_OK && i < ints[0]; i++)
            rc = block(f, tys[0], ints[1 + i], (MPI_Aint)ints[1 + ints[0] + i] * ext);
        break;
    case MPI_COMBINER_HINDEXED:
        for (int i = 0; rc == PTSC_OK && i < ints[0]; i++)
            rc = block(f, tys[0], ints[1 + i], ads[i]);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
        for (int i = 0; rc == PTSC_OK && i < ints[0]; i++)
            rc = block(f, tys[0], ints[1], (MPI_Aint)ints[2 + i] * ext);
        break;
    case MPI_COMBINER_HINDEXED_BLOCK:
        for (int i = 0; rc == PTSC_OK && i < ints[0]; i++)
            rc = block(f, tys[0], ints[1], ads[i]);
        break;
    case MPI_COMBINER_STRUCT:
        for (int i = 0; rc == PTSC_OK && i < ints[0]; i++)
            rc = block(f, tys[i], ints[1 + i], ads[i]);
        break;
    case MPI_COMBINER_SUBARRAY:
        rc = subarray(ints, tys[0], f);
        break;
    case MPI_COMBINER_DARRAY:
        rc = by_darray(t, ints, tys[0], f);
        break;
    default: /* any combiner newer than this file */
        rc = by_unpack(t, f);
        break;
    }
    /* Derived datatypes that get_contents returned are new objects. */
    for (int i = 0; i < nd; i++) {
        int n1, n2, n3, c = MPI_COMBINER_NAMED;
        PMPI_Type_get_envelope(tys[i], &n1, &n2, &n3, &c);
        if (c != MPI_COMBINER_NAMED && c != MPI_COMBINER_F90_REAL && c != MPI_COMBINER_F90_COMPLEX &&
            c != MPI_COMBINER_F90_INTEGER)
            PMPI_Type_free(&tys[i]);
    }
    free(ints);
    free(ads);
    free(tys);
    return rc;
}

static int flatten_one(MPI_Datatype t, ptsc__flat_t *f)
{
    int ni = 0, na = 0, nd = 0, comb = MPI_COMBINER_NAMED;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return ptsc__err(PTSC_ERR_ARG, "a datatype to stage is not an MPI datatype");
    if (comb == MPI_COMBINER_NAMED || comb == MPI_COMBINER_F90_REAL || comb == MPI_COMBINER_F90_COMPLEX ||
        comb == MPI_COMBINER_F90_INTEGER)
        return named(t, f);
    return from_contents(t, comb, ni, na, nd, f);
}

int ptsc__flatten(MPI_Datatype t, MPI_Count count, MPI_Aint at, ptsc__flat_t *f)
{
    if (count <= 0)
        return PTSC_OK;
    ptsc__flat_t one = {0};
    int rc = flatten_one(t, &one);
    if (rc == PTSC_OK && one.n > 1 && count > 1 && f->n == 0) {
        /* A pattern of several groups: kept once, repeated. */
        for (size_t i = 0; i < one.n; i++)
            one.r[i].off += at;
        one.bytes *= count;
        one.reps = (MPI_Aint)count;
        one.step = extent_of(t);
        *f = one;
        return PTSC_OK;
    }
    if (rc == PTSC_OK)
        rc = repeat(f, &one, (MPI_Aint)count, extent_of(t), at);
    ptsc__flat_free(&one);
    return rc;
}

int ptsc__flat_add(ptsc__flat_t *f, MPI_Aint off, MPI_Aint len) { return push(f, off, len, len, 1); }
