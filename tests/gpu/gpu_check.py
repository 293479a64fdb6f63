#!/usr/bin/env python3
"""gpu_check.py -- the steps of scripts/gpu-check.sh (which see).

Subcommands (each writes a JSON file with its rows for the final table):

  edit IN.ptx OUT.ptx            insert `membar.cta;` after the opening `{` of the
                                 first kernel in name order; prints that kernel
  identity ...                   (a) bitwise identity of results over builds
  sass ...                       (b) run tests/gpu/sass_compare.py (if present)
  timing ...                     (c) per-kernel run time, whole-module ptxas vs taskcache
  first-launch ...               (d) time to first launch
  bench-build ...                (e) bench/run.py with each compile backend
  summary ...                    merge the JSON files, print the table, exit status

Every subprocess has a timeout; a step never blocks the script past its
deadline (--deadline, seconds since the epoch): what did not run is reported
as SKIPPED. Progress lines go to stdout and --log; details only to --log.
Python 3 standard library only.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import random
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "realworld"))
import check_specs  # noqa: E402  (the spec <-> module mapping)
import ptxitems  # noqa: E402  (the module's top-level items)

START = time.time()
LOG_FILE = None
_log_lock = threading.Lock()


def _stamp():
    return f"[{time.strftime('%H:%M:%S')} +{time.time() - START:6.1f}s]"


def log(msg):
    """A progress line: stdout and the log."""
    line = f"{_stamp()} {msg}"
    with _log_lock:
        print(line, flush=True)
        if LOG_FILE:
            LOG_FILE.write(line + "\n")
            LOG_FILE.flush()


def detail(msg):
    """Details: the log only."""
    with _log_lock:
        if LOG_FILE:
            LOG_FILE.write(msg.rstrip("\n") + "\n")
            LOG_FILE.flush()
        else:
            print(msg, flush=True)


def setup_common(args):
    global START, LOG_FILE
    if getattr(args, "start", None):
        START = float(args.start)
    if getattr(args, "log", None):
        LOG_FILE = open(args.log, "a")


def time_left(args):
    dl = getattr(args, "deadline", None)
    return float("inf") if not dl else float(dl) - time.time()


def run(cmd, stdout_path=None, stderr_path=None, env=None, timeout=120, cwd=None):
    """Runs cmd; returns a dict (rc, seconds, stdout, stderr, timed_out). Never raises for
    the command's own failures."""
    t0 = time.monotonic()
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        for k, v in env.items():
            if v is None:
                full_env.pop(k, None)
            else:
                full_env[k] = v
    res = {"cmd": [str(c) for c in cmd], "rc": None, "timed_out": False, "stdout": "",
           "stderr": ""}
    try:
        p = subprocess.run([str(c) for c in cmd], capture_output=True, env=full_env,
                           timeout=timeout, cwd=cwd)
        res["rc"] = p.returncode
        res["stdout"] = p.stdout.decode("utf-8", "replace")
        res["stderr"] = p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        res["timed_out"] = True
        res["rc"] = 124
        res["stdout"] = (e.stdout or b"").decode("utf-8", "replace")
        res["stderr"] = (e.stderr or b"").decode("utf-8", "replace") + \
            f"\n(killed after a timeout of {timeout} s)"
    except OSError as e:
        res["rc"] = 127
        res["stderr"] = f"cannot run {cmd[0]}: {e}"
    res["seconds"] = time.monotonic() - t0
    if stdout_path:
        with open(stdout_path, "w") as f:
            f.write(res["stdout"])
    if stderr_path:
        with open(stderr_path, "w") as f:
            f.write(res["stderr"])
    return res


def last_lines(text, n=6):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def fmt_us(us):
    if us is None:
        return "n/a"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} us"


# ---- PTX edit and cubin code ---------------------------------------------------------------------

def entry_bodies(text):
    """[(name, index just after the body's opening '{')] for every kernel
    defined in the module (ptxitems: prototypes have no body)."""
    out, pos = [], 0
    for item in ptxitems.split(text):
        span = ptxitems.body_span(item.text) if item.kind == "entry" and item.is_definition else None
        if span:
            out.append((item.name, pos + span[0]))
        pos += len(item.text)
    return out


def make_edit(src, dst):
    """Inserts `membar.cta;` right after the line with the opening `{` of the body of the
    first kernel in name order. It changes that kernel's machine code, not its results.
    Returns the kernel's name."""
    with open(src) as f:
        text = f.read()
    bodies = entry_bodies(text)
    if not bodies:
        raise ValueError(f"{src}: no .entry")
    name, pos = min(bodies, key=lambda b: b[0].encode())
    nl = text.find("\n", pos)
    nl = len(text) if nl < 0 else nl
    new = text[:nl] + "\n\tmembar.cta;" + text[nl:]
    with open(dst, "w") as f:
        f.write(new)
    return name


def cubin_code(path):
    """{function name: machine code} from the .text.NAME sections of a cubin."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stro = hdrs[shstrndx][4]
    out = {}
    for name, typ, _fl, _ad, off, size in hdrs:
        nm = data[stro + name:data.index(b"\0", stro + name)].decode("utf-8", "replace")
        if nm.startswith(".text."):
            out[nm[6:]] = data[off:off + size] if typ != 8 else b""
    return out


# ---- RESULT files -----------------------------------------------------------------------------------

def read_result(path):
    """{'after': [line...], 'build': {...}, 'status': str, 'lines': [...]}"""
    doc = {"after": [], "build": None, "status": None, "lines": [], "times": {},
           "uncovered": [], "expect_fail": []}
    if not os.path.exists(path):
        return doc
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            doc["lines"].append(line)
            if line.startswith("after "):
                doc["after"].append(line)
            elif line.startswith("build "):
                doc["build"] = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            elif line.startswith("status "):
                doc["status"] = line[7:]
            elif line.startswith("time "):
                w = line.split()
                doc["times"][w[1]] = (float(w[2]), float(w[3]))
            elif line.startswith("time@"):  # a --compare module, timed interleaved
                w = line.split()
                doc.setdefault("times_cmp", {}).setdefault(int(w[0][5:]), {})[w[1]] = (
                    float(w[2]), float(w[3]))
            elif line.startswith("uncovered "):
                doc["uncovered"].append(line.split()[1])
            elif line.startswith("expectation FAIL"):
                doc["expect_fail"].append(line[len("expectation FAIL "):])
            elif " " in line:
                k, v = line.split(" ", 1)
                if k in ("first_launch_us", "init_us", "build_us", "load_us", "launch_us"):
                    doc[k] = float(v)
    return doc


PTR_RE = re.compile(r"0x[0-9a-fA-F]{6,}")


def printf_lines(text):
    """Device printf output as a sorted multiset, pointer values masked."""
    return sorted(PTR_RE.sub("0xPTR", l) for l in text.splitlines() if l.strip())


STRUCT_FMT = {"i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I",
              "i64": "q", "u64": "Q", "f32": "f", "f64": "d"}


def explain_dump(dir_a, dir_b, after_line):
    """First differing element of one recorded object, from --dump directories."""
    w = after_line.split()
    idx, kind, name, typ = int(w[1]), w[3], w[4], w[5]
    fn = f"L{idx:03d}.{kind}.{name}.bin"
    try:
        with open(os.path.join(dir_a, fn), "rb") as f:
            a = f.read()
        with open(os.path.join(dir_b, fn), "rb") as f:
            b = f.read()
    except OSError as e:
        return f"(no dump: {e})"
    fmt = STRUCT_FMT.get(typ, "B")
    size = struct.calcsize(fmt)
    n = min(len(a), len(b)) // size
    va = struct.unpack(f"<{n}{fmt}", a[:n * size])
    vb = struct.unpack(f"<{n}{fmt}", b[:n * size])
    diff = [i for i in range(n) if a[i * size:(i + 1) * size] != b[i * size:(i + 1) * size]]
    if not diff:
        return "dumps equal (the difference did not reproduce: nondeterministic?)"
    i = diff[0]
    return (f"{len(diff)}/{n} {typ} elements differ, first [{i}]: {va[i]!r} vs {vb[i]!r}")


# ---- (a) identity ---------------------------------------------------------------------------------

# whole-eager: the whole-module image again with CUDA_MODULE_LOADING=EAGER (the
# others use the driver's default, lazy loading): tells a driver artifact from
# a taskcache problem
# cold-1 and cold-ewp-1 compile every kernel as a unit of its own (--unit-cost
# 1): unit boundaries decide which functions a unit holds and whether it may
# be compiled whole-program, so every build mode is run with both groupings.
# A small module (its kernels fit in one default unit, or cost 1,500
# statements or less) is compiled whole by default, as every module here
# is: cold, warm and edit check that path, cold-ewp gives the default unit
# size explicitly (whole-program units of 1000, the default's split), and
# edit-1 and edit-ewp-1 build the edit in the caches of cold-1 and
# cold-ewp-1: one unit compiled, the others served, linked with the served
# ones.
RUNS = ("whole", "whole-eager", "cold", "warm", "edit", "cold-ptxas", "cold-ewp", "cold-1",
        "cold-ewp-1", "edit-1", "edit-ewp-1")


def identity_variant(args, base, variant):
    spec = os.path.join(args.specs, base + ".spec")
    ptx = os.path.join(args.corpus, variant + ".ptx")
    d = os.path.join(args.work, "identity", variant)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    row = {"module": variant, "seed": None, "result": "FAIL", "problems": [], "builds": {},
           "notes": []}
    if not os.path.exists(ptx):
        row["problems"].append(f"{ptx} missing (corpus build failed?)")
        return row
    if time_left(args) < 20:
        row["result"] = "SKIPPED"
        row["problems"].append("time budget exhausted")
        return row
    seed = random.SystemRandom().randrange(1, 2 ** 62)
    row["seed"] = seed
    log(f"(a) {variant}: seed {seed}")
    whole = os.path.join(d, "whole.cubin")
    r = run([args.ptxas, f"-arch={args.arch}", ptx, "-o", whole], timeout=120)
    if r["rc"] != 0:
        row["problems"].append(f"ptxas failed: {last_lines(r['stderr'])}")
        return row
    edit_ptx = os.path.join(d, "edit.ptx")
    try:
        ek = make_edit(ptx, edit_ptx)
    except (ValueError, OSError) as e:
        row["problems"].append(f"edit failed: {e}")
        return row
    row["edited_kernel"] = ek
    r = run([args.ptxas, f"-arch={args.arch}", edit_ptx, "-o", os.path.join(d, "edit-whole.cubin")],
            timeout=120)
    if r["rc"] != 0:
        row["problems"].append(f"ptxas rejects the membar.cta edit: {last_lines(r['stderr'])}")
        return row
    try:
        a, b = cubin_code(whole), cubin_code(os.path.join(d, "edit-whole.cubin"))
        row["edit_changes_code"] = a.get(ek) != b.get(ek)
        if not row["edit_changes_code"]:
            row["notes"].append(f"the edit did not change {ek}'s machine code (whole ptxas)")
    except (ValueError, OSError, struct.error) as e:
        row["notes"].append(f"cannot compare machine code: {e}")
    cache_a, cache_b = os.path.join(d, "cache"), os.path.join(d, "cache-ptxas")
    cache_c = os.path.join(d, "cache-ewp")
    cache_d, cache_e = os.path.join(d, "cache-1"), os.path.join(d, "cache-ewp-1")
    # cold, warm, edit, cold-ptxas, cold-1 and edit-1 compile relocatable units, the
    # -ewp runs whole-program units (taskcache's default with libnvJitLink)
    rel = "--relocatable-units"
    runs = {
        "whole": ["--image", whole],
        "whole-eager": ["--image", whole],
        "cold": ["--ptx", ptx, "--cache", cache_a, rel, "--expect-compiled", "all",
                 "--expect-module-hit", "0"],
        "warm": ["--ptx", ptx, "--cache", cache_a, rel, "--expect-compiled", "0",
                 "--expect-module-hit", "1"],
        "edit": ["--ptx", edit_ptx, "--cache", cache_a, rel, "--expect-compiled", "1",
                 "--expect-module-hit", "0"],
        "cold-ptxas": ["--ptx", ptx, "--cache", cache_b, "--compiler", "ptxas", rel,
                       "--expect-compiled", "all", "--expect-module-hit", "0"],
        "cold-ewp": ["--ptx", ptx, "--cache", cache_c, "--whole-program-units",
                     "--unit-cost", "1000", "--expect-compiled", "all",
                     "--expect-module-hit", "0"],
        "cold-1": ["--ptx", ptx, "--cache", cache_d, "--unit-cost", "1", rel,
                   "--expect-compiled", "all", "--expect-module-hit", "0"],
        "cold-ewp-1": ["--ptx", ptx, "--cache", cache_e, "--unit-cost", "1",
                       "--whole-program-units", "--expect-compiled", "all",
                       "--expect-module-hit", "0"],
        "edit-1": ["--ptx", edit_ptx, "--cache", cache_d, "--unit-cost", "1", rel,
                   "--expect-compiled", "1", "--expect-module-hit", "0"],
        "edit-ewp-1": ["--ptx", edit_ptx, "--cache", cache_e, "--unit-cost", "1",
                       "--whole-program-units", "--expect-compiled", "1",
                       "--expect-module-hit", "0"],
    }
    env = {"TASKCACHE_COMPILER": None, "TASKCACHE_DIR": None}
    results = {}
    for name in RUNS:
        if args.dry_run and name == "whole-eager":
            continue
        cmd = [args.gpu_run, "--spec", spec, *runs[name], "--arch", args.arch, "--seed", str(seed),
               "--out", os.path.join(d, name + ".result")]
        if args.dry_run:
            cmd.append("--build-only")
        run_env = dict(env, CUDA_MODULE_LOADING="EAGER") if name == "whole-eager" else env
        r = run(cmd, os.path.join(d, name + ".stdout"), os.path.join(d, name + ".stderr"),
                env=run_env, timeout=60)
        res = read_result(os.path.join(d, name + ".result"))
        res["run"] = r
        results[name] = res
        detail(f"--- (a) {variant} {name}: exit {r['rc']} in {r['seconds']:.2f} s: "
               f"{' '.join(r['cmd'])}\n{r['stderr'].rstrip()}")
        pc = [l for l in res["lines"] if l.startswith("param-checks ")]
        if pc and args.dry_run:
            w = pc[0].split()
            if w[1] != w[3]:
                row["notes"].append(f"{name}: only {w[1]} of {w[3]} launches had .nv.info "
                                    f"parameter records to check")
        if res["build"]:
            b = res["build"]
            row["builds"][name] = {k: b.get(k) for k in ("module_hit", "units", "unit_hits",
                                                          "units_compiled", "in_process",
                                                          "have_inprocess", "split")}
        if r["rc"] != 0 or res["status"] != "ok":
            why = "; ".join(res["expect_fail"]) or last_lines(r["stderr"], 3) or f"exit {r['rc']}"
            if res["uncovered"]:
                why = "kernels not covered by the spec: " + ", ".join(res["uncovered"])
            row["problems"].append(f"{name}: {why}")
    if not args.dry_run and "whole" in results and "whole-eager" in results and \
            results["whole"]["run"]["rc"] != 0 and results["whole-eager"]["run"]["rc"] == 0:
        row["notes"].append("the whole-module image fails with the driver's default (lazy) "
                            "module loading but runs with CUDA_MODULE_LOADING=EAGER: a driver "
                            "matter, not taskcache's; compare the other runs with whole-eager")
    cold = row["builds"].get("cold")
    if cold and cold.get("have_inprocess") == "1" and cold.get("in_process") != "1":
        row["problems"].append("cold: the default compiler was not the in-process one, "
                               "although it is built in")
    if cold:
        row["compiler"] = "in-process" if cold.get("in_process") == "1" else "ptxas"
    # the reference: the whole-module image (lazy loading), else the same with EAGER
    ref_name = next((n for n in ("whole", "whole-eager") if n in results
                     and results[n]["run"]["rc"] == 0 and results[n]["status"] == "ok"), None)
    if not args.dry_run and ref_name:
        ref = results[ref_name]
        if not ref["after"]:
            row["problems"].append(f"{ref_name}: no results recorded")
        ref_printf = printf_lines(ref["run"]["stdout"])
        row["printf_lines"] = len(ref_printf)
        for name in RUNS:
            res = results.get(name)
            if name == ref_name or not res or res["run"]["rc"] != 0:
                continue
            if res["after"] != ref["after"]:
                bad = [(x, y) for x, y in zip(ref["after"], res["after"]) if x != y]
                if len(res["after"]) != len(ref["after"]):
                    row["problems"].append(f"{name}: {len(res['after'])} results vs "
                                           f"{len(ref['after'])} for {ref_name}")
                objs = [" ".join(x.split()[1:5]) for x, _y in bad]
                row["problems"].append(f"{name} differs from {ref_name} in {len(bad)} object(s): "
                                       + ", ".join(objs[:4]) + (" ..." if len(objs) > 4 else ""))
                row.setdefault("diffs", {})[name] = bad
            pl = printf_lines(res["run"]["stdout"])
            if pl != ref_printf:
                extra = sorted(set(pl) - set(ref_printf))[:2]
                missing = sorted(set(ref_printf) - set(pl))[:2]
                row["problems"].append(f"{name}: printf output differs ({len(pl)} vs "
                                       f"{len(ref_printf)} lines; only here: {extra}; "
                                       f"only in {ref_name}: {missing})")
        # element-level explanation of the first mismatching run
        if row.get("diffs") and time_left(args) > 30:
            name, bad = next(iter(row["diffs"].items()))
            dumps = {}
            for which in (ref_name, name):
                dd = os.path.join(d, f"dump-{which}")
                cmd = [args.gpu_run, "--spec", spec, *runs[which], "--arch", args.arch,
                       "--seed", str(seed), "--out", os.path.join(d, which + ".rerun.result"),
                       "--dump", dd]
                if "--expect-compiled" in cmd:
                    # the rerun is a cache hit: do not check build expectations
                    i = cmd.index("--expect-compiled")
                    del cmd[i:i + 4]
                rr = run(cmd, env=dict(env, CUDA_MODULE_LOADING="EAGER")
                         if which == "whole-eager" else env, timeout=60)
                dumps[which] = dd if rr["rc"] == 0 else None
            if dumps.get(ref_name) and dumps.get(name):
                for x, _y in bad[:3]:
                    row["notes"].append(f"{' '.join(x.split()[1:5])}: "
                                        + explain_dump(dumps[ref_name], dumps[name], x))
        row.pop("diffs", None)
    if not row["problems"]:
        row["result"] = "PASS" if not args.dry_run else "DRY"
    return row


def build_facts(row):
    """What a variant's builds did, for its log line and its summary row: a
    module that fits in one unit is compiled whole, with no units to count."""
    b = row.get("builds", {})
    facts = []
    cold = b.get("cold")
    if cold and cold.get("split") == "0":
        facts.append(f"cold compiled whole ({row.get('compiler', '?')})")
    elif cold:
        facts.append(f"cold {cold.get('units_compiled')}/{cold.get('units')} units "
                     f"({row.get('compiler', '?')})")
    if "warm" in b:
        facts.append(f"warm hit={b['warm'].get('module_hit')}")
    for name in ("edit", "edit-1"):
        if name in b and b[name].get("split") != "0":
            facts.append(f"{name} {b[name].get('units_compiled')} compiled")
    return facts


def cmd_identity(args):
    os.makedirs(os.path.join(args.work, "identity"), exist_ok=True)
    sources = sorted(os.path.basename(s)[:-3] for s in glob.glob(os.path.join(ROOT, "tests",
                                                                                "corpus", "cuda",
                                                                                "*.cu")))
    # handwritten PTX modules with a spec: shapes that only PTX expresses
    hand = sorted(os.path.basename(s)[:-5] for s in glob.glob(os.path.join(args.specs, "*.spec"))
                  if os.path.basename(s)[:-5] not in sources)
    rows = []
    todo = []
    for base in sources + hand:
        if not os.path.exists(os.path.join(args.specs, base + ".spec")):
            rows.append({"module": base, "result": "FAIL",
                         "problems": [f"no spec tests/gpu/specs/{base}.spec"]})
            continue
        todo += [(base, v) for v in check_specs.module_variants(base)]
    log(f"(a) bitwise identity: {len(todo)} module variants x {len(RUNS)} runs, "
        f"{args.jobs} at a time" + (" [dry run: builds only, no GPU]" if args.dry_run else ""))
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
        futs = [ex.submit(identity_variant, args, b, v) for b, v in todo]
        for f in futs:
            try:
                row = f.result()
            except Exception as e:  # a bug here must not hide the other rows
                row = {"module": "?", "result": "FAIL", "problems": [f"internal error: {e!r}"]}
            rows.append(row)
            facts = build_facts(row)
            log(f"(a) {row['module']}: {row['result']}" + (f" [{'; '.join(facts)}]" if facts else "")
                + ("" if not row.get("problems") else " -- " + " / ".join(row["problems"])))
            for n in row.get("notes", []):
                log(f"(a)     note: {n}")
    rows.sort(key=lambda r: r["module"])
    ok = all(r["result"] in ("PASS", "DRY") for r in rows)
    write_json(args.json, {"step": "identity", "rows": rows, "ok": ok})
    return 0


# ---- (b) SASS ----------------------------------------------------------------------------------------

def cmd_sass(args):
    tool = os.path.join(HERE, "sass_compare.py")
    doc = {"step": "sass", "rows": [], "ok": True}
    if not os.path.exists(tool):
        log("(b) SASS comparison: SKIPPED (tests/gpu/sass_compare.py does not exist)")
        doc["skipped"] = "tests/gpu/sass_compare.py does not exist"
        write_json(args.json, doc)
        return 0
    # the benchmark twice: the default (whole-program units; sass_compare.py
    # compiles relocatable units unless told) and relocatable units
    mods = [("bench250", args.bench, ["--whole-program-units"]),
            ("bench250-reloc", args.bench, ["--relocatable-units"])]
    mods += [(os.path.basename(p)[:-4], p, []) for p in args.ptx]
    d = os.path.join(args.work, "sass")
    os.makedirs(d, exist_ok=True)
    log(f"(b) SASS comparison: {len(mods)} modules with {tool}")

    def one(label, ptx, extra):
        if time_left(args) < 30:
            return {"module": label, "result": "SKIPPED", "why": "time budget exhausted"}
        js, rep = os.path.join(d, label + ".json"), os.path.join(d, label + ".txt")
        cmd = [sys.executable, tool, "--ptx", ptx, "--taskcache", args.taskcache, "--arch",
               args.arch, "--json", js, "--report", rep]
        if extra:
            cmd += ["--extra-taskcache-args", *extra]
        r = run(cmd, timeout=max(30, min(240, time_left(args) - 10)))
        row = {"module": label, "rc": r["rc"], "seconds": round(r["seconds"], 1),
               "stdout": r["stdout"], "stderr": r["stderr"][-4000:]}
        if r["rc"] != 0:
            row["result"] = "ERROR"
            row["why"] = last_lines(r["stderr"] or r["stdout"], 4)
            return row
        try:
            with open(js) as f:
                j = json.load(f)
            row["summary"] = j.get("summary", {})
            row["summary_text"] = j.get("summary_text", r["stdout"].strip())
            row["kernel_classes"] = {k["name"]: k["comparisons"]["AvsB"]["class"]
                                     for k in j.get("kernels", [])
                                     if "AvsB" in k.get("comparisons", {})}
        except (OSError, ValueError, KeyError, TypeError) as e:
            row["summary_text"] = r["stdout"].strip()
            row["note"] = f"cannot read {js}: {e}"
        row["result"] = "done"
        return row

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
        futs = [ex.submit(one, l, p, x) for l, p, x in mods]
        for f in futs:
            row = f.result()
            doc["rows"].append(row)
            detail(f"--- (b) {row['module']}: {row.get('result')}\n{row.get('stdout', '')}"
                   f"{row.get('stderr', '')}")
            log(f"(b) {row['module']}: {row.get('result')} {sass_counts(row)}"
                + (f" -- {row.get('why')}" if row.get("why") else ""))
    # all reports into one file
    with open(args.report, "w") as out:
        for row in doc["rows"]:
            p = os.path.join(d, row["module"] + ".txt")
            out.write(f"===== {row['module']}: {row.get('result')}\n")
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.write(f.read())
            else:
                out.write(row.get("stdout", "") + row.get("stderr", ""))
            out.write("\n")
    doc["ok"] = all(r.get("result") == "done" for r in doc["rows"])
    write_json(args.json, doc)
    return 0


def sass_counts(row, key="AvsB"):
    s = row.get("summary", {}).get(key)
    if not s:
        return ""
    k = s.get("kernels", {})
    return (f"{key[0]} vs {key[-1]}: {k.get('identical', 0)} identical, {k.get('regs', 0)} "
            f"regs-only, {k.get('different', 0)} different")


# ---- (c) timing ------------------------------------------------------------------------------------

def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def timing_failed(args, doc, error):
    doc["ok"] = False
    doc["error"] = error
    log(f"(c) ERROR: {error}")
    write_json(args.json, doc)
    return 0


def cmd_timing(args):
    d = os.path.join(args.work, "timing")
    os.makedirs(d, exist_ok=True)
    doc = {"step": "timing", "ok": True, "rows": []}
    env = {"CUDA_MODULE_LOADING": "EAGER", "TASKCACHE_COMPILER": None}
    seed = random.SystemRandom().randrange(1, 2 ** 62)
    log(f"(c) per-kernel time: seed {seed}, {args.reps} timed batches of 10 launches per kernel "
        f"and module, interleaved (CUDA_MODULE_LOADING=EAGER)")
    # taskcache's default image (whole-program units where libnvJitLink is
    # found) is built cold before anything is timed, into the cache (d) reads
    # warm; the relocatable-units image follows
    r = run([args.gpu_run, "--spec", "auto", "--ptx", args.ptx, "--cache", args.cache, "--arch",
             args.arch, "--build-only", "--out", os.path.join(d, "build.result"), "--write-image",
             os.path.join(d, "default.cubin")], env=env, timeout=300)
    b = read_result(os.path.join(d, "build.result"))
    detail(f"--- (c) taskcache build: exit {r['rc']}\n{r['stderr']}")
    if r["rc"] != 0:
        return timing_failed(args, doc, "taskcache build of the benchmark failed: "
                             + last_lines(r["stderr"]))
    doc["build"] = b["build"]
    log(f"(c) taskcache build of {args.ptx}: {b['build'].get('units')} units, "
        f"{b['build'].get('seconds')} s (in_process={b['build'].get('in_process')})")
    if args.dry_run:
        doc["dry_run"] = True
        write_json(args.json, doc)
        return 0
    r = run([args.gpu_run, "--spec", "auto", "--ptx", args.ptx, "--cache", args.cache + "-reloc",
             "--relocatable-units", "--arch", args.arch, "--build-only", "--out",
             os.path.join(d, "build-reloc.result"), "--write-image", os.path.join(d, "reloc.cubin")],
            env=env, timeout=300)
    detail(f"--- (c) taskcache build, relocatable units: exit {r['rc']}\n{r['stderr']}")
    default_img, reloc_img = os.path.join(d, "default.cubin"), os.path.join(d, "reloc.cubin")
    if r["rc"] != 0:
        return timing_failed(args, doc, "relocatable-units build failed: "
                             + last_lines(r["stderr"]))
    # The whole-module builds that link like taskcache's images do, for a
    # like-for-like comparison: the module through ptxas -c + nvlink in one
    # piece, and the module as one whole-program unit (ptxas -ewp).
    refs = []
    wc_obj, wc_img = os.path.join(d, "whole-c.o"), os.path.join(d, "whole-c.cubin")
    nvlink = os.path.join(os.path.dirname(args.ptxas), "nvlink")
    r = run([args.ptxas, f"-arch={args.arch}", "-c", args.ptx, "-o", wc_obj], timeout=300)
    if r["rc"] == 0:
        r = run([nvlink, f"-arch={args.arch}", wc_obj, "-o", wc_img], timeout=120)
    detail(f"--- (c) whole-module ptxas -c + nvlink: exit {r['rc']}\n{r['stderr']}")
    if r["rc"] != 0:
        return timing_failed(args, doc, "whole-module ptxas -c + nvlink failed: "
                             + last_lines(r["stderr"]))
    refs.append(("whole-c", wc_img))
    builds = [("whole-ewp", "--whole-program-units --unit-cost 1000000000")]
    builds += [tuple(spec.partition("=")[::2]) for spec in args.extra]
    extra = []  # (label, image) of --extra options, for experiments
    for label, opts in builds:
        img = os.path.join(d, f"{label}.cubin")
        r = run([args.taskcache, "build", args.ptx, "-o", img, "--arch", args.arch,
                 "--no-cache", *shlex.split(opts)], env=env, timeout=300)
        detail(f"--- (c) taskcache build {label} ({opts}): exit {r['rc']}\n{r['stderr']}")
        if r["rc"] != 0:
            return timing_failed(args, doc, f"build {label} failed: " + last_lines(r["stderr"]))
        (refs if label == "whole-ewp" else extra).append((label, img))
    # One process, all modules, timed batch by batch in rotating order: the
    # whole-module image, taskcache's default, taskcache's with relocatable
    # units, the two linkable whole-module builds, the experiments, and the
    # whole-module image loaded a second time (the noise control).
    series = ["whole1", "default", "reloc", *[l for l, _ in refs + extra], "whole2"]
    if time_left(args) < 60:
        doc["incomplete"] = True
        doc["error"] = "time budget exhausted before the timing run"
        log(f"(c) {doc['error']}")
        write_json(args.json, doc)
        return 0
    out = os.path.join(d, "interleaved.result")
    r = run([args.gpu_run, "--spec", "auto", "--image", args.whole, "--compare", default_img,
             "--compare", reloc_img, *[x for _, i in refs + extra for x in ("--compare", i)],
             "--compare", args.whole, "--arch", args.arch, "--seed",
             str(seed), "--time", str(args.reps), "--out", out],
            os.path.join(d, "interleaved.stdout"), os.path.join(d, "interleaved.stderr"),
            env=env, timeout=400)
    res = read_result(out)
    detail(f"--- (c) interleaved: exit {r['rc']} in {r['seconds']:.1f} s: {' '.join(r['cmd'])}\n"
           f"{r['stderr']}")
    if r["rc"] != 0 or res["status"] != "ok":
        return timing_failed(args, doc, f"timing run failed: {last_lines(r['stderr'], 3)}")
    times = {"whole1": res["times"]}
    for j, name in enumerate(series[1:], 1):
        times[name] = res.get("times_cmp", {}).get(j, {})
    log(f"(c) {len(res['times'])} kernels x {len(series)} modules timed interleaved in "
        f"{r['seconds']:.1f} s")
    ks = sorted(set(times["whole1"]) & set(times["whole2"]) & set(times["default"]))
    if len(ks) != len(times["whole1"]) or len(ks) != len(times["default"]):
        doc["ok"] = False
        doc["error"] = (f"kernel sets differ: whole {len(times['whole1'])}, taskcache "
                        f"{len(times['default'])}")
    classes, classes_reloc = {}, {}
    if args.sass_json and os.path.exists(args.sass_json):
        try:
            with open(args.sass_json) as f:
                for row in json.load(f).get("rows", []):
                    if row.get("module") == "bench250":
                        classes = row.get("kernel_classes", {})
                    if row.get("module") == "bench250-reloc":
                        classes_reloc = row.get("kernel_classes", {})
        except (OSError, ValueError):
            pass
    per = []
    for k in ks:
        w1, w2, tc = times["whole1"][k][0], times["whole2"][k][0], times["default"][k][0]
        rl = times.get("reloc", {}).get(k, [None])[0]
        wc = times.get("whole-c", {}).get(k, [None])[0]
        we = times.get("whole-ewp", {}).get(k, [None])[0]
        per.append({"kernel": k, "whole1_us": w1, "whole2_us": w2, "taskcache_us": tc,
                    "whole_c_us": wc, "whole_ewp_us": we,
                    "ratio": tc / w1 if w1 > 0 else None, "noise": w2 / w1 if w1 > 0 else None,
                    "reloc_us": rl, "reloc_ratio": rl / w1 if rl and w1 > 0 else None,
                    "min_whole1_us": times["whole1"][k][1], "min_taskcache_us":
                        times["default"][k][1], "sass": classes.get(k),
                    "sass_reloc": classes_reloc.get(k)})
    ratios = [p["ratio"] for p in per if p["ratio"]]
    noise = [p["noise"] for p in per if p["noise"]]
    if not ratios or not noise:
        doc["ok"] = False
        doc["error"] = doc.get("error") or "no kernel was timed in all three runs"
        log(f"(c) ERROR: {doc['error']}")
        write_json(args.json, doc)
        return 0
    med = statistics.median(ratios) if ratios else None
    lo, hi = percentile(noise, 0.05), percentile(noise, 0.95)

    def compare(num, den):
        """num's time over den's per kernel: median, kernels above the band."""
        xs = {k: times[num][k][0] / times[den][k][0] for k in ks
              if k in times[num] and k in times[den] and times[den][k][0] > 0}
        up = sorted(((k, x) for k, x in xs.items() if x > hi), key=lambda t: -t[1])
        return {"median_ratio": statistics.median(xs.values()) if xs else None,
                "above_band": len(up), "worst": [{"kernel": k, "ratio": x} for k, x in up[:8]]}

    # each taskcache image against the plain whole-module build and against
    # the whole-module build that is compiled the same way (linkable); the
    # default against the plain build is the headline, above
    pairs = [("default", "whole-ewp"), ("reloc", "whole1"), ("reloc", "whole-c"),
             ("whole-c", "whole1"), ("whole-ewp", "whole1")]
    pairs += [(label, "whole1") for label, _ in extra]
    doc["vs"] = {}
    for num, den in pairs:
        if num in times and den in times:
            c = doc["vs"][f"{num}/{den}"] = compare(num, den)
            log(f"(c) {num}/{den}: median {c['median_ratio']:.4f}; {c['above_band']} kernels "
                f"above the band" + ("; worst " + ", ".join(
                    f"{w['kernel']} {w['ratio']:.3f}x" for w in c["worst"][:4])
                    if c["worst"] else ""))
    for label, opts in builds:  # the experiments' entries say how they were built
        if f"{label}/whole1" in doc["vs"]:
            doc["vs"][f"{label}/whole1"]["options"] = opts
    above = sorted((p for p in per if p["ratio"] and hi and p["ratio"] > hi),
                   key=lambda p: -p["ratio"])
    noise_above = sum(1 for x in noise if hi and x > hi)
    doc.update(kernels=len(per), median_ratio=med, noise_median=statistics.median(noise)
               if noise else None, noise_p5=lo, noise_p95=hi, above_band=len(above),
               noise_above_band=noise_above, noise_max=max(noise), worst=above[:8],
               per_kernel=per,
               total_whole_us=sum(p["whole1_us"] for p in per),
               total_taskcache_us=sum(p["taskcache_us"] for p in per))
    if med is None:
        verdict = "ERROR"
    elif med <= 1.0:
        verdict = "MET"
    elif hi and med <= hi:
        verdict = "WITHIN NOISE"
    else:
        verdict = "NOT MET"
    doc["verdict"] = verdict
    with open(args.report, "w") as f:
        f.write(f"per-kernel GPU time per launch (median of {args.reps} batches of 10 "
                f"back-to-back launches, us), CUDA events, {len(series)} modules interleaved in "
                f"one process\n"
                f"whole = whole-module ptxas image (timed twice: w2/w1 is the noise), default = "
                f"taskcache's default (whole-program units), reloc = taskcache "
                f"--relocatable-units, whole-c = whole-module ptxas -c + nvlink, whole-ewp = the "
                f"whole module as one -ewp unit\n")
        f.write(f"median default/whole {med:.4f}; noise whole2/whole1: median "
                f"{doc['noise_median']:.4f}, 5th-95th percentile [{lo:.4f}, {hi:.4f}]\n")
        for name, c in doc["vs"].items():
            f.write(f"median {name} {c['median_ratio']:.4f}, {c['above_band']} kernels above "
                    f"the band\n")
        f.write("sass: A vs B class of each taskcache image (default / relocatable units)\n")

        def us(x):
            return f"{x:9.2f}" if x else f"{'-':>9}"

        def rt(a, b):
            return f"{a / b:8.4f}" if a and b else f"{'-':>8}"
        f.write(f"{'kernel':<40} {'whole1':>9} {'whole2':>9} {'default':>9} {'reloc':>9} "
                f"{'whole-c':>9} {'whole-ewp':>9} {'def/wh':>8} {'def/wh-e':>8} "
                f"{'rel/wh':>8} {'rel/wh-c':>8} {'w2/w1':>7}  sass\n")
        for p in sorted(per, key=lambda p: -(p["ratio"] or 0)):
            f.write(f"{p['kernel']:<40} {us(p['whole1_us'])} {us(p['whole2_us'])} "
                    f"{us(p['taskcache_us'])} {us(p['reloc_us'])} {us(p['whole_c_us'])} "
                    f"{us(p['whole_ewp_us'])} {rt(p['taskcache_us'], p['whole1_us'])} "
                    f"{rt(p['taskcache_us'], p['whole_ewp_us'])} "
                    f"{rt(p['reloc_us'], p['whole1_us'])} {rt(p['reloc_us'], p['whole_c_us'])} "
                    f"{p['noise']:7.4f}  {p['sass'] or '-'} / {p['sass_reloc'] or '-'}\n")
    log(f"(c) {len(per)} kernels: median taskcache/whole = {med:.4f} (target <= 1.00: {verdict}); "
        f"noise band whole2/whole1 [{lo:.4f}, {hi:.4f}] (median {doc['noise_median']:.4f}); "
        f"{len(above)} kernels above the band (the noise run itself: {noise_above})")
    for p in above[:8]:
        log(f"(c)   slower: {p['kernel']}: {p['taskcache_us']:.2f} us vs {p['whole1_us']:.2f} us "
            f"({p['ratio']:.3f}x; whole2 {p['whole2_us']:.2f} us)"
            + (f"; SASS {p['sass']}" if p["sass"] else ""))
    write_json(args.json, doc)
    return 0


# ---- (d) first launch ----------------------------------------------------------------------------

def cmd_first_launch(args):
    d = os.path.join(args.work, "first")
    os.makedirs(d, exist_ok=True)
    doc = {"step": "first-launch", "ok": True, "configs": {}}
    base_env = {"TASKCACHE_COMPILER": None}
    loading = os.environ.get("CUDA_MODULE_LOADING", "default (LAZY)")
    log(f"(d) time to first launch, {args.runs} fresh processes each "
        f"(CUDA_MODULE_LOADING={loading})")
    if args.dry_run:
        doc["dry_run"] = True
        write_json(args.json, doc)
        return 0
    warm_jit = os.path.join(d, "jit-warm-cache")
    configs = [
        ("taskcache warm", ["--ptx", args.ptx, "--cache", args.cache], None),
        ("cubin load", ["--image", args.whole], None),
        ("PTX JIT warm", ["--ptx-jit", args.ptx], "warm"),
        ("PTX JIT cold", ["--ptx-jit", args.ptx], "cold"),
    ]
    # prime the taskcache module record and the JIT cache (untimed)
    for label, src, jit in configs:
        if label in ("taskcache warm", "PTX JIT warm"):
            env = dict(base_env)
            if jit:
                env["CUDA_CACHE_PATH"] = warm_jit
            r = run([args.gpu_run, "--spec", "auto", *src, "--arch", args.arch, "--first-launch",
                     "--out", os.path.join(d, "prime.result")], env=env, timeout=300)
            detail(f"--- (d) priming {label}: exit {r['rc']} in {r['seconds']:.1f} s\n{r['stderr']}")
            if r["rc"] != 0:
                doc["ok"] = False
                doc.setdefault("errors", []).append(f"{label} priming: {last_lines(r['stderr'], 3)}")
    for label, src, jit in configs:
        vals, inits, parts = [], [], []
        for i in range(args.runs):
            if time_left(args) < 15:
                doc.setdefault("errors", []).append(f"{label}: time budget exhausted after {i} runs")
                doc["incomplete"] = True
                break
            env = dict(base_env)
            if jit == "warm":
                env["CUDA_CACHE_PATH"] = warm_jit
            elif jit == "cold":
                env["CUDA_CACHE_PATH"] = os.path.join(d, f"jit-cold-{i}")  # a new, empty cache
            out = os.path.join(d, f"{label.replace(' ', '_')}.{i}.result")
            r = run([args.gpu_run, "--spec", "auto", *src, "--arch", args.arch, "--first-launch",
                     "--out", out], env=env, timeout=300)
            res = read_result(out)
            detail(f"--- (d) {label} #{i}: exit {r['rc']} in {r['seconds']:.1f} s: "
                   f"{' '.join(r['cmd'])}\n{r['stderr']}")
            if r["rc"] != 0 or "first_launch_us" not in res:
                doc["ok"] = False
                doc.setdefault("errors", []).append(f"{label}: {last_lines(r['stderr'], 3)}")
                break
            vals.append(res["first_launch_us"])
            inits.append(res.get("init_us"))
            parts.append({k: res.get(k) for k in ("build_us", "load_us", "launch_us")})
            if jit == "cold" and r["seconds"] > 20 and i >= 2:
                break  # slow: three runs are enough
        c = {"runs_us": vals, "median_us": statistics.median(vals) if vals else None,
             "init_median_us": statistics.median([x for x in inits if x is not None])
             if inits and None not in inits else None, "parts": parts}
        doc["configs"][label] = c
        log(f"(d) {label:<15} first launch median {fmt_us(c['median_us'])} "
            f"(runs: {', '.join(fmt_us(v) for v in vals)}); cuInit+context "
            f"{fmt_us(c['init_median_us'])}")
    write_json(args.json, doc)
    return 0


# ---- (e) build times -------------------------------------------------------------------------------

def cmd_bench_build(args):
    doc = {"step": "bench-build", "ok": True, "runs": {}}
    if "inprocess" not in args.backends:
        doc["runs"]["inprocess"] = {"skipped": "the in-process compiler is not built in"}
    with open(args.report, "w") as rep:
        for backend in args.backends:
            if time_left(args) < 60:
                doc["runs"][backend] = {"skipped": "time budget exhausted"}
                log(f"(e) bench/run.py with TASKCACHE_COMPILER={backend}: SKIPPED (time budget)")
                continue
            js = os.path.join(args.work, f"bench-{backend}.json")
            # "X-reloc": compiler X with --relocatable-units (the default is
            # whole-program units where libnvJitLink is found)
            compiler, reloc = backend.removesuffix("-reloc"), backend.endswith("-reloc")
            cmd = [sys.executable, os.path.join(ROOT, "bench", "run.py"), "--runs", str(args.runs),
                   "--jobs", str(args.jobs), "--taskcache", args.taskcache, "--json", js,
                   *(["--taskcache-arg=--relocatable-units"] if reloc else []), *args.bench_args]
            log(f"(e) bench/run.py --runs {args.runs} --jobs {args.jobs} with "
                f"TASKCACHE_COMPILER={compiler}{' --relocatable-units' if reloc else ''} ...")
            r = run(cmd, env={"TASKCACHE_COMPILER": compiler},
                    timeout=max(60, min(400, time_left(args) - 20)))
            rep.write(f"===== {backend}: {' '.join(cmd)} (exit {r['rc']}, "
                      f"{r['seconds']:.0f} s)\n{r['stdout']}\n{r['stderr']}\n")
            rep.flush()
            detail(f"--- (e) {backend}: exit {r['rc']}\n{r['stdout']}\n{r['stderr']}")
            entry = {"rc": r["rc"], "seconds": round(r["seconds"], 1)}
            try:
                with open(js) as f:
                    j = json.load(f)
                st = j["modules"][0]["stats_s"]
                entry["median_s"] = {k: (v or {}).get("median") for k, v in st.items()}
            except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
                entry["note"] = f"no JSON ({e})"
            entry["verdicts"] = [l.strip() for l in r["stdout"].splitlines()
                                 if l.strip().startswith("target ")]
            entry["table"] = [l for l in r["stdout"].splitlines()
                              if re.match(r"\s+(scenario|cold|warm|edit)\b", l)]
            if r["rc"] != 0:
                doc["ok"] = False
                entry["error"] = last_lines(r["stdout"] + r["stderr"], 4)
            doc["runs"][backend] = entry
            m = entry.get("median_s", {})
            log(f"(e) {backend}: exit {r['rc']}: " + bench_figures(m))
            for l in entry["table"]:
                log(f"(e)   {l.strip()}")
    write_json(args.json, doc)
    return 0


def bench_figures(m):
    def s(k):
        v = m.get(k)
        return f"{v:.3f} s" if isinstance(v, (int, float)) else "n/a"
    return (f"taskcache cold {s('cold')} / warm {s('warm')} / edit {s('edit')}; "
            f"ptxas {s('ptxas')}, ptxas -split-compile=0 {s('split0')}")


# ---- summary --------------------------------------------------------------------------------------

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def cmd_summary(args):
    w = args.work
    rows = []  # (check, result, figures, correctness?)
    correctness_fail = incomplete = False
    pre = {"rows": []}
    try:
        with open(os.path.join(w, "device.txt")) as f:
            pre["device"] = f.read().strip()
    except OSError:
        pass
    try:
        with open(os.path.join(w, "pre.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    pre["rows"].append({"check": parts[0], "result": parts[1],
                                        "figures": parts[2], "correctness": parts[3] == "1"})
    except OSError:
        pass
    late = []  # rows of the steps the script runs itself: after the others
    for r in pre["rows"]:
        (late if r["check"].startswith("(") else rows).append((r["check"], r["result"],
                                                                r["figures"]))
        if r["correctness"] and r["result"] not in ("PASS", "DRY"):
            correctness_fail |= r["result"] == "FAIL"
            incomplete |= r["result"] != "FAIL"
    quiet = set(args.skipped) | set(args.not_run)
    ident = load(os.path.join(w, "identity.json"))
    if ident is None:
        if "identity" not in quiet:
            rows.append(("(a) bitwise identity", "MISSING", "the step did not finish"))
            incomplete = True
    else:
        n = len(ident["rows"])
        npass = sum(1 for r in ident["rows"] if r["result"] in ("PASS", "DRY"))
        for r in ident["rows"]:
            fig = f"seed {r.get('seed')}; " + ", ".join(build_facts(r))
            if r.get("printf_lines"):
                fig += f", {r['printf_lines']} printf lines"
            if r.get("problems"):
                fig = " / ".join(r["problems"])[:300]
            rows.append((f"(a) {r['module']}", r["result"], fig))
            if r["result"] == "FAIL":
                correctness_fail = True
            elif r["result"] not in ("PASS", "DRY"):
                incomplete = True
        rows.append(("(a) bitwise identity, all", ("DRY" if args.dry_run else "PASS")
                     if npass == n else "FAIL",
                     f"{npass}/{n} module variants: whole ptxas = taskcache cold = warm = edit = "
                     f"cold --compiler ptxas = cold whole-program units, each also with "
                     f"--unit-cost 1 (edit too)"))
    sass = load(os.path.join(w, "sass.json"))
    if sass is None:
        if "sass" not in quiet:
            rows.append(("(b) SASS comparison", "MISSING", "the step did not finish"))
    elif sass.get("skipped"):
        rows.append(("(b) SASS comparison", "SKIPPED", sass["skipped"]))
    else:
        tot = {"identical": 0, "regs": 0, "different": 0}
        diff_mods, failed = [], []
        for r in sass["rows"]:
            if r["module"].startswith("bench250"):
                rows.append((f"(b) SASS {r['module']}", r.get("result", "?"),
                             "; ".join(x for x in (sass_counts(r), sass_counts(r, "AvsC")) if x)
                             or r.get("why", "") or
                             (r.get("summary_text") or "").splitlines()[:2]))
                continue
            k = (r.get("summary", {}).get("AvsB") or {}).get("kernels", {})
            for c in tot:
                tot[c] += k.get(c, 0)
            if k.get("different"):
                diff_mods.append(f"{r['module']}({k['different']})")
            if r.get("result") != "done":
                failed.append(r)
        fig = (f"A vs B: {tot['identical']} identical, {tot['regs']} regs-only, "
               f"{tot['different']} different" +
               (f"; different in: {', '.join(diff_mods)}" if diff_mods else ""))
        if failed:
            fig += (f"; {len(failed)} module(s) failed ({', '.join(r['module'] for r in failed[:4])}"
                    f"{' ...' if len(failed) > 4 else ''}): {failed[0].get('why', '')}")
        rows.append(("(b) SASS corpus", "done" if sass.get("ok") else "ERRORS", fig))
    tim = load(os.path.join(w, "timing.json"))
    if tim is None:
        if "timing" not in quiet:
            rows.append(("(c) kernel time bench250", "MISSING", "the step did not finish"))
    elif tim.get("dry_run"):
        rows.append(("(c) kernel time bench250", "DRY", "taskcache image built; no GPU run"))
    elif tim.get("incomplete"):
        rows.append(("(c) kernel time bench250", "INCOMPLETE", tim.get("error", "")))
        incomplete = True
    elif tim.get("error") and tim.get("median_ratio") is None:
        rows.append(("(c) kernel time bench250", "ERROR", tim["error"]))
        correctness_fail = True  # a module that does not run is a correctness problem
    else:
        worst = ", ".join(f"{p['kernel']} {p['ratio']:.3f}x" for p in tim.get("worst", [])[:3])
        rows.append(("(c) kernel time bench250", tim.get("verdict", "?"),
                     f"median taskcache/whole {tim['median_ratio']:.4f} (target <= 1.00); noise "
                     f"band [{tim['noise_p5']:.4f}, {tim['noise_p95']:.4f}]; "
                     f"{tim['above_band']} kernels above it (noise run: {tim['noise_above_band']})"
                     + (f"; worst: {worst}" if worst else "")))
        vs = tim.get("vs") or {}
        names = {"default/whole-ewp": "(c) taskcache / whole module as one -ewp unit",
                 "reloc/whole1": "(c) relocatable units / whole",
                 "reloc/whole-c": "(c) relocatable units / whole-module -c+nvlink",
                 "whole-c/whole1": "(c) whole-module -c+nvlink / whole",
                 "whole-ewp/whole1": "(c) whole module as one -ewp unit / whole"}
        for key, title in names.items():
            c = vs.get(key)
            if not c or c.get("median_ratio") is None:
                continue
            m = c["median_ratio"]
            verdict_c = ("MET" if m <= 1.0 and c["above_band"] <= tim["noise_above_band"]
                         else "MEDIAN MET" if m <= 1.0 else "WITHIN NOISE"
                         if m <= tim["noise_p95"] else "NOT MET")
            if key.startswith("whole"):
                verdict_c = "info"  # peers against each other, no target
            worst_c = ", ".join(f"{p['kernel']} {p['ratio']:.3f}x" for p in c["worst"][:3])
            rows.append((title, verdict_c,
                         f"median {m:.4f}; {c['above_band']} kernels above the noise band "
                         f"(noise run: {tim['noise_above_band']}, its worst "
                         f"{tim.get('noise_max', 0):.3f}x)"
                         + (f"; worst: {worst_c}" if worst_c else "")))
    fl = load(os.path.join(w, "first.json"))
    if fl is None:
        if "first" not in quiet:
            rows.append(("(d) first launch bench250", "MISSING", "the step did not finish"))
    elif fl.get("dry_run"):
        rows.append(("(d) first launch bench250", "DRY", "no GPU run"))
    else:
        c = fl["configs"]
        med = {k: v.get("median_us") for k, v in c.items()}
        figs = " | ".join(f"{k} {fmt_us(v)}" for k, v in med.items())
        tw, jc = med.get("taskcache warm"), med.get("PTX JIT cold")
        if tw and jc:
            figs += f" | JIT cold / taskcache warm = {jc / tw:.1f}x"
        rows.append(("(d) first launch bench250", ("done" if not fl.get("incomplete") else
                                                   "INCOMPLETE") if fl.get("ok") else "ERRORS",
                     figs + ("; " + "; ".join(fl.get("errors", [])) if fl.get("errors") else "")))
        if not fl.get("ok"):
            correctness_fail = True
        elif fl.get("incomplete"):
            incomplete = True
    bb = load(os.path.join(w, "bench-build.json"))
    if bb is None:
        if "bench" not in quiet:
            rows.append(("(e) build times", "MISSING", "the step did not finish"))
    else:
        for backend, e in bb.get("runs", {}).items():
            if e.get("skipped"):
                rows.append((f"(e) build times, {backend}", "SKIPPED", e["skipped"]))
                continue
            res = "done" if e.get("rc") == 0 else "FAIL"
            if e.get("rc") != 0:
                # run.py exits 1 when a command or an output check failed (a warm
                # build that is not identical, an edit that changed nothing), 2
                # when there is no taskcache binary
                correctness_fail = True
                fig = f"bench/run.py exit {e.get('rc')}: {e.get('error', '')} / "
            fig = (fig if e.get("rc") != 0 else "") + bench_figures(e.get("median_s", {}))
            met = []
            for v in e.get("verdicts", []):
                m = re.match(r"target (\w+):.*:\s*([\d.]+x)\s+(MET|NOT MET)", v)
                if m:
                    met.append(f"{m.group(1)} {m.group(2)} {m.group(3)}")
            if met:
                fig += " [targets: " + ", ".join(met) + "]"
            rows.append((f"(e) build times, {backend}", res, fig))
    rows += sorted(late)
    for s in args.skipped:
        rows.append((f"step {s}", "SKIPPED", "skipped on request"))
    overall = "FAIL" if correctness_fail else ("INCOMPLETE" if incomplete else "PASS")
    if args.dry_run:
        overall = "DRY-RUN " + ("FAIL" if correctness_fail else "OK")
    rows.append(("OVERALL (correctness)", overall, f"logs: {args.out}"))

    doc = {"overall": overall, "rows": [{"check": a, "result": b, "figures": c} for a, b, c in rows],
           "pre": pre}
    for name in ("identity", "sass", "timing", "first", "bench-build"):
        j = load(os.path.join(w, name + ".json"))
        if j is not None:
            if name == "sass":
                for r in j.get("rows", []):
                    r.pop("stdout", None)
            doc[name] = j
    write_json(os.path.join(args.out, "results.json"), doc)
    width = max(len(a) for a, _b, _c in rows)
    lines = ["", "=" * 100, "gpu-check summary" + (f" -- {pre.get('device')}" if pre.get("device")
                                                  else ""), "=" * 100]
    for a, b, c in rows:
        if isinstance(c, list):
            c = " / ".join(c)
        lines.append(f"{a:<{width}}  {b:<12} {c}")
    lines.append("=" * 100)
    text = "\n".join(lines)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    if LOG_FILE:
        detail(text)
    print(text, flush=True)
    if correctness_fail:
        return 1
    if incomplete and not args.dry_run:
        return 3
    return 0


# ---- main -------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--work", required=True)
        p.add_argument("--json")
        p.add_argument("--log")
        p.add_argument("--start", help="epoch seconds the script started (for time stamps)")
        p.add_argument("--deadline", type=float, help="epoch seconds: stop starting work after")
        p.add_argument("--dry-run", action="store_true")
        p.add_argument("--arch", default="sm_90")
        p.add_argument("--gpu-run")
        p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))

    p = sub.add_parser("edit")
    p.add_argument("src")
    p.add_argument("dst")
    p = sub.add_parser("identity")
    common(p)
    p.add_argument("--corpus", required=True)
    p.add_argument("--specs", default=os.path.join(HERE, "specs"))
    p.add_argument("--ptxas", required=True)
    p = sub.add_parser("sass")
    common(p)
    p.add_argument("--bench", required=True)
    p.add_argument("--ptx", nargs="*", default=[])
    p.add_argument("--taskcache", required=True)
    p.add_argument("--report", required=True)
    p = sub.add_parser("timing")
    common(p)
    p.add_argument("--ptx", required=True)
    p.add_argument("--whole", required=True)
    p.add_argument("--cache", required=True)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--report", required=True)
    p.add_argument("--sass-json")
    p.add_argument("--taskcache", required=True, help="the CLI")
    p.add_argument("--ptxas", required=True, help="for the whole-module -c build (nvlink "
                   "beside it)")
    p.add_argument("--extra", action="append", default=[], metavar="LABEL=OPTIONS",
                   help="also time a taskcache image built with these build options "
                        "(experiments; repeatable)")
    p = sub.add_parser("first-launch")
    common(p)
    p.add_argument("--ptx", required=True)
    p.add_argument("--whole", required=True)
    p.add_argument("--cache", required=True)
    p.add_argument("--runs", type=int, default=5)
    p = sub.add_parser("bench-build")
    common(p)
    p.add_argument("--taskcache", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--report", required=True)
    p.add_argument("--backends", nargs="+", default=["inprocess", "ptxas"])
    p.add_argument("--bench-args", nargs=argparse.REMAINDER, default=[],
                   help="more bench/run.py arguments (the rest of the line)")
    p = sub.add_parser("summary")
    common(p)
    p.add_argument("--out", required=True)
    p.add_argument("--skipped", nargs="*", default=[], help="steps skipped on request")
    p.add_argument("--not-run", nargs="*", default=[], help="steps not run (the script says why)")
    args = ap.parse_args(argv)
    if args.cmd == "edit":
        print(make_edit(args.src, args.dst))
        return 0
    setup_common(args)
    return {"identity": cmd_identity, "sass": cmd_sass, "timing": cmd_timing,
            "first-launch": cmd_first_launch, "bench-build": cmd_bench_build,
            "summary": cmd_summary}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
