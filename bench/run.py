#!/usr/bin/env python3
"""Benchmark taskcache against whole-module ptxas.

Usage:
  python3 bench/run.py [--taskcache PATH] [--arch sm_90] [--runs 5] [--jobs N]
                       [--tasks 250] [--seed 1] [--module FILE.ptx ...]
                       [--json OUT.json] [--warmup 1] [--no-generate] [--keep]

For every module (by default a freshly generated --tasks module, see
bench/gen_module.py, plus every --module given) this measures, each run in a
fresh process, wall clock via time.perf_counter, the median of --runs runs of

  ptxas   -arch=ARCH IN -o OUT.cubin                      (whole module)
  ptxas   -arch=ARCH -split-compile=0 IN -o OUT.cubin     (all cores)
  taskcache build IN -o OUT.cubin --arch ARCH --cache-dir DIR -j N
      cold: DIR is empty before every run
      warm: DIR already holds this exact module (built once, untimed)
      edit: DIR holds the original module; the input is a copy in which one
            entry is changed; run i changes entry (i*37) mod N_entries, so
            every run is a real miss of one entry, everything else hits.
      relink: DIR holds every unit of the original module but no module
            record (--no-module-cache): nothing compiles, the units link.
  ptxas   -arch=ARCH ALONE -o OUT.cubin                   (edited kernel alone)
      ALONE is each edit's input with every other .entry removed: what
      compiling the edited kernel costs by itself, the yardstick of an edit.

Exit status: 0 all good; 1 a command failed or an output check failed;
2 the taskcache binary was not found (the ptxas peers are still measured).
Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
sys.dont_write_bytecode = True      # keep bench/ free of __pycache__
import gen_module  # noqa: E402  (bench/gen_module.py)

EDIT_STRIDE = 37
TARGETS = {  # from bench/README.md (2-core machine, 250-task module)
    "edit": ("ptxas", 30.0),      # edit >= 30x faster than whole-module ptxas
    "warm": ("ptxas", 50.0),      # warm >= 50x faster than whole-module ptxas
    "cold": ("split0", 1 / 0.75),  # cold <= 0.75x the time of ptxas -split-compile=0
}
EDIT_OVER_ALONE = (1.3, 0.030)    # edit <= 1.3 x (edited kernel alone) + 30 ms
RELINK_MAX_S = 0.030              # a relink with nothing compiled <= 30 ms


def kernel_alone(text: str, keep: str) -> str:
    """The module with every .entry but `keep` removed (helpers and data
    stay: ptxas drops what the kernel does not reach)."""
    out, pos = [], 0
    for name, start, _, end in gen_module.entry_spans(text):
        if name != keep:
            out.append(text[pos:start])
            pos = end
    out.append(text[pos:])
    return "".join(out)


class CommandFailed(Exception):
    pass


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def log(msg: str = "") -> None:
    print(msg, flush=True)


def tail(text: str, n: int = 40) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) > n:
        lines = [f"... ({len(lines) - n} earlier lines omitted)"] + lines[-n:]
    return "\n".join("    " + l for l in lines)


def run_timed(cmd: list[str], timeout: float | None = None) -> float:
    """Run cmd in a fresh process; return wall seconds.  Raises CommandFailed
    (with stderr/stdout) on a non-zero exit status or timeout."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise CommandFailed(f"timed out after {timeout} s: {shlex.join(cmd)}") from e
    except OSError as e:
        raise CommandFailed(f"could not run {shlex.join(cmd)}: {e}") from e
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        msg = [f"command failed (exit status {p.returncode}): {shlex.join(cmd)}"]
        err = p.stderr.decode("utf-8", "replace")
        out = p.stdout.decode("utf-8", "replace")
        if err.strip():
            msg += ["  stderr:", tail(err)]
        if out.strip():
            msg += ["  stdout:", tail(out, 15)]
        raise CommandFailed("\n".join(msg))
    return dt


def rm_rf(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def find_taskcache(explicit: str | None) -> tuple[str | None, list[str]]:
    """Return (path or None, list of places looked at)."""
    looked = []
    if explicit:
        p = os.path.abspath(explicit)
        looked.append(p)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p, looked
        w = shutil.which(explicit)
        if w:
            return w, looked
        return None, looked
    p = os.path.join(REPO_ROOT, "build", "taskcache")
    looked.append(p)
    if os.path.isfile(p) and os.access(p, os.X_OK):
        return p, looked
    looked.append("taskcache on PATH")
    w = shutil.which("taskcache")
    return w, looked


def machine_info(ptxas: str, taskcache: str | None) -> dict:
    info = {
        "nproc": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": None,
        "mem_total": None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "ptxas": ptxas,
        "ptxas_version": None,
        "taskcache": taskcache,
        "taskcache_version": None,
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["mem_total"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        p = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=30)
        lines = [l for l in p.stdout.splitlines() if l.strip()]
        rel = [l for l in lines if "release" in l]
        info["ptxas_version"] = (rel or lines or ["?"])[-1].strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    if taskcache:
        try:
            p = subprocess.run([taskcache, "--version"], capture_output=True, text=True, timeout=30)
            if p.returncode == 0 and p.stdout.strip():
                info["taskcache_version"] = p.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return info


def stats(times: list[float]) -> dict:
    if not times:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "n": len(times)}


def check_cubin(path: str, entries: list[str]) -> dict[str, bytes]:
    """Check that `path` is an ELF cubin with a .text section for every entry.
    Returns kernel name -> code bytes.  Raises CommandFailed otherwise."""
    if not os.path.isfile(path):
        raise CommandFailed(f"output check: {path} was not written")
    with open(path, "rb") as f:
        data = f.read()
    try:
        code = gen_module.kernel_code(data)
    except (ValueError, IndexError) as e:
        raise CommandFailed(f"output check: {path} is not a valid cubin ({e})") from e
    missing = [e for e in entries if e not in code]
    if missing:
        raise CommandFailed(f"output check: {path} lacks {len(missing)} of {len(entries)} kernels, "
                            f"e.g. {missing[:3]}")
    return code


# --------------------------------------------------------------------------
# one module
# --------------------------------------------------------------------------

def bench_module(mod: dict, args, ptxas: str, taskcache: str | None, work: str) -> dict:
    src = mod["path"]
    entries = mod["entries"]
    n = len(entries)
    res = {"module": mod, "scenarios": {}, "errors": [], "commands": {}, "edits": []}
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    reps = args.warmup + args.runs

    def timed_series(label: str, make_cmd, prepare=None, after=None) -> list[float] | None:
        """Run make_cmd(i) for i in range(reps); the first args.warmup runs
        are not recorded.  prepare(i)/after(i) run untimed."""
        times = []
        try:
            for i in range(reps):
                if prepare:
                    prepare(i)
                cmd = make_cmd(i)
                if i == args.warmup:
                    res["commands"][label] = shlex.join(cmd)
                dt = run_timed(cmd, args.timeout)
                if after:
                    after(i)
                tag = "warmup" if i < args.warmup else f"run {i - args.warmup + 1}/{args.runs}"
                log(f"  {label:<16} {tag:<10} {dt:8.3f} s")
                if i >= args.warmup:
                    times.append(dt)
        except CommandFailed as e:
            log(f"  {label}: FAILED\n{e}")
            res["errors"].append(f"{label}: {e}")
            return None
        return times

    # ---- ptxas peers --------------------------------------------------------
    out_p = os.path.join(out_dir, "ptxas.cubin")

    def check_ptxas_out(i, path):
        if i == 0:
            check_cubin(path, entries)
        rm_rf(path)

    if not args.no_peers:
        t = timed_series("ptxas", lambda i: [ptxas, f"-arch={args.arch}", src, "-o", out_p],
                         after=lambda i: check_ptxas_out(i, out_p))
        res["scenarios"]["ptxas"] = {"times": t}
        out_s = os.path.join(out_dir, "ptxas-split0.cubin")
        t = timed_series("ptxas -split0",
                         lambda i: [ptxas, f"-arch={args.arch}", "-split-compile=0", src, "-o", out_s],
                         after=lambda i: check_ptxas_out(i, out_s))
        res["scenarios"]["split0"] = {"times": t}

    if not taskcache:
        return res

    # ---- taskcache ----------------------------------------------------------
    def tc_cmd(inp: str, out: str, cache: str) -> list[str]:
        cmd = [taskcache, "build", inp, "-o", out, "--arch", args.arch, "--cache-dir", cache]
        if args.jobs:
            cmd += ["-j", str(args.jobs)]
        return cmd + args.taskcache_arg

    out_t = os.path.join(out_dir, "taskcache.cubin")

    # cold: a fresh, empty cache dir for every run
    cold_cache = os.path.join(work, "cache-cold")

    def cold_prep(i):
        rm_rf(cold_cache)
        os.makedirs(cold_cache)
        rm_rf(out_t)

    def cold_after(i):
        check_cubin(out_t, entries)

    t = timed_series("taskcache cold", lambda i: tc_cmd(src, out_t, cold_cache), cold_prep, cold_after)
    res["scenarios"]["cold"] = {"times": t}
    rm_rf(cold_cache)

    # warm: prime a cache with this exact module (untimed), then rebuild it
    cache = os.path.join(work, "cache")
    rm_rf(cache)
    os.makedirs(cache)
    base_code = None
    try:
        prime_cmd = tc_cmd(src, out_t, cache)
        res["commands"]["taskcache prime"] = shlex.join(prime_cmd)
        rm_rf(out_t)
        dt = run_timed(prime_cmd, args.timeout)
        base_code = check_cubin(out_t, entries)
        log(f"  {'taskcache prime':<16} {'(untimed)':<10} {dt:8.3f} s")
        res["prime_s"] = dt
    except CommandFailed as e:
        log(f"  taskcache prime: FAILED\n{e}")
        res["errors"].append(f"taskcache prime: {e}")
        return res

    def warm_prep(i):
        rm_rf(out_t)

    def warm_after(i):
        code = check_cubin(out_t, entries)
        diff = [k for k in entries if code[k] != base_code[k]]
        if diff:
            raise CommandFailed(f"output check: warm rebuild changed the code of {len(diff)} kernels, "
                                f"e.g. {diff[:3]}")

    t = timed_series("taskcache warm", lambda i: tc_cmd(src, out_t, cache), warm_prep, warm_after)
    res["scenarios"]["warm"] = {"times": t}
    # warm again, into the output the build before made (a rebuild that
    # finds the image there already only gives the file the current time)
    t = timed_series("taskcache warm, output kept", lambda i: tc_cmd(src, out_t, cache), None,
                     warm_after)
    res["scenarios"]["warm_kept"] = {"times": t}

    # edit: variants prepared up front (untimed), one different entry per run.
    # Timed runs i = 0..runs-1 edit entry (i*37) mod N; warmups use later
    # multiples; duplicates (N small / not coprime with 37) are skipped.
    with open(src) as f:
        text = f.read()
    order, seen, j = [], set(), 0
    while len(order) < reps and j < 100 * n + reps:
        k = (j * EDIT_STRIDE) % n
        if k not in seen:
            seen.add(k)
            order.append(k)
        j += 1
    while len(order) < reps:            # fewer entries than runs: reuse with another variant
        order.append(order[len(order) % n])
    order = order[args.runs:] + order[:args.runs]       # warmups first, then timed runs
    variants = []
    seen_k: dict[int, int] = {}
    for i, k in enumerate(order):
        v = seen_k.get(k, 0) + 1
        seen_k[k] = v
        new, info = gen_module.edit_ptx(text, k, variant=v)   # raises if not a one-entry edit
        tag = f"warmup{i}" if i < args.warmup else f"run{i - args.warmup + 1}"
        p = os.path.join(work, f"edit-{tag}-entry{k}.ptx")
        with open(p, "w") as f:
            f.write(new)
        info["run"] = i - args.warmup
        info["path"] = p
        variants.append(info)
        if i >= args.warmup:
            res["edits"].append({kk: vv for kk, vv in info.items() if kk != "path"})

    def edit_prep(i):
        rm_rf(out_t)

    def edit_after(i):
        code = check_cubin(out_t, entries)
        name = variants[i]["entry"]
        if code[name] == base_code[name]:
            raise CommandFailed(f"output check: edited kernel {name} has the same machine code as "
                                f"before the edit (stale cache hit?)")
        others = sum(1 for k in entries if k != name and code[k] != base_code[k])
        if others:
            log(f"  note: {others} unedited kernels differ from the primed build")
        rm_rf(variants[i]["path"])

    # the yardstick of an edit: ptxas on the edited kernel alone (written
    # before the edit series, which removes the edited inputs)
    alone = []
    for info in variants:
        with open(info["path"]) as f:
            p = info["path"][:-4] + "-alone.ptx"
            with open(p, "w") as g:
                g.write(kernel_alone(f.read(), info["entry"]))
        alone.append(p)
    out_a = os.path.join(out_dir, "alone.cubin")
    t = timed_series("taskcache edit", lambda i: tc_cmd(variants[i]["path"], out_t, cache),
                     edit_prep, edit_after)
    res["scenarios"]["edit"] = {"times": t}
    if not args.no_peers:
        t = timed_series("ptxas alone", lambda i: [ptxas, f"-arch={args.arch}", alone[i], "-o", out_a],
                         after=lambda i: check_ptxas_out(1, out_a))
        res["scenarios"]["alone"] = {"times": t}
    for p in alone:
        rm_rf(p)

    # relink: every unit cached, no module record
    t = timed_series("taskcache relink",
                     lambda i: tc_cmd(src, out_t, cache) + ["--no-module-cache"],
                     warm_prep, warm_after)
    res["scenarios"]["relink"] = {"times": t}
    rm_rf(cache)
    return res


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def fmt_s(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x < 0.1:
        return f"{x * 1000:.1f} ms"
    return f"{x:.3f} s"


def fmt_cell(st: dict | None) -> str:
    if not st or st["median"] is None:
        return "n/a"
    return f"{fmt_s(st['median'])} [{fmt_s(st['min'])}-{fmt_s(st['max'])}]"


def ratio(a: dict | None, b: dict | None) -> float | None:
    if not a or not b or a["median"] is None or b["median"] is None or b["median"] <= 0:
        return None
    return a["median"] / b["median"]


def print_table(res: dict, args, taskcache: str | None) -> list[str]:
    mod = res["module"]
    sc = res["scenarios"]
    st = {k: stats(v["times"]) if v.get("times") is not None else None for k, v in sc.items()}
    for k in st:
        sc[k]["stats"] = st[k]
    log("")
    log(f"== {mod['label']}: {mod['path']}")
    log(f"   {mod['bytes']:,} bytes ({mod['bytes'] / 1e6:.2f} MB), {len(mod['entries'])} .entry, "
        f"{mod['funcs']} .func; --arch {args.arch}; taskcache -j {args.jobs}; "
        f"median of {args.runs} run(s) [min-max], {args.warmup} untimed warmup(s) each")
    hdr = ["scenario", "taskcache", "ptxas", "ptxas -split-compile=0", "ptxas/taskcache", "split0/taskcache"]
    rows = []
    verdicts = []
    for name in ("cold", "warm", "edit"):
        tc = st.get(name)
        p = st.get("ptxas")
        s0 = st.get("split0")
        star = "" if name == "cold" else " *"
        r1, r2 = ratio(p, tc), ratio(s0, tc)
        rows.append([name,
                     fmt_cell(tc) if taskcache else "n/a (no binary)",
                     fmt_cell(p) + (star if p else ""),
                     fmt_cell(s0) + (star if s0 else ""),
                     f"{r1:.2f}x" if r1 else "n/a",
                     f"{r2:.2f}x" if r2 else "n/a"])
        peer, want = TARGETS[name]
        got = r1 if peer == "ptxas" else r2
        if got is not None:
            ok = got >= want
            peer_name = "whole-module ptxas" if peer == "ptxas" else "ptxas -split-compile=0"
            verdicts.append(f"   target {name}: >= {want:g}x vs {peer_name}: "
                            f"{got:.2f}x  {'MET' if ok else 'NOT MET'}")
    widths = [max(len(str(r[i])) for r in [hdr] + rows) for i in range(len(hdr))]
    line = "   " + "-+-".join("-" * w for w in widths)
    log("   " + " | ".join(h.ljust(w) for h, w in zip(hdr, widths)))
    log(line)
    for r in rows:
        log("   " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    log("   * ptxas has no cache: its warm and edit times are the same full compile, so the")
    log("     cold (full-module) medians are reused for those rows.")
    if res.get("prime_s") is not None:
        log(f"   (untimed cache-priming build of the original module: {fmt_s(res['prime_s'])})")
    if res["edits"]:
        log("   edit runs changed entries: "
            + ", ".join(f"#{e['entry_index']}" for e in res["edits"])
            + f"  (run i edits entry (i*{EDIT_STRIDE}) mod {len(mod['entries'])})")
    alone, edit, relink = st.get("alone"), st.get("edit"), st.get("relink")
    kept = st.get("warm_kept")
    if kept and kept["median"] is not None:
        log(f"   warm into the output the build before made (kept): {fmt_cell(kept)}")
    if relink and relink["median"] is not None:
        log(f"   relink (every unit cached, no module record): {fmt_cell(relink)}")
        verdicts.append(f"   target relink: <= {RELINK_MAX_S * 1000:g} ms: "
                        f"{fmt_s(relink['median'])}  "
                        f"{'MET' if relink['median'] <= RELINK_MAX_S else 'NOT MET'}")
    if alone and edit and alone["median"] is not None and edit["median"] is not None:
        limit = EDIT_OVER_ALONE[0] * alone["median"] + EDIT_OVER_ALONE[1]
        log(f"   ptxas on the edited kernel alone: {fmt_cell(alone)}")
        verdicts.append(f"   target edit: <= {EDIT_OVER_ALONE[0]:g} x kernel alone + "
                        f"{EDIT_OVER_ALONE[1] * 1000:g} ms = {fmt_s(limit)}: {fmt_s(edit['median'])}  "
                        f"{'MET' if edit['median'] <= limit else 'NOT MET'}")
        # The verdict compares medians; each run also has its own yardstick
        # (run i's edit and run i's kernel alone are the same entry), and an
        # edit whose unit holds several kernels is the one that misses it.
        pairs = list(zip(res["edits"], sc["edit"]["times"], sc["alone"]["times"]))
        if pairs:
            within = [e["entry_index"] for e, te, ta in pairs
                      if te <= EDIT_OVER_ALONE[0] * ta + EDIT_OVER_ALONE[1]]
            log(f"   edits within their own bound: {len(within)} of {len(pairs)}; "
                + ", ".join(f"#{e['entry_index']} {fmt_s(te)} / "
                            f"{fmt_s(EDIT_OVER_ALONE[0] * ta + EDIT_OVER_ALONE[1])}"
                            for e, te, ta in pairs))
    if verdicts:
        note = "" if (mod["label"] == "generated" and len(mod["entries"]) == 250) else \
            " (targets are defined for the 250-task generated module)"
        log("   targets (bench/README.md, 2-core machine)" + note + ":")
        for v in verdicts:
            log(v)
    log("   commands:")
    for k, c in res["commands"].items():
        log(f"     {k:<16} {c}")
    if res["errors"]:
        log(f"   {len(res['errors'])} scenario(s) FAILED, see above")
    return verdicts


def load_module(path: str, label: str) -> dict:
    with open(path) as f:
        text = f.read()
    import re
    return {"label": label, "path": os.path.abspath(path), "bytes": len(text.encode()),
            "entries": gen_module.entry_names(text),
            "funcs": len(re.findall(r"^\s*(?:\.\w+\s+)*\.func\b", text, re.M))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Benchmark taskcache vs ptxas (see bench/README.md).")
    ap.add_argument("--taskcache", metavar="PATH",
                    help="taskcache binary (default: build/taskcache in the repo, else taskcache on PATH)")
    ap.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    ap.add_argument("--taskcache-arg", metavar="ARG", action="append", default=[],
                    help="one more taskcache build option, e.g. --taskcache-arg=--whole-program-units "
                         "(repeatable)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per command (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed warmup runs per command (default 1)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                    help=f"taskcache -j (default os.cpu_count() = {os.cpu_count()})")
    ap.add_argument("--tasks", type=int, default=250, help="entries in the generated module (default 250)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated module (default 1)")
    ap.add_argument("--module", metavar="FILE.ptx", nargs="+", action="extend", default=[],
                    help="additional PTX module(s) to benchmark")
    ap.add_argument("--no-generate", action="store_true",
                    help="do not generate a module (only benchmark --module files)")
    ap.add_argument("--no-peers", action="store_true",
                    help="skip the ptxas measurements (taskcache only; no ratios)")
    ap.add_argument("--timeout", type=float, default=900, help="per-command timeout in seconds (default 900)")
    ap.add_argument("--json", metavar="OUT.json", help="write all raw timings and metadata as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.jobs < 1:
        ap.error("--runs and --jobs must be >= 1, --warmup >= 0")
    if args.no_generate and not args.module:
        ap.error("--no-generate needs at least one --module")
    for m in args.module:
        if not os.path.isfile(m):
            ap.error(f"--module {m}: no such file")

    try:
        ptxas = gen_module.find_cuda_tool("ptxas")
    except FileNotFoundError as e:
        log(f"error: {e}")
        return 1
    taskcache, looked = find_taskcache(args.taskcache)

    info = machine_info(ptxas, taskcache)
    log("== machine")
    log(f"   nproc {info['nproc']} (affinity {info['affinity_cpus']}), CPU: {info['cpu_model']}, "
        f"memory {info['mem_total']}, Linux {info['kernel']}, Python {info['python']}")
    if info["loadavg_start"]:
        log(f"   load average at start: {' '.join(f'{x:.2f}' for x in info['loadavg_start'])}")
    log(f"   ptxas: {ptxas} ({info['ptxas_version']})")
    if taskcache:
        log(f"   taskcache: {taskcache}" + (f" ({info['taskcache_version']})" if info["taskcache_version"] else ""))
    else:
        log("")
        log("   *** taskcache binary NOT FOUND (looked at: " + "; ".join(looked) + ").")
        log("   *** Build it (e.g. into build/taskcache) or pass --taskcache PATH.")
        log("   *** Measuring only the ptxas peers; taskcache columns are n/a.")

    work_root = tempfile.mkdtemp(prefix="taskcache-bench-")
    results = []
    failed = False
    try:
        modules = []
        if not args.no_generate:
            gen_ptx = os.path.join(work_root, "gen", f"physics_step_{args.tasks}.ptx")
            log("")
            log(f"== generating a {args.tasks}-task module (seed {args.seed}) with bench/gen_module.py ...")
            try:
                g = gen_module.build_module(gen_ptx, args.tasks, args.seed, args.arch)
            except (RuntimeError, FileNotFoundError) as e:
                log(f"error: module generation failed:\n{e}")
                return 1
            log(f"   {gen_ptx}: {g['ptx_bytes']:,} bytes, {g['entries']} .entry "
                f"({g['tiny']} tiny / {g['medium']} medium / {g['large']} large), {g['funcs']} .func; "
                f"codegen {g['t_codegen_s']:.2f} s + nvcc -ptx {g['t_nvcc_s']:.2f} s")
            modules.append(load_module(gen_ptx, "generated"))
        for m in args.module:
            modules.append(load_module(m, "module"))

        for mi, mod in enumerate(modules):
            if not mod["entries"]:
                log(f"error: {mod['path']} contains no .entry; skipped")
                failed = True
                continue
            work = os.path.join(work_root, f"m{mi}")
            os.makedirs(work)
            log("")
            log(f"== benchmarking {mod['path']} ({len(mod['entries'])} entries)")
            res = bench_module(mod, args, ptxas, taskcache, work)
            results.append(res)
            failed |= bool(res["errors"])
            rm_rf(work)

        all_verdicts = []
        for res in results:
            all_verdicts += print_table(res, args, taskcache)
        if hasattr(os, "getloadavg"):
            info["loadavg_end"] = os.getloadavg()
            log("")
            log(f"load average at end: {' '.join(f'{x:.2f}' for x in info['loadavg_end'])} "
                f"(other work on this machine inflates and spreads the timings)")

        if args.json:
            doc = {"machine": info,
                   "settings": {k: v for k, v in vars(args).items()},
                   "modules": [{"module": {k: v for k, v in r["module"].items() if k != "entries"}
                                | {"n_entries": len(r["module"]["entries"])},
                                "commands": r["commands"],
                                "timings_s": {k: v["times"] for k, v in r["scenarios"].items()},
                                "stats_s": {k: v.get("stats") for k, v in r["scenarios"].items()},
                                "prime_s": r.get("prime_s"),
                                "edits": r["edits"],
                                "errors": r["errors"]} for r in results],
                   "taskcache_found": bool(taskcache)}
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=2)
            log(f"raw timings written to {args.json}")
    finally:
        if args.keep:
            log(f"work directory kept: {work_root}")
        else:
            shutil.rmtree(work_root, ignore_errors=True)

    if failed:
        return 1
    if not taskcache:
        log("taskcache binary not found: only the ptxas peers were measured (exit status 2).")
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
