/*
 * capture_recorded.h - the recorder: captures recap records itself, with
 * no driver capture (prefix recorded_).
 *
 * Owns: the candidates a recorded capture takes from its site at the
 * begin, binding it to one of them, writing its calls into that graph, and
 * giving back what it did not use; the capture's ids, and what a switch
 * to a driver capture needs of the recording. It serves shim/repeat/capture.h,
 * which owns the capture's states: every function here hands back what it
 * found (a verdict, a reason) and must never switch, invalidate or end a
 * capture itself, nor call back into capture.c. Called with cap->lock held.
 */
#ifndef RECAP_CAPTURE_RECORDED_H
#define RECAP_CAPTURE_RECORDED_H

#include <stddef.h>

#include "shim/state/capture_table.h"
#include "shim/base/driver_api.h"

/* Whether recap records this site's repeat captures itself. */
int recorded_possible(const struct site *site);

/* At a begin: takes the site's kept graphs this capture may repeat (bound
 * to the stream's usual one, or all compared call by call). Returns 1, or
 * 0 with cap->reason set when there is none to take and a driver capture
 * must begin instead. */
int recorded_take(struct capture *cap);

/* Gives back what recorded_take took: the capture will not be recorded
 * after all. */
void recorded_untake(struct capture *cap);

/* A capture id for a capture recap records: unique, and far above the
 * driver's own counter, so the two never meet. */
cuuint64_t recorded_capture_id(void);

/* The room for the reason a recorder's verdict gives. */
#define RECORDED_WHY_LEN 200

/* What recorded_call returns where it is not the program's answer (a
 * CUresult, never negative): the capture must become a driver capture
 * (`why` says why), and the call then be made into it again (REDO), or
 * the call is in its journal already, and the switch's replay makes it
 * (MADE). */
enum { RECORDED_SWITCH_REDO = -1, RECORDED_SWITCH_MADE = -2 };

/* A call (not a capture query) into a capture recap records, or has
 * invalidated: the program's answer, or a switch it asks for. A plain int,
 * not a struct or an out-parameter: it runs at every recorded call. */
int recorded_call(struct capture *cap, enum drv_id id, union drv_args *a,
                  char why[RECORDED_WHY_LEN]);

/* An answer needs the nodes of one graph (a dependency or graph query):
 * the capture keeps the graph it is bound to, or binds to the candidate
 * every call so far matched. Returns 0, or -1 (why) when the driver
 * refused a write and the capture must switch. */
int recorded_choose_graph(struct capture *cap, char *why, size_t len);

/* A query handed the program the capture's graph, and the capture has
 * switched already (its driver capture waits for the owning thread): the
 * cached graph is the program's, and leaves the cache. */
void recorded_lend_graph(struct capture *cap);

/* How recorded_switch left the capture. */
enum recorded_switch_how {
    RECORDED_REPLAY,         /* its calls so far are the journal to replay into a
                              * driver capture, not begun yet */
    RECORDED_RESUMED,        /* a driver capture resumed in the graph the program
                              * holds; the calls so far are its journal, nodes known */
    RECORDED_RESUMED_WHOLE,  /* the same, after every call of the recording was made */
};

/* The capture recap recorded is to become a driver capture: the graphs it
 * looked at go back to the site, and its calls so far become a journal -
 * to replay, or, where the program holds the capture's graph, that of a
 * driver capture resumed in it. */
enum recorded_switch_how recorded_switch(struct capture *cap);

/* At the end of a capture recap records: binds it to the kept graph it
 * made whole. Returns 0, or 1 when it made none whole (why): it must
 * switch, and the driver end it. */
int recorded_end_unmatched(struct capture *cap, char *why, size_t len);

/* The end of a capture recap recorded whole (*phGraph its graph), or
 * invalidated (what it held goes back or is discarded). Returns the
 * graph's node count, -1 when invalidated. */
long recorded_end_finish(struct capture *cap, CUgraph *phGraph);

#endif
