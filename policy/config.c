/*
 * config.c - the configuration file parser (see config.h).
 *
 * Owns: the grammar of recap's configuration file and every message about
 * it. The grammar, line by line (spaces and tabs around tokens ignored):
 *
 *     # comment                  blank lines too
 *     [defaults]                 at most once
 *     [site 0123456789abcdef]    16 hex digits, each site at most once
 *     key = value                inside a section; "# ..." after the value,
 *                                separated by a space or tab, is a comment
 *
 * Keys: mode (auto|recapture|update|observe|off), max_graphs (1..64),
 * self_record (on|off), keep_memory ([defaults] only: on|off),
 * stack_depth (1..SITE_MAX_DEPTH, [defaults] only), cache_budget ([defaults]
 * only: a whole number of bytes with an optional unit B, KiB, MiB, GiB,
 * TiB, KB, MB, GB or TB, at most 1 PiB, or a whole percentage 0..100 of
 * the device's memory followed by %), python_skip ([defaults]
 * only: path fragments separated by commas, each made of letters, digits
 * and _ - . / < >, whose Python frames are not the program's), label ([site] only:
 * letters, digits and _ - . :, at most 63 bytes, unique across sites, and
 * neither "all", "none" nor 16 hex digits, which RECAP_SITES would read
 * otherwise). Each key at most once per section. Lines are at most
 * CONF_LINE_MAX - 1 bytes, the text is UTF-8 without NUL bytes (a leading
 * byte-order mark is skipped, CR before LF is ignored).
 *
 * Must never: read the environment, print, or hand back a half-filled
 * conf_file: on error the result is freed and zeroed, and exactly one
 * message "PATH:LINE: found ..., expected ..." describes the first problem.
 */
#include "policy/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/site.h"
#include "policy/text.h"

#define CONF_FILE_MAX (1024 * 1024)   /* bytes; a configuration is a few lines */
#define CONF_SHOWN 48                  /* input bytes quoted in a message */

enum conf_key { KEY_MODE, KEY_MAX_GRAPHS, KEY_STACK_DEPTH, KEY_LABEL, KEY_CACHE_BUDGET,
                KEY_PYTHON_SKIP, KEY_SELF_RECORD, KEY_KEEP_MEMORY, KEY_COUNT };

static const char *const conf_key_names[KEY_COUNT] = {
    "mode", "max_graphs", "stack_depth", "label", "cache_budget", "python_skip", "self_record",
    "keep_memory",
};

static const char *const conf_mode_names[] = {
    [RECAP_MODE_AUTO] = "auto",
    [RECAP_MODE_RECAPTURE] = "recapture",
    [RECAP_MODE_UPDATE] = "update",
    [RECAP_MODE_OBSERVE] = "observe",
    [RECAP_MODE_OFF] = "off",
};

enum conf_section { SECTION_NONE, SECTION_DEFAULTS, SECTION_SITE };

struct conf_parser {
    const char *path;
    char *err;
    size_t errlen;
    int line;
    enum conf_section section;
    int defaults_line;            /* 0: no [defaults] yet */
    size_t site_index;            /* current [site] in conf->sites */
    int key_line[KEY_COUNT];      /* where each key appeared in this section */
    struct conf_file *conf;
    size_t sites_cap;
};

/* ---- messages ---------------------------------------------------------- */

/* Writes "PATH:LINE: " and the formatted text into the error buffer, never
 * ending on a partial UTF-8 character. Always returns -1. */
__attribute__((format(printf, 2, 3)))
static int conf_fail(struct conf_parser *p, const char *fmt, ...)
{
    if (p->errlen == 0)
        return -1;
    int n = snprintf(p->err, p->errlen, "%s:%d: ", p->path, p->line);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* A message cut by errlen must not end inside a UTF-8 character. */
    p->err[text_trim_partial(p->err, strlen(p->err))] = '\0';
    return -1;
}

/* "text" quoted for a message (see text_quote). */
static const char *conf_q(const char *s, size_t n, char *buf, size_t buflen)
{
    text_quote(s, n, CONF_SHOWN, buf, buflen);
    return buf;
}

#define QBUF 4 * CONF_SHOWN + 8

/* ---- small lexical helpers --------------------------------------------- */

static int conf_is_space(char c)
{
    return c == ' ' || c == '\t';
}

static void conf_trim(const char **s, size_t *n)
{
    while (*n > 0 && conf_is_space(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && conf_is_space((*s)[*n - 1]))
        (*n)--;
}

static int conf_equals(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

/* Length of s[0..n) before a comment: a '#' at the start or after a space
 * or tab. */
static size_t conf_before_comment(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '#' && (i == 0 || conf_is_space(s[i - 1])))
            return i;
    return n;
}

static int conf_label_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.' || c == ':' || c == '/';
}

static int conf_skip_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.' || c == '/' || c == '<' || c == '>';
}

/* Parses a decimal integer in [lo, hi] spelled only with digits. */
static int conf_parse_int(const char *s, size_t n, int lo, int hi, int *out)
{
    long value = 0;
    if (n == 0 || n > 9)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        value = value * 10 + (s[i] - '0');
    }
    if (value < lo || value > hi)
        return -1;
    *out = (int)value;
    return 0;
}

int conf_parse_budget(const char *s, size_t n, struct conf_budget *out)
{
    static const struct { const char *name; uint64_t scale; } units[] = {
        { "", 1 }, { "B", 1 },
        { "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 }, { "TiB", 1ull << 40 },
        { "KB", 1000ull }, { "MB", 1000000ull }, { "GB", 1000000000ull },
        { "TB", 1000000000000ull },
    };
    size_t digits = 0;
    uint64_t value = 0;
    while (digits < n && s[digits] >= '0' && s[digits] <= '9') {
        if (digits == 16)
            return -1;
        value = value * 10 + (uint64_t)(s[digits] - '0');
        digits++;
    }
    if (digits == 0)
        return -1;
    const char *unit = s + digits;
    size_t unit_len = n - digits;
    conf_trim(&unit, &unit_len);
    memset(out, 0, sizeof *out);
    if (unit_len == 1 && unit[0] == '%') {
        if (value > 100)
            return -1;
        out->set = out->is_percent = 1;
        out->percent = (int)value;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!conf_equals(unit, unit_len, units[i].name))
            continue;
        if (value > CONF_BUDGET_MAX_BYTES / units[i].scale)
            return -1;
        out->set = 1;
        out->bytes = value * units[i].scale;
        return 0;
    }
    return -1;
}

/* ---- sections ---------------------------------------------------------- */

static void conf_reset_keys(struct conf_parser *p)
{
    memset(p->key_line, 0, sizeof p->key_line);
}

static int conf_add_site(struct conf_parser *p, uint64_t id)
{
    struct conf_file *conf = p->conf;
    if (conf->nsites == p->sites_cap) {
        size_t cap = p->sites_cap ? p->sites_cap * 2 : 8;
        struct conf_site *grown = realloc(conf->sites, cap * sizeof *grown);
        if (grown == NULL)
            return conf_fail(p, "found more sites than memory allows (%zu), expected fewer",
                             conf->nsites);
        conf->sites = grown;
        p->sites_cap = cap;
    }
    struct conf_site *site = &conf->sites[conf->nsites];
    memset(site, 0, sizeof *site);
    site->id = id;
    site->mode = RECAP_MODE_AUTO;
    site->line = p->line;
    p->site_index = conf->nsites++;
    return 0;
}

static int conf_section_line(struct conf_parser *p, const char *s, size_t n)
{
    char q[QBUF];
    const char *close = memchr(s, ']', n);
    if (close == NULL)
        return conf_fail(p, "found %s, expected a section header ending in ]",
                         conf_q(s, n, q, sizeof q));
    const char *rest = close + 1;
    size_t rest_len = n - (size_t)(rest - s);
    size_t junk = conf_before_comment(rest, rest_len);
    const char *tail = rest;
    conf_trim(&tail, &junk);
    if (junk > 0)
        return conf_fail(p, "found %s after the section header, expected nothing or a # comment",
                         conf_q(tail, junk, q, sizeof q));

    const char *inner = s + 1;
    size_t inner_len = (size_t)(close - inner);
    conf_trim(&inner, &inner_len);

    if (conf_equals(inner, inner_len, "defaults")) {
        if (p->defaults_line)
            return conf_fail(p, "found a second [defaults] section (first at line %d), "
                             "expected one at most", p->defaults_line);
        p->defaults_line = p->line;
        p->section = SECTION_DEFAULTS;
        conf_reset_keys(p);
        return 0;
    }
    if (inner_len >= 4 && memcmp(inner, "site", 4) == 0 &&
        (inner_len == 4 || conf_is_space(inner[4]))) {
        const char *id_text = inner + 4;
        size_t id_len = inner_len - 4;
        conf_trim(&id_text, &id_len);
        char id_buf[SITE_ID_HEX_LEN + 1];
        uint64_t id = 0;
        if (id_len == 0)
            return conf_fail(p, "found [site] without an id, expected [site ID] with ID "
                             "16 hex digits");
        int id_ok = id_len == SITE_ID_HEX_LEN;
        if (id_ok) {
            memcpy(id_buf, id_text, id_len);
            id_buf[id_len] = '\0';
            id_ok = site_id_parse(id_buf, &id) == 0;
        }
        if (!id_ok)
            return conf_fail(p, "found site id %s, expected 16 hex digits",
                             conf_q(id_text, id_len, q, sizeof q));
        for (size_t i = 0; i < p->conf->nsites; i++)
            if (p->conf->sites[i].id == id)
                return conf_fail(p, "found a second [site %.*s] section (first at line %d), "
                                 "expected each site once", (int)id_len, id_text,
                                 p->conf->sites[i].line);
        if (conf_add_site(p, id) != 0)
            return -1;
        p->section = SECTION_SITE;
        conf_reset_keys(p);
        return 0;
    }
    return conf_fail(p, "found section %s, expected [defaults] or [site ID]",
                     conf_q(s, (size_t)(close - s) + 1, q, sizeof q));
}

/* ---- key = value ------------------------------------------------------- */

static int conf_value_mode(struct conf_parser *p, const char *v, size_t n,
                           enum recap_mode *mode)
{
    char q[QBUF];
    char buf[16];
    if (n < sizeof buf) {
        memcpy(buf, v, n);
        buf[n] = '\0';
        if (conf_mode_parse(buf, mode) == 0)
            return 0;
    }
    return conf_fail(p, "found mode = %s, expected auto, recapture, update, observe or off",
                     conf_q(v, n, q, sizeof q));
}

static int conf_value_label(struct conf_parser *p, const char *v, size_t n,
                            struct conf_site *site)
{
    char q[QBUF];
    if (n >= CONF_LABEL_MAX)
        return conf_fail(p, "found a label of %zu bytes, expected at most %d", n,
                         CONF_LABEL_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if (!conf_label_char((unsigned char)v[i]))
            return conf_fail(p, "found label = %s, expected letters, digits, _ - . : or /",
                             conf_q(v, n, q, sizeof q));
    char label[CONF_LABEL_MAX];
    memcpy(label, v, n);
    label[n] = '\0';
    uint64_t unused;
    if (strcmp(label, "all") == 0 || strcmp(label, "none") == 0 ||
        site_id_parse(label, &unused) == 0)
        return conf_fail(p, "found label = %s, expected a name other than all, none or "
                         "16 hex digits (RECAP_SITES reads those itself)",
                         conf_q(v, n, q, sizeof q));
    for (size_t i = 0; i < p->conf->nsites; i++) {
        const struct conf_site *other = &p->conf->sites[i];
        if (other != site && strcmp(other->label, label) == 0) {
            char id[SITE_ID_HEX_LEN + 1];
            site_id_format(other->id, id);
            return conf_fail(p, "found label %s already given to site %s (line %d), "
                             "expected each label once", conf_q(v, n, q, sizeof q), id,
                             other->line);
        }
    }
    memcpy(site->label, label, n + 1);
    return 0;
}

/* python_skip = torch_ext, my/plumbing.py: each entry non-empty, no
 * spaces inside. */
static int conf_value_python_skip(struct conf_parser *p, const char *v, size_t n)
{
    char q[QBUF];
    if (n >= CONF_PYTHON_SKIP_MAX)
        return conf_fail(p, "found python_skip of %zu bytes, expected at most %d", n,
                         CONF_PYTHON_SKIP_MAX - 1);
    size_t at = 0;
    while (at <= n) {
        const char *comma = memchr(v + at, ',', n - at);
        size_t end = comma ? (size_t)(comma - v) : n;
        const char *e = v + at;
        size_t elen = end - at;
        conf_trim(&e, &elen);
        if (elen == 0)
            return conf_fail(p, "found an empty entry in python_skip = %s, expected path "
                             "fragments separated by commas", conf_q(v, n, q, sizeof q));
        for (size_t i = 0; i < elen; i++)
            if (!conf_skip_char((unsigned char)e[i]))
                return conf_fail(p, "found python_skip entry %s, expected letters, digits and "
                                 "_ - . / < > (a path fragment such as mylib or pkg/ops.py)",
                                 conf_q(e, elen, q, sizeof q));
        at = end + 1;
    }
    memcpy(p->conf->python_skip, v, n);
    p->conf->python_skip[n] = '\0';
    return 0;
}

static int conf_key_line(struct conf_parser *p, const char *s, size_t n)
{
    char q[QBUF];
    const char *eq = memchr(s, '=', n);
    if (eq == NULL)
        return conf_fail(p, "found %s, expected key = value, a [section] or a # comment",
                         conf_q(s, n, q, sizeof q));
    const char *key = s;
    size_t key_len = (size_t)(eq - s);
    conf_trim(&key, &key_len);
    const char *value = eq + 1;
    size_t value_len = n - (size_t)(value - s);
    value_len = conf_before_comment(value, value_len);
    conf_trim(&value, &value_len);

    if (key_len == 0)
        return conf_fail(p, "found %s with no key, expected key = value",
                         conf_q(s, n, q, sizeof q));
    int k = -1;
    for (int i = 0; i < KEY_COUNT; i++)
        if (conf_equals(key, key_len, conf_key_names[i]))
            k = i;
    if (p->section == SECTION_NONE)
        return conf_fail(p, "found key %s before any section, expected [defaults] or "
                         "[site ID] first", conf_q(key, key_len, q, sizeof q));
    if (k < 0)
        return conf_fail(p, "found unknown key %s, expected %s",
                         conf_q(key, key_len, q, sizeof q),
                         p->section == SECTION_DEFAULTS
                             ? "mode, max_graphs, stack_depth, cache_budget, python_skip, "
                               "self_record or keep_memory"
                             : "mode, max_graphs, self_record or label");
    if (k == KEY_STACK_DEPTH && p->section == SECTION_SITE)
        return conf_fail(p, "found stack_depth in a [site] section, expected it only in "
                         "[defaults] (one depth identifies all sites)");
    if (k == KEY_CACHE_BUDGET && p->section == SECTION_SITE)
        return conf_fail(p, "found cache_budget in a [site] section, expected it only in "
                         "[defaults] (one budget holds for all sites)");
    if (k == KEY_KEEP_MEMORY && p->section == SECTION_SITE)
        return conf_fail(p, "found keep_memory in a [site] section, expected it only in "
                         "[defaults] (kept memory shares one budget)");
    if (k == KEY_PYTHON_SKIP && p->section == SECTION_SITE)
        return conf_fail(p, "found python_skip in a [site] section, expected it only in "
                         "[defaults] (it decides what the sites are)");
    if (k == KEY_LABEL && p->section == SECTION_DEFAULTS)
        return conf_fail(p, "found label in [defaults], expected label only in [site ID] "
                         "sections");
    if (p->key_line[k])
        return conf_fail(p, "found a second %s in this section (first at line %d), "
                         "expected each key once", conf_key_names[k], p->key_line[k]);
    if (value_len == 0)
        return conf_fail(p, "found an empty value for %s, expected %s", conf_key_names[k],
                         k == KEY_MODE ? "auto, recapture, update, observe or off"
                         : k == KEY_LABEL ? "a label"
                         : k == KEY_CACHE_BUDGET ? "a size such as 512MiB or a share such as 2%"
                         : k == KEY_PYTHON_SKIP ? "path fragments separated by commas"
                         : k == KEY_SELF_RECORD || k == KEY_KEEP_MEMORY ? "on or off"
                         : "a number");
    p->key_line[k] = p->line;

    struct conf_file *conf = p->conf;
    struct conf_site *site = p->section == SECTION_SITE ? &conf->sites[p->site_index] : NULL;
    int number;
    switch (k) {
    case KEY_MODE:
        if (site) {
            site->has_mode = 1;
            return conf_value_mode(p, value, value_len, &site->mode);
        }
        conf->has_mode = 1;
        return conf_value_mode(p, value, value_len, &conf->mode);
    case KEY_MAX_GRAPHS:
        if (conf_parse_int(value, value_len, 1, CONF_MAX_GRAPHS_LIMIT, &number) != 0)
            return conf_fail(p, "found max_graphs = %s, expected a whole number from 1 to %d",
                             conf_q(value, value_len, q, sizeof q), CONF_MAX_GRAPHS_LIMIT);
        if (site)
            site->max_graphs = number;
        else
            conf->max_graphs = number;
        return 0;
    case KEY_STACK_DEPTH:
        if (conf_parse_int(value, value_len, 1, SITE_MAX_DEPTH, &number) != 0)
            return conf_fail(p, "found stack_depth = %s, expected a whole number from 1 to %d",
                             conf_q(value, value_len, q, sizeof q), SITE_MAX_DEPTH);
        conf->stack_depth = number;
        return 0;
    case KEY_CACHE_BUDGET:
        if (conf_parse_budget(value, value_len, &conf->cache_budget) != 0)
            return conf_fail(p, "found cache_budget = %s, expected a size in bytes with an "
                             "optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB) such as "
                             "512MiB, at most 1PiB, or a whole percentage of device memory "
                             "from 0%% to 100%% such as 2%%", conf_q(value, value_len, q, sizeof q));
        return 0;
    case KEY_PYTHON_SKIP:
        return conf_value_python_skip(p, value, value_len);
    case KEY_SELF_RECORD:
        if (conf_equals(value, value_len, "on") || conf_equals(value, value_len, "off")) {
            enum conf_switch on = conf_equals(value, value_len, "on") ? CONF_ON : CONF_OFF;
            if (site)
                site->self_record = on;
            else
                conf->self_record = on;
            return 0;
        }
        return conf_fail(p, "found self_record = %s, expected on or off",
                         conf_q(value, value_len, q, sizeof q));
    case KEY_KEEP_MEMORY:
        if (conf_equals(value, value_len, "on") || conf_equals(value, value_len, "off")) {
            conf->keep_memory = conf_equals(value, value_len, "on") ? CONF_ON : CONF_OFF;
            return 0;
        }
        return conf_fail(p, "found keep_memory = %s, expected on or off",
                         conf_q(value, value_len, q, sizeof q));
    default:
        return conf_value_label(p, value, value_len, site);
    }
}

/* ---- lines ------------------------------------------------------------- */

static int conf_line(struct conf_parser *p, const char *s, size_t n)
{
    if (n >= CONF_LINE_MAX)
        return conf_fail(p, "found a line of %zu bytes, expected at most %d", n,
                         CONF_LINE_MAX - 1);
    size_t bad = text_first_bad_byte(s, n);
    if (bad < n) {
        if (s[bad] == '\0')
            return conf_fail(p, "found a NUL byte at column %zu, expected text", bad + 1);
        return conf_fail(p, "found byte 0x%02x at column %zu that is not UTF-8, "
                         "expected UTF-8 text", (unsigned char)s[bad], bad + 1);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return conf_fail(p, "found control byte 0x%02x at column %zu, expected text",
                             c, i + 1);
    }
    conf_trim(&s, &n);
    if (n == 0 || s[0] == '#')
        return 0;
    if (s[0] == '[')
        return conf_section_line(p, s, n);
    return conf_key_line(p, s, n);
}

/* ---- public ------------------------------------------------------------ */

int conf_parse(const char *path, const char *text, size_t len,
               struct conf_file *out, char *err, size_t errlen)
{
    struct conf_parser p = {
        .path = path ? path : "(config)", .err = err, .errlen = errlen, .line = 1,
        .conf = out,
    };
    memset(out, 0, sizeof *out);
    out->mode = RECAP_MODE_AUTO;
    if (errlen > 0)
        err[0] = '\0';

    size_t pos = 0;
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        pos = 3;
    while (pos < len) {
        const char *start = text + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos;
        size_t shown = n;
        if (shown > 0 && start[shown - 1] == '\r')
            shown--;
        if (conf_line(&p, start, shown) != 0) {
            conf_free(out);
            return -1;
        }
        pos += n + 1;
        p.line++;
    }
    return 0;
}

int conf_load(const char *path, struct conf_file *out, char *err, size_t errlen)
{
    char reason[128];
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: a FIFO named as the configuration must not hang the
     * program; it is refused below anyway. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path,
                 strerror_r(errno, reason, sizeof reason));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path,
                 strerror_r(errno, reason, sizeof reason));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: cannot read: %s", path,
                 S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        close(fd);
        return -1;
    }
    if (st.st_size > CONF_FILE_MAX) {
        snprintf(err, errlen, "%s: found a file of %lld bytes, expected at most %d",
                 path, (long long)st.st_size, CONF_FILE_MAX);
        close(fd);
        return -1;
    }
    /* +1: a file that grew since fstat is caught as too long. */
    size_t cap = (size_t)st.st_size + 1;
    char *text = malloc(cap);
    if (text == NULL) {
        snprintf(err, errlen, "%s: cannot read: out of memory", path);
        close(fd);
        return -1;
    }
    size_t len = 0;
    for (;;) {
        ssize_t got = read(fd, text + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path,
                     strerror_r(errno, reason, sizeof reason));
            free(text);
            close(fd);
            return -1;
        }
        if (got == 0)
            break;
        len += (size_t)got;
        if (len == cap) {
            snprintf(err, errlen, "%s: cannot read: the file changed while being read", path);
            free(text);
            close(fd);
            return -1;
        }
    }
    close(fd);
    int rc = conf_parse(path, text, len, out, err, errlen);
    free(text);
    return rc;
}

void conf_free(struct conf_file *conf)
{
    if (conf == NULL)
        return;
    free(conf->sites);
    memset(conf, 0, sizeof *conf);
    conf->mode = RECAP_MODE_AUTO;
}

const char *conf_mode_name(enum recap_mode mode)
{
    if ((unsigned)mode >= sizeof conf_mode_names / sizeof conf_mode_names[0])
        return NULL;
    return conf_mode_names[mode];
}

int conf_mode_parse(const char *text, enum recap_mode *mode)
{
    if (text == NULL)
        return -1;
    for (size_t i = 0; i < sizeof conf_mode_names / sizeof conf_mode_names[0]; i++) {
        if (strcmp(text, conf_mode_names[i]) == 0) {
            *mode = (enum recap_mode)i;
            return 0;
        }
    }
    return -1;
}
