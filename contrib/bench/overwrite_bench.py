#!/usr/bin/python3
"""overwrite_bench.py - does the paced flusher leave write-hot extents alone?

Between the dirty watermarks the flusher paces itself.  Destaging an extent
that the application keeps rewriting spends HDD time on bytes that are dirty
again a moment later; keeping it dirty absorbs the overwrites.  This runs the
same workload on builds side by side (alternating, --rounds each):

  * RAID5 of 4 emulated 7200 rpm disks (member_model=hdd7200, NCQ 1),
    chunk 64K, write-back cache of --cache-size (default 256M, 256K extents);
  * a write-hot zone (--hot, default 64M: a quarter of the slots, between the
    default watermarks 20/70), cached and clean at the start, rewritten by
    4K random writes at QD 8, and at
    the same time 4K random reads at QD 4 over a cold 8 GiB region (misses:
    they share the disks with the flusher);
  * --time seconds (30); then the writes stop and the idle flush drains all.

Reported per build: write IOPS, cold-read IOPS, bytes the flusher wrote
during the run, and the seconds the drain took after it.

    overwrite_bench.py --build OLD --build NEW [--label old --label new]
                       [--tmpdir /tmp] [--rounds 2] [--out results.csv]
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

K, M, G = 1 << 10, 1 << 20, 1 << 30


def status(mnt):
    raw = subprocess.run(["getfattr", "--only-values", "-n", "user.tierfs.status", mnt],
                         capture_output=True, text=True, check=True).stdout
    return dict(l.split("=", 1) for l in raw.splitlines() if "=" in l)


def mounted(mnt):
    with open("/proc/mounts") as f:
        return any(l.split()[1] == mnt for l in f)


def umount(mnt, proc):
    if mounted(mnt):
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
    if mounted(mnt):
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
    if proc:
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def fio(name, path, rw, off, size, qd, runtime, out):
    return subprocess.Popen(
        ["fio", "--name=" + name, "--filename=" + path, "--direct=1", "--rw=" + rw,
         "--bs=4k", "--offset=%d" % off, "--size=%d" % size, "--ioengine=libaio",
         "--iodepth=%d" % qd, "--time_based", "--runtime=%ds" % runtime, "--norandommap",
         "--randrepeat=0", "--output-format=json", "--output=" + out],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def one(args, build, label, rnd):
    d = tempfile.mkdtemp(prefix="ovw-%s-" % label, dir=args.tmpdir)
    members = [os.path.join(d, "m%d" % i) for i in range(4)]
    mnt, cache = os.path.join(d, "mnt"), os.path.join(d, "ssd")
    for p in members + [mnt]:
        os.mkdir(p)
    proc = None
    try:
        subprocess.run([os.path.join(build, "mkfs.tierfs"), "--level", "raid5", "--chunk",
                        "64K"] + members, check=True, capture_output=True)
        proc = subprocess.Popen(
            [os.path.join(build, "tierfs"), "-f", "-o",
             "max_threads=64,member_model=hdd7200,cache=%s,cache_size=%s"
             % (cache, args.cache_size), ":".join(members), mnt],
            stdout=open(os.path.join(d, "log"), "w"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 30
        while not mounted(mnt):
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("tierfs did not mount: " + open(os.path.join(d, "log")).read())
            time.sleep(0.05)
        f = os.path.join(mnt, "data")
        with open(f, "wb") as fh:
            fh.truncate(16 * G)
        # the zone is cached and clean first (written through the cache in
        # random 256K pieces, then flushed): every row is valid, so the
        # flusher destages full stripes, as fast as it can
        subprocess.run(["fio", "--name=fill", "--filename=" + f, "--rw=randwrite",
                        "--bs=256k", "--size=%d" % args.hot, "--direct=1",
                        "--ioengine=psync"], check=True, capture_output=True)
        subprocess.run(["setfattr", "-n", "user.tierfs.ctl", "-v", "flush", mnt], check=True)
        while int(status(mnt)["cache.dirty_bytes"]):
            time.sleep(0.2)
        cold0 = 8 * G
        w = fio("hot", f, "randwrite", 0, args.hot, 8, args.time, os.path.join(d, "w.json"))
        r = fio("cold", f, "randread", cold0, 8 * G, 4, args.time, os.path.join(d, "r.json"))
        s0 = status(mnt)
        t0 = time.time()
        for p in (w, r):
            if p.wait(timeout=args.time + 120):
                raise RuntimeError("fio: " + p.stderr.read().decode()[-300:])
        s1 = status(mnt)
        t1 = time.time()
        while int(status(mnt)["cache.dirty_bytes"]):
            if time.time() - t1 > 600:
                raise RuntimeError("the drain did not end in 600 s")
            time.sleep(0.2)
        drain = time.time() - t1
        wj = json.load(open(os.path.join(d, "w.json")))["jobs"][0]["write"]
        rj = json.load(open(os.path.join(d, "r.json")))["jobs"][0]["read"]
        row = {"round": rnd, "build": label, "write_iops": round(wj["iops"]),
               "cold_read_iops": round(rj["iops"], 1),
               "flushed_mib": round((int(s1["cache.flushed_bytes"]) -
                                     int(s0["cache.flushed_bytes"])) / M, 1),
               "dirty_mib_at_end": round(int(s1["cache.dirty_bytes"]) / M, 1),
               "drain_s": round(drain, 1), "run_s": round(t1 - t0, 1),
               "load1": os.getloadavg()[0]}
        print("  ".join("%s=%s" % kv for kv in row.items()), flush=True)
        return row
    finally:
        umount(mnt, proc)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", action="append", required=True)
    ap.add_argument("--label", action="append")
    ap.add_argument("--tmpdir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--time", type=int, default=30)
    ap.add_argument("--hot", type=int, default=64 * M)
    ap.add_argument("--cache-size", default="256M")
    ap.add_argument("--out")
    args = ap.parse_args()
    labels = args.label or [os.path.basename(b.rstrip("/")) for b in args.build]
    rows = []
    for rnd in range(args.rounds):
        order = list(zip(args.build, labels))
        if rnd % 2:
            order.reverse()
        for b, l in order:
            rows.append(one(args, b, l, rnd))
    if args.out:
        with open(args.out, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
