"""The remote tier against real servers on loopback ports: Redis, a
three-master Redis Cluster and nginx with WebDAV (remote_servers.py starts
them once per session). Every test uses "machines": separate local cache
directories sharing one remote. What a team relies on:

- many processes on two machines build at once: no failure, every output
  byte-identical to a build without any cache, and a third machine then
  builds everything from the remote without compiling;
- a server that is down, stalls, dies mid-build, truncates, sends garbage
  or 5xx, is full, or holds records swapped for other records' bytes or
  forged without the secret: every build still succeeds with the right
  output, the problem is counted, and a process warns once;
- an unreachable remote costs a warm build nothing (no connection at all).
"""

import hashlib
import hmac
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

import remote_servers as rs
from tchelp import ARCH, PER_KERNEL, ROOT, TASKCACHE, as_a_host, slow_ptxas, tc

pytestmark = pytest.mark.skipif(not (rs.REDIS and rs.REDIS_CLI and rs.NGINX),
                                reason="redis-server, redis-cli and nginx are not installed "
                                       "(scripts/setup.sh installs them)")

HOST = os.path.join(os.path.dirname(TASKCACHE), "host_jit")


# ---- servers and inputs, once per session ------------------------------------------------

@pytest.fixture(scope="session")
def redis(tmp_path_factory):
    r = rs.Redis(str(tmp_path_factory.mktemp("redis")))
    yield r
    r.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = rs.RedisCluster(str(tmp_path_factory.mktemp("cluster")))
    yield c
    c.stop()


@pytest.fixture(scope="session")
def webdav(tmp_path_factory):
    n = rs.Nginx(str(tmp_path_factory.mktemp("nginx")))
    yield n
    n.stop()


@pytest.fixture(scope="session")
def modules(tmp_path_factory):
    """Three 16-kernel modules (one, and two single-kernel edits of it) with
    their cubins from a build without any cache: the right answers."""
    d = tmp_path_factory.mktemp("modules")
    subprocess.run(["python3", str(ROOT / "bench" / "gen_module.py"), "-o", str(d / "m.ptx"),
                    "--tasks", "16", "--edit", "3", "--edit", "7"], check=True,
                   capture_output=True)
    mods = [str(d / "m.ptx"), str(d / "m-edit3.ptx"), str(d / "m-edit7.ptx")]
    refs = []
    for i, m in enumerate(mods):
        out = d / f"ref{i}.cubin"
        tc("build", m, "-o", out, "--arch", ARCH, "--no-cache")
        refs.append(out.read_bytes())
    return list(zip(mods, refs))


_dbs = iter(range(1, 16))


@pytest.fixture
def redis_db(redis):
    """A database of the session's Redis of its own: tests never see each
    other's records."""
    db = next(_dbs)
    return f"redis://127.0.0.1:{redis.port}/{db}", db


# ---- helpers ------------------------------------------------------------------------------

def env(**extra):
    e = dict(os.environ)
    for k in ("TASKCACHE_REMOTE", "TASKCACHE_SECRET_FILE", "TASKCACHE_DIR"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def start_build(ptx, out, cache, remote, *extra, environ=None):
    args = [TASKCACHE, "build", ptx, "-o", str(out), "--arch", ARCH, "--cache-dir", str(cache)]
    if remote:
        args += ["--remote", remote]
    return subprocess.Popen(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=environ or env())


def build(ptx, out, cache, remote, *extra, environ=None, rc=0):
    p = start_build(ptx, out, cache, remote, *extra, environ=environ)
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == rc, stderr
    return stderr


def stats(cache, environ=None):
    p = subprocess.run([TASKCACHE, "stats", "--cache-dir", str(cache), "--json"],
                       capture_output=True, text=True, env=environ or env(), check=True)
    return json.loads(p.stdout)


def verify_clean(cache):
    p = subprocess.run([TASKCACHE, "verify", "--cache-dir", str(cache), "--json"],
                       capture_output=True, text=True, env=env())
    assert p.returncode == 0 and json.loads(p.stdout)["bad"] == 0, p.stdout + p.stderr


def warnings(stderr):
    return [line for line in stderr.splitlines() if ": warning: " in line]


def machine(tmp_path, name):
    return tmp_path / name


# ---- many processes, two machines, one remote ---------------------------------------------

def two_machines(tmp_path, modules, remote):
    """16 processes per machine on two machines at once, each building one of
    the three modules; then a third machine builds them all. (32 processes
    on a CI machine's 2 cores: connects get the time a loaded machine
    needs, so that what is checked is sharing, not timeouts.)"""
    remote += "|connect-timeout=5s"
    procs = []
    for m in ("a", "b"):
        for i in range(16):
            ptx, ref = modules[i % 3]
            out = tmp_path / f"{m}{i}.cubin"
            procs.append((start_build(ptx, out, tmp_path / m, remote), out, ref))
    for p, out, ref in procs:
        _, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        assert not warnings(stderr), stderr
        assert out.read_bytes() == ref
    sa, sb = stats(tmp_path / "a"), stats(tmp_path / "b")
    for s in (sa, sb):
        assert s["remote_bad"] == 0 and s["remote_errors"] == 0 and s["remote_write_errors"] == 0
        assert s["remote_hits"] + s["remote_misses"] > 0
    verify_clean(tmp_path / "a")
    verify_clean(tmp_path / "b")
    # each machine compiles a unit at most once (its processes share leases);
    # across machines, units both missed at the same moment compile twice
    unique = tmp_path / "unique"
    for ptx, _ in modules:
        build(ptx, tmp_path / "u.cubin", unique, None)
    units = stats(unique)["compiles"]
    assert sa["compiles"] <= units and sb["compiles"] <= units
    duplicates = sa["compiles"] + sb["compiles"] - units
    print(f"{remote}: {units} units, compiled {sa['compiles']} + {sb['compiles']} times: "
          f"{duplicates} duplicate compiles across the two machines")
    # a third machine: everything from the remote, nothing compiled
    for i, (ptx, ref) in enumerate(modules):
        build(ptx, tmp_path / f"c{i}.cubin", tmp_path / "c", remote)
        assert (tmp_path / f"c{i}.cubin").read_bytes() == ref
    sc = stats(tmp_path / "c")
    assert sc["compiles"] == 0 and sc["module_hits"] == sc["remote_hits"] == 3
    return duplicates


def test_two_machines_share_redis(tmp_path, modules, redis_db):
    two_machines(tmp_path, modules, redis_db[0])


def test_two_machines_share_a_redis_cluster(tmp_path, modules, cluster):
    cluster.flush()
    two_machines(tmp_path, modules, f"redis://127.0.0.1:{cluster.nodes[0].port}")
    # the records are spread over the masters by their slots: each on the
    # master that serves its slot, and not all on one (which master gets
    # none, if any, depends on the keys: 8 records here)
    holders = set()
    for i, n in enumerate(cluster.nodes):
        for k in n.keys():
            assert cluster.owner(int(n.cli("CLUSTER", "KEYSLOT", k).strip())) is n, k
            holders.add(i)
    assert len(holders) > 1


def test_two_machines_share_webdav(tmp_path, modules, webdav):
    two_machines(tmp_path, modules, webdav.url("two-machines"))
    # the layout a WebDAV server serves: v1/<target>/<kind>/<2 hex>/<62 hex>
    files = webdav.files("two-machines")
    assert files and all(f.split("/")[-4] == ARCH and len(f.split("/")[-1]) == 62
                         for f in files)


# ---- what the command line says -----------------------------------------------------------

def test_remote_check(tmp_path, redis, cluster, webdav):
    def check(remote, rc=0):
        p = subprocess.run([TASKCACHE, "remote", "check", "--cache-dir", str(tmp_path / "c"),
                            "--remote", remote, "--json"], capture_output=True, text=True,
                           env=env())
        assert p.returncode == rc, p.stdout + p.stderr
        return json.loads(p.stdout)

    r = check(f"redis://127.0.0.1:{redis.port}/15")
    assert r["reachable"] and r["writable"] and r["read_back"] and r["server"].startswith("Redis ")
    assert r["server_bytes"] > 0 and r["server_records"] >= 0
    assert "3 masters" in check(f"redis://127.0.0.1:{cluster.nodes[1].port}")["server"]
    r = check(webdav.url("check"))
    assert r["writable"] and r["read_back"] and "nginx" in r["server"]
    r = check(f"redis://127.0.0.1:{redis.port}/15|read-only")
    assert r["read_only"] and not r["writable"] and r["read_back"]
    r = check(f"redis://127.0.0.1:{rs.free_port()}", rc=1)
    assert not r["reachable"] and "cannot connect" in r["problem"]
    text = tc("remote", "check", "--cache-dir", tmp_path / "c", "--remote", webdav.url("t")).stdout
    assert "round trip     yes" in text


def test_bad_remote_specs_say_where(tmp_path, modules):
    ptx, ref = modules[0]
    p = tc("build", ptx, "-o", tmp_path / "o.cubin", "--arch", ARCH, "--cache-dir",
           tmp_path / "c", "--remote", "redis://127.0.0.1|tiemout=5s", check=False)
    assert p.returncode == 2 and "unknown attribute 'tiemout'" in p.stderr
    # in the configuration file: the build goes on without it, and says
    # which file and line hold the mistake
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700, exist_ok=True)
    (cache / "taskcache.conf").write_text("max_size = 1G\nremote = redis://:secret@cache|ttl=soon\n")
    stderr = build(ptx, tmp_path / "o.cubin", cache, None)
    assert f"{cache}/taskcache.conf:2: bad remote spec: ttl takes whole seconds" in stderr
    assert "secret" not in stderr
    assert (tmp_path / "o.cubin").read_bytes() == ref
    p = tc("remote", "check", "--cache-dir", cache, check=False)
    assert p.returncode == 1 and "taskcache.conf:2" in p.stderr
    # a right spec whose password-file is missing (a secret a CI runner did
    # not mount) is a cache problem, not a usage error: it stopped the build
    # with status 2 (a review); the build goes on without the remote
    (cache / "taskcache.conf").write_text("remote = redis://127.0.0.1:9\n")
    stderr = build(ptx, tmp_path / "o2.cubin", cache,
                   "redis://u@127.0.0.1:9|password-file=/nonexistent/pw")
    w = warnings(stderr)
    assert len(w) == 1 and "cannot read password-file /nonexistent/pw" in w[0], stderr
    assert "no remote storage is used" in w[0]
    assert (tmp_path / "o2.cubin").read_bytes() == ref
    assert stats(cache)["remote_errors"] == 0  # not even the configuration's remote is tried


# ---- a remote that is not there, or stalls --------------------------------------------------

def test_unreachable_remote_is_tried_once_and_costs_a_warm_build_nothing(tmp_path, modules):
    proxy = rs.FaultProxy(rs.free_port())  # nothing listens behind it
    proxy.mode = "drop"
    remote = f"redis://127.0.0.1:{proxy.port}"
    try:
        ptx, ref = modules[0]
        stderr = build(ptx, tmp_path / "o.cubin", tmp_path / "c", remote)
        assert (tmp_path / "o.cubin").read_bytes() == ref
        assert len(warnings(stderr)) == 1 and "not used again by this process" in stderr
        assert proxy.connections == 1  # not once per record
        s = stats(tmp_path / "c")
        assert s["remote_errors"] == 1 and s["remote_hits"] == 0
        before = proxy.connections
        stderr = build(ptx, tmp_path / "o.cubin", tmp_path / "c", remote)
        assert proxy.connections == before and not warnings(stderr)
        # nor does a unit-level warm build (every unit found locally)
        build(ptx, tmp_path / "o.cubin", tmp_path / "c", remote, "--no-module-cache")
        assert proxy.connections == before
    finally:
        proxy.stop()


def test_a_stalled_server_costs_one_timeout(tmp_path, modules, redis):
    proxy = rs.FaultProxy(redis.port)
    proxy.mode = "stall"
    try:
        ptx, ref = modules[1]
        t0 = time.time()
        stderr = build(ptx, tmp_path / "o.cubin", tmp_path / "c",
                       f"redis://127.0.0.1:{proxy.port}/14|timeout=400ms|flush-timeout=1s")
        took = time.time() - t0
        assert (tmp_path / "o.cubin").read_bytes() == ref
        assert len(warnings(stderr)) == 1 and "timed out" in stderr
        assert took < 10
        assert stats(tmp_path / "c")["remote_errors"] == 1
    finally:
        proxy.stop()
    # a slow server (50 ms each way) is slow, not wrong; its own proxy, so
    # that nothing of the stalled connections above is still about
    proxy = rs.FaultProxy(redis.port)
    proxy.mode = "delay"
    proxy.delay = 0.05
    try:
        # (the connection's own round trips are slow too: on a loaded
        # machine the default connect timeout of 500 ms can pass, which is
        # no finding of this test)
        remote = f"redis://127.0.0.1:{proxy.port}/14|connect-timeout=5s"
        first = build(ptx, tmp_path / "o.cubin", tmp_path / "d", remote)
        second = build(ptx, tmp_path / "o2.cubin", tmp_path / "e", remote)
        assert not warnings(first) and not warnings(second), (first + second, proxy.events)
        assert (tmp_path / "o2.cubin").read_bytes() == ref
        assert stats(tmp_path / "e")["remote_hits"] == 1
    finally:
        proxy.stop()


def wait_for(condition, seconds=60):
    end = time.time() + seconds
    while not condition():
        assert time.time() < end, "timed out waiting"
        time.sleep(0.05)


def interrupt(p):
    """Ctrl-C for p: how long it took to die of it."""
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    _, stderr = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGINT and "interrupted" in stderr, stderr
    return time.time() - t0


@pytest.mark.parametrize("scheme", ["redis", "http"])
def test_ctrl_c_does_not_wait_for_a_stalled_lookup(tmp_path, modules, scheme):
    """A Ctrl-C during a lookup of a server that never answers waited out
    the timeout (10 s by default). With a timeout of a minute here, the
    build must die of the signal within seconds, and leave no output."""
    proxy = rs.FaultProxy(rs.free_port())
    proxy.mode = "stall"
    try:
        path = "/c" if scheme == "http" else ""
        remote = f"{scheme}://127.0.0.1:{proxy.port}{path}|timeout=60s|flush-timeout=60s"
        p = start_build(modules[0][0], tmp_path / "o.cubin", tmp_path / "c", remote)
        wait_for(lambda: proxy.connections >= 1)
        time.sleep(0.3)  # the request is sent and waits for its answer
        assert interrupt(p) < 20
        assert not (tmp_path / "o.cubin").exists()
    finally:
        proxy.stop()


def test_ctrl_c_does_not_wait_for_stalled_uploads(tmp_path, modules):
    """Lookups answered, every upload stalled: the build ends with a flush
    of up to flush-timeout (a minute here). After a Ctrl-C the records
    still queued get a second, not the minute."""
    server = rs.FaultHTTP()
    server.mode = "stall-put"
    try:
        remote = server.url("c") + "|timeout=60s|flush-timeout=60s"
        p = start_build(modules[0][0], tmp_path / "o.cubin", tmp_path / "c", remote,
                        "-j", "1", "--compiler", "ptxas", "--ptxas",
                        str(slow_ptxas(tmp_path, 0.5)), *PER_KERNEL)
        wait_for(lambda: server.puts)  # a unit compiled, its upload stalls
        assert interrupt(p) < 20
    finally:
        server.stop()


def build_past(module, tmp_path, remote, seconds=None):
    """Builds module (ptx, reference image) through a remote that
    misbehaves: the build ends within seconds (when given) with the image a
    build without a remote makes. Its standard error."""
    ptx, ref = module
    t0 = time.time()
    stderr = build(ptx, tmp_path / "o.cubin", tmp_path / "c", remote)
    assert seconds is None or time.time() - t0 < seconds
    assert (tmp_path / "o.cubin").read_bytes() == ref
    return stderr


def test_a_reply_that_never_ends_costs_one_timeout(tmp_path, modules):
    """A server that answers a byte every 200 ms: each read succeeds within
    the timeout, and a build waited for the end of the reply for good (a
    review). The timeout now bounds a whole command; then the build
    compiles, as with a server that does not answer at all."""
    proxy = rs.FaultProxy(rs.free_port())
    proxy.mode, proxy.answer, proxy.delay = "trickle", b"+", 0.2
    try:
        stderr = build_past(modules[1], tmp_path, f"redis://127.0.0.1:{proxy.port}|timeout=1s",
                            20)
        assert len(warnings(stderr)) == 1 and "timed out" in stderr
        # and `remote check` calls a server that never finishes an answer
        # unreachable (it said "reachable yes" after a timeout per question)
        proxy.mode = "stall"
        p = tc("remote", "check", "--cache-dir", str(tmp_path / "c"), "--remote",
               f"redis://127.0.0.1:{proxy.port}|timeout=500ms", check=False)
        assert p.returncode == 1 and "reachable      no" in p.stdout, p.stdout
    finally:
        proxy.stop()


def test_an_http_body_that_trickles_costs_the_timeout(tmp_path, modules):
    """2 KiB/s, above curl's stall limit, with a 50 MiB Content-Length: the
    deadline was the timeout plus a second per 256 KiB of the largest record
    of its kind (68 minutes for a module). Now what arrives earns the time."""
    server = rs.FaultHTTP()
    server.mode = "trickle"
    try:
        stderr = build_past(modules[2], tmp_path, server.url("tc") + "|timeout=1s|retries=1", 30)
        assert "timed out" in stderr
    finally:
        server.stop()


def test_a_server_announcing_a_huge_reply_is_refused_at_once(tmp_path, modules):
    """A server (or something else on its port) whose answer announces an
    array of 2 billion elements: hiredis would allocate 16 GB for it before
    a byte arrived. taskcache refuses the reply, says why, and builds."""
    proxy = rs.FaultProxy(rs.free_port())
    proxy.mode = "answer"
    proxy.answer = b"*2000000000\r\n"
    try:
        stderr = build_past(modules[1], tmp_path, f"redis://127.0.0.1:{proxy.port}|timeout=30s")
        w = warnings(stderr)
        assert len(w) == 1 and "more array elements than taskcache ever reads" in w[0], stderr
        assert stats(tmp_path / "c")["remote_errors"] == 1
    finally:
        proxy.stop()


def test_a_server_announcing_a_huge_value_is_refused_at_once(tmp_path, modules):
    """A value announced at 1.9 GB, then sent as fast as it goes: hiredis
    keeps a string until all of it has arrived, so the build buffered
    hundreds of MB until the timeout (a review). The announced length is
    checked against the largest record of its kind as it arrives."""
    proxy = rs.FaultProxy(rs.free_port())
    proxy.mode = "flood"
    proxy.answer = b"$1900000000\r\n"
    try:
        stderr = build_past(modules[1], tmp_path, f"redis://127.0.0.1:{proxy.port}|timeout=60s",
                            30)
        w = warnings(stderr)
        assert len(w) == 1 and "larger than any record of its kind" in w[0], stderr
    finally:
        proxy.stop()


def test_ctrl_c_does_not_wait_for_the_final_flush(tmp_path, modules):
    """The output is written and the build waits for its uploads (up to
    flush-timeout, a minute here): a Ctrl-C then waited the minute out, as
    the wait never looked at it (a review). The uploads get a second."""
    server = rs.FaultHTTP()
    server.mode = "stall-put"
    try:
        out = tmp_path / "o.cubin"
        remote = server.url("c") + "|timeout=60s|flush-timeout=60s"
        p = start_build(modules[0][0], out, tmp_path / "c", remote)
        wait_for(lambda: out.exists() and server.puts)
        time.sleep(0.3)  # in the flush
        assert interrupt(p) < 10
    finally:
        server.stop()


def test_units_missing_locally_are_looked_up_together(tmp_path, modules, redis, redis_db):
    """A machine with an empty cache asks the remote for its units several
    at a time, each lookup on a connection of its own (8 at most), so that a
    distant server costs a few round trips, not one per unit."""
    remote, db = redis_db
    ptx, _ = modules[0]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote, "--unit-cost", "1")
    units = stats(tmp_path / "a")["compiles"]
    assert units >= 12
    proxy = rs.FaultProxy(redis.port)
    proxy.mode = "delay"
    proxy.delay = 0.02
    try:
        slow = f"redis://127.0.0.1:{proxy.port}/{db}|read-only"
        build(ptx, tmp_path / "b.cubin", tmp_path / "b", slow, "--unit-cost", "1",
              "--no-module-cache")
    finally:
        proxy.stop()
    assert (tmp_path / "b.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    s = stats(tmp_path / "b")
    assert s["compiles"] == 0 and s["remote_hits"] == units and s["remote_misses"] == 0
    assert 1 < proxy.connections <= 8


def test_server_killed_mid_build_and_restarted(tmp_path, modules):
    r = rs.Redis(str(tmp_path / "redis"))
    remote = f"redis://127.0.0.1:{r.port}"
    try:
        procs = []
        for i in range(8):
            ptx, ref = modules[i % 3]
            out = tmp_path / f"a{i}.cubin"
            procs.append((start_build(ptx, out, tmp_path / f"m{i % 2}", remote), out, ref))
        # killed once the first unit is compiled (and uploading): the build
        # that compiled it has its module record still to upload, at least
        end = time.time() + 120
        while not list((tmp_path / "m0").glob("v1/*/u/*/*")) and time.time() < end:
            time.sleep(0.01)
        r.stop()
        for p, out, ref in procs:
            _, stderr = p.communicate(timeout=300)
            assert p.returncode == 0, stderr
            assert out.read_bytes() == ref
            assert len(warnings(stderr)) <= 2  # a lookup's, and the uploads'
        s = [stats(tmp_path / f"m{i}") for i in range(2)]
        assert sum(x["remote_errors"] + x["remote_write_errors"] for x in s) > 0
        # restarted (empty): new builds use it again (the machines above
        # hold every module locally: they are served there, and upload
        # nothing), and a new machine gets what another uploaded
        r.start()
        procs = []
        for i in range(4):
            ptx, ref = modules[i % 3]
            out = tmp_path / f"b{i}.cubin"
            procs.append((start_build(ptx, out, tmp_path / f"m{i % 2}", remote), out, ref))
        for p, out, ref in procs:
            _, stderr = p.communicate(timeout=300)
            assert p.returncode == 0 and not warnings(stderr), stderr
            assert out.read_bytes() == ref
        ptx, ref = modules[0]
        build(ptx, tmp_path / "z.cubin", tmp_path / "z", remote)
        build(ptx, tmp_path / "y.cubin", tmp_path / "y", remote)
        assert (tmp_path / "y.cubin").read_bytes() == ref
        assert stats(tmp_path / "y")["remote_hits"] == 1
    finally:
        r.stop()


# ---- a server that answers wrongly ----------------------------------------------------------

@pytest.mark.parametrize("fault,counter", [("truncate", "remote_errors"),
                                           ("garbage", "remote_bad"),
                                           ("503", "remote_errors")])
def test_http_answers_that_are_not_records(tmp_path, modules, fault, counter):
    server = rs.FaultHTTP()
    remote = server.url("tc") + "|retries=1"
    try:
        ptx, ref = modules[2]
        build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote)
        assert server.store
        server.mode = fault
        stderr = build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote)
        assert (tmp_path / "b.cubin").read_bytes() == ref
        s = stats(tmp_path / "b")
        assert s[counter] > 0 and s["remote_hits"] == 0
        assert len([w for w in warnings(stderr) if "remote" in w]) <= 2  # a lookup's, an upload's
        verify_clean(tmp_path / "b")
        server.mode = "pass"
        stderr = build(ptx, tmp_path / "c.cubin", tmp_path / "c", remote)
        assert stats(tmp_path / "c")["remote_hits"] == 1, stderr
    finally:
        server.stop()


@pytest.mark.parametrize("code,attempts", [("503", 3), ("403", 1)])
def test_a_refusal_is_not_retried(tmp_path, modules, code, attempts):
    """A 5xx may be gone on the next attempt, so an upload is tried
    retries + 1 times; a 403 (or 401, 405, 413) says the request itself is
    refused, and sending it twice more only makes the build slower and the
    server's log longer. Either way the build is right and says why once."""
    server = rs.FaultHTTP()
    server.mode = code
    try:
        ptx, ref = modules[0]
        stderr = build(ptx, tmp_path / "a.cubin", tmp_path / "a",
                       server.url("tc") + "|retries=2")
        assert (tmp_path / "a.cubin").read_bytes() == ref
        assert server.puts and set(server.puts.values()) == {attempts}, server.puts
        w = [x for x in warnings(stderr) if "remote" in x]
        assert w and all(f"HTTP {code}" in x for x in w), w
    finally:
        server.stop()


def test_a_full_server(tmp_path, modules, tmp_path_factory):
    server = rs.FaultHTTP()
    server.mode = "full"
    small = rs.Redis(str(tmp_path / "redis"), maxmemory="1mb")
    try:
        ptx, ref = modules[0]
        for remote in (server.url("tc"), f"redis://127.0.0.1:{small.port}"):
            cache = tmp_path / remote.split(":")[0]
            stderr = build(ptx, tmp_path / "o.cubin", cache, remote)
            assert (tmp_path / "o.cubin").read_bytes() == ref
            assert stats(cache)["remote_write_errors"] > 0
            w = [x for x in warnings(stderr) if "could not be written" in x]
            assert len(w) == 1, stderr
            assert "507" in w[0] or "OOM" in w[0]
    finally:
        server.stop()
        small.stop()


def test_s3_style_stores_get_signed_requests(tmp_path, modules):
    """S3 and compatible stores (MinIO, Ceph, R2) through libcurl's AWS
    SigV4: every request is signed with the URL's key; the server here only
    checks that it is (a real S3 also checks the signature)."""
    server = rs.FaultHTTP()
    remote = (f"http://AKIDEXAMPLE:wJalrXUtnFEMI@127.0.0.1:{server.port}/bucket/tc"
              "|aws-sigv4=aws:amz:us-east-1:s3")
    try:
        ptx, ref = modules[0]
        build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote)
        build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote)
        assert (tmp_path / "b.cubin").read_bytes() == ref
        assert stats(tmp_path / "b")["remote_hits"] == 1
        assert server.headers and all(
            h.get("Authorization", "").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
            and "x-amz-date" in {k.lower() for k in h} and "wJalrXUtnFEMI" not in str(h)
            for h in server.headers)
    finally:
        server.stop()


def record_keys(r, db):
    return [k for k in r.cli("-n", db, "--scan", "--pattern", "taskcache:*").split() if k]


def test_swapped_records_are_caught(tmp_path, modules, redis, redis_db):
    remote, db = redis_db
    ptx, ref = modules[0]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote)
    keys = record_keys(redis, db)
    assert len(keys) > 2
    # every record replaced by another record's bytes: right key, wrong content
    values = [redis.cli("-n", db, "--raw", "GET", k, raw=True)[:-1] for k in keys]
    for k, v in zip(keys, values[1:] + values[:1]):
        subprocess.run([rs.REDIS_CLI, "-p", str(redis.port), "-n", str(db), "-x", "SET", k],
                       input=v, check=True, capture_output=True)
    build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote, "--no-module-cache")
    assert (tmp_path / "b.cubin").read_bytes() == ref
    s = stats(tmp_path / "b")
    assert s["remote_bad"] == s["unit_misses"] > 0 and s["remote_hits"] == 0
    # machine b's rebuild replaced them: machine c is served again
    build(ptx, tmp_path / "c.cubin", tmp_path / "c", remote, "--no-module-cache")
    s = stats(tmp_path / "c")
    assert s["remote_bad"] == 0 and s["remote_hits"] == s["unit_hits"] > 0


def forge(record, secret):
    """The record re-signed with another secret, as a writer who does not
    hold the team's secret would make it (record.h gives the format)."""
    head, body = record[:64], record[96:]
    return head + hmac.new(secret, head + body, hashlib.sha256).digest() + body


def test_records_without_the_secret_are_refused(tmp_path, modules, redis, redis_db):
    remote, db = redis_db
    secret = tmp_path / "secret"
    secret.write_bytes(os.urandom(32))
    secret.chmod(0o600)
    team = env(TASKCACHE_SECRET_FILE=secret)
    ptx, ref = modules[1]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote, environ=team)
    keys = record_keys(redis, db)
    for k in keys:
        v = redis.cli("-n", db, "--raw", "GET", k, raw=True)[:-1]
        subprocess.run([rs.REDIS_CLI, "-p", str(redis.port), "-n", str(db), "-x", "SET", k],
                       input=forge(v, b"not the team's secret, but long enough"), check=True,
                       capture_output=True)
    build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote, environ=team)
    assert (tmp_path / "b.cubin").read_bytes() == ref
    s = stats(tmp_path / "b", environ=team)
    assert s["remote_bad"] > 0 and s["remote_hits"] == 0
    # a client without the secret looks under other keys: it is never served
    # the team's records, and never counts them bad
    build(ptx, tmp_path / "c.cubin", tmp_path / "c", remote)
    s = stats(tmp_path / "c")
    assert s["remote_hits"] == 0 and s["remote_bad"] == 0


def test_read_only_reads_and_never_writes(tmp_path, modules, redis, redis_db):
    remote, db = redis_db
    ptx, ref = modules[2]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote)
    keys = set(record_keys(redis, db))
    build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote + "|read-only")
    assert (tmp_path / "b.cubin").read_bytes() == ref
    assert stats(tmp_path / "b")["remote_hits"] == 1
    # another module (one kernel differs): its new unit and module record
    # are built, and not uploaded
    build(modules[0][0], tmp_path / "b0.cubin", tmp_path / "b", remote + "|read-only")
    assert set(record_keys(redis, db)) == keys
    s = stats(tmp_path / "b")
    assert s["compiles"] > 0 and s["remote_writes"] == 0 and s["remote_write_errors"] == 0


def test_a_hit_refreshes_the_ttl(tmp_path, modules, redis, redis_db):
    remote, db = redis_db
    ptx, _ = modules[0]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote + "|ttl=1h")
    keys = record_keys(redis, db)
    assert keys and all(3500 < int(redis.cli("-n", db, "TTL", k)) <= 3600 for k in keys)
    for k in keys:
        redis.cli("-n", db, "EXPIRE", k, 60)
    build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote + "|ttl=1h")
    ttls = sorted(int(redis.cli("-n", db, "TTL", k)) for k in keys)
    assert ttls[-1] > 3500 and ttls[0] <= 60  # the module record was read; the units were not


def test_a_user_allowed_only_to_read_gets_hits_with_a_ttl(tmp_path, modules, redis, redis_db):
    """GETEX refreshes the expiry and is a write to Redis's ACLs: a reader
    (developers read, CI writes) looks records up with GET instead, with
    |read-only and without."""
    remote, db = redis_db
    ptx, ref = modules[1]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote + "|ttl=1h")
    redis.cli("ACL", "SETUSER", "reader", "on", ">rpw", "~*", "-@all", "+@read", "+select",
              "+auth", "+ping", "+hello")
    reader = remote.replace("redis://", "redis://reader:rpw@")
    for i, attrs in enumerate(("|ttl=1h|read-only", "|ttl=1h")):
        cache = tmp_path / f"r{i}"
        stderr = build(ptx, tmp_path / f"r{i}.cubin", cache, reader + attrs)
        assert (tmp_path / f"r{i}.cubin").read_bytes() == ref
        s = stats(cache)
        assert s["remote_hits"] == 1 and s["remote_errors"] == 0, stderr
        assert "NOPERM" not in stderr


def test_a_password_from_a_file(tmp_path, modules, redis, redis_db):
    """|password-file keeps the password out of the environment; a wrong one
    costs the remote (one warning), never the build."""
    remote, db = redis_db
    ptx, ref = modules[0]
    redis.cli("ACL", "SETUSER", "filer", "on", ">f1le-pw", "~*", "+@all")
    pw = tmp_path / "pw"
    pw.write_text("f1le-pw\n")
    spec = remote.replace("redis://", "redis://filer@") + f"|password-file={pw}"
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", spec)
    build(ptx, tmp_path / "b.cubin", tmp_path / "b", spec)
    assert (tmp_path / "b.cubin").read_bytes() == ref
    assert stats(tmp_path / "b")["remote_hits"] == 1
    pw.write_text("wrong\n")
    stderr = build(ptx, tmp_path / "c.cubin", tmp_path / "c", spec)
    assert (tmp_path / "c.cubin").read_bytes() == ref
    assert stats(tmp_path / "c")["remote_hits"] == 0 and "f1le-pw" not in stderr
    assert "warning" in stderr, stderr


def test_a_shared_caches_config_names_no_credential_files(tmp_path, modules):
    """A member of a shared cache writes its taskcache.conf: a file named
    there would be sent to a server of that member's choosing."""
    ptx, ref = modules[0]
    for attr in ("password-file", "bearer-token-file"):
        cache = tmp_path / attr
        cache.mkdir()
        url = "redis://u@127.0.0.1:1" if attr == "password-file" else "http://127.0.0.1:1/c"
        (cache / "taskcache.conf").write_text(f"shared = true\nremote = {url}|{attr}=/etc/passwd\n")
        stderr = build(ptx, tmp_path / f"{attr}.cubin", cache, None)
        assert f"{attr} is not taken from the taskcache.conf of a shared cache" in stderr, stderr
        assert (tmp_path / f"{attr}.cubin").read_bytes() == ref


def test_ask_and_moved_during_a_resharding(tmp_path, modules, cluster):
    """A slot migrating between masters answers ASK for keys already moved;
    after the move, MOVED: both followed, both hits."""
    cluster.flush()
    remote = f"redis://127.0.0.1:{cluster.nodes[0].port}"
    ptx, ref = modules[1]
    build(ptx, tmp_path / "a.cubin", tmp_path / "a", remote)
    keys = [k for n in cluster.nodes for k in n.keys() if "/m/" in k]
    assert len(keys) == 1
    key = keys[0]
    slot = int(cluster.nodes[0].cli("CLUSTER", "KEYSLOT", key))
    src = cluster.owner(slot)
    dst = next(n for n in cluster.nodes if n is not src)
    dst.cli("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(src))
    src.cli("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(dst))
    assert "OK" in src.cli("MIGRATE", "127.0.0.1", dst.port, key, 0, 5000)
    assert "ASK" in src.cli("GET", key, check=False)
    build(ptx, tmp_path / "b.cubin", tmp_path / "b", remote)
    assert (tmp_path / "b.cubin").read_bytes() == ref
    assert stats(tmp_path / "b")["remote_hits"] == 1
    for n in cluster.nodes:
        n.cli("CLUSTER", "SETSLOT", slot, "NODE", cluster.node_id(dst))
    build(ptx, tmp_path / "c.cubin", tmp_path / "c", remote)
    assert stats(tmp_path / "c")["remote_hits"] == 1


# ---- the same remote serves task builds and the driver interceptor --------------------------

def test_task_builds_share_the_remote(tmp_path, redis_db):
    remote, _ = redis_db
    tasks = ROOT / "examples" / "tasks.txt"
    outs = []
    for m in ("a", "b"):
        p = subprocess.run([HOST, "--cache-dir", str(tmp_path / m), str(tasks),
                            str(tmp_path / f"{m}.cubin")], capture_output=True, text=True,
                           env=env(TASKCACHE_REMOTE=remote), check=True)
        outs.append(p.stdout)
    assert "group manifest miss; front end ran; codegen ran 12 times" in outs[0]
    # machine b: the group manifest and every task record from the remote
    assert "group manifest hit; front end skipped; codegen ran 0 times" in outs[1]
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    assert stats(tmp_path / "b")["remote_hits"] > 0


def test_task_records_missing_locally_are_looked_up_together(tmp_path, redis, redis_db):
    """A task build on a machine with an empty cache asks the remote for the
    task records it lacks several at a time, each on a connection of its
    own: the records a group manifest names, and those of tc_build_tasks
    after the front end ran (one task edited: the manifest misses)."""
    remote, db = redis_db
    tasks = ROOT / "examples" / "tasks.txt"
    edited = tmp_path / "edited.txt"
    edited.write_text(tasks.read_text().replace("gravity       saxpy 1.0 -9.81",
                                                "gravity       saxpy 1.0 -9.80"))

    def host(cache, task_file, spec):
        return subprocess.run([HOST, "--cache-dir", str(tmp_path / cache), str(task_file),
                               str(tmp_path / f"{cache}.cubin")], capture_output=True, text=True,
                              env=env(TASKCACHE_REMOTE=spec), check=True).stdout

    host("a", tasks, remote)
    for cache, task_file, want in (
            ("b", tasks, "group manifest hit; front end skipped; codegen ran 0 times"),
            ("c", edited, "group manifest miss; front end ran; codegen ran 1 times")):
        proxy = rs.FaultProxy(redis.port)
        proxy.mode = "delay"
        proxy.delay = 0.02
        try:
            out = host(cache, task_file, f"redis://127.0.0.1:{proxy.port}/{db}|read-only")
        finally:
            proxy.stop()
        assert want in out, out
        assert stats(tmp_path / cache)["remote_hits"] >= 11
        assert 1 < proxy.connections <= 9, proxy.connections  # 8 readers and the first lookup's
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()


def test_the_driver_interceptor_shares_the_remote(tmp_path, modules, redis_db):
    build_dir = os.path.dirname(os.path.abspath(TASKCACHE))
    fake_dir = os.path.join(build_dir, "tests", "intercept")
    lib = os.path.join(build_dir, "libtaskcache_intercept.so")
    with open(lib, "rb") as f:
        if b"__asan_init" in f.read():
            pytest.skip("a sanitizer build's interceptor cannot be preloaded")
    remote, _ = redis_db
    ptx = modules[0][0]
    host_ref = tmp_path / "host.cubin"
    tc("build", ptx, "-o", host_ref, "--arch", ARCH, "--no-cache", *as_a_host())
    host_ref = host_ref.read_bytes()
    for m in ("a", "b"):
        saved = tmp_path / f"saved-{m}"
        saved.mkdir()
        e = env(LD_LIBRARY_PATH=fake_dir, FAKE_CUDA_LOG=tmp_path / f"fake-{m}.log",
                FAKE_CUDA_SAVE=saved, ASAN_OPTIONS="detect_leaks=0")
        p = subprocess.run([TASKCACHE, "run", "--cache-dir", str(tmp_path / m), "--remote", remote,
                            "--", os.path.join(fake_dir, "jit_client"), "dlsym", "load", ptx],
                           capture_output=True, text=True, env=e, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        cubins = sorted(saved.glob("*.cubin"))
        assert len(cubins) == 1 and cubins[0].read_bytes() == host_ref
    s = stats(tmp_path / "b")
    assert s["driver_built"] == 1 and s["remote_hits"] == 1 and s["compiles"] == 0


def test_libcurl_is_opened_not_linked():
    """Every process that loads taskcache (each program under `taskcache
    run` that loads PTX, through the interceptor's builder) would otherwise
    load libcurl and the two dozen libraries it needs; the HTTP tests above
    show it is found when an HTTP remote is used."""
    exe = pathlib.Path(TASKCACHE).resolve()
    libs = [exe] + [p for p in (exe.parent / "libtaskcache_jit.so",
                                exe.parent / "libtaskcache.so") if p.exists()]
    for f in libs:
        needed = subprocess.run(["readelf", "-d", str(f)], capture_output=True, text=True,
                                check=True).stdout
        assert "NEEDED" in needed and "libcurl" not in needed, f
