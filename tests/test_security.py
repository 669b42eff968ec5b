"""No way around the mount (DESIGN §11): the member directories and the SSD
tier are root's alone, the records tierfs keeps on member files are in a
namespace only root may write, a file whose identity another file claims
is refused, one damaged name on a member does not fail the member, the
status names paths to root only, and an array made before all this
(superblock version 2) is upgraded in place at mount.

Users are two unprivileged uids without passwd entries (as_user forks and
drops to them)."""
import errno
import os
import pathlib
import subprocess
import time

import pytest

from conftest import FID_XATTR, MKFS, Mount, mkfs, run
from test_posix import as_user, jout
from test_cache import flush
from test_raid import status, tierctl, wait_idle

ALICE, BOB = 60001, 60002      # the victim and the one who tries
DATA = pathlib.Path(__file__).resolve().parent / "data"
STATUS = "user.tierfs.status"


def mode_owner(p):
    st = os.stat(p)
    return st.st_mode & 0o7777, st.st_uid, st.st_gid


# A user starts in a directory root chose (the test's tmp directory is
# root's, 0700) and names everything relative to it: what he can reach from
# there is what the permissions below it give him.

def user(uid, cwd, fn):
    return as_user(fn, str(cwd), uid=uid, gid=uid)


def write_as(uid, path, data, mode=0o600):
    def fn():
        fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        return True
    return user(uid, path.parent, fn)


def read_as(uid, path):
    def fn():
        with open(path.name, "rb") as f:
            return f.read().decode("latin1")
    r = user(uid, path.parent, fn)
    return r if isinstance(r, tuple) else r.encode("latin1")


# ---------------------------------------------------------------- members are root's

def test_mkfs_makes_every_member_root_only(tmp_path):
    ms = [tmp_path / f"m{i}" for i in range(3)]
    for m in ms:
        m.mkdir()
        os.chown(m, ALICE, ALICE)
        os.chmod(m, 0o777)
    mkfs(ms, "raid5")
    for m in ms:
        assert mode_owner(m) == (0o700, 0, 0), m
        # and so nothing below is reachable, whatever its own mode
        assert user(ALICE, tmp_path, lambda: os.listdir(f"{m.name}/root")) == \
            ("err", "EACCES")


def test_mount_repairs_a_member_and_a_cache_open_to_users(make_array, tmp_path):
    """A member or cache directory a user can enter is made root's with a
    warning; a 1777 mount root then no longer gives users a writable tree
    on the members (it did: MEMBER/root copies the mount root's mode)."""
    a = make_array("raid1", 2)
    cdir = tmp_path / "ssd"
    cdir.mkdir(mode=0o755)
    os.chown(cdir, BOB, BOB)
    for m in a.members:
        os.chmod(m, 0o755)
    os.chown(a.members[1], BOB, BOB)
    m = a.mount([f"cache={cdir}", "cache_size=8M", "allow_other"])
    os.chmod(a.mnt, 0o1777)
    log = m.log()
    for d in [*a.members, cdir]:
        assert mode_owner(d) == (0o700, 0, 0), d
        assert f"{os.path.realpath(d)} was open to other users" in log, log
    assert "owner uid 60002, mode 0755" in log
    for mem in a.members:
        assert mode_owner(mem / "root")[0] == 0o1777     # the tree copies the mount's
        r = user(BOB, a.tmp, lambda: open(f"{mem.name}/root/bob", "w").close())
        assert r == ("err", "EACCES"), r
    r = user(BOB, tmp_path, lambda: os.listdir("ssd"))
    assert r == ("err", "EACCES"), r
    # through the mount the sticky world-writable root works as on ext4
    assert write_as(BOB, a.mnt / "bob", b"mine") is True
    assert read_as(BOB, a.mnt / "bob") == b"mine"


def test_a_refused_mount_leaves_the_members_as_they_were(make_array, tmp_path):
    """The repair comes after every check: a mount refused for another
    reason (here a directory that is no member) changes no member's mode."""
    a = make_array("raid1", 2)
    os.chmod(a.members[0], 0o755)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    m = Mount([a.members[0], stranger], tmp_path / "mnt")
    try:
        with pytest.raises(RuntimeError):
            m.start()
    finally:
        m.stop()
    assert "not a tierfs member" in m.log(), m.log()
    assert mode_owner(a.members[0]) == (0o755, 0, 0)


@pytest.mark.parametrize("how", ["owner", "group-writable", "world-writable"])
def test_a_member_a_user_could_swap_is_refused(tmp_path, how):
    """A directory above a member that a user can rename entries in lets
    him put his own member in its place: mkfs and mount refuse it (exit 1,
    one line naming the directory), and touch nothing."""
    top = tmp_path / "shared"
    top.mkdir()
    ms = [top / "m0", top / "m1"]
    for m in ms:
        m.mkdir()
    mkfs(ms, "raid1")
    sb = (ms[0] / ".tierfs" / "superblock").read_bytes()
    if how == "owner":
        os.chown(top, BOB, BOB)
    elif how == "group-writable":
        os.chown(top, 0, BOB)
        os.chmod(top, 0o775)
    else:
        os.chmod(top, 0o777)
    mnt = tmp_path / "mnt"
    m = Mount(ms, mnt)
    try:
        with pytest.raises(RuntimeError) as e:
            m.start()
    finally:
        m.stop()
    assert "tierfs exited 1:" in str(e.value), e.value
    lines = m.log().strip().splitlines()
    assert len(lines) == 1 and f"directory {top} " in lines[0] and "rename" in lines[0], \
        m.log()
    assert (ms[0] / ".tierfs" / "superblock").read_bytes() == sb
    others = [top / "n0", top / "n1"]
    for d in others:
        d.mkdir()
    r = run(MKFS, "--level", "raid1", *others, check=False)
    assert r.returncode == 1 and f"directory {top} " in r.stderr, r
    assert os.listdir(others[0]) == []
    # a sticky world-writable parent (/tmp) is safe: nobody renames root's name
    os.chown(top, 0, 0)
    os.chmod(top, 0o1777)
    m = Mount(ms, mnt)
    try:
        m.start()
    finally:
        m.stop()
    m.check_log()


# ---------------------------------------------------------------- the identity is root's

def test_a_user_cannot_forge_a_file_identity(make_array, tmp_path):
    """The measured attack: Bob set the fid of his member files to the fid
    of Alice's cached 0600 file, and read her data through his file.  The
    identity is in trusted.* now: even with the member open to him (a
    mistake the mount repairs), Bob cannot set it; the old name he can set
    is ignored."""
    a = make_array("raid1", 2)
    cdir = tmp_path / "ssd"
    m = a.mount([f"cache={cdir}", "cache_size=8M", "cache_mode=writeback", "allow_other"])
    os.chmod(a.mnt, 0o1777)
    secret = b"alice's secret " * 100
    assert write_as(ALICE, a.mnt / "alice", secret) is True
    assert write_as(BOB, a.mnt / "bob", b"b" * len(secret)) is True
    her_fid = os.getxattr(a.members[0] / "root" / "alice", FID_XATTR)
    m.stop()
    # the mistake: members and the tree open to Bob, his member files his
    for mem in a.members:
        os.chmod(mem, 0o755)

    def forge():
        out = []
        for mem in a.members:
            p = f"{mem.name}/root/bob"
            out.append(jout(os.setxattr, p, FID_XATTR, her_fid))
            out.append(jout(os.setxattr, p, "user.tierfs.fid", her_fid))
        return out
    res = user(BOB, a.tmp, forge)
    assert res == [["err", "EPERM"], ["ok", None]] * 2, res
    m.start()
    assert read_as(BOB, a.mnt / "bob") == b"b" * len(secret)
    assert read_as(ALICE, a.mnt / "alice") == secret
    assert os.getxattr(a.members[0] / "root" / "bob", FID_XATTR) != her_fid


def copy_identity(a, src, dst):
    """What root's cp -a or a restore from backup can do: give dst the
    identity of src on every member."""
    for mem in a.members:
        os.setxattr(mem / "root" / dst, FID_XATTR,
                    os.getxattr(mem / "root" / src, FID_XATTR))


def test_two_files_with_one_identity(make_array, tmp_path):
    """Two files whose member files carry one identity are both refused
    (EUCLEAN, as ext4 refuses a damaged inode: which is the original cannot
    be told) and named in the log; both can be listed, and once one is
    removed the other is reached again, with its data in the tier intact.
    Before, the second read and wrote the first one's cached data."""
    a = make_array("raid5", 3, "16K")
    cdir = tmp_path / "ssd"
    opts = [f"cache={cdir}", "cache_size=8M", "cache_mode=writeback"]
    m = a.mount(opts, expect_errors=True)
    (a.mnt / "a").write_bytes(b"A" * 50000)
    (a.mnt / "b").write_bytes(b"B" * 50000)
    flush(a.mnt)                                   # the sizes are on the members
    with open(a.mnt / "a", "r+b") as f:            # and this only in the tier
        f.write(b"new")
    m.stop()
    copy_identity(a, "a", "b")
    m.start()
    # both are listed (b's member files are read by a's rotation now: its
    # size is whatever that makes of them)
    assert os.stat(a.mnt / "a").st_size == 50000 and os.stat(a.mnt / "b").st_size > 0
    for n in ["a", "b"]:
        with pytest.raises(OSError) as e:
            (a.mnt / n).read_bytes()
        assert e.value.errno == errno.EUCLEAN, n
        with pytest.raises(OSError) as e:
            os.truncate(a.mnt / n, 0)
        assert e.value.errno == errno.EUCLEAN, n
    log = m.log()
    assert ("file 'b' has identity" in log and "which file 'a' has too" in log) or \
        ("file 'a' has identity" in log and "which file 'b' has too" in log), log
    os.unlink(a.mnt / "b")
    deadline = time.time() + 10
    while True:       # until the kernel forgets b (its inode keeps the claim)
        try:
            got = (a.mnt / "a").read_bytes()
            break
        except OSError as e:
            assert e.errno == errno.EUCLEAN and time.time() < deadline
            time.sleep(0.05)
    assert got == b"new" + b"A" * 49997
    # and its dirty bytes reach its members: the flusher let go of b (it
    # had bound them to whichever file the restart walk met first)
    flush(a.mnt, timeout=20)
    m.stop()
    m.start()
    assert (a.mnt / "a").read_bytes() == b"new" + b"A" * 49997


def test_scrub_lists_two_files_with_one_identity(make_array):
    """Scrub finds the second file even when the first is not in the inode
    table any more (it keeps the identities it has seen), and goes on."""
    a = make_array("raid5", 3, "16K")
    m = a.mount(expect_errors=True)
    for n in ["x", "y", "z"]:
        (a.mnt / n).write_bytes(n.encode() * 40000)
    m.stop()
    copy_identity(a, "x", "z")
    m.start()
    tierctl("scrub", a.mnt)
    st = wait_idle(a.mnt)
    raw = tierctl("status", a.mnt, "--raw").stdout
    damaged = [l for l in raw.splitlines() if l.startswith("mismatch=") and "damaged" in l]
    assert len(damaged) == 1 and "another file has its identity" in damaged[0], raw
    assert damaged[0].split("=", 1)[1].split(" ")[0] in ("x", "z"), damaged
    assert st["last"].startswith("check done"), st
    assert (a.mnt / "y").read_bytes() == b"y" * 40000


# ---------------------------------------------------------------- damage to one name

@pytest.mark.parametrize("swap", ["symlink", "file"])
def test_a_misnamed_directory_on_a_member_does_not_fail_it(make_array, tmp_path, swap):
    """A directory on one member swapped for a symlink (or a file): the
    requests that need it fail with EUCLEAN and the log names the member,
    but the member stays in the array (it was failed: 'Too many levels of
    symbolic links; the array is DEGRADED'), and scrub lists the names."""
    a = make_array("raid5", 3, "16K")
    m = a.mount(expect_errors=True)
    os.mkdir(a.mnt / "d")
    (a.mnt / "d" / "f").write_bytes(b"f" * 40000)
    (a.mnt / "ok").write_bytes(b"o" * 40000)
    m.stop()
    d1 = a.members[1] / "root" / "d"
    os.rename(d1, a.members[1] / "root" / ".d.real")
    if swap == "symlink":
        os.symlink("/etc", d1)
    else:
        d1.write_bytes(b"")
    m.start()
    with pytest.raises(OSError) as e:
        (a.mnt / "d" / "f").read_bytes()
    assert e.value.errno == errno.EUCLEAN
    st = status(a.mnt)
    assert st["state"] == "UUU" and st["health"] == "optimal", st
    assert "member 1 (" in m.log() and "not what the array expects" in m.log()
    assert (a.mnt / "ok").read_bytes() == b"o" * 40000
    tierctl("scrub", a.mnt)
    st = wait_idle(a.mnt)
    raw = tierctl("status", a.mnt, "--raw").stdout
    assert any(l.startswith("mismatch=d") and "damaged" in l for l in raw.splitlines()), raw
    assert st["last"].startswith("check done"), st
    assert status(a.mnt)["state"] == "UUU"


# ---------------------------------------------------------------- the status

def test_the_status_shows_paths_to_root_only(make_array, tmp_path):
    a = make_array("raid1", 2)
    cdir = tmp_path / "ssd"
    a.mount([f"cache={cdir}", "cache_size=8M", "allow_other"])
    raw_root = os.getxattr(a.mnt, STATUS).decode()
    r = user(BOB, a.mnt, lambda: os.getxattr(".", STATUS).decode())
    assert isinstance(r, str), r
    for p in [*a.members, cdir]:
        assert os.path.realpath(p) in raw_root
        assert os.path.realpath(p) not in r and str(tmp_path) not in r, r
    mine = dict(l.split("=", 1) for l in r.splitlines())
    assert mine["member.0"] == "in_sync -" and mine["cache"] == "-", mine
    assert mine["cache.read_hits"].isdigit() and mine["state"] == "UU"   # counters stay public


def test_trusted_xattrs_are_listed_to_root_only(make_array, tmp_path):
    """As on ext4: root's trusted.* names are not in a user's listxattr
    (they were, through the mount).  tierfs's own user.tierfs.* names
    (test_attrs.py) are listed to both alike and left out here."""
    def lst(p):
        return sorted(n for n in os.listxattr(p) if not n.startswith("user.tierfs."))
    a = make_array("raid1", 2)
    a.mount(["allow_other"])
    host = tmp_path / "host"
    host.mkdir()
    got = {}
    for d in [host, a.mnt]:
        (d / "f").write_bytes(b"x")
        os.chmod(d / "f", 0o644)
        os.setxattr(d / "f", "trusted.root", b"1")
        os.setxattr(d / "f", "user.all", b"2")
        got[d] = (lst(d / "f"), user(BOB, d, lambda: lst("f")),
                  user(BOB, d, lambda: jout(os.getxattr, "f", "trusted.root")))
    assert got[a.mnt] == got[host], got
    assert got[host][1] == ["user.all"] and "trusted.root" in got[host][0]
    ours = [n for n in os.listxattr(a.mnt / "f") if n.startswith("user.tierfs.")]
    assert ours and user(BOB, a.mnt, lambda: [n for n in os.listxattr("f")
                                              if n.startswith("user.tierfs.")]) == ours


# ---------------------------------------------------------------- upgrade in place

def files_of(mnt):
    """What tests/data/make_v2_arrays.py wrote."""
    want = {f"dir/f{i}": bytes([i + 65]) * (70000 + i * 12345) for i in range(5)}
    want["dir/sub/big"] = bytes(range(256)) * 4000
    want["empty"] = b""
    got = {k: (pathlib.Path(mnt) / k).read_bytes() for k in want}
    assert got == want
    assert os.readlink(pathlib.Path(mnt) / "link") == "dir/f1"
    assert os.getxattr(pathlib.Path(mnt) / "dir" / "f0", "user.mine") == b"hello"
    st = os.stat(pathlib.Path(mnt) / "dir" / "f2")
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, 60001)


def unpack(tmp_path):
    # tar(1), not tarfile: the records are xattrs
    subprocess.run(["tar", "--xattrs", "--xattrs-include=*", "--numeric-owner", "-xJf",
                    str(DATA / "v2-arrays.tar.xz"), "-C", str(tmp_path)], check=True)


def member_records(members):
    """{(member, path): {name: value}} of tierfs's records on every object."""
    out = {}
    for mem in members:
        root = pathlib.Path(mem) / "root"
        for d, dirs, files in os.walk(root):
            for n in [*dirs, *files]:
                p = os.path.join(d, n)
                if os.path.islink(p):
                    continue
                out[(str(mem), os.path.relpath(p, root))] = {
                    k: os.getxattr(p, k) for k in os.listxattr(p) if ".tierfs." in k}
    return out


@pytest.mark.parametrize("crash", [None, "crash_after=setxattr:7", "crash_after=removexattr:7",
                                   "drop_unsynced,cut_after=1", "drop_unsynced,cut_after=3",
                                   "drop_unsynced,cut_after=9"])
def test_an_array_made_before_is_upgraded_in_place(tmp_path, crash):
    """tests/data/v2-arrays.tar.xz: a RAID5 x3 array and a RAID1 x2 array with
    a write-back tier holding fsynced dirty data (its daemon was killed),
    both made by mkfs.tierfs and tierfs at b509be9 (superblock version 2,
    records in user.tierfs.*).  The mount moves every record to trusted.*
    and writes version 3; a daemon killed in the middle of it, or a power
    cut at its 1st, 3rd or 9th noted operation (crash=),
    leaves an array the next mount finishes, with nothing lost.  The 9th
    noted operation is a superblock write after the first member's: the cut
    leaves version 3 on member 0 only, and the next mount must take the
    oldest version (super.c invariant 5) to finish."""
    unpack(tmp_path)
    r5 = [tmp_path / "r5" / f"m{i}" for i in range(3)]
    r1 = [tmp_path / "r1c" / f"m{i}" for i in range(2)]
    before = member_records(r5 + r1)
    assert before and all(set(v) <= {"user.tierfs.fid", "user.tierfs.size"}
                          for v in before.values())
    for members, opts in [(r5, []), (r1, [f"cache={tmp_path / 'r1c' / 'cache'}",
                                          "cache_mode=writeback"])]:
        mnt = tmp_path / f"mnt{len(members)}"
        if crash:
            m = Mount(members, mnt, opts, env={"TIERFS_FAULT": crash}, expect_errors=True)
            try:
                with pytest.raises(RuntimeError):
                    m.start()
            finally:        # a daemon that did not die must not outlive the test
                m.stop()
            assert "upgrading from superblock version 2 to 3" in m.log()
            assert "upgraded to" not in m.log()
        m = Mount(members, mnt, opts)
        try:
            m.start()
            assert "upgraded to superblock version 3" in m.log(), m.log()
            files_of(mnt)
            if len(members) == 2:
                assert (mnt / "dirty").read_bytes() == b"D" * 200000
            m.stop()
            m.start()
            assert m.log().count("upgraded to superblock") == 1
            files_of(mnt)
        finally:
            m.stop()
        m.check_log()
        for mem in members:
            sb = (mem / ".tierfs" / "superblock").read_text()
            assert sb.startswith("tierfs-superblock 3\n"), sb
    after = member_records(r5 + r1)
    moved = {k: {n.replace("user.tierfs.", "trusted.tierfs."): v for n, v in rec.items()}
             for k, rec in before.items()}
    # every record moved, value for value; none left under the old names
    # (the dirty file's records were made since, on the new names)
    for k, rec in moved.items():
        assert after[k] == rec or (k[1] == "dirty" and FID_XATTR in after[k]), (k, after[k])
    assert not [k for k, rec in after.items() if any(n.startswith("user.") for n in rec)]


def test_a_read_only_mount_of_an_old_array_is_refused(tmp_path):
    unpack(tmp_path)
    r5 = [tmp_path / "r5" / f"m{i}" for i in range(3)]
    m = Mount(r5, tmp_path / "mnt", ["ro"])
    try:
        with pytest.raises(RuntimeError) as e:
            m.start()
    finally:
        m.stop()
    assert "tierfs exited 1:" in str(e.value) and \
        "mount it read-write once to upgrade it" in m.log(), m.log()
    assert (r5[0] / ".tierfs" / "superblock").read_text().startswith("tierfs-superblock 2")
    assert os.getxattr(r5[0] / "root" / "dir" / "f0", "user.tierfs.fid")
