/*
 * threads_one_site.cu - GPU test (issue 27): four threads capture through
 * one function - one capture site - each on its own stream with its own
 * buffers, threads 0 and 1 a chain of 20 kernels, threads 2 and 3 a chain
 * of 25, every iteration: capture (thread-local mode), instantiate,
 * launch, destroy exec and graph, copy the result back, check it against
 * the host reference. Pauses of pseudo-random length (a per-thread
 * xorshift, seeded by the thread's number) between the iterations and now
 * and then inside a capture interleave the threads irregularly.
 *
 * The site sees two shapes and up to four captures at once, in an order
 * no history can predict: recap must find each capture's graph among
 * what the site keeps as the calls arrive (on a 13.0 driver: record the
 * capture itself against the matching kept graph, no driver capture), and
 * pay for it less than executable reuse alone does (run_all.sh runs it
 * under RECAP_SELF_RECORD=off too and compares the loop times).
 *
 * stdout (compared byte for byte with a plain run): per thread its
 * kernels, iterations, a checksum of every result and its mismatches.
 * stderr: "loop: N ms" - the wall time from the threads' common start to
 * the last one's end (run_all.sh reads it). Exit 0 right, 1 a CUDA error
 * or a wrong result.
 */
#include <cuda_runtime.h>

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "affine_kernels.cuh"
#include "affine_ref.h"
#include "gpu_test.h"

namespace {

constexpr int kThreads = 4;
constexpr int kIterations = 300;
constexpr int kElements = 1024;
constexpr size_t kBytes = sizeof(float) * kElements;

/* The scalars of kernel k of an iteration: new every iteration, bounded
 * over a chain of 25 (|a| <= 1.25, |b| <= 4). */
float stage_a(int iter, int k) { return 0.5f + 0.125f * (float)((iter + k) % 7); }
float stage_b(int iter, int k) { return (float)((iter * 3 + k) % 9) - 4.0f; }

struct thread_run {
    int id = 0, kernels = 0;
    unsigned rng = 0;
    uint64_t hash = FNV1A64_INIT;
    long mismatches = 0;
};

pthread_barrier_t start_together;

/* Sleeps 0-299 us, in three of four calls; the sequence depends only on
 * the thread's seed. */
void pause_randomly(unsigned *state)
{
    unsigned x = *state;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    *state = x;
    if (x % 4)
        usleep(x % 300);
}

/* The one capture site: every thread's every capture begins here. The
 * chain: in -> ping -> pong -> ping ...; returns where the result is. */
__attribute__((noinline)) float *capture_chain(thread_run *run, cudaStream_t stream,
                                               const float *in, float *ping, float *pong,
                                               int iter, cudaGraph_t *graph)
{
    const float *x = in;
    float *y = ping;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < run->kernels; k++) {
        if (k == run->kernels / 2 && run->rng % 8 == 0)
            pause_randomly(&run->rng);          /* now and then, mid-capture */
        affine<<<4, 256, 0, stream>>>(x, y, stage_a(iter, k), stage_b(iter, k), kElements);
        CUDA_CHECK(cudaGetLastError());
        x = y;
        y = y == ping ? pong : ping;
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, graph));
    return (float *)x;
}

void run_thread(thread_run *run)
{
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<float> host_in[2], got(kElements), expect(kElements), t(kElements);
    float *in[2], *ping, *pong;
    for (int b = 0; b < 2; b++) {
        host_in[b].resize(kElements);
        for (int i = 0; i < kElements; i++)    /* each thread its own inputs */
            host_in[b][i] = affine_input_value(b + 2 * run->id, (size_t)i);
        CUDA_CHECK(cudaMalloc(&in[b], kBytes));
        CUDA_CHECK(cudaMemcpy(in[b], host_in[b].data(), kBytes, cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaMalloc(&ping, kBytes));
    CUDA_CHECK(cudaMalloc(&pong, kBytes));
    pthread_barrier_wait(&start_together);

    for (int iter = 0; iter < kIterations; iter++) {
        pause_randomly(&run->rng);
        /* Each thread its own schedule of scalars. */
        const int schedule = iter + 1000 * run->id;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        float *out = capture_chain(run, stream, in[iter & 1], ping, pong, schedule, &graph);
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        CUDA_CHECK(cudaMemcpyAsync(got.data(), out, kBytes, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));

        std::memcpy(expect.data(), host_in[iter & 1].data(), kBytes);
        for (int k = 0; k < run->kernels; k++) {
            affine_ref(expect.data(), t.data(), stage_a(schedule, k), stage_b(schedule, k),
                       kElements);
            expect.swap(t);
        }
        if (std::memcmp(got.data(), expect.data(), kBytes) != 0) {
            if (run->mismatches == 0)
                fprintf(stderr, "thread %d iteration %d: result differs from the host "
                        "reference\n", run->id, iter);
            run->mismatches++;
        }
        run->hash = fnv1a64(run->hash, got.data(), kBytes);
    }
    CUDA_CHECK(cudaFree(in[0]));
    CUDA_CHECK(cudaFree(in[1]));
    CUDA_CHECK(cudaFree(ping));
    CUDA_CHECK(cudaFree(pong));
    CUDA_CHECK(cudaStreamDestroy(stream));
}

} // namespace

int main()
{
    CUDA_CHECK(cudaFree(0));            /* the context, before the clock starts */
    thread_run runs[kThreads];
    std::vector<std::thread> threads;
    pthread_barrier_init(&start_together, NULL, kThreads + 1);
    for (int i = 0; i < kThreads; i++) {
        runs[i].id = i;
        runs[i].kernels = i < 2 ? 20 : 25;
        runs[i].rng = 2463534242u + 7919u * (unsigned)i;
        threads.emplace_back(run_thread, &runs[i]);
    }
    pthread_barrier_wait(&start_together);
    auto t0 = std::chrono::steady_clock::now();
    for (auto &t : threads)
        t.join();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
    pthread_barrier_destroy(&start_together);

    long mismatches = 0;
    for (int i = 0; i < kThreads; i++) {
        printf("thread %d: kernels %d iterations %d hash %016llx mismatches %ld\n", i,
               runs[i].kernels, kIterations, (unsigned long long)runs[i].hash,
               runs[i].mismatches);
        mismatches += runs[i].mismatches;
    }
    fprintf(stderr, "loop: %.1f ms (%d threads, %d iterations each)\n", ms, kThreads,
            kIterations);
    return mismatches == 0 ? 0 : 1;
}
