"""benchlib.py - what the subcommands of scripts/bench share: finding the repo, nvcc and librecap.so, building a .cu
file into a temporary directory, running a benchmark binary and parsing its
"result key=value ..." lines, the header every benchmark prints (GPU, driver,
exact command), and reading recap's log.

Every failure (no nvcc, a build error, a binary exiting nonzero, a missing
result line) raises BenchError with a message that names what failed; the
drivers print it and exit 1.
"""
import atexit
import collections
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))   # scripts/benchmarks
REPO = os.path.dirname(os.path.dirname(BENCHMARKS))
DEFAULT_ARCH_FLAGS = ["-gencode", "arch=compute_90,code=sm_90",
                      "-gencode", "arch=compute_90,code=compute_90"]


class BenchError(Exception):
    pass


def nvcc_path():
    found = os.environ.get("NVCC") or shutil.which("nvcc")
    if not found:
        candidate = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
        found = candidate if os.path.exists(candidate) else None
    if not found:
        raise BenchError("nvcc not found (set NVCC or CUDA_HOME, or put nvcc on PATH)")
    return found


def arch_flags():
    text = os.environ.get("GPU_ARCH_FLAGS")
    return shlex.split(text) if text else list(DEFAULT_ARCH_FLAGS)


def recap_lib(argument):
    """The librecap.so to preload: the argument, else $RECAP_LIB, else
    build-gpu/shim/librecap.so under the repo root. Must exist."""
    path = argument or os.environ.get("RECAP_LIB") or os.path.join(REPO, "build-gpu", "shim",
                                                                   "librecap.so")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise BenchError(f"librecap.so not found at {path} (pass --recap-lib, set RECAP_LIB, or "
                         f"build it: meson setup build-gpu -Dtests=disabled && ninja -C build-gpu)")
    return preloadable(path)


def preloadable(path):
    """The dynamic loader splits LD_PRELOAD at spaces and colons: a library
    below such a path is preloaded through a link in a private folder
    (mkdtemp, under /tmp), removed at exit."""
    if not any(c in path for c in " :\t\n"):
        return path
    folder = tempfile.mkdtemp(prefix="recap-preload-", dir="/tmp")
    atexit.register(shutil.rmtree, folder, True)
    link = os.path.join(folder, os.path.basename(path).replace(" ", "_").replace(":", "_"))
    os.symlink(path, link)
    return link


def build(source_name, workdir, extra_flags=()):
    """Compiles scripts/benchmarks/<source_name> with nvcc into workdir;
    returns the binary path."""
    source = os.path.join(BENCHMARKS, source_name)
    binary = os.path.join(workdir, os.path.splitext(source_name)[0])
    command = [nvcc_path(), "-O2", "-std=c++17", *arch_flags(), source, "-o", binary,
               *extra_flags]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"build failed: {shlex.join(command)}\n{done.stdout}{done.stderr}")
    return binary


def make_workdir(prefix):
    return tempfile.mkdtemp(prefix=f"recap-{prefix}-")


def environment_without(names):
    """This process's environment less the variables `names`."""
    return {k: v for k, v in os.environ.items() if k not in names}


def run_both(command, env_extra=None, env_remove=("LD_PRELOAD", "RECAP_LOG", "RECAP_VERBOSE")):
    """Runs a benchmark binary; returns its stdout and stderr. Raises on a
    nonzero exit."""
    env = environment_without(env_remove)
    env.update(env_extra or {})
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        preload = f"LD_PRELOAD={env_extra['LD_PRELOAD']} " if env_extra and "LD_PRELOAD" in env_extra else ""
        raise BenchError(f"{preload}{shlex.join(command)} exited {done.returncode}\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout, done.stderr


def run(command, env_extra=None, env_remove=("LD_PRELOAD", "RECAP_LOG", "RECAP_VERBOSE")):
    """Runs a benchmark binary; returns its stdout. Raises on a nonzero exit."""
    return run_both(command, env_extra, env_remove)[0]


def callgrind_instructions(argv, env, out):
    """The instructions callgrind counts over a whole run of argv (its
    output to `out`; the program's own output dropped)."""
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + list(argv),
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no totals in callgrind's {out}")


def phase_lines(stderr):
    """The step table a measuring librecap (meson -Dphase_clock=true)
    printed at exit, one line per step; [] from a normal build."""
    return [line for line in stderr.splitlines() if line.startswith("recap phase ")]


def results(stdout):
    """Parses every 'result key=value ...' line into a dict (numbers as float
    where they parse)."""
    parsed = []
    for line in stdout.splitlines():
        if not line.startswith("result "):
            continue
        fields = {}
        for item in line.split()[1:]:
            key, _, value = item.partition("=")
            try:
                fields[key] = float(value)
            except ValueError:
                fields[key] = value
        parsed.append(fields)
    if not parsed:
        raise BenchError("no 'result' line in the benchmark's output:\n" + stdout[-2000:])
    return parsed


def print_header(title, info_binary):
    """Prints the title, the GPU and driver (from nvidia-smi and from the
    binary's --info line) and the exact command that ran this driver."""
    print(title)
    print("command: " + shlex.join([sys.argv[0], *sys.argv[1:]]))
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True)
        print("nvidia-smi: " + (smi.stdout.strip().splitlines() or [smi.stderr.strip()])[0])
    print(run([info_binary, "--info"]).strip())
    sys.stdout.flush()


def median(values):
    return statistics.median(values)


def quantile(values, q):
    """The q-quantile (0..1) of values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def log_events(log_path, name):
    """recap's events of one kind in a JSON Lines log, in order (none if the
    log cannot be read; lines that are not JSON are skipped)."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == name:
                    yield event
    except OSError:
        return


def instantiate_hows(log_path):
    """Counts recap's instantiate events by 'how' in a JSON Lines log."""
    return collections.Counter(str(e.get("how")) for e in log_events(log_path, "instantiate"))


def device_used_mib():
    """The whole card's used memory in MiB by NVML (pynvml, from
    nvidia-ml-py), or None where NVML cannot answer. Not cuMemGetInfo,
    which recap answers with the memory it keeps counted as free."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
            index = int(visible) if visible.isdigit() else 0
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            return pynvml.nvmlDeviceGetMemoryInfo(handle).used >> 20
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - any NVML failure means: not known
        return None


def end_totals(log_path):
    """The totals of the last end event in recap's log (exact counters), or {}."""
    totals = {}
    for event in log_events(log_path, "end"):
        totals = event.get("totals") or {}
    return totals


def capture_paths(log_path):
    """How recap's captures went, from the end totals (capture events are
    sampled): recorded by recap, recaptured by the driver, fallback, fresh."""
    t = end_totals(log_path)
    by_recap = int(t.get("by_recap", 0))
    return collections.Counter({"by recap": by_recap,
                                "by driver": int(t.get("recaptured", 0)) - by_recap,
                                "fallback": int(t.get("fallbacks", 0)),
                                "fresh": int(t.get("fresh", 0))})


def format_hows(counts):
    if not counts:
        return "no instantiate events"
    total = sum(counts.values())
    reused = sum(v for k, v in counts.items() if k != "new")
    return f"{reused}/{total} reused (" + " ".join(f"{k}={v}" for k, v in sorted(counts.items())) + ")"
