/*
 * phase_clock.c - the step table of a measuring build (see phase_clock.h).
 *
 * Samples go into a ring per step by an atomic index, so threads may mark
 * at once; a sample being overwritten while another thread stores it is
 * one wrong sample among thousands, accepted in a build for measuring.
 * Cycles become ns by the counter's rate measured over the whole run
 * (between the constructor and the exit), against CLOCK_MONOTONIC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/base/phase_clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define PHASE_SAMPLES 16384

static const char *const step_names[PHASE_STEPS] = {
    "begin: find the stream",       "begin: stack",
    "begin: site",                  "begin: capture record",
    "begin: decide",                "begin: refusal check",
    "begin: start recording",       "begin recorded: total",
    "observe begin: claim",         "observe begin: driver",
    "observe end: find",            "observe end: driver",
    "observe end: release",         "observe end: node count",
    "observe end: count and log",   "end recorded: total",
    "instantiate: user objects",    "instantiate: held graph",
    "instantiate: take executable", "instantiate: bring up to date",
    "instantiate: adopt",           "instantiate: hand out or new",
    "instantiate: count and log",   "instantiate: total",
};

static unsigned samples[PHASE_STEPS][PHASE_SAMPLES];
static unsigned long counts[PHASE_STEPS];
static uint64_t start_cycles;
static double start_ns;

static double monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

uint64_t phase_clock_now(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return (uint64_t)monotonic_ns();
#endif
}

void phase_clock_add(enum phase_step step, uint64_t cycles)
{
    unsigned long n = __atomic_fetch_add(&counts[step], 1, __ATOMIC_RELAXED);
    samples[step][n % PHASE_SAMPLES] = cycles > 0xffffffffu ? 0xffffffffu : (unsigned)cycles;
}

__attribute__((constructor)) static void phase_clock_start(void)
{
    start_ns = monotonic_ns();
    start_cycles = phase_clock_now();
}

static int by_value(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

__attribute__((destructor)) static void phase_clock_print(void)
{
    uint64_t cycles = phase_clock_now() - start_cycles;
    double ns_per_cycle = cycles ? (monotonic_ns() - start_ns) / (double)cycles : 0.0;
    static unsigned sorted[PHASE_SAMPLES];
    fprintf(stderr, "recap phase clock (ns per step; a mark costs one counter read):\n");
    for (int s = 0; s < PHASE_STEPS; s++) {
        unsigned long n = counts[s] < PHASE_SAMPLES ? counts[s] : PHASE_SAMPLES;
        if (n == 0)
            continue;
        memcpy(sorted, samples[s], n * sizeof sorted[0]);
        qsort(sorted, n, sizeof sorted[0], by_value);
        double sum = 0;
        for (unsigned long i = 0; i < n; i++)
            sum += sorted[i];
        fprintf(stderr, "recap phase %-30s n=%-8lu median=%9.1f p90=%9.1f mean=%9.1f\n",
                step_names[s], counts[s], sorted[n / 2] * ns_per_cycle,
                sorted[n * 9 / 10] * ns_per_cycle, sum / (double)n * ns_per_cycle);
    }
}
