"""Driver 580's clone fault, shown without recap (a pytest plugin).

Not part of run_all.sh: some settings crash the process they run in, by
design. Load it into PyTorch's own graph tests with no LD_PRELOAD
(round 27 ran it from a checkout of test/test_cuda.py at torch 2.11):

    PYTHONPATH=tests/gpu EMU=launch EMU_UPDATE=1 EMU_CHANGED_ONLY=1 \
    EMU_INST_PREV=1 python3 -X faulthandler -m pytest -p probe_clone_write \
        test/test_cuda.py -p no:cacheprovider -q \
        -k "test_graph_debugdump or test_graph_optims or test_graph_scaling_fused"

It wraps torch.cuda.CUDAGraph so that every capture is kept (keep_graph;
instantiated at the end of its capture as torch does otherwise) and, per
capture site and topology, makes through ctypes on libcuda the driver
calls recap makes for a copy of a graph the program keeps:

  C_n = cuGraphClone(C_{n-1})            (a chain of copies, as recap's)
  nodes of C_n = cuGraphNodeFindInClone(nodes of C_{n-1})
  each kernel / memcpy / memset node of C_n set from the same node of the
  driver's capture G_n (Get on G_n, Set on C_n: the arguments recap would
  have recorded)
  exec_n = cuGraphInstantiateWithFlags(C_n), or an update (EMU_UPDATE)

EMU=clone_only     copies made and mapped, nothing written, never launched
EMU=write          copies written and instantiated; torch replays its own
EMU=launch         as write, and replay() launches the copy (so the tests'
                   results check the writes)
EMU_UPDATE=1       one executable graph per site and node count, updated
                   from each new graph, as recap's executable reuse
EMU_CHANGED_ONLY=1 only the nodes whose parameters differ are written
EMU_DETACH=1       every node of a fresh copy first set to its own parameters
EMU_INST_PREV=1    after a copy is written, the graph it was cloned from is
                   instantiated (and that executable destroyed)
EMU_DESTROY_PREV=1 after a copy is written, the graph it was cloned from is
                   destroyed

Round 27, H100, driver 580.159 (docs/measurements.md): every setting
without EMU_INST_PREV passed the tests (eleven runs); with EMU_INST_PREV
every run died of SIGSEGV (six runs: changed nodes only, every node, and
with EMU_DETACH; five in that instantiation, one later in the test).
"""
import collections
import ctypes
import os
import sys
import traceback

import torch

MODE = os.environ.get("EMU", "launch")
# EMU_UPDATE=1: as recap's executable reuse, one executable graph per site
# and node count, updated (cuGraphExecUpdate_v2) from each new graph: the
# written copy, or the driver's graph where no copy of its kind exists yet.
UPDATE = os.environ.get("EMU_UPDATE") == "1"
# After a copy is written: its source instantiated and that executable
# destroyed (EMU_INST_PREV=1), or its source destroyed (EMU_DESTROY_PREV=1),
# as the program does with the graph recap handed it the capture before.
INST_PREV = os.environ.get("EMU_INST_PREV") == "1"
DESTROY_PREV = os.environ.get("EMU_DESTROY_PREV") == "1"
# EMU_CHANGED_ONLY=1: as recap, only the nodes whose parameters changed are
# written; the others keep what the clone copied.
CHANGED_ONLY = os.environ.get("EMU_CHANGED_ONLY") == "1"
# EMU_DETACH=1: right after the clone, every node is set to its own
# parameters (what recap's detach_clone_nodes does).
DETACH = os.environ.get("EMU_DETACH") == "1"
execs = {}           # (site, node count) -> [exec, graph it was last brought up to]
cu = ctypes.CDLL("libcuda.so.1")
V = ctypes.c_void_p
stats = collections.Counter()
chains = {}          # (site, signature) -> list of copy nodes (in G order), copy graph
roots = set()        # first copies of each chain, never destroyed


class CuErr(Exception):
    pass


def chk(name, rc):
    if rc != 0:
        stats["error %s %d" % (name, rc)] += 1
        raise CuErr("%s -> %d" % (name, rc))


def nodes_of(g):
    n = ctypes.c_size_t(0)
    chk("cuGraphGetNodes", cu.cuGraphGetNodes(V(g), None, ctypes.byref(n)))
    arr = (V * max(n.value, 1))()
    chk("cuGraphGetNodes", cu.cuGraphGetNodes(V(g), arr, ctypes.byref(n)))
    return [arr[i] for i in range(n.value)]


def node_type(node):
    t = ctypes.c_int(-1)
    chk("cuGraphNodeGetType", cu.cuGraphNodeGetType(V(node), ctypes.byref(t)))
    return t.value


def signature(g, ns):
    index = {h: i for i, h in enumerate(ns)}
    n = ctypes.c_size_t(0)
    chk("cuGraphGetEdges_v2", cu.cuGraphGetEdges_v2(V(g), None, None, None, ctypes.byref(n)))
    a, b = (V * max(n.value, 1))(), (V * max(n.value, 1))()
    data = ctypes.create_string_buffer(8 * max(n.value, 1))
    chk("cuGraphGetEdges_v2", cu.cuGraphGetEdges_v2(V(g), a, b, data, ctypes.byref(n)))
    edges = sorted((index[a[i]], index[b[i]]) for i in range(n.value))
    return (tuple(node_type(x) for x in ns), tuple(edges), data.raw)


def clone(g):
    c = V()
    chk("cuGraphClone", cu.cuGraphClone(ctypes.byref(c), V(g)))
    stats["clones"] += 1
    return c.value


def find_in_clone(node, c):
    out = V()
    chk("cuGraphNodeFindInClone", cu.cuGraphNodeFindInClone(ctypes.byref(out), V(node), V(c)))
    return out.value


def kernel_key(node):
    """A kernel node's function, dimensions and argument bytes."""
    buf = ctypes.create_string_buffer(1024)
    chk("cuGraphKernelNodeGetParams_v2", cu.cuGraphKernelNodeGetParams_v2(V(node), buf))
    func = ctypes.c_void_p.from_buffer(buf, 0).value
    params = ctypes.c_void_p.from_buffer(buf, 40).value
    kern = ctypes.c_void_p.from_buffer(buf, 56).value
    args = []
    if params:
        arr = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        for i in range(4096):
            off, size = ctypes.c_size_t(), ctypes.c_size_t()
            if func:
                rc = cu.cuFuncGetParamInfo(V(func), ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size))
            else:
                rc = cu.cuKernelGetParamInfo(V(kern), ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size))
            if rc != 0:
                break
            args.append(ctypes.string_at(arr[i], size.value))
    return (func, kern, buf.raw[8:36], tuple(args))


def params_differ(dst, src, t):
    if t == 0:
        return kernel_key(dst) != kernel_key(src)
    a, b = ctypes.create_string_buffer(1024), ctypes.create_string_buffer(1024)
    get = cu.cuGraphMemcpyNodeGetParams if t == 1 else cu.cuGraphMemsetNodeGetParams
    get(V(dst), a), get(V(src), b)
    return a.raw != b.raw


def write_from(dst, src, t):
    if CHANGED_ONLY and t in (0, 1, 2) and not params_differ(dst, src, t):
        stats["unchanged type %d" % t] += 1
        return
    buf = ctypes.create_string_buffer(1024)
    if t == 0:
        chk("cuGraphKernelNodeGetParams_v2", cu.cuGraphKernelNodeGetParams_v2(V(src), buf))
        chk("cuGraphKernelNodeSetParams_v2", cu.cuGraphKernelNodeSetParams_v2(V(dst), buf))
    elif t == 1:
        chk("cuGraphMemcpyNodeGetParams", cu.cuGraphMemcpyNodeGetParams(V(src), buf))
        chk("cuGraphMemcpyNodeSetParams", cu.cuGraphMemcpyNodeSetParams(V(dst), buf))
    elif t == 2:
        chk("cuGraphMemsetNodeGetParams", cu.cuGraphMemsetNodeGetParams(V(src), buf))
        chk("cuGraphMemsetNodeSetParams", cu.cuGraphMemsetNodeSetParams(V(dst), buf))
    else:
        stats["node type %d not written" % t] += 1
        return
    stats["writes type %d" % t] += 1


def instantiate(g):
    e = V()
    chk("cuGraphInstantiateWithFlags",
        cu.cuGraphInstantiateWithFlags(ctypes.byref(e), V(g), ctypes.c_ulonglong(0)))
    stats["instantiations"] += 1
    return e.value


def site_key():
    return tuple((f.filename, f.lineno) for f in traceback.extract_stack()[:-3]
                 if f.filename != __file__)[-6:]


def emulate(site, g):
    ns = nodes_of(g)
    sig = signature(g, ns)
    key = (site, sig)
    chain = chains.get(key)
    if chain is None:
        c = clone(g)
        chains[key] = ([find_in_clone(x, c) for x in ns], c)
        roots.add(c)
        stats["chains"] += 1
        return exec_for(site, len(ns), g) if UPDATE else None
    prev_nodes, prev = chain
    c = clone(prev)
    cn = [find_in_clone(x, c) for x in prev_nodes]
    chains[key] = (cn, c)
    if DETACH:
        for x, t in zip(cn, sig[0]):
            if t in (0, 1, 2):
                saved = CHANGED_ONLY
                globals()["CHANGED_ONLY"] = False
                write_from(x, x, t)
                globals()["CHANGED_ONLY"] = saved
        stats["copies detached"] += 1
    if MODE == "clone_only":
        return None
    for dst, src, t in zip(cn, ns, sig[0]):
        write_from(dst, src, t)
    stats["copies written"] += 1
    if INST_PREV:
        e = instantiate(prev)
        cu.cuGraphExecDestroy(V(e))
        stats["sources instantiated"] += 1
    if DESTROY_PREV and prev not in roots:
        chk("cuGraphDestroy", cu.cuGraphDestroy(V(prev)))
        stats["sources destroyed"] += 1
    return exec_for(site, len(ns), c) if UPDATE else instantiate(c)


def exec_for(site, n, g):
    slot = execs.get((site, n))
    if slot:
        info = ctypes.create_string_buffer(64)
        rc = cu.cuGraphExecUpdate_v2(V(slot[0]), V(g), info)
        if rc == 0:
            stats["updates"] += 1
            slot[1] = g
            return slot[0]
        stats["updates refused %d" % rc] += 1
    e = instantiate(g)
    execs[(site, n)] = [e, g]
    return e


_Orig = torch.cuda.CUDAGraph


class EmuGraph(_Orig):
    # pybind's __init__ runs after __new__ with the caller's arguments:
    # both are given keep_graph=True.
    def __new__(cls, keep_graph=False):
        return super().__new__(cls, True)

    def __init__(self, keep_graph=False):
        super().__init__(True)
        self._emu_user_keep = keep_graph
        self._emu_exec = None
        self._emu_src = None

    def capture_begin(self, *a, **k):
        self._emu_site = site_key()
        return super().capture_begin(*a, **k)

    def capture_end(self):
        super().capture_end()
        if not self._emu_user_keep:
            super().instantiate()   # what torch does at the end without keep_graph
        try:
            self._emu_exec = emulate(self._emu_site, self.raw_cuda_graph())
            self._emu_src = next((v[1] for v in execs.values() if v[0] == self._emu_exec), None)
        except CuErr as e:
            stats["emulation failed"] += 1
            print("emu: %s" % e, file=sys.stderr)

    def replay(self):
        if MODE == "launch" and self._emu_exec and (not UPDATE or any(
                v[0] == self._emu_exec and v[1] == self._emu_src for v in execs.values())):
            s = torch.cuda.current_stream().cuda_stream
            chk("cuGraphLaunch", cu.cuGraphLaunch(V(self._emu_exec), V(s)))
            stats["copy launches"] += 1
        else:
            super().replay()


torch.cuda.CUDAGraph = EmuGraph
torch.cuda.graphs.CUDAGraph = EmuGraph


def pytest_sessionfinish(session, exitstatus):
    os.write(2, ("\nprobe_clone_write %s: %s\n" % (MODE, dict(sorted(stats.items())))).encode())
