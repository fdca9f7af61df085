/*
 * test_reuse_gate.c - the back-off rule: windows of looks, closing when
 * misses outweigh hits and failures (unless a quarter of the looks were
 * hits that saved time) or when failures cost more time than
 * hits saved (at once after a few such failures), reopening after a
 * doubling back-off that a good window resets. One odd failure among hits
 * never closes it.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "policy/reuse_gate.h"

static struct reuse_gate gate;
static unsigned long now;

static void init(void)
{
    memset(&gate, 0, sizeof gate);
    now = 0;
}

/* One capture with one look that saved (or cost, negative) net_us;
 * returns the change the look made. */
static enum gate_change look_net(enum gate_look l, double net_us)
{
    enum gate_change reopened;
    now++;
    if (!gate_open(&gate, now, &reopened))
        return GATE_SAME;
    if (reopened != GATE_SAME)
        return reopened;
    return gate_record(&gate, l, net_us, now);
}

/* A hit saves 100 us, a failure costs 50 us beyond what it replaced. */
static enum gate_change look(enum gate_look l)
{
    return look_net(l, l == GATE_HIT ? 100 : l == GATE_FAILED ? -50 : 0);
}

TestSuite(gate, .init = init);

Test(gate, a_cycle_missing_only_its_first_pass_stays_open)
{
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(look(i % 16 < 16 && i < 16 ? GATE_MISS : GATE_HIT), GATE_SAME, "look %d", i);
    cr_expect_eq(gate.closings, 0);
}

Test(gate, half_misses_stay_open_more_close)
{
    for (int i = 0; i < GATE_WINDOW; i++)
        cr_assert_eq(look(i % 2 ? GATE_MISS : GATE_HIT), GATE_SAME);
    /* 15 hits and 49 misses: fewer than a quarter hits. */
    for (int i = 0; i < GATE_WINDOW - 1; i++)
        cr_assert_eq(look(i % 2 && i < 30 ? GATE_HIT : GATE_MISS), GATE_SAME);
    cr_expect_eq(look(GATE_MISS), GATE_CLOSED_MISSES);
    cr_expect_eq(gate.last_hits + gate.last_misses, GATE_WINDOW);
    cr_expect_eq(gate.last_hits, 15);
}

/* An optimizer test's sweep: each new kind misses its capture and its
 * instantiation, each repeat hits both. A window of 16 hits that saved
 * time among 48 misses stays open; the same hits saving nothing (or
 * costing) do not keep it. */
Test(gate, a_quarter_hits_that_saved_time_stay_open)
{
    for (int w = 0; w < 4; w++)
        for (int i = 0; i < GATE_WINDOW; i++)
            cr_assert_eq(look(i % 4 == 1 ? GATE_HIT : GATE_MISS), GATE_SAME, "window %d look %d",
                         w, i);
    cr_expect_eq(gate.closings, 0);
}

Test(gate, a_quarter_hits_that_saved_nothing_close)
{
    enum gate_change c = GATE_SAME;
    for (int i = 0; i < GATE_WINDOW && c == GATE_SAME; i++)
        c = look_net(i % 4 == 1 ? GATE_HIT : GATE_MISS, i % 4 == 1 ? 0 : -5);
    cr_expect_eq(c, GATE_CLOSED_MISSES);
    cr_expect_eq(gate.last_hits, 16);
}

Test(gate, misses_close_then_the_back_off_doubles)
{
    unsigned long closed_at = 0;
    unsigned long expected_backoff = GATE_BACKOFF_FIRST;
    int closings = 0;
    for (int i = 0; i < 5000 && closings < 6; i++) {
        enum gate_change c = look(GATE_MISS);
        if (c == GATE_CLOSED_MISSES) {
            closings++;
            closed_at = now;
            cr_expect_eq(gate.reopen_at - now, expected_backoff, "closing %d", closings);
            expected_backoff *= 2;
        } else if (c == GATE_REOPENED) {
            cr_expect_eq(now - closed_at, expected_backoff / 2);
        }
    }
    cr_expect_eq(closings, 6);
}

Test(gate, closed_gate_ignores_looks_and_reopens_on_time)
{
    for (int i = 0; i < GATE_WINDOW - 1; i++)
        look(GATE_MISS);
    cr_assert_eq(look(GATE_MISS), GATE_CLOSED_MISSES);
    unsigned long reopen = gate.reopen_at;
    enum gate_change c;
    cr_expect_eq(gate_open(&gate, reopen - 1, &c), 0);
    cr_expect_eq(gate_record(&gate, GATE_HIT, 100, reopen - 1), GATE_SAME);
    cr_expect_eq(gate_open(&gate, reopen, &c), 1);
    cr_expect_eq(c, GATE_REOPENED);
    cr_expect_eq(gate.hits + gate.misses, 0);
}

Test(gate, failures_that_cost_more_than_hits_saved_close_early)
{
    cr_expect_eq(look(GATE_FAILED), GATE_SAME);
    cr_expect_eq(look(GATE_FAILED), GATE_SAME);
    cr_expect_eq(look(GATE_FAILED), GATE_CLOSED_COST, "three failures and nothing saved");
    cr_expect_eq(gate.reopen_at - now, GATE_BACKOFF_FIRST);
    cr_expect_eq(gate.last_failures, GATE_FAILURES_EAGER);
    cr_expect_lt(gate.last_net_us, 0);
}

Test(gate, failures_that_cost_less_than_hits_saved_keep_it_open)
{
    /* Half the looks fail, each costing 50 us; each hit saves 100. */
    for (int i = 0; i < 10 * GATE_WINDOW; i++)
        cr_assert_eq(look(i % 2 ? GATE_FAILED : GATE_HIT), GATE_SAME, "look %d", i);
    cr_expect_eq(gate.closings, 0);
}

Test(gate, one_odd_capture_among_hits_never_closes_it)
{
    /* An odd iteration every 20, even one that costs a lot. */
    for (int i = 0; i < 20 * GATE_WINDOW; i++)
        cr_assert_eq(look_net(i % 20 == 7 ? GATE_FAILED : GATE_HIT, i % 20 == 7 ? -1500 : 100),
                     GATE_SAME, "look %d", i);
    cr_expect_eq(gate.closings, 0);
}

/* A window of hits with a costly failure every 16th look (never
 * GATE_FAILURES_EAGER with no hit), more costly in all than the hits
 * saved: it closes at its end. Returns the change of its last look. */
static enum gate_change costly_window(void)
{
    enum gate_change c = GATE_SAME;
    for (int i = 0; i < GATE_WINDOW && c == GATE_SAME; i++)
        c = look_net(i % 16 == 15 ? GATE_FAILED : GATE_HIT, i % 16 == 15 ? -2000 : 100);
    return c;
}

Test(gate, one_costly_failure_among_hits_that_save_little_never_closes_it)
{
    /* Recaptures that save nearly nothing each (a driver whose recapture
     * costs what a capture does), and one replay timed on a busy machine
     * per window: an odd capture, not a reason to stop. */
    for (int i = 0; i < 8 * GATE_WINDOW; i++)
        cr_assert_eq(look_net(i % GATE_WINDOW == 30 ? GATE_FAILED : GATE_HIT,
                              i % GATE_WINDOW == 30 ? -2400 : 1),
                     GATE_SAME, "look %d", i);
    cr_expect_eq(gate.closings, 0);
}

Test(gate, a_site_closed_for_its_cost_gets_a_full_window_to_refill)
{
    cr_assert_eq(costly_window(), GATE_CLOSED_COST);
    while (look(GATE_MISS) != GATE_REOPENED)
        ;
    /* A cycle of 8 shapes at 13.3: 16 misses (graph and executable graph
     * of each shape) before the first hit; then it pays. */
    for (int i = 0; i < 16; i++)
        cr_assert_eq(look(GATE_MISS), GATE_SAME, "miss %d of the refill", i);
    for (int i = 0; i < 2 * GATE_WINDOW; i++)
        cr_assert_eq(look(GATE_HIT), GATE_SAME, "hit %d", i);
    cr_expect_eq(gate.closings, 1);
}

Test(gate, a_window_whose_failures_cost_more_closes_at_its_end)
{
    cr_expect_eq(costly_window(), GATE_CLOSED_COST);
    cr_expect_eq(gate.last_hits + gate.last_failures, GATE_WINDOW);
}

Test(gate, a_good_window_resets_the_back_off)
{
    for (int i = 0; i < GATE_WINDOW; i++)
        look(GATE_MISS);
    while (look(GATE_HIT) != GATE_REOPENED)
        ;
    for (int i = 0; i < GATE_PROBE_WINDOW; i++)
        look(GATE_HIT);                        /* a good (probe) window */
    for (int i = 0; i < GATE_WINDOW - 1; i++)
        look(GATE_MISS);
    cr_assert_eq(look(GATE_MISS), GATE_CLOSED_MISSES);
    cr_expect_eq(gate.reopen_at - now, GATE_BACKOFF_FIRST);
}

Test(gate, back_off_is_bounded)
{
    for (int i = 0; i < 40; i++) {
        while (look(GATE_MISS) != GATE_CLOSED_MISSES)
            ;
        cr_assert_leq(gate.reopen_at - now, GATE_BACKOFF_MAX);
        now = gate.reopen_at - 1;
    }
}

Test(gate, an_object_over_the_budget_closes_at_once_with_the_back_off)
{
    look(GATE_MISS);
    cr_expect_eq(gate_close_over_budget(&gate, now, "executable graph", 90000, 65536),
                 GATE_CLOSED_OVER_BUDGET);
    cr_expect_eq(gate.reopen_at - now, GATE_BACKOFF_FIRST);
    cr_expect_eq(gate.over_bytes, 90000);
    cr_expect_eq(gate.over_budget, 65536);
    cr_expect_str_eq(gate.over_noun, "executable graph");
    /* Closed already: nothing more changes. */
    cr_expect_eq(gate_close_over_budget(&gate, now, "graph", 1, 1), GATE_SAME);
    cr_expect_eq(gate.closings, 1);
    /* It reopens after the back-off, and a second closing lasts twice as long. */
    while (look(GATE_MISS) != GATE_REOPENED)
        ;
    cr_expect_eq(gate_close_over_budget(&gate, now, "graph", 90000, 65536),
                 GATE_CLOSED_OVER_BUDGET);
    cr_expect_eq(gate.reopen_at - now, 2 * GATE_BACKOFF_FIRST);
}

Test(gate, a_site_that_still_misses_closes_after_a_short_probe)
{
    while (look(GATE_MISS) != GATE_CLOSED_MISSES)
        ;
    while (look(GATE_MISS) != GATE_REOPENED)
        ;
    int looks = 0;
    enum gate_change c = GATE_SAME;
    while (c == GATE_SAME) {
        c = look(GATE_MISS);
        looks++;
    }
    cr_expect_eq(c, GATE_CLOSED_MISSES);
    cr_expect_eq(looks, GATE_PROBE_WINDOW, "closed again after %d looks", looks);
    cr_expect_eq(gate.reopen_at - now, 2 * GATE_BACKOFF_FIRST);
}

Test(gate, a_site_that_pays_after_its_probe_goes_on_with_full_windows)
{
    while (look(GATE_MISS) != GATE_CLOSED_MISSES)
        ;
    while (look(GATE_MISS) != GATE_REOPENED)
        ;
    for (int i = 0; i < 3 * GATE_WINDOW; i++)
        cr_assert_eq(look(i % 3 ? GATE_HIT : GATE_MISS), GATE_SAME, "look %d", i);
    cr_expect_eq(gate.probing, 0);
}
