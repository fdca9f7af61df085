/*
 * capture_holds.c - releases held back while a capture's replay needs them.
 *
 * A capture whose calls may yet be replayed - a recapture, whose failure
 * at any call or at its end makes recap replay the journal into a plain
 * capture, or a capture recap records itself, which switches the same way
 * - names events and memory in those calls. The program may destroy or
 * free them before the capture ends (a temporary event for a fork and
 * join, on the capturing thread or another one); the driver allows that of
 * a plain capture, whose nodes already hold what they need. A replay made
 * later would use them, so the release waits in the capture (under its
 * lock, like every change of its calls) until the capture has ended.
 */
#include <stdlib.h>
#include <string.h>

#include "shim/repeat/capture_holds.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/repeat/self_record.h"

/* The calls a switch of this capture would replay: what recap recorded so
 * far (its graph's recording, once bound to one; else its journal), or
 * the journal of a recapture; none once it is a driver capture of its own
 * (fresh, switched) or over. Caller holds cap->lock. */
static const struct journal_op *replayable_calls(const struct capture *cap, size_t *n)
{
    *n = 0;
    if (cap->ended || cap->path != PATH_RECAPTURE || cap->invalidated)
        return NULL;
    if (cap->by_recap && !cap->matching && cap->target) {
        /* Bound: the recording holds this capture's calls so far. */
        *n = cap->self->next;
        return cap->self->rec->ops;
    }
    *n = cap->journal.nops;
    return cap->journal.ops;
}

/* One release being placed: its handle as the journal names it. */
struct hold_search {
    const struct held_release *release;
    enum drv_hold_kind kind;
    CUevent event;
    uintptr_t lo, hi;       /* memory: the allocation's range */
    int held, twice;
};

/* The one argument of a release: the event, the device address or the
 * host pointer it lets go of. */
static uintptr_t handle_of(const struct held_release *r)
{
    switch ((enum drv_hold_kind)drv_table[r->id].hold_kind) {
    case DRV_HOLD_EVENT:
        return (uintptr_t)drv_args_event(r->id, &r->args);
    case DRV_HOLD_DEVICE:
        return (uintptr_t)r->args.cuMemFree_v2.dptr;
    case DRV_HOLD_HOST:
        return (uintptr_t)r->args.cuMemFreeHost.p;
    default:
        return 0;
    }
}

static int same_handle(const struct held_release *a, const struct held_release *b)
{
    return drv_table[a->id].hold_kind == drv_table[b->id].hold_kind && handle_of(a) == handle_of(b);
}

static int names_handle(const struct journal_op *op, const struct hold_search *h)
{
    if (h->kind == DRV_HOLD_EVENT)
        return journal_op_names_event(op, h->event);
    return journal_op_names_memory(op, h->lo, h->hi, h->kind == DRV_HOLD_HOST);
}

static int append_held(struct capture *cap, const struct held_release *release)
{
    if (cap->nheld == cap->held_capacity) {
        size_t capacity = cap->held_capacity ? cap->held_capacity * 2 : 8;
        struct held_release *grown = realloc(cap->held, capacity * sizeof *grown);
        if (!grown)
            return 0;
        cap->held = grown;
        cap->held_capacity = capacity;
    }
    cap->held[cap->nheld++] = *release;
    return 1;
}

static void hold_if_named(struct capture *cap, void *arg)
{
    struct hold_search *h = arg;
    if (h->held || h->twice)
        return;
    pthread_mutex_lock(&cap->lock);
    for (size_t i = 0; i < cap->nheld && !h->twice; i++)
        h->twice = same_handle(&cap->held[i], h->release);
    size_t n;
    const struct journal_op *ops = replayable_calls(cap, &n);
    for (size_t i = 0; i < n && !h->twice; i++) {
        if (names_handle(&ops[i], h)) {
            h->held = append_held(cap, h->release);
            if (!h->held)
                event_warning(cap->site, "recap ran out of memory holding back %s: a replay of "
                                         "this capture may meet a destroyed handle",
                              drv_table[h->release->id].symbol);
            break;
        }
    }
    pthread_mutex_unlock(&cap->lock);
}

/* The range of the allocation holding `address`; from it upwards when the
 * driver cannot say (a wider hold only waits longer). */
static void allocation_range(CUdeviceptr address, uintptr_t *lo, uintptr_t *hi)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    *lo = (uintptr_t)address;
    *hi = UINTPTR_MAX;
    if (drv_real_fn[DRV_cuMemGetAddressRange_v2] &&
        DRV_REAL(cuMemGetAddressRange_v2)(&base, &size, address) == CUDA_SUCCESS && size) {
        *lo = (uintptr_t)base;
        *hi = (uintptr_t)base + size;
    }
}

static CUresult hold_or_make(const struct held_release *release)
{
    struct hold_search h = { .release = release, .kind = drv_table[release->id].hold_kind };
    switch (h.kind) {
    case DRV_HOLD_EVENT:
        h.event = (CUevent)handle_of(release);
        break;
    case DRV_HOLD_DEVICE:
        allocation_range((CUdeviceptr)handle_of(release), &h.lo, &h.hi);
        break;
    case DRV_HOLD_HOST:
        /* The pinned allocation starts here; its size no call tells. */
        h.lo = handle_of(release);
        h.hi = UINTPTR_MAX;
        break;
    default:
        return drv_invoke(release->id, &release->args);
    }
    if (h.kind != DRV_HOLD_EVENT || h.event)
        ctab_each_journaled(hold_if_named, &h);
    if (h.twice) {
        /* Destroyed already, as far as the program knows: the driver's
         * answer for a handle it no longer has. */
        return h.kind == DRV_HOLD_EVENT ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    }
    return h.held ? CUDA_SUCCESS : drv_invoke(release->id, &release->args);
}

CUresult capture_on_release(enum drv_id id, union drv_args *args)
{
    struct held_release release = { .id = id, .args = *args };
    return hold_or_make(&release);
}

size_t capture_holds_take(struct capture *cap, struct held_release **out)
{
    size_t n = cap->nheld;
    cap->ended = 1;
    *out = NULL;
    if (n == 0)
        return 0;
    *out = malloc(n * sizeof **out);
    if (!*out) {
        /* Made here, under the lock: better late than never. */
        for (size_t i = 0; i < n; i++)
            drv_invoke(cap->held[i].id, &cap->held[i].args);
        cap->nheld = 0;
        return 0;
    }
    memcpy(*out, cap->held, n * sizeof **out);
    cap->nheld = 0;
    return n;
}

void capture_holds_settle(struct held_release *taken, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        CUresult r = hold_or_make(&taken[i]);
        if (r != CUDA_SUCCESS)
            event_own_call_failed(NULL, drv_table[taken[i].id].symbol, r,
                                  "a destroy the program made during a capture, held back "
                                  "until its end, did not succeed");
    }
    free(taken);
}
