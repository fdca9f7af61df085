/*
 * kept_memory.h - device memory a site's captures allocate, kept when the
 * program frees it and handed back to the site's next capture (module
 * prefix kmem_).
 *
 * A caching allocator gives each captured graph a private pool: PyTorch
 * allocates its segments with cuMemAlloc inside the capture (relaxed
 * mode) and frees them with cuMemFree once the graph and its executable
 * graph are gone, every step. Each step then pays an allocation and a free
 * at the driver (about 100 us each on the H200), and the new pool's new
 * addresses change nearly every kernel node of the next capture. recap
 * keeps such memory instead of freeing it and hands it back to the next
 * allocation of the same size at the same site: the tensors land at the
 * same addresses, and the capture changes no node.
 *
 * Owns: the allocations made on a thread while it captures at a site that
 * keeps memory (tracked), and the ones the program freed that recap kept.
 * The rules: memory is kept only where the program destroyed every graph
 * and executable graph of the site (none it holds may still touch it), no
 * capture runs anywhere (the device is synchronised first, as the driver's
 * free would), and it fits the cache budget; it is handed back only to an
 * allocation of the same size in the same context, inside a capture at the
 * same site (a block allocated between captures: to one made between
 * captures after a capture at the site it came after); it goes first when
 * an allocation fails for memory; the free memory cuMemGetInfo reports
 * counts it as free (recap gives it back on demand, so a program that
 * sizes its caches by it can allocate that much).
 *
 * Must never: hand out memory twice, free memory the program still holds,
 * or call the driver while holding kmem_lock.
 */
#ifndef RECAP_KEPT_MEMORY_H
#define RECAP_KEPT_MEMORY_H

#include <stddef.h>

#include "shim/base/cuda_compat.h"
#include "shim/state/sites.h"

struct site;

/* The site this thread last began a capture at, where that site keeps
 * memory (NULL before any such capture, and while a capture recap keeps
 * nothing for runs on the thread), and whether that capture still runs.
 * Set by the capture begin, `capturing` cleared by its end (capture.c): a
 * wrapper's one load decides whether an allocation is looked at. An
 * allocation made between two captures is looked at too: PyTorch
 * allocates a graph's pool segment before cudaStreamBeginCapture (for the
 * generator's seed and offset), and the capture's small tensors land in
 * it. */
extern __thread struct site *kmem_thread_site;
extern __thread int kmem_thread_capturing;
extern __thread int kmem_thread_ordinal;   /* allocations since the begin or the end */

/* Allocations tracked or kept, process-wide: a free looks only when nonzero. */
extern int kmem_tracked_count;

static inline int kmem_capturing(void)
{
    return __builtin_expect(kmem_thread_site != NULL, 0);
}

static inline int kmem_tracking(void)
{
    return __builtin_expect(__atomic_load_n(&kmem_tracked_count, __ATOMIC_RELAXED) != 0, 0);
}

/* A capture at `site` begins on this thread (NULL: one recap passes to
 * the driver untracked), or the capture running ends. A begin adopts the
 * blocks the thread allocated since its last begin where the site keeps
 * memory, and lets them go otherwise. */
void kmem_capture_began(struct site *site);
void kmem_capture_ended(void);

/* An allocation on a thread with a site (kmem_capturing: inside its
 * capture, or after it), counted so that each has its rank: 1 with *dptr
 * set when a kept block of this size, allocated as this one is (inside or
 * outside a capture), served it with no driver call; else 0. `may_serve`:
 * the driver would let the thread allocate now (no capture it would
 * refuse it for); else it is the driver's to answer. */
int kmem_take(CUdeviceptr *dptr, size_t bytesize, int may_serve);

/* The driver allocated *dptr on such a thread: tracked from now on. One
 * allocated outside a capture belongs to the next capture that begins on
 * the thread, and is kept only once that capture adopted it and ended (a
 * pool segment, not any tensor). */
void kmem_track(CUdeviceptr dptr, size_t bytesize);

/* The program frees dptr: 1 when recap answered, with *answer the result
 * the program sees (CUDA_SUCCESS: kept; CUDA_ERROR_INVALID_VALUE: it was
 * freed before and recap keeps it), else 0: the caller frees it at the
 * driver. */
int kmem_keep(CUdeviceptr dptr, CUresult *answer);

/* cuMemGetInfo's free memory with what recap keeps counted as free. */
size_t kmem_free_as_seen(size_t free, size_t total);

/* Frees every kept block at the driver: for an allocation that failed for
 * memory. Returns how many there were. */
int kmem_release_all(void);

/* What a site's kept memory did, for the end event. */
struct site_memory_counts kmem_site_counts(struct site *site);

/* Before a context teardown (lifecycle_context_teardown): every kept
 * block freed at the driver, with no warning (the count is returned), and
 * every block the program holds forgotten (its later free passes to the
 * driver). */
int kmem_release_all_quietly(void);
int kmem_forget_tracked(void);

void kmem_after_fork_child(void);

#endif
