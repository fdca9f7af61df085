/*
 * capture_account.c - what an ended capture leaves behind: its graph's
 * record in the cache (shape, signature, the recording to repeat it by),
 * the site's history and counts, and its line in the log.
 *
 * Called by shim/repeat/capture.c at the end of every capture it followed, once
 * the capture's path is settled; decides nothing about the capture itself.
 */
#include <stdio.h>
#include <stdlib.h>

#include "shim/state/cache.h"
#include "shim/repeat/capture_account.h"
#include "shim/repeat/capture_recorded.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/runtime.h"
#include "shim/repeat/self_record.h"
#include "shim/base/shape.h"
#include "shim/state/sites.h"
#include "shim/base/step_time.h"

/* Adds a captured graph's kind (its signature where recap knows one, else
 * its shape) to its stream's and its site's history; the site's working
 * set follows, and with its concurrency what it keeps. */
static void record_shape(struct capture *cap, uint64_t kind, int typed)
{
    struct site *site = cap->site;
    cap->kind = kind;
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
struct graph_rec *capture_account_graph(struct capture *cap, CUgraph graph, long *nodes)
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
     * instantiation is what the program gets without recap. The census
     * sees them where it reads node types; the journal sees the calls
     * that make them wherever the capture was journaled (a site whose
     * node types were not read went on updating, and the next site's
     * upload crashed). */
    if (cap->journal.memory_nodes ||
        (census.typed && (census.by_type[CU_GRAPH_NODE_TYPE_MEM_ALLOC] ||
                          census.by_type[CU_GRAPH_NODE_TYPE_MEM_FREE] ||
                          census.by_type[CU_GRAPH_NODE_TYPE_CONDITIONAL])))
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
    rec->recapture_unfinished = 0;
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
void capture_count(struct site *site, struct capture_report *rep, enum capture_path path,
                          int began_by_recap, int was_active)
{
    pthread_mutex_lock(&site->lock);
    struct site_counters *c = &site->count;
    c->captures++;
    switch (path) {
    case PATH_RECAPTURE: c->recaptured++, c->by_recap += began_by_recap; break;
    case PATH_FALLBACK:
        c->fallbacks++;
        sites_count_reason_locked(&site->fallback_reasons, rep->reason);
        break;
    case PATH_FRESH:
        c->fresh++, c->fresh_us += rep->us;
        sites_count_reason_locked(&site->fresh_reasons, rep->reason);
        break;
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
        .site = site, .seq = cap->seq, .path = capture_path_name(path),
        .reason = path == PATH_RECAPTURE && !cap->resumed ? NULL : cap->reason,
        .nodes = nodes, .us = runtime_since_us(cap->t0), .result = r,
        .by = path != PATH_RECAPTURE ? NULL : cap->began_by_recap ? "recap" : "driver",
        .candidates = cap->candidates,
        .kind = cap->kind,
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

    capture_count(site, &rep, path, cap->began_by_recap, 1);
}
