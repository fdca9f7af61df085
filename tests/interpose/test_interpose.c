/*
 * test_interpose.c - recap sits on every path from a program to the driver.
 *
 * Each path of probe.c runs without recap and with it (RECAP_VERBOSE=1);
 * the output must be identical and recap's verbose lines must show each of
 * the path's captures - proof that the path was intercepted and that the
 * interception changed nothing the program can see.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/run.h"

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The suite runs twice (tests/interpose/meson.build): as it is, and with
 * recap recording captures itself on a 13.0 driver. */
static int self_recording(void)
{
    const char *v = getenv("INTERPOSE_SELF_RECORD");
    return v && !strcmp(v, "1");
}

static void self_recording_env(struct run_spec *spec)
{
    if (!self_recording())
        return;
    run_setenv(spec, "STANDIN_DRIVER_VERSION", "13000");
    run_setenv(spec, "RECAP_SELF_RECORD", "on");
}

/* Runs `program args...` both ways; returns the recap run's stderr. */
static char *both_ways(const char *program, const char *arg, char **out)
{
    struct run_spec spec = { .argv = { program, arg } };
    struct run_result plain, recap;
    self_recording_env(&spec);
    cr_assert_eq(run_program(&spec, &plain), 0);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_VERBOSE", "1");
    run_setenv(&spec, "RECAP_LOG", "off");
    cr_assert_eq(run_program(&spec, &recap), 0);
    cr_assert_eq(plain.status, 0, "%s %s failed without recap: %s%s", program, arg ? arg : "",
                 plain.out, plain.err);
    cr_assert_eq(recap.status, 0, "%s %s failed under recap: %s%s", program, arg ? arg : "",
                 recap.out, recap.err);
    cr_assert_str_eq(recap.out, plain.out, "%s %s: output differs under recap", program,
                     arg ? arg : "");
    char *err = recap.err;
    *out = recap.out;
    free(plain.out);
    free(plain.err);
    return err;
}

static void path_intercepted(const char *path, int captures)
{
    char *out;
    char *err = both_ways(run_env_path("PROBE_BIN"), path, &out);
    cr_expect_eq(count(err, "recap: capture begin"), captures, "%s: %s", path, err);
    cr_expect_eq(count(err, "recap: capture end"), captures, "%s: %s", path, err);
    free(out);
    free(err);
}

Test(interpose, exported_symbols) { path_intercepted("direct", 4); }
Test(interpose, per_thread_default_stream_exports) { path_intercepted("ptsz", 4); }
Test(interpose, dlopen_and_dlsym) { path_intercepted("dlsym", 4); }
Test(interpose, dlvsym_answers_as_glibc_does) { path_intercepted("dlvsym", 0); }

/* The first dlsym/dlvsym of a process goes through the stub's slow path
 * (glibc's functions not found yet) and still answers as glibc does. */
static void first_lookup(const char *path)
{
    char *out;
    char *err = both_ways(run_env_path("PROBE_BIN"), path, &out);
    char want[64];
    snprintf(want, sizeof want, "%s getenv next=1 default=1\n", path);
    cr_expect_str_eq(out, want);
    free(out);
    free(err);
}
Test(interpose, first_dlsym_of_the_process) { first_lookup("next-first"); }
Test(interpose, first_dlvsym_of_the_process) { first_lookup("vnext-first"); }
Test(interpose, table_fetched_through_cuGetProcAddress) { path_intercepted("procaddr", 8); }

Test(interpose, exact_abi_behind_every_name_and_version)
{
    char *out;
    char *err = both_ways(run_env_path("PROBE_BIN"), "abi", &out);
    cr_expect_eq(count(out, "=NO"), 0, "%s", out);
    cr_expect_eq(count(out, "=yes"), 15, "%s", out);
    free(out);
    free(err);
}

Test(interpose, names_recap_does_not_intercept_come_back_untouched)
{
    char *out;
    char *err = both_ways(run_env_path("PROBE_BIN"), "untouched", &out);
    cr_expect_neq(strstr(out, "untouched cuGetExportTable rc=0 same=1 module=driver"), NULL, "%s", out);
    cr_expect_neq(strstr(out, "untouched cudnnCreate=(nil)"), NULL, "%s", out);
    cr_expect_neq(strstr(out, "untouched unknown rc=0 p=(nil) status=1"), NULL, "%s", out);
    cr_expect_neq(strstr(out, "untouched above-driver rc=1 p=0x1 status=7"), NULL, "%s", out);
    free(out);
    free(err);
}

Test(interpose, cuGetProcAddress_before_cuInit)
{
    char *out;
    char *err = both_ways(run_env_path("PROBE_BIN"), "before-init", &out);
    cr_expect_neq(strstr(out, "before-init rc=0 found=1"), NULL, "%s", out);
    free(out);
    free(err);
}

Test(interpose, first_calls_racing_from_threads)
{
    for (int round = 0; round < 5; round++) {
        char *out;
        char *err = both_ways(run_env_path("PROBE_BIN"), "race", &out);
        cr_expect_neq(strstr(out, "race consistent=1 distinct-ptds=1"), NULL, "%s", out);
        free(out);
        free(err);
    }
}

Test(interpose, rtld_next_from_another_library_finds_the_next_definition)
{
    char *out;
    char *err = both_ways(run_env_path("NEXTPROG_BIN"), NULL, &out);
    cr_expect_neq(strstr(out, "rtld_next getenv=libc cuGraphLaunch=driver"), NULL, "%s", out);
    cr_expect_neq(strstr(out, "getenv works=1"), NULL, "%s", out);
    free(out);
    free(err);
}

/* NCCL's communicator teardown waits until no graph holds a plan of it;
 * recap's kept executable graphs must let go first (shim/intercept/nccl_hooks.c). */
static void check_nccl_teardown(struct run_spec spec)
{
    char *dir = run_temp_dir();
    const char *log = run_path(dir, "nccl.jsonl");
    run_setenv(&spec, "STANDIN_DRIVER_VERSION", "13000");
    if (self_recording())
        run_setenv(&spec, "RECAP_SELF_RECORD", "on");
    struct run_result plain, recap;
    cr_assert_eq(run_program(&spec, &plain), 0);
    cr_expect_eq(plain.status, 0, "%s%s", plain.out, plain.err);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", log);
    cr_assert_eq(run_program(&spec, &recap), 0);
    cr_expect_eq(recap.status, 0, "%s%s", recap.out, recap.err);
    cr_expect_str_eq(recap.out, plain.out);
    cr_expect_neq(strstr(recap.out, "ncclCommFinalize: 0 plan(s) still held by graphs"), NULL,
                  "%s", recap.out);
    /* recap did keep the executable graph (reused 7 times), so it held a
     * plan until the teardown released it. */
    cr_expect_eq(run_log_total(log, self_recording() ? "reused" : "update"), 7);
    const char *held = strstr(recap.err, "plans held before teardown: ");
    cr_assert_not_null(held, "%s", recap.err);
    cr_expect_gt(atoi(held + strlen("plans held before teardown: ")), 0, "%s", recap.err);
    cr_expect_eq(run_count_lines(log, "\"event\":\"comm_teardown\"", "ncclCommFinalize",
                                 "\"released\":", "\"forwarded\":true", NULL), 1);
    cr_expect_eq(run_count_lines(log, "\"event\":\"comm_teardown\"", "ncclCommDestroy",
                                 "\"released\":0", NULL), 1);
    run_result_free(&plain);
    run_result_free(&recap);
    run_cleanup_dir(dir);
}

Test(interpose, nccl_teardown_finds_no_plan_held_by_kept_graphs)
{
    check_nccl_teardown((struct run_spec){ .argv = { run_env_path("NCCLPROG_BIN"), "8" } });
}

/* The same with NCCL in the local scope of a dlopen (PyTorch's case, seen
 * on the H200: RTLD_NEXT from librecap does not reach it). */
Test(interpose, nccl_teardown_reaches_nccl_in_a_local_scope)
{
    check_nccl_teardown((struct run_spec){
        .argv = { run_env_path("NCCLLOCAL_BIN"), run_env_path("LIBNCCLPROG_PATH"), "8" } });
}

/* Documented behaviour: a library loaded with RTLD_DEEPBIND binds its
 * driver calls inside its own dependencies, so recap neither sees nor
 * changes them; its results are unaffected. */
Test(interpose, deepbind_library_passes_through_unchanged)
{
    if (getenv("RECAP_TEST_PRELOAD_PREFIX"))
        cr_skip_test("the ASan runtime refuses RTLD_DEEPBIND libraries");
    char *out;
    char *err = both_ways(run_env_path("DEEPPROG_BIN"), run_env_path("LIBDEEP_PATH"), &out);
    cr_expect_eq(count(out, "deep it="), 3, "%s", out);
    cr_expect_eq(count(err, "recap: capture begin"), 0, "%s", err);
    free(out);
    free(err);
}

/* A librecap below a path with a space and a colon (as in any checkout
 * named so): the dynamic loader splits LD_PRELOAD there, so the tests
 * preload it through run_preloadable's link, and recap must see every
 * capture. */
Test(interpose, library_below_a_path_with_space_and_colon)
{
    char *dir = run_temp_dir();
    char odd[4200], copy[4300], cmd[9000];
    snprintf(odd, sizeof odd, "%s/with space:colon", dir);
    snprintf(copy, sizeof copy, "%s/librecap.so", odd);
    snprintf(cmd, sizeof cmd, "mkdir '%s' && cp '%s' '%s'", odd, run_env_path("RECAP_LIB"), copy);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const char *link = run_preloadable(copy);
    cr_expect_eq(strpbrk(link, RUN_PRELOAD_SEPARATORS), NULL, "%s", link);
    cr_expect_str_eq(run_preloadable(copy), link, "one link per library");
    cr_assert_eq(setenv("RECAP_LIB", copy, 1), 0);
    path_intercepted("direct", 4);
    run_cleanup_dir(dir);
}

/* scripts/bench paired measures recap against the driver in one process,
 * reaching the driver past recap through bench_direct.h. Under recap the
 * linked functions must be recap's and the looked-up ones the driver's
 * (else the benchmark would time the driver against itself, or recap
 * against itself), and the looked-up ones must work. */
Test(interpose, bench_paired_reaches_the_driver_past_recap)
{
    struct run_spec spec = { .argv = { run_env_path("DIRECTPROG_BIN") } };
    struct run_result plain, recap;
    self_recording_env(&spec);
    cr_assert_eq(run_program(&spec, &plain), 0);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "off");
    cr_assert_eq(run_program(&spec, &recap), 0);
    cr_assert_eq(plain.status, 0, "without recap: %s%s", plain.out, plain.err);
    cr_assert_eq(recap.status, 0, "under recap: %s%s", recap.out, recap.err);
    const char *names[] = { "cuLaunchKernel", "cuStreamBeginCapture_v2", "cuGraphExecUpdate_v2" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[160];
        snprintf(want, sizeof want, "%s linked=libcuda.so.1 direct=libcuda.so.1 same=1\n", names[i]);
        cr_expect(strstr(plain.out, want), "without recap, want \"%s\" in:\n%s", want, plain.out);
        /* Linked: the preloaded library, whatever run.c named its link
         * (a path with a space is preloaded through a link of another
         * name); looked up: still the driver. */
        snprintf(want, sizeof want, "%s linked=", names[i]);
        const char *line = strstr(recap.out, want);
        cr_assert(line, "under recap, no line for %s in:\n%s", names[i], recap.out);
        const char *end = strchr(line, '\n');
        char text[256];
        snprintf(text, sizeof text, "%.*s", (int)(end ? end - line : (long)strlen(line)), line);
        cr_expect(strstr(text, " direct=libcuda.so.1 same=0"), "under recap: %s", text);
        cr_expect(!strstr(text, "linked=libcuda.so.1"), "under recap the linked function is the "
                  "driver's: %s", text);
    }
    const char *v = strstr(recap.out, "cuDriverGetVersion rc=0 version=");
    cr_expect(v && atoi(v + strlen("cuDriverGetVersion rc=0 version=")) >= 12000,
              "the looked-up cuDriverGetVersion: %s", recap.out);
    cr_expect(strstr(plain.out, v ? v : "-"), "the same version both ways:\n%s\n%s", plain.out,
              recap.out);
    run_result_free(&plain);
    run_result_free(&recap);
}
