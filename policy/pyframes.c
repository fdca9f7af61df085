/*
 * pyframes.c - reading the capturing thread's Python frames (see pyframes.h).
 *
 * Layouts: the offsets below were taken from CPython's own headers of each
 * minor version (3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0: offsetof over
 * PyThreadState, PyFrameObject / _PyInterpreterFrame, PyCodeObject and the
 * compact string objects, 64-bit builds). These structures do not change
 * within a minor version. A reading that contradicts them (a code object
 * whose type is not PyCode_Type, an instruction offset outside its code)
 * switches the reader off for the process.
 *
 * Only these exported functions are called, none of which takes the GIL,
 * allocates or runs Python code: Py_IsInitialized, Py_GetVersion (once),
 * PyGILState_GetThisThreadState (a thread-specific-storage read),
 * PyGILState_Check, PyInterpreterState_Main, and PyCode_Addr2Line (decodes
 * the code object's immutable line table). Everything else is read from
 * memory: the thread's frames cannot change while it is inside recap.
 */
#include "policy/hash.h"
#include "policy/pyframes.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

/* ---- layouts ------------------------------------------------------------ */

enum py_family { PY_FRAMEOBJ, PY_IFRAME_311, PY_IFRAME_312, PY_IFRAME_313 };

struct py_layout {
    int minor;
    enum py_family family;
    size_t ts_interp;
    size_t ts_frame;           /* 3.9/3.10 frame; 3.11/3.12 cframe; 3.13 current_frame */
    size_t cframe_current;     /* 3.11/3.12: _PyCFrame.current_frame */
    size_t fr_back;            /* PyFrameObject.f_back / _PyInterpreterFrame.previous */
    size_t fr_code;            /* f_code / f_executable */
    size_t fr_instr;           /* f_lasti (int) / prev_instr / instr_ptr */
    size_t fr_owner;           /* _PyInterpreterFrame.owner (char); 0: none */
    int owner_cstack;          /* owner value of C-stack shim frames; -1: none */
    size_t co_filename, co_name, co_code;   /* co_code: co_code_adaptive */
    size_t str_ascii_size;     /* sizeof(PyASCIIObject): where compact ASCII data starts */
    size_t str_utf8_len, str_utf8;          /* PyCompactUnicodeObject */
};

static const struct py_layout py_layouts[] = {
    { 9, PY_FRAMEOBJ, 16, 24, 0, 24, 32, 104, 0, -1, 104, 112, 0, 48, 48, 56 },
    { 10, PY_FRAMEOBJ, 16, 24, 0, 24, 32, 96, 0, -1, 104, 112, 0, 48, 48, 56 },
    { 11, PY_IFRAME_311, 16, 56, 8, 48, 32, 56, 69, -1, 112, 120, 184, 48, 48, 56 },
    { 12, PY_IFRAME_312, 16, 56, 0, 8, 0, 56, 70, 3, 112, 120, 192, 40, 40, 48 },
    { 13, PY_IFRAME_313, 16, 72, 0, 8, 0, 56, 70, 3, 112, 120, 200, 40, 40, 48 },
};

/* PyObject: ob_refcnt, ob_type; PyVarObject adds ob_size (code units of a
 * code object from 3.11 on). PyASCIIObject: length at 16, state at 32. */
#define OB_TYPE 8
#define OB_SIZE 16
#define STR_LENGTH 16
#define STR_STATE 32
#define STR_COMPACT (1u << 5)
#define STR_ASCII (1u << 6)

#define PY_RAW_MAX 48              /* interpreter frames walked per capture */

/* ---- process-wide state, set once ---------------------------------------- */

typedef void *(*py_get_tstate_fn)(void);
typedef int (*py_check_fn)(void);
typedef void *(*py_main_interp_fn)(void);
typedef int (*py_addr2line_fn)(void *code, int byte_offset);
typedef const char *(*py_get_version_fn)(void);

static pyframes_lookup_fn py_lookup;
static char py_extra_skip[PYFRAMES_SKIP_TEXT_MAX];
static pthread_once_t py_once = PTHREAD_ONCE_INIT;
static _Atomic int py_enabled;     /* 1 after a successful discovery, 0 after any doubt */
static const struct py_layout *py;
static py_get_tstate_fn py_this_tstate;
static py_check_fn py_gil_check;
static py_main_interp_fn py_main_interp;
static py_addr2line_fn py_addr2line;
static const void *py_code_type, *py_str_type, *py_frame_type;
static char py_version_text[32];
static uintptr_t py_interp_base;
static char py_warning[256];
static _Atomic int py_warning_state;   /* 0 none, 1 pending, 2 taken */

struct py_fragment {
    const char *text;
    size_t len;
};

#define PY_FRAGMENT(s) { s, sizeof s - 1 }
static const struct py_fragment py_default_skip[] = {
    PY_FRAGMENT("torch"), PY_FRAGMENT("cupy"), PY_FRAGMENT("cupyx"),
    PY_FRAGMENT("cupy_backends"), PY_FRAGMENT("cuda/core"), PY_FRAGMENT("cuda/bindings"),
    PY_FRAGMENT("cuda/cudart.py"), PY_FRAGMENT("cuda/cuda.py"), PY_FRAGMENT("jax"),
    PY_FRAGMENT("jaxlib"), PY_FRAGMENT("contextlib.py"), PY_FRAGMENT("functools.py"),
    PY_FRAGMENT("<frozen"),
};

/* The configured extra fragments, split once at configure time. */
#define PY_EXTRA_SKIP_MAX 64
static struct py_fragment py_extra[PY_EXTRA_SKIP_MAX];
static int py_nextra;

static void py_disable(const char *fmt, const char *detail)
{
    int expected = 0;
    atomic_store_explicit(&py_enabled, 0, memory_order_release);
    if (atomic_compare_exchange_strong(&py_warning_state, &expected, 3)) {
        snprintf(py_warning, sizeof py_warning, fmt, detail ? detail : "");
        atomic_store_explicit(&py_warning_state, 1, memory_order_release);
    }
}

static void py_discover(void)
{
    if (py_lookup == NULL)
        return;
    int (*is_initialized)(void) = (int (*)(void))py_lookup("Py_IsInitialized");
    py_get_version_fn get_version = (py_get_version_fn)py_lookup("Py_GetVersion");
    if (is_initialized == NULL || get_version == NULL)
        return;                                  /* no Python in this process */
    const char *version = get_version();
    int major = 0, minor = 0, micro = 0;
    if (version == NULL || sscanf(version, "%d.%d.%d", &major, &minor, &micro) < 2)
        return;
    snprintf(py_version_text, sizeof py_version_text, "%d.%d.%d", major, minor, micro);
    if (strstr(version, "free-threading") != NULL || py_lookup("_Py_DecRefShared") != NULL) {
        py_disable("Python %s is a free-threaded build, whose frames recap does not read: "
                   "sites use C frames only", py_version_text);
        return;
    }
    if (py_lookup("_Py_PrintReferences") != NULL || sizeof(void *) != 8) {
        py_disable("Python %s is a build whose object layout recap does not know "
                   "(Py_TRACE_REFS or 32-bit): sites use C frames only", py_version_text);
        return;
    }
    for (size_t i = 0; i < sizeof py_layouts / sizeof py_layouts[0]; i++)
        if (major == 3 && py_layouts[i].minor == minor)
            py = &py_layouts[i];
    if (py == NULL) {
        py_disable("Python %s is not a version whose frames recap can read (3.9 to 3.13): "
                   "sites use C frames only", py_version_text);
        return;
    }
    py_this_tstate = (py_get_tstate_fn)py_lookup("PyGILState_GetThisThreadState");
    py_gil_check = (py_check_fn)py_lookup("PyGILState_Check");
    py_main_interp = (py_main_interp_fn)py_lookup("PyInterpreterState_Main");
    py_addr2line = (py_addr2line_fn)py_lookup("PyCode_Addr2Line");
    py_code_type = py_lookup("PyCode_Type");
    py_str_type = py_lookup("PyUnicode_Type");
    py_frame_type = py_lookup("PyFrame_Type");
    if (!py_this_tstate || !py_gil_check || !py_main_interp || !py_addr2line ||
        !py_code_type || !py_str_type || (py->family == PY_FRAMEOBJ && !py_frame_type)) {
        py_disable("Python %s lacks a function recap reads frames with: sites use C frames "
                   "only", py_version_text);
        return;
    }
    Dl_info info;
    if (dladdr((void *)is_initialized, &info))   /* the module of the interpreter loop */
        py_interp_base = (uintptr_t)info.dli_fbase;
    if (!is_initialized())
        return;
    atomic_store_explicit(&py_enabled, 1, memory_order_release);
}

/* ---- skip list ------------------------------------------------------------ */

/* `entry` names a path fragment; it matches a file at component
 * boundaries: the whole name, a leading "entry/", a trailing "/entry", or
 * "/entry/" inside. "<frozen" matches the frozen modules' pseudo-names.
 * starts[] holds where the file's components begin (found once per file). */
#define PY_COMPONENTS_MAX 64

static int py_fragment_matches(const char *file, size_t flen, const size_t *starts, int nstarts,
                               const char *entry, size_t elen)
{
    if (elen == 0 || elen > flen)
        return 0;
    if (entry[0] == '<')
        return memcmp(file, entry, elen) == 0;
    for (int i = 0; i < nstarts; i++) {
        size_t at = starts[i];
        if (file[at] == entry[0] && at + elen <= flen && memcmp(file + at, entry, elen) == 0 &&
            (at + elen == flen || file[at + elen] == '/'))
            return 1;
    }
    return 0;
}

int pyframes_skipped(const char *file)
{
    size_t starts[PY_COMPONENTS_MAX];
    int nstarts = 0;
    size_t flen = 0;
    for (; file[flen] != '\0'; flen++)
        if ((flen == 0 || file[flen - 1] == '/') && nstarts < PY_COMPONENTS_MAX)
            starts[nstarts++] = flen;
    for (size_t i = 0; i < sizeof py_default_skip / sizeof py_default_skip[0]; i++)
        if (py_fragment_matches(file, flen, starts, nstarts, py_default_skip[i].text,
                                py_default_skip[i].len))
            return 1;
    for (int i = 0; i < py_nextra; i++)
        if (py_fragment_matches(file, flen, starts, nstarts, py_extra[i].text, py_extra[i].len))
            return 1;
    return 0;
}

/* ---- reading -------------------------------------------------------------- */

static inline const void *py_ptr(const void *base, size_t offset)
{
    return *(const void *const *)((const char *)base + offset);
}

static inline int py_type_is(const void *obj, const void *type)
{
    return obj != NULL && ((uintptr_t)obj & 7) == 0 && py_ptr(obj, OB_TYPE) == type;
}

/* Copies a str object as UTF-8 into out. Strings that are neither compact
 * ASCII nor carry a cached UTF-8 copy read as "?": never converted, since
 * that would allocate. Returns -1 when obj is not a str. */
static int py_read_str(const void *obj, char *out, size_t outlen)
{
    if (!py_type_is(obj, py_str_type))
        return -1;
    const char *base = obj;
    uint32_t state = *(const uint32_t *)(base + STR_STATE);
    const char *data = NULL;
    size_t len = 0;
    if ((state & STR_COMPACT) && (state & STR_ASCII)) {
        data = base + py->str_ascii_size;
        len = (size_t)*(const int64_t *)(base + STR_LENGTH);
    } else if (state & STR_COMPACT) {
        data = py_ptr(obj, py->str_utf8);
        len = (size_t)*(const int64_t *)(base + py->str_utf8_len);
    }
    if (data == NULL) {
        data = "?";
        len = 1;
    }
    if (len >= outlen)
        len = outlen - 1;
    memcpy(out, data, len);
    out[len] = '\0';
    return 0;
}

/* One interpreter frame, decoded only as far as the memo needs. */
struct py_raw {
    const void *code;        /* NULL: a frame that is not Python code */
    intptr_t instr;          /* f_lasti or the instruction pointer */
    int offset;              /* byte offset of the current instruction; -1 unknown */
};

static const void *py_first_frame(const void *tstate)
{
    switch (py->family) {
    case PY_FRAMEOBJ:
    case PY_IFRAME_313:
        return py_ptr(tstate, py->ts_frame);
    default: {
        const void *cframe = py_ptr(tstate, py->ts_frame);
        return cframe ? py_ptr(cframe, py->cframe_current) : NULL;
    }
    }
}

/* Decodes frame f into *r; returns the next (outer) frame, or NULL at the
 * end. Sets *bad on a reading that contradicts the layout. */
static const void *py_decode(const void *f, struct py_raw *r, int *bad)
{
    r->code = NULL;
    r->instr = 0;
    r->offset = -1;
    if (((uintptr_t)f & 7) != 0) {
        *bad = 1;
        return NULL;
    }
    const void *next = py_ptr(f, py->fr_back);
    const void *code = py_ptr(f, py->fr_code);
    if (py->family == PY_FRAMEOBJ) {
        if (!py_type_is(f, py_frame_type) || !py_type_is(code, py_code_type)) {
            *bad = 1;
            return NULL;
        }
        int lasti = *(const int *)((const char *)f + py->fr_instr);
        r->code = code;
        r->instr = lasti;
        r->offset = lasti < 0 ? -1 : py->minor == 9 ? lasti : lasti * 2;
        return next;
    }
    if (py->owner_cstack >= 0 &&
        *(const unsigned char *)((const char *)f + py->fr_owner) == (unsigned)py->owner_cstack)
        return next;                             /* the C stack's entry shim frame */
    if (!py_type_is(code, py_code_type)) {
        if (py->family == PY_IFRAME_313)
            return next;                         /* f_executable may be another object */
        *bad = 1;
        return NULL;
    }
    const char *instr = py_ptr(f, py->fr_instr);
    const char *start = (const char *)code + py->co_code;
    intptr_t units = *(const intptr_t *)((const char *)code + OB_SIZE);
    intptr_t index = (instr - start) / 2;        /* _Py_CODEUNIT is 2 bytes */
    r->code = code;
    r->instr = (intptr_t)instr;
    if (index < -1 || index > units) {
        *bad = 1;
        return NULL;
    }
    r->offset = index < 0 ? -1 : (int)(index * 2);
    return next;
}

/* ---- the memo --------------------------------------------------------------- */

/* Stacks remembered per thread: a loop capturing at more call sites than
 * this would miss every time (a miss costs a few microseconds: the skip
 * list and the line tables). About 2.3 KB each, allocated at the thread's
 * first capture. */
#define PY_MEMO_ENTRIES 16

struct py_memo_entry {
    int used;
    int depth_asked;
    int nraw;                  /* raw frames the result depends on */
    int ended;                 /* the chain ended after them */
    struct { const void *code; intptr_t instr; } key[PY_RAW_MAX];
    struct pyframes result;
};

struct py_memo {
    unsigned next;
    unsigned long hits, misses;
    struct py_memo_entry e[PY_MEMO_ENTRIES];
};

static pthread_key_t py_memo_key;
static pthread_once_t py_memo_once = PTHREAD_ONCE_INIT;
static __thread struct py_memo *py_memo;

static void py_memo_free(void *memo)
{
    free(memo);
}

static void py_memo_key_init(void)
{
    if (pthread_key_create(&py_memo_key, py_memo_free) != 0)
        py_memo_key = (pthread_key_t)-1;
}

static struct py_memo *py_thread_memo(void)
{
    if (py_memo == NULL) {
        pthread_once(&py_memo_once, py_memo_key_init);
        py_memo = calloc(1, sizeof *py_memo);
        if (py_memo != NULL && py_memo_key != (pthread_key_t)-1)
            pthread_setspecific(py_memo_key, py_memo);
    }
    return py_memo;
}

static int py_memo_match(const struct py_memo_entry *e, const void *frame, int depth)
{
    if (!e->used || e->depth_asked != depth)
        return 0;
    int bad = 0;
    struct py_raw r;
    for (int i = 0; i < e->nraw; i++) {
        if (frame == NULL)
            return 0;
        frame = py_decode(frame, &r, &bad);
        if (bad || r.code != e->key[i].code || r.instr != e->key[i].instr)
            return 0;
    }
    return !e->ended || frame == NULL;
}

/* ---- hashing ------------------------------------------------------------------ */


/* The file's base name: how the script was started (python x.py, python
 * /abs/x.py, from another directory) must not change the site. */
static uint64_t py_frame_hash(const struct pyframe *f)
{
    const char *slash = strrchr(f->file, '/');
    const char *base = slash ? slash + 1 : f->file;
    unsigned char line[4];
    for (int i = 0; i < 4; i++)
        line[i] = (unsigned char)((unsigned)f->line >> (8 * i));
    uint64_t h = hash_fnv1a(HASH_FNV_OFFSET, base, strlen(base) + 1);
    h = hash_fnv1a(h, f->function, strlen(f->function) + 1);
    return hash_mix64(hash_fnv1a(h, line, sizeof line));
}

/* ---- public ----------------------------------------------------------------------- */

void pyframes_configure(pyframes_lookup_fn lookup, const char *extra_skip)
{
    if (py_lookup != NULL)
        return;
    snprintf(py_extra_skip, sizeof py_extra_skip, "%s", extra_skip ? extra_skip : "");
    py_nextra = 0;
    for (const char *p = py_extra_skip; *p != '\0' && py_nextra < PY_EXTRA_SKIP_MAX;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *e = p;
        while (n > 0 && (*e == ' ' || *e == '\t'))
            e++, n--;
        while (n > 0 && (e[n - 1] == ' ' || e[n - 1] == '\t'))
            n--;
        if (n > 0)
            py_extra[py_nextra++] = (struct py_fragment){ e, n };
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    py_lookup = lookup;
}

/* The walk that fills a memo entry: raw frames in order, program frames
 * kept until `depth` of them. */
static int py_walk(const void *frame, int depth, struct py_memo_entry *e)
{
    int bad = 0;
    struct py_raw r;
    struct pyframes *out = &e->result;
    out->n = 0;
    e->nraw = 0;
    e->ended = 0;
    while (frame != NULL && out->n < depth) {
        if (e->nraw == PY_RAW_MAX)
            return 0;                            /* deep enough: what was kept stands */
        frame = py_decode(frame, &r, &bad);
        if (bad)
            return -1;
        e->key[e->nraw].code = r.code;
        e->key[e->nraw].instr = r.instr;
        e->nraw++;
        if (r.code == NULL || r.offset < 0)
            continue;
        struct pyframe *pf = &out->frame[out->n];
        if (py_read_str(py_ptr(r.code, py->co_filename), pf->file, sizeof pf->file) != 0 ||
            py_read_str(py_ptr(r.code, py->co_name), pf->function, sizeof pf->function) != 0)
            return -1;
        if (pyframes_skipped(pf->file))
            continue;
        pf->line = py_addr2line((void *)r.code, r.offset);
        out->n++;
    }
    e->ended = frame == NULL;
    return 0;
}

const struct pyframes *pyframes_current(int depth)
{
    pthread_once(&py_once, py_discover);
    if (!atomic_load_explicit(&py_enabled, memory_order_acquire))
        return NULL;
    if (depth < 1)
        depth = 1;
    if (depth > PYFRAMES_MAX)
        depth = PYFRAMES_MAX;
    const void *tstate = py_this_tstate();
    if (tstate == NULL)
        return NULL;                             /* this thread never ran Python */
    if (py_ptr(tstate, py->ts_interp) != py_main_interp()) {
        py_disable("a capture began in a Python sub-interpreter, whose frames recap does not "
                   "read: sites use C frames only%s", NULL);
        return NULL;
    }
    const void *first = py_first_frame(tstate);
    if (first == NULL)
        return NULL;
    struct py_memo *memo = py_thread_memo();
    if (memo == NULL)
        return NULL;
    enum pyframes_gil gil = py_gil_check() ? PYFRAMES_GIL_HELD : PYFRAMES_GIL_RELEASED;

    for (unsigned k = 0; k < PY_MEMO_ENTRIES; k++) {
        struct py_memo_entry *e = &memo->e[(memo->next + PY_MEMO_ENTRIES - 1 - k) % PY_MEMO_ENTRIES];
        if (py_memo_match(e, first, depth)) {
            memo->hits++;
            e->result.gil = gil;
            return &e->result;
        }
    }
    memo->misses++;
    struct py_memo_entry *e = &memo->e[memo->next % PY_MEMO_ENTRIES];
    e->used = 0;
    if (py_walk(first, depth, e) != 0) {
        py_disable("a Python frame of version %s did not look as expected: sites use C "
                   "frames only", py_version_text);
        return NULL;
    }
    memo->next++;
    e->used = 1;
    e->depth_asked = depth;
    e->result.gil = gil;
    uint64_t h = HASH_FNV_OFFSET;
    for (int i = 0; i < e->result.n; i++)
        h = hash_mix64((h ^ py_frame_hash(&e->result.frame[i])) * HASH_FNV_PRIME + (uint64_t)i);
    e->result.hash = e->result.n > 0 ? (h ? h : 1) : 0;
    return &e->result;
}

const char *pyframes_version(void)
{
    pthread_once(&py_once, py_discover);
    return py_version_text[0] ? py_version_text : NULL;
}

const char *pyframes_take_warning(void)
{
    int expected = 1;
    if (atomic_load_explicit(&py_warning_state, memory_order_acquire) != 1)
        return NULL;
    if (!atomic_compare_exchange_strong(&py_warning_state, &expected, 2))
        return NULL;
    return py_warning;
}

uintptr_t pyframes_interpreter_base(void)
{
    pthread_once(&py_once, py_discover);
    return py_interp_base;
}

void pyframes_memo_stats(unsigned long *hits, unsigned long *misses)
{
    *hits = py_memo ? py_memo->hits : 0;
    *misses = py_memo ? py_memo->misses : 0;
}

void pyframes_memo_clear(void)
{
    if (py_memo != NULL)
        for (unsigned k = 0; k < PY_MEMO_ENTRIES; k++)
            py_memo->e[k].used = 0;
}
