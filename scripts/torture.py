#!/usr/bin/env python3
"""torture: many processes, one cache, random SIGKILLs, damaged records,
failing storage, a size limit, hostile input. Prints one table; exits 1 if
any invariant broke.

    scripts/torture.py --quick            # CI: ~1-2 minutes
    scripts/torture.py --long             # 250-kernel modules, 10 minutes of kills, 1 GB input
    scripts/torture.py --seed 7 --procs 16 --duration 60

Invariants checked: no build that was not killed fails; no build ever
returns an image different from a cold, cache-less build of the same input
(corrupt records served must be 0); no record on disk fails verification;
a unit several processes miss at once is compiled once (duplicates are
counted and reported: with leases, only kills cause them); a killed
holder's lease is taken over at once; damaged records of every tier are
detected, counted and replaced; a full disk, a read-only cache and an
unusable cache directory never fail a build and warn once; a size limit
holds, also with concurrent cleanups, without trimming below its target;
FIFOs planted anywhere, held locks, decompression bombs and sparse files of
gigabytes never stop, slow or bloat a build, and `taskcache clear` raced by
another member never leaves the cache (as root, with a throwaway user);
records of another compiler, target or record format are never served."""

import argparse
import hashlib
import json
import os
import pathlib
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARCH = "sm_90"
sys.path.insert(0, str(ROOT / "scripts"))
import hostile  # noqa: E402  (scripts/hostile.py)
from cuda_tools import find_tool  # noqa: E402  (scripts/cuda_tools.py)


class Torture:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        self.tc = args.taskcache
        self.host = os.path.join(os.path.dirname(self.tc), "host_jit")
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="taskcache-torture-"))
        self.rows = []      # (check, figures, ok)
        self.ok = True
        self.ptxas = find_tool("ptxas")
        # a ptxas that logs what it compiles: duplicate compiles are visible
        self.log = self.work / "compiles.log"
        self.wrapper = self.work / "ptxas"
        self.wrapper.write_text(
            "#!/bin/sh\n"
            "for a in \"$@\"; do case \"$a\" in *.ptx) "
            f"echo \"$(date +%s.%N) $(sha256sum \"$a\" | cut -c1-64)\" >> {self.log};; esac; done\n"
            f"exec {self.ptxas} \"$@\"\n")
        self.wrapper.chmod(0o755)

    def env(self, **extra):
        e = dict(os.environ, TASKCACHE_PTXAS=str(self.wrapper), TASKCACHE_COMPILER="ptxas")
        e.pop("TASKCACHE_TEST_FAULTS", None)
        e.update({k: str(v) for k, v in extra.items()})
        return e

    def run(self, args, check=True, env=None, **kw):
        p = subprocess.run([str(x) for x in args], capture_output=True, text=True,
                           env=env or self.env(), **kw)
        if check and p.returncode != 0:
            raise RuntimeError(f"{args} -> {p.returncode}\n{p.stderr}")
        return p

    def build(self, ptx, out, cache, *extra, env=None, check=True):
        args = [self.tc, "build", ptx, "-o", out, "--arch", ARCH, "-j", "1"]
        args += ["--cache-dir", cache] if cache else ["--no-cache"]
        return self.run(args + list(extra), env=env, check=check)

    def stats(self, cache):
        return json.loads(self.run([self.tc, "stats", "--cache-dir", cache, "--json"]).stdout)

    def verify(self, cache):
        p = self.run([self.tc, "verify", "--cache-dir", cache, "--json"], check=False)
        return json.loads(p.stdout)

    def row(self, check, figures, ok):
        self.rows.append((check, figures, ok))
        self.ok &= ok
        print(f"[{'ok' if ok else 'FAIL'}] {check}: {figures}", flush=True)

    # ---- inputs ------------------------------------------------------------------------

    def make_modules(self):
        gen = ROOT / "bench" / "gen_module.py"
        base = self.work / "mod.ptx"
        tasks = 250 if self.a.long else 40
        self.run([sys.executable, gen, "-o", base, "--tasks", tasks, "--seed", self.a.seed])
        self.modules = [str(base)]
        for k in range(self.a.variants - 1):
            out = self.work / f"mod-edit{k}.ptx"
            entry = (k * 7 + 3) % tasks
            self.run([sys.executable, gen, "--input", base, "--edit", entry, "-o", out])
            self.modules.append(str(out))
        self.expected = {}
        for m in self.modules:
            out = self.work / "ref.cubin"
            self.build(m, out, None)
            self.expected[m] = hashlib.sha256(out.read_bytes()).hexdigest()

    def compiles(self):
        if not self.log.exists():
            return 0, 0
        lines = [l.split()[1] for l in self.log.read_text().splitlines() if l.strip()]
        return len(lines), len(set(lines))

    # ---- 1-2: many processes, one cache, kills --------------------------------------------

    def compile_once(self):
        """All processes start at once on an empty cache and build modules
        that share most units: each unit must be compiled exactly once."""
        cache = self.work / "once-cache"
        self.log.unlink(missing_ok=True)
        procs = [subprocess.Popen([self.tc, "build", self.modules[i % len(self.modules)], "-o",
                                   str(self.work / f"once-{i}.cubin"), "--arch", ARCH,
                                   "--cache-dir", str(cache), "-j", "2"], env=self.env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for i in range(self.a.procs)]
        rcs = [p.wait() for p in procs]
        total, distinct = self.compiles()
        waited = self.stats(cache)["waited"]
        wrong = sum(hashlib.sha256((self.work / f"once-{i}.cubin").read_bytes()).hexdigest() !=
                    self.expected[self.modules[i % len(self.modules)]]
                    for i in range(self.a.procs) if rcs[i] == 0)
        self.once = dict(compiles=total, units=distinct, duplicates=total - distinct,
                         waited=waited)
        self.row("a unit missed by many processes is compiled once",
                 f"{self.a.procs} processes at once: {total} compiles of {distinct} units "
                 f"({total - distinct} duplicates); {waited} units waited for another process",
                 all(r == 0 for r in rcs) and wrong == 0 and total == distinct)

    def concurrency(self):
        cache = self.work / "shared-cache"
        self.log.unlink(missing_ok=True)
        lock = threading.Lock()
        counts = dict(builds=0, ok=0, killed=0, failures=0, corrupt=0, started=0)
        procs = {}
        stop = time.monotonic() + self.a.duration
        failures = []

        def worker(w):
            rng = random.Random(self.a.seed * 1000 + w)
            while time.monotonic() < stop:
                m = rng.choice(self.modules)
                out = self.work / f"out-{w}.cubin"
                out.unlink(missing_ok=True)
                p = subprocess.Popen([self.tc, "build", m, "-o", str(out), "--arch", ARCH,
                                      "--cache-dir", str(cache), "-j", "1"],
                                     env=self.env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
                with lock:
                    procs[w] = p
                    counts["started"] += 1
                _, err = p.communicate()
                with lock:
                    procs.pop(w, None)
                    counts["builds"] += 1
                    if p.returncode == -signal.SIGKILL:
                        counts["killed"] += 1
                    elif p.returncode != 0:
                        counts["failures"] += 1
                        failures.append(err[-500:])
                    else:
                        counts["ok"] += 1
                        if hashlib.sha256(out.read_bytes()).hexdigest() != self.expected[m]:
                            counts["corrupt"] += 1

        def killer():
            rng = random.Random(self.a.seed)
            while time.monotonic() < stop:
                time.sleep(rng.uniform(0.05, self.a.kill_interval))
                with lock:
                    live = list(procs.values())
                if live:
                    victim = rng.choice(live)
                    try:
                        os.killpg(victim.pid, signal.SIGKILL)  # taskcache and its ptxas
                    except ProcessLookupError:
                        pass

        cleanups = [0]

        def cleaner():
            """Clears or shrinks the cache under the builders' feet, so units
            keep being missed by several processes at once."""
            rng = random.Random(self.a.seed + 1)
            while time.monotonic() < stop - 4:  # the end leaves records to verify
                time.sleep(rng.uniform(1.0, 3.0))
                if rng.random() < 0.5:
                    cmd = [self.tc, "clear", "--cache-dir", str(cache)]
                else:
                    cmd = [self.tc, "gc", "--cache-dir", str(cache), "--max-size", "64K"]
                subprocess.run(cmd, env=self.env(), capture_output=True)
                cleanups[0] += 1

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(self.a.procs)]
        threads += [threading.Thread(target=killer), threading.Thread(target=cleaner)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        total, distinct = self.compiles()
        v = self.verify(cache)
        temps = list(cache.glob("v1/*/*/*/.tmp.*"))
        # temporaries of killed writers are removed by gc once they are old
        past = time.time() - 7200
        for t in temps:
            os.utime(t, (past, past))
        g = json.loads(self.run([self.tc, "gc", "--cache-dir", cache, "--json"]).stdout)
        self.figures = dict(processes=self.a.procs, builds=counts["builds"], kills=counts["killed"],
                            clears_and_gcs=cleanups[0], failures=counts["failures"],
                            corrupt_served=counts["corrupt"],
                            duplicate_compiles=self.once["duplicates"],
                            evictions=self.stats(cache)["evictions"], bad_on_disk=v["bad"],
                            temps_left=len(temps), temps_cleaned=g["temps_removed"])
        self.row("many processes, one cache, random SIGKILLs",
                 f"{self.a.procs} processes, {elapsed:.0f} s: {counts['builds']} builds, "
                 f"{counts['killed']} killed, {cleanups[0]} clears/gcs meanwhile, "
                 f"{counts['failures']} failed, {counts['corrupt']} corrupt served",
                 counts["failures"] == 0 and counts["corrupt"] == 0 and counts["ok"] > 0)
        if failures:
            print("failures:\n" + "\n---\n".join(failures[:3]))
        self.row("crash safety", f"{v['checked']} records verified, {v['bad']} bad; "
                 f"{len(temps)} temporaries left by kills, {g['temps_removed']} removed by gc",
                 v["bad"] == 0 and g["temps_removed"] == len(temps))

    # ---- lease takeover ----------------------------------------------------------------

    def takeover(self):
        """Two processes miss the same units; the first holds the leases
        and is killed mid-compile: the second must take over at once."""
        cache = self.work / "lease-cache"
        # one ptxas for both processes (compilers are identified by their
        # bytes, and both must look up the same keys): slow only for the
        # first, which it tells by the environment
        slow = self.work / "maybe-slow-ptxas"
        mark = self.work / "slow.started"
        slow.write_text("#!/bin/sh\n"
                        "if [ -n \"$TORTURE_SLOW\" ]; then case \"$*\" in *--version*) ;; "
                        "*) touch \"$TORTURE_SLOW\"; sleep 30;; esac; fi\n"
                        f"exec {self.wrapper} \"$@\"\n")
        slow.chmod(0o755)
        m = self.modules[0]
        env_slow = self.env(TASKCACHE_PTXAS=slow, TORTURE_SLOW=mark)
        mark.unlink(missing_ok=True)
        a = subprocess.Popen([self.tc, "build", m, "-o", str(self.work / "a.cubin"), "--arch",
                              ARCH, "--cache-dir", str(cache), "-j", "1", "--unit-cost", "1000000"],
                             env=env_slow, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        while not mark.exists():
            time.sleep(0.01)
        b_out = self.work / "b.cubin"
        b = subprocess.Popen([self.tc, "build", m, "-o", str(b_out), "--arch", ARCH,
                              "--cache-dir", str(cache), "-j", "1", "--unit-cost", "1000000"],
                             env=self.env(TASKCACHE_PTXAS=slow),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)                   # B is now waiting on A's leases
        self.log.unlink(missing_ok=True)
        t_kill = time.time()
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
        b.wait(timeout=300)
        first = min((float(l.split()[0]) for l in self.log.read_text().splitlines()),
                    default=None) if self.log.exists() else None
        ref = self.work / "b-ref.cubin"
        self.build(m, ref, None, "--unit-cost", "1000000")
        ok = b.returncode == 0 and first is not None and b_out.read_bytes() == ref.read_bytes()
        delay = (first - t_kill) if first else float("nan")
        self.row("dead lease holder taken over", f"second process compiled {delay:.2f} s after "
                 f"the holder was killed (target: about a second)", ok and delay < 2.0)

    # ---- 3: damaged records of every tier --------------------------------------------------

    def damage(self):
        cache = self.work / "damage-cache"
        m = self.modules[0]
        out = self.work / "d.cubin"
        self.build(m, out, cache)
        host_out = self.work / "h.cubin"
        tasks = ROOT / "examples" / "tasks.txt"
        self.run([self.host, "--cache-dir", cache, tasks, host_out], env=self.env())
        good_host = host_out.read_bytes()
        recs = [p for p in cache.glob("v1/*/*/*/*") if len(p.name) == 62]
        kinds = {k: [p for p in recs if p.parts[-3] == k] for k in "umtg"}
        modes = ["flip", "truncate", "empty", "garbage"]
        for i, p in enumerate(recs):
            data = p.read_bytes()
            mode = modes[i % 4]
            if mode == "flip":
                j = self.rng.randrange(len(data))
                data = data[:j] + bytes([data[j] ^ (1 << self.rng.randrange(8))]) + data[j + 1:]
            elif mode == "truncate":
                data = data[:self.rng.randrange(len(data))]
            elif mode == "empty":
                data = b""
            else:
                data = os.urandom(len(data))
            p.write_bytes(data)
        before = self.stats(cache)
        self.build(m, out, cache)
        r = self.run([self.host, "--cache-dir", cache, tasks, host_out], env=self.env())
        after = self.stats(cache)
        ok = hashlib.sha256(out.read_bytes()).hexdigest() == self.expected[m] and \
            host_out.read_bytes() == good_host
        detected = after["bad_records"] - before["bad_records"]
        v = self.verify(cache)
        self.row("damaged records (flip, truncate, empty, garbage)",
                 f"{len(recs)} damaged ({', '.join(f'{len(v2)} {k}' for k, v2 in kinds.items())}):"
                 f" {detected} detected, outputs correct, {v['bad']} bad left after rebuild",
                 ok and detected >= len(kinds["u"]) + len(kinds["m"]) and "codegen ran" in r.stdout)

    # ---- 4: degraded storage ------------------------------------------------------------------

    def degraded(self):
        m = self.modules[1 % len(self.modules)]
        out = self.work / "g.cubin"
        results = []
        for fault in ("write:ENOSPC", "write:EROFS", "write:EACCES", "read:EIO", "lock:EACCES"):
            cache = self.work / f"fault-{fault.replace(':', '-')}"
            p = self.build(m, out, cache, env=self.env(TASKCACHE_TEST_FAULTS=fault), check=False)
            warnings = p.stderr.count("warning:")
            good = p.returncode == 0 and \
                hashlib.sha256(out.read_bytes()).hexdigest() == self.expected[m]
            results.append((fault, good, warnings))
        # an unusable cache directory
        p = self.build(m, out, "/proc/taskcache/cannot/exist", check=False)
        results.append(("cache dir cannot be created", p.returncode == 0,
                        p.stderr.count("warning:")))
        # a real full disk, where the machine lets us mount a small tmpfs
        mnt = self.work / "tiny"
        mnt.mkdir()
        real = "not tried"
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)],
                          capture_output=True).returncode == 0:
            try:
                p = self.build(m, out, mnt / "c", check=False)
                results.append(("real full tmpfs (96 KiB)", p.returncode == 0,
                                p.stderr.count("warning:")))
                real = "full tmpfs tested"
            finally:
                subprocess.run(["umount", str(mnt)])
        else:
            real = "no privilege to mount a tmpfs: injected faults only"
        if os.geteuid() != 0:
            ro = self.work / "readonly"
            ro.mkdir()
            ro.chmod(0o500)
            p = self.build(m, out, ro, check=False)
            results.append(("read-only directory (permissions)", p.returncode == 0,
                            p.stderr.count("warning:")))
            ro.chmod(0o700)
        ok = all(g and w == 1 for f, g, w in results if not f.startswith("read:") and
                 not f.startswith("lock:")) and all(g for _, g, _ in results)
        self.row("degraded storage never fails a build",
                 "; ".join(f"{f}: {'built' if g else 'FAILED'}, {w} warning(s)"
                           for f, g, w in results) + f" ({real})", ok)

    # ---- 5: eviction ------------------------------------------------------------------------

    def eviction(self):
        full = self.work / "full-cache"
        for m in self.modules:
            self.build(m, self.work / "e.cubin", full)
        size = self.stats(full)["disk_bytes"]
        limit = max(size // 3, 64 * 1024)
        cache = self.work / "small-cache"
        over = 0
        for m in self.modules:
            self.build(m, self.work / "e.cubin", cache, "--max-size", limit)
            if self.stats(cache)["disk_bytes"] > limit:
                over += 1
        s = self.stats(cache)
        # concurrent cleanups: several processes at once, each over the limit
        procs = [subprocess.Popen([self.tc, "build", m, "-o", str(self.work / f"c{i}.cubin"),
                                   "--arch", ARCH, "--cache-dir", str(cache), "-j", "1",
                                   "--max-size", str(limit)], env=self.env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for i, m in enumerate(self.modules * 2)]
        rcs = [p.wait() for p in procs]
        final = self.stats(cache)["disk_bytes"]
        target = limit // 10 * 9
        biggest = max(p.stat().st_size for p in cache.glob("v1/*/*/*/*") if len(p.name) == 62)
        # a module record whose units were evicted is still a correct hit, and
        # an edit after evictions rebuilds what it needs
        out = self.work / "after-evict.cubin"
        self.build(self.modules[0], out, cache, "--max-size", limit)
        correct = hashlib.sha256(out.read_bytes()).hexdigest() == self.expected[self.modules[0]]
        ok = over == 0 and all(r == 0 for r in rcs) and final <= limit and \
            final >= target - biggest and correct and s["evictions"] > 0
        self.row("size limit with LRU eviction",
                 f"limit {limit} B (a third of {size} B): {s['evictions']} evictions, over the "
                 f"limit after {over} builds; {len(procs)} concurrent builds left {final} B "
                 f"(target {target} B), outputs correct", ok)

    # ---- 7: hostile input ------------------------------------------------------------------

    def hostile(self):
        cache = self.work / "hostile-cache"
        notes = []
        ok = True
        # deep nesting and long lines
        deep = self.work / "deep.ptx"
        depth = 1_000_000 if self.a.long else 100_000
        deep.write_text(".version 8.0\n.target sm_90\n.visible .entry k() {\n" + "{" * depth +
                        "}" * depth + "\nret;\n}\n")
        p = self.run([self.tc, "explain", deep, "--arch", ARCH, "--no-cache"], check=False,
                     timeout=120)
        ok &= p.returncode == 0
        notes.append(f"{depth} nested braces: {'ok' if p.returncode == 0 else 'FAILED'}")
        # a large input (the kernels of the test module, renamed, repeated):
        # memory used by parsing, slicing and keying every unit and slice
        size_mb = 1024 if self.a.long else 64
        big = self.work / "big.ptx"
        text = open(self.modules[0]).read()
        cut = text.index(".visible .entry") if ".visible .entry" in text else text.index(".entry")
        head, kernels = text[:cut], text[cut:]
        import re
        names = sorted(set(re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", kernels)), key=len,
                       reverse=True)
        with open(big, "w") as f:
            f.write(head)
            n = 0
            while f.tell() < size_mb << 20:
                chunk = kernels
                for name in names:
                    chunk = chunk.replace(name, f"{name}_r{n}")
                f.write(chunk)
                n += 1
        real = big.stat().st_size
        p = self.run(["/usr/bin/time", "-f", "%M", self.tc, "explain", big, "--arch", ARCH,
                      "--no-cache", "--json"], check=False, timeout=3600)
        rss = int(p.stderr.strip().splitlines()[-1]) * 1024 if p.returncode == 0 else 0
        ratio = rss / real if real else 0
        ok &= p.returncode == 0 and ratio <= 3.5
        notes.append(f"{real >> 20} MiB input: peak memory {rss >> 20} MiB ({ratio:.2f}x)")
        big.unlink()
        # planted links: a record that is a link to a file outside, and a
        # shard directory that is a link to a directory outside
        m = self.modules[0]
        self.build(m, self.work / "h.cubin", cache)
        outside = self.work / "outside"
        outside.mkdir()
        secret = outside / "secret"
        secret.write_text("not a record")
        recs = sorted(p for p in cache.glob("v1/*/u/*/*") if len(p.name) == 62)
        victim = recs[0]
        victim.unlink()
        victim.symlink_to(secret)
        shard = recs[-1].parent
        shutil.rmtree(shard)
        shard.symlink_to(outside, target_is_directory=True)
        self.build(m, self.work / "h2.cubin", cache)
        leaked = [p.name for p in outside.iterdir() if p.name != "secret"]
        good = hashlib.sha256((self.work / "h2.cubin").read_bytes()).hexdigest() == self.expected[m]
        ok &= not leaked and secret.read_text() == "not a record" and good
        notes.append(f"planted links: followed {'never' if not leaked else leaked}")
        mode = oct(cache.stat().st_mode & 0o777)
        ok &= mode == "0o700"
        notes.append(f"cache directory mode {mode}")
        self.row("hostile input and planted links", "; ".join(notes), ok)

    # ---- 8: hostile members of a shared cache ----------------------------------------------------

    def members(self):
        """What a member of a shared cache can plant or hold: FIFOs and
        other special files at every path taskcache reads, a held
        statistics lock and a held lease, records that inflate without
        bound and sparse files of gigabytes; and, when this runs as root,
        the clear race with a throwaway attacker. Builds must finish, stay
        correct, stay small, and the planted files must go at the next gc."""
        cache = self.work / "members-cache"
        m = self.modules[0]
        out = self.work / "mem.cubin"
        self.build(m, out, cache)
        expected = self.expected[m]
        notes, ok = [], True

        def correct():
            return hashlib.sha256(out.read_bytes()).hexdigest() == expected

        # special files where records, locks, statistics, configuration and memos go
        rounds = 5 if self.a.long else 1
        for _ in range(rounds):
            victims = hostile.records(cache, "u")[:3] + [cache / "stats", cache / "stats.lock",
                                                          cache / "taskcache.conf"]
            victims += list((cache / "toolchain").iterdir())[:1]
            for v in victims:
                v.unlink(missing_ok=True)
                os.mkfifo(v)
            p = self.build(m, out, cache, "--no-module-cache", check=False)
            ok &= p.returncode == 0 and correct()
        self.run([self.tc, "gc", "--cache-dir", cache])
        left = [p for p in cache.rglob("*") if stat.S_ISFIFO(p.lstat().st_mode)]
        ok &= not left
        notes.append(f"FIFOs planted {rounds}x at {len(victims)} paths: built, {len(left)} left "
                     "after gc")
        # a statistics lock and a lease held by another member
        held = 10 if self.a.long else 3
        holder = subprocess.Popen(["flock", "-x", cache / "stats.lock", "sleep", str(held * 2)],
                                  start_new_session=True)
        time.sleep(0.3)
        t0 = time.monotonic()
        p = self.build(m, out, cache, check=False)
        stats_wait = time.monotonic() - t0
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        ok &= p.returncode == 0 and stats_wait < 5
        self.run([self.tc, "clear", "--cache-dir", cache])
        unit = json.loads(self.run([self.tc, "explain", m, "--arch", ARCH, "--cache-dir", cache,
                                    "--json"]).stdout)["entries"][0]["unit_key"]
        lock = cache / "v1" / ARCH / "u" / unit[:2] / f"{unit[2:]}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen(["flock", "-x", lock, "sleep", str(held)],
                                  start_new_session=True)
        time.sleep(0.3)
        rc, rss, cpu, wall, err = hostile.measure(
            [self.tc, "build", m, "-o", out, "--arch", ARCH, "--cache-dir", cache, "-j", "1"],
            env=self.env())
        holder.wait()
        ok &= rc == 0 and correct() and wall > held - 1
        notes.append(f"statistics lock held: build took {stats_wait:.2f} s; lease held {held} s: "
                     f"waited {wall:.1f} s using {cpu:.2f} s of CPU (compile included)")
        # records that inflate without bound, and sparse files of gigabytes
        self.build(m, out, cache)
        claim = (16 if self.a.long else 4) << 30
        hostile.bomb(hostile.records(cache, "m")[0], claim)
        for sparse in hostile.records(cache, "u")[:2] + [cache / "stats",
                                                          cache / "taskcache.conf"]:
            with open(sparse, "ab") as f:
                f.truncate(5 << 30)
        rc, rss, cpu, wall, err = hostile.measure(
            [self.tc, "build", m, "-o", out, "--arch", ARCH, "--cache-dir", cache],
            env=self.env())
        ok &= rc == 0 and correct() and rss < 300 << 20
        notes.append(f"a record inflating to {claim >> 30} GiB and 5 GB sparse files: peak "
                     f"memory {rss >> 20} MiB, {wall:.2f} s")
        # the clear race, with a throwaway attacker in the cache's group
        if hostile.can_make_users():
            users = hostile.Users()
            try:
                survived = 0
                races = 5 if self.a.long else 1
                for i in range(races):
                    base = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="torture-race-"))
                    hostile.open_dir(base, 0o755)
                    shared = base / "cache"
                    shared.mkdir()
                    os.chown(shared, 0, users.gid)
                    os.chmod(shared, 0o2770)
                    (shared / "taskcache.conf").write_text("shared = true\n")
                    target = base / "victim"
                    (target / "precious").mkdir(parents=True)
                    os.chmod(target, 0o700)
                    park = hostile.open_dir(base / "park", 0o777)
                    alive, _, _ = hostile.clear_race(users, "mallory", str(shared), str(target),
                                                     "precious", str(park),
                                                     [self.tc, "clear", "--cache-dir", shared])
                    survived += alive
                    shutil.rmtree(base, ignore_errors=True)
                ok &= survived == races
                notes.append(f"clear raced by another member {races}x: target kept {survived}x")
            finally:
                users.close()
        else:
            notes.append("clear race: not run (needs root for a throwaway user)")
        self.row("hostile members of a shared cache", "; ".join(notes), ok)

    # ---- 9: version, target and format safety ----------------------------------------------------

    def safety(self):
        cache = self.work / "safety-cache"
        m = self.modules[0]
        out = self.work / "s.cubin"
        self.build(m, out, cache)
        base = self.stats(cache)["compiles"]
        # another compiler with the real ptxas's --version banner (a wrapper
        # adding an option, say): it is its bytes that tell them apart
        other = self.work / "other-ptxas"
        other.write_text(f"#!/bin/sh\nexec {self.ptxas} \"$@\" -O2\n")
        other.chmod(0o755)
        self.build(m, out, cache, env=self.env(TASKCACHE_PTXAS=other))
        c1 = self.stats(cache)["compiles"]
        self.build(m, out, cache, "--arch", "sm_100")
        c2 = self.stats(cache)["compiles"]
        # another record format: patch the format field of every record
        for p in cache.glob("v1/*/*/*/*"):
            if len(p.name) == 62:
                d = bytearray(p.read_bytes())
                d[4] ^= 0x7F
                p.write_bytes(bytes(d))
        self.build(m, out, cache)
        c3 = self.stats(cache)["compiles"]
        good = hashlib.sha256(out.read_bytes()).hexdigest() == self.expected[m]
        ok = c1 > base and c2 > c1 and c3 > c2 and good
        self.row("other compiler / target / record format never served",
                 f"compiles: first {base}, other compiler +{c1 - base}, sm_100 +{c2 - c1}, "
                 f"other format +{c3 - c2}", ok)

    def table(self):
        print("\n== torture: seed", self.a.seed, "mode", "long" if self.a.long else "quick")
        f = getattr(self, "figures", {})
        if f:
            print("   " + " | ".join(f"{k} {v}" for k, v in f.items()))
        width = max(len(r[0]) for r in self.rows)
        for check, figures, ok in self.rows:
            print(f"   {'PASS' if ok else 'FAIL'}  {check:<{width}}  {figures}")
        print("== torture:", "all invariants held" if self.ok else "INVARIANT BROKEN")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small modules, short runs (CI)")
    ap.add_argument("--long", action="store_true", help="250-kernel modules, 10 minutes, 1 GB input")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--duration", type=float, default=None, help="seconds of the kill phase")
    ap.add_argument("--kill-interval", type=float, default=None)
    ap.add_argument("--variants", type=int, default=None)
    ap.add_argument("--taskcache", default=str(ROOT / "build" / "taskcache"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.duration = a.duration or (600 if a.long else 25)
    a.kill_interval = a.kill_interval or (1.0 if a.long else 0.5)
    a.variants = a.variants or (12 if a.long else 5)
    t = Torture(a)
    try:
        t.make_modules()
        for step in (t.compile_once, t.concurrency, t.takeover, t.damage, t.degraded, t.eviction,
                     t.hostile, t.members,
                     t.safety):
            try:
                step()
            except Exception as e:  # a crashed check is a failed check
                t.row(step.__name__, f"raised {type(e).__name__}: {e}", False)
        t.table()
    finally:
        if not a.keep:
            shutil.rmtree(t.work, ignore_errors=True)
    sys.exit(0 if t.ok else 1)


if __name__ == "__main__":
    main()
