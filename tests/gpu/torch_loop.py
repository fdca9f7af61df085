#!/usr/bin/env python3
"""torch_loop.py - GPU test: a PyTorch loop that captures a new CUDA graph every
iteration, as code without graph-update logic does.

Each iteration writes new inputs into the graph's static input buffer,
creates torch.cuda.CUDAGraph(), captures a small model step (two matmuls,
bias, relu, tanh, a residual, a row sum, and a multiply by a Python float that
changes every iteration, so kernel arguments change too), replays it, reads
the result, checks it against the same step run eagerly, and deletes the
graph. Each graph gets its own private memory pool (the default), which
PyTorch frees at a later capture (torch.cuda.graph empties the cache first),
so output addresses may change between iterations too.

Proves, run plain and under recap (stdout compared byte for byte, recap's
log read by run_all.sh): PyTorch's capture path (the CUDA runtime reached
through cuGetProcAddress, cuBLAS kernels, the caching allocator) works under
recap, recap turns PyTorch's instantiations after the first into updates,
and results are bit-identical to a plain run.
Deterministic: fixed seeds, inputs made on the CPU, TF32 off,
torch.use_deterministic_algorithms(True) with CUBLAS_WORKSPACE_CONFIG set
before CUDA starts.
Exit 0 right, 1 a graph result differs from the eager one, 77 SKIP (no torch
or no GPU).
"""
import os
import statistics
import sys
import time

import torch_setup

# GPU_TEST_ITERATIONS and GPU_TEST_TIMING=1 are for scripts/bench python: the
# median time of the capture-to-release section of the loop, after 10
# warm-up iterations, as a "result" line (not printed otherwise).
ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "100"))
TIMING = os.environ.get("GPU_TEST_TIMING") == "1"
BATCH, WIDTH = 64, 256

torch = torch_setup.import_torch()


def step(x, w1, b1, w2, scale):
    """The model step; scale is a Python float captured as a kernel argument."""
    h = torch.relu(x @ w1 + b1) * scale
    y = torch.tanh(h @ w2) + x
    return y.sum(dim=1)


def inputs_for(iteration):
    generator = torch.Generator().manual_seed(1000 + iteration)
    return torch.rand(BATCH, WIDTH, generator=generator) * 2.0 - 1.0


def main():
    device = torch.device("cuda")

    w1, b1, w2 = torch_setup.model_weights(torch, WIDTH, seed=0, scale=16.0)
    static_x = torch.zeros(BATCH, WIDTH, device=device)
    torch_setup.warm_up(torch, lambda: [step(static_x, w1, b1, w2, 1.0) for _ in range(3)])

    results = torch_setup.Results(torch, every=10)
    times = []
    for iteration in range(ITERATIONS):
        static_x.copy_(inputs_for(iteration))
        scale = 0.5 + (iteration % 8) * 0.125
        t0 = time.perf_counter()
        got = torch_setup.capture_once(torch, lambda: step(static_x, w1, b1, w2, scale))
        times.append(time.perf_counter() - t0)

        results.add(iteration, got, step(static_x, w1, b1, w2, scale).cpu())
    status = results.final(ITERATIONS)
    if TIMING:
        warm = times[10:] or times
        print(f"result program=torch iterations={ITERATIONS} "
              f"median_ms={statistics.median(warm) * 1e3:.4f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
