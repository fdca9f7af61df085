/*
 * site_probe.h - the probe library's exports (see site_probe.c).
 */
#ifndef RECAP_SITE_PROBE_H
#define RECAP_SITE_PROBE_H

#include <stddef.h>
#include <stdint.h>

#define PROBE_EXPORT __attribute__((visibility("default")))

/* Registers the probe library as the module to skip (or none). */
PROBE_EXPORT void probe_set_self(int skip_probe_frames);
/* The site id of the caller's stack, `depth` frames deep. */
PROBE_EXPORT uint64_t probe_id(int depth);
/* As probe_id, after `extra` more frames inside the probe library. */
PROBE_EXPORT uint64_t probe_id_nested(int depth, int extra);
/* The caller's frames, formatted, one per line; returns their number. */
PROBE_EXPORT int probe_frames(int depth, char *out, size_t len);

#endif
