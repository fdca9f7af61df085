/*
 * kparams.h - the argument layout of kernels (module prefix kparams_).
 *
 * Owns: a cache from CUfunction (or CUkernel) to the sizes and offsets of
 * its parameters, asked of the driver once per function with
 * cuFuncGetParamInfo (cuKernelGetParamInfo for library kernels), so a
 * journal can copy the argument values of a launch. Must never: guess a
 * size; a function whose layout the driver will not tell is reported as
 * unknown and its launches make a capture unreplayable.
 */
#ifndef RECAP_KPARAMS_H
#define RECAP_KPARAMS_H

#include <stddef.h>

#include "shim/base/cuda_compat.h"

#define KPARAMS_MAX 1024

struct kparams_layout {
    int known;                 /* 0: the driver would not say */
    unsigned long unloads;     /* kparams_code_unloaded count when last asked */
    CUresult error;            /* why not, when known == 0 */
    unsigned count;
    size_t *offset;            /* count entries, owned by the cache */
    size_t *size;
};

/* The layout of f; never NULL (an unknown layout has known == 0). Valid
 * for the life of the process. */
const struct kparams_layout *kparams_of(CUfunction f);

/* A module or library was unloaded: the driver may give a new kernel an
 * unloaded one's handle, so each cached layout is asked again at its
 * next use, and replaced (the old one kept, journals may point at it)
 * where the answer differs. */
void kparams_code_unloaded(void);

void kparams_after_fork_child(void);

#endif
