"""The Python recipe of docs/embedding.md (examples/numba_host.py) with
real numba-cuda kernels, no GPU needed (compile_ptx): several signatures of
one kernel, module globals (a scalar and an array), an edit. Each process
is served exactly the image a cold build of the same program produces, and
codegen runs for exactly the tasks whose inputs changed. A control run
keyed the way the recipe used to (source and signature) shows what this
catches."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOST = ROOT / "examples" / "numba_host.py"

KERNELS = textwrap.dedent('''
    import numpy as np
    from numba import cuda, float32, float64

    SCALE = {scale}
    OFFSETS = np.array([{offsets}], dtype=np.float32)

    def axpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    def scale(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= SCALE

    def shift(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += OFFSETS[i % 3]

    def clamp(x, lo, hi):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = {clamp}

    KERNELS = [
        (axpy, [(float32, float32[:], float32[:], float32[:]),
                (float64, float64[:], float64[:], float64[:])]),
        (scale, [(float32[:],), (float64[:],)]),
        (shift, [(float32[:],)]),
        (clamp, [(float32[:], float32, float32)]),
    ]
''')

V1 = dict(scale="2.0", offsets="0.5, 1.5, 2.5", clamp="min(max(x[i], lo), hi)")
V2 = dict(V1, scale="3.0", offsets="0.5, 1.5, 3.5")        # the globals change
V3 = dict(V2, clamp="max(min(x[i], hi), lo) * 1.0")       # one kernel is edited
VERSIONS = [V1, V2, V3]

# the recipe's old key: the source and the signature, not what the code reads
OLD_KEY = textwrap.dedent('''
    import inspect, sys
    sys.path.insert(0, sys.argv.pop(1))
    import numba_host
    numba_host.task_key = lambda fn, sig, cc: (inspect.getsource(fn) + repr(sig)).encode()
    sys.exit(numba_host.main())
''')


def run(tmp_path, version, cache, control=False):
    kernels = tmp_path / f"kernels_{VERSIONS.index(version) + 1}.py"
    kernels.write_text(KERNELS.format(**version))
    env = dict(os.environ)
    if env.get("TASKCACHE_TEST_INSTALLED") != "1":   # else the installed package
        env["PYTHONPATH"] = str(ROOT / "python")
    if control:
        script = tmp_path / "old_key.py"
        script.write_text(OLD_KEY)
        cmd = [sys.executable, str(script), str(HOST.parent)]
    else:
        cmd = [sys.executable, str(HOST)]
    p = subprocess.run(cmd + [str(kernels), str(tmp_path / cache)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def names(out, *prefixes):
    return sorted(t for t in out["tasks"] if t.startswith(prefixes))


def test_recipe_serves_exactly_what_a_cold_build_gives(tmp_path):
    cold = run(tmp_path, V1, "cache")
    assert cold["codegen"] == sorted(cold["tasks"]) and len(cold["tasks"]) == 6
    assert len(names(cold, "axpy_")) == 2 and len(names(cold, "scale_")) == 2

    warm = run(tmp_path, V1, "cache")             # a new process: nothing runs
    assert warm["codegen"] == [] and warm["image"] == cold["image"]

    changed = run(tmp_path, V2, "cache")          # only what reads the globals
    assert changed["codegen"] == names(cold, "scale_", "shift_")
    assert changed["image"] == run(tmp_path, V2, "fresh2")["image"] != cold["image"]

    edited = run(tmp_path, V3, "cache")           # only the edited kernel
    assert edited["codegen"] == names(cold, "clamp_")
    assert edited["image"] == run(tmp_path, V3, "fresh3")["image"] != changed["image"]


def test_the_old_key_was_served_stale_binaries(tmp_path):
    # the control: keyed on source and signature, a changed global is
    # served the old binary, which this test's comparison detects
    run(tmp_path, V1, "old", control=True)
    stale = run(tmp_path, V2, "old", control=True)
    assert stale["codegen"] == []
    assert stale["image"] != run(tmp_path, V2, "fresh", control=True)["image"]
