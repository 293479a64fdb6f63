#!/usr/bin/env python3
"""A real CMake CUDA project, built with plain nvcc and through `taskcache shims`.

Usage:
  python3 bench/cmake_project.py --source DIR [--project SUBDIR] [--file F.cu]
                                 [--kernel NAME] [--taskcache PATH] [--arch sm_90]
                                 [--runs 3] [--clean-runs 1] [--jobs 2]
                                 [--config as-shipped] [--config no-rdc-lineinfo]
                                 [--json OUT.json] [--keep]

DIR is a checkout of a CMake CUDA project that you fetched yourself (this
script never downloads anything, and the project is never part of this
repository). The defaults are for NVIDIA/cuda-samples:
--project Samples/2_Concepts_and_Techniques/reduction (the CMake source
directory, relative to DIR), --file reduction_kernel.cu (relative to the
project; 213 .entry for sm_90, template instantiations) and --kernel reduce3.

DIR is not written to: the project directory is copied into a scratch tree
that links everything else of DIR (the sample reaches ../../../Common). The
copy of the project's CMakeLists.txt is patched as --config says, and the
patches are printed:

  as-shipped       only `set(CMAKE_CUDA_ARCHITECTURES ...)` becomes --arch
                   (the sample hard-codes nine architectures, which a -D
                   cannot override); the project's -rdc
                   (CUDA_SEPARABLE_COMPILATION ON) and -lineinfo stay. Both
                   make taskcache compile the module whole (a relocatable
                   object; debug sections across inlined functions), so this
                   shows the cache, not the per-kernel build.
  no-rdc-lineinfo  as-shipped, and also without -lineinfo and with
                   CUDA_SEPARABLE_COMPILATION OFF: the module is split per
                   kernel.

For each --config, in fresh build directories, timed with time.perf_counter
around `cmake --build BUILD -j JOBS` (configure is timed apart, not in the
build figures):

  plain   CMAKE_CUDA_COMPILER=<toolkit>/bin/nvcc
          clean build (--clean-runs times, each in a new build directory),
          then --runs rebuilds, rebuild i after edit i of --kernel;
  shims   CMAKE_CUDA_COMPILER=SHIMS/bin/nvcc (`taskcache shims SHIMS`),
          TASKCACHE_DIR a new empty cache:
          clean build with the empty cache, the same --runs edits and
          rebuilds, then clean builds into new build directories with that
          (warm) cache, the original source.

Edit i inserts `__nanosleep(i);` as the first statement of every definition
of `__global__ void KERNEL(...)` in --file: every run changes the kernel's
code to something no earlier run built, so each shim rebuild is a real miss
of that kernel (all its template instantiations) and a hit for the rest.

The ptxas phase: CMAKE_CUDA_FLAGS gets `-time FILE` (nvcc's own per-phase
timer, CSV), and the figure is the sum of the `ptxas` rows of --file (one
per architecture) in that build. It is the same measure for both compilers:
through the shims nvcc's ptxas step is `taskcache ptxas`. TASKCACHE_LOG
lines of the shim builds (what was compiled, what came from the cache) are
printed too.

Checks (a failure makes the exit status 1):
  - every build succeeds;
  - `cuobjdump -sass` of --file's object, per function, is identical
    between plain nvcc and the shims: after the clean build, after the last
    edit, and for the warm-cache clean build; the same for the executable
    --exe. cuobjdump is --cuobjdump, else the toolkit's, else PATH's (any
    release that reads the toolkit's objects; Triton's wheel carries one);
  - each edit changes the code of --kernel's instantiations and nothing
    else (SASS before and after the rebuild, both compilers).

Medians of --runs rebuilds and of --clean-runs clean builds [min-max].
Exit status: 0 all good; 1 a build or a check failed; 2 usage (source or
taskcache not found). Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_PROJECT = "Samples/2_Concepts_and_Techniques/reduction"
DEFAULT_FILE = "reduction_kernel.cu"
DEFAULT_KERNEL = "reduce3"
DEFAULT_EXE = "reduction"
CONFIGS = ("as-shipped", "no-rdc-lineinfo")


class Failed(Exception):
    pass


def log(msg: str = "") -> None:
    print(msg, flush=True)


def tail(text: str, n: int = 30) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) > n:
        lines = [f"... ({len(lines) - n} earlier lines omitted)"] + lines[-n:]
    return "\n".join("    " + l for l in lines)


def run(cmd: list[str], env: dict | None = None, cwd: str | None = None,
        timeout: float = 1800) -> tuple[float, str]:
    """Run cmd; return (wall seconds, stdout+stderr). Raises Failed."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise Failed(f"timed out after {timeout} s: {shlex.join(cmd)}") from e
    except OSError as e:
        raise Failed(f"could not run {shlex.join(cmd)}: {e}") from e
    dt = time.perf_counter() - t0
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise Failed(f"failed (exit status {p.returncode}): {shlex.join(cmd)}\n{tail(out)}")
    return dt, out


def find_cuobjdump(cuda: str, explicit: str | None) -> str | None:
    for c in (explicit, os.path.join(cuda, "bin", "cuobjdump"), shutil.which("cuobjdump")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def find_cuda() -> str:
    for d in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if d and os.path.isfile(os.path.join(d, "bin", "nvcc")):
            return d
    w = shutil.which("nvcc")
    if w:
        return os.path.dirname(os.path.dirname(os.path.realpath(w)))
    raise Failed("CUDA toolkit not found ($CUDA_HOME, /usr/local/cuda, nvcc on PATH)")


# --------------------------------------------------------------------------
# the project's copy
# --------------------------------------------------------------------------

def mirror(source: str, project: str, dest: str) -> str:
    """dest gets the path to `project` as real directories, the project
    directory copied, and every other entry along the way a symbolic link
    into `source`. Returns the copy of the project directory."""
    parts = [p for p in project.split("/") if p and p != "."]
    src, dst = source, dest
    os.makedirs(dst, exist_ok=True)
    for part in parts:
        for name in os.listdir(src):
            if name != part:
                os.symlink(os.path.join(src, name), os.path.join(dst, name))
        src, dst = os.path.join(src, part), os.path.join(dst, part)
        os.makedirs(dst, exist_ok=True)
    shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def patch_cmakelists(project_dir: str, config: str, arch_num: str) -> list[str]:
    """Apply --config to project_dir/CMakeLists.txt; return what changed."""
    path = os.path.join(project_dir, "CMakeLists.txt")
    with open(path) as f:
        text = f.read()
    done = []

    def sub(pattern: str, repl: str, what: str) -> None:
        nonlocal text
        text, n = re.subn(pattern, repl, text)
        if n:
            done.append(f"{what} ({n}x)")

    sub(r"set\s*\(\s*CMAKE_CUDA_ARCHITECTURES\b[^)]*\)",
        f"set(CMAKE_CUDA_ARCHITECTURES {arch_num})",
        f"set(CMAKE_CUDA_ARCHITECTURES ...) -> {arch_num}")
    if config == "no-rdc-lineinfo":
        sub(r"[ \t]*-lineinfo\b", "", "-lineinfo removed")
        sub(r"CUDA_SEPARABLE_COMPILATION\s+ON", "CUDA_SEPARABLE_COMPILATION OFF",
            "CUDA_SEPARABLE_COMPILATION ON -> OFF")
    with open(path, "w") as f:
        f.write(text)
    return done


def kernel_bodies(text: str, kernel: str) -> list[int]:
    """Offsets just after the opening brace of every definition of
    __global__ void KERNEL(...)."""
    out = []
    for m in re.finditer(r"__global__\s+void\s+" + re.escape(kernel) + r"\s*\(", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:          # skip the parameter list
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        j = i
        while j < len(text) and text[j] not in "{;":
            j += 1
        if j < len(text) and text[j] == "{":
            out.append(j + 1)
    return out


def write_edit(path: str, original: str, kernel: str, variant: int, newer_than: float) -> None:
    """Write `original` with edit `variant` of KERNEL (0: unedited), with a
    modification time later than `newer_than`."""
    text = original
    if variant:
        for pos in reversed(kernel_bodies(original, kernel)):
            text = text[:pos] + f"\n  __nanosleep({variant});  /* bench edit */" + text[pos:]
    while time.time() <= newer_than + 0.01:
        time.sleep(0.02)
    with open(path, "w") as f:
        f.write(text)


# --------------------------------------------------------------------------
# code checks
# --------------------------------------------------------------------------

def sass(cuobjdump: str, path: str) -> dict[str, str]:
    """Function name -> its SASS text, from cuobjdump -sass."""
    _, out = run([cuobjdump, "-sass", path])
    funcs: dict[str, list[str]] = {}
    arch, cur = "?", None
    for line in out.splitlines():
        m = re.match(r"\s*(?:code for (\S+)|Function\s*:\s*(\S+)|(\.{5,}\s*$)|(Fatbin))", line)
        if m and m.group(1):
            arch, cur = m.group(1), None
        elif m and m.group(2):
            cur = f"{arch} {m.group(2)}"
            if cur in funcs:
                raise Failed(f"{path}: {cur} twice in cuobjdump -sass")
            funcs[cur] = []
        elif m:
            cur = None
        elif cur is not None:
            funcs[cur].append(line.rstrip())
    if not funcs:
        raise Failed(f"{path}: cuobjdump -sass shows no functions")
    return {k: "\n".join(v).strip() for k, v in funcs.items()}


def compare(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Names of functions that differ (or are in one only)."""
    return sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))


# --------------------------------------------------------------------------
# one configuration
# --------------------------------------------------------------------------

class Project:
    def __init__(self, args, config: str, work: str, cuda: str, shims: str):
        self.args, self.config, self.work, self.cuda = args, config, work, cuda
        self.src = mirror(args.source, args.project, os.path.join(work, "src"))
        self.patches = patch_cmakelists(self.src, config, args.arch_num)
        self.file = os.path.join(self.src, args.file)
        with open(self.file) as f:
            self.original = f.read()
        self.n_bodies = len(kernel_bodies(self.original, args.kernel))
        if not self.n_bodies:
            raise Failed(f"{args.file}: no definition of __global__ void {args.kernel}(...)")
        self.compiler = {"plain": os.path.join(cuda, "bin", "nvcc"),
                         "shims": os.path.join(shims, "bin", "nvcc")}
        self.cache = os.path.join(work, "cache")
        self.tclog = os.path.join(work, "taskcache.log")
        self.ndirs = 0
        self.last_write = 0.0

    def env(self, kind: str) -> dict:
        env = dict(os.environ)
        for k in ("TASKCACHE_DIR", "TASKCACHE_LOG", "TASKCACHE_PTXAS", "CUDAARCHS", "CUDAFLAGS"):
            env.pop(k, None)
        if kind == "shims":
            env["TASKCACHE_DIR"] = self.cache
            env["TASKCACHE_LOG"] = self.tclog
        return env

    def configure(self, kind: str) -> tuple[str, float]:
        self.ndirs += 1
        build = os.path.join(self.work, f"build-{kind}-{self.ndirs}")
        timefile = os.path.join(build, "nvcc-time.csv")
        cmd = ["cmake", "-S", self.src, "-B", build, "-G", self.args.generator,
               f"-DCMAKE_CUDA_COMPILER={self.compiler[kind]}",
               f"-DCMAKE_CUDA_ARCHITECTURES={self.args.arch_num}",
               f"-DCMAKE_CUDA_FLAGS=-time {timefile}"] + self.args.cmake_arg
        dt, _ = run(cmd, env=self.env(kind))
        return build, dt

    def build(self, kind: str, build: str) -> dict:
        timefile = os.path.join(build, "nvcc-time.csv")
        for p in (timefile, self.tclog):
            if os.path.exists(p):
                os.remove(p)
        dt, _ = run(["cmake", "--build", build, "-j", str(self.args.jobs)], env=self.env(kind))
        self.last_write = time.time()
        res = {"build_s": dt, "ptxas_s": self.ptxas_time(timefile), "log": []}
        if kind == "shims" and os.path.exists(self.tclog):
            with open(self.tclog) as f:
                res["log"] = [l.rstrip() for l in f if os.path.basename(self.args.file).split(".")[0] in l]
        return res

    def ptxas_time(self, timefile: str) -> float | None:
        if not os.path.exists(timefile):
            return None
        total, seen = 0.0, False
        base = os.path.basename(self.args.file)
        with open(timefile, newline="") as f:
            for row in csv.reader(f):
                row = [c.strip() for c in row]
                if len(row) < 8 or row[1] != "ptxas" or os.path.basename(row[0]) != base:
                    continue
                ms = float(row[6]) if row[7] == "ms" else float(row[6]) * 1000
                total += ms / 1000
                seen = True
        return total if seen else None

    def objects(self, build: str) -> tuple[str, str]:
        obj = None
        base = os.path.basename(self.args.file)
        for root, _, files in os.walk(build):
            for name in files:
                if name in (base + ".o", base + ".obj"):
                    obj = os.path.join(root, name)
        exe = os.path.join(build, self.args.exe)
        if not obj or not os.path.isfile(exe):
            raise Failed(f"{build}: no object of {base} or no executable {self.args.exe}")
        return obj, exe

    def edit(self, variant: int) -> None:
        write_edit(self.file, self.original, self.args.kernel, variant, self.last_write)


def stat(xs: list) -> dict:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt(s: dict) -> str:
    if s["median"] is None:
        return "n/a"
    if s["n"] == 1:
        return f"{s['median']:.2f} s"
    return f"{s['median']:.2f} s [{s['min']:.2f}-{s['max']:.2f}]"


def bench_config(args, config: str, work: str, cuda: str, shims: str, cuobjdump: str) -> dict:
    p = Project(args, config, work, cuda, shims)
    log(f"\n== {config}: {args.project} ({args.file}, kernel {args.kernel}: "
        f"{p.n_bodies} definition(s))")
    for line in p.patches:
        log(f"   patched CMakeLists.txt (copy): {line}")
    checks: list[tuple[str, bool, str]] = []
    res: dict = {"config": config, "patches": p.patches, "plain": {}, "shims": {}, "checks": checks}

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append((name, ok, detail))
        log(f"   check: {name}: {'ok' if ok else 'FAILED'}{(' (' + detail + ')') if detail else ''}")

    def edit_changes(before: dict, after: dict, who: str, i: int) -> None:
        changed = compare(before, after)
        stray = [n for n in changed if args.kernel not in n]
        check(f"{who} edit {i} changes {args.kernel} only",
              bool(changed) and not stray,
              f"{len(changed)} function(s) changed" + (f", {len(stray)} others: {stray[:3]}" if stray else ""))

    final = {}
    for kind in ("plain", "shims"):
        r = res[kind]
        p.edit(0)
        clean, conf = [], []
        first_build = None
        for c in range(args.clean_runs):
            build, dt = p.configure(kind)
            conf.append(dt)
            if kind == "shims":     # empty: nor the compiler checks' modules
                shutil.rmtree(p.cache, ignore_errors=True)
            b = p.build(kind, build)
            log(f"   {kind}: clean build {c + 1}: {b['build_s']:.2f} s, ptxas {args.file} "
                f"{b['ptxas_s'] if b['ptxas_s'] is None else round(b['ptxas_s'], 2)} s")
            for line in b["log"]:
                log(f"      {line}")
            clean.append(b)
            first_build = first_build or build
        r["configure_s"] = conf
        r["clean"] = clean
        build = first_build
        obj, exe = p.objects(build)
        before = sass(cuobjdump, obj)
        final[kind, "clean"] = (before, sass(cuobjdump, exe))
        r["entries"] = len(before)
        rebuilds = []
        for i in range(1, args.runs + 1):
            p.edit(i)
            b = p.build(kind, build)
            log(f"   {kind}: rebuild after edit {i}: {b['build_s']:.2f} s, ptxas {args.file} "
                f"{b['ptxas_s'] if b['ptxas_s'] is None else round(b['ptxas_s'], 2)} s")
            for line in b["log"]:
                log(f"      {line}")
            after = sass(cuobjdump, obj)
            edit_changes(before, after, kind, i)
            before = after
            rebuilds.append(b)
        r["rebuild"] = rebuilds
        final[kind, "edit"] = (before, sass(cuobjdump, exe))
        if kind == "shims":
            p.edit(0)
            warm = []
            for c in range(args.clean_runs):
                wbuild, dt = p.configure(kind)
                b = p.build(kind, wbuild)
                log(f"   shims: clean build, warm cache {c + 1}: {b['build_s']:.2f} s, ptxas {args.file} "
                    f"{b['ptxas_s'] if b['ptxas_s'] is None else round(b['ptxas_s'], 2)} s")
                for line in b["log"]:
                    log(f"      {line}")
                warm.append(b)
            r["warm"] = warm
            wobj, wexe = p.objects(wbuild)
            final[kind, "warm"] = (sass(cuobjdump, wobj), sass(cuobjdump, wexe))

    for state, ref in (("clean", "clean"), ("edit", "edit"), ("warm", "clean")):
        (po, pe), (so, se) = final["plain", ref], final["shims", state]
        do, de = compare(po, so), compare(pe, se)
        check(f"SASS of {os.path.basename(obj)} {state}: shims == plain", not do,
              f"{len(po)} functions" + (f", {len(do)} differ: {do[:3]}" if do else ""))
        check(f"SASS of {args.exe} {state}: shims == plain", not de,
              f"{len(pe)} functions" + (f", {len(de)} differ: {de[:3]}" if de else ""))
    res["ok"] = all(ok for _, ok, _ in checks)
    return res


def table(res: dict, args) -> list[str]:
    pl, sh = res["plain"], res["shims"]
    ck = "" if args.clean_runs > 1 else " (1 run)"
    rows = [
        (f"clean build{ck}", pl["clean"], sh["clean"], "empty cache"),
        (f"rebuild after editing `{args.kernel}` (median of {args.runs})", pl["rebuild"], sh["rebuild"], ""),
        (f"clean build, new build dir{ck}", None, sh["warm"], "warm cache"),
    ]
    out = [f"| step | plain nvcc: build | plain nvcc: ptxas `{os.path.basename(args.file)}` "
           f"| shims: build | shims: ptxas `{os.path.basename(args.file)}` | build plain / shims |",
           "| --- | --- | --- | --- | --- | --- |"]
    for name, a, b, note in rows:
        ab = stat([x["build_s"] for x in a]) if a else stat(
            [x["build_s"] for x in pl["clean"]])
        ap = stat([x["ptxas_s"] for x in a]) if a else stat([x["ptxas_s"] for x in pl["clean"]])
        bb, bp = stat([x["build_s"] for x in b]), stat([x["ptxas_s"] for x in b])
        ratio = f"{ab['median'] / bb['median']:.2f}x" if ab["median"] and bb["median"] else "n/a"
        a_b, a_p = fmt(ab), fmt(ap)
        if not a:
            a_b, a_p = f"({a_b})", f"({a_p})"
        label = name + (f", {note}" if note else "")
        out.append(f"| {label} | {a_b} | {a_p} | {fmt(bb)} | {fmt(bp)} | {ratio} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True, help="the project's checkout (never written to)")
    ap.add_argument("--project", default=DEFAULT_PROJECT, help="CMake source dir, relative to --source")
    ap.add_argument("--file", default=DEFAULT_FILE, help="the large translation unit, relative to --project")
    ap.add_argument("--kernel", default=DEFAULT_KERNEL, help="the __global__ function to edit")
    ap.add_argument("--exe", default=DEFAULT_EXE, help="the executable, relative to the build dir")
    ap.add_argument("--taskcache", default=None, help="default build/taskcache, else taskcache on PATH")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--runs", type=int, default=3, help="edits and rebuilds per compiler")
    ap.add_argument("--clean-runs", type=int, default=1, help="clean builds per compiler (and warm ones)")
    ap.add_argument("--jobs", type=int, default=2, help="cmake --build -j")
    ap.add_argument("--generator", default="Ninja" if shutil.which("ninja") else "Unix Makefiles")
    ap.add_argument("--config", action="append", choices=CONFIGS,
                    help="repeatable; default both, in the order listed")
    ap.add_argument("--cmake-arg", action="append", default=[], help="extra configure argument")
    ap.add_argument("--cuobjdump", help="default: the toolkit's, else cuobjdump on PATH")
    ap.add_argument("--json", help="write all figures here")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()

    args.source = os.path.abspath(args.source)
    if not os.path.isfile(os.path.join(args.source, args.project, "CMakeLists.txt")):
        log(f"error: no {args.project}/CMakeLists.txt under {args.source}")
        return 2
    if not os.path.isfile(os.path.join(args.source, args.project, args.file)):
        log(f"error: no {args.file} in {args.project}")
        return 2
    m = re.fullmatch(r"sm_(\d+[af]?)", args.arch)
    if not m:
        log("error: --arch must be sm_NN")
        return 2
    args.arch_num = m.group(1)
    tc = args.taskcache or os.path.join(REPO_ROOT, "build", "taskcache")
    tc = tc if os.path.isfile(tc) else shutil.which(tc if args.taskcache else "taskcache")
    if not tc:
        log("error: taskcache not found (build it into build/taskcache or pass --taskcache)")
        return 2
    tc = os.path.abspath(tc)
    configs = args.config or list(CONFIGS)

    try:
        cuda = find_cuda()
    except Failed as e:
        log(f"error: {e}")
        return 2
    cuobjdump = find_cuobjdump(cuda, args.cuobjdump)
    if not cuobjdump:
        log("error: cuobjdump not found (the toolkit's bin, PATH; or pass --cuobjdump)")
        return 2
    git = subprocess.run(["git", "-C", args.source, "rev-parse", "HEAD"], capture_output=True, text=True)
    commit = git.stdout.strip() if git.returncode == 0 else "(not a git checkout)"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    nvcc_v = subprocess.run([os.path.join(cuda, "bin", "nvcc"), "--version"],
                            capture_output=True, text=True).stdout.strip().splitlines()[-1]
    log(f"source: {args.source} (commit {commit})")
    log(f"machine: {os.cpu_count()} CPUs, {cpu}, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    log(f"toolkit: {cuda} ({nvcc_v}); taskcache: {tc}; arch {args.arch}; cmake --build -j {args.jobs}, "
        f"{args.generator}; {args.runs} edit(s), {args.clean_runs} clean build(s) per compiler")

    work_root = tempfile.mkdtemp(prefix="taskcache-cmake-")
    results, rc = [], 0
    try:
        shims = os.path.join(work_root, "shims")
        run([tc, "shims", shims])
        for config in configs:
            try:
                r = bench_config(args, config, os.path.join(work_root, config), cuda, shims, cuobjdump)
            except Failed as e:
                log(f"\nFAILED ({config}): {e}")
                rc = 1
                continue
            results.append(r)
            rc |= 0 if r["ok"] else 1
    finally:
        if args.keep:
            log(f"\nscratch kept: {work_root}")
        else:
            shutil.rmtree(work_root, ignore_errors=True)

    for r in results:
        log(f"\n### {r['config']}" + (f" ({'; '.join(r['patches'])})" if r["patches"] else ""))
        log(f"{r['plain']['entries']} functions in {args.file}'s object (cuobjdump -sass)\n")
        for line in table(r, args):
            log(line)
        bad = [c for c in r["checks"] if not c[1]]
        log(f"\nchecks: {len(r['checks']) - len(bad)} of {len(r['checks'])} ok"
            + "".join(f"\n  FAILED: {n} ({d})" for n, _, d in bad))
    log(f"load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"source": args.source, "commit": commit, "args": vars(args),
                       "machine": {"cpus": os.cpu_count(), "cpu": cpu, "kernel": platform.release()},
                       "toolkit": nvcc_v, "results": results}, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
