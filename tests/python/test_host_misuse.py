"""The package used as a JIT host would use it, misuse included: closing the
cache while builds run, colliding task keys, threads sharing one serialized
codegen, forks, Ctrl-C, odd names and keys."""

import json
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import pytest

import taskcache as tc
from test_api import OPTS, Host, task_ptx


def _in_thread(fn):
    out = {}

    def work():
        try:
            out["result"] = fn()
        except BaseException as e:  # reported by the caller
            out["error"] = e
    t = threading.Thread(target=work)
    t.start()
    return t, out


# ---- closing the cache while it is used ------------------------------------------------

def test_close_while_another_thread_builds(tmp_path):
    cache = tc.Cache(tmp_path / "c")
    host = Host(range(4))
    started, closed = threading.Event(), threading.Event()

    def codegen(index, task):
        if index == 0:
            started.set()
            assert closed.wait(60)
        return host.codegen(index, task)
    t, out = _in_thread(lambda: cache.build_tasks(host.tasks(), codegen, OPTS, version="close 1",
                                                  group_key=b"g"))
    assert started.wait(60)
    cache.close()  # returns at once; the build finishes with the cache
    closed.set()
    t.join(120)
    assert "error" not in out, out.get("error")
    assert out["result"].image
    with pytest.raises(ValueError):
        cache.stats()
    with pytest.raises(ValueError):
        cache.build_tasks(host.tasks(), host.codegen, OPTS, version="close 1")
    with tc.Cache(tmp_path / "c") as again:
        hit = again.lookup_group(b"g", OPTS, version="close 1")
        assert hit is not None and hit.image == out["result"].image


def test_close_from_inside_codegen(tmp_path):
    cache = tc.Cache(tmp_path / "c")
    host = Host(range(3))

    def codegen(index, task):
        if index == 1:
            cache.close()
        return host.codegen(index, task)
    r = cache.build_tasks(host.tasks(), codegen, tc.Options(arch="sm_90", jobs=1),
                          version="close 2", group_key=b"g", serialize=True)
    assert r.image and host.calls == 3
    with pytest.raises(ValueError):
        cache.lookup_group(b"g", OPTS, version="close 2")
    with tc.Cache(tmp_path / "c") as again:
        assert again.lookup_group(b"g", OPTS, version="close 2") is not None


# ---- colliding task keys ---------------------------------------------------------------

def test_same_key_bytes_under_two_names(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        tasks = [tc.Task("alpha", b"same"), tc.Task("beta", b"same")]

        def codegen(index, task):
            return task_ptx(task.name, index), task.name.encode()
        for opts in (OPTS, OPTS, tc.Options(arch="sm_90", module_cache=False)):
            r = cache.build_tasks(tasks, codegen, opts, version="collide 1")
            assert [t.metadata for t in r.tasks] == [b"alpha", b"beta"]
            assert [t.entries[0].name for t in r.tasks] == ["alpha", "beta"]


def test_duplicate_tasks_fail_naming_both(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = Host(range(3))
        tasks = [tc.Task("k0", b"x"), tc.Task("k1", b"y"), tc.Task("k0", b"x")]
        with pytest.raises(tc.TaskcacheError) as exc:
            cache.build_tasks(tasks, host.codegen, OPTS, version="collide 2", group_key=b"g")
        assert exc.value.status == "TC_ERR_INVALID"
        assert "task 0 (k0) and task 2 (k0)" in str(exc.value)
        assert host.calls == 0 and cache.stats()["task_records"] == 0


# ---- lookups keep their diagnostics --------------------------------------------------------

def test_lookup_error_says_why(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        bad = tc.Options(arch="sm_90", compiler="ptxas", ptxas="/nonexistent/bin/ptxas")
        with pytest.raises(tc.TaskcacheError) as exc:
            cache.lookup_group(b"g", bad, version="lookup 1")
        assert exc.value.status == "TC_ERR_TOOLCHAIN"
        assert "/nonexistent/bin/ptxas" in exc.value.message
        assert cache.lookup_group(b"g", OPTS, version="lookup 1") is None


# ---- keys, names and versions ---------------------------------------------------------------

def test_empty_group_key_is_a_key(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = Host(range(2))
        cache.build_tasks(host.tasks(), host.codegen, OPTS, version="empty 1", group_key=b"")
        assert cache.stats()["group_records"] == 1
        assert cache.lookup_group(b"", OPTS, version="empty 1") is not None


def test_bytes_like_keys(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = Host(range(3))
        tasks = [tc.Task("k0", bytearray(b"const 0")), tc.Task("k1", memoryview(b"const 1")),
                 tc.Task("k2", "const 2")]
        r = cache.build_tasks(tasks, host.codegen, OPTS, version="bytes 1",
                              group_key=bytearray(b"group"))
        # the same bytes as bytes: the same keys
        again = cache.build_tasks(host.tasks(), host.codegen, OPTS, version="bytes 1")
        assert host.calls == 3 and again.report.module_hit
        assert [t.key for t in again.tasks] == [t.key for t in r.tasks]
        assert cache.lookup_group(memoryview(b"group"), OPTS, version="bytes 1") is not None
        with pytest.raises(TypeError):
            cache.build_tasks([tc.Task("k0", 42)], host.codegen, OPTS, version="bytes 1")


def test_names_that_are_not_utf8(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = Host(range(2))
        tasks = [tc.Task(b"k\xff", b"const 0"), tc.Task("k1", b"const 1")]

        def codegen(index, task):
            return task_ptx(f"k{index}", index)
        r = cache.build_tasks(tasks, codegen, OPTS, version="names 1", group_key=b"g")
        assert r.tasks[0].name == "k\udcff"
        hit = cache.lookup_group(b"g", OPTS, version="names 1")
        assert hit.tasks[0].name == "k\udcff"
        # the decoded name is the same task
        again = cache.build_tasks([tc.Task(hit.tasks[0].name, b"const 0"), tasks[1]], codegen,
                                  OPTS, version="names 1")
        assert again.report.module_hit


def test_missing_arguments_say_which(tmp_path):
    # these reached the library, which answered only "the build could not
    # start", or failed inside the package with a bare TypeError (a review)
    host = Host([1])
    with tc.Cache(tmp_path / "c") as c:
        with pytest.raises(TypeError, match="version is required"):
            c.build_tasks(host.tasks(), host.codegen, OPTS, version=None)
        with pytest.raises(ValueError, match="at least one task"):
            c.build_tasks([], host.codegen, OPTS, version="v")
        with pytest.raises(TypeError, match="key of task 0 is required"):
            c.build_tasks([tc.Task("k0", None)], host.codegen, OPTS, version="v")
        with pytest.raises(TypeError, match="group_key is required"):
            c.lookup_group(None, OPTS, version="v")
        for bad in (-1, 0, 2**32):  # -1 wrapped to 4294967295 through c_uint
            with pytest.raises(ValueError, match="unit_cost"):
                c.build(task_ptx("k", 1), tc.Options(arch="sm_90", unit_cost=bad))


def test_nul_in_names_and_versions_is_refused(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = Host(range(1))
        for kwargs, tasks in (({"version": "x\0one"}, host.tasks()),
                              ({"version": "x"}, [tc.Task("k\0a", b"k")])):
            with pytest.raises(ValueError, match="NUL"):
                cache.build_tasks(tasks, host.codegen, OPTS, **kwargs)
        with pytest.raises(ValueError, match="NUL"):
            cache.lookup_group(b"g", OPTS, version="x\0two")
        assert host.calls == 0


# ---- serialized codegen across calls ----------------------------------------------------------

class CountingHost:
    """One codegen shared by every thread; counts without a lock."""

    def __init__(self, cache, nest=False):
        self.cache, self.nest = cache, nest
        self.active = self.peak = self.calls = 0
        self.guard = threading.Lock()

    def codegen(self, index, task):
        with self.guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        calls = self.calls
        time.sleep(0.005)  # the window a lost update needs
        self.calls = calls + 1
        with self.guard:
            self.active -= 1
        if self.nest and index == 0 and "_in" not in task.name:
            inner = [tc.Task(f"{task.name}_in{i}", f"{task.name}_in{i}") for i in range(2)]
            self.cache.build_tasks(inner, self.codegen, tc.Options(arch="sm_90", jobs=2),
                                   version="serial py", serialize=True)
        return task_ptx(task.name, index)


def _build_in_threads(cache, host, nthreads):
    def build(t):
        tasks = [tc.Task(f"t{t}_k{i}", f"t{t}_k{i}") for i in range(3)]
        return cache.build_tasks(tasks, host.codegen, tc.Options(arch="sm_90", jobs=3),
                                 version="serial py", serialize=True)
    runs = [_in_thread(lambda t=t: build(t)) for t in range(nthreads)]
    for th, out in runs:
        th.join(300)
        assert "error" not in out, out.get("error")


def test_serialize_holds_across_calls(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = CountingHost(cache)
        _build_in_threads(cache, host, 6)
        assert host.peak == 1 and host.calls == 18


def test_serialize_with_a_nested_build_of_the_same_host(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = CountingHost(cache, nest=True)
        _build_in_threads(cache, host, 2)
        assert host.peak == 1 and host.calls == 2 * 3 + 2 * 2


# ---- Ctrl-C ----------------------------------------------------------------------------------

def test_keyboard_interrupt_in_codegen_propagates(tmp_path):
    with tc.Cache(tmp_path / "c") as cache:
        host = Host(range(4))

        def codegen(index, task):
            if index == 1:
                raise KeyboardInterrupt
            return host.codegen(index, task)
        with pytest.raises(KeyboardInterrupt):
            cache.build_tasks(host.tasks(), codegen, tc.Options(arch="sm_90", jobs=1),
                              version="ctrl-c 1", group_key=b"g")
        assert host.calls == 1  # task 0; task 1 raised; nothing after
        s = cache.stats()
        assert s["task_records"] == 0 and s["group_records"] == 0 and s["compile_errors"] == 0
        # the cache and the package are fine afterwards
        r = cache.build_tasks(host.tasks(), host.codegen, OPTS, version="ctrl-c 1")
        assert len(r.entries) == 4


SIGINT_HOST = textwrap.dedent('''
    import json, os, signal, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[3])
    import taskcache as tc
    from test_api import task_ptx

    calls = []

    def slow(index, task):
        calls.append(index)
        time.sleep(0.2)
        return task_ptx(task.name, index)

    tasks = [tc.Task(f"k{i}", f"k{i}") for i in range(20)]
    out = {}
    # Python's own Ctrl-C handler, also where this runs with SIGINT ignored
    # (a background job of a script), which Python then leaves ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with tc.Cache(sys.argv[2]) as cache:
        # Ctrl-C while codegen runs on the library's worker threads
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            cache.build_tasks(tasks, slow, tc.Options(arch="sm_90", jobs=2), version="ctrl-c 2")
            out["raised"] = None
        except BaseException as e:
            out["raised"] = type(e).__name__
        out["calls"] = len(calls)
        out["records"] = cache.stats()["task_records"]
        r = cache.build_tasks(tasks[:2], slow, tc.Options(arch="sm_90"), version="ctrl-c 2")
        out["after"] = len(r.entries)
    print(json.dumps(out))
''')


def test_ctrl_c_cancels_a_build_at_once(tmp_path):
    script = tmp_path / "host.py"
    script.write_text(SIGINT_HOST)
    here = pathlib.Path(__file__).resolve().parent
    p = subprocess.run([sys.executable, str(script), str(here.parents[1] / "python"),
                        str(tmp_path / "c"), str(here)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    # 20 tasks of 0.2 s on 2 threads take 2 s; the interrupt came at 0.5 s
    assert out["raised"] == "KeyboardInterrupt"
    assert out["calls"] < 20 and out["records"] == 0
    assert out["after"] == 2


# ---- fork ------------------------------------------------------------------------------------

def _fake_nvjitlink(tmp_path):
    """The stand-in libnvJitLink of tests/unit/fake_nvjitlink.c, whose first
    use takes $FAKE_NVJITLINK_DELAY_MS: built with the library, else here."""
    built = pathlib.Path(os.environ.get("TASKCACHE_LIB", "/")).resolve().parent / "tests"
    built = built / "libfake_nvjitlink.so"
    if built.exists():
        return built
    src = pathlib.Path(__file__).resolve().parents[1] / "unit" / "fake_nvjitlink.c"
    out = tmp_path / "libfake_nvjitlink.so"
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc or subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)]).returncode:
        pytest.skip("no stand-in libnvJitLink and no C compiler to build one")
    return out


def test_multiprocessing_fork_while_a_build_runs(tmp_path, monkeypatch):
    # the build's linker is the stand-in: its first use (the prewarm thread
    # starts it when codegen starts) lasts 1 s, so the fork lands inside it;
    # and this codegen holds the host's serialized turn across the fork
    monkeypatch.setenv("TASKCACHE_NVJITLINK", str(_fake_nvjitlink(tmp_path)))
    monkeypatch.setenv("FAKE_NVJITLINK_DELAY_MS", "1000")
    parent = os.getpid()
    in_codegen, release = threading.Event(), threading.Event()

    def codegen(index, task):
        if os.getpid() == parent and index == 0:
            in_codegen.set()
            release.wait(120)
        return task_ptx(task.name, index)
    cache = tc.Cache(tmp_path / "c")
    tasks = [tc.Task("p0", b"p0"), tc.Task("p1", b"p1")]
    t, out = _in_thread(lambda: cache.build_tasks(tasks, codegen, OPTS, version="fork 1",
                                                  serialize=True))
    try:
        assert in_codegen.wait(60)

        def child():
            try:
                # every call ends by waiting for the prewarm: no thread to wait for here
                assert cache.lookup_group(b"none", OPTS, version="fork 1") is None
                # the same serialized codegen, whose turn a parent's thread held
                try:
                    cache.build_tasks([tc.Task("c0", b"c0")], codegen, OPTS, version="fork 1",
                                      serialize=True)
                except tc.TaskcacheError as e:  # the stand-in links nothing
                    assert e.status == "TC_ERR_LINK", e
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        p = multiprocessing.get_context("fork").Process(target=child)
        p.start()
        p.join(120)
        if p.exitcode is None:
            p.kill()
            p.join()
        assert p.exitcode == 0, "the forked child hung or failed"
    finally:
        release.set()
        t.join(120)
        cache.close()
    assert isinstance(out.get("error"), tc.TaskcacheError)  # the stand-in again
