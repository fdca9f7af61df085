/*
 * capture.c - begin, record, end; recapture and its transparent fallback.
 *
 * A capture at an enabled site on a driver with the recapture API is
 * journaled from its begin. Its first captures are plain ("fresh"); their
 * journals are checked against the graphs they produced, and only once a
 * journal accounted for every node does the site recapture into the graphs
 * the program released. A recapture that fails - at begin, at a call, or at
 * end, whichever the driver chooses - is ended, its graph destroyed once,
 * and replaced by a plain capture into which the journal is replayed; the
 * failing call is then made again in the plain capture and its result is
 * what the program sees. A call recap cannot journal ends a recapture before
 * it runs, so the journal never misses a call that needs replaying. A
 * capture at a site observed only is the driver's throughout: recap keeps
 * its site, number and start in a slot (shim/observed.h), not a capture
 * record, and at its end counts its nodes and logs it.
 *
 * Locks: a capture's lock serialises every call into it (and the switch to
 * a plain capture); then site->lock; then cache_lock; captures_lock last.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/cache.h"
#include "shim/capture.h"
#include "shim/capture_holds.h"
#include "shim/capture_internal.h"
#include "shim/driver.h"
#include "shim/events.h"
#include "shim/graph_copy.h"
#include "shim/kept_memory.h"
#include "shim/exec_reuse.h"
#include "shim/observed.h"
#include "shim/phase_clock.h"
#include "shim/runtime.h"
#include "shim/self_record.h"
#include "shim/shape.h"
#include "shim/sites.h"
#include "shim/step_time.h"

static const char *const path_names[] = {
    [PATH_OBSERVE] = "observe", [PATH_FRESH] = "fresh",
    [PATH_RECAPTURE] = "recapture", [PATH_FALLBACK] = "fallback",
};

/* --- reasons --------------------------------------------------------------------- */

/* Copies a reason without the cost of formatting: the decision is made on
 * every capture begin. */
void capture_set_reason(struct capture *cap, const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof cap->reason)
        n = sizeof cap->reason - 1;
    memcpy(cap->reason, text, n);
    cap->reason[n] = '\0';
}

static pthread_once_t no_api_reason_once = PTHREAD_ONCE_INIT;
static char no_api_reason[64], no_api_self_off_reason[128];

static void format_no_api_reason(void)
{
    snprintf(no_api_reason, sizeof no_api_reason, "driver %d has no recapture API", drv_caps.version);
    snprintf(no_api_self_off_reason, sizeof no_api_self_off_reason,
             "driver %d has no recapture API and self-recording is off at this site",
             drv_caps.version);
}

/* --- driver calls recap makes on the capture's streams ------------------------ */

static CUresult begin_plain(enum drv_id id, CUstream stream, CUstreamCaptureMode mode)
{
    switch (id) {
    case DRV_cuStreamBeginCapture:
        return DRV_REAL(cuStreamBeginCapture)(stream);
    case DRV_cuStreamBeginCapture_ptsz:
        return DRV_REAL(cuStreamBeginCapture_ptsz)(stream);
    default:
        return ((drv_fn_cuStreamBeginCapture_v2)drv_real_fn[id])(stream, mode);
    }
}

static CUresult end_real(enum drv_id id, CUstream stream, CUgraph *graph)
{
    return ((drv_fn_cuStreamEndCapture)drv_real_fn[id])(stream, graph);
}

static int stream_still_capturing(CUstream stream, struct site *site)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = DRV_REAL(cuStreamIsCapturing)(stream, &status);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(site, "cuStreamIsCapturing", r,
                              "the capture is taken to have ended");
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static cuuint64_t capture_id_of(struct capture *cap)
{
    CUstreamCaptureStatus status;
    cuuint64_t id = 0;
    CUresult r = DRV_REAL(cuStreamGetCaptureInfo_v3)(cap->origin.real, &status, &id, NULL, NULL,
                                                     NULL, NULL);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(cap->site, "cuStreamGetCaptureInfo_v3", r,
                              "after a fallback the program may see a new capture id");
        return 0;
    }
    return id;
}

/* --- the recapture callback ------------------------------------------------- */

/* Appends to the capture's change list; out of memory loses the list's
 * completeness, which the instantiation then knows. Caller holds
 * cap->changes_lock (or, for recap's own recording, cap->lock: note_change). */
void capture_push_change(struct capture *cap, struct changed_node changed)
{
    if (cap->nchanged == cap->changed_capacity) {
        size_t capacity = cap->changed_capacity ? cap->changed_capacity * 2 : 32;
        struct changed_node *grown = realloc(cap->changed, capacity * sizeof *grown);
        if (grown) {
            cap->changed = grown;
            cap->changed_capacity = capacity;
        }
    }
    if (cap->nchanged < cap->changed_capacity)
        cap->changed[cap->nchanged++] = changed;
    else
        cap->changes_lost = 1;
}

/* Runs inside driver calls: it records and counts, and never calls CUDA. It
 * always accepts, so a recapture fails only for the driver's own reasons;
 * ineligible changes just mean a whole update at instantiation. */
static CUresult CUDAAPI recapture_callback(void *data, CUgraphNode node,
                                           const CUgraphNodeParams *original,
                                           const CUgraphNodeParams *recaptured,
                                           CUgraphRecaptureStatus status)
{
    struct capture *cap = data;
    const CUgraphNodeParams *p = recaptured ? recaptured : original;

    pthread_mutex_lock(&cap->changes_lock);
    if (status == CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE)
        cap->eligible++;
    else if (status == CU_GRAPH_RECAPTURE_INELIGIBLE_FOR_UPDATE)
        cap->ineligible++;
    else
        cap->errors++;
    capture_push_change(cap, (struct changed_node){ node, p ? p->type : CU_GRAPH_NODE_TYPE_KERNEL, -1 });
    pthread_mutex_unlock(&cap->changes_lock);
    return CUDA_SUCCESS;
}

void capture_forget_changes(struct capture *cap)
{
    pthread_mutex_lock(&cap->changes_lock);
    cap->nchanged = 0;
    cap->eligible = cap->ineligible = cap->errors = 0;
    cap->changes_lost = 0;
    pthread_mutex_unlock(&cap->changes_lock);
}

/* --- fallback ----------------------------------------------------------------- */

/* Whether this thread may end the capture and begin its replacement on the
 * origin stream: relaxed mode lets any thread, except where the origin is a
 * per-thread default stream, which no other thread can name (its
 * CU_STREAM_PER_THREAD, and the journal's per-thread calls, are its own). */
int capture_may_end_here(const struct capture *cap)
{
    if (pthread_equal(pthread_self(), cap->owner))
        return 1;
    return cap->mode == CU_STREAM_CAPTURE_MODE_RELAXED && cap->origin.real != CU_STREAM_PER_THREAD;
}

/* Ends a driver capture recap gives up on and destroys what it captured
 * (a recapture's graph is undefined). Caller holds cap->lock, on a thread
 * that may end the capture. */
static void end_driver_capture(struct capture *cap)
{
    CUgraph dead = NULL;
    end_real(DRV_cuStreamEndCapture, cap->origin.real, &dead);
    if (cap->target) {
        if (dead == graph_rec_graph(cap->target))
            dead = NULL;
        cache_graph_discard(cap->target);
        cap->target = NULL;
    }
    if (dead && dead != cap->lent_graph)
        DRV_REAL(cuGraphDestroy)(dead);
    cap->no_driver_capture = 1;
}

/* recap cannot give the program what a driver capture would from here on:
 * a call it can neither copy nor answer while a switch waits for the
 * capturing thread, or a replay that failed. The capture is invalidated,
 * as the driver invalidates a capture it cannot go on with: every later
 * call into it and its end return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
 * (answered by recap, as for the captures it records), never a graph that
 * silently lacks work. The site is not recaptured again. Where this thread
 * may not end a driver capture still running, the capturing thread's next
 * call does (end_invalidated). Caller holds cap->lock. */
void capture_invalidate(struct capture *cap, const char *why)
{
    if (cap->invalidated)
        return;
    event_error(cap->site, "%s: the capture is invalidated (the program gets "
                           "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) rather than a graph without "
                           "that work; recap no longer recaptures this site", why);
    sites_forbid_recapture(cap->site, why);
    capture_set_reason(cap, why);
    cap->invalidated = 1;
    cap->fallback_pending = 0;
    cap->path = PATH_FALLBACK;
    if (!cap->no_driver_capture && capture_may_end_here(cap))
        end_driver_capture(cap);
}

/* The capturing thread's first call after another thread invalidated its
 * capture ends the driver capture that still ran. */
static void end_invalidated(struct capture *cap)
{
    if (cap->invalidated && !cap->no_driver_capture && capture_may_end_here(cap))
        end_driver_capture(cap);
}

static void learn_result(struct capture *cap, CUresult r)
{
    if (r != CUDA_SUCCESS)
        event_own_call_failed(cap->site, "cuStreamGetCaptureInfo_v3", r,
                              "this capture's graph is not recorded against");
}

/* Replays the journal noting the node of each call, so the graph of the
 * plain capture can be recorded against later. */
static CUresult replay_learning(struct capture *cap, size_t *failed_at)
{
    struct journal *j = &cap->journal;
    for (size_t i = 0; i < j->nops; i++) {
        struct journal_op *op = &j->ops[i];
        CUresult r = drv_invoke(op->id, &op->args);
        if (r != CUDA_SUCCESS) {
            *failed_at = i;
            return r;
        }
        if (op->creates_node)
            learn_result(cap, self_record_learn_node(
                ctab_stream_ref(op->id, drv_args_stream(op->id, &op->args)).real, &op->node));
    }
    return CUDA_SUCCESS;
}

/* A capture recap recorded into a graph the program was handed (a query
 * lent it) goes on as a driver capture into that very graph, emptied
 * first: the replay puts back the calls made so far, so the graph holds
 * what a driver capture's would, and the handle the program has stays
 * the capture's. Measured on driver 580: nodes destroyed, the capture
 * resumes in the graph (tests/standin/READINGS.md). */
static CUresult begin_in_lent_graph(struct capture *cap)
{
    CUgraph graph = cap->lent_graph;
    CUgraphNode node;
    size_t n = 1, left = 0;
    CUresult r;
    /* One node at a time: no buffer, and the graph is small or this
     * capture is about to cost a replay of every call anyway. */
    while ((r = DRV_REAL(cuGraphGetNodes)(graph, &node, &n)) == CUDA_SUCCESS && n > 0) {
        if (DRV_REAL(cuGraphDestroyNode)(node) != CUDA_SUCCESS) {
            left = n;
            break;
        }
        n = 1;
    }
    if (r != CUDA_SUCCESS || left)
        event_error(cap->site, "the graph the program holds could not be emptied (%s): it keeps "
                               "nodes of the capture recap recorded",
                    drv_result_name(r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN));
    return DRV_REAL(cuStreamBeginCaptureToGraph)(cap->origin.real, graph, NULL, NULL, 0, cap->mode);
}

/* The recapture is over (ended, or its end returned 918): destroys its
 * graph, undefined after a failure, exactly once; begins a plain capture on
 * the origin stream - into the graph the program holds, if it was lent
 * one - and replays the journal into it. Returns the begin's result.
 * Caller holds cap->lock. */
static CUresult restart_as_plain(struct capture *cap)
{
    if (cap->target)
        cache_graph_discard(cap->target);
    cap->target = NULL;
    capture_forget_changes(cap);
    cap->path = PATH_FALLBACK;

    char why[256];
    if (!cap->journal.replayable) {
        snprintf(why, sizeof why, "the capture's calls could not be replayed in full (%s)",
                 cap->journal.why_not);
        cap->no_driver_capture = 1;
        capture_invalidate(cap, why);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    double t_switch = runtime_now_us();
    CUresult r = cap->lent_graph ? begin_in_lent_graph(cap)
                                 : DRV_REAL(cuStreamBeginCapture_v2)(cap->origin.real, cap->mode);
    if (r != CUDA_SUCCESS) {
        snprintf(why, sizeof why, "the plain capture that replaces a failed recapture could not "
                                  "begin (%s)", drv_result_name(r));
        cap->no_driver_capture = 1;
        capture_invalidate(cap, why);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    size_t failed_at = 0;
    CUresult replay = cap->learning ? replay_learning(cap, &failed_at)
                                    : journal_replay(&cap->journal, &failed_at);
    if (replay != CUDA_SUCCESS) {
        snprintf(why, sizeof why, "replaying call %zu (%s) of the capture failed: %s", failed_at,
                 drv_table[cap->journal.ops[failed_at].id].symbol, drv_result_name(replay));
        capture_invalidate(cap, why);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    /* The replay is what the switch cost: those calls were made twice. */
    cap->wasted_us += runtime_since_us(t_switch);
    return CUDA_SUCCESS;
}

/* Turns a live (or failed) recapture into a plain capture holding the same
 * work. Caller holds cap->lock. Where the capture may not be ended from
 * this thread (global and thread-local modes, or another thread's per-thread
 * default stream), the switch waits for the next call on the owning thread:
 * cap->fallback_pending. */

void capture_fall_back(struct capture *cap, const char *reason)
{
    /* An invalidated capture recap records stays so: no switch revives it. */
    if (cap->path != PATH_RECAPTURE || cap->invalidated)
        return;
    if (!cap->fallback_pending)
        capture_set_reason(cap, reason);
    if (cap->by_recap && recorded_switch(cap))
        return;
    if (!capture_may_end_here(cap)) {
        cap->fallback_pending = 1;
        return;
    }
    cap->fallback_pending = 0;

    if (!cap->no_driver_capture) {
        CUgraph dead = NULL;
        end_real(DRV_cuStreamEndCapture, cap->origin.real, &dead);
        if (dead && dead != graph_rec_graph(cap->target)) {
            /* Not a reading any documentation suggests; the extra graph is
             * recap's doing, so recap destroys it. */
            DRV_REAL(cuGraphDestroy)(dead);
        }
    }
    cap->no_driver_capture = 0;
    restart_as_plain(cap);
}

/* --- membership ------------------------------------------------------------------ */

void capture_note_membership(struct capture *cap, enum drv_id id, const union drv_args *a)
{
    enum drv_op_kind kind = (enum drv_op_kind)drv_table[id].op_kind;
    if (kind == DRV_OP_EVENT_RECORD) {
        ctab_add_event(cap, drv_args_event(id, a));
    } else if (kind == DRV_OP_STREAM_WAIT) {
        struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, a));
        ctab_add_member(cap, s.key);
    }
    if (cap->membership_overflow && cap->journal.replayable) {
        /* The journal still holds every call: a recapture switches now,
         * while it can be replayed whole. */
        if (cap->path == PATH_RECAPTURE && !cap->by_recap && !cap->fallback_pending &&
            capture_may_end_here(cap))
            capture_fall_back(cap, "the capture used more streams or events than recap can follow");
        cap->journal.replayable = 0;
        snprintf(cap->journal.why_not, sizeof cap->journal.why_not,
                 "more streams or events than recap can follow in one capture");
    }
}

/* --- capture queries ------------------------------------------------------------- */

struct capture_query capture_query_of(enum drv_id id, union drv_args *a)
{
    struct capture_query q = { 0 };
    switch (id) {
    case DRV_cuStreamIsCapturing:
    case DRV_cuStreamIsCapturing_ptsz:
        q.status = a->cuStreamIsCapturing.captureStatus;
        break;
    case DRV_cuStreamGetCaptureInfo:
    case DRV_cuStreamGetCaptureInfo_ptsz:
        q.status = a->cuStreamGetCaptureInfo.captureStatus_out;
        q.id = a->cuStreamGetCaptureInfo.id_out;
        break;
    case DRV_cuStreamGetCaptureInfo_v2:
    case DRV_cuStreamGetCaptureInfo_v2_ptsz: {
        struct drv_args_cuStreamGetCaptureInfo_v2 *v = &a->cuStreamGetCaptureInfo_v2;
        q.status = v->captureStatus_out, q.id = v->id_out, q.graph = v->graph_out;
        q.deps = v->dependencies_out, q.ndeps = v->numDependencies_out;
        break;
    }
    default: {
        struct drv_args_cuStreamGetCaptureInfo_v3 *v = &a->cuStreamGetCaptureInfo_v3;
        q.status = v->captureStatus_out, q.id = v->id_out, q.graph = v->graph_out;
        q.deps = v->dependencies_out, q.edges = v->edgeData_out, q.ndeps = v->numDependencies_out;
        break;
    }
    }
    return q;
}

/* A query that hands out the capture's graph while the 13.3 driver
 * recaptures into a cached graph: the program may add nodes to that graph
 * itself and name them in later calls, which no switch to a plain capture
 * could follow. So the capture switches first and the driver answers; the
 * site is then left to driver captures (account_graph). A capture recap
 * records itself lends the graph instead (capture_recorded.c). */
static const char graph_asked_reason[] =
    "the program asked for the capture's graph, which it may change itself";

/* --- calls a driver capture would refuse ------------------------------------------ */

/* While recap records a capture itself the driver does not know of it, so
 * each call it would have refused (measured on driver 580: READINGS.md,
 * "Capture prohibitions") is looked at first. Where this thread may end
 * the capture, it becomes a driver capture and the driver answers the call
 * itself; elsewhere recap gives the driver's answer: the error, and the
 * capture invalidated. */

enum guard_rule {
    RULE_NONE,
    RULE_UNSAFE,        /* refused by the capture modes (thread mode, owner) */
    RULE_ALWAYS,        /* refused whatever the modes: sync of what captures */
    RULE_EVENT,         /* an event recorded in the capture */
    RULE_UNCAPTURABLE,  /* work no capture holds (a host callback) on a capturing stream */
    RULE_LEGACY,        /* the legacy stream, against a blocking capturing stream */
    RULE_LEGACY_QUERY,  /* the same, asked only: refused, nothing invalidated */
    RULE_STREAM_STATE   /* a stream of the capture destroyed or changed: the driver must see it */
};

struct guard_check {
    enum drv_id id;
    union drv_args *args;
    CUstreamCaptureMode thread_mode;
    CUresult answer;            /* CUDA_SUCCESS: the driver answers */
};

/* Whether some stream of the capture synchronises with the legacy stream:
 * the per-thread default stream does, a stream created non-blocking does
 * not (asked of the driver only here, on a refused call's path). */
static int has_blocking_member(const struct capture *cap)
{
    for (int i = 0; i < cap->nmembers; i++) {
        const void *key = cap->member_keys[i];
        if (key == ctab_stream_ref(DRV_cuLaunchKernel_ptsz, NULL).key)
            return 1;
        unsigned flags = 0;
        if (DRV_REAL(cuStreamGetFlags)((CUstream)key, &flags) != CUDA_SUCCESS ||
            !(flags & CU_STREAM_NON_BLOCKING))
            return 1;
    }
    return 0;
}

static int is_legacy(CUstream real)
{
    return real == CU_STREAM_LEGACY;
}

/* Which rule refuses the call during `cap`, or RULE_NONE. */
static enum guard_rule guard_rule_for(const struct capture *cap, const struct guard_check *g)
{
    enum drv_id id = g->id;
    const struct drv_entry *e = &drv_table[id];
    int mine = pthread_equal(pthread_self(), cap->owner);
    int unsafe = g->thread_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
                 ((mine && cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
                  (!mine && g->thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                   cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL));
    switch ((enum drv_guard_kind)e->guard_kind) {
    case DRV_GUARD_SYNC_CTX:
        return RULE_ALWAYS;
    case DRV_GUARD_SYNC_STREAM: {
        struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, g->args));
        if (ctab_has_member(cap, s.key))
            return RULE_ALWAYS;
        /* The legacy stream conflicts with a blocking stream of the
         * capture; with none, syncing it is potentially unsafe like any
         * other stream's (measured: READINGS.md). */
        if (is_legacy(s.real) && has_blocking_member(cap))
            return RULE_LEGACY;
        return unsafe ? RULE_UNSAFE : RULE_NONE;
    }
    case DRV_GUARD_STREAM_WORK: {
        struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, g->args));
        if (ctab_has_member(cap, s.key))
            return RULE_UNCAPTURABLE;
        return is_legacy(s.real) && has_blocking_member(cap) ? RULE_LEGACY : RULE_NONE;
    }
    case DRV_GUARD_STREAM_STATE:
        return ctab_has_member(cap, ctab_stream_ref(id, drv_args_stream(id, g->args)).key)
                   ? RULE_STREAM_STATE
                   : RULE_NONE;
    case DRV_GUARD_SYNC_EVENT: {
        CUevent first = drv_args_event(id, g->args), second = drv_args_second_event(id, g->args);
        if (ctab_has_event(cap, first) || ctab_has_event(cap, second))
            return RULE_EVENT;
        return second == NULL && unsafe ? RULE_UNSAFE : RULE_NONE;    /* cuEventQuery */
    }
    case DRV_GUARD_UNSAFE:
        if (id == DRV_cuEventSynchronize && ctab_has_event(cap, drv_args_event(id, g->args)))
            return RULE_EVENT;
        if (strncmp(e->base, "cuMemcpy", 8) == 0 || strncmp(e->base, "cuMemset", 8) == 0) {
            /* Synchronous copies and memsets run on a default stream. */
            if (e->ptds)
                return ctab_has_member(cap, ctab_stream_ref(id, NULL).key) ? RULE_ALWAYS : RULE_NONE;
            return has_blocking_member(cap) ? RULE_LEGACY : RULE_NONE;
        }
        return unsafe ? RULE_UNSAFE : RULE_NONE;
    default:
        break;
    }
    /* Work or a capture query on the legacy stream (op and query rows). */
    if (e->role == DRV_ROLE_OP || e->role == DRV_ROLE_QUERY) {
        if (!is_legacy(ctab_stream_ref(id, drv_args_stream(id, g->args)).real) ||
            !has_blocking_member(cap))
            return RULE_NONE;
        return e->role == DRV_ROLE_QUERY ? RULE_LEGACY_QUERY : RULE_LEGACY;
    }
    return RULE_NONE;
}

static const char *const rule_reasons[] = {
    [RULE_UNSAFE] = "the program made a call its capture mode prohibits",
    [RULE_ALWAYS] = "the program synchronised or queried what the capture holds",
    [RULE_EVENT] = "the program used an event recorded in the capture",
    [RULE_UNCAPTURABLE] = "the program put work no capture can hold on a capturing stream",
    [RULE_LEGACY] = "the program used the legacy stream during the capture",
    [RULE_LEGACY_QUERY] = "the program asked the legacy stream about capturing",
    [RULE_STREAM_STATE] = "the program destroyed a stream of the capture or changed its attributes",
};

static const CUresult rule_errors[] = {
    [RULE_UNSAFE] = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    [RULE_ALWAYS] = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    [RULE_EVENT] = CUDA_ERROR_CAPTURED_EVENT,
    [RULE_UNCAPTURABLE] = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    [RULE_LEGACY] = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    [RULE_LEGACY_QUERY] = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    [RULE_STREAM_STATE] = CUDA_SUCCESS,
};

static void guard_one(struct capture *cap, void *arg)
{
    struct guard_check *g = arg;
    pthread_mutex_lock(&cap->lock);
    if ((cap->by_recap || cap->no_driver_capture) && !cap->invalidated) {
        enum guard_rule rule = guard_rule_for(cap, g);
        if (rule != RULE_NONE) {
            capture_fall_back(cap, rule_reasons[rule]);
            /* Not refused: the driver takes such a call from any thread.
             * From a thread that cannot switch the capture now it runs
             * against the stream as it is, and the switch follows. */
            if (cap->no_driver_capture && rule != RULE_STREAM_STATE) {
                cap->invalidated = rule != RULE_LEGACY_QUERY;
                if (g->answer == CUDA_SUCCESS)
                    g->answer = rule_errors[rule];
            } else if (cap->no_driver_capture) {
                /* The replay would run into the stream as it is now. */
                capture_invalidate(cap, "another thread destroyed a stream of the capture or "
                                        "changed its attributes while its switch to a driver "
                                        "capture waited for the capturing thread");
            }
        }
    }
    pthread_mutex_unlock(&cap->lock);
}

CUresult capture_on_guarded_call(enum drv_id id, union drv_args *args,
                                 CUstreamCaptureMode thread_mode)
{
    struct guard_check g = { id, args, thread_mode, CUDA_SUCCESS };
    ctab_each_self_recorded(guard_one, &g);
    return g.answer;
}

static void switch_if_lent(struct capture *cap, void *arg)
{
    CUgraph graph = arg;
    pthread_mutex_lock(&cap->lock);
    if (cap->by_recap && cap->graph_lent && (!graph || graph == graph_rec_graph(cap->target)))
        capture_fall_back(cap, "the program made a graph call while it held the capture's graph");
    pthread_mutex_unlock(&cap->lock);
}

void capture_on_graph_call(CUgraph graph)
{
    ctab_each_self_recorded(switch_if_lent, graph);
}

/* --- calls made into a capture ---------------------------------------------------- */

static CUresult query_in_capture(struct capture *cap, enum drv_id id, union drv_args *a)
{
    if (cap->path == PATH_RECAPTURE && capture_query_of(id, a).graph) {
        cap->graph_asked = 1;
        capture_fall_back(cap, graph_asked_reason);
    }
    CUresult r = drv_invoke(id, a);
    if (r == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE && cap->path == PATH_RECAPTURE) {
        capture_fall_back(cap, "recapture failed (reported by a capture query)");
        r = drv_invoke(id, a);
    }
    /* The program may have read the capture id during the recapture; it
     * must not see it change because recap switched captures. */
    cuuint64_t *id_out = drv_args_capture_id_out(id, a);
    if (r == CUDA_SUCCESS && id_out && cap->path == PATH_FALLBACK && cap->app_capture_id)
        *id_out = cap->app_capture_id;
    if (r == CUDA_SUCCESS && capture_query_of(id, a).graph)
        cap->graph_handed_out = 1;
    return r;
}

CUresult capture_op(struct capture *cap, enum drv_id id, union drv_args *a)
{
    enum drv_op_kind kind = (enum drv_op_kind)drv_table[id].op_kind;
    const char *why = NULL;
    CUresult r;

    if (cap->fallback_pending && capture_may_end_here(cap))
        capture_fall_back(cap, cap->reason);
    end_invalidated(cap);
    if (cap->by_recap || cap->invalidated)
        return recorded_op(cap, id, a);
    if (kind == DRV_OP_QUERY_STATUS || kind == DRV_OP_QUERY_INFO)
        return cap->no_driver_capture ? recorded_query(cap, id, a) : query_in_capture(cap, id, a);

    if (cap->fallback_pending) {
        /* Another thread of a global/thread-local capture, or of one on a
         * per-thread default stream: the switch must wait for the owning
         * thread, so the call is recorded and made at the replay. Its
         * result is assumed to be success. */
        if (journal_can_copy(id, a, &why)) {
            journal_append(&cap->journal, id, a);
            capture_note_membership(cap, id, a);
            return CUDA_SUCCESS;
        }
        char reason[256];
        snprintf(reason, sizeof reason, "another thread used %s while the capture's switch to a "
                                        "driver capture waited for the capturing thread", why);
        capture_invalidate(cap, reason);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }

    if (!cap->journaled) {
        r = drv_invoke(id, a);
        if (r == CUDA_SUCCESS)
            capture_note_membership(cap, id, a);
        return r;
    }

    if (cap->path == PATH_RECAPTURE && !journal_can_copy(id, a, &why)) {
        if (!capture_may_end_here(cap)) {
            /* The recapture goes on with the call, and its journal can no
             * longer be replayed: should it fail later, the capture is
             * invalidated (restart_as_plain). */
            r = drv_invoke(id, a);
            if (r == CUDA_SUCCESS) {
                journal_append(&cap->journal, id, a);
                capture_note_membership(cap, id, a);
            }
            return r;
        }
        char reason[200];
        snprintf(reason, sizeof reason, "the capture used %s", why);
        capture_fall_back(cap, reason);
    }

    r = drv_invoke(id, a);
    if (r == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE && cap->path == PATH_RECAPTURE) {
        char reason[200];
        snprintf(reason, sizeof reason, "recapture failed at %s", drv_table[id].symbol);
        capture_fall_back(cap, reason);
        if (cap->fallback_pending) {
            journal_append(&cap->journal, id, a);
            capture_note_membership(cap, id, a);
            return CUDA_SUCCESS;
        }
        r = drv_invoke(id, a);
    }
    if (r == CUDA_SUCCESS) {
        /* After a switch too: the journal tells the graph's signature. */
        journal_append(&cap->journal, id, a);
        if (cap->learning)
            recorded_learn_node(cap, id, a);
        capture_note_membership(cap, id, a);
    }
    return r;
}

static CUresult invoke_outside_capture(enum drv_id id, union drv_args *a)
{
    CUresult r = drv_invoke(id, a);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && drv_table[id].op_kind == DRV_OP_ALLOC &&
        cache_release_for_oom())
        r = drv_invoke(id, a);
    return r;
}

CUresult capture_on_op(enum drv_id id, union drv_args *a)
{
    struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, a));
    int borrowed;
    struct capture *cap = ctab_find_stream_for_call(s.key, &borrowed);

    /* A wait on an event recorded in a capture pulls the waiting stream
     * into that capture (a fork). */
    if (!cap && drv_table[id].op_kind == DRV_OP_STREAM_WAIT)
        cap = ctab_find_event(drv_args_event(id, a));
    if (!cap) {
        if (is_legacy(s.real) && capture_any_self_recorded()) {
            CUresult refused = capture_on_guarded_call(id, a, CU_STREAM_CAPTURE_MODE_GLOBAL);
            if (refused != CUDA_SUCCESS)
                return refused;
        }
        return invoke_outside_capture(id, a);
    }

    pthread_mutex_lock(&cap->lock);
    /* A capture recap records has no driver capture to end or switch yet:
     * straight to its recording (the hot path of a recorded loop). */
    CUresult r = cap->by_recap ? recorded_op(cap, id, a) : capture_op(cap, id, a);
    pthread_mutex_unlock(&cap->lock);
    ctab_call_done(cap, borrowed);
    return r;
}

/* --- begin -------------------------------------------------------------------- */

/* What a site may do with this capture, and why not more. Caller holds
 * site->lock. Returns the graph to recapture into (TAKEN), or NULL;
 * *change is what happened to the site's gate (logged after unlocking). */
static struct graph_rec *decide(struct capture *cap, struct site *site, enum drv_id id,
                                enum gate_change *change)
{
    enum recap_mode mode = site->policy.mode;

    *change = GATE_SAME;
    if (mode == RECAP_MODE_OBSERVE) {   /* its slots were full (begin_observed) */
        cap->path = PATH_OBSERVE;
        capture_set_reason(cap, "site observed only");
        return NULL;
    }
    cap->path = PATH_FRESH;
    if (!gate_open(&site->gate, site->seq, change)) {
        /* Reuse did not pay here: no journal, nothing kept or looked for,
         * and no shape beyond the node count (account_graph). */
        cap->reuse_closed = 1;
        capture_set_reason(cap, "reuse stopped at this site until its back-off elapses");
        return NULL;
    }
    if (mode == RECAP_MODE_UPDATE) {
        capture_set_reason(cap, "mode update: executable reuse only");
        return NULL;
    }
    int by_recap = recorded_possible(site);
    if (!drv_caps.recapture_begin && !by_recap) {
        pthread_once(&no_api_reason_once, format_no_api_reason);
        capture_set_reason(cap, site->policy.self_record ? no_api_reason : no_api_self_off_reason);
        return NULL;
    }
    if (id == DRV_cuStreamBeginCapture || id == DRV_cuStreamBeginCapture_ptsz) {
        capture_set_reason(cap, "legacy cuStreamBeginCapture has no capture mode");
        return NULL;
    }
    if (site->no_recapture) {
        capture_set_reason(cap, site->no_recapture_reason);
        return NULL;
    }
    cap->journaled = 1;
    cap->learning = by_recap;
    if (!site->journal_verified) {
        capture_set_reason(cap, "first capture at this site");
        return NULL;
    }
    if (by_recap) {
        /* No guess: the capture is matched against what the site keeps as
         * its calls arrive (capture_recorded.c). */
        cap->record = 1;
        return NULL;
    }
    /* The recapture API needs its graph at the begin: the one this stream
     * (or thread) captured in its turn before - its history alone, not the
     * site's, so threads and streams with graphs of their own do not mix -
     * by signature, which tells kernels apart. */
    if (sites_recapture_skipped_locked(site)) {
        capture_set_reason(cap, "recaptures into the graph this stream was guessed to repeat fell "
                                "back in a row: a driver capture while that back-off lasts");
        return NULL;
    }
    uint64_t predicted = sites_stream_guess_locked(site, cap->origin.key);
    struct graph_rec *target = predicted ? cache_take_graph(site, predicted) : NULL;
    cap->candidates = target != NULL;
    if (!target) {
        cap->copy_wanted = predicted;
        capture_set_reason(cap, "no released graph of the signature this stream captures next");
        /* A hit or a failure is known only at the end (capture_report_end). */
        enum gate_change looked = sites_record_look_locked(site, GATE_MISS, 0);
        if (looked != GATE_SAME)
            *change = looked;
    }
    return target;
}

/* A capture at a site observed only is the driver's, watched from a slot
 * (shim/observed.h); at a site whose mode is off, not even watched; on a
 * stream already capturing, left to the driver to refuse. Returns 0,
 * having done nothing, when the slots are full: the capture table takes
 * the capture then. */
static int begin_observed(enum drv_id id, struct stream_ref s, CUstreamCaptureMode mode,
                          struct site *site, CUresult *result)
{
    struct observed_capture busy;
    if (site->policy.mode == RECAP_MODE_OFF || (observed_any() && observed_find(s.key, &busy) >= 0)) {
        *result = begin_plain(id, s.real, mode);
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
    *result = begin_plain(id, s.real, mode);
    PHASE_MARK(PHASE_OBSERVE_BEGIN_DRIVER, t_claimed, t_begun);
    if (*result != CUDA_SUCCESS) {
        observed_unclaim(slot);
        step_capture_refused(&site->step);
    }
    runtime_verbose("capture begin site %016llx #%lu: %s", (unsigned long long)site->id, o.seq,
                    path_names[PATH_OBSERVE]);
    return 1;
}

CUresult capture_on_begin(enum drv_id id, CUstream stream, CUstreamCaptureMode mode,
                          const void *entry_return, const void *entry_cfa)
{
    if (runtime_passthrough)
        return begin_plain(id, stream, mode);

    PHASE_MARK_START(t_entry);
    struct stream_ref s = ctab_stream_ref(id, stream);
    struct capture *busy = ctab_find_stream(s.key);
    PHASE_MARK(PHASE_BEGIN_FIND_STREAM, t_entry, t_found);
    if (busy) {
        /* Already part of a capture: the driver refuses, as it should -
         * once it knows of the capture. */
        pthread_mutex_lock(&busy->lock);
        capture_fall_back(busy, "the program began a capture on one of its streams");
        int unknown_to_driver = busy->by_recap || busy->no_driver_capture;
        pthread_mutex_unlock(&busy->lock);
        ctab_release(busy);
        return unknown_to_driver ? CUDA_ERROR_ILLEGAL_STATE : begin_plain(id, stream, mode);
    }

    struct site_stack stack;
    struct site_origin origin;
    struct site_entry entry = { .ret = entry_return, .cfa = entry_cfa };
    site_stack_capture(&stack, runtime_settings.stack_depth, &entry);
    PHASE_MARK(PHASE_BEGIN_STACK, t_found, t_stack);
    uint64_t site_id = site_names_identify(&stack, runtime_settings.stack_depth, &origin);
    const char *names_warning = site_names_take_warning();
    if (names_warning != NULL)
        event_warning(NULL, "%s", names_warning);
    struct site *site = sites_get_named(site_id, &stack, &origin);
    PHASE_MARK(PHASE_BEGIN_SITE, t_stack, t_site);
    CUresult r;
    if (site && (site->policy.mode == RECAP_MODE_OBSERVE || site->policy.mode == RECAP_MODE_OFF) &&
        begin_observed(id, s, mode, site, &r))
        return r;
    struct capture *cap = site ? ctab_new() : NULL;
    if (!cap)
        return begin_plain(id, stream, mode);

    cap->origin = s;
    cap->owner = pthread_self();
    cap->begin_id = id;
    cap->mode = mode;
    cap->site = site;
    cap->t0 = runtime_now_us();
    kmem_capture_began(site);
    step_capture_began(&site->step, cap->t0);

    PHASE_MARK(PHASE_BEGIN_RECORD, t_site, t_record);
    enum gate_change change;
    pthread_mutex_lock(&site->lock);
    cap->seq = ++site->seq;
    sites_capture_began_locked(site);
    cap->typed_shapes = site->typed_shapes;
    struct graph_rec *target = decide(cap, site, id, &change);
    pthread_mutex_unlock(&site->lock);
    cache_site_gate_changed(site, change);
    /* None released, as where the program keeps what it captures: a copy
     * of the newest graph it keeps, if it kept them alike. */
    if (!target && cap->copy_wanted &&
        (target = graph_copy_of_held(site, cache_graph_edit_epoch(), cap->copy_wanted, 0)))
        cap->candidates = 1;
    PHASE_MARK(PHASE_BEGIN_DECIDE, t_record, t_decided);

    if (cap->record) {
        /* No driver capture: recap records the calls (capture_recorded.c). */
        int recorded = recorded_begin(cap, &r);
        if (!recorded) {
            r = begin_plain(id, stream, mode);
            if (r == CUDA_SUCCESS)
                ctab_register(cap);
        }
        if (r != CUDA_SUCCESS)
            step_capture_refused(&site->step);
        runtime_verbose("capture begin site %016llx #%lu: %s (%d kept graphs to match)",
                        (unsigned long long)site->id, cap->seq,
                        recorded ? "recorded by recap" : path_names[cap->path], cap->candidates);
        ctab_release(cap);
        PHASE_MARK(PHASE_BEGIN_RECORDING, t_decided, t_recording);
        PHASE_MARK(PHASE_BEGIN_RECORDED_TOTAL, t_entry, t_begun);
        return r;
    }
    if (target) {
        cap->target = target;
        cap->path = PATH_RECAPTURE;
        cap->reason[0] = '\0';
        r = drv_caps.recapture_begin(s.real, mode, graph_rec_graph(target), recapture_callback, cap);
        if (r == CUDA_SUCCESS) {
            cap->app_capture_id = capture_id_of(cap);
        } else {
            cache_graph_discard(target);   /* undefined after any failure */
            cap->target = NULL;
            cap->path = PATH_FALLBACK;
            snprintf(cap->reason, sizeof cap->reason, "recapture refused at begin: %s",
                     drv_result_name(r));
            r = begin_plain(id, stream, mode);
        }
    } else {
        r = begin_plain(id, stream, mode);
    }

    runtime_verbose("capture begin site %016llx #%lu: %s", (unsigned long long)site->id, cap->seq,
                    path_names[cap->path]);
    if (r == CUDA_SUCCESS)
        ctab_register(cap);
    else
        step_capture_refused(&site->step);
    ctab_release(cap);
    return r;
}

/* --- end ------------------------------------------------------------------------- */

/* Adds a captured graph's kind (its signature where recap knows one, else
 * its shape) to its stream's and its site's history; the site's working
 * set follows, and with its concurrency what it keeps. */
static void record_shape(struct capture *cap, uint64_t kind, int typed)
{
    struct site *site = cap->site;
    pthread_mutex_lock(&site->lock);
    sites_stream_record_locked(site, cap->origin.key, kind);
    if (typed)
        site->typed_shapes = 1;
    /* Told to the cache only when it changes: a steady site takes no
     * cache_lock here. */
    int working_set = predict_working_set(&site->shapes);
    if (working_set != site->working_set_told || site->concurrency != site->concurrency_told) {
        site->working_set_told = working_set;
        site->concurrency_told = site->concurrency;
        cache_site_working_set(site, working_set, site->concurrency);
    }
    pthread_mutex_unlock(&site->lock);
}

/* What a capture must do to repeat this one, from its journal: 0 where
 * recap did not journal every call. */
static uint64_t journal_signature(struct capture *cap)
{
    if (!cap->journaled || !cap->journal.replayable || cap->journal.nops == 0)
        return 0;
    cap->journal.origin_key = cap->origin.key;
    return self_record_signature(&cap->journal);
}

/* The journal of a driver capture whose every call knows its node
 * becomes its graph's recording, for recap to record the next capture of
 * that shape against. */
static void keep_recording(struct capture *cap, struct graph_rec *rec)
{
    struct journal *recording = malloc(sizeof *recording);
    if (!recording)
        return;
    *recording = cap->journal;
    recording->origin_key = cap->origin.key;
    journal_init(&cap->journal);
    cache_graph_set_recording(rec, recording, cache_graph_edit_epoch());
}

/* After a successful capture: what the graph looks like, whether this
 * site's journals can be trusted, and the record the program's graph gets. */
static struct graph_rec *account_graph(struct capture *cap, CUgraph graph, long *nodes)
{
    struct site *site = cap->site;
    struct graph_census census;
    /* Wherever recapture is possible the census reads node types, for every
     * capture alike, so one site's shapes stay comparable; elsewhere only at
     * a site where two graphs of one node count proved different
     * (exec_reuse.c). Not while the site's gate is closed: it keeps and
     * predicts nothing then, and must cost what observing costs (a type
     * query per node would cost more than the capture saves). */
    int with_types = (drv_caps.recapture_begin != NULL || recorded_possible(site) ||
                      cap->typed_shapes) && cap->path != PATH_OBSERVE && !cap->reuse_closed;

    if (shape_census(graph, with_types, &census) != 0) {
        *nodes = -1;
        event_own_call_failed(site, census.failed_call, census.error,
                              "the captured graph is not tracked; the program's calls pass through");
        return NULL;
    }
    *nodes = census.nodes;
    /* An observed site keeps nothing and predicts nothing: its log needs
     * the node count alone, not the context or the shape. */
    if (cap->path == PATH_OBSERVE)
        return NULL;
    /* A graph captured in another context (another device) never matches:
     * recapturing into it or updating its executable graph would fail. A
     * closed site matches nothing, so it does not ask. */
    CUcontext ctx = NULL;
    CUresult r = cap->reuse_closed ? CUDA_SUCCESS : DRV_REAL(cuCtxGetCurrent)(&ctx);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(site, "cuCtxGetCurrent", r,
                              "this graph's shape leaves its context out");
    uint64_t shape = shape_in_context(&census, ctx);

    int verified_now = 0;
    if (cap->graph_asked) {
        sites_forbid_recapture(site, "its captures ask for their graph, which the program may "
                                     "change itself");
    } else if (cap->journaled &&
               (cap->path == PATH_FRESH || (cap->path == PATH_FALLBACK && cap->learning))) {
        char why[200];
        if (census.unreplayable) {
            snprintf(why, sizeof why, "its graphs hold %s nodes",
                     shape_node_type_name(census.first_unreplayable));
            sites_forbid_recapture(site, why);
        } else if (!cap->journal.replayable) {
            snprintf(why, sizeof why, "it used %s", cap->journal.why_not);
            sites_forbid_recapture(site, why);
        } else if (!journal_matches(&cap->journal, &census, why, sizeof why)) {
            sites_forbid_recapture(site, why);
        } else {
            verified_now = 1;
            pthread_mutex_lock(&site->lock);
            site->journal_verified = 1;
            pthread_mutex_unlock(&site->lock);
        }
    }

    if (cap->path == PATH_OBSERVE)
        return NULL;
    /* A closed site's history resumes where it stopped: its shapes now are
     * node counts, not comparable with the typed ones. */
    /* Executable graphs holding memory allocation, free or conditional
     * nodes are not updated into: cuda.core's own graph tests crashed in
     * the driver (SIGSEGV at the upload or instantiation after an update)
     * on the H200 with such graphs reused across tests; their own
     * instantiation is what the program gets without recap. */
    if (census.typed && (census.by_type[CU_GRAPH_NODE_TYPE_MEM_ALLOC] ||
                         census.by_type[CU_GRAPH_NODE_TYPE_MEM_FREE] ||
                         census.by_type[CU_GRAPH_NODE_TYPE_CONDITIONAL]))
        if (sites_forbid_exec_reuse(site))
            event_warning(site, "executable reuse stopped here: its graphs hold memory "
                                "allocation, free or conditional nodes, whose updated executable "
                                "graphs crashed the driver in cuda.core's graph tests");
    uint64_t signature = journal_signature(cap);
    if (!cap->reuse_closed)
        record_shape(cap, signature ? signature : shape, census.typed);
    struct graph_rec *rec = cache_graph_track(graph, site, shape, census.nodes, census.typed);
    if (rec) {
        rec->signature = signature;
        rec->last_stream = cap->origin.key;
    }
    if (rec && cap->learning && verified_now && journal_nodes_known(&cap->journal))
        keep_recording(cap, rec);
    if (rec)
        cache_graph_note_held(rec);
    return rec;
}

/* The recapture ended well: the same graph comes back with new parameters. */
void capture_account_recapture(struct capture *cap)
{
    struct graph_rec *rec = cap->target;
    /* A driver recapture's calls may have other kernels (eligible, so
     * reported as changed nodes): its journal says which. A capture recap
     * recorded matched the signature. */
    uint64_t signature = cap->began_by_recap || cap->nchanged == 0 ? 0 : journal_signature(cap);
    if (signature)
        rec->signature = signature;
    pthread_mutex_lock(&cap->changes_lock);
    int known = !cap->changes_lost && cap->ineligible == 0 && cap->errors == 0;
    rec->version++;
    rec->shape_epoch = cache_graph_edit_epoch();   /* the capture's shape, as predicted */
    cache_graph_swap_changes(rec, &cap->changed, cap->nchanged, &cap->changed_capacity, known);
    cap->nchanged = 0;
    pthread_mutex_unlock(&cap->changes_lock);
    cache_graph_hand_out(rec);
    cache_graph_note_held(rec);
    cap->target = NULL;

    record_shape(cap, rec->signature ? rec->signature : rec->shape, 1);
}

/* Counts an ended capture into its site's totals and logs it (sampled):
 * *rep is complete but for `write`; `path` is the one counted. */
static void count_capture(struct site *site, struct capture_report *rep, enum capture_path path,
                          int began_by_recap, int was_active)
{
    pthread_mutex_lock(&site->lock);
    struct site_counters *c = &site->count;
    c->captures++;
    switch (path) {
    case PATH_RECAPTURE: c->recaptured++, c->by_recap += began_by_recap; break;
    case PATH_FALLBACK:
        c->fallbacks++;
        sites_count_fallback_locked(site, rep->reason);
        break;
    case PATH_FRESH: c->fresh++, c->fresh_us += rep->us; break;
    case PATH_OBSERVE: c->observed++; break;
    }
    if (was_active)
        sites_capture_ended_locked(site);
    c->nodes += rep->nodes > 0 ? (unsigned long)rep->nodes : 0;
    c->changed += rep->changed, c->eligible += rep->eligible;
    c->ineligible += rep->ineligible, c->errors += rep->errors;
    c->capture_us += rep->us;
    step_capture_ended(&site->step, rep->us);
    timeline_capture(&site->timeline, rep->seq, rep->path, rep->by, rep->us);
    rep->write = event_worth_writing(&site->last_capture_key, rep->path, rep->reason, rep->seq,
                                     rep->result != CUDA_SUCCESS);
    /* A recapture that held is a hit, worth the driver capture it saved;
     * one that fell back, a failure, costing what its switch took. */
    enum gate_change change = GATE_SAME;
    if (!began_by_recap && rep->candidates > 0 && (path == PATH_RECAPTURE || path == PATH_FALLBACK))
        sites_recapture_told_locked(site, path == PATH_RECAPTURE && rep->result == CUDA_SUCCESS);
    if (path == PATH_RECAPTURE && rep->result == CUDA_SUCCESS)
        change = sites_record_look_locked(site, GATE_HIT, sites_capture_net_locked(site, rep->us));
    else if (path == PATH_FALLBACK)
        change = sites_record_look_locked(site, rep->matched_none ? GATE_MISS : GATE_FAILED,
                                          -rep->wasted_us);
    pthread_mutex_unlock(&site->lock);
    event_capture(rep);
    cache_site_gate_changed(site, change);
}

void capture_report_end(struct capture *cap, CUresult r, long nodes)
{
    struct site *site = cap->site;
    /* A capture resumed in its graph was recorded by recap to its last
     * call: a recapture by recap, its reason saying how it ended. */
    enum capture_path path = cap->resumed ? PATH_RECAPTURE : cap->path;
    struct capture_report rep = {
        .site = site, .seq = cap->seq, .path = path_names[path],
        .reason = path == PATH_RECAPTURE && !cap->resumed ? NULL : cap->reason,
        .nodes = nodes, .us = runtime_since_us(cap->t0), .result = r,
        .by = path != PATH_RECAPTURE ? NULL : cap->began_by_recap ? "recap" : "driver",
        .candidates = cap->candidates,
        .switch_call = cap->switch_call,
        .wasted_us = cap->wasted_us,
        .matched_none = cap->matched_none,
    };
    /* Only a recapture counts changes (the driver's callback, or recap's
     * own recording): without one they are 0. */
    if (cap->path != PATH_OBSERVE && (drv_caps.recapture_begin || cap->began_by_recap)) {
        pthread_mutex_lock(&cap->changes_lock);
        rep.changed = cap->eligible + cap->ineligible + cap->errors;
        rep.eligible = cap->eligible;
        rep.ineligible = cap->ineligible;
        rep.errors = cap->errors;
        pthread_mutex_unlock(&cap->changes_lock);
    }

    count_capture(site, &rep, path, cap->began_by_recap, 1);
}

/* Ends the call into capture_on_end: unlocks and releases the capture,
 * and lets go of a graph the program's end did not want and no query
 * handed it, as the program would by destroying it (the cache may keep
 * it for the site's next capture). */
static void end_release_unwanted(struct capture *cap, int wants_graph, CUgraph unwanted)
{
    int release = !wants_graph && unwanted != NULL && !cap->graph_handed_out;
    struct held_release *held;
    size_t nheld = capture_holds_take(cap, &held);
    pthread_mutex_unlock(&cap->lock);
    ctab_release(cap);
    capture_holds_settle(held, nheld);
    if (release)
        cache_on_graph_destroy(DRV_cuGraphDestroy, unwanted);
}

/* The recapture failed and only the end said so: the plain capture takes
 * its place now, and its end is what the program gets. */
static CUresult fall_back_at_end(struct capture *cap, enum drv_id id, CUgraph *graph)
{
    capture_set_reason(cap, "recapture failed at end");
    if (restart_as_plain(cap) != CUDA_SUCCESS)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return end_real(id, cap->origin.real, graph);
}

/* The end of a capture recap only watched: the driver's answer, then the
 * node count and the log. */
static CUresult end_observed(enum drv_id id, struct stream_ref s, CUgraph *phGraph, int slot,
                             const struct observed_capture *o)
{
    PHASE_MARK_START(t_end);
    CUresult r = end_real(id, s.real, phGraph);
    PHASE_MARK(PHASE_OBSERVE_END_DRIVER, t_end, t_ended);
    if (r != CUDA_SUCCESS && stream_still_capturing(s.real, o->site))
        return r;   /* wrong thread and the like: the capture goes on */
    if (!observed_release(slot, s.key))
        return r;   /* another thread's end reports it */
    struct capture_report rep = { .site = o->site, .seq = o->seq, .path = path_names[PATH_OBSERVE],
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
    count_capture(o->site, &rep, PATH_OBSERVE, 0, 0);
    PHASE_MARK(PHASE_OBSERVE_END_COUNT, t_counted_nodes, t_logged);
    return r;
}

CUresult capture_on_end(enum drv_id id, CUstream stream, CUgraph *phGraph)
{
    if (runtime_passthrough)
        return end_real(id, stream, phGraph);

    PHASE_MARK_START(t_entry);
    kmem_capture_ended();
    struct stream_ref s = ctab_stream_ref(id, stream);
    if (observed_any()) {
        struct observed_capture o;
        int slot = observed_find(s.key, &o);
        PHASE_MARK(PHASE_OBSERVE_END_FIND, t_entry, t_found);
        if (slot >= 0)
            return end_observed(id, s, phGraph, slot, &o);
    }
    struct capture *cap = ctab_find_origin(s.key);
    if (!cap) {
        /* Ended on a stream that joined a capture recap records: the
         * driver must know of the capture to answer. */
        if (capture_any_self_recorded() && (cap = ctab_find_stream(s.key)) != NULL) {
            pthread_mutex_lock(&cap->lock);
            capture_fall_back(cap, "the program ended the capture on a stream other than its origin");
            pthread_mutex_unlock(&cap->lock);
            ctab_release(cap);
        }
        return end_real(id, stream, phGraph);
    }

    pthread_mutex_lock(&cap->lock);
    /* An end that wants no graph ends the capture all the same (measured:
     * tests/standin/READINGS.md). Where recap saw every query of the
     * capture, it takes the graph to learn from and keep, released at once
     * unless a query handed it to the program; elsewhere the driver
     * decides the graph's fate. */
    CUgraph unwanted = NULL;
    int wants_graph = phGraph != NULL;
    if (!wants_graph && (cap->journaled || cap->by_recap || cap->no_driver_capture))
        phGraph = &unwanted;

    CUresult r;
    end_invalidated(cap);
    if ((cap->by_recap || cap->no_driver_capture) && recorded_end(cap, phGraph, &r)) {
        end_release_unwanted(cap, wants_graph, unwanted);
        PHASE_MARK(PHASE_END_RECORDED_TOTAL, t_entry, t_ended);
        return r;
    }
    if (cap->fallback_pending && capture_may_end_here(cap)) {
        capture_fall_back(cap, cap->reason);
        if (cap->invalidated && recorded_end(cap, phGraph, &r)) {
            end_release_unwanted(cap, wants_graph, unwanted);
            return r;
        }
    }

    CUgraph graph = NULL;
    r = end_real(id, stream, phGraph ? &graph : NULL);
    if (r != CUDA_SUCCESS && stream_still_capturing(cap->origin.real, cap->site)) {
        /* Wrong thread and the like: the capture goes on, untouched. */
        pthread_mutex_unlock(&cap->lock);
        ctab_release(cap);
        if (phGraph)
            *phGraph = graph;
        return r;
    }

    long nodes = -1;
    if (cap->path == PATH_RECAPTURE) {
        if (r == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE) {
            r = fall_back_at_end(cap, id, &graph);
        } else if (r != CUDA_SUCCESS) {
            /* The program broke its own capture (an illegal call): it gets
             * the driver's answer, as with a plain capture; the graph that
             * was being recaptured is undefined and goes. */
            cache_graph_discard(cap->target);
            cap->target = NULL;
        } else if (graph != graph_rec_graph(cap->target)) {
            event_warning(cap->site, "the driver returned a new graph from a recapture; "
                                     "the old one is left alone");
            cap->target = NULL;
            cap->path = PATH_FRESH;
        } else {
            nodes = cap->target->nodes;
            capture_account_recapture(cap);
        }
    }
    /* A graph recap does not track is still its site's for the step's
     * instantiations and launches (step_time.h). */
    if (r == CUDA_SUCCESS && graph && cap->path != PATH_RECAPTURE &&
        !account_graph(cap, graph, &nodes))
        step_note_handle(graph, &cap->site->step);

    if (phGraph)
        *phGraph = graph;
    ctab_unregister(cap);
    ctab_memo_forget(cap);
    capture_report_end(cap, r, nodes);
    end_release_unwanted(cap, wants_graph, unwanted);
    return r;
}
