#!/usr/bin/env python3
"""test_upstream_lane.py - the upstream lane's logic without a GPU: JUnit
outcomes read and compared, busy sites found in recap logs and mapped to
the test that made them (Python frames, the test file's syntax tree, the
node ids pytest collected), the checks of the checkout paths, and whole
lane runs against a stand-in interpreter that plays pytest (it writes the
JUnit XML and, when LD_PRELOAD is set, the recap log a real run would).

The synthetic logs follow docs/examples/logs/*.jsonl (real GPU logs):
start, site (frames, label, python), capture, timeline, end (exact
per-site totals). Python 3 standard library only."""

import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
LANE = os.path.join(HERE, 'upstream_lane.py')
sys.path.insert(0, HERE)
import upstream_lane as lane  # noqa: E402

# A test file as the sites' Python frames name it: line numbers matter.
SOURCE = textwrap.dedent('''\
    import pytest


    def _capture(stream):          # line 4: a helper the tests call
        return stream


    class TestGraph:
        def test_loop(self):       # line 9
            for _ in range(30):
                _capture(None)     # line 11

        def test_loop_more(self):  # line 13
            _capture(None)         # line 14

        @pytest.mark.parametrize('upload', (True, False))
        def test_param(self, upload):   # line 17
            _capture(upload)       # line 18


    def test_module_level():       # line 21
        _capture(None)             # line 22
    ''')

PYTEST_FRAMES = ['/usr/lib/python3/dist-packages/_pytest/python.py:159 (pytest_pyfunc_call)',
                 '/usr/lib/python3/dist-packages/pluggy/_callers.py:103 (_multicall)']


def site_event(pid, site, frames, label=None):
    return {'event': 'site', 'pid': pid, 'site': site,
            'frames': ['libcudart.so.13+0x2082b',
                       'libcudart.so.13+0x76473 cudaStreamBeginCapture+0x1e3',
                       'libtorch_python.so+0xe6f447', 'python3.12+0x18216f'],
            'label': label or frames[0], 'mode': 'auto',
            'python': {'version': '3.12.3', 'gil': 'released', 'frames': frames},
            'nvtx': None, 'c_frames': 3}


def end_entry(site, captures, recaptured, fallbacks=0, kinds=1):
    fresh = captures - recaptured - fallbacks
    return {'site': site, 'captures': captures, 'recaptured': recaptured,
            'by_recap': recaptured, 'fallbacks': fallbacks, 'fresh': fresh, 'observed': 0,
            'nodes': 13 * captures, 'changed': 3 * recaptured, 'eligible': 3 * recaptured,
            'ineligible': 0, 'errors': 0, 'capture_us': 41121, 'instantiations': captures,
            'reused': recaptured, 'new': captures - recaptured, 'update': 0,
            'delta': recaptured, 'reuse': 0, 'update_failures': 0, 'hits': 2 * recaptured,
            'misses': 1, 'backoffs': 0, 'inst_new_us': 355.2, 'reuse_us': 511.9,
            'kept': 2, 'evicted': 0, 'shapes_seen': kinds, 'shapes_more': False,
            'shapes_counted': captures}


def write_log(path, pid, sites, end=True, fresh_reasons=None):
    """A process's log: sites = [(id, python frames, captures, recaptured
    [, kinds])], routine capture events thinned after 64 as recap writes
    them; fresh_reasons, where given, the end event's for every site."""
    lines = [{'event': 'start', 'pid': pid, 'version': '0.1.0', 'exe': '/usr/bin/python3.12',
              'driver': 13000, 'recapture_api': False, 'mode': 'auto', 'sites': 'all',
              'config': None, 'log': path, 'rank': None, 'rank_var': None,
              'world_size': None, 'stack_depth': 8, 'python_skip': None,
              'routine_events_full': 64, 'degraded': False}]
    for site, frames, captures, recaptured, *_ in sites:
        lines.append(site_event(pid, site, frames))
        for seq in range(1, captures + 1):
            if seq > 64 and seq & (seq - 1):
                continue
            path_ = 'fresh' if seq <= captures - recaptured else 'recapture'
            ev = {'event': 'capture', 'pid': pid, 'site': site, 'seq': seq, 'path': path_,
                  'reason': 'first capture at this site' if path_ == 'fresh' else None,
                  'candidates': 0 if seq == 1 else 1, 'nodes': 13, 'changed': 0,
                  'eligible': 0, 'ineligible': 0, 'errors': 0, 'us': 365.8}
            if path_ == 'recapture':
                ev['by'] = 'recap'
            lines.append(ev)
    if end:
        lines.append({'event': 'end', 'pid': pid,
                      'sites': [dict(end_entry(s, c, r, kinds=(k or [1])[0]),
                                     **({'fresh_reasons': fresh_reasons} if fresh_reasons else {}))
                                for s, _, c, r, *k in sites],
                      'totals': {}, 'unmatched': [], 'resolved': {'dlsym': 75, 'procaddr': 1320}})
    with open(path, 'a', encoding='utf-8') as f:
        for ev in lines:
            f.write(json.dumps(ev, separators=(',', ':')) + '\n')


JUNIT = '''<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="6">
<testcase classname="tests.test_graph.TestGraph" name="test_loop" time="0.5"/>
<testcase classname="tests.test_graph.TestGraph" name="test_loop_more" time="0.1">
  <failure message="AssertionError">boom</failure></testcase>
<testcase classname="tests.test_graph.TestGraph" name="test_param[True]" time="0.1">
  <skipped type="pytest.skip" message="no">skip</skipped></testcase>
<testcase classname="tests.test_graph.TestGraph" name="test_param[False]" time="0.1">
  <failure message="x">x</failure></testcase>
<testcase classname="tests.test_graph.TestGraph" name="test_param[False]" time="0.1">
  <error message="teardown">y</error></testcase>
<testcase classname="tests.test_graph" name="test_module_level" time="0.1"/>
<testcase time="20.3"/>
</testsuite></testsuites>
'''


class Temp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='test-upstream-lane-')

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def write(self, rel, text):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'w', encoding='utf-8') as f:
            f.write(text)
        return p


class JunitOutcomes(Temp):
    def test_read_junit_node_ids_and_outcomes(self):
        got = lane.read_junit(self.write('a.xml', JUNIT), 'tests/test_graph.py')
        self.assertEqual(got, {
            'tests/test_graph.py::TestGraph::test_loop': 'passed',
            'tests/test_graph.py::TestGraph::test_loop_more': 'failed',
            'tests/test_graph.py::TestGraph::test_param[True]': 'skipped',
            # failed in the call, then errored in teardown: the error stands
            'tests/test_graph.py::TestGraph::test_param[False]': 'error',
            'tests/test_graph.py::test_module_level': 'passed',
        })

    def test_collection_error_is_the_file(self):
        xml = ('<testsuites><testsuite><testcase classname="" name="tests.test_graph">'
               '<error message="collection failure">ImportError</error></testcase>'
               '</testsuite></testsuites>')
        self.assertEqual(lane.read_junit(self.write('c.xml', xml), 'tests/test_graph.py'),
                         {'tests/test_graph.py': 'error'})

    def test_missing_or_broken_junit_is_none(self):
        self.assertIsNone(lane.read_junit(self.path('absent.xml'), 'x.py'))
        self.assertIsNone(lane.read_junit(self.write('bad.xml', '<testsuites><tes'), 'x.py'))

    def test_identical_outcomes_have_no_difference(self):
        a = lane.read_junit(self.write('a.xml', JUNIT), 'tests/test_graph.py')
        b = dict(a)
        self.assertEqual(lane.compare_outcomes(a, b), [])

    def test_every_difference_is_listed(self):
        plain = {'f.py::T::a': 'passed', 'f.py::T::b': 'passed', 'f.py::T::c': 'skipped',
                 'f.py::T::d': 'failed'}
        recap = {'f.py::T::a': 'passed', 'f.py::T::b': 'failed', 'f.py::T::d': 'failed',
                 'f.py::T::e': 'error'}
        self.assertEqual(lane.compare_outcomes(plain, recap), [
            ('f.py::T::b', 'passed', 'failed'),
            ('f.py::T::c', 'skipped', None),
            ('f.py::T::e', None, 'error'),
        ])


class Sites(Temp):
    def setUp(self):
        super().setUp()
        self.test_file = self.write('tests/test_graph.py', SOURCE)
        self.index = lane.SourceIndex(self.test_file)

    def frames(self, *pairs):
        return [f'{self.test_file}:{line} ({func})' for line, func in pairs] + PYTEST_FRAMES

    def test_busy_site_share_and_quiet_site_ignored(self):
        log = self.path('recap.jsonl')
        busy = self.frames((11, 'test_loop'))
        write_log(log, 4242, [('00000000000000a1', busy, 30, 28),
                              ('00000000000000b2', self.frames((14, 'test_loop_more')), 19, 18)])
        rows = lane.site_rows([log])
        self.assertEqual([r.id for r in rows], ['00000000000000a1'])
        row = rows[0]
        self.assertEqual((row.captures, row.recaptured, row.firsts), (30, 28, 1))
        self.assertAlmostEqual(row.share, 28 / 29)
        self.assertTrue(row.exact)
        self.assertEqual(row.frames, busy)

    def test_share_counts_each_process_first_capture(self):
        # pytest's subprocesses write into the same log: two processes,
        # each with its own first capture at the site.
        log = self.path('recap.jsonl')
        frames = self.frames((11, 'test_loop'))
        write_log(log, 1, [('00000000000000a1', frames, 25, 24)])
        write_log(log, 2, [('00000000000000a1', frames, 25, 20)])
        row, = lane.site_rows([log])
        self.assertEqual((row.captures, row.recaptured, row.firsts), (50, 44, 2))
        self.assertAlmostEqual(row.share, 44 / 48)

    def test_kinds_first_seen_are_not_repeatable(self):
        log = self.path('recap.jsonl')
        write_log(log, 1, [('00000000000000a1', self.frames((11, 'test_loop')), 30, 24, 6)])
        write_log(log, 2, [('00000000000000a1', self.frames((11, 'test_loop')), 30, 20, 3)])
        row, = lane.site_rows([log])
        self.assertEqual((row.kinds, row.repeatable), (9, 51))
        self.assertAlmostEqual(row.share, 44 / 58)
        self.assertAlmostEqual(row.repeatable_share, 44 / 51)

    def test_captures_of_graphs_the_program_held_are_not_repeatable(self):
        # The whole test_cuda.py after test_graph_debugdump: PyTorch holds
        # every graph, recap leaves 28 of 30 captures to the driver for it.
        log = self.path('recap.jsonl')
        write_log(log, 1, [('00000000000000a1', self.frames((11, 'test_loop')), 30, 1)],
                  fresh_reasons={'first capture at this site': 1,
                                 'the program keeps its graphs here and copies are off '
                                 '(RECAP_COPY_HELD=off)': 28})
        row, = lane.site_rows([log])
        self.assertEqual((row.held, row.repeatable), (28, 1))
        self.assertAlmostEqual(row.repeatable_share, 1.0)
        self.assertIn('28 left to the driver because the program held', lane.describe_share(row))
        # Other reasons for a capture left to the driver still count against it.
        other = self.path('other.jsonl')
        write_log(other, 1, [('00000000000000a1', self.frames((11, 'test_loop')), 30, 1)],
                  fresh_reasons={'first capture at this site': 1,
                                 'the site\'s gate is closed': 28})
        row, = lane.site_rows([other])
        self.assertEqual((row.held, row.repeatable), (0, 29))
        self.assertAlmostEqual(row.repeatable_share, 1 / 29)
        # Held captures that were also the first of their kind are not
        # left out twice: 10 kinds, 5 held, 30 captures leave 20 (not 15).
        both = self.path('both.jsonl')
        write_log(both, 1, [('00000000000000a1', self.frames((11, 'test_loop')), 30, 10, 10)],
                  fresh_reasons={'first capture at this site': 1,
                                 'the program keeps its graphs here and copies are off '
                                 '(RECAP_COPY_HELD=off)': 5})
        row, = lane.site_rows([both])
        self.assertEqual((row.held, row.kinds, row.repeatable), (5, 10, 20))

    def test_process_without_end_event_is_not_exact(self):
        log = self.path('recap.jsonl')
        write_log(log, 7, [('00000000000000a1', self.frames((11, 'test_loop')), 40, 39)],
                  end=False)
        row, = lane.site_rows([log])
        self.assertFalse(row.exact)

    def test_site_maps_to_outermost_test_function(self):
        # innermost first: the helper, then the test that called it
        owner = lane.site_test(self.frames((5, '_capture'), (11, 'test_loop')),
                               self.test_file, self.index)
        self.assertEqual(owner, (('TestGraph',), 'test_loop'))
        owner = lane.site_test(self.frames((22, 'test_module_level')), self.test_file, self.index)
        self.assertEqual(owner, ((), 'test_module_level'))

    def test_frames_of_another_file_map_to_nothing(self):
        frames = [f'{self.path("other", "test_graph.py")}:11 (test_loop)'] + PYTEST_FRAMES
        self.assertIsNone(lane.site_test(frames, self.test_file, self.index))

    def test_node_ids_of_a_test_function(self):
        collected = {
            'tests/test_graph.py::TestGraph::test_loop',
            'tests/test_graph.py::TestGraph::test_loop_more',          # another function
            'tests/test_graph.py::TestGraph::test_param[True]',
            'tests/test_graph.py::TestGraph::test_param[False]',
            'tests/test_graph.py::TestGraphCUDA::test_loop_cuda_float32',  # PyTorch's copy
            'tests/test_graph.py::TestGraphCUDA::test_loop_more_cuda',
            'tests/test_graph.py::test_module_level',
        }
        ids = lambda owner: lane.node_ids_for(owner, 'tests/test_graph.py', collected,
                                              self.index)  # noqa: E731
        self.assertEqual(ids((('TestGraph',), 'test_loop')), [
            'tests/test_graph.py::TestGraph::test_loop',
            'tests/test_graph.py::TestGraphCUDA::test_loop_cuda_float32'])
        self.assertEqual(ids((('TestGraph',), 'test_param')), [
            'tests/test_graph.py::TestGraph::test_param[False]',
            'tests/test_graph.py::TestGraph::test_param[True]'])
        self.assertEqual(ids(((), 'test_module_level')), ['tests/test_graph.py::test_module_level'])
        # nothing collected from it: the plain node id
        self.assertEqual(lane.node_ids_for((('TestGraph',), 'test_loop'), 'tests/test_graph.py',
                                           set(), self.index),
                         ['tests/test_graph.py::TestGraph::test_loop'])

    def test_same_site_found_by_id_then_frames(self):
        rows = [lane.SiteRow('00000000000000a1', 'x', ['f.py:1 (test_a)'], 30, 29, 1, 1.0, True,
                             1, 0, 29, 1.0),
                lane.SiteRow('00000000000000c3', 'y', ['f.py:9 (test_b)'], 30, 29, 1, 1.0, True,
                             1, 0, 29, 1.0)]
        same_id = rows[0]._replace(frames=['g.py:1 (test_z)'])
        self.assertIs(lane.find_site(rows, same_id), rows[0])
        moved = rows[1]._replace(id='00000000000000ff')
        self.assertIs(lane.find_site(rows, moved), rows[1])
        self.assertIsNone(lane.find_site(rows, lane.SiteRow('00000000000000ee', 'z', ['h.py:2 (t)'],
                                                            30, 29, 1, 1.0, True, 1, 0, 29,
                                                            1.0)))


# A stand-in for `python -m pytest` (and the lane's version probes): runs the
# tests FAKE_SPEC names, the ones given by file or node id, writes the JUnit
# XML pytest would and, under LD_PRELOAD, a recap log of each test's site.
FAKE_PYTHON = r'''
import json, os, sys
sys.path.insert(0, os.environ['FAKE_HELPERS'])
from test_upstream_lane import write_log
args = sys.argv[1:]
if args[0] == '-c':
    print('8.3.5 3.12.3' if 'import pytest' in args[1] else '14.2.0')
    sys.exit(0)
assert args[:2] == ['-m', 'pytest'], args
spec = json.load(open(os.environ['FAKE_SPEC']))
with open(os.environ['FAKE_CALLS'], 'a') as f:
    f.write(json.dumps({'args': args, 'cwd': os.getcwd(),
                        'preload': os.environ.get('LD_PRELOAD'),
                        'copy_held': os.environ.get('RECAP_COPY_HELD')}) + '\n')
junit, pos, it = None, [], iter(args[2:])
for a in it:
    if a in ('-c', '--rootdir', '-p', '-k'):
        next(it)
    elif a.startswith('--junitxml='):
        junit = a.split('=', 1)[1]
    elif not a.startswith('-'):
        pos.append(a)
mode = 'recap' if os.environ.get('LD_PRELOAD') else 'plain'
alone = all('::' in p for p in pos)
chosen = [t for t in spec if any(t == p or t.startswith(p + '::') for p in pos)]
cases, sites = [], []
for t in chosen:
    path, *classes, name = t.split('::')
    classname = '.'.join([path[:-3].replace('/', '.')] + classes)
    outcome = spec[t]['outcome'].get(mode + ('_alone' if alone else ''), spec[t]['outcome'][mode])
    body = {'passed': '', 'failed': '<failure message="f">f</failure>',
            'skipped': '<skipped message="s">s</skipped>', 'error': '<error message="e">e</error>'}
    cases.append(f'<testcase classname="{classname}" name="{name}">{body[outcome]}</testcase>')
    if 'site' in spec[t]:
        frames = [f"{os.path.abspath(path)}:{spec[t]['line']} ({spec[t]['func']})"]
        recaptured = spec[t]['recaptured']['alone' if alone else 'whole']
        sites.append((spec[t]['site'], frames, spec[t]['captures'], recaptured,
                      spec[t].get('kinds', 1)))
with open(junit, 'w') as f:
    f.write('<testsuites><testsuite>' + ''.join(cases) + '</testsuite></testsuites>')
if mode == 'recap':
    write_log(os.environ['RECAP_LOG'], os.getpid(), sites)
sys.exit(1 if any('<failure' in c or '<error' in c for c in cases) else 0)
'''

TEST_REL = 'tests/cupy_tests/cuda_tests/test_graph.py'


class WholeLane(Temp):
    def setUp(self):
        super().setUp()
        self.checkout = self.path('cupy')
        for rel in ('pyproject.toml', 'tests/conftest.py'):
            self.write(os.path.join('cupy', rel), '')
        self.write(os.path.join('cupy', TEST_REL), SOURCE)
        self.fake = self.write('fake-python', f'#!{sys.executable}\n' + FAKE_PYTHON)
        os.chmod(self.fake, os.stat(self.fake).st_mode | stat.S_IXUSR)
        self.lib = self.write('lib/librecap.so', '')   # never loaded: the stand-in is Python
        self.calls = self.path('calls.jsonl')

    def lane(self, spec, *extra, projects='cupy'):
        spec_path = self.write('spec.json', json.dumps(spec))
        env = dict(os.environ, FAKE_SPEC=spec_path, FAKE_HELPERS=HERE, FAKE_CALLS=self.calls)
        env.pop('OUT', None)
        return subprocess.run(
            [sys.executable, LANE, '--projects', projects, '--cupy', self.checkout,
             '--python', self.fake, '--recap-lib', self.lib, '--work', self.path('work'),
             '--time-budget', '200', '--run-timeout', '60', *extra],
            capture_output=True, text=True, env=env, timeout=300)

    def spec(self, **over):
        t = TEST_REL + '::TestGraph::'
        spec = {
            t + 'test_loop': {'outcome': {'plain': 'passed', 'recap': 'passed'},
                              'site': '00000000000000a1', 'line': 11, 'func': 'test_loop',
                              'captures': 30, 'recaptured': {'whole': 29, 'alone': 28}},
            t + 'test_loop_more': {'outcome': {'plain': 'passed', 'recap': 'passed'},
                                   'site': '00000000000000b2', 'line': 14,
                                   'func': 'test_loop_more', 'captures': 5,
                                   'recaptured': {'whole': 4, 'alone': 4}},
            t + 'test_param[True]': {'outcome': {'plain': 'skipped', 'recap': 'skipped'}},
        }
        for key, value in over.items():
            spec[t + key].update(value)
        return spec

    def calls_made(self):
        with open(self.calls, encoding='utf-8') as f:
            return [json.loads(line) for line in f]

    def test_identical_outcomes_and_busy_site_pass(self):
        r = self.lane(self.spec())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f'PASS  cupy:{TEST_REL}  3 tests, outcomes identical', r.stdout)
        self.assertRegex(r.stdout, r'PASS  cupy:\S+ site 00000000000000a1  \S+::TestGraph::'
                                   r'test_loop: 30 captures whole, 1 kind\(s\), repeated 100% '
                                   r'of the captures after the first, 100% of the 29 of a kind '
                                   r'seen before; alone 30 captures, 1 kind\(s\), repeated 97%')
        self.assertNotIn('00000000000000b2', r.stdout)    # 5 captures: not a busy site
        self.assertRegex(r.stdout, r'00000000000000a1\s+\S+::TestGraph::test_loop\s+30/30\s+'
                                   r'1/1\s+100%/97%\s+100%/97%\s+PASS')
        self.assertIn('summary: 2 passed, 0 failed, 0 skipped', r.stdout)
        calls = self.calls_made()
        # plain, recap, then the site's test alone under recap
        self.assertEqual([c['preload'] is not None for c in calls], [False, True, True])
        self.assertEqual(calls[2]['args'][-1], f'{TEST_REL}::TestGraph::test_loop')
        self.assertTrue(all(c['cwd'] == self.checkout for c in calls))

    def test_outcome_difference_fails(self):
        r = self.lane(self.spec(test_loop_more={'outcome': {'plain': 'passed',
                                                            'recap': 'failed'}}))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f'FAIL  cupy:{TEST_REL}  outcome differs: {TEST_REL}::TestGraph::'
                      'test_loop_more: plain passed, recap failed', r.stdout)
        # run once more alone, plain and under recap, to tell flakiness
        self.assertIn(f'alone again: {TEST_REL}::TestGraph::test_loop_more: plain passed, '
                      'recap failed', r.stdout)

    def test_a_test_failing_alone_only_under_recap_fails(self):
        # Round 23: the site's share was judged alone, its test's outcome not.
        r = self.lane(self.spec(test_loop={'outcome': {'plain': 'passed', 'recap': 'passed',
                                                       'recap_alone': 'failed'}}))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f'FAIL  cupy:{TEST_REL}  alone, outcome differs: {TEST_REL}::TestGraph::'
                      'test_loop: plain passed, recap failed', r.stdout)
        calls = self.calls_made()
        # plain, recap, the test alone under recap, then alone plain
        self.assertEqual([c['preload'] is not None for c in calls], [False, True, True, False])
        self.assertEqual(calls[3]['args'][-1], f'{TEST_REL}::TestGraph::test_loop')

    def test_a_test_failing_alone_plain_too_is_said_not_judged(self):
        r = self.lane(self.spec(test_loop={'outcome': {'plain': 'passed', 'recap': 'passed',
                                                       'recap_alone': 'failed',
                                                       'plain_alone': 'failed'}}))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f'alone: {TEST_REL}::TestGraph::test_loop: failed under recap and plain '
                      'alike', r.stdout)
        self.assertNotIn('alone, outcome differs', r.stdout)

    def test_low_share_alone_fails(self):
        r = self.lane(self.spec(test_loop={'recaptured': {'whole': 29, 'alone': 20}}))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r'FAIL  cupy:\S+ site 00000000000000a1 .*alone 30 captures, '
                                   r'1 kind\(s\), repeated 69% of the captures after the first, '
                                   r'69% of the 29 of a kind seen before')

    def test_new_kinds_are_not_counted_against_the_site(self):
        # 30 captures of 6 kinds: 24 could repeat one seen before, and all
        # 24 were repeated; 24 of the 29 after the first is 83 %.
        r = self.lane(self.spec(test_loop={'kinds': 6, 'recaptured': {'whole': 24, 'alone': 24}}))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r'PASS  cupy:\S+ site 00000000000000a1 .*30 captures whole, '
                                   r'6 kind\(s\), repeated 83% of the captures after the first, '
                                   r'100% of the 24 of a kind seen before')

    def test_a_site_short_of_its_repeatable_captures_fails(self):
        r = self.lane(self.spec(test_loop={'kinds': 6, 'recaptured': {'whole': 24, 'alone': 9}}))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r'FAIL  cupy:\S+ site 00000000000000a1 .*alone 30 captures, '
                                   r'6 kind\(s\), repeated 31% of the captures after the first, '
                                   r'38% of the 24 of a kind seen before')

    def test_recap_settings_reach_only_the_runs_under_recap(self):
        r = self.lane(self.spec(), '--recap-env', 'RECAP_COPY_HELD=on')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('RECAP_COPY_HELD=on', r.stdout.splitlines()[0])
        calls = self.calls_made()
        self.assertEqual([c['copy_held'] for c in calls], [None, 'on', 'on'])

    def test_bad_recap_setting_names_what_was_expected(self):
        for bad in ('COPY_HELD=on', 'RECAP_COPY_HELD', 'RECAP_LOG=/tmp/x'):
            r = self.lane(self.spec(), '--recap-env', bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn('expected NAME=VALUE with NAME a RECAP_ setting', r.stderr)
            self.assertFalse(os.path.exists(self.calls), 'a run started despite ' + bad)

    def test_out_gets_summary_and_one_archive(self):
        out = self.path('out')
        r = self.lane(self.spec(), '--out', out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(os.listdir(out)),
                         ['upstream-lane-logs.tar.gz', 'upstream-lane-summary.txt'])
        with open(os.path.join(out, 'upstream-lane-summary.txt'), encoding='utf-8') as f:
            self.assertIn('summary: 2 passed, 0 failed, 0 skipped', f.read())


class Checkouts(Temp):
    def run_lane(self, *args):
        env = dict(os.environ)
        env.pop('OUT', None)
        return subprocess.run([sys.executable, LANE, '--work', self.path('work'), *args],
                              capture_output=True, text=True, env=env, timeout=60)

    def test_missing_checkout_is_a_skip_line(self):
        where = self.path('nowhere')
        r = self.run_lane('--projects', 'pytorch', '--pytorch', where)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f'SKIP  pytorch: no checkout at {where} (expected test/test_cuda.py; '
                      'see tests/gpu/upstream_fetch.md)', r.stdout)
        self.assertIn('summary: 0 passed, 0 failed, 1 skipped', r.stdout)

    def test_wrong_layout_names_what_was_expected(self):
        where = self.path('not-pytorch')
        os.makedirs(os.path.join(where, 'tests'))
        r = self.run_lane('--projects', 'cupy,pytorch', '--pytorch', where,
                          '--cupy', self.path('no-cupy'))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f'expected {where}/test/test_cuda.py', r.stderr)
        self.assertEqual(r.stdout, '')      # nothing ran

    def test_partial_cuda_python_checkout_names_the_missing_files(self):
        where = self.path('cuda-python')
        os.makedirs(os.path.join(where, 'cuda_core', 'tests'))
        with open(os.path.join(where, 'cuda_core', 'pytest.ini'), 'w') as f:
            f.write('[pytest]\n')
        r = self.run_lane('--projects', 'cuda-python', '--cuda-python', where)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f'expected {where}/cuda_core/tests/conftest.py', r.stderr)
        self.assertNotIn('pytest.ini,', r.stderr)   # only what is missing

    def test_unknown_project_is_a_usage_error(self):
        r = self.run_lane('--projects', 'jax')
        self.assertEqual(r.returncode, 2)
        self.assertIn('unknown project jax', r.stderr)


class TorchNames(Temp):
    """upstream_torch_names.py against a fake torch whose common_utils lacks
    a flag that its common_cuda has (as torch 2.11 against main's test_cuda.py)."""

    def test_missing_names_are_lent_flags_false_others_left_missing(self):
        internal = 'torch/testing/_internal/'
        for pkg in ('torch/', 'torch/testing/', internal):
            self.write(pkg + '__init__.py', '')
        self.write('torch/other.py', '')
        self.write(internal + 'common_utils.py', 'TEST_CUDA = True\n')
        self.write(internal + 'common_cuda.py', "TEST_CUDAMALLOCASYNC = 'from common_cuda'\n")
        test_file = self.write('test/test_x.py', textwrap.dedent('''\
            from torch.testing._internal.common_utils import (
                TEST_CUDA, TEST_CUDAMALLOCASYNC, TEST_NEW_FLAG, new_helper)
            from torch.other import TEST_OUTSIDE
            '''))
        probe = textwrap.dedent(f'''\
            import sys
            sys.path[:0] = [{self.tmp!r}, {HERE!r}]
            import upstream_torch_names as names
            names.lend_missing_names({test_file!r})
            import torch.testing._internal.common_utils as cu, torch.other as other
            print(cu.TEST_CUDA, cu.TEST_CUDAMALLOCASYNC, cu.TEST_NEW_FLAG,
                  hasattr(cu, 'new_helper'), hasattr(other, 'TEST_OUTSIDE'))
            print(len(names._lent))
            ''')
        r = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split('\n')[:2], ['True from common_cuda False False False', '2'])


if __name__ == '__main__':
    unittest.main()
