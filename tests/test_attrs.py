"""tierfs's own extended attributes (user.tierfs.*, fuse/attrs.c) on a real
mount: every name listed where it reads, each read, the per-file counters,
residency map and actions, the root's JSON statistics and tunables, and the
refusals, with the two-uid permission rules (a user who cannot read a file
cannot read its statistics; a file's actions are its owner's or root's;
the array's settings are root's)."""
import errno
import json
import mmap
import os
import pathlib
import struct
import re
import subprocess

import pytest

from conftest import BUILD
from test_cache import K, M, copts, cst, status
from test_posix import as_user

P = "user.tierfs."
FILE_NAMES = ["cached_bytes", "dirty_bytes", "extents", "dirty_extents", "heat",
              "read_hits", "read_misses", "write_hits", "write_misses", "last_bypass",
              "layout", "residency", "pinned"]
TUNABLES = ["cache_mode", "seq_cutoff", "promote_threshold", "dirty_low", "dirty_high"]
ALICE, BOB = 60001, 60002


def get(path, name):
    return os.getxattr(str(path), P + name).decode()


def put(path, name, value=b"1"):
    os.setxattr(str(path), P + name, value if isinstance(value, bytes) else value.encode())


def errno_of(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        return errno.errorcode[e.errno]
    return None


def ours(path):
    return sorted(n[len(P):] for n in os.listxattr(str(path)) if n.startswith(P))


@pytest.fixture
def tiered(make_array, tmp_path):
    """RAID5 x3 (64K chunk: a row is 128K) with a 16 MiB write-back tier of
    256K extents; the mount (allow_other) and its root are open to the two users."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="256K") + ["allow_other"])
    os.chmod(a.mnt, 0o777)
    return a


def write_pieces(path, total, piece):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, total, piece):
            os.pwrite(fd, bytes([off // piece % 251]) * piece, off)
    finally:
        os.close(fd)


def test_names_are_listed_where_they_read(tiered, make_array):
    f = tiered.mnt / "f"
    write_pieces(f, 64 * K, 64 * K)
    (tiered.mnt / "d").mkdir()
    os.setxattr(str(f), "user.mine", b"x")
    assert ours(f) == sorted(FILE_NAMES)
    assert "user.mine" in os.listxattr(str(f))
    assert ours(tiered.mnt) == sorted(["status", "stats", "maint_mbps", "trace"] + TUNABLES)
    assert ours(tiered.mnt / "d") == []
    # getfattr -d reads every listed name: each one reads
    for n in FILE_NAMES:
        get(f, n)
    for n in ["status", "stats", "maint_mbps"] + TUNABLES:
        get(tiered.mnt, n)
    # not there: ENODATA, on a file, a directory and the root
    assert errno_of(get, f, "nope") == "ENODATA"
    assert errno_of(get, f, "flush") == "ENODATA"          # actions only write
    assert errno_of(get, tiered.mnt / "d", "cached_bytes") == "ENODATA"
    assert errno_of(get, tiered.mnt, "cached_bytes") == "ENODATA"
    # an array without a tier has no tunables; a file's names read zeros
    u = make_array("raid0", 2, "64K", sub="plain")
    u.mount()
    write_pieces(u.mnt / "g", 64 * K, 64 * K)
    assert ours(u.mnt) == ["maint_mbps", "stats", "status"]
    assert get(u.mnt, "maint_mbps") == "0"           # the array's own: no tier needed
    put(u.mnt, "maint_mbps", "25.5")
    assert get(u.mnt, "maint_mbps") == "25.5"
    assert errno_of(put, u.mnt, "maint_mbps", "100001") == "EINVAL"
    assert "maint_mbps=100001" in status(u.mnt)["ctl_error"]
    assert errno_of(get, u.mnt, "dirty_low") == "ENODATA"
    assert get(u.mnt / "g", "cached_bytes") == "0"
    assert get(u.mnt / "g", "heat") == "none"
    assert get(u.mnt / "g", "residency") == ""
    assert get(u.mnt / "g", "layout") .startswith("raid0 chunk=65536 members=2 rotation=")


def test_file_counters_residency_flush_and_evict(tiered):
    f = tiered.mnt / "f"
    data_before = None
    write_pieces(f, 1 * M, 64 * K)           # 16 writes into 4 extents
    assert get(f, "cached_bytes") == str(1 * M)
    assert get(f, "dirty_bytes") == str(1 * M)
    assert get(f, "extents") == "4" and get(f, "dirty_extents") == "4"
    assert (get(f, "write_misses"), get(f, "write_hits")) == ("4", "12")
    assert get(f, "residency") == f"0 {M} dirty\n"
    assert get(f, "last_bypass") == "none"
    fd = os.open(f, os.O_RDONLY)
    data_before = os.pread(fd, 1 * M, 0)
    os.close(fd)
    assert int(get(f, "read_hits")) >= 1 and get(f, "read_misses") == "0"
    assert get(f, "heat") in ("hot", "warm")
    # a file's flush: nothing of it dirty after, every byte still there
    put(f, "flush")
    assert get(f, "dirty_bytes") == "0" and get(f, "dirty_extents") == "0"
    assert get(f, "residency") == f"0 {M} clean\n"
    assert cst(tiered.mnt)["dirty_bytes"] == 0
    # a partly cached extent shows as runs: an 8K write into a fresh one
    g = tiered.mnt / "g"
    write_pieces(g, 8 * K, 8 * K)
    fd = os.open(g, os.O_WRONLY)
    os.pwrite(fd, b"z" * (8 * K), 64 * K)
    os.close(fd)
    assert get(g, "residency") == f"0 {8 * K} dirty\n{64 * K} {8 * K} dirty\n"
    # evict: flushed, then out of the tier; the data reads back from the RAID
    put(f, "evict")
    assert (get(f, "cached_bytes"), get(f, "extents"), get(f, "residency")) == ("0", "0", "")
    assert get(f, "heat") == "none"
    with open(f, "rb") as h:
        assert h.read() == data_before
    put(g, "evict")
    assert get(g, "cached_bytes") == "0"
    with open(g, "rb") as h:
        got = h.read()
    assert got[:8 * K] == bytes([0]) * (8 * K) and got[64 * K:] == b"z" * (8 * K)
    assert cst(tiered.mnt)["dirty_bytes"] == 0


def test_request_counters_and_last_bypass(tiered):
    m = tiered.mnt
    before = cst(m)
    f = m / "f"
    write_pieces(f, 256 * K, 256 * K)        # one write, one fresh extent: a miss
    with open(f, "rb") as h:
        h.read(4 * K)
    s = cst(m)
    assert s["write_req_misses"] - before["write_req_misses"] == 1
    assert s["read_req_hits"] - before["read_req_hits"] >= 1
    assert float(s["read_hit_ratio"]) > 0
    # write-around: a write to a file the tier does not hold goes around it
    put(m, "cache_mode", "writearound")
    g = m / "g"
    write_pieces(g, 64 * K, 64 * K)
    assert get(g, "last_bypass").startswith("mode 20")
    assert get(g, "write_misses") == "1" and get(g, "cached_bytes") == "0"
    put(m, "cache_mode", "writeback")
    # a sequential stream past the cutoff (1M here) in whole rows bypasses
    put(m, "seq_cutoff", "1M")
    h = m / "h"
    write_pieces(h, 4 * M, 256 * K)
    assert get(h, "last_bypass").startswith("sequential 20")
    # reset: the tier's counters start again
    put(m, "reset")
    s = cst(m)
    assert s["read_req_hits"] == s["write_req_misses"] == s["write_misses"] == 0


def test_root_stats_are_the_status_as_json(tiered):
    m = tiered.mnt
    write_pieces(m / "f", 512 * K, 64 * K)
    doc = json.loads(get(m, "stats"))
    st = status(m)
    assert doc["uuid"] == st["uuid"] and doc["level"] == "raid5"
    assert doc["members"] == 3 and doc["chunk"] == 65536
    assert doc["cache"]["mode"] == "writeback"
    assert doc["cache"]["dirty_bytes"] == 512 * K
    assert doc["cache"]["write_req_misses"] >= 2
    assert doc["cache"]["value"] == str(tiered.tmp.parent / "cache")
    assert isinstance(doc["cache"]["read_hit_ratio"], float)
    assert doc["member"]["0"]["value"].startswith("in_sync ")
    assert doc["member"]["0"]["write_bytes"] >= 0 and "latency_us" in doc["member"]["0"]
    # a user reads the counters but not the paths, as with the status
    r = as_user(lambda: os.getxattr(".", P + "stats").decode(), str(m), uid=ALICE, gid=ALICE)
    assert isinstance(r, str), r
    udoc = json.loads(r)
    assert udoc["cache"]["value"] == "-" and udoc["member"]["0"]["value"] == "in_sync -"
    assert udoc["cache"]["dirty_bytes"] == 512 * K


def test_tunables_set_and_refused(tiered):
    m = tiered.mnt
    put(m, "dirty_low", "30")
    put(m, "dirty_high", "90\n")             # echo's newline is taken
    put(m, "promote_threshold", "3")
    put(m, "seq_cutoff", "2M")
    assert [get(m, n) for n in ["dirty_low", "dirty_high", "promote_threshold", "seq_cutoff"]] \
        == ["30", "90", "3", str(2 * M)]
    s = cst(m)
    assert (s["dirty_low"], s["dirty_high"], s["promote_threshold"], s["seq_cutoff"]) == \
        (30, 90, 3, 2 * M)
    put(m, "cache_mode", "writethrough")
    assert get(m, "cache_mode") == "writethrough" and cst(m)["mode"] == "writethrough"
    put(m, "cache_mode", "writeback")
    # bad values: EINVAL, the value unchanged, the reason in the status
    for name, value in [("dirty_low", "95"), ("dirty_high", "20"), ("promote_threshold", "65536"),
                        ("seq_cutoff", "2T"), ("dirty_low", "x"), ("cache_mode", "fast"),
                        ("dirty_low", "")]:
        assert errno_of(put, m, name, value) == "EINVAL", (name, value)
    assert (get(m, "dirty_low"), get(m, "dirty_high")) == ("30", "90")
    assert errno_of(put, m, "dirty_low", "95") == "EINVAL"
    assert "dirty_low" in status(m)["ctl_error"] and "dirty_high (90)" in status(m)["ctl_error"]
    # names that only read, unknown names, removing
    assert errno_of(put, m, "stats") == "EPERM"
    assert errno_of(put, m, "status") == "EPERM"
    assert errno_of(put, m, "nope") == "EINVAL"
    assert errno_of(os.removexattr, str(m), P + "dirty_low") == "EPERM"
    f = m / "f"
    write_pieces(f, 64 * K, 64 * K)
    assert errno_of(put, f, "cached_bytes") == "EPERM"
    assert errno_of(put, f, "pin_everything") == "EINVAL"
    assert errno_of(put, f, "dirty_low", "30") == "EINVAL"   # a root name on a file
    assert errno_of(os.removexattr, str(f), P + "residency") == "EPERM"
    assert errno_of(put, m / "f", "flush") is None


def test_two_users(tiered):
    m = tiered.mnt

    def as_(uid, fn):
        return as_user(fn, str(m), uid=uid, gid=uid)

    # alice's private file: bob cannot read its statistics (the kernel's
    # read permission, as for any user.* name), alice can
    assert as_(ALICE, lambda: write_pieces("secret", 256 * K, 64 * K) or True) is True
    os.chmod(m / "secret", 0o600)
    assert as_(BOB, lambda: os.getxattr("secret", P + "dirty_bytes").decode()) == \
        ("err", "EACCES")
    assert as_(ALICE, lambda: os.getxattr("secret", P + "dirty_bytes").decode()) == \
        str(256 * K)
    # a file bob may write but does not own: no flush or evict for him
    assert as_(ALICE, lambda: write_pieces("shared", 256 * K, 64 * K) or True) is True
    os.chmod(m / "shared", 0o666)
    assert as_(BOB, lambda: os.setxattr("shared", P + "flush", b"1")) == ("err", "EPERM")
    assert "owner" in status(m)["ctl_error"]
    assert get(m / "shared", "dirty_bytes") == str(256 * K)
    # the owner may, and root may
    assert as_(ALICE, lambda: os.setxattr("shared", P + "flush", b"1")) is None
    assert get(m / "shared", "dirty_bytes") == "0"
    put(m / "secret", "evict")
    assert get(m / "secret", "cached_bytes") == "0"
    # the array's settings are root's, even where the root is writable
    assert as_(ALICE, lambda: os.setxattr(".", P + "dirty_low", b"10")) == ("err", "EPERM")
    assert as_(ALICE, lambda: os.setxattr(".", P + "reset", b"1")) == ("err", "EPERM")
    assert as_(ALICE, lambda: os.setxattr(".", P + "maint_mbps", b"1")) == ("err", "EPERM")
    assert as_(ALICE, lambda: os.setxattr(".", P + "ctl", b"flush")) == ("err", "EPERM")
    assert get(m, "dirty_low") == "20"
    assert as_(ALICE, lambda: os.getxattr(".", P + "dirty_low").decode()) == "20"


def test_copies_with_xattrs_still_work(tiered, tmp_path):
    """cp -a copies every listed user.* name: inside the mount the copy's
    own tierfs names refuse the set, which cp -a passes over (as on a
    filesystem without xattrs), and the copy is whole; the user's own
    names go with it."""
    m = tiered.mnt
    write_pieces(m / "f", 300 * K, 100 * K)
    os.setxattr(str(m / "f"), "user.mine", b"kept")
    r = subprocess.run(["cp", "-a", str(m / "f"), str(m / "g")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (m / "g").read_bytes() == (m / "f").read_bytes()
    assert os.getxattr(str(m / "g"), "user.mine") == b"kept"
    assert get(m / "g", "cached_bytes") == str(300 * K)      # its own, not f's copied


def tierctl(*args, uid=None):
    pre = None
    if uid is not None:
        def pre():
            os.setgid(uid)
            os.setuid(uid)
    return subprocess.run([str(BUILD / "tierctl"), *map(str, args)], capture_output=True,
                          text=True, preexec_fn=pre)


def test_tierctl_reads_and_sets_the_attributes(tiered):
    m = tiered.mnt
    (m / "d").mkdir()
    write_pieces(m / "d" / "big", 1 * M, 64 * K)
    write_pieces(m / "d" / "small", 256 * K, 64 * K)
    write_pieces(m / "d" / "empty", 0, 64 * K)
    r = tierctl("stats", m, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cache"]["dirty_bytes"] == 1 * M + 256 * K
    r = tierctl("status", m, "--json")                # the same document
    assert r.returncode == 0 and json.loads(r.stdout)["level"] == "raid5", r.stdout
    r = tierctl("files", m)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].split()[:3] == ["in", "the", "tier"], r.stdout
    assert lines[1].endswith("/d/big") and " 1 MiB" in lines[1]
    assert lines[1].split()[4] in ("hot", "warm")
    assert lines[2].endswith("/d/small") and "256 KiB" in lines[2]
    assert len(lines) == 3                   # the empty file holds nothing
    assert tierctl("files", m, "1").stdout.splitlines()[-1] == "(1 more)"
    assert tierctl("files", m, "x").returncode == 2
    r = tierctl("flush", m / "d" / "big")
    assert r.returncode == 0 and r.stdout.endswith(f"/d/big: flushed, 1 MiB\n"), r.stdout
    assert get(m / "d" / "big", "dirty_bytes") == "0"
    r = tierctl("flush", m / "d" / "big")
    assert r.returncode == 0 and r.stdout.endswith("flushed, nothing was dirty\n"), r.stdout
    assert tierctl("evict", m / "d" / "small").returncode == 0
    assert get(m / "d" / "small", "cached_bytes") == "0"
    assert tierctl("set", m, "dirty_high", "85").returncode == 0
    assert get(m, "dirty_high") == "85"
    r = tierctl("set", m, "dirty_high", "5")
    assert r.returncode == 1 and "dirty_high=5" in r.stderr and str(m) in r.stderr, r.stderr
    r = tierctl("set", m, "nope", "5")
    assert r.returncode == 1 and "nope" in r.stderr, r.stderr
    r = tierctl("set", m, "dirty_high", "70", uid=ALICE)
    assert r.returncode == 1 and ("not permitted" in r.stderr or "Permission denied" in r.stderr), \
        r.stderr
    r = tierctl("--version")
    assert r.returncode == 0 and r.stdout.startswith("tierctl ")
    r = tierctl("stats", m, "--jsn")
    assert r.returncode == 2 and "--jsn" in r.stderr


def test_counters_survive_a_remount_and_windows_show(tiered):
    m = tiered.mnt
    mount = tiered.mounts[-1]
    write_pieces(m / "f", 512 * K, 64 * K)
    with open(m / "f", "rb") as h:           # 4 requests of 128K: hits
        for _ in range(4):
            h.read(128 * K)
    s = status(m)
    hits, wmiss = int(s["cache.total.read_req_hits"]), int(s["cache.total.write_req_misses"])
    assert hits >= 4 and wmiss == 2, s
    assert float(s["cache.read_hit_ratio_5m"]) == 1.0
    assert float(s["cache.read_hit_ratio_1h"]) == 1.0
    assert float(s["cache.read_hit_ratio_1d"]) == 1.0
    assert float(s["cache.read_hit_ratio_total"]) == 1.0
    mount.remount()
    s = status(m)
    assert int(s["cache.read_req_hits"]) == 0                   # since this mount
    assert int(s["cache.total.read_req_hits"]) == hits          # since the cache was made
    assert int(s["cache.total.write_req_misses"]) == wmiss
    assert float(s["cache.read_hit_ratio_1d"]) > 0.99           # the window came along
    # misses after the remount move the windows and the total alike
    put(m / "f", "evict")
    with open(m / "f", "rb") as h:
        h.read(128 * K)
    s = status(m)
    misses = int(s["cache.total.read_req_misses"])     # the kernel's readahead may add one
    assert misses >= 1 and int(s["cache.read_req_misses"]) == misses
    assert float(s["cache.read_hit_ratio_5m"]) == pytest.approx(hits / (hits + misses), abs=1e-3)
    assert float(s["cache.read_hit_ratio_total"]) == round(hits / (hits + misses), 4)
    doc = json.loads(get(m, "stats"))
    assert doc["cache"]["total"]["read_req_hits"] == hits
    # a reset is kept too
    put(m, "reset")
    mount.remount()
    s = status(m)
    assert int(s["cache.total.read_req_hits"]) == 0 and float(s["cache.read_hit_ratio_1d"]) == 0


def test_pinned_files_stay_in_the_tier(tiered):
    """A pin loads the file, keeps it through a load that churns the tier
    and across a remount, within a cap of half the tier; unpin lets it go."""
    m = tiered.mnt
    f = m / "keep"
    write_pieces(f, 1 * M, 256 * K)
    want = f.read_bytes()
    put(f, "evict")
    assert get(f, "cached_bytes") == "0" and get(f, "pinned") == "0"
    assert "pinned" in ours(f)
    r = tierctl("pin", f)
    assert r.returncode == 0, r.stderr
    assert get(f, "pinned") == "1" and get(f, "cached_bytes") == str(1 * M)    # loaded
    s = cst(m)
    assert (s["pinned_files"], s["pin_reserved_extents"], s["pin_cap_extents"]) == (1, 4, 32)
    assert errno_of(put, f, "evict") == "EBUSY"
    # churn: 48 MiB through a 16 MiB tier, written then read twice
    put(m, "promote_threshold", "1")
    for i in range(3):
        write_pieces(m / f"churn{i}", 16 * M, 1 * M)
    for _ in range(2):
        for i in range(3):
            (m / f"churn{i}").read_bytes()
    assert cst(m)["evictions"] > 0
    assert get(f, "cached_bytes") == str(1 * M)
    tiered.mounts[-1].remount()
    assert get(f, "pinned") == "1" and get(f, "cached_bytes") == str(1 * M)
    assert cst(m)["pin_reserved_extents"] == 4
    assert f.read_bytes() == want
    # over the cap (32 extents of 256K): refused, nothing changed
    big = m / "big"
    write_pieces(big, 8 * M, 1 * M)      # 32 extents, with 4 reserved: over
    assert errno_of(put, big, "pinned", "1") == "ENOSPC"
    assert get(big, "pinned") == "0" and "32 extents" in status(m)["ctl_error"]
    assert errno_of(put, f, "pinned", "yes") == "EINVAL"
    # unpin: evictable again; a removed pinned file's pin goes with it
    assert tierctl("unpin", f).returncode == 0
    assert get(f, "pinned") == "0" and cst(m)["pinned_files"] == 0
    put(f, "evict")
    assert get(f, "cached_bytes") == "0"
    put(f, "pinned", "1")
    assert cst(m)["pinned_files"] == 1
    os.unlink(f)
    assert cst(m)["pinned_files"] == 0 and cst(m)["pin_reserved_extents"] == 0


def test_member_io_counters(make_array):
    """Each member's reads, writes and bytes in the status and the JSON: a
    RAID5 x3 written in whole rows carries the data and half as much
    parity, spread over the three."""
    a = make_array("raid5", 3, "64K")
    a.mount()
    fd = os.open(a.mnt / "f", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, 4 * M)
    buf.write(os.urandom(4 * M))
    assert os.pwrite(fd, buf, 0) == 4 * M
    os.fsync(fd)
    os.close(fd)
    s = status(a.mnt)
    written = sum(int(s[f"member.{k}.write_bytes"]) for k in range(3))
    assert written == 6 * M, s
    assert all(int(s[f"member.{k}.writes"]) > 0 for k in range(3))
    assert sum(int(s[f"member.{k}.syncs"]) for k in range(3)) >= 3
    assert all(int(s[f"member.{k}.errors"]) == 0 for k in range(3))
    doc = json.loads(get(a.mnt, "stats"))
    assert doc["member"]["1"]["write_bytes"] == int(s["member.1.write_bytes"])
    assert doc["member"]["1"]["value"].startswith("in_sync ")


PROM_LINE = re.compile(r'^(tierfs_[a-z0-9_]+)\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)+)\} (-?[0-9.]+)$')


def test_tierctl_views(tiered, make_array):
    """status in units with what the array can still lose, list, the
    Prometheus textfile lines, top, and wait with nothing to wait for."""
    m = tiered.mnt
    write_pieces(m / "f", 2 * M, 256 * K)
    r = tierctl("status", m)
    assert r.returncode == 0
    assert "chunk 64 KiB: optimal, can lose 1 member\n" in r.stdout, r.stdout
    assert "2 MiB dirty" in r.stdout and "over 5 min" in r.stdout, r.stdout
    assert re.search(r"member 0 +in_sync +read +\S+ \S+ +written", r.stdout), r.stdout
    # a second array, uncached and degraded
    u = make_array("raid5", 3, "64K", sub="plain")
    u.mount(expect_errors=True)
    assert tierctl("fail", u.mnt, 1).returncode == 0
    r = tierctl("status", u.mnt)
    assert "degraded, 1 failed, can lose 0 more" in r.stdout, r.stdout
    r = tierctl("list")
    rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:]}
    assert r.returncode == 0 and r.stdout.startswith("MOUNTPOINT"), r.stdout
    assert rows[str(m)][2:5] == ["raid5", "UUU", "optimal"] and "writeback," in rows[str(m)]
    assert rows[str(u.mnt)][2:5] == ["raid5", "U_U", "degraded"] and rows[str(u.mnt)][5] == "none"
    # Prometheus: every line parses, each metric's lines together, both mounts
    r = tierctl("stats", m, u.mnt, "--prometheus")
    assert r.returncode == 0, r.stderr
    names, seen = [], set()
    for line in r.stdout.splitlines():
        g = PROM_LINE.match(line)
        assert g, line
        if not names or names[-1] != g.group(1):
            assert g.group(1) not in seen, f"{g.group(1)} is split"
            seen.add(g.group(1))
            names.append(g.group(1))
    assert f'tierfs_cache_dirty_bytes{{mount="{m}",' in r.stdout
    assert re.search(rf'tierfs_member_state{{mount="{u.mnt}",uuid="[-0-9a-f]+",member="1",'
                     r'state="failed"} 1', r.stdout), r.stdout
    assert re.search(r'tierfs_health\{[^}]*state="degraded"\} 1', r.stdout)
    assert re.search(r'tierfs_member_write_bytes\{[^}]*member="2"\} \d+', r.stdout)
    # top, one frame
    r = tierctl("top", m, "--interval", "0.2", "--count", "1")
    assert r.returncode == 0 and "reads/s" in r.stdout and "hits" in r.stdout, r.stdout
    assert len([l for l in r.stdout.splitlines() if re.match(r"^[0-2] ", l)]) == 3
    assert tierctl("top", m, "--count", "x").returncode == 2
    # wait with no job
    r = tierctl("wait", m)
    assert r.returncode == 0 and r.stdout.startswith("no job running on "), r.stdout


def test_tierctl_leaves_other_filesystems_alone(tiered, tmp_path):
    """tierctl's commands that set attributes check first that the path is
    on a tierfs mount: on another filesystem they used to leave a plain
    user.tierfs.* attribute behind and exit 0.  A refused file action
    gives the daemon's reason, read from the mount's root."""
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    for args in [("pin", plain), ("evict", plain), ("flush", plain),
                 ("set", tmp_path, "dirty_high", "80"), ("scrub", tmp_path)]:
        r = tierctl(*args)
        assert r.returncode == 1 and "not on a tierfs mount" in r.stderr, (args, r)
    assert [n for n in os.listxattr(plain) + os.listxattr(tmp_path)
            if n.startswith("user.tierfs.")] == []
    f = tiered.mnt / "f"
    write_pieces(f, 256 * K, 64 * K)
    assert tierctl("pin", f).returncode == 0
    r = tierctl("evict", f)
    assert r.returncode == 1 and "pinned (unpin it first)" in r.stderr, r.stderr


def read_trace(path):
    """The records of a trace file (include/tierfs/trace.h), sorted by time."""
    raw = pathlib.Path(path).read_bytes()
    magic, version, size = struct.unpack_from("<QII", raw, 0)
    assert magic == 0x3130435254534654 and version == 1 and size == 32, (magic, version, size)
    assert (len(raw) - 16) % 32 == 0
    recs = [struct.unpack_from("<QQQIBBH", raw, 16 + i * 32) for i in range((len(raw) - 16) // 32)]
    return sorted(recs)


def test_trace_records_every_request(tiered, tmp_path):
    """Issue 16's trace recorder: tierctl trace MNT start FILE, requests,
    stop: the file holds one record per read, write and sync the tier saw,
    with the file's identity, offset, length, direct and hit flags, and a
    write that went to the RAID rather than into the tier flagged so
    (TFS_TR_AROUND, 8: what a replay sets beside its model's writes)."""
    m = tiered.mnt
    out = tmp_path / "t.trace"
    f = m / "f"
    write_pieces(f, 256 * K, 256 * K)
    fid = int(os.getxattr(str(f), P + "cache").decode().split("\n")[0].split("=")[1])
    r = tierctl("trace", m, "start", out)
    assert r.returncode == 0 and str(out) in r.stdout, r
    assert get(m, "trace") == f"on {out} 0"
    assert "trace" in ours(m)
    assert errno_of(put, m, "trace", f"start {tmp_path}/other") == "EBUSY"
    fd = os.open(f, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, 8 * K)
    try:
        os.pwritev(fd, [memoryview(buf)[:8 * K]], 64 * K)          # W 64K+8K, a hit
        os.preadv(fd, [memoryview(buf)[:4 * K]], 128 * K)          # R, a hit
        os.fdatasync(fd)
        os.fsync(fd)
        put(m, "cache_mode", "writearound")
        os.pwritev(fd, [memoryview(buf)[:8 * K]], 512 * K)         # W around the tier
        put(m, "cache_mode", "writeback")
    finally:
        os.close(fd)
    r = tierctl("trace", m, "stop")
    assert r.returncode == 0 and f"off {out} " in r.stdout, r
    recs = [x for x in read_trace(out) if x[1] == fid]
    ops = [(chr(op), off, ln, flags) for _, _, off, ln, op, flags, _ in recs]
    assert ("W", 64 * K, 8 * K, 3) in ops, ops                     # direct, hit
    assert ("R", 128 * K, 4 * K, 3) in ops, ops
    assert ("D", 0, 0, 0) in ops and ("S", 0, 0, 0) in ops, ops
    assert ("W", 512 * K, 8 * K, 9) in ops, ops                    # direct, around
    assert [o[0] for o in ops].index("W") < [o[0] for o in ops].index("R")
    n = int(get(m, "trace").split()[2])
    assert n == len(read_trace(out)) >= 4
    # refusals: an existing file, a relative path, stop with none running
    assert errno_of(put, m, "trace", f"start {out}") == "EEXIST"
    assert errno_of(put, m, "trace", "start rel/path") == "EINVAL"
    assert errno_of(put, m, "trace", "stop") == "EINVAL"
    assert errno_of(put, m, "trace", "go") == "EINVAL"
    # a user neither sees nor sets it (it names a path)
    assert as_user(lambda: os.getxattr(".", P + "trace"), str(m), uid=ALICE, gid=ALICE) == \
        ("err", "ENODATA")
    assert "user.tierfs.trace" not in as_user(lambda: os.listxattr("."), str(m), uid=ALICE,
                                              gid=ALICE)
    # a running trace ends with the mount, its records written
    out2 = tmp_path / "t2.trace"
    assert tierctl("trace", m, "start", out2).returncode == 0
    f.read_bytes()
    tiered.mounts[-1].remount()
    assert len(read_trace(out2)) >= 1 and get(m, "trace") == "off"


def test_trace_records_the_cuts(tiered, tmp_path):
    """A truncate, a punch and an unlink end extents' lives in the tier
    (cut.c), so the trace records them (TFS_TR_CUT 'C'; TFS_TR_TO_END, 4:
    to the file's end), for a replay to drop them too (cache_sim; before,
    a replay kept a deleted file's extents, dirty ones destaged, to the
    end).  A file the tier holds nothing of is recorded too: a replay at
    another size may hold it."""
    m = tiered.mnt
    out = tmp_path / "t.trace"
    f, g = m / "f", m / "g"
    write_pieces(f, 1024 * K, 256 * K)
    fid = int(os.getxattr(str(f), P + "cache").decode().split("\n")[0].split("=")[1])
    assert tierctl("trace", m, "start", out).returncode == 0
    os.truncate(f, 700 * K)
    r = subprocess.run(["fallocate", "-p", "-o", str(256 * K), "-l", str(256 * K), str(f)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    os.unlink(f)
    g.write_bytes(b"")                              # nothing of it in the tier
    gid = int(os.getxattr(str(g), P + "cache").decode().split("\n")[0].split("=")[1])
    os.unlink(g)
    assert tierctl("trace", m, "stop").returncode == 0
    cuts = [(off, ln, flags) for _, fi, off, ln, op, flags, _ in read_trace(out)
            if op == ord("C") and fi == fid]
    assert cuts == [(700 * K, 0, 4), (256 * K, 256 * K, 0), (0, 0, 4)], cuts
    others = [x[1:4] + x[5:6] for x in read_trace(out) if x[4] == ord("C") and x[1] != fid]
    assert others == [(gid, 0, 0, 4)], (others, gid)
