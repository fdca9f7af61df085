#!/usr/bin/env python3
"""torch_shapes.py - GPU test: a PyTorch loop whose captured graph changes
shape from one iteration to the next, as a server's dynamic batch does.

Each iteration picks a batch size from a cycle of BATCHES (three buckets,
so three graph shapes: cuBLAS picks other kernels and grids per size),
writes new inputs into that bucket's static input, captures a new
torch.cuda.CUDAGraph of a model step (two matmuls, bias, GELU, layer norm,
a residual, a scale that changes every iteration), replays it, checks the
result against the same step run eagerly, and deletes the graph.

Proves, run plain and under recap (stdout compared byte for byte, recap's
log read by run_all.sh): recap keeps an executable graph per shape of the
cycle (issue 9: capacity follows the site's working set), so the
instantiations after the first cycle become updates, and with
RECAP_SELF_RECORD=on the captures of a changed shape switch cleanly to the
driver (other kernels, other grids) while results stay bit-identical.
Deterministic: fixed seeds, inputs made on the CPU, TF32 off,
deterministic algorithms. Exit 0 right, 1 a graph result differs from the
eager one, 77 SKIP (no torch or no GPU).
"""
import os
import sys

import torch_setup

ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "120"))
BATCHES = (8, 40, 96)
WIDTH = 192

torch = torch_setup.import_torch()


def step(x, w1, b1, w2, scale):
    h = torch.nn.functional.gelu(x @ w1 + b1) * scale
    y = torch.nn.functional.layer_norm(h @ w2, (WIDTH,)) + x
    return y.sum(dim=1)


def inputs_for(iteration, batch):
    generator = torch.Generator().manual_seed(5000 + iteration)
    return torch.rand(batch, WIDTH, generator=generator) * 2.0 - 1.0


def main():
    device = torch.device("cuda")

    w1, b1, w2 = torch_setup.model_weights(torch, WIDTH, seed=1, scale=14.0)
    static_x = {b: torch.zeros(b, WIDTH, device=device) for b in BATCHES}
    torch_setup.warm_up(torch, lambda: [step(static_x[b], w1, b1, w2, 1.0) for b in BATCHES])

    results = torch_setup.Results(torch, every=12)
    for iteration in range(ITERATIONS):
        batch = BATCHES[iteration % len(BATCHES)]
        x = static_x[batch]
        x.copy_(inputs_for(iteration, batch))
        scale = 0.75 + (iteration % 5) * 0.0625
        got = torch_setup.capture_once(torch, lambda: step(x, w1, b1, w2, scale))
        results.add(iteration, got, step(x, w1, b1, w2, scale).cpu(), f" batch {batch:3d}")
    return results.final(ITERATIONS)


if __name__ == "__main__":
    sys.exit(main())
