/*
 * driver_api.c - GPU test: a CUDA driver-API program (linked with -lcuda,
 * calling the exported symbols that cuda.h maps names to) that captures its
 * graph anew every iteration: cuStreamBeginCapture (= _v2), kernels and a
 * memset, cuStreamEndCapture, cuGraphInstantiate (= WithFlags),
 * cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy.
 *
 * Proves, run plain and under recap (stdout compared byte for byte, recap's
 * log read by run_all.sh): recap's interposition of the exported symbols
 * works for a program that never goes through cuGetProcAddress, its exec
 * reuse turns instantiations after the first into updates, and results stay
 * bit-exact (checked every iteration against the host reference).
 * Phase 1 (iterations 0-99) launches with cuLaunchKernel after a
 * cuMemsetD32Async; phase 2 (100-199) with cuLaunchKernelEx. Scalars change
 * every iteration; input and output pointers alternate between two buffers.
 *
 * The kernels come from driver_api_kernels.cu as a fatbin embedded below with
 * the assembler's .incbin, which looks in the current directory: compile
 * with the directory holding driver_api_kernels.fatbin as the working
 * directory (run_all.sh does).
 * Exit 0 when every result matched, 1 on a CUDA error or a wrong result.
 */
#include <cuda.h>

#include <string.h>

#include "affine_ref.h"
#include "gpu_test.h"

__asm__(".section .rodata\n"
        ".balign 64\n"
        "driver_api_fatbin:\n"
        ".incbin \"driver_api_kernels.fatbin\"\n"
        ".byte 0\n"
        ".previous\n");
extern const unsigned char driver_api_fatbin[];

enum { ITERATIONS = 200, PHASE2_START = 100, ELEMENTS = 1 << 15, BLOCK = 256, GRID = 32 };
#define BYTES (sizeof(float) * ELEMENTS)

struct kernels {
    CUfunction affine;
    CUfunction affine_accumulate;
};

struct buffers {
    CUdeviceptr in[2];
    CUdeviceptr out[2];
    CUdeviceptr tmp;
};

static void launch(CUfunction f, CUstream s, int use_ex, void **args)
{
    if (!use_ex) {
        CU_CHECK(cuLaunchKernel(f, GRID, 1, 1, BLOCK, 1, 1, 0, s, args, NULL));
        return;
    }
    CUlaunchConfig config;
    memset(&config, 0, sizeof config);
    config.gridDimX = GRID;
    config.gridDimY = 1;
    config.gridDimZ = 1;
    config.blockDimX = BLOCK;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.hStream = s;
    CU_CHECK(cuLaunchKernelEx(&config, f, args, NULL));
}

/* tmp = 0; tmp += in * a + b; out = tmp * a2 + b2 */
static void capture(CUstream s, const struct kernels *k, const struct buffers *d, int iter,
                    CUgraph *graph)
{
    struct affine_params p = affine_params_for(iter);
    CUdeviceptr in = d->in[iter & 1], out = d->out[(iter >> 1) & 1], tmp = d->tmp;
    int n = ELEMENTS;
    void *first[] = {&in, &tmp, &p.a, &p.b, &n};
    void *second[] = {&tmp, &out, &p.a2, &p.b2, &n};
    const int use_ex = iter >= PHASE2_START;

    CU_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_CHECK(cuMemsetD32Async(tmp, 0, ELEMENTS, s));
    launch(k->affine_accumulate, s, use_ex, first);
    launch(k->affine, s, use_ex, second);
    CU_CHECK(cuStreamEndCapture(s, graph));
}

static float host_in[2][ELEMENTS], got[ELEMENTS], expect[ELEMENTS], scratch[ELEMENTS];

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUstream stream;
    struct kernels k;
    struct buffers d;

    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    CU_CHECK(cuModuleLoadData(&module, driver_api_fatbin));
    CU_CHECK(cuModuleGetFunction(&k.affine, module, "affine"));
    CU_CHECK(cuModuleGetFunction(&k.affine_accumulate, module, "affine_accumulate"));
    CU_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < ELEMENTS; i++)
            host_in[b][i] = affine_input_value(b, (size_t)i);
        CU_CHECK(cuMemAlloc(&d.in[b], BYTES));
        CU_CHECK(cuMemcpyHtoD(d.in[b], host_in[b], BYTES));
        CU_CHECK(cuMemAlloc(&d.out[b], BYTES));
        CU_CHECK(cuMemsetD32(d.out[b], 0, ELEMENTS));
    }
    CU_CHECK(cuMemAlloc(&d.tmp, BYTES));

    uint64_t hash = FNV1A64_INIT;
    long mismatches = 0;
    for (int iter = 0; iter < ITERATIONS; iter++) {
        CUgraph graph;
        CUgraphExec exec;
        capture(stream, &k, &d, iter, &graph);
        CU_CHECK(cuGraphInstantiate(&exec, graph, 0));
        CU_CHECK(cuGraphLaunch(exec, stream));
        CU_CHECK(cuStreamSynchronize(stream));
        CU_CHECK(cuGraphExecDestroy(exec));
        CU_CHECK(cuGraphDestroy(graph));
        CU_CHECK(cuMemcpyDtoH(got, d.out[(iter >> 1) & 1], BYTES));

        struct affine_params p = affine_params_for(iter);
        memset(scratch, 0, sizeof scratch);
        affine_accumulate_ref(host_in[iter & 1], scratch, p.a, p.b, ELEMENTS);
        affine_ref(scratch, expect, p.a2, p.b2, ELEMENTS);
        for (int i = 0; i < ELEMENTS; i++) {
            if (memcmp(&got[i], &expect[i], sizeof(float)) != 0) {
                if (mismatches == 0)
                    fprintf(stderr, "iteration %d element %d: got %a, expected %a\n", iter, i,
                            (double)got[i], (double)expect[i]);
                mismatches++;
            }
        }
        hash = fnv1a64(hash, got, BYTES);
        if ((iter + 1) % 20 == 0)
            printf("iteration %3d phase %d hash %016llx first %a last %a\n", iter + 1,
                   iter < PHASE2_START ? 1 : 2, (unsigned long long)hash, (double)got[0],
                   (double)got[ELEMENTS - 1]);
    }
    printf("final iterations %d hash %016llx mismatches %ld\n", ITERATIONS,
           (unsigned long long)hash, mismatches);

    for (int b = 0; b < 2; b++) {
        CU_CHECK(cuMemFree(d.in[b]));
        CU_CHECK(cuMemFree(d.out[b]));
    }
    CU_CHECK(cuMemFree(d.tmp));
    CU_CHECK(cuStreamDestroy(stream));
    CU_CHECK(cuModuleUnload(module));
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));
    return mismatches == 0 ? 0 : 1;
}
