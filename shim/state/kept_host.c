/*
 * kept_host.c - pinned host memory kept between the program's free and
 * its next allocation of the same size (see kept_host.h for the rules).
 *
 * Blocks are tracked by address from the driver's allocation; a free of
 * a tracked block either keeps it (on kept_blocks, newest first) or lets
 * the driver free it. An allocation takes the newest kept block of its
 * size, flags and context: a program that pins the same buffers every
 * step gets them back at the same addresses.
 */
#include <pthread.h>
#include <stdlib.h>

#include "shim/base/driver.h"
#include "shim/base/handle_map.h"
#include "shim/base/runtime.h"
#include "shim/state/cache.h"
#include "shim/state/capture_table.h"
#include "shim/state/events.h"
#include "shim/state/kept_host.h"
#include "shim/state/observed.h"

struct khost_block {
    void *ptr;
    size_t size;
    unsigned int flags;             /* cuMemHostAlloc's, or KHOST_ALLOC_HOST */
    CUcontext ctx;
    /* The program holds it; its free is being decided (another free of
     * it meanwhile is a second free); recap keeps it. */
    enum { KHOST_HELD, KHOST_FREEING, KHOST_KEPT } state;
    struct khost_block *next_kept;  /* on kept_blocks, newest first */
};

/* khost_lock guards the map, the kept list, the byte counts and counts. */
static pthread_mutex_t khost_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap blocks;          /* ptr -> block, tracked or kept */
static struct khost_block *kept_blocks;
static unsigned long long kept_bytes;   /* also read without the lock (atomically) */
static struct event_host_memory counts;

int khost_on(void)
{
    enum recap_mode m = runtime_settings.mode;
    return runtime_settings.keep_memory && !runtime_passthrough &&
           (m == RECAP_MODE_AUTO || m == RECAP_MODE_RECAPTURE || m == RECAP_MODE_UPDATE);
}

/* Whether the current context is known (*ctx), the failure logged with
 * what recap does instead. */
static int current_context(CUcontext *ctx, const char *consequence)
{
    CUresult r = DRV_REAL(cuCtxGetCurrent)(ctx);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(NULL, "cuCtxGetCurrent", r, consequence);
    return r == CUDA_SUCCESS;
}

static void unlink_kept_locked(struct khost_block *b)
{
    for (struct khost_block **p = &kept_blocks; *p; p = &(*p)->next_kept) {
        if (*p == b) {
            *p = b->next_kept;
            break;
        }
    }
    b->next_kept = NULL;
    b->state = KHOST_HELD;
    __atomic_sub_fetch(&kept_bytes, b->size, __ATOMIC_RELAXED);
}

int khost_take(void **pp, size_t bytesize, unsigned int flags, int may_serve)
{
    if (!may_serve || !pp || !__atomic_load_n(&kept_bytes, __ATOMIC_RELAXED))
        return 0;
    CUcontext ctx = NULL;
    if (!current_context(&ctx, "the pinned allocation goes to the driver"))
        return 0;
    struct khost_block *found = NULL;
    pthread_mutex_lock(&khost_lock);
    for (struct khost_block *b = kept_blocks; b && !found; b = b->next_kept)
        if (b->size == bytesize && b->flags == flags && b->ctx == ctx)
            found = b;
    if (found) {
        unlink_kept_locked(found);
        counts.reused++;
        counts.reused_bytes += bytesize;
    }
    pthread_mutex_unlock(&khost_lock);
    if (!found)
        return 0;
    *pp = found->ptr;
    return 1;
}

void khost_track(void *p, size_t bytesize, unsigned int flags)
{
    struct khost_block *b = calloc(1, sizeof *b);
    CUcontext ctx = NULL;
    if (!b || !current_context(&ctx, "the pinned block is not kept when freed")) {
        free(b);
        return;
    }
    b->ptr = p;
    b->size = bytesize;
    b->flags = flags;
    b->ctx = ctx;
    pthread_mutex_lock(&khost_lock);
    /* The driver may give out again an address freed behind recap's
     * back (never a kept block's: those are still pinned): the newer
     * allocation wins. */
    struct khost_block *stale = hmap_get(&blocks, p);
    if (stale && stale->state != KHOST_HELD)
        stale = NULL;
    if (hmap_put(&blocks, p, b) != 0) {
        pthread_mutex_unlock(&khost_lock);
        free(b);
        return;
    }
    counts.tracked++;
    pthread_mutex_unlock(&khost_lock);
    free(stale);
}

/* Why the block may not be kept now (NULL: it may, budget aside); the
 * caller holds no lock. */
static const char *keep_refusal(struct khost_block *b)
{
    /* A capture anywhere: the synchronisation that stands for the
     * driver's own would be refused there, or end it. */
    if (ctab_any_capture_running())
        return "a capture runs";
    CUcontext ctx = NULL;
    if (!current_context(&ctx, "the pinned memory is freed, not kept"))
        return "the current context is not known";
    if (ctx != b->ctx)
        return "another context is current";
    return NULL;
}

int khost_keep(void *p, CUresult *answer)
{
    pthread_mutex_lock(&khost_lock);
    struct khost_block *b = hmap_get(&blocks, p);
    if (b && b->state != KHOST_HELD) {
        /* Freed twice (or by two threads at once): the driver's answer to
         * memory it does not know; the block stays recap's (still
         * pinned), or the first free's to decide. */
        pthread_mutex_unlock(&khost_lock);
        event_warning(NULL, "cuMemFreeHost of pinned memory the program already freed; recap's "
                            "kept block stays, CUDA_ERROR_INVALID_VALUE returned");
        *answer = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    if (!b) {
        pthread_mutex_unlock(&khost_lock);
        return 0;
    }
    b->state = KHOST_FREEING;
    pthread_mutex_unlock(&khost_lock);

    const char *refusal = keep_refusal(b);
    if (!refusal) {
        /* The driver's free waits for the device's work: so does a kept
         * block, or a copy still running could meet the next owner's. */
        CUresult r = ctab_synchronize_if_idle();
        if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
            refusal = "a capture runs";
        } else if (r != CUDA_SUCCESS) {
            event_own_call_failed(NULL, "cuCtxSynchronize", r, "the pinned memory is freed, not kept");
            refusal = "synchronisation failed";
        }
    }
    unsigned long long budget = cache_budget_bytes();   /* takes cache_lock: not under ours */
    pthread_mutex_lock(&khost_lock);
    if (!refusal && kept_bytes + b->size > budget)
        refusal = "over the cache budget";
    if (refusal) {
        hmap_del(&blocks, p);
        counts.not_kept++;
        counts.not_kept_reason = refusal;
        pthread_mutex_unlock(&khost_lock);
        free(b);
        return 0;
    }
    b->state = KHOST_KEPT;
    b->next_kept = kept_blocks;
    kept_blocks = b;
    __atomic_add_fetch(&kept_bytes, b->size, __ATOMIC_RELAXED);
    if (kept_bytes > counts.kept_bytes_peak)
        counts.kept_bytes_peak = kept_bytes;
    counts.kept++;
    pthread_mutex_unlock(&khost_lock);
    *answer = CUDA_SUCCESS;
    return 1;
}

int khost_release_all(void)
{
    pthread_mutex_lock(&khost_lock);
    struct khost_block *list = kept_blocks;
    kept_blocks = NULL;
    for (struct khost_block *b = list; b; b = b->next_kept) {
        hmap_del(&blocks, b->ptr);
        __atomic_sub_fetch(&kept_bytes, b->size, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&khost_lock);
    int n = 0;
    for (struct khost_block *b = list, *next; b; b = next, n++) {
        next = b->next_kept;
        CUresult r = DRV_REAL(cuMemFreeHost)(b->ptr);
        if (r != CUDA_SUCCESS)
            event_release_failed(NULL, "cuMemFreeHost", r, "the pinned memory may stay pinned");
        free(b);
    }
    return n;
}

int khost_forget_tracked(void)
{
    struct khost_block *gone = NULL;
    int n = 0;
    pthread_mutex_lock(&khost_lock);
    for (size_t i = 0; i < blocks.cap; i++) {
        struct khost_block *b = blocks.slots[i].value;
        if (blocks.slots[i].key && b->state == KHOST_HELD) {
            b->next_kept = gone;
            gone = b;
        }
    }
    for (struct khost_block *b = gone; b; b = b->next_kept)
        hmap_del(&blocks, b->ptr);
    pthread_mutex_unlock(&khost_lock);
    for (struct khost_block *b = gone, *next; b; b = next, n++) {
        next = b->next_kept;
        free(b);
    }
    return n;
}

struct event_host_memory khost_counts(void)
{
    pthread_mutex_lock(&khost_lock);
    struct event_host_memory c = counts;
    pthread_mutex_unlock(&khost_lock);
    return c;
}

void khost_after_fork_child(void)
{
    /* The child's pinned memory is not the driver's to give back to
     * recap: forget it. */
    pthread_mutex_init(&khost_lock, NULL);
    for (size_t i = 0; i < blocks.cap; i++)
        if (blocks.slots[i].key)
            free(blocks.slots[i].value);
    hmap_clear(&blocks);
    kept_blocks = NULL;
    kept_bytes = 0;
}
