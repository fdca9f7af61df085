/*
 * directprog.c - scripts/benchmarks/bench_direct.h finds the real driver's functions
 * past recap: for a few driver functions, prints which library the linked
 * symbol and the looked-up one live in, whether they are the same, and
 * what the looked-up cuDriverGetVersion answers. Without recap both name
 * the driver; under recap the linked one is recap's wrapper and the
 * looked-up one still the driver's. Exit 0, or 1 when a lookup fails.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../../scripts/benchmarks/bench_direct.h"

static const char *library_of(void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

int main(void)
{
    struct { const char *name; void *linked; } fns[] = {
        { "cuLaunchKernel", (void *)cuLaunchKernel },
        { "cuStreamBeginCapture_v2", (void *)cuStreamBeginCapture },
        { "cuGraphExecUpdate_v2", (void *)cuGraphExecUpdate },
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        int found_library = 0;
        void *direct = bench_real_driver_function(fns[i].name, &found_library);
        if (!direct) {
            fprintf(stderr, "%s not found (libcuda loaded: %d)\n", fns[i].name, found_library);
            return 1;
        }
        printf("%s linked=%s direct=%s same=%d\n", fns[i].name, library_of(fns[i].linked),
               library_of(direct), direct == fns[i].linked);
    }
    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))bench_real_driver_function("cuInit", NULL);
    CUresult (*version)(int *) =
        (CUresult (*)(int *))bench_real_driver_function("cuDriverGetVersion", NULL);
    int v = 0;
    printf("cuInit rc=%d\n", init ? (int)init(0) : -1);
    int rc = version ? (int)version(&v) : -1;
    printf("cuDriverGetVersion rc=%d version=%d\n", rc, v);
    return 0;
}
