#!/usr/bin/env python3
"""Generates the PyTorch Inductor part of taskcache's real-world corpus.

`torch.compile` (Inductor) turns a model into Triton kernels that nobody
wrote: fused pointwise ops, reductions, persistent reductions, their
backward passes and the optimizer's update. This script compiles two
training steps written for this corpus and keeps the PTX Triton made of
every kernel Inductor generated:

  * a GPT-style block stack (token and position embeddings, LayerNorm,
    attention through scaled_dot_product_attention, GELU MLP, cross
    entropy) in float32, forward and backward, and its AdamW step
    (foreach, compiled too);
  * a Llama-style block in bfloat16 (RMSNorm, rotary embeddings, SwiGLU,
    a top-k router that scatters into experts with index_add, logsumexp
    and cumsum heads), forward and backward.

Inductor compiles for the GPU it finds, so this runs on a GPU machine.
Triton there is pointed at the toolkit's ptxas (TRITON_PTXAS_PATH) so that
it writes the PTX ISA that ptxas reads, and line information is off
(TRITON_DISABLE_LINE_INFO=1; its DWARF makes taskcache compile a module
whole). Triton writes one module per kernel into its cache; the script
keeps them as OUTDIR/raw/STEP/NAME.ptx and merges each step's into one
module as tests/realworld/gen/triton/gen_triton.py merges its own (its
`merge`: one header, shared declarations once, bodies untouched). Two
things differ: a kernel whose name an earlier step used gets a suffix
`_gN`, and a module-level variable that two kernels define differently
(Inductor's device asserts give every kernel its own `assertMessage_0`,
`assertFile_0`, `assertFunc_0` strings) is renamed in the later kernel
(`NAME_kN`), as a loader putting them into one image would have to.

Usage: gen_inductor.py OUTDIR          (GPU: compile, keep, merge)
       gen_inductor.py --merge OUTDIR  (merge OUTDIR/raw again, no GPU)
Writes OUTDIR/gpt_train_step.ptx, OUTDIR/llama_block_bf16.ptx and
OUTDIR/VERSION.
"""

import glob
import os
import shutil
import sys
import tempfile

STEPS = ("gpt_train_step", "llama_block_bf16")
TRITON_GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "triton")
DEV = "cuda"


def gen_triton():
    """tests/realworld/gen/triton/gen_triton.py, whose merge this script
    shares. Imported late: it imports Triton, which reads the environment
    compile_steps sets."""
    if TRITON_GEN not in sys.path:
        sys.path.insert(0, TRITON_GEN)
    import gen_triton as gt
    return gt


def keep_new_kernels(seen, rawdir):
    """Copies the Triton modules written since SEEN (a set of paths) to RAWDIR."""
    os.makedirs(rawdir, exist_ok=True)
    for p in sorted(glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "**", "*.ptx"), recursive=True)):
        if p not in seen:
            seen.add(p)
            ptx = open(p).read()
            with open(os.path.join(rawdir, gen_triton().entry_name(ptx) + ".ptx"), "w") as f:
                f.write(ptx)


def module(rawdir, used):
    """One merged module of RAWDIR's kernels; kernel names an earlier module
    used, and module-level variables an earlier kernel defined differently,
    renamed (see the docstring)."""
    gt = gen_triton()
    items, defined = [], {}
    for k, path in enumerate(sorted(glob.glob(os.path.join(rawdir, "*.ptx")))):
        ptx = open(path).read()
        name = new = gt.entry_name(ptx)
        n = 1
        while new in used:
            new, n = f"{name}_g{n}", n + 1
        used.add(new)
        if new != name:
            ptx = gt.rename(ptx, name, new)
        for line in gt.split_module(ptx)[1]:
            sym = gt.DECLARED.findall(line)
            if sym and defined.setdefault(sym[0], line) != line:
                ptx = gt.rename(ptx, sym[0], f"{sym[0]}_k{k}")
        items.append((new, ptx))
    return gt.merge(items), len(items)


def merge_all(outdir):
    used = set()
    for step in STEPS:
        text, n = module(os.path.join(outdir, "raw", step), used)
        with open(os.path.join(outdir, step + ".ptx"), "w") as f:
            f.write(text)
        print(f"{step}.ptx: {n} kernels")


def compile_steps(outdir):
    """The GPU part: compile both steps, keep their kernels in OUTDIR/raw."""
    work = tempfile.mkdtemp(prefix="gen-inductor-")
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "triton")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if os.path.exists(os.path.join(cuda, "bin", "ptxas")):
        os.environ.setdefault("TRITON_PTXAS_PATH", os.path.join(cuda, "bin", "ptxas"))
    import torch  # after the environment above: Triton and Inductor read it once
    import triton
    from models import Gpt, LlamaBlock

    torch.manual_seed(0)
    seen = set()

    gpt = Gpt().to(DEV)
    opt = torch.optim.AdamW(gpt.parameters(), lr=1e-3, foreach=True)
    idx = torch.randint(0, 512, (8, 64), device=DEV)

    @torch.compile
    def gpt_step(idx, targets):
        loss = gpt(idx, targets)
        loss.backward()
        return loss

    @torch.compile
    def adam_step():
        opt.step()

    for _ in range(2):
        gpt_step(idx, torch.roll(idx, -1, 1))
        adam_step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    keep_new_kernels(seen, os.path.join(outdir, "raw", "gpt_train_step"))

    llama = LlamaBlock().to(DEV, torch.bfloat16)
    x = torch.randn(4, 64, 128, device=DEV, dtype=torch.bfloat16, requires_grad=True)

    @torch.compile
    def llama_step(x):
        loss = llama(x)
        loss.backward()
        return loss

    llama_step(x)
    torch.cuda.synchronize()
    keep_new_kernels(seen, os.path.join(outdir, "raw", "llama_block_bf16"))

    with open(os.path.join(outdir, "VERSION"), "w") as f:
        f.write(f"torch {torch.__version__}\ntriton {triton.__version__}\n"
                f"device {torch.cuda.get_device_name()}\n")
    shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--merge":
        return merge_all(sys.argv[2])
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    compile_steps(sys.argv[1])
    merge_all(sys.argv[1])


if __name__ == "__main__":
    main()
