/*
 * runtime.h - recap's process-wide state (module prefix runtime_).
 *
 * Owns: the settings read once at start, the decision "is recap off", the
 * verbose channel on stderr and the clock. A leaf of the module graph that
 * every layer may read: it must never call another module of recap (the
 * start, exit and fork handlers that fill and use it are lifecycle.c's).
 */
#ifndef RECAP_RUNTIME_H
#define RECAP_RUNTIME_H

#include "policy/settings.h"

extern struct recap_settings runtime_settings;

/* Nonzero when recap does nothing but forward: RECAP_MODE=off, or no usable
 * driver. Read on hot paths; written once before lifecycle_started is
 * published. */
extern int runtime_passthrough;

/* "recap: ..." on stderr when RECAP_VERBOSE=1 (one write). */
void runtime_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Microseconds on the monotonic clock (its origin is arbitrary: only
 * differences mean anything); runtime.c says how it is read cheaply. */
double runtime_now_us(void);

/* Microseconds since `t0`, a reading of runtime_now_us: never negative,
 * even when the two readings came from counters of two cores a few ticks
 * apart (a thread that moved mid-capture). */
static inline double runtime_since_us(double t0)
{
    double d = runtime_now_us() - t0;
    return d > 0 ? d : 0;
}

#endif
