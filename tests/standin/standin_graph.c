/*
 * standin_graph.c - graphs as containers: creation, destruction, cloning,
 * nodes and edges, user objects and conditional handles.
 *
 * Owns: struct si_graph and the structure of struct si_node (its edges and
 * its place in creation order), the device memory graphs are charged, the
 * poisoned state a failed recapture leaves, user-object reference counts.
 * Must never: interpret node parameters beyond their type (standin_params.c)
 * or create nodes of a particular kind for the API (standin_nodes.c).
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

CUresult si_graph_new(struct si_graph **out)
{
    struct si_graph *g = si_calloc(1, sizeof(*g));
    struct si_context *c = si_current_ctx();
    si_obj_init(g, SI_GRAPH);
    g->ctx = c && c->h.state == SI_LIVE ? c : NULL;
    *out = g;
    return CUDA_SUCCESS;
}

static void user_object_destroy(struct si_user_object *u)
{
    si_user_code_begin("a user object destructor");
    u->destroy(u->ptr);
    si_user_code_end();
    si_obj_kill(u);
}

void si_user_object_release(struct si_user_object *u, long count)
{
    u->refs -= count;
    if (u->refs > 0) return;
    if (si_async_active()) si_async_destroy_user_object(u);
    else user_object_destroy(u);
}

void si_graph_release_user_objects(struct si_graph *g)
{
    struct si_vec refs = g->urefs;
    memset(&g->urefs, 0, sizeof(g->urefs));
    for (size_t i = 0; i < refs.n; i++) si_user_object_release(refs.v[i], 1);
    si_vec_free(&refs);
}

/* --- arguments a clone shares (STANDIN_CLONE_SHARES) ------------------ */

struct si_param_share {
    unsigned members;
    bool broken; /* a member was set while others shared it */
};

static void share_leave(struct si_node *n, bool set)
{
    struct si_param_share *s = n->share;
    if (!s) return;
    n->share = NULL;
    if (--s->members == 0) {
        free(s);
        return;
    }
    if (set) s->broken = true;
}

static void share_join(struct si_node *clone, struct si_node *original)
{
    if (!si.clone_shares_params || original->p.np.type != CU_GRAPH_NODE_TYPE_KERNEL) return;
    if (!original->share) {
        original->share = si_calloc(1, sizeof(*original->share));
        original->share->members = 1;
    }
    clone->share = original->share;
    clone->share->members++;
}

void si_node_params_set(struct si_node *n)
{
    share_leave(n, true);
}

CUresult si_graph_check_shared(struct si_graph *g, const char *what)
{
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct si_node *n = g->nodes.v[i];
        if (n->share && n->share->broken) {
            si_misuse("%s of a graph whose kernel node shares its arguments with a clone set since "
                      "(driver 580 crashes here)", what);
            return CUDA_ERROR_ILLEGAL_STATE;
        }
    }
    return CUDA_SUCCESS;
}

static void node_free(struct si_node *n)
{
    share_leave(n, false);
    si_params_free(&n->p);
    si_vec_free(&n->deps);
    si_vec_free(&n->outs);
    si_obj_kill(n);
}

void si_graph_free(struct si_graph *g)
{
    for (size_t i = 0; i < g->nodes.n; i++) node_free(g->nodes.v[i]);
    si_vec_free(&g->nodes);
    si_graph_release_user_objects(g);
    for (size_t i = 0; i < g->cond_handles.n; i++)
        si_cond_handle_drop(((struct si_cond_handle *)g->cond_handles.v[i])->id);
    si_vec_free(&g->cond_handles);
    si_mem_uncharge(g->charged);
    g->charged = 0;
    si_obj_kill(g);
}

/* The context's graphs go as cuGraphDestroy would take them. A graph a
 * node owns (child graph, conditional body) goes with its node's graph;
 * captures into the context's graphs have already ended. */
void si_graph_drop_context(struct si_context *ctx)
{
    struct si_vec graphs = {0};
    si_registry_collect(SI_GRAPH, &graphs);
    for (size_t i = 0; i < graphs.n; i++) {
        struct si_graph *g = graphs.v[i];
        if (g->h.state != SI_DEAD && g->ctx == ctx && !g->owner && !g->capturing) si_graph_free(g);
    }
    si_vec_free(&graphs);
}

void si_graph_poison(struct si_graph *g, const char *why)
{
    (void)why;
    if (g->h.state == SI_LIVE) g->h.state = SI_POISONED;
}

size_t si_graph_index(const struct si_graph *g, const struct si_node *n)
{
    for (size_t i = 0; i < g->nodes.n; i++)
        if (g->nodes.v[i] == n) return i;
    return (size_t)-1;
}

bool si_graph_has_type(const struct si_graph *g, CUgraphNodeType type, bool recursive)
{
    for (size_t i = 0; i < g->nodes.n; i++) {
        const struct si_node *n = g->nodes.v[i];
        if (n->p.np.type == type) return true;
        if (recursive && n->p.child && si_graph_has_type(n->p.child, type, true)) return true;
    }
    return false;
}

/* Dependencies passed by the program: live nodes of this graph, no
 * duplicates, default (zero) edge data only. */
CUresult si_graph_check_deps(struct si_graph *g, const CUgraphNode *deps, size_t n,
                             const CUgraphEdgeData *edata)
{
    static const CUgraphEdgeData zero;
    if (n && !deps) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        struct si_node *d;
        CUresult rc = si_get(deps[i], SI_NODE, &d);
        if (rc) return rc;
        if (d->graph != g) return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
        if (edata && memcmp(&edata[i], &zero, sizeof(zero)) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

CUresult si_graph_add(struct si_graph *g, struct si_params *p, struct si_node *const *deps,
                      size_t ndeps, struct si_node **out)
{
    CUresult rc = si_mem_charge(SI_GRAPH_NODE_CHARGE);
    if (rc) {
        si_params_free(p);
        return rc;
    }
    g->charged += SI_GRAPH_NODE_CHARGE;
    struct si_node *n = si_calloc(1, sizeof(*n));
    si_obj_init(n, SI_NODE);
    n->graph = g;
    n->p = *p;
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < ndeps; i++) {
        si_vec_push(&n->deps, deps[i]);
        si_vec_push(&deps[i]->outs, n);
    }
    if (n->p.child) n->p.child->owner = n;
    for (unsigned i = 0; n->p.cond && i < n->p.cond->nbodies; i++) n->p.cond->bodies[i]->owner = n;
    si_vec_push(&g->nodes, n);
    if (out) *out = n;
    return CUDA_SUCCESS;
}

CUresult si_graph_clone(struct si_graph *src, struct si_graph **out)
{
    struct si_graph *g;
    if (si_graph_has_type(src, CU_GRAPH_NODE_TYPE_MEM_ALLOC, true) ||
        si_graph_has_type(src, CU_GRAPH_NODE_TYPE_MEM_FREE, true) ||
        si_graph_has_type(src, CU_GRAPH_NODE_TYPE_CONDITIONAL, true))
        return CUDA_ERROR_NOT_SUPPORTED;
    si_graph_new(&g);
    for (size_t i = 0; i < src->nodes.n; i++) ((struct si_node *)src->nodes.v[i])->scratch = i;
    for (size_t i = 0; i < src->nodes.n; i++) {
        struct si_node *sn = src->nodes.v[i], *cn;
        struct si_params p;
        si_params_copy(&p, &sn->p);
        if (sn->p.child) si_graph_clone(sn->p.child, &p.child);
        if (p.child) p.np.graph.graph = (CUgraph)p.child;
        struct si_node **deps = si_calloc(sn->deps.n, sizeof(*deps));
        for (size_t j = 0; j < sn->deps.n; j++)
            deps[j] = g->nodes.v[((struct si_node *)sn->deps.v[j])->scratch];
        CUresult rc = si_graph_add(g, &p, deps, sn->deps.n, &cn);
        free(deps);
        if (rc) {
            si_graph_free(g);
            return rc;
        }
        cn->clone_of = sn;
        share_join(cn, sn);
    }
    for (size_t i = 0; i < src->urefs.n; i++) {
        struct si_user_object *u = src->urefs.v[i];
        u->refs++;
        si_vec_push(&g->urefs, u);
    }
    *out = g;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Graph entry points.                                                 */

SI_EXPORT CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    SI_ENTER(cuGraphCreate);
    if (!phGraph || flags) return si_leave(CUDA_ERROR_INVALID_VALUE);
    return si_leave(si_graph_new((struct si_graph **)phGraph));
}

static bool names_unloaded(const struct si_params *p)
{
    return p->np.type == CU_GRAPH_NODE_TYPE_KERNEL && p->func && p->func->h.state != SI_LIVE;
}

bool si_graph_names_unloaded_code(const struct si_graph *g)
{
    for (size_t i = 0; i < g->nodes.n; i++) {
        const struct si_node *n = g->nodes.v[i];
        if (names_unloaded(&n->p) || (n->p.child && si_graph_names_unloaded_code(n->p.child)))
            return true;
    }
    return false;
}

bool si_exec_names_unloaded_code(const struct si_exec *e)
{
    for (size_t i = 0; i < e->n; i++) {
        const struct si_exec_node *en = &e->nodes[i];
        if (names_unloaded(&en->p) || (en->child && si_exec_names_unloaded_code(en->child)))
            return true;
    }
    return false;
}

/* A graph left undefined by a failed recapture may be destroyed once; a
 * second destroy of any graph is a misuse. */
static CUresult graph_destroy(CUgraph hGraph)
{
    struct si_graph *g;
    CUresult rc = si_get_any(hGraph, SI_GRAPH, &g);
    if (rc) return rc;
    if (g->h.state == SI_DEAD) {
        si_misuse("cuGraphDestroy of a graph already destroyed (%p)", (void *)g);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (g->owner) return CUDA_ERROR_INVALID_VALUE; /* owned by a node */
    if (g->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if (si.unloaded_code_refused && si_graph_names_unloaded_code(g))
        si_misuse("cuGraphDestroy of a graph naming a kernel whose module or library was "
                  "unloaded (%p)", (void *)g);
    si_graph_free(g);
    return CUDA_SUCCESS;
}

SI_API(cuGraphDestroy, (CUgraph hGraph), graph_destroy(hGraph))

static CUresult graph_clone(CUgraph *phClone, CUgraph original)
{
    struct si_graph *g;
    CUresult rc = si_get(original, SI_GRAPH, &g);
    if (rc) return rc;
    if (!phClone) return CUDA_ERROR_INVALID_VALUE;
    return si_graph_clone(g, (struct si_graph **)phClone);
}

SI_API(cuGraphClone, (CUgraph *phGraphClone, CUgraph originalGraph), graph_clone(phGraphClone, originalGraph))

static CUresult find_in_clone(CUgraphNode *out, CUgraphNode hOriginal, CUgraph hCloned)
{
    struct si_graph *g;
    struct si_node *orig;
    CUresult rc = si_get(hCloned, SI_GRAPH, &g);
    if (rc || (rc = si_get(hOriginal, SI_NODE, &orig))) return rc;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct si_node *n = g->nodes.v[i];
        if (n->clone_of == orig) {
            *out = (CUgraphNode)n;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

SI_API(cuGraphNodeFindInClone, (CUgraphNode *phNode, CUgraphNode hOriginalNode, CUgraph hClonedGraph),
       find_in_clone(phNode, hOriginalNode, hClonedGraph))

/* Graphs with memory nodes keep their nodes and edges (cuGraphAddMemAllocNode). */
static bool graph_frozen(const struct si_graph *g)
{
    return si_graph_has_type(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, false) ||
           si_graph_has_type(g, CU_GRAPH_NODE_TYPE_MEM_FREE, false);
}

static CUresult destroy_node(CUgraphNode hNode)
{
    struct si_node *n;
    CUresult rc = si_get_any(hNode, SI_NODE, &n);
    if (rc) return rc;
    if (n->h.state == SI_DEAD) {
        si_misuse("cuGraphDestroyNode of a node already destroyed (%p)", (void *)n);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((rc = si_get(hNode, SI_NODE, &n))) return rc;
    struct si_graph *g = n->graph;
    if (g->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if (graph_frozen(g)) return CUDA_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; i < n->deps.n; i++) si_vec_remove(&((struct si_node *)n->deps.v[i])->outs, n);
    for (size_t i = 0; i < n->outs.n; i++) si_vec_remove(&((struct si_node *)n->outs.v[i])->deps, n);
    si_vec_remove(&g->nodes, n);
    si_mem_uncharge(SI_GRAPH_NODE_CHARGE);
    g->charged -= SI_GRAPH_NODE_CHARGE;
    node_free(n);
    return CUDA_SUCCESS;
}

SI_API(cuGraphDestroyNode, (CUgraphNode hNode), destroy_node(hNode))

static CUresult edge_nodes(struct si_graph *g, CUgraphNode from, CUgraphNode to, struct si_node **f,
                           struct si_node **t)
{
    CUresult rc = si_get(from, SI_NODE, f);
    if (rc || (rc = si_get(to, SI_NODE, t))) return rc;
    if ((*f)->graph != g || (*t)->graph != g || *f == *t) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult change_edges(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                             const CUgraphEdgeData *edata, size_t n, bool add)
{
    static const CUgraphEdgeData zero;
    struct si_graph *g;
    struct si_node *f, *t;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc) return rc;
    if (n && (!from || !to)) return CUDA_ERROR_INVALID_VALUE;
    if (!add && graph_frozen(g)) return CUDA_ERROR_NOT_SUPPORTED;
    for (size_t i = 0; i < n; i++) { /* validate all before changing any */
        if ((rc = edge_nodes(g, from[i], to[i], &f, &t))) return rc;
        if (si_vec_contains(&t->deps, f) == add) return CUDA_ERROR_INVALID_VALUE;
        if (edata && memcmp(&edata[i], &zero, sizeof(zero)) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    }
    for (size_t i = 0; i < n; i++) {
        edge_nodes(g, from[i], to[i], &f, &t);
        if (add) {
            si_vec_push(&t->deps, f);
            si_vec_push(&f->outs, t);
        } else {
            si_vec_remove(&t->deps, f);
            si_vec_remove(&f->outs, t);
        }
    }
    return CUDA_SUCCESS;
}

SI_API(cuGraphAddDependencies, (CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n),
       change_edges(g, from, to, NULL, n, true))
SI_API(cuGraphAddDependencies_v2, (CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                   const CUgraphEdgeData *e, size_t n),
       change_edges(g, from, to, e, n, true))
SI_API(cuGraphRemoveDependencies, (CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n),
       change_edges(g, from, to, NULL, n, false))
SI_API(cuGraphRemoveDependencies_v2, (CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                      const CUgraphEdgeData *e, size_t n),
       change_edges(g, from, to, e, n, false))

/* ------------------------------------------------------------------ */
/* User objects.                                                       */

static CUresult user_object_create(CUuserObject *out, void *ptr, CUhostFn destroy, unsigned refs,
                                   unsigned flags)
{
    if (!out || !destroy || refs == 0 || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    struct si_user_object *u = si_calloc(1, sizeof(*u));
    si_obj_init(u, SI_USER_OBJECT);
    u->ptr = ptr;
    u->destroy = destroy;
    u->refs = refs;
    *out = (CUuserObject)u;
    return CUDA_SUCCESS;
}

SI_API(cuUserObjectCreate, (CUuserObject *o, void *ptr, CUhostFn destroy, unsigned int initialRefcount,
                            unsigned int flags),
       user_object_create(o, ptr, destroy, initialRefcount, flags))

static CUresult user_object_change(CUuserObject obj, unsigned count, bool retain)
{
    struct si_user_object *u;
    CUresult rc = si_get(obj, SI_USER_OBJECT, &u);
    if (rc) return rc;
    if (count == 0) return CUDA_ERROR_INVALID_VALUE;
    if (retain) {
        u->refs += count;
    } else {
        if ((long)count > u->refs) {
            si_misuse("cuUserObjectRelease of more references than exist");
            return CUDA_ERROR_INVALID_VALUE;
        }
        si_user_object_release(u, count);
    }
    return CUDA_SUCCESS;
}

SI_API(cuUserObjectRetain, (CUuserObject o, unsigned int count), user_object_change(o, count, true))
SI_API(cuUserObjectRelease, (CUuserObject o, unsigned int count), user_object_change(o, count, false))

static CUresult graph_retain_user_object(CUgraph hGraph, CUuserObject obj, unsigned count, unsigned flags)
{
    struct si_graph *g;
    struct si_user_object *u;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc || (rc = si_get(obj, SI_USER_OBJECT, &u))) return rc;
    if (count == 0 || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE)) return CUDA_ERROR_INVALID_VALUE;
    if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) u->refs += count; /* MOVE takes the caller's */
    for (unsigned i = 0; i < count; i++) si_vec_push(&g->urefs, u);
    return CUDA_SUCCESS;
}

static CUresult graph_release_user_object(CUgraph hGraph, CUuserObject obj, unsigned count)
{
    struct si_graph *g;
    struct si_user_object *u;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc || (rc = si_get(obj, SI_USER_OBJECT, &u))) return rc;
    size_t held = 0;
    for (size_t i = 0; i < g->urefs.n; i++) held += g->urefs.v[i] == u;
    if (count == 0 || count > held) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) si_vec_remove(&g->urefs, u);
    si_user_object_release(u, count);
    return CUDA_SUCCESS;
}

SI_API(cuGraphRetainUserObject, (CUgraph g, CUuserObject o, unsigned int count, unsigned int flags),
       graph_retain_user_object(g, o, count, flags))
SI_API(cuGraphReleaseUserObject, (CUgraph g, CUuserObject o, unsigned int count),
       graph_release_user_object(g, o, count))

/* ------------------------------------------------------------------ */
/* Conditional handles.                                                */

struct si_cond_handle *si_cond_handle_find(CUgraphConditionalHandle h)
{
    for (size_t i = 0; i < si.cond_handles.n; i++) {
        struct si_cond_handle *c = si.cond_handles.v[i];
        if (c->id == h) return c;
    }
    return NULL;
}

void si_cond_handle_hold(CUgraphConditionalHandle h)
{
    struct si_cond_handle *c = si_cond_handle_find(h);
    if (c) c->refs++;
}

void si_cond_handle_drop(CUgraphConditionalHandle h)
{
    struct si_cond_handle *c = si_cond_handle_find(h);
    if (!c || --c->refs > 0) return;
    si_vec_remove(&si.cond_handles, c);
    free(c);
}

static CUresult cond_handle_create(CUgraphConditionalHandle *out, CUgraph hGraph, CUcontext ctx,
                                   unsigned defaultValue, unsigned flags)
{
    struct si_graph *g;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc) return rc;
    if (!out || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT)) return CUDA_ERROR_INVALID_VALUE;
    struct si_cond_handle *c = si_calloc(1, sizeof(*c));
    c->id = si.next_cond_handle++;
    c->default_value = c->value = defaultValue;
    c->flags = flags;
    c->refs = 1;
    si_vec_push(&si.cond_handles, c);
    si_vec_push(&g->cond_handles, c);
    *out = c->id;
    return CUDA_SUCCESS;
}

SI_API(cuGraphConditionalHandleCreate, (CUgraphConditionalHandle *h, CUgraph g, CUcontext ctx,
                                        unsigned int defaultLaunchValue, unsigned int flags),
       cond_handle_create(h, g, ctx, defaultLaunchValue, flags))

SI_EXPORT int standin_set_conditional(CUgraphConditionalHandle handle, unsigned value)
{
    si_control_lock();
    struct si_cond_handle *c = si_cond_handle_find(handle);
    if (c) c->value = value;
    si_control_unlock();
    return c ? 0 : -1;
}
