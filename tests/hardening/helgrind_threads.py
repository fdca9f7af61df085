#!/usr/bin/env python3
"""helgrind_threads.py - 8 threads x 4 sites x 1000 captures under helgrind.

Runs the `threads` scenario (eight threads, each capturing at four call
sites, 1000 captures per site, thread-local capture mode, on the stand-in
driver reporting 13.3) once without recap and once under recap inside
valgrind's helgrind, and requires: helgrind reports no error, the output is
the same as without recap, and recap's end event counts every capture with
recaptures after the first ones. Skips (exit 77) when valgrind is missing.
helgrind.supp lists what helgrind reports that is not a race (atomics it
cannot see).
With HELGRIND_SELF_RECORD=1 the driver reports 13.0 and recap records the
repeat captures itself (RECAP_SELF_RECORD=on): its recordings, their stale
marks and the guards are then what the threads share.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from preload import preload_value  # noqa: E402

ITERATIONS = os.environ.get("HELGRIND_ITERATIONS", "1000")
SELF_RECORD = os.environ.get("HELGRIND_SELF_RECORD") == "1"


def main():
    if not shutil.which("valgrind"):
        print("valgrind not installed: skipped")
        return 77
    if os.environ.get("RECAP_TEST_PRELOAD_PREFIX"):
        print("sanitizer build: valgrind cannot run an ASan-built librecap; skipped")
        return 77
    scenario = os.environ["SCENARIO_BIN"]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RECAP_", "STANDIN_", "SCENARIO_")) and k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = os.environ["STANDIN_DIR"]
    env["STANDIN_DRIVER_VERSION"] = "13000" if SELF_RECORD else "13030"
    plain = subprocess.run([scenario, "threads", ITERATIONS], env=env, capture_output=True,
                           text=True, timeout=600)
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "recap.jsonl")
        env_recap = dict(env, LD_PRELOAD=preload_value(os.environ["RECAP_LIB"]), RECAP_LOG=log)
        if SELF_RECORD:
            env_recap["RECAP_SELF_RECORD"] = "on"
        suppressions = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helgrind.supp")
        run = subprocess.run(["valgrind", "--tool=helgrind", "--error-exitcode=9",
                              f"--suppressions={suppressions}",
                              scenario, "threads", ITERATIONS], env=env_recap,
                             capture_output=True, text=True, timeout=1200)
        text = open(log).read() if os.path.exists(log) else ""
    problems = []
    summary = re.search(r"ERROR SUMMARY: (\d+) errors", run.stderr)
    if run.returncode != 0 or not summary or summary.group(1) != "0":
        problems.append("helgrind reported errors (exit %d):\n%s" % (run.returncode, run.stderr[-3000:]))
    if run.stdout != plain.stdout:
        problems.append("output differs from the run without recap")
    if "failures=0" not in run.stdout or "failures=" in run.stdout.replace("failures=0", ""):
        problems.append("a worker saw a failing call:\n" + run.stdout)
    captures = re.findall(r'"totals":\{"captures":(\d+),"recaptured":(\d+)', text)
    expected = 8 * 4 * int(ITERATIONS)
    if not captures or int(captures[-1][0]) != expected:
        problems.append("the end event does not count %d captures: %s" % (expected, captures))
    elif int(captures[-1][1]) < expected * 9 // 10:
        problems.append("only %s of %d captures were recaptured" % (captures[-1][1], expected))
    for p in problems:
        print("FAIL", p)
    if not problems:
        print("helgrind: 0 errors over %d captures on 8 threads at 4 sites; "
              "output identical; %s recaptured" % (expected, captures[-1][1]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
