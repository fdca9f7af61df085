/*
 * match.h - which kept graph a capture recap records is repeating
 * (module prefix match_).
 *
 * Owns: the candidates of one capture - kept graphs of its site with a
 * recording, one of each signature, which the capture took from the cache
 * at its begin, the stream's usual one first - and narrowing them call by
 * call. Candidates are compared lazily: only the first live one (the
 * leader) follows each call; when it differs, the next is compared with
 * the calls so far (the capture's journal) and leads if it matched them
 * all. So a capture that repeats the stream's usual graph costs one
 * comparison a call however many graphs the site keeps, and a wrong guess
 * costs what comparing every candidate would have. The caller binds to
 * the leader where an answer needs one graph, or at the end to the first
 * candidate matched whole. (capture_recorded.c binds to the stream's usual
 * graph at the begin and keeps the others here in reserve, resumed only if
 * that graph differs.)
 *
 * Must never: write into a candidate's graph or recording (binding, the
 * first write, is the caller's), call the cache (the caller takes and
 * gives back), or take a lock (the capture's lock covers a match set).
 */
#ifndef RECAP_MATCH_H
#define RECAP_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "shim/state/cache.h"
#include "shim/state/journal.h"
#include "shim/repeat/self_record.h"

/* Candidates one capture compares at most: one per signature
 * (cache_take_candidates). */
#define MATCH_MAX_CANDIDATES 8

struct match_candidate {
    struct graph_rec *graph;        /* TAKEN by the capture; NULL once dropped */
    struct self_record state;       /* the comparison with its recording; state.next
                                     * calls compared so far */
};

struct match_set {
    struct match_candidate cand[MATCH_MAX_CANDIDATES];
    int n;                          /* candidates taken */
    int live;                       /* of them not dropped */
    int leader;                     /* the live one compared with every call so far */
    size_t calls;                   /* calls matched so far: the journal's */
};

/* Starts comparing a capture begun on the stream with key `origin_key`
 * against `graphs` (n of them, at most MATCH_MAX_CANDIDATES, each with a
 * recording; the first leads). */
void match_start(struct match_set *m, struct graph_rec *const *graphs, int n,
                 const void *origin_key);

/* One call made into the capture. `past` holds the calls matched before
 * it (the capture's journal), to compare a candidate that takes the lead.
 * Candidates that differ are dropped and their graphs appended to
 * dropped[] (*ndropped of them; room for MATCH_MAX_CANDIDATES) for the
 * caller to give back; `why` says why the last one went. *needs_node is
 * set when the leader would take a new memset or copy address, which the
 * driver checks only in a node. Returns the live count (0: none matches).
 * The caller appends the call to `past` when the count is not 0. */
int match_call(struct match_set *m, const struct journal *past, enum drv_id id,
               const union drv_args *a, struct graph_rec **dropped, int *ndropped,
               int *needs_node, char *why, size_t len);

/* Starts comparing again after `past` (the calls so far, none of them
 * compared yet): the first candidate that matches them all leads; those
 * that do not are dropped into dropped[] (*ndropped). Returns the live
 * count. For a capture bound to a candidate outside the set that then
 * differed. */
int match_resume(struct match_set *m, const struct journal *past, struct graph_rec **dropped,
                 int *ndropped, char *why, size_t len);

/* The candidate to bind to now: the leader (-1 if none). */
int match_leader(const struct match_set *m);

/* The first live candidate whose recording the calls so far (`past`)
 * complete, or -1; candidates compared on the way that differ are
 * dropped into dropped[] (*ndropped). */
int match_choose_whole(struct match_set *m, const struct journal *past,
                       struct graph_rec **dropped, int *ndropped);

/* Stops comparing; every candidate but `keep` (-1: none) goes into
 * dropped[] (*ndropped). The kept candidate's graph is returned. */
struct graph_rec *match_finish(struct match_set *m, int keep, struct graph_rec **dropped,
                               int *ndropped);

/* Takes candidate `which` out of the set, the others staying live but
 * uncompared (no leader) until match_resume: for a capture that binds to
 * one and keeps the rest in reserve. Returns its graph. */
struct graph_rec *match_detach(struct match_set *m, int which);

#endif
