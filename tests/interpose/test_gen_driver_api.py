#!/usr/bin/env python3
"""test_gen_driver_api.py - the role modifiers of shim/base/driver_api.def as
shim/base/gen_driver_api.py reads them: "+NAME" or "+NAME=VALUE" in any order
after a role's kind, each known and given once; +time=K wraps whatever
body the row's role generates, once, so that it composes with the other
modifiers; rows the generator must refuse; and the table's own +time
rows.

Usage: test_gen_driver_api.py DRIVER_API_DEF"""

import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shim", "base"))
import gen_driver_api as gen  # noqa: E402

DEF = None


def row(role, sig="CUresult (CUdeviceptr *dptr, size_t bytesize)", symbol="cuMemAlloc_v2"):
    return gen.Entry(1, symbol, "cuMemAlloc", "3020", "-", role, sig)


class Modifiers(unittest.TestCase):
    def refused(self, role, sig="CUresult (CUdeviceptr *dptr, size_t bytesize)"):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
            row(role, sig)
        return err.getvalue()

    def test_any_order(self):
        for role in ("guard:unsafe+oom+time=alloc", "guard:unsafe+time=alloc+oom"):
            e = row(role)
            self.assertEqual((e.role, e.kind, e.oom, e.time), ("guard", "unsafe", True, "alloc"))
        e = row("guard:unsafe+time=free+hold=device", "CUresult (CUdeviceptr dptr)")
        self.assertEqual((e.hold, e.time), ("device", "free"))
        e = row("op:kernel_ex@config->hStream",
                "CUresult (const CUlaunchConfig *config, CUfunction f, void **kernelParams, "
                "void **extra)")
        self.assertEqual((e.kind, e.stream_expr, e.time), ("kernel_ex", "config->hStream", None))
        e = row("op:struct=pCopy+time=sync", "CUresult (const CUDA_MEMCPY2D *pCopy, "
                "CUstream hStream)")
        self.assertEqual((e.kind, e.struct_param, e.time), ("struct", "pCopy", "sync"))

    def test_refused(self):
        self.assertIn("+time=K needs K among", self.refused("guard:unsafe+time=bogus"))
        self.assertIn("+time takes =VALUE", self.refused("guard:unsafe+time"))
        self.assertIn("+oom takes no value", self.refused("guard:unsafe+oom=1"))
        self.assertIn("unknown modifier +nope", self.refused("guard:unsafe+nope"))
        self.assertIn("given twice", self.refused("guard:unsafe+time=sync+time=alloc"))
        self.assertIn("+time goes with wrapped roles",
                      self.refused("begin+time=sync", "CUresult (CUstream hStream, "
                                   "CUstreamCaptureMode mode)"))
        self.assertIn("+time goes with wrapped roles", self.refused("call+time=sync"))
        self.assertIn("+time=launch needs a CUgraphExec",
                      self.refused("guard:unsafe+time=launch"))

    def test_time_wraps_the_role_body_once(self):
        e = row("guard:unsafe+oom+time=alloc")
        text = gen.gen_wrappers([e])
        body = gen.wrapper_body(e)
        self.assertIn("static inline __attribute__((always_inline)) CUresult "
                      "cuMemAlloc_v2_body(CUdeviceptr * dptr, size_t bytesize)\n{\n    " + body,
                      text, "the role's body, whole, as its own function")
        self.assertIn("cache_release_for_oom", body, "+oom's retry is in the body")
        self.assertIn("step_open(STEP_ALLOC, NULL)", text)
        self.assertIn("step_close(step, STEP_ALLOC, t0)", text)
        self.assertEqual(text.count("RECAP_EXPORT CUresult"), 1, "one exported wrapper")
        plain = gen.gen_wrappers([row("guard:unsafe+oom")])
        self.assertNotIn("step_open", plain)
        self.assertIn(body, plain, "the same body without +time")
        launch = gen.Entry(1, "cuGraphLaunch", "cuGraphLaunch", "10000", "-",
                           "op:launch+time=launch", "CUresult (CUgraphExec hGraphExec, "
                           "CUstream hStream)")
        self.assertIn("step_open(STEP_LAUNCH, hGraphExec)", gen.gen_wrappers([launch]))

    def test_the_tables_timed_rows(self):
        rows = {e.symbol: e for e in gen.read_table(DEF)}
        timed = {s: e.time for s, e in rows.items() if e.time}
        self.assertEqual(set(timed.values()), set(gen.TIME_KINDS),
                         "every class has a row")
        for symbol, kind in (("cuMemAlloc_v2", "alloc"), ("cuMemAllocAsync", "alloc"),
                             ("cuMemFree_v2", "free"), ("cuMemFreeHost", "host_free"),
                             ("cuMemHostAlloc", "host_alloc"), ("cuMemAllocHost_v2", "host_alloc"),
                             ("cuCtxSynchronize", "sync"), ("cuStreamSynchronize", "sync"),
                             ("cuStreamSynchronize_ptsz", "sync"), ("cuEventSynchronize", "sync"),
                             ("cuGraphLaunch", "launch"), ("cuGraphLaunch_ptsz", "launch")):
            self.assertEqual(timed.get(symbol), kind, symbol)
        # Polled, not waited on: never timed.
        for symbol in ("cuStreamQuery", "cuEventQuery"):
            self.assertNotIn(symbol, timed)
        self.assertTrue(rows["cuMemAlloc_v2"].oom, "+oom kept beside +time")
        self.assertEqual(rows["cuMemFree_v2"].hold, "device", "+hold kept beside +time")


if __name__ == "__main__":
    DEF = sys.argv.pop(1)
    unittest.main()
