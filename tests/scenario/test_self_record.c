/*
 * test_self_record.c - recap recording repeat captures itself (13.0 driver).
 *
 * With RECAP_SELF_RECORD=on and a driver without the recapture API, recap
 * answers a repeat capture itself instead of starting a driver capture.
 * Every scenario program must then behave exactly as without recap (same
 * stdout, same exit status, no misuse seen by the stand-in), and in the
 * loops recap was built for the driver sees no capture at all after the
 * first ones, and one node setter per changed node.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/run.h"

struct sr_outcome {
    char *dir;
    char log[RUN_PATH_MAX], stats[RUN_PATH_MAX], base_stats[RUN_PATH_MAX];
    struct run_result base, recap;
};

static void sr_spec(struct run_spec *spec, const char *name, int iters, const char *stats)
{
    static char iters_text[16];
    memset(spec, 0, sizeof *spec);
    spec->argv[0] = run_env_path("SCENARIO_BIN");
    spec->argv[1] = name;
    snprintf(iters_text, sizeof iters_text, "%d", iters);
    spec->argv[2] = iters_text;
    spec->timeout_s = 300;
    run_setenv(spec, "STANDIN_DRIVER_VERSION", "13000");
    run_setenv(spec, "SCENARIO_STATS", "%s", stats);
    /* At exit an allocation nothing can satisfy makes recap release all it
     * keeps: the live objects left are then the program's own. */
    run_setenv(spec, "SCENARIO_DRAIN", "1");
    const char *async = getenv("STANDIN_ASYNC");
    run_setenv(spec, "STANDIN_ASYNC", "%s", async && *async ? async : "0");
    run_forward_env(spec, "SCENARIO_KERNELS");
    run_forward_env(spec, "SCENARIO_COUNT_NODES");
}

/* RECAP_COPY_HELD for the run under recap, where a test sets it. */
static const char *copy_held;

/* Runs `name` without recap and with recap recording captures itself, and
 * requires the same behaviour. */
static void sr_compare(const char *name, int iters, struct sr_outcome *o)
{
    struct run_spec spec;
    memset(o, 0, sizeof *o);
    run_pair_paths(&o->dir, o->log, o->stats, o->base_stats);

    sr_spec(&spec, name, iters, o->base_stats);
    cr_assert_eq(run_program(&spec, &o->base), 0);
    sr_spec(&spec, name, iters, o->stats);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", o->log);
    run_setenv(&spec, "RECAP_SELF_RECORD", "on");
    if (copy_held)
        run_setenv(&spec, "RECAP_COPY_HELD", "%s", copy_held);
    /* Where copies are made, the driver's sharing of a clone's arguments
     * (tests/standin/standin_internal.h: si_graph_check_shared) is on. */
    run_setenv(&spec, "STANDIN_CLONE_SHARES", "1");
    cr_assert_eq(run_program(&spec, &o->recap), 0);

    cr_assert_eq(o->recap.status, o->base.status, "%s: exit status %d under recap, %d without\n%s",
                 name, o->recap.status, o->base.status, o->recap.err);
    cr_assert_str_eq(o->recap.out, o->base.out, "%s: output differs under recap\nstderr: %s", name,
                     o->recap.err);
    cr_assert_eq(run_stat(o->stats, "misuses"), 0, "%s: the stand-in saw misuse under recap: %s",
                 name, o->recap.err);
    cr_assert_eq(run_stat(o->stats, "library_kernels"), run_env_is("SCENARIO_KERNELS", "library"),
                 "%s: SCENARIO_KERNELS not in effect", name);
    cr_assert_eq(run_stat(o->stats, "live_graphs"), run_stat(o->base_stats, "live_graphs"),
                 "%s: graphs left alive under recap", name);
    cr_assert_eq(run_stat(o->stats, "live_execs"), run_stat(o->base_stats, "live_execs"),
                 "%s: executable graphs left alive under recap", name);
}

static void sr_done(struct sr_outcome *o)
{
    run_result_free(&o->base);
    run_result_free(&o->recap);
    run_cleanup_dir(o->dir);
}

/* From the end totals: capture events of a steady site are sampled. */
static int by_recap(struct sr_outcome *o)
{
    return (int)run_log_total(o->log, "by_recap");
}

/* Every scenario program, as it is (names by value: Criterion runs each
 * parameter in a new process, where pointers into .rodata may move). */
struct sr_name {
    char name[32];
};

static const struct sr_name every_scenario[] = {
#define N(x) { x }
    N("params"), N("mode_thread_local"), N("mode_relaxed"), N("variants"), N("keep_graph"),
    N("alternate"), N("fresh_shapes"), N("retyped"), N("cycle_aab"), N("delta"), N("nochange"),
    N("switch"), N("fork_join"), N("extra_args"), N("topo_first"), N("topo_mid"), N("topo_last"),
    N("topo_extra"), N("topo_missing"), N("cycle3"), N("mixed3"), N("cycle8"), N("mixed8"),
    N("cross_thread"), N("ptsz_cross_thread"), N("broken"), N("double_destroy"), N("mutate"),
    N("oom"), N("user_objects"), N("alloc_nodes"), N("inflight"), N("inflight_fork"), N("inspect"),
    N("threads"), N("sites_lru"), N("own_updates"), N("own_updates1"), N("own_plain1"),
    N("switch_first"), N("switch_mid"), N("switch_end"), N("switch_extra"), N("chain40"),
    N("collide3"), N("crossed"), N("conditional"), N("switch_attr"),
    N("added_node"), N("added_node_late"), N("query_at_end"), N("query_at_end_add"),
    N("query_at_begin"), N("query_at_begin_end_null"), N("query_at_begin_look"), N("end_null"),
    N("query_at_begin_fork"), N("events_fork_join"), N("events_other_thread"),
    N("free_in_capture"), N("keep_every_graph"), N("keep_every_graph_delta"),
    N("external_events"), N("pool"), N("pool_before"),
#undef N
};

ParameterizedTestParameters(self_record, same_behaviour)
{
    return cr_make_param_array(struct sr_name, (void *)every_scenario,
                               sizeof every_scenario / sizeof every_scenario[0]);
}

ParameterizedTest(struct sr_name *p, self_record, same_behaviour, .timeout = 300)
{
    struct sr_outcome o;
    /* 25: the in-flight scenarios synchronise every fifth iteration, and
     * their result is defined only after the last one did. */
    sr_compare(p->name, 25, &o);
    sr_done(&o);
}

static long graph_setters(const char *stats)
{
    return run_stat(stats, "cuGraphKernelNodeSetParams_v2") +
           run_stat(stats, "cuGraphMemsetNodeSetParams") +
           run_stat(stats, "cuGraphMemcpyNodeSetParams") +
           run_stat(stats, "cuGraphHostNodeSetParams");
}

static long exec_setters(const char *stats)
{
    return run_stat(stats, "cuGraphExecKernelNodeSetParams_v2") +
           run_stat(stats, "cuGraphExecMemsetNodeSetParams") +
           run_stat(stats, "cuGraphExecMemcpyNodeSetParams") +
           run_stat(stats, "cuGraphExecHostNodeSetParams");
}

/* The loop recap was built for: every capture after the first is recorded
 * by recap, so the driver is asked for one capture in all; each changed
 * node costs one setter, on the executable graph (kernel arguments reach
 * the graph's own nodes only when someone looks). */
Test(self_record, steady_loop_needs_no_driver_capture, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("delta", 40, &o);
    int recorded = by_recap(&o);
    cr_expect_geq(recorded, 38, "%d of 40 captures recorded by recap", recorded);
    cr_expect_eq(run_stat(o.stats, "cuStreamBeginCapture_v2"), 40 - recorded,
                 "the driver captured %ld times for %d captures recap did not record",
                 run_stat(o.stats, "cuStreamBeginCapture_v2"), 40 - recorded);
    cr_expect_eq(run_stat(o.base_stats, "cuStreamBeginCapture_v2"), 40);
    long changed = run_log_total(o.log, "changed");
    cr_expect_eq(changed, recorded, "one node changes per iteration, %ld changes", changed);
    cr_expect_eq(exec_setters(o.stats), changed, "%ld executable-node setters for %ld changed "
                 "nodes", exec_setters(o.stats), changed);
    cr_expect_eq(graph_setters(o.stats), 0, "%ld graph-node setters", graph_setters(o.stats));
    cr_expect_eq(run_log_total(o.log, "delta"), recorded);
    const char *measuring = getenv("RECAP_LIB_PHASE_CLOCK");
    if (measuring == NULL || strcmp(measuring, "1") != 0)
        cr_expect_null(strstr(o.recap.err, "recap phase"), "the normal build prints a phase table");
    /* A released graph whose recording no edit outdated is kept without
     * a node count (the driver walks the graph for it): only the captures
     * recap did not record count nodes. */
    cr_expect_leq(run_stat(o.stats, "cuGraphGetNodes"), 2 * (40 - recorded),
                  "%ld node counts for %d captures recap did not record",
                  run_stat(o.stats, "cuGraphGetNodes"), 40 - recorded);
    sr_done(&o);
}

/* A program that never destroys the graphs it captures (PyTorch does once
 * CUDAGraph.enable_debug_mode() was called anywhere in the process)
 * releases nothing to record into: from the second graph kept alike, recap
 * records each capture into a copy of the newest graph the program keeps,
 * and says so once in the log. Before copies, every capture was the
 * driver's (issue 33). */
Test(self_record, a_program_that_keeps_every_graph_is_recorded_into_copies, .timeout = 300)
{
    struct sr_outcome o;
    copy_held = "on";
    sr_compare("keep_every_graph_delta", 40, &o);
    copy_held = NULL;
    int recorded = by_recap(&o);
    cr_expect_geq(recorded, 38, "%d of 40 captures recorded by recap", recorded);
    cr_expect_eq(run_stat(o.stats, "cuStreamBeginCapture_v2"), 40 - recorded,
                 "the driver captured %ld times for %d captures recap did not record",
                 run_stat(o.stats, "cuStreamBeginCapture_v2"), 40 - recorded);
    cr_expect_eq(run_stat(o.stats, "cuGraphClone"), recorded, "%ld copies for %d recorded",
                 run_stat(o.stats, "cuGraphClone"), recorded);
    cr_expect_eq(run_log_total(o.log, "reused"), 39, "every instantiation but the first reuses");
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "keeps the graphs it captures",
                                 NULL), 1, "one warning says why recap copies graphs");
    sr_done(&o);
}

/* Copies are off by default (RECAP_COPY_HELD=on turns them on; round 24:
 * two whole runs of PyTorch's graph tests crashed in capture_end after a
 * capture recorded into a copy). A program that keeps every graph gets
 * driver captures, and the log says why, and how to turn copies on,
 * once. The same with RECAP_COPY_HELD=off said. */
static void keeping_program_is_told(const char *setting)
{
    struct sr_outcome o;
    copy_held = setting;
    sr_compare("keep_every_graph_delta", 40, &o);
    copy_held = NULL;
    cr_expect_eq(run_stat(o.stats, "cuGraphClone"), 0);
    cr_expect_eq(by_recap(&o), 0);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"warning\"", "keeps the graphs it captures",
                                 "RECAP_COPY_HELD=on", NULL), 1);
    sr_done(&o);
}

Test(self_record, by_default_a_program_that_keeps_every_graph_is_told, .timeout = 300)
{
    keeping_program_is_told(NULL);
}

Test(self_record, without_copies_a_program_that_keeps_every_graph_is_told, .timeout = 300)
{
    keeping_program_is_told("off");
}

/* PyTorch counts a graph's nodes at every capture's end
 * (cuGraphGetNodes with no array). Counting reads structure, which a
 * recorded capture never changes: it must not write the recorded
 * arguments into the graph's nodes (a setter per changed node, 10 us a
 * decode step on the H200), only a read of node parameters does. */
Test(self_record, counting_a_graphs_nodes_writes_no_argument, .timeout = 300)
{
    struct sr_outcome plain, counting;
    sr_compare("delta", 40, &plain);
    setenv("SCENARIO_COUNT_NODES", "1", 1);
    sr_compare("delta", 40, &counting);
    unsetenv("SCENARIO_COUNT_NODES");
    cr_expect_geq(by_recap(&counting), 38);
    cr_expect_eq(run_stat(counting.base_stats, "cuGraphGetNodes"), 40, "the program did not count");
    cr_expect_eq(run_stat(counting.stats, "cuGraphKernelNodeSetParams_v2"),
                 run_stat(plain.stats, "cuGraphKernelNodeSetParams_v2"),
                 "counting nodes wrote %ld arguments into graph nodes, %ld without counting",
                 run_stat(counting.stats, "cuGraphKernelNodeSetParams_v2"),
                 run_stat(plain.stats, "cuGraphKernelNodeSetParams_v2"));
    sr_done(&plain);
    sr_done(&counting);
}

/* Recordings describe their graph until the program edits some graph:
 * node setters do not name the graph, so one edit outdates every
 * recording of every site. That stop must be in the log. */
Test(self_record, a_graph_edit_that_outdates_recordings_is_logged, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("mutate", 20, &o);
    cr_expect_geq(run_count_lines(o.log, "\"event\":\"warning\"", "the program edited a graph",
                                  "cuGraphKernelNodeSetParams", NULL), 1,
                  "no warning names the edit that outdated the recordings");
    sr_done(&o);
}

/* The samples of a step in the phase table on stderr, or -1 if absent. */
static long phase_samples(const char *err, const char *step)
{
    char line[96];
    snprintf(line, sizeof line, "recap phase %s ", step);
    const char *at = strstr(err, line);
    const char *n = at ? strstr(at, " n=") : NULL;
    return n ? atol(n + 3) : -1;
}

/* The measuring build (meson -Dphase_clock=true) times each step of the
 * captures and instantiations it serves, and only the steps taken: a
 * recorded capture's begin and end once each, every instantiation of a
 * graph recap tracks, and no observed capture. */
Test(self_record, the_phase_clock_build_times_each_step_it_took, .timeout = 300)
{
    setenv("RECAP_LIB", run_env_path("RECAP_PHASE_LIB"), 1);   /* this test's own process */
    struct sr_outcome o;
    sr_compare("delta", 40, &o);
    long recorded = by_recap(&o);
    cr_expect_geq(recorded, 38, "%ld of 40 captures recorded by recap", recorded);
    cr_expect_eq(phase_samples(o.recap.err, "begin recorded: total"), recorded, "%s", o.recap.err);
    cr_expect_eq(phase_samples(o.recap.err, "end recorded: total"), recorded, "%s", o.recap.err);
    cr_expect_eq(phase_samples(o.recap.err, "begin: stack"), 40, "%s", o.recap.err);
    cr_expect_eq(phase_samples(o.recap.err, "instantiate: total"), 40, "%s", o.recap.err);
    cr_expect_eq(phase_samples(o.recap.err, "observe begin: claim"), -1, "%s", o.recap.err);
    sr_done(&o);
}

/* Kernel and host-function changes over two streams, most nodes changing
 * each time: each goes from the recording straight into the executable
 * graph (one setter each, cheaper on the H200 than the graph node's write
 * plus its share of a whole update), and the graph's nodes are not
 * written while nobody looks at them. */
Test(self_record, many_changes_go_into_the_executable_graph_node_by_node, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("fork_join", 30, &o);
    long changed = run_log_total(o.log, "changed");
    cr_expect_gt(changed, 0);
    cr_expect_eq(exec_setters(o.stats), changed, "%ld executable-node setters for %ld changes",
                 exec_setters(o.stats), changed);
    cr_expect_eq(graph_setters(o.stats), 0, "%ld graph-node setters", graph_setters(o.stats));
    cr_expect_eq(run_stat(o.stats, "cuGraphExecUpdate_v2"), 0);
    cr_expect_geq(run_log_total(o.log, "delta"), by_recap(&o));
    sr_done(&o);
}

/* Kernels launched as the CUDA runtime launches them (a library's CUkernel
 * named as the launch's function): the driver's node then holds the
 * CUkernel and its CUfunction, not what the call named. recap reads that
 * from the node once, not before every write - on the H200 the read cost
 * as much as the write (instantiation at 1000 nodes: 413 us with it,
 * 316 us without). */
Test(self_record, library_kernel_nodes_are_read_once, .timeout = 300)
{
    struct sr_outcome o;
    setenv("SCENARIO_KERNELS", "library", 1);  /* this test's own process */
    sr_compare("fork_join", 30, &o);
    long changed = run_log_total(o.log, "changed");
    int recorded = by_recap(&o);
    cr_assert_geq(recorded, 25, "only %d captures recorded by recap", recorded);
    long per_capture = changed / recorded;
    cr_expect_gt(per_capture, 0);
    long reads = run_stat(o.stats, "cuGraphKernelNodeGetParams_v2");
    cr_expect_leq(reads, per_capture, "%ld kernel-node reads for %ld changes in %d captures "
                  "(%ld a capture)", reads, changed, recorded, per_capture);
    cr_expect_eq(run_stat(o.base_stats, "cuGraphKernelNodeGetParams_v2"), 0);
    sr_done(&o);
}

/* cuda.core's pattern: the capture's graph asked for right before the end,
 * once every call was made. The driver capture resumes in the graph recap
 * recorded into (no call replayed, no capture of every node), the
 * program holds the graph the end returns, and the site goes on being
 * recorded. */
Test(self_record, a_graph_asked_for_at_the_end_resumes_in_that_graph, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("query_at_end", 30, &o);
    cr_expect_neq(strstr(o.recap.out, "same_graph=1"), NULL, "%s", o.recap.out);
    cr_expect_eq(strstr(o.recap.out, "same_graph=0"), NULL, "%s", o.recap.out);
    long resumed = run_stat(o.stats, "cuStreamBeginCaptureToGraph");
    cr_expect_geq(resumed, 27, "%ld captures resumed in their graph", resumed);
    cr_expect_leq(run_stat(o.stats, "cuStreamBeginCapture_v2"), 3, "%ld driver captures begun",
                  run_stat(o.stats, "cuStreamBeginCapture_v2"));
    cr_expect_eq(run_count_lines(o.log, "site not recaptured", NULL), 0);
    /* Recorded by recap to the last call: counted and logged as such. */
    cr_expect_geq(by_recap(&o), 27, "%d captures recorded by recap", by_recap(&o));
    cr_expect_eq(run_log_total(o.log, "fallbacks"), 0);
    cr_expect_geq(run_count_lines(o.log, "\"event\":\"capture\"", "\"by\":\"recap\"",
                                  "resumed in that graph", NULL), 1);
    sr_done(&o);
}

/* The same, and from the sixth capture on the program adds a node to the
 * graph it was handed, makes it the capture's dependency and launches
 * again: all of it through the driver, in that same graph. */
Test(self_record, a_graph_asked_for_at_the_end_may_be_changed_by_the_program, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("query_at_end_add", 20, &o);
    cr_expect_neq(strstr(o.recap.out, "nodes=5 "), NULL, "%s", o.recap.out);
    sr_done(&o);
}

/* cuda.core 1.2's GraphBuilder asks for the graph right after the begin
 * and instantiates that handle after the end. recap lends the program the
 * graph it records into: no driver capture, no switch, and the site is
 * not left to driver captures (it was before, in round 12). */
static void expect_recorded_throughout(struct sr_outcome *o, int iters)
{
    cr_expect_geq(by_recap(o), iters - 3, "%d of %d captures recorded by recap", by_recap(o),
                  iters);
    cr_expect_leq(run_stat(o->stats, "cuStreamBeginCapture_v2"), 3, "%ld driver captures begun",
                  run_stat(o->stats, "cuStreamBeginCapture_v2"));
    cr_expect_eq(run_count_lines(o->log, "site not recaptured", NULL), 0);
    cr_expect_eq(run_log_total(o->log, "fallbacks"), 0);
}

Test(self_record, a_graph_asked_for_at_the_begin_is_recorded_into, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("query_at_begin", 30, &o);
    cr_expect_neq(strstr(o.recap.out, "same_graph=1"), NULL, "%s", o.recap.out);
    cr_expect_eq(strstr(o.recap.out, "same_graph=0"), NULL, "%s", o.recap.out);
    expect_recorded_throughout(&o, 30);
    sr_done(&o);
}

/* cuda.core's newest end_building ends without wanting the graph (the
 * driver ends the capture all the same, and the graph the query gave
 * stays the program's); an end that wants no graph and never asked for
 * one leaves recap the graph to keep. */
Test(self_record, an_end_that_wants_no_graph_ends_the_capture, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("query_at_begin_end_null", 30, &o);
    cr_expect_neq(strstr(o.recap.out, "status_after=0 "), NULL, "%s", o.recap.out);
    expect_recorded_throughout(&o, 30);
    sr_done(&o);
    sr_compare("end_null", 30, &o);
    cr_expect_eq(strstr(o.recap.out, "status_after=1"), NULL, "%s", o.recap.out);
    expect_recorded_throughout(&o, 30);
    sr_done(&o);
}

/* A lent graph the program looked at mid-capture: the count it saw is
 * the driver's (`seen`, "seen=N "), the end returned the graph the
 * program holds, and at least `switches` captures went on in that graph. */
static void expect_looked_at_lent_graph(struct sr_outcome *o, const char *seen, long switches)
{
    cr_expect_neq(strstr(o->recap.out, seen), NULL, "%s", o->recap.out);
    cr_expect_eq(strstr(o->recap.out, "same_graph=0"), NULL, "%s", o->recap.out);
    long into = run_stat(o->stats, "cuStreamBeginCaptureToGraph");
    cr_expect_geq(into, switches, "%ld captures went on in the lent graph", into);
}

/* The program counts the nodes of the graph it was lent mid-capture: the
 * capture becomes a driver capture in that same graph first (cut back to
 * the node of the one call made so far), so the count is the driver's,
 * and the graph the end returns is still the one the program holds. */
Test(self_record, a_lent_graph_looked_at_mid_capture_shows_the_calls_so_far, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("query_at_begin_look", 20, &o);
    expect_looked_at_lent_graph(&o, "seen=1 ", 15);
    cr_expect_geq(run_count_lines(o.log, "\"path\":\"fallback\"",
                                  "graph call while it held the capture's graph", NULL), 1);
    sr_done(&o);
}

/* The same look while work is forked to a second stream: the graph is
 * emptied and every call so far replayed into it (no resume on one
 * stream), so the count is the driver's; the iterations without a look
 * stay recorded by recap. */
Test(self_record, a_lent_graph_looked_at_across_a_fork_is_replayed_into, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("query_at_begin_fork", 20, &o);
    expect_looked_at_lent_graph(&o, "seen=2 ", 7);
    cr_expect_geq(by_recap(&o), 7, "%d captures recorded by recap", by_recap(&o));
    sr_done(&o);
}

/* A program that reads its graph's node parameters or clones it sees the
 * arguments of this capture: recap brings its lazily written nodes up to
 * date first (and only then). */
Test(self_record, graphs_read_by_the_program_are_current, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("inspect", 20, &o);
    cr_expect_geq(by_recap(&o), 18, "only %d captures recorded by recap", by_recap(&o));
    cr_expect_gt(graph_setters(o.stats), 0, "the reads did not bring any node up to date");
    sr_done(&o);
}

/* Fork and join over a second stream: recorded too, with the join. */
Test(self_record, fork_join_is_recorded, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("fork_join", 30, &o);
    cr_expect_geq(by_recap(&o), 25, "only %d captures recorded by recap", by_recap(&o));
    sr_done(&o);
}

/* Without the switch, nothing is recorded by recap. */
/* A launch whose grid changes (scenario params: 2 blocks one iteration in
 * three, else 4, which covers another part of the buffer) is recorded like
 * new arguments: no switch, and the results are those of the new grid. */
Test(self_record, launch_dimensions_change_without_a_switch, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare("params", 24, &o);
    cr_expect_eq(run_log_total(o.log, "fallbacks"), 0);
    cr_expect_geq(by_recap(&o), 22, "%d recorded by recap", by_recap(&o));
    sr_done(&o);
}

/* Recap's default (RECAP_SELF_RECORD unset or empty, no configuration
 * file): on; RECAP_SELF_RECORD=off turns it off. */
static long by_recap_with(const char *setting)
{
    struct run_spec spec;
    struct run_result r;
    char *dir = run_temp_dir();
    const char *log = run_path(dir, "recap.jsonl");
    sr_spec(&spec, "delta", 10, run_path(dir, "stats"));
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", log);
    run_setenv(&spec, "RECAP_SELF_RECORD", "%s", setting);
    cr_assert_eq(run_program(&spec, &r), 0);
    cr_expect_eq(run_log_total(log, "captures"), 10);
    long n = run_log_total(log, "by_recap");
    run_result_free(&r);
    run_cleanup_dir(dir);
    return n;
}

Test(self_record, on_by_default_and_off_when_asked, .timeout = 300)
{
    cr_expect_geq(by_recap_with(""), 8, "recap's default records repeat captures itself");
    cr_expect_eq(by_recap_with("off"), 0);
}

/* Each switch point: where the calls stop matching the recorded graph -
 * at the first call, in the middle, at the end (a call missing), or past
 * the graph (a call too many) - the capture becomes a driver capture with
 * the calls so far replayed, the program's results are the same, and the
 * log says why. */
struct sr_switch {
    char name[32];
    char reason[80];
};

static const struct sr_switch switch_points[] = {
    { "switch_first", "cuLaunchKernel changed the function" },
    { "switch_mid", "the capture called cuMemsetD32Async where its graph had another call" },
    { "switch_end", "the capture ended after" },
    { "switch_extra", "the capture made more calls than the graph holds" },
    { "switch_attr", "the program destroyed a stream of the capture or changed its attributes" },
};

ParameterizedTestParameters(self_record, switch_points)
{
    return cr_make_param_array(struct sr_switch, (void *)switch_points,
                               sizeof switch_points / sizeof switch_points[0]);
}

ParameterizedTest(struct sr_switch *p, self_record, switch_points, .timeout = 300)
{
    struct sr_outcome o;
    sr_compare(p->name, 24, &o);
    /* Iteration 3 switches. The odd iteration's graph (another kernel,
     * call or length) is kept beside the usual one, and every later odd
     * iteration matches it as its calls arrive: one switch in all, and
     * the iteration after each odd one binds to the usual graph again. A
     * stream attribute changed mid-capture is the driver's to see: that
     * switches every time. */
    long fallbacks = run_log_total(o.log, "fallbacks");
    int attr = !strcmp(p->name, "switch_attr");
    cr_expect_geq(fallbacks, attr ? 6 : 1, "%s: %ld fallbacks", p->name, fallbacks);
    if (!attr)
        cr_expect_eq(fallbacks, 1, "%s: %ld fallbacks: an odd iteration seen before must match "
                     "its own graph", p->name, fallbacks);
    cr_expect_geq(by_recap(&o), attr ? 12 : 22, "%s: %d recorded by recap", p->name,
                  by_recap(&o));
    cr_expect_gt(run_count_lines(o.log, "\"path\":\"fallback\"", p->reason, NULL), 0,
                 "%s: no fallback says \"%s\"", p->name, p->reason);
    sr_done(&o);
}
