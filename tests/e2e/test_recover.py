"""The in-process compiler's failures are build errors, never the end of
taskcache (src/cli/recover.h).

nvPTXCompiler 13.0 runs on taskcache's threads. It segfaults on some PTX
that the ptxas program compiles, and with threads of its own
(--split-compile) it aborts the process when a compile fails and writes its
advice to standard error instead of its log. The modules are in
failing_modules.py."""

import pytest

from failing_modules import ADVISED, TOO_FEW_REGISTERS, ZERO_DESCRIPTORS
from tchelp import build, stats, tc


@pytest.fixture
def inprocess():
    if "with the in-process compiler" not in tc("version").stdout:
        pytest.skip("built without the in-process compiler")


def sm90a(ptx, out, cache, *extra, **kw):
    return build(ptx, out, cache, "--arch", "sm_90a", *extra, **kw)


def test_a_module_the_in_process_compiler_dies_of_is_built_by_ptxas(tmp_path, inprocess):
    src = tmp_path / "zero.ptx"
    src.write_text(ZERO_DESCRIPTORS)
    asked = sm90a(src, tmp_path / "asked.cubin", None, "--compiler", "inprocess", check=False)
    if asked.returncode >= 0:
        pytest.skip("this nvPTXCompiler compiles the module (it segfaulted in CUDA 13.0)")
    reference = tmp_path / "ptxas.cubin"
    sm90a(src, reference, None, "--compiler", "ptxas")
    cache = str(tmp_path / "cache")
    out = tmp_path / "out.cubin"
    p = sm90a(src, out, cache)
    assert "the build crashed (Segmentation fault) with the in-process compiler; built with " \
        "ptxas processes" in p.stderr, p.stderr
    assert out.read_bytes() == reference.read_bytes()
    assert stats(cache)["module_records"] == 1
    # standard input is read again by the second run
    piped = tmp_path / "piped.cubin"
    p = sm90a("-", piped, cache, input=ZERO_DESCRIPTORS)
    assert "<stdin>: the build crashed" in p.stderr, p.stderr
    assert piped.read_bytes() == reference.read_bytes()
    # without a ptxas to build it, an error that says both, not a signal
    p = sm90a(src, tmp_path / "none.cubin", None, "--ptxas", tmp_path / "no-ptxas", check=False)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "building it with ptxas processes failed too" in p.stderr, p.stderr
    assert "cannot find ptxas" in p.stderr, p.stderr


@pytest.mark.parametrize("compiler", ["auto", "inprocess", "ptxas"])
def test_a_compile_that_fails_is_an_error_whatever_the_compiler(tmp_path, compiler):
    """The error of ptxas's own run, with the input's line, exit status 1;
    never a process killed by the compiler's abort."""
    if compiler == "inprocess" and "with the in-process compiler" not in tc("version").stdout:
        pytest.skip("built without the in-process compiler")
    src = tmp_path / "few.ptx"
    src.write_text(TOO_FEW_REGISTERS)
    cache = str(tmp_path / "cache")
    p = build(src, tmp_path / "out.cubin", cache, "--compiler", compiler, check=False)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert f"{src}: error: (C7602) Insufficient registers" in p.stderr, p.stderr
    assert "crashed" not in p.stderr
    assert not (tmp_path / "out.cubin").exists()
    assert stats(cache)["module_records"] == 0


def test_wgmma_advice_is_told_against_the_input_and_replayed(tmp_path):
    """ptxas's numbered advice on wgmma comes out as one line naming the
    input, from either compiler, split or whole, cold or from the cache."""
    src = tmp_path / "advised.ptx"
    src.write_text(ADVISED)
    advice = [f"{src}: info: (C7519) warpgroup.arrive is injected in around line 19 ",
              f"{src}: info: (C7517) warpgroup.wait is injected in around line 18 "]
    cache = str(tmp_path / "cache")
    for extra in ((), ("--unit-cost", "1"), ("--compiler", "ptxas")):
        for _ in range(2):  # cold, then from the cache
            p = sm90a(src, tmp_path / "out.cubin", cache, *extra)
            assert p.stderr.count("(C75") == 2, (extra, p.stderr)
            assert all(a in p.stderr for a in advice), (extra, p.stderr)
