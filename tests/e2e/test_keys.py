"""Key stability: a slice's key changes exactly when something that can
change its machine code changes, and never because of unrelated entries."""

import os
import re
import stat

import elfsyms
import tchelp
from tchelp import PER_KERNEL, PTXAS, nvcc_ptx, stats


# the modules here are small: one unit per kernel, as a large module is split
def tc_build(ptx, out, cache, *extra, **kw):
    return tchelp.build(ptx, out, cache, *PER_KERNEL, *extra, **kw)


def explain(ptx, cache, *extra):
    return tchelp.explain(ptx, cache, *PER_KERNEL, *extra)


def slice_keys(ptx, cache, *extra):
    return tchelp.slice_keys(ptx, cache, *PER_KERNEL, *extra)

HEADER = r"""
#include <cstdio>
__device__ float g_scale = 2.0f;
__constant__ float c_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
__device__ __noinline__ float shared_helper(float x) { return x * g_scale + c_table[3]; }
__device__ __noinline__ float other_helper(float x) { return x - c_table[1]; }
"""

KERNELS = {
    "k_alpha": r"""
extern "C" __global__ void k_alpha(float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = shared_helper(o[i]);
}""",
    "k_beta": r"""
extern "C" __global__ void k_beta(float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0;
    for (int k = 0; k < n; k++) acc += other_helper(o[(i + k) % n]);
    if (i < n) o[i] = acc;
}""",
    "k_gamma": r"""
extern "C" __global__ void k_gamma(float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { o[i] = shared_helper(o[i]) + 1.0f; printf("gamma %d\n", i); }
}""",
    "k_delta": r"""
extern "C" __global__ void k_delta(int *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && o[i] > 3) printf("delta %d %d\n", i, o[i]);
}""",
}

EXTRA = r"""
extern "C" __global__ void k_extra(float *o, int n) {
    int i = threadIdx.x;
    if (i < n) { o[i] = shared_helper(o[i]) * 3.0f; printf("extra %d\n", i); }
}"""


def module(tmp_path, name, order, header=HEADER, kernels=KERNELS, extra=None):
    text = header + (extra or "") + "".join(kernels[k] for k in order)
    return nvcc_ptx(text, tmp_path / f"{name}.ptx")


ORDER = ["k_alpha", "k_beta", "k_gamma", "k_delta"]


def test_editing_one_entry_changes_only_its_key(tmp_path, cache):
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    edited = dict(KERNELS)
    edited["k_beta"] = KERNELS["k_beta"].replace("acc += other", "acc -= other")
    after = slice_keys(module(tmp_path, "edit", ORDER, kernels=edited), cache)
    assert set(base) == set(after)
    changed = {k for k in base if base[k] != after[k]}
    assert changed == {"k_beta"}


def test_adding_an_entry_leaves_other_keys(tmp_path, cache):
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    # the new kernel comes first, so nvcc renumbers every label, local
    # depot and string constant that follows it
    after = slice_keys(module(tmp_path, "added", ORDER, extra=EXTRA), cache)
    assert set(after) == set(base) | {"k_extra"}
    assert all(after[k] == base[k] for k in base)


def test_removing_an_entry_leaves_other_keys(tmp_path, cache):
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    after = slice_keys(module(tmp_path, "removed", [k for k in ORDER if k != "k_alpha"]), cache)
    assert set(after) == set(base) - {"k_alpha"}
    assert all(after[k] == base[k] for k in after)


def test_reordering_entries_leaves_keys(tmp_path, cache):
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    after = slice_keys(module(tmp_path, "reordered", list(reversed(ORDER))), cache)
    assert after == base


def test_editing_a_shared_function_changes_exactly_its_users(tmp_path, cache):
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    header = HEADER.replace("x * g_scale", "x / g_scale")
    after = slice_keys(module(tmp_path, "helper", ORDER, header=header), cache)
    changed = {k for k in base if base[k] != after[k]}
    assert changed == {"k_alpha", "k_gamma"}  # the two callers of shared_helper


def test_editing_a_table_initializer_changes_no_slice(tmp_path, cache):
    """Initializers live only in the module-data object."""
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    header = HEADER.replace("{1, 2, 3, 4, 5, 6, 7, 8}", "{1, 2, 3, 4, 5, 6, 7, 9}")
    after = slice_keys(module(tmp_path, "table", ORDER, header=header), cache)
    assert after == base


def test_target_options_and_compiler_change_every_key(tmp_path, cache):
    ptx = module(tmp_path, "base", ORDER)
    base = slice_keys(ptx, cache)
    other_target = {e["name"]: e["slice_key"] for e in
                    __import__("json").loads(__import__("tchelp").tc(
                        "explain", ptx, "--arch", "sm_89", "--cache-dir", cache,
                        "--json").stdout)["entries"]}
    assert all(other_target[k] != base[k] for k in base)
    for opt in (["-O2"], ["-lineinfo"], ["--maxrregcount=32"], ["--fmad=false"],
                ["-Xptxas", "--def-load-cache=cg"]):
        after = slice_keys(ptx, cache, *opt)
        assert all(after[k] != base[k] for k in base), opt
    # the unit code (whole-program units by default, libnvJitLink being
    # there) changes the keys of the slices compiled that way: all of them
    # here (k_delta reads only .global data, the others also __constant__
    # data, declared as the module lays it out)
    assert slice_keys(ptx, cache, "--whole-program-units") == base
    after = slice_keys(ptx, cache, "--relocatable-units")
    assert all(after[k] != base[k] for k in base)
    # a different compiler: a wrapper that reports another version
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\n"
                    "if [ \"$1\" = --version ]; then echo 'ptxas: a different release'; exit 0; fi\n"
                    f"exec {PTXAS} \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with_ptxas = slice_keys(ptx, cache, "--compiler", "ptxas")
    after = slice_keys(ptx, cache, "--compiler", "ptxas", "--ptxas", str(fake))
    assert all(after[k] != with_ptxas[k] for k in with_ptxas)


def test_whitespace_and_comments_do_not_change_keys(tmp_path, cache):
    ptx = module(tmp_path, "base", ORDER)
    base = slice_keys(ptx, cache)
    text = open(ptx).read()
    noisy = tmp_path / "noisy.ptx"
    noisy.write_text("// leading comment\n" + text.replace("\t", "    ")
                     .replace(";\n", "; /* trailing */\n"))
    assert slice_keys(str(noisy), cache) == base


def test_unit_keys_follow_slice_keys(tmp_path, cache):
    """An edit changes the unit key of the edited kernel's unit only."""
    base = explain(module(tmp_path, "base", ORDER), cache)
    edited = dict(KERNELS)
    edited["k_delta"] = KERNELS["k_delta"].replace("> 3", "> 4")
    after = explain(module(tmp_path, "edit", ORDER, kernels=edited), cache)
    units_before = {e["name"]: e["unit_key"] for e in base["entries"]}
    units_after = {e["name"]: e["unit_key"] for e in after["entries"]}
    changed_units = {units_after[k] for k in units_after if units_after[k] != units_before[k]}
    assert changed_units == {units_after["k_delta"]}


def test_layout_does_not_change_keys(tmp_path, cache):
    """Everything ptxas reads the same way keeps every key: comment lines and
    blank lines inside bodies, spacing between tokens ([a] vs [ a ]), a
    header directive moved to the next line, a reflowed prototype."""
    ptx = module(tmp_path, "base", ORDER)
    base = slice_keys(ptx, cache)
    text = open(ptx).read()
    assert "ld.param.u64" in text and "[k_alpha_param_0]" in text
    text = (text.replace("ld.param.u64", "// a comment line\n\n\tld.param.u64", 1)
                .replace("[k_alpha_param_0]", "[ k_alpha_param_0 ]")
                .replace(".target sm_90", ".target\n   sm_90")
                .replace(".visible .entry k_alpha(\n", ".visible .entry\nk_alpha\n(\n"))
    relaid = tmp_path / "relaid.ptx"
    relaid.write_text(text)
    assert slice_keys(str(relaid), cache) == base


def test_an_equal_string_added_earlier_keeps_keys(tmp_path, cache):
    """nvcc numbers string constants by position ($str, $str$1, ...) and
    merges equal ones: a kernel added first that prints the same text as
    k_gamma shares and renumbers k_gamma's string, but not its name in any
    slice."""
    base = slice_keys(module(tmp_path, "base", ORDER), cache)
    first = r"""
extern "C" __global__ void k_first(float *o, int n) {
    if (threadIdx.x < n) printf("gamma %d\n", n);
}"""
    after = slice_keys(module(tmp_path, "more", ORDER, extra=first), cache)
    assert "k_first" in after
    assert all(after[k] == base[k] for k in base)


def test_reserved_names_and_files_elsewhere_keep_keys(tmp_path, cache):
    """A kernel that names something with taskcache's reserved prefix, and a
    .file directive that other kernels do not use, change no other key."""
    ptx = module(tmp_path, "base", ORDER)
    base = slice_keys(ptx, cache)
    text = open(ptx).read()
    odd = (".visible .entry k_odd()\n{\n\t.reg .b32 $__tcL0;\n\tmov.u32 $__tcL0, 1;\n"
           "\tbra $L__odd;\n$L__odd:\n\tret;\n}\n")
    text = text.replace(".address_size 64\n", ".address_size 64\n.file 7 \"other.cu\"\n") + odd
    more = tmp_path / "more.ptx"
    more.write_text(text)
    after = slice_keys(str(more), cache)
    assert "k_odd" in after
    assert all(after[k] == base[k] for k in base)


def test_compiler_identity_is_its_bytes(tmp_path, cache):
    """A ptxas wrapper that adds -O0 prints the real --version banner; records
    of the real ptxas are never served to it, and what it builds is what it
    builds from scratch."""
    ptx = module(tmp_path, "base", ORDER)
    wrapper = tmp_path / "bin" / "ptxas"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec {PTXAS} \"$@\" -O0\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    real = tc_build(ptx, tmp_path / "real.cubin", cache, "--compiler", "ptxas")
    assert real.returncode == 0
    before = stats(cache)["compiles"]
    wrapped = tc_build(ptx, tmp_path / "wrapped.cubin", cache, "--compiler", "ptxas",
                       "--ptxas", str(wrapper))
    assert stats(cache)["compiles"] > before  # nothing served from the real ptxas
    fresh = tc_build(ptx, tmp_path / "fresh.cubin", None, "--compiler", "ptxas",
                     "--ptxas", str(wrapper))
    assert wrapped.returncode == fresh.returncode == 0
    assert (tmp_path / "wrapped.cubin").read_bytes() == (tmp_path / "fresh.cubin").read_bytes()
    assert (tmp_path / "wrapped.cubin").read_bytes() != (tmp_path / "real.cubin").read_bytes()
    # the wrapper rewritten in place (same path, inode and size): a new identity
    keys_o0 = slice_keys(ptx, cache, "--compiler", "ptxas", "--ptxas", str(wrapper))
    wrapper.write_text(f"#!/bin/sh\nexec {PTXAS} \"$@\" -O1\n")
    keys_o1 = slice_keys(ptx, cache, "--compiler", "ptxas", "--ptxas", str(wrapper))
    assert all(keys_o1[k] != keys_o0[k] for k in keys_o0)


# ---- the memo of canonical texts (pipeline/canon_memo.h) --------------------

# TASKCACHE_TEST_CANON_MEMO=check: every text the memo gives is made again
# and compared, and the build says how many it took, made, and found unequal
MEMO_CHECK = dict(os.environ, TASKCACHE_TEST_CANON_MEMO="check")
MEMO_REPORT = re.compile(r"canonical texts: (\d+) from the memo, (\d+) made, "
                         r"(\d+) of the memo's differ")


def memo_report(p):
    m = MEMO_REPORT.search(p.stderr)
    assert m, p.stderr
    return tuple(int(x) for x in m.groups())


def test_the_canonical_text_memo_serves_what_would_be_made(tmp_path, cache):
    """A build keeps the canonical texts of its module's functions; the
    next build of the module, or of an edited copy, takes from them every
    function whose own text is unchanged and makes the rest: same keys,
    same image as a build without any cache."""
    base = module(tmp_path, "base", ORDER)
    tc_build(base, tmp_path / "a.cubin", cache)
    p = tc_build(base, tmp_path / "b.cubin", cache, "--no-module-cache", env=MEMO_CHECK)
    taken, made, differ = memo_report(p)
    assert taken >= len(ORDER) and made == 0 and differ == 0
    assert (tmp_path / "b.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    edited = dict(KERNELS)
    edited["k_beta"] = KERNELS["k_beta"].replace("acc += other", "acc -= other")
    e = module(tmp_path, "edit", ORDER, kernels=edited)
    p = tc_build(e, tmp_path / "e.cubin", cache, env=MEMO_CHECK)
    assert memo_report(p)[1:] == (1, 0)  # k_beta's text made; the others equal
    tc_build(e, tmp_path / "fresh.cubin", None)
    assert (tmp_path / "e.cubin").read_bytes() == (tmp_path / "fresh.cubin").read_bytes()
    assert slice_keys(e, cache) == slice_keys(e, tmp_path / "empty")


def test_a_constant_renamed_elsewhere_is_no_memo_hit(tmp_path, cache):
    """k_gamma names its string by a name made from the string's bytes:
    with the string changed and the kernel's own bytes not, the memo of
    the first build must not give k_gamma its old text."""
    base = module(tmp_path, "base", ORDER)
    tc_build(base, tmp_path / "a.cubin", cache)
    text = open(base).read()
    gamma = "103, 97, 109, 109, 97"  # "gamma"
    assert text.count(gamma) == 1
    changed = tmp_path / "changed.ptx"
    changed.write_text(text.replace(gamma, "71, 97, 109, 109, 97"))  # "Gamma"
    p = tc_build(changed, tmp_path / "c.cubin", cache, env=MEMO_CHECK)
    assert memo_report(p)[2] == 0
    after = slice_keys(changed, cache)
    assert after == slice_keys(changed, tmp_path / "empty")
    assert after["k_gamma"] != slice_keys(base, cache)["k_gamma"]


# ---- names and lines a split build could misread (a review, 2026-12-02) --------------

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
STORE = (" .reg .b64 %rd<4>;\n .reg .b32 %r<4>;\n ld.param.u64 %rd1, [p];\n"
         " {0}\n st.global.u32 [%rd1], %r2;\n ret;\n}}\n")


def test_code_after_a_loc_on_its_line_compiles_the_module_whole(tmp_path):
    """`.loc 1 2 0 .const ... tab[4] = {...};` is a .loc and a declaration:
    split, the table went unseen (each kernel read another's table). The
    module is compiled whole, with every kernel's code ptxas's."""
    kernels = "".join(
        f".visible .entry k{i}(.param .u64 p)\n{{\n"
        f" .loc 1 {i + 2} 0 .const .align 4 .u32 tab{i}[2] = {{{i}1, {i}2}};\n" +
        STORE.format(f"ld.const.u32 %r2, [tab{i}+4];") for i in range(3))
    src = tmp_path / "loc.ptx"
    src.write_text(HEAD + '.file 1 "a.cu"\n' + kernels)
    p = tc_build(str(src), tmp_path / "o.cubin", None)
    assert "compiled whole, not split: line 7: something follows the operands of a .loc" \
        in p.stderr, p.stderr
    tchelp.run([PTXAS, "-arch=sm_90", str(src), "-o", str(tmp_path / "w.cubin")])
    mine, whole = (elfsyms.sections(str(tmp_path / f)) for f in ("o.cubin", "w.cubin"))
    for k in ("k0", "k1", "k2"):
        assert mine[f".text.{k}"] == whole[f".text.{k}"], k


def test_a_local_name_like_a_renamed_constant_keeps_the_constants_names(tmp_path):
    """Compiler-named constants get names of the form $__tcA<digest>; a
    register or parameter of that name would capture their references, so
    such a name anywhere keeps the constants' own names."""
    const = ".global .align 1 .b8 $str[4] = {65, 66, 67, 0};\n"
    base = tmp_path / "named.ptx"
    base.write_text(HEAD + const + ".visible .entry k1(.param .u64 p)\n{\n .reg .b64 %rd<4>;\n"
                    " ld.param.u64 %rd1, [p];\n mov.u64 %rd2, $str;\n st.global.u64 [%rd1], %rd2;\n"
                    " ret;\n}\n.visible .entry k2(.param .u64 p)\n{\n ret;\n}\n")
    tc_build(str(base), tmp_path / "named.cubin", None)
    names = [y[0] for y in elfsyms.symbols(str(tmp_path / "named.cubin"))
             if y[0].startswith("$__tcA")]
    assert names, "the constant was not renamed: the test cannot name a collision"
    name = names[0]
    variants = {
        "base": "",
        "reg": f" .reg .b64 {name};\n mov.u64 {name}, 7;\n",
        "param": None,
    }
    texts = {}
    for v, extra in variants.items():
        params = ".param .u64 p" + (f", .param .u64 {name}" if v == "param" else "")
        texts[v] = (HEAD + const + f".visible .entry k1({params})\n{{\n .reg .b64 %rd<4>;\n"
                    + (extra or "") + " ld.param.u64 %rd1, [p];\n mov.u64 %rd2, $str;\n"
                    " st.global.u64 [%rd1], %rd2;\n ret;\n}\n"
                    ".visible .entry k2(.param .u64 p)\n{\n ret;\n}\n")
    code = {}
    for v, text in texts.items():
        src = tmp_path / f"{v}.ptx"
        src.write_text(text)
        tc_build(str(src), tmp_path / f"{v}.cubin", None)
        code[v] = elfsyms.sections(str(tmp_path / f"{v}.cubin"))[".text.k1"]
        relocs = elfsyms.sections(str(tmp_path / f"{v}.cubin")).get(".rela.text.k1", b"")
        assert relocs, f"{v}: k1 takes no address: the constant's reference was captured"
    assert code["reg"] == code["base"] == code["param"]


def test_a_label_named_like_a_module_variable_compiles_the_module_whole(tmp_path):
    """ptxas reads `mov %rd2, g` as the variable g though the function has
    a label g; split, the name was taken for the label and the build failed."""
    src = tmp_path / "label.ptx"
    src.write_text(HEAD + ".global .align 8 .u64 g = 5;\n"
                   ".visible .entry k1(.param .u64 p)\n{\n .reg .b64 %rd<4>;\n"
                   " ld.param.u64 %rd1, [p];\n mov.u64 %rd2, g;\n st.global.u64 [%rd1], %rd2;\n"
                   "g:\n ret;\n}\n.visible .entry k2(.param .u64 p)\n{\n ret;\n}\n")
    p = tc_build(str(src), tmp_path / "o.cubin", None)
    assert "label named like the module symbol 'g'" in p.stderr, p.stderr


def test_units_lay_shared_variables_out_in_the_input_order(tmp_path):
    """ptxas lays module-scope .shared variables out in declaration order;
    declared by name in a unit, a 1 KiB-aligned array after a word made a
    block's static shared memory 3072 bytes instead of 2064."""
    src = tchelp.ROOT / "tests" / "realworld" / "findings" / "shared_declaration_order.ptx"
    tc_build(str(src), tmp_path / "s.cubin", None)
    tchelp.run([PTXAS, "-arch=sm_90", str(src), "-o", str(tmp_path / "w.cubin")])
    sizes = {f: elfsyms.section_sizes(str(tmp_path / f)) for f in ("s.cubin", "w.cubin")}
    assert sizes["w.cubin"][".nv.shared.k1"] == 2064  # what this test is about
    assert sizes["s.cubin"][".nv.shared.k1"] == 2064
    mine, whole = (elfsyms.sections(str(tmp_path / f)) for f in ("s.cubin", "w.cubin"))
    assert mine[".text.k1"] == whole[".text.k1"]


def test_a_module_with_samplers_is_compiled_whole(tmp_path):
    """texmode_independent samplers: a unit that uses one declares it
    .extern, and its relocatable compile adds an all-0xff init record beside
    the real one (a review, 2026-12-02); such a module is compiled whole."""
    src = tmp_path / "samplers.ptx"
    src.write_text(".version 8.8\n.target sm_90, texmode_independent\n.address_size 64\n"
                   ".global .texref t1;\n"
                   ".global .samplerref smp1 = { addr_mode_0 = clamp_to_edge, "
                   "filter_mode = linear };\n" + "".join(
                       f".visible .entry k{i}(.param .u64 p)\n{{\n .reg .f32 %f<8>;\n"
                       " .reg .u64 %rd<3>;\n ld.param.u64 %rd1, [p];\n"
                       " mov.f32 %f1, 0f3F000000;\n"
                       " tex.1d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [t1, smp1, {%f1}];\n"
                       " st.global.f32 [%rd1], %f2;\n ret;\n}\n" for i in range(2)))
    p = tc_build(str(src), tmp_path / "o.cubin", None)
    assert "compiled whole, not split: line 5: a module-scope .samplerref variable" in p.stderr
