"""Crash consistency of namespace changes: the daemon is killed (SIGKILL,
by the fault-injection backend) after a change reached only some members;
the next mount must finish the change so every member agrees with member 0
and the change is visible through the mount, data intact."""
import ctypes
import errno
import os
import stat

import pytest

from conftest import FID_XATTR, Mount

libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2


def tree(member):
    """Everything a member says about the namespace, except data sizes."""
    out = {}
    root = os.path.join(member, "root")
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            fid = None
            target = None
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(p)
            elif stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
                try:
                    fid = os.getxattr(p, FID_XATTR, follow_symlinks=False)
                except OSError as e:   # a crash may leave it unset on a member
                    assert e.errno == errno.ENODATA
                    fid = "missing"
            xattrs = {} if stat.S_ISLNK(st.st_mode) else {
                k: os.getxattr(p, k, follow_symlinks=False)
                for k in os.listxattr(p, follow_symlinks=False)}
            out[rel] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid,
                        st.st_gid, target, fid, st.st_nlink, tuple(sorted(xattrs.items())))
    return out


def sizes(member):
    root = os.path.join(member, "root")
    return {os.path.relpath(os.path.join(d, f), root): os.lstat(os.path.join(d, f)).st_size
            for d, _, files in os.walk(root) for f in files}


def assert_members_agree(array):
    ref = tree(array.members[0])
    for m in array.members[1:]:
        assert tree(m) == ref, f"member {m} differs from member 0"


def prepare(mnt):
    os.mkdir(mnt / "d1")
    os.mkdir(mnt / "d2")
    os.mkdir(mnt / "empty")
    (mnt / "d1" / "f").write_bytes(os.urandom(200_000))
    (mnt / "d2" / "victim").write_bytes(b"old" * 1000)
    (mnt / "d2" / "other").write_bytes(b"other" * 1000)


def rename_exchange(a, b):
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), RENAME_EXCHANGE):
        raise OSError(ctypes.get_errno(), "renameat2")


# (name, member call to crash after, operation, check after recovery)
CASES = [
    ("create", "openat", lambda m: open(m / "d1" / "new", "w").close(),
     lambda m, d: (m / "d1" / "new").exists()),
    ("mkdir", "mkdirat", lambda m: os.mkdir(m / "d1" / "sub"),
     lambda m, d: (m / "d1" / "sub").is_dir()),
    ("symlink", "symlinkat", lambda m: os.symlink("../d2/other", m / "d1" / "ln"),
     lambda m, d: os.readlink(m / "d1" / "ln") == "../d2/other"),
    ("mkfifo", "mknodat", lambda m: os.mkfifo(m / "d1" / "fifo"),
     lambda m, d: stat.S_ISFIFO(os.lstat(m / "d1" / "fifo").st_mode)),
    ("unlink", "unlinkat", lambda m: os.unlink(m / "d2" / "victim"),
     lambda m, d: not (m / "d2" / "victim").exists()),
    ("rmdir", "unlinkat", lambda m: os.rmdir(m / "empty"),
     lambda m, d: not (m / "empty").exists()),
    ("rename", "renameat2", lambda m: os.rename(m / "d1" / "f", m / "d2" / "g"),
     lambda m, d: (m / "d2" / "g").read_bytes() == d and not (m / "d1" / "f").exists()),
    ("rename-overwrite", "renameat2", lambda m: os.rename(m / "d1" / "f", m / "d2" / "victim"),
     lambda m, d: (m / "d2" / "victim").read_bytes() == d),
    ("rename-dir", "renameat2", lambda m: os.rename(m / "d1", m / "d2" / "moved"),
     lambda m, d: (m / "d2" / "moved" / "f").read_bytes() == d),
    ("exchange", "renameat2", lambda m: rename_exchange(m / "d1" / "f", m / "d2" / "other"),
     lambda m, d: (m / "d2" / "other").read_bytes() == d
     and (m / "d1" / "f").read_bytes() == b"other" * 1000),
    ("link", "linkat", lambda m: os.link(m / "d1" / "f", m / "d2" / "hard"),
     lambda m, d: os.stat(m / "d2" / "hard").st_ino == os.stat(m / "d1" / "f").st_ino
     and (m / "d2" / "hard").read_bytes() == d),
    ("truncate", "ftruncate", lambda m: os.truncate(m / "d1" / "f", 5000),
     lambda m, d: (m / "d1" / "f").read_bytes() == d[:5000]),
    ("chmod", "fchmodat", lambda m: os.chmod(m / "d1" / "f", 0o640),
     lambda m, d: stat.S_IMODE(os.stat(m / "d1" / "f").st_mode) == 0o640),
    ("setxattr", "setxattr", lambda m: os.setxattr(m / "d1" / "f", "user.k", b"v"),
     lambda m, d: os.getxattr(m / "d1" / "f", "user.k") == b"v"),
]


def die_midway(a, fault, op):
    """Prepare array a, then run op on a mount whose daemon dies as
    TIERFS_FAULT=fault says (after the change reached member 0 and member 1
    only); returns the prepared file's bytes."""
    m = a.mount()
    prepare(a.mnt)
    data = (a.mnt / "d1" / "f").read_bytes()
    m.stop()
    dying = Mount(a.members, a.mnt, env={"TIERFS_FAULT": fault}, expect_errors=True)
    a.mounts.append(dying)
    dying.start()
    with pytest.raises(OSError) as e:
        op(a.mnt)
    assert e.value.errno in (errno.ECONNABORTED, errno.ENOTCONN)
    dying.wait_dead()
    return data


@pytest.mark.parametrize("level,n", [("raid0", 4), ("raid1", 3)])
@pytest.mark.parametrize("name,call,op,check", CASES, ids=[c[0] for c in CASES])
def test_crash_midway_is_finished_on_remount(make_array, level, n, name, call, op, check):
    a = make_array(level, n, "4K")
    data = die_midway(a, f"crash_after={call}:2", op)

    # the members disagree now; the next mount repairs them
    before = [tree(x) for x in a.members]
    sizes_before = [sizes(x) for x in a.members]
    if name == "truncate":
        pass   # names agree; only sizes tell, checked after recovery
    else:
        assert any(t != before[0] for t in before[1:]), "the crash left nothing to repair"
    m2 = a.mount()
    assert "recovery:" in m2.log()
    assert check(a.mnt, data)
    m2.stop()
    assert_members_agree(a)
    if name == "truncate":
        assert [sizes(x) for x in a.members] != sizes_before, "recovery truncated nothing"


def test_clean_mount_has_nothing_to_recover(make_array):
    a = make_array("raid0", 3, "4K")
    m = a.mount()
    prepare(a.mnt)
    os.rename(a.mnt / "d1" / "f", a.mnt / "d2" / "g")
    m.stop()
    m2 = a.mount()
    assert "recovery:" not in m2.log()
    m2.stop()
    assert_members_agree(a)


def status(mnt):
    return dict(l.split("=", 1) for l in
                os.getxattr(str(mnt), "user.tierfs.status").decode().splitlines() if "=" in l)


@pytest.mark.parametrize("level,n", [("raid5", 3), ("raid6", 4)])
def test_kill_inside_a_truncate_leaves_parity_right(make_array, level, n):
    """replay.c invariant 5: killed after a truncate's intent and before
    its zeroing of the new last row took a write-intent mark, the members
    were untouched; the mount replayed the truncate by cutting them, and
    the row's parity still covered the bytes cut (scrub: 1 mismatch).  The
    kill lands while the truncate opens the member files (delayed)."""
    import threading
    import time
    from test_powercut import scrub
    a = make_array(level, n, "16K")
    m = a.mount(env={"TIERFS_FAULT": "delay=openat:400"}, expect_errors=True)
    data = os.urandom(96 * 1024)
    with open(a.mnt / "f", "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    deadline = time.time() + 20             # the write's marks cleaned: none covers the row
    while status(a.mnt).get("marks") != "0" and time.time() < deadline:
        time.sleep(0.1)
    assert status(a.mnt).get("marks") == "0"
    errs = []
    t = threading.Thread(target=lambda: errs.append(guarded(os.truncate, a.mnt / "f", 20 * 1024)))
    t.start()
    time.sleep(0.2)                         # inside the first member openat
    m.proc.kill()
    m.wait_dead()
    t.join()
    assert errs and errs[0] in (errno.ECONNABORTED, errno.ENOTCONN), errs
    m2 = a.mount()
    assert "recovery: intent" in m2.log()
    got = (a.mnt / "f").read_bytes()
    assert got == data[:20 * 1024], f"{len(got)} bytes"
    last = scrub(a.mnt)
    assert "done: ok" in last and " 0 mismatches" in last, last
    m2.stop()


def guarded(fn, *args):
    try:
        fn(*args)
        return 0
    except OSError as e:
        return e.errno


@pytest.mark.parametrize("level,n", [("raid1", 3), ("raid5", 4)])
@pytest.mark.parametrize("name,call,op,check", [c for c in CASES if c[0] != "truncate"],
                         ids=[c[0] for c in CASES if c[0] != "truncate"])
def test_finished_change_replayed_after_a_kill_is_a_no_op(make_array, level, n, name, call, op,
                                                          check):
    """meta.c invariant 7: a finished change's intent is only retired (the
    next journal transaction deletes it), so a daemon killed right after it
    leaves the intent to the next mount, which replays a change every
    member already has.  That must change nothing: the change stays
    visible, the data intact, the members' trees equal.  (A truncate's
    intent is deleted at once, so it has no case here.)"""
    a = make_array(level, n, "4K")
    m = a.mount(expect_errors=True)
    prepare(a.mnt)
    data = (a.mnt / "d1" / "f").read_bytes()
    op(a.mnt)
    m.proc.kill()                   # no journal transaction after the change
    m.wait_dead()
    m2 = a.mount()
    assert "recovery:" in m2.log(), "no intent was left to replay"
    assert check(a.mnt, data)
    m2.stop()
    assert_members_agree(a)


@pytest.mark.parametrize("name,call,op,check", [c for c in CASES if c[0] != "truncate"],
                         ids=[c[0] for c in CASES if c[0] != "truncate"])
def test_power_cut_midway_is_finished_on_remount(make_array, name, call, op, check):
    """meta.c invariant 2: a change's intent is durable before any member
    sees the change.  The power is cut after the change reached members 0
    and 1 of 3, every unsynced block lost (the journal's too; the members'
    namespace changes are kept, as after their filesystems committed their
    own journals).  The next mount must find the intent and finish the
    change, as after a kill.  With the intent's commit durable only up to
    its pages (its meta page unsynced), the cut lost the intent: member 0
    listed a name that member 2 could not open (ENOENT), nothing to
    replay (test_powercut's crash states, seen once in about 12 runs)."""
    a = make_array("raid1", 3, "4K")
    data = die_midway(a, f"drop_unsynced,crash_after={call}:2", op)
    assert "fault: power cut" in a.mounts[-1].log(), a.mounts[-1].log()[-2000:]

    before = [tree(x) for x in a.members]
    assert any(t != before[0] for t in before[1:]), "the cut left nothing to repair"
    m2 = a.mount()
    assert "recovery:" in m2.log(), "the cut lost the change's intent"
    assert check(a.mnt, data)
    m2.stop()
    assert_members_agree(a)
