#!/usr/bin/env python3
"""Unit size: what a cold build costs at several unit sizes, against ptxas.

The in-process compiler starts a unit for almost nothing, so on a machine
with many cores smaller units could shorten a cold build (its critical
path is the largest unit), at the price of more shared functions compiled
more than once and more objects to link. For each module, in fresh
processes, interleaved, medians of --runs:

  uc=N       taskcache build --unit-cost N, a cache that holds only the
             toolchain memos (as a user's cache does)
  default    taskcache build with no unit size given (units of 500
             statements; a module that fits in one unit of 1000, or whose
             kernels cost 1,500 statements or less, is compiled whole),
             memos kept
  empty      the default unit size with an empty cache directory: the
             build also establishes the linker's and compiler's identity
             (a digest of libnvJitLink's ~100 MB), as the first build in a
             new cache, or `taskcache run` with a new TASKCACHE_DIR, does
  ptxas      ptxas -arch=ARCH on the module
  split0     ptxas -arch=ARCH -split-compile=0 (ptxas' own threads)
  split0'    the same command again, timed in the same rounds: how far
             two medians of one command lie apart on this machine
  vs split0  split0 / default: above 1, taskcache's default is faster
  noise      the ratio of split0's two medians, smaller over larger

and, at the end, on how many modules the default is slower than split0,
on how many it is slower by more than the noise (its ratio below the
module's noise), and the smallest ratio among modules whose whole ptxas
build takes 1 s or more. A module of one kernel is compiled whole, by the
compiler split0 runs, so its ratio is 1 but for taskcache's own work and
the machine's noise.

    python3 bench/unit_cost.py [--taskcache PATH] [--runs 5] [--jobs N]
                               [--costs 1000,500,250,125] [--variant LABEL=OPTIONS]
                               [MODULE ...]

MODULE is a .ptx (or .ptx.xz) file, a corpus name such as
quadrants/runtime, or "all": every module of tests/realworld/corpus
(default: the Quadrants, numba and llm.c modules whose whole build takes
longest). --costs '' leaves out the uc=N columns.
"""

import lzma
import math
import re
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile

from small_modules import CORPUS, corpus_args, ms, timed

DEFAULT_MODULES = ["quadrants/runtime", "quadrants/physics_step", "numba/physics_step",
                   "nvcc-llmc/train_gpt2"]


def load(name, work):
    path = pathlib.Path(name)
    if not path.exists():
        path = CORPUS / (name + ".ptx.xz")
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        data = lzma.decompress(data)
    # Quadrants' dumps end in the NUL that the driver reads to; ptxas
    # refuses it (taskcache reads to it, so both see the same text)
    data = data.rstrip(b"\0")
    out = os.path.join(work, name.replace("/", "__").removesuffix(".xz"))
    if not out.endswith(".ptx"):
        out += ".ptx"
    with open(out, "wb") as f:
        f.write(data)
    return out


def unit_count(taskcache, ptx, arch, *flags):
    """The units taskcache makes of ptx with these build flags ("units:" of
    `taskcache explain`; a module compiled whole counts as one)."""
    out = subprocess.run([taskcache, "explain", ptx, "--arch", arch, "--no-cache", *flags],
                         capture_output=True, text=True).stdout
    return next((line.split()[1] for line in out.splitlines() if line.startswith("units:")), "1")


def module_arch(ptx, default):
    """The module's own .target (Triton's PTX is sm_90a), else default."""
    with open(ptx, errors="replace") as f:
        m = re.search(r"^\s*\.target\s+(sm_\w+)", f.read(1 << 16), re.M)
    return m.group(1) if m else default


def main():
    ap = corpus_args(__doc__, 5)
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--costs", default="1000,500,250,125")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=OPTIONS",
                    help="one more column: taskcache with these build options (cold, memos "
                    "kept), e.g. 'procs=--unit-cost 500 --compiler ptxas'")
    a = ap.parse_args()
    costs = [int(c) for c in a.costs.split(",") if c]
    if "all" in a.modules:
        a.modules = sorted(str(p.relative_to(CORPUS)).removesuffix(".ptx.xz")
                           for p in CORPUS.glob("*/*.ptx.xz"))
    work = tempfile.mkdtemp(prefix="unit-cost-")
    try:
        mods = [(m, load(m, work)) for m in a.modules]
        arch_of = {ptx: module_arch(ptx, a.arch) for _, ptx in mods}
        # a cache that holds only the toolchain memos
        primed = os.path.join(work, "primed")
        subprocess.run([a.taskcache, "build", mods[0][1], "--arch", arch_of[mods[0][1]],
                        "--cache-dir", primed,
                        "-o", os.devnull], check=True, capture_output=True)
        shutil.rmtree(os.path.join(primed, "v1"), ignore_errors=True)

        def cache(keep_memos):
            d = tempfile.mkdtemp(dir=work)
            if keep_memos:
                os.rmdir(d)
                shutil.copytree(primed, d)
            return d

        def tc(ptx, keep_memos, *extra):
            return [a.taskcache, "build", ptx, "--arch", arch_of[ptx], "-j", str(a.jobs), "--cache-dir",
                    cache(keep_memos), "-o", os.devnull, *extra]
        cmds = {f"uc={c}": (lambda p, c=c: tc(p, True, "--unit-cost", str(c))) for c in costs}
        for v in a.variant:
            label, _, opts = v.partition("=")
            cmds[label] = lambda p, opts=opts: tc(p, True, *opts.split())
        cmds["default"] = lambda p: tc(p, True)
        cmds["empty"] = lambda p: tc(p, False)
        cmds["ptxas"] = lambda p: [a.ptxas, f"-arch={arch_of[p]}", p, "-o", os.devnull]
        cmds["split0"] = lambda p: [a.ptxas, f"-arch={arch_of[p]}", "-split-compile=0", p, "-o",
                                    os.devnull]
        cmds["split0'"] = cmds["split0"]
        print(f"cold builds, -j {a.jobs}, fresh processes, medians of {a.runs}, interleaved")
        print(f"{'module':<38} {'units':>9} " + " ".join(f"{k:>9}" for k in cmds)
              + f" {'vs split0':>9} {'noise':>6}")
        ratios = {}
        for name, ptx in mods:
            units = [unit_count(a.taskcache, ptx, arch_of[ptx],
                                *(["--unit-cost", str(c)] if c else ["-j", str(a.jobs)]))
                     for c in [None] + costs]
            t = {k: [] for k in cmds}
            for _ in range(a.runs):
                for k, c in cmds.items():
                    t[k].append(timed(c(ptx)))
            med = {k: statistics.median(v) if None not in v else None for k, v in t.items()}
            r = med["split0"] / med["default"] if med["split0"] and med["default"] else None
            two = sorted((med["split0"], med["split0'"])) if med["split0"] and med["split0'"] else None
            noise = two[0] / two[1] if two else None
            if r:
                ratios[name] = (r, med["ptxas"], noise)
            print(f"{name:<38} {'/'.join(units):>9} " + " ".join(ms(med[k]) for k in cmds)
                  + (f" {r:>8.2f}x" if r else f" {'-':>9}")
                  + (f" {noise:>6.2f}" if noise else f" {'-':>6}"), flush=True)
        slower = sorted((r, n) for n, (r, _, _) in ratios.items() if r < 1)
        print(f"default slower than split0 on {len(slower)} of {len(ratios)} modules"
              + (": " + ", ".join(f"{n} {r:.2f}x" for r, n in slower) if slower else ""))
        beyond = sorted((r, n) for n, (r, _, noise) in ratios.items() if noise and r < noise)
        print(f"slower by more than the noise on {len(beyond)} of {len(ratios)} modules"
              + (": " + ", ".join(f"{n} {r:.2f}x (noise {ratios[n][2]:.2f})" for r, n in beyond)
                 if beyond else ""))
        if ratios:
            logs = [math.log(r) for r, _, _ in ratios.values()]
            print(f"split0 / default over all {len(ratios)} modules: geometric mean "
                  f"{math.exp(sum(logs) / len(logs)):.3f}x, median "
                  f"{statistics.median(r for r, _, _ in ratios.values()):.3f}x")
        big = [(r, n) for n, (r, whole, _) in ratios.items() if whole and whole >= 1.0]
        if big:
            r, n = min(big)
            print(f"modules whose whole ptxas build takes >= 1 s: {len(big)}, "
                  f"the smallest ratio {r:.2f}x ({n})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
