/*
 * events.h - the events of the per-run log (module prefix event_).
 *
 * Owns: the schema of each event (which keys, in which order) and the
 * "start" line that opens each process's log. jlog.c owns the writing.
 * Must never: call the driver or take a site's lock (callers pass what
 * the event needs; end totals are read without locks at exit).
 */
#ifndef RECAP_EVENTS_H
#define RECAP_EVENTS_H

#include "policy/reuse_gate.h"
#include "policy/site.h"

struct site;

/* A log line per capture and per instantiation costs a write(2) each, which
 * a loop of small graphs would feel. So routine events - the same path (or
 * how) and reason as the site's previous event, and a success - are written
 * for a site's first EVENT_ROUTINE_FULL captures, then at every power of
 * two; everything else is always written, and the end event carries the
 * exact totals. Verbose stderr lines are never sampled. */
#define EVENT_ROUTINE_FULL 64

/* Whether an event of this kind, path/how and reason, numbered seq at its
 * site, is written; updates *last_key. `what` is a name from a fixed table
 * (path or how names), told apart by its address; the reason by its text.
 * Caller holds the site's lock. */
int event_worth_writing(uint64_t *last_key, const char *what, const char *reason,
                        unsigned long seq, int failed);

struct capture_report {
    const struct site *site;
    unsigned long seq;
    const char *path;          /* recapture, fresh, fallback, observe */
    const char *reason;        /* NULL when path is recapture */
    const char *by;            /* recapture only: "driver" or "recap" */
    long nodes;                /* -1: unknown (capture failed) */
    unsigned long changed, eligible, ineligible, errors;
    double us;
    int result;                /* CUresult the program saw from the end */
    int candidates;            /* kept graphs it was matched against (or recaptured into) */
    uint64_t kind;             /* its signature, else shape; 0: not known (not logged) */
    const char *switch_call;   /* the call at which it switched to a driver capture */
    double wasted_us;          /* what its switch cost (the replay), not logged */
    int matched_none;          /* it switched for want of a kept graph of its kind: a miss */
    int write;                 /* to the log (verbose lines always) */
};

void event_start(void);
void event_site(const struct site *site, const struct site_stack *stack);
void event_capture(const struct capture_report *r);
void event_instantiate(const struct site *site, unsigned long seq, const char *how,
                       const char *reason, double us, int write);
/* A site stopped keeping and looking ("stopped", for `backoff` captures)
 * or tried again ("resumed"), and why. */
/* Logs a change of a site's reuse gate ("reuse" event: stopped, with the
 * reason and back-off, or resumed). */
void event_reuse_gate(struct site *site, enum gate_change change);
/* The site's shapes count node types from now on (exec_reuse.c). */
void event_reuse_shapes_typed(const struct site *site, const char *why);
void event_warning(const struct site *site, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void event_error(const struct site *site, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* What modules beside and above this one report at exit (the cache, the
 * interposition): the lifecycle gathers it, so events never calls them. */
/* What recap did with pinned host memory (shim/state/kept_host.h counts
 * it), for the end event's totals. */
struct event_host_memory {
    unsigned long tracked, kept, reused, not_kept;
    unsigned long long reused_bytes, kept_bytes_peak;
    const char *not_kept_reason;        /* the last one; static text */
};

struct event_end_above {
    struct site_cache_counts (*site_counts)(struct site *site);
    struct site_memory_counts (*memory_counts)(struct site *site);
    unsigned long long budget_bytes, kept_bytes_peak;
    struct event_host_memory host_memory;
    unsigned long resolved_dlsym;      /* wrappers dlsym handed out */
    unsigned long resolved_procaddr;   /* cuGetProcAddress answers */
};

/* The "end" event: totals per site and overall. */
void event_end(const struct event_end_above *above);

/* A driver call recap made on its own behalf failed; `consequence` says
 * what recap does instead. */
void event_own_call_failed(const struct site *site, const char *symbol, int result,
                           const char *consequence);

/* The same for a call that gives back what recap keeps (a destroy, a
 * free), except where the driver answers CUDA_ERROR_DEINITIALIZED: it is
 * shutting down (a program's exit ran ahead of recap's teardown) and
 * takes everything with it, so there is nothing left to warn of. */
void event_release_failed(const struct site *site, const char *symbol, int result,
                          const char *consequence);

/* In a fork child: its first event opens its own log with a "start". */
void event_after_fork_child(void);

/* A call that may destroy a context (lifecycle_context_teardown): how many
 * kept objects recap destroyed before it, and how many records of handles
 * the program holds it forgot. */
void event_context_teardown(const char *call, int released, int forgotten);

/* A module or library unload (lifecycle_code_unload): how many kept
 * graphs and executable graphs recap destroyed before it. */
void event_code_unload(const char *call, int released);

/* An NCCL communicator teardown call (nccl_hooks.c): how many kept objects
 * recap destroyed before it, and whether NCCL's definition was found. */
void event_comm_teardown(const char *call, int released, int forwarded);

#endif
