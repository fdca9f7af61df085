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
import hashlib
import os
import sys

ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "120"))
BATCHES = (8, 40, 96)
WIDTH = 192
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
    h = torch.nn.functional.gelu(x @ w1 + b1) * scale
    y = torch.nn.functional.layer_norm(h @ w2, (WIDTH,)) + x
    return y.sum(dim=1)


def inputs_for(iteration, batch):
    generator = torch.Generator().manual_seed(5000 + iteration)
    return torch.rand(batch, WIDTH, generator=generator) * 2.0 - 1.0


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")

    generator = torch.Generator().manual_seed(1)
    w1 = (torch.randn(WIDTH, WIDTH, generator=generator) / 14.0).to(device)
    b1 = (torch.randn(WIDTH, generator=generator) / 14.0).to(device)
    w2 = (torch.randn(WIDTH, WIDTH, generator=generator) / 14.0).to(device)
    static_x = {b: torch.zeros(b, WIDTH, device=device) for b in BATCHES}

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for b in BATCHES:
            step(static_x[b], w1, b1, w2, 1.0)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    digest = hashlib.sha256()
    mismatches = 0
    for iteration in range(ITERATIONS):
        batch = BATCHES[iteration % len(BATCHES)]
        x = static_x[batch]
        x.copy_(inputs_for(iteration, batch))
        scale = 0.75 + (iteration % 5) * 0.0625
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = step(x, w1, b1, w2, scale)
        graph.replay()
        torch.cuda.synchronize()
        got = static_out.cpu()
        del static_out
        del graph

        eager = step(x, w1, b1, w2, scale).cpu()
        if not torch.allclose(got, eager, rtol=1e-5, atol=1e-5):
            if mismatches == 0:
                worst = (got - eager).abs().max().item()
                print(f"iteration {iteration} (batch {batch}): graph result differs from "
                      f"eager by up to {worst}", file=sys.stderr)
            mismatches += 1
        digest.update(got.numpy().tobytes())
        if (iteration + 1) % 12 == 0:
            print(f"iteration {iteration + 1:3d} batch {batch:3d} hash {digest.hexdigest()[:16]} "
                  f"first {float(got[0]).hex()} last {float(got[-1]).hex()}")
    print(f"final iterations {ITERATIONS} hash {digest.hexdigest()[:16]} mismatches {mismatches}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
