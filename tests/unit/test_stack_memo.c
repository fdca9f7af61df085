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
