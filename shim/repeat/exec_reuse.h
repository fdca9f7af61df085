/*
 * exec_reuse.h - instantiation as an update of a released executable graph
 * (module prefix exec_).
 *
 * Owns: the cuGraphInstantiate* hook: for a graph captured at an enabled
 * site, take a released executable graph of the same site, flags and shape
 * and bring it up to date - nothing to do when a recapture changed nothing,
 * only the changed nodes when few changed or recap recorded them
 * ("delta"), else a whole cuGraphExecUpdate - instead of instantiating; a
 * failed update destroys that executable graph and instantiates. Must
 * never: hand the program an executable graph whose parameters differ from
 * its graph's.
 */
#ifndef RECAP_EXEC_REUSE_H
#define RECAP_EXEC_REUSE_H

#include "shim/base/driver_api.h"

/* Apply only the changed nodes while those that must be read from the
 * graph are at most this percentage of its nodes; above it one
 * whole-graph update is cheaper. Measured on an H200, driver 580.159
 * (13.0), by scripts/bench-delta: a per-node get+set costs 0.25-0.6 us, a
 * whole cuGraphExecUpdate 4 us at 100 nodes and 70-130 us at 1000;
 * per-node stops paying at 12.7% of 100 nodes and 32.7% of 1000. The
 * smaller crossover, rounded down, is kept. (Nodes recap recorded itself
 * need no read and go per node at any share: exec_reuse.c.) */
#define EXEC_DELTA_MAX_PERCENT 12

/* One instantiation request, whichever entry point it came through. */
struct inst_request {
    enum drv_id id;
    CUgraphExec *ph_exec;
    CUgraph graph;
    unsigned long long flags;                /* cuGraphInstantiateWithFlags */
    CUDA_GRAPH_INSTANTIATE_PARAMS *params;   /* cuGraphInstantiateWithParams */
    CUgraphNode *error_node;                 /* legacy cuGraphInstantiate */
    char *log;
    size_t log_size;
};

CUresult exec_on_instantiate(const struct inst_request *rq);

#endif
