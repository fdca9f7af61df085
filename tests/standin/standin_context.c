/*
 * standin_context.c - initialisation, the driver version, the one device and
 * its contexts.
 *
 * Owns: cuInit, cuDriverGetVersion, cuDevice*, primary-context retain,
 * release and reset, cuCtx* (creation in every exported ABI, the per-thread
 * current context stack, synchronisation), and when a context's contents
 * are torn down. Must never: execute work or consult capture state itself
 * (cuCtxSynchronize asks the capture module), or destroy another file's
 * objects itself (teardown asks each file: si_*_drop_context).
 */
#include "standin_internal.h"

#include <stdio.h>
#include <string.h>

#define SI_DEVICE_NAME "Stand-in GPU (CPU execution)"

struct si_context *si_current_ctx(void)
{
    return si_tls.depth > 0 ? si_tls.ctx_stack[si_tls.depth - 1] : NULL;
}

CUresult si_need_ctx(struct si_context **out)
{
    struct si_context *c = si_current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (c->h.state != SI_LIVE) {
        si_misuse("use of a destroyed context as the current context");
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    if (out) *out = c;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev)
{
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- initialisation and devices ---- */

SI_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
    SI_ENTER_AS(cuInit, false);
    if (Flags != 0) return si_leave(CUDA_ERROR_INVALID_VALUE);
    si.initialized = true;
    return si_leave(CUDA_SUCCESS);
}

SI_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    SI_ENTER_AS(cuDriverGetVersion, false);
    if (!driverVersion) return si_leave(CUDA_ERROR_INVALID_VALUE);
    *driverVersion = si.driver_version;
    return si_leave(CUDA_SUCCESS);
}

SI_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    SI_ENTER(cuDeviceGet);
    if (!device) return si_leave(CUDA_ERROR_INVALID_VALUE);
    if (ordinal != 0) return si_leave(CUDA_ERROR_INVALID_DEVICE);
    *device = 0;
    return si_leave(CUDA_SUCCESS);
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    SI_ENTER(cuDeviceGetCount);
    if (!count) return si_leave(CUDA_ERROR_INVALID_VALUE);
    *count = 1;
    return si_leave(CUDA_SUCCESS);
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SI_ENTER(cuDeviceGetName);
    if (!name || len <= 0) return si_leave(CUDA_ERROR_INVALID_VALUE);
    if (check_device(dev)) return si_leave(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "%s", SI_DEVICE_NAME);
    return si_leave(CUDA_SUCCESS);
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SI_ENTER(cuDeviceGetAttribute);
    if (!pi) return si_leave(CUDA_ERROR_INVALID_VALUE);
    if (check_device(dev)) return si_leave(CUDA_ERROR_INVALID_DEVICE);
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 * 1024; break;
    default: *pi = 0; break;
    }
    return si_leave(CUDA_SUCCESS);
}

SI_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SI_ENTER(cuDeviceTotalMem_v2);
    if (!bytes) return si_leave(CUDA_ERROR_INVALID_VALUE);
    if (check_device(dev)) return si_leave(CUDA_ERROR_INVALID_DEVICE);
    *bytes = si.capacity;
    return si_leave(CUDA_SUCCESS);
}

/* ---- contexts ---- */

static struct si_context *context_new(CUdevice dev, unsigned flags, bool primary)
{
    struct si_context *c = si_calloc(1, sizeof(*c));
    si_obj_init(c, SI_CONTEXT);
    c->dev = dev;
    c->flags = flags;
    c->primary = primary;
    return c;
}

static CUresult ctx_push(struct si_context *c)
{
    if (si_tls.depth == (int)SI_ARRAY_LEN(si_tls.ctx_stack)) return CUDA_ERROR_OUT_OF_MEMORY;
    si_tls.ctx_stack[si_tls.depth++] = c;
    return CUDA_SUCCESS;
}

/* Removes a destroyed context from the calling thread's stack. Other
 * threads' stacks keep the tombstone and get CONTEXT_IS_DESTROYED. */
static void ctx_unbind(struct si_context *c)
{
    int w = 0;
    for (int i = 0; i < si_tls.depth; i++)
        if (si_tls.ctx_stack[i] != c) si_tls.ctx_stack[w++] = si_tls.ctx_stack[i];
    si_tls.depth = w;
}

/* Destroys everything the context holds, as cuCtxDestroy documents
 * ("destroys and cleans up all resources associated with the context"):
 * its queued work drains first (asynchronous mode: its streams' workers
 * end), then its captures end, and its executable graphs, graphs, memory
 * (cuMemAlloc, cuMemAllocHost), streams, events and modules are destroyed
 * as their own destroy calls would, so a later use of any of them is the
 * usual misuse. The context object itself is left to the caller: a reset
 * keeps it. READINGS.md "Context teardown". */
static void ctx_teardown(struct si_context *c)
{
    if (si_async_active()) si_async_end_context(c); /* its queued work, then its workers */
    si_capture_drop_context(c);
    si_exec_drop_context(c);
    si_graph_drop_context(c);
    si_mem_drop_context(c);
    si_stream_drop_context(c);
    si_module_drop_context(c);
}

/* The primary context lives from the first retain until its reference
 * count drops to zero; a retain after that gets a new context object. */
static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (check_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!si.primary) si.primary = context_new(dev, 0, true);
    si.primary->refs++;
    *pctx = (CUcontext)si.primary;
    return CUDA_SUCCESS;
}

/* "The context is automatically reset once the last reference to it is
 * released", whichever threads have it current, and "unlike cuCtxDestroy()
 * this method does not pop the context from stack in any circumstances": a
 * thread that still has it current gets CONTEXT_IS_DESTROYED (a misuse)
 * until it makes another context current. */
static CUresult primary_release(CUdevice dev)
{
    if (check_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!si.primary || si.primary->refs == 0) {
        si_misuse("cuDevicePrimaryCtxRelease without a matching retain");
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (--si.primary->refs > 0) return CUDA_SUCCESS;
    struct si_context *c = si.primary;
    ctx_teardown(c);
    if (c->refs > 0) return CUDA_SUCCESS; /* retained again while its work drained: kept, emptied */
    si.primary = NULL;
    si_obj_kill(c);
    return CUDA_SUCCESS;
}

/* "Destroys all allocations and resets all state on the primary context":
 * its contents go as at the last release, but the context object, its
 * reference count and its place on every thread's stack stay, so it is
 * usable at once, holding nothing. A reset with no primary context active
 * has nothing to destroy. */
static CUresult primary_reset(CUdevice dev)
{
    if (check_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (si.primary) ctx_teardown(si.primary);
    return CUDA_SUCCESS;
}

SI_API(cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev), primary_retain(pctx, dev))
SI_API(cuDevicePrimaryCtxRelease, (CUdevice dev), primary_release(dev))
SI_API(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), primary_release(dev))
SI_API(cuDevicePrimaryCtxReset, (CUdevice dev), primary_reset(dev))
SI_API(cuDevicePrimaryCtxReset_v2, (CUdevice dev), primary_reset(dev))

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (check_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK) return CUDA_ERROR_INVALID_VALUE;
    struct si_context *c = context_new(dev, flags, false);
    CUresult rc = ctx_push(c);
    if (rc) return rc;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SI_API(cuCtxCreate, (CUcontext *pctx, unsigned int flags, CUdevice dev), ctx_create(pctx, flags, dev))
SI_API(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev), ctx_create(pctx, flags, dev))
SI_API(cuCtxCreate_v3, (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev),
       (numParams < 0 || (numParams > 0 && !paramsArray)) ? CUDA_ERROR_INVALID_VALUE
                                                          : ctx_create(pctx, flags, dev))
SI_API(cuCtxCreate_v4, (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev),
       ctx_create(pctx, flags, dev))

static CUresult ctx_destroy(CUcontext ctx)
{
    struct si_context *c;
    CUresult rc = si_get(ctx, SI_CONTEXT, &c);
    if (rc) return rc;
    if (c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(c);
    ctx_unbind(c);
    si_obj_kill(c);
    return CUDA_SUCCESS;
}

SI_API(cuCtxDestroy, (CUcontext ctx), ctx_destroy(ctx))
SI_API(cuCtxDestroy_v2, (CUcontext ctx), ctx_destroy(ctx))

SI_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    SI_ENTER(cuCtxGetCurrent);
    if (!pctx) return si_leave(CUDA_ERROR_INVALID_VALUE);
    *pctx = (CUcontext)si_current_ctx();
    return si_leave(CUDA_SUCCESS);
}

static CUresult ctx_set_current(CUcontext ctx)
{
    struct si_context *c = NULL;
    if (ctx) {
        CUresult rc = si_get(ctx, SI_CONTEXT, &c);
        if (rc) return rc;
    }
    if (!c) {
        if (si_tls.depth > 0) si_tls.depth--;
        return CUDA_SUCCESS;
    }
    if (si_tls.depth == 0) return ctx_push(c);
    si_tls.ctx_stack[si_tls.depth - 1] = c;
    return CUDA_SUCCESS;
}

SI_API(cuCtxSetCurrent, (CUcontext ctx), ctx_set_current(ctx))

static CUresult ctx_push_current(CUcontext ctx)
{
    struct si_context *c;
    CUresult rc = si_get(ctx, SI_CONTEXT, &c);
    return rc ? rc : ctx_push(c);
}

SI_API(cuCtxPushCurrent, (CUcontext ctx), ctx_push_current(ctx))
SI_API(cuCtxPushCurrent_v2, (CUcontext ctx), ctx_push_current(ctx))

static CUresult ctx_pop_current(CUcontext *pctx)
{
    if (si_tls.depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct si_context *c = si_tls.ctx_stack[--si_tls.depth];
    if (pctx) *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SI_API(cuCtxPopCurrent, (CUcontext *pctx), ctx_pop_current(pctx))
SI_API(cuCtxPopCurrent_v2, (CUcontext *pctx), ctx_pop_current(pctx))

static CUresult ctx_get_device(CUdevice *device, CUcontext ctx)
{
    struct si_context *c;
    CUresult rc = ctx ? si_get(ctx, SI_CONTEXT, &c) : si_need_ctx(&c);
    if (rc) return rc;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

SI_API(cuCtxGetDevice, (CUdevice *device), ctx_get_device(device, NULL))
SI_API(cuCtxGetDevice_v2, (CUdevice *device, CUcontext ctx), ctx_get_device(device, ctx))

/* Synchronising a context encompasses every stream in it: while any of them
 * captures this is invalid whatever the capture mode (CUDA programming guide,
 * "Prohibited and Unhandled Operations"). In synchronous mode a permitted
 * synchronisation has nothing to wait for; in asynchronous mode it waits for
 * every queue of the context. */
static CUresult ctx_synchronize(CUcontext ctx)
{
    struct si_context *c;
    CUresult rc = ctx ? si_get(ctx, SI_CONTEXT, &c) : si_need_ctx(&c);
    if (rc) return rc;
    if (si_any_capture_active()) {
        for (struct si_capture *cap = si.captures; cap; cap = cap->next)
            si_capture_invalidate(cap, "context synchronised during capture");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return si_async_active() ? si_async_sync_all(c) : CUDA_SUCCESS;
}

SI_API(cuCtxSynchronize, (void), ctx_synchronize(NULL))
SI_API(cuCtxSynchronize_v2, (CUcontext ctx), ctx_synchronize(ctx))
