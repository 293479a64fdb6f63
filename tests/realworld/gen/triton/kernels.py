"""Triton kernels for taskcache's real-world corpus (written for it): the
kinds of kernels a model's code and Triton's tutorials hold (elementwise
activations, softmax, layer and RMS norms, reductions, matrix products,
attention, scans, random numbers, quantization), each compiled below for
several types and block sizes."""

import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def binary(x_ptr, y_ptr, o_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    if OP == 0:
        r = x + y
    elif OP == 1:
        r = x * y
    elif OP == 2:
        r = tl.maximum(x, y)
    else:
        r = x * 0.5 + y * 0.25
    tl.store(o_ptr + offs, r, mask=m)


@triton.jit
def activation(x_ptr, o_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    if ACT == 0:    # gelu, tanh form
        r = 0.5 * x * (1.0 + libdevice.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    elif ACT == 1:  # silu
        r = x * tl.sigmoid(x)
    elif ACT == 2:  # gelu, erf form
        r = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif ACT == 3:  # softplus
        r = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    else:           # mish
        r = x * libdevice.tanh(tl.log(1.0 + tl.exp(x)))
    tl.store(o_ptr + offs, r.to(o_ptr.dtype.element_ty), mask=m)


@triton.jit
def softmax(x_ptr, o_ptr, stride, ncols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < ncols
    x = tl.load(x_ptr + row * stride + cols, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(o_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(o_ptr.dtype.element_ty), mask=m)


@triton.jit
def layernorm_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        c = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + c, mask=c < n, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n
    var = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        c = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + c, mask=c < n, other=0.0).to(tl.float32)
        d = tl.where(c < n, x - mean, 0.0)
        var += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(var, axis=0) / n + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, n, BLOCK):
        c = off + tl.arange(0, BLOCK)
        mk = c < n
        x = tl.load(x_ptr + row * stride + c, mask=mk, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=mk)
        b = tl.load(b_ptr + c, mask=mk)
        tl.store(y_ptr + row * stride + c, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mk)


@triton.jit
def layernorm_bwd_dx(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mk = c < n
    x = tl.load(x_ptr + row * stride + c, mask=mk, other=0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride + c, mask=mk, other=0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mk).to(tl.float32)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mk, (x - mean) * rstd, 0.0)
    wdy = tl.where(mk, w * dy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / n
    c2 = tl.sum(wdy, axis=0) / n
    tl.store(dx_ptr + row * stride + c, ((wdy - (xhat * c1 + c2)) * rstd).to(dx_ptr.dtype.element_ty), mask=mk)


@triton.jit
def rmsnorm(x_ptr, w_ptr, y_ptr, stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mk = c < n
    x = tl.load(x_ptr + row * stride + c, mask=mk, other=0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
    w = tl.load(w_ptr + c, mask=mk).to(tl.float32)
    tl.store(y_ptr + row * stride + c, (x * r * w).to(y_ptr.dtype.element_ty), mask=mk)


@triton.jit
def reduce_rows(x_ptr, o_ptr, i_ptr, stride, n, KIND: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mk = c < n
    if KIND == 0:
        x = tl.load(x_ptr + row * stride + c, mask=mk, other=0).to(tl.float32)
        tl.store(o_ptr + row, tl.sum(x, axis=0))
    elif KIND == 1:
        x = tl.load(x_ptr + row * stride + c, mask=mk, other=-float("inf")).to(tl.float32)
        tl.store(o_ptr + row, tl.max(x, axis=0))
    else:
        x = tl.load(x_ptr + row * stride + c, mask=mk, other=-float("inf")).to(tl.float32)
        v, i = tl.max(x, axis=0, return_indices=True)
        tl.store(o_ptr + row, v)
        tl.store(i_ptr + row, i)


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr, ACT: tl.constexpr):
    pid = tl.program_id(0)
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    width = GROUP * npn
    gid = pid // width
    first = gid * GROUP
    gsize = min(npm - first, GROUP)
    pm = first + (pid % gsize)
    pn = (pid % width) // gsize
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        av = tl.load(a, mask=rk[None, :] < K - k * BK, other=0.0)
        bv = tl.load(b, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(av, bv, acc)
        a += BK * sak
        b += BK * sbk
    if ACT == 1:
        acc = tl.where(acc > 0, acc, 0.01 * acc)
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + cm[:, None] * scm + cn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, stride,
                  BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
    start = tl.program_id(0) * BM
    head = tl.program_id(1)
    base = head * seq * stride
    rm = start + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * stride + rd[None, :], mask=rm[:, None] < seq, other=0.0)
    mi = tl.zeros([BM], dtype=tl.float32) - float("inf")
    li = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    hi = tl.minimum(start + BM, seq) if CAUSAL else seq
    for s in range(0, hi, BN):
        rn = s + tl.arange(0, BN)
        k = tl.load(k_ptr + base + rn[None, :] * stride + rd[:, None], mask=rn[None, :] < seq, other=0.0)
        qk = tl.dot(q, k) * scale
        if CAUSAL:
            qk = tl.where(rm[:, None] >= rn[None, :], qk, -float("inf"))
        mn = tl.maximum(mi, tl.max(qk, 1))
        p = tl.exp(qk - mn[:, None])
        alpha = tl.exp(mi - mn)
        li = li * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptr + base + rn[:, None] * stride + rd[None, :], mask=rn[:, None] < seq, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        mi = mn
    acc = acc / li[:, None]
    tl.store(o_ptr + base + rm[:, None] * stride + rd[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=rm[:, None] < seq)


@triton.jit
def scan(x_ptr, o_ptr, n, KIND: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + c, mask=c < n, other=0)
    if KIND == 0:
        r = tl.cumsum(x, axis=0)
    elif KIND == 1:
        r = tl.cumprod(x, axis=0)
    else:
        r = tl.sort(x, dim=0)
    tl.store(o_ptr + row * n + c, r, mask=c < n)


@triton.jit
def dropout(x_ptr, o_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    keep = tl.rand(seed, offs) > p
    tl.store(o_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=m)


@triton.jit
def randn_fill(o_ptr, n, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.randn(seed, offs), mask=offs < n)


@triton.jit
def quantize_int8(x_ptr, q_ptr, s_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + c, mask=c < n, other=0).to(tl.float32)
    s = tl.max(tl.abs(x), axis=0) / 127.0
    q = libdevice.rint(x / s)
    tl.store(q_ptr + row * n + c, q.to(tl.int8), mask=c < n)
    tl.store(s_ptr + row, s)


@triton.jit
def dequant_matvec(q_ptr, s_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        c = off + tl.arange(0, BLOCK)
        q = tl.load(q_ptr + row * n + c, mask=c < n, other=0).to(tl.float32)
        x = tl.load(x_ptr + c, mask=c < n, other=0).to(tl.float32)
        acc += q * x
    tl.store(y_ptr + row, tl.sum(acc, axis=0) * tl.load(s_ptr + row))


@triton.jit
def transpose(x_ptr, o_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=m)
    tl.store(o_ptr + rn[None, :] * M + rm[:, None], x, mask=m)


@triton.jit
def histogram(x_ptr, o_ptr, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    h = tl.histogram(x, BINS)
    tl.atomic_add(o_ptr + tl.arange(0, BINS), h)


@triton.jit
def scatter_add(idx_ptr, v_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    v = tl.load(v_ptr + offs, mask=m, other=0)
    tl.atomic_add(o_ptr + i, v, mask=m)
