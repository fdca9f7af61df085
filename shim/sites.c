/*
 * sites.c - the table of capture sites. Sites are few (one per place a
 * program begins captures) and live until exit, so a small chained hash
 * table under one mutex is enough; the lookup happens once per capture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/runtime.h"
#include "shim/sites.h"

#define SITES_BUCKETS 256

static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
static struct site *sites_table[SITES_BUCKETS];
/* The site this thread captured at last: a loop captures at one site again
 * and again, and sites live until exit, so it is found without the lock. */
static __thread struct site *sites_last;

/* Who is told (the log, above this module); NULL before start. */
static sites_new_fn sites_on_new;
static sites_forbidden_fn sites_on_forbidden;

void sites_announce_with(sites_new_fn on_new, sites_forbidden_fn on_forbidden)
{
    sites_on_new = on_new;
    sites_on_forbidden = on_forbidden;
}

struct site *sites_get_named(uint64_t id, const struct site_stack *stack,
                             const struct site_origin *origin)
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
            fresh->names = origin ? site_names_new(origin) : NULL;
            fresh->policy = site_names_policy(&runtime_settings, id, fresh->names);
            fresh->working_set = fresh->working_set_told = 1;
            pthread_mutex_init(&fresh->lock, NULL);
            fresh->next = sites_table[b];
            sites_table[b] = fresh;
            site = fresh;
        }
    }
    pthread_mutex_unlock(&sites_lock);
    sites_last = site;

    if (fresh && sites_on_new)
        sites_on_new(fresh, stack);
    return site;
}

void sites_for_each_unmatched(void (*fn)(const char *entry, void *arg), void *arg)
{
    pthread_mutex_lock(&sites_lock);
    site_names_unmatched(&runtime_settings, fn, arg);
    pthread_mutex_unlock(&sites_lock);
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
    if (first && sites_on_forbidden)
        sites_on_forbidden(site, reason);
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

enum gate_change sites_close_over_budget_locked(struct site *site, const char *noun,
                                                unsigned long long bytes, unsigned long long budget)
{
    enum gate_change change = gate_close_over_budget(&site->gate, site->seq, noun, bytes, budget);
    if (change != GATE_SAME)
        site->count.backoffs++;
    return change;
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
    site_names_after_fork_child();
    for (size_t b = 0; b < SITES_BUCKETS; b++) {
        while (sites_table[b]) {
            struct site *s = sites_table[b];
            sites_table[b] = s->next;
            free((void *)s->names);
            free(s);
        }
    }
}
