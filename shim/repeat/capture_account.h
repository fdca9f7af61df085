/*
 * capture_account.h - what an ended capture leaves behind (prefix
 * capture_): its graph's record, the site's history and counts, the log.
 *
 * Owns: turning a settled capture into the cache's graph record (shape,
 * signature, the recording recap repeats it by), the site's shape history
 * and counters, and the capture's event. Must never: change a capture's
 * path or call into a capture (shim/repeat/capture.h decides; this module only
 * writes down what happened). Called with cap->lock held.
 */
#ifndef RECAP_CAPTURE_ACCOUNT_H
#define RECAP_CAPTURE_ACCOUNT_H

#include "shim/state/capture_table.h"
#include "shim/state/events.h"

/* After a successful capture: what the graph looks like, whether this
 * site's journals can be trusted, and the record the program's graph gets
 * (NULL where the cache does not track it). *nodes: its node count, or -1. */
struct graph_rec *capture_account_graph(struct capture *cap, CUgraph graph, long *nodes);

/* The recapture (or recording) ended well: its graph goes back to the
 * program with its new parameters. */
void capture_account_recapture(struct capture *cap);

/* Counts an ended capture into its site and logs it. */
void capture_report_end(struct capture *cap, CUresult r, long nodes);

/* Counts an ended capture into its site's totals and logs it (sampled):
 * *rep is complete but for `write`; `path` is the one counted;
 * was_active: it was counted as active at its begin. */
void capture_count(struct site *site, struct capture_report *rep, enum capture_path path,
                   int began_by_recap, int was_active);

#endif
