/*
 * jlog.h - the per-run log, JSON Lines (module prefix jlog_).
 *
 * Owns: the log's file descriptor, creating the file safely on the first
 * event (never following a planted symlink, never truncating, mode 0644 or
 * narrower), and turning one event into exactly one write(2) so that a
 * killed process leaves only complete lines and concurrent writers (threads,
 * fork children, ranks sharing a path) never interleave inside a line.
 * Must never: allocate, call the CUDA driver, hold a lock across write(2),
 * or let any failure reach the program (an unwritable log costs one
 * "recap:" warning on stderr and logging stops).
 */
#ifndef RECAP_JLOG_H
#define RECAP_JLOG_H

#include <stddef.h>
#include <stdint.h>

#define JLOG_LINE_MAX 16384

/* One event being built on the caller's stack. Keys are emitted in call
 * order; "event" is always first, then "pid". A line that would overflow
 * is closed early and marked "truncated":true, still valid JSON. */
struct jlog_line {
    char buf[JLOG_LINE_MAX];
    size_t len;
    int depth;          /* open arrays/objects */
    int need_comma;
    int overflow;
    uint32_t nest_arrays; /* bit d-1 set: nesting level d is an array */
};

#define JLOG_MAX_NEST 16    /* deeper containers count as overflow */

/* Where the log goes: a template expanded once per process (see
 * settings_expand_log_path), "stderr", or "off"; NULL means the default
 * SETTINGS_DEFAULT_LOG. Opens nothing yet. Copies what it needs from envp
 * (the rank variables for %r). Call before the first event, from one
 * thread; calling it again closes a log already opened. */
void jlog_configure(const char *path_template, char *const *envp);

/* Nonzero unless the log is off or failed. */
int jlog_enabled(void);

void jlog_line_begin(struct jlog_line *l, const char *event);
void jlog_str(struct jlog_line *l, const char *key, const char *value); /* NULL -> null */
void jlog_u64(struct jlog_line *l, const char *key, uint64_t value);
void jlog_i64(struct jlog_line *l, const char *key, int64_t value);
void jlog_f64(struct jlog_line *l, const char *key, double value);     /* non-finite -> null */
void jlog_bool(struct jlog_line *l, const char *key, int value);
void jlog_site(struct jlog_line *l, const char *key, uint64_t site_id); /* "0123456789abcdef" */
void jlog_array_begin(struct jlog_line *l, const char *key);           /* key NULL inside arrays */
void jlog_array_end(struct jlog_line *l);
void jlog_object_begin(struct jlog_line *l, const char *key);          /* key NULL inside arrays */
void jlog_object_end(struct jlog_line *l);

/* Closes the line and writes it (one write(2)); opens the file first if
 * this is the process's first event. */
void jlog_line_emit(struct jlog_line *l);

/* In a fork child: forget the parent's file so the child's first event
 * opens its own log (a template with %p gives a new file). */
void jlog_after_fork_child(void);

/* The path actually opened ("" before the first event or when off). */
const char *jlog_path(void);

#endif
