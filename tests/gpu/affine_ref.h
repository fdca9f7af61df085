/*
 * affine_ref.h - the arithmetic of the GPU test kernels, on the host, and the
 * per-iteration parameter schedule (usable from C and C++).
 *
 * The kernels (affine_kernels.cuh, compiled for the GPU) use __fmul_rn and
 * __fadd_rn, which are never fused into an FMA; these functions do the same
 * IEEE single-precision operations one at a time, so the host reference is
 * bit-exact. Build host code with -ffp-contract=off so the host compiler does
 * not fuse them either.
 *
 * Every scalar changes from one iteration to the next (and differs from the
 * values of the previous few iterations), so a launch that ran with stale
 * parameters gives a result the reference rejects.
 */
#ifndef RECAP_AFFINE_REF_H
#define RECAP_AFFINE_REF_H

#include <stddef.h>

struct affine_params {
    float a, b;      /* first stage:  y = x * a + b        */
    float a2, b2;    /* second stage: y = t * a2 + b2      */
    float c, d;      /* forked stage: z = x * c + d        */
    float w;         /* join:         y = t * w + z        */
};

static inline struct affine_params affine_params_for(int iter)
{
    struct affine_params p;
    p.a = 1.0f + (float)(iter % 5) * 0.25f;
    p.b = (float)(iter % 11) - 5.0f;
    p.a2 = 0.5f + (float)(iter % 3) * 0.125f;
    p.b2 = (float)iter * 0.0625f;
    p.c = 2.0f - (float)(iter % 7) * 0.125f;
    p.d = (float)iter * -0.03125f;
    p.w = 0.75f + (float)(iter % 4) * 0.0625f;
    return p;
}

/* Deterministic input values in [-1, 1), different for each of two buffers. */
static inline float affine_input_value(int buffer, size_t i)
{
    return (float)((int)((i * 2654435761u + (size_t)buffer * 40503u) % 2048u) - 1024) / 1024.0f;
}

static inline void affine_ref(const float *x, float *y, float a, float b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = x[i] * a;
        y[i] = t + b;
    }
}

static inline void affine_accumulate_ref(const float *x, float *y, float a, float b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = x[i] * a;
        t = t + b;
        y[i] = y[i] + t;
    }
}

static inline void combine_ref(const float *x, const float *z, float *y, float w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = x[i] * w;
        y[i] = t + z[i];
    }
}

#endif
