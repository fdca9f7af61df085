/*
 * test_config.c - the configuration parser, table-driven: each bad input
 * must produce exactly its "PATH:LINE: found ..., expected ..." message and
 * leave nothing allocated; each good input must produce its structure.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/config.h"

#define ID1 "0123456789abcdef"
#define ID2 "fedcba9876543210"
#define NUL_TEXT "[defaults]\nmo\0de = auto\n"

struct bad_case {
    const char *name;
    const char *text;
    size_t len;                 /* 0: strlen(text) */
    const char *message;        /* expected substring, "t.conf:LINE: found ..." */
};

static const struct bad_case bad_cases[] = {
    { "self_record not on or off", "[defaults]\nself_record = yes\n", 0,
      "t.conf:2: found self_record = \"yes\", expected on or off" },
    { "keep_memory not on or off", "[defaults]\nkeep_memory = 1\n", 0,
      "t.conf:2: found keep_memory = \"1\", expected on or off" },
    { "keep_memory in a site", "[site 0123456789abcdef]\nkeep_memory = off\n", 0,
      "t.conf:2: found keep_memory in a [site] section, expected it only in [defaults] (kept "
      "memory shares one budget)" },
    { "self_record twice in a site", "[site 0123456789abcdef]\nself_record = on\n"
      "self_record = off\n", 0,
      "t.conf:3: found a second self_record in this section (first at line 2)" },
    { "cache_budget unknown unit", "[defaults]\ncache_budget = 12 parsecs\n", 0,
      "t.conf:2: found cache_budget = \"12 parsecs\", expected a size in bytes with an optional "
      "unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB) such as 512MiB, at most 1PiB, or a whole "
      "percentage of device memory from 0% to 100% such as 2%" },
    { "cache_budget over 100%", "[defaults]\ncache_budget = 101%\n", 0,
      "t.conf:2: found cache_budget = \"101%\"" },
    { "cache_budget fraction", "[defaults]\ncache_budget = 1.5GiB\n", 0,
      "t.conf:2: found cache_budget = \"1.5GiB\"" },
    { "cache_budget negative", "\n[defaults]\ncache_budget = -1\n", 0,
      "t.conf:3: found cache_budget = \"-1\"" },
    { "cache_budget over 1PiB", "[defaults]\ncache_budget = 2048TiB\n", 0,
      "t.conf:2: found cache_budget = \"2048TiB\"" },
    { "cache_budget too many digits", "[defaults]\ncache_budget = 99999999999999999999\n", 0,
      "t.conf:2: found cache_budget = \"99999999999999999999\"" },
    { "cache_budget empty", "[defaults]\ncache_budget =\n", 0,
      "t.conf:2: found an empty value for cache_budget, expected a size such as 512MiB or a "
      "share such as 2%" },
    { "cache_budget in a site", "[site " ID1 "]\ncache_budget = 1MiB\n", 0,
      "t.conf:2: found cache_budget in a [site] section, expected it only in [defaults]" },
    { "cache_budget twice", "[defaults]\ncache_budget = 1MiB\ncache_budget = 2MiB\n", 0,
      "t.conf:3: found a second cache_budget in this section (first at line 2)" },
    { "unknown section", "[default]\nmode = auto\n", 0,
      "t.conf:1: found section \"[default]\", expected [defaults] or [site ID]" },
    { "unknown key in defaults", "[defaults]\nmod = auto\n", 0,
      "t.conf:2: found unknown key \"mod\", expected mode, max_graphs, stack_depth, "
      "cache_budget, python_skip, self_record or keep_memory" },
    { "unknown key in site", "[site " ID1 "]\ncolour = red\n", 0,
      "t.conf:2: found unknown key \"colour\", expected mode, max_graphs, self_record or "
      "label" },
    { "bad mode", "[defaults]\nmode = fast\n", 0,
      "t.conf:2: found mode = \"fast\", expected auto, recapture, update, observe or off" },
    { "mode is case-sensitive", "[defaults]\n\nmode = AUTO\n", 0,
      "t.conf:3: found mode = \"AUTO\", expected" },
    { "max_graphs zero", "[defaults]\nmax_graphs = 0\n", 0,
      "t.conf:2: found max_graphs = \"0\", expected a whole number from 1 to 64" },
    { "max_graphs too big", "[defaults]\nmax_graphs = 65\n", 0,
      "t.conf:2: found max_graphs = \"65\", expected a whole number from 1 to 64" },
    { "max_graphs not a number", "[site " ID1 "]\nmax_graphs = 2x\n", 0,
      "t.conf:2: found max_graphs = \"2x\", expected a whole number" },
    { "max_graphs negative", "[defaults]\nmax_graphs = -1\n", 0,
      "t.conf:2: found max_graphs = \"-1\"" },
    { "max_graphs huge", "[defaults]\nmax_graphs = 99999999999999999999\n", 0,
      "t.conf:2: found max_graphs = \"99999999999999999999\"" },
    { "stack_depth zero", "[defaults]\nstack_depth = 0\n", 0,
      "t.conf:2: found stack_depth = \"0\", expected a whole number from 1 to 64" },
    { "stack_depth too big", "[defaults]\nstack_depth = 65\n", 0,
      "t.conf:2: found stack_depth = \"65\"" },
    { "stack_depth in site", "[site " ID1 "]\nstack_depth = 4\n", 0,
      "t.conf:2: found stack_depth in a [site] section, expected it only in [defaults]" },
    { "python_skip in site", "[site " ID1 "]\npython_skip = mylib\n", 0,
      "t.conf:2: found python_skip in a [site] section, expected it only in [defaults]" },
    { "python_skip empty entry", "[defaults]\npython_skip = mylib,,other\n", 0,
      "t.conf:2: found an empty entry in python_skip = \"mylib,,other\", expected path "
      "fragments separated by commas" },
    { "python_skip trailing comma", "[defaults]\npython_skip = mylib,\n", 0,
      "t.conf:2: found an empty entry in python_skip" },
    { "python_skip bad character", "[defaults]\npython_skip = my lib\n", 0,
      "t.conf:2: found python_skip entry \"my lib\", expected letters, digits and _ - . / < >" },
    { "python_skip empty", "[defaults]\npython_skip =\n", 0,
      "t.conf:2: found an empty value for python_skip, expected path fragments separated by "
      "commas" },
    { "label in defaults", "[defaults]\nlabel = x\n", 0,
      "t.conf:2: found label in [defaults], expected label only in [site ID] sections" },
    { "malformed site id short", "[site 0123]\n", 0,
      "t.conf:1: found site id \"0123\", expected 16 hex digits" },
    { "malformed site id non-hex", "[site 0123456789abcdeg]\n", 0,
      "t.conf:1: found site id \"0123456789abcdeg\", expected 16 hex digits" },
    { "malformed site id long", "[site 0123456789abcdef0]\n", 0,
      "t.conf:1: found site id \"0123456789abcdef0\", expected 16 hex digits" },
    { "site without id", "[site]\n", 0,
      "t.conf:1: found [site] without an id, expected [site ID]" },
    { "duplicate site id", "[site " ID1 "]\nmode = auto\n\n[site 0123456789ABCDEF]\n", 0,
      "t.conf:4: found a second [site 0123456789ABCDEF] section (first at line 1), "
      "expected each site once" },
    { "duplicate defaults", "[defaults]\n[defaults]\n", 0,
      "t.conf:2: found a second [defaults] section (first at line 1), expected one at most" },
    { "duplicate key", "[defaults]\nmode = auto\nmode = update\n", 0,
      "t.conf:3: found a second mode in this section (first at line 2), expected each key once" },
    { "duplicate key in site", "[site " ID1 "]\nlabel = a\nlabel = b\n", 0,
      "t.conf:3: found a second label in this section (first at line 2)" },
    { "duplicate label across sites",
      "[site " ID1 "]\nlabel = decode\n[site " ID2 "]\nlabel = decode\n", 0,
      "t.conf:4: found label \"decode\" already given to site " ID1 " (line 1), "
      "expected each label once" },
    { "label bad character", "[site " ID1 "]\nlabel = two words\n", 0,
      "t.conf:2: found label = \"two words\", expected letters, digits, _ - . : or /" },
    { "label too long", "[site " ID1 "]\nlabel = "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 0,
      "t.conf:2: found a label of 64 bytes, expected at most 63" },
    { "label all", "[site " ID1 "]\nlabel = all\n", 0,
      "t.conf:2: found label = \"all\", expected a name other than all, none or 16 hex digits" },
    { "label looks like id", "[site " ID1 "]\nlabel = " ID2 "\n", 0,
      "t.conf:2: found label = \"" ID2 "\", expected a name other than" },
    { "key outside section", "# top\nmode = auto\n", 0,
      "t.conf:2: found key \"mode\" before any section, expected [defaults] or [site ID] first" },
    { "no equals", "[defaults]\nmode auto\n", 0,
      "t.conf:2: found \"mode auto\", expected key = value, a [section] or a # comment" },
    { "no key", "[defaults]\n= auto\n", 0,
      "t.conf:2: found \"= auto\" with no key, expected key = value" },
    { "empty value", "[defaults]\nmode =\n", 0,
      "t.conf:2: found an empty value for mode, expected auto, recapture, update, observe or off" },
    { "empty value before comment", "[defaults]\nmax_graphs = # none\n", 0,
      "t.conf:2: found an empty value for max_graphs, expected a number" },
    { "empty label", "[site " ID1 "]\nlabel =   \n", 0,
      "t.conf:2: found an empty value for label, expected a label" },
    { "unclosed section", "[defaults\n", 0,
      "t.conf:1: found \"[defaults\", expected a section header ending in ]" },
    { "junk after section", "[defaults] mode = auto\n", 0,
      "t.conf:1: found \"mode = auto\" after the section header, expected nothing or a # comment" },
    { "hash glued to value", "[defaults]\nmode = auto#x\n", 0,
      "t.conf:2: found mode = \"auto#x\"" },
    { "NUL byte", NUL_TEXT, sizeof NUL_TEXT - 1,
      "t.conf:2: found a NUL byte at column 3, expected text" },
    { "invalid UTF-8", "[defaults]\n# caf\xe9\n", 0,
      "t.conf:2: found byte 0xe9 at column 6 that is not UTF-8, expected UTF-8 text" },
    { "overlong UTF-8", "[defaults]\nmode = \xc0\xaf\n", 0,
      "t.conf:2: found byte 0xc0 at column 8 that is not UTF-8" },
    { "surrogate UTF-8", "# \xed\xa0\x80\n", 0,
      "t.conf:1: found byte 0xed at column 3 that is not UTF-8" },
    { "control byte", "[defaults]\nmode = au\x1bto\n", 0,
      "t.conf:2: found control byte 0x1b at column 10, expected text" },
    { "lone CR inside", "[defaults]\rmode = auto\n", 0,
      "t.conf:1: found control byte 0x0d at column 11" },
};

static char *long_line(size_t n)
{
    char *text = malloc(n + 16);
    cr_assert_not_null(text);
    strcpy(text, "[defaults]\n# ");
    memset(text + 13, 'x', n - 2);
    text[11 + n] = '\n';
    text[12 + n] = '\0';
    return text;
}

Test(config, every_bad_input_gets_its_one_message)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        struct conf_file conf;
        char err[512];
        memset(&conf, 0x5a, sizeof conf);
        size_t len = c->len ? c->len : strlen(c->text);
        int rc = conf_parse("t.conf", c->text, len, &conf, err, sizeof err);
        cr_expect_eq(rc, -1, "%s: accepted", c->name);
        cr_expect(strstr(err, c->message) != NULL, "%s:\n  got  %s\n  want %s", c->name, err,
                  c->message);
        cr_expect_eq(strncmp(err, "t.conf:", 7), 0, "%s: %s", c->name, err);
        cr_expect(strchr(err, '\n') == NULL, "%s: more than one line: %s", c->name, err);
        cr_expect_null(conf.sites, "%s: sites left behind", c->name);
        cr_expect_eq(conf.nsites, 0, "%s", c->name);
    }
}

Test(config, over_long_line)
{
    char *ok = long_line(CONF_LINE_MAX - 1);
    char *bad = long_line(CONF_LINE_MAX);
    struct conf_file conf;
    char err[256];
    cr_expect_eq(conf_parse("t.conf", ok, strlen(ok), &conf, err, sizeof err), 0, "%s", err);
    conf_free(&conf);
    cr_expect_eq(conf_parse("t.conf", bad, strlen(bad), &conf, err, sizeof err), -1);
    cr_expect_str_eq(err, "t.conf:2: found a line of 1024 bytes, expected at most 1023");
    free(ok);
    free(bad);
}

Test(config, message_truncated_to_buffer_stays_utf8)
{
    struct conf_file conf;
    char err[40];
    const char *text = "[defaults]\nmode = \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\n";
    cr_assert_eq(conf_parse("t.conf", text, strlen(text), &conf, err, sizeof err), -1);
    size_t len = strlen(err);
    cr_expect_lt(len, sizeof err);
    /* the last byte must not start or continue a cut sequence */
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)err[i];
        size_t need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        cr_assert_leq(i + need, len, "cut character in \"%s\"", err);
        i += need;
    }
}

Test(config, valid_file_structure)
{
    const char *text =
        "\xef\xbb\xbf# recap configuration\r\n"
        "[defaults]   # all sites\n"
        "mode = update\n"
        "self_record = off\n"
        "\tmax_graphs=4\n"
        "stack_depth = 12   # deeper\n"
        "\n"
        "[site " ID1 "]\n"
        "# frame 0: app+0x10\n"
        "label = decode.step:1\n"
        "mode = observe\n"
        "[ site   FEDCBA9876543210 ]\n"
        "self_record = on\n"
        "max_graphs = 64\n"
        "[site 00000000000000ff]\n";
    struct conf_file conf;
    char err[256];
    cr_assert_eq(conf_parse("t.conf", text, strlen(text), &conf, err, sizeof err), 0, "%s", err);
    cr_expect(conf.has_mode);
    cr_expect_eq(conf.mode, RECAP_MODE_UPDATE);
    cr_expect_eq(conf.max_graphs, 4);
    cr_expect_eq(conf.stack_depth, 12);
    cr_assert_eq(conf.nsites, 3);
    cr_expect_eq(conf.sites[0].id, 0x0123456789abcdefull);
    cr_expect_str_eq(conf.sites[0].label, "decode.step:1");
    cr_expect(conf.sites[0].has_mode);
    cr_expect_eq(conf.sites[0].mode, RECAP_MODE_OBSERVE);
    cr_expect_eq(conf.sites[0].max_graphs, 0);
    cr_expect_eq(conf.sites[0].line, 8);
    cr_expect_eq(conf.sites[0].self_record, CONF_UNSET);
    cr_expect_eq(conf.self_record, CONF_OFF);
    cr_expect_eq(conf.sites[1].id, 0xfedcba9876543210ull);
    cr_expect_not(conf.sites[1].has_mode);
    cr_expect_eq(conf.sites[1].max_graphs, 64);
    cr_expect_eq(conf.sites[1].self_record, CONF_ON);
    cr_expect_str_eq(conf.sites[1].label, "");
    cr_expect_eq(conf.sites[2].id, 0xffull);
    cr_expect_eq(conf.sites[2].line, 15);
    conf_free(&conf);
    cr_expect_null(conf.sites);
}

Test(config, empty_and_comment_only_files_are_valid)
{
    const char *texts[] = { "", "\n\n", "# nothing\n   # indented\n", "[defaults]\n",
                            "[defaults]" /* no final newline */ };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct conf_file conf;
        char err[256];
        cr_expect_eq(conf_parse("t.conf", texts[i], strlen(texts[i]), &conf, err, sizeof err), 0,
                     "case %zu: %s", i, err);
        cr_expect_not(conf.has_mode);
        cr_expect_eq(conf.nsites, 0);
        conf_free(&conf);
    }
}

Test(config, every_mode_round_trips)
{
    for (int m = RECAP_MODE_AUTO; m <= RECAP_MODE_OFF; m++) {
        enum recap_mode back;
        const char *name = conf_mode_name((enum recap_mode)m);
        cr_assert_not_null(name);
        cr_expect_eq(conf_mode_parse(name, &back), 0);
        cr_expect_eq((int)back, m);
        char text[64];
        snprintf(text, sizeof text, "[site " ID1 "]\nmode = %s\n", name);
        struct conf_file conf;
        char err[128];
        cr_assert_eq(conf_parse("t.conf", text, strlen(text), &conf, err, sizeof err), 0);
        cr_expect_eq((int)conf.sites[0].mode, m);
        conf_free(&conf);
    }
    enum recap_mode untouched = RECAP_MODE_UPDATE;
    cr_expect_eq(conf_mode_parse("Auto", &untouched), -1);
    cr_expect_eq(conf_mode_parse("", &untouched), -1);
    cr_expect_eq(conf_mode_parse(NULL, &untouched), -1);
    cr_expect_eq(untouched, RECAP_MODE_UPDATE);
    cr_expect_null(conf_mode_name((enum recap_mode)99));
}

Test(config, many_sites_grow_the_table)
{
    char *text = malloc(200 * 64);
    size_t len = 0;
    for (int i = 0; i < 200; i++)
        len += (size_t)sprintf(text + len, "[site %016x]\nlabel = s%d\n", i + 1, i);
    struct conf_file conf;
    char err[128];
    cr_assert_eq(conf_parse("t.conf", text, len, &conf, err, sizeof err), 0, "%s", err);
    cr_expect_eq(conf.nsites, 200);
    cr_expect_eq(conf.sites[199].id, 200);
    cr_expect_str_eq(conf.sites[199].label, "s199");
    conf_free(&conf);
    free(text);
}

Test(config, load_reads_file_and_reports_unreadable)
{
    char dir[] = "/tmp/recap-conf-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/good.conf", dir);
    FILE *f = fopen(path, "w");
    fputs("[defaults]\nmode = observe\n", f);
    fclose(f);
    struct conf_file conf;
    char err[512];
    cr_expect_eq(conf_load(path, &conf, err, sizeof err), 0, "%s", err);
    cr_expect_eq(conf.mode, RECAP_MODE_OBSERVE);
    conf_free(&conf);

    char missing[256], want[512];
    snprintf(missing, sizeof missing, "%s/missing.conf", dir);
    cr_expect_eq(conf_load(missing, &conf, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory", missing);
    cr_expect_str_eq(err, want);

    cr_expect_eq(conf_load(dir, &conf, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot read: is a directory", dir);
    cr_expect_str_eq(err, want);

    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_expect_eq(conf_load(fifo, &conf, err, sizeof err), -1);   /* must not block */
    cr_expect(strstr(err, "cannot read: not a regular file") != NULL, "%s", err);

    snprintf(path, sizeof path, "%s/bad.conf", dir);
    f = fopen(path, "w");
    fputs("[defaults]\n\n\nmode = sometimes\n", f);
    fclose(f);
    cr_expect_eq(conf_load(path, &conf, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:4: found mode = \"sometimes\"", path);
    cr_expect(strncmp(err, want, strlen(want)) == 0, "%s", err);

    if (geteuid() != 0) {      /* root reads anything */
        chmod(path, 0);
        cr_expect_eq(conf_load(path, &conf, err, sizeof err), -1);
        cr_expect(strstr(err, "cannot read: Permission denied") != NULL, "%s", err);
    }
    unlink(path);
    unlink(fifo);
    snprintf(path, sizeof path, "%s/good.conf", dir);
    unlink(path);
    rmdir(dir);
}

Test(config, cache_budget_sizes_and_shares)
{
    static const struct { const char *text; int is_percent; int percent; uint64_t bytes; } ok[] = {
        { "512MiB", 0, 0, 512ull << 20 }, { "2GiB", 0, 0, 2ull << 30 }, { "1048576", 0, 0, 1048576 },
        { "64 KiB", 0, 0, 64 << 10 }, { "100MB", 0, 0, 100000000 }, { "0", 0, 0, 0 },
        { "3B", 0, 0, 3 }, { "1TiB", 0, 0, 1ull << 40 }, { "1024TiB", 0, 0, 1ull << 50 },
        { "2%", 1, 2, 0 }, { "0%", 1, 0, 0 }, { "100 %", 1, 100, 0 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "[defaults]\ncache_budget = %s # note\n", ok[i].text);
        struct conf_file conf;
        char err[512];
        cr_assert_eq(conf_parse("t.conf", text, strlen(text), &conf, err, sizeof err), 0, "%s: %s",
                     ok[i].text, err);
        cr_expect_eq(conf.cache_budget.set, 1, "%s", ok[i].text);
        cr_expect_eq(conf.cache_budget.is_percent, ok[i].is_percent, "%s", ok[i].text);
        cr_expect_eq(conf.cache_budget.percent, ok[i].percent, "%s", ok[i].text);
        cr_expect_eq(conf.cache_budget.bytes, ok[i].bytes, "%s", ok[i].text);
        conf_free(&conf);
    }
}

Test(config, python_skip_and_path_labels)
{
    const char *text =
        "[defaults]\n"
        "python_skip = mylib, pkg/plumbing.py ,<string>   # not the program's frames\n"
        "[site " ID1 "]\n"
        "label = tools/train.py:42\n";
    struct conf_file conf;
    char err[256];
    cr_assert_eq(conf_parse("t.conf", text, strlen(text), &conf, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(conf.python_skip, "mylib, pkg/plumbing.py ,<string>");
    cr_expect_str_eq(conf.sites[0].label, "tools/train.py:42");
    conf_free(&conf);
    cr_expect_str_eq(conf.python_skip, "");
}
