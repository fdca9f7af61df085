/*
 * capture_table.h - the captures in progress that recap is part of
 * (module prefix ctab_).
 *
 * Owns: the struct capture of every capture begun at an enabled site, from
 * its begin to its end, and the questions "which capture does this stream
 * belong to" and "which capture recorded this event", which decide whether
 * a call is journaled; and what one capture notes as it goes (its reason,
 * the nodes that changed, the streams and events it joined) that every part
 * of the capture engine reads and writes. Must never: call the driver, take
 * a decision about a capture (shim/repeat/capture.h does), or hold captures_lock
 * while taking any other lock (it is the innermost lock of recap).
 */
#ifndef RECAP_CAPTURE_TABLE_H
#define RECAP_CAPTURE_TABLE_H

#include <pthread.h>

#include "shim/state/cache.h"
#include "shim/state/journal.h"

struct match_set;

/* Streams and events one capture can involve before recap stops following
 * it (a recapture then falls back: its journal could miss a call). Kept
 * small so that a struct capture stays in malloc's per-thread cache. */
#define CAPTURE_MAX_STREAMS 16
#define CAPTURE_MAX_EVENTS 16

enum capture_path { PATH_OBSERVE, PATH_FRESH, PATH_RECAPTURE, PATH_FALLBACK };

/* The path's name in the log. */
static inline const char *capture_path_name(enum capture_path path)
{
    switch (path) {
    case PATH_OBSERVE: return "observe";
    case PATH_FRESH: return "fresh";
    case PATH_RECAPTURE: return "recapture";
    default: return "fallback";
    }
}

/* A stream as recap tells streams apart: the per-thread default stream of
 * each thread is its own stream, so it gets a key of its own. */
struct stream_ref {
    CUstream real;          /* what recap passes to the driver */
    const void *key;        /* what identifies it in the table */
};

/* A destroy or free the program made of a handle the capture's replay may
 * still need (shim/repeat/capture_holds.h): made for real once it no longer can. */
struct held_release {
    enum drv_id id;
    union drv_args args;
};

struct capture {
    /* Kept across the captures a record serves (ctab_release keeps one
     * released record for the next ctab_new): initialised once. */
    pthread_mutex_t lock;            /* serialises calls into this capture */
    pthread_mutex_t changes_lock;    /* the recapture callback's fields below */
    int refs;                        /* atomic (capture_table.c says why) */
    /* Buffers, owned; allocated on first need, so that a loop allocates
     * nothing per capture: */
    struct self_record *self;        /* used while by_recap (kept to the end) */
    struct match_set *match;         /* candidates while matching (shim/repeat/match.h) */
    struct changed_node *changed;    /* the change list, nchanged entries valid */
    size_t changed_capacity;
    struct held_release *held;       /* releases held back (capture_holds.h), nheld valid */
    size_t held_capacity;

    /* Zero at the start of every capture, from here to the end. */
    struct stream_ref origin;
    pthread_t owner;                 /* thread that began the capture */
    enum drv_id begin_id;
    CUstreamCaptureMode mode;
    struct site *site;
    unsigned long seq;
    enum capture_path path;
    char reason[160];
    int journaled;                   /* counted in ctab_journaled */
    struct journal journal;
    struct graph_rec *target;        /* TAKEN graph being recaptured into */
    cuuint64_t app_capture_id;       /* the id the program saw, if any */
    int fallback_pending;            /* failure seen where it cannot be handled */
    int recapture_failed;            /* the driver said CUDA_ERROR_GRAPH_RECAPTURE_FAILURE */
    int reuse_closed;                /* the site's gate was closed at begin */
    int graph_asked;                 /* a query took the graph of a recapture: site left to driver captures */
    int graph_handed_out;            /* a query gave the program the capture's graph */
    int graph_lent;                  /* ... the cached graph of a recording: a switch captures into it */
    CUgraph lent_graph;              /* that graph once switched (no longer cached) */
    int resumed;                     /* a recording went on as a driver capture in its graph */
    int ended;                       /* its end ran: no call of it will be replayed */
    int record;                      /* decided: recap records it, if the site keeps a graph */
    uint64_t copy_wanted;            /* 13.3: none released of this signature; a copy
                                      * of a graph the program keeps may do */
    int matching;                    /* recorded, still choosing among candidates */
    int held_match;                  /* ... which are graphs the program keeps, pinned:
                                      * the one chosen is copied, none written into */
    unsigned long held_epoch;        /* the graph-edit epoch they were pinned at */
    int reserve;                     /* bound to its first candidate, the others
                                      * waiting in match (rematch) */
    int guess_open;                  /* began with several candidates; whether the
                                      * first was the one is not told yet */
    int candidates;                  /* kept graphs it was compared with at its begin */
    uint64_t kind;                   /* its signature (else shape) once ended; 0: not known */
    const char *switch_call;         /* the call at which it became a driver capture */
    int matched_none;                /* it switched because no kept graph matched: a miss */
    double wasted_us;                /* what switching cost: the replay */
    size_t nheld;
    double t0;

    /* Captures recap records itself (shim/repeat/self_record.h): no driver capture
     * exists while by_recap is set; learning marks a driver capture whose
     * journal notes each call's node, to be recorded against later. */
    int by_recap;                    /* counted in ctab_self_recorded */
    int began_by_recap;              /* for the log: recap answered its begin */
    int no_driver_capture;           /* switched from by_recap, not yet begun */
    int invalidated;                 /* recap answered as the driver would */
    int learning;
    int typed_shapes;                /* the site's shapes count node types (site->typed_shapes) */

    /* Filled by the recapture callback, inside driver calls. */
    size_t nchanged;
    unsigned long eligible, ineligible, errors;
    int changes_lost;                /* out of memory while recording */

    /* Membership, written under captures_lock and this capture's lock. */
    const void *member_keys[CAPTURE_MAX_STREAMS];
    int nmembers;
    CUevent events[CAPTURE_MAX_EVENTS];
    int nevents;
    int membership_overflow;
};

/* Number of registered journaled captures; wrappers read it to skip all
 * capture work when zero. */
extern int ctab_journaled;

static inline int capture_any_journaled(void)
{
    return __atomic_load_n(&ctab_journaled, __ATOMIC_RELAXED) != 0;
}

/* Whether any capture is registered (recap follows it, journaled or not). */
int ctab_any_active(void);

/* A capture begins on this thread: capture.c brackets all it does at a
 * begin with these. The driver's capture exists before recap registers
 * it, and a device-wide synchronisation of recap's own in that window
 * would invalidate it (a capture the program began, on another thread);
 * so ctab_synchronize_if_idle stands back while a begin runs, and a begin
 * waits for one already running. */
void ctab_begin_enter(void);
void ctab_begin_leave(void);

/* A capture the driver runs and recap holds nothing of: the program's own
 * cuStreamBeginCaptureToGraph, or a begin beyond recap's tables. Counted
 * from inside the begin's bracket until an end on a stream recap does
 * not know finds no capture left on it (ctab_unseen_ended), so that
 * ctab_synchronize_if_idle stands back meanwhile. A count, not a list:
 * an unseen capture that never ends keeps recap from synchronising for
 * the rest of the run, which costs kept memory, never a capture. */
void ctab_unseen_began(void);
void ctab_unseen_ended(void);
int ctab_any_unseen(void);

/* Whether any capture runs that recap knows of: registered, observed (a
 * slot) or counted unseen. */
int ctab_any_capture_running(void);

/* cuCtxSynchronize where no capture runs or begins, of those recap knows
 * of or counts (kept memory's stand-in for the wait of the free it
 * replaces): its result,
 * or CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, with nothing called, when a
 * capture runs or begins. */
CUresult ctab_synchronize_if_idle(void);

/* Number of registered captures recap records itself: calls that a driver
 * capture would refuse (shim/repeat/capture_guard.h) look at captures only when
 * it is nonzero. */
extern int ctab_self_recorded;

static inline int capture_any_self_recorded(void)
{
    return __atomic_load_n(&ctab_self_recorded, __ATOMIC_RELAXED) != 0;
}

/* A registered capture recap recorded itself now has a driver capture
 * (or is over): it stops counting in ctab_self_recorded. Caller holds
 * cap->lock. */
void ctab_self_recorded_done(struct capture *cap);

/* Calls fn on every registered capture recap records itself (or, _journaled,
 * every registered capture that keeps a journal), referenced for the call
 * (fn takes cap->lock itself if it needs it). */
void ctab_each_self_recorded(void (*fn)(struct capture *cap, void *arg), void *arg);
void ctab_each_journaled(void (*fn)(struct capture *cap, void *arg), void *arg);

/* Every thread's CU_STREAM_PER_THREAD is a different stream: its key is
 * this thread's own byte. */
extern __thread char ctab_per_thread_stream_key;

/* Inline: it runs three times per recorded call. */
static inline struct stream_ref ctab_stream_ref(enum drv_id id, CUstream stream)
{
    struct stream_ref ref = { stream, stream };
    if (!stream)
        ref.real = drv_table[id].ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    ref.key = ref.real == CU_STREAM_PER_THREAD ? (const void *)&ctab_per_thread_stream_key
                                               : (const void *)ref.real;
    return ref;
}

/* A new capture (one reference, held by the caller), not yet registered:
 * the record the last ctab_release kept, reset, or a new one. */
struct capture *ctab_new(void);

/* Makes the capture findable by its origin stream. Returns 0 when the
 * table is full: the capture is then not journaled, nor findable. */
int ctab_register(struct capture *cap);

/* Removes it from the table; the caller's reference remains. */
void ctab_unregister(struct capture *cap);

/* The registered capture a stream belongs to (origin or joined), with a
 * reference for the caller, or NULL. */
struct capture *ctab_find_stream(const void *key);
/* ctab_find_stream for one call into a capture, ended by ctab_call_done.
 * When the thread's memo answers, the call borrows the memo's reference
 * (*borrowed set) instead of taking its own; until ctab_call_done the
 * thread's other lookups leave the memo alone. */
struct capture *ctab_find_stream_for_call(const void *key, int *borrowed);
void ctab_call_done(struct capture *cap, int borrowed);
/* Gives back the calling thread's memo of its last stream lookup, if it
 * holds `cap` (any capture when NULL): at the end of a capture, and at exit. */
void ctab_memo_forget(const struct capture *cap);

/* The registered capture that recorded an event, referenced, or NULL. */
struct capture *ctab_find_event(CUevent event);

/* The registered capture begun on this origin stream, referenced, or NULL. */
struct capture *ctab_find_origin(const void *key);

/* Whether a stream (by key) takes part in the capture, or the capture
 * recorded an event. Caller holds cap->lock (membership changes under it). */
int ctab_has_member(const struct capture *cap, const void *key);
int ctab_has_event(const struct capture *cap, CUevent event);

/* Membership updates (caller holds cap->lock). */
void ctab_add_member(struct capture *cap, const void *key);
void ctab_add_event(struct capture *cap, CUevent event);

void ctab_release(struct capture *cap);

/* --- what a capture notes (caller holds cap->lock) ---------------------- */

/* Copies a reason (truncated to cap->reason's size). */
void ctab_set_reason(struct capture *cap, const char *text);

/* Whether this thread may end the capture and begin its replacement. */
int ctab_may_end_here(const struct capture *cap);

/* Appends to the capture's change list (caller holds cap->changes_lock,
 * or cap->lock where no driver callback can run: recap's own recording). */
void ctab_push_change(struct capture *cap, struct changed_node changed);

/* Empties the change list and its counts: the nodes they named belong to
 * a graph the capture no longer records into. */
void ctab_forget_changes(struct capture *cap);

/* The streams a call joins to the capture and the events it records.
 * Returns 1 when the capture just outgrew what recap follows while its
 * journal was still whole: the caller may switch it now, while the
 * journal can be replayed, and then calls ctab_journal_outgrown. */
int ctab_note_membership(struct capture *cap, enum drv_id id, const union drv_args *a);

/* The journal of a capture that outgrew recap's following cannot be
 * replayed whole any more. */
void ctab_journal_outgrown(struct capture *cap);

/* The arguments of a capture query, whichever form. */
struct capture_query {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
};

struct capture_query ctab_query_of(enum drv_id id, union drv_args *a);

/* In a fork child: forget every capture (their streams are the parent's). */
void ctab_after_fork_child(void);

#endif
