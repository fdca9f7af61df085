/*
 * driver_calls.c - counts the driver calls that reach the driver itself,
 * for scripts/bench steady. A CUPTI injection library: the driver loads it
 * at cuInit when CUDA_INJECTION64_PATH names it, and CUPTI calls back on
 * every driver API entry inside libcuda - below recap, so a call recap
 * answers itself (kept memory handed back, an executable graph reused, a
 * capture recorded) is not counted, and one recap makes for the program is.
 * At exit it writes "NAME COUNT" lines, one per driver function called at
 * least once, then "size:BYTES COUNT" lines, one per size cuMemAlloc_v2
 * was asked for (the first SIZES_KEPT sizes), to the file
 * $DRIVER_CALLS_OUT. With DRIVER_CALLS_SETTERS=1 it also compares each
 * cuGraphExecKernelNodeSetParams_v2 with the same node's previous one and
 * writes "setter:INDEX COUNT SIZE@OFFSET BEFORE AFTER KERNEL" lines: which
 * parameter of which kernel the per-node setters changed (a setter recap
 * makes for a node whose captured call changed), the parameter's size and
 * the first byte that differed in the first change, with the 8 bytes from
 * there before and after.
 *
 * Built by steady.py on the GPU machine against the CUPTI there; it is a
 * measuring tool, never loaded by recap or its tests.
 */
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZES_KEPT 64

static uint64_t driver_calls[CUPTI_DRIVER_TRACE_CBID_SIZE];
static CUpti_SubscriberHandle subscriber;

/* The sizes device allocations asked the driver for, and how often. */
static struct { size_t bytes; uint64_t count; } alloc_sizes[SIZES_KEPT];
static int nsizes;
static pthread_mutex_t sizes_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_size(size_t bytes)
{
    pthread_mutex_lock(&sizes_lock);
    int i = 0;
    while (i < nsizes && alloc_sizes[i].bytes != bytes)
        i++;
    if (i == nsizes && nsizes < SIZES_KEPT)
        alloc_sizes[nsizes++].bytes = bytes;
    if (i < nsizes)
        alloc_sizes[i].count++;
    pthread_mutex_unlock(&sizes_lock);
}

/* --- which kernel parameters per-node setters change ---------------------------------- */

#define NODES_KEPT 8192
#define PARAM_BYTES 512
#define CHANGES_KEPT 256

struct node_params {
    const void *exec, *node;
    size_t len;
    unsigned char bytes[PARAM_BYTES];
};
struct param_change {
    const void *kernel;
    unsigned index;
    size_t size, offset;           /* the parameter's size, its first byte that differed */
    uint64_t count, before, after;
    char name[120];
};
static struct node_params *node_params;       /* open addressing by (exec, node) */
static struct param_change changes[CHANGES_KEPT];
static int nchanges, compare_setters;
static pthread_mutex_t setters_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int in_probe;                  /* our own driver calls are not counted */

typedef CUresult (*param_info_fn)(void *, size_t, size_t *, size_t *);
typedef CUresult (*name_fn)(const char **, void *);
static param_info_fn func_param_info, kernel_param_info;
static name_fn func_name, kernel_name;

static uint64_t bytes_at(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    memcpy(&v, p, n < sizeof v ? n : sizeof v);
    return v;
}

static void note_change(const void *kernel, int is_func, unsigned index, size_t size,
                        const unsigned char *was, const unsigned char *now)
{
    int i = 0;
    while (i < nchanges && !(changes[i].kernel == kernel && changes[i].index == index))
        i++;
    if (i == nchanges) {
        if (nchanges == CHANGES_KEPT)
            return;
        const char *name = NULL;
        (is_func ? func_name : kernel_name)(&name, (void *)kernel);
        size_t at = 0;
        while (at < size && was[at] == now[at])
            at++;
        changes[i] = (struct param_change){ kernel, index, size, at, 0,
                                            bytes_at(was + at, size - at),
                                            bytes_at(now + at, size - at), "" };
        snprintf(changes[i].name, sizeof changes[i].name, "%s", name ? name : "?");
        nchanges++;
    }
    changes[i].count++;
}

static void compare_setter(const cuGraphExecKernelNodeSetParams_v2_params *a)
{
    const CUDA_KERNEL_NODE_PARAMS *p = a->nodeParams;
    if (!p || !p->kernelParams || !node_params)
        return;
    int is_func = p->func != NULL;
    const void *kernel = is_func ? (const void *)p->func : (const void *)p->kern;
    param_info_fn info = is_func ? func_param_info : kernel_param_info;
    if (!kernel || !info)
        return;
    unsigned char now[PARAM_BYTES];
    size_t offsets[64], sizes[64], len = 0;
    unsigned n = 0;
    while (n < 64 && info((void *)kernel, n, &offsets[n], &sizes[n]) == CUDA_SUCCESS) {
        if (offsets[n] + sizes[n] > PARAM_BYTES)
            break;
        memcpy(now + offsets[n], p->kernelParams[n], sizes[n]);
        if (offsets[n] + sizes[n] > len)
            len = offsets[n] + sizes[n];
        n++;
    }
    pthread_mutex_lock(&setters_lock);
    uintptr_t h = ((uintptr_t)a->hGraphExec * 31 + (uintptr_t)a->hNode) % NODES_KEPT;
    for (unsigned probe = 0; probe < NODES_KEPT; probe++, h = (h + 1) % NODES_KEPT) {
        struct node_params *np = &node_params[h];
        if (np->node && (np->exec != a->hGraphExec || np->node != a->hNode))
            continue;
        if (np->node && np->len == len)
            for (unsigned i = 0; i < n; i++)
                if (memcmp(np->bytes + offsets[i], now + offsets[i], sizes[i]) != 0)
                    note_change(kernel, is_func, i, sizes[i], np->bytes + offsets[i],
                                now + offsets[i]);
        np->exec = a->hGraphExec, np->node = a->hNode, np->len = len;
        memcpy(np->bytes, now, len);
        break;
    }
    pthread_mutex_unlock(&setters_lock);
}

static void CUPTIAPI count_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void *data)
{
    const CUpti_CallbackData *call = data;
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || call->callbackSite != CUPTI_API_ENTER ||
        cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE || in_probe)
        return;
    __atomic_add_fetch(&driver_calls[cbid], 1, __ATOMIC_RELAXED);
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 && call->functionParams)
        count_size(((const cuMemAlloc_v2_params *)call->functionParams)->bytesize);
    if (compare_setters && cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2 &&
        call->functionParams) {
        in_probe = 1;
        compare_setter(call->functionParams);
        in_probe = 0;
    }
}

static void write_counts(void)
{
    const char *path = getenv("DRIVER_CALLS_OUT");
    FILE *out = path ? fopen(path, "w") : NULL;
    if (!out) {
        fprintf(stderr, "driver_calls: cannot write DRIVER_CALLS_OUT=%s\n", path ? path : "(unset)");
        return;
    }
    for (unsigned id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++) {
        uint64_t n = __atomic_load_n(&driver_calls[id], __ATOMIC_RELAXED);
        const char *name = NULL;
        if (n == 0)
            continue;
        if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name)
            fprintf(out, "cbid_%u %llu\n", id, (unsigned long long)n);
        else
            fprintf(out, "%s %llu\n", name, (unsigned long long)n);
    }
    pthread_mutex_lock(&sizes_lock);
    for (int i = 0; i < nsizes; i++)
        fprintf(out, "size:%zu %llu\n", alloc_sizes[i].bytes, (unsigned long long)alloc_sizes[i].count);
    pthread_mutex_unlock(&sizes_lock);
    pthread_mutex_lock(&setters_lock);
    for (int i = 0; i < nchanges; i++)
        fprintf(out, "setter:%u %llu %zu@%zu 0x%llx 0x%llx %s\n", changes[i].index,
                (unsigned long long)changes[i].count, changes[i].size, changes[i].offset,
                (unsigned long long)changes[i].before,
                (unsigned long long)changes[i].after, changes[i].name);
    pthread_mutex_unlock(&setters_lock);
    fclose(out);
}

int InitializeInjection(void)
{
    if (cuptiSubscribe(&subscriber, count_call, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "driver_calls: CUPTI refused the subscription; nothing is counted\n");
        return 0;
    }
    const char *setters = getenv("DRIVER_CALLS_SETTERS");
    void *cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (setters && *setters == '1' && cuda) {
        func_param_info = (param_info_fn)dlsym(cuda, "cuFuncGetParamInfo");
        kernel_param_info = (param_info_fn)dlsym(cuda, "cuKernelGetParamInfo");
        func_name = (name_fn)dlsym(cuda, "cuFuncGetName");
        kernel_name = (name_fn)dlsym(cuda, "cuKernelGetName");
        node_params = calloc(NODES_KEPT, sizeof *node_params);
        compare_setters = node_params && func_param_info && func_name && kernel_name;
    }
    atexit(write_counts);
    return 1;
}
