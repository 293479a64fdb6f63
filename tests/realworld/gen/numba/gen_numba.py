#!/usr/bin/env python3
"""Generates the numba-cuda part of taskcache's real-world corpus.

A small particle/rigid-body "physics step" written for numba-cuda: about
thirty device helpers (vector and quaternion math, signed distance functions,
contact and friction impulses, SPH smoothing kernels, hashing) shared by
about two hundred kernels, the shape of a physics engine's step as a Python
JIT sees it. Each kernel is lowered by numba-cuda to NVVM IR; all of them go
to libNVVM as one program (numba's own path: `nvvm.compile_ir` on a list of
modules, device functions linkonce_odr), so the PTX is one module with every
kernel and one copy of each helper. The helpers numba is asked not to inline
(`inline="never"` is numba-level only) also carry LLVM's `noinline`, so they
stay `.func`s that many kernels call, as in a JIT that keeps helpers out of
line to bound compile time.

Also writes a few kernels as numba's `compile_ptx` emits them, one module
each (the exact output of the public API).

No GPU is needed: numba-cuda asks the driver for the compute capability
when a kernel calls a device function; that one query is answered with
(9, 0) here.

Usage: gen_numba.py OUTDIR   (writes physics_step.ptx and single_*.ptx)
"""

import math
import os
import re
import sys

import numpy as np
from numba import cuda, float32, int32
import numba.cuda.dispatcher as _dispatcher
from numba.cuda import compiler
from numba.cuda.cudadrv import nvvm

CC = (9, 0)


class _Device:
    compute_capability = CC


_dispatcher.get_current_device = lambda: _Device()

# ---------------------------------------------------------------- helpers
# Helpers named in OUT_OF_LINE become .func in the PTX.

OUT_OF_LINE = set()


def out_of_line(f):
    OUT_OF_LINE.add(f.__name__)
    return cuda.jit(device=True)(f)


@cuda.jit(device=True)
def dot3(ax, ay, az, bx, by, bz):
    return ax * bx + ay * by + az * bz


@cuda.jit(device=True)
def length3(x, y, z):
    return math.sqrt(x * x + y * y + z * z)


@cuda.jit(device=True)
def clampf(x, lo, hi):
    return min(max(x, lo), hi)


@out_of_line
def safe_inv(x):
    return 1.0 / x if abs(x) > 1e-12 else 0.0


@out_of_line
def smoothstep(e0, e1, x):
    t = clampf((x - e0) / (e1 - e0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@out_of_line
def hash32(x):
    x = (x ^ 61) ^ (x >> 16)
    x = x + (x << 3)
    x = x ^ (x >> 4)
    x = x * 0x27d4eb2d
    x = x ^ (x >> 15)
    return x & 0xffffffff


@out_of_line
def rand01(seed, i):
    return float32(hash32(seed * 9781 + i * 6271) & 0xffffff) / float32(16777216.0)


@out_of_line
def sdf_sphere(px, py, pz, r):
    return length3(px, py, pz) - r


@out_of_line
def sdf_box(px, py, pz, hx, hy, hz):
    qx = abs(px) - hx
    qy = abs(py) - hy
    qz = abs(pz) - hz
    out = length3(max(qx, 0.0), max(qy, 0.0), max(qz, 0.0))
    return out + min(max(qx, max(qy, qz)), 0.0)


@out_of_line
def sdf_capsule(px, py, pz, h, r):
    y = py - clampf(py, -h, h)
    return length3(px, y, pz) - r


@out_of_line
def sdf_torus(px, py, pz, R, r):
    q = math.sqrt(px * px + pz * pz) - R
    return math.sqrt(q * q + py * py) - r


@out_of_line
def contact_impulse(vn, depth, stiffness, damping, dt):
    if depth >= 0.0:
        return 0.0
    return max(-stiffness * depth * dt - damping * vn, 0.0)


@out_of_line
def friction_scale(vt, jn, mu):
    if vt < 1e-9:
        return 0.0
    return max(0.0, 1.0 - mu * jn / vt)


@out_of_line
def poly6(r2, h):
    h2 = h * h
    if r2 >= h2:
        return 0.0
    d = h2 - r2
    return 315.0 / (64.0 * math.pi * h ** 9) * d * d * d


@out_of_line
def spiky_grad(r, h):
    if r >= h or r <= 0.0:
        return 0.0
    d = h - r
    return -45.0 / (math.pi * h ** 6) * d * d


@out_of_line
def visc_lap(r, h):
    if r >= h:
        return 0.0
    return 45.0 / (math.pi * h ** 6) * (h - r)


@out_of_line
def eos_pressure(rho, rho0, k, gamma):
    return k * (math.pow(rho / rho0, gamma) - 1.0)


@out_of_line
def spring_force(dx, dy, dz, rest, k):
    l = length3(dx, dy, dz)
    return k * (l - rest) * safe_inv(l)


@out_of_line
def quat_rot_x(qw, qx, qy, qz, vx, vy, vz):
    tx = 2.0 * (qy * vz - qz * vy)
    ty = 2.0 * (qz * vx - qx * vz)
    tz = 2.0 * (qx * vy - qy * vx)
    return vx + qw * tx + (qy * tz - qz * ty)


@out_of_line
def quat_norm(qw, qx, qy, qz):
    return safe_inv(math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz))


@out_of_line
def wrap_periodic(x, lo, hi):
    w = hi - lo
    return x - w * math.floor((x - lo) / w)


@out_of_line
def drag(v, c1, c2):
    return -(c1 * v + c2 * v * abs(v))


@cuda.jit(device=True)
def cell_of(x, inv_cell, n):
    c = int32(math.floor(x * inv_cell))
    return min(max(c, 0), n - 1)


# ---------------------------------------------------------------- kernels
# Families of kernels; each instance differs in its constants, as the tasks
# a physics engine generates for different bodies, materials and stages.

F = "float32[:]"
SIG3 = f"void({F}, {F}, {F}, int32)"
SIG6 = f"void({F}, {F}, {F}, {F}, {F}, {F}, int32)"

TEMPLATES = {
    "integrate": (SIG6, """
def {name}(px, py, pz, vx, vy, vz, n):
    i = cuda.grid(1)
    if i < n:
        dt = float32({dt})
        vy[i] += float32({g}) * dt
        vx[i] += drag(vx[i], {c1}, {c2}) * dt
        vz[i] += drag(vz[i], {c1}, {c2}) * dt
        px[i] = wrap_periodic(px[i] + vx[i] * dt, -{box}, {box})
        py[i] += vy[i] * dt
        pz[i] = wrap_periodic(pz[i] + vz[i] * dt, -{box}, {box})
"""),
    "collide_sphere": (SIG6, """
def {name}(px, py, pz, vx, vy, vz, n):
    i = cuda.grid(1)
    if i < n:
        d = sdf_sphere(px[i] - {cx}, py[i] - {cy}, pz[i], {r})
        inv = safe_inv(length3(px[i] - {cx}, py[i] - {cy}, pz[i]))
        nx = (px[i] - {cx}) * inv
        ny = (py[i] - {cy}) * inv
        nz = pz[i] * inv
        vn = dot3(vx[i], vy[i], vz[i], nx, ny, nz)
        j = contact_impulse(vn, d, {k}, {damp}, {dt})
        vx[i] += j * nx
        vy[i] += j * ny
        vz[i] += j * nz
        vt = length3(vx[i] - vn * nx, vy[i] - vn * ny, vz[i] - vn * nz)
        s = friction_scale(vt, j, {mu})
        vx[i] *= s
        vz[i] *= s
"""),
    "collide_box": (SIG6, """
def {name}(px, py, pz, vx, vy, vz, n):
    i = cuda.grid(1)
    if i < n:
        d = sdf_box(px[i], py[i] - {cy}, pz[i], {hx}, {hy}, {hz})
        if d < 0.0:
            j = contact_impulse(vy[i], d, {k}, {damp}, {dt})
            vy[i] += j
            s = friction_scale(abs(vx[i]) + abs(vz[i]), j, {mu})
            vx[i] *= s
            vz[i] *= s
            py[i] -= d * float32({push})
"""),
    "collide_capsule": (SIG6, """
def {name}(px, py, pz, vx, vy, vz, n):
    i = cuda.grid(1)
    if i < n:
        d = sdf_capsule(px[i] - {cx}, py[i], pz[i], {h}, {r})
        e = sdf_torus(px[i], py[i] - {cy}, pz[i], {R}, {r})
        m = min(d, e)
        j = contact_impulse(vx[i] + vz[i], m, {k}, {damp}, {dt})
        vx[i] += j * smoothstep(-{r}, {r}, px[i] - {cx})
        vz[i] += j * smoothstep(-{r}, {r}, pz[i])
"""),
    "sph_density": (SIG3, """
def {name}(pos, rho, mass, n):
    i = cuda.grid(1)
    if i < n:
        acc = float32(0.0)
        for k in range({nb}):
            j = (i + k * {stride}) % n
            d = pos[i] - pos[j]
            acc += mass[j] * poly6(d * d, {h})
        rho[i] = max(acc, float32({rho0}) * float32(0.5))
"""),
    "sph_force": (SIG6, """
def {name}(pos, vel, rho, mass, force, pres, n):
    i = cuda.grid(1)
    if i < n:
        pres[i] = eos_pressure(rho[i], {rho0}, {k}, {gamma})
        f = float32(0.0)
        for k in range({nb}):
            j = (i + k * {stride} + 1) % n
            r = abs(pos[i] - pos[j])
            pj = eos_pressure(rho[j], {rho0}, {k}, {gamma})
            f -= mass[j] * (pres[i] + pj) / (2.0 * rho[j]) * spiky_grad(r, {h})
            f += {mu} * mass[j] * (vel[j] - vel[i]) / rho[j] * visc_lap(r, {h})
        force[i] = f
"""),
    "springs": (SIG6, """
def {name}(px, py, pz, fx, fy, fz, n):
    i = cuda.grid(1)
    if i < n - {off}:
        j = i + {off}
        dx = px[j] - px[i]
        dy = py[j] - py[i]
        dz = pz[j] - pz[i]
        s = spring_force(dx, dy, dz, {rest}, {k})
        cuda.atomic.add(fx, i, s * dx)
        cuda.atomic.add(fy, i, s * dy)
        cuda.atomic.add(fz, i, s * dz)
        cuda.atomic.add(fx, j, -s * dx)
        cuda.atomic.add(fy, j, -s * dy)
        cuda.atomic.add(fz, j, -s * dz)
"""),
    "rotate": (SIG6, """
def {name}(qw, qx, qy, qz, vx, out, n):
    i = cuda.grid(1)
    if i < n:
        s = quat_norm(qw[i], qx[i], qy[i], qz[i])
        w = qw[i] * s
        x = qx[i] * s
        y = qy[i] * s
        z = qz[i] * s
        out[i] = quat_rot_x(w, x, y, z, vx[i], {ay}, {az})
        h = float32({omega}) * float32(0.5) * float32({dt})
        qw[i] = w - h * z
        qz[i] = z + h * w
"""),
    "energy": (SIG3, """
def {name}(v, m, out, n):
    buf = cuda.shared.array({block}, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    e = float32(0.0)
    if i < n:
        e = float32(0.5) * m[i] * v[i] * v[i] + m[i] * float32({g}) * float32({h0})
    buf[t] = e
    cuda.syncthreads()
    s = {half}
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, {slot}, buf[0])
"""),
    "noise": (SIG3, """
def {name}(vx, vy, seed, n):
    i = cuda.grid(1)
    if i < n:
        s = int32(seed[0]) + {salt}
        vx[i] += float32({amp}) * (rand01(s, i) - float32(0.5))
        vy[i] += float32({amp}) * (rand01(s + 1, i) - float32(0.5))
"""),
    "grid_count": (SIG3, """
def {name}(px, counts, unused, n):
    i = cuda.grid(1)
    if i < n:
        c = cell_of(px[i], {inv_cell}, {cells})
        cuda.atomic.add(counts, c, float32(1.0))
"""),
}


def instances():
    """(family, name, params) for every kernel, deterministic."""
    rnd = np.random.default_rng(20261130)

    def f(lo, hi):
        return float(np.float32(rnd.uniform(lo, hi)))
    out = []
    counts = {"integrate": 24, "collide_sphere": 24, "collide_box": 20, "collide_capsule": 16,
              "sph_density": 16, "sph_force": 16, "springs": 20, "rotate": 20, "energy": 12,
              "noise": 16, "grid_count": 16}
    for fam, cnt in counts.items():
        for k in range(cnt):
            p = dict(dt=f(0.001, 0.02), g=f(-10.5, -9.0), c1=f(0.0, 0.2), c2=f(0.0, 0.05),
                     box=f(5, 20), cx=f(-2, 2), cy=f(-2, 2), r=f(0.2, 1.5), R=f(1.0, 3.0),
                     k=f(100, 5000), damp=f(0.1, 5), mu=f(0.1, 0.9), hx=f(0.5, 3), hy=f(0.1, 1),
                     hz=f(0.5, 3), push=f(0.1, 1.0), h=f(0.05, 0.5), rho0=f(800, 1200),
                     gamma=f(1.0, 7.0), rest=f(0.01, 0.2), ay=f(-1, 1), az=f(-1, 1),
                     omega=f(-3, 3), h0=f(0, 10), amp=f(0.01, 1.0), inv_cell=f(1, 16),
                     nb=int(rnd.integers(4, 24)), stride=int(rnd.integers(1, 97)),
                     off=int(rnd.integers(1, 8)), salt=int(rnd.integers(0, 1 << 20)),
                     cells=int(rnd.integers(64, 4096)), slot=k % 8)
            block = [64, 128, 256][k % 3]
            p.update(block=block, half=block // 2)
            out.append((fam, f"{fam}_{k:02d}", p))
    return out


def lower(pyfunc, sig):
    lib, _ = compiler._compile_pyfunc_with_fixup(
        pyfunc, sig, debug=False, lineinfo=False, device=False, fastmath=False, cc=CC,
        opt=True, abi="numba", abi_info=None, forceinline=False, launch_bounds=None, lto=False)
    return lib


_DEFINE = re.compile(r'^(define linkonce_odr [^@]*@"?([^"(]+)"?\((?:[^()]|\([^()]*\))*\))', re.M)


def keep_out_of_line(ir):
    """Adds LLVM's noinline to the definitions of the OUT_OF_LINE helpers."""
    def add(m):
        if any(f"{len(h)}{h}B" in m.group(2) for h in OUT_OF_LINE):
            return m.group(1) + " noinline"
        return m.group(1)
    return _DEFINE.sub(add, ir)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    env = dict(globals())
    irs, seen = [], set()
    kernels = []
    for fam, name, params in instances():
        sig, text = TEMPLATES[fam]
        exec(text.format(name=name, **params), env)
        kernels.append((name, env[name], sig))
        lib = lower(env[name], sig)
        for ir in lib.llvm_strs:
            if ir not in seen:
                seen.add(ir)
                irs.append(keep_out_of_line(ir))
    ptx = nvvm.compile_ir(irs, arch="compute_%d%d" % CC, opt=3)
    ptx = ptx.decode().strip("\x00").strip() + "\n"
    with open(os.path.join(outdir, "physics_step.ptx"), "w") as f:
        f.write(ptx)
    print(f"physics_step.ptx: {len(kernels)} kernels, {ptx.count('.func ')} .func lines")
    # a few kernels exactly as the public API emits them, one module each
    for name, fn, sig in kernels[::40]:
        code, _ = cuda.compile_ptx(fn, sig, cc=CC)
        with open(os.path.join(outdir, f"single_{name}.ptx"), "w") as f:
            f.write(code if code.endswith("\n") else code + "\n")
        print(f"single_{name}.ptx")


if __name__ == "__main__":
    main()
