#!/usr/bin/env python3
"""triton_ptxas_check.py -- Triton compiling through `taskcache ptxas` on a GPU.

Triton runs ptxas itself (one module per kernel, `-lineinfo -v
--gpu-name=sm_XXa IN.ptx -o OUT`, after parsing `ptxas --version`) and
lets TRITON_PTXAS_PATH (Triton 3.9 for sm_90 and later:
TRITON_PTXAS_BLACKWELL_PATH) choose the program. This check points both
at a `taskcache shims` directory and runs the same Triton program in
fresh processes, each with an empty Triton cache (so that Triton
compiles):

  bundled    Triton's own ptxas (the reference results)
  first      TRITON_PTXAS_PATH=SHIMS/bin/ptxas, an empty taskcache cache;
             NVIDIA's ptxas behind it is Triton's bundled one
             (TASKCACHE_PTXAS), so both sides use one compiler release
  second     the same, the taskcache cache from `first`

Every output tensor is hashed after every launch. Checks: the results of
all three runs are identical, bit for bit (Triton's modules carry
line-info sections, so taskcache builds each whole with the same ptxas:
CI's tests/e2e/test_ptxas.py already finds the cubins byte-identical
without a GPU); `first` built its kernels
through taskcache (TASKCACHE_LOG: one cached build per kernel; only
`--version` goes to NVIDIA's ptxas); `second` compiles nothing (every
build a module record hit). Prints a table last and writes
OUT/triton_ptxas.json. Exit status 0 when every check holds, 1 otherwise,
2 when Triton or torch is missing (reported, not failed: --need to fail).

  python3 tests/gpu/triton_ptxas_check.py --taskcache build/taskcache [--out DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

# ---- the Triton program (run in a fresh process) -------------------------------------------

PROGRAM = r'''
import hashlib, json, sys, time
import torch
import triton
import triton.language as tl

@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m)
    y = tl.load(y_ptr + i, mask=m)
    tl.store(out_ptr + i, a * x + tl.sin(y), mask=m)

@triton.jit
def softmax(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * cols + c, e / tl.sum(e, axis=0), mask=c < cols)

@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

torch.manual_seed(0)
dev = "cuda"
h = hashlib.sha256()
t0 = time.time()
n = 1 << 20
x, y = torch.rand(n, device=dev), torch.rand(n, device=dev)
out = torch.empty_like(x)
for block in (256, 1024):
    out.fill_(float("nan"))
    axpy[(triton.cdiv(n, block),)](x, y, out, 1.5, n, BLOCK=block)
    h.update(out.cpu().numpy().tobytes())
s = torch.randn(512, 781, device=dev)
so = torch.empty_like(s)
softmax[(512,)](s, so, 781, BLOCK=1024)
h.update(so.cpu().numpy().tobytes())
for dtype in (torch.float16, torch.bfloat16):
    a = torch.randn(256, 256, device=dev, dtype=dtype)
    b = torch.randn(256, 256, device=dev, dtype=dtype)
    c = torch.full((256, 256), float("nan"), device=dev)
    matmul[(4, 4)](a, b, c, 256, 256, 256, BM=64, BN=64, BK=32)
    h.update(c.cpu().numpy().tobytes())
torch.cuda.synchronize()
print(json.dumps({"seconds": time.time() - t0, "hash": h.hexdigest(),
                  "triton": triton.__version__}))
'''


def bundled_ptxas():
    """The ptxas Triton runs for this GPU without TRITON_PTXAS_PATH (Triton
    3.9 runs its ptxas-blackwell for sm_90 and later, older ones ptxas)."""
    import torch
    import triton
    major, minor = torch.cuda.get_device_capability()
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        tool = get_ptxas(major * 10 + minor)
        return tool.path if hasattr(tool, "path") else tool[0]
    except Exception:  # another Triton: its bin directory
        base = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
        for name in ("ptxas-blackwell", "ptxas"):
            if major >= 9 or name == "ptxas":
                if os.access(os.path.join(base, name), os.X_OK):
                    return os.path.join(base, name)
    return shutil.which("ptxas")


class Runner:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="triton-ptxas-check-")
        self.prog = os.path.join(self.work, "prog.py")
        with open(self.prog, "w") as f:
            f.write(textwrap.dedent(PROGRAM))

    def fresh(self, name):
        d = os.path.join(self.work, f"{name}-{time.monotonic_ns()}")
        os.makedirs(d)
        return d

    def run(self, label, env):
        """One fresh process with an empty Triton cache: its JSON, the log."""
        log = os.path.join(self.work, f"{label}.log")
        e = dict(os.environ, TRITON_CACHE_DIR=self.fresh("triton-cache"), **env)
        if "TASKCACHE_DIR" in env:
            e["TASKCACHE_LOG"] = log
        t0 = time.time()
        p = subprocess.run([sys.executable, self.prog], capture_output=True, text=True, env=e,
                           timeout=900)
        wall = time.time() - t0
        out = next((json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")), None)
        if p.returncode != 0 or out is None:
            raise RuntimeError(f"{label} failed ({p.returncode}):\n{p.stdout[-2000:]}\n"
                               f"{p.stderr[-4000:]}")
        out["wall"] = wall
        out["log"] = open(log).read().splitlines() if os.path.exists(log) else []
        built = [x for x in out["log"] if " kernels in " in x or "module record hit" in x]
        out["built"] = len(built)
        out["hits"] = sum("module record hit" in x for x in built)
        out["compiled"] = sum(int(x.split(" compiled")[0].rsplit(" ", 1)[1])
                              for x in built if " compiled" in x)
        real = env.get("TASKCACHE_PTXAS", "-")  # hand-overs are logged as "ptxas: REAL: why"
        out["handed_over"] = [x for x in out["log"] if f"ptxas: {real}: " in x and
                              ": --version:" not in x]
        print(f"  {label}: {out['seconds']:.2f} s in the program, wall {wall:.1f} s, "
              f"{out['built']} taskcache builds ({out['hits']} module hits, "
              f"{out['compiled']} units compiled), {len(out['handed_over'])} handed to ptxas",
              flush=True)
        return out


def check_runs(runs, reference, hint):
    """The checks every tool's run through taskcache ptxas must pass: the
    reference run, `first` (an empty taskcache cache) and `second` (the
    cache of `first`) give identical results; `first` built through
    taskcache and handed nothing but --version to NVIDIA's ptxas; `second`
    built the same modules and compiled nothing. Problems, as text."""
    if len(runs) != 3:
        return []
    problems = []
    if len({x["hash"] for x in runs.values()}) != 1:
        problems.append(f"results differ between {reference} and taskcache ptxas")
    if runs["first"]["built"] == 0:
        problems.append(f"the first run built nothing through taskcache ({hint})")
    if runs["first"]["handed_over"]:
        problems.append(f"commands handed to ptxas: {runs['first']['handed_over'][:3]}")
    second = runs["second"]
    if second["compiled"] or second["hits"] != second["built"]:
        problems.append(f"the second process compiled: {second['built'] - second['hits']} of "
                        f"{second['built']} builds were not module record hits, "
                        f"{second['compiled']} units compiled")
    if runs["second"]["built"] != runs["first"]["built"]:
        problems.append("the second process did not build the same modules")
    return problems


def print_runs(runs, problems):
    print(f"{'run':<10} {'program':>9} {'wall':>7} {'builds':>7} {'hits':>5} {'compiled':>9}  hash")
    for k, x in runs.items():
        print(f"{k:<10} {x['seconds']:>8.2f}s {x['wall']:>6.1f}s {x['built']:>7} {x['hits']:>5} "
              f"{x['compiled']:>9}  {x['hash'][:16]}")
    for p in problems:
        print(f"   PROBLEM: {p}")


def arguments(doc, missing):
    """The command line of a ptxas check: --taskcache, --out, --need."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--taskcache", required=True, help="the taskcache program")
    ap.add_argument("--out", default=".")
    ap.add_argument("--need", action="store_true", help=f"a missing {missing} fails")
    return ap.parse_args()


def main():
    a = arguments(__doc__, "Triton or torch")
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except Exception as e:
        print(f"triton_ptxas_check: not installed: {type(e).__name__}: {e}")
        return 1 if a.need else 2
    r = Runner(a)
    shims = os.path.join(r.work, "shims")
    subprocess.run([a.taskcache, "shims", shims], check=True, capture_output=True)
    ours = os.path.join(shims, "bin", "ptxas")
    theirs = bundled_ptxas()
    problems = []
    # Triton parses `ptxas --version`: the shim must answer exactly as its ptxas does
    v = [subprocess.run([p, "--version"], capture_output=True, text=True,
                        env=dict(os.environ, TASKCACHE_PTXAS=theirs)) for p in (ours, theirs)]
    if (v[0].returncode, v[0].stdout) != (v[1].returncode, v[1].stdout):
        problems.append(f"--version differs: {v[0].stdout!r} vs {v[1].stdout!r}")
    tc_cache = r.fresh("taskcache")
    via = {"TRITON_PTXAS_PATH": ours, "TRITON_PTXAS_BLACKWELL_PATH": ours,
           "TASKCACHE_PTXAS": theirs, "TASKCACHE_DIR": tc_cache}
    runs = {}
    try:
        runs["bundled"] = r.run("bundled", {})
        runs["first"] = r.run("first", via)
        runs["second"] = r.run("second", via)
    except Exception as e:
        problems.append(str(e))
    problems += check_runs(runs, "bundled", f"is TRITON_PTXAS_PATH used by Triton "
                           f"{runs.get('first', {}).get('triton')}?")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "triton_ptxas.json"), "w") as f:
        json.dump({"ptxas": theirs, "problems": problems,
                   "runs": {k: {kk: vv for kk, vv in x.items() if kk != "log"}
                            for k, x in runs.items()}}, f, indent=1)
    print("\n== Triton through TRITON_PTXAS_PATH=taskcache ptxas (fresh processes, empty "
          "Triton caches)")
    print_runs(runs, problems)
    shutil.rmtree(r.work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
