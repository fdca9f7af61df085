/*
 * test_scenarios.c - recap on the stand-in driver, scenario by scenario.
 *
 * Every test runs a scenario program twice - without recap, and under
 * LD_PRELOAD=librecap.so - with the same stand-in knobs, and requires the
 * same stdout (every return code, every checksum) and exit status. Then it
 * asserts what recap did, from its log and from the stand-in's call counts:
 * that repeat captures were recaptured, that failed recaptures fell back,
 * that instantiation became an update, a delta or nothing.
 *
 * The suite runs twice (tests/scenario/meson.build): with the stand-in's
 * default synchronous execution, and with STANDIN_ASYNC=1, where launches
 * run on stream workers as on a GPU and lifetimes (executable graphs kept
 * by recap while launches are in flight, user objects) are exercised.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/run.h"

struct sc_case {
    const char *name;
    int iters;
    const char *driver;        /* reported driver version */
    const char *failure;       /* where a recapture failure surfaces */
    const char *config;        /* configuration file text, or NULL */
    const char *env[4];        /* more NAME=value for both runs */
};

struct sc_outcome {
    char *dir;
    const char *log;
    char stats[4200], base_stats[4200];
    struct run_result base, recap;
};

/* Whether the stand-in runs launches asynchronously in this case: the
 * case's own environment, else the suite's (meson sets STANDIN_ASYNC for
 * the scenarios-async run; the children do not inherit STANDIN_*). */
static int sc_async(const struct sc_case *c)
{
    const char *v = getenv("STANDIN_ASYNC");
    for (int i = 0; i < 4 && c->env[i]; i++)
        if (!strncmp(c->env[i], "STANDIN_ASYNC=", 14))
            v = c->env[i] + 14;
    return v && *v && strcmp(v, "0") != 0;
}

static void sc_spec(const struct sc_case *c, struct run_spec *spec, const char *stats)
{
    memset(spec, 0, sizeof *spec);
    spec->argv[0] = run_env_path("SCENARIO_BIN");
    spec->argv[1] = c->name;
    static char iters[16];
    snprintf(iters, sizeof iters, "%d", c->iters);
    spec->argv[2] = iters;
    spec->timeout_s = 300;
    run_setenv(spec, "STANDIN_DRIVER_VERSION", "%s", c->driver ? c->driver : "13030");
    run_setenv(spec, "STANDIN_RECAPTURE_FAILURE", "%s", c->failure ? c->failure : "call");
    run_setenv(spec, "SCENARIO_STATS", "%s", stats);
    int own_async = 0;
    for (int i = 0; i < 4 && c->env[i]; i++) {
        spec->env[i + 3] = c->env[i];
        own_async |= !strncmp(c->env[i], "STANDIN_ASYNC=", 14);
    }
    if (!own_async)
        run_setenv(spec, "STANDIN_ASYNC", "%d", sc_async(c));
    run_forward_env(spec, "SCENARIO_KERNELS");
}

/* Runs `c` without recap and under it; both must run. */
static void sc_run_both(const struct sc_case *c, struct sc_outcome *o)
{
    struct run_spec spec;
    memset(o, 0, sizeof *o);
    o->dir = run_temp_dir();
    o->log = strdup(run_path(o->dir, "recap.jsonl"));
    snprintf(o->base_stats, sizeof o->base_stats, "%s", run_path(o->dir, "base.stats"));
    snprintf(o->stats, sizeof o->stats, "%s", run_path(o->dir, "recap.stats"));

    sc_spec(c, &spec, o->base_stats);
    cr_assert_eq(run_program(&spec, &o->base), 0);

    sc_spec(c, &spec, o->stats);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", o->log);
    if (c->config) {
        const char *conf = run_path(o->dir, "recap.conf");
        FILE *f = fopen(conf, "w");
        fputs(c->config, f);
        fclose(f);
        run_setenv(&spec, "RECAP_CONFIG", "%s", conf);
    }
    cr_assert_eq(run_program(&spec, &o->recap), 0);
}

/* Runs both ways and requires identical behaviour. */
static void sc_compare(const struct sc_case *c, struct sc_outcome *o)
{
    sc_run_both(c, o);
    cr_assert_eq(o->recap.status, o->base.status,
                 "%s: exit status %d under recap, %d without\nstderr: %s", c->name,
                 o->recap.status, o->base.status, o->recap.err);
    cr_assert_str_eq(o->recap.out, o->base.out, "%s (%s, %s): output differs under recap\nstderr: %s",
                     c->name, c->driver ? c->driver : "13030", c->failure ? c->failure : "call",
                     o->recap.err);
    cr_assert_eq(run_stat(o->stats, "misuses"), 0, "%s: the stand-in saw misuse under recap: %s",
                 c->name, o->recap.err);
    int async = sc_async(c);
    cr_assert_eq(run_stat(o->base_stats, "async"), async, "%s: STANDIN_ASYNC not in effect", c->name);
    cr_assert_eq(run_stat(o->stats, "async"), async, "%s: STANDIN_ASYNC not in effect", c->name);
    cr_assert_eq(run_stat(o->stats, "library_kernels"), run_env_is("SCENARIO_KERNELS", "library"),
                 "%s: SCENARIO_KERNELS not in effect", c->name);
}

static void sc_done(struct sc_outcome *o)
{
    run_result_free(&o->base);
    run_result_free(&o->recap);
    free((char *)o->log);
    run_cleanup_dir(o->dir);
}

static int captures(struct sc_outcome *o, const char *path)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"path\":\"%s\"", path);
    return run_count_lines(o->log, "\"event\":\"capture\"", needle, NULL);
}

static int instantiations(struct sc_outcome *o, const char *how)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"how\":\"%s\"", how);
    return run_count_lines(o->log, "\"event\":\"instantiate\"", needle, NULL);
}

/* The `seq` of the last capture that was not a recapture, 0 if none. */
static int last_non_recapture(struct sc_outcome *o)
{
    char *text = run_read_file(o->log, NULL);
    int last = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"event\":\"capture\"") || strstr(line, "\"path\":\"recapture\""))
            continue;
        const char *seq = strstr(line, "\"seq\":");
        if (seq)
            last = atoi(seq + 6);
    }
    free(text);
    return last;
}

/* A test run once per place where the stand-in makes a failed recapture
 * surface: at the offending call, at the call after it, or only at end.
 * Criterion hands parameters to a freshly started worker, so they are
 * indices, not pointers into this process. */
static const char *const failure_points[] = { "call", "later", "end" };

#define FAILURE_MODE_TEST(test)                                        \
    ParameterizedTestParameters(scenario, test)                        \
    {                                                                  \
        static int points[] = { 0, 1, 2 };                             \
        return cr_make_param_array(int, points, 3);                    \
    }                                                                  \
    ParameterizedTest(int *point, scenario, test)

/* --- parameters changing every iteration --------------------------------------- */

Test(scenario, params_recaptured_after_the_first)
{
    struct sc_case c = { .name = "params", .iters = 12 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "fresh"), 1);
    cr_expect_eq(captures(&o, "recapture"), 11);
    cr_expect_eq(captures(&o, "fallback"), 0);
    /* Most nodes change each time: a whole update, never a new instance. */
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 1);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 11);
    cr_expect_eq(instantiations(&o, "update"), 11);
    sc_done(&o);
}

Test(scenario, params_on_a_13_0_driver_reuse_executables)
{
    struct sc_case c = { .name = "params", .iters = 12, .driver = "13000" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "fresh"), 12);
    cr_expect_eq(captures(&o, "recapture"), 0);
    cr_expect_eq(run_count_lines(o.log, "\"reason\":\"driver 13000 has no recapture API and "
                                        "self-recording is off at this site\"", NULL), 12);
    cr_expect_eq(run_stat(o.stats, "cuStreamBeginRecaptureToGraph"), 0);
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 1);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 11);
    sc_done(&o);
}

/* The id of the only site in a log (16 hex digits), into id[17]. */
static void only_site_id(const char *log, char id[17])
{
    char *text = run_read_file(log, NULL);
    cr_assert_not_null(text);
    const char *at = strstr(text, "\"event\":\"site\"");
    cr_assert_not_null(at, "no site event in the log");
    at = strstr(at, "\"site\":\"");
    cr_assert_not_null(at);
    memcpy(id, at + 8, 16);
    id[16] = '\0';
    cr_assert_null(strstr(at, "\"event\":\"site\""), "more than one site in the log");
    free(text);
}

/* self_record in a site's section decides for that site: off there beats
 * RECAP_SELF_RECORD=on (the site reuses executables and says why it does
 * not record), on there beats [defaults] off. */
Test(scenario, self_recording_is_chosen_per_site)
{
    struct sc_case first = { .name = "params", .iters = 12, .driver = "13000",
                             .env = { "RECAP_SELF_RECORD=on" } };
    struct sc_outcome o;
    sc_compare(&first, &o);
    cr_assert_gt(run_log_total(o.log, "by_recap"), 0, "params is not recorded by recap at all");
    char id[17], conf[128];
    only_site_id(o.log, id);
    sc_done(&o);

    snprintf(conf, sizeof conf, "[site %s]\nself_record = off\n", id);
    struct sc_case site_off = { .name = "params", .iters = 12, .driver = "13000", .config = conf,
                                .env = { "RECAP_SELF_RECORD=on" } };
    sc_compare(&site_off, &o);
    cr_expect_eq(run_log_total(o.log, "by_recap"), 0);
    cr_expect_eq(run_count_lines(o.log, "\"reason\":\"driver 13000 has no recapture API and "
                                        "self-recording is off at this site\"", NULL), 12);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 11);
    sc_done(&o);

    snprintf(conf, sizeof conf, "[defaults]\nself_record = off\n[site %s]\nself_record = on\n",
             id);
    struct sc_case site_on = { .name = "params", .iters = 12, .driver = "13000", .config = conf,
                               .env = { "RECAP_SELF_RECORD=" } };
    sc_compare(&site_on, &o);
    cr_expect_gt(run_log_total(o.log, "by_recap"), 0);
    sc_done(&o);
}

Test(scenario, few_changed_nodes_are_applied_one_by_one)
{
    struct sc_case c = { .name = "delta", .iters = 10 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "recapture"), 9);
    cr_expect_eq(instantiations(&o, "delta"), 9);
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 1);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 0);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecKernelNodeSetParams_v2"), 9);
    sc_done(&o);
}

Test(scenario, unchanged_recapture_applies_nothing)
{
    struct sc_case c = { .name = "nochange", .iters = 10 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "recapture"), 9);
    cr_expect_eq(instantiations(&o, "reuse"), 9);
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 1);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 0);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecKernelNodeSetParams_v2"), 0);
    sc_done(&o);
}

/* --- topology changes: every failure point, every surfacing ----------------------- */

static void topology_case(const char *name, const char *mode)
{
    struct sc_case c = { .name = name, .iters = 12, .driver = "13030", .failure = mode };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_geq(captures(&o, "fallback"), 1, "%s/%s: the topology change must fall back", name, mode);
    cr_expect_leq(captures(&o, "fallback"), 2, "%s/%s", name, mode);
    cr_expect_leq(last_non_recapture(&o), 7, "%s/%s: recaptures must resume", name, mode);
    cr_expect_eq(run_count_lines(o.log, "GRAPH_RECAPTURE_FAILURE", "\"result\"", NULL), 0);
    sc_done(&o);
}

FAILURE_MODE_TEST(topology_change_at_first_node)
{
    topology_case("topo_first", failure_points[*point]);
}

FAILURE_MODE_TEST(topology_change_in_the_middle)
{
    topology_case("topo_mid", failure_points[*point]);
}

FAILURE_MODE_TEST(topology_change_at_last_node)
{
    topology_case("topo_last", failure_points[*point]);
}

FAILURE_MODE_TEST(extra_node_at_the_end)
{
    topology_case("topo_extra", failure_points[*point]);
}

FAILURE_MODE_TEST(missing_node_at_the_end)
{
    topology_case("topo_missing", failure_points[*point]);
}

/* --- shapes ------------------------------------------------------------------------- */

/* A cycle of period p settles: every capture from the 2p-th on hits. */
static void cycle_case(const char *name, int period, const char *config)
{
    struct sc_case c = { .name = name, .iters = 8 * period, .driver = "13030", .failure = "call", .config = config };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_lt(last_non_recapture(&o), 2 * period + 1,
                 "%s: captures after %d must all be recaptures", name, 2 * period);
    sc_done(&o);
}

Test(scenario, alternating_shapes_settle)
{
    cycle_case("alternate", 2, NULL);
}

Test(scenario, cycle_of_three_shapes_settles)
{
    cycle_case("cycle3", 3, NULL);
}

Test(scenario, cycle_with_a_repeated_shape_settles)
{
    cycle_case("cycle_aab", 3, NULL);
}

Test(scenario, permanent_shape_change_settles)
{
    struct sc_case c = { .name = "switch", .iters = 14 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_leq(last_non_recapture(&o), 8);
    sc_done(&o);
}

/* --- streams, modes, threads ---------------------------------------------------------- */

FAILURE_MODE_TEST(fork_join_across_streams)
{
    struct sc_case c = { .name = "fork_join", .iters = 10, .driver = "13030", .failure = failure_points[*point] };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "recapture"), 9);
    sc_done(&o);
}

Test(scenario, every_capture_mode)
{
    const char *names[] = { "params", "mode_thread_local", "mode_relaxed" };
    for (int i = 0; i < 3; i++) {
        struct sc_case c = { .name = names[i], .iters = 8 };
        struct sc_outcome o;
        sc_compare(&c, &o);
        cr_expect_eq(captures(&o, "recapture"), 7, "%s", names[i]);
        sc_done(&o);
    }
}

Test(scenario, capture_ended_on_another_thread)
{
    struct sc_case c = { .name = "cross_thread", .iters = 8 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "recapture"), 7);
    sc_done(&o);
}

/* A relaxed capture on one thread's per-thread default stream whose
 * recapture fails at another thread's call (or later, or at the end): the
 * plain capture that replaces it is begun and replayed in the capturing
 * thread's per-thread stream, never in the other thread's (which cannot
 * name it); the switch waits for the capturing thread's next call. */
FAILURE_MODE_TEST(per_thread_stream_capture_failing_on_another_thread)
{
    struct sc_case c = { .name = "ptsz_cross_thread", .iters = 8, .driver = "13030",
                         .failure = failure_points[*point] };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"error\"", NULL), 0, "%s", o.recap.err);
    cr_expect_geq(captures(&o, "fallback"), 1, "%s: the failed recapture falls back", c.failure);
    cr_expect_geq(captures(&o, "recapture"), 4, "%s", c.failure);
    cr_expect_eq(captures(&o, "recapture") + captures(&o, "fallback") + captures(&o, "fresh"), 8);
    sc_done(&o);
}

Test(scenario, many_threads_at_many_sites)
{
    struct sc_case c = { .name = "threads", .iters = 60 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"site\"", NULL), 4);
    cr_expect_eq(run_log_total(o.log, "captures"), 8 * 4 * 60);
    cr_expect_gt(run_log_total(o.log, "recaptured"), 8 * 4 * 50);
    cr_expect_eq(run_log_total(o.log, "instantiations"), 8 * 4 * 60);
    /* Routine events are sampled: far fewer lines than captures. */
    cr_expect_lt(run_count_lines(o.log, "\"event\":\"capture\"", NULL), 8 * 4 * 60 / 2);
    cr_expect_eq(strstr(o.recap.out, "failures=0") != NULL, 1);
    sc_done(&o);
}

/* --- the program's own doings ----------------------------------------------------------- */

Test(scenario, program_breaking_its_capture_gets_its_own_error)
{
    struct sc_case c = { .name = "broken", .iters = 6 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_neq(strstr(o.recap.out, "it=3 "), NULL);
    cr_expect_eq(run_count_lines(o.log, "\"seq\":4,", "STREAM_CAPTURE", NULL), 1,
                 "the broken capture is logged with the driver's error");
    sc_done(&o);
}

/* The same, and then the program asks the broken capture for its graph,
 * which makes a 13.3 recapture switch to a plain capture: the switch
 * must not revive the capture (the query says invalidated, the end gives
 * the error and no graph), at 13.3 and, recorded by recap, at 13.0. */
Test(scenario, a_broken_capture_asked_for_its_graph_stays_broken)
{
    const char *drivers[] = { "13030", "13000" };
    for (int d = 0; d < 2; d++) {
        struct sc_case c = { .name = "broken_query", .iters = 6, .driver = drivers[d] };
        struct sc_outcome o;
        sc_compare(&c, &o);
        char status[64];
        snprintf(status, sizeof status, "it=3 query=0 status=%d graph=null",
                 2 /* CU_STREAM_CAPTURE_STATUS_INVALIDATED */);
        cr_expect_neq(strstr(o.recap.out, status), NULL, "at %s:\n%s", drivers[d], o.recap.out);
        cr_expect_neq(strstr(o.recap.out, "end=901 graph=null"), NULL, "at %s", drivers[d]);
        cr_expect_eq(run_count_lines(o.log, "\"seq\":4,", "STREAM_CAPTURE_INVALIDATED", NULL), 1,
                     "at %s the broken capture is logged with the driver's error", drivers[d]);
        sc_done(&o);
    }
}

/* The program asks its capture for the graph, then breaks the capture: a
 * capture recap recorded goes on as the driver's in that graph, and the
 * failed end leaves no graph alive that the run without recap does not
 * have (the driver destroys a broken capture's graph; recap the one it
 * lent). At 13.0 and 13.3. */
Test(scenario, a_broken_capture_leaves_no_graph_behind)
{
    const char *drivers[] = { "13000", "13030" };
    for (int d = 0; d < 2; d++) {
        struct sc_case c = { .name = "query_then_broken", .iters = 6, .driver = drivers[d],
                             .env = { "SCENARIO_DRAIN=1", "RECAP_SELF_RECORD=on" } };
        struct sc_outcome o;
        sc_compare(&c, &o);
        cr_expect_neq(strstr(o.recap.out, "end=901 graph=null"), NULL, "at %s", drivers[d]);
        cr_expect_eq(run_stat(o.stats, "live_graphs"), run_stat(o.base_stats, "live_graphs"),
                     "at %s: %ld graphs alive at the end under recap, %ld without", drivers[d],
                     run_stat(o.stats, "live_graphs"), run_stat(o.base_stats, "live_graphs"));
        sc_done(&o);
    }
}

/* A program that sets its executable graph's node after each
 * instantiation, through its graph's node: under recap that executable
 * graph may be a released one brought up to the program's graph, which
 * the driver knows by the nodes of the graph it was instantiated from
 * (STANDIN_EXEC_NODES=instantiated, the stand-in's default, as the
 * documentation reads). recap finds that graph's node; the setter takes
 * effect as without recap, and executable graphs are still reused. Graphs
 * destroyed at once and one step late, at 13.0 and 13.3, self-recording
 * on and off. */
Test(scenario, the_programs_own_node_setters_reach_a_reused_executable_graph)
{
    const char *names[] = { "exec_node_set", "exec_node_set_keep" };
    const char *drivers[] = { "13000", "13030" };
    const char *self_record[] = { "RECAP_SELF_RECORD=on", "RECAP_SELF_RECORD=off" };
    for (int i = 0; i < 8; i++) {
        struct sc_case c = { .name = names[i / 4], .iters = 12, .driver = drivers[i / 2 % 2],
                             .env = { self_record[i % 2] } };
        struct sc_outcome o;
        sc_compare(&c, &o);
        cr_expect_eq(strstr(o.recap.out, "rc=0,0,0,0,0,0,0,0,0 sum") != NULL &&
                     strstr(o.recap.out, ",1,") == NULL, 1, "%s at %s, %s:\n%s", c.name, c.driver,
                     c.env[0], o.recap.out);
        /* Each executable graph's own graph lives as long as it does
         * (recap keeps it where the program destroyed it), so executable
         * graphs are reused at a site that sets nodes too. Where the
         * program destroys each graph a step late (13.0, self-recording
         * on), recap records into two graphs in turn and learns, in two
         * instantiations, to keep an executable graph for each. */
        cr_expect_geq(run_log_total(o.log, "reused"), 9, "%s at %s, %s: %ld reused", c.name,
                      c.driver, c.env[0], run_log_total(o.log, "reused"));
        sc_done(&o);
    }
}

/* A site's first setter, at the fourth step, on an executable graph recap
 * reused from a graph the program destroyed by then (13.0, self-recording
 * off: recap keeps no graph for captures). recap kept that graph for its
 * executable graph, so the setter takes effect as without recap, with no
 * warning, and reuse goes on (round 29 left this case failing). */
Test(scenario, a_late_first_setter_reaches_an_executable_graph_reused_from_a_destroyed_graph)
{
    const char *self_record[] = { "RECAP_SELF_RECORD=off", "RECAP_SELF_RECORD=on" };
    for (int i = 0; i < 4; i++) {
        struct sc_case c = { .name = "exec_node_set_late", .iters = 8,
                             .driver = i < 2 ? "13000" : "13030", .env = { self_record[i % 2] } };
        struct sc_outcome o;
        sc_compare(&c, &o);
        cr_expect_eq(strstr(o.recap.out, ",1,"), NULL, "%s %s:\n%s", c.driver, c.env[0],
                     o.recap.out);
        cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", NULL), 0, "%s %s", c.driver,
                     c.env[0]);
        cr_expect_geq(run_log_total(o.log, "reused"), 6, "%s %s: %ld reused", c.driver, c.env[0],
                      run_log_total(o.log, "reused"));
        sc_done(&o);
    }
}

Test(scenario, double_destroy_returns_invalid_value_and_keeps_the_cache)
{
    struct sc_case c = { .name = "double_destroy", .iters = 6 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_neq(strstr(o.base.out, "exec=0,1 graph=0,1"), NULL,
                  "the stand-in answers a second destroy with CUDA_ERROR_INVALID_VALUE");
    cr_expect_eq(captures(&o, "recapture"), 5, "the cache survived the double destroy");
    sc_done(&o);
}

Test(scenario, graph_edited_by_the_program)
{
    struct sc_case c = { .name = "mutate", .iters = 9 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    sc_done(&o);
}

/* A graph the program grew after its capture (every third iteration):
 * recap must not keep it for the next recapture (13.3: it would fail and
 * fall back) or record into it (13.0), which would run the added kernel
 * in iterations that did not add it; and its instantiation must not try
 * an executable graph of the shape it was captured with (an update that
 * fails, then an instantiation: dearer than without recap). */
static void grown_case(const char *driver, const char *self_record)
{
    struct sc_case c = { .name = "grown", .iters = 12, .driver = driver,
                         .env = { self_record } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_geq(run_log_total(o.log, "recaptured"), 7, "driver %s: %ld recaptured", driver,
                  run_log_total(o.log, "recaptured"));
    cr_expect_eq(run_log_total(o.log, "fallbacks"), 0, "driver %s", driver);
    cr_expect_eq(run_log_total(o.log, "update_failures"), 0, "driver %s: %ld failed updates",
                 driver, run_log_total(o.log, "update_failures"));
    sc_done(&o);
}

Test(scenario, graph_grown_by_the_program_after_its_capture)
{
    grown_case("13030", NULL);
    grown_case("13000", "RECAP_SELF_RECORD=on");
}

Test(scenario, kernels_launched_with_extra)
{
    struct sc_case c = { .name = "extra_args", .iters = 8 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(captures(&o, "recapture"), 7);
    sc_done(&o);
}

Test(scenario, every_instantiate_variant)
{
    struct sc_case c = { .name = "variants", .iters = 12 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(instantiations(&o, "new"), 1);
    cr_expect_eq(run_stat(o.stats, "cuGraphUpload"), 3, "UPLOAD is honoured on reuse");
    sc_done(&o);
}

Test(scenario, graph_destroyed_one_iteration_late)
{
    struct sc_case c = { .name = "keep_graph", .iters = 10 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_geq(captures(&o, "recapture"), 7);
    sc_done(&o);
}

Test(scenario, out_of_memory_releases_the_cache)
{
    /* A budget as large as the device, so that recap holds what the
     * program's allocation needs. */
    struct sc_case c = { .name = "oom", .iters = 8, .driver = "13030", .failure = "call",
                         .config = "[defaults]\ncache_budget = 1MiB\n",
                         .env = { "STANDIN_DEVICE_MEMORY=1048576", "SCENARIO_OOM_BYTES=1000000" } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_neq(strstr(o.base.out, "big allocation rc=0"), NULL);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "device memory exhausted", NULL), 1);
    sc_done(&o);
}

Test(scenario, user_objects_outlive_the_work_and_are_all_destroyed)
{
    struct sc_case c = { .name = "user_objects", .iters = 12, .driver = "13000",
                         .env = { "SCENARIO_DRAIN=1" } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_neq(strstr(o.recap.out, "user objects destroyed: 8 of 8"), NULL, "%s", o.recap.out);
    /* The executable graph is reused all the same. */
    cr_expect_eq(run_log_total(o.log, "update"), 11);
    sc_done(&o);
}

/* The stream the reused executable graph last ran on is destroyed before
 * recap gives the user objects back (cuda.core at its exit): recap waits
 * for that stream's work when it is destroyed, and never names it later. */
Test(scenario, user_objects_outlive_a_destroyed_stream)
{
    struct sc_case c = { .name = "user_objects_stream_gone", .iters = 6, .driver = "13000",
                         .env = { "SCENARIO_DRAIN=1" } };
    struct sc_outcome o;
    sc_compare(&c, &o);   /* no use of the destroyed stream, every object destroyed */
    cr_expect_neq(strstr(o.recap.out, "user objects destroyed: 6 of 6"), NULL, "%s", o.recap.out);
    cr_expect_eq(run_log_total(o.log, "reused"), 5, "executable reuse: nothing tested");
    sc_done(&o);
}

Test(scenario, graphs_with_user_objects_are_not_kept_for_recapture)
{
    struct sc_case c = { .name = "user_objects", .iters = 12, .env = { "SCENARIO_DRAIN=1" } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_neq(strstr(o.recap.out, "user objects destroyed: 8 of 8"), NULL, "%s", o.recap.out);
    cr_expect_lt(run_log_total(o.log, "recaptured"), 12);
    sc_done(&o);
}

/* Conditional nodes made inside the capture (cuStreamGetCaptureInfo's
 * graph, a handle, cuGraphAddNode, cuStreamUpdateCaptureDependencies, the
 * body captured with cuStreamBeginCaptureToGraph): never recaptured (the
 * 13.3 driver refuses such graphs), said once. Where recap reads node
 * types (13.3; 13.0 with self-recording) their executable graphs are not
 * reused either, said once: cuda.core's conditional graph tests crashed
 * in the driver on the H200 after such an update. Where it does not (13.0
 * with self-recording off, as here) they are still updated with each
 * capture's new handles and default values, as driver 580 does
 * (tests/gpu/conditional.cu). */
static void conditional_case(const char *driver)
{
    struct sc_case c = { .name = "conditional", .iters = 12, .driver = driver };
    struct sc_outcome o;
    sc_compare(&c, &o);
    int types_read = strcmp(driver, "13000") != 0;
    cr_expect_eq(run_log_total(o.log, "captures"), 12);
    cr_expect_eq(run_log_total(o.log, "recaptured"), 0);
    cr_expect_eq(run_log_total(o.log, "update"), types_read ? 0 : 11, "%s", o.recap.err);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "executable reuse stopped here",
                                 NULL), types_read);
    cr_expect_eq(run_log_total(o.log, "update_failures"), 0);
    cr_expect_leq(run_count_lines(o.log, "\"event\":\"warning\"", "site not recaptured",
                                  "conditional", NULL), 1);
    sc_done(&o);
}

/* A kernel node the program adds to its capture's graph itself
 * (cuStreamGetCaptureInfo's graph, cuGraphAddKernelNode,
 * cuStreamUpdateCaptureDependencies) from the first capture on: recap
 * cannot copy the dependency update, so the site is never recaptured,
 * said once; its executable graphs are still updated. */
static void added_node_case(const char *driver, const char *self_record)
{
    struct sc_case c = { .name = "added_node", .iters = 12, .driver = driver,
                         .env = { self_record } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "recaptured"), 0);
    cr_expect_eq(run_log_total(o.log, "update"), 11);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "site not recaptured",
                                 "cuStreamUpdateCaptureDependencies", NULL), 1);
    sc_done(&o);
}

Test(scenario, nodes_the_program_adds_to_its_capture)
{
    added_node_case("13000", "RECAP_SELF_RECORD=on");
    added_node_case("13030", NULL);
}

/* The same node added only from the seventh capture on, the graph asked
 * for at every capture: the first capture recap would recapture (13.3) or
 * record (13.0) into a cached graph switches to a driver capture at that
 * query, and the site is left to driver captures from then on, so the
 * node, when it comes, goes into the capture's real graph. Before, the
 * site was recaptured until the node came, the node went into the cached
 * graph, and the program got an error and other results. */
static void added_node_late_case(const char *driver, const char *self_record)
{
    struct sc_case c = { .name = "added_node_late", .iters = 12, .driver = driver,
                         .env = { self_record } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "fallbacks"), 1);
    if (self_record) {
        /* recap lent the graph it records into; the program's edit made
         * the capture a driver capture in that graph, then the site was
         * left to driver captures for the call recap cannot copy. */
        cr_expect_eq(run_count_lines(o.log, "\"event\":\"capture\"", "\"path\":\"fallback\"",
                                     "graph call while it held the capture's graph", NULL), 1);
        cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "site not recaptured",
                                     NULL), 1);
    } else {
        cr_expect_eq(run_log_total(o.log, "recaptured"), 0);
        cr_expect_eq(run_count_lines(o.log, "\"event\":\"capture\"", "\"path\":\"fallback\"",
                                     "asked for the capture's graph", NULL), 1);
        cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "site not recaptured",
                                     "ask for their graph", NULL), 1);
    }
    sc_done(&o);
}

Test(scenario, a_capture_that_hands_out_its_graph_becomes_a_driver_capture)
{
    added_node_late_case("13000", "RECAP_SELF_RECORD=on");
    added_node_late_case("13030", NULL);
}

Test(scenario, conditional_nodes_made_in_the_capture_at_13_0)
{
    conditional_case("13000");
}

Test(scenario, conditional_nodes_made_in_the_capture_at_13_3)
{
    conditional_case("13030");
}

Test(scenario, memory_nodes_keep_a_site_from_recapture_with_the_reason_once)
{
    struct sc_case c = { .name = "alloc_nodes", .iters = 8 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "captures"), 8);
    cr_expect_eq(run_log_total(o.log, "recaptured"), 0);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "site not recaptured",
                                 "memory allocation", NULL), 1);
    /* Executable updates keep failing on such graphs: recap stops trying. */
    cr_expect_leq(run_log_total(o.log, "update_failures"), 3);
    sc_done(&o);
}

/* Where recap reads node types (13.3 here), a site whose graphs hold
 * memory allocation or free nodes neither keeps nor reuses executable
 * graphs: cuda.core's graph-memory tests crashed in the driver (an upload
 * after an update) on the H200. Said once. */
Test(scenario, memory_nodes_stop_executable_reuse_where_types_are_read)
{
    struct sc_case c = { .name = "alloc_nodes", .iters = 8, .driver = "13030" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "reused"), 0);
    cr_expect_eq(run_log_total(o.log, "update_failures"), 0);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "executable reuse stopped here",
                                 NULL), 1);
    sc_done(&o);
}

/* --- launches in flight (always asynchronous) ------------------------------------------ */

/* Executable graphs destroyed with their launch in flight are kept by recap
 * and updated for the next capture while that launch may still run. */
static void inflight_case(const char *name)
{
    struct sc_case c = { .name = name, .iters = 15, .env = { "STANDIN_ASYNC=1", "SCENARIO_DRAIN=1" } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    /* Graphs holding user objects (every third) are not kept for recapture;
     * the executable graph is updated in place every time all the same. */
    cr_expect_geq(captures(&o, "recapture"), 5, "%s", name);
    cr_expect_eq(instantiations(&o, "update") + instantiations(&o, "delta") +
                 instantiations(&o, "reuse"), 14, "%s: executable graphs reused in flight", name);
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 1, "%s", name);
    cr_expect_neq(strstr(o.recap.out, "user objects destroyed: 5 of 5"), NULL, "%s", o.recap.out);
    cr_expect_neq(strstr(o.recap.out, "end sync=0"), NULL, "%s", o.recap.out);
    sc_done(&o);
}

Test(scenario, executables_reused_while_launches_are_in_flight)
{
    inflight_case("inflight");
}

Test(scenario, fork_join_reused_while_launches_are_in_flight)
{
    inflight_case("inflight_fork");
}

/* --- the log of a long run ------------------------------------------------------------ */

Test(scenario, routine_events_are_sampled_and_totals_stay_exact)
{
    struct sc_case c = { .name = "params", .iters = 300 };
    struct sc_outcome o;
    sc_compare(&c, &o);
    /* Captures 1 (fresh) and 2 (the first recapture) differ from their
     * predecessors; 3..64 are written in full; then 128 and 256. */
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"capture\"", NULL), 66);
    cr_expect_eq(run_log_total(o.log, "captures"), 300);
    cr_expect_eq(run_log_total(o.log, "recaptured"), 299);
    cr_expect_eq(run_log_total(o.log, "update"), 299);
    cr_expect_eq(run_log_total(o.log, "changed"), 299 * 5);
    sc_done(&o);
}

Test(scenario, every_fallback_is_written_however_long_the_run)
{
    struct sc_case c = { .name = "alternate", .iters = 200, .config = "[site 0000000000000001]\nmode = observe\n" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"path\":\"fallback\"", NULL), run_log_total(o.log, "fallbacks"));
    sc_done(&o);
}

/* --- sites observed only ------------------------------------------------------------- */

/* An observed capture is the driver's, watched from a slot of its own
 * (shim/state/observed.h), not from the capture table: each is still counted and
 * logged as observed, with the node count the table's path (mode update)
 * finds for the same program, whichever thread ends it and however many
 * threads capture at once; nothing is instantiated by recap. */
static void observed_case(const char *name, int iters)
{
    struct sc_case watched = { .name = name, .iters = iters, .driver = "13000",
                               .env = { "RECAP_MODE=observe" } };
    struct sc_case tabled = { .name = name, .iters = iters, .driver = "13000",
                              .env = { "RECAP_MODE=update" } };
    struct sc_outcome o, t;
    sc_compare(&watched, &o);
    sc_compare(&tabled, &t);
    long n = run_log_total(t.log, "captures");
    cr_expect_gt(n, 0, "%s: no capture counted in mode update", name);
    cr_expect_eq(run_log_total(o.log, "captures"), n, "%s: captures observed", name);
    cr_expect_eq(run_log_total(o.log, "observed"), n, "%s: captures counted as observed", name);
    cr_expect_gt(run_log_total(o.log, "nodes"), 0, "%s: node count", name);
    cr_expect_eq(run_log_total(o.log, "nodes"), run_log_total(t.log, "nodes"),
                 "%s: nodes counted when observed and when reused", name);
    cr_expect_eq(run_log_total(o.log, "instantiations"), 0, "%s", name);
    cr_expect_eq(captures(&o, "observe"), run_count_lines(o.log, "\"event\":\"capture\"", NULL),
                 "%s: a capture logged other than observed", name);
    sc_done(&o);
    sc_done(&t);
}

Test(scenario, an_observed_site_counts_every_capture_and_its_nodes)
{
    observed_case("params", 100);
}

Test(scenario, an_observed_capture_ended_on_another_thread_is_counted)
{
    observed_case("cross_thread", 30);
}

Test(scenario, observed_captures_on_many_threads_at_once_are_each_counted)
{
    observed_case("threads", 20);
}

/* --- adaptive reuse: working sets, the budget, the back-off ----------------------------- */

/* Reuse after the first pass of a k-shape cycle, from the end totals: at
 * least 90 % of the instantiations (and, at 13.3, the captures) after the
 * first k are served from what recap kept, with no configuration. */
static void working_set_case(const char *name, int k, const char *driver)
{
    int iters = 10 * k + 20;
    struct sc_case c = { .name = name, .iters = iters, .driver = driver };
    struct sc_outcome o;
    sc_compare(&c, &o);
    long after_first = iters - k;
    cr_expect_geq(run_log_total(o.log, "reused") * 10, after_first * 9,
                  "%s at %s: %ld of %ld instantiations after the first cycle reused", name,
                  driver, run_log_total(o.log, "reused"), after_first);
    if (!strcmp(driver, "13030"))
        cr_expect_geq(run_log_total(o.log, "recaptured") * 10, after_first * 9,
                      "%s at %s: %ld of %ld captures after the first cycle recaptured", name,
                      driver, run_log_total(o.log, "recaptured"), after_first);
    cr_expect_eq(run_log_total(o.log, "backoffs"), 0);
    cr_expect_eq(run_log_total(o.log, "evicted"), 0, "the working set fits the default budget");
    sc_done(&o);
}

Test(scenario, cycle_of_3_shapes_is_reused_by_default)
{
    working_set_case("cycle3", 3, "13000");
    working_set_case("mixed3", 3, "13000");
}

/* A dynamic batch (measured with PyTorch on the H200: two of three batch
 * sizes gave 13-node graphs of other kernels): at 13.0 shapes are node
 * counts, so two graphs of one count shared an executable graph, every
 * update between them failed and the site stopped reusing. The first
 * refused update makes the site's shapes count node types (a "typed"
 * reuse event); each variant then keeps its own executable graph. */
Test(scenario, graphs_of_one_node_count_get_told_apart)
{
    struct sc_case c = { .name = "collide3", .iters = 60, .driver = "13000" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"typed\"", NULL), 1,
                 "the site's shapes did not become typed once");
    cr_expect_leq(run_log_total(o.log, "update_failures"), 2, "%ld updates failed",
                  run_log_total(o.log, "update_failures"));
    cr_expect_geq(run_log_total(o.log, "reused") * 10, 59 * 8, "%ld of 59 instantiations reused",
                  run_log_total(o.log, "reused"));
    cr_expect_eq(run_log_total(o.log, "backoffs"), 0);
    sc_done(&o);
}

Test(scenario, cycle_of_8_shapes_is_reused_by_default)
{
    working_set_case("cycle8", 8, "13000");
    working_set_case("mixed8", 8, "13000");
}

Test(scenario, cycles_are_recaptured_at_13_3)
{
    working_set_case("mixed3", 3, "13030");
    working_set_case("mixed8", 8, "13030");
}

/* A cycle the budget cannot hold: no harm (same results, the site stops
 * keeping and looking), and what recap keeps never exceeds the budget. */
Test(scenario, more_shapes_than_the_budget_holds)
{
    struct sc_case c = { .name = "mixed8", .iters = 200, .driver = "13000",
                         .config = "[defaults]\ncache_budget = 400KiB\n" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "budget_bytes"), 400 * 1024);
    cr_expect_leq(run_log_total(o.log, "kept_bytes_peak"), 400 * 1024);
    cr_expect_gt(run_log_total(o.log, "evicted"), 0);
    cr_expect_geq(run_log_total(o.log, "backoffs"), 1);
    cr_expect_geq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"stopped\"", NULL), 1);
    /* Every instantiation is the program's own, done once; while stopped
     * nothing is kept: open for two windows of 64 looks in 200 captures
     * (0-63, then 128-191 after the back-off of 64). */
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 200);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 0);
    cr_expect_leq(run_log_total(o.log, "kept"), 2 * 64);
    sc_done(&o);
}

/* Pinned host memory kept counts against the cache budget (apart from
 * device memory): with room for one of the step's two pinned buffers,
 * the first freed is kept and handed back, the other is unpinned and
 * pinned again every step, and the end event says why. */
Test(scenario, pinned_memory_beyond_the_budget_is_freed_as_asked)
{
    struct sc_case c = { .name = "pinned", .iters = 12, .driver = "13000",
                         .config = "[defaults]\ncache_budget = 1KiB\n" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_stat(o.stats, "cuMemHostAlloc"), 1, "the kept buffer pinned %ld times",
                 run_stat(o.stats, "cuMemHostAlloc"));
    cr_expect_eq(run_stat(o.stats, "cuMemAllocHost_v2"), c.iters);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"",
                                 "\"not_kept_reason\":\"over the cache budget\"", NULL), 1);
    sc_done(&o);
}

/* A budget smaller than one executable graph of the site (the `small` way
 * of scripts/bench-shapes): the first one released leaves at once, and
 * the site stops there rather than after a window of 64 looks - each look
 * would only cost (with self-recording, a census and a node query per
 * call). It tries again after the back-off, doubling. */
static void over_budget_case(const char *driver, const char *self_record)
{
    struct sc_case c = { .name = "mixed8", .iters = 400, .driver = driver,
                         .config = "[defaults]\ncache_budget = 32KiB\n",
                         .env = { self_record } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    long backoffs = run_log_total(o.log, "backoffs");
    cr_expect_geq(backoffs, 2, "%s %s: %ld back-offs", driver, self_record, backoffs);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"stopped\"",
                                 "alone exceeds the cache budget of 32768 bytes", NULL), backoffs);
    /* One executable graph released per opening, and nothing kept. */
    cr_expect_leq(run_log_total(o.log, "kept"), backoffs + 1);
    cr_expect_eq(run_log_total(o.log, "reused"), 0);
    cr_expect_leq(run_log_total(o.log, "kept_bytes_peak"), 32 * 1024);
    /* Open for a capture or two per opening: about as many queries of a
     * capture's nodes as one capture has calls per opening, not 64 looks'. */
    cr_expect_lt(run_stat(o.stats, "cuGraphNodeGetType"), 40 * (backoffs + 1),
                 "%s %s: %ld node type queries", driver, self_record,
                 run_stat(o.stats, "cuGraphNodeGetType"));
    /* Stopped, a capture costs recap a node count alone (observe's cost):
     * no context query for a shape nothing will match. */
    cr_expect_lt(run_stat(o.stats, "cuCtxGetCurrent"), 4 * (backoffs + 1),
                 "%s %s: %ld context queries", driver, self_record,
                 run_stat(o.stats, "cuCtxGetCurrent"));
    sc_done(&o);
}

Test(scenario, a_site_whose_graph_exceeds_the_budget_stops_at_once)
{
    over_budget_case("13000", "RECAP_SELF_RECORD=on");
    over_budget_case("13000", "RECAP_SELF_RECORD=off");
    over_budget_case("13030", "RECAP_SELF_RECORD=off");
}

/* Self-recording on (recap's default): a stopped site still costs only a
 * node count per capture. A capture and an instantiation are two looks,
 * so the site is open for about 32 of every window; in 300 captures it
 * stops three times and is open for fewer than half of them: fewer than
 * 150 censuses may read edges and types (one edge query each). Typed
 * censuses while stopped made it about 300. */
Test(scenario, stopped_site_counts_nodes_only_while_self_recording)
{
    struct sc_case c = { .name = "fresh_shapes", .iters = 300, .driver = "13000",
                         .env = { "RECAP_SELF_RECORD=on" } };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_geq(run_log_total(o.log, "backoffs"), 2);
    cr_expect_lt(run_stat(o.stats, "cuGraphGetEdges_v2"), c.iters / 2);
    cr_expect_gt(run_stat(o.stats, "cuGraphGetEdges_v2"), 0);
    sc_done(&o);
}

/* A new shape every time: the site stops keeping and looking after a
 * window of misses, tries again after 64 captures, and stops again for
 * twice as long; each step is in the log with its reason. */
static void never_reused_case(const char *driver)
{
    struct sc_case c = { .name = "fresh_shapes", .iters = 200, .driver = driver };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "reused"), 0);
    cr_expect_eq(run_log_total(o.log, "backoffs"), 2);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"stopped\"",
                                 "misses against 0 hits", "\"backoff\":64,", NULL), 1);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"resumed\"", NULL), 1);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"stopped\"",
                                 "\"backoff\":128,", NULL), 1);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"instantiate\"", "reuse stopped at this site",
                                 NULL) > 0, 1);
    cr_expect_leq(run_log_total(o.log, "kept_bytes_peak"), run_log_total(o.log, "budget_bytes"));
    sc_done(&o);
}

Test(scenario, never_reusable_site_backs_off_at_13_0)
{
    never_reused_case("13000");
}

Test(scenario, never_reusable_site_backs_off_at_13_3)
{
    never_reused_case("13030");
}

/* Same node count, edge count and node types, another wiring each time:
 * executable updates fail even once the site's shapes are typed, and three
 * that saved nothing stop the site; it tries again after the back-off. */
Test(scenario, updates_that_keep_failing_back_off)
{
    struct sc_case c = { .name = "crossed", .iters = 200, .driver = "13000" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"typed\"", NULL), 1);
    int stopped = run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"stopped\"",
                                  "failed and cost", NULL);
    int resumed = run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"resumed\"", NULL);
    cr_expect_geq(stopped, 2);
    cr_expect_geq(resumed, stopped - 1);
    cr_expect_leq(resumed, stopped);
    /* Each opening costs at most three failed updates; the back-offs
     * (64, then 128 captures) leave few openings in 200 captures. */
    cr_expect_leq(stopped, 3);
    cr_expect_leq(run_log_total(o.log, "update_failures"), 3 * (resumed + 1));
    sc_done(&o);
}

/* Three sites, a budget for two executable graphs, in the order A B A C A
 * B A C ...: the least recently used goes whatever its site, so A, used
 * every other time, always hits, and B and C evict each other. */
/* Same node count, other node types every time (a new arrangement each
 * iteration): the first refused update types the site's shapes, after
 * which every graph is a new shape - looks miss instead of updates
 * failing, and the misses stop the site. */
Test(scenario, typed_shapes_turn_failed_updates_into_misses)
{
    struct sc_case c = { .name = "retyped", .iters = 200, .driver = "13000" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_total(o.log, "update_failures"), 1);
    cr_expect_geq(run_count_lines(o.log, "\"event\":\"reuse\"", "\"state\":\"stopped\"",
                                  "misses against", NULL), 1);
    sc_done(&o);
}

Test(scenario, eviction_across_sites_is_least_recently_used)
{
    struct sc_case c = { .name = "sites_lru", .iters = 40, .driver = "13000",
                         .config = "[defaults]\ncache_budget = 200KiB\n" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"site\"", NULL), 3);
    /* 20 captures at A: only the first misses. B and C: 10 each, all miss. */
    cr_expect_eq(run_log_total(o.log, "reused"), 19);
    cr_expect_eq(run_log_total(o.log, "evicted"), 19, "every B and C but the last evicted");
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"", "\"reused\":19,", NULL), 1,
                 "all reuse at site A");
    cr_expect_leq(run_log_total(o.log, "kept_bytes_peak"), 200 * 1024);
    sc_done(&o);
}

/* A process of forty sites: its end event goes out in parts, each a whole
 * "end" line, the last with the totals, so no site is lost to the log
 * line's limit (a test suite in one process has a hundred sites). */
Test(scenario, the_end_of_many_sites_is_written_in_parts)
{
    struct sc_case c = { .name = "many_sites", .iters = 3, .driver = "13000" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    int sites = 0, lines = 0;
    char *text = run_read_file(o.log, NULL);
    cr_assert_not_null(text);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"event\":\"end\""))
            continue;
        lines++;
        cr_expect_null(strstr(line, "\"truncated\""), "an end line was truncated: %.200s", line);
        for (char *p = line; (p = strstr(p, "{\"site\":\"")); p++)
            sites++;
    }
    free(text);
    cr_expect_eq(sites, 40, "%d sites in the end event, expected 40", sites);
    cr_expect_geq(lines, 2, "forty sites fit one end line: nothing tested");
    cr_expect_eq(run_log_total(o.log, "captures"), 120);
    sc_done(&o);
}

/* Contexts that come and go (a test suite's fixtures): everything in a
 * context dies with it, so what recap kept of one - released graphs and
 * executable graphs, memory - must go before it, and the records of the
 * handles the program held must not be trusted after it (the real driver
 * reuses handle values). cuda.core's own graph tests crashed under recap
 * on the H200 when a primary context's last release took recap's kept
 * executable graphs with it. Each way a context goes is tried. */
static void contexts_come_and_go(const char *name)
{
    struct sc_case c = { .name = name, .driver = "13000", .iters = 3 };
    struct sc_outcome o;
    sc_compare(&c, &o);   /* same output, no misuse of a dead handle */
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"context_teardown\"", NULL), 3,
                 "%s: one context_teardown event per round", name);
    cr_expect_geq(run_log_total(o.log, "reused"), 3 * 4 - 3,
                  "%s: executable reuse inside each round", name);
    sc_done(&o);
}

Test(scenario, what_recap_keeps_goes_before_a_context_destroyed)
{
    contexts_come_and_go("ctx_teardown");
}

Test(scenario, what_recap_keeps_goes_before_the_primary_context_released)
{
    contexts_come_and_go("ctx_teardown_primary");
}

/* Code unloaded while recap keeps graphs that name it (cuda.core's
 * compiled kernels at its exit): whatever recap kept goes before the
 * unload, so nothing recap destroys later names a kernel that is gone.
 * The stand-in counts such a destroy as a misuse here
 * (STANDIN_UNLOADED_CODE=refuse: whether the real driver survives it is
 * not known; a cuda.core program under recap died at its exit on the
 * H200), and the drain at the end makes recap destroy all it still keeps. */
Test(scenario, what_recap_keeps_goes_before_its_code_is_unloaded)
{
    struct sc_case c = { .name = "code_unload", .iters = 3, .driver = "13000",
                         .env = { "STANDIN_UNLOADED_CODE=refuse", "SCENARIO_DRAIN=1" } };
    struct sc_outcome o;
    sc_compare(&c, &o);   /* same output, no destroy naming unloaded code */
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"code_unload\"", NULL), 3,
                 "one code_unload event per round");
    cr_expect_geq(run_log_total(o.log, "reused"), 3 * 4 - 3,
                  "executable reuse inside each round");
    sc_done(&o);
}

/* A program that keeps one executable graph per shape and updates it
 * itself: recap instantiates and updates exactly what the program asks. */
Test(scenario, program_updating_its_own_executables_is_left_alone)
{
    struct sc_case c = { .name = "own_updates", .iters = 30, .driver = "13000" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 3);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 27);
    cr_expect_eq(run_stat(o.base_stats, "cuGraphExecUpdate_v2"), 27);
    cr_expect_eq(run_log_total(o.log, "instantiations"), 3);
    sc_done(&o);
}

Test(scenario, program_updating_its_own_executables_at_13_3)
{
    struct sc_case c = { .name = "own_updates", .iters = 30, .driver = "13030" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_stat(o.stats, "cuGraphInstantiateWithFlags"), 3);
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 27);
    sc_done(&o);
}

/* --- where a step's time goes (shim/base/step_time.h) ---------------------------------------- */

/* Every figure of the totals' "step" object, and the site's shapes_seen. */
static const char *const step_classes[] = {
    "capture", "instantiate", "launch", "alloc", "free", "host_alloc", "host_free", "sync",
};

/* The params loop of `iters` iterations, each allocating device and pinned
 * host memory before its capture, synchronising once after its launch and
 * freeing both after it (SCENARIO_STEP_MEMORY): its iters - 1 periods from
 * one capture begin to the next hold one of each call, and every capture,
 * instantiation and launch but the last one's (the last period never
 * closes); what is measured fits in the periods. */
static void step_case(const struct sc_case *c)
{
    struct sc_outcome o;
    sc_compare(c, &o);
    long periods = c->iters - 1;
    cr_expect_eq(run_log_step(o.log, "periods"), periods, "%s at %s", c->name, c->driver);
    double parts = 0;
    for (size_t i = 0; i < sizeof step_classes / sizeof *step_classes; i++) {
        char us[32];
        snprintf(us, sizeof us, "%s_us", step_classes[i]);
        cr_expect_eq(run_log_step(o.log, step_classes[i]), periods, "%s at %s: %s", c->name,
                     c->driver, step_classes[i]);
        cr_expect_geq(run_log_step(o.log, us), 0, "%s", us);
        parts += run_log_step(o.log, us);
    }
    cr_expect_gt(run_log_step(o.log, "capture_us"), 0);
    /* Each figure is rounded to a tenth of a microsecond. */
    cr_expect_leq(parts, run_log_step(o.log, "period_us") + 1.0,
                  "%s at %s: %.1f us measured in %.1f us of periods", c->name, c->driver, parts,
                  run_log_step(o.log, "period_us"));
    int observed = c->env[1] && !strcmp(c->env[1], "RECAP_MODE=observe");
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"",
                                 observed ? "\"shapes_seen\":0," : "\"shapes_seen\":1,", NULL),
                 1, "%s at %s: %s", c->name, c->driver,
                 observed ? "observed: no shape known" : "one kind of graph");
    sc_done(&o);
}

Test(scenario, step_time_of_a_loop_recaptured_at_13_3)
{
    step_case(&(struct sc_case){ .name = "params", .iters = 12, .driver = "13030",
                                 .env = { "SCENARIO_STEP_MEMORY=1" } });
}

Test(scenario, step_time_of_a_loop_recorded_by_recap_at_13_0)
{
    step_case(&(struct sc_case){ .name = "params", .iters = 12, .driver = "13000",
                                 .env = { "SCENARIO_STEP_MEMORY=1", "RECAP_SELF_RECORD=on" } });
}

Test(scenario, step_time_of_a_loop_whose_executables_are_updated)
{
    step_case(&(struct sc_case){ .name = "params", .iters = 12, .driver = "13000",
                                 .env = { "SCENARIO_STEP_MEMORY=1", "RECAP_MODE=update" } });
}

/* Observed only, recap tracks no graph: the graphs its captures made are
 * still followed to their instantiations and launches; shapes are not
 * known (0 seen). */
Test(scenario, step_time_of_an_observed_loop)
{
    step_case(&(struct sc_case){ .name = "params", .iters = 12, .driver = "13000",
                                 .env = { "SCENARIO_STEP_MEMORY=1", "RECAP_MODE=observe" } });
}

/* Begun on one thread and ended on another: the capture closes at its
 * site whichever thread ends it, so the launch and synchronisation the
 * first thread makes next are counted. */
Test(scenario, step_time_of_captures_ended_on_another_thread)
{
    struct sc_case c = { .name = "cross_thread", .iters = 10, .driver = "13030" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_log_step(o.log, "periods"), 9);
    cr_expect_eq(run_log_step(o.log, "capture"), 9);
    cr_expect_eq(run_log_step(o.log, "launch"), 9);
    cr_expect_eq(run_log_step(o.log, "sync"), 9);
    sc_done(&o);
}

/* Two shapes in turn: two kinds of graph over the run. */
Test(scenario, alternating_shapes_are_two_shapes_seen)
{
    struct sc_case c = { .name = "alternate", .iters = 20, .driver = "13030" };
    struct sc_outcome o;
    sc_compare(&c, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"", "\"shapes_seen\":2,", NULL), 1);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"", "\"shapes_counted\":20,", NULL), 1);
    sc_done(&o);
}
