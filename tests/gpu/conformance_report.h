/*
 * conformance_report.h - the output of recapture_conformance.c: one CHECK
 * line per point, the knob values of the stand-in each observation agrees
 * with, and the SETTINGS line that sums them up.
 *
 * Owns: the list of the stand-in's knobs that model an undocumented reading
 * (tests/standin/READINGS.md), the intersection of the values each check
 * allows, and the count of points no setting reproduces. Must never decide
 * what a driver did: the checks pass it what they saw. Included once, by
 * recapture_conformance.c, after cuda.h.
 */
#ifndef RECAP_CONFORMANCE_REPORT_H
#define RECAP_CONFORMANCE_REPORT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECKED(call)                                                                    \
    do {                                                                                 \
        CUresult checked_rc_ = (call);                                                   \
        if (checked_rc_ != CUDA_SUCCESS) {                                               \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,         \
                    err_name(checked_rc_));                                              \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const char *err_name(CUresult rc)
{
    static char buf[8][48];
    static int slot;
    const char *name = NULL;
    if (rc == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE) return "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE(918)";
    char *out = buf[slot++ % 8];
    if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name) name = "CUresult";
    snprintf(out, sizeof(buf[0]), "%s(%d)", name, (int)rc);
    return out;
}

/* ------------------------------------------------------------------ */
/* Reporting: each check names the knob values it is compatible with.  */

enum { KNOB_FAILURE, KNOB_NULL_CALLBACK, KNOB_CALLBACK, KNOB_COUNT };
static const struct {
    const char *name;
    const char *values[3];
} knobs[KNOB_COUNT] = {
    {"STANDIN_RECAPTURE_FAILURE", {"call", "later", "end"}},
    {"STANDIN_NULL_CALLBACK", {"accept", "reject", NULL}},
    {"STANDIN_RECAPTURE_CALLBACK", {"changed", "every", NULL}},
};
static unsigned knob_ok[KNOB_COUNT] = {7, 3, 3}; /* bit i: values[i] still possible */
static int checks, unmodelled;

static void say_check(const char *name, const char *seen, const char *setting)
{
    checks++;
    printf("CHECK %-26s %s; real driver: %s\n", name, seen, setting);
}

/* A point with a knob: `mask` is the set of knob values the observation
 * agrees with (0: none). */
static void check_knob(const char *name, const char *seen, int knob, unsigned mask)
{
    char setting[160] = "";
    knob_ok[knob] &= mask;
    if (!mask) {
        unmodelled++;
        snprintf(setting, sizeof setting, "NOT MODELLED (no value of %s gives this)", knobs[knob].name);
    } else {
        for (int i = 0; i < 3 && knobs[knob].values[i]; i++) {
            if (!(mask & (1u << i))) continue;
            size_t n = strlen(setting);
            snprintf(setting + n, sizeof setting - n, "%s%s=%s", n ? " or " : "", knobs[knob].name,
                     knobs[knob].values[i]);
        }
    }
    say_check(name, seen, setting);
}

/* A point the stand-in models one way: does the driver agree? */
static void check_fixed(const char *name, const char *seen, int agrees, const char *standin)
{
    char setting[200];
    if (agrees) snprintf(setting, sizeof setting, "as modelled (%s)", standin);
    else snprintf(setting, sizeof setting, "NOT MODELLED (the stand-in: %s)", standin);
    unmodelled += !agrees;
    say_check(name, seen, setting);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    static char buf[8][256];
    static int slot;
    char *out = buf[slot++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(out, sizeof(buf[0]), f, ap);
    va_end(ap);
    return out;
}

/* Prints the SETTINGS line and the summary; returns the exit status. */
static int report_settings(void)
{
    int conflict = 0;
    printf("SETTINGS");
    for (int k = 0; k < KNOB_COUNT; k++) {
        int shown = 0;
        for (int i = 0; i < 3 && knobs[k].values[i]; i++) {
            if (!(knob_ok[k] & (1u << i))) continue;
            printf("%s%s=%s", shown ? "|" : " ", shown ? "" : knobs[k].name, knobs[k].values[i]);
            shown = 1;
        }
        if (!shown) printf(" %s=CONFLICT", knobs[k].name), conflict = 1;
    }
    printf("\nsummary: %d checks, %d not modelled by the stand-in%s\n", checks, unmodelled,
           conflict ? ", knob readings in conflict" : "");
    return unmodelled || conflict ? 1 : 0;
}

#endif
