/*
 * phase_clock.h - recap's own time per step of a capture and of an
 * instantiation, for measuring (module prefix phase_clock_).
 *
 * Owns: a fixed table of steps, each a ring of the last samples in cycles
 * of the CPU's counter, filled where PHASE_MARK is placed, and the table
 * printed on stderr at exit: per step the samples' median, 90th percentile
 * and mean in ns. Compiled in only by `meson setup -Dphase_clock=true`:
 * every mark reads the counter (15-20 ns on the H200's host), so that
 * build is for measuring recap, never for running programs; in the normal
 * build every macro here is empty. A mark's time is from the mark before
 * it in the same function, so a step that is missing from the table did
 * not run (another path was taken). Must never: allocate, lock or call
 * the driver while a program runs (the table is read only at exit).
 */
#ifndef RECAP_PHASE_CLOCK_H
#define RECAP_PHASE_CLOCK_H

enum phase_step {
    PHASE_BEGIN_FIND_STREAM,     /* is the stream already capturing */
    PHASE_BEGIN_STACK,           /* the caller's stack (memo or unwind) */
    PHASE_BEGIN_SITE,            /* site id and record */
    PHASE_BEGIN_RECORD,          /* a capture record */
    PHASE_BEGIN_DECIDE,          /* predicted shape, cached graph taken */
    PHASE_BEGIN_REFUSAL,         /* may recap answer the begin (a driver query) */
    PHASE_BEGIN_RECORDING,       /* recording started, capture registered */
    PHASE_BEGIN_RECORDED_TOTAL,  /* a begin recap answered, entry to return */
    PHASE_OBSERVE_BEGIN_CLAIM,   /* observed capture: clock, slot */
    PHASE_OBSERVE_BEGIN_DRIVER,  /* observed capture: the driver's begin */
    PHASE_OBSERVE_END_FIND,      /* observed capture: its slot */
    PHASE_OBSERVE_END_DRIVER,    /* observed capture: the driver's end */
    PHASE_OBSERVE_END_RELEASE,   /* observed capture: slot released */
    PHASE_OBSERVE_END_NODES,     /* observed capture: node count */
    PHASE_OBSERVE_END_COUNT,     /* observed capture: site totals and log */
    PHASE_END_RECORDED_TOTAL,    /* an end recap answered, entry to return */
    PHASE_INST_USER_OBJECTS,     /* user objects whose launches completed */
    PHASE_INST_HELD_GRAPH,       /* the graph's record, its shape checked */
    PHASE_INST_TAKE_EXEC,        /* a released executable graph of the shape */
    PHASE_INST_SYNC_EXEC,        /* brought up to the graph (setters, update) */
    PHASE_INST_ADOPT,            /* user objects moved to the executable graph */
    PHASE_INST_HAND_OUT,         /* handed out, or instantiated anew */
    PHASE_INST_COUNT,            /* site totals and log */
    PHASE_INST_TOTAL,            /* a tracked graph's instantiation, entry to return */
    PHASE_STEPS
};

#ifdef RECAP_PHASE_CLOCK
#include <stdint.h>

uint64_t phase_clock_now(void);
void phase_clock_add(enum phase_step step, uint64_t cycles);

/* A reading named `var`, to measure from. */
#define PHASE_MARK_START(var) const uint64_t var = phase_clock_now()
/* A reading named `var`; the time since `from` is a sample of `step`. */
#define PHASE_MARK(step, from, var)                                                        \
    const uint64_t var = phase_clock_now();                                                \
    phase_clock_add(step, var - (from))
#else
#define PHASE_MARK_START(var) ((void)0)
#define PHASE_MARK(step, from, var) ((void)0)
#endif

#endif
