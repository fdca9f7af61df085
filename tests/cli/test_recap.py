#!/usr/bin/env python3
"""test_recap.py - end-to-end tests of the recap command: `run` sets the
environment and preloads the library it finds, `report` counts and merges
logs (malformed lines included), `config` writes a file the real parser
accepts, with modes chosen from what happened.

Environment (set by meson): RECAP_SCRIPT, RECAP_FAKE_LIB, RECAP_FAKE_OTHER,
RECAP_CONF_CHECK."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'support'))
from preload import preload_value, preloadable  # noqa: E402

SCRIPT = os.environ['RECAP_SCRIPT']
FAKE_LIB = os.environ['RECAP_FAKE_LIB']
FAKE_OTHER = os.environ['RECAP_FAKE_OTHER']
CONF_CHECK = os.environ['RECAP_CONF_CHECK']

SHOW_ENV = ('import os, json; print(json.dumps({k: v for k, v in os.environ.items() '
            'if k.startswith("RECAP_") or k == "LD_PRELOAD"}))')

A = '00000000000000aa'
B = '00000000000000bb'
C = '00000000000000cc'
D = '00000000000000dd'


def recap(*args, env=None, script=SCRIPT, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith('RECAP_')}
    full_env.pop('LD_PRELOAD', None)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=60)


def ev(event, **kw):
    d = {'event': event, 'pid': kw.pop('pid', 100)}
    d.update(kw)
    return json.dumps(d)


def capture(site, path, seq=1, reason=None, pid=100, eligible=0, ineligible=0, us=50.0):
    return ev('capture', pid=pid, site=site, seq=seq, path=path, reason=reason, nodes=10,
              changed=eligible + ineligible, eligible=eligible, ineligible=ineligible,
              errors=0, us=us)


def inst(site, how, us, reason=None, pid=100, seq=1):
    return ev('instantiate', pid=pid, site=site, seq=seq, how=how, reason=reason, us=us)


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='recap-cli-')

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, lines, raw_tail=b''):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            for line in lines:
                f.write(line.encode() + b'\n')
            f.write(raw_tail)
        return path


class Help(unittest.TestCase):
    def test_every_command_has_help(self):
        for args, words in ((['--help'], ['run', 'report', 'config']),
                            (['run', '--help'], ['--sites', '--mode', '--log', '--config',
                                                 '--verbose', '--self-record', 'PROG',
                                                 'librecap.so']),
                            (['report', '--help'], ['LOG', 'fallbacks', 'estimate',
                                                    'Malformed']),
                            (['config', '--help'], ['[site ID]', 'observe', 'frames'])):
            r = recap(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            for w in words:
                self.assertIn(w, r.stdout, f'{args}: {w}')

    def test_version_is_configured(self):
        r = recap('--version')
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r'^recap \d+\.\d+')
        self.assertNotIn('@', r.stdout)

    def test_no_command(self):
        r = recap()
        self.assertEqual(r.returncode, 2)
        self.assertIn('run', r.stdout)


class Run(Base):
    def run_env(self, *options, env=None):
        r = recap('run', '--library', FAKE_LIB, *options, '--', sys.executable, '-c', SHOW_ENV,
                  env=env, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_options_become_variables(self):
        conf = self.write('r.conf', ['[defaults]'])
        got = self.run_env('--sites', 'decode,' + A, '--mode', 'update', '--log', 'logs/r-%r.jsonl',
                           '--config', 'r.conf', '--verbose', '--self-record', 'off')
        self.assertEqual(got['RECAP_SITES'], 'decode,' + A)
        self.assertEqual(got['RECAP_MODE'], 'update')
        self.assertEqual(got['RECAP_LOG'], os.path.join(os.path.realpath(self.dir),
                                                        'logs/r-%r.jsonl'))
        self.assertEqual(os.path.realpath(got['RECAP_CONFIG']), os.path.realpath(conf))
        self.assertEqual(got['RECAP_VERBOSE'], '1')
        self.assertEqual(got['RECAP_SELF_RECORD'], 'off')
        self.assertEqual(os.path.realpath(got['LD_PRELOAD']), os.path.realpath(FAKE_LIB))

    def test_nothing_set_unless_asked(self):
        got = self.run_env()
        self.assertEqual(set(got), {'LD_PRELOAD'})
        got = self.run_env('--log', 'stderr')
        self.assertEqual(got['RECAP_LOG'], 'stderr')

    def test_existing_preload_kept_after_ours(self):
        # Our library already named there is not named twice (only where its
        # path can be named in LD_PRELOAD at all).
        other = preloadable(FAKE_OTHER)
        again = '' if preloadable(FAKE_LIB) != FAKE_LIB else ' ' + FAKE_LIB
        got = self.run_env(env={'LD_PRELOAD': other + again})
        ours, *rest = got['LD_PRELOAD'].split(':')
        self.assertEqual(os.path.realpath(ours), os.path.realpath(FAKE_LIB))
        self.assertEqual(rest, [other])

    def test_program_arguments_untouched_and_status_passed_on(self):
        r = recap('run', '--library', FAKE_LIB, '--', sys.executable, '-c',
                  'import sys; print(sys.argv[1:]); sys.exit(7)', '--', '--mode', 'x')
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertEqual(r.stdout.strip(), "['--', '--mode', 'x']")

    def test_without_double_dash(self):
        r = recap('run', '--library', FAKE_LIB, '--mode', 'observe', sys.executable, '-c',
                  SHOW_ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)['RECAP_MODE'], 'observe')

    def test_errors(self):
        r = recap('run', '--library', FAKE_LIB, '--', 'no-such-program-recap-test')
        self.assertEqual(r.returncode, 127)
        self.assertIn('recap: no-such-program-recap-test: command not found', r.stderr)
        r = recap('run', '--library', FAKE_LIB, '--mode', 'fast', '--', 'true')
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid choice: 'fast'", r.stderr)
        r = recap('run', '--library', FAKE_LIB, '--config', '/no/such.conf', '--', 'true')
        self.assertEqual(r.returncode, 2)
        self.assertIn('recap: --config /no/such.conf: no such file', r.stderr)
        r = recap('run', '--library', '/no/librecap.so', '--', 'true')
        self.assertIn('recap: --library /no/librecap.so: no such file', r.stderr)
        r = recap('run', '--library', FAKE_LIB, '--')
        self.assertEqual(r.returncode, 2)
        self.assertIn('no program given', r.stderr)

    def test_finds_library_in_build_tree(self):
        os.makedirs(os.path.join(self.dir, 'build', 'scripts'))
        os.makedirs(os.path.join(self.dir, 'build', 'shim'))
        script = os.path.join(self.dir, 'build', 'scripts', 'recap')
        shutil.copy(SCRIPT, script)
        for helper in os.listdir(os.path.dirname(SCRIPT)):   # its helper modules
            if helper.endswith('.py'):
                shutil.copy(os.path.join(os.path.dirname(SCRIPT), helper), os.path.dirname(script))
        lib = os.path.join(self.dir, 'build', 'shim', 'librecap.so')
        r = recap('run', '--', sys.executable, '-c', SHOW_ENV, script=script)
        self.assertEqual(r.returncode, 2)
        self.assertIn('cannot find librecap.so', r.stderr)
        self.assertIn(os.path.realpath(lib), r.stderr)
        shutil.copy(FAKE_LIB, lib)
        r = recap('run', '--', sys.executable, '-c', SHOW_ENV, script=script)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)['LD_PRELOAD'], os.path.realpath(lib))

    # A library below a path with a space and a colon: the dynamic loader
    # would split LD_PRELOAD there and run the program without it.
    MAPPED = ('import os, sys; print(json.dumps([os.environ["LD_PRELOAD"], '
              'sys.argv[1] in open("/proc/self/maps").read()]))')

    def odd_library(self):
        folder = os.path.join(self.dir, 'a b:c')
        os.makedirs(folder)
        lib = os.path.join(folder, 'librecap.so')
        shutil.copy(FAKE_LIB, lib)
        return lib

    def test_library_below_a_path_with_space_and_colon_is_preloaded(self):
        lib = self.odd_library()
        runtime = os.path.join(self.dir, 'runtime')
        os.mkdir(runtime, 0o700)
        for attempt in range(2):          # the second run reuses the link
            r = recap('run', '--library', lib, '--', sys.executable, '-c',
                      'import json; ' + self.MAPPED, os.path.realpath(lib),
                      env={'XDG_RUNTIME_DIR': runtime, 'LD_PRELOAD': preloadable(FAKE_OTHER)})
            self.assertEqual(r.returncode, 0, r.stderr)
            preload, loaded = json.loads(r.stdout)
            first, *rest = preload.split(':')
            self.assertEqual(rest, [preloadable(FAKE_OTHER)])
            self.assertFalse(any(c in first for c in ' \t\n'), first)
            self.assertEqual(os.path.dirname(first),
                             os.path.join(runtime, f'recap-preload-{os.getuid()}'))
            self.assertEqual(os.path.realpath(first), os.path.realpath(lib))
            self.assertTrue(loaded, 'the library was not preloaded')
        folder = os.path.dirname(first)
        self.assertEqual(os.stat(folder).st_mode & 0o777, 0o700)
        self.assertEqual(len(os.listdir(folder)), 1)

    def test_unsafe_link_folder_refused_and_program_not_run(self):
        lib = self.odd_library()
        for make in ('writable', 'symlink', 'file'):
            runtime = os.path.join(self.dir, 'runtime-' + make)
            os.mkdir(runtime, 0o700)
            folder = os.path.join(runtime, f'recap-preload-{os.getuid()}')
            if make == 'writable':
                os.mkdir(folder)
                os.chmod(folder, 0o777)
            elif make == 'symlink':
                os.symlink(self.dir, folder)
            else:
                open(folder, 'w').close()
            r = recap('run', '--library', lib, '--', sys.executable, '-c', 'print("ran")',
                      env={'XDG_RUNTIME_DIR': runtime})
            self.assertEqual(r.returncode, 2, make)
            self.assertEqual(r.stdout, '', make)
            self.assertIn(f'recap: cannot preload {lib}: the dynamic loader splits LD_PRELOAD',
                          r.stderr)
            self.assertIn(folder, r.stderr)


def two_rank_logs(t):
    rank0 = t.write('r0.jsonl', [
        ev('start', pid=100, version='0.1.0', exe='/bin/app', driver=13030, recapture_api=True,
           mode='auto', sites='all', config=None, log='r0.jsonl', stack_depth=8),
        ev('site', pid=100, site=A, frames=['app+0x10 step+0x10', 'app+0x20 main+0x5'],
           label='decode', mode='auto'),
        capture(A, 'fresh', 1, reason='first capture'),
        inst(A, 'new', 100.0),
        capture(A, 'recapture', 2, eligible=3),
        inst(A, 'delta', 10.0),
        capture(A, 'recapture', 3, eligible=2, ineligible=1),
        inst(A, 'update', 10.0),
        capture(A, 'fallback', 4, reason='topology mismatch'),
        inst(A, 'new', 300.0),
        ev('site', pid=100, site=B, frames=['app+0x30'], label=None, mode='auto'),
        capture(B, 'recapture', 1),
        inst(B, 'reuse', 5.0),
        ev('warning', pid=100, site=None, message='driver lacks recapture'),
        ev('end', pid=100, sites=[], totals={}),
    ])
    rank1 = t.write('r1.jsonl', [
        ev('start', pid=200, version='0.1.0', exe='/bin/app', driver=13030, recapture_api=True,
           mode='auto', sites='all', config=None, log='r1.jsonl', stack_depth=8),
        ev('site', pid=200, site=A, frames=['app+0x10 step+0x10'], label='decode', mode='auto'),
        capture(A, 'recapture', 1, pid=200),
        inst(A, 'reuse', 10.0, pid=200),
        capture(B, 'observe', 1, pid=200),
        inst(B, 'update', 5.0, pid=200),
        'not json at all',
        json.dumps(['an', 'array']),
        ev('capture', pid=200, site='XYZ', seq=1, path='recapture'),
        ev('capture', pid=200, site=B, seq=2, path='sideways'),
        ev('instantiate', pid=200, site=B, seq=2, how='new', us='fast'),
    ], raw_tail=b'{"event":"capture","pid":200,"si')
    return rank0, rank1


class Report(Base):
    def test_merges_ranks_and_counts(self):
        r0, r1 = two_rank_logs(self)
        r = recap('report', '--json', r0, r1)
        self.assertEqual(r.returncode, 0, r.stderr)
        data = json.loads(r.stdout)
        sites = {s['site']: s for s in data['sites']}
        a, b = sites[A], sites[B]
        self.assertEqual((a['captures'], a['recaptured'], a['fallbacks'], a['fresh'],
                          a['observed']), (5, 3, 1, 1, 0))
        self.assertEqual((a['eligible'], a['ineligible']), (5, 1))
        self.assertEqual(a['label'], 'decode')
        self.assertEqual(a['reused'], 3)
        self.assertEqual(a['instantiations'], 5)
        # A: mean new = (100 + 300) / 2 = 200; 3 reuses cost 30 -> 570
        self.assertAlmostEqual(a['saved_us'], 570.0)
        # B: no new of its own -> mean over all sites (200); 2 reuses cost 10 -> 390
        self.assertEqual((b['captures'], b['recaptured'], b['observed']), (2, 1, 1))
        self.assertAlmostEqual(b['saved_us'], 390.0)
        t = data['totals']
        self.assertEqual((t['captures'], t['reused']), (7, 5))
        self.assertAlmostEqual(t['saved_us'], 960.0)
        self.assertEqual(data['malformed_lines'], 6)
        self.assertEqual(data['processes'], 2)
        self.assertEqual(data['warnings'], 1)
        self.assertEqual(data['sites'][0]['site'], A, 'sorted by captures')

    def test_table(self):
        r0, r1 = two_rank_logs(self)
        r = recap('report', '--wide', r0, r1)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        # Column groups above the columns.
        self.assertEqual(lines[0].split()[:4], ['captures', '-' * 21, 'not', 'recaptured'])
        # No rank variable in these logs: the pid stands for the rank.
        self.assertTrue(lines[1].split()[:4] == ['SITE', 'LABEL', 'RANK', 'CAPTURES'], lines[1])
        rows_a = [line.split() for line in lines if line.startswith(A)]
        self.assertEqual([row[:5] for row in rows_a], [[A, 'decode', 'pid:100', '4', '2'],
                                                       [A, 'decode', 'pid:200', '1', '1'],
                                                       [A, 'decode', 'all', '5', '3']])
        saved = lines[1].split().index('SAVED_MS')
        self.assertEqual(rows_a[-1][saved], '0.570')
        totals = [line.split() for line in lines if line.startswith('total')]
        self.assertEqual([t[:3] for t in totals], [['total', 'pid:100', '5'],
                                                   ['total', 'pid:200', '2'],
                                                   ['total', 'all', '7']])
        self.assertEqual(totals[-1][saved - 1], '0.960', 'no label in the totals')
        self.assertIn('2 process(es) without a rank variable, shown by pid', r.stdout)
        self.assertIn('6 malformed line(s) skipped; first at ' + r1 + ':7: not a JSON line',
                      r.stdout)
        self.assertIn('1 process(es) have no end event', r.stdout)
        self.assertIn('1 x warning: driver lacks recapture', r.stdout)

    def test_captures_recap_recorded_itself(self):
        by_recap = json.loads(capture(C, 'recapture', seq=2))
        by_recap['by'] = 'recap'
        by_driver = json.loads(capture(C, 'recapture', seq=3))
        by_driver['by'] = 'driver'
        log = self.write('x.jsonl', [capture(C, 'fresh'), json.dumps(by_recap),
                                     json.dumps(by_driver), capture(C, 'recapture', seq=4)])
        r = recap('report', '--json', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        data = json.loads(r.stdout)
        self.assertEqual(data['malformed_lines'], 0)
        site = data['sites'][0]
        self.assertEqual((site['captures'], site['recaptured'], site['by_recap']), (4, 3, 1))
        self.assertIn('BY_RECAP', recap('report', '--wide', log).stdout.splitlines()[1])

    def test_unknown_saving_and_unreadable_log(self):
        log = self.write('x.jsonl', [capture(C, 'recapture'), inst(C, 'update', 3.0)])
        r = recap('report', '--json', log, os.path.join(self.dir, 'missing.jsonl'))
        self.assertEqual(r.returncode, 1)
        self.assertIn('recap: cannot read', r.stderr)
        data = json.loads(r.stdout)
        self.assertIsNone(data['sites'][0]['saved_us'])
        self.assertIsNone(data['totals']['saved_us'])
        r = recap('report', '--wide', log)
        self.assertIn(' -', r.stdout.splitlines()[2])

    def test_empty_log_and_stdin(self):
        empty = self.write('empty.jsonl', [])
        r = recap('report', empty)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('total', r.stdout)
        p = subprocess.run([sys.executable, SCRIPT, 'report', '--json', '-'],
                           input=capture(D, 'fresh') + '\n', capture_output=True, text=True)
        self.assertEqual(json.loads(p.stdout)['totals']['fresh'], 1)


def start(pid, rank=None, world_size=None, rank_var='RANK'):
    return ev('start', pid=pid, version='0.1.0', exe='/bin/app', driver=13000,
              recapture_api=False, mode='auto', sites='all', config=None, log='x',
              rank=rank, rank_var=rank_var if rank is not None else None,
              world_size=world_size, stack_depth=8)


def end(pid, *sites):
    """An end event; each site is (id, captures, new, new_us, updates, update_us)."""
    entries = [{'site': s, 'captures': c, 'recaptured': 0, 'fallbacks': 0, 'fresh': c,
                'observed': 0, 'instantiations': n + u, 'reused': u, 'new': n, 'update': u,
                'delta': 0, 'reuse': 0, 'update_failures': 0, 'inst_new_us': nus,
                'reuse_us': uus} for s, c, n, nus, u, uus in sites]
    return ev('end', pid=pid, sites=entries, totals={})


class RankReport(Base):
    """Logs of several ranks give one table: per site a row per rank and an
    `all` row (where two ranks or more have the site), then totals per rank
    and over all ranks."""

    def three_ranks(self, world_size=4):
        # Site A on every rank, B on ranks 0 and 2, C only on rank 1 (counted
        # from its events: its end event does not list it); rank 3 left no log.
        return [
            self.write('recap-0.jsonl', [start(300, 0, world_size),
                                         end(300, (A, 10, 1, 100.0, 9, 9.0),
                                             (B, 4, 1, 50.0, 3, 3.0))]),
            self.write('recap-1.jsonl', [start(301, 1, world_size),
                                         end(301, (A, 20, 2, 400.0, 18, 36.0))] +
                       [capture(C, 'fresh', pid=301), inst(C, 'new', 30.0, pid=301)]),
            self.write('recap-2.jsonl', [start(302, 2, world_size),
                                         end(302, (A, 5, 1, 100.0, 4, 4.0),
                                             (B, 6, 1, 50.0, 5, 5.0))]),
        ]

    def test_json_rows_per_rank_and_totals(self):
        logs = self.three_ranks()
        # The order of the logs on the command line does not matter.
        r = recap('report', '--json', *reversed(logs))
        self.assertEqual(r.returncode, 0, r.stderr)
        data = json.loads(r.stdout)
        rows = {(x['site'], x['rank']): x for x in data['by_rank']}
        self.assertEqual(sorted(rows), [(A, '0'), (A, '1'), (A, '2'), (B, '0'), (B, '2'),
                                        (C, '1')])
        self.assertEqual(rows[(A, '1')]['captures'], 20)
        self.assertEqual(rows[(A, '1')]['reused'], 18)
        # Each rank's saving uses its own mean 'new' time: 18 x 200 - 36.
        self.assertAlmostEqual(rows[(A, '1')]['saved_us'], 3564.0)
        self.assertAlmostEqual(rows[(A, '0')]['saved_us'], 9 * 100 - 9.0)
        self.assertEqual((rows[(C, '1')]['captures'], rows[(C, '1')]['reused']), (1, 0))
        sites = {x['site']: x for x in data['sites']}
        self.assertEqual(sites[A]['captures'], 35, 'same site id on every rank: one site')
        self.assertEqual(sites[A]['reused'], 31)
        self.assertAlmostEqual(sites[A]['saved_us'], 891.0 + 3564.0 + 396.0)
        self.assertEqual(sites[B]['captures'], 10)
        per_rank = {t['rank']: t for t in data['rank_totals']}
        self.assertEqual({k: t['captures'] for k, t in per_rank.items()},
                         {'0': 14, '1': 21, '2': 11})
        self.assertEqual(data['totals']['captures'], 46)
        self.assertAlmostEqual(data['totals']['saved_us'],
                               sum(t['saved_us'] for t in per_rank.values()))
        ranks = {x['rank']: x for x in data['ranks']}
        self.assertEqual(ranks['1']['pids'], [301])
        self.assertEqual(ranks['2']['world_size'], 4)
        self.assertEqual(ranks['0']['rank_var'], 'RANK')

    def test_table_has_rank_column_and_totals(self):
        r = recap('report', '--wide', *self.three_ranks())
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[1].split()[:4], ['SITE', 'LABEL', 'RANK', 'CAPTURES'])
        body = [line.split() for line in lines[2:] if line.strip()]
        # C is rank 1's alone: its row is the site's total, no `all` row.
        self.assertEqual([(row[0], row[2], row[3]) for row in body[:8]], [
            (A, '0', '10'), (A, '1', '20'), (A, '2', '5'), (A, 'all', '35'),
            (B, '0', '4'), (B, '2', '6'), (B, 'all', '10'),
            (C, '1', '1')])
        self.assertTrue(set(lines[10]) <= {'-', ' '}, lines[10])
        self.assertEqual([row[:3] for row in body[9:13]], [
            ['total', '0', '14'], ['total', '1', '21'], ['total', '2', '11'],
            ['total', 'all', '46']])
        self.assertIn('ranks 0, 1, 2 of world size 4 (from RANK)', r.stdout)
        self.assertIn('note: no log from rank(s) 3', r.stdout)

    def test_world_sizes_disagree_and_rank_logged_twice(self):
        logs = [self.write('a.jsonl', [start(400, 0, 2), end(400, (A, 3, 1, 10.0, 2, 2.0))]),
                # rank 0 again, restarted: a second process appends to the same file
                self.write('b.jsonl', [start(401, 1, 3, rank_var='OMPI_COMM_WORLD_RANK'),
                                       end(401, (A, 1, 1, 10.0, 0, 0.0))]),
                self.write('c.jsonl', [start(402, 0, 2), end(402, (A, 2, 1, 10.0, 1, 1.0))])]
        r = recap('report', '--json', *logs)
        data = json.loads(r.stdout)
        rows = {x['rank']: x for x in data['by_rank']}
        self.assertEqual(rows['0']['captures'], 5, 'two processes of rank 0 summed')
        r = recap('report', *logs)
        self.assertIn('world sizes disagree: 2, 3', r.stdout)
        self.assertIn('(from OMPI_COMM_WORLD_RANK, RANK)', r.stdout)
        self.assertIn('note: rank 0 was logged by 2 processes (pids 400, 402)', r.stdout)

    def test_ranks_and_pids_mixed(self):
        # A forked child without its own rank variable cannot be told from
        # its parent's rank; a process of another program without one shows
        # by pid, after the ranks.
        logs = [self.write('r.jsonl', [start(500, 0, 1), end(500, (A, 2, 1, 10.0, 1, 1.0))]),
                self.write('p.jsonl', [start(77), end(77, (A, 4, 1, 10.0, 3, 3.0))])]
        r = recap('report', '--wide', *logs)
        rows = [line.split()[:4] for line in r.stdout.splitlines() if line.startswith(A)]
        self.assertEqual(rows, [[A, '-', '0', '2'], [A, '-', 'pid:77', '4'],
                                [A, '-', 'all', '6']])
        self.assertIn('1 process(es) without a rank variable, shown by pid', r.stdout)

    def test_forked_processes_sharing_one_log(self):
        # RECAP_LOG without %p or %r: a parent and its forked child append
        # to one file; each is its own row, by pid.
        log = self.write('shared.jsonl', [start(10), start(11),
                                          end(11, (A, 3, 1, 10.0, 2, 2.0)),
                                          end(10, (A, 5, 1, 10.0, 4, 4.0))])
        data = json.loads(recap('report', '--json', log).stdout)
        self.assertEqual([(r['rank'], r['captures']) for r in data['by_rank']],
                         [('pid:10', 5), ('pid:11', 3)])
        self.assertEqual(data['sites'][0]['captures'], 8)
        self.assertEqual([r['pids'] for r in data['ranks']], [[10], [11]])

    def test_one_log_keeps_the_plain_table(self):
        r = recap('report', '--wide', self.three_ranks()[0])
        self.assertEqual(r.stdout.splitlines()[1].split()[:3], ['SITE', 'LABEL', 'CAPTURES'])
        self.assertIn('ranks 0 of world size 4 (from RANK)', r.stdout)


class RealRanks(Base):
    """Two processes of the scenario program on the stand-in driver under
    librecap, one log each through RECAP_LOG=recap-%r.jsonl, then one report."""

    def run_rank(self, env, iterations):
        full = {k: v for k, v in os.environ.items()
                if not k.startswith(('RECAP_', 'STANDIN_', 'SCENARIO_'))
                and k not in ('LD_PRELOAD', 'RANK', 'WORLD_SIZE', 'OMPI_COMM_WORLD_RANK',
                              'PMI_RANK', 'PMIX_RANK', 'SLURM_PROCID')}
        full['LD_PRELOAD'] = preload_value(os.environ.get('RECAP_TEST_PRELOAD_PREFIX'),
                                           os.environ['RECAP_LIB'])
        full['RECAP_LOG'] = os.path.join(self.dir, 'recap-%r.jsonl')
        full.update(env)
        return subprocess.Popen([os.environ['SCENARIO_BIN'], 'params', str(iterations)],
                                env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def finish(self, procs):
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
        return procs

    def starts(self, path):
        with open(path) as f:
            return [e for e in map(json.loads, f) if e['event'] == 'start']

    def test_two_ranks_one_table(self):
        self.finish([self.run_rank({'RANK': '0', 'WORLD_SIZE': '2', 'LOCAL_RANK': '0'}, 12),
                     self.run_rank({'RANK': '1', 'WORLD_SIZE': '2', 'LOCAL_RANK': '1'}, 20)])
        logs = sorted(f for f in os.listdir(self.dir) if f.endswith('.jsonl'))
        self.assertEqual(logs, ['recap-0.jsonl', 'recap-1.jsonl'])
        for rank in (0, 1):
            (s,) = self.starts(os.path.join(self.dir, f'recap-{rank}.jsonl'))
            self.assertEqual((s['rank'], s['world_size'], s['rank_var']), (rank, 2, 'RANK'))
            self.assertTrue(s['log'].endswith(f'recap-{rank}.jsonl'), s['log'])
        paths = [os.path.join(self.dir, f) for f in logs]
        r = recap('report', '--json', *paths)
        self.assertEqual(r.returncode, 0, r.stderr)
        data = json.loads(r.stdout)
        self.assertEqual(data['malformed_lines'], 0)
        per_rank = {t['rank']: t for t in data['rank_totals']}
        self.assertEqual(set(per_rank), {'0', '1'})
        # Both ranks ran the same code: the same sites, each once per rank.
        by_site = {}
        for row in data['by_rank']:
            by_site.setdefault(row['site'], {})[row['rank']] = row
        self.assertTrue(by_site)
        for site, ranks in by_site.items():
            self.assertEqual(set(ranks), {'0', '1'}, site)
            self.assertGreater(ranks['1']['captures'], ranks['0']['captures'], site)
        self.assertGreaterEqual(per_rank['0']['captures'], 12)
        self.assertEqual(per_rank['1']['captures'] - per_rank['0']['captures'], 8)
        self.assertEqual(data['totals']['captures'],
                         per_rank['0']['captures'] + per_rank['1']['captures'])
        self.assertGreater(data['totals']['reused'], 0)
        r = recap('report', '--wide', *paths)
        self.assertIn('ranks 0, 1 of world size 2 (from RANK)', r.stdout)
        self.assertNotIn('no log from rank', r.stdout)
        totals = [line.split()[:2] for line in r.stdout.splitlines() if line.startswith('total')]
        self.assertEqual(totals, [['total', '0'], ['total', '1'], ['total', 'all']])

    def test_launcher_variables_name_the_log(self):
        procs = self.finish([self.run_rank({'OMPI_COMM_WORLD_RANK': '3',
                                            'OMPI_COMM_WORLD_SIZE': '4'}, 3),
                             self.run_rank({'PMI_RANK': '5', 'PMI_SIZE': '6'}, 3),
                             self.run_rank({'PMIX_RANK': '7'}, 3),
                             self.run_rank({'SLURM_PROCID': '9', 'SLURM_NTASKS': '10'}, 3),
                             self.run_rank({}, 3)])
        want = {'recap-3.jsonl': (3, 4, 'OMPI_COMM_WORLD_RANK'),
                'recap-5.jsonl': (5, 6, 'PMI_RANK'), 'recap-7.jsonl': (7, None, 'PMIX_RANK'),
                'recap-9.jsonl': (9, 10, 'SLURM_PROCID'),
                f'recap-{procs[-1].pid}.jsonl': (None, None, None)}
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(want))
        for name, (rank, size, var) in want.items():
            (s,) = self.starts(os.path.join(self.dir, name))
            self.assertEqual((s['rank'], s['world_size'], s['rank_var']), (rank, size, var))

    def test_processes_without_rank_merge_by_pid(self):
        procs = self.finish([self.run_rank({}, 4), self.run_rank({}, 6)])
        paths = [os.path.join(self.dir, f'recap-{p.pid}.jsonl') for p in procs]
        r = recap('report', '--json', *paths)
        data = json.loads(r.stdout)
        per_rank = {t['rank']: t['captures'] for t in data['rank_totals']}
        self.assertEqual(set(per_rank), {f'pid:{p.pid}' for p in procs})
        self.assertEqual(per_rank[f'pid:{procs[1].pid}'] - per_rank[f'pid:{procs[0].pid}'], 2)


class Config(Base):
    def logs_for_config(self):
        return self.write('c.jsonl', [
            ev('start', version='0.1.0', exe='/bin/app', driver=13030, recapture_api=True,
               mode='auto', sites='all', config=None, log='c.jsonl', stack_depth=12),
            # A: fine
            ev('site', site=A, frames=['app+0x10 step+0x10', 'libc.so.6+0x2a'], label='decode',
               mode='auto'),
            capture(A, 'recapture'), capture(A, 'recapture', 2), inst(A, 'update', 1.0),
            # B: recaptures mostly fall back, updates work
            ev('site', site=B, frames=['app+0x30'], label=None, mode='auto'),
            capture(B, 'fallback', reason='topology mismatch'),
            capture(B, 'fallback', 2, reason='topology mismatch'),
            capture(B, 'recapture', 3), inst(B, 'update', 1.0), inst(B, 'update', 1.0),
            # C: both fail
            ev('site', site=C, frames=['app+0x40 weird\tname+0x1'], label='decode', mode='auto'),
            capture(C, 'fallback', reason='kernel node mismatch'),
            capture(C, 'fallback', 2, reason='kernel node mismatch'),
            inst(C, 'new', 50.0, reason='update failed: CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE'),
            inst(C, 'new', 50.0, reason='update failed: CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE'),
            # D: updates fail, recaptures fine
            capture(D, 'recapture'), capture(D, 'recapture', 2),
            inst(D, 'new', 9.0, reason='update failed: topology'), inst(D, 'new', 9.0,
                                                                        reason='update failed'),
            inst(D, 'update', 1.0),
        ])

    def test_config_is_valid_and_chooses_modes(self):
        log = self.logs_for_config()
        out = os.path.join(self.dir, 'gen.conf')
        r = recap('config', '-o', out, log)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = open(out).read()
        check = subprocess.run([CONF_CHECK, out], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + text)
        parsed = check.stdout.splitlines()
        self.assertEqual(parsed[0], 'ok sites=4 stack_depth=12 mode=-')
        self.assertIn(f'site {A} label=decode mode=-', parsed)
        self.assertIn(f'site {B} label=- mode=update', parsed)
        self.assertIn(f'site {C} label=- mode=observe', parsed, 'duplicate label dropped')
        self.assertIn(f'site {D} label=- mode=recapture', parsed)
        self.assertIn('#   app+0x10 step+0x10', text)
        self.assertIn('#   libc.so.6+0x2a', text)
        self.assertIn('# 2 of 3 recaptures fell back, most often: topology mismatch (2x)', text)
        self.assertIn('2 of 3 executable updates failed', text)
        self.assertIn("# label 'decode' is not usable here", text)
        self.assertIn('#   app+0x40 weird?name+0x1', text)
        self.assertTrue(text.splitlines()[0].startswith('# recap configuration'))

    def test_a_degraded_runs_mode_and_labels_with_a_slash(self):
        # A bad setting forced observe: that is no mode to configure.
        # Labels may hold '/' (policy/config.c), and are carried over.
        log = self.write('g.jsonl', [
            ev('start', version='0.1.0', exe='/bin/app', driver=13000, recapture_api=False,
               mode='observe', degraded=True, sites='all', config=None, log='g.jsonl',
               stack_depth=8),
            ev('site', site=A, frames=['app+0x10'], label='model/decode', mode='auto'),
            capture(A, 'recapture')])
        r = recap('config', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('# mode = auto', r.stdout)
        self.assertNotIn('mode = observe', r.stdout)
        self.assertIn('label = model/decode', r.stdout)
        path = self.write('gen.conf', [r.stdout])
        check = subprocess.run([CONF_CHECK, path], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout)
        self.assertIn(f'site {A} label=model/decode mode=-', check.stdout.splitlines())

    def test_stdout_and_default_depth(self):
        log = self.write('d.jsonl', [capture(A, 'recapture')])
        r = recap('config', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('# stack_depth = 8', r.stdout)
        self.assertIn(f'[site {A}]', r.stdout)
        self.assertNotIn('mode =', r.stdout.replace('# mode = auto', ''))
        path = self.write('gen.conf', [r.stdout])
        check = subprocess.run([CONF_CHECK, path], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout)


if __name__ == '__main__':
    unittest.main()
