"""Full member filesystems: every member on its own small tmpfs, filled through
the mount until ENOSPC.  The application must see ENOSPC (not EIO, not a dead
daemon), no member may be failed for it, the write-intent cleaner must survive
(it once died of SIGBUS in the journal's sparse map), every acknowledged byte
must read back, with the array whole and with any member missing (a write that
failed half way once left RAID5 parity stale), scrub must be clean, and writes
must work again once space is freed."""
import errno
import os
import random
import shutil
import subprocess
import time

import pytest

from conftest import Mount, mkfs
from test_raid import status, tierctl

K = 1024


def sh(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


class FullArray:
    """An array whose members are small tmpfs mounts; close() stops every
    daemon first, then unmounts the tmpfs (lazily if still busy)."""

    def __init__(self, tmp, level, n, chunk, size):
        self.tmp = tmp
        self.members = [tmp / f"m{k}" for k in range(n)]
        self.tmpfs = []
        self.mounts = []
        self.mnt = tmp / "mnt"
        for k, m in enumerate(self.members):
            m.mkdir()
            # sizes differ, so one member refuses writes the others take
            r = sh("mount", "-t", "tmpfs", "-o", f"size={size + k * 384 * K}", "tmpfs", m)
            assert r.returncode == 0, r.stderr
            self.tmpfs.append(m)
        mkfs(self.members, level, chunk)

    def mount(self, members=None, **kw):
        m = Mount(members or self.members, self.mnt, **kw)
        self.mounts.append(m)
        return m.start()

    def close(self):
        for m in self.mounts:
            m.stop()
        for d in self.tmpfs:
            if sh("umount", d).returncode != 0:
                sh("umount", "-l", d)


@pytest.fixture
def full_array(tmp_path):
    arrays = []

    def factory(level, n, chunk="16K", size=4096 * K):
        d = tmp_path / f"a{len(arrays)}"
        d.mkdir()
        a = FullArray(d, level, n, chunk, size)
        arrays.append(a)
        return a

    yield factory
    for a in arrays:
        a.close()
    for a in arrays:
        for m in a.mounts:
            m.check_log()


def fill(mnt, seed):
    """Append writes of random sizes to a series of files until the array is
    full, then go on creating files and writing into them for a while (the
    journal takes every create, and a mark for every new bucket, on full
    filesystems).  Returns {name: acknowledged bytes} and the errnos seen."""
    rng = random.Random(seed)
    files, errs, refusals = {}, [], 0
    for i in range(10000):
        name = f"f{i:04d}"
        try:
            fd = os.open(mnt / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as e:
            errs.append(e.errno)
            refusals += 1
            if refusals >= 60:
                break
            continue
        acked = bytearray()
        try:
            # a few rows' worth per file, in pieces that straddle chunks
            for _ in range(rng.randrange(4, 40)):
                buf = rng.randbytes(rng.randrange(1, 12 * K))
                try:
                    n = os.write(fd, buf)
                except OSError as e:
                    errs.append(e.errno)
                    refusals += 1
                    break
                acked += buf[:n]
        finally:
            os.close(fd)
        files[name] = bytes(acked)
        if refusals >= 60:
            break
    return files, errs


def check_files(mnt, files, what, known=None):
    """Every acknowledged byte of each file reads back: all of files[name],
    or where known[name] (a mask) is set."""
    for name, data in files.items():
        got = (mnt / name).read_bytes()
        if got[:len(data)] == data:
            continue
        mask = known[name] if known else b"\1" * len(data)
        bad = [i for i in range(len(data)) if mask[i] and (i >= len(got) or got[i] != data[i])]
        assert not bad, (f"{what}: {name}: {len(bad)} acknowledged bytes read back wrong "
                         f"(of {len(data)}, file has {len(got)}), first at {bad[0]}")


def degraded_copies(tmp_path, members, missing, files, known=None):
    """Mount copies of the members without each set in missing; every
    acknowledged (known) byte must read back."""
    for gone in missing:
        copy = tmp_path / ("degraded-" + "-".join(map(str, gone)))
        given = []
        for k, src in enumerate(members):
            dst = copy / f"m{k}"
            dst.parent.mkdir(exist_ok=True)
            assert sh("cp", "-a", "--sparse=always", src, dst).returncode == 0
            if k not in gone:
                given.append(dst)
        d = Mount(given, copy / "mnt", expect_errors=True)
        try:
            d.start()
            assert "DEGRADED" in d.log()
            check_files(copy / "mnt", files, f"without member(s) {gone}", known)
        finally:
            d.stop()
        shutil.rmtree(copy)


@pytest.mark.parametrize("level,n,missing", [
    ("raid5", 4, [[0], [1], [2], [3]]),
    ("raid6", 4, [[0], [1], [2], [3], [0, 2], [1, 3]]),
    ("raid1", 2, [[0], [1]]),
])
def test_full_members_enospc_no_stale_redundancy(full_array, tmp_path, level, n, missing):
    """Members filled through the mount: ENOSPC to the application, the
    daemon and every member stay, and the redundancy of every row and copy
    a refused write touched still agrees with its data."""
    a = full_array(level, n)
    m = a.mount(expect_errors=False)
    files, errs = fill(a.mnt, seed=n)
    assert errs, "the array never filled up"
    assert set(errs) == {errno.ENOSPC}, f"errors other than ENOSPC: {errs}"
    assert sum(map(len, files.values())) > 1024 * K
    # the write-intent cleaner runs 2 s after the last write, then every second
    time.sleep(6)
    assert m.proc.poll() is None, "the daemon died: " + m.log()[-2000:]
    st = status(a.mnt)
    assert set(st["state"]) == {"U"}, f"a member was failed for ENOSPC: {st['state']}"
    check_files(a.mnt, files, "whole")
    r = tierctl("scrub", a.mnt, "--wait", check=False)
    assert r.returncode == 0 and "0 mismatches" in r.stdout, r.stdout + r.stderr
    # space comes back: writes work again
    victims = sorted(files)[:len(files) // 3]
    for name in victims:
        os.unlink(a.mnt / name)
        del files[name]
    again = os.urandom(64 * K)
    (a.mnt / "again").write_bytes(again)
    files["again"] = again
    check_files(a.mnt, files, "after freeing space")
    assert m.proc.poll() is None
    # remounted whole: the member files give the sizes now, so the bytes of
    # refused writes count too, and every copy and parity must agree
    m.remount()
    check_files(a.mnt, files, "remounted")
    r = tierctl("scrub", a.mnt, "--wait", check=False)
    assert r.returncode == 0 and "0 mismatches" in r.stdout, r.stdout + r.stderr
    m.stop()
    # every acknowledged byte also reads back with members missing: the
    # redundancy of every row and every copy agrees with its data
    degraded_copies(tmp_path, a.members, missing, files)


@pytest.mark.parametrize("level,n,missing", [
    ("raid5", 4, [[0], [1], [2], [3]]),
    ("raid6", 4, [[0], [1], [2], [3], [1, 2]]),
    ("raid1", 2, [[0], [1]]),
])
def test_refused_member_writes_are_undone(make_array, tmp_path, level, n, missing):
    """Writes a member refuses with ENOSPC after half of them landed (fault
    injection, so the reservation on full members does not prevent them):
    the copies or the parity of what the other members took are made to
    agree on the spot (mirrors: scrub is clean at once), or the rows keep
    their marks and the next mount resyncs them; no member fails, and every
    byte no refused write touched reads back, whole and degraded."""
    a = make_array(level, n, "16K")
    m = a.mount(env={"TIERFS_FAULT": "enospc_write=1:0.3,seed=7"}, expect_errors=True)
    rng = random.Random(n)
    files, known, errs = {}, {}, []
    for i in range(6):
        name = f"g{i}"
        data = bytearray(rng.randbytes(rng.randrange(40 * K, 200 * K)))
        files[name], known[name] = data, bytearray(len(data))
        with open(a.mnt / name, "wb") as f:
            f.truncate(len(data))       # a file of zeros, known as such
        known[name][:] = b"\1" * len(data)
        data[:] = bytes(len(data))
    for _ in range(300):
        name = f"g{rng.randrange(6)}"
        data, mask = files[name], known[name]
        off = rng.randrange(len(data))
        ln = min(rng.randrange(1, 24 * K), len(data) - off)
        buf = rng.randbytes(ln)
        fd = os.open(a.mnt / name, os.O_WRONLY)
        try:
            got = os.pwrite(fd, buf, off)
            data[off:off + got] = buf[:got]
            mask[off:off + got] = b"\1" * got
            if got < ln:
                mask[off + got:off + ln] = bytes(ln - got)
        except OSError as e:
            errs.append(e.errno)
            mask[off:off + ln] = bytes(ln)    # old or new bytes: not known
        finally:
            os.close(fd)
    assert errs and set(errs) == {errno.ENOSPC}, errs
    assert m.proc.poll() is None
    assert set(status(a.mnt)["state"]) == {"U"}
    check_files(a.mnt, files, "whole", known)
    if level == "raid1":
        r = tierctl("scrub", a.mnt, "--wait", check=False)
        assert r.returncode == 0 and "0 mismatches" in r.stdout, r.stdout + r.stderr
    bad = [l for l in m.log().splitlines() if ": error:" in l]
    assert all("the next mount resyncs" in l for l in bad), bad
    # without the fault: resync of what kept its marks, then all agrees
    m.remount(env={})
    check_files(a.mnt, files, "remounted", known)
    r = tierctl("scrub", a.mnt, "--wait", check=False)
    assert r.returncode == 0 and "0 mismatches" in r.stdout, r.stdout + r.stderr
    m.stop()
    degraded_copies(tmp_path, a.members, missing, files, known)
