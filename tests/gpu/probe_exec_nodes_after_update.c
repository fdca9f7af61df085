/*
 * probe_exec_nodes_after_update.c - which graph's nodes an executable
 * graph's node setters take after a whole update (cuGraphExecUpdate) from
 * another graph: the stand-in's STANDIN_EXEC_NODES (tests/standin/READINGS.md).
 * The documentation says "the graph which was used to instantiate". Not
 * part of run_all.sh: a probe, no recap:
 *
 *   gcc -I/usr/local/cuda/include tests/gpu/probe_exec_nodes_after_update.c \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/probe && /tmp/probe
 *
 * Each line: the call and its result; "value" lines read back what a
 * launch wrote (the memset's value), showing which setter took effect.
 */
#include <cuda.h>
#include <stdio.h>
#define P(x) do { CUresult r_ = (x); printf("%-72s -> %d\n", #x, (int)r_); } while (0)

static CUgraph capture_memset(CUstream s, CUdeviceptr p, unsigned value, CUgraphNode *node)
{
    CUgraph g = NULL;
    size_t n = 1;
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
    cuMemsetD32Async(p, value, 256, s);
    cuStreamEndCapture(s, &g);
    cuGraphGetNodes(g, node, &n);
    return g;
}

static void launch_and_read(CUgraphExec e, CUstream s, CUdeviceptr p, const char *what)
{
    unsigned v = 0;
    CUresult l = cuGraphLaunch(e, s);
    cuStreamSynchronize(s);
    cuMemcpyDtoH(&v, p, sizeof v);
    printf("value after %-40s launch %d: %u\n", what, (int)l, v);
}

static CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr p, unsigned value)
{
    CUDA_MEMSET_NODE_PARAMS m = { 0 };
    m.dst = p;
    m.elementSize = 4;
    m.width = 256;
    m.height = 1;
    m.value = value;
    return m;
}

int main(void)
{
    CUdevice d; CUcontext c; CUstream s; CUdeviceptr p;
    CUgraphNode n0, n1;
    CUgraphExec e = NULL;
    CUgraphExecUpdateResultInfo info;
    cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); cuMemAlloc(&p, 1 << 20);
    CUgraph g0 = capture_memset(s, p, 10, &n0);
    CUgraph g1 = capture_memset(s, p, 11, &n1);
    P(cuGraphInstantiateWithFlags(&e, g0, 0));
    P(cuGraphExecUpdate(e, g1, &info));
    launch_and_read(e, s, p, "the update (11)");
    CUDA_MEMSET_NODE_PARAMS m = memset_params(p, 21);
    P(cuGraphExecMemsetNodeSetParams(e, n1, &m, c));
    launch_and_read(e, s, p, "a set through the update's node (21)");
    m = memset_params(p, 20);
    P(cuGraphExecMemsetNodeSetParams(e, n0, &m, c));
    launch_and_read(e, s, p, "a set through the first graph's node (20)");
    P(cuGraphDestroy(g0));
    m = memset_params(p, 31);
    P(cuGraphExecMemsetNodeSetParams(e, n1, &m, c));
    launch_and_read(e, s, p, "the first graph destroyed, update's (31)");
    P(cuGraphExecDestroy(e));
    P(cuGraphDestroy(g1));
    return 0;
}
