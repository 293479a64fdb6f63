"""Whole-module fallback, the two linkers, and large modules."""

import json
import os
import re
import subprocess
import sys

import pytest

import elfsyms
from tchelp import (ARCH, PER_KERNEL, ROOT, TASKCACHE, build, corpus_dir, explain, run,
                    slice_keys, stats, tc)

sys.path.insert(0, str(ROOT / "bench"))
import scaling  # noqa: E402  (the synthetic module generator)


def test_unsplittable_module_is_compiled_whole_and_says_why(tmp_path):
    g = os.path.join(corpus_dir(), "globals_atomics.G.ptx")
    cache = str(tmp_path / "cache")
    p = build(g, tmp_path / "a.cubin", cache)
    # its .target says debug too; the first reason found is the one given
    assert "note: compiled whole, not split: .target at line 10 asks for debug" in p.stderr
    assert build(g, tmp_path / "b.cubin", cache, "-q").stderr == ""
    s = stats(cache)
    assert s["whole_builds"] == 1 and s["module_hits"] == 1
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    info = json.loads(tc("explain", g, "--arch", ARCH, "--cache-dir", cache, "--json").stdout)
    assert info["mode"] == "whole" and "asks for debug information" in info["whole_reason"]


def test_a_parameter_hiding_a_global_compiles_whole(tmp_path):
    """ptxas resolves a parameter named like a module variable to the variable
    when another function follows: the meaning depends on function order,
    which splitting changes, so the module is built whole, like ptxas does."""
    src = os.path.join(corpus_dir(), "param_hides_global.ptx")
    p = build(src, tmp_path / "a.cubin", None, "--compiler", "ptxas")
    assert ("note: compiled whole, not split: parameter 'ph_out' at line 13 is named like a "
            "module symbol") in p.stderr
    from tchelp import PTXAS
    run([PTXAS, f"-arch={ARCH}", src, "-o", tmp_path / "ptxas.cubin"])
    assert elfsyms.kernels(str(tmp_path / "a.cubin")) == ["ph_first", "ph_second"]
    sizes = [{n: v for n, v in elfsyms.section_sizes(str(tmp_path / f)).items()
              if not n.startswith(".note")} for f in ("a.cubin", "ptxas.cubin")]
    assert sizes[0] == sizes[1]  # the same code (the tool notes name the command line)


HEAD = ".version 8.0\n.target sm_90{target}\n.address_size 64\n"
CALLEE = (".func (.param .b64 r) f(.param .b64 x)\n{{\n .reg .u64 %rd<3>;\n"
          " ld.param.u64 %rd1, [x];\n add.u64 %rd1, %rd1, 1;\n st.param.u64 [r], %rd1;\n"
          " ret;\n}}\n")
KERNELS = (".visible .entry k1(.param .u64 p)\n{{\n .reg .u64 %rd<3>;\n ld.param.u64 %rd1, [p];\n"
           " {{\n .param .b64 {arg};\n .param .b64 b;\n st.param.b64 [{arg}], %rd1;\n"
           " call (b), f, ({arg});\n ld.param.b64 %rd2, [b];\n }}\n"
           "$L_k1:\n st.global.u64 [%rd1], %rd2;\n ret;\n}}\n"
           ".visible .entry k2(.param .u64 p)\n{{\n .reg .u64 %rd<3>;\n ld.param.u64 %rd1, [p];\n"
           " ld.global.u64 %rd2, [{var}];\n st.global.u64 [%rd1], %rd2;\n ret;\n}}\n")


@pytest.mark.parametrize("case", ["call_param", "reserved_prefix", "target_debug"])
def test_what_units_would_change_compiles_whole(tmp_path, case):
    """Found by a review, each built otherwise than whole-module ptxas:
    - call_param: a .param a call site declares (nvcc's param0) named like
      a global; ptxas resolves it to the global when a function follows, so
      k1's code depended on what shared its unit;
    - reserved_prefix: a global named like the labels of units ($__tcL0)
      met k1's renamed label in a unit: the build failed;
    - target_debug: `.target sm_90, debug` is -g: units got no debug
      strings (the build failed) or their shared memory twice.
    Each module is compiled whole and gets ptxas's code."""
    var = {"call_param": "gv", "reserved_prefix": "$__tcL0", "target_debug": "gv"}[case]
    text = (HEAD.format(target=", debug" if case == "target_debug" else "") +
            f".visible .global .align 8 .u64 {var} = 5;\n" + CALLEE.format() +
            KERNELS.format(arg="gv" if case == "call_param" else "a0", var=var))
    if case == "target_debug":
        text += '.section .debug_str\n{\n$L__info_string0:\n.b8 107,0\n}\n'
    src = tmp_path / f"{case}.ptx"
    src.write_text(text)
    from tchelp import PTXAS
    run([PTXAS, f"-arch={ARCH}", src, "-o", tmp_path / "ptxas.cubin"])
    info = json.loads(tc("explain", src, "--arch", ARCH, "--no-cache", "--json", *PER_KERNEL).stdout)
    assert info["mode"] == "whole", info["whole_reason"]
    p = build(str(src), tmp_path / "a.cubin", None, *PER_KERNEL)
    assert "compiled whole" in p.stderr
    text_of = [{n: v for n, v in elfsyms.sections(str(tmp_path / f)).items() if n.startswith(".text")}
               for f in ("a.cubin", "ptxas.cubin")]
    assert text_of[0] == text_of[1]



SETMAXNREG = """.version 8.1
.target sm_90a
.address_size 64
.visible .entry producer_consumer(.param .u64 out) .maxntid 384, 1, 1 .maxnreg 168
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	.reg .pred %p<2>;
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 128;
	@%p1 bra $producer;
	setmaxnreg.inc.sync.aligned.u32 232;
	bra.uni $done;
$producer:
	setmaxnreg.dec.sync.aligned.u32 40;
$done:
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd1, %rd1;
	mul.wide.u32 %rd2, %r1, 4;
	add.u64 %rd1, %rd1, %rd2;
	st.global.u32 [%rd1], %r1;
	ret;
}
.visible .entry indirect(.param .u64 f)
{
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [f];
	{ proto: .callprototype _ (); call %rd1, (), proto; }
	ret;
}
"""


@pytest.mark.parametrize("units", ["default", "relocatable"])
def test_code_relocatable_units_cannot_make_compiles_whole(tmp_path, units):
    """ptxas -c leaves a dynamic .shared array's alignment to the linker (16
    bytes, against the .align 1024 TMA needs) and drops setmaxnreg: a module
    where such a kernel could land in a relocatable unit is compiled whole,
    and says why."""
    from tchelp import PTXAS
    extra = ["--relocatable-units"] if units == "relocatable" else []
    aligned = ROOT / "tests" / "realworld" / "findings" / "dynamic_shared_alignment.ptx"
    p = build(aligned, tmp_path / "a.cubin", None, *PER_KERNEL, *extra)
    assert ("note: compiled whole, not split: kernel 'staged' uses a dynamic .shared array "
            "aligned above 16 bytes") in p.stderr, p.stderr
    run([PTXAS, f"-arch={ARCH}", aligned, "-o", tmp_path / "w.cubin"])
    shared = [{n: v for n, v in elfsyms.section_sizes(str(tmp_path / f)).items()
               if n.startswith(".nv.shared.")} for f in ("a.cubin", "w.cubin")]
    assert shared[0] == shared[1] and shared[0][".nv.shared.staged"] == 0x800
    src = tmp_path / "wsp.ptx"
    src.write_text(SETMAXNREG)
    p = tc("build", src, "-o", tmp_path / "b.cubin", "--arch", "sm_90a", "--no-cache",
           *PER_KERNEL, *extra)
    assert ("note: compiled whole, not split: kernel 'producer_consumer' uses setmaxnreg"
            in p.stderr), p.stderr

INLINED = """
__device__ __forceinline__ float g(float x);
__device__ __forceinline__ float f(float x) { return x * 3.0f + 1.0f; }
__device__ __forceinline__ float h(float x) { return x * x - 2.0f; }
extern "C" __global__ void ka(float *o, const float *i) { int t = threadIdx.x; o[t] = f(i[t])EDIT; }
extern "C" __global__ void kb(float *o, const float *i) { int t = threadIdx.x; o[t] = h(i[t]); }
extern "C" __global__ void kc(float *o, const float *i) { int t = threadIdx.x; o[t] = h(f(i[t])); }
__device__ __forceinline__ float g(float x) { return x + 0.5f; }
"""


def test_lineinfo_modules_are_compiled_whole_with_ptxas_line_tables(tmp_path):
    """ptxas writes line tables for a module with .loc directives (nvcc
    -lineinfo). Linked units spoiled them (wrong file names, inlined
    functions named by another unit's strings, each kernel's PTX lines
    counted in the first unit's text), so such a module is compiled whole,
    says why, and its debug sections are ptxas's. With -suppress-debug-info
    there are none, and the module splits: nvcc -lineinfo names inlined
    functions in .loc directives by labels of a .debug_str section,
    numbered by position in the module, and units get the entries they
    name under names made from their bytes, so a new inlined function in
    one kernel changes no other kernel's key."""
    from tchelp import PTXAS, nvcc_ptx
    texts = {}
    for name, e in (("base", ""), ("edit", " + g(i[t])")):  # one .cu path: .file names it
        texts[name] = open(nvcc_ptx(INLINED.replace("EDIT", e), tmp_path / "m.ptx",
                                    "-lineinfo")).read()
        (tmp_path / f"{name}.ptx").write_text(texts[name])
    base, edit = str(tmp_path / "base.ptx"), str(tmp_path / "edit.ptx")
    assert ".section\t.debug_str" in texts["base"]
    assert "function_name $L__info_string1" in texts["base"]
    assert "$L__info_string2" in texts["edit"]  # h's label moved
    cache = str(tmp_path / "cache")
    p = build(base, tmp_path / "a.cubin", cache, "-v", "--unit-cost", "1")
    assert "compiled whole, not split: line information (the module's .loc directives)" \
        in p.stderr, p.stderr
    run([PTXAS, f"-arch={ARCH}", base, "-o", tmp_path / "w.cubin"])
    want, got = elfsyms.sections(str(tmp_path / "w.cubin")), elfsyms.sections(str(tmp_path / "a.cubin"))
    debug = [n for n in want if "debug" in n]
    assert {".debug_line", ".debug_str", ".nv_debug_line_sass"} <= set(debug)
    assert [n for n in debug if got.get(n) != want[n]] == []
    # without line information: split, and only the edited kernel's key moves
    quiet = ["--unit-cost", "1", "-Xptxas", "-suppress-debug-info"]
    p = build(base, tmp_path / "q.cubin", cache, "-v", *quiet)
    assert "compiled whole" not in p.stderr and "3 kernels in 3 units" in p.stderr, p.stderr
    assert ".debug_line" not in elfsyms.section_sizes(str(tmp_path / "q.cubin"))
    before = slice_keys(base, cache, *quiet)
    after = slice_keys(edit, cache, *quiet)
    assert before["ka"] != after["ka"]
    assert before["kb"] == after["kb"] and before["kc"] == after["kc"]
    s0 = stats(cache)
    p = build(edit, tmp_path / "b.cubin", cache, "-v", *quiet)
    assert stats(cache)["compiles"] - s0["compiles"] == 1, p.stderr


def test_no_split_switch(tmp_path):
    src = os.path.join(corpus_dir(), "helpers.ptx")
    p = build(src, tmp_path / "w.cubin", None, "--no-split")
    assert "splitting is turned off" in p.stderr
    whole = tmp_path / "ptxas.cubin"
    from tchelp import PTXAS
    run([PTXAS, f"-arch={ARCH}", src, "-o", whole])
    assert elfsyms.kernels(str(tmp_path / "w.cubin")) == elfsyms.kernels(str(whole))


def test_a_build_that_links_nothing_does_not_look_for_a_linker(tmp_path):
    """Identifying nvlink runs it (15 ms), and a build without a cache has
    nowhere to remember that: --no-split and ptxas -c identified a linker
    they never use. A split build still finds the same nvlink (the check
    that the recording linker is seen at all)."""
    from tchelp import find_tool
    nvlink = find_tool("nvlink")
    calls = tmp_path / "calls"
    fake = tmp_path / "nvlink"
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexec "{nvlink}" "$@"\n')
    fake.chmod(0o755)
    env = dict(os.environ, TASKCACHE_NVLINK=str(fake), TASKCACHE_NVJITLINK="none")
    src = os.path.join(corpus_dir(), "helpers.ptx")
    p = run([TASKCACHE, "build", src, "-o", tmp_path / "w.cubin", "--arch", ARCH, "--no-cache",
             "--no-split"], env=env, check=False)
    assert p.returncode == 0 and elfsyms.kernels(str(tmp_path / "w.cubin")), p.stderr
    # ptxas -c through the front end, into an empty cache (nothing remembered)
    p = run([TASKCACHE, "ptxas", f"-arch={ARCH}", "-c", src, "-o", tmp_path / "w.o"],
            env=dict(env, TASKCACHE_DIR=str(tmp_path / "cache")), check=False)
    assert p.returncode == 0 and (tmp_path / "w.o").stat().st_size, p.stderr
    assert not calls.exists(), calls.read_text()
    p = run([TASKCACHE, "build", src, "-o", tmp_path / "s.cubin", "--arch", ARCH, "--no-cache",
             *PER_KERNEL], env=env, check=False)
    assert p.returncode == 0, p.stderr
    assert calls.exists() and "--version" in calls.read_text()
    assert elfsyms.kernels(str(tmp_path / "s.cubin"))


def test_a_module_of_one_unit_is_compiled_whole(tmp_path):
    """Kernels that fit in one unit are compiled as the whole module: the
    split build would compile them once too, then the module data, then
    link. One compile, no link, no unit records, no note (nothing was
    given up), the kernels of ptxas's whole-module build. A unit size given
    explicitly is a request for units: the module is split and linked."""
    from tchelp import PTXAS
    src = os.path.join(corpus_dir(), "helpers.ptx")
    cache = tmp_path / "cache"
    p = build(src, tmp_path / "w.cubin", cache, "-v")
    assert "(whole module" in p.stderr and "note:" not in p.stderr, p.stderr
    s = stats(cache)
    assert s["whole_builds"] == 1 and s["compiles"] == 1 and s["unit_records"] == 0
    run([PTXAS, f"-arch={ARCH}", src, "-o", tmp_path / "ptxas.cubin"])
    assert elfsyms.kernels(str(tmp_path / "w.cubin")) == elfsyms.kernels(
        str(tmp_path / "ptxas.cubin"))
    p = build(src, tmp_path / "s.cubin", cache, "-v", "--unit-cost", "1000")
    assert "split" in p.stderr and "module record hit" not in p.stderr, p.stderr
    assert stats(cache)["unit_records"] >= 1
    assert elfsyms.kernels(str(tmp_path / "s.cubin")) == elfsyms.kernels(
        str(tmp_path / "ptxas.cubin"))


def chain_module(kernels, statements, prefix="k"):
    """PTX of kernels PREFIX0, PREFIX1, ... each a chain of `statements`
    additions."""
    out = [".version 8.0", f".target {ARCH}", ".address_size 64", ""]
    for k in range(kernels):
        out += [f".visible .entry {prefix}{k}(.param .u64 p)", "{", ".reg .b32 %r<2>;",
                ".reg .b64 %rd<2>;", "ld.param.u64 %rd1, [p];", "mov.u32 %r1, 0;"]
        out += [f"add.s32 %r1, %r1, {k + i + 1};" for i in range(statements)]
        out += ["st.global.u32 [%rd1], %r1;", "ret;", "}", ""]
    return "\n".join(out)


def test_a_small_module_of_several_units_is_compiled_whole(tmp_path):
    """A module whose kernels cost 1,500 statements or less in all is
    compiled whole even where units of the default size would be two or
    more: the split build's extra compiles and link cost more than an edit
    of such a module saves. Past that it is split. The unit size given
    explicitly splits it."""
    from tchelp import PTXAS
    cache = tmp_path / "cache"
    small = tmp_path / "small.ptx"
    # where a unit ends depends on the kernels' names: take names that
    # give three kernels of 450 statements two units or more
    for prefix in "abcdefghijklmnopqrstuvwxyz":
        small.write_text(chain_module(3, 450, prefix))
        if explain(small, cache, "--unit-cost", "1000")["units"] >= 2:
            break
    else:
        pytest.fail("no names split three kernels of 450 statements into two units")
    info = explain(small, cache)
    assert "kernels are small" in info["whole_reason"], info["whole_reason"]
    p = build(small, tmp_path / "w.cubin", cache, "-v")
    assert "(whole module" in p.stderr and "note:" not in p.stderr, p.stderr
    s = stats(cache)
    assert s["whole_builds"] == 1 and s["unit_records"] == 0
    run([PTXAS, f"-arch={ARCH}", small, "-o", tmp_path / "ptxas.cubin"])
    assert elfsyms.kernels(str(tmp_path / "w.cubin")) == elfsyms.kernels(
        str(tmp_path / "ptxas.cubin"))
    p = build(small, tmp_path / "s.cubin", cache, "-v", "--unit-cost", "1000")
    assert "(split" in p.stderr, p.stderr
    large = tmp_path / "large.ptx"
    large.write_text(chain_module(2, 800))  # a unit each, past 1,500 in all
    info = explain(large, cache)
    assert not info.get("whole_reason") and info["units"] >= 2, info.get("whole_reason")
    p = build(large, tmp_path / "l.cubin", cache, "-v")
    assert "(split" in p.stderr, p.stderr


def nvjitlink_library():
    """libnvJitLink.so of the toolkit whose ptxas the tests use, or None."""
    from tchelp import PTXAS
    root = os.path.dirname(os.path.dirname(os.path.realpath(PTXAS)))
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        p = os.path.join(root, sub, "libnvJitLink.so")
        if os.path.exists(p):
            return p
    return None


def test_both_linkers(tmp_path):
    """For relocatable units, the nvlink program (the default next to ptxas)
    and libnvJitLink (TASKCACHE_NVJITLINK=path) link the same kernels and
    globals, each says which it used, and the linker is part of the module
    key."""
    src = os.path.join(corpus_dir(), "func_pointers.ptx")
    cache = tmp_path / "cache"
    p = run([TASKCACHE, "build", src, "-o", tmp_path / "nvlink.cubin", "--arch", ARCH,
             *PER_KERNEL, "--cache-dir", cache, "-v", "--relocatable-units"])
    assert "(nvlink)" in p.stderr
    lib = nvjitlink_library()
    if lib is None:
        pytest.skip("no libnvJitLink.so in the toolkit")
    env = dict(os.environ, TASKCACHE_NVJITLINK=lib)
    p = run([TASKCACHE, "build", src, "-o", tmp_path / "jl.cubin", "--arch", ARCH,
             *PER_KERNEL, "--cache-dir", cache, "-v", "--relocatable-units"], env=env)
    assert "(nvJitLink)" in p.stderr and "module record hit" not in p.stderr
    assert "0 compiled" in p.stderr  # the units are shared; only the link differs
    a, b = str(tmp_path / "nvlink.cubin"), str(tmp_path / "jl.cubin")
    assert elfsyms.kernels(a) == elfsyms.kernels(b)
    assert elfsyms.globals_(a) == elfsyms.globals_(b)
    env["TASKCACHE_NVJITLINK"] = "none"  # back to nvlink: its module record
    p = run([TASKCACHE, "build", src, "-o", tmp_path / "again.cubin", "--arch", ARCH,
             *PER_KERNEL, "--cache-dir", cache, "-v", "--relocatable-units"], env=env)
    assert "module record hit" in p.stderr


def test_a_linker_that_drops_kernels_is_not_believed(tmp_path):
    """nvlink turns -ewp objects into an image without kernels and exits 0.
    A link that loses kernels like that is caught, by name, and the module
    is compiled whole instead: every kernel, never the linker's image."""
    from tchelp import PTXAS, find_tool
    nvlink = find_tool("nvlink")
    src = os.path.join(corpus_dir(), "func_pointers.ptx")
    ewp = tmp_path / "e.o"
    run([PTXAS, f"-arch={ARCH}", "-ewp", os.path.join(corpus_dir(), "clusters.ptx"), "-o", ewp])
    empty = tmp_path / "empty.cubin"
    run([nvlink, f"-arch={ARCH}", ewp, "-o", empty])
    assert elfsyms.kernels(str(empty)) == []  # what the real nvlink does
    fake = tmp_path / "nvlink"
    fake.write_text("#!/bin/sh\n"
                    f'case "$1" in --version) exec "{nvlink}" --version ;; esac\n'
                    'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                    f'cp "{empty}" "$out"\n')
    fake.chmod(0o755)
    env = dict(os.environ, TASKCACHE_NVLINK=str(fake), TASKCACHE_NVJITLINK="none")
    cache, out = tmp_path / "cache", tmp_path / "out.cubin"
    p = run([TASKCACHE, "build", src, "-o", out, "--arch", ARCH, *PER_KERNEL, "--cache-dir",
             cache], env=env, check=False)
    assert p.returncode == 0, p.stderr
    assert "compiled whole, not split: its units do not link (link: the linked image lacks " \
        "kernel" in p.stderr, p.stderr
    whole = tmp_path / "whole.cubin"
    run([PTXAS, f"-arch={ARCH}", src, "-o", whole])
    assert sorted(elfsyms.kernels(str(out))) == sorted(elfsyms.kernels(str(whole)))
    # the real linker: units from the cache, a good image
    p = build(src, out, cache, *PER_KERNEL, "-v")
    assert "0 compiled" in p.stderr
    assert elfsyms.kernels(str(out))


def logging_ptxas(tmp_path):
    """A ptxas that records its arguments and the PTX it compiled."""
    from tchelp import PTXAS
    log = tmp_path / "ptxas-calls"
    log.mkdir()
    w = tmp_path / "ptxas"
    w.write_text("#!/bin/sh\n"
                 f'n=$(mktemp "{log}/call.XXXXXX")\n'
                 'for a in "$@"; do case "$a" in *.ptx) cp "$a" "$n.ptx" ;; esac; done\n'
                 'echo "$@" > "$n"\n'
                 f'exec "{PTXAS}" "$@"\n')
    w.chmod(0o755)

    def calls():
        out = []
        for f in sorted(log.glob("call.??????")):
            ptx = f.with_name(f.name + ".ptx")
            if ptx.exists():
                out.append((f.read_text(), ptx.read_text()))
        return out
    return w, calls


def test_whole_program_units_read_constants_where_the_image_has_them(tmp_path):
    """ptxas -ewp writes the bank offset of a read of an extern __constant__
    variable into the code, with no relocation. With --whole-program-units a
    unit reading __constant__ data is still compiled -ewp: it declares the
    module's .const variables in the module's order and the module data is
    compiled -ewp as well, so the linked image holds each variable at the
    offset a whole-module ptxas build gives it."""
    from tchelp import PTXAS
    if nvjitlink_library() is None:
        pytest.skip("no libnvJitLink.so in the toolkit")
    src = os.path.join(corpus_dir(), "constant_mem.ptx")
    wrapper, calls = logging_ptxas(tmp_path)
    out, whole = tmp_path / "ewp.cubin", tmp_path / "whole.cubin"
    run([TASKCACHE, "build", src, "-o", out, "--arch", ARCH, *PER_KERNEL, "--no-cache",
         "--compiler", "ptxas", "--ptxas", wrapper, "--whole-program-units"])
    seen = calls()
    assert len(seen) == 6  # the module data and five units of one kernel
    assert all("--extensible-whole-program" in args for args, _ in seen)
    order = ["c_coeffs", "c_poly", "c_affine", "c_lut", "s_cbias"]  # the module's order
    declared = [[ln.split()[-1].split("[")[0].rstrip(";") for ln in text.splitlines()
                 if ln.startswith(".extern .const")] for _, text in seen if ".entry" in text]
    # each unit: the module's order, up to the last variable it reads
    assert all(d == order[:len(d)] for d in declared) and order in declared
    run([PTXAS, f"-arch={ARCH}", src, "-o", whole])
    want = elfsyms.variables_in(str(whole), ".nv.constant3")
    assert sorted(want) == sorted(order)
    assert elfsyms.variables_in(str(out), ".nv.constant3") == want


MIXED_CONSTS = """.version 8.0
.target sm_90
.address_size 64
.const .align 4 .b8 a[5] = {1, 2, 3, 4, 5};
.const .align 16 .v4 .f32 b[2][3];
.const .u64 c = 7;
.const .f16x2 e;
.visible .entry k(.param .u64 p)
{
 .reg .b32 %r<3>; .reg .b64 %rd<2>;
 ld.param.u64 %rd1, [p];
 ld.const.u32 %r1, [a+1];
 ld.const.u32 %r2, [e];
 add.s32 %r1, %r1, %r2;
 st.global.u32 [%rd1], %r1;
 ret;
}
.visible .entry k2(.param .u64 p)
{
 .reg .b32 %r<2>; .reg .b64 %rd<2>;
 ld.param.u64 %rd1, [p];
 ld.const.u32 %r1, [c];
 st.global.u32 [%rd1], %r1;
 ret;
}
"""


def test_whole_program_constant_layout_with_alignment_vectors_and_arrays(tmp_path):
    """Alignment padding, vector elements and two-dimensional arrays: the
    offsets taskcache lays out (and checks in the image) are the ones a
    whole-module ptxas build gives, each kernel in its own -ewp unit."""
    from tchelp import PTXAS
    if nvjitlink_library() is None:
        pytest.skip("no libnvJitLink.so in the toolkit")
    ptx = tmp_path / "m.ptx"
    ptx.write_text(MIXED_CONSTS)
    wrapper, calls = logging_ptxas(tmp_path)
    out, whole = tmp_path / "ewp.cubin", tmp_path / "whole.cubin"
    run([TASKCACHE, "build", ptx, "-o", out, "--arch", ARCH, "--no-cache", "--compiler",
         "ptxas", "--ptxas", wrapper, "--whole-program-units", "--unit-cost", "1"])
    seen = calls()
    assert len(seen) == 3 and all("--extensible-whole-program" in a for a, _ in seen)
    run([PTXAS, f"-arch={ARCH}", ptx, "-o", whole])
    want = elfsyms.variables_in(str(whole), ".nv.constant3")
    assert want == {"a": 0, "b": 16, "c": 112, "e": 120}
    assert elfsyms.variables_in(str(out), ".nv.constant3") == want


def test_whole_program_units_keep_constant_readers_relocatable_when_sizes_are_unstated(
        tmp_path):
    """An array of unstated size leaves the offsets of the variables after it
    unknown to the unit, so a unit reading __constant__ data stays -c."""
    if nvjitlink_library() is None:
        pytest.skip("no libnvJitLink.so in the toolkit")
    ptx = tmp_path / "m.ptx"
    ptx.write_text(".version 8.0\n.target sm_90\n.address_size 64\n"
                   ".const .align 4 .b8 table[] = {1, 2, 3, 4, 5};\n"
                   ".const .align 4 .u32 after = 7;\n"
                   ".visible .entry reads(.param .u64 p)\n{\n .reg .b32 %r<2>;\n"
                   " .reg .b64 %rd<3>;\n ld.param.u64 %rd1, [p];\n"
                   " cvta.to.global.u64 %rd2, %rd1;\n ld.const.u32 %r1, [after];\n"
                   " st.global.u32 [%rd2], %r1;\n ret;\n}\n"
                   ".visible .entry writes(.param .u64 p)\n{\n .reg .b32 %r<2>;\n"
                   " .reg .b64 %rd<3>;\n ld.param.u64 %rd1, [p];\n"
                   " cvta.to.global.u64 %rd2, %rd1;\n mov.u32 %r1, 5;\n"
                   " st.global.u32 [%rd2], %r1;\n ret;\n}\n")
    wrapper, calls = logging_ptxas(tmp_path)
    out = tmp_path / "a.cubin"
    run([TASKCACHE, "build", ptx, "-o", out, "--arch", ARCH, "--no-cache", "--compiler",
         "ptxas", "--ptxas", wrapper, "--whole-program-units", "--unit-cost", "1"])
    modes = {("reads" if ".entry reads" in text else "writes" if ".entry writes" in text
              else "data"): "--extensible-whole-program" in args for args, text in calls()}
    assert modes == {"reads": False, "writes": True, "data": False}
    assert elfsyms.kernels(str(out)) == ["reads", "writes"]


def test_compiler_threads_leave_the_code_alone(tmp_path):
    """A whole-program unit is compiled with --split-compile=2, so that an
    edit, which compiles one unit, keeps two cores busy, and a module
    compiled whole with --split-compile=0 (a thread on every CPU, recorded
    as "0" whatever the machine). The code is the one-thread code: every
    kernel's .text as with --split-compile=1. Relocatable units, whose code
    the option changes, do not get it; a split-compile in the user's
    options replaces it."""
    from tchelp import PTXAS
    if nvjitlink_library() is None:
        pytest.skip("no libnvJitLink.so in the toolkit")
    release = re.search(r"cuda_(\d+)\.", subprocess.run([PTXAS, "--version"], capture_output=True,
                                                         text=True).stdout)
    if not release or int(release.group(1)) < 13:
        pytest.skip("ptxas before CUDA 13 compiles units on one thread")
    src = os.path.join(corpus_dir(), "helpers.ptx")
    wrapper, calls = logging_ptxas(tmp_path)

    def unit_calls(out, *extra):
        for f in (tmp_path / "ptxas-calls").iterdir():
            f.unlink()
        run([TASKCACHE, "build", src, "-o", out, "--arch", ARCH, *PER_KERNEL, "--no-cache",
             "--compiler", "ptxas", "--ptxas", wrapper, *extra])
        return [args for args, text in calls() if ".entry" in text]

    two, one = tmp_path / "two.cubin", tmp_path / "one.cubin"
    seen = unit_calls(two, "--whole-program-units")
    assert seen and all("--split-compile=2" in a.split() for a in seen)
    seen = unit_calls(one, "--whole-program-units", "-Xptxas", "--split-compile=1")
    assert seen and all("--split-compile=1" in a.split() and "--split-compile=2" not in a
                        for a in seen)
    a, b = elfsyms.sections(str(two)), elfsyms.sections(str(one))
    texts = [n for n in a if n.startswith(".text.")]
    assert texts and all(a[n] == b[n] for n in texts)
    assert all("split-compile" not in x
               for x in unit_calls(tmp_path / "c.cubin", "--relocatable-units"))
    for f in (tmp_path / "ptxas-calls").iterdir():
        f.unlink()
    whole = [tmp_path / "w.cubin", tmp_path / "w1.cubin"]
    for out, extra in zip(whole, ([], ["-Xptxas", "--split-compile=1"])):
        run([TASKCACHE, "build", src, "-o", out, "--arch", ARCH, "--no-cache", "--compiler",
             "ptxas", "--ptxas", wrapper, "--no-split", *extra])
    seen = sorted([o for o in a.split() if "split-compile" in o] for a, _ in calls())
    assert seen == [["--split-compile=0"], ["--split-compile=1"]]
    a, b = (elfsyms.sections(str(w)) for w in whole)
    texts = [n for n in a if n.startswith(".text.")]
    assert texts and all(a[n] == b[n] for n in texts)


def test_whole_program_units_without_nvjitlink_compile_relocatable(tmp_path):
    src = os.path.join(corpus_dir(), "clusters.ptx")
    env = dict(os.environ, TASKCACHE_NVJITLINK="none")
    out = tmp_path / "a.cubin"
    p = run([TASKCACHE, "build", src, "-o", out, "--arch", ARCH, *PER_KERNEL, "--no-cache",
             "--whole-program-units", "-v"], env=env)
    assert "need libnvJitLink" in p.stderr and "(nvlink)" in p.stderr
    assert len(elfsyms.kernels(str(out))) == 4


def test_the_default_unit_code_follows_the_linker(tmp_path):
    """Whole-program units where libnvJitLink is found, relocatable units
    linked by nvlink where it is not, and then without a note (nothing was
    asked for); TASKCACHE_UNIT_CODE and --relocatable-units choose too."""
    src = os.path.join(corpus_dir(), "clusters.ptx")
    out = tmp_path / "a.cubin"

    def build_v(*extra, **env):
        return run([TASKCACHE, "build", src, "-o", out, "--arch", ARCH, *PER_KERNEL,
                    "--no-cache", "-v", *extra], env=dict(os.environ, **env)).stderr

    if nvjitlink_library() is not None:
        assert "split, whole-program units" in build_v()
        assert "split, relocatable units" in build_v(TASKCACHE_UNIT_CODE="relocatable")
        assert "split, relocatable units" in build_v("--relocatable-units")
    err = build_v(TASKCACHE_NVJITLINK="none")
    assert "split, relocatable units" in err and "(nvlink)" in err and "note" not in err
    assert len(elfsyms.kernels(str(out))) == 4


# Kernels whose stack size no compiler can know: one recursing through a
# helper, one calling alloca.
STACK_UNKNOWN = """.version 8.0
.target sm_90
.address_size 64

.global .align 4 .u32 results[2];

.func (.param .b32 r) depth(.param .b32 n)
{
	.reg .pred %p;
	.reg .b32 %n<4>;
	ld.param.b32 %n1, [n];
	setp.eq.u32 %p, %n1, 0;
	@%p bra done;
	sub.u32 %n2, %n1, 1;
	{
	.param .b32 a;
	.param .b32 b;
	st.param.b32 [a], %n2;
	call.uni (b), depth, (a);
	ld.param.b32 %n3, [b];
	}
	add.u32 %n1, %n3, 1;
done:
	st.param.b32 [r], %n1;
	ret;
}

.visible .entry recursing(.param .u32 n)
{
	.reg .b32 %r<3>;
	ld.param.u32 %r1, [n];
	{
	.param .b32 a;
	.param .b32 b;
	st.param.b32 [a], %r1;
	call.uni (b), depth, (a);
	ld.param.b32 %r2, [b];
	}
	st.global.u32 [results], %r2;
	ret;
}

.visible .entry allocating(.param .u64 n)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [n];
	alloca.u64 %rd2, %rd1, 16;
	st.local.u32 [%rd2], 7;
	ld.local.u32 %r1, [%rd2];
	st.global.u32 [results+4], %r1;
	ret;
}
"""


@pytest.mark.parametrize("mode", ["default", "ptxas", "relocatable"])
def test_a_split_build_warns_about_stack_sizes_as_the_whole_build_does(tmp_path, mode):
    """ptxas -ewp warns that the stack size of a recursing kernel, or of one
    that calls alloca, cannot be statically determined; the whole-module
    compile says nothing. A split build prints what the whole build prints,
    and one with --warning-as-error builds where the whole build does."""
    from tchelp import PTXAS
    src = tmp_path / "stack.ptx"
    src.write_text(STACK_UNKNOWN)
    extra = {"default": [], "ptxas": ["--compiler", "ptxas"],
             "relocatable": ["--relocatable-units"]}[mode]
    whole = run([PTXAS, "-arch=" + ARCH, "--warning-as-error", src, "-o", tmp_path / "w.cubin"])
    assert whole.stderr == ""
    for flags in ([], ["-Xptxas", "--warning-as-error"]):
        out = tmp_path / "t.cubin"
        p = build(src, out, None, *PER_KERNEL, *extra, *flags)
        assert p.stderr == ""
        assert elfsyms.kernels(str(out)) == elfsyms.kernels(str(tmp_path / "w.cubin"))


SHARED_ARRAYS = """
extern "C" __global__ void k0(float *out)
{
    __shared__ float s[5000];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}
extern "C" __global__ void k1(float *out)
{
    __shared__ float t[300];
    t[threadIdx.x % 300] = 2.0f * threadIdx.x;
    __syncthreads();
    out[threadIdx.x] += t[(threadIdx.x + 3) % 300];
}
""" + "".join(  # enough other kernels that the module is split by default
    f"""extern "C" __global__ void f{i}(float *out, int n)
{{
    float a = out[threadIdx.x];
    for (int k = 0; k < n; k++)
        a = a * {1 + i / 100} + sinf(a + k);
    out[threadIdx.x] = a;
}}
""" for i in range(40))


@pytest.mark.parametrize("command", ["build", "ptxas"])
def test_a_device_debug_build_is_compiled_whole_with_the_shared_memory_of_ptxas(
        tmp_path, command):
    """With ptxas -g, units linked into one image held each kernel's static
    shared arrays twice (k0: 1024 + 2 x 20,000 bytes, against ptxas's 1024
    + 20,000). A debug build is compiled whole, and says why."""
    from tchelp import PTXAS, nvcc_ptx
    src = nvcc_ptx(SHARED_ARRAYS, tmp_path / "shared.ptx")
    whole = tmp_path / "w.cubin"
    run([PTXAS, "-arch=" + ARCH, "-g", src, "-o", whole])
    out = tmp_path / "t.cubin"
    if command == "build":
        p = build(src, out, tmp_path / "cache", "-Xptxas", "-g")
    else:
        p = run([TASKCACHE, "ptxas", "-arch=" + ARCH, "--device-debug", src, "-o", out],
                env=dict(os.environ, TASKCACHE_DIR=str(tmp_path / "cache")))
    shared = {n: size for n, size in elfsyms.section_sizes(str(whole)).items()
              if n.startswith(".nv.shared.")}
    assert shared[".nv.shared.k0"] == 1024 + 20000
    assert {n: size for n, size in elfsyms.section_sizes(str(out)).items()
            if n.startswith(".nv.shared.")} == shared
    if command == "build":
        assert "compiled whole, not split: device debug information (-g)" in p.stderr
    # without -g the same module is split
    p = build(src, tmp_path / "split.cubin", tmp_path / "cache", "-v")
    assert "(split" in p.stderr


def test_a_sanitizer_build_is_compiled_whole_with_the_code_of_ptxas(tmp_path):
    """ptxas -sanitize=memcheck on units linked into one image gave every
    kernel other code than the whole compile, and no constant bank for the
    device allocator (.nv.constant4, relocated to malloc and free). A
    sanitizer build is compiled whole, and says why."""
    from tchelp import PTXAS, nvcc_ptx
    src = nvcc_ptx(SHARED_ARRAYS, tmp_path / "shared.ptx")
    whole = tmp_path / "w.cubin"
    run([PTXAS, "-arch=" + ARCH, "-sanitize=memcheck", src, "-o", whole])
    out = tmp_path / "t.cubin"
    p = build(src, out, tmp_path / "cache", "-Xptxas", "-sanitize=memcheck")
    assert "compiled whole, not split: sanitizer instrumentation (-sanitize)" in p.stderr
    want, got = elfsyms.sections(str(whole)), elfsyms.sections(str(out))
    texts = [n for n in want if n.startswith(".text.")]
    assert len(texts) == 42 and all(got.get(n) == want[n] for n in texts)
    assert ".nv.constant4" in want and got.get(".nv.constant4") == want[".nv.constant4"]


@pytest.mark.parametrize("suppressed", [False, True])
def test_line_information_for_ptx_without_loc_carries_the_modules_ptx(tmp_path, suppressed):
    """-lineinfo on PTX without .loc directives maps the machine code to
    lines of the PTX, and ptxas puts that PTX into the image
    (.nv_debug_ptx_txt). Split, the image carried every unit's rewritten
    text instead, so a profiler's PTX view showed text the user never
    wrote: such a build is compiled whole, and says why. With
    -suppress-debug-info there is no line information, and it splits."""
    from tchelp import PTXAS, nvcc_ptx
    src = nvcc_ptx(SHARED_ARRAYS, tmp_path / "shared.ptx")
    assert not re.search(r"^\s*\.loc\s", open(src).read(), re.M)
    extra = ["-Xptxas", "-suppress-debug-info"] if suppressed else []
    whole = tmp_path / "w.cubin"
    run([PTXAS, "-arch=" + ARCH, "-lineinfo", *extra[1:], src, "-o", whole])
    out = tmp_path / "t.cubin"
    p = build(src, out, tmp_path / "cache", "-lineinfo", *extra, "-v")
    want, got = elfsyms.sections(str(whole)), elfsyms.sections(str(out))
    if suppressed:
        assert ".nv_debug_ptx_txt" not in want and ".nv_debug_ptx_txt" not in got
        assert "(split" in p.stderr
        return
    assert "compiled whole, not split: line information (-lineinfo)" in p.stderr
    assert want[".nv_debug_ptx_txt"].count(b"\0.version ") == 1  # the module, once
    assert got[".nv_debug_ptx_txt"] == want[".nv_debug_ptx_txt"]


FAST_COMPILED = r"""
__device__ __noinline__ float helper(float x, float y)
{
    float r = 0.f;
    for (int i = 0; i < 8; i++)
        r = r * x + y * (float)i;
    return r;
}
extern "C" __global__ void call_a(const float *a, float *o, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = helper(a[i], 2.0f);
}
extern "C" __global__ void call_b(const float *a, float *o, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = helper(3.0f, a[i]) + 1.0f;
}
"""


@pytest.mark.parametrize("plan", [[], PER_KERNEL])
def test_fast_compile_gets_no_compiler_threads(tmp_path, plan):
    """With -Ofc min (and mid), ptxas's threads (--split-compile, which
    taskcache adds) change the registers of kernels that call a function:
    taskcache adds none, so the code is ptxas's, compiled whole or split."""
    from tchelp import PTXAS, nvcc_ptx
    src = nvcc_ptx(FAST_COMPILED, tmp_path / "fast.ptx")
    whole = tmp_path / "w.cubin"
    run([PTXAS, "-arch=" + ARCH, "--Ofast-compile=min", src, "-o", whole])
    out = tmp_path / "t.cubin"
    build(src, out, tmp_path / "cache", *plan, "-Xptxas", "--Ofast-compile=min")
    want, got = elfsyms.sections(str(whole)), elfsyms.sections(str(out))
    assert [got.get(n) == want[n] for n in (".text.call_a", ".text.call_b")] == [True, True]


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
        p = build(src, tmp_path / "x.cubin", None, *PER_KERNEL,
                  "--compiler", "inprocess", check=False)
        assert p.returncode == 1 and "built without the in-process compiler" in p.stderr
        return
    cache = str(tmp_path / "cache")
    a, b = tmp_path / "ptxas.cubin", tmp_path / "inproc.cubin"
    build(src, a, cache, *PER_KERNEL, "--compiler", "ptxas")
    s1 = stats(cache)
    build(src, b, cache, *PER_KERNEL, "--compiler", "inprocess")
    s2 = stats(cache)
    # different compiler identities: nothing is shared between the two
    assert s2["compiles"] - s1["compiles"] == s1["compiles"]
    assert elfsyms.kernels(str(a)) == elfsyms.kernels(str(b))
    assert elfsyms.globals_(str(a)) == elfsyms.globals_(str(b))
    keys_a = json.loads(tc("explain", src, "--arch", ARCH, *PER_KERNEL, "--cache-dir", cache,
                           "--json", "--compiler", "ptxas").stdout)
    keys_b = json.loads(tc("explain", src, "--arch", ARCH, *PER_KERNEL, "--cache-dir", cache,
                           "--json", "--compiler", "inprocess").stdout)
    assert all(x["slice_key"] != y["slice_key"]
               for x, y in zip(keys_a["entries"], keys_b["entries"]))
    # both coexist in one cache: each is warm now
    build(src, a, cache, *PER_KERNEL, "--compiler", "ptxas")
    build(src, b, cache, *PER_KERNEL, "--compiler", "inprocess")
    assert stats(cache)["module_hits"] == 2
    # compile errors keep their input line numbers in-process too
    bad = ROOT / "tests" / "corpus" / "bad" / "bad_instruction.ptx"
    p = build(str(bad), tmp_path / "bad.cubin", None, *PER_KERNEL,
              "--compiler", "inprocess", check=False)
    assert p.returncode == 1 and f"{bad}:17: error:" in p.stderr


def test_only_a_compiler_crash_brings_a_second_compile_without_its_threads(tmp_path):
    """taskcache adds its own thread option (--split-compile); ptxas 13.0
    crashes with it on some modules, so a crash brings one more compile
    without it. An error in the input does not: it is reported after one
    compile, as ptxas alone would report it."""
    from tchelp import PTXAS
    calls = tmp_path / "calls"
    wrapper = tmp_path / "ptxas"
    # a ptxas that dies of SIGSEGV whenever it is given a thread option
    wrapper.write_text("#!/bin/sh\n"
                       f'echo "$*" >> "{calls}"\n'
                       'case "$*" in *split-compile*) kill -SEGV $$ ;; esac\n'
                       f'exec "{PTXAS}" "$@"\n')
    wrapper.chmod(0o755)
    base = ["--arch", ARCH, "--no-cache", "--compiler", "ptxas", "--ptxas", wrapper, "--no-split"]
    good = os.path.join(corpus_dir(), "helpers.ptx")
    run([TASKCACHE, "build", good, "-o", tmp_path / "a.cubin", *base])
    def compiles():  # the version is asked first
        return [c for c in calls.read_text().splitlines() if c != "--version"]
    seen = compiles()
    assert len(seen) == 2 and "split-compile" in seen[0] and "split-compile" not in seen[1]
    assert elfsyms.kernels(str(tmp_path / "a.cubin"))
    calls.unlink()
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90\n.address_size 64\n"
                   ".visible .entry k()\n{\n bra NOWHERE;\n ret;\n}\n")
    wrapper.write_text(wrapper.read_text().replace("kill -SEGV $$", ":"))  # no crash now
    p = run([TASKCACHE, "build", bad, "-o", tmp_path / "b.cubin", *base], check=False)
    assert p.returncode != 0 and "bad.ptx:6: error: Unknown symbol 'NOWHERE'" in p.stderr
    assert len(compiles()) == 1
