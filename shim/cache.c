/*
 * cache.c - records of graphs and executable graphs, and the released ones
 * recap keeps.
 *
 * Two handle maps find records by handle whatever their state, so that a
 * second destroy of a handle the program already destroyed is recognised
 * (it returns CUDA_ERROR_INVALID_VALUE, as the driver does for a handle it
 * does not know) and never destroys what recap keeps. Released records sit
 * on one global list per kind, oldest first: the site's own max_graphs and
 * the global cap evict from the front, and OOM empties it.
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

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap graphs_by_handle;     /* CUgraph -> struct graph_rec */
static struct hmap execs_by_handle;      /* CUgraphExec -> struct exec_rec */
static struct graph_rec *released_graphs_head, *released_graphs_tail;
static struct exec_rec *released_execs_head, *released_execs_tail;
static int released_graphs_count, released_execs_count;
static uint64_t next_graph_serial = 1;

/* --- released lists (under cache_lock) ------------------------------------ */

#define LIST_PUSH(head, tail, rec)                          \
    do {                                                    \
        (rec)->link.prev = (tail);                          \
        (rec)->link.next = NULL;                            \
        if (tail)                                           \
            (tail)->link.next = (rec);                      \
        else                                                \
            (head) = (rec);                                 \
        (tail) = (rec);                                     \
    } while (0)

#define LIST_UNLINK(head, tail, rec, type)                  \
    do {                                                    \
        type *p_ = (rec)->link.prev, *n_ = (rec)->link.next; \
        if (p_)                                             \
            p_->link.next = n_;                             \
        else                                                \
            (head) = n_;                                    \
        if (n_)                                             \
            n_->link.prev = p_;                             \
        else                                                \
            (tail) = p_;                                    \
        (rec)->link.prev = (rec)->link.next = NULL;         \
    } while (0)

static void graph_unlink_released(struct graph_rec *rec)
{
    LIST_UNLINK(released_graphs_head, released_graphs_tail, rec, struct graph_rec);
    released_graphs_count--;
    rec->site->n_released_graphs--;
}

static void exec_unlink_released(struct exec_rec *rec)
{
    LIST_UNLINK(released_execs_head, released_execs_tail, rec, struct exec_rec);
    released_execs_count--;
    rec->site->n_released_execs--;
}

/* Objects evicted under the lock, destroyed after it is dropped. */
struct evictions {
    struct graph_rec *graphs[8];
    struct exec_rec *execs[8];
    int ngraphs, nexecs;
};

static void evict_graphs_over_limit(struct site *site, struct evictions *ev)
{
    for (struct graph_rec *r = released_graphs_head, *next; r && ev->ngraphs < 8; r = next) {
        next = r->link.next;
        int over_site = r->site == site && site->n_released_graphs > site->policy.max_graphs;
        int over_global = released_graphs_count > CACHE_GLOBAL_MAX_GRAPHS;
        if (!over_site && !over_global)
            continue;
        graph_unlink_released(r);
        hmap_del(&graphs_by_handle, r->graph);
        ev->graphs[ev->ngraphs++] = r;
    }
}

static void evict_execs_over_limit(struct site *site, struct evictions *ev)
{
    for (struct exec_rec *r = released_execs_head, *next; r && ev->nexecs < 8; r = next) {
        next = r->link.next;
        int over_site = r->site == site && site->n_released_execs > site->policy.max_graphs;
        int over_global = released_execs_count > CACHE_GLOBAL_MAX_EXECS;
        if (!over_site && !over_global)
            continue;
        exec_unlink_released(r);
        hmap_del(&execs_by_handle, r->exec);
        ev->execs[ev->nexecs++] = r;
    }
}

static void graph_rec_free(struct graph_rec *rec)
{
    free(rec->changed);
    free(rec);
}

/* Destroys a graph or executable graph recap owns; a failure is logged,
 * there is nothing else to do about it. */
static void destroy_graph(struct site *site, CUgraph graph)
{
    CUresult r = DRV_REAL(cuGraphDestroy)(graph);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(site, "cuGraphDestroy", r, "the graph may stay allocated");
}

static void destroy_exec(struct site *site, CUgraphExec exec)
{
    CUresult r = DRV_REAL(cuGraphExecDestroy)(exec);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(site, "cuGraphExecDestroy", r,
                              "the executable graph may stay allocated");
}

static void destroy_evicted(struct evictions *ev)
{
    for (int i = 0; i < ev->ngraphs; i++) {
        destroy_graph(ev->graphs[i]->site, ev->graphs[i]->graph);
        graph_rec_free(ev->graphs[i]);
    }
    for (int i = 0; i < ev->nexecs; i++) {
        destroy_exec(ev->execs[i]->site, ev->execs[i]->exec);
        free(ev->execs[i]);
    }
}

/* --- graphs ---------------------------------------------------------------- */

struct graph_rec *cache_graph_track(CUgraph graph, struct site *site, uint64_t shape, long nodes)
{
    struct graph_rec *rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    rec->graph = graph;
    rec->site = site;
    rec->shape = shape;
    rec->nodes = nodes;
    rec->state = CACHE_HELD;
    pthread_mutex_lock(&cache_lock);
    rec->serial = next_graph_serial++;
    /* The driver may reuse the address of a graph it destroyed behind our
     * back (never one we track as released or taken: those are alive). */
    struct graph_rec *stale = hmap_get(&graphs_by_handle, graph);
    if (stale && stale->state == CACHE_HELD) {
        hmap_del(&graphs_by_handle, graph);
        graph_rec_free(stale);
    }
    if (hmap_put(&graphs_by_handle, graph, rec) != 0) {
        free(rec);
        rec = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    return rec;
}

struct graph_rec *cache_graph_held(CUgraph graph)
{
    pthread_mutex_lock(&cache_lock);
    struct graph_rec *rec = hmap_get(&graphs_by_handle, graph);
    if (rec && rec->state != CACHE_HELD)
        rec = NULL;
    pthread_mutex_unlock(&cache_lock);
    return rec;
}

struct graph_rec *cache_take_graph(struct site *site, uint64_t shape)
{
    struct graph_rec *found = NULL;
    pthread_mutex_lock(&cache_lock);
    /* Newest first: the most recently released graph of the shape is the
     * one whose parameters are likeliest to match. */
    for (struct graph_rec *r = released_graphs_tail; r; r = r->link.prev) {
        if (r->site == site && r->shape == shape) {
            found = r;
            break;
        }
    }
    if (found) {
        graph_unlink_released(found);
        found->state = CACHE_TAKEN;
    }
    pthread_mutex_unlock(&cache_lock);
    return found;
}

void cache_graph_hand_out(struct graph_rec *rec)
{
    pthread_mutex_lock(&cache_lock);
    rec->state = CACHE_HELD;
    pthread_mutex_unlock(&cache_lock);
}

void cache_graph_discard(struct graph_rec *rec)
{
    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&graphs_by_handle, rec->graph) == rec)
        hmap_del(&graphs_by_handle, rec->graph);
    pthread_mutex_unlock(&cache_lock);
    destroy_graph(rec->site, rec->graph);
    graph_rec_free(rec);
}

void cache_graph_set_changes(struct graph_rec *rec, struct changed_node *changed, size_t n, int known)
{
    free(rec->changed);
    rec->changed = changed;
    rec->nchanged = n;
    rec->changes_known = known;
}

/* Whether the site will ever recapture into a released graph. */
static int site_keeps_graphs(const struct site *site)
{
    enum recap_mode m = site->policy.mode;
    return (m == RECAP_MODE_AUTO || m == RECAP_MODE_RECAPTURE) && drv_caps.recapture_begin &&
           !__atomic_load_n(&site->no_recapture, __ATOMIC_RELAXED);
}

static long graph_node_count(struct site *site, CUgraph graph)
{
    size_t n = 0;
    CUresult r = DRV_REAL(cuGraphGetNodes)(graph, NULL, &n);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(site, "cuGraphGetNodes", r, "the released graph is not kept");
        return -1;
    }
    return (long)n;
}

CUresult cache_on_graph_destroy(enum drv_id id, CUgraph graph)
{
    struct evictions ev = { .ngraphs = 0 };
    (void)id;
    if (runtime_passthrough || !graph)
        return DRV_REAL(cuGraphDestroy)(graph);

    pthread_mutex_lock(&cache_lock);
    struct graph_rec *rec = hmap_get(&graphs_by_handle, graph);
    if (!rec) {
        pthread_mutex_unlock(&cache_lock);
        return DRV_REAL(cuGraphDestroy)(graph);
    }
    if (rec->state != CACHE_HELD) {
        struct site *site = rec->site;
        pthread_mutex_unlock(&cache_lock);
        event_warning(site, "cuGraphDestroy of a graph the program already destroyed; "
                            "recap's cached graph kept, CUDA_ERROR_INVALID_VALUE returned");
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct site *site = rec->site;
    long recorded_nodes = rec->nodes;
    pthread_mutex_unlock(&cache_lock);

    /* A graph the program edited after capture would only make the next
     * recapture fail: check its node count before keeping it. */
    int keep = site_keeps_graphs(site) && graph_node_count(site, graph) == recorded_nodes;

    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&graphs_by_handle, graph) != rec || rec->state != CACHE_HELD) {
        /* A racing destroy of the same handle in another thread won. */
        pthread_mutex_unlock(&cache_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (keep) {
        rec->state = CACHE_RELEASED;
        LIST_PUSH(released_graphs_head, released_graphs_tail, rec);
        released_graphs_count++;
        site->n_released_graphs++;
        evict_graphs_over_limit(site, &ev);
    } else {
        hmap_del(&graphs_by_handle, graph);
    }
    pthread_mutex_unlock(&cache_lock);

    if (keep) {
        destroy_evicted(&ev);
        return CUDA_SUCCESS;
    }
    graph_rec_free(rec);
    return DRV_REAL(cuGraphDestroy)(graph);
}

/* --- executable graphs ----------------------------------------------------- */

struct exec_rec *cache_exec_track(CUgraphExec exec, struct site *site, unsigned long long flags,
                                  uint64_t shape, long nodes, uint64_t source_serial)
{
    struct exec_rec *rec = calloc(1, sizeof *rec);
    if (!rec)
        return NULL;
    rec->exec = exec;
    rec->site = site;
    rec->flags = flags;
    rec->shape = shape;
    rec->nodes = nodes;
    rec->source_serial = source_serial;
    rec->state = CACHE_HELD;
    pthread_mutex_lock(&cache_lock);
    struct exec_rec *stale = hmap_get(&execs_by_handle, exec);
    if (stale && stale->state == CACHE_HELD) {
        hmap_del(&execs_by_handle, exec);
        free(stale);
    }
    if (hmap_put(&execs_by_handle, exec, rec) != 0) {
        free(rec);
        rec = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    return rec;
}

struct exec_rec *cache_take_exec(struct site *site, unsigned long long flags, uint64_t shape,
                                 uint64_t prefer_serial)
{
    struct exec_rec *found = NULL;
    pthread_mutex_lock(&cache_lock);
    for (struct exec_rec *r = released_execs_tail; r; r = r->link.prev) {
        if (r->site != site || r->flags != flags || r->shape != shape)
            continue;
        if (!found || (r->source_serial == prefer_serial && found->source_serial != prefer_serial))
            found = r;
        if (found->source_serial == prefer_serial)
            break;
    }
    if (found) {
        exec_unlink_released(found);
        found->state = CACHE_TAKEN;
    }
    pthread_mutex_unlock(&cache_lock);
    return found;
}

void cache_exec_hand_out(struct exec_rec *rec)
{
    pthread_mutex_lock(&cache_lock);
    rec->state = CACHE_HELD;
    pthread_mutex_unlock(&cache_lock);
}

void cache_exec_discard(struct exec_rec *rec)
{
    pthread_mutex_lock(&cache_lock);
    if (hmap_get(&execs_by_handle, rec->exec) == rec)
        hmap_del(&execs_by_handle, rec->exec);
    pthread_mutex_unlock(&cache_lock);
    destroy_exec(rec->site, rec->exec);
    free(rec);
}

static int site_keeps_execs(const struct site *site)
{
    enum recap_mode m = site->policy.mode;
    return m == RECAP_MODE_AUTO || m == RECAP_MODE_UPDATE;
}

CUresult cache_on_exec_destroy(enum drv_id id, CUgraphExec exec)
{
    struct evictions ev = { .nexecs = 0 };
    (void)id;
    if (runtime_passthrough || !exec)
        return DRV_REAL(cuGraphExecDestroy)(exec);

    pthread_mutex_lock(&cache_lock);
    struct exec_rec *rec = hmap_get(&execs_by_handle, exec);
    if (!rec) {
        pthread_mutex_unlock(&cache_lock);
        return DRV_REAL(cuGraphExecDestroy)(exec);
    }
    struct site *site = rec->site;
    if (rec->state != CACHE_HELD) {
        pthread_mutex_unlock(&cache_lock);
        event_warning(site, "cuGraphExecDestroy of an executable graph the program already "
                            "destroyed; recap's cached one kept, CUDA_ERROR_INVALID_VALUE returned");
        return CUDA_ERROR_INVALID_VALUE;
    }
    int keep = site_keeps_execs(site);
    if (keep) {
        rec->state = CACHE_RELEASED;
        LIST_PUSH(released_execs_head, released_execs_tail, rec);
        released_execs_count++;
        site->n_released_execs++;
        evict_execs_over_limit(site, &ev);
    } else {
        hmap_del(&execs_by_handle, exec);
    }
    pthread_mutex_unlock(&cache_lock);

    if (keep) {
        destroy_evicted(&ev);
        return CUDA_SUCCESS;
    }
    free(rec);
    return DRV_REAL(cuGraphExecDestroy)(exec);
}

void exec_note_mutated(CUgraphExec exec)
{
    if (runtime_passthrough)
        return;
    pthread_mutex_lock(&cache_lock);
    struct exec_rec *rec = hmap_get(&execs_by_handle, exec);
    if (rec)
        rec->mutated = 1;
    pthread_mutex_unlock(&cache_lock);
}

/* --- memory pressure, fork --------------------------------------------------- */

int cache_release_for_oom(void)
{
    struct graph_rec *graphs;
    struct exec_rec *execs;
    int n;

    if (runtime_passthrough)
        return 0;
    pthread_mutex_lock(&cache_lock);
    graphs = released_graphs_head;
    execs = released_execs_head;
    n = released_graphs_count + released_execs_count;
    for (struct graph_rec *r = graphs; r; r = r->link.next) {
        hmap_del(&graphs_by_handle, r->graph);
        r->site->n_released_graphs--;
    }
    for (struct exec_rec *r = execs; r; r = r->link.next) {
        hmap_del(&execs_by_handle, r->exec);
        r->site->n_released_execs--;
    }
    released_graphs_head = released_graphs_tail = NULL;
    released_execs_head = released_execs_tail = NULL;
    released_graphs_count = released_execs_count = 0;
    pthread_mutex_unlock(&cache_lock);

    while (graphs) {
        struct graph_rec *next = graphs->link.next;
        destroy_graph(graphs->site, graphs->graph);
        graph_rec_free(graphs);
        graphs = next;
    }
    while (execs) {
        struct exec_rec *next = execs->link.next;
        destroy_exec(execs->site, execs->exec);
        free(execs);
        execs = next;
    }
    if (n)
        event_warning(NULL, "device memory exhausted: released %d cached graphs and "
                            "executable graphs, retrying the allocation", n);
    return n;
}

void cache_counts(int *graphs, int *execs)
{
    pthread_mutex_lock(&cache_lock);
    *graphs = released_graphs_count;
    *execs = released_execs_count;
    pthread_mutex_unlock(&cache_lock);
}

static void free_all_records(struct hmap *m, int graphs)
{
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        if (graphs)
            graph_rec_free(m->slots[i].value);
        else
            free(m->slots[i].value);
    }
    hmap_clear(m);
}

void cache_after_fork_child(void)
{
    /* The child cannot use the parent's CUDA objects: forget them without
     * calling the driver. TAKEN records belong to captures, which the
     * capture module dropped first. */
    pthread_mutex_init(&cache_lock, NULL);
    free_all_records(&graphs_by_handle, 1);
    free_all_records(&execs_by_handle, 0);
    released_graphs_head = released_graphs_tail = NULL;
    released_execs_head = released_execs_tail = NULL;
    released_graphs_count = released_execs_count = 0;
}
