"""bench standin-cost - recap's own driver calls and instructions per loop
iteration, counted on the stand-in driver (no GPU, no noise): the calls by
the stand-in's STANDIN_REPORT, the instructions by callgrind.

A loop iteration captures a graph of mixed nodes (memset, fork/join over
two streams, a kernel, a host callback, a copy), instantiates or updates
it, launches, waits and destroys. Each way runs at two iteration counts;
the difference divided by the difference in iterations is the cost of one
iteration, start-up excluded. Under valgrind recap's per-thread stack memo
is off (memcheck would flag its reads), so every capture unwinds the
stack; a native run recalls it instead. The unwinding (site_stack_capture,
inclusive) is therefore subtracted and reported apart.

  plain         tests/scenario `own_plain1` without recap: instantiate and
                destroy each time (the same code as `own_updates1` but that)
  observe       the same under RECAP_MODE=observe
  auto          the same under recap, RECAP_SELF_RECORD=off (executable
                reuse at 13.0)
  hand          `own_updates1`: the hand-written loop (cuGraphExecUpdate)
  hand_auto     the hand-written loop under recap (RECAP_SELF_RECORD=off)
  hand_observe  the hand-written loop under RECAP_MODE=observe

Printed: recap's own driver calls per iteration by name, and instructions
per iteration of each way and recap's own: observe - plain, auto - hand
(what recap adds to reach the hand-written loop), hand_auto - hand and
hand_observe - hand (what recap costs a program that needs nothing from
it). On a GPU each driver call costs far more than recap's instructions
(50-300 ns), so the calls come first. --calls counts only the calls (no
valgrind needed).

usage: scripts/bench standin-cost [--calls] BUILD_DIR [LIBRECAP]
BUILD_DIR: a meson build with tests (its stand-in and scenario programs);
LIBRECAP: another librecap.so to count (an older commit's, for a before and
after), else BUILD_DIR/shim/librecap.so.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402  (its preloadable(): LD_PRELOAD splits at spaces)

COUNTS = (300, 1300)
WAYS = {"plain": ("own_plain1", None), "observe": ("own_plain1", "observe"),
        "auto": ("own_plain1", "auto"), "hand": ("own_updates1", None),
        "hand_auto": ("own_updates1", "auto"), "hand_observe": ("own_updates1", "observe")}
PAIRS = (("observe", "plain"), ("auto", "hand"), ("hand_auto", "hand"), ("hand_observe", "hand"))


def env_of(build, lib, recap_mode, workdir):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "tests", "standin"),
               STANDIN_DRIVER_VERSION="13000")
    for k in ("LD_PRELOAD", "RECAP_MODE", "RECAP_CONFIG", "RECAP_SITES", "STANDIN_REPORT"):
        env.pop(k, None)
    if recap_mode:
        env["LD_PRELOAD"] = lib
        env["RECAP_LOG"] = os.path.join(workdir, "recap.jsonl")
        # The executable-reuse path, as this table has always counted it
        # (self-recording, recap's default at 13.0, is another loop).
        env["RECAP_SELF_RECORD"] = "off"
        if recap_mode != "auto":
            env["RECAP_MODE"] = recap_mode
    return env


def calls_of(build, lib, name, iters, recap_mode, workdir):
    """Driver calls by name over a whole run (the stand-in's exit report)."""
    report = os.path.join(workdir, f"calls-{name}-{recap_mode}-{iters}.json")
    env = env_of(build, lib, recap_mode, workdir)
    env["STANDIN_REPORT"] = report
    if recap_mode and os.path.exists(env["RECAP_LOG"]):
        os.remove(env["RECAP_LOG"])
    subprocess.run([os.path.join(build, "tests", "scenario", "scenario"), name, str(iters)],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if recap_mode and not os.path.exists(env["RECAP_LOG"]):
        raise SystemExit(f"standin-cost: recap wrote no log: LD_PRELOAD={lib} did not take")
    with open(report) as f:
        return json.load(f)["calls"]


def ir_of(build, lib, name, iters, recap_mode, workdir):
    out = os.path.join(workdir, f"cg-{name}-{recap_mode}-{iters}")
    env = env_of(build, lib, recap_mode, workdir)
    total = benchlib.callgrind_instructions(
        [os.path.join(build, "tests", "scenario", "scenario"), name, str(iters)], env, out)
    unwind = 0
    if recap_mode:
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", out],
                             capture_output=True, text=True).stdout
        for line in ann.splitlines():
            if "site_stack_capture" in line and "=>" not in line:
                unwind = int(re.sub(r"[^0-9]", "", line.split()[0]))
                break
    return total, unwind


def print_calls(build, lib, workdir):
    per = {}
    d = COUNTS[1] - COUNTS[0]
    for way, (name, mode) in WAYS.items():
        c0, c1 = (calls_of(build, lib, name, n, mode, workdir) for n in COUNTS)
        per[way] = {k: (c1.get(k, 0) - c0.get(k, 0)) / d for k in set(c0) | set(c1)}
    print("recap's own driver calls per iteration (stand-in at 13.0; way - base, by name; "
          "way/base: all driver calls of the way over the base's)")
    for way, base in PAIRS:
        own = {k: per[way].get(k, 0) - per[base].get(k, 0) for k in set(per[way]) | set(per[base])}
        own = {k: v for k, v in own.items() if abs(v) >= 0.005}
        total = sum(v for v in own.values() if v > 0)
        ratio = sum(per[way].values()) / max(sum(per[base].values()), 1e-9)
        listed = ", ".join(f"{k} {v:+.2f}" for k, v in sorted(own.items()))
        print(f"  {way + ' - ' + base:<22} {total:>5.2f}   way/base {ratio:5.3f}x   {listed or '-'}")


def main(argv):
    args = list(argv)
    if argv[:1] in (['-h'], ['--help']):
        print(__doc__)
        return 0
    calls_only = bool(args) and args[0] == "--calls"
    if calls_only:
        args = args[1:]
    if len(args) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(args[0])
    lib = os.path.abspath(args[1]) if len(args) == 2 else os.path.join(build, "shim",
                                                                       "librecap.so")
    print(f"librecap: {lib}")
    lib = benchlib.preloadable(lib)
    per = {}
    with tempfile.TemporaryDirectory(prefix="recap-cost-") as workdir:
        print_calls(build, lib, workdir)
        if calls_only:
            return 0
        for way, (name, mode) in WAYS.items():
            (t0, u0), (t1, u1) = (ir_of(build, lib, name, n, mode, workdir) for n in COUNTS)
            d = COUNTS[1] - COUNTS[0]
            per[way] = ((t1 - t0) / d, (u1 - u0) / d)
    print("instructions per iteration (callgrind, stand-in at 13.0); unwinding apart")
    for way, (ir, unwind) in per.items():
        print(f"  {way:<13} {ir - unwind:>10.0f}   (+ {unwind:.0f} unwinding the stack)")
    print("recap's own instructions per iteration, unwinding excluded (way - base; way/base):")
    for way, base in PAIRS:
        own = (per[way][0] - per[way][1]) - (per[base][0] - per[base][1])
        ratio = (per[way][0] - per[way][1]) / max(per[base][0] - per[base][1], 1e-9)
        print(f"  {way + ' - ' + base:<22} {own:>8.0f}   {ratio:6.3f}x")
    return 0

