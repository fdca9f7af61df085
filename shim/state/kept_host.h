/*
 * kept_host.h - pinned host memory the program frees, kept and handed
 * back to its next allocation of the same size (module prefix khost_).
 *
 * PyTorch empties its pinned-memory cache at every torch.cuda.graph enter
 * (torch._C._host_emptyCache), so a program that captures every step and
 * pins memory in it (a DataLoader's pinned batch, a non_blocking copy)
 * unpins its blocks (cuMemFreeHost) and pins them again (cuMemHostAlloc)
 * every step: about 300 and 770 us a block on the H200 (PyTorch's
 * test_graph_optims, round 22's log). recap keeps such a block instead and
 * hands it back to the next allocation of its size: nothing is pinned or
 * unpinned at the driver per step.
 *
 * Owns: the blocks the program pinned through cuMemHostAlloc and
 * cuMemAllocHost (tracked, by address) and those it freed that recap
 * kept. The rules: a block is kept only while no capture runs anywhere
 * (inside one the driver refuses these calls, and recap lets it answer),
 * with its own context current, after synchronising that context (the
 * driver's free of pinned memory waits for the device), and while the
 * kept blocks fit the cache budget, counted apart from device memory; it
 * is handed back only to an allocation of the same size, entry point,
 * flags and context, while no capture runs; all go when a pinned
 * allocation fails for memory (which is then retried) and before their
 * context goes. RECAP_KEEP_MEMORY=off turns it off with device memory.
 *
 * Must never: hand a block out twice, free a block the program still
 * holds, or call the driver while holding khost_lock.
 */
#ifndef RECAP_KEPT_HOST_H
#define RECAP_KEPT_HOST_H

#include <stddef.h>

#include "shim/base/cuda_compat.h"
#include "shim/state/events.h"

/* The flags an allocation through cuMemAllocHost is told apart by: none
 * of cuMemHostAlloc's (which are bits 0 to 2). */
#define KHOST_ALLOC_HOST 0x80000000u

/* Whether pinned allocations and frees are looked at (keep_memory on,
 * recap not passing through). */
int khost_on(void);

/* An allocation of `bytesize` with `flags` (KHOST_ALLOC_HOST for
 * cuMemAllocHost): 1 with *pp set when a kept block served it with no
 * driver call; else 0. `may_serve`: no capture runs. */
int khost_take(void **pp, size_t bytesize, unsigned int flags, int may_serve);

/* The driver pinned *p for the program: tracked from now on. */
void khost_track(void *p, size_t bytesize, unsigned int flags);

/* The program frees p: 1 with *answer set where recap kept it (or
 * answered a second free of a kept block); 0 where the driver must free
 * it as asked. */
int khost_keep(void *p, CUresult *answer);

/* Frees every kept block at the driver (a pinned allocation failed for
 * memory, or the context goes); returns how many. */
int khost_release_all(void);

/* Forgets every tracked block (their context went with them); returns
 * how many. */
int khost_forget_tracked(void);

/* What recap did with pinned memory, for the end event. */
struct event_host_memory khost_counts(void);

void khost_after_fork_child(void);

#endif
