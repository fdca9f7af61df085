/*
 * fuzz_config.c - libFuzzer target for the configuration parser and the
 * environment checks.
 *
 * The whole input is parsed as a configuration file; then its first line
 * (up to the first newline) becomes RECAP_SITES, RECAP_MODE and RECAP_LOG
 * and the rest the configuration named by RECAP_CONFIG, through
 * settings_load_with_text. Beyond memory errors (ASan/UBSan), it traps on
 * broken contracts: a parse error must be one UTF-8 line "fuzz.conf:N:
 * found ..., expected ...", a failed parse must leave nothing behind, and
 * degraded settings must be in observe (or off) mode.
 *
 * Built with -DFUZZ_REPLAY it is a plain program that feeds every file
 * named on its command line (directories: every file in them) through the
 * same entry point: the regression test over the corpus and saved crashes.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "policy/settings.h"
#include "policy/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "contract broken: %s\n", #cond); \
                                        __builtin_trap(); } } while (0)

static void check_message(const char *err, const char *prefix)
{
    size_t len = strlen(err);
    CHECK(len > 0);
    CHECK(strncmp(err, prefix, strlen(prefix)) == 0);
    CHECK(strchr(err, '\n') == NULL);
    CHECK(text_first_bad_byte(err, len) == len);
    CHECK(strstr(err, "found ") != NULL || strstr(err, "cannot read") != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct recap_settings settings;
    static int devnull = -1;
    if (devnull < 0)
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

    struct conf_file conf;
    char err[512];
    if (conf_parse("fuzz.conf", (const char *)data, size, &conf, err, sizeof err) == 0) {
        for (size_t i = 0; i < conf.nsites; i++) {
            CHECK(conf.sites[i].max_graphs >= 0 &&
                  conf.sites[i].max_graphs <= CONF_MAX_GRAPHS_LIMIT);
            CHECK(strlen(conf.sites[i].label) < CONF_LABEL_MAX);
            for (size_t j = 0; j < i; j++)
                CHECK(conf.sites[j].id != conf.sites[i].id);
        }
        CHECK(conf_mode_name(conf.mode) != NULL);
        if (conf.cache_budget.set)
            CHECK(conf.cache_budget.is_percent
                      ? conf.cache_budget.percent >= 0 && conf.cache_budget.percent <= 100
                      : conf.cache_budget.bytes <= CONF_BUDGET_MAX_BYTES);
        conf_free(&conf);
    } else {
        check_message(err, "fuzz.conf:");
        CHECK(conf.sites == NULL && conf.nsites == 0);
    }

    /* first line -> environment values, rest -> configuration text */
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t first = nl ? (size_t)(nl - text) : size;
    if (first > 700)
        first = 700;
    char value[701];
    memcpy(value, text, first);
    value[first] = '\0';            /* an embedded NUL just ends it early */
    const char *rest = nl ? nl + 1 : text + size;
    size_t rest_len = (size_t)(text + size - rest);

    static char sites[720], mode[720], log[720];
    snprintf(sites, sizeof sites, "RECAP_SITES=%s", value);
    snprintf(mode, sizeof mode, "RECAP_MODE=%s", value);
    snprintf(log, sizeof log, "RECAP_LOG=%s", value);
    char *envp_a[] = { sites, "RECAP_CONFIG=fuzz.conf", "RANK=3", NULL };
    char *envp_b[] = { mode, log, "RECAP_CONFIG=fuzz.conf", NULL };
    char *const *envps[] = { envp_a, envp_b };
    for (int e = 0; e < 2; e++) {
        settings_load_with_text(&settings, envps[e], devnull, rest, rest_len);
        if (settings.degraded)
            CHECK(settings.mode == RECAP_MODE_OBSERVE || settings.mode == RECAP_MODE_OFF);
        CHECK(settings.nlisted >= 0 && settings.nlisted <= SETTINGS_MAX_LISTED_SITES);
        for (int i = 0; i < settings.nlisted; i++) {
            struct site_policy p = settings_site_policy(&settings, settings.listed[i].id);
            /* 0: no cap but the site's working set */
            CHECK(p.max_graphs >= 0 && p.max_graphs <= CONF_MAX_GRAPHS_LIMIT);
        }
        for (size_t i = 0; i < settings.conf.nsites; i++)
            (void)settings_site_policy(&settings, settings.conf.sites[i].id);
        (void)settings_site_policy(&settings, 0x0123456789abcdefull);
        settings_free(&settings);
    }

    char path[SETTINGS_PATH_MAX];
    char perr[512];
    char *envp_rank[] = { "OMPI_COMM_WORLD_RANK=17", NULL };
    if (settings_expand_log_path(value, envp_rank, 4242, path, sizeof path, perr,
                                 sizeof perr) == 0)
        CHECK(strlen(path) < sizeof path);
    else
        CHECK(strstr(perr, "found ") != NULL);
    return 0;
}

#ifdef FUZZ_REPLAY
#include <dirent.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, failures = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            continue;   /* tests/fuzz/crashes/ may not exist */
        if (!S_ISDIR(st.st_mode)) {
            failures += replay_file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            failures += replay_file(path);
            files++;
        }
        if (d)
            closedir(d);
    }
    printf("replayed %d inputs\n", files);
    if (files == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    return failures != 0;
}
#endif
