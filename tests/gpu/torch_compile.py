#!/usr/bin/env python3
"""torch_compile.py - GPU test: torch.compile(mode="reduce-overhead"), the way
most PyTorch users meet CUDA graphs without writing any graph code.

Inductor compiles a small model step (matmul, bias, relu, a scale held in a
tensor, matmul, tanh, a residual) once per input shape, and its CUDA graph
trees record one graph per shape after a warm-up run, then replay it. The
batch size cycles 16, 32, 48 from one iteration to the next, so three graphs
are recorded and replayed in turn. Each graph is instantiated once: recap has
nothing to reuse here and must only stay out of the way - while compile
workers (subprocesses that inherit LD_PRELOAD) start and end around it.

Every result is compared with the same step run eagerly (close, not equal:
inductor fuses the pointwise operations). No reductions, so the result does
not depend on which kernel configuration inductor's autotuning picks: stdout
(a digest of every result) must be the same with and without recap.
Exit 0 right, 1 a result differs from eager, 77 SKIP (no torch, no GPU, or
torch.compile cannot build kernels here).
"""
import os
import statistics
import sys
import time

import torch_setup

ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "60"))
TIMING = os.environ.get("GPU_TEST_TIMING") == "1"
BATCHES = (16, 32, 48)
WIDTH = 256

torch = torch_setup.import_torch()
# Deterministic algorithms stay on for the eager reference; inductor's own
# kernels are pointwise and need no such promise.
torch.use_deterministic_algorithms(False)


def step(x, w1, b1, w2, scale):
    h = torch.relu(x @ w1 + b1) * scale
    return torch.tanh(h @ w2) + x


def inputs_for(iteration, batch):
    generator = torch.Generator().manual_seed(2000 + iteration)
    return (torch.rand(batch, WIDTH, generator=generator) * 2.0 - 1.0).to("cuda")


def main():
    w1, b1, w2 = torch_setup.model_weights(torch, WIDTH, seed=0, scale=16.0)
    scale = torch.ones((), device="cuda")
    try:
        compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
        compiled(inputs_for(0, BATCHES[0]), w1, b1, w2, scale)
    except Exception as e:  # no compiler, no Triton: nothing to test here
        print(f"SKIP: torch.compile cannot run here: {type(e).__name__}: {e}")
        return torch_setup.SKIP

    results = torch_setup.Results(torch, every=15)
    times = []
    for iteration in range(ITERATIONS):
        batch = BATCHES[iteration % len(BATCHES)]
        x = inputs_for(iteration, batch)
        scale.fill_(0.5 + (iteration % 8) * 0.125)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        # A replayed graph's output is overwritten by its next replay:
        # copied out at once.
        got = compiled(x, w1, b1, w2, scale).cpu()
        times.append(time.perf_counter() - t0)
        results.add(iteration, got.flatten(), step(x, w1, b1, w2, scale).cpu().flatten(),
                    f" batch {batch}")
    status = results.final(ITERATIONS)
    if TIMING:
        warm = times[3 * len(BATCHES):] or times
        print(f"result program=torch_compile iterations={ITERATIONS} "
              f"median_ms={statistics.median(warm) * 1e3:.4f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
