/*
 * observed.h - the driver captures recap only watches (module prefix
 * observed_).
 *
 * A capture at a site that is observed only (mode observe, or a site
 * RECAP_SITES leaves out) is the driver's from begin to end: recap journals
 * nothing, answers no query and keeps nothing; its end reports the site,
 * the sequence number, the node count and the time taken. Such a capture
 * needs none of the capture table's machinery (a record, its locks, the
 * membership of streams and events), so it lives here instead: a fixed
 * table of slots, each claimed and freed by compare-and-swap of its stream
 * key, found at the end by that key from any thread. A full table is no
 * loss: the capture then takes the capture table's path, as before.
 * A capture at a site whose mode is off holds a slot too, silently: it is
 * neither counted nor logged, only known to run, so that recap's own
 * device synchronisations stand back while it does.
 *
 * Owns: the slots. Must never: call the driver, log, or take a lock.
 */
#ifndef RECAP_OBSERVED_H
#define RECAP_OBSERVED_H

struct site;

struct observed_capture {
    struct site *site;
    unsigned long seq;          /* the site's capture number */
    double t0;                  /* runtime_now_us() before the begin */
    int silent;                 /* a site whose mode is off: held only so that recap's
                                   own device synchronisations stand back (they would
                                   invalidate it); nothing counted or logged */
};

/* Slots in use; read by every end to skip the search when none is. */
extern int observed_count;

static inline int observed_any(void)
{
    return __atomic_load_n(&observed_count, __ATOMIC_ACQUIRE) != 0;
}

/* Claims a slot for the capture beginning on the stream with `key`.
 * Returns the slot, or -1 when the table is full. */
int observed_claim(const void *key, const struct observed_capture *what);

/* Frees a claimed slot whose begin the driver refused. */
void observed_unclaim(int slot);

/* The slot of the capture on `key`, or -1; *what is a copy of it. */
int observed_find(const void *key, struct observed_capture *what);

/* Frees the slot found for `key` once its capture has ended; 0 when
 * another thread's end freed it first (the capture is then its to report). */
int observed_release(int slot, const void *key);

/* In a fork() child: no capture is in progress. */
void observed_after_fork_child(void);

#endif
