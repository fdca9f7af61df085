/*
 * predict.c - guessing a site's next graph shape (see predict.h).
 *
 * Owns: the ring of recent shapes and the rule that picks the next one.
 * Must never: allocate, lock, or take time that grows with anything but
 * PREDICT_HISTORY and max_period.
 *
 * The rule. Let a(k) be the k-th most recent shape (a(0) the last one) and
 * n the number of shapes held. For each period p in 1..max_period, run(p)
 * counts how far back the history agrees with itself shifted by p: the
 * largest r with a(k) == a(k + p) for all k < r. A period qualifies when
 * the last 2p shapes repeat (run(p) >= p) or, early on, when all the
 * history there is agrees with it (run(p) == n - p > 0). Among qualifying
 * periods the one with the longest run wins, the smaller on a tie, and the
 * prediction is a(p - 1), the shape that followed the same point one
 * period ago.
 *
 * Why the longest run and not simply the smallest period whose last 2p
 * shapes repeat: in A,A,B,A,A,B the last two shapes are often A,A, so
 * period 1 would qualify and mispredict every B. In a sequence of true
 * period P, a shorter period p agrees for fewer than P - gcd(p, P) steps
 * (Fine and Wilf), while P agrees over the whole periodic stretch, so once
 * two cycles have been seen P has the strictly longest run and every
 * capture is predicted right, even when older, unrelated shapes precede
 * the cycle.
 *
 * When no period qualifies (a new shape appeared), the prediction is the
 * shape that followed the most recent earlier occurrence of the current
 * shape, else the current shape itself: after a permanent switch from A to
 * B the first B predicts B, so the switch costs one miss.
 */
#include "policy/predict.h"

static uint64_t predict_at(const struct shape_history *h, unsigned long k)
{
    return h->ring[(h->count - 1 - k) % PREDICT_HISTORY];
}

void predict_record(struct shape_history *h, uint64_t shape)
{
    h->ring[h->count % PREDICT_HISTORY] = shape;
    h->count++;
}

uint64_t predict_next(const struct shape_history *h, int max_period)
{
    if (h->count == 0)
        return 0;
    unsigned long n = h->count < PREDICT_HISTORY ? h->count : PREDICT_HISTORY;
    if (max_period < 1)
        max_period = 1;
    if ((unsigned long)max_period > PREDICT_HISTORY / 2)
        max_period = PREDICT_HISTORY / 2;

    unsigned long best_p = 0, best_run = 0;
    for (unsigned long p = 1; p <= (unsigned long)max_period && p < n; p++) {
        unsigned long run = 0;
        while (run + p < n && predict_at(h, run) == predict_at(h, run + p))
            run++;
        int qualifies = run >= p || (run == n - p && run > 0);
        if (qualifies && run > best_run) {
            best_run = run;
            best_p = p;
        }
    }
    if (best_p != 0)
        return predict_at(h, best_p - 1);

    uint64_t current = predict_at(h, 0);
    for (unsigned long k = 1; k < n; k++)
        if (predict_at(h, k) == current)
            return predict_at(h, k - 1);
    return current;
}
