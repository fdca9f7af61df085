/*
 * nvtx_ranges.h - the NVTX ranges open on each thread (module prefix
 * nvtx_ranges_).
 *
 * Owns: being an NVTX v3 injection library (the exported
 * InitializeInjectionNvtx2 that NVTX calls when NVTX_INJECTION64_PATH names
 * librecap), a bounded per-thread stack of the names of the ranges pushed
 * and not yet popped (nvtxRangePushA/W/Ex, nvtxDomainRangePushEx), and
 * pointing NVTX at librecap at load time when no other tool is named.
 * Must never: allocate or lock on the push/pop path, log, or interpose
 * anything: a child that inherits NVTX_INJECTION64_PATH without LD_PRELOAD
 * loads librecap only as this injection, and then recap only keeps the
 * stacks nobody reads.
 */
#ifndef RECAP_NVTX_RANGES_H
#define RECAP_NVTX_RANGES_H

#define NVTX_RANGES_DEPTH_MAX 16       /* names kept per thread */
#define NVTX_RANGES_NAME_MAX 64        /* bytes of a name kept, NUL included */

/* The innermost open range's name on this thread (ranges deeper than
 * NVTX_RANGES_DEPTH_MAX read as the deepest kept one), or NULL when none
 * is open. Valid until this thread's next push or pop. */
const char *nvtx_ranges_innermost(void);

/* Once per process, for the log: a sentence when NVTX ranges cannot be
 * seen because NVTX_INJECTION64_PATH names another tool; else NULL. */
const char *nvtx_ranges_take_note(void);

#endif
