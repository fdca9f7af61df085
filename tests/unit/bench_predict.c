/*
 * bench_predict.c - what predicting a site's next shape costs per
 * capture: predict_next reading the runs kept as shapes are recorded, plus
 * predict_record (which keeps them), against predict_next scanning the
 * history once per period as it did before (with no period kept, it scans
 * them all) plus the same record, in one run. Histories: steady, cycles of 3 and 8 shapes, asked
 * with max_period twice the working set, as capture.c asks. Run with
 * `meson test -C build --benchmark` or directly; prints ns per capture and
 * the ratio kept / scanned.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "policy/predict.h"

static volatile uint64_t sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per capture: a prediction (kept runs or scan), then the record. */
static double per_capture(int cycle, int scanned)
{
    enum { WARM = 300, CAPTURES = 400000 };
    struct shape_history h;
    memset(&h, 0, sizeof h);
    for (int i = 0; i < WARM; i++)
        predict_record(&h, 1 + (uint64_t)(i % cycle));
    double t0 = now_ns();
    for (int i = WARM; i < WARM + CAPTURES; i++) {
        int max_period = 2 * predict_working_set(&h);
        unsigned kept = h.runs_kept;
        if (scanned)
            h.runs_kept = 0;
        sink += predict_next(&h, max_period);
        h.runs_kept = kept;
        predict_record(&h, 1 + (uint64_t)(i % cycle));
    }
    return (now_ns() - t0) / CAPTURES;
}

int main(void)
{
    static const int cycles[] = { 1, 3, 8 };
    for (size_t c = 0; c < sizeof cycles / sizeof cycles[0]; c++) {
        double best_kept = 1e9, best_scanned = 1e9;
        for (int round = 0; round < 5; round++) {   /* alternating; the fastest of each */
            double k = per_capture(cycles[c], 0), s = per_capture(cycles[c], 1);
            best_kept = k < best_kept ? k : best_kept;
            best_scanned = s < best_scanned ? s : best_scanned;
        }
        printf("cycle of %d: kept runs %.1f ns per capture, scan %.1f ns, kept/scan %.3f\n",
               cycles[c], best_kept, best_scanned, best_kept / best_scanned);
    }
    return 0;
}
