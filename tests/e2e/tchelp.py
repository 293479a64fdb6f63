"""Helpers of the end-to-end tests (fixtures are in conftest.py).

They drive the `taskcache` command line in fresh processes, exactly as a
user or a build system would. The binary is $TASKCACHE_BIN, else
build/taskcache. The test corpus is compiled from tests/corpus once per
session (nvcc, ptxas and llc from the CUDA toolkit and LLVM)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TASKCACHE = os.environ.get("TASKCACHE_BIN") or str(ROOT / "build" / "taskcache")
ARCH = "sm_90"

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(ROOT / "scripts"))
from cuda_tools import find_tool  # noqa: E402  (scripts/cuda_tools.py)


PTXAS = find_tool("ptxas")
NVCC = find_tool("nvcc")


# A small module (its kernels fit in one unit, or cost 1,500 statements or
# less) is compiled whole (no link). Tests of how split builds key, store
# and link units use small modules, so they ask for one unit per kernel,
# which a large module gets anyway.
PER_KERNEL = ("--unit-cost", "1")


def slow_ptxas(tmp_path, seconds):
    """A ptxas that takes `seconds` longer over every compile."""
    p = tmp_path / "slow-ptxas"
    p.write_text(f'#!/bin/sh\ncase "$*" in *--version*) ;; *) sleep {seconds} ;; esac\n'
                 f'exec "{PTXAS}" "$@"\n')
    p.chmod(0o755)
    return p


def run(args, check=True, **kw):
    """Runs a command; returns the CompletedProcess with text output."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def tc(*args, check=True, **kw):
    """Runs taskcache with the given arguments."""
    return run([TASKCACHE, *args], check=check, **kw)


_host_args = None


def as_a_host():
    """Arguments with which `taskcache build` builds as a program that
    embeds the library does (the interceptor, a JIT): the in-process
    compiler without threads of its own, as the command line gives it when
    it is asked for by name (tc_options_set_inprocess_threads)."""
    global _host_args
    if _host_args is None:
        _host_args = (("--compiler", "inprocess")
                      if "with the in-process compiler" in tc("version").stdout else ())
    return _host_args


def build(ptx, out, cache, *extra, check=True, **kw):
    args = ["build", ptx, "-o", out, "--arch", ARCH]
    args += ["--cache-dir", cache] if cache else ["--no-cache"]
    return tc(*args, *extra, check=check, **kw)


def stats(cache):
    return json.loads(tc("stats", "--cache-dir", cache, "--json").stdout)


def explain(ptx, cache, *extra):
    return json.loads(tc("explain", ptx, "--arch", ARCH, "--cache-dir", cache, "--json",
                         *extra).stdout)


def slice_keys(ptx, cache, *extra):
    """kernel name -> slice key."""
    return {e["name"]: e["slice_key"] for e in explain(ptx, cache, *extra)["entries"]}


def nvcc_ptx(source_text, path, *flags):
    """Compiles CUDA source text to PTX at path (skips when nvcc is absent)."""
    if not NVCC:
        pytest.skip("nvcc not found")
    cu = pathlib.Path(path).with_suffix(".cu")
    cu.write_text(source_text)
    run([NVCC, "-ptx", "-arch=sm_90", *flags, cu, "-o", path])
    return str(path)


_corpus_dir = None


def corpus_dir():
    """Builds the corpus once per session; $TASKCACHE_CORPUS may name a
    directory that already holds it."""
    global _corpus_dir
    if _corpus_dir is None:
        pre = os.environ.get("TASKCACHE_CORPUS")
        if pre and os.path.isdir(pre):
            _corpus_dir = pre
        else:
            import tempfile
            _corpus_dir = tempfile.mkdtemp(prefix="taskcache-corpus-")
            run(["bash", ROOT / "tests" / "corpus" / "build_corpus.sh", _corpus_dir])
    return _corpus_dir


def corpus_files():
    if not NVCC or not PTXAS:
        return []
    d = corpus_dir()
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".ptx"))


