#!/usr/bin/env python3
"""loop_stalls.py: one kernel's loops in several images, with the stall
cycles the compiler scheduled into them.

Two images of a kernel can hold the same instructions and still run at
different speeds when the compiler orders them differently. Every SASS
instruction of Volta and later is 128 bits wide and carries its
scheduling in its top bits; bits 105-108 are the stall count, the cycles
the warp waits before it issues the next instruction. Summed over a loop
body, they show how tightly the loop was scheduled, without a GPU.

    python3 tests/gpu/loop_stalls.py --kernel NAME [--nvdisasm PATH]
        LABEL=IMAGE.cubin [LABEL=IMAGE.cubin ...]

For each image: the kernel's instruction count and stall sum, then each
loop (a backward branch to a label in the kernel's own code) with its
first and last address, its instructions and their stall sum. nvdisasm
finds the loops (the stall counts come from the image's bytes); it is
looked for in --nvdisasm, $NVDISASM, $CUDA_HOME/bin, /usr/local/cuda/bin,
then PATH.

docs/benchmarks.md (2026-12-04) used it on kernel_174 of the benchmark
module: the same 188-189 instructions in its main loop in every build, 365
stall cycles in the whole-module image against 457-463 in every linkable
one."""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_compare import Elf, ToolError, find_tool, run_cmd  # noqa: E402

INSTR_BYTES = 16
STALL_SHIFT = 105  # bits 105-108 of the instruction word


def stall_counts(text):
    """The stall count of every instruction in a section's bytes."""
    return [(int.from_bytes(text[i:i + INSTR_BYTES], "little") >> STALL_SHIFT) & 0xF
            for i in range(0, len(text) - INSTR_BYTES + 1, INSTR_BYTES)]


INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*)$")
LABEL = re.compile(r"^(\.L_x_\d+):")
BRANCH = re.compile(r"\bBRA\b.*`\((\.L_x_\d+)\)")


def kernel_listing(listing, kernel):
    """The lines nvdisasm prints for the kernel's own section."""
    head = f"//--------------------- .text.{kernel} "
    start = listing.find(head)
    if start < 0:
        return None
    end = listing.find("//---------------------", start + len(head))
    return listing[start:end if end >= 0 else None].splitlines()


def loops(lines):
    """(first address, last address) of each loop: a branch back to a label
    before it in the same listing (not the branch to itself that ends a
    kernel)."""
    labels, out, pending = {}, [], []
    for line in lines:
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = INSTR.match(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        for name in pending:
            labels[name] = addr
        pending = []
        b = BRANCH.search(m.group(2))
        if b and b.group(1) in labels and labels[b.group(1)] < addr:
            out.append((labels[b.group(1)], addr))
    return out


def kernel_stalls(path, kernel):
    """The stall count of every instruction of the kernel in the image."""
    elf = Elf(path)
    sec = elf.by_name.get(f".text.{kernel}")
    if sec is None:
        raise ToolError(f"{path}: no section .text.{kernel}")
    return stall_counts(elf.section_bytes(sec["index"], 0, sec["size"]))


def report(label, path, kernel, nvdisasm):
    """Lines describing the kernel's loops in one image."""
    stalls = kernel_stalls(path, kernel)
    p, _ = run_cmd([nvdisasm, "-c", path], "nvdisasm")
    lines = kernel_listing(p.stdout, kernel)
    if lines is None:
        raise ToolError(f"{path}: nvdisasm shows no .text.{kernel}")
    out = [f"{label}: {len(stalls)} instructions, {sum(stalls)} stall cycles ({path})"]
    for first, last in loops(lines):
        body = stalls[first // INSTR_BYTES: last // INSTR_BYTES + 1]
        out.append(f"  loop {first:#06x}-{last:#06x}: {len(body)} instructions, "
                   f"{sum(body)} stall cycles")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--nvdisasm")
    ap.add_argument("images", nargs="+", metavar="LABEL=IMAGE")
    a = ap.parse_args()
    try:
        nvd = find_tool("nvdisasm", a.nvdisasm, "NVDISASM")
        if not nvd:
            raise ToolError("nvdisasm not found (use --nvdisasm, $NVDISASM or CUDA_HOME)")
        for spec in a.images:
            label, _, path = spec.rpartition("=")
            print("\n".join(report(label or os.path.basename(path), path, a.kernel, nvd)))
    except (ToolError, OSError) as e:
        print(f"loop_stalls: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
