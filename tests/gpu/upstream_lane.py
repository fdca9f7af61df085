#!/usr/bin/env python3
"""upstream_lane.py - other projects' own CUDA-graph test files, run whole,
plain and under recap, on a machine with a GPU.

Owns: finding the upstream checkouts (PyTorch's test/test_cuda.py, CuPy's
graph tests, cuda.core's graph tests; tests/gpu/upstream_fetch.md says
where they come from), running each test file whole in one pytest process
twice (plain, then with LD_PRELOAD=librecap.so RECAP_LOG=<file>), comparing
the per-test outcomes of the two runs from pytest's JUnit XML, and, from the
recap log of the run under recap, checking every capture site of 20 or more
captures: its share of repeat captures served by recap (the end event's
recaptured / the captures after each process's first at the site, and /
the captures of a kind the process had captured there before, which is
what the verdict takes: a test sweeping optimizer variants captures kinds
that nothing could repeat), whole and with the test that owns the site run
alone. The test is found from the
site's Python frames (the outermost test_* function of the test file),
mapped to pytest node ids through the whole run's JUnit XML.

The runs under recap get recap's defaults; --recap-env RECAP_NAME=VALUE
(repeatable) sets one for them only, e.g. RECAP_COPY_HELD=on.

Prints one PASS/FAIL/SKIP line per test file and per site, a table of the
sites, and "summary: N passed, N failed, N skipped"; with --out (default
$OUT) writes upstream-lane-summary.txt and upstream-lane-logs.tar.gz there.
Exit status: 0 when nothing failed, 1 when something did, 2 when a
checkout given (or found at its default place) is not laid out as expected.

Python 3 standard library only (plus scripts/recap_logs.py of this repo,
also standard library only); pytest and the projects' packages are needed
only on the GPU machine, in the interpreter --python names.
"""

import argparse
import ast
import collections
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, 'scripts'))
import recap_logs  # noqa: E402  (this repo's log reader: the schema lives there)

FETCH_DOC = 'tests/gpu/upstream_fetch.md'
MIN_CAPTURES = 20          # sites below this are too short for a share to mean much
MIN_SHARE = 0.9            # repeat captures recap must serve, whole and alone
OUTCOMES = ('passed', 'skipped', 'failed', 'error')   # later ones win a merge

# ---- the projects ------------------------------------------------------------

Project = collections.namedtuple('Project', [
    'name',        # as on the command line and in every line printed
    'option',      # its --option and UPSTREAM_* variable
    'module',      # the package whose installed version is printed (and must import)
    'rootdir',     # pytest's rootdir and working directory, relative to the checkout
    'config',      # pytest configuration file relative to the checkout, or None
    'pythonpath',  # directories of the checkout put on PYTHONPATH (test-local packages)
    'expect',      # files the checkout must hold, relative to it
    'tests',       # glob patterns (relative to the checkout) of the files run whole
    'select',      # default -k expression, or None (every test of the file)
    'plugins',     # pytest plugins of tests/gpu loaded with -p, plain and under recap alike
])

PROJECTS = [
    # CuPy's own pytest configuration (pyproject.toml: markers, strict
    # markers, warnings as errors) is part of how its tests are meant to run.
    Project('cupy', 'cupy', 'cupy', '.', 'pyproject.toml', [],
            ['pyproject.toml', 'tests/conftest.py',
             'tests/cupy_tests/cuda_tests/test_graph.py'],
            ['tests/cupy_tests/cuda_tests/test_graph.py'], None, []),
    # cuda.core's tests import their helpers (tests/helpers, conftest) by
    # top-level name, and cuda_python_test_helpers as an installed package:
    # the checkout's copy goes on PYTHONPATH instead.
    Project('cuda-python', 'cuda_python', 'cuda.core', 'cuda_core', 'cuda_core/pytest.ini',
            ['cuda_python_test_helpers'],
            ['cuda_core/pytest.ini', 'cuda_core/tests/conftest.py',
             'cuda_core/tests/helpers/__init__.py',
             'cuda_python_test_helpers/cuda_python_test_helpers/__init__.py'],
            ['cuda_core/tests/graph/test_*.py'], None, []),
    # test_cuda.py holds far more than graphs; only its graph tests run:
    # every test whose name or class names a graph, and TestBlockStateAbsorption,
    # whose tests all capture through its cudagraphify helper. PyTorch's own
    # test/conftest.py and pytest.ini serve its CI (sharding, reruns, its own
    # XML) and are left out: pytest runs the file as it is, but for the
    # names it imports from torch.testing._internal that the installed
    # torch keeps elsewhere (upstream_torch_names.py): no copy at the
    # installed release's tag may be at hand.
    Project('pytorch', 'pytorch', 'torch', '.', None, [],
            ['test/test_cuda.py'], ['test/test_cuda.py'],
            'graph or Graph or BlockStateAbsorption', ['upstream_torch_names']),
]


def expected_text(project):
    """What a checkout must hold, as the SKIP line and the error say it."""
    return ', '.join(project.expect + [t for t in project.tests if t not in project.expect])


def check_checkouts(projects, dirs):
    """Per project: (dir, None) to run, (dir, 'SKIP ...') when there is no
    checkout; a directory that exists but lacks an expected file ends the
    lane with status 2 (printed here)."""
    plan = []
    wrong = []
    for p in projects:
        d = dirs[p.name]
        if not os.path.exists(d):
            plan.append((p, d, f'SKIP  {p.name}: no checkout at {d} (expected {expected_text(p)}; '
                               f'see {FETCH_DOC})'))
            continue
        missing = [f for f in p.expect if not os.path.isfile(os.path.join(d, f))]
        if not os.path.isdir(d) or missing:
            what = ', '.join(os.path.join(d, f) for f in (missing or p.expect))
            wrong.append(f'{p.name}: {d} is not a {p.name} checkout as this lane expects: '
                         f'expected {what} (see {FETCH_DOC})')
            continue
        if not test_files(p, d):
            wrong.append(f'{p.name}: {d} holds no test file matching '
                         f'{", ".join(os.path.join(d, t) for t in p.tests)} (see {FETCH_DOC})')
            continue
        plan.append((p, d, None))
    return plan, wrong


def test_files(project, checkout):
    """The files run whole, relative to the checkout, in a stable order."""
    found = []
    for pattern in project.tests:
        for path in sorted(glob.glob(os.path.join(checkout, pattern))):
            rel = os.path.relpath(path, checkout)
            if rel not in found:
                found.append(rel)
    return found


def checkout_version(checkout):
    """What the checkout says it is: UPSTREAM.txt (written when it was
    sourced) and PyTorch's version.txt."""
    parts = []
    info = {}
    try:
        with open(os.path.join(checkout, 'UPSTREAM.txt'), encoding='utf-8') as f:
            for line in f:
                key, sep, value = line.partition(':')
                if sep:
                    info[key.strip()] = value.strip()
    except OSError:
        pass
    if info.get('version'):
        parts.append(info['version'])
    try:
        with open(os.path.join(checkout, 'version.txt'), encoding='utf-8') as f:
            text = f.read().strip()
            if text and text != info.get('version', '').split(' ')[0]:
                parts.append(f'version.txt {text}')
    except OSError:
        pass
    where = ' '.join(x for x in (info.get('repository', '').rsplit('github.com/', 1)[-1],
                                 info.get('tag', '').split(' ')[0],
                                 info.get('commit', '')[:12]) if x)
    return (', '.join(parts) or 'version unknown') + (f' ({where})' if where else '')


# ---- JUnit XML: per-test outcomes -------------------------------------------

def node_id(classname, name, relfile):
    """pytest's node id from a JUnit testcase: pytest writes classname as the
    node id's path with '/' -> '.' and '.py' dropped, then the classes, all
    joined by '.'; name is the last part (parameters kept)."""
    module = relfile[:-3].replace('/', '.') if relfile.endswith('.py') else relfile
    if classname == module:
        return f'{relfile}::{name}'
    if classname.startswith(module + '.'):
        return '::'.join([relfile] + classname[len(module) + 1:].split('.') + [name])
    if not classname and name == module:
        return relfile              # a collection error of the whole file
    return f'{classname}::{name}' if classname else name


def read_junit(path, relfile):
    """{node id: outcome} from pytest's JUnit XML; None when the file is
    missing or not XML (the run died before pytest wrote it)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    outcomes = {}
    for case in root.iter('testcase'):
        if not case.get('name'):
            continue            # pytest leaves a bare <testcase/> for a test a SIGINT cut
        tags = {child.tag for child in case}
        outcome = ('error' if 'error' in tags else 'failed' if 'failure' in tags
                   else 'skipped' if 'skipped' in tags else 'passed')
        nid = node_id(case.get('classname', ''), case.get('name', ''), relfile)
        # A test that failed and then errored in teardown is written twice.
        if OUTCOMES.index(outcome) >= OUTCOMES.index(outcomes.get(nid, 'passed')):
            outcomes[nid] = outcome
    return outcomes


def compare_outcomes(plain, recap):
    """Every test whose outcome differs: [(node id, plain, recap)], None
    standing for a test absent from that run."""
    return [(nid, plain.get(nid), recap.get(nid))
            for nid in sorted(set(plain) | set(recap)) if plain.get(nid) != recap.get(nid)]


def outcome_counts(outcomes):
    counts = collections.Counter(outcomes.values())
    return ', '.join(f'{counts[o]} {o}' for o in OUTCOMES if counts[o]) or 'no tests'


# ---- sites: repeat-capture share and the test that owns each ---------------

FRAME_RE = re.compile(r'^(?P<file>.*):(?P<line>\d+) \((?P<func>.*)\)$')

SiteRow = collections.namedtuple('SiteRow', 'id label frames captures recaptured firsts share '
                                 'exact kinds held repeatable repeatable_share')

# The reason recap gives (its end event's fresh_reasons) for a capture it
# left to the driver because the program held every graph captured there:
# nothing released to record into (PyTorch leaks every graph captured after
# CUDAGraph.enable_debug_mode() anywhere in the process - test_cuda.py's
# test_graph_debugdump - so a whole test file may hold graphs that the same
# test run alone releases).
HELD_REASON = 'the program keeps its graphs here'


def site_rows(log_paths, min_captures=MIN_CAPTURES):
    """Every site of at least min_captures captures in the logs, with its
    repeated share: recaptured (the end event's count; recaptures recap
    recorded itself, by_recap, are among them) over the captures after each
    process's first at the site (a site's first capture in a process has
    nothing to repeat; subprocesses write into the same log).

    And the share of what could be repeated: a capture whose kind (the
    journal signature: topology, kernels, launch shapes) the process had
    not seen at the site before has nothing to repeat either. kinds sums
    each process's end event shapes_seen (at least its first capture);
    repeatable = captures - kinds. Captures whose kind recap did not learn
    (a closed gate, observed) count as repeatable, so the share is never
    flattered, and more kinds than recap tells apart (shapes_more) only
    make kinds too small.

    Nor could a capture that recap left to the driver because the program
    held the graphs it captured there (HELD_REASON, counted exactly by the
    end event): held counts them, and repeatable = captures - max(kinds,
    firsts + held)."""
    logs = recap_logs.read_logs(log_paths)
    rows = []
    for sid in logs.order:
        site = logs.sites[sid]
        if site.captures < min_captures:
            continue
        procs = [p for p, sites in logs.proc_sites.items()
                 if sid in sites and sites[sid].captures > 0]
        firsts = max(1, len(procs))
        recaptured = site.paths['recapture']
        after_first = site.captures - firsts
        share = recaptured / after_first if after_first > 0 else 0.0
        exact = all(p in logs.ends for p in procs)
        kinds = sum(max(1, logs.proc_sites[p][sid].shapes_seen or 1) for p in procs) or firsts
        held = sum(n for reason, n in site.fresh_reasons.items()
                   if reason.startswith(HELD_REASON))
        # A held capture may also be the first of its kind: the larger
        # count, not the sum, so that the share is never flattered.
        repeatable = max(0, site.captures - max(kinds, firsts + held))
        repeatable_share = recaptured / repeatable if repeatable > 0 else 1.0
        rows.append(SiteRow(sid, site.label, list(site.python_frames), site.captures,
                            recaptured, firsts, share, exact, kinds, held, repeatable,
                            repeatable_share))
    return rows


def find_site(rows_or_logs, row):
    """The same site in another run: by id (ids are stable across runs of
    the same code), else by its Python frames, else by its label."""
    for key in ('id', 'frames', 'label'):
        want = getattr(row, key)
        if not want:
            continue
        for other in rows_or_logs:
            if getattr(other, key) == want:
                return other
    return None


def parse_frame(text):
    m = FRAME_RE.match(text)
    return (m.group('file'), int(m.group('line')), m.group('func')) if m else None


class SourceIndex:
    """The test file's functions, from its syntax tree: which test function
    (inside which classes) holds a line, and which functions a class
    defines (to tell test_x_cuda, an instantiated test_x, from test_x_y)."""

    def __init__(self, path):
        self.path = path
        self.functions = []        # (classes tuple, name, first line, last line)
        self.class_defs = collections.defaultdict(set)   # classes tuple -> function names
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), filename=path)
        self._walk(tree.body, ())

    def _walk(self, body, classes):
        for node in body:
            if isinstance(node, ast.ClassDef):
                self._walk(node.body, classes + (node.name,))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.append((classes, node.name, node.lineno, node.end_lineno))
                self.class_defs[classes].add(node.name)

    def test_at(self, line):
        """(classes, name) of the module-level or class-level test_*
        function whose body holds line, or None."""
        for classes, name, first, last in self.functions:
            if name.startswith('test') and first <= line <= last:
                return classes, name
        return None


def site_test(frames, test_path, index):
    """(classes, function) of the test that made the site's captures: of its
    Python frames (innermost first) in the test file, the outermost one in
    a test function: a test calling another test's body runs under the
    outer one."""
    want = os.path.realpath(test_path)
    root = os.path.dirname(want)
    found = None
    for text in frames:
        parsed = parse_frame(text)
        if parsed is None:
            continue
        file, line, _ = parsed
        path = file if os.path.isabs(file) else os.path.join(root, file)
        if os.path.realpath(path) != want:
            continue
        owner = index.test_at(line)
        if owner is not None:
            found = owner
    return found


def class_matches(collected, source):
    """A collected class is the source class, or PyTorch's instantiation of
    it for a device type (TestFooCUDA from TestFoo)."""
    return collected == source or (collected.startswith(source)
                                   and collected[len(source):].isupper())


def owner_function(name, defined):
    """The function of the source class a collected test name comes from:
    the name itself, or the longest defined name it extends with '_...'
    (PyTorch's parametrized and per-device copies) or '[...]' (pytest's)."""
    base = name.split('[', 1)[0]
    best = None
    for d in defined:
        if base == d or base.startswith(d + '_'):
            if best is None or len(d) > len(best):
                best = d
    return best


def node_ids_for(owner, relfile, collected, index):
    """The node ids of the whole run that came from the source test
    function owner = (classes, name); the plain node id when none did."""
    classes, name = owner
    defined = index.class_defs.get(classes, set())
    out = []
    for nid in sorted(collected):
        parts = nid.split('::')
        if parts[0] != relfile or len(parts) != len(classes) + 2:
            continue
        if not all(class_matches(c, s) for c, s in zip(parts[1:-1], classes)):
            continue
        if owner_function(parts[-1], defined) == name:
            out.append(nid)
    return out or ['::'.join((relfile,) + tuple(classes) + (name,))]


# ---- running pytest -----------------------------------------------------------

Run = collections.namedtuple('Run', 'rc seconds timed_out outcomes junit stdout stderr log')


class Lane:
    def __init__(self, args):
        self.args = args
        self.start = time.monotonic()
        self.work = args.work or tempfile.mkdtemp(prefix='recap-upstream-')
        os.makedirs(self.work, exist_ok=True)
        self.lines = []
        self.counts = collections.Counter()
        self.failed = False
        self.site_table = []       # (project, file, row whole, test, row alone or reason, verdict)
        self.empty_ini = os.path.join(self.work, 'empty-pytest.ini')
        with open(self.empty_ini, 'w', encoding='utf-8') as f:
            f.write('[pytest]\n')

    def say(self, text=''):
        print(text, flush=True)
        self.lines.append(text)

    def report(self, verdict, name, detail):
        self.counts[verdict] += 1
        if verdict == 'FAIL':
            self.failed = True
        self.say(f'{verdict:<5} {name}  {detail}')

    def left(self):
        return self.args.time_budget - (time.monotonic() - self.start)

    def python_probe(self, code, *argv, extra_env=None):
        env = dict(os.environ)
        env.update(extra_env or {})
        for key in ('LD_PRELOAD', 'RECAP_LOG'):
            env.pop(key, None)
        try:
            proc = subprocess.run([self.args.python, '-c', code, *argv], capture_output=True,
                                  text=True, timeout=120, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, str(e)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ['exit %d' % proc.returncode])[-1]
            return None, tail
        return proc.stdout.strip(), None

    def run_pytest(self, project, checkout, tag, pytest_args, recap):
        """One pytest process, plain or under recap, within what is left of
        the budget; None when too little is left to start it."""
        limit = min(self.args.run_timeout, self.left())
        if limit < 15:
            return None
        base = os.path.join(self.work, tag)
        junit, out, err = base + '.xml', base + '.out', base + '.err'
        log = base + '.jsonl' if recap else None
        rootdir = os.path.normpath(os.path.join(checkout, project.rootdir))
        config = os.path.join(checkout, project.config) if project.config else self.empty_ini
        # -c and --rootdir pin the configuration and node ids to the
        # checkout, --confcutdir keeps conftest.py files above it out.
        cmd = [self.args.python, '-m', 'pytest', '-c', config, '--rootdir', rootdir,
               f'--confcutdir={checkout}', '-p', 'no:cacheprovider',
               f'--junitxml={junit}'] + sum((['-p', p] for p in project.plugins), []) + pytest_args
        env = dict(os.environ)
        for key in [k for k in env if k.startswith('RECAP_')] + ['LD_PRELOAD']:
            env.pop(key, None)
        # No __pycache__ written into the checkouts.
        env['PYTHONDONTWRITEBYTECODE'] = '1'
        paths = [os.path.join(checkout, p) for p in project.pythonpath] + ([HERE] if project.plugins else [])
        if paths:
            env['PYTHONPATH'] = os.pathsep.join(paths + ([env['PYTHONPATH']]
                                                         if env.get('PYTHONPATH') else []))
        settings = getattr(self.args, 'recap_settings', {}) if recap else {}
        if recap:
            env['LD_PRELOAD'] = self.args.recap_lib
            env['RECAP_LOG'] = log
            env.update(settings)
        with open(base + '.cmd', 'w', encoding='utf-8') as f:
            f.write(('LD_PRELOAD=%s RECAP_LOG=%s ' % (self.args.recap_lib, log) if recap else '')
                    + ''.join('%s=%s ' % kv for kv in sorted(settings.items()))
                    + ' '.join(cmd) + f'\n(cwd {rootdir})\n')
        began = time.monotonic()
        timed_out = False
        with open(out, 'wb') as fo, open(err, 'wb') as fe:
            proc = subprocess.Popen(cmd, cwd=rootdir, env=env, stdout=fo, stderr=fe,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                # SIGINT first: pytest then ends the session and still
                # writes the JUnit XML of the tests it finished.
                timed_out = True
                proc.send_signal(signal.SIGINT)
                try:
                    rc = proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
            # Children it left behind (compile workers, a hung subprocess).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        seconds = time.monotonic() - began
        return Run(rc, seconds, timed_out, None, junit, out, err, log)

    def describe(self, run, outcomes):
        state = ('timed out, ' if run.timed_out else '') + f'exit {run.rc}'
        counts = outcome_counts(outcomes) if outcomes is not None else 'no JUnit XML'
        return f'{run.seconds:.1f} s, {state}, {counts}'


def stderr_tail(path, n=8):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = [l.rstrip('\n') for l in f if not l.startswith('recap: ')]
    except OSError:
        return []
    return lines[-n:]


def summary_lines(path, n=10):
    """pytest's short summary of what failed (FAILED/ERROR lines, stdout)."""
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = [l.rstrip('\n') for l in f if l.startswith(('FAILED ', 'ERROR '))]
    except OSError:
        return []
    return lines[:n]


def pct(x):
    return f'{100 * x:.0f}%' if x is not None else '-'


def run_file(lane, project, checkout, relpath, index_no):
    """One test file: plain and recap runs compared, then its sites."""
    rootdir = os.path.normpath(os.path.join(checkout, project.rootdir))
    test_path = os.path.join(checkout, relpath)
    relfile = os.path.relpath(test_path, rootdir)
    name = f'{project.name}:{relpath}'
    select = lane.args.pytorch_k if project.name == 'pytorch' else project.select
    args = [relfile] + (['-k', select] if select else [])
    lane.say(f'  {name}: pytest {shlex.join(args)}  (cwd {rootdir})')
    tag = f'{project.name}-{index_no:02d}-{os.path.splitext(os.path.basename(relpath))[0]}'

    runs = {}
    for way in ('plain', 'recap'):
        run = lane.run_pytest(project, checkout, f'{tag}-{way}', args, way == 'recap')
        if run is None:
            lane.report('FAIL', name, f'{way} run not started: time budget of '
                                      f'{lane.args.time_budget:.0f} s spent')
            return
        outcomes = read_junit(run.junit, relfile)
        runs[way] = run._replace(outcomes=outcomes)
        lane.say(f'    {way:<5} {lane.describe(run, outcomes)}')

    plain, recap = runs['plain'], runs['recap']
    collected = set(plain.outcomes or {}) | set(recap.outcomes or {})
    problems = [f'the {way} run wrote no JUnit XML (exit {run.rc})'
                for way, run in runs.items() if run.outcomes is None]
    diffs = []
    if not problems:
        diffs = compare_outcomes(plain.outcomes, recap.outcomes)
        if any(r.timed_out for r in runs.values()):
            # A run cut short lacks the tests after it: compare what both ran.
            both = set(plain.outcomes) & set(recap.outcomes)
            diffs = [d for d in diffs if d[0] in both]
            problems.append(f'a run timed out (limit {lane.args.run_timeout:.0f} s): only the '
                            f'tests both runs finished are compared')
        if plain.outcomes.get(relfile) == 'error':
            problems.append(f'{relfile} did not import (collection error, plain run too)')
    if recap.rc < 0 and not recap.timed_out:
        problems.append(f'the run under recap died of signal {-recap.rc} (plain: exit {plain.rc})')
    for problem in problems:
        lane.report('FAIL', name, problem)
    for nid, a, b in diffs:
        lane.report('FAIL', name, f'outcome differs: {nid}: plain {a or "(absent)"}, '
                                  f'recap {b or "(absent)"}')
    if problems or diffs:
        for way, run in runs.items():
            for line in summary_lines(run.stdout) + (stderr_tail(run.stderr)
                                                     if run.rc not in (0, 1, 5) else []):
                lane.say(f'      {way} | {line}')
        retry_differences(lane, project, checkout, tag, [d[0] for d in diffs], relfile)
    else:
        lane.report('PASS', name, f'{len(plain.outcomes)} tests, outcomes identical plain and '
                                  f'under recap ({outcome_counts(recap.outcomes)})')

    check_sites(lane, project, checkout, name, tag, test_path, relfile, recap, collected)


WORSE = {'failed', 'error'}


def check_alone_outcomes(lane, project, checkout, name, tag, relfile, ids, run, outcomes):
    """A test that failed under recap run alone (`outcomes`, from `run`'s
    JUnit XML) is run alone plain too: passing there, it is a bug recap
    made (round 23's H200 lane printed PASS for a site whose test failed
    alone under recap, since only the site's share was judged). Failing
    plain alike, it is said, not judged."""
    if outcomes is None:
        lane.report('FAIL', name, f'alone under recap ({", ".join(ids)}): no JUnit XML '
                                  f'(exit {run.rc})')
        return
    bad = sorted(nid for nid, outcome in outcomes.items() if outcome in WORSE)
    if not bad:
        return
    plain = lane.run_pytest(project, checkout, f'{tag}-plain', bad, False)
    got = read_junit(plain.junit, relfile) if plain is not None else None
    for nid in bad:
        was = (got or {}).get(nid)
        if was is None:
            lane.say(f'      alone: {nid}: recap {outcomes[nid]}, plain alone not known '
                     f'({"time budget spent" if plain is None else "no JUnit XML"})')
        elif was in WORSE:
            lane.say(f'      alone: {nid}: {outcomes[nid]} under recap and plain alike')
        else:
            lane.report('FAIL', name, f'alone, outcome differs: {nid}: plain {was}, '
                                      f'recap {outcomes[nid]}')


def retry_differences(lane, project, checkout, tag, differing, relfile):
    """Tests whose outcome differed, run once more alone, plain and under
    recap: a flaky test differs alike without recap. Said, not judged."""
    ids = [i for i in differing if i.startswith(relfile + '::')][:lane.args.max_retries]
    if not ids or lane.left() < 60:
        return
    got = {}
    for way in ('plain', 'recap'):
        run = lane.run_pytest(project, checkout, f'{tag}-retry-{way}', ids, way == 'recap')
        if run is None:
            return
        got[way] = read_junit(run.junit, relfile) or {}
    for nid in ids:
        lane.say(f'      alone again: {nid}: plain {got["plain"].get(nid, "(absent)")}, '
                 f'recap {got["recap"].get(nid, "(absent)")}')


def check_sites(lane, project, checkout, name, tag, test_path, relfile, recap, collected):
    if recap.log is None or not os.path.exists(recap.log):
        lane.say(f'    no recap log from the run under recap ({recap.log})')
        return
    rows = site_rows([recap.log])
    if not rows:
        lane.say(f'    no site of {MIN_CAPTURES} or more captures')
        return
    try:
        index = SourceIndex(test_path)
    except (OSError, SyntaxError, ValueError) as e:
        index = None
        lane.say(f'    cannot read {test_path} to map sites to tests: {e}')
    alone_logs = {}
    for row in rows:
        owner = site_test(row.frames, test_path, index) if index else None
        if owner is None:
            lane.site_table.append((name, row, '(no test_* frame of this file)', None, 'FAIL'))
            lane.report('FAIL', f'{name} site {row.id}',
                        f'{row.captures} captures, not mapped to a test of {relfile} '
                        f'(label {row.label or "none"})')
            continue
        ids = tuple(node_ids_for(owner, relfile, collected, index))
        test = ids[0] if len(ids) == 1 else f'{"::".join((relfile,) + owner[0] + (owner[1],))} ' \
                                            f'({len(ids)} collected)'
        if ids not in alone_logs:
            alone_tag = f'{tag}-alone{len(alone_logs) + 1:02d}'
            run = lane.run_pytest(project, checkout, alone_tag, list(ids), True)
            alone_logs[ids] = run
            if run is not None:
                outcomes = read_junit(run.junit, relfile)
                lane.say(f'    alone {test}: {lane.describe(run, outcomes)}')
                check_alone_outcomes(lane, project, checkout, name, alone_tag, relfile, list(ids),
                                     run, outcomes)
        run = alone_logs[ids]
        if run is None:
            alone, verdict = 'not run: time budget spent', 'FAIL'
        elif not os.path.exists(run.log):
            alone, verdict = f'no recap log (exit {run.rc})', 'FAIL'
        else:
            alone = find_site(site_rows([run.log], min_captures=1), row)
            if alone is None:
                alone, verdict = 'site not seen when run alone', 'FAIL'
            else:
                verdict = 'PASS' if row.repeatable_share >= MIN_SHARE and \
                    alone.repeatable_share >= MIN_SHARE else 'FAIL'
        lane.site_table.append((name, row, test, alone, verdict))
        detail = (f'{test}: {row.captures} captures whole, {describe_share(row)}; alone '
                  + (f'{alone.captures} captures, {describe_share(alone)}'
                     if isinstance(alone, SiteRow) else alone))
        if isinstance(alone, SiteRow) and alone.id != row.id:
            detail += f' (alone its id is {alone.id})'
        if not row.exact:
            detail += ' (a process without an end event: counted from sampled events)'
        lane.report(verdict, f'{name} site {row.id}', detail)


def describe_share(row):
    held = (f', {row.held} left to the driver because the program held every graph it captured '
            f'there' if row.held else '')
    return (f'{row.kinds} kind(s), repeated {pct(row.share)} of the captures after the first, '
            f'{pct(row.repeatable_share)} of the {row.repeatable} of a kind seen before{held}')


def print_site_table(lane):
    if not lane.site_table:
        lane.say(f'sites of {MIN_CAPTURES}+ captures: none')
        return
    lane.say(f'sites of {MIN_CAPTURES}+ captures (repeated = recaptured / captures after each '
             f'process\'s first; of repeatable = recaptured / captures of a kind seen before; '
             f'PASS when the latter >= {pct(MIN_SHARE)} whole and alone):')
    head = ('site', 'test', 'captures whole/alone', 'kinds whole/alone', 'repeated whole/alone',
            'of repeatable whole/alone', 'verdict')
    table = [head]
    for name, row, test, alone, verdict in lane.site_table:
        a = alone if isinstance(alone, SiteRow) else None
        table.append((row.id, test, f'{row.captures}/{a.captures if a else "-"}',
                      f'{row.kinds}/{a.kinds if a else "-"}',
                      f'{pct(row.share)}/{pct(a.share) if a else "-"}',
                      f'{pct(row.repeatable_share)}/{pct(a.repeatable_share) if a else "-"}',
                      verdict))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    for r in table:
        lane.say('  ' + '  '.join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def write_out(lane):
    out = lane.args.out
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'upstream-lane-summary.txt'), 'w', encoding='utf-8') as f:
        f.write('\n'.join(lane.lines) + '\n')
    # At most 8 files come back from the GPU machine: every run's files in one.
    with tarfile.open(os.path.join(out, 'upstream-lane-logs.tar.gz'), 'w:gz') as tar:
        tar.add(lane.work, arcname='upstream-lane')


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description='Run PyTorch, CuPy and cuda.core graph test files whole, plain and under '
                    'recap; compare outcomes and check each busy site\'s repeat-capture share.')
    for p in PROJECTS:
        env = 'UPSTREAM_' + p.option.upper()
        ap.add_argument('--' + p.option.replace('_', '-'), dest=p.option, metavar='DIR',
                        default=os.environ.get(env) or os.path.join(REPO, '.upstream', p.name),
                        help=f'{p.name} checkout (${env}; default .upstream/{p.name})')
    ap.add_argument('--projects', default=','.join(p.name for p in PROJECTS),
                    help='comma list of projects to run, in this order (default: all)')
    ap.add_argument('--recap-lib', default=os.environ.get('RECAP_LIB') or
                    os.path.join(REPO, 'build-gpu', 'shim', 'librecap.so'),
                    help='librecap.so to preload ($RECAP_LIB; default build-gpu/shim/librecap.so)')
    ap.add_argument('--python', default=os.environ.get('PYTHON') or sys.executable,
                    help='interpreter with pytest and the projects\' packages ($PYTHON)')
    ap.add_argument('--pytorch-k', default=PROJECTS[-1].select,
                    help='pytest -k selection of test_cuda.py (default: %(default)s)')
    ap.add_argument('--time-budget', type=float, default=float(os.environ.get('TIME_BUDGET', 540)),
                    help='seconds for everything; runs that do not fit are FAIL "not run" '
                         '(default 540, or $TIME_BUDGET)')
    ap.add_argument('--run-timeout', type=float, default=300,
                    help='seconds one pytest process may take (default 300)')
    ap.add_argument('--max-retries', type=int, default=10,
                    help='differing tests run again alone, per file (default 10)')
    ap.add_argument('--recap-env', action='append', default=[], metavar='NAME=VALUE',
                    help='a RECAP_ setting for the runs under recap, repeatable (the lane '
                         'clears RECAP_* of its own environment), e.g. RECAP_COPY_HELD=on')
    ap.add_argument('--work', help='folder for the runs\' files (default: a new one in $TMPDIR)')
    ap.add_argument('--out', default=os.environ.get('OUT') or None,
                    help='write upstream-lane-summary.txt and upstream-lane-logs.tar.gz here '
                         '(default $OUT)')
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    by_name = {p.name: p for p in PROJECTS}
    names = [n.strip() for n in args.projects.split(',') if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f'upstream_lane: unknown project {", ".join(unknown)} '
              f'(known: {", ".join(by_name)})', file=sys.stderr)
        return 2
    projects = [by_name[n] for n in names]
    args.recap_settings = {}
    for item in args.recap_env:
        name, eq, value = item.partition('=')
        if not eq or not re.fullmatch(r'RECAP_[A-Z_]+', name) or name == 'RECAP_LOG':
            print(f'upstream_lane: --recap-env {item!r}: expected NAME=VALUE with NAME a RECAP_ '
                  f'setting other than RECAP_LOG (the lane names the log), e.g. '
                  f'RECAP_COPY_HELD=on', file=sys.stderr)
            return 2
        args.recap_settings[name] = value
    dirs = {p.name: os.path.abspath(getattr(args, p.option)) for p in projects}
    plan, wrong = check_checkouts(projects, dirs)
    if wrong:
        for w in wrong:
            print(f'upstream_lane: {w}', file=sys.stderr)
        return 2
    args.recap_lib = os.path.abspath(args.recap_lib)

    lane = Lane(args)
    lane.say(f'recap upstream lane: repo {REPO}, work dir {lane.work}, budget '
             f'{args.time_budget:.0f} s, per run {args.run_timeout:.0f} s'
             + ''.join(f', {k}={v}' for k, v in sorted(args.recap_settings.items())))
    runnable = [(p, d) for p, d, skip in plan if skip is None]
    for p, d, skip in plan:
        if skip:
            lane.counts['SKIP'] += 1
            lane.say(skip)
    if runnable and not os.path.isfile(args.recap_lib):
        lane.report('FAIL', 'librecap', f'{args.recap_lib} does not exist (build it: meson setup '
                                         f'build-gpu -Dtests=disabled && ninja -C build-gpu)')
        runnable = []
    elif runnable and re.search(r'[\s:]', args.recap_lib):
        # The loader splits LD_PRELOAD at spaces and colons.
        lane.report('FAIL', 'librecap', f'{args.recap_lib}: a space or colon in the path '
                                         'cannot be preloaded')
        runnable = []
    if runnable:
        version, problem = lane.python_probe('import pytest, sys; print(pytest.__version__, '
                                             'sys.version.split()[0])')
        if version is None:
            for p, d in runnable:
                lane.report('SKIP', p.name, f'pytest not importable by {args.python}: {problem}')
            runnable = []
        else:
            pv, pyv = version.split()
            lane.say(f'python {pyv} ({args.python}), pytest {pv}, librecap {args.recap_lib}')
    for p, d in runnable:
        extra = {'PYTHONPATH': os.pathsep.join(os.path.join(d, x) for x in p.pythonpath)} \
            if p.pythonpath else None
        installed, problem = lane.python_probe(
            'import importlib, sys\n'
            'm = importlib.import_module(sys.argv[1])\n'
            'v = getattr(m, "__version__", None)\n'
            'if v is None:\n'
            '    import importlib.metadata as md\n'
            '    v = md.version(sys.argv[1].replace(".", "-"))\n'
            'g = getattr(getattr(m, "version", None), "git_version", None)\n'
            'print(v + (" (git %s)" % g[:12] if isinstance(g, str) else ""))\n',
            p.module, extra_env=extra)
        if installed is None:
            lane.report('SKIP', p.name, f'{p.module} not importable by {args.python}: {problem}')
            continue
        files = test_files(p, d)
        lane.say(f'{p.name}: installed {p.module} {installed}; checkout {d}: '
                 f'{checkout_version(d)}')
        select = args.pytorch_k if p.name == 'pytorch' else p.select
        lane.say(f'  selection: {len(files)} file(s), '
                 + (f'tests matching -k "{select}"' if select else 'every test'))
        for i, rel in enumerate(files, 1):
            run_file(lane, p, d, rel, i)
    print_site_table(lane)
    lane.say(f'elapsed {time.monotonic() - lane.start:.0f} s; files in {lane.work}')
    lane.say(f'summary: {lane.counts["PASS"]} passed, {lane.counts["FAIL"]} failed, '
             f'{lane.counts["SKIP"]} skipped')
    write_out(lane)
    return 1 if lane.failed else 0


if __name__ == '__main__':
    sys.exit(main())
