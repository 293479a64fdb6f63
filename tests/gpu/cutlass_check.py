#!/usr/bin/env python3
"""cutlass_check.py -- CUTLASS's Hopper GEMMs built by nvcc through taskcache, run.

A CUDA build as users have them: a program of CUTLASS 3.x kernels
(tests/gpu/cutlass_gemm.cu, the corpus's five sm_90a GEMMs: warp-specialized
TMA pipelines, clusters, setmaxnreg, stream-K) compiled twice by nvcc, once
alone and once through `taskcache shims` (nvcc's ptxas step is taskcache
ptxas). The build runs anywhere nvcc does; the run needs the GPU.

  cutlass_check.py build --cutlass DIR --taskcache BIN --out BINDIR [--nvcc NVCC]
  cutlass_check.py run --bins BINDIR [--out DIR]

build: BINDIR/cutlass_gemm.nvcc and BINDIR/cutlass_gemm.taskcache, the
second with an empty taskcache cache; taskcache ptxas must have built the
device code itself (its log says so; a hand-over to NVIDIA's ptxas fails
the build step). BINDIR/build.json says what was built, and how long nvcc
took each way.

run: both programs on the GPU. Every GEMM must run and match its naive
reference (exactly on integer inputs, within the type's tolerance on random
ones: see cutlass_gemm.cu), and the two programs must give the same bytes
(hash) for every GEMM and problem. Then (informational) each GEMM's time on
4096^3: the programs take turns, --rounds processes each, every process the
median of --reps runs; the table shows the median of those and the ratio
taskcache / nvcc. Prints the tables; writes DIR/cutlass.json.

Exit status: 0 passed; 1 a build, a GEMM or a comparison failed; 2 a tool,
the binaries or the GPU is missing.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from cuda_tools import find_tool  # noqa: E402  (scripts/cuda_tools.py)

SOURCE = os.path.join(HERE, "cutlass_gemm.cu")
KERNELS = os.path.join(ROOT, "tests", "realworld", "gen", "cutlass")
BUILDS = ("nvcc", "taskcache")


def nvcc_command(nvcc, cutlass, out):
    return [nvcc, "-arch=sm_90a", "-std=c++17", "--expt-relaxed-constexpr", "-O3",
            "-I", os.path.join(cutlass, "include"),
            "-I", os.path.join(cutlass, "tools", "util", "include"),
            "-I", KERNELS, SOURCE, "-o", out]


def build(a):
    nvcc = find_tool("nvcc", a.nvcc)
    if not nvcc:
        print(f"cutlass_check: nvcc not found ({a.nvcc or 'CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH'})")
        return 2
    if not os.path.isfile(os.path.join(a.cutlass, "include", "cutlass", "cutlass.h")):
        print(f"cutlass_check: {a.cutlass} holds no CUTLASS (include/cutlass/cutlass.h)")
        return 2
    os.makedirs(a.out, exist_ok=True)
    shims, cache = os.path.join(a.out, "shims"), os.path.join(a.out, "cache")
    log = os.path.join(a.out, "ptxas.log")
    for p in (shims, cache, log):
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    r = subprocess.run([a.taskcache, "shims", shims, "--nvcc", nvcc], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"cutlass_check: taskcache shims failed:\n{r.stdout}{r.stderr}")
        return 1
    env = dict(os.environ, TASKCACHE_DIR=cache, TASKCACHE_LOG=log)
    seconds = {}
    for name, compiler in (("nvcc", nvcc), ("taskcache", os.path.join(shims, "bin", "nvcc"))):
        out = os.path.join(a.out, "cutlass_gemm." + name)
        t0 = time.time()
        r = subprocess.run(nvcc_command(compiler, a.cutlass, out), capture_output=True, text=True,
                           env=env if name == "taskcache" else None)
        seconds[name] = round(time.time() - t0, 1)
        if r.returncode != 0:
            print(f"cutlass_check: the {name} build failed ({r.returncode}):\n{r.stderr[-4000:]}")
            return 1
        print(f"built {out} in {seconds[name]} s")
    lines = open(log).read().splitlines() if os.path.exists(log) else []
    for l in lines:
        print("  taskcache ptxas:", l[:200])
    # nvcc also has ptxas check the PTX's syntax for the virtual target
    # (compute_90): that goes to NVIDIA's ptxas, as taskcache ptxas says
    built = [l for l in lines if " kernels in " in l or "module record hit" in l]
    handed = [l for l in lines if l not in built and "is virtual" not in l]
    if not built or handed:
        print("cutlass_check: FAIL: taskcache ptxas did not build the device code itself"
              f" ({len(built)} build line(s); handed to NVIDIA's ptxas: {handed})")
        return 1
    with open(os.path.join(a.out, "build.json"), "w") as f:
        json.dump({"seconds": seconds, "taskcache_log": lines,
                   "nvcc": subprocess.run([nvcc, "--version"], capture_output=True,
                                          text=True).stdout.strip().splitlines()[-1:]}, f, indent=1)
    return 0


def run_program(path, *args):
    t0 = time.time()
    r = subprocess.run([path, *args], capture_output=True, text=True, timeout=300)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return {"exit": r.returncode, "seconds": round(time.time() - t0, 2), "rows": rows,
            "stderr": r.stderr[-2000:]}


def time_programs(paths, rounds, reps):
    """Each GEMM's median time per build over ROUNDS processes that take turns."""
    ms = {b: {} for b in BUILDS}
    for _ in range(rounds):
        for b in BUILDS:
            res = run_program(paths[b], "--time", str(reps))
            for r in res["rows"]:
                if r["problem"] == "timed" and r["status"] == "ok":
                    ms[b].setdefault(r["gemm"], []).append(r["ms"])
    print(f"\n{'gemm, 4096^3':30} {'nvcc ms':>16} {'taskcache ms':>16} {'ratio':>7}  "
          f"(median of {rounds} processes, each the median of {reps} runs)")
    table = {}
    for g in sorted(ms["nvcc"]):
        n, t = ms["nvcc"][g], ms["taskcache"].get(g, [])
        if not t:
            continue
        mn, mt = statistics.median(n), statistics.median(t)
        table[g] = {"nvcc_ms": n, "taskcache_ms": t, "ratio": mt / mn}
        print(f"{g:30} {mn:8.3f} [{min(n):.3f}-{max(n):.3f}] {mt:8.3f} [{min(t):.3f}-{max(t):.3f}] "
              f"{mt / mn:6.3f}x")
    return table


def run(a):
    paths = {b: os.path.join(a.bins, "cutlass_gemm." + b) for b in BUILDS}
    missing = [p for p in paths.values() if not os.access(p, os.X_OK)]
    if missing:
        print(f"cutlass_check: no binaries: {', '.join(missing)} (run 'cutlass_check.py build')")
        return 2
    if shutil.which("nvidia-smi") is None:
        print("cutlass_check: no GPU (nvidia-smi not found)")
        return 2
    results = {b: run_program(p) for b, p in paths.items()}
    problems = []
    for b, res in results.items():
        if res["exit"] != 0 or not res["rows"]:
            problems.append(f"{b}: exit {res['exit']}, {len(res['rows'])} rows; {res['stderr'][-300:]}")
    keyed = {b: {(r["gemm"], r["problem"]): r for r in res["rows"]} for b, res in results.items()}
    print(f"{'gemm':30} {'problem':7} {'m x n x k':16} {'nvcc':28} {'taskcache ptxas':28} same")
    for key in sorted(set(keyed["nvcc"]) | set(keyed["taskcache"])):
        rows = [keyed[b].get(key) for b in BUILDS]
        cells = []
        for b, r in zip(BUILDS, rows):
            if r is None:
                cells.append("missing")
                problems.append(f"{b}: {key} missing")
                continue
            figure = r.get("wrong_entries", r.get("max_error"))
            cells.append(f"{r['status']}, {'wrong' if r['problem'] == 'exact' else 'err'} {figure:g}"
                         f"{'' if r['pass'] else ' FAIL'}")
            if not r["pass"]:
                problems.append(f"{b}: {key[0]} {key[1]}: {r['status']}, {figure:g}")
        same = None not in rows and rows[0]["hash"] == rows[1]["hash"]
        if None not in rows and not same:
            problems.append(f"{key[0]} {key[1]}: the two builds' results differ")
        dims = rows[0] or rows[1]
        print(f"{key[0]:30} {key[1]:7} {dims['m']}x{dims['n']}x{dims['k']:<8} "
              f"{cells[0]:28} {cells[1]:28} {'yes' if same else 'NO'}")
    timing = time_programs(paths, a.rounds, a.reps) if a.rounds > 0 and not problems else {}
    with open(os.path.join(a.out, "cutlass.json"), "w") as f:
        json.dump({"results": results, "problems": problems, "timing": timing}, f, indent=1)
    for p in problems:
        print("PROBLEM:", p)
    print(f"cutlass: {len(keyed['taskcache'])} GEMM runs, {len(problems)} problem(s); "
          f"programs ran in {results['nvcc']['seconds']} s and {results['taskcache']['seconds']} s")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build", help="build both programs (no GPU needed)")
    b.add_argument("--cutlass", required=True, help="a CUTLASS checkout (4.x)")
    b.add_argument("--taskcache", required=True, help="the taskcache binary")
    b.add_argument("--out", required=True, help="where the programs go")
    b.add_argument("--nvcc", help="NVIDIA's nvcc (default: the toolkit's, $CUDA_HOME, $CUDA_PATH or /usr/local/cuda, "
                   "else PATH)")
    r = sub.add_parser("run", help="run both programs on the GPU and compare")
    r.add_argument("--bins", required=True, help="the folder 'build' wrote")
    r.add_argument("--out", default=".", help="where cutlass.json goes")
    r.add_argument("--rounds", type=int, default=3, help="timed processes per build (0: no timing)")
    r.add_argument("--reps", type=int, default=20, help="timed runs of each GEMM in a process")
    a = ap.parse_args()
    return build(a) if a.what == "build" else run(a)


if __name__ == "__main__":
    sys.exit(main())
