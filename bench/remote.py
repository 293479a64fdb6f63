#!/usr/bin/env python3
"""Benchmark the remote tier: what a second machine gains from a shared
remote, and what a remote costs when it is not there.

Usage:
  python3 bench/remote.py [--taskcache PATH] [--arch sm_90] [--runs 5] [--tasks 250]
                          [--jobs N] [--json OUT.json] [--keep]

It starts, on loopback ports, a redis-server and an nginx with WebDAV
(tests/e2e/remote_servers.py; Debian's redis-server and nginx), generates
a --tasks module (bench/gen_module.py), and measures in fresh processes,
median of --runs runs, side by side:

  ptxas                whole-module ptxas of the module (the peer without taskcache)
  compile (cold)       taskcache with an empty cache and no remote: what machine B
                       pays without a shared remote
  B from the remote    machine A built the module (uploaded); B has an empty local
                       cache: a module record from the remote (Redis, WebDAV)
  B edits one kernel   B (empty local cache) builds a one-kernel edit A never built:
                       every other unit from the remote, one compiled (units missing
                       locally are looked up 8 at a time: a distant server costs a
                       few round trips, which "Redis 10 ms away", Redis behind a
                       proxy that delays each chunk 5 ms each way, shows)
  warm, no remote      a warm local build
  warm, unreachable    the same with a remote configured that is not there (a closed
                       port, and an address that never answers): the overhead must
                       stay within 5 ms, since a warm build never connects

and the per-record latency of lookups (from `taskcache stats`: lookup time
over lookups) and of `taskcache remote check`. Every output is compared
with the cold build's, byte for byte. Python 3.11 standard library only.
Exit status 0, or 1 when a command failed or an output differed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "e2e"))
import remote_servers as rs  # noqa: E402  (the servers the tests start)

TARGET_SPEEDUP = 10.0      # B from the remote vs compiling (issue 13)
TARGET_OVERHEAD_MS = 5.0   # a configured, unreachable remote on a warm build
# An address that never answers (TEST-NET-1, RFC 5737): a connect waits
# for its timeout, so a build that connected would show it.
BLACKHOLE = "192.0.2.1"


def log(msg=""):
    print(msg, file=sys.stderr, flush=True)


def timed(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return dt, p


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(s):
    return f"{s * 1e3:8.1f} ms" if s < 1 else f"{s:8.3f} s "


class Bench:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.tc = args.taskcache
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("TASKCACHE_REMOTE", "TASKCACHE_DIR", "TASKCACHE_SECRET_FILE")}
        self.n = 0
        self.reference = None

    def fresh(self, name):
        self.n += 1
        d = os.path.join(self.work, f"{name}-{self.n}")
        return d

    def build(self, ptx, cache, remote=None, extra=()):
        out = os.path.join(self.work, "out.cubin")
        cmd = [self.tc, "build", ptx, "-o", out, "--arch", self.args.arch, "--cache-dir", cache,
               "-j", str(self.args.jobs), *extra]
        if remote:
            cmd += ["--remote", remote]
        dt, p = timed(cmd, self.env)
        with open(out, "rb") as f:
            image = f.read()
        return dt, image, p.stderr

    def stats(self, cache):
        _, p = timed([self.tc, "stats", "--cache-dir", cache, "--json"], self.env)
        return json.loads(p.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Benchmark the remote tier (see the docstring).")
    ap.add_argument("--taskcache", default=os.path.join(REPO_ROOT, "build", "taskcache"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=250)
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    if not (rs.REDIS and rs.REDIS_CLI and rs.NGINX):
        log("remote.py: needs redis-server, redis-cli and nginx (scripts/setup.sh installs them)")
        return 1
    work = tempfile.mkdtemp(prefix="taskcache-bench-remote.")
    redis = nginx = None
    results = {}
    try:
        b = Bench(args, work)
        ptx = os.path.join(work, "m.ptx")
        edits = [3 + 37 * i for i in range(args.runs + 1)]
        log(f"generating a {args.tasks}-kernel module and {len(edits)} one-kernel edits")
        subprocess.run([sys.executable, os.path.join(BENCH_DIR, "gen_module.py"), "-o", ptx,
                        "--tasks", str(args.tasks)] +
                       [x for k in edits for x in ("--edit", str(k % args.tasks))],
                       check=True, capture_output=True)
        redis = rs.Redis(os.path.join(work, "redis"))
        nginx = rs.Nginx(os.path.join(work, "nginx"))
        # a server farther away: 5 ms each way through a delaying proxy
        distant = rs.FaultProxy(redis.port)
        distant.mode, distant.delay = "delay", 0.005
        remotes = {"Redis": f"redis://127.0.0.1:{redis.port}",
                   "WebDAV": nginx.url("taskcache"),
                   "Redis 10 ms away": f"redis://127.0.0.1:{distant.port}/1"}

        ptxas = shutil.which("ptxas") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                                      "bin", "ptxas")
        log("ptxas, whole module")
        results["ptxas"] = [timed([ptxas, f"-arch={args.arch}", ptx, "-o",
                                   os.path.join(work, "p.cubin")])[0] for _ in range(args.runs)]

        log("compile (cold): empty cache, no remote")
        cold = []
        for _ in range(args.runs):
            dt, image, _ = b.build(ptx, b.fresh("cold"))
            cold.append(dt)
            b.reference = b.reference or image
            if image != b.reference:
                raise SystemExit("cold builds differ")
        results["compile (cold)"] = cold

        latency = {}
        for name, remote in remotes.items():
            log(f"machine A uploads to {name}")
            a = b.fresh("a")
            _, image, _ = b.build(ptx, a, remote)
            assert image == b.reference
            log(f"machine B from {name}: empty local cache")
            times, lookups, lookup_s = [], 0, 0.0
            for _ in range(args.runs):
                cache = b.fresh("b")
                dt, image, _ = b.build(ptx, cache, remote)
                if image != b.reference:
                    raise SystemExit(f"B's build from {name} differs from the cold build")
                s = b.stats(cache)
                if s["remote_hits"] != 1 or s["compiles"] != 0:
                    raise SystemExit(f"B's build from {name} was not served by the remote: {s}")
                times.append(dt)
            results[f"B from {name}"] = times
            log(f"machine B edits one kernel, units from {name}")
            times = []
            for k in edits[1:]:
                cache = b.fresh("e")
                edited = os.path.join(work, f"m-edit{k % args.tasks}.ptx")
                dt, _, _ = b.build(edited, cache, remote)
                s = b.stats(cache)
                lookups += s["remote_hits"] + s["remote_misses"]
                lookup_s += s["remote_read_us"] / 1e6
                times.append(dt)
            results[f"B edits one kernel ({name})"] = times
            results[f"units compiled by the edit ({name})"] = s["compiles"]
            _, p = timed([b.tc, "remote", "check", "--cache-dir", b.fresh("chk"), "--remote",
                          remote, "--json"], b.env)
            chk = json.loads(p.stdout)
            latency[name] = {"lookup_ms": lookup_s / max(lookups, 1) * 1e3, "lookups": lookups,
                             "check_write_ms": chk["write_seconds"] * 1e3,
                             "check_read_ms": chk["read_seconds"] * 1e3}
        results["latency"] = latency

        log("warm local builds: no remote, and unreachable remotes")
        warm = b.fresh("warm")
        b.build(ptx, warm)
        series = {"warm, no remote": None,
                  "warm, remote on a closed port": f"redis://127.0.0.1:{rs.free_port()}",
                  f"warm, remote at {BLACKHOLE} (never answers)":
                      f"http://{BLACKHOLE}:8080/tc|connect-timeout=2s"}
        runs = max(args.runs * 3, 15)  # ms differences need more samples
        for _ in range(2):
            b.build(ptx, warm)
        for label in series:
            results[label] = []
        for _ in range(runs):  # interleaved: drift hits every series alike
            for label, remote in series.items():
                dt, image, stderr = b.build(ptx, warm, remote)
                if image != b.reference or "warning" in stderr:
                    raise SystemExit(f"{label}: {stderr}")
                results[label].append(dt)
    finally:
        for s in (redis, nginx, locals().get("distant")):
            if s:
                s.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"== remote tier, {args.tasks}-kernel module, {args.arch}, -j {args.jobs}, "
          f"median of {args.runs} fresh processes (warm series: {runs})")
    base = median(results["compile (cold)"])
    for label, xs in results.items():
        if isinstance(xs, list):
            m = median(xs)
            extra = ""
            if label.startswith("B "):
                extra = f"   {base / m:6.1f}x faster than compiling"
            elif label == "ptxas":
                extra = f"   ({m / base:.2f}x taskcache cold)"
            print(f"   {label:44s} {fmt(m)}   [{fmt(min(xs)).strip()} - {fmt(max(xs)).strip()}]"
                  f"{extra}")
    for name in ("Redis", "WebDAV"):
        print(f"   units compiled by B's one-kernel edit ({name}): "
              f"{results[f'units compiled by the edit ({name})']}")
    for name, l in results["latency"].items():
        print(f"   per-record latency, {name}: lookup {l['lookup_ms']:.2f} ms "
              f"(mean of {l['lookups']} lookups); remote check: write "
              f"{l['check_write_ms']:.2f} ms, read {l['check_read_ms']:.2f} ms")
    warm_base = median(results["warm, no remote"])
    ok = True
    for name in ("Redis", "WebDAV"):
        speedup = base / median(results[f"B from {name}"])
        good = speedup >= TARGET_SPEEDUP
        ok &= good
        print(f"   {'PASS' if good else 'MISS'}  B from {name} vs compiling: {speedup:.1f}x "
              f"(target >= {TARGET_SPEEDUP:.0f}x)")
    for label in series:
        if label == "warm, no remote":
            continue
        over = (median(results[label]) - warm_base) * 1e3
        good = over <= TARGET_OVERHEAD_MS
        ok &= good
        print(f"   {'PASS' if good else 'MISS'}  {label}: {over:+.1f} ms over a warm build "
              f"without one (target <= {TARGET_OVERHEAD_MS:.0f} ms)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
