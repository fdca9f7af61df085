/*
 * two_devices.cu - GPU test: one process drives two GPUs, one thread each,
 * and every thread captures and instantiates a graph on its own device every
 * iteration, at the same capture site.
 *
 * Thread d sets device d, then loops: capture (thread-local mode, so the two
 * captures never interfere) two affine kernels with parameters that change
 * every iteration, instantiate, launch, destroy exec and graph, copy the
 * result back and check it bit-exact against the host reference. Both
 * threads capture from the same code, so recap sees one site and keeps both
 * devices' executable graphs in its cache; the graph's shape includes its
 * context, so each device's instantiations must be served only by that
 * device's executable graphs (an executable graph of one device cannot run
 * another device's kernels: an update across devices fails, a launch of a
 * stale one gives wrong numbers).
 *
 * stdout (compared byte for byte with a plain run): a checksum line per
 * device. stderr: per device, how many instantiations, how many distinct
 * executable-graph handles they returned, and how many of those handles the
 * other device's thread also got:
 *   exec handles: device D: N instantiations, K distinct, S shared with device E
 * Under recap S must be 0 (run_all.sh checks it, and check_run.py checks
 * that instantiations after the first were reused without a failed update).
 * A plain run may show S > 0: the driver can give a freed handle's address to
 * the other device's next executable graph.
 *
 * Exit 0 right, 1 a CUDA error or a wrong result, 77 (with a SKIP line) with
 * fewer than two devices.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "affine_kernels.cuh"
#include "affine_ref.h"
#include "gpu_test.h"

namespace {

constexpr int kIterations = 200;
constexpr int kElements = 1024;
constexpr size_t kBytes = sizeof(float) * kElements;

struct device_run {
    int device;
    uint64_t hash = FNV1A64_INIT;
    long mismatches = 0;
    std::vector<cudaGraphExec_t> execs;   /* every handle instantiation returned */
};

/* Every capture of both threads starts here: one capture site. */
cudaGraphExec_t capture_step(cudaStream_t stream, const float *in, float *tmp, float *out,
                             const affine_params &p)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    affine<<<4, 256, 0, stream>>>(in, tmp, p.a, p.b, kElements);
    CUDA_CHECK(cudaGetLastError());
    affine<<<4, 256, 0, stream>>>(tmp, out, p.a2, p.b2, kElements);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return exec;
}

void run_device(device_run *run)
{
    CUDA_CHECK(cudaSetDevice(run->device));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<float> host_in[2], got(kElements), t(kElements), expect(kElements);
    float *in[2], *tmp, *out;
    for (int b = 0; b < 2; b++) {
        host_in[b].resize(kElements);
        for (int i = 0; i < kElements; i++)    /* each device its own inputs */
            host_in[b][i] = affine_input_value(b + 2 * run->device, (size_t)i);
        CUDA_CHECK(cudaMalloc(&in[b], kBytes));
        CUDA_CHECK(cudaMemcpy(in[b], host_in[b].data(), kBytes, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaMalloc(&tmp, kBytes));
    CUDA_CHECK(cudaMalloc(&out, kBytes));

    for (int iter = 0; iter < kIterations; iter++) {
        /* The devices run different parameter schedules. */
        const affine_params p = affine_params_for(iter + 1000 * run->device);
        cudaGraphExec_t exec = capture_step(stream, in[iter & 1], tmp, out, p);
        run->execs.push_back(exec);
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaMemcpyAsync(got.data(), out, kBytes, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));

        affine_ref(host_in[iter & 1].data(), t.data(), p.a, p.b, kElements);
        affine_ref(t.data(), expect.data(), p.a2, p.b2, kElements);
        if (std::memcmp(got.data(), expect.data(), kBytes) != 0) {
            if (run->mismatches == 0)
                fprintf(stderr, "device %d iteration %d: result differs from the host "
                        "reference\n", run->device, iter);
            run->mismatches++;
        }
        run->hash = fnv1a64(run->hash, got.data(), kBytes);
    }
    CUDA_CHECK(cudaFree(in[0]));
    CUDA_CHECK(cudaFree(in[1]));
    CUDA_CHECK(cudaFree(tmp));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaStreamDestroy(stream));
}

} // namespace

int main()
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count < 2) {
        printf("SKIP: two_devices needs two CUDA devices, found %d%s%s\n",
               err == cudaSuccess ? count : 0, err == cudaSuccess ? "" : ": ",
               err == cudaSuccess ? "" : cudaGetErrorName(err));
        return GPU_TEST_EXIT_SKIP;
    }

    device_run runs[2];
    runs[0].device = 0;
    runs[1].device = 1;
    std::thread first(run_device, &runs[0]);
    std::thread second(run_device, &runs[1]);
    first.join();
    second.join();

    long mismatches = 0;
    for (int d = 0; d < 2; d++) {
        const device_run &r = runs[d], &other = runs[1 - d];
        std::set<cudaGraphExec_t> mine(r.execs.begin(), r.execs.end());
        std::set<cudaGraphExec_t> theirs(other.execs.begin(), other.execs.end());
        size_t shared = (size_t)std::count_if(mine.begin(), mine.end(), [&](cudaGraphExec_t e) {
            return theirs.count(e) != 0;
        });
        printf("device %d: iterations %d hash %016llx mismatches %ld\n", d, kIterations,
               (unsigned long long)r.hash, r.mismatches);
        fprintf(stderr, "exec handles: device %d: %zu instantiations, %zu distinct, %zu shared "
                "with device %d\n", d, r.execs.size(), mine.size(), shared, 1 - d);
        mismatches += r.mismatches;
    }
    return mismatches == 0 ? 0 : 1;
}
