"""Fault injection at the member seam (TIERFS_FAULT): EIO on a share of reads
or on every write of a member, a member dying in the middle of a workload,
and a power cut that drops every change not fsynced.  Only on levels without
redundancy (jbod, raid0), where a member's EIO is the application's EIO."""
import errno
import mmap
import os
import pathlib

import pytest

from conftest import Mount

KIB = 1024


def mount(a, env=None, expect_errors=False):
    """Mount a on a mountpoint of its own: conftest names a Mount's log after
    its mountpoint, so two Mount objects on one mountpoint share a log file
    and a clean mount would be blamed for the faulty one's errors."""
    m = Mount(a.members, a.tmp / f"mnt{len(a.mounts)}", env=env, expect_errors=expect_errors)
    a.mounts.append(m)
    m.start()
    m.path = pathlib.Path(m.mnt)
    return m


def direct_reads(path, count, bs=4 * KIB):
    """O_DIRECT reads of block i for i in range(count) (one member read each,
    no kernel cache): the list of errnos, 0 for a good read."""
    buf = mmap.mmap(-1, bs)
    out = []
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        for i in range(count):
            try:
                assert os.preadv(fd, [buf], i * bs) == bs
                out.append(0)
            except OSError as e:
                out.append(e.errno)
    finally:
        os.close(fd)
    return out


def fill(a, name, size):
    m = mount(a)
    data = os.urandom(size)
    (m.path / name).write_bytes(data)
    m.stop()
    return data


def test_eio_read_fails_that_share_of_reads(make_array):
    a = make_array("jbod", 1)
    fill(a, "f", 400 * 4 * KIB)
    runs = {}
    for seed in (7, 7, 8):
        m = mount(a, env={"TIERFS_FAULT": f"eio_read=0:0.5,seed={seed}"}, expect_errors=True)
        res = direct_reads(m.path / "f", 400)
        m.stop()
        assert set(res) <= {0, errno.EIO}
        assert 100 <= res.count(errno.EIO) <= 300, res.count(errno.EIO)
        runs.setdefault(seed, []).append(res)
        assert "fault: EIO on member 0 read" in m.log()
    assert runs[7][0] == runs[7][1], "the same seed must fail the same reads"
    assert runs[7][0] != runs[8][0]


def test_eio_read_spares_other_members_and_writes(make_array):
    a = make_array("raid0", 2, "4K")
    data = fill(a, "f", 64 * KIB)
    mnt = mount(a, env={"TIERFS_FAULT": "eio_read=1"}, expect_errors=True).path
    res = direct_reads(mnt / "f", 16)
    assert res.count(errno.EIO) == 8 and res.count(0) == 8   # chunks alternate members
    with open(mnt / "f", "r+b") as fh:
        assert os.pwrite(fh.fileno(), data[:8 * KIB], 0) == 8 * KIB


def test_eio_write_always(make_array):
    a = make_array("raid0", 2, "4K")
    data = fill(a, "f", 64 * KIB)
    mnt = mount(a, env={"TIERFS_FAULT": "eio_write=1"}, expect_errors=True).path
    with open(mnt / "f", "r+b", buffering=0) as fh:
        for _ in range(20):
            with pytest.raises(OSError) as e:     # 8K: one chunk on each member
                os.pwrite(fh.fileno(), b"x" * 8 * KIB, 0)
            assert e.value.errno == errno.EIO
        # of two 4K chunks exactly one is on member 0, and its write lands
        ok = []
        for off in (0, 4 * KIB):
            try:
                ok.append(os.pwrite(fh.fileno(), b"y" * 4 * KIB, off) == 4 * KIB)
            except OSError as e:
                assert e.errno == errno.EIO
                ok.append(False)
        assert sorted(ok) == [False, True]
    assert direct_reads(mnt / "f", 16) == [0] * 16       # reads are untouched
    got = (mnt / "f").read_bytes()
    good = 0 if ok[0] else 4 * KIB
    bad = 4 * KIB - good
    assert got[good:good + 4 * KIB] == b"y" * 4 * KIB
    assert got[bad:bad + 4 * KIB] == data[bad:bad + 4 * KIB]
    assert got[8 * KIB:] == data[8 * KIB:]


def test_fail_after_kills_member_mid_workload(make_array):
    a = make_array("raid0", 2, "4K")
    fill(a, "f", 64 * KIB)
    # each 8K write is one member write on each member: member 1 dies with
    # the 10th member write, the second half of application write 5
    m = mount(a, env={"TIERFS_FAULT": "fail_after=write:10:1"}, expect_errors=True)
    results = []
    with open(m.path / "f", "r+b", buffering=0) as fh:
        for i in range(10):
            try:
                results.append(os.pwrite(fh.fileno(), bytes([i]) * 8 * KIB, i * 8 * KIB))
            except OSError as e:
                results.append(-e.errno)
    assert results == [8 * KIB] * 5 + [-errno.EIO] * 5
    assert "fault: member 1 dies after write #10" in m.log()
    # the member stays dead: its reads fail, member 0's still work
    res = direct_reads(m.path / "f", 16)
    assert res.count(errno.EIO) == 8 and res.count(0) == 8


def direct_write(path, data, off, sync):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        buf = mmap.mmap(-1, len(data))
        buf[:] = data
        assert os.pwritev(fd, [buf], off) == len(data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write(path, data, off, sync, mode="r+b"):
    with open(path, mode, buffering=0) as fh:
        assert os.pwrite(fh.fileno(), data, off) == len(data)
        if sync:
            os.fsync(fh.fileno())


@pytest.mark.parametrize("trigger", ["mkdirat:1", "write:20"],
                         ids=["crash-after-unsynced-write", "crash-inside-unsynced-write"])
def test_power_cut_keeps_fsynced_drops_unsynced(make_array, trigger):
    """4-member RAID0, 4K chunks: A (64K, 16 member writes) is fsynced, B
    (64K over A's second half and beyond) is not; the crash comes after B
    or in its middle (member write 20).  After remount: exactly A."""
    a = make_array("raid0", 4, "4K")
    m = mount(a, env={"TIERFS_FAULT": f"drop_unsynced,crash_after={trigger}"},
                expect_errors=True)
    f = m.path / "f"
    A, B = os.urandom(64 * KIB), os.urandom(64 * KIB)
    write(f, A, 0, sync=True, mode="wb")
    with pytest.raises(OSError) as e:
        write(f, B, 32 * KIB, sync=False)
        os.mkdir(m.path / "d")
    assert e.value.errno in (errno.ECONNABORTED, errno.ENOTCONN)
    m.wait_dead()
    assert "fault: power cut: undid" in m.log()

    assert (mount(a).path / "f").read_bytes() == A


def test_power_cut_undoes_truncate_direct_io_and_unsynced_files(make_array):
    a = make_array("raid0", 3, "4K")
    m = mount(a, env={"TIERFS_FAULT": "drop_unsynced,crash_after=mkdirat:1"},
                expect_errors=True)
    mnt = m.path
    C, D, E = os.urandom(40 * KIB), os.urandom(48 * KIB), os.urandom(20 * KIB)
    write(mnt / "trunc", C, 0, sync=True, mode="wb")
    os.truncate(mnt / "trunc", 5000)                  # unsynced shrink
    # O_DIRECT writes go through the members' O_DIRECT twins, the fsync
    # through the buffered fds: the same member files
    direct_write(mnt / "direct", D, 0, sync=True)
    direct_write(mnt / "direct", os.urandom(16 * KIB), 16 * KIB, sync=False)
    write(mnt / "never", E, 0, sync=False, mode="wb")  # created, never synced
    with pytest.raises(OSError):
        os.mkdir(mnt / "d")
    m.wait_dead()

    mnt = mount(a).path
    # the shrink is durable although never fsynced: on more than one
    # member a truncate syncs the members before its intent goes (ns.c)
    assert (mnt / "trunc").read_bytes() == C[:5000]
    assert (mnt / "direct").read_bytes() == D
    assert (mnt / "never").exists() and (mnt / "never").stat().st_size == 0


def test_crash_without_drop_unsynced_keeps_everything(make_array):
    """crash_after alone is a process crash: the page cache survives."""
    a = make_array("raid0", 2, "4K")
    m = mount(a, env={"TIERFS_FAULT": "crash_after=mkdirat:1"}, expect_errors=True)
    data = os.urandom(24 * KIB)
    write(m.path / "f", data, 0, sync=False, mode="wb")
    with pytest.raises(OSError):
        os.mkdir(m.path / "d")
    m.wait_dead()
    assert (mount(a).path / "f").read_bytes() == data


def test_identity_read_error_is_not_taken_for_no_identity(make_array):
    """attr.c target_stat: the lookup's open of a file failing (EIO, once)
    gave the file identity 0 for as long as its inode lived, so on RAID0 its
    chunks were read (and would have been written) at another file's
    rotation: wrong bytes, no error.  Now the lookup fails with the error
    and the next one reads the identity.  Three files cover every rotation."""
    a = make_array("raid0", 3, "4K")
    m = mount(a)
    files = {f"f{i}": os.urandom(48 * KIB) for i in range(3)}
    for n, b in files.items():
        (m.path / n).write_bytes(b)
    m.stop()
    for n, b in files.items():
        m = mount(a, env={"TIERFS_FAULT": f"eio_at=openat:{n}:1"}, expect_errors=True)
        try:
            os.stat(m.path / n)
        except OSError as e:
            assert e.errno == errno.EIO, e
        assert (m.path / n).read_bytes() == b, f"{n}: wrong bytes after a failed lookup"
        assert "fault: EIO on member" in m.log(), "the fault was not injected"
        m.stop()


def test_member_io_counters_see_the_errors(make_array):
    """The status's per-member I/O counters (member/iostat.c, above the
    fault wrapper) count each member's reads and the ones that failed."""
    a = make_array("raid0", 2, "4K")
    fill(a, "f", 64 * KIB)
    mnt = mount(a, env={"TIERFS_FAULT": "eio_read=1"}, expect_errors=True).path
    res = direct_reads(mnt / "f", 16)
    assert res.count(errno.EIO) == 8
    st = dict(l.split("=", 1) for l in
              os.getxattr(str(mnt), "user.tierfs.status").decode().splitlines())
    assert int(st["member.1.errors"]) == 8 and int(st["member.1.reads"]) == 8
    assert int(st["member.0.errors"]) == 0 and int(st["member.0.reads"]) == 8
    assert int(st["member.0.read_bytes"]) == 8 * 4 * KIB
    assert int(st["member.1.read_bytes"]) == 0
    assert float(st["member.0.latency_us"]) > 0
    assert st["member.0"].startswith("in_sync ")      # the state line stays as it was
