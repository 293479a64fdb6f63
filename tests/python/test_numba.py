"""A real Python GPU compiler through taskcache, without a GPU: Numba
kernels compiled to PTX with numba-cuda's compile_ptx, keyed by their source
and signature before Numba runs, so a warm run compiles nothing, not even in
Numba."""

import subprocess
import sys
import textwrap

import pytest

numba_cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

PROGRAM = textwrap.dedent('''
    import hashlib, inspect, sys, json
    sys.path.insert(0, sys.argv[1])
    import taskcache as tc
    from numba import cuda
    from numba.cuda import compile_ptx
    import numba.types as t

    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    def scale(x, s):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= s

    def reduce_sum(x, out):
        i = cuda.grid(1)
        if i < x.size:
            cuda.atomic.add(out, 0, x[i])

    def clamp(x, lo, hi):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = min(max(x[i], lo), hi)

    def poly(x, out):
        i = cuda.grid(1)
        if i < x.size:
            v = x[i]
            out[i] = ((0.5 * v + 1.0) * v - 2.0) * v + 3.0

    f32, arr = t.float32, t.float32[:]
    KERNELS = [(saxpy, (f32, arr, arr, arr)), (scale, (arr, f32)), (reduce_sum, (arr, arr)),
               (clamp, (arr, f32, f32)), (poly, (arr, arr))]
    EDIT = len(sys.argv) > 3 and sys.argv[3] == "edit"
    if EDIT:  # a different scale kernel: same name, new body
        def scale(x, s):
            i = cuda.grid(1)
            if i < x.size:
                x[i] *= s * 2.0
        KERNELS[1] = (scale, (arr, f32))

    calls = []
    def codegen(index, task):
        fn, sig = KERNELS[index]
        calls.append(fn.__name__)
        ptx, _ = compile_ptx(fn, sig, cc=(9, 0))
        return ptx, json.dumps({"name": fn.__name__, "block": 256}).encode()

    # a task's key: its source and signature, known before Numba compiles it
    tasks = [tc.Task(fn.__name__, (inspect.getsource(fn) + repr(sig)).encode())
             for fn, sig in KERNELS]
    with tc.Cache(sys.argv[2]) as cache:
        r = cache.build_tasks(tasks, codegen, tc.Options(arch="sm_90"),
                              version="numba-cuda demo 1", serialize=True)
    print(json.dumps({"codegen": calls, "kernels": len(r.entries),
                      "metadata": [t.metadata.decode() for t in r.tasks],
                      "image": hashlib.sha256(r.image).hexdigest()}))
''')


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def run(tmp_path, *extra):
    script = tmp_path / "numba_host.py"
    script.write_text(PROGRAM)
    p = subprocess.run([sys.executable, str(script), str(ROOT / "python"), str(tmp_path / "cache"),
                        *extra], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import json
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_numba_kernels_through_taskcache(tmp_path):
    cold = run(tmp_path)
    assert sorted(cold["codegen"]) == ["clamp", "poly", "reduce_sum", "saxpy", "scale"]
    assert cold["kernels"] == 5 and len(cold["image"]) == 64
    assert '"block": 256' in cold["metadata"][0]
    warm = run(tmp_path)  # a second process: everything from the cache
    assert warm["codegen"] == [] and warm["image"] == cold["image"]
    edit = run(tmp_path, "edit")
    assert edit["codegen"] == ["scale"]
