#!/usr/bin/env python3
"""circles.py: which files of src/ call which, and whether any two call each
other, directly or around a loop (docs/design.md, "Layout": calls go one
way).

Read from a build's object files, so that only real calls count: file A
calls file B when A's object uses a global symbol B's object defines, the
symbol looked up in the library A is linked into (the preloaded
interceptor's objects alone; its builder and the command line with the
library's objects). Static functions, macros and inline functions of
headers are not calls between files.

    python3 scripts/circles.py [BUILD_DIR] [-v]     (default: build)

Prints each circle (a strongly connected set of two files or more) with
the symbols that close it, and exits 1 when there is one; -v lists every
call between files too."""

import collections
import glob
import os
import subprocess
import sys

# target (CMakeFiles/<target>.dir) -> the targets whose objects it links
TARGETS = {"tc_objects": [], "taskcache_intercept": [], "taskcache_jit": ["tc_objects"],
           "taskcache_cli": ["tc_objects"]}


def symbols(obj):
    """(defined, used) global symbols of an object file."""
    defined, used = set(), set()
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        if f[1] == "U":
            used.add(f[0])
        elif f[1] in "TDBRCVWG":
            defined.add(f[0])
    return defined, used


def calls(build):
    """{file: {file it calls: {symbols}}}, files named from src/."""
    tables = {}
    for target in TARGETS:
        tables[target] = {}
        for obj in glob.glob(f"{build}/CMakeFiles/{target}.dir/src/**/*.o", recursive=True):
            tables[target][obj[obj.index("/src/") + 1:-2]] = symbols(obj)
    edges = collections.defaultdict(lambda: collections.defaultdict(set))
    for target, files in tables.items():
        scope = [target] + TARGETS[target]
        for src, (_, used) in files.items():
            edges[src]  # every file is a node, calling or not
            for name in used:
                for t in scope:
                    for dst, (defined, _) in tables[t].items():
                        if dst != src and name in defined:
                            edges[src][dst].add(name)
    return edges


def circles(edges):
    """Strongly connected sets of two files or more (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    build = args[0] if args else "build"
    if not os.path.isdir(f"{build}/CMakeFiles/tc_objects.dir"):
        sys.exit(f"circles: no object files in {build} (build it first)")
    edges = calls(build)
    found = circles(edges)
    for group in found:
        print("circle: " + " ".join(group))
        for a in group:
            for b in group:
                if b in edges[a]:
                    print(f"   {a} -> {b}: {', '.join(sorted(edges[a][b]))}")
    if "-v" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}")
    n = sum(len(e) for e in edges.values())
    print(f"{len(edges)} files, {n} calls between files, {len(found)} circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
