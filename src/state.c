/* Process state: the one struct every module reads (ptsc__g) and the
 * readiness check calls start with. Below every module but status.c, so
 * that each can reach the state without depending on init.c, which writes
 * it. */
#include "ptsc_internal.h"

ptsc__global_t ptsc__g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int check_state(const char *call, int (*err)(int, const char *, ...))
{
    switch (atomic_load_explicit(&ptsc__g.state, memory_order_acquire)) {
    case PTSC__STATE_READY:
        return PTSC_OK;
    case PTSC__STATE_NONE:
        return err(PTSC_ERR_NOT_INITIALIZED, "%s: call ptsc_init first", call);
    case PTSC__STATE_INIT:
        return err(PTSC_ERR_NOT_INITIALIZED, "%s: ptsc_init has not returned yet (it runs in another thread)",
                   call);
    case PTSC__STATE_FINALIZING:
        return err(PTSC_ERR_FINALIZED, "%s: ptsc_finalize is running", call);
    default:
        return err(PTSC_ERR_FINALIZED, "%s: ptsc_finalize has already been called", call);
    }
}

int ptsc__check_ready(const char *call)
{
    ptsc__err_clear();
    return check_state(call, ptsc__err);
}

int ptsc__check_ready_query(const char *call) { return check_state(call, ptsc__err_query); }
