#!/usr/bin/env python3
"""check_run.py - reads what one GPU test run under recap left behind.

  check_run.py log --log FILE --stderr FILE --min-captures N [--min-reuse F]
                   [--max-update-failures K] [--rank R --world-size W]
      The recap log must be valid JSON Lines, its `capture` events must have a
      known `path`, and its `end` event must count at least N captures (recap
      writes routine events for a site's first 64 captures and then at powers
      of two; the end event has the exact totals); of all instantiations after
      the first at their site, at least the fraction F (default 0.9) must be
      served from a released executable graph (`how` in update, delta, reuse),
      and at least one must be; stderr (RECAP_VERBOSE=1, never sampled) must
      hold at least N "recap: capture begin site" and N "recap: capture end
      site" lines. With --max-update-failures, at most K executable updates
      may have failed (the end event's update_failures). With --rank and
      --world-size, the start event must name that rank and world size.

  check_run.py memory --plain-stderr FILE --recap-stderr FILE [--slack-mib M]
      Reads the "memory: after N iterations: B bytes in use" lines that
      memory_growth prints; under recap the growth from the first to the last
      line may exceed the plain run's growth by at most M MiB (default 8).
      Lines ending in "(rank R)" (several processes writing one stderr) are
      checked per rank.

Prints one summary line (and a reason per failed check); exit 0 when every
check held, 1 otherwise, 2 on bad usage.
"""
import argparse
import collections
import json
import re
import sys

CAPTURE_PATHS = {"fresh", "recapture", "fallback", "observe"}
INSTANTIATE_HOWS = {"new", "update", "delta", "reuse"}
REUSED_HOWS = {"update", "delta", "reuse"}


def read_events(path, failures):
    events = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    failures.append(f"log line {number} is not JSON: {line[:120]!r}")
                    continue
                if not isinstance(event, dict) or "event" not in event:
                    failures.append(f"log line {number} has no 'event' key")
                    continue
                events.append(event)
    except OSError as e:
        failures.append(f"cannot read log {path}: {e}")
    return events


def check_log(args):
    failures = []
    events = read_events(args.log, failures)
    by_kind = collections.Counter(e["event"] for e in events)

    captures = [e for e in events if e["event"] == "capture"]
    paths = collections.Counter(str(e.get("path")) for e in captures)
    unknown_paths = set(paths) - CAPTURE_PATHS
    end = next((e for e in reversed(events) if e["event"] == "end"), None)
    totals = end.get("totals", {}) if end else {}
    if end is None:
        failures.append("no end event (the program did not exit normally?)")
    elif totals.get("captures", 0) < args.min_captures:
        failures.append(f"the end event counts {totals.get('captures')} captures, "
                        f"expected at least {args.min_captures}")
    if unknown_paths:
        failures.append(f"capture events with unknown path: {sorted(unknown_paths)}")

    per_site = collections.defaultdict(list)
    for e in events:
        if e["event"] == "instantiate":
            per_site[e.get("site")].append(str(e.get("how")))
    hows = collections.Counter(h for site_hows in per_site.values() for h in site_hows)
    unknown_hows = set(hows) - INSTANTIATE_HOWS
    if unknown_hows:
        failures.append(f"instantiate events with unknown how: {sorted(unknown_hows)}")
    if end is not None:
        sites = [s for s in end.get("sites", []) if s.get("instantiations", 0) > 0]
        after_first = sum(s["instantiations"] - 1 for s in sites)
        reused = sum(s.get("reused", 0) for s in sites)
    else:
        after_first = sum(len(h) - 1 for h in per_site.values())
        reused = sum(1 for h in per_site.values() for how in h[1:] if how in REUSED_HOWS)
    fraction = reused / after_first if after_first else 0.0
    if reused == 0:
        failures.append("no instantiation was served from a released executable graph "
                        "(no how=update/delta/reuse after the first at a site)")
    elif fraction < args.min_reuse:
        failures.append(f"only {reused} of {after_first} instantiations after the first at "
                        f"their site were served from a released executable graph "
                        f"({fraction:.0%} < {args.min_reuse:.0%})")

    begins = ends = 0
    try:
        with open(args.stderr, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("recap: capture begin site"):
                    begins += 1
                elif line.startswith("recap: capture end site"):
                    ends += 1
    except OSError as e:
        failures.append(f"cannot read stderr {args.stderr}: {e}")
    if begins < args.min_captures or ends < args.min_captures:
        failures.append(f"stderr has {begins} 'recap: capture begin site' and {ends} "
                        f"'recap: capture end site' lines, expected at least "
                        f"{args.min_captures} of each")

    start = next((e for e in events if e["event"] == "start"), {})
    if args.max_update_failures is not None and end is not None and \
            totals.get("update_failures", 0) > args.max_update_failures:
        failures.append(f"{totals.get('update_failures')} executable updates failed, expected "
                        f"at most {args.max_update_failures}")
    if args.rank is not None and (start.get("rank"), start.get("world_size")) != \
            (args.rank, args.world_size):
        failures.append(f"the start event names rank {start.get('rank')} of world size "
                        f"{start.get('world_size')}, expected rank {args.rank} of "
                        f"{args.world_size}")
    problems = [e for e in events if e["event"] in ("warning", "error")]
    summary = (f"log: {len(events)} events, driver {start.get('driver')}, mode {start.get('mode')}, "
               f"recapture_api {start.get('recapture_api')}; captures {totals.get('captures')} "
               f"({len(captures)} events: {dict(sorted(paths.items()))}); instantiations "
               f"{totals.get('instantiations')} (events: {dict(sorted(hows.items()))}) at "
               f"{len(per_site)} site(s), reused {reused} of "
               f"{after_first} after the first; verbose lines {begins} begin / {ends} end; "
               f"warnings {by_kind.get('warning', 0)}, errors {by_kind.get('error', 0)}")
    print(summary)
    for e in problems[:3]:
        print(f"  {e['event']}: {e.get('message')}")
    for reason in failures:
        print(f"  FAILED CHECK: {reason}")
    return 1 if failures else 0


MEMORY_LINE = re.compile(r"^memory: after (\d+) iterations: (\d+) bytes in use"
                         r"(?: \(rank (\d+)\))?")


def memory_points(path):
    """{rank or None: [(iterations, bytes), ...]}"""
    points = collections.defaultdict(list)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = MEMORY_LINE.match(line)
            if m:
                rank = int(m.group(3)) if m.group(3) is not None else None
                points[rank].append((int(m.group(1)), int(m.group(2))))
    return points


def check_memory(args):
    try:
        plain = memory_points(args.plain_stderr)
        recap = memory_points(args.recap_stderr)
    except OSError as e:
        print(f"memory: cannot read: {e}")
        return 1
    ranks = sorted(set(plain) | set(recap), key=lambda r: -1 if r is None else r)
    if not ranks:
        ranks = [None]
    status = 0
    for rank in ranks:
        if rank is not None:
            print(f"rank {rank}:")
        status |= check_memory_points(args, plain.get(rank, []), recap.get(rank, []))
    return status


def check_memory_points(args, plain, recap):
    mib = 1 << 20
    if len(plain) < 2 or len(recap) < 2:
        print(f"memory: expected two 'memory:' lines in each run, got {len(plain)} plain, "
              f"{len(recap)} under recap")
        return 1
    plain_growth = plain[-1][1] - plain[0][1]
    recap_growth = recap[-1][1] - recap[0][1]
    print("memory: in use after " +
          ", ".join(f"{n} iterations {b / mib:.1f} MiB plain / {r / mib:.1f} MiB recap"
                    for (n, b), (_, r) in zip(plain, recap)) +
          f"; growth {plain_growth / mib:+.1f} MiB plain, {recap_growth / mib:+.1f} MiB recap")
    if recap_growth > plain_growth + args.slack_mib * mib:
        print(f"  FAILED CHECK: under recap memory grew by {recap_growth / mib:.1f} MiB from "
              f"{recap[0][0]} to {recap[-1][0]} iterations, more than the plain run's "
              f"{plain_growth / mib:.1f} MiB + {args.slack_mib} MiB")
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("log")
    p.add_argument("--log", required=True)
    p.add_argument("--stderr", required=True)
    p.add_argument("--min-captures", type=int, required=True)
    p.add_argument("--min-reuse", type=float, default=0.9)
    p.add_argument("--max-update-failures", type=int)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.set_defaults(run=check_log)
    p = sub.add_parser("memory")
    p.add_argument("--plain-stderr", required=True)
    p.add_argument("--recap-stderr", required=True)
    p.add_argument("--slack-mib", type=float, default=8.0)
    p.set_defaults(run=check_memory)
    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
