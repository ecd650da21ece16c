/* OpenMP helpers: run a function on every thread of a parallel region,
 * each attached and handed its context. */
#include "ptsc_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

int ptsc_omp_run(int nthreads, ptsc_thread_fn fn, void *arg)
{
    int rc = ptsc__check_ready("ptsc_omp_run");
    if (rc != PTSC_OK)
        return rc;
    if (!fn)
        return ptsc__err(PTSC_ERR_ARG, "ptsc_omp_run: fn is NULL");
    if (omp_get_active_level() > 0)
        return ptsc__err(PTSC_ERR_NESTED, "ptsc_omp_run: called inside a parallel region; call it from "
                                          "sequential code, or use ptsc_omp_attach in your own region");
    int n = nthreads > 0 ? nthreads : omp_get_max_threads();
    if (nthreads <= 0 && n > ptsc__g.nthreads)
        n = ptsc__g.nthreads;
    if (n > ptsc__g.nthreads)
        return ptsc__err(PTSC_ERR_THREAD, "ptsc_omp_run: %d threads requested, PTSC_MAX_THREADS is %d", n,
                         ptsc__g.nthreads);
    int *rcs = calloc((size_t)n, sizeof *rcs), attach_failed = 0;
    char(*details)[PTSC__DETAIL_LEN] = calloc((size_t)n, sizeof *details);
    if (!rcs || !details) {
        free(rcs);
        free(details);
        return ptsc__err(PTSC_ERR_NO_MEMORY, "ptsc_omp_run");
    }
#pragma omp parallel num_threads(n)
    {
        int t = omp_get_thread_num(), trc;
        /* Every thread sees the same team size: if OpenMP gave fewer threads
         * than asked, none runs fn, so no thread waits for a missing peer. */
        if (omp_get_num_threads() != n) {
            trc = PTSC_ERR_UNSUPPORTED;
            snprintf(details[t], PTSC__DETAIL_LEN, "ptsc_omp_run: OpenMP gave %d threads of %d",
                     omp_get_num_threads(), n);
        } else {
            int was_attached = ptsc__tls()->ctx != NULL;
            ptsc_ctx_t *ctx = NULL;
            trc = ptsc_omp_attach(&ctx);
            /* Likewise, if any thread could not attach, none runs fn: a
             * body that waits for its peers (a barrier, a message) would
             * wait for one that never comes. */
            if (trc != PTSC_OK)
                __atomic_store_n(&attach_failed, 1, __ATOMIC_RELAXED);
#pragma omp barrier
            if (trc == PTSC_OK && __atomic_load_n(&attach_failed, __ATOMIC_RELAXED)) {
                if (!was_attached)
                    (void)ptsc_thread_detach();
            } else if (trc == PTSC_OK) {
                trc = fn(ctx, arg);
                /* Kept now: the detach below starts by clearing the detail. */
                if (trc != PTSC_OK)
                    snprintf(details[t], PTSC__DETAIL_LEN, "thread %d: %s", t, ptsc_last_error());
                if (!was_attached) {
                    /* Requests the body left in flight are completed (or,
                     * receives nothing matched, cancelled) before the
                     * context goes: the region's end must not lose them. */
                    int pending = ptsc__engine_pending(ctx);
                    if (pending)
                        ptsc__engine_drain(ctx);
                    int drc = ptsc_thread_detach();
                    if (drc == PTSC_OK && pending)
                        drc = ptsc__err(PTSC_ERR_PENDING,
                                        "ptsc_omp_run: thread %d returned with %d request(s) not completed; "
                                        "they were completed or cancelled at the end of the region",
                                        t, pending);
                    if (trc == PTSC_OK)
                        trc = drc;
                }
            }
            if (trc != PTSC_OK && details[t][0] == '\0')
                snprintf(details[t], PTSC__DETAIL_LEN, "thread %d: %s", t, ptsc_last_error());
        }
        rcs[t] = trc;
    }
    rc = PTSC_OK;
    for (int t = 0; t < n; t++) {
        if (rcs[t] != PTSC_OK) {
            rc = rcs[t];
            ptsc__err_set_detail(details[t]);
            break;
        }
    }
    free(rcs);
    free(details);
    return rc;
}
