/*
 * graph_copy.h - a graph recap copies from one the program keeps (module
 * prefix graph_copy_).
 *
 * Owns: making, for a capture recap records itself, a graph to record
 * into where the program destroyed none: a clone of the newest graph it
 * keeps at the site (the one its calls matched, where several kinds are
 * kept: shim/repeat/capture_recorded.c compares them first), with that
 * graph's recording mapped onto the clone's nodes. A program that keeps
 * every graph it captures (PyTorch after CUDAGraph.enable_debug_mode(),
 * anywhere in the process) otherwise never releases one, and every
 * capture would be the driver's.
 *
 * Must never: touch the program's graph beyond reading it (its pending
 * arguments are brought up to date first, as for any read), or hand out a
 * copy whose recording does not describe it node for node.
 */
#ifndef RECAP_GRAPH_COPY_H
#define RECAP_GRAPH_COPY_H

#include "shim/state/cache.h"

struct site;

/* A TAKEN copy of the site's newest held graph (of signature `prefer`
 * where one of the last few kept has it; with none, the kind due next
 * where kinds take turns) when the program kept graphs alike
 * (cache_graph_pin_held), of this signature (0: any): for a
 * capture recap records (`recorded`: the copy gets the original's
 * recording, mapped) or for the driver to recapture into. NULL when there
 * is none to copy or a driver call failed (logged); then *why says why
 * where the program keeps a graph at the site (NULL where it keeps none). */
struct graph_rec *graph_copy_of_held(struct site *site, unsigned long epoch, uint64_t signature,
                                     uint64_t prefer, int recorded, const char **why);

/* The same for a graph already pinned (cache_graph_pin_held or
 * cache_graph_pin_held_kinds), which it unpins. */
struct graph_rec *graph_copy_pinned(struct graph_rec *held, unsigned long epoch, int recorded,
                                    const char **why);

#endif
