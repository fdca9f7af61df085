/*
 * shapes.cu - a loop whose captured graph cycles through k shapes (a
 * dynamic batch), with every kind of node a real program mixes: a memset,
 * a fork onto a second stream through an event (a kernel there), N kernels
 * on the first, the join through an event, a device-to-device copy and a
 * host callback. Shape j of the cycle has N + 5 j kernels. Every iteration
 * captures, instantiates (or, hand-written, updates the executable graph
 * kept for that shape), launches, waits and destroys what it made.
 *
 * Usage: shapes --info
 *        shapes --kernels N --shapes K --iterations I --warmup W --handwritten 0|1
 * Prints "result median_ms=.. median_host_ms=.. instantiations=.. checksum=.."
 * (host: the iteration's time up to the wait, the CPU time in the API).
 */
#include <cuda_runtime.h>

#include <map>
#include <vector>

#include "bench_common.h"

__global__ void axpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

static void CUDART_CB count_host(void *data)
{
    ++*(long *)data;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        bench_print_info();
        return 0;
    }
    long kernels = 20, shapes = 3, iterations = 300, warmup = 30, handwritten = 0;
    bench_arg args[] = { { "--kernels", &kernels }, { "--shapes", &shapes },
                         { "--iterations", &iterations }, { "--warmup", &warmup },
                         { "--handwritten", &handwritten } };
    bench_parse_args(argc, argv, args, sizeof args / sizeof args[0],
                     "shapes --info | --kernels N --shapes K --iterations I --warmup W "
                     "--handwritten 0|1");
    const int n = 256;
    float *buf[3];
    for (auto &b : buf) {
        CUDA_CHECK(cudaMalloc(&b, n * sizeof(float)));
        CUDA_CHECK(cudaMemset(b, 0, n * sizeof(float)));
    }
    cudaStream_t s0, s1;
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    long host_calls = 0;
    std::map<long, cudaGraphExec_t> kept;   /* hand-written: one per shape */
    std::vector<double> wall_ms, host_ms;
    long instantiations = 0;

    for (long it = 0; it < warmup + iterations; it++) {
        long shape = it % shapes;
        long count = kernels + 5 * shape;
        float a = 1.0f / (float)(1 + it % 7);
        double t0 = bench_now_us();
        cudaGraph_t graph;
        cudaGraphExec_t exec = nullptr;
        CUDA_CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
        CUDA_CHECK(cudaMemsetAsync(buf[2], 0, n * sizeof(float), s0));
        CUDA_CHECK(cudaEventRecord(fork, s0));
        CUDA_CHECK(cudaStreamWaitEvent(s1, fork, 0));
        axpy<<<1, n, 0, s1>>>(0.5f, buf[0], buf[2], n);
        for (long k = 0; k < count; k++)
            axpy<<<1, n, 0, s0>>>(a, buf[0], buf[1], n);
        CUDA_CHECK(cudaEventRecord(join, s1));
        CUDA_CHECK(cudaStreamWaitEvent(s0, join, 0));
        CUDA_CHECK(cudaMemcpyAsync(buf[0], buf[2], n * sizeof(float), cudaMemcpyDeviceToDevice, s0));
        CUDA_CHECK(cudaLaunchHostFunc(s0, count_host, &host_calls));
        CUDA_CHECK(cudaStreamEndCapture(s0, &graph));
        if (handwritten) {
            auto found = kept.find(shape);
            bool updated = false;
            if (found != kept.end()) {
                cudaGraphExecUpdateResultInfo info;
                updated = cudaGraphExecUpdate(found->second, graph, &info) == cudaSuccess;
                if (!updated) {
                    (void)cudaGetLastError();
                    CUDA_CHECK(cudaGraphExecDestroy(found->second));
                    kept.erase(found);
                }
            }
            if (!updated) {
                CUDA_CHECK(cudaGraphInstantiate(&kept[shape], graph, 0));
                instantiations++;
            }
            exec = kept[shape];
        } else {
            CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            instantiations++;
        }
        CUDA_CHECK(cudaGraphLaunch(exec, s0));
        double t1 = bench_now_us();
        CUDA_CHECK(cudaStreamSynchronize(s0));
        if (!handwritten)
            CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        double t2 = bench_now_us();
        if (it >= warmup) {
            wall_ms.push_back((t2 - t0) / 1000.0);
            host_ms.push_back((t1 - t0) / 1000.0);
        }
    }
    for (auto &e : kept)
        CUDA_CHECK(cudaGraphExecDestroy(e.second));
    std::vector<float> host(n);
    uint64_t checksum = 0xcbf29ce484222325ULL;
    for (auto &b : buf) {
        CUDA_CHECK(cudaMemcpy(host.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
        checksum = fnv1a64(checksum, host.data(), sizeof(float) * n);
    }
    checksum = fnv1a64(checksum, &host_calls, sizeof host_calls);
    printf("result median_ms=%.4f median_host_ms=%.4f instantiations=%ld checksum=%016llx\n",
           bench_quantile(wall_ms, 0.5), bench_quantile(host_ms, 0.5), instantiations,
           (unsigned long long)checksum);
    return 0;
}
