#!/usr/bin/python3
"""Which source folder calls which (DESIGN.md §1, issue 13): reads the
symbols every object of the daemon defines and uses (nm), and prints the
calls between folders, one line each, those against the layer order
marked UP.

    contrib/layers.py [BUILD]        (default: ./build)

The layer order, top to bottom, is ORDER; a folder may call any folder
below it.  tests/test_layers.py holds the calls up still left."""
import collections
import pathlib
import re
import subprocess
import sys

ORDER = ["main", "fuse", "data", "cache", "raid", "ns", "meta", "array", "member", "io",
         "math", "util"]
# pure functions with no state, below everything: placement, parity, the
# eviction policies (each exhaustively tested on its own)
MATH = {"src_raid_layout.c.o", "src_raid_parity.c.o", "src_cache_policy.c.o"}


def folder(obj):
    """src_cache_bind.c.o -> cache; src_tierfs.c.o -> main."""
    if obj.name in MATH:
        return "math"
    m = re.match(r"src_([a-z]+)_", obj.name)
    return m.group(1) if m else "main"


def calls(build):
    objs = sorted(pathlib.Path(build).glob("tierfs.p/*.o")) + \
        sorted(pathlib.Path(build).glob("libtierfs_core.a.p/*.o"))
    if not objs:
        raise SystemExit(f"layers.py: no objects under {build} (build first)")
    defined, used = {}, collections.defaultdict(set)
    for o in objs:
        out = subprocess.run(["nm", "--defined-only", "-g", str(o)], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = folder(o)
        out = subprocess.run(["nm", "-u", str(o)], capture_output=True, text=True,
                             check=True).stdout
        for line in out.split():
            if line != "U":
                used[folder(o)].add(line)
    edges = collections.defaultdict(set)
    for f, syms in used.items():
        for s in syms:
            g = defined.get(s)
            if g and g != f:
                edges[(f, g)].add(s)
    return edges


def up(edge):
    a, b = edge
    return ORDER.index(b) < ORDER.index(a)


def upward(build):
    """{(folder, folder below it... above it): symbols} of the calls up."""
    return {e: s for e, s in calls(build).items() if up(e)}


def main():
    edges = calls(sys.argv[1] if len(sys.argv) > 1 else "build")
    for e in sorted(edges, key=lambda e: (ORDER.index(e[0]), ORDER.index(e[1]))):
        print(f"{'UP ' if up(e) else '   '}{e[0]} -> {e[1]}: {' '.join(sorted(edges[e]))}")


if __name__ == "__main__":
    main()
