"""The command line: help, usage errors (exit 2), input errors (exit 1),
cache location, stats, clear, explain."""

import json
import os
import re
import subprocess

import pytest

from tchelp import ARCH, PER_KERNEL, ROOT, TASKCACHE, build, run, slow_ptxas, stats, tc

SIMPLE = """.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter;
.func (.param .b32 r) twice (.param .b32 x)
{
 .reg .b32 %r<3>;
 ld.param.u32 %r1, [x];
 add.u32 %r2, %r1, %r1;
 st.param.b32 [r], %r2;
 ret;
}
.visible .entry first (.param .u64 out)
{
 .reg .b32 %r<3>;
 .reg .b64 %rd<3>;
 ld.param.u64 %rd1, [out];
 { .param .b32 a; .param .b32 b; st.param.b32 [a], 21; call.uni (b), twice, (a); ld.param.b32 %r1, [b]; }
 st.global.u32 [%rd1], %r1;
 ret;
}
.visible .entry second ()
{
 .reg .b32 %r<2>;
 atom.global.add.u32 %r1, [counter], 1;
 ret;
}
"""


@pytest.fixture
def simple(tmp_path):
    p = tmp_path / "simple.ptx"
    p.write_text(SIMPLE)
    return str(p)


@pytest.mark.no_toolkit
@pytest.mark.parametrize("args,needle", [
    (["--help"], "commands:"),
    (["help"], "commands:"),
    (["help", "build"], "--arch sm_XX"),
    (["build", "--help"], "-Xptxas OPT"),
    (["explain", "--help"], "explain compiles nothing"),
    (["help", "stats"], "--zero"),
    (["stats", "--help"], "--json"),
    (["clear", "--help"], "Removes every record"),
])
def test_help(args, needle):
    p = tc(*args)
    assert needle in p.stdout


@pytest.mark.no_toolkit
@pytest.mark.parametrize("topic", ["build", "stats", "gc", "verify", "clear"])
def test_help_text_is_printed_verbatim(topic):
    # help texts are printed with fputs, not printf: "%%" would show as is
    for args in (["help", topic], [topic, "--help"]):
        out = tc(*args).stdout
        assert "%%" not in out, out
    if topic == "gc":
        assert "holds 90% of SIZE" in out


@pytest.mark.no_toolkit
def test_version():
    assert tc("version").stdout.startswith("taskcache ")


@pytest.mark.no_toolkit
@pytest.mark.parametrize("args,needle", [
    ([], "usage: taskcache"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["build", "x.ptx", "--arch", "sm_90"], "no output file"),
    (["build", "-o", "x.cubin", "--arch", "sm_90"], "no input file"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm90"], "invalid target 'sm90'"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90b"], "invalid target"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90", "-j", "0"], "-j needs a positive"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90", "--bogus"], "unknown option '--bogus'"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90", "-Xptxas", "-c"], "set by taskcache"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90", "-Xptxas", "--gpu-name=sm_80"],
     "set by taskcache"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90", "--fmad=maybe"], "true or false"),
    (["build", "x.ptx", "-o", "x.cubin", "--arch", "sm_90", "-O", "7"], "level from 0 to 3"),
    (["build", "a.ptx", "b.ptx", "-o", "x.cubin"], "more than one input"),
    (["stats", "--bogus"], "unknown argument"),
    (["help", "nothing"], "no help for 'nothing'"),
])
def test_usage_errors_exit_2(args, needle):
    p = tc(*args, check=False)
    assert p.returncode == 2
    assert needle in p.stderr


def test_missing_target_is_a_usage_error(simple, tmp_path):
    p = tc("build", simple, "-o", tmp_path / "o.cubin", check=False)
    assert p.returncode == 2
    assert "no target architecture" in p.stderr


def test_missing_input_exits_1(tmp_path):
    p = build(str(tmp_path / "nope.ptx"), tmp_path / "o.cubin", None, check=False)
    assert p.returncode == 1
    assert "cannot open" in p.stderr and "nope.ptx" in p.stderr


def test_unwritable_output_exits_1(simple, tmp_path):
    p = build(simple, tmp_path / "no" / "such" / "dir" / "o.cubin", None, check=False)
    assert p.returncode == 1
    assert "cannot write" in p.stderr


def test_output_permissions_as_a_compiler_leaves_them(simple, tmp_path):
    """As ptxas's open(O_TRUNC): a new output gets 0666 less the umask, one
    that exists keeps its permissions (a private 0600 file stays private),
    and one the user may not write is an error, not replaced."""
    def umask_002():
        os.umask(0o002)
    out = tmp_path / "new.cubin"
    build(simple, out, None, preexec_fn=umask_002)
    assert out.stat().st_mode & 0o777 == 0o664
    private = tmp_path / "private.cubin"
    private.write_bytes(b"old")
    private.chmod(0o600)
    build(simple, private, None)
    assert private.stat().st_mode & 0o777 == 0o600 and private.read_bytes()[:4] == b"\x7fELF"
    if os.geteuid() == 0:
        return  # root may write any file, as ptxas run by root does
    locked = tmp_path / "locked.cubin"
    locked.write_bytes(b"keep")
    locked.chmod(0o444)
    p = build(simple, locked, None, check=False)
    assert p.returncode == 1 and "cannot write" in p.stderr and locked.read_bytes() == b"keep"


def test_an_output_that_holds_the_image_already_gets_only_the_time(simple, tmp_path):
    """A build repeated into its own output leaves the file (same inode,
    same bytes) and moves its modification time, as a rewrite would, so
    make sees the target made; any other contents are replaced."""
    out = tmp_path / "o.cubin"
    build(simple, out, None)
    image, first = out.read_bytes(), out.stat()
    os.utime(out, (first.st_atime - 100, first.st_mtime - 100))
    build(simple, out, None)
    again = out.stat()
    assert out.read_bytes() == image and again.st_ino == first.st_ino
    assert again.st_mtime > first.st_mtime - 50
    # the same size, other bytes: replaced
    out.write_bytes(image[:-1] + bytes([image[-1] ^ 1]))
    build(simple, out, None)
    assert out.read_bytes() == image and out.stat().st_ino != first.st_ino
    # the same bytes and more after them: replaced
    out.write_bytes(image + b"\0")
    build(simple, out, None)
    assert out.read_bytes() == image
def test_stdin_input(simple, tmp_path):
    out = tmp_path / "o.cubin"
    p = run([TASKCACHE, "build", "-", "-o", out, "--arch", ARCH, "--no-cache"],
            input=open(simple).read())
    assert out.stat().st_size > 0, p.stderr


def test_cache_location_from_environment(simple, tmp_path):
    env = dict(os.environ, TASKCACHE_DIR=str(tmp_path / "envcache"))
    run([TASKCACHE, "build", simple, "-o", tmp_path / "o.cubin", "--arch", ARCH], env=env)
    assert (tmp_path / "envcache" / "v1" / ARCH).is_dir()
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    env.pop("TASKCACHE_DIR", None)
    env.pop("XDG_CACHE_HOME", None)
    run([TASKCACHE, "build", simple, "-o", tmp_path / "o.cubin", "--arch", ARCH], env=env)
    home_cache = tmp_path / "home" / ".cache" / "taskcache"
    assert (home_cache / "v1" / ARCH).is_dir()
    assert oct(home_cache.stat().st_mode & 0o777) == "0o700"  # private


def test_no_cache_writes_nothing(simple, tmp_path):
    env = dict(os.environ, HOME=str(tmp_path / "home"), TASKCACHE_DIR=str(tmp_path / "c"))
    run([TASKCACHE, "build", simple, "-o", tmp_path / "o.cubin", "--arch", ARCH, "--no-cache"],
        env=env)
    assert not (tmp_path / "c").exists() and not (tmp_path / "home").exists()


def test_verbose_report(simple, tmp_path):
    cache = str(tmp_path / "cache")
    p = build(simple, tmp_path / "o.cubin", cache, "-v")
    assert "2 kernels in" in p.stderr and "compiled" in p.stderr
    p = build(simple, tmp_path / "o.cubin", cache, "-v")
    assert "module record hit" in p.stderr


def test_stats_zero_and_clear(simple, tmp_path):
    cache = str(tmp_path / "cache")
    build(simple, tmp_path / "o.cubin", cache)
    build(simple, tmp_path / "o.cubin", cache)
    s = stats(cache)
    assert s["builds"] == 2 and s["module_hits"] == 1 and s["module_records"] == 1
    human = tc("stats", "--cache-dir", cache).stdout
    assert "cache directory" in human and "module record hits" in human and "50.0 %" in human
    tc("stats", "--cache-dir", cache, "--zero")
    s = stats(cache)
    assert s["builds"] == 0 and s["module_records"] == 1  # records stay
    assert "cleared" in tc("clear", "--cache-dir", cache).stdout
    s = stats(cache)
    assert s["module_records"] == 0 and s["unit_records"] == 0 and s["disk_bytes"] == 0
    build(simple, tmp_path / "o.cubin", cache)             # the cache works afterwards
    assert stats(cache)["module_misses"] == 1


STATS_FIGURES = [
    "builds", "module_hits", "module_misses", "whole_builds", "compile_errors", "unit_hits",
    "unit_misses", "task_hits", "task_misses", "codegen_calls", "group_hits", "group_misses",
    "compiles", "records_written", "bytes_written", "bad_records", "waited", "evictions",
    "store_errors", "stats_skipped", "driver_built", "driver_passed",
    "remote_hits", "remote_misses", "remote_errors", "remote_bad", "remote_read_bytes",
    "remote_read_us", "remote_writes", "remote_write_bytes", "remote_write_errors",
    "module_records", "unit_records", "task_records",
    "group_records", "disk_bytes", "max_size"]


def test_stats_json_quotes_the_cache_directory(simple, tmp_path):
    """The directory's name is a JSON string whatever it holds (it used to
    be printed between quotes as it was)."""
    cache = tmp_path / 'a "quoted" \\ dir\twith a tab'
    build(simple, tmp_path / "o.cubin", str(cache))
    s = json.loads(tc("stats", "--cache-dir", cache, "--json").stdout)
    assert s["cache_dir"] == str(cache)
    assert list(s) == ["cache_dir", "remote"] + STATS_FIGURES
    assert s["remote"] is None  # none configured
    assert s["builds"] == 1 and s["module_misses"] == 1 and s["module_records"] == 1


def test_stats_text_shows_host_figures_only_when_used(simple, tmp_path):
    cache = str(tmp_path / "cache")
    build(simple, tmp_path / "o.cubin", cache)
    human = tc("stats", "--cache-dir", cache).stdout
    assert "host task hits" not in human and "task records on disk" not in human
    assert "records written" in human and "KiB)" in human  # bytes beside the count
    assert "size limit" in human and "5.0 GiB" in human


def test_verify_fails_when_the_records_cannot_be_read(tmp_path):
    """verify used to report '0 records checked, 0 bad' and succeed on a
    cache it could not read at all."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("not a cache")
    p = tc("verify", "--cache-dir", not_a_dir, check=False)
    assert p.returncode == 1
    assert "error: cannot read the records of" in p.stderr and str(not_a_dir) in p.stderr
    assert "records checked" not in p.stdout
    empty = tmp_path / "empty"
    p = tc("verify", "--cache-dir", empty)  # a new cache holds no records: nothing wrong
    assert p.stdout.startswith("0 records checked, 0 bad")


def test_explain_text_and_json(simple, tmp_path):
    cache = str(tmp_path / "cache")
    text = tc("explain", simple, "--arch", ARCH, "--cache-dir", cache).stdout
    # two small kernels fit in one unit: the module is one compile
    assert "first" in text and "second" in text
    assert "mode:   whole module: its 2 kernel(s) fit in one unit" in text
    text = tc("explain", simple, "--arch", ARCH, "--cache-dir", cache, *PER_KERNEL).stdout
    assert "mode:   split" in text
    data = json.loads(tc("explain", simple, "--arch", ARCH, "--cache-dir", cache,
                         "--json", *PER_KERNEL).stdout)
    assert [e["name"] for e in data["entries"]] == ["first", "second"]
    first = data["entries"][0]
    assert first["params"] == [{"type": "u64", "offset": 0, "size": 8, "align": 8}]
    assert len(first["unit_key"]) == 64 and len(first["slice_key"]) == 64
    assert not any(e["cached"] for e in data["entries"])
    # explain writes nothing
    assert stats(cache)["unit_records"] == 0


def test_compiler_options_reach_ptxas(simple, tmp_path):
    """-maxrregcount is passed through: a limit below what ptxas accepts is
    reported by ptxas itself."""
    p = build(simple, tmp_path / "o.cubin", None, "-maxrregcount", "8", "-O", "2",
              "-lineinfo", "--fmad=false", check=False)
    assert p.returncode == 0, p.stderr


def on_a_terminal(args):
    """Runs args with standard error on a pseudo-terminal: what it wrote."""
    import pty
    import select
    master, slave = pty.openpty()
    p = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the other end is closed
                chunk = b""
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    assert p.wait() == 0, out
    return out.decode(errors="replace")


def test_a_long_build_shows_its_progress_on_a_terminal(simple, tmp_path):
    """A build that runs for more than a second says, on one line of a
    terminal redrawn in place, how many of its compiles are done; the line
    is gone when the build ends. A log (no terminal) and -q get nothing."""
    slow = slow_ptxas(tmp_path, 0.8)
    args = [TASKCACHE, "build", simple, "-o", tmp_path / "o.cubin", "--arch", ARCH, "-j", "1",
            "--compiler", "ptxas", "--ptxas", slow, *PER_KERNEL]
    shown = on_a_terminal(args + ["--cache-dir", tmp_path / "a"])
    line = r"\r\x1b\[Ktaskcache: simple\.ptx: 1 of \d compiled, \d s"
    assert re.search(line, shown), repr(shown)
    last = shown.rsplit("\r\x1b[K", 1)
    assert len(last) == 2 and "compiled" not in last[1], repr(shown)  # erased at the end
    assert "compiled" not in on_a_terminal(args + ["--cache-dir", tmp_path / "b", "-q"])
    p = run(args + ["--cache-dir", tmp_path / "c"])
    assert "compiled" not in p.stderr and "\x1b" not in p.stderr


def test_trace_file_shows_every_compile_and_appends(tmp_path):
    """--trace appends the build's events in the Trace Event Format (the
    JSON array, left open, which Perfetto reads): one per unit compiled,
    named by its kernels, the link, the build; a second build appends to
    the same file; -v names the slowest compiles."""
    import json
    ptx = str(ROOT / "examples" / "physics_step.ptx")
    trace = tmp_path / "trace.json"
    p = build(ptx, tmp_path / "o.cubin", str(tmp_path / "cache"), "-v", "--trace", trace)
    slowest = next(l for l in p.stderr.splitlines() if "slowest compiles: " in l)
    events = json.loads(trace.read_text() + "]")
    compiles = [e for e in events if e["cat"] == "compile"]
    units = int(re.search(r"in (\d+) units", p.stderr).group(1))
    assert len(compiles) == units
    assert all(e["ph"] == "X" and e["dur"] > 0 and e["pid"] and e["tid"] for e in events)
    assert {e["cat"] for e in events} == {"compile", "link", "build"}
    assert compiles[0]["name"].startswith("step_") and "build" in compiles[0]["args"]
    longest = max(compiles, key=lambda e: e["dur"])
    assert slowest.split("slowest compiles: ")[1].startswith(longest["name"] + " ")
    # a warm build compiles nothing: its build event alone, appended
    p = build(ptx, tmp_path / "o.cubin", str(tmp_path / "cache"), "-v", "--trace", trace)
    assert "slowest compiles" not in p.stderr
    again = json.loads(trace.read_text() + "]")
    assert again[:len(events)] == events and [e["cat"] for e in again[len(events):]] == ["build"]


def test_trace_file_stays_json_whatever_the_input_is_called(tmp_path):
    """A name cut to fit an event, or bytes that are not UTF-8 (a file
    name's), must not spoil a trace file that many builds share."""
    import json
    import shutil
    trace = tmp_path / "trace.json"
    src = ROOT / "examples" / "physics_step.ptx"
    for name in ("é" * 80 + ".ptx", os.fsdecode(b"k\xff.ptx")):
        shutil.copy(src, tmp_path / name)
        build(str(tmp_path / name), tmp_path / "o.cubin", None, "--trace", trace)
    events = json.loads(trace.read_bytes().decode("utf-8") + "]")
    assert {e["args"]["build"].endswith(".ptx") for e in events} == {True}
    assert any(e["name"].endswith("/k\ufffd.ptx") for e in events if e["cat"] == "build")
