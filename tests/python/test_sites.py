"""test_sites.py - capture sites named by Python frames and NVTX ranges.

Runs ctypes_sites.py (five capture lines, driver through ctypes) and
nvtx_sites (NVTX ranges around one C call path) on the stand-in driver
with and without recap, and reads recap's logs: one site per Python line
with labels naming it, the same ids run after run and from any working
directory, GIL held (ctypes.PyDLL) or released (ctypes.CDLL) alike,
RECAP_SITES by label, labels that match nothing reported, `recap config`
reproducing a selection, python_skip, NVTX-named sites, another NVTX tool
left in charge; and the frame reader inside this interpreter (skip list,
memo hit equal to miss). Environment: RECAP_LIB, LIBCUDA, CTYPES_SITES,
RECAP_SCRIPT, PYFRAMES_PROBE, NVTX_SITES (optional), STANDIN_DIR.
"""
import ctypes
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'support'))
from preload import preload_value  # noqa: E402

HERE = os.path.dirname(os.path.abspath(os.environ['CTYPES_SITES']))
SCRIPT = os.path.basename(os.environ['CTYPES_SITES'])
LIBCUDA = os.environ['LIBCUDA']
RECAP = os.environ['RECAP_SCRIPT']
ITERATIONS = 12


def marks():
    """Line numbers of the SITE-x and HELPER marks in ctypes_sites.py."""
    found = {}
    with open(os.environ['CTYPES_SITES']) as f:
        for number, line in enumerate(f, 1):
            m = re.search(r'# (SITE-[A-E]|HELPER)$', line.rstrip())
            if m:
                found[m.group(1)] = number
    return found


MARK = marks()


def interpreters():
    """This interpreter, and the CPython versions pyenv has here (3.9 on)."""
    found = [sys.executable]
    for path in sorted(glob.glob('/root/.pyenv/versions/3.*/bin/python3')):
        version = path.split('/')[-3]
        if re.match(r'^3\.(9|1[0-3])\.', version):
            found.append(path)
    return found


def preload_env(extra=None, log=None):
    env = dict(os.environ)
    env.pop('RECAP_SITES', None)
    env.pop('RECAP_CONFIG', None)
    env.pop('NVTX_INJECTION64_PATH', None)
    env['LD_PRELOAD'] = preload_value(os.environ.get('RECAP_TEST_PRELOAD_PREFIX'),
                                      os.environ['RECAP_LIB'])
    # The interpreter itself is not instrumented: its own leaks are not ours.
    env['ASAN_OPTIONS'] = 'detect_leaks=0'
    if log:
        env['RECAP_LOG'] = log
    env.update(extra or {})
    return env


def plain_env(extra=None):
    """Without recap; in a sanitizer build the instrumented stand-in driver
    still needs the ASan runtime first."""
    env = dict(os.environ, ASAN_OPTIONS='detect_leaks=0')
    env.pop('LD_PRELOAD', None)
    prefix = os.environ.get('RECAP_TEST_PRELOAD_PREFIX')
    if prefix:
        env['LD_PRELOAD'] = prefix
    env.update(extra or {})
    return env


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class Run:
    def __init__(self, events):
        self.events = events
        self.sites = [e for e in events if e['event'] == 'site']
        ends = [e for e in events if e['event'] == 'end']
        self.end = ends[0] if ends else None
        self.warnings = [e['message'] for e in events if e['event'] == 'warning']

    def by_label(self):
        return {s['label']: s for s in self.sites}

    def modes(self):
        return {s['site']: s['mode'] for s in self.sites}


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='recap-pysites-')
        self.n = 0

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_prog(self, argv, cwd, extra=None, recap=True):
        self.n += 1
        log = os.path.join(self.tmp, f'run{self.n}.jsonl')
        env = preload_env(extra, log) if recap else plain_env(extra)
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        events = read_log(log) if recap and os.path.exists(log) else []
        return p, Run(events), log

    def ctypes_run(self, python=sys.executable, kind='cdll', cwd=HERE, script=SCRIPT,
                   extra=None, recap=True, iterations=ITERATIONS):
        return self.run_prog([python, script, LIBCUDA, kind, str(iterations)], cwd, extra, recap)

    def expected_labels(self):
        """The five default labels, keyed by mark (file relative to HERE)."""
        f = SCRIPT
        return {
            'SITE-A': re.compile(rf'^{re.escape(f)}:{MARK["SITE-A"]} \(loop\) < {re.escape(f)}:\d+ \(main\)$'),
            'SITE-B': re.compile(rf'^{re.escape(f)}:{MARK["SITE-B"]} \(loop\) < {re.escape(f)}:\d+ \(main\)$'),
            'SITE-C': re.compile(rf'^{re.escape(f)}:{MARK["SITE-C"]} \(loop\) < {re.escape(f)}:\d+ \(main\)$'),
            'SITE-D': re.compile(rf'^{re.escape(f)}:{MARK["HELPER"]} \(helper\) < {re.escape(f)}:{MARK["SITE-D"]} \(loop\)$'),
            'SITE-E': re.compile(rf'^{re.escape(f)}:{MARK["HELPER"]} \(helper\) < {re.escape(f)}:{MARK["SITE-E"]} \(loop\)$'),
        }

    def assert_five_sites(self, run, gil, context):
        self.assertEqual(len(run.sites), 5, f'{context}: {[s["label"] for s in run.sites]}')
        labels = [s['label'] for s in run.sites]
        for mark, pattern in self.expected_labels().items():
            matching = [l for l in labels if pattern.match(l)]
            self.assertEqual(len(matching), 1, f'{context}: {mark} among {labels}')
        for s in run.sites:
            self.assertEqual(s['python']['gil'], gil, context)
            self.assertTrue(s['python']['frames'][0].startswith(
                os.path.join(HERE, SCRIPT) if os.path.isabs(s['python']['frames'][0])
                else SCRIPT), s['python']['frames'])
            self.assertGreater(len(s['frames']), 0, 'C frames listed beside the Python ones')
        counts = {e['site']: e['captures'] for e in run.end['sites']}
        self.assertEqual(sorted(counts.values()), [ITERATIONS] * 5, context)
        self.assertEqual(run.warnings, [], context)


class PythonSites(Base):
    def test_one_site_per_line_every_version_both_gil_states(self):
        for python in interpreters():
            for kind, gil in (('cdll', 'released'), ('pydll', 'held')):
                context = f'{python} {kind}'
                with self.subTest(python=python, kind=kind):
                    plain, _, _ = self.ctypes_run(python, kind, recap=False)
                    under, run, _ = self.ctypes_run(python, kind)
                    self.assertEqual(plain.returncode, 0, plain.stderr)
                    self.assertEqual((under.returncode, under.stdout),
                                     (plain.returncode, plain.stdout), context)
                    self.assertIn('done', under.stdout)
                    self.assert_five_sites(run, gil, context)

    def test_same_ids_every_run_and_from_any_directory(self):
        _, first, _ = self.ctypes_run()
        _, again, _ = self.ctypes_run()
        _, elsewhere, _ = self.ctypes_run(cwd=self.tmp, script=os.path.join(HERE, SCRIPT))
        ids = sorted(s['site'] for s in first.sites)
        self.assertEqual(sorted(s['site'] for s in again.sites), ids)
        self.assertEqual(sorted(s['site'] for s in elsewhere.sites), ids)
        # Outside the working directory the label shows the path as Python has it.
        for s in elsewhere.sites:
            self.assertTrue(s['label'].startswith(os.path.join(HERE, SCRIPT) + ':'), s['label'])

    def test_memo_hits_keep_the_ids(self):
        # 60 iterations: every capture after the first at a line is a memo hit.
        _, run, _ = self.ctypes_run(iterations=60)
        self.assertEqual(len(run.sites), 5)
        self.assertEqual(sorted(e['captures'] for e in run.end['sites']), [60] * 5)

    def test_recap_sites_by_file_line_selects_exactly_one(self):
        for entry in (f'{SCRIPT}:{MARK["SITE-B"]}', f'{SCRIPT}:{MARK["SITE-D"]}'):
            with self.subTest(entry=entry):
                _, run, _ = self.ctypes_run(extra={'RECAP_SITES': entry})
                chosen = [s for s in run.sites if s['mode'] != 'observe']
                self.assertEqual(len(chosen), 1, [(s['label'], s['mode']) for s in run.sites])
                self.assertIn(entry, chosen[0]['label'])
                self.assertEqual(run.end['unmatched'], [])

    def test_recap_sites_by_full_label(self):
        _, first, _ = self.ctypes_run()
        label = next(s['label'] for s in first.sites
                     if self.expected_labels()['SITE-E'].match(s['label']))
        _, run, _ = self.ctypes_run(extra={'RECAP_SITES': label})
        chosen = [s['label'] for s in run.sites if s['mode'] != 'observe']
        self.assertEqual(chosen, [label])
        # Only the chosen site's captures changed anything.
        paths = {e['site']: e for e in run.end['sites']}
        chosen_id = next(s['site'] for s in run.sites if s['label'] == label)
        self.assertEqual(paths[chosen_id]['observed'], 0)
        self.assertEqual(sum(e['observed'] for i, e in paths.items() if i != chosen_id),
                         4 * ITERATIONS)

    def test_unmatched_label_reported_at_exit(self):
        entry = f'{SCRIPT}:{MARK["SITE-A"]}'
        p, run, _ = self.ctypes_run(extra={'RECAP_SITES': f'nosuch.py:1,{entry}',
                                           'RECAP_VERBOSE': '1'})
        self.assertEqual(run.end['unmatched'], ['nosuch.py:1'])
        self.assertTrue(any('"nosuch.py:1" matched no capture site' in w for w in run.warnings),
                        run.warnings)
        self.assertIn('nosuch.py:1', p.stderr)

    def test_recap_config_reproduces_the_selection(self):
        entry = f'{SCRIPT}:{MARK["SITE-C"]}'
        _, selected, log = self.ctypes_run(extra={'RECAP_SITES': entry})
        conf = os.path.join(self.tmp, 'recap.conf')
        c = subprocess.run([sys.executable, RECAP, 'config', log, '-o', conf],
                           capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stderr)
        text = open(conf).read()
        self.assertIn(entry, text)              # labels and frames as comments
        _, again, _ = self.ctypes_run(extra={'RECAP_CONFIG': conf})
        self.assertEqual(again.modes(), selected.modes(), text)
        self.assertEqual(list(again.modes().values()).count('observe'), 4)

    def test_recap_report_shows_labels(self):
        _, _, log = self.ctypes_run()
        r = subprocess.run([sys.executable, RECAP, 'report', '--json', log],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        labels = [row['label'] for row in json.loads(r.stdout)['sites']]
        for mark, pattern in self.expected_labels().items():
            self.assertEqual(len([l for l in labels if l and pattern.match(l)]), 1, mark)

    def test_python_skip_makes_the_program_plumbing(self):
        conf = os.path.join(self.tmp, 'skip.conf')
        with open(conf, 'w') as f:
            f.write(f'[defaults]\npython_skip = {SCRIPT}\n')
        _, run, _ = self.ctypes_run(extra={'RECAP_CONFIG': conf})
        # No program frames left: every line shares the one C call path.
        self.assertEqual(len(run.sites), 1, [s['label'] for s in run.sites])
        self.assertIsNone(run.sites[0]['label'])
        self.assertNotIn('python', run.sites[0])

    def test_sub_interpreter_falls_back_to_c_frames(self):
        """A capture in a sub-interpreter: never a crash; 3.12 on: one warning and
        C frames only."""
        inner = (f"import sys\n"
                 f"sys.argv = ['{SCRIPT}', {LIBCUDA!r}, 'cdll', '2']\n"
                 f"sys.path.insert(0, {HERE!r})\n"
                 f"import ctypes_sites\n"
                 f"ctypes_sites.main()\n")
        driver = ("import sys\n"
                  "try:\n"
                  "    import _xxsubinterpreters as interpreters\n"
                  "except ImportError:\n"
                  "    sys.exit(77)\n"
                  "try:\n"
                  "    interp = interpreters.create(isolated=False)\n"
                  "except TypeError:\n"
                  "    interp = interpreters.create()\n"
                  f"interpreters.run_string(interp, {inner!r})\n")
        for python in interpreters():
            with self.subTest(python=python):
                p, run, _ = self.run_prog([python, '-c', driver], HERE)
                if p.returncode == 77:
                    continue                      # no _xxsubinterpreters there
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertTrue(p.stdout.endswith('done\n'), p.stdout)
                self.assertEqual(len(run.sites), 1, [s['label'] for s in run.sites])
                version = subprocess.run([python, '-c', 'import sys; print(sys.version_info[1])'],
                                         capture_output=True, text=True).stdout.strip()
                if int(version) >= 12:
                    self.assertEqual(len([w for w in run.warnings if 'sub-interpreter' in w]), 1,
                                     run.warnings)
                    self.assertNotIn('python', run.sites[0])
                else:
                    # Known limit: 3.9-3.11 name it by the main interpreter's
                    # frame that entered the sub-interpreter (read safely).
                    self.assertIn('<string>:', run.sites[0]['label'])

    def test_unsupported_version_one_warning_c_frames(self):
        old = sorted(glob.glob('/root/.pyenv/versions/3.[78].*/bin/python3'))
        if not old:
            self.skipTest('no CPython 3.7 or 3.8 here')
        plain, _, _ = self.ctypes_run(old[-1], recap=False)
        p, run, _ = self.ctypes_run(old[-1])
        self.assertEqual((p.returncode, p.stdout), (plain.returncode, plain.stdout))
        warnings = [w for w in run.warnings if 'not a version whose frames recap can read' in w]
        self.assertEqual(len(warnings), 1, run.warnings)
        self.assertTrue(all('python' not in s for s in run.sites))

    def test_bad_python_skip_names_file_and_line(self):
        conf = os.path.join(self.tmp, 'bad.conf')
        with open(conf, 'w') as f:
            f.write('[defaults]\npython_skip = my lib\n')
        p, run, _ = self.ctypes_run(extra={'RECAP_CONFIG': conf})
        self.assertEqual(p.returncode, 0)
        self.assertIn(f'{conf}:2: found python_skip entry "my lib"', p.stderr)
        self.assertTrue(all(s['mode'] == 'observe' for s in run.sites))


@unittest.skipUnless(os.environ.get('NVTX_SITES'), 'NVTX headers not found at build time')
class NvtxSites(Base):
    def nvtx_run(self, extra=None, recap=True):
        return self.run_prog([os.environ['NVTX_SITES']], self.tmp, extra, recap)

    def test_ranges_name_sites(self):
        plain, _, _ = self.nvtx_run(recap=False)
        under, run, _ = self.nvtx_run()
        self.assertEqual((under.returncode, under.stdout), (plain.returncode, plain.stdout))
        labels = sorted((s['label'] or '') for s in run.sites)
        self.assertEqual(labels, ['', 'decode', 'prefill', 'step'])
        self.assertEqual(sorted(e['captures'] for e in run.end['sites']), [3, 3, 3, 3])
        for s in run.sites:
            self.assertEqual(s['nvtx'], s['label'])

    def test_recap_sites_by_range(self):
        _, run, _ = self.nvtx_run({'RECAP_SITES': 'prefill'})
        chosen = [s['label'] for s in run.sites if s['mode'] != 'observe']
        self.assertEqual(chosen, ['prefill'])

    def test_another_tool_keeps_nvtx(self):
        other = os.path.join(self.tmp, 'libother-tool.so')
        plain, _, _ = self.nvtx_run({'NVTX_INJECTION64_PATH': other}, recap=False)
        under, run, _ = self.nvtx_run({'NVTX_INJECTION64_PATH': other})
        self.assertEqual((under.returncode, under.stdout), (plain.returncode, plain.stdout))
        self.assertEqual(len(run.sites), 1)      # ranges unseen: one C call path
        self.assertEqual(len([w for w in run.warnings if 'names another tool' in w]), 1,
                         run.warnings)


class FrameReader(unittest.TestCase):
    """policy/pyframes inside this interpreter, through a ctypes-loaded probe."""

    @classmethod
    def setUpClass(cls):
        cls.released = ctypes.CDLL(os.environ['PYFRAMES_PROBE'])
        cls.held = ctypes.PyDLL(os.environ['PYFRAMES_PROBE'])
        cls.held.probe_configure(b'mine_to_skip,pkg/plumbing.py')

    def frames(self, lib, depth=8):
        out = ctypes.create_string_buffer(4096)
        h = ctypes.c_uint64()
        gil = ctypes.c_int()
        n = lib.probe_frames(depth, out, ctypes.c_size_t(len(out)), ctypes.byref(h),
                             ctypes.byref(gil))
        return n, out.value.decode().split('|'), h.value, gil.value

    def test_innermost_frames_are_these_lines(self):
        line = sys._getframe().f_lineno + 1
        n, frames, h, gil = self.frames(self.released)
        self.assertGreaterEqual(n, 2)
        self.assertTrue(frames[0].endswith(' (frames)'), frames)   # the helper above
        self.assertEqual(frames[1], f'{__file__}:{line} (test_innermost_frames_are_these_lines)')
        self.assertNotEqual(h, 0)
        self.assertEqual(gil, 2)                 # released by ctypes.CDLL

    def test_gil_held_same_frames_same_hash(self):
        (n1, f1, h1, g1), (n2, f2, h2, g2) = [self.frames(lib) for lib in (self.held, self.released)]
        self.assertEqual((n1, h1), (n2, h2))
        self.assertEqual(f1, f2)
        self.assertEqual((g1, g2), (1, 2))

    def test_depth_limits_frames(self):
        n, frames, _, _ = self.frames(self.released, depth=1)
        self.assertEqual(n, 1)
        self.assertEqual(len(frames), 1)

    def test_memo_hit_equals_miss(self):
        hit = ctypes.c_double()
        miss = ctypes.c_double()
        h = ctypes.c_uint64()
        rc = self.released.probe_bench(8, 200, ctypes.byref(hit), ctypes.byref(miss), ctypes.byref(h))
        self.assertEqual(rc, 0, 'a memo hit gave another hash than a miss')
        hits = ctypes.c_ulong()
        misses = ctypes.c_ulong()
        self.released.probe_memo_stats(ctypes.byref(hits), ctypes.byref(misses))
        self.assertGreaterEqual(hits.value, 200)
        self.assertGreaterEqual(misses.value, 200)

    def test_skip_list(self):
        skipped = self.released.probe_skipped
        skipped.argtypes = [ctypes.c_char_p]
        for path, want in (
                ('/venv/lib/python3.12/site-packages/torch/cuda/graphs.py', 1),
                ('/venv/lib/python3.12/site-packages/cupy/cuda/graph.py', 1),
                ('/venv/site-packages/cuda/core/experimental/_graph.py', 1),
                ('/venv/site-packages/cuda/bindings/driver.py', 1),
                ('/usr/lib/python3.12/contextlib.py', 1),
                ('/usr/lib/python3.12/functools.py', 1),
                ('<frozen runpy>', 1),
                ('/home/me/torchvision_app.py', 0),
                ('/home/me/mytorch/train.py', 0),
                ('/home/me/cuda/train.py', 0),
                ('train.py', 0),
                ('/srv/mine_to_skip/x.py', 1),        # configured
                ('/srv/pkg/plumbing.py', 1),
                ('/srv/pkg/plumbing.pyc', 0)):
            self.assertEqual(skipped(path.encode()), want, path)


if __name__ == '__main__':
    unittest.main()
