"""The store under stress of a lighter kind than scripts/torture.py: size
limits and LRU, verification, shared mode, failing storage, planted links,
concurrent processes."""

import json
import os
import pathlib
import subprocess
import time

import pytest

from tchelp import ARCH, PER_KERNEL, TASKCACHE, build, corpus_dir, stats, tc


def records(cache, kind="*"):
    return sorted(p for p in pathlib.Path(cache).glob(f"v1/*/{kind}/*/*")
                  if len(p.name) == 62)


def modules():
    d = corpus_dir()
    return [os.path.join(d, f) for f in ("helpers.ptx", "math_kernels.ptx", "templates.ptx",
                                         "warp_ops.ptx", "printf_kernels.ptx")]


def test_gc_evicts_least_recently_used(tmp_path):
    cache = str(tmp_path / "cache")
    mods = modules()
    for m in mods:
        build(m, tmp_path / "o.cubin", cache, *PER_KERNEL)
    # age every record, then use the first module again: its records are the
    # most recently used
    past = time.time() - 3600
    for r in records(cache):
        os.utime(r, (past, past))
    build(mods[0], tmp_path / "o.cubin", cache, "--no-module-cache", *PER_KERNEL)
    total = stats(cache)["disk_bytes"]
    g = json.loads(tc("gc", "--cache-dir", cache, "--max-size", str(total // 2), "--json").stdout)
    assert g["evicted_files"] > 0 and g["bytes"] <= total // 2 // 10 * 9
    s = stats(cache)
    assert s["evictions"] == g["evicted_files"]
    # the recently used units survived: a rebuild of module 0 compiles nothing
    before = s["compiles"]
    build(mods[0], tmp_path / "o.cubin", cache, "--no-module-cache", *PER_KERNEL)
    assert stats(cache)["compiles"] == before
    # an evicted module is rebuilt, never an error
    build(mods[3], tmp_path / "o.cubin", cache)


def test_evict_older_than(tmp_path):
    cache = str(tmp_path / "cache")
    build(modules()[1], tmp_path / "o.cubin", cache)
    recs = records(cache)
    old = time.time() - 40 * 86400
    os.utime(recs[0], (old, old))
    g = json.loads(tc("gc", "--cache-dir", cache, "--evict-older-than", "30d", "--json").stdout)
    assert g["evicted_files"] == 1 and not recs[0].exists()
    p = tc("gc", "--cache-dir", cache, "--evict-older-than", "soon", check=False)
    assert p.returncode == 2
    # an age past 1970, or past what nanoseconds can count, is older than
    # every record: it evicted them all once (int64 overflow; a review)
    build(modules()[1], tmp_path / "o.cubin", cache)
    left = records(cache)
    assert left
    for age in ("200000d", "9223372036854775807d", "9223372036854775807s"):
        g = json.loads(tc("gc", "--cache-dir", cache, "--evict-older-than", age, "--json").stdout)
        assert g["evicted_files"] == 0
    assert records(cache) == left


def test_builds_keep_within_the_limit(tmp_path):
    cache = str(tmp_path / "cache")
    for m in modules():
        build(m, tmp_path / "o.cubin", cache, "--max-size", "40K", *PER_KERNEL)
        assert stats(cache)["disk_bytes"] <= 40 * 1024
    assert stats(cache)["evictions"] > 0
    (tmp_path / "cache" / "taskcache.conf").write_text("max_size = 1G  # from the config file\n")
    assert stats(cache)["max_size"] == 1 << 30
    env = dict(os.environ, TASKCACHE_MAXSIZE="2G")
    s = json.loads(subprocess.run([TASKCACHE, "stats", "--cache-dir", cache, "--json"],
                                  env=env, capture_output=True, text=True).stdout)
    assert s["max_size"] == 2 << 30


@pytest.mark.parametrize("size", ["1e80", "nan", "inf", "16E", "-1", "5X"])
def test_sizes_that_are_no_size_are_refused(tmp_path, size):
    p = subprocess.run([TASKCACHE, "gc", "--cache-dir", str(tmp_path / "c"), "--max-size", size],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--max-size" in p.stderr and size in p.stderr


def test_verify_finds_and_removes_bad_records(tmp_path):
    cache = str(tmp_path / "cache")
    build(modules()[0], tmp_path / "o.cubin", cache)
    assert tc("verify", "--cache-dir", cache).returncode == 0
    # a record another version of taskcache wrote (another format) is not
    # this one's to judge: it was counted bad and removed (a review)
    older = records(cache)[-1]
    kept = older.read_bytes()
    older.write_bytes(kept[:4] + (1).to_bytes(4, "little") + kept[8:])
    v = json.loads(tc("verify", "--cache-dir", cache, "--remove-bad", "--json").stdout)
    assert v["bad"] == 0 and v["checked"] == len(records(cache)) - 1 and older.exists()
    older.write_bytes(kept)
    victim = records(cache)[0]
    victim.write_bytes(victim.read_bytes()[:-1] + b"!")
    p = tc("verify", "--cache-dir", cache, "--json", check=False)
    assert p.returncode == 1 and json.loads(p.stdout)["bad"] == 1
    tc("verify", "--cache-dir", cache, "--remove-bad", check=False)
    assert not victim.exists()
    assert tc("verify", "--cache-dir", cache).returncode == 0


def test_verify_is_no_use_of_the_records(tmp_path):
    # verify read records as a build does, which marks them used: records
    # idle for days were then kept by gc --evict-older-than (a review)
    cache = str(tmp_path / "cache")
    build(modules()[0], tmp_path / "o.cubin", cache)
    past = time.time() - 10 * 86400
    for r in records(cache):
        os.utime(r, (past, past))
    assert tc("verify", "--cache-dir", cache).returncode == 0
    assert all(r.stat().st_mtime < time.time() - 9 * 86400 for r in records(cache))
    g = json.loads(tc("gc", "--cache-dir", cache, "--evict-older-than", "7d", "--json").stdout)
    assert g["evicted_files"] > 0 and not records(cache)


def test_shared_mode(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "taskcache.conf").write_text("shared = true\n")
    build(modules()[0], tmp_path / "o.cubin", str(cache))
    rec = records(cache)[0]
    assert oct(rec.stat().st_mode & 0o777) == "0o660"
    assert oct(rec.parent.stat().st_mode & 0o7777) == "0o2770"


def test_failing_storage_warns_once_and_builds(tmp_path):
    m = modules()[2]
    good = tmp_path / "good.cubin"
    build(m, good, None)
    for fault in ("write:ENOSPC", "write:EACCES", "read:EIO"):
        env = dict(os.environ, TASKCACHE_TEST_FAULTS=fault)
        out = tmp_path / "o.cubin"
        p = subprocess.run([TASKCACHE, "build", m, "-o", out, "--arch", ARCH, "--cache-dir",
                            tmp_path / fault.replace(":", "")], env=env, capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr
        assert out.read_bytes() == good.read_bytes()
        expected = 0 if fault.startswith("read") else 1
        assert p.stderr.count("warning:") == expected, p.stderr


def test_planted_links_are_never_followed(tmp_path):
    cache = tmp_path / "cache"
    m = modules()[0]
    build(m, tmp_path / "a.cubin", str(cache), *PER_KERNEL)
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("secret")
    recs = records(cache, "u")
    recs[0].unlink()
    recs[0].symlink_to(secret)
    module_shard = records(cache, "m")[0].parent
    for f in module_shard.iterdir():
        f.unlink()
    module_shard.rmdir()
    module_shard.symlink_to(outside, target_is_directory=True)
    build(m, tmp_path / "b.cubin", str(cache), *PER_KERNEL)
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert secret.read_text() == "secret"
    assert stats(str(cache))["bad_records"] >= 1
    tc("gc", "--cache-dir", cache)  # removes the planted links
    assert not module_shard.is_symlink() and not recs[0].is_symlink()


def test_concurrent_builds_compile_each_unit_once(tmp_path):
    cache = str(tmp_path / "cache")
    m = modules()[1]
    procs = [subprocess.Popen([TASKCACHE, "build", m, "-o", str(tmp_path / f"o{i}.cubin"),
                               "--arch", ARCH, "--cache-dir", cache, "--compiler", "ptxas",
                               *PER_KERNEL],
                              stderr=subprocess.PIPE) for i in range(6)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    outs = {(tmp_path / f"o{i}.cubin").read_bytes() for i in range(6)}
    assert len(outs) == 1
    s = stats(cache)
    units = json.loads(tc("explain", m, "--arch", ARCH, "--cache-dir", cache, "--json",
                          "--compiler", "ptxas", *PER_KERNEL).stdout)["units"]
    assert s["compiles"] == units
