/*
 * standin_core.c - the stand-in's process state and the entry protocol.
 *
 * Owns: the global state and its lock, the knobs (environment and standin_*
 * setters), per-name call counters, fault injection, misuse accounting, the
 * handle registry, the exit report, error names and strings, cuGetExportTable.
 * Must never: model a driver object's behaviour (the other files do), or let
 * an exported function touch state without going through si_enter.
 */
#include "standin_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct si_state si;
__thread struct si_thread si_tls;

const char *const si_fn_names[SI_FN_COUNT] = {
#define SI_FN(sym, base, abi, flavour) [SI_FN_##sym] = #sym,
#include "standin_exports.def"
};

/* ------------------------------------------------------------------ */
/* Containers and allocation.                                          */

void *si_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fputs("standin: out of host memory\n", stderr);
        abort();
    }
    return p;
}

char *si_strdup(const char *s)
{
    size_t len = strlen(s) + 1;
    char *d = si_calloc(1, len);
    memcpy(d, s, len);
    return d;
}

int si_vec_push(struct si_vec *vec, void *item)
{
    if (vec->n == vec->cap) {
        size_t cap = vec->cap ? vec->cap * 2 : 4;
        void **v = realloc(vec->v, cap * sizeof(*v));
        if (!v) abort();
        vec->v = v;
        vec->cap = cap;
    }
    vec->v[vec->n++] = item;
    return 0;
}

bool si_vec_contains(const struct si_vec *vec, const void *item)
{
    for (size_t i = 0; i < vec->n; i++)
        if (vec->v[i] == item) return true;
    return false;
}

bool si_vec_remove(struct si_vec *vec, const void *item)
{
    for (size_t i = 0; i < vec->n; i++) {
        if (vec->v[i] != item) continue;
        memmove(&vec->v[i], &vec->v[i + 1], (vec->n - i - 1) * sizeof(void *));
        vec->n--;
        return true;
    }
    return false;
}

int si_vec_copy(struct si_vec *dst, const struct si_vec *src)
{
    dst->n = 0;
    for (size_t i = 0; i < src->n; i++) si_vec_push(dst, src->v[i]);
    return 0;
}

void si_vec_free(struct si_vec *vec)
{
    free(vec->v);
    vec->v = NULL;
    vec->n = vec->cap = 0;
}

bool si_vec_same_set(const struct si_vec *a, const struct si_vec *b)
{
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (!si_vec_contains(b, a->v[i])) return false;
    return true;
}

/* ------------------------------------------------------------------ */
/* Handle registry: an open-addressing set of every object header ever  */
/* created. Headers are never freed, so membership makes a dereference  */
/* safe.                                                                */

static struct {
    const void **slots;
    size_t cap, n;
} registry;

static size_t registry_hash(const void *p, size_t cap)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 7) & (cap - 1);
}

static void registry_insert(const void *p)
{
    if (2 * (registry.n + 1) > registry.cap) {
        size_t cap = registry.cap ? registry.cap * 2 : 1024;
        const void **slots = si_calloc(cap, sizeof(*slots));
        for (size_t i = 0; i < registry.cap; i++) {
            if (!registry.slots[i]) continue;
            size_t h = registry_hash(registry.slots[i], cap);
            while (slots[h]) h = (h + 1) & (cap - 1);
            slots[h] = registry.slots[i];
        }
        free(registry.slots);
        registry.slots = slots;
        registry.cap = cap;
    }
    size_t h = registry_hash(p, registry.cap);
    while (registry.slots[h]) h = (h + 1) & (registry.cap - 1);
    registry.slots[h] = p;
    registry.n++;
}

static bool registry_has(const void *p)
{
    if (!registry.cap) return false;
    size_t h = registry_hash(p, registry.cap);
    while (registry.slots[h]) {
        if (registry.slots[h] == p) return true;
        h = (h + 1) & (registry.cap - 1);
    }
    return false;
}

static const char *const kind_names[SI_KIND_COUNT] = {
    [SI_CONTEXT] = "context", [SI_STREAM] = "stream", [SI_EVENT] = "event",
    [SI_MODULE] = "module", [SI_LIBRARY] = "library", [SI_FUNCTION] = "function",
    [SI_KERNEL] = "kernel", [SI_GRAPH] = "graph", [SI_NODE] = "node",
    [SI_EXEC] = "exec", [SI_USER_OBJECT] = "user_object",
};

/* The code the real driver documents for a bad handle of each kind. */
static CUresult bad_handle_code(enum si_kind kind)
{
    switch (kind) {
    case SI_CONTEXT: return CUDA_ERROR_INVALID_CONTEXT;
    case SI_STREAM: case SI_EVENT: case SI_MODULE: case SI_LIBRARY:
    case SI_FUNCTION: case SI_KERNEL: return CUDA_ERROR_INVALID_HANDLE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

void si_registry_collect(enum si_kind kind, struct si_vec *out)
{
    for (size_t i = 0; i < registry.cap; i++) {
        const struct si_obj *o = registry.slots[i];
        if (o && o->kind == kind && o->state != SI_DEAD) si_vec_push(out, (void *)o);
    }
}

void si_obj_init(void *obj, enum si_kind kind)
{
    struct si_obj *o = obj;
    o->kind = (uint16_t)kind;
    o->state = SI_LIVE;
    registry_insert(o);
    si.live[kind]++;
}

void si_obj_kill(void *obj)
{
    struct si_obj *o = obj;
    if (o->state != SI_DEAD) si.live[o->kind]--;
    o->state = SI_DEAD;
}

CUresult si_get(const void *handle, enum si_kind kind, void *out)
{
    const struct si_obj *o = handle;
    if (!o || !registry_has(o) || o->kind != kind) return bad_handle_code(kind);
    if (o->state == SI_DEAD) {
        /* Loud: on a GPU this is a use after free inside the driver. */
        si_violation("use of a destroyed %s (%p)", kind_names[kind], handle);
        return bad_handle_code(kind);
    }
    if (o->state == SI_POISONED) {
        si_misuse("use of a %s left undefined by a failed recapture (%p)", kind_names[kind],
                  handle);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (kind == SI_NODE) {
        const struct si_node *n = handle;
        if (n->graph->h.state == SI_POISONED) {
            si_misuse("use of a node of a graph left undefined by a failed recapture (%p)",
                      handle);
            return CUDA_ERROR_ILLEGAL_STATE;
        }
    }
    *(const void **)out = handle;
    return CUDA_SUCCESS;
}

CUresult si_get_any(const void *handle, enum si_kind kind, void *out)
{
    const struct si_obj *o = handle;
    if (!o || !registry_has(o) || o->kind != kind) return bad_handle_code(kind);
    *(const void **)out = handle;
    return CUDA_SUCCESS;
}

CUresult si_get_func(const void *handle, struct si_function **out)
{
    const struct si_obj *o = handle;
    if (o && registry_has(o) && o->kind == SI_KERNEL) return si_get(handle, SI_KERNEL, out);
    return si_get(handle, SI_FUNCTION, out);
}

/* ------------------------------------------------------------------ */
/* Misuse, user code.                                                  */

void si_misuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(si.last_misuse, sizeof(si.last_misuse), fmt, ap);
    va_end(ap);
    si.misuses++;
}

/* A stream worker runs user code without si.lock, as a GPU runs kernels
 * and host functions while the program goes on making driver calls. */
void si_user_code_begin(const char *what)
{
    if (si_tls.user_code_depth++ == 0 && si_tls.worker) pthread_mutex_unlock(&si.lock);
    si_tls.user_code_what = what;
}

void si_user_code_end(void)
{
    if (--si_tls.user_code_depth == 0 && si_tls.worker) pthread_mutex_lock(&si.lock);
}

unsigned long si_next_visit(void)
{
    static unsigned long visit;
    return ++visit;
}

double si_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ */
/* Errors.                                                             */

static const struct {
    CUresult code;
    const char *name, *text;
} error_table[] = {
#define SI_ERR(name, value, text) {(CUresult)(value), #name, text},
#include "standin_errors.def"
};

static int error_index(CUresult code)
{
    for (size_t i = 0; i < SI_ARRAY_LEN(error_table); i++)
        if (error_table[i].code == code) return (int)i;
    return -1;
}

static bool parse_error_code(const char *s, CUresult *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (*s && !*end && !errno) {
        *out = (CUresult)v;
        return true;
    }
    for (size_t i = 0; i < SI_ARRAY_LEN(error_table); i++) {
        if (strcmp(error_table[i].name, s) == 0) {
            *out = error_table[i].code;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* Knobs, faults and the exit report.                                   */

static int fn_index(const char *name)
{
    for (int i = 0; i < SI_FN_COUNT; i++)
        if (strcmp(si_fn_names[i], name) == 0) return i;
    return -1;
}

static void add_fault(enum si_fn_id fn, unsigned long at, bool persist, CUresult code)
{
    struct si_fault *f = si_calloc(1, sizeof(*f));
    f->fn = fn;
    f->at = at;
    f->persist = persist;
    f->code = code;
    f->next = si.faults;
    si.faults = f;
}

/* STANDIN_FAULTS: NAME@N=CODE or NAME@N+=CODE, comma separated. */
static void parse_faults(const char *spec)
{
    char *copy = si_strdup(spec), *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *at = strchr(item, '@'), *eq = at ? strchr(at, '=') : NULL;
        bool persist = eq && eq > at + 1 && eq[-1] == '+';
        CUresult code;
        if (!at || !eq) goto bad;
        *at = '\0';
        *eq = '\0';
        if (persist) eq[-1] = '\0';
        int fn = fn_index(item);
        char *end;
        unsigned long nth = strtoul(at + 1, &end, 10);
        if (fn < 0 || *end || nth == 0 || !parse_error_code(eq + 1, &code)) goto bad;
        add_fault((enum si_fn_id)fn, nth, persist, code);
        continue;
    bad:
        fprintf(stderr, "standin: STANDIN_FAULTS: ignoring malformed entry\n");
    }
    free(copy);
}

static int parse_surface(const char *where, enum si_surface *out)
{
    static const char *const names[] = {"call", "later", "end"};
    for (int i = 0; where && i < 3; i++) {
        if (strcmp(where, names[i]) == 0) {
            *out = (enum si_surface)i;
            return 0;
        }
    }
    return -1;
}

static size_t parse_bytes(const char *s, size_t fallback)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    return (*s && !*end) ? (size_t)v : fallback;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void write_report(void)
{
    if (!si.report_path) return;
    pthread_mutex_lock(&si.lock);
    FILE *f = fopen(si.report_path, "w");
    if (f) {
        const char *sep = "";
        fputs("{\"calls\": {", f);
        for (int i = 0; i < SI_FN_COUNT; i++) {
            if (!si.calls[i]) continue;
            fprintf(f, "%s\"%s\": %lu", sep, si_fn_names[i], si.calls[i]);
            sep = ", ";
        }
        fputs("}, \"live\": {", f);
        sep = "";
        for (int k = 1; k < SI_KIND_COUNT; k++) {
            fprintf(f, "%s\"%s\": %ld", sep, kind_names[k], si.live[k]);
            sep = ", ";
        }
        fprintf(f, ", \"memory\": %ld}, \"misuses\": %lu, \"last_misuse\": ", si.live_memory,
                si.misuses);
        json_string(f, si.last_misuse);
        fputs("}\n", f);
        fclose(f);
    }
    pthread_mutex_unlock(&si.lock);
}

static void state_setup(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&si.lock, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(&si.progress, NULL);

    const char *v;
    si.driver_version = 13030;
    si.null_callback_accepted = true;
    si.capacity = (size_t)1 << 30;
    si.next_capture_id = 1;
    si.next_cond_handle = 1;
    if ((v = getenv("STANDIN_DRIVER_VERSION")) && *v) si.driver_version = atoi(v);
    if ((v = getenv("STANDIN_CLONE_SHARES"))) si.clone_shares_params = *v && strcmp(v, "0") != 0;
    if ((v = getenv("STANDIN_EXEC_NODES")) && *v) {
        si.exec_nodes_follow_update = strcmp(v, "updated") == 0;
        if (!si.exec_nodes_follow_update && strcmp(v, "instantiated") != 0)
            fprintf(stderr, "standin: STANDIN_EXEC_NODES=%s is not instantiated|updated\n", v);
    }
    if ((v = getenv("STANDIN_UPDATE_FREED")) && *v) {
        si.update_freed_accepted = strcmp(v, "accept") == 0;
        if (!si.update_freed_accepted && strcmp(v, "refuse") != 0)
            fprintf(stderr, "standin: STANDIN_UPDATE_FREED=%s is not refuse|accept\n", v);
    }
    if ((v = getenv("STANDIN_RECAPTURE_FAILURE")) && parse_surface(v, &si.surface) != 0)
        fprintf(stderr, "standin: STANDIN_RECAPTURE_FAILURE=%s is not call|later|end\n", v);
    if ((v = getenv("STANDIN_NULL_CALLBACK"))) si.null_callback_accepted = strcmp(v, "reject") != 0;
    if ((v = getenv("STANDIN_RECAPTURE_CALLBACK")) && *v) {
        si.callback_every_node = strcmp(v, "every") == 0;
        if (!si.callback_every_node && strcmp(v, "changed") != 0)
            fprintf(stderr, "standin: STANDIN_RECAPTURE_CALLBACK=%s is not changed|every\n", v);
    }
    if ((v = getenv("STANDIN_UNLOADED_CODE")) && *v) {
        si.unloaded_code_refused = strcmp(v, "refuse") == 0;
        if (!si.unloaded_code_refused && strcmp(v, "tolerate") != 0)
            fprintf(stderr, "standin: STANDIN_UNLOADED_CODE=%s is not tolerate|refuse\n", v);
    }
    if ((v = getenv("STANDIN_RECAPTURE_ERROR_NODE"))) si.error_node = strtoul(v, NULL, 10);
    if ((v = getenv("STANDIN_DEVICE_MEMORY"))) si.capacity = parse_bytes(v, si.capacity);
    if ((v = getenv("STANDIN_FAULTS"))) parse_faults(v);
    if ((v = getenv("STANDIN_ASYNC"))) si.async = *v && strcmp(v, "0") != 0;
    if ((v = getenv("STANDIN_REPORT")) && *v) {
        si.report_path = si_strdup(v);
        atexit(write_report);
    }
}

static pthread_once_t state_once = PTHREAD_ONCE_INIT;

void si_control_lock(void)
{
    pthread_once(&state_once, state_setup);
    pthread_mutex_lock(&si.lock);
}

void si_control_unlock(void)
{
    pthread_mutex_unlock(&si.lock);
}

int si_enter(enum si_fn_id fn, bool needs_init, CUresult *early)
{
    si_control_lock();
    unsigned long n = ++si.calls[fn];
    for (struct si_fault *f = si.faults; f; f = f->next) {
        if (f->fn == fn && (n == f->at || (f->persist && n > f->at))) {
            *early = f->code;
            si_control_unlock();
            return 1;
        }
    }
    if (si_tls.user_code_depth > 0) {
        si_misuse("%s called from inside %s", si_fn_names[fn], si_tls.user_code_what);
        *early = CUDA_ERROR_NOT_PERMITTED;
        si_control_unlock();
        return 1;
    }
    if (needs_init && !si.initialized) {
        *early = CUDA_ERROR_NOT_INITIALIZED;
        si_control_unlock();
        return 1;
    }
    return 0;
}

CUresult si_leave(CUresult rc)
{
    si_control_unlock();
    return rc;
}

/* ------------------------------------------------------------------ */
/* The control API (standin.h).                                        */

SI_EXPORT unsigned long standin_call_count(const char *name)
{
    si_control_lock();
    int i = name ? fn_index(name) : -1;
    unsigned long n = i >= 0 ? si.calls[i] : 0;
    si_control_unlock();
    return n;
}

SI_EXPORT size_t standin_call_row(size_t i, const char **name, unsigned long *count)
{
    if (i < SI_FN_COUNT) {
        si_control_lock();
        if (name) *name = si_fn_names[i];
        if (count) *count = si.calls[i];
        si_control_unlock();
    }
    return SI_FN_COUNT;
}

SI_EXPORT void standin_reset_counts(void)
{
    si_control_lock();
    memset(si.calls, 0, sizeof(si.calls));
    si_control_unlock();
}

SI_EXPORT long standin_live_objects(const char *kind)
{
    long n = 0;
    si_control_lock();
    if (kind && strcmp(kind, "memory") == 0) n = si.live_memory;
    if (kind && strcmp(kind, "cond_handle") == 0) n = (long)si.cond_handles.n;
    for (int k = 1; kind && k < SI_KIND_COUNT; k++)
        if (strcmp(kind, kind_names[k]) == 0) n = si.live[k];
    si_control_unlock();
    return n;
}

SI_EXPORT unsigned long standin_misuse_count(void)
{
    si_control_lock();
    unsigned long n = si.misuses;
    si_control_unlock();
    return n;
}

SI_EXPORT const char *standin_last_misuse(void)
{
    return si.last_misuse;
}

SI_EXPORT void standin_fault(const char *name, unsigned long nth, CUresult code, int persist)
{
    si_control_lock();
    int i = name ? fn_index(name) : -1;
    if (i >= 0 && nth > 0) add_fault((enum si_fn_id)i, si.calls[i] + nth, persist != 0, code);
    else fprintf(stderr, "standin: standin_fault: unknown function %s\n", name ? name : "(null)");
    si_control_unlock();
}

SI_EXPORT void standin_clear_faults(void)
{
    si_control_lock();
    while (si.faults) {
        struct si_fault *f = si.faults;
        si.faults = f->next;
        free(f);
    }
    si_control_unlock();
}

SI_EXPORT void standin_set_driver_version(int version)
{
    si_control_lock();
    si.driver_version = version;
    si_control_unlock();
}

SI_EXPORT int standin_set_recapture_failure(const char *where)
{
    si_control_lock();
    int rc = parse_surface(where, &si.surface);
    si_control_unlock();
    return rc;
}

SI_EXPORT void standin_set_null_callback_accepted(int accepted)
{
    si_control_lock();
    si.null_callback_accepted = accepted != 0;
    si_control_unlock();
}

SI_EXPORT void standin_set_recapture_error_node(unsigned long nth)
{
    si_control_lock();
    si.error_node = nth;
    si_control_unlock();
}

SI_EXPORT void standin_set_device_memory(size_t bytes)
{
    si_control_lock();
    si.capacity = bytes;
    si_control_unlock();
}

SI_EXPORT size_t standin_device_memory_used(void)
{
    si_control_lock();
    size_t n = si.used;
    si_control_unlock();
    return n;
}

/* ------------------------------------------------------------------ */
/* Exported: errors, export table.                                     */

SI_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    SI_ENTER_AS(cuGetErrorName, false);
    int i = error_index(error);
    if (!pStr) return si_leave(CUDA_ERROR_INVALID_VALUE);
    *pStr = i >= 0 ? error_table[i].name : NULL;
    return si_leave(i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

SI_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    SI_ENTER_AS(cuGetErrorString, false);
    int i = error_index(error);
    if (!pStr) return si_leave(CUDA_ERROR_INVALID_VALUE);
    *pStr = i >= 0 ? error_table[i].text : NULL;
    return si_leave(i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* The runtime's private channel: the stand-in has none to offer. */
SI_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    SI_ENTER_AS(cuGetExportTable, false);
    return si_leave(CUDA_ERROR_NOT_SUPPORTED);
}
