/*
 * handle_map.h - a map from driver handles (pointers) to records (prefix
 * hmap_). Open addressing with linear probing and backward-shift deletion.
 *
 * Owns: its slot array only; values are borrowed. Must never: lock (its
 * user's lock guards it) or call the driver. Allocation failure is reported
 * to the caller, which then simply does not track the handle.
 */
#ifndef RECAP_HANDLE_MAP_H
#define RECAP_HANDLE_MAP_H

#include <stddef.h>

struct hmap_slot {
    const void *key;   /* NULL: empty */
    void *value;
};

struct hmap {
    struct hmap_slot *slots;
    size_t cap;        /* power of two, or 0 */
    size_t len;
};

/* The value for key, or NULL. */
void *hmap_get(const struct hmap *m, const void *key);

/* Inserts or replaces. Returns 0, or -1 if memory ran out (map unchanged). */
int hmap_put(struct hmap *m, const void *key, void *value);

/* Removes key; returns its value or NULL. */
void *hmap_del(struct hmap *m, const void *key);

/* Frees the slot array; values are the caller's. */
void hmap_clear(struct hmap *m);

#endif
