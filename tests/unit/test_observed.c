/*
 * test_observed.c - shim/state/observed.c alone: a claimed slot is found by its
 * stream key, from any thread, with what its begin stored; an end frees it
 * once; the table holds 64 captures and says so when full; and threads
 * claiming, finding and freeing at once never see each other's captures.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>

#include "shim/state/observed.h"

static struct site *fake_site(uintptr_t n)
{
    return (struct site *)(0x1000 + n * 16);
}

static void setup(void)
{
    observed_after_fork_child();    /* every test starts with no slot in use */
}

TestSuite(observed, .init = setup);

Test(observed, a_claimed_capture_is_found_by_its_stream_until_released)
{
    int stream = 0;
    struct observed_capture in = { fake_site(1), 7, 123.5, 0 }, out = { 0 };
    cr_assert(!observed_any());
    int slot = observed_claim(&stream, &in);
    cr_assert_geq(slot, 0);
    cr_assert(observed_any());
    cr_assert_eq(observed_find(&stream, &out), slot);
    cr_expect_eq(out.site, in.site);
    cr_expect_eq(out.seq, 7);
    cr_expect_float_eq(out.t0, 123.5, 1e-9);
    cr_assert_eq(observed_find(&out, &out), -1, "another stream has no capture here");
    cr_assert_eq(observed_release(slot, &stream), 1);
    cr_assert_eq(observed_find(&stream, &out), -1);
    cr_assert(!observed_any());
}

Test(observed, a_slot_is_released_once)
{
    int stream = 0, other = 0;
    struct observed_capture in = { fake_site(2), 1, 0, 0 };
    int slot = observed_claim(&stream, &in);
    cr_assert_eq(observed_release(slot, &other), 0, "a slot is freed only for its own stream");
    cr_assert_eq(observed_release(slot, &stream), 1);
    cr_assert_eq(observed_release(slot, &stream), 0, "the second end of one capture frees nothing");
    cr_assert(!observed_any());
}

Test(observed, a_full_table_says_so_and_a_freed_slot_serves_again)
{
    static char streams[65];
    struct observed_capture in = { fake_site(3), 0, 0, 0 };
    int slots[64];
    for (int i = 0; i < 64; i++) {
        in.seq = (unsigned long)i;
        slots[i] = observed_claim(&streams[i], &in);
        cr_assert_geq(slots[i], 0, "capture %d of 64", i);
    }
    cr_assert_eq(observed_claim(&streams[64], &in), -1, "a 65th capture at once has no slot");
    observed_unclaim(slots[10]);     /* a begin the driver refused */
    cr_assert_eq(observed_claim(&streams[64], &in), slots[10]);
    struct observed_capture out;
    for (int i = 0; i < 64; i++) {
        if (i == 10)
            continue;
        cr_assert_eq(observed_find(&streams[i], &out), slots[i]);
        cr_expect_eq(out.seq, (unsigned long)i);
    }
}

/* Each thread begins and ends captures on its own stream, again and again,
 * while the others do the same: every search finds its own capture, with
 * its own fields, and in the end no slot is left in use. */
struct worker {
    int stream;
    uintptr_t id;
    int wrong;
};

static void *churn(void *p)
{
    struct worker *w = p;
    for (unsigned long i = 0; i < 20000; i++) {
        struct observed_capture in = { fake_site(w->id), i, (double)w->id, 0 }, out = { 0 };
        int slot = observed_claim(&w->stream, &in);
        if (slot < 0) {
            w->wrong++;
            continue;
        }
        if (observed_find(&w->stream, &out) != slot || out.site != in.site || out.seq != i ||
            out.t0 != in.t0)
            w->wrong++;
        if (observed_release(slot, &w->stream) != 1)
            w->wrong++;
    }
    return NULL;
}

Test(observed, threads_at_once_see_only_their_own_captures)
{
    enum { THREADS = 8 };
    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){ .id = (uintptr_t)i + 1 };
        pthread_create(&t[i], NULL, churn, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        cr_expect_eq(w[i].wrong, 0, "thread %d: %d wrong answers", i, w[i].wrong);
    }
    cr_expect(!observed_any());
}
