#!/usr/bin/env python3
"""taskcache with real Python GPU compilers, on a GPU.

Kernels are keyed by their source (and signature) before the Python
compiler runs; on a miss the compiler produces PTX, taskcache compiles and
links it, the image is loaded with taskcache's loader and launched on CuPy
arrays, and the results are checked against NumPy. A second process with
the same cache runs the Python compiler zero times and gets the same image.

Two front ends, each used when it works on the machine:
  - CuPy: CUDA C through NVRTC (CuPy's thin binding, cupy.cuda.nvrtc);
  - numba-cuda: Python kernels through numba.cuda.compile_ptx.

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

CUPY_KERNELS = {
    "saxpy": r'''extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *o, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a * x[i] + y[i]; }''',
    "poly": r'''__device__ __noinline__ float horner(float v)
{ return ((0.5f * v + 1.0f) * v - 2.0f) * v + 3.0f; }
extern "C" __global__ void poly(const float *x, float *o, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = horner(x[i]); }''',
    "clamp": r'''extern "C" __global__ void clamp(const float *x, float lo, float hi, float *o, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = fminf(fmaxf(x[i], lo), hi); }''',
}


def saxpy_ok(got, x, y):
    """a*x+y, which the GPU compiler may contract to one fused multiply-add:
    equal to the float64 reference rounded once, or to the float32 one."""
    fused = (2.5 * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
    return bool(np.all((got == fused) | (got == np.float32(2.5) * x + y)))


def poly_ref(v):
    return ((np.float32(0.5) * v + np.float32(1.0)) * v - np.float32(2.0)) * v + np.float32(3.0)


def build_and_inputs(cache, tasks, codegen, version, n):
    """Builds the tasks (codegen serialized) and makes random inputs x, y
    on the host and the GPU and a NaN-poisoned output buffer."""
    import cupy as cp
    t0 = time.perf_counter()
    result = cache.build_tasks(tasks, codegen, tc.Options(arch="sm_90"), version=version,
                               serialize=True)
    t_build = time.perf_counter() - t0
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = cp.full(n, np.nan, dtype=np.float32)
    return result, t_build, x, y, cp.asarray(x), cp.asarray(y), out


def run_cupy(cache, n):
    import cupy as cp
    from cupy.cuda import nvrtc
    names = list(CUPY_KERNELS)
    calls = []

    def codegen(index, task):
        calls.append(task.name)
        prog = nvrtc.createProgram(CUPY_KERNELS[task.name], task.name + ".cu", (), ())
        try:
            nvrtc.compileProgram(prog, ("-std=c++17", "-arch=compute_90"))
            ptx = nvrtc.getPTX(prog)
        finally:
            nvrtc.destroyProgram(prog)
        return ptx.rstrip(b"\0"), json.dumps({"kernel": task.name, "block": 256}).encode()

    tasks = [tc.Task(k, CUPY_KERNELS[k].encode()) for k in names]
    result, t_build, x, y, dx, dy, out = build_and_inputs(cache, tasks, codegen, "cupy demo 1", n)
    ptr = lambda a: ctypes.c_uint64(a.data.ptr)  # noqa: E731
    grid, block, ok = (n + 255) // 256, 256, {}
    with result.load() as m:
        m.launch("saxpy", grid, block, [ctypes.c_float(2.5), ptr(dx), ptr(dy), ptr(out),
                                        ctypes.c_int(n)])
        cp.cuda.runtime.deviceSynchronize()
        ok["saxpy"] = saxpy_ok(cp.asnumpy(out), x, y)
        out.fill(np.nan)
        m.launch("poly", grid, block, [ptr(dx), ptr(out), ctypes.c_int(n)])
        cp.cuda.runtime.deviceSynchronize()
        ok["poly"] = bool(np.allclose(cp.asnumpy(out), poly_ref(x), rtol=1e-5, atol=1e-5))
        out.fill(np.nan)
        m.launch("clamp", grid, block, [ptr(dx), ctypes.c_float(-0.5), ctypes.c_float(0.5),
                                        ptr(out), ctypes.c_int(n)])
        cp.cuda.runtime.deviceSynchronize()
        ok["clamp"] = bool(np.array_equal(cp.asnumpy(out), np.clip(x, -0.5, 0.5)))
    return {"compiler_calls": calls, "build_seconds": round(t_build, 4), "results_ok": ok,
            "image": hashlib.sha256(result.image).hexdigest(),
            "module_hit": result.report.module_hit}


def numba_array(a):
    """Numba passes a 1-D array as 7 parameters: meminfo, parent, nitems,
    itemsize, data, shape[0], strides[0]."""
    n, item = a.size, a.itemsize
    return [ctypes.c_uint64(0), ctypes.c_uint64(0), ctypes.c_int64(n), ctypes.c_int64(item),
            ctypes.c_uint64(a.data.ptr), ctypes.c_int64(n), ctypes.c_int64(item)]


def run_numba(cache, n):
    if not hasattr(np, "row_stack"):  # removed in NumPy 2.x, still used by some Numba
        np.row_stack = np.vstack
    import cupy as cp
    from numba import cuda
    from numba.cuda import compile_ptx
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

    f32, arr = t.float32, t.float32[:]
    ks = [(saxpy, (f32, arr, arr, arr)), (poly, (arr, arr))]
    calls = []

    def codegen(index, task):
        fn, sig = ks[index]
        calls.append(fn.__name__)
        ptx, _ = compile_ptx(fn, sig, cc=(9, 0))
        return ptx, json.dumps({"kernel": fn.__name__, "block": 256}).encode()

    tasks = [tc.Task(fn.__name__, (inspect.getsource(fn) + repr(sig)).encode()) for fn, sig in ks]
    result, t_build, x, y, dx, dy, out = build_and_inputs(cache, tasks, codegen, "numba demo 1", n)
    grid, block, ok = (n + 255) // 256, 256, {}
    with result.load() as m:
        by = {t_.name: t_.entries[0].name for t_ in result.tasks}
        m.launch(by["saxpy"], grid, block,
                 [ctypes.c_float(2.5)] + numba_array(dx) + numba_array(dy) + numba_array(out))
        cp.cuda.runtime.deviceSynchronize()
        ok["saxpy"] = saxpy_ok(cp.asnumpy(out), x, y)
        out.fill(np.nan)
        m.launch(by["poly"], grid, block, numba_array(dx) + numba_array(out))
        cp.cuda.runtime.deviceSynchronize()
        ok["poly"] = bool(np.allclose(cp.asnumpy(out), poly_ref(x), rtol=1e-5, atol=1e-5))
    return {"compiler_calls": calls, "build_seconds": round(t_build, 4), "results_ok": ok,
            "image": hashlib.sha256(result.image).hexdigest(),
            "module_hit": result.report.module_hit}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--n", type=int, default=1 << 20)
    args = ap.parse_args()
    report, ok = {}, True
    with tc.Cache(args.cache) as cache:
        for name, fn in (("cupy", run_cupy), ("numba", run_numba)):
            try:
                r = fn(cache, args.n)
                ok &= all(r["results_ok"].values())
            except Exception as e:  # a front end that does not work here is reported
                r = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            report[name] = r
    worked = [k for k, v in report.items() if "error" not in v]
    print(json.dumps(report))
    return 0 if ok and worked else 1


if __name__ == "__main__":
    sys.exit(main())
