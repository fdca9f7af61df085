/*
 * nccl_hooks.c - NCCL's communicator teardown, for which recap must let go
 * of the graphs it keeps (module prefix nccl_hook_).
 *
 * NCCL attaches a user object to every graph that captures a collective; the
 * object's destructor hands the captured plan back to the communicator, and
 * tearing the communicator down (ncclCommFinalize, ncclCommDestroy,
 * ncclCommAbort) waits until every such destructor has run. An executable
 * graph recap keeps for reuse after the program destroyed it holds such
 * references (its own, and those recap took when it reused it), so the
 * program would wait forever for graphs it no longer has. Before each of
 * these calls recap therefore destroys everything it keeps and gives back
 * every reference it holds (cache_release_all), then makes the call.
 *
 * Owns: finding NCCL's definitions (the next object after librecap that
 * defines the name). Must never: call into NCCL before the release, hold a
 * lock across the call, or fail the program where NCCL would not: without
 * a definition to forward to it returns ncclInvalidUsage, what NCCL returns
 * for a communicator it does not know.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

#include "shim/state/cache.h"
#include "shim/state/events.h"
#include "shim/base/libc_dl.h"
#include "shim/base/runtime.h"

#define NCCL_HOOK_EXPORT __attribute__((visibility("default")))
#define NCCL_HOOK_INVALID_USAGE 5      /* ncclInvalidUsage */

typedef int (*nccl_hook_comm_fn)(void *comm);

struct nccl_hook_search {
    const char *name;
    const void *self_base;         /* librecap's load address */
    void *found;
};

/* One loaded object: its own definition of the name (or one of its
 * dependencies'), unless that is librecap's. */
static int nccl_hook_search_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct nccl_hook_search *s = arg;
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
        return 0;
    void *handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL)
        return 0;
    void *fn = libc_dlsym_fn(handle, s->name);
    dlclose(handle);
    Dl_info where;
    if (fn == NULL || dladdr(fn, &where) == 0 || where.dli_fbase == s->self_base)
        return 0;
    s->found = fn;
    return 1;
}

/* NCCL's definition, looked up once per name. RTLD_NEXT finds it when NCCL
 * is in the global scope; a library that Python loaded (PyTorch's NCCL)
 * sits in the local scope of its dlopen, where only a search of the loaded
 * objects' own scopes finds it. */
static nccl_hook_comm_fn nccl_hook_next(nccl_hook_comm_fn *cached, const char *name)
{
    nccl_hook_comm_fn fn = __atomic_load_n(cached, __ATOMIC_ACQUIRE);
    if (fn != NULL || libc_dl_resolve() != 0)
        return fn;
    /* glibc resolves RTLD_NEXT from its caller's address: this file's code
     * in librecap, so the answer is the next object's definition. */
    fn = (nccl_hook_comm_fn)libc_dlsym_fn(RTLD_NEXT, name);
    if (fn == NULL) {
        Dl_info self;
        struct nccl_hook_search search = { name, NULL, NULL };
        if (dladdr((const void *)nccl_hook_search_object, &self) != 0) {
            search.self_base = self.dli_fbase;
            dl_iterate_phdr(nccl_hook_search_object, &search);
        }
        fn = (nccl_hook_comm_fn)search.found;
    }
    __atomic_store_n(cached, fn, __ATOMIC_RELEASE);
    return fn;
}

static int nccl_hook_call(nccl_hook_comm_fn *cached, const char *name, void *comm)
{
    nccl_hook_comm_fn next = nccl_hook_next(cached, name);
    int released = cache_release_all();
    event_comm_teardown(name, released, next != NULL);
    if (next == NULL)
        return NCCL_HOOK_INVALID_USAGE;
    return next(comm);
}

static nccl_hook_comm_fn nccl_hook_finalize, nccl_hook_destroy, nccl_hook_abort;

/* NCCL's signatures, ncclResult_t (an int enum) and ncclComm_t (a pointer),
 * without NCCL's header. */
NCCL_HOOK_EXPORT int ncclCommFinalize(void *comm);
NCCL_HOOK_EXPORT int ncclCommDestroy(void *comm);
NCCL_HOOK_EXPORT int ncclCommAbort(void *comm);

NCCL_HOOK_EXPORT int ncclCommFinalize(void *comm)
{
    return nccl_hook_call(&nccl_hook_finalize, "ncclCommFinalize", comm);
}

NCCL_HOOK_EXPORT int ncclCommDestroy(void *comm)
{
    return nccl_hook_call(&nccl_hook_destroy, "ncclCommDestroy", comm);
}

NCCL_HOOK_EXPORT int ncclCommAbort(void *comm)
{
    return nccl_hook_call(&nccl_hook_abort, "ncclCommAbort", comm);
}
