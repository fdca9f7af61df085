/*
 * site.h - capture-site identity (module prefix site_).
 *
 * Owns: turning the call stack above librecap at a capture begin into a
 * stable 64-bit site id, and showing its frames readably. The id hashes
 * (module file base name, offset in module) of up to stack_depth frames, so
 * the same binary gives the same ids run after run whatever the load
 * addresses. Must never: call the CUDA driver, take a lock that a driver
 * call could also take, or print anything.
 */
#ifndef RECAP_SITE_H
#define RECAP_SITE_H

#include <stddef.h>
#include <stdint.h>

#define SITE_MAX_DEPTH 64
#define SITE_DEFAULT_DEPTH 8
#define SITE_ID_HEX_LEN 16

struct site_stack {
    int depth;                  /* frames kept in pc[] */
    void *pc[SITE_MAX_DEPTH];   /* return addresses, innermost first */
};

/* Frames whose code lies in the module holding `addr_in_module` (librecap
 * itself) are skipped by site_stack_capture. Call once at start-up; without
 * it no frame is skipped. */
void site_set_self_module(const void *addr_in_module);

/* Where the program called into the skipped module: that call's return
 * address (the stack's innermost frame) and the caller's stack pointer at
 * the call (the callee's canonical frame address). Everything above `cfa`
 * is the program's own live frames; everything below is the module's,
 * where stale copies of return addresses lie. */
struct site_entry {
    const void *ret;
    const void *cfa;
};

/* Fills `st` with up to `depth` (1..SITE_MAX_DEPTH) return addresses of the
 * callers above the skipped module, innermost first. `entry` (may be NULL:
 * then the caller of this function is the entry) lets a stack seen before
 * on this thread be recognised without unwinding (policy/stack_memo.h). */
void site_stack_capture(struct site_stack *st, int depth, const struct site_entry *entry);

/* The stable id of a stack. Never 0 (0 means "no site"). */
uint64_t site_id_of(const struct site_stack *st);

/* As site_id_of, over the frames before the first one whose module is
 * loaded at `stop_base` (0: all frames); *kept (may be NULL) gets how many.
 * Sites with Python frames hash the C frames only up to the interpreter,
 * whose own call paths change as it specialises. */
uint64_t site_id_of_until(const struct site_stack *st, uintptr_t stop_base, int *kept);

/* Writes "module+0xOFF symbol+0xOFF" (symbol part omitted when unknown) for
 * one return address into buf; returns the length written (truncated to
 * len-1, always NUL-terminated when len > 0). */
size_t site_frame_format(const void *pc, char *buf, size_t len);

/* 16 lower-case hex digits and a NUL. */
void site_id_format(uint64_t id, char out[SITE_ID_HEX_LEN + 1]);

/* Parses exactly 16 hex digits (either case). Returns 0 on success, -1 on
 * anything else (leaves *id untouched). */
int site_id_parse(const char *text, uint64_t *id);

#endif
