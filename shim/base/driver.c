/*
 * driver.c - load the real driver and know it.
 *
 * drv_load() runs once, on the first call that needs the driver, from any
 * thread: it finds glibc's dlsym, opens libcuda.so.1 the way the dynamic
 * loader would (refusing recap itself), resolves every exact name of the
 * table, sorts the real pointers so cuGetProcAddress answers can be mapped
 * back to exact names, asks the driver its version and, at that version,
 * for the recapture API. lifecycle.c calls it, then starts recap.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/base/driver.h"
#include "shim/base/libc_dl.h"

int drv_loaded;
struct drv_caps drv_caps;

static pthread_mutex_t drv_load_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int drv_loading_here;

/* Real pointers sorted for drv_find_pointer; names sorted for drv_find_symbol. */
static struct { const void *real; short id; } drv_by_pointer[DRV_COUNT];
static int drv_by_pointer_len;
static short drv_by_name[DRV_COUNT];

/* Stands in for an entry the driver lacks, so a wrapper reached anyway
 * (e.g. through dlsym(RTLD_DEFAULT) in a process without libcuda) answers
 * an error instead of jumping to NULL. Every driver function returns
 * CUresult and the caller owns the arguments, so the mismatched call is
 * harmless on the supported ABIs. */
static CUresult CUDAAPI drv_missing_entry(void)
{
    return CUDA_ERROR_NOT_FOUND;
}

int drv_loading_on_this_thread(void)
{
    return drv_loading_here;
}

static int cmp_by_pointer(const void *a, const void *b)
{
    const void *pa = ((const typeof(drv_by_pointer[0]) *)a)->real;
    const void *pb = ((const typeof(drv_by_pointer[0]) *)b)->real;
    return pa < pb ? -1 : pa > pb;
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(drv_table[*(const short *)a].symbol, drv_table[*(const short *)b].symbol);
}

static void index_table(void)
{
    for (int i = 0; i < DRV_COUNT; i++)
        drv_by_name[i] = (short)i;
    qsort(drv_by_name, DRV_COUNT, sizeof drv_by_name[0], cmp_by_name);

    drv_by_pointer_len = 0;
    for (int i = 0; i < DRV_COUNT; i++) {
        if (drv_real_fn[i] == (void *)drv_missing_entry)
            continue;
        drv_by_pointer[drv_by_pointer_len].real = drv_real_fn[i];
        drv_by_pointer[drv_by_pointer_len].id = (short)i;
        drv_by_pointer_len++;
    }
    qsort(drv_by_pointer, drv_by_pointer_len, sizeof drv_by_pointer[0], cmp_by_pointer);
}

int drv_find_symbol(const char *name)
{
    int lo = 0, hi = DRV_COUNT - 1;
    if (!drv_loaded && !drv_loading_here) {
        /* The name index is built at load; before that, scan. */
        for (int i = 0; i < DRV_COUNT; i++)
            if (strcmp(drv_table[i].symbol, name) == 0)
                return i;
        return -1;
    }
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(name, drv_table[drv_by_name[mid]].symbol);
        if (c == 0)
            return drv_by_name[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

int drv_find_pointer(const void *real, const char *base, int cuda_version, int per_thread)
{
    int lo = 0, hi = drv_by_pointer_len - 1, first = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (drv_by_pointer[mid].real < real) {
            lo = mid + 1;
        } else {
            if (drv_by_pointer[mid].real == real)
                first = mid;
            hi = mid - 1;
        }
    }
    if (first < 0)
        return -1;
    /* Usually one entry; the real driver may alias several exact names. */
    int best = drv_by_pointer[first].id, best_score = -1;
    for (int k = first; k < drv_by_pointer_len && drv_by_pointer[k].real == real; k++) {
        const struct drv_entry *e = &drv_table[drv_by_pointer[k].id];
        int score = 0;
        if (base && strcmp(e->base, base) == 0)
            score += 4;
        if (!!e->ptds == !!per_thread)
            score += 2;
        if (e->version <= cuda_version)
            score += 1;
        if (score > best_score ||
            (score == best_score && e->version > drv_table[best].version && e->version <= cuda_version)) {
            best = drv_by_pointer[k].id;
            best_score = score;
        }
    }
    return best;
}

/* Whether `fn` lies in this library (librecap, under whatever name). */
static int is_recap_itself(void *fn)
{
    Dl_info found, own;
    return dladdr(fn, &found) && dladdr((void *)is_recap_itself, &own) &&
           found.dli_fbase == own.dli_fbase;
}

/* Opens libcuda as the CUDA runtime would, and refuses a library that is
 * recap itself (a copy of librecap named libcuda.so.1 on the path). */
static void *open_libcuda(void)
{
    static const char *const names[] = { "libcuda.so.1", "libcuda.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        void *probe = libc_dlsym_fn(h, "cuStreamEndCapture");
        if (probe && is_recap_itself(probe)) {
            snprintf(drv_caps.problem, sizeof drv_caps.problem,
                     "%s resolves to recap itself", names[i]);
            dlclose(h);
            continue;
        }
        if (!libc_dlsym_fn(h, "cuGetProcAddress_v2") && !libc_dlsym_fn(h, "cuGetProcAddress")) {
            snprintf(drv_caps.problem, sizeof drv_caps.problem,
                     "%s has no cuGetProcAddress: not a CUDA driver", names[i]);
            dlclose(h);
            continue;
        }
        return h;
    }
    if (!drv_caps.problem[0])
        snprintf(drv_caps.problem, sizeof drv_caps.problem, "libcuda.so.1 not found: %s",
                 dlerror() ? "dlopen failed" : "no such library");
    return NULL;
}

static void ask_driver_capabilities(void)
{
    int version = 0;
    drv_caps.version_error = DRV_REAL(cuDriverGetVersion)(&version);
    if (drv_caps.version_error == CUDA_SUCCESS)
        drv_caps.version = version;

    /* Asked at the driver's own version: a version above it is refused with
     * CUDA_ERROR_INVALID_VALUE, and an unknown name comes back NULL. */
    void *fn = NULL;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (drv_caps.version < RECAP_RECAPTURE_MIN_DRIVER)
        return;
    drv_caps.probe_error = DRV_REAL(cuGetProcAddress_v2)("cuStreamBeginRecaptureToGraph", &fn,
                                                         drv_caps.version,
                                                         CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (drv_caps.probe_error == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && fn)
        drv_caps.recapture_begin = (drv_recapture_begin_fn)fn;
}

void drv_load(void)
{
    if (drv_loading_here)
        return;
    pthread_mutex_lock(&drv_load_lock);
    if (drv_loaded) {
        pthread_mutex_unlock(&drv_load_lock);
        return;
    }
    drv_loading_here = 1;

    for (int i = 0; i < DRV_COUNT; i++)
        drv_real_fn[i] = (void *)drv_missing_entry;
    void *h = libc_dl_resolve() == 0 ? open_libcuda() : NULL;
    if (!h && !drv_caps.problem[0])
        snprintf(drv_caps.problem, sizeof drv_caps.problem, "glibc's dlsym not found");
    if (h) {
        for (int i = 0; i < DRV_COUNT; i++) {
            void *p = libc_dlsym_fn(h, drv_table[i].symbol);
            if (p)
                drv_real_fn[i] = p;
        }
        drv_caps.usable = 1;
        ask_driver_capabilities();
    }
    index_table();

    drv_loading_here = 0;
    __atomic_store_n(&drv_loaded, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&drv_load_lock);
}

const char *drv_result_name(CUresult r)
{
    static const struct { CUresult code; const char *name; } known[] = {
        { CUDA_SUCCESS, "CUDA_SUCCESS" },
        { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE" },
        { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN" },
        { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY" },
        { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED" },
        { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE" },
        { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND" },
        { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED" },
        { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE" },
        { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" },
        { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED" },
        { CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED" },
        { CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED" },
        { CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION" },
        { CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD" },
        { CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE" },
        { CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE" },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].code == r)
            return known[i].name;
    const char *name = NULL;
    if (drv_caps.usable && DRV_REAL(cuGetErrorName)(r, &name) == CUDA_SUCCESS && name)
        return name;
    /* The driver names none (unloaded, or a code newer than it): the
     * number is what a reader can look up. */
    static __thread char unnamed[32];
    snprintf(unnamed, sizeof unnamed, "CUDA error %d", (int)r);
    return unnamed;
}

void drv_after_fork_child(void)
{
    pthread_mutex_init(&drv_load_lock, NULL);
    drv_loading_here = 0;
}

static unsigned long drv_lookup_count[DRV_LOOKUP_PATHS];

void drv_count_lookup(enum drv_lookup_path path)
{
    __atomic_add_fetch(&drv_lookup_count[path], 1, __ATOMIC_RELAXED);
}

unsigned long drv_lookups(enum drv_lookup_path path)
{
    return __atomic_load_n(&drv_lookup_count[path], __ATOMIC_RELAXED);
}
