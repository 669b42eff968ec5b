"""Command-line behaviour of mkfs.tierfs and tierfs: every refusal gives a
one-line reason, a non-zero exit and leaves nothing behind (no member is
written, nothing is mounted); the accepted forms (shuffled member order,
backgrounding, -o ro) work."""
import errno
import os
import pathlib
import random
import subprocess
import time

import pytest

from conftest import MKFS, TIERFS, Mount, mkfs, mounted


# ---------------------------------------------------------------- helpers

def tree_state(dirs):
    """Everything observable about the member directories: every path below
    them with its type, size, mode, content hash-ish and xattrs."""
    state = {}
    for d in dirs:
        d = pathlib.Path(d)
        if not d.exists():
            state[str(d)] = None
            continue
        if not d.is_dir():
            state[str(d)] = ("file", d.read_bytes())
            continue
        entries = [(".", os.lstat(d).st_mode, tuple(sorted(os.listxattr(d))))]
        for root, dnames, fnames in os.walk(d):
            for n in sorted(dnames + fnames):
                p = os.path.join(root, n)
                st = os.lstat(p)
                data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else None
                entries.append((os.path.relpath(p, d), st.st_mode, st.st_size, data,
                                tuple(sorted(os.listxattr(p, follow_symlinks=False)))))
        state[str(d)] = sorted(entries, key=repr)
    return state


def mkfs_raw(*args):
    return subprocess.run([str(MKFS)] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=30)


def msg_lines(stderr, prog):
    return [l for l in stderr.splitlines() if l.startswith(prog + ":")]


def assert_refused(r, prog, *substrings):
    """Non-zero exit and exactly one 'prog: ...' line holding every substring."""
    assert r.returncode != 0, f"expected a refusal, got success:\n{r.stdout}{r.stderr}"
    lines = msg_lines(r.stderr, prog)
    assert len(lines) == 1, f"want one '{prog}:' line, got:\n{r.stderr}"
    for s in substrings:
        assert str(s) in lines[0], f"{s!r} not in {lines[0]!r}"
    return lines[0]


def mkdirs(tmp, n, prefix="m"):
    out = []
    for i in range(n):
        p = tmp / f"{prefix}{i}"
        p.mkdir()
        out.append(p)
    return out


def try_mount(members, mnt, opts=(), timeout=15, create=True):
    """Run the daemon in the foreground expecting a refusal. If it mounts
    instead, unmount it and fail."""
    if create:
        os.makedirs(mnt, exist_ok=True)
    args = [str(TIERFS), "-f"]
    for o in opts:
        args += ["-o", o]
    args += [":".join(str(m) for m in members), str(mnt)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"tierfs did not refuse (still running, mounted={mounted(mnt)}):\n{err}")
    assert not mounted(mnt), "a refused mount left something mounted"
    return subprocess.CompletedProcess(args, p.returncode, out, err)


# ---------------------------------------------------------------- mkfs refusals

def test_mkfs_missing_level(tmp_path):
    ms = mkdirs(tmp_path, 2)
    before = tree_state(ms)
    r = mkfs_raw(*ms)
    assert_refused(r, "mkfs.tierfs", "--level")
    assert tree_state(ms) == before


def test_mkfs_unknown_level(tmp_path):
    ms = mkdirs(tmp_path, 2)
    before = tree_state(ms)
    r = mkfs_raw("--level", "raid7", *ms)
    assert_refused(r, "mkfs.tierfs", "unknown level 'raid7'")
    assert tree_state(ms) == before


@pytest.mark.parametrize("level,n,need", [("raid5", 2, "raid5 needs at least 3 members"),
                                          ("raid6", 3, "raid6 needs at least 4 members")])
def test_mkfs_parity_levels_need_members(tmp_path, level, n, need):
    ms = mkdirs(tmp_path, n)
    before = tree_state(ms)
    r = mkfs_raw("--level", level, *ms)
    assert_refused(r, "mkfs.tierfs", need)
    assert tree_state(ms) == before


@pytest.mark.parametrize("level", ["raid0", "raid1", "raid10"])
def test_mkfs_too_few_members(tmp_path, level):
    ms = mkdirs(tmp_path, 1)
    before = tree_state(ms)
    r = mkfs_raw("--level", level, *ms)
    assert_refused(r, "mkfs.tierfs", level, "at least 2 members")
    assert tree_state(ms) == before


def test_mkfs_jbod_one_member_ok(tmp_path):
    ms = mkdirs(tmp_path, 1)
    r = mkfs_raw("--level", "jbod", *ms)
    assert r.returncode == 0, r.stderr
    assert (ms[0] / ".tierfs" / "superblock").exists()


@pytest.mark.parametrize("chunk", ["3K", "5000", "32M", "2K", "0", "-4K", "4Q", "abc"])
def test_mkfs_bad_chunk(tmp_path, chunk):
    ms = mkdirs(tmp_path, 2)
    before = tree_state(ms)
    r = mkfs_raw("--level", "raid0", "--chunk", chunk, *ms)
    line = assert_refused(r, "mkfs.tierfs")
    assert "chunk" in line
    assert tree_state(ms) == before


@pytest.mark.parametrize("chunk,expect", [("4K", 4096), ("16M", 16 << 20), ("65536", 65536),
                                          ("64KiB", 65536)])
def test_mkfs_good_chunk(tmp_path, chunk, expect):
    ms = mkdirs(tmp_path, 2)
    r = mkfs_raw("--level", "raid0", "--chunk", chunk, *ms)
    assert r.returncode == 0, r.stderr
    sb = (ms[0] / ".tierfs" / "superblock").read_text()
    assert f"chunk={expect}\n" in sb


def test_mkfs_non_empty(tmp_path):
    ms = mkdirs(tmp_path, 3)
    (ms[2] / "precious").write_text("data")
    before = tree_state(ms)
    r = mkfs_raw("--level", "raid0", *ms)
    assert_refused(r, "mkfs.tierfs", str(ms[2]), "not empty")
    assert tree_state(ms) == before


def test_mkfs_already_member_then_force(tmp_path):
    ms = mkdirs(tmp_path, 2)
    mkfs(ms, "raid1")
    old = (ms[0] / ".tierfs" / "superblock").read_text()
    before = tree_state(ms)
    r = mkfs_raw("--level", "raid0", *ms)
    assert_refused(r, "mkfs.tierfs", str(ms[0]), "already belongs to array", "--force")
    assert tree_state(ms) == before
    # one fresh directory alongside an old member: still refused, fresh one untouched
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    before = tree_state(ms + [fresh])
    r = mkfs_raw("--level", "raid0", fresh, ms[1])
    assert_refused(r, "mkfs.tierfs", str(ms[1]), "already belongs")
    assert tree_state(ms + [fresh]) == before
    # --force reformats
    r = mkfs_raw("--level", "raid0", "--force", *ms)
    assert r.returncode == 0, r.stderr
    new = (ms[0] / ".tierfs" / "superblock").read_text()
    assert new != old
    assert "level=raid0" in new
    uuid = [l for l in new.splitlines() if l.startswith("uuid=")][0]
    assert uuid not in old


def test_mkfs_force_array_mounts_clean(tmp_path):
    """A --force reformat gives an empty tree, not the old files."""
    ms = mkdirs(tmp_path, 2)
    mkfs(ms, "raid1")
    m = Mount(ms, tmp_path / "mnt").start()
    try:
        (tmp_path / "mnt" / "old").write_text("x")
    finally:
        m.stop()
    r = mkfs_raw("--level", "raid0", "--force", *ms)
    assert r.returncode == 0, r.stderr
    m = Mount(ms, tmp_path / "mnt").start()
    try:
        assert os.listdir(tmp_path / "mnt") == []
    finally:
        m.stop()


def test_mkfs_refuses_mounted_member_even_with_force(tmp_path):
    ms = mkdirs(tmp_path, 2)
    mkfs(ms, "raid1")
    m = Mount(ms, tmp_path / "mnt").start()
    try:
        before = tree_state([ms[0] / ".tierfs" / "superblock"])
        r = mkfs_raw("--level", "raid1", "--force", *ms)
        assert_refused(r, "mkfs.tierfs", str(ms[0]), "mounted")
        assert tree_state([ms[0] / ".tierfs" / "superblock"]) == before
        assert mounted(tmp_path / "mnt")
    finally:
        m.stop()


def test_mkfs_same_directory_twice(tmp_path):
    ms = mkdirs(tmp_path, 2)
    before = tree_state(ms)
    r = mkfs_raw("--level", "raid1", ms[0], ms[1], ms[0])
    assert_refused(r, "mkfs.tierfs", "same directory")
    assert tree_state(ms) == before


@pytest.mark.parametrize("spelling", ["dotdot", "dot", "slash", "symlink", "relative"])
def test_mkfs_same_directory_other_spelling(tmp_path, spelling):
    ms = mkdirs(tmp_path, 2)
    other = {
        "dotdot": f"{ms[0]}/../{ms[0].name}",
        "dot": f"{ms[0]}/.",
        "slash": f"{ms[0]}//",
        "symlink": str(tmp_path / "link"),
        "relative": ms[0].name,
    }[spelling]
    if spelling == "symlink":
        os.symlink(ms[0], tmp_path / "link")
    before = tree_state(ms)
    r = subprocess.run([str(MKFS), "--level", "raid1", str(ms[0]), str(ms[1]), other],
                       capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert_refused(r, "mkfs.tierfs", "same directory")
    assert tree_state(ms) == before


def test_mkfs_non_directory(tmp_path):
    ms = mkdirs(tmp_path, 1)
    f = tmp_path / "afile"
    f.write_text("not a dir")
    before = tree_state(ms + [f])
    r = mkfs_raw("--level", "raid1", ms[0], f)
    assert_refused(r, "mkfs.tierfs", str(f), "not a directory")
    assert tree_state(ms + [f]) == before


def test_mkfs_missing_directory(tmp_path):
    ms = mkdirs(tmp_path, 1)
    before = tree_state(ms)
    r = mkfs_raw("--level", "raid1", ms[0], tmp_path / "nope")
    assert_refused(r, "mkfs.tierfs", str(tmp_path / "nope"))
    assert tree_state(ms) == before
    assert not (tmp_path / "nope").exists()


def test_mkfs_no_members(tmp_path):
    r = mkfs_raw("--level", "raid1")
    assert_refused(r, "mkfs.tierfs", "no member")


def test_mkfs_output(tmp_path):
    ms = mkdirs(tmp_path, 4)
    r = mkfs_raw("--level", "raid10", "--chunk", "64K", *ms)
    assert r.returncode == 0, r.stderr
    assert "raid10" in r.stdout and "chunk 64K" in r.stdout
    assert "failures tolerated: 1" in r.stdout
    for i, m in enumerate(ms):
        sb = (m / ".tierfs" / "superblock").read_text()
        assert f"index={i}\n" in sb and "members=4\n" in sb
        assert (m / "root").is_dir()


# ---------------------------------------------------------------- mount refusals

@pytest.fixture
def two_arrays(tmp_path):
    a = mkdirs(tmp_path, 3, "a")
    b = mkdirs(tmp_path, 3, "b")
    mkfs(a, "raid0", "4K")
    mkfs(b, "raid0", "4K")
    return a, b


def test_mount_foreign_member(tmp_path, two_arrays):
    a, b = two_arrays
    before = tree_state(a + b)
    r = try_mount([a[0], b[1], a[2]], tmp_path / "mnt")
    assert_refused(r, "tierfs", str(b[1]), "belongs to array")
    assert tree_state(a + b) == before


def test_mount_foreign_member_extra(tmp_path, two_arrays):
    """A complete set plus one member of another array."""
    a, b = two_arrays
    r = try_mount(a + [b[0]], tmp_path / "mnt")
    assert_refused(r, "tierfs", str(b[0]))


def test_mount_missing_member(tmp_path, two_arrays):
    a, _ = two_arrays
    before = tree_state(a)
    r = try_mount([a[0], a[2]], tmp_path / "mnt")
    line = assert_refused(r, "tierfs", "missing")
    assert "member 1 of 3" in line  # names which member is absent
    assert tree_state(a) == before


def test_mount_same_member_twice(tmp_path, two_arrays):
    a, _ = two_arrays
    before = tree_state(a)
    r = try_mount([a[0], a[1], a[2], a[1]], tmp_path / "mnt")
    assert_refused(r, "tierfs", str(a[1]), "same directory")
    # same member, other spelling, replacing a real member
    r = try_mount([a[0], a[1], f"{a[1]}/../{a[1].name}"], tmp_path / "mnt")
    assert_refused(r, "tierfs", a[1].name, "same directory")
    assert tree_state(a) == before


def test_mount_not_a_member(tmp_path, two_arrays):
    a, _ = two_arrays
    stray = tmp_path / "stray"
    stray.mkdir()
    before = tree_state(a + [stray])
    r = try_mount(a + [stray], tmp_path / "mnt")
    assert_refused(r, "tierfs", str(stray), "not a tierfs member")
    r = try_mount([stray] + a, tmp_path / "mnt")
    assert_refused(r, "tierfs", str(stray), "not a tierfs member")
    r = try_mount([a[0], a[1], tmp_path / "nonexistent"], tmp_path / "mnt")
    assert_refused(r, "tierfs", str(tmp_path / "nonexistent"))
    assert tree_state(a + [stray]) == before


def test_mount_unknown_option(tmp_path, two_arrays):
    a, _ = two_arrays
    r = try_mount(a, tmp_path / "mnt", opts=["frobnicate"])
    assert r.returncode != 0
    assert "frobnicate" in r.stderr, r.stderr       # the offending option is named
    assert msg_lines(r.stderr, "tierfs"), r.stderr
    r = try_mount(a, tmp_path / "mnt", opts=["entry_timeout=soon"])
    assert r.returncode != 0
    assert "entry_timeout" in r.stderr, r.stderr
    # the array is not left locked: a good mount works afterwards
    m = Mount(a, tmp_path / "mnt").start()
    m.stop()


def test_mount_bad_mountpoint(tmp_path, two_arrays):
    a, _ = two_arrays
    r = try_mount(a, tmp_path / "nomnt" / "x", create=False)
    assert r.returncode != 0
    assert str(tmp_path / "nomnt" / "x") in r.stderr, r.stderr


def test_mount_refusal_in_background_mode(tmp_path, two_arrays):
    """Without -f a refusal still reaches the terminal and no daemon stays."""
    a, _ = two_arrays
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([str(TIERFS), f"{a[0]}:{a[1]}", str(mnt)], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert_refused(r, "tierfs", "missing")
    assert not mounted(mnt)
    assert daemon_pids(mnt) == []


def test_mount_already_mounted(tmp_path, two_arrays):
    a, _ = two_arrays
    m = Mount(a, tmp_path / "mnt").start()
    try:
        (tmp_path / "mnt" / "f").write_bytes(b"keep")
        r = try_mount(a, tmp_path / "mnt2")
        assert_refused(r, "tierfs", str(a[0]), "in use")
        # the first mount is unaffected
        assert mounted(tmp_path / "mnt")
        assert (tmp_path / "mnt" / "f").read_bytes() == b"keep"
    finally:
        m.stop()


def test_mount_shuffled_order(tmp_path):
    ms = mkdirs(tmp_path, 5)
    mkfs(ms, "raid10", "4K")
    data = {f"f{i}": os.urandom(random.randrange(1, 200_000)) for i in range(8)}
    m = Mount(ms, tmp_path / "mnt").start()
    try:
        os.mkdir(tmp_path / "mnt" / "d")
        for k, v in data.items():
            (tmp_path / "mnt" / "d" / k).write_bytes(v)
    finally:
        m.stop()
    rng = random.Random(7)
    for _ in range(3):
        order = ms[:]
        while order == ms:
            rng.shuffle(order)
        m = Mount(order, tmp_path / "mnt").start()
        try:
            assert sorted(os.listdir(tmp_path / "mnt" / "d")) == sorted(data)
            for k, v in data.items():
                assert (tmp_path / "mnt" / "d" / k).read_bytes() == v
            (tmp_path / "mnt" / "d" / "f0").write_bytes(data["f0"])  # rewrite works
        finally:
            m.stop()
        m.check_log()


# ---------------------------------------------------------------- backgrounding, ro

def daemon_pids(mnt):
    """Pids of tierfs processes whose argv names this mountpoint."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"tierfs") and str(mnt).encode() in argv:
            pids.append(int(d))
    return pids


def test_background_daemon(tmp_path):
    ms = mkdirs(tmp_path, 2)
    mkfs(ms, "raid0", "4K")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([str(TIERFS), f"{ms[0]}:{ms[1]}", str(mnt)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    pids = daemon_pids(mnt)
    try:
        assert r.returncode == 0, r.stderr
        assert mounted(mnt), "the mount must be live when the command returns"
        assert len(pids) == 1, pids
        (mnt / "x").write_bytes(b"hello" * 5000)
        assert (mnt / "x").read_bytes() == b"hello" * 5000
        # the daemon is detached: its own session, not our child
        assert os.getsid(pids[0]) != os.getsid(0)
        u = subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, text=True)
        assert u.returncode == 0, u.stderr
        deadline = time.time() + 10
        while time.time() < deadline and os.path.exists(f"/proc/{pids[0]}"):
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{pids[0]}"), "daemon did not exit after unmount"
        assert not mounted(mnt)
        # members are released: mounting again works
        m = Mount(ms, mnt).start()
        assert (mnt / "x").read_bytes() == b"hello" * 5000
        m.stop()
    finally:
        if mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
        for p in pids:
            if os.path.exists(f"/proc/{p}"):
                os.kill(p, 9)


def test_readonly_mount(tmp_path):
    ms = mkdirs(tmp_path, 2)
    mkfs(ms, "raid1")
    mnt = tmp_path / "mnt"
    m = Mount(ms, mnt).start()
    try:
        (mnt / "f").write_bytes(b"data")
        os.mkdir(mnt / "d")
    finally:
        m.stop()
    before = tree_state([m_ / "root" for m_ in ms])
    m = Mount(ms, mnt, opts=["ro"]).start()
    try:
        assert (mnt / "f").read_bytes() == b"data"
        attempts = [
            lambda: open(mnt / "f", "wb"),
            lambda: open(mnt / "f", "ab"),
            lambda: os.open(mnt / "f", os.O_RDWR),
            lambda: open(mnt / "new", "wb"),
            lambda: os.mkdir(mnt / "d2"),
            lambda: os.rmdir(mnt / "d"),
            lambda: os.unlink(mnt / "f"),
            lambda: os.rename(mnt / "f", mnt / "g"),
            lambda: os.symlink("f", mnt / "l"),
            lambda: os.link(mnt / "f", mnt / "h"),
            lambda: os.chmod(mnt / "f", 0o600),
            lambda: os.utime(mnt / "f", ns=(1, 1)),
            lambda: os.truncate(mnt / "f", 0),
            lambda: os.setxattr(mnt / "f", "user.x", b"1"),
            lambda: os.mkfifo(mnt / "fifo"),
        ]
        for i, fn in enumerate(attempts):
            with pytest.raises(OSError) as ei:
                fn()
            assert ei.value.errno == errno.EROFS, (i, ei.value)
        st = os.statvfs(mnt)
        assert st.f_flag & os.ST_RDONLY
    finally:
        m.stop()
    assert tree_state([m_ / "root" for m_ in ms]) == before
    m.check_log()
