/*
 * stack_memo.c - per-thread memo of recently seen stacks (see stack_memo.h).
 *
 * Each entry: the entry's frame address, the depth asked for, and for
 * every kept frame the return address and (from the second on) the offset
 * of the stack slot that held it. Slots are found once, by scanning upward
 * from the entry's frame address for each return address in turn; the
 * scan stays below the top of the thread's stack, read once per thread
 * from pthread_getattr_np, and starts above the caller's site_stack when
 * that lies above the entry (it holds copies of the very addresses sought,
 * and stale ones from the last capture, which must never pass for slots).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "policy/stack_memo.h"

/* Scanning reads stack words nobody initialised, which memcheck would
 * rightly report; under valgrind the memo stays off and every capture
 * unwinds (the header is optional: without it the memo is always on). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define MEMO_ENABLED() (!RUNNING_ON_VALGRIND)
#endif
#endif
#ifndef MEMO_ENABLED
#define MEMO_ENABLED() 1
#endif

#define MEMO_ENTRIES 4
#define MEMO_SCAN_LIMIT (256 * 1024)   /* bytes above the frame searched for slots */

struct memo_entry {
    uintptr_t frame;                   /* the entry's cfa; 0: empty */
    int depth_asked;
    int depth;                         /* frames kept */
    uint32_t offset[SITE_MAX_DEPTH];   /* slot of pc[i], bytes above frame (i > 0) */
    void *pc[SITE_MAX_DEPTH];
};

static __thread struct memo_entry memo[MEMO_ENTRIES];
static __thread unsigned memo_next;
static __thread uintptr_t stack_top;   /* 0: not known yet; 1: unknown */

static uintptr_t thread_stack_top(void)
{
    if (stack_top)
        return stack_top;
    pthread_attr_t attr;
    void *base;
    size_t size;
    stack_top = 1;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &base, &size) == 0)
            stack_top = (uintptr_t)base + size;
        pthread_attr_destroy(&attr);
    }
    return stack_top;
}

/* Both functions read stack slots of other frames on purpose: that is not
 * an overflow for AddressSanitizer to report. */
__attribute__((no_sanitize_address))
int stack_memo_recall(const struct site_entry *at, int depth, struct site_stack *st)
{
    uintptr_t f = (uintptr_t)at->cfa;
    if (!MEMO_ENABLED())
        return 0;
    for (unsigned k = 0; k < MEMO_ENTRIES; k++) {
        const struct memo_entry *e = &memo[k];
        if (e->frame != f || e->depth_asked != depth || e->pc[0] != at->ret)
            continue;
        int i = 1;
        while (i < e->depth && *(void *const *)(f + e->offset[i]) == e->pc[i])
            i++;
        if (i < e->depth)
            continue;
        st->depth = e->depth;
        memcpy(st->pc, e->pc, (size_t)e->depth * sizeof st->pc[0]);
        return 1;
    }
    return 0;
}

__attribute__((no_sanitize_address))
void stack_memo_remember(const struct site_entry *at, int depth, const struct site_stack *st)
{
    uintptr_t f = (uintptr_t)at->cfa;
    if (!MEMO_ENABLED())
        return;
    uintptr_t top = thread_stack_top();
    uintptr_t limit = f + MEMO_SCAN_LIMIT;
    if (top <= 1 || f == 0 || f >= top || st->depth <= 0 || st->pc[0] != at->ret)
        return;
    if (limit > top)
        limit = top;

    struct memo_entry e = { .frame = f, .depth_asked = depth, .depth = st->depth };
    e.pc[0] = st->pc[0];
    uintptr_t start = f;
    if ((uintptr_t)st >= f && (uintptr_t)(st + 1) <= top)
        start = (uintptr_t)(st + 1);
    uintptr_t slot = (start + sizeof(void *) - 1) & ~(uintptr_t)(sizeof(void *) - 1);
    for (int i = 1; i < st->depth; i++) {
        while (slot + sizeof(void *) <= limit && *(void *const *)slot != st->pc[i])
            slot += sizeof(void *);
        if (slot + sizeof(void *) > limit)
            return;                    /* not on the stack as stored: no memo */
        e.offset[i] = (uint32_t)(slot - f);
        e.pc[i] = st->pc[i];
        slot += sizeof(void *);
    }
    memo[memo_next++ % MEMO_ENTRIES] = e;
}
