"""TASKCACHE_WARP=1: NVIDIA Warp is switched over to taskcache.warp as soon
as it is imported, without a change to the program. The package installs
taskcache-warp.pth, whose one line imports this module at Python's start
only when the variable is set; `taskcache run` sets it."""

import importlib.abc
import importlib.util
import os
import sys


def _enable():
    try:
        import taskcache.warp
        taskcache.warp.enable()
    except Exception as e:  # the program runs on, with stock Warp
        print(f"taskcache.warp: not enabled: {type(e).__name__}: {e}", file=sys.stderr)


class _AfterWarp(importlib.abc.MetaPathFinder):
    """Finds warp as the next finder would, and enables taskcache.warp once
    warp's own package has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "warp":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _enable()
        spec.loader.exec_module = exec_module
        return spec


def install():
    if os.environ.get("TASKCACHE_WARP") != "1":
        return
    if "warp" in sys.modules:
        _enable()
    elif not any(isinstance(f, _AfterWarp) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterWarp())


install()
