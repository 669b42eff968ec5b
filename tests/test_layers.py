"""Layers only look down (DESIGN.md §1, issue 13): no source folder of the
daemon calls a function of a folder above it, except the calls listed here,
which are the debt still to pay.  Read from the objects of the build by
contrib/layers.py (nm), so a call up added anywhere fails this test, and so
does paying one off without striking it from the list."""
import importlib.util

from conftest import BUILD, ROOT

spec = importlib.util.spec_from_file_location("layers", ROOT / "contrib" / "layers.py")
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)

# Paid off: the truncate moved into the data path (dispatch.c invariant 3)
# and replay tells the RAID of the truncates it replayed through a function
# the daemon passes it (replay.h), so nothing is left.
STILL_UP = {}


def test_no_folder_calls_one_above_it():
    got = layers.upward(BUILD)
    assert got == STILL_UP, "\n".join(
        f"{a} -> {b}: {' '.join(sorted(s))}" for (a, b), s in sorted(got.items()))


def test_the_check_sees_calls():
    """It reads real objects: the front end calls the data path, which
    calls the tier and the RAID (were nm's output misread, the test above
    would pass on nothing)."""
    e = layers.calls(BUILD)
    assert "tfs_data_write" in e[("fuse", "data")]
    assert {"tfs_cache_write", "tfs_raid_write"} <= e[("data", "cache")] | e[("data", "raid")]
    assert layers.up(("raid", "cache")) and not layers.up(("cache", "raid"))


def test_no_folder_includes_one_above_it():
    """No source folder includes a header of a folder above it, and every
    header of include/tierfs has an owner in layers.HEADERS (a new header
    must be placed).  Read from the sources, so no build is needed."""
    edges, unknown = layers.includes(ROOT)
    assert not unknown, f"headers with no folder in contrib/layers.py HEADERS: {unknown}"
    got = {e: s for e, s in edges.items() if layers.up(e)}
    assert not got, "\n".join(f"{a} -> {b}: {' '.join(sorted(s))}"
                              for (a, b), s in sorted(got.items()))
    assert "src/fuse/fs.c: data.h" in edges[("fuse", "data")]   # it reads real files
