/*
 * site.c - capture-site identity (see site.h).
 *
 * Owns: walking the stack with backtrace(3), skipping librecap's own leading
 * frames, resolving each return address to (module base name, offset from
 * the module's load base) through a fixed-size lock-free cache, and hashing
 * those pairs into a site id that survives address randomisation.
 *
 * Must never: allocate or take a lock of its own on the capture path, call
 * the CUDA driver, or print. Two unavoidable costs are paid once per new
 * return address, never per capture: dladdr1 (which takes the dynamic
 * loader's lock for a moment) and, on the very first backtrace of the
 * process, libgcc_s being loaded, which site_set_self_module does up front.
 *
 * A per-thread memo maps the last few stacks hashed to their ids, so that a
 * loop capturing at one site compares its frames with the memo's instead of
 * looking each one up and hashing it again; it holds exactly what the cache
 * would give, because a resolved frame never changes.
 *
 * Known limit: the cache maps a return address to a module for the life of
 * the process. A library unloaded and another loaded at the same address
 * would keep the first one's name; capture sites in dlclose'd code are rare
 * enough that the loader lock a check would cost on every capture is not
 * worth it.
 */
#include "policy/hash.h"
#include "policy/site.h"
#include "policy/stack_memo.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "policy/annotate.h"

/* ---- resolution cache ------------------------------------------------- */

#define SITE_CACHE_SLOTS 4096      /* power of two; one slot per distinct pc */
#define SITE_CACHE_PROBES 16
/* Leading frames of librecap itself that a capture may have to step over
 * before it reaches the application; far more than any real wrapper chain. */
#define SITE_SKIP_MAX 32

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY };

/* A slot is written once: claimed by CAS FREE->FILLING, filled, then
 * published by a release store of READY. Readers only trust pc/base/hash
 * after an acquire load that saw READY, and a slot is never reused, so
 * there is no ABA and no lock. */
struct site_pc_slot {
    _Atomic int state;
    uintptr_t pc;
    uintptr_t module_base;         /* 0: pc lies in no known module */
    uint64_t frame_hash;
};

static struct site_pc_slot site_cache[SITE_CACHE_SLOTS];

/* Load base of the module whose frames are skipped; 0: skip nothing. */
static _Atomic uintptr_t site_self_base;
/* Most leading self frames seen so far: sizes the next backtrace request
 * so that a shallow site depth does not unwind the whole stack. */
static _Atomic int site_skip_hint;

/* Stacks hashed lately on this thread: the id of (frames, stop module). */
#define SITE_ID_MEMO_ENTRIES 4
#define SITE_ID_MEMO_DEPTH 16      /* deeper stacks are hashed every time */

struct site_id_memo {
    uint64_t id;                   /* 0: empty */
    uintptr_t stop_base;
    int depth, kept;
    void *pc[SITE_ID_MEMO_DEPTH];
};

static __thread struct site_id_memo site_id_memos[SITE_ID_MEMO_ENTRIES];
static __thread unsigned site_id_memo_next;

/* The main executable: dladdr names it "" (or argv[0] on some systems), so
 * its name comes from /proc/self/exe, read once. */
static pthread_once_t site_exe_once = PTHREAD_ONCE_INIT;
static char site_exe_name[NAME_MAX + 1];
static uintptr_t site_exe_base;

/* ---- hashing ----------------------------------------------------------- */

static uint64_t site_frame_hash(const char *name, size_t name_len, uint64_t offset)
{
    unsigned char off[8];
    for (int i = 0; i < 8; i++)
        off[i] = (unsigned char)(offset >> (8 * i));   /* fixed byte order */
    uint64_t h = hash_fnv1a(HASH_FNV_OFFSET, name, name_len);
    h = hash_fnv1a(h, "\0", 1);                         /* name/offset boundary */
    h = hash_fnv1a(h, off, sizeof off);
    return hash_mix64(h);
}

/* ---- module resolution ------------------------------------------------- */

static int site_find_exe_base(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    /* The first object dl_iterate_phdr reports is the main program. Its map
     * start (what dladdr calls dli_fbase) is the load bias plus the first
     * PT_LOAD's address: 0 + 0x400000 for a fixed executable, bias + 0 for
     * a PIE. */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
            *(uintptr_t *)data = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) & ~(page - 1);
            break;
        }
    }
    return 1;
}

static void site_exe_init(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        strcpy(site_exe_name, "?");
    } else {
        path[n] = '\0';
        static const char deleted[] = " (deleted)";
        size_t len = (size_t)n;
        if (len > sizeof deleted - 1 &&
            strcmp(path + len - (sizeof deleted - 1), deleted) == 0)
            path[len - (sizeof deleted - 1)] = '\0';
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        size_t len_name = strnlen(name, sizeof site_exe_name - 1);
        memcpy(site_exe_name, name, len_name);
        site_exe_name[len_name] = '\0';
    }
    dl_iterate_phdr(site_find_exe_base, &site_exe_base);
}

struct site_module {
    uintptr_t base;
    const char *name;              /* base name, not NUL-terminated necessarily */
    size_t name_len;
    const char *symbol;            /* NULL: unknown */
    uintptr_t symbol_addr;
};

/* Finds the module holding pc. Returns 0, or -1 when no loaded object
 * contains it (JIT code, anonymous mappings). */
static int site_module_of(uintptr_t pc, struct site_module *m)
{
    Dl_info info;
    struct link_map *map = NULL;
    pthread_once(&site_exe_once, site_exe_init);
    if (!dladdr1((void *)pc, &info, (void **)&map, RTLD_DL_LINKMAP))
        return -1;
    m->base = (uintptr_t)info.dli_fbase;
    m->symbol = info.dli_sname;
    m->symbol_addr = (uintptr_t)info.dli_saddr;
    const char *path = info.dli_fname;
    int is_exe = path == NULL || path[0] == '\0' ||
                 (map != NULL && map->l_name != NULL && map->l_name[0] == '\0') ||
                 (site_exe_base != 0 && m->base == site_exe_base);
    if (is_exe) {
        m->name = site_exe_name;
    } else {
        const char *slash = strrchr(path, '/');
        m->name = slash ? slash + 1 : path;
    }
    m->name_len = strlen(m->name);
    return 0;
}

static void site_resolve(uintptr_t pc, uintptr_t *base, uint64_t *hash)
{
    struct site_module m;
    if (site_module_of(pc, &m) == 0) {
        *base = m.base;
        *hash = site_frame_hash(m.name, m.name_len, pc - m.base);
    } else {
        /* Unknown code: an absolute address would change run to run, so
         * such frames all hash alike; the known frames still tell sites
         * apart. */
        *base = 0;
        *hash = site_frame_hash("?", 1, 0);
    }
}

static size_t site_slot_index(uintptr_t pc)
{
    return (size_t)(hash_mix64((uint64_t)pc) & (SITE_CACHE_SLOTS - 1));
}

/* (module base, frame hash) of pc, from the cache or resolved and cached. */
static void site_lookup(uintptr_t pc, uintptr_t *base, uint64_t *hash)
{
    size_t i = site_slot_index(pc);
    for (int probe = 0; probe < SITE_CACHE_PROBES; probe++, i = (i + 1) & (SITE_CACHE_SLOTS - 1)) {
        struct site_pc_slot *slot = &site_cache[i];
        int state = atomic_load_explicit(&slot->state, memory_order_acquire);
        if (state == SLOT_READY) {
            ANNOTATE_HAPPENS_AFTER(&slot->state);
            if (slot->pc == pc) {
                *base = slot->module_base;
                *hash = slot->frame_hash;
                return;
            }
            continue;
        }
        if (state == SLOT_FILLING)
            continue;   /* never wait: another thread may hold it long */
        site_resolve(pc, base, hash);
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong_explicit(&slot->state, &expected, SLOT_FILLING,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            slot->pc = pc;
            slot->module_base = *base;
            slot->frame_hash = *hash;
            ANNOTATE_HAPPENS_BEFORE(&slot->state);
            atomic_store_explicit(&slot->state, SLOT_READY, memory_order_release);
        }
        return;
    }
    site_resolve(pc, base, hash);   /* neighbourhood full: correct, just slower */
}

/* ---- public ------------------------------------------------------------ */

void site_set_self_module(const void *addr_in_module)
{
    /* backtrace's first call loads libgcc_s (dlopen, malloc); do it now,
     * outside any capture, so later captures never do. */
    void *warm[4];
    (void)backtrace(warm, 4);
    pthread_once(&site_exe_once, site_exe_init);
    VALGRIND_HG_DISABLE_CHECKING(site_cache, sizeof site_cache);
    VALGRIND_HG_DISABLE_CHECKING(&site_skip_hint, sizeof site_skip_hint);
    VALGRIND_HG_DISABLE_CHECKING(&site_self_base, sizeof site_self_base);

    uintptr_t base = 0;
    Dl_info info;
    if (addr_in_module != NULL && dladdr(addr_in_module, &info))
        base = (uintptr_t)info.dli_fbase;
    atomic_store_explicit(&site_skip_hint, 0, memory_order_relaxed);
    atomic_store_explicit(&site_self_base, base, memory_order_release);
}

/* noinline: the search below anchors on this function's own return address. */
__attribute__((noinline))
void site_stack_capture(struct site_stack *st, int depth, const struct site_entry *entry)
{
    void *raw[SITE_MAX_DEPTH + SITE_SKIP_MAX];
    void *caller = __builtin_return_address(0);
    const struct site_entry here = { .ret = caller, .cfa = __builtin_dwarf_cfa() };
    const struct site_entry *at = entry ? entry : &here;
    if (depth < 1)
        depth = 1;
    if (depth > SITE_MAX_DEPTH)
        depth = SITE_MAX_DEPTH;
    if (stack_memo_recall(at, depth, st))
        return;
    uintptr_t self = atomic_load_explicit(&site_self_base, memory_order_acquire);
    int hint = atomic_load_explicit(&site_skip_hint, memory_order_relaxed);
    /* hint: frames skipped last time (this function, a backtrace
     * interceptor where there is one, librecap's wrappers). Each extra
     * frame requested costs a full unwinding step, so ask for just that
     * many; a deeper skip than learnt is caught below and retried. */
    int want = depth + (hint > 0 ? hint : 4);
    if (want > SITE_MAX_DEPTH + SITE_SKIP_MAX)
        want = SITE_MAX_DEPTH + SITE_SKIP_MAX;

    for (;;) {
        int n = backtrace(raw, want);
        /* Our caller's frame: usually raw[1], later when something wraps
         * backtrace. Every frame before it is machinery, never the site. */
        int first = 0;
        while (first < n && raw[first] != caller)
            first++;
        if (first == n)
            first = n > 1 ? 1 : 0;
        if (self) {
            while (first < n) {
                uintptr_t base;
                uint64_t hash;
                site_lookup((uintptr_t)raw[first], &base, &hash);
                if (base != self)
                    break;
                first++;
            }
        }
        int kept = n - first;
        int truncated = n == want && kept < depth;
        if (truncated && want < SITE_MAX_DEPTH + SITE_SKIP_MAX) {
            want = SITE_MAX_DEPTH + SITE_SKIP_MAX;
            continue;
        }
        if (first > hint)
            atomic_store_explicit(&site_skip_hint, first < SITE_SKIP_MAX ? first : SITE_SKIP_MAX,
                                  memory_order_relaxed);
        if (kept > depth)
            kept = depth;
        if (kept < 0)
            kept = 0;
        for (int i = 0; i < kept; i++)
            st->pc[i] = raw[first + i];
        st->depth = kept;
        stack_memo_remember(at, depth, st);
        return;
    }
}

uint64_t site_id_of(const struct site_stack *st)
{
    return site_id_of_until(st, 0, NULL);
}

uint64_t site_id_of_until(const struct site_stack *st, uintptr_t stop_base, int *kept)
{
    uint64_t h = HASH_FNV_OFFSET;
    int depth = st->depth < 0 ? 0 : st->depth > SITE_MAX_DEPTH ? SITE_MAX_DEPTH : st->depth;
    int memo = depth <= SITE_ID_MEMO_DEPTH;
    if (memo) {
        for (int k = 0; k < SITE_ID_MEMO_ENTRIES; k++) {
            const struct site_id_memo *m = &site_id_memos[k];
            if (m->id != 0 && m->depth == depth && m->stop_base == stop_base &&
                memcmp(m->pc, st->pc, (size_t)depth * sizeof st->pc[0]) == 0) {
                if (kept)
                    *kept = m->kept;
                return m->id;
            }
        }
    }
    int i = 0;
    for (; i < depth; i++) {
        uintptr_t base;
        uint64_t frame;
        site_lookup((uintptr_t)st->pc[i], &base, &frame);
        if (stop_base != 0 && base == stop_base)
            break;
        /* Order matters: the same frames in another order are another site. */
        h = hash_mix64((h ^ frame) * HASH_FNV_PRIME + (uint64_t)i);
    }
    if (kept)
        *kept = i;
    h = h != 0 ? h : 1;
    if (memo) {
        struct site_id_memo *m = &site_id_memos[site_id_memo_next++ % SITE_ID_MEMO_ENTRIES];
        m->id = h;
        m->stop_base = stop_base;
        m->depth = depth;
        m->kept = i;
        memcpy(m->pc, st->pc, (size_t)depth * sizeof st->pc[0]);
    }
    return h;
}

size_t site_frame_format(const void *pc, char *buf, size_t len)
{
    struct site_module m;
    int n;
    if (len == 0)
        return 0;
    if (site_module_of((uintptr_t)pc, &m) != 0) {
        n = snprintf(buf, len, "?+0x%lx", (unsigned long)(uintptr_t)pc);
    } else if (m.symbol != NULL && m.symbol[0] != '\0') {
        n = snprintf(buf, len, "%.*s+0x%lx %s+0x%lx", (int)m.name_len, m.name,
                     (unsigned long)((uintptr_t)pc - m.base), m.symbol,
                     (unsigned long)((uintptr_t)pc - m.symbol_addr));
    } else {
        n = snprintf(buf, len, "%.*s+0x%lx", (int)m.name_len, m.name,
                     (unsigned long)((uintptr_t)pc - m.base));
    }
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < len ? (size_t)n : len - 1;
}

void site_id_format(uint64_t id, char out[SITE_ID_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < SITE_ID_HEX_LEN; i++)
        out[i] = hex[(id >> (4 * (SITE_ID_HEX_LEN - 1 - i))) & 0xf];
    out[SITE_ID_HEX_LEN] = '\0';
}

int site_id_parse(const char *text, uint64_t *id)
{
    uint64_t value = 0;
    if (text == NULL)
        return -1;
    for (int i = 0; i < SITE_ID_HEX_LEN; i++) {
        char c = text[i];
        unsigned digit;
        if (c >= '0' && c <= '9')
            digit = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            digit = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            digit = (unsigned)(c - 'A' + 10);
        else
            return -1;   /* also catches a NUL before 16 digits */
        value = value << 4 | digit;
    }
    if (text[SITE_ID_HEX_LEN] != '\0')
        return -1;
    *id = value;
    return 0;
}
