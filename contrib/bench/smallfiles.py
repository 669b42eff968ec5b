#!/usr/bin/python3
"""smallfiles.py - small-file metadata benchmark (used by peers.sh).

    smallfiles.py DIR [--files N] [--size BYTES] [--settle SECONDS] [--cpu-pid PID]

Makes DIR/sf.<pid>/ and, timing each phase on its own:
  create  open(O_CREAT|O_EXCL|O_WRONLY) + write SIZE bytes + close, N files
  stat    os.stat() of every file
  read    open + read everything + close, every file
  unlink  os.unlink() of every file
then removes the directory.  Between phases it sleeps --settle seconds
(default 1.5, untimed) so that the kernel's 1 s FUSE entry/attr caches have
expired and the stat phase really asks the daemon (a plain directory keeps
its dentries, which is part of what the comparison shows).

After the create phase it calls sync() (untimed; --no-sync to skip).  Without
it the unlink rate depends on whether the kernel's writeback (dirty_expire,
30 s) has reached the new files yet: unlinking a never-written ext4 file
(delayed allocation) is several times cheaper than unlinking one whose blocks
are on disk, so a target whose create phase is slower got a slower unlink
phase for reasons of timing alone (measured: mergerfs 8,500 -> 2,000
unlinks/s, plain ext4 100,000 -> 6,300).  With the sync every target
stats, reads and unlinks files that are on disk.

Prints one line per phase, "PHASE files_per_s seconds daemon_cpu_seconds"
(the last is the user+sys CPU that process PID, e.g. the FUSE daemon, used
during the phase, or "-" without --cpu-pid), and exits non-zero with a
message on the first error.  Files are spread over subdirectories of
1000 to keep the directories ordinary.
"""
import argparse
import os
import sys
import time

PER_DIR = 1000
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, all threads, in seconds (None if no pid)."""
    if not pid:
        return None
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=50000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--settle", type=float, default=1.5)
    ap.add_argument("--cpu-pid", type=int, default=0)
    ap.add_argument("--no-sync", action="store_true")
    a = ap.parse_args()

    top = os.path.join(a.dir, "sf.%d" % os.getpid())
    os.mkdir(top)
    ndirs = (a.files + PER_DIR - 1) // PER_DIR
    subdirs = [os.path.join(top, "d%03d" % i) for i in range(ndirs)]
    for d in subdirs:
        os.mkdir(d)
    names = [os.path.join(subdirs[i // PER_DIR], "f%06d" % i) for i in range(a.files)]
    payload = (b"tierfs-smallfile-" * (a.size // 17 + 1))[:a.size]
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    rflags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    results = []

    def phase(label, fn):
        c0 = cpu_seconds(a.cpu_pid)
        t0 = time.monotonic()
        fn()
        dt = time.monotonic() - t0
        c1 = cpu_seconds(a.cpu_pid)
        cpu = "-" if c0 is None else "%.2f" % (c1 - c0)
        results.append((label, a.files / dt if dt > 0 else 0.0, dt, cpu))
        print("%s %.1f %.3f %s" % results[-1], flush=True)

    def create():
        for n in names:
            fd = os.open(n, flags, 0o644)
            try:
                if os.write(fd, payload) != len(payload):
                    raise OSError("short write on %s" % n)
            finally:
                os.close(fd)

    def stat():
        for n in names:
            st = os.stat(n)
            if st.st_size != a.size:
                raise OSError("%s: size %d, expected %d" % (n, st.st_size, a.size))

    def read():
        for n in names:
            fd = os.open(n, rflags)
            try:
                got = os.read(fd, a.size + 1)
            finally:
                os.close(fd)
            if got != payload:
                raise OSError("%s: content differs (%d bytes read)" % (n, len(got)))

    def unlink():
        for n in names:
            os.unlink(n)

    try:
        for label, fn in (("create", create), ("stat", stat), ("read", read),
                          ("unlink", unlink)):
            phase(label, fn)
            if label == "create" and not a.no_sync:
                os.sync()
            if label != "unlink":
                time.sleep(a.settle)
    finally:
        # leave nothing behind, even after an error
        for n in names:
            try:
                os.unlink(n)
            except FileNotFoundError:
                pass
            except OSError:
                break
        for d in subdirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
        try:
            os.rmdir(top)
        except OSError:
            pass


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print("smallfiles: error: %s" % e, file=sys.stderr)
        sys.exit(1)
