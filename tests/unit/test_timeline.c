/*
 * test_timeline.c - a site's counts per window of captures (shim/base/timeline.c):
 * windows one capture wide that double, two merging into one, as the
 * captures outgrow them, with every count and time kept; recaptures told
 * apart by who recorded them; instantiations in the window of the capture
 * they follow; and the "timeline" event's keys as the log writes them.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/base/jlog.h"
#include "shim/base/timeline.h"

static unsigned long total(const uint32_t *n)
{
    unsigned long sum = 0;
    for (int i = 0; i < TIMELINE_WINDOWS; i++)
        sum += n[i];
    return sum;
}

Test(timeline, windows_start_one_capture_wide)
{
    struct timeline t = { 0 };
    timeline_capture(&t, 1, "fresh", NULL, 100.0);
    timeline_capture(&t, 2, "recapture", "recap", 10.0);
    timeline_capture(&t, 3, "recapture", "driver", 12.0);
    timeline_capture(&t, 4, "fallback", NULL, 50.0);
    timeline_capture(&t, 5, "observe", NULL, 5.0);
    cr_assert_eq(t.window, 1);
    cr_assert_eq(t.last, 5);
    cr_assert_eq(t.captures[TIMELINE_FRESH][0], 1);
    cr_assert_eq(t.captures[TIMELINE_BY_RECAP][1], 1);
    cr_assert_eq(t.captures[TIMELINE_BY_DRIVER][2], 1);
    cr_assert_eq(t.captures[TIMELINE_FALLBACK][3], 1);
    cr_assert_eq(t.captures[TIMELINE_OBSERVE][4], 1);
    cr_assert_float_eq(t.capture_us[3], 50.0, 1e-9);
}

Test(timeline, what_it_cannot_place_is_not_counted)
{
    struct timeline t = { 0 };
    timeline_capture(&t, 0, "fresh", NULL, 1.0);
    timeline_capture(&t, 1, "sideways", NULL, 1.0);
    timeline_capture(&t, 1, NULL, NULL, 1.0);
    timeline_instantiation(&t, 1, "bogus", 1.0);
    timeline_instantiation(&t, 0, "new", 1.0);
    cr_assert_eq(t.window, 0, "nothing counted, no window yet");
    /* A recapture without "by" is the driver's. */
    timeline_capture(&t, 1, "recapture", NULL, 1.0);
    cr_assert_eq(t.captures[TIMELINE_BY_DRIVER][0], 1);
}

Test(timeline, windows_double_and_keep_every_count)
{
    struct timeline t = { 0 };
    const unsigned long n = 100000;
    for (unsigned long seq = 1; seq <= n; seq++) {
        timeline_capture(&t, seq, seq % 7 == 0 ? "fallback" : "recapture", "recap", 2.0);
        timeline_instantiation(&t, seq, seq % 7 == 0 ? "new" : "update", 1.0);
    }
    /* 100000 captures in at most 32 windows: 4096 a window, 25 used. */
    cr_assert_eq(t.window, 4096);
    cr_assert_eq((t.last - 1) / t.window + 1, 25);
    cr_assert_eq(total(t.captures[TIMELINE_FALLBACK]), n / 7);
    cr_assert_eq(total(t.captures[TIMELINE_BY_RECAP]), n - n / 7);
    cr_assert_eq(total(t.insts[TIMELINE_NEW]), n / 7);
    cr_assert_eq(total(t.insts[TIMELINE_UPDATE]), n - n / 7);
    /* Window 0 holds captures 1..4096 exactly; the last one the rest. */
    cr_assert_eq(t.captures[TIMELINE_FALLBACK][0] + t.captures[TIMELINE_BY_RECAP][0], 4096);
    cr_assert_eq(t.captures[TIMELINE_FALLBACK][24] + t.captures[TIMELINE_BY_RECAP][24],
                 n - 24 * 4096);
    cr_assert_eq(t.captures[TIMELINE_BY_RECAP][25], 0);
    double us = 0;
    for (int i = 0; i < TIMELINE_WINDOWS; i++)
        us += t.capture_us[i];
    cr_assert_float_eq(us, 2.0 * n, 1e-6);
    cr_assert_float_eq(t.inst_us[0], 4096.0, 1e-9);
}

Test(timeline, merging_keeps_order)
{
    struct timeline t = { 0 };
    /* Captures 1..32 fresh, 33..64 fallbacks: one merge, 16 windows each. */
    for (unsigned long seq = 1; seq <= 64; seq++)
        timeline_capture(&t, seq, seq <= 32 ? "fresh" : "fallback", NULL, (double)seq);
    cr_assert_eq(t.window, 2);
    for (int i = 0; i < 16; i++) {
        cr_assert_eq(t.captures[TIMELINE_FRESH][i], 2, "window %d", i);
        cr_assert_eq(t.captures[TIMELINE_FALLBACK][i], 0, "window %d", i);
        cr_assert_eq(t.captures[TIMELINE_FALLBACK][16 + i], 2, "window %d", 16 + i);
        cr_assert_float_eq(t.capture_us[i], (double)(4 * i + 3), 1e-9, "window %d", i);
    }
}

Test(timeline, an_instantiation_goes_to_its_capture_window)
{
    struct timeline t = { 0 };
    timeline_capture(&t, 1, "fresh", NULL, 1.0);
    timeline_instantiation(&t, 1, "new", 300.0);
    timeline_instantiation(&t, 40, "reuse", 2.0);     /* grows the windows too */
    cr_assert_eq(t.window, 2);
    cr_assert_eq(t.last, 40);
    cr_assert_eq(t.insts[TIMELINE_NEW][0], 1);
    cr_assert_eq(t.insts[TIMELINE_REUSE][19], 1);
    cr_assert_float_eq(t.inst_us[0], 300.0, 1e-9);
}

static void emit(const struct timeline *t, char *out, size_t len)
{
    char path[] = "/tmp/recap-timeline-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    char *no_env[] = { NULL };
    jlog_configure(path, no_env);
    struct jlog_line l;
    jlog_line_begin(&l, "timeline");
    jlog_site(&l, "site", 0xabcull);
    timeline_json(&l, t);
    jlog_line_emit(&l);
    fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    unlink(path);
    out[n > 0 ? n : 0] = '\0';
}

Test(timeline, the_event_writes_what_is_not_zero)
{
    struct timeline t = { 0 };
    for (unsigned long seq = 1; seq <= 3; seq++)
        timeline_capture(&t, seq, seq == 1 ? "fresh" : "recapture", "recap", 10.4);
    timeline_instantiation(&t, 1, "new", 99.6);
    timeline_instantiation(&t, 3, "update", 3.0);
    char line[4096];
    emit(&t, line, sizeof line);
    cr_assert(strstr(line, "\"site\":\"0000000000000abc\",\"window\":1,\"windows\":3,"
                           "\"by_recap\":[0,1,1],\"fresh\":[1,0,0],\"new\":[1,0,0],"
                           "\"update\":[0,0,1],\"capture_us\":[10,10,10],"
                           "\"inst_us\":[100,0,3]}\n") != NULL, "%s", line);
    cr_assert_null(strstr(line, "fallback"));
    cr_assert_null(strstr(line, "by_driver"));
}

Test(timeline, a_site_that_never_captured_writes_no_keys)
{
    struct timeline t = { 0 };
    char line[4096];
    emit(&t, line, sizeof line);
    cr_assert_null(strstr(line, "window"), "%s", line);
}
