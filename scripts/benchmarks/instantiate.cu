/*
 * instantiate.cu - measures one iteration of a capture loop over N
 * kernel launches, in the two ways a program can write it; the driver script
 * scripts/bench instantiate runs the first way also under recap.
 *
 *   plain (--handwritten 0): what a program without graph-update code does
 *     every iteration: capture N launches, cudaGraphInstantiate, launch,
 *     synchronise, destroy the exec and the graph.
 *   handwritten (--handwritten 1): the cure of the CUDA programming guide:
 *     capture, then cudaGraphExecUpdate into the exec kept from the previous
 *     iteration; instantiate only the first time or when the update fails.
 *
 * Every launch's arguments change every iteration (a value derived from the
 * iteration, and a buffer pointer alternating between two), so updates do
 * real work. The time of each iteration, capture to destroy, is taken on the
 * host after warm-up iterations, and so are its phases: the capture (begin
 * to end capture), the instantiation or update, the launch; the rest of the
 * host time is the destroys.
 *
 * Usage: instantiate --info
 *        instantiate --nodes N --iterations I --warmup W --handwritten 0|1
 * Prints: result nodes=N iterations=I handwritten=H median_ms=.. p10_ms=..
 *         p90_ms=.. median_host_ms=.. median_capture_ms=.. median_instantiate_ms=..
 *         median_launch_ms=..
 *         instantiations=.. checksum=<FNV-1a of the final buffers>
 * The checksum is the same for every way of running the same N and I: the
 * driver script checks it. Exit 0, or 1 on a CUDA error.
 */
#include "bench_common.h"

namespace {

__global__ void bump(float *data, float value, int index)
{
    data[index] = data[index] * 0.5f + value;
}

float value_for(long iteration, long node)
{
    return (float)((iteration * 7 + node) % 13) * 0.25f;
}

void capture(cudaStream_t stream, float *data, long nodes, long iteration, cudaGraph_t *graph)
{
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (long node = 0; node < nodes; node++)
        bump<<<1, 1, 0, stream>>>(data, value_for(iteration, node), (int)node);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(stream, graph));
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        bench_print_info();
        return 0;
    }
    long nodes = 100, iterations = 200, warmup = 20, handwritten = 0;
    bench_arg args[] = {{"--nodes", &nodes}, {"--iterations", &iterations},
                        {"--warmup", &warmup}, {"--handwritten", &handwritten}};
    bench_parse_args(argc, argv, args, sizeof args / sizeof args[0],
                     "instantiate --info | --nodes N --iterations I --warmup W "
                     "--handwritten 0|1");

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    float *buffers[2];
    for (float *&b : buffers) {
        CUDA_CHECK(cudaMalloc(&b, sizeof(float) * nodes));
        CUDA_CHECK(cudaMemset(b, 0, sizeof(float) * nodes));
    }

    /* wall: the whole iteration, the GPU's execution included (the program
     * waits for its results); host: the same iteration up to the wait, the
     * CPU time the loop spends in the CUDA API - what recap reduces. */
    std::vector<double> times_ms, host_ms, capture_ms, inst_ms, launch_ms;
    long instantiations = 0;
    cudaGraphExec_t kept = nullptr;
    for (long iteration = 0; iteration < warmup + iterations; iteration++) {
        const double start = bench_now_us();
        cudaGraph_t graph;
        capture(stream, buffers[iteration & 1], nodes, iteration, &graph);
        const double captured = bench_now_us();
        double instantiated, launched;
        if (!handwritten) {
            cudaGraphExec_t exec;
            CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            instantiations++;
            instantiated = bench_now_us();
            CUDA_CHECK(cudaGraphLaunch(exec, stream));
            launched = bench_now_us();
            CUDA_CHECK(cudaGraphExecDestroy(exec)); /* released when the launch completes */
            CUDA_CHECK(cudaGraphDestroy(graph));
        } else {
            if (kept != nullptr) {
                cudaGraphExecUpdateResultInfo info;
                if (cudaGraphExecUpdate(kept, graph, &info) != cudaSuccess) {
                    (void)cudaGetLastError(); /* the update error is not sticky: clear it */
                    CUDA_CHECK(cudaGraphExecDestroy(kept));
                    kept = nullptr;
                }
            }
            if (kept == nullptr) {
                CUDA_CHECK(cudaGraphInstantiate(&kept, graph, 0));
                instantiations++;
            }
            instantiated = bench_now_us();
            CUDA_CHECK(cudaGraphLaunch(kept, stream));
            launched = bench_now_us();
            CUDA_CHECK(cudaGraphDestroy(graph));
        }
        const double submitted = bench_now_us();
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (iteration >= warmup) {
            times_ms.push_back((bench_now_us() - start) / 1000.0);
            host_ms.push_back((submitted - start) / 1000.0);
            capture_ms.push_back((captured - start) / 1000.0);
            inst_ms.push_back((instantiated - captured) / 1000.0);
            launch_ms.push_back((launched - instantiated) / 1000.0);
        }
    }
    if (kept != nullptr)
        CUDA_CHECK(cudaGraphExecDestroy(kept));

    uint64_t checksum = FNV1A64_INIT;
    std::vector<float> host(nodes);
    for (float *b : buffers) {
        CUDA_CHECK(cudaMemcpy(host.data(), b, sizeof(float) * nodes, cudaMemcpyDeviceToHost));
        checksum = fnv1a64(checksum, host.data(), sizeof(float) * nodes);
        CUDA_CHECK(cudaFree(b));
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
    printf("result nodes=%ld iterations=%ld handwritten=%ld median_ms=%.4f p10_ms=%.4f "
           "p90_ms=%.4f median_host_ms=%.4f median_capture_ms=%.4f median_instantiate_ms=%.4f "
           "median_launch_ms=%.4f instantiations=%ld checksum=%016llx\n",
           nodes, iterations, handwritten, bench_quantile(times_ms, 0.5),
           bench_quantile(times_ms, 0.1), bench_quantile(times_ms, 0.9),
           bench_quantile(host_ms, 0.5), bench_quantile(capture_ms, 0.5),
           bench_quantile(inst_ms, 0.5), bench_quantile(launch_ms, 0.5), instantiations, (unsigned long long)checksum);
    return 0;
}
