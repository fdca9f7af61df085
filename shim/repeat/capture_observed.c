/*
 * capture_observed.c - the captures recap only watches: at a site observed
 * only, a capture is the driver's throughout. recap keeps its site, number
 * and start in a slot (shim/state/observed.h), not a capture record, and
 * at its end counts its nodes and logs it. Called by shim/repeat/capture.c,
 * which decides that a capture is observed.
 */
#include "shim/base/phase_clock.h"
#include "shim/base/runtime.h"
#include "shim/base/shape.h"
#include "shim/base/step_time.h"
#include "shim/repeat/capture_account.h"
#include "shim/repeat/capture_driver.h"
#include "shim/repeat/capture_observed.h"
#include "shim/state/events.h"
#include "shim/state/observed.h"
#include "shim/state/sites.h"

/* A capture at a site observed only is the driver's, watched from a slot
 * (shim/state/observed.h); at a site whose mode is off, held in a slot
 * silently (neither counted nor logged); on a stream already capturing,
 * left to the driver to refuse. Returns 0,
 * having done nothing, when the slots are full: the capture table takes
 * the capture then. */
int capture_begin_observed(enum drv_id id, struct stream_ref s, CUstreamCaptureMode mode,
                           struct site *site, CUresult *result)
{
    struct observed_capture busy;
    if (observed_any() && observed_find(s.key, &busy) >= 0) {
        *result = capture_driver_begin(id, s.real, mode);
        return 1;
    }
    if (site->policy.mode == RECAP_MODE_OFF) {
        /* Not watched, but known to run: kept memory's synchronisation
         * must not meet it (ctab_synchronize_if_idle). Where the slots
         * are full it is counted as unseen. */
        struct observed_capture quiet = { .site = site, .silent = 1 };
        int slot = observed_claim(s.key, &quiet);
        if (slot < 0) {
            *result = capture_driver_begin_unseen(id, s.real, mode);   /* the slots are full */
            return 1;
        }
        *result = capture_driver_begin(id, s.real, mode);
        if (*result != CUDA_SUCCESS)
            observed_unclaim(slot);
        return 1;
    }
    PHASE_MARK_START(t_claim);
    struct observed_capture o = { .site = site, .t0 = runtime_now_us() };
    pthread_mutex_lock(&site->lock);
    o.seq = site->seq + 1;
    int slot = observed_claim(s.key, &o);
    if (slot >= 0)
        site->seq = o.seq;
    pthread_mutex_unlock(&site->lock);
    if (slot < 0)
        return 0;
    step_capture_began(&site->step, o.t0);
    PHASE_MARK(PHASE_OBSERVE_BEGIN_CLAIM, t_claim, t_claimed);
    *result = capture_driver_begin(id, s.real, mode);
    PHASE_MARK(PHASE_OBSERVE_BEGIN_DRIVER, t_claimed, t_begun);
    if (*result != CUDA_SUCCESS) {
        observed_unclaim(slot);
        step_capture_refused(&site->step);
    }
    runtime_verbose("capture begin site %016llx #%lu: %s", (unsigned long long)site->id, o.seq,
                    capture_path_name(PATH_OBSERVE));
    return 1;
}

/* The end of a capture recap only watched: the driver's answer, then the
 * node count and the log. */
CUresult capture_end_observed(enum drv_id id, struct stream_ref s, CUgraph *phGraph, int slot,
                              const struct observed_capture *o)
{
    PHASE_MARK_START(t_end);
    CUresult r = capture_driver_end(id, s.real, phGraph);
    PHASE_MARK(PHASE_OBSERVE_END_DRIVER, t_end, t_ended);
    if (r != CUDA_SUCCESS && capture_driver_still_capturing(s.real, o->site))
        return r;   /* wrong thread and the like: the capture goes on */
    if (!observed_release(slot, s.key))
        return r;   /* another thread's end reports it */
    if (o->silent)
        return r;
    struct capture_report rep = { .site = o->site, .seq = o->seq, .path = capture_path_name(PATH_OBSERVE),
                                  .reason = "site observed only", .nodes = -1, .result = r };
    CUgraph graph = r == CUDA_SUCCESS && phGraph ? *phGraph : NULL;
    step_note_handle(graph, &o->site->step);
    struct graph_census census;
    PHASE_MARK(PHASE_OBSERVE_END_RELEASE, t_ended, t_released);
    if (graph && shape_census(graph, 0, &census) == 0)
        rep.nodes = census.nodes;
    else if (graph)
        event_own_call_failed(o->site, census.failed_call, census.error,
                              "the capture is logged without its node count");
    PHASE_MARK(PHASE_OBSERVE_END_NODES, t_released, t_counted_nodes);
    rep.us = runtime_since_us(o->t0);
    capture_count(o->site, &rep, PATH_OBSERVE, 0, 0);
    PHASE_MARK(PHASE_OBSERVE_END_COUNT, t_counted_nodes, t_logged);
    return r;
}
