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
#include "policy/settings.h"
#include "policy/site.h"
#include "shim/cache.h"
#include "shim/site_names.h"

struct site_counters {
    unsigned long captures, recaptured, fallbacks, fresh, observed;
    unsigned long nodes, changed, eligible, ineligible, errors;
    unsigned long instantiations, reused;       /* reused: update+delta+reuse */
    unsigned long how_new, how_update, how_delta, how_reuse;
    unsigned long update_failures;              /* reuse attempts that failed */
    double capture_us, inst_new_us, reuse_us;
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
    char no_recapture_reason[160];
    struct site_counters count;
    uint64_t last_capture_key;          /* path+reason of the last capture event */
    uint64_t last_instantiate_key;      /* how+reason of the last instantiate event */
    unsigned long instantiate_seq;      /* instantiations so far */
    int update_failures_in_row;         /* executable updates that failed in a row */
    int no_exec_reuse;                  /* they kept failing: instantiate as asked */
    int n_released[CACHE_KINDS];        /* released objects per kind, under cache_lock */
};

/* The site of a stack, created (and announced with a "site" log event) at
 * first sight. NULL only if memory ran out. */
struct site *sites_get(uint64_t id, const struct site_stack *stack);

/* As sites_get, for a capture whose Python frames and NVTX range are in
 * `origin` (NULL: none): a new site is named from them. */
struct site *sites_get_named(uint64_t id, const struct site_stack *stack,
                             const struct site_origin *origin);

/* Calls fn for each RECAP_SITES entry that selected no site (under
 * sites_lock). */
void sites_for_each_unmatched(void (*fn)(const char *entry, void *arg), void *arg);

/* Marks the site as never to be recaptured, logging the reason once. */
void sites_forbid_recapture(struct site *site, const char *reason);

/* Calls fn for every site (under sites_lock; fn must not take it). */
void sites_for_each(void (*fn)(struct site *site, void *arg), void *arg);

/* In a fork child: the parent's sites and their counters are dropped. */
void sites_after_fork_child(void);

#endif
