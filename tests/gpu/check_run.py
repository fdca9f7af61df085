#!/usr/bin/env python3
"""check_run.py - reads what one GPU test run under recap left behind.

  check_run.py log --log FILE --stderr FILE --min-captures N [--min-reuse F]
                   [--min-by-recap F] [--max-update-failures K]
                   [--min-host-reused K] [--rank R --world-size W]
                   [--expect-warning TEXT]
      The recap log must be valid JSON Lines, its `capture` events must have a
      known `path`, and its `end` event must count at least N captures (recap
      writes routine events for a site's first 64 captures and then at powers
      of two; the end event has the exact totals); of all instantiations after
      the first at their site, at least the fraction F (default 0.9) must be
      served from a released executable graph (`how` in update, delta, reuse),
      and at least one must be (none with --min-reuse 0: a program that
      instantiates each graph once); stderr (RECAP_VERBOSE=1, never sampled) must
      hold at least N "recap: capture begin site" and N "recap: capture end
      site" lines.
      On a driver with the recapture API (the start event's recapture_api;
      --recapture require|off overrides) it also requires, from the end
      event's exact totals, that at least the fraction --min-recapture
      (default 0.9) of the captures after each site's first were recaptures,
      and the delta path (how = delta: only the changed nodes applied) at
      every site whose recaptures changed at most DELTA_MAX_PERCENT of the
      nodes (recap's crossover; where more change, recap makes a whole
      update, and the summary says so).
      With --min-by-recap F, on a driver without the recapture API (recap
      records repeat captures itself), at least the fraction F of the
      captures after each site's first were recorded by recap (the end
      event's by_recap).
      With --max-update-failures, at most K executable updates
      may have failed (the end event's update_failures). With
      --min-host-reused, recap must have handed pinned host memory back at
      least K times (the end event's totals.host_memory.reused). With --rank and
      --world-size, the start event must name that rank and world size.
      With --expect-warning, some warning event's message must contain TEXT
      (what the log tells a user whose site recap leaves alone by default).

  check_run.py memory --plain-stderr FILE --recap-stderr FILE [--slack-mib M]
      Reads the "memory: after N iterations: B bytes in use" lines that
      memory_growth prints; under recap the growth from the first to the last
      line may exceed the plain run's growth by at most M MiB (default 8).
      Lines ending in "(rank R)" (several processes writing one stderr) are
      checked per rank.

  check_run.py sites --log FILE --script python_sites.py --binding B
                     [--selected-log FILE --selected-entry E] [--config-log FILE]
      python_sites.py's sites (check_sites): one site per marked line, labels
      "python_sites.py:LINE (FUNCTION) < ..." naming the SITE-A/B/C lines and
      the helper's two callers (SITE-D/E), for torch one more labelled
      "decode @ ..." (SITE-NVTX); every site captured at least 20 times; in
      the selected run exactly one site not observed, the one named by E; the
      run with `recap config`'s file observes exactly the same sites.

Prints one summary line (and a reason per failed check); exit 0 when every
check held, 1 otherwise, 2 on bad usage.
"""
import argparse
import collections
import json
import os
import re
import sys

CAPTURE_PATHS = {"fresh", "recapture", "fallback", "observe"}
INSTANTIATE_HOWS = {"new", "update", "delta", "reuse"}
REUSED_HOWS = {"update", "delta", "reuse"}
DELTA_MAX_PERCENT = 12  # shim/repeat/exec_reuse.h EXEC_DELTA_MAX_PERCENT


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


def program_events(events):
    """The events of the program's own process. Subprocesses that inherit
    LD_PRELOAD and touch the driver (inductor's compile workers) write their
    own start and end into the same log, and may end after the program:
    the program is the process that captured most."""
    captured = collections.Counter(e.get("pid") for e in events if e["event"] == "capture")
    for e in events:
        if e["event"] == "end":
            captured[e.get("pid")] += e.get("totals", {}).get("captures", 0)
    if len({e.get("pid") for e in events}) <= 1 or not captured:
        return events
    pid = captured.most_common(1)[0][0]
    return [e for e in events if e.get("pid") == pid]


def end_sites(events):
    """Every site entry of the end event: a process of many sites writes it
    in parts (each an "end" line with "part"; the last has the totals)."""
    return [s for e in events if e["event"] == "end" for s in e.get("sites", [])]


def check_log(args):
    failures = []
    events = program_events(read_events(args.log, failures))
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
        sites = [s for s in end_sites(events) if s.get("instantiations", 0) > 0]
        after_first = sum(s["instantiations"] - 1 for s in sites)
        reused = sum(s.get("reused", 0) for s in sites)
    else:
        after_first = sum(len(h) - 1 for h in per_site.values())
        reused = sum(1 for h in per_site.values() for how in h[1:] if how in REUSED_HOWS)
    fraction = reused / after_first if after_first else 0.0
    if reused == 0 and args.min_reuse > 0:
        failures.append("no instantiation was served from a released executable graph "
                        "(no how=update/delta/reuse after the first at a site)")
    elif fraction < args.min_reuse:
        failures.append(f"only {reused} of {after_first} instantiations after the first at "
                        f"their site were served from a released executable graph "
                        f"({fraction:.0%} < {args.min_reuse:.0%})")

    start = next((e for e in events if e["event"] == "start"), {})
    recapture_note = check_recapture(args, start, end, end_sites(events), failures)
    by_recap_note = check_by_recap(args, start, end, end_sites(events), failures)

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
    if args.min_host_reused is not None:
        host = totals.get("host_memory") or {}
        if host.get("reused", 0) < args.min_host_reused:
            failures.append(f"pinned host memory handed back {host.get('reused', 0)} times, "
                            f"expected at least {args.min_host_reused} (host_memory: {host})")
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
    if args.expect_warning is not None and not any(
            e["event"] == "warning" and args.expect_warning in str(e.get("message"))
            for e in problems):
        failures.append(f"no warning says {args.expect_warning!r}")
    summary = (f"log: {len(events)} events, driver {start.get('driver')}, mode {start.get('mode')}, "
               f"recapture_api {start.get('recapture_api')}; captures {totals.get('captures')} "
               f"({len(captures)} events: {dict(sorted(paths.items()))}); instantiations "
               f"{totals.get('instantiations')} (events: {dict(sorted(hows.items()))}) at "
               f"{len(per_site)} site(s), reused {reused} of "
               f"{after_first} after the first; verbose lines {begins} begin / {ends} end; "
               f"warnings {by_kind.get('warning', 0)}, errors {by_kind.get('error', 0)}")
    print(summary)
    if recapture_note:
        print(f"  {recapture_note}")
    if by_recap_note:
        print(f"  {by_recap_note}")
    for e in problems[:3]:
        print(f"  {e['event']}: {e.get('message')}")
    for reason in failures:
        print(f"  FAILED CHECK: {reason}")
    return 1 if failures else 0


def check_recapture(args, start, end, end_entries, failures):
    """The 13.3 requirements, from the end event's exact per-site totals.
    Returns a line saying what was required and found, or None when not
    required."""
    wanted = args.recapture
    if wanted == "auto":
        wanted = "require" if start.get("recapture_api") is True else "off"
    if wanted == "off" or end is None:
        return None
    sites = [s for s in end_entries if s.get("captures", 0) > 0]
    after_first = sum(s["captures"] - 1 for s in sites)
    recaptured = sum(s.get("recaptured", 0) for s in sites)
    fraction = recaptured / after_first if after_first else 0.0
    if after_first == 0 or fraction < args.min_recapture:
        failures.append(f"recapture: {recaptured} of {after_first} captures after their site's "
                        f"first were recaptures ({fraction:.0%} < {args.min_recapture:.0%})")
    delta_sites = whole_sites = 0
    for s in sites:
        rec, changed = s.get("recaptured", 0), s.get("changed", 0)
        if not rec or not changed:
            continue
        nodes_per_capture = s.get("nodes", 0) / s["captures"]
        percent = 100.0 * (changed / rec) / nodes_per_capture if nodes_per_capture else 100.0
        if percent <= DELTA_MAX_PERCENT:
            delta_sites += 1
            if s.get("delta", 0) == 0:
                failures.append(f"site {s.get('site')}: recaptures changed {percent:.1f}% of the "
                                f"nodes (<= {DELTA_MAX_PERCENT}%) but no instantiation took the "
                                f"delta path (delta 0, update {s.get('update', 0)})")
        else:
            whole_sites += 1
    return (f"recapture required: {recaptured} of {after_first} captures after the first "
            f"recaptured ({fraction:.0%}); {delta_sites} site(s) where few nodes change (delta "
            f"path required), {whole_sites} where more than {DELTA_MAX_PERCENT}% change (whole "
            f"update)")


def check_by_recap(args, start, end, end_entries, failures):
    """--min-by-recap, where recap records repeat captures itself (no
    recapture API). Returns a line saying what was required and found, or
    None when not asked or not applicable."""
    if args.min_by_recap is None or end is None:
        return None
    if start.get("recapture_api") is True:
        return "recorded by recap: not required (the driver has the recapture API)"
    sites = [s for s in end_entries if s.get("captures", 0) > 0]
    after_first = sum(s["captures"] - 1 for s in sites)
    by_recap = sum(s.get("by_recap", 0) for s in sites)
    fallbacks = sum(s.get("fallbacks", 0) for s in sites)
    fraction = by_recap / after_first if after_first else 0.0
    if after_first == 0 or fraction < args.min_by_recap:
        failures.append(f"recorded by recap: {by_recap} of {after_first} captures after their "
                        f"site's first ({fraction:.0%} < {args.min_by_recap:.0%}); "
                        f"{fallbacks} fallbacks")
    return (f"recorded by recap: {by_recap} of {after_first} captures after the first "
            f"({fraction:.0%}, required {args.min_by_recap:.0%}); {fallbacks} fallbacks")


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


def site_marks(script):
    marks = {}
    with open(script, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = re.search(r"# (SITE-[A-E]|SITE-NVTX|HELPER)$", line.rstrip())
            if m:
                marks.setdefault(m.group(1), []).append(number)
    return marks


def site_modes(path, failures):
    return {e["site"]: e.get("mode") for e in read_events(path, failures) if e["event"] == "site"}


def check_sites(args):
    failures = []
    events = read_events(args.log, failures)
    sites = [e for e in events if e["event"] == "site"]
    ends = [e for e in events if e["event"] == "end"]
    counts = {s["site"]: s["captures"] for s in end_sites(events)} if ends else {}
    marks = site_marks(args.script)
    run = {"torch": "run_torch", "cupy": "run_cupy", "cuda_core": "run_cuda_core"}[args.binding]
    section = [i for i, line in enumerate(open(args.script, encoding="utf-8"), 1)
               if line.startswith(f"def {run}(")][0]
    def mark(name):   # the mark's line inside this binding's function
        return min(n for n in marks[name] if n > section)
    base = re.escape(os.path.basename(args.script))
    expect = {m: rf"(^|/){base}:{mark(m)} \({run}\) < " for m in ("SITE-A", "SITE-B", "SITE-C")}
    for m in ("SITE-D", "SITE-E"):
        expect[m] = rf"(^|/){base}:{mark('HELPER')} \(helper\) < .*{base}:{mark(m)} \({run}\)$"
    if args.binding == "torch":
        expect["SITE-NVTX"] = rf"^decode @ .*{base}:{mark('SITE-NVTX')} \({run}\) < "
    for name, pattern in expect.items():
        found = [s for s in sites if s.get("label") and re.search(pattern, s["label"])]
        if len(found) != 1:
            failures.append(f"{name}: {len(found)} sites labelled like {pattern!r}, expected 1")
            continue
        s = found[0]
        if counts.get(s["site"], 0) < 20:
            failures.append(f"{name}: site {s['site']} has {counts.get(s['site'], 0)} captures, "
                            "expected at least 20 (one site per line, every iteration)")
        py = s.get("python") or {}
        print(f"  {name}: site {s['site']} label {s['label']!r} gil {py.get('gil')} "
              f"python {py.get('version')} captures {counts.get(s['site'], 0)}")
    if len(sites) != len(expect):
        failures.append(f"{len(sites)} sites, expected {len(expect)}: "
                        f"{[s.get('label') for s in sites]}")
    if args.selected_log:
        selected = [(i, m) for i, m in site_modes(args.selected_log, failures).items()
                    if m != "observe"]
        labels = {e["site"]: e.get("label") or "" for e in read_events(args.selected_log, failures)
                  if e["event"] == "site"}
        if len(selected) != 1 or args.selected_entry not in labels.get(selected[0][0], ""):
            failures.append(f"RECAP_SITES={args.selected_entry}: sites not observed "
                            f"{[(labels.get(i), m) for i, m in selected]}, expected exactly the "
                            "one it names")
        else:
            print(f"  RECAP_SITES={args.selected_entry}: only {labels[selected[0][0]]!r} enabled")
        if args.config_log:
            again = site_modes(args.config_log, failures)
            want = site_modes(args.selected_log, failures)
            if again != want:
                failures.append(f"recap config's file gave modes {again}, the selection {want}")
            else:
                print("  recap config's file reproduced the selection "
                      f"({list(again.values()).count('observe')} of {len(again)} sites observed)")
    for f in failures:
        print(f"  FAILED CHECK: {f}")
    print(f"sites {args.binding}: {len(sites)} sites, {'ok' if not failures else 'FAILED'}")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("log")
    p.add_argument("--log", required=True)
    p.add_argument("--stderr", required=True)
    p.add_argument("--min-captures", type=int, required=True)
    p.add_argument("--min-reuse", type=float, default=0.9)
    p.add_argument("--recapture", choices=("auto", "require", "off"), default="auto")
    p.add_argument("--min-recapture", type=float, default=0.9)
    p.add_argument("--min-by-recap", type=float)
    p.add_argument("--max-update-failures", type=int)
    p.add_argument("--min-host-reused", type=int)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--expect-warning")
    p.set_defaults(run=check_log)
    p = sub.add_parser("memory")
    p.add_argument("--plain-stderr", required=True)
    p.add_argument("--recap-stderr", required=True)
    p.add_argument("--slack-mib", type=float, default=8.0)
    p.set_defaults(run=check_memory)
    p = sub.add_parser("sites")
    p.add_argument("--log", required=True)
    p.add_argument("--script", required=True)
    p.add_argument("--binding", required=True, choices=("torch", "cupy", "cuda_core"))
    p.add_argument("--selected-log")
    p.add_argument("--selected-entry")
    p.add_argument("--config-log")
    p.set_defaults(run=check_sites)
    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
