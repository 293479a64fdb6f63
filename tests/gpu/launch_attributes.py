#!/usr/bin/env python3
"""launch_attributes.py -- what the CUDA driver reads about each kernel of a
taskcache image, against the whole-module ptxas image (GPU machine).

Results alone (realworld_identity.py) do not show everything a split image
could change: a kernel launches under limits the driver takes from the
image (threads per block, static and dynamic shared memory, clusters,
registers). For every module of the real-world corpus (tests/realworld) this
builds the whole-module ptxas image, ptxas -c + nvlink (what NVIDIA's own
separate compilation gives), and taskcache's image in each build mode
(default; --relocatable-units; --unit-cost 1, a unit per kernel), loads
each, and asks the driver about every kernel: the sixteen CUfunction
attributes, the dynamic shared memory one block of 128 threads may ask for
(cuOccupancyAvailableDynamicSMemPerBlock) and the blocks per SM at 128
threads. Every value must equal the whole image's, except registers, local
memory and blocks per SM, which are code quality (issue 11) and are counted,
not failed, and a static shared size below the whole image's by its rounding
to 16 bytes (which ptxas does and a linker does not; the kernel gets as
much more dynamic shared memory), which is counted.

The variables a program can look up must be there too: every variable in
the images' symbol tables is asked for with cuModuleGetGlobal, and each one
the whole image gives must come with the same size, but for names the
compiler made up ($str, __unnamed_1, $__counter__12), which taskcache's units
name otherwise (counted, as are names only taskcache's image has).

Then a launch check: a kernel that uses only dynamic shared memory (CUDA
source in this file, compiled to PTX with nvcc at run time) asks for all the
dynamic shared memory each image allows and must compute the right sums
under every image.

  python3 tests/gpu/launch_attributes.py --taskcache build/taskcache \\
      [--only 'triton/*'] [--out DIR] [--jobs N]

Prints the differences and a table last, writes OUT/launch_attributes.json.
Exit status 0 when no launch attribute differs and every launch is right,
1 otherwise, 2 when there is no GPU.
"""

import argparse
import collections
import concurrent.futures
import ctypes
import fnmatch
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "realworld"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import elfsyms  # noqa: E402
import rwlib  # noqa: E402

MODES = {"default": [], "reloc": ["--relocatable-units"], "unit1": ["--unit-cost", "1"]}
# CUfunction_attribute, in the enum's order (cuda.h)
ATTRIBUTES = ("max_threads", "shared", "const", "local", "registers", "ptx_version",
              "binary_version", "cache_mode_ca", "max_dynamic_shared", "carveout",
              "cluster_must_be_set", "cluster_width", "cluster_height", "cluster_depth",
              "non_portable_cluster", "cluster_policy")
QUALITY = {"registers", "local", "blocks_per_sm"}   # counted (issue 11), not failed
BLOCK = 128


# ---- the driver ---------------------------------------------------------------------------

class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        P, I, U, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
        for name, argtypes in (("cuInit", [U]), ("cuDeviceGet", [P, I]),
                               ("cuDevicePrimaryCtxRetain", [P, I]), ("cuCtxSetCurrent", [P]),
                               ("cuDeviceGetAttribute", [P, I, I]),
                               ("cuModuleLoadData", [P, P]), ("cuModuleUnload", [P]),
                               ("cuModuleGetFunctionCount", [P, P]),
                               ("cuModuleEnumerateFunctions", [P, U, P]),
                               ("cuModuleGetFunction", [P, P, ctypes.c_char_p]),
                               ("cuModuleGetGlobal_v2", [P, P, P, ctypes.c_char_p]),
                               ("cuFuncGetName", [P, P]), ("cuFuncGetAttribute", [P, I, P]),
                               ("cuFuncSetAttribute", [P, I, I]),
                               ("cuOccupancyAvailableDynamicSMemPerBlock", [P, P, I, I]),
                               ("cuOccupancyMaxActiveBlocksPerMultiprocessor", [P, P, I, S]),
                               ("cuMemAlloc_v2", [P, S]), ("cuMemFree_v2", [ctypes.c_uint64]),
                               ("cuMemsetD8_v2", [ctypes.c_uint64, ctypes.c_ubyte, S]),
                               ("cuMemcpyDtoH_v2", [P, ctypes.c_uint64, S]),
                               ("cuLaunchKernel", [P, U, U, U, U, U, U, U, P, P, P]),
                               ("cuCtxSynchronize", [])):
            getattr(self.cu, name).argtypes = argtypes
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.check(self.cu.cuInit(0), "cuInit")
        self.check(self.cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.check(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.check(self.cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        optin = ctypes.c_int()  # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        self.check(self.cu.cuDeviceGetAttribute(ctypes.byref(optin), 97, dev), "cuDeviceGetAttribute")
        self.optin = optin.value

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUresult {rc}")

    def load(self, path):
        with open(path, "rb") as f:
            data = f.read()
        mod = ctypes.c_void_p()
        self.check(self.cu.cuModuleLoadData(ctypes.byref(mod), data), f"cuModuleLoadData {path}")
        return mod

    def kernels(self, mod):
        """{name: CUfunction} of every kernel in a loaded module."""
        n = ctypes.c_uint()
        self.check(self.cu.cuModuleGetFunctionCount(ctypes.byref(n), mod), "cuModuleGetFunctionCount")
        funcs = (ctypes.c_void_p * max(1, n.value))()
        self.check(self.cu.cuModuleEnumerateFunctions(funcs, n.value, mod), "cuModuleEnumerateFunctions")
        out = {}
        for i in range(n.value):
            name = ctypes.c_char_p()
            self.check(self.cu.cuFuncGetName(ctypes.byref(name), funcs[i]), "cuFuncGetName")
            out[name.value.decode()] = ctypes.c_void_p(funcs[i])
        return out

    def attributes(self, func):
        out = {}
        v = ctypes.c_int()
        for i, name in enumerate(ATTRIBUTES):
            rc = self.cu.cuFuncGetAttribute(ctypes.byref(v), i, func)
            out[name] = v.value if rc == 0 else f"CUresult {rc}"
        block = min(BLOCK, out["max_threads"]) if isinstance(out["max_threads"], int) else BLOCK
        out["available_dynamic_shared"] = self.available_dynamic_shared(func, block)
        rc = self.cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(v), func, block, 0)
        out["blocks_per_sm"] = v.value if rc == 0 else f"CUresult {rc}"
        return out

    def available_dynamic_shared(self, func, block):
        """The dynamic shared memory one block may ask for once the kernel
        has opted in to the device's maximum (the attribute is set to the
        most the driver accepts for it), or an error string."""
        static = ctypes.c_int()
        self.check(self.cu.cuFuncGetAttribute(ctypes.byref(static), 1, func), "shared size")
        rc = self.cu.cuFuncSetAttribute(func, 8, self.optin - static.value)
        if rc != 0:
            return f"opt-in to {self.optin - static.value} B: CUresult {rc}"
        size = ctypes.c_size_t()
        rc = self.cu.cuOccupancyAvailableDynamicSMemPerBlock(ctypes.byref(size), func, 1, block)
        return size.value if rc == 0 else f"CUresult {rc}"

    def image_attributes(self, path, variables=()):
        """({kernel: attributes}, {variable: bytes cuModuleGetGlobal gives
        it, or None where it finds none})."""
        mod = self.load(path)
        try:
            found = {}
            for name in variables:
                ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
                rc = self.cu.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), mod,
                                                  name.encode())
                found[name] = size.value if rc == 0 else None
            return {k: self.attributes(f) for k, f in self.kernels(mod).items()}, found
        finally:
            self.cu.cuModuleUnload(mod)


# ---- the corpus ---------------------------------------------------------------------------

def build_images(args, module, work):
    """{label: image path} for one module, or raises rwlib.BuildError when
    ptxas rejects it; taskcache build failures are returned as strings."""
    d, ptx, arch, ref = rwlib.unpack(module, work)
    images = {"whole": os.path.join(d, "whole.cubin")}
    rwlib.whole_build(ref, images["whole"], arch)
    try:
        images["nvlink"] = rwlib.relocatable_build(ref, os.path.join(d, "nvlink.cubin"), arch)
    except rwlib.BuildError as e:
        images["nvlink"] = f"not built: {e}"
    tc = rwlib.Taskcache(args.taskcache, os.path.join(d, "cache"), arch, args.build_jobs)
    for mode, extra in MODES.items():
        out = os.path.join(d, f"{mode}.cubin")
        try:
            tc.build(ptx, out, *extra)
            images[mode] = out
        except rwlib.BuildError as e:
            images[mode] = f"build failed: {e}"
    return images


def compare(whole, other):
    """{attribute: [(kernel, whole value, other value)]}; a kernel missing
    from one image is reported under "kernel"."""
    diff = {}
    for k in sorted(set(whole) | set(other)):
        if k not in whole or k not in other:
            diff.setdefault("kernel", []).append((k, k in whole, k in other))
            continue
        for a, v in whole[k].items():
            if other[k].get(a) != v:
                diff.setdefault(a, []).append((k, v, other[k].get(a)))
    return diff


def padding_only(diff):
    """Kernels whose static shared memory differs only by the whole image's
    rounding of it to 16 bytes (ptxas rounds a kernel's total up, a linker
    does not: 44 against 48 bytes), so that they have as much more dynamic
    shared memory: no launch that works under the whole image fails."""
    shared = {k: (w, t) for k, w, t in diff.get("shared", []) if isinstance(t, int)}
    ok = {k for k, (w, t) in shared.items() if t <= w and w == (t + 15) // 16 * 16}
    more = {k for k, w, t in diff.get("available_dynamic_shared", [])
            if k in ok and isinstance(t, int) and isinstance(w, int) and t >= w}
    dyn = {k for k, *_ in diff.get("available_dynamic_shared", [])}
    return {k for k in ok if k not in dyn or k in more}


def quality(diff):
    """Kernels whose code is worse than the whole image's: more registers or
    local memory, fewer blocks per SM; and better (fewer registers)."""
    def count(a, worse):
        return sum(1 for _, w, t in diff.get(a, []) if isinstance(w, int) and isinstance(t, int)
                   and worse(w, t))
    return {"registers_above": count("registers", lambda w, t: t > w),
            "registers_below": count("registers", lambda w, t: t < w),
            "local_above": count("local", lambda w, t: t > w),
            "blocks_per_sm_below": count("blocks_per_sm", lambda w, t: t < w)}


COMPILER_NAMED = re.compile(r"^\$|^__unnamed_\d+$")


def compare_variables(whole, other):
    """What a program asking cuModuleGetGlobal sees differently: variables
    the whole image gives and the other does not, or with another size (a
    difference); and those only the other gives (counted). Names the
    compiler made up are counted apart: taskcache renames nvcc's and LLVM's
    constants ($str, __unnamed_1) by their contents (docs/design.md,
    "Canonical text"), and ptxas numbers the variables a function declares
    ($__counter__12) by its own count; no program can know those names."""
    lost = [(v, whole[v], other.get(v)) for v in sorted(whole)
            if whole[v] is not None and other.get(v) != whole[v]]
    extra = sorted(v for v in other if other[v] is not None and whole.get(v) is None)
    renamed = [x for x in lost if COMPILER_NAMED.search(x[0]) and x[2] is None]
    lost = [x for x in lost if x not in renamed]
    return lost, extra, renamed


def check_module(args, drv, module, images):
    res = {"module": module.label, "kernels": 0, "variables": 0, "modes": {}, "failures": [],
           "quality": {}}
    names = set()
    for img in images.values():
        if os.path.exists(img):
            names.update(elfsyms.globals_(img))
    whole, whole_vars = drv.image_attributes(images["whole"], sorted(names))
    res["kernels"] = len(whole)
    res["variables"] = sum(1 for v in whole_vars.values() if v is not None)
    for label in ("nvlink", *MODES):
        img = images.get(label)
        if not img or not os.path.exists(img):
            if label in MODES:
                res["failures"].append(f"{label}: {img}")
            res["modes"][label] = {"error": img}
            continue
        attrs, variables = drv.image_attributes(img, sorted(names))
        diff = compare(whole, attrs)
        lost, extra, renamed = compare_variables(whole_vars, variables)
        padded = padding_only(diff)
        launch = {a: [x for x in d if x[0] not in padded] for a, d in diff.items() if a not in QUALITY}
        launch = {a: d for a, d in launch.items() if d}
        res["modes"][label] = {"same": res["kernels"] - len({k for d in launch.values() for k, *_ in d}),
                               "padding_only": sorted(padded),
                               "variables_lost": lost[:20], "variables_extra": extra[:20],
                               "variables_extra_count": len(extra),
                               "variables_renamed": [x[0] for x in renamed],
                               "differences": {a: d[:20] for a, d in diff.items()},
                               "counts": {a: len(d) for a, d in diff.items()}}
        if label in MODES:
            res["quality"][label] = quality(diff)
            res["failures"] += [f"{label}: {a} differs for {len(d)} kernel(s), e.g. {d[0][0]}: "
                                f"whole {d[0][1]}, taskcache {d[0][2]}" for a, d in launch.items()]
            if lost:
                res["failures"].append(f"{label}: cuModuleGetGlobal gives {len(lost)} variable(s) "
                                       f"otherwise, e.g. {lost[0][0]}: whole {lost[0][1]} bytes, "
                                       f"taskcache {lost[0][2]}")
    return res


# ---- a launch that asks for all the dynamic shared memory -------------------------------

DYNAMIC_SOURCE = r'''
// The kernel uses dynamic shared memory only: each block fills all it has,
// then reads it back in reverse.
extern "C" __global__ void fill_dynamic(unsigned *sums, int words)
{
    extern __shared__ unsigned buf[];
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        buf[i] = i * 2654435761u + blockIdx.x;
    __syncthreads();
    unsigned acc = 0;
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        acc += buf[words - 1 - i] ^ (unsigned)i;
    atomicAdd(sums + blockIdx.x, acc);
}

// a second kernel, with static shared memory, so that there is something to split
extern "C" __global__ void fill_static(unsigned *out)
{
    __shared__ unsigned s[256];
    s[threadIdx.x] = threadIdx.x * 7u;
    __syncthreads();
    out[threadIdx.x] = s[255 - threadIdx.x];
}
'''
LAUNCH_BLOCKS, LAUNCH_THREADS = 16, 256


def expected_sums(words):
    out = []
    for b in range(LAUNCH_BLOCKS):
        acc = 0
        for i in range(words):
            acc += (((words - 1 - i) * 2654435761 + b) & 0xFFFFFFFF) ^ i
        out.append(acc & 0xFFFFFFFF)
    return out


def dynamic_launch(args, drv, work):
    """[row] of the launch check, each {image, available, launch, correct}."""
    cu = os.path.join(work, "dynamic.cu")
    ptx = os.path.join(work, "dynamic.ptx")
    with open(cu, "w") as f:
        f.write(DYNAMIC_SOURCE)
    nvcc = rwlib.find_tool("nvcc", env_var="TASKCACHE_NVCC")
    rwlib.run([nvcc, "-arch=sm_90", "-ptx", cu, "-o", ptx]).check_returncode()
    images = {"whole": os.path.join(work, "dynamic.whole.cubin")}
    rwlib.whole_build(ptx, images["whole"], "sm_90")
    images["nvlink"] = rwlib.relocatable_build(ptx, os.path.join(work, "dynamic.nvlink.cubin"), "sm_90")
    tc = rwlib.Taskcache(args.taskcache, os.path.join(work, "dynamic.cache"), "sm_90", 2)
    for mode, extra in (("unit1", ["--unit-cost", "1"]),
                        ("unit1-reloc", ["--unit-cost", "1", "--relocatable-units"])):
        images[mode] = os.path.join(work, f"dynamic.{mode}.cubin")
        tc.build(ptx, images[mode], *extra)
    rows, cache = [], {}
    for label, path in images.items():
        mod = drv.load(path)
        func = ctypes.c_void_p()
        drv.check(drv.cu.cuModuleGetFunction(ctypes.byref(func), mod, b"fill_dynamic"), "fill_dynamic")
        row = {"image": label, "attributes": drv.attributes(func)}
        available = drv.available_dynamic_shared(func, LAUNCH_THREADS)
        if not isinstance(available, int):
            raise RuntimeError(f"{label}: fill_dynamic: {available}")
        size = ctypes.c_size_t(available)
        words = size.value // 4
        row["available"] = size.value
        rc = drv.cu.cuFuncSetAttribute(func, 8, size.value)  # MAX_DYNAMIC_SHARED_SIZE_BYTES
        sums = ctypes.c_uint64()
        drv.check(drv.cu.cuMemAlloc_v2(ctypes.byref(sums), LAUNCH_BLOCKS * 4), "alloc")
        drv.check(drv.cu.cuMemsetD8_v2(sums.value, 0, LAUNCH_BLOCKS * 4), "memset")
        a0, a1 = ctypes.c_uint64(sums.value), ctypes.c_int(words)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(a0), ctypes.addressof(a1))
        if rc == 0:
            rc = drv.cu.cuLaunchKernel(func, LAUNCH_BLOCKS, 1, 1, LAUNCH_THREADS, 1, 1, size.value,
                                       None, params, None)
        if rc == 0:
            rc = drv.cu.cuCtxSynchronize()
        row["launch"] = rc
        if rc == 0:
            got = (ctypes.c_uint * LAUNCH_BLOCKS)()
            drv.check(drv.cu.cuMemcpyDtoH_v2(got, sums.value, LAUNCH_BLOCKS * 4), "dtoh")
            if words not in cache:
                cache[words] = expected_sums(words)
            row["correct"] = list(got) == cache[words]
        else:
            row["correct"] = False
        drv.cu.cuMemFree_v2(sums.value)
        drv.cu.cuModuleUnload(mod)
        rows.append(row)
    return rows


# ---- main ---------------------------------------------------------------------------------

def table(results, launch_rows):
    labels = ("nvlink", *MODES)
    lines = [f"{'module':<44} {'kernels':>7} " + " ".join(f"{x:>8}" for x in labels) +
             "   (kernels whose launch attributes equal the whole image's)"]
    for r in results:
        cells = []
        for x in labels:
            m = r["modes"].get(x, {})
            cells.append("-" if "same" not in m else f"{m['same']}")
        lines.append(f"{r['module']:<44} {r['kernels']:>7} " + " ".join(f"{c:>8}" for c in cells))
    total = sum(r["kernels"] for r in results)
    sums = [sum(r["modes"].get(x, {}).get("same", 0) for r in results) for x in labels]
    lines.append(f"{'total':<44} {total:>7} " + " ".join(f"{s:>8}" for s in sums))
    for x in MODES:
        q = collections.Counter()
        for r in results:
            q.update(r["quality"].get(x, {}))
        padded = sum(len(r["modes"].get(x, {}).get("padding_only", [])) for r in results)
        lines.append(f"  {x}: kernels with " + ", ".join(f"{a.replace('_', ' ')} {q[a]}" for a in
                                                      ("registers_above", "registers_below",
                                                       "local_above", "blocks_per_sm_below")) +
                     f" the whole image's; {padded} with static shared memory not rounded to 16 B")
    nvars = sum(r.get("variables", 0) for r in results)
    for x in ("nvlink", *MODES):
        extra = sum(r["modes"].get(x, {}).get("variables_extra_count", 0) for r in results)
        lost = sum(len(r["modes"].get(x, {}).get("variables_lost", [])) for r in results)
        renamed = sum(len(r["modes"].get(x, {}).get("variables_renamed", [])) for r in results)
        lines.append(f"  {x}: of the {nvars} variables cuModuleGetGlobal finds in the whole image, "
                     f"{lost} found otherwise, {renamed} named by the compiler under other names; "
                     f"{extra} found that the whole image does not have")
    lines.append("dynamic shared memory launch (fill_dynamic, all it may ask for):")
    for row in launch_rows:
        lines.append(f"  {row['image']:<12} available {row['available']:>7} B, static "
                     f"{row['attributes']['shared']} B, launch CUresult {row['launch']}, "
                     f"sums {'right' if row['correct'] else 'WRONG'}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taskcache", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--only", action="append", default=[], help="GENERATOR/NAME glob (repeatable)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                    help="modules built at a time")
    ap.add_argument("--build-jobs", type=int, default=2, help="taskcache -j for each build")
    args = ap.parse_args()
    try:
        drv = Driver()
    except (OSError, RuntimeError) as e:
        print(f"launch_attributes: no GPU: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="launch-attributes.")
    modules = rwlib.stored_modules() + rwlib.finding_modules()
    if args.only:
        modules = [m for m in modules if any(fnmatch.fnmatch(m.label, g) for g in args.only)]
    results = []

    def build(m):
        try:
            return m, build_images(args, m, work)
        except rwlib.BuildError as e:
            return m, str(e)

    # builds in parallel; the driver's questions in this thread, module by module
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        for m, images in ex.map(build, modules):
            if isinstance(images, str):
                print(f"{m.label}: skipped, ptxas rejects it: {images[:200]}", flush=True)
                continue
            r = check_module(args, drv, m, images)
            results.append(r)
            print(f"{m.label}: {r['kernels']} kernels, {len(r['failures'])} difference(s)" +
                  "".join(f"\n    DIFF {f[:300]}" for f in r["failures"][:8]), flush=True)
            for label in ("nvlink",):
                for a, d in r["modes"].get(label, {}).get("differences", {}).items():
                    print(f"    (nvlink too: {a} for {len(d)} kernel(s), e.g. {d[0]})", flush=True)
    launch_rows = dynamic_launch(args, drv, work)
    failures = [f"{r['module']}: {f}" for r in results for f in r["failures"]]
    failures += [f"dynamic shared launch under {row['image']}: CUresult {row['launch']}, "
                 f"sums {'right' if row['correct'] else 'wrong'}"
                 for row in launch_rows if not row["correct"]]
    with open(os.path.join(args.out, "launch_attributes.json"), "w") as f:
        json.dump({"results": results, "dynamic_launch": launch_rows, "failures": failures}, f, indent=1)
    print(table(results, launch_rows))
    print(f"launch_attributes: {len(results)} modules, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
