/*
 * standin_memory.c - device and host memory, copies and memsets.
 *
 * Owns: the allocation registry (every live allocation, by address), the
 * device-memory capacity and its accounting, and the memory entry points:
 * allocation and free (synchronous and stream-ordered), synchronous and
 * asynchronous copies and memsets. Must never: execute an asynchronous
 * operation itself; it builds node parameters and hands them to si_submit,
 * so that eager execution and capture see exactly the same operation.
 *
 * Device pointers are host addresses (256-byte aligned) so tests read results
 * directly; new device memory is filled with 0xCD so a missing copy shows.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

#define SI_ALIGN 256u
#define SI_FRESH_FILL 0xCD

static struct si_vec freed_bases; /* device and pinned host bases freed, not yet reused */

/* ------------------------------------------------------------------ */
/* Registry and capacity.                                               */

static size_t alloc_pos(uintptr_t addr) /* first allocation with base > addr */
{
    size_t lo = 0, hi = si.allocs.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (((struct si_alloc *)si.allocs.v[mid])->base <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

struct si_alloc *si_mem_find(uintptr_t addr)
{
    size_t pos = alloc_pos(addr);
    if (pos == 0) return NULL;
    struct si_alloc *a = si.allocs.v[pos - 1];
    return addr < a->base + (a->size ? a->size : 1) ? a : NULL;
}

struct si_alloc *si_mem_find_range(uintptr_t addr, size_t len, bool device_only)
{
    struct si_alloc *a = si_mem_find(addr);
    if (!a || (device_only && a->kind == SI_MEM_HOST)) return NULL;
    if (len > a->base + a->size - addr) return NULL;
    return a;
}

CUmemorytype si_mem_type_of(uintptr_t addr)
{
    struct si_alloc *a = si_mem_find(addr);
    return a && a->kind != SI_MEM_HOST ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
}

CUresult si_mem_charge(size_t bytes)
{
    if (bytes > si.capacity || si.used > si.capacity - bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    si.used += bytes;
    return CUDA_SUCCESS;
}

void si_mem_uncharge(size_t bytes)
{
    si.used -= bytes < si.used ? bytes : si.used;
}

CUresult si_mem_alloc(size_t size, enum si_mem_kind kind, struct si_context *ctx,
                      struct si_alloc **out)
{
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (size + SI_ALIGN - 1) / SI_ALIGN * SI_ALIGN;
    if (rounded < size) return CUDA_ERROR_OUT_OF_MEMORY;
    if (kind != SI_MEM_HOST && si_mem_charge(size)) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Pinned host memory is not charged, but no machine pins more than
     * the device holds here: refused before the host allocator is asked
     * (a sanitizer's aborts on such a size instead of failing). */
    if (kind == SI_MEM_HOST && size > si.capacity) return CUDA_ERROR_OUT_OF_MEMORY;
    void *raw = aligned_alloc(SI_ALIGN, rounded);
    if (!raw) {
        if (kind != SI_MEM_HOST) si_mem_uncharge(size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (kind != SI_MEM_HOST) memset(raw, SI_FRESH_FILL, rounded);
    struct si_alloc *a = si_calloc(1, sizeof(*a));
    a->base = (uintptr_t)raw;
    a->size = size;
    a->kind = kind;
    a->ctx = ctx;
    a->refs = 1;
    si_vec_remove(&freed_bases, raw);
    size_t pos = alloc_pos(a->base);
    si_vec_push(&si.allocs, NULL);
    memmove(&si.allocs.v[pos + 1], &si.allocs.v[pos], (si.allocs.n - 1 - pos) * sizeof(void *));
    si.allocs.v[pos] = a;
    if (kind == SI_MEM_DEVICE) si.live_memory++;
    *out = a;
    return CUDA_SUCCESS;
}

void si_mem_release(struct si_alloc *a)
{
    if (--a->refs > 0) return;
    si_vec_remove(&si.allocs, a);
    if (a->kind != SI_MEM_HOST) si_mem_uncharge(a->size);
    if (a->kind == SI_MEM_DEVICE) si.live_memory--;
    if (a->kind != SI_MEM_GRAPH) si_vec_push(&freed_bases, (void *)a->base);
    free((void *)a->base);
    free(a);
}

static bool torn_down_with(const struct si_alloc *a, const struct si_context *ctx)
{
    return a->ctx == ctx && a->kind != SI_MEM_GRAPH && !a->async && !a->free_queued;
}

/* Context teardown: what cuMemAlloc and cuMemAllocHost gave in the context
 * is freed, as cuCtxDestroy documents. Not stream-ordered memory
 * (cuMemAllocAsync: "not associated with any CUDA context", kept until
 * freed explicitly), nor graph memory (its graph or executable graph owns
 * it), nor memory whose cuMemFreeAsync is still queued (the queue frees
 * it). Asynchronous mode: work still queued on another context's stream
 * that uses the memory is a violation, waited for as at cuMemFree (the
 * wait lets go of si.lock, so each allocation is looked up again). */
void si_mem_drop_context(struct si_context *ctx)
{
    struct si_vec bases = {0};
    for (size_t i = 0; i < si.allocs.n; i++) {
        struct si_alloc *a = si.allocs.v[i];
        if (torn_down_with(a, ctx)) si_vec_push(&bases, (void *)a->base);
    }
    for (size_t i = 0; i < bases.n; i++) {
        uintptr_t base = (uintptr_t)bases.v[i];
        if (si_async_active() && !si_async_before_free(base, "context teardown")) continue;
        struct si_alloc *a = si_mem_find(base);
        if (a && a->base == base && torn_down_with(a, ctx)) si_mem_release(a);
    }
    si_vec_free(&bases);
}

/* Frees what cuMemFree / cuMemFreeAsync name. A graph allocation is only
 * marked free: its address belongs to its alloc node for the graph's life. */
static CUresult free_device(CUdeviceptr dptr, const char *who)
{
    struct si_alloc *a = si_mem_find((uintptr_t)dptr);
    if (!a || a->base != (uintptr_t)dptr || a->kind == SI_MEM_HOST) {
        if (si_vec_contains(&freed_bases, (void *)(uintptr_t)dptr))
            si_misuse("%s of device memory already freed (%#llx)", who, (unsigned long long)dptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (a->kind == SI_MEM_GRAPH) {
        if (!a->graph_live) return CUDA_ERROR_INVALID_VALUE;
        a->graph_live = false;
        return CUDA_SUCCESS;
    }
    if (a->free_queued) { /* a cuMemFreeAsync of it is still queued */
        si_misuse("%s of device memory already freed (%#llx)", who, (unsigned long long)dptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (si_async_active() && !si_async_before_free(a->base, who)) return CUDA_ERROR_INVALID_VALUE;
    si_mem_release(si_mem_find((uintptr_t)dptr)); /* found again: the check may have waited */
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Allocation entry points.                                            */

static CUresult mem_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    struct si_context *ctx;
    struct si_alloc *a;
    CUresult rc = si_need_ctx(&ctx);
    if (rc) return rc;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_capture_unsafe_call("cuMemAlloc"))) return rc;
    if ((rc = si_mem_alloc(bytesize, SI_MEM_DEVICE, ctx, &a))) return rc;
    *dptr = (CUdeviceptr)a->base;
    return CUDA_SUCCESS;
}

static CUresult mem_free(CUdeviceptr dptr)
{
    CUresult rc = si_capture_unsafe_call("cuMemFree");
    if (rc) return rc;
    return dptr ? free_device(dptr, "cuMemFree") : CUDA_SUCCESS;
}

SI_API(cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize), mem_alloc(dptr, bytesize))
SI_API(cuMemFree_v2, (CUdeviceptr dptr), mem_free(dptr))

/* The device allocation holding an address (cuMemAlloc's, or a graph's). */
static CUresult mem_address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult rc = si_need_ctx(NULL);
    if (rc) return rc;
    struct si_alloc *a = si_mem_find((uintptr_t)dptr);
    if (!a || a->kind == SI_MEM_HOST) return CUDA_ERROR_NOT_FOUND;
    if (pbase) *pbase = (CUdeviceptr)a->base;
    if (psize) *psize = a->size;
    return CUDA_SUCCESS;
}

SI_API(cuMemGetAddressRange_v2, (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr),
       mem_address_range(pbase, psize, dptr))

SI_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    SI_ENTER(cuMemGetInfo_v2);
    if (!free_bytes || !total) return si_leave(CUDA_ERROR_INVALID_VALUE);
    *total = si.capacity;
    *free_bytes = si.capacity - (si.used < si.capacity ? si.used : si.capacity);
    return si_leave(CUDA_SUCCESS);
}

static CUresult mem_alloc_host(void **pp, size_t bytesize)
{
    struct si_context *ctx;
    struct si_alloc *a;
    CUresult rc = si_need_ctx(&ctx);
    if (rc) return rc;
    if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_capture_unsafe_call("cuMemAllocHost"))) return rc;
    if ((rc = si_mem_alloc(bytesize, SI_MEM_HOST, ctx, &a))) return rc;
    *pp = (void *)a->base;
    return CUDA_SUCCESS;
}

static CUresult mem_free_host(void *p)
{
    CUresult rc = si_capture_unsafe_call("cuMemFreeHost");
    if (rc) return rc;
    struct si_alloc *a = si_mem_find((uintptr_t)p);
    if (!a || a->kind != SI_MEM_HOST || a->base != (uintptr_t)p) {
        if (p && si_vec_contains(&freed_bases, p))
            si_misuse("cuMemFreeHost of host memory already freed (%p)", p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (si_async_active() && !si_async_before_free(a->base, "cuMemFreeHost")) return CUDA_ERROR_INVALID_VALUE;
    si_mem_release(si_mem_find((uintptr_t)p)); /* found again: the check may have waited */
    return CUDA_SUCCESS;
}

/* cuMemHostAlloc's flags: PORTABLE, DEVICEMAP, WRITECOMBINED; any other
 * bit is refused, as the driver does. */
static CUresult mem_host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return mem_alloc_host(pp, bytesize);
}

SI_API(cuMemAllocHost, (void **pp, unsigned int bytesize), mem_alloc_host(pp, bytesize))
SI_API(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int flags),
       mem_host_alloc(pp, bytesize, flags))
SI_API(cuMemAllocHost_v2, (void **pp, size_t bytesize), mem_alloc_host(pp, bytesize))

/* Page-locking host memory is a potentially unsafe call (measured on
 * driver 580: refused in GLOBAL and THREAD_LOCAL capture modes like
 * cuMemAlloc); the stand-in's memory is all host memory, so registration
 * changes nothing and is not tracked. */
static CUresult mem_host_register(void *p, size_t bytesize)
{
    CUresult rc = si_capture_unsafe_call("cuMemHostRegister");
    if (rc) return rc;
    return p && bytesize ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SI_API(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int flags),
       ((void)flags, mem_host_register(p, bytesize)))
SI_API(cuMemHostUnregister, (void *p), p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)
SI_API(cuMemFreeHost, (void *p), mem_free_host(p))

/* Stream-ordered allocation: immediate outside capture, a mem alloc node
 * (whose address stays fixed for the graph's life) inside. */
static CUresult mem_alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, bool ptsz)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc) return rc;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = si_capture_gate(s))) return rc;
    if (!s->cap) {
        struct si_alloc *a;
        if ((rc = si_mem_alloc(bytesize, SI_MEM_DEVICE, s->ctx, &a))) return rc;
        a->async = true;
        *dptr = (CUdeviceptr)a->base;
        return CUDA_SUCCESS;
    }
    struct si_params p = {0};
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC};
    np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    np.alloc.poolProps.location.id = 0;
    np.alloc.bytesize = bytesize;
    if ((rc = si_params_build(&p, &np, s->ctx))) return rc;
    struct si_node *node = NULL;
    CUdeviceptr got = p.np.alloc.dptr;
    if ((rc = si_submit(s, &p, &node))) return rc;
    /* A recapture matched to an existing node hands back that node's address. */
    *dptr = node ? node->p.np.alloc.dptr : got;
    return CUDA_SUCCESS;
}

/* Asynchronous mode: the memory goes when the stream reaches the free. */
static CUresult free_async(struct si_stream *s, CUdeviceptr dptr)
{
    struct si_alloc *a = si_mem_find((uintptr_t)dptr);
    if (!a || a->base != (uintptr_t)dptr || a->kind != SI_MEM_DEVICE || a->free_queued)
        return free_device(dptr, "cuMemFreeAsync"); /* graph memory, or an error */
    struct si_work *w = si_work_new(SI_WORK_FREE);
    a->free_queued = true;
    w->alloc = a;
    si_async_enqueue(s, w);
    return CUDA_SUCCESS;
}

static CUresult mem_free_async(CUdeviceptr dptr, CUstream hStream, bool ptsz)
{
    struct si_stream *s;
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc) return rc;
    if ((rc = si_capture_gate(s))) return rc;
    if (!s->cap && si_async_active()) return free_async(s, dptr);
    if (!s->cap) return free_device(dptr, "cuMemFreeAsync");
    struct si_params p = {0};
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEM_FREE};
    np.free.dptr = dptr;
    if ((rc = si_params_build(&p, &np, s->ctx))) return rc;
    return si_submit(s, &p, NULL);
}

SI_API(cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
       mem_alloc_async(dptr, bytesize, hStream, false))
SI_API(cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
       mem_alloc_async(dptr, bytesize, hStream, true))
SI_API(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), mem_free_async(dptr, hStream, false))
SI_API(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), mem_free_async(dptr, hStream, true))

/* ------------------------------------------------------------------ */
/* Copies and memsets: parameters, then submit or run.                  */

static void copy_operand(CUDA_MEMCPY3D *c, bool dst, CUmemorytype type, uintptr_t addr)
{
    if (dst) {
        c->dstMemoryType = type;
        if (type == CU_MEMORYTYPE_HOST) c->dstHost = (void *)addr;
        else c->dstDevice = (CUdeviceptr)addr;
    } else {
        c->srcMemoryType = type;
        if (type == CU_MEMORYTYPE_HOST) c->srcHost = (const void *)addr;
        else c->srcDevice = (CUdeviceptr)addr;
    }
}

static CUgraphNodeParams copy_1d(CUmemorytype dt, uintptr_t dst, CUmemorytype st, uintptr_t src,
                                 size_t bytes, struct si_context *ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    np.memcpy.copyCtx = (CUcontext)ctx;
    copy_operand(&np.memcpy.copyParams, true, dt, dst);
    copy_operand(&np.memcpy.copyParams, false, st, src);
    np.memcpy.copyParams.WidthInBytes = bytes;
    np.memcpy.copyParams.Height = 1;
    np.memcpy.copyParams.Depth = 1;
    return np;
}

static CUgraphNodeParams copy_3d(const CUDA_MEMCPY3D *c, struct si_context *ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    np.memcpy.copyCtx = (CUcontext)ctx;
    np.memcpy.copyParams = *c;
    return np;
}

static CUgraphNodeParams copy_2d(const CUDA_MEMCPY2D *c, struct si_context *ctx)
{
    CUDA_MEMCPY3D d = {0};
    d.srcXInBytes = c->srcXInBytes;
    d.srcY = c->srcY;
    d.srcMemoryType = c->srcMemoryType;
    d.srcHost = c->srcHost;
    d.srcDevice = c->srcDevice;
    d.srcArray = c->srcArray;
    d.srcPitch = c->srcPitch;
    d.dstXInBytes = c->dstXInBytes;
    d.dstY = c->dstY;
    d.dstMemoryType = c->dstMemoryType;
    d.dstHost = c->dstHost;
    d.dstDevice = c->dstDevice;
    d.dstArray = c->dstArray;
    d.dstPitch = c->dstPitch;
    d.WidthInBytes = c->WidthInBytes;
    d.Height = c->Height;
    d.Depth = 1;
    return copy_3d(&d, ctx);
}

static CUgraphNodeParams memset_2d(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
                                   size_t width, size_t height, struct si_context *ctx)
{
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    np.memset.dst = dst;
    np.memset.pitch = pitch;
    np.memset.value = value;
    np.memset.elementSize = elem;
    np.memset.width = width;
    np.memset.height = height;
    np.memset.ctx = (CUcontext)ctx;
    return np;
}

/* Enqueues on a stream (async entry points). */
static CUresult enqueue(CUstream hStream, bool ptsz, CUgraphNodeParams (*make)(const void *, struct si_context *),
                        const void *arg)
{
    struct si_stream *s;
    struct si_params p = {0};
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc) return rc;
    if ((rc = si_capture_gate(s))) return rc;
    CUgraphNodeParams np = make(arg, s->ctx);
    if ((rc = si_params_build(&p, &np, s->ctx))) return rc;
    return si_submit(s, &p, NULL);
}

/* Runs now on the default stream (synchronous entry points). */
static CUresult run_sync(bool ptds, const char *what,
                         CUgraphNodeParams (*make)(const void *, struct si_context *), const void *arg)
{
    struct si_stream *s;
    struct si_context *ctx;
    struct si_params p = {0};
    CUresult rc = si_need_ctx(&ctx);
    if (rc) return rc;
    if ((rc = si_sync_default_stream(ptds, what, &s))) return rc;
    CUgraphNodeParams np = make(arg, ctx);
    if ((rc = si_params_build(&p, &np, ctx))) return rc;
    if (si_async_active()) { /* queued behind the default stream's work, then waited for */
        si_async_submit(s, &p);
        return si_async_sync_stream(s);
    }
    rc = si_params_run(&p, s);
    si_params_free(&p);
    return rc;
}

/* Argument packs for the generic paths above. */
struct copy_args {
    CUmemorytype dt, st;
    uintptr_t dst, src;
    size_t bytes;
};
struct set_args {
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elem;
    size_t width, height;
};

static CUgraphNodeParams make_copy(const void *arg, struct si_context *ctx)
{
    const struct copy_args *a = arg;
    CUmemorytype dt = a->dt == CU_MEMORYTYPE_UNIFIED ? si_mem_type_of(a->dst) : a->dt;
    CUmemorytype st = a->st == CU_MEMORYTYPE_UNIFIED ? si_mem_type_of(a->src) : a->st;
    return copy_1d(dt, a->dst, st, a->src, a->bytes, ctx);
}

static CUgraphNodeParams make_copy2d(const void *arg, struct si_context *ctx)
{
    return copy_2d(arg, ctx);
}

static CUgraphNodeParams make_copy3d(const void *arg, struct si_context *ctx)
{
    return copy_3d(arg, ctx);
}

static CUgraphNodeParams make_set(const void *arg, struct si_context *ctx)
{
    const struct set_args *a = arg;
    return memset_2d(a->dst, a->pitch, a->value, a->elem, a->width, a->height, ctx);
}

#define COPY(dt_, dst_, st_, src_, n_) \
    (&(struct copy_args){.dt = (dt_), .dst = (uintptr_t)(dst_), .st = (st_), .src = (uintptr_t)(src_), .bytes = (n_)})
#define SET(dst_, pitch_, v_, elem_, w_, h_) \
    (&(struct set_args){.dst = (dst_), .pitch = (pitch_), .value = (v_), .elem = (elem_), .width = (w_), .height = (h_)})
#define D CU_MEMORYTYPE_DEVICE
#define H CU_MEMORYTYPE_HOST
#define U CU_MEMORYTYPE_UNIFIED

/* ---- synchronous ---- */
SI_API(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n),
       run_sync(false, "cuMemcpy", make_copy, COPY(U, dst, U, src, n)))
SI_API(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n),
       run_sync(true, "cuMemcpy", make_copy, COPY(U, dst, U, src, n)))
SI_API(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n),
       run_sync(false, "cuMemcpyHtoD", make_copy, COPY(D, dst, H, src, n)))
SI_API(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void *src, size_t n),
       run_sync(true, "cuMemcpyHtoD", make_copy, COPY(D, dst, H, src, n)))
SI_API(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n),
       run_sync(false, "cuMemcpyDtoH", make_copy, COPY(H, dst, D, src, n)))
SI_API(cuMemcpyDtoH_v2_ptds, (void *dst, CUdeviceptr src, size_t n),
       run_sync(true, "cuMemcpyDtoH", make_copy, COPY(H, dst, D, src, n)))
SI_API(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n),
       run_sync(false, "cuMemcpyDtoD", make_copy, COPY(D, dst, D, src, n)))
SI_API(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n),
       run_sync(true, "cuMemcpyDtoD", make_copy, COPY(D, dst, D, src, n)))
SI_API(cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n),
       run_sync(false, "cuMemsetD8", make_set, SET(dst, 0, v, 1, n, 1)))
SI_API(cuMemsetD8_v2_ptds, (CUdeviceptr dst, unsigned char v, size_t n),
       run_sync(true, "cuMemsetD8", make_set, SET(dst, 0, v, 1, n, 1)))
SI_API(cuMemsetD16_v2, (CUdeviceptr dst, unsigned short v, size_t n),
       run_sync(false, "cuMemsetD16", make_set, SET(dst, 0, v, 2, n, 1)))
SI_API(cuMemsetD16_v2_ptds, (CUdeviceptr dst, unsigned short v, size_t n),
       run_sync(true, "cuMemsetD16", make_set, SET(dst, 0, v, 2, n, 1)))
SI_API(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int v, size_t n),
       run_sync(false, "cuMemsetD32", make_set, SET(dst, 0, v, 4, n, 1)))
SI_API(cuMemsetD32_v2_ptds, (CUdeviceptr dst, unsigned int v, size_t n),
       run_sync(true, "cuMemsetD32", make_set, SET(dst, 0, v, 4, n, 1)))

/* ---- asynchronous ---- */
SI_API(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
       enqueue(s, false, make_copy, COPY(U, dst, U, src, n)))
SI_API(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
       enqueue(s, true, make_copy, COPY(U, dst, U, src, n)))
SI_API(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s),
       enqueue(s, false, make_copy, COPY(D, dst, H, src, n)))
SI_API(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void *src, size_t n, CUstream s),
       enqueue(s, true, make_copy, COPY(D, dst, H, src, n)))
SI_API(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s),
       enqueue(s, false, make_copy, COPY(H, dst, D, src, n)))
SI_API(cuMemcpyDtoHAsync_v2_ptsz, (void *dst, CUdeviceptr src, size_t n, CUstream s),
       enqueue(s, true, make_copy, COPY(H, dst, D, src, n)))
SI_API(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
       enqueue(s, false, make_copy, COPY(D, dst, D, src, n)))
SI_API(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
       enqueue(s, true, make_copy, COPY(D, dst, D, src, n)))
SI_API(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *c, CUstream s),
       c ? enqueue(s, false, make_copy2d, c) : CUDA_ERROR_INVALID_VALUE)
SI_API(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *c, CUstream s),
       c ? enqueue(s, true, make_copy2d, c) : CUDA_ERROR_INVALID_VALUE)
SI_API(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *c, CUstream s),
       c ? enqueue(s, false, make_copy3d, c) : CUDA_ERROR_INVALID_VALUE)
SI_API(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *c, CUstream s),
       c ? enqueue(s, true, make_copy3d, c) : CUDA_ERROR_INVALID_VALUE)
SI_API(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s),
       enqueue(s, false, make_set, SET(dst, 0, v, 1, n, 1)))
SI_API(cuMemsetD8Async_ptsz, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s),
       enqueue(s, true, make_set, SET(dst, 0, v, 1, n, 1)))
SI_API(cuMemsetD16Async, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s),
       enqueue(s, false, make_set, SET(dst, 0, v, 2, n, 1)))
SI_API(cuMemsetD16Async_ptsz, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s),
       enqueue(s, true, make_set, SET(dst, 0, v, 2, n, 1)))
SI_API(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s),
       enqueue(s, false, make_set, SET(dst, 0, v, 4, n, 1)))
SI_API(cuMemsetD32Async_ptsz, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s),
       enqueue(s, true, make_set, SET(dst, 0, v, 4, n, 1)))
SI_API(cuMemsetD2D8Async, (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
       enqueue(s, false, make_set, SET(dst, pitch, v, 1, w, h)))
SI_API(cuMemsetD2D8Async_ptsz, (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
       enqueue(s, true, make_set, SET(dst, pitch, v, 1, w, h)))
SI_API(cuMemsetD2D16Async, (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
       enqueue(s, false, make_set, SET(dst, pitch, v, 2, w, h)))
SI_API(cuMemsetD2D16Async_ptsz, (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
       enqueue(s, true, make_set, SET(dst, pitch, v, 2, w, h)))
SI_API(cuMemsetD2D32Async, (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
       enqueue(s, false, make_set, SET(dst, pitch, v, 4, w, h)))
SI_API(cuMemsetD2D32Async_ptsz, (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
       enqueue(s, true, make_set, SET(dst, pitch, v, 4, w, h)))
