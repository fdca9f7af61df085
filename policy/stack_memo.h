/*
 * stack_memo.h - recognising a call stack seen before without unwinding it
 * (module prefix stack_memo_).
 *
 * Unwinding costs about 150 ns a frame, on every capture begin. A loop
 * captures from the same stack again and again: the same return addresses
 * sit in the same stack slots at the same depth. So after each full unwind
 * the thread remembers where those return addresses were stored (offsets
 * from the capturing frame) and, next time at the same frame address, reads
 * those slots: if every one still holds its return address, the stack is
 * the same. Where two call paths diverge, the diverging call has just
 * written its own return address into the slot, so a different stack never
 * passes for a remembered one.
 *
 * Owns: a small per-thread memo. Must never: read outside the calling
 * thread's stack, allocate on the recall path, or take a lock.
 */
#ifndef RECAP_STACK_MEMO_H
#define RECAP_STACK_MEMO_H

#include "policy/site.h"

/* Fills *st as the full unwind from `frame` for `depth` frames did last
 * time, if the remembered slots still hold the same return addresses.
 * Returns 1 on a hit, 0 otherwise (*st untouched). */
int stack_memo_recall(const void *frame, int depth, struct site_stack *st);

/* Remembers the result of a full unwind from `frame` (the caller's frame
 * address, as passed to stack_memo_recall). `st` may live on the stack
 * above `frame` (in the capturing function's caller); the search for slots
 * starts past it. Does nothing when a return address cannot be found. */
void stack_memo_remember(const void *frame, int depth, const struct site_stack *st);

#endif
