"""taskcache.function_key: what a Python function's compiled code depends
on, stable from one process to the next."""

import importlib.util
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


FACTORY = textwrap.dedent('''
    import enum
    class Color(enum.IntEnum):
        RED = {red}
    def helper(x):
        return x * cfg.B
    def first(out):
        out[0] = Color.RED + cfg.UNUSED * 0 + helper(1)
    def make(c, color):
        def kernel(out):
            out[0] = c.B + color.RED
        return kernel
    def with_default(out, c=cfg, color=Color):
        out[0] = c.B + color.RED
''')


def factory(tmp_path, **kw):
    """The program's own code: a configuration module (a file, imported)
    and kernels that read it."""
    params = dict(red="3", b="2", unused="1", x="1")
    params.update(kw)
    tag = abs(hash(tuple(sorted(params.items()))))
    mods = {}
    for name, text in (("fk_cfg", f"B = {params['b']}\nUNUSED = {params['unused']}\n"),
                       ("fk_opts", f"X = {params['x']}\n")):
        path = tmp_path / f"{name}_{tag}.py"
        path.write_text(text)
        # one module name (only the contents differ), imported from a file
        spec = importlib.util.spec_from_file_location(name, path)
        mods[name] = importlib.util.module_from_spec(spec)
        sys.modules[name] = mods[name]
        spec.loader.exec_module(mods[name])
    ns = {"__name__": "fmod", "cfg": mods["fk_cfg"], "opts": mods["fk_opts"]}
    exec(compile(FACTORY.format(**params), "fmod.py", "exec"), ns)
    return ns


def test_what_a_kernel_factory_closes_over_changes_the_key(tmp_path):
    # a module or class held in a closure cell or a default was keyed by
    # name only: cfg.B going from 2 to 7 kept the key, and numba_host.py
    # served the old image (a review)
    def closure(**kw):
        ns = factory(tmp_path, **kw)
        return tc.function_key(ns["make"](ns["cfg"], ns["Color"]))

    def default(**kw):
        return tc.function_key(factory(tmp_path, **kw)["with_default"])
    for k in (closure, default):
        base = k()
        assert k() == base
        assert k(b="7") != base and k(red="9") != base, k.__name__
        assert k(unused="2") == base, k.__name__  # read by neither


def test_a_second_visit_that_reads_other_attributes_keys_them(tmp_path):
    # first reads cfg.UNUSED, and through helper cfg.B: the module's first
    # visit hashed UNUSED, the second counted as "again" and B was left out
    base = tc.function_key(factory(tmp_path)["first"])
    assert tc.function_key(factory(tmp_path)["first"]) == base
    assert tc.function_key(factory(tmp_path, b="7")["first"]) != base
    assert tc.function_key(factory(tmp_path, unused="5")["first"]) != base


def test_a_module_given_as_extra_counts_by_its_attributes(tmp_path):
    # no code says what is read of a module a host passes along: all of it
    # counts (it counted by name only)
    def k(**kw):
        ns = factory(tmp_path, **kw)
        return tc.function_key(ns["first"], ns["opts"])
    base = k()
    assert k() == base and k(x="2") != base


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
