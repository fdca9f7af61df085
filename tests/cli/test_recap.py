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
from preload import preloadable  # noqa: E402

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
                                                 '--verbose', 'PROG', 'librecap.so']),
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
                           '--config', 'r.conf', '--verbose')
        self.assertEqual(got['RECAP_SITES'], 'decode,' + A)
        self.assertEqual(got['RECAP_MODE'], 'update')
        self.assertEqual(got['RECAP_LOG'], os.path.join(os.path.realpath(self.dir),
                                                        'logs/r-%r.jsonl'))
        self.assertEqual(os.path.realpath(got['RECAP_CONFIG']), os.path.realpath(conf))
        self.assertEqual(got['RECAP_VERBOSE'], '1')
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
        r = recap('report', r0, r1)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].split()[:3] == ['SITE', 'LABEL', 'CAPTURES'], lines[0])
        row_a = next(line for line in lines if line.startswith(A)).split()
        self.assertEqual(row_a[:4], [A, 'decode', '5', '3'])
        self.assertEqual(row_a[-1], '0.570')
        total = next(line for line in lines if line.startswith('total')).split()
        self.assertEqual(total[1], '7')
        self.assertEqual(total[-1], '0.960')
        self.assertIn('6 malformed line(s) skipped; first at ' + r1 + ':7: not a JSON line',
                      r.stdout)
        self.assertIn('1 process(es) have no end event', r.stdout)
        self.assertIn('1 x warning: driver lacks recapture', r.stdout)

    def test_unknown_saving_and_unreadable_log(self):
        log = self.write('x.jsonl', [capture(C, 'recapture'), inst(C, 'update', 3.0)])
        r = recap('report', '--json', log, os.path.join(self.dir, 'missing.jsonl'))
        self.assertEqual(r.returncode, 1)
        self.assertIn('recap: cannot read', r.stderr)
        data = json.loads(r.stdout)
        self.assertIsNone(data['sites'][0]['saved_us'])
        self.assertIsNone(data['totals']['saved_us'])
        r = recap('report', log)
        self.assertIn(' -', r.stdout.splitlines()[1])

    def test_empty_log_and_stdin(self):
        empty = self.write('empty.jsonl', [])
        r = recap('report', empty)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('total', r.stdout)
        p = subprocess.run([sys.executable, SCRIPT, 'report', '--json', '-'],
                           input=capture(D, 'fresh') + '\n', capture_output=True, text=True)
        self.assertEqual(json.loads(p.stdout)['totals']['fresh'], 1)


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
