/*
 * capture_table.c - captures in progress, found by stream or event.
 *
 * There are as many active captures as threads capturing at once, so a
 * list scanned under one short-held mutex is enough; with none active (a
 * capture loop between its captures) a lookup reads one counter and takes
 * no lock. References keep a capture alive while a call into it is in
 * flight on another thread; they are counted atomically, and a new one is
 * only ever taken from the table (under captures_lock, where the table's
 * own reference keeps the count above zero) or by one who holds one, so
 * the release that brings the count to zero is the last and needs no lock.
 * The last release keeps the record for the next capture (shim/base/spare.h).
 *
 * A call into a capture looks its stream up once per call, hundreds of
 * times per capture: each thread remembers its last stream lookup (the
 * memo) with a reference of its own and the table's generation, which
 * every registration, end and new member bumps under captures_lock. While
 * the generation stands the memo's answer is the table's, and the lookup
 * takes no lock. The memo's reference is given back when the memo is
 * replaced, when the thread ends the capture (ctab_memo_forget), and at
 * thread exit (a key destructor). A call into a capture borrows the memo's
 * reference for its duration instead of taking one (two atomic updates of
 * a shared count fewer per recorded call); while it is lent, the memo is
 * neither replaced nor given back, which is what keeps the record alive.
 */
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/state/capture_table.h"
#include "shim/base/driver.h"
#include "shim/state/observed.h"
#include "shim/base/spare.h"

int ctab_journaled;
int ctab_self_recorded;

static pthread_mutex_t captures_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture *active[256];
static int nactive;          /* written under captures_lock, read atomically outside it */
__thread char ctab_per_thread_stream_key;
static void *ctab_spare;     /* a released record, mutexes initialised */

/* Bumped under captures_lock whenever the table's answers may change. */
static unsigned long ctab_generation;

struct ctab_memo {
    const void *key;
    struct capture *cap;         /* holds a reference; NULL: empty */
    unsigned long generation;
};
static __thread struct ctab_memo memo;
/* Set while a call borrows the memo's reference (ctab_find_stream_for_call):
 * the memo is then neither replaced nor given back, so the capture it
 * holds outlives the call without a reference of the call's own. */
static __thread int memo_lent;
/* Made under captures_lock at the first memo (pthread_once would do, but
 * helgrind does not see its ordering). */
static pthread_key_t memo_exit_key;
static int memo_exit_key_made;   /* 1 made, -1 could not be */

static void table_changed(void)
{
    __atomic_store_n(&ctab_generation, ctab_generation + 1, __ATOMIC_RELEASE);
}

/* Whether this thread's memo is the table's answer for `key`: it holds a
 * capture found for that key, and the table has not changed since. */
static int memo_answers(const void *key)
{
    return memo.cap && memo.key == key &&
           memo.generation == __atomic_load_n(&ctab_generation, __ATOMIC_ACQUIRE);
}

struct capture *ctab_new(void)
{
    struct capture *cap = spare_take(&ctab_spare);
    if (cap) {
        memset(&cap->origin, 0, sizeof *cap - offsetof(struct capture, origin));
    } else {
        cap = calloc(1, sizeof *cap);
        if (!cap)
            return NULL;
        pthread_mutex_init(&cap->lock, NULL);
        pthread_mutex_init(&cap->changes_lock, NULL);
    }
    journal_init(&cap->journal);
    VALGRIND_HG_DISABLE_CHECKING(&cap->refs, sizeof cap->refs);   /* atomic */
    cap->refs = 1;
    return cap;
}

int ctab_any_active(void)
{
    return __atomic_load_n(&nactive, __ATOMIC_RELAXED) != 0;
}

/* Begins running, and recap's synchronisations running: each side
 * announces itself, then looks at the other (sequentially consistent,
 * so that of a begin and a synchronisation at once, at least one sees
 * the other). */
static int begins_running, syncs_running;
/* Captures the driver runs that recap holds no record or slot of
 * (ctab_unseen_began): begun, and not yet seen to end. */
static int unseen_running;

void ctab_begin_enter(void)
{
    /* Read and written atomically only (helgrind cannot tell). */
    VALGRIND_HG_DISABLE_CHECKING(&begins_running, sizeof begins_running);
    VALGRIND_HG_DISABLE_CHECKING(&syncs_running, sizeof syncs_running);
    __atomic_add_fetch(&begins_running, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&syncs_running, __ATOMIC_SEQ_CST))
        sched_yield();
}

void ctab_begin_leave(void)
{
    __atomic_sub_fetch(&begins_running, 1, __ATOMIC_SEQ_CST);
}

void ctab_unseen_began(void)
{
    VALGRIND_HG_DISABLE_CHECKING(&unseen_running, sizeof unseen_running);
    __atomic_add_fetch(&unseen_running, 1, __ATOMIC_SEQ_CST);
}

int ctab_any_unseen(void)
{
    return __atomic_load_n(&unseen_running, __ATOMIC_RELAXED) != 0;
}

int ctab_any_capture_running(void)
{
    return ctab_any_active() || observed_any() || ctab_any_unseen();
}

void ctab_unseen_ended(void)
{
    /* Never below zero: an end recap cannot tell from another must not
     * let a synchronisation meet a capture still counted. */
    int n = __atomic_load_n(&unseen_running, __ATOMIC_SEQ_CST);
    while (n > 0 && !__atomic_compare_exchange_n(&unseen_running, &n, n - 1, 0, __ATOMIC_SEQ_CST,
                                                 __ATOMIC_SEQ_CST))
        ;
}

CUresult ctab_synchronize_if_idle(void)
{
    VALGRIND_HG_DISABLE_CHECKING(&begins_running, sizeof begins_running);
    VALGRIND_HG_DISABLE_CHECKING(&syncs_running, sizeof syncs_running);
    __atomic_add_fetch(&syncs_running, 1, __ATOMIC_SEQ_CST);
    CUresult r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!__atomic_load_n(&begins_running, __ATOMIC_SEQ_CST) && !ctab_any_active() &&
        !observed_any() && !__atomic_load_n(&unseen_running, __ATOMIC_SEQ_CST))
        r = DRV_REAL(cuCtxSynchronize)();
    __atomic_sub_fetch(&syncs_running, 1, __ATOMIC_SEQ_CST);
    return r;
}

int ctab_register(struct capture *cap)
{
    int registered = 0;
    /* find() and the memo read nactive and the generation without the
     * lock, atomically (helgrind cannot tell). */
    VALGRIND_HG_DISABLE_CHECKING(&nactive, sizeof nactive);
    VALGRIND_HG_DISABLE_CHECKING(&ctab_generation, sizeof ctab_generation);
    pthread_mutex_lock(&captures_lock);
    if (nactive < (int)(sizeof active / sizeof active[0])) {
        active[nactive] = cap;
        __atomic_store_n(&nactive, nactive + 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&cap->refs, 1, __ATOMIC_RELAXED);
        cap->member_keys[0] = cap->origin.key;
        cap->nmembers = 1;
        table_changed();
        if (cap->journaled)
            __atomic_add_fetch(&ctab_journaled, 1, __ATOMIC_RELEASE);
        if (cap->by_recap)
            __atomic_add_fetch(&ctab_self_recorded, 1, __ATOMIC_RELEASE);
        registered = 1;
    } else {
        /* Beyond the table recap simply does not journal this capture
         * (capture.c never records one itself that it cannot register). */
        cap->journaled = 0;
    }
    pthread_mutex_unlock(&captures_lock);
    return registered;
}

void ctab_unregister(struct capture *cap)
{
    pthread_mutex_lock(&captures_lock);
    for (int i = 0; i < nactive; i++) {
        if (active[i] == cap) {
            active[i] = active[nactive - 1];
            __atomic_store_n(&nactive, nactive - 1, __ATOMIC_RELEASE);
            table_changed();
            /* Never the last: the caller holds one. */
            ANNOTATE_HAPPENS_BEFORE(&cap->refs);
            __atomic_sub_fetch(&cap->refs, 1, __ATOMIC_RELEASE);
            if (cap->journaled)
                __atomic_sub_fetch(&ctab_journaled, 1, __ATOMIC_RELEASE);
            if (cap->by_recap)
                __atomic_sub_fetch(&ctab_self_recorded, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&captures_lock);
}

void ctab_self_recorded_done(struct capture *cap)
{
    pthread_mutex_lock(&captures_lock);
    if (cap->by_recap) {
        for (int i = 0; i < nactive; i++)
            if (active[i] == cap)
                __atomic_sub_fetch(&ctab_self_recorded, 1, __ATOMIC_RELEASE);
        cap->by_recap = 0;
    }
    pthread_mutex_unlock(&captures_lock);
}

/* Calls fn on each registered capture that `wanted` accepts (read under
 * captures_lock), referenced for the call, outside the lock. */
static void each_registered(int (*wanted)(const struct capture *cap),
                            void (*fn)(struct capture *cap, void *arg), void *arg)
{
    struct capture *found[sizeof active / sizeof active[0]];
    int n = 0;
    pthread_mutex_lock(&captures_lock);
    for (int i = 0; i < nactive; i++) {
        if (wanted(active[i])) {
            __atomic_add_fetch(&active[i]->refs, 1, __ATOMIC_RELAXED);
            found[n++] = active[i];
        }
    }
    pthread_mutex_unlock(&captures_lock);
    for (int i = 0; i < n; i++) {
        fn(found[i], arg);
        ctab_release(found[i]);
    }
}

static int is_self_recorded(const struct capture *cap)
{
    return cap->by_recap;
}

static int is_journaled(const struct capture *cap)
{
    return cap->journaled;
}

void ctab_each_self_recorded(void (*fn)(struct capture *cap, void *arg), void *arg)
{
    each_registered(is_self_recorded, fn, arg);
}

void ctab_each_journaled(void (*fn)(struct capture *cap, void *arg), void *arg)
{
    each_registered(is_journaled, fn, arg);
}

static struct capture *find(int (*match)(struct capture *, const void *), const void *what)
{
    struct capture *found = NULL;
    /* None active: nothing to find, no lock to take. A capture registered
     * by another thread that this load does not see yet began no earlier
     * than this call, so it could as well have begun after it. */
    if (__atomic_load_n(&nactive, __ATOMIC_ACQUIRE) == 0)
        return NULL;
    pthread_mutex_lock(&captures_lock);
    for (int i = 0; i < nactive && !found; i++)
        if (match(active[i], what))
            found = active[i];
    if (found)
        __atomic_add_fetch(&found->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&captures_lock);
    return found;
}

int ctab_has_member(const struct capture *cap, const void *key)
{
    for (int i = 0; i < cap->nmembers; i++)
        if (cap->member_keys[i] == key)
            return 1;
    return 0;
}

int ctab_has_event(const struct capture *cap, CUevent event)
{
    for (int i = 0; event && i < cap->nevents; i++)
        if (cap->events[i] == event)
            return 1;
    return 0;
}

static int match_member(struct capture *cap, const void *key)
{
    return ctab_has_member(cap, key);
}

static int match_event(struct capture *cap, const void *event)
{
    return ctab_has_event(cap, (CUevent)event);
}

static int match_origin(struct capture *cap, const void *key)
{
    return cap->origin.key == key;
}

static void memo_at_exit(void *p)
{
    (void)p;
    ctab_memo_forget(NULL);
}

struct capture *ctab_find_stream(const void *key)
{
    if (__atomic_load_n(&nactive, __ATOMIC_ACQUIRE) == 0) {
        /* No capture runs: a memo can only hold an ended one. */
        ctab_memo_forget(NULL);
        return NULL;
    }
    if (memo_lent) {
        /* A lookup inside a call that borrowed the memo: answered from
         * the table, leaving the memo as it is. */
        return find(match_member, key);
    }
    if (memo_answers(key)) {
        /* Taken from the memo's own reference: the count is above zero. */
        __atomic_add_fetch(&memo.cap->refs, 1, __ATOMIC_RELAXED);
        return memo.cap;
    }
    struct capture *found = NULL, *old = memo.cap;
    pthread_mutex_lock(&captures_lock);
    for (int i = 0; i < nactive && !found; i++)
        if (match_member(active[i], key))
            found = active[i];
    if (found)
        __atomic_add_fetch(&found->refs, 2, __ATOMIC_RELAXED);   /* the caller's, the memo's */
    memo = (struct ctab_memo){ key, found, ctab_generation };
    if (found && memo_exit_key_made == 0)
        memo_exit_key_made = pthread_key_create(&memo_exit_key, memo_at_exit) == 0 ? 1 : -1;
    int have_key = memo_exit_key_made == 1;
    pthread_mutex_unlock(&captures_lock);
    if (old)
        ctab_release(old);
    /* A thread that ends without looking again gives the memo's reference
     * back at its exit. */
    if (found && have_key && !pthread_getspecific(memo_exit_key))
        pthread_setspecific(memo_exit_key, &memo);
    return found;
}

struct capture *ctab_find_stream_for_call(const void *key, int *borrowed)
{
    if (!memo_lent && memo_answers(key)) {
        /* Two atomic updates of the count saved on each recorded call. */
        memo_lent = 1;
        *borrowed = 1;
        return memo.cap;
    }
    *borrowed = 0;
    return ctab_find_stream(key);
}

void ctab_call_done(struct capture *cap, int borrowed)
{
    if (borrowed)
        memo_lent = 0;
    else
        ctab_release(cap);
}

void ctab_memo_forget(const struct capture *cap)
{
    struct capture *held = memo.cap;
    if (!held || (cap && held != cap) || memo_lent)
        return;
    memo.cap = NULL;
    ctab_release(held);
}

struct capture *ctab_find_event(CUevent event)
{
    return event ? find(match_event, event) : NULL;
}

struct capture *ctab_find_origin(const void *key)
{
    return find(match_origin, key);
}

void ctab_add_member(struct capture *cap, const void *key)
{
    pthread_mutex_lock(&captures_lock);
    if (!match_member(cap, key)) {
        if (cap->nmembers < CAPTURE_MAX_STREAMS)
            cap->member_keys[cap->nmembers++] = key;
        else
            cap->membership_overflow = 1;
        table_changed();
    }
    pthread_mutex_unlock(&captures_lock);
}

void ctab_add_event(struct capture *cap, CUevent event)
{
    pthread_mutex_lock(&captures_lock);
    if (!match_event(cap, event)) {
        if (cap->nevents < CAPTURE_MAX_EVENTS)
            cap->events[cap->nevents++] = event;
        else
            cap->membership_overflow = 1;
    }
    pthread_mutex_unlock(&captures_lock);
}

void ctab_release(struct capture *cap)
{
    ANNOTATE_HAPPENS_BEFORE(&cap->refs);
    if (__atomic_sub_fetch(&cap->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    ANNOTATE_HAPPENS_AFTER(&cap->refs);
    journal_free(&cap->journal);
    if (spare_give(&ctab_spare, cap))
        return;
    free(cap->changed);
    free(cap->self);
    free(cap->match);
    free(cap->held);
    pthread_mutex_destroy(&cap->lock);
    pthread_mutex_destroy(&cap->changes_lock);
    free(cap);
}

void ctab_after_fork_child(void)
{
    pthread_mutex_init(&captures_lock, NULL);
    /* The forking thread's memo may name a record freed below. */
    memo.cap = NULL;
    memo_lent = 0;
    table_changed();
    for (int i = 0; i < nactive; i++) {
        journal_free(&active[i]->journal);
        free(active[i]->changed);
        free(active[i]->self);
        free(active[i]->match);
        free(active[i]->held);
        free(active[i]);
    }
    nactive = 0;
    ctab_journaled = 0;
    ctab_self_recorded = 0;
    /* The spare record is this process's memory and its mutexes were
     * unlocked when it was given back: it stays. */
}

/* --- what a capture notes -------------------------------------------------------- */

/* Copies a reason without the cost of formatting: the decision is made on
 * every capture begin. */
void ctab_set_reason(struct capture *cap, const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof cap->reason)
        n = sizeof cap->reason - 1;
    memcpy(cap->reason, text, n);
    cap->reason[n] = '\0';
}

/* Appends to the capture's change list; out of memory loses the list's
 * completeness, which the instantiation then knows. Caller holds
 * cap->changes_lock (or, for recap's own recording, cap->lock). */
void ctab_push_change(struct capture *cap, struct changed_node changed)
{
    if (cap->nchanged == cap->changed_capacity) {
        size_t capacity = cap->changed_capacity ? cap->changed_capacity * 2 : 32;
        struct changed_node *grown = realloc(cap->changed, capacity * sizeof *grown);
        if (grown) {
            cap->changed = grown;
            cap->changed_capacity = capacity;
        }
    }
    if (cap->nchanged < cap->changed_capacity)
        cap->changed[cap->nchanged++] = changed;
    else
        cap->changes_lost = 1;
}

void ctab_forget_changes(struct capture *cap)
{
    pthread_mutex_lock(&cap->changes_lock);
    cap->nchanged = 0;
    cap->eligible = cap->ineligible = cap->errors = 0;
    cap->changes_lost = 0;
    pthread_mutex_unlock(&cap->changes_lock);
}

/* Whether this thread may end the capture and begin its replacement on the
 * origin stream: relaxed mode lets any thread, except where the origin is a
 * per-thread default stream, which no other thread can name (its
 * CU_STREAM_PER_THREAD, and the journal's per-thread calls, are its own). */
int ctab_may_end_here(const struct capture *cap)
{
    if (pthread_equal(pthread_self(), cap->owner))
        return 1;
    return cap->mode == CU_STREAM_CAPTURE_MODE_RELAXED && cap->origin.real != CU_STREAM_PER_THREAD;
}

/* --- membership ------------------------------------------------------------------ */

int ctab_note_membership(struct capture *cap, enum drv_id id, const union drv_args *a)
{
    enum drv_op_kind kind = (enum drv_op_kind)drv_table[id].op_kind;
    if (kind == DRV_OP_EVENT_RECORD) {
        ctab_add_event(cap, drv_args_event(id, a));
    } else if (kind == DRV_OP_STREAM_WAIT) {
        struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, a));
        ctab_add_member(cap, s.key);
    }
    return cap->membership_overflow && cap->journal.replayable;
}

void ctab_journal_outgrown(struct capture *cap)
{
    cap->journal.replayable = 0;
    snprintf(cap->journal.why_not, sizeof cap->journal.why_not,
             "more streams or events than recap can follow in one capture");
}

/* --- capture queries ------------------------------------------------------------- */

struct capture_query ctab_query_of(enum drv_id id, union drv_args *a)
{
    struct capture_query q = { 0 };
    switch (id) {
    case DRV_cuStreamIsCapturing:
    case DRV_cuStreamIsCapturing_ptsz:
        q.status = a->cuStreamIsCapturing.captureStatus;
        break;
    case DRV_cuStreamGetCaptureInfo:
    case DRV_cuStreamGetCaptureInfo_ptsz:
        q.status = a->cuStreamGetCaptureInfo.captureStatus_out;
        q.id = a->cuStreamGetCaptureInfo.id_out;
        break;
    case DRV_cuStreamGetCaptureInfo_v2:
    case DRV_cuStreamGetCaptureInfo_v2_ptsz: {
        struct drv_args_cuStreamGetCaptureInfo_v2 *v = &a->cuStreamGetCaptureInfo_v2;
        q.status = v->captureStatus_out, q.id = v->id_out, q.graph = v->graph_out;
        q.deps = v->dependencies_out, q.ndeps = v->numDependencies_out;
        break;
    }
    default: {
        struct drv_args_cuStreamGetCaptureInfo_v3 *v = &a->cuStreamGetCaptureInfo_v3;
        q.status = v->captureStatus_out, q.id = v->id_out, q.graph = v->graph_out;
        q.deps = v->dependencies_out, q.edges = v->edgeData_out, q.ndeps = v->numDependencies_out;
        break;
    }
    }
    return q;
}
