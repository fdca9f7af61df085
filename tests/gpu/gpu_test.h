/*
 * gpu_test.h - helpers shared by the GPU test programs under tests/gpu/ and
 * the benchmark programs under scripts/ (through bench_common.h): the one
 * copy of recap's CUDA check helpers.
 *
 * Owns: the error checks (every CUDA call is checked; a failure prints the
 * call, file, line and error name on stderr and exits 1), the FNV-1a checksum
 * that the programs print so that a plain run and a run under recap can be
 * compared byte for byte, and the exit status for "cannot run here" (77).
 * Usable from C and C++; the runtime check exists where cuda_runtime_api.h
 * was included first, the driver check where cuda.h was.
 */
#ifndef RECAP_GPU_TEST_H
#define RECAP_GPU_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define GPU_TEST_EXIT_SKIP 77

#define FNV1A64_INIT 0xcbf29ce484222325ULL

/* Folds n bytes into a running 64-bit FNV-1a hash and returns the new hash. */
static inline uint64_t fnv1a64(uint64_t hash, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) {
        hash ^= p[i];
        hash *= 0x100000001b3ULL;
    }
    return hash;
}

#ifdef CUDART_VERSION
#define CUDA_CHECK(call)                                                              \
    do {                                                                              \
        cudaError_t check_err_ = (call);                                              \
        if (check_err_ != cudaSuccess) {                                              \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                    cudaGetErrorName(check_err_), cudaGetErrorString(check_err_));    \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)
#endif

#ifdef CUDA_VERSION
#define CU_CHECK(call)                                                               \
    do {                                                                             \
        CUresult check_res_ = (call);                                                \
        if (check_res_ != CUDA_SUCCESS) {                                            \
            const char *check_name_ = NULL;                                          \
            if (cuGetErrorName(check_res_, &check_name_) != CUDA_SUCCESS)            \
                check_name_ = "unknown CUresult";                                    \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call, \
                    check_name_, (int)check_res_);                                   \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#endif

#endif
