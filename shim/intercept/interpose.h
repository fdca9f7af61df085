/*
 * interpose.h - the ways a program reaches the driver (module prefix
 * interpose_).
 *
 * Owns: the answers to dlsym/dlvsym and cuGetProcAddress for the names recap
 * interposes: the real driver answers first, and only when what it returned
 * is the real driver's function of an interposed exact name does recap put
 * its wrapper in its place. Everything else comes back untouched, so
 * cudnn*, cublas*, cuGetExportTable and unknown names never meet recap.
 * Must never: resolve a name through the public dlsym (it is recap's own),
 * or wrap a pointer that is not the real driver's.
 */
#ifndef RECAP_INTERPOSE_H
#define RECAP_INTERPOSE_H

#include "shim/base/cuda_compat.h"
#include "shim/base/driver_api.h"

/* recap's exported function for each entry, or NULL (not wrapped):
 * generated into driver_wrappers.c beside the functions it names. */
extern void *const drv_wrapper_fn[DRV_COUNT];

/* What cuGetProcAddress (v1 or v2) hands the program for a pointer the real
 * driver returned for `symbol` at `cuda_version` with `flags`. */
void *interpose_wrap_proc(void *real, const char *symbol, int cuda_version, cuuint64_t flags);

/* Called by dlsym_hook.S for handles other than RTLD_DEFAULT/RTLD_NEXT. */
void *recap_dlsym_hook(void *handle, const char *name);
void *recap_dlvsym_hook(void *handle, const char *name, const char *version);

#endif
