#!/usr/bin/env python3
"""cupy_capture.py - GPU test: CuPy stream capture in a loop, a new graph every
iteration (stream.begin_capture() / end_capture() -> graph.launch(), then the
graph object is dropped, which destroys CuPy's executable graph).

Each iteration captures elementwise kernels into preallocated outputs:
t = x * a, t = t + b, y = t * c + u (a raw kernel), with float32 scalars that
change every iteration and an input array that alternates between two. The
result is compared bit for bit with numpy doing the same float32 operations.

Proves, run plain and under recap (stdout compared byte for byte, recap's log
read by run_all.sh): CuPy's path (runtime capture and instantiation, kernels
launched with cuLaunchKernel from NVRTC-compiled modules) works under recap,
recap serves the instantiations after the first from the released executable
graph, and results stay bit-exact.
Exit 0 right, 1 a wrong result, 77 SKIP (no cupy or no GPU).
"""
import hashlib
import os
import statistics
import sys
import time

# GPU_TEST_ITERATIONS and GPU_TEST_TIMING=1 are for scripts/bench python: the
# median time of the capture-to-release section of the loop, after 10
# warm-up iterations, as a "result" line (not printed otherwise).
ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "200"))
TIMING = os.environ.get("GPU_TEST_TIMING") == "1"
ELEMENTS = 1 << 16
SKIP = 77

try:
    import numpy as np
    import cupy as cp
except ImportError as e:
    print(f"SKIP: cupy/numpy not importable: {e}")
    sys.exit(SKIP)

# y = t * c + u with two separately rounded operations, like numpy's below.
SCALE_ADD = r'''
extern "C" __global__ void scale_add(const float *t, const float *u, float *y, float c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = __fadd_rn(__fmul_rn(t[i], c), u[i]);
}
'''


def scalars(iteration):
    return (np.float32(1.0 + (iteration % 5) * 0.25),
            np.float32((iteration % 11) - 5.0),
            np.float32(0.5 + (iteration % 3) * 0.125))


def capture_and_launch(stream, record, iteration, marks=None):
    """The loop's timed section (also scripts/python_paired.py's): a new
    graph of record(iteration) captured on stream, launched, waited for and
    released. marks, a list, gets time.perf_counter() after each step."""
    mark = (lambda: marks.append(time.perf_counter())) if marks is not None else (lambda: None)
    with stream:
        stream.begin_capture()
        mark()
        record(iteration)
        mark()
        graph = stream.end_capture()
        mark()
    graph.launch(stream)
    mark()
    stream.synchronize()
    mark()
    del graph
    mark()


def main():
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            print("SKIP: cupy sees no CUDA device")
            return SKIP
    except cp.cuda.runtime.CUDARuntimeError as e:
        print(f"SKIP: cupy sees no CUDA device: {e}")
        return SKIP

    index = np.arange(ELEMENTS, dtype=np.int64)
    host_x = [((index * 2654435761 + b * 40503) % 2048 - 1024).astype(np.float32) / np.float32(1024)
              for b in range(2)]
    host_u = (index % 97).astype(np.float32) / np.float32(64)
    x = [cp.asarray(h) for h in host_x]
    u = cp.asarray(host_u)
    t = cp.empty(ELEMENTS, dtype=cp.float32)
    y = cp.empty(ELEMENTS, dtype=cp.float32)
    scale_add = cp.RawKernel(SCALE_ADD, "scale_add")
    threads, blocks = 256, 64

    stream = cp.cuda.Stream(non_blocking=True)

    def record(iteration):
        a, b, c = scalars(iteration)
        cp.multiply(x[iteration & 1], a, out=t)
        cp.add(t, b, out=t)
        scale_add((blocks,), (threads,), (t, u, y, c, np.int32(ELEMENTS)))

    # Run the same operations once outside capture so that every kernel is
    # compiled and loaded before the first capture.
    with stream:
        record(0)
    stream.synchronize()

    digest = hashlib.sha256()
    mismatches = 0
    times = []
    for iteration in range(ITERATIONS):
        t0 = time.perf_counter()
        capture_and_launch(stream, record, iteration)
        times.append(time.perf_counter() - t0)
        got = cp.asnumpy(y, stream=stream)
        stream.synchronize()

        a, b, c = scalars(iteration)
        # numpy rounds each float32 operation separately: the same as the GPU.
        expect = ((host_x[iteration & 1] * a).astype(np.float32) + b).astype(np.float32)
        expect = ((expect * c).astype(np.float32) + host_u).astype(np.float32)
        if not np.array_equal(got.view(np.uint32), expect.view(np.uint32)):
            if mismatches == 0:
                bad = int(np.flatnonzero(got.view(np.uint32) != expect.view(np.uint32))[0])
                print(f"iteration {iteration} element {bad}: got {float(got[bad]).hex()}, "
                      f"expected {float(expect[bad]).hex()}", file=sys.stderr)
            mismatches += 1
        digest.update(got.tobytes())
        if (iteration + 1) % 20 == 0:
            print(f"iteration {iteration + 1:3d} hash {digest.hexdigest()[:16]} "
                  f"first {float(got[0]).hex()} last {float(got[-1]).hex()}")
    print(f"final iterations {ITERATIONS} hash {digest.hexdigest()[:16]} mismatches {mismatches}")
    if TIMING:
        warm = times[10:] or times
        print(f"result program=cupy iterations={ITERATIONS} "
              f"median_ms={statistics.median(warm) * 1e3:.4f}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
