/*
 * pyframes_probe.c - policy/pyframes inside a real interpreter: a library
 * that a Python program loads with ctypes and calls from Python code, to
 * measure what reading the caller's frames costs with the memo hit and
 * missed, and to check that both give the same frames and hash.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "policy/pyframes.h"

int probe_configure(const char *extra_skip);
int probe_frames(int depth, char *out, size_t outlen, uint64_t *hash, int *gil);
int probe_bench(int depth, int iterations, double *hit_ns, double *miss_ns, uint64_t *hash);
void probe_memo_stats(unsigned long *hits, unsigned long *misses);
int probe_skipped(const char *file);

static void *probe_lookup(const char *symbol)
{
    return dlsym(RTLD_DEFAULT, symbol);
}

static double probe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((visibility("default")))
int probe_configure(const char *extra_skip)
{
    pyframes_configure(probe_lookup, extra_skip);
    return pyframes_version() != NULL;
}

/* Frames as "FILE:LINE (FUNCTION)|..." into out; returns the frame count
 * (-1 without Python frames) and the hash and GIL state. */
__attribute__((visibility("default")))
int probe_frames(int depth, char *out, size_t outlen, uint64_t *hash, int *gil)
{
    const struct pyframes *f = pyframes_current(depth);
    if (outlen > 0)
        out[0] = '\0';
    if (f == NULL)
        return -1;
    size_t at = 0;
    for (int i = 0; i < f->n && at < outlen; i++) {
        int n = snprintf(out + at, outlen - at, "%s%s:%d (%s)", i ? "|" : "", f->frame[i].file,
                         f->frame[i].line, f->frame[i].function);
        if (n < 0)
            break;
        at += (size_t)n;
    }
    *hash = f->hash;
    *gil = f->gil;
    return f->n;
}

/* Times `iterations` reads with the memo kept (hits) and cleared before
 * each read (misses); ns per read into *hit_ns, *miss_ns. Returns 0 when
 * every read gave the same hash, -1 otherwise. */
__attribute__((visibility("default")))
int probe_bench(int depth, int iterations, double *hit_ns, double *miss_ns, uint64_t *hash)
{
    const struct pyframes *first = pyframes_current(depth);
    if (first == NULL)
        return -1;
    uint64_t expect = first->hash;
    int same = 1;
    double t0 = probe_now_ns();
    for (int i = 0; i < iterations; i++)
        same &= pyframes_current(depth)->hash == expect;
    double t1 = probe_now_ns();
    for (int i = 0; i < iterations; i++) {
        pyframes_memo_clear();
        same &= pyframes_current(depth)->hash == expect;
    }
    double t2 = probe_now_ns();
    *hit_ns = (t1 - t0) / iterations;
    *miss_ns = (t2 - t1) / iterations;
    *hash = expect;
    return same ? 0 : -1;
}

__attribute__((visibility("default")))
void probe_memo_stats(unsigned long *hits, unsigned long *misses)
{
    pyframes_memo_stats(hits, misses);
}

__attribute__((visibility("default")))
int probe_skipped(const char *file)
{
    return pyframes_skipped(file);
}
