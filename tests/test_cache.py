"""The SSD tier (write-back cache, -o cache=DIR) on a real mount.

Exact hit/miss/promotion accounting with O_DIRECT reads (one FUSE read per
pread, nothing absorbed by the page cache), the promotion threshold, the
sequential cutoff, write-back (dirty data stays off the members until it is
flushed), full-row destaging on RAID5, a tiny cache full of dirty data with
writers still going, S3-FIFO keeping a hot set through a cold scan (LRU for
comparison), run-time mode switches, model-checked random workloads in every
mode (then checked on the members through an uncached mount and against the
independent layout of test_model.py), repeated SIGKILL under a write-back
workload, a lost / corrupt / foreign cache directory, a warm cache after a
clean remount, truncate / punch / unlink / rename / link on cached data, and
detach.
"""
import contextlib
import ctypes
import ctypes.util
import errno
import mmap
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib

import pytest

from conftest import FID_XATTR, mounted, run_threads
from test_model import PyLayout

K = 1024
M = 1024 * K
CTL = "user.tierfs.ctl"
STATUS = "user.tierfs.status"
FILE_XATTR = "user.tierfs.cache"

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def status(mnt):
    raw = os.getxattr(str(mnt), STATUS).decode()
    return dict(line.split("=", 1) for line in raw.splitlines() if "=" in line)


def cst(mnt):
    """cache.* lines of the status, numbers as ints."""
    out = {}
    for k, v in status(mnt).items():
        if k == "cache" or k.startswith("cache."):
            k = k[6:] if k.startswith("cache.") else k
            out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def stripe(mnt):
    return {k[7:]: int(v) for k, v in status(mnt).items() if k.startswith("stripe.")}


def ctl(mnt, cmd):
    os.setxattr(str(mnt), CTL, cmd.encode())


def fcache(path):
    raw = os.getxattr(str(path), FILE_XATTR).decode()
    return {k: int(v) for k, v in (l.split("=", 1) for l in raw.splitlines() if "=" in l)}


def wait_until(fn, what, timeout=30.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def wait_clean(mnt, timeout=60.0):
    def ok():
        s = cst(mnt)
        return s if s["dirty_bytes"] == 0 and s["flush_pending"] == 0 else None
    try:
        return wait_until(ok, f"the cache of {mnt} to be clean", timeout)
    except AssertionError:      # the stats at the timeout, not at the call
        raise AssertionError(f"the cache of {mnt} never became clean: {cst(mnt)}") from None


def flush(mnt, timeout=60.0):
    ctl(mnt, "flush")
    return wait_clean(mnt, timeout)


def wait_stat(mnt, key, value, timeout=20.0):
    def ok():
        s = cst(mnt)
        return s if s[key] == value else None
    try:
        return wait_until(ok, f"cache.{key} == {value}", timeout)
    except AssertionError:
        raise AssertionError(f"cache.{key} never became {value}: {cst(mnt)}") from None


def copts(cdir, **kw):
    """-o options for a cache in cdir; cache_size defaults to 8M (not the
    1G default: the data file is preallocated)."""
    kw.setdefault("size", "8M")
    out = [f"cache={cdir}"]
    for k, v in kw.items():
        out.append(f"cache_{k}" if v is True else f"cache_{k}={v}")
    return out


def abuf(n):
    """A page-aligned buffer of n bytes (n rounded up to 4K)."""
    return mmap.mmap(-1, max(4096, (n + 4095) // 4096 * 4096))


def dread(fd, off, ln):
    b = abuf(ln)
    n = os.preadv(fd, [memoryview(b)[:ln]], off)
    out = bytes(b[:n])
    b.close()
    return out


def dwrite(fd, off, data):
    b = abuf(len(data))
    b[:len(data)] = data
    n = os.pwritev(fd, [memoryview(b)[:len(data)]], off)
    b.close()
    assert n == len(data), f"short O_DIRECT write {n} of {len(data)}"


def read_direct(path, off, ln):
    fd = os.open(str(path), os.O_RDONLY | os.O_DIRECT)
    try:
        return dread(fd, off, ln)
    finally:
        os.close(fd)


def write_direct(path, off, data, create=False):
    fd = os.open(str(path), os.O_RDWR | os.O_DIRECT | (os.O_CREAT if create else 0), 0o644)
    try:
        dwrite(fd, off, data)
    finally:
        os.close(fd)


def pwrite(path, off, data, create=True, sync=False):
    fd = os.open(str(path), os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    try:
        assert os.pwrite(fd, data, off) == len(data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def guard(fn, *args, timeout=20.0, what=None):
    """fn(*args) in a thread: a request that never comes back (a deadlock in
    the daemon) fails the test instead of hanging the suite (teardown then
    kills the daemon, which frees the thread)."""
    import threading
    box = {}

    def run():
        try:
            box["r"] = fn(*args)
        except BaseException as e:      # noqa: B902 - handed to the caller
            box["e"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"{what or getattr(fn, '__name__', fn)}{args} did not return in "
                    f"{timeout:.0f} s: the daemon is stuck")
    if "e" in box:
        raise box["e"]
    return box.get("r")


def unlink(path):
    guard(os.unlink, str(path))


def read_all(path):
    with open(str(path), "rb") as f:
        return f.read()


def same(got, want, what):
    if got == want:
        return
    n = min(len(got), len(want))
    d = next((i for i in range(n) if got[i] != want[i]), n)
    raise AssertionError(f"{what}: {len(got)} bytes, want {len(want)}; first difference at "
                         f"{d} (got {got[d:d + 8].hex()} want {want[d:d + 8].hex()})")


def punch(path, off, ln):
    fd = os.open(str(path), os.O_RDWR)
    try:
        if _libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, ln) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def prefill(a, files):
    """Write files through an uncached mount (so nothing is in any cache)."""
    m = a.mount()
    for name, data in files.items():
        pwrite(os.path.join(a.mnt, name), 0, data)
    m.stop()


def refused(a, opts):
    """A mount that must fail; returns its log."""
    with pytest.raises(RuntimeError) as ei:
        a.mount(opts=opts, expect_errors=True)
    assert not mounted(a.mnt)
    return str(ei.value)


def member_path(a, k, name):
    return os.path.join(str(a.members[k]), "root", name)


# ---------------------------------------------------------------------------
# 1-2. Exact read accounting and the promotion threshold
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("promote", [2, 3])
def test_read_accounting_and_promotion_threshold(make_array, tmp_path, promote):
    a = make_array("raid5", 3, "64K")
    data = random.Random(promote).randbytes(1 * M)
    prefill(a, {"f": data})
    a.mount(opts=copts(tmp_path / "cache", extent="64K", promote=promote, seq_cutoff=0,
                       halflife=3600))
    p = os.path.join(a.mnt, "f")
    E = 64 * K
    A = 3 * E
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    try:
        def rd(off, ln):
            same(dread(fd, off, ln), data[off:off + ln], f"read [{off}, +{ln})")

        for i in range(promote - 1):
            rd(A + i * 4 * K, 4 * K)
            s = cst(a.mnt)
            assert (s["read_misses"], s["read_hits"]) == (i + 1, 0), s
        s = wait_stat(a.mnt, "promote_backlog", 0)     # a promotion would be done
        assert s["promotions"] == 0 and s["cached_extents"] == 0, \
            f"promoted below the threshold {promote}: {s}"
        rd(A + 8 * K, 4 * K)        # the read that reaches the threshold
        s = wait_stat(a.mnt, "promotions", 1)
        assert s["read_misses"] == promote and s["read_hits"] == 0, s
        assert s["cached_extents"] == 1 and s["dirty_extents"] == 0, s
        assert fcache(p)["cached_bytes"] == E and fcache(p)["dirty_bytes"] == 0
        for off in (A, A + 60 * K, A + 20 * K):
            rd(off, 4 * K)
        s = cst(a.mnt)
        assert (s["read_hits"], s["read_misses"]) == (3, promote), s
        assert (s["read_hit_bytes"], s["read_miss_bytes"]) == (12 * K, promote * 4 * K), s
        # one request over the end of A and the start of B: one hit, one miss
        rd(A + E - 4 * K, 8 * K)
        # A whole, unaligned length inside it
        rd(A, E)
        rd(A + 4 * K + 0, 12 * K)
        s = cst(a.mnt)
        assert (s["read_hits"], s["read_misses"]) == (6, promote + 1), s
        # one reader at a time: every hit is read on the worker (the I/O
        # thread's hand-off pays only when other reads are under way)
        assert s["ring_hits"] == 0, s
        assert s["read_hit_bytes"] == 12 * K + 4 * K + E + 12 * K, s
        assert s["read_miss_bytes"] == promote * 4 * K + 4 * K, s
        time.sleep(0.3)
        s = cst(a.mnt)
        assert s["promotions"] == 1, s
        for k in ("promote_dropped", "seq_bypass", "evictions", "write_hits", "write_misses",
                  "write_around", "dirty_bytes"):
            assert s[k] == 0, f"cache.{k}: {s}"
    finally:
        os.close(fd)


@pytest.mark.parametrize("ring", [1, 0])
def test_concurrent_hits_through_the_ring(make_array, tmp_path, ring):
    """Cache hits from 8 threads at once, O_DIRECT and buffered, aligned and
    not, each checked: with hit_ring=1 the I/O thread reads and answers the
    ones inside an extent that overlap other reads (counted in
    cache.ring_hits), with hit_ring=0 the FUSE workers do, and the bytes are
    the same.  On /dev/fuse: on the io_uring transport the queues read the
    hits on their own rings (test_transport.py)."""
    import threading
    a = make_array("raid5", 3, "64K")
    data = random.Random(11).randbytes(2 * M + 1000)
    prefill(a, {"f": data})
    a.mount(opts=[f"hit_ring={ring}", "fuse_uring=off",
                  *copts(tmp_path / "cache", extent="64K", promote=1, seq_cutoff=0)])
    p = a.mnt / "f"
    for off in range(0, len(data), 64 * K):             # promote every extent
        read_direct(p, off, 4 * K)
    wait_stat(a.mnt, "cached_extents", (len(data) + 64 * K - 1) // (64 * K))
    base = cst(a.mnt)
    errors, counts, single = [], [0] * 8, [0] * 8

    def reader(t):
        rng = random.Random(t)
        fd = os.open(str(p), os.O_RDONLY | (os.O_DIRECT if t % 2 == 0 else 0))
        try:
            for _ in range(300):
                if t % 2 == 0:
                    off = rng.randrange(0, len(data) // 4096) * 4096
                    ln = rng.choice([4 * K, 8 * K, 64 * K])
                    got = dread(fd, off, ln)
                    single[t] += off // (64 * K) == (off + ln - 1) // (64 * K)
                else:
                    off = rng.randrange(0, len(data) - 1)
                    ln = rng.randrange(1, 100 * K)
                    got = os.pread(fd, ln, off)
                if got != data[off:off + ln]:
                    errors.append((t, off, ln))
                counts[t] += 1
        finally:
            os.close(fd)
    run_threads([(reader, (t,)) for t in range(8)], 60, "a reader")
    assert not errors, f"{len(errors)} reads returned wrong bytes, first {errors[0]}"
    assert sum(counts) == 2400
    s = cst(a.mnt)
    assert s["read_misses"] == base["read_misses"], s
    if ring:    # many O_DIRECT reads inside one extent overlap others
        # how many depends on the machine: 40-50% of them quiet, 30% with
        # a build running beside the suite on 2 cores (it failed at // 3)
        print("ring hits", s["ring_hits"] - base["ring_hits"], "of", sum(single))
        assert s["ring_hits"] - base["ring_hits"] >= sum(single) // 8 > 50, (sum(single), s)
    else:
        assert s["ring_hits"] == 0, s


def concurrent_writes(d, size, nthreads=8, per=200, seed=5):
    """nthreads writers at once, each into its own file d/fT of size bytes
    (written whole first; the kernel lets only one write of a file in at a
    time unless the open says otherwise): even ones O_DIRECT 4K writes,
    odd ones buffered writes of any length.  Returns {path: the bytes it
    must hold}."""
    import threading
    want, errors = {}, []
    for t in range(nthreads):
        want[d / f"f{t}"] = bytearray(random.Random(seed + t).randbytes(size))
        pwrite(d / f"f{t}", 0, bytes(want[d / f"f{t}"]))

    def writer(t):
        rng, p = random.Random(seed * 100 + t), d / f"f{t}"
        model = want[p]
        fd = os.open(str(p), os.O_RDWR | (os.O_DIRECT if t % 2 == 0 else 0))
        try:
            for _ in range(per):
                if t % 2 == 0:
                    off, data = rng.randrange(0, size // 4096) * 4096, rng.randbytes(4096)
                    dwrite(fd, off, data)
                else:
                    off = rng.randrange(0, size - 1)
                    data = rng.randbytes(rng.randrange(1, min(8192, size - off) + 1))
                    assert os.pwrite(fd, data, off) == len(data)
                model[off:off + len(data)] = data
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append((t, e))
        finally:
            os.close(fd)
    run_threads([(writer, (t,)) for t in range(nthreads)], 120, "a writer")
    assert not errors, errors
    return {p: bytes(b) for p, b in want.items()}


@pytest.mark.parametrize("transport", ["io_uring", "dev_fuse"])
def test_concurrent_write_back_writes_through_the_ring(make_array, tmp_path, transport,
                                                       module_uring):
    """Write-back writes from 8 threads at once: on the FUSE io_uring
    transport a queue writes the SSD on its own ring and answers the
    whole-sector ones that overlap other requests (write.c invariant 7,
    cache.ring_writes), on /dev/fuse the workers do; the bytes are the same
    through the mount, after a SIGKILL (every acknowledged write is back)
    and on the members once flushed."""
    module_uring(True)
    a = make_array("raid5", 3, "64K")
    opts = ["fuse_uring=" + ("on" if transport == "io_uring" else "off"),
            *copts(tmp_path / "cache", extent="64K", mode="writeback", size="8M")]
    m = a.mount(opts=opts)
    want = concurrent_writes(a.mnt, 256 * K)

    def check(what):
        for p, b in want.items():
            same(read_all(p), b, f"{p.name} {what}")
    s = cst(a.mnt)
    check("through the mount")
    if transport == "io_uring":
        print("ring writes", s["ring_writes"])
        assert s["ring_writes"] > 50, sorted(s.items())
        assert int(status(a.mnt)["fuse.ring_writes"]) == s["ring_writes"]
    else:
        assert s["ring_writes"] == 0, s
    assert s["dirty_bytes"] > 0, s          # the kill finds them in the tier
    m.kill()
    m = a.mount(opts=opts)
    check("after a SIGKILL")
    flush(a.mnt)
    m.stop()
    a.mount()
    check("on the members")


@pytest.mark.parametrize("kind", ["read", "write", "fsync", "throttled"])
def test_slow_requests_do_not_hold_up_hits(make_array, tmp_path, kind):
    """Requests that wait for the HDDs run on the miss pool (defer.c), not on
    a FUSE worker: with a single worker, cache hits are served while a slow
    one is in flight.  read: a miss of 1.3 s.  write: a write-through write
    of 1.3 s.  fsync: one queued behind that miss on the disk (the model
    makes it a barrier).  throttled: a write-back write into an extent the
    tier holds clean, held above the high watermark until the (slow)
    flusher has destaged an extent (write.c invariant 9)."""
    import threading
    a = make_array("jbod", 1)
    # 0.1 MB/s: 128K is 1.3 s of transfer, wherever the head is
    mbps, extra = "0.1", {}
    if kind == "throttled":     # 3 dirty extents of 128 reach the watermark;
        mbps = "0.005"          # each 4K destage takes the flusher 0.8 s
        extra = dict(extent="64K", dirty_low=1, dirty_high=2)
    a.mount(opts=["member_model=hdd7200", f"hdd_mbps={mbps}", "max_threads=1",
                  *copts(tmp_path / "cache", promote=1000, seq_cutoff=0, **extra)])
    hot, cold = a.mnt / "hot", a.mnt / "cold"
    data = random.Random(7).randbytes(4 * K if kind == "throttled" else 64 * K)
    write_direct(hot, 0, data, create=True)         # write-back: in the cache only
    with open(cold, "wb") as f:
        f.truncate(1 * M)                           # its reads go to the model
    if kind == "write":
        ctl(a.mnt, "cache_mode writethrough")       # flushes hot: it stays cached
        assert wait_clean(a.mnt)["mode"] == "writethrough"
    hfd = os.open(str(hot), os.O_RDWR | os.O_DIRECT)
    cfd = os.open(str(cold), os.O_RDWR | os.O_DIRECT)
    slow = []
    try:
        def run(what, fn):
            box = {"what": what}

            def go():
                t0 = time.monotonic()
                box["r"] = fn()
                box["t"] = time.monotonic() - t0
            box["thread"] = threading.Thread(target=go, daemon=True)
            slow.append(box)
            box["thread"].start()

        base = cst(a.mnt)
        if kind == "throttled":
            dwrite(cfd, 0, b"c" * (4 * K))
            flush(a.mnt)                            # hot and cold's first: clean
            for i in (1, 2, 3):                     # the watermark
                dwrite(cfd, i * M // 4, b"d" * (4 * K))
            base = cst(a.mnt)
            run("throttled write", lambda: dwrite(cfd, 0, b"t" * (4 * K)))
            time.sleep(0.05)                        # reaches the daemon and waits
        elif kind == "write":
            run("write-through write", lambda: dwrite(cfd, 0, b"w" * (128 * K)))
            # a fresh slot's (write.c invariant 12), or the RAID's only
            wait_until(lambda: cst(a.mnt)["write_misses"] + cst(a.mnt)["write_around"] >
                       base["write_misses"] + base["write_around"],
                       "the write to reach the daemon", timeout=5)
        else:
            run("miss", lambda: dread(cfd, 0, 128 * K))
            wait_until(lambda: cst(a.mnt)["read_misses"] > base["read_misses"],
                       "the miss to reach the daemon", timeout=5)
        if kind == "fsync":
            run("fsync", lambda: os.fsync(hfd))
            time.sleep(0.2)                         # reaches the daemon and waits
        for i in range(16):
            o = i * 4 * K % len(data)
            same(dread(hfd, o, 4 * K), data[o:o + 4 * K], f"hit {i}")
        for b in slow:
            assert b["thread"].is_alive(), \
                f"the hits waited for the {b['what']}: it ended first, after {b.get('t')} s"
        for b in slow:
            b["thread"].join(20)
            assert not b["thread"].is_alive(), f"the {b['what']} never came back"
        assert slow[0]["t"] >= 0.5, slow[0]
        s = cst(a.mnt)
        assert s["read_hits"] - base["read_hits"] == 16, s
        assert kind != "throttled" or s["throttled"] > base["throttled"], s
        if kind == "write":
            assert dread(cfd, 0, 128 * K) == b"w" * (128 * K)
        elif kind == "throttled":
            assert dread(cfd, 0, 4 * K) == b"t" * (4 * K)
        else:
            assert slow[0]["r"] == bytes(128 * K)
    finally:
        os.close(hfd)
        os.close(cfd)
        for b in slow:
            b["thread"].join(20)


# ---------------------------------------------------------------------------
# 3. Sequential cutoff
# ---------------------------------------------------------------------------

def simulate_seq(reqs, cutoff, E, promote):
    """The design's detector (per file: a run of back-to-back requests that
    reaches the cutoff is sequential) over reqs, nothing cached at the start
    and every promotion done before the next pass.  A stream's extent with a
    heat of 2 (and at the threshold) is promoted as any other (rules.c
    TFS_SEQ_HOT): read before, it is not a one-time scan's."""
    seq_next, seq_len = 0, 0
    heat, cached, queued = {}, set(), set()
    st = dict(read_misses=0, read_hits=0, seq_bypass=0, promotions=0)
    for off, ln in reqs:
        seq_len = seq_len + ln if seq_next == off else ln
        seq_next = off + ln
        seq = seq_len >= cutoff
        for idx in range(off // E, (off + ln - 1) // E + 1):
            heat[idx] = heat.get(idx, 0) + 1
            if idx in cached:
                st["read_hits"] += 1
                continue
            st["read_misses"] += 1
            if seq and heat[idx] < max(2, promote):
                st["seq_bypass"] += 1
            elif heat[idx] >= promote and idx not in queued:
                queued.add(idx)
        if off + ln >= reqs[-1][0] + reqs[-1][1]:   # end of a pass
            cached |= queued
    st["promotions"] = len(queued)
    return st


def test_a_reopened_file_is_read_from_the_page_cache(make_array, tmp_path):
    """Every byte of a file passes through the mount, so what the kernel
    cached at one open is still right at the next (FOPEN_KEEP_CACHE): later
    readers of a file cost the daemon nothing."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache"))
    p = pathlib.Path(a.mnt) / "f"
    data = os.urandom(1 * M)
    p.write_bytes(data)
    assert read_all(p) == data

    def reads():
        s = cst(a.mnt)
        return s["read_hit_bytes"] + s["read_miss_bytes"]
    before = reads()
    for _ in range(3):
        assert read_all(p) == data
    assert reads() == before


@pytest.mark.parametrize("promote", [2, 3])
def test_sequential_stream_bypasses_the_first_time(make_array, tmp_path, promote):
    """A stream past the cutoff goes around the tier while its extents are
    new to it (a backup, a scan); read again within the half-life it is
    promoted as any other read (once heat reaches 2 and the threshold),
    and then served from the tier.  Before, every pass of the stream went
    around: a large file read again and again never reached the tier."""
    a = make_array("raid0", 2, "64K")
    size = 16 * M
    data = random.Random(3).randbytes(size)
    prefill(a, {"big": data})
    a.mount(opts=copts(tmp_path / "cache", size="32M", extent="64K", seq_cutoff="1M",
                       halflife=3600, promote=promote))
    p = os.path.join(a.mnt, "big")
    R = 128 * K
    reqs = [(off, R) for off in range(0, size, R)]
    keys = ("read_misses", "read_hits", "seq_bypass", "promotions")
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    try:
        for pas in range(promote + 1):
            got = bytearray()
            for off, ln in reqs:
                got += dread(fd, off, ln)
            same(bytes(got), data, f"pass {pas}")
            want = simulate_seq(reqs * (pas + 1), 1 * M, 64 * K, promote)
            s = wait_stat(a.mnt, "promotions", want["promotions"])
            got = {k: s[k] for k in keys}
            assert got == want, f"pass {pas}: counters {got}, the design gives {want}"
            assert s["cached_extents"] == want["promotions"], s
    finally:
        os.close(fd)
    # the first pass went around from the 1M cutoff on (the request that
    # reached it, extents 14-15, included); the last was all hits
    assert simulate_seq(reqs, 1 * M, 64 * K, promote)["seq_bypass"] == size // (64 * K) - 14
    assert want["promotions"] == size // (64 * K) and want["read_hits"] == size // (64 * K)


# ---------------------------------------------------------------------------
# 4-5. Write-back, flush, full rows
# ---------------------------------------------------------------------------

def test_writeback_stays_off_members_until_flush(make_array, tmp_path):
    a = make_array("raid1", 2, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", extent="64K", dirty_low=90, dirty_high=95))
    p = os.path.join(a.mnt, "f")
    data = random.Random(4).randbytes(256 * K + 1000)
    t0 = time.time()
    pwrite(p, 0, data, sync=True)
    fc = fcache(p)
    s = cst(a.mnt)
    assert fc["dirty_bytes"] == 260 * K and fc["cached_bytes"] == 260 * K, fc
    assert s["dirty_bytes"] == 260 * K and s["dirty_extents"] == 5, s
    assert s["write_misses"] == 5 and s["flushed_bytes"] == 0, s
    same(read_direct(p, 0, len(data) + 4096), data, "read back (dirty)")
    assert os.stat(p).st_size == len(data)
    assert time.time() - t0 < 4, "too slow: the idle flush (5 s) may have run"
    for k in range(2):
        mb = read_all(member_path(a, k, "f"))
        assert mb[:len(data)] != data, f"member {k} has the data before any flush"
    s = flush(a.mnt)
    assert s["flushed_bytes"] == len(data) and s["dirty_extents"] == 0, s
    assert fcache(p)["dirty_bytes"] == 0 and fcache(p)["cached_bytes"] == 260 * K
    for k in range(2):
        same(read_all(member_path(a, k, "f")), data, f"member {k} after the flush")
    m.stop()
    a.mount()                       # uncached: allowed, nothing is dirty
    same(read_all(p), data, "uncached mount after the flush")
    assert cst(a.mnt)["cache"] == "none"


def test_a_flush_of_small_files_syncs_them_in_batches(make_array, tmp_path):
    """Flushing flat out, the flusher destages up to 16 files before the
    members sync and syncs them together (flush.c invariant 12): 40 small
    files take a few sync rounds, not 40 (before: one each, which kept a
    create-heavy load throttled).  Every file is still synced before it
    is clean, and the members hold all of them after."""
    a = make_array("raid5", 3, "16K")
    m = a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", dirty_low=90,
                           dirty_high=95))
    files = {f"s{i}": random.Random(i).randbytes(4096 + 512 * i) for i in range(40)}
    for name, data in files.items():
        pwrite(a.mnt / name, 0, data)
    s0 = cst(a.mnt)
    syncs0 = int(status(a.mnt)["raid.file_syncs"])
    assert s0["dirty_extents"] == 40 and s0["flushed_bytes"] == 0, s0
    s = flush(a.mnt)
    assert s["flushed_bytes"] == sum(map(len, files.values())), s
    assert int(status(a.mnt)["raid.file_syncs"]) - syncs0 == 40
    rounds = s["flush_syncs"] - s0["flush_syncs"]
    assert 3 <= rounds <= 8, f"{rounds} sync rounds for 40 files"
    m.stop()
    a.mount()                       # uncached: the members alone
    for name, data in files.items():
        same(read_all(a.mnt / name), data, f"{name}, uncached after the flush")


def test_the_paced_flusher_syncs_small_files_in_batches(make_array, tmp_path):
    """Between the watermarks the flusher paces itself and leaves extents
    written in the last 5 s alone; once the files are older it destages
    them in batches too, pausing per batch as long as it would have per
    file (flush.c invariant 12): a few sync rounds for 40 files, not 40.
    Reads keep the array busy (no idle flush)."""
    a = make_array("raid5", 3, "16K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", dirty_low=0,
                       dirty_high=95))
    for i in range(40):
        pwrite(a.mnt / f"s{i}", 0, bytes([i]) * 4096)
    pwrite(a.mnt / "busy", 0, b"b" * 4096)
    s0 = cst(a.mnt)
    deadline = time.time() + 40
    while cst(a.mnt)["dirty_extents"] > 1 and time.time() < deadline:
        read_direct(a.mnt / "busy", 0, 4096)
        time.sleep(0.1)
    s = cst(a.mnt)
    assert s["dirty_extents"] <= 1, s
    rounds = s["flush_syncs"] - s0["flush_syncs"]
    assert 1 <= rounds <= 10, f"{rounds} sync rounds for 40 files"
    for i in range(40):
        assert read_all(a.mnt / f"s{i}") == bytes([i]) * 4096


def destaged(paths):
    """The names of paths the tier holds clean (destaged, still cached),
    and every one's cache xattrs."""
    fc = {p.name: fcache(p) for p in paths}
    return [n for n, f in fc.items() if f["cached_bytes"] and not f["dirty_bytes"]], fc


def test_the_flusher_destages_the_oldest_files_first(make_array, tmp_path):
    """A batch takes the files whose oldest dirty extent was written
    longest ago (flush.c invariant 19), so what was just written stays
    dirty, and cached, longest.  64 slots: 50 empty files made, the 30 of
    the new group first (the lesser identities), then 20 old ones written
    4K each, a second later the new ones: at 42 dirty (65%, tfs_flush_flat)
    the flusher runs flat out, one batch of 16 files, and those are old
    ones (at 45, 70%, the writes meanwhile go around the tier: not
    cached).  Before, in identity
    order, they were the new group's first 16."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="256K", promote=2))
    new = [a.mnt / f"n{i}" for i in range(30)]
    old = [a.mnt / f"o{i}" for i in range(20)]
    for p in new + old:
        p.write_bytes(b"")
    t0 = time.time()
    for p in old:
        pwrite(p, 0, b"o" * 4096)
    time.sleep(1.0)
    for p in new:
        pwrite(p, 0, b"n" * 4096)
    assert cst(a.mnt)["slots"] == 64
    wait_until(lambda: cst(a.mnt)["dirty_extents"] <= 34, "a batch of 16", 3.0)
    assert time.time() - t0 < 4.5, "too slow: the old ones would be old enough anyway"
    clean, fc = destaged(new + old)
    assert len(clean) == 16 and all(n.startswith("o") for n in clean), (clean, fc)


def test_the_flusher_counts_a_files_age_from_its_last_write(make_array, tmp_path):
    """An extent written again is as young as its last write (index.c
    invariant 8: every write moves it to the dirty list's tail, and the
    flusher's look walks the list from its oldest).  64 slots: 17 files
    written, a second later 24 others, then the first 17 written again
    one by one over more than a second, then one more new file: at 42
    dirty (65%) the flusher runs flat out, one batch of 16 files, and
    those are of the 24, whose last write is the oldest.  With the list
    left in the order of first writes, the look took the 17 rewritten
    ones: their ages fell along the list, and it stopped at the 17th,
    younger than the 16 it had."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="256K", promote=2))
    first = [a.mnt / f"a{i}" for i in range(17)]
    mid = [a.mnt / f"b{i}" for i in range(24)]
    t0 = time.time()
    for p in first:
        pwrite(p, 0, b"a" * 4096)
    time.sleep(1.0)
    for p in mid:
        pwrite(p, 0, b"b" * 4096)
    for p in first:
        time.sleep(0.1)                           # ticks of 1/16 s apart
        pwrite(p, 4096, b"A" * 4096)
    pwrite(a.mnt / "last", 0, b"z" * 4096)
    assert cst(a.mnt)["slots"] == 64
    wait_until(lambda: cst(a.mnt)["dirty_extents"] <= 26, "a batch of 16", 3.0)
    assert time.time() - t0 < 5.5, "too slow: the 24 would be old enough anyway"
    clean, fc = destaged(first + mid)
    assert len(clean) == 16 and all(n.startswith("b") for n in clean), (clean, fc)
    for p in first:
        assert read_all(p) == b"a" * 4096 + b"A" * 4096


def test_the_flusher_runs_flat_out_before_dirty_high(make_array, tmp_path):
    """The flusher runs flat out from a tenth of the band below dirty_high
    (rules.h tfs_flush_flat: 65% at 20:70), young extents too, so the level
    stays under dirty_high, where writes needing a fresh slot go around the
    tier, while the RAID keeps up.  64 slots: 43 new files (67%) come down
    to the flat-out level, 41, within seconds.  Before, flat out only at
    dirty_high, the 43 stayed dirty until 5 s old (the paced flusher
    spares younger ones), and a burst of new files sat at 70% and went
    around (the maildir recording: 2,400-2,750 writes of 49 s).  The
    threshold is set (cache_promote=2), so the flusher spares every young
    extent, not only the hot ones (the tuner's choice)."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="256K", promote=2))
    t0 = time.time()
    for i in range(43):
        pwrite(a.mnt / f"m{i}", 0, bytes([i]) * 4096)
    assert cst(a.mnt)["slots"] == 64
    wait_until(lambda: cst(a.mnt)["dirty_extents"] <= 41, "the level under 65%", 3.0)
    assert time.time() - t0 < 4.5, "too slow to tell young from old"
    for i in range(43):
        assert read_all(a.mnt / f"m{i}") == bytes([i]) * 4096


def test_saves_by_rename_while_the_flusher_batches(make_array, tmp_path):
    """An editor's save: a new file written, then renamed over the old one,
    both dirty, while the flusher batches them.  The rename holds the moved
    file's inode lock while the tier drops the replaced one under its flush
    lock, and a batch takes inode locks under flush locks (cache_i.h lock
    order: safe because the flusher has its files open, so none of them is
    gone).  Saves and flushes race for a few seconds; every request must
    come back and every file hold its last save."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", dirty_low=0,
                       dirty_high=1),     # the flusher flat out all the time
            env={"TIERFS_FAULT": "delay=write:5"})  # its destages take a while
    names = [f"doc{i}" for i in range(8)]
    last = {}

    def saves():
        end, k = time.time() + 4, 0
        while time.time() < end:
            for name in names:
                data = b"%s save %d " % (name.encode(), k) * 100
                tmp = a.mnt / f".{name}.{k}.tmp"
                pwrite(tmp, 0, data)
                time.sleep(0.002)       # dirty, for the flusher's next batch
                os.rename(tmp, a.mnt / name)
                last[name] = data
            k += 1
        return k
    assert guard(saves, timeout=60, what="saves by rename") > 1
    for name in names:
        assert read_all(a.mnt / name) == last[name], name
    flush(a.mnt)


@pytest.mark.parametrize("kind", ["promote", "fill"])
def test_promotions_go_on_while_the_flusher_destages_the_file(make_array, tmp_path, kind):
    """A promotion or a fill waits for no flusher (flush.c invariants 5,
    14): only a cut keeps the promoter off a file, not the flusher
    destaging other extents of it.  One file: a writer keeps four of its
    extents dirty, the flusher flat out on them, each destage slowed to
    5 ms a member write, while 64 other extents are read once each at
    threshold 1: promote, extents not cached; fill, extents the tier holds
    4K of (written and destaged before), read past those 4K.  Before, one
    that came while the flusher held the file was dropped: on a database
    or mail store of one big file, most of them (a zone recording: 13,221
    promotions, 43,623 dropped; fills 835, 3,393)."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", promote=1,
                       seq_cutoff=0, dirty_low=0, dirty_high=1),  # 3 dirty: flat out
            env={"TIERFS_FAULT": "delay=write:5"})
    p = a.mnt / "db"
    with open(p, "wb") as f:
        f.truncate(8 * M)
    fd = os.open(str(p), os.O_RDWR | os.O_DIRECT)
    if kind == "fill":          # two at a time: a third dirty one would go around
        for i in range(64):
            dwrite(fd, M + i * 64 * K, b"p" * (4 * K))
            if i % 2:
                flush(a.mnt)
        assert fcache(p)["cached_bytes"] == 64 * 4 * K
    stop = threading.Event()

    def writer():
        k = 0
        while not stop.is_set():
            dwrite(fd, (k % 4) * 64 * K + (k // 4 % 16) * 4 * K, b"w" * (4 * K))
            k += 1
            time.sleep(0.001)
    t = threading.Thread(target=writer, daemon=True)
    try:
        t.start()
        base = cst(a.mnt)
        wait_until(lambda: cst(a.mnt)["flush_writes"] >= base["flush_writes"] + 4,
                   "the flusher at work", 10.0)
        base = cst(a.mnt)
        skip = 4 * K if kind == "fill" else 0
        for i in range(64):
            dread(fd, M + i * 64 * K + skip, 64 * K - skip)
            time.sleep(0.005)
        wait_until(lambda: cst(a.mnt)["promote_backlog"] == 0, "the promoter", 10.0)
        st = cst(a.mnt)
        assert st["flush_writes"] > base["flush_writes"], "the flusher stopped"
    finally:
        stop.set()
        t.join()
        os.close(fd)
    done, dropped = ("promotions", "promote_dropped") if kind == "promote" else \
        ("fill_promotions", "fill_dropped")
    got = (st[done] - base[done], st[dropped] - base[dropped])
    assert got == (64, 0), f"{done}, {dropped}: {got}"
    assert fcache(p)["cached_bytes"] >= 64 * 64 * K


def flood_promoters(mnt, n, readers, drain=True):
    """readers threads miss the n 4K extents of a new file mnt/f once each,
    with O_DIRECT, faster than slow members let the promoters copy them.
    Returns the promote queue's largest backlog seen, once it is empty
    (drain) or at once."""
    p = mnt / "f"
    with open(p, "wb") as f:
        f.truncate(n * 4 * K)

    def reader(k):
        fd = os.open(str(p), os.O_RDONLY | os.O_DIRECT)
        try:
            for i in range(k, n, readers):
                dread(fd, i * 4 * K, 4 * K)
        finally:
            os.close(fd)
    ts = [threading.Thread(target=reader, args=(k,)) for k in range(readers)]
    for t in ts:
        t.start()
    peak = 0
    while any(t.is_alive() for t in ts):
        peak = max(peak, cst(mnt)["promote_backlog"])
        time.sleep(0.05)
    for t in ts:
        t.join()
    if drain:
        wait_until(lambda: cst(mnt)["promote_backlog"] == 0, "the promoters", 60.0)
    return peak


def test_a_rise_of_the_threshold_drops_the_promotions_waiting_under_it(make_array, tmp_path):
    """Promotions queued under threshold 1 that the threshold raised to 2
    would not queue are dropped when a promoter takes them, unread (flush.c
    invariant 20).  Member reads take 20 ms; 16 readers miss 800 extents
    once each, so hundreds wait; the last 8 read are read again (heat 2),
    then the threshold goes to 2.  Only those 8 and the few the promoters
    had under way come in.  Before, every waiting one was read and copied
    (hundreds, 5 a second per promoter), and a warm-up whose tuner chose 1
    for a while waited for them before the hot extents (stop 43)."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="4K", promote=1, seq_cutoff=0)
            + ["max_threads=64"], env={"TIERFS_FAULT": "delay=read:20"})
    peak = flood_promoters(a.mnt, 800, 16, drain=False)
    fd = os.open(str(a.mnt / "f"), os.O_RDONLY | os.O_DIRECT)
    try:
        hot = range(792, 800)
        for i in hot:                               # heat 2, still waiting
            dread(fd, i * 4 * K, 4 * K)
        before = cst(a.mnt)
        os.setxattr(str(a.mnt), "user.tierfs.promote_threshold", b"2")
        wait_until(lambda: cst(a.mnt)["promote_backlog"] == 0, "the promoters", 60.0)
        st = cst(a.mnt)
        for i in hot:
            dread(fd, i * 4 * K, 4 * K)
        hits = cst(a.mnt)["read_hits"] - st["read_hits"]
    finally:
        os.close(fd)
    made = st["promotions"] - before["promotions"]
    assert before["promote_backlog"] >= 200, (peak, before)
    assert made <= len(hot) + 8, (made, before["promote_backlog"], st)
    assert st["promote_dropped"] - before["promote_dropped"] >= before["promote_backlog"] - made
    assert hits == len(hot), hits


def test_a_full_promote_queue_is_counted_apart(make_array, tmp_path):
    """cache.promote_full counts the promotions (and fills) the full queue
    of 1024 refused, apart from those given up for other reasons (the
    extent written or cut meanwhile, no slot), which cache.promote_dropped
    lumps in with them: a growing promote_dropped sent stop 39 looking for
    a slow promoter where the flusher's hold was dropping them.  Member
    reads take 20 ms; 32 readers miss 3,000 extents once each, faster
    than the 4 promoters copy them, so the queue fills and refuses."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="4K", promote=1, seq_cutoff=0)
            + ["max_threads=64"], env={"TIERFS_FAULT": "delay=read:20"})
    base = cst(a.mnt)
    peak = flood_promoters(a.mnt, 3000, 32)
    st = cst(a.mnt)
    full = st["promote_full"] - base["promote_full"]
    dropped = st["promote_dropped"] - base["promote_dropped"]
    made = st["promotions"] - base["promotions"]
    assert peak >= 1000 and full > 0, (peak, full, dropped, made)
    assert full <= dropped and made + dropped == 3000, (full, dropped, made)


def test_the_flushers_grow_never_shrinks_a_member(make_array, tmp_path):
    """The flusher grows the members to the size the tier holds (flush.c
    invariant 9, data.c invariant 8) while writes that go around the tier
    may extend the same file on the members.  It looked at a member's size,
    then set it: a write around the tier that landed in between, past that
    size, was cut off again.  Found by test_model_every_mode once fills ran
    while the flusher held a file (zeros where a write past the old end
    had gone to the RAID).  Here the grow's ftruncate (fallocate now) waits
    a second, and the write around the tier lands meanwhile.  RAID5 x3: 4K written at 64K
    lies in row 0's second chunk; destaged, it leaves the first chunk's
    member short of the row, which the grow makes 64K long."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="2M", extent="64K", seq_cutoff=0,
                       dirty_low=0, dirty_high=1),   # one dirty extent: over high
            env={"TIERFS_FAULT": "delay=ftruncate/fallocate:1000"})
    p = a.mnt / "f"
    pwrite(p, 64 * K, b"s" * (4 * K))               # only the tier: its size too
    data = random.Random(3).randbytes(256 * K)
    ctl(a.mnt, "flush")                             # destage, then grow to 68K
    time.sleep(0.3)                                 # the grow waits in the fault layer
    before = cst(a.mnt)
    write_direct(p, 256 * K, data)                  # over high: to the RAID
    after = cst(a.mnt)
    assert after["full_bypass"] > before["full_bypass"], ("not around the tier", before, after)
    wait_clean(a.mnt)
    same(read_direct(p, 256 * K, 256 * K), data, "the write around the tier")
    assert read_direct(p, 0, 68 * K) == bytes(64 * K) + b"s" * (4 * K)


@pytest.mark.parametrize("level,n", [("raid1", 2), ("raid5", 3)])
@pytest.mark.parametrize("cut", ["tail", "all"])
def test_flush_keeps_a_size_past_the_last_dirty_byte(make_array, tmp_path, level, n, cut):
    """A punch (KEEP_SIZE) of a file that only the tier held leaves its
    size past the last dirty byte.  tail (flush.c invariant 9): the last
    4K; the flusher destaged the rest and forgot the tier's size record
    ("the members hold the size now"), so the file came back shorter
    after a remount, and after a power cut (the long exploration: 3 KiB
    short).  all (dispatch.c invariant 1): every byte; nothing was dirty, so
    the flusher never visited the file and its size stayed in the tier
    alone (RAID1: 0 of 204800 bytes through an uncached mount; the parity
    levels write the zeros up to the size)."""
    a = make_array(level, n, "16K")
    m = a.mount(opts=copts(tmp_path / "cache", extent="64K", dirty_low=90, dirty_high=95))
    p = a.mnt / "f"
    data = random.Random(5).randbytes(200 * K)
    pwrite(p, 0, data, sync=True)               # only in the tier
    off, ln = (196 * K, 4 * K) if cut == "tail" else (0, 300 * K)
    punch(p, off, ln)                           # a hole to the end, the size stays
    want = data[:off] + bytes(len(data) - off)
    flush(a.mnt)
    assert os.stat(p).st_size == len(want)
    m.stop()
    a.mount()                                   # uncached: the members alone
    got = read_all(p)
    assert len(got) == len(want), f"{len(got)} bytes after the flush, not {len(want)}"
    same(got, want, "after the flush, uncached")


def test_flush_writes_full_rows_on_raid5(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")     # rows of 128K
    a.mount(opts=copts(tmp_path / "cache", extent="64K", seq_cutoff=0, dirty_low=90, dirty_high=95))
    p = os.path.join(a.mnt, "f")
    rng = random.Random(5)
    data = bytearray(rng.randbytes(1 * M))
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for off in range(0, 1 * M, 128 * K):
            dwrite(fd, off, bytes(data[off:off + 128 * K]))
    finally:
        os.close(fd)
    s0, st0 = cst(a.mnt), stripe(a.mnt)
    assert s0["dirty_bytes"] == 1 * M and st0["rows_full"] + st0["rows_rmw"] == 0, (s0, st0)
    s1 = flush(a.mnt)
    st1 = stripe(a.mnt)
    assert s1["full_stripe_flushes"] == 8, s1
    assert s1["flushed_bytes"] == 1 * M, s1
    assert (st1["rows_rmw"], st1["rows_rcw"]) == (0, 0), f"flush read members: {st1}"
    assert st1["rows_full"] == 8, st1
    # a 4K update of a row that is all (clean) in the cache: still a full row
    new = rng.randbytes(4 * K)
    write_direct(p, 64 * K + 4 * K, new)
    data[68 * K:72 * K] = new
    s2 = flush(a.mnt)
    st2 = stripe(a.mnt)
    assert s2["full_stripe_flushes"] == 9, s2
    assert (st2["rows_rmw"], st2["rows_rcw"], st2["rows_full"]) == (0, 0, 9), st2
    same(read_direct(p, 0, 1 * M), bytes(data), "contents after the flushes")
    lay = PyLayout("raid5", 3, 64 * K)
    fid = int(os.getxattr(member_path(a, 0, "f"), FID_XATTR))
    for k, img in enumerate(lay.images(bytes(data), fid)):
        same(read_all(member_path(a, k, "f")), img, f"member {k} (data and parity)")


# ---------------------------------------------------------------------------
# 6. A tiny cache full of dirty data
# ---------------------------------------------------------------------------

def test_above_the_high_watermark_fresh_writes_go_to_the_raid(make_array, tmp_path):
    """write.c invariant 9: with the dirty level at cache_dirty_high, a
    write-back write that would take a fresh slot goes to the RAID at once
    (full_bypass) instead of waiting for the flusher, whose member syncs
    take 3 s each here; a write into an extent the tier holds dirty still
    goes to the tier.  Everything reads back, cached and after a flush
    through an uncached mount."""
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", size="1M", extent="64K", dirty_low=10,
                           dirty_high=25),      # 16 slots: 4 dirty reach it
                env={"TIERFS_FAULT": "delay=fdatasync:3000"})
    p = a.mnt / "f"
    rng = random.Random(9)
    model = bytearray(16 * 64 * K)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        os.ftruncate(fd, len(model))
        base = cst(a.mnt)
        for i in range(16):                     # a fresh extent each
            b = rng.randbytes(8 * K)
            dwrite(fd, i * 64 * K, b)
            model[i * 64 * K:i * 64 * K + len(b)] = b
        s = cst(a.mnt)
        assert s["full_bypass"] - base["full_bypass"] >= 1, (base, s)
        assert s["throttled"] == base["throttled"], (base, s)   # none waited
        assert s["write_misses"] - base["write_misses"] >= 4, (base, s)
        assert s["dirty_extents"] <= 16, s
        hits = s["write_hits"]
        b = rng.randbytes(4 * K)                # extent 0 is dirty: the tier takes it
        dwrite(fd, 4 * K, b)
        model[4 * K:8 * K] = b
        s = cst(a.mnt)
        assert s["write_hits"] == hits + 1, s
        same(dread(fd, 0, len(model)), bytes(model), "f, cached")
    finally:
        os.close(fd)
    flush(a.mnt)
    m.stop()
    a.mount()
    same(read_all(p), bytes(model), "f through an uncached mount")


def test_tiny_cache_full_of_dirty_data(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", size="1M", extent="64K"))
    s = cst(a.mnt)
    assert s["slots"] == 16, s
    p = os.path.join(a.mnt, "f")
    rng = random.Random(6)
    size = 4 * M
    model = bytearray(size)
    pwrite(p, 0, bytes(size))
    flush(a.mnt)
    fd = os.open(p, os.O_RDWR)
    dfd = os.open(p, os.O_RDWR | os.O_DIRECT)
    total = 0
    t0 = time.time()
    try:
        while total < 8 * M:
            if rng.random() < 0.3:
                ln = rng.randrange(4 * K, 132 * K, 4 * K)
                off = rng.randrange(0, size - ln + 1, 4 * K)
                b = rng.randbytes(ln)
                dwrite(dfd, off, b)
            else:
                ln = rng.randint(1, 128 * K)
                off = rng.randint(0, size - ln)
                b = rng.randbytes(ln)
                assert os.pwrite(fd, b, off) == ln
            model[off:off + ln] = b
            total += ln
            if rng.random() < 0.05:
                o = rng.randrange(0, size - 64 * K, 4 * K)
                same(dread(dfd, o, 64 * K), bytes(model[o:o + 64 * K]), f"read at {o}")
    finally:
        os.close(fd)
        os.close(dfd)
    took = time.time() - t0
    s = cst(a.mnt)
    print(f"8 MiB of writes through 16 slots in {took:.1f}s: {s}")
    assert s["dirty_extents"] <= 16 and s["cached_extents"] <= 16, s
    same(read_all(p), bytes(model), "contents (cached)")
    flush(a.mnt)
    same(read_direct(p, 0, size), bytes(model), "contents after the flush")
    m.stop()
    a.mount()
    same(read_all(p), bytes(model), "contents through an uncached mount")


def test_paced_flusher_leaves_write_hot_extents_dirty(make_array, tmp_path):
    """Between the watermarks the flusher destages extents that are no longer
    being written and leaves those the application keeps rewriting: they
    absorb the overwrites instead of costing a RAID write each time."""
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", extent="64K", dirty_low=5, dirty_high=90))
    s = cst(a.mnt)
    assert s["slots"] == 128 and s["flushed_bytes"] == 0, s
    old, hot = os.path.join(a.mnt, "old"), os.path.join(a.mnt, "hot")
    rng = random.Random(40)
    odata = rng.randbytes(16 * 64 * K)            # 16 extents written once
    write_direct(old, 0, odata, create=True)
    hdata = bytearray(rng.randbytes(8 * 64 * K))  # 8 extents (6.25%) rewritten
    write_direct(hot, 0, bytes(hdata), create=True)
    fd = os.open(hot, os.O_RDWR | os.O_DIRECT)
    t0 = time.time()
    old_clean = None
    try:
        while time.time() - t0 < 9:               # each hot extent every 0.4 s
            for e in range(8):
                off = e * 64 * K + rng.randrange(0, 64 * K, 4 * K)
                b = rng.randbytes(4 * K)
                dwrite(fd, off, b)
                hdata[off:off + 4 * K] = b
                time.sleep(0.05)
            if old_clean is None and fcache(old)["dirty_bytes"] == 0:
                old_clean = time.time() - t0
        s = cst(a.mnt)
    finally:
        os.close(fd)
    print(f"old extents clean after {old_clean} s; flushed {s['flushed_bytes']} bytes")
    assert old_clean is not None, f"the extents no longer written were not destaged: {s}"
    assert fcache(hot)["dirty_bytes"] == 8 * 64 * K, "write-hot extents were destaged"
    # the 16 old extents, once (their rows are whole: nothing to fill)
    assert s["flushed_bytes"] == len(odata), s
    flush(a.mnt)
    m.stop()
    a.mount()
    same(read_all(old), odata, "old, on the members")
    same(read_all(hot), bytes(hdata), "hot, on the members")


# ---------------------------------------------------------------------------
# 7. Scan resistance
# ---------------------------------------------------------------------------

def hot_hits_after_scan(a, cdir, policy, hdata, cdata):
    """Hot-set hits (of 16) after a one-touch random scan 4x the cache."""
    m = a.mount(opts=copts(cdir, size="1M", extent="4K", promote=1, policy=policy,
                           halflife=3600))
    E = 4 * K
    hot, cold = os.path.join(a.mnt, "hot"), os.path.join(a.mnt, "cold")
    base = cst(a.mnt)
    assert base["policy"] == policy, base
    nprom = base["promotions"] + base["promote_dropped"]
    hfd = os.open(hot, os.O_RDONLY | os.O_DIRECT)
    cfd = os.open(cold, os.O_RDONLY | os.O_DIRECT)
    try:
        def settle(n):
            wait_until(lambda: cst(a.mnt)["promotions"] + cst(a.mnt)["promote_dropped"] >= n,
                       "promotions")
        for i in range(16):
            same(dread(hfd, i * E, E), hdata[i * E:(i + 1) * E], "hot")
        settle(nprom + 16)
        for _ in range(3):
            for i in range(16):
                same(dread(hfd, i * E, E), hdata[i * E:(i + 1) * E], "hot")
        s = cst(a.mnt)
        assert s["promotions"] - base["promotions"] >= 16, s
        order = list(range(len(cdata) // E))
        random.Random(7).shuffle(order)
        done = 0
        for j in range(0, len(order), 32):
            for i in order[j:j + 32]:
                same(dread(cfd, i * E, E), cdata[i * E:(i + 1) * E], "cold")
            done += len(order[j:j + 32])
            settle(nprom + 16 + done)
        s0 = cst(a.mnt)
        for i in range(16):
            same(dread(hfd, i * E, E), hdata[i * E:(i + 1) * E], "hot after the scan")
        s1 = cst(a.mnt)
        assert s1["evictions"] > 0, s1
        return s1["read_hits"] - s0["read_hits"]
    finally:
        os.close(hfd)
        os.close(cfd)
        m.stop()


def hot_hits_by_policy(make_array, tmp_path, policies):
    """hot_hits_after_scan on a fresh array for each policy, same data."""
    res = {}
    for policy in policies:
        a = make_array("raid0", 2, "64K")
        rng = random.Random(8)
        hdata, cdata = rng.randbytes(64 * K), rng.randbytes(4 * M)
        prefill(a, {"hot": hdata, "cold": cdata})
        res[policy] = hot_hits_after_scan(a, tmp_path / f"cache-{policy}", policy, hdata, cdata)
    print(f"hot-set hits of 16 after the scan: {res}")
    return res


def test_s3fifo_keeps_hot_set_through_cold_scan(make_array, tmp_path):
    res = hot_hits_by_policy(make_array, tmp_path, ("s3fifo", "lru"))
    assert res["s3fifo"] >= 12, f"s3fifo kept too little of the hot set: {res}"


def test_wtinylfu_keeps_hot_set_through_cold_scan(make_array, tmp_path):
    """cache_policy=wtinylfu: the hot extents, read 4 times each (the miss
    counted by tfs_policy_seen, then 3 hits), rate above the scan's
    extents (read once: their miss), so every scan extent loses its duel
    for main and the hot set stays; LRU, on the same reads, keeps
    little of it.  Every byte read is checked (hot_hits_after_scan)."""
    res = hot_hits_by_policy(make_array, tmp_path, ("wtinylfu", "lru"))
    assert res["wtinylfu"] >= 15, f"wtinylfu kept too little of the hot set: {res}"
    assert res["lru"] <= res["wtinylfu"] - 8, f"lru kept as much as wtinylfu: {res}"


def reclaim_run(make_array, tmp_path, reclaim, old=0, nnew=32):
    """A tier of 64 slots of 64K, LRU, threshold 1, watermarks too high for
    the paced flusher: old extents of "old" read (promoted, clean, the
    oldest), 16 extents of "cold" written (dirty), 48 - old of "hot" read
    (promoted, clean), then nnew extents of "new" read, one at a time, each
    promotion (and reclaim round) waited for; an eviction frees 8 slots.
    Returns the tier's counts and the cached and dirty extents of cold and
    hot."""
    a = make_array("raid0", 2, "64K")
    rng = random.Random(11)
    nhot = 48 - old
    olds, hot, new, cold = (rng.randbytes(old * 64 * K), rng.randbytes(nhot * 64 * K),
                            rng.randbytes(nnew * 64 * K), rng.randbytes(M))
    prefill(a, {"old": olds, "hot": hot, "new": new})
    m = a.mount(opts=copts(tmp_path / f"cache-{reclaim}-{old}", size="4M", extent="64K",
                           policy="lru", promote=1, seq_cutoff=0, dirty_low=90,
                           dirty_high=95, reclaim=reclaim))

    def read_in(path, data, i):
        same(read_direct(path, i * 64 * K, 64 * K), data[i * 64 * K:(i + 1) * 64 * K], path)
        wait_stat(a.mnt, "promote_backlog", 0)
        wait_stat(a.mnt, "reclaim_backlog", 0)

    try:
        op, cp, hp, np_ = (os.path.join(a.mnt, n) for n in ("old", "cold", "hot", "new"))
        for i in range(old):
            read_in(op, olds, i)
        write_direct(cp, 0, cold, create=True)
        for i in range(nhot):
            read_in(hp, hot, i)
        for i in range(nnew):
            read_in(np_, new, i)
        s = cst(a.mnt)
        fc, fh = fcache(cp), fcache(hp)
        same(read_direct(cp, 0, M), cold, "cold, after")
        return s, {"cold": fc["cached_bytes"] // (64 * K), "cold_dirty": fc["dirty_bytes"] // (64 * K),
                   "hot": fh["cached_bytes"] // (64 * K)}
    finally:
        m.stop()


def test_reclaim_destages_what_eviction_wants(make_array, tmp_path):
    """cache_reclaim=1 (flush.c invariant 15): the 16 dirty extents the
    first eviction meets are noted, destaged by the flusher's next round
    and put at the LRU tail, so the later evictions take them and not the
    hot set: hot keeps 32 of its 48 extents, against 16 without reclaim,
    where the refused dirty extents went back to the head as if used and
    stay (dirty) while hot extents go.  Every byte read is checked, the
    cold file's after it left the tier too."""
    s1, c1 = reclaim_run(make_array, tmp_path, 1)
    s0, c0 = reclaim_run(make_array, tmp_path, 0)
    print(f"reclaim on: {c1}, reclaimed {s1['reclaimed']}; off: {c0}, reclaimed {s0['reclaimed']}")
    assert s1["reclaim"] == 1 and s0["reclaim"] == 0, (s1, s0)
    assert s1["reclaimed"] == 16 and c1["cold"] == 0 and s1["dirty_extents"] == 0, (s1, c1)
    assert s0["reclaimed"] == 0 and c0["cold"] == 16 and c0["cold_dirty"] == 16, (s0, c0)
    assert c1["hot"] >= c0["hot"] + 14, (c1, c0)


def test_reclaim_cleans_ahead_of_eviction(make_array, tmp_path):
    """cache_reclaim=1 (flush.c invariant 15, clean-ahead): after each
    eviction the dirty extents among the policy's next 2 batches of
    victims are noted, and the flusher cleans them before eviction gets
    there; they keep their place.  8 old clean extents are the oldest, the
    16 written ones next: the first eviction takes the 8 old and notes the
    16, so the second takes 8 of the written ones, clean by then, and the
    40 hot extents all stay.  Without clean-ahead the second eviction met
    the 16 dirty, passed over them (as if used) and took 8 hot ones instead
    (hot kept 32).  Without reclaim nothing is noted and the written 16 stay
    dirty.  Every byte read is checked, the written file's after it left
    the tier too."""
    s1, c1 = reclaim_run(make_array, tmp_path, 1, old=8, nnew=16)
    s0, c0 = reclaim_run(make_array, tmp_path, 0, old=8, nnew=16)
    print(f"reclaim on: {c1}, reclaimed {s1['reclaimed']}; off: {c0}, reclaimed {s0['reclaimed']}")
    assert c1["hot"] == 40 and c1["cold"] == 8 and c1["cold_dirty"] == 0, (s1, c1)
    assert s1["reclaimed"] == 16 and s1["evictions"] == 16, s1
    assert c0["hot"] == 32 and c0["cold_dirty"] == 16 and s0["reclaimed"] == 0, (s0, c0)


def auto_run(make_array, tmp_path, reread):
    """cache_reclaim=auto on 32 slots of 64K under LRU, threshold 1, the
    flusher held off (watermarks 90:95): 8K written into 8 extents (dirty),
    then 70 passes over 26 other extents read in turn (each read a miss:
    24 clean slots for them), so each time the dirty 8 reach LRU's tail
    eviction passes over them and takes a clean extent, which the pass
    reads again soon; with reread, the 8 written are read back after each
    pass.  Returns the tier's counts and the mount's log."""
    E = 64 * K
    a = make_array("raid0", 2, "64K")
    p = a.mnt / "f"
    data = bytearray(random.Random(1).randbytes(34 * E))
    prefill(a, {"f": bytes(data)})
    m = a.mount(opts=copts(tmp_path / f"cache-{reread}", size="2M", extent="64K", policy="lru",
                           reclaim="auto", promote=1, seq_cutoff=0, dirty_low=90,
                           dirty_high=95))
    try:
        for e in range(8):
            data[e * E:e * E + 8 * K] = bytes([e]) * (8 * K)
            write_direct(p, e * E, bytes(data[e * E:e * E + 8 * K]))
        for _ in range(70):
            for e in range(8, 34):
                same(read_direct(p, e * E, 8 * K), bytes(data[e * E:e * E + 8 * K]), f"extent {e}")
                wait_stat(a.mnt, "promote_backlog", 0)
                wait_stat(a.mnt, "reclaim_backlog", 0)
            for e in range(8) if reread else ():
                same(read_direct(p, e * E, 8 * K), bytes(data[e * E:e * E + 8 * K]), f"written {e}")
        s = cst(a.mnt)
        same(read_all(p), bytes(data), "the file")
        return s, m.log()
    finally:
        m.stop()


def test_cache_reclaim_names(make_array, tmp_path):
    """cache_reclaim takes 0 or off, 1 or on, auto (the default); anything
    else refuses the mount with a one-line error naming them."""
    a = make_array("raid0", 2, "64K")
    for given, mode, on in ((None, "auto", 0), ("off", 0, 0), ("0", 0, 0), ("on", 1, 1),
                            ("1", 1, 1), ("auto", "auto", 0)):
        kw = {} if given is None else {"reclaim": given}
        m = a.mount(opts=copts(tmp_path / "cache", **kw))
        s = cst(a.mnt)
        assert (s["reclaim_mode"], s["reclaim"]) == (mode, on), (given, s)
        m.stop()
    msg = refused(a, copts(tmp_path / "cache", reclaim="2"))
    assert "cache_reclaim=2: 0, 1 or auto" in msg, msg


def test_reclaim_auto_weighs_what_eviction_trades(make_array, tmp_path):
    """cache_reclaim=auto (DESIGN §10.10, index.c invariant 7): eviction
    passing over dirty extents for a clean one that is read again soon
    scores for reclaim; a whole hit of a dirty extent it passed over (a
    mail server's fresh message read) scores against.  Read back after
    each pass, the 8 dirty extents outscore the one clean extent a pass
    displaces: the evidence sinks and reclaim stays off (with the hit
    ring's hits left out of the evidence, as they once were, it went up
    instead).  Left alone, the
    displaced extents win: the evidence reaches 64 and reclaim goes on
    (logged, cache.reclaim 1), and the dirty extents are destaged and
    evicted before the clean ones (reclaimed).  test_trace.py's agreement
    test shows the model turning it on at the same point as the daemon."""
    s, log = auto_run(make_array, tmp_path, True)
    print({k: v for k, v in s.items() if "reclaim" in k})
    assert s["reclaim_mode"] == "auto" and s["reclaim"] == 0, s
    assert s["reclaim_evidence"] <= -16 and s["reclaimed"] == 0, s
    assert "reclaim on" not in log, log
    s, log = auto_run(make_array, tmp_path, False)
    print({k: v for k, v in s.items() if "reclaim" in k})
    assert s["reclaim"] == 1 and s["reclaim_evidence"] == 64 and s["reclaimed"] == 8, s
    assert "reclaim on: eviction passed over dirty extents" in log, log


# ---------------------------------------------------------------------------
# 8. Mode switches at run time
# ---------------------------------------------------------------------------

def test_mode_switches_at_run_time(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", seq_cutoff=0, dirty_low=90, dirty_high=95))
    p = os.path.join(a.mnt, "f")
    rng = random.Random(9)
    model = bytearray(rng.randbytes(256 * K))
    write_direct(p, 0, bytes(model), create=True)
    assert fcache(p)["dirty_bytes"] == 256 * K

    def wr(off, ln):
        b = rng.randbytes(ln)
        write_direct(p, off, b)
        if len(model) < off + ln:
            model.extend(bytes(off + ln - len(model)))
        model[off:off + ln] = b

    def check(what):
        same(read_direct(p, 0, (len(model) + 8191) // 4096 * 4096), bytes(model), what)
        same(read_all(p), bytes(model), what + " (buffered)")

    ctl(a.mnt, "cache_mode writethrough")
    s = wait_clean(a.mnt)
    assert s["mode"] == "writethrough" and s["dirty_extents"] == 0, s
    check("after leaving write-back")
    wr(64 * K, 64 * K)              # cached, clean: through
    wr(1 * M, 64 * K)               # not cached: the RAID and a fresh slot, clean
    s = cst(a.mnt)
    assert s["dirty_bytes"] == 0 and fcache(p)["dirty_bytes"] == 0, s
    assert fcache(p)["cached_bytes"] == 320 * K, fcache(p)
    h0 = s["read_hits"]
    same(read_direct(p, 64 * K, 64 * K), bytes(model[64 * K:128 * K]), "through, cached")
    assert cst(a.mnt)["read_hits"] == h0 + 1
    check("write-through")

    ctl(a.mnt, "cache_mode writearound")
    wait_stat(a.mnt, "promote_backlog", 0)     # a promotion the last check queued landed
    s0, fc0 = cst(a.mnt), fcache(p)
    wr(128 * K, 64 * K)             # cached, clean: invalidated, then the RAID
    s1 = cst(a.mnt)
    assert s1["invalidations"] == s0["invalidations"] + 1, (s0, s1)
    assert s1["write_around"] == s0["write_around"] + 1, (s0, s1)
    assert fcache(p)["cached_bytes"] == fc0["cached_bytes"] - 64 * K, (fc0, fcache(p))
    assert s1["dirty_bytes"] == 0, s1
    same(read_direct(p, 128 * K, 64 * K), bytes(model[128 * K:192 * K]), "write-around")
    wr(130 * K, 1000)               # unaligned, uncached now
    check("write-around")

    ctl(a.mnt, "cache_mode off")
    s0 = cst(a.mnt)
    same(read_direct(p, 0, 4 * K), bytes(model[:4 * K]), "off: cached extent")
    s1 = cst(a.mnt)
    assert s1["read_misses"] == s0["read_misses"] + 1 and s1["read_hits"] == s0["read_hits"]
    wr(4 * K, 8 * K)
    wr(3 * M, 5000)
    assert cst(a.mnt)["dirty_bytes"] == 0
    check("off")

    ctl(a.mnt, "cache_mode writeback")
    wr(2 * M, 64 * K)
    wr(0, 100)
    s = cst(a.mnt)
    assert s["mode"] == "writeback" and s["dirty_bytes"] > 0, s
    check("back in write-back")
    flush(a.mnt)
    m.stop()
    a.mount()
    same(read_all(p), bytes(model), "uncached mount")


# ---------------------------------------------------------------------------
# 9. Model-checked random workloads in every mode
# ---------------------------------------------------------------------------

class Node:
    def __init__(self):
        self.data = bytearray()
        self.nlink = 1
        self.hist = []


class Workload:
    def __init__(self, mnt, seed, mode_switch=False):
        self.mnt = str(mnt)
        self.rng = random.Random(seed)
        self.names = {}
        self.seq = 0
        self.hist = []
        self.mode_switch = mode_switch

    def p(self, name):
        return os.path.join(self.mnt, name)

    def log(self, s, *nodes):
        s = f"#{len(self.hist)} {s}"
        self.hist.append(s)
        for n in nodes:
            if n is not None:
                n.hist.append(s)

    def node_hist(self, name):
        n = self.names.get(name)
        return "" if n is None else "\nthat file's history:\n  " + "\n  ".join(n.hist[-40:])

    def newname(self):
        self.seq += 1
        return f"f{self.seq}"

    def pick(self):
        return self.rng.choice(sorted(self.names)) if self.names else None

    def op_write(self):
        rng = self.rng
        name = self.pick() if self.names and rng.random() < 0.85 else self.newname()
        node = self.names.get(name) or Node()
        direct = rng.random() < 0.35
        if direct:
            ln = rng.randrange(4 * K, 200 * K, 4 * K)
            off = rng.randrange(0, 900 * K, 4 * K)
        else:
            ln = rng.randint(1, 200 * K)
            off = rng.randint(0, 900 * K)
        b = rng.randbytes(ln)
        self.log(f"write {name} [{off}, +{ln}) {'direct' if direct else ''}", node)
        if direct:
            write_direct(self.p(name), off, b, create=True)
        else:
            pwrite(self.p(name), off, b)
        self.names[name] = node
        if len(node.data) < off + ln:
            node.data.extend(bytes(off + ln - len(node.data)))
        node.data[off:off + ln] = b

    def op_read(self):
        name = self.pick()
        if not name:
            return
        d = self.names[name].data
        rng = self.rng
        if rng.random() < 0.5:
            off = rng.randrange(0, len(d) + 8 * K, 4 * K)
            ln = rng.randrange(4 * K, 256 * K, 4 * K)
            self.log(f"read {name} [{off}, +{ln}) direct")
            got = read_direct(self.p(name), off, ln)
        else:
            off = rng.randint(0, len(d) + 1000)
            ln = rng.randint(1, 256 * K)
            self.log(f"read {name} [{off}, +{ln})")
            with open(self.p(name), "rb") as f:
                f.seek(off)
                got = f.read(ln)
        same(got, bytes(d[off:off + ln]), f"read {name} [{off}, +{ln}){self.node_hist(name)}")

    def op_truncate(self):
        name = self.pick()
        if not name:
            return
        d = self.names[name].data
        size = self.rng.choice([0, self.rng.randint(0, len(d)), self.rng.randint(0, 1 * M),
                                len(d) // 2 // 4096 * 4096])
        self.log(f"truncate {name} {size}", self.names[name])
        os.truncate(self.p(name), size)
        if size < len(d):
            del d[size:]
        else:
            d.extend(bytes(size - len(d)))

    def op_punch(self):
        name = self.pick()
        if not name:
            return
        d = self.names[name].data
        off = self.rng.randint(0, len(d) + 1000)
        ln = self.rng.randint(1, 300 * K)
        self.log(f"punch {name} [{off}, +{ln})", self.names[name])
        punch(self.p(name), off, ln)
        e = min(off + ln, len(d))
        if off < e:
            d[off:e] = bytes(e - off)

    def op_rename(self):
        name = self.pick()
        if not name:
            return
        to = self.pick() if self.rng.random() < 0.3 else self.newname()
        self.log(f"rename {name} {to}", self.names[name], self.names.get(to))
        guard(os.rename, self.p(name), self.p(to))
        if to != name:
            if to in self.names and self.names[to] is not self.names[name]:
                self.names[to].nlink -= 1
            elif to in self.names:
                # same file under two names: rename is a no-op
                return
            self.names[to] = self.names.pop(name)

    def op_unlink(self):
        name = self.pick()
        if not name:
            return
        self.log(f"unlink {name}", self.names[name])
        unlink(self.p(name))
        self.names.pop(name).nlink -= 1

    def op_link(self):
        name = self.pick()
        if not name:
            return
        to = self.newname()
        self.log(f"link {name} {to}", self.names[name])
        os.link(self.p(name), self.p(to))
        self.names[to] = self.names[name]
        self.names[to].nlink += 1

    def op_fsync(self):
        name = self.pick()
        if not name:
            return
        self.log(f"fsync {name}", self.names[name])
        fd = os.open(self.p(name), os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def op_flush(self):
        self.log("ctl flush")
        ctl(self.mnt, "flush")

    def op_mode(self):
        if not self.mode_switch:
            return
        mode = self.rng.choice(["writeback", "writethrough", "writearound", "off"])
        self.log(f"cache_mode {mode}")
        ctl(self.mnt, f"cache_mode {mode}")

    OPS = [("op_write", 40), ("op_read", 30), ("op_truncate", 5), ("op_punch", 5),
           ("op_rename", 4), ("op_unlink", 3), ("op_link", 3), ("op_fsync", 4),
           ("op_flush", 1), ("op_mode", 3)]

    def run(self, n):
        names, weights = zip(*self.OPS)
        for _ in range(n):
            guard(getattr(self, self.rng.choices(names, weights)[0]), timeout=10)

    def verify(self, mnt=None, when=""):
        mnt = str(mnt or self.mnt)
        assert sorted(os.listdir(mnt)) == sorted(self.names), f"tree ({when})"
        for name, node in self.names.items():
            p = os.path.join(mnt, name)
            st = os.stat(p)
            assert st.st_size == len(node.data), \
                f"{name}: size {st.st_size} ({when}){self.node_hist(name)}"
            assert st.st_nlink == node.nlink, f"{name}: nlink {st.st_nlink} ({when})"
            same(read_all(p), bytes(node.data), f"{name} ({when}){self.node_hist(name)}")


def check_members(a, lay, w, when):
    """The members hold exactly the model (test_model.py's layout)."""
    seen = set()
    for name, node in sorted(w.names.items()):
        if id(node) in seen:
            continue
        seen.add(id(node))
        fid = int(os.getxattr(member_path(a, 0, name), FID_XATTR).decode())
        imgs = lay.images(bytes(node.data), fid)
        for k in range(len(a.members)):
            mb = read_all(member_path(a, k, name))
            img = imgs[k]
            where = f"member {k} of {name} (fid {fid}, size {len(node.data)}, {when})"
            if lay.level == "raid1":
                same(mb, img, where)
                continue
            if k in lay.last_byte_members(len(node.data), fid):
                assert len(mb) == len(img), f"{where}: {len(mb)} bytes, share {len(img)}"
            assert len(mb) <= len(img), f"{where}: {len(mb)} bytes > share {len(img)}"
            same(mb, img[:len(mb)], where)
            assert img[len(mb):].count(0) == len(img) - len(mb), f"{where}: short, tail not 0"


MODEL_CASES = [(lvl, n, mode) for lvl, n in (("raid5", 3), ("raid1", 2))
               for mode in ("writeback", "writethrough", "writearound", "off", "switching")]


@pytest.mark.parametrize("case", MODEL_CASES, ids=lambda c: f"{c[0]}-{c[2]}")
def test_model_every_mode(make_array, tmp_path, case):
    level, n, mode = case
    a = make_array(level, n, "64K")
    seed = int(os.environ.get("TIERFS_CACHE_SEED", zlib.crc32(repr(case).encode())))
    opts = copts(tmp_path / "cache", size="2M", extent="64K", promote=1,
                 mode="writeback" if mode == "switching" else mode)
    m = a.mount(opts=opts)
    w = Workload(a.mnt, seed, mode_switch=mode == "switching")
    nops = int(os.environ.get("TIERFS_CACHE_OPS", "600"))
    try:
        w.run(nops // 2)
        w.verify(when="half way")
        m.remount()
        w.verify(when="after a remount with the cache")
        w.run(nops - nops // 2)
        w.verify(when="end")
        if mode == "switching":
            ctl(a.mnt, "cache_mode writeback")
        flush(a.mnt)
        w.verify(when="after the flush")
        m.stop()
        m2 = a.mount()              # uncached: the data is on the members
        w.verify(when="uncached mount")
        check_members(a, PyLayout(level, n, 64 * K), w, "uncached mount")
        m2.stop()
    except (Exception, pytest.fail.Exception) as e:
        raise AssertionError(f"[{case} seed={seed}] {e}\nlast operations:\n  " +
                             "\n  ".join(w.hist[-15:])) from e


# ---------------------------------------------------------------------------
# 10. SIGKILL under a write-back workload
# ---------------------------------------------------------------------------

CHILD = r"""
import mmap, os, random, sys
mnt, log, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(rnd * 7919)
K = 1024
lg = open(log, "a")
def rec(s):
    lg.write(s + "\n"); lg.flush(); os.fsync(lg.fileno())
names = [f"c{i}" for i in range(4)]
fds = {n: os.open(os.path.join(mnt, n), os.O_RDWR | os.O_CREAT, 0o644) for n in names}
dfds = {n: os.open(os.path.join(mnt, n), os.O_RDWR | os.O_DIRECT) for n in names}
buf = mmap.mmap(-1, 256 * K)
i = 0
while True:
    n = rng.choice(names)
    for _ in range(rng.randint(1, 4)):
        direct = rng.random() < 0.4
        if direct:
            off = rng.randrange(0, 1536 * K, 4 * K); ln = rng.randrange(4 * K, 132 * K, 4 * K)
        else:
            off = rng.randint(0, 1536 * K); ln = rng.randint(1, 100 * K)
        tag = f"{rnd}.{i}"; i += 1
        data = random.Random(tag).randbytes(ln)
        rec(f"W {n} {off} {ln} {tag}")
        if direct:
            buf[:ln] = data
            assert os.pwritev(dfds[n], [memoryview(buf)[:ln]], off) == ln
        else:
            assert os.pwrite(fds[n], data, off) == ln
        rec(f"D {n}")
    os.fsync(fds[n])
    rec(f"S {n}")
"""


def check_after_crash(mnt, base, log_lines):
    """base: name -> contents known before this round.  Every fsynced byte
    must be there and nothing older than it (a byte is the fsynced value or
    one a later write wrote).  Returns (name -> contents now, bytes of
    acknowledged writes that did not survive)."""
    certain = {n: bytearray(b) for n, b in base.items()}
    pending = {n: [] for n in base}          # writes after the last fsync
    for line in log_lines:
        f = line.split()
        if f[0] == "W":
            n, off, ln, tag = f[1], int(f[2]), int(f[3]), f[4]
            pending.setdefault(n, []).append([off, ln, tag, False])
        elif f[0] == "D":
            pending[f[1]][-1][3] = True
        elif f[0] == "S":
            n = f[1]
            d = certain.setdefault(n, bytearray())
            for off, ln, tag, _ in pending[n]:
                if len(d) < off + ln:
                    d.extend(bytes(off + ln - len(d)))
                d[off:off + ln] = random.Random(tag).randbytes(ln)
            pending[n] = []
    out, lost = {}, 0
    for n in set(certain) | set(pending):
        d = bytes(certain.get(n, b""))
        p = os.path.join(mnt, n)
        if not os.path.exists(p):
            assert not d, f"{n} is gone"
            continue
        got = read_all(p)
        pend = [(off, ln, random.Random(tag).randbytes(ln), done)
                for off, ln, tag, done in pending.get(n, [])]
        maxend = max([len(d)] + [off + ln for off, ln, _, _ in pend])
        assert len(d) <= len(got) <= maxend, \
            f"{n}: size {len(got)}, fsynced {len(d)}, at most {maxend}"
        # what the acknowledged writes make of it, and the in-flight write
        acked = bytearray(d)
        inflight = None
        for off, ln, b, done in pend:
            if not done:
                inflight = (off, ln, b)
                continue
            if len(acked) < off + ln:
                acked.extend(bytes(off + ln - len(acked)))
            acked[off:off + ln] = b
        if got[:len(d)] != d or len(got) > len(d):
            for i in range(len(got)):
                want = d[i] if i < len(d) else 0
                if got[i] == want:
                    continue
                if not any(off <= i < off + ln and b[i - off] == got[i] for off, ln, b, _ in pend):
                    raise AssertionError(f"{n}: byte {i} is {got[i]}, fsynced value {want}, "
                                         f"and no later write wrote that")
        if bytes(acked) != got[:len(acked)]:
            for i in range(len(acked)):
                if i < len(got) and got[i] == acked[i]:
                    continue
                if inflight and inflight[0] <= i < inflight[0] + inflight[1]:
                    continue
                lost += 1
        out[n] = got
    return out, lost


def test_sigkill_during_writeback(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    opts = copts(tmp_path / "cache", size="2M", extent="64K", dirty_low=50, dirty_high=90)
    m = a.mount(opts=opts)
    log = tmp_path / "child.log"
    base = {}
    rng = random.Random(10)
    rounds = int(os.environ.get("TIERFS_CACHE_KILLS", "5"))
    lost_total = 0
    for rnd in range(rounds):
        log.write_text("")
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(a.mnt), str(log), str(rnd)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(1.0, 2.0))
        assert child.poll() is None, f"child died early: {child.stderr.read().decode()}"
        s = cst(a.mnt)
        m.kill()
        child.kill()
        child.wait()
        child.stderr.close()
        lines = log.read_text().splitlines()
        m.start()
        base, lost = check_after_crash(str(a.mnt), base, lines)
        lost_total += lost
        print(f"round {rnd}: {len(lines)} log records, dirty at the kill {s['dirty_bytes']}, "
              f"acknowledged writes missing {lost}")
        wait_stat(a.mnt, "unresolved_files", 0)
        for n, b in base.items():
            same(read_all(os.path.join(a.mnt, n)), b, f"{n} after resolving (round {rnd})")
    flush(a.mnt)
    m.stop()
    a.mount()
    for n, b in base.items():
        same(read_all(os.path.join(a.mnt, n)), b, f"{n} through an uncached mount")
    # the daemon died, but the machine did not: acknowledged writes are in the
    # page cache (DESIGN §10.5) and must all have survived
    assert lost_total == 0, f"{lost_total} bytes of acknowledged (not fsynced) writes were lost"


def test_a_restart_after_a_kill_says_once_what_the_store_log_replays(make_array, tmp_path):
    """After a SIGKILL with write-back writes past the last durability
    point, the store's log holds updates LMDB lacks, and the restart says
    so in one line ("N logged updates to apply", cstore.c invariant 8).
    A start opens the store twice: the probe of the cache directory before
    the mount (store.c c_probe), and for good after daemonizing (an LMDB
    environment must not cross fork).  Before, both read the log back, and
    the line came twice.  A durability point (every 5 s) that falls between the
    writes and the kill leaves nothing to apply: that round is written
    again, at most three times."""
    a = make_array("raid0", 2, "64K")
    opts = copts(tmp_path / "cache", mode="writeback", dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    files = {}
    said = []
    for rnd in range(3):
        for i in range(4):
            n = f"f{rnd}.{i}"
            files[n] = random.Random(n).randbytes(8 * K)
            pwrite(a.mnt / n, 0, files[n])
        m.kill()
        m.start()
        said = [l for l in pathlib.Path(m.log_path).read_text().splitlines()
                if "logged updates to apply" in l]
        if said:
            break
    assert len(said) == 1, said
    for n, b in files.items():
        same(read_all(a.mnt / n), b, f"{n} after the restart")


@pytest.mark.parametrize("off,ln", [(8 * K, 4 * K), (8 * K + 100, 5000)])
def test_sigkill_inside_a_writethrough_write(make_array, tmp_path, off, ln):
    """Write-through over cached sectors; the daemon dies (fault injection)
    just after the members took the write, before the slot did.  The write
    was never acknowledged, so old or new bytes may be read after the
    restart -- but the same ones through the cache as from the members:
    otherwise the file changes by itself once the extent leaves the cache."""
    a = make_array("raid0", 2, "64K")
    old = random.Random(30).randbytes(256 * K)
    new = random.Random(31).randbytes(ln)
    prefill(a, {"f": old})
    opts = copts(tmp_path / "cache", seq_cutoff=0, extent="64K", mode="writethrough")
    p = os.path.join(a.mnt, "f")
    m = a.mount(opts=opts)
    same(read_direct(p, 0, 4 * K), old[:4 * K], "first miss")
    same(read_direct(p, 32 * K, 4 * K), old[32 * K:36 * K], "second miss")
    wait_stat(a.mnt, "promotions", 1)
    m.stop()
    m = a.mount(opts=opts, env={"TIERFS_FAULT": "crash_after=write:1"}, expect_errors=True)
    assert cst(a.mnt)["cached_extents"] == 1
    with pytest.raises(OSError):
        pwrite(p, off, new, create=False)       # the daemon dies inside
    m.wait_dead()
    m = a.mount(opts=opts)
    got = read_direct(p, 0, 64 * K)
    mixed = [i for i in range(ln) if got[off + i] not in (old[off + i], new[i])]
    assert not mixed, f"bytes neither old nor new, first at {off + mixed[0]}"
    torn = got[off:off + ln] not in (old[off:off + ln], new)
    same(got[:off], old[:off], "before the write")
    same(got[off + ln:], old[off + ln:64 * K], "after the write")
    m.stop()
    a.mount()                                   # uncached: the members alone
    same(read_direct(p, 0, 64 * K), got, "the members against the cached mount")
    print(f"after the kill: {'part' if torn else 'all or none'} of the write")


# ---------------------------------------------------------------------------
# 11. Lost, corrupt and foreign cache directories
# ---------------------------------------------------------------------------

def test_a_flush_names_what_it_destaged_in_one_journal_commit(make_array, tmp_path):
    """The journal's CDIRTY removals of the files a flush destaged go in
    one transaction at its end (index.c invariant 3), not one commit (each
    an fdatasync of every member's journal) per file; and they are
    committed: the cache lost after a kill names none of them.  RAID0:
    the mirror levels add a write-intent mark's commit per region."""
    a = make_array("raid0", 2, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    a.mount(opts=opts)
    for i in range(20):
        pwrite(a.mnt / f"f{i}", 0, bytes([i]) * 8192)
    c0 = int(status(a.mnt)["journal.commits"])
    flush(a.mnt)
    c1 = int(status(a.mnt)["journal.commits"])
    assert c1 - c0 <= 2, f"{c1 - c0} journal commits for a flush of 20 files"
    a.mounts[-1].kill()
    shutil.rmtree(cdir)
    a.mount(opts=opts)              # nothing named: not refused
    for i in range(20):
        assert (a.mnt / f"f{i}").read_bytes() == bytes([i]) * 8192


def test_a_create_with_the_tier_commits_the_journal_once(make_array, tmp_path):
    """In write-back a new file is named in the journal's CDIRTY set by its
    create's own intent transaction (index.c invariant 4), so a create and
    its first write commit once, as without the tier (before: twice, each
    an fdatasync of every member's journal).  A killed daemon and a lost
    cache then name the written files; a file created and never written
    is not named once the note expired."""
    a = make_array("raid0", 2, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    pwrite(a.mnt / "warm", 0, b"w" * 4096)     # the first journal txns
    c0 = int(status(a.mnt)["journal.commits"])
    for i in range(20):
        pwrite(a.mnt / f"f{i}", 0, bytes([i]) * 4096)
    c1 = int(status(a.mnt)["journal.commits"])
    assert c1 - c0 <= 22, f"{c1 - c0} journal commits for 20 creates"
    (a.mnt / "empty").write_bytes(b"")
    deadline = time.time() + 8.5                # the note expires (7.5 s),
    while time.time() < deadline:               # reads keep the idle flush off
        read_direct(a.mnt / "warm", 0, 4096)    # (direct: the daemon sees them)
        time.sleep(0.1)
    assert cst(a.mnt)["dirty_bytes"] >= 20 * 4096
    m.kill()
    shutil.rmtree(cdir)
    m = a.mount(opts=opts + ["cache_discard"], expect_errors=True)
    named = [l for l in m.log().splitlines() if "cache_discard" in l and "/" in l]
    for i in range(20):
        assert any(f"/f{i} lost" in l for l in named), (i, named)
    assert not any("/empty" in l for l in named), named


def test_a_clean_stop_leaves_no_name_of_a_file_never_written(make_array, tmp_path):
    """A file created in write-back is named in the journal by its create
    (index.c invariant 4).  Created empty, or written only to the RAID
    (above the high watermark, write.c invariant 9), and the tier stopped
    before the note expired: the stop drops the name, so an uncached
    mount of the array, which refuses one whose journal names files with
    data only in the tier, mounts (it once refused, for good)."""
    a = make_array("raid1", 2, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", mode="writeback"))
    (a.mnt / "empty").write_bytes(b"")
    pwrite(a.mnt / "full", 0, b"f" * 4096)
    flush(a.mnt)
    m.stop()
    m = a.mount()
    assert (a.mnt / "empty").read_bytes() == b""
    assert (a.mnt / "full").read_bytes() == b"f" * 4096
    m.stop()


def test_a_clean_stop_keeps_the_names_of_files_with_dirty_data(make_array, tmp_path):
    """The stop drops only the names of files never dirtied in the tier
    (bind.c tfs_cache_stop): a file created and written write-back, its
    note taken by that write, keeps its name through a clean stop, so a
    lost cache still names it and refuses the uncached mount."""
    a = make_array("raid1", 2, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    pwrite(a.mnt / "lost", 0, b"x" * 8192)
    (a.mnt / "empty").write_bytes(b"")
    assert fcache(a.mnt / "lost")["dirty_bytes"] == 8192
    m.stop()
    shutil.rmtree(cdir)
    msg = refused(a, [])
    assert "cache_discard" in msg, msg
    m = a.mount(opts=opts + ["cache_discard"], expect_errors=True)
    named = [l for l in m.log().splitlines() if "cache_discard" in l and "/" in l]
    assert any("/lost" in l for l in named), named
    assert not any("/empty" in l for l in named), named


def test_lost_cache_with_dirty_data(make_array, tmp_path):
    a = make_array("raid1", 2, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    safe = random.Random(11).randbytes(200 * K)
    pwrite(os.path.join(a.mnt, "safe"), 0, safe)
    flush(a.mnt)
    pwrite(os.path.join(a.mnt, "lost"), 0, b"x" * 100 * K, sync=True)
    assert fcache(os.path.join(a.mnt, "lost"))["dirty_bytes"] == 100 * K
    m.kill()
    shutil.rmtree(cdir)
    msg = refused(a, opts)
    assert "cache_discard" in msg, msg
    msg = refused(a, [])
    assert "cache_discard" in msg, msg
    m = a.mount(opts=opts + ["cache_discard"], expect_errors=True)
    log = m.log()
    assert "lost" in log and "cache_discard" in log, log
    named = [l for l in log.splitlines() if "cache_discard" in l and "/" in l]
    assert any("/lost" in l for l in named), log
    assert not any("/safe" in l for l in named), f"a clean file was named: {log}"
    same(read_all(os.path.join(a.mnt, "safe")), safe, "a clean file after cache_discard")
    read_all(os.path.join(a.mnt, "lost"))
    s = cst(a.mnt)
    assert s["dirty_bytes"] == 0 and s["cache"] == str(os.path.realpath(cdir)), s
    m.stop()
    a.mount()                       # nothing dirty any more
    same(read_all(os.path.join(a.mnt, "safe")), safe, "uncached")


def test_corrupt_cache(make_array, tmp_path):
    a = make_array("raid0", 2, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    p = os.path.join(a.mnt, "f")
    data = random.Random(12).randbytes(300 * K)
    pwrite(p, 0, data)
    flush(a.mnt)
    m.stop()
    mdb = cdir / "meta" / "data.mdb"
    assert mdb.exists()
    mdb.write_bytes(random.Random(1).randbytes(64 * K))
    m = a.mount(opts=opts, expect_errors=True)
    log = m.log()
    assert "made anew" in log, log
    same(read_all(p), data, "after the cache was made anew")
    pwrite(p, 0, b"y" * 8 * K, sync=True)
    assert fcache(p)["dirty_bytes"] == 8 * K
    data = b"y" * 8 * K + data[8 * K:]
    # corrupt with dirty data: refused
    m.kill()
    mdb.write_bytes(random.Random(2).randbytes(64 * K))
    msg = refused(a, opts)
    assert "cache_discard" in msg, msg
    m = a.mount(opts=opts + ["cache_discard"], expect_errors=True)
    assert "/f" in m.log()
    got = read_all(p)
    assert len(got) == len(data) and got[8 * K:] == data[8 * K:], "bytes never dirty changed"


def test_foreign_cache_refused(make_array, tmp_path):
    a = make_array("raid0", 2, "64K")
    b = make_array("raid0", 2, "64K")
    cdir = tmp_path / "cache"
    m = a.mount(opts=copts(cdir))
    ua = status(a.mnt)["uuid"]
    pwrite(os.path.join(a.mnt, "f"), 0, b"a" * 5000)
    flush(a.mnt)
    m.stop()
    mb = b.mount()
    ub = status(b.mnt)["uuid"]
    mb.stop()
    msg = refused(b, copts(cdir))
    assert ua in msg and ub in msg, msg
    m = a.mount(opts=copts(cdir))   # still a's
    same(read_all(os.path.join(a.mnt, "f")), b"a" * 5000, "a's file")


# ---------------------------------------------------------------------------
# 12. Warm after a clean remount
# ---------------------------------------------------------------------------

def test_a_write_only_the_tier_holds_moves_mtime(make_array, tmp_path):
    """A write-back write the members do not see yet still makes the file's
    modification time now (attr.c tfs_ns_touch, on the primary), as ext4
    does: make, backup and rsync go by it."""
    a = make_array("raid5", 3, "16K")
    a.mount(copts(tmp_path / "cache", mode="writeback"))
    p = a.mnt / "f"
    p.write_bytes(b"x" * 65536)
    flush(a.mnt)
    os.utime(p, ns=(10**18, 10**18))
    with open(p, "r+b") as f:
        f.write(b"y" * 4096)
    assert cst(a.mnt)["dirty_bytes"] > 0        # only the tier has it
    assert os.stat(p).st_mtime_ns > 10**18
    for m in a.members:                         # where the next mount reads it
        if os.stat(m / "root" / "f").st_mtime_ns > 10**18:
            break
    else:
        raise AssertionError("no member file has the new time")


def test_times_given_after_a_write_back_write_survive_its_flush(make_array, tmp_path):
    """cp -p, tar x and rsync -t write a file, then give it its times: the
    flusher's writes must not leave the members stamped with the time of
    the flush (attr.c invariant 5).  Before the fix the file's mtime became
    the flush's once the remount read it from the members."""
    a = make_array("raid5", 3, "16K")
    opts = copts(tmp_path / "cache", mode="writeback")
    m = a.mount(opts)
    p = a.mnt / "f"
    p.write_bytes(b"x" * 65536)
    os.utime(p, ns=(10**18, 2 * 10**18))
    assert cst(a.mnt)["dirty_bytes"] > 0
    flush(a.mnt)
    assert os.stat(p).st_mtime_ns == 2 * 10**18
    m.stop()
    for mm in a.members:
        assert os.stat(mm / "root" / "f").st_mtime_ns == 2 * 10**18, mm
    a.mount(opts)
    assert os.stat(p).st_mtime_ns == 2 * 10**18


def test_writes_through_the_tier_tell_the_members_their_time_at_most_a_second_late(
        make_array, tmp_path):
    """A write the tier holds moves the file's mtime at once for stat, on
    the members within a second, and at the last close (attr.c invariant
    4); an explicit time set after the writes wins over what was due."""
    a = make_array("raid5", 3, "16K")
    opts = copts(tmp_path / "cache", mode="writeback")
    m = a.mount(opts)
    p = a.mnt / "f"
    p.write_bytes(b"x" * 65536)
    os.utime(p, ns=(10**18, 10**18))

    def on_members():
        return max(os.stat(mm / "root" / "f").st_mtime_ns for mm in a.members)

    fd = os.open(p, os.O_RDWR)
    try:
        os.pwrite(fd, b"a" * 4096, 0)
        time.sleep(0.05)
        t2 = time.time_ns()
        os.pwrite(fd, b"b" * 4096, 8192)
        assert os.stat(p).st_mtime_ns >= t2         # stat: at once
        assert on_members() >= t2 - 10**9           # members: a second at most
        time.sleep(0.05)
        t3 = time.time_ns()
        os.pwrite(fd, b"c" * 4096, 16384)
    finally:
        os.close(fd)
    assert on_members() >= t3                       # the last close tells them
    # due, then an explicit time: the explicit one stays, also after close
    fd = os.open(p, os.O_RDWR)
    try:
        os.pwrite(fd, b"d" * 4096, 0)
        os.pwrite(fd, b"e" * 4096, 4096)
        os.utime(p, ns=(10**18, 3 * 10**18))
    finally:
        os.close(fd)
    assert os.stat(p).st_mtime_ns == 3 * 10**18
    assert on_members() == 3 * 10**18
    # a daemon killed after a burst leaves the members at most a second
    # behind its last write
    fd = os.open(p, os.O_RDWR)
    try:
        os.pwrite(fd, b"f" * 4096, 0)
        for i in range(20):
            t4 = time.time_ns()
            os.pwrite(fd, b"g" * 4096, 4096 * (i % 8))
            time.sleep(0.01)
    except BaseException:
        os.close(fd)
        raise
    m.kill()
    try:
        os.close(fd)        # the mount is gone: ENOTCONN
    except OSError:
        pass
    assert on_members() >= t4 - 10**9


def syncs(mnt):
    s = status(mnt)
    return int(s["raid.file_syncs"]), int(s["raid.file_syncs_skipped"])


def test_fdatasync_of_writes_only_the_tier_holds_does_not_sync_the_members(
        make_array, tmp_path):
    """An fdatasync in write-back waits for the SSD and not for the HDD
    members when nothing reached them since their last sync (data.c
    invariant 7); what did reach them (an extending truncate) is synced,
    and so is a full fsync once the writes' time was put on them.  That
    the skipped sync loses nothing is test_powercut.py's crash states.
    On /dev/fuse an fdatasync that waits for the SSD alone runs on the
    FUSE worker; the others go to the miss pool (fs.c tfs_fsync)."""
    a = make_array("raid5", 3, "16K")
    a.mount(copts(tmp_path / "cache", mode="writeback") + ["fuse_uring=off"])
    p = a.mnt / "f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    jobs = lambda: int(status(a.mnt)["pool.jobs"])  # noqa: E731
    try:
        os.pwrite(fd, b"a" * 8192, 0)
        os.fdatasync(fd)                    # the file's first: runs
        j1 = jobs()
        s0 = syncs(a.mnt)
        for i in range(5):
            os.pwrite(fd, bytes([i]) * 4096, 4096 * i)
            os.fdatasync(fd)
        s1 = syncs(a.mnt)
        assert s1 == (s0[0], s0[1] + 5), (s0, s1)
        assert jobs() == j1                 # the SSD alone: on the worker
        os.ftruncate(fd, 1 << 20)           # the members' size changed
        os.fdatasync(fd)
        s2 = syncs(a.mnt)
        assert s2[0] == s1[0] + 1, (s1, s2)
        assert jobs() == j1 + 1
        os.pwrite(fd, b"z" * 4096, 0)
        os.fsync(fd)                        # the time goes to the primary
        assert syncs(a.mnt)[0] == s2[0] + 1
        assert jobs() == j1 + 2
        assert os.pread(fd, 8192, 0) == b"z" * 4096 + b"\x01" * 4096
    finally:
        os.close(fd)


def test_clean_unmount_keeps_cache_warm(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    data = random.Random(13).randbytes(512 * K)
    prefill(a, {"f": data})
    opts = copts(tmp_path / "cache", seq_cutoff=0)
    m = a.mount(opts=opts)
    p = os.path.join(a.mnt, "f")
    same(read_direct(p, 128 * K, 4 * K), data[128 * K:132 * K], "first")
    same(read_direct(p, 132 * K, 4 * K), data[132 * K:136 * K], "second")
    wait_stat(a.mnt, "promotions", 1)
    m.stop()
    m = a.mount(opts=opts)
    s = cst(a.mnt)
    assert s["cached_extents"] == 1 and s["read_hits"] == 0, s
    same(read_direct(p, 160 * K, 8 * K), data[160 * K:168 * K], "after the remount")
    s = cst(a.mnt)
    assert (s["read_hits"], s["read_misses"]) == (1, 0), f"not warm after a remount: {s}"


# ---------------------------------------------------------------------------
# 13. Truncate, punch, unlink, rename, link, O_DIRECT and buffered mixed
# ---------------------------------------------------------------------------

def test_namespace_and_cut_consistency(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", seq_cutoff=0, dirty_low=90, dirty_high=95))
    rng = random.Random(14)
    d = os.path.join(a.mnt, "d")
    os.mkdir(d)
    p = os.path.join(a.mnt, "f")
    data = bytearray(rng.randbytes(256 * K))
    pwrite(p, 0, bytes(data))
    assert fcache(p)["dirty_bytes"] == 256 * K
    # truncate down then extend: the cut bytes read as zeros
    os.truncate(p, 100 * K + 123)
    os.truncate(p, 256 * K)
    data[100 * K + 123:] = bytes(len(data) - 100 * K - 123)
    same(read_direct(p, 0, 256 * K), bytes(data), "truncate down + up (O_DIRECT)")
    same(read_all(p), bytes(data), "truncate down + up (buffered)")
    assert fcache(p)["dirty_bytes"] <= 104 * K, fcache(p)
    # punch a hole in dirty data, unaligned
    punch(p, 10 * K + 5, 30 * K)
    data[10 * K + 5:40 * K + 5] = bytes(30 * K)
    same(read_direct(p, 0, 256 * K), bytes(data), "punched")
    # buffered and O_DIRECT mixed on one file
    b1 = rng.randbytes(10000)
    pwrite(p, 50 * K + 7, b1, create=False)
    data[50 * K + 7:50 * K + 7 + len(b1)] = b1
    same(read_direct(p, 48 * K, 16 * K), bytes(data[48 * K:64 * K]), "buffered, then O_DIRECT")
    b2 = rng.randbytes(8 * K)
    with open(p, "rb") as f:       # page cache populated ...
        f.read()
        write_direct(p, 52 * K, b2)  # ... then an O_DIRECT write
        data[52 * K:60 * K] = b2
        f.seek(0)
        same(f.read(), bytes(data), "O_DIRECT write, then buffered on an open fd")
    # rename keeps the cached (dirty) data, also into another directory
    before = fcache(p)
    os.rename(p, os.path.join(d, "g"))
    q = os.path.join(d, "g")
    after = fcache(q)
    assert after == before, (before, after)
    same(read_direct(q, 0, 256 * K), bytes(data), "after the rename")
    # a hard link shares it
    os.link(q, os.path.join(a.mnt, "h"))
    h = os.path.join(a.mnt, "h")
    assert fcache(h) == after
    b3 = rng.randbytes(4 * K)
    write_direct(h, 200 * K, b3)
    data[200 * K:204 * K] = b3
    same(read_direct(q, 0, 256 * K), bytes(data), "written through the other link")
    unlink(q)
    same(read_all(h), bytes(data), "after unlinking one name")
    assert fcache(h)["cached_bytes"] > 0
    # unlink of the last name drops its extents
    other = os.path.join(a.mnt, "other")
    pwrite(other, 0, rng.randbytes(64 * K))
    s0 = cst(a.mnt)
    n = fcache(h)["cached_bytes"]
    n_ext = (s0["cached_extents"] - 1)
    assert n > 0
    unlink(h)
    s1 = wait_until(lambda: (lambda s: s if s["cached_extents"] == 1 else None)(cst(a.mnt)),
                    "the unlinked file's extents to go", timeout=5)
    assert s1["dirty_extents"] == 1 and s1["dirty_bytes"] == 64 * K, (n_ext, s0, s1)
    flush(a.mnt)
    m.stop()
    a.mount()
    assert sorted(os.listdir(a.mnt)) == ["d", "other"]
    assert os.listdir(d) == []


def test_a_file_created_during_an_unlink_keeps_its_data(make_array, tmp_path):
    """An unlink's member calls are slowed (400 ms each): between the
    primary's unlink, which frees the file's inode number, and the daemon
    unbinding it, files are created and written (write-back) in another
    directory.  The member filesystem gives one of them the freed number;
    it once joined the removed file's inode, and the unlink then dropped
    that new file's dirty data as its own: it read back as zeros, in 3 of 5
    rounds.  Five rounds of 20 new files: every one reads what was written,
    and the removed files' extents are gone from the tier."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="64M", dirty_low=90, dirty_high=95),
            env={"TIERFS_FAULT": "delay=unlinkat:400"})
    for d in ("a", "b"):
        os.mkdir(os.path.join(a.mnt, d))
    written = {}
    for rnd in range(5):
        x = os.path.join(a.mnt, "a", f"x{rnd}")
        pwrite(x, 0, b"x" * 4096)
        t = threading.Thread(target=os.unlink, args=(x,))
        t.start()
        time.sleep(0.45)       # the primary's unlink is done; member 1's sleeps
        for i in range(20):
            p = os.path.join(a.mnt, "b", f"y{rnd}_{i}")
            written[p] = bytes([65 + rnd]) + bytes([48 + i]) * 4095
            pwrite(p, 0, written[p])
        t.join()
    lost = [p for p, b in written.items() if read_all(p) != b]
    assert not lost, f"{len(lost)} files read back other bytes, e.g. {lost[:3]}"
    assert cst(a.mnt)["cached_extents"] == len(written), cst(a.mnt)


# ---------------------------------------------------------------------------
# 14. Detach
# ---------------------------------------------------------------------------

def test_flush_of_a_file_with_more_extents_than_one_scan(make_array, tmp_path):
    """The flusher looks at 4096 extents of a file per batch, going round
    the file's list from where it stopped: a file of 6144 cached extents with
    a few dirty ones anywhere is still destaged whole."""
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", size="32M", extent="4K", seq_cutoff=0,
                           dirty_low=90, dirty_high=95))
    p = os.path.join(a.mnt, "f")
    rng = random.Random(60)
    data = bytearray(rng.randbytes(24 * M))
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for off in range(0, len(data), 256 * K):
            dwrite(fd, off, bytes(data[off:off + 256 * K]))
        assert cst(a.mnt)["dirty_extents"] == 6144
        flush(a.mnt)
        for rnd in range(3):
            for _ in range(12):
                off = rng.randrange(0, len(data), 4 * K)
                b = rng.randbytes(4 * K)
                dwrite(fd, off, b)
                data[off:off + 4 * K] = b
            assert cst(a.mnt)["cached_extents"] == 6144
            flush(a.mnt)
    finally:
        os.close(fd)
    m.stop()
    a.mount()
    same(read_all(p), bytes(data), "the members after three flushes")


def test_st_blocks_counts_writeback_data(make_array, tmp_path):
    """du must not see 0 bytes for data that only the SSD tier holds yet:
    st_blocks counts at least the file's dirty sectors (ext4 counts delayed
    allocations the same way), through writes, truncate, punch and flush."""
    a = make_array("raid5", 3, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", seq_cutoff=0, dirty_low=90, dirty_high=95))
    p = os.path.join(a.mnt, "f")

    def blocks_and_dirty():
        return os.stat(p).st_blocks * 512, fcache(p)["dirty_bytes"]

    write_direct(p, 0, random.Random(50).randbytes(1 * M), create=True)
    assert blocks_and_dirty() == (1 * M, 1 * M)
    members = sum(os.stat(member_path(a, k, "f")).st_blocks for k in range(3))
    assert members == 0, "write-back data reached the members before a flush"
    write_direct(p, 2 * M, b"x" * 4 * K)                 # a second region
    assert blocks_and_dirty() == (1 * M + 4 * K, 1 * M + 4 * K)
    os.truncate(p, 512 * K)
    assert blocks_and_dirty() == (512 * K, 512 * K)
    punch(p, 128 * K, 64 * K)
    assert blocks_and_dirty() == (448 * K, 448 * K)
    flush(a.mnt)
    b, d = blocks_and_dirty()
    assert d == 0 and b >= 448 * K, (b, d)
    m.stop()
    a.mount()                                           # the members alone (with parity)
    assert os.stat(p).st_blocks * 512 >= 448 * K


def test_detach(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    p = os.path.join(a.mnt, "f")
    data = bytearray(random.Random(15).randbytes(700 * K + 3))
    pwrite(p, 0, bytes(data))
    assert cst(a.mnt)["dirty_bytes"] > 0
    ctl(a.mnt, "detach")
    s = cst(a.mnt)
    assert s == {"cache": "none"}, s
    with pytest.raises(OSError):
        ctl(a.mnt, "flush")
    same(read_all(p), bytes(data), "detached")
    new = b"z" * 5000
    pwrite(p, 4096, new, create=False)
    data[4096:4096 + 5000] = new
    same(read_direct(p, 0, 704 * K), bytes(data), "written after the detach")
    assert fcache(p)["cached_bytes"] == 0
    m.stop()
    m = a.mount()
    same(read_all(p), bytes(data), "uncached mount after the detach")
    m.stop()
    m = a.mount(opts=opts, expect_errors=True)   # the same directory again
    s = cst(a.mnt)
    assert s["cached_extents"] == 0 and s["mode"] == "writeback", s
    same(read_all(p), bytes(data), "cache attached again")
    pwrite(p, 0, b"q" * 100, create=False)
    data[:100] = b"q" * 100
    assert fcache(p)["dirty_bytes"] == 4096
    m.stop()
    m = a.mount(opts=opts)
    same(read_all(p), bytes(data), "after a remount with the cache")


# ---------------------------------------------------------------------------
# Extending writes racing the flusher
# ---------------------------------------------------------------------------

def test_extending_writes_race_the_flusher(make_array, tmp_path):
    """Every write grows its file while the flusher runs all the time
    (dirty_low=1): what the flusher destages must never be cut at a size
    the file had before the write it is destaging."""
    a = make_array("raid1", 2, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", size="1M", extent="64K", dirty_low=1,
                           dirty_high=50, seq_cutoff=0))
    rng = random.Random(16)
    names = [f"g{i}" for i in range(6)]
    model = {n: bytearray() for n in names}
    fds = {n: os.open(os.path.join(a.mnt, n), os.O_RDWR | os.O_CREAT, 0o644) for n in names}
    try:
        for _ in range(1500):
            n = rng.choice(names)
            d = model[n]
            off = len(d) + rng.choice([0, 0, rng.randint(0, 20000)])
            b = rng.randbytes(rng.randint(1, 40000))
            assert os.pwrite(fds[n], b, off) == len(b)
            d.extend(bytes(off - len(d)))
            d += b
    finally:
        for fd in fds.values():
            os.close(fd)
    for n in names:
        same(read_all(os.path.join(a.mnt, n)), bytes(model[n]), f"{n} (cached)")
    flush(a.mnt)
    m.stop()
    a.mount()
    for n in names:
        same(read_all(os.path.join(a.mnt, n)), bytes(model[n]), f"{n} (uncached mount)")


# ---------------------------------------------------------------------------
# 16. tierctl flush / mode / detach, and a flush the RAID refuses
# ---------------------------------------------------------------------------

def tierctl(*args):
    from conftest import BUILD
    return subprocess.run([str(BUILD / "tierctl"), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_tierctl_flush_mode_detach(make_array, tmp_path):
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", dirty_low=90, dirty_high=95))
    assert cst(a.mnt)["extent"] == 256 * K          # the default
    p = os.path.join(a.mnt, "f")
    data = random.Random(16).randbytes(2 * M)
    pwrite(p, 0, data)
    assert cst(a.mnt)["dirty_bytes"] == 2 * M
    r = tierctl("status", a.mnt)
    assert r.returncode == 0 and "writeback, wtinylfu" in r.stdout and \
        "2 MiB dirty" in r.stdout, r.stdout
    r = tierctl("flush", a.mnt)
    assert r.returncode == 0 and "flushed 2 MiB to the members: nothing dirty" in r.stdout, \
        (r.stdout, r.stderr)
    r = tierctl("flush", a.mnt)
    assert r.returncode == 0 and "flushed: nothing was dirty" in r.stdout, (r.stdout, r.stderr)
    assert cst(a.mnt)["dirty_bytes"] == 0
    r = tierctl("mode", a.mnt, "sideways")
    assert r.returncode == 1 and "writeback, writethrough, writearound or off" in r.stderr, r
    pwrite(p, 0, data[:M][::-1], create=False)          # dirty again, then leave write-back
    r = tierctl("mode", a.mnt, "writethrough")
    assert r.returncode == 0 and "flushed" in r.stdout, (r.stdout, r.stderr)
    s = cst(a.mnt)
    assert s["mode"] == "writethrough" and s["dirty_bytes"] == 0, s
    r = tierctl("detach", a.mnt)
    assert r.returncode == 0 and "detached" in r.stdout, (r.stdout, r.stderr)
    assert status(a.mnt)["cache"] == "none"
    r = tierctl("flush", a.mnt)
    assert r.returncode == 1 and "no cache is attached" in r.stderr, (r.stdout, r.stderr)
    same(read_all(p), data[:M][::-1] + data[M:], "after detach")


def test_flush_refused_by_the_raid_is_reported(make_array, tmp_path):
    """A member that refuses every write: the write-back writes are
    acknowledged from the SSD, the flush stops with the reason, the data stays
    dirty and readable, nothing is lost."""
    a = make_array("raid0", 2, "4K")
    a.mount(opts=copts(tmp_path / "cache", dirty_low=90, dirty_high=95),
            env={"TIERFS_FAULT": "eio_write=1"}, expect_errors=True)
    p = os.path.join(a.mnt, "f")
    data = random.Random(17).randbytes(256 * K)
    pwrite(p, 0, data)
    r = tierctl("flush", a.mnt)
    assert r.returncode == 1 and "flush stopped" in r.stderr and \
        "Input/output error" in r.stderr, (r.stdout, r.stderr)
    s = cst(a.mnt)
    assert s["dirty_bytes"] > 0 and s["flush_error"] == "Input/output error", s
    same(read_all(p), data, "dirty data after a refused flush")


# ---------------------------------------------------------------------------
# 17. Databases on a write-back RAID5: SQLite through a daemon kill, and
#     PostgreSQL (pgbench) through a remount
# ---------------------------------------------------------------------------

SQLITE_TXN = ("BEGIN;\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE "
              "x<500) INSERT INTO t(k, v) SELECT hex(randomblob(8)), randomblob(abs(random()) "
              "% 400) FROM c;\nCOMMIT;\n")


def sqlite3(db, sql):
    r = subprocess.run(["sqlite3", "-bail", str(db)], input=sql, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_sqlite_survives_daemon_kill(make_array, tmp_path):
    """Committed SQLite transactions (fsynced through the write-back cache)
    survive SIGKILL of the daemon: the remount recovers them from the SSD."""
    a = make_array("raid5", 3, "16K")
    cdir = tmp_path / "cache"
    opts = copts(cdir, size="16M", extent="16K")
    m = a.mount(opts=opts)
    db = os.path.join(a.mnt, "t.db")
    sqlite3(db, "PRAGMA journal_mode=WAL;\nCREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, "
                "v BLOB);\nCREATE INDEX tk ON t(k);\n")
    rows = 0
    for rnd in range(3):
        sqlite3(db, SQLITE_TXN * 4 + "UPDATE t SET k = 'u' || k WHERE id % 5 = 0;\n")
        rows += 2000
        assert cst(a.mnt)["dirty_bytes"] > 0
        m.kill()
        m = a.mount(opts=opts)
        out = sqlite3(db, "PRAGMA integrity_check;\nSELECT count(*) FROM t;\n")
        assert out == ["ok", str(rows)], (rnd, out)
    flush(a.mnt)
    m.stop()
    a.mount()                               # on the members alone
    assert sqlite3(db, "PRAGMA integrity_check;\nSELECT count(*) FROM t;\n") == ["ok", str(rows)]


def pg_bin():
    import glob
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    pytest.fail("PostgreSQL is not installed (contrib/deps.sh --test installs it)")


def test_postgresql_pgbench(make_array, tmp_path):
    """PostgreSQL runs unmodified on a write-back cached RAID5 (as the
    postgres user): pgbench, a clean remount, and pgbench's own invariant
    (the balances equal the history) checked on the members alone."""
    import pwd
    bindir = pg_bin()
    pw = pwd.getpwnam("postgres")
    import tempfile
    a = make_array("raid5", 3, "16K")
    # the postgres user must reach the mount and the socket: both live in a
    # directory of their own (pytest keeps its base directory private)
    pub = tempfile.mkdtemp(prefix="tierfs-pg-", dir="/tmp")
    os.chmod(pub, 0o755)
    a.mnt = pathlib.Path(pub) / "mnt"
    opts = copts(tmp_path / "cache", size="64M", extent="16K") + ["allow_other"]
    m = a.mount(opts=opts)
    data = os.path.join(a.mnt, "pg")
    sock = pathlib.Path(pub) / "sock"
    os.mkdir(data)
    os.chown(data, pw.pw_uid, pw.pw_gid)
    os.mkdir(sock)
    os.chown(sock, pw.pw_uid, pw.pw_gid)
    request_cleanup = lambda: shutil.rmtree(pub, ignore_errors=True)  # noqa: E731

    def as_pg(*args, timeout=240):
        r = subprocess.run(["runuser", "-u", "postgres", "--", *map(str, args)],
                           capture_output=True, text=True, timeout=timeout, cwd="/")
        assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
        return r.stdout

    def pg(cmd):
        return as_pg(f"{bindir}/pg_ctl", "-D", data, "-w", "-t", "120", "-l",
                     os.path.join(data, "log"), "-o", f"-k {sock} -c listen_addresses=''", cmd)

    def sql(q):
        return as_pg(f"{bindir}/psql", "-h", sock, "-d", "postgres", "-At", "-c", q).split()

    as_pg(f"{bindir}/initdb", "-D", data, "--no-locale", "-E", "UTF8")
    pg("start")
    try:
        as_pg("/usr/bin/pgbench", "-h", sock, "-i", "-s", "2", "postgres")
        as_pg("/usr/bin/pgbench", "-h", sock, "-c", "4", "-t", "150", "postgres")
        assert cst(a.mnt)["write_hits"] + cst(a.mnt)["write_misses"] > 0
        check = ("SELECT (SELECT sum(abalance) FROM pgbench_accounts) = "
                 "(SELECT sum(delta) FROM pgbench_history), (SELECT count(*) FROM "
                 "pgbench_history);")
        before = sql(check)
        assert before == ["t|600"], before
    finally:
        pg("stop")
    m.stop()
    m = a.mount(opts=opts)                   # warm cache, dirty data from before
    pg("start")
    try:
        assert sql(check) == before
    finally:
        pg("stop")
    flush(a.mnt)
    m.stop()
    a.mount(opts=["allow_other"])            # the members alone
    pg("start")
    try:
        assert sql(check) == before
    finally:
        pg("stop")
        a.mounts[-1].stop()
        request_cleanup()


def test_maildir_through_daemon_kill(make_array, tmp_path):
    """A maildir (Python's mailbox: write in tmp/, fsync, link/rename into
    new/, flags by rename into cur/, deletes) on a write-back cached RAID5;
    every delivery the store confirmed survives SIGKILL of the daemon."""
    import mailbox
    a = make_array("raid5", 3, "16K")
    opts = copts(tmp_path / "cache", size="16M", extent="16K")
    m = a.mount(opts=opts)
    box = os.path.join(a.mnt, "Maildir")
    md = mailbox.Maildir(box, create=True)
    rng = random.Random(18)
    want = {}
    for i in range(300):
        body = rng.randbytes(rng.randrange(200, 20000)).hex()
        msg = mailbox.MaildirMessage(f"Subject: m{i}\n\n{body}\n")
        key = md.add(msg)
        want[key] = body
    for key in list(want)[:100]:                 # read: new/ -> cur/ with flags
        msg = md[key]
        msg.set_subdir("cur")
        msg.add_flag("S")
        md[key] = msg
    for key in list(want)[100:150]:
        md.remove(key)
        del want[key]
    md.close()
    os.sync()
    assert cst(a.mnt)["dirty_bytes"] > 0
    m.kill()
    a.mount(opts=opts)
    md = mailbox.Maildir(box, create=False)
    assert sorted(md.keys()) == sorted(want)
    for key, body in want.items():
        assert md[key].get_payload().strip() == body, key
    assert sum(1 for k in want if "S" in md[k].get_flags()) == 100


def test_tierctl_flush_ends_while_writes_go_on(make_array, tmp_path):
    """'flush everything' covers what is dirty when it is asked: a writer that
    keeps dirtying the cache does not hold it up."""
    import threading
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", dirty_low=90,
                       dirty_high=95))
    p = os.path.join(a.mnt, "f")
    pwrite(p, 0, random.Random(19).randbytes(4 * M))
    stop = threading.Event()

    def writer():
        rng = random.Random(20)
        fd = os.open(p, os.O_WRONLY)
        try:
            while not stop.is_set():
                os.pwrite(fd, rng.randbytes(4 * K), rng.randrange(1024) * 4 * K)
        finally:
            os.close(fd)

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(0.3)
        r = tierctl("flush", a.mnt)
    finally:
        stop.set()
        t.join()
    assert r.returncode == 0 and "flushed" in r.stdout, (r.stdout, r.stderr)
    assert cst(a.mnt)["flush_pending"] == 0


# ---------------------------------------------------------------------------
# 18. The restart walk for the files of dirty extents: a rename racing it,
#     a file it cannot identify, a walk that keeps failing
# ---------------------------------------------------------------------------

def dirty_then_kill(a, m, files):
    """Write files (name -> bytes) write-back, check they are dirty, SIGKILL."""
    for n, b in files.items():
        pwrite(os.path.join(a.mnt, n), 0, b)
    s = cst(a.mnt)
    assert s["dirty_bytes"] >= sum(len(b) for b in files.values()), s
    m.kill()


def flushed_to_members(a, m, files):
    """tierctl flush, then the files through an uncached mount."""
    r = tierctl("flush", a.mnt)
    assert r.returncode == 0 and "flushed" in r.stdout, (r.stdout, r.stderr)
    m.stop()
    u = a.mount()
    for n, b in files.items():
        same(read_all(os.path.join(a.mnt, n)), b, f"{n} on the members")
    u.stop()


def test_restart_walk_keeps_files_moved_during_it(make_array, tmp_path):
    """After a kill the walk for the dirty files is slowed (every openat
    sleeps 150 ms).  Once it has read the root and found its first file, the
    directories are renamed (the walk then meets their old names gone) and a
    file is moved from a directory to the root (whose names it has read).  No
    dirty data is dropped: the moved file is found by the rename's own lookup,
    the moved directories by the walk done again with renames held off; all
    of it reaches the members with tierctl flush."""
    a = make_array("raid1", 2, "64K")
    opts = copts(tmp_path / "cache", dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    files = {}
    for i, d in enumerate(["d0", "d1", "d2", "d3", "s"]):
        os.mkdir(os.path.join(a.mnt, d))
        files[f"{d}/f"] = random.Random(40 + i).randbytes(100 * K + i)
    dirty_then_kill(a, m, files)
    m.env = {"TIERFS_FAULT": "delay=openat:150"}
    m.start()
    wait_until(lambda: cst(a.mnt)["unresolved_files"] < 5, "the walk to find a file")
    moved = {}
    for d in ["d0", "d1", "d2", "d3"]:
        os.rename(os.path.join(a.mnt, d), os.path.join(a.mnt, "e" + d))
        moved[f"e{d}/f"] = files[f"{d}/f"]
    os.rename(os.path.join(a.mnt, "s", "f"), os.path.join(a.mnt, "top"))
    moved["top"] = files["s/f"]
    wait_stat(a.mnt, "unresolved_files", 0)
    assert "no longer exists" not in m.log(), m.log()
    for n, b in moved.items():
        same(read_all(os.path.join(a.mnt, n)), b, f"{n} after the restart")
    m.env = None
    flushed_to_members(a, m, moved)


def test_restart_walk_retries_a_file_it_could_not_identify(make_array, tmp_path):
    """The walk's first open of f1 fails (EIO, once): the lookup cannot read
    its identity.  The file is not taken for deleted: the walk is done again
    and finds it; its dirty data reaches the members.  A file whose member
    files were removed while the daemon was down is dropped (only) by that
    second walk, which met every file."""
    a = make_array("raid5", 3, "64K")
    opts = copts(tmp_path / "cache", dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    files = {f"f{i}": random.Random(50 + i).randbytes(80 * K + i) for i in range(3)}
    dirty_then_kill(a, m, dict(files, gone=b"g" * 5000))
    for k in range(3):
        os.unlink(member_path(a, k, "gone"))
    m.env = {"TIERFS_FAULT": "eio_at=openat:f1:1"}
    m.expect_errors = True          # the walk that met the EIO says so (checked below)
    m.start()
    wait_stat(a.mnt, "unresolved_files", 0)
    assert "fault: EIO on member" in m.log(), "the fault was not injected"
    errors = [l for l in m.log().splitlines() if ": error:" in l]
    assert all("not found yet: Input/output error" in l for l in errors), errors
    said = [l for l in m.log().splitlines() if "no longer exists" in l]
    assert len(said) == 1, said
    assert not os.path.exists(os.path.join(a.mnt, "gone"))
    for n, b in files.items():
        same(read_all(os.path.join(a.mnt, n)), b, f"{n} after the restart")
    m.env = None
    flushed_to_members(a, m, files)


def test_restart_walk_failing_is_reported_not_waited_for(make_array, tmp_path):
    """Every lookup of 'bad' fails (EIO) after a kill, so no walk for the
    dirty files completes.  The flusher backs off and logs it once; tierctl
    flush and detach end with a one-line error naming the unfound files
    instead of hanging; nothing is dropped, and once the fault is gone the
    next mount finds the files and flushes them to the members."""
    a = make_array("raid5", 3, "64K")
    opts = copts(tmp_path / "cache", dirty_low=90, dirty_high=95)
    m = a.mount(opts=opts)
    files = {n: random.Random(60 + i).randbytes(64 * K + i)
             for i, n in enumerate(["good", "bad"])}
    dirty_then_kill(a, m, files)
    m.env = {"TIERFS_FAULT": "eio_at=fstatat:bad"}
    m.expect_errors = True
    m.start()
    from conftest import BUILD
    try:
        r = subprocess.run([str(BUILD / "tierctl"), "flush", str(a.mnt)], capture_output=True,
                           text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("tierctl flush hangs while a dirty file cannot be found")
    err = r.stderr.strip()
    assert r.returncode == 1 and "not found since the restart" in err and "\n" not in err, \
        (r.stdout, r.stderr)
    with pytest.raises(OSError):
        guard(ctl, a.mnt, "detach", what="detach")
    assert "not found since the restart" in status(a.mnt)["ctl_error"], status(a.mnt)
    s = cst(a.mnt)
    assert s["mode"] == "off" and s["unresolved_files"] >= 1, s   # still attached
    time.sleep(3.5)                                   # walks at 1 s and 3 s
    said = [l for l in m.log().splitlines() if "dirty data not found yet" in l]
    assert len(said) == 1, said
    assert "no longer exists" not in m.log(), m.log()
    m.env = None
    m.stop()
    m.start()
    wait_stat(a.mnt, "unresolved_files", 0)
    for n, b in files.items():
        same(read_all(os.path.join(a.mnt, n)), b, f"{n} after the fault")
    flushed_to_members(a, m, files)


# ---------------------------------------------------------------------------
# 19. Detach racing a write that read the cache mode before it
# ---------------------------------------------------------------------------

def test_detach_waits_for_a_write_already_inside(make_array, tmp_path):
    """A write-back write whose partial sectors are filled from the RAID, with
    every member read slowed to 300 ms, is inside the cache when the detach
    comes.  The detach waits for it and flushes it, or it goes to the RAID; it
    is never acknowledged into the unbound cache (which would hide it from
    reads and leave its file named dirty in the journal)."""
    import threading
    a = make_array("raid5", 3, "64K")
    base = random.Random(21).randbytes(512 * K)
    prefill(a, {"f": base})
    m = a.mount(opts=copts(tmp_path / "cache", dirty_low=90, dirty_high=95),
                env={"TIERFS_FAULT": "delay=read:300"})
    p = os.path.join(a.mnt, "f")
    model = bytearray(base)
    writes = [(100, b"w" * 5000), (300 * K + 7, b"v" * 3000)]
    box = {}

    def run(what, fn, *args):
        try:
            fn(*args)
        except OSError as e:
            box[what] = e
    threads = []
    for i, (off, b) in enumerate(writes):
        threads.append(threading.Thread(target=run, args=(f"write {i}", pwrite, p, off, b,
                                                          False)))
        threads[-1].start()
        if i == 0:
            time.sleep(0.1)               # inside, waiting for its fill
            threads.append(threading.Thread(target=run, args=("detach", ctl, a.mnt,
                                                              "detach")))
            threads[-1].start()
            time.sleep(0.1)               # the second one comes during the detach
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a write or the detach hangs"
    assert not box, (box, status(a.mnt).get("ctl_error"))
    for off, b in writes:
        model[off:off + len(b)] = b
    assert status(a.mnt)["cache"] == "none"
    same(read_all(p), bytes(model), "after the detach")
    m.stop()
    a.mount()                             # uncached: nothing may be named dirty
    same(read_all(p), bytes(model), "through an uncached mount")


# ---------------------------------------------------------------------------
# 20. SSD errors keep their errno
# ---------------------------------------------------------------------------

def _ssd_full(cdir):
    """The tier's data file in cdir (a small tmpfs) with its blocks punched
    out and the tmpfs filled: its slots' writes fail with ENOSPC until the
    returned filler is removed."""
    fd = os.open(str(cdir / "data"), os.O_RDWR)
    try:
        assert _libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                               os.fstat(fd).st_size) == 0
    finally:
        os.close(fd)
    filler = cdir / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


@contextlib.contextmanager
def _tmpfs(path, size):
    """A tmpfs of size mounted on path, unmounted at the end (lazily if
    still busy, as test_fullfs's: never left mounted)."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def test_ssd_enospc_reaches_the_application_as_enospc(make_array, tmp_path):
    """The cache directory on a small tmpfs; the data file's blocks are
    punched out and the tmpfs filled, so a write-back write into a slot fails
    with ENOSPC on the SSD.  The application gets ENOSPC (not EIO), the
    daemon keeps serving, and the write works once space is back."""
    a = make_array("raid1", 2, "64K")
    with _tmpfs(tmp_path / "cache", "8m") as cdir:
        try:
            m = a.mount(opts=copts(cdir, size="2M", extent="64K", dirty_low=90, dirty_high=95),
                        expect_errors=True)
            filler = _ssd_full(cdir)
            p = os.path.join(a.mnt, "f")
            b = random.Random(22).randbytes(8 * K)
            with pytest.raises(OSError) as ei:
                pwrite(p, 0, b)
            assert ei.value.errno == errno.ENOSPC, ei.value
            assert "No space left on device" in m.log()
            os.unlink(filler)
            pwrite(p, 0, b, create=False)
            same(read_all(p), b, "written once space is back")
            flush(a.mnt)
            m.stop()
        finally:
            for mm in a.mounts:
                mm.stop()


def test_a_copy_the_ssd_cannot_take_is_dropped_not_the_write(make_array, tmp_path):
    """A stream's full-row write keeps a clean copy in the tier (write.c
    invariant 11); when the slot's write fails (a full SSD), the copy is
    dropped and the write, which the members took, succeeds: before, the
    application got ENOSPC for bytes the members held."""
    a = make_array("raid1", 2, "64K")                # rows of a chunk, 64K
    with _tmpfs(tmp_path / "cache", "8m") as cdir:
        try:
            m = a.mount(opts=copts(cdir, size="2M", extent="64K", seq_cutoff="64K"),
                        expect_errors=True)
            _ssd_full(cdir)
            p = a.mnt / "f"
            data = random.Random(23).randbytes(1 * M)
            full_row_copy(p, data, 64 * K)
            s = cst(a.mnt)
            assert s["seq_bypass"] >= 16 and s["stream_copies"] == s["cached_extents"] == 0, s
            assert "No space left on device" in m.log()
            same(read_direct(p, 0, 1 * M), data, "the copy, from the members")
            m.stop()
            a.mount()
            same(read_all(p), data, "the members alone")
        finally:
            for mm in a.mounts:
                mm.stop()


def test_truncate_that_cannot_open_the_file_drops_nothing(make_array, tmp_path):
    """A truncate whose member files cannot be opened (EIO on the primary)
    fails with nothing cut: the tier keeps the file's dirty data past the
    new end (dispatch.c invariant 3 opens every member file before the
    tier drops anything).  Before, the tier dropped it first and then the
    truncate failed: after a kill the file read back empty (0 bytes of
    204,800), though nothing had been cut."""
    a = make_array("raid1", 2, "64K")
    m = a.mount(opts=copts(tmp_path / "cache", dirty_low=90, dirty_high=95),
                env={"TIERFS_FAULT": "eio_at=openat:t"}, expect_errors=True)
    data = random.Random(71).randbytes(200 * K)
    x, t = os.path.join(a.mnt, "x"), os.path.join(a.mnt, "t")
    pwrite(x, 0, data)
    assert cst(a.mnt)["dirty_bytes"] >= len(data)
    os.rename(x, t)                     # its member files are now opened as 't'
    with pytest.raises(OSError) as e:
        os.truncate(t, 4 * K)
    assert e.value.errno == errno.EIO, e.value
    assert "fault: EIO on member" in m.log(), "the fault was not injected"
    m.kill()
    m.env = None
    m.start()
    same(read_all(t), data, "t after the failed truncate and a kill")
    m.stop()


@pytest.mark.parametrize("mode", ["writethrough", "writeback"])
def test_rename_over_a_file_drops_its_extents(make_array, tmp_path, mode):
    """A rename over a closed file removes its last name: its extents leave
    the tier then, as an unlink's do (identity.c decides "gone" in one place).
    Before, they stayed: write-through, cached until evicted; write-back,
    dirty data of a file nobody can reach, written to no member."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", mode=mode, extent="64K", seq_cutoff=0, promote=1))
    old, new = a.mnt / "old", a.mnt / "new"
    pwrite(old, 0, random.Random(72).randbytes(256 * K))
    data = random.Random(73).randbytes(64 * K)
    pwrite(new, 0, data)
    wait_stat(a.mnt, "cached_extents", 5)      # write-through too: clean (write.c inv. 12)
    os.rename(new, old)
    # the kernel sends the last release of 'old' after close returns: the
    # rename or that release drops it, whichever comes last
    s = wait_stat(a.mnt, "cached_extents", 1, timeout=5)
    if mode == "writeback":
        assert s["dirty_bytes"] == len(data), s
    same(read_all(old), data, "old after the rename")


def test_file_unlinked_while_the_flusher_has_it_open_leaves_the_tier(make_array, tmp_path):
    """The flusher opens a dirty file to destage it (member writes slowed
    to 400 ms); meanwhile the file is unlinked and closed, so the flusher's
    is the last use.  Its release finds the file gone (identity.c invariant 2)
    and the extents leave the tier.  Before, that release's answer was
    ignored: the extents, clean after the flush, stayed cached for a file
    nobody could reach, until evicted."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", extent="64K", dirty_low=90, dirty_high=95),
            env={"TIERFS_FAULT": "delay=write:400"})
    p = a.mnt / "f"
    pwrite(p, 0, random.Random(74).randbytes(256 * K))
    wait_stat(a.mnt, "cached_extents", 4)
    t = threading.Thread(target=lambda: ctl(a.mnt, "flush"))
    t.start()
    try:
        wait_until(lambda: cst(a.mnt)["flush_pending"] or None, "the flush started", 5)
        time.sleep(0.2)                 # inside its first (slowed) member write
        os.unlink(p)
    finally:
        t.join()
    wait_stat(a.mnt, "cached_extents", 0, timeout=5)


def test_extents_sharing_a_heat_slot_are_promoted(make_array, tmp_path):
    """Issue 16: the heat of extents not cached was direct-mapped by key,
    so two extents sharing a slot reset each other at every access and,
    read in one fixed order, neither ever reached the promotion threshold:
    of 4096 extents read again and again some never reached the tier.  The
    table is set-associative now (index.c invariant 6): every extent of a
    file read in a fixed order, twice and more, is promoted."""
    a = make_array("raid0", 2, "64K")
    p = a.mnt / "f"
    n = 4096                                   # extents of 4K: 16 MiB
    m = a.mount()                              # written without the tier: no heat yet
    pwrite(p, 0, random.Random(5).randbytes(n * 4 * K))
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", size="32M", extent="4K", seq_cutoff=0))
    assert os.getxattr(str(p), "user.tierfs.extents") == b"0"
    order = list(range(n))
    random.Random(6).shuffle(order)            # one order, every pass
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    buf = abuf(4 * K)
    try:
        for _ in range(8):
            for i in order:
                os.preadv(fd, [buf], i * 4 * K)
            wait_stat(a.mnt, "promote_backlog", 0)     # the promoters drained their queue
            if int(os.getxattr(str(p), "user.tierfs.extents")) == n:
                break
    finally:
        os.close(fd)
    assert int(os.getxattr(str(p), "user.tierfs.extents")) == n, cst(a.mnt)


def test_a_partly_cached_extent_is_filled_by_reads(make_array, tmp_path):
    """Issue 16: an extent the tier holds in part (an 8K write-back write
    into it) used to miss for good on the rest, since only extents not
    cached were promoted.  Reads of it now heat it and the promoter fills
    the sectors it lacks from the RAID (flush.c invariant 14), keeping the
    dirty ones: the whole extent reads from the SSD, with the new 8K."""
    a = make_array("raid5", 3, "64K")
    p = a.mnt / "f"
    old = random.Random(7).randbytes(256 * K)
    m = a.mount()                                  # the extent's bytes on the members
    pwrite(p, 0, old)
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", seq_cutoff=0))
    new = b"N" * (8 * K)
    write_direct(p, 0, new)                        # the tier holds 2 of its 64 sectors
    assert os.getxattr(str(p), "user.tierfs.residency") == f"0 {8 * K} dirty\n".encode()
    want = new + old[8 * K:]
    for _ in range(3):
        assert read_direct(p, 0, 256 * K) == want
    wait_until(lambda: cst(a.mnt)["fill_promotions"] >= 1, "the fill")
    assert os.getxattr(str(p), "user.tierfs.residency") == \
        f"0 {8 * K} dirty\n{8 * K} {248 * K} clean\n".encode()
    before = cst(a.mnt)
    assert read_direct(p, 0, 256 * K) == want
    after = cst(a.mnt)
    assert after["read_req_hits"] == before["read_req_hits"] + 1, (before, after)
    # flushed and read back through an uncached mount: nothing lost
    flush(a.mnt)
    a.mounts[-1].stop()
    a.mount()
    assert read_all(p) == want


@pytest.mark.parametrize("racer", ["punch", "write"])
def test_a_fill_records_its_extent_before_letting_it_go(make_array, tmp_path, racer):
    """A fill's record is committed while its extent is still the
    filler's (index.c invariant 1).  It was committed after, and what came
    in between was undone by it:
    - punch: the punch deleted the record and freed the slot, then the
      fill's record came back naming the freed slot for the punched
      extent, its 8K of write-back data dirty.  The slot went to another
      file's write; at the next start the store named the slot twice and
      the cache was refused ("Structure needs cleaning"), as a CI run of
      test_model_every_mode once found.
    - write: a write-back write into the extent committed its record (the
      sectors dirty), then the fill's record, made before it, said them
      clean; after a durability point and a power cut the tier trusts
      dirty sectors only, and the acknowledged, fsynced write was gone.
    A slow store (store_put_delay) holds the fill's commit open for the
    racer to come in and commit first."""
    a = make_array("raid5", 3, "64K")
    f, g = a.mnt / "f", a.mnt / "g"
    old = random.Random(11).randbytes(256 * K)
    m = a.mount()
    pwrite(f, 0, old)
    m.stop()
    opts = copts(tmp_path / "cache", seq_cutoff=0)
    when = tmp_path / "cut-now"
    # the fill's record is the second put (after the 8K write's): it alone
    # is slow, so the racer's own record can pass it
    fault = "store_put_delay=1500:2"
    if racer == "write":
        fault += f",drop_unsynced,cut_when={when}"
    m = a.mount(opts=opts, env={"TIERFS_FAULT": fault})
    write_direct(f, 0, b"N" * (8 * K))            # 2 of the extent's 64 sectors, dirty
    want = bytearray(b"N" * (8 * K) + old[8 * K:])
    for _ in range(2):                             # heat: the promoter fills the rest
        assert read_direct(f, 0, 256 * K) == want
    time.sleep(0.5)                                # the fill is in its commit
    if racer == "punch":
        punch(f, 0, 256 * K)
        want = bytearray(256 * K)
        wait_stat(a.mnt, "promote_backlog", 0)
        write_direct(g, 0, b"G" * (8 * K), create=True)   # takes the slot the punch freed
        m.stop()
        a.mount(opts=opts)                         # a start refused the extent map here
    else:
        pwrite(f, 192 * K, b"W" * (8 * K), create=False, sync=True)
        want[192 * K:200 * K] = b"W" * (8 * K)
        wait_stat(a.mnt, "promote_backlog", 0)
        pwrite(g, 0, b"G" * (8 * K), sync=True)   # a durability point after the fill's
        when.touch()                               # the power cut, at the next write
        with contextlib.suppress(OSError):
            pwrite(a.mnt / "bystander", 0, b"x" * 4096, sync=True)
        m.wait_dead()
        assert "fault: power cut: undid" in m.log(), m.log()[-2000:]
        a.mount(opts=opts, env={"TIERFS_BOOT_ID": "after-the-cut"})
    same(read_direct(f, 0, 256 * K), bytes(want), "f, read through the tier")
    flush(a.mnt)
    a.mounts[-1].stop()
    a.mount()
    same(read_all(f), bytes(want), "f, read back through an uncached mount")
    assert read_all(g) == b"G" * (8 * K)


def _hot_hits_around(a, opts, copy):
    """A hot set of 64 extents (file hot, written without the tier) read
    through a tier mounted with opts, promote=1, until all 64 hit; then
    copy(); returns the hits of the hot set read once more after it."""
    hot = a.mnt / "hot"
    m = a.mount()
    pwrite(hot, 0, random.Random(1).randbytes(64 * 64 * K))
    m.stop()
    a.mount(opts=opts)
    fd = os.open(hot, os.O_RDONLY | os.O_DIRECT)
    buf = abuf(4 * K)

    def hits():
        before = cst(a.mnt)["read_hits"]
        for e in range(64):
            os.preadv(fd, [buf], e * 64 * K)
        return cst(a.mnt)["read_hits"] - before

    try:
        for _ in range(2):
            hits()
            wait_stat(a.mnt, "promote_backlog", 0)
        assert hits() == 64
        copy()
        return hits()
    finally:
        os.close(fd)


def test_a_copy_into_the_mount_leaves_the_hot_set_cached(make_array, tmp_path):
    """A stream of writes past the sequential cutoff that are not a full
    row (a copy's 128K writes; a RAID5 x4 of 64K chunks has rows of 192K)
    takes the tier, so the flusher can write whole rows; its extents are
    streamed (write.c invariant 10): destaged young, and once clean evicted
    first.  With LRU, a hot set of 64 extents read before a 20 MiB copy
    into a tier of 256 slots is still there after it; before, the copy's
    young dirty extents were spared and, once clean, newer than the hot
    set, which LRU evicted for them."""
    a = make_array("raid5", 4, "64K")

    def copy():
        wfd = os.open(a.mnt / "big", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        data = abuf(128 * K)
        try:
            for i in range(160):                    # 20 MiB, a copy's pace
                os.pwritev(wfd, [data], i * 128 * K)
                time.sleep(0.004)
        finally:
            os.close(wfd)

    hits = _hot_hits_around(a, copts(tmp_path / "cache", size="16M", extent="64K", promote=1,
                                     policy="lru", reclaim=0), copy)
    assert hits >= 60, (hits, cst(a.mnt))


def full_row_copy(path, data, row):
    """data written to path from its start in O_DIRECT writes of one row
    each, back to back: a copy's stream."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for off in range(0, len(data), row):
            dwrite(fd, off, data[off:off + row])
    finally:
        os.close(fd)


@pytest.mark.parametrize("mode", ["writeback", "writethrough"])
def test_a_copy_in_full_rows_is_read_back_from_the_tier(make_array, tmp_path, mode):
    """A stream's writes that are full rows go around write-back, straight
    to the RAID; each keeps a clean copy in the tier (write.c invariant
    11), so a file read back soon after it was copied hits.  Before, only
    the first 1 MiB (before the cutoff) was cached: 16 of its 128 extents
    hit (write-through: none).  The copy's bytes read the same through the
    tier and from the members alone."""
    a = make_array("raid5", 3, "64K")              # rows of 128K
    big = a.mnt / "big"
    data = random.Random(5).randbytes(8 * M)       # 128 extents, a tier of 256
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", seq_cutoff="1M",
                       mode=mode))
    full_row_copy(big, data, 128 * K)
    s = cst(a.mnt)
    assert s["seq_bypass"] >= 100 and s["stream_copies"] == s["seq_bypass"], s
    assert s["dirty_extents"] <= 16, s             # the copies are clean
    before = s["read_hits"]
    same(read_direct(big, 0, 8 * M), data, "read back through the tier")
    assert cst(a.mnt)["read_hits"] - before >= 120, cst(a.mnt)
    flush(a.mnt)
    a.mounts[-1].stop()
    a.mount()                                      # uncached: the members alone
    same(read_all(big), data, "the members")


def test_write_through_keeps_what_it_writes(make_array, tmp_path):
    """Write-through writes the RAID and keeps what it wrote in a fresh
    slot, clean (write.c invariant 12), as bcache's does: a database's
    pages written and read back hit.  Its partial sectors are filled as
    write-back's are, before the RAID has the write: from the slot, from
    the RAID, or zeros past the file's end, so a small file or an append
    read back hits too.  Before, a write-through write over an extent the
    tier did not hold went to the RAID only, and every read of it missed
    until promoted; a write-through hit kept only its whole sectors.
    Nothing is ever dirty; the members hold every byte."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", seq_cutoff=0,
                       mode="writethrough", promote=1000))
    db, log, cold = a.mnt / "db", a.mnt / "log", a.mnt / "cold"
    rng = random.Random(21)
    old = rng.randbytes(256 * K)
    ctl(a.mnt, "cache_mode writearound")           # cold: on the members only
    pwrite(cold, 0, old)
    ctl(a.mnt, "cache_mode writethrough")
    assert cst(a.mnt)["cached_extents"] == 0, cst(a.mnt)
    model = bytearray(4 * M)                       # 64 extents
    fd = os.open(db, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        os.ftruncate(fd, len(model))
        for page in rng.sample(range(len(model) // (16 * K)), 256):
            b = rng.randbytes(16 * K)               # every 16K page, in random order
            dwrite(fd, page * 16 * K, b)
            model[page * 16 * K:(page + 1) * 16 * K] = b
    finally:
        os.close(fd)
    s = cst(a.mnt)
    assert s["write_misses"] == 64 and s["cached_extents"] == 64, s
    assert s["dirty_bytes"] == 0 and s["promotions"] == 0, s
    # partial sectors: a record appended to a new file, then another after
    # it (its first sector's start in the slot); an unaligned write into
    # the db (the slot) and into cold (the RAID around it)
    recs = [rng.randbytes(1000), rng.randbytes(5000)]
    pwrite(log, 100, recs[0])
    pwrite(log, 1100, recs[1])
    logged = bytes(100) + recs[0] + recs[1]
    mid = rng.randbytes(5000)
    pwrite(db, 3 * 64 * K + 100, mid, create=False)
    model[3 * 64 * K + 100:3 * 64 * K + 5100] = mid
    pwrite(cold, 8 * K + 100, mid, create=False)
    cold_now = old[:8 * K + 100] + mid + old[8 * K + 5100:]
    s = cst(a.mnt)
    assert s["cached_extents"] == 66 and s["dirty_bytes"] == 0, s
    h0 = s["read_hits"]
    for e in rng.sample(range(64), 64):
        same(read_direct(db, e * 64 * K, 64 * K), bytes(model[e * 64 * K:(e + 1) * 64 * K]),
             f"extent {e} read back")
    same(read_direct(log, 0, 8 * K)[:len(logged)], logged, "the log")
    same(read_direct(cold, 8 * K, 8 * K), cold_now[8 * K:16 * K], "cold, around the write")
    s = cst(a.mnt)
    assert s["read_hits"] - h0 == 66 and s["read_misses"] == 0, s
    a.mounts[-1].stop()
    a.mount()                                      # uncached: the members alone
    same(read_all(db), bytes(model), "the members")
    same(read_all(log), logged, "the log on the members")
    same(read_all(cold), cold_now, "cold on the members")


def test_copies_no_one_reads_stop_and_come_back_when_read(make_array, tmp_path):
    """The copies of write.c invariant 11 cost the slot's write: they are
    taken while they are used (rules.h tfs_copy_take).  A 40 MiB stream of
    full rows never read, through a tier of 256 slots: once its first
    copies left unused, 1 row in 16 is copied (before, every one).  Then a
    stream whose every MiB is read back right after it is written: its
    sampled copies are used, every row is copied again, and its last 16 MiB
    read back from the tier."""
    a = make_array("raid5", 3, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", seq_cutoff="1M"))
    full_row_copy(a.mnt / "backup", random.Random(3).randbytes(40 * M), 128 * K)
    s = cst(a.mnt)
    used, resolved = map(int, s["stream_copy_evidence"].split("/"))
    assert used == 0 and resolved >= 16, s
    assert s["seq_bypass"] >= 600 and s["stream_copies"] <= 0.6 * s["seq_bypass"], s
    work = a.mnt / "work"
    data = random.Random(4).randbytes(48 * M)
    fd = os.open(work, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for i in range(48):
            for off in range(i * M, (i + 1) * M, 128 * K):
                dwrite(fd, off, data[off:off + 128 * K])
            if i == 32:
                before = cst(a.mnt)
            assert dread(fd, i * M, M) == data[i * M:(i + 1) * M], i
    finally:
        os.close(fd)
    s = cst(a.mnt)
    used, resolved = map(int, s["stream_copy_evidence"].split("/"))
    assert used * 16 >= resolved, s
    # 256 pieces: each MiB's first write, after a read, starts no stream
    assert s["stream_copies"] - before["stream_copies"] >= 224, (before, s)
    assert s["read_hits"] - before["read_hits"] >= 240, (before, s)


@pytest.mark.parametrize("policy", ["lru", "wtinylfu"])
def test_a_copy_in_full_rows_leaves_the_hot_set_cached(make_array, tmp_path, policy):
    """A copy's full-row writes each take a slot for their clean copy
    (write.c invariant 11; all of them until the first copies leave the
    tier unused), demoted once written: the next victim unless read.  A
    40 MiB copy through a tier of 256 slots takes the slots of the copies
    before it, not the hot set's 64 extents read before it."""
    a = make_array("raid5", 3, "64K")

    def copy():
        full_row_copy(a.mnt / "big", random.Random(2).randbytes(40 * M), 128 * K)
        s = cst(a.mnt)
        assert s["stream_copies"] >= 150 and s["evictions"] >= 32, s     # a batch at least

    hits = _hot_hits_around(a, copts(tmp_path / "cache", size="16M", extent="64K", promote=1,
                                     policy=policy, seq_cutoff="1M"), copy)
    assert hits >= 60, (hits, cst(a.mnt))
