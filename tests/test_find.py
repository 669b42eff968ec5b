"""An array mounted by its UUID (array/find.c): "tierfs:UUID" (or
"UUID=UUID") as the source, its members found in the directories that
-o search= or the search lines of a configuration file name, in member
order whatever order the directories come in; a missing member leaves the
array degraded, two directories claiming one member are refused, and
nowhere to look says how to say where."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import TIERFS, Mount, mkfs, mounted


@pytest.fixture
def array(tmp_path):
    """A RAID5 x3 whose members are /disks/dN/tierfs, made in the order
    d2, d0, d1 so that the glob's order is not the members' order."""
    disks = tmp_path / "disks"
    members = [disks / f"d{i}" / "tierfs" for i in (2, 0, 1)]
    for m in members:
        m.mkdir(parents=True)
    out = mkfs(members, "raid5", "64K").stdout
    uuid = re.search(r"array ([0-9a-f-]{36})", out).group(1)
    mounts = []
    yield tmp_path, uuid, members, mounts
    for m in mounts:
        m.stop()


def mount(tmp_path, mounts, source, opts, expect_errors=False):
    m = Mount([source], tmp_path / f"mnt{len(mounts)}", opts, expect_errors=expect_errors)
    mounts.append(m)
    return m.start()


def refusal(tmp_path, source, *opts):
    mnt = tmp_path / "refused"
    mnt.mkdir(exist_ok=True)
    args = [str(TIERFS), "-f", source, str(mnt)]
    for o in opts:
        args += ["-o", o]
    r = subprocess.run(args, capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and not mounted(mnt), r
    return r.stderr


def test_mount_by_uuid_with_search(array):
    tmp, uuid, members, mounts = array
    m = mount(tmp, mounts, f"tierfs:{uuid}", [f"search={tmp}/disks/*/tierfs"])
    data = os.urandom(300000)
    (tmp / "mnt0" / "f").write_bytes(data)
    st = dict(l.split("=", 1) for l in
              os.getxattr(str(tmp / "mnt0"), "user.tierfs.status").decode().splitlines())
    assert st["state"] == "UUU" and st["uuid"] == uuid
    # member N is the directory mkfs was given N-th, whatever the glob's order
    for i, d in enumerate(members):
        assert st[f"member.{i}"] == f"in_sync {d}", st
    assert f"tierfs:{uuid}" in open("/proc/self/mounts").read()
    assert "members " in m.log()
    m.stop()
    # the same with UUID=, and the search lines of a configuration file
    conf = tmp / "tierfs.conf"
    conf.write_text(f"# where the disks are\nsearch {tmp}/nothing/*\n"
                    f"search {tmp}/disks/d[01]/tierfs   # two of them\n"
                    f"search {tmp}/disks/d2/tierfs\n")
    mount(tmp, mounts, f"UUID={uuid}", [f"conf={conf}"])
    assert (tmp / "mnt1" / "f").read_bytes() == data


def test_a_member_not_found_leaves_the_array_degraded(array):
    tmp, uuid, members, mounts = array
    mount(tmp, mounts, f"tierfs:{uuid}", [f"search={tmp}/disks/*/tierfs"])
    (tmp / "mnt0" / "f").write_bytes(b"x" * 200000)
    mounts[0].stop()
    m = mount(tmp, mounts, f"tierfs:{uuid}", [f"search={tmp}/disks/d[02]/tierfs"],
              expect_errors=True)
    assert (tmp / "mnt1" / "f").read_bytes() == b"x" * 200000
    st = os.getxattr(str(tmp / "mnt1"), "user.tierfs.status").decode()
    assert "health=degraded" in st and "DEGRADED" in m.log()


def test_refusals_say_why(array):
    tmp, uuid, members, mounts = array
    err = refusal(tmp, f"tierfs:{uuid}")
    assert "search=" in err and "/etc/tierfs.conf" in err, err
    err = refusal(tmp, f"tierfs:{uuid}", f"search={tmp}/none/*")
    assert f"array {uuid}: no member found in {tmp}/none/*" in err, err
    # a copy of a member: two directories say they are member 0
    shutil.copytree(members[0], tmp / "disks" / "copy", symlinks=True)
    err = refusal(tmp, f"tierfs:{uuid}", f"search={tmp}/disks/*/tierfs:{tmp}/disks/copy")
    assert "both say they are member 0" in err and "name the members" in err, err
    # not a UUID: a member list as before (a directory named so)
    err = refusal(tmp, "tierfs:not-a-uuid", f"search={tmp}/disks/*/tierfs")
    assert "search" not in err, err
