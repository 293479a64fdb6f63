"""`taskcache ptxas`: the ptxas command line cached per kernel. What it
takes it builds through the cache and reports as ptxas would; everything
else (and every failed build) reaches NVIDIA's ptxas unchanged, so exit
status and messages are ptxas's own. `taskcache shims` puts it where nvcc
and other tools look for ptxas."""

import os
import pathlib
import re

import pytest

from tchelp import ARCH, NVCC, PTXAS, ROOT, TASKCACHE, build, run, tc

PHYSICS = ROOT / "examples" / "physics_step.ptx"
EXE = os.path.abspath(TASKCACHE)  # some commands run in other directories


def kernels_ptx(n, edited=None, body=1):
    """A module of n kernels; kernel `edited` computes something else. body:
    statements of arithmetic per kernel (units hold ~500 statements)."""
    out = [".version 8.0", f".target {ARCH}", ".address_size 64",
           ".func (.param .b32 r) twice (.param .b32 x)",
           "{", " .reg .b32 %r<3>;", " ld.param.u32 %r1, [x];", " add.u32 %r2, %r1, %r1;",
           " st.param.b32 [r], %r2;", " ret;", "}"]
    for k in range(n):
        c = k + (1000 if k == edited else 0)
        out += [f".visible .entry k{k:03d} (.param .u64 out)", "{",
                " .reg .b32 %r<3>;", " .reg .b64 %rd<3>;", " ld.param.u64 %rd1, [out];",
                f" {{ .param .b32 a; .param .b32 b; st.param.b32 [a], {c}; "
                "call.uni (b), twice, (a); ld.param.b32 %r1, [b]; }",
                *[f" add.u32 %r1, %r1, {j};" for j in range(body)],
                " st.global.u32 [%rd1], %r1;", " ret;", "}"]
    return "\n".join(out) + "\n"


@pytest.fixture
def env(tmp_path):
    """The environment of a tool that calls ptxas: a private cache and log,
    NVIDIA's ptxas named explicitly."""
    return dict(os.environ, TASKCACHE_DIR=str(tmp_path / "cache"),
                TASKCACHE_LOG=str(tmp_path / "log"), TASKCACHE_PTXAS=PTXAS)


def log_lines(env):
    p = pathlib.Path(env["TASKCACHE_LOG"])
    return p.read_text().splitlines() if p.exists() else []


def ptxas(env, *args, cwd=None, check=True, **kw):
    return run([EXE, "ptxas", *args], env=env, cwd=cwd, check=check, **kw)


def real(*args, cwd=None, **kw):
    return run([PTXAS, *args], cwd=cwd, check=False, **kw)


def same_answer(a, b):
    return (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


# ---- what it builds -------------------------------------------------------------------

def test_builds_the_cubin_taskcache_build_builds_then_serves_it(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(12))
    ptxas(env, f"-arch={ARCH}", "-m64", str(src), "-o", str(tmp_path / "a.cubin"))
    # 12 small kernels fit in one unit: the module is compiled whole, by
    # that ptxas (not the in-process compiler) with the options given and
    # none of taskcache's own: ptxas's file, for the command taskcache
    # gives it (ptxas records its options in the file, and taskcache
    # always asks for -v's report; -m64, the only mode, it leaves out)
    real(f"-arch={ARCH}", "-v", str(src), "-o", str(tmp_path / "b.cubin"))
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    # a second call is one record read, and writes the same bytes
    ptxas(env, f"-arch={ARCH}", "-m64", str(src), "-o", str(tmp_path / "c.cubin"))
    assert (tmp_path / "c.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    log = log_lines(env)
    assert "12 kernels in" in log[0] and "0 from cache" in log[0]
    assert "module record hit" in log[1]


def test_an_edit_compiles_only_its_unit(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(40, body=200))
    ptxas(env, f"--gpu-name={ARCH}", str(src), "-o", str(tmp_path / "a.cubin"))
    src.write_text(kernels_ptx(40, edited=17, body=200))
    ptxas(env, f"--gpu-name={ARCH}", str(src), "-o", str(tmp_path / "b.cubin"))
    m = re.search(r"40 kernels in (\d+) units: (\d+) from cache, (\d+) compiled", log_lines(env)[1])
    units, hits, compiled = map(int, m.groups())
    assert units > 2 and compiled == 1 and hits == units - 1


def test_option_spellings_and_order_make_one_key(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(3))
    ptxas(env, f"-arch={ARCH}", "-O3", "-lineinfo", "--fmad=false", "-maxrregcount=64", str(src),
          "-o", str(tmp_path / "a.cubin"))
    ptxas(env, "--maxrregcount", "64", "-fmad", "false", "--generate-line-info",
          "--opt-level=3", "--gpu-name", ARCH, "--output-file", str(tmp_path / "b.cubin"),
          str(src), "-v", "--warn-on-spills")  # report options are not in the key
    assert "module record hit" in log_lines(env)[1]
    # an option that changes the code is in the key
    ptxas(env, f"-arch={ARCH}", "-O1", str(src), "-o", str(tmp_path / "c.cubin"))
    assert "module record hit" not in log_lines(env)[2]


@pytest.mark.parametrize("name", ["linkage", "names", "indirect_calls", "initializers",
                                  "textures"])
def test_a_module_compiled_whole_is_ptxas_own_file(tmp_path, env, name):
    """Modules of a few kernels are compiled whole: byte for byte what ptxas
    writes for that command (with -v, which taskcache adds), where
    `taskcache build` would add a compiler thread per CPU (the same code,
    but the symbols of these modules in another order)."""
    src = ROOT / "tests" / "corpus" / "ptx" / f"{name}.ptx"
    ptxas(env, f"-arch={ARCH}", str(src), "-o", str(tmp_path / "a.cubin"))
    assert "kernels in 0 units" in log_lines(env)[0]
    real(f"-arch={ARCH}", "-v", str(src), "-o", str(tmp_path / "b.cubin"))
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()


def test_without_o_the_cubin_is_elf_o_as_with_ptxas(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(2))
    (tmp_path / "run").mkdir()
    ptxas(env, f"-arch={ARCH}", str(src), cwd=tmp_path / "run")
    assert (tmp_path / "run" / "elf.o").read_bytes()[:4] == b"\x7fELF"
    assert "from cache" in log_lines(env)[0]


def test_options_file(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(2))
    opts = tmp_path / "opts"
    opts.write_text(f'-arch={ARCH}\n-o "{tmp_path}/with space.cubin"\n')
    ptxas(env, "--options-file", str(opts), str(src))
    assert (tmp_path / "with space.cubin").exists()
    assert "kernels in" in log_lines(env)[0]


# ---- what it prints -------------------------------------------------------------------

# What ptxas prints with -v and --warn-on-*, line for line, but the value of
# "Compile time = X ms". These modules' whole-program units get the whole
# compile's code, so a split build prints ptxas's report too; the others'
# (function pointers, whose units are relocatable; globals_atomics, where two
# kernels get other registers in units) are compiled whole below.
CUDA = ROOT / "tests" / "corpus" / "cuda"
CUDA_MODULES = sorted(p.stem for p in CUDA.glob("*.cu"))
SAME_CODE_SPLIT = ["constant_mem", "coop_grid", "dependencies", "helpers", "math_kernels",
                   "params", "printf_kernels", "shared_mem", "templates", "warp_ops"]
SPLIT = {"TASKCACHE_UNIT_COST": "1"}  # one unit per kernel, however small the module


def masked(stderr):
    return re.sub(r"Compile time = [0-9.]+ ms", "Compile time = X ms", stderr)


@pytest.fixture(scope="module")
def cuda_ptx(tmp_path_factory):
    """name, arch, nvcc flags -> the PTX nvcc makes of tests/corpus/cuda/NAME.cu,
    once."""
    if not NVCC:
        pytest.skip("nvcc not found")
    d, made = tmp_path_factory.mktemp("cuda"), {}

    def get(name, arch=ARCH, *flags):
        if (name, arch, flags) not in made:
            made[name, arch, flags] = d / f"{name}.{arch}{''.join(flags)}.ptx"
            run([NVCC, f"-arch={arch}", "-ptx", *flags, CUDA / f"{name}.cu", "-o",
                 made[name, arch, flags]])
        return made[name, arch, flags]
    return get


def compilers():
    """TASKCACHE_COMPILER settings: ptxas processes (what taskcache ptxas
    uses), and the in-process compiler where this build has it."""
    have = "with the in-process compiler" in tc("version").stdout
    return [{}, {"TASKCACHE_COMPILER": "inprocess"}] if have else [{}]


def same_report(tmp_path, env, src, args, plan):
    """Runs ptxas and taskcache ptxas (cold, then from the module record) with
    args on src: the same standard error but the compile times. plan: what
    the cold run's log line must say of its build ("(whole module)",
    "(split")."""
    out = ["-o", str(tmp_path / "out")]
    theirs = real(*args, str(src), out[0], str(tmp_path / "ref"))
    assert theirs.returncode == 0, theirs.stderr
    for hit in (False, True):
        mine = ptxas(env, *args, str(src), *out)
        assert masked(mine.stderr).splitlines() == masked(theirs.stderr).splitlines(), hit
        log = log_lines(env)[-1]
        assert ("module record hit" in log) == hit and (hit or plan in log), log
    return theirs.stderr


@pytest.mark.parametrize("name", CUDA_MODULES)
def test_v_is_ptxas_report_whole(tmp_path, env, cuda_ptx, name):
    """A module compiled whole prints ptxas's -v report: the module's memory,
    per kernel (in ptxas's order) its resources with barriers and compile
    time, and the functions it calls; from the compile and from the record,
    whichever compiler builds."""
    for i, compiler in enumerate(compilers()):
        e = dict(env, TASKCACHE_DIR=f"{env['TASKCACHE_DIR']}{i}", **compiler)
        report = same_report(tmp_path, e, cuda_ptx(name), [f"-arch={ARCH}", "-v"],
                             "(whole module)")
        assert "bytes gmem" in report and " barriers" in report


@pytest.mark.parametrize("plan", ["whole", "split"])
def test_build_with_xptxas_v_prints_ptxas_report(tmp_path, cuda_ptx, plan):
    """taskcache build -Xptxas -v, as nvcc users write it: ptxas's report
    after the build, cold and from the module record; the report is not
    part of the key, so a build without it is served by the same record."""
    src, cache, out = cuda_ptx("templates"), str(tmp_path / "cache"), tmp_path / "o.cubin"
    theirs = real(f"-arch={ARCH}", "-v", str(src), "-o", str(tmp_path / "ref"))
    split = ["--unit-cost", "1"] if plan == "split" else []
    for hit in (False, True):
        mine = build(str(src), out, cache, "-Xptxas", "-v", "-v", *split)
        report = [l for l in mine.stderr.splitlines() if not l.startswith("taskcache:")]
        assert masked("\n".join(report)).splitlines() == masked(theirs.stderr).splitlines(), hit
        assert ("module record hit" in mine.stderr) == hit, mine.stderr
    plain = build(str(src), out, cache, "-v", *split)
    assert "module record hit" in plain.stderr and "ptxas info" not in plain.stderr


@pytest.mark.parametrize("name", SAME_CODE_SPLIT)
def test_v_is_ptxas_report_split(tmp_path, env, cuda_ptx, name):
    """The same report from a split build: each kernel's lines from its own
    unit, in ptxas's order, with the cumulative stack size a unit cannot know
    (printf_kernels, math_kernels) read from the linked image."""
    for i, compiler in enumerate(compilers()):
        e = dict(env, TASKCACHE_DIR=f"{env['TASKCACHE_DIR']}{i}", **compiler, **SPLIT)
        same_report(tmp_path, e, cuda_ptx(name), [f"-arch={ARCH}", "-v"], "(split")


# (ptxas options, nvcc options of the PTX: -lineinfo writes .loc directives)
@pytest.mark.parametrize("opts,nvcc_opts", [
    (["-c"], []), (["-lineinfo"], []), (["-lineinfo"], ["-lineinfo"]), (["-O0"], []),
    (["--warn-on-spills", "--warn-on-local-memory-usage"], []),
    (["-maxrregcount", "24", "--warn-on-spills", "--warn-on-local-memory-usage"], []),
], ids=["c", "lineinfo", "lineinfo-loc", "O0", "warn", "maxrregcount-warn"])
@pytest.mark.parametrize("plan", ["whole", "split"])
@pytest.mark.parametrize("name", ["helpers", "printf_kernels", "templates"])
def test_v_with_options_is_ptxas_report(tmp_path, env, cuda_ptx, name, plan, opts, nvcc_opts):
    """-v with the options that change what is compiled or printed: -c's
    functions compiled on their own, -maxrregcount's register limits (before
    compiling), the warnings of kernels and of the functions they call (at
    24 registers helpers' recursive functions spill; printf's kernels use
    local memory). Line information, from -lineinfo or from nvcc -lineinfo's
    .loc directives, compiles a module whole (linked units' line tables
    are not ptxas's)."""
    if plan == "split":
        env = dict(env, **SPLIT)
    src = cuda_ptx(name, ARCH, *nvcc_opts)
    whole = plan == "whole" or "-c" in opts or "-lineinfo" in opts
    expect = "(whole module)" if whole else "(split"
    report = same_report(tmp_path, env, src, [f"-arch={ARCH}", "-v", *opts], expect)
    if "-maxrregcount" in opts:
        assert "Overriding maximum register limit" in report
    if name != "templates" and "--warn-on-spills" in opts:
        assert "ptxas warning : Local memory used" in report


@pytest.mark.parametrize("name", ["helpers", "printf_kernels", "math_kernels"])
@pytest.mark.parametrize("plan", ["whole", "split"])
def test_warnings_alone_are_ptxas_warnings(tmp_path, env, cuda_ptx, name, plan):
    """--warn-on-spills / --warn-on-local-memory-usage without -v: ptxas's
    warnings, for device functions too, a kernel's local memory being its
    cumulative stack size, no spill warning for spills one way only."""
    if plan == "split":
        env = dict(env, **SPLIT)
    args = [f"-arch={ARCH}", "--warn-on-spills", "--warn-on-local-memory-usage",
            "-maxrregcount", "24"]
    report = same_report(tmp_path, env, cuda_ptx(name), args,
                         "(whole module)" if plan == "whole" else "(split")
    assert "ptxas warning : Local memory used" in report


@pytest.mark.parametrize("plan", ["whole", "split"])
@pytest.mark.parametrize("name", ["constant_mem", "shared_mem", "templates"])
def test_v_before_sm_90_names_constant_banks(tmp_path, env, cuda_ptx, name, plan):
    """Before sm_90 ptxas prints the constant banks too: the module's
    (cmem[3], __constant__ data) from the image, each kernel's in its
    lines."""
    if plan == "split":
        env = dict(env, **SPLIT)
    report = same_report(tmp_path, env, cuda_ptx(name, "sm_80"), ["-arch=sm_80", "-v"],
                         "(whole module)" if plan == "whole" else "(split")
    assert "cmem[0]" in report


def test_v_of_a_large_module_split_by_default(tmp_path, env):
    """A module large enough to be split without asking (units of several
    kernels, each unit's log in its own order): ptxas's report."""
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(40, body=200))
    same_report(tmp_path, env, src, [f"-arch={ARCH}", "-v"], "(split")


def test_v_after_an_edit_is_ptxas_report(tmp_path, env):
    """After an edit of one kernel, whose unit alone is compiled, the others'
    lines come from their unit records."""
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(40, body=200))
    ptxas(env, f"-arch={ARCH}", "-v", str(src), "-o", str(tmp_path / "a.cubin"))
    src.write_text(kernels_ptx(40, edited=17, body=200))
    same_report(tmp_path, env, src, [f"-arch={ARCH}", "-v"], " 1 compiled (split")


def test_v_of_split_code_that_differs_prints_its_own_figures(tmp_path, env):
    """physics_step at 24 registers, split: a few kernels' units get other
    code than the whole compile (other registers, spills), and the report
    says so; everything else is ptxas's: the same lines, figures aside, and
    the warnings are those its figures make by ptxas's rule."""
    args = [f"-arch={ARCH}", "-v", "--warn-on-spills", "--warn-on-local-memory-usage",
            "-maxrregcount", "24", str(PHYSICS), "-o", str(tmp_path / "a.cubin")]
    first = ptxas(env, *args).stderr
    assert "(split" in log_lines(env)[0]
    again = ptxas(env, *args).stderr          # from the module record: the same lines
    assert again == first and "module record hit" in log_lines(env)[1]
    ref = real(*args[:-1], str(tmp_path / "ref.cubin")).stderr

    def shape(text):  # the lines but their figures (a stack is one) and the warnings
        return [re.sub(r"\d+(\.\d+)?", "N", re.sub(r", \d+ bytes cumulative stack size", "", x))
                for x in text.splitlines() if not x.startswith("ptxas warning")]
    assert shape(first) == shape(ref)
    assert "ptxas warning : Registers are spilled" in first
    for text in (first, ref):
        assert [x for x in text.splitlines() if x.startswith("ptxas warning")] == warnings_of(text)


def warnings_of(report):
    """ptxas's --warn-on-* lines for a -v report: per "Function properties",
    in order, local memory when there is a frame (a kernel's: its cumulative
    stack size) and spills when there are both stores and loads."""
    out, lines, kernel = [], report.splitlines(), None
    for i, line in enumerate(lines):
        m = re.match(r"ptxas info    : Compiling entry function '([^']+)'", line)
        kernel = m.group(1) if m else kernel
        m = re.match(r"ptxas info    : Function properties for (\S+)$", line)
        if not m:
            continue
        f, s, ld = map(int, re.match(r"    (\d+) bytes stack frame, (\d+) bytes spill stores, "
                                     r"(\d+) bytes spill loads$", lines[i + 1]).groups())
        used = re.search(r"(\d+) bytes cumulative stack size", (lines[i + 2:] or [""])[0])
        if m.group(1) == kernel and used:
            f = max(f, int(used.group(1)))
        if f:
            out.append(f"ptxas warning : Local memory used for function '{m.group(1)}', "
                       f"size of stack frame: {f} bytes")
        if s and ld:
            out.append(f"ptxas warning : Registers are spilled to local memory in function "
                       f"'{m.group(1)}', {s} bytes spill stores, {ld} bytes spill loads")
    return out


WARNS = (".version 8.0\n.target sm_90\n.address_size 64\n"
         ".visible .entry wk(.param .u64 out) .minnctapersm 4\n{\n .reg .u64 po;\n"
         " ld.param.u64 po, [out];\n st.global.u32 [po], 1;\n ret;\n}\n"
         ".visible .entry wk2(.param .u64 out) .maxnreg 300\n{\n .reg .u64 po;\n"
         " ld.param.u64 po, [out];\n st.global.u32 [po], 2;\n ret;\n}\n")


def test_a_copy_under_another_name_gets_the_warnings_under_its_name(tmp_path, env):
    """nvcc and XLA hand ptxas a new temporary file each time: a module
    record hit prints ptxas's warnings for the file of this command, as
    ptxas would, not the name of the build that stored the record."""
    for name in ("first.ptx", "second.ptx"):
        (tmp_path / name).write_text(WARNS)
    ptxas(env, f"-arch={ARCH}", str(tmp_path / "first.ptx"), "-o", str(tmp_path / "a.cubin"))
    mine = ptxas(env, f"-arch={ARCH}", str(tmp_path / "second.ptx"), "-o",
                 str(tmp_path / "b.cubin"))
    assert "module record hit" in log_lines(env)[-1]
    theirs = real(f"-arch={ARCH}", str(tmp_path / "second.ptx"), "-o", str(tmp_path / "c.cubin"))
    assert "second.ptx, line" in theirs.stderr  # what this test needs of ptxas
    assert mine.stderr == theirs.stderr
    # the library's own builds too
    for name in ("first.ptx", "second.ptx"):
        p = tc("build", tmp_path / name, "-o", tmp_path / "d.cubin", "--arch", ARCH, "-v",
               env=env)
    assert "module record hit" in p.stderr
    assert f"{tmp_path / 'second.ptx'}:" in p.stderr and "first.ptx" not in p.stderr


def test_a_warning_about_the_module_comes_once_from_a_split_build(tmp_path, env):
    """Each unit's compile says what ptxas says once of the module (the
    register limit raised to its lower bound): printed once."""
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(40, body=200))
    mine = ptxas(env, f"-arch={ARCH}", "-maxrregcount", "16", str(src), "-o",
                 str(tmp_path / "a.cubin"))
    m = re.search(r"40 kernels in (\d+) units", log_lines(env)[0])
    assert m and int(m.group(1)) > 2
    theirs = real(f"-arch={ARCH}", "-maxrregcount", "16", str(src), "-o", str(tmp_path / "b.cubin"))
    assert theirs.stderr.count("lower bound") == 1
    assert mine.stderr == theirs.stderr


WGMMA = """.version 8.4
.target sm_90a
.address_size 64
.visible .entry mma(.param .u64 p)
{
 .reg .f16x2 %a<4>;
 .reg .f32 %d<4>;
 .reg .b64 %desc;
 wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16
   {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, %desc, 1, -1, -1, 1;
 mov.f32 %d0, 0f00000000;
 wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16
   {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, %desc, 1, -1, -1, 1;
 wgmma.commit_group.sync.aligned;
 wgmma.wait_group.sync.aligned 0;
 ret;
}
"""


def test_ptxas_advice_is_printed_as_ptxas_prints_it(tmp_path, env):
    """Without -v ptxas still prints numbered advice ("ptxas info    :
    (C7511) Potential Performance Loss: ..."); so does taskcache ptxas, from
    the compile and from the record."""
    src = tmp_path / "mma.ptx"
    src.write_text(WGMMA)
    theirs = real("--gpu-name", "sm_90a", "-O0", str(src), "-o", str(tmp_path / "r.o"))
    assert "(C75" in theirs.stderr  # what this test needs of ptxas
    for _ in range(2):  # compiled, then a module record hit
        mine = ptxas(env, "--gpu-name", "sm_90a", "-O0", str(src), "-o", str(tmp_path / "t.o"))
        assert mine.stderr == theirs.stderr
    assert "module record hit" in log_lines(env)[-1]


def test_quiet_without_report_options(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(3))
    p = ptxas(env, f"-arch={ARCH}", str(src), "-o", str(tmp_path / "a.cubin"))
    assert p.stdout == "" and p.stderr == ""


# ---- what goes to NVIDIA's ptxas --------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["--version"],
    ["--bogus-option", "{src}"],
    [f"-arch={ARCH}", "-O", "3", "{src}"],                  # -O 3: 3 is an input to ptxas
    [f"-arch={ARCH}", "-O3", "-O2", "{src}", "-o", "{out}"],  # ptxas warns, takes the last
    [f"-arch={ARCH}", "{bad}", "-o", "{out}"],             # its error, its exit status
    [f"-arch={ARCH}", "{undefined}", "-o", "{out}"],       # an error found by compiling
    [f"-arch={ARCH}", "{missing}", "-o", "{out}"],
    [f"-arch={ARCH}", "-m32", "{src}", "-o", "{out}"],
    [f"-arch={ARCH}", "--fmad=1", "{src}", "-o", "{out}"],
    ["-arch=compute_90", "-m64", "{src}"],                  # nvcc's syntax check
    [f"-arch={ARCH}", "-c", "{undefined}", "-o", "{out}"],  # an object that does not compile
    [f"-arch={ARCH}"],
    [f"-arch={ARCH}", "{nul}", "-o", "{out}"],             # ptxas stops at a NUL, with an error
    ["-optf", "{formfeed}", "{src}"],                       # \f does not separate words there
])
def test_the_rest_is_ptxas_own_answer(tmp_path, env, args):
    (tmp_path / "m.ptx").write_text(kernels_ptx(2))
    (tmp_path / "bad.ptx").write_text("garbage\n")
    (tmp_path / "undefined.ptx").write_text(kernels_ptx(1).replace("call.uni (b), twice",
                                                                   "call.uni (b), nowhere"))
    (tmp_path / "nul.ptx").write_bytes(kernels_ptx(2).encode() + b"\0// more\n")
    (tmp_path / "formfeed").write_text(f"-arch {ARCH}\f-o x.cubin\n")
    names = dict(src=tmp_path / "m.ptx", bad=tmp_path / "bad.ptx", missing=tmp_path / "no.ptx",
                 undefined=tmp_path / "undefined.ptx", nul=tmp_path / "nul.ptx",
                 formfeed=tmp_path / "formfeed")
    for who in ("mine", "theirs"):
        (tmp_path / who).mkdir()
    mine_args = [a.format(out=tmp_path / "mine" / "x.cubin", **names) for a in args]
    theirs_args = [a.format(out=tmp_path / "theirs" / "x.cubin", **names) for a in args]
    mine = ptxas(env, *mine_args, cwd=tmp_path / "mine", check=False)
    theirs = real(*theirs_args, cwd=tmp_path / "theirs")
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout)
    assert mine.stderr == theirs.stderr.replace(str(tmp_path / "theirs"), str(tmp_path / "mine"))
    assert sorted(os.listdir(tmp_path / "mine")) == sorted(os.listdir(tmp_path / "theirs"))
    assert log_lines(env) and PTXAS in log_lines(env)[-1]  # the log says it went there


def test_a_pipe_goes_to_ptxas_unread(tmp_path, env):
    """A pipe can be read once: ptxas reads it, and gives its own answer
    (here its syntax error), which a build that failed could not."""
    text = kernels_ptx(1).replace(" ret;", " garbage_token\n ret;", 1)
    mine = ptxas(env, f"-arch={ARCH}", "/dev/stdin", "-o", str(tmp_path / "a.cubin"),
                 input=text, check=False)
    theirs = real(f"-arch={ARCH}", "/dev/stdin", "-o", str(tmp_path / "b.cubin"), input=text)
    assert theirs.returncode != 0 and "garbage_token" in theirs.stderr
    assert same_answer(mine, theirs)
    assert "not a regular file" in log_lines(env)[-1]


def test_c_builds_ptxas_own_relocatable_object_then_serves_it(tmp_path, env):
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(5))
    ptxas(env, f"-arch={ARCH}", "-c", str(src), "-o", str(tmp_path / "a.o"))
    ptxas(env, f"-arch={ARCH}", "--compile-only", str(src), "-o", str(tmp_path / "b.o"))
    # one compile of the whole module by that ptxas: its bytes, for the
    # command taskcache gives it (ptxas records its options in the object,
    # and taskcache always asks for -v's report)
    real(f"-arch={ARCH}", "-v", "-c", str(src), "-o", str(tmp_path / "ref.o"))
    ref = (tmp_path / "ref.o").read_bytes()
    assert (tmp_path / "a.o").read_bytes() == ref and (tmp_path / "b.o").read_bytes() == ref
    log = [x for x in log_lines(env) if " kernels" in x]
    assert "5 kernels in 0 units" in log[0] and "module record hit" in log[1]
    # an object and an image of one module are different records
    ptxas(env, f"-arch={ARCH}", str(src), "-o", str(tmp_path / "c.cubin"))
    assert "module record hit" not in log_lines(env)[-1]


def test_help(env):
    assert "cached per kernel" in ptxas(env, "--help").stdout
    assert "cached per kernel" in tc("help", "ptxas").stdout
    assert "nvcc.profile" in tc("help", "shims").stdout


def test_a_ptxas_that_leads_back_to_taskcache_stops(tmp_path, env):
    loop = tmp_path / "ptxas"
    loop.write_text(f"#!/bin/sh\nexec {EXE} ptxas \"$@\"\n")
    loop.chmod(0o755)
    env["TASKCACHE_PTXAS"] = str(loop)
    p = ptxas(env, "--version", check=False, timeout=30)
    assert p.returncode == 255 and "leads back to taskcache" in p.stderr


# ---- shims: where tools look for ptxas ---------------------------------------------------

def shims(tmp_path, env):
    d = tmp_path / "shims"
    tc("shims", d, env=env)
    return d / "bin"


def test_a_shim_named_ptxas_is_taskcache_ptxas(tmp_path, env):
    bin_ = shims(tmp_path, env)
    assert os.path.realpath(bin_ / "ptxas") == os.path.realpath(EXE)
    assert same_answer(run([bin_ / "ptxas", "--version"], check=False, env=env),
                       real("--version"))
    assert same_answer(run([bin_ / "ptxas", "--help"], check=False, env=env), real("--help"))
    src = tmp_path / "m.ptx"
    src.write_text(kernels_ptx(2))
    run([bin_ / "ptxas", f"-arch={ARCH}", str(src), "-o", tmp_path / "a.cubin"], env=env)
    assert "kernels in" in log_lines(env)[-1]
    # found on PATH first by anything that runs "ptxas"
    path_env = dict(env, PATH=f"{bin_}:{env['PATH']}")
    run(["ptxas", f"-arch={ARCH}", str(src), "-o", tmp_path / "b.cubin"], env=path_env)
    assert "module record hit" in log_lines(env)[-1]


def test_shims_never_replace_a_file(tmp_path, env):
    (tmp_path / "shims" / "bin").mkdir(parents=True)
    (tmp_path / "shims" / "bin" / "ptxas").write_text("a real one")
    p = tc("shims", tmp_path / "shims", env=env, check=False)
    assert p.returncode == 1 and "not replacing it" in p.stderr
    assert (tmp_path / "shims" / "bin" / "ptxas").read_text() == "a real one"


CU = """
__device__ __noinline__ float helper(float x) {{ return x * x + 1.0f; }}
{kernels}
"""


def cu_source(n, edited=None):
    # a loop nvcc unrolls, so that each kernel is worth a unit of its own
    ks = [f'extern "C" __global__ void kern{k}(float *p) {{ float x = p[threadIdx.x]; '
          f'_Pragma("unroll") for (int i = 0; i < 64; i++) x = helper(x) * '
          f'{k + (100 if k == edited else 0)}.0f + p[i]; p[threadIdx.x] = x; }}'
          for k in range(n)]
    return CU.format(kernels="\n".join(ks))


def test_nvcc_through_the_shims_builds_per_kernel(tmp_path, env):
    if not NVCC:
        pytest.skip("nvcc not found")
    bin_ = shims(tmp_path, env)
    cu = tmp_path / "many.cu"
    cu.write_text(cu_source(30))
    nvcc = [bin_ / "nvcc", f"-arch={ARCH}"]
    # the cubin nvcc gets is the one taskcache ptxas makes of nvcc's PTX
    run([*nvcc, "-cubin", cu, "-o", tmp_path / "a.cubin"], env=env)
    run([NVCC, f"-arch={ARCH}", "-ptx", cu, "-o", tmp_path / "many.ptx"])
    ptxas(env, f"-arch={ARCH}", "-m64", str(tmp_path / "many.ptx"), "-o",
          str(tmp_path / "b.cubin"))
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    log = log_lines(env)
    assert "30 kernels in" in log[0] and "module record hit" in log[1]
    # a host object (-c): an edit of one kernel compiles one unit
    cu.write_text(cu_source(30, edited=11))
    run([*nvcc, "-c", cu, "-o", tmp_path / "many.o"], env=env)
    m = re.search(r"30 kernels in (\d+) units: (\d+) from cache, (\d+) compiled",
                  log_lines(env)[-1])
    assert m and int(m.group(3)) == 1 and int(m.group(1)) > 2
    # -rdc: nvcc asks for a relocatable object of the module, cached whole
    run([*nvcc, "-rdc=true", "-c", cu, "-o", tmp_path / "rdc.o"], env=env)
    assert "30 kernels in 0 units" in log_lines(env)[-1]
    run([*nvcc, "-rdc=true", "-c", cu, "-o", tmp_path / "rdc2.o"], env=env)
    assert "module record hit" in log_lines(env)[-1]
    # an executable: nvcc's link step takes crt/link.stub from beside itself (as
    # CMake's compiler check does); it runs without a GPU until it calls CUDA
    main = tmp_path / "main.cu"
    main.write_text(cu_source(2) + "int main() { return 0; }\n")
    run([*nvcc, main, "-o", tmp_path / "main"], env=env)
    run([tmp_path / "main"])
    # and with -rdc: taskcache's objects through nvcc's device link
    (tmp_path / "main_rdc.cu").write_text("int main() { return 0; }\n")
    run([*nvcc, "-rdc=true", tmp_path / "main_rdc.cu", tmp_path / "rdc.o", "-o",
         tmp_path / "main_rdc"], env=env)
    run([tmp_path / "main_rdc"])


# ---- Triton: TRITON_PTXAS_PATH (no GPU needed to compile for a target) ------------------

TRITON_PROG = r'''
import hashlib, json, sys
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, a * tl.load(x_ptr + i, mask=m) + tl.sin(tl.load(y_ptr + i, mask=m)),
             mask=m)

sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "a": "fp32", "n": "i32"}
out = {}
for block in (256, 1024):
    k = triton.compile(ASTSource(fn=axpy, signature=sig, constexprs={"BLOCK": block}),
                       target=GPUTarget("cuda", 90, 32))
    out[block] = hashlib.sha256(k.asm["cubin"]).hexdigest()
print(json.dumps(out))
'''


def test_triton_compiles_through_TRITON_PTXAS_PATH(tmp_path, env):
    triton = pytest.importorskip("triton")
    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    # Triton 3.9 runs ptxas-blackwell for sm_90 and later, older ones ptxas
    theirs = next((bin_dir / n for n in ("ptxas-blackwell", "ptxas")
                   if (bin_dir / n).exists()), None)
    if not theirs:
        pytest.skip("this Triton bundles no ptxas")
    bin_ = shims(tmp_path, env)
    prog = tmp_path / "prog.py"
    prog.write_text(TRITON_PROG)
    base = dict(env, TRITON_DEFAULT_FP_FUSION="1", TASKCACHE_PTXAS=str(theirs))

    def compile_in_a_fresh_process(name, via_taskcache):
        e = dict(base, TRITON_CACHE_DIR=str(tmp_path / name))
        if via_taskcache:
            e.update(TRITON_PTXAS_PATH=str(bin_ / "ptxas"),
                     TRITON_PTXAS_BLACKWELL_PATH=str(bin_ / "ptxas"))
        p = run(["python3", prog], env=e, timeout=600)
        return p.stdout.strip().splitlines()[-1]

    own = compile_in_a_fresh_process("own", False)
    first = compile_in_a_fresh_process("first", True)
    second = compile_in_a_fresh_process("second", True)
    # Triton's modules (one kernel, line-info sections) are built whole by the
    # same ptxas: the very bytes Triton's own call gives
    assert first == own and second == own
    log = log_lines(env)
    builds = [x for x in log if " kernels" in x]  # (notes and --version aside)
    assert len(builds) == 4, log
    assert all("1 kernels in" in x for x in builds[:2]), builds  # built by taskcache
    assert all("module record hit" in x for x in builds[2:]), builds  # then read back
