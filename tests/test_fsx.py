"""An fsx-style differential fuzzer: a seeded random sequence of data
operations on a few files through the mount, mirrored in an in-memory
model (one bytearray per file, its length the file's size) and checked
as it goes.

Operations: pwrite (unaligned, across extent and chunk boundaries, past
the end leaving holes), pread, ftruncate up and down, fallocate (mode 0,
KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE with and without KEEP_SIZE,
all of which tierfs supports: README "What runs on it"; PUNCH_HOLE
without KEEP_SIZE is EOPNOTSUPP on tierfs as on ext4, checked), fsync and
fdatasync, O_DIRECT reads and writes of whole 4K blocks on a second
descriptor, reads and msync'ed writes through a shared mapping, four
threads writing disjoint ranges of one file at once, run-time
`cache_mode` switches (one case), the per-file tier actions
(`user.tierfs.flush`, `user.tierfs.evict`), a clean remount, and a
SIGKILL of the daemon followed by a remount.  After a kill the whole
model must read back: DESIGN §10.5 "Daemon killed" promises that every
acknowledged write survives a killed daemon (the kernel's FUSE write-back
cache is off, fs.c, so an acknowledged write has reached the daemon), not
only the fsynced ones (that is the power-cut claim).

At the end the tier is flushed, the array mounted without it, and the
members' files compared with the model again.

Every failure names the case, the seed, the index of the operation and
the last operations, which replay it:
    FUZZ_SEED=N FUZZ_OPS=M pytest tests/test_fsx.py -k CASE
FUZZ_SEED=N,M,... or A-B, or FUZZ_SEEDS=COUNT (seeds 1..COUNT) run more
seeds by hand.
"""
import ctypes
import ctypes.util
import errno
import mmap
import os
import random

import pytest

from conftest import run_threads
from test_cache import cst, copts, dread, dwrite, wait_stat

K = 1024
M = 1024 * K

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
FL_KEEP_SIZE, FL_PUNCH_HOLE, FL_ZERO_RANGE = 0x01, 0x02, 0x10


def fallocate(fd, mode, off, ln):
    if _libc.fallocate(fd, mode, off, ln) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# name: (level, members, chunk, cache options or None, max file size, ops, seed)
CASES = {
    "raid5-writeback-64K": ("raid5", 3, "64K",
                            dict(size="3M", extent="64K", promote=1, seq_cutoff=0,
                                 dirty_low=10, dirty_high=60), 2 * M, 700, 1),
    "raid5-switching": ("raid5", 3, "64K",
                        dict(size="2M", extent="64K", promote=1, seq_cutoff=0, switch=True),
                        2 * M, 500, 6),
    "raid1-writethrough": ("raid1", 2, "64K",
                           dict(size="2M", extent="64K", promote=1, seq_cutoff=0,
                                mode="writethrough"), 2 * M, 600, 2),
    "raid6-nocache": ("raid6", 4, "16K", None, 1 * M, 600, 3),
    "raid10-nocache": ("raid10", 4, "64K", None, 1 * M, 500, 4),
    "raid5-writeback-4K": ("raid5", 3, "16K",
                           dict(size="1M", extent="4K", promote=1, seq_cutoff=0,
                                dirty_low=5, dirty_high=50), 1 * M, 600, 5),
}
NFILES = 3


def seeds(default):
    if os.environ.get("FUZZ_SEED"):         # N, N,M,... or A-B
        out = []
        for s in os.environ["FUZZ_SEED"].split(","):
            lo, _, hi = s.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
        return out
    if os.environ.get("FUZZ_SEEDS"):
        return list(range(1, int(os.environ["FUZZ_SEEDS"]) + 1))
    return [default]


class Fuzz:
    def __init__(self, a, mount, name, seed, case):
        level, n, chunk, cache, maxsize, _, _ = case
        self.a, self.m, self.name, self.seed = a, mount, name, seed
        self.rng = random.Random(seed)
        self.cache = cache
        self.maxsize = maxsize
        self.chunk = int(chunk[:-1]) * K
        self.ext = int(cache["extent"][:-1]) * K if cache else self.chunk
        ndata = {"raid5": n - 1, "raid6": n - 2, "raid10": n // 2, "raid1": 1}[level]
        self.row = self.chunk * ndata
        self.files = [bytearray() for _ in range(NFILES)]
        self.paths = [os.path.join(a.mnt, f"f{i}") for i in range(NFILES)]
        self.fds, self.dfds = [], []
        self.hist = []
        self.i = 0
        self.kills = self.remounts = 0
        self.open_all(create=True)

    # -- descriptors, mounts ------------------------------------------------
    def open_all(self, create=False):
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self.fds = [os.open(p, flags, 0o644) for p in self.paths]
        self.dfds = [os.open(p, os.O_RDWR | os.O_DIRECT) for p in self.paths]

    def close_all(self):
        for fd in self.fds + self.dfds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds, self.dfds = [], []

    def log(self, s):
        self.hist.append(f"#{self.i} {s}")

    def fail(self, msg):
        tail = "\n  ".join(self.hist[-25:])
        pytest.fail(f"[{self.name} seed={self.seed} op #{self.i}] {msg}\n"
                    f"replay: FUZZ_SEED={self.seed} FUZZ_OPS={self.i + 1} "
                    f"pytest tests/test_fsx.py -k {self.name}\nlast operations:\n  {tail}",
                    pytrace=False)

    def same(self, got, want, what):
        if got == want:
            return
        n = min(len(got), len(want))
        d = next((i for i in range(n) if got[i] != want[i]), n)
        self.fail(f"{what}: {len(got)} bytes, want {len(want)}; first difference at +{d} "
                  f"(got {got[d:d + 8].hex()} want {want[d:d + 8].hex()})")

    # -- choosing offsets and lengths -----------------------------------------
    def offset(self, f, align=1):
        r = self.rng.random()
        size = len(self.files[f])
        if r < 0.3:
            off = self.rng.randrange(self.maxsize)
        elif r < 0.55:      # near an extent boundary
            off = self.rng.randrange(self.maxsize // self.ext + 1) * self.ext + \
                self.rng.choice([-1, 0, 1, -512, 512, -4096, 4096])
        elif r < 0.75:      # near a chunk or a row boundary
            unit = self.rng.choice([self.chunk, self.row])
            off = self.rng.randrange(self.maxsize // unit + 1) * unit + \
                self.rng.choice([-1, 0, 1, -100, 4096])
        else:               # near the end of the file (past it: a hole)
            off = size + self.rng.choice([-4096, -1, 0, 1, 5000, self.ext + 17, 3 * self.ext])
        off = max(0, min(off, self.maxsize - 1))
        return off // align * align

    def length(self, off, align=1):
        r = self.rng.random()
        if r < 0.25:
            ln = self.rng.randint(1, 64)
        elif r < 0.55:
            ln = self.rng.randint(1, 8 * K)
        elif r < 0.85:
            ln = self.rng.randint(1, 2 * self.ext + self.row)
        else:
            ln = self.rng.randint(1, 300 * K)
        ln = min(ln, self.maxsize - off)
        return max(align, ln // align * align)

    # -- the operations ---------------------------------------------------------
    def model_write(self, f, off, data):
        d = self.files[f]
        if len(d) < off + len(data):
            d.extend(bytes(off + len(data) - len(d)))
        d[off:off + len(data)] = data

    def op_write(self):
        f = self.rng.randrange(NFILES)
        off = self.offset(f)
        ln = self.length(off)
        data = self.rng.randbytes(ln)
        self.log(f"pwrite f{f} off={off} len={ln}")
        n = os.pwrite(self.fds[f], data, off)
        if n != ln:
            self.fail(f"short write {n} of {ln}")
        self.model_write(f, off, data)

    def op_read(self):
        f = self.rng.randrange(NFILES)
        off = self.offset(f)
        ln = self.length(off)
        drop = self.rng.random() < 0.3
        self.log(f"pread f{f} off={off} len={ln}" + (" (page cache dropped)" if drop else ""))
        if drop:        # so that the read reaches the daemon
            os.posix_fadvise(self.fds[f], 0, 0, os.POSIX_FADV_DONTNEED)
        got = os.pread(self.fds[f], ln, off)
        self.same(got, bytes(self.files[f][off:off + ln]), f"pread f{f} [{off}, +{ln})")

    def op_dwrite(self):
        f = self.rng.randrange(NFILES)
        off = self.offset(f, 4096)
        ln = min(self.length(off, 4096), 256 * K)
        data = self.rng.randbytes(ln)
        self.log(f"dwrite f{f} off={off} len={ln}")
        dwrite(self.dfds[f], off, data)
        self.model_write(f, off, data)

    def op_dread(self):
        f = self.rng.randrange(NFILES)
        off = self.offset(f, 4096)
        ln = min(self.length(off, 4096), 256 * K)
        self.log(f"dread f{f} off={off} len={ln}")
        self.same(dread(self.dfds[f], off, ln), bytes(self.files[f][off:off + ln]), f"O_DIRECT read f{f} [{off}, +{ln})")

    def mmap_span(self, most):
        """A file, its size and a span of at most `most` bytes inside it
        for an mmap op (a mapping cannot reach past the end); None if the
        file drawn is empty."""
        f = self.rng.randrange(NFILES)
        size = len(self.files[f])
        if size == 0:
            return None
        off = self.rng.randrange(size)
        return f, size, off, self.rng.randint(1, min(size - off, most))

    def op_mmap_read(self):
        span = self.mmap_span(128 * K)
        if not span:
            return
        f, size, off, ln = span
        self.log(f"mmap read f{f} off={off} len={ln}")
        mp = mmap.mmap(self.fds[f], size, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            got = mp[off:off + ln]
        finally:
            mp.close()
        self.same(got, bytes(self.files[f][off:off + ln]), f"mmap read f{f} [{off}, +{ln})")

    def op_mmap_write(self):
        span = self.mmap_span(64 * K)
        if not span:
            return
        f, size, off, ln = span
        data = self.rng.randbytes(ln)
        self.log(f"mmap write f{f} off={off} len={ln}, msync")
        mp = mmap.mmap(self.fds[f], size, mmap.MAP_SHARED)
        try:
            mp[off:off + ln] = data
            mp.flush()          # msync(MS_SYNC): written back before a kill can come
        finally:
            mp.close()
        self.model_write(f, off, data)

    def op_parallel(self):
        """Four threads write disjoint ranges of one file at once (one
        extent, one row, or spread): the result is the same whatever their
        order."""
        f = self.rng.randrange(NFILES)
        span = self.rng.choice([self.ext, self.row, 4 * self.row])
        base = self.rng.randrange(max(1, self.maxsize - span))
        cut = sorted(self.rng.sample(range(1, span), 3))
        parts = [(base + a, b - a) for a, b in zip([0] + cut, cut + [span])]
        datas = [self.rng.randbytes(ln) for _, ln in parts]
        self.log(f"parallel pwrite f{f} " + " ".join(f"{o}+{l}" for o, l in parts))
        errs = []

        def one(off, data):
            try:
                if os.pwrite(self.fds[f], data, off) != len(data):
                    errs.append(f"short write at {off}")
            except OSError as e:
                errs.append(f"{off}: {e}")
        run_threads([(one, (o, d)) for (o, _), d in zip(parts, datas)], 30,
                    "a parallel write")
        if errs:
            self.fail("parallel writes: " + "; ".join(errs))
        for (o, _), d in zip(parts, datas):
            self.model_write(f, o, d)

    def op_mode(self):
        if not self.cache or not self.cache.get("switch"):
            return
        mode = self.rng.choice(["writeback", "writethrough", "writearound", "off"])
        self.log(f"cache_mode {mode}")
        os.setxattr(str(self.a.mnt), "user.tierfs.cache_mode", mode.encode())

    def op_truncate(self):
        f = self.rng.randrange(NFILES)
        size = len(self.files[f])
        r = self.rng.random()
        if r < 0.4 and size:
            ln = self.rng.randrange(size)                       # down
        elif r < 0.6:
            ln = self.offset(f)
        else:
            ln = min(self.maxsize, size + self.rng.randint(0, 3 * self.ext))  # up
        self.log(f"ftruncate f{f} {size} -> {ln}")
        os.ftruncate(self.fds[f], ln)
        d = self.files[f]
        if ln < len(d):
            del d[ln:]
        else:
            d.extend(bytes(ln - len(d)))

    def op_fallocate(self):
        f = self.rng.randrange(NFILES)
        mode = self.rng.choice([0, FL_KEEP_SIZE, FL_PUNCH_HOLE | FL_KEEP_SIZE,
                                FL_PUNCH_HOLE | FL_KEEP_SIZE, FL_ZERO_RANGE,
                                FL_ZERO_RANGE | FL_KEEP_SIZE, FL_PUNCH_HOLE])
        off = self.offset(f)
        ln = self.length(off)
        self.log(f"fallocate f{f} mode={mode:#x} off={off} len={ln}")
        try:
            fallocate(self.fds[f], mode, off, ln)
        except OSError as e:
            if mode == FL_PUNCH_HOLE and e.errno == errno.EOPNOTSUPP:
                return          # ext4 too: a punch needs KEEP_SIZE
            self.fail(f"fallocate mode {mode:#x}: {e}")
        if mode == FL_PUNCH_HOLE:
            self.fail("fallocate PUNCH_HOLE without KEEP_SIZE succeeded (ext4: EOPNOTSUPP)")
        d = self.files[f]
        end = off + ln
        if mode & (FL_PUNCH_HOLE | FL_ZERO_RANGE):
            zend = min(end, len(d))
            if zend > off:
                d[off:zend] = bytes(zend - off)
        if not mode & FL_KEEP_SIZE and end > len(d):
            d.extend(bytes(end - len(d)))

    def op_fsync(self):
        f = self.rng.randrange(NFILES)
        data = self.rng.random() < 0.5
        self.log(f"{'fdatasync' if data else 'fsync'} f{f}")
        (os.fdatasync if data else os.fsync)(self.fds[f])

    def op_tier(self):
        if not self.cache:
            return
        f = self.rng.randrange(NFILES)
        what = self.rng.choice(["flush", "evict"])
        self.log(f"setxattr f{f} user.tierfs.{what}")
        try:
            os.setxattr(self.paths[f], f"user.tierfs.{what}", b"1")
        except OSError as e:
            if e.errno != errno.EBUSY:      # documented: writes kept dirtying it
                self.fail(f"user.tierfs.{what}: {e}")
            self.log("  -> EBUSY")

    def op_stat(self):
        f = self.rng.randrange(NFILES)
        self.log(f"fstat f{f}")
        st = os.fstat(self.fds[f])
        if st.st_size != len(self.files[f]):
            self.fail(f"f{f}: size {st.st_size}, want {len(self.files[f])}")

    def op_remount(self):
        self.log("remount (clean)")
        self.close_all()
        self.m.remount()
        self.remounts += 1
        self.open_all()
        self.verify("after a clean remount")

    def op_kill(self):
        self.log("SIGKILL the daemon, remount")
        self.close_all()
        self.m.kill()
        self.m.start()
        self.kills += 1
        self.open_all()
        self.verify("after SIGKILL and remount (every acknowledged write survives, "
                    "DESIGN 10.5)")

    OPS = [("op_write", 30), ("op_read", 20), ("op_dwrite", 8), ("op_dread", 8),
           ("op_mmap_read", 3), ("op_truncate", 6), ("op_fallocate", 8), ("op_fsync", 4),
           ("op_tier", 4), ("op_stat", 4), ("op_remount", 0.4), ("op_kill", 0.6),
           ("op_mmap_write", 2), ("op_parallel", 3), ("op_mode", 2)]

    def verify(self, when):
        for f in range(NFILES):
            st = os.stat(self.paths[f])
            if st.st_size != len(self.files[f]):
                self.fail(f"f{f} {when}: size {st.st_size}, want {len(self.files[f])}")
            with open(self.paths[f], "rb") as fh:
                self.same(fh.read(), bytes(self.files[f]), f"f{f} {when}")

    def run(self, nops):
        names, weights = zip(*self.OPS)
        for self.i in range(nops):
            op = self.rng.choices(names, weights)[0]
            try:
                getattr(self, op)()
            except (OSError, RuntimeError, AssertionError) as e:
                self.fail(f"{op}: {e}")     # RuntimeError: a mount refused
            if self.i % 50 == 49:
                self.verify("(periodic check)")
        self.verify("at the end")


@pytest.mark.parametrize("name", list(CASES))
def test_fsx(make_array, tmp_path, name):
    case = CASES[name]
    level, n, chunk, cache, _, nops, seed0 = case
    nops = int(os.environ.get("FUZZ_OPS", nops))
    for seed in seeds(seed0):
        sub = f"s{seed}"
        a = make_array(level, n, chunk, sub=sub)
        opts = copts(tmp_path / sub / "cache", **{k: v for k, v in cache.items()
                                                  if k != "switch"}) if cache else []
        m = a.mount(opts=opts)
        fz = Fuzz(a, m, name, seed, case)
        fz.run(nops)
        fz.i = nops
        fz.close_all()
        if cache:
            os.setxattr(str(a.mnt), "user.tierfs.cache_mode", cache.get("mode", "writeback").encode())
            s = cst(a.mnt)
            print(f"{name} seed {seed}: " + " ".join(f"{k}={s[k]}" for k in (
                "evictions", "promotions", "write_hits", "write_misses", "read_hits",
                "read_misses", "dirty_bytes") if k in s))
            os.setxattr(str(a.mnt), "user.tierfs.ctl", b"flush")
            wait_stat(a.mnt, "dirty_bytes", 0, timeout=60)
            wait_stat(a.mnt, "flush_pending", 0, timeout=60)
            m.stop()
            m = a.mount()           # uncached: the members alone
            fz.m = m
            fz.verify("through an uncached mount after the flush")
        m.stop()
        print(f"{name} seed {seed}: {nops} ops, {fz.kills} kills, {fz.remounts} remounts")
