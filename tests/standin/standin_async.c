/*
 * standin_async.c - asynchronous execution: per-stream queues and workers,
 * waiting for real, deferred user-object destruction.
 *
 * Owns: struct si_queue and struct si_work, the worker thread of each
 * stream, the ordering rules between queues (stream order, event waits,
 * the legacy stream's implicit synchronisation with blocking streams), every
 * wait the synchronising calls make, the release thread that runs user
 * object destructors, and the drain at exit and at a context's teardown
 * (cuCtxDestroy, the last primary release, a primary reset). Must
 * never: decide what an operation does (standin_params.c runs it) or what a
 * launch copies (standin_exec.c snapshots); nor run user code holding
 * si.lock.
 *
 * Model (STANDIN_ASYNC=1, or standin_set_async): what a stream is given
 * outside capture becomes an item on its queue; the stream's worker runs
 * items in order, each once the queue positions it waits for are done. A
 * kernel launch owns copies of its arguments, a graph launch owns a deep copy
 * of the executable graph's parameters and references to its user objects,
 * so later updates, per-node setters and destroys do not reach work already
 * queued (as CUDA documents). Waiting (stream, event and context
 * synchronisation, blocking copies) blocks on si.progress until the
 * positions are done. All of this is guarded by si.lock; workers let go of
 * it around kernels and host functions, and while waiting.
 */
#include "standin_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

bool si_async_active(void)
{
    return si.async && !si.async_closed;
}

void si_violation(const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    si_misuse("%s", text);
    fprintf(stderr, "standin: misuse: %s\n", text);
}

struct si_work *si_work_new(enum si_work_kind kind)
{
    struct si_work *w = si_calloc(1, sizeof(*w));
    w->kind = kind;
    return w;
}

void si_work_wait_on(struct si_work *w, struct si_stream *s, unsigned long long seq)
{
    if (!s || si_async_done(s, seq)) return;
    for (size_t i = 0; i < w->nwaits; i++) {
        if (w->waits[i].s != s) continue;
        if (w->waits[i].seq < seq) w->waits[i].seq = seq;
        return;
    }
    struct si_wait_point *wp = realloc(w->waits, (w->nwaits + 1) * sizeof(*wp));
    if (!wp) abort();
    w->waits = wp;
    w->waits[w->nwaits++] = (struct si_wait_point){s, seq};
}

bool si_async_done(const struct si_stream *s, unsigned long long seq)
{
    return s->q.completed >= seq;
}

static bool waits_done(const struct si_work *w)
{
    for (size_t i = 0; i < w->nwaits; i++)
        if (!si_async_done(w->waits[i].s, w->waits[i].seq)) return false;
    return true;
}

/* Waits on si.progress; the caller holds si.lock exactly once. */
static void wait_progress(void)
{
    pthread_cond_wait(&si.progress, &si.lock);
}

void si_async_wait_point(struct si_stream *s, unsigned long long seq)
{
    while (!si_async_done(s, seq)) wait_progress();
}

/* ------------------------------------------------------------------ */
/* Threads: ended ones are joined by whoever next starts or drains.     */

static void reap_push(pthread_t t)
{
    pthread_t *box = si_calloc(1, sizeof(*box));
    *box = t;
    si_vec_push(&si.reap, box);
}

/* Joins every ended thread; lets go of si.lock (held once) meanwhile. */
static void reap_join(void)
{
    struct si_vec ended = si.reap;
    memset(&si.reap, 0, sizeof(si.reap));
    if (!ended.n) return;
    pthread_mutex_unlock(&si.lock);
    for (size_t i = 0; i < ended.n; i++) {
        pthread_join(*(pthread_t *)ended.v[i], NULL);
        free(ended.v[i]);
    }
    pthread_mutex_lock(&si.lock);
    si_vec_free(&ended);
}

static void async_exit(void);

/* fork(): the child holds a consistent copy of the state (taken with
 * si.lock held) and only the forking thread. The parent's queued work, its
 * workers and its due destructors stay the parent's; the child starts
 * workers of its own when it queues work. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&si.lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&si.lock);
}

/* The parent's items in the child: freed, not run (their user objects stay
 * referenced: their destructors are the parent's to run). */
static void forget_work(struct si_work *w)
{
    si_params_free(&w->p);
    if (w->snap) si_exec_free(w->snap);
    si_vec_free(&w->urefs);
    if (w->exec) w->exec->inflight--;
    free(w->waits);
    free(w);
}

static void fork_child(void)
{
    pthread_mutexattr_t attr;
    for (size_t i = 0; i < si.queues.n; i++) {
        struct si_queue *q = &((struct si_stream *)si.queues.v[i])->q;
        for (struct si_work *w = q->head, *next; w; w = next) {
            next = w->next;
            forget_work(w);
        }
        q->head = q->tail = NULL;
        q->completed = q->submitted;
        q->has_worker = false;
        q->error = CUDA_SUCCESS;
    }
    si.releases.n = 0;
    si.releases_running = 0;
    si.has_releaser = false;
    for (size_t i = 0; i < si.reap.n; i++) free(si.reap.v[i]); /* the parent joins those */
    si.reap.n = 0;
    /* The lock is owned by the parent's thread id: a fresh one, and a fresh
     * condition (its waiters are not in this process). */
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&si.lock, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(&si.progress, NULL);
}

/* Once the mode first starts a thread: drain at exit, and fork handlers. */
static void register_exit(void)
{
    atexit(async_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ------------------------------------------------------------------ */
/* Running one item.                                                    */

static void work_free(struct si_work *w)
{
    si_params_free(&w->p);
    if (w->snap) si_exec_free(w->snap);
    for (size_t i = 0; i < w->urefs.n; i++) si_user_object_release(w->urefs.v[i], 1);
    si_vec_free(&w->urefs);
    if (w->exec && --w->exec->inflight == 0 && w->exec->free_deferred) si_exec_free(w->exec);
    free(w->waits);
    free(w);
}

static CUresult work_run(struct si_stream *s, struct si_work *w)
{
    switch (w->kind) {
    case SI_WORK_OP: return si_params_run(&w->p, s);
    case SI_WORK_GRAPH: return si_exec_run_snapshot(w->snap, s);
    case SI_WORK_EVENT:
        if (w->ev->gen == w->gen) w->ev->time_ms = si_now_ms();
        return CUDA_SUCCESS;
    case SI_WORK_FREE:
        si_mem_release(w->alloc);
        w->alloc = NULL;
        return CUDA_SUCCESS;
    default: return CUDA_SUCCESS; /* SI_WORK_WAIT: its waits were the point */
    }
}

static void *worker_main(void *arg)
{
    struct si_stream *s = arg;
    pthread_mutex_lock(&si.lock);
    si_tls.worker = true;
    for (;;) {
        struct si_work *w = s->q.head;
        if (w && waits_done(w)) {
            CUresult rc = work_run(s, w); /* may let go of si.lock around user code */
            if (rc && !s->q.error) s->q.error = rc;
            s->q.head = w->next;
            if (!s->q.head) s->q.tail = NULL;
            s->q.completed = w->seq;
            work_free(w);
            pthread_cond_broadcast(&si.progress);
            continue;
        }
        if (!w && (s->q.stop || s->h.state == SI_DEAD || si.async_stopping)) break;
        wait_progress();
    }
    s->q.has_worker = false;
    reap_push(s->q.worker);
    pthread_cond_broadcast(&si.progress);
    pthread_mutex_unlock(&si.lock);
    return NULL;
}

/* Never lets go of si.lock: callers rely on nothing moving meanwhile. */
static void start_worker(struct si_stream *s)
{
    pthread_once(&atexit_once, register_exit);
    s->q.stop = false;
    if (pthread_create(&s->q.worker, NULL, worker_main, s) != 0) {
        fputs("standin: async: cannot start a stream worker\n", stderr);
        abort();
    }
    s->q.has_worker = true;
}

/* The legacy stream waits for all blocking streams, and they for it. */
static void add_implicit_waits(struct si_stream *s, struct si_work *w)
{
    if (s->skind == SI_STREAM_LEGACY) {
        for (size_t i = 0; i < si.queues.n; i++) {
            struct si_stream *t = si.queues.v[i];
            if (t != s && si_stream_blocking(t)) si_work_wait_on(w, t, t->q.submitted);
        }
    } else if (si_stream_blocking(s) && si.legacy) {
        si_work_wait_on(w, si.legacy, si.legacy->q.submitted);
    }
}

unsigned long long si_async_enqueue(struct si_stream *s, struct si_work *w)
{
    if (!s->q.listed) {
        s->q.listed = true;
        si_vec_push(&si.queues, s);
    }
    add_implicit_waits(s, w);
    w->seq = ++s->q.submitted;
    if (s->q.tail) s->q.tail->next = w;
    else s->q.head = w;
    s->q.tail = w;
    if (!s->q.has_worker) start_worker(s);
    pthread_cond_broadcast(&si.progress);
    return w->seq;
}

/* A copy to or from pageable host memory returns only once it is done
 * (from pageable memory: once staged), as the driver documents. */
static bool touches_pageable(const struct si_params *p)
{
    if (p->np.type != CU_GRAPH_NODE_TYPE_MEMCPY) return false;
    const CUDA_MEMCPY3D *c = &p->np.memcpy.copyParams;
    uintptr_t src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)c->srcHost : (uintptr_t)c->srcDevice;
    uintptr_t dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)c->dstHost : (uintptr_t)c->dstDevice;
    return !si_mem_find(src) || !si_mem_find(dst);
}

CUresult si_async_submit(struct si_stream *s, struct si_params *p)
{
    struct si_work *w = si_work_new(SI_WORK_OP);
    bool wait = touches_pageable(p);
    w->p = *p;
    memset(p, 0, sizeof(*p));
    unsigned long long seq = si_async_enqueue(s, w);
    if (wait) si_async_wait_point(s, seq);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Synchronisation.                                                     */

static CUresult take_error(struct si_stream *s)
{
    CUresult rc = s->q.error;
    s->q.error = CUDA_SUCCESS;
    return rc;
}

CUresult si_async_sync_stream(struct si_stream *s)
{
    struct si_work marks = {0}; /* only its wait list is used */
    si_work_wait_on(&marks, s, s->q.submitted);
    if (s->skind == SI_STREAM_LEGACY) add_implicit_waits(s, &marks);
    while (!waits_done(&marks)) wait_progress();
    free(marks.waits);
    reap_join(); /* workers of destroyed streams */
    return take_error(s);
}

CUresult si_async_query_stream(struct si_stream *s)
{
    return si_async_done(s, s->q.submitted) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static bool all_done(struct si_context *ctx, struct si_work *marks)
{
    for (size_t i = 0; i < si.queues.n; i++) {
        struct si_stream *t = si.queues.v[i];
        if (!ctx || t->ctx == ctx) si_work_wait_on(marks, t, t->q.submitted);
    }
    return waits_done(marks);
}

CUresult si_async_sync_all(struct si_context *ctx)
{
    struct si_work marks = {0};
    CUresult rc = CUDA_SUCCESS;
    all_done(ctx, &marks); /* what was submitted before this call */
    while (!waits_done(&marks)) wait_progress();
    free(marks.waits);
    for (size_t i = 0; i < si.queues.n; i++) {
        struct si_stream *t = si.queues.v[i];
        if ((!ctx || t->ctx == ctx) && t->q.error && !rc) rc = take_error(t);
    }
    return rc;
}

void si_async_end_context(struct si_context *ctx)
{
    si_async_sync_all(ctx);
    for (size_t i = 0; i < si.queues.n; i++) {
        struct si_stream *t = si.queues.v[i];
        if (t->ctx == ctx) t->q.stop = true;
    }
    pthread_cond_broadcast(&si.progress);
    for (bool running = true; running;) {
        running = false;
        for (size_t i = 0; i < si.queues.n; i++) {
            struct si_stream *t = si.queues.v[i];
            running |= t->ctx == ctx && t->q.has_worker;
        }
        if (running) wait_progress();
    }
    reap_join();
}

/* ------------------------------------------------------------------ */
/* Memory still used by queued work.                                     */

static bool in_alloc(uintptr_t addr, const struct si_alloc *a)
{
    return addr >= a->base && addr < a->base + (a->size ? a->size : 1);
}

static bool params_use(const struct si_params *p, const struct si_alloc *a)
{
    switch (p->np.type) {
    case CU_GRAPH_NODE_TYPE_MEMSET: return in_alloc((uintptr_t)p->np.memset.dst, a);
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *c = &p->np.memcpy.copyParams;
        return in_alloc((uintptr_t)c->srcDevice, a) || in_alloc((uintptr_t)c->dstDevice, a) ||
               in_alloc((uintptr_t)c->srcHost, a) || in_alloc((uintptr_t)c->dstHost, a);
    }
    case CU_GRAPH_NODE_TYPE_KERNEL: /* arguments the size of a pointer that point into it */
        for (unsigned i = 0; i < p->func->k->nparams; i++) {
            uintptr_t v;
            if (p->func->k->sizes[i] != sizeof(v)) continue;
            memcpy(&v, p->argv[i], sizeof(v));
            if (in_alloc(v, a)) return true;
        }
        return false;
    default: return false;
    }
}

static bool exec_uses(const struct si_exec *e, const struct si_alloc *a)
{
    for (size_t i = 0; i < e->n; i++) {
        const struct si_exec_node *en = &e->nodes[i];
        if (en->enabled && params_use(&en->p, a)) return true;
        if (en->child && exec_uses(en->child, a)) return true;
        for (unsigned b = 0; b < en->nbodies; b++)
            if (exec_uses(en->bodies[b], a)) return true;
    }
    return false;
}

static bool work_uses(const struct si_work *w, const struct si_alloc *a)
{
    if (w->kind == SI_WORK_OP) return params_use(&w->p, a);
    if (w->kind == SI_WORK_GRAPH) return exec_uses(w->snap, a);
    return false;
}

bool si_async_before_free(uintptr_t base, const char *who)
{
    bool told = false;
    for (;;) {
        struct si_alloc *a = si_mem_find(base);
        struct si_stream *user = NULL;
        unsigned long long seq = 0;
        if (!a || a->base != base) return false;
        for (size_t i = 0; i < si.queues.n && !user; i++) {
            struct si_stream *t = si.queues.v[i];
            for (struct si_work *w = t->q.head; w && !user; w = w->next)
                if (work_uses(w, a)) user = t, seq = w->seq;
        }
        if (!user) return true;
        if (!told)
            si_violation("%s of memory %#lx that work queued on stream %p still uses "
                         "(synchronise first)", who, (unsigned long)base, (void *)user);
        told = true;
        si_async_wait_point(user, seq);
    }
}

/* ------------------------------------------------------------------ */
/* User objects: destructors on the release thread.                     */

static void *releaser_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&si.lock);
    for (;;) {
        if (si.releases.n) {
            struct si_user_object *u = si.releases.v[0];
            si_vec_remove(&si.releases, u);
            si.releases_running++;
            pthread_mutex_unlock(&si.lock);
            si_user_code_begin("a user object destructor");
            u->destroy(u->ptr);
            si_user_code_end();
            pthread_mutex_lock(&si.lock);
            si.releases_running--;
            pthread_cond_broadcast(&si.progress);
            continue;
        }
        if (si.async_stopping) break;
        wait_progress();
    }
    pthread_mutex_unlock(&si.lock);
    return NULL;
}

void si_async_destroy_user_object(struct si_user_object *u)
{
    si_obj_kill(u); /* the handle is gone now; the destructor runs later */
    si_vec_push(&si.releases, u);
    if (!si.has_releaser) {
        pthread_once(&atexit_once, register_exit);
        if (pthread_create(&si.releaser, NULL, releaser_main, NULL) != 0) {
            fputs("standin: async: cannot start the release thread\n", stderr);
            abort();
        }
        si.has_releaser = true;
    }
    pthread_cond_broadcast(&si.progress);
}

/* ------------------------------------------------------------------ */
/* The drain at exit, and switching the mode.                            */

/* Waits for every queue and every due destructor. */
static void drain(void)
{
    si_async_sync_all(NULL);
    while (si.releases.n || si.releases_running) wait_progress();
}

/* Ends every thread the mode started; later work runs synchronously. */
static void stop_threads(void)
{
    si.async_stopping = true;
    pthread_cond_broadcast(&si.progress);
    for (bool running = true; running;) {
        running = false;
        for (size_t i = 0; i < si.queues.n; i++)
            running |= ((struct si_stream *)si.queues.v[i])->q.has_worker;
        if (running) wait_progress();
    }
    if (si.has_releaser) {
        reap_push(si.releaser);
        si.has_releaser = false;
    }
    reap_join();
    si.async_stopping = false;
}

static void async_exit(void)
{
    si_control_lock();
    if (si.async && !si.async_closed && si_tls.user_code_depth == 0) {
        drain();
        si.async_closed = true;
        stop_threads();
    }
    si_control_unlock();
}

SI_EXPORT void standin_set_async(int on)
{
    si_control_lock();
    if (si.async && !on) {
        drain();
        stop_threads();
    }
    si.async = on != 0;
    si.async_closed = false;
    si_control_unlock();
}

SI_EXPORT int standin_async(void)
{
    si_control_lock();
    int on = si_async_active();
    si_control_unlock();
    return on;
}

SI_EXPORT void standin_async_drain(void)
{
    si_control_lock();
    if (si_async_active() && si_tls.user_code_depth == 0) drain();
    si_control_unlock();
}
