"""preload.py - LD_PRELOAD values for the Python test programs, as
tests/support/run.c makes them for the C ones.

The dynamic loader splits LD_PRELOAD at spaces and colons (and tabs and
newlines), so a library below such a path is preloaded through a link in a
private directory made for this process (removed at its exit).
"""
import atexit
import os
import shutil
import tempfile

SEPARATORS = " :\t\n"
_links = {}
_dir = None


def preloadable(path):
    """A path naming the library at `path` that LD_PRELOAD can carry."""
    global _dir
    if not any(c in path for c in SEPARATORS):
        return path
    if path not in _links:
        if _dir is None:
            # mkdtemp: a new directory only this user can write; under /tmp,
            # since TMPDIR may itself hold a space.
            _dir = tempfile.mkdtemp(prefix="recap-preload-", dir="/tmp")
            atexit.register(shutil.rmtree, _dir, True)
        link = os.path.join(_dir, "%d.so" % len(_links))
        os.symlink(os.path.realpath(path), link)
        _links[path] = link
    return _links[path]


def preload_value(*paths):
    """LD_PRELOAD for these libraries, in order (empty entries skipped)."""
    return ":".join(preloadable(p) for p in paths if p)
