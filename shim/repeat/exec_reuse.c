/*
 * exec_reuse.c - instantiate by updating what the program released.
 *
 * An executable graph recap hands out is always one whose parameters equal
 * the graph's: either freshly instantiated, or updated as a whole with
 * cuGraphExecUpdate, or - when it was instantiated from this very graph,
 * last brought up to the graph's previous version, and the recapture since
 * reported every change as eligible - updated node by node. The per-node
 * path needs the graph's own node handles (recapture keeps them) and no
 * edit of any graph by the program in between (the graph-edit epoch).
 */
#include <stdio.h>

#include "shim/state/cache.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/repeat/exec_reuse.h"
#include "shim/base/phase_clock.h"
#include "shim/base/runtime.h"
#include "shim/repeat/self_record.h"
#include "shim/base/shape.h"
#include "shim/state/sites.h"
#include "shim/base/step_time.h"
#include "shim/state/user_objects.h"

/* --- the request, whichever entry point ------------------------------------------ */

static unsigned long long request_flags(const struct inst_request *rq)
{
    return rq->params ? rq->params->flags : rq->flags;
}

static CUresult instantiate_real(const struct inst_request *rq)
{
    switch (rq->id) {
    case DRV_cuGraphInstantiateWithFlags:
        return DRV_REAL(cuGraphInstantiateWithFlags)(rq->ph_exec, rq->graph, rq->flags);
    case DRV_cuGraphInstantiateWithParams:
    case DRV_cuGraphInstantiateWithParams_ptsz:
        return ((drv_fn_cuGraphInstantiateWithParams)drv_real_fn[rq->id])(rq->ph_exec, rq->graph,
                                                                           rq->params);
    default:
        return ((drv_fn_cuGraphInstantiate_v2)drv_real_fn[rq->id])(rq->ph_exec, rq->graph,
                                                                    rq->error_node, rq->log,
                                                                    rq->log_size);
    }
}

/* Instantiation may need device memory recap's cache is holding. */
static CUresult instantiate_with_oom_retry(const struct inst_request *rq)
{
    CUresult r = instantiate_real(rq);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && cache_release_for_oom())
        r = instantiate_real(rq);
    return r;
}

/* What a successful instantiation reports, for a reused executable graph. */
static void report_success(const struct inst_request *rq, CUgraphExec exec)
{
    *rq->ph_exec = exec;
    if (rq->params) {
        rq->params->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
        rq->params->hErrNode_out = NULL;
    }
    /* The legacy form's log buffer is written only on failure. */
    if (rq->error_node)
        *rq->error_node = NULL;
}

/* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD asks for the upload that
 * instantiation would have done, into the given stream. */
static CUresult upload_if_asked(const struct inst_request *rq, CUgraphExec exec)
{
    if (!(request_flags(rq) & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        return CUDA_SUCCESS;
    CUstream stream = rq->params ? rq->params->hUploadStream : NULL;
    if (rq->id == DRV_cuGraphInstantiateWithParams_ptsz)
        return DRV_REAL(cuGraphUpload_ptsz)(exec, stream);
    return DRV_REAL(cuGraphUpload)(exec, stream);
}

/* --- bringing a released executable graph up to date ------------------------------ */

/* Copies one changed node's parameters from the graph into the executable
 * graph. On failure *failed names the call that failed. */
static CUresult apply_changed_node(CUgraphExec exec, const struct changed_node *c, CUcontext ctx,
                                   const char **failed)
{
#define STEP(call)                    \
    do {                              \
        CUresult r_ = (call);         \
        if (r_ != CUDA_SUCCESS) {     \
            *failed = #call;          \
            return r_;                \
        }                             \
    } while (0)
    switch (c->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p;
        STEP(DRV_REAL(cuGraphKernelNodeGetParams_v2)(c->node, &p));
        STEP(DRV_REAL(cuGraphExecKernelNodeSetParams_v2)(exec, c->node, &p));
        return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS p;
        STEP(DRV_REAL(cuGraphMemsetNodeGetParams)(c->node, &p));
        STEP(DRV_REAL(cuGraphExecMemsetNodeSetParams)(exec, c->node, &p, ctx));
        return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D p;
        STEP(DRV_REAL(cuGraphMemcpyNodeGetParams)(c->node, &p));
        STEP(DRV_REAL(cuGraphExecMemcpyNodeSetParams)(exec, c->node, &p, ctx));
        return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS p;
        STEP(DRV_REAL(cuGraphHostNodeGetParams)(c->node, &p));
        STEP(DRV_REAL(cuGraphExecHostNodeSetParams)(exec, c->node, &p));
        return CUDA_SUCCESS;
    }
    default:
        *failed = shape_node_type_name(c->type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
#undef STEP
}

/* How an instantiation was served. */
enum inst_how { HOW_NEW, HOW_REUSE, HOW_DELTA, HOW_UPDATE };

static const char *const how_names[] = { [HOW_NEW] = "new", [HOW_REUSE] = "reuse",
                                         [HOW_DELTA] = "delta", [HOW_UPDATE] = "update" };

/* Whether a changed node's arguments can come from `g`'s recording (kernel
 * and host-function nodes recap recorded) rather than from the graph node. */
static int changed_from_recording(const struct graph_rec *g, const struct changed_node *c)
{
    return g->recording && c->op >= 0 &&
           (c->type == CU_GRAPH_NODE_TYPE_KERNEL || c->type == CU_GRAPH_NODE_TYPE_HOST);
}

/* `e` now reflects `g` as it is. Field by field: the compiler read
 * version with its neighbours in one 16-byte load, which also read the
 * copy flags beside them that another thread writes under cache_lock
 * (helgrind, with copies on by default). */
static void note_synced(struct exec_rec *e, const struct graph_rec *g)
{
    e->synced_graph = graph_rec_graph(g);
    e->synced_serial = __atomic_load_n(&g->serial, __ATOMIC_RELAXED);
    e->synced_version = __atomic_load_n(&g->version, __ATOMIC_RELAXED);
    e->synced_epoch = cache_graph_edit_epoch();
}

/* Whether the recapture's change list alone brings `e` up to `g`. */
static int delta_applies(const struct exec_rec *e, const struct graph_rec *g)
{
    return g->changes_known && !e->mutated && e->source_serial == g->serial &&
           e->synced_serial == g->serial && e->synced_version + 1 == g->version &&
           e->synced_epoch == cache_graph_edit_epoch();
}

/* Brings a TAKEN executable graph up to the program's graph. Returns 0 and
 * how, or -1 with the reason when the executable graph cannot be used. */
static int sync_exec(struct exec_rec *e, struct graph_rec *g, enum inst_how *how,
                     int *driver_refused, char *why, size_t len)
{
    if (delta_applies(e, g)) {
        size_t k = g->nchanged;
        if (k == 0) {
            *how = HOW_REUSE;
            return 0;
        }
        /* A graph recap recorded itself has its changed kernel and host
         * arguments in its recording: they go straight into the executable
         * graph, with no read of the graph node and no write of it (it is
         * brought up to date only when the program looks). With every node
         * of 1000 new, that costs 0.22-0.33 us a node against 0.11-0.15 for
         * the graph node's write plus 0.15-0.21 for its share of a whole
         * update (scripts/bench-node-setters.cu): per node at any share.
         * The other changes need a read of the graph node each, and pay per
         * node only up to EXEC_DELTA_MAX_PERCENT. */
        size_t reads = 0;
        for (size_t i = 0; i < k; i++)
            reads += !changed_from_recording(g, &g->changed[i]);
        if (g->nodes > 0 && reads * 100 <= (size_t)g->nodes * EXEC_DELTA_MAX_PERCENT) {
            CUcontext ctx = NULL;
            const char *failed = "cuCtxGetCurrent";
            CUresult r = DRV_REAL(cuCtxGetCurrent)(&ctx);
            if (g->recording)
                journal_stale_lock();
            for (size_t i = 0; i < k && r == CUDA_SUCCESS; i++) {
                const struct changed_node *c = &g->changed[i];
                if (changed_from_recording(g, c))
                    r = self_record_apply_to_exec(exec_rec_exec(e), &g->recording->ops[c->op],
                                                  &failed);
                else
                    r = apply_changed_node(exec_rec_exec(e), c, ctx, &failed);
            }
            if (g->recording)
                journal_stale_unlock();
            if (r == CUDA_SUCCESS) {
                *how = HOW_DELTA;
                return 0;
            }
            /* Partly applied: the whole update below rewrites every node. */
            snprintf(why, len, "per-node update stopped at %s: %s", failed, drv_result_name(r));
        }
    }
    CUresult r = self_record_flush(g->recording);
    if (r != CUDA_SUCCESS) {
        snprintf(why, len, "bringing a graph recap recorded up to date failed: %s; instantiated "
                 "anew", drv_result_name(r));
        return -1;
    }
    CUgraphExecUpdateResultInfo info = { 0 };
    r = DRV_REAL(cuGraphExecUpdate_v2)(exec_rec_exec(e), graph_rec_graph(g), &info);
    if (r == CUDA_SUCCESS) {
        *how = HOW_UPDATE;
        return 0;
    }
    snprintf(why, len, "cuGraphExecUpdate_v2 failed: %s (update result %d); instantiated anew",
             drv_result_name(r), (int)info.result);
    *driver_refused = 1;
    return -1;
}

/* A site's shapes are node counts where nothing is recaptured (the count
 * is one cheap driver call). When the driver refuses to update one graph of
 * a count into another of that count (a dynamic batch: other kernels,
 * other topology), the count alone cannot tell the site's graphs apart:
 * from its next capture on, its shapes also count node types and edges, so
 * each variant keeps an executable graph of its own. Returns whether this
 * call made the change. */
static int shapes_become_typed(struct site *site)
{
    pthread_mutex_lock(&site->lock);
    int changed = !site->typed_shapes;
    site->typed_shapes = 1;
    pthread_mutex_unlock(&site->lock);
    return changed;
}

/* The program may have edited this graph since its shape was taken (some
 * graph was edited: the epoch moved, perhaps for another graph). A node
 * count tells whether it grew or shrank; if so its whole shape is taken
 * again, so that a released executable graph of the old shape is not
 * tried (an update that fails, then an instantiation: dearer than the
 * instantiation alone), and it is marked edited, never to be kept. A node
 * replaced by another of the same count still meets the failed update,
 * which makes the site's shapes typed. Where the driver refuses a query
 * the old shape stands. */
static void shape_again_if_edited(struct graph_rec *g)
{
    unsigned long epoch = cache_graph_edit_epoch();
    if (__builtin_expect(g->shape_epoch == epoch, 1))
        return;
    struct graph_census census;
    CUcontext ctx = NULL;
    if (shape_census(graph_rec_graph(g), 0, &census) != 0)
        return;
    if (census.nodes != g->nodes) {
        if ((g->shape_typed && shape_census(graph_rec_graph(g), 1, &census) != 0) ||
            DRV_REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS)
            return;
        g->shape = shape_in_context(&census, ctx);
        g->nodes = census.nodes;
        g->edited = 1;
    }
    g->shape_epoch = epoch;
}

/* --- the hook ----------------------------------------------------------------------- */

static int site_reuses_execs(const struct site *site, int closed)
{
    return (site->policy.mode == RECAP_MODE_AUTO || site->policy.mode == RECAP_MODE_UPDATE) &&
           !closed && !__atomic_load_n(&site->no_exec_reuse, __ATOMIC_RELAXED);
}

/* Counts an instantiation and, when the site looked into what it keeps,
 * that look (a failed update counts as a failure). Returns whether its
 * event is worth writing; *change is what the look did to the site's gate. */
static int count_instantiation(struct site *site, enum inst_how how, const char *reason,
                               int looked, int update_failed, double us, double wasted_us,
                               enum gate_change *change)
{
    struct site_counters *c = &site->count;
    pthread_mutex_lock(&site->lock);
    c->instantiations++;
    c->update_failures += update_failed;
    *change = GATE_SAME;
    if (looked) {
        /* What it saved against the site's new instantiations (measured
         * before this one counts), or what the failed attempt cost. */
        enum gate_look look = how != HOW_NEW ? GATE_HIT : update_failed ? GATE_FAILED : GATE_MISS;
        double net = look == GATE_HIT ? sites_instantiation_net_locked(site, us)
                   : look == GATE_FAILED ? -wasted_us : 0;
        *change = sites_record_look_locked(site, look, net);
    }
    switch (how) {
    case HOW_NEW: c->how_new++; break;
    case HOW_UPDATE: c->how_update++; break;
    case HOW_DELTA: c->how_delta++; break;
    case HOW_REUSE: c->how_reuse++; break;
    }
    if (how == HOW_NEW) {
        c->inst_new_us += us;
    } else {
        c->reused++;
        c->reuse_us += us;
    }
    timeline_instantiation(&site->timeline, site->seq, how_names[how], us);
    int write = event_worth_writing(&site->last_instantiate_key, how_names[how], reason,
                                    ++site->instantiate_seq, update_failed);
    pthread_mutex_unlock(&site->lock);
    return write;
}

/* A graph recap does not track: one an observed site captured is timed
 * for the site's step (step_time.h), and so are its launches. */
static CUresult instantiate_untracked(const struct inst_request *rq)
{
    struct step_site *step = step_handle_site(rq->graph);
    if (!step)
        return instantiate_real(rq);
    double t0 = runtime_now_us();
    CUresult r = instantiate_real(rq);
    if (r == CUDA_SUCCESS) {
        step_add(step, STEP_INSTANTIATE, runtime_since_us(t0));
        step_note_handle(*rq->ph_exec, step);
    }
    return r;
}

CUresult exec_on_instantiate(const struct inst_request *rq)
{
    if (runtime_passthrough || !rq->ph_exec)
        return instantiate_real(rq);
    PHASE_MARK_START(t_entry);
    uobj_collect();
    PHASE_MARK(PHASE_INST_USER_OBJECTS, t_entry, t_collected);
    struct graph_rec *g = cache_graph_held(rq->graph);
    if (!g)
        return instantiate_untracked(rq);
    shape_again_if_edited(g);
    PHASE_MARK(PHASE_INST_HELD_GRAPH, t_collected, t_held);

    struct site *site = g->entry.site;
    unsigned long long flags = request_flags(rq) & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    unsigned long seq;
    pthread_mutex_lock(&site->lock);
    seq = site->seq;
    int closed = site->gate.closed;
    pthread_mutex_unlock(&site->lock);

    double t0 = runtime_now_us();
    char reason[200];
    reason[0] = '\0';
    enum inst_how how = HOW_NEW;
    int reusable = site_reuses_execs(site, closed) && !(flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);

    int update_failed = 0, driver_refused = 0;
    double wasted_us = 0;
    struct exec_rec *e = reusable ? cache_take_exec(site, flags, g->shape, g->serial) : NULL;
    if (e && e->source_serial != g->serial && g->recording && g->changes_known && !g->copied) {
        /* A graph recap records whose own executable graph is not kept:
         * every update from another graph's would be a whole one (node
         * handles are the graph's), so this graph gets one of its own,
         * once, and the other waits for its own graph. Not a copy made
         * for a program that keeps its graphs: no capture records into it
         * again, so its own executable graph would never pay. */
        cache_exec_give_back(e);
        e = NULL;
        snprintf(reason, sizeof reason, "no released executable graph instantiated from this "
                                        "graph, which recap records");
        /* It had one: the site keeps fewer than the graphs it records
         * into in turn, and each would push the other's out. */
        if (g->own_exec_made)
            cache_site_keep_another_exec(site);
    }
    PHASE_MARK(PHASE_INST_TAKE_EXEC, t_held, t_taken);
    if (e) {
        double t_attempt = runtime_now_us();
        if (sync_exec(e, g, &how, &driver_refused, reason, sizeof reason) != 0) {
            wasted_us = runtime_since_us(t_attempt);
            how = HOW_NEW;
            cache_exec_discard(e);
            e = NULL;
            update_failed = 1;
        }
    } else if (!reusable) {
        snprintf(reason, sizeof reason, "%s",
                 (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
                     ? "device-launchable graphs are not reused"
                 : closed ? "reuse stopped at this site until its back-off elapses"
                                           : "site mode does not reuse executable graphs");
    } else if (!reason[0]) {
        snprintf(reason, sizeof reason, "no released executable graph of this shape and flags");
    }

    PHASE_MARK(PHASE_INST_SYNC_EXEC, t_taken, t_synced);
    CUresult r;
    if (e) {
        /* The executable graph now reflects this graph: the user objects of
         * the graph it reflected before go back after its last launch, and
         * this graph's are kept alive on its behalf. */
        uobj_exec_retire(exec_rec_exec(e), 0);
        if (uobj_exec_adopt(exec_rec_exec(e), rq->graph) != 0) {
            cache_exec_discard(e);
            e = NULL;
            how = HOW_NEW;
            update_failed = 1;
            snprintf(reason, sizeof reason, "could not keep the graph's user objects alive "
                                            "for a reused executable graph");
        }
    }
    PHASE_MARK(PHASE_INST_ADOPT, t_synced, t_adopted);
    if (e) {
        note_synced(e, g);
        r = upload_if_asked(rq, exec_rec_exec(e));
        if (r == CUDA_SUCCESS) {
            report_success(rq, exec_rec_exec(e));
            cache_exec_hand_out(e);
        } else {
            cache_exec_discard(e);
            snprintf(reason, sizeof reason, "upload of a reused executable graph failed: %s",
                     drv_result_name(r));
            e = NULL;
            how = HOW_NEW;
            update_failed = 1;
        }
    }
    if (!e) {
        struct cache_probe probe = { 0 };
        if (reusable)
            cache_probe_begin(&probe, site);
        /* The driver copies the graph's nodes: they must hold what the
         * recording has (a failure shows in the instantiation's result
         * or a node's own; the recording stays the truth). */
        CUresult flushed = self_record_flush(g->recording);
        if (flushed != CUDA_SUCCESS)
            event_error(site, "a graph recap recorded could not take its recorded arguments "
                              "(%s) before instantiation", drv_result_name(flushed));
        r = instantiate_with_oom_retry(rq);
        if (r != CUDA_SUCCESS)
            return r;
        if (reusable) {
            unsigned long long bytes = cache_probe_end(&probe, site, g->nodes);
            struct exec_rec *rec = cache_exec_track(*rq->ph_exec, site, flags, g->shape, g->nodes,
                                                    graph_rec_graph(g), g->serial, bytes);
            if (rec) {
                note_synced(rec, g);
                g->own_exec_made = 1;
            }
        }
    }
    PHASE_MARK(PHASE_INST_HAND_OUT, t_adopted, t_handed_out);
    double us = runtime_since_us(t0);
    step_add(&site->step, STEP_INSTANTIATE, us);
    step_note_handle(*rq->ph_exec, &site->step);
    const char *why = reason[0] ? reason : NULL;
    enum gate_change change;
    int write = count_instantiation(site, how, why, reusable, update_failed, us, wasted_us,
                                    &change);
    event_instantiate(site, seq, how_names[how], why, us, write);
    if (driver_refused && shapes_become_typed(site))
        event_reuse_shapes_typed(site, reason);
    cache_site_gate_changed(site, change);
    PHASE_MARK(PHASE_INST_COUNT, t_handed_out, t_counted);
    PHASE_MARK(PHASE_INST_TOTAL, t_entry, t_done);
    return CUDA_SUCCESS;
}
