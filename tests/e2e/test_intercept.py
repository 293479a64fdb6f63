"""taskcache run: the driver interceptor, against a fake libcuda.so.1 that
records what it is given (tests/intercept/fake_cuda.c) and a JIT-like client
that reaches the driver by every path (tests/intercept/jit_client.c). No GPU:
what is checked is what the driver receives. Where taskcache can reproduce
the driver's work, the driver gets a cubin, byte for byte the image `taskcache
build` makes with the same options (for a link's PTX, the relocatable object of
`ptxas -c`, which the driver links); everywhere else it gets the
program's call unchanged."""

import datetime
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

import elfsyms
from tchelp import ARCH, PTXAS, TASKCACHE, as_a_host, build, nvcc_ptx, stats, tc
from tchelp import run as run_tool

BUILD = pathlib.Path(TASKCACHE).resolve().parent
FAKE_DIR = BUILD / "tests" / "intercept"
CLIENT = FAKE_DIR / "jit_client"

KERNELS = r"""
__device__ __noinline__ float shape(float x) { return x * x - 0.5f; }
extern "C" __global__ void ka(float *o, int n) { int i = threadIdx.x; if (i < n) o[i] = shape(o[i]); }
extern "C" __global__ void kb(float *o, int n) { int i = threadIdx.x; if (i < n) o[i] += shape(2 * o[i]); }
extern "C" __global__ void kc(float *o, int n) { int i = threadIdx.x; if (i < n) o[i] *= 3.0f; }
"""

PATHS = ["linked", "dlsym", "dlvsym", "deepbind", "proc1", "proc2"]
LIB = BUILD / "libtaskcache_intercept.so"


@pytest.fixture(autouse=True)
def _preloadable():
    if not LIB.exists() or not CLIENT.exists():
        pytest.fail(f"{LIB} or {CLIENT} is not built")
    if b"__asan_init" in LIB.read_bytes():
        pytest.skip("a sanitizer build's interceptor cannot be preloaded into other programs "
                    "(its decisions run under the sanitizers in unit_intercept)")


@pytest.fixture
def ptx(tmp_path):
    return nvcc_ptx(KERNELS, tmp_path / "k.ptx")


class Run:
    """One program run under `taskcache run`, and what the fake driver saw."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.cache = tmp_path / "cache"
        self.saved = tmp_path / "saved"
        self.saved.mkdir(exist_ok=True)
        self.n = 0

    def __call__(self, *args, under_taskcache=True, env=None, check=True):
        self.n += 1
        fake_log = self.tmp / f"fake{self.n}.log"
        tc_log = self.tmp / f"tc{self.n}.log"
        e = dict(os.environ, LD_LIBRARY_PATH=str(FAKE_DIR), FAKE_CUDA_LOG=str(fake_log),
                 FAKE_CUDA_SAVE=str(self.saved), ASAN_OPTIONS="detect_leaks=0")
        e.update(env or {})
        cmd = [str(CLIENT), *map(str, args)]
        if under_taskcache:
            cmd = [TASKCACHE, "run", "--cache-dir", str(self.cache), "--log", str(tc_log),
                   "--", *cmd]
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=300)
        if check:
            assert p.returncode == 0, p.stdout + p.stderr
        if under_taskcache and "TASKCACHE_INTERCEPT_LIB" not in (env or {}):
            # the builder beside the interceptor loads and binds (src/cli/run.c)
            assert "taskcache run: warning" not in p.stderr, p.stderr
        p.fake = fake_log.read_text().splitlines() if fake_log.exists() else []
        p.log = tc_log.read_text().splitlines() if tc_log.exists() else []
        return p

    def last_cubin(self):
        files = sorted(self.saved.glob("*.cubin"), key=lambda f: int(f.stem))
        return files[-1].read_bytes()


def reference(ptx, tmp_path, *opts, arch=ARCH):
    """The image the interceptor builds, made by `taskcache build`."""
    out = tmp_path / ("ref%d.cubin" % len(list(tmp_path.glob("ref*.cubin"))))
    build(ptx, out, None, "--arch", arch, *as_a_host(), *opts)
    return out.read_bytes()


def object_reference(ptx, tmp_path, *ptxas_opts):
    """The sections of the relocatable object `ptxas -c` makes (the driver's
    link compiles PTX so), but for the tool note, which names the tool."""
    out = tmp_path / ("ref%d.o" % len(list(tmp_path.glob("ref*.o"))))
    run_tool([PTXAS, f"-arch={ARCH}", "-c", *ptxas_opts, ptx, "-o", out])
    return code_of(out.read_bytes())


def code_of(elf):
    return {n: b for n, b in elfsyms.sections(elf).items() if not n.startswith(".note")}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("action", ["load", "loadex", "library"])
def test_ptx_loads_become_taskcache_cubins(tmp_path, ptx, path, action):
    run = Run(tmp_path)
    p = run(path, action, ptx)
    call = {"load": "cuModuleLoadData", "loadex": "cuModuleLoadData",
            "library": "cuLibraryLoadData"}[action]
    loads = [l for l in p.fake if l.startswith(call + " ")]
    assert len(loads) == 1 and loads[0].split()[1] == "ELF", p.fake
    assert run.last_cubin() == reference(ptx, tmp_path)
    # three small kernels fit in one unit: one compile of the module, no link
    assert any("built with taskcache: 3 kernels, compiled whole" in l for l in p.log), p.log
    # the compiler whose code the driver was given, with its release
    assert any(re.search(r"built with taskcache: .*; compiler: (ptxas \S+ \(release "
                         r"|nvPTXCompiler )", l) for l in p.log), p.log
    # each line names the process and when it was written, to line up with the program's clock
    when = datetime.datetime.fromisoformat(p.log[0].split()[1].rstrip(":"))
    assert p.log[0].startswith("taskcache[") and abs(when.timestamp() - time.time()) < 300, p.log
    if action == "library":  # the preserve option is not passed on with our image
        assert loads[0].endswith("liboptions=0"), loads
    # a second process is served from the cache
    p = run(path, action, ptx)
    assert any("module record hit" in l for l in p.log), p.log


def linked_inputs(p):
    """What the fake driver's link got: [type, what] per cuLinkAddData."""
    return [l.split()[2:4] for l in p.fake if l.startswith("cuLinkAddData")]


@pytest.mark.parametrize("path", PATHS + ["proc-old"])
def test_a_link_gets_the_object_the_driver_would_compile(tmp_path, ptx, path):
    """The driver compiles a link's PTX as relocatable code (ptxas -c) and
    links the objects: taskcache builds that object and the driver links it."""
    run = Run(tmp_path)
    p = run(path, "link", ptx)
    assert linked_inputs(p) == [["type=0", "ELF"]], p.fake
    assert "cuLinkComplete inputs=1" in p.fake
    assert code_of(run.last_cubin()) == object_reference(ptx, tmp_path)
    assert any("cuLinkAddData: built with taskcache: 3 kernels" in l for l in p.log), p.log
    assert p.fake[-1] == "cuLinkDestroy"
    version = "v1" if path == "proc-old" else "v2"
    assert [l for l in p.fake if l.startswith("cuLinkCreate")][0].split()[1] == version
    p = run(path, "link", ptx)  # a second process: one record read
    assert any("module record hit" in l for l in p.log), p.log


def test_a_ptx_file_in_a_link(tmp_path, ptx):
    run = Run(tmp_path)
    p = run("proc2", "linkfile", ptx)
    assert not any(l.startswith("cuLinkAddFile") for l in p.fake), p.fake
    assert linked_inputs(p) == [["type=0", "ELF"]], p.fake
    assert code_of(run.last_cubin()) == object_reference(ptx, tmp_path)


def test_every_ptx_input_of_a_link_is_built(tmp_path, ptx):
    """Each PTX input becomes an object; other inputs go to the driver as given."""
    run = Run(tmp_path)
    other = nvcc_ptx(KERNELS.replace("ka", "xa").replace("kb", "xb").replace("kc", "xc"),
                     tmp_path / "o.ptx")
    p = run("proc2", "link", ptx, other)
    assert linked_inputs(p) == [["type=0", "ELF"], ["type=0", "ELF"]], p.fake
    assert any(l.startswith("cuLinkComplete inputs=2") for l in p.fake)
    cubin = tmp_path / "k.cubin"
    build(ptx, cubin, None)
    p = run("proc2", "link", other, cubin)
    assert linked_inputs(p) == [["type=0", "ELF"], ["type=0", "ELF"]], p.fake
    assert run.last_cubin() == cubin.read_bytes()  # the program's own, untouched


@pytest.mark.parametrize("opts,mapped", [
    # an input's option replaces the link's, also with the default value
    (["opt=0", "in.opt=4"], []),
    (["lineinfo=1", "in.lineinfo=0"], []),
    # a later value replaces an earlier one
    (["opt=0", "opt=4"], []),
    # as many options as the driver takes
    (["maxreg=200", "opt=2", "lineinfo=1", "cache=1", "split=4", "in.opt=0"],
     ["--maxrregcount=200", "-O0", "-lineinfo", "--def-load-cache=cg", "--split-compile=4"]),
])
def test_link_options_combine_as_in_the_driver(tmp_path, ptx, opts, mapped):
    run = Run(tmp_path)
    p = run("proc2", "link", ptx, *opts)
    assert linked_inputs(p) == [["type=0", "ELF"]], p.fake
    assert code_of(run.last_cubin()) == object_reference(ptx, tmp_path, *mapped)


def test_a_link_compiles_for_the_context_it_was_created_in(tmp_path, ptx):
    """cuLinkCreate needs a current context, and the link is that
    context's: an input added while another device's context is current is
    still compiled for the link's device (sm_90 here, the other one sm_80)."""
    run = Run(tmp_path)
    env = {"FAKE_CUDA_CC": "90,80", "JIT_CLIENT_SWITCH_DEVICE": "1"}
    p = run("proc2", "link", ptx, env=env)
    assert linked_inputs(p) == [["type=0", "ELF"]], p.fake
    assert code_of(run.last_cubin()) == object_reference(ptx, tmp_path)
    # created in the sm_80 device's context: built for sm_80, which PTX
    # written for sm_90 cannot be, so the driver gets the PTX
    p = run("proc2", "link", ptx, env={"FAKE_CUDA_CC": "90,80", "FAKE_CUDA_DEVICE": "1",
                                       "JIT_CLIENT_SWITCH_DEVICE": "0"})
    assert linked_inputs(p) == [["type=1", "PTX"]], p.fake


@pytest.mark.parametrize("action,opts,why", [
    ("link", ["in.target=80"], "JIT option 9 for a link input"),
    ("link", ["in.wall=0"], "JIT option 2 for a link input"),
    ("loadex", ["maxreg=0"], "maximum registers 0"),
])
def test_options_the_driver_refuses_go_to_it(tmp_path, ptx, action, opts, why):
    """The driver fails these calls (CUDA_ERROR_INVALID_VALUE): it gets them."""
    run = Run(tmp_path)
    p = run("proc2", action, ptx, *opts)
    got = linked_inputs(p) if action == "link" else \
        [l.split()[1:2] for l in p.fake if l.startswith("cuModuleLoadDataEx")]
    assert got[0][-1] == "PTX", p.fake
    assert any(why in l and "passed to the driver" in l for l in p.log), p.log


@pytest.mark.parametrize("opts,mapped", [
    (["maxreg=32", "opt=2", "lineinfo=1"], ["--maxrregcount", "32", "-O2", "-lineinfo"]),
    (["opt=4", "fma=0"], []),  # the default level; FMA applies to NVVM IR only
    (["cache=1"], ["-Xptxas", "--def-load-cache=cg"]),
])
def test_jit_options_map_to_build_options(tmp_path, ptx, opts, mapped):
    run = Run(tmp_path)
    p = run("dlsym", "loadex", ptx, *opts, "logs=1")
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"], p.fake
    assert run.last_cubin() == reference(ptx, tmp_path, *mapped)
    out = dict(l.split(" ", 1) for l in p.stdout.splitlines() if " " in l)
    assert out["error"] == "" or out["error"].strip() == "", out
    assert float(out["wall"]) > 0


def test_whole_program_units(tmp_path, ptx):
    run = Run(tmp_path)
    p = run("proc2", "load", ptx, env={"TASKCACHE_UNIT_CODE": "whole-program"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"]
    assert run.last_cubin() == reference(ptx, tmp_path, "--whole-program-units")


def test_the_target_option_chooses_the_architecture(tmp_path, ptx):
    older = tmp_path / "sm80.ptx"
    older.write_text(open(ptx).read().replace(".target sm_90", ".target sm_80"))
    run = Run(tmp_path)
    run("proc1", "loadex", older, "target=80")
    assert run.last_cubin() == reference(older, tmp_path, arch="sm_80")
    # without it, the context's device
    run("proc1", "loadex", older, env={"FAKE_CUDA_CC": "89"})
    assert run.last_cubin() == reference(older, tmp_path, arch="sm_89")
    # PTX for a newer architecture than the device's: the driver's to refuse
    p = run("proc1", "loadex", ptx, env={"FAKE_CUDA_CC": "80"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]


@pytest.mark.parametrize("opts,why", [
    (["threads=128"], "JIT option 1"),
    (["verbose=1"], "JIT option 12 = 1"),
])
def test_options_taskcache_cannot_reproduce_go_to_the_driver(tmp_path, ptx, opts, why):
    run = Run(tmp_path)
    p = run("linked", "loadex", ptx, *opts)
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadDataEx")] == ["PTX"]
    assert any(why in l and "passed to the driver" in l for l in p.log), p.log


def test_binaries_and_bad_ptx_go_to_the_driver(tmp_path, ptx):
    run = Run(tmp_path)
    cubin = tmp_path / "k.cubin"
    build(ptx, cubin, None)
    p = run("dlsym", "load", cubin)
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"]
    assert p.log == []  # not even looked at
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90\nFAKE_INVALID\n")
    p = run("dlsym", "loadex", bad, "logs=1", check=False)
    assert p.returncode == 1
    assert "result 218" in p.stdout  # the driver's own error
    assert "error ptxas application ptx input, line 1; fatal   : fake parse error" in p.stdout
    assert any("passed to the driver: TC_ERR_PARSE" in l for l in p.log), p.log


def test_off_switch_measure_mode_and_no_taskcache(tmp_path, ptx):
    run = Run(tmp_path)
    p = run("proc2", "load", ptx, env={"TASKCACHE_INTERCEPT": "0"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]
    assert p.log == []
    # measure: the driver compiles, the log says how long it took
    for action in ("load", "link"):
        p = run("proc2", action, ptx, env={"TASKCACHE_INTERCEPT": "measure"})
        assert any(l.split()[3] == "PTX" if l.startswith("cuLinkAddData") else
                   l.split()[1] == "PTX" for l in p.fake if l.startswith(("cuModuleLoadData",
                                                                          "cuLinkAddData")))
        assert any("the driver compiled" in l for l in p.log), p.log
    p = run("proc2", "load", ptx, under_taskcache=False)
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]


def test_a_program_that_disables_the_drivers_ptx_jit_gets_the_drivers_answer(tmp_path, ptx):
    """CUDA_DISABLE_PTX_JIT=1 makes the driver refuse PTX (a program checks
    with it that its fatbins hold machine code): the PTX goes to the driver,
    so the program sees that refusal, not a cubin built by taskcache."""
    run = Run(tmp_path)
    p = run("proc2", "load", ptx, env={"CUDA_DISABLE_PTX_JIT": "1"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]
    assert any("CUDA_DISABLE_PTX_JIT is set" in l for l in p.log), p.log
    p = run("proc2", "load", ptx, env={"CUDA_DISABLE_PTX_JIT": "0"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"]


def test_disabling_the_drivers_ptx_jit_once_running_is_seen_at_the_next_load(tmp_path, ptx):
    """A program may set CUDA_DISABLE_PTX_JIT after it started (Python
    sets os.environ after the interpreter has looked up symbols): every load
    asks again."""
    run = Run(tmp_path)
    p = run("dlsym", "load", ptx, env={"JIT_CLIENT_SETENV": "CUDA_DISABLE_PTX_JIT=1"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]
    assert any("CUDA_DISABLE_PTX_JIT is set" in l and "passed to the driver" in l
               for l in p.log), p.log


def test_a_library_for_devices_of_two_architectures_goes_to_the_driver(tmp_path, ptx):
    """The driver compiles a library's PTX for every device; one cubin
    stands for that only when they are alike (or the target is given)."""
    run = Run(tmp_path)
    p = run("dlsym", "library", ptx, env={"FAKE_CUDA_CC": "90,80"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuLibraryLoadData")] == ["PTX"]
    assert any("devices of more than one architecture" in l for l in p.log), p.log
    p = run("dlsym", "library", ptx, "target=90", env={"FAKE_CUDA_CC": "90,80"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuLibraryLoadData")] == ["ELF"]
    p = run("dlsym", "library", ptx, env={"FAKE_CUDA_CC": "90,90"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuLibraryLoadData")] == ["ELF"]
    # a module is loaded into the current context alone: its device's code
    p = run("dlsym", "load", ptx, env={"FAKE_CUDA_CC": "90,80"})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"]


def test_taskcache_stats_counts_what_the_interceptor_did(tmp_path, ptx):
    run = Run(tmp_path)
    build(ptx, tmp_path / "k.cubin", run.cache)
    assert "driver loads" not in tc("stats", "--cache-dir", run.cache).stdout  # none yet
    run("proc2", "load", ptx)                           # built (from the cache)
    run("proc1", "library", ptx)                        # built
    run("linked", "loadex", ptx, "threads=128")         # passed: an option taskcache lacks
    run("proc2", "load", ptx, env={"TASKCACHE_INTERCEPT": "0"})        # not seen
    run("proc2", "load", ptx, env={"TASKCACHE_INTERCEPT": "measure"})  # the driver's, measured
    other = nvcc_ptx(KERNELS.replace("k", "x"), tmp_path / "o.ptx")
    run("proc2", "link", ptx, other)  # each PTX input of a link built: 2
    s = stats(run.cache)
    assert (s["driver_built"], s["driver_passed"]) == (4, 1), s
    text = tc("stats", "--cache-dir", run.cache).stdout
    assert "driver loads built (taskcache run)" in text and "passed on to the driver" in text


def test_threads_and_fork(tmp_path, ptx):
    run = Run(tmp_path)
    others = []
    for k in range(4):
        others.append(nvcc_ptx(KERNELS.replace("k", f"t{k}k"), tmp_path / f"t{k}.ptx"))
    p = run("dlsym", "threads", 8, *others)
    assert "failures 0" in p.stdout
    loads = [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")]
    assert loads == ["ELF"] * 32
    p = run("dlsym", "fork", ptx)
    assert "child 0" in p.stdout
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"] * 2


def test_the_builder_is_loaded_by_the_first_call_that_may_carry_ptx(tmp_path, ptx):
    """What is preloaded into every process is small; all of taskcache (the
    builder) comes in with the first PTX load or link, so that a program's
    other processes (a shell, make, a compiler) start as without taskcache."""
    run = Run(tmp_path)
    maps = {"JIT_CLIENT_MAPS": "1"}
    mapped = lambda p: sorted(l.split()[1] for l in p.stdout.splitlines()
                              if l.startswith("mapped "))
    p = subprocess.run([TASKCACHE, "run", "--", "cat", "/proc/self/maps"], capture_output=True,
                       text=True, check=True)
    assert "libtaskcache_intercept.so" in p.stdout and "libtaskcache_jit.so" not in p.stdout
    cubin = tmp_path / "k.cubin"
    build(ptx, cubin, None)
    p = run("dlsym", "load", cubin, env=maps)  # a cubin goes to the driver as it is
    assert mapped(p) == ["libtaskcache_intercept.so"], p.stdout
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"]
    p = run("dlsym", "load", ptx, env=maps)
    assert mapped(p) == ["libtaskcache_intercept.so", "libtaskcache_jit.so"], p.stdout
    p = run("proc2", "link", cubin, env=maps)  # a link session may get PTX later
    assert mapped(p) == ["libtaskcache_intercept.so", "libtaskcache_jit.so"], p.stdout
    p = run("proc2", "load", ptx, env=dict(maps, TASKCACHE_INTERCEPT="0"))
    assert mapped(p) == ["libtaskcache_intercept.so"], p.stdout


def test_without_its_builder_the_interceptor_leaves_everything_to_the_driver(tmp_path, ptx):
    """The preloaded library alone (a broken install): every call reaches
    the driver as the program made it, and the log says why, once."""
    run = Run(tmp_path)
    alone = tmp_path / "alone" / "libtaskcache_intercept.so"
    alone.parent.mkdir()
    alone.write_bytes(LIB.read_bytes())
    env = {"TASKCACHE_INTERCEPT_LIB": str(alone)}
    p = run("dlsym", "load", ptx, env=env)
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]
    assert f"warning: {alone.parent}/libtaskcache_jit.so is missing" in p.stderr, p.stderr
    # turned off, it needs no builder and says nothing of one
    p = run("dlsym", "load", ptx, env=dict(env, TASKCACHE_INTERCEPT="off"))
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]
    assert "libtaskcache_jit.so" not in p.stderr, p.stderr
    p = run("proc2", "link", ptx, env=env)
    assert any(l.startswith("cuLinkAddData") and l.split()[3] == "PTX" for l in p.fake), p.fake
    assert any("image" in l for l in p.stdout.splitlines()), p.stdout
    p = run("dlsym", "threads", 4, ptx, env=env)
    assert "failures 0" in p.stdout
    why = [l for l in p.log if "cannot load the builder" in l]
    assert len(why) == 1 and "libtaskcache_jit.so" in why[0], p.log
    assert not (run.cache / "stats").exists() or stats(run.cache)["driver_built"] == 0


def test_a_builder_that_does_not_bind_is_named_by_taskcache_run(tmp_path, ptx):
    """A builder beside the interceptor that is not this taskcache's (a
    leftover of another version, a file of that name): the program runs,
    the driver compiles its PTX, and `taskcache run` says why on its own
    standard error (the interceptor says so only in its log)."""
    run = Run(tmp_path)
    lib_dir = tmp_path / "other"
    lib_dir.mkdir()
    (lib_dir / LIB.name).write_bytes(LIB.read_bytes())
    (lib_dir / "libtaskcache_jit.so").write_bytes((FAKE_DIR / "libcuda.so.1").read_bytes())
    p = run("linked", "load", ptx, env={"TASKCACHE_INTERCEPT_LIB": str(lib_dir / LIB.name)})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["PTX"]
    assert (f"warning: cannot use {lib_dir}/libtaskcache_jit.so (not this taskcache's builder"
            in p.stderr), p.stderr


def test_trace_names_every_call_that_reaches_the_interceptor(tmp_path, ptx):
    """TASKCACHE_INTERCEPT_TRACE=1 lists the calls whichever half takes them:
    the builder, or the preloaded part alone (interception off, the builder
    missing), which is when a trace is most wanted."""
    run = Run(tmp_path)
    cubin = tmp_path / "k.cubin"
    build(ptx, cubin, None)
    alone = tmp_path / "alone" / "libtaskcache_intercept.so"
    alone.parent.mkdir()
    alone.write_bytes(LIB.read_bytes())
    for env in ({}, {"TASKCACHE_INTERCEPT": "0"}, {"TASKCACHE_INTERCEPT_LIB": str(alone)}):
        p = run("linked", "link", ptx, cubin, env=dict(env, TASKCACHE_INTERCEPT_TRACE="1"))
        calls = [l.split(": ", 1)[1] for l in p.log if ": trace: " in l]
        assert [c.split("(")[0] for c in calls] == [
            "trace: cuLinkCreate_v2", "trace: cuLinkAddData_v2", "trace: cuLinkAddData_v2",
            "trace: cuModuleLoadData"], (env, p.log)
        assert calls[-1] == "trace: cuModuleLoadData(not PTX)", calls


def test_a_relative_preload_finds_its_builder_after_the_program_moves(tmp_path, ptx):
    """LD_PRELOAD may name the interceptor relative to the directory the
    program starts in; the builder is found beside it whatever directory
    the program is in when it first loads PTX."""
    run = Run(tmp_path)
    p = run("dlsym", "chdir", "/", "load", os.path.abspath(ptx), under_taskcache=False,
            env={"LD_PRELOAD": os.path.relpath(LIB), "TASKCACHE_DIR": str(run.cache),
                 "TASKCACHE_LOG": str(tmp_path / "direct.log")})
    assert [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData")] == ["ELF"], (
        (tmp_path / "direct.log").read_text())


def test_builds_hide_gpus_and_run_does_not(tmp_path):
    """libnvJitLink's first use initializes the CUDA driver (0.19 s on a GPU
    machine, 24 ms with no device visible), so the build commands hide the
    devices in their own process and the compilers they start, which run
    no GPU code; `taskcache run` hands the program its GPUs unchanged."""
    from tchelp import PTXAS
    seen = tmp_path / "seen"
    wrapper = tmp_path / "ptxas"
    wrapper.write_text(f'#!/bin/sh\nprintf %s "${{CUDA_VISIBLE_DEVICES-unset}}" > {seen}\n'
                       f'exec {PTXAS} "$@"\n')
    wrapper.chmod(0o755)
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 8.0\n.target sm_90\n.address_size 64\n"
                   ".visible .entry k(.param .u64 p)\n{\n ret;\n}\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
    p = build(str(ptx), tmp_path / "k.cubin", None, "--compiler", "ptxas", "--ptxas",
              str(wrapper), env=env)
    assert p.returncode == 0 and seen.read_text() == "", seen.read_text()
    lib = tmp_path / "libtaskcache_intercept.so"
    lib.write_bytes(b"")  # an empty stand-in: the loader skips it
    p = subprocess.run([TASKCACHE, "run", "--", "sh", "-c", 'printf %s "$CUDA_VISIBLE_DEVICES"'],
                       capture_output=True, text=True,
                       env=dict(env, TASKCACHE_INTERCEPT_LIB=str(lib)))
    assert p.returncode == 0 and p.stdout == "0", (p.stdout, p.stderr)


def test_run_command_line(tmp_path):
    p = subprocess.run([TASKCACHE, "run"], capture_output=True, text=True)
    assert p.returncode == 2 and "no command to run" in p.stderr
    p = subprocess.run([TASKCACHE, "run", "--", str(tmp_path / "missing")], capture_output=True,
                       text=True)
    assert p.returncode == 127 and "cannot run" in p.stderr
    # the library goes first in LD_PRELOAD (an empty stand-in here: the
    # loader skips it with a message, and sh runs as it would)
    lib = tmp_path / "libtaskcache_intercept.so"
    lib.write_bytes(b"")
    p = subprocess.run([TASKCACHE, "run", "--", "sh", "-c", "echo $LD_PRELOAD; exit 3"],
                       capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD="/x.so", TASKCACHE_INTERCEPT_LIB=str(lib)))
    assert p.returncode == 3
    assert p.stdout.strip() == f"{lib}:/x.so", p.stdout
    # named relative to the directory taskcache run starts in, it is
    # preloaded by its absolute name (it finds its builder beside itself,
    # whatever directory the program moves to)
    p = subprocess.run([os.path.abspath(TASKCACHE), "run", "--", "sh", "-c",
                        "echo $LD_PRELOAD"], capture_output=True, text=True, cwd=tmp_path,
                       env=dict(os.environ, TASKCACHE_INTERCEPT_LIB=lib.name))
    assert p.returncode == 0 and p.stdout.strip() == str(lib.resolve()), p.stdout
    p = subprocess.run([TASKCACHE, "help", "run"], capture_output=True, text=True)
    assert p.returncode == 0 and "Quadrants" in p.stdout


# A builder that takes its time in its constructor, inside dlopen, and
# must not be used before that ends (a builder used half-loaded, its
# relocations not all done, crashed a child forked meanwhile).
SLOW_BUILDER = r"""
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef const void *(*bind_fn)(unsigned, const void *(*)(void), int);
static bind_fn real_bind;
static volatile int ready;
__attribute__((constructor)) static void slow(void)
{
    struct timespec t = {0, 600 * 1000000L};
    nanosleep(&t, NULL);
    void *h = dlopen(getenv("REAL_BUILDER"), RTLD_NOW | RTLD_LOCAL);
    void *s = h ? dlsym(h, "tc_jit_bind") : NULL;
    memcpy(&real_bind, &s, sizeof real_bind);
    ready = 1;
}
const void *tc_jit_bind(unsigned abi, const void *(*real)(void), int mode)
{
    if (!ready)
        abort();
    return real_bind ? real_bind(abi, real, mode) : NULL;
}
"""


def test_a_child_forked_while_the_builder_loads_leaves_it_to_the_driver(tmp_path, ptx):
    """A thread's first PTX load is loading the builder when the program
    forks: the child has the builder half loaded and no thread to finish
    it. Its PTX goes to the driver (it runs, as without taskcache); the
    parent's thread gets taskcache's cubin."""
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lib_dir = tmp_path / "slow"
    lib_dir.mkdir()
    shutil.copy(LIB, lib_dir / LIB.name)
    src = tmp_path / "slow_builder.c"
    src.write_text(SLOW_BUILDER)
    run_tool([cc, "-shared", "-fPIC", "-O1", src, "-o", lib_dir / "libtaskcache_jit.so", "-ldl"])
    run = Run(tmp_path)
    env = {"TASKCACHE_INTERCEPT_LIB": str(lib_dir / LIB.name),
           "REAL_BUILDER": str(BUILD / "libtaskcache_jit.so")}
    p = run("linked", "forkmid", 200, ptx, env=env)
    assert "child exit 0" in p.stdout, p.stdout + p.stderr
    loads = [l.split()[1] for l in p.fake if l.startswith("cuModuleLoadData ")]
    assert sorted(loads) == ["ELF", "PTX"], p.fake  # the parent's, and the child's


# ---- a review of the option and log handling (2026-12-02) ----------------------------------

WARNS = (".version 8.0\n.target sm_90\n.address_size 64\n"
         ".visible .entry wk(.param .u64 out) .minnctapersm 4\n{\n .reg .u64 po;\n"
         " ld.param.u64 po, [out];\n st.global.u32 [po], 1;\n ret;\n}\n"
         ".visible .entry wk2(.param .u64 out) .maxnreg 300\n{\n .reg .u64 po;\n"
         " ld.param.u64 po, [out];\n st.global.u32 [po], 2;\n ret;\n}\n")


def test_the_info_log_holds_the_warnings_as_the_driver_writes_them(tmp_path):
    """The H200's driver (580) writes "ptxas application ptx input, line N;
    warning : ..." for a warning about a line and "ptxas warning : ..." for
    one about none (docs/benchmarks.md); taskcache's own warnings (here: a
    cache it cannot create) are not the compiler's and stay out of it."""
    src = tmp_path / "w.ptx"
    src.write_text(WARNS)
    line = re.search(r"line (\d+); warning : \.minnctapersm",
                     run_tool([PTXAS, f"-arch={ARCH}", src, "-o", tmp_path / "r.cubin"]).stderr)
    assert line, "ptxas no longer warns here: the test needs another warning"
    run = Run(tmp_path)
    (tmp_path / "notadir").write_text("")
    for env in ({}, {"TASKCACHE_DIR": str(tmp_path / "notadir" / "cache")}):
        p = run("dlsym", "loadex", src, "logs=1", env=env)
        info = [l for l in p.stdout.splitlines() if l.startswith("info ")]
        assert info == [f"info ptxas application ptx input, line {line.group(1)}; warning : "
                        ".minnctapersm is ignored when neither .maxntid nor .reqntid is "
                        "specified."], p.stdout
        assert "ptxas warning : Too many maxnreg specified for entry wk2, will be ignored" \
            in p.stdout


def test_a_log_longer_than_its_buffer_is_left_empty_as_the_driver_does(tmp_path):
    """Sixty warnings need 6.5 KB; the program's buffer holds 4 KB. The
    driver then writes an empty log (size 0), not the part that fits."""
    kernels = "".join(f".visible .entry w{i}(.param .u64 out) .minnctapersm 4\n{{\n"
                      " .reg .u64 po;\n ld.param.u64 po, [out];\n st.global.u32 [po], 1;\n"
                      " ret;\n}\n" for i in range(60))
    src = tmp_path / "many.ptx"
    src.write_text(".version 8.0\n.target sm_90\n.address_size 64\n" + kernels)
    p = Run(tmp_path)("dlsym", "loadex", src, "logs=1")
    assert any(l.startswith("cuModuleLoadData ELF") for l in p.fake), p.fake
    assert "info " in p.stdout.splitlines(), p.stdout  # an empty log
    assert "minnctapersm" not in p.stdout


def test_a_link_input_with_no_nul_after_it_is_read_no_further(tmp_path, ptx):
    """cuLinkAddData's PTX is `size` bytes: Rust's cust passes a slice with
    no NUL after it. Here unreadable memory follows it: reading on faults."""
    run = Run(tmp_path)
    p = run("dlsym", "link", ptx, env={"JIT_CLIENT_NO_NUL": "1"})
    assert linked_inputs(p) == [["type=0", "ELF"]], p.fake  # taskcache's object
    assert code_of(run.last_cubin()) == object_reference(ptx, tmp_path)


@pytest.mark.parametrize("arrays", ["1", "values"])
def test_a_library_option_count_with_no_arrays_goes_to_the_driver(tmp_path, ptx, arrays):
    run = Run(tmp_path)
    env = {"JIT_CLIENT_NULL_LIBOPTS": arrays}
    mine = run("dlsym", "library", ptx, env=env, check=False)
    theirs = run("dlsym", "library", ptx, env=env, check=False, under_taskcache=False)
    assert mine.returncode == theirs.returncode and mine.returncode >= 0, mine.stderr
    assert [l.split()[:2] for l in mine.fake] == [l.split()[:2] for l in theirs.fake]


@pytest.mark.parametrize("args,why", [
    (["logs=2"], "a log buffer size with no buffer"),   # the H200's driver: INVALID_VALUE
    (["in.fallback=1"], "JIT option 10 for a link input"),  # the same, either value
    (["fallback=7"], "fallback strategy 7"),  # neither CU_PREFER_PTX nor CU_PREFER_BINARY
])
def test_what_the_driver_refuses_goes_to_the_driver(tmp_path, ptx, args, why):
    run = Run(tmp_path)
    action = "link" if args[0].startswith("in.") else "loadex"
    p = run("dlsym", action, ptx, *args, check=False)
    assert any(why in l and "passed to the driver" in l or
               why in l and "the driver compiles" in l for l in p.log), p.log


WRAPPER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
static __thread int depth;
pid_t getpid(void)
{
    static pid_t (*next)(void);
    if (++depth > 20) {
        fputs("wrapper: recursed\n", stderr);
        _exit(3);
    }
    if (!next) {
        void *p = dlsym(RTLD_NEXT, "getpid");
        Dl_info i;
        if (p && dladdr(p, &i))
            fprintf(stderr, "wrapper: next getpid in %s\n", i.dli_fname);
        *(void **)&next = p;
    }
    pid_t r = next ? next() : -1;
    depth--;
    return r;
}
"""


def test_a_wrapper_library_finds_the_next_definition(tmp_path):
    """dlsym(RTLD_NEXT) means the next definition after its caller, which
    the C library tells by the return address: through the interceptor's
    dlsym it looked after the interceptor, so a wrapper library (preloaded,
    as libfaketime is) found its own getpid and recursed (a review)."""
    (tmp_path / "wrap.c").write_text(WRAPPER)
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include <unistd.h>\n'
                                     'int main(void) { printf("%d\\n", getpid() > 0); return 0; }\n')
    lib, prog = tmp_path / "libwrap.so", tmp_path / "prog"
    run_tool(["cc", "-shared", "-fPIC", "-o", lib, tmp_path / "wrap.c", "-ldl"])
    run_tool(["cc", "-o", prog, tmp_path / "main.c"])
    env = dict(os.environ, LD_PRELOAD=str(lib))
    for cmd in ([prog], [TASKCACHE, "run", "--", prog]):
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
        assert p.returncode == 0 and p.stdout == "1\n", (cmd, p.stderr)
        assert "next getpid in" in p.stderr and "libwrap" not in p.stderr.split(" in ")[-1]


def test_verbose_lines_keep_to_the_programs_output(tmp_path, ptx):
    """-v wrote its lines through a descriptor of its own onto standard
    error: redirected to a file with the program's output, the program's
    next write, at its own offset, covered them (a review)."""
    out = tmp_path / "out.txt"
    script = f"echo first; {CLIENT} dlsym load {ptx}; echo last"
    e = dict(os.environ, LD_LIBRARY_PATH=str(FAKE_DIR), ASAN_OPTIONS="detect_leaks=0")
    with open(out, "w") as f:
        subprocess.run([TASKCACHE, "run", "-v", "--cache-dir", str(tmp_path / "c"), "--",
                        "sh", "-c", script], stdout=f, stderr=subprocess.STDOUT, env=e,
                       check=True, timeout=300)
    lines = out.read_text().splitlines()
    assert lines[0] == "first" and lines[-1] == "last", lines
    assert any(re.match(r"taskcache\[\d+\] \S+: cuModuleLoadData: built with taskcache", l)
               for l in lines), lines


def test_a_path_ld_preload_cannot_name(tmp_path, ptx):
    """LD_PRELOAD takes paths apart at spaces and colons: from a directory
    named so, the interceptor was not loaded, and the loader complained in
    every process. The program runs without taskcache, and one warning
    says why."""
    d = tmp_path / "my tools"
    d.mkdir()
    for f in (TASKCACHE, LIB, BUILD / "libtaskcache_jit.so"):  # copies: run finds its own
        shutil.copy2(pathlib.Path(f).resolve(), d / pathlib.Path(f).name)
    e = dict(os.environ, LD_LIBRARY_PATH=str(FAKE_DIR), ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([str(d / "taskcache"), "run", "--", str(CLIENT), "dlsym", "load", str(ptx)],
                       capture_output=True, text=True, env=e, timeout=300)
    assert p.returncode == 0 and "ERROR: ld.so" not in p.stderr, p.stderr
    assert p.stderr.count("cannot be preloaded") == 1 and "runs without taskcache" in p.stderr


RELOAD = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    (void)argc;
    for (int i = 0; i < 3; i++) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        void *(*look)(const char *);
        *(void **)&look = dlsym(h, "deep_lookup");
        Dl_info in;
        void *p = look("cuModuleLoadData");
        printf("%s\n", p && dladdr(p, &in) ? in.dli_fname : "none");
        dlclose(h);
    }
    return 0;
}
"""


def test_a_deepbind_library_loaded_again_is_rebound_again(tmp_path):
    """A library loaded with RTLD_DEEPBIND, closed and loaded again at the
    same address kept the C library's dlsym: the interceptor remembered the
    address as done (a review). Each load's lookup finds the stand-in."""
    (tmp_path / "reload.c").write_text(RELOAD)
    prog = tmp_path / "reload"
    run_tool(["cc", "-o", prog, tmp_path / "reload.c", "-ldl"])
    e = dict(os.environ, LD_LIBRARY_PATH=str(FAKE_DIR), ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([TASKCACHE, "run", "--cache-dir", str(tmp_path / "c"), "--", str(prog),
                        str(FAKE_DIR / "libdeep_lookup.so")], capture_output=True, text=True,
                       env=e, check=True, timeout=300)
    found = p.stdout.split()
    assert len(found) == 3 and all(f.endswith("libtaskcache_intercept.so") for f in found), found
