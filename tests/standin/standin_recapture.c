/*
 * standin_recapture.c - the CUDA 13.3 recapture API
 * (cuStreamBeginRecaptureToGraph) on top of the capture state machine.
 *
 * Owns: matching each node-creating operation of a recapture against the
 * original node at the same position in creation order, the callback and its
 * statuses, staging new parameters until a successful end (node identity is
 * preserved), and where a failure surfaces (STANDIN_RECAPTURE_FAILURE:
 * "call", "later" or "end"). A failed recapture leaves its graph poisoned:
 * undefined, to be destroyed exactly once. Must never: decide eligibility by
 * itself; it asks si_update_rule, the rule executable-graph updates use.
 *
 * What the documentation leaves open, and what the stand-in chose, is listed
 * once in READINGS.md with the knob (standin.h) that gives each reading: the
 * failure point, whether a NULL callback is accepted, whether unchanged
 * nodes reach the callback.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

enum rc_state {
    RC_MATCHING,  /* no failure so far */
    RC_PENDING,   /* "later": failed, the next call on the capture reports it */
    RC_SILENT,    /* "end": failed, only cuStreamEndCapture reports it */
    RC_SURFACED,  /* failure reported; the capture is invalidated */
};

struct si_recapture {
    CUgraphRecaptureCallback cb;
    void *user;
    enum si_surface surface;
    unsigned long error_node;
    enum rc_state state;
    size_t next, norig;
    struct si_node **orig;     /* the graph's nodes in creation order */
    struct si_params *staged;  /* new parameters per original node */
    bool *has_staged;
    unsigned long changed;
    struct si_vec scrap;       /* operations accepted after a hidden failure */
};

void si_recapture_free(struct si_recapture *rc)
{
    for (size_t i = 0; i < rc->norig; i++)
        if (rc->has_staged[i]) si_params_free(&rc->staged[i]);
    for (size_t i = 0; i < rc->scrap.n; i++) {
        si_params_free(rc->scrap.v[i]);
        free(rc->scrap.v[i]);
    }
    si_vec_free(&rc->scrap);
    free(rc->orig);
    free(rc->staged);
    free(rc->has_staged);
    free(rc);
}

/* Keeps an operation's parameters (and any allocation it made, whose address
 * the program already holds) alive until the capture ends. */
static void keep_scrap(struct si_recapture *rc, struct si_params *p)
{
    struct si_params *copy = si_calloc(1, sizeof(*copy));
    *copy = *p;
    si_vec_push(&rc->scrap, copy);
}

CUresult si_recapture_fail(struct si_capture *c, const char *why)
{
    struct si_recapture *rc = c->rc;
    si_graph_poison(c->graph, why);
    switch (rc->surface) {
    case SI_SURFACE_LATER: rc->state = RC_PENDING; return CUDA_SUCCESS;
    case SI_SURFACE_END: rc->state = RC_SILENT; return CUDA_SUCCESS;
    default:
        rc->state = RC_SURFACED;
        si_capture_invalidate(c, why);
        return CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
    }
}

static CUresult fail_op(struct si_capture *c, struct si_params *p, const char *why)
{
    CUresult r = si_recapture_fail(c, why);
    if (r) si_params_free(p);
    else keep_scrap(c->rc, p);
    return r;
}

CUresult si_recapture_gate(struct si_capture *c)
{
    if (c->rc->state != RC_PENDING) return CUDA_SUCCESS;
    c->rc->state = RC_SURFACED;
    si_capture_invalidate(c, "recapture failed");
    return CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
}

bool si_recapture_silent(const struct si_capture *c)
{
    return c->rc && (c->rc->state == RC_PENDING || c->rc->state == RC_SILENT);
}

static CUgraphRecaptureStatus status_of(const struct si_recapture *rc, const struct si_params *o,
                                        const struct si_params *n)
{
    static const struct si_update_ctx whole = {0, false, SI_UPDATE_WHOLE_GRAPH};
    if (rc->error_node && rc->changed == rc->error_node) return CU_GRAPH_RECAPTURE_ERROR;
    return si_update_rule(o, n, &whole) == CU_GRAPH_EXEC_UPDATE_SUCCESS
               ? CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE
               : CU_GRAPH_RECAPTURE_INELIGIBLE_FOR_UPDATE;
}

/* Memory nodes must match exactly; their addresses are the original's. */
static bool memory_node_matches(const struct si_params *o, const struct si_params *n)
{
    if (o->np.type == CU_GRAPH_NODE_TYPE_MEM_FREE) return o->np.free.dptr == n->np.free.dptr;
    struct si_params same = *n;
    same.np.alloc.dptr = o->np.alloc.dptr;
    return si_params_equal(o, &same);
}

CUresult si_recapture_match(struct si_capture *c, struct si_stream *s, struct si_params *p,
                            struct si_node **out)
{
    struct si_recapture *rc = c->rc;
    if (out) *out = NULL;
    if (rc->state != RC_MATCHING) { /* a hidden failure: accept and forget */
        keep_scrap(rc, p);
        return CUDA_SUCCESS;
    }
    if (rc->next >= rc->norig) return fail_op(c, p, "recapture: more nodes than the original");
    size_t i = rc->next;
    struct si_node *orig = rc->orig[i];
    if (orig->p.np.type != p->np.type) return fail_op(c, p, "recapture: node type differs");
    if (!si_vec_same_set(&s->deps, &orig->deps)) return fail_op(c, p, "recapture: dependencies differ");
    rc->next++;
    CUgraphNodeType t = p->np.type;
    if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC || t == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        if (!memory_node_matches(&orig->p, p)) return fail_op(c, p, "recapture: memory node parameters differ");
        si_params_free(p);
    } else if (si_params_equal(&orig->p, p)) {
        si_params_free(p);
        if (si.callback_every_node && rc->cb) { /* the "every" reading */
            si_user_code_begin("the recapture callback");
            CUresult answer = rc->cb(rc->user, (CUgraphNode)orig, &orig->p.np, &orig->p.np,
                                     CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE);
            si_user_code_end();
            if (answer != CUDA_SUCCESS) {
                struct si_params copy; /* fail_op takes what it is given */
                si_params_copy(&copy, &orig->p);
                return fail_op(c, &copy, "recapture: the callback refused a node");
            }
        }
    } else {
        rc->changed++;
        CUgraphRecaptureStatus status = status_of(rc, &orig->p, p);
        CUresult answer = CUDA_SUCCESS;
        if (rc->cb) {
            si_user_code_begin("the recapture callback");
            answer = rc->cb(rc->user, (CUgraphNode)orig, &orig->p.np, &p->np, status);
            si_user_code_end();
        }
        if (status == CU_GRAPH_RECAPTURE_ERROR) return fail_op(c, p, "recapture: node reported as error");
        if (answer != CUDA_SUCCESS) return fail_op(c, p, "recapture: the callback refused a node");
        rc->staged[i] = *p;
        rc->has_staged[i] = true;
    }
    s->deps.n = 0;
    si_vec_push(&s->deps, orig);
    if (out) *out = orig;
    return CUDA_SUCCESS;
}

/* At a successful end: too few nodes fails; otherwise the graph takes the
 * recaptured parameters and keeps its node handles. */
CUresult si_recapture_end(struct si_capture *c)
{
    struct si_recapture *rc = c->rc;
    if (rc->next < rc->norig) {
        si_graph_poison(c->graph, "recapture: fewer nodes than the original");
        return CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
    }
    for (size_t i = 0; i < rc->norig; i++) {
        if (!rc->has_staged[i]) continue;
        si_params_free(&rc->orig[i]->p);
        rc->orig[i]->p = rc->staged[i];
        rc->has_staged[i] = false;
    }
    return CUDA_SUCCESS;
}

/* Node types a recapture cannot reproduce: stream capture never creates
 * them (empty nodes, external semaphores, batched memory operations) or the
 * documentation rejects them (child graphs, conditionals). */
static bool rejected_type(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL ||
           t == CU_GRAPH_NODE_TYPE_EMPTY || t == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL ||
           t == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT || t == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
}

static CUresult begin_recapture(CUstream hStream, CUstreamCaptureMode mode, CUgraph hGraph,
                                CUgraphRecaptureCallback cb, void *user)
{
    struct si_stream *s;
    struct si_graph *g;
    struct si_capture *c;
    CUresult rc;
    if (si.driver_version < RECAP_RECAPTURE_MIN_DRIVER) {
        si_misuse("cuStreamBeginRecaptureToGraph called on a driver reporting %d", si.driver_version);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if ((rc = si_stream_get(hStream, false, &s)) || (rc = si_get(hGraph, SI_GRAPH, &g))) return rc;
    if (s->skind == SI_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->cap || g->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED || g->owner) return CUDA_ERROR_INVALID_VALUE;
    if (!cb && !si.null_callback_accepted) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g->nodes.n; i++) {
        if (rejected_type(((struct si_node *)g->nodes.v[i])->p.np.type)) {
            si_graph_poison(g, "recapture: graph holds a node type that cannot be recaptured");
            return CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
        }
    }
    si_graph_release_user_objects(g);
    if ((rc = si_capture_begin(s, mode, g, NULL, 0, &c))) return rc;
    struct si_recapture *r = si_calloc(1, sizeof(*r));
    r->cb = cb;
    r->user = user;
    r->surface = si.surface;
    r->error_node = si.error_node;
    r->norig = g->nodes.n;
    r->orig = si_calloc(r->norig, sizeof(*r->orig));
    memcpy(r->orig, g->nodes.v, r->norig * sizeof(*r->orig));
    r->staged = si_calloc(r->norig, sizeof(*r->staged));
    r->has_staged = si_calloc(r->norig, sizeof(*r->has_staged));
    c->rc = r;
    return CUDA_SUCCESS;
}

SI_API(cuStreamBeginRecaptureToGraph, (CUstream hStream, CUstreamCaptureMode mode, CUgraph hGraph,
                                       CUgraphRecaptureCallback callbackFunc, void *userData),
       begin_recapture(hStream, mode, hGraph, callbackFunc, userData))
