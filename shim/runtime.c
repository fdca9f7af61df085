/*
 * runtime.c - the state every module reads: the settings, whether recap
 * passes everything through, the verbose channel and the clock. A leaf:
 * it calls no other module of recap (lifecycle.c fills it at start).
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "shim/runtime.h"

struct recap_settings runtime_settings;
int runtime_passthrough;

double runtime_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void runtime_verbose(const char *fmt, ...)
{
    if (!runtime_settings.verbose)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "recap: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t ignored = write(2, line, (size_t)n);
    (void)ignored;
}
