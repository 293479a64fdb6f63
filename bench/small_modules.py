#!/usr/bin/env python3
"""Small modules: what a build costs when taskcache compiles them whole.

For every module of the real-world corpus (tests/realworld/corpus) that
taskcache compiles whole by default because it is small (its kernels fit
in one unit, or cost 1,500 statements or less in all), times in fresh
processes, interleaved, a cold build (no records, toolchain memos kept):

  whole      taskcache's default: the module as one compile, no link
  split      --unit-cost 1000 (the default size given explicitly): units of
             kernels, the module data as another, then a link (what
             taskcache did before small modules were compiled whole)
  no cache   taskcache's default with --no-cache (nothing keyed or stored)
  ptxas      ptxas -arch=ARCH on the module ("-" where ptxas refuses it)
  split0     ptxas -split-compile=0, the peer issue 11 names

and, for modules of two kernels or more, an edit: one kernel changed (a
dead instruction added; run i edits kernel i) and built in a cache that
holds the module as it was, whole against split. Whole pays the module
where split pays the edited kernel's unit and a link. Medians side by
side. A JIT that hands the driver small modules (CuPy, numba-cuda,
Quadrants' helper modules, Triton, XLA) pays the split column's extra on
every cold module, the linker's first load included.

    python3 bench/small_modules.py [--taskcache PATH] [--runs 5] [--arch sm_90]
"""

import argparse
import json
import lzma
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "realworld" / "corpus"


def timed(cmd):
    """Seconds, or None when the command fails."""
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t if p.returncode == 0 else None


def ms(v):
    return f"{v * 1e3:7.1f}ms" if v is not None else f"{'-':>9}"


def corpus_args(doc, runs):
    """A parser with the options of every benchmark of corpus modules:
    --taskcache, --ptxas, --arch and --runs (default runs); doc's first
    paragraph describes it."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--taskcache", default=str(ROOT / "build" / "taskcache"))
    ap.add_argument("--ptxas", default=shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--runs", type=int, default=runs)
    return ap


def main():
    a = corpus_args(__doc__, 5).parse_args()
    work = tempfile.mkdtemp(prefix="small-modules-")
    try:
        mods = []
        for xz in sorted(CORPUS.glob("*/*.ptx.xz")):
            ptx = os.path.join(work, f"{xz.parent.name}__{xz.name[:-3]}")
            text = lzma.decompress(xz.read_bytes())
            with open(ptx, "wb") as f:
                f.write(text)
            # PTX written for sm_90a (Triton's) compiles only for sm_90a
            arch = "sm_90a" if re.search(rb"^\s*\.target\s+sm_90a", text, re.M) else a.arch
            info = json.loads(subprocess.run(
                [a.taskcache, "explain", ptx, "--arch", arch, "--no-cache", "--json"],
                check=True, capture_output=True, text=True).stdout)
            if "one compile, no link" in (info.get("whole_reason") or ""):
                mods.append((f"{xz.parent.name}/{xz.name[:-7]}", ptx, len(info["entries"]), arch))
        # Each build gets an empty cache that holds only the toolchain
        # memos, as a user's cache does: with --no-cache every process
        # would hash the compiler's bytes first.
        primed = os.path.join(work, "primed")
        subprocess.run([a.taskcache, "build", mods[0][1], "--arch", mods[0][3], "--cache-dir", primed,
                        "-o", os.devnull], check=True, capture_output=True)
        shutil.rmtree(os.path.join(primed, "v1"), ignore_errors=True)

        def fresh(src=None):
            """A copy of the primed cache, or of src."""
            d = tempfile.mkdtemp(dir=work)
            os.rmdir(d)
            shutil.copytree(src or primed, d)
            return d

        def tc(ptx, arch, *extra):
            return [a.taskcache, "build", ptx, "--arch", arch, "--cache-dir", fresh(), "-o",
                    os.devnull, *extra]
        cmds = {"whole": lambda p, arch: tc(p, arch),
                "split": lambda p, arch: tc(p, arch, "--unit-cost", "1000"),
                "no cache": lambda p, arch: [a.taskcache, "build", p, "--arch", arch,
                                             "--no-cache", "-o", os.devnull],
                "ptxas": lambda p, arch: [a.ptxas, f"-arch={arch}", p, "-o", os.devnull],
                "split0": lambda p, arch: [a.ptxas, f"-arch={arch}", "-split-compile=0", p, "-o",
                                           os.devnull]}
        def built(ptx, arch, *extra):
            """A primed cache that holds ptx built so."""
            d = fresh()
            subprocess.run([a.taskcache, "build", ptx, "--arch", arch, "--cache-dir", d, "-o",
                            os.devnull, *extra], check=True, capture_output=True)
            return d

        def edit(ptx, i):
            """ptx with a dead instruction added to its i-th kernel."""
            text = open(ptx, "rb").read()
            starts = [m.end() for m in re.finditer(rb"\.entry\s+[\w$]+\s*\([^)]*\)[^{]*\{",
                                                   text)]
            at = starts[i % len(starts)]
            out = ptx + ".edit"
            with open(out, "wb") as f:
                f.write(text[:at] + b"\n.reg .b32 %tc_edit;\nmov.b32 %tc_edit, 1;\n" + text[at:])
            return out

        print(f"{len(mods)} modules compiled whole by default; builds in fresh processes, "
              f"medians of {a.runs}, interleaved; edit = one kernel changed")
        print(f"{'module':<44} {'kernels':>7} {'whole':>9} {'split':>9} {'no cache':>9} "
              f"{'ptxas':>9} {'split0':>9} {'split/whole':>11} {'split0/whole':>12} "
              f"{'edit whole':>10} {'edit split':>10}")
        ratios, peer, edits = [], [], []
        for name, ptx, n, arch in mods:
            t = {k: [] for k in cmds}
            e = {"whole": [], "split": []}
            primed_whole = built(ptx, arch) if n > 1 else None
            primed_split = built(ptx, arch, "--unit-cost", "1000") if n > 1 else None
            for r in range(a.runs):
                for k, c in cmds.items():
                    t[k].append(timed(c(ptx, arch)))
                if n > 1:
                    edited = edit(ptx, r)
                    for k, base, extra in (("whole", primed_whole, ()),
                                           ("split", primed_split, ("--unit-cost", "1000"))):
                        e[k].append(timed([a.taskcache, "build", edited, "--arch", arch,
                                           "--cache-dir", fresh(base), "-o", os.devnull,
                                           *extra]))
            m = {k: statistics.median(v) if None not in v else None for k, v in t.items()}
            me = {k: statistics.median(v) if v and None not in v else None for k, v in e.items()}
            if me["whole"] and me["split"]:
                edits.append(me["whole"] / me["split"])
            ratio = m["split"] / m["whole"] if m["split"] and m["whole"] else None
            vs0 = m["split0"] / m["whole"] if m["split0"] and m["whole"] else None
            if ratio:
                ratios.append(ratio)
            if vs0:
                peer.append(vs0)
            print(f"{name:<44} {n:>7} {ms(m['whole'])} {ms(m['split'])} {ms(m['no cache'])} "
                  f"{ms(m['ptxas'])} {ms(m['split0'])} "
                  f"{f'{ratio:.2f}x' if ratio else 'failed':>11} "
                  f"{f'{vs0:.2f}x' if vs0 else '-':>12} {ms(me['whole']):>10} "
                  f"{ms(me['split']):>10}")
        if ratios:
            print(f"median split/whole: {statistics.median(ratios):.2f}x "
                  f"(range {min(ratios):.2f}-{max(ratios):.2f}x)")
        if peer:
            print(f"median split0/whole: {statistics.median(peer):.2f}x "
                  f"(range {min(peer):.2f}-{max(peer):.2f}x); whole slower than split0 on "
                  f"{sum(1 for v in peer if v < 1)} of {len(peer)} modules")
        if edits:
            print(f"edit: whole/split median {statistics.median(edits):.2f}x "
                  f"(range {min(edits):.2f}-{max(edits):.2f}x) over {len(edits)} modules of "
                  f"two kernels or more")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
