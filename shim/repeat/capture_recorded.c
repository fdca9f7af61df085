/*
 * capture_recorded.c - captures recap records itself (drivers without the
 * recapture API).
 *
 * A repeat capture at a site whose graphs recap recorded starts no driver
 * capture. Its begin takes the site's kept graphs that it may repeat - one
 * of each signature (shim/repeat/match.h), or where the program keeps every
 * graph it captures, its own graphs of each kind, pinned and compared
 * without a write until the one chosen is copied (graph_copy.h) - its calls
 * are compared with each, copied into the capture's journal while more
 * than one still matches, and the capture binds to a graph when one is
 * left (or at the end, to the one matched whole; or when an answer needs
 * one graph). From then on each call is written into that graph as it
 * comes (shim/repeat/self_record.h), and the graphs it did not bind to go back to
 * the site untouched for the next capture or another thread. When no kept
 * graph matches a call, the capture switches: its calls so far become a
 * journal replayed into a driver capture (capture.c), and the graph it was
 * bound to, if any, goes back to the site too, so that an odd capture
 * costs one driver capture and the next one binds to the usual graph.
 *
 * Queries are answered from the graph bound to (status, a capture id of
 * recap's own, each stream's dependency nodes: shim/repeat/capture.c asks); a
 * query for the graph itself lends it to the program, and a switch then
 * captures into that very graph (resumed in it where one stream made every
 * call so far).
 *
 * This file serves capture.c, which owns the capture's states: it hands
 * back verdicts and reasons, and never switches, invalidates or ends a
 * capture itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/state/cache.h"
#include "shim/repeat/capture_recorded.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/repeat/graph_copy.h"
#include "shim/repeat/match.h"
#include "shim/base/runtime.h"
#include "shim/repeat/self_record.h"
#include "shim/state/sites.h"

/* Capture ids recap gives the captures it records: unique, and far above
 * the driver's own counter, so the two never meet. */
static cuuint64_t next_recap_capture_id = 1ull << 62;

/* Whether recap records this site's repeat captures itself: asked for (the
 * site's policy), and no recapture API to do it better. Learning a graph's
 * nodes needs the dependency query of 12.3. */
int recorded_possible(const struct site *site)
{
    return site->policy.self_record && !drv_caps.recapture_begin &&
           drv_real_fn[DRV_cuStreamGetCaptureInfo_v3] != NULL;
}

/* Candidates go back to the site's cache, or - graphs the program keeps,
 * pinned for comparison (cap->held_match) - back to the program,
 * untouched. */
static void give_back(struct capture *cap, struct graph_rec **graphs, int n, int rewritten)
{
    for (int i = 0; i < n; i++) {
        if (cap->held_match)
            cache_graph_unpin_held(graphs[i], NULL, NULL, cap->held_epoch);
        else
            cache_graph_give_back(graphs[i], rewritten);
    }
}

/* The capture stops choosing without binding: every candidate goes back
 * to the site untouched (nothing was written into one). */
static void stop_matching(struct capture *cap)
{
    struct graph_rec *all[MATCH_MAX_CANDIDATES];
    int nall;
    match_finish(cap->match, -1, all, &nall);
    give_back(cap, all, nall, 0);
    cap->matching = 0;
    cap->held_match = 0;
}

/* The capture keeps the graph it is bound to: the others it held in
 * reserve go back untouched (an answer named the bound graph's nodes, or
 * it ended). */
static void drop_reserve(struct capture *cap)
{
    if (!cap->reserve)
        return;
    stop_matching(cap);
    cap->reserve = 0;
}

/* A site whose stream guesses of late missed (GUESS_DISTRUSTED and more)
 * compares candidates lazily from the begin instead of binding to the
 * guess: a wrong binding costs the graph's whole update later. A miss
 * counts 2 and a hit takes 1 off, so a guess right two times in three
 * keeps binding. */
#define GUESS_DISTRUSTED 2
#define GUESS_MISSES_MAX 4

static int site_trusts_guess(struct site *site)
{
    pthread_mutex_lock(&site->lock);
    int trusted = site->guess_misses < GUESS_DISTRUSTED;
    pthread_mutex_unlock(&site->lock);
    return trusted;
}

/* Whether the first candidate (the stream's guess) was the graph repeated,
 * told once per capture. */
static void tell_guess(struct capture *cap, int right)
{
    if (!cap->guess_open)
        return;
    cap->guess_open = 0;
    struct site *site = cap->site;
    pthread_mutex_lock(&site->lock);
    int misses = site->guess_misses + (right ? -1 : 2);
    site->guess_misses = misses < 0 ? 0 : misses > GUESS_MISSES_MAX ? GUESS_MISSES_MAX : misses;
    pthread_mutex_unlock(&site->lock);
}

/* What this stream captured before: the tie-break among candidates. */
static uint64_t stream_guess(struct capture *cap)
{
    pthread_mutex_lock(&cap->site->lock);
    uint64_t guess = sites_stream_guess_locked(cap->site, cap->origin.key);
    pthread_mutex_unlock(&cap->site->lock);
    return guess;
}

/* A change recap's own recording made. No driver callback runs while recap
 * records a capture, so the change list is written only here, under
 * cap->lock like every reader of it: changes_lock (taken per recorded
 * call, 1000 times a capture at N = 1000) is not needed. */
static void note_change(struct capture *cap, struct changed_node changed)
{
    cap->eligible++;
    ctab_push_change(cap, changed);
}

/* --- begin ----------------------------------------------------------------------- */

/* Whether the driver would let this begin start a capture at all (valid
 * stream, not the legacy one, not capturing by a path recap does not
 * follow, a mode it knows): otherwise it is the driver's to answer. */
static const char *begin_refusal(struct capture *cap)
{
    if (cap->origin.real == CU_STREAM_LEGACY || (unsigned)cap->mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return "the driver decides this begin";
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = DRV_REAL(cuStreamIsCapturing)(cap->origin.real, &status);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(cap->site, "cuStreamIsCapturing", r, "the driver decides this begin");
        return "the driver decides this begin";
    }
    if (status != CU_STREAM_CAPTURE_STATUS_NONE)
        return "the driver decides this begin";
    return NULL;
}

/* No kept graph to compare with: a look that missed, for the site's gate. */
static void record_miss(struct capture *cap)
{
    struct site *site = cap->site;
    pthread_mutex_lock(&site->lock);
    enum gate_change change = sites_record_look_locked(site, GATE_MISS, 0);
    pthread_mutex_unlock(&site->lock);
    cache_site_gate_changed(site, change);
}

int recorded_take(struct capture *cap)
{
    const char *refusal = begin_refusal(cap);
    if (refusal) {
        ctab_set_reason(cap, refusal);
        return 0;
    }
    struct graph_rec *graphs[MATCH_MAX_CANDIDATES];
    unsigned long epoch = cache_graph_edit_epoch();
    int n = cache_take_candidates(cap->site, epoch, stream_guess(cap), cap->origin.key, graphs,
                                  MATCH_MAX_CANDIDATES);
    /* None released, as where the program keeps what it captures: a copy
     * of a graph it keeps (cache_graph_pin_held says which, or why none). */
    const char *no_copy = NULL;
    if (n == 0) {
        /* Several kinds kept: compared call by call, the one chosen copied
         * then; one kind: copied at once, as before any call. */
        n = cache_graph_pin_held_kinds(cap->site, epoch, graphs, MATCH_MAX_CANDIDATES, &no_copy);
        if (n > 1) {
            for (int i = 0; i < n; i++)
                self_record_flush(graphs[i]->recording);   /* nothing left stale while compared */
            cap->held_match = 1;
            cap->held_epoch = epoch;
        } else if (n == 1 && !(graphs[0] = graph_copy_pinned(graphs[0], epoch, 1, &no_copy))) {
            n = 0;
        }
    }
    cap->candidates = n;
    if (n == 0) {
        ctab_set_reason(cap, no_copy ? no_copy : "no released graph recap recorded at this site");
        record_miss(cap);
        return 0;
    }
    if (!cap->self)
        cap->self = calloc(1, sizeof *cap->self);
    if (n > 1 && !cap->match)
        cap->match = malloc(sizeof *cap->match);
    if (!cap->self || (n > 1 && !cap->match)) {
        give_back(cap, graphs, n, 0);
        cap->held_match = 0;
        ctab_set_reason(cap, "recap ran out of memory");
        return 0;
    }
    /* The stream's usual graph (listed first) is bound to at once, as if
     * it were the only one kept: its calls cost what a site of one graph
     * costs. The others wait, to be compared only if it differs
     * (rematch). Where the guess has missed of late, all are compared
     * from the begin, the guess leading; so are graphs the program keeps,
     * which are never written into (the one chosen is copied). */
    cap->guess_open = n > 1 && !cap->held_match;
    if (n > 1 && (cap->held_match || !site_trusts_guess(cap->site))) {
        match_start(cap->match, graphs, n, cap->origin.key);
        cap->matching = 1;
    } else {
        cap->target = graphs[0];
        self_record_start(cap->self, graphs[0]->recording, cap->origin.key);
        if (n > 1) {
            match_start(cap->match, graphs + 1, n - 1, cap->origin.key);
            cap->reserve = 1;
        }
    }
    return 1;
}

void recorded_untake(struct capture *cap)
{
    cap->guess_open = 0;
    if (cap->matching) {
        stop_matching(cap);
    } else {
        drop_reserve(cap);
        self_record_stop(cap->self);
        cache_graph_give_back(cap->target, 0);
        cap->target = NULL;
    }
}

cuuint64_t recorded_capture_id(void)
{
    return __atomic_fetch_add(&next_recap_capture_id, 1, __ATOMIC_RELAXED);
}

/* --- choosing among the candidates -------------------------------------------------- */

/* The capture stops choosing: candidate `which` becomes its graph, and the
 * calls so far (its journal) are written into it as if it had been the
 * only candidate from the begin; the others go back to the site. Returns
 * 0; or -1 with `why` when the driver refused a write, and the capture
 * must switch: the refused call is then the journal's last one, and
 * removed from it (*refused_last) when it is the call being made. */
static int record_journal_into(struct capture *cap, struct graph_rec *g, int *refused_last,
                               char *why, size_t len);

/* A copy of the program's graph chosen (pinned), to record into; NULL with
 * `why` if recap could not make one, and the capture must switch. */
static struct graph_rec *copy_chosen(struct capture *cap, struct graph_rec *held, char *why,
                                     size_t len)
{
    const char *no_copy = NULL;
    struct graph_rec *g = graph_copy_pinned(held, cap->held_epoch, 1, &no_copy);
    if (!g)
        snprintf(why, len, "%s", no_copy ? no_copy : "recap could not copy the graph kept");
    return g;
}

static int bind_to(struct capture *cap, int which, int *refused_last, char *why, size_t len)
{
    struct graph_rec *others[MATCH_MAX_CANDIDATES];
    int nothers;
    tell_guess(cap, which == 0);      /* matching from the begin: 0 was the guess */
    struct graph_rec *g = match_finish(cap->match, which, others, &nothers);
    give_back(cap, others, nothers, 0);
    cap->matching = 0;
    if (cap->held_match) {
        /* The program's graph chosen: a copy of it is what the capture
         * records into (shim/repeat/graph_copy.h). */
        cap->held_match = 0;
        if (!(g = copy_chosen(cap, g, why, len))) {
            *refused_last = 0;
            return -1;
        }
    }
    return record_journal_into(cap, g, refused_last, why, len);
}

/* Graphs the program keeps still compared when a call needs a node now
 * (a new memset or copy address, which the driver checks only there): a
 * copy of the leader is bound to, and the others stay pinned in reserve,
 * compared again (rematch) if that copy differs later. Binding outright
 * left a capture that went on like another kept graph nothing to fall
 * back on but the driver. Returns as bind_to. */
static int bind_held_keeping_reserve(struct capture *cap, int *refused_last, char *why,
                                     size_t len)
{
    struct graph_rec *leader = match_detach(cap->match, match_leader(cap->match));
    struct graph_rec *g = copy_chosen(cap, leader, why, len);
    cap->matching = 0;
    cap->reserve = cap->match->live > 0;
    if (!cap->reserve)
        cap->held_match = 0;
    if (!g) {
        drop_reserve(cap);
        *refused_last = 0;
        return -1;
    }
    if (record_journal_into(cap, g, refused_last, why, len) != 0) {
        drop_reserve(cap);
        return -1;
    }
    return 0;
}

/* The calls so far (the journal) written into `g`, the capture's graph
 * from now on, as if it had been the only candidate from the begin. */
static int record_journal_into(struct capture *cap, struct graph_rec *g, int *refused_last,
                               char *why, size_t len)
{
    cap->target = g;
    self_record_start(cap->self, g->recording, cap->origin.key);
    struct journal *j = &cap->journal;
    for (size_t i = 0; i < j->nops; i++) {
        struct changed_node changed;
        enum self_verdict v = self_record_call(cap->self, j->ops[i].id, &j->ops[i].args, &changed,
                                               why, len);
        if (v == SELF_SWITCH || v == SELF_REFUSED) {
            /* Only a memset or copy write can fail, and such a change
             * makes the capture bind at its very call: the last. The
             * journal stays the calls to replay; the graph goes back. */
            *refused_last = i + 1 == j->nops;
            if (*refused_last)
                j->nops = i;
            self_record_rename_rest(cap->self);
            self_record_stop(cap->self);
            cache_graph_give_back(g, i > 0);
            cap->target = NULL;
            return -1;
        }
        if (v == SELF_CHANGED)
            note_change(cap, changed);
    }
    /* The recording holds every call now (and the prefix a switch needs). */
    journal_free(j);
    journal_init(j);
    return 0;
}

/* The calls of a bound capture so far, as its graph's recording now holds
 * them, become its journal; the recording, renamed to this capture's
 * streams and events throughout, is no longer compared. Returns how many. */
static size_t journal_from_recording(struct capture *cap)
{
    struct journal *rec = cap->target->recording;
    size_t made = cap->self->next;
    self_record_rename_rest(cap->self);
    self_record_stop(cap->self);
    journal_free(&cap->journal);
    journal_init(&cap->journal);
    for (size_t i = 0; i < made; i++)
        journal_append(&cap->journal, rec->ops[i].id, &rec->ops[i].args);
    return made;
}

/* The graph bound at the begin (the stream's usual one) differs from this
 * capture, at a call or at its end: its calls so far become the journal,
 * it goes back to the site (written into: its version moves on), and the
 * candidates held in reserve are compared with the journal. Returns the
 * live count: 0 when none matches, and the capture must switch. */
static int rematch(struct capture *cap, char *why, size_t len)
{
    tell_guess(cap, 0);
    size_t made = journal_from_recording(cap);
    cache_graph_give_back(cap->target, made > 0);
    cap->target = NULL;
    ctab_forget_changes(cap);    /* that graph's nodes; binding notes them anew */
    cap->reserve = 0;
    cap->matching = 1;
    struct graph_rec *dropped[MATCH_MAX_CANDIDATES];
    int ndropped;
    int live = match_resume(cap->match, &cap->journal, dropped, &ndropped, why, len);
    give_back(cap, dropped, ndropped, 0);
    if (live == 0)
        stop_matching(cap);
    return live;
}

int recorded_choose_graph(struct capture *cap, char *why, size_t len)
{
    drop_reserve(cap);
    if (!cap->matching)
        return 0;
    int refused_last = 0;
    return bind_to(cap, match_leader(cap->match), &refused_last, why, len) == 0 ? 0 : -1;
}

/* --- calls ----------------------------------------------------------------------- */

/* A call while several graphs still match: as recorded_call. */
static int matching_op(struct capture *cap, enum drv_id id, union drv_args *a, char *why)
{
    struct graph_rec *dropped[MATCH_MAX_CANDIDATES];
    int ndropped, needs_node;
    int live = match_call(cap->match, &cap->journal, id, a, dropped, &ndropped, &needs_node, why,
                          RECORDED_WHY_LEN);
    give_back(cap, dropped, ndropped, 0);
    if (live == 0) {
        /* No kept graph is of this kind: a miss, as if none were kept. */
        cap->matched_none = 1;
        return RECORDED_SWITCH_REDO;
    }
    journal_append(&cap->journal, id, a);
    if (ctab_note_membership(cap, id, a))
        ctab_journal_outgrown(cap);
    if (live > 1 && !needs_node)
        return CUDA_SUCCESS;
    int refused_last = 0;
    int bound = live > 1 && cap->held_match
                    ? bind_held_keeping_reserve(cap, &refused_last, why, RECORDED_WHY_LEN)
                    : bind_to(cap, match_leader(cap->match), &refused_last, why, RECORDED_WHY_LEN);
    if (bound == 0)
        return CUDA_SUCCESS;
    return refused_last ? RECORDED_SWITCH_REDO : RECORDED_SWITCH_MADE;
}

int recorded_call(struct capture *cap, enum drv_id id, union drv_args *a,
                  char why[RECORDED_WHY_LEN])
{
    if (cap->invalidated)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (cap->matching)
        return matching_op(cap, id, a, why);

    struct changed_node changed;
    enum self_verdict v = self_record_call(cap->self, id, a, &changed, why, RECORDED_WHY_LEN);
    if (v == SELF_REFUSED)
        return RECORDED_SWITCH_REDO;    /* the driver's answer to this call is wanted: a failure */
    if (v == SELF_SWITCH) {
        if (cap->reserve && !cap->graph_lent && rematch(cap, why, RECORDED_WHY_LEN) > 0)
            return matching_op(cap, id, a, why);
        /* No kept graph is of this capture's kind: a miss, not a failure. */
        cap->matched_none = 1;
        return RECORDED_SWITCH_REDO;
    }
    if (v == SELF_CHANGED)
        note_change(cap, changed);
    if (ctab_note_membership(cap, id, a))
        ctab_journal_outgrown(cap);
    return CUDA_SUCCESS;
}

/* --- lending the graph and switching ------------------------------------------------- */

void recorded_lend_graph(struct capture *cap)
{
    cap->lent_graph = graph_rec_graph(cap->target);
    cache_graph_forget(cap->target);
    cap->target = NULL;
}

/* The recording of the graph this capture recorded into (stopped) becomes
 * the capture's own journal. */
static void adopt_recording(struct capture *cap)
{
    struct journal *rec = cap->target->recording;
    journal_stale_lock();
    journal_unlist_stale(rec);
    journal_stale_unlock();
    cap->target->recording = NULL;
    journal_free(&cap->journal);
    cap->journal = *rec;
    free(rec);
    cap->journal.stale_ops = 0;
    cap->journal.in_use = 0;
}

/* Destroys the nodes of `graph` that none of the recording's first
 * `prefix` calls made: what is left is what a driver capture would hold
 * after those calls. Returns the first failing call's result. */
static CUresult trim_to_prefix(CUgraph graph, const struct journal *rec, size_t prefix)
{
    size_t n = 0, nkept = 0;
    CUresult r = DRV_REAL(cuGraphGetNodes)(graph, NULL, &n);
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    CUgraphNode *nodes = malloc(n * sizeof *nodes), *kept = malloc(prefix * sizeof *kept + 1);
    if (!nodes || !kept) {
        free(nodes);
        free(kept);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < prefix; i++)
        if (rec->ops[i].creates_node && rec->ops[i].node)
            kept[nkept++] = rec->ops[i].node;
    r = DRV_REAL(cuGraphGetNodes)(graph, nodes, &n);
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        int keep = 0;
        for (size_t k = 0; k < nkept && !keep; k++)
            keep = kept[k] == nodes[i];
        if (!keep)
            r = DRV_REAL(cuGraphDestroyNode)(nodes[i]);
    }
    free(nodes);
    free(kept);
    return r;
}

/* A switch of a capture whose graph the program holds: the cached graph,
 * cut back to the nodes of the calls made so far (trim_to_prefix), is
 * what a driver capture would hold now, so the driver capture resumes in
 * it - cuStreamBeginCaptureToGraph with the origin stream's dependencies -
 * instead of replaying every call into it, and every node handle the
 * program was given stays valid. Only on one stream with no event (others
 * would have to join the driver's capture too), and from a thread that
 * may switch the capture. Returns how it resumed (whole: every call of the
 * recording was made, as where a program asks for the graph at the end,
 * then adds to it), or RECORDED_REPLAY when the switch must replay. */
static enum recorded_switch_how resume_in_graph(struct capture *cap)
{
    struct self_record *s = cap->self;
    char why[160];
    if (s->nstreams != 1 || s->nevents != 0 || !ctab_may_end_here(cap) ||
        drv_real_fn[DRV_cuStreamBeginCaptureToGraph] == NULL)
        return RECORDED_REPLAY;
    size_t n = 0;
    const CUgraphNode *at = self_record_deps(s, cap->origin.key, &n);
    CUgraphNode deps[SELF_RECORD_MAX_DEPS];
    if (!at || n > SELF_RECORD_MAX_DEPS)
        return RECORDED_REPLAY;
    memcpy(deps, at, n * sizeof deps[0]);

    struct graph_rec *target = cap->target;
    struct journal *rec = target->recording;
    int complete = self_record_complete(s, why, sizeof why);
    size_t made = s->next;
    self_record_stop(s);
    /* The nodes take the arguments recap deferred: the program and the
     * driver may read them now. */
    const char *call = "a graph node setter";
    CUresult r = self_record_flush(rec);
    if (r == CUDA_SUCCESS && !complete) {
        call = "cuGraphDestroyNode";
        r = trim_to_prefix(graph_rec_graph(target), rec, made);
    }
    if (r == CUDA_SUCCESS) {
        call = "cuStreamBeginCaptureToGraph";
        r = DRV_REAL(cuStreamBeginCaptureToGraph)(cap->origin.real, graph_rec_graph(target),
                                                  n ? deps : NULL, NULL, n, cap->mode);
    }
    if (r != CUDA_SUCCESS) {
        /* The switch that follows empties the graph and replays. */
        event_own_call_failed(cap->site, call, r, "the capture's calls are replayed into its graph");
        self_record_start(s, rec, cap->origin.key);
        s->next = made;
        return RECORDED_REPLAY;
    }
    /* From here it is a driver capture being learned: the calls made so
     * far, whose nodes are the graph's, become its journal; the graph is
     * new to the cache, as a fresh capture's would be. */
    adopt_recording(cap);
    cap->journal.nops = made;
    /* The graph is the program's now (a query lent it), the driver's
     * capture runs in it: a failed end must let it go (capture.c). */
    cap->lent_graph = graph_rec_graph(target);
    cache_graph_forget(target);
    cap->target = NULL;
    return complete ? RECORDED_RESUMED_WHOLE : RECORDED_RESUMED;
}

enum recorded_switch_how recorded_switch(struct capture *cap)
{
    drop_reserve(cap);
    if (cap->matching) {
        /* The journal holds every call; the candidates go back untouched. */
        stop_matching(cap);
    } else if (cap->target) {
        enum recorded_switch_how how = cap->graph_lent ? resume_in_graph(cap) : RECORDED_REPLAY;
        if (how != RECORDED_REPLAY)
            return how;
        /* The calls so far, as the recording now holds them, are the
         * journal to replay; the graph goes back to the site (it holds
         * them too: an executable graph of an older version of it must
         * then be updated as a whole), or to the program that was lent it. */
        size_t made = journal_from_recording(cap);
        if (cap->graph_lent) {
            recorded_lend_graph(cap);
        } else {
            cache_graph_give_back(cap->target, made > 0);
            cap->target = NULL;
        }
    }
    return RECORDED_REPLAY;
}

/* --- end -------------------------------------------------------------------------- */

int recorded_end_unmatched(struct capture *cap, char *why, size_t len)
{
    if (cap->reserve) {
        /* Bound to the stream's usual graph, which the capture did not
         * make whole: another kept graph may be. */
        int whole = self_record_complete(cap->self, why, len);
        if (whole || cap->graph_lent) {
            tell_guess(cap, whole);
            drop_reserve(cap);
        } else if (rematch(cap, why, len) == 0) {
            cap->matched_none = 1;
            return 1;
        }
    }
    if (cap->matching) {
        struct graph_rec *dropped[MATCH_MAX_CANDIDATES];
        int ndropped;
        int which = match_choose_whole(cap->match, &cap->journal, dropped, &ndropped);
        give_back(cap, dropped, ndropped, 0);
        int refused_last = 0;
        if (which < 0) {
            cap->matched_none = 1;
            snprintf(why, len, "the capture ended before it made every call of any of the "
                               "%d graphs kept at this site", cap->candidates);
            return 1;
        }
        if (bind_to(cap, which, &refused_last, why, len) != 0)
            return 1;
    }
    if (!self_record_complete(cap->self, why, len)) {
        cap->matched_none = 1;
        return 1;
    }
    return 0;
}

long recorded_end_finish(struct capture *cap, CUgraph *phGraph)
{
    if (!cap->invalidated && cap->target)
        self_record_rename_rest(cap->self);   /* this capture's streams throughout */
    self_record_stop(cap->self);
    if (cap->invalidated) {
        drop_reserve(cap);
        if (cap->matching)
            stop_matching(cap);
        if (cap->target)
            cache_graph_discard(cap->target);
        cap->target = NULL;
        return -1;
    }
    cap->target->last_stream = cap->origin.key;
    *phGraph = graph_rec_graph(cap->target);
    return cap->target->nodes;
}
