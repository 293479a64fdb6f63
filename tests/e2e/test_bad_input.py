"""Malformed PTX: a file:line error, exit status 1, nothing in the cache."""

import re
import subprocess

import pytest

import elfsyms
from tchelp import PTXAS, ROOT, build, stats, tc

BAD = sorted((ROOT / "tests" / "corpus" / "bad").glob("*.ptx"))


def expectations(path):
    text = path.read_text()
    line = int(re.search(r"expect-error-line: (\d+)", text).group(1))
    m = re.search(r"expect-error-text: (.+)", text)
    return line, m.group(1).strip() if m else None, "expect-from: ptxas" in text


@pytest.mark.parametrize("bad", BAD, ids=[p.name for p in BAD])
def test_bad_input_reports_file_and_line(bad, tmp_path):
    cache = str(tmp_path / "cache")
    out = tmp_path / "out.cubin"
    line, text, from_ptxas = expectations(bad)
    p = build(str(bad), out, cache, check=False)
    assert p.returncode == 1
    assert f"{bad}:{line}: error: " in p.stderr, p.stderr
    if text:
        first = next(l for l in p.stderr.splitlines() if f":{line}: error: " in l)
        assert text in p.stderr, first
    assert not out.exists()
    s = stats(cache)
    assert s["module_records"] == 0 and s["compile_errors"] == 1
    if not from_ptxas:  # rejected before any compiling: nothing at all
        assert s["unit_records"] == 0


def test_the_bad_corpus_is_there():
    assert len(BAD) >= 10


@pytest.mark.parametrize("text,line,message", [
    ("", 1, "missing .version"),
    # the driver reads PTX up to the first NUL byte: here, nothing
    ("\x00\x01binary", 1, "missing .version directive"),
    (".version 8.0\n.target sm_90\n.entry k() {\n" + "{" * 5000 + "}" * 5000 + "\nret; }\n",
     None, None),  # deep nesting is fine
    (".version 8.0\n.target sm_90\n.entry k() { ret; }\n.entry k() { ret; }\n", 4,
     "redefinition of 'k'"),
])
def test_odd_inputs(tmp_path, text, line, message):
    src = tmp_path / "odd.ptx"
    src.write_bytes(text.encode("latin-1"))
    p = build(str(src), tmp_path / "o.cubin", str(tmp_path / "cache"), check=False)
    if line is None:
        assert p.returncode in (0, 1)
        assert "Traceback" not in p.stderr
        return
    assert p.returncode == 1
    assert f"{src}:{line}: error: {message}" in p.stderr, p.stderr


NUL_MODULE = (".version 8.0\n.target sm_90\n.address_size 64\n"
              ".visible .entry first() { ret; }\n")


def test_text_ends_at_the_first_nul(tmp_path):
    """JITs hand the driver NUL-terminated text and dumped modules end in
    "\\0\\n": the text ends at the first NUL, as cuModuleLoadData reads it.
    What follows is ignored, with a note unless it is only whitespace; the
    module key still covers it (never the same record as the text alone)."""
    cache = str(tmp_path / "cache")
    plain, dumped, more = (tmp_path / n for n in ("plain.ptx", "dumped.ptx", "more.ptx"))
    plain.write_text(NUL_MODULE)
    dumped.write_bytes(NUL_MODULE.encode() + b"\0\n")
    tail = b".visible .entry second() { ret; }\n"
    more.write_bytes(NUL_MODULE.encode() + b"\0" + tail)
    images = {}
    for src in (plain, dumped, more):
        out = tmp_path / (src.stem + ".cubin")
        p = build(str(src), out, cache, "-v")
        images[src.stem] = out.read_bytes()
        assert ("module record hit" in p.stderr) is False, p.stderr
        notes = [l for l in p.stderr.splitlines() if "NUL" in l]
        if src is more:
            assert notes == [f"{more}:5: note: the PTX text ends at a NUL byte here, as the "
                             f"CUDA driver reads it; the {len(tail)} bytes after it are ignored"]
        else:
            assert notes == []
    assert images["plain"] == images["dumped"] == images["more"]
    assert elfsyms.kernels(images["more"]) == ["first"]
    # one unit's worth: each is compiled whole, and the module keys differ
    assert stats(cache)["compiles"] == 3 and stats(cache)["module_records"] == 3


def test_an_error_every_unit_reports_is_printed_once(tmp_path):
    """A PTX version the compiler does not know fails every unit's compile
    on the same input line; the build says it once, as ptxas does of the
    module, and says nothing the compiler's message already says."""
    src = tmp_path / "future.ptx"
    kernels = "".join(f".visible .entry k{i}() {{ ret; }}\n" for i in range(5))
    src.write_text(".version 99.0\n.target sm_90\n.address_size 64\n" + kernels)
    for compiler in ("auto", "ptxas"):
        for split in (["--unit-cost", "1"], []):
            p = build(str(src), tmp_path / "o.cubin", str(tmp_path / "cache"), "--compiler",
                      compiler, *split, check=False)
            assert p.returncode == 1
            errors = [l for l in p.stderr.splitlines() if "error" in l]
            assert errors == [f"{src}:1: error: Unsupported .version 99.0; current version is "
                              f"'{errors[0].rsplit(chr(39), 2)[1]}'"], (compiler, split, p.stderr)


def test_compile_error_keeps_good_units_only(tmp_path):
    """A module whose kernels parse but one fails in ptxas: no module record
    and no record of the failing unit; the units that compiled are kept, so
    fixing the error recompiles only that unit."""
    src = tmp_path / "half.ptx"
    good = "".join(f".visible .entry ok{i}() {{ ret; }}\n" for i in range(20))
    broken = (".visible .entry broken() {\n .reg .b32 %r<2>;\n add.u32 %r1, %r1;\n ret;\n}\n")
    src.write_text(".version 8.0\n.target sm_90\n" + good + broken)
    cache = str(tmp_path / "cache")
    p = build(str(src), tmp_path / "o.cubin", cache, "--unit-cost", "1", check=False)
    assert p.returncode == 1
    assert f"{src}:25: error:" in p.stderr, p.stderr
    assert not (tmp_path / "o.cubin").exists()
    s = stats(cache)
    assert s["module_records"] == 0 and s["unit_records"] == 20
    src.write_text(src.read_text().replace("add.u32 %r1, %r1;", "add.u32 %r1, %r1, 1;"))
    build(str(src), tmp_path / "o.cubin", cache, "--unit-cost", "1")
    assert stats(cache)["compiles"] - s["compiles"] == 1


def test_a_module_that_crashes_ptxas_fails_the_build_not_the_process(tmp_path):
    """ptxas 13.0 aborts on this module (a parameter named like a module
    variable; tests/realworld/findings). Under the in-process compiler the
    abort used to end taskcache, and would end any program embedding the
    library: such a module goes to a ptxas process, whose crash is a build
    error."""
    src = ROOT / "tests" / "realworld" / "findings" / "ptxas_abort_param_named_like_global.ptx"
    cache = str(tmp_path / "cache")
    for compiler in ("auto", "ptxas"):
        p = build(str(src), tmp_path / "out.cubin", cache, "--compiler", compiler, check=False)
        assert p.returncode in (0, 1), (p.returncode, p.stderr)  # not killed by a signal
        if compiler == "auto" and "with the in-process compiler" in tc("--version").stdout:
            assert "in a process of its own" in p.stderr, p.stderr
        if p.returncode == 1:  # the compiler's defect, reported as such
            assert "error: ptxas was killed by signal" in p.stderr, p.stderr
            assert stats(cache)["module_records"] == 0


def test_a_module_for_ptxas_instead_is_cached_as_ptxas_output(tmp_path):
    """A module the in-process compiler leaves to ptxas (a parameter named
    like a module variable, which ptxas compiles here) is keyed with ptxas's
    identity, so a warm build is served by its module record."""
    src = tmp_path / "p.ptx"
    src.write_text(
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".global .align 4 .u32 g;\n.global .align 4 .u32 h;\n"
        ".visible .entry k(.param .u64 g_out)\n{\n .reg .b64 %rd<2>;\n"
        " ld.param.u64 %rd1, [g_out];\n st.global.u32 [%rd1], 1;\n ret;\n}\n"
        ".visible .entry g2(.param .u32 g)\n{\n .reg .b32 %r<2>;\n"
        " ld.param.u32 %r1, [g];\n st.global.u32 [h], %r1;\n ret;\n}\n")
    cache = str(tmp_path / "cache")
    out = tmp_path / "out.cubin"
    first = build(str(src), out, cache, "-v")
    assert "named like a module symbol" in first.stderr, first.stderr
    image = out.read_bytes()
    build(str(src), out, cache)
    assert out.read_bytes() == image
    s = stats(cache)
    assert (s["module_hits"], s["module_records"]) == (1, 1), s


def test_an_error_in_a_function_nothing_calls_fails_the_split_build_too(tmp_path):
    """Whole-module ptxas compiles, and so checks, every function; units
    hold what their kernels call. A module with a function nothing calls
    is compiled whole, so its error fails the build as it fails ptxas's."""
    kernels = "".join(f".visible .entry k{i}(.param .u64 p)\n{{\n .reg .b64 %rd<2>;\n"
                      f" ld.param.u64 %rd1, [p];\n st.global.u32 [%rd1], {i};\n ret;\n}}\n"
                      for i in range(4))
    src = tmp_path / "m.ptx"
    src.write_text(".version 8.0\n.target sm_90\n.address_size 64\n" + kernels +
                   ".func unused()\n{\n .reg .b32 %r<2>;\n ld.global.u32 %r1, [nowhere];\n"
                   " ret;\n}\n")
    line = src.read_text().splitlines().index(" ld.global.u32 %r1, [nowhere];") + 1
    for extra in ([], ["--unit-cost", "1"]):
        p = build(str(src), tmp_path / "o.cubin", str(tmp_path / "cache"), *extra, check=False)
        assert p.returncode == 1, p.stderr
        assert f"{src}:{line}: error: " in p.stderr and "nowhere" in p.stderr, p.stderr
        assert "never called" in p.stderr
        assert not (tmp_path / "o.cubin").exists()


def function_bindings(cubin):
    return {name: bind for name, typ, bind, _, _ in elfsyms.symbols(str(cubin))
            if typ == elfsyms.STT_FUNC}


def test_declarations_that_disagree_are_ptxas_to_judge(tmp_path):
    """A split build copies a function's definition into its units, so a
    prototype of it never reached ptxas: prototypes that disagree with the
    definition, or follow it, built where ptxas refuses, and a linkage
    given by a prototype alone was lost (a review). Such a module is
    compiled whole; a prototype that agrees still splits."""
    head = ".version 8.0\n.target sm_90\n.address_size 64\n"
    dev = (".func (.param .b32 r) dev(.param .b32 a)\n{\n .reg .b32 %r<3>;\n"
           " ld.param.b32 %r1, [a];\n add.s32 %r2, %r1, 1;\n st.param.b32 [r], %r2;\n ret;\n}\n")
    kernels = "".join(
        f".visible .entry k{i}(.param .u64 p)\n{{\n .reg .b64 %rd<2>;\n .reg .b32 %r<3>;\n"
        f" ld.param.u64 %rd1, [p];\n mov.b32 %r1, {i};\n"
        " { .param .b32 x; .param .b32 y; st.param.b32 [x], %r1;\n"
        "   call.uni (y), dev, (x); ld.param.b32 %r2, [y]; }\n"
        " st.global.u32 [%rd1], %r2;\n ret;\n}\n" for i in range(4))
    same = ".func (.param .b32 r) dev(.param .b32 a);\n"
    cases = {
        "agrees": head + same + kernels + dev,
        "fewer_params": head + ".func (.param .b32 r) dev();\n" + kernels + dev,
        "other_type": head + ".func (.param .b64 r) dev(.param .b32 a);\n" + kernels + dev,
        "after_definition": head + dev + same + kernels,
        "visible_prototype": head + ".visible " + same + kernels + dev,
    }
    for name, text in cases.items():
        src = tmp_path / f"{name}.ptx"
        src.write_text(text)
        want = subprocess.run([PTXAS, "-arch=sm_90", str(src), "-o", str(tmp_path / "w.cubin")],
                              capture_output=True, text=True)
        for extra in ([], ["--unit-cost", "1"]):
            out = tmp_path / f"{name}.cubin"
            p = build(str(src), out, str(tmp_path / "cache"), *extra, check=False)
            assert (p.returncode == 0) == (want.returncode == 0), (name, p.stderr, want.stderr)
            if extra:  # a module this small is compiled whole unless a unit size is given
                mode = tc("explain", str(src), "--arch", "sm_90", "--no-cache", *extra).stdout
                assert ("mode:   split" in mode) == (name == "agrees"), (name, mode)
            if want.returncode == 0:
                assert function_bindings(out) == function_bindings(tmp_path / "w.cubin"), name
            else:
                assert f"{src}:" in p.stderr and not out.exists(), (name, p.stderr)
