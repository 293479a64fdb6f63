#!/usr/bin/env python3
"""intercept_check.py -- `taskcache run` with real JITs on a GPU machine.

For each JIT that hands PTX to the CUDA driver, fresh processes with and
without `taskcache run`, the same inputs, results hashed:

  physics    a Genesis-like physics step in Quadrants, one kernel of 20
             substeps whose top-level loops are 220 offloaded tasks: first
             call cold (empty Quadrants and driver caches), warm, after
             editing one task, and with Quadrants' own cache off, each with
             and without taskcache, three times (medians); the time the
             driver (TASKCACHE_INTERCEPT=measure) or taskcache spends turning
             PTX into machine code, from the log
  quadrants  the same with a kernel of N one-line loops (default 200)
  cupy       a RawModule of 24 kernels compiled by NVRTC to PTX
             (CUPY_COMPILE_WITH_PTX=1) and loaded with cuModuleLoadData
  cudacore   NVIDIA's cuda.core: NVRTC compiles 16 kernels to PTX, and
             ObjectCode.get_kernel loads it (cuLibraryLoadData)
  drvlink    12 kernels (nvcc PTX) linked with the driver's linker through
             ctypes (cuLinkAddData + cuLinkComplete); the kernels' register
             counts are part of the results
  torch      PyTorch's torch.cuda._compile_kernel (NVRTC)
  numba      numba-cuda kernels (NVVM -> PTX -> a linker: the driver's, or
             nvJitLink where cuda.core finds it)

A JIT whose PTX never reaches the driver (it makes machine code itself) is
reported as such, with its results checked under taskcache run.

Results must be identical with and without taskcache, also with
--whole-program-units; a second process under taskcache must compile
nothing. Prints a table last and writes
OUT/intercept.json. Exit status 0 when every check holds, 1 otherwise, 2 when
a JIT is missing (reported, not failed: --need NAME to make it fail).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

# ---- the JIT programs (each run in a fresh process) ---------------------------------------

PHYSICS = r'''
import hashlib, importlib.util, json, sys, time
import numpy as np
import quadrants as qd
kernel_path, cache_dir = sys.argv[1], sys.argv[2]
qd.init(arch=qd.cuda, default_fp=qd.f32, offline_cache=cache_dir != "-", **({"offline_cache_file_path": cache_dir} if cache_dir != "-" else {}))
spec = importlib.util.spec_from_file_location("physics", kernel_path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
mod.fields()
mod.init()
qd.sync()
t0 = time.time()
mod.step(1e-3)
qd.sync()
first = time.time() - t0
h = hashlib.sha256()
for f in (mod.pos, mod.vel, mod.contacts):
    h.update(f.to_numpy().tobytes())
print(json.dumps({"first_call": first, "t0": t0, "hash": h.hexdigest()}))
'''

QUADRANTS = r'''
import hashlib, importlib.util, json, sys, time
t_import = time.time()
import numpy as np
import quadrants as qd
kernel_path, cache_dir, ntasks = sys.argv[1], sys.argv[2], int(sys.argv[3])
qd.init(arch=qd.cuda, offline_cache=cache_dir != "-", **({"offline_cache_file_path": cache_dir} if cache_dir != "-" else {}))
spec = importlib.util.spec_from_file_location("kern", kernel_path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
n = 4096
a = qd.ndarray(qd.f32, (ntasks * n,))
a.from_numpy(np.linspace(-1, 1, ntasks * n, dtype=np.float32))
t0 = time.time()
mod.step(a, n)
qd.sync()
first = time.time() - t0
print(json.dumps({"first_call": first, "t0": t0,
                  "hash": hashlib.sha256(a.to_numpy().tobytes()).hexdigest()}))
'''

CUPY = r'''
import hashlib, json, sys, time
import cupy as cp
src = "\n".join(
    f'extern "C" __global__ void k{i}(float *x, int n) {{ int t = blockIdx.x * blockDim.x + threadIdx.x;'
    f' if (t < n) x[t] = x[t] * {1.0 + i * 0.01}f + sinf(x[t]) * {i % 5 + 1}.0f; }}'
    for i in range(24))
t0 = time.time()
mod = cp.RawModule(code=src)
x = cp.linspace(-1, 1, 1 << 16, dtype=cp.float32)
for i in range(24):
    mod.get_function(f"k{i}")((256,), (256,), (x, cp.int32(x.size)))
cp.cuda.Device().synchronize()
print(json.dumps({"first_call": time.time() - t0, "hash": hashlib.sha256(x.get().tobytes()).hexdigest()}))
'''

# NVIDIA's cuda.core (cuda-python): NVRTC compiles C++ to PTX, and
# ObjectCode.get_kernel hands the PTX to the driver (cuLibraryLoadData)
CUDACORE = r'''
import hashlib, json, sys, time
import numpy as np
import cupy as cp
try:
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
except ImportError:
    from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
dev = Device()
dev.set_current()
stream = dev.create_stream()
src = "\n".join(
    f'extern "C" __global__ void k{i}(float *x, int n) {{ int t = blockIdx.x * blockDim.x + threadIdx.x;'
    f' if (t < n) x[t] = x[t] * {1.0 - i * 0.01}f + cosf(x[t]) * {i % 3 + 1}.0f; }}'
    for i in range(16))
x = cp.linspace(-1, 1, 1 << 16, dtype=cp.float32)
cp.cuda.Device().synchronize()
t0 = time.time()
obj = Program(src, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile("ptx")
for i in range(16):
    launch(stream, LaunchConfig(grid=256, block=256), obj.get_kernel(f"k{i}"),
           np.uint64(x.data.ptr), np.int32(x.size))
stream.sync()
print(json.dumps({"first_call": time.time() - t0, "hash": hashlib.sha256(x.get().tobytes()).hexdigest()}))
'''

# A JIT that links its PTX with the driver's linker (cuLinkAddData +
# cuLinkComplete), the way numba-cuda does without libnvJitLink: the driver
# compiles a link's PTX as relocatable code (ptxas -c), whose code differs
# from a whole-program compile, so the kernels' register counts are part
# of the result
DRVLINK = r'''
import ctypes as C, hashlib, json, os, subprocess, sys, tempfile, time
import numpy as np
src = "__device__ __noinline__ float bend(float v, int k) { return v * (1.0f + 0.01f * k) - sinf(v); }\n" + "\n".join(
    f'extern "C" __global__ void k{i}(float *x, int n) {{ int t = blockIdx.x * blockDim.x + threadIdx.x;'
    f' if (t < n) {{ float v = x[t]; for (int j = 0; j < {i % 4 + 2}; j++) v = bend(v, j + {i}); x[t] = v; }} }}'
    for i in range(12))
d = tempfile.mkdtemp()
with open(os.path.join(d, "k.cu"), "w") as f:
    f.write(src)
subprocess.run(["nvcc", "-arch=sm_90", "-ptx", os.path.join(d, "k.cu"), "-o", os.path.join(d, "k.ptx")], check=True)
ptx = open(os.path.join(d, "k.ptx"), "rb").read()
L = C.CDLL("libcuda.so.1")
V = C.c_void_p
def ok(rc, what):
    if rc:
        raise SystemExit(f"{what}: CUDA error {rc}")
ok(L.cuInit(0), "cuInit")
dev, ctx = C.c_int(), V()
ok(L.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
ok(L.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(L.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
x = np.linspace(-1, 1, 1 << 16).astype(np.float32)
buf = C.c_uint64()
ok(L.cuMemAlloc_v2(C.byref(buf), C.c_size_t(x.nbytes)), "cuMemAlloc")
ok(L.cuMemcpyHtoD_v2(buf, x.ctypes.data_as(V), C.c_size_t(x.nbytes)), "cuMemcpyHtoD")
t0 = time.time()
state, image, size, module = V(), V(), C.c_size_t(), V()
ok(L.cuLinkCreate_v2(0, None, None, C.byref(state)), "cuLinkCreate")
text = C.create_string_buffer(ptx)
ok(L.cuLinkAddData_v2(state, 1, text, C.c_size_t(len(ptx) + 1), b"k.ptx", 0, None, None), "cuLinkAddData")
ok(L.cuLinkComplete(state, C.byref(image), C.byref(size)), "cuLinkComplete")
ok(L.cuModuleLoadData(C.byref(module), image), "cuModuleLoadData")
ok(L.cuLinkDestroy(state), "cuLinkDestroy")
regs = []
n = C.c_int(x.size)
params = (V * 2)(C.cast(C.pointer(buf), V), C.cast(C.pointer(n), V))
for i in range(12):
    fn, r = V(), C.c_int()
    ok(L.cuModuleGetFunction(C.byref(fn), module, f"k{i}".encode()), "cuModuleGetFunction")
    ok(L.cuFuncGetAttribute(C.byref(r), 4, fn), "cuFuncGetAttribute")  # registers
    regs.append(r.value)
    ok(L.cuLaunchKernel(fn, 256, 1, 1, 256, 1, 1, 0, None, params, None), "cuLaunchKernel")
ok(L.cuCtxSynchronize(), "cuCtxSynchronize")
ok(L.cuMemcpyDtoH_v2(x.ctypes.data_as(V), buf, C.c_size_t(x.nbytes)), "cuMemcpyDtoH")
h = hashlib.sha256(x.tobytes() + json.dumps(regs).encode()).hexdigest()
print(json.dumps({"first_call": time.time() - t0, "hash": h, "registers": regs}))
'''

# PyTorch's NVRTC kernels (torch.cuda._compile_kernel)
TORCH = r'''
import hashlib, json, sys, time
import torch
src = "\n".join(
    f'extern "C" __global__ void k{i}(float *x, int n) {{ int t = blockIdx.x * blockDim.x + threadIdx.x;'
    f' if (t < n) x[t] = x[t] * {1.0 + i * 0.02}f - tanhf(x[t]) * {i % 4 + 1}.0f; }}'
    for i in range(16))
x = torch.linspace(-1, 1, 1 << 16, dtype=torch.float32, device="cuda")
torch.cuda.synchronize()
t0 = time.time()
for i in range(4):
    k = torch.cuda._compile_kernel(src, f"k{i}")
    k(grid=(256, 1, 1), block=(256, 1, 1), args=[x, x.numel()])
torch.cuda.synchronize()
print(json.dumps({"first_call": time.time() - t0, "hash": hashlib.sha256(x.cpu().numpy().tobytes()).hexdigest()}))
'''

NUMBA = r'''
import hashlib, json, math, sys, time
import numpy as np
from numba import cuda
@cuda.jit
def scale(x, f):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * f + math.sin(x[i])
@cuda.jit
def square(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * x[i] - 0.25
t0 = time.time()
x = cuda.to_device(np.linspace(-1, 1, 1 << 16).astype(np.float32))
scale[256, 256](x, np.float32(1.5))
square[256, 256](x)
cuda.synchronize()
print(json.dumps({"first_call": time.time() - t0, "hash": hashlib.sha256(x.copy_to_host().tobytes()).hexdigest()}))
'''


def physics_kernel(substeps, edit=-1):
    """A Genesis-like step: SUBSTEPS substeps of particles, an SPH density
    and pressure pass, rigid bodies and contacts; every top-level loop of a
    substep is an offloaded task (11 a substep). The edit changes one task:
    the position update of substep `edit`. Deterministic (no random numbers,
    no float atomics) so that results can be compared bit for bit: the
    corpus's tests/realworld/gen/quadrants/physics_qd.py, whose dumped PTX
    is kept, is the same engine with random initial state and an energy sum
    by float atomics, which is why it is not imported here."""
    return textwrap.dedent(f'''
        import quadrants as qd

        SUBSTEPS, N, NB, EDIT = {substeps}, 4096, 64, {edit}
        pos = vel = force = rho = pres = mass = bpos = bvel = grid = contacts = None


        def fields():
            global pos, vel, force, rho, pres, mass, bpos, bvel, grid, contacts
            pos = qd.Vector.field(3, qd.f32, shape=N)
            vel = qd.Vector.field(3, qd.f32, shape=N)
            force = qd.Vector.field(3, qd.f32, shape=N)
            rho = qd.field(qd.f32, shape=N)
            pres = qd.field(qd.f32, shape=N)
            mass = qd.field(qd.f32, shape=N)
            bpos = qd.Vector.field(3, qd.f32, shape=NB)
            bvel = qd.Vector.field(3, qd.f32, shape=NB)
            grid = qd.field(qd.i32, shape=(32, 32, 32))
            contacts = qd.field(qd.i32, shape=SUBSTEPS)


        @qd.func
        def sdf_box(p, h):
            q = abs(p) - h
            return qd.max(q, 0.0).norm() + qd.min(qd.max(q[0], qd.max(q[1], q[2])), 0.0)


        @qd.func
        def contact_impulse(vn, depth, k, damp, dt):
            j = 0.0
            if depth < 0.0:
                j = qd.max(-k * depth * dt - damp * vn, 0.0)
            return j


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
                pos[i] = qd.Vector([(i % 16) / 16.0, (i // 16 % 16) / 8.0, (i // 256) / 16.0])
                vel[i] = qd.Vector([0.0, 0.0, 0.0])
                mass[i] = 1.0 + 0.01 * (i % 10)
            for b in bpos:
                bpos[b] = qd.Vector([(b % 8) / 8.0, 1.0 + (b // 8) / 8.0, 0.5])


        @qd.kernel
        def step(dt: qd.f32):
            for s in qd.static(range(SUBSTEPS)):
                h = 0.05 + 0.002 * s
                stiff = 1000.0 + 50.0 * s
                scale = 1.0001 if s == EDIT else 1.0
                for i in force:
                    force[i] = qd.Vector([0.0, -9.81 * mass[i], 0.0])
                for I in qd.grouped(grid):
                    grid[I] = 0
                for i in pos:
                    c = qd.max(qd.min(qd.cast(qd.floor(pos[i] * 16.0), qd.i32), 31), 0)
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
                        d = p.norm() - (0.05 + 0.001 * s)
                        if d < 0.0:
                            n = p / (p.norm() + 1e-9)
                            vel[i] += contact_impulse(vel[i].dot(n), d, stiff, 2.0, dt) * n
                            qd.atomic_add(contacts[s], 1)
                for i in pos:
                    d = sdf_box(pos[i] - qd.Vector([0.5, 0.0, 0.5]), qd.Vector([0.6, 0.05 + 0.01 * s, 0.6]))
                    if d < 0.0:
                        vel[i][1] += contact_impulse(vel[i][1], d, stiff, 1.0, dt)
                for i in pos:
                    pos[i] += dt * vel[i] * scale
                for b in bpos:
                    bvel[b][1] -= 9.81 * dt
                    bpos[b] += dt * bvel[b]
        ''')


def quadrants_kernel(ntasks, edit=-1, ops=1):
    """NTASKS top-level loops, each one offloaded task; a loop's body is
    OPS statements (1: one line; more make bigger tasks, to match a
    module size such as the issue's 538 KB of PTX)."""
    lines = ["import quadrants as qd", "", "",
             "@qd.kernel",
             "def step(a: qd.types.NDArray[qd.f32, 1], n: int) -> None:"]
    for t in range(ntasks):
        c = 1.0 + 0.001 * t + (0.5 if t == edit else 0.0)
        lines.append("    for i in range(n):")
        lines.append(f"        x = a[{t} * n + i]")
        for k in range(ops):  # bounded: the factor of x stays below 1
            f = ("qd.sin(x)", "qd.cos(x)", "qd.exp(-x * x)", "qd.tanh(x)")[k % 4]
            lines.append(f"        x = x * {0.5 * c + 0.01 * k!r} + {f} * {(t + k) % 7 + 1}.0")
        lines.append(f"        a[{t} * n + i] = x")
    return "\n".join(lines) + "\n"


# ---- running ------------------------------------------------------------------------------

class Runner:
    def __init__(self, args):
        self.a = args
        self.work = tempfile.mkdtemp(prefix="intercept-check-")
        self.programs = {}
        for name, text in (("quadrants", QUADRANTS), ("physics", PHYSICS), ("cupy", CUPY),
                           ("cudacore", CUDACORE), ("drvlink", DRVLINK), ("torch", TORCH),
                           ("numba", NUMBA)):
            p = os.path.join(self.work, name + "_prog.py")
            with open(p, "w") as f:
                f.write(textwrap.dedent(text))
            self.programs[name] = p

    def run(self, prog, argv, taskcache=False, tc_cache=None, env=None, measure=False,
            ewp=False):
        """One fresh process: its JSON line, what the log says, wall time."""
        log = os.path.join(self.work, "tc-%d.log" % time.monotonic_ns())
        cmd = [sys.executable, self.programs[prog], *map(str, argv)]
        e = dict(os.environ)
        e.update(env or {})
        if taskcache or measure:
            cmd = [self.a.taskcache, "run", "--log", log, *(["--cache-dir", tc_cache] if tc_cache else []),
                   *(["--whole-program-units"] if ewp else []), "--", *cmd]
            if measure:
                e["TASKCACHE_INTERCEPT"] = "measure"
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=900)
        wall = time.time() - t0
        out = None
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                out = json.loads(line)
        lines = open(log).read().splitlines() if os.path.exists(log) else []
        if p.returncode != 0 or out is None:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n"
                               f"{p.stderr[-4000:]}")
        out["wall"] = wall
        out["log"] = lines
        secs = [(l, float(m.group(1))) for l in lines
                for m in [re.search(r"(?:in|,) ([0-9.]+) s(?: \(|$)", l)] if m]
        out["ptx_seconds"] = sum(x for _, x in secs)
        # within the first call: lines written (at a call's end) between its start and end
        if "t0" in out:
            t0, t1 = out["t0"], out["t0"] + out["first_call"]
            out["ptx_in_call"] = sum(x for l, x in secs if t0 <= log_time(l) <= t1 + 0.002)
        out["ptx_bytes"] = sum(int(m.group(1)) for l in lines
                               for m in [re.search(r"compiled (\d+) bytes of PTX", l)] if m)
        # units compiled; a module compiled whole is one compile
        out["compiled"] = sum(int(m.group(1)) for l in lines
                              for m in [re.search(r"(\d+) compiled", l)] if m) + \
            sum("compiled whole" in l for l in lines)
        out["passed"] = [l for l in lines
                         if "passed to the driver" in l or "compiles this session's PTX" in l]
        # progress, so that a run cut short still says what it measured
        mode = "measure" if measure else "taskcache-ewp" if ewp else "taskcache" if taskcache else "driver"
        print(f"  {prog} {mode} {os.path.basename(str(argv[0])) if argv else ''}: first call "
              f"{out.get('first_call', 0):.2f} s, PTX {out['ptx_seconds']:.3f} s "
              f"({out.get('ptx_in_call', 0):.3f} s within the call"
              f"{', %d KB' % (out['ptx_bytes'] // 1000) if out['ptx_bytes'] else ''}), "
              f"compiled {out['compiled']}, wall {wall:.1f} s", flush=True)
        if self.a.show_logs:
            for l in lines:
                print("    " + l, flush=True)
        return out


def log_time(line):
    """When the interceptor wrote a log line (local time, to the ms)."""
    m = re.match(r"taskcache\[\d+\] (\S+): ", line)
    return datetime.datetime.fromisoformat(m.group(1)).timestamp() if m else 0.0


def fresh(runner, name):
    d = os.path.join(runner.work, name + "-%d" % time.monotonic_ns())
    os.makedirs(d)
    return d


def check_quadrants(runner, rows, problems, physics, ops=1):
    """The loops kernel (N tasks of OPS statements) or the physics step
    (--substeps, 11 tasks each)."""
    n = runner.a.substeps if physics else runner.a.tasks
    prog = "physics" if physics else "quadrants"
    label = (f"physics {n} substeps ({11 * n} tasks)" if physics
             else f"quadrants {n} tasks x {ops} ops")
    kern = os.path.join(runner.work, f"{prog}_{ops}_kern.py")
    kern_edit = os.path.join(runner.work, f"{prog}_{ops}_kern_edit.py")
    with open(kern, "w") as f:
        f.write(physics_kernel(n) if physics else quadrants_kernel(n, ops=ops))
    with open(kern_edit, "w") as f:
        f.write(physics_kernel(n, edit=n // 3) if physics else quadrants_kernel(n, n // 3, ops))
    extra = [] if physics else [n]
    res = {}
    # driver: plain processes (no interceptor); measure: the interceptor in
    # measure mode, for the driver's PTX time; taskcache: under taskcache run;
    # taskcache-ewp: whole-program units asked for explicitly (the identity
    # of results only). Repetitions outermost, so that the modes take turns
    # and a machine that slows down or speeds up over minutes biases none.
    modes = runner.a.modes.split(",")
    scens = runner.a.scenarios.split(",")
    for rep in range(runner.a.reps):
        for mode in modes:
            if rep and mode not in ("driver", "taskcache") and not (
                    mode == "measure" and runner.a.measure_every_rep):
                continue
            qd_cache, cuda_cache = fresh(runner, "qd"), fresh(runner, "cuda")
            tc_cache = fresh(runner, "tc")
            env = {"CUDA_CACHE_PATH": cuda_cache}
            kw = dict(taskcache=mode.startswith("taskcache"), measure=mode == "measure",
                      ewp=mode == "taskcache-ewp", tc_cache=tc_cache, env=env)
            for scen, path in (("cold", kern), ("warm", kern), ("edit", kern_edit)):
                if scen in scens:
                    r = runner.run(prog, [path, qd_cache, *extra], **kw)
                    res.setdefault((mode, scen), []).append(r)
            if "no-qd-cache" in scens:
                # Quadrants' own cache off, the driver's (or taskcache's) warm
                r = runner.run(prog, [kern, "-", *extra], **kw)
                res.setdefault((mode, "no-qd-cache"), []).append(r)
    med = statistics.median
    for scen in ("cold", "warm", "edit", "no-qd-cache"):
        d, t, m = (res.get((mode, scen), []) for mode in ("driver", "taskcache", "measure"))
        ewp = res.get(("taskcache-ewp", scen), [])
        if not (d or t or m or ewp):
            continue
        # The checks hold for whatever modes ran: every result the same,
        # nothing passed to the driver under taskcache.
        hashes = {x["hash"] for x in d + t + m + ewp}
        if len(hashes) != 1:
            problems.append(f"{label} {scen}: results differ with taskcache ({len(hashes)} hashes)")
        passed = [l for x in t + ewp for l in x["passed"]]
        if passed:
            problems.append(f"{label} {scen}: calls passed to the driver: {passed[:2]}")
        if not (d and t):
            continue  # nothing to compare the first call with
        md = med(x["first_call"] for x in d)
        mt = med(x["first_call"] for x in t)
        pt = med(x["ptx_seconds"] for x in t)
        # the driver's PTX time, and the rest of the first call outside PTX
        # (the same with and without taskcache unless the interceptor costs
        # something elsewhere), need the measure mode
        pd = f"{med(x['ptx_seconds'] for x in m):.3f} s" if m else "-"
        rest_t = med(x["first_call"] - x["ptx_in_call"] for x in t)
        rest_m = f"{med(x['first_call'] - x['ptx_in_call'] for x in m):.2f}" if m else "-"
        kb = max((x["ptx_bytes"] for x in m + t), default=0) / 1000
        rows.append((f"{label}: {scen} (n={len(d)}/{len(t)})", f"{md:.2f} s", f"{mt:.2f} s",
                     f"{md / mt:.2f}x" if mt else "-", pd, f"{pt:.3f} s",
                     f"{rest_m} / {rest_t:.2f} s", f"{kb:.0f} KB"))
        print("[intercept]   " + " | ".join(rows[-1]), flush=True)
    return {f"{m}/{s}": [{k: v for k, v in x.items() if k != "log"} for x in xs]
            for (m, s), xs in res.items()}


class HandsNoPtx(Exception):
    """The JIT handed the driver no PTX."""


def check_simple(runner, name, rows, problems, env=None):
    env = dict(env or {})
    # cold: the JIT's and the driver's caches empty (a machine that ran the
    # program before holds its modules in ~/.nv/ComputeCache)
    base = runner.run(name, [], env=dict(env, **{
        "CUPY_CACHE_DIR": fresh(runner, "cp"), "CUDA_CACHE_PATH": fresh(runner, "cuda")}))
    # the driver's own PTX time, with an empty compute cache
    meas = runner.run(name, [], measure=True, env=dict(env, **{
        "CUPY_CACHE_DIR": fresh(runner, "cp"), "CUDA_CACHE_PATH": fresh(runner, "cuda")}))
    tc_cache = fresh(runner, "tc")
    first = runner.run(name, [], taskcache=True, tc_cache=tc_cache,
                       env=dict(env, **{"CUPY_CACHE_DIR": fresh(runner, "cp")}))
    if not meas["ptx_bytes"]:
        # it makes machine code itself (NVRTC to cubin, PTX linked with
        # nvJitLink): the driver is handed no PTX, so taskcache run has
        # nothing to build and must only change nothing
        if first["hash"] != base["hash"]:
            problems.append(f"{name}: results differ under taskcache run")
        raise HandsNoPtx(name)
    second = runner.run(name, [], taskcache=True, tc_cache=tc_cache,
                        env=dict(env, **{"CUPY_CACHE_DIR": fresh(runner, "cp")}))
    ewp = runner.run(name, [], taskcache=True, tc_cache=fresh(runner, "tc"), ewp=True,
                     env=dict(env, **{"CUPY_CACHE_DIR": fresh(runner, "cp")}))
    ok_hash = base["hash"] == meas["hash"] == first["hash"] == second["hash"] == ewp["hash"]
    built = [l for l in first["log"] if "built with taskcache" in l]
    rows.append((f"{name}: first call", f"{base['first_call']:.2f} s", f"{first['first_call']:.2f} s",
                 f"{base['first_call'] / first['first_call']:.2f}x", f"{meas['ptx_seconds']:.3f} s",
                 f"{first['ptx_seconds']:.3f} s; compiled {first['compiled']}, then "
                 f"{second['compiled']}", "-", f"{meas['ptx_bytes'] / 1000:.0f} KB"))
    if not ok_hash:
        problems.append(f"{name}: results differ with taskcache")
    if not built:
        problems.append(f"{name}: nothing was built by taskcache: {first['log'][:3]}")
    if second["compiled"] != 0:
        problems.append(f"{name}: a second process compiled {second['compiled']} units")
    return {"base": base, "measure": meas, "first": first, "second": second,
            "whole_program_units": ewp}


def save_report(out, rows, problems, missing, doc):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "intercept.json"), "w") as f:
        json.dump({"rows": rows, "problems": problems, "missing": missing, "runs": doc}, f,
                  indent=1, default=str)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskcache", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--tasks", type=int, default=200, help="tasks of the loops kernel")
    ap.add_argument("--loop-ops", default="1",
                    help="statements in each loop of the loops kernel; a comma list runs each "
                    "(the issue measured a 200-task module of 538 KB of PTX)")
    ap.add_argument("--substeps", type=int, default=20, help="substeps of the physics step")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--measure-every-rep", action="store_true",
                    help="the measure mode in every repetition, not only the first: the "
                         "driver's PTX time and the rest of the first call with the interceptor "
                         "loaded, as many times as the other modes")
    ap.add_argument("--skip", default="")
    ap.add_argument("--modes", default="driver,measure,taskcache,taskcache-ewp",
                    help="Quadrants runs: plain (driver), the interceptor measuring the driver, "
                    "taskcache, taskcache with whole-program units")
    ap.add_argument("--scenarios", default="cold,warm,edit,no-qd-cache",
                    help="Quadrants scenarios, in this order within each repetition (warm and "
                    "edit follow cold)")
    ap.add_argument("--hash-seed", default=None,
                    help="PYTHONHASHSEED for every JIT process: a JIT that iterates over sets "
                    "of strings then takes the same path in each process (default: the "
                    "environment's; unset, Python picks a random seed per process)")
    ap.add_argument("--show-logs", action="store_true",
                    help="print each run's interceptor log (what was built, in how long)")
    ap.add_argument("--numba-path", default="",
                    help="a directory put first on numba's PYTHONPATH (an older numpy, for a "
                    "numba-cuda that needs one)")
    ap.add_argument("--need", default="", help="JITs whose absence is a failure")
    a = ap.parse_args()
    scens = a.scenarios.split(",")
    if ("warm" in scens or "edit" in scens) and "cold" not in scens:
        ap.error("--scenarios: warm and edit follow a cold run in the same caches; add cold")
    if a.hash_seed is not None:
        os.environ["PYTHONHASHSEED"] = a.hash_seed  # every process inherits it (Runner.run)
    runner = Runner(a)
    rows, problems, missing, doc = [], [], [], {}
    no_ptx = []  # JITs that run here but hand the driver no PTX: nothing to measure
    skip = set(filter(None, a.skip.split(",")))
    need = set(filter(None, a.need.split(",")))
    # the quick JITs first: a run cut off by the device's time limit has them
    # numba: numba.cuda imports, and what it imports to compile a kernel
    # (a numba-cuda that does not match the numpy beside it fails only there)
    for name, module in (("cupy", "cupy"), ("cudacore", "cuda.core"), ("drvlink", "numpy"),
                         ("torch", "torch"),
                         ("numba", "numba.cuda, numba.cuda.np.arrayobj"),
                         ("quadrants", "quadrants"), ("physics", "quadrants")):
        if name in skip:
            continue
        # numba-cuda 0.30 imports np.row_stack, which numpy 2.5 removed: its
        # runs can take an older numpy from a directory of their own
        jit_env = ({"PYTHONPATH": os.pathsep.join(filter(None, (
            a.numba_path, os.environ.get("PYTHONPATH"))))} if name == "numba" and a.numba_path
            else {})
        if jit_env:
            p = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                               text=True, env=dict(os.environ, **jit_env))
            if p.returncode != 0:
                missing.append(f"{name} ({(p.stderr.strip().splitlines() or ['?'])[-1]})")
                continue
        else:
            try:
                for m in module.split(", "):
                    __import__(m)
            except Exception as e:  # the JIT is not installed here, or cannot compile
                missing.append(f"{name} ({type(e).__name__}: {e})")
                continue
        print(f"[intercept] {name} ...", flush=True)
        try:
            if name == "physics":
                doc[name] = check_quadrants(runner, rows, problems, physics=True)
            elif name == "quadrants":
                for ops in map(int, a.loop_ops.split(",")):
                    doc[f"{name}-{ops}ops"] = check_quadrants(runner, rows, problems, False, ops)
                    save_report(a.out, rows, problems, missing, doc)
            else:
                env = {"CUPY_COMPILE_WITH_PTX": "1"} if name == "cupy" else {}
                doc[name] = check_simple(runner, name, rows, problems, dict(env, **jit_env))
        except HandsNoPtx:
            no_ptx.append(f"{name} (it makes machine code itself; results identical under "
                          "taskcache run)")
        except Exception as e:
            problems.append(f"{name}: {e}")
        # after each JIT, so that a run cut off by the device's time limit
        # still brings back what it measured
        save_report(a.out, rows, problems, missing, doc)
    save_report(a.out, rows, problems, missing, doc)
    print("\n== taskcache run: first call in fresh processes (medians), and the time spent "
          "turning PTX into machine code")
    print("(rest: the first call less the PTX time within it, driver / taskcache; PTX size: "
          "what the driver compiled in the process)")
    print(f"{'scenario':<52} {'driver':>9} {'taskcache':>10} {'speedup':>8} {'PTX: driver':>12} "
          f"{'PTX: taskcache':>15} {'rest':>15} {'PTX size':>9}")
    for r in rows:
        print(f"{r[0]:<52} {r[1]:>9} {r[2]:>10} {r[3]:>8} {r[4]:>12} {r[5]:>15} {r[6]:>15} "
              f"{r[7]:>9}")
    for m in missing:
        print(f"   not installed: {m}")
    for m in no_ptx:
        print(f"   hands the driver no PTX: {m}")
    for p in problems:
        print(f"   PROBLEM: {p}")
    shutil.rmtree(runner.work, ignore_errors=True)
    if problems or any(m.split()[0] in need for m in missing):
        return 1
    return 2 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
