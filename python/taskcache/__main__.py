"""The `taskcache` command of the wheel (and `python -m taskcache`): runs
the command-line tool built into the package (taskcache/bin/taskcache),
so that it finds the interceptor of `taskcache run` in taskcache/lib and
`taskcache shims` links ptxas to the program itself, not to Python."""

import os
import pathlib
import sys


def main():
    exe = pathlib.Path(__file__).resolve().parent / "bin" / "taskcache"
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"taskcache: this package has no command line at {exe} "
                         "(it was installed without its C build)\n")
        return 127
    os.execv(str(exe), [str(exe)] + sys.argv[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
