#!/usr/bin/env python3
"""What `taskcache run` costs a process that hands the driver no PTX.

Under `taskcache run -- CMD` every process CMD starts has the interceptor
preloaded: a shell script's every command, make's every compiler. Times,
in fresh processes, interleaved, medians:

  bare        the command as it is
  preloaded   with the interceptor preloaded, as `taskcache run` preloads
              it into every process: its small preloaded part (the
              builder, all of taskcache, comes with the first PTX load or
              link)
  whole lib   with the builder preloaded as well: what every process paid
              when the interceptor was one library (before 2026-12-02)
  run         `taskcache run -- CMD`: the preloaded part, plus the
              command line tool starting once

for /bin/true and a shell running it 50 times (a process's start is what
the preloaded library can cost; an interpreter's start varies by more than
that). No GPU is needed.

    python3 bench/run_overhead.py [--taskcache PATH] [--runs 21]
"""

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - t


def fmt(s):
    return f"{s * 1e3:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskcache", default=str(ROOT / "build" / "taskcache"))
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    exe = pathlib.Path(args.taskcache).resolve()
    lib, builder = exe.parent / "libtaskcache_intercept.so", exe.parent / "libtaskcache_jit.so"
    if not exe.exists() or not lib.exists() or not builder.exists():
        sys.exit(f"run_overhead: {exe}, {lib} or {builder} is missing (build first)")
    true = shutil.which("true")
    commands = {
        "/bin/true": [true],
        "sh, 50 commands": ["sh", "-c", f"for i in $(seq 50); do {true}; done"],
    }
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    ways = {
        "bare": lambda c: (c, base),
        "preloaded": lambda c: (c, dict(base, LD_PRELOAD=str(lib))),
        "whole lib": lambda c: (c, dict(base, LD_PRELOAD=f"{lib}:{builder}")),
        "run": lambda c: ([str(exe), "run", "--", *c], base),
    }
    print(f"{args.runs} runs each, interleaved, medians; {os.cpu_count()} CPUs")
    print(f"{'command':<18} | " + " | ".join(f"{w:>10}" for w in ways) +
          " | preloaded - bare")
    print("-" * 19 + "+" + "+".join(["-" * 12] * len(ways)) + "+-----------------")
    for name, cmd in commands.items():
        times = {w: [] for w in ways}
        for _ in range(args.runs):
            for w, how in ways.items():
                times[w].append(timed(*how(cmd)))
        med = {w: statistics.median(t) for w, t in times.items()}
        print(f"{name:<18} | " + " | ".join(f"{fmt(med[w]):>10}" for w in ways) +
              f" | {fmt(med['preloaded'] - med['bare'])}")


if __name__ == "__main__":
    main()
