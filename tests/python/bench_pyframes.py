"""bench_pyframes.py - what reading the Python frames costs per capture.

Calls policy/pyframes (through the ctypes-loaded probe, GIL released) from
a Python stack DEPTH frames deep and prints ns per read with the memo hit
and missed, against a baseline measured in the same run: one ctypes call
into the probe that reads nothing. The capture begin pays the hit on a
repeat capture, the miss at a new stack.
"""
import ctypes
import os
import sys
import time

probe = ctypes.CDLL(os.environ['PYFRAMES_PROBE'])
probe.probe_configure(None)


def nested(n, fn):
    return nested(n - 1, fn) if n > 0 else fn()


def bench(stack_depth, iterations=5000, repeats=5):
    """Fastest of `repeats` runs: the machine is shared and noisy."""
    best = (float('inf'), float('inf'))
    for _ in range(repeats):
        hit = ctypes.c_double()
        miss = ctypes.c_double()
        h = ctypes.c_uint64()
        rc = nested(stack_depth, lambda: probe.probe_bench(8, iterations, ctypes.byref(hit),
                                                           ctypes.byref(miss), ctypes.byref(h)))
        if rc != 0:
            sys.exit('memo hit and miss disagree')
        best = (min(best[0], hit.value), min(best[1], miss.value))
    return best


def baseline(iterations=20000, repeats=5):
    skipped = probe.probe_skipped
    skipped.argtypes = [ctypes.c_char_p]
    best = float('inf')
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(iterations):
            skipped(b'x')
        best = min(best, (time.perf_counter_ns() - t0) / iterations)
    return best


def main():
    base = baseline()
    print(f'baseline: one ctypes call from Python: {base:.0f} ns')
    print('python frames below the read | hit ns | miss ns | hit/baseline | miss/baseline')
    for depth in (2, 10, 30, 60):
        hit, miss = bench(depth)
        print(f'{depth:>29} | {hit:6.0f} | {miss:7.0f} | {hit / base:12.3f} | {miss / base:13.3f}')


if __name__ == '__main__':
    main()
