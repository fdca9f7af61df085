/*
 * recapture_conformance.c - does the running driver's
 * cuStreamBeginRecaptureToGraph behave the way the stand-in driver assumes?
 *
 * A driver-API program that does not use recap. It resolves the CUDA 13.3
 * recapture API with cuGetProcAddress_v2 at the driver's own version
 * (SPEC.md section 1) and makes one named check per point where the
 * documentation leaves the behaviour open and the stand-in had to choose a
 * reading (tests/standin/READINGS.md lists them, with the knob value that
 * gives each reading). For each point it prints
 *
 *   CHECK <name> <what it saw>; real driver: <stand-in setting>
 *
 * where the setting is a knob value (STANDIN_RECAPTURE_FAILURE=call), "as
 * modelled" for a point the stand-in models one way and the driver agrees, or
 * NOT MODELLED with the stand-in's reading when no setting reproduces what
 * the driver did. The last lines are "SETTINGS <knob=value ...>" (the
 * stand-in defaults that make it match this driver: one change) and a
 * summary. Exit 0 when every point matched a setting, 1 when one did not (or
 * two points need different values of one knob), 77 with a SKIP line naming
 * the driver version when the driver has no recapture API.
 *
 * Kernels: PTX text below, JIT-compiled by a real driver; on the stand-in
 * (found by its standin_register_kernel symbol) C functions of the same names.
 */
#include "shim/base/cuda_compat.h"
#include "tests/standin/standin.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef CUresult(CUDAAPI *begin_recapture_fn)(CUstream, CUstreamCaptureMode, CUgraph,
                                             CUgraphRecaptureCallback, void *);
static begin_recapture_fn begin_recapture;

#include "conformance_report.h"

/* ------------------------------------------------------------------ */
/* Kernels.                                                            */

#define PTX_KERNEL(NAME, OP)                                                              \
    ".visible .entry " NAME "(.param .u64 p, .param .f32 v)\n{\n"                       \
    ".reg .b32 %r<5>;\n.reg .f32 %f<4>;\n.reg .b64 %rd<5>;\n"                            \
    "ld.param.u64 %rd1, [p];\nld.param.f32 %f1, [v];\ncvta.to.global.u64 %rd2, %rd1;\n" \
    "mov.u32 %r1, %ctaid.x;\nmov.u32 %r2, %ntid.x;\nmov.u32 %r3, %tid.x;\n"              \
    "mad.lo.s32 %r4, %r1, %r2, %r3;\nmul.wide.s32 %rd3, %r4, 4;\nadd.s64 %rd4, %rd2, %rd3;\n" \
    "ld.global.f32 %f2, [%rd4];\n" OP " %f3, %f2, %f1;\nst.global.f32 [%rd4], %f3;\nret;\n}\n"

static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n" PTX_KERNEL(
    "conf_add", "add.rn.f32") PTX_KERNEL("conf_mul", "mul.rn.f32");

static void standin_add(const struct standin_dims *d, void **params)
{
    float *p = (float *)(uintptr_t) * (CUdeviceptr *)params[0];
    float v = *(float *)params[1];
    for (unsigned i = 0; i < d->grid[0] * d->block[0]; i++) p[i] += v;
}

static void standin_mul(const struct standin_dims *d, void **params)
{
    float *p = (float *)(uintptr_t) * (CUdeviceptr *)params[0];
    float v = *(float *)params[1];
    for (unsigned i = 0; i < d->grid[0] * d->block[0]; i++) p[i] *= v;
}

static void register_standin_kernels(void)
{
    typedef int (*reg_fn)(const char *, standin_kernel_fn, unsigned, const size_t *);
    reg_fn reg = (reg_fn)dlsym(RTLD_DEFAULT, "standin_register_kernel");
    static const size_t sizes[2] = {sizeof(CUdeviceptr), sizeof(float)};
    if (!reg) return; /* a real driver: the PTX is compiled */
    reg("conf_add", standin_add, 2, sizes);
    reg("conf_mul", standin_mul, 2, sizes);
}

/* ------------------------------------------------------------------ */
/* Work: a list of operations, captured or recaptured onto one stream. */

enum { BLOCK = 64, MAX_GRID = 4, ELEMENTS = BLOCK * MAX_GRID, MAX_OPS = 8 };
enum op_kind { OP_ADD, OP_MUL, OP_MEMSET, OP_ALLOC, OP_FREE };
struct op {
    enum op_kind kind;
    float value;         /* kernels; memset: the value as a float */
    unsigned grid;       /* kernels: blocks of BLOCK threads */
    size_t bytes;        /* alloc */
};

static CUcontext ctx;
static CUstream stream;
static CUfunction f_add, f_mul;
static CUdeviceptr buffer;

struct outcome {
    CUresult begin, call[MAX_OPS], end;
    int ncalls;            /* calls made */
    CUgraph out;           /* phGraph of cuStreamEndCapture (sentinel if unwritten) */
    CUdeviceptr alloc_ptr; /* what an OP_ALLOC handed out */
};
#define UNWRITTEN ((CUgraph)(uintptr_t)0x5e5e5e5e)

static CUresult issue(const struct op *o, CUdeviceptr *alloc)
{
    float v = o->value;
    void *args[2] = {&buffer, &v};
    switch (o->kind) {
    case OP_ADD: case OP_MUL:
        return cuLaunchKernel(o->kind == OP_ADD ? f_add : f_mul, o->grid ? o->grid : MAX_GRID, 1, 1,
                              BLOCK, 1, 1, 0, stream, args, NULL);
    case OP_MEMSET: {
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        return cuMemsetD32Async(*alloc ? *alloc : buffer, bits, 16, stream);
    }
    case OP_ALLOC: return cuMemAllocAsync(alloc, o->bytes, stream);
    case OP_FREE: return cuMemFreeAsync(*alloc, stream);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Issues ops in a capture (recapture into `into` when given) and ends it.
 * After a failed alloc the operations that use its address are skipped. */
static void run_capture(CUgraph into, CUgraphRecaptureCallback cb, void *user,
                        const struct op *ops, int n, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    o->out = UNWRITTEN;
    o->begin = into ? begin_recapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, into, cb, user)
                    : cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (o->begin) return;
    for (int i = 0; i < n; i++) {
        if ((ops[i].kind == OP_MEMSET || ops[i].kind == OP_FREE) && ops[0].kind == OP_ALLOC &&
            o->call[0])
            break;
        o->call[i] = issue(&ops[i], &o->alloc_ptr);
        o->ncalls = i + 1;
    }
    o->end = cuStreamEndCapture(stream, &o->out);
}

static CUgraph capture(const struct op *ops, int n)
{
    struct outcome o;
    run_capture(NULL, NULL, NULL, ops, n, &o);
    if (o.begin || o.end) {
        fprintf(stderr, "a plain capture failed: begin %s, end %s\n", err_name(o.begin), err_name(o.end));
        exit(1);
    }
    for (int i = 0; i < o.ncalls; i++) CHECKED(o.call[i]);
    return o.out;
}

/* What the driver said at each point, e.g. "begin ok, calls ok ok 918, end 901". */
static const char *describe(const struct outcome *o)
{
    static char buf[512];
    int len = snprintf(buf, sizeof buf, "begin %s", o->begin ? err_name(o->begin) : "ok");
    if (o->begin) return buf;
    len += snprintf(buf + len, sizeof buf - len, ", calls");
    for (int i = 0; i < o->ncalls; i++)
        len += snprintf(buf + len, sizeof buf - len, " %s", o->call[i] ? err_name(o->call[i]) : "ok");
    snprintf(buf + len, sizeof buf - len, ", end %s", o->end ? err_name(o->end) : "ok");
    return buf;
}

/* The first error and where it surfaced, relative to the offending call k. */
enum surface { AT_NONE, AT_BEGIN, AT_EARLIER, AT_CALL, AT_NEXT, AT_AFTER, AT_END };
static enum surface surfaced(const struct outcome *o, int k, CUresult *err)
{
    *err = CUDA_SUCCESS;
    if (o->begin) return *err = o->begin, AT_BEGIN;
    for (int i = 0; i < o->ncalls; i++) {
        if (!o->call[i]) continue;
        *err = o->call[i];
        return i < k ? AT_EARLIER : i == k ? AT_CALL : i == k + 1 ? AT_NEXT : AT_AFTER;
    }
    if (o->end) return *err = o->end, AT_END;
    return AT_NONE;
}
static const char *surface_words[] = {"nowhere", "at begin", "before the offending call",
                                      "at the offending call", "at the next call",
                                      "at a later call", "at cuStreamEndCapture"};

/* Knob values of STANDIN_RECAPTURE_FAILURE agreeing with a failure at call k
 * of n calls (with no next call, "later" surfaces at the end). */
static unsigned failure_mask(enum surface at, int k, int n)
{
    switch (at) {
    case AT_CALL: return 1u;
    case AT_NEXT: return 2u;
    case AT_END: return k + 1 >= n ? 6u : 4u;
    default: return 0;
    }
}

/* Destroys a graph once, whatever state a failure left it in. */
static CUresult destroy_graph(CUgraph g)
{
    return g ? cuGraphDestroy(g) : CUDA_SUCCESS;
}

static size_t graph_nodes(CUgraph g, CUgraphNode *nodes, size_t cap, CUresult *rc)
{
    size_t n = cap;
    *rc = cuGraphGetNodes(g, nodes, &n);
    return *rc ? 0 : n;
}

/* ------------------------------------------------------------------ */
/* The recapture callback: records what it is told.                   */

struct cb_record {
    CUgraphNode node;
    CUgraphRecaptureStatus status;
    CUgraphNodeType type;
    float old_value, new_value; /* kernels: argument 1 (NaN when unreadable) */
    CUfunction old_func, new_func;
};
struct cb_log {
    int calls;
    struct cb_record rec[MAX_OPS * 2];
    int refuse_changed; /* answer CUDA_ERROR_UNKNOWN for a node whose value changed */
};

static float kernel_arg(const CUgraphNodeParams *p)
{
    if (!p || p->type != CU_GRAPH_NODE_TYPE_KERNEL || !p->kernel.kernelParams) return 0.0f / 0.0f;
    return *(const float *)p->kernel.kernelParams[1];
}

static CUresult CUDAAPI record_cb(void *data, CUgraphNode node, const CUgraphNodeParams *orig,
                                  const CUgraphNodeParams *now, CUgraphRecaptureStatus status)
{
    struct cb_log *log = data;
    struct cb_record r = {node, status, orig ? orig->type : (CUgraphNodeType)-1,
                          kernel_arg(orig), kernel_arg(now), NULL, NULL};
    if (orig && orig->type == CU_GRAPH_NODE_TYPE_KERNEL) r.old_func = orig->kernel.func;
    if (now && now->type == CU_GRAPH_NODE_TYPE_KERNEL) r.new_func = now->kernel.func;
    if (log->calls < (int)(sizeof log->rec / sizeof log->rec[0])) log->rec[log->calls] = r;
    log->calls++;
    if (log->refuse_changed && (r.old_value != r.new_value || r.old_func != r.new_func))
        return CUDA_ERROR_UNKNOWN;
    return CUDA_SUCCESS;
}

static const struct cb_record *record_for(const struct cb_log *log, CUgraphNode node)
{
    for (int i = 0; i < log->calls && i < (int)(sizeof log->rec / sizeof log->rec[0]); i++)
        if (log->rec[i].node == node) return &log->rec[i];
    return NULL;
}

static const char *status_name(CUgraphRecaptureStatus s)
{
    switch ((int)s) {
    case CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE: return "ELIGIBLE";
    case CU_GRAPH_RECAPTURE_INELIGIBLE_FOR_UPDATE: return "INELIGIBLE";
    case CU_GRAPH_RECAPTURE_ERROR: return "ERROR";
    default: return "unknown";
    }
}

static void read_buffer(float *out)
{
    CHECKED(cuStreamSynchronize(stream));
    CHECKED(cuMemcpyDtoH(out, buffer, sizeof(float) * ELEMENTS));
}

static float run_graph(CUgraph g, CUgraphExec exec_or_null)
{
    float host[ELEMENTS];
    CUgraphExec e = exec_or_null;
    CHECKED(cuMemsetD32(buffer, 0, ELEMENTS));
    CHECKED(cuCtxSynchronize());
    if (!e) CHECKED(cuGraphInstantiate(&e, g, 0));
    CHECKED(cuGraphLaunch(e, stream));
    read_buffer(host);
    if (!exec_or_null) CHECKED(cuGraphExecDestroy(e));
    return host[0];
}

/* ------------------------------------------------------------------ */
/* The checks, one function per group of points.                       */

static const struct op A = {OP_ADD, 1.0f, 0, 0}, B = {OP_MUL, 2.0f, 0, 0}, C = {OP_ADD, 3.0f, 0, 0};

/* Same arguments, changed arguments, another function, other dimensions;
 * node identity, phGraph, the parameters afterwards, an executable
 * instantiated from the graph, destroying the graph afterwards. */
static void check_matching_work(void)
{
    const struct op same[3] = {A, B, C};
    CUgraph g = capture(same, 3);
    CUgraphNode before[8], after[8];
    CUresult rc;
    size_t n0 = graph_nodes(g, before, 8, &rc);
    CUgraphExec exec;
    CHECKED(cuGraphInstantiate(&exec, g, 0));

    struct cb_log log = {0};
    struct outcome o;
    run_capture(g, record_cb, &log, same, 3, &o);
    int ok = !o.begin && !o.end && o.call[0] == 0 && o.call[1] == 0 && o.call[2] == 0;
    if (!ok) {
        check_knob("same_args_callback", fmt("the recapture failed: %s", describe(&o)),
                   KNOB_CALLBACK, 0);
        fprintf(stderr, "recapture of identical work failed; the other checks of it are skipped\n");
        return;
    }
    int all_eligible = 1;
    for (int i = 0; i < log.calls && i < 3; i++)
        all_eligible &= log.rec[i].status == CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE;
    check_knob("same_args_callback", fmt("%d callback calls for 3 unchanged nodes%s", log.calls,
                                         log.calls && all_eligible ? ", all ELIGIBLE" : ""),
               KNOB_CALLBACK, log.calls == 0 ? 1u : log.calls == 3 && all_eligible ? 2u : 0u);
    check_fixed("end_graph_handle",
                o.out == g ? "phGraph is the recaptured graph" :
                o.out == UNWRITTEN ? "phGraph not written" : "phGraph is another graph",
                o.out == g, "the recaptured graph's own handle");
    if (o.out != g && o.out != UNWRITTEN && o.out) destroy_graph(o.out);
    size_t n1 = graph_nodes(g, after, 8, &rc);
    int same_nodes = !rc && n1 == n0 && !memcmp(before, after, n0 * sizeof before[0]);
    check_fixed("node_handles_survive", fmt("%zu nodes before, %zu after, handles %s", n0, n1,
                                            same_nodes ? "identical" : "differ"),
                same_nodes, "the same handles in the same order");

    /* Changed value, then another function, then other dimensions, each a
     * recapture of the previous result at node 0. */
    static const struct {
        const char *name;
        struct op op;
    } variants[3] = {
        {"changed_args_status", {OP_ADD, 5.0f, 0, 0}},
        {"other_function_status", {OP_MUL, 5.0f, 0, 0}},
        {"other_dims_status", {OP_MUL, 5.0f, 2, 0}},
    };
    for (int v = 0; v < 3; v++) {
        struct op ops[3] = {variants[v].op, B, C};
        memset(&log, 0, sizeof log);
        run_capture(g, record_cb, &log, ops, 3, &o);
        const struct cb_record *r = record_for(&log, before[0]);
        const char *status = r ? status_name(r->status) : "no callback for the node";
        check_fixed(variants[v].name, fmt("%s (%s)", status, describe(&o)),
                    r && r->status == CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE && !o.end,
                    "ELIGIBLE, as cuGraphExecUpdate would accept it");
        if (v == 0) {
            check_fixed("callback_node_handle",
                        r ? "the callback names the original node handle" : "no call names it",
                        r != NULL, "the original node's handle");
            check_fixed("callback_params",
                        r ? fmt("original argument %g, recaptured %g", r->old_value, r->new_value)
                          : "no call",
                        r && r->old_value == 1.0f && r->new_value == 5.0f,
                        "original 1, recaptured 5");
            CUDA_KERNEL_NODE_PARAMS kp;
            rc = cuGraphKernelNodeGetParams(before[0], &kp);
            float now = rc || !kp.kernelParams ? -1.0f : *(float *)kp.kernelParams[1];
            check_fixed("params_after_recapture",
                        rc ? fmt("cuGraphKernelNodeGetParams: %s", err_name(rc))
                           : fmt("node 0's argument reads %g after the end", now),
                        now == 5.0f, "the recaptured value, 5");
            float old = run_graph(g, exec), fresh = run_graph(g, NULL);
            check_fixed("exec_from_graph",
                        fmt("executable instantiated before the recapture computes %g (old work: "
                            "5), the recaptured graph instantiated anew %g (new work: 13)",
                            old, fresh),
                        old == 5.0f && fresh == 13.0f,
                        "recapture allowed; the executable keeps its own parameters");
        }
    }
    CHECKED(cuGraphExecDestroy(exec));
    rc = destroy_graph(g);
    check_fixed("destroy_after_recapture", fmt("cuGraphDestroy: %s", rc ? err_name(rc) : "ok"),
                rc == CUDA_SUCCESS, "destroyed once like any graph");
}

/* Where a failure surfaces and with which error, what follows it, what is
 * left of the graph. Node 1 turns from a kernel into a memset. */
static void check_failure(void)
{
    const struct op orig[4] = {A, B, C, A};
    const struct op bad[4] = {A, {OP_MEMSET, 0.0f, 0, 0}, C, A};
    CUgraph g = capture(orig, 4);
    struct cb_log log = {0};
    struct outcome o;
    CUresult err, rc;
    run_capture(g, record_cb, &log, bad, 4, &o);
    enum surface at = surfaced(&o, 1, &err);
    check_knob("failure_point", fmt("type change at call 2 of 4 surfaced %s (%s)",
                                    surface_words[at], describe(&o)),
               KNOB_FAILURE, failure_mask(at, 1, 4));
    check_fixed("failure_error", err ? err_name(err) : "no error",
                err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE");
    if (at == AT_CALL || at == AT_NEXT) {
        int first = at == AT_CALL ? 2 : 3;
        CUresult later = first < o.ncalls ? o.call[first] : CUDA_SUCCESS;
        check_fixed("calls_after_failure", fmt("the next call returns %s", err_name(later)),
                    later == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
        check_fixed("end_after_failure", fmt("cuStreamEndCapture returns %s", err_name(o.end)),
                    o.end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
    } else {
        check_fixed("calls_after_failure", "no call failed before the end", at == AT_END,
                    "nothing to check when the end reports the failure");
        check_fixed("end_after_failure", fmt("cuStreamEndCapture returns %s", err_name(o.end)),
                    at == AT_END && o.end == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE,
                    "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE");
    }
    check_fixed("end_graph_after_failure",
                o.out == NULL ? "phGraph is NULL" : o.out == UNWRITTEN ? "phGraph not written"
                : o.out == g ? "phGraph is the failed graph" : "phGraph is another graph",
                o.out == NULL, "NULL");
    CUgraphNode nodes[8];
    size_t n = graph_nodes(g, nodes, 8, &rc);
    /* The documentation calls the graph undefined: the stand-in refuses every
     * use but the destroy; a driver that answers is just as valid. */
    say_check("graph_after_failure",
              rc ? fmt("cuGraphGetNodes: %s", err_name(rc)) : fmt("cuGraphGetNodes: %zu nodes", n),
              "as modelled (undefined; the stand-in refuses its use with "
              "CUDA_ERROR_ILLEGAL_STATE, stricter than any driver)");
    rc = destroy_graph(g);
    check_fixed("destroy_after_failure", fmt("cuGraphDestroy: %s", rc ? err_name(rc) : "ok"),
                rc == CUDA_SUCCESS, "destroyed exactly once, successfully");
}

/* More nodes, fewer nodes, other dependencies, a refusing callback. */
static void check_topology(void)
{
    struct outcome o;
    CUresult err;
    struct cb_log log = {0};
    const struct op two[2] = {A, B}, three[3] = {A, B, C};

    CUgraph g = capture(two, 2);
    run_capture(g, record_cb, &log, three, 3, &o);
    enum surface at = surfaced(&o, 2, &err);
    check_knob("more_nodes", fmt("a third node surfaced %s with %s", surface_words[at],
                                 err_name(err)),
               KNOB_FAILURE, err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE ? failure_mask(at, 2, 3) : 0);
    destroy_graph(g);

    g = capture(three, 3);
    run_capture(g, record_cb, &log, two, 2, &o);
    at = surfaced(&o, 2, &err);
    check_fixed("fewer_nodes", fmt("a missing third node surfaced %s with %s", surface_words[at],
                                   err_name(err)),
                at == AT_END && err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE,
                "at cuStreamEndCapture, CUDA_ERROR_GRAPH_RECAPTURE_FAILURE");
    destroy_graph(g);

    /* A fork onto a second stream and a join, recaptured the same way, then
     * all on one stream (the third node's dependencies differ). */
    CUstream side;
    CUevent fork_ev, join_ev;
    CHECKED(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    CHECKED(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    CHECKED(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
    CUgraph forked = NULL;
    for (int round = 0; round < 2; round++) {
        CUresult r[8] = {0};
        o.begin = round ? begin_recapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, forked, record_cb, &log)
                        : cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
        CHECKED(o.begin);
        CUdeviceptr none = 0;
        CUstream saved = stream;
        r[0] = issue(&A, &none);
        r[1] = cuEventRecord(fork_ev, stream);
        r[2] = cuStreamWaitEvent(side, fork_ev, 0);
        stream = side;
        r[3] = issue(&B, &none);
        r[4] = cuEventRecord(join_ev, side);
        stream = saved;
        r[5] = issue(&C, &none);
        r[6] = cuStreamWaitEvent(stream, join_ev, 0);
        r[7] = issue(&A, &none);
        CUgraph out = NULL;
        o.end = cuStreamEndCapture(stream, &out);
        for (int i = 0; i < 8; i++) CHECKED(r[i]);
        CHECKED(o.end);
        if (!round) forked = out;
        else check_fixed("fork_join_same", out == forked ? "recaptured, same graph" : "other graph",
                         out == forked, "a fork and join recapture like a straight line");
    }
    const struct op straight[4] = {A, B, C, A};
    run_capture(forked, record_cb, &log, straight, 4, &o);
    at = surfaced(&o, 2, &err);
    check_knob("deps_mismatch", fmt("other dependencies at call 3 of 4 surfaced %s with %s",
                                    surface_words[at], err_name(err)),
               KNOB_FAILURE, err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE ? failure_mask(at, 2, 4) : 0);
    destroy_graph(forked);
    CHECKED(cuEventDestroy(fork_ev));
    CHECKED(cuEventDestroy(join_ev));
    CHECKED(cuStreamDestroy(side));

    g = capture(three, 3);
    struct op changed[3] = {{OP_ADD, 9.0f, 0, 0}, B, C};
    memset(&log, 0, sizeof log);
    log.refuse_changed = 1;
    run_capture(g, record_cb, &log, changed, 3, &o);
    at = surfaced(&o, 0, &err);
    check_knob("callback_refusal_point", fmt("a callback answering CUDA_ERROR_UNKNOWN: %s",
                                             describe(&o)),
               KNOB_FAILURE, failure_mask(at, 0, 3));
    check_fixed("callback_refusal_error", err ? err_name(err) : "no error",
                err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE,
                "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE, not the callback's code");
    destroy_graph(g);
}

/* cuStreamIsCapturing and cuStreamGetCaptureInfo between two recaptured calls. */
static void check_capture_queries(void)
{
    const struct op two[2] = {A, B};
    CUgraph g = capture(two, 2);
    CUgraphNode nodes[2];
    CUresult rc;
    graph_nodes(g, nodes, 2, &rc);
    struct cb_log log = {0};
    CUdeviceptr none = 0;
    CHECKED(begin_recapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, g, record_cb, &log));
    CHECKED(issue(&A, &none));
    CUstreamCaptureStatus is = CU_STREAM_CAPTURE_STATUS_NONE, st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc_is = cuStreamIsCapturing(stream, &is);
    cuuint64_t id = 0;
    CUgraph in = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t ndeps = 0;
    CUresult rc_info = cuStreamGetCaptureInfo(stream, &st, &id, &in, &deps, &edges, &ndeps);
    CUgraphNode dep0 = !rc_info && ndeps && deps ? deps[0] : NULL; /* valid until the next call */
    CHECKED(issue(&B, &none));
    CUgraph out = NULL;
    CUresult rc_end = cuStreamEndCapture(stream, &out);
    check_fixed("is_capturing_during", fmt("%s, status %d", rc_is ? err_name(rc_is) : "ok", (int)is),
                !rc_is && is == CU_STREAM_CAPTURE_STATUS_ACTIVE, "ok, ACTIVE");
    check_fixed("capture_info_graph",
                rc_info ? err_name(rc_info)
                        : fmt("status %d, graph %s, id %s", (int)st,
                              in == g ? "the recaptured graph" : "another graph", id ? "set" : "0"),
                !rc_info && st == CU_STREAM_CAPTURE_STATUS_ACTIVE && in == g && id,
                "ACTIVE, the recaptured graph, a capture id");
    check_fixed("capture_info_deps",
                rc_info ? err_name(rc_info)
                        : fmt("%zu dependencies, %s", ndeps,
                              ndeps == 1 && dep0 == nodes[0] ? "the original first node"
                                                            : "not the original node"),
                !rc_info && ndeps == 1 && dep0 == nodes[0],
                "one: the original node just matched");
    if (rc_end) fprintf(stderr, "end of the query recapture: %s\n", err_name(rc_end));
    destroy_graph(g);
}

static void CUDAAPI note_release(void *flag)
{
    __atomic_store_n((int *)flag, 1, __ATOMIC_SEQ_CST);
}

static int wait_flag(int *flag, int ms)
{
    for (int i = 0; i <= ms && !__atomic_load_n(flag, __ATOMIC_SEQ_CST); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST);
}

/* A NULL callback; user objects attached to the graph. */
static void check_callback_and_user_objects(void)
{
    const struct op two[2] = {A, B};
    const struct op changed[2] = {{OP_ADD, 7.0f, 0, 0}, B};
    CUgraph g = capture(two, 2);
    struct outcome o;
    run_capture(g, NULL, NULL, changed, 2, &o);
    unsigned mask = !o.begin && !o.end ? 1u : o.begin == CUDA_ERROR_INVALID_VALUE ? 2u : 0u;
    check_knob("null_callback", fmt("a NULL callback: %s", describe(&o)), KNOB_NULL_CALLBACK, mask);
    destroy_graph(g);

    static int released;
    CUuserObject obj;
    g = capture(two, 2);
    CHECKED(cuUserObjectCreate(&obj, &released, note_release, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECKED(cuGraphRetainUserObject(g, obj, 1, CU_GRAPH_USER_OBJECT_MOVE));
    struct cb_log log = {0};
    CUdeviceptr none = 0;
    CUresult rc = begin_recapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, g, record_cb, &log);
    const char *when = "never (1 s after the end)";
    if (!rc && wait_flag(&released, 200)) when = "during the begin";
    if (!rc) {
        CUgraph out;
        issue(&A, &none);
        issue(&B, &none);
        rc = cuStreamEndCapture(stream, &out);
    }
    CHECKED(cuCtxSynchronize());
    if (!strncmp(when, "never", 5) && wait_flag(&released, 1000)) when = "by the end";
    check_fixed("user_objects_released", fmt("the graph's only reference released %s (%s)", when,
                                             rc ? err_name(rc) : "ok"),
                !strcmp(when, "during the begin"), "released by cuStreamBeginRecaptureToGraph");
    destroy_graph(g);
}

/* Node types a recapture rejects, and memory nodes. */
static void check_node_types(void)
{
    const struct op one[1] = {A};
    for (int kind = 0; kind < 3; kind++) {
        static const char *names[3] = {"rejects_child_graph", "rejects_conditional", "rejects_empty_node"};
        CUgraph g = capture(one, 1), child = NULL;
        CUgraphNode first, added;
        size_t n = 1;
        CHECKED(cuGraphGetNodes(g, &first, &n));
        if (kind == 0) {
            child = capture(one, 1);
            CHECKED(cuGraphAddChildGraphNode(&added, g, &first, 1, child));
        } else if (kind == 1) {
            CUgraphConditionalHandle h;
            CHECKED(cuGraphConditionalHandleCreate(&h, g, ctx, 0, 0));
            CUgraphNodeParams np;
            memset(&np, 0, sizeof np);
            np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
            np.conditional.handle = h;
            np.conditional.type = CU_GRAPH_COND_TYPE_IF;
            np.conditional.size = 1;
            np.conditional.ctx = ctx;
            CHECKED(cuGraphAddNode(&added, g, &first, NULL, 1, &np));
        } else {
            CHECKED(cuGraphAddEmptyNode(&added, g, &first, 1));
        }
        struct cb_log log = {0};
        struct outcome o;
        CUresult err;
        run_capture(g, record_cb, &log, one, 1, &o);
        enum surface at = surfaced(&o, 0, &err);
        check_fixed(names[kind], fmt("%s: %s", surface_words[at], describe(&o)),
                    at == AT_BEGIN && err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE,
                    "refused at begin with CUDA_ERROR_GRAPH_RECAPTURE_FAILURE");
        destroy_graph(g);
        destroy_graph(child);
    }

    const struct op mem[3] = {{OP_ALLOC, 0.0f, 0, 1024}, {OP_MEMSET, 1.0f, 0, 0}, {OP_FREE, 0, 0, 0}};
    struct outcome o, re;
    run_capture(NULL, NULL, NULL, mem, 3, &o);
    for (int i = 0; i < o.ncalls; i++) CHECKED(o.call[i]);
    CHECKED(o.end);
    struct cb_log log = {0};
    run_capture(o.out, record_cb, &log, mem, 3, &re);
    check_fixed("memory_nodes_same",
                fmt("%s, address %s", describe(&re),
                    re.alloc_ptr == o.alloc_ptr ? "the original's" : "a new one"),
                !re.begin && !re.end && re.alloc_ptr == o.alloc_ptr,
                "recaptured; the allocation hands back the original address");
    if (re.begin || re.end) {
        destroy_graph(o.out);
        run_capture(NULL, NULL, NULL, mem, 3, &o);
    }
    struct op bigger[3] = {{OP_ALLOC, 0.0f, 0, 2048}, mem[1], mem[2]};
    run_capture(o.out, record_cb, &log, bigger, 3, &re);
    CUresult err;
    enum surface at = surfaced(&re, 0, &err);
    check_knob("memory_node_changed", fmt("another size surfaced %s with %s", surface_words[at],
                                          err_name(err)),
               KNOB_FAILURE, err == CUDA_ERROR_GRAPH_RECAPTURE_FAILURE ? failure_mask(at, 0, 3) : 0);
    destroy_graph(o.out);
}

/* A graph never captured; begin on a legacy or capturing stream, a bad mode. */
static void check_begin(void)
{
    CUgraph g;
    CUgraphNode node;
    float v = 1.0f;
    void *args[2] = {&buffer, &v};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = f_add;
    kp.gridDimX = MAX_GRID, kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = BLOCK, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CHECKED(cuGraphCreate(&g, 0));
    CHECKED(cuGraphAddKernelNode(&node, g, NULL, 0, &kp));
    struct cb_log log = {0};
    struct outcome o;
    const struct op one[1] = {{OP_ADD, 4.0f, 0, 0}};
    run_capture(g, record_cb, &log, one, 1, &o);
    check_fixed("explicit_graph", fmt("a graph built with cuGraphAddKernelNode: %s", describe(&o)),
                !o.begin && !o.end && !o.call[0], "recaptured like a captured one");
    destroy_graph(g);

    g = capture(one, 1);
    CUresult rc = begin_recapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL, g, record_cb, &log);
    CUgraph out = NULL;
    if (!rc) cuStreamEndCapture(CU_STREAM_LEGACY, &out);
    check_fixed("begin_legacy_stream", err_name(rc), rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    CHECKED(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    rc = begin_recapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, g, record_cb, &log);
    out = NULL;
    cuStreamEndCapture(stream, &out);
    if (out && out != g) destroy_graph(out);
    check_fixed("begin_while_capturing", err_name(rc), rc == CUDA_ERROR_ILLEGAL_STATE,
                "CUDA_ERROR_ILLEGAL_STATE");
    rc = begin_recapture(stream, (CUstreamCaptureMode)99, g, record_cb, &log);
    if (!rc) cuStreamEndCapture(stream, &out);
    check_fixed("begin_bad_mode", err_name(rc), rc == CUDA_ERROR_INVALID_VALUE,
                "CUDA_ERROR_INVALID_VALUE");
    destroy_graph(g);
}

int main(void)
{
    int version = 0;
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    setvbuf(stdout, NULL, _IOLBF, 0);
    register_standin_kernels();
    CHECKED(cuInit(0));
    CHECKED(cuDriverGetVersion(&version));
    CUresult rc = cuGetProcAddress("cuStreamBeginRecaptureToGraph", &fn, version, 0, &st);
    if (rc || !fn || st != CU_GET_PROC_ADDRESS_SUCCESS) {
        printf("SKIP recapture_conformance: driver %d.%d (%d) has no cuStreamBeginRecaptureToGraph "
               "(cuGetProcAddress_v2 at %d: %s, symbol status %d)\n",
               version / 1000, version % 1000 / 10, version, version, err_name(rc), (int)st);
        return 77;
    }
    begin_recapture = (begin_recapture_fn)fn;
    printf("driver %d.%d (%d): cuStreamBeginRecaptureToGraph found\n", version / 1000,
           version % 1000 / 10, version);

    CUdevice dev;
    CUmodule mod;
    CHECKED(cuDeviceGet(&dev, 0));
    CHECKED(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECKED(cuCtxSetCurrent(ctx));
    CHECKED(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECKED(cuModuleLoadData(&mod, ptx));
    CHECKED(cuModuleGetFunction(&f_add, mod, "conf_add"));
    CHECKED(cuModuleGetFunction(&f_mul, mod, "conf_mul"));
    CHECKED(cuMemAlloc(&buffer, sizeof(float) * ELEMENTS));

    check_matching_work();
    check_failure();
    check_topology();
    check_capture_queries();
    check_callback_and_user_objects();
    check_node_types();
    check_begin();

    int status = report_settings();
    CHECKED(cuMemFree(buffer));
    CHECKED(cuModuleUnload(mod));
    CHECKED(cuStreamDestroy(stream));
    CHECKED(cuDevicePrimaryCtxRelease(dev));
    return status;
}
