/*
 * graph_copy.c - a copy of a graph the program keeps, to record into.
 *
 * cuGraphClone copies the graph; cuGraphNodeFindInClone names, for each
 * node the recording knows, the clone's node that plays its part. The
 * recording is copied whole (argument data included), so the copy and the
 * original are recorded into independently from here on.
 */
#include <stdlib.h>

#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/repeat/graph_copy.h"
#include "shim/state/journal.h"
#include "shim/repeat/self_record.h"
#include "shim/state/user_objects.h"

/* Gives the nodes of a fresh clone parameters of their own: each kernel,
 * memset and memcpy node is set to what it holds, before anything else
 * reads or writes the clone. On driver 580 (CUDA 13.0) a clone written in
 * some of its kernel nodes later crashed the driver (SIGSEGV in
 * cuGraphInstantiateWithFlags or cuGraphExecUpdate_v2, of that clone or of
 * another clone of the same graph): PyTorch's optimizer graphs crashed in
 * every one of about twenty runs with copies on, and in none of three with
 * this step (docs/measurements.md, round 27). The driver's side of it
 * shows without recap (tests/gpu/probe_clone_write.py): once a clone is
 * written, instantiating the graph it was cloned from crashes, with this
 * step or without; that is why copies stay off by default.
 *
 * A kernel node that cannot be set fails the copy. A memset or memcpy
 * node whose memory is gone (a kept graph's pool often is) is refused by
 * the driver and left as cloned: the recording rewrites it if it changes.
 * Returns the first failing call's result, naming it in *call. */
static CUresult detach_clone_nodes(CUgraph clone, const char **call)
{
    size_t n = 0;
    *call = "cuGraphGetNodes";
    CUresult r = DRV_REAL(cuGraphGetNodes)(clone, NULL, &n);
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    CUgraphNode *nodes = malloc(n * sizeof *nodes);
    if (!nodes) {
        *call = "recap's list of the copy's nodes (out of memory)";
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = DRV_REAL(cuGraphGetNodes)(clone, nodes, &n);
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        CUgraphNodeType type;
        *call = "cuGraphNodeGetType";
        if ((r = DRV_REAL(cuGraphNodeGetType)(nodes[i], &type)) != CUDA_SUCCESS)
            break;
        if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
            CUDA_KERNEL_NODE_PARAMS p;
            *call = "cuGraphKernelNodeGetParams_v2";
            if ((r = DRV_REAL(cuGraphKernelNodeGetParams_v2)(nodes[i], &p)) == CUDA_SUCCESS) {
                *call = "cuGraphKernelNodeSetParams_v2";
                r = DRV_REAL(cuGraphKernelNodeSetParams_v2)(nodes[i], &p);
            }
        } else if (type == CU_GRAPH_NODE_TYPE_MEMSET) {
            CUDA_MEMSET_NODE_PARAMS p;
            if (DRV_REAL(cuGraphMemsetNodeGetParams)(nodes[i], &p) == CUDA_SUCCESS)
                (void)DRV_REAL(cuGraphMemsetNodeSetParams)(nodes[i], &p);
        } else if (type == CU_GRAPH_NODE_TYPE_MEMCPY) {
            CUDA_MEMCPY3D p;
            if (DRV_REAL(cuGraphMemcpyNodeGetParams)(nodes[i], &p) == CUDA_SUCCESS)
                (void)DRV_REAL(cuGraphMemcpyNodeSetParams)(nodes[i], &p);
        }
    }
    free(nodes);
    return r;
}

/* The recording of `original` for its clone: every node mapped. Returns
 * NULL on failure, with *call and *r saying which driver call failed (NULL
 * call: memory ran out). */
static struct journal *recording_for_clone(const struct journal *original, CUgraph clone,
                                           const char **call, CUresult *r)
{
    struct journal *rec = malloc(sizeof *rec);
    *call = NULL;
    *r = CUDA_SUCCESS;
    if (!rec)
        return NULL;
    journal_stale_lock();
    int copied = journal_copy(rec, original);
    journal_stale_unlock();
    if (copied != 0) {
        free(rec);
        return NULL;
    }
    for (size_t i = 0; i < rec->nops; i++) {
        struct journal_op *op = &rec->ops[i];
        if (!op->creates_node)
            continue;
        *r = DRV_REAL(cuGraphNodeFindInClone)(&op->node, op->node, clone);
        if (*r != CUDA_SUCCESS) {
            *call = "cuGraphNodeFindInClone";
            journal_free(rec);
            free(rec);
            return NULL;
        }
    }
    return rec;
}

struct graph_rec *graph_copy_of_held(struct site *site, unsigned long epoch, uint64_t signature,
                                     uint64_t prefer, int recorded, const char **why)
{
    struct graph_rec *held = cache_graph_pin_held(site, epoch, signature, prefer, recorded, why);
    return held ? graph_copy_pinned(held, epoch, recorded, why) : NULL;
}

struct graph_rec *graph_copy_pinned(struct graph_rec *held, unsigned long epoch, int recorded,
                                    const char **why)
{
    struct site *site = held->entry.site;
    CUgraph original = graph_rec_graph(held), clone = NULL;
    struct journal *recording = NULL;
    const char *call = "cuGraphClone";
    CUresult r = CUDA_SUCCESS;
    /* A clone holds references to the original's user objects, which the
     * program would never see released: such graphs are not copied. */
    if (uobj_graph_has(original)) {
        *why = "the graph the program keeps here holds user objects: not copied";
        return cache_graph_unpin_held(held, NULL, NULL, epoch);
    }
    /* The pending arguments of a graph recap recorded go into its nodes
     * first: the clone copies nodes, not the recording. */
    r = self_record_flush(held->recording);
    if (r != CUDA_SUCCESS)
        call = "a setter bringing the graph up to date";
    else
        r = DRV_REAL(cuGraphClone)(&clone, original);
    if (r == CUDA_SUCCESS && (r = detach_clone_nodes(clone, &call)) != CUDA_SUCCESS) {
        DRV_REAL(cuGraphDestroy)(clone);
        clone = NULL;
    }
    if (r == CUDA_SUCCESS && recorded) {
        recording = recording_for_clone(held->recording, clone, &call, &r);
        if (!recording) {
            if (!call)
                call = "recap's copy of the recording (out of memory)";
            DRV_REAL(cuGraphDestroy)(clone);
            clone = NULL;
        }
    }
    if (!clone) {
        event_own_call_failed(site, call, r, "the capture is left to the driver");
        *why = "recap's copy of the graph the program keeps here failed (logged)";
    }
    return cache_graph_unpin_held(held, clone, recording, epoch);
}
