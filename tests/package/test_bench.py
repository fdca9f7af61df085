#!/usr/bin/env python3
"""test_bench.py - scripts/bench, the one benchmark command: its list of
subcommands (one line each, every one backed by its module), each
subcommand's --help, bad usage, and the two that need no GPU run on this
build's stand-in driver, printing their ratios against the run without
recap.

Environment (set by meson): SOURCE_ROOT, BUILD_ROOT, DELTA_COUNTS_BIN."""

import os
import re
import subprocess
import sys
import unittest

ROOT = os.environ['SOURCE_ROOT']
BUILD = os.environ['BUILD_ROOT']
DELTA_COUNTS = os.environ['DELTA_COUNTS_BIN']
BENCH = os.path.join(ROOT, 'scripts', 'bench')
NAMES = ['instantiate', 'paired', 'shapes', 'python', 'overhead', 'delta', 'node-setters', 'all',
         'standin-cost', 'standin-scenarios', 'standin-delta']


def bench(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('RECAP_', 'STANDIN_'))}
    env.pop('LD_PRELOAD', None)
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                          timeout=300, env=env)


class Bench(unittest.TestCase):
    def test_help_lists_every_subcommand_once(self):
        r = bench('--help')
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = re.findall(r'(?m)^  (\S+)\s+\[(GPU|stand-in)\] \S.*$', r.stdout)
        self.assertEqual([name for name, _ in listed], NAMES)
        for name, _ in listed:
            if name != 'all':
                module = name.replace('-', '_') + '.py'
                self.assertTrue(os.path.isfile(os.path.join(ROOT, 'scripts', 'benchmarks', module)))
        # No other entry points are left beside it.
        left = [n for n in os.listdir(os.path.join(ROOT, 'scripts')) if n.startswith('bench')]
        self.assertEqual(sorted(left), ['bench', 'benchmarks'])

    def test_each_subcommand_has_help(self):
        for name in NAMES:
            if name == 'all':
                continue
            r = bench(name, '--help')
            self.assertEqual(r.returncode, 0, f'{name}: {r.stderr}')
            self.assertIn(f'scripts/bench {name}', r.stdout, name)

    def test_bad_usage(self):
        r = bench()
        self.assertEqual(r.returncode, 2)
        self.assertIn('usage: scripts/bench SUBCOMMAND', r.stderr)
        r = bench('instantiat')
        self.assertEqual(r.returncode, 2)
        self.assertIn("bench: unknown subcommand 'instantiat'; expected one of instantiate, ", r.stderr)
        r = bench('all', '--bogus')
        self.assertEqual(r.returncode, 2)
        self.assertIn('usage: scripts/bench all [LIBRECAP]', r.stderr)
        r = bench('instantiate', '--nodes')
        self.assertEqual(r.returncode, 2)
        self.assertIn('--nodes: expected one argument', r.stderr)
        r = bench('standin-delta', '--nodes', '10,x', 'a', 'b')
        self.assertEqual(r.returncode, 2)
        self.assertIn('--nodes wants node counts >= 1 separated by commas (got 10,x)', r.stderr)

    def test_standin_delta(self):
        # Two sizes of the grid (the whole one is the benchmark's).
        r = bench('standin-delta', '--nodes', '10,1000', DELTA_COUNTS,
                  os.path.join(BUILD, 'shim', 'librecap.so'))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = re.findall(r'(?m)^\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+\d+\s+\d+\s+\d+\s+(\S+)$',
                          r.stdout)
        self.assertEqual([(n, k) for n, k, *_ in rows],
                         [('10', '0'), ('10', '1'), ('10', '2'), ('10', '10'), ('1000', '0'),
                          ('1000', '1'), ('1000', '50'), ('1000', '200'), ('1000', '1000')])
        for nodes, changed, inst, ratio, same in rows:
            self.assertEqual(same, 'yes')
            # Against the 20 instantiations of the run without recap.
            self.assertEqual(ratio, f'{int(inst) / 20:.3f}')
            if int(nodes) <= 1000:
                self.assertEqual(inst, '1')             # the first; every other one reused

    def test_standin_cost_calls(self):
        r = bench('standin-cost', '--calls', BUILD)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        pairs = re.findall(r'(?m)^  (\w+ - \w+)\s+([0-9.]+)\s+way/base ([0-9.]+)x', r.stdout)
        self.assertEqual([p for p, _, _ in pairs],
                         ['observe - plain', 'auto - hand', 'hand_auto - hand', 'hand_observe - hand'])
        for _, own, ratio in pairs:
            self.assertGreater(float(ratio), 1.0)       # recap adds calls, never removes the program's
            self.assertLessEqual(float(own), 3.0)

    def test_standin_scenarios_before_and_after(self):
        lib = os.path.join(BUILD, 'shim', 'librecap.so')
        r = bench('standin-scenarios', '--scenarios', 'cycle3', '--counts', '10,30', BUILD, lib, lib)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = re.findall(r'(?m)^\| (\w+) \| ([0-9,]+) \| ([0-9,]+) \| ([0-9,]+) \| ([0-9.]+) \|$',
                          r.stdout)
        self.assertEqual([row[0] for row in rows], ['cycle3'], r.stdout)
        alone, before, after, ratio = rows[0][1:]
        # recap's work comes on top of the program's; one library counted
        # twice gives (nearly) the same figure.
        self.assertGreater(int(before.replace(',', '')), int(alone.replace(',', '')))
        self.assertAlmostEqual(float(ratio), 1.0, delta=0.02)

    def test_standin_scenarios_bad_counts(self):
        r = bench('standin-scenarios', '--counts', '30,10', BUILD)
        self.assertEqual(r.returncode, 2)
        self.assertIn('expected two iteration counts', r.stderr)


if __name__ == '__main__':
    unittest.main()
