/*
 * capture_observed.h - the captures recap only watches (prefix capture_):
 * begun and ended by the driver, counted and logged by recap from a slot.
 *
 * Owns: a watched capture's slot from its begin to its end, and its line
 * in the log. Must never: take a capture record (struct capture) or
 * change what the driver answers.
 */
#ifndef RECAP_CAPTURE_OBSERVED_H
#define RECAP_CAPTURE_OBSERVED_H

#include "shim/state/capture_table.h"
#include "shim/state/observed.h"
#include "shim/state/sites.h"

/* A capture at a site observed only (or whose mode is off: not even
 * watched; or on a stream already capturing: left to the driver to
 * refuse). Returns 1 with *result the driver's answer, or 0, having done
 * nothing, when the slots are full: the capture table takes it then. */
int capture_begin_observed(enum drv_id id, struct stream_ref s, CUstreamCaptureMode mode,
                           struct site *site, CUresult *result);

/* The end of a capture watched from `slot`: the driver's answer, then the
 * node count and the log. */
CUresult capture_end_observed(enum drv_id id, struct stream_ref s, CUgraph *phGraph, int slot,
                              const struct observed_capture *o);

#endif
