"""Issue 16: a trace the tier's recorder writes (tierctl trace;
include/tierfs/trace.h) replayed by contrib/bench/cache_sim --trace: the
records become accesses to extents in time order (records are sorted: the
recorder's per-thread blocks interleave), a write takes a slot whatever
the heat, a read only at the threshold; and a trace recorded on a real
mount replays."""
import mmap
import os
import random
import struct
import subprocess
import time

import pytest

from conftest import BUILD
from test_attrs import tiered, write_pieces, tierctl, read_trace  # noqa: F401 (fixture)
from test_cache import K, M, abuf, copts, cst, pwrite, wait_stat

SIM = BUILD / "cache_sim"


def write_trace(path, recs):
    """recs: (t_ns, fid, off, len, op[, flags]) in any order."""
    with open(path, "wb") as f:
        f.write(struct.pack("<QII", 0x3130435254534654, 1, 32))
        for t, fid, off, ln, op, *fl in recs:
            f.write(struct.pack("<QQQIBBH", t, fid, off, ln, ord(op), fl[0] if fl else 0, 0))


def sim(path, *args):
    r = subprocess.run([str(SIM), "--trace", str(path), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [l.split(",") for l in r.stdout.splitlines()[1:]]
    return {(w[1], int(w[2]), int(w[3])): (int(w[4]), int(w[5])) for w in rows}


def test_replay_counts_hits_by_the_tiers_rules(tmp_path):
    E = 64 * K
    # a hot set of 5 extents of file 7 read round and round, then 5 others
    # once; written out of time order, as interleaved blocks are
    recs = [(1000 + i, 7, (i % 5) * E, 4 * K, "R") for i in range(500)]
    recs += [(5000 + j, 7, (5 + j) * E + 100, 200, "R") for j in range(5)]
    recs.reverse()
    p = tmp_path / "hot.trace"
    write_trace(p, recs)
    got = sim(p, "--extent", str(E), "--threshold", "1", "--sizes", "50", "--warmup", "0.2")
    # 505 accesses, the first 101 not counted; after them only the last 5 miss
    assert got[("lru", 1, 50)] == (404 - 5, 404), got
    # at threshold 2 a written extent takes a slot at once (its read hits);
    # a read-only one is admitted at its second read (a miss) and hits at
    # its third
    w = [(1, 3, 0, 4 * K, "W"), (2, 3, 0, 4 * K, "R"),
         (3, 3, E, 4 * K, "R"), (4, 3, E, 4 * K, "R"), (5, 3, E, 4 * K, "R")]
    q = tmp_path / "w.trace"
    write_trace(q, w)
    got = sim(q, "--extent", str(E), "--threshold", "2", "--sizes", "100", "--warmup", "0")
    assert got[("lru", 2, 100)] == (2, 5), got     # e0's read and e1's third read
    # a request over two extents is an access to each
    write_trace(q, [(1, 3, E - 4 * K, 8 * K, "R"), (2, 3, 0, 4 * K, "R")])
    got = sim(q, "--extent", str(E), "--threshold", "1", "--sizes", "100", "--warmup", "0")
    assert got[("lru", 1, 100)] == (1, 3), got


def test_ssd_writes_are_counted_in_sectors_by_every_policy(tmp_path):
    """Flash is written in pages: a write costs the SSD the 4 KiB sectors it
    touches, in the reference policies' count as in the tier's model.  The
    references counted a write's bytes, so a 100-byte write cost LRU 100
    bytes and the tier 4096 (maildir's SSD writes looked 1.13-1.26x LRU's)."""
    E = 64 * K
    p = tmp_path / "w.trace"
    # 100 bytes inside a sector of extent 0; 100 across two sectors of extent 1
    write_trace(p, [(1, 3, 0, 100, "W"), (2, 3, E + 2 * 4 * K - 50, 100, "W")])
    r = subprocess.run([str(SIM), "--trace", str(p), "--extent", str(E), "--threshold", "1",
                        "--sizes", "100", "--warmup", "0"], capture_output=True, text=True,
                       timeout=60, check=True)
    ssd = {w[1]: int(w[-1]) for w in (l.split(",") for l in r.stdout.splitlines()[1:])}
    for pol in ("lru", "ref_lru", "arc", "lirs", "2q", "ref_s3fifo", "wtinylfu", "belady",
                "tierfs_lru", "tierfs_s3fifo", "tierfs_wtinylfu"):
        assert ssd[pol] == 3 * 4 * K, (pol, ssd)


def test_every_policy_holds_only_what_was_written_or_read(tmp_path):
    """A cache holds the sectors written to it or read into it, whatever
    its policy (cache_sim's struct held): an 8K write admits its extent
    holding 8K, and a read of the extent's other half misses in every
    policy, as in the tier, then fills the extent's 56K missing sectors;
    read again, it hits.  The reference policies counted the whole extent
    held once a write admitted it, so the read hit for the price of the
    write's 8K (pgbench's 8K pages and the zones' 32K writes in 64K
    extents bought reads of the rest: up to 5.4 points of LRU's misses).
    --sectors whole keeps that replay for the policies other than the
    tier's model."""
    E = 64 * K
    p = tmp_path / "part.trace"
    write_trace(p, [(0, 3, E, 4 * K, "R"), (1, 3, 0, 8 * K, "W"), (2, 3, E // 2, 8 * K, "R"),
                    (3, 3, E // 2, 8 * K, "R")])
    args = ("--extent", str(E), "--threshold", "0,1", "--sizes", "100", "--warmup", "0")

    def run(*extra):
        r = subprocess.run([str(SIM), "--trace", str(p), *args, *extra], capture_output=True,
                           text=True, timeout=60, check=True)
        return {(w[1], int(w[2])): (int(w[4]), int(w[5]), int(w[-1]))
                for w in (l.split(",") for l in r.stdout.splitlines()[1:])}
    valid = run()
    for pol, thr in POLICIES.items():
        # extent 1 read (a miss, 64K), the write to extent 0 (a miss), the
        # read of the rest (a miss, the fill), the read again
        assert valid[(pol, thr)] == (1, 4, E + 8 * K + 56 * K), (pol, valid)
    whole = run("--sectors", "whole")
    for pol, thr in POLICIES.items():
        if pol.startswith("tierfs_"):
            assert whole[(pol, thr)] == valid[(pol, thr)], (pol, whole)
        else:
            assert whole[(pol, thr)] == (2, 4, E + 8 * K), (pol, whole)


def test_diff_sets_the_tier_beside_a_reference_access_by_access(tmp_path):
    """cache_sim --diff REF: the tier's model and a reference policy access
    by access, and for the accesses one alone hit, what the tier did with
    it and with the extent's access before (model.h tfs_model_act)."""
    E = 64 * K

    def diff(path, *args):
        r = subprocess.run([str(SIM), "--trace", str(path), "--extent", str(E), "--warmup", "0",
                            "--threshold", "2", "--diff", "ref_lru", *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rows = [l.split(",") for l in r.stdout.splitlines()]
        assert rows[0][0] == "diff" and rows[0][-1] == "accesses", rows[0]
        return {(w[4], w[5], w[6]): int(w[7]) for w in rows[1:]}

    # 1M written in 128K writes, then read back twice: past a 256K cutoff
    # the writes go around the tier (extents 2-15).  Each leaves a clean
    # copy (write.c invariant 11), and in write-through the first one a
    # fresh slot too (invariant 12), so every read hits, as LRU's, which
    # took every write; in write-around nothing is kept, and the first read
    # of each extent misses and promotes it
    p = tmp_path / "stream.trace"
    write_trace(p, [(1 + 1000 * (8 * k + i), 3, i * 128 * K, 128 * K, op)
                    for k, op in enumerate("WRR") for i in range(8)])
    for mode in ("writeback", "writethrough"):
        assert diff(p, "--sizes", "100", "--seq-cutoff", str(256 * K), "--mode", mode) == {
            ("both_hit", "-", "-"): 32,                # the reads
            ("both_missed", "-", "-"): 16,             # the writes
        }, mode
    assert diff(p, "--sizes", "100", "--seq-cutoff", str(256 * K),
                "--mode", "writearound") == {
        ("both_hit", "-", "-"): 16,                # the second reads
        ("both_missed", "-", "-"): 16,
        ("reference_only", "read_promote", "write_mode"): 2,    # extents 0-1
        ("reference_only", "read_promote", "write_seq"): 14,
    }
    # a hot extent read ten times, then 8 cold ones once each, then the hot
    # one again, in 4 slots: LRU lets the cold ones push it out; the tier at
    # threshold 2 promotes it at its second read and nothing of the scan
    q = tmp_path / "scan.trace"
    write_trace(q, [(1 + i, 5, 0, 4 * K, "R") for i in range(10)] +
                [(100 + i, 5, (1 + i) * E, 4 * K, "R") for i in range(8)] +
                [(200, 5, 0, 4 * K, "R")])
    assert diff(q, "--sizes", "45") == {
        ("both_hit", "-", "-"): 8,
        ("both_missed", "-", "-"): 1 + 8,
        ("reference_only", "read_promote", "read_miss"): 1,
        ("tier_only", "read_hit", "read_hit"): 1,
    }
    # the counts add up to the plain replay's, on a trace with writes
    # partly valid, fills and evictions (a model that told fewer pieces
    # than the trace has would be refused)
    rng = random.Random(5)
    t = tmp_path / "mix.trace"
    write_trace(t, [(i, 1 + rng.randrange(3), rng.randrange(40) * 16 * K, 8 * K,
                     "W" if rng.random() < 0.3 else "R") for i in range(3000)])
    d = diff(t, "--sizes", "25")
    plain = sim(t, "--extent", str(E), "--warmup", "0", "--threshold", "2", "--sizes", "25")
    tier, ref = plain[("tierfs_wtinylfu", 2, 25)], plain[("ref_lru", 0, 25)]
    assert sum(d.values()) == tier[1] == ref[1] == 3000
    assert d[("both_hit", "-", "-")] + sum(v for k, v in d.items() if k[0] == "tier_only") \
        == tier[0]
    assert d[("both_hit", "-", "-")] + sum(v for k, v in d.items()
                                           if k[0] == "reference_only") == ref[0]
    assert any(k[0] == "tier_only" for k in d) and any(k[0] == "reference_only" for k in d), d


def test_synthetic_workloads_replay():
    """The synthetic workloads (no trace) replay: the SSD-write count read
    a trace's accesses, which they have none of, and every one crashed."""
    r = subprocess.run([str(SIM), "-z", "1000", "-n", "20000", "--sizes", "10",
                        "--workloads", "hwc,hwc+scan,uniform,zipf"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [l.split(",") for l in r.stdout.splitlines()[1:]]
    assert {w[0] for w in rows} == {"hwc", "hwc+scan", "uniform", "zipf"}, rows
    hr = {(w[0], w[1], w[2]): float(w[6]) for w in rows}
    # the skewed ones hit more than uniform, which hits about its 10%
    assert hr[("hwc", "lru", "1")] > 0.3 and 0.05 < hr[("uniform", "lru", "1")] < 0.15, hr


# every policy's row at threshold 1 (admitting at every miss): cache_sim
# prints the plain and tierfs_ ones at the thresholds asked, the others at 0
POLICIES = {p: 0 for p in ("ref_lru", "arc", "lirs", "2q", "ref_s3fifo", "wtinylfu", "belady",
                           "belady_bypass")}
POLICIES.update({p: 1 for p in ("lru", "tierfs_lru", "tierfs_s3fifo", "tierfs_wtinylfu")})


def test_a_cut_frees_its_extents_in_every_policy(tmp_path):
    """A truncate, punch or unlink (the trace's 'C' records) ends its
    extents' lives in the tier (cut.c), so the replay ends them in every
    policy: file 3's 3 extents read, file 1's 7, file 1 unlinked, file 2's
    7 read, file 3's again, through 10 slots.  With the cut there is room
    and file 3 hits in every policy; without it (--cuts off, as before the
    trace had cuts) LRU evicts file 3 before the dead file.  A later read
    of a cut extent is a new extent (a miss); a cut from the middle of an
    extent leaves the extent (the tier keeps its other sectors)."""
    E = 64 * K
    recs = [(t, 3, t * E, 4 * K, "R") for t in range(3)]
    recs += [(10 + x, 1, x * E, 4 * K, "R") for x in range(7)]
    recs += [(20, 1, 0, 0, "C", 4)]                 # an unlink: to the end
    recs += [(30 + x, 2, x * E, 4 * K, "R") for x in range(7)]
    recs += [(40 + x, 3, x * E, 4 * K, "R") for x in range(3)]
    p = tmp_path / "cut.trace"
    write_trace(p, recs)
    args = ("--extent", str(E), "--threshold", "0,1", "--sizes", "59", "--warmup", "0")
    on, off = sim(p, *args), sim(p, *args, "--cuts", "off")
    for pol, thr in POLICIES.items():
        assert on[(pol, thr, 59)] == (3, 20), (pol, on)
    for pol in ("lru", "ref_lru", "tierfs_lru"):
        assert off[(pol, POLICIES[pol], 59)] == (0, 20), (pol, off)
    # a cut extent read again misses; one cut from its middle on stays
    q = tmp_path / "again.trace"
    write_trace(q, [(1, 5, 0, 4 * K, "R"), (2, 5, E, 4 * K, "R"), (3, 5, E // 2, 0, "C", 4),
                    (4, 5, 0, 4 * K, "R"), (5, 5, E, 4 * K, "R"), (6, 5, 0, 0, "C", 4),
                    (7, 5, 0, 4 * K, "R")])
    args = args[:-4] + ("--sizes", "100", "--warmup", "0")      # 2 slots
    on, off = sim(q, *args), sim(q, *args, "--cuts", "off")
    for pol, thr in POLICIES.items():
        assert on[(pol, thr, 100)] == (1, 5), (pol, on)     # extent 0 once
        assert off[(pol, thr, 100)] == (3, 5), (pol, off)


def test_a_slow_raid_fills_the_model_with_dirty_extents(tmp_path):
    """cache_sim --destage-mbps: the model's destages take the time the RAID
    takes (model.c invariant 3).  200 writes of 64K, 1 ms apart, over 40
    extents into a tier of 10 slots: destaged at once, every write goes
    into the tier (200 x 64K to the SSD); at 1 MB/s (65 ms an extent) the
    tier is soon all dirty and most writes go around it, as the daemon's do
    when its flusher falls behind (full_bypass); at 1 GB/s only the writes
    that come while a round is on its way at dirty_high do."""
    E = 64 * K
    p = tmp_path / "w.trace"
    write_trace(p, [(i * 1000000, 3, (i * 7 % 40) * E, E, "W") for i in range(200)])

    def ssd_bytes(*extra):
        r = subprocess.run([str(SIM), "--trace", str(p), "--extent", str(E), "--sizes", "25",
                            "--threshold", "1", "--warmup", "0", *extra], capture_output=True,
                           text=True, timeout=60, check=True)
        return {w[1]: int(w[-1]) for w in (l.split(",") for l in r.stdout.splitlines()[1:])}
    instant, slow, fast = (ssd_bytes("--destage-mbps", r)["tierfs_wtinylfu"]
                           for r in ("0", "1", "1000"))
    assert instant == 200 * E, instant
    assert slow < 100 * E < fast < instant, (slow, fast)
    assert ssd_bytes()["tierfs_wtinylfu"] == instant        # 0, the default: at once
    r = subprocess.run([str(SIM), "--trace", str(p), "--destage-mbps", "x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


def test_a_trace_recorded_on_a_mount_replays(tiered, tmp_path):
    m = tiered.mnt
    out = tmp_path / "m.trace"
    write_pieces(m / "f", 1024 * K, 256 * K)
    assert tierctl("trace", m, "start", out).returncode == 0
    buf = mmap.mmap(-1, 4 * K)
    for _ in range(5):                             # O_DIRECT: every read reaches the tier
        fd = os.open(m / "f", os.O_RDONLY | os.O_DIRECT)
        for off in range(0, 1024 * K, 64 * K):
            os.preadv(fd, [buf], off)
        os.close(fd)
    assert tierctl("trace", m, "stop").returncode == 0
    assert len(read_trace(out)) >= 80
    got = sim(out, "--extent", str(256 * K), "--threshold", "1", "--sizes", "100",
              "--warmup", "0")
    hits, n = got[("lru", 1, 100)]
    assert n >= 80 and hits >= n - 4, got      # 4 extents: at most 4 cold misses


def test_text_traces_replay(tmp_path):
    """The public text formats: TIME,OBJECT,SIZE[,OP] (an object read or
    written whole) and SNIA/MSR-style TIME,HOST,DISK,TYPE,OFFSET,SIZE,...;
    a header line and blank lines are skipped."""
    E = 64 * K
    p = tmp_path / "obj.csv"
    p.write_text("time,object,size,op\n\n" +
                 "".join(f"{i},obj{i % 3},{E},read\n" for i in range(30)) +
                 "31,new,100,write\n32,new,100,read\n")
    got = sim(p, "--extent", str(E), "--threshold", "2", "--sizes", "100", "--warmup", "0")
    # 3 objects read round: each admitted at its second read, hits after
    # (30 - 6 = 24); "new" written (a slot at once), then read: a hit
    assert got[("lru", 2, 100)] == (25, 32), got
    q = tmp_path / "msr.csv"
    q.write_text("".join(f"{128166372000000000 + i},web,0,{'Write' if i == 0 else 'Read'},"
                         f"{(i % 2) * E},4096,100\n" for i in range(10)))
    got = sim(q, "--extent", str(E), "--threshold", "1", "--sizes", "100", "--warmup", "0")
    assert got[("lru", 1, 100)] == (8, 10), got      # two extents, each missed once


def test_belady_bounds_by_hand(tmp_path):
    """Belady's MIN on a trace, counted by hand: A B C three times over, two
    slots.  Without bypass the farthest-needed extent goes at each miss
    (hits at the 4th, 6th and 8th access); with bypass an extent needed
    later than both cached ones is not cached (hits at the 4th, 5th, 7th,
    8th)."""
    p = tmp_path / "abc.csv"
    p.write_text("".join(f"{i},{'ABC'[i % 3]},100\n" for i in range(9)))
    got = sim(p, "--extent", str(64 * K), "--threshold", "1", "--sizes", "67", "--warmup", "0")
    assert got[("belady", 0, 67)] == (3, 9), got
    assert got[("belady_bypass", 0, 67)] == (4, 9), got
    assert got[("lru", 1, 67)] == (0, 9), got          # LRU thrashes on the cycle


@pytest.mark.parametrize("policy,reclaim", [("s3fifo", 0), ("wtinylfu", 0), ("wtinylfu", 1),
                                            ("wtinylfu", "auto")])
def test_the_model_agrees_with_the_daemon_that_recorded_the_trace(make_array, tmp_path, policy,
                                                                   reclaim):
    """Issue 16: cache_sim replays a trace through the tier's model, built of
    the daemon's own rules (rules.c) and policy (policy.c).  Recorded on a
    real mount (hot extents read round after round among cold ones, and a
    few small writes), the trace's hit flags say which requests the
    daemon served whole; the model, given the mount's settings, must
    agree on nearly every request -- and a model with another promotion
    threshold must not, or the comparison would prove nothing.  What the
    model leaves out (the promoters' queue and their order, the flusher's
    real time) is kept out of it: a round reads each extent once, a read
    stays within one extent (one that crossed into the next queued two
    promotions, and whether the daemon's promoters run them side by side,
    the second one's eviction passing over the first one's busy slot, as
    the model assumes, is timing: 98.2% agreed in 1 run of 12 with
    reclaim=auto, 100% in the others; 98.4% in every run when the model
    still ran them one after the other),
    each request waits for the promotion it queued (the model promotes before
    the next request; with the wait only at a round's end, under two CPU
    hogs 1 run in 8 agreed on 98.7%) and for the notes of cache_reclaim=1
    (the model destages them before the next request, the daemon's
    flusher on its next round: 97.5-98.4% with the round's wait only),
    then the time passes for both.  The model of the mount's policy must
    agree on 99% of the requests, another threshold or the other policy
    (S3-FIFO against W-TinyLFU) on 3-5 points less; with W-TinyLFU the
    model must also count the misses where the daemon does
    (tfs_policy_seen: 98.5% without)."""
    E = 64 * K
    n = 96                                          # extents of the file
    # auto: more writes, to cold extents, kept dirty longer, so that
    # eviction passes over dirty extents for hot ones and the evidence
    # turns reclaim on midway (at most 80 rounds, the last 5 after the turn)
    rounds, writes, dirty = (80, 6, (60, 90)) if reclaim == "auto" else (25, 2, (20, 70))
    a = make_array("raid5", 3, "64K")
    p = a.mnt / "f"
    m = a.mount()                                   # written without the tier
    pwrite(p, 0, random.Random(1).randbytes(n * E))
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", size="2M", extent="64K", policy=policy,
                       reclaim=reclaim, dirty_low=dirty[0], dirty_high=dirty[1]))  # 32 slots
    out = tmp_path / "t.trace"
    r = tierctl("trace", a.mnt, "start", out)
    assert r.returncode == 0, r.stderr
    rng = random.Random(2)
    hot = rng.sample(range(n), 12)
    cold = [e for e in range(n) if e not in hot]
    if reclaim == "auto":
        written = rng.sample(cold, 18)              # dirty, below the low watermark
        cold = [e for e in cold if e not in written]
    fd = os.open(p, os.O_RDWR | os.O_DIRECT)
    buf = abuf(8 * K)
    try:
        done, turned = 0, None
        while done < rounds and (turned is None or done < turned + 5):
            done += 1
            order = hot + rng.sample(cold, 8)      # no extent twice in a round: the
                                                    # second read would race its promotion
            rng.shuffle(order)
            for e in order:
                os.preadv(fd, [buf], e * E + rng.randrange(15) * 4 * K)
                wait_stat(a.mnt, "promote_backlog", 0)      # the model promotes at once,
                wait_stat(a.mnt, "reclaim_backlog", 0)      # and destages the notes
            for _ in range(writes):
                e = rng.choice(written) if reclaim == "auto" else rng.randrange(n)
                os.pwritev(fd, [buf], e * E + rng.randrange(8) * 8 * K)
                wait_stat(a.mnt, "reclaim_backlog", 0)
            wait_stat(a.mnt, "promote_backlog", 0)  # the promoters drained their queue
            wait_stat(a.mnt, "reclaim_backlog", 0)  # and the flusher its notes
            time.sleep(0.15)                        # (the flusher's pace is real time)
            if reclaim == "auto" and turned is None and cst(a.mnt)["reclaim"]:
                turned = done
    finally:
        os.close(fd)
    r = tierctl("trace", a.mnt, "stop")
    assert r.returncode == 0, r.stderr
    latched = cst(a.mnt)["reclaim"]
    got = subprocess.run([str(SIM), "--trace", str(out), "--extent", str(E), "--agree", "32",
                          "--threshold", "1,2", "--reclaim", str(reclaim),
                          "--dirty", f"{dirty[0]}:{dirty[1]}"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    rows = {(w[0], int(w[1])): w for w in (l.split(",") for l in got.stdout.splitlines()[1:])}
    same = rows[(f"tierfs_{policy}", 2)]
    other = rows[(f"tierfs_{policy}", 1)]
    reqs, hits = int(same[3]), int(same[4])
    assert reqs == done * (20 + writes), got.stdout
    assert hits > reqs // 4, got.stdout                # the tier served a good part
    other_policy = rows[("tierfs_s3fifo" if policy == "wtinylfu" else "tierfs_wtinylfu", 2)]
    assert float(other[6]) <= float(same[6]) - 0.05, got.stdout
    assert float(other_policy[6]) <= float(same[6]) - 0.03, got.stdout
    assert float(same[6]) >= 0.99, got.stdout
    if reclaim != "auto":
        return
    # the daemon turned reclaim on midway, and the model must have done so
    # at about the same request: it agrees better than a model that never
    # or always reclaims.  The load ends 5 rounds after the turn: after it
    # the flusher's rounds race the writes into the extents they destage
    # (the daemon's, not the model's instant ones).
    assert latched == 1, f"the evidence never turned reclaim on: {cst(a.mnt)}"
    for fixed in ("0", "1"):
        r = subprocess.run([str(SIM), "--trace", str(out), "--extent", str(E), "--agree", "32",
                            "--threshold", "2", "--reclaim", fixed,
                            "--dirty", f"{dirty[0]}:{dirty[1]}"],
                           capture_output=True, text=True, timeout=60)
        row = next(l.split(",") for l in r.stdout.splitlines() if l.startswith(f"tierfs_{policy},"))
        assert float(row[6]) <= float(same[6]) - 0.01, (fixed, r.stdout, got.stdout)


def test_the_model_agrees_across_unlinks(make_array, tmp_path):
    """The daemon drops an unlinked file's extents (cut.c); the trace says
    so (a 'C' record) and the model does the same (tfs_model_cut).  On a
    mount of 32 slots: each round writes a new file of 8 extents, reads
    them and a hot file's 12, and unlinks the new file.  The model agrees
    with the daemon on every request; replayed without the cuts
    (--cuts off) its dead dirty extents, young and so spared by the
    flusher, crowd the hot file out and it agrees on far fewer."""
    E = 64 * K
    a = make_array("raid5", 3, "64K")
    hot = a.mnt / "hot"
    m = a.mount()                                   # written without the tier
    pwrite(hot, 0, random.Random(1).randbytes(12 * E))
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", size="2M", extent="64K", promote=1, reclaim=0,
                       dirty_low=60, dirty_high=90))  # 32 slots
    out = tmp_path / "t.trace"
    assert tierctl("trace", a.mnt, "start", out).returncode == 0
    rng = random.Random(2)
    hfd = os.open(hot, os.O_RDONLY | os.O_DIRECT)
    buf = abuf(E)
    try:
        for i in range(12):
            f = a.mnt / f"new{i}"
            fd = os.open(f, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
            try:
                for e in range(8):
                    os.pwritev(fd, [buf], e * E)
                for e in rng.sample(range(8), 8):
                    os.preadv(fd, [memoryview(buf)[:4 * K]], e * E)
            finally:
                os.close(fd)
            for e in rng.sample(range(12), 12):
                os.preadv(hfd, [memoryview(buf)[:4 * K]], e * E + rng.randrange(16) * 4 * K)
                wait_stat(a.mnt, "promote_backlog", 0)      # the model promotes at once
            os.unlink(f)
    finally:
        os.close(hfd)
    assert tierctl("trace", a.mnt, "stop").returncode == 0
    assert sum(1 for x in read_trace(out) if x[4] == ord("C")) == 12

    def agree(*extra):
        r = subprocess.run([str(SIM), "--trace", str(out), "--extent", str(E), "--agree", "32",
                            "--threshold", "1", "--reclaim", "0", "--dirty", "60:90", *extra],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        row = next(l.split(",") for l in r.stdout.splitlines() if l.startswith("tierfs_wtinylfu,"))
        return float(row[6]), r.stdout
    on, off = agree(), agree("--cuts", "off")
    assert on[0] >= 0.99, on
    assert off[0] <= on[0] - 0.05, (on, off)


REFERENCE = ["ref_lru", "arc", "lirs", "2q", "ref_s3fifo", "wtinylfu"]


def check_bounds(got, sizes):
    """Every policy has a row at every size; MIN with bypass bounds every
    row, MIN without bypass every row that admits on each miss (the
    reference policies, and the daemon's at threshold 1)."""
    for pct in sizes:
        rows = {p: v for (p, t, s), v in got.items() if s == pct}
        for p in ["lru", "s3fifo", *REFERENCE, "belady", "belady_bypass"]:
            assert any(q == p for q in rows), (p, pct, sorted(rows))
        n = {v[1] for v in rows.values()}
        assert len(n) == 1, got                   # the same accesses counted
        best = got[("belady_bypass", 0, pct)][0]
        for (p, t, s), (hits, _) in got.items():
            if s != pct:
                continue
            assert hits <= best, (p, t, pct, hits, best)
            if t <= 1 and p != "belady_bypass":
                assert hits <= got[("belady", 0, pct)][0], (p, t, pct, hits)


def test_reference_policies_on_a_csv_trace(tmp_path):
    """A skewed object trace with a scan mixed in: a row for each of the
    reference policies (threshold 0) at each size, bounded by Belady."""
    import random
    rnd = random.Random(16)
    hot = [f"o{i}" for i in range(2000)]
    lines = []
    for t in range(30000):
        if t % 4 == 0:
            name = f"scan{t // 4 % 5000}"
        else:                                      # roughly Zipf: rank ~ 1/u
            name = hot[min(int(1 / (rnd.random() + 1e-9)) - 1, 1999) if rnd.random() < .7
                       else rnd.randrange(2000)]
        lines.append(f"{t},{name},4096,{'write' if rnd.random() < .2 else 'read'}\n")
    p = tmp_path / "zipf.csv"
    p.write_text("time,object,size,op\n" + "".join(lines))
    got = sim(p, "--extent", str(4 * K), "--threshold", "1,2", "--sizes", "5,10,20")
    check_bounds(got, [5, 10, 20])
    # the daemon's LRU at threshold 1 (every miss admitted) is plain LRU
    for pct in (5, 10, 20):
        assert got[("lru", 1, pct)] == got[("ref_lru", 0, pct)], got
    # the scan-resistant policies beat LRU here
    for pol in ("arc", "lirs", "2q", "ref_s3fifo", "wtinylfu"):
        assert got[(pol, 0, 10)][0] > got[("ref_lru", 0, 10)][0], (pol, got)
    # --format csv reads it the same
    assert sim(p, "--extent", str(4 * K), "--threshold", "1,2", "--sizes", "5,10,20",
               "--format", "csv") == got


def test_the_hash_seed_moves_only_the_sketches(tmp_path):
    """cache_sim --hash-seed S seeds the hash of both W-TinyLFU sketches,
    the tier's (policy.c) and the reference's (simpol.c): seed 0 is the
    replay without the flag, byte for byte; another seed moves the
    sketches' collisions, so both W-TinyLFUs' counts, and nothing else's
    (issue 16: how much of the tier's gap to the reference is the hash's)."""
    rnd = random.Random(43)
    lines = []
    for t in range(20000):                         # roughly Zipf over 3000 objects
        o = min(int(1 / (rnd.random() + 1e-9)) - 1, 2999) if rnd.random() < .6 \
            else rnd.randrange(3000)
        lines.append(f"{t},o{o},4096,{'write' if rnd.random() < .2 else 'read'}\n")
    p = tmp_path / "skew.csv"
    p.write_text("time,object,size,op\n" + "".join(lines))
    args = ["--trace", str(p), "--extent", str(4 * K), "--threshold", "0,1,2",
            "--sizes", "5,10,20"]

    def run(*extra):
        r = subprocess.run([str(SIM), *args, *extra], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout
    plain = run()
    assert run("--hash-seed", "0") == plain
    rows = {}
    for seed in (0, 1, 2):
        got = run("--hash-seed", str(seed))
        rows[seed] = {(w[1], w[2], w[3]): tuple(w[4:]) for w in
                      (l.split(",") for l in got.splitlines()[1:])}
        assert run("--hash-seed", str(seed)) == got       # the same seed, the same replay
    sketched = ("wtinylfu", "tierfs_wtinylfu")
    for seed in (1, 2):
        for k, v in rows[0].items():
            if k[0] not in sketched:
                assert rows[seed][k] == v, (seed, k)
        for pol in sketched:
            moved = [k for k in rows[0] if k[0] == pol and rows[seed][k] != rows[0][k]]
            assert moved, (seed, pol)
    assert any(rows[1][k] != rows[2][k] for k in rows[0] if k[0] == "wtinylfu")


def write_vscsi(path, version, recs):
    """recs: (cmd, lbn, len, ts_us); vscsi1 (32-byte records) or vscsi2
    (40), the layouts of the public VMware/CloudPhysics traces."""
    with open(path, "wb") as f:
        for sn, (cmd, lbn, ln, ts) in enumerate(recs):
            if version == 1:
                f.write(struct.pack("<IIIHHQQ", sn, ln, 1, cmd, 0x0100, lbn, ts))
            else:
                f.write(struct.pack("<HHIIIQQQ", cmd, 0x0200, sn, ln, 1, lbn, ts, 40))


def test_vscsi_traces_replay(tmp_path):
    """Both vscsi layouts, told apart by their version bytes: lbn in
    512-byte sectors, len in bytes, SCSI READ/WRITE opcodes; other commands
    (SYNCHRONIZE CACHE, INQUIRY) are not accesses."""
    E = 4 * K
    recs = [(0x28, 0, 4096, 10),                   # READ(10) extent 0
            (0x88, 8, 8192, 11),                   # READ(16) extents 1 and 2
            (0x35, 0, 0, 12),                      # SYNCHRONIZE CACHE
            (0x2a, 1, 512, 13),                    # WRITE(10) into extent 0: a hit
            (0x12, 0, 36, 14),                     # INQUIRY
            (0x08, 16, 4096, 15)]                  # READ(6) extent 2: a hit
    for v in (1, 2):
        p = tmp_path / f"v{v}.vscsi"
        write_vscsi(p, v, recs)
        for fmt in ([], ["--format", "vscsi"]):
            got = sim(p, "--extent", str(E), "--threshold", "1", "--sizes", "100",
                      "--warmup", "0", *fmt)
            for pol in ["lru", "s3fifo", *REFERENCE, "belady", "belady_bypass"]:
                key = (pol, 1 if pol in ("lru", "s3fifo") else 0, 100)
                assert got[key] == (2, 5), (v, pol, got)
    # a larger one: a hot set, a scan, writes; every policy, bounded by MIN
    import random
    rnd = random.Random(7)
    recs = []
    for t in range(20000):
        blk = t // 3 % 20000 + 1000 if t % 3 == 0 else int(rnd.paretovariate(1.2)) % 1000
        recs.append((0x2a if rnd.random() < .3 else 0x28, blk * 8, 4096, 1000 + t))
    p = tmp_path / "big.vscsi"
    write_vscsi(p, 2, recs)
    got = sim(p, "--extent", str(E), "--threshold", "1", "--sizes", "5,10,20")
    check_bounds(got, [5, 10, 20])
    # the same bytes are not a text trace
    r = subprocess.run([str(SIM), "--trace", str(p), "--format", "csv"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0


def test_format_is_checked(tmp_path):
    """--format names a reader; bytes that are none of the three are
    refused instead of read as an empty text trace."""
    p = tmp_path / "noise.bin"
    p.write_bytes(bytes(range(256)) * 4)
    r = subprocess.run([str(SIM), "--trace", str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--format" in r.stderr, r.stderr
    r = subprocess.run([str(SIM), "--trace", str(p), "--format", "nope"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    r = subprocess.run([str(SIM), "--trace", str(p), "--format", "vscsi"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "not a vscsi trace" in r.stderr, r.stderr


def test_extent_is_checked(tmp_path):
    """Every policy's sector bitmap holds the tier's 256 sectors (1 MiB
    extents, sectors.h): a larger or ragged --extent is refused in one
    line.  A 2 MiB extent wrote past each extent's bitmap and the replay
    died in malloc."""
    p = tmp_path / "t.trace"
    write_trace(p, [(t, 3, (t % 4) * M, 4 * K, "R") for t in range(40)])
    for bad in (2 * M, 6000):
        r = subprocess.run([str(SIM), "--trace", str(p), "--extent", str(bad)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--extent" in r.stderr, \
            (bad, r.returncode, r.stderr)
    assert sim(p, "--extent", str(M), "--threshold", "1", "--sizes", "100",
               "--warmup", "0")[("lru", 1, 100)] == (36, 40)


def test_numbers_are_read_whole(tmp_path):
    """cache_sim's numbers go through the daemon's parser (parse.c): a
    size takes a K/M/G suffix, and anything else after the digits is
    refused in one line naming the option.  strtoull read "--seq-cutoff
    1G" as 1 byte: every read a stream (stop 41's "no cutoff" replay)."""
    E = 64 * K
    p = tmp_path / "seq.trace"
    # a 2 MiB file read from start to end in 64K requests, 6 times
    write_trace(p, [(n * 1000 + i, 5, i * E, E, "R") for n in range(6) for i in range(32)])

    def hits(cutoff):
        got = sim(p, "--extent", "64K", "--threshold", "1", "--sizes", "100", "--warmup", "0",
                  "--seq-cutoff", cutoff)
        return got[("tierfs_wtinylfu", 1, 100)]

    # no stream under a 1 GiB cutoff: only the first pass misses
    assert hits("1G") == hits(str(1 << 30)) == hits("0") == (160, 192)
    assert hits("1") == (128, 192)          # a stream from the second request
    for opt, bad in (("--seq-cutoff", "1X"), ("--extent", "64x"), ("--row", "-1"),
                     ("--warmup", "2"), ("--halflife", "ten"), ("--dirty", "20:70x"),
                     ("--dirty", "70:20"), ("--mrc", "0")):
        r = subprocess.run([str(SIM), "--trace", str(p), opt, bad], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2, (opt, bad, r.returncode, r.stderr)
        if opt != "--dirty":
            assert r.stderr.count("\n") == 1 and f"{opt}={bad}" in r.stderr, (opt, r.stderr)
