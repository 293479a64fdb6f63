"""Whole-module fallback, the nvlink fallback, and large modules."""

import json
import os
import sys

import elfsyms
from tchelp import ARCH, ROOT, TASKCACHE, build, corpus_dir, run, stats, tc

sys.path.insert(0, str(ROOT / "bench"))
import scaling  # noqa: E402  (the synthetic module generator)


def test_unsplittable_module_is_compiled_whole_and_says_why(tmp_path):
    g = os.path.join(corpus_dir(), "globals_atomics.G.ptx")
    cache = str(tmp_path / "cache")
    p = build(g, tmp_path / "a.cubin", cache)
    assert "note: compiled whole, not split: debug sections" in p.stderr
    assert build(g, tmp_path / "b.cubin", cache, "-q").stderr == ""
    s = stats(cache)
    assert s["whole_builds"] == 1 and s["module_hits"] == 1
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    info = json.loads(tc("explain", g, "--arch", ARCH, "--cache-dir", cache, "--json").stdout)
    assert info["mode"] == "whole" and "debug sections" in info["whole_reason"]


def test_no_split_switch(tmp_path):
    src = os.path.join(corpus_dir(), "helpers.ptx")
    p = build(src, tmp_path / "w.cubin", None, "--no-split")
    assert "splitting is turned off" in p.stderr
    whole = tmp_path / "ptxas.cubin"
    from tchelp import PTXAS
    run([PTXAS, f"-arch={ARCH}", src, "-o", whole])
    assert elfsyms.kernels(str(tmp_path / "w.cubin")) == elfsyms.kernels(str(whole))


def test_nvlink_fallback(tmp_path):
    src = os.path.join(corpus_dir(), "func_pointers.ptx")
    env = dict(os.environ, TASKCACHE_NVJITLINK="none")
    out_nvlink = tmp_path / "nvlink.cubin"
    run([TASKCACHE, "build", src, "-o", out_nvlink, "--arch", ARCH, "--no-cache"], env=env)
    out_jl = tmp_path / "jl.cubin"
    build(src, out_jl, None)
    assert elfsyms.kernels(str(out_nvlink)) == elfsyms.kernels(str(out_jl))
    assert elfsyms.globals_(str(out_nvlink)) == elfsyms.globals_(str(out_jl))


def test_ten_thousand_kernels(tmp_path):
    src = tmp_path / "big.ptx"
    src.write_text(scaling.module(10000))
    info = json.loads(tc("explain", src, "--arch", ARCH, "--no-cache", "--json").stdout)
    assert len(info["entries"]) == 10000
    assert 10 < info["units"] < 10000
    # the same kernels keep the same keys when the module grows
    small = tmp_path / "small.ptx"
    small.write_text(scaling.module(100))
    few = json.loads(tc("explain", small, "--arch", ARCH, "--no-cache", "--json").stdout)
    keys = {e["name"]: e["slice_key"] for e in info["entries"]}
    assert all(keys[e["name"]] == e["slice_key"] for e in few["entries"])


def have_inprocess():
    return "with the in-process compiler" in tc("version").stdout


def test_both_compile_backends(tmp_path):
    src = os.path.join(corpus_dir(), "printf_kernels.ptx")
    if not have_inprocess():
        p = build(src, tmp_path / "x.cubin", None, "--compiler", "inprocess", check=False)
        assert p.returncode == 1 and "built without the in-process compiler" in p.stderr
        return
    cache = str(tmp_path / "cache")
    a, b = tmp_path / "ptxas.cubin", tmp_path / "inproc.cubin"
    build(src, a, cache, "--compiler", "ptxas")
    s1 = stats(cache)
    build(src, b, cache, "--compiler", "inprocess")
    s2 = stats(cache)
    # different compiler identities: nothing is shared between the two
    assert s2["compiles"] - s1["compiles"] == s1["compiles"]
    assert elfsyms.kernels(str(a)) == elfsyms.kernels(str(b))
    assert elfsyms.globals_(str(a)) == elfsyms.globals_(str(b))
    keys_a = json.loads(tc("explain", src, "--arch", ARCH, "--cache-dir", cache, "--json",
                           "--compiler", "ptxas").stdout)
    keys_b = json.loads(tc("explain", src, "--arch", ARCH, "--cache-dir", cache, "--json",
                           "--compiler", "inprocess").stdout)
    assert all(x["slice_key"] != y["slice_key"]
               for x, y in zip(keys_a["entries"], keys_b["entries"]))
    # both coexist in one cache: each is warm now
    build(src, a, cache, "--compiler", "ptxas")
    build(src, b, cache, "--compiler", "inprocess")
    assert stats(cache)["module_hits"] == 2
    # compile errors keep their input line numbers in-process too
    bad = ROOT / "tests" / "corpus" / "bad" / "bad_instruction.ptx"
    p = build(str(bad), tmp_path / "bad.cubin", None, "--compiler", "inprocess", check=False)
    assert p.returncode == 1 and f"{bad}:17: error:" in p.stderr
