#!/usr/bin/env python3
"""torch_pinned.py - GPU test: a step that pins host memory and captures a
graph, as a training loop with a pinned batch does (issue 34, item 4).

torch.cuda.graph's enter empties PyTorch's pinned-memory cache
(torch._C._host_emptyCache), so each step's pin_memory() pins anew what
the last step's buffer had pinned: a cuMemFreeHost and a cuMemHostAlloc
per step without recap. Each of 100 steps pins a batch made on the CPU,
captures a fresh torch.cuda.CUDAGraph that scales a device tensor, copies
the pinned batch in (non_blocking), replays, and checks the result
against the same step run eagerly. run_all.sh asks the recap log for
pinned memory handed back at least 90 times (host_memory.reused).
Exit 0 right, 1 a graph result differs from the eager one, 77 SKIP.
"""
import sys

import torch_setup

ITERATIONS = 100
N = 1 << 18

torch = torch_setup.import_torch()


def main():
    generator = torch.Generator().manual_seed(34)
    state = torch.zeros(N, device="cuda")
    results = torch_setup.Results(torch, every=10)
    for iteration in range(ITERATIONS):
        batch = torch.rand(N, generator=generator).pin_memory()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = state * 0.5 + 1.0
        state.copy_(batch, non_blocking=True)
        graph.replay()
        torch.cuda.synchronize()
        expected = (batch * 0.5 + 1.0)
        got = out.cpu()
        results.add(iteration, got, expected)
        del graph, out
    return results.final(ITERATIONS)


if __name__ == "__main__":
    sys.exit(main())
