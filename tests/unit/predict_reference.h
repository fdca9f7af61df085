/*
 * predict_reference.h - run(p) of predict.c's rule counted the direct
 * way, by scanning the history: what the runs predict_record keeps must
 * equal. Reads the history only.
 */
#ifndef RECAP_TEST_PREDICT_REFERENCE_H
#define RECAP_TEST_PREDICT_REFERENCE_H

#include "policy/predict.h"

static uint64_t reference_at(const struct shape_history *h, unsigned long k)
{
    return h->ring[(h->count - 1 - k) % PREDICT_HISTORY];
}

/* The largest r with a(k) == a(k + p) for all k < r, within the shapes held. */
static unsigned long reference_run(const struct shape_history *h, unsigned long p)
{
    unsigned long n = h->count < PREDICT_HISTORY ? h->count : PREDICT_HISTORY;
    unsigned long run = 0;
    while (run + p < n && reference_at(h, run) == reference_at(h, run + p))
        run++;
    return run;
}

#endif
