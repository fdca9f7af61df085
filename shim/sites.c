/*
 * sites.c - the table of capture sites. Sites are few (one per place a
 * program begins captures) and live until exit, so a small chained hash
 * table under one mutex is enough; the lookup happens once per capture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/events.h"
#include "shim/runtime.h"
#include "shim/sites.h"

#define SITES_BUCKETS 256

static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
static struct site *sites_table[SITES_BUCKETS];
/* The site this thread captured at last: a loop captures at one site again
 * and again, and sites live until exit, so it is found without the lock. */
static __thread struct site *sites_last;

struct site *sites_get(uint64_t id, const struct site_stack *stack)
{
    struct site *site, *fresh = NULL;
    size_t b = (size_t)(id % SITES_BUCKETS);

    if (sites_last && sites_last->id == id)
        return sites_last;
    pthread_mutex_lock(&sites_lock);
    for (site = sites_table[b]; site; site = site->next)
        if (site->id == id)
            break;
    if (!site) {
        fresh = calloc(1, sizeof *fresh);
        if (fresh) {
            fresh->id = id;
            fresh->policy = settings_site_policy(&runtime_settings, id);
            fresh->working_set = fresh->working_set_told = 1;
            pthread_mutex_init(&fresh->lock, NULL);
            fresh->next = sites_table[b];
            sites_table[b] = fresh;
            site = fresh;
        }
    }
    pthread_mutex_unlock(&sites_lock);
    sites_last = site;

    if (fresh)
        event_site(fresh, stack);
    return site;
}

void sites_forbid_recapture(struct site *site, const char *reason)
{
    int first;
    pthread_mutex_lock(&site->lock);
    first = !site->no_recapture;
    if (first) {
        site->no_recapture = 1;
        snprintf(site->no_recapture_reason, sizeof site->no_recapture_reason, "%s", reason);
    }
    pthread_mutex_unlock(&site->lock);
    if (first)
        event_warning(site, "site not recaptured: %s", reason);
}

enum gate_change sites_record_look_locked(struct site *site, enum gate_look look)
{
    if (look == GATE_HIT)
        site->count.hits++;
    else
        site->count.misses++;
    enum gate_change change = gate_record(&site->gate, look, site->seq);
    if (change == GATE_CLOSED_MISSES || change == GATE_CLOSED_FAILURES)
        site->count.backoffs++;
    return change;
}

void sites_record_look(struct site *site, enum gate_look look)
{
    pthread_mutex_lock(&site->lock);
    enum gate_change change = sites_record_look_locked(site, look);
    pthread_mutex_unlock(&site->lock);
    sites_gate_changed(site, change);
}

void sites_gate_changed(struct site *site, enum gate_change change)
{
    if (change == GATE_SAME)
        return;
    pthread_mutex_lock(&site->lock);
    struct reuse_gate g = site->gate;
    unsigned long now = site->seq;
    pthread_mutex_unlock(&site->lock);
    if (change == GATE_REOPENED) {
        cache_site_reopen(site);
        event_reuse(site, "resumed", "the back-off elapsed", 0, 0, 0);
        return;
    }
    char why[160];
    if (change == GATE_CLOSED_FAILURES)
        snprintf(why, sizeof why, "%d recaptures or updates failed in a row", GATE_FAILURES_IN_ROW);
    else
        snprintf(why, sizeof why, "%u misses against %u hits in the last %u looks", g.last_misses,
                 g.last_hits, g.last_misses + g.last_hits);
    event_reuse(site, "stopped", why, g.reopen_at - now, g.last_hits, g.last_misses);
    /* Stops keeping: what it kept goes back to the device now. */
    cache_site_drop(site);
}

void sites_for_each(void (*fn)(struct site *site, void *arg), void *arg)
{
    pthread_mutex_lock(&sites_lock);
    for (size_t b = 0; b < SITES_BUCKETS; b++)
        for (struct site *s = sites_table[b]; s; s = s->next)
            fn(s, arg);
    pthread_mutex_unlock(&sites_lock);
}

void sites_after_fork_child(void)
{
    /* The child may not use the parent's CUDA objects; its sites start
     * afresh. Only this thread exists in the child, so locks other parent
     * threads held at fork time are simply forgotten with their sites. */
    pthread_mutex_init(&sites_lock, NULL);
    sites_last = NULL;
    for (size_t b = 0; b < SITES_BUCKETS; b++) {
        while (sites_table[b]) {
            struct site *s = sites_table[b];
            sites_table[b] = s->next;
            free(s);
        }
    }
}
