/*
 * test_standin_common.h - what the stand-in's own tests share: a few
 * kernels, a set-up that gives a context, a module and two streams, and
 * access to exported symbols that cuda.h hides behind its version macros
 * (cuStreamBeginCapture v1, the 5-argument cuGraphInstantiate, ...).
 */
#ifndef TEST_STANDIN_COMMON_H
#define TEST_STANDIN_COMMON_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "shim/base/cuda_compat.h"
#include "standin.h"

#define CK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s", #call)
#define N 64

/* int kernels: fill(int *p, int v, int n), add(int *p, int d, int n) */
static inline int *dev_ints(CUdeviceptr p)
{
    return (int *)(uintptr_t)p;
}

static void k_fill(const struct standin_dims *d, void **p)
{
    int *x = dev_ints(*(CUdeviceptr *)p[0]);
    int v = *(int *)p[1], n = *(int *)p[2];
    (void)d;
    for (int i = 0; i < n; i++) x[i] = v;
}

static void k_add(const struct standin_dims *d, void **p)
{
    int *x = dev_ints(*(CUdeviceptr *)p[0]);
    int v = *(int *)p[1], n = *(int *)p[2];
    (void)d;
    for (int i = 0; i < n; i++) x[i] += v;
}

/* mix(char c, double f, short s, int *out): writes c, (int)f, s, grid x */
static void k_mix(const struct standin_dims *d, void **p)
{
    int *out = dev_ints(*(CUdeviceptr *)p[3]);
    out[0] = *(char *)p[0];
    out[1] = (int)*(double *)p[1];
    out[2] = *(short *)p[2];
    out[3] = (int)(d->grid[0] * d->block[0]);
}

struct fixture {
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill, add, mix, cdp;
    CUstream s1, s2;
    CUdeviceptr buf, buf2;
};
static struct fixture fx;

static void register_kernels(void)
{
    static const size_t int3[] = {sizeof(CUdeviceptr), sizeof(int), sizeof(int)};
    static const size_t mix[] = {sizeof(char), sizeof(double), sizeof(short), sizeof(CUdeviceptr)};
    standin_register_kernel("fill", k_fill, 3, int3);
    standin_register_kernel("add", k_add, 3, int3);
    standin_register_kernel("add_cdp", k_add, 3, int3);
    standin_register_kernel("mix", k_mix, 4, mix);
    standin_set_kernel_traits("add_cdp", STANDIN_KERNEL_USES_CDP);
}

static __attribute__((unused)) void setup(void)
{
    CUdevice dev;
    register_kernels();
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&fx.ctx, dev));
    CK(cuCtxSetCurrent(fx.ctx));
    CK(cuModuleLoadData(&fx.mod, "image"));
    CK(cuModuleGetFunction(&fx.fill, fx.mod, "fill"));
    CK(cuModuleGetFunction(&fx.add, fx.mod, "add"));
    CK(cuModuleGetFunction(&fx.mix, fx.mod, "mix"));
    CK(cuModuleGetFunction(&fx.cdp, fx.mod, "add_cdp"));
    CK(cuStreamCreate(&fx.s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&fx.s2, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&fx.buf, N * sizeof(int)));
    CK(cuMemAlloc(&fx.buf2, N * sizeof(int)));
    CK(cuMemsetD32(fx.buf, 0, N));
    CK(cuMemsetD32(fx.buf2, 0, N));
}

static inline CUresult launch_int(CUfunction f, CUstream s, CUdeviceptr p, int v)
{
    int n = N;
    void *args[] = {&p, &v, &n};
    return cuLaunchKernel(f, 1, 1, 1, N, 1, 1, 0, s, args, NULL);
}

static inline CUresult add_kernel_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                                       CUfunction f, CUdeviceptr p, int v)
{
    int n = N;
    void *args[] = {&p, &v, &n};
    CUDA_KERNEL_NODE_PARAMS kp = {.func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                  .blockDimX = N, .blockDimY = 1, .blockDimZ = 1,
                                  .kernelParams = args};
    return cuGraphAddKernelNode(out, g, deps, nd, &kp);
}

/* An exported symbol by exact name (the same pointer cuGetProcAddress
 * hands out). */
static inline void *sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    cr_assert_not_null(p, "%s not exported", name);
    return p;
}

typedef CUresult (*begin_v1_fn)(CUstream);
typedef CUresult (*instantiate_v1_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*exec_update_v1_fn)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
typedef CUresult (*capture_info_v1_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *);

/* Reads device memory as a test on a GPU would after synchronising: in
 * asynchronous mode (STANDIN_ASYNC=1) queued work is waited for first. */
static inline int read_int(CUdeviceptr p, int i)
{
    standin_async_drain();
    return dev_ints(p)[i];
}

#endif
