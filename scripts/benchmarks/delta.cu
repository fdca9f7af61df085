/*
 * delta.cu - measures, on the driver API, the two ways of bringing an
 * executable graph up to date when k of its n kernel nodes changed:
 *
 *   per-node: for each changed node, cuGraphKernelNodeGetParams_v2 on the
 *     node of the new graph, then cuGraphExecKernelNodeSetParams_v2 on the
 *     exec with the matching node of the graph the exec was instantiated
 *     from (what recap does after a recapture that reported the changes);
 *   whole: one cuGraphExecUpdate_v2 with the new graph.
 *
 * For n = 100 and 1000 (a straight chain of single-thread kernels captured
 * on one stream) and k = 1, 2, 5, 10, 20, 50, 100% of n (spread evenly), it
 * captures two changed graphs A and B that differ from each other in exactly
 * the k nodes, and times each way --reps times (median). Before every timed
 * update the exec is launched and synchronised (untimed), as in real use, and
 * every timed update changes exactly k nodes of the exec's current state
 * (the state goes B -> A -> B). Each way's result is first checked once: the
 * exec, launched after the update, must write the new graph's values.
 *
 * Prints a table per n and the crossover: the fraction k/n at which the
 * per-node way stops being cheaper than one whole update (interpolated
 * linearly between the measured fractions), and the smallest crossover over
 * all n, the value to put into recap's constant. Result lines:
 *   result nodes=N crossover_percent=P   (-1: never cheaper, 1000: always)
 *
 * Usage: delta --info | [--nodes N (0: 100 and 1000)] [--reps R]
 * Exit 0, 1 on a CUDA error or a wrong result after an update.
 */
#include <cuda.h>

#include "bench_common.h"

#include <cmath>

namespace {

const int kPercents[] = {1, 2, 5, 10, 20, 50, 100};

__global__ void set_value(float *out, float value, int index)
{
    out[index] = value;
}

struct chain {
    CUgraph graph = nullptr;
    std::vector<CUgraphNode> nodes; /* in capture order */
};

/* Captures one set_value launch per element of values, in order, and lists
 * the graph's nodes by walking the chain from its root. */
chain capture_chain(cudaStream_t stream, float *out, const std::vector<float> &values)
{
    chain c;
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (size_t j = 0; j < values.size(); j++)
        set_value<<<1, 1, 0, stream>>>(out, values[j], (int)j);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    c.graph = (CUgraph)graph;

    size_t count = 1;
    CUgraphNode node;
    CU_CHECK(cuGraphGetRootNodes(c.graph, &node, &count));
    if (count != 1) {
        fprintf(stderr, "bench delta: captured graph has %zu roots, expected a chain\n", count);
        exit(1);
    }
    for (;;) {
        c.nodes.push_back(node);
        CUgraphNode next;
        size_t dependents = 0;
        CU_CHECK(cuGraphNodeGetDependentNodes(node, nullptr, nullptr, &dependents));
        if (dependents == 0)
            break;
        if (dependents != 1) {
            fprintf(stderr, "bench delta: node with %zu dependents, expected a chain\n", dependents);
            exit(1);
        }
        CU_CHECK(cuGraphNodeGetDependentNodes(node, &next, nullptr, &dependents));
        node = next;
    }
    if (c.nodes.size() != values.size()) {
        fprintf(stderr, "bench delta: chain of %zu nodes, expected %zu\n", c.nodes.size(),
                values.size());
        exit(1);
    }
    return c;
}

void apply_per_node(CUgraphExec exec, const chain &original, const chain &changed,
                    const std::vector<int> &indices)
{
    CUDA_KERNEL_NODE_PARAMS params;
    for (int j : indices) {
        CU_CHECK(cuGraphKernelNodeGetParams(changed.nodes[j], &params));
        CU_CHECK(cuGraphExecKernelNodeSetParams(exec, original.nodes[j], &params));
    }
}

void apply_whole(CUgraphExec exec, const chain &changed)
{
    CUgraphExecUpdateResultInfo info;
    CU_CHECK(cuGraphExecUpdate(exec, changed.graph, &info));
}

void launch_and_wait(CUgraphExec exec, cudaStream_t stream)
{
    CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

void verify(float *out, const std::vector<float> &expect, const char *what, int n, int k)
{
    std::vector<float> got(expect.size());
    CUDA_CHECK(cudaMemcpy(got.data(), out, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
    if (std::memcmp(got.data(), expect.data(), sizeof(float) * got.size()) != 0) {
        fprintf(stderr, "bench delta: n=%d k=%d: after the %s update the graph wrote wrong values\n",
                n, k, what);
        exit(1);
    }
}

struct row {
    int percent, k;
    double per_node_us, whole_us;
};

/* k/n (percent) where per_node - whole crosses zero; -1: per-node never
 * cheaper (even at the smallest k), 1000: always cheaper (up to 100%). */
double crossover_percent(const std::vector<row> &rows, int n)
{
    if (rows.front().per_node_us >= rows.front().whole_us)
        return -1.0;
    for (size_t i = 1; i < rows.size(); i++) {
        const double d_lo = rows[i - 1].per_node_us - rows[i - 1].whole_us;
        const double d_hi = rows[i].per_node_us - rows[i].whole_us;
        if (d_hi >= 0) {
            const double f_lo = 100.0 * rows[i - 1].k / n, f_hi = 100.0 * rows[i].k / n;
            return f_lo + (f_hi - f_lo) * (-d_lo) / (d_hi - d_lo);
        }
    }
    return 1000.0;
}

double run_size(int n, long reps, cudaStream_t stream)
{
    float *out;
    CUDA_CHECK(cudaMalloc(&out, sizeof(float) * n));
    std::vector<float> base(n);
    for (int j = 0; j < n; j++)
        base[j] = (float)j;
    chain original = capture_chain(stream, out, base);
    CUgraphExec exec;
    CU_CHECK(cuGraphInstantiate(&exec, original.graph, 0));
    launch_and_wait(exec, stream);
    verify(out, base, "initial", n, 0);

    printf("\nn = %d kernel nodes, %ld timed updates per cell (median), exec launched before each\n",
           n, reps);
    printf("%8s %6s %14s %14s %14s %10s\n", "k/n", "k", "per-node us", "per node us",
           "whole us", "per/whole");
    std::vector<row> rows;
    for (int percent : kPercents) {
        const int k = std::max(1, (n * percent + 50) / 100);
        std::vector<int> indices;
        for (int t = 0; t < k; t++)
            indices.push_back((int)((long)t * n / k));
        std::vector<float> values_a = base, values_b = base;
        for (int j : indices) {
            values_a[j] = -(float)(j + 1);
            values_b[j] = (float)j + 0.5f;
        }
        chain a = capture_chain(stream, out, values_a);
        chain b = capture_chain(stream, out, values_b);

        /* Back to the original values first: the last row left other nodes
         * changed. Then each way once, checked; leaves the exec in state B. */
        apply_whole(exec, original);
        apply_per_node(exec, original, a, indices);
        launch_and_wait(exec, stream);
        verify(out, values_a, "per-node", n, k);
        apply_whole(exec, b);
        launch_and_wait(exec, stream);
        verify(out, values_b, "whole", n, k);

        std::vector<double> per_node, whole;
        for (long r = -3; r < reps; r++) { /* three warm-up rounds */
            double t0, t1, t2, t3;
            launch_and_wait(exec, stream);
            if (r % 2 == 0) { /* B -> A per node, A -> B whole */
                t0 = bench_now_us();
                apply_per_node(exec, original, a, indices);
                t1 = bench_now_us();
                launch_and_wait(exec, stream);
                t2 = bench_now_us();
                apply_whole(exec, b);
                t3 = bench_now_us();
            } else { /* B -> A whole, A -> B per node */
                t2 = bench_now_us();
                apply_whole(exec, a);
                t3 = bench_now_us();
                launch_and_wait(exec, stream);
                t0 = bench_now_us();
                apply_per_node(exec, original, b, indices);
                t1 = bench_now_us();
            }
            if (r >= 0) {
                per_node.push_back(t1 - t0);
                whole.push_back(t3 - t2);
            }
        }
        row rw = {percent, k, bench_quantile(per_node, 0.5), bench_quantile(whole, 0.5)};
        rows.push_back(rw);
        printf("%7d%% %6d %14.2f %14.3f %14.2f %10.2f\n", percent, k, rw.per_node_us,
               rw.per_node_us / k, rw.whole_us, rw.per_node_us / rw.whole_us);
        CU_CHECK(cuGraphDestroy(a.graph));
        CU_CHECK(cuGraphDestroy(b.graph));
    }
    const double crossover = crossover_percent(rows, n);
    if (crossover < 0)
        printf("crossover n=%d: per-node is never cheaper (not even at k=%d)\n", n, rows[0].k);
    else if (crossover > 100)
        printf("crossover n=%d: per-node is cheaper up to 100%% of nodes changed\n", n);
    else
        printf("crossover n=%d: per-node is cheaper below %.1f%% of nodes changed\n", n, crossover);

    CU_CHECK(cuGraphExecDestroy(exec));
    CU_CHECK(cuGraphDestroy(original.graph));
    CUDA_CHECK(cudaFree(out));
    return crossover;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        bench_print_info();
        return 0;
    }
    long nodes = 0, reps = 51;
    bench_arg args[] = {{"--nodes", &nodes}, {"--reps", &reps}};
    bench_parse_args(argc, argv, args, sizeof args / sizeof args[0],
                     "delta --info | [--nodes N (0: 100 and 1000)] [--reps R]");
    if (reps < 1 || nodes < 0) {
        fprintf(stderr, "bench delta: need reps >= 1 and nodes >= 0\n");
        return 2;
    }
    CUDA_CHECK(cudaFree(nullptr)); /* the runtime's primary context becomes current */
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    std::vector<int> sizes;
    if (nodes > 0)
        sizes.push_back((int)nodes);
    else
        sizes = {100, 1000};
    std::vector<double> crossovers;
    for (int n : sizes)
        crossovers.push_back(run_size(n, reps, stream));
    printf("\n");
    double smallest = 1e9;
    for (size_t i = 0; i < sizes.size(); i++) {
        smallest = std::min(smallest, crossovers[i]);
        printf("result nodes=%d crossover_percent=%.1f\n", sizes[i], crossovers[i]);
    }
    if (smallest < 0)
        printf("summary: per-node updates did not pay even at the smallest k for some n; "
               "use whole updates\n");
    else if (smallest > 100)
        printf("summary: per-node updates were cheaper at every measured fraction\n");
    else
        printf("summary: per-node cheaper below %.1f%% of nodes changed (smallest over n); "
               "use a whole cuGraphExecUpdate above\n", smallest);
    CUDA_CHECK(cudaStreamDestroy(stream));
    return 0;
}
