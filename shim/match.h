/*
 * match.h - which kept graph a capture recap records is repeating
 * (module prefix match_).
 *
 * Owns: the candidates of one capture - kept graphs of its site with a
 * recording, one of each signature, which the capture took from the cache
 * at its begin - and narrowing them call by call: each call is compared
 * with every live candidate's recording (self_record_match), a candidate
 * that differs is dropped, and the caller binds to one once a single
 * candidate is left, or at the end to the one matched whole, or earlier
 * where an answer needs one graph. The common case (one candidate) binds
 * at once and costs nothing here.
 *
 * Must never: write into a candidate's graph or recording (binding, the
 * first write, is the caller's), call the cache (the caller takes and
 * gives back), or take a lock (the capture's lock covers a match set).
 */
#ifndef RECAP_MATCH_H
#define RECAP_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "shim/cache.h"
#include "shim/self_record.h"

/* Candidates one capture compares at most: one per signature, newest
 * first (cache_take_candidates). */
#define MATCH_MAX_CANDIDATES 8

struct match_candidate {
    struct graph_rec *graph;        /* TAKEN by the capture */
    struct self_record state;       /* the comparison with its recording */
    unsigned long changed;          /* calls so far whose values differ */
    int live;
};

struct match_set {
    struct match_candidate cand[MATCH_MAX_CANDIDATES];
    int n;                          /* candidates taken */
    int live;                       /* of them still matching */
    int started_with;               /* n at the start, for the log */
};

/* Starts comparing a capture begun on the stream with key `origin_key`
 * against `graphs` (n of them, at most MATCH_MAX_CANDIDATES, each with a
 * recording). */
void match_start(struct match_set *m, struct graph_rec *const *graphs, int n,
                 const void *origin_key);

/* One call made into the capture, compared with every live candidate.
 * Those it does not match are dropped and their graphs appended to
 * dropped[] (*ndropped of them; room for MATCH_MAX_CANDIDATES) for the
 * caller to give back; `why` says why the last one went. *needs_node is
 * set when a live candidate would take a new memset or copy address,
 * which the driver checks only in a node. Returns the live count. */
int match_call(struct match_set *m, enum drv_id id, const union drv_args *a,
               struct graph_rec **dropped, int *ndropped, int *needs_node, char *why, size_t len);

/* The live candidate to bind to, or -1: with `whole`, only one whose
 * recording the calls made so far complete; then the fewest changed
 * values, then `preferred` (a signature: the stream's own guess), then
 * the one listed first (newest). */
int match_choose(const struct match_set *m, int whole, uint64_t preferred);

/* Stops comparing; every candidate but `keep` (-1: none) goes into
 * dropped[] (*ndropped). The kept candidate's graph is returned. */
struct graph_rec *match_finish(struct match_set *m, int keep, struct graph_rec **dropped,
                               int *ndropped);

#endif
