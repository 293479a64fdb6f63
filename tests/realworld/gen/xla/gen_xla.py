#!/usr/bin/env python3
"""Generates the XLA part of taskcache's real-world corpus.

Runs a few programs of the kinds people hand to `jax.jit` (a training step
of a small MLP with Adam, a transformer block's forward and backward pass, a
particle simulation in a `fori_loop`, and a mix of sorts, scans, scatters
and random numbers) and keeps PTX that XLA hands ptxas for them in OUTDIR:
the largest module of each kind of kernel in KEEP, named after the kind.
The programs (PROGRAMS) also serve tests/gpu/xla_ptxas_check.py. XLA
compiles its PTX itself, in the
process, and dumps none of it (`--xla_dump_to` writes HLO only here), so
this turns XLA's in-process compiler and linker off and puts a `ptxas` in
the first folder XLA searches, `sys.prefix/bin`: a script that copies each
PTX input to WORKDIR before running the real ptxas ($CUDA_HOME, default
/usr/local/cuda). It refuses to run where a ptxas is there already and
removes its own when done. It needs a GPU: XLA compiles for the device it
finds.

Matrix products and convolutions go to cuBLAS and cuDNN and leave no PTX;
what is left is XLA's fusions (elementwise, reductions, transposes,
scatters, sorts), which is what a JIT of this kind hands a PTX compiler.

Usage: gen_xla.py WORKDIR OUTDIR   (OUTDIR also gets VERSION: jax's and jaxlib's)
"""

import atexit
import glob
import os
import re
import sys

import jax
import jax.numpy as jnp
from jax import lax


def mlp_adam():
    """One training step of a 3-layer MLP: softmax cross-entropy, Adam."""
    key = jax.random.PRNGKey(0)
    sizes = [(64, 256), (256, 256), (256, 10)]
    params = []
    for i, (a, b) in enumerate(sizes):
        k1, key = jax.random.split(key)
        params.append((jax.random.normal(k1, (a, b)) * 0.05, jnp.zeros((b,))))

    def loss(p, x, y):
        h = x
        for i, (w, b) in enumerate(p):
            h = h @ w + b
            if i < len(p) - 1:
                h = jax.nn.gelu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def step(p, m, v, t, x, y):
        g = jax.grad(loss)(p, x, y)
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        mh = jax.tree_util.tree_map(lambda m: m / (1 - b1 ** t), m)
        vh = jax.tree_util.tree_map(lambda v: v / (1 - b2 ** t), v)
        p = jax.tree_util.tree_map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), p, mh, vh)
        return p, m, v

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    x = jax.random.normal(key, (128, 64))
    y = jax.random.randint(key, (128,), 0, 10)
    return step(params, zeros, zeros, 1.0, x, y)


def transformer_block():
    """Gradient of a pre-norm transformer block (causal attention, GELU MLP)."""
    B, T, D, H = 4, 64, 128, 4
    key = jax.random.PRNGKey(1)
    ks = jax.random.split(key, 6)
    p = {"wqkv": jax.random.normal(ks[0], (D, 3 * D)) * 0.02,
         "wo": jax.random.normal(ks[1], (D, D)) * 0.02,
         "w1": jax.random.normal(ks[2], (D, 4 * D)) * 0.02,
         "w2": jax.random.normal(ks[3], (4 * D, D)) * 0.02,
         "g1": jnp.ones((D,)), "b1": jnp.zeros((D,)), "g2": jnp.ones((D,)), "b2": jnp.zeros((D,))}

    def layernorm(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * g + b

    def block(p, x):
        h = layernorm(x, p["g1"], p["b1"])
        q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)
        q, k, v = (t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for t in (q, k, v))
        s = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(D // H)
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
        a = jax.nn.softmax(s, axis=-1) @ v
        x = x + a.transpose(0, 2, 1, 3).reshape(B, T, D) @ p["wo"]
        h = layernorm(x, p["g2"], p["b2"])
        return x + jax.nn.gelu(h @ p["w1"], approximate=False) @ p["w2"]

    x = jax.random.normal(ks[4], (B, T, D))
    return jax.jit(jax.grad(lambda p, x: jnp.mean(block(p, x) ** 2)))(p, x)


def particles():
    """Particles with gravity, springs to their neighbours, walls and drag."""
    n = 4096

    def step(i, s):
        pos, vel = s
        left, right = jnp.roll(pos, 1, 0), jnp.roll(pos, -1, 0)
        d1, d2 = left - pos, right - pos
        l1 = jnp.linalg.norm(d1, axis=1, keepdims=True) + 1e-6
        l2 = jnp.linalg.norm(d2, axis=1, keepdims=True) + 1e-6
        f = 50.0 * ((l1 - 0.01) * d1 / l1 + (l2 - 0.01) * d2 / l2)
        f = f + jnp.array([0.0, -9.8]) + 0.1 * jnp.stack(
            [jnp.sin(pos[:, 1] * 7.0 + i), jnp.cos(pos[:, 0] * 5.0)], 1)
        vel = (vel + 1e-3 * f) * jnp.exp(-1e-3 * jnp.linalg.norm(vel, axis=1, keepdims=True))
        pos = pos + 1e-3 * vel
        hit = (pos < 0.0) | (pos > 1.0)
        vel = jnp.where(hit, -0.8 * vel, vel)
        return jnp.clip(pos, 0.0, 1.0), vel

    pos = jax.random.uniform(jax.random.PRNGKey(2), (n, 2))
    return jax.jit(lambda p, v: lax.fori_loop(0, 16, step, (p, v)))(pos, jnp.zeros_like(pos))


def sorts_scans_scatters():
    """Sorting, top-k, scans, segment sums, gathers and random numbers."""
    key = jax.random.PRNGKey(3)

    @jax.jit
    def f(key):
        k1, k2, k3 = jax.random.split(key, 3)
        x = jax.random.normal(k1, (8192,))
        seg = jax.random.randint(k2, (8192,), 0, 97)
        order = jnp.argsort(x)
        top, idx = lax.top_k(x, 16)
        sums = jax.ops.segment_sum(x, seg, num_segments=97)
        counts = jnp.bincount(seg, length=97)
        cs = jnp.cumsum(x) + lax.cummax(x)
        g = jnp.take(x, order[::-1])
        u = jax.random.gamma(k3, 2.5, (1024,))
        sp = jax.scipy.special
        return (jnp.sort(x), top, idx, sums / jnp.maximum(counts, 1), cs, g,
                sp.erf(x) + sp.gammaln(jnp.abs(x) + 1.0) + jnp.log1p(jnp.abs(x)), u)

    return f(key)


PROGRAMS = [mlp_adam, transformer_block, particles, sorts_scans_scatters]

# XLA compiles every kernel as a module of its own (and its autotuner many
# variants of some), so the programs above hand ptxas some 450 modules,
# about 350 of them different. The corpus keeps the largest module of each
# of these kinds of kernel (the kernel's name less its numbers), and a
# module with no kernel at all, which XLA also compiles.
KEEP = ["sort", "gemm_fusion_dot", "gemm_fusion_dot_general", "fusion",
        "loop_add_reduce_window_select_fusion", "loop_add_fusion", "input_transpose_fusion",
        "input_scatter_fusion", "input_reduce_fusion", "loop_reduce_fusion", "triton_softmax",
        "input_concatenate_fusion"]


def install_ptxas(work, cuda):
    """sys.prefix/bin/ptxas, the first folder XLA searches: a script that
    keeps each PTX input in work, then runs cuda/bin/ptxas. Removed at exit."""
    shim = os.path.join(sys.prefix, "bin", "ptxas")
    if os.path.lexists(shim):
        sys.exit(f"gen_xla: {shim} exists; run this where XLA finds the toolkit's ptxas")
    os.makedirs(work, exist_ok=True)
    with open(shim, "w") as f:
        f.write("#!/bin/sh\n"
                "for a in \"$@\"; do\n"
                "  if [ -f \"$a\" ] && grep -q '^[[:space:]]*\\.version' \"$a\"; then\n"
                f"    cp \"$a\" \"{work}/$(date +%s%N).ptx\"\n"
                "  fi\n"
                "done\n"
                f"exec \"{cuda}/bin/ptxas\" \"$@\"\n")
    os.chmod(shim, 0o755)
    atexit.register(os.remove, shim)


def use_ptxas_processes():
    """XLA runs ptxas (and nvlink) instead of its in-process compiler and
    linker. XLA reads XLA_FLAGS when its backend starts: before the first
    computation, not at `import jax`."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_gpu_enable_libnvptxcompiler=false"
                               " --xla_gpu_enable_libnvjitlink=false").strip()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax.config.update("jax_enable_compilation_cache", False)


def kind(text):
    m = re.search(rb"\.entry\s+([\w$]+)", text)
    return re.sub(r"[_\d]+$", "", m.group(1).decode()) if m else "no_kernel"


def main():
    work, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    install_ptxas(work, os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    use_ptxas_processes()
    os.makedirs(out, exist_ok=True)
    print("jax", jax.__version__, "on", jax.devices()[0].device_kind)
    largest = {}
    for prog in PROGRAMS:
        before = set(glob.glob(os.path.join(work, "*.ptx")))
        jax.block_until_ready(prog())
        made = sorted(set(glob.glob(os.path.join(work, "*.ptx"))) - before)
        print(f"{prog.__name__}: {len(made)} modules handed to ptxas")
        for path in made:
            text = open(path, "rb").read()
            k = kind(text)
            if (k in KEEP or k == "no_kernel") and len(text) > len(largest.get(k, b"")):
                largest[k] = text
    for k, text in sorted(largest.items()):
        with open(os.path.join(out, f"{k}.ptx"), "wb") as f:
            f.write(text)
        kernels = len(re.findall(rb"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s", text, re.M))
        print(f"{k}.ptx: {kernels} kernel(s), {len(text)} bytes")
    import jaxlib  # noqa: E402  (its version, for VERSION)
    with open(os.path.join(out, "VERSION"), "w") as f:
        f.write(f"jax {jax.__version__} jaxlib {jaxlib.__version__} "
                f"({jax.devices()[0].device_kind})\n")
    missing = [k for k in KEEP if k not in largest]
    if missing:
        print("gen_xla: no module with kernels of kind " + ", ".join(missing))


if __name__ == "__main__":
    main()
