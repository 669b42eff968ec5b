"""Issue 16: the tier watching itself on a real mount -- the live
miss-ratio curve (cache.mrc_*: the read hit ratio a tier of 0.25x to 8x its
size would have reached, from miniature models of the tier on a sample of
its extents; src/cache/watch.c, mrc.c) and the admission tuner
(cache_promote=0: the promotion threshold its miniatures show best)."""
import mmap
import os
import random
import subprocess

from conftest import BUILD, FID_XATTR
from test_cache import K, M, copts, cst, pwrite, wait_stat
from test_attrs import get, put

E = 64 * K


def reads(path, extents, rng, n):
    """n 4K O_DIRECT reads of the given extents, chosen by rng."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4 * K)
    try:
        for _ in range(n):
            e = extents(rng)
            os.preadv(fd, [buf], e * E + rng.randrange(16) * 4 * K)
    finally:
        os.close(fd)


def curve(mnt):
    s = cst(mnt)
    return {k: float(s[f"mrc_{k}"]) for k in ["x0_25", "x0_5", "x1", "x2", "x4", "x8"]}, s


def test_the_curve_says_what_a_bigger_tier_would_hit(make_array, tmp_path):
    """A working set of 600 extents read uniformly through a tier of 256:
    the tier hits about 40% of reads; the curve says so at 1x, says a tier
    of 2x (512 slots) would hit about 85% and one of 4x or 8x nearly all,
    and is monotone; tierctl status prints it."""
    a = make_array("raid5", 3, "64K")
    p = a.mnt / "f"
    m = a.mount()                                   # written without the tier
    pwrite(p, 0, random.Random(1).randbytes(600 * E))
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", promote=1))
    rng = random.Random(2)
    reads(p, lambda r: r.randrange(600), rng, 20000)    # warm
    put(a.mnt, "reset")
    reads(p, lambda r: r.randrange(600), rng, 40000)
    c, s = curve(a.mnt)
    real = s["read_hits"] / (s["read_hits"] + s["read_misses"])
    assert s["mrc_reads"] > 5000, s
    assert abs(c["x1"] - real) < 0.06, (c, real)
    assert 0.30 < c["x1"] < 0.55, c
    assert c["x2"] > 0.75, c
    assert c["x4"] > 0.97 and c["x8"] > 0.97, c
    vals = list(c.values())
    assert all(x <= y + 0.02 for x, y in zip(vals, vals[1:])), c
    out = subprocess.run([str(BUILD / "tierctl"), "status", str(a.mnt)], capture_output=True,
                         text=True)
    assert "if the tier were" in out.stdout and "32 MiB" in out.stdout, out.stdout


def test_the_tuner_lowers_the_threshold_when_extents_come_back_once(make_array, tmp_path):
    """Extents read twice, 500 reads apart, then never again: at threshold
    2 the second read only promotes (a miss), so the tier never hits; at 1
    it hits every second read.  With cache_promote=0 the tuner's
    miniatures see it and the tier runs at 1 from its first window on
    (1,024 sampled reads: about 4,000 reads at a sample of 1/4, so it hits
    nearly half of the 32,000; with stop 42's window of 4,096, 16,000
    reads, half the run, went by first and it hit about a quarter); with
    the threshold fixed at 2 it stays there and misses.  (LRU: S3-FIFO's
    small queue, a tenth of the tier, would drop most of a run of 500
    before its second read, which the miniatures see too, but which would
    blur the threshold's effect.)"""
    a = make_array("raid5", 3, "64K")
    p = a.mnt / "f"
    n = 16000                                       # extents of 64K: 1000 MiB, sparse
    m = a.mount()
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, n * E)
    os.close(fd)
    m.stop()
    results = {}
    for promote in ["0", "2"]:
        mm = a.mount(opts=copts(tmp_path / f"cache{promote}", size="64M", extent="64K",
                                promote=promote, policy="lru"))
        rng = random.Random(3)
        order = list(range(n))
        rng.shuffle(order)
        for lo in range(0, n, 500):                 # runs of 500, each read twice
            chunk = order[lo:lo + 500]
            for _ in range(2):
                it = iter(chunk)
                reads(p, lambda r: next(it), rng, len(chunk))
                # the promoter's pace is the machine's (each promotion commits
                # a record); the test is about the threshold, so a second read
                # comes after the first read's promotions (CI once fell 1024
                # behind: every promotion landed after its second read)
                wait_stat(a.mnt, "promote_backlog", 0)
        s = cst(a.mnt)
        results[promote] = s
        mm.stop()
    auto, fixed = results["0"], results["2"]
    assert auto["promote_auto"] == 1 and auto["promote_threshold"] == 1, auto
    assert auto["promote_changes"] >= 1, auto
    assert fixed["promote_auto"] == 0 and fixed["promote_threshold"] == 2, fixed
    hit = {k: s["read_hits"] / (s["read_hits"] + s["read_misses"]) for k, s in results.items()}
    assert auto["promote_dropped"] == 0, auto       # the queue (1024) holds a run (500)
    assert hit["2"] < 0.01 and hit["0"] > 0.35, hit


def test_a_threshold_set_by_hand_ends_auto(make_array, tmp_path):
    a = make_array("raid0", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", promote="0"))
    assert get(a.mnt, "promote_threshold") == "0"
    assert cst(a.mnt)["promote_auto"] == 1
    put(a.mnt, "promote_threshold", "3")
    s = cst(a.mnt)
    assert s["promote_auto"] == 0 and s["promote_threshold"] == 3, s
    assert get(a.mnt, "promote_threshold") == "3"
    put(a.mnt, "promote_threshold", "0")
    assert cst(a.mnt)["promote_auto"] == 1



def ext_key(fid, idx):
    """rules.h tfs_ext_key: an extent's place in the samples."""
    M = (1 << 64) - 1

    def mix(x):
        x ^= x >> 33
        x = x * 0xff51afd7ed558ccd & M
        x ^= x >> 33
        x = x * 0xc4ceb9fe1a85ec53 & M
        return x ^ x >> 33
    return mix((fid * 0x9E3779B97F4A7C15 & M) ^ mix(idx + 1))


def test_a_small_tier_s_curve_holds_when_its_hot_extents_fall_in_the_sample(make_array,
                                                                            tmp_path):
    """A tier of 256 slots, a working set of 600 extents, half the reads on
    8 hot ones that all fall in the sample of 1/4 (a few hot extents in a
    small working set: the sample holds 0 to 8 of them by luck).  The curve
    at 1x is within 0.02 of what the tier itself hit, and says a bigger tier
    would hit more: each size samples enough extents for its miniature to
    hold 1,024 slots (mrc.c invariant 1).  At 1/4 alone the 1x miniature
    held 64 slots and all 8 hot extents, so it saw 4 times the hot reads'
    share and said 0.88 where the tier hit 0.72."""
    a = make_array("raid5", 3, "64K")
    p = a.mnt / "f"
    m = a.mount()                                   # written without the tier
    pwrite(p, 0, random.Random(1).randbytes(600 * E))
    fid = int(os.getxattr(a.members[0] / "root" / "f", FID_XATTR))
    m.stop()
    hot = [i for i in range(600) if ext_key(fid, i) < 1 << 62][:8]
    assert len(hot) == 8
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", promote=1))
    rng = random.Random(4)
    pick = lambda r: r.choice(hot) if r.random() < 0.5 else r.randrange(600)
    reads(p, pick, rng, 20000)                      # warm
    put(a.mnt, "reset")
    reads(p, pick, rng, 40000)
    c, s = curve(a.mnt)
    real = s["read_hits"] / (s["read_hits"] + s["read_misses"])
    assert abs(c["x1"] - real) < 0.02, (c, real)
    assert c["x0_25"] < c["x0_5"] < c["x1"] < c["x2"] < c["x4"], c


def test_the_curve_destages_at_the_flusher_s_pace(make_array, tmp_path):
    """The miniatures destage at the rate the flusher measures (flush.c
    invariant 16, watch.c invariant 5): 0 (at once) until the flusher has
    worked a second; after 6 MiB of dirty extents destaged to a member
    modelled at 2 MB/s, that member's pace, seeks included.  (The curve's
    own use of it is proven on traces: test_rules.c mrc_destage,
    test_trace.py.)"""
    from test_cache import flush, write_direct
    a = make_array("jbod", 1)
    a.mount(opts=["member_model=hdd7200", "hdd_mbps=2",
                  *copts(tmp_path / "cache", size="16M", extent="64K")])
    p = a.mnt / "f"
    write_direct(p, 0, random.Random(5).randbytes(6 * M), create=True)   # write-back
    assert float(cst(a.mnt)["mrc_destage_mbps"]) == 0
    flush(a.mnt)
    reads(p, lambda r: r.randrange(96), random.Random(6), 50)   # the miniatures take it
    rate = float(cst(a.mnt)["mrc_destage_mbps"])
    assert 0.3 < rate < 2.5, rate


def test_the_curve_forgets_a_deleted_file(make_array, tmp_path):
    """An unlinked file's extents leave the tier (cut.c), and the
    miniatures now (watch.c invariant 6): a tier of 256 slots filled by
    a file read 80 times an extent, which is then deleted; another file of
    200 extents read afterwards lands in the freed slots and hits, and the
    curve's 1x, a miniature of all 256 slots (mrc.c invariant 1), says
    the same.  Before, the miniatures kept the dead file's extents, whose
    counts won W-TinyLFU's duels against the new file's for thousands of
    reads, and the curve said far less than the tier hit."""
    a = make_array("raid5", 3, "64K")
    old, new = a.mnt / "old", a.mnt / "new"
    m = a.mount()                                   # written without the tier
    pwrite(old, 0, random.Random(1).randbytes(256 * E))
    pwrite(new, 0, random.Random(2).randbytes(200 * E))
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="64K", promote=1))
    rng = random.Random(3)
    reads(old, lambda r: r.randrange(256), rng, 20000)
    os.unlink(old)
    put(a.mnt, "reset")
    reads(new, lambda r: r.randrange(200), rng, 6000)
    c, s = curve(a.mnt)
    real = s["read_hits"] / (s["read_hits"] + s["read_misses"])
    assert real > 0.9, s
    assert abs(c["x1"] - real) < 0.03, (c, real)


def test_the_curve_takes_the_promoters_time(make_array, tmp_path):
    """A read of an extent whose promotion is still on its way misses, and
    so does the curve's (flush.c invariant 18, watch.c invariant 7): 96
    files of 1 MiB (384 extents of 256K) through a tier of 256, each file
    read whole in eight 128K O_DIRECT reads at once, as the kernel's
    readahead asks.  An extent not cached misses both halves in the tier
    (the second comes while the first one's promotion is on its way); the
    curve's 1x, a model of all 256 slots, says the same.  Promoting at
    once, the model hit the second halves: the curve said .80 where the
    tier hit .60, and .56 at 0.25x, where a tier of 64 slots hits .13."""
    from concurrent.futures import ThreadPoolExecutor
    a = make_array("raid5", 3, "64K")
    m = a.mount()                                   # written without the tier
    for i in range(96):
        pwrite(a.mnt / f"f{i}", 0, random.Random(i).randbytes(M))
    m.stop()
    a.mount(opts=copts(tmp_path / "cache", size="64M", extent="256K", promote=1))
    rng = random.Random(7)
    bufs = [mmap.mmap(-1, 128 * K) for _ in range(8)]

    with ThreadPoolExecutor(8) as pool:
        def read_file(i):
            fd = os.open(a.mnt / f"f{i}", os.O_RDONLY | os.O_DIRECT)
            try:
                list(pool.map(lambda k: os.preadv(fd, [bufs[k]], k * 128 * K), range(8)))
            finally:
                os.close(fd)
        for _ in range(150):                        # warm
            read_file(rng.randrange(96))
        put(a.mnt, "reset")
        for _ in range(400):
            read_file(rng.randrange(96))
    c, s = curve(a.mnt)
    real = s["read_hits"] / (s["read_hits"] + s["read_misses"])
    assert float(s["mrc_promote_us"]) > 0, s
    assert 0.5 < real < 0.8, s
    assert abs(c["x1"] - real) < 0.03, (c, real, s["mrc_promote_us"])
    assert c["x0_25"] < 0.3, c


def test_the_curve_times_a_promotion_from_its_promoter_not_the_queue(make_array, tmp_path):
    """The miniatures take a promotion's time from the promoter that does
    it, and queue for their share of the promoters themselves (flush.c
    invariant 18, model.c invariant 9).  Member reads take 20 ms; 16
    readers miss 800 extents once each, faster than the 4 promoters copy
    them, so hundreds wait.  Timed from the queueing, the mean took in the
    wait (a second or more here), and a miniature gave every promotion
    that delay, however many it queued: a setting that promotes more
    looked no slower (stop 42's tuner window).  The promoter's own time
    is the member read and the SSD's write: well under 0.2 s."""
    from test_cache import dread, flood_promoters
    a = make_array("raid1", 2, "64K")
    a.mount(opts=copts(tmp_path / "cache", size="16M", extent="4K", promote=1, seq_cutoff=0)
            + ["max_threads=64"], env={"TIERFS_FAULT": "delay=read:20"})
    peak = flood_promoters(a.mnt, 800, 16)
    fd = os.open(str(a.mnt / "f"), os.O_RDONLY | os.O_DIRECT)     # a request gives the time
    try:
        dread(fd, 0, 4 * K)
    finally:
        os.close(fd)
    s = cst(a.mnt)
    assert peak >= 100, (peak, s)
    assert 20000 <= float(s["mrc_promote_us"]) < 200000, s
