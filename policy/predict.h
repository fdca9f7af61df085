/*
 * predict.h - which graph shape a site will capture next (prefix predict_).
 *
 * Owns: a short history of the shapes a site captured and a guess of the
 * next one. A cycle of shapes of period p <= max_period (A,B,A,B or
 * A,A,B,A,A,B) must be predicted right on every capture once it has been
 * seen twice. Must never: allocate or take locks (the caller holds the
 * site's lock).
 */
#ifndef RECAP_PREDICT_H
#define RECAP_PREDICT_H

#include <stdint.h>

#define PREDICT_HISTORY 128         /* >= 2 * CONF_MAX_GRAPHS_LIMIT */

/* The working set is counted over the last PREDICT_WINDOW shapes: a cycle
 * of up to PREDICT_WINDOW / 2 shapes shows every shape at least twice. */
#define PREDICT_WINDOW 64

/* The longest period predict_next considers. */
#define PREDICT_MAX_PERIOD (PREDICT_HISTORY / 2)

struct shape_history {
    uint64_t ring[PREDICT_HISTORY];
    unsigned long count;            /* shapes recorded so far */
    int distinct;                   /* distinct shapes among the last PREDICT_WINDOW */
    /* run(p) of predict.c's rule for p <= runs_kept, kept up to date as
     * shapes are recorded: run[p - 1] (at most PREDICT_HISTORY - 1). */
    unsigned char run[PREDICT_MAX_PERIOD];
    unsigned runs_kept;
};

void predict_record(struct shape_history *h, uint64_t shape);

/* The predicted next shape, or 0 when there is none: the history is empty,
 * or its last shape never occurred before. */
uint64_t predict_next(const struct shape_history *h, int max_period);

/* The site's working set: how many distinct shapes its recent captures
 * had (a cycle of k shapes: k), at least 1. What a site keeps by default
 * follows it, so a cycle of k shapes finds all k kept. */
int predict_working_set(const struct shape_history *h);

#endif
