/*
 * random_program.c - scenario "random": a driver-API program drawn from a
 * seed, so that recap meets programs nobody wrote for it.
 *
 * Three capture sites (a function each) take turns in an order the seed
 * picks (round robin, or at random). Each site has a recipe of its own
 * (kernels of four functions, memsets, copies, host functions, a fork to
 * a second stream and its join) and a way of its own to capture it: a
 * capture mode, into a new graph or one the program made
 * (cuStreamBeginCaptureToGraph), an instantiation variant, a pool segment allocated inside
 * the capture in relaxed mode (as PyTorch's caching allocator does), a
 * segment allocated just before the begin, a query of the capture's info
 * part way. Iteration by iteration the recipe's scalars change, and now
 * and then a kernel is swapped for another (an odd step), an operation
 * is added (a new topology) or the recipe is drawn anew for good (a new
 * shape). The program does with its graphs what programs do: destroys
 * them at once, one iteration late or never; instantiates a graph twice,
 * or not at all; launches an executable graph zero, one or two times, and
 * keeps one to launch again iterations later.
 *
 * Every call's result and a checksum of every buffer go to stdout, one
 * line per iteration, so that a run under recap compares byte for byte
 * with a run without it. What the program does is valid CUDA: no stream
 * works on a buffer another runs on at the same time, no memory is read
 * before it is written, and no executable graph is launched after the
 * memory it names was freed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"

#define RP_SITES 3

struct rp_rng {
    uint64_t state;
};

static uint32_t rp_next(struct rp_rng *r)
{
    /* xorshift64*: enough for drawing programs, and the same everywhere. */
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return (uint32_t)((r->state * 2685821657736338717ull) >> 32);
}

static int rp_below(struct rp_rng *r, int n)
{
    return (int)(rp_next(r) % (uint32_t)n);
}

static int rp_chance(struct rp_rng *r, int percent)
{
    return rp_below(r, 100) < percent;
}

struct rp_site {
    struct sc_recipe recipe;
    CUstreamCaptureMode mode;
    int instantiate_variant;    /* 0 WithFlags, 1 WithParams, 2 WithParams + upload */
    int pool;                   /* a segment allocated inside each capture: buffer 3 */
    int before;                 /* a segment allocated just before each begin */
    int query_at;               /* the operation before which the capture is queried; -1 none */
    int scratch;                /* a scratch buffer allocated and freed in the graph (memory nodes) */
    int to_graph;               /* captured into a graph of the program's own (BeginCaptureToGraph) */
    CUgraphExec held;           /* an executable graph kept to launch again later */
    int held_until;             /* the iteration that launches and destroys it */
};

static const enum sc_op_type kernel_types[] = { SC_SCALE, SC_SHIFT, SC_MIRROR };

static float rp_scalar(struct rp_rng *r)
{
    return (float)(rp_below(r, 17) - 8) / 8.0f;
}

static void rp_add_op(struct rp_rng *r, struct sc_recipe *recipe, int stream)
{
    int x = rp_below(r, SC_BUFFERS), y = rp_below(r, SC_BUFFERS);
    switch (rp_below(r, 10)) {
    case 0:
    case 1:
        sc_add(recipe, SC_AXPY, rp_scalar(r), x, y == x ? (y + 1) % SC_BUFFERS : y, stream);
        break;
    case 2:
        sc_add(recipe, SC_MEMSET, rp_scalar(r), 0, y, stream);
        break;
    case 3:
        sc_add(recipe, SC_COPY, 0.0f, x, y == x ? (y + 1) % SC_BUFFERS : y, stream);
        break;
    case 4:
        sc_add(recipe, stream ? SC_SCALE : SC_HOST, rp_scalar(r), x, 0, stream);
        break;
    case 5:
        sc_add(recipe, SC_EXTRA_LAUNCH, rp_scalar(r), x, 0, stream);
        break;
    default:
        sc_add(recipe, kernel_types[rp_below(r, 3)], rp_scalar(r), x, 0, stream);
        break;
    }
}

/* A recipe of 1 to 10 operations, with a fork to stream 1 and its join
 * now and then; stream 0 enqueues nothing between the two, so no two
 * streams ever touch a buffer at once. */
static void rp_draw_recipe(struct rp_rng *r, struct sc_recipe *recipe, int pool)
{
    recipe->n = 0;
    if (pool)   /* the pool's segment is new memory: written before anything reads it */
        sc_add(recipe, SC_MEMSET, rp_scalar(r), 0, 3, 0);
    int ops = 1 + rp_below(r, 10);
    for (int i = 0; i < ops; i++) {
        if (rp_chance(r, 12)) {
            sc_add(recipe, SC_FORK, 0.0f, 0, 0, 0);
            for (int k = 1 + rp_below(r, 3); k > 0; k--)
                rp_add_op(r, recipe, 1);
            sc_add(recipe, SC_JOIN, 0.0f, 0, 0, 0);
        } else {
            rp_add_op(r, recipe, 0);
        }
    }
}

static void rp_draw_site(struct rp_rng *r, struct rp_site *s)
{
    static const CUstreamCaptureMode modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                 CU_STREAM_CAPTURE_MODE_RELAXED };
    memset(s, 0, sizeof *s);
    s->mode = modes[rp_below(r, 3)];
    s->instantiate_variant = rp_below(r, 3);
    s->pool = rp_chance(r, 50);
    s->before = rp_chance(r, 40);
    s->query_at = rp_chance(r, 25) ? 0 : -1;
    s->scratch = rp_chance(r, 15);
    rp_draw_recipe(r, &s->recipe, s->pool);
    if (s->query_at >= 0)
        s->query_at = rp_below(r, s->recipe.n + 1);
    s->to_graph = rp_chance(r, 12);
}

/* This iteration's recipe: the site's, its scalars moved, and now and
 * then changed for this once or for good. */
static void rp_vary(struct rp_rng *r, struct rp_site *s, struct sc_recipe *out, int it)
{
    int roll = rp_below(r, 100);
    if (roll < 5) {
        rp_draw_recipe(r, &s->recipe, s->pool);             /* a new shape, for good */
        if (s->query_at >= 0)
            s->query_at = rp_below(r, s->recipe.n + 1);
    } else if (roll < 12 && s->recipe.n < SC_MAX_OPS - 4) {
        rp_add_op(r, &s->recipe, 0);                        /* a new topology, for good */
    }
    *out = s->recipe;
    for (int i = 0; i < out->n; i++)
        if (out->op[i].type != SC_COPY && out->op[i].type != SC_FORK && out->op[i].type != SC_JOIN)
            out->op[i].a += (float)(it % 5) * 0.125f;
    if (rp_chance(r, 15)) {                                 /* an odd step: another kernel */
        for (int i = 0; i < out->n; i++) {
            enum sc_op_type t = out->op[i].type;
            if (t == SC_SCALE || t == SC_SHIFT || t == SC_MIRROR) {
                int was = t == SC_SCALE ? 0 : t == SC_SHIFT ? 1 : 2;
                out->op[i].type = kernel_types[(was + 1 + rp_below(r, 2)) % 3];
                break;
            }
        }
    }
}

/* SCENARIO_KEPT_GRAPHS_LEFT_ALONE=1: a graph kept from an earlier
 * iteration is never instantiated again, only destroyed. With copies of
 * kept graphs on (RECAP_COPY_HELD) such a graph may be broken by driver
 * 580 (docs/decisions.md, "Copies stay off"), which the stand-in models. */
static int rp_kept_graphs_left_alone(void)
{
    const char *v = getenv("SCENARIO_KEPT_GRAPHS_LEFT_ALONE");
    return v && *v && strcmp(v, "0") != 0;
}

static CUresult rp_instantiate(CUgraphExec *exec, CUgraph graph, int variant, CUstream stream)
{
    if (variant == 0)
        return cuGraphInstantiateWithFlags(exec, graph, 0);
    CUDA_GRAPH_INSTANTIATE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.flags = variant == 2 ? CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD : 0;
    p.hUploadStream = stream;
    CUresult r = cuGraphInstantiateWithParams(exec, graph, &p);
    if (r == CUDA_SUCCESS && p.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS)
        return CUDA_ERROR_UNKNOWN;
    return r;
}

/* Where this thread's lines go: stdout, or its worker's own buffer where
 * workers run at once (SCENARIO_THREADS), printed in order at the end. */
static __thread FILE *rp_out;

#define RP_PRINT(...) fprintf(rp_out ? rp_out : stdout, __VA_ARGS__)

struct rp_line {
    char text[SC_MAX_OPS * 4 + 256];
    int len, failed;
};

static void rp_note_call(struct rp_line *l, CUresult rc, const char *call)
{
    /* SCENARIO_TRACE=1: each result with the call that gave it. */
    static int trace = -1;
    if (trace < 0)
        trace = getenv("SCENARIO_TRACE") != NULL;
    l->failed |= rc != CUDA_SUCCESS;
    l->len += snprintf(l->text + l->len, sizeof l->text - (size_t)l->len, trace ? "%d<%.24s>," : "%d,",
                       (int)rc, call);
}

#define rp_note(l, call) rp_note_call((l), (call), #call)

/* The first kernel node `graph` lists, and its parameters (its index in
 * *index); 0 where it has none. */
static int rp_first_kernel(struct rp_line *l, CUgraph graph, CUgraphNode *node, size_t *index,
                           CUDA_KERNEL_NODE_PARAMS *p)
{
    CUgraphNode nodes[SC_MAX_OPS + 8];
    size_t n = sizeof nodes / sizeof nodes[0];
    rp_note(l, cuGraphGetNodes(graph, nodes, &n));
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType type;
        if (cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        memset(p, 0, sizeof *p);
        rp_note(l, cuGraphKernelNodeGetParams(nodes[i], p));
        *node = nodes[i];
        *index = i;
        return 1;
    }
    return 0;
}

/* The program edits its graph before instantiating it: the first kernel
 * node it lists gets a smaller grid (fewer elements computed), its
 * arguments kept. */
static void rp_edit(struct rp_line *l, CUgraph graph, int it)
{
    CUgraphNode node;
    size_t i;
    CUDA_KERNEL_NODE_PARAMS p;
    if (!rp_first_kernel(l, graph, &node, &i, &p))
        return;
    p.gridDimX = 1 + (unsigned)it % (SC_N / 64);
    rp_note(l, cuGraphKernelNodeSetParams(node, &p));
    l->len += snprintf(l->text + l->len, sizeof l->text - (size_t)l->len, "e%zu,", i);
}

/* One capture at a site and what the program then does with its graph. */
static int rp_step(struct sc_context *c, struct rp_rng *r, struct rp_site *s, int it,
                   CUgraph *late, int site_index)
{
    struct rp_line l = { .len = 0 };
    struct sc_recipe recipe;
    rp_vary(r, s, &recipe, it);
    CUdeviceptr before = 0, pool = 0, kept_buf3 = c->buf[3];
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;

    if (s->before)
        rp_note(&l, cuMemAlloc(&before, (size_t)(1 + it % 2) * SC_N * sizeof(float)));
    CUgraph own = NULL;         /* the graph a capture into the program's own graph fills */
    if (s->to_graph) {
        rp_note(&l, cuGraphCreate(&own, 0));
        rp_note(&l, cuStreamBeginCaptureToGraph(c->stream[0], own, NULL, NULL, 0, s->mode));
    } else {
        rp_note(&l, cuStreamBeginCapture(c->stream[0], s->mode));
    }
    if (before)
        rp_note(&l, cuMemsetD32Async(before, (unsigned)it, SC_N, c->stream[0]));
    if (s->pool) {
        rp_note(&l, sc_alloc_relaxed(&pool, (size_t)(1 + (it / 7) % 2) * SC_N * sizeof(float)));
        if (pool)
            c->buf[3] = pool;
    }
    /* Now and then a call the driver refuses inside a capture (the
     * capturing stream synchronised): the capture is invalidated, and
     * every later call into it and its end say so. Not in a recipe that
     * forks: the second stream, no longer joined to a capture, would run
     * its work at once, on memory the capture never wrote. */
    int forks = 0;
    for (int i = 0; i < recipe.n; i++)
        forks |= recipe.op[i].type == SC_FORK;
    int refused_at = rp_chance(r, 3) && !forks ? rp_below(r, recipe.n + 1) : -1;
    for (int i = 0; i <= recipe.n; i++) {
        if (i == refused_at)
            rp_note(&l, cuStreamSynchronize(c->stream[0]));
        if (i == s->query_at) {
            CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
            CUgraph capturing = NULL;
            const CUgraphNode *deps = NULL;
            size_t ndeps = 0;
            rp_note(&l, cuStreamGetCaptureInfo(c->stream[0], &status, NULL, &capturing, &deps,
                                               NULL, &ndeps));
            l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "q%d:%d:%zu,",
                              (int)status, capturing != NULL, ndeps);
        }
        if (i < recipe.n)
            rp_note(&l, sc_enqueue(c, &recipe.op[i]));
    }
    if (s->scratch) {
        /* Memory nodes: a scratch buffer the graph allocates, fills,
         * copies out and frees on each launch. */
        CUdeviceptr scratch = 0;
        rp_note(&l, cuMemAllocAsync(&scratch, SC_N * sizeof(float), c->stream[0]));
        if (scratch) {
            rp_note(&l, cuMemsetD32Async(scratch, (unsigned)it * 3u, SC_N, c->stream[0]));
            rp_note(&l, cuMemcpyDtoDAsync(c->buf[2], scratch, SC_N * sizeof(float) / 2,
                                          c->stream[0]));
            rp_note(&l, cuMemFreeAsync(scratch, c->stream[0]));
        }
    }
    rp_note(&l, cuStreamEndCapture(c->stream[0], &graph));
    if (own && graph == NULL)
        rp_note(&l, cuGraphDestroy(own));   /* the end failed: the graph is still the program's */
    if (graph && rp_chance(r, 8))
        rp_edit(&l, graph, it);

    /* What the program does with its graph. */
    if (graph && rp_chance(r, 30)) {                        /* PyTorch counts them */
        size_t nodes = 0;
        rp_note(&l, cuGraphGetNodes(graph, NULL, &nodes));
        l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "n%zu,", nodes);
    }
    int roll = rp_below(r, 100);
    if (graph && roll >= 4) {
        rp_note(&l, rp_instantiate(&exec, graph, s->instantiate_variant, c->stream[0]));
        if (exec && roll < 10) {                            /* a second executable graph */
            CUgraphExec twin = NULL;
            rp_note(&l, cuGraphInstantiateWithFlags(&twin, graph, 0));
            if (twin) {
                rp_note(&l, cuGraphLaunch(twin, c->stream[0]));
                rp_note(&l, cuGraphExecDestroy(twin));
            }
        }
    }
    if (graph && exec && rp_chance(r, 6)) {
        /* The program changes its executable graph itself: the first
         * kernel node it lists runs a smaller grid in this one. */
        CUgraphNode node;
        size_t i;
        CUDA_KERNEL_NODE_PARAMS p;
        if (rp_first_kernel(&l, graph, &node, &i, &p)) {
            p.gridDimX = 1 + (unsigned)(it * 3) % (SC_N / 64);
            rp_note(&l, cuGraphExecKernelNodeSetParams(exec, node, &p));
            l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "x%zu,", i);
        }
    }
    if (graph && rp_chance(r, 5)) {
        /* A copy of the graph, run once and let go. */
        CUgraph clone = NULL;
        CUgraphExec of_clone = NULL;
        rp_note(&l, cuGraphClone(&clone, graph));
        if (clone)
            rp_note(&l, cuGraphInstantiateWithFlags(&of_clone, clone, 0));
        if (of_clone) {
            rp_note(&l, cuGraphLaunch(of_clone, c->stream[0]));
            rp_note(&l, cuGraphExecDestroy(of_clone));
        }
        if (clone)
            rp_note(&l, cuGraphDestroy(clone));
    }
    if (exec && s->held && !pool && !before && rp_chance(r, 25)) {
        /* A program updating the executable graph it keeps itself: the
         * driver's verdict, whichever it is, must be the same under recap. */
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        rp_note(&l, cuGraphExecUpdate(s->held, graph, &info));
        l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "u%d,", (int)info.result);
    }
    if (graph && exec && rp_chance(r, 30)) {
        rp_note(&l, cuGraphDestroy(graph));                 /* PyTorch's order: before launching */
        graph = NULL;
    }
    int launches = exec ? (rp_chance(r, 8) ? 0 : rp_chance(r, 15) ? 2 : 1) : 0;
    for (int k = 0; k < launches; k++)
        rp_note(&l, cuGraphLaunch(exec, c->stream[0]));
    rp_note(&l, cuStreamSynchronize(c->stream[0]));
    if (!launches)
        c->buf[3] = kept_buf3;      /* the pool was never written: not read either */
    l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "sum=%08x,",
                      sc_checksum(c));

    /* An executable graph that names no memory of this step may be kept
     * and launched again later; one that does is destroyed before its
     * memory is freed. */
    if (exec && !pool && !before && !s->held && rp_chance(r, 20)) {
        s->held = exec;
        s->held_until = it + 1 + rp_below(r, 4);
    } else if (exec) {
        rp_note(&l, cuGraphExecDestroy(exec));
    }
    if (graph) {
        int fate = rp_below(r, 100);
        if (fate < 15 && !pool && !before) {
            if (*late && rp_chance(r, 50) && !rp_kept_graphs_left_alone()) {
                /* The one kept from before, run again. */
                CUgraphExec again = NULL;
                rp_note(&l, cuGraphInstantiateWithFlags(&again, *late, 0));
                if (again) {
                    rp_note(&l, cuGraphLaunch(again, c->stream[0]));
                    rp_note(&l, cuStreamSynchronize(c->stream[0]));
                    l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "late=%08x,",
                                      sc_checksum(c));
                    rp_note(&l, cuGraphExecDestroy(again));
                }
            }
            if (*late)
                rp_note(&l, cuGraphDestroy(*late));         /* the one kept from before */
            *late = graph;
        } else if (fate < 20) {
            /* Kept for good: left to the driver's teardown at exit. */
        } else {
            rp_note(&l, cuGraphDestroy(graph));
        }
    }
    c->buf[3] = kept_buf3;
    if (pool)
        rp_note(&l, cuMemFree(pool));
    if (before)
        rp_note(&l, cuMemFree(before));
    RP_PRINT("it=%d s%d %s\n", it, site_index, l.text);
    return l.failed;
}

/* An executable graph kept earlier, launched again now and destroyed. */
static int rp_launch_held(struct sc_context *c, struct rp_site *s, int it)
{
    struct rp_line l = { .len = 0 };
    rp_note(&l, cuGraphLaunch(s->held, c->stream[1]));
    rp_note(&l, cuStreamSynchronize(c->stream[1]));
    l.len += snprintf(l.text + l.len, sizeof l.text - (size_t)l.len, "sum=%08x,", sc_checksum(c));
    rp_note(&l, cuGraphExecDestroy(s->held));
    s->held = NULL;
    RP_PRINT("it=%d held %s\n", it, l.text);
    return l.failed;
}

/* One function per site: each is a capture site of its own to recap
 * (each passes its own index, so that the compiler cannot fold them into
 * one, and keeps its frame). */
static __attribute__((noinline)) int rp_site_0(struct sc_context *c, struct rp_rng *r,
                                               struct rp_site *s, int it, CUgraph *late)
{
    int failed = rp_step(c, r, s, it, late, 0);
    __asm__ volatile("" : : "r"(failed));   /* not a tail call: this frame stays */
    return failed;
}

static __attribute__((noinline)) int rp_site_1(struct sc_context *c, struct rp_rng *r,
                                               struct rp_site *s, int it, CUgraph *late)
{
    int failed = rp_step(c, r, s, it, late, 1);
    __asm__ volatile("" : : "r"(failed));   /* not a tail call: this frame stays */
    return failed;
}

static __attribute__((noinline)) int rp_site_2(struct sc_context *c, struct rp_rng *r,
                                               struct rp_site *s, int it, CUgraph *late)
{
    int failed = rp_step(c, r, s, it, late, 2);
    __asm__ volatile("" : : "r"(failed));   /* not a tail call: this frame stays */
    return failed;
}

typedef int rp_site_fn(struct sc_context *, struct rp_rng *, struct rp_site *, int, CUgraph *);

/* A step taken on a thread of its own, the program's thread waiting for
 * it: what the driver keeps per thread (capture modes, recap's per-thread
 * state) changes hands between steps. */
struct rp_thread_step {
    rp_site_fn *fn;
    struct sc_context *c;
    struct rp_rng *r;
    struct rp_site *s;
    int it, failed;
    CUgraph *late;
    FILE *out;
};

static void *rp_thread_body(void *p)
{
    struct rp_thread_step *t = p;
    rp_out = t->out;
    if (cuCtxSetCurrent(t->c->ctx) != CUDA_SUCCESS) {
        t->failed = 1;
        return NULL;
    }
    t->failed = t->fn(t->c, t->r, t->s, t->it, t->late);
    return NULL;
}

/* One program: its own sites, graphs and lines, on its own streams and
 * buffers where several run at once. */
static int rp_run(struct sc_context *c, int iters, unsigned seed, int concurrent)
{
    rp_site_fn *const site_fn[RP_SITES] = { rp_site_0, rp_site_1, rp_site_2 };
    /* SCENARIO_PRESSURE=1: every seventh step begins with an allocation
     * no device can satisfy, as a program near its limits meets. */
    const char *pressure_text = getenv("SCENARIO_PRESSURE");
    int pressure = pressure_text && *pressure_text && strcmp(pressure_text, "0") != 0;
    struct rp_rng r = { .state = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0xbf58476d1ce4e5b9ull) };
    if (!r.state)
        r.state = 1;
    struct rp_site sites[RP_SITES];
    for (int i = 0; i < RP_SITES; i++) {
        rp_draw_site(&r, &sites[i]);
        /* A global capture refuses the other threads' allocations and
         * frees: programs running at once capture thread-local or relaxed. */
        if (concurrent && sites[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
            sites[i].mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    }
    int sites_used = 1 + rp_below(&r, RP_SITES);
    int in_turn = rp_chance(&r, 50);
    RP_PRINT("random seed=%u sites=%d in_turn=%d\n", seed, sites_used, in_turn);
    CUgraph late = NULL;
    int failures = 0;
    for (int it = 0; it < iters; it++) {
        int which = in_turn ? it % sites_used : rp_below(&r, sites_used);
        if (pressure && it % 7 == 6) {
            CUdeviceptr huge = 0;
            RP_PRINT("it=%d pressure rc=%d\n", it, (int)cuMemAlloc(&huge, (size_t)1 << 46));
        }
        if (rp_chance(&r, 10)) {
            struct rp_thread_step t = { site_fn[which], c, &r, &sites[which], it, 0, &late, rp_out };
            pthread_t thread;
            if (pthread_create(&thread, NULL, rp_thread_body, &t) != 0) {
                RP_PRINT("it=%d thread not started\n", it);
                return 1;
            }
            pthread_join(thread, NULL);
            failures += t.failed;
        } else {
            failures += site_fn[which](c, &r, &sites[which], it, &late);
        }
        for (int i = 0; i < RP_SITES; i++)
            if (sites[i].held && sites[i].held_until <= it)
                failures += rp_launch_held(c, &sites[i], it);
    }
    for (int i = 0; i < RP_SITES; i++)
        if (sites[i].held)
            failures += rp_launch_held(c, &sites[i], iters);
    if (late)
        RP_PRINT("final destroy rc=%d\n", (int)cuGraphDestroy(late));
    return failures ? 1 : 0;
}

#define RP_MAX_WORKERS 4

/* A program run at once with others: the same sites (the same code), its
 * own streams, events and buffers in the same context. */
struct rp_worker {
    struct sc_context c;
    int iters, failures;
    unsigned seed;
    char *text;
    size_t len;
};

static void *rp_worker_body(void *p)
{
    struct rp_worker *w = p;
    FILE *out = open_memstream(&w->text, &w->len);
    if (!out || cuCtxSetCurrent(w->c.ctx) != CUDA_SUCCESS) {
        w->failures = 1;
        if (out)
            fclose(out);
        return NULL;
    }
    rp_out = out;
    w->failures = rp_run(&w->c, w->iters, w->seed, 1);
    rp_out = NULL;
    fclose(out);
    return NULL;
}

static int rp_worker_setup(struct rp_worker *w, const struct sc_context *base)
{
    memset(&w->c, 0, sizeof w->c);
    w->c.ctx = base->ctx;
    w->c.axpy = base->axpy, w->c.scale = base->scale;
    w->c.shift = base->shift, w->c.mirror = base->mirror;
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++)
        rc = (int)cuStreamCreate(&w->c.stream[i], CU_STREAM_NON_BLOCKING);
    rc = rc ? rc : (int)cuEventCreate(&w->c.fork_event, CU_EVENT_DISABLE_TIMING);
    rc = rc ? rc : (int)cuEventCreate(&w->c.join_event, CU_EVENT_DISABLE_TIMING);
    for (int i = 0; i < SC_BUFFERS && !rc; i++)
        rc = (int)cuMemAlloc(&w->c.buf[i], SC_N * sizeof(float));
    if (!rc)
        sc_reset_buffers(&w->c);
    return rc;
}

int sc_run_random(struct sc_context *c, int iters, unsigned seed)
{
    /* SCENARIO_THREADS=N (2 to 4): N programs at once, on threads of
     * their own, their lines printed one program after the other. */
    const char *threads_text = getenv("SCENARIO_THREADS");
    int threads = threads_text ? atoi(threads_text) : 1;
    if (threads < 2)
        return rp_run(c, iters, seed, 0);
    if (threads > RP_MAX_WORKERS)
        threads = RP_MAX_WORKERS;
    struct rp_worker w[RP_MAX_WORKERS];
    pthread_t tid[RP_MAX_WORKERS];
    int failures = 0;
    for (int k = 0; k < threads; k++) {
        memset(&w[k], 0, sizeof w[k]);
        w[k].iters = iters;
        w[k].seed = seed * 31u + (unsigned)k;
        int rc = rp_worker_setup(&w[k], c);
        if (rc) {
            printf("worker %d set-up rc=%d\n", k, rc);
            return 1;
        }
    }
    for (int k = 0; k < threads; k++)
        if (pthread_create(&tid[k], NULL, rp_worker_body, &w[k]) != 0) {
            printf("worker %d not started\n", k);
            return 1;
        }
    for (int k = 0; k < threads; k++) {
        pthread_join(tid[k], NULL);
        printf("worker %d:\n%s", k, w[k].text ? w[k].text : "");
        free(w[k].text);
        failures += w[k].failures;
    }
    return failures ? 1 : 0;
}
