/*
 * test_standin_graph.c - graphs built node by node: structure queries,
 * parameter copies, clones, child graphs, conditionals, user objects and
 * misuse of destroyed handles.
 */
#include "test_standin_common.h"

/* a -> b, a -> c, (b, c) -> d */
struct diamond {
    CUgraph g;
    CUgraphNode a, b, c, d;
};

static struct diamond diamond(void)
{
    struct diamond x;
    CK(cuGraphCreate(&x.g, 0));
    CK(add_kernel_node(&x.a, x.g, NULL, 0, fx.fill, fx.buf, 1));
    CK(add_kernel_node(&x.b, x.g, &x.a, 1, fx.add, fx.buf, 10));
    CK(add_kernel_node(&x.c, x.g, &x.a, 1, fx.fill, fx.buf2, 7));
    CUgraphNode bc[] = {x.b, x.c};
    CK(add_kernel_node(&x.d, x.g, bc, 2, fx.add, fx.buf2, 1));
    return x;
}

Test(graph, structure_queries, .init = setup)
{
    struct diamond x = diamond();
    CUgraphNode nodes[6] = {0}, from[5], to[5];
    CUgraphEdgeData edata[5];
    size_t n = 6;
    CK(cuGraphGetNodes(x.g, nodes, &n));
    cr_assert_eq(n, 4);
    cr_assert(nodes[0] == x.a && nodes[1] == x.b && nodes[2] == x.c && nodes[3] == x.d, "creation order");
    cr_assert_null(nodes[4], "a longer array is padded with NULL");
    n = 2;
    CK(cuGraphGetNodes(x.g, nodes, &n));
    cr_assert_eq(n, 2);
    CK(cuGraphGetRootNodes(x.g, nodes, &(size_t){1}));
    cr_assert_eq(nodes[0], x.a);
    n = 0;
    CK(cuGraphGetEdges(x.g, NULL, NULL, NULL, &n));
    cr_assert_eq(n, 4);
    n = 5;
    CK(cuGraphGetEdges(x.g, from, to, edata, &n));
    cr_assert_eq(n, 4);
    cr_assert(from[0] == x.a && to[0] == x.b);
    cr_assert(from[3] == x.c && to[3] == x.d);
    cr_assert_null(from[4]);
    cr_assert_eq(cuGraphGetEdges(x.g, from, NULL, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    typedef CUresult (*edges_v1)(CUgraph, CUgraphNode *, CUgraphNode *, size_t *);
    n = 4;
    CK(((edges_v1)sym("cuGraphGetEdges"))(x.g, from, to, &n));
    cr_assert_eq(to[2], x.d);
    n = 3;
    CK(cuGraphNodeGetDependentNodes(x.a, nodes, NULL, &n));
    cr_assert_eq(n, 2);
    cr_assert(nodes[0] == x.b && nodes[1] == x.c);
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(x.d, &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_KERNEL);
    CK(cuGraphRemoveDependencies(x.g, &x.c, &x.d, NULL, 1));
    cr_assert_eq(cuGraphRemoveDependencies(x.g, &x.c, &x.d, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphAddDependencies(x.g, &x.c, &x.d, NULL, 1));
    cr_assert_eq(cuGraphAddDependencies(x.g, &x.c, &x.d, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode dup[] = {x.a, x.a};
    CUgraphNode e;
    cr_assert_eq(add_kernel_node(&e, x.g, dup, 2, fx.add, fx.buf, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroyNode(x.c));
    n = 0;
    CK(cuGraphGetEdges(x.g, NULL, NULL, NULL, &n));
    cr_assert_eq(n, 2);
    CK(cuGraphDestroy(x.g));
}

Test(graph, kernel_parameters_are_copied, .init = setup)
{
    CUgraph g;
    CUgraphNode k;
    int v = 3, n = N;
    CUdeviceptr p = fx.buf;
    void *args[] = {&p, &v, &n};
    CUDA_KERNEL_NODE_PARAMS kp = {.func = fx.fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                  .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1, .kernelParams = args};
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode(&k, g, NULL, 0, &kp));
    v = 99;
    p = fx.buf2;
    CUDA_KERNEL_NODE_PARAMS got;
    CK(cuGraphKernelNodeGetParams(k, &got));
    cr_assert_eq(*(int *)got.kernelParams[1], 3);
    cr_assert_eq(*(CUdeviceptr *)got.kernelParams[0], fx.buf);
    cr_assert_eq(got.func, fx.fill);
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 3);
    cr_assert_eq(read_int(fx.buf2, 0), 0);
    kp.kernelParams = args; /* v = 99 into buf2 */
    CK(cuGraphKernelNodeSetParams(k, &kp));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf2, 0), 0, "the executable graph has its own copy");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf2, 0), 99);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

Test(graph, typed_parameters_round_trip, .init = setup)
{
    CUgraph g;
    CUgraphNode ms, mc, h, er, ew;
    CUevent ev;
    CK(cuEventCreate(&ev, 0));
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = {.dst = fx.buf, .value = 4, .elementSize = 4, .width = N, .height = 1};
    CK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, fx.ctx));
    CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = fx.buf,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = fx.buf2,
                       .WidthInBytes = N * sizeof(int), .Height = 1, .Depth = 1};
    CK(cuGraphAddMemcpyNode(&mc, g, &ms, 1, &c, fx.ctx));
    CUDA_HOST_NODE_PARAMS hp = {.fn = (CUhostFn)free, .userData = NULL};
    CK(cuGraphAddHostNode(&h, g, &mc, 1, &hp));
    CK(cuGraphAddEventRecordNode(&er, g, &h, 1, ev));
    CK(cuGraphAddEventWaitNode(&ew, g, &er, 1, ev));
    CUDA_MEMSET_NODE_PARAMS m2;
    CK(cuGraphMemsetNodeGetParams(ms, &m2));
    cr_assert_eq(m2.value, 4);
    m2.value = 6;
    CK(cuGraphMemsetNodeSetParams(ms, &m2));
    CUDA_MEMCPY3D c2;
    CK(cuGraphMemcpyNodeGetParams(mc, &c2));
    cr_assert_eq(c2.dstDevice, fx.buf2);
    CUDA_HOST_NODE_PARAMS hp2;
    CK(cuGraphHostNodeGetParams(h, &hp2));
    cr_assert_eq(hp2.fn, (CUhostFn)free);
    CUevent got;
    CK(cuGraphEventRecordNodeGetEvent(er, &got));
    cr_assert_eq(got, ev);
    CK(cuGraphEventWaitNodeGetEvent(ew, &got));
    cr_assert_eq(got, ev);
    cr_assert_eq(cuGraphHostNodeGetParams(ms, &hp2), CUDA_ERROR_INVALID_VALUE, "wrong node type");
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){fx.buf, 0, 8, 4, N, 1, fx.ctx};
    CK(cuGraphNodeSetParams(ms, &np));
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf2, N - 1), 8);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

Test(graph, clone_and_find, .init = setup)
{
    struct diamond x = diamond();
    CUgraph clone;
    CUgraphNode in_clone;
    CK(cuGraphClone(&clone, x.g));
    CK(cuGraphNodeFindInClone(&in_clone, x.c, clone));
    cr_assert_neq(in_clone, x.c);
    size_t n = 0;
    CK(cuGraphGetNodes(clone, NULL, &n));
    cr_assert_eq(n, 4);
    CK(cuGraphDestroyNode(x.d));
    n = 0;
    CK(cuGraphGetNodes(clone, NULL, &n));
    cr_assert_eq(n, 4, "the clone does not follow the original");
    CUDA_KERNEL_NODE_PARAMS kp;
    CK(cuGraphKernelNodeGetParams(in_clone, &kp));
    cr_assert_eq(*(int *)kp.kernelParams[1], 7);
    CK(cuGraphDestroy(x.g));
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, clone, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 11);
    cr_assert_eq(read_int(fx.buf2, 0), 8);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(clone));
}

Test(graph, child_graph_node, .init = setup)
{
    struct diamond x = diamond();
    CUgraph parent, inner;
    CUgraphNode child, before;
    CK(cuGraphCreate(&parent, 0));
    CK(add_kernel_node(&before, parent, NULL, 0, fx.fill, fx.buf2, 100));
    CK(cuGraphAddChildGraphNode(&child, parent, &before, 1, x.g));
    CK(cuGraphChildGraphNodeGetGraph(child, &inner));
    cr_assert_neq(inner, x.g, "the child is a clone");
    CK(cuGraphDestroy(x.g));
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, parent, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 3), 11);
    cr_assert_eq(read_int(fx.buf2, 3), 8);
    cr_assert_eq(cuGraphDestroy(inner), CUDA_ERROR_INVALID_VALUE, "owned by its node");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(parent));
}

/* A graph with one conditional node (`type`, one body) whose body fills
 * buf with v; its handle's default value is `on`, with `flags`
 * (CU_GRAPH_COND_ASSIGN_DEFAULT: assigned at every launch). */
static CUgraph cond_graph(unsigned on, unsigned flags, int v, CUgraphConditionalNodeType type,
                          CUgraphConditionalHandle *handle)
{
    CUgraph g;
    CUgraphConditionalHandle h;
    CUgraphNode cond, body_node;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphConditionalHandleCreate(&h, g, fx.ctx, on, flags));
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_CONDITIONAL};
    np.conditional.handle = h;
    np.conditional.type = type;
    np.conditional.size = 1;
    np.conditional.ctx = fx.ctx;
    CK(cuGraphAddNode(&cond, g, NULL, NULL, 0, &np));
    cr_assert_not_null(np.conditional.phGraph_out);
    CK(add_kernel_node(&body_node, np.conditional.phGraph_out[0], NULL, 0, fx.fill, fx.buf, v));
    if (handle)
        *handle = h;
    return g;
}

static CUgraph if_graph(unsigned on, int v, CUgraphConditionalNodeType type)
{
    return cond_graph(on, CU_GRAPH_COND_ASSIGN_DEFAULT, v, type, NULL);
}

Test(graph, conditional_node, .init = setup)
{
    CUgraph g = if_graph(1, 21, CU_GRAPH_COND_TYPE_IF);
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 21);
    CK(cuMemsetD32(fx.buf, 0, N));
    CK(cuGraphExecDestroy(e));
    CUgraph clone;
    cr_assert_eq(cuGraphClone(&clone, g), CUDA_ERROR_NOT_SUPPORTED);
    CK(cuGraphDestroy(g));
    /* a handle without ASSIGN_DEFAULT keeps what a kernel set */
    CUgraphConditionalHandle h;
    g = cond_graph(1, 0, 22, CU_GRAPH_COND_TYPE_IF, &h);
    CK(cuGraphInstantiate(&e, g, 0));
    cr_assert_eq(standin_set_conditional(h, 0), 0);
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 0);
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
}

/* Measured on driver 580 (tests/gpu/conditional.cu's probe): an executable
 * graph outlives its graph's conditional handles, and a whole update takes
 * over the new graph's handles with their default values. */
Test(graph, conditional_handles_follow_the_executable_graph, .init = setup)
{
    CUgraph g1 = if_graph(1, 31, CU_GRAPH_COND_TYPE_IF), g2 = if_graph(0, 32, CU_GRAPH_COND_TYPE_IF);
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g1, 0));
    CK(cuGraphDestroy(g1));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 31, "the handle outlives its graph");
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate(e, g2, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CK(cuMemsetD32(fx.buf, 0, N));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 0, "the new handle's default value (0) holds");
    CK(cuGraphDestroy(g2));
    CUgraph g3 = if_graph(1, 33, CU_GRAPH_COND_TYPE_WHILE);
    cr_assert_eq(cuGraphExecUpdate(e, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, "another type");
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g3));
    cr_assert_eq(standin_live_objects("cond_handle"), 0);
}

static int destroyed;
static void on_destroy(void *p)
{
    destroyed += *(int *)p;
}

Test(graph, user_objects, .init = setup)
{
    static int one = 1;
    CUuserObject u;
    CUgraph g, clone;
    CUgraphExec e;
    CUgraphNode k;
    CK(cuUserObjectCreate(&u, &one, on_destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    cr_assert_eq(standin_live_objects("user_object"), 1);
    CK(cuGraphCreate(&g, 0));
    CK(add_kernel_node(&k, g, NULL, 0, fx.fill, fx.buf, 1));
    CK(cuGraphRetainUserObject(g, u, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CK(cuGraphClone(&clone, g));
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(clone));
    standin_async_drain(); /* destructors run on a stand-in thread in async mode */
    cr_assert_eq(destroyed, 0, "the executable graph still holds a reference");
    CK(cuGraphExecDestroy(e));
    standin_async_drain(); /* destructors run on a stand-in thread in async mode */
    cr_assert_eq(destroyed, 1);
    cr_assert_eq(standin_live_objects("user_object"), 0);
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuUserObjectRetain(u, 1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    CK(cuUserObjectCreate(&u, &one, on_destroy, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphRetainUserObject(g, u, 1, 0));
    CK(cuUserObjectRelease(u, 2));
    standin_async_drain(); /* destructors run on a stand-in thread in async mode */
    cr_assert_eq(destroyed, 1);
    CK(cuGraphReleaseUserObject(g, u, 1));
    standin_async_drain(); /* destructors run on a stand-in thread in async mode */
    cr_assert_eq(destroyed, 2);
    CK(cuGraphDestroy(g));
}

/* STANDIN_CLONE_SHARES=1: driver 580's clone, as PyTorch's graphs showed
 * it (tests/gpu/probe_clone_write.py). Setting a clone's kernel node leaves
 * the original broken, and a clone of it; a node set again is whole. */
static void setup_clone_shares(void)
{
    setenv("STANDIN_CLONE_SHARES", "1", 1);
    setup();
}

static CUresult instantiate_and_drop(CUgraph g)
{
    CUgraphExec e;
    CUresult rc = cuGraphInstantiate(&e, g, 0);
    if (rc == CUDA_SUCCESS)
        CK(cuGraphExecDestroy(e));
    return rc;
}

static void set_own_params(CUgraphNode n)
{
    CUDA_KERNEL_NODE_PARAMS kp;
    CK(cuGraphKernelNodeGetParams(n, &kp));
    CK(cuGraphKernelNodeSetParams(n, &kp));
}

Test(graph, a_written_clone_breaks_what_it_shares, .init = setup_clone_shares)
{
    struct diamond x = diamond();
    CUgraph first, second, third;
    CUgraphNode c1, c2;
    unsigned long misuses = standin_misuse_count();
    CK(cuGraphClone(&first, x.g));
    cr_assert_eq(instantiate_and_drop(x.g), CUDA_SUCCESS, "a clone alone breaks nothing");
    CK(cuGraphNodeFindInClone(&c1, x.c, first));
    set_own_params(c1);
    cr_assert_eq(instantiate_and_drop(first), CUDA_SUCCESS, "the written clone is whole");
    cr_assert_eq(instantiate_and_drop(x.g), CUDA_ERROR_ILLEGAL_STATE,
                 "the original shares the written node's arguments");
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    CK(cuGraphClone(&second, x.g));
    cr_assert_eq(instantiate_and_drop(second), CUDA_ERROR_ILLEGAL_STATE,
                 "a clone of a broken graph is broken");
    CK(cuGraphNodeFindInClone(&c2, x.c, second));
    set_own_params(c2);
    cr_assert_eq(instantiate_and_drop(second), CUDA_SUCCESS, "a node set again is whole");
    CK(cuGraphClone(&third, first));
    CK(cuGraphDestroy(first));
    cr_assert_eq(instantiate_and_drop(third), CUDA_SUCCESS, "destroying a sharer breaks nothing");
    CK(cuGraphDestroy(third));
    CK(cuGraphDestroy(second));
    CK(cuGraphDestroy(x.g));
}

Test(graph, destroyed_handles_are_misuses, .init = setup)
{
    CUgraph g;
    CUgraphNode k;
    size_t n;
    CK(cuGraphCreate(&g, 0));
    CK(add_kernel_node(&k, g, NULL, 0, fx.fill, fx.buf, 1));
    long graphs = standin_live_objects("graph");
    CK(cuGraphDestroy(g));
    cr_assert_eq(standin_live_objects("graph"), graphs - 1);
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphGetNodes(g, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeType t;
    cr_assert_eq(cuGraphNodeGetType(k, &t), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses + 3);
    cr_assert_eq(cuGraphGetNodes((CUgraph)(uintptr_t)0x40, NULL, &n), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses + 3, "an unknown handle is no misuse");
}

Test(graph, graphs_are_charged_device_memory, .init = setup)
{
    size_t base = standin_device_memory_used();
    struct diamond x = diamond();
    size_t with_graph = standin_device_memory_used();
    cr_assert(with_graph > base);
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, x.g, 0));
    cr_assert_eq(standin_device_memory_used(), with_graph + 64 * 1024 + 4 * 4096);
    CK(cuGraphExecDestroy(e));
    cr_assert_eq(standin_device_memory_used(), with_graph);
    standin_set_device_memory(with_graph + 1024);
    cr_assert_eq(cuGraphInstantiate(&e, x.g, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuGraphDestroy(x.g));
    cr_assert_eq(standin_device_memory_used(), base);
}

Test(graph, explicit_memory_nodes, .init = setup)
{
    CUgraph g, g2;
    CUgraphNode a, k, f;
    CUDA_MEM_ALLOC_NODE_PARAMS ap = {0};
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.bytesize = N * sizeof(int);
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddMemAllocNode(&a, g, NULL, 0, &ap));
    cr_assert_neq(ap.dptr, 0);
    CK(add_kernel_node(&k, g, &a, 1, fx.fill, ap.dptr, 2));
    CK(cuGraphAddMemFreeNode(&f, g, &k, 1, ap.dptr));
    cr_assert_eq(cuGraphAddMemFreeNode(&f, g, &k, 1, ap.dptr), CUDA_ERROR_INVALID_VALUE, "freed twice");
    cr_assert_eq(cuGraphAddMemFreeNode(&f, g, &k, 1, fx.buf), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEM_ALLOC_NODE_PARAMS got;
    CK(cuGraphMemAllocNodeGetParams(a, &got));
    cr_assert_eq(got.dptr, ap.dptr);
    cr_assert_eq(got.bytesize, ap.bytesize);
    CUdeviceptr freed;
    CK(cuGraphMemFreeNodeGetParams(f, &freed));
    cr_assert_eq(freed, ap.dptr);
    cr_assert_eq(cuGraphDestroyNode(k), CUDA_ERROR_NOT_SUPPORTED, "graphs with memory nodes keep their nodes");
    CUgraphExec e;
    CK(cuGraphInstantiate(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    CK(cuGraphLaunch(e, fx.s1));
    CK(cuGraphExecDestroy(e));
    CK(cuGraphCreate(&g2, 0));
    CUgraphNode child;
    cr_assert_eq(cuGraphAddChildGraphNode(&child, g2, NULL, 0, g), CUDA_ERROR_INVALID_VALUE,
                 "memory nodes cannot be cloned into a child");
    CK(cuGraphDestroy(g2));
    CK(cuGraphDestroy(g));
}
