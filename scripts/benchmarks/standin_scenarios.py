"""bench standin-scenarios - instructions per iteration of stand-in scenarios
under recap's defaults, counted by callgrind (no GPU, no noise), for one
librecap or two side by side (a before and after of a change).

Each scenario runs at two iteration counts; the difference divided by the
difference in iterations is one iteration, start-up excluded. The program
alone (without recap) is counted too, so recap's share can be read off.
Figures include the program and the stand-in driver.

  mixed3, mixed8  mixed nodes (memset, fork/join, kernels, host callback,
                  copy) cycling through 3 or 8 shapes
  cycle3          a kernel position cycling through 3 functions
  shuffled8       8 shapes in an order no predictor follows

usage: scripts/bench standin-scenarios [--scenarios A,B] [--counts N0,N1]
                                       BUILD_DIR [LIBRECAP [LIBRECAP_AFTER]]
BUILD_DIR: a meson build with tests (its stand-in and scenario programs);
LIBRECAP: the library to count, else BUILD_DIR/shim/librecap.so; with a
second, both are counted and the table gets a column after/before.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402  (its preloadable(): LD_PRELOAD splits at spaces)

SCENARIOS = ("mixed3", "mixed8", "cycle3", "shuffled8")
COUNTS = (200, 400)


def instructions(build, lib, name, iters, workdir):
    """Instructions of one whole run of `scenario NAME ITERS` (13.0 stand-in)."""
    out = os.path.join(workdir, f"cg-{name}-{iters}-{abs(hash(lib))}")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "tests", "standin"),
               STANDIN_DRIVER_VERSION="13000")
    for k in list(env):
        if k.startswith(("RECAP_", "STANDIN_REPORT", "SCENARIO_")) or k == "LD_PRELOAD":
            env.pop(k)
    if lib:
        env["LD_PRELOAD"] = lib
        env["RECAP_LOG"] = os.path.join(workdir, "recap.jsonl")
    return benchlib.callgrind_instructions(
        [os.path.join(build, "tests", "scenario", "scenario"), name, str(iters)], env, out)


def per_iteration(build, lib, name, counts, workdir):
    n0, n1 = counts
    return (instructions(build, lib, name, n1, workdir)
            - instructions(build, lib, name, n0, workdir)) / (n1 - n0)


def main(argv):
    args = list(argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    scenarios, counts = SCENARIOS, COUNTS
    while args and args[0].startswith("--"):
        if len(args) < 2:
            print(__doc__, file=sys.stderr)
            return 2
        if args[0] == "--scenarios":
            scenarios = tuple(s for s in args[1].split(",") if s)
        elif args[0] == "--counts":
            try:
                counts = tuple(int(c) for c in args[1].split(","))
            except ValueError:
                counts = ()
            if len(counts) != 2 or not 0 < counts[0] < counts[1]:
                print(f"standin-scenarios: --counts {args[1]}: expected two iteration "
                      "counts N0,N1 with 0 < N0 < N1", file=sys.stderr)
                return 2
        else:
            print(f"standin-scenarios: unknown option {args[0]}", file=sys.stderr)
            return 2
        args = args[2:]
    if len(args) not in (1, 2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(args[0])
    program = os.path.join(build, "tests", "scenario", "scenario")
    if not os.access(program, os.X_OK):
        print(f"standin-scenarios: {program} not found: expected a meson build with tests",
              file=sys.stderr)
        return 2
    libs = [os.path.abspath(a) for a in args[1:]] or [os.path.join(build, "shim", "librecap.so")]
    for lib in libs:
        if not os.path.exists(lib):
            print(f"standin-scenarios: {lib}: no such library", file=sys.stderr)
            return 2
        print(f"librecap: {lib}")
    preload = [benchlib.preloadable(lib) for lib in libs]
    head = "| scenario | program alone | " + " | ".join(
        ("before" if len(libs) == 2 and i == 0 else "after" if len(libs) == 2 else "recap")
        for i in range(len(libs))) + (" | after/before |" if len(libs) == 2 else " |")
    print(f"instructions per iteration (callgrind, stand-in at 13.0, runs of {counts[1]} "
          f"minus runs of {counts[0]} iterations)")
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    with tempfile.TemporaryDirectory(prefix="recap-scenarios-") as workdir:
        for name in scenarios:
            alone = per_iteration(build, None, name, counts, workdir)
            figures = [per_iteration(build, lib, name, counts, workdir) for lib in preload]
            row = f"| {name} | {alone:,.0f} | " + " | ".join(f"{f:,.0f}" for f in figures)
            if len(figures) == 2:
                row += f" | {figures[1] / figures[0]:.4f}"
            print(row + " |", flush=True)
    return 0
