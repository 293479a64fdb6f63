"""Malformed PTX: a file:line error, exit status 1, nothing in the cache."""

import pathlib
import re

import pytest

from conftest import ROOT, build, stats

BAD = sorted((ROOT / "tests" / "corpus" / "bad").glob("*.ptx"))


def expectations(path):
    text = path.read_text()
    line = int(re.search(r"expect-error-line: (\d+)", text).group(1))
    m = re.search(r"expect-error-text: (.+)", text)
    return line, m.group(1).strip() if m else None


@pytest.mark.parametrize("bad", BAD, ids=[p.name for p in BAD])
def test_bad_input_reports_file_and_line(bad, tmp_path):
    cache = str(tmp_path / "cache")
    out = tmp_path / "out.cubin"
    line, text = expectations(bad)
    p = build(str(bad), out, cache, check=False)
    assert p.returncode == 1
    assert f"{bad}:{line}: error: " in p.stderr, p.stderr
    if text:
        first = next(l for l in p.stderr.splitlines() if f":{line}: error: " in l)
        assert text in p.stderr, first
    assert not out.exists()
    s = stats(cache)
    assert s["unit_records"] == 0 and s["module_records"] == 0
    assert s["compile_errors"] == 1


def test_the_bad_corpus_is_there():
    assert len(BAD) >= 10


@pytest.mark.parametrize("text,line,message", [
    ("", 1, "missing .version"),
    ("\x00\x01binary", 1, "a module must start with .version (found byte 0x00)"),
    (".version 8.0\n.target sm_90\n.entry k() {\n" + "{" * 5000 + "}" * 5000 + "\nret; }\n",
     None, None),  # deep nesting is fine
    (".version 8.0\n.target sm_90\n.entry k() { ret; }\n.entry k() { ret; }\n", 4,
     "redefinition of 'k'"),
])
def test_odd_inputs(tmp_path, text, line, message):
    src = tmp_path / "odd.ptx"
    src.write_bytes(text.encode("latin-1"))
    p = build(str(src), tmp_path / "o.cubin", str(tmp_path / "cache"), check=False)
    if line is None:
        assert p.returncode in (0, 1)
        assert "Traceback" not in p.stderr
        return
    assert p.returncode == 1
    assert f"{src}:{line}: error: {message}" in p.stderr, p.stderr


def test_compile_error_writes_nothing(tmp_path):
    """A module whose kernels parse but fail in ptxas leaves no records, not
    even for the units that compiled."""
    src = tmp_path / "half.ptx"
    good = "".join(f".visible .entry ok{i}() {{ ret; }}\n" for i in range(20))
    src.write_text(".version 8.0\n.target sm_90\n" + good +
                   ".visible .entry broken() {\n .reg .b32 %r<2>;\n add.u32 %r1, %r1;\n ret;\n}\n")
    cache = str(tmp_path / "cache")
    p = build(str(src), tmp_path / "o.cubin", cache, "--unit-cost", "1", check=False)
    assert p.returncode == 1
    assert f"{src}:25: error:" in p.stderr, p.stderr
    s = stats(cache)
    assert s["unit_records"] == 0 and s["module_records"] == 0
