"""train.py - the README's PyTorch example: a loop that captures a new CUDA
graph every step, as code does when a value baked into the graph changes
(here a Python float), with no graph-update code of its own.

    python train.py                  # alone
    recap run -- python train.py     # the same, under recap

Prints a checksum of the result (the same both ways) and the time per step
of the last 100 steps.
"""
import os
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # reproducible cuBLAS
import torch  # noqa: E402

STEPS = 200


def step(x, w1, w2, scale):
    return torch.tanh(torch.relu(x @ w1) * scale @ w2) + x


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    x = torch.randn(64, 256, device="cuda")
    w1 = torch.randn(256, 256, device="cuda") / 16
    w2 = torch.randn(256, 256, device="cuda") / 16
    side = torch.cuda.Stream()                  # warm up cuBLAS before capturing
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(x, w1, w2, 1.0)
    torch.cuda.current_stream().wait_stream(side)

    start = None
    for i in range(STEPS):
        if i == STEPS - 100:
            torch.cuda.synchronize()
            start = time.perf_counter()
        scale = 1.0 / (1 + i % 8)               # changes every step
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = step(x, w1, w2, scale)
        graph.replay()
        x = y.clone()
        del graph
    torch.cuda.synchronize()
    per_step = (time.perf_counter() - start) / 100 * 1e3
    print(f"checksum {x.double().sum().item():.6e}")
    print(f"{per_step:.3f} ms per step", flush=True)


if __name__ == "__main__":
    main()
