/*
 * runtime.c - start, exit and fork of recap inside a process.
 *
 * runtime_start() reads the settings (whose errors it reports once on
 * stderr), configures the log and writes the "start" event: this happens at
 * the first intercepted driver call, so a process that never reaches the
 * driver leaves no log. At normal exit (return from main or exit() from any
 * thread) the "end" event carries the totals; a killed process still leaves
 * complete lines. fork() children start with empty caches and their own log.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim/cache.h"
#include "shim/capture.h"
#include "shim/driver.h"
#include "shim/events.h"
#include "shim/jlog.h"
#include "shim/kparams.h"
#include "shim/nvtx_ranges.h"
#include "shim/runtime.h"
#include "shim/sites.h"
#include "shim/user_objects.h"

extern char **environ;

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

static void runtime_report_unmatched(const char *entry, void *arg)
{
    (void)arg;
    event_warning(NULL, "RECAP_SITES entry \"%s\" matched no capture site of this run", entry);
}

static void runtime_at_exit(void)
{
    sites_for_each_unmatched(runtime_report_unmatched, NULL);
    event_end();
}

static void runtime_after_fork_child(void)
{
    /* Order matters: captures refer to sites and cached records. */
    drv_after_fork_child();
    ctab_after_fork_child();
    cache_after_fork_child();
    uobj_after_fork_child();
    kparams_after_fork_child();
    sites_after_fork_child();
    jlog_after_fork_child();
    event_after_fork_child();
}

void runtime_start(void)
{
    settings_load(&runtime_settings, environ, 2);
    runtime_passthrough = runtime_settings.mode == RECAP_MODE_OFF || !drv_caps.usable;
    if (runtime_settings.mode == RECAP_MODE_OFF)
        return;

    site_set_self_module((const void *)runtime_start);
    site_names_configure(&runtime_settings);
    jlog_configure(runtime_settings.log_template, environ);
    event_start();
    const char *nvtx_note = nvtx_ranges_take_note();
    if (nvtx_note != NULL)
        event_warning(NULL, "%s", nvtx_note);
    if (drv_caps.version_error != CUDA_SUCCESS)
        event_own_call_failed(NULL, "cuDriverGetVersion", drv_caps.version_error,
                              "driver version unknown: no recapture, executable reuse only");
    if (drv_caps.probe_error != CUDA_SUCCESS)
        event_own_call_failed(NULL, "cuGetProcAddress_v2", drv_caps.probe_error,
                              "recapture API not found: executable reuse only");
    if (!drv_caps.usable) {
        event_warning(NULL, "no usable CUDA driver (%s): recap passes every call through",
                      drv_caps.problem);
        fprintf(stderr, "recap: no usable CUDA driver (%s); passing every call through\n",
                drv_caps.problem);
    }
    atexit(runtime_at_exit);
    pthread_atfork(NULL, NULL, runtime_after_fork_child);
}
