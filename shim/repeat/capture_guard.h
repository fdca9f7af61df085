/*
 * capture_guard.h - the calls the driver refuses while a stream captures
 * (prefix capture_, beside capture.h).
 *
 * Owns: the hook of every guarded call of driver_api.def (role guard:K:
 * potentially unsafe calls, synchronisation and queries of what may be
 * capturing), reached only while recap records a capture itself with no
 * driver capture behind it (ctab_self_recorded non-zero), and each thread's
 * stream capture mode as cuThreadExchangeStreamCaptureMode last set it,
 * which decides which of those calls the driver would have refused. Must
 * never: change the arguments or the result of a call it passes through,
 * let a guarded call run against a stream, event or context that the
 * driver would have found capturing without first making the capture a real
 * driver capture (or answering the driver's error), or call the driver from
 * capture_thread_mode (it is read on hot paths).
 */
#ifndef RECAP_CAPTURE_GUARD_H
#define RECAP_CAPTURE_GUARD_H

#include "shim/state/capture_table.h"
#include "shim/base/driver_api.h"

/* The hook of every guard:K call except capture_mode, reached only while
 * capture_any_self_recorded() (+hold rows: capture_any_journaled(), and
 * they end in capture_on_release): decides, from the call's id and arguments
 * (drv_table[id].guard_kind, drv_args_stream, drv_args_event,
 * drv_args_second_event), what the driver would have done during the
 * capture, and makes the call (drv_invoke). For guard:unsafe+oom rows the
 * wrapper's OOM retry covers the fast path only. */
CUresult capture_on_guard(enum drv_id id, union drv_args *args);

/* The hook of cuThreadExchangeStreamCaptureMode, always reached: calls the
 * driver and, when it succeeds, records the mode the thread asked for. */
CUresult capture_on_exchange_mode(CUstreamCaptureMode *mode);

/* The calling thread's capture mode, as the driver holds it:
 * CU_STREAM_CAPTURE_MODE_GLOBAL until the thread exchanges it. No driver
 * call, no lock. */
CUstreamCaptureMode capture_thread_mode(void);

#endif
