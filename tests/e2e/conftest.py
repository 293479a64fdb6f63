"""Fixtures of the end-to-end tests; the helpers they share live in
tchelp.py (so that this file's name does not clash with other conftests)."""

import os

import pytest

from tchelp import PTXAS, TASKCACHE, corpus_files  # noqa: F401


def pytest_generate_tests(metafunc):
    if "corpus_ptx" in metafunc.fixturenames:
        files = corpus_files()
        metafunc.parametrize("corpus_ptx", files or [None],
                             ids=[os.path.basename(f) for f in files] or ["no-toolkit"])


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "cache")


@pytest.fixture(autouse=True)
def _require_toolchain(request):
    if request.node.get_closest_marker("no_toolkit"):
        return
    if not PTXAS:
        pytest.skip("the CUDA toolkit (ptxas) is not installed")
    if not os.access(TASKCACHE, os.X_OK):
        pytest.fail(f"taskcache binary not found at {TASKCACHE}: build it first")


def pytest_configure(config):
    config.addinivalue_line("markers", "no_toolkit: runs without the CUDA toolkit")
