#!/usr/bin/env python3
"""test_lookup.py - where the recap command finds librecap.so and its
helper modules, in each way a user has it:

  checkout  scripts/recap of a source checkout (unconfigured): the
            checkout's meson build folders, `build` first; a library for
            another machine, a sanitizer build or a measuring build is
            passed over with the reason; with none, the exact command that
            builds one. Fake checkouts: the real scripts/ files, fake build
            folders holding RECAP_FAKE_LIB (which prints a line when
            an empty library).
  meson     `meson install --destdir` of this build, the configured paths
            moved under the destdir as a real install at that prefix would
            have them: bin/recap finds lib/librecap.so and imports every
            helper module from share/recap.

Environment (set by meson): SOURCE_ROOT, BUILD_ROOT, RECAP_FAKE_LIB,
RECAP_HELPERS (comma list)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.environ['SOURCE_ROOT']
BUILD = os.environ['BUILD_ROOT']
FAKE_LIB = os.environ['RECAP_FAKE_LIB']
HELPERS = [h for h in os.environ['RECAP_HELPERS'].split(',') if h]
SHOW_PRELOAD = 'import os; print(os.environ.get("LD_PRELOAD", ""))'


def run(cmd, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith('RECAP_') and k != 'LD_PRELOAD'}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, **kw)


class Checkout(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix='recap checkout ')   # a space, as users have
        shutil.copy(os.path.join(ROOT, 'meson.build'), self.root)
        os.mkdir(os.path.join(self.root, 'scripts'))
        for name in ['recap'] + HELPERS:
            shutil.copy(os.path.join(ROOT, 'scripts', name), os.path.join(self.root, 'scripts'))
        self.script = os.path.join(self.root, 'scripts', 'recap')

    def tearDown(self):
        shutil.rmtree(self.root)

    def build_folder(self, name, options=None, lib=FAKE_LIB, machine=None):
        """A meson build folder: meson-info, and shim/librecap.so when lib."""
        folder = os.path.join(self.root, name)
        os.makedirs(os.path.join(folder, 'meson-info'))
        with open(os.path.join(folder, 'meson-info', 'meson-info.json'), 'w') as f:
            json.dump({'directories': {'source': self.root, 'build': folder}}, f)
        opts = [{'name': 'b_sanitize', 'value': 'none'}, {'name': 'phase_clock', 'value': False}]
        for o in opts:
            o['value'] = (options or {}).get(o['name'], o['value'])
        with open(os.path.join(folder, 'meson-info', 'intro-buildoptions.json'), 'w') as f:
            json.dump(opts, f)
        if lib:
            os.makedirs(os.path.join(folder, 'shim'))
            target = os.path.join(folder, 'shim', 'librecap.so')
            shutil.copy(lib, target)
            if machine is not None:
                with open(target, 'r+b') as f:
                    f.seek(18)
                    f.write(machine.to_bytes(2, 'little'))
            return target
        return None

    def recap_run(self):
        return run([sys.executable, self.script, 'run', '--', sys.executable, '-c', SHOW_PRELOAD])

    def test_no_build_names_the_command(self):
        r = self.recap_run()
        self.assertEqual(r.returncode, 2)
        self.assertIn('recap: cannot find librecap.so', r.stderr)
        self.assertIn(f'{self.root}: no meson build folder', r.stderr)
        build = os.path.join(self.root, 'build')
        self.assertIn(f"build it with: meson setup '{build}' '{self.root}' && ninja -C '{build}'",
                      r.stderr)

    def test_configured_but_not_built(self):
        self.build_folder('build', lib=None)
        r = self.recap_run()
        self.assertEqual(r.returncode, 2)
        self.assertIn(os.path.join(self.root, 'build', 'shim', 'librecap.so') + ': not built',
                      r.stderr)
        self.assertIn(f"build it with: ninja -C '{os.path.join(self.root, 'build')}'", r.stderr)

    def preloaded(self, r):
        """The library the run preloaded (through its private link: the
        checkout's path holds a space)."""
        self.assertEqual(r.returncode, 0, r.stderr)
        return os.path.realpath(r.stdout.strip().splitlines()[-1].split(':')[0])

    def test_build_folder_is_used(self):
        lib = self.build_folder('build')
        self.build_folder('build-other')
        r = self.recap_run()
        self.assertEqual(self.preloaded(r), os.path.realpath(lib))
        self.assertEqual(r.stderr, '')

    def test_another_build_folder_is_found(self):
        lib = self.build_folder('build-gpu')
        r = self.recap_run()
        self.assertEqual(self.preloaded(r), os.path.realpath(lib))

    def test_unusable_builds_are_passed_over_with_reasons(self):
        self.build_folder('build', options={'b_sanitize': 'address,undefined'})
        self.build_folder('build-aarch64', machine=183 if os.uname().machine != 'aarch64' else 62)
        self.build_folder('build-phase', options={'phase_clock': True})
        r = self.recap_run()
        self.assertEqual(r.returncode, 2)
        self.assertIn('a sanitizer build (b_sanitize=address,undefined)', r.stderr)
        self.assertRegex(r.stderr, r'build-aarch64/shim/librecap\.so: built for (aarch64|x86-64), '
                                   r'this machine is (x86-64|aarch64)')
        self.assertIn('build-phase/shim/librecap.so: a measuring build (phase_clock=true)', r.stderr)
        lib = self.build_folder('build-plain')
        r = self.recap_run()
        self.assertEqual(self.preloaded(r), os.path.realpath(lib))

    def test_several_builds_the_newest_with_a_note(self):
        old = self.build_folder('build-a')
        new = self.build_folder('build-b')
        now = time.time()
        os.utime(old, (now - 100, now - 100))
        os.utime(new, (now, now))
        r = self.recap_run()
        self.assertEqual(self.preloaded(r), os.path.realpath(new))
        self.assertIn(f'recap: using {new}, the newest of', r.stderr)
        self.assertIn('name another with --library PATH', r.stderr)

    def test_version_from_meson_build(self):
        r = run([sys.executable, self.script, '--version'])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(ROOT, 'meson.build')) as f:
            version = f.read().split("version: '", 1)[1].split("'", 1)[0]
        self.assertEqual(r.stdout.strip(), f'recap {version} (source checkout)')


class MesonInstall(unittest.TestCase):
    def test_installed_command_finds_library_and_helpers(self):
        destdir = tempfile.mkdtemp(prefix='recap-install-')
        try:
            r = run(['meson', 'install', '-C', BUILD, '--no-rebuild', '--destdir', destdir])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(BUILD, 'meson-info', 'intro-buildoptions.json')) as f:
                opts = {o['name']: o['value'] for o in json.load(f)}
            prefix = destdir + opts['prefix']
            script = os.path.join(prefix, opts['bindir'], 'recap')
            libdir = os.path.join(prefix, opts['libdir'])
            datadir = os.path.join(prefix, opts['datadir'], 'recap')
            self.assertTrue(os.path.isfile(os.path.join(libdir, 'librecap.so')))
            self.assertTrue(os.path.isfile(os.path.join(prefix, opts['mandir'], 'man1', 'recap.1')))
            for helper in HELPERS:
                self.assertTrue(os.path.isfile(os.path.join(datadir, helper)), helper)
            # What is preloaded below is only looked at: an empty library in
            # its place (a sanitizer build's could not be preloaded into Python).
            shutil.copy(FAKE_LIB, os.path.join(libdir, 'librecap.so'))
            # As if installed at that prefix: the configured folders point there.
            with open(script) as f:
                text = f.read()
            for key, was, now in (('LIBDIR', os.path.join(opts['prefix'], opts['libdir']), libdir),
                                  ('DATADIR', os.path.join(opts['prefix'], opts['datadir'], 'recap'),
                                   datadir)):
                line = f"INSTALLED_{key} = '{was}'"
                self.assertIn(line, text)
                text = text.replace(line, f"INSTALLED_{key} = '{now}'", 1)
            self.assertIn("LAYOUT = 'meson'", text)
            with open(script, 'w') as f:
                f.write(text)
            r = run([sys.executable, script, 'run', '--', sys.executable, '-c', SHOW_PRELOAD])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip().splitlines()[-1], os.path.join(libdir, 'librecap.so'))
            # Every helper module imports from the installed data folder.
            for helper in HELPERS:
                probe = (f'import runpy, sys; sys.argv = ["recap", "--version"]; '
                         f'm = runpy.run_path({script!r}, run_name="probe"); '
                         f'import {helper[:-3]}; print({helper[:-3]}.__file__)')
                r = run([sys.executable, '-c', probe])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.strip(), os.path.join(datadir, helper))
        finally:
            shutil.rmtree(destdir, ignore_errors=True)


if __name__ == '__main__':
    unittest.main()
