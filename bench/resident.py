#!/usr/bin/env python3
"""What a process that stays up would save a relink.

A relink (every unit cached, no module record) costs the command line
about 40 ms on 2 cores; issue 11 asks for 30. Before building a resident
build process, this measures what one would be worth, on the generated
250-kernel module (bench/gen_module.py) or --module FILE, side by side:

  command line      `taskcache build --no-module-cache`, a fresh process each
  one process       the library's tc_build, again and again in one process
                    (through the Python package), after one untimed build
  forked children   the same, each build in a child forked from that
                    process (the cheap way to serve requests from a warm
                    process, if it were as fast)

Each build's image is checked against the command line's. Medians of
--runs, [min-max], in ms.

    python3 bench/resident.py [--taskcache build/taskcache]
                              [--lib build/libtaskcache.so] [--runs 9]
                              [--module FILE.ptx]
"""

import argparse
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
sys.path.insert(0, str(ROOT / "python"))
import gen_module  # noqa: E402


def cell(ts):
    ms = sorted(t * 1000 for t in ts)
    return f"{statistics.median(ms):7.1f} [{ms[0]:.1f}-{ms[-1]:.1f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskcache", default=str(ROOT / "build" / "taskcache"))
    ap.add_argument("--lib", default=str(ROOT / "build" / "libtaskcache.so"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--module", help="a PTX module (default: generate the 250-kernel one)")
    a = ap.parse_args()
    os.environ["TASKCACHE_LIB"] = a.lib
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # as the command line does for itself
    import taskcache  # noqa: E402  (python/taskcache, the library at --lib)

    work = tempfile.mkdtemp(prefix="tc-resident-")
    try:
        ptx = a.module
        if not ptx:
            ptx = os.path.join(work, "m.ptx")
            gen_module.build_module(ptx, tasks=250, arch=a.arch)
        text = pathlib.Path(ptx).read_bytes()
        cli_cache, lib_cache = os.path.join(work, "cli"), os.path.join(work, "lib")
        out = os.path.join(work, "out.cubin")
        cmd = [a.taskcache, "build", ptx, "-o", out, "--arch", a.arch, "--cache-dir",
               cli_cache, "-q"]
        print(f"{ptx}: {len(text):,} bytes; priming both caches (two cold builds)",
              flush=True)
        subprocess.run(cmd, check=True)
        reference = pathlib.Path(out).read_bytes()

        cli = []
        for _ in range(a.runs):
            t = time.perf_counter()
            subprocess.run(cmd + ["--no-module-cache"], check=True)
            cli.append(time.perf_counter() - t)
            assert pathlib.Path(out).read_bytes() == reference, "command line: another image"

        cache = taskcache.Cache(lib_cache)
        opts = taskcache.Options(arch=a.arch, module_cache=False)
        cache.build(text, opts)  # cold: compiles every unit
        cache.build(text, opts)  # the first relink of the process
        same = []
        for _ in range(a.runs):
            t = time.perf_counter()
            r = cache.build(text, opts)
            same.append(time.perf_counter() - t)
            assert r.report.units_compiled == 0, "a relink compiled"

        forked = []
        for _ in range(a.runs):
            t = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                r = cache.build(text, opts)
                os._exit(0 if r.report.units_compiled == 0 else 1)
            _, status = os.waitpid(pid, 0)
            forked.append(time.perf_counter() - t)
            assert status == 0, "a forked relink failed or compiled"

        print(f"\nrelink of every unit, no module record, ms (median [min-max] of {a.runs}):")
        print(f"  command line       {cell(cli)}")
        print(f"  one process        {cell(same)}")
        print(f"  forked children    {cell(forked)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
