/*
 * overlap.cu - GPU test: recap hands out an executable graph whose previous
 * launch has not run yet, and results stay right.
 *
 * Each iteration captures two kernels that write their own output slot with
 * its own scalars, instantiates, launches on a separate run stream, and
 * destroys the exec and the graph at once (the launch is still pending:
 * CUDA frees an in-flight exec when it completes). Under recap the next
 * iteration's instantiation becomes an update of that very exec, so the
 * update lands while the exec's previous launch is still queued.
 *
 * To make "still queued" certain rather than likely, every batch of 20
 * iterations sits behind a gate kernel that spins on a flag in mapped host
 * memory; the host opens the gate only after the whole batch has been
 * captured, instantiated (updated) and launched. The gate gives up after 5 s
 * and records that it did (then a call blocked until the launch before it had
 * finished, which CUDA does not require: the test fails).
 *
 * Proves: each launch ran with the parameters it had when it was launched
 * (every slot checked bit-exact against the host reference), and prints how
 * many launches were still pending when the next graph was instantiated
 * (cudaStreamQuery, iterations after the first of each batch: all of them).
 * Output is deterministic; stdout is compared with a plain run.
 * Exit 0 when right, 1 on a CUDA error, a wrong slot or a gate time-out.
 */
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "affine_kernels.cuh"
#include "affine_ref.h"
#include "gpu_test.h"

namespace {

constexpr int kBatches = 10;
constexpr int kPerBatch = 20;
constexpr int kIterations = kBatches * kPerBatch;
constexpr int kElements = 4096;
constexpr int kBlock = 256;
constexpr int kGrid = 16;
constexpr size_t kSlotBytes = sizeof(float) * kElements;
constexpr unsigned long long kGateTimeoutNs = 5ull * 1000 * 1000 * 1000;

enum { FLAG_OPEN_UP_TO = 0, FLAG_TIMED_OUT = 1, FLAG_WORDS = 2 };

__device__ unsigned long long global_time_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Waits until flags[FLAG_OPEN_UP_TO] >= batch + 1, at most kGateTimeoutNs;
 * once any gate timed out, later gates pass at once. */
__global__ void gate(volatile unsigned *flags, unsigned batch)
{
    if (flags[FLAG_TIMED_OUT])
        return;
    const unsigned long long start = global_time_ns();
    while (flags[FLAG_OPEN_UP_TO] < batch + 1) {
        if (global_time_ns() - start > kGateTimeoutNs) {
            flags[FLAG_TIMED_OUT] = 1;
            __threadfence_system();
            return;
        }
        __nanosleep(20000);
    }
}

} // namespace

int main()
{
    cudaStream_t capture_stream, run_stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&run_stream, cudaStreamNonBlocking));

    unsigned *host_flags, *dev_flags;
    CUDA_CHECK(cudaHostAlloc((void **)&host_flags, FLAG_WORDS * sizeof(unsigned), cudaHostAllocMapped));
    memset(host_flags, 0, FLAG_WORDS * sizeof(unsigned));
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&dev_flags, host_flags, 0));

    std::vector<float> host_in[2] = {std::vector<float>(kElements), std::vector<float>(kElements)};
    float *in[2], *tmp, *out;
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < kElements; i++)
            host_in[b][i] = affine_input_value(b, (size_t)i);
        CUDA_CHECK(cudaMalloc(&in[b], kSlotBytes));
        CUDA_CHECK(cudaMemcpy(in[b], host_in[b].data(), kSlotBytes, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaMalloc(&tmp, kSlotBytes));
    CUDA_CHECK(cudaMalloc(&out, kSlotBytes * kIterations));
    CUDA_CHECK(cudaMemset(out, 0, kSlotBytes * kIterations));
    CUDA_CHECK(cudaDeviceSynchronize());

    int pending_at_instantiate = 0, pending_possible = 0;
    for (int batch = 0; batch < kBatches; batch++) {
        gate<<<1, 1, 0, run_stream>>>(dev_flags, (unsigned)batch);
        CUDA_CHECK(cudaGetLastError());
        for (int j = 0; j < kPerBatch; j++) {
            const int iter = batch * kPerBatch + j;
            const affine_params p = affine_params_for(iter);
            float *slot = out + (size_t)iter * kElements;
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CUDA_CHECK(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeGlobal));
            affine<<<kGrid, kBlock, 0, capture_stream>>>(in[iter & 1], tmp, p.a, p.b, kElements);
            CUDA_CHECK(cudaGetLastError());
            affine<<<kGrid, kBlock, 0, capture_stream>>>(tmp, slot, p.a2, p.b2, kElements);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaStreamEndCapture(capture_stream, &graph));
            if (j > 0) {
                /* The previous iteration's launch is behind the closed gate. */
                cudaError_t q = cudaStreamQuery(run_stream);
                if (q != cudaSuccess && q != cudaErrorNotReady)
                    CUDA_CHECK(q);
                pending_possible++;
                pending_at_instantiate += (q == cudaErrorNotReady);
            }
            CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            CUDA_CHECK(cudaGraphLaunch(exec, run_stream));
            CUDA_CHECK(cudaGraphExecDestroy(exec));
            CUDA_CHECK(cudaGraphDestroy(graph));
        }
        __atomic_store_n(&host_flags[FLAG_OPEN_UP_TO], (unsigned)batch + 1, __ATOMIC_SEQ_CST);
    }
    CUDA_CHECK(cudaStreamSynchronize(run_stream));
    const unsigned timed_out = __atomic_load_n(&host_flags[FLAG_TIMED_OUT], __ATOMIC_SEQ_CST);

    std::vector<float> got((size_t)kElements * kIterations), t(kElements), expect(kElements);
    CUDA_CHECK(cudaMemcpy(got.data(), out, kSlotBytes * kIterations, cudaMemcpyDeviceToHost));
    uint64_t hash = FNV1A64_INIT;
    long mismatches = 0;
    for (int iter = 0; iter < kIterations; iter++) {
        const affine_params p = affine_params_for(iter);
        const float *slot = got.data() + (size_t)iter * kElements;
        affine_ref(host_in[iter & 1].data(), t.data(), p.a, p.b, kElements);
        affine_ref(t.data(), expect.data(), p.a2, p.b2, kElements);
        for (int i = 0; i < kElements; i++) {
            if (std::memcmp(&slot[i], &expect[i], sizeof(float)) != 0) {
                if (mismatches == 0)
                    fprintf(stderr, "iteration %d element %d: got %a, expected %a\n", iter, i,
                            (double)slot[i], (double)expect[i]);
                mismatches++;
            }
        }
        hash = fnv1a64(hash, slot, kSlotBytes);
        if ((iter + 1) % 20 == 0)
            printf("iteration %3d hash %016llx first %a last %a\n", iter + 1,
                   (unsigned long long)hash, (double)slot[0], (double)slot[kElements - 1]);
    }
    printf("launches still pending when the next graph was instantiated: %d of %d\n",
           pending_at_instantiate, pending_possible);
    printf("final iterations %d hash %016llx mismatches %ld\n", kIterations,
           (unsigned long long)hash, mismatches);
    if (timed_out)
        fprintf(stderr, "overlap: a gate timed out: some call waited for a queued launch to finish\n");

    CUDA_CHECK(cudaFree(in[0]));
    CUDA_CHECK(cudaFree(in[1]));
    CUDA_CHECK(cudaFree(tmp));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFreeHost(host_flags));
    CUDA_CHECK(cudaStreamDestroy(capture_stream));
    CUDA_CHECK(cudaStreamDestroy(run_stream));
    return (mismatches == 0 && !timed_out && pending_at_instantiate == pending_possible) ? 0 : 1;
}
