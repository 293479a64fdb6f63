#!/usr/bin/env python3
"""What libnvJitLink's first use costs a fresh process, with and without a
GPU visible to the CUDA driver.

The first nvJitLinkCreate of a process loads libcuda and initializes the
driver. On a GPU machine that is most of the cost of a split build's link
in a fresh process, which is why taskcache's build commands set
CUDA_VISIBLE_DEVICES empty for themselves. For each setting, in fresh
processes, prints the medians of: loading the library, the first create,
a second create, and the process's system time.

    python3 bench/linker_first_use.py [--lib PATH] [--runs 5] [--arch sm_90]
"""

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CHILD = "--child"


def child(lib, arch):
    t0 = time.perf_counter()
    jl = ctypes.CDLL(lib)
    t1 = time.perf_counter()
    opts = (ctypes.c_char_p * 1)(f"-arch={arch}".encode())
    times = []
    for _ in range(2):
        h = ctypes.c_void_p()
        t = time.perf_counter()
        if jl.nvJitLinkCreate(ctypes.byref(h), 1, opts) != 0:
            sys.exit("nvJitLinkCreate failed")
        times.append(time.perf_counter() - t)
        jl.nvJitLinkDestroy(ctypes.byref(h))
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"load": t1 - t0, "first": times[0], "second": times[1],
                      "system": r.ru_stime}))


def find_lib():
    for d in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        for sub in ("lib64", "lib"):
            p = os.path.join(d or "", sub, "libnvJitLink.so")
            if d and os.path.exists(p):
                return p
    return "libnvJitLink.so"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        return child(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default=find_lib())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()
    settings = {"as the environment has it": dict(os.environ),
                "CUDA_VISIBLE_DEVICES empty": dict(os.environ, CUDA_VISIBLE_DEVICES="")}
    res = {k: [] for k in settings}
    for _ in range(a.runs):  # the settings take turns
        for k, env in settings.items():
            p = subprocess.run([sys.executable, __file__, CHILD, a.lib, a.arch], env=env,
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"{k}: {p.stderr.strip()}")
            res[k].append(json.loads(p.stdout))
    print(f"{a.lib}, fresh processes, medians of {a.runs}")
    print(f"{'':<28} {'load':>8} {'1st create':>11} {'2nd create':>11} {'system time':>12}")
    for k, runs in res.items():
        m = {f: statistics.median(r[f] for r in runs) * 1e3 for f in runs[0]}
        print(f"{k:<28} {m['load']:6.1f}ms {m['first']:9.1f}ms {m['second']:9.2f}ms "
              f"{m['system']:10.1f}ms")


if __name__ == "__main__":
    main()
