/*
 * failmalloc.c - make librecap's own allocations fail, on command.
 *
 * Preloaded before librecap, this library answers malloc, calloc and
 * realloc; when the caller's code lies in librecap and the call is the
 * FAILMALLOC_NTH-th such call (or any from then on with FAILMALLOC_PERSIST=1),
 * it returns NULL. Allocations of everyone else go through untouched. The
 * real allocator is glibc's __libc_* entry points, so no dlsym is needed.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static long nth = -1, persist, seen;
static int configured;
static __thread int inside;

static void configure(void)
{
    const char *n = getenv("FAILMALLOC_NTH");
    const char *p = getenv("FAILMALLOC_PERSIST");
    nth = n ? atol(n) : -1;
    persist = p && *p == '1';
    configured = 1;
}

/* Whether this allocation, made from `caller`, is one to refuse. */
static int refuse(void *caller)
{
    Dl_info info;
    if (inside)
        return 0;
    inside = 1;
    if (!configured)
        configure();
    int from_recap = dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "librecap");
    inside = 0;
    if (!from_recap)
        return 0;
    long k = __atomic_add_fetch(&seen, 1, __ATOMIC_RELAXED);
    return nth > 0 && (k == nth || (persist && k > nth));
}

__attribute__((visibility("default"))) void *malloc(size_t n)
{
    return refuse(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

__attribute__((visibility("default"))) void *calloc(size_t a, size_t b)
{
    return refuse(__builtin_return_address(0)) ? NULL : __libc_calloc(a, b);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t n)
{
    return refuse(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

/* With FAILMALLOC_REPORT=path, how many allocations librecap made. */
__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("FAILMALLOC_REPORT");
    if (!path)
        return;
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%ld\n", seen);
        fclose(f);
    }
}
