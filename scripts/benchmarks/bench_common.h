/*
 * bench_common.h - what the benchmark programs under scripts/ share: a
 * monotonic clock, percentiles of a sample, the --info line (device, driver
 * and runtime versions) and argument parsing. The checked CUDA calls and the
 * FNV-1a checksum (which lets a driver script confirm that every way of
 * running a benchmark computed the same thing) are tests/gpu/gpu_test.h's.
 */
#ifndef RECAP_BENCH_COMMON_H
#define RECAP_BENCH_COMMON_H

#include <cuda_runtime.h>

/* The checked calls and the checksum, one copy for the GPU tests and the
 * benchmarks (CUDA_CHECK here; CU_CHECK too where cuda.h came first). */
#include "../../tests/gpu/gpu_test.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static inline double bench_now_us()
{
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::micro>(clock::now().time_since_epoch()).count();
}

/* The q-quantile (0..1) of a sample, nearest rank; the sample is copied. */
static inline double bench_quantile(std::vector<double> sample, double q)
{
    if (sample.empty())
        return 0.0;
    std::sort(sample.begin(), sample.end());
    size_t rank = (size_t)(q * (double)(sample.size() - 1) + 0.5);
    return sample[std::min(rank, sample.size() - 1)];
}

static inline void bench_print_info()
{
    int device = 0, driver = 0, runtime = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    printf("device %d: %s (sm_%d%d), CUDA driver API %d.%d, runtime %d.%d\n", device, prop.name,
           prop.major, prop.minor, driver / 1000, driver % 1000 / 10, runtime / 1000,
           runtime % 1000 / 10);
}

/* Parses "--name value" pairs into longs; unknown names are an error. */
struct bench_arg {
    const char *name;
    long *value;
};

static inline void bench_parse_args(int argc, char **argv, bench_arg *args, size_t nargs,
                                    const char *usage)
{
    for (int i = 1; i < argc; i++) {
        bool matched = false;
        for (size_t a = 0; a < nargs && !matched; a++) {
            if (strcmp(argv[i], args[a].name) == 0 && i + 1 < argc) {
                char *end;
                *args[a].value = strtol(argv[++i], &end, 10);
                matched = *end == '\0';
            }
        }
        if (!matched) {
            fprintf(stderr, "usage: %s\n", usage);
            exit(2);
        }
    }
}

#endif
