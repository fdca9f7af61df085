/*
 * libfakenccl.c - what NCCL does with captured collectives, reduced to the
 * part recap can get wrong: during a capture, a collective attaches a user
 * object to the capturing graph (cuStreamGetCaptureInfo, cuUserObjectCreate,
 * cuGraphRetainUserObject with MOVE) whose destructor gives the plan back;
 * tearing the communicator down needs every such destructor to have run
 * (real NCCL waits for them, forever; this one reports how many are left
 * and fails).
 */
#include <stdio.h>

#include <cuda.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int fake_nccl_collective(CUstream stream, CUdeviceptr buf, unsigned value, size_t n);
EXPORT int fake_nccl_live_plans(void);
EXPORT int ncclCommFinalize(void *comm);
EXPORT int ncclCommDestroy(void *comm);
EXPORT int ncclCommAbort(void *comm);

static int live_plans;

static void plan_destructor(void *plan)
{
    (void)plan;
    __atomic_sub_fetch(&live_plans, 1, __ATOMIC_ACQ_REL);
}

int fake_nccl_collective(CUstream stream, CUdeviceptr buf, unsigned value, size_t n)
{
    CUstreamCaptureStatus status;
    CUgraph graph = NULL;
    CUresult rc = cuStreamGetCaptureInfo(stream, &status, NULL, &graph, NULL, NULL, NULL);
    if (rc != CUDA_SUCCESS)
        return (int)rc;
    rc = cuMemsetD32Async(buf, value, n, stream);
    if (rc != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return (int)rc;
    CUuserObject plan;
    rc = cuUserObjectCreate(&plan, NULL, plan_destructor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
    if (rc != CUDA_SUCCESS)
        return (int)rc;
    __atomic_add_fetch(&live_plans, 1, __ATOMIC_ACQ_REL);
    return (int)cuGraphRetainUserObject(graph, plan, 1, CU_GRAPH_USER_OBJECT_MOVE);
}

int fake_nccl_live_plans(void)
{
    return __atomic_load_n(&live_plans, __ATOMIC_ACQUIRE);
}

/* ncclInternalError (3) while a graph still holds a plan: real NCCL would
 * hang here instead. */
static int teardown(const char *call)
{
    int live = fake_nccl_live_plans();
    printf("%s: %d plan(s) still held by graphs\n", call, live);
    return live == 0 ? 0 : 3;
}

int ncclCommFinalize(void *comm)
{
    (void)comm;
    return teardown("ncclCommFinalize");
}

int ncclCommDestroy(void *comm)
{
    (void)comm;
    return teardown("ncclCommDestroy");
}

int ncclCommAbort(void *comm)
{
    (void)comm;
    return teardown("ncclCommAbort");
}
