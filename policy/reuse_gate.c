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
    g->hits = g->misses = g->failures_in_row = 0;
    *change = GATE_REOPENED;
    return 1;
}

static enum gate_change gate_close(struct reuse_gate *g, unsigned long now, enum gate_change why)
{
    if (g->backoff == 0)
        g->backoff = GATE_BACKOFF_FIRST;
    g->closed = 1;
    g->reopen_at = now + g->backoff;
    g->closings++;
    g->last_hits = g->hits;
    g->last_misses = g->misses;
    g->backoff = g->backoff * 2 <= GATE_BACKOFF_MAX ? g->backoff * 2 : GATE_BACKOFF_MAX;
    g->hits = g->misses = g->failures_in_row = 0;
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

enum gate_change gate_record(struct reuse_gate *g, enum gate_look look, unsigned long now)
{
    if (g->closed)
        return GATE_SAME;
    if (look == GATE_HIT) {
        g->hits++;
        g->failures_in_row = 0;
    } else {
        g->misses++;
        if (look == GATE_FAILED && ++g->failures_in_row >= GATE_FAILURES_IN_ROW)
            return gate_close(g, now, GATE_CLOSED_FAILURES);
        if (look == GATE_MISS)
            g->failures_in_row = 0;
    }
    if (g->hits + g->misses < GATE_WINDOW)
        return GATE_SAME;
    if (g->misses > g->hits)
        return gate_close(g, now, GATE_CLOSED_MISSES);
    /* A good window: the next closing starts the back-off afresh. */
    g->backoff = 0;
    g->hits = g->misses = 0;
    return GATE_SAME;
}
