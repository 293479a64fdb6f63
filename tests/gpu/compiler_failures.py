#!/usr/bin/env python3
"""compiler_failures.py -- what a program sees when the compiler fails, with
and without `taskcache run` (GPU machine).

Each module of tests/e2e/failing_modules.py is loaded with cuModuleLoadData
(ctypes) in a fresh process, once plainly (the driver's JIT) and once
under `taskcache run`; a row per module and mode: how the process ended,
the CUresult, and whether anything reached its standard error. A valid
module is also loaded with CUDA_DISABLE_PTX_JIT=1, with which the driver
compiles no PTX. The issue asks that a program behave exactly as without
taskcache: the same result, no crash the driver would not have, nothing
printed unless asked.

Usage: compiler_failures.py --taskcache build/taskcache [--out DIR]
Exit status 0 when taskcache's row matches the driver's for every module
(or is better: a load that succeeds where the driver's JIT crashed), 1
otherwise."""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
import failing_modules  # noqa: E402

LOADER = r'''
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
ptx = open(sys.argv[1], "rb").read() + b"\0"
dev, ctx, mod = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
rc = cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ptx))
print("CURESULT", rc, flush=True)
'''

VALID = """.version 8.0
.target sm_90
.address_size 64

.visible .entry store_seven(.param .u64 out)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, 7;
	st.global.u32 [%rd1], %r1;
	ret;
}
"""

# name -> (PTX, environment of the loading process)
MODULES = {
    "zero-descriptors (in-process compiler segfaults)": (failing_modules.ZERO_DESCRIPTORS, {}),
    "too-few-registers (a compile that fails)": (failing_modules.TOO_FEW_REGISTERS, {}),
    "wgmma advice (compiles, with ptxas advice)": (failing_modules.ADVISED, {}),
    "valid, CUDA_DISABLE_PTX_JIT=1 (no JIT)": (VALID, {"CUDA_DISABLE_PTX_JIT": "1"}),
}


def load(work, ptx_path, env, taskcache=None):
    cmd = [sys.executable, "-c", LOADER, ptx_path]
    if taskcache:
        cmd = [taskcache, "run", "--cache-dir", os.path.join(work, "tc"),
               "--log", os.path.join(work, "tc.log"), "--", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **env))
    rc = [l.split()[1] for l in p.stdout.splitlines() if l.startswith("CURESULT")]
    return {"exit": p.returncode, "curesult": int(rc[0]) if rc else None,
            "stderr": p.stderr.strip()[-400:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskcache", required=True)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="compiler-failures-")
    rows, ok = {}, True
    print(f"{'module':50} {'mode':10} {'exit':>5} {'CUresult':>8}  stderr")
    for name, (text, env) in MODULES.items():
        path = os.path.join(work, name.split()[0].rstrip(",") + ".ptx")
        pathlib.Path(path).write_text(text)
        d = load(work, path, env)
        t = load(work, path, env, a.taskcache)
        rows[name] = {"driver": d, "taskcache": t}
        for mode, r in (("driver", d), ("taskcache", t)):
            print(f"{name:50} {mode:10} {r['exit']:>5} {str(r['curesult']):>8}  "
                  f"{r['stderr'][:120]!r}")
        driver_crashed = d["exit"] < 0
        same = (t["exit"], t["curesult"]) == (d["exit"], d["curesult"])
        better = driver_crashed and t["exit"] == 0 and t["curesult"] == 0
        quiet = not t["stderr"] or bool(d["stderr"])
        if not ((same or better) and quiet):
            ok = False
            print(f"  PROBLEM: {name}: taskcache run differs from the driver", flush=True)
    with open(os.path.join(a.out, "compiler_failures.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
