/*
 * The table "Bad input, class by class" of docs/errors.md, row by row: each
 * case tries its row's input in a process of its own and must get the
 * status the row names; every row has a case and every case a row. Also
 * the data side of rows whose status alone says too little (MPI_BOTTOM
 * delivers, a refused sendrecv leaves the message, the lazy-attach detail
 * names the call).
 */
#include "test_util.h"

#include <criterion/parameterized.h>
#include <pthread.h>
#include <stdint.h>

#ifndef PTSC_ERRORS_DOC
#error "PTSC_ERRORS_DOC (the path of docs/errors.md) must be defined"
#endif

TestSuite(errors_table, .init = ptsc_test_clean_env, .timeout = 60);

static ptsc_ctx_t *ctx;
static int buf[4096], rbuf[4096];
/* The detail of the call a case tried, where it made later calls or tried
 * it on another thread (details are per thread). */
static char tried_detail[512];

static int keep_detail(int rc, const char *detail)
{
    snprintf(tried_detail, sizeof tried_detail, "%s", detail);
    return rc;
}

/* One rank, 2 slots, the calling thread attached as index 0. */
static void ready(void)
{
    ptsc_test_init(2, NULL);
    PTSC_ASSERT_OK(ptsc_thread_attach(0, &ctx));
}

static void pieces(void)
{
    setenv("PTSC_STAGING", "always", 1);
    setenv("PTSC_STAGING_CHUNK", "4096", 1);
}

/* A committed contiguous type of 2^k bytes (k >= 30). */
static MPI_Datatype pow2_type(int k)
{
    MPI_Datatype t, u;
    MPI_Type_contiguous(1 << 30, MPI_BYTE, &t);
    for (k -= 30; k > 0; k--) {
        MPI_Type_contiguous(2, t, &u);
        MPI_Type_free(&t);
        t = u;
    }
    MPI_Type_commit(&t);
    return t;
}

/* `n` ints of `a` at absolute addresses: a struct of their addresses. */
static MPI_Datatype abs_type(int *a, int n)
{
    int lens[1] = {n};
    MPI_Aint disp[1];
    MPI_Datatype types[1] = {MPI_INT}, t;
    MPI_Get_address(a, &disp[0]);
    MPI_Type_create_struct(1, lens, disp, types, &t);
    MPI_Type_commit(&t);
    return t;
}

/* A vector of `n` ints with a hole after each. */
static MPI_Datatype holes(int n, int commit)
{
    MPI_Datatype t;
    MPI_Type_vector(n, 1, 2, MPI_INT, &t);
    if (commit)
        MPI_Type_commit(&t);
    return t;
}

typedef struct {
    ptsc_ctx_t *ctx;
    int index, rc;
    char detail[512];
    pthread_t th;
    pthread_barrier_t bar;
} helper_t;

/* A second thread: attach to `index` (or call ptsc_send lazily when -1),
 * and keep what it got until helper_done. */
static void *helper(void *p)
{
    helper_t *h = p;
    if (h->index >= 0)
        h->rc = ptsc_thread_attach(h->index, &h->ctx);
    else
        h->rc = ptsc_send(NULL, buf, 1, MPI_INT, 0, 1, 0);
    snprintf(h->detail, sizeof h->detail, "%s", ptsc_last_error());
    pthread_barrier_wait(&h->bar);
    pthread_barrier_wait(&h->bar);
    if (h->rc == PTSC_OK && h->index >= 0)
        ptsc_thread_detach();
    return NULL;
}

static void helper_start(int index, helper_t *h)
{
    h->index = index;
    h->ctx = NULL;
    pthread_barrier_init(&h->bar, NULL, 2);
    pthread_create(&h->th, NULL, helper, h);
    pthread_barrier_wait(&h->bar);
}

static void helper_done(helper_t *h)
{
    pthread_barrier_wait(&h->bar);
    pthread_join(h->th, NULL);
}

static int tag_max(void)
{
    int t = 0;
    ptsc_tag_max(&t);
    return t;
}

/* ------------------------------------------------------------------------ */
/* The cases: each sets up what its row says and returns the status.       */
/* ------------------------------------------------------------------------ */

static int c_null_buffer(void) { return ready(), ptsc_send(ctx, NULL, 1, MPI_INT, 0, 1, 0); }
static int c_null_buffer_count0(void)
{
    return ready(), ptsc_sendrecv(ctx, NULL, 0, MPI_INT, 0, 0, 0, NULL, 0, MPI_INT, 0, 0, 0);
}

static int c_bottom_absolute(void)
{
    ready();
    for (int i = 0; i < 8; i++)
        buf[i] = 100 + i, rbuf[i] = -1;
    MPI_Datatype s = abs_type(buf, 8), r = abs_type(rbuf, 8);
    int rc = ptsc_sendrecv(ctx, MPI_BOTTOM, 1, s, 0, 0, 0, MPI_BOTTOM, 1, r, 0, 0, 0);
    for (int i = 0; rc == PTSC_OK && i < 8; i++)
        cr_expect_eq(rbuf[i], 100 + i, "element %d received through MPI_BOTTOM is %d", i, rbuf[i]);
    return rc;
}

static int c_bottom_relative(void) { return ready(), ptsc_send(ctx, MPI_BOTTOM, 1, MPI_INT, 0, 1, 0); }
static int c_bottom_coll(void) { return ready(), ptsc_bcast(ctx, MPI_BOTTOM, 1, abs_type(buf, 8), 0); }
static int c_bottom_pieces(void)
{
    pieces();
    ready();
    return ptsc_send(ctx, MPI_BOTTOM, 1, abs_type(buf, 2048), 0, 1, 0);
}

static ptsc_request_t req;
static int c_in_place_send(void) { return ready(), ptsc_send(ctx, MPI_IN_PLACE, 1, MPI_INT, 0, 1, 0); }
static int c_in_place_recv(void) { return ready(), ptsc_recv(ctx, MPI_IN_PLACE, 1, MPI_INT, 0, 1, 0); }
static int c_in_place_isend(void)
{
    return ready(), ptsc_isend(ctx, MPI_IN_PLACE, 1, MPI_INT, 0, 1, 0, &req);
}
static int c_in_place_irecv(void)
{
    return ready(), ptsc_irecv(ctx, MPI_IN_PLACE, 1, MPI_INT, 0, 1, 0, &req);
}
static int c_in_place_sendrecv(void)
{
    return ready(), ptsc_sendrecv(ctx, buf, 1, MPI_INT, 0, 0, 0, MPI_IN_PLACE, 1, MPI_INT, 0, 0, 0);
}
static int c_in_place_bcast(void) { return ready(), ptsc_bcast(ctx, MPI_IN_PLACE, 1, MPI_INT, 0); }
static int c_in_place_allreduce(void)
{
    return ready(), ptsc_allreduce(ctx, MPI_IN_PLACE, buf, 1, MPI_INT, MPI_SUM);
}
static int c_in_place_allreduce_recv(void)
{
    return ready(), ptsc_allreduce(ctx, buf, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM);
}
static int c_in_place_gather_root(void)
{
    return ready(), ptsc_gather(ctx, MPI_IN_PLACE, 1, MPI_INT, buf, 1, MPI_INT, 0);
}
static int c_in_place_ibcast(void) { return ready(), ptsc_ibcast(ctx, MPI_IN_PLACE, 1, MPI_INT, 0, &req); }
static int c_in_place_world_bcast(void)
{
    return ready(), ptsc_world_bcast(ctx, 1, MPI_IN_PLACE, 1, MPI_INT, 0, 0);
}

static int c_negative_count(void) { return ready(), ptsc_send(ctx, buf, -1, MPI_INT, 0, 1, 0); }
static int c_count_overflow(void) { return ready(), ptsc_isend(ctx, buf, 3, pow2_type(62), 0, 1, 0, &req); }
static int c_coll_count_overflow(void) { return ready(), ptsc_bcast(ctx, buf, 3, pow2_type(62), 0); }
static int c_element_overflow(void) { return ready(), ptsc_send(ctx, buf, 1, pow2_type(63), 0, 1, 0); }
static int c_span_overflow(void)
{
    ready();
    MPI_Datatype wide;
    MPI_Type_create_resized(MPI_BYTE, 0, (MPI_Aint)1 << 62, &wide);
    MPI_Type_commit(&wide);
    return ptsc_send(ctx, buf, 3, wide, 0, 1, 0);
}
static int c_piece_overflow(void)
{
    pieces();
    ready();
    return ptsc_isend(ctx, buf, 1, pow2_type(62), 0, 1, 0, &req);
}
static int c_datatype_null(void) { return ready(), ptsc_send(ctx, buf, 1, MPI_DATATYPE_NULL, 0, 1, 0); }
static int c_uncommitted_type(void) { return ready(), ptsc_recv(ctx, buf, 1, holes(4, 0), 0, 1, 0); }
static int c_op_null(void) { return ready(), ptsc_allreduce(ctx, buf, rbuf, 1, MPI_INT, MPI_OP_NULL); }
static int c_predefined_op_derived(void)
{
    ready();
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    return ptsc_allreduce(ctx, buf, rbuf, 1, pair, MPI_SUM);
}
static int c_bad_rank(void) { return ready(), ptsc_send(ctx, buf, 1, MPI_INT, 1, 1, 0); }
static int c_any_rank_send(void) { return ready(), ptsc_send(ctx, buf, 1, MPI_INT, PTSC_ANY_RANK, 1, 0); }
static int c_bad_root(void) { return ready(), ptsc_bcast(ctx, buf, 1, MPI_INT, 1); }
static int c_bad_thread(void) { return ready(), ptsc_send(ctx, buf, 1, MPI_INT, 0, 2, 0); }
static int c_bad_tag(void) { return ready(), ptsc_send(ctx, buf, 1, MPI_INT, 0, 1, tag_max() + 1); }
static int c_negative_tag(void) { return ready(), ptsc_recv(ctx, buf, 1, MPI_INT, 0, 1, -1); }
static int c_null_request(void) { return ready(), ptsc_isend(ctx, buf, 1, MPI_INT, 0, 1, 0, NULL); }
static int c_null_output(void) { return ready(), ptsc_rank(NULL); }
static int c_null_done(void) { return ready(), ptsc_test(&req, NULL); }
static int c_negative_array(void)
{
    ptsc_request_t reqs[1] = {PTSC_REQUEST_NULL};
    return ready(), ptsc_waitall(-1, reqs);
}
static int c_bad_scope(void) { return ready(), ptsc_sync(ctx, (ptsc_scope_t)99); }

static int c_wrong_thread_ctx(void)
{
    ready();
    static helper_t h;
    helper_start(1, &h);
    int rc = ptsc_send(h.ctx, buf, 1, MPI_INT, 0, 1, 0);
    helper_done(&h);
    return rc;
}

static int c_sendrecv_send_refused(void)
{
    pieces();
    ready();
    /* The message the receive half would match: from thread 0 to itself. */
    buf[0] = 4242;
    ptsc_request_t sent = PTSC_REQUEST_NULL;
    PTSC_ASSERT_OK(ptsc_isend(ctx, buf, 1, MPI_INT, 0, 0, 5, &sent));
    rbuf[0] = -1;
    int rc = ptsc_sendrecv(ctx, buf, 1, holes(2048, 1), 0, 1, 0, rbuf, 1, MPI_INT, 0, 0, 5);
    keep_detail(rc, ptsc_last_error());
    cr_expect_eq(rbuf[0], -1, "the refused sendrecv wrote %d into its receive buffer", rbuf[0]);
    /* The message is still there for the next receive. */
    int flag = 0;
    PTSC_ASSERT_OK(ptsc_iprobe(ctx, 0, 0, 5, &flag, NULL));
    cr_expect(flag, "the refused sendrecv consumed the incoming message");
    if (flag) {
        PTSC_ASSERT_OK(ptsc_recv(ctx, rbuf, 1, MPI_INT, 0, 0, 5));
        cr_expect_eq(rbuf[0], 4242);
    }
    PTSC_ASSERT_OK(ptsc_wait(&sent));
    return rc;
}

static int c_before_init(void) { return ptsc_send(NULL, buf, 1, MPI_INT, 0, 1, 0); }
static int c_before_init_null_request(void) { return ptsc_isend(NULL, buf, 1, MPI_INT, 0, 1, 0, NULL); }
static int c_after_finalize(void)
{
    ready();
    ptsc_thread_detach();
    PTSC_ASSERT_OK(ptsc_finalize());
    return ptsc_send(NULL, buf, 1, MPI_INT, 0, 1, 0);
}
static int c_init_twice(void) { return ready(), ptsc_init(NULL, NULL); }
static int c_bad_env(void)
{
    setenv("PTSC_SYNC_SCOPE", "bogus", 1);
    return ptsc_init(NULL, NULL);
}
static int c_detach_unattached(void)
{
    ready();
    PTSC_ASSERT_OK(ptsc_thread_detach());
    return ptsc_thread_detach();
}
static int c_attach_twice(void)
{
    ptsc_ctx_t *c;
    return ready(), ptsc_thread_attach(1, &c);
}
static int c_attach_taken(void)
{
    ready();
    static helper_t h;
    helper_start(0, &h);
    helper_done(&h);
    return keep_detail(h.rc, h.detail);
}
static int c_lazy_attach_full(void)
{
    ready();
    static helper_t one, lazy;
    helper_start(1, &one);
    helper_start(-1, &lazy);
    helper_done(&lazy);
    helper_done(&one);
    cr_expect(strstr(lazy.detail, "ptsc_send") != NULL && strstr(lazy.detail, "ptsc_self") == NULL,
              "the detail of a failed lazy attach names \"%s\", not the call the program made", lazy.detail);
    return keep_detail(lazy.rc, lazy.detail);
}

#define CASE(name)      \
    {                   \
#name, c_##name \
    }
static const struct {
    const char *name;
    int (*run)(void);
} cases[] = {
    CASE(null_buffer),
    CASE(null_buffer_count0),
    CASE(bottom_absolute),
    CASE(bottom_relative),
    CASE(bottom_coll),
    CASE(bottom_pieces),
    CASE(in_place_send),
    CASE(in_place_recv),
    CASE(in_place_isend),
    CASE(in_place_irecv),
    CASE(in_place_sendrecv),
    CASE(in_place_bcast),
    CASE(in_place_allreduce),
    CASE(in_place_allreduce_recv),
    CASE(in_place_gather_root),
    CASE(in_place_ibcast),
    CASE(in_place_world_bcast),
    CASE(negative_count),
    CASE(count_overflow),
    CASE(coll_count_overflow),
    CASE(element_overflow),
    CASE(span_overflow),
    CASE(piece_overflow),
    CASE(datatype_null),
    CASE(uncommitted_type),
    CASE(op_null),
    CASE(predefined_op_derived),
    CASE(bad_rank),
    CASE(any_rank_send),
    CASE(bad_root),
    CASE(bad_thread),
    CASE(bad_tag),
    CASE(negative_tag),
    CASE(null_request),
    CASE(null_output),
    CASE(null_done),
    CASE(negative_array),
    CASE(bad_scope),
    CASE(wrong_thread_ctx),
    CASE(sendrecv_send_refused),
    CASE(before_init),
    CASE(before_init_null_request),
    CASE(after_finalize),
    CASE(init_twice),
    CASE(bad_env),
    CASE(detach_unattached),
    CASE(attach_twice),
    CASE(attach_taken),
    CASE(lazy_attach_full),
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct {
    char name[64], status[64];
} row_t;

/* The rows of the section "## Bad input, class by class": `| `case` | ... | `STATUS` |`. */
static int read_rows(row_t *rows, int max)
{
    FILE *f = fopen(PTSC_ERRORS_DOC, "r");
    cr_assert(f, "cannot open %s", PTSC_ERRORS_DOC);
    char line[4096];
    int in = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "## ", 3) == 0)
            in = strncmp(line, "## Bad input", 12) == 0;
        if (!in || strncmp(line, "| `", 3) != 0)
            continue;
        cr_assert(n < max, "more than %d rows", max);
        const char *a = line + 3, *e = strchr(a, '`');
        cr_assert(e && (size_t)(e - a) < sizeof rows[n].name, "malformed row: %s", line);
        memcpy(rows[n].name, a, (size_t)(e - a));
        rows[n].name[e - a] = '\0';
        /* The status: the last `...` cell. */
        char *end = strrchr(line, '|');
        cr_assert(end, "malformed row: %s", line);
        *end = '\0';
        char *cell = strrchr(line, '|');
        char *s = cell ? strchr(cell, '`') : NULL, *t = s ? strchr(s + 1, '`') : NULL;
        cr_assert(s && t && (size_t)(t - s - 1) < sizeof rows[n].status, "no status in row %s", rows[n].name);
        memcpy(rows[n].status, s + 1, (size_t)(t - s - 1));
        rows[n].status[t - s - 1] = '\0';
        n++;
    }
    fclose(f);
    cr_assert(n > 0, "no rows in the section \"## Bad input\" of %s", PTSC_ERRORS_DOC);
    return n;
}

Test(errors_table, rows_and_cases_match)
{
    row_t rows[128];
    int n = read_rows(rows, 128);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < NCASES; k++)
            found |= strcmp(rows[i].name, cases[k].name) == 0;
        cr_expect(found, "docs/errors.md row `%s` has no case in tests/test_errors_table.c", rows[i].name);
    }
    for (int k = 0; k < NCASES; k++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= strcmp(rows[i].name, cases[k].name) == 0;
        cr_expect(found, "case %s has no row in docs/errors.md", cases[k].name);
    }
}

ParameterizedTestParameters(errors_table, row)
{
    static int idx[NCASES];
    for (int i = 0; i < NCASES; i++)
        idx[i] = i;
    return cr_make_param_array(int, idx, NCASES);
}

ParameterizedTest(int *k, errors_table, row)
{
    row_t rows[128];
    int n = read_rows(rows, 128);
    const char *want = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].name, cases[*k].name) == 0)
            want = rows[i].status;
    cr_assert(want, "case %s has no row in docs/errors.md", cases[*k].name);
    cr_log_info("row %s", cases[*k].name); /* names a row that hangs or crashes */
    int rc = cases[*k].run();
    cr_expect_str_eq(ptsc_status_name(rc), want,
                     "%s: the call returned %s, docs/errors.md says %s (detail: %s)", cases[*k].name,
                     ptsc_status_name(rc), want, tried_detail[0] ? tried_detail : ptsc_last_error());
    const char *detail = tried_detail[0] ? tried_detail : ptsc_last_error();
    if (rc != PTSC_OK)
        cr_expect(detail[0] != '\0', "%s: %s without a detail", cases[*k].name, ptsc_status_name(rc));
}
