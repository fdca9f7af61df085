/*
 * standin_module.c - registered kernels, modules, libraries and launches.
 *
 * Owns: the kernel registry (standin_register_kernel), cuModule* and
 * cuLibrary* (every loaded image holds every registered kernel), CUfunction
 * and CUkernel handles, parameter layout queries, and the kernel and host
 * function launch entry points. Must never: run a kernel itself; a launch
 * builds kernel node parameters and hands them to si_submit.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Registry.                                                           */

struct si_kfunc *si_kernel_lookup(const char *name)
{
    for (size_t i = 0; i < si.kernels.n; i++) {
        struct si_kfunc *k = si.kernels.v[i];
        if (strcmp(k->name, name) == 0) return k;
    }
    return NULL;
}

/* Natural alignment: the largest power of two dividing the size, at most 8
 * (what a C compiler gives a kernel parameter of that size). */
static size_t param_align(size_t size)
{
    size_t a = 1;
    while (a < 8 && size % (a * 2) == 0) a *= 2;
    return a;
}

SI_EXPORT int standin_register_kernel(const char *name, standin_kernel_fn fn, unsigned nparams,
                                      const size_t *param_sizes)
{
    int rc = -1;
    if (!name || !fn || (nparams && !param_sizes)) return -1;
    si_control_lock();
    if (!si_kernel_lookup(name)) {
        struct si_kfunc *k = si_calloc(1, sizeof(*k));
        k->name = si_strdup(name);
        k->fn = fn;
        k->nparams = nparams;
        k->sizes = si_calloc(nparams, sizeof(size_t));
        k->offsets = si_calloc(nparams, sizeof(size_t));
        size_t off = 0;
        for (unsigned i = 0; i < nparams; i++) {
            size_t align = param_align(param_sizes[i]);
            off = (off + align - 1) / align * align;
            k->sizes[i] = param_sizes[i];
            k->offsets[i] = off;
            off += param_sizes[i];
        }
        k->arg_bytes = off;
        si_vec_push(&si.kernels, k);
        rc = 0;
    }
    si_control_unlock();
    return rc;
}

SI_EXPORT int standin_set_kernel_traits(const char *name, unsigned traits)
{
    si_control_lock();
    struct si_kfunc *k = name ? si_kernel_lookup(name) : NULL;
    if (k) k->traits = traits;
    si_control_unlock();
    return k ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* Modules and libraries.                                              */

static CUresult image_load(struct si_module **out, bool library, const void *image)
{
    struct si_context *ctx = NULL;
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    if (!library) {
        CUresult rc = si_need_ctx(&ctx);
        if (rc) return rc;
    }
    struct si_module *m = si_calloc(1, sizeof(*m));
    si_obj_init(m, library ? SI_LIBRARY : SI_MODULE);
    m->ctx = ctx;
    *out = m;
    return CUDA_SUCCESS;
}

static void image_unload(struct si_module *m)
{
    for (size_t i = 0; i < m->funcs.n; i++) {
        struct si_function *f = m->funcs.v[i];
        for (size_t j = 0; j < f->per_ctx.n; j++) si_obj_kill(f->per_ctx.v[j]);
        si_vec_free(&f->per_ctx);
        si_obj_kill(f);
    }
    si_vec_free(&m->funcs);
    si_obj_kill(m);
}

/* Context teardown: the context's modules unload (their functions with
 * them), and each library kernel's CUfunction in the context goes (a later
 * cuKernelGetFunction in another context makes a new one). Libraries are
 * context-independent and stay. */
void si_module_drop_context(struct si_context *ctx)
{
    struct si_vec objs = {0};
    si_registry_collect(SI_MODULE, &objs);
    for (size_t i = 0; i < objs.n; i++) {
        struct si_module *m = objs.v[i];
        if (m->ctx == ctx) image_unload(m);
    }
    objs.n = 0;
    si_registry_collect(SI_KERNEL, &objs);
    for (size_t i = 0; i < objs.n; i++) {
        struct si_function *k = objs.v[i];
        for (size_t j = 0; j < k->per_ctx.n;) {
            struct si_function *f = k->per_ctx.v[j];
            if (f->ctx != ctx) {
                j++;
                continue;
            }
            si_vec_remove(&k->per_ctx, f);
            si_obj_kill(f);
        }
    }
    si_vec_free(&objs);
}

static struct si_function *function_new(struct si_kfunc *k, struct si_module *m,
                                        struct si_context *ctx, enum si_kind kind)
{
    struct si_function *f = si_calloc(1, sizeof(*f));
    si_obj_init(f, kind);
    f->k = k;
    f->mod = m;
    f->ctx = ctx;
    return f;
}

/* The same name gives the same handle for the life of the image. */
static CUresult image_get(struct si_module *m, const char *name, struct si_function **out)
{
    if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < m->funcs.n; i++) {
        struct si_function *f = m->funcs.v[i];
        if (strcmp(f->k->name, name) == 0) {
            *out = f;
            return CUDA_SUCCESS;
        }
    }
    struct si_kfunc *k = si_kernel_lookup(name);
    if (!k) return CUDA_ERROR_NOT_FOUND;
    struct si_function *f =
        function_new(k, m, m->ctx, m->h.kind == SI_LIBRARY ? SI_KERNEL : SI_FUNCTION);
    si_vec_push(&m->funcs, f);
    *out = f;
    return CUDA_SUCCESS;
}

SI_API(cuModuleLoadData, (CUmodule *module, const void *image),
       image_load((struct si_module **)module, false, image))
SI_API(cuModuleLoad, (CUmodule *module, const char *fname),
       image_load((struct si_module **)module, false, fname))

SI_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code,
                                             CUjit_option *jitOptions, void **jitOptionsValues,
                                             unsigned int numJitOptions,
                                             CUlibraryOption *libraryOptions,
                                             void **libraryOptionValues, unsigned int numLibraryOptions)
{
    SI_ENTER(cuLibraryLoadData);
    return si_leave(image_load((struct si_module **)library, true, code));
}

static CUresult unload(const void *h, enum si_kind kind)
{
    struct si_module *m;
    CUresult rc = si_get(h, kind, &m);
    if (rc) return rc;
    image_unload(m);
    return CUDA_SUCCESS;
}

SI_API(cuModuleUnload, (CUmodule hmod), unload(hmod, SI_MODULE))
SI_API(cuLibraryUnload, (CUlibrary library), unload(library, SI_LIBRARY))

static CUresult get_function(void *out, const void *h, enum si_kind kind, const char *name)
{
    struct si_module *m;
    CUresult rc = si_get(h, kind, &m);
    return rc ? rc : image_get(m, name, (struct si_function **)out);
}

SI_API(cuModuleGetFunction, (CUfunction *hfunc, CUmodule hmod, const char *name),
       get_function(hfunc, hmod, SI_MODULE, name))
SI_API(cuLibraryGetKernel, (CUkernel *pKernel, CUlibrary library, const char *name),
       get_function(pKernel, library, SI_LIBRARY, name))

struct si_function *si_kernel_function(struct si_function *kernel, struct si_context *ctx)
{
    for (size_t i = 0; i < kernel->per_ctx.n; i++) {
        struct si_function *f = kernel->per_ctx.v[i];
        if (f->ctx == ctx) return f;
    }
    struct si_function *f = function_new(kernel->k, kernel->mod, ctx, SI_FUNCTION);
    f->kernel = kernel;
    si_vec_push(&kernel->per_ctx, f);
    return f;
}

static CUresult kernel_get_function(CUfunction *pFunc, CUkernel kernel)
{
    struct si_function *k;
    struct si_context *ctx;
    CUresult rc = si_get(kernel, SI_KERNEL, &k);
    if (rc || (rc = si_need_ctx(&ctx))) return rc;
    if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
    *pFunc = (CUfunction)si_kernel_function(k, ctx);
    return CUDA_SUCCESS;
}

SI_API(cuKernelGetFunction, (CUfunction *pFunc, CUkernel kernel), kernel_get_function(pFunc, kernel))

static CUresult param_info(const struct si_function *f, size_t index, size_t *offset, size_t *size)
{
    if (!offset && !size) return CUDA_ERROR_INVALID_VALUE;
    if (index >= f->k->nparams) return CUDA_ERROR_INVALID_VALUE;
    if (offset) *offset = f->k->offsets[index];
    if (size) *size = f->k->sizes[index];
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                              size_t *paramOffset, size_t *paramSize)
{
    SI_ENTER(cuFuncGetParamInfo);
    struct si_function *f;
    CUresult rc = si_get_func(func, &f);
    return si_leave(rc ? rc : param_info(f, paramIndex, paramOffset, paramSize));
}

SI_EXPORT CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex,
                                                size_t *paramOffset, size_t *paramSize)
{
    SI_ENTER(cuKernelGetParamInfo);
    struct si_function *f;
    CUresult rc = si_get(kernel, SI_KERNEL, &f);
    return si_leave(rc ? rc : param_info(f, paramIndex, paramOffset, paramSize));
}

SI_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    SI_ENTER(cuFuncGetAttribute);
    struct si_function *f;
    CUresult rc = si_get_func(hfunc, &f);
    if (rc || !pi) return si_leave(rc ? rc : CUDA_ERROR_INVALID_VALUE);
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 48 * 1024; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
    default: return si_leave(CUDA_ERROR_INVALID_VALUE);
    }
    return si_leave(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------ */
/* Launches.                                                           */

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                       CUstream hStream, bool ptsz, void **kernelParams, void **extra,
                       int cooperative, bool has_priority, int priority)
{
    struct si_stream *s;
    struct si_params p;
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc) return rc;
    if ((rc = si_capture_gate(s))) return rc;
    CUDA_KERNEL_NODE_PARAMS_v3 k = {
        .func = f, .gridDimX = grid[0], .gridDimY = grid[1], .gridDimZ = grid[2],
        .blockDimX = block[0], .blockDimY = block[1], .blockDimZ = block[2],
        .sharedMemBytes = shmem, .kernelParams = kernelParams, .extra = extra,
    };
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = si_params_kernel(&p, (CUDA_KERNEL_NODE_PARAMS *)&k, s->ctx))) return rc;
    p.cooperative = cooperative;
    /* Stream capture copies the stream's priority into the kernel node. */
    p.priority = has_priority ? priority : s->priority;
    return si_submit(s, &p, NULL);
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                              void **extra, bool ptsz)
{
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return launch(f, grid, block, shmem, s, ptsz, params, extra, 0, false, 0);
}

SI_API(cuLaunchKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream s, void **kernelParams, void **extra),
       launch_kernel(f, gx, gy, gz, bx, by, bz, shmem, s, kernelParams, extra, false))
SI_API(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream s, void **kernelParams, void **extra),
       launch_kernel(f, gx, gy, gz, bx, by, bz, shmem, s, kernelParams, extra, true))

static CUresult launch_kernel_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                 void **extra, bool ptsz)
{
    if (!config || (config->numAttrs && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
    int cooperative = 0, priority = 0;
    bool has_priority = false;
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) cooperative = a->value.cooperative != 0;
        if (a->id == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
            has_priority = true;
            priority = a->value.priority;
        }
    }
    const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    return launch(f, grid, block, config->sharedMemBytes, config->hStream, ptsz, kernelParams,
                  extra, cooperative, has_priority, priority);
}

SI_API(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
       launch_kernel_ex(config, f, kernelParams, extra, false))
SI_API(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra),
       launch_kernel_ex(config, f, kernelParams, extra, true))

static CUresult launch_host(CUstream hStream, CUhostFn fn, void *userData, bool ptsz)
{
    struct si_stream *s;
    struct si_params p;
    CUresult rc = si_stream_get(hStream, ptsz, &s);
    if (rc) return rc;
    if ((rc = si_capture_gate(s))) return rc;
    CUgraphNodeParams np = {.type = CU_GRAPH_NODE_TYPE_HOST};
    np.host.fn = fn;
    np.host.userData = userData;
    if ((rc = si_params_build(&p, &np, s->ctx))) return rc;
    return si_submit(s, &p, NULL);
}

SI_API(cuLaunchHostFunc, (CUstream s, CUhostFn fn, void *userData), launch_host(s, fn, userData, false))
SI_API(cuLaunchHostFunc_ptsz, (CUstream s, CUhostFn fn, void *userData), launch_host(s, fn, userData, true))
