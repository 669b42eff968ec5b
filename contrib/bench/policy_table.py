#!/usr/bin/python3
"""The policy comparison of docs/CACHE_POLICY.md (issue 16): runs
build/cache_sim on each trace at 5, 10 and 20% of its working set and
prints, per trace and size, the miss ratio of the tier as it runs (its
model: tierfs_POLICY at a fixed threshold, and with the tuner,
threshold 0), of plain LRU and of the simulator's reference policies, the
best of those, Belady with bypass, and the SSD write bytes of the tier
against LRU's, as a markdown table; and with --mrc, the live curve's
largest error against the model at each trace's 10% tier.

    contrib/bench/policy_table.py [--build build] [--extent 65536]
        [--threshold 2] [--policy s3fifo|lru|wtinylfu] [--reclaim on|off|auto]
        [--destage-mbps R] [--cuts on|off] [--promote-us L] [--row BYTES]
        [--sectors valid|whole] [--hash-seed S] [--mrc] TRACE...

--policy names the tier's policy in the tierfs columns (tierfs_POLICY
rows; the daemon's default, wtinylfu, if not given); --reclaim its
cache_reclaim (auto, the default, if not given); --destage-mbps the RAID's
pace for its destages (0, the default: at once); --cuts off replays
without the trace's truncates and unlinks (cache_sim --cuts);
--promote-us the promoters' time (cache_sim's; 0, the default: at once);
--sectors whole lets every policy but the tier's model hold an extent
whole once a write admitted part of it (cache_sim --sectors; valid, the
default: each holds what was written to it or read into it);
--hash-seed seeds both W-TinyLFU sketches' hash, the tier's and the
reference's (cache_sim --hash-seed; 0, the default: the daemon's);
--row the RAID's full row, which a sequential write must reach to go
around the tier (the daemon's rule): by default the recording array's,
from TRACE.status beside the trace (record_traces.py writes its level,
chunk and members), else 0 (any sequential write past the cutoff).

Misses are of pieces (a request's part in one extent), reads and writes
together, after the first 20% (cache_sim's warm-up)."""
import argparse
import pathlib
import subprocess
import sys

REFS = ["lru", "arc", "lirs", "2q", "ref_s3fifo", "wtinylfu"]


def sim(build, trace, extent, thresholds, extra=()):
    out = subprocess.run([str(pathlib.Path(build) / "cache_sim"), "--trace", str(trace),
                          "--extent", str(extent), "--threshold", thresholds,
                          "--sizes", "5,10,20", *extra],
                         capture_output=True, text=True, check=True).stdout
    rows = [l.split(",") for l in out.splitlines()[1:]]
    return {(r[1], int(r[2]), int(r[3])): r for r in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--extent", type=int, default=65536)
    ap.add_argument("--threshold", type=int, default=2, help="the daemon's (cache_promote)")
    ap.add_argument("--policy", default="wtinylfu", choices=["wtinylfu", "s3fifo", "lru"],
                    help="the tier's (cache_policy)")
    ap.add_argument("--reclaim", default="auto", choices=["on", "off", "auto"],
                    help="the tier's (cache_reclaim)")
    ap.add_argument("--destage-mbps", default="0")
    ap.add_argument("--cuts", default="on", choices=["on", "off"])
    ap.add_argument("--sectors", default="valid", choices=["valid", "whole"])
    ap.add_argument("--promote-us", default="0")
    ap.add_argument("--hash-seed", default="0")
    ap.add_argument("--row", type=int, default=None)
    ap.add_argument("--mrc", action="store_true")
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    tier = "tierfs_" + a.policy
    common = ("--destage-mbps", a.destage_mbps, "--cuts", a.cuts, "--promote-us", a.promote_us,
              "--sectors", a.sectors, "--hash-seed", a.hash_seed)
    print("| trace | cache | %s T=%d | %s tuned | LRU | best other (which) | "
          "Belady+bypass | gap to it | SSD writes vs LRU |" % (tier, a.threshold, tier))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in a.traces:
        row = str(row_for(a, t))
        r = sim(a.build, t, a.extent, f"0,1,{a.threshold}",
                ("--reclaim", a.reclaim, "--row", row, *common))
        name = pathlib.Path(t).stem
        for pct in (5, 10, 20):
            miss = lambda k, thr: 1 - float(r[(k, thr, pct)][6])
            ssd = lambda k, thr: int(r[(k, thr, pct)][-1])
            ours, tuned, lru = miss(tier, a.threshold), miss(tier, 0), \
                miss("lru", 1)
            best = min(REFS, key=lambda k: miss(k, 0) if k != "lru" else miss("lru", 1))
            bm = miss(best, 0) if best != "lru" else lru
            bel = miss("belady_bypass", 0)
            print(f"| {name} | {pct}% | {ours:.4f} | {tuned:.4f} | {lru:.4f} | {bm:.4f} ({best}) "
                  f"| {bel:.4f} | {min(ours, tuned) - bel:+.4f} | "
                  f"{ssd(tier, 0) / max(1, ssd('lru', 1)):.2f}x |")
        sys.stdout.flush()
    if not a.mrc:
        return
    print()
    print("| trace | tier (slots) | largest error of the curve (scale) | mean error |")
    print("|---|---:|---:|---:|")
    for t in a.traces:
        slots = max(extents(t, a.extent) // 10, 16)
        out = subprocess.run([str(pathlib.Path(a.build) / "cache_sim"), "--trace", str(t),
                              "--extent", str(a.extent), "--mrc", str(slots),
                              "--threshold", str(a.threshold), "--reclaim", a.reclaim,
                              "--row", str(row_for(a, t)),
                              *common],
                             capture_output=True, text=True, check=True).stdout
        rows = [l.split(",") for l in out.splitlines()[1:] if l.startswith(tier)]
        errs = [(abs(float(x[6])), x[2]) for x in rows]
        worst = max(errs)
        print(f"| {pathlib.Path(t).stem} | {slots} | {worst[0]:.4f} ({worst[1]}x) | "
              f"{sum(e for e, _ in errs) / len(errs):.4f} |")
        sys.stdout.flush()


def row_for(a, trace):
    """--row if given, else the recording array's (row_of)."""
    return a.row if a.row is not None else row_of(trace)


def row_of(trace):
    """The full row of the array a trace was recorded on (the daemon's
    tfs_row_bytes: the data members' chunks with parity, else a chunk),
    from the TRACE.status record_traces.py wrote beside it; 0 if none."""
    st = {}
    try:
        with open(pathlib.Path(trace).with_suffix(".status")) as f:
            st = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
    except OSError:
        return 0
    if "level" not in st:
        return 0
    chunk, n = int(st["chunk"]), int(st["members"])
    parity = {"raid5": 1, "raid6": 2}.get(st["level"], 0)
    return (n - parity) * chunk if parity else chunk


def extents(trace, extent):
    """Extents a tierfs trace's reads and writes touch (its working set)."""
    from record_traces import trace_stats   # the one reader of trace files here
    return trace_stats(trace, (extent,)).extents[extent]


if __name__ == "__main__":
    main()
