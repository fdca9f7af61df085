/*
 * standin_params.c - node parameters: validation, deep copies, comparison,
 * the update rule, and execution of one leaf operation.
 *
 * Owns: struct si_params (a CUgraphNodeParams plus what it owns), the single
 * function that decides whether an executable-graph update with new
 * parameters is accepted (si_update_rule), and the CPU execution of kernels,
 * copies, memsets, host functions and event records. Must never: know about
 * streams in capture, graphs' topology or executable graphs; those call in.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Memory operands.                                                     */

struct operand {
    CUmemorytype type; /* HOST or DEVICE once resolved */
    uintptr_t base;    /* address of byte (0,0,0) of the operand */
};

static struct operand copy_src(const CUDA_MEMCPY3D *c)
{
    struct operand o = {c->srcMemoryType, 0};
    if (o.type == CU_MEMORYTYPE_HOST) o.base = (uintptr_t)c->srcHost;
    else o.base = (uintptr_t)c->srcDevice;
    if (o.type == CU_MEMORYTYPE_UNIFIED) o.type = si_mem_type_of(o.base);
    return o;
}

static struct operand copy_dst(const CUDA_MEMCPY3D *c)
{
    struct operand o = {c->dstMemoryType, 0};
    if (o.type == CU_MEMORYTYPE_HOST) o.base = (uintptr_t)c->dstHost;
    else o.base = (uintptr_t)c->dstDevice;
    if (o.type == CU_MEMORYTYPE_UNIFIED) o.type = si_mem_type_of(o.base);
    return o;
}

/* Bytes from the operand base to the end of the last byte touched. */
static size_t copy_span(size_t x, size_t y, size_t z, size_t pitch, size_t height,
                        const CUDA_MEMCPY3D *c)
{
    if (!c->WidthInBytes || !c->Height || !c->Depth) return 0;
    size_t slice = pitch * (height ? height : c->Height);
    return x + c->WidthInBytes + (y + c->Height - 1) * pitch + (z + c->Depth - 1) * slice;
}

static CUresult check_operand(struct operand o, CUmemorytype declared, size_t span)
{
    if (declared == CU_MEMORYTYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
    if (declared != CU_MEMORYTYPE_HOST && declared != CU_MEMORYTYPE_DEVICE &&
        declared != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_INVALID_VALUE;
    if (span == 0) return CUDA_SUCCESS;
    if (!o.base) return CUDA_ERROR_INVALID_VALUE;
    if (o.type == CU_MEMORYTYPE_DEVICE && !si_mem_find_range(o.base, span, true))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult check_copy(const CUDA_MEMCPY3D *c)
{
    if ((c->Height > 1 || c->Depth > 1) &&
        (c->srcPitch < c->srcXInBytes + c->WidthInBytes || c->dstPitch < c->dstXInBytes + c->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_operand(copy_src(c), c->srcMemoryType,
                                copy_span(c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, c));
    if (rc) return rc;
    return check_operand(copy_dst(c), c->dstMemoryType,
                         copy_span(c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c));
}

static size_t memset_span(const CUDA_MEMSET_NODE_PARAMS_v2 *m)
{
    if (!m->width || !m->height) return 0;
    return (m->height - 1) * m->pitch + m->width * m->elementSize;
}

static CUresult check_memset(const CUDA_MEMSET_NODE_PARAMS_v2 *m)
{
    if (m->elementSize != 1 && m->elementSize != 2 && m->elementSize != 4) return CUDA_ERROR_INVALID_VALUE;
    if (m->height == 0) return CUDA_ERROR_INVALID_VALUE;
    if (m->height > 1 && m->pitch < m->width * m->elementSize) return CUDA_ERROR_INVALID_VALUE;
    if ((uintptr_t)m->dst % m->elementSize) return CUDA_ERROR_INVALID_VALUE;
    size_t span = memset_span(m);
    if (span && !si_mem_find_range((uintptr_t)m->dst, span, true)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Building.                                                           */

static CUresult build_kernel(struct si_params *out, const CUDA_KERNEL_NODE_PARAMS_v3 *k,
                             struct si_context *ctx)
{
    struct si_function *f;
    CUresult rc = k->func ? si_get_func(k->func, &f) : si_get(k->kern, SI_KERNEL, &f);
    if (rc) return rc;
    if (!k->gridDimX || !k->gridDimY || !k->gridDimZ || !k->blockDimX || !k->blockDimY ||
        !k->blockDimZ)
        return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long long)k->blockDimX * k->blockDimY * k->blockDimZ > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    const struct si_kfunc *kf = f->k;
    const char *buffer = NULL;
    size_t buffer_size = 0;
    if (k->kernelParams && k->extra) return CUDA_ERROR_INVALID_VALUE;
    for (void **e = k->extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = e[1];
        else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) buffer_size = *(size_t *)e[1];
        else return CUDA_ERROR_INVALID_VALUE;
    }
    if (kf->nparams && !k->kernelParams && (!buffer || buffer_size < kf->arg_bytes))
        return CUDA_ERROR_INVALID_VALUE;
    memset(out, 0, sizeof(*out));
    out->np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    out->np.kernel = *k;
    out->np.kernel.extra = NULL;
    out->kctx = f->ctx ? f->ctx : (k->ctx ? (struct si_context *)k->ctx : ctx);
    /* The driver holds a library kernel's node as the CUkernel with its
     * CUfunction in the node's context, whichever of the two the call
     * named (measured on 580 for a runtime launch: the node's parameters
     * report func = cuKernelGetFunction's, kern = the CUkernel, ctx). */
    struct si_function *kernel = f->h.kind == SI_KERNEL ? f : f->kernel;
    if (kernel && out->kctx) {
        f = si_kernel_function(kernel, out->kctx);
        out->np.kernel.func = (CUfunction)f;
        out->np.kernel.kern = (CUkernel)kernel;
    }
    out->func = f;
    out->np.kernel.ctx = (CUcontext)out->kctx;
    out->argv = si_calloc(kf->nparams, sizeof(void *));
    for (unsigned i = 0; i < kf->nparams; i++) {
        out->argv[i] = si_calloc(1, kf->sizes[i]);
        const void *src = k->kernelParams ? k->kernelParams[i] : buffer + kf->offsets[i];
        memcpy(out->argv[i], src, kf->sizes[i]);
    }
    out->np.kernel.kernelParams = out->argv;
    return CUDA_SUCCESS;
}

CUresult si_params_kernel(struct si_params *out, const CUDA_KERNEL_NODE_PARAMS *kp,
                          struct si_context *ctx)
{
    CUDA_KERNEL_NODE_PARAMS_v3 k;
    memcpy(&k, kp, sizeof(k));
    return build_kernel(out, &k, ctx);
}

static CUresult build_alloc(struct si_params *out, const CUDA_MEM_ALLOC_NODE_PARAMS_v2 *a)
{
    if (a->bytesize == 0 || a->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        a->poolProps.location.id != 0 || a->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        (a->accessDescCount && !a->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = si_mem_alloc(a->bytesize, SI_MEM_GRAPH, NULL, &out->alloc);
    if (rc) return rc;
    out->np.alloc = *a;
    out->np.alloc.dptr = (CUdeviceptr)out->alloc->base;
    if (a->accessDescCount) {
        out->access = si_calloc(a->accessDescCount, sizeof(CUmemAccessDesc));
        memcpy(out->access, a->accessDescs, a->accessDescCount * sizeof(CUmemAccessDesc));
    }
    out->np.alloc.accessDescs = out->access;
    return CUDA_SUCCESS;
}

CUresult si_params_build(struct si_params *out, const CUgraphNodeParams *in, struct si_context *ctx)
{
    CUresult rc = CUDA_SUCCESS;
    struct si_event *ev;
    memset(out, 0, sizeof(*out));
    if (!in) return CUDA_ERROR_INVALID_VALUE;
    switch (in->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return build_kernel(out, &in->kernel, ctx);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if ((rc = check_copy(&in->memcpy.copyParams))) return rc;
        out->np.memcpy = in->memcpy;
        if (!out->np.memcpy.copyCtx) out->np.memcpy.copyCtx = (CUcontext)ctx;
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if ((rc = check_memset(&in->memset))) return rc;
        out->np.memset = in->memset;
        if (!out->np.memset.ctx) out->np.memset.ctx = (CUcontext)ctx;
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        if (!in->host.fn) return CUDA_ERROR_INVALID_VALUE;
        out->np.host = in->host;
        break;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        break;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        if ((rc = si_get(in->eventRecord.event, SI_EVENT, &ev))) return rc;
        out->np.eventRecord = in->eventRecord;
        break;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        if ((rc = si_get(in->eventWait.event, SI_EVENT, &ev))) return rc;
        out->np.eventWait = in->eventWait;
        break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        if ((rc = build_alloc(out, &in->alloc))) return rc;
        break;
    case CU_GRAPH_NODE_TYPE_MEM_FREE: {
        struct si_alloc *a = si_mem_find((uintptr_t)in->free.dptr);
        if (!a || a->kind != SI_MEM_GRAPH || a->base != (uintptr_t)in->free.dptr)
            return CUDA_ERROR_INVALID_VALUE;
        a->refs++;
        out->alloc = a;
        out->np.free = in->free;
        break;
    }
    default:
        /* Child graphs and conditionals are built by the graph module. */
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    out->np.type = in->type;
    return CUDA_SUCCESS;
}

void si_params_copy(struct si_params *dst, const struct si_params *src)
{
    *dst = *src;
    if (src->np.type == CU_GRAPH_NODE_TYPE_KERNEL) {
        unsigned n = src->func->k->nparams;
        dst->argv = si_calloc(n, sizeof(void *));
        for (unsigned i = 0; i < n; i++) {
            size_t size = src->func->k->sizes[i];
            dst->argv[i] = si_calloc(1, size);
            memcpy(dst->argv[i], src->argv[i], size);
        }
        dst->np.kernel.kernelParams = dst->argv;
    }
    if (src->access) {
        size_t n = src->np.alloc.accessDescCount;
        dst->access = si_calloc(n, sizeof(CUmemAccessDesc));
        memcpy(dst->access, src->access, n * sizeof(CUmemAccessDesc));
        dst->np.alloc.accessDescs = dst->access;
    }
    if (src->alloc) src->alloc->refs++;
    if (src->np.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) si_cond_handle_hold(src->np.conditional.handle);
    /* Child graphs and conditional bodies are deep-copied by their owners. */
    dst->child = NULL;
    dst->cond = NULL;
}

void si_params_free(struct si_params *p)
{
    if (p->argv) {
        for (unsigned i = 0; i < p->func->k->nparams; i++) free(p->argv[i]);
        free(p->argv);
    }
    free(p->access);
    if (p->alloc) si_mem_release(p->alloc);
    if (p->np.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) si_cond_handle_drop(p->np.conditional.handle);
    if (p->child) si_graph_free(p->child);
    if (p->cond) {
        for (unsigned i = 0; i < p->cond->nbodies; i++) si_graph_free(p->cond->bodies[i]);
        free(p->cond);
    }
    memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------------------------ */
/* Comparison.                                                         */

static bool copy_equal(const CUDA_MEMCPY3D *a, const CUDA_MEMCPY3D *b)
{
    struct operand as = copy_src(a), bs = copy_src(b), ad = copy_dst(a), bd = copy_dst(b);
    return as.type == bs.type && as.base == bs.base && ad.type == bd.type && ad.base == bd.base &&
           a->srcXInBytes == b->srcXInBytes && a->srcY == b->srcY && a->srcZ == b->srcZ &&
           a->srcPitch == b->srcPitch && a->srcHeight == b->srcHeight &&
           a->dstXInBytes == b->dstXInBytes && a->dstY == b->dstY && a->dstZ == b->dstZ &&
           a->dstPitch == b->dstPitch && a->dstHeight == b->dstHeight &&
           a->WidthInBytes == b->WidthInBytes && a->Height == b->Height && a->Depth == b->Depth;
}

static bool memset_equal(const CUDA_MEMSET_NODE_PARAMS_v2 *a, const CUDA_MEMSET_NODE_PARAMS_v2 *b)
{
    return a->dst == b->dst && a->pitch == b->pitch && a->value == b->value &&
           a->elementSize == b->elementSize && a->width == b->width && a->height == b->height &&
           a->ctx == b->ctx;
}

static bool alloc_equal(const struct si_params *a, const struct si_params *b)
{
    const CUDA_MEM_ALLOC_NODE_PARAMS_v2 *x = &a->np.alloc, *y = &b->np.alloc;
    return x->bytesize == y->bytesize && x->poolProps.allocType == y->poolProps.allocType &&
           x->poolProps.location.type == y->poolProps.location.type &&
           x->poolProps.location.id == y->poolProps.location.id &&
           x->accessDescCount == y->accessDescCount &&
           (!x->accessDescCount ||
            memcmp(a->access, b->access, x->accessDescCount * sizeof(CUmemAccessDesc)) == 0);
}

bool si_params_equal(const struct si_params *a, const struct si_params *b)
{
    if (a->np.type != b->np.type) return false;
    switch (a->np.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        const CUDA_KERNEL_NODE_PARAMS_v3 *x = &a->np.kernel, *y = &b->np.kernel;
        if (a->func != b->func || a->kctx != b->kctx || x->gridDimX != y->gridDimX ||
            x->gridDimY != y->gridDimY || x->gridDimZ != y->gridDimZ || x->blockDimX != y->blockDimX ||
            x->blockDimY != y->blockDimY || x->blockDimZ != y->blockDimZ ||
            x->sharedMemBytes != y->sharedMemBytes || a->cooperative != b->cooperative ||
            a->priority != b->priority)
            return false;
        for (unsigned i = 0; i < a->func->k->nparams; i++)
            if (memcmp(a->argv[i], b->argv[i], a->func->k->sizes[i]) != 0) return false;
        return true;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return a->np.memcpy.copyCtx == b->np.memcpy.copyCtx &&
               copy_equal(&a->np.memcpy.copyParams, &b->np.memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: return memset_equal(&a->np.memset, &b->np.memset);
    case CU_GRAPH_NODE_TYPE_HOST:
        return a->np.host.fn == b->np.host.fn && a->np.host.userData == b->np.host.userData;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return a->np.eventRecord.event == b->np.eventRecord.event;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return a->np.eventWait.event == b->np.eventWait.event;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return alloc_equal(a, b);
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return a->np.free.dptr == b->np.free.dptr;
    case CU_GRAPH_NODE_TYPE_GRAPH: return a->child == b->child;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return a->np.conditional.handle == b->np.conditional.handle &&
               a->np.conditional.type == b->np.conditional.type &&
               a->np.conditional.size == b->np.conditional.size;
    default: return true;
    }
}

/* ------------------------------------------------------------------ */
/* The update rule (cuGraphExecUpdate's documented limitations).       */

static const struct si_alloc *operand_alloc(struct operand o)
{
    return o.type == CU_MEMORYTYPE_DEVICE ? si_mem_find(o.base) : NULL;
}

/* "The source/destination memory must be allocated from the same contexts
 * (and kind of allocation) as the original." Where the original was freed
 * since (a caching allocator's pool released with its graph kept), what
 * the driver compares is not documented: refused, or with
 * STANDIN_UPDATE_FREED=accept taken as the same home (READINGS.md). */
static bool same_home(struct operand a, struct operand b)
{
    const struct si_alloc *x = operand_alloc(a), *y = operand_alloc(b);
    if (!x && y && a.type == CU_MEMORYTYPE_DEVICE && si.update_freed_accepted)
        return true;
    if (!x || !y) return x == y;
    return x->ctx == y->ctx && x->kind == y->kind;
}

static bool is_1d_copy(const CUDA_MEMCPY3D *c)
{
    return c->Height <= 1 && c->Depth <= 1;
}

static CUgraphExecUpdateResult kernel_rule(const struct si_params *o, const struct si_params *n,
                                           const struct si_update_ctx *uc)
{
    unsigned ot = o->func->k->traits, nt = n->func->k->traits;
    if (o->kctx != n->kctx) return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
    if (!(ot & STANDIN_KERNEL_USES_CDP) && (nt & STANDIN_KERNEL_USES_CDP))
        return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
    if (!(uc->exec_flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
        !(ot & STANDIN_KERNEL_DEVICE_GRAPH_LAUNCH) && (nt & STANDIN_KERNEL_DEVICE_GRAPH_LAUNCH) &&
        !uc->exec_has_device_launch)
        return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
    if (o->cooperative != n->cooperative) return CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED;
    if ((uc->exec_flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) && o->priority != n->priority)
        return CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

static CUgraphExecUpdateResult memcpy_rule(const CUDA_MEMCPY3D *o, const CUDA_MEMCPY3D *n,
                                           const struct si_update_ctx *uc)
{
    struct operand os = copy_src(o), ns = copy_src(n), od = copy_dst(o), nd = copy_dst(n);
    if (os.type != ns.type || od.type != nd.type) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    if (!same_home(os, ns) || !same_home(od, nd)) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    if (uc->scope == SI_UPDATE_SINGLE_NODE &&
        (!is_1d_copy(o) || !is_1d_copy(n) || n->WidthInBytes == 0))
        return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

static CUgraphExecUpdateResult memset_rule(const CUDA_MEMSET_NODE_PARAMS_v2 *o,
                                           const CUDA_MEMSET_NODE_PARAMS_v2 *n,
                                           const struct si_update_ctx *uc)
{
    struct operand od = {CU_MEMORYTYPE_DEVICE, (uintptr_t)o->dst};
    struct operand nd = {CU_MEMORYTYPE_DEVICE, (uintptr_t)n->dst};
    if (!same_home(od, nd)) return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    if (n->width == 0 && uc->scope == SI_UPDATE_SINGLE_NODE)
        return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    if (o->height > 1) { /* 2D: only the address and the value may change */
        if (n->height != o->height || n->width != o->width || n->pitch != o->pitch ||
            n->elementSize != o->elementSize)
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    } else if (n->height != o->height) {
        return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    }
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

CUgraphExecUpdateResult si_update_rule(const struct si_params *o, const struct si_params *n,
                                       const struct si_update_ctx *uc)
{
    if (o->np.type != n->np.type) return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    switch (o->np.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return kernel_rule(o, n, uc);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return memcpy_rule(&o->np.memcpy.copyParams, &n->np.memcpy.copyParams, uc);
    case CU_GRAPH_NODE_TYPE_MEMSET: return memset_rule(&o->np.memset, &n->np.memset, uc);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        /* Per-node setters: "API unsupported". A whole-graph update keeps
         * them only when nothing about them changed. */
        if (uc->scope == SI_UPDATE_SINGLE_NODE) return CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
        return si_params_equal(o, n) ? CU_GRAPH_EXEC_UPDATE_SUCCESS
                                     : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        /* Measured (driver 580, tests/gpu/conditional.cu): another handle,
         * with other default value and flags, is taken over by the
         * executable graph. Type and size are assumed fixed ("changing
         * node parameters is not supported"). */
        return o->np.conditional.type == n->np.conditional.type &&
                       o->np.conditional.size == n->np.conditional.size &&
                       o->np.conditional.ctx == n->np.conditional.ctx
                   ? CU_GRAPH_EXEC_UPDATE_SUCCESS
                   : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    default: /* host, events, empty: unrestricted; child graphs recurse in the caller */
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
}

/* ------------------------------------------------------------------ */
/* Execution of one leaf operation, synchronously, on this thread.      */

static void run_copy(const CUDA_MEMCPY3D *c)
{
    struct operand s = copy_src(c), d = copy_dst(c);
    size_t s_slice = c->srcPitch * (c->srcHeight ? c->srcHeight : c->Height);
    size_t d_slice = c->dstPitch * (c->dstHeight ? c->dstHeight : c->Height);
    for (size_t z = 0; z < c->Depth; z++) {
        for (size_t y = 0; y < c->Height; y++) {
            char *dp = (char *)d.base + c->dstXInBytes + (c->dstY + y) * c->dstPitch +
                       (c->dstZ + z) * d_slice;
            const char *sp = (const char *)s.base + c->srcXInBytes + (c->srcY + y) * c->srcPitch +
                             (c->srcZ + z) * s_slice;
            memmove(dp, sp, c->WidthInBytes);
        }
    }
}

static void run_memset(const CUDA_MEMSET_NODE_PARAMS_v2 *m)
{
    for (size_t y = 0; y < m->height; y++) {
        char *row = (char *)(uintptr_t)m->dst + y * m->pitch;
        for (size_t x = 0; x < m->width; x++) {
            if (m->elementSize == 1) ((uint8_t *)row)[x] = (uint8_t)m->value;
            else if (m->elementSize == 2) ((uint16_t *)row)[x] = (uint16_t)m->value;
            else ((uint32_t *)row)[x] = m->value;
        }
    }
}

static CUresult run_kernel(const struct si_params *p)
{
    const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->np.kernel;
    if (p->func->h.state != SI_LIVE) {
        if (si_tls.worker) si_violation("a queued kernel's module or library was unloaded before it ran");
        else si_misuse("launch of a kernel whose module or library was unloaded");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct standin_dims dims = {{k->gridDimX, k->gridDimY, k->gridDimZ},
                                {k->blockDimX, k->blockDimY, k->blockDimZ},
                                k->sharedMemBytes};
    si_user_code_begin("a kernel");
    p->func->k->fn(&dims, p->argv);
    si_user_code_end();
    return CUDA_SUCCESS;
}

CUresult si_params_run(const struct si_params *p, struct si_stream *stream)
{
    switch (p->np.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return run_kernel(p);
    case CU_GRAPH_NODE_TYPE_MEMCPY: run_copy(&p->np.memcpy.copyParams); return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET: run_memset(&p->np.memset); return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_HOST:
        si_user_code_begin("a host function");
        p->np.host.fn(p->np.host.userData);
        si_user_code_end();
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
        struct si_event *ev = (struct si_event *)p->np.eventRecord.event;
        if (ev->h.state != SI_LIVE) return CUDA_ERROR_INVALID_HANDLE;
        ev->recorded = true;
        ev->time_ms = si_now_ms();
        ev->cap_id = 0;
        return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS; /* everything before already ran */
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}
