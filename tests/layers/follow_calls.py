#!/usr/bin/env python3
"""follow_calls.py - where an intercepted call goes: every call into a
capture (capture_on_op) of one stand-in scenario, traced function by
function, and how often it calls back into a C file lower on its stack
(a circle between files, which the layers test forbids statically).

A measuring tool, not a test. It needs a build whose every function is
instrumented, with call_trace.c's hooks linked in:

  cc -O2 -fPIC -c tests/layers/call_trace.c -o /tmp/call_trace.o
  meson setup build-trace -Dc_args="-finstrument-functions \\
      -finstrument-functions-exclude-file-list=libc_dl.c" \\
      -Dc_link_args=/tmp/call_trace.o
  ninja -C build-trace shim/librecap.so tests/scenario/scenario \\
      tests/standin/libcuda.so.1
  tests/layers/follow_calls.py build-trace mixed8 100

usage: follow_calls.py BUILD SCENARIO ITERATIONS [CALL]
CALL: the one call to trace (its number, from 1), else every call.
Prints the calls traced, the C files they passed through, and each call
back into a file lower on the stack: (caller's file, callee's file,
function) and how often.
"""
import collections
import os
import subprocess
import sys
import tempfile


def trace(build, scenario, iterations, call, out):
    lib = os.path.join(build, 'shim', 'librecap.so')
    symbols = subprocess.run(['nm', lib], capture_output=True, text=True, check=True).stdout
    offset = next(line.split()[0] for line in symbols.splitlines()
                  if line.endswith(' capture_on_op'))
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, 'tests', 'standin'),
               STANDIN_DRIVER_VERSION='13000', LD_PRELOAD=lib, TRACE_ROOT_OFFSET=offset,
               TRACE_CALL=str(call), TRACE_OUT=out,
               RECAP_LOG=os.path.join(os.path.dirname(out), 'recap.jsonl'))
    subprocess.run([os.path.join(build, 'tests', 'scenario', 'scenario'), scenario, iterations],
                   env=env, stdout=subprocess.DEVNULL, check=True)
    return lib, [line.split() for line in open(out)]


def source_files(lib, events):
    """Offset in librecap -> (function, source file as folder/name)."""
    offsets = sorted({int(o, 16) for _, f, o in events if f.endswith('librecap.so')})
    lines = subprocess.run(['addr2line', '-f', '-e', lib] + [hex(o) for o in offsets],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    where = {}
    for o, fn, loc in zip(offsets, lines[0::2], lines[1::2]):
        path = loc.split(':')[0]
        where[o] = (fn, '/'.join(path.split('/')[-3:]))
    return where


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    build, scenario, iterations = argv[1:4]
    call = int(argv[4]) if len(argv) == 5 else 0
    with tempfile.TemporaryDirectory(prefix='follow-') as tmp:
        lib, events = trace(build, scenario, iterations, call, os.path.join(tmp, 'trace.txt'))
    where = source_files(lib, events)
    stack, traced, files = [], 0, set()
    back = collections.Counter()
    for what, obj, o in events:
        if obj.endswith('librecap.so'):
            fn, path = where[int(o, 16)]
        else:
            fn, path = '?', os.path.basename(obj)
        if what == '>':
            if stack and path != stack[-1] and path in stack:
                back[(stack[-1], path, fn)] += 1
            stack.append(path)
            files.add(path)
        else:
            stack.pop()
            traced += not stack
    print(f'{build}: scenario {scenario} {iterations}: {traced} intercepted call(s) traced, '
          f'through {len([f for f in files if f.endswith((".c", ".h"))])} of recap\'s files; '
          f'{sum(back.values())} call(s) back into a file lower on the stack')
    for (caller, callee, fn), n in back.most_common():
        print(f'  {n:6d}  {caller} -> {callee} {fn}()')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
