/*
 * standin_nodes.c - the node API of graphs: adding nodes of every kind,
 * reading and changing their parameters, and the structural queries.
 *
 * Owns: the cuGraphAdd*Node entry points (including cuGraphAddNode for child
 * graphs and conditional nodes), the per-type Get/SetParams, and
 * cuGraphGetNodes/RootNodes/Edges, cuGraphNodeGetType/Dependencies/
 * DependentNodes. Must never: change a graph's structure except through
 * si_graph_add, or judge parameters beyond building them.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Child graphs and conditionals (need the graph module to build).      */

static CUresult build_child(struct si_params *p, const CUDA_CHILD_GRAPH_NODE_PARAMS *cp)
{
    struct si_graph *child;
    CUresult rc = si_get(cp->graph, SI_GRAPH, &child);
    if (rc) return rc;
    if (si_graph_has_type(child, CU_GRAPH_NODE_TYPE_CONDITIONAL, true)) return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof(*p));
    p->np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    if (cp->ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
        if (child->owner || child->capturing) return CUDA_ERROR_INVALID_VALUE;
        p->child = child;
    } else if (cp->ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
        if (si_graph_has_type(child, CU_GRAPH_NODE_TYPE_MEM_ALLOC, true) ||
            si_graph_has_type(child, CU_GRAPH_NODE_TYPE_MEM_FREE, true))
            return CUDA_ERROR_INVALID_VALUE;
        if ((rc = si_graph_clone(child, &p->child))) return rc;
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    p->np.graph.graph = (CUgraph)p->child;
    p->np.graph.ownership = cp->ownership;
    return CUDA_SUCCESS;
}

static CUresult build_conditional(struct si_params *p, struct si_graph *g,
                                  const CUDA_CONDITIONAL_NODE_PARAMS *cp)
{
    struct si_cond_handle *h = si_cond_handle_find(cp->handle);
    if (!h || !si_vec_contains(&g->cond_handles, h)) return CUDA_ERROR_INVALID_VALUE;
    bool ok = (cp->type == CU_GRAPH_COND_TYPE_IF && (cp->size == 1 || cp->size == 2)) ||
              (cp->type == CU_GRAPH_COND_TYPE_WHILE && cp->size == 1) ||
              (cp->type == CU_GRAPH_COND_TYPE_SWITCH && cp->size >= 1 && cp->size <= 8);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof(*p));
    p->np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p->np.conditional = *cp;
    p->cond = si_calloc(1, sizeof(*p->cond));
    p->cond->handle = cp->handle;
    p->cond->nbodies = cp->size;
    for (unsigned i = 0; i < cp->size; i++) {
        si_graph_new(&p->cond->bodies[i]);
        p->cond->out_bodies[i] = (CUgraph)p->cond->bodies[i];
    }
    p->np.conditional.phGraph_out = p->cond->out_bodies;
    si_cond_handle_hold(cp->handle);
    return CUDA_SUCCESS;
}

/* A free node for an allocation this graph already frees is refused. */
static bool freed_twice(const struct si_graph *g, const struct si_params *p)
{
    if (p->np.type != CU_GRAPH_NODE_TYPE_MEM_FREE) return false;
    for (size_t i = 0; i < g->nodes.n; i++) {
        const struct si_node *n = g->nodes.v[i];
        if (n->p.np.type == CU_GRAPH_NODE_TYPE_MEM_FREE && n->p.np.free.dptr == p->np.free.dptr)
            return true;
    }
    return false;
}

/* Adds a node described by CUgraphNodeParams; writes back what the driver
 * returns through the parameters (an allocation's address, conditional
 * bodies). */
static CUresult add_node(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps,
                         const CUgraphEdgeData *edata, size_t n, CUgraphNodeParams *np)
{
    struct si_graph *g;
    struct si_params p;
    struct si_node *node;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc) return rc;
    if (!out || !np) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_graph_check_deps(g, deps, n, edata))) return rc;
    if (g->owner && (np->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || np->type == CU_GRAPH_NODE_TYPE_MEM_FREE))
        return CUDA_ERROR_INVALID_VALUE; /* moved child graphs take no more memory nodes */
    if (np->type == CU_GRAPH_NODE_TYPE_GRAPH) rc = build_child(&p, &np->graph);
    else if (np->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) rc = build_conditional(&p, g, &np->conditional);
    else rc = si_params_build(&p, np, si_current_ctx());
    if (rc) return rc;
    if (freed_twice(g, &p)) {
        si_params_free(&p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUdeviceptr dptr = p.np.alloc.dptr;
    CUgraph *bodies = p.cond ? p.cond->out_bodies : NULL;
    if ((rc = si_graph_add(g, &p, (struct si_node *const *)deps, n, &node))) return rc;
    if (np->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) np->alloc.dptr = dptr;
    if (np->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) np->conditional.phGraph_out = bodies;
    *out = (CUgraphNode)node;
    return CUDA_SUCCESS;
}

SI_API(cuGraphAddNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                        CUgraphNodeParams *np),
       add_node(out, g, deps, NULL, n, np))
SI_API(cuGraphAddNode_v2, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                           const CUgraphEdgeData *e, size_t n, CUgraphNodeParams *np),
       add_node(out, g, deps, e, n, np))

static CUresult add_kernel(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                           const void *kp, size_t kp_size)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    if (!kp) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&np.kernel, kp, kp_size);
    return add_node(out, g, deps, NULL, n, &np);
}

SI_API(cuGraphAddKernelNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *kp),
       add_kernel(out, g, deps, n, kp, sizeof(*kp)))
SI_API(cuGraphAddKernelNode_v2, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                 const CUDA_KERNEL_NODE_PARAMS *kp),
       add_kernel(out, g, deps, n, kp, sizeof(*kp)))

static CUgraphNodeParams memcpy_np(const CUDA_MEMCPY3D *c, CUcontext ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    np.memcpy.copyParams = *c;
    np.memcpy.copyCtx = ctx;
    return np;
}

static CUgraphNodeParams memset_np(const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    np.memset.dst = m->dst;
    np.memset.pitch = m->pitch;
    np.memset.value = m->value;
    np.memset.elementSize = m->elementSize;
    np.memset.width = m->width;
    np.memset.height = m->height;
    np.memset.ctx = ctx;
    return np;
}

static CUresult add_typed(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                          CUgraphNodeParams np)
{
    return add_node(out, g, deps, NULL, n, &np);
}

SI_API(cuGraphAddMemcpyNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUDA_MEMCPY3D *c, CUcontext ctx),
       c ? add_typed(out, g, deps, n, memcpy_np(c, ctx)) : CUDA_ERROR_INVALID_VALUE)
SI_API(cuGraphAddMemsetNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx),
       m ? add_typed(out, g, deps, n, memset_np(m, ctx)) : CUDA_ERROR_INVALID_VALUE)
SI_API(cuGraphAddHostNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                            const CUDA_HOST_NODE_PARAMS *h),
       h ? add_typed(out, g, deps, n,
                     (CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_HOST,
                                         .host = {.fn = h->fn, .userData = h->userData}})
         : CUDA_ERROR_INVALID_VALUE)
SI_API(cuGraphAddEmptyNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n),
       add_typed(out, g, deps, n, (CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_EMPTY}))
SI_API(cuGraphAddEventRecordNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                   CUevent e),
       add_typed(out, g, deps, n,
                 (CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .eventRecord = {e}}))
SI_API(cuGraphAddEventWaitNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                 CUevent e),
       add_typed(out, g, deps, n,
                 (CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT, .eventWait = {e}}))
SI_API(cuGraphAddMemFreeNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                               CUdeviceptr dptr),
       add_typed(out, g, deps, n,
                 (CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free = {dptr}}))
SI_API(cuGraphAddChildGraphNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                  CUgraph child),
       add_typed(out, g, deps, n,
                 (CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_GRAPH, .graph = {.graph = child}}))

static CUresult add_mem_alloc(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              CUDA_MEM_ALLOC_NODE_PARAMS *ap)
{
    if (!ap) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC};
    memcpy(&np.alloc, ap, sizeof(*ap));
    CUresult rc = add_node(out, g, deps, NULL, n, &np);
    if (!rc) ap->dptr = np.alloc.dptr;
    return rc;
}

SI_API(cuGraphAddMemAllocNode, (CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                CUDA_MEM_ALLOC_NODE_PARAMS *ap),
       add_mem_alloc(out, g, deps, n, ap))

/* ------------------------------------------------------------------ */
/* Parameters of one node.                                             */

static CUresult typed_node(CUgraphNode h, CUgraphNodeType type, struct si_node **out)
{
    CUresult rc = si_get(h, SI_NODE, out);
    if (rc) return rc;
    return (*out)->p.np.type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Replaces a node's parameters with ones built from np (same type). */
static CUresult set_node_params(struct si_node *n, CUgraphNodeParams *np)
{
    struct si_params p;
    CUresult rc;
    if (np->type != n->p.np.type) return CUDA_ERROR_INVALID_VALUE;
    switch (np->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: case CU_GRAPH_NODE_TYPE_MEM_FREE:
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return CUDA_ERROR_NOT_SUPPORTED;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        rc = build_child(&p, &np->graph);
        break;
    default:
        rc = si_params_build(&p, np, n->p.kctx ? n->p.kctx : si_current_ctx());
        break;
    }
    if (rc) return rc;
    p.cooperative = n->p.cooperative;
    p.priority = n->p.priority;
    si_params_free(&n->p);
    n->p = p;
    if (n->p.child) n->p.child->owner = n;
    si_node_params_set(n);
    return CUDA_SUCCESS;
}

static CUresult node_set_params(CUgraphNode h, CUgraphNodeParams *np)
{
    struct si_node *n;
    CUresult rc = si_get(h, SI_NODE, &n);
    if (rc) return rc;
    return np ? set_node_params(n, np) : CUDA_ERROR_INVALID_VALUE;
}

SI_API(cuGraphNodeSetParams, (CUgraphNode h, CUgraphNodeParams *np), node_set_params(h, np))

static CUresult kernel_get(CUgraphNode h, void *out, size_t size)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_KERNEL, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    memcpy(out, &n->p.np.kernel, size);
    return CUDA_SUCCESS;
}

static CUresult kernel_set(CUgraphNode h, const void *kp, size_t size)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_KERNEL, &n);
    if (rc || !kp) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    memcpy(&np.kernel, kp, size);
    return set_node_params(n, &np);
}

SI_API(cuGraphKernelNodeGetParams, (CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v1 *p), kernel_get(h, p, sizeof(*p)))
SI_API(cuGraphKernelNodeGetParams_v2, (CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p), kernel_get(h, p, sizeof(*p)))
SI_API(cuGraphKernelNodeSetParams, (CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v1 *p),
       kernel_set(h, p, sizeof(*p)))
SI_API(cuGraphKernelNodeSetParams_v2, (CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p),
       kernel_set(h, p, sizeof(*p)))

static CUresult memcpy_get(CUgraphNode h, CUDA_MEMCPY3D *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_MEMCPY, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *out = n->p.np.memcpy.copyParams;
    return CUDA_SUCCESS;
}

static CUresult memcpy_set(CUgraphNode h, const CUDA_MEMCPY3D *c)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_MEMCPY, &n);
    if (rc || !c) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams np = memcpy_np(c, n->p.np.memcpy.copyCtx);
    return set_node_params(n, &np);
}

SI_API(cuGraphMemcpyNodeGetParams, (CUgraphNode h, CUDA_MEMCPY3D *p), memcpy_get(h, p))
SI_API(cuGraphMemcpyNodeSetParams, (CUgraphNode h, const CUDA_MEMCPY3D *p), memcpy_set(h, p))

static CUresult memset_get(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_MEMSET, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    const CUDA_MEMSET_NODE_PARAMS_v2 *m = &n->p.np.memset;
    *out = (CUDA_MEMSET_NODE_PARAMS){m->dst, m->pitch, m->value, m->elementSize, m->width, m->height};
    return CUDA_SUCCESS;
}

static CUresult memset_set(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *m)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_MEMSET, &n);
    if (rc || !m) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams np = memset_np(m, n->p.np.memset.ctx);
    return set_node_params(n, &np);
}

SI_API(cuGraphMemsetNodeGetParams, (CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p), memset_get(h, p))
SI_API(cuGraphMemsetNodeSetParams, (CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p), memset_set(h, p))

static CUresult host_get(CUgraphNode h, CUDA_HOST_NODE_PARAMS *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_HOST, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    out->fn = n->p.np.host.fn;
    out->userData = n->p.np.host.userData;
    return CUDA_SUCCESS;
}

static CUresult host_set(CUgraphNode h, const CUDA_HOST_NODE_PARAMS *hp)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_HOST, &n);
    if (rc || !hp) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = {hp->fn, hp->userData}};
    return set_node_params(n, &np);
}

SI_API(cuGraphHostNodeGetParams, (CUgraphNode h, CUDA_HOST_NODE_PARAMS *p), host_get(h, p))
SI_API(cuGraphHostNodeSetParams, (CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p), host_set(h, p))

static CUresult event_get(CUgraphNode h, CUgraphNodeType type, CUevent *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, type, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *out = type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? n->p.np.eventRecord.event : n->p.np.eventWait.event;
    return CUDA_SUCCESS;
}

static CUresult event_set(CUgraphNode h, CUgraphNodeType type, CUevent e)
{
    struct si_node *n;
    CUresult rc = typed_node(h, type, &n);
    if (rc) return rc;
    CUgraphNodeParams np = {.type = type};
    if (type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) np.eventRecord.event = e;
    else np.eventWait.event = e;
    return set_node_params(n, &np);
}

SI_API(cuGraphEventRecordNodeGetEvent, (CUgraphNode h, CUevent *e), event_get(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, e))
SI_API(cuGraphEventRecordNodeSetEvent, (CUgraphNode h, CUevent e), event_set(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, e))
SI_API(cuGraphEventWaitNodeGetEvent, (CUgraphNode h, CUevent *e), event_get(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, e))
SI_API(cuGraphEventWaitNodeSetEvent, (CUgraphNode h, CUevent e), event_set(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, e))

static CUresult child_get(CUgraphNode h, CUgraph *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_GRAPH, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraph)n->p.child;
    return CUDA_SUCCESS;
}

SI_API(cuGraphChildGraphNodeGetGraph, (CUgraphNode h, CUgraph *g), child_get(h, g))

static CUresult alloc_get(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    memcpy(out, &n->p.np.alloc, sizeof(*out));
    return CUDA_SUCCESS;
}

static CUresult free_get(CUgraphNode h, CUdeviceptr *out)
{
    struct si_node *n;
    CUresult rc = typed_node(h, CU_GRAPH_NODE_TYPE_MEM_FREE, &n);
    if (rc || !out) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *out = n->p.np.free.dptr;
    return CUDA_SUCCESS;
}

SI_API(cuGraphMemAllocNodeGetParams, (CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *p), alloc_get(h, p))
SI_API(cuGraphMemFreeNodeGetParams, (CUgraphNode h, CUdeviceptr *d), free_get(h, d))

/* ------------------------------------------------------------------ */
/* Structural queries. Arrays follow the driver's convention: a NULL    */
/* array asks for the count; a longer array is padded with NULL and     */
/* the count written back; a shorter one gets the first entries.         */

static CUresult fill_nodes(const struct si_vec *src, CUgraphNode *dst, CUgraphEdgeData *edata,
                           size_t *count)
{
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    if (!dst) {
        if (edata) return CUDA_ERROR_INVALID_VALUE;
        *count = src->n;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < *count; i++) {
        dst[i] = i < src->n ? (CUgraphNode)src->v[i] : NULL;
        if (edata) memset(&edata[i], 0, sizeof(edata[i]));
    }
    if (*count > src->n) *count = src->n;
    return CUDA_SUCCESS;
}

static CUresult graph_nodes(CUgraph hGraph, CUgraphNode *nodes, size_t *n, bool roots)
{
    struct si_graph *g;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc) return rc;
    if (!roots) return fill_nodes(&g->nodes, nodes, NULL, n);
    struct si_vec r = {0};
    for (size_t i = 0; i < g->nodes.n; i++)
        if (((struct si_node *)g->nodes.v[i])->deps.n == 0) si_vec_push(&r, g->nodes.v[i]);
    rc = fill_nodes(&r, nodes, NULL, n);
    si_vec_free(&r);
    return rc;
}

SI_API(cuGraphGetNodes, (CUgraph g, CUgraphNode *nodes, size_t *n), graph_nodes(g, nodes, n, false))
SI_API(cuGraphGetRootNodes, (CUgraph g, CUgraphNode *nodes, size_t *n), graph_nodes(g, nodes, n, true))

static CUresult graph_edges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edata,
                            size_t *count)
{
    struct si_graph *g;
    CUresult rc = si_get(hGraph, SI_GRAPH, &g);
    if (rc) return rc;
    if (!count || (!from) != (!to) || (edata && !from)) return CUDA_ERROR_INVALID_VALUE;
    size_t total = 0, k = 0;
    for (size_t i = 0; i < g->nodes.n; i++) total += ((struct si_node *)g->nodes.v[i])->deps.n;
    if (!from) {
        *count = total;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct si_node *t = g->nodes.v[i];
        for (size_t j = 0; j < t->deps.n && k < *count; j++, k++) {
            from[k] = (CUgraphNode)t->deps.v[j];
            to[k] = (CUgraphNode)t;
            if (edata) memset(&edata[k], 0, sizeof(edata[k]));
        }
    }
    for (size_t i = k; i < *count; i++) {
        from[i] = to[i] = NULL;
        if (edata) memset(&edata[i], 0, sizeof(edata[i]));
    }
    if (*count > total) *count = total;
    return CUDA_SUCCESS;
}

SI_API(cuGraphGetEdges, (CUgraph g, CUgraphNode *from, CUgraphNode *to, size_t *n),
       graph_edges(g, from, to, NULL, n))
SI_API(cuGraphGetEdges_v2, (CUgraph g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *e, size_t *n),
       graph_edges(g, from, to, e, n))

static CUresult node_type(CUgraphNode h, CUgraphNodeType *type)
{
    struct si_node *n;
    CUresult rc = si_get(h, SI_NODE, &n);
    if (rc || !type) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *type = n->p.np.type;
    return CUDA_SUCCESS;
}

SI_API(cuGraphNodeGetType, (CUgraphNode h, CUgraphNodeType *type), node_type(h, type))

static CUresult node_links(CUgraphNode h, CUgraphNode *out, CUgraphEdgeData *edata, size_t *n, bool deps)
{
    struct si_node *node;
    CUresult rc = si_get(h, SI_NODE, &node);
    return rc ? rc : fill_nodes(deps ? &node->deps : &node->outs, out, edata, n);
}

SI_API(cuGraphNodeGetDependencies, (CUgraphNode h, CUgraphNode *d, size_t *n), node_links(h, d, NULL, n, true))
SI_API(cuGraphNodeGetDependencies_v2, (CUgraphNode h, CUgraphNode *d, CUgraphEdgeData *e, size_t *n),
       node_links(h, d, e, n, true))
SI_API(cuGraphNodeGetDependentNodes, (CUgraphNode h, CUgraphNode *d, size_t *n),
       node_links(h, d, NULL, n, false))
SI_API(cuGraphNodeGetDependentNodes_v2, (CUgraphNode h, CUgraphNode *d, CUgraphEdgeData *e, size_t *n),
       node_links(h, d, e, n, false))
