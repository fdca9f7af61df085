"""bench steady - what still reaches the driver per step once a loop is warm,
and the device memory a run ends with, plain and under recap.

Each program is the capture-to-release section of scripts/benchmarks/
python_paired.py (PyTorch's loop, resnet18, the decoder layer; CuPy and
cuda.core on request), run with no configuration: its three way functions
are three sites, each recap's default. Every run loads a CUPTI injection
library (driver_calls.c, built here with the CUPTI of this machine) that
counts the driver calls arriving in the driver itself: what recap answers
on its own (kept memory handed back, an executable graph reused, a capture
recorded) is not counted.

The results are checked against the program's reference after the loop
(python_paired.py's PAIRED_CHECK=after): the reference runs eagerly, and
PyTorch's eager run between steps allocated outside any capture what the
next step's empty_cache freed at the driver, one allocation a step for
resnet18 that was the check's, not the loop's.

Each program runs plain and under recap at two lengths; the difference
between the lengths, divided by the steps between them, is what a warm step
costs at the driver: allocations, frees, pinned host memory, capture
begins, instantiations, whole updates, per-node setters, launches, and all
driver calls; then the sizes of the device allocations that still reached
the driver per step, the kernel parameters that per-node setters changed
most often (each setter compared with the same node's previous one, in
the counter), and under recap what its kept memory did (the log's end
event, with its reasons for memory not kept). Device memory is NVML's
"used" for the whole card at the end of the longer run's loop (not
cuMemGetInfo, which recap answers); the column recap - plain is set
against recap's cache budget, from its log.

usage: scripts/bench steady [--recap-lib PATH] [--programs torch,resnet18,decoder]
                            [--lengths 30,90] [--calls N]
"""
import argparse
import collections
import glob
import os
import subprocess
import sys
import sysconfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

PROGRAMS = ("torch", "resnet18", "decoder", "cupy", "cuda_core")
WAYS_PER_ITERATION = 3   # python_paired.py runs its section three times an iteration
SKIP = 77

# Column -> what counts in it: driver function names' prefixes (a name
# counts in the first column that matches: cuMemAllocHost is host memory,
# not a device allocation).
CLASSES = collections.OrderedDict([
    ("host", ("cuMemHostAlloc", "cuMemAllocHost", "cuMemHostRegister", "cuMemFreeHost",
              "cuMemHostUnregister")),
    ("alloc", ("cuMemAlloc", "cuMemCreate")),
    ("free", ("cuMemFree", "cuMemRelease")),
    ("begin", ("cuStreamBeginCapture",)),
    ("instantiate", ("cuGraphInstantiate",)),
    ("update", ("cuGraphExecUpdate",)),
    ("setters", ("cuGraphExecKernelNodeSetParams", "cuGraphExecMemcpyNodeSetParams",
                 "cuGraphExecMemsetNodeSetParams", "cuGraphExecNodeSetParams",
                 "cuGraphExecHostNodeSetParams")),
    ("launch", ("cuGraphLaunch",)),
])


def cupti_dirs():
    """(include dir, library dir) of CUPTI: the CUDA toolkit's, else the
    nvidia-cuda-cupti wheel's (the one PyTorch loads)."""
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    includes = [os.path.join(cuda, "include"), os.path.join(cuda, "extras", "CUPTI", "include")]
    purelib = sysconfig.get_paths()["purelib"]
    wheel = glob.glob(os.path.join(purelib, "nvidia", "*", "lib", "libcupti.so*")) + \
        glob.glob(os.path.join(purelib, "nvidia", "cuda_cupti", "lib", "libcupti.so*"))
    libs = [os.path.dirname(p) for p in wheel] + \
        [os.path.join(cuda, "extras", "CUPTI", "lib64"), os.path.join(cuda, "lib64")]
    include = next((d for d in includes if os.path.exists(os.path.join(d, "cupti.h"))), None)
    lib = next((d for d in libs if glob.glob(os.path.join(d, "libcupti.so*"))), None)
    if not include or not lib:
        raise benchlib.BenchError(f"CUPTI not found (cupti.h in {includes}, libcupti.so in "
                                  f"{libs}); it comes with the CUDA toolkit")
    return include, lib


def build_counter(workdir):
    include, lib = cupti_dirs()
    sofile = os.path.join(lib, "libcupti.so")
    if not os.path.exists(sofile):   # a wheel ships only the versioned name
        sofile = sorted(glob.glob(os.path.join(lib, "libcupti.so.*")))[0]
    out = os.path.join(workdir, "driver_calls.so")
    command = ["gcc", "-O2", "-shared", "-fPIC", "-I" + include,
               os.path.join(benchlib.BENCHMARKS, "driver_calls.c"), sofile,
               "-Wl,-rpath," + lib, "-o", out]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise benchlib.BenchError(f"building the driver-call counter failed: {' '.join(command)}\n"
                                  f"{done.stderr[-1500:]}")
    return out


def classify(counts):
    got = {c: 0 for c in CLASSES}
    for name, n in counts.items():
        for column, prefixes in CLASSES.items():
            if name.startswith(prefixes):
                got[column] += n
                break
    got["all"] = sum(counts.values())
    return got


# One run: per-column driver calls, device MiB used at the end, recap's log
# (None plain), cuMemAlloc sizes {bytes: count}, the setters' changed
# parameters (parse_setter's tuples) and the driver calls {name: count}.
Run = collections.namedtuple("Run", "columns device_mib log sizes setters counts")


def run_once(python, program, iterations, lib, counter, workdir):
    """One run: a Run, or None where the program skipped."""
    tag = f"{'recap' if lib else 'plain'}-{program}-{iterations}"
    calls = os.path.join(workdir, tag + ".calls")
    env = benchlib.environment_without(("LD_PRELOAD", "RECAP_LOG", "RECAP_CONFIG", "RECAP_SITES",
                                        "RECAP_MODE", "RECAP_SELF_RECORD", "RECAP_VERBOSE"))
    # The results are checked after the loop: the eager reference between
    # steps allocates outside any capture, and the next step frees it.
    env.update({"CUDA_INJECTION64_PATH": counter, "DRIVER_CALLS_OUT": calls,
                "PAIRED_CHECK": "after", "DRIVER_CALLS_SETTERS": "1"})
    log = None
    if lib:
        log = os.path.join(workdir, tag + ".jsonl")
        env.update({"LD_PRELOAD": benchlib.preloadable(lib), "RECAP_LOG": log})
    script = os.path.join(benchlib.BENCHMARKS, "python_paired.py")
    done = subprocess.run([python, script, program, str(iterations)], capture_output=True,
                          text=True, env=env)
    if done.returncode == SKIP:
        return None
    if done.returncode != 0:
        raise benchlib.BenchError(f"{tag} exited {done.returncode}\n"
                                  f"{done.stdout[-1500:]}{done.stderr[-1500:]}")
    counts, sizes, setters = {}, {}, []
    try:
        with open(calls, encoding="utf-8") as f:
            for line in f:
                if line.startswith("setter:"):
                    setters.append(parse_setter(line))
                    continue
                name, n = line.split()
                if name.startswith("size:"):
                    sizes[int(name[5:])] = int(n)
                else:
                    counts[name] = int(n)
    except OSError as e:
        raise benchlib.BenchError(f"{tag}: the driver-call counter wrote nothing ({e}); "
                                  f"stderr: {done.stderr[-800:]}")
    result = benchlib.results(done.stdout)[0]
    return Run(classify(counts), result.get("device_used_mib"), log, sizes, setters, counts)


def busiest_calls(short_counts, long_counts, steps, most):
    """The driver functions called most per warm step: [(name, per step)]."""
    per_step = {name: (n - short_counts.get(name, 0)) / steps for name, n in long_counts.items()}
    ranked = sorted(((v, k) for k, v in per_step.items() if v > 0), reverse=True)[:most]
    return [(name, v) for v, name in ranked]


def parse_setter(line):
    """A "setter:INDEX COUNT SIZE@OFFSET BEFORE AFTER KERNEL" line of
    driver_calls.c: (count, kernel, parameter index, "SIZE@OFFSET", the
    bytes from the first that differed, before and after)."""
    head, count, where, before, after, kernel = line.split(maxsplit=5)
    return int(count), kernel.strip(), int(head[len("setter:"):]), where, before, after


def setter_changes_line(setters, steps, most=6):
    """The kernel parameters per-node setters changed most often, per step."""
    if not setters:
        return None
    top = sorted(setters, reverse=True)[:most]
    return "parameters the per-node setters changed (longer run, per step): " + "; ".join(
        f"{kernel[:60]} #{index} x{count / steps:.2f} (bytes {where}: {before} -> {after})"
        for count, kernel, index, where, before, after in top)


def kept_memory_line(log):
    """What recap's kept memory did, summed over the sites of its log's
    end event, with the reasons it gave for memory it did not keep."""
    tracked = kept = reused = not_kept = 0
    reasons = set()
    for event in benchlib.log_events(log, "end"):
        tracked = kept = reused = not_kept = 0
        reasons = set()
        for site in event.get("sites") or []:
            tracked += int(site.get("memory_tracked", 0))
            kept += int(site.get("memory_kept", 0))
            reused += int(site.get("memory_reused", 0))
            not_kept += int(site.get("memory_not_kept", 0))
            if site.get("memory_not_kept_reason"):
                reasons.add(site["memory_not_kept_reason"])
    why = f" ({'; '.join(sorted(reasons))})" if reasons else ""
    return (f"recap's kept memory: {tracked} block(s) tracked, {kept} kept, {reused} handed "
            f"back, {not_kept} not kept{why}")


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench steady", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recap-lib", help="path of librecap.so")
    parser.add_argument("--programs", default="torch,resnet18,decoder",
                        help="comma-separated subset of " + ", ".join(PROGRAMS))
    parser.add_argument("--calls", type=int, default=0, metavar="N",
                        help="also print the N driver functions called most per warm step")
    parser.add_argument("--lengths", default="30,90",
                        help="the two loop lengths, in iterations of three steps (default 30,90)")
    args = parser.parse_args(argv)
    programs = [p for p in args.programs.split(",") if p]
    if set(programs) - set(PROGRAMS):
        parser.error(f"unknown program(s) {sorted(set(programs) - set(PROGRAMS))}, "
                     f"expected some of {PROGRAMS}")
    try:
        short, long_ = (int(x) for x in args.lengths.split(","))
    except ValueError:
        short = long_ = 0
    if not 0 < short < long_:
        parser.error(f"--lengths must be two increasing positive counts, got {args.lengths}")
    lib = benchlib.recap_lib(args.recap_lib)
    python = os.environ.get("PYTHON", sys.executable)
    workdir = benchlib.make_workdir("steady")
    counter = build_counter(workdir)
    steps = (long_ - short) * WAYS_PER_ITERATION
    print("bench steady: driver calls per warm step, counted inside the driver (CUPTI), "
          "and device memory at the end")
    print(f"librecap: {lib}; python: {python}; lengths {short} and {long_} iterations "
          f"({steps} steps between them)")
    columns = list(CLASSES) + ["all"]
    header = f"{'program':<10} {'way':<6}" + "".join(f"{c:>12}" for c in columns) + \
        f"{'device MiB':>12}"
    print(header)
    print("-" * len(header))
    for program in programs:
        used = {}
        for way_lib in (None, lib):
            way = "recap" if way_lib else "plain"
            a = run_once(python, program, short, way_lib, counter, workdir)
            b = run_once(python, program, long_, way_lib, counter, workdir)
            if a is None or b is None:
                print(f"{program:<10} SKIP (package or GPU missing)")
                break
            per_step = {c: (b.columns[c] - a.columns[c]) / steps for c in columns}
            used[way] = b.device_mib
            print(f"{program:<10} {way:<6}" + "".join(f"{per_step[c]:>12.2f}" for c in columns) +
                  f"{b.device_mib if b.device_mib is not None else '-':>12}")
            grew = {size: (n - a.sizes.get(size, 0)) / steps for size, n in b.sizes.items()
                    if n > a.sizes.get(size, 0)}
            if grew:
                print(f"{'':<10} cuMemAlloc sizes per step: " + ", ".join(
                    f"{size} B x{n:.2f}" for size, n in sorted(grew.items())))
            if args.calls > 0:
                busiest = busiest_calls(a.counts, b.counts, steps, args.calls)
                print(f"{'':<10} driver calls per step: " + ", ".join(
                    f"{name} {n:.2f}" for name, n in busiest))
            changes = setter_changes_line(b.setters, long_ * WAYS_PER_ITERATION)
            if changes:
                print(f"{'':<10} {changes}")
            if way_lib:
                print(f"{'':<10} {kept_memory_line(b.log)}")
                totals = benchlib.end_totals(b.log)
                budget = int(totals.get("budget_bytes", 0)) >> 20
                peak = int(totals.get("kept_bytes_peak", 0)) >> 20
                if used.get("plain") is not None and used.get("recap") is not None:
                    more = used["recap"] - used["plain"]
                    print(f"{'':<10} recap - plain: {more} MiB at the end; recap's budget "
                          f"{budget} MiB, its cache's peak {peak} MiB: "
                          f"{'within' if more <= budget else 'OVER'} the budget")
        sys.stdout.flush()
    return 0
