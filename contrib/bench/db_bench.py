#!/usr/bin/python3
"""db_bench.py - PostgreSQL (pgbench) and SQLite WAL on ext4, mergerfs and tierfs, interleaved.

Targets (all over directories on the disk under BENCH_TMPDIR, each in a
mktemp -d directory of its own inside one mktemp -d work directory):
  raw          a plain directory
  mergerfs     Debian's mergerfs over one plain directory
               (-f -o fsname=db-bench-mergerfs,allow_other,MERGERFS_OPTS)
  tfs_r5       tierfs RAID5 x4, 64K chunk, uncached
  tfs_r5c      the same with the SSD tier in write-back mode, its cache
               directory beside the members
               (-o cache=DIR,cache_size=CACHE_SIZE,cache_mode=writeback)
  tfs_r5_hdd   with HDD=1: the two tierfs targets again, every member an
  tfs_r5c_hdd  emulated 7200 rpm disk (-o member_model=hdd7200)
  tfs_r5u ...  each tierfs target with a "u" (tfs_r5u, tfs_r5cu, tfs_r5u_hdd,
               tfs_r5cu_hdd): on the io_uring transport (-o fuse_uring=on;
               the fuse module's enable_uring must be Y); the others are
               mounted -o fuse_uring=off
Every FUSE target is mounted with allow_other (the postgres user reaches it).

Cells:
  pgbench sS cC   a PostgreSQL cluster per target (initdb as the postgres
                  user via runuser, the socket in a directory beside the
                  mount, server settings as initdb makes them: fsync on,
                  synchronous_commit on, shared_buffers 128MB) with one
                  database per scale (pgbench -i -s S, made once per target
                  and reused by every round); a cell starts the server,
                  runs WARMUP s of pgbench (untimed) and a CHECKPOINT, then
                  pgbench -c C -j min(JOBS,C) -T SECONDS -n, and stops the
                  server (-m fast); tps and mean latency
  sqlite SYNC     Python's sqlite3 (journal_mode=WAL, synchronous=SYNC) on
                  a database made once per target (SQLITE_ROWS rows of an
                  indexed table); SQLITE_TXNS transactions (at most SECONDS
                  s), each SQLITE_OPS random-key INSERTs/UPDATEs, the same
                  sequence on every target; transactions per second
Each cell begins with a sync(2) (untimed) so no target measures another's
writeback.  A round runs every cell on every target before the next round
starts (cell by cell, the target order rotated each round); the report is
the median of the rounds, the ratio of each target to tfs_r5 and to mergerfs
(and with HDD=1, of each HDD target to tfs_r5_hdd: the issue's target is
tfs_r5c_hdd >= 10x tfs_r5_hdd on pgbench), the daemon's user+sys CPU per
transaction (/proc/PID/stat over the measured run, FUSE targets) and the load
average at the start and the end.

Usage: contrib/bench/db_bench.py          (configure with these variables)
  ROUNDS=3 SECONDS=30 WARMUP=5 SCALES="4 40" CLIENTS="4 16" JOBS=2
  SQLITE_SYNCS="NORMAL FULL" SQLITE_TXNS=20000 SQLITE_OPS=4 SQLITE_ROWS=20000
  WORKLOADS="pgbench sqlite"  HDD=0|1  TARGETS="raw mergerfs tfs_r5 tfs_r5c ..."
  CACHE_SIZE=2G  MERGERFS_OPTS=cache.files=partial  TIERFS_OPTS=""  (more -o)
      (MERGERFS_OPTS=cache.files=off: PostgreSQL runs, but SQLite's first
      write in WAL mode fails with "disk I/O error", most likely its shared
      mmap of the WAL index on mergerfs's direct_io files)
  TIERFS_BUILD=<meson build dir with tierfs and mkfs.tierfs> (default: build/)
  BENCH_TMPDIR=/var/tmp   where the work directory goes (the disk measured)
  PERF=record|graph|stat  watch each FUSE daemon over each measured pgbench
                          run: perf record -p PID (graph: with -g, which costs a
                          daemon that switches often far more than one that
                          does not), or perf stat of its syscalls and context
                          switches; the report in OUT/logs/*.perf.txt
  OUT=<dir>               results (default: a new mktemp -d directory)
  TRACE_DIR=<dir>         record each cell on each target with a tier through
                          the tier's trace recorder (tierctl trace, issue 16)
                          into DIR/TARGET-CELL-rROUND.trace
  KEEP=1                  keep the work directory (clusters, members, logs)
  (SECONDS works as a command prefix: bash does not export its own $SECONDS.)
  Smoke run: ROUNDS=1 SECONDS=5 WARMUP=1 SCALES=1 CLIENTS=2 SQLITE_TXNS=500

Output: a markdown table on stdout (also OUT/summary.md), every measurement
in OUT/db_bench.json (written after each one, so a cut run keeps what it
measured; a tierfs cell's row also has "tier", what its status counters
CELL_COUNTERS grew by during the cell, which the log prints too), each pgbench output in OUT/logs/, the daemons' and the servers'
logs copied to OUT/logs/ at the end.

Whatever happens (error, Ctrl-C, SIGTERM) every PostgreSQL server it started
is stopped (pg_ctl stop -m immediate by its data directory, then SIGQUIT /
SIGKILL to its postmaster's pid), every FUSE mount unmounted (fusermount3
-u, retried, then -u -z), every daemon stopped by pid, and the work
directory removed (unless KEEP=1).  A benchmark, run by hand: never a test.
"""
import glob
import json
import os
import pwd
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import raid_sweep as rs  # noqa: E402  (cleanup, mounts, signals, sizes, source commit)
import cache_bench as cb  # noqa: E402  (the RAID5 x4 Array, child runs, daemon CPU)
from raid_sweep import CLEAN, log  # noqa: E402

PY = "/usr/bin/python3"
PG_USER = "postgres"
PG_PORT = "5432"        # every server has a socket directory of its own
SEED = 20240914
ALL_TARGETS = ["raw", "mergerfs", "tfs_r5", "tfs_r5c", "tfs_r5_hdd", "tfs_r5c_hdd"]
# the same tierfs targets on the io_uring transport (fuse_uring=on; the
# others are mounted fuse_uring=off)
URING_TARGETS = ["tfs_r5u", "tfs_r5cu", "tfs_r5u_hdd", "tfs_r5cu_hdd"]
SERVERS = {}            # data dir -> postmaster pid, of every server running


# ---------------------------------------------------------------- settings
def env_int(name, default, lo=0):
    v = os.environ.get(name, str(default)).strip()
    if not re.fullmatch(r"\d+", v) or int(v) < lo:
        sys.exit("db_bench.py: %s=%r: a whole number >= %d" % (name, v, lo))
    return int(v)


def env_list(name, default):
    return os.environ.get(name, default).split()


def settings():
    c = types.SimpleNamespace()
    c.rounds = env_int("ROUNDS", 3, 1)
    c.seconds = env_int("SECONDS", 30, 1)
    c.warmup = env_int("WARMUP", 5)
    c.scales = [int(x) for x in env_list("SCALES", "4 40")]
    c.clients = [int(x) for x in env_list("CLIENTS", "4 16")]
    c.jobs = env_int("JOBS", 2, 1)
    c.syncs = [s.upper() for s in env_list("SQLITE_SYNCS", "NORMAL FULL")]
    c.txns = env_int("SQLITE_TXNS", 20000, 1)
    c.ops = env_int("SQLITE_OPS", 4, 1)
    c.rows = env_int("SQLITE_ROWS", 20000, 1)
    c.workloads = env_list("WORKLOADS", "pgbench sqlite")
    c.hdd = os.environ.get("HDD", "0") == "1"
    c.targets = env_list("TARGETS", " ".join(ALL_TARGETS if c.hdd else ALL_TARGETS[:4]))
    c.cache_size = rs.size_arg(os.environ.get("CACHE_SIZE", "2G"))
    c.mergerfs_opts = os.environ.get("MERGERFS_OPTS", "cache.files=partial")
    c.tierfs_opts = [o for o in os.environ.get("TIERFS_OPTS", "").split(",") if o]
    c.build = os.path.abspath(os.environ.get("TIERFS_BUILD", os.path.join(REPO, "build")))
    c.tmpdir = os.environ.get("BENCH_TMPDIR", "/var/tmp")
    c.out = os.environ.get("OUT", "")
    c.keep = os.environ.get("KEEP", "0") == "1"
    c.perf = os.environ.get("PERF", "")
    c.trace_dir = os.path.abspath(os.environ["TRACE_DIR"]) if os.environ.get("TRACE_DIR") else ""
    if c.trace_dir:
        os.makedirs(c.trace_dir, exist_ok=True)
    bad = [t for t in c.targets if t not in ALL_TARGETS + URING_TARGETS]
    bad += ["PERF=" + c.perf] if c.perf not in ("", "record", "graph", "stat") else []
    bad += [w for w in c.workloads if w not in ("pgbench", "sqlite")]
    bad += [s for s in c.syncs if s not in ("OFF", "NORMAL", "FULL", "EXTRA")]
    if bad or not c.targets or min(c.scales + c.clients, default=1) < 1:
        sys.exit("db_bench.py: unknown or bad %s (see --help)" % " ".join(bad or ["SCALES/CLIENTS"]))
    return c


def pg_bindir():
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    sys.exit("db_bench.py: no PostgreSQL under /usr/lib/postgresql/*/bin (contrib/deps.sh)")


def checks(c):
    need = ["fusermount3"]
    if "mergerfs" in c.targets:
        need.append("mergerfs")
    if "pgbench" in c.workloads:
        need.append("runuser")
    for exe in need:
        if not shutil.which(exe):
            sys.exit("db_bench.py: %s not found (apt-get install %s)" % (exe, exe))
    if any(t.startswith("tfs") for t in c.targets):
        for exe in ("tierfs", "mkfs.tierfs"):
            if not os.access(os.path.join(c.build, exe), os.X_OK):
                sys.exit("db_bench.py: no %s in %s (set TIERFS_BUILD)" % (exe, c.build))
    if "pgbench" in c.workloads:
        c.bindir = pg_bindir()
        c.pw = pwd.getpwnam(PG_USER)


# ---------------------------------------------------------------- children
def child(cmd, timeout, what, user=None):
    """Run cmd (as user, via runuser, with cwd /) in a session of its own;
    (rc, stdout, stderr).  A signal meanwhile leaves it for the cleanup."""
    if user:
        cmd = ["runuser", "-u", user, "--"] + [str(a) for a in cmd]
    return cb.fio_run(cmd, timeout, what)


def must(r, what):
    rc, out, err = r
    if rc:
        raise RuntimeError("%s: exit %d: %s" % (what, rc, (err or out).strip()[-800:]))
    return out


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---------------------------------------------------------------- targets
class Mergerfs(rs.Daemon):
    def __init__(self, c, work):
        self.name, self.c = "mergerfs", c
        self.dir = tempfile.mkdtemp(prefix="mergerfs-", dir=work)
        self.src, self.mnt = os.path.join(self.dir, "src"), os.path.join(self.dir, "mnt")
        self.logf = os.path.join(self.dir, "daemon.log")
        self.proc = None
        os.mkdir(self.src)
        os.mkdir(self.mnt)

    def mount(self):
        opts = "fsname=db-bench-mergerfs,allow_other"
        if self.c.mergerfs_opts:
            opts += "," + self.c.mergerfs_opts
        self.spawn(["mergerfs", "-f", "-o", opts, self.src, self.mnt], 30)
        log("mergerfs mounted (-o %s)" % opts)


class Target:
    """One target: its directory (self.dir), where the databases go
    (self.data) and the daemon serving it (self.daemon, None for raw)."""

    def __init__(self, c, work, name):
        self.name, self.c, self.daemon = name, c, None
        if name == "raw":
            self.dir = tempfile.mkdtemp(prefix="raw-", dir=work)
            self.data = os.path.join(self.dir, "fs")
            os.mkdir(self.data)
        elif name == "mergerfs":
            self.daemon = Mergerfs(c, work)
            self.dir, self.data = self.daemon.dir, self.daemon.mnt
        else:
            a = types.SimpleNamespace(build=c.build, tmpdir=work, cache_size=c.cache_size)
            self.daemon = cb.Array(a, name, "r5c" in name)
            self.dir, self.data = self.daemon.dir, self.daemon.mnt
        os.chmod(self.dir, 0o755)
        self.pgdata = os.path.join(self.data, "pg")
        self.pgrun = os.path.join(self.dir, "pgrun")      # socket and server log, on ext4
        self.sqlite = os.path.join(self.data, "sqlite", "bench.db")

    def mount(self):
        d = self.daemon
        if isinstance(d, cb.Array):
            d.mkfs()
            d.mount(model="" if self.name.endswith("_hdd") else None,
                    cache_opts="cache_mode=writeback" if d.cached else "",
                    opts=["allow_other", "fuse_uring=" + (
                        "on" if self.name.replace("_hdd", "").endswith("u") else "off")]
                    + self.c.tierfs_opts)
            self.info = "-o " + d.opts + ("; model: " + d.model if d.model else "")
        elif d:
            d.mount()
            self.info = "mergerfs -o fsname=db-bench-mergerfs,allow_other," + self.c.mergerfs_opts
        else:
            self.info = "plain directory"
        os.mkdir(os.path.dirname(self.sqlite))

    def pid(self):
        return self.daemon.proc.pid if self.daemon and self.daemon.proc else None

    def cpu_s(self):
        p = self.pid()
        return cb.proc_cpu_s(p) if p else None

    def check(self):
        if self.daemon and not self.daemon.alive():
            raise RuntimeError("%s: the daemon died: %s" % (self.name, self.daemon.log()[-800:]))


# ---------------------------------------------------------------- PostgreSQL
def pg_alive(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"postgres" not in f.read():
                return False
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pg_ctl(c, t, *args, timeout=660):
    return child([os.path.join(c.bindir, "pg_ctl"), "-D", t.pgdata, "-w", "-t", "600",
                  "-l", os.path.join(t.pgrun, "server.log")] + list(args),
                 timeout, "%s: pg_ctl %s" % (t.name, args[-1]), user=PG_USER)


def pg_start(c, t):
    must(pg_ctl(c, t, "start"), "%s: pg_ctl start" % t.name)
    with open(os.path.join(t.pgdata, "postmaster.pid")) as f:
        SERVERS[t.pgdata] = int(f.readline())


def pg_stop(c, t, mode="fast"):
    """Stop the server of t's data directory (pg_ctl stop -m mode); if that
    fails, SIGQUIT (what immediate sends), then SIGKILL, to its postmaster."""
    pid = SERVERS.get(t.pgdata)
    if pid is None:
        return 0.0
    t0 = time.time()
    rc, out, err = pg_ctl(c, t, "-m", mode, "stop")
    # pg_ctl -w returns once postmaster.pid is gone, which the postmaster
    # removes just before it exits: give it a moment to be gone
    for _ in range(50):
        if rc or not pg_alive(pid):
            break
        time.sleep(0.1)
    if rc and pg_alive(pid):
        log("%s: pg_ctl stop -m %s failed (%s); SIGQUIT to postmaster %d"
            % (t.name, mode, (err or out).strip()[-200:], pid))
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            for _ in range(100):
                if not pg_alive(pid):
                    break
                time.sleep(0.1)
            if not pg_alive(pid):
                break
    if pg_alive(pid):
        raise RuntimeError("%s: postmaster %d still running" % (t.name, pid))
    del SERVERS[t.pgdata]
    return time.time() - t0


def psql(c, t, db, q):
    return must(child([os.path.join(c.bindir, "psql"), "-h", t.pgrun, "-p", PG_PORT, "-d", db,
                       "-XAtq", "-c", q], 660, "%s: psql" % t.name, user=PG_USER),
                "%s: psql %s" % (t.name, q))


def pg_init(c, t, info):
    """initdb, one pgbench database per scale, a checkpoint; times in info."""
    for d in (t.pgdata, t.pgrun):
        os.mkdir(d, 0o700)
        os.chown(d, c.pw.pw_uid, c.pw.pw_gid)
    if len(os.path.join(t.pgrun, ".s.PGSQL." + PG_PORT)) > 107:
        raise RuntimeError("socket path too long under %s (a shorter BENCH_TMPDIR)" % t.pgrun)
    t0 = time.time()
    # --no-sync: the cluster is made for the run; the checkpoint below and
    # the sync(2) before every cell write it out
    must(child([os.path.join(c.bindir, "initdb"), "-D", t.pgdata, "--no-locale", "-E", "UTF8",
                "--no-sync"], 900, "%s: initdb" % t.name, user=PG_USER), "%s: initdb" % t.name)
    with open(os.path.join(t.pgdata, "postgresql.conf"), "a") as f:
        f.write("\n# db_bench.py\nlisten_addresses = ''\nunix_socket_directories = '%s'\n"
                "port = %s\n" % (t.pgrun, PG_PORT))
    info["initdb_s"] = round(time.time() - t0, 2)
    pg_start(c, t)
    try:
        info["settings"] = dict(l.split("|", 1) for l in psql(
            c, t, "postgres", "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', "
            "'synchronous_commit', 'shared_buffers', 'wal_sync_method', 'full_page_writes', "
            "'max_wal_size', 'checkpoint_timeout', 'server_version')").splitlines())
        for s in c.scales:
            t0 = time.time()
            db = "bench_s%d" % s
            must(child([os.path.join(c.bindir, "createdb"), "-h", t.pgrun, "-p", PG_PORT, db],
                       120, "%s: createdb" % t.name, user=PG_USER), "%s: createdb" % t.name)
            must(child([os.path.join(c.bindir, "pgbench"), "-h", t.pgrun, "-p", PG_PORT, "-i",
                        "-q", "-s", s, db], 7200, "%s: pgbench -i" % t.name, user=PG_USER),
                 "%s: pgbench -i -s %d" % (t.name, s))
            psql(c, t, db, "CHECKPOINT")
            info["pgbench_init_s%d_s" % s] = round(time.time() - t0, 2)
    finally:
        info["pg_stop_s"] = round(pg_stop(c, t), 2)


PGB_RE = {
    "txns": r"number of transactions actually processed: (\d+)",
    "tps": r"tps = ([\d.]+) \(without initial connection time\)",
    "latency_ms": r"latency average = ([\d.]+) ms",
    "failed": r"number of failed transactions: (\d+)",
}


def pgbench(c, t, db, clients, seconds):
    cmd = [os.path.join(c.bindir, "pgbench"), "-h", t.pgrun, "-p", PG_PORT, "-c", clients,
           "-j", min(c.jobs, clients), "-T", seconds, "-n", db]
    return child(cmd, seconds * 3 + 300, "%s: pgbench" % t.name, user=PG_USER)


PERF_CALLS = ("read write readv writev pread64 pwrite64 preadv pwritev fsync fdatasync "
              "futex io_uring_enter newfstatat statx lgetxattr fgetxattr getxattr openat "
              "close ppoll epoll_wait sched_yield")


def perf_start(c, t, base):
    """PERF: perf record or stat of t's daemon until perf_stop; None without."""
    if not c.perf or not t.pid():
        return None
    txt, data = base + ".perf.txt", base + ".perf.data"
    if c.perf == "stat":
        # a list, not sys_enter_*: perf opens an event per thread, and
        # tierfs's dozens of threads times 360 calls run out of descriptors
        ev = ",".join("syscalls:sys_enter_" + n for n in PERF_CALLS.split())
        cmd = ["perf", "stat", "-o", txt, "-e", ev + ",context-switches", "-p", str(t.pid())]
    else:
        cmd = ["perf", "record", "-q", "-F", "999", "-p", str(t.pid()), "-o", data]
        cmd[3:3] = ["-g"] if c.perf == "graph" else []
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p, (None if c.perf == "stat" else data), txt


def perf_stop(prof):
    if not prof:
        return
    p, data, txt = prof
    p.send_signal(signal.SIGINT)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if data:
        with open(txt, "w") as f:
            subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                            "--percent-limit", "0.5", "-g", "none", "--sort", "comm,dso,sym"],
                           stdout=f, stderr=subprocess.DEVNULL, timeout=600)
        os.unlink(data)


def cell_pgbench(c, t, rnd, scale, clients, row, logdir):
    db = "bench_s%d" % scale
    pg_start(c, t)
    try:
        if c.warmup:
            must(pgbench(c, t, db, clients, c.warmup), "%s: warm-up pgbench" % t.name)
        psql(c, t, db, "CHECKPOINT")
        row["load1"] = load().split()[0]
        prof = perf_start(c, t, os.path.join(logdir, "r%d.s%d.c%d.%s" % (rnd, scale, clients,
                                                                         t.name)))
        cpu0, t0 = t.cpu_s(), time.time()
        rc, out, err = pgbench(c, t, db, clients, c.seconds)
        row["seconds"] = round(time.time() - t0, 2)
        cpu1 = t.cpu_s()
        perf_stop(prof)
    finally:
        row["pg_stop_s"] = round(pg_stop(c, t), 2)
    with open(os.path.join(logdir, "r%d.s%d.c%d.%s.txt" % (rnd, scale, clients, t.name)), "w") as f:
        f.write("$ pgbench -c %d -T %d %s (rc %d)\n%s\n--- stderr\n%s" % (clients, c.seconds, db,
                                                                        rc, out, err))
    if rc:
        raise RuntimeError("pgbench exit %d: %s" % (rc, (err or out).strip()[-300:]))
    for k, rx in PGB_RE.items():
        m = re.search(rx, out)
        if m:
            row[k] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    if "tps" not in row or "txns" not in row:
        raise RuntimeError("no tps in pgbench's output: %s" % out.strip()[-300:])
    row["value"] = row["tps"]
    return cpu0, cpu1


# ---------------------------------------------------------------- SQLite
def sqlite_init(path, rows, seed):
    """The database of the sqlite cells: an indexed table of rows rows."""
    rng = random.Random(seed)
    db = sqlite3.connect(path, isolation_level=None)
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise RuntimeError("journal_mode=WAL refused (%s)" % mode)
    db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v BLOB NOT NULL)")
    db.execute("CREATE INDEX t_k ON t(k)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO t(k, v) VALUES (?, ?)",
                   ((rng.getrandbits(31), rng.randbytes(100)) for _ in range(rows)))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return {"rows": rows}


def sqlite_run(path, sync, txns, max_s, ops, seed):
    """txns transactions (at most max_s seconds) of ops random-key INSERTs
    and UPDATEs each; the connection's set-up and close are not timed."""
    rng = random.Random(seed)
    db = sqlite3.connect(path, isolation_level=None)
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    db.execute("PRAGMA synchronous=%s" % sync)
    got = db.execute("PRAGMA synchronous").fetchone()[0]
    top = db.execute("SELECT max(id) FROM t").fetchone()[0]
    lat = []
    t0 = time.perf_counter()
    end = t0 + max_s
    n = 0
    while n < txns:
        t1 = time.perf_counter()
        if t1 > end:
            break
        db.execute("BEGIN")
        for _ in range(ops):
            if rng.random() < 0.5:
                db.execute("INSERT INTO t(k, v) VALUES (?, ?)",
                           (rng.getrandbits(31), rng.randbytes(100)))
            else:
                db.execute("UPDATE t SET k = ?, v = ? WHERE id = ?",
                           (rng.getrandbits(31), rng.randbytes(100), rng.randint(1, top)))
        db.execute("COMMIT")
        n += 1
        lat.append(time.perf_counter() - t1)
    secs = time.perf_counter() - t0
    db.close()
    lat.sort()
    return {"txns": n, "seconds": round(secs, 3), "journal_mode": mode, "synchronous": got,
            "capped": n < txns, "latency_ms": round(secs * 1000 / max(n, 1), 3),
            "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 3) if lat else None}


def sqlite_child(what, path, *args):
    """One SQLite step in a child process (so a signal or a hang never
    leaves this process holding a file open on a mount)."""
    rc, out, err = child([PY, os.path.abspath(__file__), "--sqlite", what, path]
                         + [str(a) for a in args], 3600, "sqlite %s" % what)
    if rc:
        raise RuntimeError("sqlite %s on %s: exit %d: %s"
                           % (what, path, rc, (err.strip().splitlines() or ["?"])[-1]))
    return json.loads(out.strip().splitlines()[-1])


def cell_sqlite(c, t, rnd, sync, row):
    row["load1"] = load().split()[0]
    cpu0 = t.cpu_s()
    r = sqlite_child("run", t.sqlite, sync, c.txns, c.seconds, c.ops,
                     SEED + 1000 * rnd + c.syncs.index(sync))
    cpu1 = t.cpu_s()
    row.update(r)
    row["value"] = r["txns"] / r["seconds"] if r["seconds"] else None
    return cpu0, cpu1


# ---------------------------------------------------------------- report
def cells_of(c):
    cells = []
    if "pgbench" in c.workloads:
        cells += [("pgbench s%d c%d" % (s, n), ("pgbench", s, n)) for s in c.scales
                  for n in c.clients]
    if "sqlite" in c.workloads:
        cells += [("sqlite %s" % s, ("sqlite", s)) for s in c.syncs]
    return cells


def summarize(c, results):
    summ = {}
    for cell, _ in cells_of(c):
        for t in c.targets:
            rs_ = [r for r in results if r["cell"] == cell and r["target"] == t]
            if not rs_:
                continue
            ok = [r for r in rs_ if r["status"] == "ok" and r.get("value") is not None]
            s = {"n": len(rs_), "ok": len(ok),
                 "notes": sorted({r["note"] for r in rs_ if r.get("note")})}
            if ok:
                vals = [r["value"] for r in ok]
                s.update(median=statistics.median(vals), min=min(vals), max=max(vals))
                lats = [r["latency_ms"] for r in ok if r.get("latency_ms") is not None]
                cpus = [r["cpu_us_per_txn"] for r in ok if r.get("cpu_us_per_txn") is not None]
                if lats:
                    s["latency_ms"] = statistics.median(lats)
                if cpus:
                    s["cpu_us_per_txn"] = statistics.median(cpus)
                s["capped"] = sum(1 for r in ok if r.get("capped"))
            summ["%s|%s" % (cell, t)] = s
    return summ


def table(c, summ, env):
    cells = [n for n, _ in cells_of(c)]
    ts = c.targets

    def get(cell, t, k="median"):
        return summ.get("%s|%s" % (cell, t), {}).get(k)

    def show(cell, t):
        s = summ.get("%s|%s" % (cell, t))
        if s is None:
            return "n/a"
        if "median" not in s:
            return "fails"
        v = "%.0f" % s["median"] if s["median"] >= 100 else "%.1f" % s["median"]
        if s.get("latency_ms") is not None:
            v += " (%.2f ms)" % s["latency_ms"]
        if s["ok"] < s["n"]:
            v += " [%d/%d failed]" % (s["n"] - s["ok"], s["n"])
        if s.get("capped"):
            v += " *"
        return v

    def ratio(cell, a, b):
        x, y = get(cell, a), get(cell, b)
        return "%.2f" % (x / y) if x is not None and y else "-"

    def row(cols):
        return "| " + " | ".join(cols) + " |"

    md = ["### Medians of %d rounds: transactions per second (mean latency)\n" % c.rounds,
          row(["cell"] + ts), "|---" * (len(ts) + 1) + "|"]
    md += [row([cell] + [show(cell, t) for t in ts]) for cell in cells]
    bases = [b for b in ("tfs_r5", "mergerfs", "tfs_r5_hdd") if b in ts]
    for b in bases:
        others = [t for t in ts if t != b and (b != "tfs_r5_hdd" or t.endswith("_hdd"))]
        if not others:
            continue
        md += ["", "### Ratio to %s (> 1: faster than %s)\n" % (b, b),
               row(["cell"] + ["%s/%s" % (t, b) for t in others]),
               "|---" * (len(others) + 1) + "|"]
        md += [row([cell] + [ratio(cell, t, b) for t in others]) for cell in cells]
    fuse = [t for t in ts if t != "raw"]
    if fuse:
        md += ["", "### Daemon CPU per transaction (us of user+sys, median)\n",
               row(["cell"] + fuse), "|---" * (len(fuse) + 1) + "|"]
        md += [row([cell] + ["%.0f" % get(cell, t, "cpu_us_per_txn")
                             if get(cell, t, "cpu_us_per_txn") is not None else "-"
                             for t in fuse]) for cell in cells]
    if c.rounds > 1:
        md += ["", "### Spread (min-max over the rounds)\n", row(["cell"] + ts),
               "|---" * (len(ts) + 1) + "|"]
        md += [row([cell] + ["%.0f-%.0f" % (get(cell, t, "min"), get(cell, t, "max"))
                             if get(cell, t) is not None else "-" for t in ts])
               for cell in cells]
    md += ["", "load average at start: %s; at end: %s" % (env.get("loadavg_start"),
                                                          env.get("loadavg_end", "?"))]
    if any(s.get("capped") for s in summ.values()):
        md += ["", "\\* some rounds stopped at SECONDS=%d before SQLITE_TXNS=%d transactions"
               % (c.seconds, c.txns)]
    notes = sorted({n for s in summ.values() for n in s["notes"]})
    if notes:
        md += ["", "Failures:"] + ["- " + n for n in notes]
    return "\n".join(md) + "\n"


# ---------------------------------------------------------------- main
# What the tier and the array did during a cell (tierfs targets): the
# status counters' growth, logged and kept in the cell's row ("tier").
CELL_COUNTERS = ("cache.read_hits", "cache.read_misses", "cache.flushed_bytes",
                 "cache.throttled", "cache.promotions", "cache.reclaimed", "raid.file_syncs",
                 "journal.commits")


def tier_counters(t):
    if not isinstance(t.daemon, cb.Array):
        return None
    st = t.daemon.status()
    return {k: int(st[k]) for k in CELL_COUNTERS if st.get(k, "").isdigit()}


def trace(c, t, what, name=""):
    """With TRACE_DIR: the tier's trace recorder (tierctl trace) on a tierfs
    target with a tier, for one cell: start into TRACE_DIR/NAME.trace, or
    stop."""
    if not c.trace_dir or not isinstance(t.daemon, cb.Array) or not t.daemon.cached:
        return
    args = [os.path.join(c.build, "tierctl"), "trace", t.daemon.mnt, what]
    if what == "start":
        args.append(os.path.join(c.trace_dir, name + ".trace"))
    must(child(args, 60, "tierctl trace " + what), "tierctl trace " + what)


def run_cell(c, t, rnd, cell, spec, logdir):
    row = {"round": rnd + 1, "cell": cell, "target": t.name, "status": "ok", "note": ""}
    os.sync()
    trace(c, t, "start", "%s-%s-r%d" % (t.name, cell.replace(" ", "-"), rnd + 1))
    k0 = tier_counters(t)
    w0 = time.time()
    try:
        if spec[0] == "pgbench":
            row.update(workload="pgbench", scale=spec[1], clients=spec[2])
            cpu0, cpu1 = cell_pgbench(c, t, rnd + 1, spec[1], spec[2], row, logdir)
        else:
            row.update(workload="sqlite", synchronous=spec[1])
            cpu0, cpu1 = cell_sqlite(c, t, rnd, spec[1], row)
        if cpu0 is not None and cpu1 is not None:
            row["daemon_cpu_s"] = round(cpu1 - cpu0, 3)
            if row.get("txns"):
                row["cpu_us_per_txn"] = round((cpu1 - cpu0) * 1e6 / row["txns"], 1)
    except RuntimeError as e:
        row.update(status="fail", note="%s %s: %s" % (t.name, cell, str(e).splitlines()[0][:300]))
    row["wall_s"] = round(time.time() - w0, 1)
    trace(c, t, "stop")
    t.check()
    k1 = tier_counters(t)
    if k0 is not None and k1 is not None:
        row["tier"] = {k.split(".", 1)[1]: k1[k] - k0[k] for k in k1 if k in k0}
    if row["status"] == "ok":
        log("  %-16s %-12s %8.1f tx/s%s  (daemon %s us/tx, load %s, %.0f s)"
            % (cell, t.name, row["value"],
               " %.2f ms" % row["latency_ms"] if row.get("latency_ms") is not None else "",
               row.get("cpu_us_per_txn", "-"), row["load1"], row["wall_s"]))
        if row.get("tier"):
            log("  %-16s %-12s %s" % ("", "", " ".join("%s %d" % kv for kv in row["tier"].items())))
    else:
        log("  %-16s %-12s FAILS: %s" % (cell, t.name, row["note"]))
    return row


def save(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--sqlite":
        fn = {"init": sqlite_init, "run": sqlite_run}[sys.argv[2]]
        conv = [str, int, int] if sys.argv[2] == "init" else [str, str, int, float, int, int]
        args = [f(a) for f, a in zip(conv, sys.argv[3:])]
        print(json.dumps(fn(*args)))
        return 0
    if len(sys.argv) > 1:
        print(__doc__)
        return 0 if sys.argv[1] in ("-h", "--help") else 2
    c = settings()
    checks(c)
    CLEAN.keep = c.keep
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, rs.on_signal)
    os.makedirs(c.tmpdir, exist_ok=True)
    if c.out:
        os.makedirs(c.out, exist_ok=True)
    else:
        c.out = tempfile.mkdtemp(prefix="db-bench-results.", dir=os.environ.get("TMPDIR", "/tmp"))
    logdir = os.path.join(c.out, "logs")
    os.makedirs(logdir, exist_ok=True)
    jpath = os.path.join(c.out, "db_bench.json")
    src, commit = rs.source_commit(c.build)
    env = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "host": "%s %s, %d CPUs" % (os.uname().sysname, os.uname().release, os.cpu_count()),
           "tierfs": "%s (source %s at %s)" % (c.build, src, commit),
           "mergerfs": cb.run(["mergerfs", "--version"]).stdout.split("\n")[0]
           if shutil.which("mergerfs") else "-",
           "loadavg_start": load()}
    if "pgbench" in c.workloads:
        env["postgresql"] = c.bindir
    config = {k: v for k, v in vars(c).items() if k != "pw"}
    doc = {"env": env, "config": config, "targets": {}, "results": [], "errors": []}
    targets, work = [], None
    log("results in %s" % c.out)

    def finish():
        CLEAN.stop_child()
        for t in targets:
            if t.pgdata in SERVERS:
                try:
                    pg_stop(c, t, "immediate")
                except RuntimeError as e:
                    log("error: %s" % e)
        for t in targets:       # the logs, before the work directory goes
            for p, n in ((getattr(t.daemon, "logf", None), "daemon.log"),
                         (os.path.join(t.pgrun, "server.log"), "server.log")):
                if p and os.path.exists(p):
                    shutil.copy(p, os.path.join(logdir, "%s.%s" % (t.name, n)))

    with rs.Guard(doc["errors"], finish=finish) as guard:
        work = tempfile.mkdtemp(prefix="db-bench.", dir=c.tmpdir)
        CLEAN.dirs.append(work)
        os.chmod(work, 0o755)
        env["work"] = work
        log("work directory %s; load %s" % (work, env["loadavg_start"]))
        for name in c.targets:
            t = Target(c, work, name)
            targets.append(t)
            t.mount()
            info = doc["targets"][name] = {"mount": t.info}
            log("%s: %s" % (name, t.info))
            if "pgbench" in c.workloads:
                pg_init(c, t, info)
            if "sqlite" in c.workloads:
                t0 = time.time()
                sqlite_child("init", t.sqlite, c.rows, SEED)
                info["sqlite_init_s"] = round(time.time() - t0, 2)
            log("%s: set up %s" % (name, json.dumps({k: v for k, v in info.items()
                                                     if k.endswith("_s")})))
            t.check()
            save(jpath, doc)
        cells = cells_of(c)
        for rnd in range(c.rounds):
            k = rnd % len(targets)
            order = targets[k:] + targets[:k]
            log("round %d/%d (order: %s)" % (rnd + 1, c.rounds, " ".join(t.name for t in order)))
            for cell, spec in cells:
                for t in order:
                    doc["results"].append(run_cell(c, t, rnd, cell, spec, logdir))
                    save(jpath, doc)
        for t in targets:
            if t.daemon:
                errs = t.daemon.errors()
                if errs:
                    doc["targets"][t.name]["daemon_errors"] = errs[:20]
                    log("%s: the daemon logged:\n  %s" % (t.name, "\n  ".join(errs[:5])))
                t0 = time.time()
                doc["targets"][t.name]["daemon_exit"] = t.daemon.umount()
                doc["targets"][t.name]["umount_s"] = round(time.time() - t0, 2)
    env["loadavg_end"] = load()
    env["exit"] = guard.rc
    doc["summary"] = summarize(c, doc["results"])
    save(jpath, doc)
    md = table(c, doc["summary"], env)
    with open(os.path.join(c.out, "summary.md"), "w") as f:
        f.write(md)
    if doc["results"]:
        sys.stdout.write(md)
    log("%sresults: %s, %s" % ("run incomplete; " if guard.rc else "", jpath,
                                os.path.join(c.out, "summary.md")))
    return guard.rc


if __name__ == "__main__":
    sys.exit(main())
