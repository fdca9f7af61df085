#!/usr/bin/env python3
"""test_doctor.py - `recap doctor` on the stand-in driver: at 13.3 and 13.0,
with no driver on the library path, with recap or the toolkit stub found as
the driver, with settings from the environment and a configuration file
(good and bad), and with programs taking each path to the driver (exported
symbols, dlsym, cuGetProcAddress, a static CUDA runtime, RTLD_DEEPBIND).

Environment (set by meson): RECAP_SCRIPT, RECAP_LIB, STANDIN_DIR,
SCENARIO_BIN, PROBE_BIN, DEEPPROG_BIN, LIBDEEP_PATH, and in sanitizer builds
RECAP_TEST_PRELOAD_PREFIX (the sanitizer runtime, preloaded first)."""

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.environ['RECAP_SCRIPT']
LIB = os.environ['RECAP_LIB']
STANDIN_DIR = os.environ['STANDIN_DIR']
SCENARIO = os.environ['SCENARIO_BIN']
PROBE = os.environ['PROBE_BIN']
DEEPPROG = os.environ['DEEPPROG_BIN']
LIBDEEP = os.environ['LIBDEEP_PATH']
STUB = '/usr/local/cuda/lib64/stubs/libcuda.so'
CUDART_MARK = b'CUDA driver version is insufficient for CUDA runtime version'


def doctor(*program, env=None, library_path=STANDIN_DIR, args=()):
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(('RECAP_', 'STANDIN_')) and k not in ('LD_PRELOAD', 'LD_LIBRARY_PATH')}
    if os.environ.get('RECAP_TEST_PRELOAD_PREFIX'):
        full['LD_PRELOAD'] = os.environ['RECAP_TEST_PRELOAD_PREFIX']
        full['ASAN_OPTIONS'] = 'detect_leaks=0'
    if library_path is not None:
        full['LD_LIBRARY_PATH'] = library_path
    full.update(env or {})
    cmd = [sys.executable, SCRIPT, 'doctor', *args]
    if program:
        cmd += ['--', *program]
    p = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=120)
    return p.returncode, p.stdout + p.stderr


class Machine(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='recap-doctor-test-')

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_standin_13_3(self):
        rc, out = doctor(env={'STANDIN_DRIVER_VERSION': '13030'})
        self.assertEqual(rc, 0, out)
        self.assertIn(f'driver        {os.path.realpath(STANDIN_DIR)}/libcuda.so.1, version 13.3 (13030)', out)
        self.assertIn('recapture API yes: cuStreamBeginRecaptureToGraph', out)
        self.assertIn('recap sees    driver 13030, recapture_api True, effective mode auto', out)
        self.assertIn('recap will    recapture repeat captures into the graph captured last time '
                      '(driver API), and update released executable graphs', out)
        self.assertIn(f'librecap.so   {os.path.realpath(LIB)}', out)  # found next to the script
        self.assertTrue(out.rstrip().endswith('recap can act here'), out)

    def test_standin_13_0(self):
        rc, out = doctor(env={'STANDIN_DRIVER_VERSION': '13000'})
        self.assertEqual(rc, 0, out)
        self.assertIn('version 13.0 (13000)', out)
        self.assertIn('recapture API no: the driver is older than 13.3 (13030)\n', out)
        self.assertIn('recap sees    driver 13000, recapture_api False', out)
        # Self-recording is on by default: recap records repeat captures itself.
        self.assertIn('recap will    record repeat captures itself, with no driver capture '
                      '(self-recording: self_record on, built-in default), and update released '
                      'executable graphs instead of instantiating', out)
        self.assertNotIn('executable reuse only', out)

    def test_plan_follows_self_record_and_mode(self):
        base = {'STANDIN_DRIVER_VERSION': '13000'}
        rc, out = doctor(env=dict(base, RECAP_SELF_RECORD='off'))
        self.assertEqual(rc, 0, out)
        self.assertIn('recap will    update released executable graphs instead of instantiating; '
                      'leave repeat captures to the driver: self-recording is off (self_record '
                      'off, environment RECAP_SELF_RECORD)', out)
        conf = os.path.join(self.dir, 'recap.conf')
        with open(conf, 'w') as f:
            f.write('[defaults]\nself_record = off\n')
        rc, out = doctor(env=dict(base, RECAP_CONFIG=conf))
        self.assertIn(f'self-recording is off (self_record off, {conf}:2)', out)
        rc, out = doctor(env=dict(base, RECAP_MODE='update'))
        self.assertIn('recap will    update released executable graphs instead of instantiating '
                      '(mode update: no recapture)', out)
        rc, out = doctor(env=dict(base, RECAP_MODE='recapture'))
        self.assertIn('recap will    record repeat captures itself, with no driver capture '
                      '(self-recording: self_record on, built-in default) (mode recapture: no '
                      'executable reuse)', out)
        rc, out = doctor(env=dict(base, RECAP_MODE='observe'))
        self.assertIn('recap will    log every capture site and change nothing (mode observe)', out)
        rc, out = doctor(env={'STANDIN_DRIVER_VERSION': '13030', 'RECAP_SELF_RECORD': 'off'})
        self.assertIn('recap will    recapture repeat captures', out)   # the driver's API: no recording

    def test_missing_driver(self):
        probe = subprocess.run([sys.executable, '-c', 'import ctypes; ctypes.CDLL("libcuda.so.1")'],
                               env={'PATH': os.environ.get('PATH', '')}, capture_output=True)
        if probe.returncode == 0:
            self.skipTest('this machine has a libcuda.so.1 on the default library path')
        rc, out = doctor(library_path=self.dir)
        self.assertEqual(rc, 1, out)
        self.assertIn('driver        NONE USABLE: no CUDA driver library: libcuda.so.1:', out)
        self.assertIn('recap cannot act here:', out)

    def test_recap_found_as_the_driver(self):
        os.symlink(LIB, os.path.join(self.dir, 'libcuda.so.1'))
        rc, out = doctor(library_path=self.dir)
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, r'libcuda\.so\.1 resolves to recap itself \([^)]*librecap\.so\)')

    def test_toolkit_stub(self):
        if not os.path.exists(STUB):
            self.skipTest(f'no {STUB}')
        os.symlink(STUB, os.path.join(self.dir, 'libcuda.so.1'))
        rc, out = doctor(library_path=self.dir)
        self.assertEqual(rc, 1, out)
        self.assertIn('is the CUDA toolkit stub', out)

    def test_settings_sources(self):
        conf = os.path.join(self.dir, 'recap.conf')
        with open(conf, 'w') as f:
            f.write('# comment\n[defaults]\nmode = update\nstack_depth = 12\n')
        rc, out = doctor(env={'RECAP_CONFIG': conf, 'RECAP_SITES': 'none',
                              'RECAP_LOG': os.path.join(self.dir, 'run-%p-%%.jsonl')})
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, rf'mode +update +{re.escape(conf)}:3\n')
        self.assertRegex(out, rf'stack_depth +12 +{re.escape(conf)}:4\n')
        self.assertRegex(out, r'sites +none +environment RECAP_SITES\n')
        self.assertRegex(out, r'verbose +0 +built-in default\n')
        self.assertIn(f'-> {self.dir}/run-<pid>-%.jsonl', out)
        self.assertIn('effective mode update, sites none, stack_depth 12', out)

    def test_log_rank_from_each_launcher(self):
        # The variables the shim reads for %r, each alone (PMIx's too).
        for var in ('RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK', 'PMIX_RANK', 'SLURM_PROCID'):
            rc, out = doctor(env={var: '5', 'RECAP_LOG': os.path.join(self.dir, 'run-%r.jsonl')})
            self.assertEqual(rc, 0, out)
            self.assertIn(f'-> {self.dir}/run-5.jsonl', out, var)

    def test_environment_beats_file(self):
        conf = os.path.join(self.dir, 'recap.conf')
        with open(conf, 'w') as f:
            f.write('[defaults]\nmode = update\n')
        rc, out = doctor(env={'RECAP_CONFIG': conf, 'RECAP_MODE': 'recapture'})
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r'mode +recapture +environment RECAP_MODE\n')

    def test_bad_configuration(self):
        conf = os.path.join(self.dir, 'bad.conf')
        with open(conf, 'w') as f:
            f.write('[defaults]\nmode = sideways\n')
        rc, out = doctor(env={'RECAP_CONFIG': conf})
        self.assertEqual(rc, 1, out)
        self.assertIn(f'- {conf}:2:', out)
        self.assertIn('effective mode observe', out)

    def test_bad_environment(self):
        rc, out = doctor(env={'RECAP_VERBOSE': 'loud'})
        self.assertEqual(rc, 1, out)
        self.assertIn('- RECAP_VERBOSE="loud"', out)

    def test_mode_off(self):
        rc, out = doctor(env={'RECAP_MODE': 'off'})
        self.assertEqual(rc, 1, out)
        self.assertIn('mode is off: recap passes every call through and writes no log', out)

    def test_missing_library(self):
        rc, out = doctor(args=('--library', os.path.join(self.dir, 'nope.so')))
        self.assertEqual(rc, 2, out)
        self.assertIn('nope.so: no such file', out)


class Programs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='recap-doctor-test-')

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_exported_symbols(self):
        rc, out = doctor(SCENARIO, 'params', '5', env={'STANDIN_DRIVER_VERSION': '13030'})
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r'static: .*scenario: calls \d+ driver functions recap interposes '
                              r'by exported symbol')
        self.assertRegex(out, r'paths to the driver through recap: exported symbols: scenario \(\d+\)\n')
        self.assertIn('recap saw: captures 5 (4 recaptured, 0 fallbacks), instantiations 5', out)

    def test_dlsym(self):
        rc, out = doctor(PROBE, 'dlsym')
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r'dlsym on a driver handle: [1-9]\d* wrappers handed out')
        self.assertNotIn('cuGetProcAddress:', out)

    def test_get_proc_address(self):
        rc, out = doctor(PROBE, 'procaddr')
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r'cuGetProcAddress: [1-9]\d* answers')

    def test_deepbind(self):
        if os.environ.get('RECAP_TEST_PRELOAD_PREFIX'):
            self.skipTest('the ASan runtime refuses RTLD_DEEPBIND libraries')
        rc, out = doctor(DEEPPROG, LIBDEEP)
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, rf'RTLD_DEEPBIND: {re.escape(LIBDEEP)} binds \d+ interposed driver '
                              r'functions straight to libcuda')
        self.assertIn('recap saw no stream capture (they went past it)', out)

    def test_static_runtime(self):
        # An ELF file holding the CUDA runtime's own text, as a program with
        # cudart linked in does.
        copy = os.path.join(self.dir, 'with_cudart')
        shutil.copy(SCENARIO, copy)
        with open(copy, 'ab') as f:
            f.write(b'\0' + CUDART_MARK + b'\0')
        rc, out = doctor(copy, 'params', '2')
        self.assertEqual(rc, 0, out)
        self.assertIn(f'{copy}: a CUDA runtime linked statically inside', out)

    def test_script_never_reaching_the_driver(self):
        script = os.path.join(self.dir, 'hello.sh')
        with open(script, 'w') as f:
            f.write('#!/bin/sh\necho hello\n')
        os.chmod(script, 0o755)
        rc, out = doctor(script)
        self.assertEqual(rc, 1, out)
        self.assertIn('a script (/bin/sh)', out)
        self.assertIn('the program never reached the driver through recap', out)

    def test_no_such_program(self):
        rc, out = doctor(os.path.join(self.dir, 'absent'))
        self.assertEqual(rc, 1, out)
        self.assertIn('absent: no such program', out)


if __name__ == '__main__':
    unittest.main()
