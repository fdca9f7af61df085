/*
 * self_record.h - a repeat capture recorded by recap instead of the driver
 * (module prefix self_record_).
 *
 * Owns: comparing each call made into a capture that recap records itself
 * with the call that put the matching node into a cached graph (the
 * graph's "recording": the journal of the capture that last set its
 * parameters, with the node each call created), applying the differences
 * to that graph's nodes as they come, and the dependency nodes each stream
 * of such a capture would now have, so capture queries can be answered as
 * the driver would. The rule is the 13.3 driver's, widened where an
 * executable graph's setter allows it: the same function, launch
 * attributes, sizes, streams and events in the same order make a call
 * eligible, whatever its other arguments - a non-cooperative launch's
 * grid, block and shared memory included; anything else is a switch to a
 * driver capture, which capture.c performs.
 *
 * Must never: call into a capture or begin one (it works on graph nodes
 * only), keep a pointer into the program's argument arrays, or leave the
 * recording describing parameters its graph does not hold (a call is
 * written into the recording only once its node holds the new values).
 */
#ifndef RECAP_SELF_RECORD_H
#define RECAP_SELF_RECORD_H

#include <stddef.h>

#include "shim/state/capture_table.h"
#include "shim/state/journal.h"

/* Dependency nodes followed per stream or event; more make a query switch. */
#define SELF_RECORD_MAX_DEPS 8

struct self_deps {
    CUgraphNode node[SELF_RECORD_MAX_DEPS];
    int n;                          /* -1: more than recap follows */
};

struct self_record {
    struct journal *rec;            /* the graph's recording; updated in place */
    size_t next;                    /* index of the call expected next */
    /* Streams and events by order of first appearance, now and in the
     * recording: the i-th of each side must play the same part. */
    const void *cur_stream[CAPTURE_MAX_STREAMS], *rec_stream[CAPTURE_MAX_STREAMS];
    struct self_deps stream_deps[CAPTURE_MAX_STREAMS];
    int nstreams;
    CUevent cur_event[CAPTURE_MAX_EVENTS], rec_event[CAPTURE_MAX_EVENTS];
    struct self_deps event_deps[CAPTURE_MAX_EVENTS];
    int event_recorded[CAPTURE_MAX_EVENTS];
    int nevents;
    /* Stale marks made by this capture, counted into the recording at
     * self_record_stop; whether it listed the recording as stale. */
    size_t newly_stale;
    int listed;
};

/* Default edges, as many as a stream's dependencies can be: what a capture
 * query reports as their edge data (measured: zeros, not NULL). */
extern const CUgraphEdgeData self_record_default_edges[SELF_RECORD_MAX_DEPS];

enum self_verdict {
    SELF_SAME,          /* nothing to change */
    SELF_CHANGED,       /* a node took new parameters: *changed says which */
    SELF_SWITCH,        /* recap cannot record this call: why says so */
    SELF_REFUSED        /* the driver refused writing the call into the graph
                         * (self_record_call only): why says so */
};

/* Starts comparing against `rec`, whose capture began on the stream
 * with key rec->origin_key; this capture began on `origin_key`. */
void self_record_start(struct self_record *s, struct journal *rec, const void *origin_key);

/* One call made into the capture. On SELF_CHANGED the graph node already
 * holds the new parameters and the recording the new call. */
enum self_verdict self_record_call(struct self_record *s, enum drv_id id,
                                   const union drv_args *a, struct changed_node *changed,
                                   char *why, size_t len);

/* The same comparison, with nothing written into the recording or its
 * graph: for a capture still choosing among candidates (shim/repeat/match.h).
 * *needs_node: the call changed a memset's or copy's address or value,
 * which the driver checks only when a node takes it. */
enum self_verdict self_record_match(struct self_record *s, enum drv_id id,
                                    const union drv_args *a, int *needs_node, char *why,
                                    size_t len);

/* What a recording requires of a capture to match it - entry points,
 * functions, launch attributes, sizes, the part each stream and event
 * plays - hashed: two recordings of one signature match the same calls.
 * Never 0. */
uint64_t self_record_signature(const struct journal *rec);

/* The capture is over: the recording may be brought up to date again. */
void self_record_stop(struct self_record *s);

/* The capture wrote its calls so far into the recording and stops there
 * (a switch): the calls it did not make are renamed to its streams and
 * events, so the recording stays one capture's throughout. At the end of
 * a whole capture only the origin changes (every call was written). */
void self_record_rename_rest(struct self_record *s);

/* Whether the calls so far are the whole recording (checked at end). */
int self_record_complete(const struct self_record *s, char *why, size_t len);

/* What a stream of the capture depends on now; NULL when recap does not
 * know exactly (the caller then switches), else the nodes (*n of them). */
const CUgraphNode *self_record_deps(const struct self_record *s, const void *stream_key,
                                    size_t *n);

/* The node the last call on `stream` created in a driver capture being
 * learned, as the driver reports it (*node NULL if it cannot say); the
 * query's result. */
CUresult self_record_learn_node(CUstream stream, CUgraphNode *node);

/* --- graphs behind their recording (kernel and host-function arguments) --- */

void self_record_flush_all(void);

/* Before the program reads, edits or wholly copies any graph: every graph
 * it holds gets the arguments its recording has. One load when none is
 * behind. */
static inline void self_record_graphs_current(void)
{
    if (__builtin_expect(__atomic_load_n(&journal_stale_count, __ATOMIC_ACQUIRE) != 0, 0))
        self_record_flush_all();
}

/* Brings one recording's graph up to date; the first failing setter's
 * result (each is tried twice and logged; a node still failing stays
 * marked, for the next attempt). */
CUresult self_record_flush(struct journal *rec);

/* Writes a changed kernel or host-function call's arguments from the
 * recording straight into an executable graph's node (what the graph node
 * would hold once brought up to date). Caller holds journal_stale_lock;
 * *call names the driver call on failure. */
CUresult self_record_apply_to_exec(CUgraphExec exec, struct journal_op *op, const char **call);

#endif
