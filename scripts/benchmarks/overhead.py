"""bench overhead - recap's interposition overhead on calls it does not act on:
kernel launches through the CUDA runtime (cudaLaunchKernel of an empty
kernel, no capture), with and without recap, in the same run.

Builds scripts/benchmarks/overhead.cu with nvcc into a temporary directory, then
runs it --reps times without and --reps times with LD_PRELOAD=librecap.so,
alternating (plain, recap, plain, recap, ...) so that drift affects both
alike. Each run times --launches launches in batches and reports the median
per-launch time; the summary gives the median of the runs' medians for each
side, the overhead ratio recap/plain - 1 against the 2% target, and the
spread of the plain runs as the noise floor to read it against.

usage: scripts/bench overhead [--recap-lib PATH] [--launches 200000]
                              [--batch 500] [--reps 7]
librecap.so: --recap-lib, else $RECAP_LIB, else build-gpu/shim/librecap.so.
Runs in about 10-20 s on an H200.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TARGET_OVERHEAD = 0.02


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/bench overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recap-lib", help="path of librecap.so")
    parser.add_argument("--launches", type=int, default=200000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args(argv)
    lib = benchlib.recap_lib(args.recap_lib)
    workdir = benchlib.make_workdir("overhead")
    binary = benchlib.build("overhead.cu", workdir)
    benchlib.print_header("bench overhead: cudaLaunchKernel of an empty kernel, no capture, "
                          "plain vs recap", binary)
    print(f"librecap: {lib}")
    print(f"binary:   {binary}")
    print(f"{args.reps} runs each way, alternating; {args.launches} launches per run in batches "
          f"of {args.batch}")
    command = [binary, "--launches", str(args.launches), "--batch", str(args.batch),
               "--warmup-batches", "20"]
    print("run: " + " ".join(command))
    sys.stdout.flush()

    plain, recap = [], []
    for rep in range(args.reps):
        plain.append(benchlib.results(benchlib.run(command))[0]["median_ns"])
        log = os.path.join(workdir, f"recap-{rep}.jsonl")
        recap.append(benchlib.results(benchlib.run(
            command, {"LD_PRELOAD": lib, "RECAP_LOG": log}))[0]["median_ns"])
        print(f"  run {rep + 1}/{args.reps}: plain {plain[-1]:.1f} ns/launch, "
              f"recap {recap[-1]:.1f} ns/launch")
        sys.stdout.flush()

    plain_median = benchlib.median(plain)
    recap_median = benchlib.median(recap)
    overhead = recap_median / plain_median - 1.0
    noise = (max(plain) - min(plain)) / plain_median
    print()
    print(f"{'':8}{'median ns/launch':>18}{'min':>10}{'max':>10}")
    print(f"{'plain':8}{plain_median:>18.1f}{min(plain):>10.1f}{max(plain):>10.1f}")
    print(f"{'recap':8}{recap_median:>18.1f}{min(recap):>10.1f}{max(recap):>10.1f}")
    print()
    print(f"overhead recap/plain - 1: {overhead:+.2%} (target under {TARGET_OVERHEAD:.0%}: "
          f"{'met' if overhead < TARGET_OVERHEAD else 'NOT met'}); "
          f"spread of the plain runs (noise floor): {noise:.2%}")
    print(f"absolute: {recap_median - plain_median:+.1f} ns per launch")
    return 0

