/*
 * shape.h - what a graph looks like, measured cheaply (module prefix shape_).
 *
 * Owns: the census of a graph (node and edge counts, node types) and the
 * signature derived from it, which sites use to predict and to match a
 * capture with a released graph or executable graph. Must never: keep the
 * node arrays it reads, or be called while a capture is being recorded
 * into the graph it inspects.
 */
#ifndef RECAP_SHAPE_H
#define RECAP_SHAPE_H

#include <stdint.h>

#include "shim/base/cuda_compat.h"

#define SHAPE_NODE_TYPES 32

struct graph_census {
    long nodes;
    long edges;
    int typed;                            /* by_type and type_hash are filled */
    uint64_t type_hash;                   /* node types in graph order */
    unsigned long by_type[SHAPE_NODE_TYPES];
    int unreplayable;                     /* holds a type recap cannot replay */
    CUgraphNodeType first_unreplayable;
    const char *failed_call;              /* after an error: which query */
    CUresult error;
};

/* Counts nodes; with `with_types` also edges, and every node's type (about
 * 0.03 us a node). Returns 0, or -1 if the driver refused (then
 * out->failed_call and out->error say which query and why) or memory ran
 * out (error CUDA_ERROR_OUT_OF_MEMORY, failed_call "malloc"). */
int shape_census(CUgraph graph, int with_types, struct graph_census *out);

/* The signature of a census; never 0. */
uint64_t shape_signature(const struct graph_census *c);

/* The signature of a graph of that census in context ctx (NULL: unknown):
 * graphs of other contexts (devices) never match. */
uint64_t shape_in_context(const struct graph_census *c, CUcontext ctx);

/* "kernel", "memcpy", ..., for messages. */
const char *shape_node_type_name(CUgraphNodeType type);

/* Whether a journal can rebuild a node of this type faithfully. */
int shape_type_replayable(CUgraphNodeType type);

#endif
