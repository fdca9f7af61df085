#!/usr/bin/env python3
"""stream_coverage.py - recap sees every driver function that can touch a
stream (issue 13: while recap records a capture itself, the driver knows
of no capture, so a stream call recap does not see would run eagerly).

Reads every prototype of cuda.h that takes a CUstream and fails, naming
them, on those that are neither a row of shim/base/driver_api.def (by exported
symbol or base name) nor listed below with the reason recap leaves them
alone. A new CUDA release that adds stream work makes this test fail until
the table or the list says what recap does with it.

usage: stream_coverage.py CUDA_H DRIVER_API_DEF
"""
import re
import sys

# Functions taking a CUstream that recap deliberately does not interpose.
NOT_INTERPOSED = {
    # Stream creation and reading a stream's properties: no work enqueued,
    # nothing a capture holds changes (destruction and attribute changes are
    # rows, guard:stream_state).
    "cuStreamCreate": "creates a stream",
    "cuStreamCreateWithPriority": "creates a stream",
    "cuGreenCtxStreamCreate": "creates a stream",
    "cuStreamGetPriority": "reads a stream's property",
    "cuStreamGetCtx": "reads a stream's property",
    "cuStreamGetCtx_v2": "reads a stream's property",
    "cuStreamGetDevice": "reads a stream's property",
    "cuStreamGetGreenCtx": "reads a stream's property",
    "cuStreamGetId": "reads a stream's property",
    "cuStreamGetAttribute": "reads a stream's property",
    # Deprecated since CUDA 4.0 (cuLaunchKernel replaced it); no runtime uses it.
    "cuLaunchGridAsync": "deprecated launch API",
}


def prototypes_with_stream(cuda_h):
    text = open(cuda_h).read()
    protos = re.findall(r"CUresult\s+CUDAAPI\s+(\w+)\s*\(([^;]*?)\)\s*;", text, re.S)
    return sorted({name for name, params in protos if re.search(r"\bCUstream\b", params)})


def table_names(def_path):
    names = set()
    for line in open(def_path):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        names.update(fields[:2])     # exported symbol and base name
    return names


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    stream_fns = prototypes_with_stream(sys.argv[1])
    table = table_names(sys.argv[2])
    # cuda.h declares per-thread twins as NAME_ptsz / NAME_ptds of a base
    # the table already has (each table row names its base).
    def covered(name):
        base = re.sub(r"_(ptsz|ptds)$", "", name)
        return name in table or base in table or name in NOT_INTERPOSED

    missing = [n for n in stream_fns if not covered(n)]
    stale = [n for n in NOT_INTERPOSED if n not in stream_fns]
    print("%d cuda.h functions take a CUstream; %d interposed, %d left alone on purpose"
          % (len(stream_fns), len(stream_fns) - len(missing) - len(NOT_INTERPOSED),
             len(NOT_INTERPOSED)))
    if stale:
        print("listed as left alone but not in cuda.h (remove them): " + ", ".join(stale))
    if missing:
        print("take a CUstream but are neither in shim/base/driver_api.def nor listed here: "
              + ", ".join(missing))
    return 1 if missing or stale else 0


if __name__ == "__main__":
    sys.exit(main())
