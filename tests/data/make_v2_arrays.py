import os, subprocess, sys, time, signal
B = "/work/main/build"
def run(*a): return subprocess.run(list(a), check=True, capture_output=True, text=True)
def mount(members, mnt, opts=()):
    os.makedirs(mnt, exist_ok=True)
    args = [f"{B}/tierfs", "-f", ":".join(members), mnt]
    for o in opts: args += ["-o", o]
    p = subprocess.Popen(args, stderr=open(mnt + ".log", "w"))
    for _ in range(100):
        if any(l.split()[1] == os.path.realpath(mnt) for l in open("/proc/mounts")): return p
        time.sleep(0.1)
    raise SystemExit("no mount")
def files(mnt):
    os.makedirs(f"{mnt}/dir/sub")
    for i in range(5):
        with open(f"{mnt}/dir/f{i}", "wb") as f: f.write(bytes([i + 65]) * (70000 + i * 12345))
    with open(f"{mnt}/dir/sub/big", "wb") as f: f.write(os.urandom(1) * 0 + bytes(range(256)) * 4000)
    os.symlink("dir/f1", f"{mnt}/link")
    os.setxattr(f"{mnt}/dir/f0", "user.mine", b"hello")
    os.chmod(f"{mnt}/dir/f2", 0o600); os.chown(f"{mnt}/dir/f2", 60001, 60001)
    with open(f"{mnt}/empty", "wb"): pass
os.makedirs("r5/m0"); os.makedirs("r5/m1"); os.makedirs("r5/m2")
ms = ["r5/m0", "r5/m1", "r5/m2"]
run(f"{B}/mkfs.tierfs", "--level", "raid5", "--chunk", "16K", *ms)
p = mount(ms, "r5/mnt"); files("r5/mnt"); run("fusermount3", "-u", "r5/mnt"); p.wait()
os.makedirs("r1c/m0"); os.makedirs("r1c/m1")
ms = ["r1c/m0", "r1c/m1"]
run(f"{B}/mkfs.tierfs", "--level", "raid1", *ms)
p = mount(ms, "r1c/mnt", ["cache=r1c/cache", "cache_size=4M", "cache_mode=writeback"])
files("r1c/mnt")
with open("r1c/mnt/dirty", "wb") as f:
    f.write(b"D" * 200000); f.flush(); os.fsync(f.fileno())
os.kill(p.pid, signal.SIGKILL); p.wait()
run("fusermount3", "-u", "-z", "r1c/mnt")
