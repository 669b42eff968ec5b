"""Shared fixtures: build location, array creation and mounts that always
unmount (fusermount3 -u, then -u -z), and a daemon-log checker that fails a
test whose daemon logged an error it should not have."""
import os
import subprocess
import threading
import time
import signal
import pathlib

import itertools

import pytest

_LOG_SEQ = itertools.count()     # one log file per daemon start, across Mount objects

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("TIERFS_BUILD", ROOT / "build"))
TIERFS = BUILD / "tierfs"
MKFS = BUILD / "mkfs.tierfs"
# the records tierfs keeps on member files (super.h): root alone may set them
# TIERFS_FUSE_URING=on: every mount that does not choose asks for the
# io_uring transport (-o fuse_uring=on), the fuse module allowing it for
# the session; the suite then runs on the queues instead of /dev/fuse.
FUSE_URING = os.environ.get("TIERFS_FUSE_URING", "")
URING_PARAM = "/sys/module/fuse/parameters/enable_uring"
FID_XATTR = "trusted.tierfs.fid"
SIZE_XATTR = "trusted.tierfs.size"


def mounted(path):
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def run(*args, check=True, **kw):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True,
                          text=True, **kw)


def run_threads(targets, timeout, what):
    """Start a thread for each (fn, args) of targets and wait for them all,
    each at most timeout seconds: one that never comes back (a request the
    daemon never answers) fails the test as "<what> is stuck" instead of
    hanging the suite."""
    ts = [threading.Thread(target=fn, args=args) for fn, args in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    assert not any(t.is_alive() for t in ts), f"{what} is stuck"


def mkfs(members, level, chunk=None, force=False, check=True):
    args = [MKFS, "--level", level]
    if chunk:
        args += ["--chunk", str(chunk)]
    if force:
        args.append("--force")
    return run(*args, *members, check=check)


class Mount:
    """A tierfs daemon in the foreground (-f) with its log captured."""

    def __init__(self, members, mnt, opts=(), env=None, expect_errors=False):
        self.members = [str(m) for m in members]
        self.mnt = str(mnt)
        self.opts = list(opts)
        self.env = env
        self.expect_errors = expect_errors
        self.proc = None
        self.log_path = None
        self.logs = []

    def start(self, timeout=10):
        os.makedirs(self.mnt, exist_ok=True)
        self.log_path = f"{self.mnt}.log.{next(_LOG_SEQ)}"
        self.logs.append(self.log_path)
        log = open(self.log_path, "w")
        args = [str(TIERFS), "-f", ":".join(self.members), self.mnt]
        opts = self.opts
        if FUSE_URING and not any(o.startswith("fuse_uring=") for o in opts):
            opts = opts + [f"fuse_uring={FUSE_URING}"]
        for o in opts:
            args += ["-o", o]
        env = dict(os.environ)
        env.update(self.env or {})
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, env=env)
        log.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if mounted(self.mnt):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"tierfs exited {self.proc.returncode}: {self.log()}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("tierfs did not mount in time: " + self.log())

    def log(self):
        return "".join(open(p).read() for p in self.logs if os.path.exists(p))

    def stop(self):
        """Unmount and reap the daemon, whatever state it is in."""
        if mounted(self.mnt):
            r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
            if r.returncode != 0 and mounted(self.mnt):
                time.sleep(0.3)
                r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
            if r.returncode != 0 and mounted(self.mnt):
                subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
            return rc
        return None

    def kill(self):
        """SIGKILL the daemon (a crash), then clear the dead mount."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)

    def wait_dead(self, timeout=20):
        """Wait for a daemon that is expected to die by itself (fault injection)."""
        self.proc.wait(timeout=timeout)
        self.proc = None
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)

    def remount(self, **kw):
        self.stop()
        for k, v in kw.items():
            setattr(self, k, v)
        return self.start()

    def check_log(self):
        bad = [l for l in self.log().splitlines()
               if ": error:" in l or "crit" in l.split(":")[1:2]]
        if bad and not self.expect_errors:
            pytest.fail("daemon logged errors:\n" + "\n".join(bad))


class Array:
    def __init__(self, tmp, level, n, chunk=None):
        self.tmp = pathlib.Path(tmp)
        self.level = level
        self.members = [self.tmp / f"m{i}" for i in range(n)]
        for m in self.members:
            m.mkdir()
        self.mkfs_out = mkfs(self.members, level, chunk).stdout
        self.mnt = self.tmp / "mnt"
        self.mounts = []

    def mount(self, opts=(), env=None, expect_errors=False):
        m = Mount(self.members, self.mnt, opts, env, expect_errors)
        self.mounts.append(m)
        return m.start()


@pytest.fixture(scope="session", autouse=True)
def fuse_uring_for_the_session():
    """With TIERFS_FUSE_URING set, the fuse module allows io_uring for the
    run (its old value put back at the end)."""
    if not FUSE_URING:
        yield
        return
    old = open(URING_PARAM).read().strip()
    with open(URING_PARAM, "w") as f:
        f.write("Y")
    yield
    with open(URING_PARAM, "w") as f:
        f.write(old)


@pytest.fixture
def module_uring():
    """module_uring(True|False): the fuse module's enable_uring, for this
    test only (machine-wide: the old value is put back)."""
    if not os.path.exists(URING_PARAM):
        pytest.fail(f"{URING_PARAM} missing: this kernel's fuse has no io_uring")
    old = open(URING_PARAM).read().strip()

    def put(on):
        with open(URING_PARAM, "w") as f:
            f.write("Y" if on else "N")
    yield put
    with open(URING_PARAM, "w") as f:
        f.write(old)


@pytest.fixture
def make_array(tmp_path):
    """make_array(level, n, chunk=None) -> Array; every mount it made is
    stopped at teardown and its log checked for unexpected errors."""
    arrays = []

    def factory(level, n, chunk=None, sub=None):
        d = tmp_path / (sub or f"a{len(arrays)}")
        d.mkdir()
        a = Array(d, level, n, chunk)
        arrays.append(a)
        return a

    yield factory
    for a in arrays:
        for m in a.mounts:
            m.stop()
    for a in arrays:
        for m in a.mounts:
            m.check_log()


@pytest.fixture
def mounted_array(make_array):
    """A 4-member RAID0 with a 64K chunk, mounted."""
    a = make_array("raid0", 4, "64K")
    a.mount()
    return a


# Lines a test wants in the run's summary (the crash-state counts of
# test_powercut.py), printed at the end whatever the capture mode.
REPORT = []


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("reported by the tests")
        for line in REPORT:
            terminalreporter.write_line(line)
