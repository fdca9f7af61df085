"""bench shapes - a capture loop whose graph cycles through k shapes (a
dynamic batch) with mixed nodes: memset, fork/join over two streams through
events, N kernels, a device-to-device copy and a host callback.

Builds scripts/benchmarks/shapes.cu with nvcc and runs, in this one invocation,
for k = 1, 3, 8 shapes and N = 20, 200 kernels, five ways:
  plain   the loop as written: capture, instantiate, launch, wait, destroy
  recap   the same binary under LD_PRELOAD=librecap.so with
          RECAP_SELF_RECORD=off: executable reuse only
  self    under recap as it is by default (self-recording on): recap
          records the repeat captures itself (no driver capture)
  small   under recap with `cache_budget = 64KiB` (less than one executable
          graph): nothing can be kept, recap must cost no more than plain
  hand    the best hand-written program: a map from shape to executable
          graph, brought up to date with cudaGraphExecUpdate
Ways run --reps times in rotating order; each run reports the median
iteration; the table shows the median of those (wall: launch and wait
included; host: up to the wait), the ratios plain/recap (speed-up),
small/plain (must be <= 1.02), recap/hand (<= 1.05 is as good as the
hand-written map) and self/hand, recap's reuse rate from its log's end
totals, and how many captures recap recorded itself. All
ways of one (k, N) must compute the same buffers (checksums compared).

usage: scripts/bench shapes [--recap-lib PATH] [--shapes 1,3,8] [--kernels 20,200]
                            [--reps 3]
librecap.so: --recap-lib, else $RECAP_LIB, else build-gpu/shim/librecap.so.
About two minutes on an H200.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

WAYS = ("plain", "recap", "self", "small", "hand")


def plan_for(kernels):
    """(measured iterations, warm-up): about 0.2 s a run at plain's pace."""
    return (600, 48) if kernels <= 50 else (240, 48)


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench shapes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recap-lib", help="path of librecap.so")
    parser.add_argument("--shapes", default="1,3,8", help="cycle lengths (default 1,3,8)")
    parser.add_argument("--kernels", default="20,200", help="kernels per graph (default 20,200)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each way (default 3)")
    args = parser.parse_args(argv)
    shapes = [int(k) for k in args.shapes.split(",") if k]
    kernels = [int(n) for n in args.kernels.split(",") if n]
    lib = benchlib.recap_lib(args.recap_lib)
    workdir = benchlib.make_workdir("shapes")
    binary = benchlib.build("shapes.cu", workdir)
    small_conf = os.path.join(workdir, "small.conf")
    with open(small_conf, "w") as f:
        f.write("[defaults]\ncache_budget = 64KiB\n")
    benchlib.print_header("bench shapes: k-shape cycles with mixed nodes; plain, recap, recap "
                          "with a budget too small, hand-written map + update", binary)
    print(f"librecap: {lib}")
    sys.stdout.flush()

    cases = [(k, n) for n in kernels for k in shapes]
    wall = {(c, w): [] for c in cases for w in WAYS}
    host = {(c, w): [] for c in cases for w in WAYS}
    checksums = {c: set() for c in cases}
    reuse = {(c, w): [] for c in cases for w in ("recap", "self", "small")}
    for rep in range(args.reps):
        order = WAYS[rep % len(WAYS):] + WAYS[:rep % len(WAYS)]
        for case in cases:
            k, n = case
            iterations, warmup = plan_for(n)
            for way in order:
                command = [binary, "--kernels", str(n), "--shapes", str(k),
                           "--iterations", str(iterations), "--warmup", str(warmup),
                           "--handwritten", "1" if way == "hand" else "0"]
                env = None
                log = os.path.join(workdir, f"recap-{way}-{k}-{n}-{rep}.jsonl")
                if way == "recap":
                    env = {"LD_PRELOAD": lib, "RECAP_LOG": log, "RECAP_SELF_RECORD": "off"}
                elif way == "self":
                    env = {"LD_PRELOAD": lib, "RECAP_LOG": log, "RECAP_SELF_RECORD": "on"}
                elif way == "small":
                    env = {"LD_PRELOAD": lib, "RECAP_LOG": log, "RECAP_CONFIG": small_conf}
                result = benchlib.results(benchlib.run(command, env, env_remove=(
                    "LD_PRELOAD", "RECAP_LOG", "RECAP_VERBOSE", "RECAP_CONFIG", "RECAP_MODE",
                    "RECAP_SITES", "RECAP_SELF_RECORD")))[0]
                wall[(case, way)].append(result["median_ms"])
                host[(case, way)].append(result["median_host_ms"])
                checksums[case].add(result["checksum"])
                if way in ("recap", "self", "small"):
                    t = benchlib.end_totals(log)
                    if t.get("instantiations"):
                        reuse[(case, way)].append((t.get("reused", 0), t["instantiations"],
                                                   t.get("backoffs", 0), t.get("by_recap", 0),
                                                   t.get("captures", 0)))
        print(f"  rep {rep + 1}/{args.reps} done")
        sys.stdout.flush()

    for title, table in (("wall ms per iteration (launch and wait included)", wall),
                         ("host ms per iteration (up to the wait)", host)):
        print()
        print(title + "; median of the reps' medians")
        header = (f"{'k':>2} {'N':>4}  {'plain':>8} {'recap':>8} {'self':>8} {'small':>8} "
                  f"{'hand':>8}  {'plain/recap':>11} {'small/plain':>11} {'recap/hand':>10} "
                  f"{'self/hand':>9}")
        print(header)
        print("-" * len(header))
        for case in cases:
            m = {w: benchlib.median(table[(case, w)]) for w in WAYS}
            print(f"{case[0]:>2} {case[1]:>4}  {m['plain']:>8.4f} {m['recap']:>8.4f} "
                  f"{m['self']:>8.4f} {m['small']:>8.4f} {m['hand']:>8.4f}  "
                  f"{m['plain'] / m['recap']:>11.2f} {m['small'] / m['plain']:>11.3f} "
                  f"{m['recap'] / m['hand']:>10.3f} {m['self'] / m['hand']:>9.3f}")
    print()
    print("recap's reuse (end totals, summed over reps): reused/instantiations, back-offs")
    failed = False
    for case in cases:
        parts = []
        for way in ("recap", "self", "small"):
            got = reuse[(case, way)]
            used = sum(r[0] for r in got)
            total = sum(r[1] for r in got)
            rate = f"{100.0 * used / total:.1f}%" if total else "no log"
            text = f"{way} {used}/{total} = {rate}, {sum(r[2] for r in got)} back-offs"
            if way == "self":
                text += (f", {sum(r[3] for r in got)}/{sum(r[4] for r in got)} captures "
                         f"recorded by recap")
            parts.append(text)
        print(f"  k={case[0]} N={case[1]}: " + "; ".join(parts))
        if len(checksums[case]) != 1:
            failed = True
            print(f"ERROR k={case[0]} N={case[1]}: the ways computed different results: "
                  f"{sorted(checksums[case])}")
    return 1 if failed else 0

