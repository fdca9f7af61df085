/*
 * libnext.c - a library that wraps functions itself and finds "the next
 * definition after me" with dlsym(RTLD_NEXT, ...), as LLVM's OpenMP runtime
 * and other interposers do. If recap forwarded RTLD_NEXT from its own code,
 * glibc would answer relative to recap and this library would be handed
 * its own function (trap 3 of INTERPOSITION.md).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

#include <cuda.h>

/* The link map of an already loaded library, or NULL. */
static struct link_map *loaded(const char *soname)
{
    struct link_map *map = NULL;
    void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0)
        map = NULL;
    dlclose(h);
    return map;
}

/* Which object holds p, by its link map (never by a file name: any path
 * may contain "libc" or "cuda"). recap, or anything else, is "other". */
static const char *owner_of(void *p, void *self)
{
    Dl_info info = { 0 };
    struct link_map *holder = NULL;
    if (!p)
        return "none";
    if (p == self)
        return "SELF";
    if (!dladdr1(p, &info, (void **)&holder, RTLD_DL_LINKMAP) || !holder)
        return "unknown";
    if (holder == loaded("libc.so.6"))
        return "libc";
    if (holder == loaded("libcuda.so.1"))
        return "driver";
    return "other";
}

#define EXPORT __attribute__((visibility("default")))

EXPORT char *getenv(const char *name);
EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream);
EXPORT void next_report(void);

char *getenv(const char *name)
{
    static char *(*next)(const char *);
    if (!next)
        next = (char *(*)(const char *))dlsym(RTLD_NEXT, "getenv");
    return next && (void *)next != (void *)getenv ? next(name) : NULL;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    static CUresult (*next)(CUgraphExec, CUstream);
    if (!next)
        next = (CUresult (*)(CUgraphExec, CUstream))dlsym(RTLD_NEXT, "cuGraphLaunch");
    if (!next || (void *)next == (void *)cuGraphLaunch)
        return CUDA_ERROR_UNKNOWN;
    return next(exec, stream);
}

/* What RTLD_NEXT gives this library, by owning module. */
void next_report(void)
{
    printf("rtld_next getenv=%s cuGraphLaunch=%s\n",
           owner_of(dlsym(RTLD_NEXT, "getenv"), (void *)getenv),
           owner_of(dlsym(RTLD_NEXT, "cuGraphLaunch"), (void *)cuGraphLaunch));
}
