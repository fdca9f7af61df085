/*
 * node_setters.cu - what new kernel arguments for every node of a
 * graph cost on this driver, by each way recap or a program can bring an
 * executable graph up to date. Every round gives every node a value it did
 * not hold before, in the graph and in the executable graph alike, so no
 * way can skip a node whose arguments it already has:
 *
 *   exec_set      cuGraphExecKernelNodeSetParams per node
 *   exec_generic  cuGraphExecNodeSetParams (CUgraphNodeParams) per node
 *   exec_extra    cuGraphExecKernelNodeSetParams per node, the arguments
 *                 packed in one buffer (`extra`) instead of a pointer each:
 *                 cheaper per call (0.32 against 0.36 us a node at 1000),
 *                 but the launch after it took 140 us against 60 after
 *                 exec_set - the driver finishes the buffer at the launch -
 *                 so recap keeps the pointers
 *   graph_set     cuGraphKernelNodeSetParams per node, then
 *   whole_update  one cuGraphExecUpdate from that same graph
 *   hand          capture a new graph of the new values, cuGraphExecUpdate
 *                 from it (hand_update), destroy it (hand_destroy): the
 *                 programming guide's loop
 *
 * and the launch that follows each way, host time of the call (launch) and
 * until the stream is idle (launch_wall): a driver may defer its writes to
 * the launch. Chains of 100 and 1000 single-thread kernels, 21 rounds each
 * (the first is warm-up); medians per node or per round. Decides
 * exec_reuse.c's per-node/whole choice.
 *
 *   scripts/bench node-setters   (builds this file with nvcc and runs it)
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void bump(float *d, float v, int i) { d[i] += v; }

static double now_us()
{
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::micro>(clock::now().time_since_epoch()).count();
}

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "bench node-setters: %s failed: %d\n", what, (int)r);
        exit(1);
    }
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

enum way { EXEC_SET, EXEC_GENERIC, EXEC_EXTRA, GRAPH_SET, WHOLE_UPDATE, HAND_CAPTURE, HAND_UPDATE,
           HAND_DESTROY, L_EXEC_SET, L_EXEC_EXTRA, L_GRAPH, L_HAND, W_EXEC_SET, W_EXEC_EXTRA,
           W_GRAPH, W_HAND, NWAYS };
static const char *const way_names[NWAYS] = {
    "exec_set us/node", "exec_generic us/node", "exec_extra us/node", "graph_set us/node", "whole_update us",
    "hand_capture us/node", "hand_update us", "hand_destroy us", "launch after exec_set us",
    "launch after exec_extra us", "launch after graph_set+update us", "launch after hand us",
    "launch_wall after exec_set us", "launch_wall after exec_extra us",
    "launch_wall after graph_set+update us", "launch_wall after hand us"};

int main()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d;
    cudaMalloc(&d, 4096 * sizeof(float));
    for (int N : {100, 1000}) {
        cudaGraph_t g;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        for (int i = 0; i < N; i++)
            bump<<<1, 1, 0, s>>>(d, 0.0f, i);
        cudaStreamEndCapture(s, &g);
        size_t n = 0;
        check(cuGraphGetNodes((CUgraph)g, NULL, &n), "cuGraphGetNodes");
        std::vector<CUgraphNode> nodes(n);
        check(cuGraphGetNodes((CUgraph)g, nodes.data(), &n), "cuGraphGetNodes");
        cudaGraphExec_t e;
        cudaGraphInstantiate(&e, g, 0);
        std::vector<CUDA_KERNEL_NODE_PARAMS> p(n);
        for (size_t i = 0; i < n; i++)
            check(cuGraphKernelNodeGetParams((CUgraphNode)nodes[i], &p[i]), "get params");
        std::vector<double> t[NWAYS];
        float v = 0.0f;
        int idx = 0;
        void *args[3] = {&d, &v, &idx};
        /* The launch after a way, host time of the call and until idle. */
        auto time_launch = [&](int round, int call_way, int wall_way) {
            double start = now_us();
            check(cuGraphLaunch((CUgraphExec)e, (CUstream)s), "launch");
            double called = now_us();
            cudaStreamSynchronize(s);
            if (round) {
                t[call_way].push_back(called - start);
                t[wall_way].push_back(now_us() - start);
            }
        };
        for (int round = 0; round < 21; round++) {
            double t0, t1;
            /* exec_set: new values straight into the executable graph. */
            v += 1.0f;
            t0 = now_us();
            for (size_t i = 0; i < n; i++) {
                idx = (int)i;
                p[i].kernelParams = args;
                check(cuGraphExecKernelNodeSetParams((CUgraphExec)e, nodes[i], &p[i]), "exec set");
            }
            t1 = now_us();
            if (round) t[EXEC_SET].push_back((t1 - t0) / n);
            time_launch(round, L_EXEC_SET, W_EXEC_SET);

            /* exec_extra: the arguments as the kernel's parameter buffer
             * (float *, float, int: offsets 0, 8, 12). */
            v += 1.0f;
            t0 = now_us();
            for (size_t i = 0; i < n; i++) {
                struct { float *d; float v; int i; } packed = {d, v, (int)i};
                size_t size = sizeof packed;
                void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed,
                                 CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
                CUDA_KERNEL_NODE_PARAMS q = p[i];
                q.kernelParams = nullptr;
                q.extra = extra;
                check(cuGraphExecKernelNodeSetParams((CUgraphExec)e, nodes[i], &q), "exec extra");
            }
            t1 = now_us();
            if (round) t[EXEC_EXTRA].push_back((t1 - t0) / n);
            time_launch(round, L_EXEC_EXTRA, W_EXEC_EXTRA);

            /* exec_generic: the same through cuGraphExecNodeSetParams. */
            v += 1.0f;
            t0 = now_us();
            for (size_t i = 0; i < n; i++) {
                idx = (int)i;
                CUgraphNodeParams gp = {};
                gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
                gp.kernel.func = p[i].func;
                gp.kernel.gridDimX = p[i].gridDimX, gp.kernel.gridDimY = p[i].gridDimY,
                gp.kernel.gridDimZ = p[i].gridDimZ;
                gp.kernel.blockDimX = p[i].blockDimX, gp.kernel.blockDimY = p[i].blockDimY,
                gp.kernel.blockDimZ = p[i].blockDimZ;
                gp.kernel.sharedMemBytes = p[i].sharedMemBytes;
                gp.kernel.kernelParams = args;
                check(cuGraphExecNodeSetParams((CUgraphExec)e, nodes[i], &gp), "exec generic");
            }
            t1 = now_us();
            if (round) t[EXEC_GENERIC].push_back((t1 - t0) / n);

            /* graph_set + whole_update: the graph's nodes, one update. */
            v += 1.0f;
            t0 = now_us();
            for (size_t i = 0; i < n; i++) {
                idx = (int)i;
                p[i].kernelParams = args;
                check(cuGraphKernelNodeSetParams(nodes[i], &p[i]), "graph set");
            }
            t1 = now_us();
            if (round) t[GRAPH_SET].push_back((t1 - t0) / n);
            CUgraphExecUpdateResultInfo info;
            t0 = now_us();
            check(cuGraphExecUpdate((CUgraphExec)e, (CUgraph)g, &info), "whole update");
            t1 = now_us();
            if (round) t[WHOLE_UPDATE].push_back(t1 - t0);
            time_launch(round, L_GRAPH, W_GRAPH);

            /* hand: a fresh capture of the new values, update, destroy. */
            v += 1.0f;
            t0 = now_us();
            cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
            for (int i = 0; i < N; i++)
                bump<<<1, 1, 0, s>>>(d, v, i);
            cudaGraph_t g2;
            cudaStreamEndCapture(s, &g2);
            t1 = now_us();
            if (round) t[HAND_CAPTURE].push_back((t1 - t0) / n);
            t0 = now_us();
            check(cuGraphExecUpdate((CUgraphExec)e, (CUgraph)g2, &info), "hand update");
            t1 = now_us();
            if (round) t[HAND_UPDATE].push_back(t1 - t0);
            time_launch(round, L_HAND, W_HAND);
            t0 = now_us();
            cudaGraphDestroy(g2);
            t1 = now_us();
            if (round) t[HAND_DESTROY].push_back(t1 - t0);
        }
        printf("N=%d", N);
        for (int w = 0; w < NWAYS; w++)
            printf("  %s=%.3f", way_names[w], median(t[w]));
        printf("\n");
        cudaGraphExecDestroy(e);
        cudaGraphDestroy(g);
    }
    return 0;
}
