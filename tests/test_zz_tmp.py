import os, random
from test_cache import K, M, copts, cst
from test_attrs import put

def test_probe(make_array, tmp_path):
    a = make_array("raid5", 4, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="256K") + ["allow_other"])
    rng = random.Random(1)
    put(a.mnt, "reset")
    for i in range(20):
        p = a.mnt / f"m{i}"
        data = rng.randbytes(11447)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(p, a.mnt / f"n{i}")
        os.rename(a.mnt / f"n{i}", p)
    s0 = cst(a.mnt)
    for i in range(20):
        p = a.mnt / f"m{i}"
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert len(os.read(fd, 65536)) == 11447
        os.close(fd)
    s = cst(a.mnt)
    print({k: (s0[k], s[k]) for k in ["read_hits", "read_misses", "write_hits", "write_misses", "read_req_hits", "read_req_misses", "full_bypass", "fills"]})
