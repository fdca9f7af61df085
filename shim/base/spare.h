/*
 * spare.h - one released record kept for the next of its kind (prefix
 * spare_).
 *
 * Owns nothing but the slot's protocol: a loop captures, tracks a graph and
 * lets it go once an iteration, so a record that would be freed waits in a
 * slot and the next one takes it instead of calling calloc (and, for a
 * capture, initialising two mutexes). The slot is a single pointer taken
 * and filled by atomic exchange: it holds one record or none, a taker never
 * reads through a pointer another thread may be swapping, so there is no
 * ABA and no lock. What the slot holds is reachable from a global, so leak
 * checkers count it as still reachable, never as lost. Must never: hand
 * out a record that is still referenced (the giver's last reference goes
 * into the slot), or reset the record (the caller knows which fields
 * survive, such as initialised mutexes).
 */
#ifndef RECAP_SPARE_H
#define RECAP_SPARE_H

#include "policy/annotate.h"

/* The record in the slot, now the caller's, or NULL. */
static inline void *spare_take(void **slot)
{
    void *p = __atomic_exchange_n(slot, NULL, __ATOMIC_ACQUIRE);
    if (p)
        ANNOTATE_HAPPENS_AFTER(slot);
    return p;
}

/* Puts a record nobody references into an empty slot. Returns 1 if the
 * slot took it, 0 if the slot was full (the caller frees it). */
static inline int spare_give(void **slot, void *p)
{
    void *empty = NULL;
    /* The slot word is only ever touched atomically; every give happens
     * before the takes that follow it. */
    VALGRIND_HG_DISABLE_CHECKING(slot, sizeof *slot);
    ANNOTATE_HAPPENS_BEFORE(slot);
    return __atomic_compare_exchange_n(slot, &empty, p, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

#endif
