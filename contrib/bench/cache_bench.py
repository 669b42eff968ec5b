#!/usr/bin/python3
"""cache_bench.py - the SSD tier (write-back cache) in front of an emulated HDD RAID5.

4-member RAID5 arrays (64K chunk) on HDD-modelled members
(-o member_model=hdd7200; the model's default hdd_ncq=1, i.e. no
reordering, is the main case), one of them with the SSD tier on a plain
directory (-o cache=DIR,cache_size=1G), each with one big sparse test file
(--span bytes of every member's notional disk, 1.5 TiB logical by default)
holding three zones, as the Nytro review (../shared/seeds/000) runs them:

  hot   --hot-size (256M) at 1/4 of the file, QD 32 (real random data,
        written before the cache is attached, checked through the cache)
  warm  --warm-size (2G) at 1/2 of the file, QD 4
  cold  the whole file, QD 2

Parts (--parts, default zones,hits,flush; run in this order):

  zones     4K random reads in the three zones at once from a cold cache,
            for each --zone-variants entry NCQ:CACHED_S:UNCACHED_S (default
            1:240:60,32:150:45: the model's default NCQ 1 first, then NCQ
            32 with SPTF reordering).  Both arrays are remounted with that
            model and the cached one gets a new, empty cache.  fio
            per-second completion logs give the warm-up curve of the cached
            array and the flat line of the uncached one; steady state is
            the median of the last quarter of a run.  Reports the ratio,
            the time the cached hot zone takes to reach 90% of its steady
            state, and the time to read the hot zone once from the uncached
            array (sequentially, 1M reads, measured; in random 4K order at
            the uncached rate, computed).  cache.* sampled every 2 s.
  hits      cache-hit 4K random reads, O_DIRECT, QD 1 (psync) and QD 32
            (libaio), on arrays of their own without the HDD model:
            "tierfs" (default FUSE threads, 16) and "tierfsN"
            (max_threads=N, --hit-threads, default 128), each with cache_promote=1 and a pre-read
            (64K random reads) until a pass has no read miss; against
            libfuse's example passthrough_ll (default options) over a plain
            directory, and fio on a plain file (raw), all in --tmpdir.
            --rounds interleaved rounds (order rotated), medians.
  flush     foreground 4K random reads (QD 32) of a cached hot zone
            (--flush-hot, written through the cache and flushed) on a
            cached HDD-model array (--flush-cache-size, default threads)
            while a dirty set is made and destaged.  Phases: before (no
            dirt), dirtying (random 4K writes over a region of 65% of the
            cache's slots until --flush-dirty-pct of the slots are dirty),
            paced (the watermarks drive the flusher), flush ("flush" on
            user.tierfs.ctl, until no dirt), after.  IOPS per second, clat
            percentiles per phase (fio histogram logs), cache.* per second.
            --flush-mixes: read (100% reads) and/or rw70 (70/30 r/w).
  extent    (optional) the zones test (cached only, NCQ 1, --extent-time s)
            with cache_extent = each of --extents (16K,64K,256K).
  policy    (optional) cache_policy=lru vs s3fifo at each --policy-promote
            threshold: the three zones plus a cold scan (64K reads of an
            8G region in random order, QD 4), --policy-time s from an empty
            cache; hit ratios from the cache counters over the second half.
  profiles  (optional) Iometer fileserver, webserver, database and exchange
            in the three zones on both arrays (model of the last zones
            variant), cache drained before each cached profile.

Results (CSV, --out): cache_zones_ts.csv, cache_zones.csv,
cache_zones_stats.csv (each with a variant column), cache_hits.csv,
cache_hits_summary.csv, cache_flush_ts.csv, cache_flush.csv,
cache_flush_stats.csv, cache_extent.csv, cache_policy.csv,
cache_profiles.csv, env-cache.txt.  cache_plot.py makes the PNGs (--img).

Whatever happens (error, Ctrl-C, SIGTERM) every mount is unmounted
(fusermount3 -u, then -u -z), every daemon and fio stopped by pid, and the
temporary directories removed.
"""
import argparse
import csv
import datetime
import glob
import hashlib
import json
import mmap
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import raid_sweep as rs  # noqa: E402  (cleanup, mounts, sizes, Iometer patterns)
from raid_sweep import CLEAN, log, size_arg, fmt_size, mounted, unmount, stop_daemon  # noqa: E402

PY = "/usr/bin/python3"
LEVEL, MEMBERS, CHUNK = "raid5", 4, 64 << 10
DATA_MEMBERS = MEMBERS - 1
PROFILES = ["fileserver", "webserver", "database", "exchange"]
ZONE_QD = {"hot": 32, "warm": 4, "cold": 2}
PCTS = ["50.000000", "90.000000", "99.000000", "99.900000"]
SEED = 20240611
FIOS = []          # extra fio processes running in the background (flush part)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def load1():
    return open("/proc/loadavg").read().split()[0]


# ---------------------------------------------------------------- arrays
class Array(rs.Daemon):
    """A RAID5x4, optionally with HDD-modelled members and the SSD tier."""
    ERROR_MARKS = (": error:", ": crit", ": warning:")

    def __init__(self, args, name, cached, cache_size=None):
        self.args, self.name, self.cached = args, name, cached
        self.cache_size = cache_size or args.cache_size
        self.dir = tempfile.mkdtemp(prefix="cache-bench-%s-" % name, dir=args.tmpdir)
        CLEAN.dirs.append(self.dir)
        self.members = [os.path.join(self.dir, "m%d" % i) for i in range(MEMBERS)]
        self.mnt = os.path.join(self.dir, "mnt")
        self.cache = os.path.join(self.dir, "ssd") if cached else None
        self.proc = None
        self.logf = os.path.join(self.dir, "daemon.log")
        self.file = os.path.join(self.mnt, "iobw.tst")
        self.model = ""
        self.opts = ""

    def mkfs(self):
        for m in self.members:
            os.mkdir(m)
        os.mkdir(self.mnt)
        r = run([os.path.join(self.args.build, "mkfs.tierfs"), "--level", LEVEL,
                 "--chunk", fmt_size(CHUNK)] + self.members)
        if r.returncode:
            raise RuntimeError("mkfs.tierfs: " + (r.stdout + r.stderr).strip())

    def mount(self, model=None, cache=True, threads=None, cache_opts="", opts=None):
        """model: None (no HDD model) or extra model options ("hdd_ncq=1");
        threads: None for tierfs's default (16); opts: more -o options
        (a list, e.g. ["allow_other"])."""
        opts = list(opts or [])
        if threads:
            opts.append("max_threads=%d" % threads)
        if model is not None:
            opts.append("member_model=hdd7200")
            if model:
                opts.append(model)
        if cache and self.cached:
            opts.append("cache=%s,cache_size=%s" % (self.cache, fmt_size(self.cache_size)))
            if cache_opts:
                opts.append(cache_opts)
        cmd = [os.path.join(self.args.build, "tierfs"), "-f"] + \
            (["-o", ",".join(opts)] if opts else []) + [":".join(self.members), self.mnt]
        self.opts = ",".join(opts)
        self.spawn(cmd, 60, append=True)
        self.model = ""
        if model is not None:
            ms = [l for l in self.log().splitlines() if "member model:" in l]
            self.model = ms[-1].split("member model:", 1)[1].strip() if ms else "?"
        log("%s mounted (-o %s)%s" % (self.name, self.opts,
                                      "; model: " + self.model if self.model else ""))

    def reset_cache(self):
        """Remove the cache directory (unmounted, clean): the next mount makes a new one."""
        assert self.proc is None
        if self.cache:
            shutil.rmtree(self.cache, ignore_errors=True)

    def status(self):
        """The root's user.tierfs.status as a dict (cache.* and the rest)."""
        try:
            raw = os.getxattr(self.mnt, "user.tierfs.status")
        except OSError as e:
            return {"error": str(e)}
        d = {}
        for line in raw.decode(errors="replace").splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                d[k.strip()] = v.strip()
        return d

    def stat_int(self, key, st=None):
        st = st if st is not None else self.status()
        try:
            return int(st.get("cache." + key, "0"))
        except ValueError:
            return 0

    def ctl(self, cmd):
        os.setxattr(self.mnt, "user.tierfs.ctl", cmd.encode())


def zone_layout(args):
    size = args.span * DATA_MEMBERS
    ext = 1 << 20
    hot0 = (size // 4) // ext * ext
    warm0 = (size // 2) // ext * ext
    return {"size": size,
            "hot": (hot0, args.hot_size),
            "warm": (warm0, args.warm_size),
            "cold": (0, size),
            "scan": ((size * 3 // 4) // ext * ext, args.scan_size),
            "dirty": ((size * 3 // 4) // ext * ext, None)}


def rand_bytes(n, seed=SEED):
    r = random.Random(seed)
    return b"".join(r.randbytes(1 << 20) for _ in range(n >> 20)) + \
        r.randbytes(n & ((1 << 20) - 1))


def write_file(path, off, data, size=None, bs=1 << 20, direct=False):
    """Write data at off (bs pieces; O_DIRECT if asked), ftruncate to size first."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | (os.O_DIRECT if direct else 0), 0o644)
    buf = mmap.mmap(-1, bs)
    try:
        if size is not None:
            os.ftruncate(fd, size)
        for i in range(0, len(data), bs):
            piece = data[i:i + bs]
            if direct:
                buf[:len(piece)] = piece
                os.pwritev(fd, [memoryview(buf)[:len(piece)]], off + i)
            else:
                os.pwrite(fd, piece, off + i)
        os.fsync(fd)
    finally:
        os.close(fd)
        buf.close()


def populate(args, arr, data):
    """Unmodelled, uncached mount: the sparse test file and the hot zone's
    real bytes; then unmount (the cache, if any, starts cold)."""
    zl = zone_layout(args)
    arr.mount(model=None, cache=False)
    try:
        write_file(arr.file, zl["hot"][0], data, size=zl["size"])
    finally:
        arr.umount()


def read_direct(path, off, length, bs=1 << 20):
    """O_DIRECT read of [off, off+length): bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, bs)
    out = bytearray()
    try:
        pos = 0
        while pos < length:
            n = os.preadv(fd, [buf], off + pos)
            if n <= 0:
                break
            out += buf[:min(n, length - pos)]
            pos += n
    finally:
        os.close(fd)
        buf.close()
    return bytes(out)


def check_bytes(arr, path, off, data, what):
    got = read_direct(path, off, len(data))
    if hashlib.sha256(got).digest() == hashlib.sha256(data).digest():
        log("  %s: bytes read back match what was written" % what)
        return True
    bad = next((i for i in range(0, len(data), 4096) if got[i:i + 4096] != data[i:i + 4096]),
               None)
    log("  DATA MISMATCH (%s): first bad 4K block at offset %s of the zone; %d bytes read"
        % (what, bad, len(got)))
    return False


# ---------------------------------------------------------------- fio
def fio_run(cmd, timeout, what):
    CLEAN.child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = CLEAN.child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        CLEAN.stop_child()
        raise RuntimeError("%s: %s did not finish in %d s"
                           % (what, os.path.basename(cmd[0]), timeout))
    # only now: a signal during communicate() leaves CLEAN.child for CLEAN.all
    # to stop (fio runs in its own session and does not get the signal)
    rc, CLEAN.child = CLEAN.child.returncode, None
    return rc, out, err


def fio_bg(cmd):
    """Start fio in the background (its own session); stop with fio_stop."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    FIOS.append(p)
    return p


def fio_stop(p, timeout=60):
    """SIGINT (fio then writes its logs and JSON), wait; SIGKILL if it hangs."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    if p in FIOS:
        FIOS.remove(p)
    return p.returncode, out, err


def stop_all_fio():
    for p in list(FIOS):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        FIOS.remove(p)


def fio_json(path):
    with open(path) as f:
        text = f.read()
    return json.loads(text[text.index("{"):])


def per_second_dir(logfile):
    """{direction: {second: iops}} from a --log_avg_msec=1000 iops log."""
    ts = {}
    with open(logfile) as f:
        for line in f:
            fl = [x.strip() for x in line.split(",")]
            if len(fl) < 3:
                continue
            t = int(round(int(fl[0]) / 1000.0))
            d = ts.setdefault(int(fl[2]), {})
            d[t] = d.get(t, 0) + int(fl[1])
    return ts


def plat_idx_to_val(idx, bits=6):
    """fio's histogram bin -> value (ns), as in fio's stat.c."""
    val = 1 << bits
    if idx < (val << 1):
        return idx
    error_bits = (idx >> bits) - 1
    base = 1 << (error_bits + bits)
    k = idx % val
    return base + ((k + 0.5) * (1 << error_bits))


def hist_log(logfile):
    """[(t_ms, dir, [counts])] from a --log_hist_msec clat histogram log (deltas)."""
    rows = []
    with open(logfile) as f:
        for line in f:
            fl = line.split(",")
            if len(fl) < 4:
                continue
            rows.append((int(fl[0]), int(fl[1]), [int(x) for x in fl[3:]]))
    return rows


def hist_pcts(counts, pcts=(50, 90, 99, 99.9)):
    """Percentiles (ms) and mean (ms) of a summed fio histogram."""
    tot = sum(counts)
    if not tot:
        return {}
    out = {}
    cum = 0
    want = sorted(pcts)
    wi = 0
    mean = 0.0
    for i, c in enumerate(counts):
        if not c:
            continue
        v = plat_idx_to_val(i)
        mean += c * v
        cum += c
        while wi < len(want) and cum >= tot * want[wi] / 100.0:
            out["p%g" % want[wi]] = v / 1e6
            wi += 1
    out["mean"] = mean / tot / 1e6
    out["n"] = tot
    return out


def rw_opts(pattern):
    popts, read_pct, prandom = rs.PATTERNS[pattern]
    if read_pct >= 100:
        rw = ["rw=randread"]
    elif read_pct <= 0:
        rw = ["rw=randwrite"]
    else:
        rw = ["rw=randrw", "rwmixread=%d" % read_pct]
    if prandom < 100:
        rw.append("percentage_random=%d" % prandom)
    return [o.lstrip("-") for o in popts] + rw


def zone_jobfile(args, arr, pattern, runtime, ramp, prefix, scan=False):
    """fio job file: hot, warm and cold jobs on the test file (+ a random-order scan)."""
    zl = zone_layout(args)
    pat = ["rw=randread", "bs=4k"] if pattern == "zones" else rw_opts(pattern)
    g = ["[global]", "filename=%s" % arr.file, "direct=1", "ioengine=libaio",
         "time_based=1", "runtime=%gs" % runtime, "randrepeat=0",
         "fallocate=none", "log_avg_msec=1000", "group_reporting=0"]
    if ramp:
        g.append("ramp_time=%gs" % ramp)
    lines = g
    jobs = ["hot", "warm", "cold"] + (["scan"] if scan else [])
    for z in jobs:
        off, sz = zl[z]
        if z == "scan":
            lines += ["", "[scan]", "rw=randread", "bs=64k", "offset=%d" % off, "size=%d" % sz,
                      "iodepth=4", "write_iops_log=%s-scan" % prefix]
            continue
        lines += ["", "[%s]" % z] + pat + ["norandommap=1", "offset=%d" % off, "size=%d" % sz,
                                           "iodepth=%d" % ZONE_QD[z],
                                           "write_iops_log=%s-%s" % (prefix, z)]
    path = prefix + ".fio"
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, jobs


class StatSampler(threading.Thread):
    """cache.* statistics of a mount every `period` seconds."""

    KEYS = ["cache.cached_extents", "cache.dirty_extents", "cache.dirty_bytes",
            "cache.read_hits", "cache.read_misses", "cache.write_hits", "cache.write_misses",
            "cache.promotions", "cache.promote_dropped", "cache.fill_promotions",
            "cache.fill_dropped", "cache.evictions", "cache.seq_bypass",
            "cache.flushed_bytes", "cache.flush_writes", "cache.full_stripe_flushes",
            "cache.throttled", "cache.flush_pending"]

    def __init__(self, arr, period=2.0, t0=None):
        super().__init__(daemon=True)
        self.arr, self.period = arr, period
        self.t0 = t0
        self.rows = []
        self.stop_ev = threading.Event()

    def run(self):
        t0 = self.t0 or time.time()
        while True:
            st = self.arr.status()
            row = {"t": "%.1f" % (time.time() - t0)}
            for k in self.KEYS:
                row[k.split(".", 1)[1]] = st.get(k, "")
            self.rows.append(row)
            if self.stop_ev.wait(self.period):
                break

    def finish(self):
        self.stop_ev.set()
        self.join()

    def window(self, t_from, t_to=None):
        """(first, last) sampled rows inside [t_from, t_to]."""
        rs_ = [r for r in self.rows if float(r["t"]) >= t_from and
               (t_to is None or float(r["t"]) <= t_to)]
        return (rs_[0], rs_[-1]) if rs_ else (None, None)


def zone_fio(args, arr, pattern, runtime, ramp, tag, scan=False, plus=False):
    """Run the zones; returns (json, {zone: {dir: {sec: iops}}})."""
    prefix = os.path.join(arr.dir, "fio-%s" % tag)
    job, jobs = zone_jobfile(args, arr, pattern, runtime, ramp, prefix, scan)
    out = prefix + ".json"
    rc, _o, err = fio_run(["fio", "--output-format=json+" if plus else "--output-format=json",
                           "--output=" + out, job], int(runtime + ramp) * 3 + 120, tag)
    if not arr.alive():
        raise RuntimeError("%s: daemon died: %s" % (arr.name, arr.log()[-500:]))
    try:
        data = fio_json(out)
    except (OSError, ValueError) as e:
        raise RuntimeError("%s: fio exit %d, no JSON (%s): %s" % (tag, rc, e, err[-500:]))
    errs = [j.get("error") for j in data["jobs"] if j.get("error")]
    if rc or errs:
        raise RuntimeError("%s: fio exit %d errors %s: %s" % (tag, rc, errs, err[-500:]))
    logs = {}
    for z in jobs:
        files = sorted(glob.glob("%s-%s_iops*.log" % (prefix, z)))
        logs[z] = per_second_dir(files[0]) if files else {}
    return data, logs


def total_ts(dirs):
    ts = {}
    for d in dirs.values():
        for t, v in d.items():
            ts[t] = ts.get(t, 0) + v
    return ts


def steady(ts, frac=0.25):
    """Median of the last `frac` of a per-second series."""
    ks = sorted(ts)
    if not ks:
        return 0.0
    tail = ks[int(len(ks) * (1 - frac)):] or ks[-1:]
    return statistics.median(ts[k] for k in tail)


def time_to(ts, target, window=5):
    """First second at which the `window`-s moving average reaches target."""
    ks = sorted(ts)
    for i in range(len(ks)):
        w = [ts[k] for k in ks[max(0, i - window + 1):i + 1]]
        if len(w) == min(window, i + 1) and sum(w) / len(w) >= target:
            return ks[i]
    return None


def hit_ratio(a, b):
    """read hit ratio between two status samples (dicts of StatSampler rows)."""
    if not a or not b:
        return None
    h = int(b["read_hits"] or 0) - int(a["read_hits"] or 0)
    m = int(b["read_misses"] or 0) - int(a["read_misses"] or 0)
    return h / (h + m) if h + m else None


def write_csv(path, rows, fields=None):
    if not rows:
        return
    if fields is None:
        fields = []
        for r in rows:
            for k in r:
                if k not in fields:
                    fields.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


# ---------------------------------------------------------------- zones
def cached_warmup(args, arr, runtime, tag, scan=False):
    """One zone run with stats sampling; returns (steady dict, hot ts, sampler, logs, json)."""
    sampler = StatSampler(arr) if arr.cached else None
    if sampler:
        sampler.start()
    try:
        data, logs = zone_fio(args, arr, "zones", runtime, 0, tag, scan=scan, plus=scan)
    finally:
        if sampler:
            sampler.finish()
    return data, logs, sampler


def part_zones(args, arrs, out):
    cac, unc = arrs["cached"], arrs["uncached"]
    zl = zone_layout(args)
    series, stats_rows, summ_rows = [], [], []
    for ncq, tc, tu in args.zone_variants:
        variant = "ncq%d" % ncq
        model = "hdd_ncq=%d" % ncq
        for arr in (cac, unc):
            arr.umount()
            arr.reset_cache()
            arr.mount(model=model, threads=args.cached_threads if arr is cac and
                      args.cached_threads is not None else args.threads,
                      cache_opts=args.cache_opts)
        summ = {}
        for arr, runtime in ((cac, tc), (unc, tu)):
            log("zones %s: %s array, 4K random reads, hot QD32 + warm QD4 + cold QD2, %g s"
                % (variant, arr.name, runtime))
            l1 = load1()
            data, logs, sampler = cached_warmup(args, arr, runtime, "zones-%s-%s"
                                                % (variant, arr.name))
            for z in ("hot", "warm", "cold"):
                ts = total_ts(logs[z])
                for t in sorted(ts):
                    series.append({"variant": variant, "array": arr.name, "zone": z, "t": t,
                                   "iops": ts[t]})
                summ[(arr.name, z)] = steady(ts)
            summ[(arr.name, "hot_ts")] = total_ts(logs["hot"])
            summ[(arr.name, "load1")] = l1
            if sampler:
                for r in sampler.rows:
                    stats_rows.append(dict(variant=variant, **r))
                st = arr.status()
                summ["stats"] = st
                rows = sampler.rows
                q = rows[int(len(rows) * 0.75)] if rows else None
                summ["hit_last_q"] = hit_ratio(q, rows[-1] if rows else None)
                log("  cache after the run: %s extents, %s promotions, %s dropped, "
                    "%s fills, %s fills dropped, "
                    "%s hits, %s misses" % (st.get("cache.cached_extents"),
                                            st.get("cache.promotions"),
                                            st.get("cache.promote_dropped"),
                                            st.get("cache.fill_promotions", "-"),
                                            st.get("cache.fill_dropped", "-"),
                                            st.get("cache.read_hits"),
                                            st.get("cache.read_misses")))
                summ["sampler"] = sampler
            log("  %s: steady hot %.0f, warm %.0f, cold %.0f IOPS"
                % (arr.name, summ[(arr.name, "hot")], summ[(arr.name, "warm")],
                   summ[(arr.name, "cold")]))
        # the hot zone read once from the uncached array, sequentially (1M, QD 1)
        prefix = os.path.join(unc.dir, "fio-hotseq-%s" % variant)
        rc, _o, err = fio_run(["fio", "--name=hotseq", "--filename=" + unc.file, "--direct=1",
                               "--ioengine=psync", "--rw=read", "--bs=1M",
                               "--offset=%d" % zl["hot"][0], "--size=%d" % args.hot_size,
                               "--output-format=json", "--output=" + prefix + ".json"],
                              900, "hotseq")
        seq_s = ""
        if rc == 0:
            seq_s = fio_json(prefix + ".json")["jobs"][0]["read"]["runtime"] / 1000.0
        hc, hu = summ[("cached", "hot")], summ[("uncached", "hot")]
        t90 = time_to(summ[("cached", "hot_ts")], 0.9 * hc) if hc else None
        rand_s = (args.hot_size / 4096) / hu if hu else None
        # promotions of the hot zone: from the sampler, when did promotions reach the
        # hot zone's extent count (an upper bound of the hot zone being cached)
        hot_ext = args.hot_size // (cac.stat_int("extent") or args.extent)
        t_prom = next((float(r["t"]) for r in summ["sampler"].rows
                       if int(r["promotions"] or 0) >= hot_ext), None)
        st = summ.get("stats", {})
        row = {"variant": variant, "ncq": ncq, "extent": cac.stat_int("extent"),
               "hot_size": args.hot_size,
               "warm_size": args.warm_size, "file_size": zl["size"],
               "cache_size": args.cache_size, "threads": args.threads,
               "cached_threads": args.threads if args.cached_threads is None
               else args.cached_threads or "default",
               "zone_time_s": tc, "uncached_time_s": tu,
               "hot_cached_iops": "%.0f" % hc, "hot_uncached_iops": "%.0f" % hu,
               "hot_ratio": "%.1f" % (hc / hu) if hu else "",
               "warm_cached_iops": "%.0f" % summ[("cached", "warm")],
               "warm_uncached_iops": "%.0f" % summ[("uncached", "warm")],
               "cold_cached_iops": "%.0f" % summ[("cached", "cold")],
               "cold_uncached_iops": "%.0f" % summ[("uncached", "cold")],
               "t90_s": t90 if t90 is not None else "",
               "t_promoted_hot_count_s": t_prom if t_prom is not None else "",
               "hot_seq_read_s": "%.2f" % seq_s if seq_s != "" else "",
               "hot_rand_read_s": "%.0f" % rand_s if rand_s else "",
               "hit_ratio_last_quarter": "%.4f" % summ["hit_last_q"]
               if summ.get("hit_last_q") is not None else "",
               "cached_extents": st.get("cache.cached_extents", ""),
               "hot_extents_total": hot_ext,
               "promotions": st.get("cache.promotions", ""),
               "promote_dropped": st.get("cache.promote_dropped", ""),
               "evictions": st.get("cache.evictions", ""),
               "load1_cached": summ[("cached", "load1")],
               "load1_uncached": summ[("uncached", "load1")]}
        summ_rows.append(row)
        write_csv(os.path.join(out, "cache_zones.csv"), summ_rows)
        write_csv(os.path.join(out, "cache_zones_ts.csv"), series)
        write_csv(os.path.join(out, "cache_zones_stats.csv"), stats_rows)
        log("zones %s: hot zone %s cached vs %s uncached IOPS (%sx); 90%% of steady state "
            "after %s s; hot zone read once: %s s sequential, ~%s s in random 4K order"
            % (variant, row["hot_cached_iops"], row["hot_uncached_iops"], row["hot_ratio"],
               row["t90_s"], row["hot_seq_read_s"], row["hot_rand_read_s"]))


# ---------------------------------------------------------------- extent / policy
def part_extent(args, arrs, out):
    cac = arrs["cached"]
    rows, series = [], []
    for ext in args.extents:
        cac.umount()
        cac.reset_cache()
        cac.mount(model="hdd_ncq=1", threads=args.threads,
                  cache_opts=",".join(x for x in ("cache_extent=%s" % fmt_size(ext),
                                                  args.cache_opts) if x))
        log("extent %s: zones, cached, NCQ 1, %g s" % (fmt_size(ext), args.extent_time))
        l1 = load1()
        data, logs, sampler = cached_warmup(args, cac, args.extent_time,
                                            "extent-%s" % fmt_size(ext))
        hot = total_ts(logs["hot"])
        for z in ("hot", "warm", "cold"):
            for t, v in sorted(total_ts(logs[z]).items()):
                series.append({"extent": ext, "zone": z, "t": t, "iops": v})
        hc = steady(hot)
        t90 = time_to(hot, 0.9 * hc) if hc else None
        srows = sampler.rows
        q = srows[int(len(srows) * 0.75)] if srows else None
        hr = hit_ratio(q, srows[-1] if srows else None)
        hr_all = hit_ratio(srows[0], srows[-1]) if srows else None
        st = cac.status()
        row = {"extent": ext, "time_s": args.extent_time,
               "hot_iops": "%.0f" % hc, "warm_iops": "%.0f" % steady(total_ts(logs["warm"])),
               "cold_iops": "%.0f" % steady(total_ts(logs["cold"])),
               "t90_s": t90 if t90 is not None else "",
               "hit_ratio_last_quarter": "%.4f" % hr if hr is not None else "",
               "hit_ratio_run": "%.4f" % hr_all if hr_all is not None else "",
               "slots": st.get("cache.slots", ""),
               "cached_extents": st.get("cache.cached_extents", ""),
               "promotions": st.get("cache.promotions", ""),
               "promote_dropped": st.get("cache.promote_dropped", ""),
               "evictions": st.get("cache.evictions", ""), "load1": l1}
        rows.append(row)
        write_csv(os.path.join(out, "cache_extent.csv"), rows)
        write_csv(os.path.join(out, "cache_extent_ts.csv"), series)
        log("  extent %s: hot %s IOPS, t90 %s s, hit ratio (last quarter) %s, %s/%s slots"
            % (fmt_size(ext), row["hot_iops"], row["t90_s"], row["hit_ratio_last_quarter"],
               row["cached_extents"], row["slots"]))


def fast_fraction(job, limit_ms):
    """Share of a job's reads that completed within limit_ms (json+ bins)."""
    bins = job["read"]["clat_ns"].get("bins", {})
    tot = sum(bins.values())
    fast = sum(v for k, v in bins.items() if int(k) <= limit_ms * 1e6)
    return fast / tot if tot else None


def part_policy(args, arrs, out):
    cac = arrs["cached"]
    rows = []
    for promote in args.policy_promote:
        for pol in ("lru", "s3fifo"):
            cac.umount()
            cac.reset_cache()
            opts = "cache_policy=%s,cache_promote=%d" % (pol, promote)
            cac.mount(model="hdd_ncq=1", threads=args.threads, cache_opts=opts)
            log("policy %s T=%d: zones + random-order scan of %s, %g s"
                % (pol, promote, fmt_size(args.scan_size), args.policy_time))
            l1 = load1()
            data, logs, sampler = cached_warmup(args, cac, args.policy_time,
                                                "policy-%s-%d" % (pol, promote), scan=True)
            srows = sampler.rows
            half = srows[len(srows) // 2] if srows else None
            hr = hit_ratio(half, srows[-1] if srows else None)
            st = cac.status()
            row = {"policy": pol, "promote": promote, "time_s": args.policy_time,
                   "hit_ratio_2nd_half": "%.4f" % hr if hr is not None else "",
                   "load1": l1}
            for z, job in zip(("hot", "warm", "cold", "scan"), data["jobs"]):
                row["%s_iops" % z] = "%.0f" % steady(total_ts(logs[z]), 0.5)
                ff = fast_fraction(job, 2.0)
                row["%s_fast_2ms" % z] = "%.4f" % ff if ff is not None else ""
            for k in ("cached_extents", "promotions", "promote_dropped", "evictions"):
                row[k] = st.get("cache." + k, "")
            rows.append(row)
            write_csv(os.path.join(out, "cache_policy.csv"), rows)
            log("  %s T=%d: hit ratio (2nd half) %s; hot %s IOPS (%s of reads < 2 ms), "
                "warm %s (%s), scan %s; %s promotions, %s evictions"
                % (pol, promote, row["hit_ratio_2nd_half"], row["hot_iops"],
                   row["hot_fast_2ms"], row["warm_iops"], row["warm_fast_2ms"],
                   row["scan_iops"], row["promotions"], row["evictions"]))


# ---------------------------------------------------------------- hits
def promote_all(arr, path, off, size, max_passes=12):
    """64K random reads of [off, off+size) until a pass has no read misses."""
    prev = None
    for i in range(max_passes):
        before = arr.stat_int("read_misses")
        rc, _o, err = fio_run(["fio", "--name=promote", "--filename=" + path,
                               "--direct=1", "--ioengine=libaio", "--iodepth=32",
                               "--rw=randread", "--bs=64k", "--randrepeat=0",
                               "--offset=%d" % off, "--size=%d" % size,
                               "--output-format=json", "--output=/dev/null"], 900, "promote")
        if rc:
            raise RuntimeError("promote pass: fio exit %d: %s" % (rc, err[-300:]))
        time.sleep(1)   # let the promoters drain their queue
        st = arr.status()
        misses = arr.stat_int("read_misses", st) - before
        log("  %s pre-read pass %d: %d misses of %d reads; %s extents cached, %s promotions"
            % (arr.name, i + 1, misses, size >> 16, st.get("cache.cached_extents"),
               st.get("cache.promotions")))
        if misses == 0:
            return i + 1, 0
        prev = misses
    return max_passes, prev


def proc_cpu_s(pid):
    """User + system CPU seconds of a process (all its threads) so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def build_pll(work):
    src = "/usr/share/doc/libfuse3-dev/examples"
    d = os.path.join(work, "pll-build")
    os.makedirs(d, exist_ok=True)
    for name in ("passthrough_ll.c", "passthrough_helpers.h"):
        p = os.path.join(src, name)
        if os.path.exists(p):
            shutil.copy(p, d)
        elif os.path.exists(p + ".gz"):
            with open(os.path.join(d, name), "wb") as f:
                subprocess.run(["gzip", "-dc", p + ".gz"], stdout=f, check=True)
        elif name.endswith(".c"):
            raise RuntimeError("no passthrough_ll.c under %s (install libfuse3-dev)" % src)
    flags = run(["pkg-config", "--cflags", "--libs", "fuse3"]).stdout.split()
    exe = os.path.join(d, "passthrough_ll")
    r = run(["gcc", "-O2", "-Wall", "-o", exe, os.path.join(d, "passthrough_ll.c")] + flags)
    if r.returncode:
        raise RuntimeError("passthrough_ll did not compile: " + r.stderr[-500:])
    return exe


def part_hits(args, out):
    size = args.hit_size
    data = rand_bytes(size, SEED + 1)
    tfs = {}
    alt = "tierfs%d" % args.hit_threads   # the second tierfs, other max_threads
    variants = [("tierfs", None), (alt, args.hit_threads)]
    work = tempfile.mkdtemp(prefix="cache-bench-peers-", dir=args.tmpdir)
    CLEAN.dirs.append(work)
    pll = None
    pll_mnt = os.path.join(work, "pllmnt")
    rows = []
    info = {}
    try:
        for name, threads in variants:
            arr = Array(args, "hits-" + name, True, cache_size=args.hit_cache_size)
            tfs[name] = arr
            arr.mkfs()
            arr.mount(model=None, cache=False)
            try:
                write_file(arr.file, 0, data)
            finally:
                arr.umount()
            arr.mount(model=None, threads=threads, cache_opts="cache_promote=1")
            log("hits: pre-reading %s on %s (cache_promote=1)" % (fmt_size(size), name))
            passes, left = promote_all(arr, arr.file, 0, size)
            ok = check_bytes(arr, arr.file, 0, data, name + " through the cache")
            info[name] = {"passes": passes, "left": left or 0, "ok": int(ok),
                          "opts": arr.opts}
        exe = build_pll(work)
        raw_dir, pll_src = os.path.join(work, "raw"), os.path.join(work, "pllsrc")
        for d in (raw_dir, pll_src, pll_mnt):
            os.mkdir(d)
        for d in (raw_dir, pll_src):
            write_file(os.path.join(d, "data.bin"), 0, data)
        CLEAN.mounts.append(pll_mnt)
        plog = open(os.path.join(work, "pll.log"), "w")
        pll = subprocess.Popen([exe, "-f", "-o", "source=" + pll_src, pll_mnt],
                               stdin=subprocess.DEVNULL, stdout=plog, stderr=plog,
                               start_new_session=True)
        plog.close()
        CLEAN.procs.append(pll)
        deadline = time.time() + 15
        while not mounted(pll_mnt):
            if pll.poll() is not None or time.time() > deadline:
                raise RuntimeError("passthrough_ll did not mount")
            time.sleep(0.05)
        targets = {"tierfs": tfs["tierfs"].file, alt: tfs[alt].file,
                   "pll": os.path.join(pll_mnt, "data.bin"),
                   "raw": os.path.join(raw_dir, "data.bin")}
        order = ["tierfs", "pll", "raw", alt]
        for rnd in range(args.rounds):
            o = order[rnd % len(order):] + order[:rnd % len(order)]
            for qd in (1, 32):
                for t in o:
                    eng = ["--ioengine=psync"] if qd == 1 else ["--ioengine=libaio",
                                                                "--iodepth=32"]
                    jpath = os.path.join(work, "hit-%s-qd%d-r%d.json" % (t, qd, rnd))
                    arr = tfs.get(t)
                    before = arr.stat_int("read_misses") if arr else None
                    pid = arr.proc.pid if arr else pll.pid if t == "pll" else None
                    cpu0 = proc_cpu_s(pid) if pid else None
                    rc, _o, err = fio_run(
                        ["fio", "--name=hit", "--filename=" + targets[t], "--direct=1",
                         "--rw=randread", "--bs=4k", "--size=%d" % size, "--time_based",
                         "--runtime=%gs" % args.hit_time, "--ramp_time=1s",
                         "--norandommap", "--randrepeat=0", "--output-format=json",
                         "--output=" + jpath] + eng, int(args.hit_time) * 3 + 60, "hit")
                    if rc:
                        raise RuntimeError("hits %s QD%d: fio exit %d: %s"
                                           % (t, qd, rc, err[-300:]))
                    cpu = proc_cpu_s(pid) - cpu0 if pid else None
                    j = fio_json(jpath)["jobs"][0]["read"]
                    miss = arr.stat_int("read_misses") - before if arr else ""
                    # the daemon's CPU per request (ramp included in both): far
                    # less noisy than IOPS on a shared machine
                    ios = j["total_ios"] + j["iops"] * 1.0
                    row = {"round": rnd, "target": t, "qd": qd, "iops": "%.0f" % j["iops"],
                           "lat_us": "%.1f" % (j["lat_ns"]["mean"] / 1e3),
                           "p99_us": "%.1f" % (j["clat_ns"]["percentile"]["99.000000"] / 1e3),
                           "misses": miss,
                           "daemon_cpu_us_per_op": "%.1f" % (cpu * 1e6 / ios) if cpu else "",
                           "load1": load1()}
                    rows.append(row)
                    log("  round %d QD%d %-9s %8s IOPS  %s us  %s us CPU/op%s  (load %s)"
                        % (rnd + 1, qd, t, row["iops"], row["lat_us"],
                           row["daemon_cpu_us_per_op"] or "-",
                           "  (%s cache misses)" % miss if miss != "" else "", row["load1"]))
        write_csv(os.path.join(out, "cache_hits.csv"), rows)
    finally:
        if pll is not None:
            unmount(pll_mnt)
            stop_daemon(pll)
        for arr in tfs.values():
            errs = arr.errors()
            if errs:
                log("%s: daemon logged:\n  %s" % (arr.name, "\n  ".join(errs[:10])))
            arr.umount()
            rs.remove_dir(arr.dir, args.keep)
    summ = []
    for qd in (1, 32):
        med = {t: statistics.median(float(r["iops"]) for r in rows
                                    if r["target"] == t and r["qd"] == qd) for t in order}
        lat = {t: statistics.median(float(r["lat_us"]) for r in rows
                                    if r["target"] == t and r["qd"] == qd) for t in order}
        # ratios within each round, then their median (the load drifts between rounds)
        def rr(a, b):
            vals = []
            for rnd in range(args.rounds):
                x = [float(r["iops"]) for r in rows if r["round"] == rnd and r["qd"] == qd
                     and r["target"] == a]
                y = [float(r["iops"]) for r in rows if r["round"] == rnd and r["qd"] == qd
                     and r["target"] == b]
                if x and y and y[0]:
                    vals.append(x[0] / y[0])
            return statistics.median(vals) if vals else 0.0
        s = {"qd": qd, "rounds": args.rounds, "hit_time_s": args.hit_time,
             "hit_size": size,
             "promote_passes": "/".join(str(info[n]["passes"]) for n, _ in variants),
             "data_ok": min(info[n]["ok"] for n, _ in variants),
             "misses": sum(int(r["misses"]) for r in rows if r["misses"] != "" and r["qd"] == qd)}
        for t in order:
            s["%s_iops" % t] = "%.0f" % med[t]
            s["%s_lat_us" % t] = "%.1f" % lat[t]
            cpus = [float(r["daemon_cpu_us_per_op"]) for r in rows
                    if r["target"] == t and r["qd"] == qd and r["daemon_cpu_us_per_op"]]
            s["%s_cpu_us_per_op" % t] = "%.1f" % statistics.median(cpus) if cpus else ""
        for a, b in (("tierfs", "raw"), ("pll", "raw"), ("tierfs", "pll"),
                     (alt, "raw"), (alt, "pll"), (alt, "tierfs")):
            s["%s_%s" % (a, b)] = "%.2f" % (med[a] / med[b])
            s["%s_%s_rounds" % (a, b)] = "%.2f" % rr(a, b)
        summ.append(s)
        log("hits QD%d (median of %d): tierfs %s, %s %s, pll %s, raw %s IOPS; "
            "tierfs/raw %s, pll/raw %s, tierfs/pll %s (per-round median %s), %s/pll %s "
            "(per-round median %s)"
            % (qd, args.rounds, s["tierfs_iops"], alt, s[alt + "_iops"], s["pll_iops"],
               s["raw_iops"], s["tierfs_raw"], s["pll_raw"], s["tierfs_pll"],
               s["tierfs_pll_rounds"], alt, s[alt + "_pll"], s[alt + "_pll_rounds"]))
        log("hits QD%d daemon CPU per request (median): tierfs %s us, %s %s us, pll %s us"
            % (qd, s["tierfs_cpu_us_per_op"], alt, s[alt + "_cpu_us_per_op"],
               s["pll_cpu_us_per_op"]))
    write_csv(os.path.join(out, "cache_hits_summary.csv"), summ)
    rs.remove_dir(work, args.keep)


# ---------------------------------------------------------------- flush
def part_flush(args, out):
    zl = zone_layout(args)
    arr = Array(args, "flush", True, cache_size=args.flush_cache_size)
    arr.mkfs()
    ts_rows, summ_rows, stat_rows = [], [], []
    try:
        arr.mount(model="hdd_ncq=1")
        st = arr.status()
        slots = arr.stat_int("slots", st)
        ext = arr.stat_int("extent", st)
        hot0, hsz = zl["hot"][0], args.flush_hot
        data = rand_bytes(hsz, SEED + 2)
        # the hot zone goes through the cache (64K writes stay in it: below one row) and
        # is flushed: it stays cached, clean
        log("flush: writing the %s hot zone through the cache (64K writes) and flushing it"
            % fmt_size(hsz))
        write_file(arr.file, hot0, data, size=zl["size"], bs=64 << 10, direct=True)
        d = drain(arr, args.flush_timeout)
        st = arr.status()
        log("  flushed in %s s: %s extents cached, %s dirty, %s full-stripe flushes"
            % ("%.1f" % d if d is not None else "(timeout)", st.get("cache.cached_extents"),
               st.get("cache.dirty_extents"), st.get("cache.full_stripe_flushes")))
        check_bytes(arr, arr.file, hot0, data, "flush hot zone")
        dirty0 = zl["dirty"][0]
        region = int(slots * args.flush_region_pct / 100) * ext
        target = int(slots * args.flush_dirty_pct / 100)
        for mix in args.flush_mixes:
            r = flush_run(args, arr, mix, hot0, hsz, dirty0, region, target, slots,
                          ts_rows, stat_rows)
            summ_rows.append(r)
            write_csv(os.path.join(out, "cache_flush.csv"), summ_rows)
            write_csv(os.path.join(out, "cache_flush_ts.csv"), ts_rows)
            write_csv(os.path.join(out, "cache_flush_stats.csv"), stat_rows)
        check_bytes(arr, arr.file, hot0, data, "flush hot zone after the runs") \
            if "rw70" not in args.flush_mixes else None
        errs = arr.errors()
        if errs:
            log("flush array: daemon logged:\n  %s" % "\n  ".join(errs[:10]))
    finally:
        stop_all_fio()
        arr.umount()
        rs.remove_dir(arr.dir, args.keep)


def flush_run(args, arr, mix, hot0, hsz, dirty0, region, target, slots, ts_rows, stat_rows):
    tag = "flush-%s" % mix
    prefix = os.path.join(arr.dir, tag)
    rw = ["--rw=randread"] if mix == "read" else ["--rw=randrw", "--rwmixread=70"]
    fg_cmd = ["fio", "--name=fg", "--filename=" + arr.file, "--direct=1", "--ioengine=libaio",
              "--iodepth=32", "--bs=4k", "--offset=%d" % hot0, "--size=%d" % hsz,
              "--norandommap", "--randrepeat=0", "--time_based", "--runtime=3600s",
              "--log_avg_msec=1000", "--write_iops_log=" + prefix,
              "--log_hist_msec=1000", "--write_hist_log=" + prefix,
              "--output-format=json", "--output=" + prefix + ".json"] + rw
    marks = {}
    t0 = time.time()
    sampler = StatSampler(arr, 1.0, t0=t0)
    sampler.start()
    fg = fio_bg(fg_cmd)
    res = {}
    try:
        def mark(name):
            marks[name] = time.time() - t0
            log("  %s: %-8s at %5.1f s (dirty extents %s, load %s)"
                % (tag, name, marks[name], arr.stat_int("dirty_extents"), load1()))

        def wait(sec):
            end = time.time() + sec
            while time.time() < end:
                if fg.poll() is not None:
                    raise RuntimeError("foreground fio exited early: %s" % fg.stderr.read()[-300:])
                if not arr.alive():
                    raise RuntimeError("daemon died: %s" % arr.log()[-500:])
                time.sleep(0.2)
        mark("before")
        wait(args.flush_before)
        res["dirty_before"] = arr.stat_int("dirty_extents")
        mark("dirtying")
        dcmd = ["fio", "--name=dirt", "--filename=" + arr.file, "--direct=1",
                "--ioengine=libaio", "--iodepth=8", "--bs=4k", "--rw=randwrite",
                "--offset=%d" % dirty0, "--size=%d" % region, "--norandommap",
                "--randrepeat=0", "--time_based", "--runtime=600s",
                "--output-format=json", "--output=" + prefix + "-dirt.json"]
        dp = fio_bg(dcmd)
        tend = time.time() + args.flush_dirty_timeout
        while arr.stat_int("dirty_extents") < target and time.time() < tend:
            if dp.poll() is not None:
                break
            time.sleep(0.2)
        rc, _o, err = fio_stop(dp)
        try:
            dj = fio_json(prefix + "-dirt.json")["jobs"][0]["write"]
            res["dirt_writes"] = dj["total_ios"]
            res["dirt_iops"] = "%.0f" % dj["iops"]
        except (OSError, ValueError, KeyError):
            pass
        mark("paced")
        res["dirty_at_paced"] = arr.stat_int("dirty_extents")
        wait(args.flush_paced)
        mark("flush")
        res["dirty_at_flush"] = arr.stat_int("dirty_extents")
        if mix == "read":
            d = drain(arr, args.flush_timeout)
        else:
            # the foreground writes keep the hot zone dirty, so "flush everything" does
            # not end while they run (it chases them): the phase ends when the dirt is
            # back to what the foreground alone kept at the end of "before"
            level = int(res["dirty_before"] * 1.1) + 16
            d = drain(arr, args.flush_timeout, level=level)
            res["flush_end_level"] = level
        if d is None:
            log("  %s: the flush did not end in %g s (%d dirty extents left)"
                % (tag, args.flush_timeout, arr.stat_int("dirty_extents")))
            res["flush_timeout"] = 1
        res["flush_pending_after"] = arr.status().get("cache.flush_pending", "")
        mark("after")
        wait(args.flush_after)
        mark("end")
    finally:
        rc, _o, err = fio_stop(fg)
        sampler.finish()
    # fio's log clock starts when its job starts, a little after Popen: shift by the
    # first log entry vs. the run length
    j = fio_json(prefix + ".json")
    runtime_ms = j["jobs"][0]["job_runtime"] if "job_runtime" in j["jobs"][0] else None
    offset = 0.0
    if runtime_ms:
        offset = max(0.0, marks["end"] - runtime_ms / 1000.0)
    iops = per_second_dir(sorted(glob.glob(prefix + "_iops*.log"))[0])
    hist = hist_log(sorted(glob.glob(prefix + "_clat_hist*.log"))[0])
    phases = ["before", "dirtying", "paced", "flush", "after"]
    bounds = {p: (marks[p], marks[phases[i + 1]] if i + 1 < len(phases) else marks["end"])
              for i, p in enumerate(phases)}
    for t in sorted(set(iops.get(0, {})) | set(iops.get(1, {}))):
        tt = t + offset
        ph = next((p for p in phases if bounds[p][0] <= tt < bounds[p][1]), "")
        ts_rows.append({"mix": mix, "t": "%.1f" % tt, "phase": ph,
                        "read_iops": iops.get(0, {}).get(t, 0),
                        "write_iops": iops.get(1, {}).get(t, 0)})
    for r in sampler.rows:
        stat_rows.append(dict(mix=mix, **r))
    row = {"mix": mix, "slots": slots, "region_extents": region // arr.stat_int("extent"),
           "target_dirty": target, "flush_hot": hsz, "offset_s": "%.2f" % offset}
    row.update(res)
    for p in phases:
        a, b = bounds[p]
        # skip the first second of each phase (a partial second, the change itself)
        secs = [r for r in ts_rows if r["mix"] == mix and r["phase"] == p
                and a + 1 <= float(r["t"]) < b]
        vals = [int(r["read_iops"]) + int(r["write_iops"]) for r in secs]
        row["%s_s" % p] = "%.1f" % (b - a)
        row["%s_iops" % p] = "%.0f" % statistics.median(vals) if vals else ""
        row["%s_iops_min" % p] = min(vals) if vals else ""
        counts = None
        for (tms, d, c) in hist:
            tt = tms / 1000.0 + offset
            if d == 0 and a + 1 <= tt < b:
                counts = c if counts is None else [x + y for x, y in zip(counts, c)]
        pc = hist_pcts(counts) if counts else {}
        for k in ("mean", "p50", "p90", "p99", "p99.9"):
            row["%s_read_%s_ms" % (p, k)] = "%.3f" % pc[k] if k in pc else ""
        fa, fb = sampler.window(a, b)
        if fa and fb:
            row["%s_flushed_mb" % p] = "%.1f" % ((int(fb["flushed_bytes"] or 0) -
                                                  int(fa["flushed_bytes"] or 0)) / 2**20)
            row["%s_read_misses" % p] = int(fb["read_misses"] or 0) - int(fa["read_misses"] or 0)
    b0 = float(row["before_iops"] or 0)
    for p in ("dirtying", "paced", "flush", "after"):
        v = float(row["%s_iops" % p] or 0)
        row["%s_vs_before" % p] = "%.2f" % (v / b0) if b0 and v else ""
    a0 = float(row["after_iops"] or 0)
    if b0 and a0 and row["flush_iops"]:   # the load on a shared machine drifts: also against before and after
        row["flush_vs_before_after"] = "%.2f" % (float(row["flush_iops"] or 0) * 2 / (b0 + a0))
    row["load1_end"] = load1()
    log("  %s: IOPS before %s, dirtying %s, paced %s, flush %s (%.0f s, %s MiB), after %s; "
        "flush/before %s; read p99 before %s ms, during flush %s ms"
        % (tag, row["before_iops"], row["dirtying_iops"], row["paced_iops"], row["flush_iops"],
           float(row["flush_s"]), row.get("flush_flushed_mb"), row["after_iops"],
           row["flush_vs_before"], row["before_read_p99_ms"], row["flush_read_p99_ms"]))
    return row


# ---------------------------------------------------------------- profiles
def drain(arr, timeout, level=None):
    """"flush" on user.tierfs.ctl (it only starts the flush) and wait until no
    extent is dirty and no flush is pending (or, with level, until at most
    level extents are dirty); seconds, or None on timeout."""
    t0 = time.time()
    try:
        arr.ctl("flush")
    except OSError as e:
        log("  flush: %s" % e)
        return None
    while time.time() - t0 < timeout:
        st = arr.status()
        if level is not None and arr.stat_int("dirty_extents", st) <= level:
            return time.time() - t0
        if arr.stat_int("dirty_extents", st) == 0 and st.get("cache.flush_pending") == "0":
            return time.time() - t0
        if not arr.alive():
            raise RuntimeError("%s: daemon died: %s" % (arr.name, arr.log()[-500:]))
        time.sleep(0.25)
    return None


def part_profiles(args, arrs, out):
    pname = {p: ("p99.9" if p == "99.900000" else "p" + p.split(".")[0]) for p in PCTS}
    rows = []
    path = os.path.join(out, "cache_profiles.csv")
    for i, prof in enumerate(args.profiles):
        order = ["cached", "uncached"] if i % 2 == 0 else ["uncached", "cached"]
        for name in order:
            arr = arrs[name]
            drain_s = ""
            if arr.cached:
                d = drain(arr, args.drain_timeout)
                drain_s = "%.1f" % d if d is not None else "timeout"
            before = arr.status() if arr.cached else {}
            l1 = load1()
            log("profiles: %s on the %s array (%g s + %g s ramp)%s"
                % (prof, name, args.profile_time, args.profile_ramp,
                   ", drained in %s s" % drain_s if drain_s else ""))
            data, logs = zone_fio(args, arr, prof, args.profile_time, args.profile_ramp,
                                  "prof-%s-%s" % (prof, name))
            after = arr.status() if arr.cached else {}

            def delta(k):
                if not arr.cached:
                    return ""
                return int(after.get("cache." + k, 0)) - int(before.get("cache." + k, 0))
            tot = {"iops": 0.0, "read_iops": 0.0, "write_iops": 0.0}
            for z, job in zip(("hot", "warm", "cold"), data["jobs"]):
                rate = {d: (sum(v.values()) / len(v) if v else 0.0) for d, v in logs[z].items()}
                r = {"profile": prof, "array": name, "zone": z, "qd": ZONE_QD[z],
                     "read_iops": "%.1f" % rate.get(0, 0.0),
                     "write_iops": "%.1f" % rate.get(1, 0.0),
                     "iops": "%.1f" % (rate.get(0, 0.0) + rate.get(1, 0.0)),
                     "runtime_s": args.profile_time, "ramp_s": args.profile_ramp,
                     "drain_s": drain_s, "load1": l1, "model": arr.model}
                for d, key in ((job["read"], "read"), (job["write"], "write")):
                    if d["iops"] > 0:
                        r["%s_clat_mean_ms" % key] = "%.3f" % (d["clat_ns"]["mean"] / 1e6)
                        pc = d["clat_ns"].get("percentile", {})
                        for p in PCTS:
                            if p in pc:
                                r["%s_clat_%s_ms" % (key, pname[p])] = "%.3f" % (pc[p] / 1e6)
                for k in tot:
                    tot[k] += float(r[k])
                rows.append(r)
            rows.append({"profile": prof, "array": name, "zone": "all",
                         "iops": "%.1f" % tot["iops"], "read_iops": "%.1f" % tot["read_iops"],
                         "write_iops": "%.1f" % tot["write_iops"],
                         "runtime_s": args.profile_time, "ramp_s": args.profile_ramp,
                         "drain_s": drain_s, "dirty_bytes_end": after.get("cache.dirty_bytes", ""),
                         "read_hits": delta("read_hits"), "read_misses": delta("read_misses"),
                         "write_hits": delta("write_hits"), "write_misses": delta("write_misses"),
                         "throttled": delta("throttled"), "load1": l1, "model": arr.model})
            write_csv(path, rows)
            hot = rows[-4]
            log("  %s %s: hot %s IOPS (read clat p50 %s ms, write p50 %s ms), all zones %s IOPS"
                % (prof, name, hot["iops"], hot.get("read_clat_p50_ms", "-"),
                   hot.get("write_clat_p50_ms", "-"), rows[-1]["iops"]))


# ---------------------------------------------------------------- main
def variants_arg(s):
    out = []
    for part in s.split(","):
        f = part.strip().split(":")
        if len(f) != 3:
            raise argparse.ArgumentTypeError("NCQ:CACHED_S:UNCACHED_S, comma-separated")
        out.append((int(f[0]), float(f[1]), float(f[2])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--build", required=True, help="meson build dir with tierfs and mkfs.tierfs")
    ap.add_argument("--out", required=True, help="directory for the CSVs and env-cache.txt")
    ap.add_argument("--img", help="directory for the PNGs (default: --out)")
    ap.add_argument("--tmpdir", default=None,
                    help="where the arrays, caches and peer directories go (default: $TMPDIR "
                         "or /tmp)")
    ap.add_argument("--parts", default="zones,hits,flush",
                    help="zones, hits, flush, extent, policy, profiles (default %(default)s)")
    ap.add_argument("--zone-variants", type=variants_arg,
                    default=variants_arg("1:240:60,32:150:45"),
                    help="NCQ:CACHED_S:UNCACHED_S,... (default 1:240:60,32:150:45)")
    ap.add_argument("--hit-time", type=float, default=8, help="s per cache-hit point (8)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the hits part (3)")
    ap.add_argument("--hit-size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--hit-cache-size", type=size_arg, default=size_arg("512M"))
    ap.add_argument("--flush-cache-size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--flush-hot", type=size_arg, default=size_arg("64M"),
                    help="hot zone of the flush part (64M: a quarter of its cache)")
    ap.add_argument("--flush-dirty-pct", type=float, default=55)
    ap.add_argument("--flush-region-pct", type=float, default=65,
                    help="region of the random 4K writes, %% of the cache's slots (65)")
    ap.add_argument("--flush-mixes", default="read,rw70", help="read, rw70 (default both)")
    ap.add_argument("--flush-before", type=float, default=20)
    ap.add_argument("--flush-paced", type=float, default=20)
    ap.add_argument("--flush-after", type=float, default=15)
    ap.add_argument("--flush-timeout", type=float, default=300)
    ap.add_argument("--flush-dirty-timeout", type=float, default=60)
    ap.add_argument("--extents", default="16K,64K,256K")
    ap.add_argument("--extent-time", type=float, default=120)
    ap.add_argument("--policy-promote", default="1,2")
    ap.add_argument("--policy-time", type=float, default=120)
    ap.add_argument("--scan-size", type=size_arg, default=size_arg("8G"))
    ap.add_argument("--profiles", default=",".join(PROFILES),
                    help="Iometer profiles of the profiles part (default %(default)s)")
    ap.add_argument("--profile-time", type=float, default=20, help="s per profile point (20)")
    ap.add_argument("--profile-ramp", type=float, default=5, help="ramp per profile point (5)")
    ap.add_argument("--drain-timeout", type=float, default=180)
    ap.add_argument("--hot-size", type=size_arg, default=size_arg("256M"))
    ap.add_argument("--warm-size", type=size_arg, default=size_arg("2G"))
    ap.add_argument("--span", type=size_arg, default=size_arg("512G"),
                    help="bytes of each member's notional disk the test file covers (512G)")
    ap.add_argument("--cache-size", type=size_arg, default=size_arg("1G"))
    ap.add_argument("--threads", type=int, default=128,
                    help="FUSE max_threads of the zone arrays (128: the uncached array needs "
                         "the depth; the hits and flush parts use the default unless noted)")
    ap.add_argument("--hit-threads", type=int, default=128,
                    help="max_threads of the hits part's second tierfs array (128)")
    ap.add_argument("--cached-threads", type=int,
                    help="max_threads of the cached zone array only (0: tierfs's default; "
                         "default: --threads)")
    ap.add_argument("--cache-opts", default="", help="extra cache options, e.g. cache_promote=1")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 64M hot zone, zones 1:60:20 only, 1 round of 4 s hits, "
                         "flush read only with short phases")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = ap.parse_args()

    if args.quick:
        for k, v in (("zone_variants", variants_arg("1:60:20")), ("hit_time", 4),
                     ("rounds", 1), ("hot_size", size_arg("64M")),
                     ("hit_size", size_arg("64M")), ("flush_mixes", "read"),
                     ("flush_before", 8), ("flush_paced", 8), ("flush_after", 6),
                     ("flush_cache_size", size_arg("128M")), ("flush_hot", size_arg("32M")),
                     ("extent_time", 40), ("policy_time", 40), ("profile_time", 8),
                     ("profile_ramp", 2), ("profiles", "database,exchange")):
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    args.profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    args.flush_mixes = [m.strip() for m in args.flush_mixes.split(",") if m.strip()]
    args.extents = [size_arg(x) for x in args.extents.split(",") if x.strip()]
    args.policy_promote = [int(x) for x in args.policy_promote.split(",") if x.strip()]
    args.extent = 64 << 10
    for p in args.profiles:
        if p not in rs.PATTERNS:
            ap.error("unknown profile %s" % p)
    if set(args.flush_mixes) - {"read", "rw70"}:
        ap.error("--flush-mixes takes read, rw70")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if set(parts) - {"zones", "hits", "flush", "extent", "policy", "profiles"}:
        ap.error("--parts takes zones, hits, flush, extent, policy, profiles")
    if args.hot_size % (256 << 10) or args.hot_size + args.warm_size > args.span:
        ap.error("--hot-size must be a multiple of 256K")
    args.build = os.path.abspath(args.build)
    for exe in ("tierfs", "mkfs.tierfs"):
        if not os.access(os.path.join(args.build, exe), os.X_OK):
            ap.error("no %s in %s" % (exe, args.build))
    for exe in ("fio", "fusermount3", "gcc", "pkg-config"):
        if not shutil.which(exe):
            ap.error("%s not found" % exe)
    if args.tmpdir:
        os.makedirs(args.tmpdir, exist_ok=True)
    args.tmpdir = args.tmpdir or tempfile.gettempdir()
    args.out = os.path.abspath(args.out)
    args.img = os.path.abspath(args.img or args.out)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.img, exist_ok=True)
    CLEAN.keep = args.keep
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, rs.on_signal)

    src, commit = rs.source_commit(args.build)
    zl = zone_layout(args)
    env = [
        "date: %s" % datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host: %s %s, %d CPUs" % (os.uname().sysname, os.uname().release, os.cpu_count()),
        "fio: %s" % run(["fio", "--version"]).stdout.strip(),
        "tierfs: %s (source %s, %s)" % (args.build, src, commit),
        "command: %s" % " ".join(sys.argv),
        "zone arrays: %s x%d, chunk %s; max_threads=%d,member_model=hdd7200,hdd_ncq=N; cached: "
        "cache=DIR,cache_size=%s%s; variants (ncq, cached s, uncached s) %s"
        % (LEVEL, MEMBERS, fmt_size(CHUNK), args.threads, fmt_size(args.cache_size),
           "," + args.cache_opts if args.cache_opts else "", args.zone_variants),
        "test file %s (span %s per member); hot %s at %d, warm %s at %d, cold: whole file"
        % (fmt_size(zl["size"]), fmt_size(args.span), fmt_size(args.hot_size), zl["hot"][0],
           fmt_size(args.warm_size), zl["warm"][0]),
        "parts %s; hits %d rounds x %gs over %s; flush: cache %s, hot %s, dirty %g%% of a "
        "%g%% region, mixes %s" % (",".join(parts), args.rounds, args.hit_time,
                                   fmt_size(args.hit_size), fmt_size(args.flush_cache_size),
                                   fmt_size(args.flush_hot), args.flush_dirty_pct,
                                   args.flush_region_pct, ",".join(args.flush_mixes)),
        "loadavg at start: %s" % open("/proc/loadavg").read().strip(),
    ]
    log("\n  ".join(env))
    start = time.time()
    arrs = {}
    with rs.Guard(env, finish=stop_all_fio) as guard:
        zparts = [p for p in parts if p in ("zones", "extent", "policy", "profiles")]
        if zparts:
            data = rand_bytes(args.hot_size)
            for name, cached in (("cached", True), ("uncached", False)):
                if name == "uncached" and zparts in (["extent"], ["policy"],
                                                     ["extent", "policy"]):
                    continue
                arr = Array(args, name, cached)
                arrs[name] = arr
                arr.mkfs()
                populate(args, arr, data)
        for p in parts:
            t0 = time.time()
            if p == "zones":
                part_zones(args, arrs, args.out)
                check_bytes(arrs["cached"], arrs["cached"].file, zl["hot"][0], data,
                            "zones hot zone through the cache")
            elif p == "hits":
                part_hits(args, args.out)
            elif p == "flush":
                part_flush(args, args.out)
            elif p == "extent":
                part_extent(args, arrs, args.out)
            elif p == "policy":
                part_policy(args, arrs, args.out)
            elif p == "profiles":
                for arr in arrs.values():
                    if not arr.alive():
                        arr.mount(model="hdd_ncq=%d" % args.zone_variants[-1][0],
                                  threads=args.threads, cache_opts=args.cache_opts)
                part_profiles(args, arrs, args.out)
            env.append("part %s: %.0f s" % (p, time.time() - t0))
            log(env[-1])
        for arr in arrs.values():
            errs = arr.errors()
            if errs:
                log("%s: daemon logged:\n  %s" % (arr.name, "\n  ".join(errs[:10])))
                env.append("%s daemon logged %d error/warning lines, first: %s"
                           % (arr.name, len(errs), errs[0]))
        for arr in arrs.values():
            t0 = time.time()
            code = arr.umount()
            env.append("%s: unmounted in %.1f s, daemon exit %s" % (arr.name, time.time() - t0,
                                                                    code))
            log(env[-1])
    rc = guard.rc
    env.append("loadavg at end: %s; %.0f s" % (open("/proc/loadavg").read().strip(),
                                               time.time() - start))
    with open(os.path.join(args.out, "env-cache.txt"), "w") as f:
        f.write("\n".join(env) + "\n")
    log("done in %.0f s; results in %s" % (time.time() - start, args.out))
    if not args.no_plot and os.path.exists(os.path.join(HERE, "cache_plot.py")):
        r = subprocess.run([PY, os.path.join(HERE, "cache_plot.py"), "--csv", args.out,
                            "--img", args.img])
        if r.returncode:
            log("cache_plot.py failed (exit %d); the CSVs are complete" % r.returncode)
    return rc


if __name__ == "__main__":
    sys.exit(main())
