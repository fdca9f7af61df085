/*
 * events.c - one function per log event, so the schema lives in one place
 * (scripts/recap reads exactly these keys). Each event is one line built on
 * the stack and written with one write(2) by jlog.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/jlog.h"
#include "shim/base/runtime.h"
#include "shim/state/sites.h"
#include "shim/base/step_time.h"

extern char **environ;

#ifndef RECAP_VERSION
#define RECAP_VERSION "unknown"
#endif

static int event_start_written;

/* A text folded into an event's key eight bytes at a time: every capture
 * and instantiation computes one, and a reason runs to tens of bytes. The
 * last word overlaps the one before it rather than being assembled byte by
 * byte, and a shorter text takes three loads at most; the length goes in
 * too. Two texts that differ get different keys
 * but for a chance of 2^-64 (which would only let an event pass for
 * routine). The key lives only in this process: byte order does not
 * matter. */
static uint64_t text_key(uint64_t key, const char *text)
{
    const uint64_t odd = 0x9e3779b97f4a7c15ull;
    size_t n = strlen(text);
    uint64_t w = 0;
    if (n >= sizeof w) {
        const char *last = text + n - sizeof w;
        for (; text < last; text += sizeof w) {
            memcpy(&w, text, sizeof w);
            key = (key ^ w) * odd;
            key ^= key >> 32;
        }
        memcpy(&w, last, sizeof w);
    } else {
        /* Up to seven bytes in at most three loads. */
        unsigned shift = 0;
        if (n & 4) {
            uint32_t v;
            memcpy(&v, text, sizeof v);
            w = v, text += 4, shift = 32;
        }
        if (n & 2) {
            uint16_t v;
            memcpy(&v, text, sizeof v);
            w |= (uint64_t)v << shift, text += 2, shift += 16;
        }
        if (n & 1)
            w |= (uint64_t)(unsigned char)*text << shift;
    }
    key = ((key ^ n) * odd ^ w) * odd;
    return key ^ (key >> 32);
}

int event_worth_writing(uint64_t *last_key, const char *what, const char *reason,
                        unsigned long seq, int failed)
{
    /* `what` comes from a fixed table of names: its address tells it. */
    uint64_t key = (uint64_t)(uintptr_t)what * 0x9e3779b97f4a7c15ull;
    key = text_key(key ^ 0xff, reason ? reason : "");
    int routine = key == *last_key && !failed;
    *last_key = key;
    return !routine || seq <= EVENT_ROUTINE_FULL || (seq & (seq - 1)) == 0;
}

/* Durations to a tenth of a microsecond: more digits would be noise. */
static double tenths(double us)
{
    return (double)(long long)(us * 10.0 + (us >= 0 ? 0.5 : -0.5)) / 10.0;
}

static int event_begin(struct jlog_line *l, const char *name)
{
    if (!jlog_enabled())
        return 0;
    if (!__atomic_exchange_n(&event_start_written, 1, __ATOMIC_ACQ_REL))
        event_start();
    jlog_line_begin(l, name);
    return 1;
}

void event_start(void)
{
    struct jlog_line l;
    char exe[PATH_MAX];
    ssize_t n;

    __atomic_store_n(&event_start_written, 1, __ATOMIC_RELEASE);
    if (!jlog_enabled())
        return;
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';

    jlog_line_begin(&l, "start");
    jlog_str(&l, "version", RECAP_VERSION);
    jlog_str(&l, "exe", exe);
    if (drv_caps.version)
        jlog_i64(&l, "driver", drv_caps.version);
    else
        jlog_str(&l, "driver", NULL);
    jlog_bool(&l, "recapture_api", drv_caps.recapture_begin != NULL);
    jlog_str(&l, "mode", conf_mode_name(runtime_settings.mode));
    jlog_str(&l, "sites", runtime_settings.sites_text[0] ? runtime_settings.sites_text : "all");
    jlog_str(&l, "config", runtime_settings.config_path[0] ? runtime_settings.config_path : NULL);
    char path[SETTINGS_PATH_MAX], why[128];
    if (settings_expand_log_path(runtime_settings.log_template, environ, (long)getpid(), path,
                                 sizeof path, why, sizeof why) != 0)
        snprintf(path, sizeof path, "%s", runtime_settings.log_template);
    jlog_str(&l, "log", path);
    /* Which process of a multi-process run this log is, so that `recap
     * report` over every rank's log can tell them apart (null: no launcher
     * variable; the report then uses the pid). */
    const struct settings_rank *rank = &runtime_settings.rank;
    if (rank->rank_var) {
        jlog_i64(&l, "rank", rank->rank);
        jlog_str(&l, "rank_var", rank->rank_var);
    } else {
        jlog_str(&l, "rank", NULL);
        jlog_str(&l, "rank_var", NULL);
    }
    if (rank->size_var)
        jlog_i64(&l, "world_size", rank->world_size);
    else
        jlog_str(&l, "world_size", NULL);
    jlog_i64(&l, "stack_depth", runtime_settings.stack_depth);
    jlog_str(&l, "python_skip", runtime_settings.conf.python_skip[0]
                                    ? runtime_settings.conf.python_skip : NULL);
    jlog_i64(&l, "routine_events_full", EVENT_ROUTINE_FULL);
    jlog_bool(&l, "degraded", runtime_settings.degraded);
    jlog_line_emit(&l);
}

/* "python": the program's frames, innermost first, as "FILE:LINE
 * (FUNCTION)", whether the GIL was held at the first capture and the
 * version; "nvtx": the innermost range; "c_frames": how many of "frames"
 * went into the id (those below the interpreter when there are Python
 * frames). */
static void event_site_names(struct jlog_line *l, const struct site_names *names)
{
    char frame[PYFRAMES_FILE_MAX + PYFRAMES_FUNC_MAX + 24];
    if (names == NULL)
        return;
    if (names->npy > 0) {
        jlog_object_begin(l, "python");
        jlog_str(l, "version", pyframes_version());
        jlog_str(l, "gil", names->gil == PYFRAMES_GIL_HELD ? "held"
                           : names->gil == PYFRAMES_GIL_RELEASED ? "released" : NULL);
        jlog_array_begin(l, "frames");
        for (int i = 0; i < names->npy; i++) {
            snprintf(frame, sizeof frame, "%s:%d (%s)", names->py[i].file, names->py[i].line,
                     names->py[i].function);
            jlog_str(l, NULL, frame);
        }
        jlog_array_end(l);
        jlog_object_end(l);
    }
    jlog_str(l, "nvtx", names->nvtx[0] ? names->nvtx : NULL);
    jlog_i64(l, "c_frames", names->c_frames);
}

void event_site(const struct site *site, const struct site_stack *stack)
{
    struct jlog_line l;
    char frame[512];

    runtime_verbose("new site %016llx (%s)%s%s", (unsigned long long)site->id,
                    conf_mode_name(site->policy.mode), site->policy.label ? " " : "",
                    site->policy.label ? site->policy.label : "");
    if (!event_begin(&l, "site"))
        return;
    jlog_site(&l, "site", site->id);
    jlog_array_begin(&l, "frames");
    for (int i = 0; stack && i < stack->depth; i++) {
        site_frame_format(stack->pc[i], frame, sizeof frame);
        jlog_str(&l, NULL, frame);
    }
    jlog_array_end(&l);
    jlog_str(&l, "label", site->policy.label);
    jlog_str(&l, "mode", conf_mode_name(site->policy.mode));
    event_site_names(&l, site->names);
    jlog_line_emit(&l);
}

void event_capture(const struct capture_report *r)
{
    struct jlog_line l;

    /* The common case - a sampled-out routine event, not verbose - costs
     * nothing more (no result name looked up, no arguments formatted). */
    if (!r->write && !runtime_settings.verbose)
        return;
    runtime_verbose("capture end site %016llx #%lu: %s%s%s, %ld nodes, %lu changed (%s)",
                    (unsigned long long)r->site->id, r->seq, r->path,
                    r->reason ? " - " : "", r->reason ? r->reason : "", r->nodes, r->changed,
                    drv_result_name((CUresult)r->result));
    if (!r->write || !event_begin(&l, "capture"))
        return;
    jlog_site(&l, "site", r->site->id);
    jlog_u64(&l, "seq", r->seq);
    jlog_str(&l, "path", r->path);
    if (r->by)
        jlog_str(&l, "by", r->by);
    jlog_str(&l, "reason", r->reason);
    if (r->candidates >= 0)
        jlog_i64(&l, "candidates", r->candidates);
    if (r->switch_call)
        jlog_str(&l, "switch_call", r->switch_call);
    if (r->kind)
        jlog_site(&l, "kind", r->kind);   /* 16 hex digits, as a site's id */
    if (r->nodes >= 0)
        jlog_i64(&l, "nodes", r->nodes);
    else
        jlog_str(&l, "nodes", NULL);
    jlog_u64(&l, "changed", r->changed);
    jlog_u64(&l, "eligible", r->eligible);
    jlog_u64(&l, "ineligible", r->ineligible);
    jlog_u64(&l, "errors", r->errors);
    jlog_f64(&l, "us", tenths(r->us));
    if (r->result != CUDA_SUCCESS)
        jlog_str(&l, "result", drv_result_name((CUresult)r->result));
    jlog_line_emit(&l);
}

void event_instantiate(const struct site *site, unsigned long seq, const char *how,
                       const char *reason, double us, int write)
{
    struct jlog_line l;

    if (!write && !runtime_settings.verbose)
        return;
    runtime_verbose("instantiate site %016llx #%lu: %s%s%s (%.1f us)",
                    (unsigned long long)site->id, seq, how, reason ? " - " : "",
                    reason ? reason : "", us);
    if (!write || !event_begin(&l, "instantiate"))
        return;
    jlog_site(&l, "site", site->id);
    jlog_u64(&l, "seq", seq);
    jlog_str(&l, "how", how);
    jlog_str(&l, "reason", reason);
    jlog_f64(&l, "us", tenths(us));
    jlog_line_emit(&l);
}

/* seq: the captures the site had begun when its gate changed (0: not
 * written). */
static void event_reuse(const struct site *site, const char *state, const char *reason,
                        unsigned long seq, unsigned long backoff, unsigned hits, unsigned misses)
{
    struct jlog_line l;

    runtime_verbose("reuse site %016llx: %s - %s (back-off %lu captures)",
                    (unsigned long long)site->id, state, reason, backoff);
    if (!event_begin(&l, "reuse"))
        return;
    jlog_site(&l, "site", site->id);
    jlog_str(&l, "state", state);
    jlog_str(&l, "reason", reason);
    if (seq)
        jlog_u64(&l, "seq", seq);
    jlog_u64(&l, "backoff", backoff);
    jlog_u64(&l, "hits", hits);
    jlog_u64(&l, "misses", misses);
    jlog_line_emit(&l);
}

void event_reuse_shapes_typed(const struct site *site, const char *why)
{
    char reason[320];
    snprintf(reason, sizeof reason, "graphs of one node count differ here (%s): from the next "
             "capture on, shapes count node types and edges too", why);
    event_reuse(site, "typed", reason, 0, 0, 0, 0);
}

void event_reuse_gate(struct site *site, enum gate_change change)
{
    if (change == GATE_SAME)
        return;
    pthread_mutex_lock(&site->lock);
    struct reuse_gate g = site->gate;
    unsigned long now = site->seq;
    pthread_mutex_unlock(&site->lock);
    if (change == GATE_REOPENED) {
        event_reuse(site, "resumed", "the back-off elapsed", now, 0, 0, 0);
        return;
    }
    char why[160];
    if (change == GATE_CLOSED_COST)
        snprintf(why, sizeof why, "%u recaptures or updates failed and cost %.0f us more than %u "
                 "hits saved in the last %u looks", g.last_failures, -g.last_net_us, g.last_hits,
                 g.last_failures + g.last_misses + g.last_hits);
    else if (change == GATE_CLOSED_OVER_BUDGET)
        snprintf(why, sizeof why, "a kept %s of %llu bytes alone exceeds the cache budget of %llu "
                 "bytes: nothing of this site can be kept (raise cache_budget)", g.over_noun,
                 g.over_bytes, g.over_budget);
    else
        snprintf(why, sizeof why, "%u misses against %u hits and %u failures in the last %u looks",
                 g.last_misses, g.last_hits, g.last_failures,
                 g.last_misses + g.last_hits + g.last_failures);
    event_reuse(site, "stopped", why, now, g.reopen_at - now, g.last_hits, g.last_misses);
}

static void event_message(const char *name, const struct site *site, const char *fmt, va_list ap)
{
    struct jlog_line l;
    char text[1024];

    vsnprintf(text, sizeof text, fmt, ap);
    if (site)
        runtime_verbose("%s: site %016llx: %s", name, (unsigned long long)site->id, text);
    else
        runtime_verbose("%s: %s", name, text);
    if (!event_begin(&l, name))
        return;
    if (site)
        jlog_site(&l, "site", site->id);
    else
        jlog_str(&l, "site", NULL);
    jlog_str(&l, "message", text);
    jlog_line_emit(&l);
}

void event_warning(const struct site *site, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    event_message("warning", site, fmt, ap);
    va_end(ap);
}

void event_error(const struct site *site, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    event_message("error", site, fmt, ap);
    va_end(ap);
}

void event_own_call_failed(const struct site *site, const char *symbol, int result,
                           const char *consequence)
{
    event_warning(site, "%s failed (%s): %s", symbol, drv_result_name((CUresult)result), consequence);
}

void event_release_failed(const struct site *site, const char *symbol, int result,
                          const char *consequence)
{
    if (result != CUDA_ERROR_DEINITIALIZED)
        event_own_call_failed(site, symbol, result, consequence);
}

void event_comm_teardown(const char *call, int released, int forwarded)
{
    struct jlog_line l;

    runtime_verbose("%s: released %d kept graphs and executable graphs first%s", call,
                    released, forwarded ? "" : "; no NCCL definition to call");
    if (!event_begin(&l, "comm_teardown"))
        return;
    jlog_str(&l, "call", call);
    jlog_i64(&l, "released", released);
    jlog_bool(&l, "forwarded", forwarded);
    jlog_line_emit(&l);
}

void event_code_unload(const char *call, int released)
{
    struct jlog_line l;

    runtime_verbose("%s: destroyed %d kept graphs and executable graphs first", call, released);
    if (!event_begin(&l, "code_unload"))
        return;
    jlog_str(&l, "call", call);
    jlog_i64(&l, "released", released);
    jlog_line_emit(&l);
}

void event_context_teardown(const char *call, int released, int forgotten)
{
    struct jlog_line l;

    runtime_verbose("%s: destroyed %d kept graphs, executable graphs and memory blocks first, "
                    "forgot %d the program holds", call, released, forgotten);
    if (!event_begin(&l, "context_teardown"))
        return;
    jlog_str(&l, "call", call);
    jlog_i64(&l, "released", released);
    jlog_i64(&l, "forgotten", forgotten);
    jlog_line_emit(&l);
}

/* --- end: totals per site and overall ------------------------------------ */

static void counters_json(struct jlog_line *l, const struct site_counters *c)
{
    jlog_u64(l, "captures", c->captures);
    jlog_u64(l, "recaptured", c->recaptured);
    jlog_u64(l, "by_recap", c->by_recap);
    jlog_u64(l, "fallbacks", c->fallbacks);
    jlog_u64(l, "fresh", c->fresh);
    jlog_u64(l, "observed", c->observed);
    jlog_u64(l, "nodes", c->nodes);
    jlog_u64(l, "changed", c->changed);
    jlog_u64(l, "eligible", c->eligible);
    jlog_u64(l, "ineligible", c->ineligible);
    jlog_u64(l, "errors", c->errors);
    jlog_f64(l, "capture_us", tenths(c->capture_us));
    jlog_u64(l, "instantiations", c->instantiations);
    jlog_u64(l, "reused", c->reused);
    jlog_u64(l, "new", c->how_new);
    jlog_u64(l, "update", c->how_update);
    jlog_u64(l, "delta", c->how_delta);
    jlog_u64(l, "reuse", c->how_reuse);
    jlog_u64(l, "update_failures", c->update_failures);
    jlog_u64(l, "hits", c->hits);
    jlog_u64(l, "misses", c->misses);
    jlog_u64(l, "backoffs", c->backoffs);
    jlog_f64(l, "inst_new_us", tenths(c->inst_new_us));
    jlog_f64(l, "reuse_us", tenths(c->reuse_us));
}

/* "step": where the site's step time went (step_time.h): the periods from
 * one capture begin to the next and their time, then per class the calls
 * that fell in them and their time, each class only where it had calls
 * (the end event is one line of at most JLOG_LINE_MAX bytes, for every
 * site). Written where a period was counted. */
static void step_json(struct jlog_line *l, const struct step_totals *t)
{
    char key[32];
    if (t->periods == 0)
        return;
    jlog_object_begin(l, "step");
    jlog_u64(l, "periods", t->periods);
    jlog_f64(l, "period_us", tenths((double)t->period_ns / 1000.0));
    for (int c = 0; c < STEP_CLASSES; c++) {
        const char *name = step_class_name((enum step_class)c);
        if (t->by_class[c].calls == 0)
            continue;
        snprintf(key, sizeof key, "%s_us", name);
        jlog_u64(l, name, t->by_class[c].calls);
        jlog_f64(l, key, tenths((double)t->by_class[c].ns / 1000.0));
    }
    jlog_object_end(l);
}

static void end_one_unmatched(const char *entry, void *arg)
{
    jlog_str(arg, NULL, entry);
}

struct end_walk {
    struct jlog_line *line;
    struct site_counters total;
    struct site_cache_counts cache_total;
    struct site_memory_counts memory_total;
    struct step_totals step_total;
    const struct event_end_above *above;
    int parts;                  /* "end" lines already written */
};

/* Device memory of the site's captures (shim/state/kept_memory.h): allocations
 * tracked, frees kept, allocations served from kept memory and their bytes. */
static void memory_json(struct jlog_line *l, const struct site_memory_counts *m)
{
    jlog_u64(l, "memory_tracked", m->tracked);
    jlog_u64(l, "memory_kept", m->kept);
    jlog_u64(l, "memory_reused", m->reused);
    jlog_u64(l, "memory_reused_bytes", m->reused_bytes);
    jlog_u64(l, "memory_not_kept", m->not_kept);
    if (m->not_kept_reason)
        jlog_str(l, "memory_not_kept_reason", m->not_kept_reason);
}

/* A site's exact counts by reason, as an object: reason text -> captures. */
static void reasons_json(struct jlog_line *l, const char *key, const struct site_reasons *r)
{
    jlog_object_begin(l, key);
    for (int i = 0; i < SITES_REASONS && r->slot[i].count; i++)
        jlog_u64(l, r->slot[i].text, r->slot[i].count);
    if (r->other)
        jlog_u64(l, "other reasons", r->other);
    jlog_object_end(l);
}

/* Room one site's entry in the end event may take, at most (its counters,
 * its step and memory accounting, eight fallback and eight fresh-capture
 * reasons of up to 159 bytes each): where less is left in the line, the
 * sites so far go out as an "end" line of their own (with "part") and the
 * next line goes on. A process of many sites (a test suite) would
 * otherwise lose the last ones to the line's limit. */
#define END_SITE_ROOM 6144

static void end_one_site(struct site *site, void *arg)
{
    struct end_walk *w = arg;
    if (JLOG_LINE_MAX - w->line->len < END_SITE_ROOM) {
        jlog_array_end(w->line);
        jlog_u64(w->line, "part", (uint64_t)++w->parts);
        jlog_line_emit(w->line);
        jlog_line_begin(w->line, "end");
        jlog_array_begin(w->line, "sites");
    }
    /* Site locks are never held across a driver call, so taking one here,
     * at exit, cannot wait on a thread stuck in the driver. */
    pthread_mutex_lock(&site->lock);
    struct site_counters c = site->count;
    struct site_reasons fallback_reasons = site->fallback_reasons;
    struct site_reasons fresh_reasons = site->fresh_reasons;
    int kinds = site->kinds_distinct, kinds_more = site->kinds_more;
    unsigned long kinds_counted = site->kinds_counted;
    pthread_mutex_unlock(&site->lock);
    struct step_totals step;
    step_totals_of(&site->step, &step);
    step_totals_add(&w->step_total, &step);
    struct site_cache_counts kept = w->above->site_counts(site);
    struct site_memory_counts memory = w->above->memory_counts(site);
    jlog_object_begin(w->line, NULL);
    jlog_site(w->line, "site", site->id);
    counters_json(w->line, &c);
    jlog_u64(w->line, "kept", kept.kept);
    jlog_u64(w->line, "evicted", kept.evicted);
    memory_json(w->line, &memory);
    /* How many kinds of graph (signatures, else shapes) its captures had
     * over the run, of how many captures whose kind recap knew. */
    jlog_u64(w->line, "shapes_seen", (uint64_t)kinds);
    jlog_bool(w->line, "shapes_more", kinds_more);
    jlog_u64(w->line, "shapes_counted", kinds_counted);
    step_json(w->line, &step);
    /* Exact counts by reason: capture events are sampled. */
    if (c.fallbacks)
        reasons_json(w->line, "fallback_reasons", &fallback_reasons);
    if (c.fresh)
        reasons_json(w->line, "fresh_reasons", &fresh_reasons);
    jlog_object_end(w->line);
    w->cache_total.kept += kept.kept, w->cache_total.evicted += kept.evicted;
    w->memory_total.tracked += memory.tracked, w->memory_total.kept += memory.kept;
    w->memory_total.reused += memory.reused, w->memory_total.reused_bytes += memory.reused_bytes;
    w->memory_total.not_kept += memory.not_kept;
    struct site_counters *t = &w->total;
    t->captures += c.captures, t->recaptured += c.recaptured, t->fallbacks += c.fallbacks;
    t->by_recap += c.by_recap;
    t->fresh += c.fresh, t->observed += c.observed, t->nodes += c.nodes;
    t->changed += c.changed, t->eligible += c.eligible, t->ineligible += c.ineligible;
    t->errors += c.errors, t->capture_us += c.capture_us;
    t->instantiations += c.instantiations, t->reused += c.reused, t->how_new += c.how_new;
    t->how_update += c.how_update, t->how_delta += c.how_delta, t->how_reuse += c.how_reuse;
    t->update_failures += c.update_failures;
    t->hits += c.hits, t->misses += c.misses, t->backoffs += c.backoffs;
    t->inst_new_us += c.inst_new_us, t->reuse_us += c.reuse_us;
}

/* "timeline": one line per site that captured, its counts per window of
 * captures (timeline.h), written before the end event. */
static void timeline_one_site(struct site *site, void *arg)
{
    (void)arg;
    struct jlog_line l;
    pthread_mutex_lock(&site->lock);
    struct timeline t = site->timeline;
    pthread_mutex_unlock(&site->lock);
    if (t.window == 0)
        return;
    jlog_line_begin(&l, "timeline");
    jlog_site(&l, "site", site->id);
    timeline_json(&l, &t);
    jlog_line_emit(&l);
}

void event_end(const struct event_end_above *above)
{
    struct jlog_line l;
    struct end_walk w = { .line = &l, .above = above };

    if (!__atomic_load_n(&event_start_written, __ATOMIC_ACQUIRE) || !jlog_enabled())
        return;
    sites_for_each(timeline_one_site, NULL);
    jlog_line_begin(&l, "end");
    jlog_array_begin(&l, "sites");
    sites_for_each(end_one_site, &w);
    jlog_array_end(&l);
    jlog_object_begin(&l, "totals");
    counters_json(&l, &w.total);
    jlog_u64(&l, "kept", w.cache_total.kept);
    jlog_u64(&l, "evicted", w.cache_total.evicted);
    memory_json(&l, &w.memory_total);
    jlog_u64(&l, "budget_bytes", above->budget_bytes);
    jlog_u64(&l, "kept_bytes_peak", above->kept_bytes_peak);
    const struct event_host_memory *host = &above->host_memory;
    if (host->tracked) {
        /* Pinned host memory the program freed and pinned again. */
        jlog_object_begin(&l, "host_memory");
        jlog_u64(&l, "tracked", host->tracked);
        jlog_u64(&l, "kept", host->kept);
        jlog_u64(&l, "reused", host->reused);
        jlog_u64(&l, "reused_bytes", host->reused_bytes);
        jlog_u64(&l, "kept_bytes_peak", host->kept_bytes_peak);
        jlog_u64(&l, "not_kept", host->not_kept);
        if (host->not_kept_reason)
            jlog_str(&l, "not_kept_reason", host->not_kept_reason);
        jlog_object_end(&l);
    }
    step_json(&l, &w.step_total);
    jlog_object_end(&l);
    jlog_array_begin(&l, "unmatched");      /* RECAP_SITES entries that selected no site */
    sites_for_each_unmatched(end_one_unmatched, &l);
    jlog_array_end(&l);
    jlog_object_begin(&l, "resolved");  /* wrappers handed out per lookup path */
    jlog_u64(&l, "dlsym", above->resolved_dlsym);
    jlog_u64(&l, "procaddr", above->resolved_procaddr);
    jlog_object_end(&l);
    jlog_line_emit(&l);
}

void event_after_fork_child(void)
{
    __atomic_store_n(&event_start_written, 0, __ATOMIC_RELEASE);
}
