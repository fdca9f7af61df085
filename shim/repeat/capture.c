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
 * capture at a site observed only is the driver's throughout
 * (capture_observed.c).
 *
 * Every change of a capture's path is made here. The files that serve this
 * one hand back what they found: capture_recorded.c a verdict for each
 * call into a capture recap records (answered, or switch), capture_driver.c
 * the driver's results, capture_rules.c the prohibition a call breaks,
 * capture_account.c nothing (it writes down how the capture ended). The
 * recorder sets only its own fields of the capture (candidates, target,
 * matching); the path, by_recap, no_driver_capture, learning, resumed and
 * invalidated are set here.
 *
 * Locks: a capture's lock serialises every call into it (and the switch to
 * a plain capture); then site->lock; then cache_lock; captures_lock last.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/state/cache.h"
#include "shim/repeat/capture.h"
#include "shim/repeat/capture_holds.h"
#include "shim/repeat/capture_account.h"
#include "shim/repeat/capture_driver.h"
#include "shim/repeat/capture_observed.h"
#include "shim/repeat/capture_recorded.h"
#include "shim/repeat/capture_rules.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/repeat/graph_copy.h"
#include "shim/state/kept_memory.h"
#include "shim/repeat/exec_reuse.h"
#include "shim/state/observed.h"
#include "shim/base/phase_clock.h"
#include "shim/base/runtime.h"
#include "shim/repeat/self_record.h"
#include "shim/base/shape.h"
#include "shim/state/sites.h"
#include "shim/base/step_time.h"

/* --- reasons --------------------------------------------------------------------- */

static void capture_fall_back(struct capture *cap, const char *reason);
static CUresult capture_op(struct capture *cap, enum drv_id id, union drv_args *a);

static pthread_once_t no_api_reason_once = PTHREAD_ONCE_INIT;
static char no_api_reason[64], no_api_self_off_reason[128];

static void format_no_api_reason(void)
{
    snprintf(no_api_reason, sizeof no_api_reason, "driver %d has no recapture API", drv_caps.version);
    snprintf(no_api_self_off_reason, sizeof no_api_self_off_reason,
             "driver %d has no recapture API and self-recording is off at this site",
             drv_caps.version);
}

/* --- the recapture callback ------------------------------------------------- */

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
    ctab_push_change(cap, (struct changed_node){ node, p ? p->type : CU_GRAPH_NODE_TYPE_KERNEL, -1 });
    pthread_mutex_unlock(&cap->changes_lock);
    return CUDA_SUCCESS;
}

/* --- fallback ----------------------------------------------------------------- */

/* Ends a driver capture recap gives up on and destroys what it captured
 * (a recapture's graph is undefined). Caller holds cap->lock, on a thread
 * that may end the capture. */
static void end_driver_capture(struct capture *cap)
{
    CUgraph dead = NULL;
    capture_driver_end(DRV_cuStreamEndCapture, cap->origin.real, &dead);
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
static void capture_invalidate(struct capture *cap, const char *why)
{
    if (cap->invalidated)
        return;
    event_error(cap->site, "%s: the capture is invalidated (the program gets "
                           "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) rather than a graph without "
                           "that work; recap no longer recaptures this site", why);
    sites_forbid_recapture(cap->site, why);
    ctab_set_reason(cap, why);
    cap->invalidated = 1;
    cap->fallback_pending = 0;
    cap->path = PATH_FALLBACK;
    if (!cap->no_driver_capture && ctab_may_end_here(cap))
        end_driver_capture(cap);
}

/* The capturing thread's first call after another thread invalidated its
 * capture ends the driver capture that still ran. */
static void end_invalidated(struct capture *cap)
{
    if (cap->invalidated && !cap->no_driver_capture && ctab_may_end_here(cap))
        end_driver_capture(cap);
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
    ctab_forget_changes(cap);
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
    CUresult r = cap->lent_graph ? capture_driver_begin_in_lent_graph(cap)
                                 : DRV_REAL(cuStreamBeginCapture_v2)(cap->origin.real, cap->mode);
    if (r != CUDA_SUCCESS) {
        snprintf(why, sizeof why, "the plain capture that replaces a failed recapture could not "
                                  "begin (%s)", drv_result_name(r));
        cap->no_driver_capture = 1;
        capture_invalidate(cap, why);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    size_t failed_at = 0;
    CUresult replay = cap->learning ? capture_driver_replay_learning(cap, &failed_at)
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

/* A capture recap records stops being recorded: the recorder hands its
 * calls over as a journal to replay (no driver capture yet), or as that
 * of a driver capture it resumed in the graph the program holds. Returns
 * whether it resumed (nothing left to replay). */
static int switch_recorded(struct capture *cap)
{
    enum recorded_switch_how how = recorded_switch(cap);
    if (how == RECORDED_REPLAY) {
        cap->no_driver_capture = 1;
    } else {
        cap->path = PATH_FALLBACK;
        cap->learning = 1;
        /* Every call made: it counts as recorded by recap (the report). */
        cap->resumed = how == RECORDED_RESUMED_WHOLE;
        if (cap->resumed)
            ctab_set_reason(cap, "the program used the capture's graph once every call was made: "
                                 "the driver capture resumed in that graph");
    }
    ctab_self_recorded_done(cap);
    return how != RECORDED_REPLAY;
}

/* Turns a live (or failed) recapture into a plain capture holding the same
 * work. Caller holds cap->lock. Where the capture may not be ended from
 * this thread (global and thread-local modes, or another thread's per-thread
 * default stream), the switch waits for the next call on the owning thread:
 * cap->fallback_pending. */
static void capture_fall_back(struct capture *cap, const char *reason)
{
    /* An invalidated capture recap records stays so: no switch revives it. */
    if (cap->path != PATH_RECAPTURE || cap->invalidated)
        return;
    /* Nor one the program broke itself (a call the driver refused, on any
     * thread): the driver's recapture is invalidated without a recapture
     * failure, and a plain capture replaying the journal would hand the
     * program a graph where the driver gives an error. It stays the
     * driver's, which answers every later call; its end lets the target
     * go. */
    if (!cap->by_recap && !cap->no_driver_capture && !cap->recapture_failed &&
        capture_driver_invalidated(cap->origin.real, cap->site))
        return;
    if (!cap->fallback_pending)
        ctab_set_reason(cap, reason);
    if (cap->by_recap && switch_recorded(cap))
        return;
    if (!ctab_may_end_here(cap)) {
        cap->fallback_pending = 1;
        return;
    }
    cap->fallback_pending = 0;

    if (!cap->no_driver_capture) {
        CUgraph dead = NULL;
        capture_driver_end(DRV_cuStreamEndCapture, cap->origin.real, &dead);
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

/* The streams a call joins and the events it records. A recapture that
 * outgrows what recap follows switches now, while its journal still holds
 * every call and can be replayed whole. */
static void note_membership(struct capture *cap, enum drv_id id, const union drv_args *a)
{
    if (!ctab_note_membership(cap, id, a))
        return;
    if (cap->path == PATH_RECAPTURE && !cap->by_recap && !cap->fallback_pending &&
        ctab_may_end_here(cap))
        capture_fall_back(cap, "the capture used more streams or events than recap can follow");
    ctab_journal_outgrown(cap);
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
 * each call it would have refused (shim/repeat/capture_rules.h) is looked at
 * first. Where this thread may end the capture, it becomes a driver
 * capture and the driver answers the call itself; elsewhere recap gives
 * the driver's answer: the error, and the capture invalidated. */

struct guard_check {
    enum drv_id id;
    union drv_args *args;
    CUstreamCaptureMode thread_mode;
    CUresult answer;            /* CUDA_SUCCESS: the driver answers */
};

static void guard_one(struct capture *cap, void *arg)
{
    struct guard_check *g = arg;
    pthread_mutex_lock(&cap->lock);
    if ((cap->by_recap || cap->no_driver_capture) && !cap->invalidated) {
        enum guard_rule rule = capture_rule_for(cap, g->id, g->args, g->thread_mode);
        if (rule != RULE_NONE) {
            capture_fall_back(cap, capture_rule_reason(rule));
            /* Not refused: the driver takes such a call from any thread.
             * From a thread that cannot switch the capture now it runs
             * against the stream as it is, and the switch follows. */
            if (cap->no_driver_capture && rule != RULE_STREAM_STATE) {
                cap->invalidated = rule != RULE_LEGACY_QUERY;
                if (g->answer == CUDA_SUCCESS)
                    g->answer = capture_rule_error(rule);
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

/* --- calls into a capture recap records ------------------------------------------ */

/* The recorder wants the driver to answer: the capture switches at this
 * call. */
static void switch_at(struct capture *cap, enum drv_id id, const char *why)
{
    if (!cap->switch_call)
        cap->switch_call = drv_table[id].symbol;
    capture_fall_back(cap, why);
}

/* A capture query answered as the driver would for the capture recap
 * records; anything recap cannot answer exactly switches first. While the
 * switch waits for the owning thread (no driver capture yet), recap
 * answers what it knows. */
static CUresult recorded_query(struct capture *cap, enum drv_id id, union drv_args *a)
{
    struct capture_query q = ctab_query_of(id, a);
    const void *key = ctab_stream_ref(id, drv_args_stream(id, a)).key;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    /* Measured on driver 580: either is refused, and nothing written. */
    if (q.status == NULL || (q.edges && !q.deps))
        return CUDA_ERROR_INVALID_VALUE;
    /* Another thread, while the switch waits for the capturing one: recap
     * follows no node of the calls made since, nor a graph not lent. */
    if (!cap->invalidated && !cap->by_recap && (q.deps || q.ndeps || (q.graph && !cap->lent_graph)))
        capture_invalidate(cap, "another thread asked for the capture's dependencies or graph "
                                "while its switch to a driver capture waited for the capturing "
                                "thread");
    /* Nodes and the graph are one graph's: the capture chooses it now
     * (bound already: it keeps that one). */
    char why[200];
    if (!cap->invalidated && (q.deps || q.ndeps || q.graph) &&
        recorded_choose_graph(cap, why, sizeof why) != 0) {
        switch_at(cap, id, why);
        return cap->no_driver_capture ? recorded_query(cap, id, a) : capture_op(cap, id, a);
    }
    int exact = 1;
    if (!cap->invalidated && (q.deps || q.ndeps))
        exact = (deps = self_record_deps(cap->self, key, &n)) != NULL;
    const char *switch_why = NULL;
    if (q.graph && !cap->invalidated && (cap->by_recap || cap->target)) {
        /* The program may keep the graph: recap goes on recording into
         * it, and a switch captures into it. Where the switch waits for
         * the owning thread, the graph it will capture into is lent now. */
        if (drv_real_fn[DRV_cuStreamBeginCaptureToGraph] == NULL) {
            cap->graph_asked = 1;
            switch_why = graph_asked_reason;
        } else {
            cap->graph_lent = 1;
            if (!cap->by_recap)
                recorded_lend_graph(cap);
        }
    }
    if (!switch_why && !exact && cap->by_recap)
        switch_why = "the program asked the capture something recap does not follow";
    if (switch_why) {
        switch_at(cap, id, switch_why);
        if (!cap->no_driver_capture)
            return capture_op(cap, id, a);
    }
    /* As measured on driver 580 (tests/standin/READINGS.md): an
     * invalidated capture reports its status only, and no dependency is a
     * NULL array. */
    *q.status = cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                 : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (cap->invalidated)
        return CUDA_SUCCESS;
    if (q.id)
        *q.id = cap->app_capture_id;
    if (q.graph) {
        *q.graph = cap->target ? graph_rec_graph(cap->target) : cap->lent_graph;
        cap->graph_handed_out = 1;
    }
    if (q.deps)
        *q.deps = n ? deps : NULL;
    if (q.ndeps)
        *q.ndeps = n;
    if (q.edges)
        *q.edges = self_record_default_edges;
    return CUDA_SUCCESS;
}

/* A call into a capture recap records (or has invalidated): the
 * recorder's answer, or the switch it asks for. Inlined into capture_on_op:
 * it is the hot path of a recorded loop (callgrind: a call of its own cost
 * 0.4 % more instructions an iteration on scenario mixed8). */
__attribute__((always_inline)) static inline CUresult
recorded_op(struct capture *cap, enum drv_id id, union drv_args *a)
{
    enum drv_op_kind kind = (enum drv_op_kind)drv_table[id].op_kind;
    if (kind == DRV_OP_QUERY_STATUS || kind == DRV_OP_QUERY_INFO)
        return recorded_query(cap, id, a);
    char why[RECORDED_WHY_LEN];
    int r = recorded_call(cap, id, a, why);
    if (__builtin_expect(r >= 0, 1))
        return (CUresult)r;
    switch_at(cap, id, why);
    if (r == RECORDED_SWITCH_REDO)
        return capture_op(cap, id, a);
    return cap->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

/* --- calls made into a capture ---------------------------------------------------- */

static CUresult query_in_capture(struct capture *cap, enum drv_id id, union drv_args *a)
{
    if (cap->path == PATH_RECAPTURE && ctab_query_of(id, a).graph) {
        cap->graph_asked = 1;
        capture_fall_back(cap, graph_asked_reason);
    }
    CUresult r = drv_invoke(id, a);
    if (r == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE && cap->path == PATH_RECAPTURE) {
        cap->recapture_failed = 1;
        capture_fall_back(cap, "recapture failed (reported by a capture query)");
        r = drv_invoke(id, a);
    }
    /* The program may have read the capture id during the recapture; it
     * must not see it change because recap switched captures. */
    cuuint64_t *id_out = drv_args_capture_id_out(id, a);
    if (r == CUDA_SUCCESS && id_out && cap->path == PATH_FALLBACK && cap->app_capture_id)
        *id_out = cap->app_capture_id;
    if (r == CUDA_SUCCESS && ctab_query_of(id, a).graph)
        cap->graph_handed_out = 1;
    return r;
}

static CUresult capture_op(struct capture *cap, enum drv_id id, union drv_args *a)
{
    enum drv_op_kind kind = (enum drv_op_kind)drv_table[id].op_kind;
    const char *why = NULL;
    CUresult r;

    if (cap->fallback_pending && ctab_may_end_here(cap))
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
            note_membership(cap, id, a);
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
            note_membership(cap, id, a);
        return r;
    }

    if (cap->path == PATH_RECAPTURE && !journal_can_copy(id, a, &why)) {
        if (!ctab_may_end_here(cap)) {
            /* The recapture goes on with the call, and its journal can no
             * longer be replayed: should it fail later, the capture is
             * invalidated (restart_as_plain). */
            r = drv_invoke(id, a);
            if (r == CUDA_SUCCESS) {
                journal_append(&cap->journal, id, a);
                note_membership(cap, id, a);
            }
            return r;
        }
        char reason[200];
        snprintf(reason, sizeof reason, "the capture used %s", why);
        capture_fall_back(cap, reason);
    }

    r = drv_invoke(id, a);
    if (r == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE && cap->path == PATH_RECAPTURE) {
        cap->recapture_failed = 1;
        char reason[200];
        snprintf(reason, sizeof reason, "recapture failed at %s", drv_table[id].symbol);
        capture_fall_back(cap, reason);
        if (cap->fallback_pending) {
            journal_append(&cap->journal, id, a);
            note_membership(cap, id, a);
            return CUDA_SUCCESS;
        }
        r = drv_invoke(id, a);
    }
    if (r == CUDA_SUCCESS) {
        /* After a switch too: the journal tells the graph's signature. */
        journal_append(&cap->journal, id, a);
        if (cap->learning)
            capture_driver_learn_last_node(cap, id);
        note_membership(cap, id, a);
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
        if (s.real == CU_STREAM_LEGACY && capture_any_self_recorded()) {
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
    if (mode == RECAP_MODE_OBSERVE) {   /* its slots were full (capture_observed.c) */
        cap->path = PATH_OBSERVE;
        ctab_set_reason(cap, "site observed only");
        return NULL;
    }
    cap->path = PATH_FRESH;
    if (!gate_open(&site->gate, site->seq, change)) {
        /* Reuse did not pay here: no journal, nothing kept or looked for,
         * and no shape beyond the node count (account_graph). */
        cap->reuse_closed = 1;
        ctab_set_reason(cap, "reuse stopped at this site until its back-off elapses");
        return NULL;
    }
    if (mode == RECAP_MODE_UPDATE) {
        ctab_set_reason(cap, "mode update: executable reuse only");
        return NULL;
    }
    int by_recap = recorded_possible(site);
    if (!drv_caps.recapture_begin && !by_recap) {
        pthread_once(&no_api_reason_once, format_no_api_reason);
        ctab_set_reason(cap, site->policy.self_record ? no_api_reason : no_api_self_off_reason);
        return NULL;
    }
    if (id == DRV_cuStreamBeginCapture || id == DRV_cuStreamBeginCapture_ptsz) {
        ctab_set_reason(cap, "legacy cuStreamBeginCapture has no capture mode");
        return NULL;
    }
    if (site->no_recapture) {
        ctab_set_reason(cap, site->no_recapture_reason);
        return NULL;
    }
    cap->journaled = 1;
    cap->learning = by_recap;
    if (!site->journal_verified) {
        ctab_set_reason(cap, "first capture at this site");
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
        ctab_set_reason(cap, "recaptures into the graph this stream was guessed to repeat fell "
                                "back in a row: a driver capture while that back-off lasts");
        return NULL;
    }
    uint64_t predicted = sites_stream_guess_locked(site, cap->origin.key);
    struct graph_rec *target = predicted ? cache_take_graph(site, predicted) : NULL;
    cap->candidates = target != NULL;
    if (!target) {
        cap->copy_wanted = predicted;
        ctab_set_reason(cap, "no released graph of the signature this stream captures next");
        /* A hit or a failure is known only at the end (capture_report_end). */
        enum gate_change looked = sites_record_look_locked(site, GATE_MISS, 0);
        if (looked != GATE_SAME)
            *change = looked;
    }
    return target;
}

/* A capture recap records itself, if the site keeps graphs it may repeat:
 * returns 1 (registered, *result the begin's answer), or 0 with
 * cap->reason set when a driver capture must begin instead. */
static int begin_recorded(struct capture *cap, CUresult *result)
{
    if (!recorded_take(cap))
        return 0;
    cap->path = PATH_RECAPTURE;
    cap->by_recap = cap->began_by_recap = 1;
    cap->reason[0] = '\0';
    cap->app_capture_id = recorded_capture_id();
    if (!ctab_register(cap)) {
        recorded_untake(cap);
        cap->by_recap = cap->began_by_recap = 0;
        cap->path = PATH_FRESH;
        cap->learning = 0;
        ctab_set_reason(cap, "too many captures at once for recap to record this one");
        return 0;
    }
    *result = CUDA_SUCCESS;
    return 1;
}

static CUresult begin_capture(enum drv_id id, CUstream stream, CUstreamCaptureMode mode,
                              const void *entry_return, const void *entry_cfa);

/* A driver capture that began: registered, or, where the table is full,
 * counted as unseen. */
static void register_driver_capture(struct capture *cap)
{
    if (!ctab_register(cap))
        ctab_unseen_began();
}

void capture_unseen_begin_enter(void)
{
    if (runtime_passthrough)
        return;
    ctab_begin_enter();
    kmem_capture_began(NULL);
    ctab_unseen_began();
}

void capture_unseen_begin_leave(CUresult r)
{
    if (runtime_passthrough)
        return;
    if (r != CUDA_SUCCESS)
        ctab_unseen_ended();
    ctab_begin_leave();
}

CUresult capture_on_begin(enum drv_id id, CUstream stream, CUstreamCaptureMode mode,
                          const void *entry_return, const void *entry_cfa)
{
    if (runtime_passthrough)
        return capture_driver_begin(id, stream, mode);
    /* Until the capture is registered, recap's own synchronisations
     * (kept memory's) must not run: they would invalidate it. */
    ctab_begin_enter();
    CUresult r = begin_capture(id, stream, mode, entry_return, entry_cfa);
    ctab_begin_leave();
    return r;
}

static CUresult begin_capture(enum drv_id id, CUstream stream, CUstreamCaptureMode mode,
                              const void *entry_return, const void *entry_cfa)
{
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
        return unknown_to_driver ? CUDA_ERROR_ILLEGAL_STATE : capture_driver_begin(id, stream, mode);
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
    if (site && (site->policy.mode == RECAP_MODE_OBSERVE || site->policy.mode == RECAP_MODE_OFF)) {
        kmem_capture_began(site);       /* keeps nothing: its memory is the program's */
        if (capture_begin_observed(id, s, mode, site, &r))
            return r;
    }
    struct capture *cap = site ? ctab_new() : NULL;
    if (!cap) {
        kmem_capture_began(NULL);
        return capture_driver_begin_unseen(id, stream, mode);
    }

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
     * of the newest graph it keeps of the signature wanted. */
    const char *no_copy = NULL;
    if (!target && cap->copy_wanted &&
        (target = graph_copy_of_held(site, cache_graph_edit_epoch(), cap->copy_wanted,
                                     cap->copy_wanted, 0, &no_copy)))
        cap->candidates = 1;
    else if (!target && no_copy)
        ctab_set_reason(cap, no_copy);
    PHASE_MARK(PHASE_BEGIN_DECIDE, t_record, t_decided);

    if (cap->record) {
        /* No driver capture: recap records the calls (capture_recorded.c). */
        int recorded = begin_recorded(cap, &r);
        if (!recorded) {
            r = capture_driver_begin(id, stream, mode);
            if (r == CUDA_SUCCESS)
                register_driver_capture(cap);
        }
        if (r != CUDA_SUCCESS)
            step_capture_refused(&site->step);
        runtime_verbose("capture begin site %016llx #%lu: %s (%d kept graphs to match)",
                        (unsigned long long)site->id, cap->seq,
                        recorded ? "recorded by recap" : capture_path_name(cap->path), cap->candidates);
        ctab_release(cap);
        PHASE_MARK(PHASE_BEGIN_RECORDING, t_decided, t_recording);
        PHASE_MARK(PHASE_BEGIN_RECORDED_TOTAL, t_entry, t_begun);
        return r;
    }
    if (target) {
        cap->target = target;
        cap->path = PATH_RECAPTURE;
        cap->reason[0] = '\0';
        target->recapture_unfinished = 1;
        r = drv_caps.recapture_begin(s.real, mode, graph_rec_graph(target), recapture_callback, cap);
        if (r == CUDA_SUCCESS) {
            cap->app_capture_id = capture_driver_id(cap);
        } else {
            cache_graph_discard(target);   /* undefined after any failure */
            cap->target = NULL;
            cap->path = PATH_FALLBACK;
            snprintf(cap->reason, sizeof cap->reason, "recapture refused at begin: %s",
                     drv_result_name(r));
            r = capture_driver_begin(id, stream, mode);
        }
    } else {
        r = capture_driver_begin(id, stream, mode);
    }

    runtime_verbose("capture begin site %016llx #%lu: %s", (unsigned long long)site->id, cap->seq,
                    capture_path_name(cap->path));
    if (r == CUDA_SUCCESS)
        register_driver_capture(cap);
    else
        step_capture_refused(&site->step);
    ctab_release(cap);
    return r;
}

/* --- end ------------------------------------------------------------------------- */

/* The end of a capture recap records (or switched without a driver
 * capture yet): 1 with *result when that is the program's answer, 0 when
 * it switched and the driver must end it. */
static int end_recorded(struct capture *cap, CUgraph *phGraph, CUresult *result)
{
    int wrong_thread = cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
                       !pthread_equal(pthread_self(), cap->owner);
    if (wrong_thread) {
        /* The driver's answer, and the capture is over (measured:
         * tests/standin/READINGS.md); the program gets no graph. */
        cap->invalidated = 1;
    }
    char why[200];
    if (!cap->invalidated && cap->by_recap && recorded_end_unmatched(cap, why, sizeof why))
        switch_at(cap, DRV_cuStreamEndCapture, why);
    if (!cap->invalidated && !cap->by_recap)
        return 0;

    long nodes = recorded_end_finish(cap, phGraph);
    if (cap->invalidated) {
        if (!wrong_thread)
            *phGraph = NULL;
        *result = wrong_thread ? CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
                               : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        capture_account_recapture(cap);
        *result = CUDA_SUCCESS;
    }
    ctab_unregister(cap);
    ctab_memo_forget(cap);
    capture_report_end(cap, *result, nodes);
    ctab_self_recorded_done(cap);
    return 1;
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
    ctab_set_reason(cap, "recapture failed at end");
    if (restart_as_plain(cap) != CUDA_SUCCESS)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return capture_driver_end(id, cap->origin.real, graph);
}

/* An end on a stream in no capture recap holds: the driver's answer; a
 * capture recap counted as unseen is over when the driver took the end
 * and the stream captures no more. */
static CUresult end_unknown(enum drv_id id, CUstream stream, CUgraph *phGraph)
{
    CUresult r = capture_driver_end(id, stream, phGraph);
    if (ctab_any_unseen() && r != CUDA_ERROR_ILLEGAL_STATE &&
        !capture_driver_still_capturing(stream, NULL))
        ctab_unseen_ended();
    return r;
}

CUresult capture_on_end(enum drv_id id, CUstream stream, CUgraph *phGraph)
{
    if (runtime_passthrough)
        return capture_driver_end(id, stream, phGraph);

    PHASE_MARK_START(t_entry);
    kmem_capture_ended();
    struct stream_ref s = ctab_stream_ref(id, stream);
    if (observed_any()) {
        struct observed_capture o;
        int slot = observed_find(s.key, &o);
        PHASE_MARK(PHASE_OBSERVE_END_FIND, t_entry, t_found);
        if (slot >= 0)
            return capture_end_observed(id, s, phGraph, slot, &o);
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
        return end_unknown(id, stream, phGraph);
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
    if ((cap->by_recap || cap->no_driver_capture) && end_recorded(cap, phGraph, &r)) {
        end_release_unwanted(cap, wants_graph, unwanted);
        PHASE_MARK(PHASE_END_RECORDED_TOTAL, t_entry, t_ended);
        return r;
    }
    if (cap->fallback_pending && ctab_may_end_here(cap)) {
        capture_fall_back(cap, cap->reason);
        if (cap->invalidated && end_recorded(cap, phGraph, &r)) {
            end_release_unwanted(cap, wants_graph, unwanted);
            return r;
        }
    }

    CUgraph graph = NULL;
    r = capture_driver_end(id, stream, phGraph ? &graph : NULL);
    if (r != CUDA_SUCCESS && capture_driver_still_capturing(cap->origin.real, cap->site)) {
        /* Wrong thread and the like: the capture goes on, untouched. */
        pthread_mutex_unlock(&cap->lock);
        ctab_release(cap);
        if (phGraph)
            *phGraph = graph;
        return r;
    }

    if (r != CUDA_SUCCESS && r != CUDA_ERROR_GRAPH_RECAPTURE_FAILURE && cap->lent_graph) {
        /* The driver captured into the graph recap lent (a query handed it
         * out): a failed end leaves it, where the driver destroys a
         * capture's own graph. The program gets no graph, as without
         * recap, so the lent one goes. (A recapture failure is recap's:
         * the plain capture that replaces it goes on in that graph.) */
        DRV_REAL(cuGraphDestroy)(cap->lent_graph);
        cap->lent_graph = NULL;
        graph = NULL;
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
        !capture_account_graph(cap, graph, &nodes))
        step_note_handle(graph, &cap->site->step);

    if (phGraph)
        *phGraph = graph;
    ctab_unregister(cap);
    ctab_memo_forget(cap);
    capture_report_end(cap, r, nodes);
    end_release_unwanted(cap, wants_graph, unwanted);
    return r;
}
