"""taskcache for Python: incremental, cached compilation of PTX modules.

A thin ctypes layer over the C library (libtaskcache.so); no third-party
dependencies. The library is $TASKCACHE_LIB when set, else the one next to
this package (the wheel carries it), else a checkout's build/, else the
loader's search path.

    import taskcache

    with taskcache.Cache() as cache:                      # ~/.cache/taskcache
        opts = taskcache.Options(arch="sm_90", compiler_options=["-O3"])
        result = cache.build(ptx_text, opts, name="step.ptx")
        cubin = result.image                              # bytes
        for e in result.entries:
            print(e.name, e.registers, e.params)

A JIT compiler asks before its own codegen (see Cache.build_tasks):

    def codegen(index, task):
        return my_codegen(task.key), b"block=256"         # PTX, metadata

    result = cache.build_tasks([taskcache.Task("k0", ir0), ...], codegen, opts,
                               version="myjit 1.2", group_key=source_hash)

Errors raise TaskcacheError, which carries the library's status name and
message (and, for builds, the diagnostics with file:line).
"""

import contextlib
import ctypes
import ctypes.util
import hashlib
import os
import pathlib
import sys
import sysconfig
import threading
import traceback
import types
import weakref
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Cache", "Options", "Result", "Entry", "Param", "Report", "Task", "TaskInfo", "Module",
    "Kernel", "TaskcacheError", "library_version", "have_inprocess_compiler", "function_key",
]

# ---- the C library --------------------------------------------------------------------

_STATUS = {0: "TC_OK", 1: "TC_ERR_INVALID", 2: "TC_ERR_PARSE", 3: "TC_ERR_COMPILE",
           4: "TC_ERR_LINK", 5: "TC_ERR_TOOLCHAIN", 6: "TC_ERR_IO", 7: "TC_ERR_NOMEM",
           8: "TC_ERR_DRIVER", 9: "TC_ERR_NOT_FOUND", 10: "TC_ERR_CANCELLED"}
TC_ERR_NOT_FOUND = 9
TC_ERR_CANCELLED = 10


def _find_library():
    """$TASKCACHE_LIB when set (and then only it: a library asked for by
    name that cannot be loaded is an error, not a reason to use another),
    else the one installed with this package (the wheel's), else a
    checkout's build/, else the loader's search path."""
    env = os.environ.get("TASKCACHE_LIB")
    if env:
        try:
            return ctypes.CDLL(env)
        except OSError as e:
            raise OSError(f"cannot load TASKCACHE_LIB={env}: {e}") from None
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here / "libtaskcache.so", here.parents[1] / "build" / "libtaskcache.so"]
    found = ctypes.util.find_library("taskcache")
    if found:
        candidates.append(found)
    errors = []
    for c in candidates:
        try:
            return ctypes.CDLL(str(c))
        except OSError as e:
            errors.append(f"{c}: {e}")
    raise OSError("cannot load libtaskcache.so; set TASKCACHE_LIB to its path. Tried:\n  " +
                  "\n  ".join(errors))


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class _StatsField(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("label", ctypes.c_char_p),
                ("offset", ctypes.c_size_t), ("flags", ctypes.c_uint)]


class _AbiField(ctypes.Structure):
    _fields_ = [("type", ctypes.c_char_p), ("member", ctypes.c_char_p),
                ("offset", ctypes.c_size_t), ("size", ctypes.c_size_t)]


def _stats_struct(lib):
    """tc_stats as the library describes it (tc_stats_fields): every
    figure a uint64_t, so a figure the library adds needs no change here.
    Also the order stats() lists them in."""
    n = ctypes.c_size_t()
    rows = lib.tc_stats_fields(ctypes.byref(n))
    names = [(rows[i].offset, rows[i].name.decode()) for i in range(n.value)]
    laid_out = [name for _, name in sorted(names)]
    return type("_Stats", (ctypes.Structure,),
                {"_fields_": [(name, ctypes.c_uint64) for name in laid_out]}), \
        [name for _, name in names]


class _Report(ctypes.Structure):
    _fields_ = [("module_hit", ctypes.c_int), ("split", ctypes.c_int),
                ("entries", ctypes.c_uint32), ("units", ctypes.c_uint32),
                ("unit_hits", ctypes.c_uint32), ("units_compiled", ctypes.c_uint32),
                ("seconds", ctypes.c_double), ("seconds_compile", ctypes.c_double),
                ("seconds_link", ctypes.c_double), ("in_process", ctypes.c_int),
                ("codegen_calls", ctypes.c_uint32), ("group_hit", ctypes.c_int),
                ("nvjitlink", ctypes.c_int), ("whole_program_units", ctypes.c_int)]


class _Param(ctypes.Structure):
    _fields_ = [("type", ctypes.c_char_p), ("offset", ctypes.c_uint32),
                ("size", ctypes.c_uint32), ("align", ctypes.c_uint32)]


class _Entry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("param_count", ctypes.c_uint32),
                ("param_bytes", ctypes.c_uint32), ("params", ctypes.POINTER(_Param)),
                ("maxntid", ctypes.c_uint32 * 3), ("reqntid", ctypes.c_uint32 * 3),
                ("minnctapersm", ctypes.c_uint32), ("maxnreg", ctypes.c_uint32),
                ("reqnctapercluster", ctypes.c_uint32 * 3), ("maxclusterrank", ctypes.c_uint32),
                ("registers", ctypes.c_int32), ("shared_bytes", ctypes.c_int32),
                ("stack_bytes", ctypes.c_int32), ("spill_store_bytes", ctypes.c_int32),
                ("spill_load_bytes", ctypes.c_int32), ("unit_key", ctypes.c_char_p),
                ("slice_key", ctypes.c_char_p), ("unit", ctypes.c_uint32),
                ("cached", ctypes.c_int), ("verbose_head", ctypes.c_char_p),
                ("verbose", ctypes.c_char_p), ("verbose_rank", ctypes.c_uint32)]


class _Task(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("key", ctypes.c_void_p), ("key_size", ctypes.c_size_t)]


class _TaskInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("key", ctypes.c_char_p), ("cached", ctypes.c_int),
                ("codegen_ran", ctypes.c_int), ("metadata", ctypes.c_void_p),
                ("metadata_size", ctypes.c_size_t), ("first_entry", ctypes.c_uint32),
                ("entry_count", ctypes.c_uint32)]


_CODEGEN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Task),
                            ctypes.c_void_p)
# tc_progress_fn: (user, done, total)
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
# the progress callbacks of live option handles, which the library calls
_PROGRESS_OF = {}


class _Host(ctypes.Structure):
    _fields_ = [("version", ctypes.c_char_p), ("codegen", _CODEGEN), ("user", ctypes.c_void_p),
                ("serialize_codegen", ctypes.c_int), ("group_key", ctypes.c_void_p),
                ("group_key_size", ctypes.c_size_t)]


class _Kernel(ctypes.Structure):
    _fields_ = [("function", ctypes.c_void_p), ("entry", ctypes.POINTER(_Entry)),
                ("max_threads_per_block", ctypes.c_int), ("registers", ctypes.c_int),
                ("shared_bytes", ctypes.c_int), ("local_bytes", ctypes.c_int),
                ("const_bytes", ctypes.c_int)]


class _Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("cooperative", ctypes.c_int)]


_lib = None
_lib_lock = threading.Lock()
_Stats = None          # made from the library's table when it is loaded
_STATS_ORDER = []


def _check_abi(lib, mirrors):
    """Compares the structs this package mirrors (C struct name -> ctypes
    class) with the library's own layout (tc_abi_fields): a library and a
    package that disagree fail here, naming what differs, instead of
    reading and writing garbage."""
    where = getattr(lib, "_name", "libtaskcache")
    try:
        fn = lib.tc_abi_fields
    except AttributeError:
        raise OSError(f"{where} is older than this taskcache package (no tc_abi_fields): "
                      "install matching versions") from None
    fn.restype = ctypes.POINTER(_AbiField)
    fn.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    n = ctypes.c_size_t()
    rows = fn(ctypes.byref(n))
    members, sizes = {}, {}
    for i in range(n.value):
        r = rows[i]
        struct = r.type.decode()
        if r.member is None:
            sizes[struct] = r.size
        else:
            members.setdefault(struct, {})[r.member.decode()] = (r.offset, r.size)
    problems = []
    for struct, cls in mirrors.items():
        theirs = members.get(struct)
        if theirs is None:
            problems.append(f"{struct} is unknown to the library")
            continue
        ours = {f[0]: (getattr(cls, f[0]).offset, getattr(cls, f[0]).size)
                for f in cls._fields_}
        for m in sorted(set(ours) | set(theirs)):
            if m not in theirs:
                problems.append(f"{struct}.{m} is not in the library")
            elif m not in ours:
                problems.append(f"{struct}.{m} is missing here")
            elif ours[m] != theirs[m]:
                problems.append(f"{struct}.{m} is at offset {theirs[m][0]} size {theirs[m][1]} "
                                f"in the library, {ours[m][0]} size {ours[m][1]} here")
        if ctypes.sizeof(cls) != sizes.get(struct):
            problems.append(f"{struct} has {sizes.get(struct)} bytes in the library, "
                            f"{ctypes.sizeof(cls)} here")
    if problems:
        raise OSError(f"{where} does not match this taskcache package: " + "; ".join(problems) +
                      ". Install the package and the library of the same version.")


def _L():
    """The library, loaded and declared on first use."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = _find_library()
        global _Stats, _STATS_ORDER
        lib.tc_stats_fields.restype = ctypes.POINTER(_StatsField)
        lib.tc_stats_fields.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
        _Stats, _STATS_ORDER = _stats_struct(lib)
        _check_abi(lib, {"tc_error": _Error, "tc_stats": _Stats, "tc_stats_field": _StatsField,
                         "tc_report": _Report, "tc_param_info": _Param, "tc_entry_info": _Entry,
                         "tc_task": _Task, "tc_task_info": _TaskInfo, "tc_host": _Host,
                         "tc_kernel": _Kernel, "tc_launch": _Launch, "tc_abi_field": _AbiField})
        P, E = ctypes.c_void_p, ctypes.POINTER(_Error)
        sig = {
            "tc_version": (ctypes.c_char_p, []),
            "tc_status_name": (ctypes.c_char_p, [ctypes.c_int]),
            "tc_cache_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(P), E]),
            "tc_cache_close": (None, [P]),
            "tc_cache_dir": (ctypes.c_char_p, [P]),
            "tc_cache_warning": (ctypes.c_char_p, [P]),
            "tc_cache_stats": (ctypes.c_int, [P, P, E]),
            "tc_cache_zero_stats": (ctypes.c_int, [P, E]),
            "tc_cache_clear": (ctypes.c_int, [P, E]),
            "tc_options_new": (P, []),
            "tc_options_free": (None, [P]),
            "tc_options_set_arch": (ctypes.c_int, [P, ctypes.c_char_p, E]),
            "tc_options_add_compiler_option": (ctypes.c_int, [P, ctypes.c_char_p, E]),
            "tc_options_set_jobs": (ctypes.c_int, [P, ctypes.c_int]),
            "tc_options_set_ptxas": (ctypes.c_int, [P, ctypes.c_char_p]),
            "tc_options_set_tier": (ctypes.c_int, [P, ctypes.c_int, ctypes.c_int]),
            "tc_options_set_split": (ctypes.c_int, [P, ctypes.c_int]),
            "tc_options_set_unit_cost": (ctypes.c_int, [P, ctypes.c_uint]),
            "tc_options_set_compiler": (ctypes.c_int, [P, ctypes.c_int]),
            "tc_options_set_unit_code": (ctypes.c_int, [P, ctypes.c_int]),
            "tc_options_set_cancel": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_int)]),
            "tc_options_set_progress": (ctypes.c_int, [P, _PROGRESS, P]),
            "tc_have_inprocess_compiler": (ctypes.c_int, []),
            "tc_build": (ctypes.c_int, [P, P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                        ctypes.POINTER(P)]),
            "tc_explain": (ctypes.c_int, [P, P, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.c_char_p, ctypes.POINTER(P)]),
            "tc_build_tasks": (ctypes.c_int, [P, P, ctypes.POINTER(_Host), ctypes.POINTER(_Task),
                                              ctypes.c_size_t, ctypes.POINTER(P)]),
            "tc_lookup_group": (ctypes.c_int, [P, P, ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.c_size_t, ctypes.POINTER(P)]),
            "tc_codegen_set_ptx": (None, [P, ctypes.c_char_p, ctypes.c_size_t]),
            "tc_codegen_set_metadata": (None, [P, ctypes.c_char_p, ctypes.c_size_t]),
            "tc_codegen_fail": (None, [P, ctypes.c_char_p]),
            "tc_codegen_cancel": (None, [P]),
            "tc_result_free": (None, [P]),
            "tc_result_status": (ctypes.c_int, [P]),
            "tc_result_image": (P, [P, ctypes.POINTER(ctypes.c_size_t)]),
            "tc_result_diagnostics": (ctypes.c_char_p, [P]),
            "tc_result_whole_reason": (ctypes.c_char_p, [P]),
            "tc_result_compiler": (ctypes.c_char_p, [P]),
            "tc_result_slowest": (ctypes.c_char_p, [P]),
            "tc_options_set_trace": (ctypes.c_int, [P, ctypes.c_char_p]),
            "tc_cache_set_remote": (ctypes.c_int, [P, ctypes.c_char_p, E]),
            "tc_result_report": (None, [P, ctypes.POINTER(_Report)]),
            "tc_result_entry_count": (ctypes.c_size_t, [P]),
            "tc_result_entry": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.POINTER(_Entry)]),
            "tc_result_task_count": (ctypes.c_size_t, [P]),
            "tc_result_task": (ctypes.c_int, [P, ctypes.c_size_t, ctypes.POINTER(_TaskInfo)]),
            "tc_module_load": (ctypes.c_int, [P, ctypes.POINTER(P), E]),
            "tc_module_load_image": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t,
                                                    ctypes.POINTER(P), E]),
            "tc_module_unload": (None, [P]),
            "tc_module_kernel": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.POINTER(_Kernel), E]),
            "tc_module_global": (ctypes.c_int, [P, ctypes.c_char_p,
                                                ctypes.POINTER(ctypes.c_uint64),
                                                ctypes.POINTER(ctypes.c_size_t), E]),
            "tc_module_launch": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.POINTER(_Launch),
                                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                                ctypes.c_size_t, E]),
        }
        for name, (restype, argtypes) in sig.items():
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = argtypes
        _lib = lib
        return lib


def library_version() -> str:
    return _L().tc_version().decode()


def have_inprocess_compiler() -> bool:
    return bool(_L().tc_have_inprocess_compiler())


class TaskcacheError(Exception):
    """A library call failed. .status is the status name ("TC_ERR_PARSE"...),
    .message the library's message, .diagnostics the build's file:line
    lines (may be empty)."""

    def __init__(self, status: int, message: str, diagnostics: str = ""):
        self.code = status
        self.status = _STATUS.get(status, f"TC_ERR_{status}")
        self.message = message or self.status
        self.diagnostics = diagnostics
        super().__init__(f"{self.status}: {self.message}" +
                         (f"\n{diagnostics}" if diagnostics and diagnostics not in self.message
                          else ""))


def _check(status: int, err: Optional[_Error] = None, what: str = ""):
    if status != 0:
        msg = err.message.decode(errors="replace") if err is not None else ""
        raise TaskcacheError(status, msg or what)


def _b(s, what: str = "value") -> Optional[bytes]:
    """Bytes of a str (UTF-8) or of any bytes-like object (bytes,
    bytearray, memoryview, ...); None stays None."""
    if s is None or isinstance(s, bytes):
        return s
    if isinstance(s, str):
        return s.encode()
    try:
        return memoryview(s).tobytes()
    except TypeError:
        raise TypeError(f"{what} must be str or bytes-like, not {type(s).__name__}") from None


def _required(v, what: str):
    """v, which the call cannot do without: None is a TypeError naming it
    (the library would answer only 'invalid argument')."""
    if v is None:
        raise TypeError(f"{what} is required, not None")
    return v


def _c(s, what: str) -> Optional[bytes]:
    """A C string: a NUL would silently end it there ("x\0one" would be
    "x", the same as "x\0two"), so it is refused. Surrogate escapes (from
    os.fsdecode or from names this package decoded) turn back into the
    bytes they stand for."""
    if isinstance(s, str):
        s = s.encode("utf-8", "surrogateescape")
    b = _b(s, what)
    if b is not None and b"\0" in b:
        raise ValueError(f"{what} contains a NUL byte: {s!r}")
    return b


def _text(b: Optional[bytes]) -> Optional[str]:
    """A name from the library as str; bytes that are not UTF-8 come back
    as surrogate escapes (as os.fsdecode does), so they never raise and
    round-trip through _c."""
    return None if b is None else b.decode("utf-8", "surrogateescape")


# ---- options ------------------------------------------------------------------------------

@dataclass
class Options:
    """Build options. arch is required ("sm_90"). compiler_options are
    ptxas options as ptxas spells them ("-O3", "--maxrregcount=64"); every
    option is part of every key. compiler: None (automatic), "ptxas" or
    "inprocess". jobs: parallel compiles (None = all CPUs). progress:
    progress(done, total) is called as the build's compiles finish (units,
    a module compiled whole, or tasks), first with done = 0, one call at a
    time from its worker threads; not at all when nothing compiles. An
    exception it raises is printed and ignored."""
    arch: str = "sm_90"
    compiler_options: Sequence[str] = ()
    jobs: Optional[int] = None
    compiler: Optional[str] = None
    ptxas: Optional[str] = None
    unit_cost: Optional[int] = None
    module_cache: bool = True
    unit_cache: bool = True
    split: bool = True
    # None: whole-program units where libnvJitLink is found (the library's
    # default, or $TASKCACHE_UNIT_CODE); True: whole-program; False: relocatable
    whole_program_units: Optional[bool] = None
    progress: Optional[Callable[[int, int], None]] = None
    # a file the build appends its events to, for Perfetto (None: $TASKCACHE_TRACE)
    trace: Optional[str] = None

    def _handle(self):
        lib = _L()
        h = lib.tc_options_new()
        if not h:
            raise MemoryError("tc_options_new")
        ok = False
        try:
            err = _Error()
            _check(lib.tc_options_set_arch(h, _c(self.arch, "arch"), ctypes.byref(err)), err)
            for o in self.compiler_options:
                _check(lib.tc_options_add_compiler_option(h, _c(o, "compiler option"),
                                                          ctypes.byref(err)), err)
            if self.jobs is not None:
                _check(lib.tc_options_set_jobs(h, int(self.jobs)), None, "jobs must be >= 1")
            if self.compiler is not None:
                codes = {"auto": 0, "ptxas": 1, "inprocess": 2}
                if self.compiler not in codes:
                    raise ValueError("compiler must be 'auto', 'ptxas' or 'inprocess'")
                lib.tc_options_set_compiler(h, codes[self.compiler])
            if self.ptxas:
                lib.tc_options_set_ptxas(h, _c(self.ptxas, "ptxas"))
            if self.trace is not None:
                _check(lib.tc_options_set_trace(h, _c(os.fspath(self.trace), "trace")), None,
                       "trace")
            if self.unit_cost is not None:
                if not 1 <= int(self.unit_cost) <= 0xFFFFFFFF:  # c_uint would wrap -1
                    raise ValueError(f"unit_cost must be a positive count of statements, "
                                     f"not {self.unit_cost!r}")
                lib.tc_options_set_unit_cost(h, int(self.unit_cost))
            lib.tc_options_set_tier(h, 1, int(self.module_cache))
            lib.tc_options_set_tier(h, 2, int(self.unit_cache))
            lib.tc_options_set_split(h, int(self.split))
            if self.whole_program_units is not None:
                lib.tc_options_set_unit_code(h, int(bool(self.whole_program_units)))
            if self.progress is not None:
                report = self.progress

                def on_progress(_user, done, total):
                    try:
                        report(done, total)
                    except Exception:  # a display's failure is not the build's
                        traceback.print_exc()
                cb = _PROGRESS(on_progress)
                lib.tc_options_set_progress(h, cb, None)
                _PROGRESS_OF[h] = cb  # alive while the handle is
            ok = True
            return h
        finally:
            if not ok:
                _free_options(h)


def _free_options(h):
    _L().tc_options_free(h)
    _PROGRESS_OF.pop(h, None)


# ---- results ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    type: str
    offset: int
    size: int
    align: int


@dataclass(frozen=True)
class Entry:
    """One kernel: its parameter layout, directives and resource report."""
    name: str
    params: Tuple[Param, ...]
    param_bytes: int
    maxntid: Tuple[int, int, int]
    reqntid: Tuple[int, int, int]
    minnctapersm: int
    maxnreg: int
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    unit_key: str
    slice_key: str
    unit: int
    cached: bool


@dataclass(frozen=True)
class Report:
    module_hit: bool
    split: bool
    entries: int
    units: int
    unit_hits: int
    units_compiled: int
    seconds: float
    seconds_compile: float
    seconds_link: float
    in_process: bool
    codegen_calls: int
    group_hit: bool
    nvjitlink: bool
    whole_program_units: bool


@dataclass(frozen=True)
class TaskInfo:
    name: str
    key: str
    cached: bool
    codegen_ran: bool
    metadata: Optional[bytes]
    entries: Tuple[Entry, ...]


@dataclass
class Task:
    """A host task: its name and the bytes that determine its PTX.

    The key must cover everything the codegen output depends on (see
    function_key for Python functions); the name is part of the key too.
    name: str (or bytes); key: str or any bytes-like object."""
    name: Union[str, bytes]
    key: Union[bytes, bytearray, memoryview, str]


class Result:
    """What a build returns: image (bytes or None), entries, report,
    diagnostics, whole_reason, compiler, slowest, tasks (host builds). The C result is freed
    once copied."""

    def __init__(self, handle):
        lib = _L()
        try:
            size = ctypes.c_size_t()
            p = lib.tc_result_image(handle, ctypes.byref(size))
            self.image: Optional[bytes] = ctypes.string_at(p, size.value) if p else None
            self.diagnostics: str = (lib.tc_result_diagnostics(handle) or b"").decode(
                errors="replace")
            why = lib.tc_result_whole_reason(handle)
            self.whole_reason: Optional[str] = why.decode(errors="replace") if why else None
            # the compiler whose code the image holds: "ptxas PATH (release R)" or
            # "nvPTXCompiler R (in-process...)"
            self.compiler: str = (lib.tc_result_compiler(handle) or b"").decode(
                errors="replace")
            # the slowest compiles and their seconds, "" when none ran
            self.slowest: str = (lib.tc_result_slowest(handle) or b"").decode(errors="replace")
            r = _Report()
            lib.tc_result_report(handle, ctypes.byref(r))
            self.report = Report(bool(r.module_hit), bool(r.split), r.entries, r.units,
                                 r.unit_hits, r.units_compiled, r.seconds, r.seconds_compile,
                                 r.seconds_link, bool(r.in_process), r.codegen_calls,
                                 bool(r.group_hit), bool(r.nvjitlink),
                                 bool(r.whole_program_units))
            entries = []
            for i in range(lib.tc_result_entry_count(handle)):
                e = _Entry()
                lib.tc_result_entry(handle, i, ctypes.byref(e))
                params = tuple(Param(e.params[k].type.decode(), e.params[k].offset,
                                     e.params[k].size, e.params[k].align)
                               for k in range(e.param_count))
                entries.append(Entry(
                    _text(e.name), params, e.param_bytes, tuple(e.maxntid), tuple(e.reqntid),
                    e.minnctapersm, e.maxnreg, e.registers, e.shared_bytes, e.stack_bytes,
                    e.spill_store_bytes, e.spill_load_bytes, (e.unit_key or b"").decode(),
                    (e.slice_key or b"").decode(), e.unit, bool(e.cached)))
            self.entries: List[Entry] = entries
            tasks = []
            for i in range(lib.tc_result_task_count(handle)):
                t = _TaskInfo()
                lib.tc_result_task(handle, i, ctypes.byref(t))
                meta = ctypes.string_at(t.metadata, t.metadata_size) if t.metadata else None
                tasks.append(TaskInfo(_text(t.name), t.key.decode(), bool(t.cached),
                                      bool(t.codegen_ran), meta,
                                      tuple(entries[t.first_entry:t.first_entry + t.entry_count])))
            self.tasks: List[TaskInfo] = tasks
        finally:
            lib.tc_result_free(handle)

    def entry(self, name: str) -> Entry:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    def load(self) -> "Module":
        """Loads the image on the GPU (CUDA driver; TaskcacheError with
        TC_ERR_DRIVER where there is none)."""
        if self.image is None:
            raise TaskcacheError(1, "this result has no image")
        return Module(self.image, {e.name: e for e in self.entries})


def _finish(status: int, handle) -> Result:
    if not handle:
        raise TaskcacheError(status, "the build could not start")
    res = Result(handle)
    if status != 0:
        first = next((l for l in res.diagnostics.splitlines() if ": error: " in l),
                     res.diagnostics.strip())
        raise TaskcacheError(status, first, res.diagnostics)
    return res


# ---- serialized codegen -------------------------------------------------------------------

class _HostTurn:
    """serialize=True: one codegen call at a time for one host, across
    every build of the process. Remembers which thread holds it, so that a
    forked child can drop the turns of threads it does not have."""
    __slots__ = ("lock", "owner", "__weakref__")

    def __init__(self):
        self.lock = threading.Lock()
        self.owner = None

    def acquire(self):
        self.lock.acquire()
        self.owner = threading.get_ident()

    def release(self):
        self.owner = None
        self.lock.release()


# A host is its codegen callable: a function (or callable object), or for
# a bound method its object and function (each attribute access makes a
# new bound method object).
_turns_lock = threading.Lock()
_turns = weakref.WeakKeyDictionary()   # host object -> {function: _HostTurn}
_turns_strong = {}                     # hosts that cannot be weakly referenced
_all_turns = weakref.WeakSet()
# Per thread: the turns held by the codegen calls running on this thread
# (a build started from inside codegen is nested in them).
_held = threading.local()


def _host_turn(codegen) -> _HostTurn:
    owner = getattr(codegen, "__self__", None)
    func = getattr(codegen, "__func__", codegen)
    obj = owner if owner is not None else func
    with _turns_lock:
        try:
            table = _turns.setdefault(obj, {})
        except TypeError:  # not weakly referenceable, or not hashable
            table = _turns_strong.setdefault(id(obj), (obj, {}))[1]
        turn = table.get(func)
        if turn is None:
            turn = table[func] = _HostTurn()
            _all_turns.add(turn)
        return turn


def _interruptible(call, cancel):
    """Python delivers signals to the main thread only, and only between
    bytecodes: a build called from there runs on a helper thread while the
    main thread waits, so that Ctrl-C raises KeyboardInterrupt at once. The
    build is then cancelled (cancel is its flag: nothing new starts) and
    waited for, since it uses memory owned by the caller; further Ctrl-C
    meanwhile are absorbed. Then the KeyboardInterrupt propagates."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    box = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e
    t = threading.Thread(target=run, name="taskcache build", daemon=True)
    t.start()
    try:
        t.join()
    except BaseException:
        cancel.value = 1
        while t.is_alive():
            try:
                t.join()
            except KeyboardInterrupt:
                pass
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---- fork ---------------------------------------------------------------------------------

_caches = weakref.WeakSet()


def _after_fork_in_child():
    """A forked child has only the thread that forked: locks and host turns
    other threads held must not stay held there forever. (The library does
    the same for its own state with pthread_atfork.) Calls that other
    threads had in flight on a Cache never end in the child, so closing it
    there leaves the handle open until exit."""
    global _lib_lock, _turns_lock
    _lib_lock = threading.Lock()
    _turns_lock = threading.Lock()
    me = threading.get_ident()
    for turn in list(_all_turns):
        if turn.owner is not None and turn.owner != me:
            turn.lock = threading.Lock()
            turn.owner = None
    for cache in list(_caches):
        cache._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- keys for Python functions ----------------------------------------------------------------

def function_key(fn, *extra, lines: bool = False) -> bytes:
    """A task key for a Python function that a JIT compiles (numba, say):
    32 bytes that change whenever anything the compiled code can depend on
    changes on the Python side. They cover fn's bytecode, constants and
    names; its defaults; the values of its closure cells and of the globals
    it reads (JITs such as numba freeze those into the code), and of what it
    reads of the program's own classes and modules (an enum member, a class
    constant, cfg.B of a module held in a global, a default or a closure
    cell, as kernel factories hold them); recursively,
    the same for the Python functions it reaches that way (helpers, device
    functions; an object with a py_func attribute, such as a numba
    dispatcher, counts as its py_func); the interpreter's bytecode format;
    and each of extra, for what the host adds: the signature, the target,
    compile options (a module or class of the program's own code given
    there counts by all of its attributes).

    Functions, classes and modules of installed packages and of the
    standard library count by name only (except those of fn's own package):
    put the versions of the packages that compile (numba, its NVVM...) in
    the version string given to build_tasks. A global whose repr is not
    stable (the default "<... at 0x...>") makes the key differ in every
    process: never a stale hit, never a hit at all. lines=True adds the
    file name and line numbers, for output with line information."""
    h = hashlib.sha256()
    root = getattr(fn, "py_func", fn)
    state = _KeyState(h, lines, _top_package(getattr(root, "__module__", None)))
    state.put("python", sys.implementation.cache_tag)
    state.value(root, ())
    for x in extra:
        # a module or class of the program's own code given here counts by
        # every attribute of its own, as no code says what is read of it
        own = isinstance(x, (type, types.ModuleType)) and not state.library(
            getattr(x, "__module__", None) if isinstance(x, type) else x.__name__)
        state.value(x, {n for n in vars(x) if not n.startswith("__")} if own else ())
    return h.digest()


def _top_package(module_name):
    return (module_name or "").partition(".")[0]


def _library_paths():
    paths = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(name)
        if p:
            paths.add(os.path.realpath(p))
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        paths.add(os.path.realpath(os.path.join(p, "lib")))
    return tuple(sorted(paths))


class _KeyState:
    def __init__(self, h, lines, own_package):
        self.h, self.lines, self.own = h, lines, own_package
        self.seen = {}
        self.read = {}  # id of a module or class: the attribute names hashed so far
        self.libs = None

    def put(self, tag, data):
        data = data if isinstance(data, bytes) else str(data).encode("utf-8", "surrogatepass")
        self.h.update(f"{tag}:{len(data)}:".encode())
        self.h.update(data)

    def library(self, module_name) -> bool:
        """A module of the standard library or of an installed package
        (other than fn's own), which counts by name."""
        if not module_name or _top_package(module_name) == self.own:
            return False
        mod = sys.modules.get(module_name)
        path = getattr(mod, "__file__", None)
        if mod is None or path is None:
            return True  # built in
        if self.libs is None:
            self.libs = _library_paths()
        path = os.path.realpath(path)
        return any(path.startswith(p + os.sep) for p in self.libs)

    def value(self, v, names):
        """names: the attribute names the code that reached v uses (what of
        a module it can read)."""
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            self.put(type(v).__name__, repr(v))
        elif isinstance(v, (tuple, list)):
            self.put(type(v).__name__, len(v))
            for x in v:
                self.value(x, names)
        elif isinstance(v, dict):
            self.put("dict", len(v))
            for k in sorted(v, key=repr):
                self.value(k, names)
                self.value(v[k], names)
        elif isinstance(v, (set, frozenset)):
            self.put(type(v).__name__, len(v))
            for x in sorted(v, key=repr):
                self.value(x, names)
        elif isinstance(v, types.CodeType):
            self.code(v)
        elif hasattr(v, "py_func") and isinstance(v.py_func, types.FunctionType):
            self.value(v.py_func, names)
        elif isinstance(v, types.FunctionType):
            self.function(v)
        elif isinstance(v, types.ModuleType):
            self.module(v, names)
        elif isinstance(v, type) and not self.library(getattr(v, "__module__", None)):
            self.user_class(v, names)
        elif isinstance(v, type) or (callable(v) and not hasattr(v, "dtype")):
            self.put("named", f"{getattr(v, '__module__', '')}."
                              f"{getattr(v, '__qualname__', repr(v))}")
        elif all(hasattr(v, a) for a in ("dtype", "shape", "tobytes")):  # arrays, numpy scalars
            self.put("array", f"{v.dtype} {tuple(v.shape)}")
            self.put("data", v.tobytes())
        else:
            self.put(f"{type(v).__module__}.{type(v).__qualname__}", repr(v))

    def once(self, v, what) -> bool:
        if id(v) in self.seen:
            self.put("again", self.seen[id(v)])
            return False
        self.seen[id(v)] = len(self.seen)
        self.put(what, self.seen[id(v)])
        return True

    def attributes(self, obj, what, names, read):
        """What code reads of obj, a module or class of the program's own
        code: each attribute in names, by value, once per key. Every visit
        hashes the names not hashed before: the kernel may read cfg.A and
        the device function it calls cfg.B, and a second visit that counted
        as "again" left B out of the key (the old binary was served after B
        changed)."""
        if id(obj) not in self.seen:
            self.seen[id(obj)] = len(self.seen)
        self.put(what, self.seen[id(obj)])
        done = self.read.setdefault(id(obj), set())
        for n in sorted(set(names) - done):
            done.add(n)  # first: an attribute that leads back here ends there
            try:
                a = read(n)
            except Exception:  # absent, or a descriptor that refuses: nothing read
                continue
            self.put("attr", n)
            self.value(a, names)

    def code(self, c):
        self.put("code", c.co_code)
        self.put("shape", (c.co_argcount, c.co_posonlyargcount, c.co_kwonlyargcount,
                           c.co_flags, c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars))
        for k in c.co_consts:
            self.value(k, ())
        if self.lines:
            self.put("where", (c.co_filename, c.co_firstlineno))
            self.put("lines", getattr(c, "co_linetable", None) or c.co_lnotab)

    def function(self, f):
        name = f"{f.__module__}.{f.__qualname__}"
        if self.library(f.__module__):
            self.put("named", name)
            return
        if not self.once(f, "function"):
            return
        self.put("function", name)
        self.code(f.__code__)
        # what the code reads of a module or class held in a default or a
        # cell counts as it does of a global (kernel factories: make(cfg)
        # returning a kernel that reads cfg.B; keyed by name only, an edit
        # of B kept the key)
        used = _names_used(f.__code__)
        self.value(f.__defaults__, used)
        self.value(f.__kwdefaults__, used)
        for cell in f.__closure__ or ():
            try:
                self.value(cell.cell_contents, used)
            except ValueError:  # an empty cell
                self.put("cell", "empty")
        g = f.__globals__
        builtins_ = g.get("__builtins__", {})
        builtins_ = builtins_ if isinstance(builtins_, dict) else vars(builtins_)
        for n in sorted(used):
            if n in g:
                self.put("global", n)
                self.value(g[n], used)
            elif n in builtins_:
                self.put("builtin", n)

    def user_class(self, cls, names):
        """A class of the program's own code: its name, and by value what
        the code reads of it (numba freezes an enum member's or a class
        constant's value into the code: Color.RED going from 3 to 4 kept the
        key, and the old binary was served)."""
        self.put("named", f"{cls.__module__}.{cls.__qualname__}")
        self.attributes(cls, "class", names, lambda n: getattr(cls, n))

    def module(self, m, names):
        self.put("module", m.__name__)
        if self.library(m.__name__):
            # what the code reads of it: data by value, the rest by name
            for n in sorted(names):
                if n in vars(m):
                    a = vars(m)[n]
                    self.put("attr", n)
                    if callable(a) or isinstance(a, types.ModuleType):
                        self.put("named", f"{m.__name__}.{n}")
                    else:
                        self.value(a, ())
            return
        self.attributes(m, "module", names, lambda n: vars(m)[n])


def _names_used(code) -> set:
    """Global and attribute names a code object and its nested ones use."""
    names = set(code.co_names)
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            names |= _names_used(k)
    return names


# ---- the cache ----------------------------------------------------------------------------

class Cache:
    """A cache directory (None: $TASKCACHE_DIR, else ~/.cache/taskcache).
    Use as a context manager, or call close(). Safe to share between
    threads, and to close while other threads (or the codegen of a build)
    use it: see close()."""

    def __init__(self, directory: Union[str, os.PathLike, None] = None):
        lib = _L()
        self._lock = threading.Lock()
        self._busy = 0          # calls into the library in flight
        self._closed = False
        _caches.add(self)
        self._h = ctypes.c_void_p()
        err = _Error()
        _check(lib.tc_cache_open(_c(os.fspath(directory), "directory") if directory is not None
                                 else None,
                                 ctypes.byref(self._h), ctypes.byref(err)), err)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def close(self):
        """Closes the cache. Never blocks: calls already running on it in
        other threads, or the build whose codegen calls close(), finish
        normally (storing what they built) and the last of them releases
        the handle. Any call made after close() raises ValueError."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed
            return
        with lock:
            self._closed = True
            if self._busy or not self._h:
                return
            h, self._h = self._h, None
        _L().tc_cache_close(h)

    @contextlib.contextmanager
    def _use(self):
        """The handle, kept open until the block ends."""
        with self._lock:
            if self._closed or not self._h:
                raise ValueError("the cache is closed")
            self._busy += 1
            h = self._h
        try:
            yield h
        finally:
            with self._lock:
                self._busy -= 1
                last = self._closed and not self._busy and self._h
                if last:
                    self._h = None
            if last:
                _L().tc_cache_close(h)

    def set_remote(self, spec: Optional[str]):
        """Puts a remote cache behind this one (a spec as `taskcache help
        remote` describes, e.g. "redis://cache:6379" or
        "https://cache/tc|read-only"; None or "none" for none). Raises
        TaskcacheError for a spec it cannot use."""
        lib = _L()
        err = _Error()
        with self._use() as h:
            _check(lib.tc_cache_set_remote(h, _c(spec, "remote") if spec else None,
                                           ctypes.byref(err)), err)

    @property
    def directory(self) -> str:
        with self._use() as h:
            return _text(_L().tc_cache_dir(h))

    @property
    def warning(self) -> Optional[str]:
        with self._use() as h:
            w = _L().tc_cache_warning(h)
            return w.decode() if w else None

    def _run(self, fn, ptx, options, name):
        data = _b(ptx, "ptx")
        opts = (options or Options())._handle()
        out = ctypes.c_void_p()
        try:
            with self._use() as h:
                status = fn(h, opts, data, len(data), _c(name, "name"), ctypes.byref(out))
        finally:
            _free_options(opts)
        return _finish(status, out.value)

    def build(self, ptx: Union[str, bytes], options: Optional[Options] = None,
              name: Optional[str] = None) -> Result:
        """Builds a linked cubin from PTX text (str or bytes)."""
        return self._run(_L().tc_build, ptx, options, name)

    def explain(self, ptx: Union[str, bytes], options: Optional[Options] = None,
                name: Optional[str] = None) -> Result:
        """Compiles nothing: entries with their unit/slice keys and cached flags."""
        return self._run(_L().tc_explain, ptx, options, name)

    def build_tasks(self, tasks: Sequence[Task],
                    codegen: Callable[[int, Task], Union[bytes, str, Tuple]],
                    options: Optional[Options] = None, *, version: str,
                    group_key: Optional[bytes] = None, serialize: bool = False) -> Result:
        """Builds a module from keyed tasks. codegen(index, task) runs only
        for tasks the cache lacks, on worker threads, and returns the
        task's PTX, or (PTX, metadata bytes). An exception in codegen fails
        the build with its message.

        Ctrl-C (KeyboardInterrupt), or KeyboardInterrupt or SystemExit
        raised by codegen, cancels the build: no further codegen call or
        compile starts, those running finish, nothing is stored, and the
        exception propagates. (Called from the main thread, the build runs
        on a helper thread while the main thread waits, so that Ctrl-C
        arrives at once: codegen never runs on the main thread.)

        serialize=True: one call of this codegen at a time, across every
        build of the process (threads sharing one codegen take turns; for
        a bound method, its object and function are the host). codegen may
        build with the same codegen from inside; those calls run while the
        enclosing one waits for them."""
        lib = _L()
        tasks = list(tasks)
        if not tasks:
            raise ValueError("build_tasks needs at least one task")
        ctasks = (_Task * len(tasks))()
        keep = []
        cversion = _c(_required(version, "version"), "version")
        for i, t in enumerate(tasks):
            key = _b(_required(t.key, f"the key of task {i}"), "task key")
            kbuf = ctypes.create_string_buffer(key, len(key))
            name = _c(t.name, "task name")
            keep += [kbuf, name]
            ctasks[i].name = name
            ctasks[i].key = ctypes.cast(kbuf, ctypes.c_void_p)
            ctasks[i].key_size = len(key)

        # serialize=True takes the host's turn across calls; a build nested in
        # a codegen call of the same host runs while that call waits for it,
        # so it must not wait for the turn (its calls still take turns, the
        # library serializes each call's codegen)
        turn = _host_turn(codegen) if serialize else None
        enclosing = getattr(_held, "turns", ())

        def call_codegen(index):
            take = turn is not None and turn not in enclosing
            if take:
                turn.acquire()
            before = getattr(_held, "turns", ())  # codegen may run on the calling thread
            _held.turns = enclosing + ((turn,) if turn is not None else ())
            try:
                return codegen(index, tasks[index])
            finally:
                _held.turns = before
                if take:
                    turn.release()

        cancel = ctypes.c_int(0)  # the build's cancel flag (a sig_atomic_t)
        interrupted = []          # KeyboardInterrupt, SystemExit... raised in codegen

        def trampoline(_user, index, _task, out):
            try:
                produced = call_codegen(index)
                meta = None
                if isinstance(produced, tuple):
                    produced, meta = produced
                ptx = _b(produced, "codegen's PTX")
                lib.tc_codegen_set_ptx(out, ptx, len(ptx))
                if meta is not None:
                    meta = _b(meta, "codegen's metadata")
                    lib.tc_codegen_set_metadata(out, meta, len(meta))
            except Exception as e:  # reported through the library, never lost
                msg = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
                lib.tc_codegen_fail(out, msg.encode(errors="replace"))
            except BaseException as e:  # the host wants out: stop, and re-raise it
                interrupted.append(e)
                lib.tc_codegen_cancel(out)

        cb = _CODEGEN(trampoline)
        # b"" is a key like any other; only None means no manifest
        gk = _b(group_key, "group_key")
        gkbuf = ctypes.create_string_buffer(gk, max(1, len(gk))) if gk is not None else None
        host = _Host(cversion, cb, None, int(serialize),
                     ctypes.cast(gkbuf, ctypes.c_void_p) if gkbuf is not None else None,
                     len(gk) if gk is not None else 0)
        opts = (options or Options())._handle()
        lib.tc_options_set_cancel(opts, ctypes.byref(cancel))
        out = ctypes.c_void_p()

        def call():
            with self._use() as h:
                return lib.tc_build_tasks(h, opts, ctypes.byref(host), ctasks, len(tasks),
                                          ctypes.byref(out))
        try:
            status = _interruptible(call, cancel)
            if interrupted:
                raise interrupted[0]
        except BaseException:
            lib.tc_result_free(out.value)  # the build has returned: nothing uses it
            raise
        finally:
            _free_options(opts)
        return _finish(status, out.value)

    def lookup_group(self, group_key: bytes, options: Optional[Options] = None, *,
                     version: str) -> Optional[Result]:
        """The whole result of an earlier build_tasks with this group key,
        or None on a miss (run the front end then). Other failures (no
        ptxas, a bad target, ...) raise TaskcacheError with the library's
        diagnostics."""
        lib = _L()
        opts = (options or Options())._handle()
        out = ctypes.c_void_p()
        try:
            gk = _b(_required(group_key, "group_key"), "group_key")
            cversion = _c(_required(version, "version"), "version")
            with self._use() as h:
                status = lib.tc_lookup_group(h, opts, cversion, gk, len(gk),
                                             ctypes.byref(out))
        finally:
            _free_options(opts)
        if status == TC_ERR_NOT_FOUND:
            return None
        return _finish(status, out.value)

    def stats(self) -> dict:
        """Every figure of the cache's statistics by name, in the order
        `taskcache stats` shows them (the library's table)."""
        lib = _L()
        s = _Stats()
        err = _Error()
        with self._use() as h:
            _check(lib.tc_cache_stats(h, ctypes.byref(s), ctypes.byref(err)), err)
        return {name: getattr(s, name) for name in _STATS_ORDER}

    def zero_stats(self):
        err = _Error()
        with self._use() as h:
            _check(_L().tc_cache_zero_stats(h, ctypes.byref(err)), err)

    def clear(self):
        err = _Error()
        with self._use() as h:
            _check(_L().tc_cache_clear(h, ctypes.byref(err)), err)


# ---- loading and launching ------------------------------------------------------------------

@dataclass(frozen=True)
class Kernel:
    name: str
    function: int
    max_threads_per_block: int
    registers: int
    shared_bytes: int
    local_bytes: int
    const_bytes: int
    entry: Optional[Entry]


class Module:
    """An image loaded into the current CUDA context (the primary context
    of device 0 when none is current). Context manager; unload() frees it."""

    def __init__(self, image: bytes, entries: Optional[dict] = None):
        lib = _L()
        self._h = ctypes.c_void_p()
        self._entries = entries or {}
        err = _Error()
        _check(lib.tc_module_load_image(image, len(image), ctypes.byref(self._h),
                                        ctypes.byref(err)), err)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unload()

    def unload(self):
        if getattr(self, "_h", None):
            _L().tc_module_unload(self._h)
            self._h = None

    def kernel(self, name: str) -> Kernel:
        k = _Kernel()
        err = _Error()
        _check(_L().tc_module_kernel(self._h, _c(name, "kernel name"), ctypes.byref(k),
                                     ctypes.byref(err)), err)
        return Kernel(name, k.function or 0, k.max_threads_per_block, k.registers,
                      k.shared_bytes, k.local_bytes, k.const_bytes, self._entries.get(name))

    def global_address(self, name: str) -> Tuple[int, int]:
        """(device address, bytes) of a global variable."""
        p, n = ctypes.c_uint64(), ctypes.c_size_t()
        err = _Error()
        _check(_L().tc_module_global(self._h, _c(name, "global name"), ctypes.byref(p),
                                     ctypes.byref(n),
                                     ctypes.byref(err)), err)
        return p.value, n.value

    def launch(self, name: str, grid, block, args: Sequence = (), shared_bytes: int = 0,
               stream: int = 0, cooperative: bool = False):
        """Launches a kernel. args: one ctypes value per parameter
        (ctypes.c_uint64(device_pointer), ctypes.c_int(n), ...)."""
        def dims(v):
            v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
            return (ctypes.c_uint * 3)(*(list(v) + [1, 1, 1])[:3])
        cfg = _Launch(dims(grid), dims(block), shared_bytes, stream or None, int(cooperative))
        values = [a if isinstance(a, ctypes._SimpleCData) else ctypes.c_uint64(a) for a in args]
        argv = (ctypes.c_void_p * max(1, len(values)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        err = _Error()
        _check(_L().tc_module_launch(self._h, _c(name, "kernel name"), ctypes.byref(cfg), argv,
                                     None, 0,
                                     ctypes.byref(err)), err)
