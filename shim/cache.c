/*
 * cache.c - records of graphs and executable graphs, and the released ones
 * recap keeps.
 *
 * Both kinds share one lifecycle, written once over struct cache_entry: a
 * handle map finds an entry by handle whatever its state, so that a second
 * destroy of a handle the program already destroyed is recognised (it
 * returns CUDA_ERROR_INVALID_VALUE, as the driver does for a handle it does
 * not know) and never destroys what recap keeps; released entries sit on
 * one list per kind, oldest first, from which the site's max_graphs and the
 * global cap evict and which OOM empties. What differs per kind - which
 * released entry suits a request, whether a destroyed one is worth keeping,
 * how it is destroyed - is the typed code at the end of each section.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/cache.h"
#include "shim/driver.h"
#include "shim/events.h"
#include "shim/handle_map.h"
#include "shim/runtime.h"
#include "shim/sites.h"
#include "shim/user_objects.h"

struct kind_state {
    const char *noun;
    int global_max;
    struct hmap by_handle;               /* handle -> entry, every state */
    struct cache_entry *oldest, *newest; /* released entries */
    int released;
};

/* cache_lock guards both kinds' maps, lists and counts, every entry's state
 * and the sites' released counts. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kind_state kinds[CACHE_KINDS] = {
    [CACHE_GRAPHS] = { .noun = "graph", .global_max = CACHE_GLOBAL_MAX_GRAPHS },
    [CACHE_EXECS] = { .noun = "executable graph", .global_max = CACHE_GLOBAL_MAX_EXECS },
};
static uint64_t next_graph_serial = 1;

/* --- destroying what recap owns ------------------------------------------------ */

static void entry_free(enum cache_kind k, struct cache_entry *e)
{
    if (k == CACHE_GRAPHS)
        free(((struct graph_rec *)e)->changed);
    free(e);
}

/* Destroys the object of an entry recap owns and frees the entry; a failure
 * is logged, there is nothing else to do about it. References to user
 * objects recap took for an executable graph go back after its last launch
 * (at once with `wait`). Never under cache_lock. */
static void entry_destroy_waiting(enum cache_kind k, struct cache_entry *e, int wait)
{
    if (k == CACHE_EXECS)
        uobj_exec_gone((CUgraphExec)e->handle, wait);
    CUresult r = k == CACHE_GRAPHS ? DRV_REAL(cuGraphDestroy)((CUgraph)e->handle)
                                   : DRV_REAL(cuGraphExecDestroy)((CUgraphExec)e->handle);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(e->site, k == CACHE_GRAPHS ? "cuGraphDestroy" : "cuGraphExecDestroy",
                              r, "the object may stay allocated");
    entry_free(k, e);
}

static void entry_destroy(enum cache_kind k, struct cache_entry *e)
{
    entry_destroy_waiting(k, e, 0);
}

/* Entries evicted under the lock, destroyed after it is dropped. */
struct evictions {
    struct cache_entry *entry[8];
    int n;
};

static void destroy_evicted(enum cache_kind k, struct evictions *ev)
{
    for (int i = 0; i < ev->n; i++)
        entry_destroy(k, ev->entry[i]);
}

/* --- the shared lifecycle (under cache_lock unless said otherwise) ------------- */

static void unlink_released(enum cache_kind k, struct cache_entry *e)
{
    struct kind_state *ks = &kinds[k];
    if (e->older)
        e->older->newer = e->newer;
    else
        ks->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        ks->newest = e->older;
    e->older = e->newer = NULL;
    ks->released--;
    e->site->n_released[k]--;
}

/* A destroyed entry joins the released list; the oldest ones beyond the
 * site's max_graphs or the global cap leave the map for destruction. */
static void push_released(enum cache_kind k, struct cache_entry *e, struct evictions *ev)
{
    struct kind_state *ks = &kinds[k];
    struct site *site = e->site;
    e->state = CACHE_RELEASED;
    e->older = ks->newest;
    e->newer = NULL;
    if (ks->newest)
        ks->newest->newer = e;
    else
        ks->oldest = e;
    ks->newest = e;
    ks->released++;
    site->n_released[k]++;

    for (struct cache_entry *r = ks->oldest, *next; r && ev->n < 8; r = next) {
        next = r->newer;
        int over_site = r->site == site && site->n_released[k] > site->policy.max_graphs;
        if (!over_site && ks->released <= ks->global_max)
            continue;
        unlink_released(k, r);
        hmap_del(&ks->by_handle, r->handle);
        ev->entry[ev->n++] = r;
    }
}

/* Starts tracking an entry the program holds. Returns 0, or -1 (entry
 * freed) if the map could not grow. Takes cache_lock. */
static int entry_track(enum cache_kind k, struct cache_entry *e)
{
    struct kind_state *ks = &kinds[k];
    int rc = 0;
    e->state = CACHE_HELD;
    pthread_mutex_lock(&cache_lock);
    if (k == CACHE_GRAPHS)
        ((struct graph_rec *)e)->serial = next_graph_serial++;
    /* The driver may reuse the address of an object destroyed behind
     * recap's back (never one recap keeps: those are alive). */
    struct cache_entry *stale = hmap_get(&ks->by_handle, e->handle);
    if (stale && stale->state == CACHE_HELD) {
        hmap_del(&ks->by_handle, e->handle);
        entry_free(k, stale);
    }
    if (hmap_put(&ks->by_handle, e->handle, e) != 0)
        rc = -1;
    pthread_mutex_unlock(&cache_lock);
    if (rc)
        entry_free(k, e);
    return rc;
}

/* The entry of a handle the program holds, or NULL. Takes cache_lock. */
static struct cache_entry *entry_held(enum cache_kind k, const void *handle)
{
    pthread_mutex_lock(&cache_lock);
    struct cache_entry *e = hmap_get(&kinds[k].by_handle, handle);
    if (e && e->state != CACHE_HELD)
        e = NULL;
    pthread_mutex_unlock(&cache_lock);
    return e;
}

/* The newest released entry of the site that `suits` (2: the best there
 * is, stop looking; 1: acceptable), now TAKEN. Takes cache_lock. */
static struct cache_entry *entry_take(enum cache_kind k, struct site *site,
                                      int (*suits)(const struct cache_entry *, const void *),
                                      const void *want)
{
    struct cache_entry *found = NULL;
    int best = 0;
    pthread_mutex_lock(&cache_lock);
    for (struct cache_entry *e = kinds[k].newest; e && best < 2; e = e->older) {
        int score = e->site == site ? suits(e, want) : 0;
        if (score > best) {
            best = score;
            found = e;
        }
    }
    if (found) {
        unlink_released(k, found);
        found->state = CACHE_TAKEN;
    }
    pthread_mutex_unlock(&cache_lock);
    return found;
}

static void entry_hand_out(struct cache_entry *e)
{
    pthread_mutex_lock(&cache_lock);
    e->state = CACHE_HELD;
    pthread_mutex_unlock(&cache_lock);
}

/* Forgets a TAKEN or HELD entry and destroys its object, once. */
static void entry_discard(enum cache_kind k, struct cache_entry *e)
{
    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&kinds[k].by_handle, e->handle) == e)
        hmap_del(&kinds[k].by_handle, e->handle);
    pthread_mutex_unlock(&cache_lock);
    entry_destroy(k, e);
}

/* The program's destroy of a handle: kept as released when `keep` says so
 * (asked outside the lock: it may query the driver), passed to the driver
 * when recap does not know the handle, refused when the program destroyed
 * it already. */
static CUresult entry_on_destroy(enum cache_kind k, const void *handle,
                                 int (*keep)(const struct cache_entry *), CUresult (*real)(const void *))
{
    struct kind_state *ks = &kinds[k];
    struct evictions ev = { .n = 0 };

    pthread_mutex_lock(&cache_lock);
    struct cache_entry *e = hmap_get(&ks->by_handle, handle);
    enum cache_state state = e ? e->state : CACHE_HELD;
    struct site *site = e ? e->site : NULL;
    pthread_mutex_unlock(&cache_lock);
    if (!e)
        return real(handle);
    if (state != CACHE_HELD) {
        /* Only HELD entries stay put once the lock is dropped: `e` is not
         * touched again. */
        event_warning(site, "destroy of a %s the program already destroyed; recap's cached "
                            "one kept, CUDA_ERROR_INVALID_VALUE returned", ks->noun);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int kept = keep(e);

    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&ks->by_handle, handle) != e || e->state != CACHE_HELD) {
        /* A racing destroy of the same handle in another thread won. */
        pthread_mutex_unlock(&cache_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (kept)
        push_released(k, e, &ev);
    else
        hmap_del(&ks->by_handle, handle);
    pthread_mutex_unlock(&cache_lock);

    if (kept) {
        destroy_evicted(k, &ev);
        return CUDA_SUCCESS;
    }
    entry_free(k, e);
    return real(handle);
}

/* --- graphs ---------------------------------------------------------------------- */

struct graph_rec *cache_graph_track(CUgraph graph, struct site *site, uint64_t shape, long nodes)
{
    struct graph_rec *rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    rec->entry.handle = graph;
    rec->entry.site = site;
    rec->shape = shape;
    rec->nodes = nodes;
    return entry_track(CACHE_GRAPHS, &rec->entry) == 0 ? rec : NULL;
}

struct graph_rec *cache_graph_held(CUgraph graph)
{
    return (struct graph_rec *)entry_held(CACHE_GRAPHS, graph);
}

static int graph_suits(const struct cache_entry *e, const void *want)
{
    return ((const struct graph_rec *)e)->shape == *(const uint64_t *)want ? 2 : 0;
}

struct graph_rec *cache_take_graph(struct site *site, uint64_t shape)
{
    /* Newest first: the most recently released graph of the shape is the
     * one whose parameters are likeliest to match. */
    return (struct graph_rec *)entry_take(CACHE_GRAPHS, site, graph_suits, &shape);
}

void cache_graph_hand_out(struct graph_rec *rec)
{
    entry_hand_out(&rec->entry);
}

void cache_graph_discard(struct graph_rec *rec)
{
    entry_discard(CACHE_GRAPHS, &rec->entry);
}

void cache_graph_set_changes(struct graph_rec *rec, struct changed_node *changed, size_t n, int known)
{
    free(rec->changed);
    rec->changed = changed;
    rec->nchanged = n;
    rec->changes_known = known;
}

/* A destroyed graph is worth keeping only where it will be recaptured
 * into, and only unchanged since its capture: a graph the program edited
 * would just make the next recapture fail. */
static int graph_worth_keeping(const struct cache_entry *e)
{
    const struct graph_rec *rec = (const struct graph_rec *)e;
    const struct site *site = e->site;
    enum recap_mode m = site->policy.mode;
    if ((m != RECAP_MODE_AUTO && m != RECAP_MODE_RECAPTURE) || !drv_caps.recapture_begin ||
        __atomic_load_n(&site->no_recapture, __ATOMIC_RELAXED))
        return 0;
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

static int never_keep(const struct cache_entry *e)
{
    (void)e;
    return 0;
}

CUresult cache_on_graph_destroy(enum drv_id id, CUgraph graph)
{
    (void)id;
    if (runtime_passthrough || !graph)
        return DRV_REAL(cuGraphDestroy)(graph);
    /* A recapture releases a graph's user objects only at its begin:
     * keeping such a graph would hold them past the program's destroy. */
    int has_user_objects = uobj_graph_has(graph);
    CUresult r = entry_on_destroy(CACHE_GRAPHS, graph,
                                  has_user_objects ? never_keep : graph_worth_keeping,
                                  graph_destroy_real);
    if (has_user_objects)
        uobj_forget_graph(graph);
    return r;
}


/* --- executable graphs ------------------------------------------------------------- */

struct exec_rec *cache_exec_track(CUgraphExec exec, struct site *site, unsigned long long flags,
                                  uint64_t shape, long nodes, uint64_t source_serial)
{
    struct exec_rec *rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    rec->entry.handle = exec;
    rec->entry.site = site;
    rec->flags = flags;
    rec->shape = shape;
    rec->nodes = nodes;
    rec->source_serial = source_serial;
    return entry_track(CACHE_EXECS, &rec->entry) == 0 ? rec : NULL;
}

struct exec_want {
    unsigned long long flags;
    uint64_t shape, prefer_serial;
};

/* Same flags and shape; best of all, instantiated from the very graph. */
static int exec_suits(const struct cache_entry *e, const void *want)
{
    const struct exec_rec *rec = (const struct exec_rec *)e;
    const struct exec_want *w = want;
    if (rec->flags != w->flags || rec->shape != w->shape)
        return 0;
    return rec->source_serial == w->prefer_serial ? 2 : 1;
}

struct exec_rec *cache_take_exec(struct site *site, unsigned long long flags, uint64_t shape,
                                 uint64_t prefer_serial)
{
    struct exec_want want = { flags, shape, prefer_serial };
    return (struct exec_rec *)entry_take(CACHE_EXECS, site, exec_suits, &want);
}

void cache_exec_hand_out(struct exec_rec *rec)
{
    entry_hand_out(&rec->entry);
}

void cache_exec_discard(struct exec_rec *rec)
{
    entry_discard(CACHE_EXECS, &rec->entry);
}

static int exec_worth_keeping(const struct cache_entry *e)
{
    enum recap_mode m = e->site->policy.mode;
    return (m == RECAP_MODE_AUTO || m == RECAP_MODE_UPDATE) &&
           !__atomic_load_n(&e->site->no_exec_reuse, __ATOMIC_RELAXED);
}

static CUresult exec_destroy_real(const void *handle)
{
    return DRV_REAL(cuGraphExecDestroy)((CUgraphExec)handle);
}

CUresult cache_on_exec_destroy(enum drv_id id, CUgraphExec exec)
{
    (void)id;
    if (runtime_passthrough || !exec)
        return DRV_REAL(cuGraphExecDestroy)(exec);
    return entry_on_destroy(CACHE_EXECS, exec, exec_worth_keeping, exec_destroy_real);
}

void exec_note_mutated(CUgraphExec exec)
{
    if (runtime_passthrough)
        return;
    pthread_mutex_lock(&cache_lock);
    struct exec_rec *rec = hmap_get(&kinds[CACHE_EXECS].by_handle, exec);
    if (rec)
        rec->mutated = 1;
    pthread_mutex_unlock(&cache_lock);
}

/* --- memory pressure, fork ----------------------------------------------------------- */

int cache_release_all(void)
{
    struct cache_entry *lists[CACHE_KINDS];
    int n = 0;

    if (runtime_passthrough)
        return 0;
    pthread_mutex_lock(&cache_lock);
    for (int k = 0; k < CACHE_KINDS; k++) {
        struct kind_state *ks = &kinds[k];
        lists[k] = ks->oldest;
        n += ks->released;
        for (struct cache_entry *e = ks->oldest; e; e = e->newer) {
            hmap_del(&ks->by_handle, e->handle);
            e->site->n_released[k]--;
        }
        ks->oldest = ks->newest = NULL;
        ks->released = 0;
    }
    pthread_mutex_unlock(&cache_lock);

    for (int k = 0; k < CACHE_KINDS; k++) {
        for (struct cache_entry *e = lists[k], *next; e; e = next) {
            next = e->newer;
            /* Memory is short, or a library waits for its user objects:
             * give the references back now. */
            entry_destroy_waiting((enum cache_kind)k, e, 1);
        }
    }
    uobj_settle_all();
    return n;
}

int cache_release_for_oom(void)
{
    int n = cache_release_all();
    if (n)
        event_warning(NULL, "device memory exhausted: released %d cached graphs and "
                            "executable graphs, retrying the allocation", n);
    return n;
}

void cache_after_fork_child(void)
{
    /* The child cannot use the parent's CUDA objects: forget them without
     * calling the driver. TAKEN entries belong to captures, which the
     * capture module dropped first. */
    pthread_mutex_init(&cache_lock, NULL);
    for (int k = 0; k < CACHE_KINDS; k++) {
        struct kind_state *ks = &kinds[k];
        for (size_t i = 0; i < ks->by_handle.cap; i++)
            if (ks->by_handle.slots[i].key)
                entry_free((enum cache_kind)k, ks->by_handle.slots[i].value);
        hmap_clear(&ks->by_handle);
        ks->oldest = ks->newest = NULL;
        ks->released = 0;
    }
}
