/*
 * shape.c - graph census and signature.
 *
 * On a driver without the recapture API only counts are needed (two
 * driver calls); where recaptures happen the node types also say whether a
 * site can be recaptured at all and make the signature strict enough that
 * a predicted graph really has the topology of the next capture.
 */
#include <stdlib.h>

#include "shim/base/driver.h"
#include "shim/base/shape.h"

int shape_census(CUgraph graph, int with_types, struct graph_census *out)
{
    size_t n = 0, e = 0;

    *out = (struct graph_census){ .nodes = 0 };
    if ((out->error = DRV_REAL(cuGraphGetNodes)(graph, NULL, &n)) != CUDA_SUCCESS) {
        out->failed_call = "cuGraphGetNodes";
        return -1;
    }
    out->nodes = (long)n;
    if (!with_types || n == 0) {
        /* Without recapture the node count is all a signature needs (a
         * mismatch costs one failed update); the edge query walks the
         * whole graph on the real driver, milliseconds at 5000 nodes. */
        out->typed = with_types;
        return 0;
    }
    if ((out->error = DRV_REAL(cuGraphGetEdges_v2)(graph, NULL, NULL, NULL, &e)) != CUDA_SUCCESS) {
        out->failed_call = "cuGraphGetEdges_v2";
        return -1;
    }
    out->edges = (long)e;

    CUgraphNode *nodes = malloc(n * sizeof *nodes);
    if (!nodes) {
        out->failed_call = "malloc";
        out->error = CUDA_ERROR_OUT_OF_MEMORY;
        return -1;
    }
    size_t got = n;
    int rc = -1;
    out->error = DRV_REAL(cuGraphGetNodes)(graph, nodes, &got);
    if (out->error != CUDA_SUCCESS || got != n) {
        out->failed_call = "cuGraphGetNodes";
    } else {
        uint64_t h = 1469598103934665603ull;
        rc = 0;
        for (size_t i = 0; i < n; i++) {
            CUgraphNodeType t;
            if ((out->error = DRV_REAL(cuGraphNodeGetType)(nodes[i], &t)) != CUDA_SUCCESS) {
                out->failed_call = "cuGraphNodeGetType";
                rc = -1;
                break;
            }
            h = (h ^ (uint64_t)t) * 1099511628211ull;
            if ((unsigned)t < SHAPE_NODE_TYPES)
                out->by_type[t]++;
            if (!out->unreplayable && !shape_type_replayable(t)) {
                out->unreplayable = 1;
                out->first_unreplayable = t;
            }
        }
        out->type_hash = h;
        out->typed = rc == 0;
    }
    free(nodes);
    return rc;
}

uint64_t shape_in_context(const struct graph_census *c, CUcontext ctx)
{
    return shape_signature(c) ^ ((uint64_t)(uintptr_t)ctx * 0x9e3779b97f4a7c15ull);
}

uint64_t shape_signature(const struct graph_census *c)
{
    uint64_t h = 0x243f6a8885a308d3ull;
    h = (h ^ (uint64_t)c->nodes) * 0x100000001b3ull;
    h = (h ^ (uint64_t)c->edges) * 0x100000001b3ull;
    if (c->typed)
        h = (h ^ c->type_hash) * 0x100000001b3ull;
    h ^= h >> 29;
    return h ? h : 1;
}

const char *shape_node_type_name(CUgraphNodeType type)
{
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_HOST: return "host";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "child graph";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL: return "external semaphore signal";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: return "external semaphore wait";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "memory allocation";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "memory free";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "batch memory operation";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "unknown";
    }
}

int shape_type_replayable(CUgraphNodeType type)
{
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return 1;
    default:
        return 0;
    }
}
