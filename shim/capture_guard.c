/*
 * capture_guard.c - guarded calls and each thread's capture mode.
 *
 * For now capture_on_guard passes every call through: nothing records a
 * capture itself yet, so it is never reached (ctab_self_recorded stays 0).
 * The self-recording engine (issue 13) gives it its body.
 */
#include "shim/capture_guard.h"

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
    return drv_invoke(id, args);
}
