#!/usr/bin/env python3
"""Unit size: what a cold build costs at several unit sizes, against ptxas.

The in-process compiler starts a unit for almost nothing, so on a machine
with many cores smaller units could shorten a cold build (its critical
path is the largest unit), at the price of more shared functions compiled
more than once and more objects to link. For each module, in fresh
processes, interleaved, medians of --runs:

  uc=N       taskcache build --unit-cost N, a cache that holds only the
             toolchain memos (as a user's cache does)
  empty      the default unit size with an empty cache directory: the
             build also establishes the linker's and compiler's identity
             (a digest of libnvJitLink's ~100 MB), as the first build in a
             new cache, or `taskcache run` with a new TASKCACHE_DIR, does
  ptxas      ptxas -arch=ARCH on the module
  split0     ptxas -arch=ARCH -split-compile=0 (ptxas' own threads)

    python3 bench/unit_cost.py [--taskcache PATH] [--runs 5] [--jobs N]
                               [--costs 1000,500,250,125] [--variant LABEL=OPTIONS]
                               [MODULE ...]

MODULE is a .ptx (or .ptx.xz) file or a corpus name such as
quadrants/runtime (default: the Quadrants, numba and llm.c modules of
tests/realworld/corpus whose whole build takes longest).
"""

import argparse
import lzma
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile

from small_modules import CORPUS, ROOT, ms, timed

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("--taskcache", default=str(ROOT / "build" / "taskcache"))
    ap.add_argument("--ptxas", default=shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--costs", default="1000,500,250,125")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=OPTIONS",
                    help="one more column: taskcache with these build options (cold, memos "
                    "kept), e.g. 'procs=--unit-cost 500 --compiler ptxas'")
    a = ap.parse_args()
    costs = [int(c) for c in a.costs.split(",")]
    work = tempfile.mkdtemp(prefix="unit-cost-")
    try:
        mods = [(m, load(m, work)) for m in a.modules]
        # a cache that holds only the toolchain memos
        primed = os.path.join(work, "primed")
        subprocess.run([a.taskcache, "build", mods[0][1], "--arch", a.arch, "--cache-dir", primed,
                        "-o", os.devnull], check=True, capture_output=True)
        shutil.rmtree(os.path.join(primed, "v1"), ignore_errors=True)

        def cache(keep_memos):
            d = tempfile.mkdtemp(dir=work)
            if keep_memos:
                os.rmdir(d)
                shutil.copytree(primed, d)
            return d

        def tc(ptx, keep_memos, *extra):
            return [a.taskcache, "build", ptx, "--arch", a.arch, "-j", str(a.jobs), "--cache-dir",
                    cache(keep_memos), "-o", os.devnull, *extra]
        cmds = {f"uc={c}": (lambda p, c=c: tc(p, True, "--unit-cost", str(c))) for c in costs}
        for v in a.variant:
            label, _, opts = v.partition("=")
            cmds[label] = lambda p, opts=opts: tc(p, True, *opts.split())
        cmds["empty"] = lambda p: tc(p, False)
        cmds["ptxas"] = lambda p: [a.ptxas, f"-arch={a.arch}", p, "-o", os.devnull]
        cmds["split0"] = lambda p: [a.ptxas, f"-arch={a.arch}", "-split-compile=0", p, "-o",
                                    os.devnull]
        print(f"cold builds, -j {a.jobs}, fresh processes, medians of {a.runs}, interleaved")
        print(f"{'module':<26} {'units':>17} " + " ".join(f"{k:>9}" for k in cmds))
        for name, ptx in mods:
            units = []
            for c in costs:
                out = subprocess.run([a.taskcache, "explain", ptx, "--arch", a.arch, "--no-cache",
                                      "--unit-cost", str(c)], capture_output=True, text=True).stdout
                line = next((l for l in out.splitlines() if l.startswith("units:")), "units: ?")
                units.append(line.split()[1])
            t = {k: [] for k in cmds}
            for _ in range(a.runs):
                for k, c in cmds.items():
                    t[k].append(timed(c(ptx)))
            med = {k: statistics.median(v) if None not in v else None for k, v in t.items()}
            print(f"{name:<26} {'/'.join(units):>17} " + " ".join(ms(med[k]) for k in cmds),
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
