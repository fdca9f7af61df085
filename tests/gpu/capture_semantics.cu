/*
 * capture_semantics.cu - what a program can observe of a stream capture on a
 * real driver: which calls a capture prohibits (per capture mode, on the
 * capturing thread and on other threads), whether a prohibited call
 * invalidates the capture, and what the capture queries report (status, id,
 * dependencies, edge data, forks, per-thread default stream).
 *
 * Why: recap's self-recording (issue 13) records a repeat capture itself
 * instead of starting a driver capture; everything the program sees must
 * then be what a real capture shows. This program prints those facts, one
 * deterministic line per observation (no addresses, no timings; capture ids
 * only as same/different/increasing), so that:
 *   - its output on a driver is the measured reference
 *     (capture_semantics.expected: driver 580.159, CUDA 13.0), which the
 *     stand-in driver (tests/standin) models, see READINGS.md "Capture
 *     prohibitions";
 *   - run_all.sh runs it without and with recap and requires identical
 *     output.
 *
 * Each case of the prohibition table:
 *   begin a fresh capture on s (mode M), launch one kernel into s, record
 *   event ev_in into s; make call C on the capturing thread ("same"), on
 *   another thread in its default mode ("other"), or on another thread after
 *   cudaThreadExchangeStreamCaptureMode(relaxed) ("other_relaxed"); then
 *   print C's error, cudaStreamIsCapturing(s), the error of a further kernel
 *   launch into s, cudaStreamEndCapture's error and whether the graph is
 *   null. Sticky per-thread errors are cleared (cudaGetLastError) after each
 *   case, on every thread that made a call.
 */
#include <cuda_runtime_api.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "gpu_test.h"

__global__ void k_add(int *p, int v)
{
    if (p) p[threadIdx.x] += v;
}

static int *g_dev;       /* 256 ints, target of every kernel */
static int *g_dev2;      /* 256 ints, copy source/target */
static cudaStream_t g_s; /* the capturing stream (blocking, or non-blocking for *_nb cases) */
static cudaStream_t g_blocking, g_nonblocking, g_other, g_nb_free;
static cudaEvent_t g_ev_in;     /* recorded inside the capture */
static cudaEvent_t g_ev_before; /* recorded (and completed) before the capture */
static int *g_managed;          /* managed memory, for cudaStreamAttachMemAsync */
static char g_host_buf[8192];   /* registered and unregistered by cudaHostRegister */

static const char *name(cudaError_t e) { return cudaGetErrorName(e); }

static const char *status_name(cudaStreamCaptureStatus st)
{
    switch (st) {
    case cudaStreamCaptureStatusNone: return "none";
    case cudaStreamCaptureStatusActive: return "active";
    case cudaStreamCaptureStatusInvalidated: return "invalidated";
    }
    return "?";
}

static const char *mode_name(cudaStreamCaptureMode m)
{
    switch (m) {
    case cudaStreamCaptureModeGlobal: return "global";
    case cudaStreamCaptureModeThreadLocal: return "thread_local";
    case cudaStreamCaptureModeRelaxed: return "relaxed";
    }
    return "?";
}

static const char *node_type_name(cudaGraphNodeType t)
{
    switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "wait_event";
    case cudaGraphNodeTypeEventRecord: return "event_record";
    case cudaGraphNodeTypeMemAlloc: return "mem_alloc";
    case cudaGraphNodeTypeMemFree: return "mem_free";
    default: return "other";
    }
}

static std::string is_capturing(cudaStream_t s)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &st);
    cudaGetLastError();
    if (e != cudaSuccess) return name(e);
    return status_name(st);
}

/* ---------------------------------------------------------------- calls */

/* One call C. Resources a call might consume are made before the capture
 * (prepare) and released after it when the call did not consume them. */
struct call_state {
    void *dev_before = nullptr;  /* for cudaFree */
    void *host_before = nullptr; /* for cudaFreeHost */
    void *dev_new = nullptr;     /* made by cudaMalloc */
    void *host_new = nullptr;    /* made by cudaMallocHost */
    bool registered = false;     /* g_host_buf, by cudaHostRegister */
    bool consumed = false;
};

typedef cudaError_t (*call_fn)(call_state *);

static cudaError_t c_malloc(call_state *cs) { return cudaMalloc(&cs->dev_new, 4096); }
static cudaError_t c_free(call_state *cs)
{
    cudaError_t e = cudaFree(cs->dev_before);
    if (e == cudaSuccess) cs->consumed = true;
    return e;
}
static cudaError_t c_malloc_host(call_state *cs) { return cudaMallocHost(&cs->host_new, 4096); }
static cudaError_t c_free_host(call_state *cs)
{
    cudaError_t e = cudaFreeHost(cs->host_before);
    if (e == cudaSuccess) cs->consumed = true;
    return e;
}
static cudaError_t c_memcpy(call_state *) { return cudaMemcpy(g_dev2, g_dev, 1024, cudaMemcpyDeviceToDevice); }
static cudaError_t c_memset(call_state *) { return cudaMemset(g_dev2, 0, 1024); }
static cudaError_t c_device_sync(call_state *) { return cudaDeviceSynchronize(); }
static cudaError_t c_stream_sync_s(call_state *) { return cudaStreamSynchronize(g_s); }
static cudaError_t c_stream_query_s(call_state *) { return cudaStreamQuery(g_s); }
static cudaError_t c_stream_sync_other(call_state *) { return cudaStreamSynchronize(g_other); }
static cudaError_t c_event_query_in(call_state *) { return cudaEventQuery(g_ev_in); }
static cudaError_t c_event_sync_in(call_state *) { return cudaEventSynchronize(g_ev_in); }
static cudaError_t c_event_query_before(call_state *) { return cudaEventQuery(g_ev_before); }
static cudaError_t c_legacy_kernel(call_state *)
{
    k_add<<<1, 32, 0, cudaStreamLegacy>>>(g_dev2, 1);
    return cudaGetLastError();
}
static cudaError_t c_memcpy_async_nb(call_state *)
{
    return cudaMemcpyAsync(g_dev2, g_dev, 1024, cudaMemcpyDeviceToDevice, g_nb_free);
}
static cudaError_t c_legacy_is_capturing(call_state *)
{
    cudaStreamCaptureStatus st;
    return cudaStreamIsCapturing(cudaStreamLegacy, &st);
}
static cudaError_t c_event_record_other(call_state *) { return cudaEventRecord(g_ev_before, g_other); }
static cudaError_t c_stream_query_other(call_state *) { return cudaStreamQuery(g_other); }
static cudaError_t c_event_sync_before(call_state *) { return cudaEventSynchronize(g_ev_before); }
static cudaError_t c_stream_sync_legacy(call_state *) { return cudaStreamSynchronize(cudaStreamLegacy); }
static cudaError_t c_stream_query_legacy(call_state *) { return cudaStreamQuery(cudaStreamLegacy); }
static cudaError_t c_stream_sync_nb(call_state *) { return cudaStreamSynchronize(g_nb_free); }
static void CUDART_CB host_callback(cudaStream_t, cudaError_t, void *) {}
static cudaError_t c_add_callback_s(call_state *) { return cudaStreamAddCallback(g_s, host_callback, nullptr, 0); }
static cudaError_t c_add_callback_other(call_state *)
{
    return cudaStreamAddCallback(g_other, host_callback, nullptr, 0);
}
static cudaError_t c_attach_mem_s(call_state *)
{
    return cudaStreamAttachMemAsync(g_s, g_managed, 0, cudaMemAttachSingle);
}
static cudaError_t c_host_register(call_state *cs)
{
    cudaError_t e = cudaHostRegister(g_host_buf, sizeof g_host_buf, cudaHostRegisterDefault);
    if (e == cudaSuccess) cs->registered = true;
    return e;
}

struct call_desc {
    const char *name;
    call_fn fn;
    bool nonblocking_s; /* the capturing stream is created non-blocking */
};

static const call_desc CALLS[] = {
    {"cudaMalloc", c_malloc, false},
    {"cudaFree", c_free, false},
    {"cudaMallocHost", c_malloc_host, false},
    {"cudaFreeHost", c_free_host, false},
    {"cudaMemcpy_DtoD", c_memcpy, false},
    {"cudaMemset", c_memset, false},
    {"cudaDeviceSynchronize", c_device_sync, false},
    {"cudaStreamSynchronize(s)", c_stream_sync_s, false},
    {"cudaStreamQuery(s)", c_stream_query_s, false},
    {"cudaStreamSynchronize(other)", c_stream_sync_other, false},
    {"cudaEventQuery(captured)", c_event_query_in, false},
    {"cudaEventSynchronize(captured)", c_event_sync_in, false},
    {"cudaEventQuery(before)", c_event_query_before, false},
    {"kernel(legacy)", c_legacy_kernel, false},
    {"cudaMemcpyAsync(nonblocking)", c_memcpy_async_nb, false},
    {"cudaStreamIsCapturing(legacy)", c_legacy_is_capturing, false},
    {"cudaEventRecord(other)", c_event_record_other, false},
    {"cudaStreamQuery(other)", c_stream_query_other, false},
    {"cudaEventSynchronize(before)", c_event_sync_before, false},
    {"cudaStreamSynchronize(legacy)", c_stream_sync_legacy, false},
    {"cudaStreamQuery(legacy)", c_stream_query_legacy, false},
    {"cudaStreamSynchronize(nonblocking)", c_stream_sync_nb, false},
    {"cudaStreamAddCallback(s)", c_add_callback_s, false},
    {"cudaStreamAddCallback(other)", c_add_callback_other, false},
    {"cudaStreamAttachMemAsync(s)", c_attach_mem_s, false},
    {"cudaHostRegister", c_host_register, false},
    /* the same legacy-stream uses while a non-blocking stream captures */
    {"kernel(legacy)[s_nonblocking]", c_legacy_kernel, true},
    {"cudaMemcpy_DtoD[s_nonblocking]", c_memcpy, true},
    {"cudaStreamIsCapturing(legacy)[s_nonblocking]", c_legacy_is_capturing, true},
    {"cudaStreamSynchronize(legacy)[s_nonblocking]", c_stream_sync_legacy, true},
    {"cudaMemset[s_nonblocking]", c_memset, true},
};

enum thread_kind { T_SAME, T_OTHER, T_OTHER_RELAXED };
static const char *thread_name(thread_kind t)
{
    return t == T_SAME ? "same" : t == T_OTHER ? "other" : "other_relaxed";
}

static void run_case(cudaStreamCaptureMode mode, const call_desc &c, thread_kind t)
{
    call_state cs;
    g_s = c.nonblocking_s ? g_nonblocking : g_blocking;
    CUDA_CHECK(cudaMalloc(&cs.dev_before, 4096));
    CUDA_CHECK(cudaMallocHost(&cs.host_before, 4096));
    CUDA_CHECK(cudaEventRecord(g_ev_before, g_other));
    CUDA_CHECK(cudaDeviceSynchronize());

    CUDA_CHECK(cudaStreamBeginCapture(g_s, mode));
    k_add<<<1, 32, 0, g_s>>>(g_dev, 1);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(g_ev_in, g_s));

    cudaError_t rc = cudaSuccess;
    if (t == T_SAME) {
        rc = c.fn(&cs);
        cudaGetLastError();
    } else {
        std::thread th([&] {
            if (t == T_OTHER_RELAXED) {
                cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
                CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
            }
            rc = c.fn(&cs);
            cudaGetLastError();
        });
        th.join();
    }
    std::string cap = is_capturing(g_s);
    k_add<<<1, 32, 0, g_s>>>(g_dev, 2);
    cudaError_t next = cudaGetLastError();
    cudaGraph_t g = nullptr;
    cudaError_t end = cudaStreamEndCapture(g_s, &g);
    cudaGetLastError();
    printf("prohibit mode=%s thread=%s call=%s: call=%s capturing=%s next_launch=%s end=%s graph=%s\n",
           mode_name(mode), thread_name(t), c.name, name(rc), cap.c_str(), name(next), name(end),
           g ? "valid" : "null");
    if (g) CUDA_CHECK(cudaGraphDestroy(g));

    /* Whatever the call left behind. */
    cudaError_t sync = cudaDeviceSynchronize();
    if (sync != cudaSuccess) printf("  after: cudaDeviceSynchronize=%s\n", name(sync));
    cudaGetLastError();
    if (cs.dev_new) CUDA_CHECK(cudaFree(cs.dev_new));
    if (cs.host_new) CUDA_CHECK(cudaFreeHost(cs.host_new));
    if (cs.registered) CUDA_CHECK(cudaHostUnregister(g_host_buf));
    if (!(c.fn == c_free && cs.consumed)) CUDA_CHECK(cudaFree(cs.dev_before));
    if (!(c.fn == c_free_host && cs.consumed)) CUDA_CHECK(cudaFreeHost(cs.host_before));
    std::string after = is_capturing(g_s);
    if (after != "none") printf("  after: stream still %s\n", after.c_str());
}

/* ------------------------------------------------------------ capture info */

static void capture_info(void)
{
    cudaStream_t s = g_blocking, s2 = g_other;
    cudaEvent_t e1, e2;
    CUDA_CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
    cudaStreamCaptureStatus st;
    unsigned long long id = 0, id2 = 0, id_prev = 0;
    cudaGraph_t info_graph = nullptr;
    const cudaGraphNode_t *deps = nullptr;
    const cudaGraphEdgeData *edata = nullptr;
    size_t n = 0;

    /* Not capturing: what is written. */
    st = cudaStreamCaptureStatusInvalidated;
    id = 12345;
    n = 777;
    info_graph = (cudaGraph_t)0x1;
    deps = (const cudaGraphNode_t *)0x1;
    cudaError_t e = cudaStreamGetCaptureInfo(s, &st, &id, &info_graph, &deps, nullptr, &n);
    printf("info idle: rc=%s status=%s id=%s graph=%s deps=%s n=%s\n", name(e), status_name(st),
           id == 12345 ? "untouched" : id == 0 ? "zero" : "other", info_graph == (cudaGraph_t)0x1 ? "untouched" : info_graph ? "other" : "null",
           deps == (const cudaGraphNode_t *)0x1 ? "untouched" : deps ? "other" : "null",
           n == 777 ? "untouched" : n == 0 ? "zero" : "other");

    /* Right after begin. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    id = 0;
    n = 777;
    deps = (const cudaGraphNode_t *)0x1;
    e = cudaStreamGetCaptureInfo(s, &st, &id, &info_graph, &deps, nullptr, &n);
    printf("info begin: rc=%s status=%s id=%s n=%zu deps=%s graph=%s\n", name(e), status_name(st),
           id ? "nonzero" : "zero", n, deps == (const cudaGraphNode_t *)0x1 ? "untouched" : deps ? "nonnull" : "null",
           info_graph ? "nonnull" : "null");
    id_prev = id;
    cudaGraph_t begin_graph = info_graph;

    /* One kernel. */
    k_add<<<1, 32, 0, s>>>(g_dev, 1);
    CUDA_CHECK(cudaGetLastError());
    e = cudaStreamGetCaptureInfo(s, &st, &id2, &info_graph, &deps, nullptr, &n);
    cudaGraphNodeType ty = cudaGraphNodeTypeCount;
    if (n == 1) CUDA_CHECK(cudaGraphNodeGetType(deps[0], &ty));
    printf("info kernel: rc=%s status=%s id=%s n=%zu dep0=%s graph=%s\n", name(e), status_name(st),
           id2 == id ? "same" : "different", n, n == 1 ? node_type_name(ty) : "-",
           info_graph == begin_graph ? "same" : "different");
    cudaGraphNode_t kernel1 = n == 1 ? deps[0] : nullptr;

    /* Edge data requested: NULL for default edges? */
    edata = (const cudaGraphEdgeData *)0x1;
    e = cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, &edata, &n);
    printf("info edgedata: rc=%s n=%zu edata=%s", name(e), n,
           edata == (const cudaGraphEdgeData *)0x1 ? "untouched" : edata ? "nonnull" : "null");
    if (edata && edata != (const cudaGraphEdgeData *)0x1 && n == 1)
        printf(" edge0_type=%u from_port=%u to_port=%u", (unsigned)edata[0].type, (unsigned)edata[0].from_port,
               (unsigned)edata[0].to_port);
    printf("\n");
    /* Edge data without dependencies. */
    e = cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, nullptr, &edata, &n);
    printf("info edgedata_without_deps: rc=%s\n", name(e));
    cudaGetLastError();
    /* A NULL status pointer. */
    e = cudaStreamGetCaptureInfo(s, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    printf("info null_status: rc=%s\n", name(e));
    cudaGetLastError();
    /* Only numDependencies. */
    n = 777;
    e = cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, nullptr, nullptr, &n);
    printf("info n_only: rc=%s n=%zu\n", name(e), n);
    cudaGetLastError();

    /* Fork to s2 through an event; a kernel on each. */
    CUDA_CHECK(cudaEventRecord(e1, s));
    printf("fork before_wait: s2=%s\n", is_capturing(s2).c_str());
    CUDA_CHECK(cudaStreamWaitEvent(s2, e1, 0));
    e = cudaStreamGetCaptureInfo(s2, &st, &id2, nullptr, &deps, nullptr, &n);
    ty = cudaGraphNodeTypeCount;
    if (n == 1) CUDA_CHECK(cudaGraphNodeGetType(deps[0], &ty));
    printf("fork after_wait: rc=%s s2=%s id=%s n=%zu dep0=%s dep0_is_kernel1=%s\n", name(e), status_name(st),
           id2 == id ? "same" : "different", n, n == 1 ? node_type_name(ty) : "-",
           n == 1 && deps[0] == kernel1 ? "yes" : "no");
    k_add<<<1, 32, 0, s2>>>(g_dev2, 1);
    k_add<<<1, 32, 0, s>>>(g_dev, 1);
    CUDA_CHECK(cudaGetLastError());
    size_t n1 = 0, n2 = 0;
    cudaGraphNodeType t1 = cudaGraphNodeTypeCount, t2 = cudaGraphNodeTypeCount;
    CUDA_CHECK(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, nullptr, &n1));
    if (n1 == 1) CUDA_CHECK(cudaGraphNodeGetType(deps[0], &t1));
    cudaGraphNode_t on_s = n1 == 1 ? deps[0] : nullptr;
    CUDA_CHECK(cudaStreamGetCaptureInfo(s2, &st, nullptr, nullptr, &deps, nullptr, &n2));
    if (n2 == 1) CUDA_CHECK(cudaGraphNodeGetType(deps[0], &t2));
    cudaGraphNode_t on_s2 = n2 == 1 ? deps[0] : nullptr;
    printf("fork kernels: s n=%zu dep0=%s; s2 n=%zu dep0=%s; distinct=%s\n", n1, n1 == 1 ? node_type_name(t1) : "-", n2,
           n2 == 1 ? node_type_name(t2) : "-", on_s != on_s2 ? "yes" : "no");
    /* Join back. */
    CUDA_CHECK(cudaEventRecord(e2, s2));
    CUDA_CHECK(cudaStreamWaitEvent(s, e2, 0));
    CUDA_CHECK(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, nullptr, &n));
    bool both = n == 2 && ((deps[0] == on_s && deps[1] == on_s2) || (deps[0] == on_s2 && deps[1] == on_s));
    printf("join: s n=%zu both_kernels=%s order=%s s2=%s\n", n, both ? "yes" : "no",
           n == 2 ? (deps[0] == on_s ? "own_first" : "joined_first") : "-", is_capturing(s2).c_str());
    cudaGraph_t g = nullptr;
    e = cudaStreamEndCapture(s, &g);
    size_t nodes = 0;
    if (g) CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    printf("join end: rc=%s graph=%s same_as_info=%s nodes=%zu s2_after=%s\n", name(e), g ? "valid" : "null",
           g == begin_graph ? "yes" : "no", nodes, is_capturing(s2).c_str());
    if (g) {
        std::vector<cudaGraphNode_t> all(nodes);
        CUDA_CHECK(cudaGraphGetNodes(g, all.data(), &nodes));
        bool found = false;
        for (auto x : all) found |= x == kernel1;
        printf("join end: info_node_in_graph=%s\n", found ? "yes" : "no");
        CUDA_CHECK(cudaGraphDestroy(g));
    }

    /* Successive ids. */
    unsigned long long ids[3];
    for (int i = 0; i < 3; i++) {
        CUDA_CHECK(cudaStreamBeginCapture(i == 1 ? g_nonblocking : s, cudaStreamCaptureModeGlobal));
        CUDA_CHECK(cudaStreamGetCaptureInfo(i == 1 ? g_nonblocking : s, &st, &ids[i]));
        CUDA_CHECK(cudaStreamEndCapture(i == 1 ? g_nonblocking : s, &g));
        CUDA_CHECK(cudaGraphDestroy(g));
    }
    /* Compared under recap: every capture's id is its own. The driver's
     * order (each id one above the last) is a fact of the driver, printed
     * on stderr: captures recap records itself take ids from a range of
     * its own (README.md, "Self-recording"). */
    printf("ids: all_different=%s\n", ids[0] != id_prev && ids[1] != ids[0] && ids[2] != ids[1] &&
                                          ids[2] != ids[0] ? "yes" : "no");
    fprintf(stderr, "ids: first_vs_earlier=%s second=%s third=%s\n", ids[0] > id_prev ? "increasing" : ids[0] == id_prev ? "same" : "decreasing",
           ids[1] > ids[0] ? "increasing" : ids[1] == ids[0] ? "same" : "decreasing",
           ids[2] > ids[1] ? "increasing" : ids[2] == ids[1] ? "same" : "decreasing");
    unsigned long long step1 = ids[1] - ids[0], step2 = ids[2] - ids[1];
    fprintf(stderr, "ids: step_is_one=%s\n", step1 == 1 && step2 == 1 ? "yes" : "no");

    /* Concurrent captures on two streams of one thread: ids differ. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    e = cudaStreamBeginCapture(g_nonblocking, cudaStreamCaptureModeGlobal);
    CUDA_CHECK(cudaStreamGetCaptureInfo(s, &st, &id));
    unsigned long long idb = 0;
    cudaStreamCaptureStatus stb;
    CUDA_CHECK(cudaStreamGetCaptureInfo(g_nonblocking, &stb, &idb));
    printf("two captures: second_begin=%s ids=%s\n", name(e), id != idb ? "different" : "same");
    CUDA_CHECK(cudaStreamEndCapture(g_nonblocking, &g));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphDestroy(g));

    /* Fork not joined back. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k_add<<<1, 32, 0, s>>>(g_dev, 1);
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaStreamWaitEvent(s2, e1, 0));
    k_add<<<1, 32, 0, s2>>>(g_dev2, 1);
    CUDA_CHECK(cudaGetLastError());
    g = nullptr;
    e = cudaStreamEndCapture(s, &g);
    printf("unjoined: end=%s graph=%s s=%s s2=%s\n", name(e), g ? "valid" : "null", is_capturing(s).c_str(),
           is_capturing(s2).c_str());
    cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    /* s2 usable again? */
    k_add<<<1, 32, 0, s2>>>(g_dev2, 1);
    printf("unjoined: s2_launch_after=%s\n", name(cudaGetLastError()));
    CUDA_CHECK(cudaDeviceSynchronize());

    /* Fork stream ended instead of the origin. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaStreamWaitEvent(s2, e1, 0));
    g = nullptr;
    e = cudaStreamEndCapture(s2, &g);
    printf("end on forked stream: rc=%s graph=%s s=%s s2=%s\n", name(e), g ? "valid" : "null", is_capturing(s).c_str(),
           is_capturing(s2).c_str());
    cudaGetLastError();
    e = cudaStreamEndCapture(s, &g);
    printf("end on forked stream: origin_end=%s graph=%s s2=%s\n", name(e), g ? "valid" : "null", is_capturing(s2).c_str());
    cudaGetLastError();
    if (g && e == cudaSuccess) cudaGraphDestroy(g);

    /* Invalidated capture: what the queries report. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k_add<<<1, 32, 0, s>>>(g_dev, 1);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamGetCaptureInfo(s, &st, &id));
    e = cudaStreamSynchronize(s);
    id2 = 12345;
    n = 777;
    deps = (const cudaGraphNode_t *)0x1;
    info_graph = (cudaGraph_t)0x1;
    cudaError_t e2r = cudaStreamGetCaptureInfo(s, &st, &id2, &info_graph, &deps, nullptr, &n);
    printf("invalidated: sync=%s info_rc=%s status=%s id=%s graph=%s deps=%s n=%s\n", name(e), name(e2r),
           status_name(st), id2 == id ? "same" : id2 == 12345 ? "untouched" : "different",
           info_graph == (cudaGraph_t)0x1 ? "untouched" : info_graph ? "nonnull" : "null",
           deps == (const cudaGraphNode_t *)0x1 ? "untouched" : deps ? "nonnull" : "null",
           n == 777 ? "untouched" : std::to_string(n).c_str());
    cudaError_t rec = cudaEventRecord(e1, s);
    cudaGetLastError();
    e = cudaStreamWaitEvent(s2, e1, 0);
    printf("invalidated: record=%s fork_wait=%s s2=%s\n", name(rec), name(e), is_capturing(s2).c_str());
    cudaGetLastError();
    g = nullptr;
    e = cudaStreamEndCapture(s, &g);
    printf("invalidated: end=%s graph=%s s=%s\n", name(e), g ? "valid" : "null", is_capturing(s).c_str());
    cudaGetLastError();

    /* An event recorded in a capture that has ended. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k_add<<<1, 32, 0, s>>>(g_dev, 1);
    CUDA_CHECK(cudaEventRecord(e2, s));
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphDestroy(g));
    e = cudaEventQuery(e2);
    cudaGetLastError();
    cudaError_t es = cudaEventSynchronize(e2);
    cudaGetLastError();
    cudaError_t ew = cudaStreamWaitEvent(s2, e2, 0);
    cudaGetLastError();
    printf("event after its capture ended: query=%s sync=%s wait_outside=%s s2=%s\n", name(e), name(es), name(ew),
           is_capturing(s2).c_str());
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    ew = cudaStreamWaitEvent(s, e2, 0);
    cudaGetLastError();
    std::string capnow = is_capturing(s);
    e = cudaStreamEndCapture(s, &g);
    cudaGetLastError();
    printf("event after its capture ended: wait_in_new_capture=%s s=%s end=%s\n", name(ew), capnow.c_str(), name(e));
    if (e == cudaSuccess && g) cudaGraphDestroy(g);
    CUDA_CHECK(cudaEventRecord(e2, s2));
    CUDA_CHECK(cudaDeviceSynchronize());

    /* End twice; end on a stream never captured; begin twice; legacy begin. */
    e = cudaStreamEndCapture(s, &g);
    printf("end not capturing: rc=%s\n", name(e));
    cudaGetLastError();
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    printf("begin while capturing: rc=%s s=%s\n", name(e), is_capturing(s).c_str());
    cudaGetLastError();
    e = cudaStreamEndCapture(s, &g);
    printf("begin while capturing: end=%s graph=%s\n", name(e), g ? "valid" : "null");
    cudaGetLastError();
    if (e == cudaSuccess && g) cudaGraphDestroy(g);
    e = cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal);
    printf("begin legacy: rc=%s\n", name(e));
    cudaGetLastError();

    /* End from another thread. */
    for (cudaStreamCaptureMode m : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                    cudaStreamCaptureModeRelaxed}) {
        CUDA_CHECK(cudaStreamBeginCapture(s, m));
        k_add<<<1, 32, 0, s>>>(g_dev, 1);
        CUDA_CHECK(cudaGetLastError());
        g = nullptr;
        std::thread th([&] {
            e = cudaStreamEndCapture(s, &g);
            cudaGetLastError();
        });
        th.join();
        std::string after = is_capturing(s);
        printf("end other thread mode=%s: rc=%s graph=%s s=%s", mode_name(m), name(e), g ? "valid" : "null",
               after.c_str());
        if (g && e == cudaSuccess) CUDA_CHECK(cudaGraphDestroy(g));
        if (after != "none") {
            cudaGraph_t g2 = nullptr;
            e = cudaStreamEndCapture(s, &g2);
            printf(" own_end=%s graph=%s", name(e), g2 ? "valid" : "null");
            cudaGetLastError();
            if (g2 && e == cudaSuccess) cudaGraphDestroy(g2);
        }
        printf("\n");
    }

    /* Per-thread default stream. */
    e = cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeGlobal);
    printf("ptds begin: rc=%s ptds=%s\n", name(e), is_capturing(cudaStreamPerThread).c_str());
    k_add<<<1, 32, 0, cudaStreamPerThread>>>(g_dev, 1);
    printf("ptds kernel: rc=%s\n", name(cudaGetLastError()));
    n = 777;
    e = cudaStreamGetCaptureInfo(cudaStreamPerThread, &st, &id, nullptr, &deps, nullptr, &n);
    ty = cudaGraphNodeTypeCount;
    if (e == cudaSuccess && n == 1) CUDA_CHECK(cudaGraphNodeGetType(deps[0], &ty));
    printf("ptds info: rc=%s status=%s n=%zu dep0=%s\n", name(e), status_name(st), n, n == 1 ? node_type_name(ty) : "-");
    printf("ptds legacy_is_capturing: %s\n", is_capturing(cudaStreamLegacy).c_str());
    std::string other_ptds;
    std::thread th([&] { other_ptds = is_capturing(cudaStreamPerThread); });
    th.join();
    printf("ptds other_thread_ptds: %s\n", other_ptds.c_str());
    printf("ptds blocking_stream: %s\n", is_capturing(s).c_str());
    g = nullptr;
    e = cudaStreamEndCapture(cudaStreamPerThread, &g);
    nodes = 0;
    if (g) CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    printf("ptds end: rc=%s graph=%s nodes=%zu\n", name(e), g ? "valid" : "null", nodes);
    if (g) CUDA_CHECK(cudaGraphDestroy(g));
    /* PTDS capture, then the legacy stream is used. */
    CUDA_CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeGlobal));
    k_add<<<1, 32, 0, cudaStreamLegacy>>>(g_dev2, 1);
    e = cudaGetLastError();
    printf("ptds legacy_kernel: rc=%s ptds=%s\n", name(e), is_capturing(cudaStreamPerThread).c_str());
    g = nullptr;
    e = cudaStreamEndCapture(cudaStreamPerThread, &g);
    printf("ptds legacy_kernel end: rc=%s graph=%s\n", name(e), g ? "valid" : "null");
    cudaGetLastError();
    if (g && e == cudaSuccess) cudaGraphDestroy(g);
    /* Blocking stream capture, then PTDS is used. */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k_add<<<1, 32, 0, cudaStreamPerThread>>>(g_dev2, 1);
    e = cudaGetLastError();
    printf("blocking capture ptds_kernel: rc=%s s=%s\n", name(e), is_capturing(s).c_str());
    g = nullptr;
    e = cudaStreamEndCapture(s, &g);
    printf("blocking capture ptds_kernel end: rc=%s graph=%s\n", name(e), g ? "valid" : "null");
    cudaGetLastError();
    if (g && e == cudaSuccess) cudaGraphDestroy(g);

    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaEventDestroy(e2));
}

/* Thread modes: exchange semantics. */
static void exchange_modes(void)
{
    cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
    printf("exchange: initial=%s\n", mode_name(m));
    cudaStreamCaptureMode back = m;
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&back));
    printf("exchange: returned=%s\n", mode_name(back));
    cudaError_t e = cudaSuccess;
    std::thread tb([&] {
        cudaStreamCaptureMode bad = (cudaStreamCaptureMode)7;
        e = cudaThreadExchangeStreamCaptureMode(&bad);
        cudaStreamCaptureMode now = cudaStreamCaptureModeGlobal;
        cudaError_t e2 = cudaThreadExchangeStreamCaptureMode(&now);
        printf("exchange: bad_mode=%s returned_old=%d then_mode=%d (%s)\n", name(e), (int)bad, (int)now, name(e2));
        cudaGetLastError();
    });
    tb.join();
    /* Does the thread's own mode (not the capture's) decide, on the capturing thread? */
    m = cudaStreamCaptureModeRelaxed;
    CUDA_CHECK(cudaStreamBeginCapture(g_blocking, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
    void *p = nullptr;
    e = cudaMalloc(&p, 4096);
    std::string cap = is_capturing(g_blocking);
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
    cudaGraph_t g = nullptr;
    cudaError_t end = cudaStreamEndCapture(g_blocking, &g);
    printf("global capture, own thread relaxed: cudaMalloc=%s capturing=%s end=%s graph=%s\n", name(e), cap.c_str(),
           name(end), g ? "valid" : "null");
    cudaGetLastError();
    if (g) CUDA_CHECK(cudaGraphDestroy(g));
    if (p) CUDA_CHECK(cudaFree(p));
    /* Thread mode set to global before a relaxed capture: does the thread mode matter? */
    m = cudaStreamCaptureModeThreadLocal;
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
    CUDA_CHECK(cudaStreamBeginCapture(g_blocking, cudaStreamCaptureModeRelaxed));
    p = nullptr;
    e = cudaMalloc(&p, 4096);
    cap = is_capturing(g_blocking);
    g = nullptr;
    end = cudaStreamEndCapture(g_blocking, &g);
    CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
    printf("relaxed capture, own thread thread_local: cudaMalloc=%s capturing=%s end=%s graph=%s\n", name(e),
           cap.c_str(), name(end), g ? "valid" : "null");
    cudaGetLastError();
    if (g) CUDA_CHECK(cudaGraphDestroy(g));
    if (p) CUDA_CHECK(cudaFree(p));
    /* A thread_local capture on another thread, this thread global. */
    for (cudaStreamCaptureMode cm : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
        CUDA_CHECK(cudaStreamBeginCapture(g_blocking, cm));
        cudaStreamCaptureMode tm = cudaStreamCaptureModeThreadLocal;
        cudaError_t r2 = cudaSuccess;
        void *q = nullptr;
        std::thread th([&] {
            CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&tm));
            r2 = cudaMalloc(&q, 4096);
            cudaGetLastError();
        });
        th.join();
        cap = is_capturing(g_blocking);
        g = nullptr;
        end = cudaStreamEndCapture(g_blocking, &g);
        printf("capture %s, other thread thread_local: cudaMalloc=%s capturing=%s end=%s\n", mode_name(cm), name(r2),
               cap.c_str(), name(end));
        cudaGetLastError();
        if (g) CUDA_CHECK(cudaGraphDestroy(g));
        if (q) CUDA_CHECK(cudaFree(q));
    }
}

int main(void)
{
    alarm(240); /* a hang must not hold the GPU */
    setvbuf(stdout, nullptr, _IOLBF, 0);
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        printf("SKIP no CUDA device\n");
        return GPU_TEST_EXIT_SKIP;
    }
    int rt = 0, drv = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    /* Versions go to stderr: stdout must compare equal across drivers that agree. */
    fprintf(stderr, "capture_semantics: runtime %d, driver %d\n", rt, drv);

    CUDA_CHECK(cudaMalloc(&g_dev, 1024));
    CUDA_CHECK(cudaMalloc(&g_dev2, 1024));
    CUDA_CHECK(cudaMemset(g_dev, 0, 1024));
    CUDA_CHECK(cudaStreamCreate(&g_blocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_nonblocking, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreate(&g_other));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_nb_free, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_ev_in, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_ev_before, cudaEventDisableTiming));
    CUDA_CHECK(cudaMallocManaged(&g_managed, 4096));
    /* Warm up: module loading, every stream once. */
    k_add<<<1, 32>>>(g_dev, 0);
    k_add<<<1, 32, 0, g_blocking>>>(g_dev, 0);
    k_add<<<1, 32, 0, g_nonblocking>>>(g_dev, 0);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());

    exchange_modes();
    capture_info();

    for (cudaStreamCaptureMode m : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                    cudaStreamCaptureModeRelaxed})
        for (const call_desc &c : CALLS)
            for (thread_kind t : {T_SAME, T_OTHER, T_OTHER_RELAXED}) run_case(m, c, t);

    CUDA_CHECK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
