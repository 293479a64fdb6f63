"""The GPU test material, checked without a GPU: the specs of tests/gpu/specs
cover every kernel of the CUDA corpus with arguments of the right sizes, and
tests/gpu/gpu_run parses them, builds and checks images without a GPU, and
fails cleanly (exit status 2, "no CUDA driver") where there is no driver.
The GPU runs themselves are scripts/gpu-check.sh."""

import ctypes
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tchelp import PTXAS, ROOT, TASKCACHE, corpus_dir

GPU_DIR = ROOT / "tests" / "gpu"
SPECS = sorted((GPU_DIR / "specs").glob("*.spec"))
# next to the taskcache binary under test (build/, build-asan/, ...)
GPU_RUN = os.environ.get("GPU_RUN_BIN") or str(
    pathlib.Path(TASKCACHE).resolve().parent / "tests" / "gpu" / "gpu_run")
# gpu_run is a test tool: its deliberate leaks at exit are not what the
# sanitizer pass is looking for
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")


def have_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def gpu_run(*args, **kw):
    if not os.access(GPU_RUN, os.X_OK):
        pytest.fail(f"{GPU_RUN} is not built (tests/gpu/CMakeLists.txt builds it when CMake "
                    f"finds the CUDA toolkit)")
    return subprocess.run([GPU_RUN, *map(str, args)], capture_output=True, text=True, env=ENV,
                          timeout=300, **kw)


def test_specs_cover_the_cuda_corpus():
    args = [sys.executable, str(GPU_DIR / "check_specs.py"), "--ptx-dir", corpus_dir()]
    args += ["--gpu-run", GPU_RUN] if os.access(GPU_RUN, os.X_OK) else ["--gpu-run", "none"]
    p = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 problem(s)" in p.stdout


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_spec_images_without_gpu(spec, tmp_path):
    """Cold and warm builds of both variants meet their cache expectations, and
    the image has every kernel and global of the spec, each launch's
    arguments matching the image's own parameter records."""
    sys.path.insert(0, str(GPU_DIR))
    import check_specs
    for variant in check_specs.module_variants(spec.stem):
        ptx = os.path.join(corpus_dir(), variant + ".ptx")
        cache = tmp_path / ("cache-" + variant)
        for expect, hit in (("all", "0"), ("0", "1")):
            out = tmp_path / "r.txt"
            p = gpu_run("--spec", spec, "--ptx", ptx, "--cache", cache, "--build-only",
                        "--expect-compiled", expect, "--expect-module-hit", hit, "--out", out,
                        "--write-image", tmp_path / "img.cubin")
            assert p.returncode == 0, p.stderr + out.read_text()
            text = out.read_text()
            assert text.rstrip().endswith("status ok"), text
            line = next(l for l in text.splitlines() if l.startswith("param-checks "))
            n = line.split()
            assert n[1] == n[3], f"only {line}: .nv.info parameter records missing?"
        p = gpu_run("--spec", spec, "--image", tmp_path / "img.cubin", "--build-only", "--out", out)
        assert p.returncode == 0, p.stderr + out.read_text()


def test_identity_step_build_expectations(tmp_path):
    """The GPU check's identity step, builds only: every module variant's
    builds (cold, warm, edit, each build mode, units of one kernel and an
    edit in them) meet the cache expectations the GPU run checks, whether
    the module is compiled whole or split."""
    if not PTXAS:
        pytest.skip("ptxas not found")
    if not os.access(GPU_RUN, os.X_OK):
        pytest.fail(f"{GPU_RUN} is not built")
    out = tmp_path / "identity.json"
    p = subprocess.run([sys.executable, str(GPU_DIR / "gpu_check.py"), "identity", "--dry-run",
                        "--work", str(tmp_path / "work"), "--json", str(out),
                        "--corpus", corpus_dir(), "--ptxas", PTXAS, "--gpu-run", GPU_RUN],
                       capture_output=True, text=True, env=ENV, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads(out.read_text())["rows"]
    sys.path.insert(0, str(GPU_DIR))
    import check_specs
    assert len(rows) == sum(len(check_specs.module_variants(s.stem)) for s in SPECS)
    bad = {r["module"]: r["problems"] for r in rows if r["result"] != "DRY"}
    assert not bad, bad
    # both paths are covered: these small modules are compiled whole by
    # default, and split into units of the default size when it is given
    assert all(r["builds"]["cold"]["split"] == "0" for r in rows)
    assert all(r["builds"]["cold-ewp"]["split"] == "1" for r in rows)
    assert all(r["builds"]["edit-1"]["units_compiled"] == "1" for r in rows)


def test_no_driver_fails_cleanly(tmp_path):
    if have_driver():
        pytest.skip("a CUDA driver is installed here: the GPU runs are scripts/gpu-check.sh")
    spec = GPU_DIR / "specs" / "params.spec"
    ptx = os.path.join(corpus_dir(), "params.ptx")
    for mode in (["--ptx", ptx, "--cache", tmp_path / "c"], ["--ptx-jit", ptx]):
        out = tmp_path / "r.txt"
        p = gpu_run("--spec", spec, *mode, "--seed", "1", "--out", out)
        assert p.returncode == 2, p.stderr
        assert "no CUDA driver" in p.stderr, p.stderr
        assert "no CUDA driver" in out.read_text().splitlines()[-1]
        assert p.stdout == ""
    p = gpu_run("--spec", "auto", "--ptx-jit", ptx, "--first-launch")
    assert p.returncode == 2 and "no CUDA driver" in p.stderr, p.stderr


def test_spec_errors_are_reported_with_their_line(tmp_path):
    bad = tmp_path / "bad.spec"
    bad.write_text("buf in f32 16 in\nlaunch k grid=1 block=32 @nope\n")
    p = gpu_run("--spec", bad, "--check-spec")
    assert p.returncode == 2
    assert f"{bad}:2: spec error" in p.stderr and "nope" in p.stderr
    bad.write_text("buf in f33 16 in\n")
    p = gpu_run("--spec", bad, "--check-spec")
    assert p.returncode == 2 and f"{bad}:1:" in p.stderr and "f33" in p.stderr


def test_uncovered_and_mismatched_kernels_fail(tmp_path):
    ptx = os.path.join(corpus_dir(), "printf_kernels.ptx")
    lines = (GPU_DIR / "specs" / "printf_kernels.spec").read_text().splitlines()
    # a kernel the spec does not launch
    spec = tmp_path / "missing.spec"
    spec.write_text("\n".join(l for l in lines if "pk_hello" not in l) + "\n")
    p = gpu_run("--spec", spec, "--ptx", ptx, "--cache", tmp_path / "c", "--build-only",
                "--out", tmp_path / "r.txt")
    assert p.returncode == 1 and "pk_hello" in p.stderr, p.stderr
    assert "uncovered pk_hello" in (tmp_path / "r.txt").read_text()
    # an argument of the wrong size
    spec = tmp_path / "size.spec"
    spec.write_text("\n".join(l.replace("f32:2.5", "f64:2.5") for l in lines) + "\n")
    p = gpu_run("--spec", spec, "--ptx", ptx, "--cache", tmp_path / "c", "--build-only",
                "--out", tmp_path / "r.txt")
    assert p.returncode == 1 and "pk_scale parameter 3 is 4 bytes" in p.stderr, p.stderr
    # a wrong build expectation (the module is now cached: nothing compiles)
    p = gpu_run("--spec", GPU_DIR / "specs" / "printf_kernels.spec", "--ptx", ptx, "--cache",
                tmp_path / "c", "--build-only", "--expect-compiled", "all", "--out",
                tmp_path / "r.txt")
    assert p.returncode == 1 and "EXPECTATION FAILED" in p.stderr, p.stderr


def test_membar_edit_compiles_and_changes_one_kernel(tmp_path):
    from tchelp import PTXAS
    sys.path.insert(0, str(GPU_DIR))
    import gpu_check
    ptx = os.path.join(corpus_dir(), "globals_atomics.ptx")
    edited = tmp_path / "edit.ptx"
    kernel = gpu_check.make_edit(ptx, str(edited))
    assert kernel == "_Z14ga_count_abovePKiii"  # first in byte order
    a, b = tmp_path / "a.cubin", tmp_path / "b.cubin"
    subprocess.run([PTXAS, "-arch=sm_90", ptx, "-o", a], check=True)
    subprocess.run([PTXAS, "-arch=sm_90", edited, "-o", b], check=True)
    ca, cb = gpu_check.cubin_code(str(a)), gpu_check.cubin_code(str(b))
    assert [k for k in ca if ca[k] != cb.get(k)] == [kernel]



def test_the_kernel_an_edit_picks_is_found_past_comments():
    """make_edit's kernels (ptxitems): a comment inside a kernel's header
    hides nothing, a kernel written only in a comment is none."""
    sys.path.insert(0, str(GPU_DIR))
    import gpu_check
    with open(os.path.join(corpus_dir(), "comments.ptx")) as f:
        text = f.read()
    found = gpu_check.entry_bodies(text)
    assert [name for name, _ in found] == ["cm_first", "cm_second", "cm_empty"]
    assert all(text[pos - 1] == "{" for _, pos in found)

# ---- tests/gpu/realworld_identity.py: the real-world corpus on the GPU -----------------------

RW_SCRIPT = GPU_DIR / "realworld_identity.py"


def realworld_identity(tmp_path, *args, gpu_run_bin=GPU_RUN, env=ENV):
    return subprocess.run([sys.executable, str(RW_SCRIPT), "--taskcache", TASKCACHE, "--gpu-run",
                           str(gpu_run_bin), "--no-nvrtc", "--jobs", "2", "--build-jobs", "1",
                           "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                           *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_realworld_launches_follow_each_kernels_ptx():
    """Arguments come from the signature; the block is the one the kernel was
    compiled for; a kernel that uses an `.extern .shared` array (Triton's
    `.align 16 .b8 global_smem[]`) gets dynamic shared memory."""
    sys.path.insert(0, str(GPU_DIR))
    import realworld_identity as rw
    text = """
.extern .shared .align 16 .b8 global_smem[];
.visible .entry tri(.param .u64 .ptr .global .align 1 tri_param_0, .param .u32 tri_param_1,
                    .param .f32 tri_param_2)
.reqntid 128
{ mov.b32 %r1, global_smem; ret; }
.visible .entry cub(.param .u64 cub_param_0, .param .u64 cub_param_1,
                    .param .align 8 .b8 cub_param_2[24])
.maxntid 256, 1, 1
{ ld.param.u64 %rd1, [cub_param_0]; cvta.to.global.u64 %rd2, %rd1;
  ld.param.u64 %rd3, [cub_param_1]; setp.lt.u64 %p1, %rd3, 5; ret; }
.visible .entry decl(.param .u32 x);
"""
    launches = {k: (d, l) for k, d, l in rw.module_launches(text)}
    assert sorted(launches) == ["cub", "tri"]  # a declaration is no kernel to run
    decls, line = launches["tri"]
    assert "block=128 " in line and f"shmem={rw.DYNAMIC_SHARED} " in line
    assert line.endswith(f"@k0_p0 u32:{rw.INT_VALUE} f32:0.5")
    decls, line = launches["cub"]
    # cub_param_0 is used as an address, cub_param_1 is compared: a pointer and a count
    assert "block=256,1,1 " in line and "shmem=0 " in line
    assert line.endswith(f"@k1_p0 u64:{rw.INT_VALUE} blob:k1_p2")
    assert decls == [f"buf k1_p0 f32 {rw.BUF_FLOATS} in", "blob k1_p2 24"]


def test_warp_kernels_get_their_bounds_and_arrays():
    """A Warp kernel's first parameter is its launch bounds and its arrays are
    structs holding a data pointer: zero structs would run nothing, so the
    bounds say grid x block threads and each array points at a buffer of its
    own (gpu_run's addr), one dimension of that many elements; other
    structs stay zero, and other kernels' structs of those sizes too."""
    sys.path.insert(0, str(GPU_DIR))
    import realworld_identity as rw
    text = """
.visible .entry step_1a2b3c4d_cuda_kernel_forward(.param .align 8 .b8 p0[32],
    .param .align 8 .b8 p1[56], .param .align 4 .b8 p2[12], .param .f32 p3)
{ ret; }
.visible .entry other(.param .align 8 .b8 q0[32], .param .align 8 .b8 q1[56])
{ ret; }
"""
    launches = {k: (d, l) for k, d, l in rw.module_launches(text)}
    decls, line = launches["step_1a2b3c4d_cuda_kernel_forward"]
    n = rw.GRID * rw.DEFAULT_BLOCK
    assert decls == ["blob k0_p0 32", f"set k0_p0 0 i32 {n}", "set k0_p0 16 i32 1",
                     f"set k0_p0 24 u64 {n}", "blob k0_p1 56",
                     f"buf k0_p1_data f32 {rw.BUF_FLOATS} in", "addr k0_p1 0 k0_p1_data",
                     f"set k0_p1 16 i32 {n}", "set k0_p1 32 i32 16", "set k0_p1 48 i32 1",
                     "blob k0_p2 12"]
    assert line.endswith("blob:k0_p0 blob:k0_p1 blob:k0_p2 f32:0.5")
    assert launches["other"][0] == ["blob k1_p0 32", "blob k1_p1 56"]


def test_addr_puts_a_buffer_address_in_a_blob(tmp_path):
    """gpu_run's addr directive: a buffer declared before, 8 aligned bytes
    inside a blob declared before; anything else is a spec error with its
    line."""
    spec = tmp_path / "a.spec"
    spec.write_text("buf data f32 16 in\nblob arr 56\naddr arr 0 data\n"
                    "launch k grid=1 block=32 blob:arr\n")
    p = gpu_run("--spec", spec, "--check-spec")
    assert p.returncode == 0, p.stderr
    for bad, what in (("addr arr 0 nope", "nope"), ("addr arr 4 data", "offset 4"),
                      ("addr arr 56 data", "offset 56"), ("addr none 0 data", "none")):
        spec.write_text(f"buf data f32 16 in\nblob arr 56\n{bad}\n")
        p = gpu_run("--spec", spec, "--check-spec")
        assert p.returncode == 2 and f"{spec}:3: spec error" in p.stderr and what in p.stderr, bad


def test_realworld_specs_match_the_images(tmp_path):
    """Without a GPU: every generated launch of these modules passes the
    number and sizes of parameters the whole-module image records."""
    p = realworld_identity(tmp_path, "--dry-run", "--only", "triton/single_softmax*",
                           "--only", "numba/single_energy_04", "--only", "nvcc-llmc/dev_softmax_forward",
                           "--only", "nvcc-cccl/cub_select_hist")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "realworld_identity: 4 modules, 0 failure(s)" in p.stdout, p.stdout


FAKE_GPU_RUN = r'''#!/usr/bin/env python3
# stands in for gpu_run: kernel 1 of the module faults under every image,
# kernel 0 leaves other bytes under the image named DIFFER
import hashlib, os, sys
a = sys.argv
spec, out, image = (a[a.index(o) + 1] for o in ("--spec", "--out", "--image"))
f = open(out, "w")
for i, words in enumerate((l.split() for l in open(spec) if l.startswith("launch")), 1):
    k = words[1]
    f.write(f"launch {i} {k} grid=8\n")
    f.flush()
    if "kernel2" in k:
        sys.exit("gpu_run: error: cuCtxSynchronize: illegal address")
    extra = "x" if os.path.basename(image) == os.environ["DIFFER"] and "kernel1" in k else ""
    once = os.environ.get("DIFFER_ONCE")  # a marker file: a race seen in the first run only
    if extra and once:
        extra = "" if os.path.exists(once) else "x"
        open(once, "a").close()
    for w in words[5:]:
        if w.startswith("@"):
            h = hashlib.sha256((k + w + extra).encode()).hexdigest()
            f.write(f"after {i} {k} buf {w[1:]} f32 65536 {h}\n")
f.write("status ok\n")
'''


@pytest.mark.parametrize("differ", ["none", "reloc.cubin"])
def test_realworld_runner_tells_failures_from_kernels_that_cannot_run(tmp_path, differ):
    """A kernel that faults under the whole-module image too is reported as
    not runnable, not as a failure; a kernel whose bytes differ under one of
    taskcache's images fails the run and is named."""
    fake = tmp_path / "fake_gpu_run"
    fake.write_text(FAKE_GPU_RUN)
    fake.chmod(0o755)
    p = realworld_identity(tmp_path, "--only", "nvcc-llmc/dev_gelu_forward", gpu_run_bin=fake,
                           env=dict(ENV, DIFFER=differ))
    row = next(l for l in p.stdout.splitlines() if l.startswith("nvcc-llmc/dev_gelu_forward "))
    # kernels, compared, fault/hang, nondet, outside, codegen, default, reloc, unit1
    cells = row.split()[1:]
    assert cells[:6] == ["2", "1", "1", "0", "0", "0"], row
    if differ == "none":
        assert p.returncode == 0, p.stdout + p.stderr
        assert cells[6:] == ["1/1", "1/1", "1/1"], row
    else:
        assert p.returncode == 1, p.stdout + p.stderr
        assert cells[6:] == ["1/1", "0/1", "1/1"], row
        assert "FAIL nvcc-llmc/dev_gelu_forward: reloc: _Z20gelu_forward_kernel1" in p.stdout, p.stdout


def test_realworld_runner_sets_apart_a_kernel_that_differs_once(tmp_path):
    """A kernel whose bytes differ under a taskcache image in one run and
    not when that image runs again raced (its code is the whole build's);
    it is set apart as nondeterministic, not failed. A wrong binary gives
    the same wrong bytes every time (the test above)."""
    fake = tmp_path / "fake_gpu_run"
    fake.write_text(FAKE_GPU_RUN)
    fake.chmod(0o755)
    p = realworld_identity(tmp_path, "--only", "nvcc-llmc/dev_gelu_forward", gpu_run_bin=fake,
                           env=dict(ENV, DIFFER="reloc.cubin",
                                    DIFFER_ONCE=str(tmp_path / "raced")))
    row = next(l for l in p.stdout.splitlines() if l.startswith("nvcc-llmc/dev_gelu_forward "))
    cells = row.split()[1:]
    assert p.returncode == 0, p.stdout + p.stderr
    assert cells[3] == "1" and "FAIL" not in p.stdout, p.stdout


def test_launch_attributes_tell_rounding_from_a_difference():
    """launch_attributes.py (step (g2)) lets a static shared size pass only
    when it is below the whole image's by ptxas's rounding to 16 bytes and
    the kernel has at least as much dynamic shared memory; anything else
    about shared memory is a difference, and registers are counted as code
    quality in both directions."""
    sys.path.insert(0, str(GPU_DIR))
    import launch_attributes as la
    diff = {"shared": [("rounded", 48, 44), ("larger", 48, 64), ("smaller", 48, 16),
                       ("less_dynamic", 544, 532)],
            "available_dynamic_shared": [("rounded", 232400, 232404),
                                         ("less_dynamic", 232000, 231000)],
            "registers": [("rounded", 20, 22), ("smaller", 30, 24)],
            "blocks_per_sm": [("rounded", 16, 12)]}
    assert la.padding_only(diff) == {"rounded"}
    assert la.quality(diff) == {"registers_above": 1, "registers_below": 1, "local_above": 0,
                                "blocks_per_sm_below": 1}
    whole = {"k": {"shared": 0, "registers": 10}, "gone": {"shared": 0, "registers": 8}}
    other = {"k": {"shared": 16, "registers": 10}}
    assert la.compare(whole, other) == {"kernel": [("gone", True, False)],
                                        "shared": [("k", 0, 16)]}
    # cuModuleGetGlobal: what the whole image gives must come the same, but
    # for names the compiler made up, which units name otherwise
    lost, extra, renamed = la.compare_variables(
        {"a": 4, "b": 8, "c": None, "d": 16, "$str": 11, "__unnamed_1": 70, "$__n__12": 4},
        {"a": 4, "b": 16, "c": 4, "$__tcA0123": 11, "$__n__6": 4})
    assert lost == [("b", 8, 16), ("d", 16, None)]
    assert extra == ["$__n__6", "$__tcA0123", "c"]
    assert [x[0] for x in renamed] == ["$__n__12", "$str", "__unnamed_1"]


def test_launch_attributes_without_a_driver(tmp_path):
    if have_driver():
        pytest.skip("a CUDA driver is installed here: the GPU runs are scripts/gpu-check.sh")
    p = subprocess.run([sys.executable, GPU_DIR / "launch_attributes.py", "--taskcache", TASKCACHE,
                        "--out", tmp_path], capture_output=True, text=True)
    assert p.returncode == 2 and "no GPU" in p.stderr, p.stderr
    assert not (tmp_path / "launch_attributes.json").exists()
