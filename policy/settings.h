/*
 * settings.h - what the user asked for (module prefix settings_).
 *
 * Owns: reading RECAP_SITES, RECAP_MODE, RECAP_CONFIG, RECAP_LOG and
 * RECAP_VERBOSE and the configuration file once, and answering "what may
 * recap do at this site". Any bad input produces one stderr line starting
 * "recap:" naming the variable or file:line, what was found and what was
 * expected, and leaves recap in observe mode. Must never: exit, abort, or
 * be consulted on the path of a driver call recap does not act on (callers
 * cache what they need).
 *
 * Precedence, strongest first (settings_site_policy):
 *   1. RECAP_MODE=off, or [defaults] mode = off with RECAP_MODE unset: every
 *      site is off and there is no log. RECAP_MODE=off also skips reading
 *      RECAP_CONFIG, RECAP_SITES and RECAP_LOG altogether.
 *   2. Any bad input (environment or configuration): every site observed.
 *   3. A site not selected by RECAP_SITES (none, or a list without it):
 *      observed.
 *   4. RECAP_MODE=observe: every site observed (the user asked, on this
 *      run, for nothing to change).
 *   5. The site's own [site ID] mode, when the file gives one: a site
 *      section beats both RECAP_MODE (other than off/observe) and
 *      [defaults], because it is the more specific, deliberate choice.
 *   6. RECAP_MODE when set, else [defaults] mode, else auto (environment
 *      over file defaults, so one run can try another mode without editing
 *      the file).
 * max_graphs: [site ID] over [defaults]; unset (0), a site keeps as many
 * objects as its working set has shapes, within the cache budget.
 * cache_budget: [defaults], else SETTINGS_DEFAULT_BUDGET_PERCENT of the
 * device's memory capped at SETTINGS_DEFAULT_BUDGET_CAP.
 * stack_depth: [defaults] over SITE_DEFAULT_DEPTH.
 * self_record, default on: on a driver without the recapture API, recap
 * records repeat captures itself. RECAP_SELF_RECORD=off turns it off at
 * every site (the safe direction, as RECAP_MODE=observe for the mode);
 * otherwise a site's own [site ID] self_record, then RECAP_SELF_RECORD=on,
 * then [defaults] self_record.
 * keep_memory, default on: device memory a site's captures allocate is
 * kept when the program frees it and handed back to the site's next
 * capture (shim/state/kept_memory.h). RECAP_KEEP_MEMORY over [defaults]
 * keep_memory.
 * copy_held, default off (RECAP_COPY_HELD=on turns it on): where the
 * program keeps every graph it captures, record repeat captures into
 * copies of the graphs it keeps (shim/repeat/graph_copy.h). On in rounds
 * 22-23; off again since PyTorch's graph tests run whole in one process
 * crashed (round 24): driver 580 breaks the graph a written clone came
 * from, for the program's own later use too (docs/decisions.md, round 27).
 * A bad RECAP_LOG template leaves the default template in place (observe
 * mode still logs, so the problem is visible there too).
 */
#ifndef RECAP_SETTINGS_H
#define RECAP_SETTINGS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/config.h"

#define SETTINGS_DEFAULT_MAX_GRAPHS 0        /* no per-site cap but the working set */
#define SETTINGS_DEFAULT_BUDGET_PERCENT 2
#define SETTINGS_DEFAULT_BUDGET_CAP (1ull << 30)
/* When the device's memory cannot be read: a budget that fits any GPU. */
#define SETTINGS_BUDGET_UNKNOWN_DEVICE (64ull << 20)
#define SETTINGS_DEFAULT_LOG "recap-%p.jsonl"
#define SETTINGS_MAX_LISTED_SITES 256
#define SETTINGS_PATH_MAX 4096
#define SETTINGS_LABEL_MAX 160      /* a RECAP_SITES label, NUL included */

enum settings_sites_filter { SITES_ALL, SITES_NONE, SITES_LIST };

struct settings_site_ref {          /* one entry of RECAP_SITES */
    int is_id;
    uint64_t id;                    /* 0 for a label no configuration defines */
    char label[SETTINGS_LABEL_MAX]; /* as given, for labels */
};

/* The process's place in a multi-process run, from the launcher's
 * variables (settings_rank_find). */
struct settings_rank {
    long rank;                      /* -1: no launcher variable set */
    long world_size;                /* -1: unknown */
    const char *rank_var;           /* static name of the variable read, or NULL */
    const char *size_var;           /* static name, or NULL */
};

struct recap_settings {
    enum recap_mode mode;           /* effective default mode */
    int mode_from_env;              /* mode came from a valid RECAP_MODE */
    int degraded;                   /* a bad input forced observe mode */
    enum settings_sites_filter sites_filter;
    char sites_text[512];           /* RECAP_SITES as given, for the log */
    struct settings_site_ref listed[SETTINGS_MAX_LISTED_SITES];
    int nlisted;
    char config_path[SETTINGS_PATH_MAX];   /* "": none */
    char log_template[SETTINGS_PATH_MAX];  /* "stderr", "off", or a template */
    int verbose;
    int self_record;                /* default per site: recap records repeat captures */
    int self_record_from_env;       /* self_record came from a valid RECAP_SELF_RECORD */
    int keep_memory;                /* keep device memory between a site's captures */
    int keep_memory_from_env;
    int copy_held;                  /* record into copies of graphs the program keeps */
    int max_graphs;                 /* default per site; 0: working set */
    int stack_depth;
    struct conf_budget cache_budget; /* set: from [defaults] */
    struct conf_file conf;          /* owned */
    struct settings_rank rank;      /* from the environment at load */
};

/* What recap may do at one site. */
struct site_policy {
    enum recap_mode mode;
    int max_graphs;
    int self_record;                /* records repeat captures where the driver cannot */
    const char *label;              /* NULL: none; points into settings */
};

/* Fills *s from `envp` (a NULL-terminated "NAME=value" array, e.g. environ)
 * and the configuration file it names. Problems are written to `errfd` as
 * "recap: ..." lines (one per problem) and set s->degraded. Always leaves a
 * usable *s. */
void settings_load(struct recap_settings *s, char *const *envp, int errfd);

/* As settings_load, but when RECAP_CONFIG is set its contents are
 * conf_text[0..conf_len) instead of the named file (the name still appears
 * in messages). For tests and fuzzing: no file system access. */
void settings_load_with_text(struct recap_settings *s, char *const *envp, int errfd,
                             const char *conf_text, size_t conf_len);

/* Parses a RECAP_SITES value into s->sites_filter and s->listed, resolving
 * labels through s->conf; a label the configuration does not define is
 * kept, to be matched against the names sites are given when first seen
 * (settings_site_policy_named). Returns 0, or -1 with "found ...,
 * expected ..." in err and the filter left at SITES_ALL. */
int settings_parse_sites(struct recap_settings *s, const char *value, char *err, size_t errlen);

void settings_free(struct recap_settings *s);

/* The cache budget in bytes for a device of `device_total` bytes (0:
 * unknown): the configured size, the configured share, or the default
 * share capped. */
uint64_t settings_cache_budget(const struct recap_settings *s, uint64_t device_total);

/* The policy for a site id: RECAP_SITES filter (ids or labels), per-site
 * configuration sections, then defaults. Sites not selected are observed. */
struct site_policy settings_site_policy(const struct recap_settings *s, uint64_t site_id);

/* As settings_site_policy, for a site that also answers to `names` (its
 * default label, FILE:LINE, its NVTX range): a RECAP_SITES label equal to
 * one of them selects it. hit[i] (when hit is not NULL) is set for every
 * RECAP_SITES entry that selected the site. */
struct site_policy settings_site_policy_named(const struct recap_settings *s, uint64_t site_id,
                                              const char *const *names, int nnames,
                                              unsigned char *hit);

/* Finds the rank in envp: the first of RANK (torchrun), OMPI_COMM_WORLD_RANK
 * (Open MPI), PMI_RANK (MPICH/Hydra, Intel MPI), PMIX_RANK (PMIx) and
 * SLURM_PROCID (srun) that holds a plain number, and the world size from
 * the same launcher's variable (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * none, SLURM_NTASKS or SLURM_NPROCS) when that is a positive number. */
void settings_rank_find(char *const *envp, struct settings_rank *out);

/* The i-th rank variable settings_rank_find reads (strongest first), NULL
 * past the last: for callers that keep a private copy of them. */
const char *settings_rank_var(size_t i);

/* Expands a log template: %p pid, %h host name, %r rank (settings_rank_find,
 * else the pid), %% percent. Returns 0, or -1 when the result does not fit or the template
 * has an unknown % sequence (message in err). */
int settings_expand_log_path(const char *tmpl, char *const *envp, long pid,
                             char *out, size_t outlen, char *err, size_t errlen);

#endif
