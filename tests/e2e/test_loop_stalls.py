"""tests/gpu/loop_stalls.py: the stall cycles scheduled into a kernel's loops.

The decoding and the loop finding are checked on made-up bytes and nvdisasm
text; the stall counts of a real ptxas image without a disassembler. The
end-to-end run needs nvdisasm and is skipped without one (CI has none)."""

import importlib.util
import sys

import pytest

from tchelp import ARCH, PTXAS, ROOT, run

TOOL = ROOT / "tests" / "gpu" / "loop_stalls.py"
spec = importlib.util.spec_from_file_location("loop_stalls", TOOL)
ls = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(TOOL.parent))
spec.loader.exec_module(ls)

# A kernel with one loop of a few instructions (the sum of 0..n-1).
LOOP_PTX = f"""
.version 8.0
.target {ARCH}
.address_size 64
.visible .entry sum_to(.param .u64 out, .param .u32 n)
{{
    .reg .u32 %r<4>;
    .reg .u64 %rd<2>;
    .reg .pred %p;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [n];
    mov.u32 %r1, 0;
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, %r1;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p, %r1, %r0;
    @%p bra LOOP;
    st.global.u32 [%rd0], %r2;
    ret;
}}
"""


def instr(stall, other=0):
    """16 bytes of an instruction whose stall count is `stall`; `other`
    sets the bits around it (104 and 109), which must not leak in."""
    word = (stall & 0xF) << 105
    if other:
        word |= 1 << 104 | 1 << 109 | 0xDEADBEEF
    return word.to_bytes(16, "little")


def test_stall_counts_read_bits_105_to_108():
    text = instr(1) + instr(4, other=1) + instr(15, other=1) + instr(0, other=1)
    assert ls.stall_counts(text) == [1, 4, 15, 0]
    assert ls.stall_counts(text + b"\0" * 8) == [1, 4, 15, 0]  # a partial word is not one


LISTING = """\
//--------------------- .text.other --------------------------
        /*0000*/                   BRA `(.L_x_9) ;
//--------------------- .text.k --------------------------
k:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0020*/                   ISETP.GE.AND P0, PT, R2, 0x10, PT ;
        /*0030*/               @!P0 BRA `(.L_x_1) ;
        /*0040*/                   BRA `(.L_x_2) ;
.L_x_2:
        /*0050*/                   EXIT ;
.L_x_3:
        /*0060*/                   BRA `(.L_x_3);
"""


def test_loops_are_backward_branches_of_the_kernel_only():
    lines = ls.kernel_listing(LISTING, "k")
    assert lines and "text.other" not in "\n".join(lines)
    # the forward branch and the branch to itself that ends a kernel are not loops
    assert ls.loops(lines) == [(0x10, 0x30)]
    assert ls.kernel_listing(LISTING, "missing") is None


def loop_image(tmp_path):
    """LOOP_PTX compiled by ptxas: the image's path."""
    ptx, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    ptx.write_text(LOOP_PTX)
    run([PTXAS, f"-arch={ARCH}", ptx, "-o", cubin])
    return cubin


def test_a_real_image_has_stall_counts(tmp_path):
    if not PTXAS:
        pytest.skip("no ptxas")
    cubin = loop_image(tmp_path)
    stalls = ls.kernel_stalls(str(cubin), "sum_to")
    sec = ls.Elf(str(cubin)).by_name[".text.sum_to"]
    assert len(stalls) == sec["size"] // 16
    # every instruction that issues waits at least a cycle; padding NOPs may not
    assert sum(1 for s in stalls if s) >= len(stalls) // 2


def test_loop_stalls_end_to_end(tmp_path):
    nvd = ls.find_tool("nvdisasm", None, "NVDISASM")
    if not nvd or not PTXAS:
        pytest.skip("nvdisasm not found ($NVDISASM, $CUDA_HOME/bin, /usr/local/cuda/bin, "
                    "PATH): the loops cannot be found here")
    cubin = loop_image(tmp_path)
    p = run([sys.executable, TOOL, "--kernel", "sum_to", "--nvdisasm", nvd, f"one={cubin}"])
    lines = p.stdout.splitlines()
    assert lines[0].startswith("one: ")
    loop_lines = [line for line in lines if line.startswith("  loop ")]
    assert loop_lines, p.stdout
    # the loop's stall sum is the sum over its addresses in the image
    stalls = ls.kernel_stalls(str(cubin), "sum_to")
    for line in loop_lines:
        first, last = (int(x, 16) for x in line.split()[1].rstrip(":").split("-"))
        n = int(line.split()[2])
        cycles = int(line.split()[4])
        assert n == (last - first) // 16 + 1
        assert cycles == sum(stalls[first // 16: last // 16 + 1])
    p = run([sys.executable, TOOL, "--kernel", "nope", "--nvdisasm", nvd, str(cubin)],
            check=False)
    assert p.returncode == 2 and "no section .text.nope" in p.stderr
