"""ctypes_sites.py - captures on the stand-in driver from several Python lines.

Usage: ctypes_sites.py LIBCUDA {cdll|pydll} [ITERATIONS]

Loads the driver with ctypes.CDLL (the GIL is released during each foreign
call) or ctypes.PyDLL (it is held) and, every iteration, begins a capture
at each of three lines of loop() (SITE-A/B/C) and in helper(), called from
two more lines (SITE-D/E): five capture sites. Prints one line per capture
and "done", the same with and without recap. test_python_sites.py finds
the lines by their SITE-x marks.
"""
import ctypes
import sys


def check(what, result):
    if result != 0:
        print(f'{what} failed: {result}')
        sys.exit(1)


def open_driver(path, kind):
    cu = (ctypes.PyDLL if kind == 'pydll' else ctypes.CDLL)(path)
    check('cuInit', cu.cuInit(0))
    dev = ctypes.c_int()
    check('cuDeviceGet', cu.cuDeviceGet(ctypes.byref(dev), 0))
    ctx = ctypes.c_void_p()
    check('cuDevicePrimaryCtxRetain', cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check('cuCtxSetCurrent', cu.cuCtxSetCurrent(ctx))
    stream = ctypes.c_void_p()
    check('cuStreamCreate', cu.cuStreamCreate(ctypes.byref(stream), 1))
    global BUFFER
    BUFFER = ctypes.c_uint64()
    check('cuMemAlloc', cu.cuMemAlloc_v2(ctypes.byref(BUFFER), ctypes.c_size_t(256)))
    return cu, stream


BUFFER = None


def end(cu, stream, who):
    # One memset node in every graph: recapture has something to recapture.
    check('cuMemsetD8Async', cu.cuMemsetD8Async(BUFFER, ctypes.c_ubyte(7), ctypes.c_size_t(256),
                                                stream))
    graph = ctypes.c_void_p()
    check('cuStreamEndCapture', cu.cuStreamEndCapture(stream, ctypes.byref(graph)))
    count = ctypes.c_size_t()
    check('cuGraphGetNodes', cu.cuGraphGetNodes(graph, None, ctypes.byref(count)))
    check('cuGraphDestroy', cu.cuGraphDestroy(graph))
    print(f'{who}: {count.value} nodes')


def helper(cu, stream, who):
    check('begin', cu.cuStreamBeginCapture_v2(stream, 0))   # HELPER
    end(cu, stream, who)


def loop(cu, stream, iterations):
    for _ in range(iterations):
        check('begin', cu.cuStreamBeginCapture_v2(stream, 0))   # SITE-A
        end(cu, stream, 'a')
        check('begin', cu.cuStreamBeginCapture_v2(stream, 0))   # SITE-B
        end(cu, stream, 'b')
        check('begin', cu.cuStreamBeginCapture_v2(stream, 0))   # SITE-C
        end(cu, stream, 'c')
        helper(cu, stream, 'helper-d')                          # SITE-D
        helper(cu, stream, 'helper-e')                          # SITE-E


def main():
    cu, stream = open_driver(sys.argv[1], sys.argv[2])
    loop(cu, stream, int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    print('done')


if __name__ == '__main__':
    main()
