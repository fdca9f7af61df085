"""torch_setup.py - what the PyTorch GPU tests share: torch imported and set
up for bit-reproducible runs, or the test skipped where it cannot run.

Imported by torch_loop.py and torch_shapes.py (their directory is on
sys.path when run as scripts).
"""
import hashlib
import os
import sys
import time

SKIP = 77


def import_torch():
    """torch with fixed seeds, TF32 off and deterministic algorithms; exits
    77 (SKIP) when torch is missing or sees no GPU."""
    # cuBLAS reads it when CUDA starts: before torch touches the GPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: torch not importable: {e}")
        sys.exit(SKIP)
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        sys.exit(SKIP)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def model_weights(torch, width, seed, scale):
    """w1, b1, w2 of the tests' model step, made on the CPU from `seed` (so
    every run gets the same values) and moved to the GPU."""
    generator = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(width, width, generator=generator) / scale).to("cuda")
    b1 = (torch.randn(width, generator=generator) / scale).to("cuda")
    w2 = (torch.randn(width, width, generator=generator) / scale).to("cuda")
    return w1, b1, w2


def warm_up(torch, run):
    """Runs `run` on a side stream and waits, so cuBLAS handles and
    workspaces exist before the first capture, as PyTorch's documentation
    asks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def capture_once(torch, run, marks=None):
    """What a loop without graph-update code does: a new CUDAGraph capturing
    run(), replayed once, then released. Returns run()'s result, on the CPU.
    marks, a list, gets time.perf_counter() at the end of each step: enter
    (torch.cuda.graph's own work and the capture's begin), body, exit (the
    capture's end and instantiation), replay, wait, read and release."""
    mark = marks.append if marks is not None else (lambda _: None)
    clock = time.perf_counter
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mark(clock())
        out = run()
        mark(clock())
    mark(clock())
    graph.replay()
    mark(clock())
    torch.cuda.synchronize()
    mark(clock())
    got = out.cpu()
    del out
    del graph
    mark(clock())
    return got


def differs(torch, got, eager, label, first):
    """1 if the graph's result is not the eager one (told on stderr for the
    first such iteration), else 0."""
    if torch.allclose(got, eager, rtol=1e-5, atol=1e-5):
        return 0
    if first:
        worst = (got - eager).abs().max().item()
        print(f"{label}: graph result differs from eager by up to {worst}", file=sys.stderr)
    return 1


class Results:
    """What a test prints and decides: a digest of every graph result (stdout
    must be the same with and without recap), a progress line every `every`
    iterations, and the count of results that differ from eager."""

    def __init__(self, torch, every):
        self.torch, self.every = torch, every
        self.digest = hashlib.sha256()
        self.mismatches = 0

    def add(self, iteration, got, eager, detail=""):
        self.mismatches += differs(self.torch, got, eager, f"iteration {iteration}{detail}",
                                   self.mismatches == 0)
        self.digest.update(got.numpy().tobytes())
        if (iteration + 1) % self.every == 0:
            print(f"iteration {iteration + 1:3d}{detail} hash {self.digest.hexdigest()[:16]} "
                  f"first {float(got[0]).hex()} last {float(got[-1]).hex()}")

    def final(self, iterations):
        """Prints the last line; the exit status: 0 right, 1 a result differed."""
        print(f"final iterations {iterations} hash {self.digest.hexdigest()[:16]} "
              f"mismatches {self.mismatches}")
        return 0 if self.mismatches == 0 else 1
