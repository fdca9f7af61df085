/*
 * cache_graphs.c - what the cache does particularly with graphs: tracking
 * a captured graph, taking released ones for a capture (by signature, or
 * every candidate a recorded capture may repeat), giving them back, the
 * graphs the program keeps (held, for copies), the epoch of graph edits
 * that outdates recordings, and whether a destroyed graph is worth keeping.
 *
 * Built on cache.c's shared lifecycle (shim/state/cache_internal.h), which never
 * calls back into this file.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/state/cache_internal.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/runtime.h"
#include "shim/state/sites.h"
#include "shim/base/spare.h"
#include "shim/base/step_time.h"
#include "shim/state/user_objects.h"

/* --- graphs ---------------------------------------------------------------------- */

struct graph_rec *cache_graph_track(CUgraph graph, struct site *site, uint64_t shape, long nodes,
                                    int typed)
{
    struct graph_rec *rec = spare_take(&graph_rec_spare);
    if (rec)
        memset(rec, 0, sizeof *rec);
    else
        rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    rec->entry.handle = graph;
    rec->entry.site = site;
    rec->entry.bytes = CACHE_GRAPH_BYTES + CACHE_GRAPH_NODE_BYTES * (unsigned long long)(nodes > 0 ? nodes : 0);
    rec->shape = shape;
    rec->nodes = nodes;
    rec->shape_typed = typed;
    rec->shape_epoch = cache_graph_edit_epoch();
    return cache_entry_track(CACHE_GRAPHS, &rec->entry) == 0 ? rec : NULL;
}

struct graph_rec *cache_graph_held(CUgraph graph)
{
    return (struct graph_rec *)cache_entry_held(CACHE_GRAPHS, graph);
}

static int graph_has_signature(const struct cache_entry *e, const void *want)
{
    return ((const struct graph_rec *)e)->signature == *(const uint64_t *)want ? 3 : 0;
}

struct graph_rec *cache_take_graph(struct site *site, uint64_t signature)
{
    /* Newest first: the most recently released graph of the signature is
     * the one whose parameters are likeliest to match. */
    return (struct graph_rec *)cache_entry_take(CACHE_GRAPHS, site, graph_has_signature, &signature);
}

static void tell_recordings_outdated(struct site *site, int outdated);

int cache_take_candidates(struct site *site, unsigned long epoch, uint64_t preferred,
                          const void *stream_key, struct graph_rec **out, int max)
{
    int n = 0;
    pthread_mutex_lock(&cache_lock);
    /* Per signature the graph this stream used last, else the newest:
     * streams (threads) that capture alike keep to graphs of their own, so
     * each one's executable graph is one version behind its graph and
     * takes only the changed nodes. */
    int outdated = 0;
    for (struct cache_entry *e = site->released_newest[CACHE_GRAPHS]; e; e = e->site_older) {
        struct graph_rec *g = (struct graph_rec *)e;
        outdated += g->recording && g->recording_epoch != epoch;
        if (!g->recording || g->recording_epoch != epoch || !g->signature)
            continue;
        int i = 0;
        while (i < n && out[i]->signature != g->signature)
            i++;
        if (i == n) {
            if (n == max)
                continue;
            out[n++] = g;
        } else if (g->last_stream == stream_key && out[i]->last_stream != stream_key) {
            out[i] = g;
        }
    }
    for (int i = 0; i < n; i++) {
        cache_take_locked(&out[i]->entry);
        if (out[i]->signature == preferred && i > 0) {
            struct graph_rec *first = out[0];
            out[0] = out[i];
            out[i] = first;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (outdated && n == 0)
        tell_recordings_outdated(site, outdated);
    return n;
}

void cache_graph_give_back(struct graph_rec *rec, int rewritten)
{
    /* A copy that a capture left part way goes: the next capture copies
     * the program's newest graph afresh. With copies on, PyTorch's
     * fused-optimizer graph test computed wrong parameters on the H200
     * from a capture recorded into such a copy (recorded right up to the
     * odd capture that left it, wrong right after); the stand-in's same
     * sequence is right, so the cause is not found, and the path is not
     * taken. */
    if (rewritten && rec->copied) {
        cache_graph_discard(rec);
        return;
    }
    if (rewritten) {
        rec->version++;
        rec->changes_known = 0;
        rec->nchanged = 0;
    }
    cache_entry_give_back(CACHE_GRAPHS, &rec->entry);
}

void cache_graph_hand_out(struct graph_rec *rec)
{
    cache_entry_hand_out(&rec->entry);
}

/* --- graphs the program keeps ------------------------------------------------------- */

/* Once per site, and once for the process when a second site does it:
 * the program no longer destroys its graphs, so nothing is released for
 * recap to record into, and where a user wonders why, the log says. */
static void tell_keeping(struct site *site, int copying)
{
    static int sites_keeping;
    if (copying)
        event_warning(site, "the program keeps the graphs it captures here (two alike kept in a "
                            "row, neither destroyed): recap records each repeat capture into a "
                            "copy of the newest, whose executable graph takes a whole update");
    else
        event_warning(site, "the program keeps the graphs it captures here (two alike kept in a "
                            "row, neither destroyed): nothing is released for recap to record "
                            "into, so these captures stay the driver's (RECAP_COPY_HELD=on "
                            "records into copies; driver 580 then breaks the graphs copied for "
                            "the program's own later use)");
    if (__atomic_add_fetch(&sites_keeping, 1, __ATOMIC_RELAXED) == 2)
        event_warning(NULL, "the program keeps the graphs it captures at more than one site: "
                            "recap records no repeat capture there%s (PyTorch keeps every graph "
                            "for the rest of the process once CUDAGraph.enable_debug_mode() was "
                            "called)", copying ? " but into copies" : "");
}

/* The site's k-th newest held graph (0: the newest), if the program still
 * holds it. */
static struct graph_rec *held_recent_locked(struct site *site, unsigned k)
{
    if (k >= SITES_HELD_RECENT || k >= site->held_next)
        return NULL;
    const struct site_held_ref *ref = &site->held_recent[(site->held_next - 1 - k) % SITES_HELD_RECENT];
    struct graph_rec *g = hmap_get(&kinds[CACHE_GRAPHS].by_handle, ref->handle);
    if (!g || g->entry.state != CACHE_HELD || g->serial != ref->serial)
        return NULL;
    return g;
}

static struct graph_rec *held_newest_locked(struct site *site)
{
    return held_recent_locked(site, 0);
}

/* The newest held graph of this signature other than the newest of all,
 * where the program keeps two or more: graphs of kinds that take turns. */
static struct graph_rec *held_older_of_locked(struct site *site, uint64_t signature)
{
    for (unsigned k = 1; k < SITES_HELD_RECENT; k++) {
        struct graph_rec *g = held_recent_locked(site, k);
        if (g && g->signature == signature)
            return g;
    }
    return NULL;
}

/* Where the kinds of the last graphs kept take turns with a period of 2
 * or more captures (A, B, A, B, as an optimizer's per-tensor and foreach
 * steps alternate), the kept graph whose kind comes next: the one
 * `period` captures before the next. NULL where they repeat one
 * kind or change for good, where the newest is the better guess. */
static struct graph_rec *held_next_in_turn_locked(struct site *site)
{
    uint64_t sig[SITES_HELD_TURNS];
    unsigned n = 0;
    while (n < SITES_HELD_TURNS) {
        struct graph_rec *g = held_recent_locked(site, n);
        if (!g || !g->signature)
            break;
        sig[n++] = g->signature;
    }
    /* Seen once round and one more (A, B, A): a site's gate closes after
     * a few captures that found nothing to copy, so waiting for two whole
     * rounds would come too late. */
    for (unsigned period = 2; period < n; period++) {
        int turns = sig[0] != sig[1];
        for (unsigned k = 0; turns && k < period && k + period < n; k++)
            turns = sig[k] == sig[k + period];
        if (turns)
            return held_recent_locked(site, period - 1);
    }
    return NULL;
}

void cache_graph_note_held(struct graph_rec *rec)
{
    struct site *site = rec->entry.site;
    if (!rec->signature)
        return;
    pthread_mutex_lock(&cache_lock);
    struct graph_rec *before = held_newest_locked(site);
    int alike = before && before != rec && before->signature == rec->signature;
    site->held_alike = alike ? site->held_alike + 1 : 0;
    if (before != rec) {
        struct site_held_ref *ref = &site->held_recent[site->held_next++ % SITES_HELD_RECENT];
        ref->handle = rec->entry.handle;
        ref->serial = rec->serial;
    }
    /* Without copies the site stops recording here: said once. */
    int tell = alike && !runtime_settings.copy_held && !site->held_told;
    site->held_told |= tell;
    pthread_mutex_unlock(&cache_lock);
    if (tell)
        tell_keeping(site, 0);
}

/* Why a held graph may not be copied now (NULL: it may): edited since its
 * capture, being copied already, not of `signature` (0: any), or, where
 * `need_recording`, without a recording valid as of `epoch`. */
static const char *held_not_copyable_locked(const struct graph_rec *g, unsigned long epoch,
                                            uint64_t signature, int need_recording)
{
    if (g->edited || g->shape_epoch != epoch)
        return "the graph the program keeps here was edited since its capture: not copied";
    if (g->copying)
        return "the graph the program keeps here is being copied for another capture";
    if (signature && g->signature != signature)
        return "the newest graph the program keeps here is of another kind than the one expected";
    if (need_recording && (!g->recording || g->recording_epoch != epoch))
        return "the newest graph the program keeps here has no recording recap can record against";
    return NULL;
}

struct graph_rec *cache_graph_pin_held(struct site *site, unsigned long epoch, uint64_t signature,
                                       uint64_t prefer, int need_recording, const char **why)
{
    *why = NULL;
    pthread_mutex_lock(&cache_lock);
    struct graph_rec *g = held_newest_locked(site);
    /* The kind asked for (the recapture API's guess), or where the kinds
     * kept take turns the one due next (an optimizer's variants): the
     * newest of that kind, not the newest of all. Found among older ones,
     * it also shows the program keeps what it captures. */
    struct graph_rec *preferred = NULL;
    if (g && prefer && g->signature != prefer)
        preferred = held_older_of_locked(site, prefer);
    else if (g && !prefer)
        preferred = held_next_in_turn_locked(site);
    int keeps = site->held_alike >= 1 || site->held_copies > 0 || preferred;
    if (preferred)
        g = preferred;
    /* Two alike kept in a row (or the guessed kind kept among others):
     * the program keeps what it captures here, and a copy is what the
     * next capture would make anyway. Once the site has been copied from,
     * the newest is copied even where it is the first of its kind: a
     * program that keeps its graphs and moves to other kernels (an
     * optimizer's variants, one after another) repeats the new kind from
     * its second capture on, as where it destroys them. A copy of the
     * wrong kind costs a clone and falls back, counted by the site's gate
     * like any miss. */
    if (!g)
        *why = NULL;
    else if (!runtime_settings.copy_held)
        *why = "the program keeps its graphs here and copies are off (RECAP_COPY_HELD=off)";
    else if (site->cache_closed)
        *why = NULL;
    else if (!keeps)
        *why = "the program keeps its graphs here, but not yet two alike in a row to copy from";
    else if (!(*why = held_not_copyable_locked(g, epoch, signature, need_recording)))
        g->copying = 1;
    if (*why)
        g = NULL;
    pthread_mutex_unlock(&cache_lock);
    return g;
}

int cache_graph_pin_held_kinds(struct site *site, unsigned long epoch, struct graph_rec **out,
                               int max, const char **why)
{
    /* The one a single copy would take leads (its rule says whether the
     * program keeps its graphs at all); the newest of each other kind
     * among the last kept follow. Another thread may pin or unpin between
     * the two: each graph's own copying flag decides. */
    struct graph_rec *lead = cache_graph_pin_held(site, epoch, 0, 0, 1, why);
    if (!lead || max < 1)
        return 0;
    int n = 0;
    out[n++] = lead;
    pthread_mutex_lock(&cache_lock);
    for (unsigned k = 0; k < SITES_HELD_RECENT && n < max; k++) {
        struct graph_rec *g = held_recent_locked(site, k);
        if (!g || !g->signature || held_not_copyable_locked(g, epoch, 0, 1))
            continue;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++)
            seen = out[i]->signature == g->signature;
        if (seen)
            continue;
        g->copying = 1;
        out[n++] = g;
    }
    pthread_mutex_unlock(&cache_lock);
    return n;
}

struct graph_rec *cache_graph_unpin_held(struct graph_rec *held, CUgraph copy,
                                         struct journal *recording, unsigned long epoch)
{
    struct site *site = held->entry.site;
    struct graph_rec *rec = NULL;
    int first_copy = 0;
    if (copy)
        rec = cache_graph_track(copy, site, held->shape, held->nodes, held->shape_typed);
    pthread_mutex_lock(&cache_lock);
    if (rec) {
        rec->entry.state = CACHE_TAKEN;
        rec->signature = held->signature;
        rec->last_stream = held->last_stream;
        rec->shape_epoch = held->shape_epoch;
        rec->version = held->version;
        rec->copied = 1;
        first_copy = ++site->held_copies == 1;
    }
    held->copying = 0;
    int destroy_now = held->destroy_deferred;
    held->destroy_deferred = 0;
    pthread_mutex_unlock(&cache_lock);
    if (rec) {
        cache_graph_set_recording(rec, recording, epoch);
    } else {
        if (recording) {
            journal_free(recording);
            free(recording);
        }
        if (copy)
            DRV_REAL(cuGraphDestroy)(copy);
    }
    if (destroy_now)
        cache_on_graph_destroy(DRV_cuGraphDestroy, graph_rec_graph(held));
    if (first_copy)
        tell_keeping(site, 1);
    return rec;
}

void cache_graph_discard(struct graph_rec *rec)
{
    cache_entry_discard(CACHE_GRAPHS, &rec->entry, rec->recapture_unfinished);
}

void cache_graph_forget(struct graph_rec *rec)
{
    cache_drop_execs_of(rec);
    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&kinds[CACHE_GRAPHS].by_handle, rec->entry.handle) == &rec->entry)
        cache_map_del(&kinds[CACHE_GRAPHS], rec->entry.handle);
    pthread_mutex_unlock(&cache_lock);
    cache_entry_free(&rec->entry);
}

void cache_graph_swap_changes(struct graph_rec *rec, struct changed_node **changed, size_t n,
                              size_t *capacity, int known)
{
    struct changed_node *old = rec->changed;
    size_t old_capacity = rec->changed_capacity;
    rec->changed = *changed;
    rec->changed_capacity = *capacity;
    rec->nchanged = n;
    rec->changes_known = known;
    *changed = old;
    *capacity = old_capacity;
}

/* A destroyed graph is worth keeping only where it will be recaptured
 * into (told under the lock), and only unchanged since its capture (asked
 * of the driver): a graph the program edited would just make the next
 * recapture fail. */
static enum keep_answer graph_may_be_kept(const struct cache_entry *e)
{
    const struct graph_rec *rec = (const struct graph_rec *)e;
    const struct site *site = e->site;
    enum recap_mode m = site->policy.mode;
    int recordable = drv_caps.recapture_begin || rec->recording;
    /* A closed site keeps nothing: no driver question either. */
    if ((m != RECAP_MODE_AUTO && m != RECAP_MODE_RECAPTURE) || !recordable || rec->edited ||
        site->cache_closed || __atomic_load_n(&site->no_recapture, __ATOMIC_RELAXED))
        return KEEP_NO;
    return KEEP_ASK;
}

static int graph_unchanged(const struct cache_entry *e)
{
    const struct graph_rec *rec = (const struct graph_rec *)e;
    /* A recording no graph edit has outdated describes the graph as it is
     * (every edit moves the epoch): no need to ask the driver, whose node
     * count walks the graph (6 us at 1000 nodes on the H200). */
    if (rec->recording && rec->recording_epoch == cache_graph_edit_epoch())
        return 1;
    size_t n = 0;
    CUresult r = DRV_REAL(cuGraphGetNodes)(graph_rec_graph(rec), NULL, &n);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(e->site, "cuGraphGetNodes", r, "the released graph is not kept");
        return 0;
    }
    return (long)n == rec->nodes;
}

static CUresult graph_destroy_real(const void *handle)
{
    return DRV_REAL(cuGraphDestroy)((CUgraph)handle);
}

static enum keep_answer never_keep(const struct cache_entry *e)
{
    (void)e;
    return KEEP_NO;
}

static unsigned long graph_edit_epoch;
static int last_graph_edit = -1;     /* enum drv_id of the newest edit, for the log */

void cache_note_graph_edit(enum drv_id id)
{
    __atomic_store_n(&last_graph_edit, (int)id, __ATOMIC_RELAXED);
    __atomic_add_fetch(&graph_edit_epoch, 1, __ATOMIC_RELAXED);
}

/* A capture found recordings that a graph edit outdated: that edit stopped
 * recording wherever recap kept one, at every site, which the log must
 * say (the first time, then at each power of two). */
static void tell_recordings_outdated(struct site *site, int outdated)
{
    static unsigned long times;
    unsigned long n = __atomic_add_fetch(&times, 1, __ATOMIC_RELAXED);
    if (n & (n - 1))
        return;
    int id = __atomic_load_n(&last_graph_edit, __ATOMIC_RELAXED);
    event_warning(site, "the program edited a graph (%s, the newest edit): every recording recap "
                        "kept before it, at every site, no longer describes its graph; %d kept "
                        "here were passed over, and captures learn anew (seen %lu time(s) in this "
                        "process)", id >= 0 ? drv_table[id].symbol : "an edit", outdated, n);
}

unsigned long cache_graph_edit_epoch(void)
{
    return __atomic_load_n(&graph_edit_epoch, __ATOMIC_RELAXED);
}

static const struct keep_rule graph_keep_rule = { graph_may_be_kept, graph_unchanged, 1 };
/* Its user objects go with the program's destroy: recap neither keeps it
 * nor lets it live on for its executable graphs. */
static const struct keep_rule graph_with_user_objects_rule = { never_keep, NULL, 0 };

CUresult cache_on_graph_destroy(enum drv_id id, CUgraph graph)
{
    (void)id;
    if (runtime_passthrough || !graph)
        return DRV_REAL(cuGraphDestroy)(graph);
    step_forget_handle(graph);
    /* A recapture releases a graph's user objects only at its begin:
     * keeping such a graph would hold them past the program's destroy. */
    int has_user_objects = uobj_graph_has(graph);
    CUresult r = cache_entry_on_destroy(CACHE_GRAPHS, graph,
                                  has_user_objects ? &graph_with_user_objects_rule : &graph_keep_rule,
                                  graph_destroy_real);
    if (has_user_objects)
        uobj_forget_graph(graph);
    return r;
}
