#!/usr/bin/env python3
"""cuda_core_graph.py - GPU test: a cuda.core GraphBuilder loop, a new graph every
iteration: stream.create_graph_builder(), begin_building(), two kernel
launches, end_building(), complete() (cuGraphInstantiateWithParams),
graph.launch(stream), then graph.close() and builder.close().

The kernels are the shared affine kernels (affine_kernels.cuh), compiled
with cuda.core's Program (NVRTC) or, where NVRTC is missing, with nvcc -cubin
and loaded with ObjectCode.from_cubin. Scalars change every iteration; the
input and output buffers alternate between two each. Results are compared bit
for bit with numpy doing the same float32 operations.

Proves, run plain and under recap (stdout compared byte for byte, recap's log
read by run_all.sh): the cuda-python path (cuda.bindings resolving each driver
function through cuGetProcAddress at its minimum ABI version) works under
recap, cuGraphInstantiateWithParams after the first iteration becomes an
update of the released executable graph, and results stay bit-exact.
Written against cuda.core 0.3 - 1.x: names are looked up defensively and a
missing one gives a SKIP line naming it.
Exit 0 right, 1 a wrong result, 77 SKIP.
"""
import hashlib
import os
import shutil
import subprocess
import statistics
import sys
import time
import tempfile

# GPU_TEST_ITERATIONS and GPU_TEST_TIMING=1 are for scripts/bench python: the
# median time of the capture-to-release section of the loop, after 10
# warm-up iterations, as a "result" line (not printed otherwise).
ITERATIONS = int(os.environ.get("GPU_TEST_ITERATIONS", "200"))
TIMING = os.environ.get("GPU_TEST_TIMING") == "1"
ELEMENTS = 1 << 16
SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


try:
    import numpy as np
except ImportError as e:
    skip(f"numpy not importable: {e}")

try:
    import cuda.core as core
    if not hasattr(core, "Device"):
        raise ImportError("cuda.core has no Device")
except ImportError:
    try:
        import cuda.core.experimental as core
    except ImportError as e:
        skip(f"cuda.core not importable: {e}")

try:
    from cuda.bindings import driver
except ImportError:
    try:
        from cuda import cuda as driver
    except ImportError as e:
        skip(f"cuda.bindings not importable: {e}")

for name in ("Device", "LaunchConfig", "launch", "Program", "ProgramOptions"):
    if not hasattr(core, name):
        skip(f"{core.__name__} has no attribute {name!r}")


def check(result, what):
    """cuda.bindings calls return a tuple whose first item is the CUresult."""
    err = result[0] if isinstance(result, tuple) else result
    if err != driver.CUresult.CUDA_SUCCESS:
        print(f"{what} failed: {err}", file=sys.stderr)
        sys.exit(1)


def device_arch(dev):
    arch = getattr(dev, "arch", None)
    if arch:
        return str(arch)
    cc = dev.compute_capability
    return f"{cc[0]}{cc[1]}"


def load_kernels(dev):
    """Returns (affine kernel, how it was built); skips when nothing works."""
    with open(os.path.join(HERE, "affine_kernels.cuh"), encoding="utf-8") as f:
        source = f.read()
    arch = device_arch(dev)
    reasons = []
    try:
        program = core.Program(source, code_type="c++",
                               options=core.ProgramOptions(arch=f"sm_{arch}", std="c++17"))
        return program.compile("cubin").get_kernel("affine"), "nvrtc"
    except Exception as e:  # NVRTC missing or broken: try nvcc below
        reasons.append(f"Program (NVRTC): {type(e).__name__}: {e}")
    object_code = getattr(core, "ObjectCode", None)
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                                "bin", "nvcc")
    if object_code is None or not hasattr(object_code, "from_cubin"):
        reasons.append("no ObjectCode.from_cubin")
    elif not os.path.exists(nvcc):
        reasons.append("no nvcc")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            cubin = os.path.join(tmp, "affine.cubin")
            done = subprocess.run([nvcc, "-cubin", f"-arch=sm_{arch}", "-o", cubin,
                                   "-x", "cu", os.path.join(HERE, "affine_kernels.cuh")],
                                  capture_output=True, text=True)
            if done.returncode == 0:
                with open(cubin, "rb") as f:
                    return object_code.from_cubin(f.read()).get_kernel("affine"), "nvcc"
            reasons.append(f"nvcc -cubin: {done.stderr.strip()[:200]}")
    skip("cannot build the kernel: " + "; ".join(reasons))


def scalars(iteration):
    """The same schedule as affine_ref.h's affine_params_for (a, b, a2, b2)."""
    return (np.float32(1.0 + (iteration % 5) * 0.25), np.float32((iteration % 11) - 5.0),
            np.float32(0.5 + (iteration % 3) * 0.125), np.float32(iteration * 0.0625))


def affine_ref(x, a, b):
    return ((x * a).astype(np.float32) + b).astype(np.float32)


def close(obj):
    closer = getattr(obj, "close", None)
    if closer is not None:
        closer()


def build_and_launch(stream, config, kernel, x, tmp, y, n, a, b, a2, b2, marks=None):
    """The loop's timed section (also scripts/python_paired.py's): a new
    graph of the two launches built, completed, launched, waited for and
    closed. marks, a list, gets time.perf_counter() after each step."""
    mark = (lambda: marks.append(time.perf_counter())) if marks is not None else (lambda: None)
    builder = stream.create_graph_builder()
    builder.begin_building()
    mark()
    core.launch(builder, config, kernel, x, tmp, a, b, n)
    core.launch(builder, config, kernel, tmp, y, a2, b2, n)
    mark()
    builder.end_building()
    mark()
    graph = builder.complete()
    graph.launch(stream)
    mark()
    stream.sync()
    mark()
    close(graph)
    close(builder)
    mark()


def main():
    dev = core.Device(0)
    dev.set_current()
    stream = dev.create_stream()
    if not hasattr(stream, "create_graph_builder"):
        skip("Stream has no create_graph_builder (cuda.core older than 0.3)")
    kernel, built_by = load_kernels(dev)
    print(f"cuda_core_graph: {core.__name__}, kernel built with {built_by}", file=sys.stderr)

    nbytes = ELEMENTS * 4
    index = np.arange(ELEMENTS, dtype=np.int64)
    host_in = [((index * 2654435761 + b * 40503) % 2048 - 1024).astype(np.float32) / np.float32(1024)
               for b in range(2)]
    inputs = [dev.allocate(nbytes, stream=stream) for _ in range(2)]
    outputs = [dev.allocate(nbytes, stream=stream) for _ in range(2)]
    tmp = dev.allocate(nbytes, stream=stream)
    stream.sync()
    for buf, host in zip(inputs, host_in):
        check(driver.cuMemcpyHtoD(int(buf.handle), host.ctypes.data, nbytes), "cuMemcpyHtoD")

    config = core.LaunchConfig(grid=64, block=256)
    n = np.int32(ELEMENTS)
    got = np.empty(ELEMENTS, dtype=np.float32)
    digest = hashlib.sha256()
    mismatches = 0
    times = []
    for iteration in range(ITERATIONS):
        a, b, a2, b2 = scalars(iteration)
        x, y = inputs[iteration & 1], outputs[(iteration >> 1) & 1]
        t0 = time.perf_counter()
        build_and_launch(stream, config, kernel, x, tmp, y, n, a, b, a2, b2)
        times.append(time.perf_counter() - t0)
        check(driver.cuMemcpyDtoH(got.ctypes.data, int(y.handle), nbytes), "cuMemcpyDtoH")

        expect = affine_ref(affine_ref(host_in[iteration & 1], a, b), a2, b2)
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
        print(f"result program=cuda_core iterations={ITERATIONS} "
              f"median_ms={statistics.median(warm) * 1e3:.4f}")
    for buf in inputs + outputs + [tmp]:
        close(buf)
    close(stream)
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
