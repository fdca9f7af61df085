#!/usr/bin/env python3
"""python_paired.py - one process, one loop, three capture sites: the
capture-to-release section of a GPU-suite Python loop (tests/gpu:
torch_loop.py, cupy_capture.py, cuda_core_graph.py, whose own functions it
uses) runs every iteration through three functions, way_self, way_reuse and
way_off, in rotating order. To recap each function is a capture site of its
own; scripts/bench python --paired gives them, in a configuration file,
recap's default (self-recording), executable reuse alone (self_record = off)
and nothing (mode = off). Every way's result is checked against the
program's own reference, and the three ways' results against each other.

Prints one line: "result program=P iterations=N blocks=B" and, for each
ratio self/reuse, self/off and reuse/off, the median of the per-block
ratios of the ways' median times and its quartiles, then each way's median
time in ms, where the section marks its steps (CuPy: begin, kernels, end,
launch, wait, release; cuda.core: begin, kernels, end, complete and
launch, wait, close; the PyTorch loops: enter, body, exit, replay, wait,
read and release, and free: the frees of what the section released,
which PyTorch would otherwise leave to the next enter, another way's)
each step's median in us, the card's used memory at the loop's end
(device_used_mib, by NVML, where it answers), and the mismatches. The
first 10 iterations are warm-up.

With PAIRED_CHECK=after in the environment, each iteration's results are
checked against the reference only after the loop (each iteration's input
prepared again): the reference runs the program eagerly, and PyTorch's
eager run allocates outside any capture, memory the next step's
empty_cache frees at the driver. bench steady sets it, so that what it
counts per step is the loop's own, not the check's.

usage: python_paired.py torch|cupy|cuda_core|resnet18|decoder ITERATIONS
(resnet18 and decoder: real models, from bench_models.py)
Exit 0, 1 on a wrong or differing result, 2 on bad usage, 77 when the
program's package or a GPU is missing.
"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import bench_models  # noqa: E402

WAYS = ("self", "reuse", "off")
RATIOS = (("self", "reuse"), ("self", "off"), ("reuse", "off"))
WARM_UP = 10
BLOCK = 10


# One function per way: each is its own capture site to recap (its frame is
# among the capture's Python frames). Kept apart, one call each.
def way_self(section, iteration, marks):
    return section(iteration, marks)


def way_reuse(section, iteration, marks):
    return section(iteration, marks)


def way_off(section, iteration, marks):
    return section(iteration, marks)


CALLS = {"self": way_self, "reuse": way_reuse, "off": way_off}


# ---- the loops: prepare (untimed), section (timed), result (untimed: what
# the section left, on the host), right (against the program's reference)
# and same (two ways' results equal) ---------------------------------------

def torch_loop():
    import torch_loop as t
    torch, setup = t.torch, t.torch_setup
    device = torch.device("cuda")
    w1, b1, w2 = setup.model_weights(torch, t.WIDTH, seed=0, scale=16.0)
    static_x = torch.zeros(t.BATCH, t.WIDTH, device=device)
    setup.warm_up(torch, lambda: [t.step(static_x, w1, b1, w2, 1.0) for _ in range(3)])

    def scale_of(iteration):
        return 0.5 + (iteration % 8) * 0.125

    def prepare(iteration):
        static_x.copy_(t.inputs_for(iteration))

    def section(iteration, marks):
        scale = scale_of(iteration)
        return setup.capture_once(torch, lambda: t.step(static_x, w1, b1, w2, scale), marks)

    def right(iteration, got):
        eager = t.step(static_x, w1, b1, w2, scale_of(iteration)).cpu()
        return torch.allclose(got, eager, rtol=1e-5, atol=1e-5)

    # capture_once hands back the result on the CPU, as the test times it.
    return prepare, section, (lambda returned: returned), right, \
        lambda a, b: bool(torch.equal(a, b))


def cupy_loop():
    import cupy_capture as c
    cp, np = c.cp, c.np
    index = np.arange(c.ELEMENTS, dtype=np.int64)
    host_x = [((index * 2654435761 + b * 40503) % 2048 - 1024).astype(np.float32)
              / np.float32(1024) for b in range(2)]
    host_u = (index % 97).astype(np.float32) / np.float32(64)
    x = [cp.asarray(h) for h in host_x]
    u = cp.asarray(host_u)
    t = cp.empty(c.ELEMENTS, dtype=cp.float32)
    y = cp.empty(c.ELEMENTS, dtype=cp.float32)
    scale_add = cp.RawKernel(c.SCALE_ADD, "scale_add")
    stream = cp.cuda.Stream(non_blocking=True)

    def record(iteration):
        a, b, k = c.scalars(iteration)
        cp.multiply(x[iteration & 1], a, out=t)
        cp.add(t, b, out=t)
        scale_add((64,), (256,), (t, u, y, k, np.int32(c.ELEMENTS)))

    with stream:
        record(0)
    stream.synchronize()

    def section(iteration, marks):
        c.capture_and_launch(stream, record, iteration, marks)

    def result(returned):
        got = cp.asnumpy(y, stream=stream)
        stream.synchronize()
        return got

    def right(iteration, got):
        a, b, k = c.scalars(iteration)
        expect = ((host_x[iteration & 1] * a).astype(np.float32) + b).astype(np.float32)
        expect = ((expect * k).astype(np.float32) + host_u).astype(np.float32)
        return np.array_equal(got.view(np.uint32), expect.view(np.uint32))

    return (lambda iteration: None), section, result, right, \
        lambda a, b: np.array_equal(a.view(np.uint32), b.view(np.uint32))


def cuda_core_loop():
    import cuda_core_graph as g
    core, np, driver = g.core, g.np, g.driver
    dev = core.Device(0)
    dev.set_current()
    stream = dev.create_stream()
    if not hasattr(stream, "create_graph_builder"):
        g.skip("Stream has no create_graph_builder (cuda.core older than 0.3)")
    kernel, _ = g.load_kernels(dev)
    nbytes = g.ELEMENTS * 4
    index = np.arange(g.ELEMENTS, dtype=np.int64)
    host_in = [((index * 2654435761 + b * 40503) % 2048 - 1024).astype(np.float32)
               / np.float32(1024) for b in range(2)]
    inputs = [dev.allocate(nbytes, stream=stream) for _ in range(2)]
    outputs = [dev.allocate(nbytes, stream=stream) for _ in range(2)]
    tmp = dev.allocate(nbytes, stream=stream)
    stream.sync()
    for buf, host in zip(inputs, host_in):
        g.check(driver.cuMemcpyHtoD(int(buf.handle), host.ctypes.data, nbytes), "cuMemcpyHtoD")
    config = core.LaunchConfig(grid=64, block=256)
    n = np.int32(g.ELEMENTS)

    def section(iteration, marks):
        x, y = inputs[iteration & 1], outputs[(iteration >> 1) & 1]
        g.build_and_launch(stream, config, kernel, x, tmp, y, n, *g.scalars(iteration),
                           marks=marks)
        return y

    def result(y):
        got = np.empty(g.ELEMENTS, dtype=np.float32)
        g.check(driver.cuMemcpyDtoH(got.ctypes.data, int(y.handle), nbytes), "cuMemcpyDtoH")
        return got

    def right(iteration, got):
        a, b, a2, b2 = g.scalars(iteration)
        expect = g.affine_ref(g.affine_ref(host_in[iteration & 1], a, b), a2, b2)
        return np.array_equal(got.view(np.uint32), expect.view(np.uint32))

    return (lambda iteration: None), section, result, right, \
        lambda p, q: np.array_equal(p.view(np.uint32), q.view(np.uint32))


LOOPS = {"torch": torch_loop, "cupy": cupy_loop, "cuda_core": cuda_core_loop}
LOOPS.update(bench_models.MODELS)
# The loops that capture with torch.cuda.graph (each way pays for its own
# frees: paying_own_frees).
TORCH_LOOPS = ("torch",) + tuple(bench_models.MODELS)


def paying_own_frees(section, free):
    """The section, then free() - the frees of what it released - timed as
    its last step. PyTorch frees a released graph's pool at the driver
    only at the next torch.cuda.graph enter (its empty_cache), and in this
    loop the next enter is another way's: without this, the way after the
    mode-off one paid for the off way's frees at the driver (two cudaFree
    of about 33 us each) while recap's kept memory made its own cheap,
    and the off way never paid for its own. With the rotation below the
    self way follows the off way in two iterations of three, the reuse way
    in one, the off way never: the medians billed the off way's frees to
    the self way. In a program with one site each step's enter frees the
    same site's previous pool, so each way paying for its own is the
    program's own cost."""
    def section_and_frees(iteration, marks):
        returned = section(iteration, marks)
        free()
        marks.append(time.perf_counter())
        return returned
    return section_and_frees


def run_ways(iterations, prepare, section, result, right, same, check_after=False):
    """Every iteration, the section through the three ways in rotating
    order, each timed. Returns (times, phases, mismatches): per way the
    section's seconds per iteration and, where the section marks its
    steps, each step's seconds; and how many iterations had a wrong or
    differing result. With check_after, the results (on the host) are
    checked against the reference after the loop."""
    times = {w: [] for w in WAYS}
    phases = {w: [] for w in WAYS}     # per iteration, the section's steps in seconds
    mismatches = 0
    unchecked = []                     # (iteration, results) for check_after
    for iteration in range(iterations):
        prepare(iteration)
        results = {}
        shift = iteration % len(WAYS)
        for way in WAYS[shift:] + WAYS[:shift]:
            marks = []
            t0 = time.perf_counter()
            returned = CALLS[way](section, iteration, marks)
            times[way].append(time.perf_counter() - t0)
            if marks:
                steps = [t0] + marks
                phases[way].append([b - a for a, b in zip(steps, steps[1:])])
            results[way] = result(returned)
        if check_after:
            unchecked.append((iteration, results))
        else:
            mismatches += check(iteration, results, right, same, mismatches == 0)
    for iteration, results in unchecked:
        prepare(iteration)
        mismatches += check(iteration, results, right, same, mismatches == 0)
    return times, phases, mismatches


def check(iteration, results, right, same, say):
    """1 where a way's result is wrong or differs from the first way's."""
    bad = [w for w in WAYS if not right(iteration, results[w])]
    bad += [w for w in WAYS[1:] if not same(results[w], results[WAYS[0]])]
    if bad and say:
        print(f"iteration {iteration}: wrong or differing result in way(s) {bad}",
              file=sys.stderr)
    return int(bool(bad))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in LOOPS or not sys.argv[2].isdigit():
        print(f"usage: {sys.argv[0]} {'|'.join(LOOPS)} ITERATIONS", file=sys.stderr)
        return 2
    program, iterations = sys.argv[1], int(sys.argv[2])
    prepare, section, result, right, same = LOOPS[program]()
    if program in TORCH_LOOPS:
        import torch
        section = paying_own_frees(section, torch.cuda.empty_cache)
    when = os.environ.get("PAIRED_CHECK", "each")
    if when not in ("each", "after"):
        print(f"{sys.argv[0]}: PAIRED_CHECK is {when!r}, expected 'each' (every iteration, "
              f"the default) or 'after' (after the loop)", file=sys.stderr)
        return 2
    check_after = when == "after"
    times, phases, mismatches = run_ways(iterations, prepare, section, result, right, same,
                                         check_after)

    line = f"result program={program} iterations={iterations}"
    warm = {w: t[WARM_UP:] or t for w, t in times.items()}
    nblocks = max(1, len(warm["self"]) // BLOCK)
    line += f" blocks={nblocks}"
    for a, b in RATIOS:
        ratios = []
        for k in range(nblocks):
            part = slice(k * BLOCK, (k + 1) * BLOCK if k < nblocks - 1 else None)
            ratios.append(statistics.median(warm[a][part]) / statistics.median(warm[b][part]))
        q1, q2, q3 = (benchlib.quantile(ratios, q) for q in (0.25, 0.5, 0.75))
        line += f" {a}_{b}={q2:.4f} {a}_{b}_q1={q1:.4f} {a}_{b}_q3={q3:.4f}"
    for w in WAYS:
        line += f" {w}_ms={statistics.median(warm[w]) * 1e3:.4f}"
    for w in WAYS:
        steps = phases[w][WARM_UP:] or phases[w]
        if steps:
            line += f" {w}_steps_us=" + "/".join(
                f"{statistics.median(s[k] for s in steps) * 1e6:.1f}" for k in range(len(steps[0])))
    used = benchlib.device_used_mib()
    if used is not None:
        line += f" device_used_mib={used}"
    print(f"{line} mismatches={mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
