"""Servers for the remote-tier tests (test_remote.py), on loopback ports:
Debian's redis-server (alone, and three of them as a Redis Cluster), nginx
with WebDAV, and two fault injectors written here: a TCP proxy that passes,
delays, stalls or drops connections, and a small HTTP server that stores
what is PUT and answers GETs with truncated bodies, garbage, 503s, or a
full disk when told to. Everything runs in its own temporary directory and
is stopped by the fixture that started it."""

import getpass
import http.server
import os
import random
import shutil
import socket
import subprocess
import threading
import time

REDIS = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK)
                                  else None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port():
    """A port p with p + 10000 free too (a cluster node's bus port), so p is
    at most 55535: below the kernel's ephemeral range."""
    rng = random.Random()
    for _ in range(1000):
        p = rng.randrange(20000, 30000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 10000))
                return p
        except OSError:
            continue
    raise RuntimeError("no free port pair for a cluster node")


def wait_until(what, ready, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        if ready():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start within {timeout} s")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Redis:
    """One redis-server in the foreground; stop() kills it, start() brings it
    back on the same port (empty: nothing is saved)."""

    def __init__(self, workdir, port=None, cluster=False, maxmemory=None):
        self.dir = workdir
        os.makedirs(self.dir, exist_ok=True)
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.args = [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
                     "--logfile", os.path.join(self.dir, "redis.log")]
        if cluster:
            self.args += ["--cluster-enabled", "yes", "--cluster-config-file",
                          os.path.join(self.dir, "nodes.conf"), "--cluster-node-timeout", "5000"]
        if maxmemory:
            self.args += ["--maxmemory", maxmemory, "--maxmemory-policy", "noeviction"]
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_until(f"redis-server on port {self.port}",
                   lambda: self.cli("PING", check=False).strip() == "PONG")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cli(self, *args, check=True, raw=False):
        p = subprocess.run([REDIS_CLI, "-p", str(self.port), *(["--raw"] if raw else []),
                            *map(str, args)], capture_output=True, timeout=30)
        if check and p.returncode != 0:
            raise AssertionError(f"redis-cli {args}: {p.stderr!r}")
        return p.stdout if raw else p.stdout.decode(errors="replace")

    def keys(self):
        return [k for k in self.cli("--scan", "--pattern", "taskcache:*").split() if k]

    def get(self, key):
        # redis-cli --raw adds a newline after the value
        return self.cli("GET", key, raw=True)[:-1]

    def set(self, key, value):
        # the value through stdin (-x): any bytes
        p = subprocess.run([REDIS_CLI, "-p", str(self.port), "-x", "SET", key], input=value,
                           capture_output=True, timeout=30)
        assert p.returncode == 0 and b"OK" in p.stdout, p.stdout + p.stderr


class RedisCluster:
    """Three masters on loopback ports, made a cluster by redis-cli."""

    def __init__(self, workdir):
        self.nodes = [Redis(os.path.join(workdir, f"node{i}"), cluster=True) for i in range(3)]
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        p = subprocess.run([REDIS_CLI, "--cluster", "create", *addrs, "--cluster-replicas", "0",
                            "--cluster-yes"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("redis-cli --cluster create failed:\n" + p.stdout + p.stderr)
        wait_until("the Redis Cluster",
                   lambda: all("cluster_state:ok" in n.cli("CLUSTER", "INFO", check=False)
                               for n in self.nodes))

    def stop(self):
        for n in self.nodes:
            n.stop()

    def node_id(self, node):
        return node.cli("CLUSTER", "MYID").strip()

    def owner(self, slot):
        for n in self.nodes:
            for line in n.cli("CLUSTER", "NODES").splitlines():
                f = line.split()
                if "myself" in f[2]:
                    for r in f[8:]:
                        lo, _, hi = r.partition("-")
                        if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                            return n
        raise AssertionError(f"no node serves slot {slot}")

    def flush(self):
        for n in self.nodes:
            n.cli("FLUSHALL")


class Nginx:
    """nginx serving a WebDAV directory (PUT, DELETE, directories made on
    PUT), in the foreground, with every path it writes under workdir."""

    def __init__(self, workdir):
        self.dir = workdir
        self.root = os.path.join(workdir, "data")
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(os.path.join(workdir, "tmp"), exist_ok=True)
        self.port = free_port()
        t = os.path.join(workdir, "tmp")
        conf = f"""
worker_processes 1;
daemon off;
user {getpass.getuser()};
pid {workdir}/nginx.pid;
error_log {workdir}/error.log;
events {{ worker_connections 512; }}
http {{
  access_log off;
  client_body_temp_path {t}/body;
  proxy_temp_path {t}/proxy;
  fastcgi_temp_path {t}/fastcgi;
  uwsgi_temp_path {t}/uwsgi;
  scgi_temp_path {t}/scgi;
  server {{
    listen 127.0.0.1:{self.port};
    root {self.root};
    client_max_body_size 1g;
    location / {{
      dav_methods PUT DELETE;
      create_full_put_path on;
      dav_access user:rw;
    }}
  }}
}}
"""
        path = os.path.join(workdir, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([NGINX, "-c", path, "-p", workdir, "-e",
                                      os.path.join(workdir, "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(f"nginx on port {self.port}", lambda: port_open(self.port))

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/{path}"

    def files(self, path):
        base = os.path.join(self.root, path)
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class FaultProxy:
    """A TCP proxy to 127.0.0.1:target. mode: "pass"; "delay" (each chunk
    waits `delay` seconds); "stall" (accepts, reads, never answers); "drop"
    (closes every connection at once); "answer" (answers every chunk it
    reads with the bytes `answer`, as a server that is not what it seems);
    "trickle" (answers with `answer`, then a byte every `delay` seconds for
    ever: a reply that never ends, though something always arrives);
    "flood" (answers with `answer`, then zeros as fast as the client reads,
    up to 2 GiB: a reply that announces more than it should and sends it).
    `connections` counts accepts; `events` says why the proxy itself ever
    closed a client's connection (so a test that sees a reset can tell the
    proxy's doing from the program's)."""

    def __init__(self, target):
        self.target = target
        self.mode = "pass"
        self.delay = 0.0
        self.answer = b""
        self.connections = 0
        self.events = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.open = []
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.running:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(c)
            if self.mode == "drop":
                self.events.append("dropped a connection (mode drop)")
                c.close()
            elif self.mode in ("stall", "answer", "trickle", "flood"):
                threading.Thread(target=self._swallow, args=(c,), daemon=True).start()
            else:
                try:
                    up = socket.create_connection(("127.0.0.1", self.target))
                except OSError as e:
                    self.events.append(f"could not reach port {self.target}: {e}")
                    c.close()
                    continue
                self.open.append(up)
                for a, b in ((c, up), (up, c)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _swallow(self, c):
        try:
            # (reading until the client closes, then closing too: a socket
            # left half-closed could meet a later connection's port again)
            while c.recv(65536):
                if self.mode == "answer":
                    c.sendall(self.answer)
                if self.mode == "trickle":
                    c.sendall(self.answer)
                    while self.running:
                        time.sleep(self.delay)
                        c.sendall(b"a")
                if self.mode == "flood":
                    c.sendall(self.answer)
                    zeros = bytes(1 << 20)
                    for _ in range(2048):
                        if not self.running:
                            break
                        c.sendall(zeros)
        except OSError:
            pass
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _pump(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                if self.mode == "delay":
                    time.sleep(self.delay)
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.running = False
        self.sock.close()
        for s in self.open:
            try:
                s.close()
            except OSError:
                pass


class FaultHTTP:
    """An HTTP server that stores what is PUT (in memory) and serves it back,
    or, by mode: "truncate" (a GET's body cut in half, the connection
    closed), "garbage" (200 with random bytes of the same length), "503"
    (every request), "403" (every request), "full" (507 Insufficient
    Storage for every PUT), "stall-put" (every PUT read, then never answered),
    "trickle" (every GET: 200, a 50 MiB Content-Length, then 512 bytes every
    quarter second for ever, above curl's stall limit of 1 KiB/s)."""

    def __init__(self):
        self.mode = "pass"
        self.running = True
        self.store = {}
        self.requests = 0
        self.puts = {}      # path -> PUT requests for it
        self.headers = []   # every request's headers, for tests of authentication
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # An answer's headers and body go out in two writes; with Nagle's
            # algorithm the body waits for the client's delayed ACK of the
            # headers (40 ms a request), which servers made for this (nginx:
            # tcp_nodelay) do not make a client wait: a second machine's
            # lookups took 0.13 s a module here, 2 ms without it
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _answer(self, code, body=b"", length=None):
                self.send_response(code)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self):
                outer.requests += 1
                outer.headers.append(dict(self.headers))
                body = outer.store.get(self.path)
                if outer.mode in ("503", "403"):
                    return self._answer(int(outer.mode), b"no")
                if outer.mode == "trickle":
                    self.send_response(200)
                    self.send_header("Content-Length", str(50 << 20))
                    self.end_headers()
                    self.close_connection = True
                    try:
                        while outer.running:
                            self.wfile.write(b"x" * 512)
                            self.wfile.flush()
                            time.sleep(0.25)
                    except OSError:
                        pass
                    return
                if body is None:
                    return self._answer(404, b"none")
                if outer.mode == "truncate":
                    self._answer(200, body[:len(body) // 2], length=len(body))
                    self.close_connection = True
                    return
                if outer.mode == "garbage":
                    return self._answer(200, os.urandom(len(body)))
                return self._answer(200, body)

            do_HEAD = do_GET

            def do_PUT(self):
                outer.requests += 1
                outer.headers.append(dict(self.headers))
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.puts[self.path] = outer.puts.get(self.path, 0) + 1
                if outer.mode in ("503", "403"):
                    return self._answer(int(outer.mode), b"no")
                if outer.mode == "full":
                    return self._answer(507, b"no space left")
                if outer.mode == "stall-put":
                    while outer.running:
                        time.sleep(0.1)
                    return
                outer.store[self.path] = data
                return self._answer(201)

            def do_DELETE(self):
                outer.store.pop(self.path, None)
                return self._answer(204)

        class Server(http.server.ThreadingHTTPServer):
            # socketserver listens with a backlog of 5: a build's 8 lookups
            # at once then wait for a SYN retry (1 s) past the connect
            # timeout (500 ms), which no real server makes them do
            request_queue_size = 128

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A client that gives up (a build that exits, a timeout) can take
        # back a connection between the poll that saw it and the accept:
        # a blocking accept then waits for the next client, and stop()
        # for it, for ever (seen once, 2026-12-04, in a full e2e run). Not
        # blocking, the server finds nothing to accept and polls again.
        self.server.socket.setblocking(False)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}/{path}"

    def stop(self):
        self.running = False
        self.server.shutdown()
        self.server.server_close()
