/*
 * user_objects.c - references to the program's user objects that recap
 * takes when it reuses an executable graph, and gives back after the work.
 *
 * Per graph: the objects the program attached (a small set of object and
 * count). Per reused executable graph: the references recap took for the
 * graph it now reflects, and where it was last launched. A retired set
 * waits on an event recorded behind that launch; uobj_collect gives back
 * the sets whose event completed. Driver calls happen outside uobj_lock.
 */
#include <pthread.h>
#include <stdlib.h>

#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/handle_map.h"
#include "shim/state/user_objects.h"

struct uobj_ref {
    CUuserObject object;
    unsigned count;
};

struct uobj_set {
    struct uobj_ref *refs;
    int n, capacity;
};

struct exec_hold {
    struct uobj_set held;         /* references recap took for this exec */
    CUstream last_stream;         /* NULL after that stream was destroyed */
    int launched;                 /* since the references were taken */
};

struct pending_release {
    struct uobj_set set;
    CUevent done;                 /* NULL: not recorded yet (stream was capturing) */
    CUstream stream;
    int stuck;                    /* the event could not be recorded: kept until exit */
    struct pending_release *next;
};

int uobj_tracking;

static pthread_mutex_t uobj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap objects_by_graph;      /* CUgraph -> struct uobj_set */
/* Entries of objects_by_graph, read without the lock: while it is 0 (a
 * program that attaches no user objects) a graph's and an executable
 * graph's questions are answered without taking uobj_lock. */
static int graphs_noted;
static struct hmap holds_by_exec;         /* CUgraphExec -> struct exec_hold */
static struct pending_release *pending;

/* --- sets ---------------------------------------------------------------------- */

static int set_add(struct uobj_set *s, CUuserObject object, int count)
{
    for (int i = 0; i < s->n; i++) {
        if (s->refs[i].object == object) {
            s->refs[i].count = (unsigned)((int)s->refs[i].count + count);
            if (s->refs[i].count == 0)
                s->refs[i] = s->refs[--s->n];
            return 0;
        }
    }
    if (count <= 0)
        return 0;
    if (s->n == s->capacity) {
        int capacity = s->capacity ? s->capacity * 2 : 4;
        struct uobj_ref *refs = realloc(s->refs, (size_t)capacity * sizeof *refs);
        if (!refs)
            return -1;
        s->refs = refs;
        s->capacity = capacity;
    }
    s->refs[s->n++] = (struct uobj_ref){ object, (unsigned)count };
    return 0;
}

static int set_copy(struct uobj_set *to, const struct uobj_set *from)
{
    *to = (struct uobj_set){ 0 };
    if (!from || from->n == 0)
        return 0;
    to->refs = malloc((size_t)from->n * sizeof *to->refs);
    if (!to->refs)
        return -1;
    for (int i = 0; i < from->n; i++)
        to->refs[i] = from->refs[i];
    to->n = to->capacity = from->n;
    return 0;
}

/* Gives every reference of the set back and frees it. A refused release
 * had no effect (the driver's convention), so it is tried once more before
 * the reference is given up as kept. */
static void set_release(struct uobj_set *s)
{
    for (int i = 0; i < s->n; i++) {
        CUresult r = DRV_REAL(cuUserObjectRelease)(s->refs[i].object, s->refs[i].count);
        if (r != CUDA_SUCCESS) {
            CUresult again = DRV_REAL(cuUserObjectRelease)(s->refs[i].object, s->refs[i].count);
            event_own_call_failed(NULL, "cuUserObjectRelease", r,
                                  again == CUDA_SUCCESS ? "released at the second attempt"
                                                        : "a user object keeps a reference recap took");
        }
    }
    free(s->refs);
    *s = (struct uobj_set){ 0 };
}

/* --- what the program attaches ----------------------------------------------------- */

static void note(CUgraph graph, CUuserObject object, int count)
{
    pthread_mutex_lock(&uobj_lock);
    struct uobj_set *s = hmap_get(&objects_by_graph, graph);
    if (!s && count > 0 && (s = calloc(1, sizeof *s)) != NULL) {
        if (hmap_put(&objects_by_graph, graph, s) != 0) {
            free(s);
            s = NULL;
        } else {
            __atomic_add_fetch(&graphs_noted, 1, __ATOMIC_RELEASE);
        }
    }
    int lost = count > 0 && (!s || set_add(s, object, count) != 0);
    if (!lost && s && count < 0)
        set_add(s, object, count);
    pthread_mutex_unlock(&uobj_lock);
    if (lost)
        event_warning(NULL, "out of memory recording a user object: a graph may be reused "
                            "without its user objects' references");
}

void uobj_note_retain(CUgraph graph, CUuserObject object, unsigned count)
{
    note(graph, object, (int)count);
}

void uobj_note_release(CUgraph graph, CUuserObject object, unsigned count)
{
    note(graph, object, -(int)count);
}

int uobj_graph_has(CUgraph graph)
{
    if (!__atomic_load_n(&graphs_noted, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&uobj_lock);
    const struct uobj_set *s = hmap_get(&objects_by_graph, graph);
    int has = s && s->n > 0;
    pthread_mutex_unlock(&uobj_lock);
    return has;
}

void uobj_forget_graph(CUgraph graph)
{
    pthread_mutex_lock(&uobj_lock);
    struct uobj_set *s = hmap_del(&objects_by_graph, graph);
    if (s)
        __atomic_sub_fetch(&graphs_noted, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&uobj_lock);
    if (s) {
        free(s->refs);
        free(s);
    }
}

/* --- what recap holds for executable graphs ----------------------------------------- */

int uobj_exec_adopt(CUgraphExec exec, CUgraph graph)
{
    struct uobj_set take;
    if (!__atomic_load_n(&graphs_noted, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&uobj_lock);
    int copied = set_copy(&take, hmap_get(&objects_by_graph, graph));
    pthread_mutex_unlock(&uobj_lock);
    if (copied != 0)
        return -1;
    if (take.n == 0)
        return 0;

    for (int i = 0; i < take.n; i++) {
        CUresult r = DRV_REAL(cuUserObjectRetain)(take.refs[i].object, take.refs[i].count);
        if (r != CUDA_SUCCESS) {
            event_own_call_failed(NULL, "cuUserObjectRetain", r,
                                  "the executable graph is instantiated anew instead");
            take.n = i;
            set_release(&take);
            return -1;
        }
    }

    pthread_mutex_lock(&uobj_lock);
    struct exec_hold *h = hmap_get(&holds_by_exec, exec);
    if (!h && ((h = calloc(1, sizeof *h)) == NULL || hmap_put(&holds_by_exec, exec, h) != 0)) {
        free(h);
        pthread_mutex_unlock(&uobj_lock);
        set_release(&take);
        return -1;
    }
    if (h->held.n == 0)
        __atomic_add_fetch(&uobj_tracking, 1, __ATOMIC_RELEASE);
    /* The caller retired the previous set first; an unlikely leftover is
     * merged rather than lost (released later with the rest). */
    for (int i = 0; i < h->held.n; i++)
        set_add(&take, h->held.refs[i].object, (int)h->held.refs[i].count);
    free(h->held.refs);
    h->held = take;
    h->launched = 0;
    pthread_mutex_unlock(&uobj_lock);
    return 0;
}

static void destroy_event(CUevent ev)
{
    CUresult r = DRV_REAL(cuEventDestroy_v2)(ev);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(NULL, "cuEventDestroy_v2", r, "an event of recap's stays allocated");
}

/* A retired set whose work completed: its references go back. */
static void pending_done(struct pending_release *p)
{
    if (p->done)
        destroy_event(p->done);
    set_release(&p->set);
    free(p);
}

/* Records, behind the last launch, the event a retired set waits for.
 * Returns 0 when recorded; 1 when the work is known complete without an
 * event (the driver would not record one, so recap waited for the stream
 * instead); -1 when the stream is capturing (or cannot be asked): try later. */
static int record_done_event(struct pending_release *p)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = DRV_REAL(cuStreamIsCapturing)(p->stream, &status);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(NULL, "cuStreamIsCapturing", r,
                              "user-object references recap took are given back later");
        return -1;
    }
    if (status != CU_STREAM_CAPTURE_STATUS_NONE)
        return -1;
    CUevent ev = NULL;
    const char *failed = "cuEventCreate";
    r = DRV_REAL(cuEventCreate)(&ev, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) {
        failed = "cuEventRecord";
        r = DRV_REAL(cuEventRecord)(ev, p->stream);
        if (r != CUDA_SUCCESS)
            destroy_event(ev);
    }
    if (r == CUDA_SUCCESS) {
        p->done = ev;
        return 0;
    }
    /* No event: waiting for the stream (not capturing, checked above) is
     * slow but certain. */
    CUresult s = DRV_REAL(cuStreamSynchronize)(p->stream);
    event_own_call_failed(NULL, failed, r,
                          s == CUDA_SUCCESS ? "recap waited for the stream instead"
                                            : "user-object references recap took are kept until exit");
    if (s != CUDA_SUCCESS) {
        p->stuck = 1;
        return -1;
    }
    return 1;
}

void uobj_exec_retire(CUgraphExec exec, int wait)
{
    /* Nothing is held for any executable graph (the count rises under
     * uobj_lock only in adopt, which the cache serialises with this call
     * for the same executable graph). */
    if (!__atomic_load_n(&uobj_tracking, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&uobj_lock);
    struct exec_hold *h = hmap_get(&holds_by_exec, exec);
    if (!h || h->held.n == 0) {
        pthread_mutex_unlock(&uobj_lock);
        return;
    }
    struct uobj_set set = h->held;
    int launched = h->launched;
    CUstream stream = h->last_stream;
    h->held = (struct uobj_set){ 0 };
    h->launched = 0;
    __atomic_sub_fetch(&uobj_tracking, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&uobj_lock);

    if (!launched) {
        set_release(&set);        /* no work of this exec used them */
        return;
    }
    struct pending_release *p = calloc(1, sizeof *p);
    if (!p) {
        event_warning(NULL, "out of memory: user-object references recap took are kept");
        return;
    }
    p->set = set;
    p->stream = stream;
    /* No stream: it was destroyed before its work was known complete
     * (uobj_stream_gone could not wait for it); kept until exit. */
    p->stuck = stream == NULL;
    int recorded = p->stuck ? -1 : record_done_event(p);
    if (recorded == 1 || (recorded == 0 && wait && DRV_REAL(cuEventSynchronize)(p->done) == CUDA_SUCCESS)) {
        pending_done(p);
        return;
    }
    pthread_mutex_lock(&uobj_lock);
    p->next = pending;
    pending = p;
    pthread_mutex_unlock(&uobj_lock);
}

void uobj_exec_gone(CUgraphExec exec, int wait)
{
    uobj_exec_retire(exec, wait);
    pthread_mutex_lock(&uobj_lock);
    struct exec_hold *h = hmap_del(&holds_by_exec, exec);
    pthread_mutex_unlock(&uobj_lock);
    free(h);
}

void uobj_note_launch(CUgraphExec exec, CUstream stream)
{
    pthread_mutex_lock(&uobj_lock);
    struct exec_hold *h = hmap_get(&holds_by_exec, exec);
    if (h && h->held.n) {
        h->last_stream = stream;
        h->launched = 1;
    }
    pthread_mutex_unlock(&uobj_lock);
}

void uobj_stream_gone(CUstream stream)
{
    if (!__atomic_load_n(&uobj_tracking, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&pending, __ATOMIC_RELAXED))
        return;
    int named = 0;
    pthread_mutex_lock(&uobj_lock);
    for (size_t i = 0; i < holds_by_exec.cap && !named; i++) {
        struct exec_hold *h = holds_by_exec.slots[i].value;
        named = holds_by_exec.slots[i].key && h->launched && h->last_stream == stream;
    }
    for (struct pending_release *p = pending; p && !named; p = p->next)
        named = !p->done && !p->stuck && p->stream == stream;
    pthread_mutex_unlock(&uobj_lock);
    if (!named)
        return;
    /* The driver destroys a stream without waiting for its work, and an
     * event recorded there later, or a question about it, would name a
     * dead handle (the driver crashed on one at a cuda.core program's
     * exit). So its work is waited for now: a stream destroy is rare. */
    CUresult r = DRV_REAL(cuStreamSynchronize)(stream);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(NULL, "cuStreamSynchronize", r,
                              "user-object references recap took for work on a destroyed stream "
                              "are kept until exit");
    struct pending_release *done = NULL, **link;
    pthread_mutex_lock(&uobj_lock);
    for (size_t i = 0; i < holds_by_exec.cap; i++) {
        struct exec_hold *h = holds_by_exec.slots[i].value;
        if (!holds_by_exec.slots[i].key || h->last_stream != stream)
            continue;
        h->last_stream = NULL;
        if (r == CUDA_SUCCESS)
            h->launched = 0;      /* its work is complete */
    }
    for (link = &pending; *link;) {
        struct pending_release *p = *link;
        if (p->done || p->stuck || p->stream != stream) {
            link = &p->next;
            continue;
        }
        if (r != CUDA_SUCCESS) {
            p->stuck = 1;
            link = &p->next;
            continue;
        }
        *link = p->next;
        p->next = done;
        done = p;
    }
    pthread_mutex_unlock(&uobj_lock);
    while (done) {
        struct pending_release *p = done;
        done = p->next;
        pending_done(p);
    }
}

/* Gives back the sets whose work completed (all of them, waiting, with
 * `wait`). */
static void settle_pending(int wait)
{
    if (!__atomic_load_n(&pending, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&uobj_lock);
    struct pending_release *list = pending;
    pending = NULL;
    pthread_mutex_unlock(&uobj_lock);

    struct pending_release *keep = NULL;
    while (list) {
        struct pending_release *p = list;
        list = p->next;
        int recorded = p->stuck ? -1 : p->done ? 0 : record_done_event(p);
        int done = recorded == 1;
        if (recorded == 0) {
            CUresult r = wait ? DRV_REAL(cuEventSynchronize)(p->done) : DRV_REAL(cuEventQuery)(p->done);
            done = r == CUDA_SUCCESS;
            if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
                event_own_call_failed(NULL, wait ? "cuEventSynchronize" : "cuEventQuery", r,
                                      "user-object references recap took are given back later");
        }
        if (done) {
            pending_done(p);
        } else {
            p->next = keep;
            keep = p;
        }
    }
    pthread_mutex_lock(&uobj_lock);
    while (keep) {
        struct pending_release *p = keep;
        keep = p->next;
        p->next = pending;
        pending = p;
    }
    pthread_mutex_unlock(&uobj_lock);
}

void uobj_collect(void)
{
    settle_pending(0);
}

void uobj_settle_all(void)
{
    settle_pending(1);
}

void uobj_after_fork_child(void)
{
    /* The parent's objects and events mean nothing in the child. */
    pthread_mutex_init(&uobj_lock, NULL);
    for (size_t i = 0; i < objects_by_graph.cap; i++) {
        struct uobj_set *s = objects_by_graph.slots[i].value;
        if (objects_by_graph.slots[i].key) {
            free(s->refs);
            free(s);
        }
    }
    for (size_t i = 0; i < holds_by_exec.cap; i++) {
        struct exec_hold *h = holds_by_exec.slots[i].value;
        if (holds_by_exec.slots[i].key) {
            free(h->held.refs);
            free(h);
        }
    }
    hmap_clear(&objects_by_graph);
    hmap_clear(&holds_by_exec);
    while (pending) {
        struct pending_release *p = pending;
        pending = p->next;
        free(p->set.refs);
        free(p);
    }
    uobj_tracking = 0;
    graphs_noted = 0;
}
