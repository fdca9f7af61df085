/*
 * test_observables.c - what a program observes mid-capture is the same with
 * and without recap.
 *
 * Runs tests/scenario/observables.c (27 captures at one site, one mid-capture
 * observation per iteration: capture status and info, fork and join, the
 * prohibited calls of READINGS.md "Capture prohibitions" (host callbacks,
 * memory attachment and host registration included) and the
 * invalidation they cause, the thread's capture mode) without recap and
 * under LD_PRELOAD=librecap.so, on the stand-in at driver 13000 (recap makes
 * plain captures) and 13030 (recapture), each also with RECAP_SELF_RECORD=on
 * (issue 13: on a driver without the recapture API recap will record repeat
 * captures itself; recap ignores the variable until then), and requires
 * identical stdout and exit status, and no stand-in misuse.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/run.h"

struct obs_case {
    const char *driver;
    const char *self_record; /* RECAP_SELF_RECORD, or NULL */
};

static void obs_spec(struct run_spec *spec, const struct obs_case *c, const char *stats)
{
    memset(spec, 0, sizeof *spec);
    spec->argv[0] = run_env_path("OBSERVABLES_BIN");
    spec->argv[1] = "27";
    spec->timeout_s = 120;
    run_setenv(spec, "STANDIN_DRIVER_VERSION", "%s", c->driver);
    run_setenv(spec, "SCENARIO_STATS", "%s", stats);
    const char *async = getenv("STANDIN_ASYNC");
    run_setenv(spec, "STANDIN_ASYNC", "%s", async && *async ? async : "0");
    if (c->self_record) run_setenv(spec, "RECAP_SELF_RECORD", "%s", c->self_record);
}

static void obs_compare(const struct obs_case *c)
{
    struct run_spec spec;
    struct run_result base, recap;
    char *dir = run_temp_dir();
    char base_stats[4200], recap_stats[4200], log[4200];
    snprintf(base_stats, sizeof base_stats, "%s", run_path(dir, "base.stats"));
    snprintf(recap_stats, sizeof recap_stats, "%s", run_path(dir, "recap.stats"));
    snprintf(log, sizeof log, "%s", run_path(dir, "recap.jsonl"));

    obs_spec(&spec, c, base_stats);
    cr_assert_eq(run_program(&spec, &base), 0);
    cr_assert_eq(base.status, 0, "observables failed without recap: %s", base.err);
    cr_assert(strstr(base.out, "final sum=") != NULL);

    obs_spec(&spec, c, recap_stats);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", log);
    cr_assert_eq(run_program(&spec, &recap), 0);
    cr_assert_eq(recap.status, base.status, "exit status %d under recap, %d without\nstderr: %s",
                 recap.status, base.status, recap.err);
    cr_assert_str_eq(recap.out, base.out,
                     "driver %s, RECAP_SELF_RECORD=%s: what the program observed differs under recap\n"
                     "--- without recap:\n%s\n--- under recap:\n%s\nstderr: %s",
                     c->driver, c->self_record ? c->self_record : "(unset)", base.out, recap.out, recap.err);
    cr_assert_eq(run_stat(recap_stats, "misuses"), 0, "the stand-in saw misuse under recap: %s", recap.err);
    /* recap saw the captures: one site, 20 captures */
    cr_assert_geq(run_count_lines(log, "\"event\":\"capture\"", NULL), 20, "recap logged too few captures");
    run_result_free(&base);
    run_result_free(&recap);
    run_cleanup_dir(dir);
}

Test(observables, same_without_and_with_recap_13000)
{
    obs_compare(&(struct obs_case){ .driver = "13000" });
}

Test(observables, same_without_and_with_recap_13030)
{
    obs_compare(&(struct obs_case){ .driver = "13030" });
}

Test(observables, same_with_self_record_13000)
{
    obs_compare(&(struct obs_case){ .driver = "13000", .self_record = "on" });
}

Test(observables, same_with_self_record_13030)
{
    obs_compare(&(struct obs_case){ .driver = "13030", .self_record = "on" });
}
