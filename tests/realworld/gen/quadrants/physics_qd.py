#!/usr/bin/env python3
"""A physics step written for taskcache's real-world corpus in Quadrants
(Genesis-Embodied-AI's fork of Taichi), compiled by Quadrants' CUDA back end (LLVM
NVPTX) and dumped as PTX.

One kernel, `step`, runs SUBSTEPS substeps of a small particle + rigid-body
+ SPH engine; every top-level loop of every substep is an offloaded task,
so Quadrants emits one module with about two hundred kernels, the shape of
a Genesis step. Quadrants needs a CUDA driver to compile for CUDA (without
one it falls back to the CPU), so this runs on a GPU machine.

Usage: physics_qd.py OUTDIR [--arch cuda|cpu]
Writes the PTX Quadrants dumps (print_kernel_asm) into OUTDIR.
"""

import os
import sys

import quadrants as qd

SUBSTEPS = 20
N = 4096
NB = 64


def main():
    outdir = os.path.abspath(sys.argv[1])
    arch = qd.cuda if "--arch" not in sys.argv or sys.argv[sys.argv.index("--arch") + 1] == "cuda" else qd.cpu
    os.makedirs(outdir, exist_ok=True)
    qd.init(arch=arch, print_kernel_asm=True, debug_dump_path=outdir, offline_cache=False,
            default_fp=qd.f32)

    pos = qd.Vector.field(3, qd.f32, shape=N)
    vel = qd.Vector.field(3, qd.f32, shape=N)
    force = qd.Vector.field(3, qd.f32, shape=N)
    rho = qd.field(qd.f32, shape=N)
    pres = qd.field(qd.f32, shape=N)
    mass = qd.field(qd.f32, shape=N)
    bpos = qd.Vector.field(3, qd.f32, shape=NB)
    bquat = qd.Vector.field(4, qd.f32, shape=NB)
    bvel = qd.Vector.field(3, qd.f32, shape=NB)
    bomega = qd.Vector.field(3, qd.f32, shape=NB)
    energy = qd.field(qd.f32, shape=SUBSTEPS)
    contacts = qd.field(qd.i32, shape=SUBSTEPS)
    grid = qd.field(qd.i32, shape=(32, 32, 32))

    @qd.func
    def sdf_box(p, h):
        q = abs(p) - h
        return qd.max(q, 0.0).norm() + qd.min(qd.max(q[0], qd.max(q[1], q[2])), 0.0)

    @qd.func
    def sdf_sphere(p, r):
        return p.norm() - r

    @qd.func
    def contact_impulse(vn, depth, k, damp, dt):
        j = 0.0
        if depth < 0.0:
            j = qd.max(-k * depth * dt - damp * vn, 0.0)
        return j

    @qd.func
    def quat_mul(a, b):
        return qd.Vector([a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
                          a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
                          a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
                          a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]])

    @qd.func
    def poly6(r2, h):
        w = 0.0
        if r2 < h * h:
            d = h * h - r2
            w = 315.0 / (64.0 * 3.14159265 * h ** 9) * d * d * d
        return w

    @qd.func
    def spiky(r, h):
        w = 0.0
        if 0.0 < r < h:
            w = -45.0 / (3.14159265 * h ** 6) * (h - r) * (h - r)
        return w

    @qd.kernel
    def init():
        for i in pos:
            pos[i] = qd.Vector([qd.random(), qd.random() * 2.0, qd.random()])
            vel[i] = qd.Vector([0.0, 0.0, 0.0])
            mass[i] = 1.0 + 0.1 * qd.random()
        for b in bpos:
            bpos[b] = qd.Vector([qd.random(), 1.0 + qd.random(), qd.random()])
            bquat[b] = qd.Vector([1.0, 0.0, 0.0, 0.0])

    @qd.kernel
    def step(dt: qd.f32):
        for s in qd.static(range(SUBSTEPS)):
            h = 0.05 + 0.002 * s
            stiff = 1000.0 + 50.0 * s
            for i in force:
                force[i] = qd.Vector([0.0, -9.81 * mass[i], 0.0])
            for I in qd.grouped(grid):
                grid[I] = 0
            for i in pos:
                c = qd.cast(qd.floor(pos[i] * 16.0), qd.i32)
                c = qd.max(qd.min(c, 31), 0)
                qd.atomic_add(grid[c], 1)
            for i in rho:
                acc = 0.0
                for k in range(8):
                    j = (i + k * (17 + s)) % N
                    d = pos[i] - pos[j]
                    acc += mass[j] * poly6(d.dot(d), h)
                rho[i] = qd.max(acc, 500.0)
                pres[i] = stiff * ((rho[i] / 1000.0) ** 7 - 1.0)
            for i in force:
                f = qd.Vector([0.0, 0.0, 0.0])
                for k in range(8):
                    j = (i + k * (13 + s) + 1) % N
                    d = pos[i] - pos[j]
                    r = d.norm() + 1e-6
                    f -= mass[j] * (pres[i] + pres[j]) / (2.0 * rho[j]) * spiky(r, h) * d / r
                force[i] += f
            for i in vel:
                vel[i] += dt * force[i] / mass[i]
                vel[i] *= 1.0 - 0.01 * (s % 3)
            for i in pos:
                for b in range(NB):
                    p = pos[i] - bpos[b]
                    d = sdf_sphere(p, 0.05 + 0.001 * s)
                    if d < 0.0:
                        n = p.normalized()
                        vn = vel[i].dot(n)
                        j = contact_impulse(vn, d, stiff, 2.0, dt)
                        vel[i] += j * n
                        qd.atomic_add(contacts[s], 1)
            for i in pos:
                d = sdf_box(pos[i] - qd.Vector([0.5, 0.0, 0.5]), qd.Vector([0.6, 0.05 + 0.01 * s, 0.6]))
                if d < 0.0:
                    vel[i][1] += contact_impulse(vel[i][1], d, stiff, 1.0, dt)
            for i in pos:
                pos[i] += dt * vel[i]
            for b in bpos:
                w = bomega[b]
                dq = quat_mul(qd.Vector([0.0, w[0], w[1], w[2]]), bquat[b]) * (0.5 * dt)
                bquat[b] = (bquat[b] + dq).normalized()
                bvel[b][1] -= 9.81 * dt
                bpos[b] += dt * bvel[b]
            for i in vel:
                qd.atomic_add(energy[s], 0.5 * mass[i] * vel[i].dot(vel[i]))

    init()
    step(1e-3)
    qd.sync()
    print("energy", energy.to_numpy()[:3], "contacts", contacts.to_numpy()[:3])


if __name__ == "__main__":
    main()
