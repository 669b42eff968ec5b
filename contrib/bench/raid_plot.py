#!/usr/bin/python3
"""raid_plot.py - plots and tables of raid_sweep.py's CSVs.

    raid_plot.py --csv DIR [--img DIR] [--tag TAG] [--tables FILE.md]

DIR/raid_mix.csv   -> IMG/raid_mix_iops.png: IOPS against the share of
                      writes, one panel per queue depth, one line per array;
                      top row the striped arrays (JBOD, RAID0 x2/x3/x4),
                      bottom row the redundant ones (JBOD, RAID1, RAID10,
                      RAID5, ...), as seed 004 splits them for readability.
                      IMG/raid_mix_latency.png: mean response time, same
                      layout.
DIR/raid_chunk.csv -> IMG/raid_chunk.png: IOPS, MB/s, mean response time and
                      daemon CPU against the chunk size, one line per
                      pattern (seed 001's four charts).
--tag TAG reads raid_mix_TAG.csv / raid_chunk_TAG.csv and writes PNGs named
with the same suffix (a model variant, e.g. ncq32).
--tables writes the same numbers as markdown tables (for docs/RAID_BENCH.md).
Rows whose status is not "ok" are left out of the plots and listed.
"""
import argparse
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["jbod", "raid0x2", "raid0x3", "raid0x4", "raid1", "raid10",
         "raid5x3", "raid5x4", "raid6x4", "raid6x5"]
STRIPED = {"jbod", "raid0x2", "raid0x3", "raid0x4", "raid0x5", "raid0x6", "raid0x8"}
LABEL = {"jbod": "JBOD (1 disk)", "raid1": "RAID1 (2)", "raid10": "RAID10 (4)"}
STYLE = {"jbod": ("k", "o"), "raid0x2": ("tab:blue", "s"), "raid0x3": ("tab:orange", "^"),
         "raid0x4": ("tab:green", "D"), "raid1": ("tab:red", "v"), "raid10": ("tab:purple", "P"),
         "raid5x3": ("tab:brown", "X"), "raid5x4": ("tab:pink", "*"),
         "raid6x4": ("tab:olive", "h"), "raid6x5": ("tab:cyan", "p")}
PAT_STYLE = {"workstation": ("tab:blue", "o"), "fileserver": ("tab:orange", "s"),
             "database": ("tab:green", "^"), "webserver": ("tab:red", "v"),
             "exchange": ("tab:purple", "D")}


def label(cfg):
    if cfg in LABEL:
        return LABEL[cfg]
    if "x" in cfg:
        lvl, n = cfg.split("x", 1)
        return "%s (%s)" % (lvl.upper(), n)
    return cfg


def load(path):
    if not os.path.exists(path):
        return [], []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r["status"] == "ok"], [r for r in rows if r["status"] != "ok"]


def order(cfgs):
    return sorted(cfgs, key=lambda c: (ORDER.index(c) if c in ORDER else len(ORDER), c))


def fmt_chunk(n):
    n = int(n)
    return "%dM" % (n >> 20) if n >= 1 << 20 else "%dK" % (n >> 10)


def fnum(v, digits=0):
    if v in ("", None):
        return "-"
    return "%.*f" % (digits, float(v))


def plot_mix(rows, img, metric, ylabel, fname, title):
    qds = sorted({int(r["qd"]) for r in rows})
    cfgs = order({r["config"] for r in rows})
    groups = [[c for c in cfgs if c in STRIPED],
              [c for c in cfgs if c not in STRIPED or c == "jbod"]]
    groups = [g for g in groups if g]
    fig, axes = plt.subplots(len(groups), len(qds), figsize=(4.6 * len(qds), 3.8 * len(groups)),
                             squeeze=False)
    for gi, g in enumerate(groups):
        for qi, qd in enumerate(qds):
            ax = axes[gi][qi]
            for c in g:
                pts = sorted((int(r["write_pct"]), float(r[metric])) for r in rows
                             if r["config"] == c and int(r["qd"]) == qd and r[metric] != "")
                if not pts:
                    continue
                col, mk = STYLE.get(c, (None, "o"))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=mk, color=col,
                        label=label(c))
            ax.set_title("QD %d" % qd)
            ax.set_xlabel("writes, % of requests")
            ax.set_xticks(sorted({int(r["write_pct"]) for r in rows}))
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if qi == 0:
                ax.legend(fontsize=8, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(img, fname), dpi=110)
    plt.close(fig)


def model_text(rows):
    """'NCQ depth 1' etc. from the daemon's model line, if all rows agree."""
    ms = {r.get("model", "") for r in rows}
    if len(ms) != 1:
        return "mixed models"
    m = ms.pop()
    ncq = [p.strip() for p in m.replace(";", ",").split(",") if "NCQ" in p]
    return ncq[0] if ncq else "arrival order"


def plot_chunk(rows, img, fname):
    pats = [p for p in ("workstation", "fileserver", "database", "webserver", "exchange")
            if any(r["pattern"] == p for r in rows)]
    qd = sorted({r["qd"] for r in rows})
    cfg = sorted({"%s x%s" % (r["level"].upper(), r["members"]) for r in rows})
    panels = [("iops", "IOPS"), ("mbps", "MB/s"), ("lat_ms", "mean response time, ms"),
              ("daemon_cpu_pct", "daemon CPU, % of one core")]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    chunks = sorted({int(r["chunk"]) for r in rows})
    for ax, (metric, ylabel) in zip(axes.flat, panels):
        for p in pats:
            pts = sorted((int(r["chunk"]), float(r[metric])) for r in rows
                         if r["pattern"] == p and r[metric] != "")
            if not pts:
                continue
            col, mk = PAT_STYLE.get(p, (None, "o"))
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker=mk, color=col, label=p)
        ax.set_xscale("log", base=2)
        ax.set_xticks(chunks)
        ax.set_xticklabels([fmt_chunk(c) for c in chunks], fontsize=8)
        ax.set_xlabel("chunk (stripe unit)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("%s, emulated 7200 rpm members (%s), QD %s: Iometer patterns against chunk size"
                 % (", ".join(cfg), model_text(rows), ", ".join(qd)))
    fig.tight_layout()
    fig.savefig(os.path.join(img, fname), dpi=110)
    plt.close(fig)


def tables(mix, chunk, bad):
    md = []
    if mix:
        qds = sorted({int(r["qd"]) for r in mix})
        ws = sorted({int(r["write_pct"]) for r in mix})
        cfgs = order({r["config"] for r in mix})
        cell = {(r["config"], int(r["qd"]), int(r["write_pct"])): r for r in mix}
        for qd in qds:
            md.append("**Database pattern, QD %d: IOPS (mean response time, ms)**\n" % qd)
            md.append("| array | " + " | ".join("%d%% writes" % w for w in ws) + " |")
            md.append("|---|" + "---:|" * len(ws))
            for c in cfgs:
                vals = []
                for w in ws:
                    r = cell.get((c, qd, w))
                    vals.append("-" if r is None else "%s (%s)" % (fnum(r["iops"]), fnum(r["lat_ms"], 1)))
                md.append("| %s | " % label(c) + " | ".join(vals) + " |")
            md.append("")
        md.append("**What reaches the daemon: requests held by worker threads (not blocked "
                  "reading /dev/fuse, less the idle baseline; mean / max of 0.1 s samples), "
                  "worker threads, fio's in-flight count by Little's law (IOPS x mean "
                  "latency) and fio's submission latency**\n")
        md.append("| array | QD | writes | in daemon, mean | in daemon, max | threads | "
                  "in flight (Little) | submit ms | daemon CPU % |")
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in cfgs:
            for qd in qds:
                for w in (ws[0], ws[-1]):
                    r = cell.get((c, qd, w))
                    if r is None:
                        continue
                    md.append("| %s | %d | %d%% | %s | %s | %s | %s | %s | %s |" % (
                        label(c), qd, w, fnum(r["daemon_busy_mean"], 1),
                        fnum(r["daemon_busy_max"]), fnum(r["threads_max"]),
                        fnum(r["inflight_little"], 1), fnum(r["submit_ms"], 1),
                        fnum(r["daemon_cpu_pct"], 1)))
        md.append("")
    if chunk:
        pats = [p for p in ("workstation", "fileserver", "database", "webserver", "exchange")
                if any(r["pattern"] == p for r in chunk)]
        chunks = sorted({int(r["chunk"]) for r in chunk})
        cell = {(int(r["chunk"]), r["pattern"]): r for r in chunk}
        md.append("**Chunk sweep, QD %s: IOPS / MB/s / mean response time ms / daemon CPU %%**\n"
                  % ", ".join(sorted({r["qd"] for r in chunk})))
        md.append("| chunk | " + " | ".join(pats) + " |")
        md.append("|---|" + "---:|" * len(pats))
        for c in chunks:
            vals = []
            for p in pats:
                r = cell.get((c, p))
                vals.append("-" if r is None else "%s / %s / %s / %s" % (
                    fnum(r["iops"]), fnum(r["mbps"], 2), fnum(r["lat_ms"], 0),
                    fnum(r["daemon_cpu_pct"], 1)))
            md.append("| %s | " % fmt_chunk(c) + " | ".join(vals) + " |")
        md.append("")
    if bad:
        md.append("**Points not measured**\n")
        for r in bad:
            md.append("- %s %s %s: %s %s" % (r["sweep"], r["config"], r.get("pattern", ""),
                                             r["status"], r["note"]))
        md.append("")
    return "\n".join(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", required=True, help="directory with raid_mix.csv / raid_chunk.csv")
    ap.add_argument("--img", help="directory for the PNGs (default: --csv)")
    ap.add_argument("--tag", default="", help="model variant suffix of the CSVs and PNGs")
    ap.add_argument("--tables", help="write markdown tables to this file ('-': stdout)")
    args = ap.parse_args()
    img = args.img or args.csv
    sfx = "_" + args.tag if args.tag else ""
    os.makedirs(img, exist_ok=True)
    mix, bad1 = load(os.path.join(args.csv, "raid_mix%s.csv" % sfx))
    chunk, bad2 = load(os.path.join(args.csv, "raid_chunk%s.csv" % sfx))
    made = []
    if mix:
        model = model_text(mix)
        plot_mix(mix, img, "iops", "IOPS", "raid_mix_iops%s.png" % sfx,
                 "Database pattern (8K random) on emulated 7200 rpm members (%s): IOPS" % model)
        plot_mix(mix, img, "lat_ms", "mean response time, ms", "raid_mix_latency%s.png" % sfx,
                 "Database pattern (8K random) on emulated 7200 rpm members (%s): response time"
                 % model)
        made += ["raid_mix_iops%s.png" % sfx, "raid_mix_latency%s.png" % sfx]
    if chunk:
        plot_chunk(chunk, img, "raid_chunk%s.png" % sfx)
        made.append("raid_chunk%s.png" % sfx)
    for m in made:
        sys.stderr.write("wrote %s\n" % os.path.join(img, m))
    if args.tables:
        text = tables(mix, chunk, bad1 + bad2)
        if args.tables == "-":
            sys.stdout.write(text + "\n")
        else:
            with open(args.tables, "w") as f:
                f.write(text + "\n")
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
