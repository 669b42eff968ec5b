"""POSIX semantics on a mounted array, compared where sensible with the same
operations on a plain directory of the host filesystem (ext4 under /tmp).

Most tests run over several levels (the `fs` fixture): raid0 with 4 members
and a 4K chunk (every request is split), raid1 with 2, raid10 with 4, and
jbod with 2."""
import ctypes
import errno
import json
import mmap
import os
import pathlib
import random
import shutil
import stat
import subprocess
import threading

import pytest

from conftest import FID_XATTR

LEVELS = [("raid0", 4, "4K"), ("raid1", 2, None), ("raid10", 4, "4K"), ("jbod", 2, None)]
LEVEL_IDS = [f"{l}-{n}" for l, n, _ in LEVELS]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
UID, GID = 1000, 1000

libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def renameat2(a, b, flags=0):
    if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(a))


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# ---------------------------------------------------------------- helpers

@pytest.fixture(params=LEVELS, ids=LEVEL_IDS)
def fs(request, make_array):
    a = make_array(*request.param)
    a.mount()
    return a


@pytest.fixture
def raid0(make_array):
    a = make_array("raid0", 4, "4K")
    a.mount()
    return a


@pytest.fixture
def ref(tmp_path):
    """A plain directory on the host filesystem to compare against."""
    d = tmp_path / "ref"
    d.mkdir()
    return d


def remount(a):
    a.mounts[-1].remount()


def opn(path, flags, mode=0o644):
    """open + close: whether it could be opened (no fd numbers in results)."""
    os.close(os.open(path, flags, mode))
    return "opened"


def outcome(fn, *args, **kw):
    try:
        r = fn(*args, **kw)
        return ("ok", r if isinstance(r, (int, str, bytes, bool, list, tuple, type(None)))
                else None)
    except OSError as e:
        return ("err", errno.errorcode.get(e.errno, e.errno))


def snapshot(root):
    """Names, types, sizes, contents and link targets below root."""
    out = {}
    for dirpath, dnames, fnames in os.walk(root):
        for n in dnames + fnames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d",)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", open(p, "rb").read())
            else:
                out[rel] = (stat.S_IFMT(st.st_mode),)
    return out


def both(fn, ref, mnt):
    """Run fn(dir) on the host directory and on the mount; results must agree."""
    r = fn(pathlib.Path(ref))
    m = fn(pathlib.Path(mnt))
    assert m == r, f"tierfs: {m}\n  host: {r}"
    return m


def member_paths(a, rel):
    return [m / "root" / rel for m in a.members]


def as_user(fn, cwd, uid=UID, gid=GID, groups=(), umask=0o022):
    """Run fn() in a child with the given credentials, its cwd set (as root)
    to cwd first so that the path to the mount need not be traversable.
    fn returns something JSON-able; OSErrors come back as ("err", name)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.chdir(cwd)
            os.umask(umask)
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            try:
                res = ["ok", fn()]
            except OSError as e:
                res = ["err", errno.errorcode.get(e.errno, e.errno)]
            data = json.dumps(res).encode()
        except BaseException as e:  # noqa: BLE001 - report anything to the parent
            data = json.dumps(["exc", repr(e)]).encode()
        os.write(w, data)
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    res = json.loads(b"".join(chunks))
    assert res[0] != "exc", res[1]
    return tuple(res) if res[0] == "err" else res[1]


def lx(p):
    """listxattr without tierfs's own user.tierfs.* names (fuse/attrs.c,
    tests/test_attrs.py), which a plain filesystem does not have."""
    return [n for n in os.listxattr(p) if not n.startswith("user.tierfs.")]


def jout(fn, *a, **kw):
    """outcome() in a JSON-able form for as_user children."""
    o = outcome(fn, *a, **kw)
    return [o[0], o[1] if not isinstance(o[1], bytes) else o[1].decode("latin1")]


def pattern(n, seed):
    return random.Random(seed).randbytes(n)


# ---------------------------------------------------------------- namespace errors

def test_create_excl_and_basic_errors(fs, ref):
    def ops(d):
        res = []
        fd = os.open(d / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, b"abc")
        os.close(fd)
        os.mkdir(d / "dir")
        (d / "dir" / "x").write_bytes(b"x")
        os.symlink("nowhere", d / "dangling")
        for name in ["f", "dir", "dangling"]:
            res.append(outcome(opn, d / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        res.append(outcome(os.mkdir, d / "f"))
        res.append(outcome(os.mkdir, d / "dir"))
        res.append(outcome(os.rmdir, d / "dir"))          # ENOTEMPTY
        res.append(outcome(os.rmdir, d / "f"))            # ENOTDIR
        res.append(outcome(os.unlink, d / "dir"))         # EISDIR
        res.append(outcome(os.unlink, d / "missing"))     # ENOENT
        res.append(outcome(opn, d / "missing", os.O_RDONLY))
        res.append(outcome(opn, d / "f" / "x", os.O_RDONLY))  # ENOTDIR
        res.append(outcome(os.mkdir, d / "missing" / "x"))
        res.append(outcome(os.symlink, "t", d / "f"))
        res.append(outcome(os.link, d / "f", d / "dangling"))
        res.append(outcome(os.link, d / "dir", d / "dirlink"))   # EPERM
        res.append(outcome(os.truncate, d / "dir", 0))           # EISDIR
        res.append(outcome(opn, d / "dir", os.O_WRONLY))     # EISDIR
        res.append(outcome(opn, d / "f", os.O_RDONLY | os.O_DIRECTORY))
        res.append(outcome(opn, d / "dangling", os.O_RDONLY | os.O_NOFOLLOW))  # ELOOP
        res.append(outcome(os.readlink, d / "f"))                # EINVAL
        res.append(outcome(os.mkdir, d / ("n" * 256)))           # ENAMETOOLONG
        res.append(outcome(os.rmdir, d / "dir" / "x" / ".."))
        os.unlink(d / "dir" / "x")
        res.append(outcome(os.rmdir, d / "dir"))
        res.append(outcome(opn, d / "dangling", os.O_CREAT | os.O_WRONLY, 0o600))
        res.append(outcome(os.readlink, d / "dangling"))
        res.append(snapshot(d))
        return res

    both(ops, ref, fs.mnt)


def test_rmdir_not_empty_variants(fs, ref):
    def ops(d):
        res = []
        for what in ["file", "dir", "link", "fifo", "hidden"]:
            p = d / what
            os.mkdir(p)
            if what == "file":
                (p / "a").write_bytes(b"")
            elif what == "dir":
                os.mkdir(p / "sub")
            elif what == "link":
                os.symlink("/", p / "l")
            elif what == "fifo":
                os.mkfifo(p / "q")
            else:
                (p / ".tierfs").write_bytes(b"")
            res.append((what, outcome(os.rmdir, p)))
        return res

    both(ops, ref, fs.mnt)


# ---------------------------------------------------------------- rename

def test_rename_matrix(fs, ref):
    def ops(d):
        res = []

        def setup():
            for n in os.listdir(d):
                if os.path.isdir(d / n) and not os.path.islink(d / n):
                    shutil.rmtree(d / n)
                else:
                    os.unlink(d / n)
            (d / "a").write_bytes(b"A" * 5000)
            (d / "b").write_bytes(b"B" * 9000)
            os.mkdir(d / "D")
            (d / "D" / "in").write_bytes(b"in")
            os.mkdir(d / "E")
            os.mkdir(d / "F")
            (d / "F" / "x").write_bytes(b"x")
            os.symlink("a", d / "L")

        cases = [
            ("a", "b", 0), ("a", "new", 0), ("a", "D/a2", 0), ("a", "a", 0),
            ("a", "b", RENAME_NOREPLACE), ("a", "new", RENAME_NOREPLACE),
            ("D", "E", RENAME_NOREPLACE), ("a", "L", RENAME_NOREPLACE),
            ("a", "b", RENAME_EXCHANGE), ("a", "D", RENAME_EXCHANGE),
            ("D", "F", RENAME_EXCHANGE), ("a", "new", RENAME_EXCHANGE),
            ("L", "b", RENAME_EXCHANGE), ("D/in", "F/x", RENAME_EXCHANGE),
            ("D", "E", 0), ("D", "F", 0), ("D", "a", 0), ("a", "E", 0),
            ("D", "D/sub", 0), ("D", "Dnew", 0), ("E", "D/Enew", 0), ("L", "b", 0),
            ("missing", "x", 0), ("a", "missing/x", 0), ("a", "b",
                                                         RENAME_EXCHANGE | RENAME_NOREPLACE),
        ]
        for src, dst, flags in cases:
            setup()
            o = outcome(renameat2, d / src, d / dst, flags)
            res.append((src, dst, flags, o, snapshot(d)))
        return res

    both(ops, ref, fs.mnt)


def test_rename_keeps_identity_and_open_files(fs):
    d = fs.mnt
    (d / "a").write_bytes(pattern(70000, 1))
    (d / "b").write_bytes(b"old b")
    os.mkdir(d / "dir")
    (d / "dir" / "c").write_bytes(pattern(12345, 2))
    ino_a = os.stat(d / "a").st_ino
    ino_dir = os.stat(d / "dir").st_ino
    fd_b = os.open(d / "b", os.O_RDONLY)
    fd_a = os.open(d / "a", os.O_RDWR)
    os.rename(d / "a", d / "b")                 # overwrite b, which is still open
    assert os.stat(d / "b").st_ino == ino_a
    assert not (d / "a").exists()
    assert os.pread(fd_b, 100, 0) == b"old b"   # the replaced file lives on
    assert os.fstat(fd_b).st_nlink == 0
    os.pwrite(fd_a, b"through old fd", 10)      # the moved file is the same file
    assert (d / "b").read_bytes()[10:24] == b"through old fd"
    os.close(fd_a)
    os.close(fd_b)
    os.rename(d / "dir", d / "dir2")
    assert os.stat(d / "dir2").st_ino == ino_dir
    assert (d / "dir2" / "c").read_bytes() == pattern(12345, 2)
    os.mkdir(d / "x")
    os.mkdir(d / "x" / "y")
    os.rename(d / "dir2", d / "x" / "y" / "dir3")
    assert (d / "x" / "y" / "dir3" / "c").read_bytes() == pattern(12345, 2)
    renameat2(d / "b", d / "x", RENAME_EXCHANGE)
    assert (d / "x").is_file() and (d / "b" / "y" / "dir3" / "c").is_file()
    assert os.stat(d / "x").st_ino == ino_a
    remount(fs)
    assert os.stat(d / "x").st_ino == ino_a
    assert (d / "x").read_bytes()[10:24] == b"through old fd"
    assert (d / "b" / "y" / "dir3" / "c").read_bytes() == pattern(12345, 2)
    assert sorted(os.listdir(d)) == ["b", "x"]


# ---------------------------------------------------------------- unlinked, links

def test_unlinked_open_file(fs, ref):
    def ops(d):
        data = pattern(50000, 3)
        (d / "f").write_bytes(data)
        fd = os.open(d / "f", os.O_RDWR)
        fd2 = os.open(d / "f", os.O_RDONLY)
        os.unlink(d / "f")
        res = [os.path.exists(d / "f"), os.listdir(d), os.fstat(fd).st_nlink,
               os.fstat(fd).st_size]
        os.pwrite(fd, b"more" * 3000, 48000)
        os.ftruncate(fd, 55000)
        os.fsync(fd)
        res += [os.fstat(fd).st_size, os.pread(fd2, 60000, 0) == data[:48000] +
                (b"more" * 3000)[:7000]]
        # attributes of the unlinked file, through its descriptor
        os.fchmod(fd, 0o604)
        os.fchown(fd, 1234, 5678)
        os.utime(fd, ns=(10**15, 2 * 10**15))
        os.setxattr(fd, "user.gone", b"still here")
        st = os.fstat(fd2)
        res += [oct(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns,
                os.getxattr(fd2, "user.gone"), lx(fd2)]
        os.removexattr(fd, "user.gone")
        res.append(lx(fd2))
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)
        res.append(os.pread(fd2, 8, 4090))
        os.close(fd)
        res.append(len(os.pread(fd2, 10, 54995)))
        os.close(fd2)
        (d / "f").write_bytes(b"new")           # the name is free again
        res.append((d / "f").read_bytes())
        return res

    both(ops, ref, fs.mnt)
    remount(fs)
    assert (fs.mnt / "f").read_bytes() == b"new"
    # nothing left behind on the members but the new file
    for m in fs.members:
        assert sorted(os.listdir(m / "root")) == ["f"]


def test_hard_links(fs, ref):
    def ops(d):
        res = []
        (d / "f").write_bytes(b"one")
        os.mkdir(d / "sub")
        os.link(d / "f", d / "g")
        os.link(d / "f", d / "sub" / "h")
        sf, sg, sh = (os.stat(d / n) for n in ["f", "g", "sub/h"])
        res.append(sf.st_ino == sg.st_ino == sh.st_ino)
        res.append([sf.st_nlink, sg.st_nlink, sh.st_nlink])
        with open(d / "g", "r+b") as f:
            f.write(b"TWO!")
        res.append((d / "sub" / "h").read_bytes())
        os.chmod(d / "sub" / "h", 0o600)
        res.append(oct(os.stat(d / "f").st_mode))
        os.unlink(d / "f")
        res.append(os.stat(d / "g").st_nlink)
        os.rename(d / "g", d / "sub" / "h")      # same inode: no-op
        res.append(sorted(os.listdir(d)) + sorted(os.listdir(d / "sub")))
        res.append(os.stat(d / "g").st_nlink)
        os.link(d / "g", d / "g2")
        os.symlink("g", d / "s")
        os.link(d / "s", d / "s2", follow_symlinks=False)   # link to the symlink itself
        res.append(os.readlink(d / "s2"))
        res.append(os.lstat(d / "s").st_nlink)
        os.mkdir(d / "sub" / "a")
        os.mkdir(d / "sub" / "b")
        res.append([os.stat(d / "sub").st_nlink, os.stat(d / "sub" / "a").st_nlink])
        os.rmdir(d / "sub" / "b")
        res.append(os.stat(d / "sub").st_nlink)
        return res

    both(ops, ref, fs.mnt)
    inos = {n: os.stat(fs.mnt / n).st_ino for n in ["g", "g2", "sub/h"]}
    assert len(set(inos.values())) == 1
    remount(fs)
    assert {n: os.stat(fs.mnt / n).st_ino for n in inos} == inos
    assert os.stat(fs.mnt / "g").st_nlink == 3
    assert (fs.mnt / "g2").read_bytes() == b"TWO!"


def test_stable_inode_numbers_across_remount(fs):
    d = fs.mnt
    names = ["f", "dir", "dir/f2", "dir/sub", "link", "fifo", "empty"]
    (d / "f").write_bytes(b"x" * 10000)
    os.mkdir(d / "dir")
    (d / "dir" / "f2").write_bytes(b"y")
    os.mkdir(d / "dir" / "sub")
    os.symlink("f", d / "link")
    os.mkfifo(d / "fifo")
    (d / "empty").write_bytes(b"")
    before = {n: os.lstat(d / n).st_ino for n in names}
    before["."] = os.stat(d).st_ino
    assert len(set(before.values())) == len(before)
    readdir_ino = {e.name: e.inode() for e in os.scandir(d)}
    for n in ["f", "dir", "link", "fifo", "empty"]:
        assert readdir_ino[n] == before[n]
    remount(fs)
    after = {n: os.lstat(d / n).st_ino for n in names}
    after["."] = os.stat(d).st_ino
    assert after == before
    remount(fs)
    # looked up in another order, after the kernel forgot everything
    assert {n: os.lstat(d / n).st_ino for n in reversed(names)} == \
        {n: before[n] for n in names}


# ---------------------------------------------------------------- symlinks, special files

def test_symlink_readlink(fs, ref):
    def ops(d):
        targets = ["f", "../f", "/etc/passwd", "../../..", "dir/", "a b/ü€", "x" * 1000,
                   "nowhere", "y" * 4095]
        (d / "f").write_bytes(b"target data")
        os.mkdir(d / "dir")
        res = []
        for i, t in enumerate(targets):
            os.symlink(t, d / f"l{i}")
            st = os.lstat(d / f"l{i}")
            res.append((os.readlink(d / f"l{i}"), stat.S_ISLNK(st.st_mode), st.st_size))
        os.symlink("f", d / "dir" / "up")
        res.append((d / "l0").read_bytes())
        res.append(outcome(opn, d / "l7", os.O_RDONLY))
        os.symlink("loop", d / "loop")
        res.append(outcome(opn, d / "loop", os.O_RDONLY))   # ELOOP
        res.append(outcome(os.symlink, "z" * 4096, d / "toolong"))
        res.append(sorted(os.listdir(d)))
        return res

    both(ops, ref, fs.mnt)


def test_symlink_escape_resolves_in_mount_namespace(fs):
    """Links pointing out of the tree are followed by the kernel from the
    mount's point of view; the daemon never resolves them on a member."""
    d = fs.mnt
    os.makedirs(d / "a" / "b")
    os.symlink("/etc/passwd", d / "a" / "b" / "pw")
    os.symlink("../../..", d / "a" / "b" / "up")
    os.symlink("../../../..", d / "a" / "b" / "up2")
    assert os.readlink(d / "a" / "b" / "pw") == "/etc/passwd"
    assert os.readlink(d / "a" / "b" / "up") == "../../.."
    assert (d / "a" / "b" / "pw").read_bytes() == pathlib.Path("/etc/passwd").read_bytes()
    # a/b/up -> mnt/a/b/../../.. = the directory that holds the mountpoint
    outside = pathlib.Path(os.path.dirname(os.path.abspath(d)))
    assert sorted(os.listdir(d / "a" / "b" / "up")) == sorted(os.listdir(outside))
    assert os.stat(d / "a" / "b" / "up").st_ino == os.stat(outside).st_ino
    assert os.stat(d / "a" / "b" / "up2").st_ino == os.stat(outside.parent).st_ino
    for m in fs.members:   # what the link would mean inside a member tree
        assert os.stat(d / "a" / "b" / "up").st_ino != os.stat(m).st_ino
    # operations that target the link itself stay on the link
    os.chown(d / "a" / "b" / "pw", 1234, 1234, follow_symlinks=False)
    os.utime(d / "a" / "b" / "pw", ns=(10**9, 2 * 10**9), follow_symlinks=False)
    pw = os.stat("/etc/passwd")
    assert (pw.st_uid, pw.st_gid) == (0, 0)
    assert pw.st_mtime_ns != 2 * 10**9
    st = os.lstat(d / "a" / "b" / "pw")
    assert (st.st_uid, st.st_gid, st.st_mtime_ns) == (1234, 1234, 2 * 10**9)
    with pytest.raises(OSError):
        os.setxattr(d / "a" / "b" / "pw", "user.evil", b"1", follow_symlinks=False)
    assert "user.evil" not in os.listxattr("/etc/passwd")
    # writing through the link writes the link target, seen from the mount
    target = pathlib.Path(os.path.abspath(d)).parent / "outside-file"
    target.write_bytes(b"outside")
    os.symlink(str(target), d / "out")
    with open(d / "out", "ab") as f:
        f.write(b"+more")
    assert target.read_bytes() == b"outside+more"
    for m in fs.members:
        assert os.path.islink(m / "root" / "out")


def test_fifo_and_device_nodes(fs, ref):
    def ops(d):
        os.mkfifo(d / "q", 0o640)
        st = os.stat(d / "q")
        res = [stat.S_ISFIFO(st.st_mode), oct(stat.S_IMODE(st.st_mode))]
        got = []

        def reader():
            with open(d / "q", "rb") as f:
                got.append(f.read())

        t = threading.Thread(target=reader)
        t.start()
        with open(d / "q", "wb") as f:
            f.write(b"through the pipe" * 1000)
        t.join(10)
        res.append(got == [b"through the pipe" * 1000])
        os.mknod(d / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        st = os.stat(d / "null")
        res.append((stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)))
        os.mknod(d / "sock", 0o600 | stat.S_IFSOCK)
        res.append(stat.S_ISSOCK(os.stat(d / "sock").st_mode))
        return res

    both(ops, ref, fs.mnt)
    remount(fs)
    assert stat.S_ISFIFO(os.stat(fs.mnt / "q").st_mode)
    assert os.stat(fs.mnt / "null").st_rdev == os.makedev(1, 3)


# ---------------------------------------------------------------- attributes

def test_chmod_chown_utime(fs):
    d = fs.mnt
    (d / "f").write_bytes(pattern(30000, 4))
    os.mkdir(d / "dir")
    os.symlink("f", d / "l")
    os.chmod(d / "f", 0o4751)
    os.chmod(d / "dir", 0o1770)
    os.chown(d / "f", 4321, 8765)
    os.chown(d / "dir", 4322, 8766)
    os.chown(d / "l", 4323, 8767, follow_symlinks=False)
    t = {"f": (1_111_111_111_123_456_789, 1_222_222_222_987_654_321),
         "dir": (1_000_000_000_000_000_001, 1_500_000_000_999_999_999),
         "l": (1_600_000_000_000_000_002, 1_700_000_000_000_000_003)}
    os.utime(d / "f", ns=t["f"])
    os.utime(d / "dir", ns=t["dir"])
    os.utime(d / "l", ns=t["l"], follow_symlinks=False)

    def check():
        sf, sd, sl = os.stat(d / "f"), os.stat(d / "dir"), os.lstat(d / "l")
        # chown by root clears set-uid on a regular file (like every Linux fs)
        assert stat.S_IMODE(sf.st_mode) in (0o751, 0o4751)
        assert stat.S_IMODE(sd.st_mode) == 0o1770
        assert (sf.st_uid, sf.st_gid) == (4321, 8765)
        assert (sd.st_uid, sd.st_gid) == (4322, 8766)
        assert (sl.st_uid, sl.st_gid) == (4323, 8767)
        assert (sf.st_atime_ns, sf.st_mtime_ns) == t["f"]
        assert (sd.st_atime_ns, sd.st_mtime_ns) == t["dir"]
        assert (sl.st_atime_ns, sl.st_mtime_ns) == t["l"]
        assert sf.st_size == 30000
        return stat.S_IMODE(sf.st_mode)

    mode = check()
    # the host fs agrees on what chown does to set-uid
    r = pathlib.Path(d).parent / "reff"
    r.write_bytes(b"")
    os.chmod(r, 0o4751)
    os.chown(r, 4321, 8765)
    assert stat.S_IMODE(os.stat(r).st_mode) == mode
    os.chmod(d / "f", 0o640)
    assert stat.S_IMODE(os.stat(d / "f").st_mode) == 0o640
    os.chmod(d / "f", 0o4751)
    os.utime(d / "f", ns=t["f"])
    remount(fs)
    assert check() == 0o4751
    # every member agrees
    for p in member_paths(fs, "f"):
        st = os.stat(p)
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o4751, 4321, 8765)
    # utime(None) = now; ctime moves on chmod
    os.utime(d / "f")
    assert os.stat(d / "f").st_mtime_ns > t["f"][1]
    c0 = os.stat(d / "dir").st_ctime_ns
    os.chmod(d / "dir", 0o755)
    assert os.stat(d / "dir").st_ctime_ns >= c0


def test_mtime_moves_on_write(fs):
    p = fs.mnt / "f"
    p.write_bytes(b"x" * 100)
    os.utime(p, ns=(10**18, 10**18))
    with open(p, "r+b") as f:
        f.seek(5000)
        f.write(b"y")
    st = os.stat(p)
    assert st.st_mtime_ns > 10**18 and st.st_size == 5001
    os.mkdir(fs.mnt / "d")
    os.utime(fs.mnt / "d", ns=(10**18, 10**18))
    (fs.mnt / "d" / "new").write_bytes(b"")
    assert os.stat(fs.mnt / "d").st_mtime_ns > 10**18


# ---------------------------------------------------------------- xattrs

def test_xattrs(fs, ref):
    def ops(d):
        (d / "f").write_bytes(b"data")
        os.mkdir(d / "dir")
        res = []
        for n in ["f", "dir"]:
            p = d / n
            os.setxattr(p, "user.a", b"alpha")
            os.setxattr(p, "user.empty", b"")
            os.setxattr(p, "user.big", pattern(3000, 5))
            res.append(sorted(lx(p)))
            res.append(os.getxattr(p, "user.a"))
            res.append(os.getxattr(p, "user.empty"))
            res.append(os.getxattr(p, "user.big") == pattern(3000, 5))
            res.append(outcome(os.setxattr, p, "user.a", b"x", os.XATTR_CREATE))
            res.append(outcome(os.setxattr, p, "user.nope", b"x", os.XATTR_REPLACE))
            os.setxattr(p, "user.a", b"replaced", os.XATTR_REPLACE)
            res.append(os.getxattr(p, "user.a"))
            os.removexattr(p, "user.a")
            res.append(outcome(os.getxattr, p, "user.a"))
            res.append(outcome(os.removexattr, p, "user.a"))
            res.append(outcome(os.getxattr, p, "user.tierfs.fid"))
            res.append(outcome(os.getxattr, p, FID_XATTR))
            res.append(sorted(lx(p)))
        os.link(d / "f", d / "g")
        res.append(os.getxattr(d / "g", "user.empty"))
        os.rename(d / "f", d / "dir" / "moved")
        res.append(sorted(lx(d / "dir" / "moved")))
        return res

    both(ops, ref, fs.mnt)
    remount(fs)
    assert sorted(lx(fs.mnt / "dir")) == ["user.big", "user.empty"]
    assert os.getxattr(fs.mnt / "dir" / "moved", "user.big") == pattern(3000, 5)


def test_tierfs_xattrs_hidden_and_protected(fs):
    """tierfs's own names never pass through the mount: neither the records
    on the member files (trusted.tierfs.*) nor the user.tierfs.* names
    the daemon answers itself, even for root.  The daemon's names
    (fuse/attrs.c) are listed, but never a member record's."""
    d = fs.mnt
    (d / "f").write_bytes(b"data")
    os.mkdir(d / "dir")
    fids0 = {rel: [os.getxattr(p, FID_XATTR) for p in member_paths(fs, rel)]
             for rel in ["f", "dir"]}
    for rel, v in fids0.items():
        assert len(set(v)) == 1, (rel, v)
    fd = os.open(d / "f", os.O_RDONLY)    # an open file takes the pinned-fd path
    records = ("trusted.tierfs.", "user.tierfs.fid", "user.tierfs.size")
    for p in [d / "f", d / "dir", d]:
        assert not [n for n in os.listxattr(p) if n.startswith(records)]
        for name in ["user.tierfs.fid", FID_XATTR, "trusted.tierfs.size"]:
            with pytest.raises(OSError) as e:
                os.getxattr(p, name)
            assert e.value.errno == errno.ENODATA, name
            with pytest.raises(OSError):
                os.setxattr(p, name, b"999")
            with pytest.raises(OSError):
                os.removexattr(p, name)
        with pytest.raises(OSError):
            os.setxattr(p, "user.tierfs.other", b"1")
        with pytest.raises(OSError):
            os.setxattr(p, "trusted.tierfs.other", b"1")
    assert not [n for n in os.listxattr(fd) if n.startswith(records)]
    os.close(fd)
    # the identity on the members is untouched
    for rel in ["f", "dir"]:
        assert [os.getxattr(p, FID_XATTR) for p in member_paths(fs, rel)] == fids0[rel]
        assert not [n for n in os.listxattr(member_paths(fs, rel)[0])
                    if ".tierfs." in n and n not in (FID_XATTR, "trusted.tierfs.size")]
    assert (d / "f").read_bytes() == b"data"


def test_listxattr_size_probe(fs):
    """listxattr(size 0) must report the size of the filtered list."""
    p = fs.mnt / "f"
    p.write_bytes(b"")
    os.setxattr(p, "user.x", b"1")
    buf = ctypes.create_string_buffer(256)
    libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(4096)
    n0 = libc.listxattr(os.fsencode(p), None, 0)
    n1 = libc.listxattr(os.fsencode(p), buf, 4096)
    assert n1 == sum(len(os.fsencode(n)) + 1 for n in os.listxattr(p))
    assert b"user.x\0" in buf.raw[:n1]
    assert n0 == n1
    small = ctypes.create_string_buffer(3)
    assert libc.listxattr(os.fsencode(p), small, 3) == -1
    assert ctypes.get_errno() == errno.ERANGE


# ---------------------------------------------------------------- readdir, statfs

def test_readdir_exact(fs, ref):
    def ops(d):
        res = [sorted(os.listdir(d))]
        names = [".tierfs", "root", "superblock", "journal", "a b", "ü€", "-x", ".hidden",
                 "n" * 255, "\x01tierfs-xchg"]
        for i, n in enumerate(names):
            if i % 2:
                os.mkdir(d / n)
            else:
                (d / n).write_bytes(n.encode())
        res.append(sorted(os.listdir(d)))
        os.mkdir(d / "big")
        for i in range(1500):
            (d / "big" / f"entry-{i:05d}-{'z' * (i % 100)}").write_bytes(b"")
        res.append(sorted(os.listdir(d / "big")))
        res.append(sorted((e.name, e.is_dir(), e.is_file()) for e in os.scandir(d)))
        for i in range(0, 1500, 3):
            os.unlink(d / "big" / f"entry-{i:05d}-{'z' * (i % 100)}")
        res.append(sorted(os.listdir(d / "big")))
        res.append(os.listdir(d / "root"))
        fd = os.open(d / "big", os.O_RDONLY | os.O_DIRECTORY)
        first, second = sorted(os.listdir(fd)), sorted(os.listdir(fd))   # rewinddir
        os.close(fd)
        res.append(first == second == res[-2])
        return res

    both(ops, ref, fs.mnt)
    remount(fs)
    assert len(os.listdir(fs.mnt / "big")) == 1000


def test_readdir_fresh_mount_is_empty(fs):
    assert os.listdir(fs.mnt) == []
    assert [e.name for e in os.scandir(fs.mnt)] == []


def test_readdir_while_modifying(fs):
    """seekdir-style resumption: entries removed during a listing are not
    listed twice and surviving entries are not lost."""
    d = fs.mnt / "d"
    os.mkdir(d)
    names = {f"f{i:04d}" for i in range(600)}
    for n in names:
        (d / n).write_bytes(b"")
    seen = []
    with os.scandir(d) as it:
        for i, e in enumerate(it):
            seen.append(e.name)
            if i == 10:
                for n in sorted(names)[:50]:
                    if n not in seen:
                        os.unlink(d / n)
    assert len(seen) == len(set(seen))
    assert set(os.listdir(d)) <= set(seen)
    doomed = set(sorted(names)[:50]) - set(seen[:11])
    assert set(os.listdir(d)) == names - doomed


def test_statfs(fs):
    sv = os.statvfs(fs.mnt)
    mv = [os.statvfs(m) for m in fs.members]
    total = min(m.f_blocks * m.f_frsize for m in mv)
    n = len(fs.members)
    expect = {"raid0": n * total, "raid1": total, "raid10": n * total // 2,
              "jbod": sum(m.f_blocks * m.f_frsize for m in mv)}[fs.level]
    got = sv.f_blocks * sv.f_frsize
    assert abs(got - expect) <= max(expect // 100, 64 * MiB), (got, expect)
    assert 0 < sv.f_bavail <= sv.f_bfree <= sv.f_blocks
    assert sv.f_bsize > 0 and sv.f_frsize > 0
    assert sv.f_namemax >= 255
    assert sv.f_files > 0 and sv.f_ffree <= sv.f_files
    fd = os.open(fs.mnt, os.O_RDONLY)
    assert os.fstatvfs(fd).f_blocks == sv.f_blocks
    os.close(fd)
    r = subprocess.run(["df", "-P", str(fs.mnt)], capture_output=True, text=True)
    assert r.returncode == 0 and str(fs.mnt) in r.stdout, r


# ---------------------------------------------------------------- sizes, holes

def test_large_sparse_files(fs):
    p = fs.mnt / "big"
    offs = [5 * GiB, (1 << 40)]
    for off in offs:
        data = pattern(70001, off % 997)
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        try:
            assert os.pwrite(fd, data, off) == len(data)
            st = os.fstat(fd)
            assert st.st_size == off + len(data)
            assert st.st_blocks * 512 < 16 * MiB       # it stayed sparse
            assert os.pread(fd, len(data), off) == data
            assert os.pread(fd, 100, off + len(data)) == b""
            for h in [0, 4096, (1 << 32) - 50, 1 << 32, off - 8192, off - 1]:
                z = min(100, off - h)
                assert os.pread(fd, 100, h) == b"\0" * z + data[:100 - z], h
            assert os.pread(fd, 8192 + 100, off - 8192) == b"\0" * 8192 + data[:100]
            # straddling 4 GiB and an odd, chunk-crossing offset
            os.pwrite(fd, b"Q" * 10000, (1 << 32) - 5000)
            assert os.pread(fd, 10002, (1 << 32) - 5001) == b"\0" + b"Q" * 10000 + b"\0"
        finally:
            os.close(fd)
        remount(fs)
        st = os.stat(p)
        assert st.st_size == off + len(data)
        with open(p, "rb") as f:
            f.seek(off - 10)
            assert f.read() == b"\0" * 10 + data
            f.seek((1 << 32) - 5000)
            assert f.read(10000) == b"Q" * 10000
    # shrink the huge file back down
    os.truncate(p, 3 * GiB)
    assert os.stat(p).st_size == 3 * GiB
    remount(fs)
    assert os.stat(p).st_size == 3 * GiB
    os.unlink(p)


def test_truncate_grow_shrink(fs, ref):
    def ops(d):
        res = []
        p = d / "f"
        data = pattern(100_000, 6)
        p.write_bytes(data)
        for size in [50_001, 4096, 200_000, 4095, 0, 123_457, 1]:
            os.truncate(p, size)
            res.append((size, os.stat(p).st_size, p.read_bytes()))
        p.write_bytes(data)
        os.truncate(p, 10)
        os.truncate(p, 100_000)     # the old bytes must not come back
        res.append(p.read_bytes() == data[:10] + b"\0" * 99_990)
        fd = os.open(p, os.O_RDWR)
        os.ftruncate(fd, 33_333)
        os.pwrite(fd, b"end", 40_000)
        res.append((os.fstat(fd).st_size, os.pread(fd, 10, 33_330)))
        os.close(fd)
        with open(p, "wb") as f:     # O_TRUNC
            res.append(os.fstat(f.fileno()).st_size)
            f.write(b"short")
        res.append(p.read_bytes())
        res.append(outcome(os.truncate, p, -1))
        return res

    both(ops, ref, fs.mnt)
    remount(fs)
    assert (fs.mnt / "f").read_bytes() == b"short"


def test_truncate_size_survives_remount(fs):
    """The logical size comes back from the member sizes; cover sizes whose
    last byte falls on each member and on chunk edges."""
    sizes = {}
    for i, size in enumerate([1, 4095, 4096, 4097, 8192, 12289, 16384, 16385, 65535,
                              3 * MiB + 7]):
        p = fs.mnt / f"s{i}"
        p.write_bytes(b"")
        os.truncate(p, size)
        sizes[p.name] = size
        q = fs.mnt / f"w{i}"
        q.write_bytes(b"\xff" * size)
        sizes[q.name] = size
    remount(fs)
    for n, size in sizes.items():
        assert os.stat(fs.mnt / n).st_size == size, n
    for n, size in sizes.items():
        if n.startswith("w"):
            assert (fs.mnt / n).read_bytes() == b"\xff" * size
        else:
            assert (fs.mnt / n).read_bytes() == b"\0" * size


def test_fallocate(fs, ref):
    def ops(d):
        res = []
        fd = os.open(d / "f", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.posix_fallocate(fd, 0, MiB)
            st = os.fstat(fd)
            res.append((st.st_size, st.st_blocks * 512 >= MiB))
            os.posix_fallocate(fd, 3 * MiB, 5000)
            res.append(os.fstat(fd).st_size)
            fallocate(fd, FALLOC_FL_KEEP_SIZE, 4 * MiB, 2 * MiB)
            st = os.fstat(fd)
            res.append((st.st_size, st.st_blocks * 512 >= 3 * MiB))
            fallocate(fd, 0, 10, 20)             # inside: no change
            res.append(os.fstat(fd).st_size)
            data = pattern(200_000, 7)
            os.pwrite(fd, data, 0)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 50_000)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 65536)
            got = os.pread(fd, 200_000, 0)
            exp = bytearray(data)
            exp[1000:51000] = b"\0" * 50_000
            exp[65536:131072] = b"\0" * 65536
            res.append(got == bytes(exp))
            res.append(os.fstat(fd).st_size)
            res.append(outcome(fallocate, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096))  # needs KEEP_SIZE
            res.append(outcome(fallocate, fd, 0, 0, 0))
            os.pwrite(fd, b"\xee" * 30000, 300_000)
            fallocate(fd, 0x10, 301_000, 20_000)              # ZERO_RANGE
            res.append(os.pread(fd, 30000, 300_000) ==
                       b"\xee" * 1000 + b"\0" * 20000 + b"\xee" * 9000)
            fallocate(fd, 0x10 | FALLOC_FL_KEEP_SIZE, 2 * MiB, 8 * MiB)
            res.append(os.fstat(fd).st_size)
            fallocate(fd, 0x10, 2 * MiB, 8 * MiB)               # grows the file
            res.append((os.fstat(fd).st_size, os.pread(fd, 10, 10 * MiB - 10)))
            os.ftruncate(fd, 3 * MiB + 5000)
            # punch past EOF keeps the size
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 3 * MiB, 8 * MiB)
            res.append(os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return res

    r = both(ops, ref, fs.mnt)
    remount(fs)
    assert os.stat(fs.mnt / "f").st_size == r[1]
    with open(fs.mnt / "f", "rb") as f:
        got = f.read(200_000)
    assert got[1000:51000] == b"\0" * 50_000
    assert got[:1000] == pattern(200_000, 7)[:1000]


def test_fallocate_unsupported_modes_leave_data(fs):
    """Modes that shift data (collapse/insert range) cannot be done per
    member; they must be refused, not half applied."""
    p = fs.mnt / "f"
    data = pattern(5 * 65536, 8)
    p.write_bytes(data)
    fd = os.open(p, os.O_RDWR)
    try:
        for mode in (0x08, 0x20):       # COLLAPSE_RANGE, INSERT_RANGE
            with pytest.raises(OSError) as e:
                fallocate(fd, mode, 65536, 65536)
            assert e.value.errno in (errno.EOPNOTSUPP, errno.EINVAL)
    finally:
        os.close(fd)
    assert p.read_bytes() == data


def test_keep_size_survives_remount(fs):
    p = fs.mnt / "k"
    p.write_bytes(b"z" * 5000)
    fd = os.open(p, os.O_RDWR)
    fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 * MiB)
    os.close(fd)
    assert os.stat(p).st_size == 5000
    remount(fs)
    assert os.stat(p).st_size == 5000
    assert p.read_bytes() == b"z" * 5000


# ---------------------------------------------------------------- write modes

def test_o_append(fs, ref):
    def ops(d):
        p = d / "log"
        p.write_bytes(b"start\n")
        a = os.open(p, os.O_WRONLY | os.O_APPEND)
        b = os.open(p, os.O_WRONLY | os.O_APPEND)
        c = os.open(p, os.O_RDWR)
        for i in range(50):
            os.write(a if i % 2 else b, f"line {i} {'x' * (i * 97)}\n".encode())
            if i == 20:
                os.pwrite(c, b"OVER", 0)
                os.write(c, b"appended?")  # plain fd writes at its own offset
        os.lseek(a, 0, os.SEEK_SET)
        os.write(a, b"still at end\n")     # O_APPEND ignores the offset
        pos = os.lseek(a, 0, os.SEEK_CUR)
        for fd in (a, b, c):
            os.close(fd)
        return [p.read_bytes(), pos, os.stat(p).st_size]

    both(ops, ref, fs.mnt)


def test_o_direct(make_array, ref):
    """O_DIRECT at queue depth 1 with page-aligned buffers, 4K and 1M, on a
    64K-chunk RAID0 so that 4K requests land at chunk-unaligned offsets and
    1M requests span several members."""
    a = make_array("raid0", 3, "64K")
    a.mount()
    b = make_array("raid10", 4, "16K")
    b.mount()
    for mnt in [a.mnt, b.mnt, ref]:
        p = pathlib.Path(mnt) / "direct"
        model = bytearray()
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
        try:
            def wr(off, size, seed):
                buf = mmap.mmap(-1, size)
                buf.write(pattern(size, seed))
                assert os.pwritev(fd, [buf], off) == size
                if len(model) < off + size:
                    model.extend(b"\0" * (off + size - len(model)))
                model[off:off + size] = pattern(size, seed)
                buf.close()

            def rd(off, size):
                buf = mmap.mmap(-1, size)
                n = os.preadv(fd, [buf], off)
                out = bytes(buf[:n])
                buf.close()
                return out

            wr(0, MiB, 1)
            for i, off in enumerate([4096, 12 * KiB, 60 * KiB, 64 * KiB + 8 * KiB, 200 * KiB,
                                     MiB - 4096, 3 * MiB + 20 * KiB]):
                wr(off, 4096, 100 + i)
            wr(MiB + 4096, MiB, 2)               # 1M at a chunk-unaligned offset
            wr(5 * MiB, MiB, 3)
            assert os.fstat(fd).st_size == len(model)
            for off, size in [(0, MiB), (4096, 4096), (60 * KiB, 4096), (MiB, MiB),
                              (MiB + 4096, MiB), (3 * MiB, MiB), (5 * MiB, MiB),
                              (4 * MiB, 4096)]:
                assert rd(off, size) == bytes(model[off:off + size]), (mnt, off, size)
            assert rd(len(model), 4096) == b""
            # 4K random writes, read back each immediately
            rng = random.Random(9)
            for i in range(64):
                off = rng.randrange(0, 6 * MiB // 4096) * 4096
                wr(off, 4096, 1000 + i)
                assert rd(off, 4096) == bytes(model[off:off + 4096])
        finally:
            os.close(fd)
        # a buffered reader sees the same bytes
        assert p.read_bytes() == bytes(model)
    a.mounts[-1].remount()
    assert (a.mnt / "direct").read_bytes() == (pathlib.Path(ref) / "direct").read_bytes()


def test_o_direct_after_buffered_and_unaligned_tail(raid0):
    p = raid0.mnt / "f"
    data = pattern(3 * 4096 + 100, 11)
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 16384)
    n = os.preadv(fd, [buf], 0)
    assert n == len(data) and bytes(buf[:n]) == data
    os.close(fd)
    fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
    buf[:4096] = b"D" * 4096
    os.pwritev(fd, [memoryview(buf)[:4096]], 8192)
    os.fsync(fd)
    os.close(fd)
    buf.close()
    assert p.read_bytes() == data[:8192] + b"D" * 4096 + data[12288:]


def test_o_direct_unaligned(make_array):
    """FUSE passes unaligned O_DIRECT requests through; they must either be
    refused with EINVAL or store exactly the right bytes."""
    a = make_array("raid0", 3, "64K")
    a.mount()
    p = a.mnt / "f"
    model = bytearray(pattern(300_000, 14))
    p.write_bytes(model)
    fd = os.open(p, os.O_RDWR | os.O_DIRECT)
    try:
        for i, (off, ln) in enumerate([(1000, 3000), (65530, 20), (131072 - 100, 5000), (7, 1),
                                       (299_990, 100)]):
            b = pattern(ln, 200 + i)
            try:
                assert os.pwrite(fd, b, off) == ln
                model[off:off + ln] = b
            except OSError as e:
                assert e.errno == errno.EINVAL
            try:
                assert os.pread(fd, ln, off) == bytes(model[off:off + ln])
            except OSError as e:
                assert e.errno == errno.EINVAL
    finally:
        os.close(fd)
    assert p.read_bytes() == bytes(model)


def test_shared_mmap(fs):
    p = fs.mnt / "m"
    size = 300_000
    p.write_bytes(b"\0" * size)
    fd = os.open(p, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        expect = bytearray(size)
        for off in [0, 4095, 4096, 65536 - 3, 100_000, size - 10]:
            chunk = pattern(10, off)
            mm[off:off + 10] = chunk
            expect[off:off + 10] = chunk
        mm.flush()   # msync(MS_SYNC)
        with open(p, "rb") as f:
            assert f.read() == bytes(expect)
        assert os.pread(fd, size, 0) == bytes(expect)
        # write() is visible through the mapping
        os.pwrite(fd, b"from write", 200_000)
        expect[200_000:200_010] = b"from write"
        assert mm[200_000:200_010] == b"from write"
        mm.close()
    finally:
        os.close(fd)
    remount(fs)
    assert p.read_bytes() == bytes(expect)
    # and a fresh mapping after remount reads the same
    with open(p, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        assert mm[:] == bytes(expect)
        mm.close()


def test_fsync_fdatasync(fs):
    p = fs.mnt / "s"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, pattern(100_000, 12))
    os.fsync(fd)
    os.fdatasync(fd)
    os.close(fd)
    fd = os.open(fs.mnt, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    fd = os.open(p, os.O_RDWR | os.O_SYNC)
    os.pwrite(fd, b"sync", 0)
    os.close(fd)
    fd = os.open(p, os.O_RDWR | os.O_DSYNC)
    os.pwrite(fd, b"dsyn", 4)
    os.close(fd)
    os.sync()
    assert p.read_bytes()[:8] == b"syncdsyn"
    assert p.read_bytes()[8:] == pattern(100_000, 12)[8:]


def test_many_small_writes_and_reads_match_host(fs, ref):
    def ops(d):
        rng = random.Random(13)
        fd = os.open(d / "r", os.O_CREAT | os.O_RDWR, 0o644)
        for i in range(300):
            off = rng.randrange(0, 300_000)
            ln = rng.randrange(1, 20_000)
            if rng.random() < 0.6:
                os.pwrite(fd, pattern(ln, i), off)
            elif rng.random() < 0.5:
                os.ftruncate(fd, off)
            else:
                os.pread(fd, ln, off)
        os.close(fd)
        return (d / "r").read_bytes()

    both(ops, ref, fs.mnt)


# ---------------------------------------------------------------- sqlite

SQL = """PRAGMA journal_mode=WAL;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB);
CREATE INDEX tk ON t(k);
""" + "".join(
    "BEGIN;\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<1000) "
    "INSERT INTO t(k, v) SELECT hex(randomblob(8)), randomblob(abs(random()) % 300) FROM c;\n"
    "COMMIT;\n" for _ in range(20)) + """UPDATE t SET k = 'u' || k WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
PRAGMA integrity_check;
SELECT count(*) FROM t;
"""


def sqlite(db, sql):
    r = subprocess.run(["sqlite3", "-bail", str(db)], input=sql, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize("level,n,chunk", [("raid0", 4, "4K"), ("raid10", 4, "16K")])
def test_sqlite_wal(make_array, level, n, chunk):
    a = make_array(level, n, chunk)
    a.mount()
    db = a.mnt / "db" / "test.db"
    os.mkdir(a.mnt / "db")
    rows = 20000 - 20000 // 11
    out = sqlite(db, SQL)
    assert out == ["wal", "ok", str(rows)]
    # a reader while a writer holds the WAL open
    out = sqlite(db, "PRAGMA journal_mode;\nPRAGMA integrity_check;\n"
                     "SELECT count(*) FROM t WHERE k LIKE 'u%';\n")
    assert out[:2] == ["wal", "ok"]
    a.mounts[-1].remount()
    out = sqlite(db, "PRAGMA integrity_check;\nSELECT count(*) FROM t;\n"
                     "INSERT INTO t(k) VALUES('after');\nPRAGMA wal_checkpoint(TRUNCATE);\n"
                     "PRAGMA integrity_check;\n")
    assert out[0] == "ok" and out[1] == str(rows) and out[-1] == "ok"
    a.mounts[-1].remount()
    assert sqlite(db, "PRAGMA quick_check;\nSELECT count(*) FROM t;\n") == ["ok", str(rows + 1)]


# ---------------------------------------------------------------- ownership, permissions

@pytest.fixture(params=[("raid0", 4, "4K"), ("raid1", 2, None)], ids=["raid0-4", "raid1-2"])
def shared(request, make_array):
    """Mounted with allow_other so other users can reach it."""
    a = make_array(*request.param)
    a.mount(opts=["allow_other"])
    return a


def test_ownership_of_new_objects(shared, ref):
    res = {}
    for name, d in [("mnt", shared.mnt), ("ref", ref)]:
        os.chmod(d, 0o755)
        os.mkdir(d / "pub")
        os.chmod(d / "pub", 0o777)
        sg = d / "sgid"
        os.mkdir(sg)
        os.chown(sg, 0, 4242)
        os.chmod(sg, 0o2777)

        def child():
            out = []
            fd = os.open("pub/file", os.O_CREAT | os.O_WRONLY, 0o666)
            os.write(fd, b"mine")
            os.close(fd)
            os.mkdir("pub/dir", 0o777)
            os.symlink("file", "pub/link")
            os.mkfifo("pub/fifo", 0o666)
            os.mknod("pub/node", 0o644 | stat.S_IFREG)
            os.mkdir("sgid/sub", 0o755)
            os.mkdir("sgid/sub/deeper", 0o700)
            (pathlib.Path("sgid") / "f").write_bytes(b"")
            (pathlib.Path("sgid/sub/deeper") / "g").write_bytes(b"")
            os.close(os.open("pub/suid", os.O_CREAT | os.O_WRONLY, 0o4755))
            os.close(os.open("sgid/sgfile", os.O_CREAT | os.O_WRONLY, 0o2755))
            os.mkdir("sgid/sgdir", 0o2755)
            os.link("pub/file", "pub/hard")
            os.rename("pub/dir", "pub/dir2")
            out.append(jout(os.chown, "pub/file", -1, 4242))   # not in group 4242
            out.append(jout(os.chown, "pub/file", 0, -1))
            os.chmod("pub/file", 0o640)
            return out

        r = as_user(child, d)
        stats = {}
        for rel in ["pub/file", "pub/dir2", "pub/link", "pub/fifo", "pub/node", "pub/hard",
                    "sgid/sub", "sgid/sub/deeper", "sgid/f", "sgid/sub/deeper/g", "pub/suid",
                    "sgid/sgfile", "sgid/sgdir"]:
            st = os.lstat(d / rel)
            mode = st.st_mode if not stat.S_ISLNK(st.st_mode) else stat.S_IFLNK
            stats[rel] = (st.st_uid, st.st_gid, oct(mode))
        res[name] = (r, stats)
    assert res["mnt"] == res["ref"]
    r, stats = res["mnt"]
    assert r == [["err", "EPERM"], ["err", "EPERM"]]
    assert stats["pub/file"] == (UID, GID, oct(stat.S_IFREG | 0o640))
    assert stats["pub/dir2"] == (UID, GID, oct(stat.S_IFDIR | 0o755))
    assert stats["pub/link"][:2] == (UID, GID)
    assert stats["sgid/sub"] == (UID, 4242, oct(stat.S_IFDIR | 0o2755))
    assert stats["sgid/sub/deeper"] == (UID, 4242, oct(stat.S_IFDIR | 0o2700))
    assert stats["sgid/f"][:2] == (UID, 4242)
    assert stats["sgid/sub/deeper/g"][:2] == (UID, 4242)
    assert stats["pub/suid"] == (UID, GID, oct(stat.S_IFREG | 0o4755))
    # every member carries the same owner
    for rel in ["pub/file", "pub/dir2", "sgid/sub/deeper", "sgid/f"]:
        for p in member_paths(shared, rel):
            st = os.lstat(p)
            assert (st.st_uid, st.st_gid) == stats[rel][:2], p
    shared.mounts[-1].remount()
    assert os.stat(shared.mnt / "sgid/sub").st_gid == 4242
    assert os.stat(shared.mnt / "pub/file").st_uid == UID


def test_permissions_enforced(shared, ref):
    res = {}
    for name, d in [("mnt", shared.mnt), ("ref", ref)]:
        os.chmod(d, 0o755)
        (d / "secret").write_bytes(b"root only")
        os.chmod(d / "secret", 0o600)
        (d / "readable").write_bytes(b"everyone")
        os.chmod(d / "readable", 0o644)
        os.mkdir(d / "closed", 0o755)
        (d / "closed" / "x").write_bytes(b"")
        os.mkdir(d / "private", 0o700)
        (d / "private" / "y").write_bytes(b"")
        os.mkdir(d / "sticky")
        os.chmod(d / "sticky", 0o1777)
        (d / "sticky" / "rootfile").write_bytes(b"")
        os.chmod(d / "sticky" / "rootfile", 0o666)
        os.setxattr(d / "readable", "user.r", b"1")
        (d / "suidfile").write_bytes(b"suid")
        os.chmod(d / "suidfile", 0o4777)

        def child():
            return [
                jout(lambda: open("secret", "rb").read()),
                jout(lambda: open("readable", "rb").read()),
                jout(lambda: open("readable", "r+b")),
                jout(opn, "closed/new", os.O_CREAT | os.O_WRONLY, 0o644),
                jout(os.mkdir, "closed/newdir"),
                jout(os.unlink, "closed/x"),
                jout(os.rename, "closed/x", "closed/z"),
                jout(os.symlink, "t", "closed/l"),
                jout(os.listdir, "private"),
                jout(os.stat, "private/y"),
                jout(os.chmod, "readable", 0o777),
                jout(os.utime, "readable", ns=(1, 1)),
                jout(os.utime, "readable"),
                jout(os.truncate, "readable", 0),
                jout(os.setxattr, "readable", "user.r", b"2"),
                jout(os.getxattr, "readable", "user.r"),
                jout(os.unlink, "sticky/rootfile"),
                jout(os.rename, "sticky/rootfile", "sticky/mine"),
                jout(lambda: open("sticky/rootfile", "r+b").write(b"ok")),
                jout(os.link, "secret", "sticky/hl"),
                jout(os.access, "secret", os.R_OK),
                jout(os.access, "readable", os.R_OK),
                jout(lambda: open("suidfile", "r+b").write(b"SUID")),   # drops set-uid
                jout(lambda: oct(os.stat("suidfile").st_mode)),
            ]

        res[name] = (as_user(child, d), sorted(os.listdir(d / "closed")),
                     (d / "readable").read_bytes(), oct(os.stat(d / "suidfile").st_mode))
    assert res["mnt"] == res["ref"]
    r = res["mnt"][0]
    assert r[0] == ["err", "EACCES"]
    assert r[1] == ["ok", "everyone"]
    assert r[3] == ["err", "EACCES"] and r[4] == ["err", "EACCES"]


def test_without_allow_other_others_are_locked_out(raid0):
    opts = [l.split()[3] for l in open("/proc/mounts") if l.split()[1] == str(raid0.mnt)]
    assert len(opts) == 1 and "default_permissions" in opts[0].split(",")
    (raid0.mnt / "f").write_bytes(b"x")
    os.chmod(raid0.mnt, 0o755)
    r = as_user(lambda: jout(os.listdir, "."), raid0.mnt)
    assert r == ["err", "EACCES"]


def test_deep_tree_beyond_path_max(raid0, ref):
    """Nothing in POSIX limits a tree's depth: with *at() calls a tree whose
    full path is longer than PATH_MAX (4096) works on any local filesystem.
    30 levels of 200-byte names is ~6000 bytes of path."""
    def ops(d):
        res = []
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        depth = 0
        try:
            for i in range(30):
                name = f"{i:02d}" + "d" * 198
                os.mkdir(name, dir_fd=fd)
                nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
                depth += 1
            f = os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
            os.write(f, b"deep")
            os.close(f)
            os.rename("leaf", "leaf2", src_dir_fd=fd, dst_dir_fd=fd)
            res.append(os.listdir(fd))
            f = os.open("leaf2", os.O_RDONLY, dir_fd=fd)
            res.append(os.read(f, 10))
            os.close(f)
            res.append(os.stat("leaf2", dir_fd=fd).st_size)
        except OSError as e:
            res.append(("failed at depth", depth, errno.errorcode[e.errno]))
        finally:
            os.close(fd)
        return res

    both(ops, ref, raid0.mnt)


# ---------------------------------------------------------------- member metadata names

def test_tierfs_names_at_root(fs):
    d = fs.mnt
    (d / ".tierfs").write_bytes(b"user data named .tierfs")
    assert (d / ".tierfs").read_bytes() == b"user data named .tierfs"
    assert sorted(os.listdir(d)) == [".tierfs"]
    os.setxattr(d / ".tierfs", "user.k", b"v")
    remount(fs)   # the superblocks were not disturbed
    assert (d / ".tierfs").read_bytes() == b"user data named .tierfs"
    os.unlink(d / ".tierfs")
    os.makedirs(d / ".tierfs" / "journal")
    (d / ".tierfs" / "superblock").write_bytes(b"not a superblock")
    os.mkdir(d / "root")
    (d / "root" / "root").write_bytes(b"rr")
    remount(fs)
    assert sorted(os.listdir(d)) == [".tierfs", "root"]
    assert sorted(os.listdir(d / ".tierfs")) == ["journal", "superblock"]
    assert (d / ".tierfs" / "superblock").read_bytes() == b"not a superblock"
    assert (d / "root" / "root").read_bytes() == b"rr"
    for m in fs.members:
        assert (m / ".tierfs" / "superblock").read_text().startswith("tierfs-superblock")
    subprocess.run(["rm", "-rf", str(d / ".tierfs"), str(d / "root")], check=True)
    assert os.listdir(d) == []
    remount(fs)
    assert os.listdir(d) == []


# ---------------------------------------------------------------- the kernel's page cache

def read_through(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("change", ["direct_write", "truncate", "mmap"])
def test_a_change_through_another_open_reaches_the_next_reader(raid0, change):
    """What another open changes (an O_DIRECT write, which bypasses the page
    cache; a truncate by name; a shared mapping) is what the next open reads,
    and what a reader who kept the file open reads too."""
    p = raid0.mnt / "f"
    p.write_bytes(b"a" * (64 * KiB))
    keeper = open(p, "rb")
    assert keeper.read() == b"a" * (64 * KiB)
    want = bytearray(b"a" * (64 * KiB))
    if change == "direct_write":
        buf = mmap.mmap(-1, 4 * KiB)
        buf.write(b"b" * (4 * KiB))
        fd = os.open(p, os.O_WRONLY | os.O_DIRECT)
        try:
            assert os.pwrite(fd, buf, 8 * KiB) == 4 * KiB
        finally:
            os.close(fd)
        want[8 * KiB:12 * KiB] = b"b" * (4 * KiB)
    elif change == "truncate":
        os.truncate(p, 5000)
        del want[5000:]
    else:
        with open(p, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            m[100:104] = b"cccc"
        want[100:104] = b"cccc"
    assert read_through(p) == bytes(want)
    keeper.seek(0)
    assert keeper.read() == bytes(want)
    keeper.close()
