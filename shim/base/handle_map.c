/*
 * handle_map.c - open-addressing pointer map. Handles are heap addresses,
 * so the low bits carry little; a multiplicative hash spreads them.
 */
#include <stdint.h>
#include <stdlib.h>

#include "shim/base/handle_map.h"

static size_t slot_of(const struct hmap *m, const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (m->cap - 1);
}

void *hmap_get(const struct hmap *m, const void *key)
{
    if (!m->cap || !key)
        return NULL;
    for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].key == key)
            return m->slots[i].value;
        if (!m->slots[i].key)
            return NULL;
    }
}

static int grow(struct hmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct hmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    struct hmap old = *m;
    m->slots = slots;
    m->cap = cap;
    m->len = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key)
            hmap_put(m, old.slots[i].key, old.slots[i].value);
    free(old.slots);
    return 0;
}

int hmap_put(struct hmap *m, const void *key, void *value)
{
    if (!key)
        return -1;
    if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return -1;
    size_t i = slot_of(m, key);
    while (m->slots[i].key && m->slots[i].key != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->slots[i].key)
        m->len++;
    m->slots[i].key = key;
    m->slots[i].value = value;
    return 0;
}

void *hmap_del(struct hmap *m, const void *key)
{
    if (!m->cap || !key)
        return NULL;
    size_t i = slot_of(m, key);
    while (m->slots[i].key != key) {
        if (!m->slots[i].key)
            return NULL;
        i = (i + 1) & (m->cap - 1);
    }
    void *value = m->slots[i].value;
    /* Backward-shift: pull later members of the probe run into the hole. */
    for (size_t j = (i + 1) & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
        size_t home = slot_of(m, m->slots[j].key);
        int movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].key = NULL;
    m->slots[i].value = NULL;
    m->len--;
    return value;
}

void hmap_clear(struct hmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = 0;
    m->len = 0;
}
