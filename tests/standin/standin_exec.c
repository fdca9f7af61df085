/*
 * standin_exec.c - executable graphs: instantiation, launch, upload,
 * destruction, flags, enabling nodes.
 *
 * Owns: struct si_exec, an executable graph's own deep copy of its source
 * graph's parameters, keyed by the source graph's node handles (so per-node
 * setters take those nodes, as documented); the device memory an executable
 * graph is charged; executing a graph's nodes in a topological order that
 * follows creation order. Must never: change the graph it was instantiated
 * from, or decide update rules (standin_exec_update.c, standin_params.c).
 */
#include "standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SI_WHILE_LIMIT 1000000u

static size_t count_nodes(const struct si_graph *g)
{
    size_t n = g->nodes.n;
    for (size_t i = 0; i < g->nodes.n; i++) {
        const struct si_node *node = g->nodes.v[i];
        if (node->p.child) n += count_nodes(node->p.child);
        for (unsigned b = 0; node->p.cond && b < node->p.cond->nbodies; b++)
            n += count_nodes(node->p.cond->bodies[b]);
    }
    return n;
}

/* Kahn's algorithm, always taking the ready node created first; NULL when
 * the edges make a cycle. */
static size_t *topological_order(struct si_exec *e)
{
    size_t *order = si_calloc(e->n, sizeof(size_t)), *missing = si_calloc(e->n, sizeof(size_t));
    bool *done = si_calloc(e->n, sizeof(bool));
    for (size_t i = 0; i < e->n; i++) missing[i] = e->nodes[i].ndeps;
    size_t k = 0;
    for (bool progress = true; k < e->n && progress;) {
        progress = false;
        for (size_t i = 0; i < e->n; i++) {
            if (done[i] || missing[i]) continue;
            done[i] = true;
            order[k++] = i;
            for (size_t j = 0; j < e->n; j++)
                for (size_t d = 0; d < e->nodes[j].ndeps; d++)
                    if (e->nodes[j].deps[d] == i) missing[j]--;
            progress = true;
            break;
        }
    }
    free(missing);
    free(done);
    if (k < e->n) {
        free(order);
        return NULL;
    }
    return order;
}

static CUgraphInstantiateResult device_launch_check(const struct si_graph *g, struct si_node **err)
{
    bool work = false;
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct si_node *n = g->nodes.v[i];
        CUgraphNodeType t = n->p.np.type;
        bool ok = t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY ||
                  t == CU_GRAPH_NODE_TYPE_MEMSET || t == CU_GRAPH_NODE_TYPE_GRAPH;
        if (t == CU_GRAPH_NODE_TYPE_KERNEL && (n->p.func->k->traits & STANDIN_KERNEL_USES_CDP)) ok = false;
        if (t == CU_GRAPH_NODE_TYPE_MEMCPY) {
            const CUDA_MEMCPY3D *c = &n->p.np.memcpy.copyParams;
            uintptr_t src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)c->srcHost : (uintptr_t)c->srcDevice;
            uintptr_t dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)c->dstHost : (uintptr_t)c->dstDevice;
            if (si_mem_type_of(src) != CU_MEMORYTYPE_DEVICE || si_mem_type_of(dst) != CU_MEMORYTYPE_DEVICE)
                ok = false;
        }
        if (!ok) {
            *err = n;
            return CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        }
        work |= t != CU_GRAPH_NODE_TYPE_GRAPH;
    }
    return work ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
}

void si_exec_free(struct si_exec *e)
{
    for (size_t i = 0; i < e->n; i++) {
        struct si_exec_node *en = &e->nodes[i];
        si_params_free(&en->p);
        free(en->deps);
        if (en->child) si_exec_free(en->child);
        for (unsigned b = 0; b < en->nbodies; b++) si_exec_free(en->bodies[b]);
    }
    free(e->nodes);
    free(e->order);
    for (size_t i = 0; i < e->urefs.n; i++) si_user_object_release(e->urefs.v[i], 1);
    si_vec_free(&e->urefs);
    si_mem_uncharge(e->charged);
    if (e->has_alloc && e->src) e->src->alloc_execs--;
    if (e->h.kind == SI_EXEC) si_obj_kill(e);
    else free(e);
}

CUresult si_exec_build(struct si_graph *g, unsigned long long flags, bool nested, struct si_exec **out,
                       struct si_node **err_node, CUgraphInstantiateResult *result)
{
    struct si_exec *e = si_calloc(1, sizeof(*e));
    CUresult rc = CUDA_SUCCESS;
    *err_node = NULL;
    *result = CUDA_GRAPH_INSTANTIATE_ERROR;
    e->flags = flags;
    e->n = g->nodes.n;
    e->nodes = si_calloc(e->n, sizeof(*e->nodes));
    for (size_t i = 0; i < e->n; i++) ((struct si_node *)g->nodes.v[i])->scratch = i;
    for (size_t i = 0; i < e->n; i++) {
        struct si_node *n = g->nodes.v[i];
        struct si_exec_node *en = &e->nodes[i];
        en->key = n;
        en->enabled = true;
        si_params_copy(&en->p, &n->p);
        en->ndeps = n->deps.n;
        en->deps = si_calloc(n->deps.n, sizeof(size_t));
        for (size_t d = 0; d < n->deps.n; d++) en->deps[d] = ((struct si_node *)n->deps.v[d])->scratch;
        e->has_alloc |= n->p.np.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->p.np.type == CU_GRAPH_NODE_TYPE_MEM_FREE;
        if (n->p.np.type == CU_GRAPH_NODE_TYPE_KERNEL)
            e->has_device_launch |= (n->p.func->k->traits & STANDIN_KERNEL_DEVICE_GRAPH_LAUNCH) != 0;
    }
    for (size_t i = 0; i < e->n && !rc; i++) { /* nested parts, after scratch use */
        struct si_node *n = g->nodes.v[i];
        struct si_exec_node *en = &e->nodes[i];
        if (n->p.child) rc = si_exec_build(n->p.child, flags, true, &en->child, err_node, result);
        for (unsigned b = 0; !rc && n->p.cond && b < n->p.cond->nbodies; b++, en->nbodies++)
            rc = si_exec_build(n->p.cond->bodies[b], flags, true, &en->bodies[b], err_node, result);
    }
    if (!rc && !(e->order = topological_order(e))) {
        *result = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
        *err_node = e->n ? g->nodes.v[0] : NULL;
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (!rc && !nested) {
        if (e->has_alloc && g->alloc_execs > 0) {
            rc = CUDA_ERROR_INVALID_VALUE; /* one executable graph at a time */
        } else {
            e->charged = SI_EXEC_BASE_CHARGE + SI_EXEC_NODE_CHARGE * count_nodes(g);
            if ((rc = si_mem_charge(e->charged))) e->charged = 0;
        }
    }
    if (rc) {
        e->has_alloc = false;
        si_exec_free(e);
        return rc;
    }
    if (!nested) {
        struct si_context *cur = si_current_ctx();
        si_obj_init(e, SI_EXEC);
        e->src = g;
        e->ctx = g->ctx ? g->ctx : (cur && cur->h.state == SI_LIVE ? cur : NULL);
        if (e->has_alloc) g->alloc_execs++;
        for (size_t i = 0; i < g->urefs.n; i++) {
            ((struct si_user_object *)g->urefs.v[i])->refs++;
            si_vec_push(&e->urefs, g->urefs.v[i]);
        }
    }
    *result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    *out = e;
    return CUDA_SUCCESS;
}

struct si_exec_node *si_exec_find(struct si_exec *e, const struct si_node *key)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->nodes[i].key == key) return &e->nodes[i];
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Execution.                                                          */

/* mem_nodes: whether alloc and free nodes change their allocation's state
 * as they run (a synchronous launch) or did so at submission (async). */
static CUresult run_exec(struct si_exec *e, struct si_stream *s, bool mem_nodes);

static CUresult run_conditional(struct si_exec_node *en, struct si_stream *s, bool mem_nodes)
{
    struct si_cond_handle *h = si_cond_handle_find(en->p.np.conditional.handle);
    CUresult rc = CUDA_SUCCESS;
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    switch (en->p.np.conditional.type) {
    case CU_GRAPH_COND_TYPE_IF:
        if (h->value) rc = run_exec(en->bodies[0], s, mem_nodes);
        else if (en->nbodies == 2) rc = run_exec(en->bodies[1], s, mem_nodes);
        return rc;
    case CU_GRAPH_COND_TYPE_SWITCH:
        return h->value < en->nbodies ? run_exec(en->bodies[h->value], s, mem_nodes) : CUDA_SUCCESS;
    default:
        for (unsigned i = 0; h->value && !rc; i++) {
            if (i == SI_WHILE_LIMIT) return CUDA_ERROR_LAUNCH_TIMEOUT;
            rc = run_exec(en->bodies[0], s, mem_nodes);
            if (!(h = si_cond_handle_find(en->p.np.conditional.handle))) return CUDA_ERROR_INVALID_VALUE;
        }
        return rc;
    }
}

static CUresult run_exec(struct si_exec *e, struct si_stream *s, bool mem_nodes)
{
    for (size_t k = 0; k < e->n; k++) {
        struct si_exec_node *en = &e->nodes[e->order[k]];
        CUresult rc = CUDA_SUCCESS;
        if (!en->enabled) continue; /* a disabled node acts as an empty node */
        switch (en->p.np.type) {
        case CU_GRAPH_NODE_TYPE_GRAPH: rc = run_exec(en->child, s, mem_nodes); break;
        case CU_GRAPH_NODE_TYPE_CONDITIONAL: rc = run_conditional(en, s, mem_nodes); break;
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC: if (mem_nodes) en->p.alloc->graph_live = true; break;
        case CU_GRAPH_NODE_TYPE_MEM_FREE: if (mem_nodes) en->p.alloc->graph_live = false; break;
        default: rc = si_params_run(&en->p, s); break;
        }
        if (rc) return rc;
    }
    return CUDA_SUCCESS;
}

static void reset_conditionals(struct si_exec *e)
{
    for (size_t i = 0; i < e->n; i++) {
        struct si_exec_node *en = &e->nodes[i];
        if (en->p.np.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            struct si_cond_handle *h = si_cond_handle_find(en->p.np.conditional.handle);
            if (h && (h->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)) h->value = h->default_value;
        }
        if (en->child) reset_conditionals(en->child);
        for (unsigned b = 0; b < en->nbodies; b++) reset_conditionals(en->bodies[b]);
    }
}

static CUresult launch_check_allocs(struct si_exec *e)
{
    for (size_t i = 0; i < e->n; i++) {
        struct si_exec_node *en = &e->nodes[i];
        if (en->p.np.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !en->p.alloc->graph_live) continue;
        if (!(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) return CUDA_ERROR_INVALID_VALUE;
        en->p.alloc->graph_live = false;
    }
    return CUDA_SUCCESS;
}

CUresult si_exec_launch(struct si_exec *e, struct si_stream *s)
{
    CUresult rc = launch_check_allocs(e);
    if (rc) return rc;
    reset_conditionals(e);
    return run_exec(e, s, true);
}

/* Memory nodes sit at the top level only (the driver refuses them in child
 * graphs and conditional bodies): their state follows submission order. */
CUresult si_exec_launch_prepare(struct si_exec *e)
{
    CUresult rc = launch_check_allocs(e);
    if (rc) return rc;
    for (size_t k = 0; k < e->n; k++) {
        struct si_exec_node *en = &e->nodes[e->order[k]];
        if (!en->enabled) continue;
        /* An event node keeps its event's handle: a launch after the event
         * was destroyed touches freed driver state (undefined on a GPU). */
        const struct si_obj *ev = en->p.np.type == CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                      ? (const struct si_obj *)en->p.np.eventRecord.event
                                  : en->p.np.type == CU_GRAPH_NODE_TYPE_WAIT_EVENT
                                      ? (const struct si_obj *)en->p.np.eventWait.event
                                      : NULL;
        if (ev && ev->state != SI_LIVE) {
            si_misuse("cuGraphLaunch of a graph whose event node names a destroyed event (%p)",
                      (const void *)ev);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (size_t k = 0; k < e->n; k++) {
        struct si_exec_node *en = &e->nodes[e->order[k]];
        if (!en->enabled) continue;
        if (en->p.np.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) en->p.alloc->graph_live = true;
        if (en->p.np.type == CU_GRAPH_NODE_TYPE_MEM_FREE) en->p.alloc->graph_live = false;
    }
    return CUDA_SUCCESS;
}

struct si_exec *si_exec_snapshot(const struct si_exec *e)
{
    struct si_exec *c = si_calloc(1, sizeof(*c));
    c->flags = e->flags;
    c->n = e->n;
    c->nodes = si_calloc(e->n, sizeof(*c->nodes));
    c->order = si_calloc(e->n, sizeof(size_t));
    memcpy(c->order, e->order, e->n * sizeof(size_t));
    for (size_t i = 0; i < e->n; i++) {
        const struct si_exec_node *en = &e->nodes[i];
        struct si_exec_node *cn = &c->nodes[i];
        cn->key = en->key;
        cn->enabled = en->enabled;
        si_params_copy(&cn->p, &en->p);
        cn->ndeps = en->ndeps;
        cn->deps = si_calloc(en->ndeps, sizeof(size_t));
        memcpy(cn->deps, en->deps, en->ndeps * sizeof(size_t));
        if (en->child) cn->child = si_exec_snapshot(en->child);
        cn->nbodies = en->nbodies;
        for (unsigned b = 0; b < en->nbodies; b++) cn->bodies[b] = si_exec_snapshot(en->bodies[b]);
    }
    return c;
}

CUresult si_exec_run_snapshot(struct si_exec *snap, struct si_stream *s)
{
    reset_conditionals(snap);
    return run_exec(snap, s, false);
}

/* Event nodes of an asynchronous launch: a record completes with the launch,
 * a wait holds the whole launch back (both coarser than a GPU, never
 * looser). */
static void launch_events(const struct si_exec *e, struct si_stream *s, struct si_work *w,
                          unsigned long long seq)
{
    for (size_t i = 0; i < e->n; i++) {
        const struct si_exec_node *en = &e->nodes[i];
        struct si_event *ev = NULL;
        if (en->child) launch_events(en->child, s, w, seq);
        if (!en->enabled) continue;
        if (en->p.np.type == CU_GRAPH_NODE_TYPE_EVENT_RECORD && seq) {
            ev = (struct si_event *)en->p.np.eventRecord.event;
            ev->at_stream = s;
            ev->at_seq = seq;
            ev->recorded = true;
            ev->cap_id = 0;
        } else if (en->p.np.type == CU_GRAPH_NODE_TYPE_WAIT_EVENT && !seq) {
            ev = (struct si_event *)en->p.np.eventWait.event;
            if (ev->at_stream) si_work_wait_on(w, ev->at_stream, ev->at_seq);
        }
    }
}

static CUresult launch_async(struct si_exec *e, struct si_stream *s)
{
    CUresult rc = si_exec_launch_prepare(e);
    if (rc) return rc;
    struct si_work *w = si_work_new(SI_WORK_GRAPH);
    w->snap = si_exec_snapshot(e);
    w->exec = e;
    e->inflight++;
    for (size_t i = 0; i < e->urefs.n; i++) { /* the launch holds the objects until it ends */
        ((struct si_user_object *)e->urefs.v[i])->refs++;
        si_vec_push(&w->urefs, e->urefs.v[i]);
    }
    launch_events(e, s, w, 0);           /* waits, before the item is queued */
    launch_events(e, s, w, si_async_enqueue(s, w)); /* records, at its position */
    return CUDA_SUCCESS;
}

/* An executable graph launched into a capturing stream becomes a child
 * graph node holding a copy of what the executable graph would run. */
static CUresult exec_to_graph(struct si_exec *e, struct si_graph **out)
{
    struct si_graph *g;
    si_graph_new(&g);
    for (size_t i = 0; i < e->n; i++) {
        struct si_exec_node *en = &e->nodes[i];
        struct si_params p;
        struct si_node **deps = si_calloc(en->ndeps, sizeof(*deps)), *n;
        if (en->p.np.type == CU_GRAPH_NODE_TYPE_CONDITIONAL || en->p.np.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
            en->p.np.type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            free(deps);
            si_graph_free(g);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        si_params_copy(&p, &en->p);
        if (!en->enabled) {
            si_params_free(&p);
            p.np.type = CU_GRAPH_NODE_TYPE_EMPTY;
        }
        CUresult rc = en->child && en->enabled ? exec_to_graph(en->child, &p.child) : CUDA_SUCCESS;
        if (p.child) p.np.graph.graph = (CUgraph)p.child;
        for (size_t d = 0; d < en->ndeps; d++) deps[d] = g->nodes.v[en->deps[d]];
        if (!rc) rc = si_graph_add(g, &p, deps, en->ndeps, &n);
        free(deps);
        if (rc) {
            si_params_free(&p);
            si_graph_free(g);
            return rc;
        }
    }
    *out = g;
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hExec, CUstream hStream, bool ptsz)
{
    struct si_exec *e;
    struct si_stream *s;
    CUresult rc = si_get(hExec, SI_EXEC, &e);
    if (rc || (rc = si_stream_get(hStream, ptsz, &s)) || (rc = si_capture_gate(s))) return rc;
    if (!s->cap) return si_async_active() ? launch_async(e, s) : si_exec_launch(e, s);
    struct si_params p = {.np.type = CU_GRAPH_NODE_TYPE_GRAPH};
    if ((rc = exec_to_graph(e, &p.child))) return rc;
    p.np.graph.graph = (CUgraph)p.child;
    return si_capture_add_node(s, &p, NULL);
}

SI_API(cuGraphLaunch, (CUgraphExec e, CUstream s), graph_launch(e, s, false))
SI_API(cuGraphLaunch_ptsz, (CUgraphExec e, CUstream s), graph_launch(e, s, true))

/* Uploading prepares device resources; here there are none, so an upload
 * only validates its arguments and the stream's state. */
static CUresult graph_upload(CUgraphExec hExec, CUstream hStream, bool ptsz)
{
    struct si_exec *e;
    struct si_stream *s;
    CUresult rc = si_get(hExec, SI_EXEC, &e);
    if (rc || (rc = si_stream_get(hStream, ptsz, &s))) return rc;
    return si_capture_gate(s);
}

SI_API(cuGraphUpload, (CUgraphExec e, CUstream s), graph_upload(e, s, false))
SI_API(cuGraphUpload_ptsz, (CUgraphExec e, CUstream s), graph_upload(e, s, true))

/* ------------------------------------------------------------------ */
/* Instantiation entry points.                                          */

#define SI_INSTANTIATE_FLAGS                                                                  \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate(CUgraphExec *out, CUgraph hGraph, unsigned long long flags,
                            struct si_node **err, CUgraphInstantiateResult *result)
{
    struct si_graph *g;
    CUresult rc;
    *err = NULL;
    *result = CUDA_GRAPH_INSTANTIATE_ERROR;
    if ((rc = si_get(hGraph, SI_GRAPH, &g))) return rc;
    if (!out || (flags & ~(unsigned long long)SI_INSTANTIATE_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
        (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
        return CUDA_ERROR_INVALID_VALUE;
    if (g->owner || g->capturing) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_graph_check_shared(g, "instantiation"))) return rc;
    if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
        (*result = device_launch_check(g, err)) != CUDA_GRAPH_INSTANTIATE_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    return si_exec_build(g, flags, false, (struct si_exec **)out, err, result);
}

static CUresult instantiate_logged(CUgraphExec *out, CUgraph g, CUgraphNode *errNode, char *log,
                                   size_t logSize)
{
    struct si_node *err;
    CUgraphInstantiateResult result;
    CUresult rc = instantiate(out, g, 0, &err, &result);
    if (errNode) *errNode = (CUgraphNode)err;
    if (rc && log && logSize) snprintf(log, logSize, "stand-in: instantiation failed (result %d)", result);
    return rc;
}

SI_API(cuGraphInstantiate, (CUgraphExec *e, CUgraph g, CUgraphNode *errNode, char *log, size_t size),
       instantiate_logged(e, g, errNode, log, size))
SI_API(cuGraphInstantiate_v2, (CUgraphExec *e, CUgraph g, CUgraphNode *errNode, char *log, size_t size),
       instantiate_logged(e, g, errNode, log, size))

static CUresult instantiate_with_flags(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    struct si_node *err;
    CUgraphInstantiateResult result;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) return CUDA_ERROR_INVALID_VALUE; /* needs a stream */
    return instantiate(out, g, flags, &err, &result);
}

SI_API(cuGraphInstantiateWithFlags, (CUgraphExec *e, CUgraph g, unsigned long long flags),
       instantiate_with_flags(e, g, flags))

static CUresult instantiate_with_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *ip,
                                        bool ptsz)
{
    struct si_node *err;
    struct si_stream *s = NULL;
    CUgraphInstantiateResult result;
    if (!ip) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    if (ip->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) rc = si_stream_get(ip->hUploadStream, ptsz, &s);
    if (!rc) rc = instantiate(out, g, ip->flags, &err, &result);
    else result = CUDA_GRAPH_INSTANTIATE_ERROR, err = NULL;
    ip->hErrNode_out = (CUgraphNode)err;
    ip->result_out = result;
    if (!rc && s) rc = si_capture_gate(s); /* the upload itself is enqueued on hUploadStream */
    return rc;
}

SI_API(cuGraphInstantiateWithParams, (CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p),
       instantiate_with_params(e, g, p, false))
SI_API(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p),
       instantiate_with_params(e, g, p, true))

static CUresult exec_get_flags(CUgraphExec hExec, cuuint64_t *flags)
{
    struct si_exec *e;
    CUresult rc = si_get(hExec, SI_EXEC, &e);
    if (rc || !flags) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    /* UPLOAD is not reported: it does not affect the executable graph. */
    *flags = e->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    return CUDA_SUCCESS;
}

SI_API(cuGraphExecGetFlags, (CUgraphExec e, cuuint64_t *flags), exec_get_flags(e, flags))

static void exec_release(struct si_exec *e)
{
    if (e->inflight > 0) { /* allowed: freed when its last launch completes */
        if (e->has_alloc && e->src) e->src->alloc_execs--; /* the graph may be instantiated again */
        e->has_alloc = false;
        si_obj_kill(e);
        e->free_deferred = true;
        return;
    }
    si_exec_free(e);
}

static CUresult exec_destroy(CUgraphExec hExec)
{
    struct si_exec *e;
    CUresult rc = si_get_any(hExec, SI_EXEC, &e);
    if (rc) return rc;
    if (e->h.state == SI_DEAD) {
        si_misuse("cuGraphExecDestroy of an executable graph already destroyed (%p)", (void *)e);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (si.unloaded_code_refused && si_exec_names_unloaded_code(e))
        si_misuse("cuGraphExecDestroy of an executable graph naming a kernel whose module or "
                  "library was unloaded (%p)", (void *)e);
    exec_release(e);
    return CUDA_SUCCESS;
}

/* The context's executable graphs go as cuGraphExecDestroy would take them
 * (a launch still queued on another context's stream finishes first). */
void si_exec_drop_context(struct si_context *ctx)
{
    struct si_vec execs = {0};
    si_registry_collect(SI_EXEC, &execs);
    for (size_t i = 0; i < execs.n; i++) {
        struct si_exec *e = execs.v[i];
        if (e->h.state != SI_DEAD && e->ctx == ctx) exec_release(e);
    }
    si_vec_free(&execs);
}

SI_API(cuGraphExecDestroy, (CUgraphExec e), exec_destroy(e))

static CUresult exec_node(CUgraphExec hExec, CUgraphNode hNode, struct si_exec_node **out)
{
    struct si_exec *e;
    struct si_node *n;
    CUresult rc = si_get(hExec, SI_EXEC, &e);
    if (rc || (rc = si_get(hNode, SI_NODE, &n))) return rc;
    *out = si_exec_find(e, n);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult set_enabled(CUgraphExec hExec, CUgraphNode hNode, unsigned enabled)
{
    struct si_exec_node *en;
    CUresult rc = exec_node(hExec, hNode, &en);
    if (rc) return rc;
    CUgraphNodeType t = en->p.np.type;
    if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMCPY && t != CU_GRAPH_NODE_TYPE_MEMSET)
        return CUDA_ERROR_INVALID_VALUE;
    en->enabled = enabled != 0;
    return CUDA_SUCCESS;
}

static CUresult get_enabled(CUgraphExec hExec, CUgraphNode hNode, unsigned *enabled)
{
    struct si_exec_node *en;
    CUresult rc = exec_node(hExec, hNode, &en);
    if (rc || !enabled) return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    *enabled = en->enabled;
    return CUDA_SUCCESS;
}

SI_API(cuGraphNodeSetEnabled, (CUgraphExec e, CUgraphNode n, unsigned int isEnabled), set_enabled(e, n, isEnabled))
SI_API(cuGraphNodeGetEnabled, (CUgraphExec e, CUgraphNode n, unsigned int *isEnabled), get_enabled(e, n, isEnabled))
