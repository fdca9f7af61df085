/*
 * capture_guard.c - guarded calls and each thread's capture mode.
 *
 * capture_on_guard is reached only while recap records some capture
 * itself; the capture engine decides what the driver would have done
 * (capture.c, capture_on_guarded_call) and this makes the call.
 */
#include "shim/state/cache.h"
#include "shim/repeat/capture.h"
#include "shim/repeat/capture_guard.h"
#include "shim/repeat/capture_holds.h"

/* What the driver holds for this thread: it starts every thread in GLOBAL. */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUstreamCaptureMode capture_thread_mode(void)
{
    return thread_mode;
}

CUresult capture_on_exchange_mode(CUstreamCaptureMode *mode)
{
    /* The driver makes *mode the thread's mode and writes the previous one
     * back into *mode: what the thread asked for must be read first. */
    if (!mode)
        return DRV_REAL(cuThreadExchangeStreamCaptureMode)(mode);
    CUstreamCaptureMode asked = *mode;
    CUresult r = DRV_REAL(cuThreadExchangeStreamCaptureMode)(mode);
    if (r == CUDA_SUCCESS)
        thread_mode = asked;
    return r;
}

CUresult capture_on_guard(enum drv_id id, union drv_args *args)
{
    /* A +hold row comes here while any capture keeps a journal, the others
     * only while recap records one itself. */
    CUresult r = capture_any_self_recorded() ? capture_on_guarded_call(id, args, thread_mode)
                                             : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        return r;
    if (drv_table[id].hold_kind != DRV_HOLD_NONE)
        return capture_on_release(id, args);
    r = drv_invoke(id, args);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && drv_table[id].oom_retry &&
        cache_release_for_oom())
        r = drv_invoke(id, args);
    return r;
}
