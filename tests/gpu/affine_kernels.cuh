/*
 * affine_kernels.cuh - the GPU kernels of the test programs; affine_ref.h
 * holds their bit-exact host reference. extern "C" so that driver-API
 * programs find them by name in a module. Grid-stride loops: any launch
 * shape covers all n elements.
 */
#ifndef RECAP_AFFINE_KERNELS_CUH
#define RECAP_AFFINE_KERNELS_CUH

extern "C" __global__ void affine(const float *x, float *y, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = __fadd_rn(__fmul_rn(x[i], a), b);
}

extern "C" __global__ void affine_accumulate(const float *x, float *y, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], __fadd_rn(__fmul_rn(x[i], a), b));
}

extern "C" __global__ void combine(const float *x, const float *z, float *y, float w, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = __fadd_rn(__fmul_rn(x[i], w), z[i]);
}

#endif
