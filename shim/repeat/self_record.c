/*
 * self_record.c - record a repeat capture against the graph it repeats.
 *
 * The recording of a graph is the journal of the driver capture that made
 * it, each node-creating call knowing its node (learned from the driver's
 * own dependency report right after the call). A later capture at the
 * site is compared with it call by call: a call that matches in all but
 * its eligible arguments writes those arguments into its node now - so a
 * setter's refusal still reaches the call that caused it, through the
 * switch - and into the recording, which therefore always equals the
 * graph. Unchanged calls cost a comparison and no driver call.
 *
 * Kernel and host-function arguments are the exception to "at once": the
 * driver checks nothing in them at capture, so the node is only marked
 * stale and written when someone may look - the executable graph gets
 * them straight from the recording (self_record_apply_to_exec), and every
 * graph reader, editor or whole update first brings stale graphs up to
 * date (self_record_graphs_current). Stale recordings are listed by the
 * journal module under its stale lock, which also guards each recording's
 * stale marks and in_use; it is taken after a capture's lock and
 * cache_lock, never before.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/hash.h"
#include "shim/base/driver.h"
#include "shim/state/events.h"
#include "shim/base/kparams.h"
#include "shim/repeat/self_record.h"


/* --- one call, whatever its entry point ---------------------------------------- */

enum call_class { CALL_KERNEL, CALL_MEMSET, CALL_COPY, CALL_HOST, CALL_EVENT_RECORD,
                  CALL_WAIT, CALL_OTHER };

struct call_view {
    enum call_class cls;
    CUstream stream;
    CUevent event;
    unsigned flags;
    /* kernels */
    CUfunction f;
    unsigned dims[7];              /* grid x y z, block x y z, shared bytes */
    void **params, **extra;
    const CUlaunchConfig *config;
    /* memsets: what may change, and the sizes that may not */
    CUdeviceptr dst;
    unsigned value;
    size_t sizes[4];               /* element size, N or width, pitch, height */
    /* copies of one dimension */
    uintptr_t to, from;
    size_t bytes;
    /* host functions */
    CUhostFn fn;
    void *data;
};

#define BOTH(sym) case DRV_##sym: case DRV_##sym##_ptsz:

static void view_kernel(struct call_view *v, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                        void **params, void **extra)
{
    v->cls = CALL_KERNEL;
    v->f = f;
    unsigned d[7] = { gx, gy, gz, bx, by, bz, shmem };
    memcpy(v->dims, d, sizeof d);
    v->stream = stream;
    v->params = params;
    v->extra = extra;
}

/* A memset: what may change (address, value) and the sizes that may not. */
static void view_memset(struct call_view *v, CUdeviceptr dst, unsigned value, size_t element,
                        size_t width, size_t pitch, size_t height)
{
    v->cls = CALL_MEMSET;
    v->dst = dst;
    v->value = value;
    v->sizes[0] = element, v->sizes[1] = width, v->sizes[2] = pitch, v->sizes[3] = height;
}

/* Fills what the comparison of its class reads (every call compares its
 * class's fields only; nothing is zeroed beyond them: this runs twice per
 * recorded call). Always inlined, as is store_call: with the call made,
 * a recorded launch took 7 % more instructions (callgrind). */
#define RECORD_PATH static inline __attribute__((always_inline))

RECORD_PATH void view_of(enum drv_id id, const union drv_args *a, struct call_view *v)
{
    v->cls = CALL_OTHER;
    v->event = NULL;
    v->flags = 0;
    v->config = NULL;
    switch (id) {
    BOTH(cuLaunchKernel) {
        const struct drv_args_cuLaunchKernel *k = &a->cuLaunchKernel;
        view_kernel(v, k->f, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX, k->blockDimY,
                    k->blockDimZ, k->sharedMemBytes, k->hStream, k->kernelParams, k->extra);
        return;
    }
    BOTH(cuLaunchCooperativeKernel) {
        const struct drv_args_cuLaunchCooperativeKernel *k = &a->cuLaunchCooperativeKernel;
        view_kernel(v, k->f, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX, k->blockDimY,
                    k->blockDimZ, k->sharedMemBytes, k->hStream, k->kernelParams, NULL);
        return;
    }
    BOTH(cuLaunchKernelEx) {
        const struct drv_args_cuLaunchKernelEx *k = &a->cuLaunchKernelEx;
        const CUlaunchConfig *c = k->config;
        if (!c)
            break;
        view_kernel(v, k->f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                    c->blockDimZ, c->sharedMemBytes, c->hStream, k->kernelParams, k->extra);
        v->config = c;
        return;
    }
    BOTH(cuMemsetD8Async)
        view_memset(v, a->cuMemsetD8Async.dstDevice, a->cuMemsetD8Async.uc, 1,
                    a->cuMemsetD8Async.N, 0, 0);
        break;
    BOTH(cuMemsetD16Async)
        view_memset(v, a->cuMemsetD16Async.dstDevice, a->cuMemsetD16Async.us, 2,
                    a->cuMemsetD16Async.N, 0, 0);
        break;
    BOTH(cuMemsetD32Async)
        view_memset(v, a->cuMemsetD32Async.dstDevice, a->cuMemsetD32Async.ui, 4,
                    a->cuMemsetD32Async.N, 0, 0);
        break;
    BOTH(cuMemsetD2D8Async) {
        const struct drv_args_cuMemsetD2D8Async *m = &a->cuMemsetD2D8Async;
        view_memset(v, m->dstDevice, m->uc, 1, m->Width, m->dstPitch, m->Height);
        break;
    }
    BOTH(cuMemsetD2D16Async) {
        const struct drv_args_cuMemsetD2D16Async *m = &a->cuMemsetD2D16Async;
        view_memset(v, m->dstDevice, m->us, 2, m->Width, m->dstPitch, m->Height);
        break;
    }
    BOTH(cuMemsetD2D32Async) {
        const struct drv_args_cuMemsetD2D32Async *m = &a->cuMemsetD2D32Async;
        view_memset(v, m->dstDevice, m->ui, 4, m->Width, m->dstPitch, m->Height);
        break;
    }
    BOTH(cuMemcpyAsync)
        v->cls = CALL_COPY, v->to = a->cuMemcpyAsync.dst, v->from = a->cuMemcpyAsync.src;
        v->bytes = a->cuMemcpyAsync.ByteCount;
        break;
    BOTH(cuMemcpyHtoDAsync_v2)
        v->cls = CALL_COPY, v->to = a->cuMemcpyHtoDAsync_v2.dstDevice;
        v->from = (uintptr_t)a->cuMemcpyHtoDAsync_v2.srcHost;
        v->bytes = a->cuMemcpyHtoDAsync_v2.ByteCount;
        break;
    BOTH(cuMemcpyDtoHAsync_v2)
        v->cls = CALL_COPY, v->to = (uintptr_t)a->cuMemcpyDtoHAsync_v2.dstHost;
        v->from = a->cuMemcpyDtoHAsync_v2.srcDevice;
        v->bytes = a->cuMemcpyDtoHAsync_v2.ByteCount;
        break;
    BOTH(cuMemcpyDtoDAsync_v2)
        v->cls = CALL_COPY, v->to = a->cuMemcpyDtoDAsync_v2.dstDevice;
        v->from = a->cuMemcpyDtoDAsync_v2.srcDevice;
        v->bytes = a->cuMemcpyDtoDAsync_v2.ByteCount;
        break;
    BOTH(cuLaunchHostFunc)
        v->cls = CALL_HOST, v->fn = a->cuLaunchHostFunc.fn, v->data = a->cuLaunchHostFunc.userData;
        break;
    BOTH(cuEventRecord)
        v->cls = CALL_EVENT_RECORD, v->event = a->cuEventRecord.hEvent;
        break;
    BOTH(cuEventRecordWithFlags)
        v->cls = CALL_EVENT_RECORD, v->event = a->cuEventRecordWithFlags.hEvent;
        v->flags = a->cuEventRecordWithFlags.flags;
        break;
    BOTH(cuStreamWaitEvent)
        v->cls = CALL_WAIT, v->event = a->cuStreamWaitEvent.hEvent;
        v->flags = a->cuStreamWaitEvent.Flags;
        break;
    default:
        break;
    }
    v->stream = drv_args_stream(id, a);
}

/* --- streams and events by their part in the capture ---------------------------- */

/* The index both keys hold, appending the pair when neither is known; -1
 * when they play different parts (or too many take part). */
static int pair_index(const void **cur, const void **rec, int *n, int max, const void *c,
                      const void *r)
{
    for (int i = 0; i < *n; i++) {
        if (cur[i] == c || rec[i] == r)
            return cur[i] == c && rec[i] == r ? i : -1;
    }
    if (*n == max)
        return -1;
    cur[*n] = c;
    rec[*n] = r;
    return (*n)++;
}

static int stream_index(struct self_record *s, const void *cur, const void *rec)
{
    int n = s->nstreams;
    int i = pair_index(s->cur_stream, s->rec_stream, &s->nstreams, CAPTURE_MAX_STREAMS, cur, rec);
    if (i >= 0 && i == n)
        s->stream_deps[i].n = 0;
    return i;
}

static int event_index(struct self_record *s, CUevent cur, CUevent rec)
{
    int n = s->nevents;
    int i = pair_index((const void **)s->cur_event, (const void **)s->rec_event, &s->nevents,
                       CAPTURE_MAX_EVENTS, cur, rec);
    if (i >= 0 && i == n)
        s->event_recorded[i] = 0;
    return i;
}

static void deps_set_one(struct self_deps *d, CUgraphNode node)
{
    d->node[0] = node;
    d->n = 1;
}

static void deps_merge(struct self_deps *into, const struct self_deps *from)
{
    if (into->n < 0 || from->n < 0) {
        into->n = -1;
        return;
    }
    for (int i = 0; i < from->n; i++) {
        int have = 0;
        for (int j = 0; j < into->n && !have; j++)
            have = into->node[j] == from->node[i];
        if (have)
            continue;
        if (into->n == SELF_RECORD_MAX_DEPS) {
            into->n = -1;
            return;
        }
        into->node[into->n++] = from->node[i];
    }
}

const CUgraphEdgeData self_record_default_edges[SELF_RECORD_MAX_DEPS];

void self_record_start(struct self_record *s, struct journal *rec, const void *origin_key)
{
    /* Every array entry is written before it is read (counts first): no
     * clearing of the whole state on each capture. */
    s->next = 0;
    s->nstreams = s->nevents = 0;
    s->rec = rec;
    s->listed = 0;
    s->newly_stale = 0;
    stream_index(s, origin_key, rec->origin_key);
    journal_stale_lock();
    rec->in_use = 1;
    journal_stale_unlock();
}

void self_record_stop(struct self_record *s)
{
    if (!s || !s->rec)
        return;
    journal_stale_lock();
    s->rec->stale_ops += s->newly_stale;
    s->rec->in_use = 0;
    journal_stale_unlock();
    s->newly_stale = 0;
    s->rec = NULL;
}

/* --- comparing --------------------------------------------------------------- */

/* Kernel arguments are mostly 4 or 8 bytes: compared and copied inline,
 * since a library call per argument is most of a recorded launch's cost. */
static int arg_equal(const void *a, const void *b, size_t size)
{
    if (size == 8) {
        uint64_t x, y;
        memcpy(&x, a, 8), memcpy(&y, b, 8);
        return x == y;
    }
    if (size == 4) {
        uint32_t x, y;
        memcpy(&x, a, 4), memcpy(&y, b, 4);
        return x == y;
    }
    return memcmp(a, b, size) == 0;
}

static void arg_copy(void *to, const void *from, size_t size)
{
    if (size == 8)
        memcpy(to, from, 8);
    else if (size == 4)
        memcpy(to, from, 4);
    else
        memcpy(to, from, size);
}

/* Whether the kernels' argument values are equal; -1 when their forms differ. */
RECORD_PATH int kernel_args_equal(const struct call_view *cur, const struct kparams_layout *l,
                             void **rec_params, void **rec_extra)
{
    if ((cur->params != NULL) != (rec_params != NULL))
        return -1;
    if (cur->params) {
        /* Same function as recorded, so the same layout. */
        if (!l || !l->known)
            return -1;
        for (unsigned i = 0; i < l->count; i++)
            if (!arg_equal(cur->params[i], rec_params[i], l->size[i]))
                return 0;
        return 1;
    }
    if ((cur->extra != NULL) != (rec_extra != NULL))
        return -1;
    if (!cur->extra)
        return 1;
    /* The recording holds {BUFFER_POINTER, buf, BUFFER_SIZE, &size, END}. */
    const void *buf = NULL;
    size_t size = 0;
    for (size_t i = 0; cur->extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
        if (cur->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = cur->extra[i + 1];
        else if (cur->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && cur->extra[i + 1])
            size = *(const size_t *)cur->extra[i + 1];
        else
            return -1;
    }
    if (size != *(const size_t *)rec_extra[3] || (size && !buf))
        return -1;
    return memcmp(buf, rec_extra[1], size) == 0;
}

static void kernel_args_store(const struct call_view *cur, const struct kparams_layout *l,
                              void **rec_params, void **rec_extra)
{
    if (cur->params) {
        for (unsigned i = 0; i < l->count; i++)
            arg_copy(rec_params[i], cur->params[i], l->size[i]);
    } else if (cur->extra) {
        for (size_t i = 0; cur->extra[i] != CU_LAUNCH_PARAM_END; i += 2)
            if (cur->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                memcpy(rec_extra[1], cur->extra[i + 1], *(const size_t *)rec_extra[3]);
    }
}

/* Seven unsigned (28 bytes): three 8-byte words and one of 4, not seven
 * compares; this runs for every recorded launch. */
RECORD_PATH int dims_differ(const unsigned *a, const unsigned *b)
{
    uint64_t x[3], y[3];
    memcpy(x, a, sizeof x), memcpy(y, b, sizeof y);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (uint64_t)(a[6] ^ b[6])) != 0;
}

static int is_cooperative(enum drv_id id)
{
    return id == DRV_cuLaunchCooperativeKernel || id == DRV_cuLaunchCooperativeKernel_ptsz;
}

/* A launch whose grid, block or dynamic shared memory changed (same
 * function, same attributes): the recording takes the new ones, and the
 * node is written from it like a node with new arguments. The executable
 * graph's kernel setter accepts any of them; a cooperative launch keeps
 * its dimensions (the caller switches), since co-residency is checked
 * only at launch. */
static void kernel_dims_store(struct journal_op *op, const struct call_view *cur,
                              const struct call_view *rec)
{
    const unsigned *d = cur->dims;
    if (rec->config) {      /* the recording's own copy of the configuration */
        CUlaunchConfig *c = (CUlaunchConfig *)rec->config;
        c->gridDimX = d[0], c->gridDimY = d[1], c->gridDimZ = d[2];
        c->blockDimX = d[3], c->blockDimY = d[4], c->blockDimZ = d[5];
        c->sharedMemBytes = d[6];
        return;
    }
    struct drv_args_cuLaunchKernel *k = &op->args.cuLaunchKernel;
    k->gridDimX = d[0], k->gridDimY = d[1], k->gridDimZ = d[2];
    k->blockDimX = d[3], k->blockDimY = d[4], k->blockDimZ = d[5];
    k->sharedMemBytes = d[6];
}

RECORD_PATH int configs_equal(const CUlaunchConfig *a, const CUlaunchConfig *b)
{
    if (!a || !b)
        return a == b;
    return a->numAttrs == b->numAttrs &&
           (a->numAttrs == 0 || memcmp(a->attrs, b->attrs, a->numAttrs * sizeof *a->attrs) == 0);
}

/* --- writing a change into the graph ---------------------------------------- */

static CUDA_KERNEL_NODE_PARAMS kernel_params_of(const struct call_view *v)
{
    return (CUDA_KERNEL_NODE_PARAMS){
        .func = v->f, .gridDimX = v->dims[0], .gridDimY = v->dims[1], .gridDimZ = v->dims[2],
        .blockDimX = v->dims[3], .blockDimY = v->dims[4], .blockDimZ = v->dims[5],
        .sharedMemBytes = v->dims[6], .kernelParams = v->params,
        .extra = v->params ? NULL : v->extra,
    };
}

/* The parameters a kernel node takes for the call `v`, the graph's and the
 * executable graph's alike: the call's, with the function the node runs
 * (a library kernel may be held as its CUkernel and context). That is read
 * from the node the first time only, so a write is one driver call. */
static CUresult kernel_node_params(struct journal_op *op, const struct call_view *v,
                                   CUDA_KERNEL_NODE_PARAMS *p, const char **call)
{
    if (!op->node_fn.known) {
        *call = "cuGraphKernelNodeGetParams_v2";
        CUDA_KERNEL_NODE_PARAMS node;
        CUresult r = DRV_REAL(cuGraphKernelNodeGetParams_v2)(op->node, &node);
        if (r != CUDA_SUCCESS)
            return r;
        op->node_fn = (struct node_function){ node.func, node.kern, node.ctx, 1 };
    }
    *p = kernel_params_of(v);
    p->func = op->node_fn.func, p->kern = op->node_fn.kern, p->ctx = op->node_fn.ctx;
    return CUDA_SUCCESS;
}

static CUresult set_copy_side(CUmemorytype type, CUdeviceptr *device, const void **host,
                              uintptr_t address)
{
    if (type == CU_MEMORYTYPE_HOST)
        *host = (const void *)address;
    else if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED)
        *device = (CUdeviceptr)address;
    else
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

static CUresult apply_to_node(struct journal_op *op, const struct call_view *v, const char **call)
{
    CUgraphNode node = op->node;
    CUresult r;
    switch (v->cls) {
    case CALL_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p;
        if ((r = kernel_node_params(op, v, &p, call)) != CUDA_SUCCESS)
            return r;
        *call = "cuGraphKernelNodeSetParams_v2";
        return DRV_REAL(cuGraphKernelNodeSetParams_v2)(node, &p);
    }
    case CALL_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS p;
        *call = "cuGraphMemsetNodeGetParams";
        if ((r = DRV_REAL(cuGraphMemsetNodeGetParams)(node, &p)) != CUDA_SUCCESS)
            return r;
        p.dst = v->dst;
        p.value = v->value;
        *call = "cuGraphMemsetNodeSetParams";
        return DRV_REAL(cuGraphMemsetNodeSetParams)(node, &p);
    }
    case CALL_COPY: {
        CUDA_MEMCPY3D p;
        *call = "cuGraphMemcpyNodeGetParams";
        if ((r = DRV_REAL(cuGraphMemcpyNodeGetParams)(node, &p)) != CUDA_SUCCESS)
            return r;
        *call = "a copy between arrays";
        if ((r = set_copy_side(p.srcMemoryType, &p.srcDevice, &p.srcHost, v->from)) != CUDA_SUCCESS ||
            (r = set_copy_side(p.dstMemoryType, &p.dstDevice, (const void **)&p.dstHost, v->to)) !=
                CUDA_SUCCESS)
            return r;
        *call = "cuGraphMemcpyNodeSetParams";
        return DRV_REAL(cuGraphMemcpyNodeSetParams)(node, &p);
    }
    case CALL_HOST: {
        CUDA_HOST_NODE_PARAMS p = { .fn = v->fn, .userData = v->data };
        *call = "cuGraphHostNodeSetParams";
        return DRV_REAL(cuGraphHostNodeSetParams)(node, &p);
    }
    default:
        *call = "a node recap cannot update";
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* The recorded call now stands for `a`: its handles and by-value
 * arguments; copied argument data (kernel values, launch configuration,
 * structs) stays where the recording keeps it. */
RECORD_PATH void store_call(struct journal_op *op, const union drv_args *a,
                            const struct call_view *cur, const struct call_view *rec, int same)
{
    if (cur->cls == CALL_KERNEL) {
        if (!same)
            kernel_args_store(cur, op->layout, rec->params, rec->extra);
        if (rec->config)    /* the recording's own copy of the configuration */
            ((CUlaunchConfig *)rec->config)->hStream = cur->stream;
        else if (is_cooperative(op->id))
            op->args.cuLaunchCooperativeKernel.hStream = cur->stream;
        else
            op->args.cuLaunchKernel.hStream = cur->stream;
        return;
    }
    if (drv_table[op->id].op_kind == DRV_OP_STRUCT) {
        size_t size;
        const void *kept = *drv_args_struct_slot(op->id, &op->args, &size);
        op->args = *a;
        *drv_args_struct_slot(op->id, &op->args, &size) = kept;
        return;
    }
    op->args = *a;
}

/* Kernel and host-function nodes take new arguments lazily: marks the
 * node stale and returns 1, or returns 0 when it must be written now.
 * While a capture records against it, nobody else reads or writes a
 * recording's stale marks (flushes skip recordings in use), so only the
 * listing takes the stale lock, once per capture; the count is added at
 * self_record_stop. */
static int mark_stale(struct self_record *s, struct journal_op *op)
{
    if (op->creates != CU_GRAPH_NODE_TYPE_KERNEL && op->creates != CU_GRAPH_NODE_TYPE_HOST)
        return 0;
    if (op->stale)
        return 1;
    if (!s->listed) {
        journal_stale_lock();
        s->listed = journal_list_stale(s->rec) == 0;
        journal_stale_unlock();
        if (!s->listed)
            return 0;
    }
    op->stale = 1;
    s->newly_stale++;
    return 1;
}

/* Caller holds the journal stale lock. */
static CUresult flush_locked(struct journal *rec)
{
    CUresult first = CUDA_SUCCESS;
    for (size_t i = 0; i < rec->nops && rec->stale_ops; i++) {
        struct journal_op *op = &rec->ops[i];
        if (!op->stale)
            continue;
        struct call_view v;
        const char *call = NULL;
        view_of(op->id, &op->args, &v);
        CUresult r = apply_to_node(op, &v, &call);
        if (r != CUDA_SUCCESS) {
            /* Once more: the node must not keep older arguments unseen. */
            event_own_call_failed(NULL, call, r, "the graph node's arguments are written again");
            r = apply_to_node(op, &v, &call);
        }
        if (r != CUDA_SUCCESS) {
            event_own_call_failed(NULL, call, r, "a graph recap recorded keeps older arguments "
                                                 "in a node until the next attempt");
            if (first == CUDA_SUCCESS)
                first = r;
            continue;
        }
        op->stale = 0;
        rec->stale_ops--;
    }
    if (rec->stale_ops == 0)
        journal_unlist_stale(rec);
    return first;
}

CUresult self_record_flush(struct journal *rec)
{
    if (!rec)
        return CUDA_SUCCESS;
    journal_stale_lock();
    CUresult r = rec->listed_stale ? flush_locked(rec) : CUDA_SUCCESS;
    journal_stale_unlock();
    return r;
}

static void flush_unless_in_use(struct journal *rec)
{
    if (!rec->in_use)
        flush_locked(rec);
}

void self_record_flush_all(void)
{
    journal_stale_lock();
    /* A recording a capture is using belongs to a graph the program does
     * not hold; it is brought up to date when that graph is handed out. */
    journal_each_stale(flush_unless_in_use);
    journal_stale_unlock();
}

CUresult self_record_apply_to_exec(CUgraphExec exec, struct journal_op *op, const char **call)
{
    struct call_view v;
    view_of(op->id, &op->args, &v);
    if (v.cls == CALL_HOST) {
        CUDA_HOST_NODE_PARAMS p = { .fn = v.fn, .userData = v.data };
        *call = "cuGraphExecHostNodeSetParams";
        return DRV_REAL(cuGraphExecHostNodeSetParams)(exec, op->node, &p);
    }
    CUDA_KERNEL_NODE_PARAMS p;
    CUresult r = kernel_node_params(op, &v, &p, call);
    if (r != CUDA_SUCCESS)
        return r;
    /* The arguments as pointers, not packed in one buffer (`extra`): the
     * packed form costs the driver less per call and more at the next
     * launch, more in all (scripts/bench-node-setters.cu, exec_extra). */
    *call = "cuGraphExecKernelNodeSetParams_v2";
    return DRV_REAL(cuGraphExecKernelNodeSetParams_v2)(exec, op->node, &p);
}

static enum self_verdict refuse(char *why, size_t len, const char *fmt, const char *what)
{
    if (len)                        /* 0: a candidate among others, whose reason nobody reads */
        snprintf(why, len, fmt, what);
    return SELF_SWITCH;
}

/* One call compared with the recording's next: what must be equal (entry
 * point, function, attributes, sizes, the part each stream and event
 * plays) is, and whether the values that may change did. Writes nothing
 * into the recording or its graph; the pairing of streams and events may
 * grow. */
struct call_match {
    struct journal_op *op;          /* the recording's call */
    struct call_view cur, rec;
    int same;                       /* every value equal too */
    int dims;                       /* a launch's grid, block or shared memory changed */
    int event_op;                   /* an event record or wait (no node of its own) */
    int si, ei;                     /* stream and event pair indices */
};

RECORD_PATH enum self_verdict compare_call(struct self_record *s, enum drv_id id,
                                      const union drv_args *a, struct call_match *m, char *why,
                                      size_t len)
{
    if (s->next >= s->rec->nops)
        return refuse(why, len, "the capture made more calls than the graph holds (%s)",
                      drv_table[id].symbol);
    struct journal_op *op = m->op = &s->rec->ops[s->next];
    if (op->id != id)
        return refuse(why, len, "the capture called %s where its graph had another call",
                      drv_table[id].symbol);

    view_of(id, a, &m->cur);
    view_of(op->id, &op->args, &m->rec);
    const struct call_view *cur = &m->cur, *rec = &m->rec;
    if (cur->cls == CALL_OTHER)
        return refuse(why, len, "recap does not record %s itself", drv_table[id].symbol);
    m->si = stream_index(s, ctab_stream_ref(id, cur->stream).key,
                         ctab_stream_ref(id, rec->stream).key);
    if (m->si < 0)
        return refuse(why, len, "%s used streams in another arrangement", drv_table[id].symbol);

    m->same = 1;
    m->dims = 0;
    m->event_op = 0;
    switch (cur->cls) {
    case CALL_EVENT_RECORD:
    case CALL_WAIT:
        m->ei = event_index(s, cur->event, rec->event);
        if (m->ei < 0 || cur->flags != rec->flags)
            return refuse(why, len, "%s used events in another arrangement", drv_table[id].symbol);
        if (op->creates_node) {
            if (!op->node)
                return refuse(why, len, "recap does not know the node %s made",
                              drv_table[id].symbol);
            /* An external record or wait is a node holding its event: the
             * graph's names the old event (perhaps destroyed since), and
             * recap does not rewrite it (PyTorch's external events, a new
             * pair each test: the launch then met a dead event). */
            if (cur->event != rec->event)
                return refuse(why, len, "%s named another event than the graph's event node",
                              drv_table[id].symbol);
        } else if (cur->cls == CALL_WAIT && !s->event_recorded[m->ei]) {
            return refuse(why, len, "%s waited for an event not recorded in the capture",
                          drv_table[id].symbol);
        }
        m->event_op = 1;
        return SELF_SAME;
    case CALL_KERNEL: {
        if (cur->f != rec->f || !configs_equal(cur->config, rec->config))
            return refuse(why, len, "%s changed the function or the launch attributes",
                          drv_table[id].symbol);
        m->dims = dims_differ(cur->dims, rec->dims);
        if (m->dims && is_cooperative(id))
            return refuse(why, len, "%s changed a cooperative launch's dimensions",
                          drv_table[id].symbol);
        int eq = kernel_args_equal(cur, op->layout, rec->params, rec->params ? NULL : rec->extra);
        if (eq < 0)
            return refuse(why, len, "%s passed its arguments another way", drv_table[id].symbol);
        m->same = eq && !m->dims;
        break;
    }
    case CALL_MEMSET:
        if (memcmp(cur->sizes, rec->sizes, sizeof cur->sizes) != 0)
            return refuse(why, len, "%s changed its size", drv_table[id].symbol);
        m->same = cur->dst == rec->dst && cur->value == rec->value;
        break;
    case CALL_COPY:
        if (cur->bytes != rec->bytes)
            return refuse(why, len, "%s changed its size", drv_table[id].symbol);
        m->same = cur->to == rec->to && cur->from == rec->from;
        break;
    case CALL_HOST:
        if (cur->fn != rec->fn)
            return refuse(why, len, "%s changed the host function", drv_table[id].symbol);
        m->same = cur->data == rec->data;
        break;
    default:
        break;
    }
    if (!op->node)
        return refuse(why, len, "recap does not know the node %s made", drv_table[id].symbol);
    return m->same ? SELF_SAME : SELF_CHANGED;
}

/* The call is the capture's: what each stream and event now depends on,
 * and the next call expected. */
RECORD_PATH void advance(struct self_record *s, const struct call_match *m)
{
    struct self_deps *deps = &s->stream_deps[m->si];
    if (m->event_op && !m->op->creates_node) {
        if (m->cur.cls == CALL_EVENT_RECORD) {
            s->event_deps[m->ei] = *deps;
            s->event_recorded[m->ei] = 1;
        } else {
            deps_merge(deps, &s->event_deps[m->ei]);
        }
    } else {
        deps_set_one(deps, m->op->node);
    }
    s->next++;
}

enum self_verdict self_record_call(struct self_record *s, enum drv_id id,
                                   const union drv_args *a, struct changed_node *changed,
                                   char *why, size_t len)
{
    struct call_match m;
    enum self_verdict v = compare_call(s, id, a, &m, why, len);
    if (v == SELF_SWITCH)
        return v;
    struct journal_op *op = m.op;
    if (m.event_op) {
        store_call(op, a, &m.cur, &m.rec, 1);
        advance(s, &m);
        return SELF_SAME;
    }
    if (m.dims)
        kernel_dims_store(op, &m.cur, &m.rec);
    if (!m.same) {
        if (!mark_stale(s, op)) {
            /* Memsets and copies: the driver checks their addresses at
             * the call, so the node takes them now and a refusal still
             * reaches this call through the switch. */
            const char *call = NULL;
            CUresult r = apply_to_node(op, &m.cur, &call);
            if (r != CUDA_SUCCESS) {
                snprintf(why, len, "%s failed (%s) for %s", call, drv_result_name(r),
                         drv_table[id].symbol);
                return SELF_REFUSED;
            }
        }
        changed->node = op->node;
        changed->type = op->creates;
        changed->op = (long)s->next;
    }
    store_call(op, a, &m.cur, &m.rec, m.same);
    advance(s, &m);
    return m.same ? SELF_SAME : SELF_CHANGED;
}

enum self_verdict self_record_match(struct self_record *s, enum drv_id id,
                                    const union drv_args *a, int *needs_node, char *why,
                                    size_t len)
{
    struct call_match m;
    enum self_verdict v = compare_call(s, id, a, &m, why, len);
    if (v == SELF_SWITCH)
        return v;
    /* What mark_stale would not defer: a new memset or copy address (the
     * driver checks an address at the call). A memset's new value cannot
     * be refused, so a site whose graphs differ in it keeps choosing. */
    *needs_node = v == SELF_CHANGED &&
                  ((m.cur.cls == CALL_MEMSET && m.cur.dst != m.rec.dst) ||
                   (m.cur.cls == CALL_COPY && (m.cur.to != m.rec.to || m.cur.from != m.rec.from)));
    advance(s, &m);
    return v;
}

/* --- signatures ------------------------------------------------------------------ */

/* Index of `key` among the first n of seen[], appended when new: the part
 * a stream or event plays, by order of first appearance. */
static uint64_t part_of(const void **seen, int *n, int max, const void *key)
{
    for (int i = 0; i < *n; i++)
        if (seen[i] == key)
            return (uint64_t)i;
    if (*n < max)
        seen[(*n)++] = key;
    return (uint64_t)*n;
}

uint64_t self_record_signature(const struct journal *rec)
{
    const void *streams[CAPTURE_MAX_STREAMS], *events[CAPTURE_MAX_EVENTS];
    int nstreams = 0, nevents = 0;
    uint64_t h = HASH_FNV_OFFSET;
    streams[nstreams++] = rec->origin_key;
    for (size_t i = 0; i < rec->nops; i++) {
        const struct journal_op *op = &rec->ops[i];
        struct call_view v;
        view_of(op->id, &op->args, &v);
        uint64_t words[8] = { (uint64_t)op->id, (uint64_t)v.cls,
                              part_of(streams, &nstreams, CAPTURE_MAX_STREAMS,
                                      ctab_stream_ref(op->id, v.stream).key) };
        switch (v.cls) {
        case CALL_EVENT_RECORD:
        case CALL_WAIT:
            words[3] = part_of((const void **)events, &nevents, CAPTURE_MAX_EVENTS, v.event);
            words[4] = v.flags;
            break;
        case CALL_KERNEL:
            words[3] = (uint64_t)(uintptr_t)v.f;
            words[4] = v.params != NULL;
            words[5] = v.config ? v.config->numAttrs : 0;
            if (v.config && v.config->numAttrs)
                h = hash_fnv1a(h, v.config->attrs, v.config->numAttrs * sizeof *v.config->attrs);
            if (is_cooperative(op->id))
                h = hash_fnv1a(h, v.dims, sizeof v.dims);
            break;
        case CALL_MEMSET:
            h = hash_fnv1a(h, v.sizes, sizeof v.sizes);
            break;
        case CALL_COPY:
            words[3] = v.bytes;
            break;
        case CALL_HOST:
            words[3] = (uint64_t)(uintptr_t)v.fn;
            break;
        default:
            break;
        }
        h = hash_fnv1a(h, words, sizeof words);
    }
    return hash_mix64(h ^ rec->nops) | 1;
}

/* A stream or event handle of the recording, as this capture names it:
 * the pairing maps the recording's to the capture's (by key, which is the
 * handle but for per-thread default streams, named the same everywhere). */
static const void *renamed(const void *const *rec, const void *const *cur, int n, const void *h)
{
    for (int i = 0; i < n; i++)
        if (rec[i] == h)
            return cur[i];
    return h;
}

void self_record_rename_rest(struct self_record *s)
{
    struct journal *rec = s->rec;
    rec->origin_key = s->cur_stream[0];
    for (size_t i = s->next; i < rec->nops; i++) {
        struct journal_op *op = &rec->ops[i];
        CUstream stream = drv_args_stream(op->id, &op->args);
        if (stream && stream != CU_STREAM_PER_THREAD && stream != CU_STREAM_LEGACY) {
            CUstream now = (CUstream)renamed(s->rec_stream, s->cur_stream, s->nstreams, stream);
            if (now != stream)
                drv_args_set_stream(op->id, &op->args, now);
        }
        CUevent event = drv_args_event(op->id, &op->args);
        if (event) {
            CUevent now = (CUevent)renamed((const void *const *)s->rec_event,
                                           (const void *const *)s->cur_event, s->nevents, event);
            if (now != event)
                drv_args_set_event(op->id, &op->args, now);
        }
    }
}

int self_record_complete(const struct self_record *s, char *why, size_t len)
{
    if (s->next == s->rec->nops)
        return 1;
    snprintf(why, len, "the capture ended after %zu of the %zu calls its graph holds", s->next,
             s->rec->nops);
    return 0;
}

const CUgraphNode *self_record_deps(const struct self_record *s, const void *stream_key, size_t *n)
{
    for (int i = 0; i < s->nstreams; i++) {
        if (s->cur_stream[i] != stream_key)
            continue;
        if (s->stream_deps[i].n < 0)
            return NULL;
        *n = (size_t)s->stream_deps[i].n;
        return s->stream_deps[i].node;
    }
    return NULL;
}

CUresult self_record_learn_node(CUstream stream, CUgraphNode *node)
{
    CUstreamCaptureStatus status;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    CUresult r = DRV_REAL(cuStreamGetCaptureInfo_v3)(stream, &status, NULL, NULL, &deps, NULL, &n);
    *node = r == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_ACTIVE && n == 1 && deps
                ? deps[0] : NULL;
    return r;
}
