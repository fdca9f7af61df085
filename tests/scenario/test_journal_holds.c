/*
 * test_journal_holds.c - a capture's journal owns what it replays.
 *
 * A capture recap records itself (13.0) or a recapture (13.3) may switch
 * to a driver capture at any call, replaying the calls made so far. The
 * program may meanwhile have destroyed an event those calls used (a
 * temporary event of a fork and join, on the capturing thread or on
 * another one while the switch waits for the capturing thread) or freed
 * memory a memset named: the replay must still find them, so the program
 * gets exactly what a plain capture gives. Where recap cannot replay
 * exactly (a call it cannot copy made while the switch waits, a replay
 * the driver refuses), the capture is invalidated - the program gets the
 * driver's error for a broken capture - never a graph that lacks work.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/run.h"

/* The drivers a switch happens under: recap recording itself, and the
 * 13.3 recapture with each point where a failure surfaces. */
struct hold_driver {
    char version[8];
    char failure[8];
};

static const struct hold_driver drivers[] = {
    { "13000", "call" }, { "13030", "call" }, { "13030", "later" }, { "13030", "end" },
};

struct hold_case {
    char name[32];
    struct hold_driver driver;
};

struct hold_outcome {
    char *dir;
    char log[RUN_PATH_MAX], stats[RUN_PATH_MAX], base_stats[RUN_PATH_MAX];
    struct run_result base, recap;
};

static void hold_spec(struct run_spec *spec, const struct hold_case *c, int iters,
                      const char *stats, const char *faults)
{
    static char iters_text[16];
    memset(spec, 0, sizeof *spec);
    spec->argv[0] = run_env_path("SCENARIO_BIN");
    spec->argv[1] = c->name;
    snprintf(iters_text, sizeof iters_text, "%d", iters);
    spec->argv[2] = iters_text;
    spec->timeout_s = 300;
    run_setenv(spec, "STANDIN_DRIVER_VERSION", "%s", c->driver.version);
    run_setenv(spec, "STANDIN_RECAPTURE_FAILURE", "%s", c->driver.failure);
    run_setenv(spec, "SCENARIO_STATS", "%s", stats);
    if (faults)
        run_setenv(spec, "STANDIN_FAULTS", "%s", faults);
    const char *async = getenv("STANDIN_ASYNC");
    run_setenv(spec, "STANDIN_ASYNC", "%s", async && *async ? async : "0");
    run_forward_env(spec, "SCENARIO_KERNELS");
}

/* Runs the case without recap and under recap (recording itself where the
 * driver has no recapture API); `faults` only under recap. */
static void hold_run(const struct hold_case *c, int iters, const char *faults,
                     struct hold_outcome *o)
{
    struct run_spec spec;
    memset(o, 0, sizeof *o);
    run_pair_paths(&o->dir, o->log, o->stats, o->base_stats);
    hold_spec(&spec, c, iters, o->base_stats, NULL);
    cr_assert_eq(run_program(&spec, &o->base), 0);
    hold_spec(&spec, c, iters, o->stats, faults);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", o->log);
    run_setenv(&spec, "RECAP_SELF_RECORD", "on");
    cr_assert_eq(run_program(&spec, &o->recap), 0);
    cr_assert_eq(run_stat(o->stats, "misuses"), 0, "%s at %s: the stand-in saw misuse under recap "
                 "(%s)\n%s", c->name, c->driver.version, o->recap.err, o->recap.out);
}

static void hold_done(struct hold_outcome *o)
{
    run_result_free(&o->base);
    run_result_free(&o->recap);
    run_cleanup_dir(o->dir);
}

/* Same output and status as without recap, at least one switch (a
 * fallback), no error logged, and the program's releases made once each:
 * as many by the driver as without recap, nothing left alive. */
static void expect_exact_after_switches(const struct hold_case *c, struct hold_outcome *o,
                                        const char *release)
{
    cr_expect_eq(o->recap.status, o->base.status, "%s: exit status", c->name);
    cr_expect_str_eq(o->recap.out, o->base.out, "%s at %s/%s: output differs under recap\n%s",
                     c->name, c->driver.version, c->driver.failure, o->recap.err);
    cr_expect_geq(run_log_total(o->log, "fallbacks"), 1, "%s at %s: no switch happened", c->name,
                  c->driver.version);
    cr_expect_eq(run_count_lines(o->log, "\"event\":\"error\"", NULL), 0, "%s: %s", c->name,
                 o->recap.err);
    cr_expect_eq(run_stat(o->stats, release), run_stat(o->base_stats, release),
                 "%s: %ld %s under recap, %ld without", c->name, run_stat(o->stats, release),
                 release, run_stat(o->base_stats, release));
    cr_expect_eq(run_stat(o->stats, "live_events"), run_stat(o->base_stats, "live_events"),
                 "%s: events left alive under recap", c->name);
}

/* Every named scenario under every driver, by value (Criterion hands each
 * parameter to a new process), in memory Criterion can hand over. */
static struct hold_case *every(const char *const *names, size_t nnames, size_t *n)
{
    size_t ndrivers = sizeof drivers / sizeof drivers[0];
    struct hold_case *all = cr_malloc(nnames * ndrivers * sizeof *all);
    *n = 0;
    for (size_t i = 0; i < nnames; i++)
        for (size_t d = 0; d < ndrivers; d++) {
            snprintf(all[*n].name, sizeof all[*n].name, "%s", names[i]);
            all[*n].driver = drivers[d];
            (*n)++;
        }
    return all;
}

static void free_cases(struct criterion_test_params *p)
{
    cr_free(p->params);
}

ParameterizedTestParameters(journal_holds, temporary_events_outlive_the_switch)
{
    static const char *const names[] = { "events_fork_join", "events_other_thread" };
    size_t n;
    struct hold_case *all = every(names, 2, &n);
    return cr_make_param_array(struct hold_case, all, n, free_cases);
}

/* Events created, used for a fork and join and destroyed inside the
 * capture, before it switches: on the capturing thread, and on a second
 * thread whose calls wait for the capturing thread's switch. */
ParameterizedTest(struct hold_case *c, journal_holds, temporary_events_outlive_the_switch,
                  .timeout = 300)
{
    struct hold_outcome o;
    hold_run(c, 12, NULL, &o);
    expect_exact_after_switches(c, &o, "cuEventDestroy_v2");
    hold_done(&o);
}

ParameterizedTestParameters(journal_holds, memory_freed_in_the_capture_outlives_the_switch)
{
    static const char *const names[] = { "free_in_capture" };
    size_t n;
    struct hold_case *all = every(names, 1, &n);
    return cr_make_param_array(struct hold_case, all, n, free_cases);
}

/* Device memory a memset of the capture names, freed inside the (relaxed)
 * capture before it switches: the replay's memset still finds it, so the
 * graph holds every node (the output prints the count). */
ParameterizedTest(struct hold_case *c, journal_holds,
                  memory_freed_in_the_capture_outlives_the_switch, .timeout = 300)
{
    struct hold_outcome o;
    hold_run(c, 12, NULL, &o);
    expect_exact_after_switches(c, &o, "cuMemFree_v2");
    hold_done(&o);
}

/* The lines of `out` up to the one starting with `prefix` (exclusive). */
static char *lines_before(const char *out, const char *prefix)
{
    const char *at = strstr(out, prefix);
    size_t n = at ? (size_t)(at - out) : strlen(out);
    char *copy = malloc(n + 1);
    memcpy(copy, out, n);
    copy[n] = '\0';
    return copy;
}

static char *line_of(const char *out, const char *prefix)
{
    const char *at = strstr(out, prefix);
    if (!at)
        return strdup("");
    size_t n = strcspn(at, "\n");
    char *line = malloc(n + 1);
    memcpy(line, at, n);
    line[n] = '\0';
    return line;
}

/* What the program gets where recap cannot replay exactly: the iteration
 * `it` is an invalidated capture (its end returns 901,
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and gives no graph), everything
 * before it is as without recap, the log names why, and the site is not
 * recorded again (every later capture ends well). */
static void expect_invalidated_at(struct hold_outcome *o, const char *it, const char *why)
{
    char *before_base = lines_before(o->base.out, it), *before = lines_before(o->recap.out, it);
    cr_expect_str_eq(before, before_base, "output before %s differs", it);
    char *line = line_of(o->recap.out, it);
    cr_expect_neq(strstr(line, "end=901 inst=-1"), NULL, "%s: not invalidated\n%s", line,
                  o->recap.err);
    cr_expect_eq(run_count_lines(o->log, "\"event\":\"error\"", why, "invalidated", NULL), 1,
                 "the log does not say why (%s)", why);
    const char *after = strstr(o->recap.out, it);
    after = after ? strchr(after, '\n') : NULL;
    cr_expect(after && strstr(after, "end=9") == NULL, "a later capture failed too:\n%s",
              o->recap.out);
    free(before_base);
    free(before);
    free(line);
}

/* Stream-ordered memory (allocation and free nodes) on the second thread,
 * after the switch became due: recap cannot copy those calls, so it can
 * never replay them; the capture is invalidated instead. */
Test(journal_holds, a_call_recap_cannot_copy_while_the_switch_waits_invalidates, .timeout = 300)
{
    for (int d = 0; d < 2; d++) {
        struct hold_case c = { "events_other_thread_alloc", drivers[d] };
        struct hold_outcome o;
        hold_run(&c, 8, NULL, &o);
        expect_invalidated_at(&o, "it=3 ", "memory allocation");
        hold_done(&o);
    }
}

/* A replay the driver refuses (the stand-in fails the switch's replayed
 * cuEventRecord, the third of the run under recap at 13.0) invalidates the
 * capture rather than handing the program a graph without that work. */
Test(journal_holds, a_replay_that_fails_invalidates_instead_of_shortening, .timeout = 300)
{
    struct hold_case c = { "events_fork_join", drivers[0] };
    struct hold_outcome o;
    hold_run(&c, 8, "cuEventRecord@3=999", &o);
    expect_invalidated_at(&o, "it=3 ", "replaying call");
    hold_done(&o);
}
