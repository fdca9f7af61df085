/*
 * jlog.c - the JSON Lines log writer (see jlog.h).
 *
 * Owns: building one event on the caller's stack as valid UTF-8 JSON
 * whatever the strings hold, the log's descriptor and its lazy, safe
 * creation, and writing each line with a single write(2).
 *
 * Must never: allocate, call the CUDA driver, hold a lock while writing a
 * line, follow a symlink planted at the log path, truncate an existing log,
 * write into a descriptor the program has since reused, or let a failure
 * reach the program: the first failure prints one "recap: cannot write log
 * PATH: reason; logging disabled" line on stderr and logging stops. A
 * path naming the null device (RECAP_LOG=/dev/null) is no failure: logging
 * stops quietly, as with "off".
 *
 * Concurrency: the state word is read with acquire on every emit; only the
 * first emit (or the first in a fork child) takes jlog_open_lock, to create
 * the file once however many threads race to log first.
 */
#include "shim/base/jlog.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "policy/settings.h"
#include "policy/site.h"
#include "policy/text.h"

enum jlog_state {
    JLOG_UNCONFIGURED,   /* jlog_configure not called: events are dropped */
    JLOG_OFF,
    JLOG_UNOPENED,       /* configured, first event not yet seen */
    JLOG_OPEN,
    JLOG_FAILED,
};

static const char jlog_truncated[] = ",\"truncated\":true";
/* Room kept back so a line can always be closed: the truncation marker,
 * one closer per nesting level, the final brace and the newline. */
#define JLOG_RESERVE (sizeof jlog_truncated - 1 + JLOG_MAX_NEST + 2)
#define JLOG_LIMIT (JLOG_LINE_MAX - JLOG_RESERVE)

#define JLOG_RANK_VARS 8       /* at least as many as settings_rank_var names */
#define JLOG_RANK_ENTRY 80

static _Atomic int jlog_state = JLOG_UNCONFIGURED;
static pthread_mutex_t jlog_open_lock = PTHREAD_MUTEX_INITIALIZER;
static int jlog_fd = -1;
static int jlog_to_stderr;
static dev_t jlog_dev;                 /* identity of the opened file, to */
static ino_t jlog_ino;                 /* notice a descriptor reused by the program */
static char jlog_template[SETTINGS_PATH_MAX];
static char jlog_opened[SETTINGS_PATH_MAX];
/* Private copies of the rank variables, as an envp for the path expansion
 * at open time (the program may change its environment meanwhile). */
static char jlog_rank_env[JLOG_RANK_VARS][JLOG_RANK_ENTRY];
static char *jlog_envp[JLOG_RANK_VARS + 1];

/* ---- failure reporting ---------------------------------------------------- */

static void jlog_write_stderr(const char *const *parts, int nparts)
{
    char msg[SETTINGS_PATH_MAX + 256];
    size_t len = 0;
    for (int i = 0; i < nparts; i++) {
        size_t n = strlen(parts[i]);
        if (n > sizeof msg - 1 - len)
            n = sizeof msg - 1 - len;
        memcpy(msg + len, parts[i], n);
        len += n;
    }
    msg[len++] = '\n';
    const char *p = msg;
    while (len > 0) {
        ssize_t w = write(2, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        len -= (size_t)w;
    }
}

static void jlog_report_failure(const char *path, const char *reason)
{
    const char *parts[] = { "recap: cannot write log ", path, ": ", reason,
                            "; logging disabled" };
    jlog_write_stderr(parts, 5);
}

/* ---- opening ---------------------------------------------------------------- */

/* Linux's null device, character device 1:3, whatever its path. */
static int jlog_is_null_device(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

/* Opens the expanded log path for appending. Returns the descriptor; -2
 * for the null device (the user asked for no log); or -1 with *reason set
 * to a static description. */
static int jlog_open_file(const char *path, const char **reason, char *why, size_t whylen)
{
    /* O_NONBLOCK: a FIFO planted at the path must not block the program in
     * open(2); it is refused by the checks below, and cleared for a file. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
                        O_NONBLOCK | O_NOCTTY, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            *reason = "it is a symbolic link, which recap does not follow";
        else if (e == ENXIO)
            *reason = "not a regular file";
        else
            *reason = strerror_r(e, why, whylen);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *reason = strerror_r(errno, why, whylen);
        close(fd);
        return -1;
    }
    if (jlog_is_null_device(&st)) {
        close(fd);
        return -2;
    }
    if (!S_ISREG(st.st_mode)) {
        *reason = "not a regular file";
        close(fd);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        *reason = "owned by another user";
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        *reason = strerror_r(errno, why, whylen);
        close(fd);
        return -1;
    }
    /* Keep clear of 0-2: a program that closed stdout would otherwise
     * print into the log, and later dup2 onto it would redirect the log. */
    if (fd < 3) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        if (moved < 0) {
            *reason = strerror_r(errno, why, whylen);
            return -1;
        }
        fd = moved;
    }
    jlog_dev = st.st_dev;
    jlog_ino = st.st_ino;
    return fd;
}

/* The slow path of the first emit: creates the log exactly once. Returns
 * the state after the attempt. */
static int jlog_open_once(void)
{
    char path[SETTINGS_PATH_MAX];
    char why[256];
    const char *reason = NULL;

    pthread_mutex_lock(&jlog_open_lock);
    int state = atomic_load_explicit(&jlog_state, memory_order_acquire);
    if (state != JLOG_UNOPENED) {
        pthread_mutex_unlock(&jlog_open_lock);
        return state;
    }
    if (jlog_to_stderr) {
        jlog_fd = 2;
        snprintf(jlog_opened, sizeof jlog_opened, "stderr");
        state = JLOG_OPEN;
    } else if (settings_expand_log_path(jlog_template, jlog_envp, (long)getpid(), path,
                                        sizeof path, why, sizeof why) != 0) {
        snprintf(path, sizeof path, "%s", jlog_template);
        reason = why;
        state = JLOG_FAILED;
    } else {
        int fd = jlog_open_file(path, &reason, why, sizeof why);
        if (fd >= 0) {
            jlog_fd = fd;
            snprintf(jlog_opened, sizeof jlog_opened, "%s", path);
            state = JLOG_OPEN;
        } else if (fd == -2) {
            state = JLOG_OFF;
        } else {
            state = JLOG_FAILED;
        }
    }
    atomic_store_explicit(&jlog_state, state, memory_order_release);
    pthread_mutex_unlock(&jlog_open_lock);
    if (state == JLOG_FAILED)
        jlog_report_failure(path, reason);
    return state;
}

/* ---- configuration ------------------------------------------------------------ */

void jlog_configure(const char *path_template, char *const *envp)
{
    int old = atomic_load_explicit(&jlog_state, memory_order_acquire);
    if (old == JLOG_OPEN && jlog_fd > 2)
        close(jlog_fd);
    jlog_fd = -1;
    jlog_opened[0] = '\0';
    if (path_template == NULL)
        path_template = SETTINGS_DEFAULT_LOG;

    int n = 0;
    const char *name;
    for (size_t i = 0; n < JLOG_RANK_VARS && (name = settings_rank_var(i)) != NULL; i++) {
        size_t name_len = strlen(name);
        for (char *const *e = envp; e != NULL && *e != NULL; e++) {
            if (strncmp(*e, name, name_len) == 0 && (*e)[name_len] == '=') {
                if (strlen(*e) < JLOG_RANK_ENTRY) {
                    snprintf(jlog_rank_env[n], JLOG_RANK_ENTRY, "%s", *e);
                    jlog_envp[n] = jlog_rank_env[n];
                    n++;
                }
                break;   /* first occurrence, as getenv */
            }
        }
    }
    jlog_envp[n] = NULL;

    int state;
    if (strcmp(path_template, "off") == 0 || path_template[0] == '\0') {
        jlog_to_stderr = 0;
        state = JLOG_OFF;
    } else {
        jlog_to_stderr = strcmp(path_template, "stderr") == 0;
        snprintf(jlog_template, sizeof jlog_template, "%s", path_template);
        state = JLOG_UNOPENED;
    }
    atomic_store_explicit(&jlog_state, state, memory_order_release);
}

int jlog_enabled(void)
{
    int state = atomic_load_explicit(&jlog_state, memory_order_acquire);
    return state == JLOG_UNOPENED || state == JLOG_OPEN;
}

const char *jlog_path(void)
{
    if (atomic_load_explicit(&jlog_state, memory_order_acquire) != JLOG_OPEN)
        return "";
    return jlog_opened;
}

void jlog_after_fork_child(void)
{
    /* The parent may have held the lock in another thread at fork time;
     * this child has only the forking thread, so a fresh lock is right. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    jlog_open_lock = fresh;
    int state = atomic_load_explicit(&jlog_state, memory_order_acquire);
    if (state == JLOG_OPEN) {
        if (jlog_fd > 2)
            close(jlog_fd);   /* the child's copy; the parent keeps its own */
        jlog_fd = -1;
        jlog_opened[0] = '\0';
        atomic_store_explicit(&jlog_state, JLOG_UNOPENED, memory_order_release);
    }
}

/* ---- building a line ---------------------------------------------------------- */

static int jlog_put(struct jlog_line *l, const char *s, size_t n)
{
    if (l->len + n > JLOG_LIMIT)
        return -1;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return 0;
}

/* Appends s as a JSON string. Each character goes in whole or not at all;
 * when `may_cut`, a string that does not fit is cut at a character
 * boundary and closed (returns 1), otherwise it is refused (returns -1). */
static int jlog_put_string(struct jlog_line *l, const char *s, int may_cut)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    if (l->len + 2 > JLOG_LIMIT)
        return -1;
    size_t start = l->len;
    l->buf[l->len++] = '"';
    for (size_t i = 0; i < n;) {
        char esc[8];
        const char *unit = esc;
        size_t unit_len;
        size_t consumed = 1;
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            unit_len = 2;
        } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f';
            unit_len = 2;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xf];
            unit_len = 6;
        } else if (c < 0x80) {
            unit = (const char *)u + i;
            unit_len = 1;
        } else {
            size_t seq = text_utf8_seq_len(u + i, n - i);
            if (seq == 0) {
                unit = "\\ufffd";     /* invalid byte: the replacement character */
                unit_len = 6;
            } else {
                unit = (const char *)u + i;
                unit_len = seq;
                consumed = seq;
            }
        }
        if (l->len + unit_len + 1 > JLOG_LIMIT) {
            if (!may_cut) {
                l->len = start;
                return -1;
            }
            l->buf[l->len++] = '"';
            return 1;
        }
        memcpy(l->buf + l->len, unit, unit_len);
        l->len += unit_len;
        i += consumed;
    }
    l->buf[l->len++] = '"';
    return 0;
}

static int jlog_in_array(const struct jlog_line *l)
{
    return l->depth > 0 && (l->nest_arrays >> (l->depth - 1) & 1u);
}

/* Starts one member: the comma and, inside an object, the key. Returns the
 * rollback point, or -1 (line already overflowed, or no room: the line is
 * then marked overflowed and left as it was). */
static long jlog_member(struct jlog_line *l, const char *key)
{
    if (l->overflow)
        return -1;
    size_t start = l->len;
    if (l->need_comma && jlog_put(l, ",", 1) != 0)
        goto full;
    if (!jlog_in_array(l)) {
        if (jlog_put_string(l, key ? key : "", 0) != 0 || jlog_put(l, ":", 1) != 0)
            goto full;
    }
    return (long)start;
full:
    l->len = start;
    l->overflow = 1;
    return -1;
}

static void jlog_rollback(struct jlog_line *l, long start)
{
    l->len = (size_t)start;
    l->overflow = 1;
}

static void jlog_literal(struct jlog_line *l, const char *key, const char *text, size_t n)
{
    long start = jlog_member(l, key);
    if (start < 0)
        return;
    if (jlog_put(l, text, n) != 0) {
        jlog_rollback(l, start);
        return;
    }
    l->need_comma = 1;
}

void jlog_line_begin(struct jlog_line *l, const char *event)
{
    l->len = 0;
    l->depth = 0;
    l->need_comma = 0;
    l->overflow = 0;
    l->nest_arrays = 0;
    l->buf[l->len++] = '{';
    jlog_str(l, "event", event);
    jlog_i64(l, "pid", (int64_t)getpid());
}

void jlog_str(struct jlog_line *l, const char *key, const char *value)
{
    if (value == NULL) {
        jlog_literal(l, key, "null", 4);
        return;
    }
    long start = jlog_member(l, key);
    if (start < 0)
        return;
    int rc = jlog_put_string(l, value, 1);
    if (rc < 0) {
        jlog_rollback(l, start);
        return;
    }
    if (rc > 0)
        l->overflow = 1;   /* kept, but cut: the line says so */
    l->need_comma = 1;
}

void jlog_u64(struct jlog_line *l, const char *key, uint64_t value)
{
    char digits[24];
    size_t i = sizeof digits;
    do {
        digits[--i] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    jlog_literal(l, key, digits + i, sizeof digits - i);
}

void jlog_i64(struct jlog_line *l, const char *key, int64_t value)
{
    char digits[24];
    size_t i = sizeof digits;
    uint64_t mag = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
    do {
        digits[--i] = (char)('0' + mag % 10);
        mag /= 10;
    } while (mag != 0);
    if (value < 0)
        digits[--i] = '-';
    jlog_literal(l, key, digits + i, sizeof digits - i);
}

void jlog_f64(struct jlog_line *l, const char *key, double value)
{
    if (!isfinite(value)) {
        jlog_literal(l, key, "null", 4);
        return;
    }
    char text[40];
    int n = snprintf(text, sizeof text, "%.15g", value);
    if (n <= 0 || (size_t)n >= sizeof text) {
        jlog_literal(l, key, "null", 4);
        return;
    }
    /* The program may have set a locale with another decimal separator
     * (possibly several bytes): whatever is not part of a JSON number
     * becomes one '.'. */
    size_t out = 0;
    for (int i = 0; i < n; i++) {
        char c = text[i];
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E')
            text[out++] = c;
        else if (out == 0 || text[out - 1] != '.')
            text[out++] = '.';
    }
    jlog_literal(l, key, text, out);
}

void jlog_bool(struct jlog_line *l, const char *key, int value)
{
    if (value)
        jlog_literal(l, key, "true", 4);
    else
        jlog_literal(l, key, "false", 5);
}

void jlog_site(struct jlog_line *l, const char *key, uint64_t site_id)
{
    char hex[SITE_ID_HEX_LEN + 1];
    site_id_format(site_id, hex);
    jlog_str(l, key, hex);
}

static void jlog_open_container(struct jlog_line *l, const char *key, int is_array)
{
    if (l->depth >= JLOG_MAX_NEST) {
        l->overflow = 1;
        return;
    }
    long start = jlog_member(l, key);
    if (start < 0)
        return;
    if (jlog_put(l, is_array ? "[" : "{", 1) != 0) {
        jlog_rollback(l, start);
        return;
    }
    l->depth++;
    if (is_array)
        l->nest_arrays |= 1u << (l->depth - 1);
    else
        l->nest_arrays &= ~(1u << (l->depth - 1));
    l->need_comma = 0;
}

static void jlog_close_container(struct jlog_line *l)
{
    /* After an overflow the open containers are closed by emit. */
    if (l->overflow || l->depth == 0)
        return;
    /* Always fits: JLOG_RESERVE holds one closer per open level. */
    l->buf[l->len++] = jlog_in_array(l) ? ']' : '}';
    l->depth--;
    l->need_comma = 1;
}

void jlog_array_begin(struct jlog_line *l, const char *key)
{
    jlog_open_container(l, key, 1);
}

void jlog_array_end(struct jlog_line *l)
{
    jlog_close_container(l);
}

void jlog_object_begin(struct jlog_line *l, const char *key)
{
    jlog_open_container(l, key, 0);
}

void jlog_object_end(struct jlog_line *l)
{
    jlog_close_container(l);
}

/* ---- writing ------------------------------------------------------------------ */

static void jlog_finish(struct jlog_line *l)
{
    while (l->depth > 0) {
        l->buf[l->len++] = jlog_in_array(l) ? ']' : '}';
        l->depth--;
    }
    if (l->overflow) {
        memcpy(l->buf + l->len, jlog_truncated, sizeof jlog_truncated - 1);
        l->len += sizeof jlog_truncated - 1;
    }
    l->buf[l->len++] = '}';
    l->buf[l->len++] = '\n';
}

/* Writes the whole buffer; 0, or an errno value. */
static int jlog_write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Marks the log failed; the thread that does so reports it. */
static void jlog_fail(const char *reason)
{
    int expected = JLOG_OPEN;
    if (atomic_compare_exchange_strong(&jlog_state, &expected, JLOG_FAILED) && !jlog_to_stderr)
        jlog_report_failure(jlog_opened, reason);
    /* The descriptor stays open: another thread may be writing to it, and
     * closing it would let its number be reused under that write. */
}

void jlog_line_emit(struct jlog_line *l)
{
    int state = atomic_load_explicit(&jlog_state, memory_order_acquire);
    if (state == JLOG_UNOPENED)
        state = jlog_open_once();
    if (state != JLOG_OPEN)
        return;
    jlog_finish(l);
    int fd = jlog_fd;
    if (!jlog_to_stderr) {
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_dev != jlog_dev || st.st_ino != jlog_ino) {
            jlog_fail("the program closed or replaced the log's descriptor");
            return;
        }
    }
    int err = jlog_write_all(fd, l->buf, l->len);
    if (err == EAGAIN && jlog_to_stderr)
        return;   /* a non-blocking stderr that is full loses this line only */
    if (err != 0) {
        char why[128];
        jlog_fail(strerror_r(err, why, sizeof why));
    }
}
