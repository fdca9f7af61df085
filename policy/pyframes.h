/*
 * pyframes.h - the Python call stack of the capturing thread (module prefix
 * pyframes_).
 *
 * Owns: finding CPython in the process at run time (its exported symbols,
 * looked up through a function the caller supplies; recap never links
 * libpython and needs no Python headers), reading the calling thread's
 * frame chain directly from memory for the versions whose layouts it knows
 * (3.9 to 3.13, default GIL builds, the main interpreter), keeping the
 * innermost frames that belong to the program rather than to a binding
 * (the skip list), and a per-thread memo so that a capture from a stack
 * seen before costs a pointer walk, not a line-table decode.
 *
 * Must never: take the GIL, call into Python other than the pure exported
 * readers named in pyframes.c, allocate a Python object, write to Python
 * memory, or print. Works the same whether the GIL is held (ctypes.PyDLL)
 * or released (PyTorch, CuPy, cuda.bindings, ctypes.CDLL): the thread's
 * own frames cannot change while it is inside recap. Anything unexpected
 * disables the reader for the process, with one message for the log.
 */
#ifndef RECAP_PYFRAMES_H
#define RECAP_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

#define PYFRAMES_MAX 8                 /* program frames kept per capture */
#define PYFRAMES_FILE_MAX 160          /* bytes of a file name kept, NUL included */
#define PYFRAMES_FUNC_MAX 64
#define PYFRAMES_SKIP_TEXT_MAX 512     /* the configured extra skip list */

enum pyframes_gil { PYFRAMES_GIL_UNKNOWN, PYFRAMES_GIL_HELD, PYFRAMES_GIL_RELEASED };

struct pyframe {
    char file[PYFRAMES_FILE_MAX];      /* co_filename as Python has it */
    char function[PYFRAMES_FUNC_MAX];  /* co_name */
    int line;
};

struct pyframes {
    int n;                             /* program frames, innermost first */
    enum pyframes_gil gil;             /* at this capture */
    uint64_t hash;                     /* of (file base name, function, line) of the n frames */
    struct pyframe frame[PYFRAMES_MAX];
};

/* Resolves a symbol of the process's global scope (dlsym(RTLD_DEFAULT)). */
typedef void *(*pyframes_lookup_fn)(const char *symbol);

/* Sets the symbol lookup and the extra skip prefixes (comma-separated, as
 * the configuration's python_skip gives them; NULL or "" for none). Call
 * before the first pyframes_current; later calls are ignored. */
void pyframes_configure(pyframes_lookup_fn lookup, const char *extra_skip);

/* The calling thread's Python frames, up to `depth` (1..PYFRAMES_MAX)
 * program frames; NULL when the thread runs no Python, Python is not in
 * the process, or its version is not supported. The result lives in
 * thread-local memory until this thread's next call. */
const struct pyframes *pyframes_current(int depth);

/* "3.12.3" once Python was found (supported or not), else NULL. */
const char *pyframes_version(void);

/* A message explaining why Python frames are not used (unsupported
 * version, free-threaded build, sub-interpreter, a read that looked
 * wrong), returned once per process; NULL otherwise and afterwards. */
const char *pyframes_take_warning(void);

/* Load base of the module that holds the interpreter loop (libpython or
 * the python executable), 0 when unknown: C frames from there up vary
 * with the interpreter's own specialisation and are left out of site ids
 * that have Python frames. */
uintptr_t pyframes_interpreter_base(void);

/* 1 when frames of `file` belong to a binding or the standard library's
 * plumbing rather than to the program (the skip list). */
int pyframes_skipped(const char *file);

/* The memo's hit and miss counts on this thread (tests, benchmarks). */
void pyframes_memo_stats(unsigned long *hits, unsigned long *misses);

/* Forgets this thread's memo (benchmarks measure the miss path with it). */
void pyframes_memo_clear(void);

#endif
