#!/usr/bin/env python3
"""Unit size against edits: what a one-kernel edit costs at several unit
sizes, beside what compiling the edited kernel alone costs, and what the
cold build costs at those sizes.

An edit recompiles the unit that holds the edited kernel and links. The
larger the units, the more unedited kernels an edit compiles again; the
smaller, the more a cold build pays (shared functions in more units, more
objects to link). Issue 11 asks for both: an edit within 1.3 x (the kernel
alone) + 30 ms, and a cold build well below `ptxas -split-compile=0`. For
each module, in fresh processes:

  cold       taskcache build at each size, a cache holding only the
             toolchain memos; interleaved, medians of --runs; beside it
             `ptxas -split-compile=0` (split0) and the ratio split0 / size
  edit       --edits kernels spread over the module, each changed alone
             (bench/gen_module.py's edit: a float immediate nudged, or a
             membar added), built in a cache that holds the module as it
             was at that size; one build per kernel and size, the sizes
             taking turns; medians and [min-max]
  alone      ptxas on the edited kernel alone (every other .entry removed),
             median of --runs per kernel: the yardstick
  within     how many of the edits took at most 1.3 x alone + 30 ms

    python3 bench/edit_cost.py [--taskcache PATH] [--jobs N] [--runs 3] [--edits 9]
                               [--costs 250,700,1000] [MODULE ...]

MODULE: "generated" (bench/gen_module.py's 250-kernel module, seed 1), a
corpus name such as numba/physics_step, or a .ptx file. Default: the
generated module and the two physics steps of the real-world corpus.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_module  # noqa: E402
from run import kernel_alone, run_timed  # noqa: E402
from unit_cost import load, module_arch, unit_count  # noqa: E402
from small_modules import corpus_args  # noqa: E402

EDIT_OVER_ALONE = (1.3, 30.0)  # the bound: 1.3 x alone + 30 ms
DEFAULT_MODULES = ["generated", "numba/physics_step", "quadrants/physics_step"]


def timed(cmd):
    """Milliseconds; a failing command stops the benchmark with its output."""
    return 1000 * run_timed(cmd)


def median_range(v):
    return f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]"


def module_path(name, work, arch):
    if name != "generated":
        return load(name, work)
    out = os.path.join(work, "generated.ptx")
    gen_module.build_module(out, tasks=250, seed=1, arch=arch)
    return out


def main():
    ap = corpus_args(__doc__, 3)
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--edits", type=int, default=9)
    ap.add_argument("--costs", default="250,700,1000")
    a = ap.parse_args()
    sizes = [("default", [])] + [(f"uc={c}", ["--unit-cost", c]) for c in a.costs.split(",") if c]
    work = tempfile.mkdtemp(prefix="edit-cost-")
    print(f"-j {a.jobs}; cold: medians of {a.runs}, interleaved; edit: {a.edits} kernels, "
          f"one build each per size; within: edits <= {EDIT_OVER_ALONE[0]} x alone + "
          f"{EDIT_OVER_ALONE[1]:.0f} ms (ms)")
    try:
        for name in a.modules:
            ptx = module_path(name, work, a.arch)
            arch = module_arch(ptx, a.arch)
            text = open(ptx).read()
            names = gen_module.entry_names(text)
            picks = sorted({i * len(names) // a.edits for i in range(a.edits)})

            def tc(inp, cache, flags):
                return [a.taskcache, "build", inp, "--arch", arch, "-j", str(a.jobs),
                        "--cache-dir", cache, "-o", os.devnull, *flags]

            # a cache holding only the toolchain memos, copied for every cold build
            memos = os.path.join(work, "memos")
            shutil.rmtree(memos, ignore_errors=True)
            subprocess.run(tc(ptx, memos, []), check=True, capture_output=True)
            shutil.rmtree(os.path.join(memos, "v1"))

            def fresh(src):
                d = os.path.join(work, "c")
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(src, d)
                return d
            cold = {label: [] for label, _ in sizes}
            cold["split0"] = []
            for _ in range(a.runs):
                for label, flags in sizes:
                    cold[label].append(timed(tc(ptx, fresh(memos), flags)))
                cold["split0"].append(timed([a.ptxas, f"-arch={arch}", "-split-compile=0", ptx,
                                             "-o", os.devnull]))
            # the module as it was, at each size
            primed = {}
            for label, flags in sizes:
                primed[label] = os.path.join(work, f"primed-{len(primed)}")
                subprocess.run(tc(ptx, primed[label], flags), check=True, capture_output=True)
            edit = {label: [] for label, _ in sizes}
            alone = []
            for k in picks:
                new, info = gen_module.edit_ptx(text, k)
                inp = os.path.join(work, "edit.ptx")
                with open(inp, "w") as f:
                    f.write(new)
                one = os.path.join(work, "alone.ptx")
                with open(one, "w") as f:
                    f.write(kernel_alone(new, info["entry"]))
                alone.append(statistics.median(
                    timed([a.ptxas, f"-arch={arch}", one, "-o", os.devnull])
                    for _ in range(a.runs)))
                for label, flags in sizes:
                    edit[label].append(timed(tc(inp, fresh(primed[label]), flags)))
            split0 = statistics.median(cold["split0"])
            print(f"\n{name}: {len(names)} kernels, {os.path.getsize(ptx):,} bytes; "
                  f"split0 {split0:.0f}; alone {median_range(alone)}")
            print(f"  {'size':<10} {'units':>5} {'cold':>16} {'split0/cold':>11} "
                  f"{'edit':>16} {'within':>7}")
            for label, flags in sizes:
                units = unit_count(a.taskcache, ptx, arch, "-j", str(a.jobs), *flags)
                c = statistics.median(cold[label])
                within = sum(e <= EDIT_OVER_ALONE[0] * al + EDIT_OVER_ALONE[1]
                             for e, al in zip(edit[label], alone))
                print(f"  {label:<10} {units:>5} {median_range(cold[label]):>16} "
                      f"{split0 / c:>10.2f}x {median_range(edit[label]):>16} "
                      f"{within:>3}/{len(picks)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
