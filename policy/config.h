/*
 * config.h - the configuration file (module prefix conf_).
 *
 * Owns: parsing "[defaults]" and "[site ID]" sections of "key = value" lines
 * with "#" comments into a conf_file. Keys: mode, max_graphs, self_record,
 * stack_depth, cache_budget and python_skip (these three in [defaults]
 * only), label ([site] only).
 * Must never: read the environment, print, or leave a half-filled
 * conf_file behind an error.
 */
#ifndef RECAP_CONFIG_H
#define RECAP_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum recap_mode {
    RECAP_MODE_AUTO,       /* recapture where the driver can, else exec reuse */
    RECAP_MODE_RECAPTURE,  /* recapture only; instantiation left alone */
    RECAP_MODE_UPDATE,     /* executable-graph reuse only */
    RECAP_MODE_OBSERVE,    /* log sites and captures, change nothing */
    RECAP_MODE_OFF         /* pure pass-through, no log */
};

#define CONF_LABEL_MAX 64          /* bytes, including the NUL */
#define CONF_MAX_GRAPHS_LIMIT 64
#define CONF_LINE_MAX 1024         /* longer lines are an error */
#define CONF_PYTHON_SKIP_MAX 512   /* python_skip's value, NUL included */

/* cache_budget: how much device memory what recap keeps may take, in bytes
 * or as a share of the device's memory. */
struct conf_budget {
    int set;
    int is_percent;
    int percent;                   /* 0..100 when is_percent */
    uint64_t bytes;                /* when !is_percent */
};

#define CONF_BUDGET_MAX_BYTES (1ull << 50)

/* An on/off key: unset unless the file gives it. */
enum conf_switch { CONF_UNSET, CONF_ON, CONF_OFF };

struct conf_site {
    uint64_t id;
    int has_mode;
    enum recap_mode mode;
    int max_graphs;                /* 0: not set */
    enum conf_switch self_record;
    char label[CONF_LABEL_MAX];    /* "": none */
    int line;                      /* where its section began */
};

struct conf_file {
    int has_mode;
    enum recap_mode mode;
    int max_graphs;                /* 0: not set */
    int stack_depth;               /* 0: not set */
    struct conf_budget cache_budget;
    char python_skip[CONF_PYTHON_SKIP_MAX];   /* "": not set; comma-separated */
    enum conf_switch self_record;
    enum conf_switch keep_memory;
    struct conf_site *sites;       /* owned; freed by conf_free */
    size_t nsites;
};

/* Parses `len` bytes of `text` read from `path` (used in messages only).
 * Returns 0 and fills *out, or -1 and writes one message of the form
 * "PATH:LINE: found ..., expected ..." into err (NUL-terminated, truncated
 * to errlen) leaving *out empty. */
int conf_parse(const char *path, const char *text, size_t len,
               struct conf_file *out, char *err, size_t errlen);

/* Reads and parses the file at path; an unreadable file is an error. */
int conf_load(const char *path, struct conf_file *out, char *err, size_t errlen);

void conf_free(struct conf_file *conf);

/* Parses a cache_budget value ("512MiB", "2GiB", "1048576", "2%").
 * Returns 0, or -1 when it is not one. */
int conf_parse_budget(const char *text, size_t len, struct conf_budget *out);

/* "auto", "recapture", ... ; NULL for an unknown value. */
const char *conf_mode_name(enum recap_mode mode);
int conf_mode_parse(const char *text, enum recap_mode *mode);

#endif
