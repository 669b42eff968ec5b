"""Bounded memory (issue 12): the daemon's anonymous memory under a
many-file load of fsstress's shape (contrib/bench/memload.py: 8 workers
creating, writing buffered and O_DIRECT, fsyncing, truncating, punching,
renaming, linking and unlinking small sparse files) on a RAID5 x4 with a
1 GiB write-back tier.  Before the fix the daemon grew by ~4 MiB/s of load
and kept it after every file was deleted (each flush batch's destage
threads left their per-thread stripe scratch behind); DESIGN.md §3
"Memory" documents what each structure may hold and docs/MEMORY.md the
measurements.

One load serves the first two tests (a module fixture): a short warm-up
load starts
the threads a load needs and settles; its idle size is the baseline.  The
main load runs (~15 s) while RssAnon, the thread count and the inodes the
daemon knows are sampled every 0.1 s; then its files are deleted, the tier
drains, and the idle trim runs (scratch.c invariant 5).  The third test
repeats flushes whose batches start destage threads (scratch.c invariant
2: a thread's scratch goes with it)."""
import importlib.util
import os
import statistics
import threading
import time

import pytest

from conftest import REPORT, ROOT, Mount, mkfs

K = 1024
M = K * K
STATUS = "user.tierfs.status"

_spec = importlib.util.spec_from_file_location("memload", ROOT / "contrib/bench/memload.py")
memload = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(memload)

# The bound of DESIGN.md §3 "Memory", per structure (bytes):
KEEP = 1 * M                    # scratch a thread keeps per slot between requests
THREAD = 3 * KEEP + (1 * M + 4 * K) + 64 * K  # its 3 data slots, libfuse's buffer, stack
INODE = 512                     # struct tfs_inode, an alias and its name, malloc's headers
SLOT = 362                      # per cache slot: extent, hash, free list, heat, policy
FIXED = 16 * M                  # the journals' and the store's LMDB lists and pages
FLUSH = 2 * 64 * 256 * K        # the flusher's batch buffer (2 x 64 extents)
# the live curve's and the tuner's miniatures (mrc.c): 7.1 MiB at this
# test's tier (1 GiB of 256K extents, W-TinyLFU), 7.6 with S3-FIFO's ghost
# tables, since cache.mrc_bytes counts the policies' arrays exactly
MRC = int(7.6 * M)

# After the delete and the drain the daemon is back at its idle size: what
# a load leaves is the threads it started beyond the warm-up's (a stack and
# scratch of at most KEEP per slot each, a few KiB in practice) and what
# glibc cannot give back (partly used pages of its arenas).  Measured: 2-2.5
# MiB above the baseline with ~100 threads; before the fix, 30 MiB above it,
# growing with the load (docs/MEMORY.md).
RETURN_SLACK = 8 * M
# The second half of the main load may not add more than this to the
# first half's median: memory follows the threads and the requests in
# flight, not the work done.  Medians, not peaks: RssAnon swings 3-6 MiB
# from sample to sample with the requests in flight (a peak is whichever
# instant most threads held their scratch), so the peaks of the halves
# differed by 1-4.1 MiB and failed a 4 MiB slack on a loaded CI machine,
# while a leak moves every sample.  Measured: medians 0.9-1.9 MiB apart,
# with three CPU hogs too; with a leak of 1 KiB a write request, 3.6-4.1.
GROWTH_SLACK = 3 * M
IDLE_SECS = 5                   # scratch.c: idle this long after requests, then trim


def rss_anon(pid):
    return memload.rss_anon(pid) * K


def status(mnt):
    raw = os.getxattr(str(mnt), STATUS).decode()
    return dict(l.split("=", 1) for l in raw.splitlines() if "=" in l)


def nthreads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


class Sampler(threading.Thread):
    """RssAnon, threads and mem.inodes every 0.1 s while a load runs."""

    def __init__(self, pid, mnt):
        super().__init__(daemon=True)
        self.pid, self.mnt = pid, mnt
        self.samples = []       # (t, rss, threads, inodes)
        self.done = threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self.done.is_set():
            s = status(self.mnt)
            self.samples.append((time.monotonic() - t0, rss_anon(self.pid),
                                 nthreads(self.pid), int(s.get("mem.inodes", 0))))
            self.done.wait(0.1)

    def stop(self):
        self.done.set()
        self.join()
        return self.samples


def settle(mnt, pid, timeout=60):
    """Wait for the tier to be empty and the idle trim after the last
    request; the daemon's RssAnon then."""
    deadline = time.time() + timeout
    while True:
        s = status(mnt)
        if s["cache.dirty_extents"] == "0" and s["cache.cached_extents"] == "0":
            break
        assert time.time() < deadline, f"the tier never drained: {s}"
        time.sleep(0.2)
    if "mem.idle_trims" not in s:      # a daemon before the idle trim: the same wait
        time.sleep(IDLE_SECS + 1)
        return rss_anon(pid)
    trims = int(s["mem.idle_trims"])
    while int(status(mnt)["mem.idle_trims"]) == trims:
        assert time.time() < deadline, "no idle trim after the load"
        time.sleep(0.2)
    return rss_anon(pid)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memory")
    members = [tmp / f"m{i}" for i in range(4)]
    for d in members:
        d.mkdir()
    mkfs(members, "raid5")
    m = Mount(members, tmp / "mnt", [f"cache={tmp / 'cache'}", "cache_size=1G"])
    m.start()
    try:
        pid = m.proc.pid
        fresh = rss_anon(pid)
        memload.run_load(os.path.join(m.mnt, "warm"), workers=8, ops=300, mix="stress")
        base = settle(m.mnt, pid)
        sampler = Sampler(pid, m.mnt)
        sampler.start()
        try:
            _, failed = memload.run_load(os.path.join(m.mnt, "load"), workers=8, ops=1500,
                                         mix="stress")
        finally:
            samples = sampler.stop()
        end = settle(m.mnt, pid)
        st = status(m.mnt)
        peak = max(samples, key=lambda x: x[1])
        first, second = halves(samples)
        REPORT.append(f"test_memory: RssAnon fresh {mib(fresh)}, idle after the warm-up "
                      f"{mib(base)}, peak {mib(peak[1])} ({peak[2]} threads, {peak[3]} "
                      f"inodes; medians of the halves {mib(first)}, {mib(second)}), after "
                      f"the delete {mib(end)}")
        yield dict(fresh=fresh, base=base, end=end, samples=samples, failed=failed,
                   nslots=int(st["cache.slots"]), log=m.log)
    finally:
        m.stop()
    m.check_log()


def mib(x):
    return f"{x / M:.1f} MiB"


def halves(samples):
    """The median RssAnon of the first and of the second half of the load."""
    half = samples[len(samples) // 2][0]
    return (statistics.median(r for t, r, _, _ in samples if t <= half),
            statistics.median(r for t, r, _, _ in samples if t > half))


def test_memory_returns_after_the_files_are_deleted(loaded):
    """Every file deleted and the tier drained: RssAnon is back within
    RETURN_SLACK of its idle size before the load."""
    assert loaded["failed"] == 0, f"{loaded['failed']} operations of the load failed"
    peak = max(s[1] for s in loaded["samples"])
    assert loaded["end"] <= loaded["base"] + RETURN_SLACK, (
        f"RssAnon {mib(loaded['end'])} after the delete, {mib(loaded['base'])} before the "
        f"load (peak {mib(peak)}, fresh mount {mib(loaded['fresh'])})")


def test_memory_peak_stays_within_the_bound(loaded):
    """During the load RssAnon stays within the documented bound for the
    threads and inodes the daemon had at that moment, and the second half
    of the load adds at most GROWTH_SLACK to the first half's median."""
    samples = loaded["samples"]
    assert len(samples) > 20, samples
    fixed = loaded["fresh"] + FIXED + FLUSH + MRC + loaded["nslots"] * SLOT
    over = [(t, r, n, i) for t, r, n, i in samples if r > fixed + n * THREAD + i * INODE]
    assert not over, (f"RssAnon above the bound: (t, rss, threads, inodes) {over[:3]}; "
                      f"bound {mib(fixed)} + {mib(THREAD)} per thread + {INODE} B per inode")
    first, second = halves(samples)
    assert second <= first + GROWTH_SLACK, (
        f"the second half of the load grew RssAnon from {mib(first)} to {mib(second)}")


def test_flush_batches_leave_no_memory_behind(make_array, tmp_path):
    """Three dirty runs of 6 MiB with holes between them make every flush
    batch three segments, written by the flusher and two destage threads
    that exit with the batch (flush.c).  Six rounds of rewrite + flush: the
    daemon's RssAnon stays where the first round left it.  Before, each
    exiting destage thread left its stripe scratch behind: +7-8 MiB a
    round (32 -> 119 MiB in 12 rounds); with the thread-exit destructor
    removed (scratch.c invariant 2), the same."""
    a = make_array("raid5", 4)
    m = a.mount(opts=[f"cache={tmp_path / 'cache'}", "cache_size=256M",
                      "cache_dirty_low=90", "cache_dirty_high=95"])
    p = os.path.join(a.mnt, "f")
    data = os.urandom(6 * M)
    after = []
    for _ in range(6):
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for base in (0, 8 * M, 16 * M):
                os.pwrite(fd, data, base)
        finally:
            os.close(fd)
        os.setxattr(a.mnt, "user.tierfs.ctl", b"flush")
        deadline = time.time() + 60
        while True:
            s = status(a.mnt)
            if s["cache.dirty_extents"] == "0" and s["cache.flush_pending"] == "0":
                break
            assert time.time() < deadline, f"the flush never ended: {s}"
            time.sleep(0.05)
        after.append(rss_anon(m.proc.pid))
    assert after[-1] <= after[0] + 4 * M, f"RssAnon after each flush: {[mib(x) for x in after]}"


def test_flusher_buffer_goes_back_when_nothing_is_dirty(make_array, tmp_path):
    """16 MiB dirty in 64 KiB writes, flushed: the flusher's batch buffer
    (2 x 64 extents, mapped) held the batch's pages, and once nothing is
    dirty they go back (flush.c invariant 11: MADV_DONTNEED).  Small
    writes, so the FUSE workers' buffers and scratch stay small and the
    buffer's pages are what would stay.  Measured: 1.3 -> 2.2 MiB; with
    the madvise removed, 1.2 -> 18.3 MiB."""
    a = make_array("raid5", 4)
    m = a.mount(opts=[f"cache={tmp_path / 'cache'}", "cache_size=256M",
                      "cache_dirty_low=90", "cache_dirty_high=95"])
    p = os.path.join(a.mnt, "f")
    chunk = os.urandom(64 * K)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, chunk, 0)
        os.fsync(fd)
        before = rss_anon(m.proc.pid)
        for off in range(0, 16 * M, 64 * K):
            os.pwrite(fd, chunk, off)
    finally:
        os.close(fd)
    os.setxattr(a.mnt, "user.tierfs.ctl", b"flush")
    deadline = time.time() + 60
    while status(a.mnt)["cache.dirty_extents"] != "0":
        assert time.time() < deadline, "the flush never ended"
        time.sleep(0.05)
    time.sleep(1.5)     # the flusher's next look (it waits a second at most)
    after = rss_anon(m.proc.pid)
    assert after <= before + 8 * M, f"RssAnon {mib(before)} before, {mib(after)} after the flush"
