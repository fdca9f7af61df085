/*
 * site_names.h - what a capture site is called (module prefix site_names_).
 *
 * Owns: combining the C stack with the capturing thread's Python frames
 * (policy/pyframes) and innermost NVTX range (shim/base/nvtx_ranges) into the
 * site id; a new site's default label ("FILE:LINE (FUNCTION)" of the
 * innermost program frame, followed by " < FILE:LINE (FUNCTION)" of its
 * caller when there is one, so that a helper's callers tell its sites
 * apart; "RANGE @ " in front when an NVTX range is open; the range alone
 * without Python) and the names it answers to in RECAP_SITES (that label,
 * "FILE:LINE" of any of its program frames, the range); its policy from
 * those names, and which RECAP_SITES entries never selected a site. Must never: call the driver, or allocate on the
 * path of a capture at a site seen before.
 */
#ifndef RECAP_SITE_NAMES_H
#define RECAP_SITE_NAMES_H

#include <stdint.h>

#include "policy/pyframes.h"
#include "policy/settings.h"
#include "policy/site.h"

/* What identified one capture, beside its C stack (thread-local data:
 * valid until the thread's next capture). */
struct site_origin {
    const struct pyframes *py;          /* NULL: no Python frames */
    const char *nvtx;                   /* innermost NVTX range, or NULL */
    int c_frames;                       /* C frames that went into the id */
};

/* Kept with a site for its life, made at first sight. */
struct site_names {
    char label[SETTINGS_LABEL_MAX];     /* default label; "" when none */
    char file_line[PYFRAMES_MAX][SETTINGS_LABEL_MAX];   /* "FILE:LINE" per program frame */
    char nvtx[64];
    int c_frames;
    int npy;
    enum pyframes_gil gil;
    struct pyframe py[PYFRAMES_MAX];
};

/* Called once at start: symbol lookup and the configured skip list. */
void site_names_configure(const struct recap_settings *s);

/* A warning about reading Python frames (once per process: an unsupported
 * version, a sub-interpreter...) for the caller to log, or NULL. */
const char *site_names_take_warning(void);

/* The site id of a capture beginning now on this thread with C stack st. */
uint64_t site_names_identify(const struct site_stack *st, int depth, struct site_origin *o);

/* A new site's names (malloc'd, never freed; NULL when out of memory). */
struct site_names *site_names_new(const struct site_origin *o);

/* The site's policy from settings, its id and names; records which
 * RECAP_SITES entries selected it. Caller holds sites_lock. */
struct site_policy site_names_policy(const struct recap_settings *s, uint64_t id,
                                     const struct site_names *names);

/* Calls fn for every RECAP_SITES entry that selected no site so far. */
void site_names_unmatched(const struct recap_settings *s, void (*fn)(const char *entry, void *arg),
                          void *arg);

/* In a fork child: the parent's matches are forgotten with its sites. */
void site_names_after_fork_child(void);

#endif
