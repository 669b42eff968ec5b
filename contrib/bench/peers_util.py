#!/usr/bin/python3
"""peers_util.py - helpers for peers.sh (no third-party modules).

    peers_util.py fio JSON            -> "IOPS MiB/s IOS FIO_CPU_PCT"
    peers_util.py evict NAME DIR...   -> fdatasync + POSIX_FADV_DONTNEED every
                                         regular file called NAME under DIRs
    peers_util.py report RAW.csv OUT  -> OUT.md (markdown) and OUT.csv (medians)

The raw CSV (written by peers.sh) has one row per measurement:
    rep,job,target,status,value,unit,ios,daemon_cpu_s,cpu_us_per_op,fio_cpu_pct,load1,seconds,note
status is ok | fail | timeout; value is IOPS, MiB/s or files/s (unit says).
"""
import csv
import json
import os
import statistics
import sys

JOB_ORDER = [
    "rr4k_qd1", "rr4k_qd32", "rw4k_qd1", "rw4k_qd32",
    "sr1m_direct", "sw1m_direct", "sr1m_buf", "sw1m_buf",
    "meta_create", "meta_stat", "meta_read", "meta_unlink",
]
JOB_LABEL = {
    "rr4k_qd1": "4K randread QD1 O_DIRECT (psync)",
    "rr4k_qd32": "4K randread QD32 O_DIRECT (libaio)",
    "rw4k_qd1": "4K randwrite QD1 O_DIRECT (psync)",
    "rw4k_qd32": "4K randwrite QD32 O_DIRECT (libaio)",
    "sr1m_direct": "1M seq read O_DIRECT (psync QD1)",
    "sw1m_direct": "1M seq write O_DIRECT (psync QD1)",
    "sr1m_buf": "1M seq read buffered (psync QD1)",
    "sw1m_buf": "1M seq write buffered (psync QD1)",
    "meta_create": "small files: create+write 1K+close",
    "meta_stat": "small files: stat",
    "meta_read": "small files: open+read+close",
    "meta_unlink": "small files: unlink",
}
TARGET_ORDER = ["raw", "tierfs64k", "tierfs64ku", "tierfs512k", "tierfs_r5c", "tierfs_r5cu", "pll",
                "pllb", "mergerfs"]
PEERS = ["raw", "pll", "pllb", "mergerfs"]


def cmd_fio(path):
    with open(path) as f:
        text = f.read()
    # fio may print warnings before the JSON object
    data = json.loads(text[text.index("{"):])
    iops = bw = ios = 0.0
    cpu = 0.0
    for job in data["jobs"]:
        for d in ("read", "write", "trim"):
            s = job.get(d, {})
            iops += s.get("iops", 0.0)
            bw += s.get("bw_bytes", s.get("bw", 0) * 1024)
            ios += s.get("total_ios", 0)
        cpu += job.get("usr_cpu", 0.0) + job.get("sys_cpu", 0.0)
    print("%.1f %.2f %d %.1f" % (iops, bw / 1048576.0, ios, cpu))


def cmd_evict(name, dirs):
    for top in dirs:
        for root, _dirs, files in os.walk(top):
            for fn in files:
                if fn != name:
                    continue
                p = os.path.join(root, fn)
                try:
                    fd = os.open(p, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "MiB/s":
        return "%.1f" % v
    return "%.0f" % v


def cmd_report(raw_csv, out):
    rows = list(csv.DictReader(open(raw_csv)))
    jobs = [j for j in JOB_ORDER if any(r["job"] == j for r in rows)]
    jobs += sorted({r["job"] for r in rows} - set(jobs))
    targets = [t for t in TARGET_ORDER if any(r["target"] == t for r in rows)]
    targets += sorted({r["target"] for r in rows} - set(targets))

    cell = {}  # (job, target) -> dict
    for j in jobs:
        for t in targets:
            rs = [r for r in rows if r["job"] == j and r["target"] == t]
            if not rs:
                continue
            ok = [r for r in rs if r["status"] == "ok"]
            unit = rs[0]["unit"]
            c = {"n": len(rs), "ok": len(ok), "unit": unit, "value": None,
                 "min": None, "max": None, "cpu": None,
                 "notes": sorted({r["note"] for r in rs if r["status"] != "ok" and r["note"]})}
            if ok:
                vals = [float(r["value"]) for r in ok]
                c["value"] = statistics.median(vals)
                c["min"], c["max"] = min(vals), max(vals)
                cpus = [float(r["cpu_us_per_op"]) for r in ok if r["cpu_us_per_op"] not in ("", "-")]
                if cpus:
                    c["cpu"] = statistics.median(cpus)
            cell[(j, t)] = c

    def show(c):
        if c is None:
            return "n/a"
        if c["value"] is None:
            return "fails" if all("timeout" not in n for n in c["notes"]) else "timeout"
        s = fmt(c["value"], c["unit"])
        if c["ok"] < c["n"]:
            s += " (%d/%d failed)" % (c["n"] - c["ok"], c["n"])
        return s

    def ratio(a, b):
        if a is not None and b is not None and a["value"] is not None and b["value"] is None:
            return "peer fails"
        if a is None or b is None or a["value"] is None or b["value"] is None or b["value"] == 0:
            return "-"
        return "%.2f" % (a["value"] / b["value"])

    tfs = [t for t in targets if t.startswith("tierfs")]
    md = []
    md.append("### Medians (IOPS for 4K, MiB/s for 1M, files/s for small files)\n")
    md.append("| job | unit | " + " | ".join(targets) + " |")
    md.append("|---|---|" + "---|" * len(targets))
    for j in jobs:
        unit = next((cell[(j, t)]["unit"] for t in targets if (j, t) in cell), "")
        md.append("| %s | %s | " % (JOB_LABEL.get(j, j), unit)
                  + " | ".join(show(cell.get((j, t))) for t in targets) + " |")
    md.append("")
    md.append("### Ratios (tierfs / peer; >1 means tierfs is faster)\n")
    cols = [(t, p) for t in tfs for p in PEERS if p in targets]
    md.append("| job | " + " | ".join("%s/%s" % c for c in cols) + " |")
    md.append("|---|" + "---|" * len(cols))
    for j in jobs:
        md.append("| %s | " % JOB_LABEL.get(j, j)
                  + " | ".join(ratio(cell.get((j, t)), cell.get((j, p))) for t, p in cols) + " |")
    md.append("")
    fuse = [t for t in targets if t != "raw"]
    md.append("### Daemon CPU per operation (µs of daemon user+sys CPU per I/O or per file op; median)\n")
    md.append("| job | " + " | ".join(fuse) + " |")
    md.append("|---|" + "---|" * len(fuse))
    for j in jobs:
        vals = []
        for t in fuse:
            c = cell.get((j, t))
            vals.append("-" if c is None or c["cpu"] is None else "%.1f" % c["cpu"])
        md.append("| %s | " % JOB_LABEL.get(j, j) + " | ".join(vals) + " |")
    md.append("")
    md.append("### Spread (min-max over the successful repetitions)\n")
    md.append("| job | " + " | ".join(targets) + " |")
    md.append("|---|" + "---|" * len(targets))
    for j in jobs:
        vals = []
        for t in targets:
            c = cell.get((j, t))
            if c is None or c["value"] is None:
                vals.append("-")
            else:
                vals.append("%s-%s" % (fmt(c["min"], c["unit"]), fmt(c["max"], c["unit"])))
        md.append("| %s | " % JOB_LABEL.get(j, j) + " | ".join(vals) + " |")
    notes = sorted({n for c in cell.values() for n in c["notes"]})
    if notes:
        md.append("\nFailures seen:\n")
        for n in notes:
            md.append("- " + n)
    with open(out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")

    with open(out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        hdr = ["job", "unit"] + ["%s_median" % t for t in targets]
        hdr += ["%s/%s" % c for c in cols]
        hdr += ["%s_cpu_us_per_op" % t for t in fuse]
        w.writerow(hdr)
        for j in jobs:
            unit = next((cell[(j, t)]["unit"] for t in targets if (j, t) in cell), "")
            r = [j, unit]
            for t in targets:
                c = cell.get((j, t))
                r.append("" if c is None else ("fails" if c["value"] is None else fmt(c["value"], unit)))
            r += [ratio(cell.get((j, t)), cell.get((j, p))) for t, p in cols]
            for t in fuse:
                c = cell.get((j, t))
                r.append("" if c is None or c["cpu"] is None else "%.1f" % c["cpu"])
            w.writerow(r)
    sys.stdout.write("\n".join(md) + "\n")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "fio":
        cmd_fio(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "evict":
        cmd_evict(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        cmd_report(sys.argv[2], sys.argv[3])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
