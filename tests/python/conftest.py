"""The Python package's tests: they import python/taskcache against the
library built in build/ (or $TASKCACHE_LIB), or, with
TASKCACHE_TEST_INSTALLED=1, the package installed in the running Python
(a wheel in a fresh virtual environment: scripts/test-packages.sh) with
the library it carries."""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if os.environ.get("TASKCACHE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(ROOT / "python"))
    os.environ.setdefault("TASKCACHE_LIB", str(ROOT / "build" / "libtaskcache.so"))
