/*
 * libdeep.c - a library loaded with RTLD_DEEPBIND that captures graphs.
 * Its references bind in its own dependencies first, so its driver calls
 * reach libcuda directly and recap does not see them. recap's promise
 * here is only that nothing breaks: results stay the same.
 */
#include <stdio.h>

#include "../scenario/scenario.h"

__attribute__((visibility("default"))) int deep_capture_loop(struct sc_context *c);
int deep_capture_loop(struct sc_context *c)
{
    for (int it = 0; it < 3; it++) {
        CUgraph g = NULL;
        CUgraphExec e = NULL;
        float a = 2.0f + (float)it;
        int n = SC_N;
        void *params[] = { &a, &c->buf[2], &c->buf[3], &n };
        int rc = cuStreamBeginCapture(c->stream[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
        rc = rc * 10 + cuLaunchKernel(c->axpy, SC_N / 64, 1, 1, 64, 1, 1, 0, c->stream[0], params, NULL);
        rc = rc * 10 + cuStreamEndCapture(c->stream[0], &g);
        rc = rc * 10 + cuGraphInstantiate(&e, g, 0);
        rc = rc * 10 + cuGraphLaunch(e, c->stream[0]);
        cuStreamSynchronize(c->stream[0]);
        rc = rc * 10 + cuGraphExecDestroy(e);
        rc = rc * 10 + cuGraphDestroy(g);
        printf("deep it=%d rc=%d sum=%08x\n", it, rc, sc_checksum(c));
    }
    return 0;
}
