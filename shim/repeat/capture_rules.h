/*
 * capture_rules.h - the driver's capture prohibitions, asked of a capture
 * recap records itself (prefix capture_rule).
 *
 * While recap records a capture the driver does not know of it, so each
 * call the driver would have refused is looked at first: this module says
 * which rule refuses it, with the reason to log and the driver's error.
 * Must never: act on the answer (switching or invalidating the capture is
 * shim/repeat/capture.h's), or call the driver but to read a stream's flags.
 */
#ifndef RECAP_CAPTURE_RULES_H
#define RECAP_CAPTURE_RULES_H

#include "shim/state/capture_table.h"

enum guard_rule {
    RULE_NONE,
    RULE_UNSAFE,        /* refused by the capture modes (thread mode, owner) */
    RULE_ALWAYS,        /* refused whatever the modes: sync of what captures */
    RULE_EVENT,         /* an event recorded in the capture */
    RULE_UNCAPTURABLE,  /* work no capture holds (a host callback) on a capturing stream */
    RULE_LEGACY,        /* the legacy stream, against a blocking capturing stream */
    RULE_LEGACY_QUERY,  /* the same, asked only: refused, nothing invalidated */
    RULE_STREAM_STATE   /* a stream of the capture destroyed or changed: the driver must see it */
};

/* Which rule refuses call `id` during `cap` for a thread in `thread_mode`,
 * or RULE_NONE. Caller holds cap->lock. */
enum guard_rule capture_rule_for(const struct capture *cap, enum drv_id id, union drv_args *args,
                                 CUstreamCaptureMode thread_mode);

/* What the log says of a refused call, and the driver's error for it
 * (CUDA_SUCCESS for RULE_STREAM_STATE: the driver must answer it). */
const char *capture_rule_reason(enum guard_rule rule);
CUresult capture_rule_error(enum guard_rule rule);

#endif
