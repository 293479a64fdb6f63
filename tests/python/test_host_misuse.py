"""The package used as a JIT host would use it, misuse included: closing the
cache while builds run, colliding task keys, threads sharing one serialized
codegen, forks, Ctrl-C, odd names and keys."""

import threading

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
