/*
 * capture_driver.h - the driver calls recap makes on a capture's streams
 * (prefix capture_driver_).
 *
 * Owns: beginning and ending a driver capture for recap, asking its id,
 * emptying a graph the program holds so a capture resumes in it, and
 * replaying a journal while learning each call's node. A failed call of
 * recap's own is logged here. Must never: change a capture's path, reason
 * or state (shim/repeat/capture.h does, with what these return).
 */
#ifndef RECAP_CAPTURE_DRIVER_H
#define RECAP_CAPTURE_DRIVER_H

#include <stddef.h>

#include "shim/state/capture_table.h"
#include "shim/base/driver_api.h"

/* A begin of the program's, made as it asked (v1 forms have no mode). */
CUresult capture_driver_begin(enum drv_id id, CUstream stream, CUstreamCaptureMode mode);

/* The same for a capture recap holds no record or slot of: counted as
 * running unseen until its end (capture_table.h: ctab_unseen_began). */
CUresult capture_driver_begin_unseen(enum drv_id id, CUstream stream, CUstreamCaptureMode mode);

/* An end, by the program's entry point `id`. */
CUresult capture_driver_end(enum drv_id id, CUstream stream, CUgraph *graph);

/* Whether the stream still captures after an end the driver refused (a
 * failed question counts as ended, logged against `site`). */
int capture_driver_still_capturing(CUstream stream, struct site *site);

/* Whether the driver holds the stream's capture as invalidated (a failed
 * question counts as not: logged against `site`). */
int capture_driver_invalidated(CUstream stream, struct site *site);

/* The driver's id of the capture on cap's origin stream, 0 if unknown. */
cuuint64_t capture_driver_id(struct capture *cap);

/* The node the last call of a driver capture being learned made (the
 * journal's last call, if it is call `id`), asked of the driver. */
void capture_driver_learn_last_node(struct capture *cap, enum drv_id id);

/* Replays cap's journal into the driver capture now on its streams,
 * noting the node of each call, so the graph can be recorded against
 * later. Returns the first failure (*failed_at its call). */
CUresult capture_driver_replay_learning(struct capture *cap, size_t *failed_at);

/* Empties the graph lent to the program (cap->lent_graph) and begins a
 * driver capture into it on cap's origin stream: the replay that follows
 * puts back the calls made so far, and the program's handle stays the
 * capture's graph. Returns the begin's result. */
CUresult capture_driver_begin_in_lent_graph(struct capture *cap);

#endif
