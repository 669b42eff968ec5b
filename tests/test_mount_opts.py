"""How a mounted array looks to the administrator's tools: the source df,
findmnt and /proc/mounts show (fsname=, default tierfs:UUID), and the same
mount options (nosuid,nodev unless root says suid or dev) whichever way it
is mounted: the daemon itself, mount -t tierfs, mount -t fuse.tierfs and
fstab lines of both types, through the real mount(8) and the installed
helpers; and where a daemonized tierfs logs: log=FILE, or without syslog
the standard error it was started with."""
import contextlib
import os
import pathlib
import re
import shlex
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, TIERFS, Array, mkfs, mounted
from test_cli import daemon_pids
from test_install import array2, installed  # noqa: F401 (fixtures)


def mount_line(mnt):
    """The /proc/mounts fields of mnt: (source, type, options)."""
    mnt = os.path.realpath(mnt)
    for line in open("/proc/mounts"):
        f = line.split()
        if f[1] == mnt:
            return f[0], f[2], f[3].split(",")
    raise AssertionError(f"{mnt} is not mounted")


def uuid_of(member):
    for line in open(os.path.join(member, ".tierfs", "superblock")):
        if line.startswith("uuid="):
            return line.strip().split("=", 1)[1]
    raise KeyError("uuid")


def sources(mnt):
    """The source as df, findmnt and /proc/mounts give it."""
    df = subprocess.run(["df", "--output=source", str(mnt)], check=True, capture_output=True,
                        text=True).stdout.split("\n")[1].strip()
    fm = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "--mountpoint", str(mnt)],
                        check=True, capture_output=True, text=True).stdout.strip()
    return df, fm, mount_line(mnt)[0]


# ---------------------------------------------------------------- fsname

def test_default_fsname_is_the_uuid(make_array):
    """Without fsname= the source is tierfs:UUID, whatever the member order
    (it was the member list: df lines of hundreds of characters)."""
    a = make_array("raid1", 3, "64K")
    want = "tierfs:" + uuid_of(a.members[0])
    m = a.mount()
    assert sources(a.mnt) == (want, want, want)
    m.stop()
    a.members.reverse()
    m = a.mount()
    assert sources(a.mnt) == (want, want, want)
    m.stop()


def test_fsname_given_wins(make_array):
    a = make_array("raid0", 2, "64K")
    a.mount(opts=["fsname=bulk-array"])
    assert sources(a.mnt) == ("bulk-array",) * 3
    assert mounted(a.mnt)


# ---------------------------------------------------------------- nosuid,nodev

def in_mount_ns(installed, mnt, script):
    """Run the sh script in a private mount namespace where /usr/bin and the
    helpers' directory (/sbin, where mount(8) looks) show the installed
    tierfs on top, as an install with --prefix=/usr puts them.  The script
    prints what it wants checked; the mount it makes is unmounted at its
    end, or lazily if it fails, and the daemon must then exit (killed by
    pid if it does not).  Returns the script's stdout."""
    sbin = os.path.realpath("/sbin")
    pre = (f"set -e\n"
           f"trap 'umount {shlex.quote(str(mnt))} 2>/dev/null || "
           f"fusermount3 -u -z {shlex.quote(str(mnt))} 2>/dev/null || :' EXIT\n"
           f"mount -t overlay overlay -o lowerdir={installed}/sbin:{sbin} {sbin}\n"
           f"mount -t overlay overlay -o lowerdir={installed}/bin:/usr/bin /usr/bin\n")
    try:
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            pre + script], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
    finally:
        deadline = time.time() + 10
        while daemon_pids(mnt) and time.time() < deadline:
            time.sleep(0.05)
        left = daemon_pids(mnt)
        for p in left:
            os.kill(p, 9)
    assert r.returncode == 0, f"{script}\nexit {r.returncode}:\n{r.stderr}"
    assert not left, "the daemon did not exit at umount"
    return r.stdout


def ns_mount(installed, mnt, cmd, fstab=None):
    """Mount by cmd (a shell command) in a private namespace, write and read
    a file, unmount; the /proc/mounts fields of the mount, as mount_line."""
    mnt = pathlib.Path(mnt)
    if fstab:
        (mnt.parent / "fstab").write_text(fstab)
    q = shlex.quote(str(mnt))
    out = in_mount_ns(installed, mnt,
                      f"{cmd}\n"
                      f"awk -v m={q} '$2 == m' /proc/self/mounts\n"
                      f"echo probe > {q}/probe && grep -q probe {q}/probe\n"
                      f"umount {q}\n")
    f = out.split()
    assert len(f) == 6 and f[1] == str(mnt), out
    return f[0], f[2], f[3].split(",")


WAYS = {
    "daemon": "/usr/bin/tierfs {src} {mnt} -o {opts}",
    "mount -t tierfs": "mount -t tierfs {src} {mnt} -o {opts}",
    "mount -t fuse.tierfs": "mount -t fuse.tierfs {src} {mnt} -o {opts}",
    "fstab tierfs": "mount --fstab {fstab} {mnt}",
    "fstab fuse.tierfs": "mount --fstab {fstab} {mnt}",
}


def mount_each_way(installed, array2, opts):
    """{way: (source, type, options)} of a mount with opts, each way."""
    members, mnt = array2
    src = ":".join(str(m) for m in members)
    got = {}
    for way, cmd in WAYS.items():
        fstab = None
        if way.startswith("fstab"):
            fstab = f"{src} {mnt} {way.split()[1]} defaults,{opts},nofail 0 0\n"
        got[way] = ns_mount(installed, mnt, cmd.format(src=src, mnt=mnt, opts=opts,
                                                       fstab=mnt.parent / "fstab"), fstab)
    return got


def test_every_way_mounts_nosuid_nodev(installed, array2):
    """The same source, type and options whichever way: mount -t fuse.tierfs
    and fuse.tierfs fstab lines used to go through mount.fuse3, which adds
    dev,suid, so they mounted without nosuid,nodev."""
    got = mount_each_way(installed, array2, "allow_other,noatime")
    src, typ, opts = got["daemon"]
    assert typ == "fuse.tierfs" and src.startswith("tierfs:")
    assert {"nosuid", "nodev", "allow_other", "noatime"} <= set(opts), opts
    for way, g in got.items():
        assert g == got["daemon"], f"{way}: {g}, the daemon: {got['daemon']}"


def test_root_may_ask_for_suid_and_dev(installed, array2):
    """The daemon honours suid and dev (root's to give).  mount(8) never
    hands them to a helper (they are its defaults: it passes "rw" and the
    rest), so through it the mount stays nosuid,nodev (README says so);
    fsname= reaches the daemon every way."""
    got = mount_each_way(installed, array2, "suid,dev,fsname=media")
    for way, (src, _, opts) in got.items():
        assert src == "media", way
        if way == "daemon":
            assert "nosuid" not in opts and "nodev" not in opts, opts
        else:
            assert "nosuid" in opts and "nodev" in opts, (way, opts)


FSTAB_GENERATOR = "/lib/systemd/system-generators/systemd-fstab-generator"


def test_readme_fstab_line_waits_for_members_and_cache(tmp_path):
    """The README's fstab line, through systemd's fstab generator: the mount
    unit requires the filesystems of every member and of the cache
    directory (systemd reads the source DIR:DIR as one path)."""
    assert os.path.exists(FSTAB_GENERATOR), f"{FSTAB_GENERATOR}: contrib/deps.sh --test"
    readme = (ROOT / "README.md").read_text()
    lines = [l for l in readme.splitlines()
             if "x-systemd.requires-mounts-for=" in l and not l.startswith(("`", "*", " "))
             and len(l.split()) == 6]           # an fstab line, not prose about one
    assert len(lines) == 1, lines
    src, where, typ, opts = lines[0].split()[:4]
    assert typ == "tierfs" and "fsname=" in opts and "log=" in opts, opts
    fstab = tmp_path / "fstab"
    fstab.write_text(lines[0] + "\n")
    out = tmp_path / "units"
    out.mkdir()
    subprocess.run([FSTAB_GENERATOR, out, out, out], check=True, capture_output=True,
                   env=dict(os.environ, SYSTEMD_FSTAB=str(fstab), SYSTEMD_PROC_CMDLINE=""))
    unit = (out / (where.strip("/").replace("/", "-") + ".mount")).read_text()
    req = [w for l in unit.splitlines() if l.startswith("RequiresMountsFor=")
           for w in l.split("=", 1)[1].split()]
    cache = [o.split("=", 1)[1] for o in opts.split(",") if o.startswith("cache=")]
    for d in src.split(":") + cache:
        assert any(d.startswith(r.rstrip("/") + "/") for r in req), (d, req)

# ---------------------------------------------------------------- log=FILE, no syslog

STAMPED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d "
                     r"tierfs\[(\d+)\]: (info|warning|error): ")


@contextlib.contextmanager
def daemonized(a, opts=(), **kw):
    """tierfs without -f on array a (subprocess.run's keywords in kw: where
    its stderr goes); yields (the run's result, the daemon's pid).  The
    mount is always undone and the daemon gone at the end (killed by pid if
    it does not exit)."""
    args = [str(TIERFS), ":".join(map(str, a.members)), str(a.mnt)]
    for o in opts:
        args += ["-o", o]
    a.mnt.mkdir(exist_ok=True)
    r = subprocess.run(args, stdin=subprocess.DEVNULL, text=True, timeout=30, **kw)
    pids = daemon_pids(a.mnt)
    try:
        assert r.returncode == 0 and mounted(a.mnt), r.stderr
        assert len(pids) == 1, pids
        yield r, pids[0]
    finally:
        for u in (["-u"], ["-u", "-z"]):
            if mounted(a.mnt):
                subprocess.run(["fusermount3", *u, str(a.mnt)], capture_output=True)
        deadline = time.time() + 10
        while any(os.path.exists(f"/proc/{p}") for p in pids) and time.time() < deadline:
            time.sleep(0.05)
        for p in pids:
            if os.path.exists(f"/proc/{p}"):
                os.kill(p, 9)


def scrub(mnt):
    """A message the daemon logs after daemonizing: "maintenance: check done"."""
    subprocess.run([str(BUILD / "tierctl"), "scrub", str(mnt), "--wait"], check=True,
                   capture_output=True)


def stamped(path):
    """The lines of a log file, each checked for its timestamp, pid and level."""
    lines = pathlib.Path(path).read_text().splitlines()
    for line in lines:
        assert STAMPED.match(line), line
    return lines


def test_log_file_takes_every_message(tmp_path):
    """-o log=FILE: the mount message (before daemonizing) and a later one
    (the daemon's) are appended to FILE with a timestamp, the daemon's
    under its own pid; the caller's stderr got the mount message only.
    FILE is made 0640 and appended to by the next mount."""
    a = Array(tmp_path, "raid1", 2, "64K")
    log = tmp_path / "tierfs.log"
    with daemonized(a, [f"log={log}"], capture_output=True) as (r, pid):
        scrub(a.mnt)
        lines = stamped(log)
        assert "mounted on " + str(a.mnt) in lines[0], lines
        done = [l for l in lines if "maintenance: check done" in l]
        assert len(done) == 1 and STAMPED.match(done[0]).group(1) == str(pid), lines
        assert "mounted on" in r.stderr and "maintenance" not in r.stderr, r.stderr
    assert (log.stat().st_mode & 0o777) == 0o640
    with daemonized(a, [f"log={log}"], capture_output=True):
        pass
    assert sum("mounted on" in l for l in stamped(log)) == 2     # appended


def no_syslog():
    if os.path.exists("/dev/log"):
        pytest.skip("/dev/log exists: a daemonized tierfs logs to syslog")


def test_no_syslog_keeps_the_callers_stderr(tmp_path):
    """With no syslog socket and no log=, a daemonized tierfs keeps writing
    to the standard error it was started with (a file here), with
    timestamps (they were lost: syslog(3) with no /dev/log drops them)."""
    no_syslog()
    a = Array(tmp_path, "raid1", 2, "64K")
    err = tmp_path / "stderr"
    with open(err, "w") as f, daemonized(a, stderr=f):
        scrub(a.mnt)
    lines = err.read_text().splitlines()
    assert lines[0].startswith("tierfs: info: ") and "mounted on" in lines[0], lines
    assert STAMPED.match(lines[-1]) and "maintenance: check done" in lines[-1], lines


def test_no_syslog_and_a_pipe_says_so(tmp_path):
    """A pipe is not kept (whoever reads it would wait until the unmount):
    the command returns at once and its last line says the messages are
    lost and names log=."""
    no_syslog()
    a = Array(tmp_path, "raid1", 2, "64K")
    with daemonized(a, capture_output=True) as (r, _):
        last = r.stderr.splitlines()[-1]
        assert last.startswith("tierfs: warning: no syslog") and "log=FILE" in last, r.stderr


def test_remount_sets_the_run_time_tunables(installed, tmp_path):
    """mount -o remount,... through the helper applies the tier's run-time
    options (in either order of the watermarks), leaves the mount-time
    ones, and refuses to turn read-only on while mounted."""
    members = [tmp_path / f"m{i}" for i in range(3)]
    for m in members:
        m.mkdir()
    mkfs(members, "raid5", "64K")
    cdir = tmp_path / "ssd"
    cdir.mkdir(mode=0o700)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    src = ":".join(str(m) for m in members)
    q = shlex.quote(str(mnt))
    out = in_mount_ns(installed, mnt,
                      f"mount -t tierfs {src} {q} -o cache={cdir},cache_size=16M\n"
                      f"mount -o remount,cache_dirty_low=80,cache_dirty_high=90,"
                      f"cache_mode=writethrough,cache_promote=3,cache_seq_cutoff=1M,"
                      f"maint_mbps=40,allow_other {q}\n"
                      f"getfattr --only-values -n user.tierfs.maint_mbps {q}; echo\n"
                      f"getfattr --only-values -n user.tierfs.dirty_low {q}; echo\n"
                      f"getfattr --only-values -n user.tierfs.dirty_high {q}; echo\n"
                      f"getfattr --only-values -n user.tierfs.cache_mode {q}; echo\n"
                      f"getfattr --only-values -n user.tierfs.promote_threshold {q}; echo\n"
                      f"getfattr --only-values -n user.tierfs.seq_cutoff {q}; echo\n"
                      f"mount -o remount,cache_dirty_low=5,cache_dirty_high=10 {q}\n"
                      f"getfattr --only-values -n user.tierfs.dirty_low {q}; echo\n"
                      f"getfattr --only-values -n user.tierfs.dirty_high {q}; echo\n"
                      f"if mount -o remount,cache_dirty_high=101 {q} 2>/dev/null; "
                      f"then echo bad-accepted; fi\n"
                      f"if mount -o remount,ro {q} 2>&1; then echo ro-accepted; fi\n"
                      f"umount {q}\n")
    lines = out.splitlines()
    assert lines[:8] == ["40", "80", "90", "writethrough", "3", str(1 << 20), "5", "10"], out
    assert "bad-accepted" not in out and "ro-accepted" not in out, out
    assert "read-only cannot be turned on while mounted" in out, out
