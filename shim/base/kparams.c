/*
 * kparams.c - kernel parameter layouts, asked once per function.
 *
 * cuFuncGetParamInfo answers CUDA_ERROR_INVALID_VALUE for the first index
 * past the last parameter, which is how the count is found. The queries are
 * pure lookups, safe while a stream captures. Layouts are never freed: a
 * process has a bounded number of kernels and the journal keeps pointers.
 * After a module unload a handle may come back as another kernel: each
 * layout is asked again once, and only one that changed is replaced (the
 * replaced ones are kept, as many as handles reused with a new layout).
 */
#include <pthread.h>
#include <stdlib.h>

#include "shim/base/driver.h"
#include "shim/base/handle_map.h"
#include "shim/base/kparams.h"

static pthread_mutex_t kparams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap layouts_by_function;
static unsigned long code_unloads;         /* kparams_code_unloaded calls */
/* Layouts replaced after an unload, still named by journals. */
struct retired_layout {
    struct kparams_layout *layout;
    struct retired_layout *next;
};
static struct retired_layout *retired;
/* The answer for a function whose layout the driver would not give, with
 * the reason; per thread, so concurrent answers do not mix. */
static __thread struct kparams_layout kparams_unknown;

typedef CUresult (CUDAAPI *param_info_fn)(void *f, size_t i, size_t *off, size_t *size);

/* Counts and reads parameters with one of the two query functions.
 * Returns the count, or -1 (with *error) if the query refused. */
static long query_layout(param_info_fn query, void *f, size_t *offset, size_t *size,
                         CUresult *error)
{
    for (size_t i = 0; i < KPARAMS_MAX; i++) {
        CUresult r = query(f, i, &offset[i], &size[i]);
        if (r == CUDA_ERROR_INVALID_VALUE)
            return (long)i;
        if (r != CUDA_SUCCESS) {
            *error = r;
            return -1;
        }
    }
    *error = CUDA_ERROR_NOT_SUPPORTED;
    return -1;
}

static struct kparams_layout *build_layout(CUfunction f, CUresult *error)
{
    size_t *offset = malloc(KPARAMS_MAX * sizeof *offset);
    size_t *size = malloc(KPARAMS_MAX * sizeof *size);
    struct kparams_layout *l = calloc(1, sizeof *l);
    long n = -1;

    *error = CUDA_ERROR_OUT_OF_MEMORY;
    if (!offset || !size || !l)
        goto fail;
    n = query_layout((param_info_fn)drv_real_fn[DRV_cuFuncGetParamInfo], f, offset, size, error);
    /* A zero count may just mean "not a CUfunction": library kernels
     * (CUkernel) passed to cuLaunchKernel answer through the other query. */
    if (n <= 0) {
        CUresult kernel_error = CUDA_SUCCESS;
        long k = query_layout((param_info_fn)drv_real_fn[DRV_cuKernelGetParamInfo], f, offset,
                              size, &kernel_error);
        if (k > 0 || n < 0)
            n = k;
    }
    if (n < 0)
        goto fail;
    l->known = 1;
    l->count = (unsigned)n;
    l->offset = realloc(offset, (n ? (size_t)n : 1) * sizeof *offset);
    l->size = realloc(size, (n ? (size_t)n : 1) * sizeof *size);
    if (!l->offset || !l->size) {
        free(l->offset ? l->offset : offset);
        free(l->size ? l->size : size);
        free(l);
        return NULL;
    }
    return l;
fail:
    free(offset);
    free(size);
    free(l);
    return NULL;
}

static int layouts_equal(const struct kparams_layout *a, const struct kparams_layout *b)
{
    if (a->count != b->count)
        return 0;
    for (unsigned i = 0; i < a->count; i++)
        if (a->offset[i] != b->offset[i] || a->size[i] != b->size[i])
            return 0;
    return 1;
}

static void free_layout(struct kparams_layout *l)
{
    free(l->offset);
    free(l->size);
    free(l);
}

void kparams_code_unloaded(void)
{
    __atomic_add_fetch(&code_unloads, 1, __ATOMIC_RELEASE);
}

/* `cached`, asked before the last unload, against the driver's answer
 * now: the same layout (marked current), or the new one in its place. */
static const struct kparams_layout *recheck(CUfunction f, struct kparams_layout *cached,
                                            unsigned long unloads)
{
    CUresult error = CUDA_SUCCESS;
    struct kparams_layout *now = build_layout(f, &error);
    struct retired_layout *r = now ? malloc(sizeof *r) : NULL;
    int changed = now && !layouts_equal(now, cached);
    pthread_mutex_lock(&kparams_lock);
    struct kparams_layout *l = hmap_get(&layouts_by_function, f);
    if (l != cached || !changed || !r) {
        /* Raced, unchanged, or no memory to keep the old one: as it is. */
        if (l == cached && !changed)
            __atomic_store_n(&cached->unloads, unloads, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&kparams_lock);
        if (now)
            free_layout(now);
        free(r);
        return l ? l : cached;
    }
    now->unloads = unloads;
    if (hmap_put(&layouts_by_function, f, now) != 0) {
        pthread_mutex_unlock(&kparams_lock);
        free_layout(now);
        free(r);
        return cached;
    }
    r->layout = cached;
    r->next = retired;
    retired = r;
    pthread_mutex_unlock(&kparams_lock);
    return now;
}

const struct kparams_layout *kparams_of(CUfunction f)
{
    unsigned long unloads = __atomic_load_n(&code_unloads, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&kparams_lock);
    struct kparams_layout *l = hmap_get(&layouts_by_function, f);
    pthread_mutex_unlock(&kparams_lock);
    if (l && __atomic_load_n(&l->unloads, __ATOMIC_RELAXED) == unloads)
        return l;
    if (l)
        return recheck(f, l, unloads);

    CUresult error = CUDA_SUCCESS;
    l = build_layout(f, &error);
    if (!l) {
        kparams_unknown.known = 0;
        kparams_unknown.error = error;
        return &kparams_unknown;
    }
    l->unloads = unloads;
    pthread_mutex_lock(&kparams_lock);
    struct kparams_layout *raced = hmap_get(&layouts_by_function, f);
    if (raced || hmap_put(&layouts_by_function, f, l) != 0) {
        pthread_mutex_unlock(&kparams_lock);
        free_layout(l);
        if (raced)
            return raced;
        kparams_unknown.known = 0;
        kparams_unknown.error = CUDA_ERROR_OUT_OF_MEMORY;
        return &kparams_unknown;
    }
    pthread_mutex_unlock(&kparams_lock);
    return l;
}

void kparams_after_fork_child(void)
{
    pthread_mutex_init(&kparams_lock, NULL);
    /* Module handles stay valid across fork, but the child cannot use the
     * driver; the layouts are simply kept. */
}
