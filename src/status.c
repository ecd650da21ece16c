/* Status strings, the thread-local error detail, logging and the clock. */
#include "ptsc_internal.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

int ptsc__log_level = PTSC__LOG_WARN;

const char *ptsc_status_string(int status)
{
    switch (status) {
#define PTSC__STATUS_MSG(name, value, msg) \
    case name:                             \
        return msg;
        PTSC_STATUS_LIST(PTSC__STATUS_MSG)
#undef PTSC__STATUS_MSG
    }
    return "unknown status";
}

const char *ptsc_status_name(int status)
{
    switch (status) {
#define PTSC__STATUS_NAME(name, value, msg) \
    case name:                              \
        return #name;
        PTSC_STATUS_LIST(PTSC__STATUS_NAME)
#undef PTSC__STATUS_NAME
    }
    return "PTSC_UNKNOWN_STATUS";
}

ptsc__tls_t *ptsc__tls(void)
{
    static _Thread_local ptsc__tls_t tls;
    return &tls;
}

/*
 * The detail (include/ptsc.h, ptsc_last_error): an operation clears it when
 * it starts (ptsc__check_ready, ptsc_init) and sets it when it fails, marking
 * it unread; ptsc_last_error() marks it read. A failing query replaces it
 * only when it is not an unread failure of an operation.
 */
const char *ptsc_last_error(void)
{
    ptsc__tls_t *t = ptsc__tls();
    t->unread = 0;
    return t->detail;
}

int ptsc_set_error(int status, const char *detail)
{
    if (!detail)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_set_error: detail is NULL");
    if (status >= PTSC_OK || status <= -PTSC_STATUS_COUNT) /* the codes: 0 .. -(PTSC_STATUS_COUNT - 1) */
        return ptsc__err(PTSC_ERR_ARG, "ptsc_set_error: status %d is not a ptsc error code", status);
    return ptsc__err(status, "%s", detail);
}

void ptsc__err_clear(void)
{
    ptsc__tls_t *t = ptsc__tls();
    t->detail[0] = '\0';
    t->unread = 0;
}

void ptsc__err_set_detail(const char *detail)
{
    ptsc__tls_t *t = ptsc__tls();
    if (detail != t->detail)
        snprintf(t->detail, PTSC__DETAIL_LEN, "%s", detail);
    t->unread = 1;
}

static int record(int status, int query, const char *fmt, va_list ap)
{
    ptsc__tls_t *t = ptsc__tls();
    if (query && t->unread) {
        /* Keep the operation's detail the program has not read yet. */
        if (ptsc__log_level >= PTSC__LOG_DEBUG) {
            char d[PTSC__DETAIL_LEN];
            vsnprintf(d, sizeof d, fmt, ap);
            ptsc__log(PTSC__LOG_DEBUG, "%s: %s (detail kept: \"%s\")", ptsc_status_name(status), d,
                      t->detail);
        }
        return status;
    }
    vsnprintf(t->detail, PTSC__DETAIL_LEN, fmt, ap);
    t->unread = !query;
    ptsc__log(PTSC__LOG_DEBUG, "%s: %s", ptsc_status_name(status), t->detail);
    return status;
}

int ptsc__err(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(status, 0, fmt, ap);
    va_end(ap);
    return status;
}

int ptsc__err_query(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(status, 1, fmt, ap);
    va_end(ap);
    return status;
}

int ptsc__err_mpi(int mpi_rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", mpi_rc);
    return ptsc__err(PTSC_ERR_MPI, "%s: %s", what, msg);
}

/* The rank log lines name while ptsc is ready, -1 otherwise: kept here, set
 * by init and finalize, so that status.c reads no state of the modules above
 * it (it is the bottom layer). */
static atomic_int log_rank = -1;

void ptsc__log_set_rank(int rank) { atomic_store(&log_rank, rank); }

void ptsc__log(int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (level > ptsc__log_level)
        return;
    char line[768];
    /* After finalize a thread's context pointer may dangle: read it only while ready. */
    int rank = atomic_load(&log_rank);
    ptsc_ctx_t *ctx = rank >= 0 ? ptsc__tls()->ctx : NULL;
    int n = snprintf(line, sizeof line, "[ptsc r%d t%d] %s: ", rank, ctx ? ctx->index : -1, names[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fputs per line keeps lines of concurrent threads whole. */
    strncat(line, "\n", sizeof line - strlen(line) - 1);
    fputs(line, stderr);
}

uint64_t ptsc__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ptsc__nap_ns(uint64_t ns)
{
    ns = ns < 1000u ? 1000u : ns > PTSC__NAP_MAX_NS ? PTSC__NAP_MAX_NS : ns;
    struct timespec t = {0, (long)ns};
    nanosleep(&t, NULL);
}
