"""Every module of the corpus builds, every slice of it compiles on its own,
and the linked output holds the same kernels and every global variable of a
whole-module ptxas build."""

import os

import elfsyms
from tchelp import ARCH, PTXAS, build, run


def whole_module_symbols(ptx, tmp_path):
    out = tmp_path / "whole.cubin"
    run([PTXAS, f"-arch={ARCH}", ptx, "-o", out])
    return elfsyms.kernels(str(out)), sorted(elfsyms.object_counts(str(out)))


def assert_has_globals(expected, image):
    """Every global of the input is in the image under its own name, except
    internal compiler-named constants ($str, __unnamed_1, ...), which carry
    content-derived names ($__tcA...) so that keys do not depend on their
    position in the module, and variables declared inside functions, which
    ptxas numbers itself ($__NAME__N): those are counted by kind."""
    got = elfsyms.object_counts(str(image))
    assert set(expected) - set(got) == set()


def assert_same_storage(whole, image):
    """The image has as many objects of each variable as the whole-module
    build (a function's static variable is one object, whatever the units),
    and no kernel more shared memory (a function's .shared variable copied
    twice takes more; whole-module ptxas sometimes reserves more than a
    kernel uses, which linked builds do not)."""
    assert elfsyms.object_counts(str(image)) == elfsyms.object_counts(str(whole))
    shared = {n: v for n, v in elfsyms.section_sizes(str(whole)).items()
              if n.startswith(".nv.shared.") and not n.startswith(".nv.shared.reserved")}
    got = elfsyms.section_sizes(str(image))
    assert {n: v for n, v in got.items() if n.startswith(".nv.shared.")
            and not n.startswith(".nv.shared.reserved") and v > shared.get(n, 0)} == {}


def test_every_slice_compiles_and_symbols_match(corpus_ptx, tmp_path):
    kernels, globals_ = whole_module_symbols(corpus_ptx, tmp_path)
    whole = tmp_path / "whole.cubin"
    assert kernels, "the corpus module defines no kernel"
    # --unit-cost 1 puts every kernel in a unit of its own: each slice is
    # compiled separately, and all of them must link.
    one = tmp_path / "one.cubin"
    build(corpus_ptx, one, None, "--unit-cost", "1")
    assert elfsyms.kernels(str(one)) == kernels
    assert_has_globals(globals_, one)
    assert_same_storage(whole, one)
    # the default grouping, through the cache
    cache = tmp_path / "cache"
    cold = tmp_path / "cold.cubin"
    build(corpus_ptx, cold, cache)
    assert elfsyms.kernels(str(cold)) == kernels
    assert_has_globals(globals_, cold)
    assert_same_storage(whole, cold)
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
    assert_same_storage(whole, ewp)
    ewp_one = tmp_path / "ewp-one.cubin"
    build(corpus_ptx, ewp_one, cache, "--whole-program-units", "--unit-cost", "1")
    assert elfsyms.kernels(str(ewp_one)) == kernels
    assert_same_storage(whole, ewp_one)


def test_corpus_is_complete():
    """The corpus really holds the producers the tests claim to cover."""
    from tchelp import corpus_files
    names = {os.path.basename(f) for f in corpus_files()}
    assert any(n.endswith(".rdc.ptx") for n in names)
    assert any(n.endswith(".lineinfo.ptx") for n in names)
    assert any(n.endswith(".G.ptx") for n in names)
    assert any(n.endswith(".llc.ptx") for n in names), "no module from LLVM's NVPTX back end"
    for hand in ("alias.ptx", "textures.ptx", "indirect_calls.ptx", "linkage.ptx",
                 "initializers.ptx", "names.ptx", "clusters.ptx", "directives.ptx",
                 "function_statics.ptx", "scopes.ptx", "fnptr_table.ptx"):
        assert hand in names
