/*
 * lifecycle.h - recap's life inside a process (module prefix lifecycle_):
 * the top of the module graph.
 *
 * Owns: the one-time start at the first driver contact (load the driver,
 * read the settings into runtime.c's state, configure and open the log),
 * the exit handler (the "end" event) and the fork-child handler, which
 * calls each module's fork hook in order. Every other module is below it
 * and never calls it, except the entry points (generated wrappers,
 * interpose.c) that make sure recap has started. Must never: call the
 * driver at exit (the runtime may already have torn it down), or read the
 * environment after start.
 */
#ifndef RECAP_LIFECYCLE_H
#define RECAP_LIFECYCLE_H

/* Nonzero once recap has started (driver loaded, settings read), whether
 * it acts or passes everything through. */
extern int lifecycle_started;

/* Every entry point starts with this: a load and a branch once started. */
#define LIFECYCLE_ENSURE_STARTED()                                                  \
    do {                                                                            \
        if (__builtin_expect(!__atomic_load_n(&lifecycle_started, __ATOMIC_ACQUIRE), 0)) \
            lifecycle_start();                                                      \
    } while (0)

/* Loads the driver and starts recap, once per process; other threads wait,
 * and calls on the starting thread made while it starts return at once. */
void lifecycle_start(void);

/* A call that may destroy a context (cuCtxDestroy, the last
 * cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset) is about to run:
 * what recap keeps is destroyed while the context is alive, and the
 * records of handles the program holds are forgotten (they may die with
 * it, and the driver may give their values to new objects). Logged. */
void lifecycle_context_teardown(const char *call);

/* A module or library is about to be unloaded (cuModuleUnload,
 * cuLibraryUnload): the graphs and executable graphs recap keeps, which
 * may name its kernels, are destroyed first, while those kernels exist.
 * Logged when there were any. */
void lifecycle_code_unload(const char *call);

#endif
