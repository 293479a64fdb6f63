"""taskcache.function_key: what a Python function's compiled code depends
on, stable from one process to the next."""

import subprocess
import sys
import textwrap

import pytest

import taskcache as tc

MODULE = textwrap.dedent('''
    import math
    SCALE = {scale}
    UNUSED = {unused}
    TABLE = ({table})

    def helper(v):
        return v * SCALE + math.pi

    def kernel(x, n=3):
        return helper(x) + TABLE[n % 3] + len([{body}])

    def make(c):
        def inner(x):
            return x + c
        return inner
''')


def load(tmp_path, name="kmod", **kw):
    params = dict(scale="2.0", unused="1", table="1, 2, 3", body="0")
    params.update(kw)
    path = tmp_path / f"{name}_{abs(hash(tuple(sorted(params.items()))))}.py"
    path.write_text(MODULE.format(**params))
    ns = {"__name__": name}  # one module name: only the contents differ
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def key(ns, *extra):
    return tc.function_key(ns["kernel"], *extra)


def test_same_code_same_key(tmp_path):
    a, b = load(tmp_path), load(tmp_path)
    assert key(a) == key(b) and len(key(a)) == 32


def test_what_the_code_reads_changes_the_key(tmp_path):
    base = key(load(tmp_path))
    assert key(load(tmp_path, scale="3.0")) != base        # a global a helper reads
    assert key(load(tmp_path, table="1, 2, 4")) != base    # a global the kernel reads
    assert key(load(tmp_path, body="1")) != base           # the body
    assert key(load(tmp_path, unused="2")) == base         # a global nobody reads
    assert key(load(tmp_path), "float32[:]") != key(load(tmp_path), "float64[:]")  # extra


CLASSES = textwrap.dedent('''
    import enum
    class Color(enum.IntEnum):
        RED = {red}
        BLUE = 5
    class Cfg:
        BLOCK = {block}
        OTHER = {other}
    def kernel(out):
        out[0] = Color.RED + Cfg.BLOCK
''')


def test_what_the_code_reads_of_its_classes_changes_the_key(tmp_path):
    # numba freezes Color.RED's value into the code: the key hashed the
    # class by name only, and the old binary was served (a review)
    def k(**kw):
        params = dict(red="3", block="128", other="1")
        params.update(kw)
        ns = {"__name__": "cmod"}
        exec(compile(CLASSES.format(**params), "cmod.py", "exec"), ns)
        return tc.function_key(ns["kernel"])
    base = k()
    assert k() == base
    assert k(red="4") != base          # an enum member it reads
    assert k(block="256") != base      # a class constant it reads
    assert k(other="2") == base        # one it does not read


def test_closures_and_defaults(tmp_path):
    ns = load(tmp_path)
    assert tc.function_key(ns["make"](1)) != tc.function_key(ns["make"](2))
    assert tc.function_key(ns["make"](1)) == tc.function_key(ns["make"](1))
    ns2 = load(tmp_path)
    ns2["kernel"].__defaults__ = (4,)
    assert key(ns2) != key(load(tmp_path))


def test_arrays_by_content(tmp_path):
    np = pytest.importorskip("numpy")
    ns = load(tmp_path)
    ns["TABLE"] = np.array([1, 2, 3], dtype=np.float32)
    k1 = key(ns)
    ns["TABLE"] = np.array([1, 2, 3], dtype=np.float32)
    assert key(ns) == k1
    ns["TABLE"] = np.array([1, 2, 9], dtype=np.float32)
    assert key(ns) != k1
    ns["TABLE"] = np.array([1, 2, 3], dtype=np.float64)
    assert key(ns) != k1


def test_stable_across_processes(tmp_path):
    path = tmp_path / "stable_mod.py"
    path.write_text(MODULE.format(scale="2.0", unused="1", table="1, 2, 3", body="0"))
    prog = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import taskcache as tc, "
            "stable_mod; print(tc.function_key(stable_mod.kernel, 'sig').hex())")
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    keys = {subprocess.run([sys.executable, "-c", prog, str(tmp_path), str(root / "python")],
                           capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")}
    assert len(keys) == 1 and len(keys.pop().strip()) == 64
