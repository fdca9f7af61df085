/*
 * step_time.c - a site's step time, counted with relaxed atomics, and the
 * lock-free map from handles to sites (step_time.h says what is counted
 * where). Every counter is a 64-bit atomic add; a period closes with an
 * exchange of the site's latest begin, and the pending counters move into
 * the totals by exchange, so two captures beginning at one site at once
 * each close a period of their own and no call is counted twice (one may
 * land in the next period, which changes no sum).
 */
#include <stddef.h>

#include "policy/annotate.h"
#include "shim/base/runtime.h"
#include "shim/base/step_time.h"

static const char *const class_names[STEP_CLASSES] = {
    [STEP_CAPTURE] = "capture", [STEP_INSTANTIATE] = "instantiate", [STEP_LAUNCH] = "launch",
    [STEP_ALLOC] = "alloc", [STEP_FREE] = "free", [STEP_HOST_ALLOC] = "host_alloc",
    [STEP_HOST_FREE] = "host_free", [STEP_SYNC] = "sync",
};

/* The site whose capture began last on this thread, and in the process. */
static __thread struct step_site *step_current;
static struct step_site *step_latest;

void step_site_init(struct step_site *s)
{
    VALGRIND_HG_DISABLE_CHECKING(s, sizeof *s);   /* every field an atomic */
}

const char *step_class_name(enum step_class c)
{
    return (unsigned)c < STEP_CLASSES ? class_names[c] : "?";
}

static uint64_t to_ns(double us)
{
    return us > 0 ? (uint64_t)(us * 1000.0 + 0.5) : 0;
}

static void tally_add(struct step_tally *t, uint64_t calls, uint64_t ns)
{
    __atomic_fetch_add(&t->calls, calls, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->ns, ns, __ATOMIC_RELAXED);
}

/* --- periods ------------------------------------------------------------------------ */

void step_capture_began(struct step_site *s, double t0_us)
{
    uint64_t now = to_ns(t0_us);
    if (now == 0)
        now = 1;
    __atomic_fetch_add(&s->open, 1, __ATOMIC_RELAXED);
    uint64_t prev = __atomic_exchange_n(&s->last_begin_ns, now, __ATOMIC_RELAXED);
    for (int c = 0; c < STEP_CLASSES; c++) {
        uint64_t calls = __atomic_exchange_n(&s->pending[c].calls, 0, __ATOMIC_RELAXED);
        uint64_t ns = __atomic_exchange_n(&s->pending[c].ns, 0, __ATOMIC_RELAXED);
        /* Before the site's first begin nothing is a period's. */
        if (prev && (calls || ns))
            tally_add(&s->done[c], calls, ns);
    }
    if (prev) {
        /* Two cores' counters a few ticks apart: a period never counts
         * negative time. */
        __atomic_fetch_add(&s->periods, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&s->period_ns, now > prev ? now - prev : 0, __ATOMIC_RELAXED);
    }
    step_current = s;
    if (__atomic_load_n(&step_latest, __ATOMIC_RELAXED) != s)
        __atomic_store_n(&step_latest, s, __ATOMIC_RELAXED);
}

static void close_one(struct step_site *s)
{
    int open = __atomic_load_n(&s->open, __ATOMIC_RELAXED);
    while (open > 0 && !__atomic_compare_exchange_n(&s->open, &open, open - 1, 0,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void step_capture_refused(struct step_site *s)
{
    close_one(s);
}

void step_capture_ended(struct step_site *s, double us)
{
    tally_add(&s->pending[STEP_CAPTURE], 1, to_ns(us));
    close_one(s);
}

void step_add(struct step_site *s, enum step_class c, double us)
{
    if (s && (unsigned)c < STEP_CLASSES)
        tally_add(&s->pending[c], 1, to_ns(us));
}

/* --- the timed wrappers ------------------------------------------------------------- */

struct step_site *step_open(enum step_class c, const void *exec)
{
    struct step_site *s;
    if (c == STEP_LAUNCH) {
        s = step_handle_site(exec);
    } else {
        s = step_current;
        if (!s)
            s = __atomic_load_n(&step_latest, __ATOMIC_RELAXED);
    }
    if (!s || __atomic_load_n(&s->open, __ATOMIC_RELAXED) > 0)
        return NULL;
    return s;
}

void step_close(struct step_site *s, enum step_class c, double t0_us)
{
    tally_add(&s->pending[c], 1, to_ns(runtime_since_us(t0_us)));
}

/* --- the handle map ------------------------------------------------------------------
 *
 * Open addressing over STEP_MAP_SLOTS slots, a handle looked for in the
 * STEP_MAP_PROBES slots from its hash. A slot's key is claimed by
 * compare-and-swap; its site is written after (no reader looks for a
 * handle before the call that made it returned, which is after this),
 * and a forgotten key becomes a tombstone that a later handle may claim.
 * A lookup stops at an empty slot or its key. Readers take no lock: one
 * racing a destroy of the same handle - the program's own race - may see
 * the slot's next site. */

#define TOMBSTONE ((const void *)1)

struct step_slot {
    const void *key;             /* NULL: never used; TOMBSTONE: free again */
    struct step_site *site;
};

static struct step_slot step_map[STEP_MAP_SLOTS];
static unsigned step_map_live;   /* handles noted now: 0 spares the lookup */

void step_init(void)
{
    /* Each an atomic, or (a slot's site) ordered by its key's. */
    VALGRIND_HG_DISABLE_CHECKING(&step_latest, sizeof step_latest);
    VALGRIND_HG_DISABLE_CHECKING(step_map, sizeof step_map);
    VALGRIND_HG_DISABLE_CHECKING(&step_map_live, sizeof step_map_live);
}

static size_t slot_of(const void *handle)
{
    uint64_t h = (uint64_t)(uintptr_t)handle * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 40) & (STEP_MAP_SLOTS - 1);
}

void step_note_handle(const void *handle, struct step_site *s)
{
    if (!handle || handle == TOMBSTONE || !s)
        return;
    for (int attempt = 0; attempt < 4; attempt++) {
        size_t at = slot_of(handle), claim = STEP_MAP_SLOTS;
        const void *seen = NULL;
        for (int n = 0; n < STEP_MAP_PROBES; n++, at = (at + 1) & (STEP_MAP_SLOTS - 1)) {
            const void *k = __atomic_load_n(&step_map[at].key, __ATOMIC_ACQUIRE);
            if (k == handle) {
                __atomic_store_n(&step_map[at].site, s, __ATOMIC_RELEASE);
                return;
            }
            if ((k == NULL || k == TOMBSTONE) && claim == STEP_MAP_SLOTS) {
                claim = at;
                seen = k;
            }
            if (k == NULL)
                break;
        }
        if (claim == STEP_MAP_SLOTS)
            return;   /* no room near its place: not followed */
        if (__atomic_compare_exchange_n(&step_map[claim].key, &seen, handle, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&step_map[claim].site, s, __ATOMIC_RELEASE);
            __atomic_fetch_add(&step_map_live, 1, __ATOMIC_RELAXED);
            return;
        }
        /* Another handle took the slot meanwhile: look again. */
    }
}

void step_forget_handle(const void *handle)
{
    if (!handle || __atomic_load_n(&step_map_live, __ATOMIC_RELAXED) == 0)
        return;
    size_t at = slot_of(handle);
    for (int n = 0; n < STEP_MAP_PROBES; n++, at = (at + 1) & (STEP_MAP_SLOTS - 1)) {
        const void *k = __atomic_load_n(&step_map[at].key, __ATOMIC_ACQUIRE);
        if (k == NULL)
            return;
        if (k == handle) {
            __atomic_store_n(&step_map[at].site, NULL, __ATOMIC_RELAXED);
            if (__atomic_compare_exchange_n(&step_map[at].key, &k, TOMBSTONE, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
                __atomic_fetch_sub(&step_map_live, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

struct step_site *step_handle_site(const void *handle)
{
    if (!handle || __atomic_load_n(&step_map_live, __ATOMIC_RELAXED) == 0)
        return NULL;
    size_t at = slot_of(handle);
    for (int n = 0; n < STEP_MAP_PROBES; n++, at = (at + 1) & (STEP_MAP_SLOTS - 1)) {
        const void *k = __atomic_load_n(&step_map[at].key, __ATOMIC_ACQUIRE);
        if (k == handle)
            return __atomic_load_n(&step_map[at].site, __ATOMIC_ACQUIRE);
        if (k == NULL)
            return NULL;
    }
    return NULL;
}

/* --- totals -------------------------------------------------------------------------- */

void step_totals_of(const struct step_site *s, struct step_totals *out)
{
    out->periods = __atomic_load_n(&s->periods, __ATOMIC_RELAXED);
    out->period_ns = __atomic_load_n(&s->period_ns, __ATOMIC_RELAXED);
    for (int c = 0; c < STEP_CLASSES; c++) {
        out->by_class[c].calls = __atomic_load_n(&s->done[c].calls, __ATOMIC_RELAXED);
        out->by_class[c].ns = __atomic_load_n(&s->done[c].ns, __ATOMIC_RELAXED);
    }
}

void step_totals_add(struct step_totals *sum, const struct step_totals *t)
{
    sum->periods += t->periods;
    sum->period_ns += t->period_ns;
    for (int c = 0; c < STEP_CLASSES; c++) {
        sum->by_class[c].calls += t->by_class[c].calls;
        sum->by_class[c].ns += t->by_class[c].ns;
    }
}

void step_after_fork_child(void)
{
    /* Only this thread exists in the child; the sites the map and the
     * pointers name are freed with the parent's sites. */
    step_current = NULL;
    __atomic_store_n(&step_latest, NULL, __ATOMIC_RELAXED);
    for (size_t i = 0; i < STEP_MAP_SLOTS; i++)
        step_map[i] = (struct step_slot){ NULL, NULL };
    __atomic_store_n(&step_map_live, 0, __ATOMIC_RELAXED);
}
