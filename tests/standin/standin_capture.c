/*
 * standin_capture.c - the stream-capture state machine.
 *
 * Owns: capture sequences (begin, fork and join through events, dependency
 * sets, end), the capture modes and the rules for potentially unsafe calls
 * (cuThreadExchangeStreamCaptureMode), invalidation, the legacy-stream
 * conflicts, capture queries, and si_submit, the one place that decides
 * whether work runs now or becomes a node. Must never: judge node
 * parameters (standin_params.c) or match a recapture against its graph
 * (standin_recapture.c, reached through si_recapture_*).
 *
 * Rules followed, from the driver documentation of cuStreamBeginCapture,
 * cuStreamEndCapture, cuThreadExchangeStreamCaptureMode,
 * cuStreamGetCaptureInfo and the programming guide's "Prohibited and
 * Unhandled Operations", corrected where a real driver (580.159) was
 * measured to differ (READINGS.md "Capture prohibitions",
 * tests/gpu/capture_semantics.expected): an invalid operation invalidates every capture it
 * concerns; later work on an invalidated capture returns
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; the end always takes every stream of
 * the capture out of capture.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

struct si_capture *si_capture_by_id(unsigned long long id)
{
    for (struct si_capture *c = si.captures; c; c = c->next)
        if (c->id == id) return c;
    return NULL;
}

bool si_any_capture_active(void)
{
    return si.captures != NULL;
}

void si_capture_invalidate(struct si_capture *c, const char *why)
{
    if (c->invalidated) return;
    c->invalidated = true;
    if (c->rc) si_graph_poison(c->graph, why); /* a recapture fails for any reason */
}

/* The legacy stream encompasses every blocking stream: while one of them
 * captures, using the legacy stream would make an implicit dependency on the
 * capture. */
static CUresult legacy_conflict(bool invalidate)
{
    bool hit = false;
    for (struct si_capture *c = si.captures; c; c = c->next) {
        for (size_t i = 0; i < c->streams.n; i++) {
            if (!si_stream_blocking(c->streams.v[i])) continue;
            hit = true;
            if (invalidate) si_capture_invalidate(c, "legacy stream used during capture");
            break;
        }
    }
    return hit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

CUresult si_capture_gate(struct si_stream *s)
{
    CUresult rc;
    if (s->skind == SI_STREAM_LEGACY && (rc = legacy_conflict(true))) return rc;
    if (!s->cap) return CUDA_SUCCESS;
    if (s->cap->rc && (rc = si_recapture_gate(s->cap))) return rc;
    return s->cap->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

/* cuThreadExchangeStreamCaptureMode: a thread in GLOBAL mode may not make
 * potentially unsafe calls while it has a non-relaxed capture of its own or
 * any thread has a GLOBAL capture; THREAD_LOCAL only looks at its own;
 * RELAXED is never prohibited. A prohibited call invalidates the captures
 * that prohibit it. */
CUresult si_capture_unsafe_call(const char *what)
{
    CUstreamCaptureMode mode = si_tls.mode;
    pthread_t self = pthread_self();
    bool prohibited = false;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    for (struct si_capture *c = si.captures; c; c = c->next) {
        bool mine = pthread_equal(c->thread, self);
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            prohibited = true;
            si_capture_invalidate(c, what);
        }
    }
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Synchronous copies and memsets enqueue on the default stream and wait for
 * it. Measured (driver 580.159, READINGS.md "Capture prohibitions"): they are
 * not potentially unsafe calls: whatever the modes and the thread, they fail
 * only where the legacy stream conflicts with a capturing blocking stream
 * (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, invalidating it), and succeed while
 * only non-blocking streams capture, even in a GLOBAL capture on its own
 * thread. */
CUresult si_sync_default_stream(bool ptds, const char *what, struct si_stream **out)
{
    return si_stream_uncapturable(NULL, ptds, what, out);
}

CUresult si_stream_uncapturable(CUstream h, bool ptsz, const char *what, struct si_stream **out)
{
    CUresult rc = si_stream_get(h, ptsz, out);
    if (rc || (rc = si_capture_gate(*out))) return rc;
    if ((*out)->cap) {
        si_capture_invalidate((*out)->cap, what);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Nodes.                                                              */

CUresult si_capture_add_node(struct si_stream *s, struct si_params *p, struct si_node **out)
{
    struct si_capture *c = s->cap;
    struct si_node *n;
    if (c->rc) return si_recapture_match(c, s, p, out);
    CUresult rc = si_graph_add(c->graph, p, (struct si_node *const *)s->deps.v, s->deps.n, &n);
    if (rc) return rc;
    s->deps.n = 0;
    si_vec_push(&s->deps, n);
    if (out) *out = n;
    return CUDA_SUCCESS;
}

CUresult si_submit(struct si_stream *s, struct si_params *p, struct si_node **node_out)
{
    if (s->cap) return si_capture_add_node(s, p, node_out);
    if (si_async_active()) return si_async_submit(s, p);
    CUresult rc = si_params_run(p, s);
    si_params_free(p);
    return rc;
}

static void stream_join(struct si_capture *c, struct si_stream *s, const struct si_vec *deps)
{
    s->cap = c;
    si_vec_copy(&s->deps, deps);
    if (!si_vec_contains(&c->streams, s)) si_vec_push(&c->streams, s);
}

CUresult si_capture_event_record(struct si_stream *s, struct si_event *ev, unsigned flags)
{
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
        struct si_params p;
        CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD};
        np.eventRecord.event = (CUevent)ev;
        CUresult rc = si_params_build(&p, &np, s->ctx);
        return rc ? rc : si_capture_add_node(s, &p, NULL);
    }
    ev->cap_id = s->cap->id;
    ev->recorded = true;
    si_vec_copy(&ev->cap_deps, &s->deps);
    return CUDA_SUCCESS;
}

CUresult si_capture_event_wait(struct si_stream *s, struct si_event *ev, unsigned flags)
{
    struct si_capture *ec = ev->cap_id ? si_capture_by_id(ev->cap_id) : NULL;
    CUresult rc;
    if (flags & CU_EVENT_WAIT_EXTERNAL) {
        struct si_params p;
        CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT};
        if (!s->cap) return CUDA_ERROR_INVALID_VALUE;
        np.eventWait.event = (CUevent)ev;
        rc = si_params_build(&p, &np, s->ctx);
        return rc ? rc : si_capture_add_node(s, &p, NULL);
    }
    if (ev->cap_id && !ec) {
        /* Measured: an event last recorded in a capture that has ended is
         * refused, and a capture waiting on it is invalidated. */
        if (s->cap) si_capture_invalidate(s->cap, "wait on an event of an ended capture");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!s->cap) { /* fork: the stream joins the event's capture */
        if (ec->rc && (rc = si_recapture_gate(ec))) return rc;
        if (ec->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (s->skind == SI_STREAM_LEGACY) {
            si_capture_invalidate(ec, "legacy stream joined a capture");
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        stream_join(ec, s, &ev->cap_deps);
        return CUDA_SUCCESS;
    }
    if (!ev->cap_id && !ev->recorded) return CUDA_SUCCESS; /* an empty event */
    if (ec != s->cap) {
        /* A dependency across the capture boundary, or a merge of two
         * captures. */
        si_capture_invalidate(s->cap, "wait on an event from outside the capture");
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    for (size_t i = 0; i < ev->cap_deps.n; i++)
        if (!si_vec_contains(&s->deps, ev->cap_deps.v[i])) si_vec_push(&s->deps, ev->cap_deps.v[i]);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Begin and end.                                                      */

CUresult si_capture_begin(struct si_stream *s, CUstreamCaptureMode mode, struct si_graph *into,
                          const CUgraphNode *deps, size_t ndeps, struct si_capture **out)
{
    CUresult rc;
    if (s->skind == SI_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    if (into && into->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if (into && (rc = si_graph_check_deps(into, deps, ndeps, NULL))) return rc;
    struct si_capture *c = si_calloc(1, sizeof(*c));
    if (into) {
        c->graph = into;
    } else if ((rc = si_graph_new(&c->graph))) {
        free(c);
        return rc;
    } else {
        c->graph->ctx = s->ctx; /* the capture's graph belongs to its stream's context */
    }
    c->graph_owned = !into;
    c->id = si.next_capture_id++;
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
    c->graph->capturing = c;
    s->cap = c;
    s->deps.n = 0;
    for (size_t i = 0; i < ndeps; i++) si_vec_push(&s->deps, (void *)deps[i]);
    si_vec_push(&c->streams, s);
    c->next = si.captures;
    si.captures = c;
    if (out) *out = c;
    return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream h, bool ptsz, CUstreamCaptureMode mode)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc) return rc;
    if (s->skind == SI_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return si_capture_begin(s, mode, NULL, NULL, 0, NULL);
}

SI_API(cuStreamBeginCapture, (CUstream s), begin_capture(s, false, CU_STREAM_CAPTURE_MODE_GLOBAL))
SI_API(cuStreamBeginCapture_ptsz, (CUstream s), begin_capture(s, true, CU_STREAM_CAPTURE_MODE_GLOBAL))
SI_API(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode mode), begin_capture(s, false, mode))
SI_API(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode mode), begin_capture(s, true, mode))

static CUresult begin_capture_to_graph(CUstream h, CUgraph hGraph, const CUgraphNode *deps,
                                       const CUgraphEdgeData *edata, size_t ndeps,
                                       CUstreamCaptureMode mode, bool ptsz)
{
    struct si_stream *s;
    struct si_graph *g;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc || (rc = si_get(hGraph, SI_GRAPH, &g))) return rc;
    if (ndeps && !deps) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_graph_check_deps(g, deps, ndeps, edata))) return rc;
    return si_capture_begin(s, mode, g, deps, ndeps, NULL);
}

SI_API(cuStreamBeginCaptureToGraph, (CUstream s, CUgraph g, const CUgraphNode *deps,
                                     const CUgraphEdgeData *edata, size_t n, CUstreamCaptureMode mode),
       begin_capture_to_graph(s, g, deps, edata, n, mode, false))
SI_API(cuStreamBeginCaptureToGraph_ptsz, (CUstream s, CUgraph g, const CUgraphNode *deps,
                                          const CUgraphEdgeData *edata, size_t n,
                                          CUstreamCaptureMode mode),
       begin_capture_to_graph(s, g, deps, edata, n, mode, true))

static void mark_ancestors(struct si_node *n, unsigned long visit)
{
    if (n->visit == visit) return;
    n->visit = visit;
    for (size_t i = 0; i < n->deps.n; i++) mark_ancestors(n->deps.v[i], visit);
}

/* Every stream that joined must have been joined back: whatever it would
 * depend on next must be reachable from the origin stream's dependencies. */
static bool capture_unjoined(const struct si_capture *c)
{
    unsigned long visit = si_next_visit();
    for (size_t i = 0; i < c->origin->deps.n; i++) mark_ancestors(c->origin->deps.v[i], visit);
    for (size_t i = 0; i < c->streams.n; i++) {
        const struct si_stream *t = c->streams.v[i];
        for (size_t j = 0; t != c->origin && j < t->deps.n; j++)
            if (((struct si_node *)t->deps.v[j])->visit != visit) return true;
    }
    return false;
}

static void capture_detach(struct si_capture *c)
{
    for (size_t i = 0; i < c->streams.n; i++) {
        struct si_stream *t = c->streams.v[i];
        t->cap = NULL;
        t->deps.n = 0;
    }
    for (struct si_capture **pp = &si.captures; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    c->graph->capturing = NULL;
    si_vec_free(&c->streams);
    if (c->rc) si_recapture_free(c->rc);
    free(c);
}

/* Context teardown: a capture that a stream of the context takes part in,
 * or that captures into one of its graphs, is over: invalidated, every
 * stream out of capture, no graph. A graph the capture made and never
 * handed out is freed; a recaptured graph is left undefined (poisoned). */
void si_capture_drop_context(struct si_context *ctx)
{
    for (struct si_capture *c = si.captures, *next; c; c = next) {
        next = c->next;
        bool hit = c->graph->ctx == ctx;
        for (size_t i = 0; i < c->streams.n && !hit; i++)
            hit = ((struct si_stream *)c->streams.v[i])->ctx == ctx;
        if (!hit) continue;
        si_capture_invalidate(c, "its context was destroyed");
        if (c->graph_owned && !c->graph_handed_out) si_graph_free(c->graph);
        capture_detach(c);
    }
}

static CUresult end_capture(CUstream h, bool ptsz, CUgraph *phGraph)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc) return rc;
    /* Measured on driver 580 (READINGS.md, "Ending without a graph"): a
     * NULL phGraph ends the capture all the same; a graph the program was
     * handed by a capture query stays its own, one it never saw is freed. */
    CUgraph unused;
    bool graph_wanted = phGraph != NULL;
    if (!phGraph) phGraph = &unused;
    struct si_capture *c = s->cap;
    if (!c) {
        if (s->skind == SI_STREAM_LEGACY && (rc = legacy_conflict(true))) return rc;
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (c->origin != s) {
        si_capture_invalidate(c, "capture ended on a stream other than its origin");
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        /* Measured: the capture is over (every stream reports NONE after),
         * with no graph. */
        si_capture_invalidate(c, "capture ended from another thread");
        *phGraph = NULL;
        if (c->graph_owned) si_graph_free(c->graph);
        capture_detach(c);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c->rc && si_recapture_silent(c)) rc = CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
    else if (c->invalidated) rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (capture_unjoined(c)) rc = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    else if (c->rc) rc = si_recapture_end(c);
    if (rc && c->rc) si_graph_poison(c->graph, "recapture failed");
    *phGraph = rc ? NULL : (CUgraph)c->graph;
    if (c->graph_owned && (rc || (!graph_wanted && !c->graph_handed_out))) si_graph_free(c->graph);
    capture_detach(c);
    return rc;
}

SI_API(cuStreamEndCapture, (CUstream s, CUgraph *g), end_capture(s, false, g))
SI_API(cuStreamEndCapture_ptsz, (CUstream s, CUgraph *g), end_capture(s, true, g))

/* ------------------------------------------------------------------ */
/* Queries and dependency updates.                                      */

struct capture_query {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edata;
    size_t *ndeps;
};

static CUresult capture_query(CUstream h, bool ptsz, const struct capture_query *q)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc) return rc;
    if (!q->status || (q->edata && !q->deps)) return CUDA_ERROR_INVALID_VALUE;
    if (s->skind == SI_STREAM_LEGACY && (rc = legacy_conflict(false))) return rc;
    struct si_capture *c = s->cap;
    if (c && c->rc && (rc = si_recapture_gate(c))) return rc;
    if (!c) {
        *q->status = CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
    }
    if (c->invalidated) { /* measured: only the status is written */
        *q->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        return CUDA_SUCCESS;
    }
    *q->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (q->id) *q->id = c->id;
    if (q->graph) {
        *q->graph = (CUgraph)c->graph;
        c->graph_handed_out = true;
    }
    if (q->deps) *q->deps = s->deps.n ? (const CUgraphNode *)s->deps.v : NULL; /* measured: NULL for none */
    if (q->ndeps) *q->ndeps = s->deps.n;
    if (q->edata) {
        if (s->zero_edges_len < s->deps.n + 1) {
            free(s->zero_edges);
            s->zero_edges_len = s->deps.n + 1;
            s->zero_edges = si_calloc(s->zero_edges_len, sizeof(CUgraphEdgeData));
        }
        *q->edata = s->zero_edges;
    }
    return CUDA_SUCCESS;
}

#define QUERY(...) (&(struct capture_query){__VA_ARGS__})

SI_API(cuStreamIsCapturing, (CUstream h, CUstreamCaptureStatus *st),
       capture_query(h, false, QUERY(.status = st)))
SI_API(cuStreamIsCapturing_ptsz, (CUstream h, CUstreamCaptureStatus *st),
       capture_query(h, true, QUERY(.status = st)))
SI_API(cuStreamGetCaptureInfo, (CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id),
       capture_query(h, false, QUERY(.status = st, .id = id)))
SI_API(cuStreamGetCaptureInfo_ptsz, (CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id),
       capture_query(h, true, QUERY(.status = st, .id = id)))
SI_API(cuStreamGetCaptureInfo_v2, (CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                   const CUgraphNode **deps, size_t *n),
       capture_query(h, false, QUERY(.status = st, .id = id, .graph = g, .deps = deps, .ndeps = n)))
SI_API(cuStreamGetCaptureInfo_v2_ptsz, (CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                        CUgraph *g, const CUgraphNode **deps, size_t *n),
       capture_query(h, true, QUERY(.status = st, .id = id, .graph = g, .deps = deps, .ndeps = n)))
SI_API(cuStreamGetCaptureInfo_v3, (CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                   const CUgraphNode **deps, const CUgraphEdgeData **e, size_t *n),
       capture_query(h, false, QUERY(.status = st, .id = id, .graph = g, .deps = deps, .edata = e,
                                     .ndeps = n)))
SI_API(cuStreamGetCaptureInfo_v3_ptsz, (CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                        CUgraph *g, const CUgraphNode **deps,
                                        const CUgraphEdgeData **e, size_t *n),
       capture_query(h, true, QUERY(.status = st, .id = id, .graph = g, .deps = deps, .edata = e,
                                    .ndeps = n)))

static CUresult update_deps(CUstream h, CUgraphNode *deps, const CUgraphEdgeData *edata, size_t n,
                            unsigned flags, bool ptsz)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc || (rc = si_capture_gate(s))) return rc;
    if (!s->cap) return CUDA_ERROR_ILLEGAL_STATE;
    if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_graph_check_deps(s->cap->graph, deps, n, edata))) return rc;
    if (si_recapture_silent(s->cap)) return CUDA_SUCCESS;
    if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) s->deps.n = 0;
    for (size_t i = 0; i < n; i++)
        if (!si_vec_contains(&s->deps, deps[i])) si_vec_push(&s->deps, deps[i]);
    return CUDA_SUCCESS;
}

SI_API(cuStreamUpdateCaptureDependencies, (CUstream h, CUgraphNode *deps, size_t n, unsigned int flags),
       update_deps(h, deps, NULL, n, flags, false))
SI_API(cuStreamUpdateCaptureDependencies_ptsz, (CUstream h, CUgraphNode *deps, size_t n,
                                                unsigned int flags),
       update_deps(h, deps, NULL, n, flags, true))
SI_API(cuStreamUpdateCaptureDependencies_v2, (CUstream h, CUgraphNode *deps, const CUgraphEdgeData *e,
                                              size_t n, unsigned int flags),
       update_deps(h, deps, e, n, flags, false))
SI_API(cuStreamUpdateCaptureDependencies_v2_ptsz, (CUstream h, CUgraphNode *deps,
                                                   const CUgraphEdgeData *e, size_t n,
                                                   unsigned int flags),
       update_deps(h, deps, e, n, flags, true))

SI_EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    SI_ENTER(cuThreadExchangeStreamCaptureMode);
    /* Measured: a mode out of range is taken (CUDA_SUCCESS) and handed back
     * by the next exchange; the stand-in treats it as THREAD_LOCAL (what
     * the driver then prohibits was not measured). */
    if (!mode) return si_leave(CUDA_ERROR_INVALID_VALUE);
    CUstreamCaptureMode old = si_tls.mode;
    si_tls.mode = *mode;
    *mode = old;
    return si_leave(CUDA_SUCCESS);
}
