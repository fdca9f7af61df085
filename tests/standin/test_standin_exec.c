/*
 * test_standin_exec.c - executable graphs: every instantiate entry point,
 * flags, cuGraphExecUpdate's success and each failure kind (with the
 * executable graph left unchanged), and the per-node setters.
 */
#include "test_standin_common.h"

/* fill(buf, v0) -> add(buf, v1) -> memset(buf2, 1D, value m) */
struct chain {
    CUgraph g;
    CUgraphNode k0, k1, ms;
};

static struct chain chain(int v0, int v1, unsigned m, CUfunction second)
{
    struct chain c;
    CK(cuGraphCreate(&c.g, 0));
    CK(add_kernel_node(&c.k0, c.g, NULL, 0, fx.fill, fx.buf, v0));
    CK(add_kernel_node(&c.k1, c.g, &c.k0, 1, second, fx.buf, v1));
    CUDA_MEMSET_NODE_PARAMS p = {.dst = fx.buf2, .value = m, .elementSize = 4, .width = N, .height = 1};
    CK(cuGraphAddMemsetNode(&c.ms, c.g, &c.k1, 1, &p, fx.ctx));
    return c;
}

static void launch(CUgraphExec e)
{
    CK(cuGraphLaunch(e, fx.s1));
}

Test(exec, instantiate_variants, .init = setup)
{
    struct chain c = chain(1, 2, 3, fx.add);
    CUgraphExec e;
    CUgraphNode err = (CUgraphNode)0x1;
    char log[64] = "untouched";
    cuuint64_t flags;
    CK(((instantiate_v1_fn)sym("cuGraphInstantiate"))(&e, c.g, &err, log, sizeof(log)));
    cr_assert_null(err);
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 3);
    CK(cuGraphExecDestroy(e));
    CK(((instantiate_v1_fn)sym("cuGraphInstantiate_v2"))(&e, c.g, NULL, NULL, 0));
    CK(cuGraphExecDestroy(e));
    CK(cuGraphInstantiateWithFlags(&e, c.g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
    CK(cuGraphExecGetFlags(e, &flags));
    cr_assert_eq(flags, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    CK(cuGraphExecDestroy(e));
    cr_assert_eq(cuGraphInstantiateWithFlags(&e, c.g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphInstantiateWithFlags(&e, c.g, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                                          CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
                 CUDA_ERROR_INVALID_VALUE);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                                 CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
                                        .hUploadStream = fx.s2,
                                        .hErrNode_out = (CUgraphNode)0x1,
                                        .result_out = CUDA_GRAPH_INSTANTIATE_ERROR};
    CK(cuGraphInstantiateWithParams(&e, c.g, &ip));
    cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    cr_assert_null(ip.hErrNode_out);
    CK(cuGraphExecGetFlags(e, &flags));
    cr_assert_eq(flags, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, "UPLOAD is not reported");
    CK(cuGraphUpload(e, fx.s1));
    CK(cuGraphExecDestroy(e));
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphLaunch(e, fx.s1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses + 2);
    CK(cuGraphDestroy(c.g));
}

static void nothing(void *p)
{
    (void)p;
}

Test(exec, instantiate_failures_report_result_and_node, .init = setup)
{
    CUgraph g;
    CUgraphNode k, h;
    CUgraphExec e;
    CK(cuGraphCreate(&g, 0));
    CK(add_kernel_node(&k, g, NULL, 0, fx.fill, fx.buf, 1));
    CUDA_HOST_NODE_PARAMS hp = {nothing, NULL};
    CK(cuGraphAddHostNode(&h, g, &k, 1, &hp));
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH};
    cr_assert_eq(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED);
    cr_assert_eq(ip.hErrNode_out, h);
    CK(cuGraphAddDependencies(g, &h, &k, NULL, 1)); /* a cycle */
    ip.flags = 0;
    cr_assert_eq(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE);
    CK(cuGraphDestroy(g));
}

Test(exec, execution_follows_dependencies_then_creation_order, .init = setup)
{
    CUgraph g;
    CUgraphNode first, second;
    CUgraphExec e;
    CK(cuGraphCreate(&g, 0));
    CK(add_kernel_node(&first, g, NULL, 0, fx.add, fx.buf, 5));
    CK(add_kernel_node(&second, g, NULL, 0, fx.fill, fx.buf, 1));
    CK(cuGraphInstantiate(&e, g, 0));
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 1, "independent nodes run in creation order");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphAddDependencies(g, &second, &first, NULL, 1));
    CK(cuGraphInstantiate(&e, g, 0));
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 6, "an added edge reorders them");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

Test(exec, update_success, .init = setup)
{
    struct chain a = chain(1, 2, 3, fx.add), b = chain(10, 20, 30, fx.add);
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphInstantiate(&e, a.g, 0));
    CK(cuGraphExecUpdate(e, b.g, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CK(cuGraphDestroy(b.g));
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 30);
    cr_assert_eq(read_int(fx.buf2, 0), 30);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(a.g));
}

/* Expects an update of an executable graph of `a` by `b` to fail with
 * `result` naming `node` (and `from`), and the executable graph to still
 * run a's work. */
static void expect_update_failure(CUgraph a, CUgraph b, CUgraphExecUpdateResult result, CUgraphNode node,
                                  CUgraphNode from)
{
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphInstantiate(&e, a, 0));
    cr_assert_eq(cuGraphExecUpdate(e, b, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, result);
    cr_assert_eq(info.errorNode, node);
    cr_assert_eq(info.errorFromNode, from);
    CUgraphNode err;
    CUgraphExecUpdateResult r;
    cr_assert_eq(((exec_update_v1_fn)sym("cuGraphExecUpdate"))(e, b, &err, &r),
                 CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(r, result);
    cr_assert_eq(err, node);
    CK(cuMemsetD32(fx.buf, 0, N));
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 3, "the executable graph is unchanged");
    CK(cuGraphExecDestroy(e));
}

Test(exec, update_failures, .init = setup)
{
    struct chain a = chain(1, 2, 3, fx.add);
    /* node count */
    struct chain b = chain(1, 2, 3, fx.add);
    CUgraphNode extra;
    CK(add_kernel_node(&extra, b.g, NULL, 0, fx.add, fx.buf, 1));
    expect_update_failure(a.g, b.g, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, NULL, NULL);
    CK(cuGraphDestroy(b.g));
    /* node type */
    CUgraph t;
    CUgraphNode t0, t1, t2;
    CK(cuGraphCreate(&t, 0));
    CK(add_kernel_node(&t0, t, NULL, 0, fx.fill, fx.buf, 1));
    CUDA_MEMSET_NODE_PARAMS mp = {.dst = fx.buf, .value = 1, .elementSize = 4, .width = N, .height = 1};
    CK(cuGraphAddMemsetNode(&t1, t, &t0, 1, &mp, fx.ctx));
    CK(cuGraphAddMemsetNode(&t2, t, &t1, 1, &mp, fx.ctx));
    expect_update_failure(a.g, t, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, t1, NULL);
    CK(cuGraphDestroy(t));
    /* a dependency that does not pair */
    b = chain(1, 2, 3, fx.add);
    CK(cuGraphRemoveDependencies(b.g, &b.k1, &b.ms, NULL, 1));
    CK(cuGraphAddDependencies(b.g, &b.k0, &b.ms, NULL, 1));
    expect_update_failure(a.g, b.g, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, b.ms, b.k0);
    CK(cuGraphDestroy(b.g));
    /* a function that now uses dynamic parallelism */
    b = chain(1, 2, 3, fx.cdp);
    expect_update_failure(a.g, b.g, CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, b.k1, NULL);
    CK(cuGraphDestroy(b.g));
    /* a function of another context */
    CUcontext other;
    CUmodule mod;
    CUfunction add_other;
    CK(cuCtxCreate(&other, NULL, 0, 0));
    CK(cuModuleLoadData(&mod, "image"));
    CK(cuModuleGetFunction(&add_other, mod, "add"));
    CK(cuCtxPopCurrent(NULL));
    b = chain(1, 2, 3, add_other);
    expect_update_failure(a.g, b.g, CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, b.k1, NULL);
    CK(cuGraphDestroy(b.g));
    CK(cuGraphDestroy(a.g));
}

Test(exec, update_memory_operand_rules, .init = setup)
{
    CUgraph a, b;
    CUgraphNode na, nb;
    int host[N];
    CUDA_MEMCPY3D dd = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = fx.buf,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = fx.buf2,
                        .WidthInBytes = 16, .Height = 1, .Depth = 1};
    CUDA_MEMCPY3D hd = dd;
    hd.srcMemoryType = CU_MEMORYTYPE_HOST;
    hd.srcHost = host;
    CK(cuGraphCreate(&a, 0));
    CK(cuGraphAddMemcpyNode(&na, a, NULL, 0, &dd, fx.ctx));
    CK(cuGraphCreate(&b, 0));
    CK(cuGraphAddMemcpyNode(&nb, b, NULL, 0, &hd, fx.ctx));
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphInstantiate(&e, a, 0));
    cr_assert_eq(cuGraphExecUpdate(e, b, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, "memory type changed");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(a));
    CK(cuGraphDestroy(b));
    /* 2D memsets: the address and the value may change, not the shape */
    CUDA_MEMSET_NODE_PARAMS m2 = {.dst = fx.buf, .pitch = 64, .value = 1, .elementSize = 4, .width = 8,
                                  .height = 2};
    CK(cuGraphCreate(&a, 0));
    CK(cuGraphAddMemsetNode(&na, a, NULL, 0, &m2, fx.ctx));
    CK(cuGraphInstantiate(&e, a, 0));
    m2.value = 5;
    m2.dst = fx.buf2;
    CK(cuGraphCreate(&b, 0));
    CK(cuGraphAddMemsetNode(&nb, b, NULL, 0, &m2, fx.ctx));
    CK(cuGraphExecUpdate(e, b, &info));
    launch(e);
    cr_assert_eq(read_int(fx.buf2, 16 + 7), 5);
    CK(cuGraphDestroy(b));
    m2.width = 4;
    CK(cuGraphCreate(&b, 0));
    CK(cuGraphAddMemsetNode(&nb, b, NULL, 0, &m2, fx.ctx));
    cr_assert_eq(cuGraphExecUpdate(e, b, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(a));
    CK(cuGraphDestroy(b));
}

/* A memset whose memory was freed since its graph was instantiated, then
 * updated to new memory: refused (STANDIN_UPDATE_FREED=refuse, the
 * default) or taken (=accept). */
static void update_after_free(CUresult want)
{
    CUdeviceptr old, now;
    CK(cuMemAlloc(&old, 64));
    CUDA_MEMSET_NODE_PARAMS m = {.dst = old, .value = 7, .elementSize = 4, .width = 4, .height = 1};
    CUgraph a, b;
    CUgraphNode na, nb;
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphCreate(&a, 0));
    CK(cuGraphAddMemsetNode(&na, a, NULL, 0, &m, fx.ctx));
    CK(cuGraphInstantiate(&e, a, 0));
    CK(cuMemFree(old));
    CK(cuMemAlloc(&now, 64));
    m.dst = now;
    CK(cuGraphCreate(&b, 0));
    CK(cuGraphAddMemsetNode(&nb, b, NULL, 0, &m, fx.ctx));
    cr_assert_eq(cuGraphExecUpdate(e, b, &info), want);
    if (want == CUDA_SUCCESS) {
        launch(e);
        cr_assert_eq(read_int(now, 3), 7);
    } else {
        cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    }
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(a));
    CK(cuGraphDestroy(b));
    CK(cuMemFree(now));
}

Test(exec, update_of_an_operand_freed_since_is_refused_by_default, .init = setup)
{
    update_after_free(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
}

static void setup_update_freed_accepted(void)
{
    setenv("STANDIN_UPDATE_FREED", "accept", 1);
    setup();
}

Test(exec, update_of_an_operand_freed_since_is_taken_when_accepted,
     .init = setup_update_freed_accepted)
{
    update_after_free(CUDA_SUCCESS);
}

Test(exec, per_node_setters, .init = setup)
{
    struct chain a = chain(1, 2, 3, fx.add);
    CUgraphExec e;
    int v = 40, n = N;
    CUdeviceptr p = fx.buf;
    void *args[] = {&p, &v, &n};
    CK(cuGraphInstantiate(&e, a.g, 0));
    CUDA_KERNEL_NODE_PARAMS kp = {.func = fx.add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                  .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1, .kernelParams = args};
    CK(cuGraphExecKernelNodeSetParams(e, a.k1, &kp));
    CUDA_MEMSET_NODE_PARAMS m = {.dst = fx.buf2, .value = 9, .elementSize = 4, .width = N, .height = 1};
    CK(cuGraphExecMemsetNodeSetParams(e, a.ms, &m, fx.ctx));
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 41);
    cr_assert_eq(read_int(fx.buf2, 0), 9);
    CUDA_KERNEL_NODE_PARAMS got;
    CK(cuGraphKernelNodeGetParams(a.k1, &got));
    cr_assert_eq(*(int *)got.kernelParams[1], 2, "the graph's node is not modified");
    kp.func = fx.cdp;
    cr_assert_eq(cuGraphExecKernelNodeSetParams(e, a.k1, &kp), CUDA_ERROR_INVALID_VALUE);
    m.height = 2;
    m.pitch = N * 4;
    cr_assert_eq(cuGraphExecMemsetNodeSetParams(e, a.ms, &m, fx.ctx), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){fx.buf2, 0, 11, 4, N, 1, fx.ctx};
    CK(cuGraphExecNodeSetParams(e, a.ms, &np));
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    cr_assert_eq(cuGraphExecNodeSetParams(e, a.ms, &np), CUDA_ERROR_INVALID_VALUE, "type differs");
    CK(cuGraphNodeSetEnabled(e, a.k1, 0));
    unsigned enabled = 1;
    CK(cuGraphNodeGetEnabled(e, a.k1, &enabled));
    cr_assert_eq(enabled, 0);
    launch(e);
    cr_assert_eq(read_int(fx.buf, 0), 1, "a disabled node does nothing");
    cr_assert_eq(read_int(fx.buf2, 0), 11);
    struct chain other = chain(1, 2, 3, fx.add);
    cr_assert_eq(cuGraphExecKernelNodeSetParams(e, other.k1, &kp), CUDA_ERROR_INVALID_VALUE,
                 "a node of another graph");
    /* after a whole-graph update the nodes are still those of the instantiating graph */
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate(e, other.g, &info));
    kp.func = fx.add;
    CK(cuGraphExecKernelNodeSetParams(e, a.k1, &kp));
    cr_assert_eq(cuGraphExecKernelNodeSetParams(e, other.k1, &kp), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(other.g));
    CK(cuGraphDestroy(a.g));
}

Test(exec, setters_of_other_node_kinds, .init = setup)
{
    CUgraph g;
    CUgraphNode c, h, er;
    CUevent ev, ev2;
    int host[N] = {0};
    CK(cuEventCreate(&ev, 0));
    CK(cuEventCreate(&ev2, 0));
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D cp = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = fx.buf,
                        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host,
                        .WidthInBytes = 16, .Height = 1, .Depth = 1};
    CK(cuGraphAddMemcpyNode(&c, g, NULL, 0, &cp, fx.ctx));
    CUDA_HOST_NODE_PARAMS hp = {nothing, NULL};
    CK(cuGraphAddHostNode(&h, g, &c, 1, &hp));
    CK(cuGraphAddEventRecordNode(&er, g, &h, 1, ev));
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    cp.srcDevice = fx.buf2;
    CK(cuGraphExecMemcpyNodeSetParams(e, c, &cp, fx.ctx));
    CK(cuGraphExecHostNodeSetParams(e, h, &hp));
    CK(cuGraphExecEventRecordNodeSetEvent(e, er, ev2));
    CK(cuMemsetD32(fx.buf2, 12, N));
    launch(e);
    standin_async_drain();
    cr_assert_eq(host[3], 12);
    CK(cuEventQuery(ev2));
    cp.Height = 2;
    cp.srcPitch = cp.dstPitch = 16;
    cr_assert_eq(cuGraphExecMemcpyNodeSetParams(e, c, &cp, fx.ctx), CUDA_ERROR_INVALID_VALUE,
                 "only 1D copies are set per node");
    cr_assert_eq(cuGraphNodeSetEnabled(e, h, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}
