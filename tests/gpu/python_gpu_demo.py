#!/usr/bin/env python3
"""taskcache with a real Python GPU compiler, on a GPU.

Numba kernels are keyed by their source and signature before Numba runs;
on a miss numba-cuda's compile_ptx produces the PTX, taskcache compiles and
links it, and the image is loaded with taskcache's loader and launched on
CuPy arrays; results are checked against NumPy. A second process with the
same cache runs Numba zero times and gets the same image.

    python3 tests/gpu/python_gpu_demo.py --cache DIR     # prints one JSON line
"""

import argparse
import ctypes
import hashlib
import inspect
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402
import taskcache as tc  # noqa: E402


def kernels():
    from numba import cuda
    import numba.types as t

    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    def poly(x, out):
        i = cuda.grid(1)
        if i < x.size:
            v = x[i]
            out[i] = ((0.5 * v + 1.0) * v - 2.0) * v + 3.0

    def clamp(x, lo, hi, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = min(max(x[i], lo), hi)

    f32, arr = t.float32, t.float32[:]
    return [(saxpy, (f32, arr, arr, arr)), (poly, (arr, arr)), (clamp, (arr, f32, f32, arr))]


def array_args(a):
    """Numba passes a 1-D array as 7 parameters: meminfo, parent, nitems,
    itemsize, data, shape[0], strides[0]."""
    n, item = a.size, a.itemsize
    return [ctypes.c_uint64(0), ctypes.c_uint64(0), ctypes.c_int64(n), ctypes.c_int64(item),
            ctypes.c_uint64(a.data.ptr), ctypes.c_int64(n), ctypes.c_int64(item)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--n", type=int, default=1 << 20)
    args = ap.parse_args()
    import cupy as cp
    from numba.cuda import compile_ptx

    ks = kernels()
    calls = []

    def codegen(index, task):
        fn, sig = ks[index]
        calls.append(fn.__name__)
        ptx, _ = compile_ptx(fn, sig, cc=(9, 0))
        return ptx, json.dumps({"kernel": fn.__name__, "block": 256}).encode()

    tasks = [tc.Task(fn.__name__, (inspect.getsource(fn) + repr(sig)).encode()) for fn, sig in ks]
    t0 = time.perf_counter()
    with tc.Cache(args.cache) as cache:
        result = cache.build_tasks(tasks, codegen, tc.Options(arch="sm_90"),
                                   version="numba-cuda gpu demo 1", serialize=True)
    t_build = time.perf_counter() - t0

    rng = np.random.default_rng()
    x = rng.standard_normal(args.n).astype(np.float32)
    y = rng.standard_normal(args.n).astype(np.float32)
    dx, dy = cp.asarray(x), cp.asarray(y)
    out = cp.full(args.n, np.nan, dtype=np.float32)  # poisoned
    ok = {}
    grid, block = (args.n + 255) // 256, 256
    with result.load() as module:
        by_task = {t.name: t.entries[0].name for t in result.tasks}
        module.launch(by_task["saxpy"], grid, block,
                      [ctypes.c_float(2.5)] + array_args(dx) + array_args(dy) + array_args(out))
        cp.cuda.runtime.deviceSynchronize()
        ok["saxpy"] = bool(np.array_equal(cp.asnumpy(out), np.float32(2.5) * x + y))
        out.fill(np.nan)
        module.launch(by_task["poly"], grid, block, array_args(dx) + array_args(out))
        cp.cuda.runtime.deviceSynchronize()
        v = x
        ref = ((np.float32(0.5) * v + np.float32(1.0)) * v - np.float32(2.0)) * v + np.float32(3.0)
        ok["poly"] = bool(np.allclose(cp.asnumpy(out), ref, rtol=1e-5, atol=1e-5))
        out.fill(np.nan)
        module.launch(by_task["clamp"], grid, block,
                      array_args(dx) + [ctypes.c_float(-0.5), ctypes.c_float(0.5)] +
                      array_args(out))
        cp.cuda.runtime.deviceSynchronize()
        ok["clamp"] = bool(np.array_equal(cp.asnumpy(out), np.clip(x, -0.5, 0.5)))
    print(json.dumps({"codegen": calls, "build_seconds": round(t_build, 4),
                      "results_ok": ok, "image": hashlib.sha256(result.image).hexdigest(),
                      "module_hit": result.report.module_hit}))
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
