"""Where the CUDA toolkit's programs are, for the repository's Python tools.

One rule for the scripts, tests and benchmarks alike: a path given
explicitly, else the one an environment variable names, else the toolkit's
bin folder ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda), else PATH. Standard
library only: the benchmarks and the GPU scripts import it as they are.
"""

import os
import shutil


def find_tool(name, explicit=None, env_var=None):
    """The path of the CUDA tool `name`, or None. An explicit path that
    does not work is not silently replaced by another tool."""
    if explicit:
        return os.path.abspath(explicit) if os.path.isfile(explicit) and os.access(explicit, os.X_OK) \
            else None
    cands = []
    if env_var and os.environ.get(env_var):
        v = os.environ[env_var]
        cands.append(os.path.join(v, name) if os.path.isdir(v) else v)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "bin", name))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return shutil.which(name)
