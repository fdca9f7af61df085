/*
 * site_names.c - site ids from C, Python and NVTX, and site names (see
 * site_names.h).
 *
 * Id: a capture with neither Python frames nor an NVTX range keeps the
 * plain C-stack id (site_id_of), so C programs' ids are those of earlier
 * versions. Otherwise the id mixes the C frames below the interpreter
 * (all of them when there are no Python frames), the Python frames' hash
 * (file base name, function, line: no addresses) and the range's name.
 */
#include "shim/state/site_names.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/hash.h"
#include "shim/base/libc_dl.h"
#include "shim/base/nvtx_ranges.h"

/* RECAP_SITES entries that selected at least one site; under sites_lock. */
static unsigned char site_names_hit[SETTINGS_MAX_LISTED_SITES];

static void *site_names_lookup(const char *symbol)
{
    if (libc_dl_resolve() != 0)
        return NULL;
    return libc_dlsym_fn(RTLD_DEFAULT, symbol);
}

void site_names_configure(const struct recap_settings *s)
{
    pyframes_configure(site_names_lookup, s->conf.python_skip);
}

static uint64_t site_names_mix(uint64_t h, uint64_t v)
{
    return hash_mix64((h ^ v) * HASH_FNV_PRIME);
}

uint64_t site_names_identify(const struct site_stack *st, int depth, struct site_origin *o)
{
    const struct pyframes *py = pyframes_current(depth);
    const char *nvtx = nvtx_ranges_innermost();
    o->py = py != NULL && py->n > 0 ? py : NULL;
    o->nvtx = nvtx != NULL && nvtx[0] != '\0' ? nvtx : NULL;
    if (o->py == NULL && o->nvtx == NULL) {
        o->c_frames = st->depth;
        return site_id_of(st);
    }
    uint64_t h = site_id_of_until(st, o->py ? pyframes_interpreter_base() : 0, &o->c_frames);
    if (o->py != NULL)
        h = site_names_mix(h, o->py->hash);
    if (o->nvtx != NULL) {
        uint64_t n = hash_fnv1a(HASH_FNV_OFFSET, o->nvtx, strlen(o->nvtx));
        h = site_names_mix(h, n ^ 0x6e767478ull);   /* "nvtx": not a Python hash */
    }
    return h != 0 ? h : 1;
}

const char *site_names_take_warning(void)
{
    return pyframes_take_warning();
}

/* snprintf whose truncation is intended: labels are bounded. */
__attribute__((format(printf, 3, 4)))
static void site_names_fmt(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
}

/* A frame's file as the label shows it: relative to the working directory
 * when below it. */
static const char *site_names_shown_file(const char *file, const char *cwd)
{
    size_t n = strlen(cwd);
    if (n > 1 && file[0] == '/' && strncmp(file, cwd, n) == 0 && file[n] == '/')
        return file + n + 1;
    return file;
}

struct site_names *site_names_new(const struct site_origin *o)
{
    struct site_names *names = calloc(1, sizeof *names);
    if (names == NULL)
        return NULL;
    names->c_frames = o->c_frames;
    if (o->nvtx != NULL)
        snprintf(names->nvtx, sizeof names->nvtx, "%s", o->nvtx);
    if (o->py != NULL) {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) == NULL)
            cwd[0] = '\0';
        names->npy = o->py->n;
        names->gil = o->py->gil;
        memcpy(names->py, o->py->frame, (size_t)o->py->n * sizeof names->py[0]);
        for (int i = 0; i < names->npy; i++)
            site_names_fmt(names->file_line[i], sizeof names->file_line[i], "%s:%d",
                           site_names_shown_file(names->py[i].file, cwd), names->py[i].line);
        char caller[SETTINGS_LABEL_MAX] = "";
        if (names->npy > 1)
            site_names_fmt(caller, sizeof caller, " < %s (%s)", names->file_line[1],
                           names->py[1].function);
        site_names_fmt(names->label, sizeof names->label, "%s%s%s (%s)%s",
                       o->nvtx ? o->nvtx : "", o->nvtx ? " @ " : "", names->file_line[0],
                       names->py[0].function, caller);
    } else if (o->nvtx != NULL) {
        site_names_fmt(names->label, sizeof names->label, "%s", o->nvtx);
    }
    return names;
}

struct site_policy site_names_policy(const struct recap_settings *s, uint64_t id,
                                     const struct site_names *names)
{
    const char *keys[2 + PYFRAMES_MAX] = { NULL };
    int nkeys = 0;
    if (names != NULL) {
        if (names->label[0])
            keys[nkeys++] = names->label;
        for (int i = 0; i < names->npy; i++)
            keys[nkeys++] = names->file_line[i];
        if (names->nvtx[0] && strcmp(names->nvtx, names->label) != 0)
            keys[nkeys++] = names->nvtx;
    }
    struct site_policy policy = settings_site_policy_named(s, id, keys, nkeys, site_names_hit);
    if (policy.label == NULL && names != NULL && names->label[0])
        policy.label = names->label;
    return policy;
}

void site_names_unmatched(const struct recap_settings *s, void (*fn)(const char *entry, void *arg),
                          void *arg)
{
    if (s->sites_filter != SITES_LIST)
        return;
    for (int i = 0; i < s->nlisted && i < SETTINGS_MAX_LISTED_SITES; i++) {
        if (site_names_hit[i])
            continue;
        char id[SITE_ID_HEX_LEN + 1];
        if (s->listed[i].is_id)
            site_id_format(s->listed[i].id, id);
        fn(s->listed[i].is_id ? id : s->listed[i].label, arg);
    }
}

void site_names_after_fork_child(void)
{
    memset(site_names_hit, 0, sizeof site_names_hit);
}
