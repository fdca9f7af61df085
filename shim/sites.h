/*
 * sites.h - the capture sites of this process (module prefix sites_).
 *
 * Owns: one struct site per site id seen, for the life of the process; its
 * policy (resolved once from the settings), its decision state (shape
 * history, whether its captures can be recaptured, why not) and its
 * counters. The graphs and executable graphs a site holds are cache.c's.
 * Must never: call the driver while holding a site's lock, or free a site
 * (handles and log lines refer to sites until exit).
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
#include "shim/cache.h"

struct site_counters {
    unsigned long captures, recaptured, fallbacks, fresh, observed;
    unsigned long nodes, changed, eligible, ineligible, errors;
    unsigned long instantiations, reused;       /* reused: update+delta+reuse */
    unsigned long how_new, how_update, how_delta, how_reuse;
    unsigned long update_failures;              /* reuse attempts that failed */
    unsigned long hits, misses;                 /* looks into what recap keeps */
    unsigned long backoffs;                     /* times the site stopped keeping */
    double capture_us, inst_new_us, reuse_us;
};


struct site {
    uint64_t id;
    struct site_policy policy;          /* fixed at first sight */
    struct site *next;                  /* hash chain, under sites_lock */

    pthread_mutex_t lock;
    /* --- under lock --- */
    unsigned long seq;                  /* captures begun so far */
    struct shape_history shapes;
    int journal_verified;               /* a journal matched its graph */
    int no_recapture;                   /* never recapture again */
    char no_recapture_reason[160];
    struct site_counters count;
    uint64_t last_capture_key;          /* path+reason of the last capture event */
    uint64_t last_instantiate_key;      /* how+reason of the last instantiate event */
    unsigned long instantiate_seq;      /* instantiations so far */
    struct reuse_gate gate;             /* whether keeping and looking pay here */
    int working_set_told;               /* last working set told to the cache */
    /* --- under cache_lock (cache.c) --- */
    int working_set;                    /* predict_working_set(&shapes), as told */
    int cache_closed;                   /* the gate is closed: keep nothing */
    int n_released[CACHE_KINDS];        /* released objects per kind */
    struct cache_entry *released_newest[CACHE_KINDS], *released_oldest[CACHE_KINDS];
    struct site_cache_counts cache;
    unsigned long long measured_bytes;  /* device memory its instantiations took */
    unsigned long long measured_nodes;  /* ... for this many nodes */
    int measured_samples;
};

/* Records one look into the site's kept objects: counts it, feeds the
 * gate, and when the gate closes logs why and drops what the site keeps.
 * Takes site->lock (the caller must not hold it). */
void sites_record_look(struct site *site, enum gate_look look);

/* The same, for a caller that holds site->lock: returns the gate's change,
 * which the caller passes to sites_gate_changed after unlocking. */
enum gate_change sites_record_look_locked(struct site *site, enum gate_look look);
void sites_gate_changed(struct site *site, enum gate_change change);


/* The site of a stack, created (and announced with a "site" log event) at
 * first sight. NULL only if memory ran out. */
struct site *sites_get(uint64_t id, const struct site_stack *stack);

/* Marks the site as never to be recaptured, logging the reason once. */
void sites_forbid_recapture(struct site *site, const char *reason);

/* Calls fn for every site (under sites_lock; fn must not take it). */
void sites_for_each(void (*fn)(struct site *site, void *arg), void *arg);

/* In a fork child: the parent's sites and their counters are dropped. */
void sites_after_fork_child(void);

#endif
