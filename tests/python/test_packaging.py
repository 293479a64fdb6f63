"""How the package finds its library, and what the installed package
carries: run against the checkout (library in build/) and, by
scripts/test-packages.sh, against the wheel installed in a fresh virtual
environment (TASKCACHE_TEST_INSTALLED=1), where it must need nothing but
itself."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import taskcache as tc
from taskcache import _L

ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTALLED = os.environ.get("TASKCACHE_TEST_INSTALLED") == "1"
PACKAGE = pathlib.Path(tc.__file__).resolve().parent


def loaded_by(env):
    """The library a fresh `import taskcache` loads under env, or the error."""
    code = "import taskcache; print(taskcache._L()._name)"
    if not INSTALLED:
        env = dict(env, PYTHONPATH=str(ROOT / "python"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd="/")
    return pathlib.Path(p.stdout.strip()) if p.returncode == 0 else p.stderr


def test_versions_agree():
    cmake = re.search(r"project\(taskcache VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt")
                      .read_text()) if (ROOT / "CMakeLists.txt").exists() else None
    pyproject = ROOT / "python" / "pyproject.toml"
    versions = {"library": tc.library_version()}
    if cmake:
        versions["CMakeLists.txt"] = cmake.group(1)
    if pyproject.exists():
        versions["pyproject.toml"] = re.search(r'^version = "([0-9.]+)"', pyproject.read_text(),
                                               re.M).group(1)
    if INSTALLED:
        from importlib.metadata import version
        versions["installed package"] = version("taskcache")
    assert len(set(versions.values())) == 1, versions


@pytest.mark.skipif(not INSTALLED, reason="the checkout's package has no bundled library")
def test_the_installed_package_uses_the_library_it_carries():
    assert not str(PACKAGE).startswith(str(ROOT / "python"))
    assert "TASKCACHE_LIB" not in os.environ
    assert pathlib.Path(_L()._name) == PACKAGE / "libtaskcache.so"
    # and a fresh process does the same with nothing set
    assert loaded_by(dict(os.environ)) == PACKAGE / "libtaskcache.so"


def test_taskcache_lib_overrides(tmp_path):
    copy = tmp_path / "libtaskcache-copy.so"
    shutil.copy(_L()._name, copy)
    env = dict(os.environ, TASKCACHE_LIB=str(copy))
    assert loaded_by(env) == copy
    # one that cannot be loaded is an error that names it, not a quiet fallback
    env["TASKCACHE_LIB"] = str(tmp_path / "missing.so")
    err = loaded_by(env)
    assert isinstance(err, str) and f"cannot load TASKCACHE_LIB={tmp_path}/missing.so" in err


@pytest.mark.skipif(not INSTALLED, reason="the command line of the wheel")
def test_the_installed_command_line(tmp_path):
    exe = shutil.which("taskcache", path=str(pathlib.Path(sys.executable).parent))
    assert exe, "the wheel's console script is missing"
    out = subprocess.run([exe, "version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"taskcache {tc.library_version()} ")
    # taskcache run finds the interceptor the wheel carries (no GPU needed to start it)
    p = subprocess.run([exe, "run", "--", sys.executable, "-c",
                        "import os; print(os.environ['LD_PRELOAD'])"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    preloaded = p.stdout.strip().split(":")[0]
    assert os.path.realpath(preloaded) == str(PACKAGE / "lib" / "libtaskcache_intercept.so")
    # the shims point at the program itself, not at the Python script
    p = subprocess.run([exe, "shims", str(tmp_path / "shims")], capture_output=True, text=True)
    if p.returncode != 0 and "cannot find NVIDIA's ptxas" in p.stderr:
        pytest.skip("no CUDA toolkit")
    assert p.returncode == 0, p.stderr
    ptxas = tmp_path / "shims" / "bin" / "ptxas"
    assert os.path.realpath(ptxas) == str(PACKAGE / "bin" / "taskcache")
    real = subprocess.run([shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas", "--version"],
                          capture_output=True, text=True)
    mine = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True)
    assert (mine.returncode, mine.stdout) == (real.returncode, real.stdout)


@pytest.mark.skipif(not INSTALLED, reason="the wheel's binaries")
def test_the_wheel_needs_nothing_but_glibc():
    """libcrypto and libzstd are inside, hidden: the interceptor, preloaded
    into programs with an OpenSSL of their own, must not bring a second one
    into their global scope."""
    system = ("linux-vdso", "libc.so", "ld-linux", "libm.so", "libpthread.so", "libdl.so",
              "librt.so")
    for f in (PACKAGE / "libtaskcache.so", PACKAGE / "bin" / "taskcache",
              PACKAGE / "lib" / "libtaskcache_intercept.so",
              PACKAGE / "lib" / "libtaskcache_jit.so"):
        needed = subprocess.run(["ldd", str(f)], capture_output=True, text=True,
                                check=True).stdout.split("\n")
        assert [x for x in needed if x.strip() and not any(n in x for n in system)] == [], f


@pytest.mark.skipif(not INSTALLED, reason="the wheel's remote tier")
def test_the_wheel_has_both_kinds_of_remote():
    """hiredis is linked in; libcurl is the machine's, opened when an HTTP
    remote is first used: both get as far as the (closed) port."""
    exe = shutil.which("taskcache", path=str(pathlib.Path(sys.executable).parent))
    redis = subprocess.run([exe, "remote", "check", "--remote", "redis://127.0.0.1:1"],
                           capture_output=True, text=True)
    assert "cannot connect to 127.0.0.1:1" in redis.stdout + redis.stderr
    http = subprocess.run([exe, "remote", "check", "--remote", "http://127.0.0.1:1/c"],
                          capture_output=True, text=True)
    assert http.returncode != 0
    out = http.stdout + http.stderr
    if "HTTP remotes need libcurl on this machine" in out:
        pytest.skip("no libcurl.so.4 here")
    assert "127.0.0.1" in out and "reachable      no" in out, out
