/*
 * runtime.h - recap's process-wide state (module prefix runtime_).
 *
 * Owns: the settings read once at start, the decision "is recap off", the
 * start and end of the log, the exit and fork handlers, and the verbose
 * channel on stderr. Must never: call the driver at exit (the runtime may
 * already have torn it down), or read the environment after start.
 */
#ifndef RECAP_RUNTIME_H
#define RECAP_RUNTIME_H

#include "policy/settings.h"

extern struct recap_settings runtime_settings;

/* Nonzero when recap does nothing but forward: RECAP_MODE=off, or no usable
 * driver. Read on hot paths; written once before drv_loaded is published. */
extern int runtime_passthrough;

/* Called once by drv_load() after the driver is known. */
void runtime_start(void);

/* "recap: ..." on stderr when RECAP_VERBOSE=1 (one write). */
void runtime_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Microseconds on the monotonic clock. */
double runtime_now_us(void);

#endif
