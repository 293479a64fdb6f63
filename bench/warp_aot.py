#!/usr/bin/env python3
"""Stock NVIDIA Warp against taskcache.warp compiling real Warp modules
ahead of time (wp.compile_aot_module, sm_90 cubins), on any machine: NVRTC
needs no GPU. This is the cold-start check for small machines (the 2-core
CI box): taskcache.warp must not be more than 10% slower than stock there.
With --load it compiles what Module.load compiles for an sm_90 device (the
path a launch takes; still no GPU): taskcache.warp then builds before
Warp's codegen, which does not run on the whole module.

Every run is a fresh process that imports Warp and the module, then times
only compile_aot_module (imports cancel out). Per module, in rounds:
  stock      an empty output directory: Warp's codegen and one NVRTC call
  tc cold    an empty output directory and an empty taskcache cache
  tc shared  an empty output directory, taskcache's records present (a
             second machine, or a CI runner with a shared cache)
  edit       the module's first kernel edited (gen-N and Newton's modules,
             from a copy of the package): stock's cold compile of the edited
             module against taskcache's with the records of "tc cold"
and it prints medians side by side with the ratio against stock.

  python3 bench/warp_aot.py [--modules a,b] [--rounds N] [--jobs N] [--load]
      [--site DIR --tools DIR]   (default: $TASKCACHE_WARP_SITE, $TASKCACHE_WARP_TOOLS)

Modules: Python module names (Warp's own and Newton's, if installed) or
gen-N, this project's generated module of N kernels."""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT = ["warp.optim.linear", "warp.sparse", "newton._src.solvers.xpbd.kernels",
           "newton._src.solvers.featherstone.kernels", "gen-20", "gen-60"]

CHILD = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
import warp as wp
wp.config.quiet = True
wp.config.kernel_cache_dir = spec["warp_cache"]
wp.init()
if spec["tc"]:
    import taskcache.warp
    assert taskcache.warp.enable(cache_dir=spec["tc_cache"], jobs=spec["jobs"]), "not enabled"
if spec["module"].startswith("gen-"):
    sys.path.insert(0, spec["gen_dir"])
    import generated as module
else:
    if spec["site"]:
        sys.path.insert(0, spec["site"])
    import importlib
    module = importlib.import_module(spec["module"])
t = time.perf_counter()
if spec["load"]:  # what Module.load compiles for a device of sm_90, as a launch does
    m = wp.get_module(module.__name__)
    name = m._get_compile_output_name(None, 90, "", False, block_dim=m.options["block_dim"])
    m._compile(None, spec["out"], output_name=name, output_arch=90)
else:
    wp.compile_aot_module(module, arch=90, module_dir=spec["out"])
print("SECONDS", time.perf_counter() - t)
"""


def run_child(spec, env):
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], env=env,
                       capture_output=True, text=True, timeout=1800)
    for line in p.stdout.splitlines():
        if line.startswith("SECONDS "):
            return float(line.split()[1]), p.stderr
    raise RuntimeError(f"{spec['module']}: the run failed:\n{p.stdout}\n{p.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=",".join(DEFAULT))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--load", action="store_true",
                    help="compile as a launch does (Module.load's output name: taskcache then "
                         "builds before Warp's codegen) rather than compile_aot_module")
    ap.add_argument("--site", default=os.environ.get("TASKCACHE_WARP_SITE"))
    ap.add_argument("--tools", default=os.environ.get("TASKCACHE_WARP_TOOLS"))
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="warp-aot-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1", TASKCACHE_LOG="")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(ROOT / "python"), a.site, a.tools, env.get("PYTHONPATH")] if p)
    from warp_jit import copy_newton, edit_first_kernel, generated_source
    rows = []
    print(f"{'module':44} {'stock':>7} {'tc cold':>8} {'ratio':>6} {'tc shared':>10} "
          f"{'ratio':>6} | {'stock edit':>10} {'tc edit':>8} {'ratio':>6}   (median of "
          f"{a.rounds} fresh processes, seconds; {os.cpu_count()} CPUs)", flush=True)
    for name in a.modules.split(","):
        gen_dir, site, edited = work / f"gen-{name}", None, None
        if name.startswith("gen-"):
            gen_dir.mkdir()
            edited = gen_dir / "generated.py"
            edited.write_text(generated_source(int(name[4:])))
        elif name.startswith("newton."):  # a copy of the package, to edit
            site = work / f"site-{name}"
            copy_newton(site)
            edited = site / (name.replace(".", "/") + ".py")
        original = edited.read_text() if edited else None
        times = {"stock": [], "tc cold": [], "tc shared": [], "stock edit": [], "tc edit": []}
        failed = None
        logs = []
        for r in range(a.rounds):
            def spec(tc, tc_cache):
                out = work / "out"
                shutil.rmtree(out, ignore_errors=True)
                return {"module": name, "tc": tc, "tc_cache": str(tc_cache), "jobs": a.jobs,
                        "load": a.load,
                        "warp_cache": str(work / "warp-cache"), "out": str(out),
                        "gen_dir": str(gen_dir), "site": str(site) if site else None}
            tc_cache = work / f"tc-{r}"
            labels = [("stock", False), ("tc cold", True), ("tc shared", True)]
            for label, tc in labels + ([("stock edit", False), ("tc edit", True)] if edited
                                       else []):
                if label == "stock edit":
                    edit_first_kernel(edited)
                try:
                    s, err = run_child(spec(tc, tc_cache), env)
                except RuntimeError as e:
                    failed = str(e).strip().splitlines()[-1]
                    break
                times[label].append(s)
                logs.append(err)
            if edited:
                edited.write_text(original)
            shutil.rmtree(tc_cache, ignore_errors=True)
            if failed:
                break
        if failed:
            print(f"{name}: not measured: {failed}", flush=True)
            continue
        med = {k: statistics.median(v) if v else None for k, v in times.items()}
        row = {"module": name, "runs": times, "median": med}
        rows.append(row)
        print(f"{name:44} {med['stock']:7.2f} {med['tc cold']:8.2f} "
              f"{med['stock'] / med['tc cold']:5.2f}x {med['tc shared']:10.2f} "
              f"{med['stock'] / med['tc shared']:5.1f}x | "
              + (f"{med['stock edit']:10.2f} {med['tc edit']:8.2f} "
                 f"{med['stock edit'] / med['tc edit']:5.1f}x" if edited else
                 f"{'-':>10} {'-':>8} {'-':>6}"), flush=True)
    total = {k: sum(r["median"][k] for r in rows) for k in ("stock", "tc cold", "tc shared")}
    print(f"{'all':44} {total['stock']:7.2f} {total['tc cold']:8.2f} "
          f"{total['stock'] / total['tc cold']:5.2f}x {total['tc shared']:10.2f} "
          f"{total['stock'] / total['tc shared']:5.1f}x")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
