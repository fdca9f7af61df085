/*
 * bench-node-setters.cu - what one node's new kernel arguments cost on this
 * driver, by the ways recap can bring an executable graph up to date after
 * a capture it recorded itself: cuGraphExecKernelNodeSetParams per node
 * (exec_set), or cuGraphKernelNodeSetParams per node (graph_set) and one
 * cuGraphExecUpdate (whole_update); and, for scale, a driver capture per
 * node. Chains of 100 and 1000 single-thread kernels, 5 rounds each (the
 * first is warm-up). Decides exec_reuse.c's per-node/whole choice.
 *
 *   nvcc -O2 -arch=sm_90 scripts/bench-node-setters.cu -o /tmp/bns -lcuda && /tmp/bns
 *
 * H200, driver 580.159 (13.0): exec_set 0.39-0.45 us, graph_set 0.076-0.095
 * us, whole_update 3.0 us at 100 nodes and 68-78 us at 1000, capture
 * 0.43-0.73 us a node.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
__global__ void bump(float *d, float v, int i) { d[i] += v; }
static double now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaStream_t s; cudaStreamCreate(&s); float *d; cudaMalloc(&d, 4096 * 4);
  for (int N : {100, 1000}) {
    cudaGraph_t g; cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < N; i++) bump<<<1, 1, 0, s>>>(d, 1.0f, i);
    cudaStreamEndCapture(s, &g);
    size_t n = 0; cuGraphGetNodes((CUgraph)g, NULL, &n); CUgraphNode *nodes = new CUgraphNode[n]; cuGraphGetNodes((CUgraph)g, nodes, &n);
    cudaGraphExec_t e; cudaGraphInstantiate(&e, g, 0);
    CUDA_KERNEL_NODE_PARAMS *p = new CUDA_KERNEL_NODE_PARAMS[n];
    for (size_t i = 0; i < n; i++) cuGraphKernelNodeGetParams((CUgraphNode)nodes[i], &p[i]);
    for (int rep = 0; rep < 5; rep++) {
      float v = rep; int idx = 0; void *args[3] = {&d, &v, &idx};
      double t0 = now();
      for (size_t i = 0; i < n; i++) { idx = i; p[i].kernelParams = args; cuGraphExecKernelNodeSetParams((CUgraphExec)e, nodes[i], &p[i]); }
      double t1 = now();
      for (size_t i = 0; i < n; i++) { idx = i; p[i].kernelParams = args; cuGraphKernelNodeSetParams(nodes[i], &p[i]); }
      double t2 = now();
      CUgraphExecUpdateResultInfo info; cuGraphExecUpdate((CUgraphExec)e, (CUgraph)g, &info);
      double t3 = now();
      cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
      for (int i = 0; i < N; i++) bump<<<1, 1, 0, s>>>(d, 1.0f, i);
      cudaGraph_t g2; cudaStreamEndCapture(s, &g2);
      double t4 = now();
      for (int i = 0; i < N; i++) { idx = i; }
      printf("N=%d exec_set %.3f us/node  graph_set %.3f us/node  whole_update %.1f us  capture %.3f us/node\n", N, (t1 - t0) / n, (t2 - t1) / n, t3 - t2, (t4 - t3) / n);
      cudaGraphDestroy(g2);
    }
  }
  return 0;
}
