/*
 * capture_rules.c - which of the driver's capture prohibitions a call
 * breaks, for a capture the driver does not know of (one recap records).
 *
 * The rules are the driver's as measured on driver 580
 * (tests/standin/READINGS.md, "Capture prohibitions"); the table of
 * guarded calls is driver_api.def's guard rows. Reads the capture's
 * membership and, for the legacy stream, the flags of its streams.
 */
#include <string.h>

#include "shim/repeat/capture_rules.h"
#include "shim/base/driver.h"

/* Whether some stream of the capture synchronises with the legacy stream:
 * the per-thread default stream does, a stream created non-blocking does
 * not (asked of the driver only here, on a refused call's path). */
static int has_blocking_member(const struct capture *cap)
{
    for (int i = 0; i < cap->nmembers; i++) {
        const void *key = cap->member_keys[i];
        if (key == ctab_stream_ref(DRV_cuLaunchKernel_ptsz, NULL).key)
            return 1;
        unsigned flags = 0;
        if (DRV_REAL(cuStreamGetFlags)((CUstream)key, &flags) != CUDA_SUCCESS ||
            !(flags & CU_STREAM_NON_BLOCKING))
            return 1;
    }
    return 0;
}

static int is_legacy(CUstream real)
{
    return real == CU_STREAM_LEGACY;
}

enum guard_rule capture_rule_for(const struct capture *cap, enum drv_id id, union drv_args *args,
                                 CUstreamCaptureMode thread_mode)
{
    const struct drv_entry *e = &drv_table[id];
    int mine = pthread_equal(pthread_self(), cap->owner);
    int unsafe = thread_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
                 ((mine && cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
                  (!mine && thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                   cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL));
    switch ((enum drv_guard_kind)e->guard_kind) {
    case DRV_GUARD_SYNC_CTX:
        return RULE_ALWAYS;
    case DRV_GUARD_SYNC_STREAM: {
        struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, args));
        if (ctab_has_member(cap, s.key))
            return RULE_ALWAYS;
        /* The legacy stream conflicts with a blocking stream of the
         * capture; with none, syncing it is potentially unsafe like any
         * other stream's (measured: READINGS.md). */
        if (is_legacy(s.real) && has_blocking_member(cap))
            return RULE_LEGACY;
        return unsafe ? RULE_UNSAFE : RULE_NONE;
    }
    case DRV_GUARD_STREAM_WORK: {
        struct stream_ref s = ctab_stream_ref(id, drv_args_stream(id, args));
        if (ctab_has_member(cap, s.key))
            return RULE_UNCAPTURABLE;
        return is_legacy(s.real) && has_blocking_member(cap) ? RULE_LEGACY : RULE_NONE;
    }
    case DRV_GUARD_STREAM_STATE:
        return ctab_has_member(cap, ctab_stream_ref(id, drv_args_stream(id, args)).key)
                   ? RULE_STREAM_STATE
                   : RULE_NONE;
    case DRV_GUARD_SYNC_EVENT: {
        CUevent first = drv_args_event(id, args), second = drv_args_second_event(id, args);
        if (ctab_has_event(cap, first) || ctab_has_event(cap, second))
            return RULE_EVENT;
        return second == NULL && unsafe ? RULE_UNSAFE : RULE_NONE;    /* cuEventQuery */
    }
    case DRV_GUARD_UNSAFE:
        if (id == DRV_cuEventSynchronize && ctab_has_event(cap, drv_args_event(id, args)))
            return RULE_EVENT;
        if (strncmp(e->base, "cuMemcpy", 8) == 0 || strncmp(e->base, "cuMemset", 8) == 0) {
            /* Synchronous copies and memsets run on a default stream. */
            if (e->ptds)
                return ctab_has_member(cap, ctab_stream_ref(id, NULL).key) ? RULE_ALWAYS : RULE_NONE;
            return has_blocking_member(cap) ? RULE_LEGACY : RULE_NONE;
        }
        return unsafe ? RULE_UNSAFE : RULE_NONE;
    default:
        break;
    }
    /* Work or a capture query on the legacy stream (op and query rows). */
    if (e->role == DRV_ROLE_OP || e->role == DRV_ROLE_QUERY) {
        if (!is_legacy(ctab_stream_ref(id, drv_args_stream(id, args)).real) ||
            !has_blocking_member(cap))
            return RULE_NONE;
        return e->role == DRV_ROLE_QUERY ? RULE_LEGACY_QUERY : RULE_LEGACY;
    }
    return RULE_NONE;
}

static const char *const rule_reasons[] = {
    [RULE_UNSAFE] = "the program made a call its capture mode prohibits",
    [RULE_ALWAYS] = "the program synchronised or queried what the capture holds",
    [RULE_EVENT] = "the program used an event recorded in the capture",
    [RULE_UNCAPTURABLE] = "the program put work no capture can hold on a capturing stream",
    [RULE_LEGACY] = "the program used the legacy stream during the capture",
    [RULE_LEGACY_QUERY] = "the program asked the legacy stream about capturing",
    [RULE_STREAM_STATE] = "the program destroyed a stream of the capture or changed its attributes",
};

static const CUresult rule_errors[] = {
    [RULE_UNSAFE] = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    [RULE_ALWAYS] = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    [RULE_EVENT] = CUDA_ERROR_CAPTURED_EVENT,
    [RULE_UNCAPTURABLE] = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    [RULE_LEGACY] = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    [RULE_LEGACY_QUERY] = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    [RULE_STREAM_STATE] = CUDA_SUCCESS,
};

const char *capture_rule_reason(enum guard_rule rule)
{
    return rule_reasons[rule];
}

CUresult capture_rule_error(enum guard_rule rule)
{
    return rule_errors[rule];
}
