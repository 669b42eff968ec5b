"""Descriptors stay bounded however many inodes the kernel knows: the
machine allows 20,000 open files, and tierfs keeps N member files per file,
so it must not hold a descriptor per known inode (passthrough_ll does, and
fails near 20,000 files).  Also exercises the directory fd cache when it is
far smaller than the tree."""
import os

import pytest


def daemon_fds(mount):
    return len(os.listdir(f"/proc/{mount.proc.pid}/fd"))


def test_many_files_few_descriptors(make_array):
    a = make_array("raid0", 4, "64K")
    m = a.mount()
    ndirs, per_dir = 50, 500            # 25,000 files: above the fd limit
    for d in range(ndirs):
        os.mkdir(a.mnt / f"d{d}")
        for f in range(per_dir):
            fd = os.open(a.mnt / f"d{d}" / f"f{f}", os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, b"%d/%d" % (d, f))
            os.close(fd)
    # the kernel now knows every inode; stat them all again, and read some
    for d in range(ndirs):
        for f in range(per_dir):
            assert os.stat(a.mnt / f"d{d}" / f"f{f}").st_size == len(b"%d/%d" % (d, f))
    for d in range(0, ndirs, 7):
        assert (a.mnt / f"d{d}" / "f3").read_bytes() == b"%d/3" % d
    fds = daemon_fds(m)
    # member roots, superblock locks, LMDB, rings, and at most 1024 cached
    # directories x 4 members; far below one per file
    print("daemon descriptors:", fds)
    assert fds < 600, f"daemon holds {fds} descriptors"


def test_tiny_directory_cache(make_array):
    """dir_cache=4: every operation re-resolves directories by name, while
    directories are renamed underneath; results must not change."""
    a = make_array("raid10", 4, "4K")
    m = a.mount(opts=["dir_cache=4"])
    root = a.mnt
    paths = []
    for i in range(30):
        p = root / f"a{i}" / "b" / "c"
        os.makedirs(p)
        (p / "f").write_bytes(os.urandom(9000) + bytes([i]))
        paths.append(p)
    data = {i: (paths[i] / "f").read_bytes() for i in range(30)}
    for i in range(0, 30, 2):          # move half the trees while others are in use
        os.rename(root / f"a{i}", root / f"moved{i}")
    for i in range(30):
        top = f"moved{i}" if i % 2 == 0 else f"a{i}"
        f = root / top / "b" / "c" / "f"
        assert f.read_bytes() == data[i]
        with open(f, "r+b") as fh:
            fh.seek(4096)
            fh.write(b"x" * 100)
        assert f.read_bytes()[4096:4196] == b"x" * 100
    assert daemon_fds(m) < 100
    m.stop()
    m2 = a.mount(opts=["dir_cache=4"])
    assert (root / "moved0" / "b" / "c" / "f").read_bytes()[:4096] == data[0][:4096]
    m2.stop()
