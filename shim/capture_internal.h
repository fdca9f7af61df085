/*
 * capture_internal.h - what the capture engine's files share: capture.c
 * (begin, calls, end, the switch to a driver capture), capture_recorded.c
 * (captures recap records itself) and capture_guard.c (calls a driver
 * capture would refuse). Part of the capture module: nothing outside the
 * three includes it. Every function here is called with cap->lock held.
 */
#ifndef RECAP_CAPTURE_INTERNAL_H
#define RECAP_CAPTURE_INTERNAL_H

#include "shim/capture_table.h"
#include "shim/driver_api.h"

/* --- capture.c ----------------------------------------------------------- */

/* Copies a reason (truncated to cap->reason's size). */
void capture_set_reason(struct capture *cap, const char *text);

/* Whether this thread may end the capture and begin its replacement. */
int capture_may_end_here(const struct capture *cap);

/* Turns a recapture (or a capture recap records) into a plain driver
 * capture holding the same calls, now or - where this thread may not end
 * it - at the capturing thread's next call (cap->fallback_pending). */
void capture_fall_back(struct capture *cap, const char *reason);

/* recap cannot give what a driver capture would: the capture is
 * invalidated (the program gets CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). */
void capture_invalidate(struct capture *cap, const char *why);

/* A call made into the capture, whatever recap does with it. */
CUresult capture_op(struct capture *cap, enum drv_id id, union drv_args *a);

/* The streams a call joins to the capture and the events it records. */
void capture_note_membership(struct capture *cap, enum drv_id id, const union drv_args *a);

/* Appends to the capture's change list. */
void capture_push_change(struct capture *cap, struct changed_node changed);

/* Empties the change list and its counts: the nodes they named belong to
 * a graph the capture no longer records into. */
void capture_forget_changes(struct capture *cap);

/* The recapture (or recording) ended well: its graph goes back to the
 * program with its new parameters. */
void capture_account_recapture(struct capture *cap);

/* Counts the ended capture into its site and logs it. */
void capture_report_end(struct capture *cap, CUresult r, long nodes);

/* The arguments of a capture query, whichever form. */
struct capture_query {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
};

struct capture_query capture_query_of(enum drv_id id, union drv_args *a);

/* --- capture_recorded.c ----------------------------------------------------- */

/* Whether recap records this site's repeat captures itself. */
int recorded_possible(const struct site *site);

/* Begins a capture recap records itself, if the site keeps graphs it may
 * repeat: returns 1 (registered, *result the begin's answer), or 0 with
 * cap->reason set when a driver capture must begin instead. */
int recorded_begin(struct capture *cap, CUresult *result);

/* A call into a capture recap records (or answers, once invalidated). */
CUresult recorded_op(struct capture *cap, enum drv_id id, union drv_args *a);

/* A capture query while no driver capture exists. */
CUresult recorded_query(struct capture *cap, enum drv_id id, union drv_args *a);

/* The capture recap recorded becomes a driver capture to be: its calls so
 * far become the journal to replay; the graphs it looked at go back to
 * the site. Returns 0, or 1 when it resumed as a driver capture in a graph
 * the program holds (nothing left to replay). */
int recorded_switch(struct capture *cap);

/* The end of a capture recap records: 1 with *result when that is the
 * program's answer, 0 when it switched and the driver must end it. */
int recorded_end(struct capture *cap, CUgraph *phGraph, CUresult *result);

/* The node the last call of a driver capture being learned made. */
void recorded_learn_node(struct capture *cap, enum drv_id id, const union drv_args *a);

#endif
