"""The Python package's tests: they import python/taskcache against the
library built in build/ (or $TASKCACHE_LIB)."""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("TASKCACHE_LIB", str(ROOT / "build" / "libtaskcache.so"))
