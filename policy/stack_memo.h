/*
 * stack_memo.h - recognising a call stack seen before without unwinding it
 * (module prefix stack_memo_).
 *
 * Unwinding costs about 150 ns a frame, on every capture begin. A loop
 * captures from the same stack again and again: the same return addresses
 * sit in the same stack slots. So after each full unwind the thread
 * remembers where those return addresses were stored (offsets above the
 * entry's frame address: struct site_entry) and, next time the program
 * calls in from the same address with the same stack pointer, reads those
 * slots: if every one still holds its return address, the stack is the
 * same.
 *
 * Why that is sound: the innermost frame is the entry's return address,
 * compared exactly (never read from a slot). Given frame i matches, its
 * function is the same at the same point, so its frame has the same layout
 * and frame i+1's return address is saved at the same offset - freshly, by
 * this very call (x86 pushes it at the call; Arm saves the link register
 * in the callee's prologue). Slots are searched only above the entry's
 * frame address, in the program's live frames: below it lie the module's
 * own frames, full of stale copies of return addresses (its site_stack,
 * its log records), which on Arm once passed for the stack itself.
 * Known limit: a frame whose size varies at run time (alloca) between two
 * captures from the same return address could leave an old copy where the
 * slot was; it needs that copy to hold exactly the old return address.
 *
 * Owns: a small per-thread memo. Must never: read outside the calling
 * thread's stack, allocate on the recall path, or take a lock.
 */
#ifndef RECAP_STACK_MEMO_H
#define RECAP_STACK_MEMO_H

#include "policy/site.h"

/* Fills *st as the full unwind for `depth` frames from the same entry did
 * last time, if the remembered slots still hold the same return addresses.
 * Returns 1 on a hit, 0 otherwise (*st untouched). */
int stack_memo_recall(const struct site_entry *at, int depth, struct site_stack *st);

/* Remembers the result of a full unwind entered at `at`. Nothing is
 * remembered unless the stack's innermost frame is at->ret, or when a
 * return address cannot be found above at->cfa. `st` may live on the
 * stack above at->cfa; the search for slots starts past it. */
void stack_memo_remember(const struct site_entry *at, int depth, const struct site_stack *st);

#endif
