/*
 * hash.h - the one hash behind every site id (module prefix hash_).
 *
 * Owns: FNV-1a over bytes and splitmix64's finaliser, shared by the C
 * frames (site.c), the Python frames (pyframes.c) and the names that join
 * them (shim/state/site_names.c), so ids are computed one way everywhere. Must
 * never change: site ids are written into users' configuration files.
 */
#ifndef RECAP_HASH_H
#define RECAP_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV_OFFSET 0xcbf29ce484222325ull
#define HASH_FNV_PRIME 0x100000001b3ull

static inline uint64_t hash_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * HASH_FNV_PRIME;
    return h;
}

/* splitmix64's finaliser: FNV-1a alone mixes its last bytes poorly. */
static inline uint64_t hash_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#endif
