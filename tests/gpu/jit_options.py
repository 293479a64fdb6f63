#!/usr/bin/env python3
"""jit_options.py -- does `taskcache run` compile PTX as the driver would
under each JIT option it maps (GPU machine)?

The interceptor turns cuModuleLoadDataEx's JIT options into ptxas options
(src/intercept/jit.c): CU_JIT_OPTIMIZATION_LEVEL 0-3 into -O0..-O3 (4,
the driver's default, into none), CU_JIT_MAX_REGISTERS into
--maxrregcount, CU_JIT_GENERATE_LINE_INFO into -lineinfo, CU_JIT_CACHE_MODE
into --def-load-cache, CU_JIT_TARGET into the target (sm_90, sm_90a). Nothing but the GPU says what the driver makes of
them. For each setting, a module of three kernels (nvcc -ptx at test time)
is loaded in a fresh process with cuModuleLoadDataEx, once by the driver
and once under `taskcache run`; each kernel's registers, local, shared and
constant memory (cuFuncGetAttribute) and the bytes it writes must be the
same. The same goes for a link session (cuLinkCreate with the options,
the PTX added, cuLinkComplete), whose linked cubin must also hold the same
code: every .text section byte for byte, and the same target (ELF
flags). Link sessions also take options on their input (cuLinkAddData)
beside the link's, and two settings name the target twice. Beside them, `ptxas -O0..-O3` (and with --maxrregcount) on the same
PTX, read with cuobjdump --dump-resource-usage, shows which ptxas setting
the driver's registers match.

Usage: jit_options.py --taskcache build/taskcache [--out DIR]
Exit status 0 when every setting matches, 1 otherwise, 2 without nvcc."""

import argparse
import hashlib
import json
import os
import re
import subprocess
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import elfsyms  # noqa: E402
from cuda_tools import find_tool  # noqa: E402  (scripts/cuda_tools.py)

KERNELS = r'''
extern "C" __global__ void light(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f + 1.0f;
}

extern "C" __global__ void heavy(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[16];
    for (int k = 0; k < 16; k++)
        acc[k] = sinf(in[(i + k) % n] * (k + 1));
    float s = 0.0f;
    for (int r = 0; r < n % 7 + 3; r++)
        for (int k = 0; k < 16; k++)
            s += acc[(k + r) % 16] * cosf(s + k);
    out[i % n] = s;
}

extern "C" __global__ void wide(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = in[i % n], a1 = a0 * 1.1f, a2 = a0 * 1.2f, a3 = a0 * 1.3f;
    float b0 = a0 + 1, b1 = a1 + 1, b2 = a2 + 1, b3 = a3 + 1;
#pragma unroll
    for (int k = 0; k < 24; k++) {
        a0 = fmaf(a0, b1, a2); a1 = fmaf(a1, b2, a3); a2 = fmaf(a2, b3, b0);
        a3 = fmaf(a3, b0, b1); b0 = fmaf(b0, a1, a3); b1 = fmaf(b1, a2, a0);
        b2 = fmaf(b2, a3, a1); b3 = fmaf(b3, a0, a2);
    }
    out[i % n] = a0 + a1 + a2 + a3 + b0 + b1 + b2 + b3;
}
'''
NAMES = ("light", "heavy", "wide")

# CUjit_option values (cuda.h)
MAX_REGISTERS, OPTIMIZATION_LEVEL, TARGET, GENERATE_LINE_INFO, CACHE_MODE = 0, 7, 9, 13, 14
TARGET_FROM_CUCONTEXT = 8  # takes no value
CACHE_CG = 1
ACCELERATED = 0x10000  # CU_COMPUTE_ACCELERATED_TARGET_BASE: sm_90a is 0x10000 + 90

# label -> (JIT options, the ptxas options they should mean)
SETTINGS = {
    "none": ([], []),
    "-O level 0": ([(OPTIMIZATION_LEVEL, 0)], ["-O0"]),
    "-O level 1": ([(OPTIMIZATION_LEVEL, 1)], ["-O1"]),
    "-O level 2": ([(OPTIMIZATION_LEVEL, 2)], ["-O2"]),
    "-O level 3": ([(OPTIMIZATION_LEVEL, 3)], ["-O3"]),
    "-O level 4": ([(OPTIMIZATION_LEVEL, 4)], []),
    "max registers 16": ([(MAX_REGISTERS, 16)], ["--maxrregcount=16"]),
    "max registers 20, level 1": ([(MAX_REGISTERS, 20), (OPTIMIZATION_LEVEL, 1)],
                                  ["--maxrregcount=20", "-O1"]),
    "line info": ([(GENERATE_LINE_INFO, 1)], ["-lineinfo"]),
    "cache mode cg": ([(CACHE_MODE, CACHE_CG)], ["--def-load-cache=cg"]),
    "target sm_90": ([(TARGET, 90)], ["-arch=sm_90"]),
    "target sm_90a": ([(TARGET, ACCELERATED + 90)], ["-arch=sm_90a"]),
    # which of two target options wins: taskcache lets CU_JIT_TARGET win in
    # either order (the linked cubin's ELF flags name the target)
    "target sm_90a, then context": ([(TARGET, ACCELERATED + 90), (TARGET_FROM_CUCONTEXT, 0)],
                                    ["-arch=sm_90a"]),
    "context, then target sm_90a": ([(TARGET_FROM_CUCONTEXT, 0), (TARGET, ACCELERATED + 90)],
                                    ["-arch=sm_90a"]),
}
# link sessions only: label -> (the link's options, the input's options
# (cuLinkAddData), the ptxas options taskcache makes of them: an input's
# options are added to the link's, a later value of one option replacing
# an earlier one)
LINK_SETTINGS = {
    # the pairs are chosen so that adding and replacing differ: level 1
    # gives `heavy` 24 registers, the default 28 (and a cap of 24 gives 24)
    "link registers 24, input level 3": ([(MAX_REGISTERS, 24)], [(OPTIMIZATION_LEVEL, 3)],
                                         ["--maxrregcount=24", "-O3"]),
    "link level 1, input registers 32": ([(OPTIMIZATION_LEVEL, 1)], [(MAX_REGISTERS, 32)],
                                         ["-O1", "--maxrregcount=32"]),
    "link level 1, input level 3": ([(OPTIMIZATION_LEVEL, 1)], [(OPTIMIZATION_LEVEL, 3)], ["-O3"]),
}

LOADER = r'''
import ctypes, hashlib, json, struct, sys
cuda = ctypes.CDLL("libcuda.so.1")
ptx = open(sys.argv[1], "rb").read() + b"\0"
opts = json.loads(sys.argv[2])
names = sys.argv[3].split(",")
mode, cubin_out = sys.argv[4], sys.argv[5]
input_opts = json.loads(sys.argv[6])  # a link input's own options (cuLinkAddData)
P, U = ctypes.c_void_p, ctypes.c_uint
for fn, args in (("cuModuleLoadDataEx", [P, P, U, P, P]), ("cuModuleGetFunction", [P, P, P]),
                 ("cuFuncGetAttribute", [P, ctypes.c_int, P]),
                 ("cuMemAlloc_v2", [P, ctypes.c_size_t]),
                 ("cuMemcpyHtoD_v2", [ctypes.c_uint64, P, ctypes.c_size_t]),
                 ("cuMemcpyDtoH_v2", [P, ctypes.c_uint64, ctypes.c_size_t]),
                 ("cuMemFree_v2", [ctypes.c_uint64]),
                 ("cuLaunchKernel", [P, U, U, U, U, U, U, U, P, P, P]),
                 ("cuLinkCreate_v2", [U, P, P, P]),
                 ("cuLinkAddData_v2", [P, ctypes.c_int, P, ctypes.c_size_t, P, U, P, P]),
                 ("cuLinkComplete", [P, P, P]), ("cuModuleLoadData", [P, P])):
    getattr(cuda, fn).argtypes = args
def ok(rc, what):
    if rc != 0:
        print(json.dumps({"error": f"{what}: CUresult {rc}"})); sys.exit(0)
dev, ctx, mod = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
ok(cuda.cuInit(0), "cuInit"); ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "ctx"); ok(cuda.cuCtxSetCurrent(ctx), "set")
keys = (ctypes.c_int * max(1, len(opts)))(*[k for k, _ in opts])
vals = (ctypes.c_void_p * max(1, len(opts)))(*[v for _, v in opts])
if mode == "load":
    ok(cuda.cuModuleLoadDataEx(ctypes.byref(mod), ptx, len(opts), keys, vals),
       "cuModuleLoadDataEx")
else:  # a link session with the options; its PTX input takes them from it
    state, image, size = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
    ok(cuda.cuLinkCreate_v2(len(opts), keys, vals, ctypes.byref(state)), "cuLinkCreate")
    in_keys = (ctypes.c_int * max(1, len(input_opts)))(*[k for k, _ in input_opts])
    in_vals = (ctypes.c_void_p * max(1, len(input_opts)))(*[v for _, v in input_opts])
    ok(cuda.cuLinkAddData_v2(state, 1, ptx, len(ptx), b"k.ptx", len(input_opts), in_keys,
                             in_vals), "cuLinkAddData")
    ok(cuda.cuLinkComplete(state, ctypes.byref(image), ctypes.byref(size)), "cuLinkComplete")
    linked = ctypes.string_at(image, size.value)
    open(cubin_out, "wb").write(linked)
    ok(cuda.cuModuleLoadData(ctypes.byref(mod), linked), "cuModuleLoadData")
n = 4096
host = (ctypes.c_float * n)(*[((i * 37) % 101) / 50.0 - 1.0 for i in range(n)])
out = {}
for name in names:
    f = ctypes.c_void_p()
    ok(cuda.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()), name)
    attrs = {}
    for label, a in (("registers", 4), ("local", 3), ("shared", 1), ("const", 2)):
        v = ctypes.c_int()
        ok(cuda.cuFuncGetAttribute(ctypes.byref(v), a, f), label)
        attrs[label] = v.value
    src, dst = ctypes.c_uint64(), ctypes.c_uint64()
    ok(cuda.cuMemAlloc_v2(ctypes.byref(src), n * 4), "alloc")
    ok(cuda.cuMemAlloc_v2(ctypes.byref(dst), n * 4), "alloc")
    ok(cuda.cuMemcpyHtoD_v2(src.value, host, n * 4), "htod")
    ok(cuda.cuMemcpyHtoD_v2(dst.value, host, n * 4), "htod")
    pn = ctypes.c_int(n)
    args = (ctypes.c_void_p * 3)(ctypes.addressof(src), ctypes.addressof(dst),
                                 ctypes.addressof(pn))
    ok(cuda.cuLaunchKernel(f, n // 128, 1, 1, 128, 1, 1, 0, None, args, None), "launch")
    ok(cuda.cuCtxSynchronize(), "sync")
    res = (ctypes.c_float * n)()
    ok(cuda.cuMemcpyDtoH_v2(res, dst.value, n * 4), "dtoh")
    cuda.cuMemFree_v2(src.value)
    cuda.cuMemFree_v2(dst.value)
    attrs["output"] = hashlib.sha256(bytes(res)).hexdigest()[:16]
    out[name] = attrs
print(json.dumps(out))
'''


def load(work, ptx, opts, mode, taskcache=None, input_opts=()):
    cubin = os.path.join(work, f"{mode}-{'taskcache' if taskcache else 'driver'}.cubin")
    cmd = [sys.executable, "-c", LOADER, ptx, json.dumps(opts), ",".join(NAMES), mode, cubin,
           json.dumps(list(input_opts))]
    env = dict(os.environ, CUDA_CACHE_DISABLE="1")  # the driver compiles every time
    if taskcache:
        cmd = [taskcache, "run", "--cache-dir", os.path.join(work, "tc"),
               "--log", os.path.join(work, "tc.log"), "--", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": f"exit {p.returncode}: {p.stderr[-300:]}"}
    out = json.loads(lines[-1])
    if mode == "link" and "error" not in out:  # the linked code, for the comparison
        out["text"] = {n: hashlib.sha256(b).hexdigest()[:16]
                       for n, b in elfsyms.sections(cubin).items() if n.startswith(".text.")}
        with open(cubin, "rb") as f:  # e_flags: the target the cubin was built for
            out["text"]["e_flags"] = hex(int.from_bytes(f.read(52)[48:52], "little"))
    return out


def ptxas_registers(ptxas, cuobjdump, work, ptx, options, arch):
    """kernel -> registers of `ptxas OPTIONS` on the module."""
    cubin = os.path.join(work, "ref.cubin")
    target = [] if any(o.startswith("-arch=") for o in options) else [f"-arch={arch}"]
    subprocess.run([ptxas, *target, *options, ptx, "-o", cubin], check=True,
                   capture_output=True)  # its warning on a register cap below 24
    text = subprocess.run([cuobjdump, "--dump-resource-usage", cubin], capture_output=True,
                          text=True, check=True).stdout
    regs, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Function (\w+):", line)
        if m:
            current = m.group(1)
        m = re.search(r"REG:(\d+)", line)
        if m and current:
            regs[current] = int(m.group(1))
    return regs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--taskcache", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()
    nvcc, ptxas, cuobjdump = find_tool("nvcc"), find_tool("ptxas"), find_tool("cuobjdump")
    if not (nvcc and ptxas and cuobjdump):
        print("jit_options.py: needs nvcc, ptxas and cuobjdump")
        return 2
    work = tempfile.mkdtemp(prefix="jit-options-")
    cu, ptx = os.path.join(work, "k.cu"), os.path.join(work, "k.ptx")
    with open(cu, "w") as f:
        f.write(KERNELS)
    subprocess.run([nvcc, "-ptx", f"-arch={a.arch}", cu, "-o", ptx], check=True)
    rows, ok = {}, True
    print(f"{'setting':34} {'call':4} {'kernel':6} {'driver':>24} {'taskcache run':>24} "
          f"{'ptxas regs':>10}  same")
    cases = [(label, opts, [], ptxas_opts, ("load", "link"))
             for label, (opts, ptxas_opts) in SETTINGS.items()]
    cases += [(label, opts, input_opts, ptxas_opts, ("link",))
              for label, (opts, input_opts, ptxas_opts) in LINK_SETTINGS.items()]
    for label, opts, input_opts, ptxas_opts, modes in cases:
        ref = ptxas_registers(ptxas, cuobjdump, work, ptx, ptxas_opts, a.arch)
        rows[label] = {"ptxas_registers": ref}
        for mode in modes:
            d = load(work, ptx, opts, mode, input_opts=input_opts)
            t = load(work, ptx, opts, mode, a.taskcache, input_opts)
            rows[label][mode] = {"driver": d, "taskcache": t}
            if "error" in d or "error" in t:
                ok = False
                print(f"{label:34} {mode:4} error: driver {d.get('error')}, "
                      f"taskcache {t.get('error')}")
                continue
            if mode == "link" and d["text"] != t["text"]:
                ok = False
                print(f"{label:34} {mode:4} the linked code differs: {d['text']} {t['text']}")
            for k in NAMES:
                same = d[k] == t[k]
                ok &= same
                cell = lambda r: f"r{r['registers']} l{r['local']} {r['output'][:8]}"  # noqa: E731
                print(f"{label:34} {mode:4} {k:6} {cell(d[k]):>24} {cell(t[k]):>24} "
                      f"{ref.get(k, '?') if mode == 'load' or input_opts else '':>10}"
                      f"  {'yes' if same else 'NO'}", flush=True)
    with open(os.path.join(a.out, "jit_options.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("PASS" if ok else "PROBLEM: taskcache run differs from the driver")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
