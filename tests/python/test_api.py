"""The Python package over the C library: builds, errors as exceptions,
keyed tasks with host metadata, group manifests, threads."""

import os
import pathlib
import sys
import threading

import pytest

import taskcache as tc

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from failing_modules import TOO_FEW_REGISTERS  # noqa: E402  (written once, for every test)
EXAMPLE = (ROOT / "examples" / "physics_step.ptx").read_text()
OPTS = tc.Options(arch="sm_90")


def task_ptx(name, constant):
    return f""".version 8.0
.target sm_90
.address_size 64
.visible .entry {name}(.param .u64 out)
{{
 .reg .b32 %r<3>;
 .reg .b64 %rd<3>;
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, {constant};
 st.global.u32 [%rd1], %r1;
 ret;
}}
"""


class Host:
    """A toy JIT: task i's IR is its constant; codegen counts its calls."""

    def __init__(self, constants):
        self.constants = list(constants)
        self.calls = 0
        self.lock = threading.Lock()

    def tasks(self):
        return [tc.Task(f"k{i}", f"const {c}".encode()) for i, c in enumerate(self.constants)]

    def codegen(self, index, task):
        with self.lock:
            self.calls += 1
        return task_ptx(task.name, self.constants[index]), f"block=128 task={index}".encode()


@pytest.fixture
def cache(tmp_path):
    with tc.Cache(tmp_path / "cache") as c:
        yield c


def test_build_and_warm(cache):
    r = cache.build(EXAMPLE, OPTS, name="physics_step.ptx")
    assert r.image and r.image[:4] == b"\x7fELF"
    assert len(r.entries) == 120 and r.report.units_compiled == r.report.units
    e = r.entries[0]
    assert e.params[0] == tc.Param("u32", 0, 4, 4) and e.registers > 0
    again = cache.build(EXAMPLE, OPTS)
    assert again.report.module_hit and again.image == r.image
    assert cache.stats()["module_hits"] == 1


def test_clear_beside_a_tree_an_interrupted_clear_left(tmp_path):
    # a clear renames v1 away under a name of its own; that name was the
    # pid alone, so a tree a killed clear of the same pid left (pid 1 of
    # every container run) made every later clear fail (a review)
    root = tmp_path / "cache"
    with tc.Cache(root) as c:
        c.build(EXAMPLE, OPTS)
        left = root / f"v1.clear.{os.getpid()}" / "sm_90" / "u" / "00"
        left.mkdir(parents=True)
        (left / "x").write_bytes(b"left behind")
        c.clear()
        assert not (root / "v1").exists() and c.stats()["module_records"] == 0
        assert c.build(EXAMPLE, OPTS).report.units_compiled > 0


def test_progress_reports_every_compile(cache):
    """progress(done, total) hears of every compile, in order, and nothing
    when every unit is cached; an exception in it does not fail the build."""
    seen = []
    opts = tc.Options(arch="sm_90", unit_cost=2000, module_cache=False,
                      progress=lambda done, total: seen.append((done, total)))
    r = cache.build(EXAMPLE, opts)
    n = r.report.units_compiled
    assert n >= 2 and seen == [(k, n) for k in range(n + 1)]
    seen.clear()
    cache.build(EXAMPLE, opts)  # every unit cached
    assert seen == []
    host = Host([1, 2, 3])
    cache.build_tasks(host.tasks(), host.codegen, opts, version="progress")
    assert seen == [(k, 3) for k in range(4)]

    def broken(done, total):
        raise RuntimeError("a progress display that fails")
    r = cache.build(EXAMPLE, tc.Options(arch="sm_90", split=False, progress=broken))
    assert r.image[:4] == b"\x7fELF"


def test_errors_raise_with_file_and_line(cache):
    with pytest.raises(tc.TaskcacheError) as exc:
        cache.build(".version 8.0\n.target sm_90\n.entry k() {\n", OPTS, name="bad.ptx")
    assert exc.value.status == "TC_ERR_PARSE"
    assert "bad.ptx:3: error:" in exc.value.message
    with pytest.raises(tc.TaskcacheError) as exc:
        cache.build(EXAMPLE, tc.Options(arch="sm90"))
    assert exc.value.status == "TC_ERR_INVALID" and "sm90" in exc.value.message
    with pytest.raises(tc.TaskcacheError):
        tc.Options(compiler_options=["-c"])._handle()


def test_a_compile_that_fails_is_an_exception_not_the_end_of_the_host(cache):
    """With threads of its own, nvPTXCompiler 13.0 aborts the process when a
    compile fails; a host that embeds the library gets none (it could not
    start over, as the command line does), so here the failure is an
    exception, in-process or not (tests/e2e/failing_modules.py)."""
    for compiler in ("auto", "ptxas") + (("inprocess",) if tc.have_inprocess_compiler() else ()):
        for split in (False, True):
            opts = tc.Options(arch="sm_90", compiler=compiler, split=split,
                              unit_cost=1 if split else None)
            with pytest.raises(tc.TaskcacheError) as exc:
                cache.build(TOO_FEW_REGISTERS, opts, name="few.ptx")
            assert exc.value.status == "TC_ERR_COMPILE", (compiler, split)
            assert "few.ptx: error: (C7602) Insufficient registers" in exc.value.message


def test_explain(cache):
    info = cache.explain(EXAMPLE, OPTS)
    assert info.image is None and len(info.entries) == 120
    assert all(len(e.slice_key) == 64 and not e.cached for e in info.entries)


def test_tasks_cold_warm_edit(cache):
    host = Host(range(8))
    r = cache.build_tasks(host.tasks(), host.codegen, OPTS, version="toy 1")
    assert host.calls == 8 and r.report.codegen_calls == 8
    assert [t.metadata for t in r.tasks] == [f"block=128 task={i}".encode() for i in range(8)]
    assert [e.name for e in r.entries] == [f"k{i}" for i in range(8)]
    cold_image = r.image
    # warm: no codegen at all, same image, metadata from the records
    host2 = Host(range(8))
    r2 = cache.build_tasks(host2.tasks(), host2.codegen, OPTS, version="toy 1")
    assert host2.calls == 0 and r2.report.module_hit and r2.image == cold_image
    assert all(t.cached and not t.codegen_ran for t in r2.tasks)
    assert r2.tasks[3].metadata == b"block=128 task=3"
    # edit one task: codegen runs once
    host3 = Host([0, 1, 2, 99, 4, 5, 6, 7])
    r3 = cache.build_tasks(host3.tasks(), host3.codegen, OPTS, version="toy 1")
    assert host3.calls == 1
    assert [t.codegen_ran for t in r3.tasks] == [i == 3 for i in range(8)]
    # a different host version shares nothing
    host4 = Host(range(8))
    cache.build_tasks(host4.tasks(), host4.codegen, OPTS, version="toy 2")
    assert host4.calls == 8


def test_group_manifest(cache):
    assert cache.lookup_group(b"source v1", OPTS, version="toy 1") is None
    host = Host(range(5))
    r = cache.build_tasks(host.tasks(), host.codegen, OPTS, version="toy 1", group_key=b"source v1")
    hit = cache.lookup_group(b"source v1", OPTS, version="toy 1")
    assert hit is not None and hit.report.group_hit and hit.image == r.image
    assert [t.metadata for t in hit.tasks] == [t.metadata for t in r.tasks]
    assert cache.lookup_group(b"source v1", OPTS, version="toy 2") is None
    s = cache.stats()
    assert s["group_hits"] == 1 and s["group_misses"] == 2 and s["group_records"] == 1


def test_missing_task_record_is_rebuilt_not_an_error(cache, tmp_path):
    host = Host(range(4))
    first = cache.build_tasks(host.tasks(), host.codegen, OPTS, version="toy 1", group_key=b"g")
    victim = first.tasks[2].key
    for p in (tmp_path / "cache").glob(f"v1/sm_90/t/{victim[:2]}/{victim[2:]}"):
        p.unlink()
    # the manifest now names a missing record: a miss, not a partial module
    assert cache.lookup_group(b"g", OPTS, version="toy 1") is None
    host2 = Host(range(4))
    again = cache.build_tasks(host2.tasks(), host2.codegen, OPTS, version="toy 1", group_key=b"g")
    assert host2.calls == 1 and again.tasks[2].codegen_ran
    assert again.image == first.image
    assert cache.lookup_group(b"g", OPTS, version="toy 1") is not None


def test_a_symbol_two_tasks_define_fails_the_link(cache):
    # libnvJitLink 13 printed "Multiple definition", returned success and
    # kept one: task B's kernel called task A's helper (a review)
    def ptx(kernel, value):
        return (".version 8.0\n.target sm_90\n.address_size 64\n"
                f".visible .func (.param .b32 rv) helper()\n{{\n .reg .b32 %r<2>;\n"
                f" mov.u32 %r1, {value};\n st.param.b32 [rv], %r1;\n ret;\n}}\n"
                f".visible .entry {kernel}(.param .u64 out)\n{{\n .reg .b32 %r<3>;\n"
                " .reg .b64 %rd<3>;\n ld.param.u64 %rd1, [out];\n"
                " { .param .b32 r; call.uni (r), helper, (); ld.param.b32 %r1, [r]; }\n"
                " st.global.u32 [%rd1], %r1;\n ret;\n}\n")
    texts = {"A": ptx("A", 7), "B": ptx("B", 9), "C": ptx("A", 9).replace("helper", "other")}
    for names in (["A", "B"], ["A", "C"]):  # a helper twice; a kernel twice
        for relocatable in (None, False):
            with pytest.raises(tc.TaskcacheError) as exc:
                cache.build_tasks([tc.Task(n, n.encode()) for n in names],
                                  lambda i, t: texts[t.name],
                                  tc.Options(arch="sm_90", whole_program_units=relocatable),
                                  version="dup")
            assert exc.value.status == "TC_ERR_LINK"
            assert "multiple definition of '" in exc.value.message


def test_a_module_record_never_outlives_a_regenerated_task(cache):
    # B's key leaves out which symbol of A it reads; when it stops linking it
    # is regenerated and stored again under its key. The module record of
    # the first build then served its image with the regenerated task's
    # metadata (a review): now it is a miss, and the build is a cold one's.
    def text(name, sym):
        if name == "A":
            return (f".version 8.0\n.target sm_90\n.address_size 64\n"
                    f".visible .global .u32 {sym} = 5;\n.visible .entry A(.param .u64 out)\n"
                    "{\n ret;\n}\n")
        return (f".version 8.0\n.target sm_90\n.address_size 64\n.extern .global .u32 {sym};\n"
                ".visible .entry B(.param .u64 out)\n{\n .reg .b32 %r<3>;\n .reg .b64 %rd<3>;\n"
                f" ld.param.u64 %rd1, [out];\n ld.global.u32 %r1, [{sym}];\n"
                " st.global.u32 [%rd1], %r1;\n ret;\n}\n")

    def build(c, akey, sym):
        return c.build_tasks([tc.Task("A", akey), tc.Task("B", b"b1")],
                             lambda i, t: (text(t.name, sym), f"{t.name} uses {sym}".encode()),
                             OPTS, version="regen")
    first = build(cache, b"a1", "g")
    second = build(cache, b"a2", "h")
    assert "regenerated" in second.diagnostics
    third = build(cache, b"a1", "g")
    assert not third.report.module_hit
    assert third.image == first.image
    assert [t.metadata for t in third.tasks] == [b"A uses g", b"B uses g"]
    # the report names the linker of task builds too (it always said nvlink)
    assert first.report.nvjitlink == cache.build(EXAMPLE, OPTS).report.nvjitlink


def test_codegen_errors_and_serialization(cache):
    def failing(index, task):
        raise RuntimeError(f"cannot lower task {index}")
    with pytest.raises(tc.TaskcacheError) as exc:
        cache.build_tasks([tc.Task("k0", b"x")], failing, OPTS, version="toy 1")
    assert "cannot lower task 0" in str(exc.value)
    assert cache.stats()["task_records"] == 0
    # serialized codegen never overlaps
    active, peak, lock = [0], [0], threading.Lock()

    def slow(index, task):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        import time
        time.sleep(0.01)
        with lock:
            active[0] -= 1
        return task_ptx(task.name, index)
    tasks = [tc.Task(f"s{i}", f"s{i}".encode()) for i in range(6)]
    cache.build_tasks(tasks, slow, tc.Options(arch="sm_90", jobs=4), version="toy 1",
                      serialize=True)
    assert peak[0] == 1


def test_bad_task_ptx_names_the_task(cache):
    def broken(index, task):
        return ".version 8.0\n.target sm_90\n.entry oops( {\n"
    with pytest.raises(tc.TaskcacheError) as exc:
        cache.build_tasks([tc.Task("broken_task", b"b")], broken, OPTS, version="toy 1")
    assert "broken_task:3: error:" in str(exc.value)


def test_one_cache_many_threads(cache):
    errors, results = [], {}

    def work(i):
        try:
            host = Host([i * 10 + k for k in range(3)])
            r = cache.build_tasks(host.tasks(), host.codegen, OPTS, version=f"thread {i}")
            results[i] = len(r.entries)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == {i: 3 for i in range(4)}


def test_loading_without_a_gpu_is_a_clear_error(cache):
    r = cache.build(EXAMPLE, OPTS)
    try:
        with r.load() as m:
            k = m.kernel(r.entries[0].name)
            assert k.max_threads_per_block > 0
    except tc.TaskcacheError as e:
        assert e.status == "TC_ERR_DRIVER" and e.message


def test_tasks_compile_as_whole_programs_where_that_links_safely(cache, tmp_path):
    """A task that holds only kernels and internal data is compiled as a
    whole program (ptxas --extensible-whole-program: the code a
    whole-module build gives its kernels); one with .const data, a visible
    helper or a declaration of another task's symbol stays relocatable
    (--compile-only), as its code must be for the link."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from cuda_tools import find_tool
    ptxas = find_tool("ptxas")
    if not ptxas:
        pytest.skip("no ptxas")
    log = tmp_path / "calls"
    wrapper = tmp_path / "ptxas"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{ptxas}" "$@"\n')
    wrapper.chmod(0o755)
    const = task_ptx("C", 3).replace(".visible .entry C", ".const .u32 k = 5;\n.visible .entry C") \
        .replace("mov.u32 %r1, 3;", "ld.const.u32 %r1, [k];")
    # a system call declared (printf, as Warp's deterministic mode writes)
    # is no other object's symbol; a function declared .extern is
    printf = task_ptx("D", 4).replace(
        ".visible .entry D", ".extern .func  (.param .b32 func_retval0) vprintf\n"
        "(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n"
        ".visible .entry D")
    other = task_ptx("E", 5).replace(".visible .entry E",
                                     ".extern .func (.param .b32 r) helper ();\n.visible .entry E")
    # a function whose address a task takes (to store it: another task may
    # call through it) keeps it relocatable; one it calls stays whole
    helper = (".func (.param .b32 r) helper ()\n{\n .reg .b32 %r<2>;\n mov.u32 %r1, 6;\n"
              " st.param.b32 [r], %r1;\n ret;\n}\n")
    address = task_ptx("F", 6).replace(".visible .entry F", helper + ".visible .entry F") \
        .replace("st.global.u32 [%rd1], %r1;", "mov.u64 %rd2, helper;\n st.global.u64 [%rd1], %rd2;")
    called = task_ptx("G", 7).replace(".visible .entry G", helper + ".visible .entry G") \
        .replace("mov.u32 %r1, 7;", "{ .param .b32 r;\n call.uni (r),\n helper,\n ();\n"
                                    " ld.param.b32 %r1, [r]; }")
    # dynamic shared memory (an array of no size) is nobody's
    dynamic = task_ptx("H", 9).replace(".visible .entry H", ".extern .shared .align 16 .b8 dyn[];"
                                       "\n.visible .entry H")
    texts = {"A": task_ptx("A", 1), "B": task_ptx("B", 2), "C": const, "D": printf, "E": other,
             "F": address, "G": called, "H": dynamic}
    r = cache.build_tasks([tc.Task(n, n.encode()) for n in texts], lambda i, t: texts[t.name],
                          tc.Options(arch="sm_90", compiler="ptxas", ptxas=str(wrapper)),
                          version="modes")
    assert {e.name for e in r.entries} == set(texts)
    calls = [l for l in log.read_text().splitlines() if "--version" not in l]
    if not r.report.nvjitlink:
        assert all("--compile-only" in l for l in calls)
        return
    # task i is compiled from taskI.ptx: the kernels alone (A, B), the one
    # beside printf's declaration (D) and the one calling a helper (G) as
    # whole programs, and H with dynamic shared memory; C, E and F relocatable
    whole = sorted(l.rsplit("/", 1)[-1] for l in calls if "--extensible-whole-program" in l)
    assert whole == ["task0.ptx", "task1.ptx", "task3.ptx", "task6.ptx", "task7.ptx"], calls
    assert sum("--compile-only" in l for l in calls) == 3, calls


def test_a_task_build_traces_each_codegen_and_compile(cache, tmp_path):
    """Options(trace=...): a codegen and a compile event per generated task,
    named by the task; Result.slowest names the slowest tasks, their codegen
    counted (a host whose front end is slow sees that task first)."""
    import json
    import re
    import time
    trace = tmp_path / "trace.json"
    names = ["t0", "t1", "t2"]

    def codegen(i, t):
        if t.name == "t1":
            time.sleep(1.0)
        return task_ptx(t.name, i)
    r = cache.build_tasks([tc.Task(n, n.encode()) for n in names], codegen,
                          tc.Options(arch="sm_90", trace=trace), version="trace")
    events = json.loads(trace.read_text() + "]")
    for cat in ("codegen", "compile"):
        assert sorted(e["name"] for e in events if e["cat"] == cat) == names
    words = [re.fullmatch(r"(\S+) ([\d.]+) s \(codegen ([\d.]+)\)", w)
             for w in r.slowest.split("; ")]
    assert all(words) and len(words) == 3, r.slowest
    assert words[0][1] == "t1" and float(words[0][3]) >= 1.0, r.slowest
    assert all(float(w[2]) >= float(w[3]) for w in words), r.slowest
