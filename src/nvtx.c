/*
 * NVTX ranges for Nsight Systems (PTSC_NVTX=1): syncs, staging copies and
 * the blocking parts of transfers and collectives show up as ranges of the
 * "ptsc" domain, named so that a timeline reads by itself ("ptsc_send r1 t3
 * tag 7 64 KiB staged", "sync thread", "stage D2H 64 KiB"), and every
 * attached thread is named "ptsc r<rank> t<thread>".
 *
 * Off (the default), each range is one predictable branch on
 * ptsc__g.cfg.nvtx at its call site (ptsc_internal.h): no formatting, no
 * call into this file. NVTX 3 is header-only (it finds Nsight's injection
 * library at run time with dlopen); where the CUDA layer or the header is
 * absent, the ranges keep their bookkeeping (the counters below) and make
 * no NVTX call.
 *
 * The counters (calls, and the depth of open ranges per thread) let tests
 * check without a profiler that every range opened is closed, error paths
 * included.
 */
#include "ptsc_internal.h"

#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(PTSC_HAVE_CUDA) && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define PTSC__HAVE_NVTX 1
#endif
#endif

#define NAME_LEN 160

static atomic_ulong pushes, pops, names;
static _Thread_local int depth;
static _Thread_local char last[NAME_LEN];

#ifdef PTSC__HAVE_NVTX
static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;
static void domain_create(void) { domain = nvtxDomainCreateA("ptsc"); }
#endif

static void push_name(void)
{
    depth++;
    atomic_fetch_add_explicit(&pushes, 1, memory_order_relaxed);
#ifdef PTSC__HAVE_NVTX
    pthread_once(&domain_once, domain_create);
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = last;
    nvtxDomainRangePushEx(domain, &a);
#endif
}

void ptsc__nvtx_push_on(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last, sizeof last, fmt, ap);
    va_end(ap);
    push_name();
}

/* "64 KiB", "1.5 MiB", "100 B" into buf. */
static void size_text(size_t n, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    size_t whole = n, scale = 1;
    while (whole >= 1024 && u < 4) {
        whole /= 1024;
        scale *= 1024;
        u++;
    }
    if (u == 0 || n % scale == 0)
        snprintf(buf, len, "%zu %s", whole, unit[u]);
    else
        snprintf(buf, len, "%.1f %s", (double)n / (double)scale, unit[u]);
}

void ptsc__nvtx_push_msg_on(const char *call, int rank, int thread, int tag, size_t bytes, int staged)
{
    char r[16] = "any", t[16] = "any", g[16] = "any", s[32];
    if (rank >= 0)
        snprintf(r, sizeof r, "%d", rank);
    if (thread >= 0)
        snprintf(t, sizeof t, "%d", thread);
    if (tag >= 0)
        snprintf(g, sizeof g, "%d", tag);
    size_text(bytes, s, sizeof s);
    snprintf(last, sizeof last, "%s r%s t%s tag %s %s%s", call, r, t, g, s, staged ? " staged" : "");
    push_name();
}

void ptsc__nvtx_push_copy_on(int to_host, size_t bytes)
{
    char s[32];
    size_text(bytes, s, sizeof s);
    snprintf(last, sizeof last, "stage %s %s", to_host ? "D2H" : "H2D", s);
    push_name();
}

void ptsc__nvtx_pop_on(void)
{
    depth--;
    atomic_fetch_add_explicit(&pops, 1, memory_order_relaxed);
#ifdef PTSC__HAVE_NVTX
    nvtxDomainRangePop(domain);
#endif
}

void ptsc__nvtx_name_thread_on(int index)
{
    atomic_fetch_add_explicit(&names, 1, memory_order_relaxed);
#ifdef PTSC__HAVE_NVTX
    char name[64];
    snprintf(name, sizeof name, "ptsc r%d t%d", ptsc__g.rank, index);
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), name);
#else
    (void)index;
#endif
}

int ptsc__nvtx_depth(void) { return depth; }

const char *ptsc__nvtx_last(void) { return last; }

void ptsc__nvtx_counts(unsigned long *push, unsigned long *pop, unsigned long *name)
{
    *push = atomic_load(&pushes);
    *pop = atomic_load(&pops);
    *name = atomic_load(&names);
}
