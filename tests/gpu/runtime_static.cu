/*
 * runtime_static.cu - GPU test: a CUDA runtime program that captures its graph
 * anew every iteration, as a program without graph-update code does:
 * capture -> cudaGraphInstantiate -> cudaGraphLaunch -> destroy exec and graph.
 *
 * Proves, run plain and under recap (run_all.sh compares stdout byte for byte
 * and reads recap's log):
 *  - 200 iterations give bit-identical results with and without recap, while
 *    recap turns every instantiation after the first at a site into an update
 *    of the executable graph the program destroyed the iteration before;
 *  - arguments that change every iteration reach the GPU on every launch:
 *    scalars, an input pointer alternating between two buffers and an output
 *    pointer alternating between two others. Each result is checked against a
 *    bit-exact host reference, so stale parameters fail the program by itself;
 *  - phase 1 (iterations 0-99) captures a memset node and two kernels on one
 *    stream (cudaGraphInstantiate); phase 2 (100-199) forks onto a second
 *    stream and joins back through events (cudaGraphInstantiateWithFlags).
 *
 * Built twice by run_all.sh: nvcc default (static cudart) -> runtime_static,
 * and -cudart shared -> runtime_shared; both reach the driver through
 * cuGetProcAddress, which recap must answer.
 * Output: a checksum line every 20 iterations and a final line. Exit 0 when
 * every result matched, 1 on a CUDA error or a wrong result.
 */
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "affine_kernels.cuh"
#include "affine_ref.h"
#include "gpu_test.h"

namespace {

constexpr int kIterations = 200;
constexpr int kPhase2Start = 100;
constexpr int kElements = 1 << 16;
constexpr int kBlock = 256;
constexpr int kGrid = 64; /* grid-stride: fewer blocks than elements on purpose */
constexpr size_t kBytes = sizeof(float) * kElements;

struct buffers {
    float *in[2];
    float *out[2];
    float *tmp;
    float *tmp2;
};

/* Phase 1: one stream, a memset node and two kernels. */
void capture_single_stream(cudaStream_t s, const buffers &d, const float *in, float *out,
                           const affine_params &p, cudaGraph_t *graph)
{
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaMemsetAsync(d.tmp, 0, kBytes, s));
    affine_accumulate<<<kGrid, kBlock, 0, s>>>(in, d.tmp, p.a, p.b, kElements);
    CUDA_CHECK(cudaGetLastError());
    affine<<<kGrid, kBlock, 0, s>>>(d.tmp, out, p.a2, p.b2, kElements);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(s, graph));
}

/* Phase 2: fork onto s1 through an event, join back into s0 through another. */
void capture_fork_join(cudaStream_t s0, cudaStream_t s1, cudaEvent_t fork, cudaEvent_t join,
                       const buffers &d, const float *in, float *out, const affine_params &p,
                       cudaGraph_t *graph)
{
    CUDA_CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaEventRecord(fork, s0));
    CUDA_CHECK(cudaStreamWaitEvent(s1, fork, 0));
    affine<<<kGrid, kBlock, 0, s1>>>(in, d.tmp2, p.c, p.d, kElements);
    CUDA_CHECK(cudaGetLastError());
    affine<<<kGrid, kBlock, 0, s0>>>(in, d.tmp, p.a, p.b, kElements);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(join, s1));
    CUDA_CHECK(cudaStreamWaitEvent(s0, join, 0));
    combine<<<kGrid, kBlock, 0, s0>>>(d.tmp, d.tmp2, out, p.w, kElements);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(s0, graph));
}

void reference(int iter, const std::vector<float> &in, std::vector<float> &expect)
{
    const affine_params p = affine_params_for(iter);
    std::vector<float> t(kElements, 0.0f), z(kElements);
    if (iter < kPhase2Start) {
        affine_accumulate_ref(in.data(), t.data(), p.a, p.b, kElements);
        affine_ref(t.data(), expect.data(), p.a2, p.b2, kElements);
    } else {
        affine_ref(in.data(), z.data(), p.c, p.d, kElements);
        affine_ref(in.data(), t.data(), p.a, p.b, kElements);
        combine_ref(t.data(), z.data(), expect.data(), p.w, kElements);
    }
}

} // namespace

int main()
{
    cudaStream_t s0, s1;
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    buffers d;
    std::vector<float> host_in[2] = {std::vector<float>(kElements), std::vector<float>(kElements)};
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < kElements; i++)
            host_in[b][i] = affine_input_value(b, (size_t)i);
        CUDA_CHECK(cudaMalloc(&d.in[b], kBytes));
        CUDA_CHECK(cudaMemcpy(d.in[b], host_in[b].data(), kBytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMalloc(&d.out[b], kBytes));
        CUDA_CHECK(cudaMemset(d.out[b], 0, kBytes));
    }
    CUDA_CHECK(cudaMalloc(&d.tmp, kBytes));
    CUDA_CHECK(cudaMalloc(&d.tmp2, kBytes));

    std::vector<float> got(kElements), expect(kElements);
    uint64_t hash = FNV1A64_INIT;
    long mismatches = 0;
    for (int iter = 0; iter < kIterations; iter++) {
        const affine_params p = affine_params_for(iter);
        const int in_index = iter & 1, out_index = (iter >> 1) & 1;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        if (iter < kPhase2Start) {
            capture_single_stream(s0, d, d.in[in_index], d.out[out_index], p, &graph);
            CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        } else {
            capture_fork_join(s0, s1, fork, join, d, d.in[in_index], d.out[out_index], p, &graph);
            CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
        }
        CUDA_CHECK(cudaGraphLaunch(exec, s0));
        CUDA_CHECK(cudaStreamSynchronize(s0));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));

        CUDA_CHECK(cudaMemcpy(got.data(), d.out[out_index], kBytes, cudaMemcpyDeviceToHost));
        reference(iter, host_in[in_index], expect);
        for (int i = 0; i < kElements; i++) {
            if (std::memcmp(&got[i], &expect[i], sizeof(float)) != 0) {
                if (mismatches == 0)
                    fprintf(stderr, "iteration %d element %d: got %a, expected %a\n", iter, i,
                            (double)got[i], (double)expect[i]);
                mismatches++;
            }
        }
        hash = fnv1a64(hash, got.data(), kBytes);
        if ((iter + 1) % 20 == 0)
            printf("iteration %3d phase %d hash %016llx first %a last %a\n", iter + 1,
                   iter < kPhase2Start ? 1 : 2, (unsigned long long)hash, (double)got[0],
                   (double)got[kElements - 1]);
    }
    printf("final iterations %d hash %016llx mismatches %ld\n", kIterations,
           (unsigned long long)hash, mismatches);

    for (int b = 0; b < 2; b++) {
        CUDA_CHECK(cudaFree(d.in[b]));
        CUDA_CHECK(cudaFree(d.out[b]));
    }
    CUDA_CHECK(cudaFree(d.tmp));
    CUDA_CHECK(cudaFree(d.tmp2));
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaStreamDestroy(s0));
    CUDA_CHECK(cudaStreamDestroy(s1));
    return mismatches == 0 ? 0 : 1;
}
