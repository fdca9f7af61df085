/*
 * capture_driver.c - the driver calls recap makes on a capture's streams:
 * a plain begin and end, the capture's id, emptying a graph the program
 * holds to capture into it again, and a journal's replay that notes each
 * call's node.
 *
 * Each is one step that shim/repeat/capture.c takes in a transition; none changes
 * the capture's path or decides what comes next.
 */
#include "shim/repeat/capture_driver.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/repeat/self_record.h"

CUresult capture_driver_begin(enum drv_id id, CUstream stream, CUstreamCaptureMode mode)
{
    switch (id) {
    case DRV_cuStreamBeginCapture:
        return DRV_REAL(cuStreamBeginCapture)(stream);
    case DRV_cuStreamBeginCapture_ptsz:
        return DRV_REAL(cuStreamBeginCapture_ptsz)(stream);
    default:
        return ((drv_fn_cuStreamBeginCapture_v2)drv_real_fn[id])(stream, mode);
    }
}

CUresult capture_driver_begin_unseen(enum drv_id id, CUstream stream, CUstreamCaptureMode mode)
{
    ctab_unseen_began();
    CUresult r = capture_driver_begin(id, stream, mode);
    if (r != CUDA_SUCCESS)
        ctab_unseen_ended();
    return r;
}

CUresult capture_driver_end(enum drv_id id, CUstream stream, CUgraph *graph)
{
    return ((drv_fn_cuStreamEndCapture)drv_real_fn[id])(stream, graph);
}

/* The stream's capture status; where the driver cannot tell, `fallback`,
 * the failure logged against `site` with what recap takes it to mean. */
static CUstreamCaptureStatus stream_status(CUstream stream, struct site *site,
                                           CUstreamCaptureStatus fallback, const char *meaning)
{
    CUstreamCaptureStatus status = fallback;
    CUresult r = DRV_REAL(cuStreamIsCapturing)(stream, &status);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(site, "cuStreamIsCapturing", r, meaning);
        status = fallback;
    }
    return status;
}

int capture_driver_still_capturing(CUstream stream, struct site *site)
{
    return stream_status(stream, site, CU_STREAM_CAPTURE_STATUS_NONE,
                         "the capture is taken to have ended") != CU_STREAM_CAPTURE_STATUS_NONE;
}

int capture_driver_invalidated(CUstream stream, struct site *site)
{
    return stream_status(stream, site, CU_STREAM_CAPTURE_STATUS_ACTIVE,
                         "the capture is taken to be still valid") ==
           CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

cuuint64_t capture_driver_id(struct capture *cap)
{
    CUstreamCaptureStatus status;
    cuuint64_t id = 0;
    CUresult r = DRV_REAL(cuStreamGetCaptureInfo_v3)(cap->origin.real, &status, &id, NULL, NULL,
                                                     NULL, NULL);
    if (r != CUDA_SUCCESS) {
        event_own_call_failed(cap->site, "cuStreamGetCaptureInfo_v3", r,
                              "after a fallback the program may see a new capture id");
        return 0;
    }
    return id;
}

/* Asks the driver which node `op` made in the capture's graph, where it
 * makes one; a failure leaves the graph unrecorded against, and is logged. */
static void learn_node(struct capture *cap, struct journal_op *op)
{
    if (!op->creates_node)
        return;
    CUresult r = self_record_learn_node(
        ctab_stream_ref(op->id, drv_args_stream(op->id, &op->args)).real, &op->node);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(cap->site, "cuStreamGetCaptureInfo_v3", r,
                              "this capture's graph is not recorded against");
}

void capture_driver_learn_last_node(struct capture *cap, enum drv_id id)
{
    struct journal *j = &cap->journal;
    if (j->replayable && j->nops > 0 && j->ops[j->nops - 1].id == id)
        learn_node(cap, &j->ops[j->nops - 1]);
}

CUresult capture_driver_replay_learning(struct capture *cap, size_t *failed_at)
{
    struct journal *j = &cap->journal;
    for (size_t i = 0; i < j->nops; i++) {
        struct journal_op *op = &j->ops[i];
        CUresult r = drv_invoke(op->id, &op->args);
        if (r != CUDA_SUCCESS) {
            *failed_at = i;
            return r;
        }
        learn_node(cap, op);
    }
    return CUDA_SUCCESS;
}

/* A capture recap recorded into a graph the program was handed (a query
 * lent it) goes on as a driver capture into that very graph, emptied
 * first: the replay puts back the calls made so far, so the graph holds
 * what a driver capture's would, and the handle the program has stays
 * the capture's. Measured on driver 580: nodes destroyed, the capture
 * resumes in the graph (tests/standin/READINGS.md). */
CUresult capture_driver_begin_in_lent_graph(struct capture *cap)
{
    CUgraph graph = cap->lent_graph;
    CUgraphNode node;
    size_t n = 1, left = 0;
    CUresult r;
    /* One node at a time: no buffer, and the graph is small or this
     * capture is about to cost a replay of every call anyway. */
    while ((r = DRV_REAL(cuGraphGetNodes)(graph, &node, &n)) == CUDA_SUCCESS && n > 0) {
        if (DRV_REAL(cuGraphDestroyNode)(node) != CUDA_SUCCESS) {
            left = n;
            break;
        }
        n = 1;
    }
    if (r != CUDA_SUCCESS || left)
        event_error(cap->site, "the graph the program holds could not be emptied (%s): it keeps "
                               "nodes of the capture recap recorded",
                    drv_result_name(r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN));
    return DRV_REAL(cuStreamBeginCaptureToGraph)(cap->origin.real, graph, NULL, NULL, 0, cap->mode);
}
