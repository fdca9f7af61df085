/*
 * observed.c - the driver captures recap only watches.
 *
 * A slot's key is its state: NULL free, `claiming` while its owner writes
 * the rest, else the stream key of its capture, stored with release after
 * the fields. A reader that sees the key acquires the fields; it copies
 * them and checks that the key still stands, so a slot freed and claimed
 * again meanwhile is never taken for the old capture. Claims take the
 * lowest free slot, and searches stop at the highest slot ever claimed:
 * a loop capturing on one thread searches one slot.
 */
#include <stddef.h>

#include "shim/state/observed.h"

#define OBSERVED_SLOTS 64

struct slot {
    const void *key;
    struct observed_capture what;
};

int observed_count;
static struct slot slots[OBSERVED_SLOTS];
static int slots_used;           /* one past the highest slot ever claimed */
static const char claiming;

/* Field by field and atomically: a search may read a slot that is being
 * claimed again (it then finds the key changed and moves on). */
static void set_fields(struct slot *s, const struct observed_capture *what)
{
    __atomic_store_n(&s->what.site, what->site, __ATOMIC_RELAXED);
    __atomic_store_n(&s->what.seq, what->seq, __ATOMIC_RELAXED);
    __atomic_store(&s->what.t0, &what->t0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->what.silent, what->silent, __ATOMIC_RELAXED);
}

static void get_fields(const struct slot *s, struct observed_capture *what)
{
    what->site = __atomic_load_n(&s->what.site, __ATOMIC_RELAXED);
    what->seq = __atomic_load_n(&s->what.seq, __ATOMIC_RELAXED);
    __atomic_load(&s->what.t0, &what->t0, __ATOMIC_RELAXED);
    what->silent = __atomic_load_n(&s->what.silent, __ATOMIC_RELAXED);
}

int observed_claim(const void *key, const struct observed_capture *what)
{
    for (int i = 0; i < OBSERVED_SLOTS; i++) {
        const void *expected = NULL;
        if (__atomic_load_n(&slots[i].key, __ATOMIC_RELAXED) != NULL ||
            !__atomic_compare_exchange_n(&slots[i].key, &expected, (const void *)&claiming, 0,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        set_fields(&slots[i], what);
        int used = __atomic_load_n(&slots_used, __ATOMIC_RELAXED);
        while (used < i + 1 &&
               !__atomic_compare_exchange_n(&slots_used, &used, i + 1, 0, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
            ;
        __atomic_add_fetch(&observed_count, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&slots[i].key, key, __ATOMIC_RELEASE);
        return i;
    }
    return -1;
}

void observed_unclaim(int slot)
{
    __atomic_store_n(&slots[slot].key, NULL, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&observed_count, 1, __ATOMIC_RELEASE);
}

int observed_find(const void *key, struct observed_capture *what)
{
    int used = __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);
    for (int i = 0; i < used; i++) {
        if (__atomic_load_n(&slots[i].key, __ATOMIC_ACQUIRE) != key)
            continue;
        get_fields(&slots[i], what);
        /* The copy must not be reordered past the check below. */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slots[i].key, __ATOMIC_RELAXED) == key)
            return i;
    }
    return -1;
}

int observed_release(int slot, const void *key)
{
    const void *expected = key;
    if (!__atomic_compare_exchange_n(&slots[slot].key, &expected, NULL, 0, __ATOMIC_RELEASE,
                                     __ATOMIC_RELAXED))
        return 0;
    __atomic_sub_fetch(&observed_count, 1, __ATOMIC_RELEASE);
    return 1;
}

void observed_after_fork_child(void)
{
    for (int i = 0; i < OBSERVED_SLOTS; i++)
        slots[i].key = NULL;
    observed_count = 0;
    slots_used = 0;
}
