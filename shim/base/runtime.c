/*
 * runtime.c - the state every module reads: the settings, whether recap
 * passes everything through, the verbose channel and the clock. A leaf:
 * it calls no other module of recap (lifecycle.c fills it at start).
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "policy/annotate.h"
#include "shim/base/runtime.h"

struct recap_settings runtime_settings;
int runtime_passthrough;

/* --- the clock ---------------------------------------------------------------------
 *
 * recap reads the clock twice a capture and twice an instantiation, for the
 * log's durations. clock_gettime(CLOCK_MONOTONIC) costs 40-50 ns in the
 * virtual machines GPUs are rented as (kvm-clock: scripts/bench-paired
 * prints it); the x86 time-stamp counter, read directly, costs a fraction
 * of that. Where the CPU declares the counter invariant (constant rate,
 * running in every power state) and reading it proves cheaper, the clock
 * is the counter, its rate measured against CLOCK_MONOTONIC once the
 * process has run CALIBRATION_US: an error of two clock readings over
 * that span, about 1e-5. Until then, and everywhere else, clock_gettime.
 */

#define CALIBRATION_US 20000.0

static double monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#if defined(__x86_64__)
enum tsc_state { TSC_UNKNOWN, TSC_CLAIMED, TSC_MEASURING, TSC_UNUSABLE };

static int tsc_state;                    /* enum tsc_state, atomic */
/* Written before TSC_MEASURING is published, read after the rate is:
 * atomically all the same, so that race detectors need not know that. */
static unsigned long long tsc_origin;
static double tsc_origin_us;
static double tsc_us_per_tick;           /* 0 until measured */

static int tsc_invariant(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
}

/* Whether 64 counter readings cost less than half of 64 clock readings. */
static int tsc_cheaper(void)
{
    volatile unsigned long long sink = 0;
    double t0 = monotonic_us();
    for (int i = 0; i < 64; i++)
        sink += __rdtsc();
    double t1 = monotonic_us();
    for (int i = 0; i < 64; i++)
        sink += (unsigned long long)monotonic_us();
    double t2 = monotonic_us();
    return (t1 - t0) * 2 < t2 - t1;
}

/* The first reading sets the origin; a reading CALIBRATION_US later, the
 * rate. Any thread may publish the rate: all measure the same thing. */
static void tsc_calibrate(double now_us)
{
    /* Every access to the four is atomic (helgrind cannot tell). */
    VALGRIND_HG_DISABLE_CHECKING(&tsc_state, sizeof tsc_state);
    VALGRIND_HG_DISABLE_CHECKING(&tsc_origin, sizeof tsc_origin);
    VALGRIND_HG_DISABLE_CHECKING(&tsc_origin_us, sizeof tsc_origin_us);
    VALGRIND_HG_DISABLE_CHECKING(&tsc_us_per_tick, sizeof tsc_us_per_tick);
    int state = __atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE);
    if (state == TSC_UNKNOWN) {
        if (!__atomic_compare_exchange_n(&tsc_state, &state, TSC_CLAIMED, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            return;
        if (!tsc_invariant() || !tsc_cheaper()) {
            __atomic_store_n(&tsc_state, TSC_UNUSABLE, __ATOMIC_RELEASE);
            return;
        }
        double origin_us = monotonic_us();
        __atomic_store_n(&tsc_origin, __rdtsc(), __ATOMIC_RELAXED);
        __atomic_store(&tsc_origin_us, &origin_us, __ATOMIC_RELAXED);
        __atomic_store_n(&tsc_state, TSC_MEASURING, __ATOMIC_RELEASE);
        return;
    }
    double origin_us;
    __atomic_load(&tsc_origin_us, &origin_us, __ATOMIC_RELAXED);
    if (state != TSC_MEASURING || now_us - origin_us < CALIBRATION_US)
        return;
    unsigned long long ticks = __rdtsc() - __atomic_load_n(&tsc_origin, __ATOMIC_RELAXED);
    double span_us = monotonic_us() - origin_us;
    if (ticks == 0 || span_us <= 0) {
        __atomic_store_n(&tsc_state, TSC_UNUSABLE, __ATOMIC_RELEASE);
        return;
    }
    double scale = span_us / (double)ticks;
    __atomic_store(&tsc_us_per_tick, &scale, __ATOMIC_RELEASE);
}

double runtime_now_us(void)
{
    double scale, origin_us;
    __atomic_load(&tsc_us_per_tick, &scale, __ATOMIC_ACQUIRE);
    if (__builtin_expect(scale > 0, 1)) {
        __atomic_load(&tsc_origin_us, &origin_us, __ATOMIC_RELAXED);
        /* Signed: a core whose counter lags the origin's by a few ticks
         * reads just before the origin, not 2^64 ticks after it. */
        long long ticks = (long long)(__rdtsc() - __atomic_load_n(&tsc_origin, __ATOMIC_RELAXED));
        return origin_us + (double)ticks * scale;
    }
    double now = monotonic_us();
    if (__atomic_load_n(&tsc_state, __ATOMIC_RELAXED) != TSC_UNUSABLE)
        tsc_calibrate(now);
    return now;
}
#else
double runtime_now_us(void)
{
    return monotonic_us();
}
#endif

void runtime_verbose(const char *fmt, ...)
{
    if (!runtime_settings.verbose)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "recap: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t ignored = write(2, line, (size_t)n);
    (void)ignored;
}
