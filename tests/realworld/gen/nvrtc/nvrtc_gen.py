#!/usr/bin/env python3
"""Generates the NVRTC part of taskcache's real-world corpus at test time.

Compiles CUDA C++ source with libnvrtc (through ctypes, as CuPy and other
runtime-compilation users call it) into PTX for sm_90: template kernels
written for this corpus on top of CUB's block-level primitives (BlockLoad,
BlockReduce, BlockScan, BlockRadixSort, WarpReduce, BlockHistogram) and
libcu++, the parts of CCCL meant for runtime compilation. Every template
instance is requested by name (nvrtcAddNameExpression), the way a JIT asks
NVRTC for the kernels it will launch. A second module is compiled with
-rdc (relocatable device code: extern linkage for helpers and globals).

Usage: nvrtc_gen.py OUTDIR    (writes nvrtc_cub_blocks.ptx, nvrtc_cub_blocks.rdc.ptx)
Exit status 0 also when libnvrtc cannot be found (prints why and writes nothing).
"""

import ctypes
import ctypes.util
import os
import sys

SOURCE = r"""
#include <cub/block/block_histogram.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cuda/std/cstdint>
#include <cuda/std/functional>
#include <cuda/std/limits>

__device__ unsigned long long g_calls;
__constant__ float c_scale[4] = {1.0f, 0.5f, 0.25f, 0.125f};

template <typename T>
__device__ __noinline__ T guarded_load(const T *p, int i, int n, T fill)
{
    atomicAdd(&g_calls, 1ull);
    return i < n ? p[i] : fill;
}

template <typename T, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS) block_sum(const T *in, T *out, int n)
{
    using Load = cub::BlockLoad<T, THREADS, ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
    using Reduce = cub::BlockReduce<T, THREADS>;
    __shared__ union { typename Load::TempStorage load; typename Reduce::TempStorage reduce; } tmp;
    T items[ITEMS];
    int base = blockIdx.x * THREADS * ITEMS;
    Load(tmp.load).Load(in + base, items, n - base, T(0));
    __syncthreads();
    T s = Reduce(tmp.reduce).Sum(items);
    if (threadIdx.x == 0)
        out[blockIdx.x] = s * T(c_scale[blockIdx.x & 3]);
}

template <typename T, int THREADS, int ITEMS, bool INCLUSIVE>
__global__ void __launch_bounds__(THREADS) block_scan(const T *in, T *out, int n)
{
    using Scan = cub::BlockScan<T, THREADS, cub::BLOCK_SCAN_WARP_SCANS>;
    __shared__ typename Scan::TempStorage tmp;
    T items[ITEMS];
    int base = (blockIdx.x * THREADS + threadIdx.x) * ITEMS;
    for (int k = 0; k < ITEMS; ++k)
        items[k] = guarded_load(in, base + k, n, T(0));
    if (INCLUSIVE)
        Scan(tmp).InclusiveSum(items, items);
    else
        Scan(tmp).ExclusiveScan(items, items, T(0), cuda::maximum<>{});
    for (int k = 0; k < ITEMS; ++k)
        if (base + k < n)
            out[base + k] = items[k];
}

template <typename K, typename V, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS) block_sort_pairs(K *keys, V *vals, int n)
{
    using Sort = cub::BlockRadixSort<K, THREADS, ITEMS, V>;
    __shared__ typename Sort::TempStorage tmp;
    K k[ITEMS];
    V v[ITEMS];
    int base = blockIdx.x * THREADS * ITEMS + threadIdx.x * ITEMS;
    for (int i = 0; i < ITEMS; ++i) {
        k[i] = base + i < n ? keys[base + i] : cuda::std::numeric_limits<K>::max();
        v[i] = base + i < n ? vals[base + i] : V();
    }
    Sort(tmp).Sort(k, v);
    for (int i = 0; i < ITEMS; ++i)
        if (base + i < n) {
            keys[base + i] = k[i];
            vals[base + i] = v[i];
        }
}

template <typename T, int WARPS>
__global__ void warp_max(const T *in, T *out, int n)
{
    using WR = cub::WarpReduce<T>;
    __shared__ typename WR::TempStorage tmp[WARPS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    T x = guarded_load(in, i, n, cuda::std::numeric_limits<T>::lowest());
    T m = WR(tmp[threadIdx.x / 32]).Reduce(x, cuda::maximum<>{});
    if ((threadIdx.x & 31) == 0)
        out[i / 32] = m;
}

template <int THREADS, int ITEMS, int BINS>
__global__ void __launch_bounds__(THREADS) block_histogram(const unsigned char *in, unsigned *hist, int n)
{
    using H = cub::BlockHistogram<unsigned char, THREADS, ITEMS, BINS, cub::BLOCK_HISTO_ATOMIC>;
    __shared__ typename H::TempStorage tmp;
    __shared__ unsigned smem[BINS];
    unsigned char items[ITEMS];
    int base = blockIdx.x * THREADS * ITEMS + threadIdx.x * ITEMS;
    for (int i = 0; i < ITEMS; ++i)
        items[i] = base + i < n ? in[base + i] % BINS : 0;
    H(tmp).Histogram(items, smem);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += THREADS)
        atomicAdd(&hist[b], smem[b]);
}
"""


def instances():
    out = []
    for t in ("int", "float", "double", "long long"):
        for threads, items in ((128, 4), (256, 4), (512, 2)):
            out.append(f"block_sum<{t}, {threads}, {items}>")
        for threads, items in ((128, 4), (256, 8)):
            for inc in ("true", "false"):
                out.append(f"block_scan<{t}, {threads}, {items}, {inc}>")
        out.append(f"warp_max<{t}, 8>")
    for k in ("unsigned", "int", "float", "unsigned long long"):
        for v in ("int", "double"):
            out.append(f"block_sort_pairs<{k}, {v}, 128, 4>")
    for bins in (64, 256):
        for threads in (128, 256):
            out.append(f"block_histogram<{threads}, 4, {bins}>")
    return out


def load_nvrtc():
    cands = []
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            cands += [os.path.join(home, "lib64", n) for n in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")]
    found = ctypes.util.find_library("nvrtc")
    if found:
        cands.append(found)
    for c in cands:
        try:
            return ctypes.CDLL(c)
        except OSError:
            continue
    return None


def include_dirs():
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    dirs = [os.path.join(home, "include", "cccl"), os.path.join(home, "include")]
    return [d for d in dirs if os.path.isdir(d)]


def compile_ptx(lib, names, extra):
    prog = ctypes.c_void_p()
    check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), SOURCE.encode(), b"cub_blocks.cu", 0, None, None))
    for n in names:
        check(lib, lib.nvrtcAddNameExpression(prog, n.encode()))
    opts = [b"-arch=compute_90", b"-std=c++17", b"-default-device"] + [o.encode() for o in extra]
    opts += [b"-I" + d.encode() for d in include_dirs()]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        raise SystemExit(f"nvrtc: compile failed ({rc}):\n{log.value.decode(errors='replace')[-4000:]}")
    check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)))
    buf = ctypes.create_string_buffer(size.value)
    check(lib, lib.nvrtcGetPTX(prog, buf))
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return buf.value.decode()


def check(lib, rc):
    if rc != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise SystemExit(f"nvrtc: {lib.nvrtcGetErrorString(rc).decode()}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lib = load_nvrtc()
    if lib is None:
        print("nvrtc_gen: libnvrtc not found; the NVRTC modules are skipped")
        return
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    names = instances()
    for suffix, extra in (("", []), (".rdc", ["-rdc=true"])):
        ptx = compile_ptx(lib, names, extra)
        with open(os.path.join(outdir, f"nvrtc_cub_blocks{suffix}.ptx"), "w") as f:
            f.write(ptx)


if __name__ == "__main__":
    main()
