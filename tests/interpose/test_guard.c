/*
 * test_guard.c - the guarded calls of driver_api.def (role guard:K: the
 * calls the driver refuses during a capture) reach the driver through recap
 * unchanged while no capture is self-recorded.
 *
 * A test of its own: meson puts the folder of every library its programs
 * link to on the test's LD_LIBRARY_PATH, and echo/'s libcuda.so.1 must not
 * stand in for the stand-in driver in the other interposition tests.
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

/* Every guarded call of driver_api.def (role guard:K: the calls the driver
 * refuses during a capture) is exported and, with no self-recorded capture,
 * reaches the driver with exactly the program's arguments and hands back
 * exactly its result; cuGetProcAddress hands out the wrapper of the exact
 * ABI; cuThreadExchangeStreamCaptureMode exchanges as the driver does. The
 * driver is echo/'s, generated from the same table: it records what each
 * call received and returns what the program expects. */
static void guarded_calls(const char *how)
{
    struct run_spec spec = { .argv = { run_env_path("GUARDPROG_BIN"), how } };
    run_setenv(&spec, "LD_LIBRARY_PATH", "%s", run_env_path("GUARD_ECHO_DIR"));
    run_setenv(&spec, "RECAP_LOG", "off");
    struct run_result plain, recap;
    cr_assert_eq(run_program(&spec, &plain), 0);
    spec.with_recap = 1;
    cr_assert_eq(run_program(&spec, &recap), 0);
    cr_assert_eq(plain.status, 0, "%s%s", plain.out, plain.err);
    cr_assert_eq(recap.status, 0, "%s%s", recap.out, recap.err);
    cr_expect_str_eq(recap.out, plain.out, "%s: output differs under recap", how);
    cr_expect_eq(count(recap.out, "DIFFER"), 0, "%s", recap.out);
    cr_expect_eq(count(recap.out, "=NO"), 0, "%s", recap.out);
    /* The wrappers forward: every call reached the echo and was checked. */
    const char *c = strstr(plain.out, " calls=");
    cr_assert_not_null(c, "%s", plain.out);
    int calls = atoi(c + strlen(" calls="));
    cr_expect_eq(count(recap.out, "args=same rc="), calls - 1, "%s", recap.out);
    cr_expect_neq(strstr(recap.out, "cuThreadExchangeStreamCaptureMode rc=0,0,0,1 was=0,2,1"),
                  NULL, "%s", recap.out);
    char want[128];
    snprintf(want, sizeof want, "guardprog: %s: %d of %d calls through another object", how,
             calls, calls);
    cr_expect_neq(strstr(recap.err, want), NULL, "%s", recap.err);
    snprintf(want, sizeof want, "guardprog: %s: 0 of %d calls through another object", how,
             calls);
    cr_expect_neq(strstr(plain.err, want), NULL, "%s", plain.err);
    run_result_free(&plain);
    run_result_free(&recap);
}

Test(guard, exported_and_forwarded_unchanged) { guarded_calls("direct"); }
Test(guard, through_cuGetProcAddress) { guarded_calls("procaddr"); }
