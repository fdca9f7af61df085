#!/usr/bin/env python3
"""torch_debug_mode.py - GPU test: PyTorch keeps every graph it captures
once CUDAGraph.enable_debug_mode() was called anywhere in the process
(issue 33).

PyTorch 2.11's capture_end destroys its cudaGraph_t after instantiation
unless a process-wide debug flag is set; enable_debug_mode() sets it, and
from then on every graph of every CUDAGraph is kept - and, since the
object forgets it (has_graph_ goes false), never destroyed. PyTorch's own
test_graph_debugdump sets it, so every graph test after it in
test/test_cuda.py captures that way. recap then has no released graph to
record into: only a copy of the newest graph the program keeps serves.

The loop is test_repeat_graph_capture_cublas_workspace_memory's, with a
Python float that changes every iteration: 100 fresh torch.cuda.CUDAGraph
captures of one torch.mm at one site, each replayed and checked against
the same step run eagerly. run_all.sh runs it twice: by default, where
copies are off and the log must name RECAP_COPY_HELD=on (executable graphs
reused), and with RECAP_COPY_HELD=on, where at least 90 % of the captures
after the first must be recorded by recap.
Exit 0 right, 1 a graph result differs from the eager one, 77 SKIP.
"""
import sys

import torch_setup

ITERATIONS = 100
X, Y, Z = 1024, 512, 64

torch = torch_setup.import_torch()


def step(a, b, scale):
    return (torch.mm(a, b) * scale).sum(dim=1)


def main():
    generator = torch.Generator().manual_seed(33)
    a = torch.rand((X, Y), generator=generator).cuda()
    b = torch.rand((Y, Z), generator=generator).cuda()
    torch_setup.warm_up(torch, lambda: [step(a, b, 1.0) for _ in range(3)])
    torch.cuda.CUDAGraph().enable_debug_mode()   # process-wide, as the test leaves it

    results = torch_setup.Results(torch, every=10)
    for iteration in range(ITERATIONS):
        scale = 0.5 + (iteration % 8) * 0.125
        got = torch_setup.capture_once(torch, lambda: step(a, b, scale))
        results.add(iteration, got, step(a, b, scale).cpu())
    return results.final(ITERATIONS)


if __name__ == "__main__":
    sys.exit(main())
