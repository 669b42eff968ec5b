"""Mount options: every numeric option has a range and is refused outside it
(exit 1, one line naming the option and its range, nothing mounted, nothing
created, no member touched), an option that needs another one is refused
without it, the ends of every range mount, the README documents the ranges
the daemon enforces, and a refused mount leaves no cache directory behind.
The superblock rule of assembly (super.c invariant 4) is tested on real
arrays at the end; tests/unit/test_assemble.c tests it on simulated
histories."""
import mmap
import os
import pathlib
import re
import subprocess

import pytest

from conftest import BUILD, ROOT, Array, mounted
from test_cli import daemon_pids, msg_lines, try_mount, tree_state
from test_cache import copts, cst, flush, fcache, pwrite, read_all, refused, same

K = 1024


def snapshot(base):
    """Every path below base (members included, with their contents)."""
    base = pathlib.Path(base)
    return tree_state([base / d for d in sorted(os.listdir(base)) if d != "mnt"])


@pytest.fixture(scope="module")
def arr(tmp_path_factory):
    """One RAID1 x2 for every refusal: a refused mount changes nothing."""
    base = tmp_path_factory.mktemp("opts")
    a = Array(base, "raid1", 2, "64K")
    (base / "mnt").mkdir()
    return a


def refuse(a, opts, code=2):
    """Mount with opts (a list of -o strings); it must be refused with exit
    code (2: the command line is wrong; 1: a path it names cannot be used)
    and one line, and leave everything as it was. Returns the line."""
    before = snapshot(a.tmp)
    r = try_mount(a.members, a.mnt, opts=opts, timeout=4)
    lines = msg_lines(r.stderr, "tierfs")
    assert r.returncode == code, f"exit {r.returncode}, want {code}:\n{r.stderr}"
    assert len(lines) == 1, f"want one 'tierfs:' line, got:\n{r.stderr}"
    assert r.stderr.strip() == lines[0], f"other output:\n{r.stderr}"
    assert not mounted(a.mnt) and daemon_pids(a.mnt) == []
    assert snapshot(a.tmp) == before, "a refused mount changed or created files"
    return lines[0]


# Every numeric option with values outside its range, and the range the
# refusal must name. cache_* need cache=DIR and hdd_* need member_model:
# given (the cache directory does not exist and must not be made).
WITH = {"cache": ["cache={tmp}/cache"], "hdd": ["member_model=hdd7200"]}
RANGES = [
    ("max_threads", None, "1 to 1024", ["abc", "-1", "0", "1025", "16x", "+16", "1e3",
                                        "99999999999999999999", ""]),
    ("max_idle_threads", None, "0 to 1024", ["-1", "1025", "x"]),
    ("attr_timeout", None, "0 to 86400", ["-1", "86401", "soon", "nan", "inf", "0x10"]),
    ("entry_timeout", None, "0 to 86400", ["soon", "-0.5"]),
    ("dir_cache", None, "1 to 65536", ["0", "65537", "-4", "4k"]),
    ("maint_mbps", None, "0 to 100000", ["-1", "100001", "fast", "1e400"]),
    ("max_read", None, "4096 to 1048576", ["0", "4095", "1048577", "-1"]),
    ("hdd_seek_ms", "hdd", "0.8 to 100", ["0", "0.5", "101", "-8"]),
    ("hdd_rpm", "hdd", "1000 to 20000", ["-1", "0", "999", "20001", "7200.5"]),
    ("hdd_mbps", "hdd", "0.001 to 2000", ["0", "0.0009", "-180", "2001"]),
    ("hdd_ncq", "hdd", "1 to 256", ["0", "300", "-1"]),
    ("cache_size", "cache", "64K to 2P", ["1K", "0", "-1G", "3P", "1Q"]),
    ("cache_extent", "cache", "4K to 1M", ["2K", "2M", "-256K"]),
    ("cache_seq_cutoff", "cache", "0 to 1T", ["-1", "2T", "4MM"]),
    ("cache_promote", "cache", "0 to 65535", ["-1", "65536", "x"]),
    ("cache_halflife", "cache", "1 to 604800", ["-1", "0", "0.5", "604801"]),
    ("cache_dirty_low", "cache", "0 to 99", ["-1", "100"]),
    ("cache_dirty_high", "cache", "1 to 100", ["0", "101"]),
    ("miss_threads", "cache", "1 to 1024", ["-1", "0", "1025"]),
    ("hit_ring", "cache", "0 to 1", ["5", "-1", "yes"]),
]
CASES = [(name, need, rng, v) for name, need, rng, vals in RANGES for v in vals]


@pytest.mark.parametrize("name,need,rng,value", CASES,
                         ids=[f"{c[0]}={c[3]}" for c in CASES])
def test_out_of_range_refused(arr, name, need, rng, value):
    extra = [o.format(tmp=arr.tmp) for o in WITH.get(need, [])]
    line = refuse(arr, extra + [f"{name}={value}"])
    assert f"{name}={value}" in line and rng in line, line
    assert not (arr.tmp / "cache").exists()


@pytest.mark.parametrize("opt,needs", [
    ("cache_size=1G", "cache="), ("cache_extent=64K", "cache="), ("cache_mode=writeback", "cache="),
    ("cache_policy=lru", "cache="), ("cache_promote=3", "cache="), ("cache_halflife=30", "cache="),
    ("cache_dirty_low=10", "cache="), ("cache_dirty_high=90", "cache="),
    ("cache_seq_cutoff=0", "cache="), ("miss_threads=8", "cache="), ("hit_ring=0", "cache="),
    ("hdd_ncq=4", "member_model"), ("hdd_rpm=5400", "member_model"),
    ("hdd_seek_ms=12", "member_model"), ("hdd_mbps=100", "member_model"),
])
def test_option_without_the_one_it_needs_refused(arr, opt, needs):
    line = refuse(arr, [opt])
    assert opt in line and needs in line, line


@pytest.mark.parametrize("opts,words", [
    (["cache={tmp}/cache", "cache_extent=5K"], ["cache_extent=5K", "power of two"]),
    (["cache={tmp}/cache", "cache_size=64K", "cache_extent=64K"], ["cache_size=64K", "16 extents"]),
    (["cache={tmp}/cache", "cache_dirty_low=50", "cache_dirty_high=40"], ["low < high"]),
    (["cache={tmp}/cache", "cache_mode=fast"], ["cache_mode=fast"]),
    (["cache={tmp}/cache", "cache_policy=mru"], ["cache_policy=mru"]),
    (["member_model=floppy"], ["member_model", "floppy"]),
    (["blksize=4096"], ["blksize", "block-device"]),
    (["blkdev"], ["blkdev", "block-device"]),
    (["fsname="], ["fsname=", "no name"]),
    (["log="], ["log=", "no file"]),
    (["log={tmp}/none/tierfs.log"], ["log={tmp}/none/tierfs.log", "No such file"]),
    (["log={tmp}"], ["log={tmp}", "Is a directory"]),
])
def test_other_bad_options_refused(arr, opts, words):
    path = any(w in ("No such file", "Is a directory") for w in words)   # a log= that fails
    line = refuse(arr, [o.format(tmp=arr.tmp) for o in opts], code=1 if path else 2)
    for w in words:
        assert w.format(tmp=arr.tmp) in line, line
    assert not (arr.tmp / "cache").exists()


def test_bad_mountpoint_refused_before_the_members(tmp_path):
    a = Array(tmp_path, "raid1", 2, "64K")
    before = snapshot(tmp_path)
    r = try_mount(a.members, tmp_path / "none" / "mnt", create=False)
    assert r.returncode == 1 and "none/mnt" in r.stderr, r.stderr
    (tmp_path / "file").write_bytes(b"")
    before = snapshot(tmp_path)
    r = try_mount(a.members, tmp_path / "file", create=False)
    assert r.returncode == 1 and "not a directory" in r.stderr, r.stderr
    assert snapshot(tmp_path) == before


def test_range_ends_mount(make_array, tmp_path):
    """The ends of every range are accepted and in effect."""
    a = make_array("raid1", 2, "64K")
    cdir = tmp_path / "cache"
    m = a.mount(opts=["max_threads=1024", "max_idle_threads=0", "attr_timeout=86400",
                      "dir_cache=1", "maint_mbps=0", "max_read=4096",
                      f"cache={cdir}", "cache_size=64K", "cache_extent=4K",
                      "cache_promote=65535", "cache_halflife=604800", "cache_dirty_low=0",
                      "cache_dirty_high=100", "cache_seq_cutoff=0", "miss_threads=1",
                      "hit_ring=0", "member_model=hdd7200", "hdd_ncq=256", "hdd_rpm=20000",
                      "hdd_seek_ms=0.8", "hdd_mbps=2000"])
    s = cst(a.mnt)
    assert (s["promote_threshold"], s["dirty_low"], s["dirty_high"], s["seq_cutoff"]) == \
        (65535, 0, 100, 0), s
    data = os.urandom(300 * K)
    pwrite(os.path.join(a.mnt, "f"), 0, data, sync=True)
    same(read_all(os.path.join(a.mnt, "f")), data, "through the mount")
    assert "NCQ depth 256" in m.log() and "20000 rpm" in m.log(), m.log()
    m.stop()
    m = a.mount(opts=["max_threads=1", "attr_timeout=0", "dir_cache=65536",
                      "maint_mbps=100000", "max_read=1048576", "max_idle_threads=1024",
                      f"cache={cdir}", "cache_promote=1", "cache_halflife=1",
                      "cache_dirty_low=99", "cache_dirty_high=100", "cache_seq_cutoff=1T",
                      "miss_threads=1024", "hit_ring=1", "member_model=hdd7200",
                      "hdd_ncq=1", "hdd_rpm=1000", "hdd_seek_ms=100", "hdd_mbps=1"])
    same(read_all(os.path.join(a.mnt, "f")), data, "after a remount at the other ends")
    m.stop()
    m = a.mount(opts=["member_model=hdd7200", "hdd_mbps=0.001"])   # 1 KB/s: no reads
    assert "0 MB/s" in m.log(), m.log()
    m.stop()


def test_max_read_serves(make_array):
    """max_read used to pass libfuse's mount and then end the session at
    init ("init() and fuse_session_new() requested different maximum read
    size"): the daemon exited right after mounting."""
    a = make_array("raid0", 2, "64K")
    m = a.mount(opts=["max_read=8192"])
    data = os.urandom(1 << 20)
    with open(os.path.join(a.mnt, "f"), "wb") as f:
        f.write(data)
    fd = os.open(os.path.join(a.mnt, "f"), os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, 1 << 20)
        assert os.readv(fd, [buf]) == 1 << 20
        assert bytes(buf) == data
    finally:
        os.close(fd)
    assert m.proc.poll() is None, m.log()
    m.stop()


def test_readme_documents_the_enforced_ranges():
    """Every numeric option's row in README's option table gives the range
    its refusal names."""
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`([a-z_]+)[=`]", line)
        if m:
            rows[m.group(1)] = line
    for name, _, rng, _ in RANGES:
        assert name in rows, f"{name} has no row in README's option table"
        assert rng in rows[name], f"README's row for {name} does not say {rng}: {rows[name]}"


# ---------------------------------------------------------------- the cache directory

def test_refused_mount_leaves_no_cache_directory(make_array, tmp_path):
    """A mount refused after the cache was set up (dirty data that lives in
    another cache) used to leave the directory it made; so did a read-only
    mount that could not use the cache."""
    a = make_array("raid1", 2, "64K")
    cdir = tmp_path / "cache"
    m = a.mount(opts=copts(cdir, dirty_low=90, dirty_high=95))
    pwrite(os.path.join(a.mnt, "f"), 0, b"d" * 64 * K, sync=True)
    assert fcache(os.path.join(a.mnt, "f"))["dirty_bytes"] == 64 * K
    m.kill()
    other = tmp_path / "other"
    msg = refused(a, copts(other))
    assert "cache_discard" in msg, msg
    assert not other.exists(), f"the refused mount left {other}: {os.listdir(other)}"
    # an existing empty directory stays, and empty
    other.mkdir()
    refused(a, copts(other))
    assert other.is_dir() and os.listdir(other) == []
    other.rmdir()
    m = a.mount(opts=copts(cdir))
    flush(a.mnt)
    m.stop()
    # read-only: a cache that is not the array's is not used, and not made
    m = a.mount(opts=["ro"] + copts(other))
    assert not other.exists(), "a read-only mount made a cache directory"
    m.stop()


def test_discard_message_tells_the_truth(make_array, tmp_path):
    """cache_discard over a corrupt cache: the line after the files that
    lost data used to say the cache had no dirty data."""
    a = make_array("raid0", 2, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    pwrite(os.path.join(a.mnt, "f"), 0, b"y" * 8 * K, sync=True)
    assert fcache(os.path.join(a.mnt, "f"))["dirty_bytes"] == 8 * K
    m.kill()
    (cdir / "meta" / "data.mdb").write_bytes(os.urandom(64 * K))
    m = a.mount(opts=opts + ["cache_discard"], expect_errors=True)
    log = m.log()
    assert "/f lost the writes" in log, log
    made = [l for l in log.splitlines() if "made anew" in l]
    assert len(made) == 1, log
    assert "no dirty data" not in made[0] and "given up" in made[0], made[0]
    m.stop()


# ---------------------------------------------------------------- assembly (super.c invariant 4)

def sb_path(member):
    return pathlib.Path(member) / ".tierfs" / "superblock"


def sb_get(member, key):
    for line in sb_path(member).read_text().splitlines():
        if line.startswith(key + "="):
            return line.split("=", 1)[1]
    raise KeyError(key)


def sb_set(member, key, value):
    p = sb_path(member)
    p.write_text("".join(f"{key}={value}\n" if l.startswith(key + "=") else l + "\n"
                         for l in p.read_text().splitlines()))


def array_with_file(make_array, level="raid5", n=4):
    a = make_array(level, n, "64K")
    m = a.mount()
    data = os.urandom(700 * K)
    pwrite(os.path.join(a.mnt, "f"), 0, data, sync=True)
    m.stop()
    return a, data


def test_lone_wrong_counter_is_outvoted(make_array):
    """One member's events counter a little above the others' (the member
    states agree): the three that agree are believed, the odd one is named,
    and every member stays in use. It used to call the three stale ("3 of 4
    members are missing or failed") and refuse."""
    a, data = array_with_file(make_array)
    e = int(sb_get(a.members[0], "events"))
    sb_set(a.members[3], "events", e + 2)
    m = a.mount(expect_errors=True)
    st = status_raw(a.mnt)
    assert st["state"] == "UUUU", st
    odd = [l for l in m.log().splitlines() if "warning" in l and "event" in l]
    assert len(odd) == 1 and str(a.members[3]) in odd[0] and "index 3" in odd[0], m.log()
    assert not any(str(a.members[i]) + " " in m.log() for i in range(3)), m.log()
    same(read_all(os.path.join(a.mnt, "f")), data, "after the outvoted counter")
    m.stop()
    counts = {sb_get(x, "events") for x in a.members}
    assert len(counts) == 1 and int(counts.pop()) > e + 2, "superblocks not brought in line"
    m = a.mount()                   # and nothing to say about it any more
    assert "event" not in m.log(), m.log()
    m.stop()


def test_lone_counter_too_far_ahead_named(make_array):
    """A counter far above the others' could also mean the others are old
    disks put back: its count is believed (nothing is used that may have
    missed writes) and the refusal names that member, not the others."""
    a, _ = array_with_file(make_array)
    e = sb_get(a.members[0], "events")
    sb_set(a.members[3], "events", 999)
    before = tree_state(a.members)
    r = try_mount(a.members, a.mnt, timeout=10)
    lines = msg_lines(r.stderr, "tierfs")
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    line = lines[0]
    assert f"member {a.members[3]} (index 3) alone says event 999" in line, line
    assert f"set its events= to {e}" in line, line
    assert tree_state(a.members) == before
    sb_set(a.members[3], "events", e)          # what the message says to do
    m = a.mount()
    m.stop()


@pytest.mark.parametrize("level,n", [("raid5", 4), ("raid1", 3)])
def test_stale_member_with_a_raised_counter_is_not_used(make_array, level, n):
    """A member failed (it missed writes) whose counter is then raised above
    the others': its own view calls every member in sync, but the members in
    use call it failed, and failures are never outvoted. It used to be
    believed and the good members called stale: RAID5 x4 refused, and RAID1
    x3 mounted on the stale member alone and read the old data."""
    a, old = array_with_file(make_array, level, n)
    m = a.mount(expect_errors=True)          # the failure is logged as an error
    tierctl_fail(a.mnt, 2)
    new = os.urandom(700 * K)
    pwrite(os.path.join(a.mnt, "f"), 0, new, sync=True)
    m.stop()
    want = "UU_U"[:n] if n == 4 else "UU_"
    e = int(sb_get(a.members[0], "events"))
    assert sb_get(a.members[0], "state") == want and int(sb_get(a.members[2], "events")) < e
    sb_set(a.members[2], "events", e + 1)
    m = a.mount(expect_errors=True)
    assert status_raw(a.mnt)["state"] == want
    same(read_all(os.path.join(a.mnt, "f")), new, "member 2 missed these writes")
    assert "index 2" in m.log(), m.log()
    m.stop()


def test_record_cut_short_costs_no_member(make_array):
    """A crash while a member failure is recorded leaves the record on the
    first member only: the others missed the record, not data, and stay in
    use; the failed member stays failed. It used to call the ones that missed
    the record stale (RAID5 x4 then had three failed members: refused)."""
    a, _ = array_with_file(make_array)
    saved = {i: sb_path(a.members[i]).read_text() for i in (1, 3)}
    m = a.mount(expect_errors=True)          # the failure is logged as an error
    tierctl_fail(a.mnt, 2)
    new = os.urandom(700 * K)
    pwrite(os.path.join(a.mnt, "f"), 0, new, sync=True)
    m.stop()
    for i, text in saved.items():               # the record reached member 0 only
        sb_path(a.members[i]).write_text(text)
    m = a.mount(expect_errors=True)
    assert status_raw(a.mnt)["state"] == "UU_U"
    same(read_all(os.path.join(a.mnt, "f")), new, "with the record cut short")
    m.stop()
    assert {sb_get(x, "events") for x in (a.members[0], a.members[1], a.members[3])} == \
        {sb_get(a.members[0], "events")}


def status_raw(mnt):
    raw = os.getxattr(str(mnt), "user.tierfs.status").decode()
    return dict(l.split("=", 1) for l in raw.splitlines() if "=" in l)


def tierctl_fail(mnt, k):
    r = subprocess.run([str(BUILD / "tierctl"), "fail", str(mnt), str(k)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout
