/*
 * test_standin_procaddr.c - cuGetProcAddress: the behaviour seen on a real
 * driver, the per-thread variants, the recapture API's visibility, and the
 * whole table checked against dlsym and against the ABI versions that
 * cudaTypedefs.h declares (PFN_<name>_v<version>[_ptsz|_ptds]).
 */
#include "test_standin_common.h"

#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static void *proc(const char *name, int version, cuuint64_t flags)
{
    void *p = (void *)0x1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)7;
    CK(cuGetProcAddress(name, &p, version, flags, &st));
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS, "%s@%d", name, version);
    return p;
}

Test(procaddr, observed_real_driver_behaviour)
{
    void *p = (void *)0x1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)7;
    /* before cuInit, above the driver's version: refused, outputs untouched */
    cr_assert_eq(cuGetProcAddress("cuInit", &p, 13040, 0, &st), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(p, (void *)0x1);
    cr_assert_eq(st, (CUdriverProcAddressQueryResult)7);
    CK(cuGetProcAddress("cuNoSuchFunction", &p, 12000, 0, &st));
    cr_assert_null(p);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    p = (void *)0x1;
    cr_assert_eq(cuGetProcAddress("cuGraphAddNode", &p, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    cr_assert_null(p);
    CK(cuGetProcAddress("cuInit", &p, 12000, 0, NULL));
    cr_assert_eq(p, sym("cuInit"));
    cr_assert_eq(proc("cuGetProcAddress", 11030, 0), sym("cuGetProcAddress"));
    cr_assert_eq(proc("cuGetProcAddress", 11080, 0), sym("cuGetProcAddress"));
    cr_assert_eq(proc("cuGetProcAddress", 12000, 0), sym("cuGetProcAddress_v2"));
    gpa_v1_fn v1 = (gpa_v1_fn)sym("cuGetProcAddress");
    CK(v1("cuGraphLaunch", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    cr_assert_eq(p, sym("cuGraphLaunch_ptsz"));
    cr_assert_eq(standin_call_count("cuGetProcAddress_v2"), 7);
    cr_assert_eq(standin_call_count("cuGetProcAddress"), 1);
}

Test(procaddr, versions_and_per_thread_variants)
{
    cr_assert_eq(proc("cuStreamBeginCapture", 10000, 0), sym("cuStreamBeginCapture"));
    cr_assert_eq(proc("cuStreamBeginCapture", 10010, 0), sym("cuStreamBeginCapture_v2"));
    cr_assert_eq(proc("cuStreamBeginCapture", 13000, 2), sym("cuStreamBeginCapture_v2_ptsz"));
    cr_assert_eq(proc("cuStreamBeginCapture", 10000, 2), sym("cuStreamBeginCapture_ptsz"));
    cr_assert_eq(proc("cuStreamBeginCapture", 12000, 1), sym("cuStreamBeginCapture_v2"));
    cr_assert_eq(proc("cuGraphInstantiate", 10000, 0), sym("cuGraphInstantiate"));
    cr_assert_eq(proc("cuGraphInstantiate", 11000, 0), sym("cuGraphInstantiate_v2"));
    cr_assert_eq(proc("cuGraphInstantiate", 12000, 0), sym("cuGraphInstantiateWithFlags"));
    cr_assert_eq(proc("cuGraphExecUpdate", 11000, 0), sym("cuGraphExecUpdate"));
    cr_assert_eq(proc("cuGraphExecUpdate", 12000, 0), sym("cuGraphExecUpdate_v2"));
    cr_assert_eq(proc("cuLaunchKernel", 12000, 0), sym("cuLaunchKernel"));
    cr_assert_eq(proc("cuLaunchKernel", 12000, 2), sym("cuLaunchKernel_ptsz"));
    cr_assert_eq(proc("cuMemcpyHtoD", 12000, 2), sym("cuMemcpyHtoD_v2_ptds"));
    cr_assert_eq(proc("cuMemcpyHtoD", 6000, 2), sym("cuMemcpyHtoD_v2"), "no per-thread ABI yet");
    cr_assert_eq(proc("cuStreamGetCaptureInfo", 11030, 0), sym("cuStreamGetCaptureInfo_v2"));
    cr_assert_eq(proc("cuStreamGetCaptureInfo", 13000, 2), sym("cuStreamGetCaptureInfo_v3_ptsz"));
    cr_assert_eq(proc("cuCtxCreate", 13000, 0), sym("cuCtxCreate_v4"));
    cr_assert_eq(proc("cuInit", 2000, 2), sym("cuInit"), "no per-thread twin: the one function");
    /* already-versioned names resolve to themselves */
    cr_assert_eq(proc("cuStreamGetCaptureInfo_v2", 12000, 0), sym("cuStreamGetCaptureInfo_v2"));
    cr_assert_eq(proc("cuGraphInstantiateWithParams_ptsz", 12000, 0), sym("cuGraphInstantiateWithParams_ptsz"));
}

Test(procaddr, recapture_api_visibility)
{
    void *p = (void *)0x1;
    CUdriverProcAddressQueryResult st;
    cr_assert_eq(proc("cuStreamBeginRecaptureToGraph", 13030, 0), sym("cuStreamBeginRecaptureToGraph"));
    cr_assert_eq(cuGetProcAddress("cuStreamBeginRecaptureToGraph", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    standin_set_driver_version(13000);
    p = (void *)0x1;
    st = (CUdriverProcAddressQueryResult)7;
    cr_assert_eq(cuGetProcAddress("cuStreamBeginRecaptureToGraph", &p, 13030, 0, &st), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(p, (void *)0x1);
    cr_assert_eq(st, (CUdriverProcAddressQueryResult)7);
    CK(cuGetProcAddress("cuStreamBeginRecaptureToGraph", &p, 13000, 0, &st));
    cr_assert_null(p);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static const char *flavour_suffix(int flavour, const char *symbol)
{
    if (flavour != 2) return "";
    size_t n = strlen(symbol);
    return strcmp(symbol + n - 5, "_ptds") == 0 ? "_ptds" : "_ptsz";
}

Test(procaddr, every_row_is_the_exported_symbol)
{
    const char *base, *symbol;
    int abi, flavour;
    size_t rows = standin_procaddr_row(0, &base, &symbol, &abi, &flavour);
    cr_assert(rows > 200);
    for (size_t i = 0; i < rows; i++) {
        standin_procaddr_row(i, &base, &symbol, &abi, &flavour);
        void *expect = sym(symbol);
        void *got = NULL;
        CUdriverProcAddressQueryResult st;
        int asked = abi < 13000 ? 13000 : abi;
        cuuint64_t flags = flavour == 2 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
        if (strcmp(symbol, base) != 0) { /* a versioned name resolves to itself */
            CK(cuGetProcAddress(symbol, &got, asked, flags, &st));
            cr_assert_eq(got, expect, "%s by its own name", symbol);
        }
        CK(cuGetProcAddress(base, &got, abi, flags, &st));
        cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
        cr_assert_eq(got, expect, "%s at %d gave another function than %s", base, abi, symbol);
    }
}

/* The ABI versions in the table are cudaTypedefs.h's, and the table holds
 * the newest ABI that header declares for each of its names. */
Test(procaddr, table_agrees_with_cudaTypedefs)
{
    const char *dir = getenv("CUDA_INCLUDE") ? getenv("CUDA_INCLUDE") : "/usr/local/cuda/include";
    char path[512], *text;
    snprintf(path, sizeof(path), "%s/cudaTypedefs.h", dir);
    FILE *f = fopen(path, "r");
    if (!f) cr_skip_test("no %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = calloc(1, (size_t)size + 1);
    cr_assert_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    const char *base, *symbol;
    int abi, flavour;
    size_t rows = standin_procaddr_row(0, &base, &symbol, &abi, &flavour);
    for (size_t i = 0; i < rows; i++) {
        char pfn[160];
        standin_procaddr_row(i, &base, &symbol, &abi, &flavour);
        if (abi >= 13030) continue; /* the 13.3 additions are not in the 13.0 header */
        size_t blen = strlen(base);
        if (strncmp(symbol, base, blen) != 0 || (symbol[blen] && symbol[blen] != '_'))
            continue; /* an alias row (cuGraphInstantiate -> cuGraphInstantiateWithFlags) */
        snprintf(pfn, sizeof(pfn), "PFN_%s_v%d%s)", base, abi, flavour_suffix(flavour, symbol));
        cr_assert(strstr(text, pfn) != NULL, "%s (for %s) is not in cudaTypedefs.h", pfn, symbol);
        /* no newer ABI of this name and flavour in the header than the table's newest */
        for (const char *at = text; (at = strstr(at, "PFN_")) != NULL; at++) {
            if (strncmp(at + 4, base, blen) != 0 || strncmp(at + 4 + blen, "_v", 2) != 0) continue;
            int v = atoi(at + 6 + blen);
            const char *tail = at + 6 + blen;
            while (*tail >= '0' && *tail <= '9') tail++;
            bool per_thread = strncmp(tail, "_pt", 3) == 0;
            if (per_thread != (flavour == 2) || v <= abi) continue;
            void *got = NULL;
            CUdriverProcAddressQueryResult st;
            CK(cuGetProcAddress(base, &got, v, per_thread ? 2 : 0, &st));
            const char *b2, *s2;
            int a2 = 0, f2;
            for (size_t j = 0; j < rows; j++) {
                standin_procaddr_row(j, &b2, &s2, &a2, &f2);
                if (sym(s2) == got && strcmp(b2, base) == 0 && a2 == v) break;
                a2 = -1;
            }
            cr_assert_eq(a2, v, "cudaTypedefs.h has %s ABI %d, the stand-in does not", base, v);
        }
    }
    free(text);
}
