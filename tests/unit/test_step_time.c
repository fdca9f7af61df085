/*
 * test_step_time.c - where a site's step time goes (shim/base/step_time.c):
 * a period from one capture begin to the next, and what fell in it
 * counted there; nothing before a site's first begin or after its last;
 * timed calls go to the thread's site, else the process's latest, and
 * not while the site's capture is open, whichever thread ends it; the
 * handle map found, replaced, forgotten and its slots used again; and
 * many threads counting and noting at once, every call counted once.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "shim/base/runtime.h"
#include "shim/base/step_time.h"

static struct step_totals totals(const struct step_site *s)
{
    struct step_totals t;
    step_totals_of(s, &t);
    return t;
}

static void fresh_process(void)
{
    step_init();
    step_after_fork_child();
}

TestSuite(step_time, .init = fresh_process);

Test(step_time, a_period_holds_what_fell_between_two_begins)
{
    static struct step_site s;
    step_add(&s, STEP_ALLOC, 5.0);             /* before the first begin: nowhere */
    step_capture_began(&s, 1000.0);
    step_capture_ended(&s, 40.0);
    step_add(&s, STEP_INSTANTIATE, 7.0);
    step_add(&s, STEP_ALLOC, 2.0);
    step_add(&s, STEP_ALLOC, 3.0);
    struct step_totals t = totals(&s);
    cr_assert_eq(t.periods, 0, "no period closed yet");
    cr_assert_eq(t.by_class[STEP_CAPTURE].calls, 0);

    step_capture_began(&s, 1250.0);
    t = totals(&s);
    cr_assert_eq(t.periods, 1);
    cr_assert_eq(t.period_ns, 250000);
    cr_assert_eq(t.by_class[STEP_CAPTURE].calls, 1);
    cr_assert_eq(t.by_class[STEP_CAPTURE].ns, 40000);
    cr_assert_eq(t.by_class[STEP_INSTANTIATE].ns, 7000);
    cr_assert_eq(t.by_class[STEP_ALLOC].calls, 2, "the one before the first begin is not counted");
    cr_assert_eq(t.by_class[STEP_ALLOC].ns, 5000);

    /* After the last begin: never counted. */
    step_capture_ended(&s, 30.0);
    step_add(&s, STEP_SYNC, 9.0);
    t = totals(&s);
    cr_assert_eq(t.by_class[STEP_CAPTURE].calls, 1);
    cr_assert_eq(t.by_class[STEP_SYNC].calls, 0);
}

Test(step_time, a_clock_that_went_back_counts_the_period_and_no_time)
{
    static struct step_site s;
    step_capture_began(&s, 500.0);
    step_capture_ended(&s, 1.0);
    step_capture_began(&s, 499.0);
    struct step_totals t = totals(&s);
    cr_assert_eq(t.periods, 1);
    cr_assert_eq(t.period_ns, 0);
}

Test(step_time, timed_calls_go_to_the_thread_site_and_not_while_it_captures)
{
    static struct step_site a;
    cr_assert_null(step_open(STEP_ALLOC, NULL), "no capture yet: nowhere");
    step_capture_began(&a, runtime_now_us());
    cr_assert_null(step_open(STEP_ALLOC, NULL), "inside the capture: its time");
    step_capture_ended(&a, 1.0);
    cr_assert_eq(step_open(STEP_SYNC, NULL), &a);
    double t0 = runtime_now_us();
    step_close(&a, STEP_SYNC, t0);
    step_capture_began(&a, runtime_now_us());
    step_capture_refused(&a);                  /* the driver said no: not open */
    cr_assert_eq(step_open(STEP_FREE, NULL), &a);
    struct step_totals t = totals(&a);
    cr_assert_eq(t.by_class[STEP_SYNC].calls, 1);
    cr_assert_eq(t.periods, 1);
}

static struct step_site other_site;

static void *other_thread(void *arg)
{
    struct step_site **seen = arg;
    seen[0] = step_open(STEP_HOST_ALLOC, NULL);   /* never began one: the latest */
    step_capture_began(&other_site, runtime_now_us());
    step_capture_ended(&other_site, 1.0);
    seen[1] = step_open(STEP_HOST_ALLOC, NULL);   /* its own now */
    return NULL;
}

Test(step_time, a_thread_that_never_captured_uses_the_latest_site)
{
    static struct step_site mine;
    struct step_site *seen[2] = { NULL, NULL };
    step_capture_began(&mine, runtime_now_us());
    step_capture_ended(&mine, 1.0);
    pthread_t t;
    pthread_create(&t, NULL, other_thread, seen);
    pthread_join(t, NULL);
    cr_assert_eq(seen[0], &mine);
    cr_assert_eq(seen[1], &other_site);
    cr_assert_eq(step_open(STEP_ALLOC, NULL), &mine, "this thread keeps its own");
}

static void *end_elsewhere(void *arg)
{
    step_capture_ended(arg, 5.0);
    return NULL;
}

Test(step_time, a_capture_ended_on_another_thread_closes)
{
    static struct step_site s;
    step_capture_began(&s, runtime_now_us());
    pthread_t t;
    pthread_create(&t, NULL, end_elsewhere, &s);
    pthread_join(t, NULL);
    cr_assert_eq(step_open(STEP_SYNC, NULL), &s);
}

Test(step_time, launches_go_to_the_site_of_their_executable_graph)
{
    static struct step_site a, b;
    static char exec_a, exec_b, unknown;   /* addresses standing for handles */
    step_note_handle(&exec_a, &a);
    step_note_handle(&exec_b, &b);
    cr_assert_eq(step_open(STEP_LAUNCH, &exec_a), &a);
    cr_assert_eq(step_open(STEP_LAUNCH, &exec_b), &b);
    cr_assert_null(step_open(STEP_LAUNCH, &unknown));
    cr_assert_null(step_open(STEP_LAUNCH, NULL));
    step_capture_began(&a, runtime_now_us());
    cr_assert_null(step_open(STEP_LAUNCH, &exec_a), "a launch in the site's capture");
    step_capture_ended(&a, 1.0);
    step_forget_handle(&exec_b);
    cr_assert_null(step_handle_site(&exec_b));
    cr_assert_eq(step_handle_site(&exec_a), &a);
    step_note_handle(&exec_a, &b);
    cr_assert_eq(step_handle_site(&exec_a), &b, "noted again: replaced");
}

Test(step_time, the_map_holds_many_and_reuses_forgotten_slots)
{
    static struct step_site s;
    static char handles[3 * STEP_MAP_SLOTS / 4];
    size_t n = sizeof handles;
    for (size_t i = 0; i < n; i++)
        step_note_handle(&handles[i], &s);
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
        found += step_handle_site(&handles[i]) == &s;
    cr_assert_geq(found * 100, n * 99, "%zu of %zu followed", found, n);
    for (size_t i = 0; i < n; i++)
        step_forget_handle(&handles[i]);
    for (size_t i = 0; i < n; i++)
        cr_assert_null(step_handle_site(&handles[i]));
    /* Rounds of new handles, as a loop instantiating a new executable
     * graph each step: forgotten slots are claimed again. */
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < n; i++)
            step_note_handle(&handles[i] + round % 2, &s);
        found = 0;
        for (size_t i = 0; i < n; i++)
            found += step_handle_site(&handles[i] + round % 2) == &s;
        cr_assert_geq(found * 100, n * 99, "round %d: %zu of %zu followed", round, found, n);
        for (size_t i = 0; i < n; i++)
            step_forget_handle(&handles[i] + round % 2);
    }
}

/* --- many threads ------------------------------------------------------------------- */

#define WORKERS 8
#define CALLS 20000

static struct step_site shared_site;

static void *worker(void *arg)
{
    char *mine = arg;      /* 64 handles of its own */
    for (int i = 0; i < CALLS; i++) {
        step_note_handle(&mine[i % 64], &shared_site);
        struct step_site *s = step_open(STEP_LAUNCH, &mine[i % 64]);
        if (s)
            step_close(s, STEP_LAUNCH, runtime_now_us());
        step_add(&shared_site, STEP_ALLOC, 0.001);
        step_forget_handle(&mine[i % 64]);
    }
    return NULL;
}

Test(step_time, many_threads_count_every_call_once)
{
    static char handles[WORKERS][64];
    pthread_t t[WORKERS];
    step_capture_began(&shared_site, runtime_now_us());
    step_capture_ended(&shared_site, 1.0);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, handles[i]);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    step_capture_began(&shared_site, runtime_now_us());
    struct step_totals tot = totals(&shared_site);
    cr_assert_eq(tot.by_class[STEP_LAUNCH].calls, (uint64_t)WORKERS * CALLS,
                 "every launch of a noted handle counted");
    cr_assert_eq(tot.by_class[STEP_ALLOC].calls, (uint64_t)WORKERS * CALLS);
    cr_assert_eq(tot.by_class[STEP_ALLOC].ns, (uint64_t)WORKERS * CALLS, "1 ns each");
    for (int i = 0; i < WORKERS; i++)
        for (int h = 0; h < 64; h++)
            cr_assert_null(step_handle_site(&handles[i][h]));
}

Test(step_time, class_names_are_the_logs)
{
    const char *want[] = { "capture", "instantiate", "launch", "alloc", "free", "host_alloc",
                           "host_free", "sync" };
    for (int c = 0; c < STEP_CLASSES; c++)
        cr_assert_str_eq(step_class_name((enum step_class)c), want[c]);
}
