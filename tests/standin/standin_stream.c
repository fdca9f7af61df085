/*
 * standin_stream.c - streams and events.
 *
 * Owns: stream handles (user streams, the legacy stream, each thread's
 * per-thread default stream), stream creation, destruction, queries and
 * synchronisation, and events (creation, record, wait, query,
 * synchronisation, timing). In the default synchronous mode a stream that
 * is not capturing is always idle and an event recorded outside capture is
 * always complete; in asynchronous mode (standin_async.c) an event marks a
 * position in a stream's queue and the waits here wait for it. Must never:
 * decide how capture treats an event record or wait (the capture module
 * does), or run work.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Stream handles.                                                      */

static struct si_stream *builtin_stream(enum si_stream_kind kind)
{
    struct si_stream *s = si_calloc(1, sizeof(*s));
    si_obj_init(s, SI_STREAM);
    si.live[SI_STREAM]--; /* the driver's own: not a program object */
    s->skind = kind;
    return s;
}

CUresult si_stream_get(CUstream h, bool ptsz, struct si_stream **out)
{
    struct si_stream *s;
    bool per_thread = h == CU_STREAM_PER_THREAD || (!h && ptsz);
    if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) return si_get(h, SI_STREAM, out);
    struct si_context *ctx;
    CUresult rc = si_need_ctx(&ctx);
    if (rc) return rc;
    if (per_thread) {
        if (!si_tls.per_thread) si_tls.per_thread = builtin_stream(SI_STREAM_PER_THREAD);
        s = si_tls.per_thread;
    } else {
        if (!si.legacy) si.legacy = builtin_stream(SI_STREAM_LEGACY);
        s = si.legacy;
    }
    if (!s->cap) s->ctx = ctx;
    *out = s;
    return CUDA_SUCCESS;
}

/* Blocking streams synchronise implicitly with the legacy stream; the
 * per-thread default stream does too. */
bool si_stream_blocking(const struct si_stream *s)
{
    return s->skind != SI_STREAM_USER || !(s->flags & CU_STREAM_NON_BLOCKING);
}

static CUresult stream_create(CUstream *phStream, unsigned flags, int priority)
{
    struct si_context *ctx;
    CUresult rc = si_need_ctx(&ctx);
    if (rc) return rc;
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    struct si_stream *s = si_calloc(1, sizeof(*s));
    si_obj_init(s, SI_STREAM);
    s->skind = SI_STREAM_USER;
    s->flags = flags;
    /* Priorities clamp to the device range [-5, 0] (lower is higher). */
    s->priority = priority > 0 ? 0 : (priority < -5 ? -5 : priority);
    s->ctx = ctx;
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

SI_API(cuStreamCreate, (CUstream *phStream, unsigned int Flags), stream_create(phStream, Flags, 0))
SI_API(cuStreamCreateWithPriority, (CUstream *phStream, unsigned int flags, int priority),
       stream_create(phStream, flags, priority))

static void stream_free(struct si_stream *s)
{
    si_vec_free(&s->deps);
    free(s->zero_edges);
    s->zero_edges = NULL;
    si_obj_kill(s);
    /* Work still queued runs to completion; then its worker ends. */
    if (s->q.has_worker) pthread_cond_broadcast(&si.progress);
}

/* Destroying a stream in the middle of a capture is a capture violation
 * here: the capture is invalidated and the stream stays (the docs are
 * silent; a real driver cannot end that capture any more either). */
static CUresult stream_destroy(CUstream hStream)
{
    struct si_stream *s;
    if (hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD || !hStream)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = si_get(hStream, SI_STREAM, &s);
    if (rc) return rc;
    if (s->cap) {
        si_capture_invalidate(s->cap, "a capturing stream was destroyed");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    stream_free(s);
    return CUDA_SUCCESS;
}

SI_API(cuStreamDestroy, (CUstream hStream), stream_destroy(hStream))
SI_API(cuStreamDestroy_v2, (CUstream hStream), stream_destroy(hStream))

static CUresult stream_flags(CUstream h, bool ptsz, unsigned *flags, int *priority)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc) return rc;
    if (flags) *flags = s->flags;
    if (priority) *priority = s->priority;
    return (flags || priority) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_API(cuStreamGetFlags, (CUstream h, unsigned int *flags), stream_flags(h, false, flags, NULL))
SI_API(cuStreamGetFlags_ptsz, (CUstream h, unsigned int *flags), stream_flags(h, true, flags, NULL))
SI_API(cuStreamGetPriority, (CUstream h, int *priority), stream_flags(h, false, NULL, priority))
SI_API(cuStreamGetPriority_ptsz, (CUstream h, int *priority), stream_flags(h, true, NULL, priority))

/* Stream attributes: what the driver accepts for a stream (access policy
 * window, synchronisation policy, priority, memory sync domain and its
 * map), stored and read back. Nothing is refused during a capture: the
 * driver's answer there is not measured, and recap hands such calls to the
 * driver whenever it matters (guard:stream_state). */
static bool stream_attr_valid(CUstreamAttrID attr)
{
    return attr == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW ||
           attr == CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY || attr == CU_LAUNCH_ATTRIBUTE_PRIORITY ||
           attr == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP || attr == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
}

static CUresult stream_attr(CUstream h, bool ptsz, CUstreamAttrID attr, const CUstreamAttrValue *in,
                            CUstreamAttrValue *out)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(h, ptsz, &s);
    if (rc) return rc;
    if (!stream_attr_valid(attr) || (!in && !out)) return CUDA_ERROR_INVALID_VALUE;
    if (in && attr == CU_LAUNCH_ATTRIBUTE_PRIORITY) s->priority = in->priority;
    else if (in) s->attrs[attr] = *in;
    if (out && attr == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
        memset(out, 0, sizeof(*out));
        out->priority = s->priority;
    } else if (out) {
        *out = s->attrs[attr];
    }
    return CUDA_SUCCESS;
}

static CUresult stream_copy_attrs(CUstream dst, CUstream src, bool ptsz)
{
    struct si_stream *d, *s;
    CUresult rc = si_stream_get(dst, ptsz, &d);
    if (rc || (rc = si_stream_get(src, ptsz, &s))) return rc;
    memcpy(d->attrs, s->attrs, sizeof(d->attrs));
    d->priority = s->priority;
    return CUDA_SUCCESS;
}

SI_API(cuStreamSetAttribute, (CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *v),
       stream_attr(h, false, attr, v, NULL))
SI_API(cuStreamSetAttribute_ptsz, (CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *v),
       stream_attr(h, true, attr, v, NULL))
SI_API(cuStreamGetAttribute, (CUstream h, CUstreamAttrID attr, CUstreamAttrValue *v),
       stream_attr(h, false, attr, NULL, v))
SI_API(cuStreamGetAttribute_ptsz, (CUstream h, CUstreamAttrID attr, CUstreamAttrValue *v),
       stream_attr(h, true, attr, NULL, v))
SI_API(cuStreamCopyAttributes, (CUstream dst, CUstream src), stream_copy_attrs(dst, src, false))
SI_API(cuStreamCopyAttributes_ptsz, (CUstream dst, CUstream src), stream_copy_attrs(dst, src, true))

/* Synchronising or querying a capturing stream is invalid whatever the
 * modes: it does not represent work scheduled for execution. Measured
 * (READINGS.md "Capture prohibitions"): synchronising or querying any other
 * stream, non-blocking ones included, is a potentially unsafe call; the
 * legacy stream while a blocking stream captures is an implicit dependency
 * (si_capture_gate). */
static CUresult stream_wait_idle(CUstream hStream, bool ptsz, bool query)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc || (rc = si_capture_gate(s))) return rc;
    if (s->cap) {
        si_capture_invalidate(s->cap, query ? "capturing stream queried" : "capturing stream synchronised");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((rc = si_capture_unsafe_call(query ? "cuStreamQuery" : "cuStreamSynchronize"))) return rc;
    if (!si_async_active()) return CUDA_SUCCESS;
    return query ? si_async_query_stream(s) : si_async_sync_stream(s);
}

/* Work no capture can hold (measured on driver 580, READINGS.md "Capture
 * prohibitions"): a host callback or a memory attachment on a stream of a
 * capture is refused and invalidates the capture, whatever the modes and
 * the thread (si_stream_uncapturable); on any other stream it is ordinary
 * stream work. */

struct stream_callback {
    CUstreamCallback fn;
    CUstream stream;
    void *data;
};

/* The callback runs as a host function in stream order; it is told of no
 * error (the stand-in's work does not fail once enqueued). */
static void CUDA_CB run_stream_callback(void *p)
{
    struct stream_callback cb = *(struct stream_callback *)p;
    free(p);
    cb.fn(cb.stream, CUDA_SUCCESS, cb.data);
}

static CUresult stream_add_callback(CUstream hStream, CUstreamCallback fn, void *data,
                                    unsigned flags, bool ptsz)
{
    struct si_stream *s;
    struct si_params p;
    if (!fn || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = si_stream_uncapturable(hStream, ptsz, "host callback added to a capturing stream", &s);
    if (rc) return rc;
    struct stream_callback *cb = malloc(sizeof *cb);
    if (!cb) return CUDA_ERROR_OUT_OF_MEMORY;
    *cb = (struct stream_callback){ fn, hStream, data };
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_HOST};
    np.host.fn = run_stream_callback;
    np.host.userData = cb;
    if ((rc = si_params_build(&p, &np, s->ctx))) {
        free(cb);
        return rc;
    }
    return si_submit(s, &p, NULL);
}

SI_API(cuStreamAddCallback, (CUstream s, CUstreamCallback fn, void *data, unsigned int flags),
       stream_add_callback(s, fn, data, flags, false))
SI_API(cuStreamAddCallback_ptsz, (CUstream s, CUstreamCallback fn, void *data, unsigned int flags),
       stream_add_callback(s, fn, data, flags, true))

/* Memory attachment changes no memory the stand-in models: accepted. */
static CUresult stream_attach_mem(CUstream hStream, CUdeviceptr dptr, bool ptsz)
{
    struct si_stream *s;
    CUresult rc = si_stream_uncapturable(hStream, ptsz, "memory attached on a capturing stream", &s);
    return rc ? rc : dptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_API(cuStreamAttachMemAsync, (CUstream s, CUdeviceptr dptr, size_t length, unsigned int flags),
       ((void)length, (void)flags, stream_attach_mem(s, dptr, false)))
SI_API(cuStreamAttachMemAsync_ptsz, (CUstream s, CUdeviceptr dptr, size_t length, unsigned int flags),
       ((void)length, (void)flags, stream_attach_mem(s, dptr, true)))

SI_API(cuStreamSynchronize, (CUstream s), stream_wait_idle(s, false, false))
SI_API(cuStreamSynchronize_ptsz, (CUstream s), stream_wait_idle(s, true, false))
SI_API(cuStreamQuery, (CUstream s), stream_wait_idle(s, false, true))
SI_API(cuStreamQuery_ptsz, (CUstream s), stream_wait_idle(s, true, true))

/* ------------------------------------------------------------------ */
/* Events.                                                             */

static CUresult event_create(CUevent *phEvent, unsigned flags)
{
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    struct si_context *ctx;
    CUresult rc = si_need_ctx(&ctx);
    if (rc) return rc;
    if (!phEvent || (flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    struct si_event *ev = si_calloc(1, sizeof(*ev));
    si_obj_init(ev, SI_EVENT);
    ev->ctx = ctx;
    ev->flags = flags;
    *phEvent = (CUevent)ev;
    return CUDA_SUCCESS;
}

SI_API(cuEventCreate, (CUevent *phEvent, unsigned int Flags), event_create(phEvent, Flags))

static void event_free(struct si_event *ev)
{
    si_vec_free(&ev->cap_deps);
    si_obj_kill(ev); /* a record still queued completes all the same (the header stays) */
}

static CUresult event_destroy(CUevent hEvent)
{
    struct si_event *ev;
    CUresult rc = si_get(hEvent, SI_EVENT, &ev);
    if (rc) return rc;
    event_free(ev);
    return CUDA_SUCCESS;
}

SI_API(cuEventDestroy, (CUevent hEvent), event_destroy(hEvent))
SI_API(cuEventDestroy_v2, (CUevent hEvent), event_destroy(hEvent))

static CUresult event_record(CUevent hEvent, CUstream hStream, unsigned flags, bool ptsz)
{
    struct si_event *ev;
    struct si_stream *s;
    CUresult rc = si_get(hEvent, SI_EVENT, &ev);
    if (rc || (rc = si_stream_get(hStream, ptsz, &s))) return rc;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_capture_gate(s))) return rc;
    if (s->cap) return si_capture_event_record(s, ev, flags);
    if (flags & CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE; /* only in capture */
    ev->recorded = true;
    ev->time_ms = si_now_ms();
    ev->cap_id = 0;
    ev->cap_deps.n = 0;
    ev->gen++;
    if (si_async_active()) { /* completes, and takes its time, when the stream reaches it */
        struct si_work *w = si_work_new(SI_WORK_EVENT);
        w->ev = ev;
        w->gen = ev->gen;
        ev->at_stream = s;
        ev->at_seq = si_async_enqueue(s, w);
    }
    return CUDA_SUCCESS;
}

SI_API(cuEventRecord, (CUevent e, CUstream s), event_record(e, s, 0, false))
SI_API(cuEventRecord_ptsz, (CUevent e, CUstream s), event_record(e, s, 0, true))
SI_API(cuEventRecordWithFlags, (CUevent e, CUstream s, unsigned int flags), event_record(e, s, flags, false))
SI_API(cuEventRecordWithFlags_ptsz, (CUevent e, CUstream s, unsigned int flags),
       event_record(e, s, flags, true))

static CUresult stream_wait_event(CUstream hStream, CUevent hEvent, unsigned flags, bool ptsz)
{
    struct si_event *ev;
    struct si_stream *s;
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc || (rc = si_get(hEvent, SI_EVENT, &ev))) return rc;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_capture_gate(s))) return rc;
    if (s->cap || (ev->cap_id && si_capture_by_id(ev->cap_id)))
        return si_capture_event_wait(s, ev, flags);
    if (flags & CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE; /* only in capture */
    if (ev->cap_id) return CUDA_ERROR_INVALID_VALUE; /* its capture has ended (measured) */
    if (!si_async_active() || !ev->at_stream || si_async_done(ev->at_stream, ev->at_seq))
        return CUDA_SUCCESS; /* everything recorded has already run */
    struct si_work *w = si_work_new(SI_WORK_WAIT);
    si_work_wait_on(w, ev->at_stream, ev->at_seq);
    si_async_enqueue(s, w);
    return CUDA_SUCCESS;
}

SI_API(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int flags), stream_wait_event(s, e, flags, false))
SI_API(cuStreamWaitEvent_ptsz, (CUstream s, CUevent e, unsigned int flags),
       stream_wait_event(s, e, flags, true))

/* An event last recorded in a capture stands for no scheduled work:
 * querying or synchronising it is refused and invalidates that capture
 * (CUDA_ERROR_CAPTURED_EVENT, whatever the modes); once that capture has
 * ended the event is refused with CUDA_ERROR_INVALID_VALUE (measured). */
static CUresult captured_event_use(struct si_event *ev, const char *what)
{
    struct si_capture *c = si_capture_by_id(ev->cap_id);
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    si_capture_invalidate(c, what);
    return CUDA_ERROR_CAPTURED_EVENT;
}

static CUresult event_synchronize(CUevent hEvent)
{
    struct si_event *ev;
    CUresult rc = si_get(hEvent, SI_EVENT, &ev);
    if (rc) return rc;
    if (ev->cap_id) return captured_event_use(ev, "captured event synchronised");
    if ((rc = si_capture_unsafe_call("cuEventSynchronize"))) return rc;
    if (si_async_active() && ev->at_stream) si_async_wait_point(ev->at_stream, ev->at_seq);
    return CUDA_SUCCESS;
}

static bool event_pending(const struct si_event *ev)
{
    return si_async_active() && ev->at_stream && !si_async_done(ev->at_stream, ev->at_seq);
}

static CUresult event_query(CUevent hEvent)
{
    struct si_event *ev;
    CUresult rc = si_get(hEvent, SI_EVENT, &ev);
    if (rc) return rc;
    if (ev->cap_id) return captured_event_use(ev, "captured event queried");
    if ((rc = si_capture_unsafe_call("cuEventQuery"))) return rc; /* measured */
    return event_pending(ev) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

SI_API(cuEventSynchronize, (CUevent e), event_synchronize(e))
SI_API(cuEventQuery, (CUevent e), event_query(e))

static CUresult event_elapsed(float *ms, CUevent hStart, CUevent hEnd)
{
    struct si_event *a, *b;
    CUresult rc = si_get(hStart, SI_EVENT, &a);
    if (rc || (rc = si_get(hEnd, SI_EVENT, &b))) return rc;
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (a->cap_id || b->cap_id) return CUDA_ERROR_CAPTURED_EVENT;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if (event_pending(a) || event_pending(b)) return CUDA_ERROR_NOT_READY;
    *ms = (float)(b->time_ms - a->time_ms);
    return CUDA_SUCCESS;
}

SI_API(cuEventElapsedTime, (float *ms, CUevent s, CUevent e), event_elapsed(ms, s, e))
SI_API(cuEventElapsedTime_v2, (float *ms, CUevent s, CUevent e), event_elapsed(ms, s, e))

/* ------------------------------------------------------------------ */
/* Context teardown.                                                    */

/* The context's streams and events go as their destroy calls would take
 * them (its queues have drained and its captures ended first). The legacy
 * and per-thread streams are the driver's own: they stay, and take the
 * context current at their next use. */
void si_stream_drop_context(struct si_context *ctx)
{
    struct si_vec objs = {0};
    si_registry_collect(SI_STREAM, &objs);
    for (size_t i = 0; i < objs.n; i++) {
        struct si_stream *s = objs.v[i];
        if (s->h.state == SI_LIVE && s->skind == SI_STREAM_USER && s->ctx == ctx && !s->cap)
            stream_free(s);
    }
    objs.n = 0;
    si_registry_collect(SI_EVENT, &objs);
    for (size_t i = 0; i < objs.n; i++) {
        struct si_event *ev = objs.v[i];
        if (ev->h.state == SI_LIVE && ev->ctx == ctx) event_free(ev);
    }
    si_vec_free(&objs);
}
