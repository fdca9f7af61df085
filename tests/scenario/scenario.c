/*
 * scenario.c - driver-API programs that capture every iteration, one per
 * scenario name: `scenario NAME [ITERATIONS]`.
 *
 * Each prints every return code and a checksum per iteration; the test
 * harness runs it with and without recap (and with the stand-in's failure
 * modes) and requires identical output. Scenarios cover what recap must
 * survive: parameters changing every iteration, topology changes at the
 * first, middle and last node and extra or missing nodes, alternating and
 * cycling shapes, a permanent change, fork/join across streams, every
 * capture mode, a capture ended on another thread, the program breaking
 * its own capture, kernels launched with `extra`, instantiation variants,
 * double destroys, graph edits by the program, memory pressure, many
 * threads at many sites, several threads with shapes of their own at one
 * site, one kernel position cycling through functions or changing once
 * in a while, and (meant for STANDIN_ASYNC=1) launches left in flight
 * while their executable graphs are destroyed and captured again.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"
#include "standin.h"

static struct sc_context ctx;

/* --- recipes ------------------------------------------------------------------ */

/* Parameters (scalars, pointers, grid sizes) change every iteration; the
 * topology never does. */
static void recipe_params(struct sc_recipe *r, int it)
{
    r->n = 0;
    sc_add(r, SC_AXPY, 1.0f + 0.5f * (float)it, it % 2, 2, 0);
    r->op[r->n - 1].grid = it % 3 == 0 ? 2 : 4;
    sc_add(r, SC_SCALE, 0.5f + 0.125f * (float)(it % 4), 3, 0, 0);
    sc_add(r, SC_MEMSET, (float)it, 0, 1, 0);
    sc_add(r, SC_COPY, 0, 2, 3 - (it % 2), 0);
    sc_add(r, SC_HOST, (float)it, 0, 0, 0);
    sc_add(r, SC_AXPY, -0.25f, 3, 2, 0);
}

static void recipe_shape(struct sc_recipe *r, int it, int shape)
{
    r->n = 0;
    sc_add(r, SC_AXPY, 1.0f + (float)it, 0, 1, 0);
    for (int k = 0; k < shape; k++)
        sc_add(r, SC_SCALE, 0.75f + 0.01f * (float)k, 1 + k % 3, 0, 0);
    sc_add(r, SC_AXPY, 0.5f, 2, 3, 0);
}

/* "chainK": K scale kernels between two axpys, every argument new each
 * iteration (the loop scripts/bench-instantiate times on the GPU). */
static void recipe_chain(struct sc_recipe *r, int it, int k)
{
    r->n = 0;
    sc_add(r, SC_AXPY, 1.0f + (float)it, 0, 1, 0);
    for (int i = 0; i < k && r->n < SC_MAX_OPS - 1; i++)
        sc_add(r, SC_SCALE, 0.75f + 0.01f * (float)((i + it) % 7), 1 + i % 3, 0, 0);
    sc_add(r, SC_AXPY, 0.5f, 2, 3, 0);
}

/* "collide3": a cycle of three graphs, two of them of one node count but
 * other node types (three kernels; a memset, a kernel and a copy), as a
 * dynamic batch gives: a node count alone cannot tell them apart. */
static void recipe_collide(struct sc_recipe *r, int it)
{
    float a = 0.5f + 0.0625f * (float)(it % 4);
    r->n = 0;
    switch (it % 3) {
    case 0:
        for (int i = 0; i < 3; i++)
            sc_add(r, SC_SCALE, a + 0.01f * (float)i, 1 + i, 0, 0);
        break;
    case 1:
        sc_add(r, SC_SCALE, a, 1, 0, 0);
        sc_add(r, SC_SCALE, a, 2, 0, 0);
        break;
    default:
        sc_add(r, SC_MEMSET, a, 3, 0, 0);
        sc_add(r, SC_SCALE, a, 1, 0, 0);
        sc_add(r, SC_COPY, a, 2, 1, 0);
        break;
    }
}

/* "crossed": four kernels and four edges every time, alternately a
 * diamond (a -> b, c -> d) and a chain with a shortcut (a -> b -> c, a -> c,
 * c -> d): node count, edge count and node types agree, so even a typed
 * shape cannot tell them apart, and every update between them fails. */
static void recipe_crossed(struct sc_recipe *r, int it)
{
    r->n = 0;
    sc_add(r, SC_AXPY, 1.0f + 0.125f * (float)(it % 4), 0, 1, 0);
    sc_add(r, SC_FORK, 0, 0, 0, 0);
    sc_add(r, SC_SCALE, 0.5f, 2, 0, 1);
    if (it % 2) {
        sc_add(r, SC_SCALE, 0.75f, 3, 0, 0);
        sc_add(r, SC_JOIN, 0, 0, 0, 0);
    } else {
        sc_add(r, SC_JOIN, 0, 0, 0, 0);
        sc_add(r, SC_SCALE, 0.75f, 3, 0, 0);
    }
    sc_add(r, SC_AXPY, -1.0f, 2, 1, 0);
}

/* Self-recording's switch points: recipe_shape(it, 3) every iteration (so
 * a cached graph is recorded against), with, every fourth iteration, a
 * call that does not match the recorded one at the first call ("first"),
 * in the middle ("mid"), one call fewer (the switch happens at the end:
 * "end") or one more ("extra"). */
static void recipe_switch_point(struct sc_recipe *r, int it, const char *where)
{
    recipe_shape(r, it, 3);
    if (it % 4 != 3)
        return;
    if (!strcmp(where, "first"))
        r->op[0].type = SC_SCALE;
    else if (!strcmp(where, "mid"))
        r->op[2].type = SC_MEMSET;
    else if (!strcmp(where, "end"))
        r->n--;
    else if (!strcmp(where, "extra"))
        sc_add(r, SC_HOST, (float)it, 0, 0, 0);
    else if (!strcmp(where, "attr")) {
        /* the capturing stream's attributes changed between two kernels */
        memmove(&r->op[2], &r->op[1], (size_t)(r->n - 1) * sizeof r->op[0]);
        r->op[1] = (struct sc_op){ .type = SC_STREAM_ATTR, .a = -1.0f };
        r->n++;
    }
}

/* The base recipe with one deliberate topology change at iteration `at`. */
static void recipe_topology(struct sc_recipe *r, int it, const char *where, int at)
{
    recipe_params(r, it);
    if (it != at)
        return;
    if (!strcmp(where, "first"))
        r->op[0].type = SC_MEMSET;
    else if (!strcmp(where, "mid"))
        r->op[2].type = SC_SCALE, r->op[2].x = 1;
    else if (!strcmp(where, "last"))
        r->op[r->n - 1].type = SC_COPY;
    else if (!strcmp(where, "extra"))
        sc_add(r, SC_SCALE, 2.0f, 1, 0, 0);
    else if (!strcmp(where, "missing"))
        r->n--;
}

static void recipe_fork_join(struct sc_recipe *r, int it)
{
    r->n = 0;
    sc_add(r, SC_AXPY, 1.0f + (float)it, 0, 1, 0);
    sc_add(r, SC_FORK, 0, 0, 0, 0);
    sc_add(r, SC_SCALE, 0.5f + (float)(it % 3), 2, 0, 1);
    sc_add(r, SC_AXPY, 0.25f, 0, 3, 0);
    sc_add(r, SC_HOST, (float)it, 0, 0, 1);
    sc_add(r, SC_JOIN, 0, 0, 0, 0);
    sc_add(r, SC_AXPY, -1.0f, 2, 1, 0);
}

/* Every kind of node the benchmarks mix: a memset, a fork onto stream 1
 * (a kernel and a host callback there), `kernels` kernels on stream 0, the
 * join, and a device-to-device copy. The shape is set by `kernels`. */
static void recipe_mixed(struct sc_recipe *r, int it, int kernels)
{
    r->n = 0;
    sc_add(r, SC_MEMSET, (float)(it % 5), 0, 3, 0);
    sc_add(r, SC_FORK, 0, 0, 0, 0);
    sc_add(r, SC_SCALE, 0.5f + 0.125f * (float)(it % 3), 2, 0, 1);
    sc_add(r, SC_HOST, (float)it, 0, 0, 1);
    for (int k = 0; k < kernels; k++)
        sc_add(r, SC_AXPY, 0.25f + 0.01f * (float)(it % 7), k % 2, 1, 0);
    sc_add(r, SC_JOIN, 0, 0, 0, 0);
    sc_add(r, SC_COPY, 0, 1, 3, 0);
}

/* Eight nodes whose types spell `it` in base 3: as many nodes every time,
 * never the same topology twice in a row (an executable update between
 * any two of them fails). */
static void recipe_retyped(struct sc_recipe *r, int it)
{
    static const enum sc_op_type types[3] = { SC_SCALE, SC_MEMSET, SC_COPY };
    r->n = 0;
    for (int i = 0, v = it; i < 8; i++, v /= 3)
        sc_add(r, types[v % 3], 0.5f + 0.01f * (float)i, i % 3, 1 + i % 3, 0);
}

/* One topology whose kernel at one position (the params recipe's scale)
 * is another function of the same signature in turn: scale, shift,
 * mirror ("function_cycle"); or, in "one_off", the usual scale with a
 * mirror there one iteration in 20 (19, 39, ...). Same node count, node
 * types and wiring every time: only the function tells them apart. */
static void recipe_function_at_one_position(struct sc_recipe *r, int it, int one_off)
{
    static const enum sc_op_type cycle[3] = { SC_SCALE, SC_SHIFT, SC_MIRROR };
    recipe_params(r, it);
    if (one_off)
        r->op[1].type = it % 20 == 19 ? SC_MIRROR : SC_SCALE;
    else
        r->op[1].type = cycle[it % 3];
}

/* The shape of iteration `it` of "shuffledK": K shapes in an order no
 * predictor follows (a batch size per request, as a server sees them),
 * the same every run. */
static unsigned shuffle(int it)
{
    uint32_t x = (uint32_t)it * 2654435761u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return x;
}

/* "cycleK", "mixedK" or "shuffledK" with K a number: the cycle length
 * (the number of shapes), else 0. */
static int cycle_length(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) || name[n] < '1' || name[n] > '9')
        return 0;
    return atoi(name + n);
}

/* --- scenario runners -------------------------------------------------------------- */

static int run_loop(const char *name, int iters, const struct sc_options *o)
{
    struct sc_recipe r;
    CUgraph pending = NULL;
    int failures = 0;
    /* SCENARIO_STATS_AT=N: call counts after N iterations too, and at the
     * loop's end (stats files ".at" and ".end"), for comparing two runs
     * over the iterations in between. */
    const char *at_text = getenv("SCENARIO_STATS_AT");
    int stats_at = at_text && *at_text ? atoi(at_text) : -1;
    /* SCENARIO_STEP_MEMORY=1: each iteration allocates device and pinned
     * host memory before its capture and frees both after it, as a
     * framework's step may (what recap's end event counts between
     * captures, shim/base/step_time.h). */
    const char *step_text = getenv("SCENARIO_STEP_MEMORY");
    int step_memory = step_text && *step_text && strcmp(step_text, "0") != 0;

    for (int it = 0; it < iters; it++) {
        if (it == stats_at)
            sc_write_stats_snapshot(".at");
        if (!strcmp(name, "params") || !strncmp(name, "mode_", 5) || !strcmp(name, "variants") ||
            !strcmp(name, "keep_graph") || !strcmp(name, "keep_every_graph"))
            recipe_params(&r, it);
        else if (!strncmp(name, "topo_", 5))
            recipe_topology(&r, it, name + 5, 4);
        else if (!strcmp(name, "alternate"))
            recipe_shape(&r, it, it % 2 ? 4 : 1);
        else if (!strncmp(name, "switch_", 7))
            recipe_switch_point(&r, it, name + 7);
        else if (cycle_length(name, "cycle"))
            recipe_shape(&r, it, 1 + it % cycle_length(name, "cycle"));
        else if (cycle_length(name, "chain"))
            recipe_chain(&r, it, cycle_length(name, "chain"));
        else if (cycle_length(name, "mixed"))
            recipe_mixed(&r, it, 1 + 2 * (it % cycle_length(name, "mixed")));
        else if (cycle_length(name, "shuffled"))
            recipe_mixed(&r, it, 1 + 2 * (int)(shuffle(it) % (unsigned)cycle_length(name,
                                                                                 "shuffled")));
        else if (!strcmp(name, "collide3"))
            recipe_collide(&r, it);
        else if (!strcmp(name, "crossed"))
            recipe_crossed(&r, it);
        else if (!strcmp(name, "fresh_shapes"))
            recipe_shape(&r, it, 1 + it % (SC_MAX_OPS - 4));   /* a new node count each time */
        else if (!strcmp(name, "retyped"))
            recipe_retyped(&r, it);
        else if (!strcmp(name, "cycle_aab"))
            recipe_shape(&r, it, it % 3 == 2 ? 3 : 1);
        else if (!strcmp(name, "delta") || !strcmp(name, "keep_every_graph_delta"))
            recipe_shape(&r, it, 12);          /* only the first node changes */
        else if (!strcmp(name, "nochange"))
            recipe_shape(&r, 0, 3);            /* nothing changes */
        else if (!strcmp(name, "switch"))
            recipe_shape(&r, it, it < 5 ? 1 : 3);
        else if (!strcmp(name, "fork_join"))
            recipe_fork_join(&r, it);
        else if (!strcmp(name, "function_cycle"))
            recipe_function_at_one_position(&r, it, 0);
        else if (!strcmp(name, "one_off"))
            recipe_function_at_one_position(&r, it, 1);
        else if (!strcmp(name, "extra_args")) {
            recipe_params(&r, it);
            sc_add(&r, SC_EXTRA_LAUNCH, 1.0f + 0.1f * (float)it, 2, 0, 0);
        } else {
            fprintf(stderr, "scenario: unknown scenario %s\n", name);
            return 2;
        }
        struct sc_options each = *o;
        if (!strcmp(name, "variants"))
            each.instantiate_variant = it % 4;
        CUdeviceptr step_device = 0;
        void *step_host = NULL;
        if (step_memory)
            printf("it=%d step alloc=%d host=%d\n", it, (int)cuMemAlloc(&step_device, 4096),
                   (int)cuMemAllocHost(&step_host, 4096));
        failures += sc_iteration(&ctx, it, &r, &each, &pending);
        if (step_memory)
            printf("it=%d step free=%d host=%d\n", it, (int)cuMemFree(step_device),
                   (int)cuMemFreeHost(step_host));
    }
    if (stats_at >= 0)
        sc_write_stats_snapshot(".end");
    if (pending)
        printf("final destroy rc=%d\n", (int)cuGraphDestroy(pending));
    return failures ? 1 : 0;
}

/* Begun on this thread, recorded and ended on another (relaxed mode). */
struct cross_arg {
    int it;
    CUgraph graph;
    char codes[256];
};

static void *cross_thread_body(void *p)
{
    struct cross_arg *a = p;
    struct sc_recipe r;
    int len = 0;
    recipe_params(&r, a->it);
    for (int i = 0; i < r.n; i++)
        len += snprintf(a->codes + len, sizeof a->codes - (size_t)len, "%d,", (int)sc_enqueue(&ctx, &r.op[i]));
    snprintf(a->codes + len, sizeof a->codes - (size_t)len, "end=%d",
             (int)cuStreamEndCapture(ctx.stream[0], &a->graph));
    return NULL;
}

static int run_cross_thread(int iters)
{
    for (int it = 0; it < iters; it++) {
        struct cross_arg a = { .it = it };
        pthread_t t;
        CUgraphExec exec = NULL;
        int begin = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_RELAXED);
        pthread_create(&t, NULL, cross_thread_body, &a);
        pthread_join(t, NULL);
        int inst = a.graph ? (int)cuGraphInstantiateWithFlags(&exec, a.graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        cuStreamSynchronize(ctx.stream[0]);
        if (exec)
            cuGraphExecDestroy(exec);
        if (a.graph)
            cuGraphDestroy(a.graph);
        printf("it=%d begin=%d ops=%s inst=%d launch=%d sum=%08x\n", it, begin, a.codes, inst,
               launch, sc_checksum(&ctx));
    }
    return 0;
}

/* A relaxed capture on this thread's per-thread default stream, forked into
 * stream[1], where another thread enqueues and records the join; at
 * iteration 4 that thread's work is a memset where a kernel was, so a
 * recapture fails at (or after) the other thread's call. That thread cannot
 * name this one's per-thread stream: whatever recap does about the failure
 * must happen in this thread's stream, and the other thread's own
 * per-thread stream must never be capturing. */
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);
CUresult cuStreamIsCapturing_ptsz(CUstream, CUstreamCaptureStatus *);
CUresult cuEventRecord_ptsz(CUevent, CUstream);
CUresult cuStreamWaitEvent_ptsz(CUstream, CUevent, unsigned int);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);

struct ptsz_arg {
    int it;
    char codes[64];
};

static void *ptsz_worker_body(void *p)
{
    struct ptsz_arg *a = p;
    struct sc_op op = { .type = a->it == 4 ? SC_MEMSET : SC_SCALE, .a = 0.5f + (float)(a->it % 3),
                        .x = 2, .y = 2, .stream = 1 };
    int work = (int)sc_enqueue(&ctx, &op);
    int record = (int)cuEventRecord(ctx.join_event, ctx.stream[1]);
    CUstreamCaptureStatus own = CU_STREAM_CAPTURE_STATUS_NONE;
    int query = (int)cuStreamIsCapturing_ptsz(NULL, &own);
    snprintf(a->codes, sizeof a->codes, "%d,%d,%d own=%d", work, record, query, (int)own);
    return NULL;
}

static int run_ptsz_cross_thread(int iters)
{
    int n = SC_N;
    for (int it = 0; it < iters; it++) {
        struct ptsz_arg a = { .it = it };
        pthread_t t;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        float alpha = 1.0f + (float)it, beta = -0.5f;
        void *first[] = { &alpha, &ctx.buf[0], &ctx.buf[1], &n };
        void *last[] = { &beta, &ctx.buf[2], &ctx.buf[1], &n };
        int begin = (int)cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_RELAXED);
        int k1 = (int)cuLaunchKernel_ptsz(ctx.axpy, SC_N / 64, 1, 1, 64, 1, 1, 0, NULL, first, NULL);
        int fork = (int)cuEventRecord_ptsz(ctx.fork_event, NULL);
        int wait = (int)cuStreamWaitEvent(ctx.stream[1], ctx.fork_event, 0);
        pthread_create(&t, NULL, ptsz_worker_body, &a);
        pthread_join(t, NULL);
        int join = (int)cuStreamWaitEvent_ptsz(NULL, ctx.join_event, 0);
        int k3 = (int)cuLaunchKernel_ptsz(ctx.axpy, SC_N / 64, 1, 1, 64, 1, 1, 0, NULL, last, NULL);
        int end = (int)cuStreamEndCapture_ptsz(NULL, &graph);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        cuStreamSynchronize(ctx.stream[0]);
        if (exec)
            cuGraphExecDestroy(exec);
        if (graph)
            cuGraphDestroy(graph);
        printf("it=%d begin=%d ops=%d,%d,%d,[%s],%d,%d end=%d inst=%d launch=%d sum=%08x\n", it,
               begin, k1, fork, wait, a.codes, join, k3, end, inst, launch, sc_checksum(&ctx));
    }
    return 0;
}

/* Instantiates, launches, waits and releases what a hand-built capture
 * gave; returns the instantiation's result (-1: no graph). */
static int run_and_release(CUgraph graph)
{
    CUgraphExec exec = NULL;
    int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
    if (exec) {
        cuGraphLaunch(exec, ctx.stream[0]);
        cuStreamSynchronize(ctx.stream[0]);
        cuGraphExecDestroy(exec);
    }
    if (graph)
        cuGraphDestroy(graph);
    return inst;
}

/* The three kernels of the hand-built captures below: an axpy before, a
 * scale in the middle (a launch, a node added by hand or a conditional
 * body), an axpy after; every scalar changes with the iteration. */
struct three_kernels {
    float a, b, c;
    int n;
    void *before[4], *inside[3], *after[4];
};

static void three_kernels_init(struct three_kernels *k, int it)
{
    k->a = 1.0f + 0.5f * (float)it;
    k->b = 0.5f + 0.125f * (float)(it % 7);
    k->c = 2.0f - 0.25f * (float)it;
    k->n = SC_N;
    void *before[] = { &k->a, &ctx.buf[0], &ctx.buf[1], &k->n };
    void *inside[] = { &ctx.buf[1], &k->b, &k->n };
    void *after[] = { &k->c, &ctx.buf[1], &ctx.buf[2], &k->n };
    memcpy(k->before, before, sizeof before);
    memcpy(k->inside, inside, sizeof inside);
    memcpy(k->after, after, sizeof after);
}

static CUresult launch_on(CUfunction f, CUstream stream, void **params)
{
    return cuLaunchKernel(f, SC_N / 64, 1, 1, 64, 1, 1, 0, stream, params, NULL);
}

/* Temporary events, as code that synchronises streams with short-lived
 * events makes them: created, used for a fork of stream 0 into stream 1
 * and the join back, and destroyed, all inside the capture. Every fifth
 * iteration the kernel on stream 1 (in events_other_thread) or the last
 * kernel (in events_fork_join) is a memset instead, so a capture recap
 * recorded (or a recapture) must switch to a driver capture
 * after the events were destroyed, and its replay still needs them.
 * events_other_thread makes the calls on stream 1 on a second thread of a
 * GLOBAL capture, which cannot end it: the switch waits for this thread.
 * events_other_thread_alloc adds, in the odd iterations, stream-ordered
 * memory on that thread after the switch became due: calls recap cannot
 * copy, so it cannot replay them once the switch comes. */
struct events_arg {
    int it;
    float a;
    int alloc;              /* events_other_thread_alloc: stream-ordered memory too */
    char codes[96];
};

/* Forked stream 1's part: the kernel, then a join through a temporary
 * event, created and destroyed here. */
static void events_side(struct events_arg *e, int odd)
{
    CUevent join = NULL;
    int n = SC_N;
    void *scale[] = { &ctx.buf[2], &e->a, &n };
    int k = odd ? (int)cuMemsetD32Async(ctx.buf[2], 0x3f800000u, SC_N, ctx.stream[1])
                : (int)launch_on(ctx.scale, ctx.stream[1], scale);
    if (odd && e->alloc) {
        /* Memory allocation and free nodes: calls recap cannot copy. */
        CUdeviceptr scratch = 0;
        int alloc = (int)cuMemAllocAsync(&scratch, SC_N * sizeof(float), ctx.stream[1]);
        int fill = alloc ? -1 : (int)cuMemsetD32Async(scratch, 7u, SC_N, ctx.stream[1]);
        int release = alloc ? -1 : (int)cuMemFreeAsync(scratch, ctx.stream[1]);
        k = k * 1000 + alloc * 100 + fill * 10 + release;
    }
    int create = (int)cuEventCreate(&join, CU_EVENT_DISABLE_TIMING);
    int record = (int)cuEventRecord(join, ctx.stream[1]);
    int wait = (int)cuStreamWaitEvent(ctx.stream[0], join, 0);
    int destroy = (int)cuEventDestroy(join);
    snprintf(e->codes, sizeof e->codes, "%d,%d,%d,%d,%d", k, create, record, wait, destroy);
}

static void *events_side_thread(void *p)
{
    struct events_arg *e = p;
    cuCtxSetCurrent(ctx.ctx);
    events_side(e, e->it % 5 == 3);
    return NULL;
}

static int run_temporary_events(int iters, int other_thread, int alloc)
{
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUevent fork = NULL;
        int n = SC_N;
        float a = 1.0f + 0.25f * (float)it, c = 0.5f - 0.125f * (float)(it % 4);
        struct events_arg e = { .it = it, .a = 0.75f + 0.5f * (float)(it % 3), .alloc = alloc };
        void *first[] = { &a, &ctx.buf[0], &ctx.buf[1], &n };
        void *last_axpy[] = { &c, &ctx.buf[2], &ctx.buf[1], &n };
        int begin = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        int k1 = (int)launch_on(ctx.axpy, ctx.stream[0], first);
        int create = (int)cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING);
        int record = (int)cuEventRecord(fork, ctx.stream[0]);
        int wait = (int)cuStreamWaitEvent(ctx.stream[1], fork, 0);
        int destroy = (int)cuEventDestroy(fork);
        if (other_thread) {
            pthread_t t;
            pthread_create(&t, NULL, events_side_thread, &e);
            pthread_join(t, NULL);
        } else {
            events_side(&e, 0);
        }
        int odd_last = !other_thread && it % 5 == 3;
        int k3 = odd_last ? (int)cuMemsetD32Async(ctx.buf[1], 0x40000000u, SC_N, ctx.stream[0])
                          : (int)launch_on(ctx.axpy, ctx.stream[0], last_axpy);
        int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = run_and_release(graph);
        printf("it=%d begin=%d ops=%d,%d,%d,%d,%d,[%s],%d end=%d inst=%d sum=%08x\n", it, begin, k1,
               create, record, wait, destroy, e.codes, k3, end, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* Device memory freed inside a relaxed capture (the driver allows it;
 * the graph is instantiated, never launched, so the freed memory is never
 * touched): a memset into it comes first, and every fifth iteration the
 * last kernel is a memset instead, so a capture recap recorded (or a
 * recapture) switches after the free, and its replay sets the freed
 * memory again. */
static int run_free_in_capture(int iters)
{
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUdeviceptr scratch = 0;
        int n = SC_N;
        float a = 1.0f + 0.5f * (float)it;
        void *params[] = { &a, &ctx.buf[0], &ctx.buf[1], &n };
        int alloc = (int)cuMemAlloc(&scratch, SC_N * sizeof(float));
        int begin = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_RELAXED);
        int k1 = (int)launch_on(ctx.axpy, ctx.stream[0], params);
        int fill = (int)cuMemsetD32Async(scratch, (unsigned)it, SC_N, ctx.stream[0]);
        int freed = (int)cuMemFree(scratch);
        int k2 = it % 5 == 3 ? (int)cuMemsetD32Async(ctx.buf[2], 0, SC_N, ctx.stream[0])
                             : (int)launch_on(ctx.axpy, ctx.stream[0], params);
        int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        CUgraphExec exec = NULL;
        size_t nodes = 0;
        if (graph)
            cuGraphGetNodes(graph, NULL, &nodes);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        if (exec)
            cuGraphExecDestroy(exec);
        if (graph)
            cuGraphDestroy(graph);
        printf("it=%d alloc=%d begin=%d ops=%d,%d,%d,%d end=%d nodes=%zu inst=%d\n", it, alloc,
               begin, k1, fill, freed, k2, end, nodes, inst);
    }
    return 0;
}

/* A caching allocator's step, as PyTorch takes it: each capture gets a
 * private pool of its own, allocated inside the capture with the thread
 * switched to relaxed mode (two segments of two sizes), used by the
 * captured work, and freed once the graph and its executable graph are
 * gone. The input changes outside the capture only, so with the pool at
 * the same addresses every capture is the same. pool_pressure: before
 * every fourth iteration an allocation no device can satisfy (memory
 * pressure: recap gives back what it keeps). */

static int run_pool(int iters, int pressure, int keep_graphs, int meminfo, int before, int odd)
{
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        if (pressure && it % 4 == 3) {
            CUdeviceptr huge = 0;
            printf("it=%d pressure rc=%d\n", it, (int)cuMemAlloc(&huge, (size_t)1 << 46));
        }
        float x = 1.0f + 0.25f * (float)it, a = 2.0f;
        unsigned bits;
        memcpy(&bits, &x, sizeof bits);
        int n = SC_N;
        CUdeviceptr pool = 0, pool2 = 0, pool0 = 0;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int fill = (int)cuMemsetD32(ctx.buf[0], bits, SC_N);
        /* pool_before: the pool's first segment comes before the capture
         * begins, as PyTorch's does (for the generator's state). */
        int alloc0 = before ? (int)cuMemAlloc(&pool0, 4 * SC_N * sizeof(float)) : 0;
        int begin = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        int zero0 = before ? (int)cuMemsetD32Async(pool0, 7, SC_N, ctx.stream[0]) : 0;
        int alloc1 = (int)sc_alloc_relaxed(&pool, SC_N * sizeof(float));
        int zero = (int)cuMemsetD32Async(pool, 0, SC_N, ctx.stream[0]);
        void *params[] = { &a, &ctx.buf[0], &pool, &n };
        void *shift_params[] = { &pool, &a, &n };
        /* pool_keep_graphs_odd: every sixth capture from the fifth on
         * launches another kernel there (an odd step, as an optimizer's
         * variant picks one), so that capture leaves the graph it began
         * recording into. pool_keep_graphs_kinds: the kernel changes for
         * good every fifth capture (one variant after another);
         * pool_keep_graphs_turns: two kernels take turns (per-tensor and
         * foreach variants of one optimizer step, alternately). */
        int other = odd == 1 || odd == 4 ? it % 6 == 4 : odd == 2 ? (it / 5) % 2 : odd == 3 ? it % 2 : 0;
        /* pool_keep_graphs_late: as _odd, with a kernel before the odd
         * one whose scale is other on odd steps only, and a query of the
         * capture's graph after it (as a framework asks for the capture's
         * dependencies), so that an odd capture writes its new argument
         * into the copy it goes on in, and the next capture keeps the
         * usual one. */
        float scale = other ? 3.0f : 2.0f;
        void *scale_params[] = { &scale, &ctx.buf[0], &ctx.buf[1], &n };
        int pre = 0;
        if (odd == 4) {
            CUstreamCaptureStatus status;
            CUgraph capturing = NULL;
            const CUgraphNode *deps = NULL;
            size_t ndeps = 0;
            pre = (int)launch_on(ctx.axpy, ctx.stream[0], scale_params);
            pre = pre ? pre : (int)cuStreamGetCaptureInfo(ctx.stream[0], &status, NULL, &capturing,
                                                          &deps, NULL, &ndeps);
        }
        int axpy = other ? (int)launch_on(ctx.shift, ctx.stream[0], shift_params)
                         : (int)launch_on(ctx.axpy, ctx.stream[0], params);
        int alloc2 = (int)sc_alloc_relaxed(&pool2, 2 * SC_N * sizeof(float));
        int copy1 = (int)cuMemcpyDtoDAsync(pool2, pool, SC_N * sizeof(float), ctx.stream[0]);
        int copy2 = (int)cuMemcpyDtoDAsync(ctx.buf[2], pool2, SC_N * sizeof(float), ctx.stream[0]);
        int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        int sync = (int)cuStreamSynchronize(ctx.stream[0]);
        if (exec)
            cuGraphExecDestroy(exec);
        if (graph && !keep_graphs)   /* kept: left to the driver's teardown */
            cuGraphDestroy(graph);
        int free1 = pool ? (int)cuMemFree(pool) : -1;
        int free2 = pool2 ? (int)cuMemFree(pool2) : -1;
        int free0 = before ? (pool0 ? (int)cuMemFree(pool0) : -1) : 0;
        failures += fill || begin || alloc1 || zero || pre || axpy || alloc2 || copy1 || copy2 || end ||
                    inst || launch || sync || free1 || free2 || alloc0 || zero0 || free0;
        if (before)
            printf("it=%d before rc=%d,%d,%d\n", it, alloc0, zero0, free0);
        printf("it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d sum=%08x\n", it, fill, begin,
               alloc1, zero, axpy, alloc2, copy1, copy2, end, inst, launch, sync, free1, free2,
               sc_checksum(&ctx));
        if (meminfo) {
            size_t free_bytes = 0, total = 0;
            int info = (int)cuMemGetInfo(&free_bytes, &total);
            printf("it=%d info=%d free=%zu total=%zu\n", it, info, free_bytes, total);
        }
    }
    return failures ? 1 : 0;
}

/* pool_two_sites: pool_before's step from two capture sites that take
 * turns, as a program capturing two graphs a step does (an encoder's and
 * a decoder's): each site's segment allocated before its capture comes
 * after the other site's capture, so it is the next capture's, not the
 * last one's. pool_two_sites_third: a third site's step after each of
 * them, for a configuration to turn off (its memory is the program's).
 * Each site computes into a buffer of its own. */
static __attribute__((noinline)) int pool_site_step(int it, int site)
{
    float a = 1.5f + 0.5f * (float)site;
    int n = SC_N;
    CUdeviceptr before = 0, pool = 0, pool2 = 0, out = ctx.buf[1 + site];
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    int rc = (int)cuMemsetD32(ctx.buf[0], 0x3f800000u + (unsigned)(it + site), SC_N);
    rc = rc ? rc : (int)cuMemAlloc(&before, 4 * SC_N * sizeof(float));
    rc = rc ? rc : (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
    rc = rc ? rc : (int)cuMemsetD32Async(before, 7, SC_N, ctx.stream[0]);
    rc = rc ? rc : (int)sc_alloc_relaxed(&pool, SC_N * sizeof(float));
    rc = rc ? rc : (int)cuMemsetD32Async(pool, 0, SC_N, ctx.stream[0]);
    void *params[] = { &a, &ctx.buf[0], &pool, &n };
    rc = rc ? rc : (int)launch_on(ctx.axpy, ctx.stream[0], params);
    rc = rc ? rc : (int)sc_alloc_relaxed(&pool2, 2 * SC_N * sizeof(float));
    rc = rc ? rc : (int)cuMemcpyDtoDAsync(pool2, pool, SC_N * sizeof(float), ctx.stream[0]);
    rc = rc ? rc : (int)cuMemcpyDtoDAsync(out, pool2, SC_N * sizeof(float), ctx.stream[0]);
    int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
    int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
    int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
    int sync = (int)cuStreamSynchronize(ctx.stream[0]);
    if (exec)
        cuGraphExecDestroy(exec);
    if (graph)
        cuGraphDestroy(graph);
    int freed = 0;
    CUdeviceptr segments[] = { pool, pool2, before };
    for (int i = 0; i < 3; i++)
        if (segments[i])
            freed = freed ? freed : (int)cuMemFree(segments[i]);
    printf("it=%d site=%d rc=%d,%d,%d,%d,%d,%d sum=%08x\n", it, site, rc, end, inst, launch, sync,
           freed, sc_checksum(&ctx));
    return rc || end || inst || launch || sync || freed;
}

static __attribute__((noinline)) int pool_site_first(int it)
{
    return pool_site_step(it, 0);
}

static __attribute__((noinline)) int pool_site_second(int it)
{
    return pool_site_step(it, 1);
}

static __attribute__((noinline)) int pool_site_third(int it)
{
    return pool_site_step(it, 2);
}

static int run_pool_two_sites(int iters, int third)
{
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        failures += pool_site_first(it);
        if (third)
            failures += pool_site_third(it);
        failures += pool_site_second(it);
        if (third)
            failures += pool_site_third(it);
    }
    return failures ? 1 : 0;
}

/* off_capture_meets_free: one thread captures at a site recap is told to
 * leave alone (mode off, by configuration: the test finds it as the
 * second site), thread-local; while it does, another thread frees a pool
 * segment that its own site's finished capture allocated, which recap
 * would keep after synchronising the device. A synchronisation then
 * would invalidate the first thread's capture. */
static pthread_barrier_t off_barrier;
/* to_graph_capture_meets_free: the same, the other thread's capture begun
 * into a graph of its own (cuStreamBeginCaptureToGraph), which recap
 * passes to the driver without a record. */
static int off_site_to_graph;

static __attribute__((noinline)) int off_site_capture(void)
{
    float a = 0.5f;
    int n = SC_N;
    void *params[] = { &ctx.buf[3], &a, &n };
    CUgraph graph = NULL;
    int begin;
    if (off_site_to_graph) {
        begin = (int)cuGraphCreate(&graph, 0);
        begin = begin ? begin : (int)cuStreamBeginCaptureToGraph(ctx.stream[1], graph, NULL, NULL, 0,
                                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    } else {
        begin = (int)cuStreamBeginCapture(ctx.stream[1], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    }
    int launch = (int)launch_on(ctx.scale, ctx.stream[1], params);
    pthread_barrier_wait(&off_barrier);         /* begun */
    pthread_barrier_wait(&off_barrier);         /* the other thread freed */
    int end = (int)cuStreamEndCapture(ctx.stream[1], &graph);
    printf("off site rc=%d,%d,%d graph=%d\n", begin, launch, end, graph != NULL);
    if (graph)
        cuGraphDestroy(graph);
    return begin || launch || end;
}

static void *off_site_thread(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx.ctx);
    return (void *)(intptr_t)off_site_capture();
}

static __attribute__((noinline)) int keeping_site_step(CUdeviceptr *pool)
{
    float a = 2.0f;
    int n = SC_N;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    int rc = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    rc = rc ? rc : (int)sc_alloc_relaxed(pool, SC_N * sizeof(float));
    rc = rc ? rc : (int)cuMemcpyDtoDAsync(*pool, ctx.buf[0], SC_N * sizeof(float), ctx.stream[0]);
    void *params[] = { pool, &a, &n };
    rc = rc ? rc : (int)launch_on(ctx.scale, ctx.stream[0], params);
    rc = rc ? rc : (int)cuMemcpyDtoDAsync(ctx.buf[2], *pool, SC_N * sizeof(float), ctx.stream[0]);
    int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
    int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
    int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
    int sync = (int)cuStreamSynchronize(ctx.stream[0]);
    if (exec)
        cuGraphExecDestroy(exec);
    if (graph)
        cuGraphDestroy(graph);
    printf("keeping site rc=%d,%d,%d,%d,%d\n", rc, end, inst, launch, sync);
    return rc || end || inst || launch || sync;
}

static int run_off_capture_meets_free(int iters)
{
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        CUdeviceptr pool = 0;
        failures += keeping_site_step(&pool);
        pthread_t other;
        pthread_barrier_init(&off_barrier, NULL, 2);
        if (pthread_create(&other, NULL, off_site_thread, NULL) != 0)
            return 1;
        pthread_barrier_wait(&off_barrier);     /* its capture has begun */
        int freed = pool ? (int)cuMemFree(pool) : -1;
        pthread_barrier_wait(&off_barrier);
        void *off_failed = NULL;
        pthread_join(other, &off_failed);
        pthread_barrier_destroy(&off_barrier);
        failures += freed != 0 || off_failed != NULL;
        printf("it=%d free rc=%d sum=%08x\n", it, freed, sc_checksum(&ctx));
    }
    return failures ? 1 : 0;
}

/* A step that pins host memory, as a PyTorch program does whose
 * torch.cuda.graph enter empties the pinned-memory cache every step: the
 * previous step's pinned buffers are freed first (cuMemFreeHost), then
 * the step pins two of its own (cuMemHostAlloc, portable, and
 * cuMemAllocHost), fills them, and captures copies from them to the
 * device (nodes that name the host addresses) around a kernel.
 * pinned_pressure: every fourth step begins with a pinned allocation no
 * machine can satisfy, as a program near its limits meets. */
static int run_pinned(int iters, int pressure)
{
    int failures = 0;
    void *held[2] = { NULL, NULL };
    for (int it = 0; it < iters; it++) {
        int freed = 0;
        for (int i = 0; i < 2; i++)
            if (held[i])
                freed = freed ? freed : (int)cuMemFreeHost(held[i]);
        if (pressure && it % 4 == 3) {
            void *huge = NULL;
            printf("it=%d pressure rc=%d\n", it,
                   (int)cuMemHostAlloc(&huge, (size_t)1 << 46, CU_MEMHOSTALLOC_PORTABLE));
        }
        void *pin = NULL, *pin2 = NULL;
        int alloc = (int)cuMemHostAlloc(&pin, SC_N * sizeof(float), CU_MEMHOSTALLOC_PORTABLE);
        int alloc2 = (int)cuMemAllocHost(&pin2, SC_N * sizeof(float));
        held[0] = pin, held[1] = pin2;
        if (alloc || alloc2) {
            failures++;
            printf("it=%d rc=%d,%d\n", it, alloc, alloc2);
            continue;
        }
        for (int i = 0; i < SC_N; i++) {
            ((float *)pin)[i] = (float)(it + i);
            ((float *)pin2)[i] = (float)(it * 2 - i);
        }
        float a = 0.5f + 0.25f * (float)(it % 3);
        int n = SC_N;
        void *params[] = { &ctx.buf[0], &a, &n };
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int rc = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = rc ? rc : (int)cuMemcpyHtoDAsync(ctx.buf[0], pin, SC_N * sizeof(float), ctx.stream[0]);
        rc = rc ? rc : (int)launch_on(ctx.scale, ctx.stream[0], params);
        rc = rc ? rc : (int)cuMemcpyHtoDAsync(ctx.buf[1], pin2, SC_N * sizeof(float), ctx.stream[0]);
        int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        int sync = (int)cuStreamSynchronize(ctx.stream[0]);
        if (exec)
            cuGraphExecDestroy(exec);
        if (graph)
            cuGraphDestroy(graph);
        failures += freed || rc || end || inst || launch || sync;
        printf("it=%d rc=%d,%d,%d,%d,%d,%d sum=%08x\n", it, freed, rc, end, inst, launch, sync,
               sc_checksum(&ctx));
    }
    for (int i = 0; i < 2; i++)
        if (held[i])
            cuMemFreeHost(held[i]);
    return failures ? 1 : 0;
}

/* A decode step whose batch cycles 1, 2, 4, 8 (pool_batches), as a
 * server's does: each capture gets a private pool of its own, allocated
 * inside the capture in relaxed mode, whose segments depend on the batch
 * (one of the small size; a large one from batch 4; a second small one at
 * batch 8, of the size of the first), freed once the graph and its
 * executable graph are gone. With the pool handed back at the same
 * addresses, each batch's capture repeats its last one exactly. */
static int run_pool_batches(int iters)
{
    static const int batches[] = { 1, 2, 4, 8 };
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        int batch = batches[it % 4], n = SC_N;
        float a = 1.0f + 0.25f * (float)batch;
        size_t sizes[3] = { SC_N * sizeof(float), 4 * SC_N * sizeof(float), SC_N * sizeof(float) };
        int segments = batch < 4 ? 1 : batch < 8 ? 2 : 3;
        CUdeviceptr seg[3] = { 0, 0, 0 };
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int rc = (int)cuMemsetD32(ctx.buf[0], 0x3f800000u + (unsigned)it, SC_N);
        rc = rc ? rc : (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        for (int s = 0; s < segments && !rc; s++) {
            rc = (int)sc_alloc_relaxed(&seg[s], sizes[s]);
            rc = rc ? rc : (int)cuMemcpyDtoDAsync(seg[s], ctx.buf[0], SC_N * sizeof(float),
                                                  ctx.stream[0]);
            void *params[] = { &seg[s], &a, &n };
            rc = rc ? rc : (int)launch_on(s == 1 ? ctx.shift : ctx.scale, ctx.stream[0], params);
            rc = rc ? rc : (int)cuMemcpyDtoDAsync(ctx.buf[1 + s], seg[s], SC_N * sizeof(float),
                                                  ctx.stream[0]);
        }
        int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        int sync = (int)cuStreamSynchronize(ctx.stream[0]);
        if (graph)
            cuGraphDestroy(graph);
        if (exec)
            cuGraphExecDestroy(exec);
        for (int s = 0; s < segments; s++)
            if (seg[s])
                rc = rc ? rc : (int)cuMemFree(seg[s]);
        failures += rc || end || inst || launch || sync;
        printf("it=%d batch=%d rc=%d,%d,%d,%d,%d sum=%08x\n", it, batch, rc, end, inst, launch,
               sync, sc_checksum(&ctx));
    }
    return failures ? 1 : 0;
}

/* An optimizer test's sweep, as PyTorch's test_graph_optims runs it:
 * `phases` optimizers in turn, each through the same list of
 * configurations (sweep_configs: the kind of step each one captures),
 * each configuration captured twice, once per implementation (per
 * parameter, then one "foreach" kernel list), every capture into a graph
 * of its own over fresh parameters at new addresses, replayed twice and
 * read back. Within an optimizer configurations repeat kinds out of order
 * (one that differs in a value only captures what another did); each
 * optimizer's kinds are new (no two share one), and there are eight of
 * them, as many as a site compares at once. sweep_late: each graph and
 * its executable graph are destroyed only after the next capture (a
 * Python object freed late).
 * sweep_kept: no graph is ever destroyed, only executable graphs, as in
 * PyTorch once any test enabled its graphs' debug mode (capture_end then
 * keeps the graph and forgets it has one: reset() never destroys it). */
static const int sweep_configs[] = { 0, 0, 1, 2, 3, 1, 0, 1, 0 };
#define SWEEP_CONFIGS ((int)(sizeof sweep_configs / sizeof sweep_configs[0]))

static int sweep_capture(int phase, int kind, int foreach, CUdeviceptr prm[3], float a,
                         CUgraph *graph)
{
    CUfunction fns[3] = { ctx.scale, ctx.shift, ctx.mirror };
    int n = SC_N, rc = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
    int ops = 2 + kind + 4 * phase;   /* no two phases share a kind */
    /* The foreach step takes the functions in another order: never the
     * same calls as a per-parameter step (grid sizes would not tell them
     * apart: an update may change those). */
    for (int t = 0; t < (foreach ? 1 : 3) && !rc; t++)
        for (int j = 0; j < ops && !rc; j++) {
            void *params[] = { &prm[foreach ? j % 3 : t], &a, &n };
            rc = (int)launch_on(fns[(phase + kind + (foreach ? 2 * j : j)) % 3], ctx.stream[0],
                                params);
        }
    int end = (int)cuStreamEndCapture(ctx.stream[0], graph);
    return rc ? rc : end;
}

enum sweep_frees { SWEEP_AT_ONCE, SWEEP_LATE, SWEEP_GRAPHS_KEPT };

static int run_sweep(int phases, enum sweep_frees frees)
{
    int failures = 0;
    CUgraph late_graph = NULL;
    CUgraphExec late_exec = NULL;
    for (int phase = 0; phase < phases; phase++)
        for (int c = 0; c < SWEEP_CONFIGS; c++) {
            CUdeviceptr prm[3] = { 0, 0, 0 };
            int setup = 0;
            for (int t = 0; t < 3; t++) {
                setup = setup ? setup : (int)cuMemAlloc(&prm[t], SC_N * sizeof(float));
                setup = setup ? setup : (int)cuMemsetD32(prm[t], 0x3f800000u + (unsigned)(c * 3 + t),
                                                         SC_N);
            }
            for (int foreach = 0; foreach < 2 && !setup; foreach++) {
                CUgraph graph = NULL;
                CUgraphExec exec = NULL;
                float a = 0.5f + 0.125f * (float)c;
                int cap = sweep_capture(phase, sweep_configs[c], foreach, prm, a, &graph);
                int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
                int run = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
                run = run ? run : (int)cuGraphLaunch(exec, ctx.stream[0]);
                int sync = (int)cuStreamSynchronize(ctx.stream[0]);
                uint32_t sum = 0;
                for (int t = 0; t < 3; t++) {
                    float host[SC_N];
                    sync = sync ? sync : (int)cuMemcpyDtoH(host, prm[t], sizeof host);
                    for (int i = 0; i < SC_N && !sync; i++) {
                        uint32_t bits;
                        memcpy(&bits, &host[i], sizeof bits);
                        sum = sum * 31u + bits;
                    }
                }
                if (frees == SWEEP_LATE) {
                    if (late_exec)
                        cuGraphExecDestroy(late_exec);
                    if (late_graph)
                        cuGraphDestroy(late_graph);
                    late_graph = graph, late_exec = exec;
                } else if (frees == SWEEP_GRAPHS_KEPT) {
                    if (exec)
                        cuGraphExecDestroy(exec);
                } else {
                    if (exec)
                        cuGraphExecDestroy(exec);
                    if (graph)
                        cuGraphDestroy(graph);
                }
                failures += cap || inst || run || sync;
                /* What the capture's calls are: their count per
                 * parameter, the first function, one parameter or three. */
                printf("phase=%d config=%d kind=%d/%d/%d rc=%d,%d,%d,%d sum=%08x\n", phase, c,
                       2 + sweep_configs[c] + 4 * phase, (phase + sweep_configs[c]) % 3, foreach,
                       cap, inst, run, sync, sum);
            }
            failures += setup != 0;
            /* Freed before a graph freed late, which is never launched
             * again: the driver allows it. */
            for (int t = 0; t < 3; t++)
                if (prm[t])
                    cuMemFree(prm[t]);
        }
    if (late_exec)
        cuGraphExecDestroy(late_exec);
    if (late_graph)
        cuGraphDestroy(late_graph);
    return failures ? 1 : 0;
}

/* Contexts that come and go, as a test suite's fixtures make them: each
 * round makes a context of its own (ctx_teardown) or retains the primary
 * context once more (ctx_teardown_primary), captures memsets into a
 * buffer of it five times at one site (its pool allocated inside the
 * capture, as a caching allocator does), then tears the context down
 * (cuCtxDestroy; the primary's last release). What recap kept of it must
 * not outlive it. The setup's own primary reference is dropped first in
 * the primary variant, so that each round's release is the last. */
static int run_ctx_teardown(int iters, int primary)
{
    CUdevice dev;
    int failures = 0;
    cuDeviceGet(&dev, 0);
    if (primary)
        printf("setup release rc=%d\n", (int)cuDevicePrimaryCtxRelease(dev));
    for (int round = 0; round < iters; round++) {
        CUcontext c = NULL;
        CUstream s = NULL;
        CUdeviceptr buf = 0;
        int make = primary ? (int)cuDevicePrimaryCtxRetain(&c, dev) : (int)cuCtxCreate(&c, NULL, 0, dev);
        int cur = (int)cuCtxSetCurrent(c);
        int stream = (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
        int alloc = (int)cuMemAlloc(&buf, SC_N * sizeof(unsigned));
        failures += make || cur || stream || alloc;
        for (int it = 0; it < 5; it++) {
            CUgraph graph = NULL;
            CUgraphExec exec = NULL;
            CUdeviceptr pool = 0;
            unsigned host[SC_N];
            int begin = (int)cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
            int palloc = (int)cuMemAlloc(&pool, SC_N * sizeof(unsigned));
            int set = (int)cuMemsetD32Async(pool, (unsigned)(round * 10 + it), SC_N, s);
            int copy = (int)cuMemcpyDtoDAsync(buf, pool, SC_N * sizeof(unsigned), s);
            int end = (int)cuStreamEndCapture(s, &graph);
            int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
            int launch = exec ? (int)cuGraphLaunch(exec, s) : -1;
            int sync = (int)cuStreamSynchronize(s);
            int read = (int)cuMemcpyDtoH(host, buf, sizeof host);
            if (exec)
                cuGraphExecDestroy(exec);
            if (graph)
                cuGraphDestroy(graph);
            int pfree = pool ? (int)cuMemFree(pool) : -1;
            failures += begin || palloc || set || copy || end || inst || launch || sync || read ||
                        pfree;
            printf("round=%d it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d,%d,%d value=%u\n", round, it, begin,
                   palloc, set, copy, end, inst, launch, sync, read, pfree, host[SC_N - 1]);
        }
        int sfree = (int)cuStreamDestroy(s);
        int bfree = (int)cuMemFree(buf);
        int gone = primary ? (int)cuDevicePrimaryCtxRelease(dev) : (int)cuCtxDestroy(c);
        failures += sfree || bfree || gone;
        printf("round=%d teardown rc=%d,%d,%d\n", round, sfree, bfree, gone);
    }
    /* Back to a context for the stats and the drain at exit. */
    CUcontext last = NULL;
    cuDevicePrimaryCtxRetain(&last, dev);
    cuCtxSetCurrent(last);
    return failures ? 1 : 0;
}

/* Code that comes and goes, as cuda.core's compiled kernels do: each
 * round loads its own copy of the kernels (a library with
 * SCENARIO_KERNELS=library, else a module), captures at one site five
 * times, destroys each graph and executable graph, then unloads the code.
 * Whatever recap kept of the round names kernels that are gone. */
static int run_code_unload(int iters)
{
    int failures = 0;
    for (int round = 0; round < iters; round++) {
        CUlibrary lib = NULL;
        CUmodule mod = NULL;
        CUfunction scale = NULL;
        int load;
        if (sc_library_kernels()) {
            CUkernel k = NULL;
            load = (int)cuLibraryLoadData(&lib, "standin", NULL, NULL, 0, NULL, NULL, 0);
            load = load ? load : (int)cuLibraryGetKernel(&k, lib, "scale");
            scale = (CUfunction)k;
        } else {
            load = (int)cuModuleLoadData(&mod, "standin");
            load = load ? load : (int)cuModuleGetFunction(&scale, mod, "scale");
        }
        failures += load != 0;
        for (int it = 0; it < 5 && !load; it++) {
            CUgraph graph = NULL;
            CUgraphExec exec = NULL;
            float factor = 1.0f + 0.125f * (float)(round * 5 + it);
            int n = SC_N;
            void *args[] = { &ctx.buf[0], &factor, &n };
            int begin = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
            int launch = (int)cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, ctx.stream[0], args, NULL);
            int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
            int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
            int run = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
            int sync = (int)cuStreamSynchronize(ctx.stream[0]);
            int edestroy = exec ? (int)cuGraphExecDestroy(exec) : -1;
            int gdestroy = graph ? (int)cuGraphDestroy(graph) : -1;
            failures += begin || launch || end || inst || run || sync || edestroy || gdestroy;
            printf("round=%d it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d sum=%08x\n", round, it, begin,
                   launch, end, inst, run, sync, edestroy, gdestroy, sc_checksum(&ctx));
        }
        int unload = lib ? (int)cuLibraryUnload(lib) : mod ? (int)cuModuleUnload(mod) : -1;
        failures += unload != 0;
        printf("round=%d unload rc=%d\n", round, unload);
    }
    return failures ? 1 : 0;
}

/* External events, as PyTorch's torch.cuda.Event(external=True) makes
 * them: a record and a wait that are nodes of the graph, holding their
 * event, with a new pair of events every iteration (the old pair
 * destroyed once the graph is). A repeat capture must not keep the old
 * events in its nodes. */
static int run_external_events(int iters)
{
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        CUevent start = NULL, end = NULL;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int n = SC_N;
        float a = 1.0f + 0.5f * (float)it;
        void *params[] = { &a, &ctx.buf[0], &ctx.buf[1], &n };
        int ev = (int)cuEventCreate(&start, CU_EVENT_DISABLE_TIMING) * 10 +
                 (int)cuEventCreate(&end, CU_EVENT_DISABLE_TIMING);
        int begin = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_RELAXED);
        int rec1 = (int)cuEventRecordWithFlags(start, ctx.stream[0], CU_EVENT_RECORD_EXTERNAL);
        int k = (int)launch_on(ctx.axpy, ctx.stream[0], params);
        int rec2 = (int)cuEventRecordWithFlags(end, ctx.stream[0], CU_EVENT_RECORD_EXTERNAL);
        int endc = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        int sync = (int)cuStreamSynchronize(ctx.stream[0]);
        int query = (int)cuEventQuery(end);
        if (exec)
            cuGraphExecDestroy(exec);
        if (graph)
            cuGraphDestroy(graph);
        int gone = (int)cuEventDestroy(start) * 10 + (int)cuEventDestroy(end);
        failures += ev || begin || rec1 || k || rec2 || endc || inst || launch || sync || query ||
                    gone;
        printf("it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d sum=%08x\n", it, ev, begin, rec1, k,
               rec2, endc, inst, launch, sync, query, gone, sc_checksum(&ctx));
    }
    return failures ? 1 : 0;
}

/* The program breaks its own capture at iteration 3 with a call that is
 * illegal while a global-mode capture runs. broken_query: then asks that
 * capture for its status and graph, as a framework checks its capture
 * (a query that makes a recapture switch to a plain capture);
 * query_then_broken: asks for them first, then breaks it (the graph it
 * was handed is the capture's, and goes with it). */
/* Asks stream 0's capture for its status and graph, and prints both. */
static void print_capture_query(int it, const char *label)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph capturing = NULL;
    int asked = cuStreamGetCaptureInfo(ctx.stream[0], &status, NULL, &capturing, NULL, NULL, NULL);
    printf("it=%d %s=%d status=%d graph=%s\n", it, label, asked, (int)status,
           capturing ? "yes" : "null");
}

static int run_broken(int iters, int query)
{
    struct sc_recipe r;
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUdeviceptr scratch = 0;
        recipe_params(&r, it);
        int begin = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        int ops = 0, illegal = 0;
        for (int i = 0; i < r.n; i++) {
            ops = ops * 3 + (int)sc_enqueue(&ctx, &r.op[i]) % 3;
            if (query == 2 && it == 3 && i == 1)
                print_capture_query(it, "query first");
            if (it == 3 && i == 2)
                illegal = cuMemAlloc(&scratch, 64);
        }
        if (query == 1 && it == 3)
            print_capture_query(it, "query");
        int end = cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = run_and_release(graph);
        if (scratch)
            cuMemFree(scratch);
        printf("it=%d begin=%d ops=%d illegal=%d end=%d graph=%s inst=%d sum=%08x\n", it, begin,
               ops, illegal, end, graph ? "yes" : "null", inst, sc_checksum(&ctx));
    }
    return 0;
}

/* exec_node_set: every step the program captures a kernel, instantiates
 * the graph, and then sets the executable graph's kernel node itself
 * through its graph's node (another scalar) before launching it. Where
 * recap hands out a released executable graph instantiated from another
 * graph, the driver may take only that graph's nodes in the setter
 * (STANDIN_EXEC_NODES=instantiated, as documented). `keep`: the program
 * destroys each graph one step late (the executable graph's source then
 * lives when the next step sets a node). exec_node_set_late: the program
 * sets nodes from the fourth step on only. */
static int run_exec_node_set(int iters, int keep, int from)
{
    int failures = 0;
    CUgraph previous = NULL;
    for (int it = 0; it < iters; it++) {
        float a = 1.0f + (float)(it % 3), b = 0.5f * (float)(it % 5);
        int n = SC_N;
        void *params[] = { &ctx.buf[0], &a, &n };
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int begin = (int)cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        int launch = (int)launch_on(ctx.scale, ctx.stream[0], params);
        int end = (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        CUgraphNode node = NULL;
        size_t count = 1;
        int nodes = graph ? (int)cuGraphGetNodes(graph, &node, &count) : -1;
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        int get = node ? (int)cuGraphKernelNodeGetParams(node, &p) : -1;
        void *set_params[] = { &ctx.buf[0], &b, &n };
        p.kernelParams = set_params;
        int set = it < from ? 0 : exec && node ? (int)cuGraphExecKernelNodeSetParams(exec, node, &p) : -1;
        int run = exec ? (int)cuGraphLaunch(exec, ctx.stream[0]) : -1;
        int sync = (int)cuStreamSynchronize(ctx.stream[0]);
        if (exec)
            cuGraphExecDestroy(exec);
        if (previous)
            cuGraphDestroy(previous);
        previous = NULL;
        if (keep)
            previous = graph;
        else if (graph)
            cuGraphDestroy(graph);
        printf("it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d,%d sum=%08x\n", it, begin, launch, end, inst, nodes,
               get, set, run, sync, sc_checksum(&ctx));
        failures += begin || launch || end || inst || nodes || get || set || run || sync;
    }
    if (previous)
        cuGraphDestroy(previous);
    return failures ? 1 : 0;
}

/* Captures a recipe on stream 0 in global mode: the end's result, the
 * begin's in *begin (if asked). */
static int capture_recipe(const struct sc_recipe *r, CUgraph *graph, int *begin)
{
    int b = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (int i = 0; i < r->n; i++)
        sc_enqueue(&ctx, &r->op[i]);
    if (begin)
        *begin = b;
    return cuStreamEndCapture(ctx.stream[0], graph);
}

/* Destroying twice: the second destroy must fail as the driver's would,
 * and must not destroy anything recap keeps. */
static int run_double_destroy(int iters)
{
    struct sc_recipe r;
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        recipe_params(&r, it);
        int begin;
        int end = capture_recipe(&r, &graph, &begin);
        int inst = cuGraphInstantiateWithFlags(&exec, graph, 0);
        int launch = cuGraphLaunch(exec, ctx.stream[0]);
        cuStreamSynchronize(ctx.stream[0]);
        int e1 = cuGraphExecDestroy(exec);
        int e2 = it == 2 ? cuGraphExecDestroy(exec) : 0;
        int g1 = cuGraphDestroy(graph);
        int g2 = it == 2 ? cuGraphDestroy(graph) : 0;
        printf("it=%d begin=%d end=%d inst=%d launch=%d exec=%d,%d graph=%d,%d sum=%08x\n", it,
               begin, end, inst, launch, e1, e2, g1, g2, sc_checksum(&ctx));
    }
    return 0;
}

/* Loops whose program edits its graph after the capture, before
 * instantiating it: `edit` changes the graph in some iterations and
 * returns the driver's answer (0 where it did nothing), printed as
 * "LABEL=". */
static int run_edited(int iters, const char *label, int (*edit)(CUgraph graph, int it))
{
    struct sc_recipe r;
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        recipe_params(&r, it);
        capture_recipe(&r, &graph, NULL);
        int rc = edit(graph, it);
        int inst = cuGraphInstantiateWithFlags(&exec, graph, 0);
        cuGraphLaunch(exec, ctx.stream[0]);
        cuStreamSynchronize(ctx.stream[0]);
        cuGraphExecDestroy(exec);
        cuGraphDestroy(graph);
        printf("it=%d %s=%d inst=%d sum=%08x\n", it, label, rc, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* "mutate": every third graph gets a new scalar in its second kernel
 * node; the executable graph must carry the edit. */
static int edit_kernel_argument(CUgraph graph, int it)
{
    if (it % 3 != 2)
        return 0;
    CUgraphNode nodes[SC_MAX_OPS];
    size_t n = SC_MAX_OPS;
    CUDA_KERNEL_NODE_PARAMS p;
    cuGraphGetNodes(graph, nodes, &n);
    int rc = cuGraphKernelNodeGetParams(nodes[1], &p);
    float a = 3.0f;
    void *args[] = { p.kernelParams[0], &a, p.kernelParams[2] };
    p.kernelParams = args;
    return rc ? rc : (int)cuGraphKernelNodeSetParams(nodes[1], &p);
}

/* "grown": every third graph gets a copy of its second kernel node after
 * its last, so that graph runs the kernel once more. A graph recap keeps
 * or records into must never be one that grew. */
static int grow_by_a_kernel(CUgraph graph, int it)
{
    if (it % 3 != 1)
        return 0;
    CUgraphNode nodes[SC_MAX_OPS], added;
    size_t n = SC_MAX_OPS;
    CUDA_KERNEL_NODE_PARAMS p;
    int rc = cuGraphGetNodes(graph, nodes, &n);
    rc = rc ? rc : (int)cuGraphKernelNodeGetParams(nodes[1], &p);
    return rc ? rc : (int)cuGraphAddKernelNode(&added, graph, &nodes[n - 1], 1, &p);
}

/* Reads what each captured graph holds after it was instantiated: the
 * first kernel node's scalar argument, and every fourth iteration a clone
 * of the graph, instantiated and launched on its own. Under recap a graph
 * recorded by recap itself must show the arguments of this capture. */
static int run_inspect(int iters)
{
    struct sc_recipe r;
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL, clone = NULL;
        CUgraphExec exec = NULL, clone_exec = NULL;
        recipe_shape(&r, it, 3);
        int begin;
        int end = capture_recipe(&r, &graph, &begin);
        int inst = cuGraphInstantiateWithFlags(&exec, graph, 0);
        int launch = cuGraphLaunch(exec, ctx.stream[0]);
        cuStreamSynchronize(ctx.stream[0]);
        CUgraphNode nodes[SC_MAX_OPS];
        size_t n = SC_MAX_OPS;
        CUDA_KERNEL_NODE_PARAMS p;
        int read = cuGraphGetNodes(graph, nodes, &n);
        float a = -1.0f;
        for (size_t i = 0; i < n && !read; i++) {
            CUgraphNodeType type;
            if (cuGraphNodeGetType(nodes[i], &type) == CUDA_SUCCESS &&
                type == CU_GRAPH_NODE_TYPE_KERNEL) {
                read = cuGraphKernelNodeGetParams(nodes[i], &p);
                if (!read)
                    memcpy(&a, p.kernelParams[0], sizeof a);   /* axpy(a, x, y, n) */
                break;
            }
        }
        int cloned = -1;
        if (it % 4 == 3) {
            cloned = cuGraphClone(&clone, graph);
            cloned = cloned ? cloned : (int)cuGraphInstantiateWithFlags(&clone_exec, clone, 0);
            cloned = cloned ? cloned : (int)cuGraphLaunch(clone_exec, ctx.stream[0]);
            cuStreamSynchronize(ctx.stream[0]);
            if (clone_exec)
                cuGraphExecDestroy(clone_exec);
            if (clone)
                cuGraphDestroy(clone);
        }
        cuGraphExecDestroy(exec);
        cuGraphDestroy(graph);
        printf("it=%d rc=%d,%d,%d,%d read=%d a=%g cloned=%d sum=%08x\n", it, begin, end, inst,
               launch, read, (double)a, cloned, sc_checksum(&ctx));
    }
    return 0;
}

/* User objects attached to some of the graphs, as cuda.core does to keep
 * kernel resources alive. A reused executable graph must keep the objects
 * of the graph it now reflects alive (recap takes references) and every
 * destructor must run in the end. The output holds only what the program
 * may rely on: results, return codes, and after the last destroys (and an
 * allocation that makes recap release what it caches) that every object
 * was destroyed; when, exactly, is up to the driver and recap. */
static int user_objects_created, user_objects_destroyed;

static void user_object_destructor(void *data)
{
    (void)data;
    __atomic_add_fetch(&user_objects_destroyed, 1, __ATOMIC_RELAXED);
}

/* Destructors run on a driver thread some time after the last reference
 * went (STANDIN_ASYNC=1, as on a GPU): wait for them, boundedly. */
static void report_user_objects(void)
{
    for (int i = 0; i < 5000 && __atomic_load_n(&user_objects_destroyed, __ATOMIC_RELAXED) <
                                    user_objects_created; i++)
        usleep(1000);
    printf("user objects destroyed: %d of %d\n",
           __atomic_load_n(&user_objects_destroyed, __ATOMIC_RELAXED), user_objects_created);
}

static int run_user_objects(int iters)
{
    struct sc_recipe r;
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        CUuserObject object = NULL;
        int with_object = it % 3 != 2;
        recipe_params(&r, it);
        int end = capture_recipe(&r, &graph, NULL);
        int attach = 0;
        if (with_object) {
            attach = cuUserObjectCreate(&object, NULL, user_object_destructor, 1,
                                        CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
            user_objects_created += attach == CUDA_SUCCESS;
            attach = attach ? attach : (int)cuGraphRetainUserObject(graph, object, 1,
                                                                    CU_GRAPH_USER_OBJECT_MOVE);
        }
        int inst = cuGraphInstantiateWithFlags(&exec, graph, 0);
        int launch = cuGraphLaunch(exec, ctx.stream[0]);
        cuStreamSynchronize(ctx.stream[0]);
        int destroyed = cuGraphExecDestroy(exec) * 10 + cuGraphDestroy(graph);
        printf("it=%d end=%d attach=%d inst=%d launch=%d destroy=%d object=%d sum=%08x\n", it,
               end, attach, inst, launch, destroyed, with_object, sc_checksum(&ctx));
    }
    return 0;
}

/* A stream that goes before the executable graphs launched on it (as
 * cuda.core closes its stream, then releases its context at exit): each
 * iteration captures a memset on a stream of the program's own, attaches a
 * user object, launches and destroys; then the stream is destroyed, and
 * the drain at the end (SCENARIO_DRAIN) makes recap destroy what it kept.
 * Nothing recap does afterwards may name the destroyed stream (the driver
 * crashed on a cuStreamIsCapturing of one on the H200). */
static int run_user_objects_stream_gone(int iters)
{
    CUstream s = NULL;
    int failures = (int)cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != 0;
    for (int it = 0; it < iters && !failures; it++) {
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        CUuserObject object = NULL;
        int begin = (int)cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        int set = (int)cuMemsetD32Async(ctx.buf[1], 0x3f800000u + (unsigned)it, SC_N, s);
        int end = (int)cuStreamEndCapture(s, &graph);
        int attach = (int)cuUserObjectCreate(&object, NULL, user_object_destructor, 1,
                                             CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
        user_objects_created += attach == CUDA_SUCCESS;
        attach = attach ? attach : (int)cuGraphRetainUserObject(graph, object, 1,
                                                                 CU_GRAPH_USER_OBJECT_MOVE);
        int inst = graph ? (int)cuGraphInstantiateWithFlags(&exec, graph, 0) : -1;
        int launch = exec ? (int)cuGraphLaunch(exec, s) : -1;
        int sync = (int)cuStreamSynchronize(s);
        int destroyed = (exec ? (int)cuGraphExecDestroy(exec) : -1) * 10 +
                        (graph ? (int)cuGraphDestroy(graph) : -1);
        failures += begin || set || end || attach || inst || launch || sync || destroyed;
        printf("it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d sum=%08x\n", it, begin, set, end, attach, inst,
               launch, sync, destroyed, sc_checksum(&ctx));
    }
    printf("stream destroy rc=%d\n", (int)cuStreamDestroy(s));
    return failures ? 1 : 0;
}

/* Launches left in flight: every iteration captures, instantiates,
 * launches and destroys without synchronising (a user object on every
 * third graph), and synchronises only every fifth iteration and at the
 * end. Under recap the destroyed executable graph is kept and updated for
 * the next capture while its launch may still run: on a GPU (and on the
 * stand-in with STANDIN_ASYNC=1) a launch runs the parameters it was given,
 * so the results must match the run without recap. `inflight_fork` does the
 * same with a fork/join over two streams and a host function on the second. */
static int run_inflight(int iters, int fork)
{
    struct sc_recipe r;
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        CUuserObject object = NULL;
        int rc[8] = {0}, k = 0;
        if (fork)
            recipe_fork_join(&r, it);
        else
            recipe_params(&r, it);
        rc[k++] = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        for (int i = 0; i < r.n; i++)
            rc[k] = rc[k] ? rc[k] : (int)sc_enqueue(&ctx, &r.op[i]);
        k++;
        rc[k++] = cuStreamEndCapture(ctx.stream[0], &graph);
        if (it % 3 == 0) {
            rc[k] = cuUserObjectCreate(&object, NULL, user_object_destructor, 1,
                                       CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
            user_objects_created += rc[k] == CUDA_SUCCESS;
            rc[k] = rc[k] ? rc[k] : (int)cuGraphRetainUserObject(graph, object, 1,
                                                                  CU_GRAPH_USER_OBJECT_MOVE);
        }
        k++;
        rc[k++] = cuGraphInstantiateWithFlags(&exec, graph, 0);
        rc[k++] = cuGraphLaunch(exec, ctx.stream[0]);
        rc[k++] = cuGraphExecDestroy(exec);
        rc[k++] = cuGraphDestroy(graph);
        printf("it=%d rc=%d,%d,%d,%d,%d,%d,%d,%d", it, rc[0], rc[1], rc[2], rc[3], rc[4], rc[5],
               rc[6], rc[7]);
        for (int i = 0; i < k; i++)
            failures += rc[i] != 0;
        if (it % 5 == 4) {
            int sync = cuStreamSynchronize(ctx.stream[0]);
            printf(" sync=%d sum=%08x", sync, sc_checksum(&ctx));
        }
        printf("\n");
    }
    printf("end sync=%d sum=%08x\n", (int)cuStreamSynchronize(ctx.stream[0]), sc_checksum(&ctx));
    return failures ? 1 : 0;
}

/* Device memory runs out while recap holds executable graphs: an
 * allocation that fits without recap must fit with it. */
static int run_oom(int iters)
{
    struct sc_recipe r;
    CUgraph pending = NULL;
    struct sc_options o = { .mode = CU_STREAM_CAPTURE_MODE_GLOBAL };
    for (int it = 0; it < iters; it++) {
        recipe_shape(&r, it, 1 + it % 4);
        sc_iteration(&ctx, it, &r, &o, &pending);
    }
    size_t free_bytes = (size_t)atol(getenv("SCENARIO_OOM_BYTES") ? getenv("SCENARIO_OOM_BYTES") : "0");
    CUdeviceptr big = 0;
    int rc = cuMemAlloc(&big, free_bytes);
    printf("big allocation rc=%d\n", rc);
    if (big)
        cuMemFree(big);
    return 0;
}

/* Memory allocated and freed inside the capture: the program holds the
 * allocation's address, so such a graph can never be rebuilt from a
 * journal, and recap must leave the site's captures plain. */
static int run_alloc_nodes(int iters)
{
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL;
        CUdeviceptr scratch = 0;
        float a = 1.0f + (float)it;
        int n = SC_N;
        void *params[] = { &a, &ctx.buf[0], &ctx.buf[1], &n };
        int rc = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = rc * 10 + (int)cuMemAllocAsync(&scratch, SC_N * sizeof(float), ctx.stream[0]);
        rc = rc * 10 + (int)cuMemsetD32Async(scratch, (unsigned)it, SC_N, ctx.stream[0]);
        rc = rc * 10 + (int)cuLaunchKernel(ctx.axpy, SC_N / 64, 1, 1, 64, 1, 1, 0, ctx.stream[0],
                                           params, NULL);
        rc = rc * 10 + (int)cuMemcpyDtoDAsync(ctx.buf[2], scratch, SC_N * sizeof(float), ctx.stream[0]);
        rc = rc * 10 + (int)cuMemFreeAsync(scratch, ctx.stream[0]);
        rc = rc * 10 + (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = run_and_release(graph);
        printf("it=%d rc=%d inst=%d sum=%08x\n", it, rc, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* A conditional node made inside the capture, as the CUDA programming
 * guide and cuda.core's GraphBuilder make one: the capture's graph and
 * dependencies from cuStreamGetCaptureInfo, a conditional handle on that
 * graph, an IF node added at the dependencies, the capture's dependencies
 * set to that node, its body captured on the second stream with
 * cuStreamBeginCaptureToGraph, then more work after it. The handle's
 * default value alternates, so the body runs every other iteration, and
 * every scalar changes. */
static int run_conditional(int iters)
{
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL, capturing = NULL, body_out = NULL;
        CUgraphNode cond = NULL;
        const CUgraphNode *deps = NULL;
        const CUgraphEdgeData *edges = NULL;
        size_t ndeps = 0;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        CUgraphConditionalHandle handle = 0;
        struct three_kernels k;
        three_kernels_init(&k, it);
        int rc = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = rc * 10 + (int)launch_on(ctx.axpy, ctx.stream[0], k.before);
        rc = rc * 10 + (int)cuStreamGetCaptureInfo(ctx.stream[0], &status, NULL, &capturing,
                                                   &deps, &edges, &ndeps);
        rc = rc * 10 + (int)cuGraphConditionalHandleCreate(&handle, capturing, ctx.ctx,
                                                           (unsigned)(it & 1),
                                                           CU_GRAPH_COND_ASSIGN_DEFAULT);
        CUgraphNodeParams p;
        memset(&p, 0, sizeof p);
        p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        p.conditional.handle = handle;
        p.conditional.type = CU_GRAPH_COND_TYPE_IF;
        p.conditional.size = 1;
        p.conditional.ctx = ctx.ctx;
        rc = rc * 10 + (int)cuGraphAddNode(&cond, capturing, deps, edges, ndeps, &p);
        rc = rc * 10 + (int)cuStreamUpdateCaptureDependencies(ctx.stream[0], &cond, NULL, 1,
                                                              CU_STREAM_SET_CAPTURE_DEPENDENCIES);
        CUgraph body = p.conditional.phGraph_out ? p.conditional.phGraph_out[0] : NULL;
        rc = rc * 10 + (int)cuStreamBeginCaptureToGraph(ctx.stream[1], body, NULL, NULL, 0,
                                                        CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = rc * 10 + (int)launch_on(ctx.scale, ctx.stream[1], k.inside);
        rc = rc * 10 + (int)cuStreamEndCapture(ctx.stream[1], &body_out);
        rc = rc * 10 + (int)launch_on(ctx.axpy, ctx.stream[0], k.after);
        rc = rc * 10 + (int)cuStreamEndCapture(ctx.stream[0], &graph);
        int inst = run_and_release(graph);
        printf("it=%d rc=%d status=%d same_body=%d inst=%d sum=%08x\n", it, rc, (int)status,
               body_out == body, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* A node the program adds to the capture's graph itself, as libraries do
 * that build part of a captured graph by hand: the graph and dependencies
 * from cuStreamGetCaptureInfo, a kernel node added there with
 * cuGraphAddKernelNode, made the capture's dependency with
 * cuStreamUpdateCaptureDependencies, then more work on the stream.
 * `from`: the first iteration that adds it (before: a launch of the same
 * kernel instead), so that a site may have recordings when it starts. */
static int run_added_node(int iters, int from)
{
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL, capturing = NULL;
        CUgraphNode added = NULL;
        const CUgraphNode *deps = NULL;
        size_t ndeps = 0;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        struct three_kernels k;
        three_kernels_init(&k, it);
        int rc = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = rc * 10 + (int)launch_on(ctx.axpy, ctx.stream[0], k.before);
        rc = rc * 10 + (int)cuStreamGetCaptureInfo(ctx.stream[0], &status, NULL, &capturing,
                                                   &deps, NULL, &ndeps);
        CUDA_KERNEL_NODE_PARAMS kp = { .func = ctx.scale, .gridDimX = SC_N / 64, .gridDimY = 1,
                                       .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                                       .blockDimZ = 1, .kernelParams = k.inside };
        if (it >= from) {
            rc = rc * 10 + (int)cuGraphAddKernelNode(&added, capturing, deps, ndeps, &kp);
            rc = rc * 10 + (int)cuStreamUpdateCaptureDependencies(
                               ctx.stream[0], &added, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
        } else {
            rc = rc * 100 + (int)launch_on(ctx.scale, ctx.stream[0], k.inside);
        }
        rc = rc * 10 + (int)launch_on(ctx.axpy, ctx.stream[0], k.after);
        rc = rc * 10 + (int)cuStreamEndCapture(ctx.stream[0], &graph);
        size_t nodes = 0;
        if (graph)
            cuGraphGetNodes(graph, NULL, &nodes);
        int inst = run_and_release(graph);
        printf("it=%d rc=%d nodes=%zu inst=%d sum=%08x\n", it, rc, nodes, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* The capture's graph asked for once every call was made, as cuda.core's
 * GraphBuilder.end_building asks just before it ends (cuda-python's
 * binding passes every output, the graph among them). From `add_from`
 * on, the program then adds a kernel node to that graph itself, makes it
 * the capture's dependency and launches once more. Printed: whether the
 * query's graph is the one the end returns, and whether the capture id
 * stayed the same. */
static int run_query_at_end(int iters, int add_from)
{
    CUstream s = ctx.stream[0];
    for (int it = 0; it < iters; it++) {
        CUgraph graph = NULL, capturing = NULL;
        const CUgraphNode *deps = NULL;
        size_t ndeps = 0;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        cuuint64_t id = 0, id_later = 0;
        struct three_kernels k;
        three_kernels_init(&k, it);
        int rc = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
        rc = rc * 10 + (int)launch_on(ctx.axpy, s, k.before);
        rc = rc * 10 + (int)launch_on(ctx.scale, s, k.inside);
        rc = rc * 10 + (int)launch_on(ctx.axpy, s, k.after);
        rc = rc * 10 + (int)cuStreamGetCaptureInfo(s, &status, &id, &capturing, &deps, NULL, &ndeps);
        size_t nodes_asked = 0;
        if (capturing)
            cuGraphGetNodes(capturing, NULL, &nodes_asked);
        if (it >= add_from) {
            CUgraphNode added = NULL;
            CUDA_KERNEL_NODE_PARAMS kp = { .func = ctx.scale, .gridDimX = SC_N / 64, .gridDimY = 1,
                                           .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                                           .blockDimZ = 1, .kernelParams = k.inside };
            rc = rc * 10 + (int)cuGraphAddKernelNode(&added, capturing, deps, ndeps, &kp);
            rc = rc * 10 + (int)cuStreamUpdateCaptureDependencies(
                               s, &added, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
            rc = rc * 10 + (int)launch_on(ctx.axpy, s, k.after);
        }
        rc = rc * 10 + (int)cuStreamGetCaptureInfo(s, &status, &id_later, NULL, NULL, NULL, NULL);
        rc = rc * 10 + (int)cuStreamEndCapture(s, &graph);
        size_t nodes = 0;
        if (graph)
            cuGraphGetNodes(graph, NULL, &nodes);
        int inst = run_and_release(graph);
        printf("it=%d rc=%d deps=%zu asked_nodes=%zu same_graph=%d same_id=%d nodes=%zu inst=%d "
               "sum=%08x\n", it, rc, ndeps, nodes_asked, graph == capturing, id == id_later, nodes,
               inst, sc_checksum(&ctx));
    }
    return 0;
}

/* cuda.core's GraphBuilder (1.2): begin_building asks for the capture's
 * graph right after the begin and keeps that handle; end_building asks
 * the status, ends (its newest version without wanting the graph:
 * `end_null`) and complete() instantiates the graph it kept. `look` >= 0:
 * after that many launches the program counts the graph's nodes
 * mid-capture, which must be what the driver's graph holds by then.
 * `end_only`: no query at all, an end that wants no graph. */
enum begin_query { QUERY_AT_BEGIN, QUERY_AT_BEGIN_END_NULL, END_NULL_ONLY };

static int run_query_at_begin(int iters, enum begin_query how, int look)
{
    CUstream s = ctx.stream[0];
    for (int it = 0; it < iters; it++) {
        CUgraph kept = NULL, ended = NULL;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        struct three_kernels k;
        three_kernels_init(&k, it);
        size_t nodes_seen = 0;
        int rc = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
        if (how != END_NULL_ONLY)
            rc = rc * 10 + (int)cuStreamGetCaptureInfo(s, &status, NULL, &kept, NULL, NULL, NULL);
        CUfunction fn[3] = { ctx.axpy, ctx.scale, ctx.axpy };
        void **params[3] = { k.before, k.inside, k.after };
        for (int i = 0; i < 3; i++) {
            if (i == look)
                rc = rc * 10 + (int)cuGraphGetNodes(kept, NULL, &nodes_seen);
            rc = rc * 10 + (int)launch_on(fn[i], s, params[i]);
        }
        rc = rc * 10 + (int)cuStreamGetCaptureInfo(s, &status, NULL, NULL, NULL, NULL, NULL);
        rc = rc * 10 + (int)cuStreamEndCapture(s, how == QUERY_AT_BEGIN ? &ended : NULL);
        CUstreamCaptureStatus after = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        rc = rc * 10 + (int)cuStreamIsCapturing(s, &after);
        size_t nodes = 0;
        if (kept)
            cuGraphGetNodes(kept, NULL, &nodes);
        int inst = run_and_release(kept);
        if (how == END_NULL_ONLY) {
            /* Nothing to run: the work is checked by running it plainly. */
            for (int i = 0; i < 3; i++)
                rc = rc * 10 + (int)launch_on(fn[i], s, params[i]);
            cuStreamSynchronize(s);
        }
        printf("it=%d rc=%d status_after=%d same_graph=%d seen=%zu nodes=%zu inst=%d sum=%08x\n",
               it, rc, (int)after, ended == kept, nodes_seen, nodes, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* The lent graph asked for at the begin, and work forked to a second
 * stream and joined back; every other iteration the program counts the
 * graph's nodes while the fork is open. There the switch cannot resume
 * on one stream: the graph is emptied and every call so far replayed
 * into it, and the count must still be the driver's. */
static int run_query_at_begin_fork(int iters)
{
    CUstream s = ctx.stream[0], side = ctx.stream[1];
    for (int it = 0; it < iters; it++) {
        CUgraph kept = NULL, ended = NULL;
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        struct three_kernels k;
        three_kernels_init(&k, it);
        size_t seen = 0, nodes = 0;
        long long rc = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
        rc = rc * 10 + cuStreamGetCaptureInfo(s, &status, NULL, &kept, NULL, NULL, NULL);
        rc = rc * 10 + launch_on(ctx.axpy, s, k.before);
        rc = rc * 10 + cuEventRecord(ctx.fork_event, s);
        rc = rc * 10 + cuStreamWaitEvent(side, ctx.fork_event, 0);
        rc = rc * 10 + launch_on(ctx.scale, side, k.inside);
        if (it % 2)
            rc = rc * 10 + cuGraphGetNodes(kept, NULL, &seen);
        rc = rc * 10 + cuEventRecord(ctx.join_event, side);
        rc = rc * 10 + cuStreamWaitEvent(s, ctx.join_event, 0);
        rc = rc * 10 + launch_on(ctx.axpy, s, k.after);
        rc = rc * 10 + cuStreamEndCapture(s, &ended);
        if (kept)
            cuGraphGetNodes(kept, NULL, &nodes);
        int inst = run_and_release(kept);
        printf("it=%d rc=%lld same_graph=%d seen=%zu nodes=%zu inst=%d sum=%08x\n", it, rc,
               ended == kept, seen, nodes, inst, sc_checksum(&ctx));
    }
    return 0;
}

/* Three sites taking turns in the order A B A C A B ...: with a budget
 * for two executable graphs, the least recently used one goes, whatever
 * its site. */
static int capture_and_run(const struct sc_recipe *r, int it, const char *site)
{
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    int rc = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (int i = 0; i < r->n; i++)
        rc = rc * 2 + (sc_enqueue(&ctx, &r->op[i]) != CUDA_SUCCESS);
    rc = rc * 10 + (int)cuStreamEndCapture(ctx.stream[0], &graph);
    rc = rc * 10 + (int)cuGraphInstantiateWithFlags(&exec, graph, 0);
    rc = rc * 10 + (int)cuGraphLaunch(exec, ctx.stream[0]);
    rc = rc * 10 + (int)cuStreamSynchronize(ctx.stream[0]);
    rc = rc * 10 + (int)cuGraphExecDestroy(exec);
    rc = rc * 10 + (int)cuGraphDestroy(graph);
    printf("it=%d site=%s rc=%d sum=%08x\n", it, site, rc, sc_checksum(&ctx));
    return rc != 0;
}

static __attribute__((noinline)) int lru_site_a(int it)
{
    struct sc_recipe r;
    recipe_params(&r, it);
    return capture_and_run(&r, it, "A") + (int)(it < 0);
}

static __attribute__((noinline)) int lru_site_b(int it)
{
    struct sc_recipe r;
    recipe_params(&r, it + 1);
    return capture_and_run(&r, it, "B") + (int)(it < 0);
}

static __attribute__((noinline)) int lru_site_c(int it)
{
    struct sc_recipe r;
    recipe_params(&r, it + 2);
    return capture_and_run(&r, it, "C") + (int)(it < 0);
}

/* Forty capture sites, each a function of its own, one capture each per
 * iteration: a process of many sites (as a test suite is), whose end
 * event does not fit one log line. */
#define MANY_SITES(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) \
    X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) \
    X(28) X(29) X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39)
#define MANY_SITE_FN(n)                                                  \
    static __attribute__((noinline)) int many_site_##n(int it)          \
    {                                                                    \
        struct sc_recipe r;                                              \
        recipe_params(&r, it + n);                                       \
        return capture_and_run(&r, it, #n) + (int)(it < 0);              \
    }
MANY_SITES(MANY_SITE_FN)
#define MANY_SITE_CALL(n) failures += many_site_##n(it);

static int run_many_sites(int iters)
{
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        MANY_SITES(MANY_SITE_CALL)
    }
    return failures ? 1 : 0;
}

static int run_sites_lru(int iters)
{
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        switch (it % 4) {
        case 1: failures += lru_site_b(it); break;
        case 3: failures += lru_site_c(it); break;
        default: failures += lru_site_a(it); break;
        }
    }
    return failures ? 1 : 0;
}

/* The best a program can do by hand: one executable graph per shape, kept
 * and brought up to date with cuGraphExecUpdate; recap must leave it be.
 * Without `keep`, the same loop as a program without update code writes
 * it (instantiate, destroy): the baseline scripts/bench-standin-cost
 * compares with, line for line. */
static int run_own_updates(int iters, int shapes, int keep)
{
    CUgraphExec by_shape[8] = { NULL };
    struct sc_recipe r;
    for (int it = 0; it < iters; it++) {
        int k = it % shapes;
        CUgraph graph = NULL;
        recipe_mixed(&r, it, 1 + 2 * k);
        int rc = cuStreamBeginCapture(ctx.stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        for (int i = 0; i < r.n; i++)
            rc = rc * 2 + (sc_enqueue(&ctx, &r.op[i]) != CUDA_SUCCESS);
        rc = rc * 10 + (int)cuStreamEndCapture(ctx.stream[0], &graph);
        if (by_shape[k]) {
            CUgraphExecUpdateResultInfo info;
            rc = rc * 10 + (int)cuGraphExecUpdate(by_shape[k], graph, &info);
        } else {
            rc = rc * 10 + (int)cuGraphInstantiateWithFlags(&by_shape[k], graph, 0);
        }
        rc = rc * 10 + (int)cuGraphLaunch(by_shape[k], ctx.stream[0]);
        rc = rc * 10 + (int)cuStreamSynchronize(ctx.stream[0]);
        if (!keep) {
            rc = rc * 10 + (int)cuGraphExecDestroy(by_shape[k]);
            by_shape[k] = NULL;
        }
        rc = rc * 10 + (int)cuGraphDestroy(graph);
        printf("it=%d shape=%d rc=%d sum=%08x\n", it, k, rc, sc_checksum(&ctx));
    }
    for (int k = 0; k < shapes; k++)
        if (by_shape[k])
            printf("destroy %d rc=%d\n", k, (int)cuGraphExecDestroy(by_shape[k]));
    return 0;
}

/* --- many threads at many sites ------------------------------------------------------ */

struct worker {
    int id, iters;
    struct sc_context c;
    uint32_t sums[4];
    int failures;
};

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* Four distinct call sites: the stacks above cuStreamBeginCapture differ. */
#define SITE_FN(k)                                                                    \
    static __attribute__((noinline)) int capture_at_site_##k(struct worker *w, int it) \
    {                                                                                 \
        struct sc_recipe r;                                                           \
        struct sc_options o = { .mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL };        \
        CUgraph graph = NULL, none = NULL;                                            \
        CUgraphExec exec = NULL;                                                      \
        int bad = 0;                                                                  \
        (void)none;                                                                   \
        recipe_shape(&r, it, k + 1);                                                  \
        r.op[0].a = (float)(w->id * 10 + it % 7);                                     \
        bad |= cuStreamBeginCapture(w->c.stream[0], o.mode) != 0;                     \
        for (int i = 0; i < r.n; i++)                                                 \
            bad |= sc_enqueue(&w->c, &r.op[i]) != 0;                                  \
        bad |= cuStreamEndCapture(w->c.stream[0], &graph) != 0;                       \
        bad |= cuGraphInstantiateWithFlags(&exec, graph, 0) != 0;                     \
        bad |= cuGraphLaunch(exec, w->c.stream[0]) != 0;                              \
        bad |= cuStreamSynchronize(w->c.stream[0]) != 0;                              \
        bad |= cuGraphExecDestroy(exec) != 0;                                         \
        bad |= cuGraphDestroy(graph) != 0;                                            \
        return bad;                                                                   \
    }
SITE_FN(0)
SITE_FN(1)
SITE_FN(2)
SITE_FN(3)

/* A worker thread's context: the program's module and context, its own
 * streams and buffers. */
static void share_context(struct sc_context *c)
{
    cuCtxSetCurrent(ctx.ctx);
    pthread_mutex_lock(&setup_lock);
    *c = ctx;
    for (int i = 0; i < 2; i++)
        cuStreamCreate(&c->stream[i], CU_STREAM_NON_BLOCKING);
    for (int i = 0; i < SC_BUFFERS; i++)
        cuMemAlloc(&c->buf[i], SC_N * sizeof(float));
    pthread_mutex_unlock(&setup_lock);
}

static void *worker_body(void *p)
{
    struct worker *w = p;
    share_context(&w->c);
    for (int site = 0; site < 4; site++) {
        sc_reset_buffers(&w->c);
        for (int it = 0; it < w->iters; it++) {
            switch (site) {
            case 0: w->failures += capture_at_site_0(w, it); break;
            case 1: w->failures += capture_at_site_1(w, it); break;
            case 2: w->failures += capture_at_site_2(w, it); break;
            default: w->failures += capture_at_site_3(w, it); break;
            }
        }
        w->sums[site] = sc_checksum(&w->c);
    }
    return NULL;
}

static int run_threads(int iters)
{
    enum { WORKERS = 8 };
    static struct worker w[WORKERS];
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i].id = i;
        w[i].iters = iters;
        pthread_create(&t[i], NULL, worker_body, &w[i]);
    }
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < WORKERS; i++)
        printf("worker=%d failures=%d sums=%08x,%08x,%08x,%08x\n", i, w[i].failures, w[i].sums[0],
               w[i].sums[1], w[i].sums[2], w[i].sums[3]);
    return 0;
}

/* --- several threads, several shapes, one capture site ------------------------------- */

/* Four threads capture through one function (one site), each on its own
 * streams and buffers, threads 0 and 1 a chain of 20 kernels, threads 2
 * and 3 one of 25, every scalar new each iteration; each iteration
 * captures, instantiates, launches and destroys without waiting for the
 * launch (every tenth iteration the thread waits, folds a checksum of its
 * buffers into its digest and resets them). Pauses of pseudo-random length
 * (a per-thread xorshift, seeded by the thread's number) between and
 * inside the captures interleave the threads irregularly; what each
 * thread computes depends only on its own iterations, so the output is
 * the same however they interleave. */
struct site_worker {
    int id, iters, kernels;
    unsigned rng;
    struct sc_context c;
    uint32_t digest;
    int failures;
};

static pthread_barrier_t site_workers_ready;

static void pause_randomly(unsigned *state)
{
    unsigned x = *state;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    *state = x;
    if (x % 4)                      /* one call in four goes straight on */
        usleep(x % 300);
}

/* The one site: the stack above cuStreamBeginCapture is the same for
 * every thread. */
static __attribute__((noinline)) int capture_at_the_one_site(struct site_worker *w, int it)
{
    struct sc_recipe r;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    int bad = 0;
    recipe_chain(&r, it, w->kernels - 2);
    r.op[0].a = (float)(w->id * 10 + it % 7);
    bad |= cuStreamBeginCapture(w->c.stream[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != 0;
    for (int i = 0; i < r.n; i++) {
        if (i % 8 == 5)
            pause_randomly(&w->rng);
        bad |= sc_enqueue(&w->c, &r.op[i]) != 0;
    }
    bad |= cuStreamEndCapture(w->c.stream[0], &graph) != 0;
    bad |= cuGraphInstantiateWithFlags(&exec, graph, 0) != 0;
    bad |= cuGraphLaunch(exec, w->c.stream[0]) != 0;     /* in flight while destroyed */
    bad |= cuGraphExecDestroy(exec) != 0;
    bad |= cuGraphDestroy(graph) != 0;
    return bad + (int)(it < 0);
}

static void fold_checksum(struct site_worker *w)
{
    w->failures += cuStreamSynchronize(w->c.stream[0]) != CUDA_SUCCESS;
    w->digest = (w->digest ^ sc_checksum(&w->c)) * 16777619u;
    sc_reset_buffers(&w->c);
}

static void *site_worker_body(void *p)
{
    struct site_worker *w = p;
    share_context(&w->c);
    sc_reset_buffers(&w->c);
    w->digest = 2166136261u;
    pthread_barrier_wait(&site_workers_ready);
    for (int it = 0; it < w->iters; it++) {
        pause_randomly(&w->rng);
        w->failures += capture_at_the_one_site(w, it);
        if (it % 10 == 9)
            fold_checksum(w);
    }
    fold_checksum(w);
    return NULL;
}

static int run_threads_one_site(int iters)
{
    enum { WORKERS = 4 };
    static struct site_worker w[WORKERS];
    pthread_t t[WORKERS];
    pthread_barrier_init(&site_workers_ready, NULL, WORKERS);
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (struct site_worker){ .id = i, .iters = iters, .kernels = i < 2 ? 20 : 25,
                                     .rng = 2463534242u + 7919u * (unsigned)i };
        pthread_create(&t[i], NULL, site_worker_body, &w[i]);
    }
    int failures = 0;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < WORKERS; i++) {
        printf("thread=%d kernels=%d iterations=%d failures=%d digest=%08x\n", i, w[i].kernels,
               w[i].iters, w[i].failures, w[i].digest);
        failures += w[i].failures;
    }
    pthread_barrier_destroy(&site_workers_ready);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "params";
    int iters = argc > 2 ? atoi(argv[2]) : 12;
    struct sc_options o = { .mode = CU_STREAM_CAPTURE_MODE_GLOBAL };
    int rc;

    sc_setup(&ctx);
    if (!strcmp(name, "mode_thread_local"))
        o.mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    else if (!strcmp(name, "mode_relaxed"))
        o.mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!strcmp(name, "keep_graph"))
        o.keep_graph_until_next = 1;
    /* SCENARIO_KEEP_EVERY_GRAPH=1: any loop scenario, its graphs never
     * destroyed (as PyTorch in debug mode). */
    if (!strncmp(name, "keep_every_graph", 16) || getenv("SCENARIO_KEEP_EVERY_GRAPH"))
        o.keep_every_graph = 1;
    /* SCENARIO_COUNT_NODES=1: any loop scenario counts its graph's nodes
     * after each end, as PyTorch's capture_end does. */
    if (getenv("SCENARIO_COUNT_NODES"))
        o.count_nodes = 1;

    if (!strcmp(name, "cross_thread"))
        rc = run_cross_thread(iters);
    else if (!strcmp(name, "ptsz_cross_thread"))
        rc = run_ptsz_cross_thread(iters);
    else if (!strcmp(name, "exec_node_set") || !strcmp(name, "exec_node_set_keep") ||
             !strcmp(name, "exec_node_set_late"))
        rc = run_exec_node_set(iters, !strcmp(name, "exec_node_set_keep"),
                               !strcmp(name, "exec_node_set_late") ? 3 : 0);
    else if (!strcmp(name, "broken") || !strcmp(name, "broken_query") ||
             !strcmp(name, "query_then_broken"))
        rc = run_broken(iters, !strcmp(name, "broken_query") ? 1 : !strcmp(name, "broken") ? 0 : 2);
    else if (!strcmp(name, "double_destroy"))
        rc = run_double_destroy(iters);
    else if (!strcmp(name, "mutate"))
        rc = run_edited(iters, "edit", edit_kernel_argument);
    else if (!strcmp(name, "grown"))
        rc = run_edited(iters, "add", grow_by_a_kernel);
    else if (!strcmp(name, "inspect"))
        rc = run_inspect(iters);
    else if (!strcmp(name, "oom"))
        rc = run_oom(iters);
    else if (!strcmp(name, "user_objects"))
        rc = run_user_objects(iters);
    else if (!strcmp(name, "alloc_nodes"))
        rc = run_alloc_nodes(iters);
    else if (!strcmp(name, "conditional"))
        rc = run_conditional(iters);
    else if (!strcmp(name, "added_node"))
        rc = run_added_node(iters, 0);
    else if (!strcmp(name, "added_node_late"))
        rc = run_added_node(iters, 6);
    else if (!strcmp(name, "query_at_end"))
        rc = run_query_at_end(iters, iters);
    else if (!strcmp(name, "query_at_end_add"))
        rc = run_query_at_end(iters, 6);
    else if (!strcmp(name, "query_at_begin"))
        rc = run_query_at_begin(iters, QUERY_AT_BEGIN, -1);
    else if (!strcmp(name, "query_at_begin_end_null"))
        rc = run_query_at_begin(iters, QUERY_AT_BEGIN_END_NULL, -1);
    else if (!strcmp(name, "query_at_begin_look"))
        rc = run_query_at_begin(iters, QUERY_AT_BEGIN, 1);
    else if (!strcmp(name, "query_at_begin_fork"))
        rc = run_query_at_begin_fork(iters);
    else if (!strcmp(name, "end_null"))
        rc = run_query_at_begin(iters, END_NULL_ONLY, -1);
    else if (!strcmp(name, "inflight") || !strcmp(name, "inflight_fork"))
        rc = run_inflight(iters, !strcmp(name, "inflight_fork"));
    else if (!strcmp(name, "threads"))
        rc = run_threads(iters);
    else if (!strcmp(name, "threads_one_site"))
        rc = run_threads_one_site(iters);
    else if (!strcmp(name, "free_in_capture"))
        rc = run_free_in_capture(iters);
    else if (!strcmp(name, "pinned") || !strcmp(name, "pinned_pressure"))
        rc = run_pinned(iters, !strcmp(name, "pinned_pressure"));
    else if (!strcmp(name, "pool_batches"))
        rc = run_pool_batches(iters);
    else if (!strcmp(name, "off_capture_meets_free"))
        rc = run_off_capture_meets_free(iters);
    else if (!strcmp(name, "to_graph_capture_meets_free"))
        rc = (off_site_to_graph = 1, run_off_capture_meets_free(iters));
    else if (!strcmp(name, "random")) {
        /* SCENARIO_SEED: which program (random_program.c). */
        const char *seed = getenv("SCENARIO_SEED");
        rc = sc_run_random(&ctx, iters, seed ? (unsigned)strtoul(seed, NULL, 10) : 1u);
    } else if (!strcmp(name, "pool_two_sites") || !strcmp(name, "pool_two_sites_third"))
        rc = run_pool_two_sites(iters, !strcmp(name, "pool_two_sites_third"));
    else if (!strncmp(name, "pool", 4))
        rc = run_pool(iters, !strcmp(name, "pool_pressure"), !strncmp(name, "pool_keep_graphs", 16),
                      !strcmp(name, "pool_meminfo"), !strcmp(name, "pool_before"),
                      !strcmp(name, "pool_keep_graphs_odd") ? 1 :
                      !strcmp(name, "pool_keep_graphs_kinds") ? 2 :
                      !strcmp(name, "pool_keep_graphs_turns") ? 3 :
                      !strcmp(name, "pool_keep_graphs_late") ? 4 : 0);
    else if (!strcmp(name, "sweep") || !strcmp(name, "sweep_late") ||
             !strcmp(name, "sweep_kept"))
        rc = run_sweep(iters, !strcmp(name, "sweep_late") ? SWEEP_LATE :
                              !strcmp(name, "sweep_kept") ? SWEEP_GRAPHS_KEPT : SWEEP_AT_ONCE);
    else if (!strcmp(name, "events_fork_join"))
        rc = run_temporary_events(iters, 0, 0);
    else if (!strcmp(name, "events_other_thread"))
        rc = run_temporary_events(iters, 1, 0);
    else if (!strcmp(name, "events_other_thread_alloc"))
        rc = run_temporary_events(iters, 1, 1);
    else if (!strcmp(name, "sites_lru"))
        rc = run_sites_lru(iters);
    else if (!strcmp(name, "many_sites"))
        rc = run_many_sites(iters);
    else if (!strcmp(name, "external_events"))
        rc = run_external_events(iters);
    else if (!strcmp(name, "ctx_teardown") || !strcmp(name, "ctx_teardown_primary"))
        rc = run_ctx_teardown(iters, !strcmp(name, "ctx_teardown_primary"));
    else if (!strcmp(name, "user_objects_stream_gone"))
        rc = run_user_objects_stream_gone(iters);
    else if (!strcmp(name, "code_unload"))
        rc = run_code_unload(iters);
    else if (!strcmp(name, "own_updates"))
        rc = run_own_updates(iters, 3, 1);
    else if (!strcmp(name, "own_updates1"))
        rc = run_own_updates(iters, 1, 1);
    else if (!strcmp(name, "own_plain1"))
        rc = run_own_updates(iters, 1, 0);
    else
        rc = run_loop(name, iters, &o);
    if (getenv("SCENARIO_DRAIN")) {
        /* An allocation no device can satisfy: under recap it makes recap
         * release everything it caches, so the live objects counted next
         * are exactly the ones leaked. Its result is not part of the output. */
        CUdeviceptr huge = 0;
        if (cuMemAlloc(&huge, (size_t)1 << 46) == CUDA_SUCCESS)
            cuMemFree(huge);
        /* The same for pinned host memory, which recap keeps apart. */
        void *pinned = NULL;
        if (cuMemHostAlloc(&pinned, (size_t)1 << 46, 0) == CUDA_SUCCESS)
            cuMemFreeHost(pinned);
    }
    if (!strncmp(name, "user_objects", 12) || !strncmp(name, "inflight", 8))
        report_user_objects();
    sc_write_stats();
    return rc;
}
