/*
 * match.c - candidates narrowed call by call.
 *
 * A site that captures graphs of several kinds through one call site (a
 * batch size, a kernel a library picks per size, a thread of its own, an
 * odd iteration) keeps a graph of each; which one a capture repeats shows
 * only as its calls arrive. Each candidate carries its own comparison
 * state (the pairing of streams and events, the dependencies each stream
 * has in that graph), so a candidate is judged exactly as if it were the
 * only one. The cost is a comparison per live candidate and call, and the
 * candidates differ early in the usual case, so that one is left after a
 * few calls.
 */
#include <string.h>

#include "shim/match.h"

void match_start(struct match_set *m, struct graph_rec *const *graphs, int n,
                 const void *origin_key)
{
    if (n > MATCH_MAX_CANDIDATES)
        n = MATCH_MAX_CANDIDATES;
    m->n = m->live = m->started_with = n;
    for (int i = 0; i < n; i++) {
        struct match_candidate *c = &m->cand[i];
        c->graph = graphs[i];
        c->changed = 0;
        c->live = 1;
        self_record_start(&c->state, graphs[i]->recording, origin_key);
    }
}

static void drop(struct match_set *m, int i, struct graph_rec **dropped, int *ndropped)
{
    struct match_candidate *c = &m->cand[i];
    self_record_stop(&c->state);
    c->live = 0;
    m->live--;
    dropped[(*ndropped)++] = c->graph;
    c->graph = NULL;
}

int match_call(struct match_set *m, enum drv_id id, const union drv_args *a,
               struct graph_rec **dropped, int *ndropped, int *needs_node, char *why, size_t len)
{
    *ndropped = 0;
    *needs_node = 0;
    for (int i = 0; i < m->n; i++) {
        struct match_candidate *c = &m->cand[i];
        if (!c->live)
            continue;
        int node = 0;
        /* Only the last live candidate's reason can be the capture's:
         * the others' would be formatted for nothing (a tenth of what
         * matching cost with eight candidates). */
        enum self_verdict v = self_record_match(&c->state, id, a, &node, why,
                                                m->live == 1 ? len : 0);
        if (v == SELF_SWITCH) {
            drop(m, i, dropped, ndropped);
            continue;
        }
        c->changed += v == SELF_CHANGED;
        *needs_node |= node;
    }
    return m->live;
}

int match_choose(const struct match_set *m, int whole, uint64_t preferred)
{
    int best = -1;
    for (int i = 0; i < m->n; i++) {
        const struct match_candidate *c = &m->cand[i];
        if (!c->live || (whole && c->state.next != c->state.rec->nops))
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        const struct match_candidate *b = &m->cand[best];
        if (c->changed != b->changed) {
            if (c->changed < b->changed)
                best = i;
        } else if (preferred && c->graph->signature == preferred &&
                   b->graph->signature != preferred) {
            best = i;
        }
    }
    return best;
}

struct graph_rec *match_finish(struct match_set *m, int keep, struct graph_rec **dropped,
                               int *ndropped)
{
    struct graph_rec *kept = NULL;
    *ndropped = 0;
    for (int i = 0; i < m->n; i++) {
        struct match_candidate *c = &m->cand[i];
        if (!c->live)
            continue;
        if (i == keep) {
            self_record_stop(&c->state);
            kept = c->graph;
            c->live = 0;
            c->graph = NULL;
            m->live--;
        } else {
            drop(m, i, dropped, ndropped);
        }
    }
    m->n = 0;
    return kept;
}
