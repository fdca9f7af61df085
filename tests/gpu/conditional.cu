/*
 * conditional.cu - GPU test: conditional nodes made inside a stream capture,
 * captured anew every iteration, as the CUDA programming guide builds them
 * (and cuda.core's GraphBuilder, and the libraries that loop on the GPU).
 *
 * Each iteration captures, on one stream:
 *   init    copies the input into x, sets a counter to n (0..3, changing
 *           every iteration) and the WHILE handle to n > 0 on the device;
 *   WHILE   a conditional node added to the capture's graph
 *           (cudaStreamGetCaptureInfo, cudaGraphConditionalHandleCreate,
 *           cudaGraphAddNode, cudaStreamUpdateCaptureDependencies), its
 *           body captured on a second stream with
 *           cudaStreamBeginCaptureToGraph: x = fma(x, a, 1), the counter
 *           counted down, the handle set to counter > 0;
 *   IF      a second conditional node whose handle's default value (set at
 *           creation, cudaGraphCondAssignDefault) is 1 every third
 *           iteration: its body adds b to x;
 *   finish  out = x * c.
 * then instantiates, launches, copies out back, destroys exec and graph, and
 * checks every element against a bit-exact host reference. Scalars, the
 * loop count and the IF's default value change every iteration.
 *
 * Before the loop, a probe the program makes for itself (not a recap
 * test): two graphs captured this way, the first instantiated and updated
 * with the second by cudaGraphExecUpdate. It prints the driver's answer
 * (do new conditional handles and default values update?) and, where it
 * succeeds, whether the updated executable graph computed the second
 * graph's result. recap leaves a program's own updates alone, so this line
 * is the same under recap.
 *
 * Proves, run plain and under recap (stdout compared byte for byte, recap's
 * log read by run_all.sh): graphs holding conditional nodes built during a
 * capture give bit-identical results under recap, with self-recording on or
 * off, and recap serves their instantiations as the driver allows.
 * Exit 0 right, 1 a CUDA error or a wrong result, 77 SKIP (no device).
 */
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_test.h"

namespace {

constexpr int kIterations = 200;
constexpr int kElements = 1 << 14;
constexpr int kBlock = 256;
constexpr int kGrid = 16; /* grid-stride */

__global__ void init_kernel(const float *in, float *x, int *counter, int n,
                            cudaGraphConditionalHandle loop)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kElements; i += gridDim.x * blockDim.x)
        x[i] = in[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *counter = n;
        cudaGraphSetConditional(loop, n > 0);
    }
}

__global__ void loop_body(float *x, float a, int *counter, cudaGraphConditionalHandle loop)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kElements; i += gridDim.x * blockDim.x)
        x[i] = __fmaf_rn(x[i], a, 1.0f);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        int left = --*counter;
        cudaGraphSetConditional(loop, left > 0);
    }
}

__global__ void add_kernel(float *x, float b)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kElements; i += gridDim.x * blockDim.x)
        x[i] = __fadd_rn(x[i], b);
}

__global__ void finish_kernel(const float *x, float *out, float c)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kElements; i += gridDim.x * blockDim.x)
        out[i] = __fmul_rn(x[i], c);
}

struct step {
    int loops;       /* WHILE body runs this many times */
    unsigned add;    /* the IF's default value */
    float a, b, c;
};

step step_of(int it)
{
    return step{ it % 4, it % 3 == 0 ? 1u : 0u, 1.0f + 0.03125f * (float)(it % 5),
                 0.5f * (float)(it % 7) - 1.0f, 0.75f + 0.0625f * (float)(it % 3) };
}

struct device_state {
    float *in, *x, *out;
    int *counter;
    cudaStream_t stream, body_stream;
};

/* Adds a conditional node at the capture's current dependencies, makes it
 * the capture's only dependency and returns its body graph. */
cudaGraph_t add_conditional(cudaStream_t stream, cudaGraphConditionalHandle handle,
                            cudaGraphConditionalNodeType type)
{
    cudaStreamCaptureStatus status;
    cudaGraph_t graph = nullptr;
    const cudaGraphNode_t *deps = nullptr;
    const cudaGraphEdgeData *edges = nullptr;
    size_t ndeps = 0;
    CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &deps, &edges, &ndeps));
    if (status != cudaStreamCaptureStatusActive) {
        fprintf(stderr, "capture not active (%d) while adding a conditional node\n", (int)status);
        exit(1);
    }
    cudaGraphNodeParams params = { cudaGraphNodeTypeConditional };
    params.conditional.handle = handle;
    params.conditional.type = type;
    params.conditional.size = 1;
    cudaGraphNode_t node;
    CUDA_CHECK(cudaGraphAddNode(&node, graph, deps, edges, ndeps, &params));
    CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1,
                                                   cudaStreamSetCaptureDependencies));
    return params.conditional.phGraph_out[0];
}

/* Captures one iteration's graph (see the file comment). */
cudaGraph_t capture_step(const device_state &d, const step &s)
{
    cudaGraph_t graph = nullptr, capturing = nullptr;
    cudaStreamCaptureStatus status;
    CUDA_CHECK(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaStreamGetCaptureInfo(d.stream, &status, nullptr, &capturing, nullptr, nullptr,
                                        nullptr));
    cudaGraphConditionalHandle loop, add;
    CUDA_CHECK(cudaGraphConditionalHandleCreate(&loop, capturing, 0, 0));
    CUDA_CHECK(cudaGraphConditionalHandleCreate(&add, capturing, s.add, cudaGraphCondAssignDefault));

    init_kernel<<<kGrid, kBlock, 0, d.stream>>>(d.in, d.x, d.counter, s.loops, loop);
    CUDA_CHECK(cudaGetLastError());

    cudaGraph_t body = add_conditional(d.stream, loop, cudaGraphCondTypeWhile);
    CUDA_CHECK(cudaStreamBeginCaptureToGraph(d.body_stream, body, nullptr, nullptr, 0,
                                             cudaStreamCaptureModeGlobal));
    loop_body<<<kGrid, kBlock, 0, d.body_stream>>>(d.x, s.a, d.counter, loop);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(d.body_stream, &body));

    body = add_conditional(d.stream, add, cudaGraphCondTypeIf);
    CUDA_CHECK(cudaStreamBeginCaptureToGraph(d.body_stream, body, nullptr, nullptr, 0,
                                             cudaStreamCaptureModeGlobal));
    add_kernel<<<kGrid, kBlock, 0, d.body_stream>>>(d.x, s.b);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(d.body_stream, &body));

    finish_kernel<<<kGrid, kBlock, 0, d.stream>>>(d.x, d.out, s.c);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(d.stream, &graph));
    return graph;
}

void reference(const std::vector<float> &in, const step &s, std::vector<float> &out)
{
    out.resize(in.size());
    for (size_t i = 0; i < in.size(); i++) {
        float x = in[i];
        for (int k = 0; k < s.loops; k++)
            x = std::fmaf(x, s.a, 1.0f);
        if (s.add)
            x = x + s.b;
        out[i] = x * s.c;
    }
}

/* Counts the elements of `got` that differ from the reference of `s`. */
int check(const device_state &d, const std::vector<float> &in, const step &s,
          std::vector<float> &got, uint64_t *hash)
{
    std::vector<float> want;
    reference(in, s, want);
    CUDA_CHECK(cudaMemcpy(got.data(), d.out, sizeof(float) * kElements, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < kElements; i++)
        wrong += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    if (hash)
        *hash = fnv1a64(*hash, got.data(), sizeof(float) * kElements);
    return wrong;
}

/* The program's own update of one conditional graph with another. */
void probe_update(const device_state &d, const std::vector<float> &in)
{
    std::vector<float> got(kElements);
    step first = step_of(3), second = step_of(6); /* 3 loops, IF on; 2 loops, IF on */
    second.add = 0;                                /* the IF's default value changes */
    cudaGraph_t g1 = capture_step(d, first), g2 = capture_step(d, second);
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g1, 0));
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    cudaError_t err = cudaGraphExecUpdate(exec, g2, &info);
    (void)cudaGetLastError();
    int wrong = -1;
    if (err == cudaSuccess) {
        CUDA_CHECK(cudaGraphLaunch(exec, d.stream));
        CUDA_CHECK(cudaStreamSynchronize(d.stream));
        wrong = check(d, in, second, got, nullptr);
    }
    printf("probe: cudaGraphExecUpdate with new conditional handles and default values: %s "
           "(result %d); wrong elements after launch: %d\n",
           cudaGetErrorName(err), (int)info.result, wrong);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(g1));
    CUDA_CHECK(cudaGraphDestroy(g2));
}

} // namespace

int main()
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("SKIP: no CUDA device\n");
        return GPU_TEST_EXIT_SKIP;
    }
    device_state d;
    CUDA_CHECK(cudaMalloc(&d.in, sizeof(float) * kElements));
    CUDA_CHECK(cudaMalloc(&d.x, sizeof(float) * kElements));
    CUDA_CHECK(cudaMalloc(&d.out, sizeof(float) * kElements));
    CUDA_CHECK(cudaMalloc(&d.counter, sizeof(int)));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d.body_stream, cudaStreamNonBlocking));
    std::vector<float> in(kElements), got(kElements);
    for (int i = 0; i < kElements; i++)
        in[i] = (float)((i * 37) % 101) / 64.0f - 0.75f;
    CUDA_CHECK(cudaMemcpy(d.in, in.data(), sizeof(float) * kElements, cudaMemcpyHostToDevice));

    probe_update(d, in);

    uint64_t hash = FNV1A64_INIT;
    int mismatches = 0;
    for (int it = 0; it < kIterations; it++) {
        step s = step_of(it);
        cudaGraph_t graph = capture_step(d, s);
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaGraphLaunch(exec, d.stream));
        CUDA_CHECK(cudaStreamSynchronize(d.stream));
        int wrong = check(d, in, s, got, &hash);
        if (wrong && !mismatches)
            fprintf(stderr, "iteration %d: %d elements differ from the host reference\n", it, wrong);
        mismatches += wrong != 0;
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        if ((it + 1) % 20 == 0)
            printf("iteration %3d hash %016llx\n", it + 1, (unsigned long long)hash);
    }
    printf("final iterations %d hash %016llx mismatches %d\n", kIterations,
           (unsigned long long)hash, mismatches);
    return mismatches ? 1 : 0;
}
