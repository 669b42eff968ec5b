#!/usr/bin/python3
"""cache_plot.py - plots and tables of cache_bench.py's CSVs.

    cache_plot.py --csv DIR [--img DIR] [--tables FILE.md]

DIR/cache_zones_ts.csv (+ cache_zones.csv, cache_zones_stats.csv)
    -> IMG/cache_warmup.png: IOPS per second of the hot, warm and cold zones
       from a cold cache, cached and uncached array on one log axis (the
       Nytro review's warm-up chart), with the 90%-of-steady-state time
       marked; below it the cache's extents and promotions over time.
DIR/cache_profiles.csv
    -> IMG/cache_profiles.png: IOPS of each Iometer profile, cached against
       uncached (hot zone and all zones), log axis, ratios written on top.
    -> IMG/cache_exchange_latency.png: exchange read and write clat
       (mean, p50, p90, p99, p99.9), cached against uncached, log axis.
DIR/cache_hits_summary.csv
    -> IMG/cache_hits.png: cache-hit 4K random read IOPS at QD 1 and 32,
       tierfs against passthrough_ll and the raw directory.
--tables writes the numbers as markdown tables (for docs/CACHE_BENCH.md).
A CSV that is missing is skipped.
"""
import argparse
import csv
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ZONE_COLOR = {"hot": "tab:red", "warm": "tab:orange", "cold": "tab:blue"}
ARR_STYLE = {"cached": "-", "uncached": ":"}
PROFILES = ["fileserver", "webserver", "database", "exchange"]


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def fnum(s, default=None):
    try:
        return float(s)
    except (TypeError, ValueError):
        return default


def plot_warmup(d, img):
    """One warm-up chart per zone variant (cache_warmup.png for the first,
    cache_warmup_<variant>.png for the others); returns the summary rows."""
    ts_all = load(os.path.join(d, "cache_zones_ts.csv"))
    if not ts_all:
        return []
    summs = load(os.path.join(d, "cache_zones.csv")) or [{}]
    stats_all = load(os.path.join(d, "cache_zones_stats.csv"))
    for i, summ in enumerate(summs):
        v = summ.get("variant")
        ts = [r for r in ts_all if r.get("variant") == v]
        stats = [r for r in stats_all if r.get("variant") == v]
        name = "cache_warmup.png" if i == 0 else "cache_warmup_%s.png" % v
        plot_warmup1(ts, summ, stats, os.path.join(img, name))
    return summs


def plot_warmup1(ts, summ, stats, path):
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1.3]})
    for arr in ("cached", "uncached"):
        for z in ("hot", "warm", "cold"):
            pts = sorted((int(r["t"]), float(r["iops"])) for r in ts
                         if r["array"] == arr and r["zone"] == z)
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [max(p[1], 0.5) for p in pts], ARR_STYLE[arr],
                    color=ZONE_COLOR[z], lw=1.6 if arr == "cached" else 1.3,
                    label="%s zone, %s (QD %s)" % (z, arr, {"hot": 32, "warm": 4, "cold": 2}[z]))
    ax.set_yscale("log")
    ax.set_ylabel("IOPS (4K random reads, per second)")
    t90 = fnum(summ.get("t90_s"))
    hc, hu = fnum(summ.get("hot_cached_iops")), fnum(summ.get("hot_uncached_iops"))
    if hc:
        ax.axhline(hc, color="tab:red", lw=0.6, alpha=0.5)
    if t90 is not None:
        ax.axvline(t90, color="k", lw=0.8, ls="--")
        ax.annotate("90%% of steady state: %g s" % t90, (t90, hc * 0.9 if hc else 1),
                    xytext=(8, -22), textcoords="offset points", fontsize=8)
    rr = fnum(summ.get("hot_rand_read_s"))
    xmax = max((int(r["t"]) for r in ts), default=0)
    if rr and rr <= xmax * 1.05:
        ax.axvline(rr, color="tab:gray", lw=0.8, ls="-.")
        ax.annotate("hot zone read once, random 4K order\nat the uncached rate: %g s" % rr,
                    (rr, hu or 1), xytext=(8, 8), textcoords="offset points", fontsize=8,
                    color="tab:gray")
    title = "SSD tier warm-up: RAID5 x4 on HDD models (NCQ %s), hot zone %s, cache %s" % (
        summ.get("ncq", "32"), fmt_mib(summ.get("hot_size")), fmt_mib(summ.get("cache_size")))
    if hc and hu:
        title += "\nsteady hot zone: %.0f IOPS cached vs %.0f uncached (%.1fx)" % (hc, hu, hc / hu)
    if t90 is not None and rr:
        title += "; 90%% after %g s; read once: %g s random 4K, %s s sequential" % (
            t90, rr, summ.get("hot_seq_read_s", "?"))
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, ncol=2, loc="lower right")
    if stats:
        t = [float(r["t"]) for r in stats]
        ax2.plot(t, [int(r["cached_extents"] or 0) for r in stats], color="tab:green",
                 label="cached extents")
        ax2.plot(t, [int(r["promotions"] or 0) for r in stats], color="tab:purple", ls="--",
                 label="promotions")
        hx = fnum(summ.get("hot_extents_total"))
        if hx:
            ax2.axhline(hx, color="tab:red", lw=0.8, ls=":", label="extents of the hot zone")
        ax3 = ax2.twinx()
        ax3.plot(t, [int(r["promote_dropped"] or 0) for r in stats], color="tab:gray", lw=0.9,
                 label="promotions dropped (right)")
        ax3.set_ylabel("dropped", fontsize=8)
        h1, l1 = ax2.get_legend_handles_labels()
        h2, l2 = ax3.get_legend_handles_labels()
        ax2.legend(h1 + h2, l1 + l2, fontsize=7.5, loc="upper left")
        ax2.set_ylabel("extents")
        ax2.grid(True, alpha=0.3)
    ax2.set_xlabel("seconds since the start (cold cache)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt_mib(s):
    v = fnum(s)
    if not v:
        return "?"
    return "%d MiB" % (v / 2**20) if v < 2**30 else "%g GiB" % (v / 2**30)


def plot_profiles(d, img):
    rows = load(os.path.join(d, "cache_profiles.csv"))
    if not rows:
        return []
    profs = [p for p in PROFILES if any(r["profile"] == p for r in rows)]

    def val(p, a, z, k="iops"):
        for r in rows:
            if r["profile"] == p and r["array"] == a and r["zone"] == z:
                return fnum(r.get(k))
        return None

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    for ax, zone, title in ((axes[0], "hot", "hot zone (QD 32)"),
                            (axes[1], "all", "all zones (hot 32 + warm 4 + cold 2)")):
        w = 0.38
        for i, p in enumerate(profs):
            u, c = val(p, "uncached", zone), val(p, "cached", zone)
            ax.bar(i - w / 2, u or 0, w, color="tab:gray", label="uncached" if i == 0 else None)
            ax.bar(i + w / 2, c or 0, w, color="tab:green", label="cached" if i == 0 else None)
            if u and c:
                ax.text(i + w / 2, c * 1.08, "%.1fx" % (c / u), ha="center", fontsize=8)
            for x, v in ((i - w / 2, u), (i + w / 2, c)):
                if v:
                    ax.text(x, v / 1.6, "%.0f" % v, ha="center", fontsize=7, color="w")
        ax.set_xticks(range(len(profs)))
        ax.set_xticklabels(profs)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel("IOPS")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("Iometer profiles, RAID5 x4 on HDD models: SSD tier (write-back) vs uncached",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "cache_profiles.png"), dpi=110)
    plt.close(fig)

    ex = [r for r in rows if r["profile"] == "exchange" and r["zone"] == "hot"]
    if ex:
        keys = [("clat_mean_ms", "mean"), ("clat_p50_ms", "p50"), ("clat_p90_ms", "p90"),
                ("clat_p99_ms", "p99"), ("clat_p99.9_ms", "p99.9")]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.3), sharey=True)
        for ax, dr in ((axes[0], "read"), (axes[1], "write")):
            w = 0.38
            for i, (k, lab) in enumerate(keys):
                u = val("exchange", "uncached", "hot", "%s_%s" % (dr, k))
                c = val("exchange", "cached", "hot", "%s_%s" % (dr, k))
                ax.bar(i - w / 2, u or 0, w, color="tab:gray",
                       label="uncached" if i == 0 else None)
                ax.bar(i + w / 2, c or 0, w, color="tab:green",
                       label="cached" if i == 0 else None)
                for x, v in ((i - w / 2, u), (i + w / 2, c)):
                    if v:
                        ax.text(x, v * 1.08, "%.3g" % v, ha="center", fontsize=7)
            ax.set_xticks(range(len(keys)))
            ax.set_xticklabels([k[1] for k in keys])
            ax.set_yscale("log")
            ax.set_title("exchange (32K, 62%% read), hot zone QD 32: %s completion latency" % dr,
                         fontsize=9)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        axes[0].set_ylabel("ms")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(img, "cache_exchange_latency.png"), dpi=110)
        plt.close(fig)
    return rows


def plot_hits(d, img):
    rows = load(os.path.join(d, "cache_hits_summary.csv"))
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    tg = [("raw", "raw file (ext4, O_DIRECT)", "tab:gray"),
          ("pll", "passthrough_ll (default: 10 threads)", "tab:blue"),
          ("tierfs", "tierfs cache hits (default: 16 threads)", "tab:green"),
          ("tierfs128", "tierfs cache hits (max_threads=128)", "tab:olive")]
    tg = [t for t in tg if "%s_iops" % t[0] in rows[0]]
    w = 0.8 / len(tg)
    for i, r in enumerate(rows):
        raw = fnum(r["raw_iops"])
        for j, (k, lab, col) in enumerate(tg):
            v = fnum(r["%s_iops" % k])
            x = i + (j - (len(tg) - 1) / 2) * w
            ax.bar(x, v or 0, w, color=col, label=lab if i == 0 else None)
            if v and raw:
                ax.text(x, v * 1.02, "%.0f\n%.2fx" % (v, v / raw), ha="center", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["QD %s" % r["qd"] for r in rows])
    ax.set_ylabel("4K random read IOPS (O_DIRECT), median of %s rounds" % rows[0]["rounds"])
    ax.set_title("Cache hits: tierfs vs libfuse passthrough_ll vs the raw file "
                 "(ratios to raw)", fontsize=10)
    ax.set_ylim(0, max(fnum(r["raw_iops"], 0) for r in rows) * 1.22)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "cache_hits.png"), dpi=110)
    plt.close(fig)
    return rows


PHASE_COLOR = {"before": "#ffffff", "dirtying": "#fde0c5", "paced": "#fff3b0",
               "flush": "#f4c7c3", "after": "#e6f2e6"}


def plot_flush(d, img):
    summ = load(os.path.join(d, "cache_flush.csv"))
    ts = load(os.path.join(d, "cache_flush_ts.csv"))
    stats = load(os.path.join(d, "cache_flush_stats.csv"))
    if not summ or not ts:
        return []
    fig, axes = plt.subplots(len(summ), 1, figsize=(10, 3.6 * len(summ)), squeeze=False)
    for ax, sm in zip(axes[:, 0], summ):
        mix = sm["mix"]
        pts = [r for r in ts if r["mix"] == mix]
        t = [float(r["t"]) for r in pts]
        # phase shading from the phase column
        cur, start = None, None
        for r in pts + [None]:
            ph = r["phase"] if r else None
            if ph != cur:
                if cur:
                    ax.axvspan(start, float(r["t"]) if r else t[-1] + 1,
                               color=PHASE_COLOR.get(cur, "w"), alpha=0.8, lw=0)
                    ax.text((start + (float(r["t"]) if r else t[-1])) / 2, 0.02, cur,
                            transform=ax.get_xaxis_transform(), ha="center", fontsize=8)
                cur, start = ph, float(r["t"]) if r else None
        ax.plot(t, [int(r["read_iops"]) for r in pts], color="tab:green", lw=1.3,
                label="foreground reads (hot zone, cache hits)")
        if any(int(r["write_iops"]) for r in pts):
            ax.plot(t, [int(r["write_iops"]) for r in pts], color="tab:purple", lw=1.1,
                    label="foreground writes (hot zone)")
        ax.set_ylim(bottom=0)
        ax.set_ylabel("IOPS per second")
        ax.grid(True, alpha=0.3)
        st = [r for r in stats if r["mix"] == mix]
        if st:
            ax2 = ax.twinx()
            slots = fnum(sm.get("slots"), 1)
            ax2.plot([float(r["t"]) for r in st],
                     [100.0 * int(r["dirty_extents"] or 0) / slots for r in st],
                     color="tab:red", ls="--", lw=1.1, label="dirty extents, % of the slots")
            ax2.set_ylabel("dirty, % of the cache", color="tab:red")
            ax2.set_ylim(0, 100)
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, fontsize=7.5, loc="upper right")
        what = "4K random reads" if mix == "read" else "4K random 70% reads / 30% writes"
        b, a, f = (fnum(sm.get("%s_iops" % k)) for k in ("before", "after", "flush"))
        ba = " (%.2f of the mean of before and after)" % (2 * f / (a + b)) if a and b and f else ""
        ax.set_title("%s, QD 32, hot zone: IOPS during the flush / before = %s%s;\n"
                     "read p99 before %s ms, during the flush %s ms"
                     % (what, sm.get("flush_vs_before"), ba, sm.get("before_read_p99_ms"),
                        sm.get("flush_read_p99_ms")), fontsize=9)
    axes[-1, 0].set_xlabel("seconds")
    fig.suptitle("Foreground I/O on cached data while the cache flushes (RAID5 x4 on HDD "
                 "models, NCQ 1, cache of %s slots)" % summ[0].get("slots", "?"),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "cache_flush.png"), dpi=110)
    plt.close(fig)
    return summ


def plot_extent(d, img):
    rows = load(os.path.join(d, "cache_extent.csv"))
    ts = load(os.path.join(d, "cache_extent_ts.csv"))
    if not rows or not ts:
        return rows
    fig, ax = plt.subplots(figsize=(9, 4.5))
    cols = ["tab:blue", "tab:green", "tab:red", "tab:purple", "tab:orange"]
    for i, r in enumerate(rows):
        e = r["extent"]
        pts = sorted((int(x["t"]), float(x["iops"])) for x in ts
                     if x["extent"] == e and x["zone"] == "hot")
        ax.plot([p[0] for p in pts], [max(p[1], 0.5) for p in pts], color=cols[i % 5],
                label="cache_extent=%s: steady %s IOPS, 90%% at %s s, hit ratio %s"
                % (fmt_kib(e), r["hot_iops"], r["t90_s"], r["hit_ratio_last_quarter"]))
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the start (empty cache)")
    ax.set_ylabel("hot-zone IOPS (4K random reads)")
    ax.set_title("Extent size: hot-zone warm-up (hot QD32 + warm QD4 + cold QD2, NCQ 1)",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(img, "cache_extent.png"), dpi=110)
    plt.close(fig)
    return rows


def fmt_kib(s):
    v = int(float(s))
    return "%dK" % (v >> 10) if v < 1 << 20 else "%dM" % (v >> 20)


def tables(d, summs, prof, hits, flush, ext):
    out = []
    if summs:
        out += ["### Zones (4K random reads, steady state)", "",
                "| model | zone | cached | uncached | ratio |", "|---|---|---:|---:|---:|"]
        for summ in summs:
            for z in ("hot", "warm", "cold"):
                c = fnum(summ.get("%s_cached_iops" % z))
                u = fnum(summ.get("%s_uncached_iops" % z))
                out.append("| NCQ %s | %s | %.0f | %.0f | %s |"
                           % (summ.get("ncq", "?"), z, c or 0, u or 0,
                              "**%.1fx**" % (c / u) if c and u and z == "hot"
                              else "%.1fx" % (c / u) if c and u else "-"))
        out += ["", "| warm-up | " + " | ".join("NCQ %s" % s_.get("ncq", "?") for s_ in summs)
                + " |", "|---|" + "---:|" * len(summs)]
        for key, lab in (("t90_s", "hot zone reaches 90% of steady state (s)"),
                         ("t_promoted_hot_count_s",
                          "promotions reach the hot zone's extent count (s)"),
                         ("hot_rand_read_s",
                          "hot zone read once, random 4K order at the uncached rate (s)"),
                         ("hot_seq_read_s", "hot zone read once, sequential 1M (measured, s)"),
                         ("hit_ratio_last_quarter", "read hit ratio, all zones, last quarter"),
                         ("cached_extents", "extents cached at the end"),
                         ("hot_extents_total", "extents of the hot zone"),
                         ("promotions", "promotions"),
                         ("promote_dropped", "promotions dropped"),
                         ("load1_cached", "load average (1 min) at the cached run's start"),
                         ("load1_uncached", "load average at the uncached run's start")):
            out.append("| %s | %s |" % (lab, " | ".join(str(s_.get(key, "")) for s_ in summs)))
        out.append("")
    if hits:
        tg = [t for t in ("tierfs", "tierfs128", "pll", "raw") if "%s_iops" % t in hits[0]]
        out += ["### Cache hits (4K random reads, O_DIRECT, median IOPS)", "",
                "| QD | " + " | ".join(tg) + " | tierfs/raw | pll/raw | tierfs/pll "
                "| tierfs128/pll |", "|---|" + "---:|" * (len(tg) + 4)]
        for r in hits:
            out.append("| %s | %s | %s | %s | %s | %s |"
                       % (r["qd"], " | ".join(r["%s_iops" % t] for t in tg), r["tierfs_raw"],
                          r["pll_raw"], r["tierfs_pll"], r.get("tierfs128_pll", "")))
        out += ["", "Per-round ratios (median over rounds): " + "; ".join(
            "QD %s tierfs/pll %s, tierfs128/pll %s, tierfs/raw %s, pll/raw %s"
            % (r["qd"], r.get("tierfs_pll_rounds"), r.get("tierfs128_pll_rounds"),
               r.get("tierfs_raw_rounds"), r.get("pll_raw_rounds")) for r in hits), ""]
    if flush:
        ph = ("before", "dirtying", "paced", "flush", "after")
        out += ["### Foreground I/O while flushing (hot zone, QD 32)", "",
                "| mix | | " + " | ".join(ph) + " |", "|---|---|" + "---:|" * len(ph)]
        for r in flush:
            m = r["mix"]
            for key, lab in (("%s_s", "duration (s)"), ("%s_iops", "IOPS (median of seconds)"),
                             ("%s_iops_min", "IOPS (worst second)"),
                             ("%s_vs_before", "IOPS / before"),
                             ("%s_read_mean_ms", "read clat mean (ms)"),
                             ("%s_read_p50_ms", "read clat p50 (ms)"),
                             ("%s_read_p99_ms", "read clat p99 (ms)"),
                             ("%s_read_p99.9_ms", "read clat p99.9 (ms)"),
                             ("%s_flushed_mb", "destaged (MiB)")):
                out.append("| %s | %s | %s |" % (m, lab, " | ".join(
                    str(r.get(key % p, "")) if (key % p) in r else "1.00"
                    if key == "%s_vs_before" else "" for p in ph)))
            b, a, f = (fnum(r.get("%s_iops" % k)) for k in ("before", "after", "flush"))
            if b and a and f:
                out.append("| %s | flush IOPS / mean of before and after | | | | %.2f | |"
                           % (m, 2 * f / (a + b)))
            out.append("| %s | dirty extents at the start of paced / flush | %s / %s of %s "
                       "slots | | | | |" % (m, r.get("dirty_at_paced"), r.get("dirty_at_flush"),
                                            r.get("slots")))
        out.append("")
    if ext:
        out += ["### Extent size (zones test, cached, NCQ 1)", "",
                "| cache_extent | hot IOPS | warm IOPS | cold IOPS | 90% of steady (s) "
                "| hit ratio, last quarter | hit ratio, whole run | cached / slots "
                "| promotions | dropped | evictions |", "|---|" + "---:|" * 10]
        for r in ext:
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |"
                       % (fmt_kib(r["extent"]), r["hot_iops"], r["warm_iops"],
                          r["cold_iops"], r["t90_s"], r["hit_ratio_last_quarter"],
                          r["hit_ratio_run"], r["cached_extents"], r["slots"],
                          r["promotions"], r["promote_dropped"], r["evictions"]))
        out.append("")
    pol = load(os.path.join(d, "cache_policy.csv"))
    if pol:
        out += ["### Policy on a mount (zones + random-order scan)", "",
                "| policy | promote | hit ratio (2nd half) | hot IOPS | hot < 2 ms "
                "| warm IOPS | warm < 2 ms | scan IOPS | promotions | evictions |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in pol:
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                       % (r["policy"], r["promote"], r["hit_ratio_2nd_half"], r["hot_iops"],
                          r["hot_fast_2ms"], r["warm_iops"], r["warm_fast_2ms"],
                          r["scan_iops"], r["promotions"], r["evictions"]))
        out.append("")
    if prof:
        out += ["### Profiles (IOPS)", "",
                "| profile | hot cached | hot uncached | ratio | all cached | all uncached | ratio |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for p in PROFILES:
            v = {}
            for r in prof:
                if r["profile"] == p:
                    v[(r["array"], r["zone"])] = fnum(r["iops"])
            if not v:
                continue
            hc, hu = v.get(("cached", "hot")), v.get(("uncached", "hot"))
            ac, au = v.get(("cached", "all")), v.get(("uncached", "all"))
            out.append("| %s | %.0f | %.0f | %.1fx | %.0f | %.0f | %.1fx |"
                       % (p, hc, hu, hc / hu, ac, au, ac / au))
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", required=True, help="cache_bench.py's --out directory")
    ap.add_argument("--img", help="where the PNGs go (default: --csv)")
    ap.add_argument("--tables", help="write markdown tables to this file")
    args = ap.parse_args()
    img = args.img or args.csv
    os.makedirs(img, exist_ok=True)
    summ = plot_warmup(args.csv, img)
    prof = plot_profiles(args.csv, img)
    hits = plot_hits(args.csv, img)
    flush = plot_flush(args.csv, img)
    ext = plot_extent(args.csv, img)
    if args.tables:
        with open(args.tables, "w") as f:
            f.write(tables(args.csv, summ, prof, hits, flush, ext))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
