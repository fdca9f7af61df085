/*
 * standin_internal.h - the stand-in driver's private model (prefix si_).
 *
 * Owns: the object structs every stand-in file shares, the one lock that
 * guards them, the entry/exit protocol of exported functions, and the
 * prototypes the files call across. Must never be included by anything
 * outside the stand-in's own sources: tests see only standin.h and cuda.h.
 *
 * Invariants, in one place:
 * - Every exported driver function runs between si_enter() and si_leave(),
 *   holding si.lock. The lock is recursive only because user code (kernels,
 *   host functions, destructors, the recapture callback) runs under it and
 *   may call the standin_* control API; driver calls from user code are
 *   refused by si_enter before anything else happens.
 * - Handles are pointers to structs that start with struct si_obj. Headers
 *   are never freed: a destroyed object stays as a tombstone (state
 *   SI_DEAD) so that a later use is recognised as a misuse instead of
 *   aliasing a new object. Payloads (parameters, arrays) are freed.
 * - Every handle ever created is in the registry, so a pointer from the
 *   program is dereferenced only after it was found there.
 * - Asynchronous mode (STANDIN_ASYNC, standin_async.c): each stream's
 *   worker thread takes si.lock to run the head of its queue and lets go of
 *   it only around user code (si_user_code_begin/end) and in
 *   pthread_cond_wait on si.progress. Nobody waits on si.progress holding
 *   si.lock more than once (the recursion is only for the control API).
 */
#ifndef STANDIN_INTERNAL_H
#define STANDIN_INTERNAL_H

/* Exposes the exact versioned prototypes (cuStreamBeginCapture next to
 * cuStreamBeginCapture_v2, the _ptsz/_ptds twins): each exported function is
 * then checked against NVIDIA's own declaration of that exact symbol. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "shim/base/cuda_compat.h"
#include "standin.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SI_EXPORT __attribute__((visibility("default")))
#define SI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Function ids: one per exported symbol, from standin_exports.def.     */

enum si_fn_id {
#define SI_FN(sym, base, abi, flavour) SI_FN_##sym,
#include "standin_exports.def"
    SI_FN_COUNT
};
extern const char *const si_fn_names[SI_FN_COUNT];

/* Entry protocol. si_enter locks, counts the call, applies fault
 * injection, refuses calls from user code and (when needs_init) calls
 * before cuInit; it returns nonzero with *early set (lock released) when
 * the call must return at once. si_leave unlocks and passes rc through. */
int si_enter(enum si_fn_id fn, bool needs_init, CUresult *early);
CUresult si_leave(CUresult rc);

#define SI_ENTER_AS(sym, needs_init) \
    CUresult si_early_; \
    if (si_enter(SI_FN_##sym, needs_init, &si_early_)) return si_early_
#define SI_ENTER(sym) SI_ENTER_AS(sym, true)

/* An exported function that only forwards to its implementation. */
#define SI_API(sym, params, call) \
    SI_EXPORT CUresult CUDAAPI sym params { SI_ENTER(sym); return si_leave(call); }

/* ------------------------------------------------------------------ */
/* Small containers.                                                   */

struct si_vec {
    void **v;
    size_t n, cap;
};
int si_vec_push(struct si_vec *vec, void *item);           /* 0 or -1 */
bool si_vec_contains(const struct si_vec *vec, const void *item);
bool si_vec_remove(struct si_vec *vec, const void *item);  /* first match, order kept */
int si_vec_copy(struct si_vec *dst, const struct si_vec *src);
void si_vec_free(struct si_vec *vec);
bool si_vec_same_set(const struct si_vec *a, const struct si_vec *b);

void *si_calloc(size_t n, size_t size); /* calloc that aborts: the model never half-builds */
char *si_strdup(const char *s);

/* ------------------------------------------------------------------ */
/* Objects.                                                            */

enum si_kind {
    SI_CONTEXT = 1, SI_STREAM, SI_EVENT, SI_MODULE, SI_LIBRARY, SI_FUNCTION,
    SI_KERNEL, SI_GRAPH, SI_NODE, SI_EXEC, SI_USER_OBJECT, SI_KIND_COUNT
};
enum si_obj_state { SI_LIVE = 1, SI_DEAD, SI_POISONED };

struct si_obj {
    uint16_t kind;
    uint16_t state;
};

void si_obj_init(void *obj, enum si_kind kind); /* registers, counts as live */
void si_obj_kill(void *obj);                    /* marks dead, uncounts */
/* Appends every registered object of `kind` not destroyed yet (live or
 * poisoned), in no particular order (context teardown). */
void si_registry_collect(enum si_kind kind, struct si_vec *out);

struct si_function;

/* Validates a handle of `kind`: NULL or unknown -> the kind's error code;
 * destroyed or poisoned -> misuse and error. */
CUresult si_get(const void *handle, enum si_kind kind, void *out);
/* Finds a registered handle of `kind` whatever its state (for destroys). */
CUresult si_get_any(const void *handle, enum si_kind kind, void *out);
/* Same, accepting a CUfunction or a CUkernel (the driver allows either). */
CUresult si_get_func(const void *handle, struct si_function **out);

struct si_context {
    struct si_obj h;
    CUdevice dev;
    unsigned flags;
    bool primary;
    int refs;
};

struct si_kfunc { /* a registered kernel */
    char *name;
    standin_kernel_fn fn;
    unsigned nparams;
    size_t *sizes, *offsets;
    size_t arg_bytes;
    unsigned traits; /* STANDIN_KERNEL_* */
};

struct si_module {
    struct si_obj h;
    struct si_context *ctx; /* NULL for a library: context-independent */
    struct si_vec funcs;    /* struct si_function, created on first lookup */
};

struct si_function { /* kind SI_FUNCTION (CUfunction) or SI_KERNEL (CUkernel) */
    struct si_obj h;
    struct si_kfunc *k;
    struct si_module *mod;
    struct si_context *ctx; /* owning context; NULL for a CUkernel */
    struct si_vec per_ctx;  /* CUkernel: its CUfunction per context */
    struct si_function *kernel; /* a CUkernel's CUfunction: that CUkernel */
};

enum si_stream_kind { SI_STREAM_USER, SI_STREAM_LEGACY, SI_STREAM_PER_THREAD };

struct si_capture;

/* Asynchronous mode: a stream's queue. `submitted` and `completed` count
 * items; an item's position (its seq) is done once completed >= seq. */
struct si_work;
struct si_queue {
    struct si_work *head, *tail; /* head: running or next to run */
    unsigned long long submitted, completed;
    pthread_t worker;
    bool has_worker;             /* a worker thread runs this queue */
    bool stop;                   /* worker: end once the queue is empty */
    bool listed;                 /* in si.queues */
    CUresult error;              /* first failure of queued work, for the next synchronisation */
};

struct si_stream {
    struct si_obj h;
    struct si_queue q;
    enum si_stream_kind skind;
    unsigned flags;
    int priority;
    CUstreamAttrValue attrs[16]; /* cuStreamSetAttribute's, by id (priority: above) */
    struct si_context *ctx;
    struct si_capture *cap; /* capture this stream takes part in, or NULL */
    struct si_vec deps;     /* while capturing: what the next node depends on */
    CUgraphEdgeData *zero_edges; /* edge data handed out by capture queries */
    size_t zero_edges_len;
};

struct si_event {
    struct si_obj h;
    struct si_context *ctx; /* the context current at creation */
    unsigned flags;
    bool recorded;
    double time_ms;
    unsigned long long cap_id; /* nonzero: last recorded in that capture */
    struct si_vec cap_deps;    /* the capture's dependencies at that record */
    struct si_stream *at_stream; /* async: the queue position of the last record */
    unsigned long long at_seq;
    unsigned long gen;         /* async: counts records, so a stale one sets no time */
};

struct si_user_object {
    struct si_obj h;
    void *ptr;
    CUhostFn destroy;
    long refs;
};

/* Memory: every allocation the model made, ordered by address. */
enum si_mem_kind { SI_MEM_DEVICE, SI_MEM_HOST, SI_MEM_GRAPH };
struct si_alloc {
    uintptr_t base;
    size_t size;
    enum si_mem_kind kind;
    struct si_context *ctx;
    int refs;        /* SI_MEM_GRAPH: the alloc node and executable graphs */
    bool graph_live; /* SI_MEM_GRAPH: allocated by a launch, not yet freed */
    bool async;      /* from cuMemAllocAsync outside capture */
    bool free_queued; /* async mode: a cuMemFreeAsync of it waits in a queue */
};
struct si_alloc *si_mem_find(uintptr_t addr);          /* containing addr */
struct si_alloc *si_mem_find_range(uintptr_t addr, size_t len, bool device_only);
CUresult si_mem_alloc(size_t size, enum si_mem_kind kind, struct si_context *ctx,
                      struct si_alloc **out);
void si_mem_release(struct si_alloc *a); /* drops a reference, frees at zero */
CUresult si_mem_charge(size_t bytes);    /* device capacity accounting */
void si_mem_uncharge(size_t bytes);
CUmemorytype si_mem_type_of(uintptr_t addr); /* DEVICE or HOST for unified copies */

/* ------------------------------------------------------------------ */
/* Node parameters: the canonical CUgraphNodeParams plus what it owns. */

struct si_cond;

struct si_params {
    CUgraphNodeParams np;
    void **argv;              /* kernel: owned argument copies (np.kernel.kernelParams) */
    struct si_function *func; /* kernel: the resolved function or kernel */
    struct si_context *kctx;  /* kernel: owning context of the function */
    int cooperative, priority;
    CUmemAccessDesc *access;  /* alloc: owned copy of the access descriptors */
    struct si_alloc *alloc;   /* alloc/free: backing allocation */
    struct si_graph *child;   /* child graph: owned graph */
    struct si_cond *cond;     /* conditional: owned bodies */
};

/* Builds owned params from what the program passed (validating it). */
CUresult si_params_build(struct si_params *out, const CUgraphNodeParams *in,
                         struct si_context *ctx);
CUresult si_params_kernel(struct si_params *out, const CUDA_KERNEL_NODE_PARAMS *kp,
                          struct si_context *ctx);
void si_params_copy(struct si_params *dst, const struct si_params *src);
void si_params_free(struct si_params *p);
bool si_params_equal(const struct si_params *a, const struct si_params *b);
CUresult si_params_run(const struct si_params *p, struct si_stream *stream);

/* The one rule for "would an executable-graph update with new params be
 * accepted": used by cuGraphExecUpdate, every per-node setter and the
 * recapture eligibility check. Returns CU_GRAPH_EXEC_UPDATE_SUCCESS or the
 * result code naming the violated restriction. */
enum si_update_scope { SI_UPDATE_WHOLE_GRAPH, SI_UPDATE_SINGLE_NODE };
struct si_update_ctx {
    unsigned long long exec_flags;
    bool exec_has_device_launch;
    enum si_update_scope scope;
};
CUgraphExecUpdateResult si_update_rule(const struct si_params *old_p,
                                       const struct si_params *new_p,
                                       const struct si_update_ctx *uc);

/* ------------------------------------------------------------------ */
/* Graphs.                                                             */

struct si_node {
    struct si_obj h;
    struct si_graph *graph;
    struct si_params p;
    struct si_vec deps; /* in edge order */
    struct si_vec outs;
    struct si_node *clone_of;
    struct si_param_share *share; /* STANDIN_CLONE_SHARES: kernel arguments shared with clones */
    unsigned long visit; /* traversal mark, see si_next_visit() */
    size_t scratch;      /* transient index while cloning or instantiating */
};

struct si_cond {
    CUgraphConditionalHandle handle;
    struct si_graph *bodies[8];
    unsigned nbodies;
    CUgraph out_bodies[8]; /* what phGraph_out pointed at, kept for queries */
};

/* A conditional handle lives while its graph or any node's parameters
 * name it: an executable graph keeps working after its graph is destroyed,
 * and a whole-graph update hands it the new graph's handles (measured on
 * driver 580: tests/gpu/conditional.cu's probe). */
struct si_cond_handle {
    unsigned long long id;
    unsigned default_value, value;
    unsigned flags;
    unsigned refs;             /* the graph's own, plus one per si_params naming it */
};

struct si_graph {
    struct si_obj h;
    struct si_context *ctx;    /* owning context: current at creation (a capture's: its
                                * stream's); NULL if none was; the graph goes with it */
    struct si_vec nodes;       /* creation order */
    struct si_vec urefs;       /* one entry per user-object reference held */
    struct si_capture *capturing;
    size_t charged;
    struct si_node *owner;     /* set when a child-graph node owns this graph */
    int alloc_execs;           /* executable graphs alive that hold its alloc nodes */
    struct si_vec cond_handles;
};

CUresult si_graph_new(struct si_graph **out);   /* owned by the current context */
/* Whether a destroy of this graph or executable graph is a misuse under
 * STANDIN_UNLOADED_CODE=refuse: one of its kernel nodes names a function
 * whose module or library was unloaded. Whether the real driver survives
 * that destroy is not known (a cuda.core program under recap died at its
 * exit, after its library's unload); the default tolerates it. */
struct si_exec;
bool si_graph_names_unloaded_code(const struct si_graph *g);
bool si_exec_names_unloaded_code(const struct si_exec *e);
void si_graph_free(struct si_graph *g);          /* tombstones graph and nodes */
CUresult si_graph_clone(struct si_graph *src, struct si_graph **out);
/* STANDIN_CLONE_SHARES=1 models driver 580 (CUDA 13.0) as measured with
 * PyTorch's graphs (tests/gpu/probe_clone_write.py): a clone's kernel
 * nodes share their arguments with the original's until one of them is
 * set; that set leaves every other sharer broken, and so are later clones
 * of a broken node; instantiating a graph with a broken node, or updating
 * an executable graph from one, crashed the driver. Setting a node gives
 * it arguments of its own again. si_node_params_set is called after a
 * node's parameters were set; si_graph_check_shared counts a misuse and
 * returns CUDA_ERROR_ILLEGAL_STATE where the driver would have crashed. */
void si_node_params_set(struct si_node *n);
CUresult si_graph_check_shared(struct si_graph *g, const char *what);
CUresult si_graph_add(struct si_graph *g, struct si_params *p, /* takes p */
                      struct si_node *const *deps, size_t ndeps, struct si_node **out);
CUresult si_graph_check_deps(struct si_graph *g, const CUgraphNode *deps, size_t n,
                             const CUgraphEdgeData *edata);
bool si_graph_has_type(const struct si_graph *g, CUgraphNodeType type, bool recursive);
void si_graph_release_user_objects(struct si_graph *g);
void si_graph_poison(struct si_graph *g, const char *why);
size_t si_graph_index(const struct si_graph *g, const struct si_node *n);
void si_user_object_release(struct si_user_object *u, long count);
struct si_cond_handle *si_cond_handle_find(CUgraphConditionalHandle h);
void si_cond_handle_hold(CUgraphConditionalHandle h);
void si_cond_handle_drop(CUgraphConditionalHandle h);

/* ------------------------------------------------------------------ */
/* Executable graphs.                                                  */

struct si_exec_node {
    struct si_node *key; /* node of the graph it was instantiated from (STANDIN_EXEC_NODES) */
    struct si_params p;
    size_t *deps;
    size_t ndeps;
    bool enabled;
    struct si_exec *child;     /* child graph node */
    struct si_exec *bodies[8]; /* conditional node */
    unsigned nbodies;
};

struct si_exec {
    struct si_obj h;
    struct si_context *ctx;     /* owning context: its graph's (else the current one) */
    unsigned long long flags;
    size_t n;
    struct si_exec_node *nodes; /* creation order of the source graph */
    size_t *order;              /* a topological order, creation order first */
    struct si_vec urefs;
    size_t charged;
    struct si_graph *src;
    bool has_alloc, has_device_launch;
    long inflight;      /* async: launches queued or running */
    bool free_deferred; /* async: destroyed while launches were in flight */
};
CUresult si_exec_launch(struct si_exec *e, struct si_stream *s);
/* Async launches: the checks and memory-node bookkeeping a launch does at
 * submission, a private deep copy to run (a later update or destroy cannot
 * touch it), and running that copy on a worker. */
CUresult si_exec_launch_prepare(struct si_exec *e);
struct si_exec *si_exec_snapshot(const struct si_exec *e);
CUresult si_exec_run_snapshot(struct si_exec *snap, struct si_stream *s);
struct si_exec_node *si_exec_find(struct si_exec *e, const struct si_node *key);
/* Builds the executable form of g (nested: not a program handle). */
CUresult si_exec_build(struct si_graph *g, unsigned long long flags, bool nested,
                       struct si_exec **out, struct si_node **err_node,
                       CUgraphInstantiateResult *result);
void si_exec_free(struct si_exec *e);

/* ------------------------------------------------------------------ */
/* Context teardown (cuCtxDestroy, the last cuDevicePrimaryCtxRelease,  */
/* cuDevicePrimaryCtxReset): each file destroys what it owns of `ctx`,  */
/* as its own destroy call would, so later uses are the usual misuses.   */
/* Called in this order, after the context's queued work drained.        */

void si_capture_drop_context(struct si_context *ctx); /* captures on its streams or into its graphs end */
void si_exec_drop_context(struct si_context *ctx);
void si_graph_drop_context(struct si_context *ctx);   /* graphs no node owns */
void si_mem_drop_context(struct si_context *ctx);     /* cuMemAlloc and cuMemAllocHost memory */
void si_stream_drop_context(struct si_context *ctx);  /* its streams and events */
void si_module_drop_context(struct si_context *ctx);  /* its modules, its functions of library kernels */

/* ------------------------------------------------------------------ */
/* Streams, capture, recapture.                                        */

struct si_recapture;

struct si_capture {
    unsigned long long id;
    CUstreamCaptureMode mode;
    pthread_t thread;
    struct si_stream *origin;
    struct si_graph *graph;
    bool graph_owned; /* false: captured into the caller's graph */
    bool graph_handed_out; /* a capture query gave the program the graph */
    bool invalidated;
    struct si_vec streams;
    struct si_recapture *rc;
    struct si_capture *next;
};

/* Stream handles: NULL and CU_STREAM_LEGACY/PER_THREAD resolved; `ptsz`
 * says whether NULL means the per-thread stream (a _ptsz/_ptds entry). */
CUresult si_stream_get(CUstream h, bool ptsz, struct si_stream **out);
bool si_stream_blocking(const struct si_stream *s);

/* Gate every stream-directed call passes before acting: legacy-stream
 * conflicts, invalidated captures, a recapture failure waiting to surface.
 * Returns CUDA_SUCCESS when the call may proceed (the stream may or may not
 * be capturing). */
CUresult si_capture_gate(struct si_stream *s);
/* Enqueue work: runs it now when the stream is not capturing, else adds a
 * node (or matches one, during a recapture). Takes ownership of p. */
CUresult si_submit(struct si_stream *s, struct si_params *p, struct si_node **node_out);
/* "Potentially unsafe" calls (cuMemAlloc, synchronous copies, ...). */
CUresult si_capture_unsafe_call(const char *what);
/* Synchronous work on the default stream of the calling entry point. */
CUresult si_sync_default_stream(bool ptds, const char *what, struct si_stream **out);
/* Work no capture holds, on stream h: refused (and the capture invalidated)
 * when h captures; else *out is the stream, ready for the work. */
CUresult si_stream_uncapturable(CUstream h, bool ptsz, const char *what, struct si_stream **out);
void si_capture_invalidate(struct si_capture *c, const char *why);
struct si_capture *si_capture_by_id(unsigned long long id);
bool si_any_capture_active(void);
CUresult si_capture_begin(struct si_stream *s, CUstreamCaptureMode mode, struct si_graph *into,
                          const CUgraphNode *deps, size_t ndeps, struct si_capture **out);
CUresult si_capture_add_node(struct si_stream *s, struct si_params *p, struct si_node **out);
/* Events in capture. */
CUresult si_capture_event_record(struct si_stream *s, struct si_event *ev, unsigned flags);
CUresult si_capture_event_wait(struct si_stream *s, struct si_event *ev, unsigned flags);

/* Recapture hooks called by the capture state machine. */
CUresult si_recapture_match(struct si_capture *c, struct si_stream *s, struct si_params *p,
                            struct si_node **out);
CUresult si_recapture_end(struct si_capture *c);
CUresult si_recapture_gate(struct si_capture *c);
bool si_recapture_silent(const struct si_capture *c);
void si_recapture_free(struct si_recapture *rc);
CUresult si_recapture_fail(struct si_capture *c, const char *why);

/* Events and timing. */
double si_now_ms(void);

/* ------------------------------------------------------------------ */
/* Asynchronous execution (standin_async.c).                           */

enum si_work_kind { SI_WORK_OP, SI_WORK_GRAPH, SI_WORK_EVENT, SI_WORK_WAIT, SI_WORK_FREE };
struct si_wait_point {
    struct si_stream *s;
    unsigned long long seq;
};
struct si_work {
    enum si_work_kind kind;
    struct si_params p;              /* OP: owned parameters (kernel arguments copied) */
    struct si_exec *snap, *exec;     /* GRAPH: the copy that runs; the launched exec */
    struct si_vec urefs;             /* GRAPH: user-object references the launch holds */
    struct si_event *ev;             /* EVENT */
    unsigned long gen;
    struct si_alloc *alloc;          /* FREE: memory freed when the item runs */
    struct si_wait_point *waits;     /* positions of other queues to wait for */
    size_t nwaits;
    unsigned long long seq;
    struct si_work *next;
};

bool si_async_active(void);
struct si_work *si_work_new(enum si_work_kind kind);
void si_work_wait_on(struct si_work *w, struct si_stream *s, unsigned long long seq);
/* Appends to s's queue (adding the legacy stream's implicit waits), starts
 * its worker if needed, and returns the item's position (w may be freed by
 * its worker as soon as the caller lets go of si.lock). */
unsigned long long si_async_enqueue(struct si_stream *s, struct si_work *w);
/* si_submit's asynchronous path: queues an operation (takes p). */
CUresult si_async_submit(struct si_stream *s, struct si_params *p);
bool si_async_done(const struct si_stream *s, unsigned long long seq);
void si_async_wait_point(struct si_stream *s, unsigned long long seq);
/* Waits for everything queued on s so far (legacy stream: and on every
 * blocking stream); returns and clears the first failure of that work. */
CUresult si_async_sync_stream(struct si_stream *s);
CUresult si_async_query_stream(struct si_stream *s);
CUresult si_async_sync_all(struct si_context *ctx);
/* Context teardown: waits for the context's streams and ends their workers. */
void si_async_end_context(struct si_context *ctx);
/* A user object whose last reference went: destroyed on the stand-in's
 * release thread, never under si.lock. */
void si_async_destroy_user_object(struct si_user_object *u);
/* cuMemFree of memory that queued work still uses: a violation, then a
 * wait for that work. Returns false if the allocation vanished meanwhile. */
bool si_async_before_free(uintptr_t base, const char *who);
/* A misuse a GPU would punish silently: counted and written on stderr. */
void si_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ */
/* Process-wide state.                                                 */

enum si_surface { SI_SURFACE_CALL, SI_SURFACE_LATER, SI_SURFACE_END };

struct si_fault {
    enum si_fn_id fn;
    unsigned long at;
    bool persist;
    CUresult code;
    struct si_fault *next;
};

struct si_thread {
    struct si_context *ctx_stack[32];
    int depth;
    CUstreamCaptureMode mode;
    struct si_stream *per_thread;
    int user_code_depth;
    const char *user_code_what;
    bool worker; /* a stream worker: lets go of si.lock while user code runs */
};
extern __thread struct si_thread si_tls;

struct si_state {
    pthread_mutex_t lock; /* guards everything below and every object */
    bool initialized;
    int driver_version;
    enum si_surface surface;
    bool null_callback_accepted;
    bool callback_every_node; /* STANDIN_RECAPTURE_CALLBACK=every */
    bool unloaded_code_refused; /* STANDIN_UNLOADED_CODE=refuse (si_names_unloaded_code) */
    bool clone_shares_params;   /* STANDIN_CLONE_SHARES=1 (si_graph_check_shared) */
    bool exec_nodes_follow_update; /* STANDIN_EXEC_NODES=updated (standin_exec_update.c) */
    bool update_freed_accepted; /* STANDIN_UPDATE_FREED=accept (standin_params.c: same_home) */
    unsigned long error_node;
    size_t capacity, used;
    char *report_path;
    unsigned long calls[SI_FN_COUNT];
    struct si_fault *faults;
    unsigned long misuses;
    char last_misuse[256];
    long live[SI_KIND_COUNT];
    long live_memory;
    struct si_capture *captures;
    unsigned long long next_capture_id, next_cond_handle;
    struct si_vec kernels;
    struct si_vec allocs;
    struct si_vec cond_handles;
    struct si_context *primary;
    struct si_stream *legacy;
    /* Asynchronous mode. */
    bool async;              /* STANDIN_ASYNC: launches run on stream workers */
    bool async_closed;       /* after the exit drain: work runs synchronously again */
    bool async_stopping;     /* the exit drain asks workers and the releaser to end */
    pthread_cond_t progress; /* with lock: a queue moved, work arrived, a release is due */
    struct si_vec queues;    /* streams whose queue was ever used */
    struct si_vec reap;      /* boxed pthread_t of ended threads, to join */
    struct si_vec releases;  /* user objects whose destructor is due */
    bool has_releaser;
    pthread_t releaser;
    unsigned long releases_running;
};
extern struct si_state si;

void si_misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct si_context *si_current_ctx(void);
CUresult si_need_ctx(struct si_context **out);

/* User code runs between these: driver calls from it are refused. */
void si_user_code_begin(const char *what);
void si_user_code_end(void);

struct si_kfunc *si_kernel_lookup(const char *name);
/* A CUkernel's CUfunction in `ctx` (cuKernelGetFunction's), made once. */
struct si_function *si_kernel_function(struct si_function *kernel, struct si_context *ctx);

/* Locks the state for the standin_* control API (sets it up first). */
void si_control_lock(void);
void si_control_unlock(void);
unsigned long si_next_visit(void);

/* Charges (bytes of device memory) for graphs and executable graphs. */
#define SI_GRAPH_NODE_CHARGE (1024u)
#define SI_EXEC_BASE_CHARGE (64u * 1024u)
#define SI_EXEC_NODE_CHARGE (4u * 1024u)

#endif
