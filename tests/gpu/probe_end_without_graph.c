/*
 * probe_end_without_graph.c - what driver 580 does with a capture ended
 * without wanting its graph, and with a capture graph cut back and captured
 * into again (tests/standin/READINGS.md, "Other measured facts"). Not part
 * of run_all.sh: a probe, run by hand on a GPU machine, no recap:
 *
 *   gcc -I/usr/local/cuda/include tests/gpu/probe_end_without_graph.c \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/probe && /tmp/probe
 *
 * Driver 580.159 (H200), 2026-12-02: a NULL status is refused
 * (CUDA_ERROR_INVALID_VALUE); an end with a NULL graph succeeds and the
 * stream stops capturing; the graph a query handed out survives it with
 * every node (byte 2); the query's graph is the end's; after the later
 * nodes are destroyed, a capture into the graph with the kept node as
 * dependency follows it (2 nodes, 1 edge, byte 9).
 */
#include <cuda.h>
#include <stdio.h>
#define P(x) do { CUresult r_ = (x); printf("%-64s -> %d\n", #x, (int)r_); } while (0)
int main(void)
{
    CUdevice d; CUcontext c; CUstream s; CUdeviceptr p; CUgraph g = NULL, g2 = NULL; size_t n = 0;
    CUstreamCaptureStatus st = 99; cuuint64_t id = 0;
    cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); cuMemAlloc(&p, 1 << 20);
    /* 0: a NULL status */
    P(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    P(cuStreamGetCaptureInfo(s, NULL, NULL, &g, NULL, NULL, NULL));
    P(cuStreamEndCapture(s, &g));
    P(cuGraphDestroy(g));
    /* 1: graph asked at begin, End(NULL): does the graph survive? */
    P(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    P(cuStreamGetCaptureInfo(s, &st, &id, &g, NULL, NULL, NULL));
    printf("graph %p status %d\n", (void *)g, (int)st);
    P(cuMemsetD8Async(p, 1, 1 << 20, s));
    P(cuMemsetD8Async(p, 2, 1 << 20, s));
    P(cuStreamEndCapture(s, NULL));
    n = 0; P(cuGraphGetNodes(g, NULL, &n)); printf("nodes after End(NULL) %zu\n", n);
    CUgraphExec e = NULL; P(cuGraphInstantiate(&e, g, 0)); P(cuGraphLaunch(e, s)); P(cuStreamSynchronize(s));
    unsigned char b = 0; cuMemcpyDtoH(&b, p, 1); printf("byte %d (want 2)\n", b);
    P(cuGraphExecDestroy(e)); P(cuGraphDestroy(g));
    /* 2: graph asked at begin, End(&g2) */
    P(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    P(cuStreamGetCaptureInfo(s, &st, &id, &g, NULL, NULL, NULL));
    P(cuMemsetD8Async(p, 4, 1 << 20, s));
    P(cuStreamEndCapture(s, &g2)); printf("same graph %d\n", g == g2);
    P(cuGraphDestroy(g2));
    /* 3: trim: a graph of 3 memsets, destroy the last two, capture into it after the first */
    CUgraphNode nodes[8]; const CUgraphNode *deps = NULL; size_t nd = 0;
    P(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    P(cuMemsetD8Async(p, 5, 1 << 20, s));
    P(cuStreamGetCaptureInfo(s, &st, &id, &g, &deps, NULL, &nd));
    CUgraphNode first = nd ? deps[0] : NULL;
    P(cuMemsetD8Async(p, 6, 1 << 20, s));
    P(cuMemsetD8Async(p, 7, 1 << 20, s));
    P(cuStreamEndCapture(s, &g));
    n = 8; P(cuGraphGetNodes(g, nodes, &n)); printf("nodes %zu\n", n);
    for (size_t i = 0; i < n; i++) if (nodes[i] != first) P(cuGraphDestroyNode(nodes[i]));
    n = 0; P(cuGraphGetNodes(g, NULL, &n)); printf("after trim %zu\n", n);
    P(cuStreamBeginCaptureToGraph(s, g, &first, NULL, 1, CU_STREAM_CAPTURE_MODE_RELAXED));
    P(cuStreamGetCaptureInfo(s, &st, &id, &g2, &deps, NULL, &nd)); printf("graph same %d deps %zu dep0==first %d\n", g == g2, nd, nd ? deps[0] == first : -1);
    P(cuMemsetD8Async(p, 9, 1 << 20, s));
    P(cuStreamEndCapture(s, &g2)); printf("end same graph %d\n", g == g2);
    size_t ne = 0; P(cuGraphGetEdges(g, NULL, NULL, NULL, &ne)); n = 0; P(cuGraphGetNodes(g, NULL, &n)); printf("nodes %zu edges %zu\n", n, ne);
    P(cuGraphInstantiate(&e, g, 0)); P(cuGraphLaunch(e, s)); P(cuStreamSynchronize(s));
    cuMemcpyDtoH(&b, p, 1); printf("byte %d (want 9)\n", b);
    P(cuGraphExecDestroy(e)); P(cuGraphDestroy(g));
    return 0;
}
