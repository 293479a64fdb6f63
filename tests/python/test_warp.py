"""taskcache.warp against real NVIDIA Warp, without a GPU: Warp's
ahead-of-time compile (wp.compile_aot_module) runs its code generator and
NVRTC on any machine, and goes through the integration like Module.load.

Each build runs in a fresh process. The Warp under test is $TASKCACHE_WARP_SITE
(a directory holding the pinned warp-lang, installed there by scripts/test.sh:
1.19.0, then 1.18.0), with NVIDIA's ptxas and libnvJitLink of Warp's NVRTC
release (nvidia-cuda-nvcc, nvidia-nvjitlink 13.4) in $TASKCACHE_WARP_TOOLS.
Without them the tests skip, saying so."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = os.environ.get("TASKCACHE_WARP_SITE")
TOOLS = os.environ.get("TASKCACHE_WARP_TOOLS")
pytestmark = pytest.mark.skipif(
    not SITE or not (pathlib.Path(SITE) / "warp").is_dir(),
    reason="warp-lang is not installed for these tests (scripts/test.sh sets "
           "TASKCACHE_WARP_SITE)")

sys.path.insert(0, str(ROOT / "tests" / "realworld"))

N = 14  # more kernels than fit one link without dropping unused .const tables


def module_source(edit=None, helper_factor="2.0", n=N, pad=True):
    """A Warp module of n kernels; kernels 0, 5, 10 call scale(), the rest
    call offset(). edit: a kernel index whose constant changes. pad: each
    kernel carries 2,000 characters of comments, so that the module counts
    as much code (taskcache.warp.WEIGHT_SPLIT: a module of less is one
    unit) and its kernels as light ones, which share units."""
    out = ["import warp as wp", "",
           "@wp.func", "def scale(x: float):", f"    return x * {helper_factor}", "",
           "@wp.func", "def offset(v: wp.vec3):", "    return wp.length(v) + 1.0", ""]
    for i in range(n):
        c = 3.5 if i == edit else 1.5
        body = (f"    out[t] = scale(x[t]) + {c} * float({i})" if i % 5 == 0 else
                f"    out[t] = offset(v[t]) * x[t] + {c} * float({i})")
        out += ["@wp.kernel",
                f"def k{i:02d}(x: wp.array(dtype=float), v: wp.array(dtype=wp.vec3), "
                "out: wp.array(dtype=float)):",
                *(["    # " + "padding " * 31] * 8 if pad else []),
                "    t = wp.tid()", body, ""]
    return "\n".join(out)


DRIVER = textwrap.dedent("""
    import json, os, sys
    import warp as wp
    wp.config.quiet = True
    wp.config.kernel_cache_dir = os.environ["WARP_KC"]
    spec = json.loads(sys.argv[1])
    for k, v in spec.get("config", {}).items():
        setattr(wp.config, k, v)
    if spec.get("deterministic"):
        wp.config.deterministic = wp.config.DeterministicMode.RUN_TO_RUN
    wp.init()
    if spec.get("taskcache"):
        import taskcache.warp
        if spec.get("fake_version"):
            wp.config.version = spec["fake_version"]
        print("ENABLED", taskcache.warp.enable(verbose=True, jobs=spec.get("jobs")), flush=True)
        if spec.get("ahead_after_set"):
            # a build ahead hashes its module; the program then changes what
            # a kernel reads (then_set below); then the build generates code
            import threading
            changed, on = threading.Event(), taskcache.warp._on
            build_units = on.build_units
            def after_the_change(*args, **kwargs):
                if kwargs.get("ahead"):
                    changed.wait(120)
                return build_units(*args, **kwargs)
            on.build_units = after_the_change
        if spec.get("mispredict"):
            # the build arguments guessed before codegen not what build_cuda gets
            on = taskcache.warp._on
            guess = on.predicted_build_arguments
            on.predicted_build_arguments = lambda o, s: dict(guess(o, s), fast_math=True)
    sys.path.insert(0, spec["dir"])
    import generated
    if spec.get("options"):
        wp.set_module_options(spec["options"], generated)
    if spec.get("side_by_side"):
        # modules loading on threads at once, as wp.load_module(max_workers=) does
        import importlib, threading
        sys.path.insert(0, spec["dir2"])
        names, errors = ["generated", "generated2"], []
        importlib.import_module("generated2")
        if spec["side_by_side"] == "threads":
            # both builds inside Warp's _compile at once, each about to
            # generate its units
            from taskcache import warp as tw
            barrier, build_units = threading.Barrier(2, timeout=120), tw._on.build_units
            def together(*args):
                barrier.wait()
                return build_units(*args)
            tw._on.build_units = together
        def load(n):
            try:
                m = wp.get_module(n)
                name = m._get_compile_output_name(None, 90, "", False, block_dim=m.options["block_dim"])
                m._compile(None, os.path.join(spec["out"], n), output_name=name, output_arch=90)
            except Exception as e:
                errors.append(repr(e))
        if spec["side_by_side"] == "threads":
            threads = [threading.Thread(target=load, args=(n,)) for n in names]
            [t.start() for t in threads]
            [t.join() for t in threads]
        else:
            [load(n) for n in names]
        assert not errors, errors
        paths = [str(p) for n in names for p in __import__("pathlib").Path(spec["out"], n).glob("*.cubin")]
    elif spec.get("fork"):
        # a process that forks after its workers started: the parent and
        # the child each build a module of several units at the same time
        import importlib, traceback
        def build(name):
            m = wp.get_module(importlib.import_module(name).__name__)
            bd = m.options["block_dim"]
            out = os.path.join(spec["out"], name)
            oname = m._get_compile_output_name(None, 90, "", False, block_dim=bd)
            m._compile(None, out, output_name=oname, output_arch=90)
            return os.path.join(out, oname)
        paths = [build("generated")]  # starts the workers
        for t in taskcache.warp._on.workers.warming:
            t.join()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                build("third")
                code = 0
            except BaseException:
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        paths.append(build("second"))
        assert os.waitpid(pid, 0)[1] == 0, "the child failed"
    elif spec.get("like_load"):
        # what Module.load does on a device of sm_90: the output named by the caller
        m = wp.get_module("generated")
        name = m._get_compile_output_name(None, 90, "", False, block_dim=m.options["block_dim"])
        m._compile(None, spec["out"], output_name=name, output_arch=90)
        paths = [os.path.join(spec["out"], name)]
        if spec.get("launch_data"):
            # what Module.load hands each launch after a compile, in Warp's
            # deterministic mode
            options = m.resolve_options(wp.config)
            snap = m._snapshot_deterministic_metadata(options["block_dim"], options, rebuild=False)
            import dataclasses
            def canon(v):  # sets in a stable order (their order follows string hashes)
                if dataclasses.is_dataclass(v) and not isinstance(v, type):
                    return {f.name: canon(getattr(v, f.name)) for f in dataclasses.fields(v)}
                if isinstance(v, (set, frozenset)):
                    return sorted((canon(x) for x in v), key=json.dumps)
                if isinstance(v, dict):
                    return sorted(([canon(k), canon(x)] for k, x in v.items()), key=json.dumps)
                if isinstance(v, (list, tuple)):
                    return [canon(x) for x in v]
                return repr(v)
            print("LAUNCH", json.dumps({k: canon(v) for k, v in sorted(snap.items())}))
    elif spec.get("program"):
        # a program's launches, after its imports: each module built as
        # Module.load builds it on a device of sm_90, into Warp's cache
        import importlib
        paths, imported = [], [importlib.import_module(n) for n in spec["program"]]
        for n, py in zip(spec["program"], imported):
            m = wp.get_module(py.__name__)
            bd = m.options["block_dim"]
            m.get_module_hash(bd)
            name = m._get_compile_output_name(None, 90, "", False, block_dim=bd)
            out = os.path.join(wp.config.kernel_cache_dir, m.get_module_identifier(bd))
            built = m._compile(None, out, output_name=name, output_arch=90,
                               options=m.resolved_options[bd])
            print("LOADED", n, built, flush=True)
            paths.append(os.path.join(out, name))
            # the program changes what later kernels read, after its first launch
            for module_name, attr, value in spec.get("then_set", []):
                setattr(sys.modules[module_name], attr, value)
            for module_name, function in spec.get("then_call", []):  # a kernel more, say
                getattr(sys.modules[module_name], function)()
            if spec.pop("ahead_after_set", False):
                changed.set()
            spec["then_set"] = spec["then_call"] = []
    else:
        paths = wp.compile_aot_module(generated, arch=90, module_dir=spec["out"],
                                      use_ptx=spec.get("use_ptx", False))
    print("PATHS", json.dumps([str(p) for p in paths]))
    if spec.get("exit_while_warming"):
        # exits as soon as the workers a cold build warms up have started
        import time
        workers, deadline = taskcache.warp._on.workers, time.time() + 120
        while len(workers.all) < spec["jobs"] - 1 and time.time() < deadline:
            time.sleep(0.01)
        print("WORKER_PIDS", json.dumps([w.pid for w in workers.all]), flush=True)
        sys.exit(0)
    if spec.get("taskcache") and taskcache.warp.enabled():
        workers = taskcache.warp._on.workers
        for t in workers.warming if workers else ():
            t.join()
        print("WORKERS", len(workers.all) if workers else 0)
""")


class Env:
    def __init__(self, tmp):
        self.tmp = tmp
        self.runs = 0
        (tmp / "driver.py").write_text(DRIVER)
        self.base = dict(os.environ, TASKCACHE_DIR=str(tmp / "tc"),
                         PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "python"), SITE, TOOLS)
                                                    if p))
        self.base.pop("TASKCACHE_LOG", None)

    def build(self, source, taskcache=True, modules=None, **spec):
        """Compiles the module ahead of time into a fresh Warp cache and
        directory: (the log lines of taskcache.warp, the cubin path, its
        .meta). modules: more Python modules beside it, {name: source}."""
        self.runs += 1
        d = self.tmp / f"run{self.runs}"
        d.mkdir()
        (d / "generated.py").write_text(source)
        for name, text in (modules or {}).items():
            (d / f"{name}.py").write_text(text)
        spec = dict(spec, dir=str(d), out=str(d / "out"), taskcache=taskcache)
        env = {**self.base, "WARP_KC": str(d / "kc"), **spec.pop("env", {})}
        # standard error into a file: run() waits for the driver's exit
        # only, not for whatever else holds the pipe it would read
        with open(d / "stderr", "w+") as err:
            p = subprocess.run([sys.executable, str(self.tmp / "driver.py"), json.dumps(spec)],
                               env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                               timeout=600)
            err.seek(0)
            stderr = err.read()
        assert p.returncode == 0, p.stdout + stderr
        self.stdout = p.stdout
        lines = [l for l in stderr.splitlines() if l.startswith("taskcache.warp")]
        binary = next(pathlib.Path(x) for x in paths(self) if x.endswith((".cubin", ".ptx")))
        meta = binary.with_name(binary.name.split(".")[0] + ".meta")
        return lines, binary, meta


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def one_line(lines):
    assert len(lines) == 1, lines
    return lines[0]


def built(line):
    """(units, units generated, the kernels of each generated unit when the
    line names them, units from cache) from a build's log line."""
    m = re.search(r": (\d+) units; (\d+) generated and compiled(?: \[([^\]]*)\])? "
                  r"\((\d+) kernels\), (\d+) from cache", line)
    assert m, line
    named = [u.split() for u in m.group(3).split("; ")] if m.group(3) else None
    return int(m.group(1)), int(m.group(2)), named, int(m.group(5))


def test_a_cold_build_is_warps_module_with_warps_registers(env):
    """Every kernel, forward and backward, with Warp's symbol names, Warp's
    .meta to the byte, and the registers and local memory of Warp's own
    whole-module build."""
    import rwlib
    lines, cubin, meta = env.build(module_source())
    units, made, _, cached = built(one_line(lines))
    assert made == units and cached == 0 and 1 < units < N  # small kernels share NVRTC calls
    _, stock, stock_meta = env.build(module_source(), taskcache=False)
    assert meta.read_bytes() == stock_meta.read_bytes()
    mine, theirs = rwlib.resources(str(cubin)), rwlib.resources(str(stock))
    assert set(mine) == set(theirs) and len(mine) == 2 * N
    assert {k: (r["regs"], rwlib.local_bytes(r)) for k, r in mine.items()} == \
        {k: (r["regs"], rwlib.local_bytes(r)) for k, r in theirs.items()}


def test_a_module_of_little_code_is_one_unit(env):
    """One NVRTC call for the whole module, as stock Warp makes: several
    calls of small units each pay NVRTC's start again. Its unit is the
    source Warp generates for the module: an ahead-of-time build compiles
    the source Warp's codegen made (no second codegen), a load generates
    it itself, and both give one image."""
    lines, cubin, meta = env.build(module_source(pad=False))
    units, made, named, cached = built(one_line(lines))
    assert (units, made, cached) == (1, 1, 0)
    _, _, stock_meta = env.build(module_source(pad=False), taskcache=False)
    assert meta.read_bytes() == stock_meta.read_bytes()
    lines, loaded, loaded_meta = env.build(module_source(pad=False), like_load=True,
                                           env={"TASKCACHE_DIR": str(env.tmp / "tc-load")})
    assert built(one_line(lines))[:2] == (1, 1) and "built before Warp's codegen" in lines[0]
    assert loaded.read_bytes() == cubin.read_bytes()
    assert loaded_meta.read_bytes() == meta.read_bytes()


def test_an_unchanged_module_is_one_record_read(env):
    env.build(module_source())
    lines, cubin, _ = env.build(module_source())  # a fresh Warp cache, the same records
    assert f": {N} kernels: module record hit" in one_line(lines)
    first = next((env.tmp / "run1" / "out").glob("*.cubin"))
    assert cubin.read_bytes() == first.read_bytes()


def test_a_module_load_runs_no_codegen_of_the_whole_module(env):
    """What a launch loads (the output named by Module.load): Warp's code
    generator does not run on the whole module. A cold build generates its
    units only and gives stock Warp's .meta and the image of an
    ahead-of-time build (which runs Warp's codegen and checks each unit's
    metadata against its .meta); an unchanged module is one record read,
    with no codegen at all."""
    _, _, stock_meta = env.build(module_source(), taskcache=False, like_load=True)
    lines, cold, cold_meta = env.build(module_source(), like_load=True)
    assert "built before Warp's codegen" in one_line(lines)
    assert built(lines[0])[1] > 1
    assert cold_meta.read_bytes() == stock_meta.read_bytes()
    _, aot, _ = env.build(module_source(), env={"TASKCACHE_DIR": str(env.tmp / "tc-aot")})
    assert aot.read_bytes() == cold.read_bytes()
    lines, hit, meta = env.build(module_source(), like_load=True)
    assert f": {N} kernels: module record hit, no codegen," in one_line(lines)
    assert hit.read_bytes() == cold.read_bytes()
    assert meta.read_bytes() == cold_meta.read_bytes()
    # no source without kernels in Warp's cache: none at all (what its graph
    # capture then reports as missing)
    for cubin in (cold, hit):
        assert not cubin.with_suffix("").with_suffix(".cu").exists()


def test_a_wrong_guess_of_the_build_arguments_is_warps_codegen_then(env):
    """What a load builds before Warp's codegen is keyed by the build
    arguments guessed from the options; where build_cuda then gets others,
    Warp's codegen runs and the module is built for what it got: the
    image an ahead-of-time build gives, Warp's .meta and source."""
    _, aot, _ = env.build(module_source(), env={"TASKCACHE_DIR": str(env.tmp / "tc-aot")})
    _, _, stock_meta = env.build(module_source(), taskcache=False, like_load=True)
    lines, cubin, meta = env.build(module_source(), like_load=True, mispredict=True)
    assert "built before Warp's codegen" not in one_line(lines)
    assert built(lines[0])[1] > 1
    assert cubin.read_bytes() == aot.read_bytes()
    assert meta.read_bytes() == stock_meta.read_bytes()
    assert "__global__" in cubin.with_suffix("").with_suffix(".cu").read_text()


SCATTER = """

@wp.kernel
def scatter(x: wp.array(dtype=float), at: wp.array(dtype=int), out: wp.array(dtype=float)):
    t = wp.tid()
    wp.atomic_add(out, at[t], x[t] * 2.0)
"""


def paths(env):
    """The binaries the driver's last run printed."""
    return json.loads(next(l for l in env.stdout.splitlines() if l.startswith("PATHS "))[6:])


def launch_data(env):
    line = next(l for l in env.stdout.splitlines() if l.startswith("LAUNCH "))
    return json.loads(line[7:])


def test_deterministic_mode_gets_the_launch_data_codegen_leaves(env):
    """Warp's deterministic mode launches with data that building the
    kernels leaves on each one (a second machine that skipped it launched
    with invalid arguments). A module that a load reads from its record,
    with no codegen at all, hands its launches what stock Warp's codegen
    leaves, with stock's .meta; one that misses runs Warp's codegen first
    (which makes that data anyway)."""
    source = module_source() + SCATTER
    det = {"like_load": True, "deterministic": True, "launch_data": True}
    _, _, stock_meta = env.build(source, taskcache=False, **det)
    stock = launch_data(env)
    assert "det_scatter" in json.dumps(stock)  # something to hand over
    lines, cold, meta = env.build(source, **det)
    assert "built before Warp's codegen" not in one_line(lines)
    assert built(lines[0])[1] > 1
    assert launch_data(env) == stock and meta.read_bytes() == stock_meta.read_bytes()
    lines, hit, meta = env.build(source, **det)
    assert f": {N + 1} kernels: module record hit, no codegen," in one_line(lines)
    assert launch_data(env) == stock and meta.read_bytes() == stock_meta.read_bytes()
    assert hit.read_bytes() == cold.read_bytes()


def test_array_access_checks_keep_warps_codegen(env):
    """Warp's array access checks read what its codegen marks: there the
    record is used after Warp's codegen."""
    spec = {"like_load": True, "config": {"verify_autograd_array_access": True}}
    _, first, _ = env.build(module_source(), **spec)
    lines, cubin, _ = env.build(module_source(), **spec)
    assert f": {N} kernels: module record hit," in one_line(lines)
    assert "no codegen" not in lines[0]
    assert cubin.read_bytes() == first.read_bytes()
    assert "__global__" in cubin.with_suffix("").with_suffix(".cu").read_text()


def test_a_programs_next_modules_build_ahead(env):
    """A start whose modules miss (here: another Warp cache, another
    taskcache cache) builds the modules that came after the one missing now
    in the program's last run, in the background: the launches that reach
    them find their records, and the images the first run built. A module
    that gained a kernel before its launch (an instance of a generic
    kernel, made when the program calls a function) is left to its
    launch. The load order is kept by a run that built any module, with
    or without building ahead."""
    extra = "\n".join(["", "from typing import Any", "", "@wp.kernel",
                       "def late(x: Any, out: wp.array(dtype=float)):",
                       "    out[wp.tid()] = float(x[wp.tid()])", "",
                       "def add_late():",
                       "    wp.overload(late, [wp.array(dtype=int), wp.array(dtype=float)])", ""])
    program = {"program": ["generated", "second", "third", "fourth"],
               "modules": {"second": module_source(helper_factor="3.0"),
                           "third": module_source(helper_factor="4.0", n=3),
                           "fourth": module_source(helper_factor="5.0", n=2) + extra},
               "then_call": [["fourth", "add_late"]]}
    named = {"TASKCACHE_WARP_PROGRAM": "a test's program"}
    lines, _, _ = env.build(module_source(), **program,
                            env=dict(named, TASKCACHE_WARP_AHEAD="0"))
    assert re.findall(r"LOADED (\w+) (\w+)", env.stdout) == [
        ("generated", "True"), ("second", "True"), ("third", "True"), ("fourth", "True")]
    assert len(lines) == 4 and not any("ahead" in l for l in lines), lines
    first_run = paths(env)
    orders = list((env.tmp / "tc" / "warp-load-order").glob("*.json"))
    assert len(orders) == 1
    fresh = env.tmp / "tc-upgraded"
    shutil.copytree(env.tmp / "tc" / "warp-load-order", fresh / "warp-load-order")
    # (as many threads as modules: each build ahead starts before the
    # program's first module is built, and fourth has its kernel more then)
    lines, _, _ = env.build(module_source(), **program,
                            env=dict(named, TASKCACHE_WARP_AHEAD="3", TASKCACHE_DIR=str(fresh)))
    assert any("generated: 3 modules came after it" in l and "3 of them queued to build ahead" in l
               for l in lines), lines
    ahead = [l for l in lines if "ahead of its launch: " in l]
    assert sorted(re.search(r"wp_([a-z]+)_", l).group(1) for l in ahead) == ["second", "third"]
    assert all(built(l)[1] > 0 for l in ahead), ahead
    for name in ("second", "third"):  # their launches: one record read each
        assert any(f"wp_{name}_" in l and "module record hit, no codegen" in l
                   for l in lines), lines
    assert built(next(l for l in lines if "wp_fourth_" in l))[:2] == (1, 1)
    assert same_images(first_run, paths(env))


def test_a_module_in_warps_cache_is_not_built_ahead(env):
    """A start where only the program's first module misses Warp's cache
    (an edit of it): the modules after it are Warp's cache hits at their
    launch, so nothing builds them ahead (a build ahead would compile
    records no launch reads, on cores the edit's own compile needs)."""
    program = {"program": ["generated", "second", "third"],
               "modules": {"second": module_source(helper_factor="3.0"),
                           "third": module_source(helper_factor="4.0", n=3)}}
    named = {"TASKCACHE_WARP_PROGRAM": "a test's program", "TASKCACHE_WARP_AHEAD": "0"}
    env.build(module_source(), **program, env=named)
    warp_cache = env.tmp / "edited-kc"
    shutil.copytree(env.tmp / f"run{env.runs}" / "kc", warp_cache)
    for d in warp_cache.glob("*/wp_generated_*"):  # (under the version Warp adds)
        shutil.rmtree(d)
    fresh = env.tmp / "tc-fresh"
    shutil.copytree(env.tmp / "tc" / "warp-load-order", fresh / "warp-load-order")
    lines, _, _ = env.build(module_source(), **program,
                            env=dict(named, TASKCACHE_WARP_AHEAD="2", TASKCACHE_DIR=str(fresh),
                                     WARP_KC=str(warp_cache)))
    assert re.findall(r"LOADED (\w+) (\w+)", env.stdout) == [
        ("generated", "True"), ("second", "False"), ("third", "False")]
    assert any("generated: 2 modules came after it" in l for l in lines), lines
    assert not [l for l in lines if "ahead of its launch" in l or "not built ahead" in l], lines


def same_images(a, b):
    return len(a) == len(b) and all(
        pathlib.Path(x).name == pathlib.Path(y).name
        and pathlib.Path(x).read_bytes() == pathlib.Path(y).read_bytes() for x, y in zip(a, b))


def test_a_build_ahead_never_decides_what_a_launch_loads(env):
    """A module built ahead is hashed first; the program then changes a
    constant its kernel reads (made to come before the build generates
    its code). The build ahead fails rather than store that code under
    the first state's hash; the launch hashes the module again, as stock
    Warp does at a module's first load, and loads what a run without
    builds ahead loads; a later run in the first state loads what a clean
    build of that state loads."""
    second = module_source(n=3).replace(
        "import warp as wp\n", "import warp as wp\nSHIFT = wp.constant(1.0)\n").replace(
        "out[t] = scale(x[t])", "out[t] = SHIFT + scale(x[t])")
    first_state = {"program": ["generated", "second"], "modules": {"second": second}}
    changed = dict(first_state, then_set=[["second", "SHIFT", 7.0]])
    named = {"TASKCACHE_WARP_PROGRAM": "a test's program", "TASKCACHE_WARP_AHEAD": "0"}
    env.build(module_source(), **first_state,
              env=dict(named, TASKCACHE_DIR=str(env.tmp / "tc-clean")))
    clean = paths(env)
    env.build(module_source(), **changed, env=named)
    seven = paths(env)
    assert not same_images(clean, seven)
    fresh = env.tmp / "tc-upgraded"
    shutil.copytree(env.tmp / "tc" / "warp-load-order", fresh / "warp-load-order")
    lines, _, _ = env.build(module_source(), **changed, ahead_after_set=True,
                            env=dict(named, TASKCACHE_WARP_AHEAD="1", TASKCACHE_DIR=str(fresh)))
    assert any("second: not built ahead" in l and "changed during the build" in l
               for l in lines), lines
    assert built(next(l for l in lines if "wp_second_" in l))[1] > 0  # by its launch
    assert same_images(seven, paths(env))
    env.build(module_source(), **first_state, env=dict(named, TASKCACHE_DIR=str(fresh)))
    assert same_images(clean, paths(env))


def test_the_heaviest_unit_starts_first(env):
    """Warp's codegen runs one unit at a time, in the order the tasks
    start: the unit of most code, which bounds a cold build, starts first,
    though its name comes last."""
    heavy = "\n".join(["", "@wp.kernel",
                       "def zz_heavy(x: wp.array(dtype=float), out: wp.array(dtype=float)):",
                       *(["    # " + "padding " * 31] * 48), "    t = wp.tid()",
                       "    out[t] = wp.sin(x[t])", ""])
    trace = env.tmp / "trace.json"
    lines, _, _ = env.build(module_source() + heavy, like_load=True,
                            env={"TASKCACHE_TRACE": str(trace)})
    assert built(one_line(lines))[1] > 2
    events = json.loads(trace.read_text() + "]")  # the array, left open
    codegen = sorted((e for e in events if e.get("cat") == "codegen"), key=lambda e: e["ts"])
    assert len(codegen) > 2 and codegen[0]["name"].startswith("zz_heavy_")


def test_workers_start_after_a_cold_build(env):
    """A build that found none of its units in the cache (a cold start)
    starts the NVRTC worker processes (jobs - 1 of them) in the
    background, where each makes NVRTC's precompiled header before a
    module of many units needs it; the module itself, of one unit,
    compiled in the program's own process. An edit, whose other units come
    from the cache, starts none but for its own compiles."""
    lines, _, _ = env.build(module_source(pad=False), like_load=True, jobs=3)
    assert built(one_line(lines))[:2] == (1, 1)
    assert "WORKERS 2" in env.stdout.splitlines()
    # a cold module of a few units starts those its units need, then the rest
    lines, _, _ = env.build(module_source(), like_load=True, jobs=12)
    assert built(one_line(lines))[0] < 11 and "WORKERS 11" in env.stdout.splitlines()
    lines, _, _ = env.build(module_source(edit=3), like_load=True, jobs=3)
    units, made, _, cached = built(one_line(lines))
    assert cached > 0 and f"WORKERS {made - 1}" in env.stdout.splitlines()


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_program_that_exits_leaves_no_worker_behind(env):
    """The workers a cold build warms up end when the program exits, those
    still making NVRTC's header too: a worker left running holds the
    program's standard error open (a `| tee log` would wait for it) and
    takes cores from whatever runs next."""
    env.build(module_source(pad=False), like_load=True, jobs=3, exit_while_warming=True)
    pids = json.loads(next(l for l in env.stdout.splitlines()
                           if l.startswith("WORKER_PIDS")).split(" ", 1)[1])
    assert len(pids) == 2
    assert not [pid for pid in pids if alive(pid)]


def test_a_forked_child_builds_with_workers_of_its_own(env):
    """A process forks after its workers started (a multiprocessing pool,
    say), and parent and child build a module of several units each at the
    same time: each through workers of its own, each image the one that
    module gives built alone."""
    modules = {"second": module_source(helper_factor="3.0"),
               "third": module_source(helper_factor="4.0")}
    lines, _, _ = env.build(module_source(), fork=True, modules=modules, jobs=4)
    assert not [l for l in lines if "stock Warp builds it" in l], lines
    out = env.tmp / f"run{env.runs}" / "out"
    for name in ("second", "third"):
        assert built(next(l for l in lines if f"wp_{name}_" in l))[1] > 1, lines
        (env.tmp / f"alone-{name}").mkdir()
        alone = Env(env.tmp / f"alone-{name}")
        alone.build(module_source(), program=[name], modules=modules)
        assert (pathlib.Path(paths(alone)[0]).read_bytes()
                == next((out / name).glob("*.cubin")).read_bytes())


def test_modules_built_side_by_side(env):
    """Two modules built on two threads at once (Warp's
    load_module_max_workers): both through taskcache, each image the one a
    build of that module alone gives."""
    other = env.tmp / "other"
    other.mkdir()
    (other / "generated2.py").write_text(module_source(helper_factor="5.0", n=6))
    images = []
    for how in ("threads", "one after the other"):
        (env.tmp / how.replace(" ", "-")).mkdir()
        e = Env(env.tmp / how.replace(" ", "-"))
        lines, _, _ = e.build(module_source(), side_by_side=how, dir2=str(other))
        assert len(lines) == 2 and all("generated and compiled" in l for l in lines), lines
        out = e.tmp / "run1" / "out"
        images.append({p.parent.name: p.read_bytes() for p in out.glob("*/*.cubin")})
    assert set(images[0]) == {"generated", "generated2"} and images[0] == images[1]


@pytest.mark.parametrize("how", ["ahead of time", "as a launch loads it"])
def test_an_edited_kernel_is_the_only_one_compiled(env, how):
    load = {"like_load": how == "as a launch loads it"}
    env.build(module_source(), **load)
    lines, cubin, meta = env.build(module_source(edit=3), **load)
    units, made, named, cached = built(one_line(lines))
    assert ("built before Warp's codegen" in lines[0]) == load["like_load"]
    # the edited kernel's unit, and the next one where the new hash moved
    # the end of the unit; units of 4 kernels at most
    assert made <= 2 and cached == units - made and "k03" in set().union(*named)
    assert all(len(u) <= 4 for u in named)
    # byte for byte what a cold build of the edited module gives
    (env.tmp / "cold").mkdir()
    _, again, again_meta = Env(env.tmp / "cold").build(module_source(edit=3))
    assert cubin.read_bytes() == again.read_bytes()
    assert meta.read_bytes() == again_meta.read_bytes()


def test_a_function_edit_misses_exactly_its_callers(env):
    env.build(module_source())
    lines, _, _ = env.build(module_source(helper_factor="3.0"))
    units, made, named, cached = built(one_line(lines))
    callers = {f"k{i:02d}" for i in range(0, N, 5)}
    # every caller compiled, and only units that hold one
    assert set().union(*named) >= callers and all(callers & set(u) for u in named)
    assert made + cached == units and made <= len(callers)


@pytest.mark.parametrize("options", [{"fast_math": True}, {"block_dim": 128},
                                     {"enable_backward": False}])
def test_module_options_miss_every_kernel(env, options):
    env.build(module_source())
    lines, _, _ = env.build(module_source(), options=options)
    units, made, _, cached = built(one_line(lines))
    assert made == units and cached == 0


@pytest.mark.parametrize("case,expect", [
    ({"use_ptx": True}, "Warp emits PTX for this device"),
    ({"config": {"mode": "debug"}}, "debug mode"),
    ({"env": {"TASKCACHE_PTXAS": "/bin/false", "CUDA_HOME": "/nonexistent"},
      "no_tools": True}, "no ptxas as new as Warp's NVRTC"),
])
def test_what_it_does_not_handle_is_stock_warp_saying_why(env, case, expect):
    case = dict(case)
    if case.pop("no_tools", False):
        env.base["PYTHONPATH"] = os.pathsep.join((str(ROOT / "python"), SITE))
    lines, binary, meta = env.build(module_source(), **case)
    assert "stock Warp builds it" in one_line(lines) and expect in lines[0]
    assert binary.exists() and meta.exists()


def test_an_unsupported_warp_version_is_left_alone(env):
    lines, _, _ = env.build(module_source(), fake_version="1.17.0")
    assert "is not one of the versions taskcache.warp supports" in one_line(lines)


@pytest.mark.parametrize("how", ["ahead of time", "as a launch loads it"])
def test_an_error_inside_is_stock_warp(env, how):
    """A failing compile worker (here: a Python that cannot run it) must not
    fail the program: stock Warp builds the module, its own .meta beside
    it, also where taskcache builds before Warp's codegen."""
    bad = env.tmp / "python-that-fails"
    bad.write_text("#!/bin/sh\nexit 3\n")
    bad.chmod(0o755)
    script = env.tmp / "driver.py"
    script.write_text(DRIVER.replace("import taskcache.warp",
                                     f"import taskcache.warp; import sys; "
                                     f"sys.executable = {str(bad)!r}"))
    load = how == "as a launch loads it"
    lines, binary, meta = env.build(module_source(), like_load=load)
    assert "stock Warp builds it" in one_line(lines) and binary.exists()
    _, _, stock_meta = env.build(module_source(), taskcache=False, like_load=load)
    assert meta.read_bytes() == stock_meta.read_bytes()
    # stock Warp's source is in its cache, not taskcache's placeholder
    assert "__global__" in binary.with_suffix("").with_suffix(".cu").read_text()


def test_the_environment_variable_switches_warp_over(env):
    """TASKCACHE_WARP=1: the hook the package's .pth file imports at start
    enables taskcache.warp when warp is imported."""
    code = ("import taskcache._warp_hook, sys\n"
            "assert 'warp' not in sys.modules\n"
            "import warp, taskcache.warp\n"
            "print('ON', taskcache.warp.enabled())\n"
            "taskcache.warp.disable()\n"
            "import warp._src.build as b\n"
            "print('OFF', taskcache.warp.enabled(), hasattr(b.build_cuda, '__wrapped__'))\n")
    for value, on in (("1", True), ("", False)):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(env.base, TASKCACHE_WARP=value), timeout=300)
        assert p.returncode == 0, p.stderr
        assert f"ON {on}" in p.stdout and "OFF False False" in p.stdout
    pth = (ROOT / "python" / "taskcache-warp.pth").read_text()
    assert pth.startswith("import ") and "taskcache._warp_hook" in pth


def test_a_second_machine_builds_from_the_remote(env, tmp_path):
    """An empty local cache with the same Redis behind it: the module comes
    from the remote's records, nothing is compiled."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from remote_servers import REDIS, Redis
    if not REDIS:
        pytest.skip("redis-server is not installed")
    server = Redis(str(tmp_path / "redis"))
    try:
        remote = f"redis://127.0.0.1:{server.port}"
        env.base["TASKCACHE_REMOTE"] = remote
        lines, first, _ = env.build(module_source())
        assert built(one_line(lines))[3] == 0
        env.base["TASKCACHE_DIR"] = str(tmp_path / "second-machine")
        lines, cubin, _ = env.build(module_source())
        assert f": {N} kernels: module record hit" in one_line(lines)
        assert cubin.read_bytes() == first.read_bytes()
    finally:
        server.stop()


def test_unused_module_data_is_dropped_and_used_data_kept():
    sys.path.insert(0, str(ROOT / "python"))
    from taskcache.warp import drop_unused_module_data
    ptx = (b".version 9.0\n.target sm_90\n.address_size 64\n"
           b".const .align 4 .b8 unused_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
           b".const .align 4 .b8 used_table[4] = {1, 2, 3, 4};\n"
           b".global .align 8 .u64 ptr_to_table = generic(pointed_at);\n"
           b".global .align 4 .b8 pointed_at[4];\n"
           b".visible .global .align 4 .u32 shared_with_host;\n"
           b".global .align 4 .u32 unused_global;\n"
           b".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\tld.const.u32 %r1, [used_table];\n"
           b"\tret;\n}\n")
    out = drop_unused_module_data(ptx)
    assert b"unused_table" not in out and b"unused_global" not in out
    for kept in (b"used_table", b"pointed_at", b"shared_with_host", b".entry k"):
        assert kept in out


def test_module_state_shared_by_kernels_keeps_the_module_stock():
    """A module-scope variable left in a kernel's PTX is one object in
    Warp's module, shared by its kernels; per kernel each would get its own.
    String literals are the compiler's read-only constants."""
    sys.path.insert(0, str(ROOT / "python"))
    from taskcache.warp import shared_module_variables
    ptx = (b".global .align 4 .u32 counter;\n"
           b".global .align 1 .b8 $str[3] = {104, 105, 0};\n"
           b".global .align 1 .b8 __unnamed_1[2] = {1, 0};\n"
           b".const .align 4 .b8 table[4] = {1, 2, 3, 4};\n"
           b".visible .entry k()\n{\n\tret;\n}\n")
    assert shared_module_variables(ptx) == ["counter"]
