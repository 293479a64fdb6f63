"""numba_host: numba-cuda kernels compiled through taskcache, the Python
recipe of docs/embedding.md as a program.

    python3 examples/numba_host.py KERNELS.py CACHE_DIR [--arch sm_90]

KERNELS.py defines KERNELS = [(function, [signature, ...]), ...]; each
function and signature is one task. A task is keyed before Numba runs, by
everything Numba's output depends on: the function's code and the values
of the globals and closure cells it reads (Numba freezes them into the
code; taskcache.function_key walks them), the signature, the compute
capability and options, and the versions of everything that compiles.
Numba's codegen runs only for tasks the cache lacks. Prints one JSON line:
the tasks codegen ran for, every task's name, and the image's SHA-256. No
GPU is needed (compile_ptx); without taskcache installed, set PYTHONPATH
to the repository's python/ and TASKCACHE_LIB to libtaskcache.so.
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import re
import sys

import llvmlite
import numba
import numba_cuda
from numba import cuda
from numba.cuda.cudadrv import nvvm

import taskcache as tc

OPTIONS = {"fastmath": False, "opt": True, "lineinfo": False}


def versions() -> str:
    """The host's version string: what compiles, as part of every key."""
    parts = ["numba_host 1", f"numba-cuda {numba_cuda.__version__}",
             f"numba {numba.__version__}", f"llvmlite {llvmlite.__version__}",
             f"NVVM {nvvm.NVVM().get_version()}"]
    try:
        parts.append(f"nvidia-nvvm {importlib.metadata.version('nvidia-nvvm')}")
    except importlib.metadata.PackageNotFoundError:
        pass
    return "; ".join(parts)


def task_name(fn, sig) -> str:
    """One PTX identifier per function and signature."""
    return f"{fn.__name__}_{hashlib.sha256(str(sig).encode()).hexdigest()[:12]}"


def task_key(fn, sig, cc) -> bytes:
    return tc.function_key(fn, str(sig), cc, sorted(OPTIONS.items()),
                           lines=OPTIONS["lineinfo"])


def stable_names(ptx: str, name: str) -> str:
    """Numba names a kernel, and its environment, after a counter of the
    process ("..B2v7.."): the PTX would depend on what the process compiled
    before. The task's name, which the key covers, replaces them."""
    mangled = re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)
    ptx = ptx.replace("_ZN08NumbaEnv" + mangled[3:], name + "_env")
    return ptx.replace(mangled, name)


def load_kernels(path):
    spec = importlib.util.spec_from_file_location("kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(fn, sig) for fn, sigs in module.KERNELS for sig in sigs]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels")
    ap.add_argument("cache")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    m = re.fullmatch(r"sm_(\d+)(\d)", args.arch)
    if not m:
        ap.error(f"--arch {args.arch}: expected sm_XY")
    cc = (int(m.group(1)), int(m.group(2)))
    kernels = load_kernels(args.kernels)
    ran = []

    def codegen(index, task):                 # only on a miss, on a worker thread
        fn, sig = kernels[index]
        ran.append(task.name)
        ptx, _ = cuda.compile_ptx(fn, sig, cc=cc, fastmath=OPTIONS["fastmath"],
                                  opt=OPTIONS["opt"], lineinfo=OPTIONS["lineinfo"])
        return stable_names(ptx, task.name), json.dumps({"block": 256}).encode()

    tasks = [tc.Task(task_name(fn, sig), task_key(fn, sig, cc)) for fn, sig in kernels]
    with tc.Cache(args.cache) as cache:
        result = cache.build_tasks(tasks, codegen, tc.Options(arch=args.arch),
                                   version=versions(), serialize=True)
    print(json.dumps({"codegen": sorted(ran), "tasks": [t.name for t in result.tasks],
                      "image": hashlib.sha256(result.image).hexdigest()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
