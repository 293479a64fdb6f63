"""hostile: what a hostile member of a shared cache, or a hostile input,
can do to taskcache; shared by the end-to-end tests (tests/e2e/test_trust.py)
and scripts/torture.py. Python standard library only (libzstd through
ctypes for the records).

- Throwaway users and a group (root only), and running commands as them.
- Records: read, forge (recomputing the plain SHA-256 checksum, which any
  writer can), and decompression bombs.
- The clear race: a directory swapped for a link while `taskcache clear`
  walks it.
- Measuring a command: peak memory and CPU time of that process alone.
"""

import ctypes
import ctypes.util
import grp
import hashlib
import json
import os
import pwd
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HEADER = struct.Struct("<4sIIIQQ")   # magic, format, kind, flags, raw size, stored size
FORMAT = 2                           # src/store/record.h: TC_RECORD_FORMAT
FRAME = 512 << 10                    # TC_RECORD_FRAME: a payload's frames hold this much
SYSTEM_PYTHON = "/usr/bin/python3"   # one that every user can run


# ---- users --------------------------------------------------------------------------

def can_make_users():
    return os.geteuid() == 0 and shutil.which("useradd") and os.access(SYSTEM_PYTHON, os.X_OK)


class Users:
    """A group and members of it, plus one outsider, removed on close.
    Names are random so that parallel runs never meet."""

    def __init__(self, members=("alice", "mallory")):
        tag = secrets.token_hex(3)
        self.group = f"tcg{tag}"
        subprocess.run(["groupadd", self.group], check=True)
        self.names = {}
        try:
            for m in list(members) + ["outsider"]:
                name = f"tc{m[:6]}{tag}"
                groups = [] if m == "outsider" else ["-G", self.group]
                subprocess.run(["useradd", "-M", "-N", "-d", "/nonexistent", "-s", "/bin/false",
                                *groups, name], check=True)
                self.names[m] = name
        except Exception:
            self.close()
            raise
        self.gid = grp.getgrnam(self.group).gr_gid

    def uid(self, member):
        return pwd.getpwnam(self.names[member]).pw_uid

    def _setpriv(self, member):
        pw = pwd.getpwnam(self.names[member])
        return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--"]

    def run(self, member, args, umask=0o077, check=True, env=None, **kw):
        """Runs args as the member (its groups included) with that umask."""
        e = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}
        e.update(env or {})
        cmd = [*self._setpriv(member), "/bin/sh", "-c", f"umask {umask:o}; exec \"$@\"", "sh",
               *[str(a) for a in args]]
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"as {member}: {args} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def popen(self, member, args, env=None, **kw):
        e = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}
        e.update(env or {})
        cmd = [*self._setpriv(member), *[str(a) for a in args]]
        return subprocess.Popen(cmd, env=e, **kw)

    def close(self):
        for name in self.names.values():
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", self.group], capture_output=True)


def open_dir(path, mode=0o755):
    """A directory other users can reach (pytest's are private)."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)
    return path


# ---- records ----------------------------------------------------------------------------

_zstd = None


def zstd():
    global _zstd
    if _zstd is None:
        z = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
        z.ZSTD_compressBound.restype = ctypes.c_size_t
        z.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
        z.ZSTD_compress.restype = ctypes.c_size_t
        z.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int]
        z.ZSTD_decompress.restype = ctypes.c_size_t
        z.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                      ctypes.c_size_t]
        _zstd = z
    return _zstd


def compress_frame(data, level):
    z = zstd()
    bound = z.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(bound)
    n = z.ZSTD_compress(out, bound, data, len(data), level)
    return out.raw[:n]


def compress(data, level=1):
    """As the writer stores a payload: frames of FRAME bytes, each alone."""
    cuts = range(0, len(data), FRAME) if data else [0]
    return b"".join(compress_frame(data[i:i + FRAME], level) for i in cuts)


def decompress(data, raw):
    out = ctypes.create_string_buffer(raw + 1)
    n = zstd().ZSTD_decompress(out, raw, data, len(data))
    assert n == raw, n
    return out.raw[:raw]


def fields(payload):
    i, out = 0, []
    while i < len(payload):
        tag, n = struct.unpack_from("<IQ", payload, i)
        out.append((tag, payload[i + 12:i + 12 + n]))
        i += 12 + n
    return out


def put_fields(fs):
    return b"".join(struct.pack("<IQ", t, len(v)) + v for t, v in fs)


def record(kind, key, stored, raw, flags=1):
    """A record whose plain checksum verifies, as any writer can make one."""
    hdr = HEADER.pack(b"TCR\x01", FORMAT, kind, flags, raw, len(stored)) + key
    return hdr + hashlib.sha256(hdr + stored).digest() + stored


def replace(path, data):
    tmp = f"{path}.forge"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, os.stat(path).st_mode & 0o777)
    os.rename(tmp, path)


def forge_image(path, image):
    """Replaces the linked image a module record holds."""
    rec = open(path, "rb").read()
    _, _, kind, _, raw, _ = HEADER.unpack_from(rec)
    payload = fields(decompress(rec[96:], raw))
    new = put_fields([(t, image if t == 2 else v) for t, v in payload])
    replace(path, record(kind, rec[32:64], compress(new), len(new)))


def bomb(path, raw):
    """Replaces a record with a valid one whose frames really inflate to
    raw zero bytes (frames of FRAME bytes, as the writer cuts them)."""
    rec = open(path, "rb").read()
    kind, key = HEADER.unpack_from(rec)[2], rec[32:64]
    full, rest = divmod(raw, FRAME)
    stored = (compress_frame(b"\0" * FRAME, 19) * full
              + (compress_frame(b"\0" * rest, 19) if rest else b""))
    replace(path, record(kind, key, stored, raw))
    return len(stored)


def records(cache, kind="*"):
    import pathlib
    return sorted(p for p in pathlib.Path(cache).glob(f"v1/*/{kind}/*/*") if len(p.name) == 62)


# ---- the clear race ----------------------------------------------------------------------

# Run by the attacker: plants <root>/v1/zz/X (many files and a directory
# named like one in the victim's target), waits until the victim starts
# deleting in X, then swaps X for a link to the target. A clear that
# deletes by path then deletes the target's directory.
CLEAR_RACE = r'''
import ctypes, os, sys, time
root, target, name, park = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
d = os.path.join(root, "v1", "zz")
os.makedirs(d, exist_ok=True)
x = os.path.join(d, "X")
os.mkdir(x)
for i in range(3000):
    open(os.path.join(x, "f%05d" % i), "w").close()
os.mkdir(os.path.join(x, name))
link = os.path.join(park, "L")
os.symlink(target, link)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
pfd = os.open(park, os.O_RDONLY | os.O_DIRECTORY)
xfd = os.open(x, os.O_RDONLY | os.O_DIRECTORY)
m0 = os.fstat(xfd).st_mtime_ns
print("armed", flush=True)
deadline = time.time() + 60
while time.time() < deadline:
    if os.fstat(xfd).st_mtime_ns != m0:
        rc = libc.syscall(316, dfd, b"X", pfd, b"L", 2)   # renameat2 RENAME_EXCHANGE
        print("swapped", rc, flush=True)
        break
'''


def clear_race(users, attacker, cache, target, name, park, clear_cmd):
    """The victim (this process) runs clear_cmd while the attacker races it.
    Returns whether target/name survived, the clear's CompletedProcess and
    what the attacker said."""
    p = users.popen(attacker, [SYSTEM_PYTHON, "-c", CLEAR_RACE, cache, target, name, park],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "armed", p.stderr.read()
    cleared = subprocess.run(clear_cmd, capture_output=True, text=True)
    out, err = p.communicate(timeout=90)
    return os.path.isdir(os.path.join(target, name)), cleared, out + err


# ---- measuring ---------------------------------------------------------------------------

# Runs argv[3:] in a child of this small process and writes its exit
# status, peak memory and CPU time to argv[1] as JSON; kills it after
# argv[2] seconds. (A child forked straight from a large process, such as
# pytest, reports that process's memory as its own peak.)
MEASURE = r'''
import json, os, signal, sys
out, limit, args = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execvp(args[0], args)
signal.signal(signal.SIGALRM, lambda *a: os.kill(pid, signal.SIGKILL))
signal.setitimer(signal.ITIMER_REAL, limit)
while True:
    try:
        _, status, ru = os.wait4(pid, 0)
        break
    except InterruptedError:
        continue
json.dump([os.waitstatus_to_exitcode(status), ru.ru_maxrss * 1024,
           ru.ru_utime + ru.ru_stime], open(out, "w"))
'''


def measure(args, env=None, timeout=300):
    """Runs args; returns (exit status, peak RSS in bytes, CPU seconds, wall
    seconds, stderr) of that process alone (its children not included)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "measured.json")
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", MEASURE, out, str(timeout),
                            *[str(a) for a in args]], stderr=subprocess.PIPE, env=env)
        wall = time.monotonic() - t0
        rc, rss, cpu = json.load(open(out))
    return rc, rss, cpu, wall, p.stderr.decode(errors="replace")


if __name__ == "__main__":
    sys.exit(__doc__)
