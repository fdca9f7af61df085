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
import hashlib
import os
import statistics
import sys
import time

# GPU_TEST_ITERATIONS and GPU_TEST_TIMING=1 are for scripts/bench-python: the
# median time of the capture-to-release section of the loop, after 10
# warm-up iterations, as a "result" line (not printed otherwise).
ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "100"))
TIMING = os.environ.get("GPU_TEST_TIMING") == "1"
BATCH, WIDTH = 64, 256
SKIP = 77

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import torch
except ImportError as e:
    print(f"SKIP: torch not importable: {e}")
    sys.exit(SKIP)
if not torch.cuda.is_available():
    print("SKIP: torch sees no CUDA device")
    sys.exit(SKIP)


def step(x, w1, b1, w2, scale):
    """The model step; scale is a Python float captured as a kernel argument."""
    h = torch.relu(x @ w1 + b1) * scale
    y = torch.tanh(h @ w2) + x
    return y.sum(dim=1)


def inputs_for(iteration):
    generator = torch.Generator().manual_seed(1000 + iteration)
    return torch.rand(BATCH, WIDTH, generator=generator) * 2.0 - 1.0


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")

    generator = torch.Generator().manual_seed(0)
    w1 = (torch.randn(WIDTH, WIDTH, generator=generator) / 16.0).to(device)
    b1 = (torch.randn(WIDTH, generator=generator) / 16.0).to(device)
    w2 = (torch.randn(WIDTH, WIDTH, generator=generator) / 16.0).to(device)
    static_x = torch.zeros(BATCH, WIDTH, device=device)

    # Warm up on a side stream (cuBLAS handles and workspaces exist before
    # the first capture), as the PyTorch documentation asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_x, w1, b1, w2, 1.0)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    digest = hashlib.sha256()
    mismatches = 0
    times = []
    for iteration in range(ITERATIONS):
        static_x.copy_(inputs_for(iteration))
        scale = 0.5 + (iteration % 8) * 0.125
        t0 = time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = step(static_x, w1, b1, w2, scale)
        graph.replay()
        torch.cuda.synchronize()
        got = static_out.cpu()
        del static_out
        del graph
        times.append(time.perf_counter() - t0)

        eager = step(static_x, w1, b1, w2, scale).cpu()
        if not torch.allclose(got, eager, rtol=1e-5, atol=1e-5):
            if mismatches == 0:
                worst = (got - eager).abs().max().item()
                print(f"iteration {iteration}: graph result differs from eager by up to {worst}",
                      file=sys.stderr)
            mismatches += 1
        digest.update(got.numpy().tobytes())
        if (iteration + 1) % 10 == 0:
            print(f"iteration {iteration + 1:3d} hash {digest.hexdigest()[:16]} "
                  f"first {float(got[0]).hex()} last {float(got[-1]).hex()}")
    print(f"final iterations {ITERATIONS} hash {digest.hexdigest()[:16]} mismatches {mismatches}")
    if TIMING:
        warm = times[10:] or times
        print(f"result program=torch iterations={ITERATIONS} "
              f"median_ms={statistics.median(warm) * 1e3:.4f}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
