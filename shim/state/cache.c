/*
 * cache.c - records of graphs and executable graphs, and the released ones
 * recap keeps.
 *
 * Both kinds share one lifecycle, written once over struct cache_entry: a
 * handle map finds an entry by handle whatever its state, so that a second
 * destroy of a handle the program already destroyed is recognised (it
 * returns CUDA_ERROR_INVALID_VALUE, as the driver does for a handle it does
 * not know) and never destroys what recap keeps. A released entry sits on
 * two lists: its site's, of its kind, newest first, which a take scans (so
 * a look costs what that site keeps, not what all sites keep); and one
 * list of every released entry by release time, from which the budget
 * evicts the least recently used across all sites and kinds, and which OOM
 * empties. A site keeps at most its working set of each kind (the distinct
 * shapes of its recent captures), or max_graphs when the user set it.
 * What differs per kind - which released entry suits a request, whether a
 * destroyed one is worth keeping, how it is destroyed - is typed code: for
 * executable graphs at the end of this file, for graphs in cache_graphs.c,
 * which builds on the lifecycle here (shim/state/cache_internal.h) and is never
 * called from it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/state/cache_internal.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/handle_map.h"
#include "shim/base/runtime.h"
#include "shim/state/sites.h"
#include "shim/base/spare.h"
#include "shim/base/step_time.h"
#include "shim/state/user_objects.h"


/* cache_lock guards both kinds' maps, the released lists and counts, every
 * entry's state and the sites' fields marked "under cache_lock". */
pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
struct kind_state kinds[CACHE_KINDS] = {
    [CACHE_GRAPHS] = { .noun = "graph" },
    [CACHE_EXECS] = { .noun = "executable graph" },
};
static struct cache_entry *lru_oldest, *lru_newest;
static int released_total;
static unsigned long long released_bytes, released_bytes_peak;
static unsigned long long budget_bytes;   /* 0 until settled: then settings' default */
static int budget_settled;
static uint64_t next_graph_serial = 1;
/* Releases so far: the next one's released_order. */
static unsigned long long released_count;
/* A freed graph record kept for the next capture's (shim/base/spare.h): where
 * graphs are not kept, a loop tracks one and lets it go every iteration. */
void *graph_rec_spare;

/* --- the maps ---------------------------------------------------------------------- */

/* After a change of a kind's map, under cache_lock. */
static void map_changed(struct kind_state *ks)
{
    VALGRIND_HG_DISABLE_CHECKING(&ks->tracked, sizeof ks->tracked);   /* atomic */
    __atomic_store_n(&ks->tracked, ks->by_handle.len, __ATOMIC_RELEASE);
}

/* Whether a kind's map may hold anything; without cache_lock. */
int cache_map_may_hold(enum cache_kind k)
{
    return __atomic_load_n(&kinds[k].tracked, __ATOMIC_ACQUIRE) != 0;
}

void cache_map_del(struct kind_state *ks, const void *handle)
{
    hmap_del(&ks->by_handle, handle);
    map_changed(ks);
}

/* --- destroying what recap owns ------------------------------------------------ */

/* A graph an executable graph record keeps alive (source_owned). */
struct exec_source {
    CUgraph graph;
    uint64_t serial;
};
static int graph_kept_for_execs_locked(const struct graph_rec *g);
static int graph_kept_for_execs(const struct graph_rec *g);
static struct exec_source exec_owned_source(const struct exec_rec *e);
static void exec_source_let_go(struct site *site, struct exec_source owned);

void cache_entry_free(struct cache_entry *e)
{
    if (e->kind == CACHE_GRAPHS) {
        struct graph_rec *rec = (struct graph_rec *)e;
        free(rec->changed);
        cache_graph_set_recording(rec, NULL, 0);
        if (spare_give(&graph_rec_spare, e))
            return;
    }
    free(e);
}

/* Destroys the object of an entry recap owns and frees the entry; a failure
 * is logged, there is nothing else to do about it. References to user
 * objects recap took for an executable graph go back after its last launch
 * (at once with `wait`). A graph lives on for the executable graphs
 * instantiated from it unless it is `undefined` (a recapture into it
 * failed or was given up). Never under cache_lock. */
static void entry_destroy_waiting(struct cache_entry *e, int wait, int undefined)
{
    enum cache_kind k = e->kind;
    struct exec_source owned = { NULL, 0 };
    if (k == CACHE_EXECS) {
        uobj_exec_gone((CUgraphExec)e->handle, wait);
        owned = exec_owned_source((struct exec_rec *)e);
    }
    /* The recording first: while it is listed as stale, a flush on
     * another thread (self_record_flush_all) may write its nodes, which
     * must not be gone yet. Freeing it unlists it under the stale lock,
     * after any flush under way. */
    if (k == CACHE_GRAPHS)
        cache_graph_set_recording((struct graph_rec *)e, NULL, 0);
    if (k == CACHE_GRAPHS && !undefined && graph_kept_for_execs((struct graph_rec *)e)) {
        cache_entry_free(e);
        return;
    }
    CUresult r = k == CACHE_GRAPHS ? DRV_REAL(cuGraphDestroy)((CUgraph)e->handle)
                                   : DRV_REAL(cuGraphExecDestroy)((CUgraphExec)e->handle);
    if (r != CUDA_SUCCESS)
        event_release_failed(e->site, k == CACHE_GRAPHS ? "cuGraphDestroy" : "cuGraphExecDestroy",
                             r, "the object may stay allocated");
    exec_source_let_go(e->site, owned);
    cache_entry_free(e);
}

void cache_entry_destroy(struct cache_entry *e)
{
    entry_destroy_waiting(e, 0, 0);
}


void cache_destroy_evicted(struct evictions *ev)
{
    for (struct cache_entry *e = ev->first, *next; e; e = next) {
        next = e->lru_newer;
        cache_entry_destroy(e);
    }
    ev->first = NULL;
}

/* --- the budget ------------------------------------------------------------------ */

/* Caller holds cache_lock. */
static unsigned long long budget_now(void)
{
    if (!budget_settled)
        return settings_cache_budget(&runtime_settings, 0);
    return budget_bytes;
}

/* The first reading of the device's memory settles the budget. */
static void budget_settle(size_t device_total)
{
    pthread_mutex_lock(&cache_lock);
    if (!budget_settled && device_total) {
        budget_bytes = settings_cache_budget(&runtime_settings, device_total);
        budget_settled = 1;
    }
    pthread_mutex_unlock(&cache_lock);
}

static unsigned long long kept_memory_bytes;   /* under cache_lock */

int cache_reserve_kept_memory(size_t bytes)
{
    pthread_mutex_lock(&cache_lock);
    int fits = released_bytes + kept_memory_bytes + bytes <= budget_now();
    if (fits)
        kept_memory_bytes += bytes;
    pthread_mutex_unlock(&cache_lock);
    return fits;
}

void cache_charge_kept_memory(long long bytes)
{
    pthread_mutex_lock(&cache_lock);
    kept_memory_bytes += (unsigned long long)bytes;
    pthread_mutex_unlock(&cache_lock);
}

int cache_site_holds_any(const struct site *site)
{
    int holds = 0;
    pthread_mutex_lock(&cache_lock);
    for (int k = 0; k < CACHE_KINDS && !holds; k++) {
        const struct hmap *m = &kinds[k].by_handle;
        for (size_t i = 0; i < m->cap && !holds; i++) {
            const struct cache_entry *e = m->slots[i].value;
            holds = m->slots[i].key && e->site == site && e->state != CACHE_RELEASED;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return holds;
}

unsigned long long cache_budget_bytes(void)
{
    pthread_mutex_lock(&cache_lock);
    unsigned long long b = budget_now();
    pthread_mutex_unlock(&cache_lock);
    return b;
}

unsigned long long cache_peak_bytes(void)
{
    pthread_mutex_lock(&cache_lock);
    unsigned long long b = released_bytes_peak;
    pthread_mutex_unlock(&cache_lock);
    return b;
}

/* --- the shared lifecycle (under cache_lock unless said otherwise) ------------- */

static void unlink_released(struct cache_entry *e)
{
    struct site *site = e->site;
    enum cache_kind k = e->kind;
    if (e->site_older)
        e->site_older->site_newer = e->site_newer;
    else
        site->released_oldest[k] = e->site_newer;
    if (e->site_newer)
        e->site_newer->site_older = e->site_older;
    else
        site->released_newest[k] = e->site_older;
    if (e->lru_older)
        e->lru_older->lru_newer = e->lru_newer;
    else
        lru_oldest = e->lru_newer;
    if (e->lru_newer)
        e->lru_newer->lru_older = e->lru_older;
    else
        lru_newest = e->lru_older;
    e->site_older = e->site_newer = e->lru_older = e->lru_newer = NULL;
    released_total--;
    released_bytes -= e->bytes;
    site->n_released[k]--;
}

/* Takes a released entry out of the map for destruction after unlock. */
static void unlink_for_destruction(struct cache_entry *e, struct evictions *ev)
{
    unlink_released(e);
    cache_map_del(&kinds[e->kind], e->handle);
    e->lru_newer = ev->first;
    ev->first = e;
}

/* The same, for room: counted as evicted. */
static void evict(struct cache_entry *e, struct evictions *ev)
{
    unlink_for_destruction(e, ev);
    e->site->cache.evicted++;
}

/* How many released objects of a kind a site keeps: what the user set, or
 * its working set. */
static int site_capacity(const struct site *site, enum cache_kind k)
{
    if (site->policy.max_graphs > 0)
        return site->policy.max_graphs;
    int n = site->working_set > 0 ? site->working_set : 1;
    return k == CACHE_EXECS ? n + site->execs_beyond_working_set : n;
}

/* Links a released entry into a list ordered by released_order, newest
 * at *newest: walks from the newest, so an entry released just now costs
 * one step, and one given back as many as were released since. */
#define LINK_BY_ORDER(e, newest, oldest, older, newer)                                     \
    do {                                                                                   \
        struct cache_entry *after_ = NULL, *before_ = *(newest);                          \
        while (before_ && before_->released_order > (e)->released_order) {                \
            after_ = before_;                                                              \
            before_ = before_->older;                                                      \
        }                                                                                  \
        (e)->older = before_;                                                              \
        (e)->newer = after_;                                                               \
        if (before_)                                                                       \
            before_->newer = (e);                                                          \
        else                                                                               \
            *(oldest) = (e);                                                               \
        if (after_)                                                                        \
            after_->older = (e);                                                           \
        else                                                                               \
            *(newest) = (e);                                                               \
    } while (0)

/* A destroyed entry joins the released lists at its released_order; the
 * site's oldest beyond its capacity, then the least recently released
 * anywhere beyond the budget, leave for destruction (the new one too, if
 * it alone exceeds it). */
static void push_released_in_order(struct cache_entry *e, struct evictions *ev)
{
    struct site *site = e->site;
    enum cache_kind k = e->kind;
    e->state = CACHE_RELEASED;
    LINK_BY_ORDER(e, &site->released_newest[k], &site->released_oldest[k], site_older, site_newer);
    LINK_BY_ORDER(e, &lru_newest, &lru_oldest, lru_older, lru_newer);
    released_total++;
    released_bytes += e->bytes;
    site->n_released[k]++;
    site->cache.kept++;

    int capacity = site_capacity(site, k);
    while (site->n_released[k] > capacity)
        evict(site->released_oldest[k], ev);
    unsigned long long budget = budget_now();
    while (lru_oldest && (released_bytes > budget || released_total > CACHE_GLOBAL_MAX_OBJECTS))
        evict(lru_oldest, ev);
    if (released_bytes > released_bytes_peak)
        released_bytes_peak = released_bytes;
}

void cache_push_released(struct cache_entry *e, struct evictions *ev)
{
    e->released_order = ++released_count;
    push_released_in_order(e, ev);
}

/* Starts tracking an entry the program holds. Returns 0, or -1 (entry
 * freed) if the map could not grow. Takes cache_lock. */
int cache_entry_track(enum cache_kind k, struct cache_entry *e)
{
    struct kind_state *ks = &kinds[k];
    int rc = 0;
    e->state = CACHE_HELD;
    e->kind = k;
    pthread_mutex_lock(&cache_lock);
    if (k == CACHE_GRAPHS)
        ((struct graph_rec *)e)->serial = next_graph_serial++;
    /* The driver may reuse the address of an object destroyed behind
     * recap's back (never one recap keeps: those are alive). */
    struct cache_entry *stale = hmap_get(&ks->by_handle, e->handle);
    if (stale && stale->state == CACHE_HELD) {
        cache_map_del(ks, e->handle);
        cache_entry_free(stale);
    }
    if (hmap_put(&ks->by_handle, e->handle, e) != 0)
        rc = -1;
    map_changed(ks);
    pthread_mutex_unlock(&cache_lock);
    if (rc)
        cache_entry_free(e);
    return rc;
}

/* The entry of a handle the program holds, or NULL. Takes cache_lock. */
struct cache_entry *cache_entry_held(enum cache_kind k, const void *handle)
{
    if (!cache_map_may_hold(k))
        return NULL;
    pthread_mutex_lock(&cache_lock);
    struct cache_entry *e = hmap_get(&kinds[k].by_handle, handle);
    if (e && e->state != CACHE_HELD)
        e = NULL;
    pthread_mutex_unlock(&cache_lock);
    return e;
}

/* A released entry becomes the caller's. */
void cache_take_locked(struct cache_entry *e)
{
    unlink_released(e);
    e->state = CACHE_TAKEN;
}

/* The newest released entry of the site that `suits` best (3: the best
 * there is, stop looking; 0: unsuitable), now TAKEN. Takes cache_lock. */
struct cache_entry *cache_entry_take(enum cache_kind k, struct site *site,
                                      int (*suits)(const struct cache_entry *, const void *),
                                      const void *want)
{
    struct cache_entry *found = NULL;
    int best = 0;
    pthread_mutex_lock(&cache_lock);
    for (struct cache_entry *e = site->released_newest[k]; e && best < 3; e = e->site_older) {
        int score = suits(e, want);
        if (score > best) {
            best = score;
            found = e;
        }
    }
    if (found)
        cache_take_locked(found);
    pthread_mutex_unlock(&cache_lock);
    return found;
}

void cache_entry_hand_out(struct cache_entry *e)
{
    pthread_mutex_lock(&cache_lock);
    e->state = CACHE_HELD;
    pthread_mutex_unlock(&cache_lock);
}

/* Forgets a TAKEN or HELD entry and destroys its object, once. */
void cache_entry_discard(enum cache_kind k, struct cache_entry *e, int undefined)
{
    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&kinds[k].by_handle, e->handle) == e)
        cache_map_del(&kinds[k], e->handle);
    pthread_mutex_unlock(&cache_lock);
    if (undefined)
        cache_drop_execs_of((const struct graph_rec *)e);
    entry_destroy_waiting(e, 0, undefined);
}



static int evicted_now(const struct evictions *ev, const struct cache_entry *e)
{
    for (const struct cache_entry *x = ev->first; x; x = x->lru_newer)
        if (x == e)
            return 1;
    return 0;
}

/* The entry the site just released left at once: it alone is more than the
 * budget, so nothing of the site can be kept and every look would only
 * cost. The site stops keeping, with the usual back-off. */
static void site_over_budget(struct site *site, const char *noun, unsigned long long bytes,
                             unsigned long long budget)
{
    pthread_mutex_lock(&site->lock);
    enum gate_change change = sites_close_over_budget_locked(site, noun, bytes, budget);
    pthread_mutex_unlock(&site->lock);
    cache_site_gate_changed(site, change);
}

/* The program's destroy of a handle: kept as released when the rule says
 * so, passed to the driver when recap does not know the handle, refused
 * when the program destroyed it already. One lock unless the rule must ask
 * the driver. */
CUresult cache_entry_on_destroy(enum cache_kind k, const void *handle,
                                 const struct keep_rule *rule, CUresult (*real)(const void *))
{
    struct kind_state *ks = &kinds[k];
    struct evictions ev = { NULL };

    if (!cache_map_may_hold(k))
        return real(handle);
    pthread_mutex_lock(&cache_lock);
    struct cache_entry *e = hmap_get(&ks->by_handle, handle);
    if (!e) {
        pthread_mutex_unlock(&cache_lock);
        return real(handle);
    }
    if (e->state == CACHE_HELD && k == CACHE_GRAPHS && ((struct graph_rec *)e)->copying) {
        /* recap is copying it: the destroy happens when the copy ends. */
        ((struct graph_rec *)e)->destroy_deferred = 1;
        pthread_mutex_unlock(&cache_lock);
        return CUDA_SUCCESS;
    }
    if (e->state != CACHE_HELD) {
        /* Only HELD entries stay put once the lock is dropped: `e` is not
         * touched again. */
        struct site *site = e->site;
        pthread_mutex_unlock(&cache_lock);
        event_warning(site, "destroy of a %s the program already destroyed; recap's cached "
                            "one kept, CUDA_ERROR_INVALID_VALUE returned", ks->noun);
        return CUDA_ERROR_INVALID_VALUE;
    }
    enum keep_answer answer = rule->first(e);
    int kept = answer == KEEP_YES;
    if (answer == KEEP_ASK) {
        pthread_mutex_unlock(&cache_lock);
        kept = rule->driver(e);
        pthread_mutex_lock(&cache_lock);
        if (hmap_get(&ks->by_handle, handle) != e || e->state != CACHE_HELD) {
            /* A racing destroy of the same handle in another thread won. */
            pthread_mutex_unlock(&cache_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    /* A site whose gate closed keeps nothing (checked here, under the
     * lock that cache_site_drop sets it under). */
    if (kept && e->site->cache_closed)
        kept = 0;
    struct site *over_budget = NULL;
    unsigned long long bytes = e->bytes, budget = 0;
    if (kept) {
        cache_push_released(e, &ev);
        if (evicted_now(&ev, e)) {
            over_budget = e->site;
            budget = budget_now();
        }
    }
    /* Not kept: a graph may still live on for an executable graph
     * instantiated from it, and an executable graph may take the graph
     * it kept alive with it. */
    int outlives = 0;
    struct exec_source owned = { NULL, 0 };
    if (!kept) {
        cache_map_del(ks, handle);
        if (k == CACHE_EXECS)
            owned = exec_owned_source((struct exec_rec *)e);
        else if (rule->outlives_execs)
            outlives = graph_kept_for_execs_locked((struct graph_rec *)e);
    }
    pthread_mutex_unlock(&cache_lock);

    if (kept) {
        cache_destroy_evicted(&ev);
        if (over_budget)
            site_over_budget(over_budget, ks->noun, bytes, budget);
        return CUDA_SUCCESS;
    }
    struct site *site = e->site;
    cache_entry_free(e);
    if (outlives)
        return CUDA_SUCCESS;
    CUresult r = real(handle);
    exec_source_let_go(site, owned);
    return r;
}

/* A TAKEN entry recap did not hand out goes back to its site's released
 * ones, as kept before (not counted as kept again) and where it was: a
 * candidate compared, or written into by a capture that then fell back,
 * was not released by the program again, and must not pass for the newest
 * (candidates compared at every capture would stay the newest and crowd
 * newer kinds out). Destroyed where the site keeps nothing now. */
void cache_entry_give_back(enum cache_kind k, struct cache_entry *e)
{
    struct evictions ev = { NULL };
    pthread_mutex_lock(&cache_lock);
    int mapped = hmap_get(&kinds[k].by_handle, e->handle) == e;
    int keep = mapped && !e->site->cache_closed;
    if (keep) {
        push_released_in_order(e, &ev);
        e->site->cache.kept--;
    } else if (mapped) {
        cache_map_del(&kinds[k], e->handle);
    }
    pthread_mutex_unlock(&cache_lock);
    cache_destroy_evicted(&ev);
    if (!keep)
        cache_entry_destroy(e);
}

/* --- a graph record's recording (freed with the record) --------------------------- */

void cache_graph_set_recording(struct graph_rec *rec, struct journal *recording,
                               unsigned long epoch)
{
    if (rec->recording) {
        journal_free(rec->recording);
        free(rec->recording);
    }
    rec->recording = recording;
    rec->recording_epoch = epoch;
}

/* --- executable graphs ------------------------------------------------------------- */

struct exec_rec *cache_exec_track(CUgraphExec exec, struct site *site, unsigned long long flags,
                                  uint64_t shape, long nodes, CUgraph source_graph,
                                  uint64_t source_serial, unsigned long long bytes)
{
    struct exec_rec *rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    rec->entry.handle = exec;
    rec->entry.site = site;
    rec->entry.bytes = bytes;
    rec->flags = flags;
    rec->shape = shape;
    rec->nodes = nodes;
    rec->source_graph = source_graph;
    rec->source_serial = source_serial;
    return cache_entry_track(CACHE_EXECS, &rec->entry) == 0 ? rec : NULL;
}

struct exec_want {
    unsigned long long flags;
    uint64_t shape, prefer_serial;
    int source_must_live;
};

static struct graph_rec *graph_of_serial_locked(CUgraph graph, uint64_t serial);
static CUgraph exec_source_graph_locked(const struct exec_rec *e);

/* Which graph's nodes the driver's setters take after a whole update,
 * learnt from the program's own setters on executable graphs recap
 * brought up to another graph: unknown, the graph it was instantiated
 * from (as documented), or the graph of the update. */
enum exec_nodes_reading { EXEC_NODES_UNKNOWN, EXEC_NODES_INSTANTIATED, EXEC_NODES_UPDATED };
static int exec_nodes_reading;   /* atomic */

static void learn_exec_nodes_reading(int reading)
{
    VALGRIND_HG_DISABLE_CHECKING(&exec_nodes_reading, sizeof exec_nodes_reading);   /* atomic */
    __atomic_store_n(&exec_nodes_reading, reading, __ATOMIC_RELAXED);
}

/* Same flags and shape; better, instantiated from the very graph; best of
 * all, and brought up to it last (only the changed nodes may then need
 * writing, through the graph's own node handles: exec_reuse.c). */
static int exec_suits(const struct cache_entry *e, const void *want)
{
    const struct exec_rec *rec = (const struct exec_rec *)e;
    const struct exec_want *w = want;
    if (rec->flags != w->flags || rec->shape != w->shape)
        return 0;
    /* Where the program sets nodes of its executable graphs, it names its
     * graph's nodes: one instantiated from another graph will do only
     * while that graph lives, for cache_exec_source_node to find the
     * node the driver takes (called under cache_lock). */
    if (rec->source_serial != w->prefer_serial && w->source_must_live &&
        __atomic_load_n(&exec_nodes_reading, __ATOMIC_RELAXED) != EXEC_NODES_UPDATED &&
        !exec_source_graph_locked(rec))
        return 0;
    if (rec->source_serial != w->prefer_serial)
        return 1;
    return rec->synced_serial == w->prefer_serial ? 3 : 2;
}

struct exec_rec *cache_take_exec(struct site *site, unsigned long long flags, uint64_t shape,
                                 uint64_t prefer_serial)
{
    struct exec_want want = { flags, shape, prefer_serial,
                              __atomic_load_n(&site->sets_exec_nodes, __ATOMIC_RELAXED) };
    return (struct exec_rec *)cache_entry_take(CACHE_EXECS, site, exec_suits, &want);
}

void cache_site_keep_another_exec(struct site *site)
{
    pthread_mutex_lock(&cache_lock);
    if (site->working_set + site->execs_beyond_working_set < CACHE_SITE_MAX_KEPT)
        site->execs_beyond_working_set++;
    pthread_mutex_unlock(&cache_lock);
}

void cache_exec_hand_out(struct exec_rec *rec)
{
    cache_entry_hand_out(&rec->entry);
}

void cache_exec_give_back(struct exec_rec *rec)
{
    cache_entry_give_back(CACHE_EXECS, &rec->entry);
}

void cache_exec_discard(struct exec_rec *rec)
{
    cache_entry_discard(CACHE_EXECS, &rec->entry, 0);
}

static enum keep_answer exec_worth_keeping(const struct cache_entry *e)
{
    enum recap_mode m = e->site->policy.mode;
    if (__atomic_load_n(&e->site->no_exec_reuse, __ATOMIC_RELAXED) ||
        ((const struct exec_rec *)e)->source_lost)
        return KEEP_NO;
    return m == RECAP_MODE_AUTO || m == RECAP_MODE_UPDATE ? KEEP_YES : KEEP_NO;
}

static const struct keep_rule exec_keep_rule = { exec_worth_keeping, NULL, 0 };

static CUresult exec_destroy_real(const void *handle)
{
    return DRV_REAL(cuGraphExecDestroy)((CUgraphExec)handle);
}

CUresult cache_on_exec_destroy(enum drv_id id, CUgraphExec exec)
{
    (void)id;
    if (runtime_passthrough || !exec)
        return DRV_REAL(cuGraphExecDestroy)(exec);
    step_forget_handle(exec);
    return cache_entry_on_destroy(CACHE_EXECS, exec, &exec_keep_rule, exec_destroy_real);
}


/* The graph record of `graph` if it is still the one of that serial. */
static struct graph_rec *graph_of_serial_locked(CUgraph graph, uint64_t serial)
{
    struct graph_rec *g = graph ? hmap_get(&kinds[CACHE_GRAPHS].by_handle, graph) : NULL;
    return g && g->serial == serial ? g : NULL;
}

/* --- a graph outlives the executable graphs instantiated from it -------------------- */

/* The driver knows an executable graph's nodes, for the program's node
 * setters, by the graph it was instantiated from, and by no graph once
 * that one is destroyed (tests/gpu/probe_exec_nodes_after_update.c). recap
 * hands the program executable graphs brought up to the program's graph
 * from another, and translates the program's nodes into that other
 * graph's (cache_exec_source_node): so that graph must live as long as
 * any executable graph instantiated from it. Where the program or the
 * cache lets such a graph go, the first such executable graph's record
 * keeps it (source_owned); when that one goes, another of the same graph
 * takes it over, else it is destroyed. */

/* Which of the executable graphs instantiated from a graph to find. */
enum source_filter { SOURCE_ANY, SOURCE_RELEASED, SOURCE_OWNER };

/* A tracked executable graph instantiated from graph `serial` (any; one
 * released; the one that keeps the graph alive), or NULL. Caller holds
 * cache_lock. */
static struct exec_rec *exec_of_source_locked(uint64_t serial, enum source_filter filter)
{
    const struct hmap *m = &kinds[CACHE_EXECS].by_handle;
    for (size_t i = 0; i < m->cap; i++) {
        struct exec_rec *x = m->slots[i].value;
        if (m->slots[i].key && x->source_serial == serial &&
            (filter == SOURCE_ANY || (filter == SOURCE_RELEASED && x->entry.state == CACHE_RELEASED) ||
             (filter == SOURCE_OWNER && x->source_owned)))
            return x;
    }
    return NULL;
}

void cache_drop_execs_of(const struct graph_rec *g)
{
    struct evictions ev = { NULL };
    struct exec_rec *x;
    pthread_mutex_lock(&cache_lock);
    const struct hmap *m = &kinds[CACHE_EXECS].by_handle;
    for (size_t i = 0; i < m->cap; i++) {
        x = m->slots[i].value;
        if (m->slots[i].key && x->source_serial == g->serial)
            x->source_lost = 1;     /* one the program holds is not kept when it goes */
    }
    while ((x = exec_of_source_locked(g->serial, SOURCE_RELEASED)))
        unlink_for_destruction(&x->entry, &ev);
    pthread_mutex_unlock(&cache_lock);
    cache_destroy_evicted(&ev);
}

/* A graph that is no longer the program's or the cache's: 1 if an
 * executable graph's record keeps it now (not to be destroyed). Caller
 * holds cache_lock. */
static int graph_kept_for_execs_locked(const struct graph_rec *g)
{
    struct exec_rec *x = exec_of_source_locked(g->serial, SOURCE_ANY);
    if (x)
        x->source_owned = 1;
    return x != NULL;
}

static int graph_kept_for_execs(const struct graph_rec *g)
{
    pthread_mutex_lock(&cache_lock);
    int kept = graph_kept_for_execs_locked(g);
    pthread_mutex_unlock(&cache_lock);
    return kept;
}

/* The graph an executable graph's record keeps alive, if any (read under
 * cache_lock, or once the record left the map: nothing sets it then). */
static struct exec_source exec_owned_source(const struct exec_rec *e)
{
    return e->source_owned ? (struct exec_source){ e->source_graph, e->source_serial }
                           : (struct exec_source){ NULL, 0 };
}

/* The executable graph that kept `owned` alive is gone: another of the
 * same graph keeps it, or it is destroyed. Never under cache_lock. */
static void exec_source_let_go(struct site *site, struct exec_source owned)
{
    if (!owned.graph)
        return;
    pthread_mutex_lock(&cache_lock);
    struct exec_rec *x = exec_of_source_locked(owned.serial, SOURCE_ANY);
    if (x)
        x->source_owned = 1;
    pthread_mutex_unlock(&cache_lock);
    CUresult r = x ? CUDA_SUCCESS : DRV_REAL(cuGraphDestroy)(owned.graph);
    if (r != CUDA_SUCCESS)
        event_release_failed(site, "cuGraphDestroy", r, "the graph may stay allocated");
}

/* The graph an executable graph was instantiated from, while it lives (in
 * the program's hands, the cache's, or kept for it or for another
 * executable graph of it). Caller holds cache_lock. */
static CUgraph exec_source_graph_locked(const struct exec_rec *e)
{
    return e->source_owned || graph_of_serial_locked(e->source_graph, e->source_serial) ||
                   exec_of_source_locked(e->source_serial, SOURCE_OWNER)
               ? e->source_graph
               : NULL;
}

/* The graph's nodes in the driver's order (malloc'd), or NULL. */
static CUgraphNode *graph_nodes(CUgraph graph, size_t *n)
{
    *n = 0;
    if (DRV_REAL(cuGraphGetNodes)(graph, NULL, n) != CUDA_SUCCESS || *n == 0)
        return NULL;
    CUgraphNode *nodes = malloc(*n * sizeof *nodes);
    size_t got = *n;
    if (nodes && (DRV_REAL(cuGraphGetNodes)(graph, nodes, &got) != CUDA_SUCCESS || got != *n)) {
        free(nodes);
        nodes = NULL;
    }
    return nodes;
}

/* Where `node` is in `graph`'s list, or -1. */
static long node_index(CUgraphNode *nodes, size_t n, CUgraphNode node)
{
    for (size_t i = 0; nodes && i < n; i++)
        if (nodes[i] == node)
            return (long)i;
    return -1;
}

/* The driver took a setter naming `node` of the graph an executable graph
 * was brought up to, not the one it was instantiated from: it follows
 * updates. Caller holds cache_lock. */
static void learn_from_setter_locked(const struct exec_rec *e, CUgraphNode node)
{
    struct graph_rec *synced = e->source_serial != e->synced_serial
                                   ? graph_of_serial_locked(e->synced_graph, e->synced_serial)
                                   : NULL;
    if (!synced)
        return;
    size_t n;
    CUgraphNode *nodes = graph_nodes(graph_rec_graph(synced), &n);
    if (node_index(nodes, n, node) >= 0)
        learn_exec_nodes_reading(EXEC_NODES_UPDATED);
    free(nodes);
}

void exec_note_mutated(CUgraphExec exec, int by_node, CUgraphNode took)
{
    if (runtime_passthrough || !cache_map_may_hold(CACHE_EXECS))
        return;
    pthread_mutex_lock(&cache_lock);
    struct exec_rec *rec = hmap_get(&kinds[CACHE_EXECS].by_handle, exec);
    if (rec) {
        rec->mutated = 1;
        if (by_node)
            __atomic_store_n(&rec->entry.site->sets_exec_nodes, 1, __ATOMIC_RELAXED);
        if (took && __atomic_load_n(&exec_nodes_reading, __ATOMIC_RELAXED) == EXEC_NODES_UNKNOWN)
            learn_from_setter_locked(rec, took);
    }
    pthread_mutex_unlock(&cache_lock);
}

int cache_exec_source_node(CUgraphExec exec, CUgraphNode node, CUgraphNode *out)
{
    if (runtime_passthrough || !node || !cache_map_may_hold(CACHE_EXECS))
        return 0;
    int found = 0;
    /* Under cache_lock: neither graph can be destroyed meanwhile. The
     * driver calls are reads of structure, which recap never changes. */
    pthread_mutex_lock(&cache_lock);
    struct exec_rec *e = hmap_get(&kinds[CACHE_EXECS].by_handle, exec);
    CUgraph source = e ? exec_source_graph_locked(e) : NULL;
    struct graph_rec *synced = e ? graph_of_serial_locked(e->synced_graph, e->synced_serial) : NULL;
    if (source && synced && e->source_serial != e->synced_serial) {
        size_t nsource, nsynced;
        CUgraphNode *from = graph_nodes(graph_rec_graph(synced), &nsynced);
        CUgraphNode *to = from ? graph_nodes(source, &nsource) : NULL;
        /* Topologically identical (the update took it): the same place. */
        long i = to && nsource == nsynced ? node_index(from, nsynced, node) : -1;
        if (i >= 0) {
            *out = to[i];
            found = 1;
            learn_exec_nodes_reading(EXEC_NODES_INSTANTIATED);
        }
        free(from);
        free(to);
    }
    /* The graph the driver knows the executable graph by is gone: not
     * while recap keeps it for its executable graphs (above), but recap
     * forgets its records where the program's CUDA objects go without a
     * destroy (cache_forget_held), and the log must say what failed. */
    const struct site *lost = e && e->source_serial != e->synced_serial && !source && synced
                                  ? e->entry.site : NULL;
    pthread_mutex_unlock(&cache_lock);
    if (lost)
        event_warning(lost, "the program set a node of an executable graph that recap had brought "
                            "up to its graph from another graph, which recap no longer holds; the "
                            "driver takes only that graph's nodes and refused the call. recap "
                            "reuses this "
                            "site's executable graphs only while their own graph lives from now "
                            "on; RECAP_MODE=observe (or mode = observe for the site) avoids it");
    return found;
}

/* --- device memory an instantiation takes -------------------------------------------- */

void cache_probe_begin(struct cache_probe *p, struct site *site)
{
    pthread_mutex_lock(&cache_lock);
    p->on = site->measured_samples < CACHE_MEASURE_SAMPLES;
    pthread_mutex_unlock(&cache_lock);
    size_t total = 0;
    if (!p->on)
        return;
    CUresult r = DRV_REAL(cuMemGetInfo_v2)(&p->free_before, &total);
    if (r != CUDA_SUCCESS) {
        p->on = 0;
        event_own_call_failed(site, "cuMemGetInfo_v2", r,
                              "this executable graph is charged the floor estimate");
    }
}

unsigned long long cache_probe_end(struct cache_probe *p, struct site *site, long nodes)
{
    unsigned long long n = nodes > 0 ? (unsigned long long)nodes : 0;
    size_t free_after = 0, total = 0;
    CUresult r = p->on ? DRV_REAL(cuMemGetInfo_v2)(&free_after, &total) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        event_own_call_failed(site, "cuMemGetInfo_v2", r,
                              "this executable graph is charged the floor estimate");
    if (p->on && r == CUDA_SUCCESS) {
        budget_settle(total);
        /* Another thread's allocations may land in between: a rise in free
         * memory reads as none taken. */
        unsigned long long taken = p->free_before > free_after ? p->free_before - free_after : 0;
        pthread_mutex_lock(&cache_lock);
        site->measured_bytes += taken;
        site->measured_nodes += n;
        site->measured_samples++;
        pthread_mutex_unlock(&cache_lock);
    }
    /* Chunked allocations show up whole in one measurement and as nothing
     * in the next: the site's average per node spreads them out. */
    pthread_mutex_lock(&cache_lock);
    unsigned long long estimate =
        site->measured_nodes ? site->measured_bytes * n / site->measured_nodes : 0;
    pthread_mutex_unlock(&cache_lock);
    unsigned long long floor = CACHE_EXEC_FLOOR_BYTES + CACHE_EXEC_FLOOR_NODE_BYTES * n;
    return estimate > floor ? estimate : floor;
}

/* --- memory pressure, fork ----------------------------------------------------------- */

int cache_release_all(void)
{
    if (runtime_passthrough)
        return 0;
    pthread_mutex_lock(&cache_lock);
    struct cache_entry *list = lru_oldest;
    int n = released_total;
    for (struct cache_entry *e = lru_oldest; e; e = e->lru_newer) {
        cache_map_del(&kinds[e->kind], e->handle);
        e->site->n_released[e->kind]--;
        e->site->released_newest[e->kind] = e->site->released_oldest[e->kind] = NULL;
        e->site->cache.evicted++;
    }
    lru_oldest = lru_newest = NULL;
    released_total = 0;
    released_bytes = 0;
    pthread_mutex_unlock(&cache_lock);

    for (struct cache_entry *e = list, *next; e; e = next) {
        next = e->lru_newer;
        /* Memory is short, or a library waits for its user objects: give
         * the references back now. */
        entry_destroy_waiting(e, 1, 0);
    }
    uobj_settle_all();
    return n;
}

int cache_forget_held(void)
{
    struct cache_entry *held = NULL;
    int n = 0;
    pthread_mutex_lock(&cache_lock);
    for (int k = 0; k < CACHE_KINDS; k++) {
        struct hmap *m = &kinds[k].by_handle;
        /* Collected first: deleting shifts the slots behind. */
        for (size_t i = 0; i < m->cap; i++) {
            struct cache_entry *e = m->slots[i].value;
            if (m->slots[i].key && e->state == CACHE_HELD &&
                !(k == CACHE_GRAPHS && ((struct graph_rec *)e)->copying)) {
                e->lru_newer = held;       /* unused while HELD */
                held = e;
            }
        }
        for (struct cache_entry *e = held; e && e->kind == (enum cache_kind)k; e = e->lru_newer)
            hmap_del(m, e->handle);
        map_changed(&kinds[k]);
    }
    pthread_mutex_unlock(&cache_lock);
    for (struct cache_entry *e = held, *next; e; e = next, n++) {
        next = e->lru_newer;
        cache_entry_free(e);
    }
    return n;
}

static int (*release_first)(void);

void cache_release_first_with(int (*first)(void))
{
    release_first = first;
}

int cache_release_for_oom(void)
{
    int kept = release_first ? release_first() : 0;
    int n = cache_release_all();
    if (n)
        event_warning(NULL, "device memory exhausted: released %d cached graphs and "
                            "executable graphs, retrying the allocation", n);
    return kept + n;
}

void cache_site_drop(struct site *site)
{
    struct evictions ev = { NULL };
    pthread_mutex_lock(&cache_lock);
    site->cache_closed = 1;
    for (int k = 0; k < CACHE_KINDS; k++)
        while (site->released_oldest[k])
            evict(site->released_oldest[k], &ev);
    pthread_mutex_unlock(&cache_lock);
    cache_destroy_evicted(&ev);
}

void cache_site_reopen(struct site *site)
{
    pthread_mutex_lock(&cache_lock);
    site->cache_closed = 0;
    pthread_mutex_unlock(&cache_lock);
}

void cache_site_working_set(struct site *site, int working_set, int concurrency)
{
    /* Each capture at once takes one graph of each kind as a candidate. */
    int keep = working_set * (concurrency > 1 ? concurrency : 1);
    pthread_mutex_lock(&cache_lock);
    site->working_set = keep < CACHE_SITE_MAX_KEPT ? keep : CACHE_SITE_MAX_KEPT;
    pthread_mutex_unlock(&cache_lock);
}

struct site_cache_counts cache_site_counts(struct site *site)
{
    pthread_mutex_lock(&cache_lock);
    struct site_cache_counts c = site->cache;
    pthread_mutex_unlock(&cache_lock);
    return c;
}

void cache_after_fork_child(void)
{
    /* The child cannot use the parent's CUDA objects: forget them without
     * calling the driver. TAKEN entries belong to captures, which the
     * capture module dropped first; the sites go right after. */
    pthread_mutex_init(&cache_lock, NULL);
    for (int k = 0; k < CACHE_KINDS; k++) {
        struct kind_state *ks = &kinds[k];
        for (size_t i = 0; i < ks->by_handle.cap; i++)
            if (ks->by_handle.slots[i].key)
                cache_entry_free(ks->by_handle.slots[i].value);
        hmap_clear(&ks->by_handle);
        ks->tracked = 0;
    }
    lru_oldest = lru_newest = NULL;
    released_total = 0;
    released_bytes = released_bytes_peak = 0;
    kept_memory_bytes = 0;
}

void cache_site_gate_changed(struct site *site, enum gate_change change)
{
    if (change == GATE_SAME)
        return;
    event_reuse_gate(site, change);
    if (change == GATE_REOPENED)
        cache_site_reopen(site);
    else
        cache_site_drop(site);   /* it stops keeping: what it kept goes now */
}
