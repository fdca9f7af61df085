/*
 * lifecycle.c - start, exit and fork of recap inside a process.
 *
 * lifecycle_start() loads the driver, reads the settings (whose errors
 * settings_load reports once on stderr), configures the log and writes the
 * "start" event: this happens at the first intercepted driver call, so a
 * process that never reaches the driver leaves no log. At normal exit
 * (return from main or exit() from any thread) the "end" event carries the
 * totals; a killed process still leaves complete lines. fork() children
 * start with empty caches and their own log.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "shim/state/cache.h"
#include "shim/repeat/capture.h"
#include "shim/state/capture_table.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/jlog.h"
#include "shim/state/kept_host.h"
#include "shim/state/kept_memory.h"
#include "shim/base/kparams.h"
#include "shim/intercept/lifecycle.h"
#include "shim/base/nvtx_ranges.h"
#include "shim/state/observed.h"
#include "shim/base/runtime.h"
#include "shim/state/site_names.h"
#include "shim/state/sites.h"
#include "shim/base/step_time.h"
#include "shim/state/user_objects.h"

extern char **environ;

_Static_assert(CACHE_KINDS == SITES_RELEASED_KINDS, "sites.h counts each kind cache.c keeps");

int lifecycle_started;

static pthread_mutex_t lifecycle_start_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int lifecycle_starting_here;

static void report_unmatched(const char *entry, void *arg)
{
    (void)arg;
    event_warning(NULL, "RECAP_SITES entry \"%s\" matched no capture site of this run", entry);
}

static void lifecycle_at_exit(void)
{
    ctab_memo_forget(NULL);   /* the exiting thread's; others' at their exit */
    sites_for_each_unmatched(report_unmatched, NULL);
    struct event_end_above above = {
        .site_counts = cache_site_counts,
        .memory_counts = kmem_site_counts,
        .budget_bytes = cache_budget_bytes(),
        .kept_bytes_peak = cache_peak_bytes(),
        .host_memory = khost_counts(),
        .resolved_dlsym = drv_lookups(DRV_LOOKUP_DLSYM),
        .resolved_procaddr = drv_lookups(DRV_LOOKUP_PROCADDR),
    };
    event_end(&above);
}

void lifecycle_context_teardown(const char *call)
{
    if (runtime_passthrough)
        return;
    kparams_code_unloaded();      /* the context's modules go with it */
    int released = kmem_release_all_quietly() + khost_release_all() + cache_release_all();
    int forgotten = kmem_forget_tracked() + khost_forget_tracked() + cache_forget_held();
    if (released || forgotten)
        event_context_teardown(call, released, forgotten);
}

void lifecycle_code_unload(const char *call)
{
    if (runtime_passthrough)
        return;
    /* Which kept graph names which module's kernel is not recorded, and a
     * graph or executable graph destroyed after its code went may take the
     * driver down with it; the driver may also give a new kernel an
     * unloaded one's handle, which a kept graph would then name. So all go:
     * a site's next capture is fresh, which is what the program pays
     * without recap. Kept memory names no code and stays. */
    kparams_code_unloaded();
    int released = cache_release_all();
    if (released)
        event_code_unload(call, released);
}

static void lifecycle_after_fork_child(void)
{
    /* Order matters: captures refer to sites and cached records. */
    pthread_mutex_init(&lifecycle_start_lock, NULL);
    lifecycle_starting_here = 0;
    drv_after_fork_child();
    ctab_after_fork_child();
    observed_after_fork_child();
    cache_after_fork_child();
    kmem_after_fork_child();
    khost_after_fork_child();
    uobj_after_fork_child();
    kparams_after_fork_child();
    step_after_fork_child();
    sites_after_fork_child();
    jlog_after_fork_child();
    event_after_fork_child();
}

static void announce_forbidden(const struct site *site, const char *reason)
{
    event_warning(site, "site not recaptured: %s", reason);
}

/* Reads the settings and opens the log, with the driver known. */
static void lifecycle_begin(void)
{
    settings_load(&runtime_settings, environ, 2);
    runtime_passthrough = runtime_settings.mode == RECAP_MODE_OFF || !drv_caps.usable;
    if (runtime_settings.mode == RECAP_MODE_OFF)
        return;

    step_init();
    site_set_self_module((const void *)lifecycle_begin);
    sites_announce_with(event_site, announce_forbidden);
    cache_release_first_with(kmem_release_all);
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
    atexit(lifecycle_at_exit);
    pthread_atfork(NULL, NULL, lifecycle_after_fork_child);
}

void lifecycle_start(void)
{
    /* A driver that looks its own names up while it loads, or a call made
     * while starting, comes back here on this thread: it goes on unstarted,
     * as it would have before recap's first call. */
    if (lifecycle_starting_here || drv_loading_on_this_thread())
        return;
    pthread_mutex_lock(&lifecycle_start_lock);
    if (!lifecycle_started) {
        lifecycle_starting_here = 1;
        drv_load();
        lifecycle_begin();
        lifecycle_starting_here = 0;
        __atomic_store_n(&lifecycle_started, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lifecycle_start_lock);
}
