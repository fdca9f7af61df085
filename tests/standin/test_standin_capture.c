/*
 * test_standin_capture.c - the stream-capture model: capture gives the
 * eager results, and the documented rules (legacy stream, threads and modes,
 * fork and join, isolation, invalidation, queries) hold.
 */
#include "test_standin_common.h"

#include <pthread.h>

/* fill(buf, 5); add(buf, 2); copy buf -> buf2; memset buf 8 bytes to 0x01 */
static void work(CUstream s)
{
    CK(launch_int(fx.fill, s, fx.buf, 5));
    CK(launch_int(fx.add, s, fx.buf, 2));
    CK(cuMemcpyDtoDAsync(fx.buf2, fx.buf, N * sizeof(int), s));
    CK(cuMemsetD8Async(fx.buf, 1, 8, s));
}

static CUgraph capture(CUstream s, CUstreamCaptureMode mode, void (*body)(CUstream))
{
    CUgraph g = NULL;
    CK(cuStreamBeginCapture(s, mode));
    body(s);
    CK(cuStreamEndCapture(s, &g));
    cr_assert_not_null(g);
    return g;
}

static void run_graph(CUgraph g, CUstream s)
{
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, s));
    CK(cuGraphExecDestroy(e));
}

Test(capture, capture_launch_matches_eager, .init = setup)
{
    int eager[N], eager2[N];
    work(fx.s1);
    standin_async_drain();
    memcpy(eager, dev_ints(fx.buf), sizeof(eager));
    memcpy(eager2, dev_ints(fx.buf2), sizeof(eager2));
    CK(cuMemsetD32(fx.buf, 0, N));
    CK(cuMemsetD32(fx.buf2, 0, N));
    CUgraph g = capture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, work);
    cr_assert_eq(read_int(fx.buf, 10), 0, "captured work does not run");
    size_t n = 0;
    CK(cuGraphGetNodes(g, NULL, &n));
    cr_assert_eq(n, 4);
    run_graph(g, fx.s1);
    standin_async_drain();
    cr_assert_arr_eq(dev_ints(fx.buf), eager, sizeof(eager));
    cr_assert_arr_eq(dev_ints(fx.buf2), eager2, sizeof(eager2));
    CK(cuGraphDestroy(g));
}

Test(capture, legacy_stream_and_double_begin_refused, .init = setup)
{
    cr_assert_eq(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CUgraph g;
    cr_assert_eq(cuStreamEndCapture(fx.s2, &g), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamEndCapture(fx.s1, &g));
    CK(cuGraphDestroy(g));
}

struct end_args {
    CUstream s;
    CUgraph g;
    CUresult rc;
};

static void *end_elsewhere(void *p)
{
    struct end_args *a = p;
    CK(cuCtxSetCurrent(fx.ctx));
    a->rc = cuStreamEndCapture(a->s, &a->g);
    return NULL;
}

static CUresult end_from_other_thread(CUstream s, CUgraph *g)
{
    pthread_t t;
    struct end_args a = {.s = s};
    pthread_create(&t, NULL, end_elsewhere, &a);
    pthread_join(t, NULL);
    *g = a.g;
    return a.rc;
}

Test(capture, end_from_another_thread, .init = setup)
{
    CUgraph g = NULL;
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(launch_int(fx.add, fx.s1, fx.buf, 1));
    cr_assert_eq(end_from_other_thread(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    cr_assert_null(g);
    /* measured (driver 580.159): the refused end is the end of the capture */
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &g), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    cr_assert_eq(end_from_other_thread(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(launch_int(fx.add, fx.s1, fx.buf, 1));
    CK(end_from_other_thread(fx.s1, &g));
    cr_assert_not_null(g);
    CK(cuGraphDestroy(g));
}

static void fork_join(CUstream s)
{
    CUevent fork, join;
    CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CK(launch_int(fx.fill, s, fx.buf, 1));
    CK(cuEventRecord(fork, s));
    CK(cuStreamWaitEvent(fx.s2, fork, 0));
    CK(launch_int(fx.fill, fx.s2, fx.buf2, 2));
    CK(launch_int(fx.add, s, fx.buf, 3));
    CK(cuEventRecord(join, fx.s2));
    CK(cuStreamWaitEvent(s, join, 0));
    CK(launch_int(fx.add, s, fx.buf2, 10));
}

Test(capture, fork_and_join, .init = setup)
{
    CUgraph g = capture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, fork_join);
    CUgraphNode nodes[4], deps[2];
    size_t n = 4, nd = 2;
    CK(cuGraphGetNodes(g, nodes, &n));
    cr_assert_eq(n, 4);
    CK(cuGraphNodeGetDependencies(nodes[3], deps, NULL, &nd));
    cr_assert_eq(nd, 2, "the join node depends on both branches");
    cr_assert((deps[0] == nodes[2] && deps[1] == nodes[1]) || (deps[0] == nodes[1] && deps[1] == nodes[2]));
    nd = 2;
    CK(cuGraphNodeGetDependencies(nodes[1], deps, NULL, &nd));
    cr_assert_eq(nd, 1);
    cr_assert_eq(deps[0], nodes[0]);
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(fx.s2, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE, "the end takes every stream out of capture");
    run_graph(g, fx.s1);
    cr_assert_eq(read_int(fx.buf, 0), 4);
    cr_assert_eq(read_int(fx.buf2, 0), 12);
    CK(cuGraphDestroy(g));
}

Test(capture, unjoined_fork_refused, .init = setup)
{
    CUevent fork;
    CUgraph g = (CUgraph)0x1;
    CK(cuEventCreate(&fork, 0));
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(launch_int(fx.fill, fx.s1, fx.buf, 1));
    CK(cuEventRecord(fork, fx.s1));
    CK(cuStreamWaitEvent(fx.s2, fork, 0));
    CK(launch_int(fx.fill, fx.s2, fx.buf2, 2));
    long graphs = standin_live_objects("graph");
    cr_assert_eq(cuStreamEndCapture(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    cr_assert_null(g);
    cr_assert_eq(standin_live_objects("graph"), graphs - 1);
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(fx.s2, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(launch_int(fx.fill, fx.s2, fx.buf2, 6));
    cr_assert_eq(read_int(fx.buf2, 0), 6);
}

Test(capture, isolation_between_captures, .init = setup)
{
    CUevent e;
    CUgraph g;
    CK(cuEventCreate(&e, 0));
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamBeginCapture(fx.s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(launch_int(fx.fill, fx.s1, fx.buf, 1));
    CK(cuEventRecord(e, fx.s1));
    cr_assert_eq(cuStreamWaitEvent(fx.s2, e, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    cr_assert_eq(launch_int(fx.fill, fx.s2, fx.buf, 1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(cuStreamEndCapture(fx.s2, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamEndCapture(fx.s1, &g));
    CK(cuGraphDestroy(g));
    /* An event recorded outside the capture is a dependency across its boundary. */
    CK(cuEventRecord(e, fx.s2));
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamWaitEvent(fx.s1, e, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

struct alloc_args {
    CUresult rc;
};

static void *alloc_elsewhere(void *p)
{
    struct alloc_args *a = p;
    CUdeviceptr d;
    CK(cuCtxSetCurrent(fx.ctx));
    a->rc = cuMemAlloc(&d, 64);
    if (a->rc == CUDA_SUCCESS) CK(cuMemFree(d));
    return NULL;
}

static CUresult alloc_from_other_thread(void)
{
    pthread_t t;
    struct alloc_args a;
    pthread_create(&t, NULL, alloc_elsewhere, &a);
    pthread_join(t, NULL);
    return a.rc;
}

static CUresult end_status(CUstream s)
{
    CUgraph g = NULL;
    CUresult rc = cuStreamEndCapture(s, &g);
    if (g) cuGraphDestroy(g);
    return rc;
}

Test(capture, unsafe_calls_per_mode, .init = setup)
{
    CUdeviceptr d;
    /* global: prohibited on this thread and on every other thread */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(alloc_from_other_thread(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(launch_int(fx.add, fx.s1, fx.buf, 1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuMemAlloc(&d, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* thread-local: only the capturing thread is prohibited */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(alloc_from_other_thread());
    cr_assert_eq(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    cr_assert_eq(cuStreamSynchronize(fx.s2), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* measured: a synchronous copy or memset is no potentially unsafe call:
     * with only non-blocking streams capturing it runs, even in a global
     * capture on the capturing thread */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemcpyDtoD(fx.buf2, fx.buf, 4));
    CK(cuMemsetD8(fx.buf2, 0, 4));
    CK(end_status(fx.s1));
    /* relaxed: nothing is prohibited */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemAlloc(&d, 64));
    CK(cuMemFree(d));
    CK(alloc_from_other_thread());
    CK(end_status(fx.s1));
    /* the thread's own mode: relaxed exempts it from a global capture */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuThreadExchangeStreamCaptureMode(&mode));
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CK(cuMemAlloc(&d, 64));
    CK(cuThreadExchangeStreamCaptureMode(&mode));
    CK(end_status(fx.s1));
    /* the one-argument v1 begins a global capture */
    begin_v1_fn begin_v1 = (begin_v1_fn)sym("cuStreamBeginCapture");
    CK(begin_v1(fx.s1));
    cr_assert_eq(alloc_from_other_thread(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

Test(capture, synchronising_or_querying_capture, .init = setup)
{
    CUevent e;
    CK(cuEventCreate(&e, 0));
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuStreamQuery(fx.s2));
    CK(cuStreamSynchronize(fx.s2));
    cr_assert_eq(cuStreamSynchronize(fx.s1), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuStreamQuery(fx.s1), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuEventRecord(e, fx.s1));
    cr_assert_eq(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuEventRecord(e, fx.s1));
    cr_assert_eq(cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "encompasses the capture");
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

static CUresult sync_from_other_thread_rc;
static void *sync_elsewhere(void *p)
{
    CK(cuCtxSetCurrent(fx.ctx));
    sync_from_other_thread_rc = cuStreamSynchronize((CUstream)p);
    return NULL;
}

/* Measured on driver 580.159 (READINGS.md "Capture prohibitions"):
 * synchronising or querying a stream that does not capture, and querying or
 * synchronising an event recorded outside the capture, are potentially
 * unsafe calls; an event recorded in a capture that has ended is refused
 * with CUDA_ERROR_INVALID_VALUE. */
Test(capture, potentially_unsafe_syncs_and_ended_capture_events, .init = setup)
{
    CUevent before, in;
    CUstreamCaptureStatus st;
    pthread_t t;
    CK(cuEventCreate(&before, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&in, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(before, fx.s2));
    /* global capture: this thread and other global-mode threads */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamQuery(fx.s2), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuEventQuery(before), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuEventSynchronize(before), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_create(&t, NULL, sync_elsewhere, fx.s2);
    pthread_join(t, NULL);
    cr_assert_eq(sync_from_other_thread_rc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* the legacy stream while only a non-blocking stream captures: unsafe, no conflict */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* thread-local: another thread may */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pthread_create(&t, NULL, sync_elsewhere, fx.s2);
    pthread_join(t, NULL);
    CK(sync_from_other_thread_rc);
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(end_status(fx.s1));
    /* relaxed: all of them run */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuStreamQuery(fx.s2));
    CK(cuEventQuery(before));
    CK(cuEventSynchronize(before));
    CK(cuStreamSynchronize(CU_STREAM_LEGACY));
    CK(end_status(fx.s1));
    /* an event of an ended capture */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(launch_int(fx.add, fx.s1, fx.buf, 1));
    CK(cuEventRecord(in, fx.s1));
    CK(end_status(fx.s1));
    cr_assert_eq(cuEventQuery(in), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuEventSynchronize(in), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuStreamWaitEvent(fx.s2, in, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamIsCapturing(fx.s2, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamWaitEvent(fx.s1, in, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuEventRecord(in, fx.s2)); /* recorded outside: usable again */
    CK(cuEventSynchronize(in));
    /* an out-of-range thread mode is taken and handed back */
    CUstreamCaptureMode m = (CUstreamCaptureMode)7;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq((int)m, 7);
    CK(cuEventDestroy(before));
    CK(cuEventDestroy(in));
}

Test(capture, legacy_stream_during_capture, .init = setup)
{
    CUstream blocking;
    CUstreamCaptureStatus st;
    CK(cuStreamCreate(&blocking, 0));
    /* a non-blocking capture does not involve the legacy stream */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(launch_int(fx.fill, NULL, fx.buf, 3));
    cr_assert_eq(read_int(fx.buf, 0), 3);
    CK(end_status(fx.s1));
    CK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CK(cuStreamIsCapturing(blocking, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE, "a legacy query does not invalidate");
    cr_assert_eq(launch_int(fx.fill, NULL, fx.buf, 3), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CK(cuStreamIsCapturing(blocking, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(end_status(blocking), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuMemcpyHtoD(fx.buf, &st, 4), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    cr_assert_eq(end_status(blocking), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

Test(capture, capture_queries, .init = setup)
{
    CUstreamCaptureStatus st;
    cuuint64_t id1 = 0, id2 = 0;
    CUgraph g, qg;
    const CUgraphNode *deps;
    const CUgraphEdgeData *edata;
    size_t nd = 99;
    CK(cuStreamGetCaptureInfo(fx.s1, &st, &id1, &qg, &deps, &edata, &nd));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    deps = (const CUgraphNode *)&nd;
    CK(cuStreamGetCaptureInfo(fx.s1, &st, &id1, &qg, &deps, &edata, &nd));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cr_assert_eq(nd, 0);
    cr_assert_null(deps, "measured: no dependencies come back as NULL");
    CK(launch_int(fx.fill, fx.s1, fx.buf, 1));
    CK(cuStreamGetCaptureInfo(fx.s1, &st, &id2, &qg, &deps, &edata, &nd));
    cr_assert_eq(id2, id1);
    cr_assert_eq(nd, 1);
    CUgraphNode first = deps[0];
    CUgraphNodeType type;
    CK(cuGraphNodeGetType(first, &type));
    cr_assert_eq(type, CU_GRAPH_NODE_TYPE_KERNEL);
    cr_assert_eq(edata[0].type, 0);
    capture_info_v1_fn info_v1 = (capture_info_v1_fn)sym("cuStreamGetCaptureInfo");
    CK(info_v1(fx.s1, &st, &id2));
    cr_assert_eq(id2, id1);
    /* set the dependencies to none: the next node is a root */
    CK(cuStreamUpdateCaptureDependencies(fx.s1, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    CK(launch_int(fx.fill, fx.s1, fx.buf2, 1));
    CK(cuStreamUpdateCaptureDependencies(fx.s1, &first, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    CK(cuStreamGetCaptureInfo(fx.s1, &st, &id2, &qg, &deps, NULL, &nd));
    cr_assert_eq(nd, 2);
    CK(launch_int(fx.add, fx.s1, fx.buf2, 1));
    CK(cuStreamEndCapture(fx.s1, &g));
    cr_assert_eq(g, qg);
    size_t roots = 0;
    CK(cuGraphGetRootNodes(g, NULL, &roots));
    cr_assert_eq(roots, 2);
    cr_assert_eq(cuStreamUpdateCaptureDependencies(fx.s1, NULL, NULL, 0, 0), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamGetCaptureInfo(fx.s1, &st, &id2, NULL, NULL, NULL, NULL));
    cr_assert_neq(id2, id1, "each capture sequence has its own id");
    cr_assert_eq(id2, id1 + 1, "measured: ids count up by one");
    CK(end_status(fx.s1));
    CK(cuGraphDestroy(g));
    /* measured: an invalidated capture reports only its status */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamSynchronize(fx.s1), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    id2 = 12345;
    nd = 777;
    qg = NULL;
    CK(cuStreamGetCaptureInfo(fx.s1, &st, &id2, &qg, &deps, NULL, &nd));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(id2, 12345);
    cr_assert_eq(nd, 777);
    cr_assert_null(qg);
    cr_assert_eq(end_status(fx.s1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

Test(capture, capture_to_existing_graph, .init = setup)
{
    CUgraph g, out;
    CUgraphNode a, nodes[2], dep;
    size_t n = 2, nd = 1;
    CK(cuGraphCreate(&g, 0));
    CK(add_kernel_node(&a, g, NULL, 0, fx.fill, fx.buf, 4));
    CK(cuStreamBeginCaptureToGraph(fx.s1, g, &a, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(launch_int(fx.add, fx.s1, fx.buf, 1));
    CK(cuStreamEndCapture(fx.s1, &out));
    cr_assert_eq(out, g);
    CK(cuGraphGetNodes(g, nodes, &n));
    cr_assert_eq(n, 2);
    CK(cuGraphNodeGetDependencies(nodes[1], &dep, NULL, &nd));
    cr_assert_eq(dep, a);
    run_graph(g, fx.s1);
    cr_assert_eq(read_int(fx.buf, 0), 5);
    CK(cuGraphDestroy(g));
}

Test(capture, graph_launch_and_external_events_in_capture, .init = setup)
{
    CUgraph inner, g;
    CUgraphExec e;
    CUevent ev;
    CUgraphNode nodes[4];
    size_t n = 4;
    CUgraphNodeType t;
    CK(cuEventCreate(&ev, 0));
    inner = capture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, work);
    CK(cuGraphInstantiate(&e, inner, 0));
    CK(cuStreamBeginCapture(fx.s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuGraphLaunch(e, fx.s2));
    CK(cuEventRecordWithFlags(ev, fx.s2, CU_EVENT_RECORD_EXTERNAL));
    CK(cuStreamWaitEvent(fx.s2, ev, CU_EVENT_WAIT_EXTERNAL));
    CK(cuStreamEndCapture(fx.s2, &g));
    CK(cuGraphGetNodes(g, nodes, &n));
    cr_assert_eq(n, 3);
    CK(cuGraphNodeGetType(nodes[0], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_GRAPH, "a launched executable graph becomes a child graph node");
    CK(cuGraphNodeGetType(nodes[1], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    CK(cuGraphNodeGetType(nodes[2], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    run_graph(g, fx.s1);
    cr_assert_eq(read_int(fx.buf2, 5), 7);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(inner));
}

static CUdeviceptr scratch;
static void alloc_work(CUstream s)
{
    CK(cuMemAllocAsync(&scratch, N * sizeof(int), s));
    CK(launch_int(fx.fill, s, scratch, 3));
    CK(cuMemcpyDtoDAsync(fx.buf, scratch, N * sizeof(int), s));
}

Test(capture, memory_nodes, .init = setup)
{
    CUgraph g = capture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, alloc_work);
    CUgraphExec e, e2;
    CK(cuGraphInstantiate(&e, g, 0));
    cr_assert_eq(cuGraphInstantiate(&e2, g, 0), CUDA_ERROR_INVALID_VALUE, "one instantiation at a time");
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 7), 3);
    cr_assert_eq(cuGraphLaunch(e, fx.s1), CUDA_ERROR_INVALID_VALUE, "allocation not freed since");
    CK(cuMemFreeAsync(scratch, fx.s1));
    CK(cuGraphLaunch(e, fx.s1));
    CK(cuGraphExecDestroy(e));
    CK(cuGraphInstantiate(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    CK(cuGraphLaunch(e, fx.s1));
    CK(cuGraphExecDestroy(e));
    CUgraph clone;
    cr_assert_eq(cuGraphClone(&clone, g), CUDA_ERROR_NOT_SUPPORTED);
    CK(cuGraphDestroy(g));
}

struct worker {
    CUstream s;
    CUdeviceptr buf;
    int id;
    int failures;
};

static void *capture_loop(void *p)
{
    struct worker *w = p;
    CK(cuCtxSetCurrent(fx.ctx));
    for (int i = 0; i < 50; i++) {
        CUgraph g;
        CUgraphExec e;
        int n = N, v = w->id + i;
        void *args[] = {&w->buf, &v, &n};
        if (cuStreamBeginCapture(w->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) ||
            cuLaunchKernel(fx.fill, 1, 1, 1, 1, 1, 1, 0, w->s, args, NULL) ||
            cuStreamEndCapture(w->s, &g) || cuGraphInstantiate(&e, g, 0) || cuGraphLaunch(e, w->s) ||
            cuGraphExecDestroy(e) || cuGraphDestroy(g) || cuStreamSynchronize(w->s) ||
            dev_ints(w->buf)[N - 1] != v)
            w->failures++;
    }
    return NULL;
}

Test(capture, threads_capture_concurrently, .init = setup)
{
    struct worker w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.id = i * 1000};
        CK(cuStreamCreate(&w[i].s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&w[i].buf, N * sizeof(int)));
        pthread_create(&t[i], NULL, capture_loop, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].failures, 0, "worker %d", i);
    }
    cr_assert_eq(standin_live_objects("graph"), 0);
    cr_assert_eq(standin_live_objects("exec"), 0);
}

static void CUDA_CB count_stream_callback(CUstream s, CUresult status, void *data)
{
    (void)s;
    cr_assert_eq(status, CUDA_SUCCESS);
    ++*(int *)data;
}

/* Measured on driver 580 (READINGS.md "Capture prohibitions"): a host
 * callback or a memory attachment on a capturing stream is refused and
 * invalidates the capture; a callback on another stream runs in order. */
Test(capture, work_no_capture_holds_is_refused_on_a_capturing_stream, .init = setup)
{
    int runs = 0;
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuStreamAddCallback(fx.s2, count_stream_callback, &runs, 0));
    CK(cuStreamSynchronize(fx.s2));
    cr_assert_eq(runs, 1, "a callback on a stream outside the capture ran %d times", runs);
    cr_assert_eq(cuStreamAddCallback(fx.s1, count_stream_callback, &runs, 0),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_null(g);

    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuStreamAttachMemAsync(fx.s1, fx.buf, 0, CU_MEM_ATTACH_SINGLE),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamAttachMemAsync(fx.s1, fx.buf, 0, CU_MEM_ATTACH_SINGLE));
    cr_assert_eq(runs, 1);
}

/* cuMemHostRegister is potentially unsafe: refused in a GLOBAL capture on
 * its thread, allowed in a RELAXED one. */
Test(capture, host_registration_is_potentially_unsafe, .init = setup)
{
    static char host[4096];
    CUgraph g = NULL;
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuMemHostRegister(host, sizeof host, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemHostRegister(host, sizeof host, 0));
    CK(cuMemHostUnregister(host));
    CK(cuStreamEndCapture(fx.s1, &g));
    CK(cuGraphDestroy(g));
}
