/*
 * standin_exec_update.c - updating executable graphs in place.
 *
 * Owns: cuGraphExecUpdate (both ABIs) with the documented topology checks
 * (nodes paired by creation order, dependencies compared as sets of paired
 * nodes), and every per-node executable setter. Both judge parameters with
 * si_update_rule only. Must never: leave an executable graph half updated:
 * everything is checked before anything is changed.
 */
#include "standin_internal.h"

#include <string.h>

struct update_error {
    CUgraphExecUpdateResult result;
    struct si_node *node, *from;
};

static struct si_update_ctx update_ctx(const struct si_exec *e, enum si_update_scope scope)
{
    struct si_update_ctx uc = {e->flags, e->has_device_launch, scope};
    return uc;
}

static bool check_graph(const struct si_exec *e, const struct si_graph *g,
                        const struct si_update_ctx *uc, struct update_error *err);

/* Child graphs and conditional bodies: same topology, rules recursively. */
static bool check_nested(const struct si_exec_node *en, const struct si_node *n,
                         const struct si_update_ctx *uc, struct update_error *err)
{
    if (en->child && !check_graph(en->child, n->p.child, uc, err)) return false;
    for (unsigned b = 0; b < en->nbodies; b++)
        if (!check_graph(en->bodies[b], n->p.cond->bodies[b], uc, err)) return false;
    return true;
}

static bool check_graph(const struct si_exec *e, const struct si_graph *g,
                        const struct si_update_ctx *uc, struct update_error *err)
{
    if (e->n != g->nodes.n) {
        err->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return false;
    }
    for (size_t i = 0; i < e->n; i++) ((struct si_node *)g->nodes.v[i])->scratch = i;
    for (size_t i = 0; i < e->n; i++) {
        const struct si_exec_node *en = &e->nodes[i];
        struct si_node *n = g->nodes.v[i];
        err->node = n;
        if (en->p.np.type != n->p.np.type) {
            err->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            return false;
        }
        if (en->ndeps != n->deps.n) {
            err->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            return false;
        }
        for (size_t d = 0; d < n->deps.n; d++) {
            struct si_node *dep = n->deps.v[d];
            bool paired = false;
            for (size_t k = 0; k < en->ndeps && !paired; k++) paired = en->deps[k] == dep->scratch;
            if (!paired) {
                err->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                err->from = dep;
                return false;
            }
        }
        if ((err->result = si_update_rule(&en->p, &n->p, uc)) != CU_GRAPH_EXEC_UPDATE_SUCCESS) return false;
    }
    for (size_t i = 0; i < e->n; i++)
        if (!check_nested(&e->nodes[i], g->nodes.v[i], uc, err)) return false;
    err->node = NULL;
    return true;
}

/* Replaces a node's parameters, keeping what is the executable graph's own
 * (its node key, enabled state, nested executables). */
static void replace_params(struct si_exec_node *en, const struct si_params *p)
{
    struct si_params old = en->p;
    si_params_copy(&en->p, p);
    si_params_free(&old);
}

/* STANDIN_EXEC_NODES: which graph's nodes name an executable graph's
 * nodes in its setters after a whole update. The documentation says "the
 * graph which was used to instantiate" (`instantiated`, the default);
 * `updated`: the graph of the last update. Not probed on a driver. */
static void apply_graph(struct si_exec *e, const struct si_graph *g)
{
    for (size_t i = 0; i < e->n; i++) {
        struct si_exec_node *en = &e->nodes[i];
        const struct si_node *n = g->nodes.v[i];
        replace_params(en, &n->p);
        if (si.exec_nodes_follow_update) en->key = (struct si_node *)n;
        if (en->child) apply_graph(en->child, n->p.child);
        for (unsigned b = 0; b < en->nbodies; b++) apply_graph(en->bodies[b], n->p.cond->bodies[b]);
    }
}

static CUresult exec_update(CUgraphExec hExec, CUgraph hGraph, struct update_error *err)
{
    struct si_exec *e;
    struct si_graph *g;
    memset(err, 0, sizeof(*err));
    err->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUresult rc = si_get(hExec, SI_EXEC, &e);
    if (rc || (rc = si_get(hGraph, SI_GRAPH, &g))) return rc;
    if (g->owner) return CUDA_ERROR_INVALID_VALUE; /* a moved child graph */
    if ((rc = si_graph_check_shared(g, "an executable graph's update from a graph"))) return rc;
    struct si_update_ctx uc = update_ctx(e, SI_UPDATE_WHOLE_GRAPH);
    if (!check_graph(e, g, &uc, err)) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    apply_graph(e, g);
    for (size_t i = 0; i < g->urefs.n; i++) ((struct si_user_object *)g->urefs.v[i])->refs++;
    struct si_vec old = e->urefs;
    memset(&e->urefs, 0, sizeof(e->urefs));
    si_vec_copy(&e->urefs, &g->urefs);
    for (size_t i = 0; i < old.n; i++) si_user_object_release(old.v[i], 1);
    si_vec_free(&old);
    err->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                                CUgraphExecUpdateResultInfo *resultInfo)
{
    SI_ENTER(cuGraphExecUpdate_v2);
    struct update_error err;
    if (!resultInfo) return si_leave(CUDA_ERROR_INVALID_VALUE);
    CUresult rc = exec_update(hGraphExec, hGraph, &err);
    resultInfo->result = err.result;
    resultInfo->errorNode = (CUgraphNode)err.node;
    resultInfo->errorFromNode = (CUgraphNode)err.from;
    return si_leave(rc);
}

SI_EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                             CUgraphNode *hErrorNode_out,
                                             CUgraphExecUpdateResult *updateResult_out)
{
    SI_ENTER(cuGraphExecUpdate);
    struct update_error err;
    if (!hErrorNode_out || !updateResult_out) return si_leave(CUDA_ERROR_INVALID_VALUE);
    CUresult rc = exec_update(hGraphExec, hGraph, &err);
    *hErrorNode_out = (CUgraphNode)err.node;
    *updateResult_out = err.result;
    return si_leave(rc);
}

/* ------------------------------------------------------------------ */
/* Per-node setters: the node is one of the instantiating graph's.      */

static CUresult find_exec_node(CUgraphExec hExec, CUgraphNode hNode, struct si_exec **e,
                               struct si_exec_node **en)
{
    struct si_node *n;
    CUresult rc = si_get(hExec, SI_EXEC, e);
    if (rc || (rc = si_get(hNode, SI_NODE, &n))) return rc;
    *en = si_exec_find(*e, n);
    return *en ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Applies new parameters to one node if the update rule accepts them. */
static CUresult set_exec_node(CUgraphExec hExec, CUgraphNode hNode, CUgraphNodeParams *np,
                              struct si_context *ctx)
{
    struct si_exec *e;
    struct si_exec_node *en;
    struct si_params p;
    CUresult rc = find_exec_node(hExec, hNode, &e, &en);
    if (rc) return rc;
    if (!np || np->type != en->p.np.type) return CUDA_ERROR_INVALID_VALUE;
    if (np->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || np->type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
        np->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return CUDA_ERROR_INVALID_VALUE; /* "API unsupported" */
    if (np->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        struct si_graph *child;
        struct update_error err = {0};
        if ((rc = si_get(np->graph.graph, SI_GRAPH, &child))) return rc;
        struct si_update_ctx uc = update_ctx(e, SI_UPDATE_WHOLE_GRAPH);
        if (!check_graph(en->child, child, &uc, &err)) return CUDA_ERROR_INVALID_VALUE;
        apply_graph(en->child, child);
        return CUDA_SUCCESS;
    }
    if ((rc = si_params_build(&p, np, ctx ? ctx : en->p.kctx))) return rc;
    p.cooperative = en->p.cooperative;
    p.priority = en->p.priority;
    struct si_update_ctx uc = update_ctx(e, SI_UPDATE_SINGLE_NODE);
    if (si_update_rule(&en->p, &p, &uc) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        si_params_free(&p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    si_params_free(&en->p);
    en->p = p;
    return CUDA_SUCCESS;
}

SI_API(cuGraphExecNodeSetParams, (CUgraphExec e, CUgraphNode n, CUgraphNodeParams *np),
       set_exec_node(e, n, np, NULL))

static CUresult set_kernel(CUgraphExec e, CUgraphNode n, const void *kp, size_t size)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    if (!kp) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&np.kernel, kp, size);
    return set_exec_node(e, n, &np, NULL);
}

SI_API(cuGraphExecKernelNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS_v1 *p),
       set_kernel(e, n, p, sizeof(*p)))
SI_API(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p),
       set_kernel(e, n, p, sizeof(*p)))

static CUresult set_memcpy(CUgraphExec e, CUgraphNode n, const CUDA_MEMCPY3D *c, CUcontext ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    np.memcpy.copyParams = *c;
    np.memcpy.copyCtx = ctx;
    return set_exec_node(e, n, &np, (struct si_context *)ctx);
}

static CUresult set_memset(CUgraphExec e, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){m->dst, m->pitch, m->value, m->elementSize,
                                             m->width, m->height, ctx};
    return set_exec_node(e, n, &np, (struct si_context *)ctx);
}

static CUresult set_host(CUgraphExec e, CUgraphNode n, const CUDA_HOST_NODE_PARAMS *h)
{
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = {h->fn, h->userData}};
    return set_exec_node(e, n, &np, NULL);
}

SI_API(cuGraphExecMemcpyNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_MEMCPY3D *c, CUcontext ctx),
       set_memcpy(e, n, c, ctx))
SI_API(cuGraphExecMemsetNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *m,
                                        CUcontext ctx),
       set_memset(e, n, m, ctx))
SI_API(cuGraphExecHostNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_HOST_NODE_PARAMS *h),
       set_host(e, n, h))
SI_API(cuGraphExecEventRecordNodeSetEvent, (CUgraphExec e, CUgraphNode n, CUevent ev),
       set_exec_node(e, n, &(CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .eventRecord = {ev}},
                     NULL))
SI_API(cuGraphExecEventWaitNodeSetEvent, (CUgraphExec e, CUgraphNode n, CUevent ev),
       set_exec_node(e, n, &(CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT, .eventWait = {ev}},
                     NULL))
SI_API(cuGraphExecChildGraphNodeSetParams, (CUgraphExec e, CUgraphNode n, CUgraph child),
       set_exec_node(e, n, &(CUgraphNodeParams){.type = CU_GRAPH_NODE_TYPE_GRAPH, .graph = {.graph = child}},
                     NULL))
