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
import re
import shutil
import sys
import tempfile

STEPS = ("gpt_train_step", "llama_block_bf16")
if __name__ == "__main__" and sys.argv[1:2] != ["--merge"]:
    WORK = tempfile.mkdtemp(prefix="gen-inductor-")
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    os.environ["TRITON_CACHE_DIR"] = os.path.join(WORK, "triton")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(WORK, "inductor")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if os.path.exists(os.path.join(cuda, "bin", "ptxas")):
        os.environ.setdefault("TRITON_PTXAS_PATH", os.path.join(cuda, "bin", "ptxas"))
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
else:  # merging only: the model classes below are defined but never used
    nn = type("nn", (), {"Module": object})

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "triton"))
from gen_triton import merge, rename, split_module  # noqa: E402

DEV = "cuda"
DECLARED = re.compile(r"([A-Za-z_$][\w$]*)\s*(?:\[|;|=)")


class GptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab=512, d=128, heads=4, layers=2, ctx=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(GptBlock(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class LlamaBlock(nn.Module):
    def __init__(self, d=128, heads=4, experts=4, topk=2):
        super().__init__()
        self.w_norm1 = nn.Parameter(torch.ones(d))
        self.w_norm2 = nn.Parameter(torch.ones(d))
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.router = nn.Linear(d, experts, bias=False)
        self.gate = nn.Parameter(torch.randn(experts, d, 2 * d) * 0.02)
        self.up = nn.Parameter(torch.randn(experts, d, 2 * d) * 0.02)
        self.down = nn.Parameter(torch.randn(experts, 2 * d, d) * 0.02)
        self.heads, self.topk = heads, topk

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w

    def rope(self, x):
        t, hd = x.shape[-2], x.shape[-1]
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=x.device).float() / hd))
        ang = torch.outer(torch.arange(t, device=x.device).float(), inv)
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.rms(x, self.w_norm1)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        h = self.rms(x, self.w_norm2).view(-1, d)
        weights, chosen = torch.topk(F.softmax(self.router(h).float(), dim=-1), self.topk, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(h.dtype)
        out = torch.zeros_like(h)
        for e in range(self.gate.shape[0]):
            w_e = (weights * (chosen == e)).sum(-1, keepdim=True)
            act = F.silu(h @ self.gate[e]) * (h @ self.up[e])
            out = out.index_add(0, torch.arange(h.shape[0], device=h.device), w_e * (act @ self.down[e]))
        x = x + out.view(b, t, d)
        return torch.logsumexp(x.float(), dim=-1).mean() + torch.cumsum(x.float(), dim=1)[:, -1].pow(2).mean()


def keep_new_kernels(seen, rawdir):
    """Copies the Triton modules written since SEEN (a set of paths) to RAWDIR."""
    os.makedirs(rawdir, exist_ok=True)
    for p in sorted(glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "**", "*.ptx"), recursive=True)):
        if p not in seen:
            seen.add(p)
            ptx = open(p).read()
            name = re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)
            with open(os.path.join(rawdir, name + ".ptx"), "w") as f:
                f.write(ptx)


def module(rawdir, used):
    """One merged module of RAWDIR's kernels; kernel names an earlier module
    used, and module-level variables an earlier kernel defined differently,
    renamed (see the docstring)."""
    items, defined = [], {}
    for k, path in enumerate(sorted(glob.glob(os.path.join(rawdir, "*.ptx")))):
        ptx = open(path).read()
        name = re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)
        new, n = name, 1
        while new in used:
            new, n = f"{name}_g{n}", n + 1
        used.add(new)
        if new != name:
            ptx = rename(ptx, name, new)
        for line in split_module(ptx)[1]:
            sym = DECLARED.findall(line)
            if not sym:
                continue
            if defined.setdefault(sym[0], line) != line:
                ptx = re.sub(r"(?<![\w$.])" + re.escape(sym[0]) + r"(?![\w$])", f"{sym[0]}_k{k}", ptx)
                defined[f"{sym[0]}_k{k}"] = line.replace(sym[0], f"{sym[0]}_k{k}", 1)
        items.append((new, ptx))
    return merge(items), len(items)


def merge_all(outdir):
    used = set()
    for step in STEPS:
        text, n = module(os.path.join(outdir, "raw", step), used)
        with open(os.path.join(outdir, step + ".ptx"), "w") as f:
            f.write(text)
        print(f"{step}.ptx: {n} kernels")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--merge":
        return merge_all(sys.argv[2])
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
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

    import triton
    with open(os.path.join(outdir, "VERSION"), "w") as f:
        f.write(f"torch {torch.__version__}\ntriton {triton.__version__}\n"
                f"device {torch.cuda.get_device_name()}\n")
    shutil.rmtree(WORK, ignore_errors=True)
    merge_all(outdir)


if __name__ == "__main__":
    main()
