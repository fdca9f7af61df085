"""bench delta - where applying only the changed kernel nodes of an executable
graph (per-node exec setters) stops being cheaper than one whole
cuGraphExecUpdate: the crossover fraction k/n that recap's delta path uses.

Builds scripts/benchmarks/delta.cu with nvcc (linked with -lcuda) into a temporary
directory and runs it: for graphs of n = 100 and 1000 kernel nodes and
k = 1, 2, 5, 10, 20, 50, 100% of them changed, the median time of
  per-node  cuGraphKernelNodeGetParams_v2 + cuGraphExecKernelNodeSetParams_v2
            for each changed node (exec node = node of the graph the exec was
            instantiated from), and
  whole     one cuGraphExecUpdate_v2 with the changed graph,
each update checked once for correctness. Prints both tables, the crossover
per n and the smallest crossover. This measures the driver, not recap: no
librecap.so is needed and none is preloaded.

usage: scripts/bench delta [--nodes N] [--reps 51]
Runs in about 10-30 s on an H200.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench delta", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=0,
                        help="one graph size instead of 100 and 1000")
    parser.add_argument("--reps", type=int, default=51, help="timed updates per cell")
    args = parser.parse_args(argv)
    workdir = benchlib.make_workdir("delta")
    binary = benchlib.build("delta.cu", workdir, extra_flags=["-lcuda"])
    benchlib.print_header("bench delta: per-node exec setters vs one whole cuGraphExecUpdate",
                          binary)
    command = [binary, "--nodes", str(args.nodes), "--reps", str(args.reps)]
    print("run: " + " ".join(command))
    sys.stdout.flush()
    output = benchlib.run(command)
    print(output, end="")
    for result in benchlib.results(output):
        if not 0 <= result["crossover_percent"] <= 100:
            print(f"note: n={int(result['nodes'])}: no crossover inside the measured range")
    return 0

