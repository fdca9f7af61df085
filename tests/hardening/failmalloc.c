/*
 * failmalloc.c - make librecap's own allocations fail, on command.
 *
 * Preloaded before librecap, this library answers malloc, calloc and
 * realloc; when the caller's code lies in librecap (the file named by
 * FAILMALLOC_TARGET, compared by identity: device and inode) and the call is the
 * FAILMALLOC_NTH-th such call (or any from then on with FAILMALLOC_PERSIST=1),
 * it returns NULL. Allocations of everyone else go through untouched. The
 * real allocator is glibc's __libc_* entry points, so no dlsym is needed.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static long nth = -1, persist, seen;
static int configured;
static __thread int inside;
static struct stat target;            /* librecap's file; st_ino 0: none */

/* Which loaded objects are librecap, by load address (a few objects
 * allocate; a stat per allocation would slow the runs down). */
static struct { const void *base; int is_target; } known[16];
static int nknown;

static void configure(void)
{
    const char *n = getenv("FAILMALLOC_NTH");
    const char *p = getenv("FAILMALLOC_PERSIST");
    nth = n ? atol(n) : -1;
    persist = p && *p == '1';
    const char *t = getenv("FAILMALLOC_TARGET");
    if (!t || stat(t, &target) != 0)
        target.st_ino = 0;
    configured = 1;
}

static int is_target(const Dl_info *info)
{
    int n = __atomic_load_n(&nknown, __ATOMIC_RELAXED);
    if (n > (int)(sizeof known / sizeof known[0]))
        n = (int)(sizeof known / sizeof known[0]);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&known[i].base, __ATOMIC_ACQUIRE) == info->dli_fbase)
            return known[i].is_target;
    struct stat st;
    int yes = target.st_ino != 0 && stat(info->dli_fname, &st) == 0 &&
              st.st_dev == target.st_dev && st.st_ino == target.st_ino;
    /* Racing threads may both add an entry: harmless, the answer is the same. */
    int slot = __atomic_fetch_add(&nknown, 1, __ATOMIC_RELAXED);
    if (slot < (int)(sizeof known / sizeof known[0])) {
        known[slot].is_target = yes;
        __atomic_store_n(&known[slot].base, info->dli_fbase, __ATOMIC_RELEASE);
    }
    return yes;
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
    int from_recap = dladdr(caller, &info) && info.dli_fname && is_target(&info);
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
