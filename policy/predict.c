/*
 * predict.c - guessing a site's next graph shape (see predict.h).
 *
 * Owns: the ring of recent shapes and the rule that picks the next one.
 * Must never: allocate, lock, or take time that grows with anything but
 * PREDICT_HISTORY and max_period.
 *
 * run(p) is kept for the periods up to twice the working set as each
 * shape is recorded (one comparison a period), so a prediction reads
 * numbers instead of scanning the history once a period: the scan cost a
 * steady site 67 ns a capture (tests/unit/bench_predict.c). A longer
 * period, asked for before the working set grew to it, is scanned. The
 * search stops as soon as no longer period can win. Callers bound
 * max_period by twice the working set: with a longer one, a single odd
 * shape in a steady history (A,A,A,A,B,A,A,A,A) would qualify early as a
 * period of 5 and predict B.
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
 * shape. When the current shape never occurred before there is no
 * prediction (0): guessing it repeats would, in the first pass of a
 * cycle, take a graph of the wrong shape and fail the recapture every
 * time, which costs more than a plain capture. A permanent switch from A
 * to B thus costs two plain captures, then B, B predicts B. The very
 * first shape of a site predicts itself.
 */
#include "policy/predict.h"

static uint64_t predict_at(const struct shape_history *h, unsigned long k)
{
    return h->ring[(h->count - 1 - k) % PREDICT_HISTORY];
}

/* run(p) of the rule, counted from the history: the largest r with
 * a(k) == a(k + p) for all k < r, within the n shapes held. */
static unsigned long run_scanned(const struct shape_history *h, unsigned long p, unsigned long n)
{
    unsigned long run = 0;
    while (run + p < n && predict_at(h, run) == predict_at(h, run + p))
        run++;
    return run;
}

static unsigned long shapes_held(const struct shape_history *h)
{
    return h->count < PREDICT_HISTORY ? h->count : PREDICT_HISTORY;
}

/* Keeps `distinct` for the window as it slides by one: the new shape
 * counts if the shapes staying in the window lack it, the one leaving stops
 * counting if the window, new shape included, no longer has it. Two passes
 * over PREDICT_WINDOW shapes, no allocation. Then keeps run(p) for the
 * periods up to twice the working set. */
void predict_record(struct shape_history *h, uint64_t shape)
{
    unsigned long held = h->count < PREDICT_WINDOW ? h->count : PREDICT_WINDOW;
    unsigned long staying = held < PREDICT_WINDOW ? held : PREDICT_WINDOW - 1;
    int seen = 0;
    for (unsigned long k = 0; k < staying && !seen; k++)
        seen = predict_at(h, k) == shape;
    if (!seen)
        h->distinct++;
    if (held == PREDICT_WINDOW) {
        uint64_t leaving = predict_at(h, PREDICT_WINDOW - 1);
        int still = leaving == shape;
        for (unsigned long k = 0; k < staying && !still; k++)
            still = predict_at(h, k) == leaving;
        if (!still)
            h->distinct--;
    }
    /* The new shape extends run(p) when it equals the shape p before it.
     * run(p) never exceeds the pairs the history holds, n - p: when the
     * ring is full the oldest pair leaves as the new one comes. */
    unsigned long n = h->count + 1 < PREDICT_HISTORY ? h->count + 1 : PREDICT_HISTORY;
    for (unsigned long p = 1; p <= h->runs_kept; p++) {
        unsigned long run = 0;
        if (p <= h->count && predict_at(h, p - 1) == shape) {
            run = h->run[p - 1] + 1ul;
            if (run > n - p)
                run = n - p;
        }
        h->run[p - 1] = (unsigned char)run;
    }
    h->ring[h->count % PREDICT_HISTORY] = shape;
    h->count++;
    /* Periods up to twice the working set are what callers ask for; one
     * newly kept is counted once from the history. */
    unsigned long want = 2ul * (unsigned long)predict_working_set(h);
    if (want > PREDICT_MAX_PERIOD)
        want = PREDICT_MAX_PERIOD;
    for (unsigned long p = h->runs_kept + 1; p <= want; p++)
        h->run[p - 1] = (unsigned char)run_scanned(h, p, n);
    if (want > h->runs_kept)
        h->runs_kept = (unsigned)want;
}

int predict_working_set(const struct shape_history *h)
{
    return h->distinct > 0 ? h->distinct : 1;
}

uint64_t predict_next(const struct shape_history *h, int max_period)
{
    if (h->count == 0)
        return 0;
    unsigned long n = shapes_held(h);
    if (max_period < 1)
        max_period = 1;
    if (max_period > PREDICT_MAX_PERIOD)
        max_period = PREDICT_MAX_PERIOD;

    unsigned long best_p = 0, best_run = 0;
    for (unsigned long p = 1; p <= (unsigned long)max_period && p < n; p++) {
        /* run(p) <= n - p: once that cannot beat the best, no longer
         * period can either (a steady site stops after p = 1). */
        if (best_run >= n - p)
            break;
        unsigned long run = p <= h->runs_kept ? h->run[p - 1] : run_scanned(h, p, n);
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
    return n == 1 ? current : 0;
}
