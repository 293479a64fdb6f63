"""tests/gpu/sass_compare.py: taskcache's SASS against whole-module builds.

The end-to-end test needs a disassembler (nvdisasm, or cuobjdump with the
nvdisasm it calls) and is skipped without one; CI machines have none, and
this test never downloads one. The other tests check the normalization and
the classification on embedded nvdisasm text and need no tool at all."""

import importlib.util
import json
import subprocess
import sys

import pytest

import elfsyms
from tchelp import ARCH, PTXAS, ROOT, TASKCACHE, run

TOOL = ROOT / "tests" / "gpu" / "sass_compare.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("sass_compare", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sc = load_tool()


def find_disassembler():
    """nvdisasm as the tool finds it, else cuobjdump (with an nvdisasm it can
    run: cuobjdump -sass calls nvdisasm)."""
    nvd = sc.find_tool("nvdisasm", None, "NVDISASM")
    if nvd:
        return "nvdisasm", nvd
    cuo = sc.find_tool("cuobjdump")
    if cuo:
        probe = subprocess.run([cuo, "--version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return "cuobjdump", cuo
    return None, None


# ---------------------------------------------------------------------------
# end to end (needs the CUDA toolkit's disassembler)

def test_sass_compare_covers_every_kernel(tmp_path):
    kind, tool = find_disassembler()
    if not tool:
        pytest.skip("neither nvdisasm nor cuobjdump found ($NVDISASM, $CUDA_HOME/bin, "
                    "/usr/local/cuda/bin, PATH): the SASS comparison cannot run here")
    ptx = ROOT / "tests" / "corpus" / "ptx" / "indirect_calls.ptx"
    js, rep = tmp_path / "out.json", tmp_path / "out.txt"
    args = [sys.executable, TOOL, "--ptx", ptx, "--taskcache", TASKCACHE, "--arch", ARCH,
            "--json", js, "--report", rep, f"--{kind}", tool]
    p = run(args, check=False)
    if kind == "cuobjdump" and p.returncode != 0 and "nvdisasm" in p.stderr:
        pytest.skip("cuobjdump is installed but cannot find the nvdisasm it needs")
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(js.read_text())

    whole = tmp_path / "whole.cubin"
    run([PTXAS, f"-arch={ARCH}", ptx, "-o", whole])
    kernels = elfsyms.kernels(str(whole))
    assert sorted(k["name"] for k in doc["kernels"]) == sorted(kernels)

    for key in ("AvsB", "AvsC", "CvsB"):
        s = doc["summary"][key]
        assert sum(s["kernels"][c] for c in sc.CLASSES) == len(kernels), (key, s)
        assert s["classified"] == len(kernels)
        for k in doc["kernels"]:
            c = k["comparisons"][key]
            assert c["class"] in sc.CLASSES
            # every real difference comes with words
            if c["class"] != "identical":
                assert c["explanation"], (key, k["name"])
    # the summary is printed, the table names every kernel
    assert "A vs C:" in p.stdout and "A vs B:" in p.stdout
    table = rep.read_text()
    for k in kernels:
        assert k in table
    # taskcache's code is the whole-module relocatable code (ptxas -c): the
    # slices carry internal copies of the helpers, which compile the same
    assert doc["summary"]["AvsC"]["kernels"]["different"] == 0, doc["summary_text"]


# ---------------------------------------------------------------------------
# normalization and classification, on embedded disassembly (no tools)

# whole-program style: callee copy in the kernel's section, relative call,
# return address as an absolute immediate, global address from bank 4
WHOLE = """
//--------------------- .text.k1                 --------------------------
	.section	.text.k1,"ax",@progbits
	.align	128
        .global         k1
        .type           k1,@function
        .size           k1,(.L_x_9 - k1)
        .other          k1,@"STO_CUDA_ENTRY STV_DEFAULT"
k1:
.text.k1:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0030*/               @P0 BRA `(.L_x_0) ;
        /*0040*/                   MOV R8, 0x60 ;
        /*0050*/                   CALL.REL.NOINC `($k1$helper) ;
        /*0060*/                   IADD3 R0, R0, 0x1, RZ ;
.L_x_0:
        /*0070*/                   EXIT ;
        .type           $k1$helper,@function
        .size           $k1$helper,(.L_x_9 - $k1$helper)
$k1$helper:
        /*0080*/                   IMAD.MOV.U32 R4, RZ, RZ, 0x7 ;
        /*0090*/                   RET.REL.NODEC R8 `(k1) ;
.L_x_1:
        /*00a0*/                   BRA `(.L_x_1);
        /*00b0*/                   NOP;
.L_x_9:
"""

# relocatable style: helper in its own section (a duplicate, renamed by
# nvdisasm), absolute call, return address through a relocation
RELOC = """
//--------------------- .text.helper__1          --------------------------
	.section	.text.helper__1,"ax",@progbits
	.align	128
        .map_symbolname .text.helper__1 .text.helper
.text.helper__1:
        .type           helper__0,@function
        .size           helper__0,(.L_x_20 - helper__0)
        .map_symbolname helper__0 helper
helper__0:
        /*0000*/                   MOV R4, 0x7 ;
        /*0010*/                   RET.ABS.NODEC R20 0x0 ;
.L_x_20:
//--------------------- .text.k1                 --------------------------
	.section	.text.k1,"ax",@progbits
	.align	128
        .global         k1
        .type           k1,@function
        .size           k1,(.L_x_30 - k1)
        .other          k1,@"STO_CUDA_ENTRY STV_DEFAULT"
k1:
.text.k1:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R2, SR_TID.X ;
        /*0020*/                   ISETP.GE.AND P1, PT, R2, 0x10, PT ;
        /*0030*/               @P1 BRA `(.L_x_25) ;
        /*0040*/                   MOV R20, 32@lo((k1 + .L_x_24@srel)) ;
        /*0050*/                   MOV R21, 32@hi((k1 + .L_x_24@srel)) ;
        /*0060*/                   CALL.ABS.NOINC `(helper__0) ;
.L_x_24:
        /*0070*/                   IADD3 R2, R2, 0x1, RZ ;
.L_x_25:
        /*0080*/                   EXIT ;
.L_x_26:
        /*0090*/                   BRA `(.L_x_26);
        /*00a0*/                   NOP;
        /*00b0*/                   NOP;
.L_x_30:
"""


class _FakeElf:
    sections, symbols, relocs = [], [], {}

    def section_bytes(self, *a):
        return b""


def normalized(text):
    funcs, labels, kernels, sec_end = sc.parse_nvdisasm(text)
    n = sc.Normalizer("X", _FakeElf(), funcs, labels, kernels, sec_end)
    for f in funcs.values():
        n.normalize(f)
    return funcs


@pytest.mark.no_toolkit
def test_parse_and_normalize_whole_program():
    funcs = normalized(WHOLE)
    assert set(funcs) == {"k1", "$k1$helper"}
    assert funcs["k1"].is_kernel and not funcs["$k1$helper"].is_kernel
    assert funcs["$k1$helper"].base == "helper"
    assert funcs["k1"].norm == [
        "LDC R1, c[0x0][0x28]", "S2R R0, SR_TID.X", "ISETP.GE.AND P0, PT, R0, 0x10, PT",
        "@P0 BRA `(L7)", "RETADDR.LO R8", "CALL.NOINC <F:helper>", "IADD3 R0, R0, 0x1, RZ",
        "EXIT"]
    # padding (self-branch and NOPs) is gone, the return loses its target
    assert funcs["$k1$helper"].norm == ["IMAD.MOV.U32 R4, RZ, RZ, 0x7", "RET.NODEC R8"]
    assert funcs["k1"].callees == {"$k1$helper"}


@pytest.mark.no_toolkit
def test_parse_and_normalize_relocatable():
    funcs = normalized(RELOC)
    assert funcs["helper__0"].base == "helper"
    assert funcs["k1"].norm == [
        "LDC R1, c[0x0][0x28]", "S2R R2, SR_TID.X", "ISETP.GE.AND P1, PT, R2, 0x10, PT",
        "@P1 BRA `(L8)", "RETADDR.LO R20", "RETADDR.HI R21", "CALL.NOINC <F:helper>",
        "IADD3 R2, R2, 0x1, RZ", "EXIT"]
    assert funcs["helper__0"].norm == ["MOV R4, 0x7", "RET.NODEC R20"]


@pytest.mark.no_toolkit
def test_classes():
    a = ["S2R R2, SR_TID.X", "ISETP.GE.AND P1, PT, R2, 0x10, PT", "@P1 EXIT",
         "IADD3 R3, R2, 0x1, RZ"]
    assert sc.compare_seq(a, list(a))["class"] == "identical"
    # a consistent renaming R2->R0, R3->R5, P1->P0
    b = ["S2R R0, SR_TID.X", "ISETP.GE.AND P0, PT, R0, 0x10, PT", "@P0 EXIT",
         "IADD3 R5, R0, 0x1, RZ"]
    r = sc.compare_seq(a, b)
    assert r["class"] == "regs" and r["renamed"] == 3
    # not a bijection: two registers of one side are one register of the other
    c = ["S2R R0, SR_TID.X", "ISETP.GE.AND P0, PT, R0, 0x10, PT", "@P0 EXIT",
         "IADD3 R0, R0, 0x1, RZ"]
    r = sc.compare_seq(a, c)
    assert r["class"] == "different" and "register allocation" in r["categories"]
    # the same instructions in another order
    d = [a[1], a[0], a[2], a[3]]
    r = sc.compare_seq(a, d)
    assert r["class"] == "different" and r["kind"] == "scheduling"
    # equivalent encodings are named as such
    e = ["S2R R2, SR_TID.X", "ISETP.GE.AND P1, PT, R2, 0x10, PT", "@P1 EXIT",
         "VIADD R3, R2, 0x1"]
    r = sc.compare_seq(a, e)
    assert r["categories"] == ["equivalent forms"], r
    assert "VIADD" in r["explanation"]
    # a global address from constant bank 4 vs relocated immediates
    f = ["LDC.64 R2, c[0x4][<&g>]", "LDG.E R0, desc[UR4][R2.64]"]
    g = ["UMOV UR6, 32@lo(<D:g>)", "UMOV UR7, 32@hi(<D:g>)", "MOV R2, UR6", "MOV R3, UR7",
         "LDG.E R0, desc[UR4][R2.64]"]
    r = sc.compare_seq(g, f)
    assert r["class"] == "different"
    assert set(r["categories"]) == {"global addresses", "moves"}, r
    assert "+3" in r["explanation"]


@pytest.mark.no_toolkit
def test_equivalent_forms():
    eq = sc.equivalent
    assert eq("IMAD.MOV.U32 %, RZ, RZ, 0x7") == eq("MOV %, 0x7")
    assert eq("HFMA2.MMA %, -RZ, RZ, 0, 4.17232513427734375e-07") == eq("MOV %, 0x7")
    assert eq("IADD3 %, %, -0x10, RZ") == eq("VIADD %, %, 0xfffffff0")
    assert eq("IMAD.SHL.U32 %, %, 0x8, RZ") == eq("SHF.L.U32 %, %, 0x3, RZ")
    assert eq("LOP3.LUT %, %, 0x1, RZ, 0xc0, !PT") == "LOP3.LUT %, %, 0x1, RZ, 0xc0, !PT"
    pf = sc.polarity_free
    assert pf("@!% FSETP.LT.AND %, PT, %, %, PT") == pf("@% FSETP.GEU.AND %, PT, %, %, PT")
