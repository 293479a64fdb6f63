#!/usr/bin/env python3
"""xla_ptxas_check.py -- XLA (through JAX) compiling through `taskcache ptxas` on a GPU.

With its in-process compiler and linker off (`--xla_gpu_enable_libnvptxcompiler=false
--xla_gpu_enable_libnvjitlink=false`), XLA runs ptxas on every kernel, one
module per kernel (`ptxas TMPFILE -o TMPFILE -arch=sm_90a --warn-on-spills
-v`), and takes the first ptxas it finds in `sys.prefix/bin`,
/usr/local/nvidia/bin, /usr/local/cuda/bin (its flag
`--xla_gpu_cuda_data_dir` did not move that search in JAX 0.11.2). This
check runs the programs of tests/realworld/gen/xla/gen_xla.py (an MLP
training step, a transformer block's gradient, a particle simulation,
sorts and scatters: 135 ptxas runs with the flags below, about 450 with
XLA's autotuner on) in fresh processes, with JAX's compilation cache off:

  ptxas      XLA running the toolkit's ptxas (the reference results), twice:
             XLA must give the same results in two processes
  first      `sys.prefix/bin/ptxas` is `taskcache shims`'s ptxas, with the
             toolkit's ptxas behind it (TASKCACHE_PTXAS) and an empty cache
  second     the same, with the cache of `first`
  inprocess  XLA's defaults (its own compiler, another release): timed
             only, its results may differ in the last bits

Every process runs with `--xla_gpu_deterministic_ops=true
--xla_gpu_autotune_level=0`: XLA's autotuner picks matmul variants by
their timings, and its scatter-add sums in the order atomics land, so
without them two processes of the same program differ in the last bits
(and in the modules they compile) with or without taskcache. Every
output array is hashed. Checks (shared with triton_ptxas_check.py):
ptxas, first and second give identical results; `first` built every
module through taskcache and handed nothing but `--version` to NVIDIA's
ptxas; `second` compiled nothing. The link to taskcache is removed when
the check ends. Prints a table last and writes OUT/xla_ptxas.json. Exit
status 0 when every check holds, 1 otherwise, 2 when JAX or a GPU is
missing (reported, not failed: --need to fail).

  python3 tests/gpu/xla_ptxas_check.py --taskcache build/taskcache [--out DIR]
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GEN_XLA = os.path.join(HERE, "..", "realworld", "gen", "xla")
sys.path.insert(0, HERE)
from triton_ptxas_check import Runner, arguments, check_runs, print_runs  # noqa: E402

PROGRAM = r'''
import hashlib, json, os, sys, time
sys.path.insert(0, GEN_XLA)
import gen_xla, jax, numpy as np
if os.environ.get("XLA_CHECK_PTXAS_PROCESSES") == "1":
    gen_xla.use_ptxas_processes()
else:
    jax.config.update("jax_enable_compilation_cache", False)
t0 = time.time()
h = hashlib.sha256()
for prog in gen_xla.PROGRAMS:
    for leaf in jax.tree_util.tree_leaves(jax.block_until_ready(prog())):
        h.update(np.asarray(leaf).tobytes())
print(json.dumps({"seconds": time.time() - t0, "hash": h.hexdigest(), "jax": jax.__version__}))
'''


def main():
    a = arguments(__doc__, "JAX or GPU")
    probe = subprocess.run([sys.executable, "-c", "import jax; print(jax.devices('gpu')[0])"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"xla_ptxas_check: no JAX with a GPU here: {probe.stderr.strip()[-300:]}")
        return 1 if a.need else 2
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    theirs = os.path.join(cuda, "bin", "ptxas")
    link = os.path.join(sys.prefix, "bin", "ptxas")
    if os.path.lexists(link):
        print(f"xla_ptxas_check: {link} exists: XLA would run it rather than the toolkit's")
        return 1
    r = Runner(a)
    r.prog = os.path.join(r.work, "xla_prog.py")
    with open(r.prog, "w") as f:
        f.write(f"GEN_XLA = {os.path.abspath(GEN_XLA)!r}\n" + PROGRAM)
    shims = os.path.join(r.work, "shims")
    subprocess.run([a.taskcache, "shims", shims], check=True, capture_output=True)
    # the same kernels in every process: no autotuning (whose choice
    # depends on timings) and no atomics whose order varies (scatter-add)
    same = {"XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_deterministic_ops=true"
                          " --xla_gpu_autotune_level=0").strip()}
    processes = dict(same, XLA_CHECK_PTXAS_PROCESSES="1")
    via = dict(processes, TASKCACHE_PTXAS=theirs, TASKCACHE_DIR=r.fresh("taskcache"))
    runs, problems = {}, []
    try:
        runs["ptxas"] = r.run("ptxas", processes)
        again = r.run("ptxas-again", processes)
        if again["hash"] != runs["ptxas"]["hash"]:
            problems.append("XLA running ptxas gave other results in a second process: the "
                            "comparison below cannot tell taskcache's part")
        os.symlink(os.path.join(shims, "bin", "ptxas"), link)
        try:
            runs["first"] = r.run("first", via)
            runs["second"] = r.run("second", via)
        finally:
            os.remove(link)
        inprocess = r.run("inprocess", same)
    except Exception as e:
        problems.append(str(e))
        inprocess = None
    problems += check_runs(runs, "XLA running ptxas", "did XLA run sys.prefix/bin/ptxas?")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "xla_ptxas.json"), "w") as f:
        json.dump({"ptxas": theirs, "problems": problems,
                   "runs": {k: {kk: vv for kk, vv in x.items() if kk != "log"}
                            for k, x in dict(runs, inprocess=inprocess or {}).items()}},
                  f, indent=1)
    print("\n== XLA through taskcache ptxas (JAX, fresh processes, JAX's cache off)")
    print_runs(dict(runs, **({"inprocess": inprocess} if inprocess else {})), problems)
    if inprocess:
        same = inprocess["hash"] == runs.get("ptxas", {}).get("hash")
        print(f"inprocess: XLA's own compiler, results {'identical' if same else 'not identical'}"
              " to ptxas's (not a check: another compiler release)")
    shutil.rmtree(r.work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
