/*
 * driver.h - the real CUDA driver behind recap (module prefix drv_).
 *
 * Owns: loading libcuda.so.1 once, the real function pointers of every entry
 * of driver_api.def, the way back from a real pointer or an exact name to
 * recap's entry, and what the loaded driver can do (its version, whether it
 * has the 13.3 recapture API). Must never: call one of recap's own wrappers
 * (only drv_real_fn), log, or act on the program's calls.
 */
#ifndef RECAP_DRIVER_H
#define RECAP_DRIVER_H

#include "shim/base/driver_api.h"

/* Nonzero once drv_load() has finished (successfully or not). */
extern int drv_loaded;

typedef CUresult (CUDAAPI *drv_recapture_begin_fn)(CUstream, CUstreamCaptureMode, CUgraph,
                                                   CUgraphRecaptureCallback, void *);

struct drv_caps {
    int usable;                /* libcuda found and it is not recap itself */
    int version;               /* cuDriverGetVersion, 0 if unknown */
    drv_recapture_begin_fn recapture_begin;   /* NULL before 13.3 */
    CUresult version_error;    /* cuDriverGetVersion's failure, if any */
    CUresult probe_error;      /* cuGetProcAddress's failure asking for the recapture API */
    char problem[256];         /* why not usable, "" otherwise */
};

extern struct drv_caps drv_caps;

/* Loads the driver, once per process (lifecycle_start calls it first);
 * other threads wait, the loading thread's re-entrant calls return at
 * once. Starts nothing else: the driver knows no module above it. */
void drv_load(void);

/* Nonzero on the thread that is inside drv_load(). */
int drv_loading_on_this_thread(void);

/* The entry of an exact exported name, or -1. */
int drv_find_symbol(const char *name);

/* The entry whose real function is `real`, or -1. Where several exact
 * names share one function, the one matching `base` (if given), the
 * per-thread flag and the newest version <= cuda_version wins. */
int drv_find_pointer(const void *real, const char *base, int cuda_version, int per_thread);

/* "CUDA_ERROR_..." for a result, without calling into the driver when it
 * cannot be trusted; never NULL. */
const char *drv_result_name(CUresult r);   /* valid until the next call on this thread */

/* How the program reached the driver, for the end event (what `recap
 * doctor` reports): wrappers dlsym/dlvsym on a driver handle handed out, and
 * cuGetProcAddress answers (all of them: a driver whose own references are
 * interposed hands back recap's wrappers itself). Exported symbols bind at
 * load time and are not counted. Touched per lookup, never per call. */
enum drv_lookup_path { DRV_LOOKUP_DLSYM, DRV_LOOKUP_PROCADDR, DRV_LOOKUP_PATHS };
void drv_count_lookup(enum drv_lookup_path path);
unsigned long drv_lookups(enum drv_lookup_path path);

/* In a fork child: nothing to do for the driver itself (handles stay), but
 * the loading lock must be usable again. */
void drv_after_fork_child(void);

#endif
