"""The FUSE transport (-o fuse_uring=auto|on|off, src/fuse/transport.c):
requests carried on io_uring queues, one per CPU, when the fuse module
allows it (its enable_uring parameter), /dev/fuse otherwise, and what the
status and tierctl say of it.  On the queues: a tier's hits read on the
queue's own ring, write-back writes, an uncached array's reads and writes
and every namespace request handed to the pool, data checked byte for
byte under concurrent load; a SIGTERM and a SIGKILL with requests in
flight; the refusals.  The module parameter is machine-wide: each test sets
the value it needs and puts the old one back."""
import errno
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from conftest import BUILD, URING_PARAM as PARAM, Mount, mounted
from test_cache import copts, cst, flush, same, status, wait_until
from test_cli import assert_refused, try_mount

K = 1024
M = 1024 * K


def possible_cpus():
    n = 0
    for part in open("/sys/devices/system/cpu/possible").read().strip().split(","):
        n = max(n, int(part.split("-")[-1]) + 1)
    return n


def tierctl(*args):
    return subprocess.run([str(BUILD / "tierctl"), *map(str, args)], capture_output=True,
                          text=True)


def odirect_file(path, size):
    """A file of size random bytes written with O_DIRECT; returns them."""
    data = bytearray(os.urandom(size))
    fd = os.open(str(path), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        buf = aligned(size)
        buf[:] = data
        assert os.pwritev(fd, [buf], 0) == size
        os.fsync(fd)
    finally:
        os.close(fd)
    return data


def aligned(n):
    import mmap
    return mmap.mmap(-1, n)


def hammer(path, model, who, seed, errors):
    """Random 4K O_DIRECT reads (checked against model) and writes (applied
    to model) on path from one thread, who = (index, nthreads, ops): the
    thread reads and writes only the blocks b with b % nthreads == index."""
    rnd = random.Random(seed)
    idx, nthreads, ops = who
    fd = os.open(str(path), os.O_RDWR | os.O_DIRECT)
    buf = aligned(4 * K)
    try:
        for _ in range(ops):
            off = (rnd.randrange(len(model) // (4 * K) // nthreads) * nthreads + idx) * 4 * K
            if rnd.random() < 0.4:
                data = os.urandom(4 * K)
                buf[:] = data
                assert os.pwritev(fd, [buf], off) == 4 * K
                model[off:off + 4 * K] = data
            else:
                assert os.preadv(fd, [buf], off) == 4 * K
                if bytes(buf) != bytes(model[off:off + 4 * K]):
                    errors.append(f"thread {idx}: the block at {off} differs")
                    return
    except OSError as e:
        errors.append(f"thread {idx}: {e}")
    finally:
        os.close(fd)


def concurrent_io(path, model, nthreads=8, ops=1500):
    errors = []
    ts = [threading.Thread(target=hammer, args=(path, model, (i, nthreads, ops), i, errors))
          for i in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def namespace_round(mnt):
    """Every kind of namespace request once, through the pool."""
    d = mnt / "d"
    d.mkdir()
    (d / "x").write_bytes(b"x" * 5000)
    os.rename(d / "x", d / "y")
    os.link(d / "y", d / "z")
    os.symlink("y", d / "s")
    assert os.readlink(d / "s") == "y"
    os.setxattr(d / "y", "user.k", b"v")
    assert os.getxattr(d / "y", "user.k") == b"v"
    assert "user.k" in os.listxattr(d / "y")
    os.truncate(d / "y", 100)
    assert os.stat(d / "z").st_size == 100
    assert sorted(os.listdir(d)) == ["s", "y", "z"]
    os.chmod(d / "y", 0o600)
    assert os.stat(d / "y").st_mode & 0o777 == 0o600
    os.unlink(d / "z")
    with pytest.raises(OSError) as e:
        os.rmdir(d)
    assert e.value.errno == errno.ENOTEMPTY
    for n in ("s", "y"):
        os.unlink(d / n)
    os.rmdir(d)
    os.statvfs(mnt)


def test_requests_ride_the_io_uring_queues_when_the_module_allows(make_array, tmp_path,
                                                                   module_uring):
    module_uring(True)
    a = make_array("raid5", 3, "64K")
    m = a.mount(copts(tmp_path / "c", size="64M", promote=1) + ["fuse_uring=auto"])
    st = status(a.mnt)
    assert st["fuse.transport"] == "io_uring", st
    assert st["fuse.uring"] == "auto"
    assert int(st["fuse.queues"]) == possible_cpus()
    assert int(st["fuse.queue_depth"]) > 0
    model = odirect_file(a.mnt / "f", 8 * M)
    namespace_round(a.mnt)
    # every extent read twice: a miss (promotes), then hits on the rings
    for _ in range(2):
        fd = os.open(str(a.mnt / "f"), os.O_RDONLY | os.O_DIRECT)
        buf = aligned(64 * K)
        for off in range(0, 8 * M, 64 * K):
            assert os.preadv(fd, [buf], off) == 64 * K
            same(bytes(buf), bytes(model[off:off + 64 * K]), f"f at {off}")
        os.close(fd)
    concurrent_io(a.mnt / "f", model)
    st = status(a.mnt)
    assert int(st["fuse.ring_reads"]) > 0, st          # hits read on a queue's ring
    assert int(st["fuse.ring_pooled"]) > 0, st         # the namespace went to the pool
    assert int(st["fuse.ring_requests"]) > int(st["fuse.ring_pooled"])
    assert cst(a.mnt)["read_hits"] > 0
    r = tierctl("status", a.mnt)
    assert r.returncode == 0, r.stderr
    assert f"requests: io_uring, {possible_cpus()} queues" in r.stdout, r.stdout
    flush(a.mnt)
    assert m.stop() == 0
    said = [l for l in m.log().splitlines() if "requests on io_uring" in l]
    assert len(said) == 1 and f"{possible_cpus()} queues" in said[0], said
    # what the queues wrote is on the members: an uncached mount on /dev/fuse reads it
    module_uring(False)
    u = a.mount(["fuse_uring=auto"])
    assert status(a.mnt)["fuse.transport"] == "dev_fuse"
    same((a.mnt / "f").read_bytes(), bytes(model), "f after the remount")
    u.stop()


def test_an_uncached_array_on_the_queues_hands_its_io_to_the_pool(make_array, module_uring):
    module_uring(True)
    a = make_array("raid0", 4, "64K")
    a.mount(["fuse_uring=on"])
    st = status(a.mnt)
    assert st["fuse.transport"] == "io_uring" and st["fuse.uring"] == "on", st
    model = odirect_file(a.mnt / "f", 4 * M)
    p0 = int(status(a.mnt)["pool.jobs"])
    concurrent_io(a.mnt / "f", model, ops=800)
    st = status(a.mnt)
    # every read and write of the 8 x 800 waited for the members on the pool
    assert int(st["pool.jobs"]) - p0 >= 8 * 800, st
    assert int(st["fuse.ring_reads"]) == 0, st
    buffered = os.urandom(300 * K)
    (a.mnt / "g").write_bytes(buffered)
    same((a.mnt / "g").read_bytes(), buffered, "g")
    namespace_round(a.mnt)


def test_a_burst_of_hits_is_read_on_the_ring(make_array, tmp_path, module_uring):
    """4K random O_DIRECT reads at QD 32 (fio on io_uring, which submits
    the reads it reaps in one call) of a file the tier holds whole: a
    queue's thread reads a hit in place only when no other request of its
    queue is delivered (transport.c invariant 8).  Before: the kernel's
    deliveries waited as task work until the thread entered its ring, so
    the first request of every burst looked alone and was read in place
    while the rest waited behind it: 2.9-3.0% of the hits in 3 runs on the
    code before, 0.01-0.1% after (also with both CPUs kept busy)."""
    module_uring(True)
    a = make_array("raid5", 3, "64K")
    a.mount(["fuse_uring=on", *copts(tmp_path / "c", size="64M", promote=1)])
    model = odirect_file(a.mnt / "f", 16 * M)
    fd = os.open(str(a.mnt / "f"), os.O_RDONLY | os.O_DIRECT)
    buf = aligned(64 * K)
    offs = list(range(0, 16 * M, 64 * K))
    random.Random(1).shuffle(offs)      # in order, a stream would bypass the tier

    def read_pass():                    # a miss promotes its extent, in the background
        for off in offs:
            assert os.preadv(fd, [buf], off) == 64 * K
            same(bytes(buf), bytes(model[off:off + 64 * K]), f"f at {off}")
        s = cst(a.mnt)
        return s if s["cached_extents"] == 16 * M // s["extent"] else None
    before = wait_until(read_pass, "the whole file in the tier")
    os.close(fd)
    assert before["cached_extents"] == 16 * M // before["extent"], before
    r = subprocess.run(["fio", "--name=r", f"--filename={a.mnt / 'f'}", "--rw=randread",
                        "--bs=4k", "--direct=1", "--ioengine=io_uring", "--iodepth=32",
                        "--runtime=3", "--time_based", "--size=16M", "--output-format=json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    after = cst(a.mnt)
    hits = after["read_hits"] - before["read_hits"]
    ring = after["ring_hits"] - before["ring_hits"]
    assert after["read_misses"] == before["read_misses"], (before, after)
    assert hits > 1000, (before, after)
    assert hits - ring <= hits // 100, f"{hits - ring} of {hits} hits read in place"


def test_write_back_writes_on_the_queues_never_wait_for_the_flusher(make_array, tmp_path,
                                                                    module_uring):
    """4K random O_DIRECT writes at QD 32 (fio, libaio) into a file the tier
    holds, while the flusher destages all the time (cache_dirty_low=0): a
    queue's thread never waits for a slot (write.c invariant 8), since the
    flusher may hold one while it waits for a slot whose SSD write that
    queue's ring has in flight.  Before: the two waited for each other and
    fio hung within seconds.  Then overlapping writes from 8 threads,
    checked byte for byte."""
    module_uring(True)
    a = make_array("raid5", 3, "64K")
    a.mount(["fuse_uring=on", *copts(tmp_path / "c", size="64M", extent="64K", dirty_low=0,
                                      promote=1)])
    odirect_file(a.mnt / "f", 16 * M)
    try:
        r = subprocess.run(["fio", "--name=w", f"--filename={a.mnt / 'f'}", "--rw=randwrite",
                            "--bs=4k", "--direct=1", "--ioengine=libaio", "--iodepth=32",
                            "--runtime=6", "--time_based", "--size=16M",
                            "--output-format=json"], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("fio hung: a queue's thread and the flusher wait for each other")
    assert r.returncode == 0, r.stderr
    st = status(a.mnt)
    assert int(st["fuse.ring_writes"]) > 100, st
    model = bytearray((a.mnt / "f").read_bytes())
    concurrent_io(a.mnt / "f", model)
    flush(a.mnt)
    same((a.mnt / "f").read_bytes(), bytes(model), "f")


@pytest.mark.parametrize("transport", ["on", "off"])
def test_o_direct_writes_of_one_file_run_in_parallel(make_array, module_uring, transport):
    """An O_DIRECT open is answered with FOPEN_PARALLEL_DIRECT_WRITES
    (transport.c invariant 6), on either transport: four threads' direct
    writes into one file, each held 400 ms at the members
    (delay=write:400), take about 400 ms together, not 1.6 s (before: the
    kernel sent them one at a time).  A buffered open is not given it; the
    bytes are checked."""
    module_uring(True)
    a = make_array("raid1", 2, "64K")
    a.mount([f"fuse_uring={transport}"])
    model = odirect_file(a.mnt / "f", 1 * M)
    (a.mnt / "g").write_bytes(b"b" * 8192)
    before = int(status(a.mnt)["fuse.parallel_write_opens"])
    m = a.mounts[-1]
    m.stop()
    m.env = {"TIERFS_FAULT": "delay=write:400"}
    m.start()
    fds = [os.open(str(a.mnt / "f"), os.O_RDWR | os.O_DIRECT) for _ in range(4)]
    with open(a.mnt / "g", "r+b") as g:
        g.write(b"c")
    assert int(status(a.mnt)["fuse.parallel_write_opens"]) == 4, status(a.mnt)
    bufs = []
    for i in range(4):
        b = aligned(4 * K)
        b[:] = bytes([65 + i]) * (4 * K)
        bufs.append(b)
        model[i * 64 * K:i * 64 * K + 4 * K] = bytes(b)
    start = threading.Barrier(4)
    took = []

    def one(i):
        start.wait()
        t0 = time.monotonic()
        assert os.pwritev(fds[i], [bufs[i]], i * 64 * K) == 4 * K
        took.append(time.monotonic() - t0)
    t0 = time.monotonic()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    total = time.monotonic() - t0
    for fd in fds:
        os.close(fd)
    assert len(took) == 4
    # serialised they take 4 x 400 ms at least; together one delay, with
    # room for a loaded machine
    assert total < 1.2, f"the 4 writes took {total:.2f} s: sent one at a time"
    assert before == 1            # odirect_file's open; g was buffered
    m.stop()
    m.env = None
    m.start()
    same((a.mnt / "f").read_bytes(), bytes(model), "f")


def test_auto_stays_on_dev_fuse_when_the_module_refuses(make_array, module_uring):
    module_uring(False)
    a = make_array("raid1", 2, "64K")
    a.mount(["fuse_uring=auto"])    # the default, named against TIERFS_FUSE_URING
    st = status(a.mnt)
    assert st["fuse.transport"] == "dev_fuse", st
    assert "enable_uring is N" in st["fuse.uring_note"], st
    namespace_round(a.mnt)
    assert int(st["fuse.ring_requests"]) == 0
    r = tierctl("status", a.mnt)
    assert "requests: /dev/fuse (fuse_uring=auto: the fuse module does not allow" in r.stdout


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_queues_the_kernel_refuses_after_the_check_are_said_in_one_line(make_array, tmp_path,
                                                                       module_uring, mode):
    """The fuse module stops allowing io_uring after the daemon read its
    enable_uring and before the kernel saw the INIT answer asking for it
    (uring_init_delay holds the answer back; enable_uring is switched off
    meanwhile): the kernel refuses every entry of every queue, and the
    requests stay on /dev/fuse.  That is said in one line however many
    queues and entries were refused (transport.c invariant 9): a warning
    under auto, whose fallback this is, an error under fuse_uring=on, which
    does not get what it asked for.  Before, every refused entry logged an
    error: 64 lines per queue."""
    module_uring(True)
    a = make_array("raid1", 2, "64K")
    m = Mount(a.members, a.mnt, copts(tmp_path / "c") + [f"fuse_uring={mode}"],
              env={"TIERFS_FAULT": "uring_init_delay=1500"}, expect_errors=mode == "on")
    a.mounts.append(m)
    box = {}

    def start():                # returns once the INIT is answered (its stat waits)
        try:
            m.start()
        except BaseException as e:      # noqa: B902 - handed to the test
            box["e"] = e
    t = threading.Thread(target=start)
    t.start()
    try:
        wait_until(lambda: m.log_path and "(uring_init_delay)" in m.log(),
                   "the INIT answer held back", timeout=20)
        module_uring(False)
    finally:
        t.join(30)
    assert not t.is_alive() and "e" not in box, box

    def refused():
        st = status(a.mnt)
        return st if "refused" in st["fuse.uring_note"] else None
    st = wait_until(refused, "the refusal in the status")
    assert st["fuse.transport"] == "dev_fuse" and st["fuse.uring"] == mode, st
    namespace_round(a.mnt)
    data = os.urandom(256 * K)
    (a.mnt / "x").write_bytes(data)
    same((a.mnt / "x").read_bytes(), data, "x on /dev/fuse")
    assert int(status(a.mnt)["fuse.ring_requests"]) == 0
    m.stop()
    said = [l for l in m.log().splitlines() if "requests stay on /dev/fuse" in l]
    assert len(said) == 1, f"{len(said)} lines:\n" + "\n".join(said[:5])
    level = "warning" if mode == "auto" else "error"
    assert f": {level}: " in said[0] and "refused" in said[0], said[0]
    assert "enable_uring is N" in said[0], said[0]
    # nor does it say the requests ride io_uring: the INIT answer only
    # asked for it (invariant 9); it did, before the refusal
    assert "requests on io_uring" not in m.log(), m.log()


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_queues_the_daemon_cannot_make_are_said_in_one_line(make_array, tmp_path, module_uring,
                                                            mode):
    """The daemon's own set-up of the queues fails (uring_queue_fail=ring:
    every queue's io_uring_queue_init says ENOMEM): the INIT answer does not
    ask for io_uring, the mount works on /dev/fuse, and that is said in one
    line naming the queue, the step and the reason (transport.c invariant
    10): a warning under auto, whose fallback that is, an error under
    fuse_uring=on.  Before, it was an error under auto too."""
    module_uring(True)
    a = make_array("raid1", 2, "64K")
    m = a.mount(copts(tmp_path / "c") + [f"fuse_uring={mode}"],
                env={"TIERFS_FAULT": "uring_queue_fail=ring"}, expect_errors=mode == "on")
    st = status(a.mnt)
    assert st["fuse.transport"] == "dev_fuse" and st["fuse.uring"] == mode, st
    assert "could not be made" in st["fuse.uring_note"], st
    namespace_round(a.mnt)
    data = os.urandom(256 * K)
    (a.mnt / "x").write_bytes(data)
    same((a.mnt / "x").read_bytes(), data, "x on /dev/fuse")
    assert int(status(a.mnt)["fuse.ring_requests"]) == 0
    assert m.stop() == 0
    log = m.log().splitlines()
    said = [l for l in log if "requests stay on /dev/fuse" in l]
    assert len(said) == 1, f"{len(said)} lines:\n" + "\n".join(said[:5])
    level = "warning" if mode == "auto" else "error"
    assert f": {level}: " in said[0], said[0]
    assert "io_uring_queue_init: Cannot allocate memory" in said[0], said[0]
    if mode == "auto":
        assert not [l for l in log if ": error:" in l], "\n".join(log)


@pytest.mark.parametrize("step,why", [("eventfd", "eventfd: Cannot allocate memory"),
                                      ("mmap", "mmap: Cannot allocate memory"),
                                      ("thread", "pthread_create: Resource temporarily")])
def test_queues_the_daemon_cannot_make_are_undone_whole(make_array, tmp_path, module_uring,
                                                        step, why):
    """Each step of the queues' set-up failing on queue 0 leaves the daemon
    on /dev/fuse with nothing of the queues left, and nothing else undone
    (transport.c invariant 10).  The queues not reached had an eventfd of
    0 (calloc's), and the clean-up closed fd 0: the daemon's stdin, whose
    number the next open took (a member's root here), so a later close of
    that stdin would have closed a member.  A queue's thread that failed
    to start was counted as started, and the set-up waited for its report
    for ever (the mount hung)."""
    module_uring(True)
    a = make_array("raid1", 2, "64K")
    m = a.mount(copts(tmp_path / "c") + ["fuse_uring=auto"],
                env={"TIERFS_FAULT": f"uring_queue_fail={step}"})
    st = status(a.mnt)
    assert st["fuse.transport"] == "dev_fuse" and why in st["fuse.uring_note"], st
    assert os.readlink(f"/proc/{m.proc.pid}/fd/0") == os.readlink("/proc/self/fd/0")
    data = os.urandom(256 * K)
    (a.mnt / "x").write_bytes(data)
    same((a.mnt / "x").read_bytes(), data, "x on /dev/fuse")
    assert m.stop() == 0


def test_auto_keeps_an_uncached_array_on_dev_fuse(make_array, module_uring):
    """auto asks for io_uring only with an SSD tier (transport.c invariant
    7): an uncached array's requests all wait for the members on the pool,
    which costs more than /dev/fuse."""
    module_uring(True)
    a = make_array("raid0", 2, "64K")
    a.mount(["fuse_uring=auto"])
    st = status(a.mnt)
    assert st["fuse.transport"] == "dev_fuse", st
    assert st["fuse.uring_note"].startswith("auto: no SSD tier"), st
    assert "pool.jobs" not in st, st      # no pool without a tier on /dev/fuse
    (a.mnt / "x").write_bytes(b"abc")
    assert (a.mnt / "x").read_bytes() == b"abc"


def test_off_keeps_dev_fuse_although_the_module_allows(make_array, module_uring):
    module_uring(True)
    a = make_array("raid1", 2, "64K")
    a.mount(["fuse_uring=off"])
    st = status(a.mnt)
    assert st["fuse.transport"] == "dev_fuse" and st["fuse.uring_note"] == "fuse_uring=off"
    (a.mnt / "x").write_bytes(b"abc")
    assert (a.mnt / "x").read_bytes() == b"abc"
    assert int(status(a.mnt)["fuse.ring_requests"]) == 0


def test_on_refuses_to_mount_when_the_module_refuses(make_array, module_uring):
    module_uring(False)
    a = make_array("raid1", 2, "64K")
    a.mnt.mkdir()
    r = try_mount(a.members, a.mnt, opts=["fuse_uring=on"])
    line = assert_refused(r, "tierfs", "fuse_uring=on", "enable_uring is N", PARAM)
    assert r.returncode == 1, line      # the machine refuses: not a wrong command line
    assert not mounted(a.mnt)


@pytest.mark.parametrize("value", ["yes", "", "ON", "uring"])
def test_a_bad_fuse_uring_value_is_refused(make_array, value):
    a = make_array("raid1", 2, "64K")
    a.mnt.mkdir()
    r = try_mount(a.members, a.mnt, opts=[f"fuse_uring={value}"])
    assert r.returncode == 2            # a wrong command line (README: exit status)
    assert_refused(r, "tierfs", f"fuse_uring={value}: not off, auto or on")


def test_sigterm_with_requests_on_the_queues_ends_cleanly(make_array, tmp_path, module_uring):
    """SIGTERM while readers are in flight on the rings: the daemon answers
    what it took and exits by itself; the data survives."""
    module_uring(True)
    a = make_array("raid5", 3, "64K")
    m = a.mount(copts(tmp_path / "c", size="64M", promote=1))
    model = odirect_file(a.mnt / "f", 4 * M)
    errors = []
    stop = threading.Event()

    def load(i):
        rnd = random.Random(i)
        try:
            fd = os.open(str(a.mnt / "f"), os.O_RDWR | os.O_DIRECT)
        except OSError:
            return
        buf = aligned(4 * K)
        try:
            while not stop.is_set():
                off = rnd.randrange(1024) * 4 * K
                os.preadv(fd, [buf], off)
        except OSError as e:
            if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED, errno.ENODEV):
                errors.append(e)
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
    ts = [threading.Thread(target=load, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    threading.Event().wait(0.5)
    m.proc.send_signal(signal.SIGTERM)
    rc = m.proc.wait(timeout=30)
    stop.set()
    for t in ts:
        t.join(timeout=30)
    m.proc = None
    # it ended by itself (not killed); 1, as on /dev/fuse: libfuse 3.14's
    # loop returns the signal's number after a SIGTERM
    assert rc == 1, m.log()
    assert not errors, errors
    subprocess.run(["fusermount3", "-u", "-z", str(a.mnt)], capture_output=True)
    a.mount(copts(tmp_path / "c", size="64M", promote=1))
    same((a.mnt / "f").read_bytes(), bytes(model), "f after SIGTERM")


def test_sigkill_on_the_queues_keeps_what_was_fsynced(make_array, tmp_path, module_uring):
    module_uring(True)
    a = make_array("raid5", 3, "64K")
    m = a.mount(copts(tmp_path / "c", size="64M"))
    model = odirect_file(a.mnt / "f", 2 * M)
    assert status(a.mnt)["fuse.transport"] == "io_uring"
    m.kill()
    assert not mounted(a.mnt)
    a.mount(copts(tmp_path / "c", size="64M"))
    assert status(a.mnt)["fuse.transport"] == "io_uring"
    same((a.mnt / "f").read_bytes(), bytes(model), "f after SIGKILL")
