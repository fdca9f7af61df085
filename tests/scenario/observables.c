/*
 * observables.c - everything a program can observe of a capture, made
 * mid-capture at one capture site captured 20 times: `observables [ITERATIONS]`.
 *
 * Why: recap's self-recording (issue 13) will, at a repeat capture on a
 * driver without cuStreamBeginRecaptureToGraph, record the program's calls
 * itself instead of starting a driver capture. Whatever the program can
 * see must then be what a driver capture shows: capture status and id,
 * dependencies and their node types, fork and join, the prohibited calls
 * (tests/standin/READINGS.md "Capture prohibitions", measured on driver
 * 580.159) with the invalidation they cause, the thread's capture mode.
 * The test (test_observables.c) runs this program without recap and under
 * recap (13000 and 13030, RECAP_SELF_RECORD=on) and requires the same
 * stdout byte for byte.
 *
 * Each iteration captures at the same call site (capture_site) the same
 * topology with other kernel arguments, so that a cached graph would be
 * reused, and makes one observation (chosen by the iteration number) in the
 * middle. Each line prints return codes (CUresult numbers) and statuses;
 * capture ids appear only as "same"/"new" (never their values: a new
 * capture's id differs from every earlier one; their order is not
 * compared - the ids of captures recap records itself come from its own
 * range, README.md), graphs as node counts and checksums of the results.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"
#include "standin.h"

static struct sc_context ctx;
static CUstream cap_stream;      /* blocking: the legacy stream conflicts with it */
static CUstream side;            /* ctx.stream[1], non-blocking: the fork target */
static CUstream idle_stream;     /* never captures */
static CUevent ev_in_capture;    /* recorded inside the capture */
static CUevent ev_prev_capture;  /* recorded inside the previous iteration's capture */
static cuuint64_t seen_ids[256]; /* every earlier capture's id */
static int nseen_ids;

static int id_seen(cuuint64_t id)
{
    for (int i = 0; i < nseen_ids; i++)
        if (seen_ids[i] == id)
            return 1;
    return 0;
}

static const char *status_name(CUstreamCaptureStatus st)
{
    switch (st) {
    case CU_STREAM_CAPTURE_STATUS_NONE: return "none";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE: return "active";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED: return "invalidated";
    }
    return "?";
}

static const char *node_type_name(CUgraphNode n)
{
    CUgraphNodeType t;
    if (cuGraphNodeGetType(n, &t) != CUDA_SUCCESS) return "error";
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_HOST: return "host";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    default: return "other";
    }
}

/* "rc/status" of cuStreamIsCapturing. */
static const char *capturing(CUstream s)
{
    static char buf[4][48];
    static int next;
    char *b = buf[next++ % 4];
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc = cuStreamIsCapturing(s, &st);
    snprintf(b, 48, "%d/%s", (int)rc, rc ? "-" : status_name(st));
    return b;
}

/* cuStreamGetCaptureInfo (v3): rc, status, id (same as `ref` / up from the
 * last capture), dependency count and node types, graph is the capture's. */
static void info(const char *tag, CUstream s, cuuint64_t *id_out)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edata = NULL;
    size_t n = 0;
    CUresult rc = cuStreamGetCaptureInfo(s, &st, &id, &g, &deps, &edata, &n);
    printf("  info %s: rc=%d status=%s", tag, (int)rc, status_name(st));
    if (rc == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        const char *idword = id == 0 ? "zero" : id_out && *id_out ? (id == *id_out ? "same" : "other")
                                                     : (id_seen(id) ? "seen" : "new");
        printf(" id=%s graph=%s n=%zu deps=%s", idword, g ? "set" : "null", n, deps ? "set" : "null");
        for (size_t i = 0; i < n; i++)
            printf(" dep%zu=%s/edge%u", i, node_type_name(deps[i]), edata ? (unsigned)edata[i].type : 99u);
        if (id_out && !*id_out) *id_out = id;
    }
    printf("\n");
}

static CUresult axpy(CUstream s, float a, int x, int y)
{
    struct sc_op op = { .type = SC_AXPY, .a = a, .x = x, .y = y };
    CUfunction f = ctx.axpy;
    int n = SC_N;
    void *params[] = { &a, &ctx.buf[op.x], &ctx.buf[op.y], &n };
    return cuLaunchKernel(f, SC_N / 64, 1, 1, 64, 1, 1, 0, s, params, NULL);
}

static CUresult scale(CUstream s, float a, int x)
{
    int n = SC_N;
    void *params[] = { &ctx.buf[x], &a, &n };
    return cuLaunchKernel(ctx.scale, SC_N / 64, 1, 1, 64, 1, 1, 0, s, params, NULL);
}

/* --- calls made on another thread -------------------------------------- */

/* Host memory for cuMemHostRegister; host callbacks that ran. */
static char host_buf[4096];
static int callbacks_run;

static void CUDA_CB count_callback(CUstream s, CUresult status, void *data)
{
    (void)s, (void)status, (void)data;
    __atomic_add_fetch(&callbacks_run, 1, __ATOMIC_RELAXED);
}

static CUresult host_register(void)
{
    CUresult rc = cuMemHostRegister(host_buf, sizeof host_buf, 0);
    if (rc == CUDA_SUCCESS) cuMemHostUnregister(host_buf);
    return rc;
}

struct other_call {
    int what;                  /* 0 cuMemAlloc, 1 cuStreamEndCapture, 2 cuMemHostRegister,
                                  3 cuStreamAddCallback on the capturing stream */
    int relaxed;               /* exchange to RELAXED first */
    CUresult rc;
    CUgraph graph;
};

static void *other_thread(void *p)
{
    struct other_call *a = p;
    cuCtxSetCurrent(ctx.ctx);
    if (a->relaxed) {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        cuThreadExchangeStreamCaptureMode(&m);
    }
    if (a->what == 0) {
        CUdeviceptr d = 0;
        a->rc = cuMemAlloc(&d, 256);
        if (a->rc == CUDA_SUCCESS) cuMemFree(d);
    } else if (a->what == 1) {
        a->rc = cuStreamEndCapture(cap_stream, &a->graph);
    } else if (a->what == 2) {
        a->rc = host_register();
    } else {
        a->rc = cuStreamAddCallback(cap_stream, count_callback, NULL, 0);
    }
    return NULL;
}

static CUresult on_other_thread(int what, int relaxed, CUgraph *graph)
{
    pthread_t t;
    struct other_call a = { .what = what, .relaxed = relaxed };
    pthread_create(&t, NULL, other_thread, &a);
    pthread_join(t, NULL);
    if (graph) *graph = a.graph;
    return a.rc;
}

/* --- the observation of iteration `it` ---------------------------------- */

/* Returns 1 if the capture was ended here (by another thread). */
static int observe(int it, CUgraph *ended)
{
    CUdeviceptr d = 0;
    CUresult rc;
    CUstreamCaptureMode m;
    switch (it) {
    case 1: /* status and info */
        printf("  capturing: cap=%s", capturing(cap_stream));
        printf(" side=%s", capturing(side));
        printf(" idle=%s\n", capturing(idle_stream));
        info("cap", cap_stream, NULL);
        info("idle", idle_stream, NULL);
        break;
    case 2: /* fork and join through events, a kernel on each stream */
        printf("  fork: record=%d", (int)cuEventRecord(ctx.fork_event, cap_stream));
        rc = cuStreamWaitEvent(side, ctx.fork_event, 0);
        printf(" wait=%d side=%s\n", (int)rc, capturing(side));
        info("side after fork", side, NULL);
        rc = scale(side, 0.5f + 0.25f * (float)it, 2);
        printf("  fork kernels: side=%d", (int)rc);
        printf(" cap=%d\n", (int)axpy(cap_stream, 0.125f, 3, 1));
        info("cap", cap_stream, NULL);
        info("side", side, NULL);
        printf("  join: record=%d", (int)cuEventRecord(ctx.join_event, side));
        printf(" wait=%d\n", (int)cuStreamWaitEvent(cap_stream, ctx.join_event, 0));
        info("cap after join", cap_stream, NULL);
        break;
    case 4: /* a prohibited call on the capturing thread (global mode) */
        rc = cuMemAlloc(&d, 256);
        printf("  cuMemAlloc(this thread): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        if (rc == CUDA_SUCCESS) cuMemFree(d);
        info("cap", cap_stream, NULL);
        break;
    case 6: /* a prohibited call on another thread (its mode global) */
        rc = on_other_thread(0, 0, NULL);
        printf("  cuMemAlloc(other thread): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 7: /* another thread, relaxed: allowed */
        rc = on_other_thread(0, 1, NULL);
        printf("  cuMemAlloc(other thread, relaxed): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 8: /* synchronising the capturing stream */
        rc = cuStreamSynchronize(cap_stream);
        printf("  cuStreamSynchronize(cap): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 9: /* querying the capturing stream */
        rc = cuStreamQuery(cap_stream);
        printf("  cuStreamQuery(cap): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 10: /* an event recorded in the capture */
        printf("  cuEventRecord(in capture): rc=%d\n", (int)cuEventRecord(ev_in_capture, cap_stream));
        rc = cuEventQuery(ev_in_capture);
        printf("  cuEventQuery(captured event): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 11: /* an event recorded in the last capture, which has ended */
        rc = cuEventQuery(ev_prev_capture);
        printf("  cuEventQuery(event of an ended capture): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        rc = cuStreamWaitEvent(cap_stream, ev_prev_capture, 0);
        printf("  cuStreamWaitEvent(event of an ended capture): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 12: /* the legacy stream: a query (no invalidation), then a launch */
        printf("  legacy query: %s", capturing(CU_STREAM_LEGACY));
        printf(" cap=%s\n", capturing(cap_stream));
        rc = axpy(CU_STREAM_LEGACY, 1.0f, 0, 3);
        printf("  legacy launch: rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 13: /* a synchronous copy: the legacy stream again */
        rc = cuMemcpyDtoD(ctx.buf[3], ctx.buf[2], 64);
        printf("  cuMemcpyDtoD: rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 14: /* this thread relaxed: an allowed allocation and free */
        m = CU_STREAM_CAPTURE_MODE_RELAXED;
        printf("  exchange: rc=%d", (int)cuThreadExchangeStreamCaptureMode(&m));
        printf(" old=%d", (int)m);
        rc = cuMemAlloc(&d, 256);
        printf(" cuMemAlloc=%d", (int)rc);
        printf(" cuMemFree=%d", rc == CUDA_SUCCESS ? (int)cuMemFree(d) : -1);
        printf(" cuStreamSynchronize(idle)=%d", (int)cuStreamSynchronize(idle_stream));
        printf(" cap=%s", capturing(cap_stream));
        printf(" exchange_back=%d", (int)cuThreadExchangeStreamCaptureMode(&m));
        printf(" old=%d\n", (int)m);
        info("cap", cap_stream, NULL);
        break;
    case 15: /* a potentially unsafe synchronisation of another stream */
        rc = cuStreamSynchronize(idle_stream);
        printf("  cuStreamSynchronize(idle): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 16: /* the context */
        rc = cuCtxSynchronize();
        printf("  cuCtxSynchronize: rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 17: /* the end from another thread (global mode) */
        rc = on_other_thread(1, 0, ended);
        printf("  cuStreamEndCapture(other thread): rc=%d graph=%s cap=%s\n", (int)rc, *ended ? "set" : "null",
               capturing(cap_stream));
        return 1;
    case 18: /* end on the forked stream instead of the origin */
        cuEventRecord(ctx.fork_event, cap_stream);
        cuStreamWaitEvent(side, ctx.fork_event, 0);
        rc = cuStreamEndCapture(side, ended);
        printf("  cuStreamEndCapture(side): rc=%d graph=%s", (int)rc, *ended ? "set" : "null");
        printf(" cap=%s", capturing(cap_stream));
        printf(" side=%s\n", capturing(side));
        break;
    case 19: /* a fork left unjoined */
        cuEventRecord(ctx.fork_event, cap_stream);
        rc = cuStreamWaitEvent(side, ctx.fork_event, 0);
        printf("  unjoined fork: wait=%d", (int)rc);
        printf(" kernel=%d side=%s\n", (int)scale(side, 1.5f, 2), capturing(side));
        break;
    case 20: /* work no capture can hold, on the capturing stream (measured: refused) */
        rc = cuStreamAddCallback(cap_stream, count_callback, NULL, 0);
        printf("  cuStreamAddCallback(cap): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 21: /* ... on a stream outside the capture: ordinary work */
        rc = cuStreamAddCallback(idle_stream, count_callback, NULL, 0);
        printf("  cuStreamAddCallback(idle): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 22:
        rc = cuStreamAttachMemAsync(cap_stream, ctx.buf[0], 0, CU_MEM_ATTACH_SINGLE);
        printf("  cuStreamAttachMemAsync(cap): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 23: /* page-locking host memory: potentially unsafe */
        rc = host_register();
        printf("  cuMemHostRegister(this thread): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 24:
        rc = on_other_thread(2, 0, NULL);
        printf("  cuMemHostRegister(other thread): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 25:
        rc = on_other_thread(3, 0, NULL);
        printf("  cuStreamAddCallback(cap, other thread): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    case 26: /* the capturing stream destroyed mid-capture (the stand-in
              * refuses it and invalidates the capture: not measured) */
        rc = cuStreamDestroy(cap_stream);
        printf("  cuStreamDestroy(cap): rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
        break;
    default:
        break;
    }
    return 0;
}

/* The one capture site: every iteration begins its capture here. */
static __attribute__((noinline)) CUresult capture_site(CUstreamCaptureMode mode)
{
    return cuStreamBeginCapture(cap_stream, mode);
}

static void iteration(int it)
{
    CUgraph graph = NULL, ended = NULL;
    CUgraphExec exec = NULL;
    cuuint64_t id = 0;
    CUresult rc;

    printf("it=%d\n", it);
    rc = capture_site(CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("  begin: rc=%d cap=%s\n", (int)rc, capturing(cap_stream));
    info("after begin", cap_stream, &id);
    printf("  kernel1: rc=%d\n", (int)axpy(cap_stream, 1.0f + 0.5f * (float)it, it % 2, 2));
    info("after kernel1", cap_stream, &id);
    if (observe(it, &ended)) {
        printf("  kernel2 after end: rc=%d\n", (int)scale(cap_stream, 0.75f, 2));
        if (ended) cuGraphDestroy(ended);
    } else {
        printf("  kernel2: rc=%d\n", (int)scale(cap_stream, 0.5f + 0.0625f * (float)(it % 5), 2));
        /* record in the capture: next iteration's "event of an ended capture" */
        printf("  record: rc=%d\n", (int)cuEventRecord(ev_prev_capture, cap_stream));
        rc = cuStreamEndCapture(cap_stream, &graph);
        size_t nodes = 0;
        if (graph) cuGraphGetNodes(graph, NULL, &nodes);
        printf("  end: rc=%d graph=%s nodes=%zu", (int)rc, graph ? "set" : "null", nodes);
        printf(" cap=%s", capturing(cap_stream));
        printf(" side=%s\n", capturing(side));
    }
    if (id && !id_seen(id) && nseen_ids < 256)
        seen_ids[nseen_ids++] = id;
    if (graph) {
        rc = cuGraphInstantiateWithFlags(&exec, graph, 0);
        printf("  instantiate: rc=%d", (int)rc);
        if (exec) {
            printf(" launch=%d", (int)cuGraphLaunch(exec, cap_stream));
            printf(" sync=%d", (int)cuStreamSynchronize(cap_stream));
            printf(" exec_destroy=%d", (int)cuGraphExecDestroy(exec));
        }
        printf(" graph_destroy=%d\n", (int)cuGraphDestroy(graph));
    }
    /* Whatever a failure left: the streams must be usable again. */
    printf("  after: cap=%s", capturing(cap_stream));
    printf(" side=%s", capturing(side));
    printf(" ctx_sync=%d", (int)cuCtxSynchronize());
    printf(" sum=%08x\n", sc_checksum(&ctx));
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    setvbuf(stdout, NULL, _IOLBF, 0);
    sc_setup(&ctx);
    side = ctx.stream[1];
    if (cuStreamCreate(&cap_stream, CU_STREAM_DEFAULT) || cuStreamCreate(&idle_stream, CU_STREAM_NON_BLOCKING) ||
        cuEventCreate(&ev_in_capture, CU_EVENT_DISABLE_TIMING) ||
        cuEventCreate(&ev_prev_capture, CU_EVENT_DISABLE_TIMING)) {
        fprintf(stderr, "observables: set-up failed\n");
        return 2;
    }
    for (int it = 0; it < iters; it++) iteration(it);
    cuCtxSynchronize();
    printf("host callbacks run: %d\n", __atomic_load_n(&callbacks_run, __ATOMIC_RELAXED));
    printf("final sum=%08x\n", sc_checksum(&ctx));
    sc_write_stats();
    return 0;
}
