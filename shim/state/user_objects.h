/*
 * user_objects.h - keeping the program's user objects alive as long as
 * work that uses them may run (module prefix uobj_).
 *
 * A program attaches user objects to a graph so that the resources its
 * kernels use outlive every launch of the graph: the graph holds
 * references, an executable graph instantiated from it takes copies, and
 * the destructors run once the last reference is released and the work is
 * done. When recap serves an instantiation by updating an executable graph
 * that was instantiated from another graph, that executable graph holds
 * the other graph's references, not this one's. So recap takes references
 * to this graph's objects on the executable graph's behalf, and gives them
 * back only after the executable graph has moved on (a later update, or
 * its destruction) and its last launch has completed, which an event
 * recorded on that launch's stream tells.
 *
 * Owns: the user objects the program attached to each graph (from
 * cuGraphRetainUserObject / cuGraphReleaseUserObject), the references recap
 * holds per executable graph, and the releases waiting for work to finish.
 * Must never: release a reference before the work that may use it has
 * completed, record an event on a stream that is capturing, or call the
 * driver while holding uobj_lock.
 */
#ifndef RECAP_USER_OBJECTS_H
#define RECAP_USER_OBJECTS_H

#include "shim/base/cuda_compat.h"

/* Nonzero while some executable graph holds references taken by recap:
 * only then do graph launches need their stream noted. */
extern int uobj_tracking;

/* The program attached (released) `count` references of `object` to (from)
 * `graph`; flags as cuGraphRetainUserObject's. */
void uobj_note_retain(CUgraph graph, CUuserObject object, unsigned count);
void uobj_note_release(CUgraph graph, CUuserObject object, unsigned count);

/* Whether the program attached user objects to `graph`. */
int uobj_graph_has(CUgraph graph);

/* The program destroyed `graph`: its objects are no longer recap's concern
 * (executable graphs and recap hold their own references). */
void uobj_forget_graph(CUgraph graph);

/* Before `exec`, instantiated from another graph, is handed out for
 * `graph`: takes references to graph's objects on exec's behalf. Returns 0,
 * or -1 if a reference could not be taken (then nothing is held anew and
 * the caller instantiates instead). */
int uobj_exec_adopt(CUgraphExec exec, CUgraph graph);

/* `exec` moves on (updated for another graph, or destroyed): the references
 * recap held for it are given back once its last launch has completed.
 * With `wait`, waits for that completion now (used when memory is short). */
void uobj_exec_retire(CUgraphExec exec, int wait);

/* `exec` is destroyed for good: retire, and forget it. */
void uobj_exec_gone(CUgraphExec exec, int wait);

/* A launch of `exec` on `stream` (called only while uobj_tracking). */
void uobj_note_launch(CUgraphExec exec, CUstream stream);

/* `stream` is about to be destroyed (cuStreamDestroy): work recap waits
 * on that ran there is waited for now, while the stream can still be
 * named; later nothing recap asks of the driver names it. One relaxed
 * load when no user objects are held. */
void uobj_stream_gone(CUstream stream);

/* Gives back the references whose work has completed. Cheap when none wait. */
void uobj_collect(void);

/* Waits for the work of every retired set and gives them all back (when
 * device memory is short). */
void uobj_settle_all(void);

void uobj_after_fork_child(void);

#endif
