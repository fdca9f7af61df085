"""recap_doctor - `recap doctor [-- PROG ARGS...]`: what recap would do on
this machine, and why, in one screen.

Without a program: the driver library the shim would load (libcuda.so.1,
then libcuda.so, as dlopen finds them; refusing a toolkit stub and recap
itself), its version, whether cuGetProcAddress_v2 at that version has the
recapture API, the settings in force and where each came from, where the log
would go; then what recap itself makes of all that, from a probe process
started under librecap.so (its start event and its stderr).

With a program: also which paths to the driver the program takes (exported
symbols, dlsym on a driver handle, cuGetProcAddress, a CUDA runtime linked
statically), read from its ELF files and from one run under recap with the
dynamic loader's binding trace (LD_DEBUG=scopes,bindings) and the end event's
"resolved" counters; and every library loaded with RTLD_DEEPBIND that binds
driver functions past recap.

Exit status: 0 when recap can act, 1 when it cannot (no driver, a stub, recap
found as the driver, RECAP_MODE=off, bad settings, librecap.so missing, a
program that never reached the driver through recap), 2 on bad usage.
Python 3 standard library only; imported by the recap command.
"""

import ctypes
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

RECAPTURE_MIN_DRIVER = 13030
# Recording captures itself needs cuStreamGetCaptureInfo_v3 (CUDA 12.3).
SELF_RECORD_MIN_DRIVER = 12030
STUB_ERROR = 34  # CUDA_ERROR_STUB_LIBRARY
# cudart's description of cudaErrorInsufficientDriver: inside every copy of
# the CUDA runtime, static or shared.
CUDART_MARK = b'CUDA driver version is insufficient for CUDA runtime version'
SETTING_VARS = ('RECAP_MODE', 'RECAP_SITES', 'RECAP_CONFIG', 'RECAP_LOG', 'RECAP_VERBOSE',
                'RECAP_SELF_RECORD', 'RECAP_KEEP_MEMORY', 'RECAP_COPY_HELD')
DEFAULTS = {'mode': 'auto', 'sites': 'all', 'log': 'recap-%p.jsonl', 'verbose': '0',
            'self_record': 'on', 'keep_memory': 'on', 'copy_held': 'off'}
# Settings that both the environment (RECAP_ + upper case) and [defaults]
# give (policy/config.c's keys), and those only the environment gives.
LAYERED = ('mode', 'self_record', 'keep_memory')
ENV_ONLY = ('sites', 'log', 'verbose', 'copy_held')


# ---- ELF: dynamic symbols and needed libraries --------------------------------

def elf_dynamic(path):
    """(defined names, undefined names, needed sonames) of a 64-bit
    little-endian ELF file, or None for anything else."""
    try:
        with open(path, 'rb') as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b'\x7fELF' or head[4] != 2 or head[5] != 1:
                return None
            shoff, = struct.unpack_from('<Q', head, 0x28)
            shentsize, shnum = struct.unpack_from('<HH', head, 0x3A)
            f.seek(shoff)
            raw = f.read(shentsize * shnum)
            sections = [struct.unpack_from('<IIQQQQIIQQ', raw, i * shentsize) for i in range(shnum)]

            def data(sec):
                f.seek(sec[4])
                return f.read(sec[5])
            defined, undefined, needed = set(), set(), []
            for sec in sections:
                if sec[1] == 11:  # SHT_DYNSYM
                    strtab, syms = data(sections[sec[6]]), data(sec)
                    for off in range(24, len(syms) - 23, 24):
                        name_off, info, _, shndx = struct.unpack_from('<IBBH', syms, off)
                        name = strtab[name_off:strtab.index(b'\0', name_off)].decode('ascii', 'replace')
                        if info >> 4 in (1, 2):  # GLOBAL, WEAK
                            (defined if shndx else undefined).add(name)
                elif sec[1] == 6:  # SHT_DYNAMIC
                    strtab, dyn = data(sections[sec[6]]), data(sec)
                    for off in range(0, len(dyn) - 15, 16):
                        tag, val = struct.unpack_from('<qQ', dyn, off)
                        if tag == 1:  # DT_NEEDED
                            needed.append(strtab[val:strtab.index(b'\0', val)].decode('ascii', 'replace'))
            return defined, undefined, needed
    except (OSError, ValueError, struct.error, IndexError):
        return None


def file_contains(path, needle, limit=1 << 30):
    try:
        if os.path.getsize(path) > limit:
            return False
        with open(path, 'rb') as f:
            tail = b''
            while True:
                chunk = f.read(1 << 22)
                if not chunk:
                    return False
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle):]
    except OSError:
        return False


# ---- the driver, as the shim finds it ------------------------------------------

def mapped_paths():
    paths = set()
    try:
        with open('/proc/self/maps') as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith('/'):
                    paths.add(parts[5].strip())
    except OSError:
        pass
    return paths


def loaded_path(lib, name, now, before):
    """The file dlopen(name) opened: the link map's name (dlinfo), else a new
    mapping named like it, else the only new mapping."""
    for libc_name in (None, 'libdl.so.2'):
        try:
            dlinfo = ctypes.CDLL(libc_name).dlinfo
        except (OSError, AttributeError):
            continue
        link_map = ctypes.c_void_p()
        if dlinfo(ctypes.c_void_p(lib._handle), 2, ctypes.byref(link_map)) == 0 and link_map.value:
            # struct link_map { ElfW(Addr) l_addr; char *l_name; ... }
            l_name = ctypes.cast(link_map.value + ctypes.sizeof(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_char_p))[0]
            if l_name:
                return l_name.decode('utf-8', 'replace')
    new = sorted(now - before)
    named = [p for p in new if os.path.basename(p).startswith('libcuda')]
    return (named or new)[0] if named or len(new) == 1 else name


def probe_driver():
    """What the shim's open_libcuda() would find, asked directly."""
    out = {'path': None, 'problem': None, 'version': None, 'recapture_api': False,
           'proc_status': None, 'init': None}
    tried = []
    for name in ('libcuda.so.1', 'libcuda.so'):
        before = mapped_paths()
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            tried.append(f'{name}: {e}')
            continue
        path = loaded_path(lib, name, mapped_paths(), before)
        path = os.path.realpath(path) if path.startswith('/') else path
        # What the library itself defines (dlsym on its handle would also
        # search its dependencies, glibc included).
        own = (elf_dynamic(path) or (set(), set(), []))[0]
        if 'dlsym' in own and 'cuStreamEndCapture' in own:
            tried.append(f'{name} resolves to recap itself ({path})')
            continue
        if not own & {'cuGetProcAddress_v2', 'cuGetProcAddress'}:
            tried.append(f'{name} ({path}) has no cuGetProcAddress: not a CUDA driver')
            continue
        out['path'] = os.path.realpath(path) if path.startswith('/') else path
        version = ctypes.c_int(0)
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
        if rc == STUB_ERROR or '/stubs/' in out['path']:
            out['problem'] = (f'{out["path"]} is the CUDA toolkit stub (cuDriverGetVersion: '
                              f'error {rc}), not a driver; put the real driver first')
            return out
        if rc:
            out['problem'] = f'cuDriverGetVersion failed with error {rc}'
            return out
        out['version'] = version.value
        out['init'] = lib.cuInit(0)
        if version.value >= RECAPTURE_MIN_DRIVER and hasattr(lib, 'cuGetProcAddress_v2'):
            fn, status = ctypes.c_void_p(), ctypes.c_int(1)
            rc = lib.cuGetProcAddress_v2(b'cuStreamBeginRecaptureToGraph', ctypes.byref(fn),
                                         version.value, ctypes.c_uint64(0), ctypes.byref(status))
            out['proc_status'] = (rc, status.value)
            out['recapture_api'] = rc == 0 and status.value == 0 and bool(fn.value)
        return out
    out['problem'] = 'no CUDA driver library: ' + '; '.join(tried)
    return out


def version_text(v):
    return f'{v // 1000}.{v % 1000 // 10} ({v})' if v else 'unknown'


# ---- settings and where they come from -----------------------------------------

def read_config_defaults(path):
    """{key: (value, line)} of the [defaults] section and the number of site
    sections; recap's own parser judges validity (the probe run)."""
    keys, sites, section = {}, 0, None
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            for number, line in enumerate(f, 1):
                text = line.split('#', 1)[0].strip()
                m = re.match(r'^\[\s*(\w+)(?:\s+\S+)?\s*\]$', text)
                if m:
                    section = m.group(1)
                    sites += section == 'site'
                elif section == 'defaults' and '=' in text:
                    key, value = (s.strip() for s in text.split('=', 1))
                    keys.setdefault(key, (value, number))
    except OSError as e:
        return None, 0, str(e)
    return keys, sites, None


def rank_of(env):
    for var in ('RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK', 'PMIX_RANK', 'SLURM_PROCID'):
        if env.get(var, '').isdigit():
            return env[var]
    return None


def expand_log(template, env):
    if template in ('stderr', 'off'):
        return template
    rank = rank_of(env) or '<pid>'
    out = re.sub(r'%[%phr]', lambda m: {'%%': '%', '%p': '<pid>', '%h': socket.gethostname(),
                                         '%r': rank}[m.group(0)], template)
    return os.path.join(os.getcwd(), out)


def settings_table(env):
    rows, problems = [], []
    conf_keys, conf_sites = {}, 0
    conf = env.get('RECAP_CONFIG')
    if conf:
        conf_keys, conf_sites, err = read_config_defaults(conf)
        if err:
            problems.append(f'RECAP_CONFIG={conf}: {err}')
            conf_keys = {}
    for key in ('mode', 'sites', 'log', 'verbose', 'self_record', 'keep_memory', 'copy_held'):
        var = 'RECAP_' + key.upper()
        if var in env:
            rows.append((key, env[var], f'environment {var}'))
        elif key in conf_keys and key in LAYERED:
            rows.append((key, conf_keys[key][0], f'{conf}:{conf_keys[key][1]}'))
        else:
            rows.append((key, DEFAULTS[key], 'built-in default'))
    for key, (value, line) in sorted(conf_keys.items()):
        if key not in LAYERED + ENV_ONLY:
            rows.append((key, value, f'{conf}:{line}'))
    rows.append(('config', conf or '(none)', 'environment RECAP_CONFIG' if conf else 'built-in default'))
    if conf_sites:
        rows.append(('site sections', str(conf_sites), conf))
    env_mode = env.get('RECAP_MODE')
    if env_mode == 'off' or (env_mode is None and conf_keys.get('mode', ('',))[0] == 'off'):
        problems.append('mode is off: recap passes every call through and writes no log')
    return rows, problems


def plan(drv, mode, settings):
    """What recap will do with a repeat capture and an instantiation on
    this driver, in one line: the effective mode (from the probe's start
    event) and self_record (settings: {key: (value, source)})."""
    record, record_from = settings.get('self_record', ('on', 'built-in default'))
    record_on = record.strip() not in ('off', '0')      # the shim's own words: on, off, 1, 0
    sections = settings.get('site sections')
    tail = ' ([site] sections of the configuration may set other modes)' if sections else ''
    if mode == 'off':
        return 'pass every call through and write no log (mode off)'
    if mode == 'observe':
        return 'log every capture site and change nothing (mode observe)' + tail
    reuse = mode in ('auto', 'update')
    updates = 'update released executable graphs instead of instantiating'
    if mode == 'update':
        return updates + ' (mode update: no recapture)' + tail
    if drv['recapture_api']:
        what = 'recapture repeat captures into the graph captured last time (driver API)'
    elif not record_on:
        what = (f'leave repeat captures to the driver: self-recording is off (self_record '
                f'{record}, {record_from})')
        if not reuse:
            return what + '; mode recapture has nothing else to do here' + tail
        return f'{updates}; {what}' + tail
    elif drv['version'] < SELF_RECORD_MIN_DRIVER:
        what = (f'leave repeat captures to the driver: recording them needs a '
                f'{version_text(SELF_RECORD_MIN_DRIVER)} driver')
        if not reuse:
            return what + '; mode recapture has nothing else to do here' + tail
        return f'{updates}; {what}' + tail
    else:
        what = ('record repeat captures itself, with no driver capture (self-recording: '
                f'self_record {record}, {record_from})')
    return what + (f', and {updates}' if reuse else ' (mode recapture: no executable reuse)') + tail


# ---- runs under recap ------------------------------------------------------------

# A path to librecap that LD_PRELOAD can carry: `recap doctor` sets it to
# the one `recap run` uses (a private link when the path holds a space or
# a colon, which the loader would split).
preloadable = lambda lib: lib  # noqa: E731


def preload_env(env, lib):
    """LD_PRELOAD with librecap.so first, after any sanitizer runtime that
    must itself come first."""
    link = preloadable(lib)
    parts = [p for p in re.split(r'[ :\t\n]', env.get('LD_PRELOAD', ''))
             if p and p not in (lib, link)]
    sanitizers = [p for p in parts if re.match(r'lib[a-z]*san\b', os.path.basename(p))]
    others = [p for p in parts if p not in sanitizers]
    return ':'.join(sanitizers + [link] + others)


def read_log_events(pattern_dir):
    events = []
    for name in sorted(os.listdir(pattern_dir)):
        if not name.startswith('log-'):
            continue
        with open(os.path.join(pattern_dir, name), encoding='utf-8', errors='replace') as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    return events


def run_under_recap(argv, lib, env, work, timeout, trace):
    env = dict(env)
    env['LD_PRELOAD'] = preload_env(env, lib)
    env['RECAP_LOG'] = os.path.join(work, 'log-%p.jsonl')
    if trace:
        env['LD_DEBUG'] = 'scopes,bindings'
        env['LD_DEBUG_OUTPUT'] = os.path.join(work, 'ld')
    try:
        p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout)
        rc, err = p.returncode, p.stderr.decode('utf-8', 'replace')
    except subprocess.TimeoutExpired:
        rc, err = 'timed out', ''
    except OSError as e:
        rc, err = f'could not start: {e.strerror}', ''
    return rc, err, read_log_events(work)


def probe_under_recap(lib, env, work):
    """A process that makes one driver call under recap: its start event is
    what recap makes of this machine and these settings."""
    code = ('import ctypes\ns = ctypes.c_int()\n'  # an interposed function: loads recap's runtime
            'ctypes.CDLL("libcuda.so.1").cuStreamIsCapturing(None, ctypes.byref(s))\n')
    return run_under_recap([sys.executable, '-c', code], lib, env, work, 60, trace=False)


# ---- the program's paths to the driver ---------------------------------------------

def ldd_paths(path):
    try:
        out = subprocess.run(['ldd', path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [m.group(1) for m in re.finditer(r'=>\s+(/\S+)', out)]


def static_paths(prog, exports):
    lines = []
    info = elf_dynamic(prog)
    if info is None:
        try:
            with open(prog, 'rb') as f:
                first = f.readline(200)
        except OSError:
            first = b''
        what = first[2:].decode('utf-8', 'replace').strip() if first.startswith(b'#!') else 'not ELF'
        lines.append(f'{prog}: a script ({what}): what it loads shows only in the run below')
        return lines
    for path in [prog] + ldd_paths(prog):
        found = elf_dynamic(path)
        if not found:
            continue
        base = os.path.basename(path)
        if base.startswith('libcuda.so') or base.startswith('librecap'):
            continue
        calls = sorted(found[1] & exports)
        if calls:
            lines.append(f'{path}: calls {len(calls)} driver functions recap interposes by '
                         f'exported symbol (e.g. {", ".join(calls[:3])})')
        if base.startswith('libcudart.so'):
            lines.append(f'{path}: the shared CUDA runtime (reaches the driver through '
                         f'dlsym + cuGetProcAddress)')
        elif file_contains(path, CUDART_MARK):
            lines.append(f'{path}: a CUDA runtime linked statically inside (reaches the driver '
                         f'through dlsym + cuGetProcAddress)')
    return lines


# Paths may hold spaces: the loader prints them as they are.
LD_OBJECT = re.compile(r'^\s*\d+:\s+object=(.+?) \[\d+\]')
LD_SCOPE0 = re.compile(r'^\s*\d+:\s+scope 0: (.*)$')
LD_BIND = re.compile(r"binding file (.+?) \[\d+\] to (.+?) \[\d+\]: normal symbol `(cu\w+)'")


def trace_paths(work, exports, lib):
    """Objects that bound driver functions past recap or through it, from
    the loader's trace files."""
    deep, plt, dlsym, procaddr, past = set(), {}, {}, set(), {}
    lib_real = os.path.realpath(lib)
    names = [n for n in os.listdir(work) if n.startswith('ld.')]
    for name in names:
        main, obj = None, None
        with open(os.path.join(work, name), encoding='utf-8', errors='replace') as f:
            for line in f:
                m = LD_OBJECT.match(line)
                if m:
                    obj = m.group(1)
                    main = main or obj
                    continue
                m = LD_SCOPE0.match(line)
                if m and obj:
                    scope = m.group(1)
                    if (scope == obj or scope.startswith(obj + ' ')) and obj != main:
                        deep.add(obj)
                    continue
                m = LD_BIND.search(line)
                if not m:
                    continue
                src, dst, sym = m.groups()
                sbase = os.path.basename(src)
                if sbase.startswith('libcuda.so') or os.path.realpath(src) == lib_real:
                    continue
                if sym.startswith('cuGetProcAddress'):
                    procaddr.add(src)
                if sym not in exports:
                    continue
                if os.path.realpath(dst) == lib_real:
                    plt[src] = plt.get(src, 0) + 1
                elif os.path.basename(dst).startswith('libcuda.so'):
                    target = past if src in deep else dlsym
                    target[src] = target.get(src, 0) + 1
    return deep, plt, dlsym, procaddr, past


# ---- the report ------------------------------------------------------------------------

def main(argv, library, exports_of):
    """argv: the program and its arguments, or []. library: librecap.so's
    path or None. exports_of(path): the names librecap.so exports."""
    problems, warnings = [], []
    env = dict(os.environ)
    print('recap doctor')
    print(f'  librecap.so   {library or "NOT FOUND (build recap, or name it with --library)"}')
    if not library:
        problems.append('librecap.so not found')

    drv = probe_driver()
    if drv['problem']:
        problems.append(drv['problem'])
        print(f'  driver        NONE USABLE: {drv["problem"]}')
    else:
        print(f'  driver        {drv["path"]}, version {version_text(drv["version"])}'
              + (f'; cuInit: error {drv["init"]}' if drv['init'] else ''))
        if drv['init']:
            problems.append(f'cuInit failed with error {drv["init"]}: no usable device')
        if drv['recapture_api']:
            api = 'yes: cuStreamBeginRecaptureToGraph'
        elif drv['version'] < RECAPTURE_MIN_DRIVER:
            api = f'no: the driver is older than {version_text(RECAPTURE_MIN_DRIVER)}'
        else:
            api = f'no: cuGetProcAddress_v2 at {drv["version"]} answered {drv["proc_status"]}'
        print(f'  recapture API {api}')

    rows, setting_problems = settings_table(env)
    problems += setting_problems
    print('  settings (environment > [defaults] of RECAP_CONFIG > built-in):')
    for key, value, source in rows:
        shown = f'{value} -> {expand_log(value, env)}' if key == 'log' else value
        print(f'    {key:<13} {shown:<44} {source}')

    if library and not drv['problem']:
        with tempfile.TemporaryDirectory(prefix='recap-doctor-') as work:
            rc, err, events = probe_under_recap(library, env, work)
            start = next((e for e in events if e.get('event') == 'start'), None)
            complaints = [l for l in err.splitlines() if l.startswith('recap:')]
            for line in complaints:
                problems.append(line[len('recap:'):].strip())
            if start:
                print(f'  recap sees    driver {start.get("driver")}, recapture_api '
                      f'{start.get("recapture_api")}, effective mode {start.get("mode")}, sites '
                      f'{start.get("sites")}, stack_depth {start.get("stack_depth")}')
                settings = {key: (value, source) for key, value, source in rows}
                print(f'  recap will    {plan(drv, start.get("mode"), settings)}')
                if start.get('mode') == 'observe' and complaints:
                    warnings.append('recap runs as observe because of the errors listed below')
            elif not any(p.startswith('mode is off') for p in problems):
                warnings.append(f'the probe under recap wrote no log (exit {rc})')
    if argv:
        program_report(argv, library, env, exports_of, problems, warnings)
    for w in warnings:
        print(f'  warning: {w}')
    if problems:
        print('recap cannot act here:')
        for p in problems:
            print(f'  - {p}')
        return 1
    print('recap can act here' + (' on this program' if argv else ''))
    return 0


def program_report(argv, library, env, exports_of, problems, warnings):
    prog = shutil.which(argv[0]) or argv[0]
    exports = exports_of(library) if library else set()
    print(f'  program       {" ".join(argv)}')
    if not os.path.exists(prog):
        problems.append(f'{argv[0]}: no such program')
        return
    for line in static_paths(prog, exports):
        print(f'    static: {line}')
    if not library:
        return
    with tempfile.TemporaryDirectory(prefix='recap-doctor-') as work:
        rc, err, events = run_under_recap(argv, library, env, work, 600, trace=True)
        deep, plt, dlsym, procaddr, past = trace_paths(work, exports, library)
    end = next((e for e in reversed(events) if e.get('event') == 'end'), None)
    start = next((e for e in events if e.get('event') == 'start'), None)
    print(f'    run under recap: exit {rc}'
          + (f'; last stderr line: {err.strip().splitlines()[-1][:100]}' if err.strip() else ''))
    resolved = (end or {}).get('resolved') or {}
    totals = (end or {}).get('totals') or {}
    paths = []
    if plt:
        paths.append('exported symbols: ' + ', '.join(f'{os.path.basename(s)} ({n})'
                                                      for s, n in sorted(plt.items())))
    if resolved.get('dlsym'):
        paths.append(f'dlsym on a driver handle: {resolved["dlsym"]} wrappers handed out')
    if resolved.get('procaddr') or procaddr:
        paths.append(f'cuGetProcAddress: {resolved.get("procaddr", 0)} answers'
                     + (f' ({", ".join(os.path.basename(s) for s in sorted(procaddr))})'
                        if procaddr else ''))
    print('    paths to the driver through recap: ' + ('; '.join(paths) if paths else 'none seen'))
    if end:
        print(f'    recap saw: captures {totals.get("captures", 0)} ({totals.get("recaptured", 0)} '
              f'recaptured, {totals.get("fallbacks", 0)} fallbacks), instantiations '
              f'{totals.get("instantiations", 0)} ({totals.get("reused", 0)} from a released '
              f'executable graph)')
    bypass = 0
    for obj in sorted(deep):
        n = past.get(obj, 0)
        bypass += n
        print(f'    RTLD_DEEPBIND: {obj}' + (f' binds {n} interposed driver functions straight to '
                                             f'libcuda: recap cannot see those calls' if n else
                                             ' (binds no driver function past recap)'))
        if n:
            warnings.append(f'{os.path.basename(obj)} was loaded with RTLD_DEEPBIND: its driver '
                            f'calls bypass recap')
    for src, n in sorted(dlsym.items()):
        bypass += n
        print(f'    past recap: {src} binds {n} interposed driver functions straight to libcuda')
        warnings.append(f'{os.path.basename(src)} reaches the driver past recap')
    if not start:
        if not any(p.startswith('mode is off') for p in problems):
            problems.append('the program never reached the driver through recap (no log written)')
    elif end and not totals.get('captures'):
        (problems if bypass else warnings).append(
            'recap saw no stream capture' + (' (they went past it)' if bypass else ''))
