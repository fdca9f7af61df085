/*
 * bench_direct.h - the real driver's functions, for a benchmark that must
 * call them past recap (scripts/benchmarks/paired.cu). recap answers every
 * dlsym and cuGetProcAddress of an interposed name with its wrapper - that
 * is its job - so the lookup reads libcuda's dynamic symbol table itself:
 * the loaded object whose file name starts with "libcuda.so", its
 * DT_SYMTAB and DT_STRTAB, searched through DT_GNU_HASH (or DT_HASH).
 * C and C++ alike; tests/interpose/directprog.c checks it against the
 * stand-in driver under recap.
 */
#ifndef RECAP_BENCH_DIRECT_H
#define RECAP_BENCH_DIRECT_H

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

struct bench_symbol_query {
    const char *name;
    void *address;
    int found_library;
};

/* Dynamic-section pointers are relocated in place by glibc on most
 * targets, left as offsets on others: an offset is below the load address. */
static inline const void *bench_dyn_pointer(ElfW(Addr) value, ElfW(Addr) base)
{
    return (const void *)(value < base ? value + base : value);
}

static inline int bench_symbol_matches(const ElfW(Sym) *sym, const char *strtab, const char *name)
{
    return sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC &&
           strcmp(strtab + sym->st_name, name) == 0;
}

static inline const ElfW(Sym) *bench_gnu_hash_lookup(const uint32_t *table, const ElfW(Sym) *symtab,
                                                     const char *strtab, const char *name)
{
    uint32_t hash = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        hash = hash * 33 + *c;
    const uint32_t nbuckets = table[0], symoffset = table[1], bloom_size = table[2];
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(table + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t index = buckets[hash % nbuckets];
    if (index < symoffset)
        return NULL;
    for (;; index++) {
        const uint32_t chained = chain[index - symoffset];
        if ((chained | 1) == (hash | 1) && bench_symbol_matches(&symtab[index], strtab, name))
            return &symtab[index];
        if (chained & 1)
            return NULL;
    }
}

static inline const ElfW(Sym) *bench_sysv_hash_lookup(const uint32_t *table, const ElfW(Sym) *symtab,
                                                      const char *strtab, const char *name)
{
    for (uint32_t i = 0; i < table[1]; i++) /* table[1]: the number of symbols */
        if (bench_symbol_matches(&symtab[i], strtab, name))
            return &symtab[i];
    return NULL;
}

static inline int bench_find_in_libcuda(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct bench_symbol_query *q = (struct bench_symbol_query *)data;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(base, "libcuda.so", 10) != 0)
        return 0;
    q->found_library = 1;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu_hash = NULL, *sysv_hash = NULL;
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        const void *p = bench_dyn_pointer(dyn->d_un.d_ptr, info->dlpi_addr);
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
        case DT_STRTAB: strtab = (const char *)p; break;
        case DT_GNU_HASH: gnu_hash = (const uint32_t *)p; break;
        case DT_HASH: sysv_hash = (const uint32_t *)p; break;
        }
    }
    const ElfW(Sym) *sym = NULL;
    if (symtab && strtab && gnu_hash)
        sym = bench_gnu_hash_lookup(gnu_hash, symtab, strtab, q->name);
    else if (symtab && strtab && sysv_hash)
        sym = bench_sysv_hash_lookup(sysv_hash, symtab, strtab, q->name);
    if (sym)
        q->address = (void *)(info->dlpi_addr + sym->st_value);
    return 1;
}

/* The real driver's `name`, or NULL; *found_library says whether a
 * libcuda.so was loaded at all (for the caller's message). */
static inline void *bench_real_driver_function(const char *name, int *found_library)
{
    struct bench_symbol_query q = { name, NULL, 0 };
    dl_iterate_phdr(bench_find_in_libcuda, &q);
    if (found_library)
        *found_library = q.found_library;
    return q.address;
}

#endif
