/*
 * test_site.c - site identity: ids stable across runs of the same program
 * (separate processes, randomised load addresses, PIE and fixed-address
 * builds), distinct per call site, depth-sensitive; readable frames; the
 * id text format; and the lock-free cache under concurrent use.
 *
 * SITE_HELPER and SITE_HELPER_NOPIE name the helper programs (set by meson).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/site.h"

#define MAX_KEYS 32

struct run_output {
    char key[MAX_KEYS][32];
    char value[MAX_KEYS][64];
    int n;
    char raw[8192];
};

static void run_helper(const char *env_name, const char *mode, struct run_output *out)
{
    const char *helper = getenv(env_name);
    cr_assert_not_null(helper, "%s not set (run through meson test)", env_name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", helper, mode);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t len = fread(out->raw, 1, sizeof out->raw - 1, p);
    out->raw[len] = '\0';
    cr_assert_eq(pclose(p), 0, "%s failed: %s", cmd, out->raw);
    out->n = 0;
    char copy[8192];
    strcpy(copy, out->raw);
    for (char *line = strtok(copy, "\n"); line && out->n < MAX_KEYS; line = strtok(NULL, "\n"))
        if (sscanf(line, "%31s %63s", out->key[out->n], out->value[out->n]) == 2)
            out->n++;
}

static const char *get(const struct run_output *o, const char *key)
{
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->key[i], key) == 0)
            return o->value[i];
    cr_assert_fail("no %s in helper output:\n%s", key, o->raw);
    return NULL;
}

static int aslr_enabled(void)
{
    FILE *f = fopen("/proc/sys/kernel/randomize_va_space", "r");
    int v = 0;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v != 0;
}

static void check_stable_and_distinct(const char *env_name)
{
    struct run_output r1, r2;
    run_helper(env_name, "ids", &r1);
    run_helper(env_name, "ids", &r2);
    static const char *const keys[] = { "a8", "b8", "a2", "b2", "a1", "b1", "direct_x",
                                         "direct_y" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = get(&r1, keys[i]);
        uint64_t id;
        cr_expect_eq(site_id_parse(v, &id), 0, "%s: %s", keys[i], v);
        cr_expect_neq(id, 0);
        cr_expect_str_eq(v, get(&r2, keys[i]), "%s differs between runs", keys[i]);
    }
    /* The main program's code moved between the runs (PIE + ASLR), so
     * equal ids above mean the id ignores load addresses. */
    if (strcmp(env_name, "SITE_HELPER") == 0 && aslr_enabled() && !getenv("RECAP_NO_ASLR_CHECK"))
        cr_expect_str_neq(get(&r1, "main_addr"), get(&r2, "main_addr"),
                          "load address did not change: the test proves nothing");
    cr_expect_str_neq(get(&r1, "a8"), get(&r1, "b8"), "two callers, depth 8");
    cr_expect_str_neq(get(&r1, "a2"), get(&r1, "b2"), "two callers, depth 2");
    cr_expect_str_eq(get(&r1, "a1"), get(&r1, "b1"), "depth 1 sees only the wrapper");
    cr_expect_str_neq(get(&r1, "a8"), get(&r1, "a2"), "depth is part of the id");
    cr_expect_str_neq(get(&r1, "direct_x"), get(&r1, "direct_y"), "two direct call sites");
    cr_expect_str_eq(get(&r1, "loop_same"), "1", "the same site in a loop");
    cr_expect_str_eq(get(&r1, "nested_same"), "1", "id depends on librecap's own frames");
}

Test(site, ids_stable_across_runs_pie)
{
    check_stable_and_distinct("SITE_HELPER");
}

Test(site, ids_stable_across_runs_fixed_address)
{
    check_stable_and_distinct("SITE_HELPER_NOPIE");
}

Test(site, frames_are_readable_and_skip_the_registered_module)
{
    struct run_output r;
    run_helper("SITE_HELPER", "frames", &r);
    char *save = NULL;
    char *line = strtok_r(r.raw, "\n", &save);
    cr_assert_not_null(line);
    cr_expect_str_eq(line, "3");
    static const char *const fns[] = { "frames_inner+0x", "frames_outer+0x", "main+0x" };
    for (int i = 0; i < 3; i++) {
        line = strtok_r(NULL, "\n", &save);
        cr_assert_not_null(line, "frame %d missing", i);
        cr_expect_eq(strncmp(line, "site_helper+0x", 14), 0, "frame %d: %s", i, line);
        cr_expect(strstr(line, fns[i]) != NULL, "frame %d: %s, want %s", i, line, fns[i]);
        cr_expect(strstr(line, "libsiteprobe") == NULL, "probe frame not skipped: %s", line);
    }
}

Test(site, without_self_module_nothing_is_skipped)
{
    struct run_output r;
    run_helper("SITE_HELPER", "noself", &r);
    char *save = NULL;
    strtok_r(r.raw, "\n", &save);
    char *first = strtok_r(NULL, "\n", &save);
    cr_assert_not_null(first);
    cr_expect_eq(strncmp(first, "libsiteprobe.so+0x", 18), 0, "%s", first);
    cr_expect(strstr(first, " probe_frames+0x") != NULL, "%s", first);
}

/* ---- in-process --------------------------------------------------------- */

__attribute__((noinline)) uint64_t test_site_here(int depth);
__attribute__((noinline)) uint64_t test_site_here(int depth)
{
    struct site_stack st;
    site_stack_capture(&st, depth, NULL);
    uint64_t id = site_id_of(&st);
    __asm__ volatile("" ::: "memory");   /* keep this frame: no tail call */
    return id;
}

Test(site, id_text_round_trip)
{
    char text[SITE_ID_HEX_LEN + 1];
    site_id_format(0x0123456789abcdefull, text);
    cr_expect_str_eq(text, "0123456789abcdef");
    site_id_format(1, text);
    cr_expect_str_eq(text, "0000000000000001");
    uint64_t id = 42;
    cr_expect_eq(site_id_parse("FEDCBA9876543210", &id), 0);
    cr_expect_eq(id, 0xfedcba9876543210ull);
    static const char *const bad[] = { "", "0123", "0123456789abcdef0", "0123456789abcdeg",
                                       " 123456789abcdef", "0x23456789abcdef", NULL };
    for (int i = 0; bad[i]; i++) {
        id = 7;
        cr_expect_eq(site_id_parse(bad[i], &id), -1, "accepted \"%s\"", bad[i]);
        cr_expect_eq(id, 7, "touched id for \"%s\"", bad[i]);
    }
    cr_expect_eq(site_id_parse(NULL, &id), -1);
}

Test(site, frame_format)
{
    char buf[512];
    size_t n = site_frame_format((const char *)(void *)test_site_here + 3, buf, sizeof buf);
    cr_expect_eq(n, strlen(buf));
    cr_expect_eq(strncmp(buf, "test_site+0x", 12), 0, "%s", buf);
    cr_expect(strstr(buf, " test_site_here+0x3") != NULL, "%s", buf);

    n = site_frame_format((const char *)(void *)getpid + 1, buf, sizeof buf);
    cr_expect_eq(strncmp(buf, "libc.so.6+0x", 12), 0, "%s", buf);

    n = site_frame_format((const void *)0x10, buf, sizeof buf);
    cr_expect_str_eq(buf, "?+0x10");

    char small[8];
    n = site_frame_format((const void *)(uintptr_t)test_site_here, small, sizeof small);
    cr_expect_eq(n, 7);
    cr_expect_str_eq(small, "test_si");
    cr_expect_eq(site_frame_format((const void *)(uintptr_t)test_site_here, small, 0), 0);
}

Test(site, capture_depth_bounds)
{
    struct site_stack st;
    site_set_self_module(NULL);
    site_stack_capture(&st, 0, NULL);
    cr_expect_eq(st.depth, 1);
    site_stack_capture(&st, 1000, NULL);
    cr_expect_leq(st.depth, SITE_MAX_DEPTH);
    cr_expect_geq(st.depth, 3);
    /* innermost kept frame is in this test function, not in site.c */
    char buf[256];
    site_frame_format(st.pc[0], buf, sizeof buf);
    cr_expect(strstr(buf, "site_capture_depth_bounds") != NULL ||
              strstr(buf, "capture_depth_bounds") != NULL || strstr(buf, "test_site+0x") == buf,
              "%s", buf);
    struct site_stack empty = { .depth = 0 };
    cr_expect_neq(site_id_of(&empty), 0);
}

static void *hammer(void *arg)
{
    uint64_t *ids = arg;
    for (int i = 0; i < 20000; i++) {
        uint64_t a = test_site_here(6);
        if (ids[0] == 0)
            ids[0] = a;
        else if (ids[0] != a)
            ids[1]++;   /* disagreement */
    }
    return NULL;
}

Test(site, concurrent_captures_agree)
{
    site_set_self_module(NULL);
    enum { THREADS = 6 };
    pthread_t t[THREADS];
    uint64_t ids[THREADS][2];
    memset(ids, 0, sizeof ids);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, hammer, ids[i]);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        cr_expect_eq(ids[i][1], 0, "thread %d saw %llu different ids", i,
                     (unsigned long long)ids[i][1]);
    /* threads enter through different start frames in libc but the same
     * code, so all agree with each other too */
    for (int i = 1; i < THREADS; i++)
        cr_expect_eq(ids[i][0], ids[0][0]);
}
