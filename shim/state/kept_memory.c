/*
 * kept_memory.c - device memory kept between a site's captures.
 *
 * A block is tracked from the allocation a capture made until the program
 * frees it; then it is either kept (on its site's list, charged to the
 * cache budget) or freed at the driver as the program asked. A kept block
 * goes back to the program at the next allocation of its size inside a
 * capture at its site - the one that was that capture's allocation of the
 * same rank last time, where there is one, so that two blocks of one size
 * do not trade addresses.
 *
 * A block allocated between captures belongs to the capture that begins
 * next on its thread (PyTorch's segment for the generator's state, which
 * the capture's small tensors land in): it waits on the thread's pending
 * list until a capture begins, which adopts it when its site keeps memory
 * and lets it go otherwise. Such blocks go back to an allocation made
 * between captures after a capture at the same site as theirs was: in a
 * program whose sites take turns, that is the allocation for the same
 * next site again.
 */
#include <pthread.h>
#include <stdlib.h>

#include "policy/annotate.h"
#include "shim/state/cache.h"
#include "shim/state/capture_table.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/handle_map.h"
#include "shim/state/kept_memory.h"
#include "shim/state/observed.h"
#include "shim/base/runtime.h"
#include "shim/state/sites.h"

__thread struct site *kmem_thread_site;
__thread int kmem_thread_capturing;
__thread int kmem_thread_ordinal;
int kmem_tracked_count;

/* The site of the capture that began last on this thread, whatever its
 * mode (NULL: none had one): what a block allocated after it is handed
 * back by. */
static __thread struct site *thread_after;
/* kmem_thread_site while a capture recap keeps no memory for runs on this
 * thread (its allocations are the program's own), restored at its end. */
static __thread struct site *thread_paused;
/* Blocks this thread allocated since its last capture began, by address
 * (looked up again at the begin: the program may have freed one); one
 * past the last slot is never adopted, so never kept. */
#define KMEM_PENDING_MAX 8
static __thread CUdeviceptr thread_pending[KMEM_PENDING_MAX];
static __thread int thread_pending_count;
/* Whose pending list a block is on: the address of this variable, one
 * per live thread. */
static __thread char thread_token;

struct kmem_block {
    CUdeviceptr ptr;
    size_t size;
    struct site *site;              /* NULL while pending (outside, not yet adopted) */
    struct site *after;             /* outside: the thread's last site when allocated */
    const char *pending_on;         /* outside, not yet adopted: the thread's token */
    CUcontext ctx;
    int ordinal;                    /* its rank among its capture's allocations */
    int outside;                    /* allocated outside a capture (before one) */
    int counted;                    /* in a site's memory.tracked (once, by its first) */
    int kept;
    struct kmem_block *next_kept;   /* on kept_blocks, newest first */
};

/* kmem_lock guards the map, the kept list, the byte count and the sites'
 * kmem_* counters. */
static pthread_mutex_t kmem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap blocks;          /* ptr -> block, tracked or kept */
static struct kmem_block *kept_blocks;
static size_t kept_bytes;           /* also read without the lock (atomically) */

static void count_changed(void)
{
    /* Read by every free without the lock, atomically (helgrind cannot tell). */
    VALGRIND_HG_DISABLE_CHECKING(&kmem_tracked_count, sizeof kmem_tracked_count);
    VALGRIND_HG_DISABLE_CHECKING(&kept_bytes, sizeof kept_bytes);
    __atomic_store_n(&kmem_tracked_count, (int)blocks.len, __ATOMIC_RELAXED);
}

/* The capture beginning on this thread takes the blocks allocated before
 * it (`site`, which keeps memory), or, where NULL, leaves them to the
 * program: their frees go to the driver. */
static void adopt_pending(struct site *site)
{
    int n = thread_pending_count;
    thread_pending_count = 0;
    struct kmem_block *gone = NULL;
    pthread_mutex_lock(&kmem_lock);
    for (int i = 0; i < n && i < KMEM_PENDING_MAX; i++) {
        struct kmem_block *b = hmap_get(&blocks, (const void *)thread_pending[i]);
        if (!b || b->kept || b->pending_on != &thread_token)
            continue;
        b->pending_on = NULL;
        if (site) {
            b->site = site;
            if (!b->counted)
                site->memory.tracked++;
            b->counted = 1;
        } else {
            hmap_del(&blocks, (const void *)b->ptr);
            b->next_kept = gone;
            gone = b;
        }
    }
    count_changed();
    pthread_mutex_unlock(&kmem_lock);
    while (gone) {
        struct kmem_block *next = gone->next_kept;
        free(gone);
        gone = next;
    }
}

void kmem_capture_began(struct site *site)
{
    enum recap_mode m = site ? site->policy.mode : RECAP_MODE_OFF;
    int keeps = runtime_settings.keep_memory &&
                (m == RECAP_MODE_AUTO || m == RECAP_MODE_RECAPTURE || m == RECAP_MODE_UPDATE);
    if (thread_pending_count)
        adopt_pending(keeps ? site : NULL);
    thread_after = site;
    if (keeps) {
        kmem_thread_site = site;
        thread_paused = NULL;
    } else if (kmem_thread_site) {
        thread_paused = kmem_thread_site;
        kmem_thread_site = NULL;
    }
    kmem_thread_capturing = keeps;
    kmem_thread_ordinal = 0;
}

void kmem_capture_ended(void)
{
    if (!kmem_thread_site && thread_paused) {
        kmem_thread_site = thread_paused;
        thread_paused = NULL;
    }
    kmem_thread_capturing = 0;
    kmem_thread_ordinal = 0;
}

/* Whether the current context is known (*ctx), the failure logged with
 * what recap does instead. */
static int current_context(const struct site *site, CUcontext *ctx, const char *consequence)
{
    CUresult r = DRV_REAL(cuCtxGetCurrent)(ctx);
    if (r != CUDA_SUCCESS)
        event_own_call_failed(site, "cuCtxGetCurrent", r, consequence);
    return r == CUDA_SUCCESS;
}

static void unlink_kept_locked(struct kmem_block *b)
{
    for (struct kmem_block **p = &kept_blocks; *p; p = &(*p)->next_kept) {
        if (*p == b) {
            *p = b->next_kept;
            break;
        }
    }
    b->next_kept = NULL;
    b->kept = 0;
    __atomic_sub_fetch(&kept_bytes, b->size, __ATOMIC_RELAXED);
}

/* b, allocated or handed back between captures, waits on this thread's
 * pending list for the next capture to begin. */
static void pend_locked(struct kmem_block *b)
{
    b->site = NULL;
    b->after = thread_after;
    b->pending_on = &thread_token;
    if (thread_pending_count < KMEM_PENDING_MAX)
        thread_pending[thread_pending_count] = b->ptr;
    thread_pending_count++;
}

int kmem_take(CUdeviceptr *dptr, size_t bytesize, int may_serve)
{
    struct site *site = kmem_thread_site;
    int ordinal = kmem_thread_ordinal++;
    if (!may_serve || !__atomic_load_n(&kept_bytes, __ATOMIC_RELAXED) || !dptr)
        return 0;
    CUcontext ctx = NULL;
    if (!current_context(site, &ctx, "the allocation goes to the driver"))
        return 0;
    struct kmem_block *found = NULL;
    pthread_mutex_lock(&kmem_lock);
    int outside = !kmem_thread_capturing;
    for (struct kmem_block *b = kept_blocks; b; b = b->next_kept) {
        if (b->size != bytesize || b->ctx != ctx || b->outside != outside ||
            (outside ? b->after != thread_after : b->site != site))
            continue;
        if (!found || (b->ordinal == ordinal && found->ordinal != ordinal))
            found = b;
        if (b->ordinal == ordinal)
            break;
    }
    if (found) {
        unlink_kept_locked(found);
        found->ordinal = ordinal;
        /* Counted for the site whose capture used it: a block outside
         * goes to the one that adopts it next. */
        found->site->memory.reused++;
        found->site->memory.reused_bytes += bytesize;
        if (outside)
            pend_locked(found);
    }
    pthread_mutex_unlock(&kmem_lock);
    if (!found)
        return 0;
    cache_charge_kept_memory(-(long long)bytesize);
    *dptr = found->ptr;
    return 1;
}

void kmem_track(CUdeviceptr dptr, size_t bytesize)
{
    struct kmem_block *b = calloc(1, sizeof *b);
    if (!b)
        return;
    CUcontext ctx = NULL;
    if (!current_context(kmem_thread_site, &ctx, "the block is not kept when freed")) {
        free(b);
        return;
    }
    b->ptr = dptr;
    b->size = bytesize;
    b->site = kmem_thread_site;
    b->ctx = ctx;
    b->ordinal = kmem_thread_ordinal - 1;
    b->outside = !kmem_thread_capturing;
    pthread_mutex_lock(&kmem_lock);
    /* The driver may reuse the address of a block freed behind recap's
     * back (cuMemFree_v2 through a path recap does not see): the newer
     * allocation wins. */
    struct kmem_block *stale = hmap_get(&blocks, (const void *)dptr);
    if (stale && stale->kept)
        stale = NULL;               /* never: a kept block is allocated */
    if (hmap_put(&blocks, (const void *)dptr, b) != 0) {
        pthread_mutex_unlock(&kmem_lock);
        free(b);
        return;
    }
    if (b->outside) {
        pend_locked(b);             /* counted as tracked once adopted */
    } else {
        b->site->memory.tracked++;
        b->counted = 1;
    }
    count_changed();
    pthread_mutex_unlock(&kmem_lock);
    free(stale);
}

/* A block allocated between captures that no capture adopted is memory
 * of the program's own, never a candidate: not counted as not kept. */
static const char unadopted[] = "allocated outside a capture and freed before one began";

/* Whether memory of the site may be kept now (the caller holds no lock).
 * b->site is read without kmem_lock: b is off the map, so no capture's
 * adoption can reach it. */
static const char *keep_refusal(struct kmem_block *b)
{
    if (!b->site)
        return unadopted;
    /* A capture anywhere: the synchronisation that stands for the
     * driver's own would be refused there, or end it (the capture that
     * adopted b among them). */
    if (ctab_any_capture_running())
        return "a capture runs";
    /* The synchronisation is of the current context: the block's must be. */
    CUcontext ctx = NULL;
    if (!current_context(b->site, &ctx, "the memory is freed, not kept"))
        return "the current context is not known";
    if (ctx != b->ctx)
        return "another context is current";
    if (cache_site_holds_any(b->site))
        return "the program holds a graph or executable graph of the site";
    if (!cache_reserve_kept_memory(b->size))
        return "over the cache budget";
    return NULL;
}

int kmem_keep(CUdeviceptr dptr, CUresult *answer)
{
    pthread_mutex_lock(&kmem_lock);
    struct kmem_block *b = hmap_get(&blocks, (const void *)dptr);
    if (b && b->kept) {
        /* Freed twice: the driver's answer to a pointer it does not know,
         * and the block stays recap's (still allocated at the driver). */
        pthread_mutex_unlock(&kmem_lock);
        event_warning(b->site, "free of device memory the program already freed; recap's kept "
                               "block stays, CUDA_ERROR_INVALID_VALUE returned");
        *answer = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    if (!b) {
        pthread_mutex_unlock(&kmem_lock);
        return 0;
    }
    hmap_del(&blocks, (const void *)dptr);
    count_changed();
    pthread_mutex_unlock(&kmem_lock);

    const char *refusal = keep_refusal(b);
    if (!refusal) {
        /* cuMemFree waits for the device's work: so does a kept block,
         * or work still running could meet the next owner's. */
        CUresult r = ctab_synchronize_if_idle();
        if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
            cache_charge_kept_memory(-(long long)b->size);
            refusal = "a capture runs";
        } else if (r != CUDA_SUCCESS) {
            cache_charge_kept_memory(-(long long)b->size);
            event_own_call_failed(b->site, "cuCtxSynchronize", r,
                                  "the memory is freed, not kept");
            refusal = "synchronisation failed";
        }
    }
    if (refusal) {
        pthread_mutex_lock(&kmem_lock);
        if (refusal != unadopted) {
            b->site->memory.not_kept++;
            b->site->memory.not_kept_reason = refusal;
        }
        pthread_mutex_unlock(&kmem_lock);
        free(b);
        return 0;
    }
    pthread_mutex_lock(&kmem_lock);
    if (hmap_put(&blocks, (const void *)dptr, b) != 0) {
        pthread_mutex_unlock(&kmem_lock);
        cache_charge_kept_memory(-(long long)b->size);
        free(b);
        return 0;
    }
    b->kept = 1;
    b->next_kept = kept_blocks;
    kept_blocks = b;
    __atomic_add_fetch(&kept_bytes, b->size, __ATOMIC_RELAXED);
    b->site->memory.kept++;
    count_changed();
    pthread_mutex_unlock(&kmem_lock);
    *answer = CUDA_SUCCESS;
    return 1;
}

size_t kmem_free_as_seen(size_t free, size_t total)
{
    size_t kept = __atomic_load_n(&kept_bytes, __ATOMIC_RELAXED);
    return free + kept < total ? free + kept : total;
}

static int release_all(int tell);

int kmem_release_all(void)
{
    return release_all(1);
}

int kmem_release_all_quietly(void)
{
    return release_all(0);
}

int kmem_forget_tracked(void)
{
    struct kmem_block *gone = NULL;
    int n = 0;
    pthread_mutex_lock(&kmem_lock);
    for (size_t i = 0; i < blocks.cap; i++) {
        struct kmem_block *b = blocks.slots[i].value;
        if (blocks.slots[i].key && !b->kept) {
            b->next_kept = gone;
            gone = b;
        }
    }
    for (struct kmem_block *b = gone; b; b = b->next_kept)
        hmap_del(&blocks, (const void *)b->ptr);
    count_changed();
    pthread_mutex_unlock(&kmem_lock);
    for (struct kmem_block *b = gone, *next; b; b = next, n++) {
        next = b->next_kept;
        free(b);
    }
    return n;
}

static int release_all(int tell)
{
    pthread_mutex_lock(&kmem_lock);
    struct kmem_block *list = kept_blocks;
    kept_blocks = NULL;
    for (struct kmem_block *b = list; b; b = b->next_kept)
        hmap_del(&blocks, (const void *)b->ptr);
    count_changed();
    pthread_mutex_unlock(&kmem_lock);
    int n = 0;
    for (struct kmem_block *b = list, *next; b; b = next, n++) {
        next = b->next_kept;
        CUresult r = DRV_REAL(cuMemFree_v2)(b->ptr);
        if (r != CUDA_SUCCESS)
            event_release_failed(b->site, "cuMemFree_v2", r, "the memory may stay allocated");
        __atomic_sub_fetch(&kept_bytes, b->size, __ATOMIC_RELAXED);
        cache_charge_kept_memory(-(long long)b->size);
        free(b);
    }
    if (n && tell)
        event_warning(NULL, "device memory exhausted: freed %d blocks of memory recap kept for "
                            "its sites' next captures", n);
    return n;
}

struct site_memory_counts kmem_site_counts(struct site *site)
{
    pthread_mutex_lock(&kmem_lock);
    struct site_memory_counts c = site->memory;
    pthread_mutex_unlock(&kmem_lock);
    return c;
}

void kmem_after_fork_child(void)
{
    /* The child cannot use the parent's device memory: forget it. */
    pthread_mutex_init(&kmem_lock, NULL);
    for (size_t i = 0; i < blocks.cap; i++)
        if (blocks.slots[i].key)
            free(blocks.slots[i].value);
    hmap_clear(&blocks);
    kept_blocks = NULL;
    kept_bytes = 0;
    kmem_tracked_count = 0;
    kmem_thread_site = NULL;
    kmem_thread_capturing = 0;
    thread_after = NULL;
    thread_paused = NULL;
    thread_pending_count = 0;
}
