/*
 * test_standin_context.c - context teardown: what cuCtxDestroy, the last
 * cuDevicePrimaryCtxRelease and cuDevicePrimaryCtxReset destroy (the
 * context's graphs, executable graphs, memory, streams, events, modules),
 * what they leave alone (other contexts' objects, stream-ordered memory),
 * and the primary context's life across releases and resets. A destroyed
 * object's handle stays a loud misuse, as after its own destroy call.
 */
#include "test_standin_common.h"

/* What a context is given in these tests. */
struct held {
    CUgraph g;
    CUgraphExec e;
    CUdeviceptr p;
    CUstream s;
    CUevent ev;
};

/* In the current context: memory, a graph that sets it, the graph's
 * executable graph, a stream and an event; the graph has run once. */
static struct held make_held(void)
{
    struct held h;
    CUcontext ctx;
    CUgraphNode n;
    CK(cuCtxGetCurrent(&ctx));
    CK(cuMemAlloc(&h.p, N * sizeof(int)));
    CK(cuGraphCreate(&h.g, 0));
    CUDA_MEMSET_NODE_PARAMS m = {.dst = h.p, .value = 7, .elementSize = 4, .width = N, .height = 1};
    CK(cuGraphAddMemsetNode(&n, h.g, NULL, 0, &m, ctx));
    CK(cuGraphInstantiateWithFlags(&h.e, h.g, 0));
    CK(cuStreamCreate(&h.s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&h.ev, 0));
    CK(cuGraphLaunch(h.e, h.s));
    CK(cuStreamSynchronize(h.s));
    cr_assert_eq(dev_ints(h.p)[N - 1], 7);
    return h;
}

struct counts {
    long graph, exec, memory, stream, event, module, context;
};

static struct counts live(void)
{
    return (struct counts){
        .graph = standin_live_objects("graph"), .exec = standin_live_objects("exec"),
        .memory = standin_live_objects("memory"), .stream = standin_live_objects("stream"),
        .event = standin_live_objects("event"), .module = standin_live_objects("module"),
        .context = standin_live_objects("context"),
    };
}

static void expect_counts(struct counts got, struct counts want, const char *when)
{
    cr_assert_eq(got.graph, want.graph, "%s: graphs %ld, expected %ld", when, got.graph, want.graph);
    cr_assert_eq(got.exec, want.exec, "%s: execs %ld, expected %ld", when, got.exec, want.exec);
    cr_assert_eq(got.memory, want.memory, "%s: memory %ld, expected %ld", when, got.memory, want.memory);
    cr_assert_eq(got.stream, want.stream, "%s: streams %ld, expected %ld", when, got.stream, want.stream);
    cr_assert_eq(got.event, want.event, "%s: events %ld, expected %ld", when, got.event, want.event);
    cr_assert_eq(got.module, want.module, "%s: modules %ld, expected %ld", when, got.module, want.module);
    cr_assert_eq(got.context, want.context, "%s: contexts %ld, expected %ld", when, got.context,
                 want.context);
}

/* Every use of what was held is refused and counted as a misuse. Makes no
 * allocation before cuMemFree (a new one could take the freed address). */
static void expect_dead(const struct held *h)
{
    CUgraphNode n;
    CUgraphExec e2;
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuGraphLaunch(h->e, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphAddEmptyNode(&n, h->g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphInstantiateWithFlags(&e2, h->g, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphExecDestroy(h->e), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphDestroy(h->g), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemFree(h->p), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(standin_last_misuse(), "already freed") != NULL, "%s", standin_last_misuse());
    cr_assert_eq(cuStreamSynchronize(h->s), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuEventQuery(h->ev), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(standin_misuse_count(), misuses + 8, "each use is a misuse (%lu)",
                 standin_misuse_count() - misuses);
}

/* ---- cuCtxDestroy ---- */

Test(context, destroy_destroys_what_was_made_in_it, .init = setup)
{
    CUcontext c, cur;
    struct counts before = live();
    CK(cuCtxCreate(&c, NULL, 0, 0));
    struct held h = make_held();
    struct counts made = before;
    made.graph++, made.exec++, made.memory++, made.stream++, made.event++, made.context++;
    expect_counts(live(), made, "made in the created context");
    unsigned long misuses = standin_misuse_count();
    CK(cuCtxDestroy(c));
    cr_assert_eq(standin_misuse_count(), misuses, "the destroy itself is no misuse");
    expect_counts(live(), before, "after cuCtxDestroy");
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, fx.ctx, "popped from this thread's stack");
    expect_dead(&h);
    /* The primary context's objects are untouched. */
    CK(launch_int(fx.fill, fx.s1, fx.buf, 3));
    cr_assert_eq(read_int(fx.buf, N - 1), 3);
    cr_assert_eq(standin_misuse_count(), misuses + 8);
}

/* Modules and pinned host memory are the context's too (documented). */
Test(context, destroy_v1_takes_modules_and_host_memory, .init = setup)
{
    CUresult (*destroy_v1)(CUcontext) = (CUresult(*)(CUcontext))sym("cuCtxDestroy");
    CUcontext c;
    CUmodule mod;
    CUfunction fill;
    CUdeviceptr p;
    void *host;
    CK(cuCtxCreate(&c, NULL, 0, 0));
    CK(cuModuleLoadData(&mod, "image"));
    CK(cuModuleGetFunction(&fill, mod, "fill"));
    CK(cuMemAlloc(&p, N * sizeof(int)));
    CK(cuMemAllocHost(&host, 256));
    cr_assert_eq(standin_live_objects("module"), 2);
    CK(destroy_v1(c));
    cr_assert_eq(standin_call_count("cuCtxDestroy"), 1);
    cr_assert_eq(standin_live_objects("module"), 1, "the context's module is unloaded");
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(launch_int(fill, fx.s1, fx.buf, 1), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE);
    cr_assert(strstr(standin_last_misuse(), "already freed") != NULL, "%s", standin_last_misuse());
    cr_assert_eq(standin_misuse_count(), misuses + 4);
}

/* cuCtxDestroy documents that cuMemAllocAsync memory is associated with no
 * context: it stays until freed explicitly. */
Test(context, destroy_keeps_stream_ordered_memory, .init = setup)
{
    CUcontext c;
    CUstream s;
    CUdeviceptr q, p;
    CK(cuCtxCreate(&c, NULL, 0, 0));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAllocAsync(&q, 256, s));
    CK(cuMemAlloc(&p, 256));
    CK(cuStreamSynchronize(s));
    long memory = standin_live_objects("memory");
    CK(cuCtxDestroy(c));
    cr_assert_eq(standin_live_objects("memory"), memory - 1, "only cuMemAlloc's memory goes");
    unsigned long misuses = standin_misuse_count();
    CK(cuMemFree(q));
    cr_assert_eq(standin_misuse_count(), misuses);
    cr_assert_eq(standin_live_objects("memory"), memory - 2);
}

/* A capture's graph belongs to its stream's context, and the executable
 * graph to its graph's context, whichever context is current; a capture
 * still running on the context's stream ends with it. */
Test(context, destroy_takes_captured_graphs_and_ends_captures, .init = setup)
{
    CUcontext c;
    CUstream s;
    CUgraph g, g2 = NULL;
    CUgraphExec e;
    CUstreamCaptureStatus status;
    struct counts before = live();
    CK(cuCtxCreate(&c, NULL, 0, 0));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuCtxPopCurrent(NULL));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemsetD32Async(fx.buf, 5, N, s));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiateWithFlags(&e, g, 0));
    CK(cuGraphLaunch(e, fx.s1));
    cr_assert_eq(read_int(fx.buf, 0), 5);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED)); /* left running */
    CK(cuMemsetD32Async(fx.buf, 6, N, s));
    cr_assert_eq(standin_live_objects("graph"), before.graph + 2);
    CK(cuCtxDestroy(c));
    expect_counts(live(), before, "after cuCtxDestroy");
    unsigned long misuses = standin_misuse_count();
    cr_assert_eq(cuGraphLaunch(e, fx.s1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuStreamEndCapture(s, &g2), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuStreamIsCapturing(s, &status), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(standin_misuse_count(), misuses + 4);
    cr_assert_null(g2);
    cr_assert_eq(read_int(fx.buf, 0), 5, "the abandoned capture ran nothing");
    /* Capture goes on working in the primary context. */
    CK(cuStreamBeginCapture(fx.s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemsetD32Async(fx.buf, 8, N, fx.s1));
    CK(cuStreamEndCapture(fx.s1, &g2));
    CK(cuGraphDestroy(g2));
}

/* ---- the primary context: release ---- */

Test(context, primary_releases_short_of_zero_destroy_nothing, .init = setup)
{
    CUcontext again;
    CK(cuDevicePrimaryCtxRetain(&again, 0));
    CK(cuDevicePrimaryCtxRetain(&again, 0));
    cr_assert_eq(again, fx.ctx);
    struct held h = make_held();
    struct counts before = live();
    CUresult (*release_v1)(CUdevice) = (CUresult(*)(CUdevice))sym("cuDevicePrimaryCtxRelease");
    CK(release_v1(0));
    CK(cuDevicePrimaryCtxRelease(0));
    cr_assert_eq(standin_call_count("cuDevicePrimaryCtxRelease"), 1);
    cr_assert_eq(standin_call_count("cuDevicePrimaryCtxRelease_v2"), 1);
    expect_counts(live(), before, "one reference left");
    unsigned long misuses = standin_misuse_count();
    CK(cuGraphLaunch(h.e, h.s));
    CK(cuStreamSynchronize(h.s));
    CK(cuEventRecord(h.ev, h.s));
    CK(cuMemsetD32(h.p, 1, N));
    CK(launch_int(fx.add, fx.s1, h.p, 1));
    cr_assert_eq(read_int(h.p, 0), 2);
    CK(cuGraphExecDestroy(h.e));
    CK(cuGraphDestroy(h.g));
    CK(cuMemFree(h.p));
    cr_assert_eq(standin_misuse_count(), misuses);
}

Test(context, primary_release_to_zero_destroys_and_a_retain_makes_a_new_one, .init = setup)
{
    CUcontext again, cur, fresh;
    CUdeviceptr p;
    CK(cuDevicePrimaryCtxRetain(&again, 0));
    struct held h = make_held();
    CK(cuDevicePrimaryCtxRelease(0));
    cr_assert_eq(standin_live_objects("graph"), 1, "one reference left: nothing goes");
    unsigned long misuses = standin_misuse_count();
    CK(cuDevicePrimaryCtxRelease(0));
    cr_assert_eq(standin_misuse_count(), misuses, "the last release itself is no misuse");
    expect_counts(live(), (struct counts){0}, "after the last release");
    expect_dead(&h);
    /* Not popped: this thread's current context is the destroyed one. */
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, fx.ctx);
    misuses = standin_misuse_count();
    cr_assert_eq(cuMemAlloc(&p, 64), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    cr_assert_eq(launch_int(fx.fill, fx.s1, fx.buf, 1), CUDA_ERROR_INVALID_HANDLE, "stream destroyed");
    cr_assert_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT, "no reference left");
    cr_assert_eq(standin_misuse_count(), misuses + 3);
    /* A retain now makes a new primary context. */
    CK(cuDevicePrimaryCtxRetain(&fresh, 0));
    cr_assert_neq(fresh, fx.ctx);
    cr_assert_eq(standin_live_objects("context"), 1);
    cr_assert_eq(cuCtxSetCurrent(fx.ctx), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(standin_misuse_count(), misuses + 4);
    CK(cuCtxSetCurrent(fresh));
    CK(cuMemAlloc(&p, N * sizeof(int)));
    CK(cuMemsetD32(p, 4, N));
    cr_assert_eq(read_int(p, N - 1), 4);
    cr_assert_eq(standin_live_objects("memory"), 1);
    cr_assert_eq(launch_int(fx.fill, NULL, p, 1), CUDA_ERROR_INVALID_HANDLE, "its module was unloaded");
    cr_assert_eq(standin_misuse_count(), misuses + 5);
    CUcontext same;
    CK(cuDevicePrimaryCtxRetain(&same, 0));
    cr_assert_eq(same, fresh);
}

/* ---- the primary context: reset ---- */

Test(context, primary_reset_destroys_contents_and_keeps_the_context, .init = setup)
{
    CUcontext cur, same;
    CUdeviceptr p;
    CUgraph g;
    CUgraphExec e;
    CUgraphNode n;
    struct held h = make_held();
    unsigned long misuses = standin_misuse_count();
    CK(cuDevicePrimaryCtxReset(0));
    cr_assert_eq(standin_call_count("cuDevicePrimaryCtxReset_v2"), 1);
    cr_assert_eq(standin_misuse_count(), misuses, "the reset itself is no misuse");
    expect_counts(live(), (struct counts){.context = 1}, "after the reset");
    expect_dead(&h);
    /* The context stays current, retained and usable, with nothing in it. */
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, fx.ctx);
    CK(cuDevicePrimaryCtxRetain(&same, 0));
    cr_assert_eq(same, fx.ctx);
    misuses = standin_misuse_count();
    CK(cuMemAlloc(&p, N * sizeof(int)));
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = {.dst = p, .value = 9, .elementSize = 4, .width = N, .height = 1};
    CK(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, fx.ctx));
    CK(cuGraphInstantiateWithFlags(&e, g, 0));
    CK(cuGraphLaunch(e, NULL));
    cr_assert_eq(read_int(p, N - 1), 9);
    cr_assert_eq(standin_misuse_count(), misuses);
    cr_assert_eq(standin_live_objects("memory"), 1);
    /* The reset released nothing: both references are still there. */
    CK(cuDevicePrimaryCtxRelease(0));
    cr_assert_eq(standin_live_objects("graph"), 1);
    CK(cuDevicePrimaryCtxRelease(0));
    cr_assert_eq(standin_live_objects("graph"), 0);
    cr_assert_eq(standin_live_objects("context"), 0);
    cr_assert_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
}

Test(context, primary_reset_v1_and_its_arguments, .init = setup)
{
    CUdeviceptr p;
    CUresult (*reset_v1)(CUdevice) = (CUresult(*)(CUdevice))sym("cuDevicePrimaryCtxReset");
    cr_assert_eq(reset_v1(1), CUDA_ERROR_INVALID_DEVICE);
    cr_assert_eq(standin_live_objects("memory"), 2, "a refused reset destroys nothing");
    CK(reset_v1(0));
    cr_assert_eq(standin_call_count("cuDevicePrimaryCtxReset"), 2);
    cr_assert_eq(standin_live_objects("memory"), 0);
    cr_assert_eq(standin_live_objects("stream"), 0);
    CK(reset_v1(0)); /* nothing left to destroy */
    CK(cuMemAlloc(&p, 64));
    /* Released to zero, then reset: no primary context, nothing to do. */
    CK(cuDevicePrimaryCtxRelease(0));
    cr_assert_eq(standin_live_objects("memory"), 0);
    CK(reset_v1(0));
    cr_assert_eq(standin_live_objects("context"), 0);
}
