/*
 * test_match.c - shim/repeat/match.c alone: which candidate leads, when the
 * others are compared, what is dropped and when a reason is written.
 *
 * The comparison itself (self_record_match) is faked: a recording is a
 * list of entry points, and a call matches when it is the recording's
 * next. Every comparison is counted, with the room it was given for a
 * reason, so that the tests can assert the cost of matching (one
 * comparison a call while the leader matches) and not only its outcome.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "shim/repeat/match.h"

/* --- the faked comparison ------------------------------------------------------ */

static int compares;           /* self_record_match calls */
static int reasons_written;    /* of them, with room for a reason, that refused */

void self_record_start(struct self_record *s, struct journal *rec, const void *origin_key)
{
    (void)origin_key;
    s->rec = rec;
    s->next = 0;
}

void self_record_stop(struct self_record *s)
{
    s->rec = NULL;
}

enum self_verdict self_record_match(struct self_record *s, enum drv_id id,
                                    const union drv_args *a, int *needs_node, char *why,
                                    size_t len)
{
    (void)a;
    compares++;
    *needs_node = 0;
    if (s->next < s->rec->nops && s->rec->ops[s->next].id == id) {
        s->next++;
        return SELF_SAME;
    }
    if (len) {
        reasons_written++;
        snprintf(why, len, "differs at call %zu", s->next);
    }
    return SELF_SWITCH;
}

/* --- recordings and a capture's journal ------------------------------------------ */

#define MAX_CALLS 16

struct fake_graph {
    struct graph_rec rec;
    struct journal journal;
    struct journal_op ops[MAX_CALLS];
};

static struct fake_graph graphs[MATCH_MAX_CANDIDATES];
static struct graph_rec *taken[MATCH_MAX_CANDIDATES];
static struct journal past;
static struct journal_op past_ops[MAX_CALLS];
static struct match_set set;
/* What each call gives back, and why the last candidate went. */
static struct graph_rec *dropped[MATCH_MAX_CANDIDATES];
static int nd;
static char why[200];

/* Graph i records `n` calls of the entry points `ids`. */
static void record(int i, const enum drv_id *ids, int n)
{
    struct fake_graph *g = &graphs[i];
    memset(g, 0, sizeof *g);
    for (int k = 0; k < n; k++)
        g->ops[k].id = ids[k];
    g->journal.ops = g->ops;
    g->journal.nops = (size_t)n;
    g->journal.replayable = 1;
    g->rec.recording = &g->journal;
    taken[i] = &g->rec;
}

static void start(int n)
{
    memset(&past, 0, sizeof past);
    past.ops = past_ops;
    past.replayable = 1;
    compares = reasons_written = 0;
    nd = 0;
    why[0] = '\0';
    match_start(&set, taken, n, NULL);
}

/* One call as capture_recorded.c makes it: matched, then journaled. */
static int call(enum drv_id id)
{
    union drv_args a;
    memset(&a, 0, sizeof a);
    int needs_node;
    int live = match_call(&set, &past, id, &a, dropped, &nd, &needs_node, why, sizeof why);
    if (live > 0)
        past_ops[past.nops++].id = id;
    return live;
}

static const enum drv_id K = DRV_cuLaunchKernel, R = DRV_cuEventRecord, W = DRV_cuStreamWaitEvent;

/* --- tests ----------------------------------------------------------------------- */

Test(match, the_leader_alone_follows_a_capture_it_matches)
{
    const enum drv_id short_one[] = { K, R, W, K }, long_one[] = { K, R, W, K, K, K };
    record(0, short_one, 4);
    record(1, long_one, 6);
    record(2, long_one, 6);
    start(3);
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(call(short_one[k]), 3);
        cr_assert_eq(nd, 0);
    }
    cr_expect_eq(compares, 4, "one comparison a call, not one per candidate (%d)", compares);
    cr_expect_eq(match_leader(&set), 0);
    cr_expect_eq(match_choose_whole(&set, &past, dropped, &nd), 0);
    cr_expect_eq(nd, 0, "the others are not compared when the leader is whole");
    struct graph_rec *kept = match_finish(&set, 0, dropped, &nd);
    cr_expect_eq(kept, &graphs[0].rec);
    cr_expect_eq(nd, 2);
}

Test(match, a_leader_that_differs_hands_over_to_the_next_that_matches_the_past)
{
    const enum drv_id a[] = { K, R, W, K }, b[] = { K, R, W, K, K, K }, c[] = { K, K };
    record(0, a, 4);
    record(1, c, 2);      /* differs at the second call: dropped while catching up */
    record(2, b, 6);
    start(3);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(call(b[k]), 3);
    cr_assert_eq(compares, 4);
    /* The fifth call: graph 0 ends; graph 1 fails its catch-up; graph 2
     * takes the lead after four catch-up comparisons. */
    cr_assert_eq(call(K), 1);
    cr_expect_eq(nd, 2);
    cr_expect_eq(dropped[0], &graphs[0].rec);
    cr_expect_eq(dropped[1], &graphs[1].rec);
    cr_expect_eq(match_leader(&set), 2);
    cr_expect_eq(compares, 4 + 1 + 2 + 5, "%d comparisons", compares);
    cr_assert_eq(call(K), 1);
    cr_expect_eq(match_choose_whole(&set, &past, dropped, &nd), 2);
}

Test(match, no_candidate_left_says_why_once)
{
    const enum drv_id a[] = { K, K }, b[] = { K, R }, c[] = { K, W };
    record(0, a, 2);
    record(1, b, 2);
    record(2, c, 2);
    start(3);
    cr_assert_eq(call(K), 3);
    cr_assert_eq(call(DRV_cuLaunchHostFunc), 0);
    cr_expect_eq(nd, 3);
    cr_expect_eq(reasons_written, 1, "only the last candidate's reason is formatted");
    cr_expect_str_eq(why, "differs at call 1");
    cr_expect_eq(match_leader(&set), -1);
}

Test(match, the_end_binds_to_a_candidate_matched_whole_not_to_a_longer_leader)
{
    const enum drv_id longer[] = { K, R, W, K, K }, other[] = { K, W }, whole[] = { K, R, W };
    record(0, longer, 5);
    record(1, other, 2);
    record(2, whole, 3);
    start(3);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(call(whole[k]), 3);
    cr_expect_eq(match_choose_whole(&set, &past, dropped, &nd), 2);
    cr_expect_eq(nd, 1);
    cr_expect_eq(dropped[0], &graphs[1].rec);
    /* The longer one stays taken until the capture finishes. */
    struct graph_rec *kept = match_finish(&set, 2, dropped, &nd);
    cr_expect_eq(kept, &graphs[2].rec);
    cr_expect_eq(nd, 1);
    cr_expect_eq(dropped[0], &graphs[0].rec);
}

Test(match, none_whole_at_the_end)
{
    const enum drv_id a[] = { K, R, W }, b[] = { K, R, K };
    record(0, a, 3);
    record(1, b, 3);
    start(2);
    cr_assert_eq(call(K), 2);
    cr_assert_eq(call(R), 2);
    cr_expect_eq(match_choose_whole(&set, &past, dropped, &nd), -1);
    match_finish(&set, -1, dropped, &nd);
    cr_expect_eq(nd, 2, "every candidate still taken goes back");
}

Test(match, a_journal_that_lost_a_call_cannot_catch_a_candidate_up)
{
    const enum drv_id a[] = { K, K }, b[] = { K, R };
    record(0, a, 2);
    record(1, b, 2);
    start(2);
    cr_assert_eq(call(K), 2);
    past.replayable = 0;        /* journal_append could not copy a call */
    cr_expect_eq(call(R), 0,
                 "graph 1 matches R, but only a comparison of the past could show it");
    cr_expect_eq(nd, 2);
}

Test(match, resuming_after_the_calls_of_a_graph_bound_elsewhere)
{
    /* The capture was bound to the stream's usual graph, which differed
     * at its fourth call: the reserve is compared with the three calls
     * made, then follows from there. */
    const enum drv_id a[] = { K, W, W }, b[] = { K, R, W, K, K }, c[] = { K, R, W, R };
    record(0, a, 3);
    record(1, b, 5);
    record(2, c, 4);
    start(3);
    past_ops[0].id = K, past_ops[1].id = R, past_ops[2].id = W;
    past.nops = 3;
    cr_assert_eq(match_resume(&set, &past, dropped, &nd, why, sizeof why), 2);
    cr_expect_eq(nd, 1);
    cr_expect_eq(dropped[0], &graphs[0].rec);
    cr_expect_eq(match_leader(&set), 1);
    cr_expect_eq(compares, 2 + 3, "graph 0 differs at its second call, graph 1 matches three");
    cr_assert_eq(call(R), 1, "graph 1 differs, graph 2 takes the lead");
    cr_expect_eq(match_leader(&set), 2);
    cr_expect_eq(match_choose_whole(&set, &past, dropped, &nd), 2);
}

Test(match, resuming_with_none_that_matches)
{
    const enum drv_id a[] = { K, W }, b[] = { R };
    record(0, a, 2);
    record(1, b, 1);
    start(2);
    past_ops[0].id = K, past_ops[1].id = R;
    past.nops = 2;
    cr_expect_eq(match_resume(&set, &past, dropped, &nd, why, sizeof why), 0);
    cr_expect_eq(nd, 2);
    cr_expect_eq(match_leader(&set), -1);
    cr_expect_neq(why[0], '\0', "the last candidate says why");
}
