/*
 * test_hardening.c - recap inside processes that do hard things.
 *
 * Allocation failures inside recap, abusive environment values, unusable
 * log destinations, fork, dlclose of the driver, programs that never call
 * cuInit and programs that are not CUDA programs at all: in every case the
 * program's output and exit status equal a run without recap, and recap's
 * complaints are clear "recap:" lines.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../support/run.h"

/* Runs argv without and with recap (plus `env`); requires equal output and
 * status; returns the recap run (caller frees). */
/* The driver version the stand-in reports in same_both_ways. */
static const char *driver_version = "13030";

static struct run_result same_both_ways(const char *const *argv, const char *const *env,
                                        const char *cwd_note)
{
    struct run_spec spec = { .timeout_s = 120 };
    struct run_result plain, recap;
    for (int i = 0; argv[i]; i++)
        spec.argv[i] = argv[i];
    run_setenv(&spec, "STANDIN_DRIVER_VERSION", "%s", driver_version);
    cr_assert_eq(run_program(&spec, &plain), 0);
    spec.with_recap = 1;
    for (int i = 0; env && env[i]; i++)
        spec.env[1 + i] = env[i];
    cr_assert_eq(run_program(&spec, &recap), 0);
    cr_assert_eq(recap.status, plain.status, "%s %s: status %d under recap, %d without\n%s",
                 argv[0], cwd_note ? cwd_note : "", recap.status, plain.status, recap.err);
    cr_assert_str_eq(recap.out, plain.out, "%s %s: output differs under recap\n%s", argv[0],
                     cwd_note ? cwd_note : "", recap.err);
    run_result_free(&plain);
    return recap;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* --- allocation failures inside recap ------------------------------------------ */

/* The environment that preloads failmalloc before recap and points it at
 * librecap. */
struct failmalloc_env {
    char preload[8192], target[4200];
};

static void failmalloc_env_init(struct failmalloc_env *fe)
{
    snprintf(fe->preload, sizeof fe->preload, "LD_PRELOAD=%s:%s",
             run_preloadable(run_env_path("FAILMALLOC_LIB")),
             run_preloadable(run_env_path("RECAP_LIB")));
    snprintf(fe->target, sizeof fe->target, "FAILMALLOC_TARGET=%s", run_env_path("RECAP_LIB"));
}

/* How many allocations recap makes in a run of `argv` (failmalloc counts
 * them; the log is off), with `setting` (a RECAP_ variable) in its
 * environment; the output is checked against a run without recap. */
static long recap_allocations(const char *const *argv, const char *setting)
{
    struct failmalloc_env fe;
    failmalloc_env_init(&fe);
    char *dir = run_temp_dir();
    const char *report = run_path(dir, "allocations");
    char report_env[4200];
    snprintf(report_env, sizeof report_env, "FAILMALLOC_REPORT=%s", report);
    const char *env[] = { fe.preload, report_env, "RECAP_LOG=off", fe.target, setting, NULL };
    struct run_result r = same_both_ways(argv, env, "counting");
    run_result_free(&r);
    char *text = run_read_file(report, NULL);
    cr_assert_not_null(text, "failmalloc wrote no report");
    long total = atol(text);
    free(text);
    run_cleanup_dir(dir);
    return total;
}

/* Each allocation recap makes in a run of `scenario` fails once (a sample
 * of 80), then all of them: the program's output never changes. `self`
 * also lets recap record captures itself (driver 13.0). */
static void allocations_failing(const char *scenario, const char *iterations, int self)
{
    const char *argv[] = { run_env_path("SCENARIO_BIN"), scenario, iterations, NULL };
    struct failmalloc_env fe;
    failmalloc_env_init(&fe);
    char fail_env[64];
    const char *self_env = self ? "RECAP_SELF_RECORD=on" : "RECAP_SELF_RECORD=off";
    driver_version = self ? "13000" : "13030";

    long total = recap_allocations(argv, self_env);
    cr_assert_gt(total, 0, "recap made no allocation?");

    long step = total > 80 ? total / 80 : 1;
    struct run_result r;
    for (long nth = 1; nth <= total; nth += step) {
        snprintf(fail_env, sizeof fail_env, "FAILMALLOC_NTH=%ld", nth);
        const char *env[] = { fe.preload, fail_env, "RECAP_LOG=off", fe.target, self_env, NULL };
        r = same_both_ways(argv, env, fail_env);
        run_result_free(&r);
    }
    /* Every allocation from the first on. */
    const char *all[] = { fe.preload, "FAILMALLOC_NTH=1", "FAILMALLOC_PERSIST=1", fe.target,
                          self_env, NULL };
    r = same_both_ways(argv, all, "all allocations failing");
    run_result_free(&r);
    driver_version = "13030";
}

Test(hardening, every_allocation_of_recap_failing_once)
{
    if (getenv("RECAP_TEST_PRELOAD_PREFIX"))
        cr_skip_test("under ASan the allocator is the sanitizer's; this runs in the plain build");
    allocations_failing("params", "6", 0);
}

/* The same while recap records captures itself: the capture's record, the
 * recording, the stale list and the journal's copies may each be missing. */
Test(hardening, every_allocation_of_recap_failing_once_while_it_records)
{
    if (getenv("RECAP_TEST_PRELOAD_PREFIX"))
        cr_skip_test("under ASan the allocator is the sanitizer's; this runs in the plain build");
    allocations_failing("inspect", "8", 1);
}

/* A steady loop costs recap no allocation per capture, in each of its ways
 * at 13.0 (recorded by recap, executable reuse alone, observed): a large
 * malloc can cost microseconds once the driver has freed a 1000-node
 * graph's blocks (measured on the H200: 9.9 us at a recorded capture's
 * begin, for its 3 KB record). Counted at two lengths of the same loop. */
Test(hardening, a_steady_loop_allocates_nothing_per_capture)
{
    if (getenv("RECAP_TEST_PRELOAD_PREFIX"))
        cr_skip_test("under ASan the allocator is the sanitizer's; this runs in the plain build");
    static const char *const ways[] = { "RECAP_SELF_RECORD=on", "RECAP_SELF_RECORD=off",
                                        "RECAP_MODE=observe" };
    driver_version = "13000";
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        const char *shorter[] = { run_env_path("SCENARIO_BIN"), "delta", "20", NULL };
        const char *longer[] = { run_env_path("SCENARIO_BIN"), "delta", "60", NULL };
        long at20 = recap_allocations(shorter, ways[w]);
        long at60 = recap_allocations(longer, ways[w]);
        cr_expect_eq(at60, at20, "%s: recap made %ld allocations in 20 iterations and %ld in "
                     "60: %.2f per capture", ways[w], at20, at60, (at60 - at20) / 40.0);
    }
    driver_version = "13030";
}

/* --- the environment ---------------------------------------------------------------- */

Test(hardening, abusive_environment_values)
{
    static const char *const variables[] = { "RECAP_SITES", "RECAP_MODE", "RECAP_CONFIG",
                                             "RECAP_LOG", "RECAP_VERBOSE" };
    const char *argv[] = { run_env_path("SCENARIO_BIN"), "params", "4", NULL };
    char *long_value = malloc(100001);
    memset(long_value, 'x', 100000);
    long_value[100000] = '\0';
    const char *values[] = { long_value, "\xff\xfe\x80garbage", "", "all\nnone" };

    for (size_t v = 0; v < sizeof variables / sizeof variables[0]; v++) {
        for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
            size_t len = strlen(variables[v]) + strlen(values[k]) + 2;
            char *entry = malloc(len);
            snprintf(entry, len, "%s=%s", variables[v], values[k]);
            char *dir = run_temp_dir();
            char log_entry[4200];
            snprintf(log_entry, sizeof log_entry, "RECAP_LOG=%s", run_path(dir, "log.jsonl"));
            const char *env[] = { log_entry, entry, NULL };
            struct run_result r = same_both_ways(argv, env, variables[v]);
            /* Every value here is wrong for its variable, except that an
             * empty RECAP_LOG or RECAP_CONFIG may mean "unset". */
            if (values[k][0] || !strcmp(variables[v], "RECAP_SITES") || !strcmp(variables[v], "RECAP_MODE"))
                cr_expect_geq(count(r.err, "recap: "), 1, "%s=%.20s...: no message on stderr",
                              variables[v], values[k]);
            cr_expect_leq(count(r.err, "recap: "), 3, "%s: too many messages:\n%.2000s",
                          variables[v], r.err);
            if (count(r.err, "recap: "))
                cr_expect_neq(strstr(r.err, variables[v]), NULL,
                              "the message must name %s:\n%.500s", variables[v], r.err);
            run_result_free(&r);
            run_cleanup_dir(dir);
            free(entry);
        }
    }
    free(long_value);
}

static void log_destination_refused(const char *path, const char *what)
{
    const char *argv[] = { run_env_path("SCENARIO_BIN"), "params", "4", NULL };
    char entry[4200];
    snprintf(entry, sizeof entry, "RECAP_LOG=%s", path);
    const char *env[] = { entry, NULL };
    struct run_result r = same_both_ways(argv, env, what);
    cr_expect_eq(count(r.err, "recap: "), 1, "%s: expected one recap: line, got:\n%s", what, r.err);
    cr_expect_neq(strstr(r.err, "log"), NULL, "%s: %s", what, r.err);
    run_result_free(&r);
}

Test(hardening, unusable_log_destinations)
{
    char *dir = run_temp_dir();
    log_destination_refused(dir, "a directory");
    log_destination_refused("/dev/full", "/dev/full");
    log_destination_refused(run_path(dir, "missing/dir/log.jsonl"), "a missing directory");

    const char *fifo = run_path(dir, "fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    log_destination_refused(fifo, "a FIFO");

    /* A symlink planted where the log goes, pointing at someone's file. */
    const char *victim = run_path(dir, "victim");
    int fd = open(victim, O_CREAT | O_WRONLY, 0644);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "precious\n", 9), 9);
    close(fd);
    if (getuid() == 0)
        cr_assert_eq(chown(victim, 65534, 65534), 0);
    const char *link = run_path(dir, "recap.jsonl");
    cr_assert_eq(symlink(victim, link), 0);
    log_destination_refused(link, "a planted symlink");
    char *text = run_read_file(victim, NULL);
    cr_expect_str_eq(text, "precious\n", "the symlink's target was written to");
    free(text);
    run_cleanup_dir(dir);
}

/* --- process life ------------------------------------------------------------------- */

Test(hardening, fork_child_gets_empty_caches_and_its_own_log)
{
    char *dir = run_temp_dir();
    char entry[4200];
    snprintf(entry, sizeof entry, "RECAP_LOG=%s", run_path(dir, "recap-%p.jsonl"));
    const char *env[] = { entry, NULL };
    const char *argv[] = { run_env_path("LIFECYCLE_BIN"), "fork", NULL };
    struct run_result r = same_both_ways(argv, env, "fork");
    run_result_free(&r);

    int logs = 0, child_fresh_first = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "recap-", 6))
            continue;
        logs++;
        char *text = run_read_file(run_path(dir, e->d_name), NULL);
        /* The child's log: three captures, the first one fresh. */
        if (count(text, "\"event\":\"capture\"") == 3 &&
            strstr(text, "\"seq\":1,\"path\":\"fresh\""))
            child_fresh_first = 1;
        free(text);
    }
    closedir(d);
    cr_expect_eq(logs, 2, "parent and child each write their own log");
    cr_expect(child_fresh_first, "the child's first capture is fresh: its caches start empty");
    run_cleanup_dir(dir);
}

Test(hardening, program_closing_the_driver_with_dlclose)
{
    const char *argv[] = { run_env_path("LIFECYCLE_BIN"), "dlclose", NULL };
    struct run_result r = same_both_ways(argv, (const char *[]){ "RECAP_LOG=off", NULL }, "dlclose");
    run_result_free(&r);
}

Test(hardening, program_that_never_calls_cuInit)
{
    const char *argv[] = { run_env_path("LIFECYCLE_BIN"), "noinit", NULL };
    struct run_result r = same_both_ways(argv, (const char *[]){ "RECAP_LOG=off", NULL }, "noinit");
    cr_expect_neq(strstr(r.out, "found=1"), NULL, "%s", r.out);
    run_result_free(&r);
}

/* Programs that never reach the driver: unchanged, and no log file. */
static void not_a_cuda_program(const char *const *argv)
{
    char *dir = run_temp_dir();
    char cwd[4200];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(dir), 0);
    /* In the sanitizer build the ASan runtime is preloaded too: interpreters
     * leak at exit by design, which is not recap's to report. */
    struct run_result r = same_both_ways(argv, (const char *[]){ "ASAN_OPTIONS=detect_leaks=0", NULL },
                                         argv[0]);
    cr_expect_eq(count(r.err, "recap:"), 0, "%s", r.err);
    run_result_free(&r);
    int files = 0;
    DIR *d = opendir(".");
    for (struct dirent *e; (e = readdir(d));)
        files += e->d_name[0] != '.';
    closedir(d);
    cr_expect_eq(files, 0, "%s left a file behind", argv[0]);
    cr_assert_eq(chdir(cwd), 0);
    run_cleanup_dir(dir);
}

Test(hardening, programs_that_are_not_cuda_programs)
{
    not_a_cuda_program((const char *[]){ "/bin/ls", "-1", "/usr", NULL });
    not_a_cuda_program((const char *[]){ "/bin/sh", "-c", "echo hello; exit 3", NULL });
    const char *python = getenv("PYTHON3");
    if (python)
        not_a_cuda_program((const char *[]){ python, "-c", "import ctypes, json; print(json.dumps([1,2]))", NULL });
}

/* The end event is written however the process exits normally; a killed
 * process leaves only complete lines. */
static char *log_of(const char *what, int *status)
{
    char *dir = run_temp_dir();
    struct run_spec spec = { .argv = { run_env_path("LIFECYCLE_BIN"), what } };
    struct run_result r;
    spec.with_recap = 1;
    run_setenv(&spec, "STANDIN_DRIVER_VERSION", "13030");
    run_setenv(&spec, "RECAP_LOG", "%s", run_path(dir, "recap.jsonl"));
    cr_assert_eq(run_program(&spec, &r), 0);
    *status = r.status;
    run_result_free(&r);
    char *text = run_read_file(run_path(dir, "recap.jsonl"), NULL);
    run_cleanup_dir(dir);
    cr_assert_not_null(text, "%s: no log", what);
    return text;
}

Test(hardening, end_event_when_another_thread_calls_exit)
{
    int status;
    char *text = log_of("exit-thread", &status);
    cr_expect_eq(status, 0);
    cr_expect_eq(count(text, "\"event\":\"end\""), 1, "%s", text);
    cr_expect_neq(strstr(text, "\"captures\":70,"), NULL, "the end event counts every capture");
    free(text);
}

Test(hardening, killed_process_leaves_only_complete_lines)
{
    int status;
    char *text = log_of("killed", &status);
    cr_expect_eq(status, 128 + 9, "the program was to die of SIGKILL");
    cr_expect_eq(count(text, "\"event\":\"end\""), 0);
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        size_t len = strlen(line);
        cr_expect(len > 2 && line[0] == '{' && line[len - 1] == '}', "incomplete line: %s", line);
        lines++;
    }
    cr_expect_gt(lines, 70, "start, site and the sampled capture events");
    free(text);
}
