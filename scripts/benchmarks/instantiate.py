"""bench instantiate - what recap saves on a loop that captures, instantiates,
launches and destroys a graph of N kernel nodes every iteration.

Builds scripts/benchmarks/instantiate.cu with nvcc into a temporary directory and,
for each N, runs three ways, all in this one invocation:
  plain        the loop as a program without graph-update code writes it
  recap        the same binary under LD_PRELOAD=librecap.so with
               RECAP_SELF_RECORD=off: executable reuse only
  self         the plain binary under recap as it is by default
               (self-recording on): recap records repeat captures itself
               (no driver capture), the driver's instantiation becomes an
               update
  handwritten  the CUDA programming guide's loop: cudaGraphExecUpdate into a
               kept exec, instantiate only the first time or on failure
Each run times every iteration after a warm-up and reports the median; the
ways are run --reps times in rotating order, and the table shows the median
of those medians (and their range), then the ratios plain/recap (recap's
speed-up) and recap/handwritten (how close recap gets to the hand-written
cure; 1.0 is as good). The recap column also says how many of recap's
instantiations were served from a released exec (from its log). All ways of
one N must compute the same final buffers: the checksums are compared.

With --overhead it also runs three more ways and prints paired ratios
(each rep's run of a way against the baseline run of the same rep, median
and interquartile range over reps, so machine drift between reps cancels):
  observe       the plain loop under recap with RECAP_MODE=observe
  hand_recap    the hand-written loop under recap (default mode, self-recording on)
  hand_observe  the hand-written loop under recap with RECAP_MODE=observe
answering: recap/handwritten (target <= 1.05 at N = 10), hand_observe/
handwritten and hand_recap/handwritten (recap's cost on a program that
needs nothing from it; target <= 1.02), and observe/plain (what observing
costs a plain loop's instantiation, the earlier "55 % at 100 nodes").

usage: scripts/bench instantiate [--recap-lib PATH] [--nodes 10,100,1000,5000]
                                 [--reps 5] [--overhead]
A run for the targets: scripts/bench instantiate --nodes 10,100 --reps 15 --overhead
librecap.so: --recap-lib, else $RECAP_LIB, else build-gpu/shim/librecap.so.
Runs in well under a minute on an H200.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

# nodes -> (measured iterations, warm-up iterations); fewer for big graphs.
PLAN = {10: (2000, 100), 100: (1000, 50), 1000: (200, 20), 5000: (40, 5)}
WAYS = ("plain", "recap", "self", "handwritten")
PHASES = ("capture", "instantiate", "launch")   # of the host time; the destroys are the rest
OVERHEAD_WAYS = ("observe", "hand_recap", "hand_observe")
# (way, baseline) pairs whose per-rep ratios --overhead prints
PAIRS = (("recap", "handwritten"), ("self", "handwritten"), ("hand_recap", "handwritten"),
         ("hand_observe", "handwritten"), ("observe", "plain"))


def plan_for(nodes):
    if nodes in PLAN:
        return PLAN[nodes]
    iterations = max(20, min(2000, 200000 // max(nodes, 1)))
    return iterations, max(3, iterations // 10)


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench instantiate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recap-lib", help="path of librecap.so")
    parser.add_argument("--nodes", default="10,100,1000,5000",
                        help="comma-separated graph sizes (default 10,100,1000,5000)")
    parser.add_argument("--reps", type=int, default=5, help="runs of each way (default 5)")
    parser.add_argument("--overhead", action="store_true",
                        help="also observe, hand_recap, hand_observe and paired ratios")
    args = parser.parse_args(argv)
    ways = WAYS + (OVERHEAD_WAYS if args.overhead else ())
    node_counts = [int(n) for n in args.nodes.split(",") if n]
    lib = benchlib.recap_lib(args.recap_lib)
    workdir = benchlib.make_workdir("instantiate")
    binary = benchlib.build("instantiate.cu", workdir)
    benchlib.print_header("bench instantiate: capture + instantiate + launch + destroy per "
                          "iteration, plain vs recap vs hand-written update", binary)
    print(f"librecap: {lib}")
    print(f"binary:   {binary}")
    print(f"reps {args.reps}; per nodes: " +
          ", ".join(f"{n}: {plan_for(n)[0]} iterations after {plan_for(n)[1]} warm-up"
                    for n in node_counts))
    sys.stdout.flush()

    medians = {(n, way): [] for n in node_counts for way in ways}
    host = {(n, way): [] for n in node_counts for way in ways}
    phases = {(n, way, p): [] for n in node_counts for way in ways for p in PHASES}
    checksums = {n: set() for n in node_counts}
    hows = {n: collections.Counter() for n in node_counts}
    self_paths = {n: collections.Counter() for n in node_counts}
    for rep in range(args.reps):
        order = ways[rep % len(ways):] + ways[:rep % len(ways)]
        for n in node_counts:
            iterations, warmup = plan_for(n)
            for way in order:
                command = [binary, "--nodes", str(n), "--iterations", str(iterations),
                           "--warmup", str(warmup),
                           "--handwritten", "1" if way.startswith("hand") else "0"]
                env = None
                if way in ("recap", "self"):
                    log = os.path.join(workdir, f"{way}-{n}-{rep}.jsonl")
                    env = {"LD_PRELOAD": lib, "RECAP_LOG": log,
                           "RECAP_SELF_RECORD": "on" if way == "self" else "off"}
                elif way in OVERHEAD_WAYS:
                    env = {"LD_PRELOAD": lib,
                           "RECAP_LOG": os.path.join(workdir, f"{way}-{n}-{rep}.jsonl")}
                    if way.endswith("observe"):
                        env["RECAP_MODE"] = "observe"
                result = benchlib.results(benchlib.run(command, env))[0]
                medians[(n, way)].append(result["median_ms"])
                host[(n, way)].append(result["median_host_ms"])
                for phase in PHASES:
                    phases[(n, way, phase)].append(result[f"median_{phase}_ms"])
                checksums[n].add(result["checksum"])
                if way == "recap":
                    hows[n].update(benchlib.instantiate_hows(log))
                if way == "self":
                    self_paths[n].update(benchlib.capture_paths(log))
            print(f"  rep {rep + 1}/{args.reps} nodes {n}: " +
                  ", ".join(f"{way} {medians[(n, way)][-1]:.4f} ms" for way in order))
            sys.stdout.flush()

    for title, table in (
            ("wall ms per iteration, the GPU's execution included (the loop waits for "
             "each launch)", medians),
            ("host ms per iteration, up to the wait: the CPU time in the CUDA API, "
             "what recap reduces", host)):
        print()
        print(title + "; median of the reps' medians, range in brackets")
        header = (f"{'nodes':>6}  {'plain':>27}  {'recap':>27}  {'self':>27}  "
                  f"{'handwritten':>27}  {'plain/recap':>11}  {'recap/hand':>10}  "
                  f"{'self/hand':>9}")
        print(header)
        print("-" * len(header))
        for n in node_counts:
            cell = {way: benchlib.median(table[(n, way)]) for way in WAYS}
            row = f"{n:>6}"
            for way in WAYS:
                values = table[(n, way)]
                text = f"{cell[way]:.4f} [{min(values):.4f}-{max(values):.4f}]"
                row += f"  {text:>27}"
            row += (f"  {cell['plain'] / cell['recap']:>11.2f}"
                    f"  {cell['recap'] / cell['handwritten']:>10.2f}"
                    f"  {cell['self'] / cell['handwritten']:>9.2f}")
            print(row)
    print()
    print("host ms per iteration by phase, median of the reps' medians: capture (begin to "
          "end capture) + instantiate or update + launch + the rest (destroys)")
    header = f"{'nodes':>6}" + "".join(f"  {way:>33}" for way in WAYS)
    print(header)
    print("-" * len(header))
    for n in node_counts:
        row = f"{n:>6}"
        for way in WAYS:
            took = [benchlib.median(phases[(n, way, p)]) for p in PHASES]
            rest = benchlib.median(host[(n, way)]) - sum(took)
            row += f"  {' + '.join(f'{t:.4f}' for t in took + [rest]):>33}"
        print(row)
    if args.overhead:
        for title, table in (("wall", medians), ("host", host)):
            print()
            print(f"paired {title} ratios: per rep, way / baseline of the same rep; median "
                  f"[25th-75th percentile] over {args.reps} reps")
            header = f"{'nodes':>6}" + "".join(f"  {w + '/' + b:>28}" for w, b in PAIRS)
            print(header)
            print("-" * len(header))
            for n in node_counts:
                row = f"{n:>6}"
                for way, base in PAIRS:
                    ratios = [a / b for a, b in zip(table[(n, way)], table[(n, base)]) if b > 0]
                    text = (f"{benchlib.median(ratios):.3f} [{benchlib.quantile(ratios, 0.25):.3f}-"
                            f"{benchlib.quantile(ratios, 0.75):.3f}]") if ratios else "-"
                    row += f"  {text:>28}"
                print(row)
    print()
    failed = False
    for n in node_counts:
        print(f"recap instantiations, nodes {n}: {benchlib.format_hows(hows[n])}")
        print(f"self-recording captures, nodes {n}: "
              + ", ".join(f"{k} {v}" for k, v in sorted(self_paths[n].items())))
        if len(checksums[n]) != 1:
            failed = True
            print(f"ERROR nodes {n}: the ways computed different results: checksums "
                  f"{sorted(checksums[n])}")
        if not hows[n] or sum(v for k, v in hows[n].items() if k != "new") == 0:
            print(f"WARNING nodes {n}: recap reused no executable graph; the recap column "
                  f"measures interposition only")
    return 1 if failed else 0

