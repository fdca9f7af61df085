/*
 * libc_dl.c - find glibc's dlsym/dlvsym without calling dlsym.
 *
 * The object that defines dlopen (recap does not define dlopen, so the
 * reference binds to glibc) also defines dlsym and dlvsym. We locate it with
 * dl_iterate_phdr and look the names up in its GNU hash table, taking the
 * default (non-hidden) version. Runs before anything else in recap, perhaps
 * inside another library's constructor or a sanitizer runtime's set-up (whose
 * interceptors of strcmp and friends are not ready yet): no allocation, no
 * locks, no libc string functions, and idempotent so that racing threads
 * store the same values.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "shim/base/libc_dl.h"

libc_dlsym_t libc_dlsym_fn;
libc_dlvsym_t libc_dlvsym_fn;

struct elf_dyn_view {
    ElfW(Addr) base;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const uint32_t *gnu_hash;
    const ElfW(Half) *versym;
};

struct find_module_arg {
    uintptr_t addr;             /* an address inside the wanted object, or */
    const char *soname;         /* the base name of its file */
    struct elf_dyn_view view;
    int found;
};

static int same_text(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static const char *base_name(const char *path)
{
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/')
            base = p + 1;
    return base;
}

/* glibc relocates most d_ptr entries of loaded objects in place; some
 * objects (and other loaders) leave them relative. Accept both. */
static const void *dyn_ptr(ElfW(Addr) base, ElfW(Addr) value)
{
    return (const void *)(value < base ? base + value : value);
}

static int find_module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct find_module_arg *arg = data;
    const ElfW(Phdr) *dynamic = NULL;
    int contains = 0;

    (void)size;
    if (arg->soname)
        contains = same_text(base_name(info->dlpi_name), arg->soname);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (!arg->soname && ph->p_type == PT_LOAD && arg->addr >= start &&
            arg->addr < start + ph->p_memsz)
            contains = 1;
        if (ph->p_type == PT_DYNAMIC)
            dynamic = ph;
    }
    if (!contains || !dynamic)
        return 0;

    const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + dynamic->p_vaddr);
    struct elf_dyn_view *v = &arg->view;
    v->base = info->dlpi_addr;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: v->symtab = dyn_ptr(v->base, dyn->d_un.d_ptr); break;
        case DT_STRTAB: v->strtab = dyn_ptr(v->base, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: v->gnu_hash = dyn_ptr(v->base, dyn->d_un.d_ptr); break;
        case DT_VERSYM: v->versym = dyn_ptr(v->base, dyn->d_un.d_ptr); break;
        default: break;
        }
    }
    arg->found = v->symtab && v->strtab && v->gnu_hash;
    return 1;
}

static uint32_t gnu_hash_of(const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = h * 33 + *p;
    return h;
}

/* The default-version definition of `name` in the object, or NULL. */
static void *elf_lookup_default(const struct elf_dyn_view *v, const char *name)
{
    const uint32_t nbuckets = v->gnu_hash[0];
    const uint32_t symoffset = v->gnu_hash[1];
    const uint32_t bloom_size = v->gnu_hash[2];
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)&v->gnu_hash[4];
    const uint32_t *buckets = (const uint32_t *)&bloom[bloom_size];
    const uint32_t *chain = &buckets[nbuckets];
    const uint32_t h = gnu_hash_of(name);

    if (nbuckets == 0)
        return NULL;
    uint32_t idx = buckets[h % nbuckets];
    if (idx < symoffset)
        return NULL;
    for (;; idx++) {
        const uint32_t chain_hash = chain[idx - symoffset];
        const ElfW(Sym) *sym = &v->symtab[idx];
        if ((chain_hash | 1) == (h | 1) && sym->st_shndx != SHN_UNDEF &&
            same_text(v->strtab + sym->st_name, name) &&
            (!v->versym || !(v->versym[idx] & 0x8000)))
            return (void *)(v->base + sym->st_value);
        if (chain_hash & 1)
            return NULL;
    }
}

/* Looks both names up in the object the argument designates. */
static int resolve_in(struct find_module_arg *arg)
{
    dl_iterate_phdr(find_module_cb, arg);
    if (!arg->found)
        return -1;
    void *sym = elf_lookup_default(&arg->view, "dlsym");
    void *vsym = elf_lookup_default(&arg->view, "dlvsym");
    if (!sym || !vsym)
        return -1;
    __atomic_store_n(&libc_dlvsym_fn, (libc_dlvsym_t)vsym, __ATOMIC_RELEASE);
    __atomic_store_n(&libc_dlsym_fn, (libc_dlsym_t)sym, __ATOMIC_RELEASE);
    return 0;
}

int libc_dl_resolve(void)
{
    if (__atomic_load_n(&libc_dlsym_fn, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&libc_dlvsym_fn, __ATOMIC_ACQUIRE))
        return 0;

    /* Another preloaded interposer may define dlopen itself; then fall back
     * to the libraries glibc keeps dlsym in, by file name. */
    struct find_module_arg by_addr = { .addr = (uintptr_t)&dlopen };
    struct find_module_arg by_libc = { .soname = "libc.so.6" };
    struct find_module_arg by_libdl = { .soname = "libdl.so.2" };
    if (resolve_in(&by_addr) == 0 || resolve_in(&by_libc) == 0 ||
        resolve_in(&by_libdl) == 0)
        return 0;
    return -1;
}
