/*
 * test_kept_memory.c - device memory a site's captures allocate is kept
 * when the program frees it and handed back to the site's next capture
 * (issue 34, shim/state/kept_memory.h), at 13.0 (recorded by recap) and 13.3
 * (recaptured).
 *
 * The scenario `pool` takes a step as PyTorch does: a private pool of two
 * segments allocated inside each capture (relaxed mode), freed once the
 * graph and its executable graph are gone. Under recap the program must
 * get what it gets without recap, the driver must see the two allocations
 * once, and every capture after the first must change no node, so that
 * each instantiation is plain reuse. `pool_pressure` adds, before every
 * fourth step, an allocation no device can satisfy: recap gives back what
 * it keeps and the program goes on alike. RECAP_KEEP_MEMORY=off restores
 * an allocation and a free per segment and step.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/run.h"

#define STEPS 24

struct pool_run {
    char *dir;
    char log[RUN_PATH_MAX], stats[RUN_PATH_MAX], base_stats[RUN_PATH_MAX];
    struct run_result base, recap;
};

/* The stand-in's STANDIN_UPDATE_FREED for both runs, where a test sets it. */
static const char *update_freed;

static void pool_spec(struct run_spec *spec, const char *name, const char *version,
                      const char *stats)
{
    static char steps_text[16];
    memset(spec, 0, sizeof *spec);
    spec->argv[0] = run_env_path("SCENARIO_BIN");
    spec->argv[1] = name;
    snprintf(steps_text, sizeof steps_text, "%d", STEPS);
    spec->argv[2] = steps_text;
    spec->timeout_s = 300;
    run_setenv(spec, "STANDIN_DRIVER_VERSION", "%s", version);
    run_setenv(spec, "SCENARIO_STATS", "%s", stats);
    /* At exit an allocation nothing can satisfy makes recap give back all
     * it keeps: what is left alive is the program's own. */
    run_setenv(spec, "SCENARIO_DRAIN", "1");
    const char *async = getenv("STANDIN_ASYNC");
    run_setenv(spec, "STANDIN_ASYNC", "%s", async && *async ? async : "0");
    run_forward_env(spec, "SCENARIO_KERNELS");
    if (update_freed)
        run_setenv(spec, "STANDIN_UPDATE_FREED", "%s", update_freed);
}

/* Runs `name` without recap and under recap (keep_memory as given, or
 * the default when NULL), and requires the same behaviour. */
/* RECAP_COPY_HELD and RECAP_CONFIG for the run under recap, where a
 * test sets them. */
static const char *copy_held, *recap_config;

static void pool_compare(const char *name, const char *version, const char *keep,
                         struct pool_run *o)
{
    struct run_spec spec;
    memset(o, 0, sizeof *o);
    run_pair_paths(&o->dir, o->log, o->stats, o->base_stats);
    pool_spec(&spec, name, version, o->base_stats);
    cr_assert_eq(run_program(&spec, &o->base), 0);
    pool_spec(&spec, name, version, o->stats);
    spec.with_recap = 1;
    run_setenv(&spec, "RECAP_LOG", "%s", o->log);
    run_setenv(&spec, "RECAP_SELF_RECORD", "%s", "");   /* recap's default: on */
    if (keep)
        run_setenv(&spec, "RECAP_KEEP_MEMORY", "%s", keep);
    if (copy_held)
        run_setenv(&spec, "RECAP_COPY_HELD", "%s", copy_held);
    if (recap_config)
        run_setenv(&spec, "RECAP_CONFIG", "%s", recap_config);
    /* Where copies are made, the driver's sharing of a clone's arguments
     * (tests/standin/standin_internal.h: si_graph_check_shared) is on. */
    run_setenv(&spec, "STANDIN_CLONE_SHARES", "1");
    cr_assert_eq(run_program(&spec, &o->recap), 0);

    cr_assert_eq(o->base.status, 0, "%s at %s fails without recap: %s", name, version, o->base.err);
    cr_assert_eq(o->recap.status, 0, "%s at %s: exit status %d under recap\n%s", name, version,
                 o->recap.status, o->recap.err);
    cr_assert_str_eq(o->recap.out, o->base.out, "%s at %s: output differs under recap\n%s", name,
                     version, o->recap.err);
    cr_assert_eq(run_stat(o->stats, "misuses"), 0, "%s at %s: the stand-in saw misuse: %s", name,
                 version, o->recap.err);
    cr_assert_eq(run_stat(o->stats, "live_memory"), run_stat(o->base_stats, "live_memory"),
                 "%s at %s: %ld allocations left alive under recap, %ld without", name, version,
                 run_stat(o->stats, "live_memory"), run_stat(o->base_stats, "live_memory"));
    cr_assert_eq(run_stat(o->stats, "live_graphs"), run_stat(o->base_stats, "live_graphs"));
    cr_assert_eq(run_stat(o->stats, "live_execs"), run_stat(o->base_stats, "live_execs"));
}

/* pool_compare at 13.0 with copies of kept graphs on (RECAP_COPY_HELD). */
static void pool_compare_copies(const char *name, struct pool_run *o)
{
    copy_held = "on";
    pool_compare(name, "13000", NULL, o);
    copy_held = NULL;
}

static void pool_done(struct pool_run *o)
{
    run_result_free(&o->base);
    run_result_free(&o->recap);
    run_cleanup_dir(o->dir);
}

/* Allocations the driver saw inside the steps: the program's setup and
 * its last allocation (SCENARIO_DRAIN), the same with and without recap,
 * taken away, and so is each retry of an allocation that failed for
 * memory after recap gave back what it kept (`failed`: how many failed). */
static long step_allocations(struct pool_run *o, long plain_per_step, long failed)
{
    long setup = run_stat(o->base_stats, "cuMemAlloc_v2") - plain_per_step * STEPS;
    return run_stat(o->stats, "cuMemAlloc_v2") - setup - failed;
}

static void steady_pool(const char *version)
{
    struct pool_run o;
    pool_compare("pool", version, NULL, &o);
    long steps_allocs = step_allocations(&o, 2, 1);
    cr_expect_eq(steps_allocs, 2, "at %s the driver allocated %ld segments in %d steps, "
                 "expected the first step's two", version, steps_allocs, STEPS);
    cr_expect_eq(run_log_total(o.log, "memory_reused"), 2 * (STEPS - 1));
    cr_expect_eq(run_log_total(o.log, "memory_kept"), 2 * STEPS);
    cr_expect_eq(run_log_total(o.log, "changed"), 0, "at %s a capture changed a node: the pool "
                 "moved", version);
    cr_expect_eq(run_log_total(o.log, "reuse"), STEPS - 1, "at %s %ld instantiations were plain "
                 "reuse, expected every one after the first", version,
                 run_log_total(o.log, "reuse"));
    cr_expect_eq(run_log_total(o.log, "recaptured"), STEPS - 1);
    pool_done(&o);
}

Test(kept_memory, a_pool_allocated_in_each_capture_stays_at_its_address)
{
    steady_pool("13000");
}

Test(kept_memory, a_pool_allocated_in_each_capture_stays_at_its_address_at_13_3)
{
    steady_pool("13030");
}

/* The pool's first segment allocated just before the capture begins (as
 * PyTorch allocates it) is kept and handed back too: it outlived a capture
 * of the site. The first step's comes before recap knows the thread
 * captures there, so the second step's is new once more (and its capture
 * changes the node that names it); from the third step on nothing moves. */
Test(kept_memory, a_segment_allocated_before_the_capture_stays_too)
{
    struct pool_run o;
    pool_compare("pool_before", "13000", NULL, &o);
    long steps_allocs = step_allocations(&o, 3, 1);
    cr_expect_eq(steps_allocs, 4, "the driver allocated %ld segments in %d steps, expected the "
                 "first step's three and the second step's first", steps_allocs, STEPS);
    cr_expect_leq(run_log_total(o.log, "changed"), 1, "captures changed %ld nodes: a segment "
                  "moved", run_log_total(o.log, "changed"));
    cr_expect_eq(run_log_total(o.log, "reuse"), STEPS - 2);
    pool_done(&o);
}

/* A decode step whose batch cycles 1, 2, 4, 8, each batch's pool of its
 * own segments (one, two or three, two of them of one size): the driver
 * allocates the three blocks the largest batch needs once, and from the
 * second round on the captures of the batches with more than one
 * segment change no node (batches 1 and 2 are one kind, told apart by a
 * kernel's scalar: one node each). */
static void batches_pool(const char *version)
{
    struct pool_run o;
    pool_compare("pool_batches", version, NULL, &o);
    /* Seven segments a round of four steps without recap; the drain's
     * allocation is retried once under recap (step_allocations). */
    long setup = run_stat(o.base_stats, "cuMemAlloc_v2") - (STEPS / 4) * 7;
    long steps_allocs = run_stat(o.stats, "cuMemAlloc_v2") - setup - 1;
    cr_expect_eq(steps_allocs, 3, "at %s the driver allocated %ld segments in %d steps, expected "
                 "the three the largest batch needs", version, steps_allocs, STEPS);
    int still = run_count_lines(o.log, "\"event\":\"capture\"", "\"nodes\":6,\"changed\":0,",
                                NULL) +
                run_count_lines(o.log, "\"event\":\"capture\"", "\"nodes\":9,\"changed\":0,",
                                NULL);
    cr_expect_geq(still, 2 * (STEPS / 4 - 2), "at %s %d captures of batches 4 and 8 changed no "
                  "node; from the second round on all %d must", version, still, 2 * (STEPS / 4 - 2));
    pool_done(&o);
}

Test(kept_memory, a_pool_that_follows_the_batch_stays_at_its_addresses)
{
    batches_pool("13000");
}

Test(kept_memory, a_pool_that_follows_the_batch_stays_at_its_addresses_at_13_3)
{
    batches_pool("13030");
}

/* Two sites taking turns (pool_two_sites), each allocating a segment
 * before its capture: that segment comes after the other site's capture
 * and is the next capture's. The driver allocates the first round's six
 * segments and, once more, the first site's segment of the second round
 * (its first came before recap knew the thread captures); from then on
 * nothing, and no capture after that one changes a node. */
static void two_sites_pool(const char *version)
{
    struct pool_run o;
    pool_compare("pool_two_sites", version, NULL, &o);
    long steps_allocs = step_allocations(&o, 6, 1);
    cr_expect_eq(steps_allocs, 7, "at %s the driver allocated %ld segments in %d rounds, "
                 "expected 7", version, steps_allocs, STEPS);
    cr_expect_leq(run_log_total(o.log, "changed"), 1, "at %s captures changed %ld nodes: a "
                  "segment moved", version, run_log_total(o.log, "changed"));
    cr_expect_eq(run_log_total(o.log, "reuse"), 2 * STEPS - 3);
    pool_done(&o);
}

Test(kept_memory, segments_allocated_before_the_captures_of_two_sites_taking_turns_stay)
{
    two_sites_pool("13000");
}

Test(kept_memory, segments_allocated_before_the_captures_of_two_sites_taking_turns_stay_at_13_3)
{
    two_sites_pool("13030");
}

/* The id of the n-th site (from 1) the log names, into id (17 bytes). */
static void nth_site_id(const char *log, int n, char *id)
{
    char *text = run_read_file(log, NULL);
    cr_assert(text, "no log at %s", log);
    const char *at = text;
    for (int i = 0; i < n && at; i++) {
        at = strstr(at, "\"event\":\"site\"");
        at = at ? strstr(at, "\"site\":\"") : NULL;
        at = at ? at + 8 : NULL;
    }
    cr_assert(at && strlen(at) > 16, "the log names fewer than %d sites", n);
    memcpy(id, at, 16);
    id[16] = '\0';
    free(text);
}

/* pool_compare at 13.0 (into *o), then again (into *off) with the second
 * site the first run's log names set to mode = off; its id into id (17
 * bytes). */
static void pool_compare_second_site_off(const char *name, struct pool_run *o,
                                         struct pool_run *off, char *id)
{
    pool_compare(name, "13000", NULL, o);
    nth_site_id(o->log, 2, id);
    char conf[RUN_PATH_MAX];
    snprintf(conf, sizeof conf, "%s", run_path(o->dir, "off.conf"));
    FILE *f = fopen(conf, "w");
    cr_assert(f);
    fprintf(f, "[site %s]\nmode = off\n", id);
    fclose(f);
    recap_config = conf;
    pool_compare(name, "13000", NULL, off);
    recap_config = NULL;
}

/* The same with a site that recap is told to leave alone (mode = off)
 * after the first of them (pool_two_sites_third: a third site's step
 * after each): its segments are the program's, allocated and freed at the
 * driver every step, while the other sites' stay as they do alone. */
Test(kept_memory, a_site_left_alone_between_two_that_keep_gets_none_of_their_memory)
{
    struct pool_run o, off;
    char id[17];
    pool_compare_second_site_off("pool_two_sites_third", &o, &off, id);
    /* Three segments a step at the site left alone; the other three
     * sites' first round, and the first site's second segment before its
     * capture, as alone. */
    long steps_allocs = step_allocations(&off, 12, 1);
    cr_expect_eq(steps_allocs, 3 * STEPS + 10, "the driver allocated %ld segments in %d rounds, "
                 "expected %d", steps_allocs, STEPS, 3 * STEPS + 10);
    cr_expect_eq(run_count_lines(off.log, "\"event\":\"site\"", id, "\"mode\":\"off\"", NULL), 1);
    pool_done(&off);
    pool_done(&o);
}

/* A capture at a site recap is told to leave alone still runs: while it
 * does, another thread's free that recap would keep (after a device-wide
 * synchronisation, which would invalidate that capture) goes to the
 * driver as asked (off_capture_meets_free; the site left alone is the
 * second the log names). */
Test(kept_memory, a_capture_at_a_site_left_alone_is_not_broken_by_a_free_recap_would_keep)
{
    struct pool_run o, off;
    char id[17];
    pool_compare_second_site_off("off_capture_meets_free", &o, &off, id);
    cr_expect_eq(run_count_lines(off.log, "\"event\":\"end\"",
                                 "\"memory_not_kept_reason\":\"a capture runs\"", NULL), 1,
                 "the end event says why the segments were not kept");
    cr_expect_eq(run_log_total(off.log, "memory_kept"), 0);
    pool_done(&off);
    pool_done(&o);
}

/* The same where the other thread's capture is one recap holds no record
 * of: the program's own cuStreamBeginCaptureToGraph, which recap passes to
 * the driver; it counts the capture as running all the same. */
Test(kept_memory, a_capture_the_program_begins_into_its_own_graph_is_not_broken_by_a_free)
{
    struct pool_run o;
    pool_compare("to_graph_capture_meets_free", "13000", NULL, &o);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"",
                                 "\"memory_not_kept_reason\":\"a capture runs\"", NULL), 1,
                 "the end event says why the segments were not kept");
    cr_expect_eq(run_log_total(o.log, "memory_kept"), 0);
    pool_done(&o);
}

/* Pinned host memory freed and pinned again every step (PyTorch empties
 * its pinned cache at each torch.cuda.graph enter): under recap the
 * driver pins each of the two buffers once and unpins nothing until the
 * drain at exit (which gives back the two kept blocks, then retries its
 * own allocation once); the captured copies from them keep their host
 * addresses, so each capture changes only the kernel's scalar. */
static void pinned_steps(const char *version)
{
    struct pool_run o;
    pool_compare("pinned", version, NULL, &o);
    cr_expect_eq(run_stat(o.base_stats, "cuMemHostAlloc"), STEPS + 1);
    cr_expect_eq(run_stat(o.stats, "cuMemHostAlloc"), 1 + 2, "at %s the driver pinned %ld blocks "
                 "through cuMemHostAlloc, expected the first step's and the drain's two tries",
                 version, run_stat(o.stats, "cuMemHostAlloc"));
    cr_expect_eq(run_stat(o.stats, "cuMemAllocHost_v2"), 1);
    cr_expect_eq(run_stat(o.stats, "cuMemFreeHost"), 2, "at %s the driver unpinned %ld blocks, "
                 "expected the two kept ones at the drain", version,
                 run_stat(o.stats, "cuMemFreeHost"));
    cr_expect_eq(run_log_total(o.log, "changed"), run_log_total(o.log, "recaptured"),
                 "at %s captures changed %ld nodes in %ld recaptures: a copy's host address "
                 "moved", version, run_log_total(o.log, "changed"),
                 run_log_total(o.log, "recaptured"));
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"", "\"host_memory\":{\"tracked\":2,",
                                 NULL), 1, "the end event counts the two pinned blocks");
    pool_done(&o);
}

Test(kept_memory, pinned_memory_freed_and_pinned_again_every_step_stays_pinned)
{
    pinned_steps("13000");
}

Test(kept_memory, pinned_memory_freed_and_pinned_again_every_step_stays_pinned_at_13_3)
{
    pinned_steps("13030");
}

/* A pinned allocation that fails for memory gives back every kept block
 * and is retried; the program sees what it sees without recap. */
Test(kept_memory, under_pinned_memory_pressure_kept_blocks_go_back)
{
    struct pool_run o;
    pool_compare("pinned_pressure", "13000", NULL, &o);
    /* Each failed allocation (one step in four, and the drain) is tried
     * twice, and each of those steps pins its two buffers anew. */
    long failed = STEPS / 4 + 1;
    cr_expect_eq(run_stat(o.stats, "cuMemHostAlloc"), 1 + 2 * failed + STEPS / 4);
    cr_expect_eq(run_stat(o.stats, "cuMemAllocHost_v2"), 1 + STEPS / 4);
    pool_done(&o);
}

Test(kept_memory, pinned_memory_is_not_kept_when_asked)
{
    struct pool_run o;
    pool_compare("pinned", "13000", "off", &o);
    cr_expect_eq(run_stat(o.stats, "cuMemHostAlloc"), run_stat(o.base_stats, "cuMemHostAlloc"));
    cr_expect_eq(run_stat(o.stats, "cuMemFreeHost"), run_stat(o.base_stats, "cuMemFreeHost"));
    cr_expect_eq(run_count_lines(o.log, "\"host_memory\"", NULL), 0);
    pool_done(&o);
}

static void pressured_pool(const char *version)
{
    struct pool_run o;
    pool_compare("pool_pressure", version, NULL, &o);
    /* Each failed allocation gives back the two kept segments: the step
     * after it allocates anew. */
    int pressures = STEPS / 4;
    long steps_allocs = step_allocations(&o, 2, pressures + 1);
    cr_expect_eq(steps_allocs, 2 + 2 * pressures, "at %s %ld segments allocated", version,
                 steps_allocs);
    cr_expect_geq(run_count_lines(o.log, "\"event\":\"warning\"",
                                  "memory recap kept for its sites", NULL), pressures,
                  "at %s the log does not say kept memory was given back", version);
    pool_done(&o);
}

Test(kept_memory, under_memory_pressure_kept_memory_goes_back)
{
    pressured_pool("13000");
}

Test(kept_memory, under_memory_pressure_kept_memory_goes_back_at_13_3)
{
    pressured_pool("13030");
}

Test(kept_memory, off_when_asked)
{
    struct pool_run o;
    pool_compare("pool", "13000", "off", &o);
    cr_expect_eq(step_allocations(&o, 2, 1), 2 * STEPS);
    cr_expect_eq(run_log_total(o.log, "memory_kept"), 0);
    pool_done(&o);
}

/* A program that keeps its graphs (PyTorch in debug mode) may still run
 * them: memory of a site whose graph the program holds is never kept. */
Test(kept_memory, memory_of_a_graph_the_program_holds_is_freed_as_asked)
{
    struct pool_run o;
    pool_compare("pool_keep_graphs", "13000", NULL, &o);
    cr_expect_eq(run_log_total(o.log, "memory_kept"), 0);
    cr_expect_eq(run_log_total(o.log, "memory_not_kept"), 2 * STEPS);
    /* Every segment allocated at the driver, as without recap (the drain's
     * allocation may be retried once, if recap kept anything else). */
    cr_expect_geq(run_stat(o.stats, "cuMemAlloc_v2"), run_stat(o.base_stats, "cuMemAlloc_v2"));
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"end\"", "\"memory_not_kept_reason\":"
                                 "\"the program holds a graph or executable graph of the site\"",
                                 NULL), 1, "the end event says why no memory was kept");
    /* ... and why its repeat captures stayed the driver's (this site's
     * gate then closes after failed updates: the rest for that reason). */
    char *text = run_read_file(o.log, NULL);
    const char *end = text ? strstr(text, "\"event\":\"end\"") : NULL;
    const char *held = end ? strstr(end, "\"the program keeps its graphs here and copies are off "
                                         "(RECAP_COPY_HELD=off)\":") : NULL;
    cr_expect_not_null(held, "the end event's fresh_reasons do not name the graphs kept");
    if (held)
        cr_expect_geq(atol(strchr(held + 1, ':') + 1), 1);
    free(text);
    pool_done(&o);
}

/* Whether the driver updates a memset or copy whose original memory was
 * freed is not known (tests/standin/READINGS.md): where it does, recap
 * reuses the site's executable graph every step, with the same results;
 * where it does not (the test above), its gate stops asking. */
Test(kept_memory, a_program_that_holds_its_graphs_under_either_update_reading)
{
    static const char *const readings[] = { "refuse", "accept" };
    for (int i = 0; i < 2; i++) {
        struct pool_run o;
        update_freed = readings[i];
        pool_compare("pool_keep_graphs", "13000", NULL, &o);
        update_freed = NULL;
        long failures = run_log_total(o.log, "update_failures");
        long reused = run_log_total(o.log, "reused");
        if (i == 0)
            cr_expect_geq(failures, 1, "refuse: %ld updates failed", failures);
        else
            cr_expect(failures == 0 && reused >= STEPS - 2, "accept: %ld of %d instantiations "
                      "reused, %ld updates failed", reused, STEPS, failures);
        pool_done(&o);
    }
}

/* The same with copies on (RECAP_COPY_HELD): each repeat capture is
 * recorded into a copy of the newest graph the program keeps, and its
 * kernel and copies must name this capture's own pool, since the last
 * one's is freed once its executable graph is gone. A node left naming a
 * freed pool is a wrong checksum here, and a use after free under the
 * sanitizers and valgrind. */
Test(kept_memory, copies_of_kept_graphs_name_each_captures_own_pool)
{
    struct pool_run o;
    pool_compare_copies("pool_keep_graphs", &o);
    long recorded = run_log_total(o.log, "by_recap");
    cr_expect_geq(recorded, STEPS - 2, "%ld of %d captures recorded into copies", recorded, STEPS);
    cr_expect_eq(run_stat(o.stats, "cuGraphClone"), recorded, "%ld copies for %ld recorded",
                 run_stat(o.stats, "cuGraphClone"), recorded);
    cr_expect_eq(run_log_total(o.log, "memory_kept"), 0);
    pool_done(&o);
}

/* Driver 580 breaks the graph a written clone came from
 * (STANDIN_CLONE_SHARES, tests/standin/READINGS.md). An odd capture whose
 * copy took a new argument at its first kernel and then went on as a
 * driver capture in that copy (another kernel at the second) leaves the
 * usual graph it was cloned from broken in that node; the next capture
 * copies the usual graph again and keeps that argument. Unless a fresh
 * copy's nodes are set first, the copy carries the break and the
 * executable graph's update from it is what crashed the driver. */
Test(kept_memory, a_copy_of_a_graph_whose_copy_was_written_is_whole)
{
    struct pool_run o;
    pool_compare_copies("pool_keep_graphs_late", &o);
    long recorded = run_log_total(o.log, "by_recap");
    cr_expect_geq(recorded, STEPS - 8, "%ld of %d captures recorded", recorded, STEPS);
    cr_expect_geq(run_stat(o.stats, "cuStreamBeginCaptureToGraph"), 1,
                  "no odd capture went on in its copy");
    pool_done(&o);
}

/* A capture that leaves its copy part way (another kernel at one step,
 * as an optimizer's variant): the odd capture binds a copy of the usual
 * graph at its memset (a new address needs a node) and leaves it at its
 * kernel for the odd graph kept in reserve, and the capture after it does
 * the reverse. PyTorch's fused-optimizer graph test computed wrong
 * parameters on the H200 from a capture recorded into such a copy, so a
 * copy left part way is discarded, never recorded into again: each
 * binding clones afresh. Every node must name this capture's pool: a
 * wrong checksum here, a use after free under the sanitizers and
 * valgrind. */
Test(kept_memory, a_copy_left_part_way_names_the_next_captures_pool)
{
    struct pool_run o;
    pool_compare_copies("pool_keep_graphs_odd", &o);
    long fallbacks = run_log_total(o.log, "fallbacks"), recorded = run_log_total(o.log, "by_recap");
    long clones = run_stat(o.stats, "cuGraphClone");
    cr_expect_geq(recorded, STEPS - 4, "%ld of %d captures recorded", recorded, STEPS);
    /* Each capture recorded or left had a copy of its own; those left
     * part way (at least one per odd capture after the first) had one
     * more. */
    cr_expect_geq(clones - recorded - fallbacks, (STEPS - 5) / 6,
                  "%ld copies for %ld recorded and %ld fallbacks: no copy was left part way",
                  clones, recorded, fallbacks);
    pool_done(&o);
}

/* A program that keeps its graphs and moves to other kernels for good
 * (pool_keep_graphs_kinds: another kernel every fifth capture, as
 * PyTorch's optimizer tests go from one variant to the next in debug
 * mode) is recorded from a new kind's second capture on, and a kind seen
 * before is recorded at once: the kept graphs of each kind among the
 * last few are compared call by call, and the one matched is copied. The
 * second capture of the site says why it was the driver's. Copying only
 * the newest graph kept left one fallback per change of kernel (4), and
 * copying only after two alike in a row one more driver capture each. */
Test(kept_memory, a_program_keeping_its_graphs_repeats_each_new_kind_from_its_second_capture)
{
    struct pool_run o;
    pool_compare_copies("pool_keep_graphs_kinds", &o);
    long fallbacks = run_log_total(o.log, "fallbacks"), recorded = run_log_total(o.log, "by_recap");
    cr_expect_eq(fallbacks, 1, "%ld captures left their copy, expected one: the first of the "
                 "second kind", fallbacks);
    cr_expect_eq(recorded, STEPS - 3, "%ld of %d captures recorded, expected all but the first "
                 "two and the first of the second kind", recorded, STEPS);
    cr_expect_eq(run_count_lines(o.log, "\"event\":\"capture\"", "\"seq\":2,",
                                 "not yet two alike in a row to copy from", NULL), 1,
                 "the second capture does not say why it was the driver's");
    pool_done(&o);
}

/* A program that keeps its graphs and whose kernels take turns
 * (pool_keep_graphs_turns: two kernels alternating, as an optimizer's
 * per-tensor and foreach steps do in PyTorch's test_graph_optims) never
 * keeps two alike in a row, and the newest graph kept is always of the
 * other kind: the kind due next is copied, from the fourth capture on
 * (A, B, A seen). Copying the newest only recorded none of them. */
Test(kept_memory, a_program_keeping_graphs_that_take_turns_is_recorded)
{
    struct pool_run o;
    pool_compare_copies("pool_keep_graphs_turns", &o);
    long fallbacks = run_log_total(o.log, "fallbacks"), recorded = run_log_total(o.log, "by_recap");
    cr_expect_eq(recorded, STEPS - 3, "%ld of %d captures recorded, expected all from the fourth",
                 recorded, STEPS);
    cr_expect_eq(fallbacks, 0, "%ld copies of the wrong kind", fallbacks);
    cr_expect_eq(run_stat(o.stats, "cuGraphClone"), recorded);
    pool_done(&o);
}

/* What recap gives back at the end (SCENARIO_DRAIN) fails to free: a
 * failure is logged, but not where the driver is shutting down
 * (CUDA_ERROR_DEINITIALIZED, as at a PyTorch program's exit, where every
 * destroy and free of recap's teardown failed so and filled the log with
 * "may stay allocated"): the driver takes it all with it. */
Test(kept_memory, a_driver_shutting_down_is_not_warned_of)
{
    static const struct { const char *code; long warnings; } cases[] = {
        { "4", 0 },     /* CUDA_ERROR_DEINITIALIZED */
        { "1", 1 },     /* CUDA_ERROR_INVALID_VALUE: at least one warning */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run_result res;
        char *dir = NULL;
        char log[RUN_PATH_MAX], stats[RUN_PATH_MAX], base_stats[RUN_PATH_MAX];
        run_pair_paths(&dir, log, stats, base_stats);
        struct run_spec spec;
        pool_spec(&spec, "pool", "13000", stats);
        spec.with_recap = 1;
        run_setenv(&spec, "RECAP_LOG", "%s", log);
        run_setenv(&spec, "STANDIN_FAULTS", "cuMemFree_v2@1+=%s", cases[i].code);
        cr_assert_eq(run_program(&spec, &res), 0);
        cr_assert_eq(res.status, 0, "%s", res.err);
        long warned = run_count_lines(log, "\"event\":\"warning\"", "may stay allocated", NULL);
        if (cases[i].warnings)
            cr_expect_geq(warned, cases[i].warnings, "error %s: no warning", cases[i].code);
        else
            cr_expect_eq(warned, 0, "error %s: %ld warnings of a driver shutting down",
                         cases[i].code, warned);
        run_result_free(&res);
        run_cleanup_dir(dir);
    }
}

/* cuMemGetInfo counts the memory recap keeps for the next capture as
 * free (recap gives it back when an allocation needs it): the free memory
 * the program reads after each step is what it reads with keep_memory off.
 * (The executable graphs recap keeps are charged as before, as estimates
 * within the cache budget, and not counted as free: so the comparison is
 * with recap keeping no memory, not with the plain run.) */
Test(kept_memory, free_memory_counts_kept_memory_as_free)
{
    struct run_result keeping, not_keeping;
    char *dir = NULL;
    char log[RUN_PATH_MAX], stats[RUN_PATH_MAX], base_stats[RUN_PATH_MAX];
    run_pair_paths(&dir, log, stats, base_stats);
    struct run_spec spec;
    const char *keep[2] = { "on", "off" };
    struct run_result *out[2] = { &keeping, &not_keeping };
    for (int i = 0; i < 2; i++) {
        pool_spec(&spec, "pool_meminfo", "13000", i ? base_stats : stats);
        spec.with_recap = 1;
        run_setenv(&spec, "RECAP_LOG", "%s", log);
        run_setenv(&spec, "RECAP_SELF_RECORD", "%s", "");
        run_setenv(&spec, "RECAP_KEEP_MEMORY", "%s", keep[i]);
        cr_assert_eq(run_program(&spec, out[i]), 0);
        cr_assert_eq(out[i]->status, 0, "%s", out[i]->err);
    }
    cr_expect(strstr(keeping.out, "free=") != NULL);
    cr_expect_str_eq(keeping.out, not_keeping.out, "the free memory differs with memory kept");
    run_result_free(&keeping);
    run_result_free(&not_keeping);
    run_cleanup_dir(dir);
}
