#!/usr/bin/env python3
"""Generates the Triton part of taskcache's real-world corpus.

Compiles the kernels of kernels.py with `triton.compile` for an explicit
`GPUTarget("cuda", 90, 32)` (no GPU needed; Triton targets `sm_90a` for
capability 9.0) and PTX ISA 9.0, the newest that this toolkit's ptxas (CUDA
13.0) reads; Triton would otherwise pick the version of the ptxas it
bundles.

Triton emits one module per kernel, named after the Python function, so
the variants of one function share a name. For multi-kernel modules the
kernels are merged the way a loader that puts them in one image would
have to: each kernel is renamed to a unique name (its function name and a
variant suffix; the name occurs only in `.entry NAME` and its parameter
names), the module header is written once, and module-level declarations
that are byte-identical in every kernel (Triton's `.extern .shared
global_smem`) are written once. Any other module-level name that two
kernels define differently stops the merge. The bodies are untouched.

Line information is off (TRITON_DISABLE_LINE_INFO=1) in the merged modules,
since DWARF sections make taskcache compile a module whole; one module with
line information and a few single-kernel modules are kept exactly as
Triton writes them.

Usage: gen_triton.py OUTDIR
"""

import os
import re
import sys

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels as K  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
DT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


def variants():
    """(unique name, function, signature, constexprs, num_warps, num_stages)."""
    out = []

    def add(name, fn, sig, const, warps=4, stages=3):
        full = dict(sig)
        for k in const:
            full[k] = "constexpr"
        out.append((name, fn, full, const, warps, stages))

    for dt in ("f32", "f16", "bf16"):
        p = "*" + DT[dt]
        for op, opn in enumerate(("add", "mul", "max", "axpby")):
            for blk in (256, 1024):
                add(f"binary_{opn}_{dt}_b{blk}", K.binary,
                    {"x_ptr": p, "y_ptr": p, "o_ptr": p, "n": "i32"}, {"OP": op, "BLOCK": blk},
                    warps=4 if blk == 256 else 8)
        for act, an in enumerate(("gelu_tanh", "silu", "gelu_erf", "softplus", "mish")):
            add(f"act_{an}_{dt}", K.activation, {"x_ptr": p, "o_ptr": p, "n": "i32"},
                {"ACT": act, "BLOCK": 1024})
        for blk in (128, 512, 2048):
            add(f"softmax_{dt}_b{blk}", K.softmax, {"x_ptr": p, "o_ptr": p, "stride": "i32", "ncols": "i32"},
                {"BLOCK": blk}, warps=4 if blk < 2048 else 8)
            add(f"rmsnorm_{dt}_b{blk}", K.rmsnorm,
                {"x_ptr": p, "w_ptr": p, "y_ptr": p, "stride": "i32", "n": "i32", "eps": "fp32"},
                {"BLOCK": blk})
            add(f"layernorm_bwd_dx_{dt}_b{blk}", K.layernorm_bwd_dx,
                {"dy_ptr": p, "x_ptr": p, "w_ptr": p, "mean_ptr": "*fp32", "rstd_ptr": "*fp32",
                 "dx_ptr": p, "stride": "i32", "n": "i32"}, {"BLOCK": blk})
        for blk in (256, 1024):
            add(f"layernorm_fwd_{dt}_b{blk}", K.layernorm_fwd,
                {"x_ptr": p, "w_ptr": p, "b_ptr": p, "y_ptr": p, "mean_ptr": "*fp32", "rstd_ptr": "*fp32",
                 "stride": "i32", "n": "i32", "eps": "fp32"}, {"BLOCK": blk})
        for kind, kn in enumerate(("sum", "max", "argmax")):
            add(f"reduce_{kn}_{dt}", K.reduce_rows,
                {"x_ptr": p, "o_ptr": "*fp32", "i_ptr": "*i32", "stride": "i32", "n": "i32"},
                {"KIND": kind, "BLOCK": 1024})
        add(f"transpose_{dt}", K.transpose, {"x_ptr": p, "o_ptr": p, "M": "i32", "N": "i32"},
            {"BM": 64, "BN": 64})
        add(f"dropout_{dt}", K.dropout, {"x_ptr": p, "o_ptr": p, "n": "i32", "p": "fp32", "seed": "i32"},
            {"BLOCK": 1024})
    for dt in ("f16", "bf16", "f32"):
        p = "*" + DT[dt]
        shapes = [(128, 128, 64, 8, 3), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                  (64, 64, 32, 4, 5), (128, 256, 64, 8, 3)]
        if dt == "f32":
            shapes = [(64, 64, 32, 4, 3), (128, 64, 32, 8, 3)]
        for bm, bn, bk, w, s in shapes:
            for act in (0, 1):
                add(f"matmul_{dt}_{bm}x{bn}x{bk}_a{act}", K.matmul,
                    {"a_ptr": p, "b_ptr": p, "c_ptr": p, "M": "i32", "N": "i32", "K": "i32",
                     "sam": "i32", "sak": "i32", "sbk": "i32", "sbn": "i32", "scm": "i32", "scn": "i32"},
                    {"BM": bm, "BN": bn, "BK": bk, "GROUP": 8, "ACT": act}, warps=w, stages=s)
    for dt in ("f16", "bf16"):
        p = "*" + DT[dt]
        for bm, bn, d in ((64, 64, 64), (128, 64, 64), (64, 32, 128)):
            for causal in (0, 1):
                add(f"attention_{dt}_{bm}x{bn}_d{d}_c{causal}", K.attention_fwd,
                    {"q_ptr": p, "k_ptr": p, "v_ptr": p, "o_ptr": p, "seq": "i32", "scale": "fp32",
                     "stride": "i32"}, {"BM": bm, "BN": bn, "D": d, "CAUSAL": causal}, warps=4, stages=2)
    for ty in ("i32", "fp32"):
        for kind, kn in enumerate(("cumsum", "cumprod", "sort")):
            for blk in (256, 1024):
                add(f"scan_{kn}_{ty}_b{blk}", K.scan, {"x_ptr": "*" + ty, "o_ptr": "*" + ty, "n": "i32"},
                    {"KIND": kind, "BLOCK": blk})
    for blk in (256, 1024):
        add(f"randn_b{blk}", K.randn_fill, {"o_ptr": "*fp32", "n": "i32", "seed": "i32"}, {"BLOCK": blk})
        add(f"quantize_int8_b{blk}", K.quantize_int8,
            {"x_ptr": "*fp16", "q_ptr": "*i8", "s_ptr": "*fp32", "n": "i32"}, {"BLOCK": blk})
        add(f"dequant_matvec_b{blk}", K.dequant_matvec,
            {"q_ptr": "*i8", "s_ptr": "*fp32", "x_ptr": "*fp16", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": blk})
        add(f"histogram_b{blk}", K.histogram, {"x_ptr": "*i32", "o_ptr": "*i32", "n": "i32"},
            {"BINS": 64, "BLOCK": blk})
        for ty in ("fp32", "i32"):
            add(f"scatter_add_{ty}_b{blk}", K.scatter_add,
                {"idx_ptr": "*i32", "v_ptr": "*" + ty, "o_ptr": "*" + ty, "n": "i32"}, {"BLOCK": blk})
    return out


def compile_one(fn, sig, const, warps, stages):
    src = ASTSource(fn=fn, signature=sig, constexprs=const)
    k = triton.compile(src, target=TARGET,
                       options={"num_warps": warps, "num_stages": stages, "ptx_version": 90})
    return k.asm["ptx"]


HEADER = re.compile(r"^\s*\.(version|target|address_size)\b")
# the name a module-level declaration declares: "... .b8 global_smem[];"
DECLARED = re.compile(r"([A-Za-z_$][\w$]*)\s*(?:\[|;|=)")


def entry_name(ptx):
    """The name of the (first) kernel a Triton module defines."""
    return re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)


def split_module(ptx):
    """(header lines, module-level declarations, kernel text). A declaration
    runs to its `;`, over several lines where it spans them (a device
    assert's `.extern .func __assertfail` and its parameters)."""
    lines = ptx.splitlines()
    header, decls, body = [], [], []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if HEADER.match(ln):
            header.append(ln.strip())
        elif re.match(r"^\s*\.(visible|weak)?\s*\.?entry\b", ln) or re.match(r"^\.(visible|weak) \.entry", ln):
            body = lines[i:]
            break
        elif re.match(r"^\s*(\.extern|\.global|\.const|\.shared)\b", ln):
            stmt = [ln.strip()]
            while not stmt[-1].endswith(";") and i + 1 < len(lines):
                i += 1
                stmt.append(lines[i].strip())
            decls.append("\n".join(stmt))
        i += 1
    return header, decls, "\n".join(body)


def rename(ptx, old, new):
    return re.sub(r"(?<![\w$.])" + re.escape(old) + r"(?=(_param_\d+)?\b)", new, ptx)


def merge(named_ptx):
    """One module from [(name, ptx)]: see the module docstring."""
    header, decls, bodies = None, [], []
    names = {}
    for name, ptx in named_ptx:
        h, d, body = split_module(ptx)
        if header is None:
            header = h
        elif h != header:
            raise SystemExit(f"{name}: header {h} differs from {header}")
        for line in d:
            sym = DECLARED.findall(line)
            key = sym[0] if sym else line
            if key in names and names[key] != line:
                raise SystemExit(f"{name}: module-level {key} differs between kernels")
            if key not in names:
                names[key] = line
                decls.append(line)
        bodies.append(body)
    out = ["//", "// Triton kernels merged into one module (see gen_triton.py)", "//", ""]
    out += header + [""] + decls + [""] + bodies
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    compiled = []
    for name, fn, sig, const, warps, stages in variants():
        ptx = compile_one(fn, sig, const, warps, stages)
        compiled.append((name, rename(ptx, entry_name(ptx), name), ptx))
        print(f"compiled {name}", flush=True)
    groups = {}
    for name, ptx, _ in compiled:
        fam = "matmul_attention" if name.startswith(("matmul", "attention")) else \
              "norms_reductions" if name.startswith(("softmax", "rmsnorm", "layernorm", "reduce")) else \
              "elementwise_misc"
        groups.setdefault(fam, []).append((name, ptx))
    for fam, items in groups.items():
        with open(os.path.join(outdir, f"{fam}.ptx"), "w") as f:
            f.write(merge(items))
        print(f"{fam}.ptx: {len(items)} kernels")
    # exactly as Triton writes them: single kernels, and one with line info
    for name, _, ptx in compiled[::45]:
        with open(os.path.join(outdir, f"single_{name}.ptx"), "w") as f:
            f.write(ptx)
    os.environ["TRITON_DISABLE_LINE_INFO"] = "0"
    name, fn, sig, const, warps, stages = [v for v in variants() if v[0].startswith("layernorm_fwd")][0]
    with open(os.path.join(outdir, f"single_{name}.lineinfo.ptx"), "w") as f:
        f.write(compile_one(fn, sig, const, warps, stages))


if __name__ == "__main__":
    main()
