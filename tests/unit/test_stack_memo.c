/*
 * test_stack_memo.c - the memo of seen stacks never mistakes one stack for
 * another, and does recognise a stack seen before.
 *
 * Two call paths with identical frame sizes reach the same capturing
 * function at the same stack depth, alternately and in runs: every capture
 * must get the id of its own path. The capturing function keeps its
 * site_stack in its own frame, right where the last capture's return
 * addresses still lie, which is exactly what a careless memo would take for
 * the stack itself.
 */
#include <criterion/criterion.h>

#include "policy/site.h"

/* Distinct side effects keep the compiler from folding the look-alike
 * functions below into one (identical code folding). */
static volatile int touched_a, touched_b, touched_via_a, touched_via_b;

static __attribute__((noinline)) uint64_t capture_here(void)
{
    struct site_stack st;
    site_stack_capture(&st, 3, NULL);   /* capture_here, path_x, via_x */
    __asm__ volatile("" ::: "memory");
    return site_id_of(&st);
}

static __attribute__((noinline)) uint64_t path_a(void)
{
    uint64_t id = capture_here();
    touched_a++;
    return id;
}

static __attribute__((noinline)) uint64_t path_b(void)
{
    uint64_t id = capture_here();
    touched_b++;
    return id;
}

static __attribute__((noinline)) uint64_t via_a(int which)
{
    uint64_t id = which ? path_b() : path_a();
    touched_via_a++;
    return id;
}

static __attribute__((noinline)) uint64_t via_b(int which)
{
    uint64_t id = which ? path_b() : path_a();
    touched_via_b++;
    return id;
}

Test(stack_memo, alternating_paths_keep_their_own_ids)
{
    uint64_t a = via_a(0), b = via_a(1), c = via_b(0), d = via_b(1);
    cr_assert_neq(a, b);
    cr_assert_neq(a, c);
    cr_assert_neq(b, d);
    cr_assert_neq(c, d);
    for (int i = 0; i < 5000; i++) {
        int pattern = (i * 7 + i / 3) % 4;
        uint64_t got = pattern == 0 ? via_a(0) : pattern == 1 ? via_a(1)
                     : pattern == 2 ? via_b(0) : via_b(1);
        uint64_t want = pattern == 0 ? a : pattern == 1 ? b : pattern == 2 ? c : d;
        cr_assert_eq(got, want, "call %d (path %d) got another path's id", i, pattern);
    }
}

Test(stack_memo, runs_of_the_same_path_stay_stable)
{
    uint64_t first = via_b(1);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(via_b(1), first);
    cr_assert_neq(via_a(1), first);
    cr_assert_eq(via_b(1), first);
}

/* The innermost frame is the entry's return address, compared exactly and
 * never read from a slot: two call sites whose outer frames sit in the
 * same slots (the same caller calling two functions) must not share a
 * memo entry. On Arm the old search found the innermost return address in
 * the module's own frames, as a stale copy, and took one site for the
 * other. Here the outer frames are fabricated above a fabricated entry. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef UNDER_VALGRIND
#define UNDER_VALGRIND() 0
#endif

#include "policy/stack_memo.h"

static __attribute__((noinline)) void memo_entry_case(void)
{
    /* One struct, so the fabricated frames lie above the stacks. */
    struct {
        struct site_stack st, got;
        void *area[16];
    } l = { .st = { .depth = 0 } };
    void *site_a = (void *)(uintptr_t)0x1000a0, *site_b = (void *)(uintptr_t)0x1000b0;
    void *outer1 = (void *)(uintptr_t)0x2000c0, *outer2 = (void *)(uintptr_t)0x3000d0;
    l.area[3] = outer1;
    l.area[9] = outer2;
    l.st.depth = 3;
    l.st.pc[0] = site_a, l.st.pc[1] = outer1, l.st.pc[2] = outer2;
    __asm__ volatile("" ::: "memory");

    struct site_entry at_a = { .ret = site_a, .cfa = l.area };
    struct site_entry at_b = { .ret = site_b, .cfa = l.area };

    stack_memo_remember(&at_b, 3, &l.st);   /* innermost frame is not at_b's: nothing kept */
    cr_assert_eq(stack_memo_recall(&at_b, 3, &l.got), 0, "a stack not entered at b was kept");
    stack_memo_remember(&at_a, 3, &l.st);
    cr_assert_eq(stack_memo_recall(&at_b, 3, &l.got), 0,
                 "a call from b took a's stack: the innermost frame was not compared");
    if (UNDER_VALGRIND())
        return;                             /* the memo is off under valgrind */
    cr_assert_eq(stack_memo_recall(&at_a, 3, &l.got), 1, "the same stack was not recognised");
    cr_assert_eq(l.got.depth, 3);
    cr_assert_eq(l.got.pc[2], outer2);
    l.area[9] = (void *)(uintptr_t)0x4000e0;  /* another outer caller */
    __asm__ volatile("" ::: "memory");
    cr_assert_eq(stack_memo_recall(&at_a, 3, &l.got), 0, "an outer frame changed unnoticed");
}

Test(stack_memo, the_innermost_frame_is_compared_exactly)
{
    memo_entry_case();
}
