/*
 * sites.c - the table of capture sites. Sites are few (one per place a
 * program begins captures) and live until exit, so a small chained hash
 * table under one mutex is enough; the lookup happens once per capture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/base/runtime.h"
#include "shim/state/sites.h"

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
            step_site_init(&fresh->step);
            fresh->working_set = fresh->working_set_told = 1;
            fresh->concurrency = fresh->concurrency_told = 1;
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

int sites_forbid_exec_reuse(struct site *site)
{
    return !__atomic_exchange_n(&site->no_exec_reuse, 1, __ATOMIC_RELAXED);
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

enum gate_change sites_record_look_locked(struct site *site, enum gate_look look, double net_us)
{
    if (look == GATE_HIT)
        site->count.hits++;
    else
        site->count.misses++;
    enum gate_change change = gate_record(&site->gate, look, net_us, site->seq);
    if (change == GATE_CLOSED_MISSES || change == GATE_CLOSED_COST)
        site->count.backoffs++;
    return change;
}

/* What an action that took `us` saved against one the site measured at
 * `total` over `n` (0 while nothing was measured). */
static double saved_against(double us, double total, unsigned long n)
{
    return n ? total / (double)n - us : 0;
}

double sites_capture_net_locked(const struct site *site, double us)
{
    return saved_against(us, site->count.fresh_us, site->count.fresh);
}

double sites_instantiation_net_locked(const struct site *site, double us)
{
    return saved_against(us, site->count.inst_new_us, site->count.how_new);
}

enum gate_change sites_close_over_budget_locked(struct site *site, const char *noun,
                                                unsigned long long bytes, unsigned long long budget)
{
    enum gate_change change = gate_close_over_budget(&site->gate, site->seq, noun, bytes, budget);
    if (change != GATE_SAME)
        site->count.backoffs++;
    return change;
}

/* The slot of a stream: its own, a free one, else the last (shared). */
static struct site_stream *stream_slot(struct site *site, const void *key, int create)
{
    for (int i = 0; i < SITES_STREAM_SLOTS; i++) {
        struct site_stream *st = &site->streams[i];
        if (st->key == key)
            return st;
        if (!st->key) {
            if (!create)
                return NULL;
            st->history = calloc(1, sizeof *st->history);
            if (!st->history)
                return NULL;
            st->key = key;
            return st;
        }
    }
    return &site->streams[SITES_STREAM_SLOTS - 1];
}

uint64_t sites_stream_guess_locked(struct site *site, const void *stream_key)
{
    struct site_stream *st = stream_slot(site, stream_key, 0);
    if (!st || !st->history)
        return 0;
    /* Periods up to twice the working set: a cycle such as A,A,B is
     * longer than its distinct shapes, but a single odd shape among many
     * repeats must not read as one long period. */
    return predict_next(st->history, 2 * predict_working_set(st->history));
}

/* Counts a kind into the site's kinds of the whole run. */
static void count_kind_locked(struct site *site, uint64_t kind)
{
    site->kinds_counted++;
    for (int i = 0; i < site->kinds_distinct; i++)
        if (site->kinds_seen[i] == kind)
            return;
    if (site->kinds_distinct < SITES_KINDS_SEEN)
        site->kinds_seen[site->kinds_distinct++] = kind;
    else
        site->kinds_more = 1;
}

void sites_stream_record_locked(struct site *site, const void *stream_key, uint64_t signature)
{
    predict_record(&site->shapes, signature);
    count_kind_locked(site, signature);
    struct site_stream *st = stream_slot(site, stream_key, 1);
    if (st && st->history)
        predict_record(st->history, signature);
}

void sites_capture_began_locked(struct site *site)
{
    site->active++;
    if (site->active > site->active_peak)
        site->active_peak = site->active;
    /* It grows at once (each capture at once takes candidates of its own)
     * and shrinks a window later. */
    if (site->active > site->concurrency)
        site->concurrency = site->active;
    if (site->seq % GATE_WINDOW == 0) {
        site->concurrency = site->active_peak > 1 ? site->active_peak : 1;
        site->active_peak = site->active;
    }
}

void sites_capture_ended_locked(struct site *site)
{
    if (site->active > 0)
        site->active--;
}

void sites_count_reason_locked(struct site_reasons *table, const char *reason)
{
    if (!reason || !*reason)
        reason = "(none given)";
    for (int i = 0; i < SITES_REASONS; i++) {
        struct site_reason_count *rc = &table->slot[i];
        if (rc->count && strncmp(rc->text, reason, sizeof rc->text - 1) == 0) {
            rc->count++;
            return;
        }
        if (!rc->count) {
            snprintf(rc->text, sizeof rc->text, "%s", reason);
            rc->count = 1;
            return;
        }
    }
    table->other++;
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
            for (int i = 0; i < SITES_STREAM_SLOTS; i++)
                free(s->streams[i].history);
            free(s);
        }
    }
}

void sites_recapture_told_locked(struct site *site, int held)
{
    if (held) {
        site->recapture_misses_in_row = 0;
        site->recapture_backoff = 0;
        return;
    }
    if (++site->recapture_misses_in_row <= SITES_RECAPTURE_MISSES_TOLERATED)
        return;
    site->recapture_backoff = site->recapture_backoff == 0 ? 1
                              : site->recapture_backoff * 2 > SITES_RECAPTURE_BACKOFF_MAX
                                  ? SITES_RECAPTURE_BACKOFF_MAX
                                  : site->recapture_backoff * 2;
    site->recapture_skip_left = site->recapture_backoff;
}

int sites_recapture_skipped_locked(struct site *site)
{
    if (site->recapture_skip_left == 0)
        return 0;
    site->recapture_skip_left--;
    return 1;
}
