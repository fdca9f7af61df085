#!/usr/bin/env python3
"""test_wheel.py - the wheel as a user gets it: scripts/wheel builds it from
this checkout, pip installs it with --no-index into a fresh virtual
environment, and the installed `recap` runs stand-in programs (a C program
and a Python one through ctypes) on the stand-in driver, with nothing of
the checkout or the build tree on its paths but the stand-in itself.

Checked: the wheel's name and tag (the version of meson.build; manylinux,
the library's architecture), its contents (the package, the helper
modules, librecap.so needing libc alone or with libdl), `recap --version`
and `python -m recap --version`, `recap run` preloading the package's own
librecap.so (same output as without recap, captures recorded by recap),
`recap report` on that log, `recap doctor` naming the package's library.

Environment (set by meson): SOURCE_ROOT, STANDIN_DIR,
SCENARIO_BIN, CTYPES_SITES, RECAP_VERSION, RECAP_HELPERS (comma list);
VENV_PYTHON, an interpreter with venv and ensurepip (default
/usr/bin/python3, else this one)."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.environ['SOURCE_ROOT']
STANDIN_DIR = os.environ['STANDIN_DIR']
SCENARIO = os.environ['SCENARIO_BIN']
CTYPES_SITES = os.environ['CTYPES_SITES']
VERSION = os.environ['RECAP_VERSION']
HELPERS = [h for h in os.environ['RECAP_HELPERS'].split(',') if h]
VENV_PYTHON = os.environ.get('VENV_PYTHON') or (
    '/usr/bin/python3' if os.path.exists('/usr/bin/python3') else sys.executable)


def clean_env(**extra):
    """The environment of a user's shell: nothing of recap's or the tests'."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('RECAP_', 'STANDIN_', 'PYTHON')) and
           k not in ('LD_PRELOAD', 'LD_LIBRARY_PATH', 'VIRTUAL_ENV')}
    env.update(extra)
    return env


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix='recap-wheel-test ')   # a space, as users have
        dist = os.path.join(cls.dir, 'dist')
        r = run([os.path.join(ROOT, 'scripts', 'wheel'), dist],
                timeout=900)
        if r.returncode != 0:
            raise AssertionError(f'scripts/wheel failed:\n{r.stdout}\n{r.stderr}')
        cls.built = r.stdout.strip().splitlines()[-1]
        cls.venv = os.path.join(cls.dir, 'venv')
        r = run([VENV_PYTHON, '-m', 'venv', cls.venv])
        if r.returncode != 0:
            raise AssertionError(f'{VENV_PYTHON} -m venv failed:\n{r.stderr}')
        cls.bin = os.path.join(cls.venv, 'bin')
        r = run([os.path.join(cls.bin, 'pip'), 'install', '--no-index', '--disable-pip-version-check',
                 cls.built], env=clean_env())
        if r.returncode != 0:
            raise AssertionError(f'pip install --no-index {cls.built} failed:\n{r.stdout}\n{r.stderr}')

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def recap(self, *args, cwd=None, **env):
        return run([os.path.join(self.bin, 'recap'), *args], cwd=cwd or self.dir,
                   env=clean_env(LD_LIBRARY_PATH=STANDIN_DIR, **env))

    def test_name_tag_and_contents(self):
        name = os.path.basename(self.built)
        self.assertEqual(glob.glob(os.path.join(self.dir, 'dist', '*.whl')), [self.built])
        arch = os.uname().machine
        self.assertRegex(name, rf'^recap-{re.escape(VERSION)}-py3-none-manylinux_2_\d+_{arch}\.whl$')
        with zipfile.ZipFile(self.built) as whl:
            names = set(whl.namelist())
            wheel_meta = whl.read(f'recap-{VERSION}.dist-info/WHEEL').decode()
            entry_points = whl.read(f'recap-{VERSION}.dist-info/entry_points.txt').decode()
            record = whl.read(f'recap-{VERSION}.dist-info/RECORD').decode()
        for member in ['recap/__init__.py', 'recap/__main__.py', '.recap.mesonpy.libs/librecap.so'] + \
                [f'recap/{h}' for h in HELPERS]:
            self.assertIn(member, names)
            self.assertIn(member + ',sha256=', record)
        self.assertIn('Root-Is-Purelib: false', wheel_meta)
        self.assertIn(f'Tag: {name[len(f"recap-{VERSION}-"):-4]}', wheel_meta)
        self.assertIn('recap = recap.__main__:console_main', entry_points)
        # Nothing a wheel must not carry: no bin/ copy, no build paths.
        self.assertFalse([n for n in names if '.data/' in n], names)

    def test_library_needs_only_glibc(self):
        lib = glob.glob(os.path.join(self.venv, 'lib', 'python3*', 'site-packages',
                                     '.recap.mesonpy.libs', 'librecap.so'))
        self.assertEqual(len(lib), 1, lib)
        r = run(['readelf', '-d', '-W', lib[0]])
        self.assertEqual(r.returncode, 0, r.stderr)
        needed = re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', r.stdout)
        self.assertTrue(needed, r.stdout)
        self.assertLessEqual(set(needed), {'libc.so.6', 'libdl.so.2', 'libpthread.so.0'}, needed)

    def test_version(self):
        for cmd in ([os.path.join(self.bin, 'recap'), '--version'],
                    [os.path.join(self.bin, 'python'), '-m', 'recap', '--version']):
            r = run(cmd, env=clean_env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), f'recap {VERSION}')

    def run_both(self, program, name):
        """The program alone and under the installed recap; returns the log's events."""
        env = dict(LD_LIBRARY_PATH=STANDIN_DIR, STANDIN_DRIVER_VERSION='13000')
        plain = run(program, cwd=self.dir, env=clean_env(**env))
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        log = os.path.join(self.dir, f'{name}.jsonl')
        under = self.recap('run', '--log', log, '--', *program, STANDIN_DRIVER_VERSION='13000')
        self.assertEqual(under.returncode, 0, under.stdout + under.stderr)
        self.assertEqual(under.stdout, plain.stdout)
        self.assertNotIn('recap:', under.stderr)
        with open(log) as f:
            events = [json.loads(line) for line in f]
        start = next(e for e in events if e['event'] == 'start')
        self.assertEqual(start['version'], VERSION)
        self.assertEqual(start['driver'], 13000)
        return log, events

    def test_run_a_c_program(self):
        log, events = self.run_both([SCENARIO, 'params', '40'], 'scenario')
        totals = [e for e in events if e['event'] == 'end'][-1]['totals']
        self.assertEqual(totals['captures'], 40)
        self.assertGreaterEqual(totals['by_recap'], 38)   # recorded by recap itself
        self.assertGreaterEqual(totals['reused'], 38)
        r = self.recap('report', log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r'(?m)^total\s+40\s+39\s+39\s')

    def test_run_a_python_program(self):
        python = os.path.join(self.bin, 'python')
        log, events = self.run_both([python, CTYPES_SITES, os.path.join(STANDIN_DIR, 'libcuda.so.1'),
                                     'cdll', '20'], 'python')
        sites = [e for e in events if e['event'] == 'site']
        self.assertEqual(len(sites), 5, sites)
        self.assertTrue(all(e.get('python') for e in sites), sites)
        totals = [e for e in events if e['event'] == 'end'][-1]['totals']
        self.assertEqual(totals['captures'], 100)
        self.assertGreaterEqual(totals['by_recap'], 90)

    def test_doctor_uses_the_package(self):
        r = self.recap('doctor', STANDIN_DRIVER_VERSION='13000')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r'librecap\.so   ' + re.escape(self.venv) + r'/lib/python3[.0-9]*/site-packages/\.recap\.mesonpy\.libs/librecap\.so')
        self.assertIn('recap will    record repeat captures itself', r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith('recap can act here'), r.stdout)

    def test_missing_library_is_named(self):
        lib = glob.glob(os.path.join(self.venv, 'lib', 'python3*', 'site-packages',
                                     '.recap.mesonpy.libs', 'librecap.so'))[0]
        os.rename(lib, lib + '.away')
        try:
            r = self.recap('run', '--', 'true')
        finally:
            os.rename(lib + '.away', lib)
        self.assertEqual(r.returncode, 2)
        self.assertIn('recap: cannot find librecap.so', r.stderr)
        self.assertIn('.recap.mesonpy.libs/librecap.so', r.stderr)
        self.assertIn('reinstall it', r.stderr)


if __name__ == '__main__':
    unittest.main()
