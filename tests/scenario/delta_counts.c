/*
 * delta_counts.c - what the driver is asked to do when k of n nodes change.
 *
 * `delta_counts N K ITERATIONS`: captures N kernel launches per iteration, of
 * which K (spread evenly) get new argument values each time, then
 * instantiates, launches and destroys, as a program without graph-update
 * code does. Run under recap on the stand-in reporting 13.3, it prints the
 * stand-in's call counts: how many executable graphs were instantiated,
 * whole-graph updates made, and per-node setters called - the delta path
 * against the whole update. scripts/bench-standin-delta runs the grid.
 */
#include <stdio.h>
#include <stdlib.h>

#include "scenario.h"
#include "standin.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    int k = argc > 2 ? atoi(argv[2]) : 1;
    int iterations = argc > 3 ? atoi(argv[3]) : 50;
    struct sc_context c;
    struct sc_options o = { .mode = CU_STREAM_CAPTURE_MODE_GLOBAL };

    if (n < 1 || k < 0 || k > n) {
        fprintf(stderr, "usage: delta_counts N K ITERATIONS (0 <= K <= N)\n");
        return 2;
    }
    sc_setup(&c);
    standin_reset_counts();
    for (int it = 0; it < iterations; it++) {
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        int bad = cuStreamBeginCapture(c.stream[0], o.mode) != CUDA_SUCCESS;
        for (int j = 0; j < n; j++) {
            int changes = k > 0 && (long)j * k / n != (long)(j + 1) * k / n;
            struct sc_op op = { .type = SC_SCALE, .x = j % SC_BUFFERS,
                                .a = changes ? 1.0f + 0.001f * (float)it : 1.0f };
            bad |= sc_enqueue(&c, &op) != CUDA_SUCCESS;
        }
        bad |= cuStreamEndCapture(c.stream[0], &graph) != CUDA_SUCCESS;
        bad |= cuGraphInstantiateWithFlags(&exec, graph, 0) != CUDA_SUCCESS;
        bad |= cuGraphLaunch(exec, c.stream[0]) != CUDA_SUCCESS;
        bad |= cuStreamSynchronize(c.stream[0]) != CUDA_SUCCESS;
        bad |= cuGraphExecDestroy(exec) != CUDA_SUCCESS;
        bad |= cuGraphDestroy(graph) != CUDA_SUCCESS;
        if (bad) {
            fprintf(stderr, "delta_counts: iteration %d failed\n", it);
            return 1;
        }
    }
    printf("result nodes=%d changed=%d iterations=%d instantiate=%lu recapture=%lu "
           "exec_update=%lu node_setters=%lu checksum=%08x\n", n, k, iterations,
           standin_call_count("cuGraphInstantiateWithFlags"),
           standin_call_count("cuStreamBeginRecaptureToGraph"),
           standin_call_count("cuGraphExecUpdate_v2"),
           standin_call_count("cuGraphExecKernelNodeSetParams_v2"), sc_checksum(&c));
    return 0;
}
