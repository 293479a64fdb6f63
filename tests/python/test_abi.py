"""The package and the library agree on every struct they share, or the
package refuses to load the library; the statistics come from the
library's one table of figures."""

import ctypes
import json
import pathlib
import subprocess

import pytest

import taskcache as tc
from taskcache import _L, _check_abi


def test_the_loaded_library_matches_every_mirror():
    lib = _L()  # loading runs the check; it raises on any difference
    n = ctypes.c_size_t()
    lib.tc_abi_fields(ctypes.byref(n))
    assert n.value > 100  # every member of every public struct is described


def test_a_mirror_that_differs_is_refused_naming_the_member():
    class Report(ctypes.Structure):  # tc_report without its last member
        _fields_ = [(name, kind) for name, kind in tc._Report._fields_[:-1]]

    class Error(ctypes.Structure):  # tc_error with a shorter message
        _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]

    with pytest.raises(OSError) as exc:
        _check_abi(_L(), {"tc_report": Report, "tc_error": Error})
    msg = str(exc.value)
    assert f"tc_report.{tc._Report._fields_[-1][0]} is missing here" in msg
    assert "tc_error.message is at offset 4 size 1024 in the library, 4 size 512 here" in msg
    assert "tc_error has 1028 bytes in the library, 516 here" in msg


def test_a_library_without_the_layout_table_is_refused():
    class Old:  # a library from before tc_abi_fields
        _name = "libtaskcache.so.old"

    with pytest.raises(OSError, match="older than this taskcache package"):
        _check_abi(Old(), {"tc_error": tc._Error})


def test_stats_are_the_library_table(tmp_path):
    lib = _L()
    n = ctypes.c_size_t()
    rows = lib.tc_stats_fields(ctypes.byref(n))
    names = [rows[i].name.decode() for i in range(n.value)]
    with tc.Cache(tmp_path / "c") as cache:
        stats = cache.stats()
    assert list(stats) == names
    assert {"builds", "waited", "disk_bytes", "max_size"} <= set(names)
    # the command line prints the same figures from the same table
    # beside the library in a build tree, in bin/ beside it in the wheel
    here = pathlib.Path(lib._name)
    cli = next((c for c in (here.with_name("taskcache"), here.parent / "bin" / "taskcache")
                if c.exists()), None)
    if not cli:
        pytest.skip(f"no taskcache command beside {here}")
    out = subprocess.run([str(cli), "stats", "--json", "--cache-dir", str(tmp_path / "c")],
                         capture_output=True, text=True, check=True).stdout
    assert list(json.loads(out)) == ["cache_dir", "remote"] + names
