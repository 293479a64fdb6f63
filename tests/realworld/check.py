#!/usr/bin/env python3
"""check.py -- taskcache on PTX that other people's tools generate.

For every module of tests/realworld/corpus (nvcc on CCCL and llm.c, clang
CUDA, numba-cuda, Triton) and the NVRTC modules generated at test time:

  * a whole-module `ptxas -arch=ARCH` build is the reference;
  * taskcache builds it in three modes (default, which is whole-program
    units; --relocatable-units; --unit-cost 1), each cold (empty cache), warm (must be a module record
    hit), with --no-module-cache (unit records only) and with --no-cache:
    every tier must be byte-identical to that mode's cold build, and the
    --no-module-cache build must take every canonical text from the memo
    the cold build kept, each equal to the text made again
    (TASKCACHE_TEST_CANON_MEMO=check, src/pipeline/canon_memo.h);
  * every image holds exactly the whole build's kernels, every one of its
    variables, and as many objects of each variable as the whole build
    (compiler-named constants such as $str, which taskcache renames to
    content-derived $__tcA... names, are counted as a class);
  * no kernel has less static shared memory than the whole-module builds
    (ptxas whole, and ptxas -c + nvlink where the two differ);
  * an edit as a user makes it: one number changed in the module's first
    kernel and in its first helper .func, the edited module built with the
    cache of the module's own builds (default and --unit-cost 1) must be
    byte-identical to its cold build (a key that missed the edit would
    serve the old code), and with a unit a kernel, when the module has no
    helper to edit, it compiles one unit at most;
  * registers, local memory (from .nv.info) and static shared memory of
    every kernel in the default and relocatable-unit images are compared
    with the whole build and summarized per module. More than the whole
    build is reported, not failed.

Prints one line per module and a summary; exits 1 if any invariant failed,
2 on usage errors.

Usage: check.py --taskcache BIN [--jobs N] [--table FILE] [--only GLOB]
                [--modes default,reloc,unit1] [--no-nvrtc] [--no-edit] [--keep DIR]
"""

import argparse
import concurrent.futures
import fnmatch
import os
import sys
import time

import rwlib


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taskcache", required=True, help="the taskcache binary")
    ap.add_argument("--jobs", "-j", type=int, default=1,
                    help="modules checked at once (taskcache gets the CPUs divided among them)")
    ap.add_argument("--table", help="write every kernel's registers and local memory here (TSV)")
    ap.add_argument("--only", action="append", default=[],
                    help="check only modules whose GENERATOR/NAME matches this glob (repeatable)")
    ap.add_argument("--modes", default=",".join(rwlib.MODES),
                    help="comma-separated subset of " + ",".join(rwlib.MODES))
    ap.add_argument("--no-nvrtc", action="store_true", help="skip the NVRTC modules made at test time")
    ap.add_argument("--no-edit", action="store_true",
                    help="skip the edit of each module (one kernel's number changed, built after it)")
    ap.add_argument("--keep", help="keep the work files (PTX, images, caches) in this directory")
    a = ap.parse_args(argv)
    if not os.access(a.taskcache, os.X_OK):
        ap.error(f"{a.taskcache} is not an executable")
    if not rwlib.PTXAS:
        ap.error("ptxas not found (CUDA_HOME, /usr/local/cuda, PATH)")
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in rwlib.MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}")
    a.modes = {m: rwlib.MODES[m] for m in modes}
    return a


# the modes in which a module is edited after its builds (the relocatable
# units' keys are made the same way as the default's)
EDIT_MODES = ("default", "unit1")


def check_edit(args, ptx, work, tc_jobs):
    """A kernel and a helper of the module edited (a number in each
    changed), built with the cache of the module's own builds: the edited
    module's cold image, and with a unit a kernel, when only a kernel was
    edited, one unit compiled at most."""
    with open(ptx, "rb") as f:
        data = f.read()
    edited, kernel, helper = rwlib.edited_module(data.decode("latin-1"))  # every byte kept
    if not edited:
        return []
    path = os.path.join(work, "edited.ptx")
    with open(path, "wb") as f:
        f.write(edited.encode("latin-1"))
    modes = {m: args.modes[m] for m in EDIT_MODES if m in args.modes}
    fails = rwlib.edit_failures(os.path.abspath(args.taskcache), ptx, path, work,
                                rwlib.arch_of(data), modes, jobs=tc_jobs,
                                cache=os.path.join(work, "cache"), one_unit=() if helper else ("unit1",))
    what = ", ".join(f"{k} {n}" for k, n in (("kernel", kernel), ("helper", helper)) if n)
    return [f"{f} (edited: {what})" for f in fails]


def check_one(args, module, ptx, work, tc_jobs):
    t0 = time.monotonic()
    try:
        res = rwlib.check_module(os.path.abspath(args.taskcache), ptx, work, jobs=tc_jobs, modes=args.modes)
        if not res["skipped"] and not args.no_edit:
            res["failures"] += check_edit(args, ptx, work, tc_jobs)
    except Exception as e:  # a crash of the checker itself is a failure too
        res = {"failures": [f"checker error: {type(e).__name__}: {e}"], "split": {}, "notes": [],
               "resources": {}, "skipped": None}
    res["seconds"] = time.monotonic() - t0
    res["kernels"] = len(rwlib.entry_names(open(ptx, "rb").read()))
    if not args.keep:
        rwlib.rmtree(work)
    return module, res


def units_of(line):
    """'... 97 kernels in 23 units ...' -> '23 units'; a whole build -> 'whole'."""
    if "whole module" in line:
        return "whole"
    parts = line.split(" kernels in ")
    return parts[1].split(":")[0] if len(parts) > 1 else "?"


def res_cell(res, mode):
    if mode not in res["resources"]:
        return ""
    s = res["resources"][mode][1]
    return (f"{mode}: regs+ {s['more_regs']}/{s['kernels']} (max +{s['max_extra_regs']}), "
            f"local+ {s['more_local']}, shared+ {s['more_shared']}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    base = args.keep or rwlib.mktemp_dir("taskcache-realworld-")
    os.makedirs(base, exist_ok=True)
    t0 = time.monotonic()
    modules = rwlib.stored_modules()
    if not args.no_nvrtc:
        modules += rwlib.generated_modules(base)
    modules += rwlib.finding_modules()
    if args.only:
        modules = [m for m in modules if any(fnmatch.fnmatch(m.label, g) for g in args.only)]
    if not modules:
        print("check: no module to check")
        return 2
    jobs = max(1, args.jobs)
    tc_jobs = max(1, (os.cpu_count() or 1) // jobs)
    work = []
    for m in modules:
        d = os.path.join(base, m.label.replace("/", "__"))
        os.makedirs(d, exist_ok=True)
        ptx = os.path.join(d, m.name + ".ptx")
        with open(ptx, "wb") as f:
            f.write(m.text())
        work.append((m, ptx, d))
    work.sort(key=lambda w: -os.path.getsize(w[1]))   # largest first: better packing
    print(f"== real-world corpus: {len(work)} modules, modes {', '.join(args.modes)}, "
          f"{jobs} at a time, taskcache -j {tc_jobs}", flush=True)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futs = [pool.submit(check_one, args, m, ptx, d, tc_jobs) for m, ptx, d in work]
        for fut in concurrent.futures.as_completed(futs):
            m, res = fut.result()
            results[m.label] = (m, res)
            print_module(m, res)
    pairs = not args.only or any(fnmatch.fnmatch("findings/x", g) or g.startswith("findings") for g in args.only)
    pair_failures = check_key_pairs(args, base) if pairs else []
    return report(args, results, pair_failures, time.monotonic() - t0)


def check_key_pairs(args, base):
    """findings/NAME.a.ptx and NAME.b.ptx: the same slice keys."""
    fails = []
    for name, a, b in rwlib.key_pairs():
        with open(a, "rb") as f:
            arch = rwlib.arch_of(f.read())
        tc = rwlib.Taskcache(os.path.abspath(args.taskcache), os.path.join(base, "keys-cache"), arch, 1)
        try:
            ka, kb = tc.slice_keys(a), tc.slice_keys(b)
        except rwlib.BuildError as e:
            fails.append(f"{name}: {e}")
            continue
        changed = sorted(k for k in ka if kb.get(k) != ka[k])
        status = "FAIL" if changed else "PASS"
        print(f"{status} keys of findings/{name}.a.ptx and .b.ptx: {len(ka)} kernels, {len(changed)} with another key")
        if changed:
            fails.append(f"findings/{name}: slice keys differ between the two layouts for {changed[:3]}")
    return fails


def print_module(m, res):
    if res["skipped"]:
        print(f"SKIP {m.label}: ptxas rejects it whole: {res['skipped'][:200]}", flush=True)
        return
    status = "FAIL" if res["failures"] else "PASS"
    units = units_of(res["split"].get("default", ""))
    cells = " | ".join(c for c in (res_cell(res, "default"), res_cell(res, "reloc")) if c)
    print(f"{status} {m.label:48} {res['kernels']:4} kernels {units:>9} {res['seconds']:6.1f} s  {cells}",
          flush=True)
    for n in res["notes"]:
        print(f"     note: {n}")
    for f in res["failures"]:
        print("     " + f.replace("\n", "\n       "))


def report(args, results, pair_failures, seconds):
    mods = [results[k] for k in sorted(results)]
    checked = [(m, r) for m, r in mods if not r["skipped"]]
    failed = [(m, r) for m, r in checked if r["failures"]]
    gens = sorted({m.generator for m, _ in checked if m.generator != "findings"})
    kernels = sum(r["kernels"] for m, r in checked if m.generator != "findings")
    nfind = sum(1 for m, _ in checked if m.generator == "findings")
    print()
    print("== resources against the whole-module ptxas build, per mode: kernels with more registers, "
          "the most extra registers, kernels with more local memory, kernels with more static shared memory "
          "(more than the whole-module ptxas -c + nvlink build too)")
    print(f"   {'module':48} {'kernels':>7}  {'default: regs max local shared':>31}  {'relocatable units: same':>31}")
    tot = {mode: [0, 0, 0, 0] for mode in ("default", "reloc")}
    for m, r in checked:
        cells = []
        for mode in ("default", "reloc"):
            if mode in r["resources"]:
                s = r["resources"][mode][1]
                cells.append(f"{s['more_regs']:4} {'+' + str(s['max_extra_regs']):>5} {s['more_local']:5} "
                             f"{s['more_shared']:6}")
                if m.generator != "findings":
                    tot[mode][0] += s["more_regs"]
                    tot[mode][1] = max(tot[mode][1], s["max_extra_regs"])
                    tot[mode][2] += s["more_local"]
                    tot[mode][3] += s["more_shared"]
            else:
                cells.append("")
        print(f"   {m.label:48} {r['kernels']:7}  {cells[0]:>31}  {cells[1]:>31}")
    print(f"   {'all (corpus)':48} {kernels:7}  " +
          "  ".join(f"{t[0]:4} {'+' + str(t[1]):>5} {t[2]:5} {t[3]:6}".rjust(31) for t in tot.values()))
    if args.table:
        write_table(args.table, checked)
        print(f"   per-kernel table: {args.table}")
    print()
    skipped = len(mods) - len(checked)
    print(f"== real-world corpus: {len(checked) - nfind} modules ({kernels} kernels) from {len(gens)} generators "
          f"({', '.join(gens)}) and {nfind} reproducers of findings; {len(failed)} failed, {skipped} skipped, "
          f"{len(pair_failures)} key pairs failed; {seconds:.0f} s")
    for m, r in failed:
        print(f"   FAIL {m.label}: {r['failures'][0]}" + (f" (+{len(r['failures']) - 1} more)"
                                                           if len(r["failures"]) > 1 else ""))
    for f in pair_failures:
        print(f"   FAIL {f}")
    return 1 if failed or pair_failures else 0


def write_table(path, checked):
    with open(path, "w") as f:
        f.write("module\tkernel\twhole_regs\tdefault_regs\treloc_regs\twhole_local\tdefault_local\treloc_local\n")
        for m, r in checked:
            d = {row[0]: row for row in r["resources"].get("default", ([], {}))[0]}
            e = {row[0]: row for row in r["resources"].get("reloc", ([], {}))[0]}
            for k in sorted(set(d) | set(e)):
                base = d.get(k) or e.get(k)
                dv, ev = d.get(k), e.get(k)
                f.write("\t".join(("unknown" if x == 0xFFFFFFFF else str(x)) for x in (
                    m.label, k, base[1], dv[2] if dv else "", ev[2] if ev else "",
                    base[3], dv[4] if dv else "", ev[4] if ev else "")) + "\n")


if __name__ == "__main__":
    sys.exit(main())
