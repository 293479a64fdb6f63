#!/usr/bin/env python3
"""Scaling check: the slicer's work must grow linearly with module size.

Generates synthetic modules of N tiny kernels (each calls one of 16 shared
helpers and touches a shared global), and times `taskcache explain` (parse,
slice, group and key every unit and every slice; no compiling) in fresh
processes. Prints the median time and the time per kernel for each N: with
linear work the per-kernel time stays flat as N grows 16x.

    python3 bench/scaling.py [--taskcache PATH] [--sizes 1000 2000 4000 8000 16000] [--runs 3]
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def module(n):
    out = [".version 8.0", ".target sm_90", ".address_size 64",
           ".global .align 4 .b8 g_data[4096];"]
    for h in range(16):
        out.append(f""".func (.param .b32 r) helper_{h} (.param .b32 x)
{{
 .reg .b32 %r<4>;
 ld.param.u32 %r1, [x];
 mul.lo.s32 %r2, %r1, {h + 3};
 add.s32 %r3, %r2, {h};
 st.param.b32 [r], %r3;
 ret;
}}""")
    for k in range(n):
        out.append(f""".visible .entry task_{k:06d} (.param .u64 p)
{{
 .reg .b32 %r<4>;
 .reg .b64 %rd<3>;
 ld.param.u64 %rd1, [p];
 ld.global.u32 %r1, [g_data+{4 * (k % 1024)}];
 {{ .param .b32 a; .param .b32 b; st.param.b32 [a], %r1; call.uni (b), helper_{k % 16}, (a); ld.param.b32 %r2, [b]; }}
 @%p1 bra $L__BB{k}_1;
 add.s32 %r2, %r2, {k};
$L__BB{k}_1:
 st.global.u32 [%rd1], %r2;
 ret;
}}""")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taskcache", default=str(ROOT / "build" / "taskcache"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 16000])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = []
        for n in args.sizes:
            path = os.path.join(d, f"m{n}.ptx")
            with open(path, "w") as f:
                f.write(module(n))
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                subprocess.run([args.taskcache, "explain", path, "--arch", "sm_90", "--no-cache",
                                "--json"], check=True, stdout=subprocess.DEVNULL)
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            rows.append((n, os.path.getsize(path), med))
        print(f"{'kernels':>8} {'PTX bytes':>12} {'explain (median)':>17} {'per kernel':>12}")
        for n, size, med in rows:
            print(f"{n:>8} {size:>12,} {med:>15.3f} s {med / n * 1e6:>9.1f} us")
        first, last = rows[0], rows[-1]
        growth = last[2] / first[2]
        print(f"\n{last[0] // first[0]}x the kernels took {growth:.1f}x the time "
              f"(linear: {last[0] // first[0]}x, quadratic: {(last[0] // first[0]) ** 2}x)")


if __name__ == "__main__":
    main()
