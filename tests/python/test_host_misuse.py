"""The package used as a JIT host would use it, misuse included: closing the
cache while builds run, colliding task keys, threads sharing one serialized
codegen, forks, Ctrl-C, odd names and keys."""

import threading

import pytest

import taskcache as tc
from test_api import OPTS, Host


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
