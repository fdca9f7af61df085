/*
 * reuse_gate.c - the hit/miss windows and the doubling back-off (see
 * reuse_gate.h for the rule and why).
 */
#include "policy/reuse_gate.h"

int gate_open(struct reuse_gate *g, unsigned long now, enum gate_change *change)
{
    *change = GATE_SAME;
    if (!g->closed)
        return 1;
    if (now < g->reopen_at)
        return 0;
    g->closed = 0;
    /* A site closed for what its failures cost did repeat: everything it
     * kept was dropped, and a cycle of k shapes misses 2k looks before its
     * first hit, more than a probe holds. Only a site that missed is
     * probed briefly. */
    g->probing = g->closed_why != GATE_CLOSED_COST;
    g->hits = g->misses = g->failures = 0;
    g->net_us = 0;
    *change = GATE_REOPENED;
    return 1;
}

static enum gate_change gate_close(struct reuse_gate *g, unsigned long now, enum gate_change why)
{
    if (g->backoff == 0)
        g->backoff = GATE_BACKOFF_FIRST;
    g->closed = 1;
    g->closed_why = why;
    g->reopen_at = now + g->backoff;
    g->closings++;
    g->last_hits = g->hits;
    g->last_misses = g->misses;
    g->last_failures = g->failures;
    g->last_net_us = g->net_us;
    g->backoff = g->backoff * 2 <= GATE_BACKOFF_MAX ? g->backoff * 2 : GATE_BACKOFF_MAX;
    g->hits = g->misses = g->failures = 0;
    g->net_us = 0;
    return why;
}

enum gate_change gate_close_over_budget(struct reuse_gate *g, unsigned long now, const char *noun,
                                        unsigned long long bytes, unsigned long long budget)
{
    if (g->closed)
        return GATE_SAME;
    g->over_noun = noun;
    g->over_bytes = bytes;
    g->over_budget = budget;
    return gate_close(g, now, GATE_CLOSED_OVER_BUDGET);
}

enum gate_change gate_record(struct reuse_gate *g, enum gate_look look, double net_us,
                             unsigned long now)
{
    if (g->closed)
        return GATE_SAME;
    g->net_us += net_us;
    if (look == GATE_HIT)
        g->hits++;
    else if (look == GATE_MISS)
        g->misses++;
    else if (++g->failures >= GATE_FAILURES_EAGER && g->hits == 0 && g->net_us < 0)
        return gate_close(g, now, GATE_CLOSED_COST);
    if (g->hits + g->misses + g->failures < (g->probing ? GATE_PROBE_WINDOW : GATE_WINDOW))
        return GATE_SAME;
    unsigned looks = g->hits + g->misses + g->failures;
    g->probing = 0;
    /* A site that sweeps through kinds (an optimizer test's variants)
     * misses each new kind's first capture and instantiation, yet repeats
     * the rest: a quarter of its looks hits that saved time keep it. */
    if (g->misses > g->hits + g->failures && (g->hits * 4 < looks || g->net_us <= 0))
        return gate_close(g, now, GATE_CLOSED_MISSES);
    /* One failure is an odd capture: its cost (a replay, timed on a busy
     * machine) says nothing about the hits around it, which may each save
     * little (measured: one replay of 2.4 ms under ASan closed a site of
     * 48 hits). */
    if (g->failures > GATE_ODD_FAILURES && g->net_us < 0)
        return gate_close(g, now, GATE_CLOSED_COST);
    /* A good window: the next closing starts the back-off afresh. */
    g->backoff = 0;
    g->hits = g->misses = g->failures = 0;
    g->net_us = 0;
    return GATE_SAME;
}
