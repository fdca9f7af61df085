/*
 * capture.h - capture begin, end and the calls in between (prefix capture_).
 *
 * Owns: the capture's states and every transition between them: deciding
 * at each capture begin whether this capture is observed, fresh, recorded
 * by recap, or a recapture into a released graph of the site; the
 * recapture callback; journaling the calls made into a capture; and the
 * transparent fallback: when a recapture (or a capture recap records)
 * cannot go on, recap ends it, destroys the undefined graph exactly once,
 * begins a plain capture and replays the journal, so the program sees what
 * a plain capture would have given it. The recorder (capture_recorded.h),
 * the driver steps (capture_driver.h), the prohibitions (capture_rules.h)
 * and the accounting (capture_account.h) serve it and never call back.
 * Must never: let CUDA_ERROR_GRAPH_RECAPTURE_FAILURE reach the program,
 * pass off a journal that lost a call as complete, or call the driver from
 * the recapture callback.
 */
#ifndef RECAP_CAPTURE_H
#define RECAP_CAPTURE_H

#include "shim/state/capture_table.h"
#include "shim/base/driver_api.h"

/* The cuStreamBeginCapture* hook (v1 forms pass GLOBAL and are never
 * recaptured: they have no mode to recapture with). */
CUresult capture_on_begin(enum drv_id id, CUstream hStream, CUstreamCaptureMode mode,
                          const void *entry_return, const void *entry_cfa);

/* Around the program's own cuStreamBeginCaptureToGraph, which recap
 * passes to the driver (`r` its answer): the capture runs unseen
 * (ctab_unseen_began), and what it allocates is the program's. */
void capture_unseen_begin_enter(void);
void capture_unseen_begin_leave(CUresult r);

/* The cuStreamEndCapture* hook. */
CUresult capture_on_end(enum drv_id id, CUstream hStream, CUgraph *phGraph);

/* The hook of every call a capture records or any capture query, reached
 * only while some journaled capture is active. */
CUresult capture_on_op(enum drv_id id, union drv_args *args);

/* Before a call the driver refuses during a capture (driver_api.def role
 * guard:K), made while recap records some capture itself: switches each
 * such capture the call concerns to a driver capture where this thread
 * may, and returns CUDA_SUCCESS (the driver answers the call), or the
 * driver's error for a capture only its owning thread can switch (the
 * call is then not made). */
CUresult capture_on_guarded_call(enum drv_id id, union drv_args *args,
                                 CUstreamCaptureMode thread_mode);

/* Before the program's graph calls (reads, edits, instantiation, destroy):
 * a capture recap records into a graph a query handed the program - the
 * one named, or any where the call names none - becomes a driver capture
 * in that graph first, so the call sees what a driver capture's graph
 * holds. One load while recap records no capture. */
void capture_on_graph_call(CUgraph graph);

static inline void capture_before_graph_call(CUgraph graph)
{
    if (__builtin_expect(capture_any_self_recorded(), 0))
        capture_on_graph_call(graph);
}

#endif
