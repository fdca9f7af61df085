/*
 * match.c - candidates narrowed call by call, the leader first.
 *
 * A site that captures graphs of several kinds through one call site (a
 * batch size, a kernel a library picks per size, a thread of its own, an
 * odd iteration) keeps a graph of each; which one a capture repeats shows
 * only as its calls arrive. Each candidate carries its own comparison
 * state (the pairing of streams and events, the dependencies each stream
 * has in that graph), so a candidate is judged exactly as if it were the
 * only one, whenever it is compared.
 *
 * Comparing every candidate with every call cost a comparison per live
 * candidate and call, and graphs that differ only late (the same prefix
 * with more kernels) kept most of them live for most of the capture: six
 * comparisons a call with eight shapes. The stream's usual graph is
 * usually the one repeated, so it leads alone, and the others are caught
 * up from the journal only when it differs.
 */
#include <stddef.h>

#include "shim/repeat/match.h"

void match_start(struct match_set *m, struct graph_rec *const *graphs, int n,
                 const void *origin_key)
{
    if (n > MATCH_MAX_CANDIDATES)
        n = MATCH_MAX_CANDIDATES;
    m->n = m->live = n;
    m->leader = n > 0 ? 0 : -1;
    m->calls = 0;
    for (int i = 0; i < n; i++) {
        struct match_candidate *c = &m->cand[i];
        c->graph = graphs[i];
        self_record_start(&c->state, graphs[i]->recording, origin_key);
    }
}

static void drop(struct match_set *m, int i, struct graph_rec **dropped, int *ndropped)
{
    struct match_candidate *c = &m->cand[i];
    self_record_stop(&c->state);
    m->live--;
    dropped[(*ndropped)++] = c->graph;
    c->graph = NULL;
}

/* Only the last live candidate's reason can be the capture's: the others'
 * would be formatted for nothing. */
static size_t reason_room(const struct match_set *m, size_t len)
{
    return m->live == 1 ? len : 0;
}

/* Compares candidate i with the calls of `past` it has not seen. Returns 1
 * when it matched them all; else it is dropped. */
static int catch_up(struct match_set *m, int i, const struct journal *past,
                    struct graph_rec **dropped, int *ndropped, char *why, size_t len)
{
    struct match_candidate *c = &m->cand[i];
    /* A journal that could not keep a call cannot show it again. */
    if (!past->replayable || past->nops != m->calls) {
        drop(m, i, dropped, ndropped);
        return 0;
    }
    for (size_t k = c->state.next; k < m->calls; k++) {
        int node = 0;
        const struct journal_op *op = &past->ops[k];
        if (self_record_match(&c->state, op->id, &op->args, &node, why,
                              reason_room(m, len)) == SELF_SWITCH) {
            drop(m, i, dropped, ndropped);
            return 0;
        }
    }
    return 1;
}

/* The next live candidate after the leader that matches every call so
 * far becomes the leader; -1 when none is left. */
static int next_leader(struct match_set *m, const struct journal *past,
                       struct graph_rec **dropped, int *ndropped, char *why, size_t len)
{
    for (int i = m->leader + 1; i < m->n; i++) {
        if (!m->cand[i].graph)
            continue;
        if (catch_up(m, i, past, dropped, ndropped, why, len))
            return m->leader = i;
    }
    return m->leader = -1;
}

int match_call(struct match_set *m, const struct journal *past, enum drv_id id,
               const union drv_args *a, struct graph_rec **dropped, int *ndropped,
               int *needs_node, char *why, size_t len)
{
    *ndropped = 0;
    *needs_node = 0;
    while (m->leader >= 0) {
        struct match_candidate *c = &m->cand[m->leader];
        int node = 0;
        if (self_record_match(&c->state, id, a, &node, why, reason_room(m, len)) != SELF_SWITCH) {
            *needs_node = node;
            m->calls++;
            return m->live;
        }
        drop(m, m->leader, dropped, ndropped);
        next_leader(m, past, dropped, ndropped, why, len);
    }
    return 0;
}

int match_resume(struct match_set *m, const struct journal *past, struct graph_rec **dropped,
                 int *ndropped, char *why, size_t len)
{
    *ndropped = 0;
    m->calls = past->nops;
    m->leader = -1;
    next_leader(m, past, dropped, ndropped, why, len);
    return m->live;
}

int match_leader(const struct match_set *m)
{
    return m->leader;
}

int match_choose_whole(struct match_set *m, const struct journal *past,
                       struct graph_rec **dropped, int *ndropped)
{
    char unused[1];
    *ndropped = 0;
    while (m->leader >= 0) {
        const struct match_candidate *c = &m->cand[m->leader];
        if (c->state.next == c->state.rec->nops)
            return m->leader;
        /* Matched so far but longer than the capture: another may be
         * whole (this one stays live until match_finish). */
        next_leader(m, past, dropped, ndropped, unused, 0);
    }
    return -1;
}

struct graph_rec *match_finish(struct match_set *m, int keep, struct graph_rec **dropped,
                               int *ndropped)
{
    struct graph_rec *kept = NULL;
    *ndropped = 0;
    for (int i = 0; i < m->n; i++) {
        struct match_candidate *c = &m->cand[i];
        if (!c->graph)
            continue;
        if (i == keep) {
            self_record_stop(&c->state);
            kept = c->graph;
            c->graph = NULL;
            m->live--;
        } else {
            drop(m, i, dropped, ndropped);
        }
    }
    m->n = 0;
    m->leader = -1;
    return kept;
}

struct graph_rec *match_detach(struct match_set *m, int which)
{
    struct match_candidate *c = &m->cand[which];
    struct graph_rec *g = c->graph;
    self_record_stop(&c->state);
    c->graph = NULL;
    m->live--;
    m->leader = -1;
    return g;
}
