"""The models gen_inductor.py compiles (written for taskcache's corpus)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


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
