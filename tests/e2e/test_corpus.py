"""Every module of the corpus builds, every slice of it compiles on its own,
and the linked output holds the same kernels and every global variable of a
whole-module ptxas build."""

import os

import elfsyms
from tchelp import ARCH, PTXAS, build, run


def whole_module_symbols(ptx, tmp_path):
    out = tmp_path / "whole.cubin"
    run([PTXAS, f"-arch={ARCH}", ptx, "-o", out])
    return elfsyms.kernels(str(out)), elfsyms.globals_(str(out))


def assert_has_globals(expected, image):
    """Every global of the input is in the image under its own name, except
    internal compiler-named constants ($str, __unnamed_1, ...), which carry
    content-derived names ($__tcA...) so that keys do not depend on their
    position in the module: those are counted instead."""
    got = set(elfsyms.globals_(str(image)))
    missing = set(expected) - got
    assert all(n.startswith("$") or n.startswith("__unnamed_") for n in missing), missing
    assert len(missing) == len([n for n in got if n.startswith("$__tcA")])


def test_every_slice_compiles_and_symbols_match(corpus_ptx, tmp_path):
    kernels, globals_ = whole_module_symbols(corpus_ptx, tmp_path)
    assert kernels, "the corpus module defines no kernel"
    # --unit-cost 1 puts every kernel in a unit of its own: each slice is
    # compiled separately, and all of them must link.
    one = tmp_path / "one.cubin"
    build(corpus_ptx, one, None, "--unit-cost", "1")
    assert elfsyms.kernels(str(one)) == kernels
    assert_has_globals(globals_, one)
    # the default grouping, through the cache
    cache = tmp_path / "cache"
    cold = tmp_path / "cold.cubin"
    build(corpus_ptx, cold, cache)
    assert elfsyms.kernels(str(cold)) == kernels
    assert_has_globals(globals_, cold)
    # a warm build is byte-identical
    warm = tmp_path / "warm.cubin"
    build(corpus_ptx, warm, cache)
    assert warm.read_bytes() == cold.read_bytes()
    # whole-program units (ptxas -ewp, with the fallback to -c where ptxas
    # refuses it) link the same symbols
    ewp = tmp_path / "ewp.cubin"
    build(corpus_ptx, ewp, cache, "--whole-program-units")
    assert elfsyms.kernels(str(ewp)) == kernels
    assert_has_globals(globals_, ewp)


def test_corpus_is_complete():
    """The corpus really holds the producers the tests claim to cover."""
    from tchelp import corpus_files
    names = {os.path.basename(f) for f in corpus_files()}
    assert any(n.endswith(".rdc.ptx") for n in names)
    assert any(n.endswith(".lineinfo.ptx") for n in names)
    assert any(n.endswith(".G.ptx") for n in names)
    assert any(n.endswith(".llc.ptx") for n in names), "no module from LLVM's NVPTX back end"
    for hand in ("alias.ptx", "textures.ptx", "indirect_calls.ptx", "linkage.ptx",
                 "initializers.ptx", "names.ptx", "clusters.ptx", "directives.ptx"):
        assert hand in names
