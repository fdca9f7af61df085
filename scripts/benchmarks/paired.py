"""bench paired - recap's own cost on a capture loop, measured inside one
process so that the spread is smaller than the margins it is held to.

Builds scripts/benchmarks/paired.cu with nvcc. Each run is one process under one
configuration of recap; in it every iteration of a loop over N kernel
launches runs twice, alternating: through the driver functions the program
links (recap's wrappers) and through the real driver's own (looked up in
libcuda's symbol table, bypassing recap). The ratio recap/direct is taken
per block of pairs; the table gives, per configuration and N, the median of
the block ratios of each rep and, over the reps, the median and the range of
those medians. A second table splits the difference by phase (begin,
launches into the capture, end, instantiation or update, graph launch,
destroys): where recap's own time goes, in nanoseconds per iteration; a
third gives each phase's own median on both ways, in microseconds.

Configurations (recap way / direct way, loops as in paired.cu):
  control        no recap loaded: hand / hand. Both ways call the driver
                 directly; shows the measurement's own bias and spread.
  off            RECAP_MODE=off: hand / hand (recap loaded, doing nothing)
  observe_hand   RECAP_MODE=observe: hand / hand - issue 9: at most 1.02
  observe_plain  RECAP_MODE=observe: plain / plain - issue 9: at most 1.02
  default_hand   recap's default: hand / hand - issue 9: at most 1.02
  default_plain  recap's default: plain / hand - issue 9: at most 1.05 at
                 N = 10; issue 13: at most 0.9 / 0.7 / 0.5 at N = 10 / 100 / 1000
  reuse_plain    RECAP_SELF_RECORD=off: plain / hand (executable reuse alone)

Each recap run is checked: the two ways' buffers end equal (the binary
exits 1 otherwise), the linked functions are recap's (interposed=1), and
recap's log counts exactly the linked way's captures - none of the direct
way's reached it.

usage: scripts/bench paired [--recap-lib PATH] [--nodes 10,100,1000] [--reps 3]
                            [--configs control,off,...]
librecap.so: --recap-lib, else $RECAP_LIB, else build-gpu/shim/librecap.so.
A librecap built with `meson setup -Dphase_clock=true` also prints, per
row, the time of each of recap's own steps (shim/base/phase_clock.h); each
step then costs a counter read more, so read its ratios apart.
Runs in about two minutes on an H200 with the defaults.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

PLAIN, HAND = 0, 1
# name -> (recap environment or None for no recap, recap way, direct way, target text)
CONFIGS = {
    "control": (None, HAND, HAND, "no recap: the measurement's own bias"),
    "off": ({"RECAP_MODE": "off"}, HAND, HAND, "recap loaded, mode off"),
    "observe_hand": ({"RECAP_MODE": "observe"}, HAND, HAND, "<= 1.02 (issue 9)"),
    "observe_plain": ({"RECAP_MODE": "observe"}, PLAIN, PLAIN, "<= 1.02 (issue 9)"),
    "default_hand": ({}, HAND, HAND, "<= 1.02 (issue 9)"),
    "default_plain": ({}, PLAIN, HAND, "<= 1.05 at N=10 (9); 0.9/0.7/0.5 (13)"),
    "reuse_plain": ({"RECAP_SELF_RECORD": "off"}, PLAIN, HAND, "executable reuse alone"),
}
# nodes -> (pairs, warm-up pairs); the block is pairs // 40
PLAN = {10: (12000, 200), 100: (4000, 100), 1000: (800, 40)}


def plan_for(nodes):
    if nodes in PLAN:
        return PLAN[nodes]
    pairs = max(400, min(12000, 120000 // nodes))
    return pairs, max(20, pairs // 20)


def phases_of(stdout):
    """The binary's 'phases name_us=recap/direct ...' line as
    {name: (recap_us, direct_us)}."""
    for line in stdout.splitlines():
        if line.startswith("phases "):
            phases = {}
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                recap, _, direct = value.partition("/")
                phases[key.removesuffix("_us")] = (float(recap), float(direct))
            return phases
    raise benchlib.BenchError("no 'phases' line in the benchmark's output:\n" + stdout[-2000:])


def run_once(binary, lib, workdir, name, nodes, rep):
    env_extra, recap_way, direct_way, _ = CONFIGS[name]
    pairs, warmup = plan_for(nodes)
    command = [binary, "--nodes", str(nodes), "--pairs", str(pairs), "--warmup", str(warmup),
               "--block", str(max(10, pairs // 40)), "--recap-way", str(recap_way),
               "--direct-way", str(direct_way)]
    env = None
    log = os.path.join(workdir, f"recap-{name}-{nodes}-{rep}.jsonl")
    if env_extra is not None:
        env = dict(env_extra, LD_PRELOAD=lib, RECAP_LOG=log)
    stdout, stderr = benchlib.run_both(command, env)
    result = benchlib.results(stdout)[0]
    result["phase_lines"] = benchlib.phase_lines(stderr)
    result["phases"] = phases_of(stdout)
    result["units"] = next((line for line in stdout.splitlines() if line.startswith("units ")), "")
    if env_extra is not None:
        if result["interposed"] != 1:
            raise benchlib.BenchError(f"{name}: the linked driver functions are the driver's "
                                      f"own, not recap's: LD_PRELOAD={lib} did not take")
        if env_extra.get("RECAP_MODE") != "off":
            ends = list(benchlib.log_events(log, "end"))
            captures = ends[-1]["totals"]["captures"] if ends else None
            if captures != pairs + warmup:
                raise benchlib.BenchError(f"{name}: recap's log counts {captures} captures, "
                                          f"expected {pairs + warmup} (the linked way's only); "
                                          f"log {log}")
    elif result["interposed"] != 0:
        raise benchlib.BenchError("control: without recap the linked functions should be the "
                                  "driver's own; another interposer is loaded")
    return result


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench paired", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recap-lib", help="path of librecap.so")
    parser.add_argument("--nodes", default="10,100,1000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args(argv)
    try:
        nodes_list = [int(n) for n in args.nodes.split(",")]
        configs = args.configs.split(",")
        unknown = [c for c in configs if c not in CONFIGS]
        if unknown or any(n < 1 for n in nodes_list) or args.reps < 1:
            raise ValueError(f"unknown configuration(s) {unknown}" if unknown else
                             "nodes and reps must be positive")
    except ValueError as e:
        print(f"bench paired: bad arguments: {e}; expected --nodes 10,100 --reps 3 "
              f"--configs from {','.join(CONFIGS)}", file=sys.stderr)
        return 2
    try:
        lib = benchlib.recap_lib(args.recap_lib)
        workdir = benchlib.make_workdir("paired")
        binary = benchlib.build("paired.cu", workdir, ["-lcuda"])
        benchlib.print_header("bench paired: recap's cost in one process, linked (recap) vs "
                              "direct (real driver) iterations alternating", binary)
        print(f"librecap: {lib}")
        rows = []
        for nodes in nodes_list:
            for name in configs:
                reps = []
                for rep in range(args.reps):
                    r = run_once(binary, lib, workdir, name, nodes, rep)
                    reps.append(r)
                    print(f"  N={nodes} {name} rep {rep + 1}: host {r['host_ratio']:.4f} "
                          f"[{r['host_q25']:.4f}-{r['host_q75']:.4f}] wall {r['wall_ratio']:.4f} "
                          f"[{r['wall_q25']:.4f}-{r['wall_q75']:.4f}]  recap way "
                          f"{r['recap_host_us']:.2f}/{r['recap_wall_us']:.2f} us, direct "
                          f"{r['direct_host_us']:.2f}/{r['direct_wall_us']:.2f} us (host/wall)")
                    sys.stdout.flush()
                rows.append((nodes, name, reps))
    except benchlib.BenchError as e:
        print(f"bench paired: {e}", file=sys.stderr)
        return 1

    print()
    print("recap way / direct way, per rep the median of its block ratios; the median over "
          "reps [lowest-highest rep]")
    print(f"| N | configuration | host | wall | quartiles of blocks, widest rep (host) | target |")
    print("|---|---|---|---|---|---|")
    for nodes, name, reps in rows:
        def summary(key):
            values = [r[key + "_ratio"] for r in reps]
            return f"{benchlib.quantile(values, 0.5):.3f} [{min(values):.3f}-{max(values):.3f}]"
        widest = max(reps, key=lambda r: r["host_q75"] - r["host_q25"])
        print(f"| {nodes} | {name} | {summary('host')} | {summary('wall')} | "
              f"{widest['host_q25']:.3f}-{widest['host_q75']:.3f} | {CONFIGS[name][3]} |")

    print()
    print("where the host time goes: recap way minus direct way, ns per iteration, by phase "
          "(medians of each phase; the median over reps)")
    names = list(rows[0][2][0]["phases"]) if rows else []
    print("| N | configuration | " + " | ".join(names) + " | sum |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for nodes, name, reps in rows:
        diffs = [benchlib.quantile([(r["phases"][p][0] - r["phases"][p][1]) * 1000 for r in reps], 0.5)
                 for p in names]
        print(f"| {nodes} | {name} | " + " | ".join(f"{d:+.0f}" for d in diffs) +
              f" | {sum(diffs):+.0f} |")
    print()
    print("the phases themselves: recap way / direct way, us per iteration (medians; the "
          "median over reps)")
    print("| N | configuration | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for nodes, name, reps in rows:
        cells = [f"{benchlib.quantile([r['phases'][p][0] for r in reps], 0.5):.2f} / "
                 f"{benchlib.quantile([r['phases'][p][1] for r in reps], 0.5):.2f}" for p in names]
        print(f"| {nodes} | {name} | " + " | ".join(cells) + " |")
    for nodes in nodes_list:
        units = next((r[2][0]["units"] for r in rows if r[0] == nodes), "")
        print(f"native prices at N={nodes}: {units.removeprefix('units ')}")
    for nodes, name, reps in rows:
        if reps[-1]["phase_lines"]:
            print(f"\nrecap's own steps, N={nodes} {name}, last rep (a measuring librecap):")
            print("\n".join(reps[-1]["phase_lines"]))
    return 0

