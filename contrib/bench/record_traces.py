#!/usr/bin/python3
"""record_traces.py - traces to tune the SSD tier on, recorded on real mounts (issue 16).

For each workload: a RAID5 x4 array (64K chunk) over member directories in
a work directory, with the SSD tier in write-back mode on a cache directory
beside them (-o cache=DIR,cache_size=--cache-size,cache_mode=writeback,
allow_other; no HDD model: a trace records requests, and its times are the
daemon's real ones), mounted; the workload's set-up (not traced), a sync
and a flush of the tier (tierctl flush), then the tier's trace recorder
(tierctl trace MNT start FILE) around the workload itself, saved as
OUT/WORKLOAD.trace (include/tierfs/trace.h; cache_sim --trace replays it),
and the tier's status at its end (the array's level, chunk and members and
the cache.* lines of tierctl status,
its counts and live curve reset as the trace began) as OUT/WORKLOAD.status,
to set beside the model's (CACHE_SIM_DEBUG=1 cache_sim --agree); unmounted
and removed.  Every workload runs on the mount.

Workloads (--only, a comma-separated list; all by default, in this order):
  pgbench           PostgreSQL TPC-B-like: db_bench.py's cluster set-up
                    (initdb, pgbench -i -s 10xSCALE, fsync on), shared_buffers
                    32MB (a database 5x its buffer pool); traced: 5 s of
                    warm-up, a CHECKPOINT, pgbench -c 8 -j 2 -T 60xSCALE
  sqlite            db_bench.py's SQLite WAL database (400,000xSCALE rows of
                    an indexed table), synchronous=FULL; traced: 15,000xSCALE
                    transactions of 4 random-key INSERTs/UPDATEs
  maildir           a mail server: 400xSCALE Maildir++ mailboxes with
                    Dovecot-like index files, Zipf (s 0.9) popularity, 25,000xSCALE
                    messages to begin with (lognormal sizes, median 6 KiB,
                    sigma 1.4, at most 1 MiB); traced, on four threads (each
                    owning a quarter of the mailboxes): 12,000xSCALE deliveries
                    (tmp/, fsync, rename into new/, an index log record) and
                    4,000xSCALE IMAP sessions (readdir, the index read, new
                    mail moved to cur/ and its header read and cached, a few
                    messages read whole, newest most often, flag renames,
                    expunges as many as delivered, the index rewritten and
                    its log rotated as it grows)
  iometer-exchange  fio on a 2 GiBxSCALE file (laid out first): Iometer's
                    Exchange pattern (32K, 62% reads, 100% random;
                    ../shared/IOMETER.md) with hot/warm/cold zones
                    (random_distribution=zoned:60/5:30/15:10/80: 60% of the
                    accesses to 5% of the file, 30% to 15%, 10% to 80%),
                    O_DIRECT (Iometer's unbuffered I/O), libaio QD 16, 30xSCALE s
  iometer-database  the same with the database pattern (8K, 67% reads)
  copy-edit         a file server: a tree of 3,000xSCALE files of mixed
                    sizes (documents, office files, images, a few large
                    media files: about 1 GiB) made on the work directory's
                    disk; traced: cp -r of it into the mount, then
                    12,000xSCALE edits of Zipf-popular (s 1.0) files: views,
                    in-place rewrites of a few regions with an fsync,
                    appends, editor-style saves (a new file, fsync, renamed
                    over the old; now and then the old one kept as NAME~),
                    new documents; then every edited file read back
  backup-scan       a tree of 2,000xSCALE files (lognormal, median 192
                    KiB, about 0.9 GiB), 10% of them the hot set; traced: 4
                    threads of O_DIRECT random reads (4K/16K/64K) of the hot
                    set (Zipf, s 0.9; 4,000 a second in all, as far as the
                    mount keeps up) for 15xSCALE s, then while a tar-like
                    reader reads every file once in tree order (1 MiB reads),
                    then 10xSCALE s more

The kernel's page cache: tierfs keeps a file's pages from one open to the
next (until the kernel sees its mtime change: a file written is read from
the mount again), and this machine's RAM holds every data set above, so
without a model of a smaller cache the tier would see most bytes read once.
maildir and copy-edit keep a least-recently-used model of --page-cache
bytes (64M) over the files they touch and drop the kernel's pages of a file
that falls out of it (POSIX_FADV_DONTNEED); backup-scan's reader drops each
file once read (its hot load is O_DIRECT); pgbench and SQLite have the pages
of every file of their database dropped every --drop-every seconds (1).
--no-drop keeps the machine's page cache.

Usage: record_traces.py --out DIR [--only LIST] [--scale X] [--cache-size SIZE]
           [--page-cache SIZE] [--drop-every S] [--no-drop] [--tmpdir DIR]
           [--build DIR] [--max-seconds S] [--keep]
       record_traces.py --stats FILE...     the numbers of traces made before
  --cache-size: the tier's size (256M); --tmpdir: where the work directory
  goes (default /var/tmp); --build: the meson build directory with tierfs,
  mkfs.tierfs, tierctl (default build/); --max-seconds: the traced part of
  maildir, copy-edit and sqlite is cut after this long (600 s; pgbench and
  fio run for their time, backup-scan until its reader is done).
  TIERFS_OPTS (environment): more mount options, comma-separated, as
  db_bench.py takes them (e.g. cache_extent=64K).

Prints one line per workload (records, reads/writes/syncs, distinct files,
bytes read and written, distinct 64K and 256K extents, the traced time),
logs on stderr.  Exit status 0 only if every selected workload left a
non-empty trace; a workload that fails gets a one-line error and the next
one runs.  Seeds are fixed: the same command makes the same requests (their
interleaving across threads and the daemon's timing aside).

Whatever happens (error, Ctrl-C, SIGTERM) every PostgreSQL server is
stopped, every mount unmounted (fusermount3 -u, retried, then -u -z), every
daemon stopped by pid and the work directory removed (unless --keep).
"""
import argparse
import bisect
import collections
import contextlib
import json
import math
import mmap
import os
import pwd
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import raid_sweep as rs  # noqa: E402  (cleanup, signals, sizes)
import db_bench as db  # noqa: E402  (the tiered RAID5 target, PostgreSQL and SQLite)
from raid_sweep import CLEAN, log  # noqa: E402

PY = "/usr/bin/python3"
SEED = 20241216
WORKLOADS = ["pgbench", "sqlite", "maildir", "iometer-exchange", "iometer-database",
             "copy-edit", "backup-scan"]
TRACE_MAGIC = 0x3130435254534654        # "TFSTRC01"
K, M = 1 << 10, 1 << 20


# ---------------------------------------------------------------- traces
def trace_stats(path, extents=(64 * K, 256 * K)):
    """The numbers of a trace file (include/tierfs/trace.h): records,
    reads, writes, syncs, cuts (truncates, punches, unlinks), distinct files, bytes read and written, distinct
    extents read or written for each size in extents (s.extents[size]: the
    working set, contrib/bench/policy_table.py), the time it spans."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 16:
        raise ValueError("%s: %d bytes, no header" % (path, len(raw)))
    magic, version, size = struct.unpack_from("<QII", raw)
    if magic != TRACE_MAGIC or version != 1 or size != 32 or (len(raw) - 16) % 32:
        raise ValueError("%s: not a version 1 tierfs trace" % path)
    s = types.SimpleNamespace(records=0, reads=0, writes=0, syncs=0, cuts=0, rbytes=0,
                              wbytes=0, span_s=0.0)
    fids, seen = set(), {e: set() for e in extents}
    tmax = 0
    for t, fid, off, ln, op, _fl, _pad in struct.iter_unpack("<QQQIBBH", memoryview(raw)[16:]):
        s.records += 1
        fids.add(fid)
        tmax = max(tmax, t)
        if op == ord("R") or op == ord("W"):
            if op == ord("R"):
                s.reads += 1
                s.rbytes += ln
            else:
                s.writes += 1
                s.wbytes += ln
            if ln:
                for ext, got in seen.items():
                    for e in range(off // ext, (off + ln - 1) // ext + 1):
                        got.add((fid, e))
        elif op == ord("C"):
            s.cuts += 1
        else:
            s.syncs += 1
    s.files, s.span_s = len(fids), tmax / 1e9
    s.extents = {e: len(got) for e, got in seen.items()}
    return s


def fmt_bytes(n):
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << sh:
            return "%.1f %s" % (n / (1 << sh), unit)
    return "%d B" % n


def stats_line(name, s, secs=None):
    return ("%s: %d records (%d reads, %d writes, %d syncs, %d cuts), %d files, read %s, "
            "written %s, %d 64K / %d 256K extents, %.1f s%s"
            % (name, s.records, s.reads, s.writes, s.syncs, s.cuts, s.files, fmt_bytes(s.rbytes),
               fmt_bytes(s.wbytes), s.extents.get(64 * K, 0), s.extents.get(256 * K, 0),
               s.span_s if secs is None else secs,
               "" if secs is None else " traced"))


# ---------------------------------------------------------------- the page cache model
def drop_pages(path):
    """Drop the kernel's pages of a file (clean ones: tierfs writes through)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False            # gone (renamed, expunged) or not a file
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


class PageCache:
    """A page cache of `size` bytes over whole files, least recently used
    out first: a file that falls out has its pages dropped, so its next
    read reaches the mount (and the tier).  size 0: nothing is kept; None:
    the kernel's own (nothing dropped)."""

    def __init__(self, size):
        self.size, self.used = size, 0
        self.files = collections.OrderedDict()     # path -> bytes cached
        self.lock = threading.Lock()
        self.dropped = 0

    def touch(self, path, nbytes):
        if self.size is None:
            return
        with self.lock:
            old = self.files.pop(path, 0)
            self.files[path] = max(old, nbytes)
            self.used += self.files[path] - old
            out = []
            while self.used > self.size and self.files:
                p, b = self.files.popitem(last=False)
                self.used -= b
                out.append(p)
        for p in out:
            self.dropped += drop_pages(p)

    def rename(self, old, new):
        if self.size is None:
            return
        with self.lock:
            b = self.files.pop(old, None)
            gone = self.files.pop(new, 0)
            self.used -= gone
            if b is not None:
                self.files[new] = b

    def forget(self, path):
        if self.size is None:
            return
        with self.lock:
            self.used -= self.files.pop(path, 0)

    def clear(self):
        """Drop everything it holds (the end of a set-up)."""
        if self.size is None:
            return
        with self.lock:
            out, self.files, self.used = list(self.files), collections.OrderedDict(), 0
        for p in out:
            drop_pages(p)


class Dropper(threading.Thread):
    """Every `every` seconds, the kernel's pages of every regular file of at
    least 8K under `top` dropped (the page cache model of pgbench and
    SQLite, whose files other processes read)."""

    def __init__(self, top, every):
        super().__init__(daemon=True)
        self.top, self.every, self.halt = top, every, threading.Event()
        self.sweeps = 0

    def run(self):
        while not self.halt.wait(self.every):
            for root, _dirs, files in os.walk(self.top):
                for fn in files:
                    p = os.path.join(root, fn)
                    try:
                        if os.lstat(p).st_size >= 8 * K:
                            drop_pages(p)
                    except OSError:
                        pass
            self.sweeps += 1

    def stop(self):
        self.halt.set()
        self.join(60)


# ---------------------------------------------------------------- helpers of the Python workloads
def zipf_weights(n, s, rng):
    """Zipf(s) weights of n items, the ranks shuffled by rng."""
    ranks = list(range(n))
    rng.shuffle(ranks)
    return [1.0 / (r + 1) ** s for r in ranks]


class Pick:
    """Picks from items with the given weights (Zipf's by default)."""

    def __init__(self, items, s=None, rng=None, weights=None):
        self.items = list(items)
        weights = weights or zipf_weights(len(self.items), s, rng)
        acc, self.cum = 0.0, []
        for w in weights:
            acc += w
            self.cum.append(acc)

    def pick(self, rng):
        return self.items[bisect.bisect(self.cum, rng.random() * self.cum[-1])]


def lognormal(rng, median, sigma, lo, hi):
    return int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma))))


class Data:
    """File contents: slices of one seeded random block."""
    SIZE = 16 * M

    def __init__(self, seed):
        self.block = random.Random(seed).randbytes(self.SIZE)
        self.view = memoryview(self.block + self.block)

    def get(self, rng, n):
        out = bytearray()
        while len(out) < n:
            off = rng.randrange(self.SIZE)
            out += self.view[off:off + min(n - len(out), self.SIZE)]
        return out


def write_file(path, data, pc, sync=False, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags | os.O_CLOEXEC, 0o644)
    try:
        mv, done = memoryview(data), 0
        while done < len(data):
            done += os.write(fd, mv[done:done + M])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    pc.touch(path, len(data))


def read_file(path, pc, limit=None, chunk=64 * K):
    """Read path (its first `limit` bytes) as a program does; bytes read."""
    n = 0
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        while limit is None or n < limit:
            b = os.read(fd, chunk if limit is None else min(chunk, limit - n))
            if not b:
                break
            n += len(b)
    finally:
        os.close(fd)
    pc.touch(path, n)
    return n


def append_file(path, data, pc):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    pc.touch(path, size)


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds
        self.cut = False

    def over(self):
        if time.monotonic() > self.end:
            self.cut = True
        return self.cut


def run_threads(fns):
    """Run each fn in a thread of its own; the first exception, re-raised."""
    errs = []

    def wrap(fn):
        try:
            fn()
        except BaseException as e:      # noqa: B902  (reported in the parent)
            errs.append(e)
    ts = [threading.Thread(target=wrap, args=(fn,), daemon=True) for fn in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]


# ---------------------------------------------------------------- maildir
class Maildir:
    """Maildir++ mailboxes with Dovecot-like index files
    (dovecot.index, rewritten by rename; dovecot.index.log, appended and
    rotated; dovecot.index.cache, appended), as a mail server keeps them."""
    THREADS = 4

    def __init__(self, a, pc):
        self.a, self.pc = a, pc
        self.top = os.path.join(a.dir, "mail")
        self.n = max(4, int(400 * a.scale))
        self.rng = random.Random(a.seed)
        self.data = Data(a.seed)
        self.boxes = [os.path.join(self.top, "u%04d" % i, "Maildir") for i in range(self.n)]
        # one popularity for deliveries, sessions and the set-up
        self.weight = zipf_weights(self.n, 0.9, self.rng)
        self.pop = Pick(range(self.n), weights=self.weight)

    def size(self, rng):
        return lognormal(rng, 6 * K, 1.4, 300, 1 * M)

    def setup(self):
        for b in self.boxes:
            for d in ("tmp", "new", "cur"):
                os.makedirs(os.path.join(b, d))
        cur = collections.defaultdict(int)
        msgs = []
        for i in range(int(25000 * self.a.scale)):
            mb = self.pop.pick(self.rng)
            n = self.size(self.rng)
            msgs.append((os.path.join(self.boxes[mb], "cur",
                                      "%d.M%dP0.mx,S=%d:2,S" % (1700000000 + i, i, n)), n))
            cur[mb] += 1

        def writer(k):
            rng = random.Random(self.a.seed * 7 + k)
            for p, n in msgs[k::self.THREADS]:
                write_file(p, self.data.get(rng, n), self.pc)
        run_threads([lambda k=k: writer(k) for k in range(self.THREADS)])
        for mb, b in enumerate(self.boxes):
            write_file(os.path.join(b, "dovecot.index"), self.data.get(self.rng, 64 + 48 * cur[mb]),
                       self.pc)
            write_file(os.path.join(b, "dovecot.index.log"), self.data.get(self.rng, 40), self.pc)
            write_file(os.path.join(b, "dovecot.index.cache"),
                       self.data.get(self.rng, 256 * cur[mb] + 64), self.pc)
        self.pc.clear()
        return {"mailboxes": self.n, "messages": sum(cur.values())}

    def run(self):
        deadline = Deadline(self.a.max_seconds)
        deliveries = int(12000 * self.a.scale)
        sessions = int(4000 * self.a.scale)
        each = [collections.Counter() for _ in range(self.THREADS)]   # one a thread
        run_threads([self.lane(k, deliveries // self.THREADS, sessions // self.THREADS,
                               deadline, each[k]) for k in range(self.THREADS)])
        counts = sum(each, collections.Counter())
        counts.update(cut=deadline.cut, dropped=self.pc.dropped)
        return dict(counts)

    def lane(self, k, deliveries, sessions, deadline, counts):
        """Thread k: the mailboxes i with i % THREADS == k, their deliveries
        and sessions interleaved in a seeded order."""
        rng = random.Random(self.a.seed * 31 + k)
        mine = [i for i in range(self.n) if i % self.THREADS == k]
        pop = Pick(mine, weights=[self.weight[i] for i in mine])
        state = {}
        seq = iter(range(1, 1 << 62))

        def box(mb):
            if mb not in state:
                b = self.boxes[mb]
                cur = sorted(os.listdir(os.path.join(b, "cur")))
                st = types.SimpleNamespace(new=sorted(os.listdir(os.path.join(b, "new"))),
                                           cur=cur, log=40, rewrites=0)
                state[mb] = st
            return state[mb]

        def go():
            d, s = deliveries, sessions
            while d + s and not deadline.over():
                mb = pop.pick(rng)
                if rng.random() * (d + s) < d:
                    self.deliver(rng, mb, box(mb), k, next(seq))
                    d -= 1
                    counts["deliveries"] += 1
                else:
                    self.session(rng, mb, box(mb), deliveries / max(1, sessions), counts)
                    s -= 1
                    counts["sessions"] += 1
        return go

    def log_append(self, rng, mb, st, n):
        append_file(os.path.join(self.boxes[mb], "dovecot.index.log"), self.data.get(rng, n),
                    self.pc)
        st.log += n

    def deliver(self, rng, mb, st, k, seq):
        b = self.boxes[mb]
        n = self.size(rng)
        name = "%d.M%dP%d.mx,S=%d" % (1800000000 + seq, seq, k, n)
        tmp, new = os.path.join(b, "tmp", name), os.path.join(b, "new", name)
        write_file(tmp, self.data.get(rng, n), self.pc, sync=True)
        os.rename(tmp, new)
        self.pc.rename(tmp, new)
        st.new.append(name)
        self.log_append(rng, mb, st, 96)

    def session(self, rng, mb, st, expunge_mean, counts):
        b = self.boxes[mb]
        os.listdir(os.path.join(b, "new"))
        os.listdir(os.path.join(b, "cur"))
        read_file(os.path.join(b, "dovecot.index"), self.pc)
        cache = os.path.join(b, "dovecot.index.cache")
        read_file(cache, self.pc, limit=64 * K)
        # new mail: into cur/ (seen by the client: no flags yet), its header
        # fetched and cached
        for name in st.new:
            old, cur = os.path.join(b, "new", name), os.path.join(b, "cur", name + ":2,")
            os.rename(old, cur)
            self.pc.rename(old, cur)
            st.cur.append(name + ":2,")
            read_file(cur, self.pc, limit=4 * K)
            append_file(cache, self.data.get(rng, 256), self.pc)
            self.log_append(rng, mb, st, 64)
            counts["headers"] += 1
        st.new = []
        # a few messages read whole, the newest most often; read ones flagged seen
        for _ in range(min(len(st.cur), int(rng.expovariate(1 / 2.5)))):
            j = len(st.cur) - 1 - min(int(rng.expovariate(1 / 6)), len(st.cur) - 1)
            p = os.path.join(b, "cur", st.cur[j])
            read_file(p, self.pc)
            counts["reads"] += 1
            if not st.cur[j].endswith("S"):
                st.cur[j] += "S"
                q = os.path.join(b, "cur", st.cur[j])
                os.rename(p, q)
                self.pc.rename(p, q)
                self.log_append(rng, mb, st, 48)
        # expunge old mail, about as much as is delivered
        for _ in range(min(max(0, len(st.cur) - 5), int(rng.expovariate(1 / expunge_mean)))):
            j = rng.randrange(max(1, len(st.cur) // 2))
            p = os.path.join(b, "cur", st.cur.pop(j))
            q = p + "T"                 # flagged deleted, then gone
            os.rename(p, q)
            os.unlink(q)
            self.pc.forget(p)
            self.log_append(rng, mb, st, 48)
            counts["expunged"] += 1
        # the index rewritten (a new file renamed over it), the log rotated
        if st.log > 16 * K:
            idx = os.path.join(b, "dovecot.index")
            write_file(idx + ".tmp", self.data.get(rng, 64 + 48 * len(st.cur)), self.pc)
            os.rename(idx + ".tmp", idx)
            self.pc.rename(idx + ".tmp", idx)
            lg = os.path.join(b, "dovecot.index.log")
            os.rename(lg, lg + ".2")
            self.pc.rename(lg, lg + ".2")
            write_file(lg, self.data.get(rng, 40), self.pc)
            st.log = 40
            counts["index_rewrites"] += 1


# ---------------------------------------------------------------- copy-and-edit
class CopyEdit:
    """A file server share: a tree copied in, then edited as people do."""
    KINDS = (  # share of files, extension, median size, sigma, largest
        (0.65, ".txt", 16 * K, 1.2, 4 * M),
        (0.28, ".docx", 160 * K, 1.0, 16 * M),
        (0.065, ".jpg", int(1.5 * M), 0.6, 16 * M),
        (0.005, ".mp4", 20 * M, 0.5, 64 * M),
    )

    def __init__(self, a, pc):
        self.a, self.pc = a, pc
        self.src = a.src
        self.dst = os.path.join(a.dir, "share")
        self.rng = random.Random(a.seed)
        self.data = Data(a.seed)

    def setup(self):
        """The tree, on the work directory's disk (not the mount)."""
        n = max(20, int(3000 * self.a.scale))
        total = 0
        for i in range(n):
            x, acc = self.rng.random(), 0.0
            for share, ext, med, sigma, top in self.KINDS:
                acc += share
                if x < acc:
                    break
            d = os.path.join(self.src, "dept%d" % (i % 7), "proj%02d" % (i // 7 % 23),
                             "sub%d" % (i // 161 % 5))
            os.makedirs(d, exist_ok=True)
            size = lognormal(self.rng, med, sigma, 1, top)
            with open(os.path.join(d, "f%05d%s" % (i, ext)), "wb") as f:
                f.write(self.data.get(self.rng, size))
            total += size
        return {"files": n, "bytes": total}

    def run(self):
        deadline = Deadline(self.a.max_seconds)
        counts = collections.Counter()
        r = subprocess.run(["cp", "-r", self.src, self.dst], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("cp -r: " + r.stderr.strip()[-300:])
        files = []
        for root, dirs, fns in os.walk(self.dst):
            dirs.sort()
            for fn in sorted(fns):
                p = os.path.join(root, fn)
                files.append(p)
                self.pc.touch(p, os.path.getsize(p))    # cp's pages, oldest first out
        counts["copied"] = len(files)
        rng = self.rng
        pop = Pick(range(len(files)), 1.0, rng)
        edited = set()
        for i in range(int(12000 * self.a.scale)):
            if deadline.over():
                break
            j = pop.pick(rng)
            p = files[j]
            size = os.path.getsize(p)
            x = rng.random()
            if size > 8 * M or x < 0.35:                # view (a large file: its start)
                read_file(p, self.pc, limit=4 * M if size > 8 * M else None)
                counts["views"] += 1
                continue
            edited.add(j)
            if x < 0.55:                                # rewrite a few regions in place
                read_file(p, self.pc)
                fd = os.open(p, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    for _ in range(rng.randint(1, 8)):
                        n = rng.randint(512, 16 * K)
                        os.pwrite(fd, self.data.get(rng, n), rng.randrange(max(1, size)))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.pc.touch(p, os.path.getsize(p))
                counts["rewrites"] += 1
            elif x < 0.70:                              # append
                append_file(p, self.data.get(rng, rng.randint(1 * K, 64 * K)), self.pc)
                counts["appends"] += 1
            elif x < 0.95:                              # save: a new file renamed over
                read_file(p, self.pc)
                n = max(1, int(size * rng.uniform(0.9, 1.1)))
                d, b = os.path.split(p)
                tmp = os.path.join(d, ".~" + b + ".tmp")
                write_file(tmp, self.data.get(rng, n), self.pc, sync=True)
                if rng.random() < 0.05:                 # the old one kept as a backup
                    os.rename(p, p + "~")
                    self.pc.rename(p, p + "~")
                    files.append(p + "~")
                os.rename(tmp, p)
                self.pc.rename(tmp, p)
                counts["saves"] += 1
            else:                                       # a new document beside it
                n = lognormal(rng, 16 * K, 1.2, 1, 4 * M)
                q = os.path.join(os.path.dirname(p), "new%05d.txt" % i)
                write_file(q, self.data.get(rng, n), self.pc, sync=True)
                files.append(q)
                counts["new"] += 1
        for j in sorted(edited):                        # read them back
            read_file(files[j], self.pc)
        counts.update(read_back=len(edited), cut=deadline.cut, dropped=self.pc.dropped)
        return dict(counts)


# ---------------------------------------------------------------- backup scan
class BackupScan:
    """A hot random-read load on a tenth of a tree while a backup reads
    all of it once."""
    READERS = 4
    HOT_IOPS = 4000         # the hot load's reads a second, all readers together
    SIZES = (4 * K, 4 * K, 4 * K, 4 * K, 4 * K, 16 * K, 16 * K, 16 * K, 64 * K, 64 * K)

    def __init__(self, a, pc):
        self.a, self.pc = a, pc
        self.top = os.path.join(a.dir, "data")
        self.rng = random.Random(a.seed)
        self.data = Data(a.seed)

    def tree(self):
        rng = random.Random(self.a.seed + 1)
        files = []
        for i in range(max(20, int(2000 * self.a.scale))):
            p = os.path.join(self.top, "d%02d" % (i % 40), "s%d" % (i // 40 % 5), "f%05d" % i)
            files.append((p, lognormal(rng, 192 * K, 1.3, 4 * K, 32 * M)))
        hot = sorted(rng.sample(range(len(files)), max(2, len(files) // 10)))
        return files, [files[i] for i in hot]

    def setup(self):
        files, hot = self.tree()
        nothing = PageCache(0)
        for p, n in files:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            write_file(p, self.data.get(self.rng, n), nothing)
        return {"files": len(files), "bytes": sum(n for _, n in files),
                "hot_files": len(hot), "hot_bytes": sum(n for _, n in hot)}

    def run(self):
        files, hot = self.tree()
        before, after = max(2.0, 15 * self.a.scale), max(2.0, 10 * self.a.scale)
        stop = threading.Event()
        counts = collections.Counter()          # the scan's
        hot_reads = []                          # each reader's count

        def reader(k):
            rng = random.Random(self.a.seed * 17 + k)
            pop = Pick(hot, 0.9, rng)
            buf = mmap.mmap(-1, 64 * K)
            fds = {}
            try:
                n, t0, gap = 0, time.monotonic(), self.READERS / self.HOT_IOPS
                while not stop.is_set():
                    ahead = t0 + n * gap - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
                    p, size = pop.pick(rng)
                    if p not in fds:
                        fds[p] = os.open(p, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
                    ln = rng.choice(self.SIZES)
                    off = rng.randrange(max(1, (size - ln) // (4 * K) + 1)) * 4 * K
                    os.preadv(fds[p], [memoryview(buf)[:ln]], off)
                    n += 1
                hot_reads.append(n)
            finally:
                for fd in fds.values():
                    os.close(fd)

        def scan():
            time.sleep(before)
            t0 = time.monotonic()
            nothing = PageCache(0)
            for root, dirs, fns in os.walk(self.top):
                dirs.sort()
                for fn in sorted(fns):
                    counts["scan_bytes"] += read_file(os.path.join(root, fn), nothing,
                                                      chunk=1 * M)
                    counts["scanned"] += 1
            counts["scan_s"] = round(time.monotonic() - t0, 1)
            time.sleep(after)

        def scan_then_stop():
            try:
                scan()
            finally:
                stop.set()
        run_threads([scan_then_stop] + [lambda k=k: reader(k) for k in range(self.READERS)])
        counts["hot_reads"] = sum(hot_reads)
        return dict(counts)


CHILD_WORKLOADS = {"maildir": Maildir, "copy-edit": CopyEdit, "backup-scan": BackupScan}


def child_main(argv):
    """record_traces.py --child NAME PHASE: one phase of a Python workload,
    in a process of its own (a signal or a hang never leaves the parent
    holding a file open on the mount); its counts as JSON on stdout."""
    ap = argparse.ArgumentParser(prog="record_traces.py --child")
    ap.add_argument("name", choices=sorted(CHILD_WORKLOADS))
    ap.add_argument("phase", choices=["setup", "run"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--src", default="")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--page-cache", type=int, default=-1)     # bytes; -1: the kernel's
    ap.add_argument("--max-seconds", type=float, default=600)
    a = ap.parse_args(argv)
    pc = PageCache(None if a.page_cache < 0 else a.page_cache)
    w = CHILD_WORKLOADS[a.name](a, pc)
    print(json.dumps(w.setup() if a.phase == "setup" else w.run()))
    return 0


# ---------------------------------------------------------------- workloads in the parent
def scaled_s(base, scale):
    return max(2, int(round(base * scale)))


class Run:
    """One workload on one mounted target (db_bench's tfs_r5c)."""

    def __init__(self, args, c, work, name):
        self.args, self.c, self.name = args, c, name
        self.t = db.Target(c, work, "tfs_r5c")
        self.mnt = self.t.data
        self.info = {}

    def tierctl(self, *a, timeout=600):
        return db.must(db.child([os.path.join(self.args.build, "tierctl")] + list(a), timeout,
                                "tierctl " + a[0]), "tierctl " + " ".join(map(str, a)))

    def py_child(self, phase):
        a = self.args
        pc = -1 if a.no_drop else a.page_cache
        cmd = [PY, os.path.abspath(__file__), "--child", self.name, phase, "--dir", self.mnt,
               "--src", os.path.join(self.t.dir, "src"), "--scale", repr(a.scale),
               "--seed", str(SEED), "--page-cache", str(pc), "--max-seconds", str(a.max_seconds)]
        rc, out, err = db.child(cmd, a.max_seconds + 3600, "%s %s" % (self.name, phase))
        if rc:
            raise RuntimeError("%s: exit %d: %s" % (
                phase, rc, (err.strip().splitlines() or ["?"])[-1]))
        r = json.loads(out.strip().splitlines()[-1])
        self.info[phase] = r
        return r

    # --- set-up (not traced) and the traced part of each workload
    def setup(self):
        a, n = self.args, self.name
        if n == "pgbench":
            self.c.scales = [max(1, int(round(10 * a.scale)))]
            db.pg_init(self.c, self.t, self.info)
            with open(os.path.join(self.t.pgdata, "postgresql.conf"), "a") as f:
                f.write("# record_traces.py: a database 5x its buffer pool\n"
                        "shared_buffers = 32MB\n")
        elif n == "sqlite":
            db.sqlite_child("init", self.t.sqlite, max(100, int(400000 * a.scale)), SEED)
        elif n.startswith("iometer"):
            self.fio_file = os.path.join(self.mnt, "iobw.tst")
            self.fio_size = max(64 * M, int(2 * 1024 * M * a.scale) // M * M)
            self.fio(["--name=layout", "--rw=write", "--bs=1M", "--end_fsync=1"], 1800)
        else:
            if n == "copy-edit":
                os.mkdir(os.path.join(self.t.dir, "src"))
            self.py_child("setup")

    def run(self):
        a, n = self.args, self.name
        if n == "pgbench":
            self.c.warmup, self.c.seconds = 5, scaled_s(60, a.scale)
            row = {}
            with self.dropping(self.t.pgdata):
                db.cell_pgbench(self.c, self.t, 0, self.c.scales[0], 8, row, self.logdir)
            self.info["run"] = {k: row[k] for k in ("txns", "tps", "latency_ms") if k in row}
        elif n == "sqlite":
            with self.dropping(os.path.dirname(self.t.sqlite)):
                self.info["run"] = db.sqlite_child(
                    "run", self.t.sqlite, "FULL", max(10, int(15000 * a.scale)), a.max_seconds, 4,
                    SEED + 1)
        elif n.startswith("iometer"):
            bs, rmix = {"iometer-exchange": ("32k", 62), "iometer-database": ("8k", 67)}[n]
            out = self.fio(["--name=" + n, "--rw=randrw", "--rwmixread=%d" % rmix, "--bs=" + bs,
                            "--random_distribution=zoned:60/5:30/15:10/80", "--ioengine=libaio",
                            "--iodepth=16", "--norandommap", "--randseed=%d" % SEED,
                            "--time_based", "--runtime=%d" % scaled_s(30, a.scale),
                            "--output-format=json"], scaled_s(30, a.scale) + 600)
            j = json.loads(out[out.index("{"):])["jobs"][0]
            self.info["run"] = {d: round(j[d]["iops"]) for d in ("read", "write")}
        else:
            self.py_child("run")

    def fio(self, opts, timeout):
        cmd = ["fio", "--filename=" + self.fio_file, "--size=%d" % self.fio_size, "--direct=1"]
        return db.must(db.child(cmd + opts, timeout, "fio"), "fio " + opts[0])

    @contextlib.contextmanager
    def dropping(self, top):
        """The page cache model of pgbench and SQLite (a Dropper) around a run."""
        d = None if self.args.no_drop else Dropper(top, self.args.drop_every)
        if d:
            d.start()
        try:
            yield
        finally:
            if d:
                d.stop()


def record(args, c, work, name):
    """Mount, set up, trace the workload into OUT/NAME.trace, unmount: its
    stats, or RuntimeError."""
    r = Run(args, c, work, name)
    r.logdir = os.path.join(work, "logs")
    os.makedirs(r.logdir, exist_ok=True)
    final = os.path.join(args.out, name + ".trace")
    part = final + ".part"
    for p in (final, part):
        if os.path.exists(p):
            os.unlink(p)
    ok = False
    try:
        r.t.mount()
        log("%s: mounted %s (-o %s)" % (name, r.mnt, r.t.daemon.opts))
        t0 = time.time()
        r.setup()
        os.sync()
        r.tierctl("flush", r.mnt)
        log("%s: set up in %.0f s %s" % (name, time.time() - t0, json.dumps(r.info.get("setup", ""))))
        os.setxattr(r.mnt, "user.tierfs.reset", b"1")  # the counts and the curve from 0
        r.tierctl("trace", r.mnt, "start", part, timeout=60)
        t0 = time.time()
        try:
            r.run()
        finally:
            secs = time.time() - t0
            r.tierctl("trace", r.mnt, "stop", timeout=60)
        with open(os.path.join(args.out, name + ".status"), "w") as f:
            f.writelines(l + "\n" for l in r.tierctl("status", r.mnt, "--raw").splitlines()
                         if l.startswith(("cache.", "level=", "chunk=", "members=")))
        log("%s: ran %.1f s %s" % (name, secs, json.dumps(r.info.get("run", ""))))
        r.t.check()
        errs = r.t.daemon.errors()
        if errs:
            log("%s: the daemon logged %d errors or warnings, the first: %s"
                % (name, len(errs), errs[0]))
        ok = True
    finally:
        if r.t.pgdata in db.SERVERS:
            db.pg_stop(c, r.t, "immediate")
        r.t.daemon.umount()
        rs.remove_dir(r.t.dir, args.keep)
        if not ok and os.path.exists(part):
            os.unlink(part)
    os.replace(part, final)
    s = trace_stats(final)
    if s.records == 0:
        raise RuntimeError("the trace is empty")
    return s, secs


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="record_traces.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--cache-size", type=rs.size_arg, default=rs.size_arg("256M"))
    ap.add_argument("--page-cache", type=rs.size_arg, default=rs.size_arg("64M"))
    ap.add_argument("--drop-every", type=float, default=1.0)
    ap.add_argument("--no-drop", action="store_true")
    ap.add_argument("--tmpdir", default="/var/tmp")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    a.only = [w for w in a.only.split(",") if w]
    bad = [w for w in a.only if w not in WORKLOADS]
    if bad or not a.only:
        ap.error("unknown workload %s (of %s)" % (",".join(bad) or "''", ",".join(WORKLOADS)))
    if not 0 < a.scale <= 100 or a.drop_every <= 0 or a.max_seconds <= 0:
        ap.error("--scale, --drop-every and --max-seconds must be positive")
    a.build = os.path.abspath(a.build)
    a.out = os.path.abspath(a.out)
    return a


def checks(a):
    need = ["fusermount3"] + (["fio"] if any(w.startswith("iometer") for w in a.only) else [])
    need += ["runuser"] if "pgbench" in a.only else []
    for exe in need:
        if not shutil.which(exe):
            sys.exit("record_traces.py: %s not found (contrib/deps.sh --test)" % exe)
    for exe in ("tierfs", "mkfs.tierfs", "tierctl"):
        if not os.access(os.path.join(a.build, exe), os.X_OK):
            sys.exit("record_traces.py: no %s in %s (--build)" % (exe, a.build))


def main(argv):
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    if argv[:1] == ["--stats"]:
        rc = 0
        for p in argv[1:]:
            try:
                name = os.path.basename(p)
                print(stats_line(name[:-6] if name.endswith(".trace") else name, trace_stats(p)))
            except (OSError, ValueError) as e:
                print("record_traces.py: %s" % e, file=sys.stderr)
                rc = 1
        return rc
    a = parse_args(argv)
    checks(a)
    # db_bench's settings, for its target and its PostgreSQL and SQLite code
    # TIERFS_OPTS: more mount options (as db_bench.py), e.g. cache_extent=64K
    opts = [o for o in os.environ.get("TIERFS_OPTS", "").split(",") if o]
    c = types.SimpleNamespace(build=a.build, cache_size=a.cache_size, tierfs_opts=opts,
                              mergerfs_opts="", jobs=2, warmup=5, seconds=60, scales=[10],
                              perf="")
    if "pgbench" in a.only:
        c.bindir, c.pw = db.pg_bindir(), pwd.getpwnam(db.PG_USER)
    CLEAN.keep = a.keep
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, rs.on_signal)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.tmpdir, exist_ok=True)
    src, commit = rs.source_commit(a.build)
    log("tierfs %s at %s; traces into %s" % (src, commit, a.out))
    failed, errors = [], []
    with rs.Guard(errors) as guard:
        work = tempfile.mkdtemp(prefix="record-traces.", dir=a.tmpdir)
        CLEAN.dirs.append(work)
        os.chmod(work, 0o755)           # the postgres user goes through it
        for name in a.only:
            try:
                s, secs = record(a, c, work, name)
            except (RuntimeError, OSError, ValueError) as e:
                msg = str(e).strip().splitlines()
                print("record_traces.py: %s: %s" % (name, msg[0] if msg else type(e).__name__),
                      file=sys.stderr, flush=True)
                failed.append(name)
                continue
            print(stats_line(name, s, secs), flush=True)
    if guard.rc:
        return guard.rc
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
