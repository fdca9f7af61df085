/*
 * journal.h - the record of a capture's calls, for replay (prefix journal_).
 *
 * Owns: a copy of every call made into a journaled capture, deep enough to
 * repeat it later (kernel argument values, launch configurations, structs
 * passed by pointer), and replaying them in order into a plain capture when
 * a recapture fails. Also what the calls should have produced, so a fresh
 * capture's journal can be checked against its graph before any recapture
 * relies on it. Must never: replay a journal that lost a call, or keep a
 * pointer into the program's memory that the program may reuse (argument
 * arrays are copied; host buffers named by memcpy stay the program's, as in
 * the graph itself).
 */
#ifndef RECAP_JOURNAL_H
#define RECAP_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "shim/base/driver_api.h"
#include "shim/base/kparams.h"
#include "shim/base/shape.h"

/* The function a kernel node runs, as the driver holds it: the runtime
 * launches a CUkernel, which the node keeps with its context. Read from
 * the node once; it lasts as long as the node, because a call naming
 * another function is never written into it. */
struct node_function {
    CUfunction func;
    CUkernel kern;
    CUcontext ctx;
    int known;
};

struct journal_op {
    enum drv_id id;
    union drv_args args;            /* pointers redirected to copies below */
    CUgraphNodeType creates;        /* node the call adds, if creates_node */
    int creates_node;
    CUgraphNode node;               /* that node, where recap learned it */
    struct node_function node_fn;   /* what that node's kernel parameters run */
    int stale;                      /* the node still holds older arguments */
    const struct kparams_layout *layout;  /* a kernel's argument sizes, if copied by them */
};

struct journal_chunk;

struct journal {
    struct journal_op *ops;
    size_t nops, capacity;
    struct journal_chunk *chunks;   /* copies of argument data */
    int replayable;                 /* 0 once a call could not be copied */
    char why_not[160];              /* the first such call */
    int memory_nodes;               /* a call made a memory allocation or free node */
    const void *origin_key;         /* the capture's origin stream (capture_table's key) */
    /* As a graph's recording (shim/repeat/self_record.h), under its stale_lock. */
    size_t stale_ops;               /* calls whose node holds older arguments */
    int listed_stale;               /* in self_record's list of stale recordings */
    int in_use;                     /* a capture records against it */
};

void journal_init(struct journal *j);
void journal_free(struct journal *j);

/* Appends a call that succeeded in the capture. A call whose arguments
 * cannot be copied (unknown kernel layout, alloc/free, opaque arguments)
 * makes the journal unreplayable, with the reason kept. Out of memory does
 * too. */
void journal_append(struct journal *j, enum drv_id id, const union drv_args *args);

/* Whether a recorded call names `event` (records or waits for it), or
 * memory in [lo, hi) on the device (host 0) or host (host 1) side of a
 * copy or memset: handles its replay needs valid (shim/repeat/capture_holds.h). */
int journal_op_names_event(const struct journal_op *op, CUevent event);
int journal_op_names_memory(const struct journal_op *op, uintptr_t lo, uintptr_t hi, int host);

/* Whether a call can be journaled faithfully, without appending it; *why
 * says why not. */
int journal_can_copy(enum drv_id id, const union drv_args *args, const char **why);

/* A copy of `src` of its own (argument data included), each call knowing
 * the node and function src's does; no call stale, in no list. Returns 0,
 * or -1 (dst empty) when memory ran out or src is not replayable. */
int journal_copy(struct journal *dst, const struct journal *src);

/* Whether every node-creating call knows its node (a journal a capture
 * can be recorded against). */
int journal_nodes_known(const struct journal *j);

/* The argument record of a copied kernel launch: its kernelParams copy
 * (NULL when launched with `extra`) and the launch configuration copy
 * (cuLaunchKernelEx only, else NULL). For comparing and updating a
 * recording in place. */
void **journal_kernel_params(struct journal_op *op, CUlaunchConfig **config);

/* Recordings (shim/repeat/self_record.h) whose graph holds older arguments,
 * listed so that any reader of graphs can bring them up to date first.
 * One lock guards the list and every journal's stale marks and in_use;
 * journal_free takes a journal off the list. */
extern int journal_stale_count;      /* read without the lock: 0 is "none" */
void journal_stale_lock(void);
void journal_stale_unlock(void);
/* Caller holds the lock. List returns -1 when memory ran out. */
int journal_list_stale(struct journal *j);
void journal_unlist_stale(struct journal *j);
void journal_each_stale(void (*fn)(struct journal *j));

/* Replays every call in order. Returns CUDA_SUCCESS, or the first failing
 * call's result with its index in *failed_at. */
CUresult journal_replay(const struct journal *j, size_t *failed_at);

/* Checks that the calls account for every node of a captured graph: same
 * total, same count per node type. Returns 1 if they do; else 0 with the
 * mismatch described in why (len bytes). */
int journal_matches(const struct journal *j, const struct graph_census *c, char *why, size_t len);

#endif
