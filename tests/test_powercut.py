"""Crash-state exploration: power cuts of the whole daemon, in the spirit of
CrashMonkey and ALICE.

A seeded workload (writes and overwrites, buffered and O_DIRECT, fsync,
fdatasync, truncate, hole punch, rename, unlink, on more data than the SSD tier holds,
so extents are evicted and slots reused) runs on a real mount under the
power-cut model (TIERFS_FAULT=drop_unsynced,cut_after=N,cut_dump=PATH:
src/member/powercut.c).  At the N-th noted operation the daemon writes down
every change no sync covered (member files, member journals, the SSD data
file, the extent store and its log) and dies.  Each cut is expanded into
several crash states: a copy of the array in which every unsynced 4 KiB
block is lost or kept by a seeded draw (tests/tools/pcut_apply).  For every
state the array must mount, and then:

  * every byte of a file as of its last fsync/fdatasync reads back, or a
    byte written after it (nothing reads older than its last fsync);
  * no 512-byte unit shows another file's bytes, or torn or foreign bytes;
  * every size lies between the smallest and the largest the file had at
    or after its last fsync (an unsynced extension may be torn);
  * a file that existed at its directory's last fsync still exists;
  * a scrub finds no mismatch (redundant levels).

TIERFS_CRASH_STATES sets the total number of states (default 1500, split
over the configurations); TIERFS_CRASH_LONG=1 multiplies it by ten;
TIERFS_CRASH_SEED=S draws other cuts (other workload seeds and cut
points) than the default run's.

A failing configuration's message ends with one line that replays its
first failing state alone (the configuration, the workload's seed, the
cut, the state and its keep), as test_fsx's failures do:
    TIERFS_CRASH_ONLY=CONFIG:SEED:CUT:STATE:KEEP pytest
        'tests/test_powercut.py::test_crash_states[CONFIG]'
CONFIG is the test's id (raid5x4-tier ...); without :STATE:KEEP the
cut's five states of fixed keeps (0, 1, 0.5, 0.25, 0.75) are checked.
The cut's daemon notes its own writes too, so a replay reaches the same
workload operation only as closely as their timing allows.  The first
failing state is also copied to the test's 'failed' dir, with the same
line in its 'where' file.
"""
import ctypes
import ctypes.util
import os
import pathlib
import random
import shutil
import struct
import subprocess
import threading
import time

import pytest

from conftest import BUILD, REPORT, Mount, mkfs, run_threads
from test_cache import (full_row_copy, cst, dwrite, flush, pwrite, read_all, read_direct,
                        write_direct)

UNIT = 512
ZERO = bytes(UNIT)
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
PUNCH = 2 | 1           # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
PCUT_APPLY = BUILD / "pcut_apply"
TIERCTL = BUILD / "tierctl"

# (level, members, cached): the tier in write-back on RAID1, RAID5, RAID6,
# and the uncached levels
CONFIGS = [
    ("raid5", 4, True),
    ("raid6", 4, True),
    ("raid1", 2, True),
    ("raid5", 3, False),
    ("raid1", 2, False),
]


def total_states():
    n = int(os.environ.get("TIERFS_CRASH_STATES", "1500"))
    if os.environ.get("TIERFS_CRASH_LONG"):
        n *= 10
    return n


def crash_seed():
    """TIERFS_CRASH_SEED, or '' for the default run's cuts."""
    return os.environ.get("TIERFS_CRASH_SEED", "")


def config_id(level, n, cached):
    """A configuration's test id, as TIERFS_CRASH_ONLY names it."""
    return f"{level}x{n}{'-tier' if cached else ''}"


# each cut's first states keep these shares of the unsynced blocks; the
# rest draw theirs from the run's rng
KEEPS = [0.0, 1.0, 0.5, 0.25, 0.75]


def crash_only():
    """TIERFS_CRASH_ONLY=CONFIG:SEED:CUT[:STATE:KEEP] as (config, seed, cut,
    [(state, keep)]), or None when unset."""
    v = os.environ.get("TIERFS_CRASH_ONLY")
    if not v:
        return None
    f = v.split(":")
    try:
        if len(f) not in (3, 5) or f[0] not in [config_id(*c) for c in CONFIGS]:
            raise ValueError(v)
        states = [(int(f[3]), float(f[4]))] if len(f) == 5 else list(enumerate(KEEPS))
        return f[0], int(f[1]), int(f[2]), states
    except ValueError:
        pytest.fail(f"TIERFS_CRASH_ONLY={v}: not CONFIG:SEED:CUT[:STATE:KEEP] with CONFIG "
                    f"one of {[config_id(*c) for c in CONFIGS]}", pytrace=False)


def replay_line(level, n, cached, seed, cut, sidx, keep):
    """The command that checks state sidx of this cut alone."""
    cfg = config_id(level, n, cached)
    return (f"TIERFS_CRASH_ONLY={cfg}:{seed}:{cut}:{sidx}:{keep} pytest "
            f"'tests/test_powercut.py::test_crash_states[{cfg}]'  # replays this state")


def tag(fn, seq, u):
    """The 512 bytes a write with sequence seq puts in unit u of file fn."""
    return struct.pack("<IIQ", fn, seq, u) * (UNIT // 16)


def parse(b):
    """None for zeros, (fn, seq, u), or 'torn' for anything else."""
    if b == ZERO:
        return None
    h = b[:16]
    if h * (UNIT // 16) != b:
        return "torn"
    return struct.unpack("<IIQ", h)


# ---------------------------------------------------------------------------
# What may be there after a cut
# ---------------------------------------------------------------------------

class FileModel:
    """One file's acceptable states: what it held at its last fsync (synced)
    and every unit version and size it had since (after, sizes)."""

    def __init__(self, fn, name):
        self.fn = fn
        self.names = {name}         # names it may have after a cut
        self.name = name
        self.cur = {}               # unit -> seq (absent: zeros)
        self.size = 0
        self.synced = {}
        self.synced_size = None     # None: never fsynced (may be empty or gone)
        self.after = {}             # unit -> {seq or None}
        self.sizes = {0}
        self.dir_synced = False     # existed at a fsync of its directory
        self.gone = False           # unlinked (and maybe dir-synced)

    def write(self, u0, n, seq):
        for u in range(u0, u0 + n):
            self.cur[u] = seq
            self.after.setdefault(u, set()).add(seq)
        self.size = max(self.size, (u0 + n) * UNIT)
        self.sizes.add(self.size)

    def punch(self, u0, n):
        for u in range(u0, u0 + n):
            self.cur.pop(u, None)
            self.after.setdefault(u, set()).add(None)

    def truncate(self, size):
        nu = size // UNIT
        for u in [u for u in self.cur if u >= nu]:
            del self.cur[u]
            self.after.setdefault(u, set()).add(None)
        self.size = size
        self.sizes.add(size)

    def fsynced(self):
        self.synced = dict(self.cur)
        self.synced_size = self.size
        self.after = {}
        self.sizes = {self.size}

    def ok(self, data):
        """None if data is an acceptable content of this file, else why not."""
        # a size between the smallest and the largest it had since its last
        # fsync: an unsynced extension may be torn (some members' files grew,
        # others not; ext4's i_disksize too moves page by page at writeback)
        sizes = self.sizes | ({self.synced_size} if self.synced_size is not None else set())
        if not min(sizes) <= len(data) <= max(sizes):
            return (f"size {len(data)}: outside what it had since its last fsync "
                    f"(synced {self.synced_size}, since {sorted(self.sizes)})")
        for u in range(len(data) // UNIT):
            got = parse(data[u * UNIT:(u + 1) * UNIT])
            if got == "torn":
                return f"unit {u} (offset {u * UNIT}): torn or foreign bytes"
            if got is not None and (got[0] != self.fn or got[2] != u):
                return (f"unit {u} (offset {u * UNIT}): bytes of file {got[0]} unit {got[2]} "
                        f"(write {got[1]}), not of file {self.fn}")
            seq = None if got is None else got[1]
            want = {self.synced.get(u)} | self.after.get(u, set())
            if seq not in want:
                return (f"unit {u} (offset {u * UNIT}): write {seq}, but only "
                        f"{sorted(want, key=lambda x: -1 if x is None else x)} may be there "
                        f"(synced: {self.synced.get(u)})")
        return None


class Workload:
    """A seeded sequence of operations on DIR/d, recorded in FileModels
    before each is issued (so the one in flight at the cut counts as
    possibly done) and promoted to synced only when an fsync returns."""

    NFILES = 5
    FILE_UNITS = 1024               # 512 KiB per file
    NOPS = 150                      # operations after the setup

    def __init__(self, mnt, seed):
        self.d = os.path.join(str(mnt), "d")
        self.rng = random.Random(seed)
        self.nops = self.NOPS
        self.seq = 0
        self.files = []
        self.next_fn = 1
        self.done = 0
        self.stopped = None

    def path(self, f):
        return os.path.join(self.d, f.name)

    def new_file(self, name):
        f = FileModel(self.next_fn, name)
        self.next_fn += 1
        self.files.append(f)
        return f

    def live(self):
        return [f for f in self.files if not f.gone]

    def write(self, f, u0, n, direct):
        self.seq += 1
        seq = self.seq
        data = b"".join(tag(f.fn, seq, u) for u in range(u0, u0 + n))
        f.write(u0, n, seq)
        flags = os.O_RDWR | (os.O_DIRECT if direct else 0)
        fd = os.open(self.path(f), flags)
        try:
            if direct:
                import mmap
                b = mmap.mmap(-1, len(data))
                b[:] = data
                assert os.pwritev(fd, [b], u0 * UNIT) == len(data)
                b.close()
            else:
                assert os.pwrite(fd, data, u0 * UNIT) == len(data)
        finally:
            os.close(fd)

    def fsync(self, f, data_only):
        fd = os.open(self.path(f), os.O_RDONLY)
        try:
            (os.fdatasync if data_only else os.fsync)(fd)
        finally:
            os.close(fd)
        f.fsynced()

    def fsyncdir(self):
        fd = os.open(self.d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for f in self.files:
            if not f.gone:
                f.dir_synced = True
                f.names = {f.name}

    def setup(self):
        os.mkdir(self.d)
        for i in range(self.NFILES):
            f = self.new_file(f"f{i}")
            open(self.path(f), "wb").close()
            self.write(f, 0, self.rng.randrange(1, 64), False)
            self.fsync(f, False)
        self.fsyncdir()

    def step(self):
        r = self.rng.random()
        f = self.rng.choice(self.live())
        if r < 0.55:
            direct = self.rng.random() < 0.25
            if direct:      # O_DIRECT: 4K aligned
                u0 = self.rng.randrange(0, self.FILE_UNITS - 64) // 8 * 8
                n = self.rng.randrange(1, 9) * 8
            else:
                u0 = self.rng.randrange(0, self.FILE_UNITS - 64)
                n = self.rng.choice([1, 1, 2, 3, 7, 8, 16, 33, 64])
            self.write(f, u0, n, direct)
        elif r < 0.70:
            self.fsync(f, False)
        elif r < 0.78:
            self.fsync(f, True)
        elif r < 0.81:
            u0 = self.rng.randrange(0, self.FILE_UNITS - 64) // 8 * 8
            n = self.rng.randrange(1, 9) * 8
            f.punch(u0, n)
            fd = os.open(self.path(f), os.O_RDWR)
            try:
                if _libc.fallocate(fd, PUNCH, u0 * UNIT, n * UNIT):
                    raise OSError(ctypes.get_errno(), "fallocate")
            finally:
                os.close(fd)
        elif r < 0.85:
            size = self.rng.randrange(0, self.FILE_UNITS) * UNIT
            f.truncate(size)
            os.truncate(self.path(f), size)
        elif r < 0.90:
            new = f"r{self.seq}_{f.fn}"
            self.seq += 1
            f.names.add(new)
            os.rename(self.path(f), os.path.join(self.d, new))
            f.name = new
            if self.rng.random() < 0.5:
                self.fsyncdir()
        elif r < 0.95 and len(self.live()) > 2:
            f.gone = True           # may still be there until the dir is synced
            os.unlink(self.path(f))
            g = self.new_file(f"n{self.next_fn}")
            open(self.path(g), "wb").close()
            if self.rng.random() < 0.5:
                self.fsyncdir()
        else:
            self.fsyncdir()

    def run(self):
        """Until the daemon dies (an OSError) or the ops run out."""
        try:
            self.setup()
            for _ in range(self.nops):
                self.step()
                self.done += 1
        except OSError as e:
            self.stopped = e


def check_state(w, mnt):
    """Problems with the crash state mounted on mnt, as a list of strings."""
    d = os.path.join(str(mnt), "d")
    bad = []
    if not os.path.isdir(d):
        if any(f.dir_synced for f in w.files):
            return [f"{d} is gone"]
        return []
    names = set(os.listdir(d))
    claimed = set()
    for f in w.files:
        found = sorted(names & f.names)
        if f.dir_synced and not f.gone and f.synced_size is not None and not found:
            bad.append(f"file {f.fn} ({sorted(f.names)}) is gone though its directory "
                       f"and its data were synced")
        for n in found:
            claimed.add(n)
            try:        # a name listed must open, as on ext4 after a crash
                with open(os.path.join(d, n), "rb") as fh:
                    data = fh.read()
            except OSError as e:
                bad.append(f"{n} (file {f.fn}): listed, but reading it fails: {e.strerror}")
                continue
            why = f.ok(data)
            # a name two files had (unlink + recreate): any of them may own it
            if why and not any(g is not f and n in g.names and g.ok(data) is None
                               for g in w.files):
                bad.append(f"{n} (file {f.fn}): {why}")
    for n in sorted(names - claimed):
        bad.append(f"{n}: a name no file of the workload had")
    return bad


def test_a_listed_name_that_does_not_open_is_a_problem(tmp_path):
    """check_state reads every name the crash state lists: one that cannot
    be opened (a clean-clone run once listed r68_4 and then found no such
    file) is a problem, reported with the state's replay line, not an
    exception that ends the run with neither."""
    w = Workload(tmp_path, 0)
    f = w.new_file("f0")
    f.names.add("r68_4")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "r68_4").symlink_to("nowhere")    # listed, and ENOENT to open
    bad = check_state(w, tmp_path)
    assert bad == ["r68_4 (file 1): listed, but reading it fails: No such file or directory"], bad


# ---------------------------------------------------------------------------
# Running cuts and states
# ---------------------------------------------------------------------------

def make(base, level, n):
    members = [base / f"m{i}" for i in range(n)]
    for m in members:
        m.mkdir(parents=True)
    mkfs(members, level, "16K")
    (base / "cache").mkdir()
    return members


def opts(base, cached):
    o = ["max_threads=8"]
    if cached:
        # 16 extents of 64K against 2.5 MB of data: evictions and reuse
        o += [f"cache={base / 'cache'}", "cache_size=1M", "cache_extent=64K"]
    return o


def ops_noted(log):
    for line in log.splitlines():
        if "power-cut model:" in line and "operations noted" in line:
            return int(line.split("power-cut model:")[1].split()[0])
    return None


def one_cut(tmp, level, n, cached, seed, cut):
    """Run the workload until the cut: (workload, base dir, dump path)."""
    base = tmp / f"cut{seed}"
    members = make(base, level, n)
    dump = tmp / f"dump{seed}"
    spec = f"drop_unsynced,seed={seed},cut_after={cut},cut_dump={dump}"
    m = Mount(members, base / "mnt", opts(base, cached), env={"TIERFS_FAULT": spec})
    m.start()
    w = Workload(m.mnt, seed)
    w.cut = cut
    try:
        w.run()
        if w.stopped is None:
            m.stop()            # the cut came after the workload: no state
            return w, base, None
        m.wait_dead()
    finally:
        if m.proc is not None:
            m.stop()
    assert dump.exists(), f"the daemon died but wrote no dump:\n{m.log()[-3000:]}"
    return w, base, dump


def scrub(mnt, timeout=60):
    """tierctl scrub --wait, polled every 10 ms (tierctl sleeps 0.5 s):
    the 'last' line of the status."""
    os.setxattr(str(mnt), "user.tierfs.ctl", b"scrub")
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = dict(l.split("=", 1) for l in
                  os.getxattr(str(mnt), "user.tierfs.status").decode().splitlines() if "=" in l)
        if st.get("job") == "none" and st.get("last", "").startswith("check"):
            return st["last"]
        time.sleep(0.01)
    return "scrub did not finish"


def check_one_state(w, base, dump, tmp, sidx, keep, level, n, cached, seed):
    state = tmp / "state"
    if state.exists():
        shutil.rmtree(state)
    shutil.copytree(base, state, symlinks=True, ignore=shutil.ignore_patterns("mnt*"))
    r = subprocess.run([str(PCUT_APPLY), str(dump), os.path.realpath(base),
                        os.path.realpath(state), str(keep), str(seed * 1000 + sidx)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lost = int(r.stdout)
    members = [state / f"m{i}" for i in range(n)]
    # the machine went down: a new boot id (bind.c trusts the page cache
    # of the same boot)
    m = Mount(members, state / "mnt", opts(state, cached),
              env={"TIERFS_BOOT_ID": f"pcut-{seed}-{sidx}"})
    where = (f"{level} x{n}{' + tier' if cached else ''}, seed {seed}, cut {w.cut}, "
             f"state {sidx} (keep {keep}, {lost} blocks lost)")
    try:
        try:
            m.start(timeout=20)
        except RuntimeError as e:
            return [f"{where}: does not mount: {e}"]
        bad = [f"{where}: {b}" for b in check_state(w, m.mnt)]
        if level != "jbod" and level != "raid0" and not bad:
            last = scrub(m.mnt)
            if "done: ok" not in last or " 0 mismatches" not in last:
                bad.append(f"{where}: scrub: {last}")
    finally:
        m.stop()
    errors = [l for l in m.log().splitlines() if ": error:" in l]
    if errors:
        bad.append(f"{where}: the daemon logged errors: " + " | ".join(errors[:5]))
    if bad and not (tmp / "failed").exists():     # the first bad state, for a post-mortem
        shutil.copytree(state, tmp / "failed", symlinks=True,
                        ignore=shutil.ignore_patterns("mnt*"))
        shutil.copy(dump, tmp / "failed" / "dump")
        shutil.copytree(base, tmp / "failed" / "before", symlinks=True,     # the cut, unapplied
                        ignore=shutil.ignore_patterns("mnt*"))
        (tmp / "failed" / "mount.log").write_text(m.log())
        (tmp / "failed" / "where").write_text(
            where + "\n" + "\n".join(bad) + "\n" +
            replay_line(level, n, cached, seed, w.cut, sidx, keep) + "\n")
    return bad


def check_cut(w, cbase, dump, tmp, states, level, n, cached, seed):
    """Every (state, keep) of states made from one cut and checked:
    (problems, the first failing (state, keep) or None)."""
    problems, first = [], None
    for s, keep in states:
        bad = check_one_state(w, cbase, dump, tmp, s, keep, level, n, cached, seed)
        if bad and first is None:
            first = (s, keep)
        problems += bad
    return problems, first


def failure(problems, level, n, cached, seed, cut, first):
    """Fail the test with its problems; the message ends with the line that
    replays the first failing state (as test_fsx's do: no traceback or
    assertion after it)."""
    pytest.fail("\n".join(problems[:20] + [replay_line(level, n, cached, seed, cut, *first)]),
                pytrace=False)


@pytest.mark.parametrize("level,n,cached", CONFIGS,
                         ids=[config_id(*c) for c in CONFIGS])
def test_crash_states(tmp_path, level, n, cached):
    only = crash_only()
    if only:
        replay(tmp_path, level, n, cached, only)
        return
    states = max(10, total_states() // len(CONFIGS))
    per_cut = 10
    cuts = (states + per_cut - 1) // per_cut
    rng = random.Random(f"{level}{n}{cached}{crash_seed()}")

    # calibration: how many operations the whole workload notes
    base = tmp_path / "calib"
    members = make(base, level, n)
    m = Mount(members, base / "mnt", opts(base, cached),
              env={"TIERFS_FAULT": "drop_unsynced,seed=1"})
    m.start()
    try:
        w = Workload(m.mnt, 0)
        w.run()
        assert w.stopped is None, w.stopped
    finally:
        m.stop()
    total = ops_noted(m.log())
    assert total and total > 50, m.log()[-2000:]
    shutil.rmtree(base)

    checked, problems, ncuts, attempts = 0, [], 0, 0
    t0 = time.time()
    while checked < states and attempts < 3 * cuts and not problems:
        attempts += 1
        seed = rng.randrange(1 << 30)
        w, cbase, dump = one_cut(tmp_path, level, n, cached, seed,
                                 rng.randrange(total // 20, total * 9 // 10))
        if dump is None:        # the workload ended before the cut
            shutil.rmtree(cbase)
            continue
        ncuts += 1
        keeps = [(s, KEEPS[s] if s < len(KEEPS) else rng.random()) for s in range(per_cut)]
        problems, first = check_cut(w, cbase, dump, tmp_path, keeps, level, n, cached, seed)
        checked += len(keeps)
        shutil.rmtree(cbase)
        dump.unlink()
    REPORT.append(f"crash states: {level} x{n}{' + tier in write-back' if cached else ''}"
                  f"{', seed ' + crash_seed() if crash_seed() else ''}: "
                  f"{checked} states from {ncuts} cuts ({total} noted operations per "
                  f"run), {len(problems)} problems, {time.time() - t0:.0f} s")
    if problems:
        failure(problems, level, n, cached, seed, w.cut, first)
    assert checked >= states, f"only {checked} of {states} states: the cuts came too late"


def replay(tmp_path, level, n, cached, only):
    """TIERFS_CRASH_ONLY: the one cut it names, and its states."""
    cfg, seed, cut, states = only
    if cfg != config_id(level, n, cached):
        pytest.skip(f"TIERFS_CRASH_ONLY replays {cfg}")
    w, cbase, dump = one_cut(tmp_path, level, n, cached, seed, cut)
    assert dump is not None, f"seed {seed}: the workload ended before cut {cut}"
    problems, first = check_cut(w, cbase, dump, tmp_path, states, level, n, cached, seed)
    REPORT.append(f"crash states: replay of {cfg}, seed {seed}, cut {cut}: states "
                  f"{[s for s, _ in states]} (keep {[k for _, k in states]}), "
                  f"{len(problems)} problems")
    if problems:
        failure(problems, level, n, cached, seed, cut, first)


def test_a_failing_state_ends_with_a_line_that_replays_it_alone(tmp_path, monkeypatch):
    """A failing configuration's message ends with a line that checks its
    first failing state alone: the same configuration, workload seed, cut,
    state and keep.  A small run of RAID1 x2 (one cut of 40 operations, its
    10 states recorded, not mounted) in which state 7 (a random keep) is
    made to fail; the line, replayed here, runs the same seed's workload
    cut at the same noted operation, checks state 7 alone with that keep
    and fails with the same line; and run as printed (its states really checked, no failure
    forced) it collects that one test and reports the same cut and state."""
    for v in ("TIERFS_CRASH_LONG", "TIERFS_CRASH_SEED", "TIERFS_CRASH_ONLY"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("TIERFS_CRASH_STATES", "1")      # 10 states: one cut
    monkeypatch.setattr(Workload, "NOPS", 40)
    monkeypatch.setitem(globals(), "REPORT", [])
    seen = []

    def check(w, cbase, dump, tmp, sidx, keep, level, n, cached, seed):
        seen.append((seed, w.cut, sidx, keep))
        return [f"forced failure of state {sidx}"] if sidx == 7 else []
    monkeypatch.setitem(globals(), "check_one_state", check)

    with pytest.raises(pytest.fail.Exception) as e:
        test_crash_states(tmp_path / "run", "raid1", 2, False)
    first = [c for c in seen if c[2] == 7]
    assert len(seen) == 10 and len(first) == 1, seen
    line = str(e.value).splitlines()[-1]
    seed, cut, _, keep = first[0]
    assert line == replay_line("raid1", 2, False, seed, cut, 7, keep), line
    assert keep not in KEEPS, keep                  # a drawn keep: the line carries it

    name, value = line.split(" ", 1)[0].split("=", 1)
    assert name == "TIERFS_CRASH_ONLY", line
    seen.clear()
    monkeypatch.setenv(name, value)
    with pytest.raises(pytest.fail.Exception) as e:
        test_crash_states(tmp_path / "replay", "raid1", 2, False)
    assert seen == [(seed, cut, 7, keep)], (seen, first)
    assert str(e.value).splitlines()[-1] == line
    for c in CONFIGS[:2]:                           # the other configurations: skipped
        with pytest.raises(pytest.skip.Exception):
            test_crash_states(tmp_path / "other", *c)

    r = subprocess.run(f"{line.split('  #')[0]} -p no:cacheprovider "
                       f"--basetemp={tmp_path / 'pasted'}", shell=True, capture_output=True,
                       text=True, cwd=pathlib.Path(__file__).parent.parent, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and " 1 passed" in out, out[-3000:]
    assert (f"replay of raid1x2, seed {seed}, cut {cut}: states [7] (keep [{keep}]), "
            f"0 problems") in out, out[-3000:]


# ---------------------------------------------------------------------------
# Cuts at chosen points: one test per ordering the exploration relies on
# ---------------------------------------------------------------------------

K = 1024
TIERCTL_FLUSH = [str(TIERCTL), "flush"]


class Cut:
    """A RAID1 x2 (or level x n; cached unless told) under the power-cut model; cut()
    cuts it now (every unsynced block lost) and remounts the result as
    after a reboot."""

    def __init__(self, tmp, slots=16, keep=0.0, cached=True, level="raid1", n=2, fault=""):
        self.base = tmp / "a"
        self.members = make(self.base, level, n)
        self.when = tmp / "cut-now"
        self.opts = ["max_threads=8"]
        if cached:
            self.opts += [f"cache={self.base / 'cache'}", f"cache_size={slots * 64}K",
                          "cache_extent=64K"]
        spec = f"drop_unsynced,cut_keep={keep},cut_when={self.when}" + (f",{fault}" if fault else "")
        self.m = Mount(self.members, self.base / "mnt", self.opts, env={"TIERFS_FAULT": spec})
        self.m.start()
        self.mnt = pathlib.Path(self.m.mnt)

    def flush(self):
        r = subprocess.run([*TIERCTL_FLUSH, str(self.mnt)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr

    def die(self):
        """Cut power now: the next noted operation cuts (a write + fsync of
        a bystander); the daemon is dead after."""
        self.when.touch()
        try:
            pwrite(self.mnt / "bystander", 0, b"x" * 4096, sync=True)
        except OSError:
            pass
        self.m.wait_dead()
        assert "fault: power cut: undid" in self.m.log(), self.m.log()[-2000:]

    def cut(self):
        self.die()
        self.m = Mount(self.members, self.base / "mnt", self.opts,
                       env={"TIERFS_BOOT_ID": "after-the-cut"})
        self.m.start()
        return self.m

    def stop(self):
        self.m.stop()


@pytest.fixture
def cut(tmp_path):
    c = Cut(tmp_path)
    yield c
    c.stop()
    c.m.check_log()





def test_cut_after_a_flush_keeps_what_it_destaged(cut):
    """Item 1: the flusher cleans a sector only once the members synced it.
    Data fsynced into the tier, destaged by tierctl flush, then a cut: the
    clean records may be durable (a later fsync commits them), the members'
    unsynced writes are lost, and the tier drops clean sectors after a
    reboot: the data was gone."""
    a = os.urandom(64 * K)
    pwrite(cut.mnt / "f", 0, a, sync=True)
    cut.flush()
    pwrite(cut.mnt / "g", 0, b"g" * 4096, sync=True)     # a durability point after the flush
    m = cut.cut()
    assert (pathlib.Path(m.mnt) / "f").read_bytes() == a


def test_cut_after_a_flush_of_many_files_keeps_each(tmp_path):
    """flush.c invariant 12: a flush of many small files destages them in
    batches and syncs each batch together; each file is cleaned only after
    its own members' sync.  Fsynced into the tier, flushed, a durability
    point, a cut: every file is there."""
    c = Cut(tmp_path, slots=64)
    try:
        files = {f"f{i}": os.urandom(4096 * (1 + i % 3)) for i in range(40)}
        for name, data in files.items():
            pwrite(c.mnt / name, 0, data, sync=True)
        c.flush()
        pwrite(c.mnt / "g", 0, b"g" * 4096, sync=True)     # a durability point after it
        m = c.cut()
        for name, data in files.items():
            assert (pathlib.Path(m.mnt) / name).read_bytes() == data, name
    finally:
        c.stop()
    c.m.check_log()


def test_cut_while_a_batch_syncs_keeps_every_file(tmp_path):
    """flush.c invariants 6 and 12: a file of a batch is cleaned only after
    its own members' sync returned.  The members' fdatasyncs take 3 s here;
    while a flush of 20 files waits in its batch's syncs, a write + fsync of
    another file makes the tier's records durable, then the power is cut.
    Had the batch cleaned its files before their sync, those clean records
    would be durable and the members' writes lost: the files would come
    back without their bytes."""
    c = Cut(tmp_path, slots=64, fault="delay=fdatasync:3000")
    flusher = None
    try:
        files = {f"f{i}": os.urandom(4096 * (1 + i % 3)) for i in range(20)}
        for name, data in files.items():
            pwrite(c.mnt / name, 0, data, sync=True)
        flusher = subprocess.Popen([*TIERCTL_FLUSH, str(c.mnt)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(1.0)                         # destaged, the syncs under way
        assert flusher.poll() is None, "the flush ended before its syncs could be cut"
        pwrite(c.mnt / "g", 0, b"g" * 4096, sync=True)     # a durability point
        m = c.cut()
        for name, data in files.items():
            assert (pathlib.Path(m.mnt) / name).read_bytes() == data, name
    finally:
        if flusher:
            flusher.kill()
            flusher.wait()
        c.stop()
    c.m.check_log()


def test_cut_after_concurrent_fsyncs_keeps_each(tmp_path):
    """cstore.c invariant 10: concurrent fsyncs share the tier's durability
    points, and each returns only with a point that began after it.  Every
    sync of the daemon's own files takes 300 ms here (a slow SSD), so while
    one point runs the other writers' fsyncs arrive and wait; each write
    adds an extent record, and the cut comes right after them (before the
    flusher's 5-second point).  Had a waiting fsync returned with the
    point under way when it arrived (which took the pending records before
    its write), its record would not be durable and the cut would lose the
    write."""
    c = Cut(tmp_path, slots=64, fault="own_sync_delay=300")
    files = {f"f{i}": [os.urandom(4096) for _ in range(2)] for i in range(6)}
    errors = []

    def writer(name, blocks):
        try:                                    # a new 64K extent, its record
            pwrite(c.mnt / name, 64 * K, blocks[1], sync=True)
        except OSError as e:
            errors.append(f"{name}: {e}")

    try:
        for name, blocks in files.items():      # made and durable one by one
            pwrite(c.mnt / name, 0, blocks[0], sync=True)
        run_threads([(writer, kv) for kv in files.items()], 60, "a write + fsync")
        assert not errors, errors
        m = c.cut()
        for name, blocks in files.items():
            got = (pathlib.Path(m.mnt) / name).read_bytes()
            for k, b in enumerate(blocks):
                assert got[k * 64 * K:k * 64 * K + 4096] == b, f"{name}: block {k} lost"
    finally:
        c.stop()
    c.m.check_log()


def test_cut_five_seconds_after_a_write_keeps_it(cut):
    """flush.c invariant 7: while updates are pending the flusher makes a
    durability point every 5 s, so an unsynced write-back write survives a
    power cut 5 s later (ext4's commit interval).  Reads keep the array
    busy (no idle flush) and one extent stays below the dirty watermark (no
    paced flush): only the periodic durability point can save it."""
    a = os.urandom(64 * K)
    pwrite(cut.mnt / "by", 0, b"b" * 4096, sync=True)
    pwrite(cut.mnt / "f", 0, a, sync=False)
    deadline = time.time() + 7
    while time.time() < deadline:
        (cut.mnt / "by").read_bytes()
        time.sleep(0.1)
    m = cut.cut()
    assert (pathlib.Path(m.mnt) / "f").read_bytes() == a, "the unsynced write is gone after 7 s"


def test_cut_after_an_fdatasync_that_left_the_members_alone_keeps_it(cut):
    """data.c invariant 7: an fdatasync of writes only the tier holds does
    not sync the members (raid.file_syncs_skipped), and what it covered,
    an overwrite and an append the size of which only the tier's size
    record knows, is there after a cut."""
    from test_cache import status
    a, b, c = os.urandom(64 * K), os.urandom(16 * K), os.urandom(32 * K)
    fd = os.open(cut.mnt / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, a, 0)
        os.fdatasync(fd)            # the file's first sync runs on the members
        skipped = int(status(cut.mnt)["raid.file_syncs_skipped"])
        os.pwrite(fd, b, 8 * K)
        os.pwrite(fd, c, 64 * K)    # past the members' end
        os.fdatasync(fd)
        assert int(status(cut.mnt)["raid.file_syncs_skipped"]) == skipped + 1
    finally:
        os.close(fd)
    m = cut.cut()
    want = a[:8 * K] + b + a[24 * K:] + c
    assert (pathlib.Path(m.mnt) / "f").read_bytes() == want


def cut_now_and_lose_the_cache(cut, opts=()):
    """Cut power now (as Cut.cut, at the next noted operation), then mount
    after the reboot with the cache directory gone; returns the mount's
    log, or raises RuntimeError when the mount refuses."""
    cut.die()
    shutil.rmtree(cut.base / "cache")   # and the SSD with it
    cut.m = Mount(cut.members, cut.base / "mnt", cut.opts + list(opts),
                  env={"TIERFS_BOOT_ID": "after-the-cut"}, expect_errors=True)
    cut.m.start()
    return cut.m.log()


def test_cut_after_a_flush_leaves_no_name_a_lost_cache_would_refuse(cut):
    """index.c invariant 3: removals of CDIRTY names are not synced per
    file, but a flush that ends syncs them (flush.c): after a flush and a
    cut, a lost cache finds nothing named and the array mounts.  Without
    that sync the removal was lost with the cut and the mount refused."""
    pwrite(cut.mnt / "f", 0, b"f" * 8192, sync=True)
    cut.flush()
    cut_now_and_lose_the_cache(cut)
    assert (cut.mnt / "f").read_bytes() == b"f" * 8192


def test_cut_after_a_create_named_by_its_intent_keeps_the_name(cut):
    """index.c invariant 4: a file created in write-back is named in the
    journal by its create's intent commit, and its first write makes the
    next journal sync cover that commit: after an fsync and a cut, a lost
    cache names it (its data was only in the tier) instead of mounting as
    if nothing were lost."""
    pwrite(cut.mnt / "f", 0, b"f" * 4096, sync=True)
    log = cut_now_and_lose_the_cache(cut, ["cache_discard"])
    assert "/f lost the writes" in log, log[-2000:]


def test_cut_after_a_punch_shows_no_older_bytes(cut):
    """Item 4: a punch drops dirty data from the tier only once the members
    are punched and synced; dropped first, a durability point could commit
    the drop while the members' punch was still unsynced, and the cut left
    the members' older bytes where fsynced newer ones had been."""
    old, new = b"A" * (64 * K), b"B" * (64 * K)
    pwrite(cut.mnt / "f", 0, old + b"z" * 4096, sync=True)
    cut.flush()                             # the members hold A
    pwrite(cut.mnt / "f", 0, new, sync=True)              # B, only in the tier, fsynced
    fd = os.open(str(cut.mnt / "f"), os.O_RDWR)
    try:
        assert _libc.fallocate(fd, PUNCH, 0, 64 * K) == 0
    finally:
        os.close(fd)
    pwrite(cut.mnt / "g", 0, b"g" * 4096, sync=True)     # a durability point after the punch
    m = cut.cut()
    got = (pathlib.Path(m.mnt) / "f").read_bytes()[:64 * K]
    assert got in (new, bytes(64 * K)), f"{got[:8]!r}...: neither B nor the punch"


def test_cut_after_a_detach_keeps_the_size_a_punch_left(cut):
    """dispatch.c invariant 1: a punch (KEEP_SIZE) over every byte of a file
    only the tier held grows the members to the file's size and syncs
    them: nothing is dirty any more, so no flush carries the size, and a
    detach then leaves it with the members alone.  A cut after the detach
    must find the fsynced size there."""
    pwrite(cut.mnt / "f", 0, os.urandom(64 * K), sync=True)     # only in the tier
    fd = os.open(str(cut.mnt / "f"), os.O_RDWR)
    try:
        assert _libc.fallocate(fd, PUNCH, 0, 64 * K) == 0
    finally:
        os.close(fd)
    os.setxattr(str(cut.mnt), "user.tierfs.ctl", b"detach")
    m = cut.cut()
    got = (pathlib.Path(m.mnt) / "f").read_bytes()
    assert got == bytes(64 * K), f"{len(got)} bytes, not 64 KiB of zeros"


def test_cut_after_a_shrinking_truncate_shows_no_older_bytes(cut):
    """Item 4: a truncate drops the tier's dirty data beyond the new end
    only behind a durable intent; without it the cut kept the drop and lost
    the members' ftruncate, and the file showed the members' older bytes."""
    old, new = b"A" * (128 * K), b"B" * (64 * K)
    pwrite(cut.mnt / "f", 0, old, sync=True)
    cut.flush()
    pwrite(cut.mnt / "f", 64 * K, new, sync=True)
    os.truncate(cut.mnt / "f", 64 * K)
    pwrite(cut.mnt / "g", 0, b"g" * 4096, sync=True)
    m = cut.cut()
    got = (pathlib.Path(m.mnt) / "f").read_bytes()
    assert got in (old[:64 * K], old[:64 * K] + new), \
        f"{len(got)} bytes, tail {got[64 * K:64 * K + 8]!r}: neither truncated nor B"


def test_cut_inside_a_shrinking_truncate_shows_no_older_bytes(tmp_path):
    """DESIGN 10.5: a truncate's intent is durable before the tier drops
    anything (tfs_ns_cut_begin's tfs_meta_sync).  The cut comes while the
    truncate waits in its members' ftruncate: the tier's drop is durable
    (another file's fsync made a durability point of the store, with
    nothing for the journal), the members still hold the older bytes, and
    only the intent, replayed at the mount, cuts them.  Unsynced, it was
    the journal's last commit, which the cut undid: the file read the
    members' A where the tier had held B."""
    c = Cut(tmp_path, fault="delay=ftruncate:1500")
    try:
        a, b0, b1 = b"A" * (128 * K), b"C" * (64 * K), b"B" * (64 * K)
        pwrite(c.mnt / "f", 0, a, sync=True)
        c.flush()                                   # the members hold A
        pwrite(c.mnt / "g", 0, b"g" * 4096, sync=True)    # g known dirty: its fsync below commits nothing to the journal
        pwrite(c.mnt / "f", 0, b0 + b1, sync=True)  # both extents dirty in the tier; the first stays so
        t = threading.Thread(target=lambda: _quiet(os.truncate, c.mnt / "f", 64 * K))
        t.start()
        time.sleep(0.5)                             # the tier dropped B; the members' ftruncate waits
        pwrite(c.mnt / "g", 0, b"h" * 4096, sync=True)    # the store commits the drop
        m = c.cut()
        t.join()
        got = (pathlib.Path(m.mnt) / "f").read_bytes()
        assert got in (b0, b0 + b1), \
            f"{len(got)} bytes, tail {got[64 * K:64 * K + 8]!r}: neither truncated nor B"
    finally:
        c.stop()


def _quiet(fn, *args):
    try:
        fn(*args)
    except OSError:         # the daemon died under it
        pass


def test_cut_after_an_extending_truncate_keeps_fsynced_data(cut):
    """Item 4, as the exploration found it: a truncate that extended a file
    whose data was only in the tier deleted the tier's size record; a later
    durability point committed that while the members' ftruncate was
    unsynced, and after the cut the file was empty."""
    a = os.urandom(20 * K)
    pwrite(cut.mnt / "f", 0, a, sync=True)
    os.truncate(cut.mnt / "f", 80 * K)
    pwrite(cut.mnt / "g", 0, b"g" * 4096, sync=True)
    m = cut.cut()
    got = (pathlib.Path(m.mnt) / "f").read_bytes()
    assert got[:20 * K] == a, f"{len(got)} bytes: the fsynced 20K are gone"


def test_cut_after_an_overwrite_of_dirty_sectors_keeps_it(cut):
    """An fsync makes the SSD's slot bytes durable even when the store has
    nothing to commit: an overwrite of sectors already dirty changes no
    record, and tfs_cstore_sync skipped the data file's fdatasync when no
    record was pending, so after a cut the tier served the previous
    (fsynced) bytes.  The long exploration found it: write 58 where 62 had
    been fsynced, RAID1 x2 + tier."""
    a, b = os.urandom(64 * K), os.urandom(64 * K)
    pwrite(cut.mnt / "f", 0, a, sync=True)      # dirty in one slot, durable
    pwrite(cut.mnt / "f", 0, b, sync=True)      # the same sectors: no new record
    m = cut.cut()
    got = (pathlib.Path(m.mnt) / "f").read_bytes()
    assert got == b, "the fsynced overwrite is gone" if got == a else "neither version"


def test_cut_after_a_truncate_keeps_the_regrown_file(tmp_path):
    """The long exploration's uncached RAID1 loss: a file truncated, grown
    again and fsynced came back cut to the truncate's size.  The truncate's
    intent was retired by a journal commit that nothing synced (LMDB's
    MDB_NOMETASYNC may lose the last commit); the cut undid it, and the
    mount replayed the truncate over the fsynced regrowth.  (Uncached: a
    write into the tier commits the journal on its way.)"""
    c = Cut(tmp_path, cached=False)
    try:
        a, b = os.urandom(128 * K), os.urandom(112 * K)
        pwrite(c.mnt / "f", 0, a, sync=True)
        os.truncate(c.mnt / "f", 16 * K)
        pwrite(c.mnt / "f", 16 * K, b, sync=True)
        m = c.cut()
        got = (pathlib.Path(m.mnt) / "f").read_bytes()
        assert got == a[:16 * K] + b, f"{len(got)} bytes, not the fsynced {16 * K + len(b)}"
    finally:
        c.stop()


@pytest.mark.parametrize("level,n", [("raid5", 3), ("raid6", 4)])
def test_cut_after_a_truncate_replayed_leaves_parity_right(tmp_path, level, n):
    """The long exploration's RAID6 stale parity: a truncate whose members'
    cut was lost (unsynced) while its intent survived is replayed at the
    mount, which cut the members without the live truncate's zeroing of the
    new last row, so that row's parity still covered the cut bytes.  Here
    the retirement is the journal's last, unsynced commit: the cut undoes
    it, the zeroing and the members' ftruncate."""
    c = Cut(tmp_path, cached=False, level=level, n=n)
    try:
        a = os.urandom(96 * K)              # three rows of 16K chunks on RAID5 x3
        pwrite(c.mnt / "f", 0, a, sync=True)
        os.truncate(c.mnt / "f", 20 * K)    # the new last row keeps 20K
        m = c.cut()
        assert "recovery: intent" in m.log(), "no truncate was replayed"
        got = (pathlib.Path(m.mnt) / "f").read_bytes()
        assert got in (a[:20 * K], a), f"{len(got)} bytes: neither the old nor the cut file"
        last = scrub(m.mnt)
        assert "done: ok" in last and " 0 mismatches" in last, last
    finally:
        c.stop()


def test_cut_after_slot_reuse_shows_no_other_files_bytes(tmp_path):
    """Item 3: a slot is handed out again only after its old record's
    deletion is durable.  f's extent, fsynced dirty, then destaged (clean
    logged, not durable) and evicted; g takes its slot and g's bytes reach
    the SSD; after the cut the store still named the slot for f, dirty."""
    c = Cut(tmp_path, keep=1.0)            # g's unsynced slot bytes reached the SSD
    try:
        a = b"F" * (64 * K)
        pwrite(c.mnt / "f", 0, a, sync=True)              # dirty in one slot, durable
        c.flush()                           # clean: logged only
        for i in range(20):                 # 20 extents through 16 slots
            pwrite(c.mnt / "g", i * 64 * K, b"G" * (64 * K), sync=False)
        c.when.touch()
        try:
            pwrite(c.mnt / "bystander", 0, b"x" * 4096, sync=False)
        except OSError:
            pass
        c.m.wait_dead()
        c.m = Mount(c.members, c.base / "mnt", c.opts, env={"TIERFS_BOOT_ID": "reboot"})
        c.m.start()
        got = (pathlib.Path(c.m.mnt) / "f").read_bytes()
        assert got == a, f"f reads {got[:4]!r}...: not its own bytes"
    finally:
        c.stop()


def test_cut_after_a_pin_keeps_it(cut):
    """pin.c invariant 3: a pin is durable when the set returns (its record
    applied and a durability point made).  Pinned, then a cut right after:
    after the reboot the file is still pinned and its extents reserved.
    Without the durability point the pin record sat in the store's log,
    which a start after a reboot drops (cstore.c invariant 8)."""
    f = cut.mnt / "f"
    pwrite(f, 0, os.urandom(128 * K), sync=True)
    os.setxattr(str(f), "user.tierfs.pinned", b"1")
    m = cut.cut()
    f = pathlib.Path(m.mnt) / "f"
    assert os.getxattr(str(f), "user.tierfs.pinned") == b"1"
    st = dict(l.split("=", 1) for l in
              os.getxattr(m.mnt, "user.tierfs.status").decode().splitlines() if "=" in l)
    assert (st["cache.pinned_files"], st["cache.pin_reserved_extents"]) == ("1", "2"), st


# ---------------------------------------------------------------------------
# A cut at every noted operation of promotions and a fill
# ---------------------------------------------------------------------------

def _promote_and_fill(mnt, new):
    """An 8K write-back write into extent 0 (the tier holds 2 of its 128
    sectors), then reads of the whole file: the promoter copies extents 1-3
    in and fills the rest of extent 0 (flush.c invariant 14); a flush.  Returns
    whether the write was acknowledged and the status after the reads;
    stops at the first error (the daemon died)."""
    acked, s = False, None
    try:
        write_direct(mnt / "f", 0, new)
        acked = True
        for _ in range(3):
            read_direct(mnt / "f", 0, 256 * K)
        deadline = time.time() + 20
        while time.time() < deadline:
            s = cst(mnt)
            if s["promote_backlog"] == 0 and s["fill_promotions"] + s["fill_dropped"] >= 1:
                break
            time.sleep(0.02)
        flush(mnt)
    except OSError:
        pass
    return acked, s


def _kept_if_acked_and_no_cut(acked, keep):
    """Writes not synced: durable only if acknowledged and nothing unsynced
    was lost (a kill, not a power cut)."""
    return acked and keep == 1


def _cut_each_operation(tmp_path, opts, work, calib, old, new, what,
                        durable=_kept_if_acked_and_no_cut):
    """The daemon, on a copy of a RAID1 x2 array whose file f holds old
    (_array_with), with a tier of 1 MiB in 64K extents under opts besides,
    runs work(mnt) -> (acked, status), cut at each operation it
    notes after the start in turn: killed with every write kept (the same
    boot) and, at every third, also by a power cut (nothing unsynced kept,
    a new boot).  calib(status) checks the uncut run first.  After each
    cut file f must read back new in its first len(new) bytes, per sector,
    if durable(acked, keep), else per sector new or old, and old
    everywhere else, with no error logged."""
    clean = _array_with(tmp_path, old)
    opts = ["max_threads=8", "cache_size=1M", "cache_extent=64K", *opts]
    when = tmp_path / "now"
    n = len(new)

    def run(k, keep):
        """One run cut at the k-th operation after the start of the work
        (k=0: not cut); returns (mount after, acked or the uncut run's
        (acked, status), operations after the start)."""
        base = tmp_path / f"k{k}-{keep}"
        shutil.copytree(clean, base, symlinks=True, ignore=shutil.ignore_patterns("mnt*"))
        when.unlink(missing_ok=True)
        ms = [base / f"m{i}" for i in range(2)]
        spec = f"drop_unsynced,cut_keep={keep},cut_when={when},cut_after={k or 1 << 40}"
        o = opts + [f"cache={base / 'cache'}"]
        m = Mount(ms, base / "mnt", o, env={"TIERFS_FAULT": spec})
        m.start()
        when.touch()
        try:
            acked, s = work(pathlib.Path(m.mnt))
        finally:
            m.stop()            # dead already, or cut during the unmount
        log = m.log()
        if "fault: power cut" not in log:       # k past the end (or the calibration)
            line = [l for l in log.splitlines() if "appeared" in l]
            assert line, log[-2000:]
            return None, (acked, s), int(line[0].split(",")[1].split()[0])
        env = {} if keep == 1 else {"TIERFS_BOOT_ID": f"after-cut-{k}"}
        after = Mount(ms, base / "mnt", o, env=env)
        after.start()
        return after, acked, None

    _, (acked, s), total = run(0, 1)
    assert acked and total > 10, total
    calib(s)                                    # what the cuts interrupt
    shutil.rmtree(tmp_path / "k0-1")
    bad, cuts = [], 0
    for k in range(1, total + 1):
        for keep in [1] if k % 3 else [1, 0]:
            after, acked, _ = run(k, keep)
            if after is None:           # the run noted fewer operations: no cut
                shutil.rmtree(tmp_path / f"k{k}-{keep}")
                continue
            cuts += 1
            try:
                got = read_all(pathlib.Path(after.mnt) / "f")
            finally:
                after.stop()
            errors = [l for l in after.log().splitlines() if ": error:" in l]
            ok = len(got) == len(old) and got[n:] == old[n:]
            for u in range(0, n, UNIT):
                sec = got[u:u + UNIT]
                ok = ok and (sec == new[u:u + UNIT] or (not durable(acked, keep)
                                                      and sec == old[u:u + UNIT]))
            if not ok or errors:
                want = new + old[n:]    # once: built per byte it made this quadratic
                d = next((i for i in range(min(len(got), len(old)))
                          if got[i] != want[i] and got[i] != old[i]), None)
                bad.append(f"cut at {k}/{total}, keep {keep}, write acked {acked}: "
                           f"{len(got)} bytes, first foreign byte at {d}; {errors[:3]}")
            shutil.rmtree(tmp_path / f"k{k}-{keep}")
    REPORT.append(f"{what}: {cuts} cuts at the {total} operations of a run, {len(bad)} problems")
    assert not bad, "\n".join(bad[:10])
    assert cuts >= total, (cuts, total)         # the runs' counts differ a little, not much


def _array_with(tmp_path, old):
    """A RAID1 x2 array in tmp_path/clean whose file f holds old, written
    and synced without the tier."""
    clean = tmp_path / "clean"
    members = make(clean, "raid1", 2)
    m = Mount(members, clean / "mnt", ["max_threads=8"])
    m.start()
    try:
        pwrite(clean / "mnt" / "f", 0, old, sync=True)
    finally:
        m.stop()
    return clean


def test_cut_at_every_operation_of_a_promotion_and_a_fill(tmp_path):
    """A promotion writes the slot, then commits the extent's record; a fill
    writes the sectors the slot lacks, then marks them valid (flush.c
    invariant 14).  Reversed, a death between the two leaves a record that
    names bytes the slot never got (zeros, or another extent's).  The
    daemon dies at each noted operation of one such run in turn
    (_cut_each_operation), and after each the file reads back: the 8K
    write if it was acknowledged (and a power cut did not take it: it was
    not fsynced), else per sector the old bytes or the new, and the old
    bytes everywhere else."""
    old = random.Random(11).randbytes(256 * K)
    new = b"N" * (8 * K)

    def calib(s):
        assert s["promotions"] >= 3 and s["fill_promotions"] == 1, s

    _cut_each_operation(tmp_path, ["cache_promote=1", "cache_seq_cutoff=0"],
                        lambda mnt: _promote_and_fill(mnt, new), calib, old, new,
                        "cuts in promotions and a fill")


def _written_then_read(mnt, write, n):
    """write(f) then f's first n bytes read back through the tier.  Returns
    whether the writes were acknowledged and the status after; stops at
    the first error (the daemon died)."""
    acked, s = False, None
    try:
        write(mnt / "f")
        acked = True
        read_direct(mnt / "f", 0, n)
        s = cst(mnt)
    except OSError:
        pass
    return acked, s


def _stream_copy(mnt, new):
    """new written over the start of f in O_DIRECT writes of 64K (full
    rows of the RAID1's 16K chunks), a stream past the cutoff from the
    first: each goes to the members, then leaves a clean copy in the tier
    (write.c invariant 11); then f read back through those copies."""
    return _written_then_read(mnt, lambda f: full_row_copy(f, new, 64 * K), len(new))


def test_cut_at_every_operation_of_a_stream_copy(tmp_path):
    """A stream's full-row write reaches the members, then its bytes go
    into a fresh slot, then the slot's record commits them valid and
    clean (write.c invariants 4, 11).  Reversed, a death between the two
    would leave a record naming bytes the slot never got; a clean record
    that outlived a power cut the members' bytes did not would make the
    file change by itself once the extent left the tier.  The daemon dies
    at each noted operation of a run in turn, and after each the file
    reads back: the writes if they were acknowledged and nothing unsynced
    was lost, else per sector the old bytes or the new."""
    old = random.Random(12).randbytes(512 * K)
    new = random.Random(13).randbytes(256 * K)

    def calib(s):
        assert s["stream_copies"] == 4 and s["read_hits"] >= 4, s

    _cut_each_operation(tmp_path, ["cache_seq_cutoff=64K"],
                        lambda mnt: _stream_copy(mnt, new), calib, old, new,
                        "cuts in a stream's clean copies")


def _write_through(mnt, new):
    """new written over the start of f in write-through, in O_DIRECT writes
    whose ends fall inside 4K sectors (each 512-aligned): each goes to the
    members and into a fresh slot or the slot an earlier one took, its
    partial sectors read first from the slot or the members (write.c
    invariant 12); then f read back through the tier."""
    cuts = [0, 4 * K + 512, 68 * K + 1024, 130 * K + 2560, 200 * K + 512, len(new)]

    def write(f):
        fd = os.open(f, os.O_WRONLY | os.O_DIRECT)
        try:
            for a, b in zip(cuts, cuts[1:]):
                dwrite(fd, a, new[a:b])
        finally:
            os.close(fd)
    return _written_then_read(mnt, write, len(new))


def test_cut_at_every_operation_of_a_write_through_write(tmp_path):
    """Write-through over extents the tier does not hold: each write reaches
    the members, its bytes and the sectors around them go into a fresh
    slot, then the slot's record commits them valid and clean (write.c
    invariants 4, 12).  The daemon dies at each noted operation of a run
    in turn, and after each the file reads back: the writes if they were
    acknowledged and nothing unsynced was lost, else per 512 bytes the old
    bytes or the new, never a partial sector filled with anything else."""
    old = random.Random(14).randbytes(512 * K)
    new = random.Random(15).randbytes(256 * K)

    def calib(s):
        assert s["write_misses"] == 4 and s["read_hits"] >= 4 and s["read_misses"] == 0, s

    _cut_each_operation(tmp_path, ["cache_seq_cutoff=0", "cache_mode=writethrough"],
                        lambda mnt: _write_through(mnt, new), calib, old, new,
                        "cuts in write-through's fresh slots")


# ---------------------------------------------------------------------------
# A cut at every noted operation of a reclaim
# ---------------------------------------------------------------------------

def _reclaim_run(mnt, new, n):
    """An 8K write-back write into extent 0, fsynced, then extents 1..n-1 read one
    at a time, each promotion and reclaim round waited for: the tier (16
    slots, LRU) fills, an eviction meets extent 0 dirty and notes it, the
    flusher destages it and demotes it, a later eviction takes it (flush.c
    invariant 15).  Returns whether the write was acknowledged and the
    status after; stops at the first error (the daemon died)."""
    acked, s = False, None
    try:
        write_direct(mnt / "f", 0, new)
        fd = os.open(mnt / "f", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        acked = True
        for i in range(1, n):
            read_direct(mnt / "f", i * 64 * K, 64 * K)
            deadline = time.time() + 20
            while True:
                s = cst(mnt)
                if s["promote_backlog"] == 0 and s["reclaim_backlog"] == 0:
                    break
                assert time.time() < deadline, f"promotions or notes left: {s}"
                time.sleep(0.01)
    except OSError:
        pass
    return acked, s


def test_cut_at_every_operation_of_a_reclaim(tmp_path):
    """cache_reclaim=1 destages a dirty extent eviction wanted and then
    lets eviction take it: the destage is the flusher's own (the members
    synced before the dirty bit goes, the record after), and the eviction
    deletes the record only once the extent is clean.  The daemon dies at
    each noted operation of such a run in turn (_cut_each_operation), and
    after each the file reads back the 8K write if its fsync returned, else
    per sector the old bytes or the new, and the old bytes everywhere else.
    An eviction that let the record go before the members had synced the
    destaged bytes would lose the fsynced write to a power cut."""
    n = 20                                  # extents of the file; the tier has 16
    old = random.Random(12).randbytes(n * 64 * K)
    new = b"R" * (8 * K)

    def calib(s):
        assert s["reclaimed"] == 1 and s["dirty_extents"] == 0, s

    _cut_each_operation(tmp_path, ["cache_promote=1", "cache_seq_cutoff=0", "cache_policy=lru",
                                   "cache_reclaim=1", "cache_dirty_low=90",
                                   "cache_dirty_high=95"],
                        lambda mnt: _reclaim_run(mnt, new, n), calib, old, new,
                        "cuts in a reclaim", durable=lambda acked, keep: acked)
