/*
 * bench_site_id.c - what a capture site costs: site_stack_capture +
 * site_id_of through a stand-in for librecap (the probe library, whose
 * frames are skipped), from a stack 40 frames deep, at depths 4, 8, 16:
 * "repeat" captures again and again from one stack (a loop: the stack memo
 * recognises it), "new" rotates among more stacks than the memo holds, so
 * that every capture unwinds. Run with `meson test -C build --benchmark` or
 * directly; prints ns/call.
 */
#include <stdio.h>
#include <time.h>

#include "tests/unit/site_probe.h"

static volatile uint64_t sink;

/* Calls probe_id from `extra` frames further down: another stack. */
__attribute__((noinline)) static uint64_t probe_below(int extra, int depth)
{
    if (extra > 0) {
        uint64_t r = probe_below(extra - 1, depth);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    return probe_id(depth);
}

__attribute__((noinline)) static void measure(int depth)
{
    enum { WARM = 1000, CALLS = 200000, STACKS = 7 };
    for (int rotate = 0; rotate < 2; rotate++) {
        for (int i = 0; i < WARM; i++)
            sink ^= probe_below(rotate ? i % STACKS : 0, depth);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < CALLS; i++)
            sink ^= probe_below(rotate ? i % STACKS : 0, depth);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                     (double)(t1.tv_nsec - t0.tv_nsec)) / CALLS;
        printf("depth %2d, %s stack: %7.1f ns per capture + id\n", depth,
               rotate ? "new   " : "repeat", ns);
    }
}

__attribute__((noinline)) static int nest(int levels)
{
    if (levels > 0) {
        int r = nest(levels - 1);
        __asm__ volatile("" ::: "memory");   /* keep the frame */
        return r;
    }
    measure(4);
    measure(8);
    measure(16);
    return 0;
}

int main(void)
{
    probe_set_self(1);
    return nest(40);
}
