"""meson install, then the three ways to mount an installed tierfs:
mount(8) with a fuse type, an fstab line, and the mount.tierfs helper.
Each mount must daemonize only once live, and the daemon must exit at
umount."""
import os
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, mkfs, mounted


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("destdir")
    subprocess.run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest)],
                   check=True, capture_output=True)
    prefix = dest / "usr" / "local"
    assert (prefix / "bin" / "tierfs").exists()
    assert (prefix / "sbin" / "mkfs.tierfs").exists()
    assert (prefix / "sbin" / "mount.tierfs").exists()
    # mount(8) runs it for type fuse.tierfs, before mount.fuse3
    assert os.readlink(prefix / "sbin" / "mount.fuse.tierfs") == "mount.tierfs"
    return prefix


def daemons_for(mnt):
    r = subprocess.run(["pgrep", "-f", f"tierfs.* {mnt}"], capture_output=True, text=True)
    return r.stdout.split()


@pytest.fixture
def array2(tmp_path):
    members = [tmp_path / "m0", tmp_path / "m1"]
    for m in members:
        m.mkdir()
    mkfs(members, "raid1")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    yield members, mnt
    if mounted(mnt):
        subprocess.run(["umount", str(mnt)], capture_output=True)
    if mounted(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


def umount_and_check(mnt):
    (mnt / "probe").write_text("x")
    assert (mnt / "probe").read_text() == "x"
    subprocess.run(["umount", str(mnt)], check=True)
    deadline = time.time() + 10
    while daemons_for(mnt) and time.time() < deadline:
        time.sleep(0.05)
    assert not daemons_for(mnt), "daemon still running after umount"


def test_mount_command(installed, array2):
    members, mnt = array2
    src = f"{installed}/bin/tierfs#{members[0]}:{members[1]}"
    subprocess.run(["mount", "-t", "fuse", src, str(mnt), "-o", "allow_other,noatime"],
                   check=True)
    assert mounted(mnt)   # live as soon as mount returns
    line = [l for l in open("/proc/mounts") if f" {mnt} " in l][0]
    assert " fuse.tierfs " in line and "allow_other" in line
    umount_and_check(mnt)


def test_fstab_line(installed, array2, tmp_path):
    members, mnt = array2
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{installed}/bin/tierfs#{members[0]}:{members[1]} {mnt} fuse "
                     "defaults,allow_other,nofail 0 0\n")
    subprocess.run(["mount", "--fstab", str(fstab), str(mnt)], check=True)
    assert mounted(mnt)
    umount_and_check(mnt)


def test_mount_helper(installed, array2):
    members, mnt = array2
    env = dict(os.environ, PATH=f"{installed}/bin:" + os.environ["PATH"])
    subprocess.run([f"{installed}/sbin/mount.tierfs", f"{members[0]}:{members[1]}", str(mnt),
                    "-o", "defaults,rw,noatime"], check=True, env=env)
    assert mounted(mnt)
    umount_and_check(mnt)
