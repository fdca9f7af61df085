#!/usr/bin/env python3
"""test_bench.py - scripts/bench, the one benchmark command: its list of
subcommands (one line each, every one backed by its module), each
subcommand's --help, bad usage, and the two that need no GPU run on this
build's stand-in driver, printing their ratios against the run without
recap; and bench python --paired's loop (python_paired.run_ways), which
needs no GPU to show whose frees each way's time holds.

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
NAMES = ['instantiate', 'paired', 'shapes', 'python', 'steady', 'overhead', 'delta', 'node-setters', 'all',
         'standin-cost', 'standin-scenarios', 'standin-delta']


sys.path.insert(0, os.path.join(ROOT, 'scripts', 'benchmarks'))
import python_paired  # noqa: E402  (imports no torch)
import steady  # noqa: E402


class CachingPool:
    """What the paired loop needs of PyTorch's caching allocator: a
    section's graph pool, released at the section's end, reaches the
    driver's free only at the next empty_cache - torch.cuda.graph's enter,
    or the one paying_own_frees adds. Records, per free, whose section
    made it and whose pool it was."""

    def __init__(self):
        self.released = []          # sections whose pools wait for a free
        self.frees = []             # (section freeing, section whose pool)
        self.sections = 0
        self.running = None

    def empty_cache(self):
        self.frees.extend((self.running, owner) for owner in self.released)
        self.released.clear()

    def section(self, iteration, marks):
        self.sections += 1
        self.running = self.sections
        self.empty_cache()          # the enter
        marks.append(python_paired.time.perf_counter())
        self.released.append(self.running)
        marks.append(python_paired.time.perf_counter())
        return iteration


def run_pool_ways(section, iterations=30):
    return python_paired.run_ways(iterations, lambda i: None, section, lambda r: r,
                                  lambda i, got: got == i, lambda a, b: a == b)


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

    def test_steady_counts_each_driver_call_in_one_column(self):
        got = steady.classify({'cuMemAlloc_v2': 2, 'cuMemAllocAsync_ptsz': 1, 'cuMemAllocHost_v2': 4,
                               'cuMemFreeHost': 8, 'cuMemFree_v2': 16, 'cuGraphExecUpdate_v2': 32,
                               'cuGraphInstantiateWithFlags': 64, 'cuLaunchKernel': 128})
        self.assertEqual((got['alloc'], got['host'], got['free']), (3, 12, 16))
        self.assertEqual((got['update'], got['instantiate'], got['launch']), (32, 64, 0))
        self.assertEqual(got['all'], 255)

    def test_steady_reads_kept_memory_from_the_last_end_event(self):
        import json
        import tempfile
        with tempfile.NamedTemporaryFile('w', suffix='.jsonl', delete=False) as f:
            f.write(json.dumps({'event': 'end', 'sites': [{'memory_tracked': 9}]}) + '\n')
            f.write(json.dumps({'event': 'end', 'sites': [
                {'memory_tracked': 3, 'memory_kept': 2, 'memory_reused': 40, 'memory_not_kept': 1,
                 'memory_not_kept_reason': 'over the budget'},
                {'memory_tracked': 1, 'memory_kept': 1, 'memory_reused': 2}]}) + '\n')
        try:
            self.assertEqual(steady.kept_memory_line(f.name),
                             "recap's kept memory: 4 block(s) tracked, 3 kept, 42 handed back, "
                             "1 not kept (over the budget)")
        finally:
            os.unlink(f.name)

    def test_steady_names_the_parameters_setters_changed_most(self):
        lines = ['setter:3 40 8@0 0x7f0000200000 0x7f0000400000 _Z6conv2dPfS_ (with spaces)\n',
                 'setter:0 120 4@0 0x3f000000 0x3f200000 mul_kernel\n',
                 'setter:1 2 96@13 0x1 0x2 other\n']
        got = [steady.parse_setter(l) for l in lines]
        self.assertEqual(got[0], (40, '_Z6conv2dPfS_ (with spaces)', 3, '8@0', '0x7f0000200000',
                                  '0x7f0000400000'))
        line = steady.setter_changes_line(got, 40, most=2)
        self.assertEqual(line, 'parameters the per-node setters changed (longer run, per step): '
                               'mul_kernel #0 x3.00 (bytes 4@0: 0x3f000000 -> 0x3f200000); '
                               '_Z6conv2dPfS_ (with spaces) #3 x1.00 (bytes 8@0: 0x7f0000200000 '
                               '-> 0x7f0000400000)')
        self.assertIsNone(steady.setter_changes_line([], 40))

    def test_steady_ranks_the_calls_of_a_warm_step(self):
        short = {'cuStreamGetCaptureInfo_v3': 10, 'cuLaunchKernel': 40, 'cuCtxGetCurrent': 5}
        long_ = {'cuStreamGetCaptureInfo_v3': 70, 'cuLaunchKernel': 40, 'cuCtxGetCurrent': 35,
                 'cuEventRecord': 6}
        self.assertEqual(steady.busiest_calls(short, long_, 30, 2),
                         [('cuStreamGetCaptureInfo_v3', 2.0), ('cuCtxGetCurrent', 1.0)])

    def test_steady_bad_usage(self):
        r = bench('steady', '--programs', 'torch,llama')
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown program(s) ['llama']", r.stderr)
        r = bench('steady', '--lengths', '90,30')
        self.assertEqual(r.returncode, 2)
        self.assertIn('--lengths must be two increasing positive counts, got 90,30', r.stderr)

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


class PairedPython(unittest.TestCase):
    def test_each_way_pays_for_its_own_frees(self):
        # Without it, a pool is freed in the next way's section: every free
        # but the first iteration's crosses to another section.
        pool = CachingPool()
        times, phases, bad = run_pool_ways(pool.section)
        self.assertEqual(bad, 0)
        self.assertEqual(pool.sections, 90)
        self.assertEqual(len(pool.frees), 89)
        self.assertTrue(all(freeing == owner + 1 for freeing, owner in pool.frees))
        self.assertEqual({w: len(times[w]) for w in python_paired.WAYS},
                         {'self': 30, 'reuse': 30, 'off': 30})
        self.assertEqual({len(p) for w in python_paired.WAYS for p in phases[w]}, {2})
        # With it, every pool is freed in its own section, as its last step.
        pool = CachingPool()
        times, phases, bad = run_pool_ways(
            python_paired.paying_own_frees(pool.section, pool.empty_cache))
        self.assertEqual(bad, 0)
        self.assertEqual(len(pool.frees), 90)
        self.assertTrue(all(freeing == owner for freeing, owner in pool.frees))
        self.assertEqual({len(p) for w in python_paired.WAYS for p in phases[w]}, {3})

    def test_the_rotation_puts_each_way_after_the_others(self):
        # Whose pool the next enter would free: the self way follows the
        # off way two iterations in three, the off way never follows itself.
        order = []
        pool = CachingPool()
        saved = dict(python_paired.CALLS)
        try:
            for way, call in saved.items():
                python_paired.CALLS[way] = (
                    lambda call, way: lambda s, i, m: (order.append(way), call(s, i, m))[1])(
                        call, way)
            run_pool_ways(pool.section, iterations=300)
        finally:
            python_paired.CALLS.update(saved)
        after = {(a, b): 0 for a in python_paired.WAYS for b in python_paired.WAYS}
        for a, b in zip(order, order[1:]):
            after[(a, b)] += 1
        self.assertEqual(after[('off', 'self')], 200)
        self.assertEqual(after[('off', 'reuse')], 100)
        self.assertEqual(after[('off', 'off')], 0)
        self.assertEqual(after[('reuse', 'self')], 99)

    def test_check_after_runs_no_reference_between_sections_and_still_counts(self):
        # bench steady's reading: the reference (an eager run, allocating
        # outside any capture) must not fall between the loop's sections,
        # and each iteration's check sees its own prepared input.
        events, prepared = [], [None]

        def prepare(i):
            prepared[0] = i
            events.append(('prepare', i))

        def section(i, marks):
            events.append(('section', i))
            return i if i != 7 else -1       # one wrong result

        def right(i, got):
            events.append(('right', i))
            return got == i == prepared[0]

        times, _, bad = python_paired.run_ways(10, prepare, section, lambda r: r, right,
                                               lambda a, b: a == b, check_after=True)
        self.assertEqual(bad, 1)
        last_section = max(k for k, e in enumerate(events) if e[0] == 'section')
        self.assertFalse([e for e in events[:last_section] if e[0] == 'right'])
        self.assertEqual(len([e for e in events if e[0] == 'right']), 30)
        # Checked as it goes (the default), the same wrong result is found.
        _, _, bad = python_paired.run_ways(10, prepare, section, lambda r: r, right,
                                           lambda a, b: a == b)
        self.assertEqual(bad, 1)


if __name__ == '__main__':
    unittest.main()
