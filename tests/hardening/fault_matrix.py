#!/usr/bin/env python3
"""fault_matrix.py - every driver call recap makes on its own behalf fails once.

For each scenario program, the matrix is generated, not listed: the
stand-in's call counts of a run without recap and a run under recap tell
which entry points recap alone called. Each cell makes one of those calls
fail once (the first, and the last of the run) with CUDA_ERROR_UNKNOWN, using
the stand-in's fault injection, and requires that
  - the program's output and exit status equal those of the run without
    recap (it sees exactly what it would have seen),
  - recap's log names the failure (a warning, an error, or the reason of a
    capture or instantiate event),
  - nothing leaks: after the program asks for more device memory than exists
    (which makes recap release its caches), no graph or executable graph is
    left alive, and the stand-in saw no misuse.
Prints the matrix size and the cells passed; exits 1 if any cell failed.

With FAULT_MATRIX_SELF_RECORD=1 every run (with and without recap) uses a
driver of 13.0 and recap records repeat captures itself
(RECAP_SELF_RECORD=on): the calls recap then makes on its own behalf (the
node queries of a learning capture, node setters, the begin check) fail
instead, with scenarios that also switch and read their graphs.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from preload import preload_value  # noqa: E402

SELF_RECORD = os.environ.get("FAULT_MATRIX_SELF_RECORD") == "1"
SCENARIOS = ["params", "delta", "nochange", "fork_join", "alternate", "variants",
             "extra_args", "topo_mid", "user_objects", "pinned", "pool"]
if SELF_RECORD:
    SCENARIOS += ["switch_mid", "switch_end", "inspect"]
INJECTED = 999          # CUDA_ERROR_UNKNOWN
ITERATIONS = "8"


def environment(tmp, recap, extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RECAP_", "STANDIN_", "SCENARIO_")) and k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = os.environ["STANDIN_DIR"]
    env["STANDIN_DRIVER_VERSION"] = "13000" if SELF_RECORD else "13030"
    env["STANDIN_REPORT"] = os.path.join(tmp, "report.json")
    if recap:
        env["LD_PRELOAD"] = preload_value(os.environ.get("RECAP_TEST_PRELOAD_PREFIX", ""),
                                          os.environ["RECAP_LIB"])
        env["RECAP_LOG"] = os.path.join(tmp, "recap.jsonl")
        if SELF_RECORD:
            env["RECAP_SELF_RECORD"] = "on"
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
    env.update(extra)
    return env


def run(scenario, recap, extra=None):
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(tmp, recap, extra or {})
        p = subprocess.run([os.environ["SCENARIO_BIN"], scenario, ITERATIONS], env=env,
                           capture_output=True, text=True, timeout=120)
        report = {}
        if os.path.exists(env["STANDIN_REPORT"]):
            with open(env["STANDIN_REPORT"]) as f:
                report = json.load(f)
        log = ""
        if recap and os.path.exists(env["RECAP_LOG"]):
            with open(env["RECAP_LOG"]) as f:
                log = f.read()
        return p, report, log


def main():
    cells = passed = 0
    failures = []
    for scenario in SCENARIOS:
        base, base_report, _ = run(scenario, recap=False)
        _, recap_report, _ = run(scenario, recap=True)
        base_calls = base_report.get("calls", {})
        own = sorted(name for name, n in recap_report.get("calls", {}).items()
                     if n > 0 and base_calls.get(name, 0) == 0)
        for name in own:
            count = recap_report["calls"][name]
            for nth in sorted({1, count}):
                cells += 1
                fault = "%s@%d=%d" % (name, nth, INJECTED)
                p, report, log = run(scenario, recap=True,
                                     extra={"STANDIN_FAULTS": fault, "SCENARIO_DRAIN": "1"})
                problems = []
                if p.returncode != base.returncode:
                    problems.append("exit status %d, %d without recap" % (p.returncode, base.returncode))
                if p.stdout != base.stdout:
                    problems.append("output differs from the run without recap")
                if "CUDA_ERROR_UNKNOWN" not in log:
                    problems.append("the log does not mention the failure")
                live = report.get("live", {})
                if live.get("graph", 0) or live.get("exec", 0):
                    problems.append("left alive: %d graphs, %d executable graphs"
                                    % (live.get("graph", 0), live.get("exec", 0)))
                if report.get("misuses", 0):
                    problems.append("stand-in misuse: %s" % report.get("last_misuse"))
                if problems:
                    failures.append("%s / %s: %s\n    stderr: %s" % (
                        scenario, fault, "; ".join(problems), p.stderr.strip()[-400:]))
                else:
                    passed += 1
    for f in failures:
        print("FAIL", f)
    print("fault matrix: %d cells (%d scenarios x recap-only driver calls x first/last call), "
          "%d passed" % (cells, len(SCENARIOS), passed))
    return 0 if cells and passed == cells else 1


if __name__ == "__main__":
    sys.exit(main())
