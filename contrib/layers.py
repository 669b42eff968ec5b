#!/usr/bin/python3
"""Which source folder calls which (DESIGN.md §1, issue 13): reads the
symbols every object of the daemon defines and uses (nm), and prints the
calls between folders, one line each, those against the layer order
marked UP.

    contrib/layers.py [BUILD]        (default: ./build)
    contrib/layers.py --includes     which folder includes which header

The layer order, top to bottom, is ORDER; a folder may call any folder
below it, and include the headers of any folder below it (HEADERS says
which folder each header of include/tierfs is the interface of).
tests/test_layers.py holds the calls up still left."""
import collections
import pathlib
import re
import subprocess
import sys

ORDER = ["main", "fuse", "data", "cache", "raid", "ns", "meta", "array", "member", "io",
         "math", "util"]
# pure functions with no state, below everything: placement, parity, the
# eviction policies, the tier's rules, the evidence for reclaim and the
# tier's model (each tested on its own)
MATH = {"src_raid_layout.c.o", "src_raid_parity.c.o", "src_cache_policy.c.o",
        "src_cache_rules.c.o", "src_cache_model.c.o", "src_cache_mrc.c.o",
        "src_cache_evidence.c.o"}


# The folder each header is the interface of.  fs.h (struct tfs_fs, the
# inode objects, the tier's hooks) is the namespace's: the layers above it
# share it, the stores, superblocks and members below never see it.
HEADERS = {
    "attrs.h": "fuse", "control.h": "fuse", "defer.h": "fuse", "fuse_fs.h": "fuse", "hitio.h": "fuse", "transport.h": "fuse",
    "data.h": "data", "cache.h": "cache", "trace.h": "cache", "raid.h": "raid", "maint.h": "raid",
    "fs.h": "ns", "health.h": "ns", "inode.h": "ns", "ns.h": "ns", "replay.h": "ns",
    "upgrade.h": "ns", "walk.h": "ns", "meta.h": "meta", "cstore.h": "meta",
    "super.h": "array", "member.h": "member", "powercut.h": "member", "uring.h": "io",
    "layout.h": "math", "parity.h": "math", "policy.h": "math", "rules.h": "math",
    "sectors.h": "math",
    "model.h": "math", "mrc.h": "math", "evidence.h": "math", "hash.h": "util",
    "kvjson.h": "util", "log.h": "util", "parse.h": "util", "scratch.h": "util", "secure.h": "util",
}
INCLUDE = re.compile(r'^#include "tierfs/([a-z_]+\.h)"', re.M)


def src_folder(path, root):
    """src/cache/x.c -> cache, include/tierfs/fs.h -> ns, src/tierfs.c,
    the tools (mkfs, tierctl) and the headers private to a folder
    (src/cache/cache_i.h) as their folder or main."""
    rel = path.relative_to(root)
    if rel.parts[0] == "include":
        return HEADERS.get(path.name)
    if len(rel.parts) == 2 or rel.parts[1] in ("mkfs", "tierctl"):
        return "main"
    if rel.name in ("layout.c", "parity.c", "policy.c"):
        return "math"
    return rel.parts[1]


def includes(root):
    """{(folder, folder of a header it includes): {"file: header"}}, and the
    headers of include/tierfs missing from HEADERS."""
    root = pathlib.Path(root)
    files = sorted(root.glob("src/**/*.[ch]")) + sorted(root.glob("include/tierfs/*.h"))
    unknown = sorted(p.name for p in root.glob("include/tierfs/*.h") if p.name not in HEADERS)
    edges = collections.defaultdict(set)
    for p in files:
        a = src_folder(p, root)
        for h in INCLUDE.findall(p.read_text()):
            b = HEADERS.get(h)
            if a and b and a != b:
                edges[(a, b)].add(f"{p.relative_to(root)}: {h}")
    return edges, unknown


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
    if sys.argv[1:] == ["--includes"]:
        edges, unknown = includes(pathlib.Path(__file__).resolve().parent.parent)
        for e in sorted(edges, key=lambda e: (ORDER.index(e[0]), ORDER.index(e[1]))):
            print(f"{'UP ' if up(e) else '   '}{e[0]} -> {e[1]}: {' '.join(sorted(edges[e]))}")
        for h in unknown:
            print(f"?  include/tierfs/{h}: not in HEADERS")
        return
    edges = calls(sys.argv[1] if len(sys.argv) > 1 else "build")
    for e in sorted(edges, key=lambda e: (ORDER.index(e[0]), ORDER.index(e[1]))):
        print(f"{'UP ' if up(e) else '   '}{e[0]} -> {e[1]}: {' '.join(sorted(edges[e]))}")


if __name__ == "__main__":
    main()
