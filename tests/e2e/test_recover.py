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
    # the image is kept under ptxas's key and the one the in-process build
    # looks up: the next build reads it, and crashes no more
    assert stats(cache)["module_records"] == 2
    again = tmp_path / "again.cubin"
    p = sm90a(src, again, cache)
    assert "crashed" not in p.stderr, p.stderr
    assert again.read_bytes() == reference.read_bytes()
    assert stats(cache)["module_hits"] == 1
    # standard input is read again by the second run
    piped = tmp_path / "piped.cubin"
    p = sm90a("-", piped, str(tmp_path / "piped-cache"), input=ZERO_DESCRIPTORS)
    assert "<stdin>: the build crashed" in p.stderr, p.stderr
    assert piped.read_bytes() == reference.read_bytes()
    # a ptxas named that cannot run: an error before anything compiles (the
    # in-process compiler does not stand in for it), not a crash
    p = sm90a(src, tmp_path / "none.cubin", None, "--ptxas", tmp_path / "no-ptxas", check=False)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "crashed" not in p.stderr, p.stderr
    assert "cannot run the ptxas named" in p.stderr, p.stderr


def test_a_cache_with_only_ptxas_record_crashes_once_then_no_more(tmp_path, inprocess):
    """A module record that ptxas made (before the in-process key was kept,
    or asked for with --compiler ptxas) is copied under the in-process key
    by the build after the crash; an edited input crashes again, once."""
    src = tmp_path / "zero.ptx"
    src.write_text(ZERO_DESCRIPTORS)
    if sm90a(src, tmp_path / "asked.cubin", None, "--compiler", "inprocess",
             check=False).returncode >= 0:
        pytest.skip("this nvPTXCompiler compiles the module (it segfaulted in CUDA 13.0)")
    cache = str(tmp_path / "cache")
    reference = tmp_path / "ptxas.cubin"
    sm90a(src, reference, cache, "--compiler", "ptxas")
    crashes = []
    for i in range(3):
        p = sm90a(src, tmp_path / f"{i}.cubin", cache)
        crashes.append("the build crashed" in p.stderr)
        assert (tmp_path / f"{i}.cubin").read_bytes() == reference.read_bytes()
    assert crashes == [True, False, False]
    s = stats(cache)
    assert s["module_records"] == 2 and s["compiles"] == 1, s
    edited = tmp_path / "edited.ptx"
    edited.write_text(ZERO_DESCRIPTORS.replace("st.global.f32 [%rd1], %f1;",
                                               "st.global.f32 [%rd1+4], %f1;"))
    crashes = ["the build crashed" in sm90a(edited, tmp_path / "e.cubin", cache).stderr
               for _ in range(2)]
    assert crashes == [True, False]


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
