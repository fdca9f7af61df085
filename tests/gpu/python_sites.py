#!/usr/bin/env python3
"""python_sites.py BINDING - GPU test: capture sites a Python user can name.

BINDING is torch, cupy or cuda_core. Every iteration captures three
different graphs at three lines in turn (marked SITE-A, SITE-B, SITE-C)
and, through helper(), called from two more lines (SITE-D, SITE-E), a
fourth graph: five capture sites, whose recap labels must name those lines.
torch also captures one graph inside torch.cuda.nvtx.range("decode")
(SITE-NVTX): a sixth site, labelled "decode @ ...". Each graph is replayed
and its result compared bit for bit with the same operation done eagerly
(or by numpy); stdout is one digest line per site and "done", identical
with and without recap. python_sites.sh runs it and check_run.py sites
reads the logs.
Exit 0 right, 1 a wrong result, 77 SKIP (binding missing or no GPU).
"""
import hashlib
import os
import sys

ITERATIONS = 20
ELEMENTS = 1 << 14
SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


class Results:
    """Digest per site of every replayed result; counts mismatches."""

    def __init__(self):
        self.digests = {}
        self.mismatches = 0

    def add(self, site, got_bytes, ok):
        self.digests.setdefault(site, hashlib.sha256()).update(got_bytes)
        if not ok:
            if self.mismatches == 0:
                print(f"site {site}: graph result differs from the eager one", file=sys.stderr)
            self.mismatches += 1

    def finish(self):
        for site in sorted(self.digests):
            print(f"site {site} iterations {ITERATIONS} hash {self.digests[site].hexdigest()[:16]}")
        print(f"done mismatches {self.mismatches}")
        return 0 if self.mismatches == 0 else 1


# ---- torch --------------------------------------------------------------------

def run_torch():
    try:
        import torch
    except ImportError as e:
        skip(f"torch not importable: {e}")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    res = Results()
    x = torch.arange(ELEMENTS, device="cuda", dtype=torch.float32) / 1024.0

    def check(site, y, expect):
        res.add(site, y.cpu().numpy().tobytes(), torch.equal(y, expect))

    def helper(site, k):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):                                        # HELPER
            y = x * k + 0.5
        g.replay()
        check(site, y, x * k + 0.5)

    for i in range(ITERATIONS):
        s = 1.0 + (i % 7) * 0.25
        ga, gb, gc = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(ga): ya = x * s + 1.0                      # SITE-A
        ga.replay()
        check("A", ya, x * s + 1.0)
        with torch.cuda.graph(gb): yb = torch.sin(x) * s                 # SITE-B
        gb.replay()
        check("B", yb, torch.sin(x) * s)
        with torch.cuda.graph(gc): yc = (x - s).abs() + x                # SITE-C
        gc.replay()
        check("C", yc, (x - s).abs() + x)
        helper("D", s)                                                   # SITE-D
        helper("E", -s)                                                  # SITE-E
        gn = torch.cuda.CUDAGraph()
        with torch.cuda.nvtx.range("decode"):
            with torch.cuda.graph(gn): yn = x * x - s                    # SITE-NVTX
        gn.replay()
        check("N", yn, x * x - s)
        del ga, gb, gc, gn
    return res.finish()


# ---- cupy ---------------------------------------------------------------------

def run_cupy():
    try:
        import numpy as np
        import cupy as cp
    except ImportError as e:
        skip(f"cupy/numpy not importable: {e}")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            skip("cupy sees no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError as e:
        skip(f"cupy sees no CUDA device: {e}")
    res = Results()
    host = np.arange(ELEMENTS, dtype=np.float32) / np.float32(1024)
    x = cp.asarray(host)
    stream = cp.cuda.Stream(non_blocking=True)

    def check(site, y, expect):
        got = cp.asnumpy(y)
        res.add(site, got.tobytes(), np.array_equal(got.view(np.uint32), expect.view(np.uint32)))

    def helper(site, k):
        with stream:
            stream.begin_capture()                                       # HELPER
            y = x * k
            graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
        check(site, y, host * k)

    for i in range(ITERATIONS):
        s = np.float32(1.0 + (i % 7) * 0.25)
        with stream:
            stream.begin_capture()                                       # SITE-A
            ya = x * s
            ga = stream.end_capture()
            stream.begin_capture()                                       # SITE-B
            yb = x + s
            gb = stream.end_capture()
            stream.begin_capture()                                       # SITE-C
            yc = x - s
            gc = stream.end_capture()
            for g in (ga, gb, gc):
                g.launch(stream)
            stream.synchronize()
        check("A", ya, host * s)
        check("B", yb, host + s)
        check("C", yc, host - s)
        helper("D", s)                                                   # SITE-D
        helper("E", -s)                                                  # SITE-E
        del ga, gb, gc
    return res.finish()


# ---- cuda.core ----------------------------------------------------------------

def run_cuda_core():
    sys.path.insert(0, HERE)
    import cuda_core_graph as ccg                       # skips (exit 77) when missing
    np, core = ccg.np, ccg.core
    res = Results()
    dev = core.Device(0)
    dev.set_current()
    stream = dev.create_stream()
    if not hasattr(stream, "create_graph_builder"):
        skip("Stream has no create_graph_builder (cuda.core older than 0.3)")
    kernel, _ = ccg.load_kernels(dev)
    nbytes = ELEMENTS * 4
    host = np.arange(ELEMENTS, dtype=np.float32) / np.float32(1024)
    x = dev.allocate(nbytes, stream=stream)
    outs = {site: dev.allocate(nbytes, stream=stream) for site in "ABCDE"}
    stream.sync()
    ccg.check(ccg.driver.cuMemcpyHtoD(int(x.handle), host.ctypes.data, nbytes), "cuMemcpyHtoD")
    config = core.LaunchConfig(grid=16, block=256)
    n = np.int32(ELEMENTS)
    got = np.empty(ELEMENTS, dtype=np.float32)

    def finish(site, builder, a, b):
        builder.end_building()
        graph = builder.complete()
        graph.launch(stream)
        stream.sync()
        ccg.close(graph)
        ccg.close(builder)
        ccg.check(ccg.driver.cuMemcpyDtoH(got.ctypes.data, int(outs[site].handle), nbytes),
                  "cuMemcpyDtoH")
        expect = ccg.affine_ref(host, a, b)
        res.add(site, got.tobytes(), np.array_equal(got.view(np.uint32), expect.view(np.uint32)))

    def helper(site, a, b):
        builder = stream.create_graph_builder()
        builder.begin_building()                                         # HELPER
        core.launch(builder, config, kernel, x, outs[site], a, b, n)
        finish(site, builder, a, b)

    for i in range(ITERATIONS):
        a, b = np.float32(1.0 + (i % 7) * 0.25), np.float32((i % 5) - 2.0)
        builder = stream.create_graph_builder()
        builder.begin_building()                                         # SITE-A
        core.launch(builder, config, kernel, x, outs["A"], a, b, n)
        finish("A", builder, a, b)
        builder = stream.create_graph_builder()
        builder.begin_building()                                         # SITE-B
        core.launch(builder, config, kernel, x, outs["B"], b, a, n)
        finish("B", builder, b, a)
        builder = stream.create_graph_builder()
        builder.begin_building()                                         # SITE-C
        core.launch(builder, config, kernel, x, outs["C"], -a, b, n)
        finish("C", builder, -a, b)
        helper("D", a, -b)                                               # SITE-D
        helper("E", -a, -b)                                              # SITE-E
    for buf in [x] + list(outs.values()):
        ccg.close(buf)
    ccg.close(stream)
    return res.finish()


def main():
    runners = {"torch": run_torch, "cupy": run_cupy, "cuda_core": run_cuda_core}
    if len(sys.argv) != 2 or sys.argv[1] not in runners:
        print(f"usage: python_sites.py {{{','.join(runners)}}}", file=sys.stderr)
        return 2
    return runners[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
