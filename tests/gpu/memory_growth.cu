/*
 * memory_growth.cu - GPU test: recap's caches keep device memory bounded over
 * a long capture loop.
 *
 * Runs the runtime capture loop (capture two kernels, instantiate, launch,
 * destroy exec and graph; arguments change every iteration) 100 times, then
 * 10,000 times more, and reports the device memory in use (cudaMemGetInfo:
 * total - free) after each stage. Results are checked bit-exact against the
 * host reference on every iteration, as in runtime_static.
 *
 * stdout holds only deterministic lines (checksums), compared with a plain
 * run; the memory figures go to stderr as
 *   memory: after N iterations: B bytes in use
 * and run_all.sh (check_run.py memory) fails the test when the growth from
 * the first stage to the second under recap exceeds the plain run's growth
 * by more than a few MiB.
 * Exit 0 when every result matched, 1 on a CUDA error or a wrong result.
 */
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "affine_kernels.cuh"
#include "affine_ref.h"
#include "gpu_test.h"

namespace {

constexpr int kElements = 256;
constexpr size_t kBytes = sizeof(float) * kElements;
constexpr int kStages[] = {100, 10000};

struct loop_state {
    cudaStream_t stream;
    float *in[2];
    float *tmp;
    float *out;
    std::vector<float> host_in[2];
    uint64_t hash;
    long mismatches;
};

void run_iterations(loop_state &st, int first, int count)
{
    std::vector<float> got(kElements), t(kElements), expect(kElements);
    for (int iter = first; iter < first + count; iter++) {
        const affine_params p = affine_params_for(iter);
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaStreamBeginCapture(st.stream, cudaStreamCaptureModeThreadLocal));
        affine<<<1, kElements, 0, st.stream>>>(st.in[iter & 1], st.tmp, p.a, p.b, kElements);
        CUDA_CHECK(cudaGetLastError());
        affine<<<1, kElements, 0, st.stream>>>(st.tmp, st.out, p.a2, p.b2, kElements);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaStreamEndCapture(st.stream, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaGraphLaunch(exec, st.stream));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        CUDA_CHECK(cudaMemcpyAsync(got.data(), st.out, kBytes, cudaMemcpyDeviceToHost, st.stream));
        CUDA_CHECK(cudaStreamSynchronize(st.stream));

        affine_ref(st.host_in[iter & 1].data(), t.data(), p.a, p.b, kElements);
        affine_ref(t.data(), expect.data(), p.a2, p.b2, kElements);
        if (std::memcmp(got.data(), expect.data(), kBytes) != 0) {
            if (st.mismatches == 0)
                fprintf(stderr, "iteration %d: result differs from the host reference\n", iter);
            st.mismatches++;
        }
        st.hash = fnv1a64(st.hash, got.data(), kBytes);
    }
}

} // namespace

int main()
{
    loop_state st;
    st.hash = FNV1A64_INIT;
    st.mismatches = 0;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
    for (int b = 0; b < 2; b++) {
        st.host_in[b].resize(kElements);
        for (int i = 0; i < kElements; i++)
            st.host_in[b][i] = affine_input_value(b, (size_t)i);
        CUDA_CHECK(cudaMalloc(&st.in[b], kBytes));
        CUDA_CHECK(cudaMemcpy(st.in[b], st.host_in[b].data(), kBytes, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaMalloc(&st.tmp, kBytes));
    CUDA_CHECK(cudaMalloc(&st.out, kBytes));

    int done = 0;
    for (int stage : kStages) {
        run_iterations(st, done, stage);
        done += stage;
        CUDA_CHECK(cudaDeviceSynchronize());
        size_t free_bytes, total_bytes;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        printf("after %d iterations: hash %016llx mismatches %ld\n", done,
               (unsigned long long)st.hash, st.mismatches);
        fflush(stdout);
        fprintf(stderr, "memory: after %d iterations: %zu bytes in use\n", done,
                total_bytes - free_bytes);
    }

    CUDA_CHECK(cudaFree(st.in[0]));
    CUDA_CHECK(cudaFree(st.in[1]));
    CUDA_CHECK(cudaFree(st.tmp));
    CUDA_CHECK(cudaFree(st.out));
    CUDA_CHECK(cudaStreamDestroy(st.stream));
    return st.mismatches == 0 ? 0 : 1;
}
