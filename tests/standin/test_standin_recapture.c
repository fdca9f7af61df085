/*
 * test_standin_recapture.c - cuStreamBeginRecaptureToGraph: unchanged and
 * changed nodes, eligibility, node identity, every kind of mismatch in each
 * failure-surfacing mode, the callback's answers, the knobs, user objects,
 * and what a failed recapture leaves (a poisoned graph).
 */
#include "test_standin_common.h"

/* An operation of a captured sequence. */
struct op {
    char kind; /* 'f' fill(buf), 'a' add(buf), 'c' add_cdp(buf), 'm' memset(buf2) */
    int v;
};

static CUresult run_op(CUstream s, struct op o)
{
    switch (o.kind) {
    case 'f': return launch_int(fx.fill, s, fx.buf, o.v);
    case 'a': return launch_int(fx.add, s, fx.buf, o.v);
    case 'c': return launch_int(fx.cdp, s, fx.buf, o.v);
    default: return cuMemsetD32Async(fx.buf2, (unsigned)o.v, N, s);
    }
}

static const struct op base_ops[] = {{'f', 1}, {'a', 2}, {'a', 3}};

static CUgraph capture_ops(const struct op *ops, int n)
{
    CUgraph g;
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < n; i++) CK(run_op(fx.s1, ops[i]));
    CK(cuStreamEndCapture(fx.s1, &g));
    return g;
}

struct cb_log {
    int calls;
    CUgraphNode node[8];
    CUgraphRecaptureStatus status[8];
    int orig_v[8], new_v[8];
    CUresult answer;
    bool call_driver;
    CUresult inner;
};

static CUresult CUDAAPI on_node(void *data, CUgraphNode node, const CUgraphNodeParams *o,
                                const CUgraphNodeParams *n, CUgraphRecaptureStatus st)
{
    struct cb_log *log = data;
    int i = log->calls++;
    log->node[i] = node;
    log->status[i] = st;
    if (o->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        log->orig_v[i] = *(int *)o->kernel.kernelParams[1];
        log->new_v[i] = *(int *)n->kernel.kernelParams[1];
    }
    if (log->call_driver) log->inner = cuStreamQuery(fx.s2);
    return log->answer;
}

static void nodes_of(CUgraph g, CUgraphNode *nodes, size_t want)
{
    size_t n = want;
    CK(cuGraphGetNodes(g, nodes, &n));
    cr_assert_eq(n, want);
}

static void expect_poisoned(CUgraph g)
{
    size_t n;
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuGraphGetNodes(g, NULL, &n), CUDA_ERROR_ILLEGAL_STATE);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    CUgraphExec e;
    cr_assert_neq(cuGraphInstantiate(&e, g, 0), CUDA_SUCCESS);
    CK(cuGraphDestroy(g));
    cr_assert_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses + 3);
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE, "the end takes the stream out of capture");
}

Test(recapture, unchanged_calls_no_callback, .init = setup)
{
    CUgraph g = capture_ops(base_ops, 3), out;
    CUgraphNode before[3], after[3];
    struct cb_log log = {.answer = CUDA_SUCCESS};
    nodes_of(g, before, 3);
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node, &log));
    for (int i = 0; i < 3; i++) CK(run_op(fx.s1, base_ops[i]));
    cr_assert_eq(read_int(fx.buf, 0), 0, "recaptured work does not run");
    CK(cuStreamEndCapture(fx.s1, &out));
    cr_assert_eq(out, g);
    cr_assert_eq(log.calls, 0);
    nodes_of(g, after, 3);
    cr_assert_arr_eq(after, before, sizeof(before));
    cr_assert_eq(standin_call_count("cuStreamBeginRecaptureToGraph"), 1);
    CK(cuGraphDestroy(g));
}

Test(recapture, changed_scalar_is_eligible_and_keeps_node_identity, .init = setup)
{
    CUgraph g = capture_ops(base_ops, 3), out;
    CUgraphNode before[3], after[3];
    CUgraphExec e;
    struct cb_log log = {.answer = CUDA_SUCCESS};
    const struct op changed[] = {{'f', 1}, {'a', 5}, {'a', 3}};
    nodes_of(g, before, 3);
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node, &log));
    for (int i = 0; i < 3; i++) CK(run_op(fx.s1, changed[i]));
    CK(cuStreamEndCapture(fx.s1, &out));
    cr_assert_eq(out, g);
    cr_assert_eq(log.calls, 1);
    cr_assert_eq(log.node[0], before[1], "the callback gets the original node");
    cr_assert_eq(log.status[0], CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE);
    cr_assert_eq(log.orig_v[0], 2);
    cr_assert_eq(log.new_v[0], 5);
    nodes_of(g, after, 3);
    cr_assert_arr_eq(after, before, sizeof(before));
    CUDA_KERNEL_NODE_PARAMS kp;
    CK(cuGraphKernelNodeGetParams(before[1], &kp));
    cr_assert_eq(*(int *)kp.kernelParams[1], 5, "the node holds the recaptured parameters");
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate(e, g, &info));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 9);
    CK(cuGraphExecKernelNodeSetParams(e, before[1], &kp)); /* per-node path works too */
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

Test(recapture, ineligible_change_is_reported, .init = setup)
{
    CUgraph g = capture_ops(base_ops, 3), out;
    CUgraphExec e;
    struct cb_log log = {.answer = CUDA_SUCCESS};
    const struct op changed[] = {{'f', 1}, {'c', 2}, {'a', 3}};
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node, &log));
    for (int i = 0; i < 3; i++) CK(run_op(fx.s1, changed[i]));
    CK(cuStreamEndCapture(fx.s1, &out));
    cr_assert_eq(log.calls, 1);
    cr_assert_eq(log.status[0], CU_GRAPH_RECAPTURE_INELIGIBLE_FOR_UPDATE);
    CUgraphExecUpdateResultInfo info;
    cr_assert_eq(cuGraphExecUpdate(e, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                 "ineligible means the update is refused");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

/* Runs a recapture of `ops` into a graph of base_ops in failure mode `where`
 * and checks every return code against the mode's contract, for an
 * operation at index `bad` that fails (bad == n: the end fails). */
static void mismatch_case(const char *where, const struct op *ops, int n, int bad)
{
    cr_assert_eq(standin_set_recapture_failure(where), 0);
    CUgraph g = capture_ops(base_ops, 3), out = (CUgraph)0x1;
    CK(cuMemsetD32(fx.buf, 0, N));
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node,
                                     &(struct cb_log){.answer = CUDA_SUCCESS}));
    bool call = strcmp(where, "call") == 0, later = strcmp(where, "later") == 0;
    for (int i = 0; i < n; i++) {
        CUresult want = CUDA_SUCCESS;
        if (call && i == bad) want = CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
        if (call && i > bad) want = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (later && i == bad + 1) want = CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
        if (later && i > bad + 1) want = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        cr_assert_eq(run_op(fx.s1, ops[i]), want, "%s: op %d of %d (bad %d)", where, i, n, bad);
    }
    CUresult want_end = CUDA_ERROR_GRAPH_RECAPTURE_FAILURE;
    if (bad < n && (call || (later && bad + 1 < n))) want_end = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), want_end, "%s: end (bad %d of %d)", where, bad, n);
    cr_assert_null(out);
    cr_assert_eq(read_int(fx.buf, 0), 0);
    expect_poisoned(g);
}

Test(recapture, topology_mismatch_in_each_mode, .init = setup)
{
    static const char *const modes[] = {"call", "later", "end"};
    for (int m = 0; m < 3; m++) {
        for (int pos = 0; pos < 3; pos++) { /* a memset where a kernel was */
            struct op ops[3] = {{'f', 1}, {'a', 2}, {'a', 3}};
            ops[pos] = (struct op){'m', 7};
            mismatch_case(modes[m], ops, 3, pos);
        }
        const struct op extra[] = {{'f', 1}, {'a', 2}, {'a', 3}, {'a', 4}};
        mismatch_case(modes[m], extra, 4, 3);
        const struct op missing[] = {{'f', 1}, {'a', 2}};
        mismatch_case(modes[m], missing, 2, 2);
    }
}

Test(recapture, dependency_mismatch, .init = setup)
{
    CUgraph g = capture_ops(base_ops, 3), out;
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    CK(run_op(fx.s1, base_ops[0]));
    CK(run_op(fx.s1, base_ops[1]));
    CK(cuStreamUpdateCaptureDependencies(fx.s1, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    cr_assert_eq(run_op(fx.s1, base_ops[2]), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_poisoned(g);
}

static CUdeviceptr scratch;
static CUresult alloc_ops(CUstream s, size_t bytes, bool check)
{
    CUresult rc = cuMemAllocAsync(&scratch, bytes, s);
    if (rc || !check) return rc;
    CK(launch_int(fx.fill, s, scratch, 4));
    return cuMemFreeAsync(scratch, s);
}

Test(recapture, memory_nodes_must_match, .init = setup)
{
    CUgraph g, out;
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(alloc_ops(fx.s1, 1024, true));
    CK(cuStreamEndCapture(fx.s1, &g));
    CUdeviceptr first = scratch;
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    CK(alloc_ops(fx.s1, 1024, true));
    cr_assert_eq(scratch, first, "the allocation keeps its address");
    CK(cuStreamEndCapture(fx.s1, &out));
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    cr_assert_eq(alloc_ops(fx.s1, 2048, false), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_poisoned(g);
}

Test(recapture, callback_answers_and_error_status, .init = setup)
{
    const struct op changed[] = {{'f', 1}, {'a', 5}, {'a', 6}};
    CUgraph g = capture_ops(base_ops, 3), out;
    struct cb_log log = {.answer = CUDA_ERROR_INVALID_VALUE};
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node, &log));
    CK(run_op(fx.s1, changed[0]));
    cr_assert_eq(run_op(fx.s1, changed[1]), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, "the callback said no");
    cr_assert_eq(run_op(fx.s1, changed[2]), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_eq(log.calls, 1, "no callback after the failure");
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_poisoned(g);
    standin_set_recapture_error_node(2);
    g = capture_ops(base_ops, 3);
    log = (struct cb_log){.answer = CUDA_SUCCESS};
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node, &log));
    CK(run_op(fx.s1, changed[0]));
    CK(run_op(fx.s1, changed[1]));
    cr_assert_eq(run_op(fx.s1, changed[2]), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    cr_assert_eq(log.calls, 2);
    cr_assert_eq(log.status[0], CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE);
    cr_assert_eq(log.status[1], CU_GRAPH_RECAPTURE_ERROR, "the second changed node");
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_poisoned(g);
}

Test(recapture, null_callback_knob, .init = setup)
{
    const struct op changed[] = {{'f', 1}, {'a', 5}, {'a', 3}};
    CUgraph g = capture_ops(base_ops, 3), out;
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    for (int i = 0; i < 3; i++) CK(run_op(fx.s1, changed[i]));
    CK(cuStreamEndCapture(fx.s1, &out));
    cr_assert_eq(out, g);
    standin_set_null_callback_accepted(0);
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    unsigned long misuses = standin_misuse_count();
    size_t n;
    CK(cuGraphGetNodes(g, NULL, &n));
    cr_assert_eq(standin_misuse_count(), misuses, "a refused begin leaves the graph usable");
    CK(cuGraphDestroy(g));
}

static int released;
static void on_release(void *p)
{
    (void)p;
    released++;
}

Test(recapture, user_objects_released_before, .init = setup)
{
    CUgraph g = capture_ops(base_ops, 3), out;
    CUuserObject u;
    CK(cuUserObjectCreate(&u, NULL, on_release, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CK(cuGraphRetainUserObject(g, u, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    standin_async_drain(); /* destructors run on a stand-in thread in async mode */
    cr_assert_eq(released, 1);
    for (int i = 0; i < 3; i++) CK(run_op(fx.s1, base_ops[i]));
    CK(cuStreamEndCapture(fx.s1, &out));
    CK(cuGraphDestroy(g));
    cr_assert_eq(released, 1);
}

Test(recapture, driver_call_from_callback_is_a_misuse, .init = setup)
{
    const struct op changed[] = {{'f', 1}, {'a', 5}, {'a', 3}};
    CUgraph g = capture_ops(base_ops, 3), out;
    struct cb_log log = {.answer = CUDA_SUCCESS, .call_driver = true};
    unsigned long misuses = standin_misuse_count();
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node, &log));
    for (int i = 0; i < 3; i++) CK(run_op(fx.s1, changed[i]));
    CK(cuStreamEndCapture(fx.s1, &out));
    cr_assert_eq(log.inner, CUDA_ERROR_NOT_PERMITTED);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    cr_assert(strstr(standin_last_misuse(), "recapture callback") != NULL);
    cr_assert_eq(standin_call_count("cuStreamQuery"), 1);
    CK(cuGraphDestroy(g));
}

Test(recapture, begin_refusals, .init = setup)
{
    CUgraph g = capture_ops(base_ops, 3), with_child, with_empty, out;
    CUgraphNode n;
    cr_assert_eq(cuStreamBeginRecaptureToGraph(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamBeginCapture(fx.s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s2, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL),
                 CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamEndCapture(fx.s2, &out));
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s2, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL),
                 CUDA_ERROR_ILLEGAL_STATE, "the graph is being captured into");
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE); /* no nodes */
    CK(cuGraphDestroy(g));
    g = capture_ops(base_ops, 3);
    CK(cuGraphCreate(&with_child, 0));
    CK(cuGraphAddChildGraphNode(&n, with_child, NULL, 0, g));
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, with_child, NULL, NULL),
                 CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    expect_poisoned(with_child);
    CK(cuGraphCreate(&with_empty, 0));
    CK(cuGraphAddEmptyNode(&n, with_empty, NULL, 0));
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, with_empty, NULL, NULL),
                 CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    CK(cuGraphDestroy(with_empty));
    standin_set_driver_version(13000);
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    CK(cuGraphDestroy(g));
}

Test(recapture, queries_and_fork_join_during_recapture, .init = setup)
{
    CUevent fork, join;
    CUgraph g, out, qg;
    CUstreamCaptureStatus st;
    const CUgraphNode *deps;
    size_t nd;
    CUgraphNode nodes[3];
    CK(cuEventCreate(&fork, 0));
    CK(cuEventCreate(&join, 0));
    for (int round = 0; round < 2; round++) {
        if (round == 0) CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        else CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
        CK(launch_int(fx.fill, fx.s1, fx.buf, 1));
        if (round == 1) {
            CK(cuStreamGetCaptureInfo(fx.s1, &st, NULL, &qg, &deps, NULL, &nd));
            cr_assert_eq(qg, g);
            cr_assert_eq(nd, 1);
            cr_assert_eq(deps[0], nodes[0], "dependencies are the original nodes");
        }
        CK(cuEventRecord(fork, fx.s1));
        CK(cuStreamWaitEvent(fx.s2, fork, 0));
        CK(launch_int(fx.fill, fx.s2, fx.buf2, 2 + round));
        CK(cuEventRecord(join, fx.s2));
        CK(cuStreamWaitEvent(fx.s1, join, 0));
        CK(launch_int(fx.add, fx.s1, fx.buf, 3));
        CK(cuStreamEndCapture(fx.s1, &out));
        g = out;
        if (round == 0) nodes_of(g, nodes, 3);
    }
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf2, 0), 3);
    cr_assert_eq(read_int(fx.buf, 0), 4);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

Test(recapture, later_mode_surfaces_at_the_next_query_or_fork, .init = setup)
{
    const struct op bad[] = {{'f', 1}, {'m', 2}};
    CUgraph g = capture_ops(base_ops, 3), out;
    CUstreamCaptureStatus st;
    CUevent e;
    CK(cuEventCreate(&e, 0));
    cr_assert_eq(standin_set_recapture_failure("later"), 0);
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    CK(run_op(fx.s1, bad[0]));
    CK(cuEventRecord(e, fx.s1));
    CK(run_op(fx.s1, bad[1]));
    cr_assert_eq(cuStreamIsCapturing(fx.s1, &st), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    CK(cuStreamIsCapturing(fx.s1, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_poisoned(g);
    g = capture_ops(base_ops, 3);
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL));
    CK(run_op(fx.s1, bad[0]));
    CK(cuEventRecord(e, fx.s1));
    CK(run_op(fx.s1, bad[1]));
    cr_assert_eq(cuStreamWaitEvent(fx.s2, e, 0), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE,
                 "a stream joining the capture is a call on it");
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_poisoned(g);
}

Test(recapture, knobs_from_the_environment)
{
    setenv("STANDIN_RECAPTURE_FAILURE", "end", 1);
    setenv("STANDIN_NULL_CALLBACK", "reject", 1);
    setup();
    CUgraph g = capture_ops(base_ops, 3), out;
    cr_assert_eq(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, NULL, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamBeginRecaptureToGraph(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL, g, on_node,
                                     &(struct cb_log){.answer = CUDA_SUCCESS}));
    CK(run_op(fx.s1, (struct op){'m', 1}));
    CK(run_op(fx.s1, base_ops[1]));
    CK(run_op(fx.s1, base_ops[2]));
    cr_assert_eq(cuStreamEndCapture(fx.s1, &out), CUDA_ERROR_GRAPH_RECAPTURE_FAILURE);
    cr_assert_null(out);
    expect_poisoned(g);
}
