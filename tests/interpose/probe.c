/*
 * probe.c - reach the driver by every path a real program takes, and
 * report what each path handed back: `probe PATH`.
 *
 *   direct    exported symbols, linked with -lcuda (PLT calls)
 *   ptsz      the per-thread-default-stream exports, NULL stream
 *   dlsym     dlopen("libcuda.so.1") + dlsym of each exact name
 *   dlvsym    the same through dlvsym
 *   procaddr  as the CUDA runtime does: dlsym(cuGetProcAddress_v2), ask it
 *             for "cuGetProcAddress" itself, then every function by base
 *             name at a version, flags 0 and PER_THREAD (2)
 *   abi       for (name, version, flags) triples: is the pointer
 *             cuGetProcAddress returns the function of the exact ABI?
 *   untouched names recap must not answer (cuGetExportTable, cudnn*)
 *   race      first calls from 8 threads at once
 *
 * Each path runs the same capture loop and prints results and return codes,
 * so output under recap must equal output without it; recap's verbose lines
 * on stderr show which captures it saw.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scenario/scenario.h"
#include "standin.h"

typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*inst_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*launch_fn)(CUgraphExec, CUstream);
typedef CUresult (*gdestroy_fn)(CUgraph);
typedef CUresult (*edestroy_fn)(CUgraphExec);
typedef CUresult (*kernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*proc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*proc_v1_fn)(const char *, void **, int, cuuint64_t);

struct api {
    begin_fn begin;
    end_fn end;
    inst_fn instantiate;
    launch_fn launch;
    gdestroy_fn graph_destroy;
    edestroy_fn exec_destroy;
    kernel_fn launch_kernel;
};

static struct sc_context ctx;

/* The capture loop every path runs, through the pointers it obtained. */
static void capture_loop(const char *path, const struct api *a, CUstream stream)
{
    for (int it = 0; it < 4; it++) {
        CUgraph g = NULL;
        CUgraphExec e = NULL;
        float alpha = 1.0f + (float)it;
        int n = SC_N;
        void *params[] = { &alpha, &ctx.buf[0], &ctx.buf[1], &n };
        int rb = a->begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
        int rk = a->launch_kernel(ctx.axpy, SC_N / 64, 1, 1, 64, 1, 1, 0, stream, params, NULL);
        int re = a->end(stream, &g);
        int ri = a->instantiate(&e, g, 0);
        int rl = a->launch(e, stream);
        cuStreamSynchronize(stream);
        int rx = a->exec_destroy(e);
        int rg = a->graph_destroy(g);
        printf("%s it=%d rc=%d,%d,%d,%d,%d,%d,%d sum=%08x\n", path, it, rb, rk, re, ri, rl, rx, rg,
               sc_checksum(&ctx));
    }
}

static void path_direct(void)
{
    struct api a = { cuStreamBeginCapture_v2, cuStreamEndCapture, cuGraphInstantiateWithFlags,
                     cuGraphLaunch, cuGraphDestroy, cuGraphExecDestroy, cuLaunchKernel };
    capture_loop("direct", &a, ctx.stream[0]);
}

/* The _ptsz exports are declared only for per-thread builds. */
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);

static void path_ptsz(void)
{
    struct api a = { cuStreamBeginCapture_v2_ptsz, cuStreamEndCapture_ptsz,
                     cuGraphInstantiateWithFlags, cuGraphLaunch_ptsz, cuGraphDestroy,
                     cuGraphExecDestroy, cuLaunchKernel_ptsz };
    capture_loop("ptsz", &a, NULL);      /* NULL: this thread's default stream */
}

static void *lookup(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        printf("lookup %s: missing\n", name);
        exit(3);
    }
    return p;
}

static void path_dlsym(int versioned)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (versioned) {
        /* libcuda defines no symbol versions while it does carry version
         * information (for the glibc symbols it uses), so glibc's dlvsym
         * finds none of its functions: recap must answer exactly that. */
        printf("dlvsym cuStreamBeginCapture_v2=%p cuGetProcAddress_v2=%p\n",
               dlvsym(h, "cuStreamBeginCapture_v2", "CUDA_ANY"),
               dlvsym(h, "cuGetProcAddress_v2", "GLIBC_2.2.5"));
        return;
    }
    struct api a = {
        lookup(h, "cuStreamBeginCapture_v2" ), lookup(h, "cuStreamEndCapture" ),
        lookup(h, "cuGraphInstantiateWithFlags" ), lookup(h, "cuGraphLaunch" ),
        lookup(h, "cuGraphDestroy" ), lookup(h, "cuGraphExecDestroy" ),
        lookup(h, "cuLaunchKernel" ),
    };
    /* What came back must be what a plain symbol reference gives: recap's
     * export when recap is there, the driver's when not. */
    printf("dlsym same-as-global=%d\n",
           (void *)a.begin == dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2"));
    capture_loop("dlsym", &a, ctx.stream[0]);
}

static proc_v2_fn runtime_style_get_proc(int version)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    proc_v2_fn first = (proc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    void *self = NULL;
    CUdriverProcAddressQueryResult st;
    CUresult r = first("cuGetProcAddress", &self, version, 0, &st);
    printf("procaddr self version=%d rc=%d status=%d same=%d\n", version, (int)r, (int)st,
           self == (void *)first);
    return (proc_v2_fn)self;
}

static void *get(proc_v2_fn gpa, const char *name, int version, cuuint64_t flags)
{
    void *p = NULL;
    /* The runtime passes NULL for the status in some calls. */
    CUresult r = gpa(name, &p, version, flags, NULL);
    if (r != CUDA_SUCCESS || !p) {
        printf("get %s: rc=%d\n", name, (int)r);
        exit(3);
    }
    return p;
}

static void path_procaddr(void)
{
    proc_v2_fn gpa = runtime_style_get_proc(12000);
    runtime_style_get_proc(11030);
    for (int flags = 0; flags <= 2; flags += 2) {
        struct api a = {
            get(gpa, "cuStreamBeginCapture", 12000, flags), get(gpa, "cuStreamEndCapture", 12000, flags),
            get(gpa, "cuGraphInstantiate", 12000, flags), get(gpa, "cuGraphLaunch", 12000, flags),
            get(gpa, "cuGraphDestroy", 12000, flags), get(gpa, "cuGraphExecDestroy", 12000, flags),
            get(gpa, "cuLaunchKernel", 12000, flags),
        };
        capture_loop(flags ? "procaddr-ptds" : "procaddr", &a, flags ? NULL : ctx.stream[0]);
    }
}

/* For each request, the pointer must be the function of exactly that ABI:
 * the one a plain reference to the exact name resolves to. */
static void path_abi(void)
{
    static const struct { const char *base; int version; int flags; const char *exact; } cases[] = {
        { "cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture" },
        { "cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2" },
        { "cuStreamBeginCapture", 12000, 2, "cuStreamBeginCapture_v2_ptsz" },
        { "cuStreamEndCapture", 12000, 2, "cuStreamEndCapture_ptsz" },
        { "cuGraphInstantiate", 10000, 0, "cuGraphInstantiate" },
        { "cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2" },
        { "cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags" },
        { "cuGraphExecUpdate", 11000, 0, "cuGraphExecUpdate" },
        { "cuGraphExecUpdate", 12000, 0, "cuGraphExecUpdate_v2" },
        { "cuStreamGetCaptureInfo", 11030, 0, "cuStreamGetCaptureInfo_v2" },
        { "cuStreamGetCaptureInfo", 12030, 2, "cuStreamGetCaptureInfo_v3_ptsz" },
        { "cuLaunchKernel", 12000, 2, "cuLaunchKernel_ptsz" },
        { "cuGetProcAddress", 11030, 0, "cuGetProcAddress" },
        { "cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2" },
    };
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        cuGetProcAddress_v2;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *p = NULL;
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
        CUresult r = gpa(cases[i].base, &p, cases[i].version, (cuuint64_t)cases[i].flags, &st);
        void *exact = dlsym(RTLD_DEFAULT, cases[i].exact);
        printf("abi %s@%d/%d rc=%d status=%d exact(%s)=%s\n", cases[i].base, cases[i].version,
               cases[i].flags, (int)r, (int)st, cases[i].exact,
               p && p == exact ? "yes" : "NO");
    }
    /* The 4-argument v1 answers the same way. */
    proc_v1_fn v1 = (proc_v1_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    void *p = NULL;
    CUresult r = v1("cuStreamEndCapture", &p, 11030, 0);
    printf("abi v1 cuStreamEndCapture rc=%d exact=%s\n", (int)r,
           p == dlsym(RTLD_DEFAULT, "cuStreamEndCapture") ? "yes" : "NO");
}

static void path_untouched(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *p = NULL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CUresult r = cuGetProcAddress_v2("cuGetExportTable", &p, 12000, 0, &st);
    /* cuGetExportTable is not interposed: the driver's own function. */
    void *own = dlsym(h, "cuGetExportTable");
    /* Which object holds the answer: compared with the driver's own link
     * map, never by a file name (any checkout's path may contain "recap"). */
    Dl_info info = { 0 };
    struct link_map *holder = NULL, *driver = NULL;
    int known = dladdr1(p, &info, (void **)&holder, RTLD_DL_LINKMAP) && holder &&
                dlinfo(h, RTLD_DI_LINKMAP, &driver) == 0;
    printf("untouched cuGetExportTable rc=%d same=%d module=%s\n", (int)r, p == own,
           !known ? "unknown" : holder == driver ? "driver" : "other");
    printf("untouched cudnnCreate=%p\n", dlsym(h, "cudnnCreate"));
    p = (void *)1;
    r = cuGetProcAddress_v2("cuNoSuchFunction", &p, 12000, 0, &st);
    printf("untouched unknown rc=%d p=%p status=%d\n", (int)r, p, (int)st);
    p = (void *)1;
    st = (CUdriverProcAddressQueryResult)7;
    r = cuGetProcAddress_v2("cuStreamBeginCapture", &p, 99000, 0, &st);
    printf("untouched above-driver rc=%d p=%p status=%d\n", (int)r, p, (int)st);
}

static pthread_barrier_t race_barrier;

static void *race_body(void *arg)
{
    long id = (long)arg;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    pthread_barrier_wait(&race_barrier);
    proc_v2_fn gpa = (proc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    void *p = NULL;
    gpa("cuStreamBeginCapture", &p, 12000, id % 2 ? 2 : 0, NULL);
    return p;
}

static void path_race(void)
{
    pthread_t t[8];
    void *results[8];
    pthread_barrier_init(&race_barrier, NULL, 8);
    for (long i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, race_body, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], &results[i]);
    int consistent = 1;
    for (int i = 2; i < 8; i++)
        consistent &= results[i] == results[i % 2];
    printf("race consistent=%d distinct-ptds=%d\n", consistent, results[0] != results[1]);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "direct";

    if (!strcmp(path, "next-first") || !strcmp(path, "vnext-first")) {
        /* The process's very first dlsym or dlvsym, before any driver call:
         * recap's exported stub has not found glibc's yet (its slow path),
         * and must still leave with the caller's return address. */
#if defined(__aarch64__)
        static const char base_version[] = "GLIBC_2.17";
#else
        static const char base_version[] = "GLIBC_2.2.5";
#endif
        void *next = path[0] == 'v' ? dlvsym(RTLD_NEXT, "getenv", base_version)
                                    : dlsym(RTLD_NEXT, "getenv");
        void *deflt = dlsym(RTLD_DEFAULT, "getenv");
        printf("%s getenv next=%d default=%d\n", path, next == (void *)getenv,
               deflt == (void *)getenv);
        return 0;
    }
    if (!strcmp(path, "before-init")) {
        /* cuGetProcAddress may be called before cuInit. */
        void *p = NULL;
        CUresult r = cuGetProcAddress_v2("cuInit", &p, 12000, 0, NULL);
        printf("before-init rc=%d found=%d\n", (int)r, p != NULL);
        return 0;
    }
    if (!strcmp(path, "race")) {
        path_race();
        return 0;
    }
    sc_setup(&ctx);
    if (!strcmp(path, "direct"))
        path_direct();
    else if (!strcmp(path, "ptsz"))
        path_ptsz();
    else if (!strcmp(path, "dlsym"))
        path_dlsym(0);
    else if (!strcmp(path, "dlvsym"))
        path_dlsym(1);
    else if (!strcmp(path, "procaddr"))
        path_procaddr();
    else if (!strcmp(path, "abi"))
        path_abi();
    else if (!strcmp(path, "untouched"))
        path_untouched();
    else
        return 2;
    return 0;
}
