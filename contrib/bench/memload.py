#!/usr/bin/python3
"""memload.py - many-small-file load, fsstress-like, to watch the daemon's memory.

    memload.py DIR [--workers 8] [--ops 3000] [--mix small|stress]
                   [--max-size 65536] [--seed 1] [--pid PID] [--keep]
                   [--interval 0.5]

Each of WORKERS processes works in DIR/w<i>/ and does OPS random operations
on its own files there.  --mix small (default): create + write of up to
MAX_SIZE bytes (most), append, overwrite in the middle, fsync (one in eight
writes), rename (within its directory and into a subdirectory), truncate,
link, unlink, mkdir/rmdir.  --mix stress, the shape of fsstress's mix:
empty creates; buffered and O_DIRECT writes of up to 128 KiB anywhere in
[0, size + 1 MiB) (so files grow sparse); reads; truncates to anywhere in
[0, size + 1 MiB); punch and zero ranges; fsync, fdatasync; renames, links,
unlinks, mkdir/rmdir, stat, chown.  At the end every file is deleted
(unless --keep).

With --pid PID it samples /proc/PID/status (VmRSS, RssAnon) every
--interval seconds while the load runs and prints, at the end,

    start_kib peak_kib end_kib ops_per_s failed_ops

(RssAnon in KiB at the start, the peak during the load, and after the
delete), so a run can be compared before/after a change.  An operation
that fails is counted (failed_ops) and the first few are printed; the
load goes on.  fsstress is not packaged in
Debian; this is the shape of its small-file mix (-n 30000 -p 8) that issue
12 measured with.
"""
import argparse
import mmap
import os
import random
import sys
import threading
import time
from multiprocessing import Array, Process


def rss_anon(pid):
    """RssAnon of PID in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise RuntimeError("no RssAnon in /proc/%d/status" % pid)


class Worker:
    """One worker's files under top/w<idx>/ and its random operations."""

    def __init__(self, top, idx, max_size, seed):
        self.rnd = random.Random(seed * 1000 + idx)
        self.d = os.path.join(top, f"w{idx}")
        os.makedirs(self.d, exist_ok=True)
        self.names = []         # live file names, relative to d
        self.subs = []
        self.buf = os.urandom(max(max_size, 128 << 10))
        self.abuf = mmap.mmap(-1, 128 << 10)    # page-aligned, for O_DIRECT
        self.abuf[:] = self.buf[:128 << 10]
        self.max_size = max_size
        self.seq = 0

    def path(self, name):
        return os.path.join(self.d, name)

    def fresh(self, prefix, sub_chance):
        self.seq += 1
        name = f"{prefix}{self.seq}"
        if self.subs and self.rnd.random() < sub_chance:
            name = os.path.join(self.rnd.choice(self.subs), name)
        return name

    def pick(self):
        return self.path(self.rnd.choice(self.names))

    def remember(self, name):
        self.names.append(name)

    def forget(self, i):
        self.names[i] = self.names[-1]
        self.names.pop()

    # -- the small-file mix: create + write, append, overwrite, fsync ----
    def op_small(self):
        rnd, names = self.rnd, self.names
        r = rnd.random()
        if r < 0.40 or not names:
            name = self.fresh("f", 0.3)
            fd = os.open(self.path(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                os.write(fd, self.buf[:rnd.randint(1, self.max_size)])
                if rnd.random() < 0.125:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self.remember(name)
        elif r < 0.50:
            fd = os.open(self.pick(), os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, self.buf[:rnd.randint(1, self.max_size // 4)])
            finally:
                os.close(fd)
        elif r < 0.58:
            fd = os.open(self.pick(), os.O_WRONLY)
            try:
                os.pwrite(fd, self.buf[:rnd.randint(1, 8192)], rnd.randint(0, self.max_size))
                if rnd.random() < 0.25:
                    os.fdatasync(fd)
            finally:
                os.close(fd)
        elif r < 0.66:
            self.rename()
        elif r < 0.70:
            os.truncate(self.pick(), rnd.randint(0, self.max_size))
        elif r < 0.73:
            self.link()
        elif r < 0.78:
            self.dirop()
        elif r < 0.82:
            with open(self.pick(), "rb") as f:
                f.read()
        else:
            self.unlink()

    # -- fsstress's shape: writes anywhere in [0, size + 1 MiB) of up to
    # 128 KiB, buffered and O_DIRECT, truncates up and down, punch and zero
    # ranges, empty creates, fsync/fdatasync, renames, links, unlinks ------
    def op_stress(self):
        rnd, names = self.rnd, self.names
        r = rnd.random()
        if r < 0.12 or not names:
            name = self.fresh("f", 0.5)
            os.close(os.open(self.path(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            self.remember(name)
        elif r < 0.36:
            direct = r >= 0.24
            fd = os.open(self.pick(), os.O_WRONLY | (os.O_DIRECT if direct else 0))
            try:
                off = rnd.randrange(os.fstat(fd).st_size + (1 << 20))
                ln = rnd.randint(1, 128 << 10)
                if direct:
                    off &= ~4095
                    ln = max(4096, ln & ~4095)
                os.pwrite(fd, memoryview(self.abuf)[:ln] if direct else self.buf[:ln], off)
            finally:
                os.close(fd)
        elif r < 0.44:
            direct = r >= 0.40
            fd = os.open(self.pick(), os.O_RDONLY | (os.O_DIRECT if direct else 0))
            try:
                size = os.fstat(fd).st_size
                if size:
                    off = rnd.randrange(size) & (~4095 if direct else -1)
                    ln = rnd.randint(1, 128 << 10)
                    if direct:
                        os.preadv(fd, [memoryview(self.abuf)[:max(4096, ln & ~4095)]], off)
                    else:
                        os.pread(fd, ln, off)
            finally:
                os.close(fd)
        elif r < 0.50:
            path = self.pick()
            os.truncate(path, rnd.randrange(os.stat(path).st_size + (1 << 20)))
        elif r < 0.54:
            fd = os.open(self.pick(), os.O_WRONLY)
            try:
                size = os.fstat(fd).st_size + (1 << 20)
                mode = rnd.choice((0x01 | 0x02, 0x10, 0x10 | 0x01))  # punch, zero, zero keep
                _fallocate(fd, mode, rnd.randrange(size), rnd.randint(1, 1 << 20))
            finally:
                os.close(fd)
        elif r < 0.58:
            fd = os.open(self.pick(), os.O_WRONLY)
            try:
                (os.fsync if r < 0.56 else os.fdatasync)(fd)
            finally:
                os.close(fd)
        elif r < 0.66:
            self.rename()
        elif r < 0.70:
            self.link()
        elif r < 0.78:
            self.dirop()
        elif r < 0.84:
            os.stat(self.pick())
        elif r < 0.88:
            os.chown(self.pick(), rnd.randrange(100), rnd.randrange(100))
        else:
            self.unlink()

    def rename(self):
        i = self.rnd.randrange(len(self.names))
        new = self.fresh("r", 0.5)
        os.rename(self.path(self.names[i]), self.path(new))
        self.names[i] = new

    def link(self):
        new = self.fresh("l", 0.5)
        os.link(self.pick(), self.path(new))
        self.remember(new)

    def dirop(self):
        if self.subs and self.rnd.random() < 0.4:
            if not os.listdir(self.path(self.subs[-1])):
                os.rmdir(self.path(self.subs.pop()))
        else:
            s = self.fresh("d", 0)
            os.mkdir(self.path(s))
            self.subs.append(s)

    def unlink(self):
        i = self.rnd.randrange(len(self.names))
        os.unlink(self.path(self.names[i]))
        self.forget(i)


_libc = None


def _fallocate(fd, mode, off, ln):
    global _libc
    import ctypes
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if _libc.fallocate(fd, mode, off, ln) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def worker(top, idx, ops, max_size, seed, errors, mix):
    """Run ops operations; an operation that fails is counted in
    errors[idx] and reported on stderr (the first few), and the run goes
    on: the point is the daemon's memory, and a failing call is a finding
    to report, not a reason to stop loading it."""
    w = Worker(top, idx, max_size, seed)
    op = w.op_stress if mix == "stress" else w.op_small
    for _ in range(ops):
        try:
            op()
        except OSError as e:
            errors[idx] += 1
            if errors[idx] <= 3:
                print(f"memload: worker {idx}: {e}", file=sys.stderr)


def remove_tree(top):
    for root, dirs, files in os.walk(top, topdown=False):
        for f in files:
            os.unlink(os.path.join(root, f))
        for x in dirs:
            os.rmdir(os.path.join(root, x))


def run_load(top, workers=8, ops=3000, max_size=65536, seed=1, keep=False, mix="small"):
    """Run the load under top (made if missing); returns (ops per second,
    failed operations)."""
    os.makedirs(top, exist_ok=True)
    t0 = time.monotonic()
    errors = Array("l", workers)
    procs = [Process(target=worker, args=(top, i, ops, max_size, seed, errors, mix))
             for i in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise RuntimeError(f"{len(bad)} workers failed (exit codes {bad})")
    dt = time.monotonic() - t0
    if not keep:
        remove_tree(top)
    return workers * ops / dt, sum(errors)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--max-size", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--mix", choices=("small", "stress"), default="small")
    ap.add_argument("--interval", type=float, default=0.5)
    a = ap.parse_args()

    peak = [0]
    stop = threading.Event()
    start = rss_anon(a.pid) if a.pid else 0

    def sample():
        while not stop.is_set():
            v = rss_anon(a.pid)
            peak[0] = max(peak[0], v)
            print(f"  t={time.monotonic() - t0:6.1f}s RssAnon {v} KiB", file=sys.stderr)
            stop.wait(a.interval)

    t0 = time.monotonic()
    th = None
    if a.pid:
        th = threading.Thread(target=sample, daemon=True)
        th.start()
    top = os.path.join(a.dir, f"memload.{os.getpid()}")
    rate, nerr = run_load(top, a.workers, a.ops, a.max_size, a.seed, a.keep, a.mix)
    if not a.keep:
        os.rmdir(top)
    stop.set()
    if th:
        th.join()
    end = rss_anon(a.pid) if a.pid else 0
    print(f"{start} {peak[0]} {end} {rate:.0f} {nerr}")


if __name__ == "__main__":
    sys.exit(main())
