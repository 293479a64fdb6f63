#!/usr/bin/env python3
"""Generates the NVIDIA Warp part of taskcache's real-world corpus.

A cloth, soft-body, fluid and rigid-body "physics step" written for Warp in
the style of warp.sim and Newton: particles with springs, triangle FEM,
bending and tetrahedral elements, ground, sphere, box, capsule and mesh
contacts, an XPBD constraint solve, SPH density and forces over a
wp.HashGrid, rigid bodies with quaternions and transforms, energies reduced
with wp.atomic_add, random initial states, and a wp.struct of model
parameters. About twenty @wp.func helpers (some with loops) are shared by
the kernels, and families of kernels are made by Python closures, as Warp
users write them. Warp translates each kernel to CUDA C++ with a forward and
an adjoint (backward) entry and compiles the module with its bundled NVRTC
(`wp.compile_aot_module(..., use_ptx=True)`), which needs no GPU.

Modules, one PTX file each:
  physics_step          the whole step (86 kernels, 172 entries)
  physics_small.lineinfo  a few kernels of the same families, lineinfo on
  tiles                 Warp's tile API (tile_load/map/reduce/sum/scan/
                        sort/store), block_dim 128, as wp.launch_tiled runs
  tiles_matmul          tile_matmul through libmathdx, linked by nvJitLink
  single_*              one kernel each

The files are written as Warp writes them: NVRTC's PTX string including
its terminating NUL, which is what Warp hands the driver. Only the order of
the kernels is this generator's: Warp emits them in the order of a WeakSet,
which changes from run to run, and they are put in definition order here.

Usage: gen_warp.py OUTDIR   (writes physics_step.ptx, physics_small.lineinfo.ptx,
                             tiles.ptx, tiles_matmul.ptx and single_*.ptx)
"""

import glob
import os
import shutil
import sys
import tempfile

import warp as wp

ARCH = 90

# Warp's kernel cache (where it also keeps libmathdx's LTO-IR) in a folder of
# this run, not in the user's cache
_CACHE = tempfile.TemporaryDirectory(prefix="gen_warp-cache.")
wp.config.kernel_cache_dir = _CACHE.name
wp.config.quiet = True
wp.init()

# Warp keeps a module's kernels in a WeakSet and emits them in its iteration
# order, which follows object addresses and changes from run to run; emit
# them in definition order so that regenerating gives the same files.
wp.context.Module.live_kernels = property(lambda self: list(self.kernels.values()))

PHYS = wp.get_module("physics_step")
SMALL = wp.get_module("physics_small.lineinfo")
TILES = wp.get_module("tiles")
TILES_MM = wp.get_module("tiles_matmul")
SINGLES = ["single_integrate", "single_sph_forces", "single_mesh_contacts"]

# ---------------------------------------------------------------- model


@wp.struct
class ModelParams:
    gravity: wp.vec3
    dt: float
    particle_radius: float
    ground_ke: float
    ground_kd: float
    ground_kf: float
    ground_mu: float
    sphere_center: wp.vec3
    sphere_radius: float
    damping: float
    max_velocity: float
    inv_mass: wp.array(dtype=float)
    flags: wp.array(dtype=wp.int32)


PARTICLE_ACTIVE = wp.constant(1)
SPH_RHO0 = wp.constant(1000.0)

# ---------------------------------------------------------------- helpers


@wp.func
def safe_normalize(v: wp.vec3):
    l = wp.length(v)
    if l > 1.0e-8:
        return v / l
    return wp.vec3(0.0)


@wp.func
def spring_force(xa: wp.vec3, xb: wp.vec3, va: wp.vec3, vb: wp.vec3, rest: float, ke: float, kd: float):
    d = xa - xb
    l = wp.length(d)
    if l < 1.0e-8:
        return wp.vec3(0.0)
    dir = d / l
    c = l - rest
    dcdt = wp.dot(dir, va - vb)
    return dir * (-ke * c - kd * dcdt)


@wp.func
def contact_force(n: wp.vec3, v: wp.vec3, c: float, ke: float, kd: float, kf: float, mu: float):
    vn = wp.dot(n, v)
    vt = v - n * vn
    fn = n * c * ke
    fd = n * wp.min(vn, 0.0) * kd
    # Coulomb friction, ramped in with the slip speed so that it stays differentiable
    vs = wp.length(vt)
    ramp = wp.min(vs * kf, 1.0)
    ft = safe_normalize(vt) * (mu * wp.abs(c) * ke * ramp)
    return -(fn + fd + ft) * wp.step(c)


@wp.func
def sdf_box(p: wp.vec3, h: wp.vec3):
    q = wp.vec3(wp.abs(p[0]) - h[0], wp.abs(p[1]) - h[1], wp.abs(p[2]) - h[2])
    outside = wp.length(wp.vec3(wp.max(q[0], 0.0), wp.max(q[1], 0.0), wp.max(q[2], 0.0)))
    return outside + wp.min(wp.max(q[0], wp.max(q[1], q[2])), 0.0)


@wp.func
def sdf_box_grad(p: wp.vec3, h: wp.vec3):
    # central differences, as a user who does not want the analytic gradient writes it
    eps = 1.0e-3
    g = wp.vec3(0.0)
    for k in range(3):
        e = wp.vec3(0.0)
        e[k] = eps
        g[k] = (sdf_box(p + e, h) - sdf_box(p - e, h)) / (2.0 * eps)
    return safe_normalize(g)


@wp.func
def sdf_capsule(p: wp.vec3, r: float, half_height: float):
    y = wp.clamp(p[1], -half_height, half_height)
    return wp.length(p - wp.vec3(0.0, y, 0.0)) - r


@wp.func
def closest_point_segment(a: wp.vec3, b: wp.vec3, p: wp.vec3):
    ab = b - a
    t = wp.clamp(wp.dot(p - a, ab) / wp.max(wp.dot(ab, ab), 1.0e-12), 0.0, 1.0)
    return a + ab * t


@wp.func
def sph_poly6(r2: float, h: float):
    h2 = h * h
    if r2 >= h2:
        return 0.0
    d = h2 - r2
    return 315.0 / (64.0 * wp.pi * wp.pow(h, 9.0)) * d * d * d


@wp.func
def sph_spiky_grad(r: wp.vec3, h: float):
    l = wp.length(r)
    if l >= h or l < 1.0e-9:
        return wp.vec3(0.0)
    d = h - l
    return r * (-45.0 / (wp.pi * wp.pow(h, 6.0)) * d * d / l)


@wp.func
def sph_visc_laplacian(l: float, h: float):
    if l >= h:
        return 0.0
    return 45.0 / (wp.pi * wp.pow(h, 6.0)) * (h - l)


@wp.func
def cubic_spline(q: float):
    if q < 1.0:
        return 1.0 - 1.5 * q * q + 0.75 * q * q * q
    if q < 2.0:
        t = 2.0 - q
        return 0.25 * t * t * t
    return 0.0


@wp.func
def density_at(grid: wp.uint64, x: wp.array(dtype=wp.vec3), p: wp.vec3, mass: float, h: float):
    # a helper holding a neighbour loop, called by several kernels
    rho = float(0.0)
    for j in wp.hash_grid_query(grid, p, h):
        d = p - x[j]
        rho += mass * sph_poly6(wp.dot(d, d), h)
    return rho


@wp.func
def fbm(seed: wp.uint32, p: wp.vec3, octaves: int):
    s = float(0.0)
    amp = float(0.5)
    q = p
    for o in range(octaves):
        s += amp * wp.noise(seed + wp.uint32(o), q)
        q = q * 2.03
        amp *= 0.5
    return s


@wp.func
def newton_cubic(a: float, b: float, c: float, d: float, x0: float):
    # root of a x^3 + b x^2 + c x + d near x0 (used for CCD times of impact)
    x = x0
    for it in range(8):
        f = ((a * x + b) * x + c) * x + d
        df = (3.0 * a * x + 2.0 * b) * x + c
        if wp.abs(df) > 1.0e-9:
            x = x - f / df
    return wp.clamp(x, 0.0, 1.0)


@wp.func
def polar_rotation(F: wp.mat33):
    # the rotation of F by a few Newton iterations of the polar decomposition
    R = F
    for it in range(6):
        Rinv_t = wp.transpose(wp.inverse(R))
        R = (R + Rinv_t) * 0.5
    return R


@wp.func
def triangle_area_normal(a: wp.vec3, b: wp.vec3, c: wp.vec3):
    return wp.cross(b - a, c - a) * 0.5


@wp.func
def dihedral_angle(x1: wp.vec3, x2: wp.vec3, x3: wp.vec3, x4: wp.vec3):
    n1 = wp.cross(x3 - x1, x4 - x1)
    n2 = wp.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    n1n = safe_normalize(n1)
    n2n = safe_normalize(n2)
    en = safe_normalize(e)
    cos_t = wp.clamp(wp.dot(n1n, n2n), -1.0, 1.0)
    sin_t = wp.dot(wp.cross(n1n, n2n), en)
    return wp.atan2(sin_t, cos_t)


@wp.func
def velocity_at_point(qd: wp.spatial_vector, r: wp.vec3):
    return wp.cross(wp.spatial_top(qd), r) + wp.spatial_bottom(qd)


@wp.func
def integrate_rotation(q: wp.quat, w: wp.vec3, dt: float):
    dq = wp.quat(w[0], w[1], w[2], 0.0) * q * (0.5 * dt)
    return wp.normalize(q + dq)


@wp.func
def smooth_min(values: wp.vec4, k: float):
    acc = float(0.0)
    for i in range(4):
        acc += wp.exp(-k * values[i])
    return -wp.log(acc) / k


@wp.func
def limit_speed(v: wp.vec3, vmax: float):
    s = wp.length(v)
    if s > vmax:
        return v * (vmax / s)
    return v


@wp.func
def xpbd_distance_delta(xa: wp.vec3, xb: wp.vec3, wa: float, wb: float, rest: float, compliance: float,
                        lam: float, dt: float):
    d = xa - xb
    l = wp.length(d)
    w = wa + wb
    if l < 1.0e-8 or w == 0.0:
        return wp.vec4(0.0)
    n = d / l
    alpha = compliance / (dt * dt)
    dl = (-(l - rest) - alpha * lam) / (w + alpha)
    return wp.vec4(n[0] * dl, n[1] * dl, n[2] * dl, dl)


# ---------------------------------------------------------------- particles


@wp.kernel(module=PHYS)
def clear_forces(f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    f[i] = wp.vec3(0.0)


@wp.kernel(module=PHYS)
def integrate_particles(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
                        params: ModelParams, x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    if (params.flags[i] & PARTICLE_ACTIVE) == 0:
        x_out[i] = x[i]
        v_out[i] = v[i]
        return
    w = params.inv_mass[i]
    v1 = v[i] + (f[i] * w + params.gravity * wp.step(-w)) * params.dt
    v1 = limit_speed(v1 * (1.0 - params.damping * params.dt), params.max_velocity)
    x_out[i] = x[i] + v1 * params.dt
    v_out[i] = v1


@wp.kernel(module=PHYS)
def apply_external_forces(x: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3), center: wp.vec3,
                          strength: float, falloff: float):
    i = wp.tid()
    d = center - x[i]
    r = wp.length(d)
    f[i] = f[i] + safe_normalize(d) * strength * wp.exp(-falloff * r * r)


@wp.kernel(module=PHYS)
def particle_ground_contacts(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), params: ModelParams,
                             f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    n = wp.vec3(0.0, 1.0, 0.0)
    c = wp.min(wp.dot(n, x[i]) - params.particle_radius, 0.0)
    fc = contact_force(n, v[i], c, params.ground_ke, params.ground_kd, params.ground_kf, params.ground_mu)
    wp.atomic_add(f, i, fc)


@wp.kernel(module=PHYS)
def particle_sphere_contacts(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), params: ModelParams,
                             f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    d = x[i] - params.sphere_center
    n = safe_normalize(d)
    c = wp.min(wp.length(d) - params.sphere_radius - params.particle_radius, 0.0)
    fc = contact_force(n, v[i], c, params.ground_ke, params.ground_kd, params.ground_kf, params.ground_mu)
    wp.atomic_add(f, i, fc)


@wp.kernel(module=PHYS)
def particle_particle_contacts(grid: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                               radius: float, ke: float, kd: float, kf: float, mu: float,
                               f: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    xi = x[i]
    fi = wp.vec3(0.0)
    for j in wp.hash_grid_query(grid, xi, 2.0 * radius):
        if j != i:
            d = xi - x[j]
            l = wp.length(d)
            c = l - 2.0 * radius
            if c < 0.0:
                n = safe_normalize(d)
                fi += -contact_force(-n, v[i] - v[j], c, ke, kd, kf, mu)
    f[i] = f[i] + fi


@wp.kernel(module=PHYS)
def particle_mesh_contacts(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                           params: ModelParams, f: wp.array(dtype=wp.vec3), count: wp.array(dtype=int)):
    i = wp.tid()
    p = x[i]
    q = wp.mesh_query_point_no_sign(mesh, p, 4.0 * params.particle_radius)
    if q.result:
        cp = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        d = p - cp
        n = safe_normalize(d)
        c = wp.length(d) - params.particle_radius
        if c < 0.0:
            fc = contact_force(n, v[i], c, params.ground_ke, params.ground_kd, params.ground_kf, params.ground_mu)
            wp.atomic_add(f, i, fc)
            wp.atomic_add(count, 0, 1)


@wp.kernel(module=PHYS)
def particle_mesh_sdf(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), max_dist: float,
                      sdf: wp.array(dtype=float), grad: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = x[i]
    q = wp.mesh_query_point_sign_normal(mesh, p, max_dist, 1.0e-3)
    if q.result:
        cp = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        d = p - cp
        sdf[i] = wp.length(d) * q.sign
        grad[i] = safe_normalize(d) * q.sign
    else:
        sdf[i] = max_dist
        grad[i] = wp.vec3(0.0)


@wp.kernel(module=PHYS)
def particle_mesh_raycast(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float,
                          toi: wp.array(dtype=float)):
    i = wp.tid()
    d = v[i] * dt
    l = wp.length(d)
    t = float(1.0)
    if l > 1.0e-9:
        q = wp.mesh_query_ray(mesh, x[i], d / l, l)
        if q.result:
            t = q.t / l
    toi[i] = t


@wp.kernel(module=PHYS)
def limit_velocity(v: wp.array(dtype=wp.vec3), vmax: float):
    i = wp.tid()
    v[i] = limit_speed(v[i], vmax)


@wp.kernel(module=PHYS)
def interpolate_states(x0: wp.array(dtype=wp.vec3), x1: wp.array(dtype=wp.vec3), alpha: float,
                       out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.lerp(x0[i], x1[i], alpha)


@wp.kernel(module=PHYS)
def compute_bounds(x: wp.array(dtype=wp.vec3), lower: wp.array(dtype=float), upper: wp.array(dtype=float)):
    i = wp.tid()
    p = x[i]
    for k in range(3):
        wp.atomic_min(lower, k, p[k])
        wp.atomic_max(upper, k, p[k])


@wp.kernel(module=PHYS)
def grid_histogram(x: wp.array(dtype=wp.vec3), inv_cell: float, dim: int, counts: wp.array(dtype=int)):
    i = wp.tid()
    p = x[i] * inv_cell
    cx = wp.clamp(int(wp.floor(p[0])), 0, dim - 1)
    cy = wp.clamp(int(wp.floor(p[1])), 0, dim - 1)
    cz = wp.clamp(int(wp.floor(p[2])), 0, dim - 1)
    wp.atomic_add(counts, (cz * dim + cy) * dim + cx, 1)


# ---------------------------------------------------------------- cloth and soft bodies


@wp.kernel(module=PHYS)
def eval_springs(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array(dtype=int),
                 rest: wp.array(dtype=float), ke: wp.array(dtype=float), kd: wp.array(dtype=float),
                 f: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    a = indices[2 * s]
    b = indices[2 * s + 1]
    fs = spring_force(x[a], x[b], v[a], v[b], rest[s], ke[s], kd[s])
    wp.atomic_add(f, a, fs)
    wp.atomic_sub(f, b, fs)


@wp.kernel(module=PHYS)
def eval_spring_energy(x: wp.array(dtype=wp.vec3), indices: wp.array(dtype=int), rest: wp.array(dtype=float),
                       ke: wp.array(dtype=float), energy: wp.array(dtype=float)):
    s = wp.tid()
    c = wp.length(x[indices[2 * s]] - x[indices[2 * s + 1]]) - rest[s]
    wp.atomic_add(energy, 0, 0.5 * ke[s] * c * c)


@wp.kernel(module=PHYS)
def eval_triangles(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                   pose: wp.array(dtype=wp.mat22), materials: wp.array2d(dtype=float), f: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    k_mu = materials[t, 0]
    k_lambda = materials[t, 1]
    k_damp = materials[t, 2]
    x0 = x[i]
    x10 = x[j] - x0
    x20 = x[k] - x0
    v10 = v[j] - v[i]
    v20 = v[k] - v[i]
    Dm = pose[t]
    inv_rest_area = wp.determinant(Dm) * 2.0
    rest_area = 1.0 / inv_rest_area
    k_mu = k_mu * rest_area
    k_lambda = k_lambda * rest_area
    k_damp = k_damp * rest_area
    # deformation gradient columns
    F1 = x10 * Dm[0, 0] + x20 * Dm[1, 0]
    F2 = x10 * Dm[0, 1] + x20 * Dm[1, 1]
    dFdt1 = v10 * Dm[0, 0] + v20 * Dm[1, 0]
    dFdt2 = v10 * Dm[0, 1] + v20 * Dm[1, 1]
    P1 = F1 * k_mu + dFdt1 * k_damp
    P2 = F2 * k_mu + dFdt2 * k_damp
    f1 = P1 * Dm[0, 0] + P2 * Dm[0, 1]
    f2 = P1 * Dm[1, 0] + P2 * Dm[1, 1]
    alpha = 1.0 + k_mu / k_lambda
    n = wp.cross(x10, x20)
    area = wp.length(n) * 0.5
    c = area * inv_rest_area - alpha
    n = safe_normalize(n)
    dcdq = wp.cross(x20, n) * inv_rest_area * 0.5
    dcdr = wp.cross(n, x10) * inv_rest_area * 0.5
    f_area = k_lambda * c
    f1 = f1 + dcdq * f_area
    f2 = f2 + dcdr * f_area
    f0 = f1 + f2
    wp.atomic_add(f, i, f0)
    wp.atomic_sub(f, j, f1)
    wp.atomic_sub(f, k, f2)


@wp.kernel(module=PHYS)
def eval_triangle_energy(x: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                         pose: wp.array(dtype=wp.mat22), materials: wp.array2d(dtype=float),
                         energy: wp.array(dtype=float)):
    t = wp.tid()
    i = indices[t, 0]
    x10 = x[indices[t, 1]] - x[i]
    x20 = x[indices[t, 2]] - x[i]
    Dm = pose[t]
    F1 = x10 * Dm[0, 0] + x20 * Dm[1, 0]
    F2 = x10 * Dm[0, 1] + x20 * Dm[1, 1]
    rest_area = 0.5 / wp.determinant(Dm)
    e = 0.5 * materials[t, 0] * (wp.dot(F1, F1) + wp.dot(F2, F2) - 2.0)
    wp.atomic_add(energy, 1, e * rest_area)


@wp.kernel(module=PHYS)
def eval_triangle_aero(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                       wind: wp.vec3, k_drag: float, k_lift: float, f: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    an = triangle_area_normal(x[i], x[j], x[k])
    area = wp.length(an)
    n = safe_normalize(an)
    vmid = (v[i] + v[j] + v[k]) * (1.0 / 3.0) - wind
    vdir = safe_normalize(vmid)
    cos_a = wp.dot(n, vdir)
    f_drag = vmid * (k_drag * area * wp.abs(cos_a) * wp.length(vmid))
    f_lift = n * (k_lift * area * (0.5 * wp.pi - wp.acos(wp.clamp(cos_a, -1.0, 1.0)))) * wp.dot(vmid, vmid)
    fa = (f_drag + f_lift) * (1.0 / 3.0)
    wp.atomic_sub(f, i, fa)
    wp.atomic_sub(f, j, fa)
    wp.atomic_sub(f, k, fa)


@wp.kernel(module=PHYS)
def eval_bending(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                 rest: wp.array(dtype=float), props: wp.array2d(dtype=float), f: wp.array(dtype=wp.vec3)):
    e = wp.tid()
    i = indices[e, 0]
    j = indices[e, 1]
    k = indices[e, 2]
    l = indices[e, 3]
    ke = props[e, 0]
    kd = props[e, 1]
    x1 = x[i]
    x2 = x[j]
    x3 = x[k]
    x4 = x[l]
    n1 = wp.cross(x3 - x1, x4 - x1)
    n2 = wp.cross(x4 - x2, x3 - x2)
    n1_len = wp.length(n1)
    n2_len = wp.length(n2)
    if n1_len < 1.0e-6 or n2_len < 1.0e-6:
        return
    rcp_n1 = 1.0 / n1_len
    rcp_n2 = 1.0 / n2_len
    e_dir = x4 - x3
    e_len = wp.length(e_dir)
    if e_len < 1.0e-6:
        return
    angle = dihedral_angle(x1, x2, x3, x4)
    d1 = n1 * rcp_n1 * rcp_n1 * e_len
    d2 = n2 * rcp_n2 * rcp_n2 * e_len
    rcp_e = 1.0 / e_len
    d3 = n1 * rcp_n1 * rcp_n1 * wp.dot(x1 - x4, e_dir) * rcp_e + n2 * rcp_n2 * rcp_n2 * wp.dot(x2 - x4, e_dir) * rcp_e
    d4 = n1 * rcp_n1 * rcp_n1 * wp.dot(x3 - x1, e_dir) * rcp_e + n2 * rcp_n2 * rcp_n2 * wp.dot(x3 - x2, e_dir) * rcp_e
    f_elastic = ke * (angle - rest[e])
    f_damp = kd * (wp.dot(d1, v[i]) + wp.dot(d2, v[j]) + wp.dot(d3, v[k]) + wp.dot(d4, v[l]))
    fs = -e_len * (f_elastic + f_damp)
    wp.atomic_add(f, i, d1 * fs)
    wp.atomic_add(f, j, d2 * fs)
    wp.atomic_add(f, k, d3 * fs)
    wp.atomic_add(f, l, d4 * fs)


@wp.kernel(module=PHYS)
def eval_tetrahedra(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                    pose: wp.array(dtype=wp.mat33), materials: wp.array2d(dtype=float),
                    f: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    l = indices[t, 3]
    k_mu = materials[t, 0]
    k_lambda = materials[t, 1]
    k_damp = materials[t, 2]
    x0 = x[i]
    v0 = v[i]
    Ds = wp.matrix_from_cols(x[j] - x0, x[k] - x0, x[l] - x0)
    Dm = pose[t]
    inv_rest_volume = wp.determinant(Dm) * 6.0
    rest_volume = 1.0 / inv_rest_volume
    alpha = 1.0 + k_mu / k_lambda - k_mu / (4.0 * k_lambda)
    k_mu = k_mu * rest_volume
    k_lambda = k_lambda * rest_volume
    k_damp = k_damp * rest_volume
    F = Ds * Dm
    dFdt = wp.matrix_from_cols(v[j] - v0, v[k] - v0, v[l] - v0) * Dm
    col1 = wp.vec3(F[0, 0], F[1, 0], F[2, 0])
    col2 = wp.vec3(F[0, 1], F[1, 1], F[2, 1])
    col3 = wp.vec3(F[0, 2], F[1, 2], F[2, 2])
    Ic = wp.dot(col1, col1) + wp.dot(col2, col2) + wp.dot(col3, col3)
    P = F * k_mu * (1.0 - 1.0 / (Ic + 1.0)) + dFdt * k_damp
    H = P * wp.transpose(Dm)
    f1 = wp.vec3(H[0, 0], H[1, 0], H[2, 0])
    f2 = wp.vec3(H[0, 1], H[1, 1], H[2, 1])
    f3 = wp.vec3(H[0, 2], H[1, 2], H[2, 2])
    J = wp.determinant(F)
    s = inv_rest_volume / 6.0
    dJdx1 = wp.cross(col2, col3) * s
    dJdx2 = wp.cross(col3, col1) * s
    dJdx3 = wp.cross(col1, col2) * s
    f_volume = (J - alpha) * k_lambda
    f1 = f1 + dJdx1 * f_volume
    f2 = f2 + dJdx2 * f_volume
    f3 = f3 + dJdx3 * f_volume
    f0 = f1 + f2 + f3
    wp.atomic_add(f, i, f0)
    wp.atomic_sub(f, j, f1)
    wp.atomic_sub(f, k, f2)
    wp.atomic_sub(f, l, f3)


@wp.kernel(module=PHYS)
def eval_tetrahedra_corotated(x: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                              pose: wp.array(dtype=wp.mat33), k_mu: float, f: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    i = indices[t, 0]
    x0 = x[i]
    Ds = wp.matrix_from_cols(x[indices[t, 1]] - x0, x[indices[t, 2]] - x0, x[indices[t, 3]] - x0)
    F = Ds * pose[t]
    R = polar_rotation(F)
    P = (F - R) * (2.0 * k_mu)
    H = P * wp.transpose(pose[t])
    for c in range(3):
        fc = wp.vec3(H[0, c], H[1, c], H[2, c])
        wp.atomic_sub(f, indices[t, c + 1], fc)
        wp.atomic_add(f, i, fc)


@wp.kernel(module=PHYS)
def eval_tet_energy_svd(x: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                        pose: wp.array(dtype=wp.mat33), k_mu: float, energy: wp.array(dtype=float)):
    t = wp.tid()
    i = indices[t, 0]
    x0 = x[i]
    Ds = wp.matrix_from_cols(x[indices[t, 1]] - x0, x[indices[t, 2]] - x0, x[indices[t, 3]] - x0)
    F = Ds * pose[t]
    U = wp.mat33()
    sigma = wp.vec3()
    V = wp.mat33()
    wp.svd3(F, U, sigma, V)
    e = float(0.0)
    for k in range(3):
        e += (sigma[k] - 1.0) * (sigma[k] - 1.0)
    wp.atomic_add(energy, 2, k_mu * e / (6.0 * wp.determinant(pose[t])))


@wp.kernel(module=PHYS)
def compute_vertex_normals(x: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
                           normals: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    an = triangle_area_normal(x[indices[t, 0]], x[indices[t, 1]], x[indices[t, 2]])
    for c in range(3):
        wp.atomic_add(normals, indices[t, c], an)


@wp.kernel(module=PHYS)
def normalize_normals(normals: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    normals[i] = safe_normalize(normals[i])


@wp.kernel(module=PHYS)
def edge_edge_ccd(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), edges: wp.array2d(dtype=int),
                  dt: float, toi: wp.array(dtype=float)):
    e = wp.tid()
    a = edges[e, 0]
    b = edges[e, 1]
    c = edges[e, 2]
    d = edges[e, 3]
    p = closest_point_segment(x[a], x[b], x[c])
    q = closest_point_segment(x[c], x[d], p)
    dv = (v[a] + v[b] - v[c] - v[d]) * (0.5 * dt)
    dx = p - q
    t = newton_cubic(wp.dot(dv, dv) * 0.1, wp.dot(dx, dv), wp.dot(dx, dx) - 1.0e-4, -1.0e-6, 0.5)
    wp.atomic_min(toi, a, t)
    wp.atomic_min(toi, c, t)


# ---------------------------------------------------------------- XPBD


@wp.kernel(module=PHYS)
def xpbd_predict(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), params: ModelParams,
                 x_pred: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    w = params.inv_mass[i]
    v1 = v[i]
    if w > 0.0:
        v1 = v1 + params.gravity * params.dt
    x_pred[i] = x[i] + v1 * params.dt


@wp.kernel(module=PHYS)
def xpbd_solve_distance(x: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float),
                        indices: wp.array(dtype=int), rest: wp.array(dtype=float), compliance: float,
                        dt: float, lambdas: wp.array(dtype=float), delta: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    a = indices[2 * s]
    b = indices[2 * s + 1]
    wa = inv_mass[a]
    wb = inv_mass[b]
    r = xpbd_distance_delta(x[a], x[b], wa, wb, rest[s], compliance, lambdas[s], dt)
    dx = wp.vec3(r[0], r[1], r[2])
    lambdas[s] = lambdas[s] + r[3]
    wp.atomic_add(delta, a, dx * wa)
    wp.atomic_sub(delta, b, dx * wb)


@wp.kernel(module=PHYS)
def xpbd_solve_bending(x: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float),
                       indices: wp.array2d(dtype=int), rest: wp.array(dtype=float), stiffness: float,
                       delta: wp.array(dtype=wp.vec3)):
    e = wp.tid()
    i = indices[e, 0]
    j = indices[e, 1]
    k = indices[e, 2]
    l = indices[e, 3]
    angle = dihedral_angle(x[i], x[j], x[k], x[l])
    c = angle - rest[e]
    # the isometric-bending shortcut: pull the two wing vertices towards the hinge
    mid = (x[k] + x[l]) * 0.5
    wi = inv_mass[i]
    wj = inv_mass[j]
    g = stiffness * c / wp.max(wi + wj, 1.0e-6)
    wp.atomic_add(delta, i, (mid - x[i]) * (g * wi))
    wp.atomic_add(delta, j, (mid - x[j]) * (g * wj))


@wp.kernel(module=PHYS)
def xpbd_solve_volume(x: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float),
                      indices: wp.array2d(dtype=int), rest_volume: wp.array(dtype=float), compliance: float,
                      dt: float, delta: wp.array(dtype=wp.vec3)):
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    l = indices[t, 3]
    x0 = x[i]
    x1 = x[j]
    x2 = x[k]
    x3 = x[l]
    vol = wp.dot(wp.cross(x1 - x0, x2 - x0), x3 - x0) / 6.0
    g1 = wp.cross(x3 - x2, x1 - x2) / 6.0
    g2 = wp.cross(x2 - x0, x3 - x0) / 6.0
    g3 = wp.cross(x3 - x0, x1 - x0) / 6.0
    g4 = wp.cross(x1 - x0, x2 - x0) / 6.0
    w = (inv_mass[i] * wp.dot(g1, g1) + inv_mass[j] * wp.dot(g2, g2) + inv_mass[k] * wp.dot(g3, g3)
         + inv_mass[l] * wp.dot(g4, g4))
    alpha = compliance / (dt * dt)
    if w + alpha < 1.0e-12:
        return
    dl = -(vol - rest_volume[t]) / (w + alpha)
    wp.atomic_add(delta, i, g1 * (dl * inv_mass[i]))
    wp.atomic_add(delta, j, g2 * (dl * inv_mass[j]))
    wp.atomic_add(delta, k, g3 * (dl * inv_mass[k]))
    wp.atomic_add(delta, l, g4 * (dl * inv_mass[l]))


@wp.kernel(module=PHYS)
def xpbd_solve_ground(x: wp.array(dtype=wp.vec3), x_prev: wp.array(dtype=wp.vec3), params: ModelParams,
                      delta: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    if params.inv_mass[i] == 0.0:
        return
    p = x[i]
    c = p[1] - params.particle_radius
    if c < 0.0:
        dx = wp.vec3(0.0, -c, 0.0)
        # static friction: undo the tangential motion of this step up to mu * penetration
        dp = p - x_prev[i]
        dt_ = wp.vec3(dp[0], 0.0, dp[2])
        lt = wp.length(dt_)
        if lt < params.ground_mu * -c:
            dx = dx - dt_
        else:
            dx = dx - dt_ * wp.min(params.ground_mu * -c / wp.max(lt, 1.0e-9), 1.0)
        wp.atomic_add(delta, i, dx)


@wp.kernel(module=PHYS)
def xpbd_apply_deltas(x: wp.array(dtype=wp.vec3), delta: wp.array(dtype=wp.vec3), relaxation: float,
                      x_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    x_out[i] = x[i] + delta[i] * relaxation
    delta[i] = wp.vec3(0.0)


@wp.kernel(module=PHYS)
def xpbd_update_velocities(x: wp.array(dtype=wp.vec3), x_prev: wp.array(dtype=wp.vec3), dt: float,
                           v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v[i] = (x[i] - x_prev[i]) / dt


# ---------------------------------------------------------------- SPH


@wp.kernel(module=PHYS)
def sph_density(grid: wp.uint64, x: wp.array(dtype=wp.vec3), mass: float, h: float, rho: wp.array(dtype=float)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    rho[i] = density_at(grid, x, x[i], mass, h)


@wp.kernel(module=PHYS)
def sph_pressure(rho: wp.array(dtype=float), k: float, gamma: float, p: wp.array(dtype=float)):
    i = wp.tid()
    p[i] = k * (wp.pow(wp.max(rho[i] / SPH_RHO0, 1.0e-6), gamma) - 1.0)


@wp.kernel(module=PHYS)
def sph_forces(grid: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
               rho: wp.array(dtype=float), p: wp.array(dtype=float), mass: float, h: float, mu: float,
               f: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    xi = x[i]
    fp = wp.vec3(0.0)
    fv = wp.vec3(0.0)
    query = wp.hash_grid_query(grid, xi, h)
    j = int(0)
    while wp.hash_grid_query_next(query, j):
        if j != i:
            r = xi - x[j]
            fp += sph_spiky_grad(r, h) * (-mass * (p[i] + p[j]) / (2.0 * rho[j]))
            fv += (v[j] - v[i]) * (mu * mass / rho[j] * sph_visc_laplacian(wp.length(r), h))
    f[i] = fp + fv


@wp.kernel(module=PHYS)
def sph_xsph_viscosity(grid: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                       rho: wp.array(dtype=float), mass: float, h: float, c: float,
                       v_out: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    xi = x[i]
    dv = wp.vec3(0.0)
    query = wp.hash_grid_query(grid, xi, h)
    j = int(0)
    while wp.hash_grid_query_next(query, j):
        d = xi - x[j]
        dv += (v[j] - v[i]) * (mass / rho[j] * sph_poly6(wp.dot(d, d), h))
    v_out[i] = v[i] + dv * c


@wp.kernel(module=PHYS)
def sph_surface_tension(grid: wp.uint64, x: wp.array(dtype=wp.vec3), rho: wp.array(dtype=float), mass: float,
                        h: float, sigma: float, f: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    xi = x[i]
    n = wp.vec3(0.0)
    for j in wp.hash_grid_query(grid, xi, h):
        if j != i:
            r = xi - x[j]
            q = wp.length(r) / (0.5 * h)
            n += safe_normalize(r) * (mass / rho[j] * cubic_spline(q))
    wp.atomic_add(f, i, -n * sigma)


@wp.kernel(module=PHYS)
def sph_density_error(grid: wp.uint64, x: wp.array(dtype=wp.vec3), mass: float, h: float,
                      err: wp.array(dtype=float)):
    i = wp.tid()
    rho = density_at(grid, x, x[i], mass, h)
    wp.atomic_add(err, 0, wp.abs(rho - SPH_RHO0) / SPH_RHO0)
    wp.atomic_max(err, 1, rho)


@wp.kernel(module=PHYS)
def sph_boundary_mesh(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), h: float,
                      restitution: float):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, x[i], h)
    if q.result:
        cp = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        n = safe_normalize(x[i] - cp)
        d = wp.length(x[i] - cp)
        if d < 0.5 * h:
            x[i] = cp + n * (0.5 * h)
            vn = wp.dot(v[i], n)
            if vn < 0.0:
                v[i] = v[i] - n * ((1.0 + restitution) * vn)


# ---------------------------------------------------------------- rigid bodies


@wp.kernel(module=PHYS)
def integrate_bodies(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                     body_f: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3),
                     m: wp.array(dtype=float), I: wp.array(dtype=wp.mat33), inv_m: wp.array(dtype=float),
                     inv_I: wp.array(dtype=wp.mat33), gravity: wp.vec3, angular_damping: float, dt: float,
                     body_q_new: wp.array(dtype=wp.transform), body_qd_new: wp.array(dtype=wp.spatial_vector)):
    tid = wp.tid()
    q = body_q[tid]
    qd = body_qd[tid]
    f = body_f[tid]
    x0 = wp.transform_get_translation(q)
    r0 = wp.transform_get_rotation(q)
    w0 = wp.spatial_top(qd)
    v0 = wp.spatial_bottom(qd)
    t0 = wp.spatial_top(f)
    f0 = wp.spatial_bottom(f)
    x_com = x0 + wp.quat_rotate(r0, body_com[tid])
    v1 = v0 + (f0 * inv_m[tid] + gravity * wp.nonzero(inv_m[tid])) * dt
    x1 = x_com + v1 * dt
    wb = wp.quat_rotate_inv(r0, w0)
    tb = wp.quat_rotate_inv(r0, t0) - wp.cross(wb, I[tid] * wb)
    w1 = wp.quat_rotate(r0, wb + inv_I[tid] * tb * dt)
    r1 = integrate_rotation(r0, w1, dt)
    w1 = w1 * (1.0 - angular_damping * dt)
    body_q_new[tid] = wp.transform(x1 - wp.quat_rotate(r1, body_com[tid]), r1)
    body_qd_new[tid] = wp.spatial_vector(w1, v1)


@wp.kernel(module=PHYS)
def eval_body_joints(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                     joint_parent: wp.array(dtype=int), joint_child: wp.array(dtype=int),
                     joint_X_p: wp.array(dtype=wp.transform), joint_X_c: wp.array(dtype=wp.transform),
                     joint_axis: wp.array(dtype=wp.vec3), joint_target: wp.array(dtype=float), ke: float,
                     kd: float, body_f: wp.array(dtype=wp.spatial_vector)):
    tid = wp.tid()
    c = joint_child[tid]
    p = joint_parent[tid]
    X_wp = joint_X_p[tid]
    w_p = wp.vec3(0.0)
    v_p = wp.vec3(0.0)
    if p >= 0:
        X_wp = body_q[p] * X_wp
        w_p = wp.spatial_top(body_qd[p])
        v_p = wp.spatial_bottom(body_qd[p])
    X_wc = body_q[c] * joint_X_c[tid]
    x_p = wp.transform_get_translation(X_wp)
    x_c = wp.transform_get_translation(X_wc)
    q_p = wp.transform_get_rotation(X_wp)
    q_c = wp.transform_get_rotation(X_wc)
    w_c = wp.spatial_top(body_qd[c])
    v_c = wp.spatial_bottom(body_qd[c])
    axis = wp.quat_rotate(q_p, joint_axis[tid])
    # relative rotation about the joint axis (revolute), as an angle
    q_rel = wp.quat_inverse(q_p) * q_c
    ang = 2.0 * wp.atan2(wp.dot(wp.vec3(q_rel[0], q_rel[1], q_rel[2]), joint_axis[tid]), q_rel[3])
    t_drive = axis * (-ke * (ang - joint_target[tid]) - kd * wp.dot(w_c - w_p, axis))
    f_lin = (x_p - x_c) * ke * 10.0 + (v_p - v_c) * kd
    # angular error off the axis
    e_ang = wp.cross(axis, wp.quat_rotate(q_c, joint_axis[tid]))
    t_total = t_drive + e_ang * ke
    r_c = x_c - wp.transform_get_translation(body_q[c])
    wp.atomic_add(body_f, c, wp.spatial_vector(t_total + wp.cross(r_c, f_lin), f_lin))
    if p >= 0:
        r_p = x_p - wp.transform_get_translation(body_q[p])
        wp.atomic_sub(body_f, p, wp.spatial_vector(t_total + wp.cross(r_p, f_lin), f_lin))


@wp.kernel(module=PHYS)
def body_ground_contacts(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                         shape_body: wp.array(dtype=int), shape_X_bs: wp.array(dtype=wp.transform),
                         shape_scale: wp.array(dtype=wp.vec3), params: ModelParams,
                         body_f: wp.array(dtype=wp.spatial_vector)):
    s, corner = wp.tid()
    b = shape_body[s]
    X_ws = body_q[b] * shape_X_bs[s]
    h = shape_scale[s]
    sx = float(corner & 1) * 2.0 - 1.0
    sy = float((corner >> 1) & 1) * 2.0 - 1.0
    sz = float((corner >> 2) & 1) * 2.0 - 1.0
    p = wp.transform_point(X_ws, wp.vec3(sx * h[0], sy * h[1], sz * h[2]))
    c = p[1]
    if c >= 0.0:
        return
    r = p - wp.transform_get_translation(body_q[b])
    vp = velocity_at_point(body_qd[b], r)
    fc = contact_force(wp.vec3(0.0, 1.0, 0.0), vp, c, params.ground_ke, params.ground_kd, params.ground_kf,
                       params.ground_mu)
    wp.atomic_add(body_f, b, wp.spatial_vector(wp.cross(r, fc), fc))


@wp.kernel(module=PHYS)
def body_sphere_pairs(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                      radius: wp.array(dtype=float), pairs: wp.array2d(dtype=int), ke: float, kd: float,
                      body_f: wp.array(dtype=wp.spatial_vector)):
    tid = wp.tid()
    a = pairs[tid, 0]
    b = pairs[tid, 1]
    xa = wp.transform_get_translation(body_q[a])
    xb = wp.transform_get_translation(body_q[b])
    d = xa - xb
    l = wp.length(d)
    c = l - radius[a] - radius[b]
    if c >= 0.0:
        return
    n = safe_normalize(d)
    vrel = wp.spatial_bottom(body_qd[a]) - wp.spatial_bottom(body_qd[b])
    fn = n * (-ke * c - kd * wp.min(wp.dot(n, vrel), 0.0))
    wp.atomic_add(body_f, a, wp.spatial_vector(wp.vec3(0.0), fn))
    wp.atomic_sub(body_f, b, wp.spatial_vector(wp.vec3(0.0), fn))


@wp.kernel(module=PHYS)
def body_particle_contacts(body_q: wp.array(dtype=wp.transform), shape_body: wp.array(dtype=int),
                           shape_scale: wp.array(dtype=wp.vec3), x: wp.array(dtype=wp.vec3),
                           v: wp.array(dtype=wp.vec3), params: ModelParams, f: wp.array(dtype=wp.vec3),
                           body_f: wp.array(dtype=wp.spatial_vector)):
    i, s = wp.tid()
    b = shape_body[s]
    X = body_q[b]
    pl = wp.transform_point(wp.transform_inverse(X), x[i])
    d = sdf_box(pl, shape_scale[s]) - params.particle_radius
    if d >= 0.0:
        return
    n = wp.transform_vector(X, sdf_box_grad(pl, shape_scale[s]))
    fc = contact_force(n, v[i], d, params.ground_ke, params.ground_kd, params.ground_kf, params.ground_mu)
    wp.atomic_add(f, i, fc)
    r = x[i] - wp.transform_get_translation(X)
    wp.atomic_sub(body_f, b, wp.spatial_vector(wp.cross(r, fc), fc))


@wp.kernel(module=PHYS)
def transform_shape_points(body_q: wp.array(dtype=wp.transform), point_body: wp.array(dtype=int),
                           local: wp.array(dtype=wp.vec3), world: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    world[i] = wp.transform_point(body_q[point_body[i]], local[i])


@wp.kernel(module=PHYS)
def body_energy(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                m: wp.array(dtype=float), I: wp.array(dtype=wp.mat33), gravity: wp.vec3,
                energy: wp.array(dtype=float), momentum: wp.array(dtype=wp.vec3)):
    b = wp.tid()
    r = wp.transform_get_rotation(body_q[b])
    w = wp.quat_rotate_inv(r, wp.spatial_top(body_qd[b]))
    v = wp.spatial_bottom(body_qd[b])
    ke = 0.5 * m[b] * wp.dot(v, v) + 0.5 * wp.dot(w, I[b] * w)
    pe = -m[b] * wp.dot(gravity, wp.transform_get_translation(body_q[b]))
    wp.atomic_add(energy, 0, ke)
    wp.atomic_add(energy, 1, pe)
    wp.atomic_add(momentum, 0, v * m[b])
    wp.atomic_add(momentum, 1, wp.quat_rotate(r, I[b] * w))


@wp.kernel(module=PHYS)
def body_quat_to_matrix(body_q: wp.array(dtype=wp.transform), rot: wp.array(dtype=wp.mat33),
                        angles: wp.array(dtype=wp.vec3)):
    b = wp.tid()
    q = wp.transform_get_rotation(body_q[b])
    R = wp.quat_to_matrix(q)
    rot[b] = R
    angles[b] = wp.vec3(wp.atan2(R[2, 1], R[2, 2]), wp.asin(wp.clamp(-R[2, 0], -1.0, 1.0)),
                        wp.atan2(R[1, 0], R[0, 0]))


# ---------------------------------------------------------------- energies and random states


@wp.kernel(module=PHYS)
def particle_energy(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), params: ModelParams,
                    energy: wp.array(dtype=float), momentum: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    w = params.inv_mass[i]
    if w == 0.0:
        return
    m = 1.0 / w
    wp.atomic_add(energy, 0, 0.5 * m * wp.dot(v[i], v[i]))
    wp.atomic_add(energy, 1, -m * wp.dot(params.gravity, x[i]))
    wp.atomic_add(momentum, 0, v[i] * m)
    wp.atomic_add(momentum, 1, wp.cross(x[i], v[i]) * m)


@wp.kernel(module=PHYS)
def init_particles_random(seed: int, lower: wp.vec3, upper: wp.vec3, v_scale: float,
                          x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    x[i] = wp.vec3(wp.randf(state, lower[0], upper[0]), wp.randf(state, lower[1], upper[1]),
                   wp.randf(state, lower[2], upper[2]))
    v[i] = wp.vec3(wp.randn(state), wp.randn(state), wp.randn(state)) * v_scale


@wp.kernel(module=PHYS)
def init_particles_sphere(seed: int, center: wp.vec3, radius: float, x: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    x[i] = center + wp.sample_unit_sphere(state) * radius


@wp.kernel(module=PHYS)
def brownian_forces(seed: int, step: int, temperature: float, f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    state = wp.rand_init(seed + step * 7919, i)
    f[i] = f[i] + wp.sample_unit_sphere_surface(state) * (temperature * wp.sqrt(wp.abs(wp.randn(state))))


@wp.kernel(module=PHYS)
def wind_field(seed: int, time: float, x: wp.array(dtype=wp.vec3), strength: float, f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = x[i] * 0.5 + wp.vec3(time, 0.0, 0.0)
    s = wp.uint32(seed)
    g = wp.vec3(fbm(s, p, 4), fbm(s + wp.uint32(17), p, 4), fbm(s + wp.uint32(43), p, 4))
    f[i] = f[i] + g * strength


@wp.kernel(module=PHYS)
def jitter_positions(seed: int, amount: float, x: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    state = wp.rand_init(seed, i)
    d = wp.vec4(wp.randf(state), wp.randf(state), wp.randf(state), wp.randf(state))
    k = smooth_min(d, 8.0)
    x[i] = x[i] + wp.vec3(d[0] - 0.5, d[1] - 0.5, d[2] - 0.5) * (amount * k)


# ---------------------------------------------------------------- families made by closures


def make_integrator(name, order, damping, module=PHYS):
    """A semi-implicit (order 1) or velocity-Verlet-like (order 2) integrator with its constants baked in."""
    def kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
               f_prev: wp.array(dtype=wp.vec3), inv_mass: wp.array(dtype=float), gravity: wp.vec3, dt: float):
        i = wp.tid()
        w = inv_mass[i]
        a = f[i] * w + gravity * wp.nonzero(w)
        if wp.static(order == 2):
            a_prev = f_prev[i] * w + gravity * wp.nonzero(w)
            x[i] = x[i] + v[i] * dt + a_prev * (0.5 * dt * dt)
            v[i] = (v[i] + (a + a_prev) * (0.5 * dt)) * (1.0 - damping * dt)
        else:
            v1 = (v[i] + a * dt) * (1.0 - damping * dt)
            x[i] = x[i] + v1 * dt
            v[i] = v1
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


def make_shape_contact(name, shape, size, module=PHYS):
    """Particle contacts against one analytic shape at the origin of a body frame."""
    s0, s1, s2 = (list(size) + [0.0, 0.0])[:3]
    def kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), X: wp.transform, params: ModelParams,
               f: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        p = wp.transform_point(wp.transform_inverse(X), x[i])
        d = float(0.0)
        n = wp.vec3(0.0)
        if wp.static(shape == "box"):
            h = wp.vec3(s0, s1, s2)
            d = sdf_box(p, h)
            n = sdf_box_grad(p, h)
        elif wp.static(shape == "capsule"):
            d = sdf_capsule(p, s0, s1)
            n = safe_normalize(p - closest_point_segment(wp.vec3(0.0, -s1, 0.0), wp.vec3(0.0, s1, 0.0), p))
        else:
            d = wp.length(p) - s0
            n = safe_normalize(p)
        c = wp.min(d - params.particle_radius, 0.0)
        n = wp.transform_vector(X, n)
        fc = contact_force(n, v[i], c, params.ground_ke, params.ground_kd, params.ground_kf, params.ground_mu)
        wp.atomic_add(f, i, fc)
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


def make_spring_family(name, ke, kd, module=PHYS):
    """Springs of one material, the constants baked in (one kernel per cloth material)."""
    def kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), indices: wp.array2d(dtype=int),
               rest: wp.array(dtype=float), f: wp.array(dtype=wp.vec3), energy: wp.array(dtype=float)):
        s = wp.tid()
        a = indices[s, 0]
        b = indices[s, 1]
        fs = spring_force(x[a], x[b], v[a], v[b], rest[s], ke, kd)
        wp.atomic_add(f, a, fs)
        wp.atomic_sub(f, b, fs)
        c = wp.length(x[a] - x[b]) - rest[s]
        wp.atomic_add(energy, 0, 0.5 * ke * c * c)
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


def make_sph_density(name, smoothing, module=PHYS):
    """SPH density with one smoothing kernel, over the hash grid (explicit query_next loop)."""
    def kernel(grid: wp.uint64, x: wp.array(dtype=wp.vec3), mass: float, h: float, rho: wp.array(dtype=float)):
        tid = wp.tid()
        i = wp.hash_grid_point_id(grid, tid)
        xi = x[i]
        s = float(0.0)
        query = wp.hash_grid_query(grid, xi, h)
        j = int(0)
        while wp.hash_grid_query_next(query, j):
            r = wp.length(xi - x[j])
            if wp.static(smoothing == "poly6"):
                s += sph_poly6(r * r, h)
            elif wp.static(smoothing == "cubic"):
                s += cubic_spline(2.0 * r / h) * (8.0 / (wp.pi * h * h * h))
            else:
                q = wp.max(1.0 - r / h, 0.0)
                s += q * q * q * q * (1.0 + 4.0 * r / h) * (21.0 / (2.0 * wp.pi * h * h * h))
        rho[i] = s * mass
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


def make_plane_contact(name, normal, offset, module=PHYS):
    """Particles against one wall of a container, its plane baked in."""
    nx, ny, nz = (float(c) for c in normal)
    def kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), params: ModelParams,
               f: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        n = wp.normalize(wp.vec3(nx, ny, nz))
        c = wp.min(wp.dot(n, x[i]) - offset - params.particle_radius, 0.0)
        fc = contact_force(n, v[i], c, params.ground_ke, params.ground_kd, params.ground_kf, params.ground_mu)
        wp.atomic_add(f, i, fc)
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


def make_body_integrator(name, substeps, module=PHYS):
    """Free rigid bodies advanced in a fixed number of substeps (quaternion integration in a loop)."""
    def kernel(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
               gravity: wp.vec3, dt: float):
        b = wp.tid()
        q = body_q[b]
        qd = body_qd[b]
        x = wp.transform_get_translation(q)
        r = wp.transform_get_rotation(q)
        w = wp.spatial_top(qd)
        v = wp.spatial_bottom(qd)
        h = dt / float(substeps)
        for k in range(substeps):
            v = v + gravity * h
            x = x + v * h
            r = integrate_rotation(r, w, h)
        body_q[b] = wp.transform(x, r)
        body_qd[b] = wp.spatial_vector(w, v)
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


def make_field_sampler(name, octaves, module=PHYS):
    """A noise field sampled at every particle with a given number of octaves."""
    def kernel(seed: int, x: wp.array(dtype=wp.vec3), scale: float, out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = fbm(wp.uint32(seed), x[i] * scale, octaves)
    kernel.__name__ = kernel.__qualname__ = name
    return wp.kernel(kernel, module=module)


# the kernels a factory makes stay referenced here: Warp forgets a kernel
# nobody holds
FAMILIES = []
for _k, (_order, _damp) in enumerate([(1, 0.0), (1, 0.05), (1, 0.5), (2, 0.0), (2, 0.02), (2, 0.2)]):
    FAMILIES.append(make_integrator(f"integrate_order{_order}_{_k}", _order, _damp))
for _k, (_shape, _size) in enumerate([("box", (0.5, 0.5, 0.5)), ("box", (2.0, 0.1, 2.0)), ("box", (0.2, 1.0, 0.2)),
                                      ("capsule", (0.25, 0.75)), ("capsule", (0.1, 2.0)),
                                      ("sphere", (1.0,)), ("sphere", (0.3,))]):
    FAMILIES.append(make_shape_contact(f"shape_contact_{_shape}_{_k}", _shape, _size))
for _k, (_ke, _kd) in enumerate([(1.0e3, 1.0), (5.0e3, 10.0), (2.0e4, 5.0), (1.0e5, 50.0)]):
    FAMILIES.append(make_spring_family(f"springs_material_{_k}", _ke, _kd))
for _smoothing in ["poly6", "cubic", "wendland"]:
    FAMILIES.append(make_sph_density(f"sph_density_{_smoothing}", _smoothing))
for _k, (_n, _o) in enumerate([((1, 0, 0), -2.0), ((-1, 0, 0), -2.0), ((0, 0, 1), -2.0), ((0, 0, -1), -2.0),
                               ((0, -1, 0), -4.0), ((1, 1, 0), -3.0)]):
    FAMILIES.append(make_plane_contact(f"wall_contact_{_k}", _n, _o))
for _s in [1, 2, 4, 8]:
    FAMILIES.append(make_body_integrator(f"integrate_bodies_sub{_s}", _s))
for _o in [2, 3, 5]:
    FAMILIES.append(make_field_sampler(f"noise_field_oct{_o}", _o))

# ---------------------------------------------------------------- physics_small.lineinfo

FAMILIES += [
    make_integrator("small_integrate", 1, 0.01, SMALL),
    make_shape_contact("small_sphere_contact", "sphere", (0.5,), SMALL),
    make_spring_family("small_springs", 2.0e3, 2.0, SMALL),
    make_sph_density("small_sph_density", "poly6", SMALL),
    make_body_integrator("small_integrate_bodies", 2, SMALL),
]


@wp.kernel(module=SMALL)
def small_mesh_contacts(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), radius: float, f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, x[i], 2.0 * radius)
    if q.result:
        cp = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        d = x[i] - cp
        c = wp.length(d) - radius
        if c < 0.0:
            f[i] = f[i] - safe_normalize(d) * (1.0e3 * c)


# ---------------------------------------------------------------- tiles

TILE = 128


@wp.func
def soft_clip(x: float):
    return x / (1.0 + wp.abs(x))


@wp.func
def max_abs(a: float, b: float):
    return wp.max(wp.abs(a), wp.abs(b))


@wp.func
def safe_div(a: float, b: float):
    return a / wp.max(b, 1.0e-12)


@wp.func
def root(x: float):
    return wp.sqrt(wp.max(x, 0.0))


@wp.kernel(module=TILES)
def tile_row_sums(a: wp.array2d(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a[i], shape=TILE)
    s = wp.tile_sum(t)
    wp.tile_store(out, s, offset=i)


@wp.kernel(module=TILES)
def tile_activation(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a, shape=TILE, offset=i * TILE)
    u = wp.tile_map(soft_clip, t)
    v = wp.tile_map(wp.mul, u, t)
    wp.tile_store(b, v, offset=i * TILE)


@wp.kernel(module=TILES)
def tile_max_abs(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a, shape=TILE, offset=i * TILE)
    m = wp.tile_reduce(max_abs, t)
    wp.tile_atomic_add(out, m)


@wp.kernel(module=TILES)
def tile_prefix_sum(a: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a, shape=TILE, offset=i * TILE)
    s = wp.tile_scan_inclusive(t)
    wp.tile_store(out, s, offset=i * TILE)


@wp.kernel(module=TILES, enable_backward=False)
def tile_sort_keys(keys: wp.array(dtype=float), values: wp.array(dtype=int), keys_out: wp.array(dtype=float),
                   values_out: wp.array(dtype=int)):
    i = wp.tid()
    k = wp.tile_load(keys, shape=TILE, offset=i * TILE, storage="shared")
    v = wp.tile_load(values, shape=TILE, offset=i * TILE, storage="shared")
    wp.tile_sort(k, v)
    wp.tile_store(keys_out, k, offset=i * TILE)
    wp.tile_store(values_out, v, offset=i * TILE)


@wp.kernel(module=TILES)
def tile_normalize_rows(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a, shape=(1, TILE), offset=(i, 0))
    sq = wp.tile_map(wp.mul, t, t)
    n = wp.tile_sum(sq)
    norm = wp.tile_map(root, n)
    r = wp.tile_map(safe_div, t, wp.tile_broadcast(norm, shape=(1, TILE)))
    wp.tile_store(b, r, offset=(i, 0))


@wp.kernel(module=TILES)
def tile_from_threads(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    v = wp.length(x[i])
    t = wp.tile(v)
    s = wp.tile_max(t)
    wp.tile_atomic_add(out, s)


# ---------------------------------------------------------------- tiles_matmul
# tile_matmul goes through libmathdx (cuBLASDx), which Warp links as LTO-IR
# with nvJitLink before writing PTX: that module's PTX is nvJitLink's.

MM = 32


@wp.func
def tanh_act(x: float):
    return wp.tanh(x)


@wp.kernel(module=TILES_MM)
def tile_gemm(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(MM, MM), dtype=float)
    count = a.shape[1] // MM
    for k in range(count):
        x = wp.tile_load(a, shape=(MM, MM), offset=(i * MM, k * MM))
        y = wp.tile_load(b, shape=(MM, MM), offset=(k * MM, j * MM))
        wp.tile_matmul(x, y, acc)
    wp.tile_store(c, acc, offset=(i * MM, j * MM))


@wp.kernel(module=TILES_MM)
def tile_mlp_layer(w: wp.array2d(dtype=float), x: wp.array2d(dtype=float), bias: wp.array2d(dtype=float),
                   y: wp.array2d(dtype=float)):
    i = wp.tid()
    wt = wp.tile_load(w, shape=(MM, MM))
    xt = wp.tile_load(x, shape=(MM, MM), offset=(0, i * MM))
    bt = wp.tile_load(bias, shape=(MM, 1))
    z = wp.tile_matmul(wt, xt) + wp.tile_broadcast(bt, shape=(MM, MM))
    wp.tile_store(y, wp.tile_map(tanh_act, z), offset=(0, i * MM))


# ---------------------------------------------------------------- single-kernel modules

FAMILIES.append(make_integrator("single_integrate", 2, 0.01, wp.get_module("single_integrate")))


@wp.kernel(module=wp.get_module("single_sph_forces"))
def single_sph_forces(grid: wp.uint64, x: wp.array(dtype=wp.vec3), rho: wp.array(dtype=float),
                      p: wp.array(dtype=float), mass: float, h: float, f: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    i = wp.hash_grid_point_id(grid, tid)
    fi = wp.vec3(0.0)
    for j in wp.hash_grid_query(grid, x[i], h):
        if j != i:
            fi += sph_spiky_grad(x[i] - x[j], h) * (-mass * (p[i] + p[j]) / (2.0 * rho[j]))
    f[i] = fi


@wp.kernel(module=wp.get_module("single_mesh_contacts"))
def single_mesh_contacts(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                         params: ModelParams, f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, x[i], 4.0 * params.particle_radius)
    if q.result:
        cp = wp.mesh_eval_position(mesh, q.face, q.u, q.v)
        d = x[i] - cp
        c = wp.min(wp.length(d) - params.particle_radius, 0.0)
        f[i] = f[i] + contact_force(safe_normalize(d), v[i], c, params.ground_ke, params.ground_kd,
                                    params.ground_kf, params.ground_mu)


# ---------------------------------------------------------------- driver


def compile_module(module, name, outdir, options):
    for k, val in options.items():
        module.options[k] = val
    with tempfile.TemporaryDirectory(prefix="gen_warp.") as tmp:
        wp.compile_aot_module(module, arch=ARCH, module_dir=tmp, use_ptx=True)
        found = glob.glob(os.path.join(tmp, f"*.sm{ARCH}.ptx"))
        if len(found) != 1:
            sys.exit(f"gen_warp: expected one PTX file for {name}, found {found}")
        dst = os.path.join(outdir, name + ".ptx")
        shutil.copyfile(found[0], dst)
    with open(dst, "rb") as f:
        data = f.read()
    print(f"{name}.ptx: {data.count(b'.entry ')} entries, {len(data)} bytes")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    compile_module(PHYS, "physics_step", outdir, {})
    compile_module(SMALL, "physics_small.lineinfo", outdir, {"lineinfo": True})
    compile_module(TILES, "tiles", outdir, {"block_dim": TILE})
    compile_module(TILES_MM, "tiles_matmul", outdir, {"block_dim": 64})
    for name in SINGLES:
        compile_module(wp.get_module(name), name, outdir, {})


if __name__ == "__main__":
    main()
