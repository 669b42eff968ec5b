"""Smoke: a RAID0 array mounts, stores a file across members, unmounts."""
import os


def test_write_read_striped(mounted_array):
    a = mounted_array
    data = os.urandom(300 * 1024)
    p = a.mnt / "f"
    p.write_bytes(data)
    assert p.read_bytes() == data
    sizes = [os.path.getsize(m / "root" / "f") for m in a.members]
    assert sum(sizes) == len(data)
    assert all(s > 0 for s in sizes)
