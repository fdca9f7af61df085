/*
 * step_time.h - where a site's step time goes (module prefix step_).
 *
 * Owns: per capture site, the time from one capture's begin to the next
 * begin there (the iteration period: a sum and a count), and what recap
 * saw inside those periods, each as calls and time: the site's captures
 * (begin to end), instantiations of its graphs, launches of executable
 * graphs made from them, and the driver calls the program made between
 * captures that the generated wrappers time (driver_api.def, modifier
 * +time=K: device and host allocations and frees, synchronisations).
 * Also a map from graph and executable-graph handles to the site they
 * came from, for instantiations and launches of graphs recap does not
 * otherwise track.
 *
 * What falls in a period: everything is first counted as pending at its
 * site and moves into the site's totals at the site's next capture begin,
 * with the period it fell in; what follows a site's last begin (the last
 * step, the program's teardown) is never counted, so the totals describe
 * exactly the periods they sit beside. A timed call goes to the site
 * whose capture began last on the calling thread, else (a thread that
 * never began one) the site of the process's latest begin; before any
 * capture, nowhere. A call made while that site has a capture open (on
 * any thread) is part of the capture's time and is not counted again.
 *
 * Must never: take a lock, allocate, or call the driver - the timed
 * wrappers run it on calls recap does not act on, and its cost there is a
 * thread-local load, a shared load and two clock readings
 * (runtime_now_us, the time-stamp counter where it is usable); counters
 * are relaxed atomics, the handle map lock-free.
 */
#ifndef RECAP_STEP_TIME_H
#define RECAP_STEP_TIME_H

#include <stdint.h>

/* What a site's step time is spent on, as recap sees it. The order is the
 * log's (events.c) and driver_api.def's +time=K names the last six. */
enum step_class {
    STEP_CAPTURE,        /* a capture, begin to end */
    STEP_INSTANTIATE,    /* an instantiation (or recap's update in its place) */
    STEP_LAUNCH,         /* cuGraphLaunch of an executable graph from the site */
    STEP_ALLOC,          /* device memory allocated (cuMemAlloc, ...Async, cuMemCreate) */
    STEP_FREE,           /* device memory freed */
    STEP_HOST_ALLOC,     /* host memory pinned (cuMemHostAlloc, cuMemAllocHost, ...Register) */
    STEP_HOST_FREE,      /* pinned host memory freed */
    STEP_SYNC,           /* a context, stream or event synchronisation */
    STEP_CLASSES
};

/* Calls and their time in nanoseconds. */
struct step_tally {
    uint64_t calls, ns;
};

/* One site's accounting, a member of struct site; zero is its start.
 * Every field is an atomic, written without the site's lock. */
struct step_site {
    uint64_t last_begin_ns;     /* the latest capture begin here; 0: none yet */
    uint64_t periods;           /* begin to next begin, counted ... */
    uint64_t period_ns;         /* ... and summed */
    int open;                   /* captures begun here and not ended */
    struct step_tally pending[STEP_CLASSES];    /* since the latest begin */
    struct step_tally done[STEP_CLASSES];       /* within the counted periods */
};

/* What the log writes of a site (or of all sites, summed). */
struct step_totals {
    uint64_t periods, period_ns;
    struct step_tally by_class[STEP_CLASSES];
};

/* Once, before any other call (the lifecycle's start): helgrind, which
 * models no atomics, is told to leave the module's own atomics alone. */
void step_init(void);

/* A site's accounting is new (before the site is published): the same
 * for its atomics. */
void step_site_init(struct step_site *s);

/* The log's name of a class ("capture", "alloc", ...). */
const char *step_class_name(enum step_class c);

/* A capture at the site began at `t0_us` (runtime_now_us) on this thread:
 * closes the period since the site's previous begin, and makes the site
 * this thread's (and the process's latest) for timed calls. */
void step_capture_began(struct step_site *s, double t0_us);

/* ... but the driver refused it: it is not open. */
void step_capture_refused(struct step_site *s);

/* A capture at the site ended (on any thread) after `us`. */
void step_capture_ended(struct step_site *s, double us);

/* Counts one call of that class and time at the site. */
void step_add(struct step_site *s, enum step_class c, double us);

/* --- the timed wrappers (driver_api.def +time=K) -------------------------------
 * step_open gives the site to count a call of class c at, or NULL: no site
 * yet, the site's capture is open, or (STEP_LAUNCH) `exec` came from no
 * site. The wrapper reads runtime_now_us before the call and hands it to
 * step_close after. */
struct step_site *step_open(enum step_class c, const void *exec);
void step_close(struct step_site *s, enum step_class c, double t0_us);

/* --- handles: which site a graph or executable graph came from ----------------
 * At most STEP_MAP_SLOTS handles at once; one that finds no room within
 * STEP_MAP_PROBES slots of its place is not followed (its launches are
 * not counted). */
#define STEP_MAP_SLOTS 4096
#define STEP_MAP_PROBES 32

/* The program holds `handle` (a CUgraph or CUgraphExec), made from the
 * site's capture. */
void step_note_handle(const void *handle, struct step_site *s);

/* The program destroyed `handle`: forgotten if it was noted. */
void step_forget_handle(const void *handle);

/* The site `handle` was noted with, or NULL. */
struct step_site *step_handle_site(const void *handle);

/* The site's totals: the counted periods and what fell in them. */
void step_totals_of(const struct step_site *s, struct step_totals *out);

/* Adds one site's totals to a sum. */
void step_totals_add(struct step_totals *sum, const struct step_totals *t);

/* In a fork child: the parent's sites are gone; nothing is followed. */
void step_after_fork_child(void);

#endif
