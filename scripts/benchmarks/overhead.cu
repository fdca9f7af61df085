/*
 * overhead.cu - measures the host cost of a kernel launch through the
 * CUDA runtime (cudaLaunchKernel of an empty kernel on a created stream, no
 * capture), the call recap interposes (via cuGetProcAddress) but does not act
 * on. The driver script scripts/bench overhead runs it with and without recap
 * and prints the overhead ratio.
 *
 * Launches go in batches: each batch of --batch launches is timed on the
 * host, then the stream is synchronised outside the timed region, so the
 * launch queue never fills and the figure is the launch call itself, not GPU
 * throughput. Warm-up batches first.
 *
 * Usage: overhead --info
 *        overhead --launches L --batch B --warmup-batches W
 * Prints: result launches=L batch=B median_ns=<per launch, median batch>
 *         p10_ns=.. p90_ns=..
 * Exit 0, or 1 on a CUDA error.
 */
#include "bench_common.h"

namespace {

__global__ void empty_kernel() {}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        bench_print_info();
        return 0;
    }
    long launches = 200000, batch = 500, warmup_batches = 20;
    bench_arg args[] = {{"--launches", &launches}, {"--batch", &batch},
                        {"--warmup-batches", &warmup_batches}};
    bench_parse_args(argc, argv, args, sizeof args / sizeof args[0],
                     "overhead --info | --launches L --batch B --warmup-batches W");
    if (batch < 1 || launches < batch) {
        fprintf(stderr, "bench overhead: need launches >= batch >= 1\n");
        return 2;
    }

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const void *kernel = (const void *)empty_kernel;
    const dim3 grid(1), block(32);

    std::vector<double> per_launch_ns;
    const long batches = launches / batch;
    for (long b = 0; b < warmup_batches + batches; b++) {
        const double start = bench_now_us();
        for (long i = 0; i < batch; i++) {
            cudaError_t err = cudaLaunchKernel(kernel, grid, block, nullptr, 0, stream);
            if (err != cudaSuccess)
                CUDA_CHECK(err);
        }
        const double elapsed_us = bench_now_us() - start;
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (b >= warmup_batches)
            per_launch_ns.push_back(elapsed_us * 1000.0 / (double)batch);
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
    printf("result launches=%ld batch=%ld median_ns=%.2f p10_ns=%.2f p90_ns=%.2f\n",
           batches * batch, batch, bench_quantile(per_launch_ns, 0.5),
           bench_quantile(per_launch_ns, 0.1), bench_quantile(per_launch_ns, 0.9));
    return 0;
}
