/*
 * standin_procaddr.c - cuGetProcAddress (the 11030 and 12000 ABIs).
 *
 * Owns: the table of (base name, ABI version, stream flavour, symbol,
 * address) built from standin_exports.def, and the lookup rules seen on a
 * real driver: a cudaVersion above the reported driver version is refused
 * with *pfn and *symbolStatus untouched; an unknown name succeeds with NULL
 * and SYMBOL_NOT_FOUND; a known name asked below its first ABI gets
 * CUDA_ERROR_NOT_FOUND and VERSION_NOT_SUFFICIENT; otherwise the newest ABI
 * at or before cudaVersion, the _ptsz/_ptds twin for flag 2. A base name
 * whose first ABI is newer than the reported driver version is unknown to
 * that driver (cuStreamBeginRecaptureToGraph on 13.0). Exact exported names
 * resolve to themselves. Must never: return an address other than the
 * exported symbol's own (dlsym gives the same pointer).
 */
#include "standin_internal.h"

#include <string.h>

enum flavour { ANY, LEGACY, PERTHREAD };

struct proc_row {
    const char *base, *symbol;
    int abi;
    enum flavour flavour;
    void *fn;
};

static const struct proc_row rows[] = {
#define SI_FN(sym, base, abi, fl) {#base, #sym, abi, fl, (void *)sym},
#define SI_ALIAS(base, abi, fl, sym) {#base, #sym, abi, fl, (void *)sym},
#include "standin_exports.def"
};

static bool flavour_ok(enum flavour f, bool per_thread, bool fallback)
{
    if (f == ANY) return true;
    if (per_thread && !fallback) return f == PERTHREAD;
    return f == LEGACY;
}

/* The newest row for `name` usable at cudaVersion, or NULL; *known says
 * whether the reported driver knows the name at all. */
static const struct proc_row *lookup(const char *name, int cudaVersion, bool per_thread, bool *known)
{
    const struct proc_row *best = NULL;
    *known = false;
    for (int pass = 0; pass < 2 && !best; pass++) {
        for (size_t i = 0; i < SI_ARRAY_LEN(rows); i++) {
            const struct proc_row *r = &rows[i];
            if (strcmp(r->base, name) != 0 || r->abi > si.driver_version) continue;
            *known = true;
            if (r->abi > cudaVersion || !flavour_ok(r->flavour, per_thread, pass == 1)) continue;
            if (!best || r->abi > best->abi) best = r;
        }
        if (!per_thread) break;
    }
    if (best || *known) return best;
    for (size_t i = 0; i < SI_ARRAY_LEN(rows); i++) { /* an exact exported name */
        const struct proc_row *r = &rows[i];
        if (strcmp(r->symbol, name) != 0 || r->abi > si.driver_version) continue;
        *known = true;
        if (r->abi <= cudaVersion) return r;
    }
    return NULL;
}

static CUresult get_proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    bool known;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (cudaVersion > si.driver_version) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct proc_row *r = lookup(symbol, cudaVersion, per_thread, &known);
    *pfn = r ? r->fn : NULL;
    if (status) {
        *status = r ? CU_GET_PROC_ADDRESS_SUCCESS
                    : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    if (r || !known) return CUDA_SUCCESS;
    return CUDA_ERROR_NOT_FOUND;
}

SI_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags)
{
    SI_ENTER_AS(cuGetProcAddress, false);
    return si_leave(get_proc_address(symbol, pfn, cudaVersion, flags, NULL));
}

SI_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                               cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    SI_ENTER_AS(cuGetProcAddress_v2, false);
    return si_leave(get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus));
}

/* For the tests: the whole table, so they can check it against dlsym and
 * cudaTypedefs.h. Returns the number of rows; fills row i when asked. */
SI_EXPORT size_t standin_procaddr_row(size_t i, const char **base, const char **symbol, int *abi,
                                      int *flavour)
{
    if (i < SI_ARRAY_LEN(rows)) {
        *base = rows[i].base;
        *symbol = rows[i].symbol;
        *abi = rows[i].abi;
        *flavour = rows[i].flavour;
    }
    return SI_ARRAY_LEN(rows);
}
