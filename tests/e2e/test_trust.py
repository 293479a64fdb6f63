"""A cache you can trust: output paths, other users' directories, special
files, stuck locks, forged and inflated records, shared caches, Ctrl-C.

The checks that need a second user (a hostile member of a shared cache)
create throwaway users and a group with useradd, which needs root: CI runs
as root; elsewhere they are skipped, saying so. The attacks themselves live
in scripts/hostile.py, which scripts/torture.py uses too."""

import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from tchelp import ARCH, PER_KERNEL, ROOT, TASKCACHE, build, run, stats, tc

sys.path.insert(0, str(ROOT / "scripts"))
import hostile  # noqa: E402

KERNELS = "".join(f"""
.visible .entry k{i} (.param .u64 out)
{{
 .reg .b32 %r<3>;
 .reg .b64 %rd<3>;
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, {i};
 st.global.u32 [%rd1], %r1;
 ret;
}}
""" for i in range(6))
MODULE = ".version 8.0\n.target sm_90\n.address_size 64\n" + KERNELS
TASKCACHE_ABS = str(pathlib.Path(TASKCACHE).resolve())


@pytest.fixture
def module(tmp_path):
    p = tmp_path / "m.ptx"
    p.write_text(MODULE)
    return p


@pytest.fixture
def users():
    if not hostile.can_make_users():
        pytest.skip("needs root to create throwaway users (CI runs as root)")
    u = hostile.Users()
    yield u
    u.close()


@pytest.fixture
def public(tmp_path):
    """A directory other users can reach (pytest's are private)."""
    d = tempfile.mkdtemp(dir="/tmp", prefix="tc-trust-")
    hostile.open_dir(d, 0o755)
    yield pathlib.Path(d)
    subprocess.run(["rm", "-rf", d])


def shared_cache(path, users):
    """A cache directory shared by the group: root's, 2770."""
    path.mkdir()
    os.chown(path, 0, users.gid)
    os.chmod(path, 0o2770)
    (path / "taskcache.conf").write_text("shared = true\n")
    os.chmod(path / "taskcache.conf", 0o664)
    return path


# ---- 1. -o writes to what it names, as compilers do --------------------------------------

def test_output_paths(module, tmp_path):
    ref = tmp_path / "ref.cubin"
    build(module, ref, None)
    image = ref.read_bytes()
    if os.geteuid() == 0:
        # a null device of its own: a taskcache that replaced it (as one
        # did /dev/null) must not break the machine for everyone
        null = tmp_path / "null"
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        build(module, null, None)
        assert stat.S_ISCHR(os.stat(null).st_mode)
    target = tmp_path / "target.cubin"
    target.write_bytes(b"old")
    (tmp_path / "link.cubin").symlink_to(target)
    build(module, tmp_path / "link.cubin", None)
    assert (tmp_path / "link.cubin").is_symlink() and target.read_bytes() == image
    (tmp_path / "a.cubin").write_bytes(b"old")
    os.link(tmp_path / "a.cubin", tmp_path / "b.cubin")
    build(module, tmp_path / "a.cubin", None)
    assert (tmp_path / "b.cubin").read_bytes() == image  # both names see it
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
    build(module, fifo, None)
    assert reader.communicate(timeout=60)[0] == image and stat.S_ISFIFO(os.stat(fifo).st_mode)
    long_name = tmp_path / ("x" * 240 + ".cubin")  # the temporary's name must fit NAME_MAX
    build(module, long_name, None)
    assert long_name.read_bytes() == image
    out = subprocess.run([TASKCACHE, "build", module, "-o", "-", "--arch", ARCH, "--no-cache"],
                         capture_output=True, check=True)
    assert out.stdout == image
    # a name for a descriptor the caller holds open on a regular file: the
    # file was replaced, and the caller's descriptor read the old, empty one
    # (a review; ptxas writes through it)
    for name in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        with tempfile.TemporaryFile() as f:
            subprocess.run([TASKCACHE, "build", module, "-o", name, "--arch", ARCH, "--no-cache"],
                           stdout=f, check=True)
            f.seek(0)
            assert f.read() == image, name


def test_output_equal_to_the_input_is_refused(module):
    before = module.read_bytes()
    p = build(module, module, None, check=False)
    assert p.returncode == 2 and "is the input file" in p.stderr
    assert module.read_bytes() == before


def test_an_ordinary_user_can_write_to_dev_null(users, public, module):
    src = public / "m.ptx"
    src.write_text(MODULE)
    os.chmod(src, 0o644)
    users.run("alice", [TASKCACHE_ABS, "build", src, "-o", "/dev/null", "--arch", ARCH,
                        "--no-cache"])


# ---- 2. clear never follows a link swapped in while it walks --------------------------------

def test_clear_does_not_follow_a_swapped_link(users, public):
    cache = shared_cache(public / "cache", users)
    park = hostile.open_dir(public / "park", 0o777)
    target = public / "victim"
    (target / "precious").mkdir(parents=True)
    (target / "precious" / "data").write_text("keep me")
    os.chmod(target, 0o700)  # the attacker cannot even list it
    survived, cleared, said = hostile.clear_race(
        users, "mallory", str(cache), str(target), "precious", str(park),
        [TASKCACHE, "clear", "--cache-dir", cache])
    assert "swapped 0" in said  # the attack ran
    assert survived and (target / "precious" / "data").read_text() == "keep me"
    assert cleared.returncode == 0 and not (cache / "v1").exists()


# ---- 3. a cache directory others can write is not used --------------------------------------

def test_a_directory_everyone_can_write_is_not_used(module, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    p = build(module, tmp_path / "o.cubin", cache)
    assert "writable by every user" in p.stderr and p.stderr.count("warning:") == 1
    assert not hostile.records(cache)


def test_a_planted_shared_configuration_does_not_make_it_trusted(module, tmp_path):
    # taskcache.conf saying shared = true had the directory's mode set to
    # group-only before the check, which then passed: anyone could name
    # the remote the builds would read from (a review)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "taskcache.conf").write_text("shared = true\nremote = http://127.0.0.1:9/planted\n")
    os.chmod(cache, 0o777)
    p = build(module, tmp_path / "o.cubin", cache)
    assert "writable by every user" in p.stderr and p.stderr.count("warning:") == 1
    assert not hostile.records(cache)
    assert os.stat(cache).st_mode & 0o777 == 0o777  # left as it was found
    s = tc("stats", "--cache-dir", cache, check=False)
    assert "127.0.0.1:9" not in s.stdout and "cannot trust" in s.stdout


def test_another_users_cache_directory_is_not_trusted(users, public, module, tmp_path):
    """A member made a directory 0777 and put a forged record in it: it
    used to be used silently, and the forgery served."""
    good = tmp_path / "good.cubin"
    build(module, good, public / "honest")
    bad = public / "planted"  # mallory's, 0777, holding a forged record
    subprocess.run(["cp", "-r", public / "honest", bad], check=True)
    (m,) = hostile.records(bad, "m")
    hostile.forge_image(m, b"\x7fELF forged by mallory")
    subprocess.run(["chown", "-R", f"{users.uid('mallory')}:{users.gid}", bad], check=True)
    os.chmod(bad, 0o777)
    out = tmp_path / "o.cubin"
    p = build(module, out, bad)
    assert out.read_bytes() == good.read_bytes()
    assert "cannot trust the cache directory" in p.stderr and "every user" in p.stderr
    # owned by another user and private: not used either
    os.chmod(bad, 0o755)
    p = build(module, out, bad)
    assert out.read_bytes() == good.read_bytes() and "belongs to another user" in p.stderr
    # nor when its owner calls it shared with a group this user is not in
    (bad / "taskcache.conf").write_text("shared = true\n")
    p = build(module, out, bad)
    assert out.read_bytes() == good.read_bytes() and "a group this user is not in" in p.stderr


# ---- 4. special files never stop a build; gc and verify see them ------------------------------

def test_fifos_and_special_files(module, tmp_path):
    cache = tmp_path / "cache"
    good = tmp_path / "good.cubin"
    build(module, good, cache, *PER_KERNEL)  # unit records, as a large module has
    unit = hostile.records(cache, "u")[0]
    for victim in (unit, unit.with_name(unit.name + ".lock"), cache / "stats",
                   cache / "stats.lock", cache / "taskcache.conf",
                   next((cache / "toolchain").iterdir())):
        victim.unlink(missing_ok=True)
        os.mkfifo(victim)
    out = tmp_path / "o.cubin"
    build(module, out, cache, "--no-module-cache", *PER_KERNEL, timeout=60)
    assert out.read_bytes() == good.read_bytes()
    os.unlink(unit)  # the build replaced it: plant another for verify
    os.mkfifo(unit)
    p = tc("verify", "--cache-dir", cache, "--json", check=False, timeout=60)
    assert p.returncode == 1 and json.loads(p.stdout)["bad"] == 1
    for f in ("x1", "x2"):
        os.mkfifo(cache / f"v1/{ARCH}/u/{f}")  # where a shard directory belongs
    tc("gc", "--cache-dir", cache, timeout=60)
    assert not [p for p in cache.rglob("*") if stat.S_ISFIFO(p.lstat().st_mode)]


# ---- 5. a held statistics lock never holds up a build ---------------------------------------

def test_a_held_statistics_lock_is_skipped_and_counted(module, tmp_path):
    cache = tmp_path / "cache"
    build(module, tmp_path / "o.cubin", cache)
    holder = subprocess.Popen(["flock", "-x", cache / "stats.lock", "sleep", "60"],
                              start_new_session=True)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        build(module, tmp_path / "o.cubin", cache, timeout=30)
        assert time.monotonic() - t0 < 10
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock and the sleep that holds the lock
        holder.wait()
    s = stats(str(cache))
    assert s["stats_skipped"] == 1 and s["builds"] == 1  # the held build's counts are missing
    assert "counts not recorded (lock busy)" in tc("stats", "--cache-dir", cache).stdout
    tc("stats", "--cache-dir", cache, "--zero")
    assert stats(str(cache))["stats_skipped"] == 0


# ---- 6. a shared cache is shared all the way ---------------------------------------------------

def test_two_members_share_every_file(users, public):
    cache = shared_cache(public / "cache", users)
    src = public / "m.ptx"
    src.write_text(MODULE)
    os.chmod(src, 0o644)
    env = {"TASKCACHE_COMPILER": "ptxas"}
    args = [TASKCACHE_ABS, "build", src, "-o", "/dev/null", "--arch", ARCH, "--cache-dir", cache,
            *PER_KERNEL]  # unit records, as a large module has
    users.run("alice", args, env=env)                    # both with umask 077
    users.run("mallory", [*args, "--no-module-cache", "-v"], env=env)
    wrong = [(p, oct(p.stat().st_mode & 0o7777)) for p in cache.rglob("*")
             if p.name != "taskcache.conf" and
             (p.stat().st_mode & 0o7777) != (0o2770 if p.is_dir() else 0o660)]
    assert not wrong, wrong  # toolchain/ and memos, stats, every lock included
    assert (cache / "toolchain").is_dir() and (cache / "stats.lock").exists()
    assert any(p.name.endswith(".lock") for p in cache.rglob("*") if p.parent.parent.name == "u")
    s = stats(str(cache))
    assert s["builds"] == 2 and s["unit_hits"] > 0 and s["compiles"] == s["unit_misses"]
    # the other member's builds evict, and gc runs for it
    users.run("mallory", [*args, "--max-size", "1K"], env=env)
    assert stats(str(cache))["evictions"] > 0
    users.run("mallory", [TASKCACHE_ABS, "gc", "--cache-dir", cache])
    assert users.run("outsider", [TASKCACHE_ABS, "verify", "--cache-dir", cache],
                     check=False).returncode == 1  # not a member: cannot read it


# ---- 7. the toolchain memos are never reached through a link --------------------------------------

def test_toolchain_directory_planted_as_a_link(module, tmp_path):
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    cache.mkdir()
    (cache / "toolchain").symlink_to(outside, target_is_directory=True)
    build(module, tmp_path / "o.cubin", cache, "--compiler", "ptxas")
    assert not list(outside.iterdir())
    assert (cache / "toolchain").is_dir() and not (cache / "toolchain").is_symlink()
    assert list((cache / "toolchain").iterdir())


# ---- 8. no record costs more memory than its kind can hold -----------------------------------------

def test_bombs_and_sparse_files_cost_nothing(module, tmp_path):
    cache = tmp_path / "cache"
    good = tmp_path / "good.cubin"
    build(module, good, cache, *PER_KERNEL)  # unit records, as a large module has
    (m,) = hostile.records(cache, "m")
    stored = hostile.bomb(m, 4 << 30)  # a valid record inflating to 4 GiB
    assert stored < (4 << 30) // 4096  # past the ratio readers accept (TC_RECORD_MAX_RATIO)
    out = tmp_path / "o.cubin"
    cmd = [TASKCACHE, "build", module, "-o", out, "--arch", ARCH, "--cache-dir", cache,
           *PER_KERNEL]
    rc, rss, cpu, wall, err = hostile.measure(cmd)
    assert rc == 0 and out.read_bytes() == good.read_bytes(), err
    assert rss < 200 << 20 and wall < 20, (rss, wall)
    assert stats(str(cache))["bad_records"] == 1
    for sparse in (hostile.records(cache, "u")[0], cache / "stats", cache / "taskcache.conf",
                   next((cache / "toolchain").iterdir())):
        with open(sparse, "ab") as f:
            f.truncate(5 << 30)
    rc, rss, cpu, wall, err = hostile.measure(cmd + ["--no-module-cache"])
    assert rc == 0 and out.read_bytes() == good.read_bytes(), err
    assert rss < 200 << 20, rss


# ---- 9. waiting for another process's lease costs no CPU ---------------------------------------------

def test_waiting_on_a_held_lease_sleeps(module, tmp_path):
    cache = tmp_path / "cache"
    keys = {e["unit_key"] for e in json.loads(tc("explain", module, "--arch", ARCH, "--cache-dir",
                                                cache, "--json", *PER_KERNEL).stdout)["entries"]}
    key = sorted(keys)[0]
    shard = cache / "v1" / ARCH / "u" / key[:2]
    shard.mkdir(parents=True, exist_ok=True)
    lock = shard / f"{key[2:]}.lock"
    holder = subprocess.Popen(["flock", "-x", lock, "sleep", "4"])
    try:
        time.sleep(0.3)
        rc, rss, cpu, wall, err = hostile.measure(
            [TASKCACHE, "build", module, "-o", tmp_path / "o.cubin", "--arch", ARCH,
             "--cache-dir", cache, "-j", "2", *PER_KERNEL])
    finally:
        holder.kill()
        holder.wait()
    assert rc == 0, err
    assert wall > 3  # it did wait for the holder
    assert cpu < 1.5, cpu  # 4 s of waiting used to cost 4 s of CPU


# ---- 10. a helper shared by many kernels is not copied into memory once per unit -----------------------

def fanout(helper_statements, kernels):
    body = "".join(f" add.u32 %r1, %r1, {i};\n" for i in range(helper_statements))
    helper = (".func (.param .b32 rv) big_helper(.param .b32 a)\n{\n .reg .b32 %r<2>;\n"
              " ld.param.b32 %r1, [a];\n" + body + " st.param.b32 [rv], %r1;\n ret;\n}\n")
    ks = "".join(f"""
.visible .entry c{i}(.param .u64 out)
{{
 .reg .b32 %r<3>;
 .reg .b64 %rd<3>;
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, {i};
 {{ .param .b32 p0; .param .b32 r0; st.param.b32 [p0], %r1;
   call.uni (r0), big_helper, (p0); ld.param.b32 %r2, [r0]; }}
 st.global.u32 [%rd1], %r2;
 ret;
}}""" for i in range(kernels))
    return ".version 8.0\n.target sm_90\n.address_size 64\n" + helper + ks


def test_fanout_units_are_made_when_compiled(tmp_path):
    """Every unit copies the helper; the scratch directory (and, in
    process, memory) used to hold all their texts at once."""
    src = tmp_path / "fanout.ptx"
    src.write_text(fanout(5000, 200))
    counts = tmp_path / "counts"
    fake = tmp_path / "ptxas"  # answers --version, then records what scratch holds and fails
    fake.write_text("#!/bin/sh\ncase \"$*\" in *--version*) echo 'fake ptxas'; exit 0;; esac\n"
                    f"for a; do case $a in *.ptx) ls \"$(dirname \"$a\")\" | grep -c '[.]ptx$' "
                    f">> {counts};; esac; done\nexit 1\n")
    fake.chmod(0o755)
    p = tc("build", src, "-o", tmp_path / "o.cubin", "--arch", ARCH, "--no-cache",
           "--compiler", "ptxas", "--ptxas", fake, "-j", "2", check=False)
    assert p.returncode == 1
    seen = [int(x) for x in counts.read_text().split()]
    assert seen and max(seen) <= 2, seen  # at most one text per job, not 200


def test_fanout_memory_in_process(tmp_path):
    probe = tc("version").stdout
    if "in-process" not in probe:
        pytest.skip("this taskcache has no in-process compiler")
    src = tmp_path / "fanout.ptx"
    src.write_text(fanout(20000, 1000))
    size = src.stat().st_size
    rc, rss, cpu, wall, err = hostile.measure(
        [TASKCACHE, "build", src, "-o", tmp_path / "o.cubin", "--arch", ARCH, "--no-cache",
         "--compiler", "inprocess", "-j", "1"], timeout=12)
    # killed while compiling: what matters is the memory on the way there
    assert rss < 150 << 20, (rss, size)


# ---- 11. a 100 KB kernel name never aborts the process ------------------------------------------------------

def test_long_kernel_names_in_process(tmp_path):
    if "in-process" not in tc("version").stdout:
        pytest.skip("this taskcache has no in-process compiler")
    src = tmp_path / "long.ptx"
    src.write_text(MODULE.replace(".entry k", ".entry " + "k" * (100 << 10)))
    p = tc("build", src, "-o", tmp_path / "o.cubin", "--arch", ARCH, "--no-cache",
           "--compiler", "inprocess", check=False)
    assert p.returncode == 0, p.stderr  # it died of SIGABRT inside nvPTXCompiler


# ---- 12. Ctrl-C leaves nothing behind ---------------------------------------------------------------

def test_interrupt_removes_the_scratch_directory(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    src = tmp_path / "big.ptx"
    src.write_text(fanout(2000, 60))
    env = dict(os.environ, TMPDIR=str(scratch))
    cache = tmp_path / "cache"
    cmd = [TASKCACHE, "build", src, "-o", tmp_path / "o.cubin", "--arch", ARCH, "--cache-dir",
           cache, "--compiler", "ptxas", "-j", "1"]
    p = subprocess.Popen([str(a) for a in cmd], env=env, stderr=subprocess.PIPE, text=True)
    while not list(scratch.glob("taskcache.*/unit*.ptx")) and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == -signal.SIGINT and "interrupted" in err
    assert not list(scratch.iterdir())
    assert json.loads(tc("verify", "--cache-dir", cache, "--json").stdout)["bad"] == 0
    # killed outright, a build leaves its directory: the next cleanup removes it
    p = subprocess.Popen([str(a) for a in cmd], env=env, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    while not list(scratch.glob("taskcache.*/unit*.ptx")) and p.poll() is None:
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)  # and its ptxas, which would go on writing there
    p.wait()
    time.sleep(0.2)
    (left,) = list(scratch.iterdir())
    past = time.time() - 60
    os.utime(left, (past, past))
    subprocess.run([TASKCACHE, "gc", "--cache-dir", cache], env=env, check=True,
                   capture_output=True)
    assert not left.exists()


def test_in_memory_builds_need_no_temporary_directory(tmp_path):
    """The in-process compiler and nvJitLink work in memory: a whole or split
    build with them writes nothing under $TMPDIR, and succeeds where it
    cannot be written; a ptxas build says which directory it could not use."""
    env = dict(os.environ, TMPDIR=str(tmp_path / "missing"))
    src = tmp_path / "m.ptx"
    src.write_text(fanout(4, 2))
    cache = tmp_path / "cache"
    ptxas = tc("build", src, "-o", tmp_path / "p.cubin", "--arch", ARCH, "--cache-dir", cache,
               "--compiler", "ptxas", *PER_KERNEL, check=False, env=env)
    assert ptxas.returncode != 0
    assert f"cannot create a temporary directory in {tmp_path / 'missing'} (TMPDIR)" in ptxas.stderr
    if "in-process" not in tc("version").stdout:
        pytest.skip("this taskcache has no in-process compiler")
    for i, extra in enumerate([(), PER_KERNEL]):
        out = tmp_path / f"o{i}.cubin"
        tc("build", src, "-o", out, "--arch", ARCH, "--cache-dir", cache,
           "--compiler", "inprocess", *extra, env=env)
        ref = tmp_path / f"r{i}.cubin"
        tc("build", src, "-o", ref, "--arch", ARCH, "--no-cache", "--compiler", "inprocess",
           *extra)
        assert out.read_bytes() == ref.read_bytes()
    assert not (tmp_path / "missing").exists()


# ---- HMAC: a secret keeps out records written without it ----------------------------------------------

def test_records_authenticated_with_a_secret(module, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("a team secret of some length\n")
    env = dict(os.environ, TASKCACHE_SECRET_FILE=str(secret))
    cache = tmp_path / "cache"
    cmd = [TASKCACHE, "build", module, "--arch", ARCH, "--cache-dir", cache]
    good = tmp_path / "good.cubin"
    run(cmd + ["-o", good], env=env)
    (m,) = hostile.records(cache, "m")
    hostile.forge_image(m, b"\x7fELF forged without the secret")
    out = tmp_path / "o.cubin"
    run(cmd + ["-o", out], env=env)
    assert out.read_bytes() == good.read_bytes()  # the forgery is a miss, and replaced
    assert stats(str(cache))["bad_records"] == 1
    # records of no secret and of another secret never stand in for these
    plain = json.loads(tc("explain", module, "--arch", ARCH, "--cache-dir", cache,
                          "--json").stdout)
    assert not any(e["cached"] for e in plain["entries"])
    other = tmp_path / "other"
    other.write_text("another team's secret, as long\n")
    keyed = json.loads(run([TASKCACHE, "explain", module, "--arch", ARCH, "--cache-dir", cache,
                            "--json"], env=dict(env, TASKCACHE_SECRET_FILE=str(other))).stdout)
    assert not any(e["cached"] for e in keyed["entries"])
    # verify without the secret cannot judge these records: it neither counts
    # nor removes them (it used to call them all bad, and --remove-bad
    # emptied the cache; a review)
    held = hostile.records(cache, "*")
    v = json.loads(tc("verify", "--cache-dir", cache, "--remove-bad", "--json").stdout)
    assert v == {"checked": 0, "bad": 0, "removed": 0}
    assert hostile.records(cache, "*") == held
    v = json.loads(run([TASKCACHE, "verify", "--cache-dir", cache, "--json"], env=env).stdout)
    assert v["checked"] == len(held) and v["bad"] == 0
    # nor with another secret: its checksum cannot tell these records from
    # damaged ones, and --remove-bad removed them all (a review)
    v = json.loads(run([TASKCACHE, "verify", "--cache-dir", cache, "--remove-bad", "--json"],
                       env=dict(env, TASKCACHE_SECRET_FILE=str(other))).stdout)
    assert v == {"checked": 0, "bad": 0, "removed": 0}
    assert hostile.records(cache, "*") == held
    # a secret that cannot be read means no cache, not an unauthenticated one
    p = run(cmd + ["-o", out], env=dict(env, TASKCACHE_SECRET_FILE=str(tmp_path / "none")))
    assert "cannot authenticate the records" in p.stderr and out.read_bytes() == good.read_bytes()
