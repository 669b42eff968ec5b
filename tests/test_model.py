"""Model-checked random workloads, one per RAID level / member count / chunk.

Each case runs a seeded random mix of file and namespace operations through
the mount and checks every result against an in-memory model:

  pwrite (random offsets and lengths that cross chunk and stripe boundaries,
  writes far past EOF that leave holes), pread (holes read zeros), ftruncate
  grow/shrink, truncate by path, O_TRUNC, O_APPEND writes, rename of files
  (same dir, across dirs, over existing files) and of directories (also over
  empty ones), hard links (st_ino and st_nlink), unlink of files that stay
  open (I/O continues on the open fd), mkdir/rmdir, and the EEXIST/ENOTEMPTY
  refusals.  New objects often reuse a name that existed before, maybe as
  another type, maybe still open.  Some cases mount with attr_timeout=0 so
  the kernel asks tierfs for every lookup and attribute.

Halfway through, and at the end, the array is unmounted and mounted again and
everything is verified anew through the mount (tree, types, sizes, contents,
link counts, directory link counts, st_ino shared by hard links and stable
across mounts).  With every file closed the daemon must hold no member file.
The members themselves are checked with an independent Python implementation
of the layout: each member file holds exactly its chunks, is no larger than
its share, and the member(s) holding the last byte have exactly their share
(so the size survives a remount); RAID1 members hold the whole file; RAID5
and RAID6 parity members hold the P (xor) and Q (GF(2^8)) syndromes of their
rows, recomputed independently here (bytes past EOF count as zeros, parity of
a never-written hole may be missing but then must be zero); every
member has the same tree; hard links are hard links on every member; file
identities agree across members and differ between files.  A sparse file
written past 4 GiB, 5 GiB and 1 TiB is checked the same way.  statfs on the
mount must report the capacity the level implies.

A failure names the case, its seed and the last operations.  Reproduce with
    TIERFS_MODEL_SEED=<seed> TIERFS_MODEL_OPS=<n> pytest tests/test_model.py -k <case>
(the same number of operations matters: the mid-run remount is at n/2).
"""
import collections
import errno
import os
import random
import stat
import time
import zlib

import pytest
from conftest import FID_XATTR

NOPS = int(os.environ.get("TIERFS_MODEL_OPS", "2000"))

K = 1024
M = 1024 * 1024

# (level, members, chunk, kernel cache timeout or None for the default): with
# 0 the kernel asks tierfs for every lookup and attribute instead of answering
# from its cache.
CASES = [
    ("jbod", 1, 4 * K, None),
    ("jbod", 3, 64 * K, 0),
    ("raid0", 2, 4 * K, None),
    ("raid0", 2, 1 * M, None),
    ("raid0", 4, 64 * K, None),
    ("raid0", 4, 4 * K, 0),
    ("raid0", 3, 64 * K, None),
    ("raid1", 2, 64 * K, 0),
    ("raid1", 3, 4 * K, None),
    ("raid10", 4, 4 * K, None),
    ("raid10", 4, 64 * K, 0),
    ("raid10", 4, 1 * M, None),
    ("raid10", 3, 64 * K, None),  # odd member count: copies straddle rows
    ("raid5", 3, 4 * K, None),
    ("raid5", 3, 64 * K, None),
    ("raid5", 4, 64 * K, 0),
    ("raid5", 5, 1 * M, None),
    ("raid6", 4, 4 * K, None),
    ("raid6", 4, 64 * K, None),
    ("raid6", 6, 64 * K, None),
]


def chunk_name(c):
    return f"{c // M}M" if c % M == 0 else f"{c // K}K"


def case_id(c):
    return f"{c[0]}-{c[1]}-{chunk_name(c[2])}" + ("-nocache" if c[3] == 0 else "")


def case_seed(c):
    env = os.environ.get("TIERFS_MODEL_SEED")
    return int(env) if env else zlib.crc32(case_id(c).encode())


# ---------------------------------------------------------------------------
# Independent GF(2^8) arithmetic (polynomial 0x11d, generator 2: Linux md RAID6)
# ---------------------------------------------------------------------------

def gf_mul(a, b):
    """Carry-less multiply reduced by x^8+x^4+x^3+x^2+1, bit by bit."""
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a & 0x100:
            a ^= 0x11d
    return r


def gf_pow2(i):
    r = 1
    for _ in range(i):
        r = gf_mul(r, 2)
    return r


_GF_TABLES = {}


def gf_scale(coef, buf):
    """coef * every byte of buf."""
    t = _GF_TABLES.get(coef)
    if t is None:
        t = _GF_TABLES[coef] = bytes(gf_mul(coef, x) for x in range(256))
    return buf.translate(t)


def xor_bytes(a, b):
    assert len(a) == len(b)
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(len(a), "little")


def syndromes(datas, nparity):
    """[P] or [P, Q] of equal-length data chunks D_0..D_{nd-1}:
    P = xor of D_i, Q = xor of g^i * D_i."""
    ln = len(datas[0])
    p = q = bytes(ln)
    for i, d in enumerate(datas):
        p = xor_bytes(p, d)
        if nparity == 2:
            q = xor_bytes(q, gf_scale(gf_pow2(i), d))
    return [p, q][:nparity]


# ---------------------------------------------------------------------------
# Independent layout: which member bytes hold which logical bytes
# ---------------------------------------------------------------------------

class PyLayout:
    """Written from the specification, not from layout.c:
    jbod   - the whole file on member fid % n, at the same offsets
    raid1  - the whole file on every member
    raid0  - chunk c on member (c + fid) % n, at row c // n
    raid10 - md "near 2": chunk c's copies are slots 2c and 2c+1; slot s is on
             member (s + fid) % n at row s // n
    raid5/6 - np = 1 / 2 parity chunks and nd = n - np data chunks per row;
             chunk c is data index c % nd of row c // nd; md left-symmetric:
             pd = n-1 - row % n holds P, raid6 has Q on pd+1, data i follows
             (pd+1+i, raid6 pd+2+i); every member number then + fid, mod n.
             A row's chunks all sit at member offset row * chunk.
    """

    def __init__(self, level, n, chunk):
        self.level, self.n, self.chunk = level, n, chunk
        self.copies = {"jbod": 1, "raid0": 1, "raid1": n, "raid10": 2,
                       "raid5": 1, "raid6": 1}[level]
        self.np = {"raid5": 1, "raid6": 2}.get(level, 0)
        self.nd = n - self.np
        self.rowbytes = self.nd * chunk

    # ---- parity levels ----

    def row_members(self, r, fid):
        """(data members by data index, parity members [P] or [P, Q]) of row r."""
        n, rot = self.n, fid % self.n
        pd = n - 1 - r % n
        par = [pd] if self.np == 1 else [pd, (pd + 1) % n]
        data = [(pd + self.np + i) % n for i in range(self.nd)]
        return [(x + rot) % n for x in data], [(x + rot) % n for x in par]

    def role(self, k, moff, fid):
        """What member k holds at moff, for messages."""
        if not self.np:
            return ""
        r = moff // self.chunk
        data, par = self.row_members(r, fid)
        what = f"data {data.index(k)}" if k in data else "PQ"[par.index(k)]
        return f"row {r} {what}, logical row at {r * self.rowbytes}"

    def parity_images(self, data, fid):
        n, ch, nd = self.n, self.chunk, self.nd
        size = len(data)
        pieces = [[] for _ in range(n)]
        nrows = (size + self.rowbytes - 1) // self.rowbytes
        for r in range(nrows):
            row = bytes(data[r * self.rowbytes:(r + 1) * self.rowbytes])
            used = len(row)                     # < rowbytes only in the last row
            row += bytes(self.rowbytes - used)  # bytes past EOF count as zeros
            datas = [row[i * ch:(i + 1) * ch] for i in range(nd)]
            dm, pm = self.row_members(r, fid)
            for i, k in enumerate(dm):
                pieces[k].append(datas[i][:max(0, min(ch, used - i * ch))])
            plen = min(ch, used)                # as long as the longest data chunk
            for k, s in zip(pm, syndromes(datas, self.np)):
                pieces[k].append(s[:plen])
        return [b"".join(p) for p in pieces]

    # ---- all levels ----

    def images(self, data, fid):
        """The exact contents each member file should have if every byte of
        the file had been written (len == the member's share)."""
        n, rot = self.n, fid % self.n
        if self.np:
            return self.parity_images(data, fid)
        if self.level == "raid1":
            return [bytes(data)] * n
        if self.level == "jbod":
            return [bytes(data) if k == rot else b"" for k in range(n)]
        ch, cp = self.chunk, self.copies
        imgs = [bytearray() for _ in range(n)]
        nchunks = (len(data) + ch - 1) // ch
        for c in range(nchunks):
            piece = data[c * ch:(c + 1) * ch]
            for k in range(cp):
                s = c * cp + k
                m, row = (s + rot) % n, s // n
                img = imgs[m]
                # slots of one member come in row order, each full but the last
                assert len(img) == row * ch, "python layout model broken"
                img += piece
        return [bytes(i) for i in imgs]

    def place(self, off, copy, fid):
        """(member, member offset) of copy `copy` of logical byte off."""
        n, rot, ch = self.n, fid % self.n, self.chunk
        if self.level == "raid1":
            return copy, off
        if self.level == "jbod":
            return rot, off
        if self.np:
            assert copy == 0
            c = off // ch
            r, i = c // self.nd, c % self.nd
            return self.row_members(r, fid)[0][i], r * ch + off % ch
        s = (off // ch) * self.copies + copy
        return (s + rot) % n, (s // n) * ch + off % ch

    def share(self, size, fid, k):
        """Length of member k's file when logical [0, size) is all written."""
        n, rot, ch = self.n, fid % self.n, self.chunk
        if self.level == "raid1":
            return size
        if self.level == "jbod":
            return size if k == rot else 0
        if self.np:
            full, rem = divmod(size, self.rowbytes)
            out = full * ch
            if rem:
                dm, pm = self.row_members(full, fid)
                if k in pm:
                    out += min(rem, ch)
                else:
                    i = dm.index(k)
                    out += max(0, min(ch, rem - i * ch))
            return out
        nchunks = (size + ch - 1) // ch
        slots = nchunks * self.copies
        j = (k - rot) % n
        if slots <= j:
            return 0
        count = (slots - j + n - 1) // n
        last_chunk = (j + n * (count - 1)) // self.copies
        tail = size - last_chunk * ch
        return (count - 1) * ch + min(ch, tail)

    def last_byte_members(self, size, fid):
        """Members holding logical byte size-1: each has exactly its share."""
        if size == 0:
            return set()
        n, rot = self.n, fid % self.n
        if self.level == "raid1":
            return set(range(n))
        if self.level == "jbod":
            return {rot}
        c = (size - 1) // self.chunk
        if self.np:
            return {self.place(size - 1, 0, fid)[0]}
        return {(c * self.copies + k + rot) % n for k in range(self.copies)}

    def usable_factor(self):
        if self.np:
            return self.nd
        return {"jbod": self.n, "raid0": self.n, "raid1": 1, "raid10": self.n / 2}[self.level]


def first_diff(a, b):
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    step = 4096
    for i in range(0, n, step):
        if a[i:i + step] != b[i:i + step]:
            for j in range(i, min(i + step, n)):
                if a[j] != b[j]:
                    return j
    return n


def describe_diff(what, got, want):
    d = first_diff(got, want)
    return (f"{what}: got {len(got)} bytes, want {len(want)}; first difference at "
            f"byte {d} (got {got[d:d + 8].hex() or '<eof>'}, want {want[d:d + 8].hex() or '<eof>'})")


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------

class MFile:
    def __init__(self, ident):
        self.ident = ident
        self.data = bytearray()
        self.nlink = 1

    def write(self, off, buf):
        if off > len(self.data):
            self.data.extend(bytes(off - len(self.data)))
        self.data[off:off + len(buf)] = buf

    def resize(self, size):
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data.extend(bytes(size - len(self.data)))


class MDir:
    def __init__(self):
        self.children = {}


class OFd:
    def __init__(self, fd, f, readable, writable, append, path):
        self.fd, self.file = fd, f
        self.readable, self.writable, self.append = readable, writable, append
        self.path = path    # at open time, for messages only


def join(d, name):
    return f"{d}/{name}" if d else name


class Workload:
    MAX_FILES = 24
    MAX_FDS = 12

    def __init__(self, mnt, layout, seed):
        self.mnt = str(mnt)
        self.lay = layout
        self.rng = random.Random(seed)
        self.root = MDir()
        self.fds = []
        self.hist = collections.deque(maxlen=40)
        self.idents = 0
        self.names = 0
        self.freed = []
        self.ino_of = {}    # id(model node) -> (node, st_ino seen through the mount)
        ch, n = layout.chunk, layout.n
        if layout.level == "raid0":
            self.stripe = ch * n
        elif layout.level == "raid10":
            self.stripe = ch * n // 2
        elif layout.np:
            self.stripe = layout.rowbytes
        else:
            self.stripe = ch * 2
        self.max_size = max(512 * K, min(12 * M, 24 * self.stripe))
        self.max_io = min(3 * M, max(4 * self.stripe, 64 * K))

    # ---- helpers ----

    def m(self, p):
        return os.path.join(self.mnt, p) if p else self.mnt

    def note(self, s):
        self.hist.append(s)

    def newname(self, prefix):
        self.names += 1
        return f"{prefix}{self.names}"

    def freed_path(self, p):
        """p no longer exists: a candidate name for a new object."""
        self.freed.append(p)
        del self.freed[:-64]

    def is_dir(self, p):
        try:
            return isinstance(self.node(p), MDir)
        except KeyError:
            return False

    def new_path(self, prefix, ok_parent=lambda d: True, d=None):
        """A path for a new object: often a name that existed before (maybe
        as another type, maybe still open), else a new name in d or in a
        random directory that ok_parent accepts."""
        if self.rng.random() < 0.35:
            c = sorted({p for p in self.freed if not self.exists(p)
                        and self.is_dir(p.rpartition("/")[0])
                        and ok_parent(p.rpartition("/")[0])
                        and (d is None or p.rpartition("/")[0] == d)})
            if c:
                return self.rng.choice(c)
        if d is None:
            d = self.rng.choice([p for p, _ in self.dirs() if ok_parent(p)])
        return join(d, self.newname(prefix))

    def node(self, path):
        n = self.root
        for c in path.split("/") if path else []:
            if not isinstance(n, MDir):
                raise KeyError(path)
            n = n.children[c]
        return n

    def parent_of(self, path):
        d, _, name = path.rpartition("/")
        return self.node(d), name

    def walk(self):
        """Sorted [(path, node)] of everything under the root (not the root)."""
        out = []

        def rec(d, prefix):
            for name in sorted(d.children):
                c = d.children[name]
                p = join(prefix, name)
                out.append((p, c))
                if isinstance(c, MDir):
                    rec(c, p)
        rec(self.root, "")
        return out

    def files(self):
        return [(p, n) for p, n in self.walk() if isinstance(n, MFile)]

    def dirs(self):
        return [("", self.root)] + [(p, n) for p, n in self.walk() if isinstance(n, MDir)]

    def depth(self, path):
        return len(path.split("/")) if path else 0

    def pick_dir(self, maxdepth=4):
        ds = [p for p, _ in self.dirs() if self.depth(p) < maxdepth]
        return self.rng.choice(ds)

    def pick_len(self):
        r, ch = self.rng.random(), self.lay.chunk
        if r < 0.3:
            ln = self.rng.randint(1, 600)
        elif r < 0.5:
            ln = ch + self.rng.randint(-100, 100)
        elif r < 0.6:
            ln = ch * self.rng.randint(1, 2 * self.lay.n)
        elif r < 0.8:
            ln = self.rng.randint(1, 2 * self.stripe)
        else:
            ln = self.rng.randint(1, 4 * ch)
        return max(1, min(ln, self.max_io))

    def pick_off(self, size):
        r, ch = self.rng.random(), self.lay.chunk
        if r < 0.25:
            off = self.rng.randint(0, size)
        elif r < 0.45:      # near a chunk boundary
            off = self.rng.randint(0, size // ch + 2) * ch + self.rng.randint(-70, 70)
        elif r < 0.55:      # on a chunk boundary
            off = self.rng.randint(0, size // ch + 2) * ch
        elif r < 0.7:       # at EOF
            off = size
        elif r < 0.85:      # far past EOF: leaves a hole
            off = size + self.rng.randint(ch, 3 * self.stripe)
        else:
            off = self.rng.randint(0, 2 * size + ch)
        return max(0, off)

    def pick_size(self, size):
        """A new size for truncate: shrink or grow, often at a boundary."""
        r, ch = self.rng.random(), self.lay.chunk
        if r < 0.35:
            new = self.rng.randint(0, size)
        elif r < 0.55:
            new = self.rng.randint(0, size // ch + 3) * ch + self.rng.choice([0, 0, -1, 1])
        elif r < 0.65:
            new = 0
        else:
            new = size + self.rng.randint(1, 3 * self.stripe)
        return max(0, min(new, self.max_size))

    def read_full(self, fd, length, off):
        out = bytearray()
        while len(out) < length:
            b = os.pread(fd, length - len(out), off + len(out))
            if not b:
                break
            out += b
        return bytes(out)

    def check_read(self, fd, f, off, length, what):
        got = self.read_full(fd, length, off)
        want = bytes(f.data[off:off + length])
        assert got == want, describe_diff(f"{what} pread({off}, {length})", got, want)

    def check_fstat(self, o):
        st = os.fstat(o.fd)
        assert st.st_size == len(o.file.data), \
            f"fstat({o.path}) size {st.st_size}, model {len(o.file.data)}"
        assert st.st_nlink == o.file.nlink, \
            f"fstat({o.path}) nlink {st.st_nlink}, model {o.file.nlink}"

    def open_path(self, path, flags, readable, writable, append, keep):
        f = self.node(path)
        fd = os.open(self.m(path), flags)
        o = OFd(fd, f, readable, writable, append, path)
        if keep:
            self.fds.append(o)
        return o

    def done(self, o, keep):
        if not keep:
            os.close(o.fd)

    def random_path(self):
        """Path of a random existing file, or None when there is none."""
        fs = self.files()
        if not fs:
            return None
        p, _ = self.rng.choice(fs)
        return p

    def pick_fd(self, pred):
        c = [o for o in self.fds if pred(o)]
        return self.rng.choice(c) if c else None

    def close_all(self):
        for o in self.fds:
            os.close(o.fd)
        self.fds = []

    # ---- operations ----

    def op_create(self):
        if len(self.files()) >= self.MAX_FILES:
            return self.op_unlink()
        d = self.pick_dir()
        dn = self.node(d)
        if dn.children and self.rng.random() < 0.1:
            name = self.rng.choice(sorted(dn.children))
            self.note(f"create-excl existing {join(d, name)} (expect EEXIST)")
            with pytest.raises(OSError) as ei:
                os.open(self.m(join(d, name)), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            assert ei.value.errno == errno.EEXIST
            return
        p = self.new_path("f", lambda d: self.depth(d) < 4)
        dn = self.node(p.rpartition("/")[0])
        self.note(f"create {p}")
        fd = os.open(self.m(p), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self.idents += 1
        f = MFile(self.idents)
        dn.children[p.rpartition("/")[2]] = f
        o = OFd(fd, f, True, True, False, p)
        if len(self.fds) < self.MAX_FDS and self.rng.random() < 0.6:
            self.fds.append(o)
        else:
            os.close(fd)

    def op_open(self):
        fs = self.files()
        if not fs:
            return self.op_create()
        if len(self.fds) >= self.MAX_FDS:
            return self.op_close()
        p, f = self.rng.choice(fs)
        r = self.rng.random()
        if r < 0.15:
            self.note(f"open O_TRUNC {p}")
            self.open_path(p, os.O_RDWR | os.O_TRUNC, True, True, False, True)
            f.resize(0)
        elif r < 0.35:
            self.note(f"open O_RDONLY {p}")
            self.open_path(p, os.O_RDONLY, True, False, False, True)
        else:
            self.note(f"open O_RDWR {p}")
            self.open_path(p, os.O_RDWR, True, True, False, True)

    def writable_target(self):
        """(OFd, keep): an open non-append fd (maybe of an unlinked file) or a
        path opened for this one operation."""
        o = self.pick_fd(lambda o: o.writable and not o.append)
        if o and self.rng.random() < 0.6:
            return o, True
        fs = self.files()
        if not fs:
            return None, False
        p, _ = self.rng.choice(fs)
        return self.open_path(p, os.O_RDWR, True, True, False, False), False

    def op_write(self):
        o, keep = self.writable_target()
        if not o:
            return self.op_create()
        f = o.file
        off = self.pick_off(len(f.data))
        ln = self.pick_len()
        if off >= self.max_size:
            off = self.rng.randint(0, self.max_size - 1)
        ln = max(1, min(ln, self.max_size - off))
        buf = self.rng.randbytes(ln)
        self.note(f"pwrite {o.path}#{f.ident} off={off} len={ln} (size {len(f.data)}, "
                  f"nlink {f.nlink})")
        n = os.pwrite(o.fd, buf, off)
        assert n == ln, f"pwrite returned {n}, wanted {ln}"
        f.write(off, buf)
        if self.rng.random() < 0.3:
            self.check_fstat(o)
        if self.rng.random() < 0.3:     # read the write back, with some context
            a = max(0, off - self.rng.randint(0, self.lay.chunk))
            self.check_read(o.fd, f, a, ln + (off - a) + self.rng.randint(0, 200),
                            f"{o.path}#{f.ident} after write")
        self.done(o, keep)

    def op_append(self):
        o = self.pick_fd(lambda o: o.append)
        keep = True
        if not o or self.rng.random() < 0.4:
            p = self.random_path()
            if p is None:
                return self.op_create()
            keep = len(self.fds) < self.MAX_FDS and self.rng.random() < 0.5
            flags = os.O_APPEND | (os.O_RDWR if self.rng.random() < 0.5 else os.O_WRONLY)
            o = self.open_path(p, flags, flags & os.O_RDWR != 0, True, True, keep)
        f = o.file
        ln = max(1, min(self.pick_len(), self.max_size - len(f.data)))
        if len(f.data) + ln > self.max_size:
            self.done(o, keep)
            return
        buf = self.rng.randbytes(ln)
        self.note(f"append {o.path}#{f.ident} len={ln} (size {len(f.data)})")
        n = os.write(o.fd, buf)
        assert n == ln, f"append write returned {n}, wanted {ln}"
        f.write(len(f.data), buf)
        self.check_fstat(o)
        if o.readable:
            self.check_read(o.fd, f, max(0, len(f.data) - ln - 50), ln + 100,
                            f"{o.path}#{f.ident} after append")
        self.done(o, keep)

    def op_read(self):
        o = self.pick_fd(lambda o: o.readable)
        keep = True
        if not o or self.rng.random() < 0.4:
            p = self.random_path()
            if p is None:
                return self.op_create()
            o, keep = self.open_path(p, os.O_RDONLY, True, False, False, False), False
        f = o.file
        size = len(f.data)
        r = self.rng.random()
        if r < 0.1:
            off, ln = 0, size + self.lay.chunk
        elif r < 0.2:
            off, ln = size + self.rng.randint(0, self.lay.chunk), self.rng.randint(1, 4096)
        else:
            off, ln = self.rng.randint(0, size + 10), self.pick_len()
            if self.rng.random() < 0.4:
                ch = self.lay.chunk
                off = max(0, self.rng.randint(0, size // ch + 1) * ch + self.rng.randint(-70, 70))
        self.note(f"pread {o.path}#{f.ident} off={off} len={ln} (size {size})")
        self.check_read(o.fd, f, off, ln, f"{o.path}#{f.ident}")
        self.done(o, keep)

    def op_ftruncate(self):
        o = self.pick_fd(lambda o: o.writable)
        if not o:
            return self.op_truncate()
        f = o.file
        new = self.pick_size(len(f.data))
        self.note(f"ftruncate {o.path}#{f.ident} {len(f.data)} -> {new} (nlink {f.nlink})")
        os.ftruncate(o.fd, new)
        f.resize(new)
        self.check_fstat(o)
        if o.readable and self.rng.random() < 0.5:
            a = max(0, min(new, len(f.data)) - self.rng.randint(0, 2 * self.lay.chunk))
            self.check_read(o.fd, f, a, 3 * self.lay.chunk, f"{o.path}#{f.ident} after ftruncate")

    def op_truncate(self):
        fs = self.files()
        if not fs:
            return self.op_create()
        p, f = self.rng.choice(fs)
        new = self.pick_size(len(f.data))
        self.note(f"truncate {p}#{f.ident} {len(f.data)} -> {new}")
        os.truncate(self.m(p), new)
        f.resize(new)
        st = os.stat(self.m(p))
        assert st.st_size == new, f"stat({p}) size {st.st_size} after truncate to {new}"

    def op_rename_file(self):
        fs = self.files()
        if not fs:
            return self.op_create()
        src, f = self.rng.choice(fs)
        r = self.rng.random()
        if r < 0.3:
            dst = self.new_path("r", d=src.rpartition("/")[0])
        elif r < 0.6:
            dst = self.new_path("r", lambda d: self.depth(d) < 4)
        else:
            others = [p for p, _ in fs if p != src]
            if not others:
                return
            dst = self.rng.choice(others)
        g = self.node(dst) if self.exists(dst) else None
        self.note(f"rename {src}#{f.ident} -> {dst}" + (f" (over #{g.ident})" if g else ""))
        os.rename(self.m(src), self.m(dst))
        if g is f:      # two links of one file: rename does nothing
            assert os.path.lexists(self.m(src)) and os.path.lexists(self.m(dst))
            return
        if g is not None:
            g.nlink -= 1
        sp, sn = self.parent_of(src)
        dp, dn = self.parent_of(dst)
        del sp.children[sn]
        dp.children[dn] = f
        self.freed_path(src)
        assert not os.path.lexists(self.m(src)), f"{src} still exists after rename"
        st = os.stat(self.m(dst))
        assert st.st_size == len(f.data) and st.st_nlink == f.nlink, \
            f"stat({dst}) after rename: size {st.st_size} nlink {st.st_nlink}, " \
            f"model {len(f.data)} {f.nlink}"

    def exists(self, path):
        try:
            self.node(path)
            return True
        except KeyError:
            return False

    def op_rename_dir(self):
        ds = [p for p, _ in self.dirs() if p]
        if not ds:
            return self.op_mkdir()
        src = self.rng.choice(ds)
        targets = [p for p, _ in self.dirs() if p != src and not p.startswith(src + "/")
                   and self.depth(p) < 4]
        dparent = self.rng.choice(targets)
        r = self.rng.random()
        if r < 0.75:
            dst = self.new_path("rd", lambda d: d != src and not d.startswith(src + "/")
                                and self.depth(d) < 4)
        else:
            cand = [join(dparent, n) for n, c in sorted(self.node(dparent).children.items())
                    if isinstance(c, MDir) and join(dparent, n) != src]
            if not cand:
                return
            dst = self.rng.choice(cand)
        if self.exists(dst):
            if self.node(dst).children:
                self.note(f"rename dir {src} -> non-empty {dst} (expect ENOTEMPTY)")
                with pytest.raises(OSError) as ei:
                    os.rename(self.m(src), self.m(dst))
                assert ei.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
                return
            self.note(f"rename dir {src} -> over empty {dst}")
        else:
            self.note(f"rename dir {src} -> {dst}")
        os.rename(self.m(src), self.m(dst))
        for p, _ in self.walk():
            if p == src or p.startswith(src + "/"):
                self.freed_path(p)
        sp, sn = self.parent_of(src)
        d = sp.children.pop(sn)
        dp, dn = self.parent_of(dst)
        dp.children[dn] = d
        assert not os.path.lexists(self.m(src))
        assert sorted(os.listdir(self.m(dst))) == sorted(d.children), f"listdir({dst})"

    def op_link(self):
        fs = self.files()
        if not fs or len(fs) >= self.MAX_FILES + 8:
            return self.op_unlink()
        src, f = self.rng.choice(fs)
        d = self.pick_dir()
        dn = self.node(d)
        if dn.children and self.rng.random() < 0.1:
            dst = join(d, self.rng.choice(sorted(dn.children)))
            self.note(f"link {src} -> existing {dst} (expect EEXIST)")
            with pytest.raises(OSError) as ei:
                os.link(self.m(src), self.m(dst))
            assert ei.value.errno == errno.EEXIST
            return
        dst = self.new_path("l", lambda d: self.depth(d) < 4)
        dn = self.node(dst.rpartition("/")[0])
        self.note(f"link {src}#{f.ident} -> {dst} (nlink {f.nlink})")
        os.link(self.m(src), self.m(dst))
        f.nlink += 1
        dn.children[dst.rpartition("/")[2]] = f
        a, b = os.stat(self.m(src)), os.stat(self.m(dst))
        assert a.st_ino == b.st_ino, f"link {src} -> {dst}: st_ino {a.st_ino} != {b.st_ino}"
        assert a.st_nlink == f.nlink and b.st_nlink == f.nlink, \
            f"link {src} -> {dst}: st_nlink {a.st_nlink}/{b.st_nlink}, model {f.nlink}"
        assert b.st_size == len(f.data)

    def op_unlink(self):
        fs = self.files()
        if not fs:
            return self.op_create()
        opened = {id(o.file) for o in self.fds}
        pref = [(p, f) for p, f in fs if id(f) in opened]
        p, f = self.rng.choice(pref if pref and self.rng.random() < 0.5 else fs)
        self.note(f"unlink {p}#{f.ident} (nlink {f.nlink}, open {id(f) in opened})")
        os.unlink(self.m(p))
        f.nlink -= 1
        dp, dn = self.parent_of(p)
        del dp.children[dn]
        self.freed_path(p)
        assert not os.path.lexists(self.m(p))
        for o in self.fds:
            if o.file is f:     # still usable through the open fd
                self.check_fstat(o)
                if o.readable:
                    self.check_read(o.fd, f, 0, len(f.data) + 10, f"unlinked {p}#{f.ident}")
                break

    def op_mkdir(self):
        d = self.pick_dir(maxdepth=3)
        dn = self.node(d)
        if dn.children and self.rng.random() < 0.1:
            p = join(d, self.rng.choice(sorted(dn.children)))
            self.note(f"mkdir existing {p} (expect EEXIST)")
            with pytest.raises(OSError) as ei:
                os.mkdir(self.m(p))
            assert ei.value.errno == errno.EEXIST
            return
        p = self.new_path("d", lambda d: self.depth(d) < 3)
        dn = self.node(p.rpartition("/")[0])
        self.note(f"mkdir {p}")
        os.mkdir(self.m(p))
        dn.children[p.rpartition("/")[2]] = MDir()
        assert stat.S_ISDIR(os.stat(self.m(p)).st_mode)

    def op_rmdir(self):
        ds = [(p, d) for p, d in self.dirs() if p]
        empty = [p for p, d in ds if not d.children]
        full = [p for p, d in ds if d.children]
        if full and (not empty or self.rng.random() < 0.2):
            p = self.rng.choice(full)
            self.note(f"rmdir non-empty {p} (expect ENOTEMPTY)")
            with pytest.raises(OSError) as ei:
                os.rmdir(self.m(p))
            assert ei.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
            return
        if not empty:
            return self.op_mkdir()
        p = self.rng.choice(empty)
        self.note(f"rmdir {p}")
        os.rmdir(self.m(p))
        dp, dn = self.parent_of(p)
        del dp.children[dn]
        self.freed_path(p)
        assert not os.path.lexists(self.m(p))

    def op_close(self):
        if not self.fds:
            return self.op_open()
        o = self.fds.pop(self.rng.randrange(len(self.fds)))
        self.note(f"close {o.path}#{o.file.ident}")
        os.close(o.fd)

    def op_stat(self):
        fs = self.files()
        if fs and self.rng.random() < 0.6:
            p, f = self.rng.choice(fs)
            self.note(f"stat {p}#{f.ident}")
            st = os.stat(self.m(p))
            assert stat.S_ISREG(st.st_mode), f"{p} is not a regular file"
            assert st.st_size == len(f.data), f"stat({p}) size {st.st_size}, model {len(f.data)}"
            assert st.st_nlink == f.nlink, f"stat({p}) nlink {st.st_nlink}, model {f.nlink}"
        elif self.fds:
            o = self.rng.choice(self.fds)
            self.note(f"fstat {o.path}#{o.file.ident}")
            self.check_fstat(o)

    def op_listdir(self):
        p, d = self.rng.choice(self.dirs())
        self.note(f"listdir {p!r}")
        got = {e.name: e.is_dir(follow_symlinks=False) for e in os.scandir(self.m(p))}
        want = {n: isinstance(c, MDir) for n, c in d.children.items()}
        assert got == want, f"listdir({p!r}): got {sorted(got.items())}, want {sorted(want.items())}"

    def op_verify_file(self):
        fs = self.files()
        if not fs:
            return
        p, f = self.rng.choice(fs)
        self.note(f"verify {p}#{f.ident}")
        with open(self.m(p), "rb") as fh:
            got = fh.read()
        assert got == bytes(f.data), describe_diff(f"content of {p}", got, bytes(f.data))

    def op_fsync(self):
        o = self.pick_fd(lambda o: True)
        if o:
            self.note(f"fsync {o.path}#{o.file.ident}")
            (os.fdatasync if self.rng.random() < 0.5 else os.fsync)(o.fd)

    OPS = [
        ("op_create", 7), ("op_open", 4), ("op_write", 22), ("op_append", 5),
        ("op_read", 18), ("op_ftruncate", 5), ("op_truncate", 4),
        ("op_rename_file", 6), ("op_rename_dir", 2), ("op_link", 4), ("op_unlink", 5),
        ("op_mkdir", 3), ("op_rmdir", 2), ("op_close", 5), ("op_stat", 5),
        ("op_listdir", 2), ("op_verify_file", 2), ("op_fsync", 1),
    ]

    def run(self, nops, start=0):
        names, weights = zip(*self.OPS)
        for i in range(start, start + nops):
            self.opno = i
            getattr(self, self.rng.choices(names, weights)[0])()

    # ---- full verification ----

    def verify_mount(self, when):
        self.note(f"verify mount ({when})")
        want = {p: isinstance(n, MDir) for p, n in self.walk()}
        got = {}
        for dirpath, dnames, fnames in os.walk(self.mnt):
            rel = os.path.relpath(dirpath, self.mnt)
            rel = "" if rel == "." else rel
            for n in dnames:
                got[join(rel, n)] = True
            for n in fnames:
                got[join(rel, n)] = False
        assert got == want, (f"tree through the mount ({when}) differs from the model: "
                             f"extra {sorted(set(got.items()) - set(want.items()))}, "
                             f"missing {sorted(set(want.items()) - set(got.items()))}")
        inos, nodes = {}, {}
        for p, f in self.files():
            st = os.stat(self.m(p))
            assert stat.S_ISREG(st.st_mode)
            assert st.st_size == len(f.data), \
                f"stat({p}) size {st.st_size}, model {len(f.data)} ({when})"
            assert st.st_nlink == f.nlink, \
                f"stat({p}) nlink {st.st_nlink}, model {f.nlink} ({when})"
            inos.setdefault(id(f), set()).add(st.st_ino)
            nodes[id(f)] = f
            with open(self.m(p), "rb") as fh:
                got_data = fh.read()
            assert got_data == bytes(f.data), \
                describe_diff(f"content of {p}#{f.ident} ({when})", got_data, bytes(f.data))
        for s in inos.values():
            assert len(s) == 1, f"hard links of one file report different st_ino {s} ({when})"
        for p, d in self.dirs():
            st = os.stat(self.m(p))
            subdirs = sum(isinstance(c, MDir) for c in d.children.values())
            assert st.st_nlink == 2 + subdirs, \
                f"dir {p!r}: st_nlink {st.st_nlink}, has {subdirs} subdirectories ({when})"
            inos[id(d)] = {st.st_ino}
            nodes[id(d)] = d
        assert len({next(iter(s)) for s in inos.values()}) == len(inos), \
            f"distinct objects share an st_ino ({when})"
        for k, s in inos.items():
            ino = next(iter(s))
            old = self.ino_of.setdefault(k, (nodes[k], ino))[1]
            assert old == ino, f"st_ino changed from {old} to {ino} ({when})"
        for o in self.fds:
            self.check_fstat(o)
            if o.readable:
                self.check_read(o.fd, o.file, 0, len(o.file.data) + 1,
                                f"open {o.path}#{o.file.ident} ({when})")

    def verify_members(self, members, when):
        """Needs every fd closed (unlinked-open files would still be on the
        members' disks, though not in their trees)."""
        self.note(f"verify members ({when})")
        lay = self.lay
        want = {p: isinstance(n, MDir) for p, n in self.walk()}
        roots = [os.path.join(str(m), "root") for m in members]
        for k, r in enumerate(roots):
            got = {}
            for dirpath, dnames, fnames in os.walk(r):
                rel = os.path.relpath(dirpath, r)
                rel = "" if rel == "." else rel
                for n in dnames:
                    got[join(rel, n)] = True
                for n in fnames:
                    got[join(rel, n)] = False
            assert got == want, (f"member {k} tree ({when}) differs from the model: "
                                 f"extra {sorted(set(got.items()) - set(want.items()))}, "
                                 f"missing {sorted(set(want.items()) - set(got.items()))}")
        seen_fids = {}
        for p, d in self.dirs():
            if not p:
                continue
            fids = [os.getxattr(os.path.join(r, p), FID_XATTR, follow_symlinks=False)
                    for r in roots]
            assert len(set(fids)) == 1, f"dir {p}: identities differ across members: {fids}"
        groups = {}
        for p, f in self.files():
            groups.setdefault(id(f), (f, []))[1].append(p)
        for f, paths in groups.values():
            fids = set()
            for k, r in enumerate(roots):
                sts = [os.stat(os.path.join(r, p), follow_symlinks=False) for p in paths]
                assert len({s.st_ino for s in sts}) == 1, \
                    f"member {k}: names {paths} of one file are not hard links"
                assert all(s.st_nlink == f.nlink for s in sts), \
                    f"member {k}: {paths} st_nlink {[s.st_nlink for s in sts]}, model {f.nlink}"
                for p in paths:
                    fids.add(os.getxattr(os.path.join(r, p), FID_XATTR, follow_symlinks=False))
            assert len(fids) == 1, f"{paths}: identities differ across members/names: {fids}"
            fid = int(fids.pop().decode())
            assert fid not in seen_fids, \
                f"{paths} and {seen_fids[fid]} share identity {fid}"
            seen_fids[fid] = paths
            imgs = lay.images(bytes(f.data), fid)
            p = paths[0]
            for k, r in enumerate(roots):
                with open(os.path.join(r, p), "rb") as fh:
                    mb = fh.read()
                img = imgs[k]
                assert len(img) == lay.share(len(f.data), fid, k), "python layout model broken"
                where = (f"member {k} file {p}#{f.ident} (fid {fid}, rot {fid % lay.n}, "
                         f"logical size {len(f.data)}) ({when})")
                if lay.level == "raid1":
                    assert mb == img, describe_diff(where + ": not the whole file", mb, img)
                    continue
                if k in lay.last_byte_members(len(f.data), fid):
                    assert len(mb) == len(img), \
                        (f"{where}: holds the last logical byte but is {len(mb)} bytes, "
                         f"not its share {len(img)} (size would not survive a remount)")
                assert len(mb) <= len(img), \
                    f"{where}: {len(mb)} bytes, larger than its share {len(img)}"
                if mb != img[:len(mb)] and lay.np:
                    d = first_diff(mb, img)
                    where += f" [member offset {d}: {lay.role(k, d, fid)}]"
                assert mb == img[:len(mb)], describe_diff(where, mb, img[:len(mb)])
                tail = img[len(mb):]
                if tail.count(0) != len(tail) and lay.np:
                    d = len(mb) + len(tail) - len(tail.lstrip(b"\0"))
                    where += f" [first nonzero expected at {d}: {lay.role(k, d, fid)}]"
                assert tail.count(0) == len(tail), \
                    (f"{where}: member file ends at {len(mb)} but its share is {len(img)} "
                     f"and logical data (or parity) past that is not zero")


def far_writes(lay, seed, huge_limit):
    """Sparse writes at huge offsets: across 4 GiB, across a chunk boundary
    past 5 GiB, and past 1 TiB (64-bit member offsets, huge holes)."""
    rng = random.Random(seed ^ 0xFA2)
    ch = lay.chunk
    offs = [(1 << 32) - 100, 5 * (1 << 30) + 3 * ch - 50, (1 << 40) + 7 * ch + 1]
    if huge_limit < (1 << 41):
        offs[2] = (1 << 33) + 7 * ch + 1
    return [(o, rng.randbytes(rng.randint(200, min(2 * ch, 1 << 20)))) for o in offs]


def sparse_expect(writes, off, ln, size):
    ln = max(0, min(ln, size - off))
    out = bytearray(ln)
    for o, b in writes:
        a, e = max(o, off), min(o + len(b), off + ln)
        if a < e:
            out[a - off:e - off] = b[a - o:e - o]
    return bytes(out)


def check_far(members, mnt, lay, seed, when, create):
    """A sparse file far past any EOF the workload makes, checked through the
    mount and on the members."""
    p = os.path.join(str(mnt), "far")
    # ext4 with 4K blocks takes files up to 16 TiB; stay lower elsewhere
    bs = os.statvfs(str(members[0])).f_bsize
    writes = far_writes(lay, seed, (1 << 44) if bs >= 4096 else (1 << 34))
    size = max(o + len(b) for o, b in writes)
    if create:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for o, b in writes:
                assert os.pwrite(fd, b, o) == len(b)
        finally:
            os.close(fd)
    st = os.stat(p)
    assert st.st_size == size, f"far file ({when}): size {st.st_size}, want {size}"
    fd = os.open(p, os.O_RDONLY)
    try:
        probes = [(o - 300, len(b) + 600) for o, b in writes]
        probes += [(0, 8192), ((1 << 31) - 4000, 8192), ((1 << 33) + 5, 3 * lay.chunk),
                   (size - 10, 100)]
        for off, ln in probes:
            got = os.pread(fd, ln, off)
            want = sparse_expect(writes, off, ln, size)
            assert got == want, describe_diff(f"far file ({when}) pread({off}, {ln})", got, want)
    finally:
        os.close(fd)
    roots = [os.path.join(str(m), "root") for m in members]
    fid = int(os.getxattr(os.path.join(roots[0], "far"), FID_XATTR).decode())
    msizes = [os.stat(os.path.join(r, "far")).st_size for r in roots]
    last = lay.last_byte_members(size, fid)
    for k in range(lay.n):
        sh = lay.share(size, fid, k)
        assert msizes[k] <= sh, \
            f"far file ({when}): member {k} is {msizes[k]} bytes, larger than its share {sh}"
        if k in last:
            assert msizes[k] == sh, \
                f"far file ({when}): member {k} holds the last byte but is {msizes[k]}, not {sh}"
    fds = [os.open(os.path.join(r, "far"), os.O_RDONLY) for r in roots]
    try:
        for o, b in writes:
            pos = o
            while pos < o + len(b):
                ln = min(o + len(b) - pos, lay.chunk - pos % lay.chunk)
                for c in range(lay.copies):
                    k, moff = lay.place(pos, c, fid)
                    got = os.pread(fds[k], ln, moff)
                    want = b[pos - o:pos - o + ln]
                    assert got == want, describe_diff(
                        f"far file ({when}): member {k} at {moff} (logical {pos}, copy {c})",
                        got, want)
                pos += ln
        if lay.np:  # parity of every row a write touched (a missing tail reads as zeros)
            rb, ch = lay.rowbytes, lay.chunk
            rows = sorted({r for o, b in writes for r in range(o // rb, (o + len(b) - 1) // rb + 1)})
            for r in rows:
                row = sparse_expect(writes, r * rb, rb, size)
                plen = min(ch, len(row))
                row += bytes(rb - len(row))
                datas = [row[i * ch:(i + 1) * ch] for i in range(lay.nd)]
                _, pm = lay.row_members(r, fid)
                for j, (k, want) in enumerate(zip(pm, syndromes(datas, lay.np))):
                    want = want[:plen]
                    got = os.pread(fds[k], plen, r * ch)
                    got += bytes(plen - len(got))
                    assert got == want, describe_diff(
                        f"far file ({when}): member {k} at {r * ch}, {'PQ'[j]} of row {r} "
                        f"(logical {r * rb})", got, want)
    finally:
        for fd in fds:
            os.close(fd)


def open_member_files(pid, members):
    """Regular files under the members' root/ the daemon holds open."""
    roots = [os.path.join(os.path.realpath(str(m)), "root") + "/" for m in members]
    out = []
    fddir = f"/proc/{pid}/fd"
    for fd in os.listdir(fddir):
        try:
            target = os.readlink(os.path.join(fddir, fd))
            st = os.stat(os.path.join(fddir, fd))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and any(target.startswith(r) for r in roots):
            out.append(target)
    return sorted(out)


def check_no_open_member_files(mnt, members, when):
    """With no file open through the mount, the daemon holds no member file
    (release is asynchronous: give it a moment)."""
    deadline = time.time() + 5
    while True:
        held = open_member_files(mnt.proc.pid, members)
        if not held or time.time() > deadline:
            break
        time.sleep(0.05)
    assert not held, f"daemon still holds member files with nothing open ({when}): {held}"


def check_statfs(a, lay):
    sv = os.statvfs(a.mnt)
    ms = [os.statvfs(m) for m in a.members]
    unit = sv.f_frsize or sv.f_bsize
    factor = lay.usable_factor()
    if lay.level == "jbod":
        cap = sum(s.f_blocks * (s.f_frsize or s.f_bsize) for s in ms)
        avail = sum(s.f_bavail * (s.f_frsize or s.f_bsize) for s in ms)
    else:
        cap = factor * min(s.f_blocks * (s.f_frsize or s.f_bsize) for s in ms)
        avail = factor * min(s.f_bavail * (s.f_frsize or s.f_bsize) for s in ms)
    got_cap, got_avail = sv.f_blocks * unit, sv.f_bavail * unit
    assert abs(got_cap - cap) <= max(lay.n * 4096, cap * 0.001), \
        f"statfs capacity {got_cap}, level {lay.level} x{lay.n} implies {cap}"
    assert abs(got_avail - avail) <= max(64 * M, avail * 0.02), \
        f"statfs available {got_avail}, level {lay.level} x{lay.n} implies about {avail}"
    assert sv.f_bavail <= sv.f_bfree <= sv.f_blocks
    # and the capacity relative to one member, as a user would reason
    one = ms[0].f_blocks * (ms[0].f_frsize or ms[0].f_bsize)
    assert abs(got_cap / one - factor) < 0.01, \
        f"statfs capacity is {got_cap / one:.3f} x one member, level implies {factor}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_model(make_array, case):
    level, n, chunk, timeout = case
    seed = case_seed(case)
    lay = PyLayout(level, n, chunk)
    a = make_array(level, n, chunk_name(chunk))
    mnt = a.mount(opts=[] if timeout is None else [f"attr_timeout={timeout}"])
    w = Workload(a.mnt, lay, seed)
    w.opno = -1
    stage = "statfs"
    try:
        check_statfs(a, lay)
        stage = "workload, first half"
        w.run(NOPS // 2)
        stage = "remount halfway"
        w.close_all()
        mnt.remount()
        w.verify_mount("after remount halfway")
        stage = "workload, second half"
        w.run(NOPS - NOPS // 2, NOPS // 2)
        stage = "final checks"
        w.verify_mount("end, fds open")
        w.close_all()
        check_no_open_member_files(mnt, a.members, "end")
        w.verify_mount("end, fds closed")
        w.verify_members(a.members, "end")
        stage = "final remount"
        mnt.remount()
        w.verify_mount("after final remount")
        w.verify_members(a.members, "after final remount")
        check_statfs(a, lay)
        stage = "far sparse file"
        check_far(a.members, a.mnt, lay, seed, "written", True)
        mnt.remount()
        check_far(a.members, a.mnt, lay, seed, "after remount", False)
        os.unlink(os.path.join(str(a.mnt), "far"))
        w.verify_members(a.members, "after removing the far file")
    except (Exception, pytest.fail.Exception) as e:
        for o in w.fds:     # open fds would keep the mount busy at teardown
            try:
                os.close(o.fd)
            except OSError:
                pass
        hist = "\n  ".join(w.hist)
        raise AssertionError(
            f"[{case_id(case)} seed={seed} ops={NOPS}] {stage}, op #{w.opno}: "
            f"{type(e).__name__}: {e}\nreproduce: TIERFS_MODEL_SEED={seed} "
            f"TIERFS_MODEL_OPS={NOPS} pytest tests/test_model.py -k {case_id(case)}\n"
            f"last operations:\n  {hist}") from e
