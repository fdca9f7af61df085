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
 * $DRIVER_CALLS_OUT.
 *
 * Built by steady.py on the GPU machine against the CUPTI there; it is a
 * measuring tool, never loaded by recap or its tests.
 */
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

static void CUPTIAPI count_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void *data)
{
    const CUpti_CallbackData *call = data;
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || call->callbackSite != CUPTI_API_ENTER ||
        cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE)
        return;
    __atomic_add_fetch(&driver_calls[cbid], 1, __ATOMIC_RELAXED);
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 && call->functionParams)
        count_size(((const cuMemAlloc_v2_params *)call->functionParams)->bytesize);
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
    fclose(out);
}

int InitializeInjection(void)
{
    if (cuptiSubscribe(&subscriber, count_call, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "driver_calls: CUPTI refused the subscription; nothing is counted\n");
        return 0;
    }
    atexit(write_counts);
    return 1;
}
