/*
 * call_trace.c - the hooks of a build made with -finstrument-functions, for
 * tests/layers/follow_calls.py (which says how to build one): every
 * function entered and left during a call of the function at offset
 * TRACE_ROOT_OFFSET (hex) in librecap - the TRACE_CALL-th call, or every
 * call with TRACE_CALL=0 - written to TRACE_OUT as "> object offset" and
 * "< object offset" lines. A measuring tool, linked into no build of recap.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread int depth, tracing;
static int calls_seen, done;
static void *root;
static FILE *out;

__attribute__((no_instrument_function)) static int is_root(void *fn)
{
    if (root)
        return fn == root;
    Dl_info i;
    const char *offset = getenv("TRACE_ROOT_OFFSET");
    if (!offset)
        return 0;
    unsigned long want = strtoul(offset, NULL, 16);
    if (dladdr(fn, &i) && (unsigned long)((char *)fn - (char *)i.dli_fbase) == want &&
        strstr(i.dli_fname, "librecap")) {
        root = fn;
        return 1;
    }
    return 0;
}

__attribute__((no_instrument_function)) static void note(char what, void *fn)
{
    Dl_info i;
    if (!out) {
        out = fopen(getenv("TRACE_OUT"), "w");
        if (!out)
            abort();
    }
    if (dladdr(fn, &i))
        fprintf(out, "%c %s %lx\n", what, i.dli_fname, (unsigned long)((char *)fn - (char *)i.dli_fbase));
}

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    if (done)
        return;
    if (!tracing) {
        if (!is_root(fn))
            return;
        int want = atoi(getenv("TRACE_CALL") ? getenv("TRACE_CALL") : "1000");
        if (++calls_seen != want && want != 0)
            return;
        tracing = 1;
        depth = 0;
    }
    depth++;
    note('>', fn);
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    if (!tracing)
        return;
    note('<', fn);
    if (--depth == 0) {
        tracing = 0;
        if (atoi(getenv("TRACE_CALL") ? getenv("TRACE_CALL") : "1000") != 0) {
            done = 1;
            fclose(out);
            out = NULL;
        } else {
            fflush(out);
        }
    }
}
