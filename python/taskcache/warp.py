"""taskcache.warp: per-kernel caching of NVIDIA Warp's CUDA modules.

Stock Warp compiles each Python module's kernels as one CUDA source in one
NVRTC call: editing one kernel recompiles the module, and a cold start
compiles module after module on one core. With taskcache.warp, a module's
kernels are tasks of taskcache's task API (a heavy kernel alone, light
ones a few to a unit: see units()), keyed before codegen by Warp's own
kernel hashes, the module's options, the target and the versions of Warp
and its NVRTC:

    import taskcache.warp
    taskcache.warp.enable()            # before the first launch

- only the units the cache lacks are generated (Warp's own code
  generator) and compiled (Warp's own NVRTC, here and in worker processes,
  all at once), then compiled for the GPU and linked into one cubin by
  taskcache;
- an unchanged module is one record read (a group manifest keyed by Warp's
  module hash), also on another machine through taskcache's remote tier;
- where a launch loads a module, Warp's code generator does not run on the
  whole module: an unchanged one needs none, an edited one only its
  edited units';
- Warp then loads that cubin through its own path: its cache directory,
  its file names, its .meta, its symbol names. Graphs, launches, adjoints
  see no difference; only a module built before Warp's codegen has no .cu
  in Warp's cache (wp.capture_save(..., source_fallback=True) says its
  source is missing).

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

import atexit
import collections
import hashlib
import json
import os
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
FORMAT = "taskcache.warp 5"

_lock = threading.Lock()
_on = None          # the _Integration while enabled
_pending = threading.local()  # Module._compile's module and options, for build_cuda


def enabled() -> bool:
    return _on is not None


def enable(cache_dir=None, *, remote=None, jobs=None, verbose=None, ahead=None) -> bool:
    """Routes every later CUDA module build of Warp (Module.load, which
    wp.launch triggers, and wp.compile_aot_module) through taskcache.
    cache_dir: taskcache's cache (default: $TASKCACHE_DIR, else
    ~/.cache/taskcache); remote: a remote spec as `taskcache help remote`
    describes (default: $TASKCACHE_REMOTE or taskcache.conf); jobs: compile
    processes at once (default: every CPU); verbose: one line per module
    on standard error (default: $TASKCACHE_LOG names where lines go);
    ahead: modules built at once ahead of their launch, from the program's
    last load order (default: $TASKCACHE_WARP_AHEAD, else a quarter of
    jobs; 0: none; see _Ahead).
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
        _on = _Integration(version, cache_dir, remote, jobs, verbose, ahead)
        _on.install()
        return True


def disable():
    """Restores stock Warp (modules already loaded stay loaded)."""
    global _on
    with _lock:
        if _on is not None:
            _on.uninstall()
            _on = None


def _forked_child():
    """One handler for every enable(): a forked child has the thread that
    forked only, and the parent's worker processes are the parent's."""
    if _on is not None:
        _on.forked()


os.register_at_fork(after_in_child=_forked_child)


def _say(verbose, line):
    path = os.environ.get("TASKCACHE_LOG")
    if verbose or (verbose is None and path in ("/dev/stderr", "-")):
        # one write per line: builds ahead say theirs from other threads
        if sys.stderr is not None:
            sys.stderr.write(f"taskcache.warp: {line}\n")
            sys.stderr.flush()
    elif verbose is None and path:
        try:
            with open(path, "a") as f:
                f.write(f"taskcache.warp[{os.getpid()}]: {line}\n")
        except OSError:
            pass


class _StepAside(Exception):
    """This module is stock Warp's to build; the message says why."""


_STOCK = object()  # build_before_codegen: stock Warp builds this module (said why)

# What Module._compile's codegen step leaves for build_cuda: Warp's codegen
# result (source, ext, meta, ltoirs, fatbins) and the hasher it read, or
# what build_before_codegen built (identity, result, meta, log words).
_Job = collections.namedtuple("_Job", "module options generated hasher built")


# A cubin's name as Warp gives it: wp_<module>_<hash>.sm<arch><suffix>.cubin
_CUBIN_NAME = re.compile(r"\.sm(\d+)([a-z]?)\.cubin$")


def _owned(lock) -> bool:
    """Whether this thread holds the (re-entrant) lock."""
    owned = getattr(lock, "_is_owned", None)
    return bool(owned and owned())


# ---- the integration ----------------------------------------------------------------

class _Integration:
    def __init__(self, version, cache_dir, remote, jobs, verbose, ahead):
        import warp._src.build as build
        import warp._src.context as context
        self.warp_version = version
        self.context, self.build = context, build
        import warp
        self.warp_config = warp.config
        self.cache_dir, self.remote = cache_dir, remote
        self.jobs = jobs or os.cpu_count() or 1
        if ahead is None:
            named = os.environ.get("TASKCACHE_WARP_AHEAD", "")
            ahead = int(named) if named.isdigit() else self.jobs // 4
        self.verbose = verbose
        self.cache = None
        self.toolchain = None    # (ptxas, its release, NVRTC's) once found; a str: why none
        self.workers = None
        self.said = set()
        self.setup_lock = threading.Lock()
        self.here = threading.Lock()   # the one NVRTC call that runs in this process
        self.ahead = _Ahead(self, ahead)

    def forked(self):
        """A forked child starts workers of its own: the parent's pipes
        are the parent's (two processes on one worker would read each
        other's answers), and so are the locks. It builds nothing ahead."""
        self.setup_lock, self.here = threading.Lock(), threading.Lock()
        self.workers = None
        self.ahead.forked()

    def end_workers(self):
        """At exit: the worker processes end now, those still warming up
        included. What they hold (NVRTC's precompiled header) is kept in
        their memory only, and a worker left running would hold the
        program's standard error open after it exits (a pipe's reader, a
        shell's `|`, would wait for it)."""
        if self.workers is not None:
            self.workers.kill()

    # -- patching ------------------------------------------------------------------------

    def install(self):
        Module = self.context.Module
        self.original_compile = Module._compile
        self.original_codegen = Module._run_codegen
        self.original_build_cuda = self.build.build_cuda
        integration = self
        import inspect
        compile_signature = inspect.signature(self.original_compile)

        def _compile(module, *args, **kwargs):
            # the output's name, where the caller gives it (Module.load
            # does; AOT builds name it inside): a cubin's name holds the
            # architecture's suffix, which the codegen window below needs
            try:
                bound = compile_signature.bind(module, *args, **kwargs).arguments
            except TypeError:
                bound = {}
            _pending.output_name = bound.get("output_name")
            # a load's build (Module.load names the output; an AOT build
            # does not) on a CUDA device: part of the program's load order
            device = bound.get("device")
            _pending.load = None
            try:
                if _pending.output_name and getattr(device, "is_cuda", device is None):
                    _pending.load = (module.name,
                                     (bound.get("options") or module.options)["block_dim"])
                    integration.ahead.loaded(*_pending.load, module)
                    # (not inside Warp's codegen: a build ahead would wait for it)
                    if not _owned(integration.context._codegen_lock):
                        integration.ahead.reached(*_pending.load)
            except Exception:  # the load order is a help, never the program's failure
                pass
            try:
                return integration.original_compile(module, *args, **kwargs)
            finally:
                # a build that failed between codegen and build_cuda leaves
                # no job behind for the next module's build_cuda
                _pending.output_name = _pending.job = _pending.load = None

        def _run_codegen(module, options, is_cpu):
            load = getattr(_pending, "load", None)
            cubin = load and not is_cpu and _CUBIN_NAME.search(_pending.output_name)
            if cubin:
                # a launch waits for this build: the modules after it in the
                # program's last run build ahead
                try:
                    integration.ahead.missed(module, load[1], options.get("output_arch"),
                                             cubin.group(2))
                except Exception as e:  # modules then build as launches reach them
                    integration.say_once(f"no module builds ahead: {type(e).__name__}: {e}")
            built = None if is_cpu else integration.build_before_codegen(
                module, options, getattr(_pending, "output_name", None))
            if built is _STOCK:  # it failed and said why: Warp's own codegen and build
                _pending.job = None
                return integration.original_codegen(module, options, is_cpu)
            if built is not None:
                # no codegen of the whole module; build_cuda below writes
                # the image
                _pending.job = _Job(module, options, None, None, built)
                return (f"// {FORMAT}: built by taskcache from Warp's kernels one unit at a "
                        f"time; Warp's code generator did not run on the module (removed "
                        f"after the build)\n", "cu", built[2], [], [])
            # the hasher Warp's codegen reads: a module of one unit compiles
            # that source only if the build below keys it by the same one
            hasher = module.hashers.get(options.get("block_dim"))
            result = integration.original_codegen(module, options, is_cpu)
            # the whole module's codegen stays Warp's: its source file and
            # .meta are what Warp writes; the build below is ours
            _pending.job = None if is_cpu else _Job(module, options, result, hasher, None)
            return result

        def build_cuda(cu_path, arch, output_path, **kwargs):
            job, _pending.job = getattr(_pending, "job", None), None
            if job is not None and job.built is not None:
                job = integration.use_built_module(job, cu_path, arch, output_path, kwargs)
                if job is None:
                    return None
            if job is not None and integration.build_module(job, arch, output_path, kwargs):
                return None
            return integration.original_build_cuda(cu_path, arch, output_path, **kwargs)

        _compile.__wrapped__ = self.original_compile
        _run_codegen.__wrapped__ = self.original_codegen
        build_cuda.__wrapped__ = self.original_build_cuda
        Module._compile = _compile
        Module._run_codegen = _run_codegen
        self.build.build_cuda = build_cuda
        atexit.register(self.end_workers)
        atexit.register(self.ahead.close)  # (first: builds ahead end before the workers)

    def uninstall(self):
        self.context.Module._compile = self.original_compile
        self.context.Module._run_codegen = self.original_codegen
        self.build.build_cuda = self.original_build_cuda
        atexit.unregister(self.ahead.close)
        atexit.unregister(self.end_workers)
        self.ahead.close()
        if self.workers is not None:
            self.workers.close()
        if self.cache is not None:
            self.cache.close()

    def say_once(self, why):
        if why not in self.said:
            self.said.add(why)
            _say(self.verbose, why)

    def leave_to_stock(self, name, e):
        """Says (once) why stock Warp builds this module: a _StepAside's
        reason, else the error's first line."""
        why = str(e) if isinstance(e, _StepAside) else (
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        self.say_once(f"{name}: stock Warp builds it: {why}")

    # -- a module that a launch loads: built before Warp's codegen -----------------------

    def build_before_codegen(self, module, options, output_name):
        """(identity, result, meta, words for the log) of this module built
        for the cubin output_name names, with the options Warp's build will
        get, from its record or from its units: Warp's code generator then
        does not run on the whole module (an unchanged module costs one
        record read; an edit, the edited units' codegen). None where
        Warp's codegen must run first; _STOCK when the build failed (having
        said why), for stock Warp."""
        m = _CUBIN_NAME.search(output_name or "")
        if not m or options.get("output_arch") != int(m.group(1)):
            return None
        # Warp's deterministic mode launches with data that building the
        # kernels leaves on each one (Module.load rebuilds it only when
        # _compile did not compile). A record hit has use_built_module
        # rebuild it with Warp's own method, as a stock load from Warp's
        # cache does; a miss runs Warp's codegen first, which builds it
        # anyway (a rebuild costs what codegen does)
        det = options.get("deterministic")
        modes = getattr(self.warp_config, "DeterministicMode", None)
        launch_data = bool(det) and not (modes is not None and det == modes.NOT_GUARANTEED)
        if launch_data and not hasattr(module, "_snapshot_deterministic_metadata"):
            return None
        # the array access checks read what codegen marks (Warp builds every
        # time then): codegen runs first
        if options.get("verify_autograd_array_access"):
            return None
        t0 = time.perf_counter()
        try:
            kw = self.predicted_build_arguments(options, m.group(2))
            plan = self.plan(module, options, options["output_arch"], output_name, kw, (), ())
        except Exception:
            # anything unusual (a load inside Warp's codegen on this thread,
            # which plan() refuses): Warp's codegen, then the usual path
            return None
        try:
            result = self.open_cache().lookup_group(plan.group_key, plan.options,
                                                    version=plan.version)
            hit = result is not None
            if not hit:
                if launch_data:
                    return None
                result = self.build_units(plan, module, options, None)
            meta = recorded_meta(result)
            self.check(result, meta, plan)
            words = "module record hit, no codegen" if hit else (
                f"{self.summary(plan, result)}, built before Warp's codegen, which did not run")
            return plan.identity, result, meta, (
                f"{words}, {time.perf_counter() - t0:.3f} s" + self.compiled(result))
        except Exception as e:  # never the program's failure: stock Warp builds it
            self.leave_to_stock(output_name, e)
        return _STOCK

    def predicted_build_arguments(self, options, suffix):
        """What Module._compile passes build_cuda, from the options alone.
        A guess: build_cuda compares it with what it gets."""
        opt = options.get("optimization_level")
        return {"config": options.get("mode"), "optimization_level": 3 if opt is None else opt,
                "verify_fp": options.get("verify_fp"), "fast_math": options.get("fast_math"),
                "fuse_fp": options.get("fuse_fp"), "lineinfo": options.get("lineinfo"),
                "compile_time_trace": options.get("compile_time_trace"),
                "arch_suffix": suffix, "pch_dir": self.context.runtime.get_nvrtc_pch_dir(),
                "llvm_cuda": options.get("llvm_cuda"),
                "use_precompiled_headers": options.get("use_precompiled_headers"),
                "extra_include_dirs": options.get("extra_cuda_include_dirs")}

    def use_built_module(self, job, cu_path, arch, output_path, kwargs):
        """Writes the image built before codegen when build_cuda got what
        it was built for (None: done); else runs Warp's codegen now, as it
        would have, and returns the job to build."""
        module, options = job.module, job.options
        identity, result, meta, words = job.built
        name = os.path.basename(output_path)
        try:
            plan = self.plan(module, options, arch, output_path, kwargs, (), ())
            if plan.identity == identity:
                self.rebuild_launch_data(module, options)
                with open(output_path, "wb") as f:
                    f.write(result.image)
                # no source file: Warp's cache then has none for this module
                # (its graph capture says the source is missing) rather than
                # one without kernels
                os.unlink(cu_path)
                _say(self.verbose, f"{name}: {len(plan.kernels)} kernels: {words}")
                return None
        except Exception:
            pass
        generated = self.original_codegen(module, options, False)
        with open(cu_path, "w", encoding="utf-8") as f:
            f.write(generated[0])
        meta.clear()  # the dict Warp writes as the .meta after this build
        meta.update(generated[2])
        kwargs.update(ltoirs=generated[3], fatbins=generated[4])  # for stock Warp's build
        return _Job(module, options, generated, None, None)

    @staticmethod
    def rebuild_launch_data(module, options):
        """What building its kernels leaves on each for a launch in Warp's
        deterministic mode (DeterministicMeta), made again by Warp's own
        method: Warp's codegen did not run on this module, and units from
        the cache ran none at all. A no-op outside that mode."""
        snapshot = getattr(module, "_snapshot_deterministic_metadata", None)
        if snapshot is not None:
            snapshot(options["block_dim"], options, rebuild=True)

    def build_ahead(self, module, block_dim, arch, suffix, keys):
        """The records a load of this module for a cubin of sm_<arch><suffix>
        will look up, built now (see _Ahead), where the module has the
        kernels (keys) it had at its launch in the last run: a module that
        gains kernels as the program runs (warp.utils makes one per array
        cast it is asked for) is left to its launch. The module's hashes
        that Warp keeps (Module.hashers) stay unmade: its launch makes them
        from the program's state then, as stock Warp does, and finds these
        records where that state is the same (else it builds what changed;
        each unit is hashed again where its code is generated, and one
        whose kernels changed since fails, see build_units)."""
        if module.has_unresolved_static_expressions or kernel_keys(module) != keys:
            return  # (wp.static expressions that Warp evaluates at the first hash)
        kernels = module._get_live_kernels()
        with self.context._codegen_lock:  # the options and hashes of one state
            options = module.resolve_options(self.warp_config, block_dim=block_dim)
            if not kernels or options.get("verify_autograd_array_access"):
                return
            hasher = self.context.ModuleHasher(kernels, options)
        if not hasher.get_unique_kernels():
            return  # (a generic kernel without the overloads its launch makes)
        options = dict(options, output_arch=arch)
        t0 = time.perf_counter()
        name = f"wp_{module.name}_{hasher.get_hash().hex()[:7]}.sm{arch}{suffix}.cubin"
        if self.in_warps_cache(module, options, hasher, f"sm{arch}{suffix}.cubin"):
            return  # its launch loads Warp's own (an edit elsewhere in the program, say)
        plan = self.plan(module, options, arch, name, self.predicted_build_arguments(options, suffix),
                         (), (), hasher)
        if self.open_cache().lookup_group(plan.group_key, plan.options,
                                          version=plan.version) is not None:
            return
        result = self.build_units(plan, module, options, None, ahead=True)
        self.check(result, recorded_meta(result), plan)
        _say(self.verbose, f"{name}: {len(plan.kernels)} kernels: ahead of its launch: "
                           f"{self.summary(plan, result)}, {time.perf_counter() - t0:.3f} s"
                           + self.compiled(result))

    def in_warps_cache(self, module, options, hasher, extension):
        """Whether Warp's kernel cache holds this module's image (its name
        ends in extension, "sm90.cubin") and .meta, so that its load
        compiles nothing: Module._compile's own test, where a module of the
        strip_hash option has one place for every hash."""
        if not self.warp_config.cache_kernels or options.get("verify_autograd_array_access"):
            return False
        ident = f"wp_{module.name}" + ("" if module.options.get("strip_hash")
                                       else f"_{hasher.get_hash().hex()[:7]}")
        d = os.path.join(self.warp_config.kernel_cache_dir, ident)
        return (os.path.exists(os.path.join(d, f"{ident}.{extension}"))
                and os.path.exists(os.path.join(d, f"{ident}.meta")))

    # -- one module ----------------------------------------------------------------------

    def build_module(self, job, arch, output_path, kwargs) -> bool:
        """Builds the module into output_path; False (having said why) when
        stock Warp must."""
        name = os.path.basename(output_path)
        try:
            module, options = job.module, job.options
            source, _ext, meta, ltoirs, fatbins = job.generated
            plan = self.plan(module, options, arch, output_path, kwargs, ltoirs, fatbins)
            t0 = time.perf_counter()
            result = self.open_cache().lookup_group(plan.group_key, plan.options,
                                                    version=plan.version)
            if result is None:
                result = self.build_units(plan, module, options, (source, meta),
                                          reuse_source=plan.hasher is job.hasher)
            recorded = recorded_meta(result)
            if recorded != meta:
                raise _StepAside("the kernels' metadata differ from Warp's .meta")
            image = self.check(result, recorded, plan)
            with open(output_path, "wb") as f:
                f.write(image)
            _say(self.verbose, f"{name}: {len(plan.kernels)} kernels: {self.summary(plan, result)}"
                               f", {time.perf_counter() - t0:.3f} s" + self.compiled(result))
            return True
        except Exception as e:  # never the program's failure: stock Warp builds it
            self.leave_to_stock(name, e)
        return False

    @staticmethod
    def compiled(result):
        """The compiler and the slowest units, for the log, when the build
        compiled any."""
        if not result.slowest:
            return ""
        return f" ({result.compiler}); slowest: {result.slowest}"

    @staticmethod
    def summary(plan, result):
        """What the build did, for the log: the units compiled, their
        kernels named when they are few (what an edit cost)."""
        if result.report.group_hit:
            return "module record hit"
        made = [[plan.kernels[i].key for i in plan.units[n]]
                for n, t in enumerate(result.tasks) if t.codegen_ran]
        listed = f" [{'; '.join(' '.join(u) for u in made)}]" if len(made) <= 4 else ""
        return (f"{len(plan.units)} units; {len(made)} generated and compiled{listed} "
                f"({sum(map(len, made))} kernels), {len(plan.units) - len(made)} from cache")

    def plan(self, module, options, arch, output_path, kw, ltoirs, fatbins, hasher=None):
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
        if _owned(self.context._codegen_lock):
            raise _StepAside("a build inside Warp's code generator on this thread (its units "
                             "are generated on other threads, which would wait for it)")
        ptxas, _release, nvrtc = self.ensure_toolchain()
        hasher = hasher or module.hashers.get(options["block_dim"])
        kernels = list(hasher.get_unique_kernels()) if hasher is not None else []
        if not kernels:
            raise _StepAside("no kernels")
        suffix = kw.get("arch_suffix") or ""
        flags = {"arch": arch, "arch_suffix": suffix, "debug": False,
                 "optimization_level": kw.get("optimization_level", 3),
                 "verify_fp": bool(kw.get("verify_fp")), "fast_math": bool(kw.get("fast_math")),
                 "fuse_fp": bool(kw.get("fuse_fp", True)), "lineinfo": bool(kw.get("lineinfo")),
                 "precompiled_headers": bool(kw.get("use_precompiled_headers", True))}
        identity = json.dumps([FORMAT, WEIGHT_SPLIT, WEIGHT_ALONE, UNIT_SPAN, UNIT_MAX,
                               self.warp_version,
                               nvrtc, flags, options], sort_keys=True, default=repr)
        return _Plan(kernels, hasher, flags, identity,
                     taskcache.Options(arch=f"sm_{arch}{suffix}", ptxas=ptxas, jobs=self.jobs),
                     f"{FORMAT}; warp {self.warp_version}", self.include_dir(), kw.get("pch_dir"))

    def build_units(self, plan, module, options, warp_built, reuse_source=False, ahead=False):
        """The module from tasks of a few kernels each (units), those the
        cache lacks generated and compiled, with its group manifest. Where
        Warp's codegen ran on the whole module (warp_built: its source and
        .meta), each unit's metadata must be what Warp's .meta says of its
        kernels, or the build fails before any record is stored (a later
        record hit writes the records' metadata as the .meta), and a module
        of one unit compiles Warp's source when Warp generated it from the
        hasher that keys the build (reuse_source); a build before Warp's codegen
        (warp_built None) has each kernel's metadata from Warp's builder of
        its unit. A unit of every kernel is generated as Warp generates the
        module (its hasher, its order), so both give it the same source.
        ahead: a build ahead of its launch (its compiles wait for those of
        builds a launch waits for)."""
        cache = self.open_cache()
        hashes = plan.hashes
        with self.context._codegen_lock:  # adjoints are Warp's shared state
            weights = [kernel_weight(k) for k in plan.kernels]
        groups = plan.units = heaviest_first(units(hashes, weights, [k.key for k in plan.kernels]),
                                             weights)
        tasks = [taskcache.Task(plan.kernels[g[0]].get_mangled_name(kernel_hash=hashes[g[0]])
                                + (f" and {len(g) - 1} more" if len(g) > 1 else ""),
                                hashlib.sha256(plan.identity.encode()
                                               + b"".join(hashes[i] for i in g)).digest())
                 for g in groups]
        no_output_arch = {k: v for k, v in options.items() if k != "output_arch"}
        target = {"target": "cuda"} if _builder_takes_target(self.context) else {}

        def generate(index):
            """Warp's code generator, for this unit's kernels alone (and the
            functions they call); its adjoint state is shared, hence Warp's
            lock. The kernels are hashed again in the same hold of the lock:
            what the code is generated from must be what keys its record
            (a module built ahead was hashed before, while the program ran
            on and may have changed a constant its kernels read)."""
            kernels = [plan.kernels[i] for i in groups[index]]
            with self.context._codegen_lock:
                hasher = self.context.ModuleHasher(kernels, no_output_arch)
                if [hasher.kernel_hashes[k] for k in kernels] != [plan.hashes[i]
                                                                 for i in groups[index]]:
                    raise RuntimeError(f"the kernels of {tasks[index].name} changed during "
                                       f"the build")
                if len(kernels) == len(plan.kernels):
                    hasher = plan.hasher  # Warp's order of the module's kernels
                builder = self.context.ModuleBuilder(module, options, hasher=hasher, **target)
                source = builder.codegen("cuda")
                meta = builder.build_meta()
                ltoirs, fatbins = builder.get_link_inputs()
            if ltoirs or fatbins:
                raise RuntimeError("MathDx link inputs")
            return source, meta

        def codegen(index, task):
            if reuse_source and len(groups) == 1:
                source, meta = warp_built  # Warp generated this very unit
            else:
                source, meta = generate(index)
            if warp_built is not None and not meta.items() <= warp_built[1].items():
                raise RuntimeError(f"the metadata of {task.name} differ from Warp's .meta")
            header = plan.nvrtc_header(f"unit{index}.cu")
            ptx = drop_unused_module_data(
                self.compile_ptx(header, source.encode(), ahead).rstrip(b"\0"))
            shared = shared_module_variables(ptx)
            if shared:
                raise RuntimeError(f"kernel {task.name} uses module-scope variables "
                                   f"({', '.join(shared[:3])}) that Warp's module holds once for "
                                   f"all its kernels")
            return ptx, json.dumps(meta, sort_keys=True).encode()

        result = cache.build_tasks(tasks, codegen, plan.options, version=plan.version,
                                   group_key=plan.group_key)
        if all(t.codegen_ran for t in result.tasks):
            self.warm_workers(plan, options)
        return result

    @staticmethod
    def check(result, meta, plan):
        """The image, when it holds the module: every kernel its metadata
        (recorded_meta) names, and a forward entry point for every kernel
        of the module."""
        entries = {e.name for e in result.entries}
        named = [k[:-len("_smem_bytes")] for k in meta if k.endswith("_smem_bytes")]
        named += [k.get_mangled_name(kernel_hash=h) + "_cuda_kernel_forward"
                  for k, h in zip(plan.kernels, plan.hashes)]
        missing = [n for n in named if n not in entries]
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

    def compile_ptx(self, header, source, ahead=False):
        """One NVRTC call: here, on the build's thread, as Warp would run
        it, unless another one runs here already (NVRTC calls of one
        process barely overlap); then in a worker process, which costs its
        start and a precompiled header of its own (0.4 s) once. So an edit
        that misses one unit starts no worker. ahead: see build_units."""
        if not self.here.acquire(blocking=False):
            return self.ensure_workers().compile(header, source, ahead=ahead)
        try:
            return self.compile_here(header, source)
        finally:
            self.here.release()

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

    def warm_workers(self, plan, options):
        """After a build that found none of its units in the cache (a cold
        start, most likely, with more modules to come; an edit finds the
        module's other units): the workers not yet started start now, in the
        background, each making NVRTC's precompiled header of Warp's
        module header (a worker's first compile costs its start and that,
        0.3-0.5 s), so that the next module of many units finds them
        ready. After the build, not during it: the processes starting would
        take cores from its own compiles. A worker that is asked for a unit
        before its warm-up ends waits for it, as it would have had to make
        the header anyway. At most WARM_WORKERS: each holds 130 MB, and a
        larger machine starts the rest when a module has that many units."""
        if self.jobs < 2:
            return
        import warp._src.codegen as codegen
        try:  # what Warp's ModuleBuilder puts before a module's code, as far as
            # the headers: the precompiled header holds what they declare
            prefix = ("#define WP_NO_BFLOAT16\n"
                      + codegen.cuda_module_header.format(block_dim=options["block_dim"])
                      + (options.get("extra_cuda_preamble") or "") + codegen.codegen_cast_macros)
        except (AttributeError, KeyError, IndexError, ValueError):
            return  # another Warp's internals: workers start when units need them
        self.ensure_workers().warm_up(plan.nvrtc_header("warm_up.cu"), prefix.encode(),
                                      WARM_WORKERS)

    def ensure_workers(self):
        with self.setup_lock:
            if self.workers is None:
                # one compile runs here: the others need jobs - 1 workers
                self.workers = _Workers(self.context.runtime.core._name, max(1, self.jobs - 1))
            return self.workers


def recorded_meta(result):
    """The .meta of a build: its tasks' metadata (each unit's build_meta)
    merged."""
    meta = {}
    for t in result.tasks:
        meta.update(json.loads(t.metadata or b"{}"))
    return meta


class _Plan:
    """One module's build: its kernels and their hashes, NVRTC's flags, the
    identity every key holds, taskcache's options and version string, and
    the module's group key (the identity and every kernel's hash)."""

    def __init__(self, kernels, hasher, flags, identity, options, version, include_dir,
                 pch_dir):
        self.kernels, self.hasher, self.flags, self.identity = kernels, hasher, flags, identity
        self.options, self.version = options, version
        self.include_dir, self.pch_dir = include_dir, pch_dir
        self.hashes = [hasher.kernel_hashes[k] for k in kernels]
        self.units = None  # lists of kernel indices, once a build needs them
        digest = hashlib.sha256(identity.encode())
        for h in sorted(self.hashes):
            digest.update(h)
        self.group_key = digest.digest()

    def nvrtc_header(self, name):
        """What an NVRTC worker (or compile_here) is given with a source of
        this build: the build's flags, the source's name, Warp's include
        and precompiled-header directories."""
        return dict(self.flags, name=name, include_dir=self.include_dir, include_dirs=[],
                    pch_dir=self.pch_dir)


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


# Kernels per NVRTC call. One call per kernel costs each kernel NVRTC's
# start and the module's helper functions again, which a small machine
# pays in wall time (warp.optim.linear, 14 small kernels, on 2 cores: 2.7 s
# against stock's 2.1 s one call per kernel, 2.1 s against 2.1 s in units
# of 2 on average); a whole module per call is what an edit must not cost
# (units of 4 on average: a 60-kernel module's edit 5.7x cheaper than
# stock's, of 2: 8.3x). So a kernel of much code (its source and the
# functions it reaches: WEIGHT_ALONE characters or more, a second or more
# of NVRTC) is a unit of its own, and lighter kernels share units: a unit
# ends after a kernel whose hash says so, one in UNIT_SPAN on average, and
# after UNIT_MAX kernels at most, in the order of the kernels' names. Units
# follow from the kernels' text alone, so every machine makes the same ones
# (their records are shared), and an edit changes the unit of the edited
# kernel and at most the next one (where its hash now ends a unit or no
# longer does).
WEIGHT_ALONE = 3000
# A module of less code in all is one unit: its one NVRTC call costs what
# stock Warp's does, where a few calls of small units cost each one NVRTC's
# start again (warp.sparse, 15 small kernels, 2 cores: 0.72x of stock in
# units of 2, 0.97x as one unit), and an edit of it is cheap either way.
WEIGHT_SPLIT = 20000
UNIT_SPAN = 2
UNIT_MAX = 2 * UNIT_SPAN


def units(hashes, weights, names):
    """The kernels' indices in units, in the order of their names (then
    hashes): an edit leaves a kernel where it was. A module of one unit
    keeps Warp's order: its unit is the module Warp generates."""
    if sum(weights) < WEIGHT_SPLIT:
        return [list(range(len(hashes)))]
    order = sorted(range(len(hashes)), key=lambda i: (names[i], hashes[i]))
    out, unit = [], []
    for i in order:
        if weights[i] >= WEIGHT_ALONE:
            out.append([i])
            continue
        unit.append(i)
        if hashes[i][-1] % UNIT_SPAN == 0 or len(unit) == UNIT_MAX:
            out.append(unit)
            unit = []
    if unit:
        out.append(unit)
    return out


def heaviest_first(groups, weights):
    """The units, those of most code first (then as they came): the tasks
    start in this order and Warp's codegen runs one unit at a time, so the
    unit that takes longest, which bounds the build, starts first rather
    than after the codegen of those before it in name order. The image
    links the units in this order, which follows from the text alone."""
    return sorted(groups, key=lambda g: -sum(weights[i] for i in g))


def kernel_weight(kernel):
    """How much code a kernel compiles: the characters of its source and of
    every user function it reaches (each once), as Warp's hasher finds
    them. Unknown (another Warp's internals): a unit of its own."""
    try:
        seen, total, todo = set(), 0, [kernel.adj]
        while todo:
            adj = todo.pop()
            total += len(adj.source or "")
            for f in adj.get_references()[2]:
                if f.is_builtin() or id(f) in seen:
                    continue
                seen.add(id(f))
                # the overloads Warp's hasher reads: not the instantiations of
                # generic functions, which depend on what ran before
                overloads = {**(f.user_overloads or {}), **(f.user_templates or {})}
                for overload in overloads.values() or [f]:
                    if overload.generic_parent is None and overload.adj is not None:
                        todo.append(overload.adj)
        return total
    except Exception:
        return WEIGHT_ALONE


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


# ---- modules built ahead of their launch ------------------------------------------------

def kernel_keys(module):
    """The names of a module's kernels, as a load order keeps them: a
    generic kernel's by its instances (Warp hashes and compiles those, and
    a program makes them as it runs: warp.fem's dispatch kernels,
    warp.utils' array casts)."""
    keys = []
    for k in module._get_live_kernels():
        keys += ([f"{k.key}[{sig}]" for sig in k.overloads] if k.is_generic else [k.key])
    return sorted(keys)


def program_name():
    """What names this program's load order: $TASKCACHE_WARP_PROGRAM, else
    its command line (the script's file name, or the module python -m
    ran, and its arguments)."""
    named = os.environ.get("TASKCACHE_WARP_PROGRAM")
    if named:
        return named
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    argv = list(getattr(sys, "argv", None) or [""])
    first = spec.name if spec is not None else os.path.basename(argv[0])
    return json.dumps([first] + argv[1:])


class _Ahead:
    """Builds, in the background, the modules that the program's last run
    loaded after the one whose build starts now. Warp loads a module when
    a launch first reaches it, so a cold start builds module after module,
    each as long as its slowest unit (Newton's cloth example: 39 modules,
    40 s one after another), although most of a program's modules are
    imported before their launch. A first start cannot know which of them
    it will load. A later one whose modules miss (a Warp or taskcache
    upgrade, a changed option, an edited shared @wp.func) reads the order
    in which the program's last run that built any loaded them (a file per
    command line in the cache directory) and, when a module's build
    starts, builds the records of the modules that came after it, `threads`
    at a time (build_ahead). Each launch then finds its module's record,
    keyed by what Warp's hashes say at that launch, as in any load. A
    launch that reaches a module being built ahead waits for that build;
    one that reaches a module still queued builds it itself. A build ahead
    that fails says why and leaves the module to its launch."""

    def __init__(self, integration, threads):
        self.integration, self.threads = integration, threads
        # this run's loads and the last run's (once read), in load order:
        # {(module name, block_dim): its kernels' keys at its first load}
        self.order = {}
        self.last = None
        self.built = False  # whether this run built a module (then its order is kept)
        self.lock = threading.Lock()
        self.queue = collections.deque()  # build_ahead's arguments
        self.queued = set()               # (name, block_dim) in the queue or done
        self.running = {}                 # (name, block_dim): an Event set when done
        self.active = 0   # threads building ahead
        self.closed = False
        self.program = None

    def forked(self):
        """A forked child has none of the threads building ahead, and its
        load order is its parent's to keep."""
        self.lock = threading.Lock()
        self.queue.clear()
        self.running = {}
        self.closed, self.built = True, False

    def loaded(self, name, block_dim, module):
        """A launch (Module.load) asks for this module, with the kernels it
        has now."""
        with self.lock:
            if (name, block_dim) not in self.order:
                self.order[(name, block_dim)] = kernel_keys(module)

    def path(self):
        """The file of this program's load order (named when first asked:
        the program may change sys.argv later)."""
        if self.program is None:
            self.program = program_name()
        digest = hashlib.sha256(self.program.encode()).hexdigest()[:32]
        return os.path.join(self.integration.open_cache().directory, "warp-load-order",
                            digest + ".json")

    def missed(self, module, block_dim, arch, suffix):
        """The build of this module for a cubin of sm_<arch><suffix> starts:
        those after it in the last run's order go to the queue, for the
        same device."""
        with self.lock:
            self.built = True
            if self.last is None:
                try:
                    with open(self.path()) as f:
                        self.last = {(n, bd): keys for n, bd, keys in json.load(f)["modules"]}
                except (OSError, ValueError, KeyError, TypeError):
                    self.last = {}
            if self.closed or not self.threads or (module.name, block_dim) not in self.last:
                return
            order = list(self.last)
            after = order[order.index((module.name, block_dim)) + 1:]
            known = self.integration.context.user_modules
            todo = [(known[n], bd) for n, bd in after
                    if n in known and (n, bd) not in self.queued and (n, bd) not in self.order]
            for m, bd in todo:
                self.queued.add((m.name, bd))
                self.queue.append((m, bd, arch, suffix, self.last[(m.name, bd)]))
            while self.queue and self.active < min(self.threads, len(self.queue)):
                self.active += 1
                threading.Thread(target=self.work, name="taskcache-warp-ahead",
                                 daemon=True).start()
        if todo:
            _say(self.integration.verbose,
                 f"{module.name}: {len(after)} modules came after it in this program's last run;"
                 f" {len(todo)} of them queued to build ahead where a launch would compile"
                 f" them, {self.threads} at a time")

    def work(self):
        while True:
            with self.lock:
                if self.closed or not self.queue:
                    self.active -= 1
                    return
                job = self.queue.popleft()
                module, block_dim = job[:2]
                done = self.running[(module.name, block_dim)] = threading.Event()
            try:
                self.integration.build_ahead(*job)
            except Exception as e:  # the launch builds it
                self.integration.say_once(f"{module.name}: not built ahead: "
                                          f"{type(e).__name__}: {e}")
            finally:
                with self.lock:
                    del self.running[(module.name, block_dim)]
                done.set()

    def reached(self, name, block_dim):
        """A launch reached this module: it leaves the queue (the launch
        builds it), or the launch waits for its build ahead."""
        with self.lock:
            for i, item in enumerate(self.queue):
                if (item[0].name, item[1]) == (name, block_dim):
                    del self.queue[i]
                    break
            done = self.running.get((name, block_dim))
        if done is not None:
            done.wait()

    def close(self):
        """At exit: nothing more starts, builds under way end (Warp's cache
        and taskcache's stay whole), and a run that built a module keeps
        its load order for the next."""
        with self.lock:
            self.closed = True
            self.queue.clear()
            running = list(self.running.values())
            keep = self.built and self.order and list(self.last.items()) != list(
                self.order.items())
        for done in running:
            done.wait()
        if not keep:
            return
        try:
            path = self.path()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"program": self.program,
                           "modules": [[n, bd, keys] for (n, bd), keys in self.order.items()]}, f)
            os.replace(tmp, path)
        except Exception:
            pass  # the next run builds module after module, as before


# ---- NVRTC in worker processes ----------------------------------------------------------

# Workers started ahead, after a cold build (a 16-core machine's: each holds
# 130 MB).
WARM_WORKERS = 15

class _Workers:
    """Up to n worker processes (taskcache/_nvrtc_worker.py), started as
    compiles need them and kept for the process's life: NVRTC keeps its
    precompiled header in their memory. A build of the module a launch
    waits for goes first: a compile of a module built ahead (_Ahead)
    takes a worker only while no other compile is waiting for one."""

    def __init__(self, library, n):
        self.library, self.n = library, n
        self.idle = []
        self.started = 0
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)  # a worker went idle
        self.waiting = 0   # compiles not built ahead that wait for a worker
        self.all = []
        self.warming = []  # warm_up's threads

    def take(self, ahead=False):
        """An idle worker, or a new one while fewer than n run. Waits in
        short turns: a worker that died frees its place for a new one, and
        no wakeup says so."""
        with self.ready:
            if not ahead:
                self.waiting += 1
            try:
                while True:
                    if not ahead or self.waiting == 0:
                        if self.idle:
                            return self.idle.pop()
                        p = self._start(self.n)
                        if p is not None:
                            return p
                    self.ready.wait(0.2)
            finally:
                if not ahead:
                    self.waiting -= 1

    def start(self, at_most):
        """A new worker process while fewer than at_most run, else None."""
        with self.lock:
            return self._start(at_most)

    def _start(self, at_most):
        if self.started >= at_most:
            return None
        script = os.path.join(os.path.dirname(__file__), "_nvrtc_worker.py")
        p = subprocess.Popen([sys.executable, "-I", "-S", script, self.library],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.started += 1
        self.all.append(p)
        return p

    def warm_up(self, header, source, at_most):
        """Starts workers not yet started, up to at_most in all, each
        compiling source on a thread of its own (idle workers made theirs
        already); what it makes stays in its memory."""
        def one():
            p = self.start(min(self.n, at_most))
            if p is None:
                return
            try:
                self.compile(header, source, p)
            except Exception:
                pass  # a unit's compile then starts the worker again, and says why it fails
        with self.lock:
            missing = min(self.n, at_most) - self.started
        for _ in range(missing):
            t = threading.Thread(target=one, name="taskcache-nvrtc-warm-up", daemon=True)
            t.start()
            self.warming.append(t)

    def compile(self, header, source, worker=None, ahead=False):
        """The PTX of source, compiled by worker (one just started), else
        by an idle or new one (ahead: for a build ahead, see take)."""
        p = worker or self.take(ahead)
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
            with self.ready:
                self.started -= 1
                self.ready.notify_all()
            raise
        with self.ready:
            self.idle.append(p)
            self.ready.notify_all()
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

    def kill(self):
        for p in self.all:
            try:
                p.kill()
                p.wait(timeout=5)
            except Exception:
                pass
