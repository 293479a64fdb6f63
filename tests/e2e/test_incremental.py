"""End to end in fresh processes: a cold build compiles everything, a warm
one nothing, an edit one unit; damaged or missing records rebuild silently;
and the output never depends on what the cache held."""

import os
import pathlib
import sys

import pytest

import elfsyms
from tchelp import NVCC, ROOT, build, explain, run, stats

GEN = ROOT / "bench" / "gen_module.py"


@pytest.fixture(scope="module")
def physics(tmp_path_factory):
    """A 40-kernel module shaped like a physics engine's step, plus
    variants with one kernel edited."""
    if not NVCC:
        pytest.skip("nvcc not found")
    d = tmp_path_factory.mktemp("physics")
    out = d / "step.ptx"
    run([sys.executable, GEN, "-o", out, "--tasks", "40", "--seed", "7",
         "--edit", "3", "--edit", "21"])
    return {"base": str(out), "edit3": str(d / "step-edit3.ptx"),
            "edit21": str(d / "step-edit21.ptx")}


def counters(cache):
    s = stats(cache)
    return s


def delta(after, before, key):
    return after[key] - before.get(key, 0)


def records(cache):
    """Record files (62 hex digits), not lock files or temporaries."""
    return sorted(p for p in pathlib.Path(cache).glob("v1/*/*/*/*")
                  if p.is_file() and len(p.name) == 62 and "." not in p.name)


def test_machines_of_any_core_count_share_the_units(physics, tmp_path):
    """The default unit size is the same at any -j: a 2-core CI runner and
    a 16-core workstation sharing a cache build a module from the same
    units. Units were half as large from 8 jobs up, so such machines
    shared a few units of a module, and the same input gave another image
    at another -j."""
    cache = str(tmp_path / "cache")
    few, many = (explain(physics["base"], cache, "-j", j) for j in ("2", "8"))
    assert few["units"] > 1
    assert [(e["name"], e["unit"], e["unit_key"]) for e in few["entries"]] == \
        [(e["name"], e["unit"], e["unit_key"]) for e in many["entries"]]
    build(physics["base"], tmp_path / "few.cubin", cache, "-j", "2")
    p = build(physics["base"], tmp_path / "many.cubin", cache, "-j", "8", "-v",
              "--no-module-cache")
    assert "0 compiled" in p.stderr, p.stderr  # every unit from the 2-job build
    assert (tmp_path / "few.cubin").read_bytes() == (tmp_path / "many.cubin").read_bytes()


def test_cold_warm_edit(physics, tmp_path):
    cache = str(tmp_path / "cache")
    cold = tmp_path / "cold.cubin"
    build(physics["base"], cold, cache)
    s1 = counters(cache)
    info = explain(physics["base"], cache)
    assert info["mode"] == "split"
    assert s1["compiles"] == info["units"] > 1      # everything compiled once
    assert s1["module_misses"] == 1 and s1["unit_misses"] == info["units"]

    warm = tmp_path / "warm.cubin"
    build(physics["base"], warm, cache)
    s2 = counters(cache)
    assert delta(s2, s1, "compiles") == 0            # nothing compiled
    assert delta(s2, s1, "module_hits") == 1
    assert warm.read_bytes() == cold.read_bytes()

    edit = tmp_path / "edit.cubin"
    build(physics["edit3"], edit, cache)
    s3 = counters(cache)
    assert delta(s3, s2, "compiles") == 1            # only the edited unit
    assert delta(s3, s2, "unit_hits") == info["units"] - 1
    assert edit.read_bytes() != cold.read_bytes()

    # the incremental result equals a cold build of the edited module
    fresh = tmp_path / "fresh.cubin"
    build(physics["edit3"], fresh, str(tmp_path / "empty-cache"))
    assert edit.read_bytes() == fresh.read_bytes()
    nocache = tmp_path / "nocache.cubin"
    build(physics["edit3"], nocache, None)
    assert nocache.read_bytes() == fresh.read_bytes()


def test_unit_tier_alone(physics, tmp_path):
    """With module records off, a warm build is served unit by unit."""
    cache = str(tmp_path / "cache")
    a, b = tmp_path / "a.cubin", tmp_path / "b.cubin"
    build(physics["base"], a, cache, "--no-module-cache")
    s1 = counters(cache)
    build(physics["base"], b, cache, "--no-module-cache")
    s2 = counters(cache)
    assert delta(s2, s1, "compiles") == 0
    assert delta(s2, s1, "unit_hits") == s1["unit_misses"]
    assert a.read_bytes() == b.read_bytes()


def damage(path, how):
    data = path.read_bytes()
    if how == "flip":
        i = len(data) // 2
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1:])
    elif how == "truncate":
        path.write_bytes(data[:len(data) // 3])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))


@pytest.mark.parametrize("how", ["flip", "truncate", "empty", "delete", "garbage"])
def test_damaged_records_rebuild_silently(physics, tmp_path, how):
    cache = str(tmp_path / "cache")
    good = tmp_path / "good.cubin"
    build(physics["base"], good, cache)
    recs = records(cache)
    assert recs
    for r in recs:
        damage(r, how)
    before = counters(cache)
    out = tmp_path / "out.cubin"
    p = build(physics["base"], out, cache)
    assert p.stderr == ""                              # silently
    assert out.read_bytes() == good.read_bytes()
    after = counters(cache)
    assert delta(after, before, "compiles") == before["compiles"]  # all rebuilt
    if how != "delete":
        assert delta(after, before, "bad_records") == len(recs)
    # the damaged records were replaced by good ones
    build(physics["base"], out, cache)
    again = counters(cache)
    assert delta(again, after, "bad_records") == 0
    assert delta(again, after, "module_hits") == 1


@pytest.mark.parametrize("jobs", ["1", "2", "4"])
def test_units_join_the_link_in_order_whatever_is_ready_first(physics, tmp_path, jobs):
    """Units are read and compiled in whatever order the work allows, and
    each joins the link as soon as it and every unit before it are ready:
    with every other unit record gone (misses between hits, compiled while
    the hits are read), the image is still the cold build's, and only the
    missing units compile."""
    cache = str(tmp_path / "cache")
    cold = tmp_path / "cold.cubin"
    build(physics["base"], cold, cache, "--no-module-cache")
    units = sorted(r for r in records(cache) if r.parent.parent.name == "u")
    gone = units[::2]
    assert len(units) > 3 and gone
    for r in gone:
        r.unlink()
    before = counters(cache)
    out = tmp_path / "out.cubin"
    build(physics["base"], out, cache, "--no-module-cache", "-j", jobs)
    after = counters(cache)
    assert out.read_bytes() == cold.read_bytes()
    assert delta(after, before, "compiles") == len(gone)
    assert delta(after, before, "unit_hits") == len(units) - len(gone)


def test_module_record_without_units_still_hits(physics, tmp_path):
    """A module record holds the linked image: it does not need the unit
    records it was built from."""
    cache = str(tmp_path / "cache")
    a, b = tmp_path / "a.cubin", tmp_path / "b.cubin"
    build(physics["base"], a, cache)
    for r in records(cache):
        if r.parent.parent.name == "u":
            r.unlink()
    build(physics["base"], b, cache)
    assert a.read_bytes() == b.read_bytes()
    assert counters(cache)["module_hits"] == 1


def test_output_is_complete_and_deterministic(physics, tmp_path):
    outs = []
    for i in range(2):
        out = tmp_path / f"o{i}.cubin"
        build(physics["base"], out, None)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert len(elfsyms.kernels(outs[0])) == 40


def test_jobs_do_not_change_the_output(physics, tmp_path):
    a, b = tmp_path / "a.cubin", tmp_path / "b.cubin"
    build(physics["edit21"], a, None, "-j", "1")
    build(physics["edit21"], b, None, "-j", "4")
    assert a.read_bytes() == b.read_bytes()


def test_explain_reports_hits_and_misses(physics, tmp_path):
    cache = str(tmp_path / "cache")
    before = explain(physics["base"], cache)
    assert not before["module_cached"] and before["units_cached"] == 0
    assert all(not e["cached"] for e in before["entries"])
    build(physics["base"], tmp_path / "o.cubin", cache)
    after = explain(physics["edit21"], cache)
    missing = [e for e in after["entries"] if not e["cached"]]
    units = {e["unit"] for e in missing}
    assert len(units) == 1
    assert not after["module_cached"]
    assert explain(physics["base"], cache)["module_cached"]
