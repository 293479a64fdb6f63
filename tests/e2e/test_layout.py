"""The layout docs/design.md promises: calls between the files of src/ go
one way, no two files calling each other, directly or around a loop
(scripts/circles.py, over the object files of the build whose taskcache
is under test)."""

import pathlib
import shutil
import sys

import pytest

from tchelp import ROOT, TASKCACHE, run


@pytest.mark.no_toolkit
def test_no_two_files_of_src_call_each_other():
    build = pathlib.Path(TASKCACHE).resolve().parent
    if not (build / "CMakeFiles" / "tc_objects.dir").is_dir():
        pytest.skip(f"no object files in {build}")
    if not shutil.which("nm"):
        pytest.skip("nm is not installed")
    p = run([sys.executable, ROOT / "scripts" / "circles.py", build], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
