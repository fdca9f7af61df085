/*
 * standin.h - the control surface of the stand-in driver (prefix standin_).
 *
 * The stand-in is a libcuda.so.1 for machines without a GPU: it executes
 * work on the CPU so that tests can check results, and models the documented
 * behaviour of the real driver, failures included. Test programs register
 * C functions as kernels and read the stand-in's counters through these
 * functions. Nothing in librecap may include this header: recap must work
 * against the real driver the same way.
 *
 * Behaviour knobs, read from the environment at the first driver call and
 * settable by the functions below:
 *   STANDIN_DRIVER_VERSION   reported version, e.g. 13000 or 13030 (default 13030)
 *   STANDIN_RECAPTURE_FAILURE where a recapture failure surfaces:
 *                            "call"  the offending captured call returns 918 (default)
 *                            "later" the next call on the capture returns 918
 *                            "end"   only cuStreamEndCapture returns 918
 *   STANDIN_NULL_CALLBACK    "accept" (default) or "reject" a NULL recapture callback
 *   STANDIN_RECAPTURE_CALLBACK "changed" (default): the recapture callback sees only
 *                            nodes whose parameters differ; "every": every matched
 *                            node, unchanged ones with status ELIGIBLE
 *   STANDIN_RECAPTURE_ERROR_NODE  N: the N-th changed node of each recapture is
 *                            reported with status CU_GRAPH_RECAPTURE_ERROR
 *   STANDIN_FAULTS           comma list of NAME@N=CODE (the N-th call of the
 *                            exported function NAME returns CODE and does
 *                            nothing) or NAME@N+=CODE (every call from N on)
 *   STANDIN_DEVICE_MEMORY    bytes of device memory (default 1 GiB); graphs
 *                            and executable graphs are charged for their nodes
 *   STANDIN_REPORT           path: at exit write call counts and live objects as JSON
 *   STANDIN_ASYNC            1: launches run asynchronously, as on a GPU (default 0)
 *   STANDIN_UNLOADED_CODE    "tolerate" (default) or "refuse": a destroy of a graph or
 *                            executable graph naming a kernel whose module or library
 *                            was unloaded counts as a misuse
 *
 * Asynchronous mode. By default every operation runs on the calling thread
 * before the call returns. With STANDIN_ASYNC=1 (or standin_set_async) work
 * given to a stream outside capture is queued, and one worker thread per
 * stream runs that stream's queue in order:
 *   - a kernel launch copies its argument values at the call; a graph launch
 *     takes a deep copy of the executable graph's node parameters, so a later
 *     cuGraphExecUpdate or per-node setter changes only later launches;
 *   - events mark a position in a stream's queue: cuEventQuery answers
 *     CUDA_ERROR_NOT_READY until it is reached, cuEventSynchronize,
 *     cuStreamSynchronize, cuCtxSynchronize and the blocking copies and
 *     memsets wait for real, cuStreamWaitEvent makes the waiting stream's
 *     worker wait; cuStreamQuery answers NOT_READY while work is queued;
 *   - the legacy NULL stream waits for every blocking stream (and the
 *     per-thread default stream) and they wait for it; non-blocking streams
 *     are independent of it;
 *   - kernels and host functions (cuLaunchHostFunc, host nodes) run on the
 *     worker, without the stand-in's lock held;
 *   - a copy to or from pageable (not cuMemAllocHost) host memory returns
 *     once done; cuMemFreeAsync frees when the stream reaches it;
 *   - failures of queued work are returned by the next synchronisation of
 *     that stream (or of the context).
 * Lifetimes follow the driver documentation: cuGraphExecDestroy,
 * cuStreamDestroy and cuEventDestroy return at once and the resources go when
 * the work in flight completes; an executable graph's launches hold its user
 * objects, and a user object's destructor runs on a stand-in thread (never
 * the caller's, never under the stand-in's lock) after the last reference
 * went, including the references of launches in flight. Misuses a GPU would
 * punish silently are made loud (written on stderr with "standin: misuse:"
 * and counted as misuses): any use of a destroyed handle (an event, a
 * stream, a graph: on a GPU, a use after free inside the driver); cuMemFree
 * or cuMemFreeHost of memory that queued work still uses (a pointer-sized
 * kernel argument, a copy or memset address), which the stand-in then
 * waits for; a launch of a kernel whose module was unloaded meanwhile. A program relying on cuMemFree to
 * synchronise (undocumented) is flagged. At exit, and at a context's teardown for its streams, queued work
 * is drained and the threads are joined.
 *
 * Context teardown (READINGS.md "Context teardown"): cuCtxDestroy, the
 * cuDevicePrimaryCtxRelease that drops the primary context's count to zero
 * and cuDevicePrimaryCtxReset destroy every graph, executable graph,
 * cuMemAlloc/cuMemAllocHost allocation, stream, event and module of the
 * context, as their own destroy calls would (later uses are misuses, live
 * counts drop); cuMemAllocAsync memory stays. A reset keeps the context and
 * its count; after the last release the next retain makes a new primary
 * context.
 *
 * Every point where the documentation leaves the real driver's behaviour
 * open, and the knob value giving each reading, is listed in READINGS.md;
 * tests/gpu/recapture_conformance says which value a real driver matches.
 */
#ifndef STANDIN_H
#define STANDIN_H

#include <stddef.h>
#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launch geometry handed to a kernel. */
struct standin_dims {
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
};

/* A kernel: runs the whole grid on the calling CPU thread. params[i] points
 * at the i-th argument value, as in cuLaunchKernel's kernelParams. */
typedef void (*standin_kernel_fn)(const struct standin_dims *dims, void **params);

/* Registers a kernel under `name` with `nparams` arguments of the given
 * sizes (what cuFuncGetParamInfo reports; offsets are laid out with natural
 * alignment). Every module loaded with cuModuleLoadData/cuLibraryLoadData
 * holds all registered kernels. Returns 0, or -1 if the name is taken. */
int standin_register_kernel(const char *name, standin_kernel_fn fn,
                            unsigned nparams, const size_t *param_sizes);

/* Traits of a registered kernel that the executable-graph update rules
 * look at (a node cannot be updated to a function that uses CUDA dynamic
 * parallelism, or device-side graph launch, when the original did not).
 * Returns 0, or -1 if no kernel has that name. */
#define STANDIN_KERNEL_USES_CDP 1u
#define STANDIN_KERNEL_DEVICE_GRAPH_LAUNCH 2u
int standin_set_kernel_traits(const char *name, unsigned traits);

/* Calls of the exported function `name` (exact symbol, e.g.
 * "cuGraphInstantiateWithFlags") since start or the last reset, whoever
 * made them (the program or recap). */
unsigned long standin_call_count(const char *name);
void standin_reset_counts(void);

/* Row i of the call counts: every exported driver function the stand-in
 * counts, in a fixed order, with its calls so far (what the exit report
 * writes, readable mid-run: a test compares the driver calls two runs made
 * over the same stretch of a program). Returns the number of rows; fills
 * the outputs only when i is below it. */
size_t standin_call_row(size_t i, const char **name, unsigned long *count);

/* Live objects of a kind: "context", "graph", "exec", "stream", "event",
 * "module", "memory" (device allocations), "user_object", "cond_handle"
 * (conditional handles some graph or node still names). A context's
 * teardown lowers them at once. */
long standin_live_objects(const char *kind);

/* Misuses the stand-in detected (double destroy, use of a destroyed or
 * poisoned object, a driver call from inside a recapture callback, ...),
 * and the text of the last one ("" if none). */
unsigned long standin_misuse_count(void);
const char *standin_last_misuse(void);

/* Fault injection: the `nth` call (1-based, counted from now) of `name`
 * returns `code` without effect; with persist, every call from then on. */
void standin_fault(const char *name, unsigned long nth, CUresult code, int persist);
void standin_clear_faults(void);

void standin_set_driver_version(int version);
/* "call", "later" or "end"; returns -1 for anything else. */
int standin_set_recapture_failure(const char *where);
void standin_set_null_callback_accepted(int accepted);

/* The same knobs as STANDIN_RECAPTURE_ERROR_NODE (0: off) and
 * STANDIN_DEVICE_MEMORY, for tests. */
void standin_set_recapture_error_node(unsigned long nth);
void standin_set_device_memory(size_t bytes);

/* STANDIN_ASYNC for tests: switching off first waits for all queued work
 * and due destructors and ends the worker threads. standin_async tells
 * whether the mode is on. standin_async_drain waits for all queued work and
 * every due user-object destructor (what a test needs before counting). */
void standin_set_async(int on);
int standin_async(void);
void standin_async_drain(void);

/* Sets the value of a conditional handle, as a kernel would with
 * cudaGraphSetConditional (callable from inside a kernel). Returns 0, or -1
 * for an unknown handle. */
int standin_set_conditional(CUgraphConditionalHandle handle, unsigned value);

/* Row i of the stand-in's cuGetProcAddress table (base name, exact symbol,
 * ABI version, flavour: 0 any flags, 1 legacy, 2 per-thread). Returns the
 * number of rows; fills the outputs only when i is below it. */
size_t standin_procaddr_row(size_t i, const char **base, const char **symbol, int *abi,
                            int *flavour);

/* Device bytes in use (allocations plus what graphs and executable graphs
 * are charged). */
size_t standin_device_memory_used(void);

#ifdef __cplusplus
}
#endif

#endif
