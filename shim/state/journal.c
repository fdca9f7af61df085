/*
 * journal.c - copy a capture's calls so they can be made again.
 *
 * Argument data lives in chunks owned by the journal; each recorded call's
 * pointers are redirected to those copies, so the program may reuse its
 * argument arrays the moment a launch returns, as CUDA allows. Replaying is
 * calling the real driver with the recorded arguments, in order: forks and
 * joins of other streams come back through the recorded event records and
 * waits.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/base/driver.h"
#include "shim/state/journal.h"
#include "shim/base/kparams.h"

#define JOURNAL_CHUNK_BYTES (64 * 1024)

struct journal_chunk {
    struct journal_chunk *next;
    size_t used, cap;
    unsigned char data[];
};

void journal_init(struct journal *j)
{
    memset(j, 0, sizeof *j);
    j->replayable = 1;
}

/* --- recordings behind their graph ------------------------------------------- */

int journal_stale_count;
static pthread_mutex_t stale_lock = PTHREAD_MUTEX_INITIALIZER;
static struct journal **stale_list;
static size_t stale_len, stale_cap;

void journal_stale_lock(void)
{
    pthread_mutex_lock(&stale_lock);
}

void journal_stale_unlock(void)
{
    pthread_mutex_unlock(&stale_lock);
}

int journal_list_stale(struct journal *j)
{
    if (j->listed_stale)
        return 0;
    if (stale_len == stale_cap) {
        size_t cap = stale_cap ? stale_cap * 2 : 16;
        struct journal **grown = realloc(stale_list, cap * sizeof *grown);
        if (!grown)
            return -1;
        stale_list = grown;
        stale_cap = cap;
    }
    stale_list[stale_len++] = j;
    __atomic_store_n(&j->listed_stale, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&journal_stale_count, (int)stale_len, __ATOMIC_RELEASE);
    return 0;
}

void journal_unlist_stale(struct journal *j)
{
    if (!j->listed_stale)
        return;
    for (size_t i = 0; i < stale_len; i++) {
        if (stale_list[i] == j) {
            stale_list[i] = stale_list[--stale_len];
            break;
        }
    }
    __atomic_store_n(&j->listed_stale, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&journal_stale_count, (int)stale_len, __ATOMIC_RELEASE);
}

void journal_each_stale(void (*fn)(struct journal *j))
{
    /* fn may take its journal off the list: walk from the end. */
    for (size_t i = stale_len; i-- > 0;)
        if (i < stale_len)
            fn(stale_list[i]);
}

void journal_free(struct journal *j)
{
    /* Only listed while a graph holds it: never listed anew here. */
    if (__atomic_load_n(&j->listed_stale, __ATOMIC_RELAXED)) {
        pthread_mutex_lock(&stale_lock);
        journal_unlist_stale(j);
        pthread_mutex_unlock(&stale_lock);
    }
    while (j->chunks) {
        struct journal_chunk *next = j->chunks->next;
        free(j->chunks);
        j->chunks = next;
    }
    free(j->ops);
    memset(j, 0, sizeof *j);
}

static void mark_unreplayable(struct journal *j, const char *why)
{
    if (j->replayable) {
        j->replayable = 0;
        snprintf(j->why_not, sizeof j->why_not, "%s", why);
    }
}

/* Bump allocation, 16-byte aligned (kernel arguments may need it). */
static void *journal_alloc(struct journal *j, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct journal_chunk *c = j->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > JOURNAL_CHUNK_BYTES ? n : JOURNAL_CHUNK_BYTES;
        c = malloc(sizeof *c + cap + 15);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = (size_t)(-(uintptr_t)c->data & 15);
        c->next = j->chunks;
        j->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void *journal_dup(struct journal *j, const void *src, size_t n)
{
    void *p = journal_alloc(j, n ? n : 1);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

/* --- kernel launches: where their pointer arguments are ------------------- */

struct kernel_view {
    CUfunction f;
    void ***params;                /* &kernelParams */
    void ***extra;                 /* &extra, or NULL (cooperative launches) */
    const CUlaunchConfig **config; /* &config, or NULL */
};

static int kernel_view_of(enum drv_id id, union drv_args *a, struct kernel_view *v)
{
    memset(v, 0, sizeof *v);
    switch (id) {
#define PLAIN_LAUNCH(sym)                                          \
    case DRV_##sym:                                                \
        v->f = a->sym.f, v->params = &a->sym.kernelParams, v->extra = &a->sym.extra; \
        return 1;
    PLAIN_LAUNCH(cuLaunchKernel)
    PLAIN_LAUNCH(cuLaunchKernel_ptsz)
#undef PLAIN_LAUNCH
    case DRV_cuLaunchCooperativeKernel:
        v->f = a->cuLaunchCooperativeKernel.f;
        v->params = &a->cuLaunchCooperativeKernel.kernelParams;
        return 1;
    case DRV_cuLaunchCooperativeKernel_ptsz:
        v->f = a->cuLaunchCooperativeKernel_ptsz.f;
        v->params = &a->cuLaunchCooperativeKernel_ptsz.kernelParams;
        return 1;
    case DRV_cuLaunchKernelEx:
        v->f = a->cuLaunchKernelEx.f, v->params = &a->cuLaunchKernelEx.kernelParams;
        v->extra = &a->cuLaunchKernelEx.extra, v->config = &a->cuLaunchKernelEx.config;
        return 1;
    case DRV_cuLaunchKernelEx_ptsz:
        v->f = a->cuLaunchKernelEx_ptsz.f, v->params = &a->cuLaunchKernelEx_ptsz.kernelParams;
        v->extra = &a->cuLaunchKernelEx_ptsz.extra, v->config = &a->cuLaunchKernelEx_ptsz.config;
        return 1;
    default:
        return 0;
    }
}

/* The argument buffer an `extra` array names, or NULL with *bad set when
 * the array holds something recap does not understand. */
static const void *extra_buffer(void **extra, size_t *size, int *bad)
{
    const void *buffer = NULL;
    int have_size = 0;
    *bad = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            buffer = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
            *size = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            *bad = 1;
            return NULL;
        }
        if (i > 64) {
            *bad = 1;
            return NULL;
        }
    }
    if (buffer && !have_size)
        *bad = 1;
    return buffer;
}

static int kernel_can_copy(struct kernel_view *v, const char **why)
{
    static __thread char text[128];
    if (*v->params) {
        const struct kparams_layout *l = kparams_of(v->f);
        if (!l->known) {
            snprintf(text, sizeof text,
                     "a kernel whose argument sizes the driver does not report (%s)",
                     drv_result_name(l->error));
            *why = text;
            return 0;
        }
        return 1;
    }
    if (v->extra && *v->extra) {
        size_t size = 0;
        int bad;
        extra_buffer(*v->extra, &size, &bad);
        if (bad) {
            *why = "a kernel launched with an 'extra' array recap cannot read";
            return 0;
        }
    }
    return 1;
}

static int copy_kernel(struct journal *j, struct kernel_view *v,
                       const struct kparams_layout **layout)
{
    if (v->config && *v->config) {
        CUlaunchConfig *cfg = journal_dup(j, *v->config, sizeof **v->config);
        if (!cfg)
            return -1;
        if (cfg->numAttrs) {
            cfg->attrs = journal_dup(j, cfg->attrs, cfg->numAttrs * sizeof *cfg->attrs);
            if (!cfg->attrs)
                return -1;
        }
        *v->config = cfg;
    }
    if (*v->params) {
        const struct kparams_layout *l = kparams_of(v->f);
        *layout = l;
        void **copy = journal_alloc(j, (l->count ? l->count : 1) * sizeof *copy);
        if (!copy)
            return -1;
        for (unsigned i = 0; i < l->count; i++) {
            copy[i] = journal_dup(j, (*v->params)[i], l->size[i]);
            if (!copy[i])
                return -1;
        }
        *v->params = copy;
        return 0;
    }
    if (v->extra && *v->extra) {
        size_t size = 0;
        int bad;
        const void *buffer = extra_buffer(*v->extra, &size, &bad);
        void **copy = journal_alloc(j, 5 * sizeof *copy);
        size_t *size_copy = journal_dup(j, &size, sizeof size);
        void *buffer_copy = buffer ? journal_dup(j, buffer, size) : NULL;
        if (!copy || !size_copy || (buffer && !buffer_copy))
            return -1;
        copy[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        copy[1] = buffer_copy;
        copy[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        copy[3] = size_copy;
        copy[4] = CU_LAUNCH_PARAM_END;
        *v->extra = copy;
    }
    return 0;
}

/* --- which node a call adds -------------------------------------------------- */

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int node_created_by(enum drv_id id, const union drv_args *a, CUgraphNodeType *type)
{
    const char *base = drv_table[id].base;
    switch (id) {
    case DRV_cuEventRecordWithFlags:
        *type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
        return (a->cuEventRecordWithFlags.flags & CU_EVENT_RECORD_EXTERNAL) != 0;
    case DRV_cuEventRecordWithFlags_ptsz:
        *type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
        return (a->cuEventRecordWithFlags_ptsz.flags & CU_EVENT_RECORD_EXTERNAL) != 0;
    case DRV_cuStreamWaitEvent:
        *type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
        return (a->cuStreamWaitEvent.Flags & CU_EVENT_WAIT_EXTERNAL) != 0;
    case DRV_cuStreamWaitEvent_ptsz:
        *type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
        return (a->cuStreamWaitEvent_ptsz.Flags & CU_EVENT_WAIT_EXTERNAL) != 0;
    default:
        break;
    }
    if (starts_with(base, "cuLaunchKernel") || starts_with(base, "cuLaunchCooperativeKernel"))
        *type = CU_GRAPH_NODE_TYPE_KERNEL;
    else if (starts_with(base, "cuMemcpy"))
        *type = CU_GRAPH_NODE_TYPE_MEMCPY;
    else if (starts_with(base, "cuMemset"))
        *type = CU_GRAPH_NODE_TYPE_MEMSET;
    else if (starts_with(base, "cuLaunchHostFunc"))
        *type = CU_GRAPH_NODE_TYPE_HOST;
    else
        return 0;
    return 1;
}

/* --- what a call names: handles its replay needs alive -------------------------- */

int journal_op_names_event(const struct journal_op *op, CUevent event)
{
    enum drv_op_kind kind = (enum drv_op_kind)drv_table[op->id].op_kind;
    return (kind == DRV_OP_EVENT_RECORD || kind == DRV_OP_STREAM_WAIT) &&
           drv_args_event(op->id, &op->args) == event;
}

/* The addresses of one side of a copy described by a struct (2D, 3D). */
#define STRUCT_SIDE(p, side, host)                                                      \
    ((host) ? ((p)->side##MemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)(p)->side##Host : 0) \
            : ((p)->side##MemoryType == CU_MEMORYTYPE_DEVICE ||                          \
               (p)->side##MemoryType == CU_MEMORYTYPE_UNIFIED ? (uintptr_t)(p)->side##Device : 0))

#define BOTH(sym) case DRV_##sym: case DRV_##sym##_ptsz:

/* The device (host: 0) or host (host: 1) addresses a copy or memset names,
 * up to two; unified addresses (cuMemcpyAsync) count on both sides. */
static int op_addresses(const struct journal_op *op, int host, uintptr_t at[2])
{
    const union drv_args *a = &op->args;
    switch (op->id) {
    BOTH(cuMemcpyAsync)
        at[0] = a->cuMemcpyAsync.dst, at[1] = a->cuMemcpyAsync.src;
        return 2;
    BOTH(cuMemcpyHtoDAsync_v2)
        at[0] = host ? (uintptr_t)a->cuMemcpyHtoDAsync_v2.srcHost : a->cuMemcpyHtoDAsync_v2.dstDevice;
        return 1;
    BOTH(cuMemcpyDtoHAsync_v2)
        at[0] = host ? (uintptr_t)a->cuMemcpyDtoHAsync_v2.dstHost : a->cuMemcpyDtoHAsync_v2.srcDevice;
        return 1;
    BOTH(cuMemcpyDtoDAsync_v2)
        if (host)
            return 0;
        at[0] = a->cuMemcpyDtoDAsync_v2.dstDevice, at[1] = a->cuMemcpyDtoDAsync_v2.srcDevice;
        return 2;
    BOTH(cuMemcpyHtoAAsync_v2)
        at[0] = host ? (uintptr_t)a->cuMemcpyHtoAAsync_v2.srcHost : 0;
        return host;
    BOTH(cuMemcpyAtoHAsync_v2)
        at[0] = host ? (uintptr_t)a->cuMemcpyAtoHAsync_v2.dstHost : 0;
        return host;
    BOTH(cuMemcpyPeerAsync)
        if (host)
            return 0;
        at[0] = a->cuMemcpyPeerAsync.dstDevice, at[1] = a->cuMemcpyPeerAsync.srcDevice;
        return 2;
    BOTH(cuMemcpy2DAsync_v2) {
        const CUDA_MEMCPY2D *p = a->cuMemcpy2DAsync_v2.pCopy;
        at[0] = STRUCT_SIDE(p, src, host), at[1] = STRUCT_SIDE(p, dst, host);
        return 2;
    }
    BOTH(cuMemcpy3DAsync_v2) {
        const CUDA_MEMCPY3D *p = a->cuMemcpy3DAsync_v2.pCopy;
        at[0] = STRUCT_SIDE(p, src, host), at[1] = STRUCT_SIDE(p, dst, host);
        return 2;
    }
    BOTH(cuMemcpy3DPeerAsync) {
        const CUDA_MEMCPY3D_PEER *p = a->cuMemcpy3DPeerAsync.pCopy;
        at[0] = STRUCT_SIDE(p, src, host), at[1] = STRUCT_SIDE(p, dst, host);
        return 2;
    }
    BOTH(cuMemsetD8Async)
    BOTH(cuMemsetD16Async)
    BOTH(cuMemsetD32Async)
    BOTH(cuMemsetD2D8Async)
    BOTH(cuMemsetD2D16Async)
    BOTH(cuMemsetD2D32Async)
        if (host)
            return 0;
        /* Every memset's first argument is its destination. */
        at[0] = a->cuMemsetD8Async.dstDevice;
        return 1;
    default:
        return 0;
    }
}

#undef BOTH
#undef STRUCT_SIDE

int journal_op_names_memory(const struct journal_op *op, uintptr_t lo, uintptr_t hi, int host)
{
    uintptr_t at[2] = { 0, 0 };
    int n = op_addresses(op, host, at);
    for (int i = 0; i < n; i++)
        if (at[i] && at[i] >= lo && at[i] < hi)
            return 1;
    return 0;
}

/* --- the journal ----------------------------------------------------------------- */

int journal_can_copy(enum drv_id id, const union drv_args *args, const char **why)
{
    static __thread char opaque_why[128];
    union drv_args probe = *args;
    struct kernel_view v;

    switch ((enum drv_op_kind)drv_table[id].op_kind) {
    case DRV_OP_PLAIN:
    case DRV_OP_STRUCT:
    case DRV_OP_EVENT_RECORD:
    case DRV_OP_STREAM_WAIT:
        return 1;
    case DRV_OP_KERNEL:
    case DRV_OP_KERNEL_EX:
        kernel_view_of(id, &probe, &v);
        return kernel_can_copy(&v, why);
    case DRV_OP_ALLOC:
        *why = "memory allocation or free nodes (the program holds their addresses)";
        return 0;
    case DRV_OP_LAUNCH:
        *why = "a graph launch inside the capture (a child graph)";
        return 0;
    default:
        snprintf(opaque_why, sizeof opaque_why, "%s, whose arguments recap cannot copy",
                 drv_table[id].symbol);
        *why = opaque_why;
        return 0;
    }
}

void journal_append(struct journal *j, enum drv_id id, const union drv_args *args)
{
    const char *why = NULL;
    /* Memory nodes are never copied, so only the calls that are not copied
     * are looked at; seen even after the journal stopped copying, since
     * what the graph holds decides whether its executable graphs may be
     * updated. */
    if (!j->replayable || !journal_can_copy(id, args, &why)) {
        j->memory_nodes |= drv_table[id].op_kind == DRV_OP_ALLOC;
        mark_unreplayable(j, why);      /* a journal already stopped keeps its reason */
        return;
    }
    if (j->nops == j->capacity) {
        size_t cap = j->capacity ? j->capacity * 2 : 64;
        struct journal_op *ops = realloc(j->ops, cap * sizeof *ops);
        if (!ops) {
            mark_unreplayable(j, "recap ran out of memory while journaling");
            return;
        }
        j->ops = ops;
        j->capacity = cap;
    }
    struct journal_op *op = &j->ops[j->nops];
    op->id = id;
    op->args = *args;
    op->creates_node = node_created_by(id, args, &op->creates);
    op->node = NULL;
    op->node_fn.known = 0;
    op->stale = 0;
    op->layout = NULL;

    int rc = 0;
    struct kernel_view v;
    if (kernel_view_of(id, &op->args, &v)) {
        rc = copy_kernel(j, &v, &op->layout);
    } else if (drv_table[id].op_kind == DRV_OP_STRUCT) {
        size_t size;
        const void **slot = drv_args_struct_slot(id, &op->args, &size);
        if (*slot) {
            const void *copy = journal_dup(j, *slot, size);
            rc = copy ? 0 : -1;
            *slot = copy;
        }
    }
    if (rc != 0) {
        mark_unreplayable(j, "recap ran out of memory while journaling");
        return;
    }
    j->nops++;
}

int journal_copy(struct journal *dst, const struct journal *src)
{
    journal_init(dst);
    for (size_t i = 0; i < src->nops && dst->replayable; i++) {
        journal_append(dst, src->ops[i].id, &src->ops[i].args);
        if (dst->nops != i + 1)
            break;
        struct journal_op *op = &dst->ops[i];
        op->node = src->ops[i].node;
        op->node_fn = src->ops[i].node_fn;
    }
    dst->origin_key = src->origin_key;
    if (dst->nops != src->nops || !src->replayable) {
        journal_free(dst);
        return -1;
    }
    return 0;
}

int journal_nodes_known(const struct journal *j)
{
    for (size_t i = 0; i < j->nops; i++)
        if (j->ops[i].creates_node && !j->ops[i].node)
            return 0;
    return j->replayable;
}

void **journal_kernel_params(struct journal_op *op, CUlaunchConfig **config)
{
    struct kernel_view v;
    *config = NULL;
    if (!kernel_view_of(op->id, &op->args, &v))
        return NULL;
    if (v.config)
        *config = (CUlaunchConfig *)*v.config;
    return *v.params;
}

CUresult journal_replay(const struct journal *j, size_t *failed_at)
{
    for (size_t i = 0; i < j->nops; i++) {
        CUresult r = drv_invoke(j->ops[i].id, &j->ops[i].args);
        if (r != CUDA_SUCCESS) {
            *failed_at = i;
            return r;
        }
    }
    return CUDA_SUCCESS;
}

int journal_matches(const struct journal *j, const struct graph_census *c, char *why, size_t len)
{
    unsigned long expected[SHAPE_NODE_TYPES] = { 0 };
    long total = 0;

    for (size_t i = 0; i < j->nops; i++) {
        if (!j->ops[i].creates_node)
            continue;
        total++;
        if ((unsigned)j->ops[i].creates < SHAPE_NODE_TYPES)
            expected[j->ops[i].creates]++;
    }
    if (total != c->nodes) {
        snprintf(why, len, "the graph has %ld nodes but recap saw %ld node-creating calls "
                 "(work reached the capture by a path recap does not intercept)", c->nodes, total);
        return 0;
    }
    if (!c->typed)
        return 1;
    for (int t = 0; t < SHAPE_NODE_TYPES; t++) {
        if (expected[t] != c->by_type[t]) {
            snprintf(why, len, "the graph has %lu %s nodes but recap saw %lu such calls",
                     c->by_type[t], shape_node_type_name((CUgraphNodeType)t), expected[t]);
            return 0;
        }
    }
    return 1;
}
