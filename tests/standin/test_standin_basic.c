/*
 * test_standin_basic.c - the stand-in outside capture: initialisation,
 * errors, contexts, memory, kernels, host functions, events, counters,
 * fault injection, misuse accounting and the exit report.
 */
#include "test_standin_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

Test(basic, calls_before_init)
{
    CUdevice dev;
    int version = 0;
    const char *name = NULL, *text = NULL;
    cr_assert_eq(cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
    cr_assert_eq(cuStreamSynchronize(NULL), CUDA_ERROR_NOT_INITIALIZED);
    CK(cuDriverGetVersion(&version));
    cr_assert_eq(version, 13030);
    CK(cuGetErrorName(CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, &name));
    cr_assert_str_eq(name, "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE");
    CK(cuGetErrorString((CUresult)918, &text));
    cr_assert(strlen(text) > 0);
    CK(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, &name));
    cr_assert_str_eq(name, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT");
    cr_assert_eq(cuGetErrorName((CUresult)12345, &name), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(name);
    cr_assert_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    cr_assert_eq(standin_call_count("cuDeviceGet"), 2);
    cr_assert_eq(standin_call_count("cuInit"), 2);
}

Test(basic, version_knob_and_export_table)
{
    int version;
    const void *table = NULL;
    CUuuid id = {{0}};
    standin_set_driver_version(13000);
    CK(cuDriverGetVersion(&version));
    cr_assert_eq(version, 13000);
    cr_assert_eq(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    cr_assert_eq(standin_call_count("cuGetExportTable"), 1);
}

Test(basic, devices_and_contexts, .init = setup)
{
    int count, attr;
    char name[64];
    CUcontext c1, cur;
    CUdevice dev;
    CK(cuDeviceGetCount(&count));
    cr_assert_eq(count, 1);
    cr_assert_eq(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGetName(name, sizeof(name), 0));
    cr_assert(strstr(name, "Stand-in") != NULL);
    CK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    cr_assert_eq(attr, 1024);
    CK(cuCtxCreate(&c1, NULL, 0, 0));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, c1);
    CK(cuCtxPopCurrent(&cur));
    cr_assert_eq(cur, c1);
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, fx.ctx);
    CK(cuCtxPushCurrent(c1));
    CK(cuCtxDestroy(c1));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, fx.ctx);
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuCtxPushCurrent(c1), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    CK(cuCtxSynchronize());
}

Test(basic, memory_copies_and_memsets, .init = setup)
{
    int host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = i * 3;
    CK(cuMemcpyHtoD(fx.buf, host, sizeof(host)));
    CK(cuMemcpyDtoD(fx.buf2, fx.buf, sizeof(host)));
    CK(cuMemcpyDtoH(back, fx.buf2, sizeof(back)));
    cr_assert_arr_eq(back, host, sizeof(host));
    CK(cuMemsetD8(fx.buf, 0x7f, 4));
    cr_assert_eq(read_int(fx.buf, 0), 0x7f7f7f7f);
    CK(cuMemsetD16(fx.buf, 0x1234, 2));
    cr_assert_eq(read_int(fx.buf, 0), 0x12341234);
    CK(cuMemsetD32Async(fx.buf, 77, N, fx.s1)); /* not capturing: runs now */
    cr_assert_eq(read_int(fx.buf, N - 1), 77);
    CK(cuMemcpyAsync(fx.buf2, fx.buf, 8, fx.s1));
    cr_assert_eq(read_int(fx.buf2, 1), 77);
    CK(cuMemcpyHtoDAsync(fx.buf, host, 8, fx.s2));
    CK(cuMemcpyDtoHAsync(back, fx.buf, 8, fx.s2));
    cr_assert_eq(back[1], 3);
    /* 2D: an 8x4 region of ints with a pitch of 16 ints */
    CK(cuMemsetD2D32Async(fx.buf, 16 * sizeof(int), 5, 8, 4, fx.s1));
    cr_assert_eq(read_int(fx.buf, 16 * 3 + 7), 5);
    cr_assert_eq(read_int(fx.buf, 16 * 3 + 8), 77); /* outside the 8-wide rows */
    CUDA_MEMCPY2D c = {0};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = fx.buf;
    c.srcPitch = 16 * sizeof(int);
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = back;
    c.dstPitch = 8 * sizeof(int);
    c.WidthInBytes = 8 * sizeof(int);
    c.Height = 4;
    CK(cuMemcpy2DAsync(&c, fx.s1));
    cr_assert_eq(back[8 * 3 + 7], 5);
    cr_assert_eq(cuMemcpyHtoD(fx.buf + N * sizeof(int) - 4, host, 8), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemsetD32(fx.buf + 2, 1, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
}

Test(basic, memcpy3d_and_unified, .init = setup)
{
    int host[N];
    CUDA_MEMCPY3D c = {0};
    for (int i = 0; i < N; i++) host[i] = 100 + i;
    c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = (CUdeviceptr)(uintptr_t)host;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = fx.buf;
    c.srcPitch = c.dstPitch = 8 * sizeof(int);
    c.srcHeight = c.dstHeight = 2;
    c.WidthInBytes = 4 * sizeof(int);
    c.Height = 2;
    c.Depth = 2;
    CK(cuMemcpy3DAsync(&c, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 100);
    cr_assert_eq(read_int(fx.buf, 8 + 3), 111);
    cr_assert_eq(read_int(fx.buf, 16 + 8 + 3), 127);
    cr_assert_eq(read_int(fx.buf, 4), 0);
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)host, fx.buf2, 4));
    cr_assert_eq(host[0], 0);
}

Test(basic, device_memory_capacity, .init = setup)
{
    CUdeviceptr p, q;
    size_t base = standin_device_memory_used(), free_b, total;
    standin_set_device_memory(base + (1u << 20));
    cr_assert_eq(cuMemAlloc(&p, 2u << 20), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemAlloc(&p, 1u << 19));
    cr_assert_eq(standin_device_memory_used(), base + (1u << 19));
    cr_assert_eq(cuMemAlloc(&q, 1u << 20), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemGetInfo(&free_b, &total));
    cr_assert_eq(free_b, (1u << 19));
    long live = standin_live_objects("memory");
    CK(cuMemFree(p));
    cr_assert_eq(standin_live_objects("memory"), live - 1);
    cr_assert_eq(standin_device_memory_used(), base);
    CK(cuMemAlloc(&q, 1u << 20));
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuMemFree(q + 4), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses);
    cr_assert_eq(cuMemAlloc(&q, 0), CUDA_ERROR_INVALID_VALUE);
}

Test(basic, double_free_is_a_misuse, .init = setup)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    CK(cuMemFree(p));
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    cr_assert(strstr(standin_last_misuse(), "already freed") != NULL);
}

Test(basic, host_memory, .init = setup)
{
    void *p;
    CK(cuMemAllocHost(&p, 256));
    memset(p, 1, 256);
    CK(cuMemFreeHost(p));
    cr_assert_eq(cuMemFreeHost(p), CUDA_ERROR_INVALID_VALUE);
}

Test(basic, kernels_params_and_extra, .init = setup)
{
    size_t off, size;
    CK(launch_int(fx.fill, fx.s1, fx.buf, 9));
    CK(cuStreamSynchronize(fx.s1)); /* s1 is non-blocking: the NULL stream does not wait for it */
    CK(launch_int(fx.add, NULL, fx.buf, 2));
    cr_assert_eq(read_int(fx.buf, N - 1), 11);
    size_t expect_off[] = {0, 8, 16, 24}, expect_size[] = {1, 8, 2, 8};
    for (size_t i = 0; i < 4; i++) {
        CK(cuFuncGetParamInfo(fx.mix, i, &off, &size));
        cr_assert_eq(off, expect_off[i]);
        cr_assert_eq(size, expect_size[i]);
    }
    cr_assert_eq(cuFuncGetParamInfo(fx.mix, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
    struct { char c; double f; short s; CUdeviceptr out; } packed = {5, 6.0, 7, fx.buf2};
    size_t bytes = sizeof(packed);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                     CU_LAUNCH_PARAM_END};
    CK(cuLaunchKernel(fx.mix, 3, 1, 1, 4, 1, 1, 0, fx.s1, NULL, extra));
    cr_assert_eq(read_int(fx.buf2, 0), 5);
    cr_assert_eq(read_int(fx.buf2, 1), 6);
    cr_assert_eq(read_int(fx.buf2, 2), 7);
    cr_assert_eq(read_int(fx.buf2, 3), 12);
    int n = N, v = 1;
    void *args[] = {&fx.buf, &v, &n};
    cr_assert_eq(cuLaunchKernel(fx.add, 0, 1, 1, 1, 1, 1, 0, fx.s1, args, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuLaunchKernel(fx.add, 1, 1, 1, 1, 0, 1, 0, fx.s1, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CUfunction missing;
    cr_assert_eq(cuModuleGetFunction(&missing, fx.mod, "nope"), CUDA_ERROR_NOT_FOUND);
    CUfunction again;
    CK(cuModuleGetFunction(&again, fx.mod, "add"));
    cr_assert_eq(again, fx.add);
    int attr;
    CK(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fx.add));
    cr_assert_eq(attr, 1024);
}

Test(basic, library_kernels_and_launch_ex, .init = setup)
{
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    CK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "fill"));
    CK(launch_int((CUfunction)k, fx.s1, fx.buf, 4)); /* a CUkernel where a CUfunction goes */
    cr_assert_eq(read_int(fx.buf, 3), 4);
    CK(cuKernelGetFunction(&f, k));
    CK(launch_int(f, fx.s1, fx.buf, 8));
    cr_assert_eq(read_int(fx.buf, 3), 8);
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = -1};
    CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                          .blockDimZ = 1, .hStream = fx.s2, .attrs = &attr, .numAttrs = 1};
    int n = N, v = 10;
    void *args[] = {&fx.buf, &v, &n};
    CK(cuLaunchKernelEx(&cfg, fx.add, args, NULL));
    cr_assert_eq(read_int(fx.buf, 0), 18);
    CK(cuLibraryUnload(lib));
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(launch_int((CUfunction)k, fx.s1, fx.buf, 1), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
}

static CUresult from_host_fn;
static int host_runs;

static void host_fn(void *data)
{
    host_runs += *(int *)data;
    from_host_fn = cuStreamQuery(fx.s1);
}

Test(basic, host_functions_run_inline_and_may_not_call_cuda, .init = setup)
{
    int inc = 3;
    unsigned long misuses = standin_misuse_count();
    CK(cuLaunchHostFunc(fx.s1, host_fn, &inc));
    standin_async_drain(); /* STANDIN_ASYNC=1: it runs on the stream's worker */
    cr_assert_eq(host_runs, 3);
    cr_assert_eq(from_host_fn, CUDA_ERROR_NOT_PERMITTED);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    cr_assert_eq(standin_call_count("cuStreamQuery"), 1);
}

Test(basic, events, .init = setup)
{
    CUevent a, b, nt;
    float ms = -1;
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    cr_assert_eq(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE); /* not recorded */
    CK(cuEventRecord(a, fx.s1));
    CK(launch_int(fx.fill, fx.s1, fx.buf, 1));
    CK(cuEventRecord(b, fx.s1));
    CK(cuEventSynchronize(b));
    CK(cuEventQuery(b));
    CK(cuEventElapsedTime(&ms, a, b));
    cr_assert(ms >= 0);
    CK(cuEventRecord(nt, fx.s1));
    cr_assert_eq(cuEventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuEventRecordWithFlags(a, fx.s1, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamWaitEvent(fx.s2, a, 0));
    long live = standin_live_objects("event");
    CK(cuEventDestroy(a));
    cr_assert_eq(standin_live_objects("event"), live - 1);
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuEventQuery(a), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuEventDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(standin_misuse_count(), misuses + 2);
}

Test(basic, streams, .init = setup)
{
    CUstream s;
    int prio;
    unsigned flags;
    long live = standin_live_objects("stream");
    CK(cuStreamCreateWithPriority(&s, 0, -3));
    cr_assert_eq(standin_live_objects("stream"), live + 1);
    CK(cuStreamGetPriority(s, &prio));
    cr_assert_eq(prio, -3);
    CK(cuStreamGetFlags(fx.s1, &flags));
    cr_assert_eq(flags, CU_STREAM_NON_BLOCKING);
    CK(cuStreamSynchronize(s));
    CK(cuStreamQuery(CU_STREAM_PER_THREAD));
    CK(cuStreamDestroy(s));
    cr_assert_eq(standin_live_objects("stream"), live);
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    cr_assert_eq(cuStreamSynchronize((CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(standin_misuse_count(), misuses + 1);
    cr_assert_eq(cuStreamDestroy(CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
}

Test(basic, fault_injection_nth_and_persistent, .init = setup)
{
    CUdeviceptr p;
    standin_fault("cuMemAlloc_v2", 2, CUDA_ERROR_OUT_OF_MEMORY, 0);
    CK(cuMemAlloc(&p, 64));
    CUdeviceptr untouched = 42;
    cr_assert_eq(cuMemAlloc(&untouched, 64), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(untouched, 42, "a faulted call does nothing");
    CK(cuMemAlloc(&p, 64));
    standin_fault("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED, 1);
    cr_assert_eq(cuStreamSynchronize(fx.s1), CUDA_ERROR_LAUNCH_FAILED);
    cr_assert_eq(cuStreamSynchronize(fx.s1), CUDA_ERROR_LAUNCH_FAILED);
    CUresult (*sync_ptsz)(CUstream) = (CUresult(*)(CUstream))sym("cuStreamSynchronize_ptsz");
    cr_assert_eq(sync_ptsz(fx.s1), CUDA_SUCCESS, "faults are per exact name");
    standin_clear_faults();
    CK(cuStreamSynchronize(fx.s1));
    cr_assert_eq(standin_call_count("cuStreamSynchronize"), 3);
    standin_reset_counts();
    cr_assert_eq(standin_call_count("cuStreamSynchronize"), 0);
}

/* The call counts row by row: every counted function once, each row's
 * count the one standin_call_count gives, and a call counted in its row
 * only. */
Test(basic, call_counts_row_by_row, .init = setup)
{
    const char *name = NULL;
    unsigned long count = 0, before = 0, total = 0, total_after = 0;
    size_t rows = standin_call_row(0, NULL, NULL), sync_row = rows;
    cr_assert_gt(rows, 100, "%zu rows", rows);
    for (size_t i = 0; i < rows; i++) {
        name = NULL;
        cr_assert_eq(standin_call_row(i, &name, &count), rows);
        cr_assert_not_null(name);
        cr_assert_eq(count, standin_call_count(name), "%s", name);
        for (size_t j = 0; j < i; j++) {
            const char *other = NULL;
            standin_call_row(j, &other, NULL);
            cr_assert_str_neq(other, name, "%s in rows %zu and %zu", name, j, i);
        }
        if (!strcmp(name, "cuStreamSynchronize"))
            sync_row = i, before = count;
        total += count;
    }
    cr_assert_lt(sync_row, rows, "cuStreamSynchronize has no row");
    CK(cuStreamSynchronize(fx.s1));
    standin_call_row(sync_row, &name, &count);
    cr_assert_eq(count, before + 1);
    for (size_t i = 0; i < rows; i++) {
        standin_call_row(i, NULL, &count);
        total_after += count;
    }
    cr_assert_eq(total_after, total + 1, "one call made, %lu counted",
                 total_after - total);
    name = "unchanged";
    count = 7;
    cr_assert_eq(standin_call_row(rows, &name, &count), rows);
    cr_assert_str_eq(name, "unchanged", "a row past the end fills nothing");
    cr_assert_eq(count, 7);
}

Test(basic, fault_injection_from_environment)
{
    CUdevice dev;
    setenv("STANDIN_FAULTS", "cuDeviceGet@2=CUDA_ERROR_INVALID_DEVICE,cuInit@3+=100", 1);
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    cr_assert_eq(cuDeviceGet(&dev, 0), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGet(&dev, 0));
    CK(cuInit(0));
    cr_assert_eq(cuInit(0), (CUresult)100);
    cr_assert_eq(cuInit(0), (CUresult)100);
}

Test(basic, exit_report)
{
    char path[] = "/tmp/standin-report-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("STANDIN_REPORT", path, 1);
        CUdeviceptr p;
        CUcontext ctx;
        cuInit(0);
        cuDevicePrimaryCtxRetain(&ctx, 0);
        cuCtxSetCurrent(ctx);
        cuMemAlloc(&p, 16);
        cuMemFree(p);
        cuMemFree(p);
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status));
    char text[4096] = {0};
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t got = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    unlink(path);
    cr_assert(got > 0);
    cr_assert(strstr(text, "\"cuMemFree_v2\": 2") != NULL, "%s", text);
    cr_assert(strstr(text, "\"cuMemAlloc_v2\": 1") != NULL, "%s", text);
    cr_assert(strstr(text, "\"misuses\": 1") != NULL, "%s", text);
    cr_assert(strstr(text, "\"graph\": 0") != NULL, "%s", text);
    cr_assert(strstr(text, "cuGraphCreate") == NULL, "only calls made are listed");
}
