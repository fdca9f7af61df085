/*
 * test_predict.c - shape prediction: cycles up to max_period settle into
 * hits on every capture after two cycles, with or without unrelated shapes
 * before them; a permanent switch costs at most two misses; the runs kept
 * as shapes are recorded predict what scanning the history would.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "policy/predict.h"
#include "tests/unit/predict_reference.h"

#define A 0xaaaaull
#define B 0xbbbbull
#define C 0xccccull

/* Feeds `seq` and counts how many predictions made from capture `from`
 * on were right. */
static int hits_from(const uint64_t *seq, int n, int max_period, int from)
{
    struct shape_history h;
    memset(&h, 0, sizeof h);
    int hits = 0;
    for (int i = 0; i < n; i++) {
        uint64_t guess = predict_next(&h, max_period);
        if (i >= from && guess == seq[i])
            hits++;
        predict_record(&h, seq[i]);
    }
    return hits;
}

static void cycle(uint64_t *seq, int n, const uint64_t *pattern, int p)
{
    for (int i = 0; i < n; i++)
        seq[i] = pattern[i % p];
}

Test(predict, empty_history_predicts_nothing)
{
    struct shape_history h;
    memset(&h, 0, sizeof h);
    cr_expect_eq(predict_next(&h, 2), 0);
    predict_record(&h, A);
    cr_expect_eq(predict_next(&h, 2), A);
}

Test(predict, alternating)
{
    uint64_t seq[40];
    cycle(seq, 40, (uint64_t[]){ A, B }, 2);
    cr_expect_eq(hits_from(seq, 40, 2, 4), 36);
}

Test(predict, three_cycle)
{
    uint64_t seq[60];
    cycle(seq, 60, (uint64_t[]){ A, B, C }, 3);
    cr_expect_eq(hits_from(seq, 60, 3, 6), 54);
}

Test(predict, repeated_shape_inside_cycle)
{
    /* A,A,B: the last two shapes are often A,A, which a "smallest period
     * whose last 2p repeat" rule reads as period 1. */
    uint64_t seq[60];
    cycle(seq, 60, (uint64_t[]){ A, A, B }, 3);
    cr_expect_eq(hits_from(seq, 60, 3, 6), 54);
    cr_expect_eq(hits_from(seq, 60, 8, 6), 54);
}

Test(predict, constant_shape_always_hits)
{
    uint64_t seq[20];
    cycle(seq, 20, (uint64_t[]){ A }, 1);
    cr_expect_eq(hits_from(seq, 20, 1, 1), 19);
    cr_expect_eq(hits_from(seq, 20, 64, 1), 19);
}

Test(predict, permanent_switch_settles_within_two_captures)
{
    for (int max_period = 1; max_period <= 64; max_period *= 2) {
        struct shape_history h;
        memset(&h, 0, sizeof h);
        for (int i = 0; i < 30; i++)
            predict_record(&h, A);
        int misses = 0;
        for (int i = 0; i < 30; i++) {
            if (predict_next(&h, max_period) != B) {
                misses++;
                cr_expect_lt(i, 2, "max_period %d: miss at B #%d", max_period, i);
            }
            predict_record(&h, B);
        }
        cr_expect_leq(misses, 2);
    }
}

Test(predict, switch_from_cycle_to_constant)
{
    struct shape_history h;
    memset(&h, 0, sizeof h);
    for (int i = 0; i < 20; i++)
        predict_record(&h, i % 2 ? B : A);
    for (int i = 0; i < 20; i++) {
        if (i >= 2)
            cr_expect_eq(predict_next(&h, 4), C, "capture %d after switch", i);
        predict_record(&h, C);
    }
}

/* A pattern of length p whose smallest period is p (so it is a real cycle
 * of length p, not a shorter one repeated). */
static void primitive_pattern(uint64_t *pat, int p, int alphabet, unsigned *seed)
{
    for (;;) {
        for (int i = 0; i < p; i++)
            pat[i] = 1 + (uint64_t)(rand_r(seed) % (unsigned)alphabet);
        int primitive = 1;
        for (int d = 1; d < p && primitive; d++) {
            if (p % d)
                continue;
            int same = 1;
            for (int i = d; i < p && same; i++)
                same = pat[i] == pat[i - d];
            if (same)
                primitive = 0;
        }
        if (primitive)
            return;
    }
}

Test(predict, every_cycle_up_to_max_period_hits_after_two_cycles)
{
    unsigned seed = 12345;
    uint64_t pat[64];
    uint64_t seq[64 * 8 + 40];
    for (int max_period = 1; max_period <= 64; max_period = max_period < 8 ? max_period + 1
                                                                          : max_period * 2) {
        for (int p = 1; p <= max_period; p++) {
            for (int trial = 0; trial < 4; trial++) {
                int alphabet = trial < 2 ? 2 : p + 1;   /* many repeats, or mostly distinct */
                primitive_pattern(pat, p, alphabet, &seed);
                /* trials 1 and 3 start with unrelated shapes */
                int junk = trial % 2 ? 5 : 0;
                int n = junk + 5 * p + 10;
                for (int i = 0; i < junk; i++)
                    seq[i] = 1000 + (uint64_t)i;
                cycle(seq + junk, n - junk, pat, p);
                int from = junk + 2 * p;
                int hits = hits_from(seq, n, max_period, from);
                cr_expect_eq(hits, n - from, "max_period %d, period %d, trial %d: %d of %d",
                             max_period, p, trial, hits, n - from);
            }
        }
    }
}

Test(predict, history_longer_than_the_ring)
{
    uint64_t seq[1000];
    cycle(seq, 1000, (uint64_t[]){ A, B, B, C, A }, 5);
    cr_expect_eq(hits_from(seq, 1000, 5, 10), 990);
}

Test(predict, hit_rate_on_a_phase_change)
{
    /* A,B cycle, then A,A,B cycle: the new cycle must be predicted right
     * once it has been seen twice. */
    uint64_t seq[80];
    int n = 0;
    for (int i = 0; i < 20; i++)
        seq[n++] = i % 2 ? B : A;
    int start = n;
    while (n < 80) {
        seq[n] = (n - start) % 3 == 2 ? B : A;
        n++;
    }
    struct shape_history h;
    memset(&h, 0, sizeof h);
    int misses_late = 0;
    for (int i = 0; i < n; i++) {
        if (i >= start + 6 + 3 && predict_next(&h, 3) != seq[i])
            misses_late++;
        predict_record(&h, seq[i]);
    }
    cr_expect_eq(misses_late, 0);
}

Test(predict, a_shape_never_seen_before_predicts_nothing)
{
    struct shape_history h;
    memset(&h, 0, sizeof h);
    predict_record(&h, A);
    predict_record(&h, B);
    cr_expect_eq(predict_next(&h, 4), 0, "B is new: no guess that it repeats");
    predict_record(&h, B);
    cr_expect_eq(predict_next(&h, 4), B);
}

Test(predict, working_set_counts_distinct_shapes_of_the_window)
{
    struct shape_history h;
    memset(&h, 0, sizeof h);
    cr_expect_eq(predict_working_set(&h), 1);
    for (int i = 0; i < 300; i++)
        predict_record(&h, 100 + (uint64_t)(i % 8));
    cr_expect_eq(predict_working_set(&h), 8);
    /* A steady stretch as long as the window forgets the cycle. */
    for (int i = 0; i < PREDICT_WINDOW - 1; i++)
        predict_record(&h, A);
    cr_expect_eq(predict_working_set(&h), 2);
    predict_record(&h, A);
    cr_expect_eq(predict_working_set(&h), 1);
    /* A new shape every time: the window's size. */
    for (int i = 0; i < 500; i++)
        predict_record(&h, 1000 + (uint64_t)i);
    cr_expect_eq(predict_working_set(&h), PREDICT_WINDOW);
}

/* The runs kept as shapes are recorded are, at every step, those a scan
 * of the history counts (predict_next reads them in place of the scan it
 * made before), for histories steady, cyclic (periods up to 70, past the
 * longest considered), noisy, switching phase, and longer than the ring;
 * and the periods kept are those the working set asks for. */
Test(predict, kept_runs_are_what_a_scan_of_the_history_counts)
{
    unsigned seed = 777;
    static const int periods[] = { 1, 2, 3, 5, 8, 13, 31, 64, 70 };
    uint64_t pat[70];
    long compared = 0;
    for (int trial = 0; trial < 300; trial++) {
        struct shape_history h;
        memset(&h, 0, sizeof h);
        int p = periods[trial % 9];
        int alphabet = 1 + trial % 6;
        int noise = trial % 4 == 3 ? 7 : 0;            /* one shape in 7 replaced */
        int length = 40 + (trial * 37) % 600;
        for (int i = 0; i < p; i++)
            pat[i] = 1 + (uint64_t)(rand_r(&seed) % (unsigned)alphabet);
        for (int i = 0; i < length; i++) {
            if (i == length / 2 && trial % 5 == 0)      /* a phase change */
                for (int j = 0; j < p; j++)
                    pat[j] = 100 + (uint64_t)(rand_r(&seed) % 3);
            uint64_t shape = noise && rand_r(&seed) % (unsigned)noise == 0
                                 ? 50 + (uint64_t)(rand_r(&seed) % 4)
                                 : pat[i % p];
            predict_record(&h, shape);
            int want = 2 * predict_working_set(&h);
            cr_assert_geq((int)h.runs_kept, want < PREDICT_MAX_PERIOD ? want : PREDICT_MAX_PERIOD,
                          "trial %d step %d: %u periods kept", trial, i, h.runs_kept);
            for (unsigned long q = 1; q <= h.runs_kept; q++) {
                cr_assert_eq(h.run[q - 1], reference_run(&h, q),
                             "trial %d step %d: run(%lu) kept %u, scanned %lu", trial, i, q,
                             h.run[q - 1], reference_run(&h, q));
                compared++;
            }
        }
    }
    cr_expect_gt(compared, 100000, "%ld runs compared", compared);
}

/* A period first kept when the working set grows starts from the history,
 * not from zero: X, 63 shapes of 30 kinds, X again makes 32 distinct
 * shapes (periods up to 64 kept from then on) and run(64) = 1 at once. */
Test(predict, a_period_kept_anew_starts_from_the_history)
{
    struct shape_history h;
    memset(&h, 0, sizeof h);
    predict_record(&h, 1000);
    for (int i = 0; i < 63; i++)
        predict_record(&h, 1 + (uint64_t)(i % 30));
    cr_assert_eq(predict_working_set(&h), 31);
    cr_assert_eq(h.runs_kept, 62);
    predict_record(&h, 1000);
    cr_assert_eq(predict_working_set(&h), 32);
    cr_assert_eq(h.runs_kept, 64);
    cr_expect_eq(reference_run(&h, 64), 1);
    cr_expect_eq(h.run[63], 1, "run(64) kept as %u", h.run[63]);
}
