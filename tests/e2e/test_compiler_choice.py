"""The compiler a user names is the compiler that runs, and the image is the
same on every machine.

A ptxas named with --ptxas, $TASKCACHE_PTXAS or $CUDA_HOME compiles; the
in-process compiler stands in for it only when it is the very release
(compared by `ptxas --version`). $TASKCACHE_COMPILER takes exactly ptxas,
inprocess or auto. -v and explain name the compiler that compiled. A
module compiled whole or split gives the same bytes whatever the count of
CPUs the compiler sees."""

import os
import shutil
import subprocess

import pytest

from tchelp import ARCH, PER_KERNEL, PTXAS, ROOT, TASKCACHE, build, run, tc

MODULE = str(ROOT / "examples" / "physics_step.ptx")  # 120 kernels: split by default


def have_inprocess():
    return "with the in-process compiler" in tc("version").stdout


def release_of(ptxas):
    out = run([ptxas, "--version"]).stdout
    return out.split(", V")[1].split()[0]


def fake_ptxas(tmp_path, release, name="ptxas"):
    """A ptxas that says it is `release` and counts its compiles in a file
    beside it (then runs NVIDIA's)."""
    d = tmp_path / f"fake-{release}" / "bin"
    d.mkdir(parents=True)
    calls = d / "calls"
    p = d / name
    p.write_text('#!/bin/sh\n'
                 'case "$*" in *--version*)\n'
                 '  echo "ptxas: NVIDIA (R) Ptx optimizing assembler"\n'
                 f'  echo "Cuda compilation tools, release {release.rsplit(".", 1)[0]}, '
                 f'V{release}"\n'
                 '  echo "Build cuda_13.0.r13.0/compiler.1_0"; exit 0;;\n'
                 'esac\n'
                 f'echo x >> "{calls}"\n'
                 f'exec "{PTXAS}" "$@"\n')
    p.chmod(0o755)
    return p, calls


def compiles(calls):
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def compiler_line(stderr):
    return next(l for l in stderr.splitlines() if ": compiler: " in l)


def without_cuda_home():
    return {k: v for k, v in os.environ.items()
            if k not in ("CUDA_HOME", "CUDA_PATH", "TASKCACHE_PTXAS", "TASKCACHE_COMPILER")}


@pytest.mark.parametrize("how", ["--ptxas", "TASKCACHE_PTXAS", "CUDA_HOME"])
def test_a_named_ptxas_of_another_release_compiles(tmp_path, how):
    """Whichever way it is named, a ptxas of another release than the
    in-process compiler compiles every unit, and -v names it with its
    release (before, the in-process 13.0 compiled and the fake was never
    called)."""
    fake, calls = fake_ptxas(tmp_path, "13.9.1")
    env, extra = without_cuda_home(), []
    if how == "--ptxas":
        extra = ["--ptxas", str(fake)]
    elif how == "TASKCACHE_PTXAS":
        env["TASKCACHE_PTXAS"] = str(fake)
    else:
        env["CUDA_HOME"] = str(fake.parent.parent)
    p = build(MODULE, tmp_path / "o.cubin", str(tmp_path / "cache"), "-v", *extra, env=env)
    assert compiles(calls) > 0
    line = compiler_line(p.stderr)
    assert f"ptxas {fake} (release 13.9.1" in line, line
    # the record it made is that compiler's: a hit names it too
    p = build(MODULE, tmp_path / "o.cubin", str(tmp_path / "cache"), "-v", *extra, env=env)
    assert "module record hit" in p.stderr and f"ptxas {fake}" in compiler_line(p.stderr)


def test_the_in_process_compiler_stands_in_only_for_its_release(tmp_path):
    """A named ptxas that is the in-process compiler's very release is
    replaced by it (the same code, no process per unit), and -v says whose
    release it is; without the in-process compiler, that ptxas compiles."""
    fake, calls = fake_ptxas(tmp_path, release_of(PTXAS))
    p = build(MODULE, tmp_path / "o.cubin", None, "-v", "--ptxas", str(fake),
              env=without_cuda_home())
    line = compiler_line(p.stderr)
    if have_inprocess():
        assert compiles(calls) == 0
        assert f"(in-process; the release of {fake})" in line, line
    else:
        assert compiles(calls) > 0 and f"ptxas {fake}" in line


def test_nothing_named_uses_the_in_process_compiler(tmp_path):
    if not have_inprocess():
        pytest.skip("built without the in-process compiler")
    p = build(MODULE, tmp_path / "o.cubin", None, "-v", env=without_cuda_home())
    assert compiler_line(p.stderr).endswith("(in-process)")


def test_a_named_ptxas_that_cannot_run_fails_the_build(tmp_path):
    """Falling back to another compiler would build with one the user did
    not choose."""
    p = build(MODULE, tmp_path / "o.cubin", None, "--ptxas", str(tmp_path / "none"),
              check=False)
    assert p.returncode == 1 and "cannot run the ptxas named" in p.stderr
    p = build(MODULE, tmp_path / "o.cubin", None, check=False,
              env=dict(without_cuda_home(), TASKCACHE_PTXAS=str(tmp_path / "none")))
    assert p.returncode == 1 and "cannot run the ptxas named" in p.stderr


@pytest.mark.parametrize("var,value", [("TASKCACHE_COMPILER", ""),
                                       ("TASKCACHE_COMPILER", "PTXAS"),
                                       ("TASKCACHE_COMPILER", "in-process"),
                                       ("TASKCACHE_UNIT_CODE", ""),
                                       ("TASKCACHE_UNIT_CODE", "wholeprogram")])
def test_an_unknown_compiler_variable_is_a_usage_error(tmp_path, var, value):
    """build, explain, the ptxas front end and run all refuse it, with the
    variable and its value in the message; none builds with a compiler of
    its own choosing."""
    env = dict(os.environ, **{var: value})
    msg = f"{var} is '{value}'"
    for args in (["build", MODULE, "-o", str(tmp_path / "o.cubin"), "--arch", ARCH, "--no-cache"],
                 ["explain", MODULE, "--arch", ARCH, "--no-cache"],
                 ["ptxas", f"-arch={ARCH}", MODULE, "-o", str(tmp_path / "p.cubin")],
                 ["run", "--", "true"]):
        p = tc(*args, env=env, check=False)
        assert p.returncode == 2 and msg in p.stderr, (args, p.stderr)
    assert not (tmp_path / "o.cubin").exists() and not (tmp_path / "p.cubin").exists()


def test_the_option_replaces_an_unknown_variable(tmp_path):
    env = dict(os.environ, TASKCACHE_COMPILER="bogus")
    build(MODULE, tmp_path / "o.cubin", None, "--compiler", "ptxas", env=env)
    tc("build", MODULE, "-o", str(tmp_path / "o.cubin"), "--arch", ARCH, "--no-cache",
       env=dict(os.environ, TASKCACHE_COMPILER="auto"))


def test_ptxas_front_end_compiles_with_the_ptxas_it_stands_in_for(tmp_path):
    """Triton's bundled ptxas, clang's --ptxas-path: TASKCACHE_PTXAS of
    another release compiles, under the default TASKCACHE_COMPILER, and the
    log line names it."""
    fake, calls = fake_ptxas(tmp_path, "13.9.1")
    env = dict(without_cuda_home(), TASKCACHE_PTXAS=str(fake), TASKCACHE_LOG=str(tmp_path / "log"),
               TASKCACHE_DIR=str(tmp_path / "cache"))
    tc("ptxas", f"-arch={ARCH}", MODULE, "-o", str(tmp_path / "p.cubin"), env=env)
    assert compiles(calls) > 0
    log = (tmp_path / "log").read_text()
    assert f"compiler: ptxas {fake} (release 13.9.1" in log, log


def test_explain_names_the_compiler(tmp_path):
    fake, _ = fake_ptxas(tmp_path, "13.9.1")
    p = tc("explain", MODULE, "--arch", ARCH, "--no-cache", "--ptxas", str(fake))
    assert f"compiler: ptxas {fake} (release 13.9.1" in p.stdout
    p = tc("explain", MODULE, "--arch", ARCH, "--no-cache", "--ptxas", str(fake), "--json")
    assert f'"compiler": "ptxas {fake} (release 13.9.1' in p.stdout


# ---- one CPU or many: the same bytes --------------------------------------------------

def one_cpu_command(args, tmp_path):
    """args run where /sys says the machine has one CPU, as ptxas and
    taskcache read it (ptxas reads /sys/devices/system/cpu/possible,
    taskcache and glibc's sysconf .../online): a private mount namespace
    with both files replaced. None when this machine does not allow one."""
    one = tmp_path / "one-cpu"
    one.write_text("0\n")
    script = ("mount --bind {0} /sys/devices/system/cpu/possible && "
              "mount --bind {0} /sys/devices/system/cpu/online && exec \"$@\"").format(one)
    cmd = ["unshare", "-m", "sh", "-c", script, "sh"]
    probe = subprocess.run(cmd + ["cat", "/sys/devices/system/cpu/possible"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != "0" or not shutil.which("unshare"):
        return None
    return cmd + [str(a) for a in args]


@pytest.mark.parametrize("compiler", ["ptxas", "inprocess"])
@pytest.mark.parametrize("mode", [["--no-split"], list(PER_KERNEL)])
def test_one_cpu_and_many_give_the_same_image(tmp_path, compiler, mode):
    """A module compiled whole gets compiler threads (--split-compile=0) and
    whole-program units two (--split-compile=2): one CPU gives ptxas one
    worker thread, which must lay out the image as two or sixteen do, or a
    shared cache would hold two byte layouts under one key."""
    if compiler == "inprocess" and not have_inprocess():
        pytest.skip("built without the in-process compiler")
    args = [MODULE, "--arch", ARCH, "--no-cache", "--compiler", compiler, *mode]
    cmd = one_cpu_command([TASKCACHE, "build", *args, "-o",
                           tmp_path / "one.cubin"], tmp_path)
    if cmd is None:
        pytest.skip("this machine allows no private mount namespace (unshare -m) to "
                    "show one CPU in")
    # it sees one CPU there (what ptxas reads)
    seen = subprocess.run(cmd[:6] + ["cat", "/sys/devices/system/cpu/possible"],
                          capture_output=True, text=True).stdout.strip()
    assert seen == "0"
    run(cmd)
    tc("build", *args, "-o", str(tmp_path / "many.cubin"))
    assert (tmp_path / "one.cubin").read_bytes() == (tmp_path / "many.cubin").read_bytes()
