/*
 * sites.h - the capture sites of this process (module prefix sites_).
 *
 * Owns: one struct site per site id seen, for the life of the process; its
 * policy (resolved once from the settings), its decision state (shape
 * history, whether its captures can be recaptured, why not) and its
 * counters. The graphs and executable graphs a site holds are cache.c's.
 * Must never: call the driver while holding a site's lock, free a site
 * (handles and log lines refer to sites until exit), or call the modules
 * above it (cache, log): what happens to sites is told through the
 * announcers the lifecycle sets.
 *
 * Locks: sites_lock guards the table; site->lock guards the fields marked
 * below. Order: capture->lock, then site->lock, then cache_lock.
 */
#ifndef RECAP_SITES_H
#define RECAP_SITES_H

#include <pthread.h>
#include <stdint.h>

#include "policy/predict.h"
#include "policy/reuse_gate.h"
#include "policy/settings.h"
#include "policy/site.h"
#include "shim/state/site_names.h"
#include "shim/base/step_time.h"
#include "shim/base/timeline.h"

/* The kinds of object cache.c keeps for a site (CACHE_KINDS; lifecycle.c
 * checks the two agree): sites sit below the cache and do not include it. */
#define SITES_RELEASED_KINDS 2

struct cache_entry;

/* What the cache did with a site's objects (kept, evicted), counted by
 * cache.c under cache_lock. */
struct site_cache_counts {
    unsigned long kept, evicted;
};

/* What kept_memory.c did with the device memory a site's captures
 * allocated (counted under kmem_lock). */
struct site_memory_counts {
    unsigned long tracked, kept, reused, not_kept;
    unsigned long long reused_bytes;
    const char *not_kept_reason;        /* the last free not kept: why (static text) */
};

struct site_counters {
    unsigned long captures, recaptured, fallbacks, fresh, observed;
    unsigned long by_recap;         /* recaptures recap recorded itself */
    unsigned long nodes, changed, eligible, ineligible, errors;
    unsigned long instantiations, reused;       /* reused: update+delta+reuse */
    unsigned long how_new, how_update, how_delta, how_reuse;
    unsigned long update_failures;              /* reuse attempts that failed */
    unsigned long hits, misses;                 /* looks into what recap keeps */
    unsigned long backoffs;                     /* times the site stopped keeping */
    double capture_us, inst_new_us, reuse_us;
    double fresh_us;                            /* of the driver captures counted in fresh */
};


/* Streams whose captures a site follows one by one (more share the last
 * slot's history): where recap must guess which graph a capture repeats
 * (the 13.3 recapture needs its graph at the begin), it guesses from what
 * this stream or thread captured, not from the whole site. */
#define SITES_STREAM_SLOTS 8

struct site_stream {
    const void *key;                    /* ctab's stream key; NULL: free */
    struct shape_history *history;      /* signatures captured on it, owned */
};

/* Distinct kinds of graph a site tells apart over the whole run (the log's
 * "shapes_seen"); more are only said to be more. */
#define SITES_KINDS_SEEN 256
/* Graphs the program keeps, newest first, that a copy may be made from:
 * enough to hold the 8 kinds compared at once (MATCH_MAX_CANDIDATES) where
 * an optimizer's variants repeat some kinds between the others. Kinds
 * that take turns are looked for among the newest SITES_HELD_TURNS. */
#define SITES_HELD_RECENT 32
#define SITES_HELD_TURNS 8

/* Distinct reasons a site counts exactly per table (the rest as "other"). */
#define SITES_REASONS 8

struct site_reason_count {
    char text[160];                     /* whole: as long as a capture's reason */
    unsigned long count;
};

/* Exact counts by reason of one kind of capture path: capture events are
 * sampled, and "why was this site not repeated" wants every capture. */
struct site_reasons {
    struct site_reason_count slot[SITES_REASONS];
    unsigned long other;                /* captures of further reasons */
};

struct site {
    uint64_t id;
    struct site_policy policy;          /* fixed at first sight */
    struct site *next;                  /* hash chain, under sites_lock */
    const struct site_names *names;     /* fixed at first sight; NULL: none */

    pthread_mutex_t lock;
    /* --- under lock --- */
    unsigned long seq;                  /* captures begun so far */
    struct shape_history shapes;
    int journal_verified;               /* a journal matched its graph */
    int no_recapture;                   /* never recapture again */
    int no_exec_reuse;                  /* never reuse its executable graphs (atomic) */
    int sets_exec_nodes;                /* the program set nodes of one of its executable
                                         * graphs itself (atomic): cache_take_exec */
    int typed_shapes;                   /* shapes include node types and edges */
    char no_recapture_reason[160];
    struct site_counters count;
    struct timeline timeline;           /* the counters per window of captures */
    uint64_t last_capture_key;          /* path+reason of the last capture event */
    uint64_t last_instantiate_key;      /* how+reason of the last instantiate event */
    unsigned long instantiate_seq;      /* instantiations so far */
    struct reuse_gate gate;             /* whether keeping and looking pay here */
    int working_set_told;               /* last working set told to the cache */
    int concurrency_told;               /* ... and captures at once */
    int active;                         /* captures begun and not ended */
    int active_peak;                    /* most at once in the current window */
    int concurrency;                    /* most at once in the last window, >= 1 */
    struct site_stream streams[SITES_STREAM_SLOTS];
    int guess_misses;                   /* the stream's usual graph of late was not
                                         * the one repeated: 0 to 4 (capture_recorded.c) */
    /* 13.3: recaptures into the guessed graph that fell back in a row, and
     * the captures left to the driver for it (sites_recapture_told_locked). */
    unsigned recapture_misses_in_row;
    unsigned recapture_backoff;         /* doubling, to SITES_RECAPTURE_BACKOFF_MAX */
    unsigned recapture_skip_left;
    struct site_reasons fallback_reasons;
    struct site_reasons fresh_reasons;  /* captures left to the driver, and why */
    /* --- under cache_lock (cache.c) --- */
    int working_set;                    /* predict_working_set(&shapes), as told */
    /* Executable graphs kept beyond the working set: one more each time a
     * graph recap records into was found without the executable graph
     * made for it (recap records into several graphs in turn: the
     * program destroys its graphs late). */
    int execs_beyond_working_set;
    int cache_closed;                   /* the gate is closed: keep nothing */
    int n_released[SITES_RELEASED_KINDS]; /* per enum cache_kind */
    struct cache_entry *released_newest[SITES_RELEASED_KINDS];
    struct cache_entry *released_oldest[SITES_RELEASED_KINDS];
    struct site_cache_counts cache;
    /* The newest graphs of the site the program holds, newest at
     * held_recent[held_next - 1] (they may be gone since: found again by
     * handle and serial), and how many graphs in a row the program kept
     * alike (one signature) instead of destroying. */
    struct site_held_ref {
        const void *handle;
        uint64_t serial;
    } held_recent[SITES_HELD_RECENT];
    unsigned held_next;
    int held_alike;
    unsigned long held_copies;          /* graphs recap copied from one it holds */
    int held_told;                      /* the log said it keeps them (no copies) */
    unsigned long long measured_bytes;  /* device memory its instantiations took */
    unsigned long long measured_nodes;  /* ... for this many nodes */
    int measured_samples;
    /* --- under kmem_lock (kept_memory.c) --- */
    struct site_memory_counts memory;   /* allocations in its captures */
    /* --- atomics, under no lock (step_time.h) --- */
    struct step_site step;              /* where its step time goes */
    /* --- under lock --- */
    /* The distinct kinds (signatures, else shapes) of every graph the site
     * counted into its history, up to SITES_KINDS_SEEN: a site whose
     * captures all had one kind captured the same topology and kernels
     * each time. kinds_more: more kinds than that were seen. */
    uint64_t kinds_seen[SITES_KINDS_SEEN];
    int kinds_distinct, kinds_more;
    unsigned long kinds_counted;        /* captures whose kind was counted */
};

/* Records one look into the site's kept objects (counts it, feeds the
 * gate with what it saved, net_us, or cost, negative); the caller holds
 * site->lock and passes the gate's change to event_reuse_gate after
 * unlocking. */
enum gate_change sites_record_look_locked(struct site *site, enum gate_look look, double net_us);

/* What a capture (or instantiation) recap served, which took `us`, saved
 * against the site's mean driver capture (new instantiation); 0 while the
 * site measured none. Caller holds site->lock. */
double sites_capture_net_locked(const struct site *site, double us);
double sites_instantiation_net_locked(const struct site *site, double us);

/* One object the site released was larger than the whole cache budget:
 * closes its gate (counted as a back-off); the caller holds site->lock and
 * passes the change to cache_site_gate_changed after unlocking. */
enum gate_change sites_close_over_budget_locked(struct site *site, const char *noun,
                                                unsigned long long bytes, unsigned long long budget);


/* 13.3: a recapture into the graph this stream was guessed to repeat held
 * (`held`) or fell back. More than SITES_RECAPTURE_MISSES_TOLERATED
 * falling back in a row (a topology change costs two: the first capture
 * of the new graph, and the next, still guessed as the old) leave the next
 * captures to the driver - 1, then 2, 4, ... up to
 * SITES_RECAPTURE_BACKOFF_MAX while they keep falling back, 0 again after
 * one that held: a site whose graphs come in no predictable order stops
 * paying a failed recapture per capture, and one odd capture costs
 * nothing later. */
#define SITES_RECAPTURE_MISSES_TOLERATED 2u
#define SITES_RECAPTURE_BACKOFF_MAX 64u
void sites_recapture_told_locked(struct site *site, int held);

/* Whether this capture is left to the driver by that back-off (counts it). */
int sites_recapture_skipped_locked(struct site *site);

/* What this stream's (or thread's) captures at the site suggest it
 * captures next: a signature, or 0 (caller holds site->lock). */
uint64_t sites_stream_guess_locked(struct site *site, const void *stream_key);

/* A capture on this stream ended with a graph of this signature (0: none
 * known); also counts it into the site's history, whose distinct entries
 * are its working set, and into its kinds of the whole run. Caller holds
 * site->lock. */
void sites_stream_record_locked(struct site *site, const void *stream_key, uint64_t signature);

/* A capture began / ended at the site (caller holds site->lock): the most
 * captures at once over a window of GATE_WINDOW begins is the site's
 * concurrency. */
void sites_capture_began_locked(struct site *site);
void sites_capture_ended_locked(struct site *site);

/* Counts a capture under its reason in `table`, one of the site's (caller
 * holds site->lock). */
void sites_count_reason_locked(struct site_reasons *table, const char *reason);

/* The site of a stack, created (and announced with a "site" log event) at
 * first sight; a new site is named from the Python frames and NVTX range in
 * `origin` (NULL: none). NULL only if memory ran out. */
struct site *sites_get_named(uint64_t id, const struct site_stack *stack,
                             const struct site_origin *origin);

/* Calls fn for each RECAP_SITES entry that selected no site (under
 * sites_lock). */
void sites_for_each_unmatched(void (*fn)(const char *entry, void *arg), void *arg);

/* Who is told of each new site (with the stack it was first seen at) and
 * of each site that stops being recaptured (once, with the reason). */
typedef void (*sites_new_fn)(const struct site *site, const struct site_stack *stack);
typedef void (*sites_forbidden_fn)(const struct site *site, const char *reason);
void sites_announce_with(sites_new_fn on_new, sites_forbidden_fn on_forbidden);

/* Marks the site as never to be recaptured, announcing the reason once. */
void sites_forbid_recapture(struct site *site, const char *reason);

/* Marks the site as never to reuse executable graphs (nor keep them).
 * Returns 1 the first time (the caller says why, once). */
int sites_forbid_exec_reuse(struct site *site);

/* Calls fn for every site (under sites_lock; fn must not take it). */
void sites_for_each(void (*fn)(struct site *site, void *arg), void *arg);

/* In a fork child: the parent's sites and their counters are dropped. */
void sites_after_fork_child(void);

#endif
