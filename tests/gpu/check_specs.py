#!/usr/bin/env python3
"""check_specs.py -- do the GPU test specs cover the CUDA corpus, and do they
match the kernels' parameter lists? (No GPU needed.)

For every tests/corpus/cuda/NAME.cu there must be tests/gpu/specs/NAME.spec;
a handwritten tests/corpus/ptx/NAME.ptx may have one too (shapes only PTX
can express), and no spec may be without a module. Each CUDA source is
compiled with `nvcc -ptx -arch=sm_90`, plain and with -rdc=true (or the PTX
is taken from --ptx-dir, e.g. the output of tests/corpus/build_corpus.sh),
and for every variant:

  * every .entry of the PTX is launched by the spec, and every kernel the
    spec launches is an .entry of the PTX;
  * each launch gives as many arguments as the kernel has parameters, each
    of the parameter's size in bytes (blobs: the struct's size);
  * every global the spec lists is a module-scope .global/.const variable of
    that size.

When gpu_run is built (--gpu-run, default build/tests/gpu/gpu_run), its own
spec parser (`gpu_run --spec F --check-spec`) must accept every spec and
report the same launches and sizes as this script's parser.

Exit status 0 when everything matches, 1 otherwise (each problem is printed).
Python 3 standard library only.
"""

import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CUDA_DIR = os.path.join(ROOT, "tests", "corpus", "cuda")
PTX_DIR = os.path.join(ROOT, "tests", "corpus", "ptx")
SPEC_DIR = os.path.join(HERE, "specs")


def module_variants(name):
    """The corpus modules a spec NAME.spec runs: NAME and NAME.rdc for
    cuda/NAME.cu, NAME for a handwritten ptx/NAME.ptx; [] for neither."""
    if os.path.exists(os.path.join(CUDA_DIR, name + ".cu")):
        return [name, name + ".rdc"]
    if os.path.exists(os.path.join(PTX_DIR, name + ".ptx")):
        return [name]
    return []

TYPE_SIZES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
              "f32": 4, "f64": 8}
PTX_TYPE_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
                  "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8,
                  "f64": 8}


# ---- PTX ---------------------------------------------------------------------------------

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def ptx_entries(text):
    """{entry name: [parameter sizes]} of a PTX module."""
    text = strip_comments(text)
    out = {}
    for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        plist = text[m.end():i - 1]
        sizes = []
        for p in plist.split(","):
            p = p.strip()
            if not p:
                continue
            pm = re.match(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+(?:\.ptr\s+(?:\.\w+\s+)*"
                          r"(?:\.align\s+\d+\s+)?)?([\w$]+)((?:\s*\[\d+\])*)", p)
            if not pm or pm.group(1) not in PTX_TYPE_SIZES:
                raise ValueError(f"cannot parse parameter '{p}' of {m.group(1)}")
            n = PTX_TYPE_SIZES[pm.group(1)]
            for dim in re.findall(r"\[(\d+)\]", pm.group(3)):
                n *= int(dim)
            sizes.append(n)
        out[m.group(1)] = sizes
    return out


def ptx_globals(text):
    """{variable name: size in bytes} of module-scope .global/.const variables."""
    text = strip_comments(text)
    out = {}
    depth = 0
    for line in text.splitlines():
        if depth == 0:
            m = re.match(r"\s*(?:\.(?:visible|extern|weak|common)\s+)*\.(global|const)\s+"
                         r"(?:\.align\s+\d+\s+)?(?:\.v(\d)\s+)?\.(\w+)\s+([\w$%]+)((?:\[\d*\])*)",
                         line)
            if m and m.group(3) in PTX_TYPE_SIZES:
                n = PTX_TYPE_SIZES[m.group(3)] * int(m.group(2) or 1)
                for dim in re.findall(r"\[(\d*)\]", m.group(5)):
                    n *= int(dim) if dim else 0
                out[m.group(4)] = n
        depth += line.count("{") - line.count("}")
        depth = max(depth, 0)
    return out


# ---- specs (the same format gpu_run reads; see gpu_run.c) ----------------------------------

class SpecError(Exception):
    pass


def parse_spec(path):
    """Returns {"launches": [(kernel, [arg sizes], line)], "globals": {name: bytes}}."""
    bufs, blobs, globs, launches = {}, {}, {}, []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            kw = words[0]
            where = f"{path}:{lineno}"
            try:
                if kw == "stack":
                    int(words[1], 0)
                elif kw == "buf":
                    if len(words) not in (5, 7) or words[2] not in TYPE_SIZES \
                            or words[4] not in ("in", "inout", "out", "zero"):
                        raise SpecError(f"{where}: buf NAME TYPE COUNT in|inout|out|zero [LO HI]")
                    bufs[words[1]] = TYPE_SIZES[words[2]] * int(words[3], 0)
                elif kw == "global":
                    if len(words) not in (5, 7) or words[2] not in TYPE_SIZES \
                            or words[4] not in ("init", "keep"):
                        raise SpecError(f"{where}: global NAME TYPE COUNT init|keep [LO HI]")
                    globs[words[1]] = TYPE_SIZES[words[2]] * int(words[3], 0)
                elif kw == "blob":
                    blobs[words[1]] = int(words[2], 0)
                elif kw in ("set", "fill"):
                    if words[1] not in blobs:
                        raise SpecError(f"{where}: no blob {words[1]}")
                elif kw == "launch":
                    sizes = []
                    for w in words[2:]:
                        if w.startswith(("grid=", "block=", "shmem=")) or w == "coop":
                            continue
                        if w.startswith("@"):
                            if w[1:] not in bufs:
                                raise SpecError(f"{where}: no buffer {w[1:]}")
                            sizes.append(8)
                        elif w.startswith("blob:"):
                            if w[5:] not in blobs:
                                raise SpecError(f"{where}: no blob {w[5:]}")
                            sizes.append(blobs[w[5:]])
                        elif w.startswith("fnptr:"):
                            sizes.append(8)
                        elif ":" in w and w.split(":", 1)[0] in TYPE_SIZES:
                            sizes.append(TYPE_SIZES[w.split(":", 1)[0]])
                        else:
                            raise SpecError(f"{where}: bad argument {w}")
                    launches.append((words[1], sizes, lineno))
                else:
                    raise SpecError(f"{where}: unknown directive {kw}")
            except (IndexError, ValueError) as e:
                raise SpecError(f"{where}: cannot parse: {line.strip()} ({e})") from e
    return {"launches": launches, "globals": globs}


def gpu_run_view(gpu_run, spec_path):
    """The launches and globals as gpu_run's own parser sees them."""
    p = subprocess.run([gpu_run, "--spec", spec_path, "--check-spec"], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        raise SpecError(f"gpu_run --check-spec rejects {spec_path} (exit {p.returncode}):\n"
                        f"{p.stderr.strip()}")
    launches, globs = [], {}
    for line in p.stdout.splitlines():
        w = line.split()
        if w[0] == "launch":
            sizes = [] if w[2] == "-" else [int(x) for x in w[2].split(",")]
            launches.append((w[1], sizes))
        elif w[0] == "global":
            globs[w[1]] = int(w[2])
    return {"launches": launches, "globals": globs}


# ---- main ------------------------------------------------------------------------------------

def find_nvcc(explicit):
    if explicit:
        return explicit
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc")


def compile_ptx(nvcc, src, out, rdc):
    cmd = [nvcc, "-ptx", "-arch=sm_90"] + (["-rdc=true"] if rdc else []) + [src, "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SpecError(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return out


def check_module(name, ptx_paths, spec_path, gpu_run):
    """Returns a list of problems (strings) for one module."""
    problems = []
    try:
        spec = parse_spec(spec_path)
    except SpecError as e:
        return [str(e)]
    launched = {k for k, _s, _l in spec["launches"]}
    for variant, ptx in ptx_paths.items():
        with open(ptx) as f:
            text = f.read()
        try:
            entries = ptx_entries(text)
        except ValueError as e:
            problems.append(f"{variant}: {e}")
            continue
        gvars = ptx_globals(text)
        for e in sorted(set(entries) - launched):
            problems.append(f"{variant}: kernel {e} is not launched by {spec_path}")
        for k in sorted(launched - set(entries)):
            problems.append(f"{variant}: {spec_path} launches {k}, which is not an .entry")
        for k, sizes, line in spec["launches"]:
            if k in entries and entries[k] != sizes:
                problems.append(f"{variant}: {spec_path}:{line}: {k} takes parameters of "
                                f"{entries[k]} bytes, the spec gives {sizes}")
        for g, size in sorted(spec["globals"].items()):
            if g not in gvars:
                problems.append(f"{variant}: global {g} of the spec is not a .global/.const "
                                f"variable of the module")
            elif gvars[g] != size:
                problems.append(f"{variant}: global {g} is {gvars[g]} bytes, the spec says {size}")
    if gpu_run:
        try:
            view = gpu_run_view(gpu_run, spec_path)
            mine = [(k, s) for k, s, _l in spec["launches"]]
            if view["launches"] != mine:
                problems.append(f"gpu_run --check-spec sees other launches than check_specs.py: "
                                f"{view['launches']} vs {mine}")
            if view["globals"] != spec["globals"]:
                problems.append(f"gpu_run --check-spec sees other globals: {view['globals']} vs "
                                f"{spec['globals']}")
        except (SpecError, subprocess.TimeoutExpired, OSError) as e:
            problems.append(str(e))
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx-dir", help="take NAME.ptx and NAME.rdc.ptx from here instead of "
                                      "compiling (tests/corpus/build_corpus.sh output)")
    ap.add_argument("--nvcc", help="nvcc (default: CUDA_HOME, /usr/local/cuda, PATH)")
    ap.add_argument("--gpu-run", help="gpu_run binary to cross-check the spec parser "
                                      "(default build/tests/gpu/gpu_run if it exists; 'none' skips)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    args = ap.parse_args(argv)

    gpu_run = args.gpu_run
    if gpu_run is None:
        cand = os.path.join(ROOT, "build", "tests", "gpu", "gpu_run")
        gpu_run = cand if os.access(cand, os.X_OK) else None
    elif gpu_run == "none":
        gpu_run = None
    elif not os.access(gpu_run, os.X_OK):
        print(f"check_specs: --gpu-run {gpu_run}: not an executable", file=sys.stderr)
        return 1

    sources = sorted(glob.glob(os.path.join(CUDA_DIR, "*.cu")))
    specs = sorted(glob.glob(os.path.join(SPEC_DIR, "*.spec")))
    if not sources:
        print(f"check_specs: no CUDA sources in {CUDA_DIR}", file=sys.stderr)
        return 1
    names = [os.path.basename(s)[:-3] for s in sources]
    problems = []
    hand = []  # handwritten PTX modules with a spec
    for s in specs:
        n = os.path.basename(s)[:-5]
        if not module_variants(n):
            problems.append(f"{s}: no tests/corpus/cuda/{n}.cu or tests/corpus/ptx/{n}.ptx "
                            f"for this spec")
        elif n not in names:
            hand.append(n)

    tmp = None
    if args.ptx_dir:
        ptx_dir = args.ptx_dir
    else:
        nvcc = find_nvcc(args.nvcc)
        if not nvcc:
            print("check_specs: nvcc not found (set CUDA_HOME) and no --ptx-dir", file=sys.stderr)
            return 1
        tmp = tempfile.TemporaryDirectory(prefix="check_specs-")
        ptx_dir = tmp.name
        jobs = []
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
            for src, n in zip(sources, names):
                for rdc in (False, True):
                    out = os.path.join(ptx_dir, n + (".rdc" if rdc else "") + ".ptx")
                    jobs.append(ex.submit(compile_ptx, nvcc, src, out, rdc))
            for j in jobs:
                try:
                    j.result()
                except (SpecError, subprocess.TimeoutExpired) as e:
                    problems.append(str(e))
    try:
        for n in names + hand:
            spec = os.path.join(SPEC_DIR, n + ".spec")
            if not os.path.exists(spec):
                problems.append(f"tests/corpus/cuda/{n}.cu has no spec {spec}")
                continue
            ptx = {}
            for v in module_variants(n):
                p = os.path.join(ptx_dir if n in names or args.ptx_dir else PTX_DIR, v + ".ptx")
                if os.path.exists(p):
                    ptx[v] = p
                else:
                    problems.append(f"{v}: {p} missing")
            mine = check_module(n, ptx, spec, gpu_run)
            problems += mine
            nlaunch = len(parse_spec(spec)["launches"]) if not mine else 0
            print(f"check_specs: {n}: " + ("OK (" + ", ".join(sorted(ptx)) + f"; {nlaunch} launches)"
                                          if not mine else f"{len(mine)} problem(s)"))
    finally:
        if tmp:
            tmp.cleanup()
    for p in problems:
        print(f"check_specs: ERROR: {p}")
    print(f"check_specs: {len(names) + len(hand)} modules, {len(problems)} problem(s)"
          + ("" if gpu_run else " (gpu_run not built: its spec parser was not cross-checked)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
