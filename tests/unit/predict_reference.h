/*
 * predict_reference.h - predict.c's rule computed the direct way, by
 * scanning the history once per period (what predict_next did before it
 * kept run(p) as shapes are recorded): the reference the kept runs must
 * equal, and the baseline of their benchmark. Reads the history only.
 */
#ifndef RECAP_TEST_PREDICT_REFERENCE_H
#define RECAP_TEST_PREDICT_REFERENCE_H

#include "policy/predict.h"

static uint64_t reference_at(const struct shape_history *h, unsigned long k)
{
    return h->ring[(h->count - 1 - k) % PREDICT_HISTORY];
}

static uint64_t reference_next(const struct shape_history *h, int max_period)
{
    if (h->count == 0)
        return 0;
    unsigned long n = h->count < PREDICT_HISTORY ? h->count : PREDICT_HISTORY;
    if (max_period < 1)
        max_period = 1;
    if (max_period > PREDICT_MAX_PERIOD)
        max_period = PREDICT_MAX_PERIOD;
    unsigned long best_p = 0, best_run = 0;
    for (unsigned long p = 1; p <= (unsigned long)max_period && p < n; p++) {
        if (best_run >= n - p)
            break;
        unsigned long run = 0;
        while (run + p < n && reference_at(h, run) == reference_at(h, run + p))
            run++;
        if ((run >= p || (run == n - p && run > 0)) && run > best_run) {
            best_run = run;
            best_p = p;
        }
    }
    if (best_p != 0)
        return reference_at(h, best_p - 1);
    uint64_t current = reference_at(h, 0);
    for (unsigned long k = 1; k < n; k++)
        if (reference_at(h, k) == current)
            return reference_at(h, k - 1);
    return n == 1 ? current : 0;
}

#endif
