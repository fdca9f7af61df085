/*
 * scenario_lib.c - kernels, set-up and the capture iteration shared by the
 * scenario programs. The kernels run on the CPU inside the stand-in driver.
 */
#include <stdlib.h>
#include <string.h>

#include "scenario.h"
#include "standin.h"

#define CHECK_SETUP(call)                                                      \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "scenario: %s failed: %d\n", #call, (int)r_);      \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

/* --- kernels ---------------------------------------------------------------- */

static unsigned threads_of(const struct standin_dims *d)
{
    return d->grid[0] * d->grid[1] * d->grid[2] * d->block[0] * d->block[1] * d->block[2];
}

/* axpy(float a, float *x, float *y, int n) */
static void kernel_axpy(const struct standin_dims *d, void **p)
{
    float a = *(float *)p[0];
    float *x = (float *)(uintptr_t)*(CUdeviceptr *)p[1];
    float *y = (float *)(uintptr_t)*(CUdeviceptr *)p[2];
    int n = *(int *)p[3];
    for (unsigned i = 0; i < threads_of(d) && (int)i < n; i++)
        y[i] = a * x[i] + y[i];
}

/* scale(float *x, float a, int n) */
static void kernel_scale(const struct standin_dims *d, void **p)
{
    float *x = (float *)(uintptr_t)*(CUdeviceptr *)p[0];
    float a = *(float *)p[1];
    int n = *(int *)p[2];
    for (unsigned i = 0; i < threads_of(d) && (int)i < n; i++)
        x[i] = a * x[i];
}

/* shift(float *x, float a, int n): scale's signature, another function */
static void kernel_shift(const struct standin_dims *d, void **p)
{
    float *x = (float *)(uintptr_t)*(CUdeviceptr *)p[0];
    float a = *(float *)p[1];
    int n = *(int *)p[2];
    for (unsigned i = 0; i < threads_of(d) && (int)i < n; i++)
        x[i] = x[i] + a;
}

/* mirror(float *x, float a, int n): a third */
static void kernel_mirror(const struct standin_dims *d, void **p)
{
    float *x = (float *)(uintptr_t)*(CUdeviceptr *)p[0];
    float a = *(float *)p[1];
    int n = *(int *)p[2];
    for (unsigned i = 0; i < threads_of(d) && (int)i < n; i++)
        x[i] = a - x[i];
}

static void host_add(void *data)
{
    struct { double *counter; float a; } *arg = data;
    *arg->counter += arg->a;
}

int sc_library_kernels(void)
{
    const char *v = getenv("SCENARIO_KERNELS");
    if (!v || !*v || !strcmp(v, "module"))
        return 0;
    if (!strcmp(v, "library"))
        return 1;
    fprintf(stderr, "scenario: SCENARIO_KERNELS=%s: expected module or library\n", v);
    exit(2);
}

void sc_setup(struct sc_context *c)
{
    static const size_t axpy_sizes[] = { sizeof(float), sizeof(CUdeviceptr), sizeof(CUdeviceptr), sizeof(int) };
    static const size_t scale_sizes[] = { sizeof(CUdeviceptr), sizeof(float), sizeof(int) };
    CUdevice dev;
    CUmodule mod;

    memset(c, 0, sizeof *c);
    standin_register_kernel("axpy", kernel_axpy, 4, axpy_sizes);
    standin_register_kernel("scale", kernel_scale, 3, scale_sizes);
    standin_register_kernel("shift", kernel_shift, 3, scale_sizes);
    standin_register_kernel("mirror", kernel_mirror, 3, scale_sizes);
    CHECK_SETUP(cuInit(0));
    CHECK_SETUP(cuDeviceGet(&dev, 0));
    CHECK_SETUP(cuDevicePrimaryCtxRetain(&c->ctx, dev));
    CHECK_SETUP(cuCtxSetCurrent(c->ctx));
    if (sc_library_kernels()) {
        /* As the CUDA runtime launches: a CUkernel of a library, passed
         * to the launch as its CUfunction. */
        CUlibrary lib;
        CUkernel axpy, scale, shift, mirror;
        CHECK_SETUP(cuLibraryLoadData(&lib, "standin", NULL, NULL, 0, NULL, NULL, 0));
        CHECK_SETUP(cuLibraryGetKernel(&axpy, lib, "axpy"));
        CHECK_SETUP(cuLibraryGetKernel(&scale, lib, "scale"));
        CHECK_SETUP(cuLibraryGetKernel(&shift, lib, "shift"));
        CHECK_SETUP(cuLibraryGetKernel(&mirror, lib, "mirror"));
        c->axpy = (CUfunction)axpy, c->scale = (CUfunction)scale;
        c->shift = (CUfunction)shift, c->mirror = (CUfunction)mirror;
    } else {
        CHECK_SETUP(cuModuleLoadData(&mod, "standin"));
        CHECK_SETUP(cuModuleGetFunction(&c->axpy, mod, "axpy"));
        CHECK_SETUP(cuModuleGetFunction(&c->scale, mod, "scale"));
        CHECK_SETUP(cuModuleGetFunction(&c->shift, mod, "shift"));
        CHECK_SETUP(cuModuleGetFunction(&c->mirror, mod, "mirror"));
    }
    for (int i = 0; i < 2; i++)
        CHECK_SETUP(cuStreamCreate(&c->stream[i], CU_STREAM_NON_BLOCKING));
    CHECK_SETUP(cuEventCreate(&c->fork_event, CU_EVENT_DISABLE_TIMING));
    CHECK_SETUP(cuEventCreate(&c->join_event, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < SC_BUFFERS; i++)
        CHECK_SETUP(cuMemAlloc(&c->buf[i], SC_N * sizeof(float)));
    sc_reset_buffers(c);
}

void sc_reset_buffers(struct sc_context *c)
{
    float host[SC_N];
    for (int b = 0; b < SC_BUFFERS; b++) {
        for (int i = 0; i < SC_N; i++)
            host[i] = (float)(b + 1) * 0.25f + (float)i / 64.0f;
        CHECK_SETUP(cuMemcpyHtoD(c->buf[b], host, sizeof host));
    }
    c->host_counter = 0;
}

CUresult sc_alloc_relaxed(CUdeviceptr *p, size_t bytes)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult ex = cuThreadExchangeStreamCaptureMode(&m);
    CUresult r = cuMemAlloc(p, bytes);
    if (ex == CUDA_SUCCESS)
        cuThreadExchangeStreamCaptureMode(&m);
    return r;
}

void sc_add(struct sc_recipe *r, enum sc_op_type type, float a, int x, int y, int stream)
{
    if (r->n < SC_MAX_OPS)
        r->op[r->n++] = (struct sc_op){ .type = type, .a = a, .x = x, .y = y, .stream = stream };
}

/* Host-function arguments must outlive the capture until the graph runs. */
static struct { double *counter; float a; } host_args[SC_MAX_OPS * 64];
static unsigned host_args_next;

CUresult sc_enqueue(struct sc_context *c, const struct sc_op *op)
{
    CUstream s = c->stream[op->stream];
    unsigned grid = op->grid ? op->grid : SC_N / 64;
    int n = SC_N;
    float a = op->a;

    switch (op->type) {
    case SC_AXPY: {
        void *params[] = { &a, &c->buf[op->x], &c->buf[op->y], &n };
        return cuLaunchKernel(c->axpy, grid, 1, 1, 64, 1, 1, 0, s, params, NULL);
    }
    case SC_SCALE:
    case SC_SHIFT:
    case SC_MIRROR: {
        void *params[] = { &c->buf[op->x], &a, &n };
        CUfunction f = op->type == SC_SCALE ? c->scale : op->type == SC_SHIFT ? c->shift : c->mirror;
        return cuLaunchKernel(f, grid, 1, 1, 64, 1, 1, 0, s, params, NULL);
    }
    case SC_EXTRA_LAUNCH: {
        struct { CUdeviceptr x; float a; int n; } packed = { c->buf[op->x], a, n };
        size_t size = sizeof packed;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                          &size, CU_LAUNCH_PARAM_END };
        return cuLaunchKernel(c->scale, grid, 1, 1, 64, 1, 1, 0, s, NULL, extra);
    }
    case SC_MEMSET: {
        unsigned bits;
        memcpy(&bits, &a, sizeof bits);
        return cuMemsetD32Async(c->buf[op->y], bits, SC_N, s);
    }
    case SC_COPY:
        return cuMemcpyDtoDAsync(c->buf[op->y], c->buf[op->x], SC_N * sizeof(float), s);
    case SC_HOST: {
        unsigned k = __atomic_fetch_add(&host_args_next, 1, __ATOMIC_RELAXED) %
                     (sizeof host_args / sizeof host_args[0]);
        host_args[k].counter = &c->host_counter;
        host_args[k].a = a;
        return cuLaunchHostFunc(s, host_add, &host_args[k]);
    }
    case SC_STREAM_ATTR: {
        CUstreamAttrValue v;
        memset(&v, 0, sizeof v);
        v.priority = (int)a;
        return cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v);
    }
    case SC_FORK: {
        CUresult r = cuEventRecord(c->fork_event, c->stream[0]);
        return r ? r : cuStreamWaitEvent(c->stream[1], c->fork_event, 0);
    }
    case SC_JOIN: {
        CUresult r = cuEventRecord(c->join_event, c->stream[1]);
        return r ? r : cuStreamWaitEvent(c->stream[0], c->join_event, 0);
    }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* The 5-argument ABI of CUDA 11.0, declared only for internal builds. */
CUresult cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);

static CUresult instantiate(CUgraphExec *exec, CUgraph graph, const struct sc_options *o,
                            CUstream stream)
{
    switch (o->instantiate_variant) {
    case 1:
    case 3: {
        CUDA_GRAPH_INSTANTIATE_PARAMS p = { 0 };
        p.flags = o->instantiate_variant == 3 ? CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD : 0;
        p.hUploadStream = stream;
        p.result_out = (CUgraphInstantiateResult)-1;
        CUresult r = cuGraphInstantiateWithParams(exec, graph, &p);
        if (r == CUDA_SUCCESS && p.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS)
            return CUDA_ERROR_UNKNOWN;
        return r;
    }
    case 2: {
        CUgraphNode err = (CUgraphNode)1;
        char log[64] = "";
        CUresult r = cuGraphInstantiate_v2(exec, graph, &err, log, sizeof log);
        if (r == CUDA_SUCCESS && err != NULL)
            return CUDA_ERROR_UNKNOWN;
        return r;
    }
    default:
        return cuGraphInstantiateWithFlags(exec, graph, 0);
    }
}

int sc_iteration(struct sc_context *c, int it, const struct sc_recipe *r,
                 const struct sc_options *o, CUgraph *pending)
{
    char codes[SC_MAX_OPS * 4 + 64];
    int len = 0, failed = 0;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;

#define NOTE(rc) do { CUresult rc_ = (rc); failed |= rc_ != CUDA_SUCCESS; \
        len += snprintf(codes + len, sizeof codes - (size_t)len, "%d,", (int)rc_); } while (0)

    NOTE(cuStreamBeginCapture(c->stream[0], o->mode));
    for (int i = 0; i < r->n; i++)
        NOTE(sc_enqueue(c, &r->op[i]));
    NOTE(cuStreamEndCapture(c->stream[0], &graph));
    size_t nodes = 0;
    if (graph && o->count_nodes)
        NOTE(cuGraphGetNodes(graph, NULL, &nodes));
    if (graph) {
        NOTE(instantiate(&exec, graph, o, c->stream[0]));
        if (exec) {
            NOTE(cuGraphLaunch(exec, c->stream[0]));
            NOTE(cuStreamSynchronize(c->stream[0]));
            NOTE(cuGraphExecDestroy(exec));
        }
        if (o->keep_every_graph) {
            /* Left to the driver's teardown at exit, as PyTorch leaves them. */
        } else if (o->keep_graph_until_next) {
            if (*pending)
                NOTE(cuGraphDestroy(*pending));
            *pending = graph;
        } else {
            NOTE(cuGraphDestroy(graph));
        }
    }
#undef NOTE
    printf("it=%d rc=%s sum=%08x\n", it, codes, sc_checksum(c));
    return failed;
}

uint32_t sc_checksum(struct sc_context *c)
{
    float host[SC_N];
    uint32_t h = 2166136261u;
    for (int b = 0; b < SC_BUFFERS; b++) {
        if (cuMemcpyDtoH(host, c->buf[b], sizeof host) != CUDA_SUCCESS)
            return 0;
        for (size_t i = 0; i < sizeof host; i++)
            h = (h ^ ((unsigned char *)host)[i]) * 16777619u;
    }
    for (size_t i = 0; i < sizeof c->host_counter; i++)
        h = (h ^ ((unsigned char *)&c->host_counter)[i]) * 16777619u;
    return h;
}

static void write_stats_to(const char *path, int every_call);

void sc_write_stats(void)
{
    write_stats_to(getenv("SCENARIO_STATS"), 0);
}

void sc_write_stats_snapshot(const char *suffix)
{
    const char *base = getenv("SCENARIO_STATS");
    char path[4096];
    if (!base)
        return;
    snprintf(path, sizeof path, "%s%s", base, suffix);
    write_stats_to(path, 1);
}

static void write_stats_to(const char *path, int every_call)
{
    static const char *const names[] = {
        "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams", "cuGraphInstantiate_v2",
        "cuGraphExecUpdate_v2", "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecMemsetNodeSetParams",
        "cuGraphExecHostNodeSetParams", "cuGraphExecMemcpyNodeSetParams",
        "cuStreamBeginCapture_v2", "cuStreamBeginRecaptureToGraph", "cuGraphDestroy",
        "cuGraphExecDestroy", "cuGraphUpload", "cuStreamBeginCapture",
        "cuGraphKernelNodeSetParams_v2", "cuGraphMemsetNodeSetParams", "cuGraphMemcpyNodeSetParams",
        "cuGraphHostNodeSetParams", "cuGraphExecHostNodeSetParams", "cuGraphGetEdges_v2",
        "cuGraphNodeGetType", "cuGraphKernelNodeGetParams_v2", "cuCtxGetCurrent",
        "cuStreamBeginCaptureToGraph", "cuGraphGetNodes", "cuEventDestroy_v2", "cuMemFree_v2",
        "cuGraphClone", "cuMemAlloc_v2", "cuMemHostAlloc", "cuMemAllocHost_v2", "cuMemFreeHost",
    };
    if (!path)
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        fprintf(f, "%s %lu\n", names[i], standin_call_count(names[i]));
    fprintf(f, "misuses %lu\n", standin_misuse_count());
    fprintf(f, "async %d\n", standin_async());
    fprintf(f, "library_kernels %d\n", sc_library_kernels());
    fprintf(f, "live_graphs %ld\n", standin_live_objects("graph"));
    fprintf(f, "live_execs %ld\n", standin_live_objects("exec"));
    fprintf(f, "live_events %ld\n", standin_live_objects("event"));
    fprintf(f, "live_memory %ld\n", standin_live_objects("memory"));
    fprintf(f, "last_misuse %s\n", standin_last_misuse());
    if (every_call) {
        unsigned long total = 0, count;
        const char *name;
        for (size_t i = 0, rows = standin_call_row(0, NULL, NULL); i < rows; i++) {
            standin_call_row(i, &name, &count);
            if (count)
                fprintf(f, "call %s %lu\n", name, count);
            total += count;
        }
        fprintf(f, "calls_total %lu\n", total);
    }
    fclose(f);
}
