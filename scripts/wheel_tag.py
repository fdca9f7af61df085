#!/usr/bin/env python3
"""wheel_tag.py - give the wheel meson-python built the tag of its native
code, and check that code.

  wheel_tag.py WHEEL OUTDIR

meson-python 0.12 tags a wheel without a Python extension module
py3-none-any. recap's wheel holds librecap.so, native code for one
architecture, which needs glibc (and nothing else: its DT_NEEDED entries
must be libc and libdl only, else it could not be preloaded into any
program). Its tag becomes py3-none-manylinux_2_N_ARCH: ARCH from the
library's ELF header, N the newest GLIBC_2.N symbol version it references,
so that pip installs it only on machines whose glibc can load it (PEP 600).
WHEEL and RECORD are rewritten to match; everything else is copied as it
is. Prints the new wheel's path.

Python 3 standard library only.
"""

import base64
import hashlib
import os
import re
import struct
import sys
import zipfile

ARCHES = {62: 'x86_64', 183: 'aarch64'}
ALLOWED_NEEDED = {'libc.so.6', 'libdl.so.2', 'libpthread.so.0'}


def fail(message):
    print(f'wheel_tag: {message}', file=sys.stderr)
    sys.exit(1)


def elf_facts(data):
    """(arch, needed sonames, newest GLIBC_2.N minor) of a 64-bit
    little-endian ELF shared library's bytes."""
    if data[:4] != b'\x7fELF' or data[4] != 2 or data[5] != 1:
        fail('librecap.so is not a 64-bit little-endian ELF file')
    machine, = struct.unpack_from('<H', data, 18)
    if machine not in ARCHES:
        fail(f'librecap.so is for ELF machine {machine}, not one of {sorted(ARCHES.values())}')
    shoff, = struct.unpack_from('<Q', data, 0x28)
    shentsize, shnum = struct.unpack_from('<HH', data, 0x3A)
    sections = [struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize)
                for i in range(shnum)]

    def body(sec):
        return data[sec[4]:sec[4] + sec[5]]

    def string(table, offset):
        return table[offset:table.index(b'\0', offset)].decode('ascii', 'replace')
    needed, versions = [], set()
    for sec in sections:
        if sec[1] == 6:  # SHT_DYNAMIC
            strtab, dyn = body(sections[sec[6]]), body(sec)
            for off in range(0, len(dyn) - 15, 16):
                tag, val = struct.unpack_from('<qQ', dyn, off)
                if tag == 1:  # DT_NEEDED
                    needed.append(string(strtab, val))
        elif sec[1] == 0x6ffffffe:  # SHT_GNU_verneed
            strtab, table = body(sections[sec[6]]), body(sec)
            off = 0
            for _ in range(sec[8] or 64):   # sh_info: the number of entries
                _, count, _, aux, nxt = struct.unpack_from('<HHIII', table, off)
                a = off + aux
                for _ in range(count):
                    _, _, _, name, anext = struct.unpack_from('<IHHII', table, a)
                    versions.add(string(strtab, name))
                    if not anext:
                        break
                    a += anext
                if not nxt:
                    break
                off += nxt
    minors = [int(m.group(1)) for v in versions for m in [re.match(r'^GLIBC_2\.(\d+)', v)] if m]
    return ARCHES[machine], needed, max(minors, default=17)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return f'{name},sha256={digest},{len(data)}'


def main(argv):
    if len(argv) != 3:
        fail('usage: wheel_tag.py WHEEL OUTDIR')
    source, outdir = argv[1], argv[2]
    name = os.path.basename(source)
    match = re.match(r'^(recap-[^-]+)-py3-none-any\.whl$', name)
    if not match:
        fail(f'{name}: expected recap-VERSION-py3-none-any.whl, as meson-python names it')
    with zipfile.ZipFile(source) as whl:
        entries = [(info, whl.read(info)) for info in whl.infolist()]
    libs = [data for info, data in entries if info.filename.endswith('/librecap.so')]
    if len(libs) != 1:
        fail(f'{name}: expected one librecap.so inside, found {len(libs)}')
    arch, needed, glibc_minor = elf_facts(libs[0])
    extra = [n for n in needed if n not in ALLOWED_NEEDED]
    if extra:
        fail(f'librecap.so needs {", ".join(extra)}; a preloaded library may need only '
             f'{", ".join(sorted(ALLOWED_NEEDED))}')
    tag = f'py3-none-manylinux_2_{max(glibc_minor, 17)}_{arch}'
    target = os.path.join(outdir, f'{match.group(1)}-{tag}.whl')
    records, out = [], []
    record_name = None
    for info, data in entries:
        if info.filename.endswith('.dist-info/RECORD'):
            record_name = info.filename
            continue
        if info.filename.endswith('.dist-info/WHEEL'):
            text = data.decode()
            text = re.sub(r'(?m)^Tag: .*$', f'Tag: {tag}', text)
            text = re.sub(r'(?m)^Root-Is-Purelib: .*$', 'Root-Is-Purelib: false', text)
            data = text.encode()
        out.append((info, data))
        records.append(record_line(info.filename, data))
    if record_name is None:
        fail(f'{name}: no .dist-info/RECORD')
    records.append(f'{record_name},,')
    with zipfile.ZipFile(target + '.part', 'w', zipfile.ZIP_DEFLATED) as whl:
        for info, data in out:
            whl.writestr(info, data)
        whl.writestr(record_name, '\n'.join(records) + '\n')
    os.replace(target + '.part', target)
    print(target)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
