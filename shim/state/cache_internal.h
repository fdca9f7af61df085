/*
 * cache_internal.h - what cache.c (the lifecycle every kind of record
 * shares, executable graphs, the budget) shares with cache_graphs.c (what
 * is particular to graphs): the lock, the kinds' maps and the entry
 * lifecycle. Part of the cache module: nothing else includes it. The
 * functions here are cache.c's, called by cache_graphs.c, never the other
 * way round.
 */
#ifndef RECAP_CACHE_INTERNAL_H
#define RECAP_CACHE_INTERNAL_H

#include <pthread.h>

#include "shim/state/cache.h"
#include "shim/base/handle_map.h"

struct kind_state {
    const char *noun;
    struct hmap by_handle;               /* handle -> entry, every state */
    /* by_handle.len, also read without cache_lock (atomically): where
     * nothing is tracked (observed sites only) a handle's lookup takes no
     * lock. An entry is tracked before the program gets its handle, so a
     * lookup of that handle always sees a count above zero. */
    size_t tracked;
};

/* Entries evicted under the lock, chained through lru_newer, destroyed
 * after it is dropped. */
struct evictions {
    struct cache_entry *first;
};

/* Whether a destroyed entry is worth keeping, as far as can be told under
 * cache_lock (no driver call, no other lock): KEEP_ASK leaves it to the
 * rule's driver question, asked with the lock dropped. */
enum keep_answer { KEEP_NO, KEEP_YES, KEEP_ASK };

struct keep_rule {
    enum keep_answer (*first)(const struct cache_entry *);
    int (*driver)(const struct cache_entry *);   /* for KEEP_ASK; may query the driver */
    /* A graph not kept may live on for the executable graphs instantiated
     * from it (cache.c); not one whose user objects must go with it. */
    int outlives_execs;
};

/* cache_lock guards both kinds' maps, the released lists and counts, every
 * entry's state and the sites' fields marked "under cache_lock". */
extern pthread_mutex_t cache_lock;
extern struct kind_state kinds[CACHE_KINDS];
/* A freed graph record kept for the next capture's (shim/base/spare.h). */
extern void *graph_rec_spare;

/* Whether a kind's map may hold anything; without cache_lock. */
int cache_map_may_hold(enum cache_kind k);
/* Forgets a handle's entry (under cache_lock). */
void cache_map_del(struct kind_state *ks, const void *handle);

/* Frees an entry (its object is gone or never was recap's). */
void cache_entry_free(struct cache_entry *e);
/* Destroys the object of an entry recap owns and frees the entry; never
 * under cache_lock. */
void cache_entry_destroy(struct cache_entry *e);
/* Destroys what an eviction chained, after cache_lock is dropped. */
void cache_destroy_evicted(struct evictions *ev);
/* A graph whose nodes are no longer those its executable graphs were
 * instantiated from (a failed recapture left it undefined; a capture goes
 * on in it as a new graph): the released executable graphs instantiated
 * from it go; one the program holds runs on as it is and goes at its
 * destroy. Never under cache_lock. */
void cache_drop_execs_of(const struct graph_rec *g);
/* A destroyed entry joins the released lists (under cache_lock); what the
 * site's capacity or the budget pushes out is chained in *ev. */
void cache_push_released(struct cache_entry *e, struct evictions *ev);

/* Starts tracking an entry the program holds. Returns 0, or -1 (entry
 * freed) if the map could not grow. Takes cache_lock. */
int cache_entry_track(enum cache_kind k, struct cache_entry *e);
/* The entry of a handle the program holds, or NULL. Takes cache_lock. */
struct cache_entry *cache_entry_held(enum cache_kind k, const void *handle);
/* A released entry becomes the caller's (under cache_lock). */
void cache_take_locked(struct cache_entry *e);
/* The newest released entry of the site that `suits` best (3: the best
 * there is, stop looking; 0: unsuitable), now TAKEN. Takes cache_lock. */
struct cache_entry *cache_entry_take(enum cache_kind k, struct site *site,
                                     int (*suits)(const struct cache_entry *, const void *),
                                     const void *want);
/* A TAKEN entry goes to the program (HELD). */
void cache_entry_hand_out(struct cache_entry *e);
/* Forgets a TAKEN or HELD entry and destroys its object, once; a graph
 * `undefined` by a failed recapture never lives on for its executable
 * graphs, and takes the released ones along. */
void cache_entry_discard(enum cache_kind k, struct cache_entry *e, int undefined);
/* A TAKEN entry recap did not hand out goes back to its site's released
 * ones, in the place its last release gave it; destroyed where the site
 * keeps nothing now. */
void cache_entry_give_back(enum cache_kind k, struct cache_entry *e);
/* The program's destroy of a handle, by the kind's keep rule; `real`
 * destroys it at the driver. */
CUresult cache_entry_on_destroy(enum cache_kind k, const void *handle,
                                const struct keep_rule *rule, CUresult (*real)(const void *));

#endif
