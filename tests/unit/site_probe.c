/*
 * site_probe.c - a stand-in for librecap in the site tests: a shared
 * library holding the policy code, so that its own frames are the ones
 * site_stack_capture skips, as librecap's are in real use.
 */
#include <stdio.h>
#include <string.h>

#include "policy/site.h"
#include "tests/unit/site_probe.h"

void probe_set_self(int skip_probe_frames)
{
    site_set_self_module(skip_probe_frames ? (const void *)probe_set_self : NULL);
}

uint64_t probe_id(int depth)
{
    struct site_stack st;
    site_stack_capture(&st, depth, NULL);
    return site_id_of(&st);
}

/* Recurses `extra` times inside this library before capturing: a deeper
 * chain of librecap frames than usual. Exported so the compiler keeps the
 * calls. */
PROBE_EXPORT uint64_t probe_nest(int depth, int extra);
uint64_t probe_nest(int depth, int extra)
{
    uint64_t id = extra > 0 ? probe_nest(depth, extra - 1) : probe_id(depth);
    __asm__ volatile("" ::: "memory");   /* no tail call: keep the frame */
    return id;
}

uint64_t probe_id_nested(int depth, int extra)
{
    uint64_t id = probe_nest(depth, extra);
    __asm__ volatile("" ::: "memory");
    return id;
}

int probe_frames(int depth, char *out, size_t len)
{
    struct site_stack st;
    size_t at = 0;
    site_stack_capture(&st, depth, NULL);
    out[0] = '\0';
    for (int i = 0; i < st.depth && at + 1 < len; i++) {
        at += site_frame_format(st.pc[i], out + at, len - at);
        if (at + 1 < len) {
            out[at++] = '\n';
            out[at] = '\0';
        }
    }
    return st.depth;
}
