/*
 * test_settings.c - environment and configuration, table-driven: each bad
 * value gets one "recap: ..." line and observe mode; good values land in
 * recap_settings; the per-site precedence is the one settings.h documents;
 * log path templates expand as documented.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "policy/settings.h"

#define ID1 "0123456789abcdef"
#define ID2 "fedcba9876543210"
#define ID1_N 0x0123456789abcdefull
#define ID2_N 0xfedcba9876543210ull
#define ID3_N 0x1111111111111111ull

/* 160 bytes: one more than a RECAP_SITES label may have. */
#define LONG_LABEL "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
                   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

#define MAX_ENV 8
#define MAX_MSGS 3

struct env_case {
    const char *name;
    const char *env[MAX_ENV];          /* NULL-terminated */
    const char *conf;                  /* contents for RECAP_CONFIG, NULL: none */
    const char *messages[MAX_MSGS];    /* one expected line each, as substrings */
    enum recap_mode mode;
    int degraded;
    enum settings_sites_filter filter;
    int nlisted;
    const char *log;                   /* expected log_template, NULL: default */
};

static const char conf_basic[] =
    "[defaults]\nmode = update\nmax_graphs = 5\nstack_depth = 3\n"
    "[site " ID1 "]\nlabel = decode\nmode = recapture\nmax_graphs = 7\n"
    "[site " ID2 "]\nlabel = prefill\n";

static const struct env_case env_cases[] = {
    { "nothing set", { NULL }, NULL, { NULL }, RECAP_MODE_AUTO, 0, SITES_ALL, 0, NULL },
    { "mode update", { "RECAP_MODE=update" }, NULL, { NULL }, RECAP_MODE_UPDATE, 0, SITES_ALL },
    { "unrelated variables ignored", { "RECAP_MODEX=off", "XRECAP_MODE=off", "PATH=/bin" },
      NULL, { NULL }, RECAP_MODE_AUTO },
    { "first occurrence wins", { "RECAP_MODE=observe", "RECAP_MODE=bogus" }, NULL, { NULL },
      RECAP_MODE_OBSERVE },
    { "unknown mode", { "RECAP_MODE=fast" }, NULL,
      { "recap: RECAP_MODE=\"fast\": found an unknown mode, expected auto, recapture, update, "
        "observe or off" }, RECAP_MODE_OBSERVE, 1 },
    { "empty mode", { "RECAP_MODE=" }, NULL,
      { "recap: RECAP_MODE=\"\": found an empty value, expected auto, recapture, update, "
        "observe or off" }, RECAP_MODE_OBSERVE, 1 },
    { "control byte in mode", { "RECAP_MODE=au\ttomatic" }, NULL,
      { "recap: RECAP_MODE=\"au\\x09tomatic\": found control byte 0x09 at offset 2, expected "
        "printable text" }, RECAP_MODE_OBSERVE, 1 },
    { "over-long mode", { "RECAP_MODE=recapturerecapture" }, NULL,
      { "found a value of 18 bytes, expected at most 15" }, RECAP_MODE_OBSERVE, 1 },
    { "off skips everything else", { "RECAP_MODE=off", "RECAP_SITES=,,", "RECAP_LOG=%q",
                                     "RECAP_CONFIG=t.conf" }, "garbage\n",
      { NULL }, RECAP_MODE_OFF, 0, SITES_ALL, 0, "off" },
    { "off still reports a bad verbose", { "RECAP_MODE=off", "RECAP_VERBOSE=2" }, NULL,
      { "recap: RECAP_VERBOSE=\"2\": found an unknown value, expected 0 or 1" },
      RECAP_MODE_OFF, 1, SITES_ALL, 0, "off" },
    { "sites none", { "RECAP_SITES=none" }, NULL, { NULL }, RECAP_MODE_AUTO, 0, SITES_NONE },
    { "sites all", { "RECAP_SITES=all" }, NULL, { NULL }, RECAP_MODE_AUTO, 0, SITES_ALL },
    { "sites ids", { "RECAP_SITES=" ID1 ", " ID2 }, NULL, { NULL }, RECAP_MODE_AUTO, 0,
      SITES_LIST, 2 },
    { "sites ids upper case", { "RECAP_SITES=0123456789ABCDEF" }, NULL, { NULL },
      RECAP_MODE_AUTO, 0, SITES_LIST, 1 },
    { "sites empty entry", { "RECAP_SITES=" ID1 ",," ID2 }, NULL,
      { "recap: RECAP_SITES=\"" ID1 ",," ID2 "\": found an empty entry in the list, expected "
        "site ids or labels separated by commas" }, RECAP_MODE_OBSERVE, 1, SITES_ALL },
    { "sites trailing comma", { "RECAP_SITES=" ID1 "," }, NULL,
      { "found an empty entry in the list" }, RECAP_MODE_OBSERVE, 1, SITES_ALL },
    { "sites short id", { "RECAP_SITES=0123abc" }, NULL,
      { "recap: RECAP_SITES=\"0123abc\": found site id \"0123abc\" of 7 digits, expected 16 hex "
        "digits or a label" }, RECAP_MODE_OBSERVE, 1, SITES_ALL },
    /* A label nothing defines waits for a site named so (train.py:42). */
    { "sites label without config", { "RECAP_SITES=train.py:42" }, NULL,
      { NULL }, RECAP_MODE_AUTO, 0, SITES_LIST, 1 },
    { "sites label with spaces", { "RECAP_SITES=train.py:42 (step) < train.py:80 (main)" },
      NULL, { NULL }, RECAP_MODE_AUTO, 0, SITES_LIST, 1 },
    { "sites label too long", { "RECAP_SITES=" LONG_LABEL }, NULL,
      { "of 160 bytes, expected a site id or a label of at most 159 bytes" },
      RECAP_MODE_OBSERVE, 1, SITES_ALL },
    { "sites labels from config", { "RECAP_SITES=decode,prefill", "RECAP_CONFIG=t.conf" },
      conf_basic, { NULL }, RECAP_MODE_UPDATE, 0, SITES_LIST, 2 },
    { "sites label the config lacks", { "RECAP_SITES=decode,sample", "RECAP_CONFIG=t.conf" },
      conf_basic, { NULL }, RECAP_MODE_UPDATE, 0, SITES_LIST, 2 },
    { "sites not UTF-8", { "RECAP_SITES=abc\xff" }, NULL,
      { "recap: RECAP_SITES=\"abc\\xff\": found byte 0xff at offset 3 that is not UTF-8, "
        "expected UTF-8 text" }, RECAP_MODE_OBSERVE, 1, SITES_ALL },
    { "config defaults apply", { "RECAP_CONFIG=t.conf" }, conf_basic, { NULL },
      RECAP_MODE_UPDATE, 0, SITES_ALL },
    { "env mode beats config defaults", { "RECAP_CONFIG=t.conf", "RECAP_MODE=recapture" },
      conf_basic, { NULL }, RECAP_MODE_RECAPTURE, 0, SITES_ALL },
    { "config error", { "RECAP_CONFIG=t.conf" }, "[defaults]\nmode = update\nbogus = 1\n",
      { "recap: t.conf:3: found unknown key \"bogus\", expected mode, max_graphs, stack_depth, "
        "cache_budget, python_skip, self_record or keep_memory" },
      RECAP_MODE_OBSERVE, 1 },
    { "config error and sites label", { "RECAP_CONFIG=t.conf", "RECAP_SITES=decode" },
      "[site " ID1 "]\nlabel = decode\nlabel = again\n",
      { "recap: t.conf:3: found a second label in this section" }, RECAP_MODE_OBSERVE, 1,
      SITES_LIST, 1 },
    { "config defaults off", { "RECAP_CONFIG=t.conf" }, "[defaults]\nmode = off\n", { NULL },
      RECAP_MODE_OFF, 0, SITES_ALL, 0, "off" },
    { "empty config path", { "RECAP_CONFIG=" }, NULL,
      { "recap: RECAP_CONFIG=\"\": found an empty value, expected the path of a configuration "
        "file" }, RECAP_MODE_OBSERVE, 1 },
    { "log stderr", { "RECAP_LOG=stderr" }, NULL, { NULL }, RECAP_MODE_AUTO, 0, SITES_ALL, 0,
      "stderr" },
    { "log off", { "RECAP_LOG=off" }, NULL, { NULL }, RECAP_MODE_AUTO, 0, SITES_ALL, 0, "off" },
    { "log template", { "RECAP_LOG=/tmp/run-%r-%h-%p.jsonl" }, NULL, { NULL }, RECAP_MODE_AUTO,
      0, SITES_ALL, 0, "/tmp/run-%r-%h-%p.jsonl" },
    { "log bad template", { "RECAP_LOG=run-%d.jsonl" }, NULL,
      { "recap: RECAP_LOG=\"run-%d.jsonl\": found %d in the log path, expected %p, %h, %r or %%" },
      RECAP_MODE_OBSERVE, 1, SITES_ALL, 0, NULL },
    { "log empty", { "RECAP_LOG=" }, NULL,
      { "recap: RECAP_LOG=\"\": found an empty value, expected a path template, stderr or off" },
      RECAP_MODE_OBSERVE, 1 },
    { "verbose 1", { "RECAP_VERBOSE=1" }, NULL, { NULL }, RECAP_MODE_AUTO },
    { "verbose yes", { "RECAP_VERBOSE=yes" }, NULL,
      { "recap: RECAP_VERBOSE=\"yes\": found an unknown value, expected 0 or 1" },
      RECAP_MODE_OBSERVE, 1 },
    { "two problems, two lines", { "RECAP_MODE=sometimes", "RECAP_VERBOSE=on" }, NULL,
      { "RECAP_MODE=\"sometimes\": found an unknown mode", "RECAP_VERBOSE=\"on\": found an "
        "unknown value" }, RECAP_MODE_OBSERVE, 1 },
};

/* Runs settings_load_with_text and returns what it wrote to errfd. */
static void load(struct recap_settings *s, const char *const *env, const char *conf,
                 char *out, size_t outlen)
{
    int fd = memfd_create("recap-err", 0);
    cr_assert_geq(fd, 0);
    char *envp[MAX_ENV + 1];
    int n = 0;
    for (; n < MAX_ENV && env[n] != NULL; n++)
        envp[n] = (char *)env[n];
    envp[n] = NULL;
    settings_load_with_text(s, envp, fd, conf, conf ? strlen(conf) : 0);
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, out, outlen - 1);
    out[got > 0 ? got : 0] = '\0';
    close(fd);
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

Test(settings, environment_table)
{
    for (size_t i = 0; i < sizeof env_cases / sizeof env_cases[0]; i++) {
        const struct env_case *c = &env_cases[i];
        struct recap_settings *s = malloc(sizeof *s);
        char err[4096];
        load(s, c->env, c->conf, err, sizeof err);
        int want_lines = 0;
        for (int m = 0; m < MAX_MSGS && c->messages[m]; m++, want_lines++)
            cr_expect(strstr(err, c->messages[m]) != NULL, "%s:\n  got  %s\n  want %s", c->name,
                      err, c->messages[m]);
        cr_expect_eq(count_lines(err), want_lines, "%s: lines: %s", c->name, err);
        if (want_lines)
            cr_expect_eq(strncmp(err, "recap: ", 7), 0, "%s", c->name);
        cr_expect_eq(s->mode, c->mode, "%s: mode %d", c->name, s->mode);
        cr_expect_eq(s->degraded, c->degraded, "%s: degraded", c->name);
        cr_expect_eq(s->sites_filter, c->filter, "%s: filter %d", c->name, s->sites_filter);
        cr_expect_eq(s->nlisted, c->nlisted, "%s: listed", c->name);
        cr_expect_str_eq(s->log_template, c->log ? c->log : SETTINGS_DEFAULT_LOG, "%s", c->name);
        settings_free(s);
        free(s);
    }
}

Test(settings, values_land_in_settings)
{
    struct recap_settings *s = malloc(sizeof *s);
    char err[1024];
    const char *env[] = { "RECAP_CONFIG=/etc/t.conf", "RECAP_SITES=prefill," ID1,
                          "RECAP_VERBOSE=1", NULL };
    load(s, env, conf_basic, err, sizeof err);
    cr_expect_str_eq(err, "");
    cr_expect_str_eq(s->config_path, "/etc/t.conf");
    cr_expect_str_eq(s->sites_text, "prefill," ID1);
    cr_expect_eq(s->verbose, 1);
    cr_expect_eq(s->max_graphs, 5);
    cr_expect_eq(s->stack_depth, 3);
    cr_assert_eq(s->nlisted, 2);
    cr_expect_eq(s->listed[0].is_id, 0);
    cr_expect_str_eq(s->listed[0].label, "prefill");
    cr_expect_eq(s->listed[0].id, ID2_N);
    cr_expect_eq(s->listed[1].is_id, 1);
    cr_expect_eq(s->listed[1].id, ID1_N);
    settings_free(s);

    const char *none[] = { NULL };
    load(s, none, NULL, err, sizeof err);
    cr_expect_eq(s->verbose, 0);
    cr_expect_eq(s->max_graphs, SETTINGS_DEFAULT_MAX_GRAPHS);
    cr_expect_eq(s->stack_depth, 8);
    cr_expect_str_eq(s->config_path, "");
    cr_expect_str_eq(s->sites_text, "all");
    settings_free(s);
    free(s);
}

Test(settings, over_long_sites_value)
{
    char value[700];
    strcpy(value, "RECAP_SITES=");
    memset(value + 12, 'a', 600);
    value[612] = '\0';
    const char *env[] = { value, NULL };
    struct recap_settings *s = malloc(sizeof *s);
    char err[2048];
    load(s, env, NULL, err, sizeof err);
    cr_expect(strstr(err, "found a value of 600 bytes, expected at most 511") != NULL, "%s", err);
    cr_expect(strstr(err, "\"...") != NULL, "value not shortened: %s", err);
    cr_expect_eq(count_lines(err), 1);
    cr_expect_eq(s->mode, RECAP_MODE_OBSERVE);
    settings_free(s);
    free(s);
}

Test(settings, too_many_listed_sites)
{
    struct recap_settings *s = calloc(1, sizeof *s);
    size_t cap = (SETTINGS_MAX_LISTED_SITES + 1) * 17 + 1;
    char *list = malloc(cap), err[256];
    size_t len = 0;
    for (int i = 0; i <= SETTINGS_MAX_LISTED_SITES; i++)
        len += (size_t)sprintf(list + len, "%s%016x", i ? "," : "", i + 1);
    cr_expect_eq(settings_parse_sites(s, list, err, sizeof err), -1);
    cr_expect(strstr(err, "found more than 256 entries, expected at most 256") != NULL, "%s", err);
    cr_expect_eq(s->sites_filter, SITES_ALL);
    list[len - 17] = '\0';   /* exactly 256 */
    cr_expect_eq(settings_parse_sites(s, list, err, sizeof err), 0, "%s", err);
    cr_expect_eq(s->nlisted, SETTINGS_MAX_LISTED_SITES);
    free(list);
    free(s);
}

Test(settings, missing_config_file)
{
    struct recap_settings *s = malloc(sizeof *s);
    char *envp[] = { "RECAP_CONFIG=/nonexistent/recap.conf", NULL };
    int fd = memfd_create("err", 0);
    settings_load(s, envp, fd);
    char err[512] = "";
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, err, sizeof err - 1);
    err[got > 0 ? got : 0] = '\0';
    cr_expect_str_eq(err, "recap: /nonexistent/recap.conf: cannot read: No such file or "
                          "directory\n");
    cr_expect_eq(s->mode, RECAP_MODE_OBSERVE);
    cr_expect_str_eq(s->config_path, "/nonexistent/recap.conf");
    settings_free(s);
    free(s);
    close(fd);
}

/* ---- per-site precedence ---------------------------------------------- */

struct policy_case {
    const char *name;
    const char *env[MAX_ENV];
    const char *conf;
    uint64_t site;
    enum recap_mode mode;
    int max_graphs;
    const char *label;
};

static const char conf_sites[] =
    "[defaults]\nmode = update\nmax_graphs = 3\n"
    "[site " ID1 "]\nlabel = decode\nmode = recapture\nmax_graphs = 9\n"
    "[site " ID2 "]\nlabel = prefill\n"
    "[site 2222222222222222]\nmode = off\n";

static const char conf_observe_default[] =
    "[defaults]\nmode = observe\n[site " ID1 "]\nmode = update\n";

static const struct policy_case policy_cases[] = {
    { "no config: auto", { NULL }, NULL, ID1_N, RECAP_MODE_AUTO, 0, NULL },
    { "site section mode", { "RECAP_CONFIG=t" }, conf_sites, ID1_N, RECAP_MODE_RECAPTURE, 9,
      "decode" },
    { "site without mode gets defaults", { "RECAP_CONFIG=t" }, conf_sites, ID2_N,
      RECAP_MODE_UPDATE, 3, "prefill" },
    { "unknown site gets defaults", { "RECAP_CONFIG=t" }, conf_sites, ID3_N, RECAP_MODE_UPDATE,
      3, NULL },
    { "env mode over defaults", { "RECAP_CONFIG=t", "RECAP_MODE=auto" }, conf_sites, ID2_N,
      RECAP_MODE_AUTO, 3, "prefill" },
    { "site section over env mode", { "RECAP_CONFIG=t", "RECAP_MODE=auto" }, conf_sites, ID1_N,
      RECAP_MODE_RECAPTURE, 9, "decode" },
    { "env observe over site section", { "RECAP_CONFIG=t", "RECAP_MODE=observe" }, conf_sites,
      ID1_N, RECAP_MODE_OBSERVE, 9, "decode" },
    { "env off over everything", { "RECAP_CONFIG=t", "RECAP_MODE=off" }, conf_sites, ID1_N,
      RECAP_MODE_OFF, 0, NULL /* config not read */ },
    { "site section off", { "RECAP_CONFIG=t", "RECAP_MODE=update" }, conf_sites,
      0x2222222222222222ull, RECAP_MODE_OFF, 3, NULL },
    { "file observe default, site update", { "RECAP_CONFIG=t" }, conf_observe_default, ID1_N,
      RECAP_MODE_UPDATE, 0, NULL },
    { "file observe default, other site", { "RECAP_CONFIG=t" }, conf_observe_default, ID3_N,
      RECAP_MODE_OBSERVE, 0, NULL },
    { "listed by label", { "RECAP_CONFIG=t", "RECAP_SITES=decode" }, conf_sites, ID1_N,
      RECAP_MODE_RECAPTURE, 9, "decode" },
    { "not listed is observed", { "RECAP_CONFIG=t", "RECAP_SITES=decode" }, conf_sites, ID2_N,
      RECAP_MODE_OBSERVE, 3, "prefill" },
    { "listed by id", { "RECAP_SITES=" ID2 }, NULL, ID2_N, RECAP_MODE_AUTO, 0, NULL },
    { "listed by id, other observed", { "RECAP_SITES=" ID2 }, NULL, ID1_N, RECAP_MODE_OBSERVE,
      0, NULL },
    { "none observes", { "RECAP_CONFIG=t", "RECAP_SITES=none" }, conf_sites, ID1_N,
      RECAP_MODE_OBSERVE, 9, "decode" },
    { "degraded observes even a site section", { "RECAP_CONFIG=t", "RECAP_VERBOSE=x" },
      conf_sites, ID1_N, RECAP_MODE_OBSERVE, 9, "decode" },
    { "off in defaults wins", { "RECAP_CONFIG=t" }, "[defaults]\nmode=off\n[site " ID1 "]\n"
      "mode = auto\n", ID1_N, RECAP_MODE_OFF, 0, NULL },
};

Test(settings, site_policy_precedence)
{
    for (size_t i = 0; i < sizeof policy_cases / sizeof policy_cases[0]; i++) {
        const struct policy_case *c = &policy_cases[i];
        struct recap_settings *s = malloc(sizeof *s);
        char err[1024];
        load(s, c->env, c->conf, err, sizeof err);
        struct site_policy p = settings_site_policy(s, c->site);
        cr_expect_eq(p.mode, c->mode, "%s: mode %d, want %d", c->name, p.mode, c->mode);
        cr_expect_eq(p.max_graphs, c->max_graphs, "%s: max_graphs %d", c->name, p.max_graphs);
        if (c->label)
            cr_expect(p.label && strcmp(p.label, c->label) == 0, "%s: label %s", c->name,
                      p.label ? p.label : "(null)");
        else
            cr_expect_null(p.label, "%s: label %s", c->name, p.label);
        settings_free(s);
        free(s);
    }
}

/* Sites named by their Python frames or NVTX range: a RECAP_SITES label
 * selects every site that answers to it, and hit[] says which entries
 * selected something. */
Test(settings, site_policy_by_name)
{
    const char *env[] = { "RECAP_CONFIG=t", "RECAP_SITES=train.py:42,decode," ID2 ",nosuch.py:1",
                          NULL };
    struct recap_settings *s = malloc(sizeof *s);
    char err[1024];
    load(s, env, conf_sites, err, sizeof err);
    cr_assert_eq(s->nlisted, 4, "%s", err);
    unsigned char hit[SETTINGS_MAX_LISTED_SITES] = { 0 };
    const char *at42[] = { "train.py:42 (step) < train.py:80 (main)", "train.py:42",
                           "train.py:80" };
    const char *at43[] = { "train.py:43 (step) < train.py:80 (main)", "train.py:43",
                           "train.py:80" };
    struct site_policy p = settings_site_policy_named(s, ID3_N, at42, 3, hit);
    cr_expect_eq(p.mode, RECAP_MODE_UPDATE, "named site selected: %d", p.mode);
    p = settings_site_policy_named(s, 0x4444444444444444ull, at43, 3, hit);
    cr_expect_eq(p.mode, RECAP_MODE_OBSERVE, "other line not selected: %d", p.mode);
    p = settings_site_policy_named(s, ID1_N, NULL, 0, hit);   /* "decode" from the config */
    cr_expect_eq(p.mode, RECAP_MODE_RECAPTURE);
    p = settings_site_policy_named(s, ID2_N, NULL, 0, hit);   /* by id */
    cr_expect_neq(p.mode, RECAP_MODE_OBSERVE);
    cr_expect_eq(hit[0], 1);
    cr_expect_eq(hit[1], 1);
    cr_expect_eq(hit[2], 1);
    cr_expect_eq(hit[3], 0, "nosuch.py:1 selected nothing");
    settings_free(s);
    free(s);
}

/* ---- log path templates ----------------------------------------------- */

struct path_case {
    const char *tmpl;
    const char *env[MAX_ENV];
    long pid;
    size_t outlen;
    const char *want;       /* NULL: expect an error */
    const char *error;      /* substring of the error */
};

static const struct path_case path_cases[] = {
    { "recap-%p.jsonl", { NULL }, 42, 256, "recap-42.jsonl" },
    { "%p%p", { NULL }, 7, 256, "77" },
    { "r%r.log", { "RANK=3" }, 42, 256, "r3.log" },
    { "r%r.log", { "OMPI_COMM_WORLD_RANK=5" }, 42, 256, "r5.log" },
    { "r%r.log", { "PMI_RANK=6", "SLURM_PROCID=9" }, 42, 256, "r6.log" },
    { "r%r.log", { "SLURM_PROCID=9" }, 42, 256, "r9.log" },
    { "r%r.log", { "RANK=../x", "PMI_RANK=7" }, 42, 256, "r7.log" },
    { "r%r.log", { "RANK=" }, 42, 256, "r42.log" },
    { "r%r.log", { NULL }, 42, 256, "r42.log" },
    { "r%r.log", { "PMIX_RANK=4", "SLURM_PROCID=9" }, 42, 256, "r4.log" },
    { "r%r.log", { "SLURM_PROCID=9", "PMIX_RANK=4", "OMPI_COMM_WORLD_RANK=2", "RANK=1" }, 42,
      256, "r1.log" },
    { "r%r.log", { "RANKS=8", "XRANK=8", "LOCAL_RANK=3" }, 42, 256, "r42.log" },
    { "r%r.log", { "RANK=-1", "PMI_RANK=1234567890123" }, 42, 256, "r42.log" },
    { "r%r-%p.log", { "RANK=007" }, 42, 256, "r7-42.log" },
    { "100%%", { NULL }, 1, 256, "100%" },
    { "plain", { NULL }, 1, 6, "plain" },
    { "plain!", { NULL }, 1, 6, NULL, "found a log path longer than 5 bytes once expanded" },
    { "x%p", { NULL }, 123456, 7, NULL, "longer than 6 bytes" },
    { "run-%d.jsonl", { NULL }, 1, 256, NULL,
      "found %d in the log path, expected %p, %h, %r or %%" },
    { "run-%\xc3\xa9", { NULL }, 1, 256, NULL, "found %\xc3\xa9 in the log path" },
    { "run-%", { NULL }, 1, 256, NULL, "found a lone % at the end of the log path" },
    { "", { NULL }, 1, 256, NULL, "found an empty log path" },
};

Test(settings, log_path_templates)
{
    for (size_t i = 0; i < sizeof path_cases / sizeof path_cases[0]; i++) {
        const struct path_case *c = &path_cases[i];
        char out[256], err[256] = "";
        char *envp[MAX_ENV + 1];
        int n = 0;
        for (; c->env[n]; n++)
            envp[n] = (char *)c->env[n];
        envp[n] = NULL;
        int rc = settings_expand_log_path(c->tmpl, envp, c->pid, out, c->outlen, err, sizeof err);
        if (c->want) {
            cr_expect_eq(rc, 0, "%s: %s", c->tmpl, err);
            cr_expect_str_eq(out, c->want, "%s", c->tmpl);
        } else {
            cr_expect_eq(rc, -1, "%s accepted as %s", c->tmpl, out);
            cr_expect(strstr(err, c->error) != NULL, "%s: got %s, want %s", c->tmpl, err,
                      c->error);
        }
    }
}

Test(settings, log_path_host)
{
    char host[256], want[300], out[300], err[128];
    cr_assert_eq(gethostname(host, sizeof host), 0);
    for (char *p = host; *p; p++)
        if (*p == '/')
            *p = '_';
    snprintf(want, sizeof want, "log-%s.jsonl", host);
    char *envp[] = { NULL };
    cr_assert_eq(settings_expand_log_path("log-%h.jsonl", envp, 1, out, sizeof out, err,
                                          sizeof err), 0);
    cr_expect_str_eq(out, want);
}

Test(settings, cache_budget_from_the_file_or_a_capped_share)
{
    static const struct { const char *conf; uint64_t total; uint64_t want; } cases[] = {
        /* default: 2 % of the device, at most 1 GiB; 64 MiB while unknown */
        { NULL, 1ull << 30, (1ull << 30) / 100 * 2 },
        { NULL, 141ull << 30, 1ull << 30 },
        { NULL, 0, 64ull << 20 },
        { "[defaults]\ncache_budget = 512MiB\n", 141ull << 30, 512ull << 20 },
        { "[defaults]\ncache_budget = 512MiB\n", 0, 512ull << 20 },
        { "[defaults]\ncache_budget = 10%\n", 141ull << 30, (141ull << 30) / 100 * 10 },
        { "[defaults]\ncache_budget = 0%\n", 0, 0 },
        { "[defaults]\ncache_budget = 0\n", 1ull << 30, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct recap_settings *s = malloc(sizeof *s);
        char err[1024];
        const char *env[] = { cases[i].conf ? "RECAP_CONFIG=t" : NULL, NULL };
        load(s, env, cases[i].conf, err, sizeof err);
        cr_expect_eq(err[0], '\0', "case %zu: %s", i, err);
        cr_expect_eq(settings_cache_budget(s, cases[i].total), cases[i].want, "case %zu: %llu", i,
                     (unsigned long long)settings_cache_budget(s, cases[i].total));
        settings_free(s);
        free(s);
    }
}

Test(settings, self_record_from_the_environment_over_the_file)
{
    static const struct { const char *env; const char *conf; int want; const char *message; } cases[] = {
        { NULL, NULL, 1, "" },                            /* on by default */
        { "RECAP_SELF_RECORD=", NULL, 1, "" },            /* empty: the default */
        { "RECAP_SELF_RECORD=on", NULL, 1, "" },
        { "RECAP_SELF_RECORD=off", NULL, 0, "" },
        { "RECAP_SELF_RECORD=0", NULL, 0, "" },
        { NULL, "[defaults]\nself_record = off\n", 0, "" },
        { "RECAP_SELF_RECORD=", "[defaults]\nself_record = off\n", 0, "" },
        { "RECAP_SELF_RECORD=off", "[defaults]\nself_record = on\n", 0, "" },
        { "RECAP_SELF_RECORD=on", "[defaults]\nself_record = off\n", 1, "" },
        { "RECAP_SELF_RECORD=yes", NULL, 1,
          "recap: RECAP_SELF_RECORD=\"yes\": found an unknown value, expected on or off" },
        /* a bad value is ignored: the file's setting stands */
        { "RECAP_SELF_RECORD=yes", "[defaults]\nself_record = off\n", 0,
          "recap: RECAP_SELF_RECORD=\"yes\": found an unknown value, expected on or off" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct recap_settings *s = malloc(sizeof *s);
        char err[1024];
        const char *env[] = { cases[i].env, cases[i].conf ? "RECAP_CONFIG=t" : NULL, NULL };
        if (!env[0]) {
            env[0] = env[1];
            env[1] = NULL;
        }
        load(s, env, cases[i].conf, err, sizeof err);
        cr_expect_eq(s->self_record, cases[i].want, "case %zu", i);
        if (cases[i].message[0])
            cr_expect_neq(strstr(err, cases[i].message), NULL, "case %zu: %s", i, err);
        else
            cr_expect_eq(err[0], '\0', "case %zu: %s", i, err);
        settings_free(s);
        free(s);
    }
}

/* A site's own self_record beats RECAP_SELF_RECORD=on and [defaults];
 * RECAP_SELF_RECORD=off turns it off everywhere (the safe direction). */
Test(settings, self_record_per_site)
{
    static const char conf[] = "[defaults]\nself_record = off\n"
                               "[site " ID1 "]\nself_record = on\n"
                               "[site " ID2 "]\nself_record = off\n";
    static const struct { const char *env; uint64_t site; int want; } cases[] = {
        { NULL, ID1_N, 1 },                         /* site on over [defaults] off */
        { NULL, ID2_N, 0 },
        { NULL, ID3_N, 0 },                         /* no section: [defaults] */
        { "RECAP_SELF_RECORD=on", ID2_N, 0 },       /* site off over the environment's on */
        { "RECAP_SELF_RECORD=on", ID3_N, 1 },       /* environment over [defaults] */
        { "RECAP_SELF_RECORD=off", ID1_N, 0 },      /* off everywhere */
        { "RECAP_SELF_RECORD=", ID1_N, 1 },         /* empty: as unset */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct recap_settings *s = malloc(sizeof *s);
        char err[1024];
        const char *env[] = { "RECAP_CONFIG=t", cases[i].env, NULL };
        load(s, env, conf, err, sizeof err);
        cr_expect_eq(err[0], '\0', "case %zu: %s", i, err);
        struct site_policy p = settings_site_policy(s, cases[i].site);
        cr_expect_eq(p.self_record, cases[i].want, "case %zu: self_record %d", i, p.self_record);
        settings_free(s);
        free(s);
    }
}

/* keep_memory: on by default, RECAP_KEEP_MEMORY over [defaults]; a bad
 * value is named and observes every site. */
Test(settings, keep_memory)
{
    static const struct { const char *env; const char *conf; int want; int degraded; } cases[] = {
        { NULL, "", 1, 0 },
        { NULL, "[defaults]\nkeep_memory = off\n", 0, 0 },
        { "RECAP_KEEP_MEMORY=on", "[defaults]\nkeep_memory = off\n", 1, 0 },
        { "RECAP_KEEP_MEMORY=0", "", 0, 0 },
        { "RECAP_KEEP_MEMORY=", "[defaults]\nkeep_memory = off\n", 0, 0 },
        { "RECAP_KEEP_MEMORY=maybe", "", 1, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct recap_settings *s = malloc(sizeof *s);
        char err[1024];
        const char *env[] = { "RECAP_CONFIG=t", cases[i].env, NULL };
        load(s, env, cases[i].conf, err, sizeof err);
        cr_expect_eq(s->keep_memory, cases[i].want, "case %zu: keep_memory %d", i, s->keep_memory);
        cr_expect_eq(s->degraded, cases[i].degraded, "case %zu: %s", i, err);
        if (cases[i].degraded)
            cr_expect_neq(strstr(err, "RECAP_KEEP_MEMORY=\"maybe\": found an unknown value, "
                                      "expected on or off"), NULL, "case %zu: %s", i, err);
        settings_free(s);
        free(s);
    }
}

/* copy_held: off by default (on in rounds 22-23; two whole runs of
 * PyTorch's graph tests crashed with it), RECAP_COPY_HELD=on turns it on,
 * an empty value keeps the default, a bad value is named. */
Test(settings, copy_held)
{
    static const struct { const char *env; int want; int degraded; } cases[] = {
        { NULL, 0, 0 },
        { "RECAP_COPY_HELD=off", 0, 0 },
        { "RECAP_COPY_HELD=0", 0, 0 },
        { "RECAP_COPY_HELD=on", 1, 0 },
        { "RECAP_COPY_HELD=1", 1, 0 },
        { "RECAP_COPY_HELD=", 0, 0 },
        { "RECAP_COPY_HELD=maybe", 0, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct recap_settings *s = malloc(sizeof *s);
        char err[1024];
        const char *env[] = { "RECAP_CONFIG=t", cases[i].env, NULL };
        load(s, env, "", err, sizeof err);
        cr_expect_eq(s->copy_held, cases[i].want, "case %zu: copy_held %d", i, s->copy_held);
        cr_expect_eq(s->degraded, cases[i].degraded, "case %zu: %s", i, err);
        if (cases[i].degraded)
            cr_expect_neq(strstr(err, "RECAP_COPY_HELD=\"maybe\": found an unknown value, "
                                      "expected on or off"), NULL, "case %zu: %s", i, err);
        settings_free(s);
        free(s);
    }
}

/* ---- rank and world size ------------------------------------------------- */

struct rank_case {
    const char *env[MAX_ENV];
    long rank, world_size;
    const char *rank_var, *size_var;    /* NULL: none expected */
};

static const struct rank_case rank_cases[] = {
    /* torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, ... */
    { { "LOCAL_RANK=1", "RANK=3", "WORLD_SIZE=4", "GROUP_RANK=1", "LOCAL_WORLD_SIZE=2" },
      3, 4, "RANK", "WORLD_SIZE" },
    { { "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1" },
      5, 8, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
    { { "PMI_RANK=2", "PMI_SIZE=3" }, 2, 3, "PMI_RANK", "PMI_SIZE" },
    { { "PMIX_RANK=6", "PMI_SIZE=16" }, 6, -1, "PMIX_RANK", NULL },
    { { "SLURM_PROCID=7", "SLURM_NTASKS=9", "SLURM_NPROCS=10" }, 7, 9, "SLURM_PROCID",
      "SLURM_NTASKS" },
    { { "SLURM_PROCID=7", "SLURM_NPROCS=10" }, 7, 10, "SLURM_PROCID", "SLURM_NPROCS" },
    /* torchrun inside a Slurm step: RANK wins, its size with it. */
    { { "SLURM_PROCID=0", "SLURM_NTASKS=1", "RANK=1", "WORLD_SIZE=2" }, 1, 2, "RANK",
      "WORLD_SIZE" },
    /* A size that is not a positive number is unknown; the rank still counts. */
    { { "RANK=0", "WORLD_SIZE=zero" }, 0, -1, "RANK", NULL },
    { { "RANK=0", "WORLD_SIZE=0" }, 0, -1, "RANK", NULL },
    /* A rank that is not a plain number is skipped for the next launcher's. */
    { { "RANK=first", "WORLD_SIZE=2", "PMI_RANK=1", "PMI_SIZE=2" }, 1, 2, "PMI_RANK",
      "PMI_SIZE" },
    { { "WORLD_SIZE=2" }, -1, -1, NULL, NULL },
    { { NULL }, -1, -1, NULL, NULL },
};

static int same_name(const char *got, const char *want)
{
    return got == want || (got && want && strcmp(got, want) == 0);
}

Test(settings, rank_and_world_size)
{
    for (size_t i = 0; i < sizeof rank_cases / sizeof rank_cases[0]; i++) {
        const struct rank_case *c = &rank_cases[i];
        char *envp[MAX_ENV + 1];
        int n = 0;
        for (; c->env[n]; n++)
            envp[n] = (char *)c->env[n];
        envp[n] = NULL;
        struct settings_rank r;
        settings_rank_find(envp, &r);
        cr_expect_eq(r.rank, c->rank, "case %zu: rank %ld, want %ld", i, r.rank, c->rank);
        cr_expect_eq(r.world_size, c->world_size, "case %zu: world size %ld, want %ld", i,
                     r.world_size, c->world_size);
        cr_expect(same_name(r.rank_var, c->rank_var), "case %zu: rank from %s", i,
                  r.rank_var ? r.rank_var : "(none)");
        cr_expect(same_name(r.size_var, c->size_var), "case %zu: size from %s", i,
                  r.size_var ? r.size_var : "(none)");
    }
}

/* settings_load keeps the rank for the start event, whatever else is set;
 * every rank variable it can read is in the list jlog copies. */
Test(settings, load_records_rank)
{
    char *envp[] = { "RECAP_MODE=update", "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                     NULL };
    struct recap_settings *s = calloc(1, sizeof *s);
    cr_assert_not_null(s);
    settings_load(s, envp, -1);
    cr_expect_eq(s->rank.rank, 3);
    cr_expect_eq(s->rank.world_size, 4);
    cr_expect_str_eq(s->rank.rank_var, "OMPI_COMM_WORLD_RANK");
    settings_free(s);
    free(s);

    const char *want[] = { "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                           "SLURM_PROCID" };
    size_t i = 0;
    for (; settings_rank_var(i) != NULL; i++) {
        cr_assert_lt(i, sizeof want / sizeof want[0], "more rank variables than expected");
        cr_expect_str_eq(settings_rank_var(i), want[i]);
    }
    cr_expect_eq(i, sizeof want / sizeof want[0]);
}
