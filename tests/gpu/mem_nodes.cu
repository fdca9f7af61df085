/*
 * mem_nodes.cu - GPU test: a capture loop that allocates inside the capture
 * (stream-ordered allocation: cudaMallocAsync / cudaFreeAsync become memory
 * allocation and free nodes), as CUDA C++ code that keeps its scratch space
 * in the graph does.
 *
 * Each of 200 iterations captures: allocate a scratch buffer, a kernel into
 * it, a kernel from it into the output, free the scratch; then instantiates,
 * launches, waits, checks the output bit for bit against the host reference
 * and destroys the executable graph and the graph. The first 100 iterations
 * use the default instantiation; the next 100 instantiate with
 * cudaGraphInstantiateFlagAutoFreeOnLaunch. Scalars change every iteration.
 *
 * The driver allows at most one executable graph of a graph with memory
 * nodes at a time; it updates such executables (driver 580, measured: 198
 * of 199 instantiations served by an update), so run_all.sh requires
 * recap's usual reuse here, while recap records nothing itself for such a
 * site (the program holds the allocation's address). All of it must stay
 * invisible: stdout (checksums) identical to a plain run, every result
 * exact, and the device memory in use after each stage (stderr, "memory:"
 * lines) bounded as for memory_growth.
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
constexpr int kStages[] = {100, 100};

} // namespace

int main()
{
    cudaStream_t stream;
    float *in[2], *out;
    std::vector<float> host_in[2], got(kElements), t(kElements), expect(kElements);
    uint64_t hash = FNV1A64_INIT;
    long mismatches = 0;

    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int b = 0; b < 2; b++) {
        host_in[b].resize(kElements);
        for (int i = 0; i < kElements; i++)
            host_in[b][i] = affine_input_value(b, (size_t)i);
        CUDA_CHECK(cudaMalloc(&in[b], kBytes));
        CUDA_CHECK(cudaMemcpy(in[b], host_in[b].data(), kBytes, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaMalloc(&out, kBytes));

    int iter = 0;
    for (size_t stage = 0; stage < sizeof kStages / sizeof kStages[0]; stage++) {
        const unsigned long long flags = stage == 0 ? 0 : cudaGraphInstantiateFlagAutoFreeOnLaunch;
        for (int end = iter + kStages[stage]; iter < end; iter++) {
            const affine_params p = affine_params_for(iter);
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            float *scratch = nullptr;
            CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
            CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void **>(&scratch), kBytes, stream));
            affine<<<1, kElements, 0, stream>>>(in[iter & 1], scratch, p.a, p.b, kElements);
            CUDA_CHECK(cudaGetLastError());
            affine<<<1, kElements, 0, stream>>>(scratch, out, p.a2, p.b2, kElements);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaFreeAsync(scratch, stream));
            CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
            CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec, graph, flags));
            CUDA_CHECK(cudaGraphLaunch(exec, stream));
            CUDA_CHECK(cudaMemcpyAsync(got.data(), out, kBytes, cudaMemcpyDeviceToHost, stream));
            CUDA_CHECK(cudaStreamSynchronize(stream));
            CUDA_CHECK(cudaGraphExecDestroy(exec));
            CUDA_CHECK(cudaGraphDestroy(graph));

            affine_ref(host_in[iter & 1].data(), t.data(), p.a, p.b, kElements);
            affine_ref(t.data(), expect.data(), p.a2, p.b2, kElements);
            if (std::memcmp(got.data(), expect.data(), kBytes) != 0) {
                if (mismatches == 0)
                    fprintf(stderr, "iteration %d: result differs from the host reference\n", iter);
                mismatches++;
            }
            hash = fnv1a64(hash, got.data(), kBytes);
        }
        CUDA_CHECK(cudaDeviceSynchronize());
        size_t free_bytes, total_bytes;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        printf("after %d iterations (%s): hash %016llx mismatches %ld\n", iter,
               flags ? "auto free on launch" : "default flags", (unsigned long long)hash,
               mismatches);
        fflush(stdout);
        fprintf(stderr, "memory: after %d iterations: %zu bytes in use\n", iter,
                total_bytes - free_bytes);
    }
    printf("final iterations %d hash %016llx mismatches %ld\n", iter, (unsigned long long)hash,
           mismatches);

    CUDA_CHECK(cudaFree(in[0]));
    CUDA_CHECK(cudaFree(in[1]));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return mismatches == 0 ? 0 : 1;
}
