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

struct site *sites_get(uint64_t id, const struct site_stack *stack)
{
    return sites_get_named(id, stack, NULL);
}

struct site *sites_get_named(uint64_t id, const struct site_stack *stack,
                             const struct site_origin *origin)
{
    struct site *site, *fresh = NULL;
    size_t b = (size_t)(id % SITES_BUCKETS);

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
            if (fresh->policy.max_graphs <= 0)
                fresh->policy.max_graphs = SETTINGS_DEFAULT_MAX_GRAPHS;
            pthread_mutex_init(&fresh->lock, NULL);
            fresh->next = sites_table[b];
            sites_table[b] = fresh;
            site = fresh;
        }
    }
    pthread_mutex_unlock(&sites_lock);

    if (fresh)
        event_site(fresh, stack);
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
    if (first)
        event_warning(site, "site not recaptured: %s", reason);
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
