#!/usr/bin/env python3
"""torch_step_calls.py - where a PyTorch re-capture step's time goes, phase
by phase, and which CUDA runtime and driver calls each phase makes
(issue 34, item 4).

A decode step (bench_models.py's decoder: a TransformerDecoderLayer, the
batch cycling 1, 2, 4, 8) is captured into a fresh torch.cuda.CUDAGraph
every step, replayed and released, as a loop without graph-update code
does. The step is cut into phases, each timed on the host:

  sync        torch.cuda.synchronize()            (the first part of
  empty       torch.cuda.empty_cache()             torch.cuda.graph's
  host_empty  torch._C._host_emptyCache()          enter, done by hand
  stream      the side stream's context enter      in the same order)
  begin       CUDAGraph.capture_begin()
  body        the model's Python (the captured work)
  end         capture_end(): end of capture, instantiation
  replay      the first replay
  release     the stream context's exit, reading the result, del graph

and torch.profiler (CUPTI) lists the runtime and driver API calls made
inside each phase, with their count and time per step. Run it plain and
under recap (LD_PRELOAD) to see which share recap reaches.

    python3 scripts/benchmarks/torch_step_calls.py [--steps 80] [--json FILE]

Prints one table of phase medians (us) and one of calls per phase. Exit 77
without torch or a GPU.
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
sys.path.insert(0, HERE)

PHASES = ("sync", "empty", "host_empty", "stream", "begin", "body", "end", "replay", "release")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--warmup", type=int, default=16)
    ap.add_argument("--json", help="write the medians and call table here too")
    args = ap.parse_args()

    import torch_setup
    torch = torch_setup.import_torch()
    import bench_models

    torch.manual_seed(27)
    d = bench_models
    layer = torch.nn.TransformerDecoderLayer(d.D_MODEL, d.HEADS, dim_feedforward=d.FEED_FORWARD,
                                             dropout=0.0, batch_first=True).cuda().eval()
    batches = d.DECODER_BATCHES
    tokens = {b: torch.zeros(b, 1, d.D_MODEL, device="cuda") for b in batches}
    memory = {b: torch.rand(b, d.MEMORY, d.D_MODEL).cuda() for b in batches}

    def body(batch):
        with torch.no_grad():
            return layer(tokens[batch], memory[batch])

    for b in batches:
        body(b)
    torch.cuda.synchronize()

    times = collections.defaultdict(list)
    host_empty = getattr(torch._C, "_host_emptyCache", None)

    def one_step(i, mark):
        batch = batches[i % len(batches)]
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        t = [time.perf_counter()]

        def lap(name):
            t.append(time.perf_counter())
            times[name].append((t[-1] - t[-2]) * 1e6)

        with mark("sync"):
            torch.cuda.synchronize()
        lap("sync")
        with mark("empty"):
            torch.cuda.empty_cache()
        lap("empty")
        with mark("host_empty"):
            if host_empty:
                host_empty()
        lap("host_empty")
        ctx = torch.cuda.stream(stream)
        with mark("stream"):
            ctx.__enter__()
        lap("stream")
        with mark("begin"):
            graph.capture_begin()
        lap("begin")
        with mark("body"):
            out = body(batch)
        lap("body")
        with mark("end"):
            graph.capture_end()
        lap("end")
        with mark("replay"):
            graph.replay()
        lap("replay")
        with mark("release"):
            ctx.__exit__(None, None, None)
            torch.cuda.synchronize()
            got = out.cpu()
            del out, graph
        lap("release")
        return got

    import contextlib
    nothing = lambda name: contextlib.nullcontext()
    for i in range(args.warmup):
        one_step(i, nothing)
    times.clear()
    for i in range(args.steps):
        one_step(i, nothing)
    medians = {p: statistics.median(times[p]) for p in PHASES}

    # A second pass under the profiler for the calls (its own overhead
    # would distort the times above).
    from torch.profiler import ProfilerActivity, profile, record_function
    calls = collections.defaultdict(lambda: [0, 0.0])   # (phase, name) -> count, us
    profiled = max(8, args.steps // 4)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(profiled):
            one_step(i, lambda name: record_function("phase:" + name))
    events = list(prof.events())
    ranges = [(e.time_range.start, e.time_range.end, e.name[6:]) for e in events
              if e.name.startswith("phase:")]
    ranges.sort()
    for e in events:
        name = e.name
        if not (name.startswith("cuda") or name.startswith("cu")) or name.startswith("cuda::"):
            continue
        start = e.time_range.start
        for lo, hi, phase in ranges:
            if lo <= start <= hi:
                c = calls[(phase, name)]
                c[0] += 1
                c[1] += e.time_range.end - e.time_range.start
                break

    recap = "librecap" in os.environ.get("LD_PRELOAD", "")
    print(f"step phases (us, medians of {args.steps} steps; recap {'on' if recap else 'off'}):")
    total = sum(medians.values())
    for p in PHASES:
        print(f"  {p:<11} {medians[p]:9.1f}  {100 * medians[p] / total:5.1f} %")
    print(f"  {'total':<11} {total:9.1f}")
    print(f"calls per step by phase (profiled {profiled} steps; count, us):")
    for p in PHASES:
        rows = sorted(((n, c) for (ph, n), c in calls.items() if ph == p),
                      key=lambda r: -r[1][1])
        for n, (count, us) in rows:
            print(f"  {p:<11} {n:<40} {count / profiled:6.2f} {us / profiled:9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"recap": recap, "medians_us": medians,
                       "calls": {f"{p}:{n}": [c / profiled, us / profiled]
                                 for (p, n), (c, us) in calls.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
