#!/usr/bin/python3
"""raid_sweep.py - Iometer-style RAID sweeps of tierfs on emulated HDD members.

Reproduces the shape of the controller reviews in ../shared/seeds/ with the
HDD service-time model at the member seam (-o member_model=hdd7200):

  mix sweep    (seed 004)  database pattern (8K, 100% random), IOPS against
               the share of writes (default 0,25,50,75,100 %) at queue depth
               1, 16 and 256, one array per configuration (default: jbod,
               raid0x2, raid0x3, raid0x4, raid1 (2 members), raid10 (4),
               raid5x3, raid5x4).
  chunk sweep  (seed 001)  workstation, fileserver and database patterns at
               QD 64 against the chunk (stripe unit) size 4K..1M on a
               4-member RAID0.

Each array is made with mkfs.tierfs in its own temporary directory, mounted
with member_model=hdd7200 and enough FUSE worker threads for the deepest
queue, and gets one sparse test file (truncate) sized so that every member
file spans --span bytes of its notional 1 TiB disk (same seek distances for
every level, as when a review tests the whole array).  fio runs the Iometer
pattern with O_DIRECT and libaio, time based; IOPS is the completion rate
from fio's per-second log.  While fio runs, the daemon's threads are sampled
(/proc/PID/task/*/syscall): a worker that is not blocked reading /dev/fuse
holds a request (almost always waiting in the HDD model), so their number
is the queue depth that actually reaches the daemon and its members.

A level mkfs.tierfs refuses (raid5/raid6 before they exist) is skipped with
a message and one "skipped" row.  Results are CSV (one row per point,
rewritten after every point, so a cut-short run keeps what it measured);
rows of configurations not re-run in this invocation are kept, so
`--levels raid5x3,raid5x4 --sweeps mix` adds RAID5 to an existing result.
The plots are made by raid_plot.py at the end.

Usage:
  raid_sweep.py --build BUILD --out DIR [--img DIR] [--tmpdir DIR]
                [--sweeps mix,chunk] [--levels jbod,raid0x2,...]
                [--writes 0,25,50,75,100] [--qds 1,16,256]
                [--runtime S] [--ramp S] [--quick] [--fresh]
                [--tierfs-opts hdd_ncq=32 --tag ncq32]

Whatever happens (error, Ctrl-C, SIGTERM) every mount is unmounted, every
daemon and fio stopped, and the temporary directories removed.
"""
import argparse
import csv
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"

# Iometer access specifications (../shared/IOMETER.md) as fio options.
# (fio options, read share %, random share %)
PATTERNS = {
    "database": (["--bs=8k"], 67, 100),
    "workstation": (["--bs=8k"], 80, 80),
    "fileserver": (["--bssplit=512/10:1k/5:2k/5:4k/60:8k/2:16k/4:32k/4:64k/10",
                    "--blockalign=512"], 80, 100),
    "webserver": (["--bssplit=512/22:1k/15:2k/8:4k/23:8k/15:16k/2:32k/6:64k/7:128k/1:512k/1",
                   "--blockalign=512"], 100, 100),
    "exchange": (["--bs=32k"], 62, 100),
}

# how many members' worth of data a level stores (for the file size)
DATA_MEMBERS = {
    "jbod": lambda n: 1,          # a file lives on one member
    "raid0": lambda n: n,
    "raid1": lambda n: 1,
    "raid10": lambda n: n // 2,
    "raid5": lambda n: n - 1,
    "raid6": lambda n: n - 2,
}
DEFAULT_MEMBERS = {"jbod": 1, "raid0": 2, "raid1": 2, "raid10": 4, "raid5": 3, "raid6": 4}

MIX_FIELDS = ["sweep", "build", "model", "config", "level", "members", "chunk", "pattern", "qd",
              "write_pct",
              "status", "iops", "read_iops", "write_iops", "mbps", "lat_ms", "read_lat_ms",
              "write_lat_ms", "read_p99_ms", "write_p99_ms", "submit_ms", "inflight_little",
              "daemon_busy_mean", "daemon_busy_max", "threads_max", "daemon_cpu_pct",
              "file_size", "runtime_s", "ramp_s", "wall_s", "load1", "note"]

NR_READ = {"x86_64": "0", "aarch64": "63"}.get(os.uname().machine)


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def size_arg(s):
    m = re.fullmatch(r"(\d+)([KMGT]?)i?B?", s.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError("bad size %r" % s)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


def fmt_size(n):
    for unit, sh in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return "%d%s" % (n >> sh, unit)
    return str(n)


def parse_config(s):
    """'raid0x3' -> ('raid0x3', 'raid0', 3); 'raid1' -> ('raid1', 'raid1', 2)."""
    m = re.fullmatch(r"([a-z]+[0-9]*?)(?:x(\d+))?", s.strip().lower())
    if not m:
        raise argparse.ArgumentTypeError("bad configuration %r (LEVEL or LEVELxN)" % s)
    level = m.group(1)
    n = int(m.group(2)) if m.group(2) else DEFAULT_MEMBERS.get(level, 2)
    name = level if not m.group(2) and level in ("jbod", "raid1", "raid10") else "%sx%d" % (level, n)
    return name, level, n


def int_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


# ---------------------------------------------------------------- cleanup
class Cleanup:
    """Everything we started: daemons, mounts, fio, temp directories."""

    def __init__(self):
        self.mounts = []      # mountpoints
        self.procs = []       # daemons (Popen)
        self.child = None     # the running fio (Popen)
        self.dirs = []        # temp directories to remove
        self.keep = False

    def stop_child(self):
        p, self.child = self.child, None
        if p and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)   # fio runs in its own session
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def all(self):
        self.stop_child()
        for m in list(self.mounts):
            unmount(m)
        for p in list(self.procs):
            stop_daemon(p)
        for d in list(self.dirs):
            remove_dir(d, self.keep)


CLEAN = Cleanup()


def mounted(path):
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def unmount(mnt):
    for attempt in range(3):
        if not mounted(mnt):
            break
        args = ["fusermount3", "-u"] + (["-z"] if attempt == 2 else []) + [mnt]
        if attempt == 2:
            log("unmount of %s failed; detaching it (fusermount3 -u -z)" % mnt)
        subprocess.run(args, capture_output=True)
        if mounted(mnt):
            time.sleep(0.5)
    if mnt in CLEAN.mounts and not mounted(mnt):
        CLEAN.mounts.remove(mnt)


def stop_daemon(p, wait=20):
    """Reap a daemon whose mount is gone; SIGTERM, then SIGKILL, by pid."""
    try:
        p.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        log("daemon %d still running %d s after unmount; SIGTERM" % (p.pid, wait))
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log("daemon %d ignored SIGTERM; SIGKILL" % p.pid)
            p.kill()
            p.wait()
    if p in CLEAN.procs:
        CLEAN.procs.remove(p)
    return p.returncode


def remove_dir(d, keep=False):
    with open("/proc/mounts") as f:
        if any(line.split()[1].startswith(os.path.realpath(d) + "/") for line in f):
            log("something is still mounted under %s; not removing it" % d)
            return
    if keep:
        log("kept %s" % d)
    else:
        shutil.rmtree(d, ignore_errors=True)
    if d in CLEAN.dirs:
        CLEAN.dirs.remove(d)


def on_signal(signum, _frame):
    # the first signal starts the cleanup; later ones must not cut it short
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    raise SystemExit(128 + signum)


class Guard:
    """The body of a benchmark's main:

        with Guard(env, finish=stop_all_fio) as guard:
            ...
        return guard.rc

    A signal (on_signal's SystemExit) or an error ends the body: it is logged
    (an error with its traceback, and noted in env), finish() runs, then
    everything CLEAN holds is stopped and removed, whatever happened.
    guard.rc: 0, 128 + the signal, or 1."""

    def __init__(self, env, finish=None):
        self.env, self.finish, self.rc = env, finish, 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, SystemExit):
            self.rc = exc.code if isinstance(exc.code, int) else 1
            log("interrupted; cleaning up (partial results kept)")
        elif exc_type is not None and issubclass(exc_type, Exception):
            self.rc = 1
            log("error: %s\n%s" % (exc, "".join(traceback.format_exception(exc_type, exc, tb))))
            self.env.append("error: %s" % exc)
        try:
            if self.finish:
                self.finish()
        finally:
            CLEAN.all()
        return exc_type is not None and issubclass(exc_type, (SystemExit, Exception))


# ---------------------------------------------------------------- arrays
class Daemon:
    """A tierfs daemon of a benchmark array: needs self.name, self.mnt,
    self.proc (Popen or None) and self.logf (its log file)."""
    ERROR_MARKS = (": error:", ": crit")

    def log(self):
        try:
            with open(self.logf) as f:
                return f.read()
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def errors(self):
        return [l for l in self.log().splitlines() if any(m in l for m in self.ERROR_MARKS)]

    def spawn(self, cmd, timeout, append=False):
        """Start the daemon (cmd, in a session of its own, stdout and stderr
        to self.logf: appended to after a "### cmd" line, or truncated) and
        wait until self.mnt is mounted.  RuntimeError if it exits first or
        does not mount in timeout seconds."""
        what = os.path.basename(cmd[0])
        CLEAN.mounts.append(self.mnt)
        with open(self.logf, "a" if append else "w") as lf:
            if append:
                lf.write("### %s\n" % " ".join(cmd))
                lf.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                         start_new_session=True)
        CLEAN.procs.append(self.proc)
        deadline = time.time() + timeout
        while not mounted(self.mnt):
            if self.proc.poll() is not None:
                raise RuntimeError("%s: %s exited %d: %s"
                                   % (self.name, what, self.proc.returncode, self.log()[-500:]))
            if time.time() > deadline:
                raise RuntimeError("%s: %s did not mount in %g s: %s"
                                   % (self.name, what, timeout, self.log()[-500:]))
            time.sleep(0.05)

    def umount(self):
        """Unmount and stop the daemon; its exit code (logged unless 0)."""
        if self.proc is None:
            return None
        unmount(self.mnt)
        rc = stop_daemon(self.proc)
        self.proc = None
        if rc:
            log("%s: daemon exit %s" % (self.name, rc))
        return rc


class Array(Daemon):
    def __init__(self, args, name, level, n, chunk):
        self.args = args
        self.name, self.level, self.n, self.chunk = name, level, n, chunk
        self.dir = tempfile.mkdtemp(prefix="raid-sweep-%s-" % name, dir=args.tmpdir)
        CLEAN.dirs.append(self.dir)
        self.members = [os.path.join(self.dir, "m%d" % i) for i in range(n)]
        self.mnt = os.path.join(self.dir, "mnt")
        self.proc = None
        self.logf = os.path.join(self.dir, "daemon.log")
        self.model = ""
        self.baseline = 0

    def mkfs(self):
        for m in self.members:
            os.mkdir(m)
        os.mkdir(self.mnt)
        r = subprocess.run([os.path.join(self.args.build, "mkfs.tierfs"), "--level", self.level,
                            "--chunk", fmt_size(self.chunk)] + self.members,
                           capture_output=True, text=True)
        return r.returncode, (r.stdout + r.stderr).strip()

    def mount(self):
        opts = "member_model=hdd7200,max_threads=%d" % self.args.threads
        if self.args.tierfs_opts:
            opts += "," + self.args.tierfs_opts
        cmd = [os.path.join(self.args.build, "tierfs"), "-f", "-o", opts,
               ":".join(self.members), self.mnt]
        self.spawn(cmd, 15)
        m = re.search(r"member model: (.*)", self.log())
        self.model = m.group(1).strip().replace(", ", "; ") if m else "?"

    def destroy(self):
        self.umount()
        remove_dir(self.dir, self.args.keep)


# ---------------------------------------------------------------- sampling
def thread_states(pid):
    """(threads, threads not blocked in read(2)) of a process.  An idle
    libfuse worker blocks reading /dev/fuse; a worker with a request is
    elsewhere: in the HDD model (futex or clock_nanosleep until its
    modelled completion), in io_uring_enter, on a lock, or running."""
    busy = nt = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().startswith("iou-"):
                    continue    # io_uring's io-wq workers (punted writes), not FUSE workers
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                nr = f.read().split(" ", 1)[0]
        except OSError:
            continue
        nt += 1
        if nr != NR_READ:
            busy += 1
    return nt, busy


def idle_baseline(pid):
    """Threads not in read(2) while no request is in flight (main thread,
    background threads): subtracted from the samples."""
    vals = []
    for _ in range(5):
        try:
            vals.append(thread_states(pid)[1])
        except OSError:
            return 0
        time.sleep(0.05)
    return min(vals)


class Sampler(threading.Thread):
    """Samples, every `period` seconds, the daemon's threads and how many of
    them hold a request (not blocked reading /dev/fuse, minus the idle
    baseline): the requests that actually reached the daemon."""

    def __init__(self, pid, delay, baseline, period=0.1):
        super().__init__(daemon=True)
        self.pid, self.delay, self.period = pid, delay, period
        self.baseline = baseline
        self.stop_ev = threading.Event()
        self.busy, self.threads = [], []
        self.cpu0 = self.cpu1 = None
        self.t0 = self.t1 = None

    def cpu(self):
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                fl = f.read().rsplit(")", 1)[1].split()
            return (int(fl[11]) + int(fl[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def run(self):
        if self.stop_ev.wait(self.delay):
            return
        self.cpu0, self.t0 = self.cpu(), time.time()
        while not self.stop_ev.is_set():
            try:
                nt, busy = thread_states(self.pid)
            except OSError:
                break
            self.busy.append(max(0, busy - self.baseline))
            self.threads.append(nt)
            self.stop_ev.wait(self.period)

    def finish(self):
        self.stop_ev.set()
        self.join()
        if self.t0 is not None:
            self.cpu1, self.t1 = self.cpu(), time.time()

    def result(self):
        r = {"daemon_busy_mean": "", "daemon_busy_max": "", "threads_max": "", "daemon_cpu_pct": ""}
        if self.busy and NR_READ and any(self.threads):
            r["daemon_busy_mean"] = "%.1f" % (sum(self.busy) / len(self.busy))
            r["daemon_busy_max"] = str(max(self.busy))
            r["threads_max"] = str(max(self.threads))
        if self.cpu0 is not None and self.cpu1 is not None and self.t1 > self.t0:
            r["daemon_cpu_pct"] = "%.1f" % (100.0 * (self.cpu1 - self.cpu0) / (self.t1 - self.t0))
        return r


# ---------------------------------------------------------------- fio
def ramp_for(args, qd, disks):
    """Ramp long enough for the queue to turn over once: with QD requests
    queued FIFO in front of `disks` disks of ~90 IOPS, a request issued at
    the start waits QD / (90 * disks) s, and fio's latency is only steady
    state after that."""
    return args.ramp + 1.25 * qd / (90.0 * max(1, min(disks, qd)))


def completion_iops(logfile):
    """Per-direction mean of fio's 1-second completion-rate samples
    (--write_iops_log with --log_avg_msec=1000): {0: read, 1: write}."""
    ticks, sums = set(), {}
    with open(logfile) as f:
        for line in f:
            fl = [x.strip() for x in line.split(",")]
            if len(fl) < 3:
                continue
            ticks.add(round(int(fl[0]) / 1000.0))
            sums[int(fl[2])] = sums.get(int(fl[2]), 0) + int(fl[1])
    if not ticks:
        return None
    return {d: v / len(ticks) for d, v in sums.items()}


def fio_point(args, arr, path, size, pattern, qd, read_pct, tag, disks):
    popts, _pread, prandom = PATTERNS[pattern]
    ramp = ramp_for(args, qd, disks)
    if read_pct >= 100:
        rw = ["--rw=randread"]
    elif read_pct <= 0:
        rw = ["--rw=randwrite"]
    else:
        rw = ["--rw=randrw", "--rwmixread=%d" % read_pct]
    if prandom < 100:
        rw.append("--percentage_random=%d" % prandom)
    out = os.path.join(arr.dir, "fio-%s.json" % tag)
    cmd = ["fio", "--name=" + pattern, "--filename=" + path, "--size=%d" % size,
           "--direct=1", "--ioengine=libaio", "--iodepth=%d" % qd,
           "--time_based", "--runtime=%gs" % args.runtime, "--ramp_time=%.1fs" % ramp,
           "--norandommap", "--randrepeat=0", "--fallocate=none",
           "--write_iops_log=" + out[:-5], "--log_avg_msec=1000",
           "--output-format=json", "--output=" + out] + popts + rw
    sampler = Sampler(arr.proc.pid, ramp + 0.2, arr.baseline)
    load1 = open("/proc/loadavg").read().split()[0]
    t0 = time.time()
    sampler.start()
    err = open(out + ".err", "w")
    CLEAN.child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                   start_new_session=True)
    err.close()
    try:
        rc = CLEAN.child.wait(timeout=args.runtime * 3 + ramp + 60)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        sampler.finish()
        CLEAN.stop_child()
    wall = time.time() - t0
    row = {"pattern": pattern, "qd": qd, "write_pct": 100 - read_pct, "file_size": size,
           "runtime_s": args.runtime, "ramp_s": "%.1f" % ramp, "wall_s": "%.1f" % wall,
           "load1": load1}
    row.update(sampler.result())
    if not arr.alive():
        row.update(status="fail", note="daemon died: " + arr.log()[-300:].replace("\n", " "))
        return row
    if rc is None:
        row.update(status="timeout", note="fio did not finish in time")
        return row
    try:
        with open(out) as f:
            text = f.read()
        data = json.loads(text[text.index("{"):])
        job = data["jobs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        with open(out + ".err") as f:
            msg = f.read().strip().replace("\n", " ")[-300:]
        row.update(status="fail", note="fio exit %s: %s" % (rc, msg))
        return row
    if rc != 0 or job.get("error"):
        with open(out + ".err") as f:
            msg = f.read().strip().replace("\n", " ")[-300:]
        row.update(status="fail", note="fio exit %s error %s: %s" % (rc, job.get("error"), msg))
        return row
    rd, wr = job["read"], job["write"]
    # fio's own "iops" counts the I/Os *issued* in the window over a runtime
    # that includes the final drain, and its io_bytes counts completions of
    # I/Os issued during the ramp: at QD 256 they differ by 25%.  The
    # completion rate sampled each second is what a disk benchmark means.
    try:
        rate = completion_iops(out[:-5] + "_iops.1.log")
    except (OSError, ValueError):
        rate = None
    if not rate:
        row.update(status="fail", note="no fio iops log")
        return row
    riops, wiops = rate.get(0, 0.0), rate.get(1, 0.0)
    iops = riops + wiops
    ncomp = rd["lat_ns"].get("N", 0) + wr["lat_ns"].get("N", 0)
    avg_size = (rd["io_bytes"] + wr["io_bytes"]) / ncomp if ncomp else 0
    lat = slat = 0.0
    if ncomp:
        lat = (rd["lat_ns"].get("N", 0) * rd["lat_ns"]["mean"]
               + wr["lat_ns"].get("N", 0) * wr["lat_ns"]["mean"]) / ncomp / 1e6
        slat = (rd["lat_ns"].get("N", 0) * rd["slat_ns"]["mean"]
                + wr["lat_ns"].get("N", 0) * wr["slat_ns"]["mean"]) / ncomp / 1e6

    def p99(d):
        p = d.get("clat_ns", {}).get("percentile", {})
        v = p.get("99.000000")
        return "%.2f" % (v / 1e6) if v and d["iops"] > 0 else ""

    row.update(status="ok", iops="%.1f" % iops, read_iops="%.1f" % riops,
               write_iops="%.1f" % wiops, mbps="%.3f" % (iops * avg_size / 1e6),
               lat_ms="%.2f" % lat,
               read_lat_ms="%.2f" % (rd["lat_ns"]["mean"] / 1e6) if rd["iops"] > 0 else "",
               write_lat_ms="%.2f" % (wr["lat_ns"]["mean"] / 1e6) if wr["iops"] > 0 else "",
               read_p99_ms=p99(rd), write_p99_ms=p99(wr), submit_ms="%.2f" % slat,
               inflight_little="%.1f" % (iops * lat / 1000.0), note="")
    return row


# ---------------------------------------------------------------- results
class Results:
    def __init__(self, path, fresh, sweep, configs):
        self.path = path
        self.rows = []
        if not fresh and os.path.exists(path):
            with open(path) as f:
                for r in csv.DictReader(f):
                    if not (r["sweep"] == sweep and r["config"] in configs):
                        self.rows.append(r)
        self.write()

    def add(self, row):
        self.rows.append(row)
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=MIX_FIELDS, extrasaction="ignore")
            w.writeheader()
            for r in self.rows:
                w.writerow({k: r.get(k, "") for k in MIX_FIELDS})
        os.replace(tmp, self.path)


def make_file(arr, size):
    path = os.path.join(arr.mnt, "iobw.tst")     # Iometer's test file name
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    return path


def run_config(args, res, sweep, name, level, n, chunk, points, total, prog):
    """One array: mkfs, mount, file, the points [(pattern, qd, read_pct)], unmount."""
    base = {"sweep": sweep, "build": args.build_label, "model": "", "config": name,
            "level": level, "members": n, "chunk": chunk}
    dm = DATA_MEMBERS.get(level, lambda k: k)(n)
    size = args.span * max(dm, 1)
    arr = Array(args, name, level, n, chunk)
    try:
        rc, out = arr.mkfs()
        if rc != 0:
            msg = out.splitlines()[-1] if out else "exit %d" % rc
            log("SKIP %s (%s x%d): mkfs.tierfs refused: %s" % (name, level, n, msg))
            res.add(dict(base, status="skipped", note="mkfs.tierfs refused: " + msg))
            prog["done"] += len(points)
            return
        arr.mount()
        path = make_file(arr, size)
        arr.baseline = idle_baseline(arr.proc.pid)
        base["model"] = arr.model
        log("%s: %s, %d members, chunk %s, file %s (%s per member); model: %s"
            % (sweep, level, n, fmt_size(chunk), fmt_size(size), fmt_size(args.span), arr.model))
        for pattern, qd, read_pct in points:
            tag = "%s-qd%d-w%d" % (pattern, qd, 100 - read_pct)
            row = fio_point(args, arr, path, size, pattern, qd, read_pct, tag, dm)
            row.update(base)
            res.add(row)
            prog["done"] += 1
            done = prog["done"]
            if row["status"] == "ok":
                log("  [%d/%d] %s %s QD%d %d%% writes: %s IOPS, %s MB/s, %s ms; in daemon %s "
                    "(max %s), threads %s, daemon cpu %s%%"
                    % (done, total, name, pattern, qd, 100 - read_pct, row["iops"], row["mbps"],
                       row["lat_ms"], row["daemon_busy_mean"], row["daemon_busy_max"],
                       row["threads_max"], row["daemon_cpu_pct"]))
            else:
                log("  [%d/%d] %s %s QD%d %d%% writes: %s (%s)"
                    % (done, total, name, pattern, qd, 100 - read_pct, row["status"], row["note"]))
                if not arr.alive():
                    raise RuntimeError("%s: daemon died" % name)
        errs = arr.errors()
        arr.umount()
        if errs:
            log("%s: daemon logged errors:\n  %s" % (name, "\n  ".join(errs[:10])))
    finally:
        arr.destroy()


def source_commit(build):
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            src = json.load(f)["directories"]["source"]
        r = subprocess.run(["git", "-C", src, "describe", "--always", "--dirty"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return src, r.stdout.strip()
        try:    # an exported tree (git archive) with its commit noted
            with open(os.path.join(src, ".commit")) as f:
                return src, f.read().strip()
        except OSError:
            return src, "unknown"
    except (OSError, ValueError, KeyError):
        return "?", "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--build", required=True, help="meson build dir with tierfs and mkfs.tierfs")
    ap.add_argument("--out", required=True, help="directory for the CSVs and env-*.txt")
    ap.add_argument("--img", help="directory for the PNGs (default: --out)")
    ap.add_argument("--tmpdir", default=None,
                    help="where the arrays' temporary directories go (default: $TMPDIR or /tmp); "
                         "writes allocate real space there")
    ap.add_argument("--sweeps", default="mix,chunk", help="mix, chunk or both (default both)")
    ap.add_argument("--levels", default="jbod,raid0x2,raid0x3,raid0x4,raid1,raid10,raid5x3,raid5x4",
                    help="arrays of the mix sweep: LEVEL[xMEMBERS], comma separated "
                         "(default: %(default)s)")
    ap.add_argument("--writes", default="0,25,50,75,100", help="write shares in %% (mix sweep; default %(default)s)")
    ap.add_argument("--qds", default="1,16,256", help="queue depths (mix sweep; default %(default)s)")
    ap.add_argument("--mix-pattern", default="database", choices=sorted(PATTERNS),
                    help="pattern of the mix sweep (default database)")
    ap.add_argument("--mix-chunk", type=size_arg, default=size_arg("64K"),
                    help="chunk of the mix sweep arrays (default 64K)")
    ap.add_argument("--chunks", default="4K,8K,16K,32K,64K,128K,256K,512K,1M",
                    help="chunk sizes of the chunk sweep (default %(default)s)")
    ap.add_argument("--chunk-patterns", default="workstation,fileserver,database",
                    help="patterns of the chunk sweep (default %(default)s)")
    ap.add_argument("--chunk-config", default="raid0x4", help="array of the chunk sweep (default %(default)s)")
    ap.add_argument("--chunk-qd", type=int, default=64,
                    help="queue depth of the chunk sweep (default 64, as seed 001)")
    ap.add_argument("--span", type=size_arg, default=size_arg("512G"),
                    help="bytes of each member's notional disk the test file covers "
                         "(default 512G, the most the model maps without wrapping)")
    ap.add_argument("--runtime", type=float, default=6.0, help="seconds measured per point (default 6)")
    ap.add_argument("--ramp", type=float, default=1.0,
                    help="seconds of ramp per point, plus the time the queue takes to turn "
                         "over once (QD / (90 IOPS x data disks) x 1.25)")
    ap.add_argument("--threads", type=int, default=0,
                    help="FUSE max_threads (default: deepest QD + 32, at most 1024)")
    ap.add_argument("--tierfs-opts", default="",
                    help="extra -o options, e.g. hdd_ncq=32 or hdd_seek_ms=12")
    ap.add_argument("--tag", default="",
                    help="name of a model variant (e.g. ncq32): results go to raid_mix_TAG.csv, "
                         "raid_chunk_TAG.csv and PNGs with the same suffix")
    ap.add_argument("--build-label", default="",
                    help="what to record as the build in the CSV (default: git describe of the "
                         "build's source, or its .commit file)")
    ap.add_argument("--quick", action="store_true",
                    help="2-minute smoke run: jbod, raid0x2, raid10; 0/100%% writes at QD 1 and "
                         "256; chunks 4K and 1M; 3 s per point")
    ap.add_argument("--fresh", action="store_true",
                    help="discard existing rows in the CSVs (default: keep rows of "
                         "configurations not re-run)")
    ap.add_argument("--no-plot", action="store_true", help="do not run raid_plot.py at the end")
    ap.add_argument("--keep", action="store_true", help="keep the arrays' directories")
    args = ap.parse_args()

    if args.quick:
        if args.levels == ap.get_default("levels"):
            args.levels = "jbod,raid0x2,raid10"
        if args.writes == ap.get_default("writes"):
            args.writes = "0,100"
        if args.qds == ap.get_default("qds"):
            args.qds = "1,256"
        if args.chunks == ap.get_default("chunks"):
            args.chunks = "4K,1M"
        if args.runtime == ap.get_default("runtime"):
            args.runtime = 3.0
        if args.ramp == ap.get_default("ramp"):
            args.ramp = 0.5

    args.build = os.path.abspath(args.build)
    for exe in ("tierfs", "mkfs.tierfs"):
        if not os.access(os.path.join(args.build, exe), os.X_OK):
            ap.error("no %s in %s" % (exe, args.build))
    for exe in ("fio", "fusermount3"):
        if not shutil.which(exe):
            ap.error("%s not found" % exe)
    sweeps = [s.strip() for s in args.sweeps.split(",") if s.strip()]
    if set(sweeps) - {"mix", "chunk"}:
        ap.error("--sweeps takes mix and/or chunk")
    configs = [parse_config(c) for c in args.levels.split(",") if c.strip()]
    writes = int_list(args.writes)
    qds = int_list(args.qds)
    chunks = [size_arg(c) for c in args.chunks.split(",") if c.strip()]
    cpats = [p.strip() for p in args.chunk_patterns.split(",") if p.strip()]
    for p in cpats:
        if p not in PATTERNS:
            ap.error("unknown pattern %s (known: %s)" % (p, ", ".join(sorted(PATTERNS))))
    cname, clevel, cn = parse_config(args.chunk_config)
    maxqd = max(qds + ([args.chunk_qd] if "chunk" in sweeps else []))
    if not args.threads:
        args.threads = min(maxqd + 32, 1024)
    if not 1 <= args.threads <= 1024:
        ap.error("--threads: tierfs takes max_threads from 1 to 1024 (others fall back to 16)")
    if args.tmpdir:
        os.makedirs(args.tmpdir, exist_ok=True)
    args.tmpdir = args.tmpdir or tempfile.gettempdir()
    args.out = os.path.abspath(args.out)
    args.img = os.path.abspath(args.img or args.out)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.img, exist_ok=True)
    CLEAN.keep = args.keep

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    mix_points = [(args.mix_pattern, qd, 100 - w) for qd in qds for w in writes]
    chunk_points = [(p, args.chunk_qd, PATTERNS[p][1]) for p in cpats]
    total = (len(configs) * len(mix_points) if "mix" in sweeps else 0) + \
            (len(chunks) * len(chunk_points) if "chunk" in sweeps else 0)
    src, commit = source_commit(args.build)
    args.build_label = args.build_label or commit
    args.suffix = "_" + args.tag if args.tag else ""
    start = time.time()
    env = [
        "date: %s" % datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host: %s %s, %d CPUs" % (os.uname().sysname, os.uname().release, os.cpu_count()),
        "fio: %s" % subprocess.run(["fio", "--version"], capture_output=True,
                                   text=True).stdout.strip(),
        "tierfs: %s (source %s, %s)" % (args.build, src, commit),
        "command: %s" % " ".join(sys.argv),
        "options: member_model=hdd7200,max_threads=%d%s" % (
            args.threads, "," + args.tierfs_opts if args.tierfs_opts else ""),
        "span per member %s, runtime %gs + ramp %gs (+ queue turnover) per point, %d points"
        % (fmt_size(args.span), args.runtime, args.ramp, total),
        "loadavg at start: %s" % open("/proc/loadavg").read().strip(),
    ]
    log("\n  ".join(env))
    prog = {"done": 0}     # points done (or skipped), kept when interrupted
    with Guard(env) as guard:
        if "mix" in sweeps:
            res = Results(os.path.join(args.out, "raid_mix%s.csv" % args.suffix), args.fresh, "mix",
                          {c[0] for c in configs})
            for name, level, n in configs:
                run_config(args, res, "mix", name, level, n, args.mix_chunk,
                           mix_points, total, prog)
        if "chunk" in sweeps:
            res = Results(os.path.join(args.out, "raid_chunk%s.csv" % args.suffix), args.fresh,
                          "chunk",
                          {"%s-%s" % (cname, fmt_size(c)) for c in chunks})
            for c in chunks:
                run_config(args, res, "chunk", "%s-%s" % (cname, fmt_size(c)), clevel, cn,
                           c, chunk_points, total, prog)
    rc = guard.rc
    secs = time.time() - start
    done = prog["done"]
    env.append("loadavg at end: %s; %d of %d points in %.0f s"
               % (open("/proc/loadavg").read().strip(), done, total, secs))
    with open(os.path.join(args.out, "env-%s%s.txt" % ("-".join(sweeps), args.suffix)), "w") as f:
        f.write("\n".join(env) + "\n")
    log("%d of %d points in %.0f s; results in %s" % (done, total, secs, args.out))
    if not args.no_plot:
        r = subprocess.run([PY, os.path.join(HERE, "raid_plot.py"), "--csv", args.out,
                            "--img", args.img] + (["--tag", args.tag] if args.tag else []))
        if r.returncode != 0:
            log("raid_plot.py failed (exit %d); the CSVs are complete" % r.returncode)
    return rc


if __name__ == "__main__":
    sys.exit(main())
