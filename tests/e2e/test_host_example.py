"""The example JIT host (examples/host_jit.c): warm runs skip its front end
and codegen; editing one task runs codegen once."""

import os
import re

from tchelp import ROOT, TASKCACHE, run

HOST = os.path.join(os.path.dirname(TASKCACHE), "host_jit")
TASKS = ROOT / "examples" / "tasks.txt"


def host(tasks, cache, out):
    p = run([HOST, "--cache-dir", cache, tasks, out])
    m = re.search(r"group manifest (\w+); front end (\w+); codegen ran (\d+) times", p.stdout)
    assert m, p.stdout
    return m.group(1), m.group(2), int(m.group(3)), p.stdout


def test_example_host_scenarios(tmp_path):
    cache = str(tmp_path / "cache")
    assert host(TASKS, cache, tmp_path / "a.cubin")[:3] == ("miss", "ran", 12)
    group, front, calls, out = host(TASKS, cache, tmp_path / "b.cubin")
    assert (group, front, calls) == ("hit", "skipped", 0)
    assert "metadata: block=256 reads=x writes=y op=saxpy" in out
    assert (tmp_path / "a.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()
    edited = tmp_path / "tasks.txt"
    edited.write_text(TASKS.read_text().replace("gravity       saxpy 1.0 -9.81",
                                                "gravity       saxpy 1.0 -9.80665"))
    assert host(edited, cache, tmp_path / "c.cubin")[:3] == ("miss", "ran", 1)
    assert host(edited, cache, tmp_path / "d.cubin")[:3] == ("hit", "skipped", 0)
    # the edited build equals a cold build of the edited program
    fresh = str(tmp_path / "fresh")
    host(edited, fresh, tmp_path / "e.cubin")
    assert (tmp_path / "c.cubin").read_bytes() == (tmp_path / "e.cubin").read_bytes()
