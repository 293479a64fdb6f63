#!/usr/bin/env python3
"""realworld_identity.py -- the real-world corpus (tests/realworld) run on a GPU.

Every kernel of every corpus module, and of the reproducers in
tests/realworld/findings, is launched with arguments made from its PTX
signature alone, under the whole-module ptxas image and under
taskcache's images in each build mode (default: whole-program units;
--relocatable-units; --unit-cost 1, every kernel a unit of its own), and
the bytes each kernel leaves in its buffers must be identical.

Nobody wrote launch specs for these modules, so the arguments are generic:
every pointer parameter gets a buffer of its own (256 KiB of random floats in
[-1, 1)), integers are 16, floats 0.5, by-value structs zero (but Warp's
launch bounds and arrays, which hold the kernel's size and buffers); grid 8, the
block the kernel was compiled for (.reqntid / .maxntid) or 128 threads, 48 KiB of
dynamic shared memory for kernels that use an `.extern .shared` array.
Since each launch has buffers of its own, kernels are independent of each
other. A parameter is taken for a pointer when PTX says `.ptr`, or when the
value it loads is used as an address (cvta, [reg], 64-bit adds) and never
compared.

Many kernels cannot run on such arguments (a struct of null pointers, random
floats used as indices, a loop bound read from a buffer): those fault or
hang under the whole-module image too. The whole image is therefore run
first, one gpu_run process per stretch of kernels, restarting after a
kernel that faults or runs past --kernel-timeout; those kernels are
reported as not runnable, not failed. The kernels that completed then run
again under the whole image in one process with one spec: that run is the
reference. A kernel is set apart, not compared, when its results depend on
more than its code and inputs: they differ between the two whole-image runs
(races), with every buffer moved 3 MiB (it reads or writes outside its
buffers), or under the module compiled by ptxas -c + nvlink (uninitialized
values, whose garbage follows register allocation). Every remaining kernel
must leave the same bytes under every taskcache image as under the
reference, with the same spec; a kernel that faults only under a taskcache
image is a failure. A kernel that differs is confirmed first: the whole
image runs twice more, and so does the taskcache image it differed under;
a kernel whose bytes move between the runs of either image (or come out as
the reference's) is set apart as racing (two runs do not catch every race,
and a wrong binary gives the same wrong bytes every time).

  python3 tests/gpu/realworld_identity.py --taskcache build/taskcache \\
      --gpu-run build/tests/gpu/gpu_run [--only 'triton/*'] [--jobs 6] \\
      [--out DIR] [--deadline EPOCH] [--dry-run]

--dry-run (no GPU): builds the images and checks every generated spec
against the whole image's .nv.info (gpu_run --build-only). Prints a table
last, writes OUT/realworld_identity.json. Exit status 0 when no kernel
differs, 1 when one does (or a build or spec failed), 2 on a usage error.
"""

import argparse
import collections
import concurrent.futures
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "realworld"))
import ptxitems  # noqa: E402
import rwlib  # noqa: E402

MODES = {"default": [], "reloc": ["--relocatable-units"], "unit1": ["--unit-cost", "1"]}
BUF_FLOATS = 65536           # 256 KiB per pointer parameter
GRID = 8
DEFAULT_BLOCK = 128
DYNAMIC_SHARED = 49152       # the most a launch may ask for without an opt-in
INT_VALUE = 16
SEED = 7
CHUNK = 16                   # launches per gpu_run process while finding which kernels run
CONFIRM_RUNS = 2             # more whole-image runs before a difference counts (step 4)


# ---- launch specs from PTX signatures ---------------------------------------------------

NTID = re.compile(r"\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
EXTERN_SHARED = re.compile(r"\.extern\s+\.shared\s+(?:\.align\s+\d+\s+)?(?:\.\w+\s+)*?\.\w+\s+([\w$.%]+)\s*\[")


class Param:
    def __init__(self, decl):
        words = decl.replace(",", " ").split()
        self.array = None
        name = words[-1]
        m = re.match(r"([\w$.%]+)\s*\[(\d+)\]$", name)
        if m:
            name, self.array = m.group(1), int(m.group(2))
        self.name = name
        types = [w for w in words if re.fullmatch(r"\.[usfb]\d+", w)]
        self.type = types[0][1:] if types else "b8"
        self.ptr = ".ptr" in words


def entries(text):
    """[(name, [Param], header directives, body)] of every kernel defined in
    the module (declarations without a body are skipped)."""
    out = []
    for item in ptxitems.split(text):
        if item.kind != "entry" or not item.is_definition or not item.name:
            continue
        span = ptxitems.body_span(item.text)
        if span is None:
            continue
        head = item.text[:span[0] - 1]
        close = head.rfind(")")
        params = [Param(d) for d in head[head.index("(") + 1:close].split(",") if d.strip()]
        out.append((item.name, params, head[close + 1:], item.text[span[0] - 1:span[1] + 1]))
    return out


def is_pointer(param, body):
    """A 64-bit parameter is a pointer when PTX says so, or when the register
    it is loaded into is used as an address and never compared."""
    if param.ptr:
        return True
    regs = re.findall(r"ld\.param\.[usb]64\s+(%\w+)\s*,\s*\[" + re.escape(param.name) + r"(?:\+0)?\]",
                      body)
    for r in regs:
        rr = re.escape(r) + r"\b"
        if re.search(r"setp\.[^;]*" + rr, body):
            return False
        if (re.search(r"cvta\.to\.\w+\.u64\s+%\w+\s*,\s*" + rr, body)
                or re.search(r"\[" + rr + r"\s*(?:\+\s*-?\d+\s*)?\]", body)
                or re.search(r"add\.[su]64\s+%\w+\s*,\s*(?:%\w+\s*,\s*)?" + rr, body)):
            return True
    return False


SCALAR = {"u8": "u8:1", "s8": "i8:1", "b8": "u8:1", "u16": "u16:1", "s16": "i16:1", "b16": "u16:1",
          "f16": "u16:15360", "u32": f"u32:{INT_VALUE}", "s32": f"i32:{INT_VALUE}",
          "b32": f"u32:{INT_VALUE}", "f32": "f32:0.5", "u64": f"u64:{INT_VALUE}",
          "s64": f"i64:{INT_VALUE}", "b64": f"u64:{INT_VALUE}", "f64": "f64:0.5"}


# NVIDIA Warp's kernels (NAME_HASH_cuda_kernel_forward / _backward) take
# their launch bounds and arrays as structs by value (warp/native: builtin.h
# launch_bounds_t {int shape[4]; int ndim; size_t size;}, array.h array_t
# {T *data, *grad; int shape[4]; int strides[4]; int ndim;}): zero bounds
# would run nothing. They get WARP_N threads' worth, and each array a buffer
# of its own, one dimension of WARP_N elements 16 bytes apart (room for any
# element up to a vec4), its grad pointer null.
WARP_KERNEL = re.compile(r"_cuda_kernel_(?:forward|backward)$")
WARP_BOUNDS, WARP_ARRAY = 32, 56
WARP_N, WARP_STRIDE = GRID * DEFAULT_BLOCK, 16


def warp_struct(tag, size, first):
    """Spec lines filling a Warp launch-bound (the first parameter) or array
    struct, or None for a struct of another size."""
    if first and size == WARP_BOUNDS:
        return [f"set {tag} 0 i32 {WARP_N}", f"set {tag} 16 i32 1", f"set {tag} 24 u64 {WARP_N}"]
    if not first and size == WARP_ARRAY:
        return [f"buf {tag}_data f32 {BUF_FLOATS} in", f"addr {tag} 0 {tag}_data",
                f"set {tag} 16 i32 {WARP_N}", f"set {tag} 32 i32 {WARP_STRIDE}",
                f"set {tag} 48 i32 1"]
    return None


def launch_lines(index, name, params, head, body, extern_shared):
    """(spec lines declaring the launch's buffers and blobs, its launch line)."""
    decls, args = [], []
    warp = WARP_KERNEL.search(name) is not None
    for j, p in enumerate(params):
        tag = f"k{index}_p{j}"
        if p.array is not None:
            size = p.array * int(re.sub(r'[^0-9]', '', p.type) or 8) // 8
            decls.append(f"blob {tag} {size}")
            decls += (warp and warp_struct(tag, size, j == 0)) or []
            args.append(f"blob:{tag}")
        elif p.type.endswith("64") and p.type != "f64" and is_pointer(p, body):
            decls.append(f"buf {tag} f32 {BUF_FLOATS} in")
            args.append(f"@{tag}")
        else:
            args.append(SCALAR.get(p.type, f"u32:{INT_VALUE}"))
    # the block the kernel was compiled for (CUB's and llm.c's launch bounds
    # are their block sizes: a smaller block leaves items unloaded)
    block = DEFAULT_BLOCK
    n = NTID.search(head)
    if n:
        block = ",".join(x for x in n.groups()[1:] if x)
    shmem = DYNAMIC_SHARED if any(re.search(r"\b" + re.escape(s) + r"\b", body)
                                  for s in extern_shared) else 0
    return decls, f"launch {name} grid={GRID} block={block} shmem={shmem} " + " ".join(args)


def module_launches(text):
    """[(kernel, decl lines, launch line)] for every kernel of the module."""
    extern_shared = EXTERN_SHARED.findall(text)
    return [(name, *launch_lines(i, name, params, head, body, extern_shared))
            for i, (name, params, head, body) in enumerate(entries(text))]


def write_spec(path, launches):
    with open(path, "w") as f:
        f.write("# generated by realworld_identity.py from the kernels' PTX signatures\n")
        for _, decls, _ in launches:
            for d in decls:
                f.write(d + "\n")
        for _, _, line in launches:
            f.write(line + "\n")
    # the line of each launch in the spec file, for gpu_run's messages
    first = 2 + sum(len(d) for _, d, _ in launches)
    return {first + i: k for i, (k, _, _) in enumerate(launches)}


# ---- running an image ---------------------------------------------------------------------

AFTER = re.compile(r"^after \d+ (\S+) buf (\S+) \S+ \d+ ([0-9a-f]{64})$")
LAUNCHED = re.compile(r"^launch \d+ (\S+) ")


def run_once(args, image, launches, work, tag, timeout, extra=()):
    """One gpu_run process over `launches`: ({kernel: {buffer: sha}} of the
    kernels that completed, the kernel that stopped the run or None, why)."""
    spec = os.path.join(work, f"{tag}.spec")
    lines = write_spec(spec, launches)
    out = os.path.join(work, f"{tag}.result")
    cmd = [args.gpu_run, "--spec", spec, "--image", image, "--seed", str(SEED), "--out", out,
           "--allow-uncovered", "--record-args", *extra]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        rc, err = p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, err = "timeout", f"ran past {timeout} s"
    done, launched = {}, []
    if os.path.exists(out):
        with open(out, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                m = LAUNCHED.match(line)
                if m:
                    launched.append(m.group(1))
                    done[m.group(1)] = {}
                m = AFTER.match(line)
                if m:
                    done.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
    if rc == 0:
        return done, None, ""
    why = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    # the kernel that stopped the run: the last one launched (its results are
    # not complete), or the spec line gpu_run names before launching anything
    culprit = None
    ln = re.search(r"spec line (\d+)|\.spec:(\d+):", err)
    if ln:
        culprit = lines.get(int(ln.group(1) or ln.group(2)))
    if culprit is None and launched:
        culprit = launched[-1]
    if culprit is None:
        return done, "", f"gpu_run stopped before any launch: {why}"
    done.pop(culprit, None)
    return done, culprit, why


def run_all(args, image, launches, work, tag, chunk_size=CHUNK, extra=()):
    """Runs every launch, restarting after a kernel that stops the run:
    ({kernel: {buffer: sha}}, {kernel: why it did not complete}, fatal)."""
    results, stopped = {}, {}
    rest = list(launches)
    part = 0
    while rest:
        part += 1
        # a few launches per process: a restart allocates the buffers of those only
        chunk = rest[:max(1, chunk_size)]
        done, culprit, why = run_once(args, image, chunk, work, f"{tag}.{part}", args.kernel_timeout,
                                      extra)
        results.update(done)
        if culprit == "":
            return results, stopped, why
        if culprit is None:
            rest = rest[len(chunk):]
            continue
        stopped[culprit] = why
        names = [k for k, _, _ in rest]
        rest = rest[names.index(culprit) + 1:]
    return results, stopped, None


# ---- one module ---------------------------------------------------------------------------

PAD_BYTES = 3 << 20  # moves every buffer by 3 MiB


def empty_result(label):
    return {"module": label, "kernels": 0, "ran": 0, "not_runnable": {},
            "excluded": {"nondeterministic": [], "outside_buffers": [], "codegen_dependent": []},
            "modes": {}, "failures": [], "notes": [], "skipped": None}


def check_module(args, module):
    res = empty_result(module.label)
    work, ptx, arch, ref_ptx = rwlib.unpack(module, args.work)
    whole = os.path.join(work, "whole.cubin")
    try:
        rwlib.whole_build(ref_ptx, whole, arch)
    except rwlib.BuildError as e:
        res["skipped"] = f"ptxas rejects the module: {e}"
        return res
    tc = rwlib.Taskcache(args.taskcache, os.path.join(work, "cache"), arch, args.build_jobs)
    images = {}
    for mode, extra in MODES.items():
        img = os.path.join(work, f"{mode}.cubin")
        try:
            tc.build(ptx, img, *extra)
            images[mode] = img
        except rwlib.BuildError as e:
            res["failures"].append(f"{mode}: build failed: {e}")
    with open(ref_ptx, "rb") as f:
        launches = module_launches(f.read().decode(errors="replace"))
    res["kernels"] = len(launches)
    if args.dry_run:
        spec = os.path.join(work, "all.spec")
        write_spec(spec, launches)
        p = subprocess.run([args.gpu_run, "--spec", spec, "--image", whole, "--build-only",
                            "--allow-uncovered"], capture_output=True, text=True)
        if p.returncode != 0:
            res["failures"].append("generated spec does not match the image: " +
                                   (p.stderr.strip().splitlines() or ["?"])[-1])
        return res
    # 1. which kernels run at all under the whole image
    first, stopped, fatal = run_all(args, whole, launches, work, "whole1")
    if fatal:
        res["failures"].append(f"whole image: {fatal}")
        return res
    res["not_runnable"] = stopped
    ran = [l for l in launches if l[0] in first]
    if not ran:
        return res
    # 2. the reference: the same kernels in one process; then what a kernel's
    # results depend on besides its code and inputs: a second run (races),
    # its buffers elsewhere (reads or writes outside them), and the module
    # compiled another way by NVIDIA's tools, ptxas -c + nvlink (uninitialized
    # values, whose garbage depends on register allocation)
    ref, culprit, why = run_once(args, whole, ran, work, "whole2", args.kernel_timeout * 2)
    if culprit is not None:
        res["failures"].append(f"whole image stopped at {culprit or 'start'} on a second run: {why}")
        return res
    excluded = res["excluded"]
    excluded["nondeterministic"] = [k for k, _, _ in ran if first.get(k) != ref.get(k)]
    kept = [l for l in ran if l[0] not in excluded["nondeterministic"]]
    moved, moved_stop, _ = run_all(args, whole, kept, work, "whole-moved", chunk_size=len(kept),
                                   extra=("--pad-bytes", str(PAD_BYTES)))
    excluded["outside_buffers"] = [k for k, _, _ in kept if k in moved_stop or moved.get(k) != ref.get(k)]
    kept = [l for l in kept if l[0] not in excluded["outside_buffers"]]
    try:
        other = rwlib.relocatable_build(ref_ptx, os.path.join(work, "whole-c.cubin"), arch)
        alt, alt_stop, _ = run_all(args, other, kept, work, "whole-c", chunk_size=len(kept))
        excluded["codegen_dependent"] = [k for k, _, _ in kept if k in alt_stop or alt.get(k) != ref.get(k)]
    except rwlib.BuildError as e:
        res["notes"].append(f"no ptxas -c + nvlink reference: {e}")
    kept = [l for l in kept if l[0] not in excluded["codegen_dependent"]]
    res["ran"] = len(kept)
    # 3. every taskcache image with the same spec
    runs = {mode: run_all(args, img, kept, work, mode, chunk_size=len(kept))
            for mode, img in images.items()}
    # 4. a kernel whose bytes differ under some image is confirmed first: the
    # whole image runs the same launches CONFIRM_RUNS times more, and a
    # kernel whose bytes move between those runs races, which the two runs
    # of step 2 missed (Triton's matmuls under random grids differed in
    # every mode, default included, on other kernels each time)
    suspects = {k for done, stopped_at, _ in runs.values() for k, _, _ in kept
                if k not in stopped_at and done.get(k) != ref.get(k)}
    for i in range(CONFIRM_RUNS if suspects else 0):
        again, again_stop, _ = run_all(args, whole, kept, work, f"whole-confirm{i}",
                                       chunk_size=len(kept))
        raced = [k for k in sorted(suspects) if k in again_stop or again.get(k) != ref.get(k)]
        excluded["nondeterministic"] += raced
        suspects -= set(raced)
    # ... and the taskcache image that differed runs them CONFIRM_RUNS times
    # more: a wrong binary gives its wrong bytes every time, while a race
    # that both confirmations of the whole image missed shows as bytes that
    # move between these runs or come out as the reference's (Triton's
    # attention_f16_64x64_d64_c1 differed once under unit1, with a .text
    # byte-identical to the whole image's, and was set apart as racing in
    # the next three runs)
    for mode, (done, stopped_at, _) in runs.items():
        mine = sorted(k for k in suspects if k not in stopped_at and done.get(k) != ref.get(k))
        for i in range(CONFIRM_RUNS if mine else 0):
            again, again_stop, _ = run_all(args, images[mode], kept, work,
                                           f"{mode}-confirm{i}", chunk_size=len(kept))
            raced = [k for k in mine if k in again_stop or again.get(k) != done.get(k)]
            excluded["nondeterministic"] += raced
            suspects -= set(raced)
            mine = [k for k in mine if k not in raced]
    kept = [l for l in kept if l[0] not in excluded["nondeterministic"]]
    res["ran"] = len(kept)
    for mode, (done, stopped_at, fatal) in runs.items():
        same, differ = 0, []
        for k, _, _ in kept:
            if k in stopped_at:
                differ.append(f"{k}: stopped under taskcache ({stopped_at[k]}), ran under whole")
            elif done.get(k) != ref.get(k):
                bufs = sorted(b for b in set(ref.get(k, {})) | set(done.get(k, {}))
                              if ref.get(k, {}).get(b) != done.get(k, {}).get(b))
                differ.append(f"{k}: buffers {', '.join(bufs) or '(none recorded)'} differ")
            else:
                same += 1
        if fatal:
            differ.append(f"run stopped: {fatal}")
        res["modes"][mode] = {"identical": same, "differ": differ}
        res["failures"] += [f"{mode}: {d}" for d in differ]
    return res


# ---- main ---------------------------------------------------------------------------------

def commonest_reason(r):
    whys = collections.Counter(re.sub(r"launch \d+ of \S+ \(spec line \d+\) ", "", w)[:160]
                               for w in r["not_runnable"].values())
    return f"; commonest reason a kernel did not run: {whys.most_common(1)[0][0]}" if whys else ""


def table(results):
    cols = ("kernels", "compared", "fault/hang", "nondet", "outside", "codegen", *MODES)
    rows = [f"{'module':<44} " + " ".join(f"{c:>10}" for c in cols)]
    tot = collections.Counter()
    for r in results:
        if r["skipped"]:
            rows.append(f"{r['module']:<44} SKIP {r['skipped'][:60]}")
            continue
        ex = r["excluded"]
        nums = {"kernels": r["kernels"], "compared": r["ran"], "fault/hang": len(r["not_runnable"]),
                "nondet": len(ex["nondeterministic"]), "outside": len(ex["outside_buffers"]),
                "codegen": len(ex["codegen_dependent"])}
        cells = [str(nums[c]) for c in cols[:6]]
        for m in MODES:
            mm = r["modes"].get(m)
            cells.append(f"{mm['identical']}/{r['ran']}" if mm else "-")
            nums[m] = mm["identical"] if mm else 0
        tot.update(nums)
        rows.append(f"{r['module']:<44} " + " ".join(f"{c:>10}" for c in cells))
    rows.append(f"{'total':<44} " + " ".join(f"{tot[c]:>10}" for c in cols))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taskcache", required=True)
    ap.add_argument("--gpu-run", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--work", default=None, help="working directory (default: a new one in /tmp)")
    ap.add_argument("--only", action="append", default=[], help="GENERATOR/NAME glob (repeatable)")
    ap.add_argument("--jobs", type=int, default=6, help="modules checked at a time")
    ap.add_argument("--build-jobs", type=int, default=max(1, (os.cpu_count() or 2) // 4))
    ap.add_argument("--kernel-timeout", type=float, default=20.0,
                    help="seconds one gpu_run process may take")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds: start no module after")
    ap.add_argument("--no-nvrtc", action="store_true", help="leave out the NVRTC modules")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: build and check the specs only")
    args = ap.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="realworld-identity.")
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    modules = rwlib.stored_modules() + rwlib.finding_modules()
    if not args.no_nvrtc:
        modules += rwlib.generated_modules(args.work, log=lambda s: print(s, flush=True))
    if args.only:
        modules = [m for m in modules if any(fnmatch.fnmatch(m.label, g) for g in args.only)]
    t0 = time.time()
    results, skipped_for_time = [], []
    lock = threading.Lock()

    def save():  # after every module, so that a run cut short keeps what it found
        with open(os.path.join(args.out, "realworld_identity.json"), "w") as f:
            json.dump({"results": results, "not_started_for_time": skipped_for_time,
                       "seconds": time.time() - t0}, f, indent=1)

    def one(m):
        if args.deadline and time.time() > args.deadline:
            skipped_for_time.append(m.label)
            return None
        try:
            r = check_module(args, m)
        except Exception as e:  # a crash of this script is a failure of the module, reported
            r = empty_result(m.label)
            r["failures"].append(f"check crashed: {type(e).__name__}: {e}")
        print(f"[{time.time() - t0:6.1f}s] {m.label}: {r['ran']} of {r['kernels']} kernels ran, "
              f"{len(r['failures'])} failure(s)" + commonest_reason(r) +
              "".join(f"\n    FAIL {f[:300]}" for f in r["failures"][:5]), flush=True)
        with lock:
            results.append(r)
            save()
        return r

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        list(ex.map(one, modules))
    order = {m.label: i for i, m in enumerate(modules)}
    results.sort(key=lambda r: order[r["module"]])
    save()
    failures = [(r["module"], f) for r in results for f in r["failures"]]
    for mod, f in failures:
        print(f"FAIL {mod}: {f}")
    if skipped_for_time:
        print(f"not started (deadline): {len(skipped_for_time)} module(s): {', '.join(skipped_for_time)}")
    print(table(results))
    print(f"realworld_identity: {len(results)} modules, {len(failures)} failure(s), "
          f"{time.time() - t0:.0f} s{' (dry run: specs and builds only)' if args.dry_run else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
