/*
 * test_clock.c - shim/base/runtime.c's clock alone: whatever it reads (the
 * time-stamp counter once calibrated, else clock_gettime), it never runs
 * backwards on a thread and measures spans as CLOCK_MONOTONIC does, before
 * its calibration, across it and after it; and a duration taken with it
 * is never negative.
 */
#include <criterion/criterion.h>
#include <time.h>

#include "shim/base/runtime.h"


static double monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* A span of about `us` on both clocks. Each reading of recap's clock is
 * bracketed by two of CLOCK_MONOTONIC, so a thread preempted between
 * readings (a loaded machine) widens the bounds instead of failing: the
 * span must lie between the brackets' inner and outer spans, within 1 %
 * + 20 us. */
static void expect_span_agrees(long us, const char *when)
{
    double m0a = monotonic_us(), r0 = runtime_now_us(), m0b = monotonic_us();
    sleep_us(us);
    double m1a = monotonic_us(), r1 = runtime_now_us(), m1b = monotonic_us();
    double inner = m1a - m0b, outer = m1b - m0a, got = r1 - r0;
    cr_expect(got >= inner * 0.99 - 20 && got <= outer * 1.01 + 20,
              "%s: recap's clock measured %.1f us where CLOCK_MONOTONIC measured %.1f-%.1f",
              when, got, inner, outer);
}

Test(clock, spans_agree_with_the_monotonic_clock_across_calibration)
{
    expect_span_agrees(5000, "before calibration");
    expect_span_agrees(30000, "across calibration");   /* 20 ms after the first reading */
    for (int i = 0; i < 5; i++)
        expect_span_agrees(10000, "after calibration");
}

Test(clock, never_runs_backwards_on_a_thread)
{
    double last = runtime_now_us();
    double start = monotonic_us();
    long backwards = 0, n = 0;
    /* Long enough to cross the calibration, 20 ms after the first reading. */
    while (monotonic_us() - start < 60000) {
        for (int i = 0; i < 1000; i++, n++) {
            double now = runtime_now_us();
            backwards += now < last;
            last = now;
        }
    }
    cr_expect_eq(backwards, 0, "%ld of %ld readings went backwards", backwards, n);
}

Test(clock, a_duration_is_never_negative)
{
    double t0 = runtime_now_us();
    cr_expect_geq(runtime_since_us(t0), 0);
    sleep_us(1000);
    cr_expect_geq(runtime_since_us(t0), 900, "1 ms slept");
    /* A start read on a core whose counter runs ahead of this one's. */
    cr_expect_eq(runtime_since_us(runtime_now_us() + 5.0), 0);
}
