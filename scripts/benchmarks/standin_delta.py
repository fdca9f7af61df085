"""bench standin-delta - the delta path's driver calls, on the stand-in at 13.3.

  scripts/bench standin-delta [--nodes 10,100,1000,5000] DELTA_COUNTS_BINARY LIBRECAP_SO

For graphs of n = 10, 100, 1000, 5000 kernel nodes of which k change every
iteration, runs tests/scenario/delta_counts under recap (stand-in reporting
13.3, so every repeat capture is a recapture) and prints what the driver was
asked to do over the iterations: instantiations, whole cuGraphExecUpdate
calls and per-node setters. Below the crossover (EXEC_DELTA_MAX_PERCENT of
the nodes) recap applies only the k changed nodes; above it, one whole
update; with nothing changed, nothing at all. The same program without
recap is run once per row to check the results are the same.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402  (its preloadable(): LD_PRELOAD splits at spaces)

ITERATIONS = 20


def run(binary, lib, n, k, with_recap):
    env = {key: v for key, v in os.environ.items()
           if not key.startswith(("RECAP_", "STANDIN_")) and key != "LD_PRELOAD"}
    env["STANDIN_DRIVER_VERSION"] = "13030"
    if with_recap:
        env["LD_PRELOAD"] = benchlib.preloadable(lib)
        env["RECAP_LOG"] = "off"
    out = subprocess.run([binary, str(n), str(k), str(ITERATIONS)], env=env,
                         capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("result "))
    return dict(field.split("=") for field in line.split()[1:])


def main(argv):
    if argv[:1] in (['-h'], ['--help']):
        print(__doc__)
        return 0
    argv = list(argv)
    sizes = (10, 100, 1000, 5000)
    if argv[:1] == ['--nodes']:
        try:
            sizes = tuple(int(n) for n in argv[1].split(','))
            if not sizes or min(sizes) < 1:
                raise ValueError
        except (IndexError, ValueError):
            sys.stderr.write('bench standin-delta: --nodes wants node counts >= 1 separated by '
                             f'commas (got {argv[1] if len(argv) > 1 else "nothing"})\n')
            return 2
        argv = argv[2:]
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    binary, lib = argv
    print(f"stand-in driver reporting 13.3; {ITERATIONS} iterations per row; "
          "counts are driver calls over the whole run")
    print("inst/plain: recap's instantiations over those of the same program without recap")
    print(f"{'nodes':>6} {'changed':>8} {'instantiate':>12} {'inst/plain':>11} {'recapture':>10} "
          f"{'whole update':>13} {'node setters':>13}  same results")
    failed = 0
    for n in sizes:
        for k in sorted({0, 1, max(1, n // 20), max(1, n // 5), n}):
            r = run(binary, lib, n, k, True)
            plain = run(binary, lib, n, k, False)
            same = r["checksum"] == plain["checksum"]
            failed += not same
            ratio = int(r["instantiate"]) / max(int(plain["instantiate"]), 1)
            print(f"{n:>6} {k:>8} {r['instantiate']:>12} {ratio:>11.3f} {r['recapture']:>10} "
                  f"{r['exec_update']:>13} {r['node_setters']:>13}  {'yes' if same else 'NO'}")
    return 1 if failed else 0

