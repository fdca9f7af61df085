/*
 * settings.c - the environment and configuration, read once (see settings.h
 * for the variables and the precedence between them).
 *
 * Owns: validating every RECAP_* value, loading the configuration file,
 * reporting each bad input as one "recap: ..." line on the error descriptor,
 * degrading to observe mode after any of them, and answering the per-site
 * policy question. Must never: exit, abort, call getenv (the caller hands
 * the environment in, so tests and fuzzing need no global state), or be
 * called on a driver call's hot path.
 */
#include "policy/settings.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/site.h"
#include "policy/text.h"

#define SETTINGS_MSG_MAX 1536
#define SETTINGS_SHOWN 64       /* bytes of a bad value echoed in a message */

/* Launchers' rank and world-size variables, strongest first. torchrun (and
 * torch.distributed.launch, DeepSpeed, Accelerate) sets RANK/WORLD_SIZE;
 * Open MPI OMPI_COMM_WORLD_RANK/_SIZE; MPICH's Hydra and Intel MPI
 * PMI_RANK/PMI_SIZE; a PMIx server (Open MPI 5's prterun, srun --mpi=pmix)
 * PMIX_RANK with no size variable; srun SLURM_PROCID/SLURM_NTASKS (older
 * Slurm: SLURM_NPROCS). RANK comes first because torchrun run inside a
 * Slurm step inherits SLURM_PROCID, which then names the node's task, not
 * the rank; SLURM_PROCID comes last for the same reason under mpirun in an
 * allocation. */
static const struct {
    const char *rank;
    const char *size;
    const char *size_alt;
} settings_launchers[] = {
    { "RANK", "WORLD_SIZE", NULL },
    { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL },
    { "PMI_RANK", "PMI_SIZE", NULL },
    { "PMIX_RANK", NULL, NULL },
    { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS" },
};
#define SETTINGS_NLAUNCHERS (sizeof settings_launchers / sizeof settings_launchers[0])

/* ---- helpers ------------------------------------------------------------ */

/* The value of NAME in envp, first occurrence wins as with getenv; NULL
 * when unset. */
static const char *settings_env(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    if (envp == NULL)
        return NULL;
    for (char *const *e = envp; *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* Writes all of buf to fd, retrying on EINTR and short writes; errors are
 * dropped because there is nowhere left to report them. */
static void settings_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

/* Reports one problem with variable NAME (value shown quoted), as
 * "recap: NAME="value": <message>", and degrades to observe mode. */
__attribute__((format(printf, 5, 6)))
static void settings_complain(struct recap_settings *s, int errfd, const char *name,
                              const char *value, const char *fmt, ...)
{
    char line[SETTINGS_MSG_MAX];
    char shown[4 * SETTINGS_SHOWN + 8];
    text_quote(value, strlen(value), SETTINGS_SHOWN, shown, sizeof shown);
    int n = snprintf(line, sizeof line, "recap: %s=%s: ", name, shown);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
    }
    s->degraded = 1;
    if (errfd < 0)
        return;
    size_t len = text_trim_partial(line, strlen(line));
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    settings_write_all(errfd, line, len);
}

static void settings_complain_text(struct recap_settings *s, int errfd, const char *msg)
{
    char line[SETTINGS_MSG_MAX];
    int n = snprintf(line, sizeof line - 1, "recap: %s", msg);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    len = text_trim_partial(line, len);
    line[len++] = '\n';
    s->degraded = 1;
    if (errfd >= 0)
        settings_write_all(errfd, line, len);
}

/* Checks what every value must be: non-empty, at most max-1 bytes, UTF-8
 * text without control bytes. Returns 0, or -1 after complaining. */
static int settings_check_text(struct recap_settings *s, int errfd, const char *name,
                               const char *value, size_t max, const char *expected)
{
    size_t len = strlen(value);
    if (len == 0) {
        settings_complain(s, errfd, name, value, "found an empty value, expected %s", expected);
        return -1;
    }
    if (len >= max) {
        settings_complain(s, errfd, name, value, "found a value of %zu bytes, expected at most %zu",
                          len, max - 1);
        return -1;
    }
    size_t bad = text_first_bad_byte(value, len);
    if (bad < len) {
        settings_complain(s, errfd, name, value, "found byte 0x%02x at offset %zu that is not "
                          "UTF-8, expected UTF-8 text", (unsigned char)value[bad], bad);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c < 0x20 || c == 0x7f) {
            settings_complain(s, errfd, name, value, "found control byte 0x%02x at offset %zu, "
                              "expected printable text", c, i);
            return -1;
        }
    }
    return 0;
}

static void settings_copy(char *dst, size_t dstlen, const char *src)
{
    snprintf(dst, dstlen, "%s", src);
}

static const struct conf_site *settings_conf_site(const struct recap_settings *s, uint64_t id)
{
    for (size_t i = 0; i < s->conf.nsites; i++)
        if (s->conf.sites[i].id == id)
            return &s->conf.sites[i];
    return NULL;
}

static int settings_all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return 0;
    }
    return n > 0;
}

/* ---- RECAP_SITES --------------------------------------------------------- */

int settings_parse_sites(struct recap_settings *s, const char *value, char *err, size_t errlen)
{
    char q[4 * SETTINGS_SHOWN + 8];
    s->nlisted = 0;
    if (strcmp(value, "all") == 0) {
        s->sites_filter = SITES_ALL;
        return 0;
    }
    if (strcmp(value, "none") == 0) {
        s->sites_filter = SITES_NONE;
        return 0;
    }
    const char *p = value;
    int count = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        while (n > 0 && (*item == ' ' || *item == '\t')) {
            item++;
            n--;
        }
        while (n > 0 && (item[n - 1] == ' ' || item[n - 1] == '\t'))
            n--;
        if (n == 0) {
            snprintf(err, errlen, "found an empty entry in the list, expected site ids or "
                     "labels separated by commas (or all, or none)");
            goto fail;
        }
        if (count == SETTINGS_MAX_LISTED_SITES) {
            snprintf(err, errlen, "found more than %d entries, expected at most %d",
                     SETTINGS_MAX_LISTED_SITES, SETTINGS_MAX_LISTED_SITES);
            goto fail;
        }
        struct settings_site_ref *ref = &s->listed[count];
        memset(ref, 0, sizeof *ref);
        char word[SETTINGS_LABEL_MAX];
        const struct conf_site *labelled = NULL;
        text_quote(item, n, SETTINGS_SHOWN, q, sizeof q);
        if (n >= sizeof word) {
            snprintf(err, errlen, "found an entry %s of %zu bytes, expected a site id or a "
                     "label of at most %zu bytes", q, n, sizeof word - 1);
            goto fail;
        }
        memcpy(word, item, n);
        word[n] = '\0';
        for (size_t i = 0; i < s->conf.nsites && labelled == NULL; i++)
            if (s->conf.sites[i].label[0] != '\0' && strcmp(s->conf.sites[i].label, word) == 0)
                labelled = &s->conf.sites[i];
        if (n == SITE_ID_HEX_LEN && site_id_parse(word, &ref->id) == 0) {
            ref->is_id = 1;
        } else if (settings_all_hex(item, n)) {
            snprintf(err, errlen, "found site id %s of %zu digits, expected 16 hex digits "
                     "or a label", q, n);
            goto fail;
        } else {
            /* A label: from the configuration, or a name sites get when
             * first seen (FILE:LINE, an NVTX range); matched then. */
            ref->id = labelled != NULL ? labelled->id : 0;
            memcpy(ref->label, word, n + 1);
        }
        count++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    s->nlisted = count;
    s->sites_filter = SITES_LIST;
    return 0;
fail:
    s->nlisted = 0;
    s->sites_filter = SITES_ALL;
    return -1;
}

/* ---- loading -------------------------------------------------------------- */

/* An on/off variable (on, 1, off, 0; empty or unset leaves *value as it
 * is). Returns 1 when the variable set *value; a bad value is named. */
static int settings_env_switch(struct recap_settings *s, char *const *envp, int errfd,
                               const char *name, int *value)
{
    const char *text = settings_env(envp, name);
    if (text == NULL || text[0] == '\0' ||
        settings_check_text(s, errfd, name, text, 8, "on or off") != 0)
        return 0;
    if (strcmp(text, "on") == 0 || strcmp(text, "1") == 0 ||
        strcmp(text, "off") == 0 || strcmp(text, "0") == 0) {
        *value = text[0] == '1' || strcmp(text, "on") == 0;
        return 1;
    }
    settings_complain(s, errfd, name, text, "found an unknown value, expected on or off");
    return 0;
}

static void settings_defaults(struct recap_settings *s)
{
    memset(s, 0, sizeof *s);
    s->mode = RECAP_MODE_AUTO;
    s->self_record = 1;
    s->keep_memory = 1;
    s->copy_held = 0;
    s->sites_filter = SITES_ALL;
    settings_copy(s->sites_text, sizeof s->sites_text, "all");
    settings_copy(s->log_template, sizeof s->log_template, SETTINGS_DEFAULT_LOG);
    s->max_graphs = SETTINGS_DEFAULT_MAX_GRAPHS;
    s->stack_depth = SITE_DEFAULT_DEPTH;
    s->conf.mode = RECAP_MODE_AUTO;
}

static void settings_load_common(struct recap_settings *s, char *const *envp, int errfd,
                                 const char *conf_text, size_t conf_len)
{
    char err[SETTINGS_MSG_MAX];
    settings_defaults(s);

    const char *mode = settings_env(envp, "RECAP_MODE");
    if (mode != NULL &&
        settings_check_text(s, errfd, "RECAP_MODE", mode, 16,
                            "auto, recapture, update, observe or off") == 0) {
        if (conf_mode_parse(mode, &s->mode) == 0)
            s->mode_from_env = 1;
        else
            settings_complain(s, errfd, "RECAP_MODE", mode, "found an unknown mode, expected "
                              "auto, recapture, update, observe or off");
    }
    /* off is pure pass-through: no file is read and nothing else matters. */
    int off = s->mode_from_env && s->mode == RECAP_MODE_OFF;

    const char *verbose = settings_env(envp, "RECAP_VERBOSE");
    if (verbose != NULL && settings_check_text(s, errfd, "RECAP_VERBOSE", verbose, 8,
                                               "0 or 1") == 0) {
        if (strcmp(verbose, "0") == 0 || strcmp(verbose, "1") == 0)
            s->verbose = verbose[0] == '1';
        else
            settings_complain(s, errfd, "RECAP_VERBOSE", verbose, "found an unknown value, "
                              "expected 0 or 1");
    }

    /* On by default since the whole test matrix and the GPU suite pass
     * with it (README.md, "Self-recording"); an empty value is the default. */
    if (!off) {
        s->self_record_from_env =
            settings_env_switch(s, envp, errfd, "RECAP_SELF_RECORD", &s->self_record);
        s->keep_memory_from_env =
            settings_env_switch(s, envp, errfd, "RECAP_KEEP_MEMORY", &s->keep_memory);
        settings_env_switch(s, envp, errfd, "RECAP_COPY_HELD", &s->copy_held);
    }

    const char *config = settings_env(envp, "RECAP_CONFIG");
    if (!off && config != NULL &&
        settings_check_text(s, errfd, "RECAP_CONFIG", config, sizeof s->config_path,
                            "the path of a configuration file") == 0) {
        settings_copy(s->config_path, sizeof s->config_path, config);
        int rc = conf_text != NULL
            ? conf_parse(config, conf_text, conf_len, &s->conf, err, sizeof err)
            : conf_load(config, &s->conf, err, sizeof err);
        if (rc != 0) {
            settings_complain_text(s, errfd, err);
        } else {
            if (s->conf.has_mode && !s->mode_from_env)
                s->mode = s->conf.mode;
            if (s->conf.max_graphs)
                s->max_graphs = s->conf.max_graphs;
            if (s->conf.stack_depth)
                s->stack_depth = s->conf.stack_depth;
            s->cache_budget = s->conf.cache_budget;
            /* Environment over [defaults], as for the mode. */
            if (s->conf.self_record != CONF_UNSET && !s->self_record_from_env)
                s->self_record = s->conf.self_record == CONF_ON;
            if (s->conf.keep_memory != CONF_UNSET && !s->keep_memory_from_env)
                s->keep_memory = s->conf.keep_memory == CONF_ON;
        }
    }

    const char *sites = settings_env(envp, "RECAP_SITES");
    if (!off && sites != NULL &&
        settings_check_text(s, errfd, "RECAP_SITES", sites, sizeof s->sites_text,
                            "all, none, or site ids or labels separated by commas") == 0) {
        settings_copy(s->sites_text, sizeof s->sites_text, sites);
        if (settings_parse_sites(s, sites, err, sizeof err) != 0)
            settings_complain(s, errfd, "RECAP_SITES", sites, "%s", err);
    }

    const char *log = settings_env(envp, "RECAP_LOG");
    if (!off && log != NULL &&
        settings_check_text(s, errfd, "RECAP_LOG", log, sizeof s->log_template,
                            "a path template, stderr or off") == 0) {
        char trial[SETTINGS_PATH_MAX];
        if (strcmp(log, "stderr") == 0 || strcmp(log, "off") == 0 ||
            settings_expand_log_path(log, envp, 1, trial, sizeof trial, err, sizeof err) == 0)
            settings_copy(s->log_template, sizeof s->log_template, log);
        else
            settings_complain(s, errfd, "RECAP_LOG", log, "%s", err);
    }

    settings_rank_find(envp, &s->rank);

    if (s->mode == RECAP_MODE_OFF) {
        settings_copy(s->log_template, sizeof s->log_template, "off");
    } else if (s->degraded) {
        s->mode = RECAP_MODE_OBSERVE;
    }
}

void settings_load(struct recap_settings *s, char *const *envp, int errfd)
{
    settings_load_common(s, envp, errfd, NULL, 0);
}

void settings_load_with_text(struct recap_settings *s, char *const *envp, int errfd,
                             const char *conf_text, size_t conf_len)
{
    settings_load_common(s, envp, errfd, conf_text ? conf_text : "", conf_text ? conf_len : 0);
}

void settings_free(struct recap_settings *s)
{
    conf_free(&s->conf);
}

uint64_t settings_cache_budget(const struct recap_settings *s, uint64_t device_total)
{
    const struct conf_budget *b = &s->cache_budget;
    if (b->set && !b->is_percent)
        return b->bytes;
    if (device_total == 0)
        return b->set && b->percent == 0 ? 0 : SETTINGS_BUDGET_UNKNOWN_DEVICE;
    if (b->set)
        return device_total / 100 * (uint64_t)b->percent;
    uint64_t share = device_total / 100 * SETTINGS_DEFAULT_BUDGET_PERCENT;
    return share < SETTINGS_DEFAULT_BUDGET_CAP ? share : SETTINGS_DEFAULT_BUDGET_CAP;
}

/* ---- decisions -------------------------------------------------------------- */

static int settings_selected(const struct recap_settings *s, uint64_t site_id,
                             const char *const *names, int nnames, unsigned char *hit)
{
    int selected = 0;
    switch (s->sites_filter) {
    case SITES_ALL:
        return 1;
    case SITES_NONE:
        return 0;
    default:
        for (int i = 0; i < s->nlisted; i++) {
            const struct settings_site_ref *ref = &s->listed[i];
            int match = ref->id != 0 && ref->id == site_id;
            for (int k = 0; !match && !ref->is_id && k < nnames; k++)
                match = names[k] != NULL && strcmp(names[k], ref->label) == 0;
            if (match) {
                selected = 1;
                if (hit != NULL)
                    hit[i] = 1;
            }
        }
        return selected;
    }
}

struct site_policy settings_site_policy(const struct recap_settings *s, uint64_t site_id)
{
    return settings_site_policy_named(s, site_id, NULL, 0, NULL);
}

struct site_policy settings_site_policy_named(const struct recap_settings *s, uint64_t site_id,
                                              const char *const *names, int nnames,
                                              unsigned char *hit)
{
    const struct conf_site *site = settings_conf_site(s, site_id);
    struct site_policy policy = {
        .mode = s->mode,
        .max_graphs = s->max_graphs,
        .self_record = s->self_record,
        .label = site != NULL && site->label[0] != '\0' ? site->label : NULL,
    };
    if (site != NULL && site->max_graphs)
        policy.max_graphs = site->max_graphs;
    int self_forced_off = s->self_record_from_env && !s->self_record;
    if (site != NULL && site->self_record != CONF_UNSET && !self_forced_off)
        policy.self_record = site->self_record == CONF_ON;
    if (s->mode == RECAP_MODE_OFF) {
        policy.mode = RECAP_MODE_OFF;
    } else if (!settings_selected(s, site_id, names, nnames, hit) || s->degraded ||
               (s->mode_from_env && s->mode == RECAP_MODE_OBSERVE)) {
        policy.mode = RECAP_MODE_OBSERVE;
    } else if (site != NULL && site->has_mode) {
        policy.mode = site->mode;
    }
    return policy;
}

/* ---- log path ------------------------------------------------------------------ */

/* Appends src to out at *at; -1 when it does not fit (NUL included). */
static int settings_append(char *out, size_t outlen, size_t *at, const char *src, size_t n)
{
    if (*at + n >= outlen)
        return -1;
    memcpy(out + *at, src, n);
    *at += n;
    out[*at] = '\0';
    return 0;
}

/* A launcher variable's value is used only when it is a plain number of at
 * most 12 digits: the rank ends up in a file name. Returns the value or
 * NULL. */
static const char *settings_number_var(char *const *envp, const char *name)
{
    const char *v = name ? settings_env(envp, name) : NULL;
    if (v == NULL || v[0] == '\0' || strlen(v) > 12)
        return NULL;
    size_t k = 0;
    while (v[k] >= '0' && v[k] <= '9')
        k++;
    return v[k] == '\0' ? v : NULL;
}

const char *settings_rank_var(size_t i)
{
    if (i < SETTINGS_NLAUNCHERS)
        return settings_launchers[i].rank;
    return NULL;
}

void settings_rank_find(char *const *envp, struct settings_rank *out)
{
    out->rank = -1;
    out->world_size = -1;
    out->rank_var = NULL;
    out->size_var = NULL;
    for (size_t i = 0; i < SETTINGS_NLAUNCHERS; i++) {
        const char *rank = settings_number_var(envp, settings_launchers[i].rank);
        if (rank == NULL)
            continue;
        out->rank = strtol(rank, NULL, 10);
        out->rank_var = settings_launchers[i].rank;
        const char *names[] = { settings_launchers[i].size, settings_launchers[i].size_alt };
        for (size_t k = 0; k < 2; k++) {
            const char *size = settings_number_var(envp, names[k]);
            if (size != NULL && strtol(size, NULL, 10) > 0) {
                out->world_size = strtol(size, NULL, 10);
                out->size_var = names[k];
                break;
            }
        }
        return;
    }
}

int settings_expand_log_path(const char *tmpl, char *const *envp, long pid,
                             char *out, size_t outlen, char *err, size_t errlen)
{
    char num[32];
    char host[256];
    size_t at = 0;
    if (outlen == 0) {
        snprintf(err, errlen, "found no room for the path, expected an output buffer");
        return -1;
    }
    out[0] = '\0';
    if (tmpl[0] == '\0') {
        snprintf(err, errlen, "found an empty log path, expected a path template, stderr or off");
        return -1;
    }
    for (const char *p = tmpl; *p != '\0'; p++) {
        const char *piece = p;
        size_t n = 1;
        if (*p == '%') {
            p++;
            switch (*p) {
            case 'p':
                n = (size_t)snprintf(num, sizeof num, "%ld", pid);
                piece = num;
                break;
            case 'r': {
                struct settings_rank rank;
                settings_rank_find(envp, &rank);
                n = (size_t)snprintf(num, sizeof num, "%ld", rank.rank_var ? rank.rank : pid);
                piece = num;
                break;
            }
            case 'h':
                if (gethostname(host, sizeof host) != 0 || host[0] == '\0')
                    snprintf(host, sizeof host, "unknown-host");
                host[sizeof host - 1] = '\0';
                for (char *c = host; *c; c++)
                    if (*c == '/')
                        *c = '_';
                piece = host;
                n = strlen(host);
                break;
            case '%':
                piece = "%";
                break;
            case '\0':
                snprintf(err, errlen, "found a lone %% at the end of the log path, expected "
                         "%%p, %%h, %%r or %%%%");
                return -1;
            default: {
                size_t len = text_utf8_seq_len((const unsigned char *)p, strlen(p));
                snprintf(err, errlen, "found %%%.*s in the log path, expected %%p, %%h, %%r "
                         "or %%%%", (int)(len ? len : 1), p);
                err[text_trim_partial(err, strlen(err))] = '\0';
                return -1;
            }
            }
        }
        if (settings_append(out, outlen, &at, piece, n) != 0) {
            snprintf(err, errlen, "found a log path longer than %zu bytes once expanded, "
                     "expected a shorter one", outlen - 1);
            out[0] = '\0';
            return -1;
        }
    }
    return 0;
}
