/*
 * timeline.c - a site's captures and instantiations per window of
 * captures (see timeline.h).
 */
#include "shim/base/timeline.h"

#include <string.h>

/* Two windows become one until seq fits; returns seq's window. */
static unsigned timeline_slot(struct timeline *t, unsigned long seq)
{
    if (t->window == 0)
        t->window = 1;
    while ((seq - 1) / t->window >= TIMELINE_WINDOWS) {
        for (unsigned i = 0; i < TIMELINE_WINDOWS / 2; i++) {
            for (unsigned k = 0; k < TIMELINE_CAPTURE_KINDS; k++)
                t->captures[k][i] = t->captures[k][2 * i] + t->captures[k][2 * i + 1];
            for (unsigned k = 0; k < TIMELINE_INST_KINDS; k++)
                t->insts[k][i] = t->insts[k][2 * i] + t->insts[k][2 * i + 1];
            t->capture_us[i] = t->capture_us[2 * i] + t->capture_us[2 * i + 1];
            t->inst_us[i] = t->inst_us[2 * i] + t->inst_us[2 * i + 1];
        }
        for (unsigned i = TIMELINE_WINDOWS / 2; i < TIMELINE_WINDOWS; i++) {
            for (unsigned k = 0; k < TIMELINE_CAPTURE_KINDS; k++)
                t->captures[k][i] = 0;
            for (unsigned k = 0; k < TIMELINE_INST_KINDS; k++)
                t->insts[k][i] = 0;
            t->capture_us[i] = t->inst_us[i] = 0;
        }
        t->window *= 2;
    }
    if (seq > t->last)
        t->last = seq;
    return (unsigned)((seq - 1) / t->window);
}

static int timeline_capture_kind(const char *path, const char *by)
{
    if (strcmp(path, "recapture") == 0)
        return by != NULL && strcmp(by, "recap") == 0 ? TIMELINE_BY_RECAP : TIMELINE_BY_DRIVER;
    if (strcmp(path, "fallback") == 0)
        return TIMELINE_FALLBACK;
    if (strcmp(path, "fresh") == 0)
        return TIMELINE_FRESH;
    if (strcmp(path, "observe") == 0)
        return TIMELINE_OBSERVE;
    return -1;
}

void timeline_capture(struct timeline *t, unsigned long seq, const char *path, const char *by,
                      double us)
{
    int kind = path != NULL ? timeline_capture_kind(path, by) : -1;
    if (kind < 0 || seq == 0)
        return;
    unsigned w = timeline_slot(t, seq);
    t->captures[kind][w]++;
    t->capture_us[w] += us > 0 ? us : 0;
}

void timeline_instantiation(struct timeline *t, unsigned long seq, const char *how, double us)
{
    static const char *const names[TIMELINE_INST_KINDS] = {
        [TIMELINE_NEW] = "new", [TIMELINE_UPDATE] = "update", [TIMELINE_DELTA] = "delta",
        [TIMELINE_REUSE] = "reuse",
    };
    if (how == NULL || seq == 0)
        return;
    for (unsigned k = 0; k < TIMELINE_INST_KINDS; k++) {
        if (strcmp(how, names[k]) == 0) {
            unsigned w = timeline_slot(t, seq);
            t->insts[k][w]++;
            t->inst_us[w] += us > 0 ? us : 0;
            return;
        }
    }
}

static void timeline_counts(struct jlog_line *l, const char *key, const uint32_t *n,
                            unsigned windows)
{
    unsigned i;
    for (i = 0; i < windows && n[i] == 0; i++)
        ;
    if (i == windows)
        return;
    jlog_array_begin(l, key);
    for (i = 0; i < windows; i++)
        jlog_u64(l, NULL, n[i]);
    jlog_array_end(l);
}

static void timeline_times(struct jlog_line *l, const char *key, const double *us,
                           unsigned windows)
{
    jlog_array_begin(l, key);
    for (unsigned i = 0; i < windows; i++)
        jlog_u64(l, NULL, (uint64_t)(us[i] + 0.5));
    jlog_array_end(l);
}

void timeline_json(struct jlog_line *l, const struct timeline *t)
{
    static const char *const capture_keys[TIMELINE_CAPTURE_KINDS] = {
        [TIMELINE_BY_RECAP] = "by_recap", [TIMELINE_BY_DRIVER] = "by_driver",
        [TIMELINE_FALLBACK] = "fallback", [TIMELINE_FRESH] = "fresh",
        [TIMELINE_OBSERVE] = "observe",
    };
    static const char *const inst_keys[TIMELINE_INST_KINDS] = {
        [TIMELINE_NEW] = "new", [TIMELINE_UPDATE] = "update", [TIMELINE_DELTA] = "delta",
        [TIMELINE_REUSE] = "reuse",
    };
    if (t->window == 0)
        return;
    unsigned windows = (unsigned)((t->last - 1) / t->window + 1);
    jlog_u64(l, "window", t->window);
    jlog_u64(l, "windows", windows);
    for (unsigned k = 0; k < TIMELINE_CAPTURE_KINDS; k++)
        timeline_counts(l, capture_keys[k], t->captures[k], windows);
    for (unsigned k = 0; k < TIMELINE_INST_KINDS; k++)
        timeline_counts(l, inst_keys[k], t->insts[k], windows);
    timeline_times(l, "capture_us", t->capture_us, windows);
    timeline_times(l, "inst_us", t->inst_us, windows);
}
