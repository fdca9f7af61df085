#!/usr/bin/env python3
"""conformance_standin.py PROGRAM - runs tests/gpu/recapture_conformance
against the stand-in driver under each reading the stand-in models
(tests/standin/READINGS.md) and checks that the program names, in its
SETTINGS line, exactly the knob values it ran under, with no point left
unmodelled; and that at driver version 13.0 it prints SKIP with the version
and exits 77. Proves that the program can tell every modelled reading apart.
"""
import os
import re
import subprocess
import sys

PROGRAM = sys.argv[1]
KNOBS = ('STANDIN_RECAPTURE_FAILURE', 'STANDIN_NULL_CALLBACK', 'STANDIN_RECAPTURE_CALLBACK')
DEFAULTS = {'STANDIN_RECAPTURE_FAILURE': 'call', 'STANDIN_NULL_CALLBACK': 'accept',
            'STANDIN_RECAPTURE_CALLBACK': 'changed'}
# Every value of every knob appears in at least one run.
RUNS = [
    {},
    {'STANDIN_RECAPTURE_FAILURE': 'later', 'STANDIN_NULL_CALLBACK': 'reject',
     'STANDIN_RECAPTURE_CALLBACK': 'every'},
    {'STANDIN_RECAPTURE_FAILURE': 'end', 'STANDIN_RECAPTURE_CALLBACK': 'every'},
    {'STANDIN_RECAPTURE_FAILURE': 'end', 'STANDIN_NULL_CALLBACK': 'reject'},
]


def run(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('STANDIN_') and not k.startswith('RECAP_') and k != 'LD_PRELOAD'}
    env.update(extra)
    return subprocess.run([PROGRAM], env=env, capture_output=True, text=True, timeout=60)


def main():
    failures = []
    for extra in RUNS:
        expected = dict(DEFAULTS, **extra)
        p = run(extra)
        label = ' '.join(f'{k}={v}' for k, v in extra.items()) or '(defaults)'
        settings = re.search(r'^SETTINGS (.*)$', p.stdout, re.M)
        got = dict(kv.split('=', 1) for kv in settings.group(1).split()) if settings else {}
        checks = re.findall(r'^CHECK (\S+)', p.stdout, re.M)
        print(f'{label}: exit {p.returncode}, {len(checks)} checks, SETTINGS '
              f'{settings.group(1) if settings else None}')
        if p.returncode != 0:
            failures.append(f'{label}: exit {p.returncode}\n{p.stdout}\n{p.stderr}')
        if 'NOT MODELLED' in p.stdout:
            bad = [l for l in p.stdout.splitlines() if 'NOT MODELLED' in l]
            failures.append(f'{label}: points not modelled:\n  ' + '\n  '.join(bad))
        for knob in KNOBS:
            if got.get(knob) != expected[knob]:
                failures.append(f'{label}: SETTINGS says {knob}={got.get(knob)}, '
                                f'ran under {expected[knob]}')
        if len(set(checks)) != len(checks) or len(checks) < 30:
            failures.append(f'{label}: expected 30+ distinct checks, got {checks}')
    p = run({'STANDIN_DRIVER_VERSION': '13000'})
    print(f'STANDIN_DRIVER_VERSION=13000: exit {p.returncode}: {p.stdout.strip()}')
    if p.returncode != 77 or not p.stdout.startswith('SKIP') or '13000' not in p.stdout:
        failures.append(f'at 13000: expected a SKIP line naming 13000 and exit 77, got exit '
                        f'{p.returncode}: {p.stdout}{p.stderr}')
    for f in failures:
        print('FAILED:', f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
