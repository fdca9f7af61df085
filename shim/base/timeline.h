/*
 * timeline.h - a site's whole run in fixed space (module prefix timeline_):
 * per window of consecutive captures, how many took each path and how many
 * instantiations of each kind followed, and the time both took.
 *
 * The log writes a site's routine events for its first 64 captures and
 * then at powers of two; the end event's totals are exact but have no
 * time in them. A timeline is what lies between: `recap report --html`
 * draws a site's lane from its logged events and its timeline (one
 * "timeline" event per site at exit). Windows start one capture wide and
 * double, two merging into one, whenever the captures outgrow
 * TIMELINE_WINDOWS of them.
 *
 * Owns: the counts, nothing else. Must never: allocate, lock (the caller
 * holds the site's lock), or call the driver.
 */
#ifndef RECAP_TIMELINE_H
#define RECAP_TIMELINE_H

#include <stdint.h>

#include "shim/base/jlog.h"

#define TIMELINE_WINDOWS 32

/* Capture paths as the log names them; a recapture counts by who recorded
 * it. Instantiations likewise. */
enum timeline_capture { TIMELINE_BY_RECAP, TIMELINE_BY_DRIVER, TIMELINE_FALLBACK,
                        TIMELINE_FRESH, TIMELINE_OBSERVE, TIMELINE_CAPTURE_KINDS };
enum timeline_inst { TIMELINE_NEW, TIMELINE_UPDATE, TIMELINE_DELTA, TIMELINE_REUSE,
                     TIMELINE_INST_KINDS };

struct timeline {
    unsigned long window;       /* captures per window; 0 before the first */
    unsigned long last;         /* the highest capture seq counted */
    uint32_t captures[TIMELINE_CAPTURE_KINDS][TIMELINE_WINDOWS];
    uint32_t insts[TIMELINE_INST_KINDS][TIMELINE_WINDOWS];
    double capture_us[TIMELINE_WINDOWS], inst_us[TIMELINE_WINDOWS];
};

/* Counts the capture numbered seq (from 1) of path "recapture", "fresh",
 * "fallback" or "observe" (by: "recap" or "driver" for a recapture) and its
 * time. Any other path, or seq 0, is not counted. */
void timeline_capture(struct timeline *t, unsigned long seq, const char *path, const char *by,
                      double us);

/* Counts an instantiation of how "new", "update", "delta" or "reuse" made
 * when the site had begun seq captures, and its time. */
void timeline_instantiation(struct timeline *t, unsigned long seq, const char *how, double us);

/* Writes the timeline's keys into l: window (captures per window), windows
 * (how many hold captures), then an array per capture path and
 * instantiation kind that is not all zero ("by_recap", "by_driver",
 * "fallback", "fresh", "observe", "new", "update", "delta", "reuse"; one
 * count per window) and "capture_us", "inst_us" (whole microseconds per
 * window). Nothing when no capture was counted. */
void timeline_json(struct jlog_line *l, const struct timeline *t);

#endif
