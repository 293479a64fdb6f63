"""Shared by check.py and difffuzz.py: the real-world corpus, taskcache
builds in every tier, and the invariants every build must keep.

Standard library only; ELF reading comes from tests/e2e/elfsyms.py and
tests/gpu/sass_compare.py (imported, not copied)."""

import collections
import json
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
FINDINGS = os.path.join(HERE, "findings")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import elfsyms  # noqa: E402
import ptxitems  # noqa: E402
from sass_compare import Elf, find_tool  # noqa: E402

PTXAS = find_tool("ptxas", env_var="TASKCACHE_PTXAS")


# --------------------------------------------------------------------------
# the corpus

class Module:
    """One PTX module of the corpus: its generator, name and text."""

    def __init__(self, generator, name, path):
        self.generator, self.name, self.path = generator, name, path

    @property
    def label(self):
        return f"{self.generator}/{self.name}"

    def text(self):
        if self.path.endswith(".xz"):
            with lzma.open(self.path, "rb") as f:
                return f.read()
        with open(self.path, "rb") as f:
            return f.read()


def stored_modules():
    """Every module kept in tests/realworld/corpus, in name order."""
    out = []
    for gen in sorted(os.listdir(CORPUS)):
        d = os.path.join(CORPUS, gen)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith(".ptx.xz") or f.endswith(".ptx"):
                out.append(Module(gen, re.sub(r"\.ptx(\.xz)?$", "", f), os.path.join(d, f)))
    return out


def finding_modules():
    """The reproducers of tests/realworld/findings (written for this project:
    each shape the corpus or the fuzzer found taskcache getting wrong)."""
    return [Module("findings", f[:-4], os.path.join(FINDINGS, f))
            for f in sorted(os.listdir(FINDINGS)) if f.endswith(".ptx")] if os.path.isdir(FINDINGS) else []


def key_pairs():
    """[(name, a.ptx, b.ptx)]: findings/NAME.a.ptx and NAME.b.ptx are one
    module laid out two ways; every kernel must have the same slice key in
    both. Pairs named documented_* show a documented exception and are not
    enforced."""
    out = []
    for m in finding_modules():
        if m.name.endswith(".a") and not m.name.startswith("documented_"):
            b = m.path[:-len(".a.ptx")] + ".b.ptx"
            if os.path.exists(b):
                out.append((m.name[:-2], m.path, b))
    return out


def generated_modules(workdir, log=print):
    """Modules generated at test time (NVRTC); [] with a note when the
    generator cannot run here."""
    out_dir = os.path.join(workdir, "nvrtc")
    p = subprocess.run([sys.executable, os.path.join(HERE, "gen", "nvrtc", "nvrtc_gen.py"), out_dir],
                       capture_output=True, text=True)
    if p.returncode != 0:
        log(f"note: NVRTC modules not generated: {(p.stderr or p.stdout).strip()[-400:]}")
        return []
    if p.stdout.strip():
        log(p.stdout.strip())
    if not os.path.isdir(out_dir):
        return []
    return [Module("nvrtc", f[:-4], os.path.join(out_dir, f))
            for f in sorted(os.listdir(out_dir)) if f.endswith(".ptx")]


def arch_of(ptx_bytes):
    """The target to build for: sm_90a for PTX written for sm_90a (Triton),
    else sm_90 (older targets compile for sm_90)."""
    m = re.search(rb"^\s*\.target\s+([^\n/]*)", ptx_bytes, re.M)
    return "sm_90a" if m and b"sm_90a" in m.group(1) else "sm_90"


ENTRY_RE = re.compile(rb"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.entry\s+([\w$.%]+)", re.M)


def entry_names(ptx_bytes):
    return [m.group(1).decode() for m in ENTRY_RE.finditer(ptx_bytes)]


# --------------------------------------------------------------------------
# running things

def run(args, env=None, timeout=1800):
    return subprocess.run([str(a) for a in args], capture_output=True, timeout=timeout, env=env)


class BuildError(Exception):
    pass


class Taskcache:
    """Drives the taskcache command line on one module with one cache."""

    def __init__(self, binary, cache, arch, jobs):
        self.binary, self.cache, self.arch, self.jobs = binary, cache, arch, jobs

    def build(self, ptx, out, *extra, cache=True, env=None):
        args = [self.binary, "build", ptx, "-o", out, "--arch", self.arch, "-j", str(self.jobs), "-v"]
        args += ["--cache-dir", self.cache] if cache else ["--no-cache"]
        p = run(args + list(extra), env=dict(os.environ, **env) if env else None)
        if p.returncode != 0:
            raise BuildError(f"taskcache build {' '.join(extra)} exited {p.returncode}: "
                             f"{p.stderr.decode(errors='replace').strip()[-1500:]}")
        return p.stderr.decode(errors="replace")

    def stats(self):
        p = run([self.binary, "stats", "--cache-dir", self.cache, "--json"])
        if p.returncode != 0:
            raise BuildError(f"taskcache stats exited {p.returncode}")
        return json.loads(p.stdout)

    def slice_keys(self, ptx, *extra):
        """kernel name -> slice key (taskcache explain --json), for the
        kernels that have one: a module compiled whole has no slices (a
        small one is split when extra gives --unit-cost)."""
        p = run([self.binary, "explain", ptx, "--arch", self.arch, "--cache-dir", self.cache, "--json",
                 *extra])
        if p.returncode != 0:
            raise BuildError(f"taskcache explain exited {p.returncode}: "
                             f"{p.stderr.decode(errors='replace').strip()[-800:]}")
        return {e["name"]: e["slice_key"] for e in json.loads(p.stdout)["entries"] if e.get("slice_key")}


NVLINK = find_tool("nvlink", env_var="TASKCACHE_NVLINK")


def relocatable_build(ptx, out, arch):
    """The whole module compiled relocatable (ptxas -c) and linked alone."""
    obj = out + ".o"
    for args in ([PTXAS, f"-arch={arch}", "-c", ptx, "-o", obj], [NVLINK, f"-arch={arch}", obj, "-o", out]):
        p = run(args)
        if p.returncode != 0:
            raise BuildError(f"{os.path.basename(args[0])} exited {p.returncode}: "
                             f"{p.stderr.decode(errors='replace').strip()[-800:]}")
    return out


def without_other_kernels(text, keep):
    """The module text with every kernel definition but `keep` removed
    (helpers and data stay: ptxas drops what the kernel does not reach)."""
    return ptxitems.join(it for it in ptxitems.split(text)
                         if not (it.kind == "entry" and it.is_definition and it.name != keep))


def kernel_alone_build(ptx, kernel, out, arch):
    """The module with only `kernel` left, compiled relocatable and linked
    alone (relocatable_build): the room NVIDIA's linker gives the kernel's
    variables when no other kernel shapes the layout."""
    with open(ptx, errors="replace") as f:
        text = without_other_kernels(f.read(), kernel)
    with open(out + ".ptx", "w") as f:
        f.write(text)
    return relocatable_build(out + ".ptx", out, arch)


class References:
    """The reference builds of one module that the shared-memory checks ask
    for only when sizes differ, each made once: the module compiled
    relocatable and linked (relocatable_build), and the module reduced to
    one kernel (kernel_alone_build)."""

    def __init__(self, ptx, work, arch):
        self.ptx, self.work, self.arch = ptx, work, arch
        self.built = {}

    def relocatable(self):
        if None not in self.built:
            self.built[None] = relocatable_build(
                self.ptx, os.path.join(self.work, "relocatable.cubin"), self.arch)
        return self.built[None]

    def alone(self, kernel):
        if kernel not in self.built:
            self.built[kernel] = kernel_alone_build(
                self.ptx, kernel, os.path.join(self.work, f"alone{len(self.built)}.cubin"),
                self.arch)
        return self.built[kernel]


def driver_text(ptx, work):
    """The path of the module as the CUDA driver reads it: JITs hand the
    driver NUL-terminated strings and Quadrants' dumps end in a NUL, which
    ptxas rejects ("Unexpected EOF"); the references are built from the
    text before the first NUL, taskcache gets the file as it is."""
    with open(ptx, "rb") as f:
        text = f.read()
    if b"\0" not in text:
        return ptx
    out = os.path.join(work, "driver-text.ptx")
    with open(out, "wb") as f:
        f.write(text[:text.index(b"\0")])
    return out


def unpack(module, base):
    """The module written into a new directory under base, for building:
    (directory, its PTX file, target, the file the references are built
    from: driver_text)."""
    work = tempfile.mkdtemp(prefix=module.label.replace("/", "_") + ".", dir=base)
    ptx = os.path.join(work, "module.ptx")
    text = module.text()
    with open(ptx, "wb") as f:
        f.write(text)
    return work, ptx, arch_of(text), driver_text(ptx, work)


def whole_build(ptx, out, arch):
    """The reference: one whole-module ptxas."""
    p = run([PTXAS, f"-arch={arch}", ptx, "-o", out])
    if p.returncode != 0:
        raise BuildError(f"ptxas (whole module) exited {p.returncode}: "
                         f"{p.stderr.decode(errors='replace').strip()[-800:]}")


def summary_line(stderr):
    """taskcache's -v line: '... N kernels in U units: ...' or a whole build."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("taskcache: ")]
    return lines[-1] if lines else ""


def notes(stderr):
    return [ln for ln in stderr.splitlines() if ": note:" in ln or ln.startswith("note:")]


# --------------------------------------------------------------------------
# invariants over images

INTERNAL = "<compiler-named constants>"
FUNC_SCOPE = re.compile(r"^\$__(.+)__\d+$")   # ptxas's name for a function-scope variable


def variable_class(name):
    """Groups variable symbols for counting: a function-scope variable as
    ptxas names it ($__NAME__N, N a number ptxas picks) by its NAME; PTX
    internal names ($str, __unnamed_1) and taskcache's content-derived
    renames of them ($__tcA...) together; anything else by its name."""
    m = FUNC_SCOPE.match(name)
    if m and not name.startswith("$__tcA"):
        return f"$__{m.group(1)}__N"
    if name.startswith("$") or name.startswith("__unnamed_"):
        return INTERNAL
    return name


def variable_counts(cubin):
    """{class: number of defined OBJECT symbols}."""
    c = collections.Counter()
    for name, typ, _bind, _other, shndx in elfsyms.symbols(cubin):
        if typ == elfsyms.STT_OBJECT and shndx != 0 and not name.startswith("."):
            c[variable_class(name)] += 1
    return c


def symbol_failures(whole, image, what, relocatable=None, alone=None):
    """Kernels equal, every non-internal global present, object counts of
    every variable class equal (a variable defined twice, e.g. a
    function-scope .global copied into two units, is caught here), no
    kernel with less static shared memory than the whole-module builds
    (shared_differences). relocatable: a function returning the path of the module built
    with `ptxas -c` and nvlink, asked for only when shared sizes differ;
    alone: a function of a kernel's name returning the path of the module
    built with only that kernel (kernel_alone_build)."""
    fails = []
    wk, ik = set(elfsyms.kernels(whole)), set(elfsyms.kernels(image))
    if wk != ik:
        fails.append(f"{what}: kernels differ from the whole build: missing {sorted(wk - ik)[:5]}, "
                     f"extra {sorted(ik - wk)[:5]}")
    wc, ic = variable_counts(whole), variable_counts(image)
    for cls in sorted(set(wc) | set(ic)):
        if wc[cls] != ic[cls]:
            if ic[cls] == 0:
                fails.append(f"{what}: variable {cls} missing (whole build defines {wc[cls]})")
            else:
                fails.append(f"{what}: variable {cls}: {ic[cls]} objects, whole build {wc[cls]}")
    smaller, _ = shared_differences(whole, image, relocatable, alone)
    if smaller:
        k = smaller[0]
        fails.append(f"{what}: {len(smaller)} kernel(s) have less static shared memory than the whole-module "
                     f"builds (e.g. {k[0]}: {k[1]} bytes, whole build {k[2]})")
    return fails


def shared_differences(whole, image, relocatable=None, alone=None):
    """([(kernel, image bytes, whole bytes)] with less, [...] with more) static
    shared memory than both references: the whole build and, asked for only
    when needed, the whole module built with `ptxas -c` + nvlink (a whole
    build pads some windows differently: 48 against 44 bytes in Thrust's
    reduce kernels; nvlink gives a kernel room for the function-scope
    .shared words of helpers it does not call).

    Less is a failure (a variable the kernel may use has no room) unless
    the kernel has at least the room NVIDIA's linker gives it in the module
    reduced to that kernel (`alone`, asked for only then: whole-module
    ptxas pads the window of a kernel whose helper declares a function-scope
    .shared word to 16 bytes, 0x410 against the 0x404 that word needs, which
    a linked image does not). More is
    reported, not failed: it is what a function-scope .shared defined twice
    looks like, but also what nvlink's layout of such words across kernels
    gives, which costs room, not correctness."""
    ws, is_ = shared_sizes(whole), shared_sizes(image)
    ks = set(ws) | set(is_)
    diff = sorted(k for k in ks if ws.get(k, 0) != is_.get(k, 0))
    if diff and relocatable:
        rs = shared_sizes(relocatable())
        diff = [k for k in diff if rs.get(k, 0) != is_.get(k, 0)]
    less = [(k, is_.get(k, 0), ws.get(k, 0)) for k in diff if is_.get(k, 0) < ws.get(k, 0)]
    if less and alone:
        less = [x for x in less if x[1] < shared_sizes(alone(x[0])).get(x[0], 0)]
    more = [(k, is_.get(k, 0), ws.get(k, 0)) for k in diff if is_.get(k, 0) > ws.get(k, 0)]
    return less, more


def shared_sizes(cubin):
    """{kernel: bytes of static shared memory}: the size of the kernel's
    .nv.shared.KERNEL section (function-scope .shared variables of its
    callees included: they have no symbol of their own) above the 1 KiB
    that sm_90 images reserve at the start of every kernel's shared window
    (.nv.reservedSmem). A whole-module build gives every kernel a section
    holding that reservation; a linked image only the kernels that use
    shared memory, so only the bytes above it are compared."""
    elf = Elf(cubin)
    reserved = 1024 if any(s["name"].startswith(".nv.reservedSmem") for s in elf.symbols) else 0
    return {s["name"][len(".nv.shared."):]: max(0, s["size"] - reserved) for s in elf.sections
            if s["name"].startswith(".nv.shared.") and not s["name"].startswith(".nv.shared.reserved")}


# EIATTR numbers in .nv.info (cuobjdump -elf names them): REGCOUNT 0x2f
# (symbol, registers), FRAME_SIZE 0x11 (symbol, bytes of local memory of the
# function's own frame), MIN_STACK_SIZE 0x12 (symbol, bytes of stack the
# kernel needs with its callees, set for kernels).
EIATTR = {0x2F: "regs", 0x11: "frame", 0x12: "stack"}


def resources(cubin):
    """{kernel: {"regs": n, "frame": bytes, "stack": bytes}} for the kernels of
    an image, read from the global .nv.info section."""
    elf = Elf(cubin)
    kernels = set(elf.kernels())
    out = {k: {"regs": 0, "frame": 0, "stack": 0} for k in kernels}
    for s in elf.sections:
        if s["name"] != ".nv.info" or s["type"] == Elf.SHT_NOBITS:
            continue
        d = elf.data[s["offset"]: s["offset"] + s["size"]]
        p = 0
        while p + 4 <= len(d):
            fmt, attr, size = struct.unpack_from("<BBH", d, p)
            if fmt != 4:        # EIFMT_NVAL/BVAL/HVAL: no payload
                p += 4
                continue
            if attr in EIATTR and size == 8:
                si, v = struct.unpack_from("<II", d, p + 4)
                if si < len(elf.symbols) and elf.symbols[si]["name"] in kernels:
                    out[elf.symbols[si]["name"]][EIATTR[attr]] = v
            p += 4 + size
    return out


def local_bytes(r):
    """The larger of frame and stack; 0xFFFFFFFF when the linker could not
    bound the stack (recursion, calls through pointers)."""
    return max(r["frame"], r["stack"])


def compare_resources(whole, image, more_shared=()):
    """Per-kernel rows and a summary of image against whole; more_shared:
    the kernels with more static shared memory (shared_differences)."""
    rows, more_regs, max_extra, more_local = [], 0, 0, 0
    for k in sorted(whole):
        w, t = whole[k], image.get(k)
        if t is None:
            continue
        dr = t["regs"] - w["regs"]
        dl = local_bytes(t) - local_bytes(w)
        rows.append((k, w["regs"], t["regs"], local_bytes(w), local_bytes(t)))
        more_regs += dr > 0
        max_extra = max(max_extra, dr)
        more_local += dl > 0
    return rows, {"kernels": len(rows), "more_regs": more_regs, "max_extra_regs": max_extra,
                  "more_local": more_local, "more_shared": len(more_shared)}


def same_bytes(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def mktemp_dir(prefix, base=None):
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------
# one module through every tier

MODES = {
    "default": [],  # whole-program units (libnvJitLink is there)
    "reloc": ["--relocatable-units"],
    "unit1": ["--unit-cost", "1"],
}
TIERS = ("cold", "warm", "nomodule", "nocache")


# what TASKCACHE_TEST_CANON_MEMO=check makes a split build report
MEMO_RE = re.compile(r"canonical texts: (\d+) from the memo, (\d+) made, (\d+) of the memo's differ")


def check_module(binary, ptx, work, jobs=1, modes=MODES, tiers=None, want_resources=True):
    """Builds PTX file `ptx` whole with ptxas and with taskcache in every
    mode and tier; returns a dict:

      failures   [str]: every invariant that did not hold (empty: all held)
      split      {mode: the -v summary line of the cold build}
      notes      [str]: taskcache's notes on the cold default build
      resources  {mode: (rows, summary)} against the whole build
      skipped    str or None: why the module was not checked (ptxas rejects it)

    tiers: {mode: [tier...]} (default: every tier in every mode). Each mode
    starts from its own cold build with the cache shared by the modes (their
    keys differ), so warm and --no-module-cache builds are served from what
    that mode's cold build stored."""
    res = {"failures": [], "split": {}, "notes": [], "resources": {}, "skipped": None}
    fails = res["failures"]
    with open(ptx, "rb") as f:
        text = f.read()
    arch = arch_of(text)
    whole = os.path.join(work, "whole.cubin")
    ref = driver_text(ptx, work)
    try:
        whole_build(ref, whole, arch)
    except BuildError as e:
        res["skipped"] = str(e)
        return res
    whole_res = resources(whole) if want_resources else None
    refs = References(ref, work, arch)
    cache = os.path.join(work, "cache")
    tc = Taskcache(binary, cache, arch, jobs)
    for mode, extra in modes.items():
        wanted = (tiers or {}).get(mode, TIERS)
        cold = os.path.join(work, f"{mode}.cold.cubin")
        try:
            before = tc.stats()
            err = tc.build(ptx, cold, *extra)
            after = tc.stats()
        except BuildError as e:
            fails.append(f"{mode} cold: {e}")
            continue
        res["split"][mode] = summary_line(err)
        if mode == "default":
            res["notes"] = notes(err)
        if after["module_misses"] != before["module_misses"] + 1:
            fails.append(f"{mode} cold: not a module miss on an empty cache")
        try:
            fails += symbol_failures(whole, cold, mode, refs.relocatable, refs.alone)
        except BuildError as e:
            fails.append(f"{mode}: the relocatable reference build failed: {e}")
        if want_resources and mode in ("default", "reloc"):
            try:
                more = shared_differences(whole, cold, refs.relocatable, refs.alone)[1]
            except BuildError:
                more = []
            res["resources"][mode] = compare_resources(whole_res, resources(cold), more)
        whole_fallback = "whole module" in res["split"][mode]
        for tier in wanted:
            if tier == "cold":
                continue
            out = os.path.join(work, f"{mode}.{tier}.cubin")
            try:
                before = tc.stats()
                if tier == "warm":
                    tc.build(ptx, out, *extra)
                elif tier == "nomodule":
                    # every canonical text the memo of the cold build holds
                    # is made again and compared (pipeline/canon_memo.h)
                    log = tc.build(ptx, out, "--no-module-cache", *extra,
                                   env={"TASKCACHE_TEST_CANON_MEMO": "check"})
                    memo = MEMO_RE.search(log)
                    if not whole_fallback and not memo:
                        fails.append(f"{mode} --no-module-cache: no canonical text memo report")
                    elif memo and (int(memo.group(2)) or int(memo.group(3))):
                        fails.append(f"{mode} --no-module-cache: of the canonical texts "
                                     f"{memo.group(2)} were made again, not taken from the "
                                     f"memo, and {memo.group(3)} of the memo's differ")
                else:
                    tc.build(ptx, out, *extra, cache=False)
                after = tc.stats()
            except BuildError as e:
                fails.append(f"{mode} {tier}: {e}")
                continue
            if not same_bytes(cold, out):
                fails.append(f"{mode} {tier}: image differs from the cold build")
            if tier == "warm" and (after["module_hits"] != before["module_hits"] + 1 or
                                   after["compiles"] != before["compiles"]):
                fails.append(f"{mode} warm: not served by the module record")
            if tier == "nomodule" and not whole_fallback and after["compiles"] != before["compiles"]:
                fails.append(f"{mode} --no-module-cache: {after['compiles'] - before['compiles']} "
                             "units compiled again instead of read from their records")
    return res


# --------------------------------------------------------------------------
# edits

COMPILED_RE = re.compile(r" kernels in \d+ units: \d+ from cache, (\d+) compiled")


def edited_module(text):
    """The module with one immediate operand made one larger in its first
    kernel that has one and in its first helper .func that has one (a
    helper's text is copied into the unit of every kernel that calls it),
    and the names of the two (None where there was none); (None, None,
    None) when nothing could be edited."""
    items = ptxitems.split(text)
    names = {"entry": None, "func": None}
    for i, it in enumerate(items):
        if it.kind in names and names[it.kind] is None and it.is_definition:
            sites = ptxitems.immediate_sites(it.text)
            if sites:
                items[i] = ptxitems.Item(ptxitems.bumped(it.text, sites[0])[0])
                names[it.kind] = it.name
    if not names["entry"] and not names["func"]:
        return None, None, None
    return ptxitems.join(items), names["entry"], names["func"]


def edit_failures(binary, base, edited, work, arch, modes, jobs=1, cache=None, cold_images=False,
                  one_unit=()):
    """An edit as a user makes it: in each mode the edited module built with
    a cache that holds the base module's build must give the edited
    module's cold image; a unit whose key missed what the edit changed
    would be served with the base module's code. `cache`: a cache the base
    was built into in every mode already (else a fresh one per mode, and
    the base is built first). `cold_images`: work holds the edited module's
    cold image of each mode as MODE.cold.cubin (else a --no-cache build
    makes it). `one_unit`: modes in which the edit may compile one unit at
    most (or the module whole)."""
    fails = []
    for mode, extra in modes.items():
        tc = Taskcache(binary, cache or os.path.join(work, f"edit-cache-{mode}"), arch, jobs)
        if not cache:
            try:
                tc.build(base, os.path.join(work, f"{mode}.base.cubin"), *extra)
            except BuildError:
                continue  # the base module alone is not what is under test
        cold = os.path.join(work, f"{mode}.cold.cubin")
        if not cold_images:
            cold = os.path.join(work, f"{mode}.edited-cold.cubin")
            try:
                tc.build(edited, cold, *extra, cache=False)
            except BuildError:
                continue  # an edit the compiler rejects is no edit to check
        if not os.path.exists(cold):
            continue
        out = os.path.join(work, f"{mode}.edit.cubin")
        try:
            err = tc.build(edited, out, *extra)
        except BuildError as e:
            fails.append(f"{mode} edit: after the unedited module, {e}")
            continue
        if not same_bytes(cold, out):
            fails.append(f"{mode} edit: built after the unedited module, the image differs from the "
                         "cold build (old code served)")
        compiled = COMPILED_RE.search(summary_line(err))
        # at most one: an earlier mode may have compiled the same unit
        if mode in one_unit and compiled and int(compiled.group(1)) > 1:
            fails.append(f"{mode} edit: {compiled.group(1)} units compiled for an edit of one kernel")
    return fails
