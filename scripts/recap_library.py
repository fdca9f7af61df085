"""recap_library - where the recap command finds librecap.so.

Owns the order in which the places are tried and the message that names
what to do when none holds a usable library. Must never pick a library
that cannot be preloaded here: one built for another machine (an aarch64
cross build), one built with sanitizers (its runtime must be preloaded
first; the tests do that, users do not), or a measuring build
(-Dphase_clock=true prints its own timings at exit).

The places, by how this copy of the command was installed (`layout`, which
meson writes into the configured command):
  wheel     pip installed the package: the library lies inside it, beside
            the command's module or in the folder meson-python keeps the
            package's libraries in (site-packages/.recap.mesonpy.libs)
  meson     the build tree's configured copy (BUILD/scripts/recap ->
            BUILD/shim/librecap.so), then the library folder that
            `meson install` fills
  checkout  the unconfigured scripts/recap of a source checkout: the
            checkout's meson build folders, `build` first

Python 3 standard library only; imported by the recap command.
"""

import json
import os
import shlex
import sys

LIBRARY = 'librecap.so'
# Where meson-python puts a wheel's shared libraries installed to libdir,
# relative to the package folder: site-packages/.PROJECT.mesonpy.libs.
WHEEL_LIBS = os.path.join(os.pardir, '.recap.mesonpy.libs')


def elf_machine(path):
    """(ELF class, e_machine) of an ELF file, or None."""
    try:
        with open(path, 'rb') as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b'\x7fELF':
        return None
    order = 'little' if head[5] == 1 else 'big'
    return head[4], int.from_bytes(head[18:20], order)


MACHINES = {3: 'x86', 62: 'x86-64', 183: 'aarch64', 40: 'arm', 243: 'riscv'}


def machine_name(machine):
    return MACHINES.get(machine[1], f'machine {machine[1]}') if machine else 'not ELF'


def build_options(build):
    """{option: value} of a meson build folder, from meson-info; {} when
    unreadable."""
    try:
        with open(os.path.join(build, 'meson-info', 'intro-buildoptions.json'),
                  encoding='utf-8') as f:
            return {o.get('name'): o.get('value') for o in json.load(f) if isinstance(o, dict)}
    except (OSError, ValueError, AttributeError):
        return {}


def unusable(lib, options):
    """Why the library of a build folder cannot be preloaded by recap run
    here, or None when it can."""
    here = elf_machine(sys.executable) or elf_machine('/proc/self/exe')
    found = elf_machine(lib)
    if found is None:
        return 'not an ELF shared library'
    if here and found != here:
        return f'built for {machine_name(found)}, this machine is {machine_name(here)}'
    sanitize = options.get('b_sanitize')
    if sanitize not in (None, 'none', []):
        return (f'a sanitizer build (b_sanitize={",".join(sanitize) if isinstance(sanitize, list) else sanitize}), '
                'which needs its runtime preloaded before it')
    if options.get('phase_clock') is True:
        return 'a measuring build (phase_clock=true), which prints its own timings at exit'
    return None


def checkout_root(here):
    """The source checkout whose scripts/ folder `here` is, or None."""
    root = os.path.dirname(here)
    try:
        with open(os.path.join(root, 'meson.build'), encoding='utf-8') as f:
            head = f.read(200)
    except OSError:
        return None
    return root if "project('recap'" in head else None


def checkout_version(root):
    """The project version in a checkout's meson.build, or None."""
    try:
        with open(os.path.join(root, 'meson.build'), encoding='utf-8') as f:
            text = f.read(400)
    except OSError:
        return None
    start = text.find("version: '")
    if start < 0:
        return None
    start += len("version: '")
    end = text.find("'", start)
    return text[start:end] if end > start else None


def checkout_builds(root):
    """The meson build folders directly below a checkout: `build` first,
    then the others by name."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    folders = [n for n in names
               if os.path.isfile(os.path.join(root, n, 'meson-info', 'meson-info.json'))]
    if 'build' in folders:
        folders.remove('build')
        folders.insert(0, 'build')
    return [os.path.join(root, n) for n in folders]


class Lookup:
    """The outcome of a search: `path` (None when nothing usable was
    found), `looked` (every place tried, for the message), `note` (a line
    for stderr when the choice was not obvious) and `advice` (what to do
    when nothing was found)."""

    def __init__(self):
        self.path = None
        self.looked = []
        self.note = None
        self.advice = None

    def problem(self):
        text = f'cannot find {LIBRARY} (looked for {"; ".join(self.looked)})'
        return text + '; ' + (self.advice or 'build recap first or name it with --library PATH')


def from_checkout(here, lookup):
    root = checkout_root(here)
    if root is None:
        lookup.looked.append(f'{here}: not in a recap source checkout')
        return
    usable = []
    for build in checkout_builds(root):
        lib = os.path.join(build, 'shim', LIBRARY)
        if not os.path.isfile(lib):
            lookup.looked.append(f'{lib}: not built')
            continue
        why = unusable(lib, build_options(build))
        if why:
            lookup.looked.append(f'{lib}: {why}')
        else:
            usable.append(lib)
    q = shlex.quote
    if usable:
        first = os.path.join(root, 'build', 'shim', LIBRARY)
        if first in usable or len(usable) == 1:
            lookup.path = first if first in usable else usable[0]
        else:
            # Several builds and none called build: the newest library.
            usable.sort(key=lambda p: os.path.getmtime(p), reverse=True)
            lookup.path = usable[0]
            lookup.note = (f'using {lookup.path}, the newest of {", ".join(usable)}; '
                           'name another with --library PATH')
        return
    default = os.path.join(root, 'build')
    if not lookup.looked:
        lookup.looked.append(f'{root}: no meson build folder')
    if os.path.isfile(os.path.join(default, 'meson-info', 'meson-info.json')):
        lookup.advice = f'build it with: ninja -C {q(default)}'
    else:
        lookup.advice = (f'build it with: meson setup {q(default)} {q(root)} && '
                         f'ninja -C {q(default)}')
    lookup.advice += ', or name a librecap.so with --library PATH'


def find(here, layout, libdir):
    """Searches the places of this layout (see the module's docstring).
    here: the folder of the running command's file, symlinks resolved;
    libdir: the library folder meson configured, or ''."""
    lookup = Lookup()
    if layout == 'wheel':
        places = [os.path.join(here, LIBRARY), os.path.join(here, WHEEL_LIBS, LIBRARY)]
    elif layout == 'meson':
        places = [os.path.join(here, os.pardir, 'shim', LIBRARY)]
        if libdir:
            places.append(os.path.join(libdir, LIBRARY))
    else:
        from_checkout(here, lookup)
        return lookup
    for place in (os.path.normpath(p) for p in places):
        if os.path.isfile(place):
            lookup.path = place
            return lookup
        lookup.looked.append(place)
    if layout == 'wheel':
        lookup.advice = 'the installed package is incomplete: reinstall it (pip install --force-reinstall)'
    return lookup
