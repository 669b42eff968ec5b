"""How a mounted array looks to the administrator's tools: the source df,
findmnt and /proc/mounts show (fsname=, default tierfs:UUID)."""
import os
import subprocess

from conftest import mounted


def mount_line(mnt):
    """The /proc/mounts fields of mnt: (source, type, options)."""
    mnt = os.path.realpath(mnt)
    for line in open("/proc/mounts"):
        f = line.split()
        if f[1] == mnt:
            return f[0], f[2], f[3].split(",")
    raise AssertionError(f"{mnt} is not mounted")


def uuid_of(member):
    for line in open(os.path.join(member, ".tierfs", "superblock")):
        if line.startswith("uuid="):
            return line.strip().split("=", 1)[1]
    raise KeyError("uuid")


def sources(mnt):
    """The source as df, findmnt and /proc/mounts give it."""
    df = subprocess.run(["df", "--output=source", str(mnt)], check=True, capture_output=True,
                        text=True).stdout.split("\n")[1].strip()
    fm = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "--mountpoint", str(mnt)],
                        check=True, capture_output=True, text=True).stdout.strip()
    return df, fm, mount_line(mnt)[0]


# ---------------------------------------------------------------- fsname

def test_default_fsname_is_the_uuid(make_array):
    """Without fsname= the source is tierfs:UUID, whatever the member order
    (it was the member list: df lines of hundreds of characters)."""
    a = make_array("raid1", 3, "64K")
    want = "tierfs:" + uuid_of(a.members[0])
    m = a.mount()
    assert sources(a.mnt) == (want, want, want)
    m.stop()
    a.members.reverse()
    m = a.mount()
    assert sources(a.mnt) == (want, want, want)
    m.stop()


def test_fsname_given_wins(make_array):
    a = make_array("raid0", 2, "64K")
    a.mount(opts=["fsname=bulk-array"])
    assert sources(a.mnt) == ("bulk-array",) * 3
    assert mounted(a.mnt)
