/*
 * reuse_gate.h - whether keeping and looking pays at a site, and the
 * back-off when it does not (module prefix gate_).
 *
 * Owns: the rule. Every time a site looks into what recap keeps for it (a
 * graph to record or recapture into, an executable graph to update) the
 * look is a hit, a miss (nothing of that kind kept), or a failure (found,
 * but the capture switched to a driver capture or the update failed), and
 * comes with what it saved (positive) or cost (negative) in microseconds
 * against doing without recap, as the site measured its own driver
 * captures and instantiations. Looks are judged in windows of GATE_WINDOW:
 * a window with more misses than hits and failures (the site does not
 * repeat) closes the gate - unless a quarter of its looks were hits and
 * the window saved time in all (a site sweeping through kinds misses
 * each new one's capture and instantiation, yet repeats the rest) - and
 * so does one whose failures (more than
 * GATE_ODD_FAILURES of them) cost more time than its hits saved - at its
 * end, or as soon as GATE_FAILURES_EAGER failures came with no hit at
 * all. One odd capture among many hits never closes it.
 * A closed site neither keeps nor looks - its captures and instantiations
 * cost what observe mode's do - until `backoff` more captures have begun;
 * then it tries again, judged on a first window of GATE_PROBE_WINDOW
 * looks if it closed for its misses (a full one if for its cost: it did
 * repeat, and must refill what it kept). The back-off starts at GATE_BACKOFF_FIRST captures
 * and doubles each time a site closes again without a good window in
 * between (at most GATE_BACKOFF_MAX); a good window resets it. A site one
 * of whose kept objects alone is larger than the whole cache budget closes
 * at once (gate_close_over_budget): nothing of it can be kept, so every
 * look in a window would only have cost the program. A cycle of k shapes
 * misses only in its first pass (k misses per kind looked into, two kinds
 * at 13.3), so with a window of 64 looks a cycle of up to 16 shapes stays
 * open.
 *
 * Must never: allocate, lock or call anything (the caller holds the site's
 * lock and logs what the returned change says).
 */
#ifndef RECAP_REUSE_GATE_H
#define RECAP_REUSE_GATE_H

#define GATE_WINDOW 64
/* After a back-off the site is judged on a short first window, so that a
 * site that still does not pay costs little each time it tries again. */
#define GATE_PROBE_WINDOW 8
#define GATE_FAILURES_EAGER 3
/* Failures a window may hold and still not close for their cost. */
#define GATE_ODD_FAILURES 1
#define GATE_BACKOFF_FIRST 64ul
#define GATE_BACKOFF_MAX 65536ul

enum gate_look { GATE_HIT, GATE_MISS, GATE_FAILED };

enum gate_change {
    GATE_SAME,
    GATE_CLOSED_MISSES,       /* a window's misses outweighed its hits */
    GATE_CLOSED_COST,         /* failures cost more time than hits saved */
    GATE_CLOSED_OVER_BUDGET,  /* a kept object alone exceeded the budget */
    GATE_REOPENED,            /* the back-off elapsed */
};

struct reuse_gate {
    unsigned hits, misses, failures;   /* in the current window */
    double net_us;                  /* saved minus cost, in the current window */
    int closed;
    int probing;                    /* the first window after reopening, shortened */
    enum gate_change closed_why;    /* the last closing */
    unsigned long reopen_at;        /* while closed: the capture count that reopens it */
    unsigned long backoff;          /* captures the next closing lasts; 0: GATE_BACKOFF_FIRST */
    unsigned long closings;         /* how often it closed */
    /* The window that closed it, for the log; or the object and budget. */
    unsigned last_hits, last_misses, last_failures;
    double last_net_us;
    const char *over_noun;          /* what the object was (a static string) */
    unsigned long long over_bytes, over_budget;
};

/* Whether the site keeps and looks at capture count `now`. A closed gate
 * whose back-off elapsed reopens (*change = GATE_REOPENED). */
int gate_open(struct reuse_gate *g, unsigned long now, enum gate_change *change);

/* Records one look at capture count `now`, which saved `net_us` (negative:
 * cost; 0 where nothing is known); returns what changed. Looks while
 * closed are ignored. */
enum gate_change gate_record(struct reuse_gate *g, enum gate_look look, double net_us,
                             unsigned long now);

/* What the site released could not be kept even alone: closes an open
 * gate at once, with the back-off of any other closing. */
enum gate_change gate_close_over_budget(struct reuse_gate *g, unsigned long now, const char *noun,
                                        unsigned long long bytes, unsigned long long budget);

#endif
