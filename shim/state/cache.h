/*
 * cache.h - the graphs and executable graphs recap knows and holds
 * (module prefix cache_).
 *
 * Owns: a record for every graph captured at an enabled site and every
 * executable graph recap instantiated or reused for one, keyed by handle;
 * the ones the program destroyed ("released"), which recap keeps for the
 * next recapture or instantiation at their site, bounded per site by its
 * working set (or the explicit max_graphs) and overall by one budget of
 * device memory, evicting the least recently released first across all
 * sites; the device memory each one takes (measured around instantiation);
 * destroying, exactly once, what it evicts or what a failed recapture left
 * undefined; and the graph-edit epoch, which tells whether what recap keeps
 * may have been edited by the program since it was captured.
 *
 * Must never: touch an object the program still holds, hand out a released
 * object twice, or hold cache_lock across a driver call (evicted objects are
 * destroyed after the lock is dropped).
 *
 * A record is in one of three states. HELD: the program holds the handle;
 * the record lives until the program destroys it. RELEASED: recap holds
 * it in the site's cache; eviction may free it at any time, so such records
 * are only touched under cache_lock. TAKEN: recap took it out of the cache
 * for a recapture or a reuse; the taker owns it until it hands it back to
 * the program (HELD) or discards it.
 */
#ifndef RECAP_CACHE_H
#define RECAP_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "policy/reuse_gate.h"
#include "shim/base/cuda_compat.h"
#include "shim/base/driver_api.h"
#include "shim/state/journal.h"

struct site;
struct site_cache_counts;

/* Released objects overall, whatever the budget: a bound on the lists'
 * length when objects are charged little. */
#define CACHE_GLOBAL_MAX_OBJECTS 1024

/* What a site keeps of each kind at most, unless max_graphs says more:
 * its working set times its concurrent captures, within the budget. */
#define CACHE_SITE_MAX_KEPT 256

/* Instantiations whose device memory is measured, per site; later ones
 * are charged the site's measured bytes per node. */
#define CACHE_MEASURE_SAMPLES 16

/* What an executable graph is charged at least: the driver takes device
 * memory in chunks, so one instantiation may show none. */
#define CACHE_EXEC_FLOOR_BYTES (64u * 1024u)
#define CACHE_EXEC_FLOOR_NODE_BYTES 1024u

/* What a kept graph is charged: graphs live mostly in host memory, and
 * nothing recap does brackets their creation to measure them. */
#define CACHE_GRAPH_BYTES (4u * 1024u)
#define CACHE_GRAPH_NODE_BYTES 1024u

enum cache_state { CACHE_HELD, CACHE_RELEASED, CACHE_TAKEN };

/* The program edited some graph itself (any graph: node setters do not
 * name the graph). Recordings, executable graphs synchronised and graphs
 * kept before this may no longer match their graph. */
void cache_note_graph_edit(enum drv_id id);

/* The graph-edit epoch now: it moves whenever the program edits a graph. */
unsigned long cache_graph_edit_epoch(void);

/* The kinds of object recap keeps; sites count their released ones per kind. */
enum cache_kind { CACHE_GRAPHS, CACHE_EXECS, CACHE_KINDS };

/* What every kept object has, whatever its kind: the first member of both
 * records, so the lifecycle (track, release, take, hand out, evict,
 * destroy) is written once. */
struct cache_entry {
    const void *handle;            /* the CUgraph or CUgraphExec */
    struct site *site;
    enum cache_state state;
    enum cache_kind kind;
    unsigned long long bytes;      /* charged to the budget while released */
    struct cache_entry *site_older, *site_newer;   /* the site's released, of its kind */
    struct cache_entry *lru_older, *lru_newer;     /* every released, by release time */
    /* When the program last released it: both lists are in this order,
     * and an entry recap took and gave back keeps its place. */
    unsigned long long released_order;
};

/* A node whose parameters the last recapture changed. */
struct changed_node {
    CUgraphNode node;
    CUgraphNodeType type;
    long op;                       /* its call in the graph's recording, or -1 */
};

struct graph_rec {
    struct cache_entry entry;
    uint64_t serial;               /* unique for the life of the process */
    /* What the graph looked like at shape_epoch (cache_graph_edit_epoch):
     * measured again once the program may have edited it (exec_reuse.c);
     * edited: it was, and the graph is no longer what its site captures,
     * so it is never kept. */
    uint64_t shape;
    long nodes;
    int shape_typed;               /* the shape counts node types and edges */
    /* What a capture must do to repeat it: its calls' entry points,
     * functions, attributes, sizes (self_record_signature of the capture's
     * journal); 0 when recap journaled none. Finer than the shape: graphs
     * of one topology and other kernels differ here. */
    uint64_t signature;
    const void *last_stream;       /* the stream key of the last capture recorded into it */
    unsigned long shape_epoch;
    int edited;
    /* Under cache_lock: recap is copying the graph (cache_graph_pin_held),
     * and the program destroyed it meanwhile: its destroy waits for the
     * copy to end. */
    int copying, destroy_deferred;
    /* A copy of a graph the program keeps (shim/repeat/graph_copy.h): handed to a
     * program that keeps its graphs, it is not recorded into again. */
    int copied;
    /* A driver recapture into it began and has not ended well: the graph
     * is undefined if it never does (set and cleared by its capture, which
     * holds it TAKEN). */
    int recapture_unfinished;
    /* recap instantiated an executable graph of its own from it (at a
     * site that reuses them): finding none later means the site keeps
     * too few (exec_reuse.c). Written by instantiations of the graph,
     * which the program makes one at a time. */
    int own_exec_made;
    unsigned long version;         /* successful recaptures into it so far */
    /* What the last successful recapture changed, relative to version - 1.
     * changes_known is 0 unless every change was reported eligible. */
    int changes_known;
    size_t nchanged, changed_capacity;
    struct changed_node *changed;  /* owned */
    /* The calls that gave the graph its parameters, each knowing its node,
     * for captures recap records itself (shim/repeat/self_record.h); owned, NULL
     * when recap has none. Valid while the program edited no graph since
     * recording_epoch (cache_graph_edit_epoch). */
    struct journal *recording;
    unsigned long recording_epoch;
};

struct exec_rec {
    struct cache_entry entry;
    unsigned long long flags;      /* instantiate flags, UPLOAD excluded */
    uint64_t shape;
    long nodes;
    uint64_t source_serial;        /* graph it was instantiated from */
    uint64_t synced_serial;        /* graph whose parameters it now holds */
    /* Their handles, valid only while a graph record of that handle has
     * that serial (cache_exec_source_node). */
    CUgraph source_graph, synced_graph;
    unsigned long synced_version;
    unsigned long synced_epoch;    /* graph-edit epoch at that time */
    int mutated;                   /* the program changed it itself */
    /* The graph it was instantiated from is gone for the program and the
     * cache, and this record keeps it alive (source_graph): the driver
     * knows an executable graph's nodes by that graph's (cache.c, "a
     * graph outlives its executable graphs"). Under cache_lock. */
    int source_owned;
    /* That graph was left undefined or became another (cache_drop_execs_of):
     * the program's node setters can no longer be translated, so it is not
     * kept for reuse when the program destroys it. Under cache_lock. */
    int source_lost;
};

static inline CUgraph graph_rec_graph(const struct graph_rec *rec)
{
    return (CUgraph)rec->entry.handle;
}

static inline CUgraphExec exec_rec_exec(const struct exec_rec *rec)
{
    return (CUgraphExec)rec->entry.handle;
}

/* --- graphs --- */

/* Starts tracking a graph the program now holds (a fresh capture's result),
 * of that shape (typed: node types and edges count) as of now. Returns
 * NULL if memory ran out: the graph is then simply not tracked. */
struct graph_rec *cache_graph_track(CUgraph graph, struct site *site, uint64_t shape, long nodes,
                                    int typed);

/* The record of a graph the program holds, or NULL. The record stays valid
 * while the program holds the graph. */
struct graph_rec *cache_graph_held(CUgraph graph);

/* A released graph of the site with this signature, now TAKEN by the
 * caller. */
struct graph_rec *cache_take_graph(struct site *site, uint64_t signature);

/* Candidates for a capture recap records (shim/repeat/match.h): released graphs
 * of the site whose recording no edit outdated since `epoch`, the newest
 * of each signature - the one last recorded into on `stream_key` where
 * there is one - (the one of signature `preferred` first), at most `max`,
 * now TAKEN by the caller. Returns how many. */
int cache_take_candidates(struct site *site, unsigned long epoch, uint64_t preferred,
                          const void *stream_key, struct graph_rec **out, int max);

/* A TAKEN graph recap did not hand out goes back to the site's released
 * graphs, as kept before (it is not counted as kept again). `rewritten`:
 * a capture wrote some of its calls into it, so an executable graph
 * brought up to an earlier version of it may not take only the next
 * capture's changes. */
void cache_graph_give_back(struct graph_rec *rec, int rewritten);

/* Gives a graph its recording (which it then owns), replacing any. */
void cache_graph_set_recording(struct graph_rec *rec, struct journal *recording,
                               unsigned long epoch);

/* A TAKEN graph goes back to the program (HELD). */
void cache_graph_hand_out(struct graph_rec *rec);

/* --- graphs the program keeps ---
 * A program may keep every graph it captures instead of destroying it
 * (PyTorch does once CUDAGraph.enable_debug_mode() was called anywhere in
 * the process): no graph is ever released for the next capture. Where the
 * program kept graphs alike, recap copies the newest one it holds
 * (shim/repeat/graph_copy.h) and records the next capture into the copy. */

/* The program holds `rec` (with a signature) as its newest graph of the
 * site: counts whether the one before is still held and alike. (The
 * recordings of older ones stay: the program may be instantiating one on
 * another thread, which reads it without cache_lock.) */
void cache_graph_note_held(struct graph_rec *rec);

/* The site's newest held graph - or the newest of signature `prefer` (0:
 * none) among the last SITES_HELD_RECENT kept, or without one where the
 * kinds kept take turns the one due next - when the program kept graphs
 * alike (or of that kind among others, or the site was copied from
 * before), no edit since `epoch` may have changed it, it has this
 * signature (0: any) and, if `need_recording`, a recording valid as of
 * `epoch`: marked as being copied (a destroy of it waits) until
 * cache_graph_unpin_held. NULL otherwise, with *why saying why where the
 * program does keep a graph here (else NULL). */
struct graph_rec *cache_graph_pin_held(struct site *site, unsigned long epoch, uint64_t signature,
                                       uint64_t prefer, int need_recording, const char **why);

/* Pins, as cache_graph_pin_held does, up to `max` graphs the program
 * keeps at the site, one of each signature, each with a recording valid
 * as of `epoch`: the one cache_graph_pin_held would pin first, then the
 * newest of each other kind among the last SITES_HELD_RECENT kept. For a
 * capture that compares its calls with each before one is copied
 * (nothing is written into them). Returns how many (0: *why as there);
 * each goes back through cache_graph_unpin_held. */
int cache_graph_pin_held_kinds(struct site *site, unsigned long epoch, struct graph_rec **out,
                               int max, const char **why);

/* Ends the copy of a pinned graph. `copy` (NULL: the copy failed) becomes
 * a TAKEN graph of the site with `recording` (owned from here; NULL: none)
 * valid as of `epoch`; if the copy cannot be tracked it is destroyed. It
 * is a graph of its own (serial): an executable graph instantiated from
 * the original names the original's nodes, so it takes the copy by a
 * whole update, never node by node. A destroy the program made meanwhile
 * happens now. Returns the copy's record, or NULL (the copy destroyed, the
 * recording freed). */
struct graph_rec *cache_graph_unpin_held(struct graph_rec *held, CUgraph copy,
                                         struct journal *recording, unsigned long epoch);

/* Forgets a TAKEN or HELD graph and destroys it, once. A graph a driver
 * recapture left undefined (recapture_unfinished) takes the released
 * executable graphs instantiated from it along: they could no longer be
 * brought up to another graph whose nodes a program's setter names. */
void cache_graph_discard(struct graph_rec *rec);

/* Forgets a TAKEN graph without destroying it: a driver capture goes on in
 * it, whose end hands it to the program as a new graph. The released
 * executable graphs instantiated from it go, as with an undefined one. */
void cache_graph_forget(struct graph_rec *rec);

/* Gives a recaptured graph the capture's change list (*changed: n of
 * *capacity entries) and hands back, in its place, the buffer of the list
 * it replaces: a loop swaps two buffers instead of allocating one per
 * capture (a large malloc can cost a loop of 1000 nodes microseconds,
 * sorting the blocks the driver freed). */
void cache_graph_swap_changes(struct graph_rec *rec, struct changed_node **changed, size_t n,
                              size_t *capacity, int known);

/* The cuGraphDestroy hook. */
CUresult cache_on_graph_destroy(enum drv_id id, CUgraph graph);

/* --- executable graphs --- */

/* `bytes`: device memory it takes (cache_probe_end). */
struct exec_rec *cache_exec_track(CUgraphExec exec, struct site *site, unsigned long long flags,
                                  uint64_t shape, long nodes, CUgraph source_graph,
                                  uint64_t source_serial,
                                  unsigned long long bytes);

/* A released executable graph of the site with these flags and shape, now
 * TAKEN; one instantiated from graph `prefer_serial` is preferred. */
struct exec_rec *cache_take_exec(struct site *site, unsigned long long flags, uint64_t shape,
                                 uint64_t prefer_serial);

void cache_exec_hand_out(struct exec_rec *rec);

/* The site keeps one more executable graph than its working set asks
 * (up to CACHE_SITE_MAX_KEPT in all). */
void cache_site_keep_another_exec(struct site *site);
/* A TAKEN executable graph not used after all goes back to its site. */
void cache_exec_give_back(struct exec_rec *rec);
void cache_exec_discard(struct exec_rec *rec);

/* The cuGraphExecDestroy hook. */
CUresult cache_on_exec_destroy(enum drv_id id, CUgraphExec exec);

/* The program changed an executable graph itself: recap's record of its
 * parameters no longer holds. by_node: through a node setter, which names
 * a node of its graph (the site's executables are then reused only where
 * cache_exec_source_node can find the node the driver takes); took: that
 * node where the driver took it at once, which tells whether the driver
 * takes the nodes of the graph of an update. */
void exec_note_mutated(CUgraphExec exec, int by_node, CUgraphNode took);

/* A node of the graph an executable graph was handed out for, as the
 * node of the graph it was instantiated from (the executable graph's
 * setters take the latter's nodes). Where recap brought a released
 * executable graph up to the program's graph, the program names its own
 * graph's nodes in the setters it calls after: when the driver refuses
 * one, this gives the node at the same place in the graph the executable
 * graph came from, if that graph still lives. Returns whether *out was
 * set. */
int cache_exec_source_node(CUgraphExec exec, CUgraphNode node, CUgraphNode *out);


/* --- device memory, the budget --- */

/* Measures the device memory one instantiation takes: free memory before
 * and after, for a site's first CACHE_MEASURE_SAMPLES instantiations. */
struct cache_probe {
    int on;
    size_t free_before;
};

void cache_probe_begin(struct cache_probe *p, struct site *site);

/* After a successful instantiation of `nodes` nodes: the bytes to charge
 * it - measured, else the site's measured bytes per node, never below the
 * floor. */
unsigned long long cache_probe_end(struct cache_probe *p, struct site *site, long nodes);

/* Device memory recap keeps for sites' next captures (shim/state/kept_memory.h)
 * shares the budget with released objects: a reservation succeeds (1) when
 * the block fits beside what is released and kept now, and is charged
 * until given back with a negative charge. Released objects are evicted by
 * their own bytes only: kept memory never pushes a graph out. */
int cache_reserve_kept_memory(size_t bytes);
void cache_charge_kept_memory(long long bytes);

/* Whether the program holds a graph or executable graph of the site (or a
 * capture holds one it took). */
int cache_site_holds_any(const struct site *site);

/* The budget in bytes (settled once the device's memory is known), and
 * the most that released objects were charged at once. */
unsigned long long cache_budget_bytes(void);
unsigned long long cache_peak_bytes(void);

/* A site stopped keeping: what it kept is destroyed now, and nothing more
 * is kept until cache_site_reopen. */
void cache_site_drop(struct site *site);
void cache_site_reopen(struct site *site);

/* A site's reuse gate changed (the caller holds no lock): logs it, and
 * drops what the site keeps when it closed, or keeps again when it
 * reopened. */
void cache_site_gate_changed(struct site *site, enum gate_change change);

/* The site's working set (distinct kinds of graph among its recent
 * captures) or the captures it runs at once changed (the caller holds
 * site->lock): it keeps working_set x concurrency of each kind. */
void cache_site_working_set(struct site *site, int working_set, int concurrency);

/* The site's kept and evicted counts. */
struct site_cache_counts cache_site_counts(struct site *site);

/* --- memory pressure, fork --- */

/* Destroys every released object, waits for the work of the executable
 * graphs among them and gives back every user-object reference recap holds.
 * Returns how many objects there were. */
int cache_release_all(void);

/* Forgets every record of a graph or executable graph the program holds
 * (its context may be going away, and the driver may give the handle to a
 * new object): the program's later calls with them pass to the driver.
 * Returns how many. Objects captures took are left to them. */
int cache_forget_held(void);

/* cache_release_all with a warning in the log: for an allocation that
 * failed for memory, retried only when the count says that can help. What
 * `first` releases (the lifecycle sets it: memory kept for sites' next
 * captures, shim/state/kept_memory.h) goes before, and counts. */
int cache_release_for_oom(void);
void cache_release_first_with(int (*first)(void));

void cache_after_fork_child(void);

#endif
