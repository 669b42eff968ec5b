"""tierctl monitor on real mounts: the events a member failure, a replace,
a scrub, the SSD tier and an unmount give, each once, in the log and to the
--program; --oneshot's exit status; a program that fails or hangs does not
stop the monitor; SIGTERM ends it; the systemd units verify and the
fstab example orders the array after its filesystems."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD, ROOT
from test_cache import K, M, copts, wait_until
from test_raid import TIERCTL, new_dir, tierctl

POLL = 0.1          # the monitor's --interval in these tests

# The program: one line per run, its arguments separated by tabs (the count
# first), appended to $MON_OUT.
RECORD = """#!/bin/sh
printf '%s' "$#" >> "$MON_OUT.tmp"
for a in "$@"; do printf '\\t%s' "$a" >> "$MON_OUT.tmp"; done
printf '\\n' >> "$MON_OUT.tmp"
cat "$MON_OUT.tmp" >> "$MON_OUT"; rm -f "$MON_OUT.tmp"
"""


def script(path, body):
    path.write_text(body)
    path.chmod(0o755)
    return path


class Monitor:
    """A `tierctl monitor` process: its stderr in a file, a program that
    records its runs (or the one given)."""

    def __init__(self, tmp, mnts, args=(), prog=None, name="mon"):
        self.out = tmp / f"{name}.events"
        self.err = tmp / f"{name}.stderr"
        self.prog = prog or script(tmp / f"{name}.record", RECORD)
        self.args = [str(TIERCTL), "monitor", *map(str, mnts), "--interval", str(POLL),
                     "--program", str(self.prog), *map(str, args)]
        self.proc = None

    def start(self):
        env = dict(os.environ, MON_OUT=str(self.out))
        with open(self.err, "w") as f:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=f,
                                         env=env)
        wait_until(lambda: "watching" in self.log(), "the monitor's first line", 10)
        time.sleep(5 * POLL)        # its first poll comes right after that line
        return self

    def log(self):
        return self.err.read_text() if self.err.exists() else ""

    def logged(self):
        """(EVENT, MOUNTPOINT, DETAIL) of each event line in the log."""
        out = []
        for line in self.log().splitlines():
            parts = line.split(" ", 4)
            if len(parts) >= 4 and parts[:2] == ["tierctl", "monitor:"] and \
                    parts[2][0].isupper():
                out.append((parts[2], parts[3], parts[4] if len(parts) > 4 else ""))
        return out

    def runs(self):
        """(EVENT, MOUNTPOINT, DETAIL) of each run of the program, checking
        it got 2 or 3 arguments."""
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            n, *args = line.split("\t")
            assert int(n) == len(args) and len(args) in (2, 3), line
            out.append(tuple(args) + ("",) * (3 - len(args)))
        return out

    def wait_runs(self, *events, timeout=20.0):
        """Waits until the program has run for each of events (in that
        order among its runs); returns the runs."""
        def done():
            got = [e for e, _, _ in self.runs()]
            it = iter(got)
            return all(e in it for e in events)
        try:
            wait_until(done, f"events {events}", timeout)
        except AssertionError:
            raise AssertionError(f"want {events}; program ran for {self.runs()}; "
                                 f"log:\n{self.log()}") from None
        return self.runs()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Stops it by its PID (SIGTERM, SIGKILL after timeout); its status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def monitor(tmp_path):
    """monitor(mnts, args=(), prog=None) -> a started Monitor; each is
    stopped by its PID at teardown."""
    started = []

    def start(mnts, args=(), prog=None):
        m = Monitor(tmp_path, mnts, args, prog, name=f"mon{len(started)}")
        started.append(m)
        return m.start()
    yield start
    for m in started:
        m.stop()


def settle():
    """Long enough for the monitor to poll several times."""
    time.sleep(12 * POLL)


# ---------------------------------------------------------------------------
# The array: Fail, Degraded, RebuildStarted, RebuildFinished
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["tierctl", "fault"])
def test_member_failure_gives_fail_and_degraded(make_array, monitor, how):
    """A member failed by hand or by its I/O errors: Fail (naming it) and
    Degraded, once each, to the log and to the program; a healthy array
    gave nothing before."""
    a = make_array("raid5", 3, "4K")
    env = {"TIERFS_FAULT": "fail_after=write:40:1"} if how == "fault" else None
    a.mount(env=env, expect_errors=True)
    mon = monitor([a.mnt])
    settle()
    assert mon.runs() == [] and mon.logged() == [], mon.log()
    if how == "tierctl":
        tierctl("fail", a.mnt, 1)
    else:
        with open(a.mnt / "f", "wb") as f:
            for _ in range(100):
                f.write(os.urandom(8 * K))
                f.flush()
                os.fsync(f.fileno())
    runs = mon.wait_runs("Fail", "Degraded", timeout=10)
    settle()
    runs = mon.runs()
    assert runs == [("Fail", str(a.mnt), f"member 1 {a.members[1]}"),
                    ("Degraded", str(a.mnt), "state U_U")], runs
    assert mon.logged() == runs, mon.log()
    assert mon.alive()


@pytest.mark.parametrize("mbps", [0, 4], ids=["fast", "slow"])
def test_replace_gives_rebuild_started_then_finished(make_array, monitor, mbps):
    """A replace: RebuildStarted, then RebuildFinished saying the member is
    in sync, whether the monitor saw the rebuild running (slow: a rate cap)
    or it began and ended between two polls (fast)."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=[f"maint_mbps={mbps}"], expect_errors=True)
    for i in range(4):
        (a.mnt / f"f{i}").write_bytes(os.urandom(M + i))
    mon = monitor([a.mnt])
    tierctl("fail", a.mnt, 1)
    mon.wait_runs("Fail", "Degraded")
    tierctl("replace", a.mnt, 1, new_dir(a, "new1"))
    if mbps:
        assert tierctl("status", a.mnt, "--raw").stdout.count("job=rebuild") == 1
    runs = mon.wait_runs("RebuildStarted", "RebuildFinished", timeout=30)
    settle()
    runs = mon.runs()
    assert [e for e, _, _ in runs] == ["Fail", "Degraded", "RebuildStarted",
                                       "RebuildFinished"], runs
    assert runs[2][2] == "member 1", runs
    assert runs[3][2].startswith("member 1 in sync: rebuild done: ok, 4 files"), runs


def test_failing_a_member_being_rebuilt_says_not_in_sync(make_array, monitor):
    """A rebuild that stops because its member is failed again ends with
    RebuildFinished 'not in sync', and the member's Fail."""
    a = make_array("raid1", 2, "64K")
    a.mount(opts=["maint_mbps=1"], expect_errors=True)
    for i in range(3):
        (a.mnt / f"f{i}").write_bytes(os.urandom(2 * M))
    tierctl("fail", a.mnt, 1)
    tierctl("replace", a.mnt, 1, new_dir(a, "new1"))
    mon = monitor([a.mnt])
    mon.wait_runs("DegradedArray", "RebuildStarted")
    tierctl("fail", a.mnt, 1)
    runs = mon.wait_runs("RebuildStarted", "Fail", "RebuildFinished")
    settle()
    runs = mon.runs()
    assert [e for e, _, _ in runs] == ["DegradedArray", "RebuildStarted", "Fail",
                                       "Degraded", "RebuildFinished"], runs
    assert runs[0][2] == "health rebuilding, state UR", runs
    assert runs[4][2].startswith("member 1 not in sync (failed): rebuild cancelled"), runs


# ---------------------------------------------------------------------------
# Scrub: ScrubFinished, ScrubMismatch
# ---------------------------------------------------------------------------

def test_scrub_gives_finished_and_mismatch(make_array, monitor):
    """A check that finds a planted mismatch: ScrubFinished with the count
    and ScrubMismatch 'not repaired'; --oneshot then still reports it; the
    repair: ScrubFinished and ScrubMismatch 'repaired'; a clean check:
    ScrubFinished alone."""
    a = make_array("raid1", 2, "64K")
    m = a.mount(expect_errors=True)
    (a.mnt / "victim").write_bytes(os.urandom(20 * 64 * K + 1234))
    m.stop()
    with open(a.members[1] / "root" / "victim", "r+b") as f:     # plant it offline
        f.seek(3 * 64 * K + 100)
        f.write(b"\x5a" * 16)
    m.start()
    mon = monitor([a.mnt])
    assert tierctl("scrub", a.mnt, "--wait", check=False).returncode == 3
    runs = mon.wait_runs("ScrubFinished", "ScrubMismatch")
    assert runs[0][2].startswith("1 mismatches: check done: ok, 1 files, 1 mismatches"), runs
    assert runs[1][2] == f"1 mismatches not repaired (tierctl scrub {a.mnt} --repair)", runs
    r = tierctl("monitor", a.mnt, "--oneshot", check=False)
    assert r.returncode == 1 and f"ScrubMismatch {a.mnt} 1 mismatches not repaired" in \
        r.stderr, r.stderr
    tierctl("scrub", a.mnt, "--repair", "--wait")
    mon.wait_runs("ScrubFinished", "ScrubMismatch", "ScrubFinished", "ScrubMismatch")
    tierctl("scrub", a.mnt, "--wait")
    runs = mon.wait_runs("ScrubFinished", "ScrubMismatch", "ScrubFinished", "ScrubMismatch",
                         "ScrubFinished")
    settle()
    runs = mon.runs()
    assert [e for e, _, _ in runs] == ["ScrubFinished", "ScrubMismatch"] * 2 + \
        ["ScrubFinished"], runs
    assert runs[3][2] == "1 mismatches repaired", runs
    assert runs[4][2].startswith("0 mismatches: check done: ok"), runs
    assert tierctl("monitor", a.mnt, "--oneshot", check=False).returncode == 0


# ---------------------------------------------------------------------------
# The SSD tier: CacheError, DirtyHigh
# ---------------------------------------------------------------------------

def test_cache_error_and_dirty_high(make_array, monitor, tmp_path):
    """A flush the members refuse: CacheError once.  One dirty extent of
    32 slots (3%): DirtyHigh when dirty_high comes down to 3, not again
    while it stays above dirty_low, again once it went below dirty_low."""
    a = make_array("raid0", 2, "4K")
    a.mount(opts=copts(tmp_path / "cache", dirty_low=10, dirty_high=20),
            env={"TIERFS_FAULT": "eio_write=1"}, expect_errors=True)
    mon = monitor([a.mnt])
    with open(a.mnt / "f", "wb") as f:
        f.write(os.urandom(64 * K))
    assert tierctl("flush", a.mnt, check=False).returncode == 1
    runs = mon.wait_runs("CacheError")
    assert runs == [("CacheError", str(a.mnt), "Input/output error")], runs
    st = tierctl("status", a.mnt, "--raw").stdout
    assert "cache.slots=32\n" in st and "cache.dirty_extents=1\n" in st, st

    def tune(**kw):
        for k, v in kw.items():
            tierctl("set", a.mnt, k, v)
        settle()

    tune(dirty_low=1, dirty_high=3)                 # 1 of 32 >= 3%
    runs = mon.wait_runs("CacheError", "DirtyHigh")
    assert runs[1][2] == "1 of 32 extents dirty (3%, high watermark 3%)", runs
    tune(dirty_high=4)                              # below high, not below low
    tune(dirty_high=3)
    assert [e for e, _, _ in mon.runs()] == ["CacheError", "DirtyHigh"], mon.runs()
    tune(dirty_high=50, dirty_low=10)               # below low: armed again
    tune(dirty_low=1, dirty_high=3)
    mon.wait_runs("CacheError", "DirtyHigh", "DirtyHigh")
    settle()
    assert [e for e, _, _ in mon.runs()] == ["CacheError", "DirtyHigh", "DirtyHigh"], \
        mon.runs()


# ---------------------------------------------------------------------------
# --oneshot
# ---------------------------------------------------------------------------

def test_oneshot_exit_status(make_array, tmp_path):
    """--oneshot: 0 and nothing said on a healthy array; 1 on a degraded
    one, naming the events in the log and to the program; 1 on a path
    that is not a mount; 2 on a usage error, naming the word."""
    a = make_array("raid5", 3, "4K")
    a.mount(expect_errors=True)
    r = tierctl("monitor", a.mnt, "--oneshot", check=False)
    assert r.returncode == 0 and r.stderr == "", r
    tierctl("fail", a.mnt, 2)
    out = tmp_path / "events"
    prog = script(tmp_path / "record", RECORD)
    r = subprocess.run([str(TIERCTL), "monitor", str(a.mnt), "--oneshot", "--program",
                        str(prog)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MON_OUT=str(out)))
    assert r.returncode == 1, r
    assert r.stderr.splitlines() == [
        f"tierctl monitor: Fail {a.mnt} member 2 {a.members[2]}",
        f"tierctl monitor: DegradedArray {a.mnt} health degraded, state UU_"], r.stderr
    assert out.read_text().splitlines() == [
        f"3\tFail\t{a.mnt}\tmember 2 {a.members[2]}",
        f"3\tDegradedArray\t{a.mnt}\thealth degraded, state UU_"]
    r = tierctl("monitor", tmp_path, "--oneshot", check=False)
    assert r.returncode == 1 and \
        r.stderr == f"tierctl monitor: Unmounted {tmp_path} not a tierfs mount\n", r
    for bad, word in [(["--interval", "0"], "'0'"), (["--interval", "soon"], "'soon'"),
                      (["--frobnicate"], "'--frobnicate'"),
                      (["--program", str(tmp_path / "nope")], str(tmp_path / "nope"))]:
        r = tierctl("monitor", a.mnt, "--oneshot", *bad, check=False)
        assert r.returncode == 2 and word in r.stderr.splitlines()[0], (bad, r)
    r = tierctl("monitor", check=False)
    assert r.returncode == 2 and "usage: tierctl monitor" in r.stderr


# ---------------------------------------------------------------------------
# The program failing or hanging; SIGTERM
# ---------------------------------------------------------------------------

def test_program_that_fails_does_not_stop_the_monitor(make_array, monitor, tmp_path):
    """A program that exits 7 for every event: each exit is logged, every
    later event still runs it, the monitor goes on."""
    a = make_array("raid1", 2, "64K")
    a.mount(expect_errors=True)
    prog = script(tmp_path / "failing", RECORD + "exit 7\n")
    mon = monitor([a.mnt], prog=prog)
    tierctl("fail", a.mnt, 1)
    mon.wait_runs("Fail", "Degraded")
    tierctl("replace", a.mnt, 1, new_dir(a, "new1"), "--wait")
    mon.wait_runs("Fail", "Degraded", "RebuildStarted", "RebuildFinished")
    wait_until(lambda: mon.log().count(": exit status 7") == 4, "four exit statuses logged")
    assert f"tierctl monitor: {prog} Fail {a.mnt}: exit status 7" in mon.log(), mon.log()
    assert mon.alive()
    assert mon.stop() == 0


def test_program_that_hangs_is_killed_and_sigterm_ends_the_monitor(make_array, monitor,
                                                                  tmp_path):
    """A program that hangs on Fail (a shell waiting for a child): the log
    has Degraded at once, the program is killed after --program-timeout
    with its child, then runs for Degraded.  Then a hang with a long
    timeout: SIGTERM ends the monitor within seconds, exit 0, the program
    and its child gone."""
    a = make_array("raid6", 4, "4K")
    a.mount(expect_errors=True)
    pids = tmp_path / "pids"
    prog = script(tmp_path / "hangs", RECORD + f"""
if [ "$1" = Fail ]; then
    sleep 1000 &
    echo "$$ $!" >> {pids}
    wait
fi
""")
    mon = monitor([a.mnt], args=["--program-timeout", "2"], prog=prog)
    tierctl("fail", a.mnt, 1)
    wait_until(lambda: [e for e, _, _ in mon.logged()] == ["Fail", "Degraded"],
               "Fail and Degraded in the log", 10)
    assert "Degraded" not in [e for e, _, _ in mon.runs()], mon.log()   # Fail's hangs
    mon.wait_runs("Fail", "Degraded", timeout=10)
    assert "still running after 2 s: killed" in mon.log(), mon.log()
    for pid in map(int, pids.read_text().split()):
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), f"process {pid} gone", 5)

    mon2 = monitor([a.mnt], args=["--program-timeout", "600"], prog=prog)
    wait_until(lambda: len(pids.read_text().split()) == 4, "the second hang", 10)
    t0 = time.time()
    assert mon2.stop(timeout=20) == 0
    assert time.time() - t0 < 8, mon2.log()
    log = mon2.log()
    assert "stopped: 1 events not passed to" in log and "stopped by signal 15" in log, log
    for pid in map(int, pids.read_text().split()[2:]):
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), f"process {pid} gone", 5)


# ---------------------------------------------------------------------------
# Unmounted
# ---------------------------------------------------------------------------

def test_unmount_gives_unmounted(make_array, monitor):
    """Two arrays watched: the first unmounted gives Unmounted and the
    monitor goes on with the other; when that one's daemon dies (its mount
    left dead) it gives Unmounted too, and the monitor exits 0 by itself
    after running the program for it."""
    a = make_array("raid1", 2, "64K")
    b = make_array("raid0", 2, "64K")
    ma = a.mount()
    mb = b.mount()
    mon = monitor([a.mnt, b.mnt])
    settle()
    ma.stop()
    runs = mon.wait_runs("Unmounted")
    assert runs == [("Unmounted", str(a.mnt), "not a tierfs mount")], runs
    (b.mnt / "x").write_bytes(b"still here")
    settle()
    assert mon.alive() and len(mon.runs()) == 1, mon.log()
    mb.proc.send_signal(signal.SIGKILL)            # the teardown unmounts it
    mon.wait_runs("Unmounted", "Unmounted")
    mon.proc.wait(timeout=10)
    assert mon.proc.returncode == 0, mon.log()
    assert mon.runs()[1] == ("Unmounted", str(b.mnt), "Transport endpoint is not connected")


# ---------------------------------------------------------------------------
# The systemd units
# ---------------------------------------------------------------------------

def test_systemd_units_verify(tmp_path):
    """contrib/systemd's units, with tierctl where this build has it,
    pass systemd-analyze verify as instances for a mount point (package
    systemd: contrib/deps.sh --test)."""
    assert shutil.which("systemd-analyze"), "systemd-analyze: contrib/deps.sh --test"
    src = ROOT / "contrib" / "systemd"
    units = {"tierfs-monitor@.service": "tierfs-monitor@.service.in",
             "tierfs-scrub@.service": "tierfs-scrub@.service.in",
             "tierfs-scrub@.timer": "tierfs-scrub@.timer"}
    for unit, name in units.items():
        text = (src / name).read_text().replace("@bindir@", str(BUILD))
        (tmp_path / unit).write_text(text)
    inst = subprocess.run(["systemd-escape", "--path", "/srv/my array"], capture_output=True,
                          text=True, check=True).stdout.strip()
    for unit in units:
        path = tmp_path / unit.replace("@.", f"@{inst}.")
        path.symlink_to(tmp_path / unit)
        r = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and r.stderr == "", (unit, r.stderr)


FSTAB_GENERATOR = "/lib/systemd/system-generators/systemd-fstab-generator"


def test_readme_fstab_line_orders_the_array_after_its_filesystems(tmp_path):
    """The fstab example of contrib/systemd/README.md gives the array's
    mount unit RequiresMountsFor= each member's and the SSD's filesystem."""
    assert os.access(FSTAB_GENERATOR, os.X_OK), f"{FSTAB_GENERATOR}: contrib/deps.sh --test"
    text = (ROOT / "contrib" / "systemd" / "README.md").read_text()
    fstab = text.split("```fstab\n", 1)[1].split("```", 1)[0]
    (tmp_path / "fstab").write_text(fstab)
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run([FSTAB_GENERATOR, str(out), str(out), str(out)], check=True, timeout=60,
                   env=dict(os.environ, SYSTEMD_FSTAB=str(tmp_path / "fstab")),
                   capture_output=True)
    unit = (out / "srv-array.mount").read_text()
    assert "\nRequiresMountsFor=/srv/hdd0 /srv/hdd1 /ssd\n" in unit, unit
    assert "\nType=fuse.tierfs\n" in unit, unit
