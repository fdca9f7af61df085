"""bench python - the GPU suite's Python loops (PyTorch, CuPy, cuda.core),
each capturing a new graph every iteration, three ways in one invocation:
  plain   the program as it is
  recap   under LD_PRELOAD=librecap.so with RECAP_SELF_RECORD=off (executable
          reuse only)
  self    the same as recap is by default, self-recording on (recap
          records the repeat captures itself)
Each run times the loop's capture-to-release section per iteration
(tests/gpu/*.py with GPU_TEST_TIMING=1) and reports the median after 10
warm-up iterations; ways run --reps times in rotating order; the table shows
the median of the reps' medians and the ratios recap/plain, self/plain and
self/recap (issue 13: self-recording must be no slower than executable
reuse alone, self/recap <= 1). A program that cannot run here (package
missing) is reported and skipped.

--paired measures inside one process instead (scripts/benchmarks/python_paired.py):
the same loop's section runs through three functions every iteration, in
rotating order, each a capture site of its own, configured (found by a
3-iteration run first) as recap's default, self_record = off and mode = off.
The per-block ratios self/reuse, self/off and reuse/off are printed (median
over the reps of each rep's median, and the widest quartiles); each run is
checked: the three ways' results equal and right, the self site recorded by
recap, the reuse site never.

With --paired, the programs also include two real models captured anew
every iteration (scripts/benchmarks/bench_models.py: resnet18, decoder), and each
rep's line and the table give the share of the self site's captures that
fell back (the log's end totals).

usage: scripts/bench python [--recap-lib PATH] [--reps 5] [--iterations 200]
                            [--programs torch_loop.py,cupy_capture.py,cuda_core_graph.py]
                            [--paired]   (--paired: programs also resnet18, decoder)
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import bench_models  # noqa: E402

PROGRAMS = ("torch_loop.py", "cupy_capture.py", "cuda_core_graph.py")
PAIRED_NAMES = {"torch_loop.py": "torch", "cupy_capture.py": "cupy",
                "cuda_core_graph.py": "cuda_core", **{m: m for m in bench_models.MODELS}}
PAIRED_WAYS = ("self", "reuse", "off")
PAIRED_RATIOS = ("self_reuse", "self_off", "reuse_off")
# What each way sets itself, never inherited from the caller's environment.
RECAP_VARS = ("LD_PRELOAD", "RECAP_LOG", "RECAP_VERBOSE", "RECAP_SELF_RECORD", "RECAP_MODE")
WAYS = ("plain", "recap", "self")
SKIP = 77


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench python", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recap-lib", help="path of librecap.so")
    parser.add_argument("--reps", type=int, default=5, help="runs of each way (default 5)")
    parser.add_argument("--iterations", type=int, default=200,
                        help="loop iterations per run (default 200)")
    parser.add_argument("--programs", help="comma-separated subset of " + ", ".join(PROGRAMS) +
                        " (with --paired also " + ", ".join(bench_models.MODELS) + ")")
    parser.add_argument("--paired", action="store_true",
                        help="compare the ways inside one process (see above)")
    args = parser.parse_args(argv)
    known = PROGRAMS + (tuple(bench_models.MODELS) if args.paired else ())
    programs = [p for p in (args.programs or ",".join(known)).split(",") if p]
    unknown = set(programs) - set(known)
    if unknown:
        parser.error(f"unknown program(s) {sorted(unknown)}, expected some of {known}")
    lib = benchlib.recap_lib(args.recap_lib)
    here = os.path.join(benchlib.REPO, "tests", "gpu")
    python = os.environ.get("PYTHON", sys.executable)
    workdir = benchlib.make_workdir("python")
    if args.paired:
        return paired(args, programs, lib, python, workdir)
    print("bench python: Python capture loops, plain vs recap vs recap recording itself")
    print(f"librecap: {lib}; python: {python}; iterations {args.iterations}; reps {args.reps}")
    sys.stdout.flush()

    medians = {(p, w): [] for p in programs for w in WAYS}
    by_recap = {p: [] for p in programs}
    skipped = {}
    for rep in range(args.reps):
        order = WAYS[rep % len(WAYS):] + WAYS[:rep % len(WAYS)]
        for program in programs:
            if program in skipped:
                continue
            for way in order:
                env = {"GPU_TEST_TIMING": "1", "GPU_TEST_ITERATIONS": str(args.iterations)}
                log = os.path.join(workdir, f"{way}-{program}-{rep}.jsonl")
                if way != "plain":
                    env.update({"LD_PRELOAD": benchlib.preloadable(lib), "RECAP_LOG": log})
                if way != "plain":
                    env["RECAP_SELF_RECORD"] = "on" if way == "self" else "off"
                command = [python, os.path.join(here, program)]
                full = benchlib.environment_without(RECAP_VARS)
                full.update(env)
                done = subprocess.run(command, capture_output=True, text=True, env=full)
                if done.returncode == SKIP:
                    skipped[program] = done.stdout.strip()[:200]
                    break
                if done.returncode != 0:
                    raise benchlib.BenchError(f"{way} {program} exited {done.returncode}\n"
                                              f"{done.stdout[-1500:]}{done.stderr[-1500:]}")
                medians[(program, way)].append(benchlib.results(done.stdout)[0]["median_ms"])
                if way == "self":
                    t = benchlib.end_totals(log)
                    by_recap[program].append((int(t.get("by_recap", 0)), int(t.get("captures", 0))))
        print(f"  rep {rep + 1}/{args.reps} done")
        sys.stdout.flush()

    print()
    print("ms per iteration, capture to release; median of the reps' medians [range]")
    header = (f"{'program':<20} {'plain':>22} {'recap':>22} {'self':>22}  "
              f"{'recap/plain':>11} {'self/plain':>10} {'self/recap':>10}")
    print(header)
    print("-" * len(header))
    for program in programs:
        if program in skipped:
            print(f"{program:<20} SKIP: {skipped[program]}")
            continue
        m = {w: benchlib.median(medians[(program, w)]) for w in WAYS}
        cells = "".join(f" {m[w]:.4f} [{min(medians[(program, w)]):.4f}-"
                        f"{max(medians[(program, w)]):.4f}]".rjust(23) for w in WAYS)
        print(f"{program:<20}{cells}  {m['recap'] / m['plain']:>11.3f} "
              f"{m['self'] / m['plain']:>10.3f} {m['self'] / m['recap']:>10.3f}")
    print()
    for program in programs:
        got = by_recap[program]
        if got:
            print(f"self-recording, {program}: {sum(g[0] for g in got)} of "
                  f"{sum(g[1] for g in got)} captures recorded by recap")
    return 0


def run_paired_program(python, name, iterations, lib, log, conf=None):
    env = benchlib.environment_without(RECAP_VARS + ("RECAP_CONFIG", "RECAP_SITES"))
    env.update({"LD_PRELOAD": benchlib.preloadable(lib), "RECAP_LOG": log})
    if conf:
        env["RECAP_CONFIG"] = conf
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_paired.py")
    return subprocess.run([python, script, name, str(iterations)], capture_output=True,
                          text=True, env=env)


def way_sites(log):
    """The site ids of each way, from the site events' Python frames."""
    ids = {w: [] for w in PAIRED_WAYS}
    for event in benchlib.log_events(log, "site"):
        frames = (event.get("python") or {}).get("frames") or []
        for way in PAIRED_WAYS:
            if any(f"(way_{way})" in f for f in frames):
                ids[way].append(event["site"])
    return ids


def site_totals(log):
    """Per site, the counters of the last end event."""
    sites = {}
    for event in benchlib.log_events(log, "end"):
        sites = {s["site"]: s for s in event.get("sites") or []}
    return sites


def paired(args, programs, lib, python, workdir):
    print("bench python --paired: one process, three sites: recap's default (self), "
          "self_record = off (reuse), mode = off (off)")
    print(f"librecap: {lib}; python: {python}; iterations {args.iterations}; reps {args.reps}")
    rows = {}
    for program in programs:
        name = PAIRED_NAMES[program]
        log = os.path.join(workdir, f"find-{name}.jsonl")
        done = run_paired_program(python, name, 3, lib, log)
        if done.returncode == SKIP:
            rows[program] = f"SKIP: {done.stdout.strip()[:200]}"
            continue
        if done.returncode != 0:
            raise benchlib.BenchError(f"{name}: the run that finds the sites exited "
                                      f"{done.returncode}\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
        ids = way_sites(log)
        missing = [w for w in PAIRED_WAYS if not ids[w]]
        if missing:
            raise benchlib.BenchError(f"{name}: no site found for way(s) {missing} in {log}")
        conf = os.path.join(workdir, f"{name}.conf")
        with open(conf, "w", encoding="utf-8") as f:
            for site in ids["reuse"]:
                f.write(f"[site {site}]\nself_record = off\n")
            for site in ids["off"]:
                f.write(f"[site {site}]\nmode = off\n")
        got = []
        for rep in range(args.reps):
            log = os.path.join(workdir, f"{name}-{rep}.jsonl")
            done = run_paired_program(python, name, args.iterations, lib, log, conf)
            if done.returncode != 0:
                raise benchlib.BenchError(f"{name} exited {done.returncode}\n"
                                          f"{done.stdout[-1500:]}{done.stderr[-1500:]}")
            result = benchlib.results(done.stdout)[0]
            totals = site_totals(log)
            count = {w: (sum(int(totals.get(s, {}).get("by_recap", 0)) for s in ids[w]),
                         sum(int(totals.get(s, {}).get("captures", 0)) for s in ids[w]),
                         sum(int(totals.get(s, {}).get("reused", 0)) for s in ids[w]),
                         sum(int(totals.get(s, {}).get("fallbacks", 0)) for s in ids[w]))
                     for w in PAIRED_WAYS}
            if count["self"][0] == 0 or count["reuse"][0] != 0 or count["reuse"][2] == 0:
                raise benchlib.BenchError(f"{name}: the sites did not do what the configuration "
                                          f"asks (by recap, captures, reused: {count}); {log}")
            got.append((result, count))
            print(f"  {name} rep {rep + 1}: " + " ".join(
                f"{r}={result[r]:.3f} [{result[r + '_q1']:.3f}-{result[r + '_q3']:.3f}]"
                for r in PAIRED_RATIOS) + " ms " + "/".join(
                f"{result[w + '_ms']:.4f}" for w in PAIRED_WAYS) +
                f"; self recorded by recap {count['self'][0]} of {count['self'][1]}, "
                f"fell back {count['self'][3]}")
            if "self_steps_us" in result:
                print("    steps us (self | reuse | off): " + " | ".join(
                    str(result[w + "_steps_us"]) for w in PAIRED_WAYS))
            sys.stdout.flush()
        rows[program] = got
    print()
    print("per-block ratios inside one process: the median over reps of each rep's median "
          "[widest quartiles]")
    header = f"{'program':<20}" + "".join(f"{r.replace('_', '/'):>24}" for r in PAIRED_RATIOS)
    print(header + "   recorded by recap, fallbacks (self site)")
    print("-" * (len(header) + 44))
    for program in programs:
        got = rows[program]
        if isinstance(got, str):
            print(f"{program:<20} {got}")
            continue
        cells = ""
        for r in PAIRED_RATIOS:
            mid = benchlib.median([g[0][r] for g in got])
            lo = min(g[0][r + "_q1"] for g in got)
            hi = max(g[0][r + "_q3"] for g in got)
            cells += f"{mid:.3f} [{lo:.3f}-{hi:.3f}]".rjust(24)
        rec = sum(g[1]["self"][0] for g in got)
        cap = sum(g[1]["self"][1] for g in got)
        fell = sum(g[1]["self"][3] for g in got)
        print(f"{program:<20}{cells}   {rec} of {cap}, {fell} ({100.0 * fell / max(cap, 1):.1f} %)")
    return 0

