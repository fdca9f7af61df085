"""bench node-setters - what new kernel arguments for every node of a graph
cost on this driver, by each way recap or a program can bring an executable
graph up to date (node_setters.cu says which ways and why; it decides
exec_reuse.c's per-node/whole choice).

Builds scripts/benchmarks/node_setters.cu with nvcc (linked with -lcuda),
runs it once (chains of 100 and 1000 kernels, 21 rounds each) and prints
its medians, then each way's cost of one whole round against the
programming guide's loop from the same run (hand: capture the new values,
cuGraphExecUpdate, destroy), and the launch after each way against the
launch after hand.

usage: scripts/bench node-setters
Runs in a few seconds on an H200.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

# A round's cost per way: (per-node keys times N) + whole-graph keys.
ROUND = {
    "exec_set": (["exec_set us/node"], []),
    "exec_generic": (["exec_generic us/node"], []),
    "exec_extra": (["exec_extra us/node"], []),
    "graph_set + whole_update": (["graph_set us/node"], ["whole_update us"]),
    "hand": (["hand_capture us/node"], ["hand_update us", "hand_destroy us"]),
}
LAUNCH = {"exec_set": "exec_set", "exec_extra": "exec_extra",
          "graph_set + whole_update": "graph_set+update", "hand": "hand"}


def parse(line):
    """'N=100  name=value  ...' (names hold spaces) -> (N, {name: value})."""
    head, *fields = line.split("  ")
    values = {}
    for field in fields:
        name, _, value = field.rpartition("=")
        values[name.strip()] = float(value)
    return int(head.split("=")[1]), values


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench node-setters", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    workdir = benchlib.make_workdir("node-setters")
    binary = benchlib.build("node_setters.cu", workdir, extra_flags=["-lcuda"])
    print("bench node-setters: new arguments for every kernel node, each way of updating")
    print("command: scripts/bench node-setters")
    output = benchlib.run([binary])
    print(output, end="")
    rows = [parse(line) for line in output.splitlines() if line.startswith("N=")]
    if not rows:
        raise benchlib.BenchError("no 'N=' line in the output of " + binary)
    for n, v in rows:
        cost = {way: sum(v[k] for k in per) * n + sum(v[k] for k in whole)
                for way, (per, whole) in ROUND.items()}
        print(f"\nN={n}: one round, us, and its ratio to hand (the programming guide's loop)")
        for way, us in cost.items():
            print(f"  {way:<26} {us:>10.1f}   {us / cost['hand']:6.3f}x")
        print(f"N={n}: the launch after each way, host us (call / until idle), ratio to hand's")
        hand_call, hand_wall = v["launch after hand us"], v["launch_wall after hand us"]
        for way, name in LAUNCH.items():
            call, wall = v[f"launch after {name} us"], v[f"launch_wall after {name} us"]
            print(f"  {way:<26} {call:>8.1f} / {wall:>8.1f}   {call / hand_call:6.3f}x / "
                  f"{wall / hand_wall:6.3f}x")
    return 0
