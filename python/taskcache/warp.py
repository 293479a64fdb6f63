"""taskcache.warp: per-kernel caching of NVIDIA Warp's CUDA modules.

Stock Warp compiles each Python module's kernels as one CUDA source in one
NVRTC call: editing one kernel recompiles the module, and a cold start
compiles module after module on one core. With taskcache.warp, each kernel
is a task of taskcache's task API, keyed before codegen by Warp's own
kernel hash, the module's options, the target and the versions of Warp and
its NVRTC:

    import taskcache.warp
    taskcache.warp.enable()            # before the first launch

- only the kernels the cache lacks are generated (Warp's own code
  generator, one kernel at a time) and compiled (Warp's own NVRTC, in
  worker processes, all at once), then compiled for the GPU and linked into
  one cubin by taskcache;
- an unchanged module is one record read (a group manifest keyed by Warp's
  module hash), also on another machine through taskcache's remote tier;
- Warp then loads that cubin through its own path: its cache directory,
  its file names, its .meta, its symbol names. Graphs, launches, adjoints
  see no difference.

It needs a PTX compiler at least as new as Warp's NVRTC (warp-lang 1.19
ships NVRTC 13.4; a CUDA 13.0 ptxas refuses its PTX): NVIDIA's wheels,
`pip install --no-deps nvidia-cuda-nvcc==13.4.* nvidia-nvjitlink==13.4.*`,
or $TASKCACHE_PTXAS. Where it has none, and for anything it does not handle
(the CPU, Warp versions other than SUPPORTED, PTX output, debug mode,
wp.config.llvm_cuda, MathDx link inputs, extra include directories, any
error inside), that module is built by stock Warp and one line says why
(TASKCACHE_LOG=/dev/stderr or enable(verbose=True)). A program never fails
because of taskcache.

Without editing the program: TASKCACHE_WARP=1 in the environment (a path
configuration file the package installs switches Warp over when it is
imported), or `taskcache run -- python3 prog.py`, which sets it.
"""

import hashlib
import json
import os
import queue
import re
import shutil
import struct
import subprocess
import sys
import threading
import time

import taskcache

__all__ = ["enable", "disable", "enabled", "SUPPORTED"]

# Warp releases whose internals this adapter was written against and is
# tested with (tests/python/test_warp.py pins them). Others run stock.
SUPPORTED = ("1.18.", "1.19.")

# Part of every key: a change to how this adapter builds a kernel's source,
# its PTX or its records bumps it.
FORMAT = "taskcache.warp 1"

_lock = threading.Lock()
_on = None          # the _Integration while enabled
_pending = threading.local()  # Module._compile's module and options, for build_cuda


def enabled() -> bool:
    return _on is not None


def enable(cache_dir=None, *, remote=None, jobs=None, verbose=None) -> bool:
    """Routes every later CUDA module build of Warp (Module.load, which
    wp.launch triggers, and wp.compile_aot_module) through taskcache.
    cache_dir: taskcache's cache (default: $TASKCACHE_DIR, else
    ~/.cache/taskcache); remote: a remote spec as `taskcache help remote`
    describes (default: $TASKCACHE_REMOTE or taskcache.conf); jobs: compile
    processes at once (default: every CPU); verbose: one line per module
    on standard error (default: $TASKCACHE_LOG names where lines go).
    Returns True when Warp was switched over, False when this Warp is not
    one the adapter supports (it then says why and changes nothing)."""
    global _on
    with _lock:
        if _on is not None:
            return True
        import warp
        version = getattr(warp.config, "version", "?")
        if not version.startswith(SUPPORTED):
            _say(verbose, f"warp {version} is not one of the versions taskcache.warp supports "
                          f"({', '.join(v + 'x' for v in SUPPORTED)}): stock Warp")
            return False
        _on = _Integration(version, cache_dir, remote, jobs, verbose)
        _on.install()
        return True


def disable():
    """Restores stock Warp (modules already loaded stay loaded)."""
    global _on
    with _lock:
        if _on is not None:
            _on.uninstall()
            _on = None


def _say(verbose, line):
    path = os.environ.get("TASKCACHE_LOG")
    if verbose or (verbose is None and path in ("/dev/stderr", "-")):
        print(f"taskcache.warp: {line}", file=sys.stderr, flush=True)
    elif verbose is None and path:
        try:
            with open(path, "a") as f:
                f.write(f"taskcache.warp[{os.getpid()}]: {line}\n")
        except OSError:
            pass


class _StepAside(Exception):
    """This module is stock Warp's to build; the message says why."""


# ---- the integration ----------------------------------------------------------------

class _Integration:
    def __init__(self, version, cache_dir, remote, jobs, verbose):
        import warp._src.build as build
        import warp._src.context as context
        self.warp_version = version
        self.context, self.build = context, build
        self.cache_dir, self.remote = cache_dir, remote
        self.jobs = jobs or os.cpu_count() or 1
        self.verbose = verbose
        self.cache = None
        self.toolchain = None    # (ptxas, its release, NVRTC's) once found; a str: why none
        self.workers = None
        self.said = set()
        self.setup_lock = threading.Lock()

    # -- patching ------------------------------------------------------------------------

    def install(self):
        Module = self.context.Module
        self.original_codegen = Module._run_codegen
        self.original_build_cuda = self.build.build_cuda
        integration = self

        def _run_codegen(module, options, is_cpu):
            result = integration.original_codegen(module, options, is_cpu)
            # the whole module's codegen stays Warp's: its source file and
            # .meta are what Warp writes; the build below is ours
            _pending.job = None if is_cpu else (module, options, result)
            return result

        def build_cuda(cu_path, arch, output_path, **kwargs):
            job, _pending.job = getattr(_pending, "job", None), None
            if job is not None and integration.build_module(job, arch, output_path, kwargs):
                return None
            return integration.original_build_cuda(cu_path, arch, output_path, **kwargs)

        _run_codegen.__wrapped__ = self.original_codegen
        build_cuda.__wrapped__ = self.original_build_cuda
        Module._run_codegen = _run_codegen
        self.build.build_cuda = build_cuda

    def uninstall(self):
        self.context.Module._run_codegen = self.original_codegen
        self.build.build_cuda = self.original_build_cuda
        if self.workers is not None:
            self.workers.close()
        if self.cache is not None:
            self.cache.close()

    def say_once(self, why):
        if why not in self.said:
            self.said.add(why)
            _say(self.verbose, why)

    # -- one module ----------------------------------------------------------------------

    def build_module(self, job, arch, output_path, kwargs) -> bool:
        """Builds the module into output_path; False (having said why) when
        stock Warp must."""
        module, options, (source, _ext, meta, ltoirs, fatbins) = job
        name = os.path.basename(output_path)
        try:
            plan = self.plan(module, options, arch, output_path, kwargs, ltoirs, fatbins)
            t0 = time.perf_counter()
            result = self.run(plan, module, options)
            image = self.check(result, meta)
            with open(output_path, "wb") as f:
                f.write(image)
            r = result.report
            _say(self.verbose,
                 f"{name}: {len(plan.kernels)} kernels: "
                 + ("module record hit" if r.group_hit else
                    f"{r.codegen_calls} generated and compiled, "
                    f"{len(plan.kernels) - r.codegen_calls} from cache")
                 + f", {time.perf_counter() - t0:.3f} s ({result.compiler})"
                 + (f"; slowest: {result.slowest}" if result.slowest else ""))
            return True
        except _StepAside as e:
            self.say_once(f"{name}: stock Warp builds it: {e}")
        except Exception as e:  # never the program's failure: stock Warp builds it
            self.say_once(f"{name}: stock Warp builds it: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}")
        return False

    def plan(self, module, options, arch, output_path, kw, ltoirs, fatbins):
        why = (not output_path.endswith(".cubin") and "Warp emits PTX for this device (the "
               "driver compiles it); taskcache builds cubins"
               or kw.get("llvm_cuda") and "wp.config.llvm_cuda (clang compiles)"
               or (ltoirs or fatbins) and "MathDx link inputs (tile operations)"
               or kw.get("config") == "debug" and "debug mode"
               or kw.get("compile_time_trace") and "compile_time_trace"
               or kw.get("extra_include_dirs") and "extra CUDA include directories (their "
               "headers are not in Warp's hashes)"
               or arch != options.get("output_arch") and "an architecture other than the "
               "options'")
        if why:
            raise _StepAside(why)
        ptxas, _release, nvrtc = self.ensure_toolchain()
        hasher = module.hashers.get(options["block_dim"])
        kernels = list(hasher.get_unique_kernels()) if hasher is not None else []
        if not kernels:
            raise _StepAside("no kernels")
        suffix = kw.get("arch_suffix") or ""
        flags = {"arch": arch, "arch_suffix": suffix, "debug": False,
                 "optimization_level": kw.get("optimization_level", 3),
                 "verify_fp": bool(kw.get("verify_fp")), "fast_math": bool(kw.get("fast_math")),
                 "fuse_fp": bool(kw.get("fuse_fp", True)), "lineinfo": bool(kw.get("lineinfo")),
                 "precompiled_headers": bool(kw.get("use_precompiled_headers", True))}
        identity = json.dumps([FORMAT, self.warp_version, nvrtc, flags, options],
                              sort_keys=True, default=repr)
        return _Plan(kernels, hasher, flags, identity, f"sm_{arch}{suffix}", ptxas,
                     self.include_dir(), kw.get("pch_dir"))

    def run(self, plan, module, options):
        """The module from its group manifest, else from per-kernel tasks."""
        cache = self.open_cache()
        topts = taskcache.Options(arch=plan.target, ptxas=plan.ptxas, jobs=self.jobs)
        version = f"{FORMAT}; warp {self.warp_version}"
        hashes = [plan.hasher.kernel_hashes[k] for k in plan.kernels]
        digest = hashlib.sha256(plan.identity.encode())
        for h in sorted(hashes):
            digest.update(h)
        group_key = digest.digest()
        hit = cache.lookup_group(group_key, topts, version=version)
        if hit is not None:
            return hit
        tasks = [taskcache.Task(kernel.get_mangled_name(kernel_hash=h),
                                hashlib.sha256(plan.identity.encode() + h).digest())
                 for kernel, h in zip(plan.kernels, hashes)]
        no_output_arch = {k: v for k, v in options.items() if k != "output_arch"}
        target = {"target": "cuda"} if _builder_takes_target(self.context) else {}
        # A worker process costs its start and a precompiled header of its
        # own (0.4 s): a module of one or two kernels compiles here, on the
        # build's threads, as Warp would, and caches the same records.
        compile_ptx = self.compile_here if len(plan.kernels) <= 2 else self.ensure_workers().compile

        def codegen(index, task):
            kernel = plan.kernels[index]
            # Warp's code generator, for this kernel alone (and the functions
            # it calls); its adjoint state is shared, hence Warp's lock
            with self.context._codegen_lock:
                hasher = self.context.ModuleHasher([kernel], no_output_arch)
                builder = self.context.ModuleBuilder(module, options, hasher=hasher, **target)
                source = builder.codegen("cuda")
                meta = builder.build_meta()
                ltoirs, fatbins = builder.get_link_inputs()
            if ltoirs or fatbins:
                raise RuntimeError("MathDx link inputs")
            header = dict(plan.flags, name=f"{task.name}.cu", include_dir=plan.include_dir,
                          include_dirs=[], pch_dir=plan.pch_dir)
            ptx = drop_unused_module_data(compile_ptx(header, source.encode()).rstrip(b"\0"))
            shared = shared_module_variables(ptx)
            if shared:
                raise RuntimeError(f"kernel {task.name} uses module-scope variables "
                                   f"({', '.join(shared[:3])}) that Warp's module holds once for "
                                   f"all its kernels")
            return ptx, json.dumps(meta, sort_keys=True).encode()

        return cache.build_tasks(tasks, codegen, topts, version=version, group_key=group_key)

    @staticmethod
    def check(result, meta):
        """The image, when it is the module Warp described: the same .meta
        (each kernel's shared memory) and every kernel it names present."""
        merged = {}
        for t in result.tasks:
            merged.update(json.loads(t.metadata or b"{}"))
        if merged != meta:
            raise _StepAside("the kernels' metadata differ from Warp's .meta")
        entries = {e.name for e in result.entries}
        missing = [k[:-len("_smem_bytes")] for k in meta
                   if k.endswith("_smem_bytes") and k[:-len("_smem_bytes")] not in entries]
        if missing or result.image is None:
            raise _StepAside(f"kernels missing from the image: {missing[:3]}")
        return result.image

    # -- what a build needs, made once -----------------------------------------------------

    def open_cache(self):
        with self.setup_lock:
            if self.cache is None:
                self.cache = taskcache.Cache(self.cache_dir)
                if self.remote:
                    self.cache.set_remote(self.remote)
            return self.cache

    def include_dir(self):
        return os.path.join(self.build.warp_home, "native")

    def ensure_toolchain(self):
        with self.setup_lock:
            if self.toolchain is None:
                self.toolchain = self.find_toolchain()
            if isinstance(self.toolchain, str):
                raise _StepAside(self.toolchain)
            return self.toolchain

    def find_toolchain(self):
        """A ptxas at least as new as Warp's NVRTC, or why there is none."""
        core = self.context.runtime.core
        declared = [t.__name__ for t in core.wp_cuda_compile_program.argtypes]
        from taskcache import _nvrtc_worker
        if declared != [t.__name__ for t in _nvrtc_worker.ARGTYPES]:
            return "this Warp's wp_cuda_compile_program takes other arguments"
        v = int(core.wp_nvrtc_version())
        nvrtc = (v // 1000, v % 1000 // 10)
        seen = []
        for path in ptxas_candidates(nvrtc[0]):
            release = ptxas_release(path)
            if release is None:
                continue
            seen.append(f"{path} ({'.'.join(map(str, release))})")
            if release[:2] >= nvrtc:
                return path, release, "%d.%d" % nvrtc
        return (f"no ptxas as new as Warp's NVRTC {nvrtc[0]}.{nvrtc[1]} (found: "
                f"{', '.join(seen) or 'none'}); pip install --no-deps "
                f"'nvidia-cuda-nvcc=={nvrtc[0]}.{nvrtc[1]}.*' "
                f"'nvidia-nvjitlink=={nvrtc[0]}.{nvrtc[1]}.*', or set TASKCACHE_PTXAS")

    def compile_here(self, header, source):
        """NVRTC in this process: what a worker does (_nvrtc_worker), with
        Warp's own handle on its library."""
        import tempfile
        from taskcache import _nvrtc_worker
        with tempfile.TemporaryDirectory(prefix="taskcache-nvrtc-") as d:
            out = os.path.join(d, "kernel.ptx")
            rc = _nvrtc_worker.compile_program(self.context.runtime.core.wp_cuda_compile_program,
                                               header, source, out)
            if rc != 0:
                raise RuntimeError(f"NVRTC failed ({rc})")
            with open(out, "rb") as f:
                return f.read()

    def ensure_workers(self):
        with self.setup_lock:
            if self.workers is None:
                self.workers = _Workers(self.context.runtime.core._name, self.jobs)
            return self.workers


class _Plan:
    def __init__(self, kernels, hasher, flags, identity, target, ptxas, include_dir, pch_dir):
        self.kernels, self.hasher, self.flags, self.identity = kernels, hasher, flags, identity
        self.target, self.ptxas, self.include_dir, self.pch_dir = target, ptxas, include_dir, pch_dir


# A module-scope variable of internal linkage, declared on one line:
# ".const .align 4 .b8 pnanovdb_dither_lut[2048] = {...};"
_INTERNAL_DATA = re.compile(
    rb"^\.(?:global|const)\s[^\n;=]*?([A-Za-z_$%][\w$%]*)(?:\[\d*\])*\s*(?:=[^\n]*)?;[ \t]*\n",
    re.M)
_NAME = re.compile(rb"[A-Za-z_$%][\w$%]*")


def drop_unused_module_data(ptx: bytes) -> bytes:
    """The PTX without the internal module-scope variables nothing names.
    Warp's builtin.h gives every kernel's PTX the same 5.7 KB of constant
    tables (NanoVDB's) and about 40 globals whether it uses them or not; a
    whole-module compile holds one copy, but a linked image of per-kernel
    objects one per kernel, and past 11 kernels the 64 KB constant bank
    overflows. Internal variables that no other line names cannot be
    reached, so dropping them changes no kernel's code."""
    uses = {}
    for name in _NAME.findall(ptx):
        uses[name] = uses.get(name, 0) + 1
    return _INTERNAL_DATA.sub(lambda m: m.group(0) if uses[m.group(1)] > 1 else b"", ptx)


def shared_module_variables(ptx: bytes) -> list:
    """The internal module-scope .global variables a kernel's PTX still
    declares, but for string literals ($str, __unnamed_: the compiler's
    read-only constants). Stock Warp's module holds one of each for all its
    kernels, so what one kernel stores another reads; a per-kernel build
    would give each kernel its own. Such a module stays stock Warp's."""
    names = []
    for m in _INTERNAL_DATA.finditer(ptx):
        name = m.group(1).decode(errors="replace")
        if m.group(0).startswith(b".global") and not name.startswith(("$str", "__unnamed_")):
            names.append(name)
    return names


def _builder_takes_target(context):
    import inspect
    return "target" in inspect.signature(context.ModuleBuilder.__init__).parameters


def ptxas_candidates(major):
    """$TASKCACHE_PTXAS, NVIDIA's nvidia-cuda-nvcc wheel on sys.path,
    $CUDA_HOME, the toolkit's default place, $PATH."""
    seen = []
    named = os.environ.get("TASKCACHE_PTXAS")
    cands = [named] if named else []
    cands += [os.path.join(d, "nvidia", f"cu{major}", "bin", "ptxas") for d in sys.path if d]
    cands += [os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "bin", "ptxas"),
              shutil.which("ptxas")]
    for c in cands:
        if c and c not in seen and os.access(c, os.X_OK):
            seen.append(c)
            yield c


def ptxas_release(path):
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
        v = out.split(", V")[1].split()[0]
        return tuple(int(x) for x in v.split("."))
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return None


# ---- NVRTC in worker processes ----------------------------------------------------------

class _Workers:
    """Up to n worker processes (taskcache/_nvrtc_worker.py), started as
    compiles need them and kept for the process's life: NVRTC keeps its
    precompiled header in their memory."""

    def __init__(self, library, n):
        self.library, self.n = library, n
        self.idle = queue.Queue()
        self.started = 0
        self.lock = threading.Lock()
        self.all = []

    def take(self):
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            pass
        with self.lock:
            if self.started < self.n:
                self.started += 1
                script = os.path.join(os.path.dirname(__file__), "_nvrtc_worker.py")
                p = subprocess.Popen([sys.executable, "-I", "-S", script, self.library],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                self.all.append(p)
                return p
        return self.idle.get()

    def compile(self, header, source):
        p = self.take()
        try:
            h = json.dumps(header).encode()
            p.stdin.write(struct.pack(">II", len(h), len(source)) + h + source)
            p.stdin.flush()
            head = p.stdout.read(5)
            if len(head) != 5:
                raise RuntimeError("an NVRTC worker ended")
            status, n = struct.unpack(">BI", head)
            data = p.stdout.read(n)
        except BaseException:
            p.kill()
            with self.lock:
                self.started -= 1
            raise
        self.idle.put(p)
        if status != 0:
            raise RuntimeError(data.decode(errors="replace"))
        return data

    def close(self):
        for p in self.all:
            try:
                p.stdin.close()
                p.wait(timeout=5)
            except Exception:
                p.kill()
