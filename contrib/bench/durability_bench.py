#!/usr/bin/python3
"""durability_bench.py - what fsync-means-durable costs (issue 11, "Measure the cost").

Builds side by side in one run: every --build NAME=DIR runs the same cells on
a fresh array of its own, in interleaved rounds (round 1: A, B; round 2: B, A;
more builds are rotated), --rounds of them (3).  The first build is the base;
every other is reported against it.

The array: RAID5 x4 (chunk 64K) over member directories in --tmpdir, with no
HDD model (so what a sync costs on the real disk under --tmpdir shows), and
the SSD tier in write-back mode in the same place
(-o cache=DIR,cache_size=--cache-size,cache_mode=writeback; 2G, so that no
cell reaches the dirty high watermark or evicts), FUSE defaults.

Cells, in this order, each starting with a clean cache ("flush" on
user.tierfs.ctl, waited for; the time the flush after the QD 32 cell takes is
reported too, as flush_s) and a sync(2) (untimed: nothing dirty in the page
cache of the disk under the array, whose writeback would otherwise land in
the next cell's syncs):

  qd1, qd32   fio 4K random writes, O_DIRECT, io_uring, QD 1 and QD 32,
              --time s (10) after a 1 s ramp, into a --file-size (256M) file
              that the tier holds (written once through the mount in random
              256K pieces and flushed, so every extent is cached and clean;
              its cached bytes are checked).  IOPS, mean and p99 latency (us,
              fio's lat_ns: submission to completion).
  fsync,      a loop of 4K pwrite + fsync (then + fdatasync) at a shuffled
  fdatasync   block of one 4K * --syncs file (written and fsynced first),
              --syncs (500) times, buffered fd: mean, p50, p99 of the pair
              (write + sync) and the mean of the sync alone (us).
  create      --files (3000) files of 4 KiB, each open(O_CREAT|O_EXCL) +
              write + close, in one new directory: files per second.
  create_fsync  the same with an fsync of each file before its close.
  create_par, create_fsync_par  the same from --threads (8) threads, each
              in a directory of its own (creates in one directory are
              serialised by the kernel's directory lock): what concurrent
              namespace changes share (the journal's group commit).

Every cell also records the daemon's user+system CPU per request
(/proc/PID/stat, all threads; a request is a fio I/O, a write+sync pair, or
a file) and the cache.* counters it moved (write hits and misses, bytes
flushed).  The load (uptime) is recorded at the start, end and in every row,
and so is what the disk under --tmpdir charges for a sync (the fsync and
fdatasync loops on a plain file there, no tierfs).

Output: a side-by-side table (median per build over the rounds, and
NAME/base both as the ratio of the medians and as the median of the
per-round ratios), and under --out (contrib/bench/durability_results/):
durability_TAG.csv (one row per round and build), durability_TAG_summary.csv
(one row per metric) and durability_TAG_env.txt.

    durability_bench.py --build base=/tmp/x/build --build new=/work/main/build
                        [--rounds 3] [--time 10] [--tmpdir /tmp] [--tag T]

Whatever happens (error, Ctrl-C, SIGTERM) every mount is unmounted
(fusermount3 -u, then -u -z), every daemon and fio stopped by pid, and the
temporary directories removed.
"""
import argparse
import datetime
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import raid_sweep as rs  # noqa: E402  (cleanup, logging, sizes, source commit)
import cache_bench as cb  # noqa: E402  (the RAID5x4 cached Array, fio, drain, CPU)
from raid_sweep import CLEAN, log, size_arg, fmt_size  # noqa: E402

BS = 4096
SEED = 20261201
# (metric, unit/direction note): the table's rows, in order
METRICS = [
    ("qd1_iops", "IOPS, higher is better"),
    ("qd1_lat_us", "us mean"),
    ("qd1_p99_us", "us p99"),
    ("qd1_cpu_us", "daemon CPU us/write"),
    ("qd32_iops", "IOPS, higher is better"),
    ("qd32_lat_us", "us mean"),
    ("qd32_p99_us", "us p99"),
    ("qd32_cpu_us", "daemon CPU us/write"),
    ("flush_s", "s to flush after QD 32"),
    ("fsync_mean_us", "us, write+fsync"),
    ("fsync_p50_us", "us, write+fsync"),
    ("fsync_p99_us", "us, write+fsync"),
    ("fsync_sync_us", "us, the fsync alone (mean)"),
    ("fsync_cpu_us", "daemon CPU us/pair"),
    ("fdatasync_mean_us", "us, write+fdatasync"),
    ("fdatasync_p50_us", "us, write+fdatasync"),
    ("fdatasync_p99_us", "us, write+fdatasync"),
    ("fdatasync_sync_us", "us, the fdatasync alone (mean)"),
    ("fdatasync_cpu_us", "daemon CPU us/pair"),
    ("create_per_s", "files/s, higher is better"),
    ("create_cpu_us", "daemon CPU us/file"),
    ("create_fsync_per_s", "files/s, higher is better"),
    ("create_fsync_cpu_us", "daemon CPU us/file"),
    ("create_par_per_s", "files/s, higher is better"),
    ("create_par_cpu_us", "daemon CPU us/file"),
    ("create_fsync_par_per_s", "files/s, higher is better"),
    ("create_fsync_par_cpu_us", "daemon CPU us/file"),
]


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def pct(sorted_vals, p):
    """The p-th percentile (nearest rank) of a sorted list."""
    if not sorted_vals:
        return 0.0
    k = math.ceil(p / 100.0 * len(sorted_vals)) - 1
    return sorted_vals[max(0, min(len(sorted_vals) - 1, k))]


def counters(arr):
    st = arr.status()
    return {k: arr.stat_int(k, st) for k in ("write_hits", "write_misses", "write_around",
                                              "seq_bypass", "flushed_bytes", "throttled")}


def clean(args, arr, what):
    """Flush the tier and wait until nothing is dirty; then sync(2), so that
    the page cache of the disk under the array holds nothing dirty either (on
    ext4 a journal commit, which every fsync forces, writes out the newly
    allocated blocks of every file: the destaged bytes of the cell before
    would be charged to the next one's syncs).  The seconds the flush took."""
    t = cb.drain(arr, args.drain_timeout)
    if t is None:
        raise RuntimeError("%s: the flush before %s did not end in %g s"
                           % (arr.name, what, args.drain_timeout))
    os.sync()
    return t


class Cell:
    """Measure one cell: the daemon's CPU and the cache counters around it."""

    def __init__(self, arr, row, name):
        self.arr, self.row, self.name = arr, row, name

    def __enter__(self):
        self.c0 = counters(self.arr)
        self.cpu0 = cb.proc_cpu_s(self.arr.proc.pid)
        self.t0 = time.monotonic()
        return self

    def done(self, requests):
        """Record the CPU per request (call before leaving the block)."""
        cpu = cb.proc_cpu_s(self.arr.proc.pid) - self.cpu0
        self.row["%s_cpu_us" % self.name] = round(cpu * 1e6 / max(requests, 1), 1)

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            c1 = counters(self.arr)
            self.row["%s_cache" % self.name] = " ".join(
                "%s=%d" % (k, c1[k] - self.c0[k]) for k in c1 if c1[k] != self.c0[k])
            self.row["%s_wall_s" % self.name] = round(time.monotonic() - self.t0, 1)
            if c1["throttled"] > self.c0["throttled"]:
                log("  %s %s: %d writes waited above the dirty high watermark (a larger "
                    "--cache-size keeps the cell off it)"
                    % (self.arr.name, self.name, c1["throttled"] - self.c0["throttled"]))
        return False


# ---------------------------------------------------------------- cells
def prefill(args, arr):
    """The fio file, every 256K piece written once in random order (a
    sequential fill would pass the tier by, cache_seq_cutoff), then flushed:
    the whole file cached and clean.  Its cached bytes."""
    fd = os.open(arr.file, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.ftruncate(fd, args.file_size)
    finally:
        os.close(fd)
    rc, _o, err = cb.fio_run(["fio", "--name=prefill", "--filename=" + arr.file,
                              "--rw=randwrite", "--bs=256k", "--size=%d" % args.file_size,
                              "--direct=1", "--ioengine=psync", "--randseed=%d" % SEED,
                              "--output-format=json", "--output=/dev/null"], 600, "prefill")
    if rc:
        raise RuntimeError("prefill: fio exit %d: %s" % (rc, err[-300:]))
    clean(args, arr, "the first cell")
    raw = os.getxattr(arr.file, "user.tierfs.cache").decode()
    info = dict(l.split("=", 1) for l in raw.split() if "=" in l)
    cached = int(info.get("cached_bytes", "0"))
    if cached < args.file_size:
        log("  %s: only %s of the %s file is cached" % (arr.name, fmt_size(cached),
                                                         fmt_size(args.file_size)))
    return cached


def cell_fio(args, arr, row, qd):
    name = "qd%d" % qd
    jpath = os.path.join(arr.dir, "%s.json" % name)
    with Cell(arr, row, name) as c:
        rc, _o, err = cb.fio_run(
            ["fio", "--name=" + name, "--filename=" + arr.file, "--rw=randwrite", "--bs=4k",
             "--direct=1", "--ioengine=io_uring", "--iodepth=%d" % qd,
             "--size=%d" % args.file_size, "--time_based", "--runtime=%gs" % args.time,
             "--ramp_time=1s", "--norandommap", "--randrepeat=0", "--lat_percentiles=1",
             "--output-format=json", "--output=" + jpath], int(args.time) * 3 + 60, name)
        if rc:
            raise RuntimeError("%s: fio exit %d: %s" % (name, rc, err[-300:]))
        j = cb.fio_json(jpath)["jobs"][0]["write"]
        # the ramp's requests are in the CPU too: count them at the measured rate
        c.done(j["total_ios"] + j["iops"] * 1.0)
    row[name + "_iops"] = round(j["iops"])
    row[name + "_lat_us"] = round(j["lat_ns"]["mean"] / 1e3, 1)
    row[name + "_p99_us"] = round(j["lat_ns"]["percentile"]["99.000000"] / 1e3, 1)


def sync_file(path, n):
    """A file of n 4K blocks, written and fsynced; (fd, the payload)."""
    payload = random.Random(SEED + 1).randbytes(BS)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    for i in range(0, n, 16):
        os.pwrite(fd, payload * min(16, n - i), i * BS)
    os.fsync(fd)
    return fd, payload


def sync_loop(fd, payload, n, sync):
    """n times: pwrite 4K at a shuffled block, then sync (os.fsync or
    os.fdatasync).  (sorted latencies of the pairs, mean of the syncs), us."""
    blocks = list(range(n))
    random.Random(SEED).shuffle(blocks)
    pair, alone = [], []
    for b in blocks:
        t0 = time.perf_counter_ns()
        if os.pwrite(fd, payload, b * BS) != BS:
            raise RuntimeError("short write")
        t1 = time.perf_counter_ns()
        sync(fd)
        t2 = time.perf_counter_ns()
        pair.append((t2 - t0) / 1e3)
        alone.append((t2 - t1) / 1e3)
    return sorted(pair), statistics.fmean(alone)


def cell_sync(args, arr, row, name, sync):
    fd, payload = sync_file(os.path.join(arr.mnt, "%s.dat" % name), args.syncs)
    try:
        clean(args, arr, name)
        with Cell(arr, row, name) as c:
            pair, alone = sync_loop(fd, payload, args.syncs, sync)
            c.done(args.syncs)
    finally:
        os.close(fd)
    row[name + "_mean_us"] = round(statistics.fmean(pair), 1)
    row[name + "_p50_us"] = round(pct(pair, 50), 1)
    row[name + "_p99_us"] = round(pct(pair, 99), 1)
    row[name + "_sync_us"] = round(alone, 1)


def plain_syncs(args):
    """The sync loops on a plain file in --tmpdir: what the disk under the
    arrays charges for a sync (a line of the environment)."""
    d = os.path.join(args.tmpdir, "durability-plain-%d" % os.getpid())
    os.mkdir(d)
    out = []
    try:
        for name, sync in (("fsync", os.fsync), ("fdatasync", os.fdatasync)):
            fd, payload = sync_file(os.path.join(d, name + ".dat"), args.syncs)
            try:
                pair, _alone = sync_loop(fd, payload, args.syncs, sync)
            finally:
                os.close(fd)
            out.append("write+%s p50 %.1f us, p99 %.1f us" % (name, pct(pair, 50),
                                                             pct(pair, 99)))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return "plain file in %s (no tierfs): %s" % (args.tmpdir, "; ".join(out))


def cell_create(args, arr, row, name, fsync, threads=1):
    top = os.path.join(arr.mnt, name)
    dirs = [os.path.join(top, "t%d" % t) for t in range(threads)]
    for d in [top] + dirs:
        os.mkdir(d)
    payload = (b"tierfs-durability-" * (BS // 18 + 1))[:BS]
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC
    failed = []

    def creator(t):
        try:
            for i in range(t, args.files, threads):
                fd = os.open(os.path.join(dirs[t], "f%05d" % i), flags, 0o644)
                try:
                    if os.write(fd, payload) != BS:
                        raise RuntimeError("%s: short write" % name)
                    if fsync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
        except Exception as e:      # reported below, after the others end
            failed.append(e)

    clean(args, arr, name)
    with Cell(arr, row, name) as c:
        t0 = time.monotonic()
        ts = [threading.Thread(target=creator, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.monotonic() - t0
        c.done(args.files)
    if failed:
        raise failed[0]
    row[name + "_per_s"] = round(args.files / dt, 1)
    got = sum(len(os.listdir(d)) for d in dirs)
    if got != args.files:
        raise RuntimeError("%s: %d files listed, %d created" % (name, got, args.files))


def one(args, label, build, rnd):
    """Every cell on a fresh array of one build; its row."""
    a = types.SimpleNamespace(build=build, tmpdir=args.tmpdir, cache_size=args.cache_size)
    arr = cb.Array(a, "dur-%s-r%d" % (label, rnd + 1), True)
    row = {"round": rnd + 1, "build": label, "load_start": cb.load1()}
    t0 = time.time()
    try:
        arr.mkfs()
        arr.mount(model=None, cache_opts="cache_mode=writeback")
        row["cached_bytes"] = prefill(args, arr)
        cell_fio(args, arr, row, 1)
        clean(args, arr, "qd32")
        cell_fio(args, arr, row, 32)
        row["flush_s"] = round(clean(args, arr, "fsync"), 2)
        cell_sync(args, arr, row, "fsync", os.fsync)
        cell_sync(args, arr, row, "fdatasync", os.fdatasync)
        cell_create(args, arr, row, "create", False)
        cell_create(args, arr, row, "create_fsync", True)
        cell_create(args, arr, row, "create_par", False, args.threads)
        cell_create(args, arr, row, "create_fsync_par", True, args.threads)
        errs = arr.errors()
        row["daemon_errors"] = len(errs)
        if errs:
            log("%s: daemon logged:\n  %s" % (arr.name, "\n  ".join(errs[:10])))
    finally:
        CLEAN.stop_child()   # an interrupted fio holds the mount busy
        arr.umount()
        rs.remove_dir(arr.dir, args.keep)
        os.sync()   # the removal done before the next build starts
    row["load_end"] = cb.load1()
    row["wall_s"] = round(time.time() - t0, 1)
    log("  round %d %-8s qd1 %s IOPS, qd32 %s IOPS, fsync p50 %s us, fdatasync p50 %s us, "
        "create %s/s, create+fsync %s/s (load %s, %.0f s)"
        % (rnd + 1, label, row["qd1_iops"], row["qd32_iops"], row["fsync_p50_us"],
           row["fdatasync_p50_us"], row["create_per_s"], row["create_fsync_per_s"],
           row["load_end"], row["wall_s"]))
    return row


# ---------------------------------------------------------------- report
def summarize(args, rows):
    labels = [l for l, _ in args.builds]
    base = labels[0]
    summ = []
    for m, unit in METRICS:
        s = {"metric": m, "unit": unit}
        med = {}
        for l in labels:
            vals = [float(r[m]) for r in rows if r["build"] == l and m in r]
            med[l] = statistics.median(vals) if vals else None
            s[l] = "" if med[l] is None else "%.1f" % med[l]
            s[l + "_min"] = "%.1f" % min(vals) if vals else ""
            s[l + "_max"] = "%.1f" % max(vals) if vals else ""
        for l in labels[1:]:
            s["%s/%s" % (l, base)] = "%.3f" % (med[l] / med[base]) if med[l] and med[base] \
                else ""
            per = []
            for rnd in range(1, args.rounds + 1):
                x = [float(r[m]) for r in rows if r["round"] == rnd and r["build"] == l]
                y = [float(r[m]) for r in rows if r["round"] == rnd and r["build"] == base]
                if x and y and y[0]:
                    per.append(x[0] / y[0])
            s["%s/%s_rounds" % (l, base)] = "%.3f" % statistics.median(per) if per else ""
        summ.append(s)
    return summ


def table(args, summ):
    labels = [l for l, _ in args.builds]
    base = labels[0]
    cols = ["metric"] + labels + ["%s/%s" % (l, base) for l in labels[1:]] + \
        ["(per round)" for _ in labels[1:]] + ["unit"]
    lines = []
    for s in summ:
        cells = [s["metric"]] + ["%s [%s-%s]" % (s[l], s[l + "_min"], s[l + "_max"])
                                 for l in labels]
        cells += [s["%s/%s" % (l, base)] for l in labels[1:]]
        cells += [s["%s/%s_rounds" % (l, base)] for l in labels[1:]]
        lines.append(cells + [s["unit"]])
    w = [max(len(str(x)) for x in col) for col in zip(cols, *lines)]
    out = ["  ".join(str(x).ljust(w[i]) for i, x in enumerate(cols)).rstrip()]
    out += ["  ".join(str(x).ljust(w[i]) for i, x in enumerate(c)).rstrip() for c in lines]
    return "\n".join(out)


def build_arg(s):
    name, sep, d = s.partition("=")
    if not sep or not name or not d:
        raise argparse.ArgumentTypeError("--build takes NAME=DIR, not %r" % s)
    return name, os.path.abspath(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--build", action="append", type=build_arg, required=True,
                    metavar="NAME=DIR", help="a meson build dir; the first is the base")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time", type=float, default=10, help="s per fio cell (10)")
    ap.add_argument("--file-size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--cache-size", type=size_arg, default=size_arg("2G"),
                    help="2G: 8192 slots of 256K, so the fio file (1024) and the two "
                         "create cells' files (one slot each) fit below the dirty high "
                         "watermark (70%%) without an eviction")
    ap.add_argument("--syncs", type=int, default=500, help="write+sync pairs per sync cell")
    ap.add_argument("--files", type=int, default=3000, help="files per create cell")
    ap.add_argument("--threads", type=int, default=8, help="creators in the _par cells")
    ap.add_argument("--drain-timeout", type=float, default=300)
    ap.add_argument("--tmpdir", default=None, help="where the arrays go ($TMPDIR or /tmp)")
    ap.add_argument("--out", default=os.path.join(HERE, "durability_results"))
    ap.add_argument("--tag", default=None, help="name of the result files (date and time)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = ap.parse_args()
    args.builds = args.build
    names = [l for l, _ in args.builds]
    if len(args.builds) < 2 or len(set(names)) != len(names):
        ap.error("give two or more --build NAME=DIR with different names")
    for _l, d in args.builds:
        for exe in ("tierfs", "mkfs.tierfs"):
            if not os.access(os.path.join(d, exe), os.X_OK):
                ap.error("no %s in %s" % (exe, d))
    for exe in ("fio", "fusermount3", "uptime"):
        if not shutil.which(exe):
            ap.error("%s not found" % exe)
    if args.file_size % (256 << 10) or args.file_size * 2 > args.cache_size:
        ap.error("--file-size: a multiple of 256K, at most half of --cache-size")
    if args.tmpdir:
        os.makedirs(args.tmpdir, exist_ok=True)
    args.tmpdir = args.tmpdir or os.environ.get("TMPDIR", "/tmp")
    args.tag = args.tag or time.strftime("%Y%m%d-%H%M")
    os.makedirs(args.out, exist_ok=True)
    CLEAN.keep = args.keep
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, rs.on_signal)

    env = ["date: %s" % datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "host: %s %s, %d CPUs" % (os.uname().sysname, os.uname().release, os.cpu_count()),
           "fio: %s" % cb.run(["fio", "--version"]).stdout.strip(),
           "command: %s" % " ".join(sys.argv)]
    for l, d in args.builds:
        src, commit = rs.source_commit(d)
        env.append("build %s: %s (source %s, %s)" % (l, d, src, commit))
    env += ["array: %s x%d, chunk %s, no member model, under %s; -o cache=DIR,cache_size=%s,"
            "cache_mode=writeback" % (cb.LEVEL, cb.MEMBERS, fmt_size(cb.CHUNK), args.tmpdir,
                                      fmt_size(args.cache_size)),
            "cells: fio 4K randwrite O_DIRECT io_uring QD 1/32 %g s over a cached %s file; "
            "%d write+fsync / write+fdatasync pairs; %d 4K files created, without and with "
            "fsync; %d rounds" % (args.time, fmt_size(args.file_size), args.syncs, args.files,
                                  args.rounds),
            "uptime at start: %s" % uptime(), plain_syncs(args)]
    log("\n  ".join(env))
    start = time.time()
    rows = []
    with rs.Guard(env) as guard:
        for rnd in range(args.rounds):
            k = rnd % len(args.builds)
            for label, build in args.builds[k:] + args.builds[:k]:
                rows.append(one(args, label, build, rnd))
                cb.write_csv(os.path.join(args.out, "durability_%s.csv" % args.tag), rows)
    rc = guard.rc
    env.append("uptime at end: %s; %.0f s" % (uptime(), time.time() - start))
    if not rc:
        env.append(plain_syncs(args))
    if rows and not rc:
        summ = summarize(args, rows)
        cb.write_csv(os.path.join(args.out, "durability_%s_summary.csv" % args.tag), summ)
        t = table(args, summ)
        print("median of %d rounds [min-max]; ratios: of the medians, and the median of the "
              "per-round ratios\n%s" % (args.rounds, t), flush=True)
        env.append("table:\n" + t)
    with open(os.path.join(args.out, "durability_%s_env.txt" % args.tag), "w") as f:
        f.write("\n".join(env) + "\n")
    log("done in %.0f s; results in %s (tag %s)" % (time.time() - start, args.out, args.tag))
    return rc


if __name__ == "__main__":
    sys.exit(main())
