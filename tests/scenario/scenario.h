/*
 * scenario.h - the pieces scenario programs are made of.
 *
 * A scenario program is an ordinary driver-API program (linked against
 * libcuda.so.1, here the stand-in) that captures graphs in a loop and prints,
 * on stdout, every return code it got and a checksum of its results, so
 * that a run under recap can be compared with a run without it byte for
 * byte. What recap did is read from its log; what the driver was asked to
 * do is written to $SCENARIO_STATS (stand-in call counts), never stdout.
 */
#ifndef SCENARIO_H
#define SCENARIO_H

#include <stdint.h>
#include <stdio.h>

#include <cuda.h>

#define SC_BUFFERS 4
#define SC_N 256                    /* floats per buffer */

enum sc_op_type {
    SC_AXPY,        /* y = a*x + y on stream `stream` */
    SC_SCALE,       /* x = a*x */
    SC_MEMSET,      /* buffer y = bits of a (memset D32) */
    SC_COPY,        /* y = x (memcpy DtoD) */
    SC_HOST,        /* host function adding a to a host counter */
    SC_FORK,        /* stream 1 joins the capture of stream 0 */
    SC_JOIN,        /* stream 0 waits for stream 1 */
    SC_EXTRA_LAUNCH, /* cuLaunchKernel with `extra` instead of kernelParams */
    SC_STREAM_ATTR, /* cuStreamSetAttribute(priority = a) on `stream`: no node */
    SC_SHIFT,       /* x = x + a: another kernel of scale's signature */
    SC_MIRROR       /* x = a - x: a third one */
};

struct sc_op {
    enum sc_op_type type;
    float a;
    int x, y;       /* buffer indices */
    int stream;     /* 0 or 1 */
    unsigned grid;  /* blocks of 64 threads; 0 means SC_N/64 */
};

#define SC_MAX_OPS 256

struct sc_recipe {
    struct sc_op op[SC_MAX_OPS];
    int n;
};

struct sc_context {
    CUcontext ctx;
    CUstream stream[2];
    CUevent fork_event, join_event;
    CUdeviceptr buf[SC_BUFFERS];
    CUfunction axpy, scale;
    CUfunction shift, mirror;       /* scale's signature: one kernel position, three functions */
    double host_counter;
};

/* How one iteration captures and instantiates. */
struct sc_options {
    CUstreamCaptureMode mode;
    int instantiate_variant;        /* 0 WithFlags, 1 WithParams, 2 legacy, 3 WithParams+UPLOAD */
    int keep_graph_until_next;      /* destroy the graph one iteration late */
    int keep_every_graph;           /* never destroy a graph (PyTorch's debug mode) */
    int count_nodes;                /* count the graph's nodes after its end (PyTorch does) */
};

/* Whether the kernels are a library's CUkernels, launched as the CUDA
 * runtime launches them (SCENARIO_KERNELS=library), or a module's
 * CUfunctions (unset or "module"); exits naming a bad value. */
int sc_library_kernels(void);

/* Sets up the context, streams, buffers and kernels; exits on failure. */
void sc_setup(struct sc_context *c);

/* Resets buffers to a known pattern (outside any capture). */
void sc_reset_buffers(struct sc_context *c);

/* Enqueues one recipe operation on its stream; returns the call's result. */
CUresult sc_enqueue(struct sc_context *c, const struct sc_op *op);

/* One iteration: capture the recipe, end, instantiate, launch, sync,
 * destroy; prints "it=N rc=... sum=..." on stdout. Returns 0 if every call
 * succeeded. `pending` holds a graph kept alive from the last iteration. */
int sc_iteration(struct sc_context *c, int it, const struct sc_recipe *r,
                 const struct sc_options *o, CUgraph *pending);

/* A checksum of every buffer and the host counter. */
uint32_t sc_checksum(struct sc_context *c);

/* Writes the stand-in's call counts of interest to $SCENARIO_STATS. */
void sc_write_stats(void);

/* The same, mid-run, to $SCENARIO_STATS with `suffix` appended, followed
 * by every driver function's count ("call NAME N", nonzero ones) and their
 * sum ("calls_total N"): what a test compares between two runs over the
 * same stretch of iterations. */
void sc_write_stats_snapshot(const char *suffix);

/* Scenario "random" (random_program.c): `iters` iterations of the
 * program drawn from `seed`. Returns 0 if every call succeeded. */
int sc_run_random(struct sc_context *c, int iters, unsigned seed);

/* cuMemAlloc in relaxed mode, as a caching allocator makes one inside a
 * capture; the thread's mode is put back after. */
CUresult sc_alloc_relaxed(CUdeviceptr *p, size_t bytes);

/* Appends an operation to a recipe. */
void sc_add(struct sc_recipe *r, enum sc_op_type type, float a, int x, int y, int stream);

#endif
