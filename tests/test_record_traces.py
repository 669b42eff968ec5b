"""Issue 16: contrib/bench/record_traces.py records its workloads on real
mounts: two cheap ones (maildir, copy-edit) at a tiny scale leave traces
that parse (the header, 32-byte records, reads, writes and syncs of many
files, as many records as it reports) and that cache_sim --trace replays,
with the tier's counters over them beside;
nothing stays mounted, the work directory goes; a bad command line or build
directory is a one-line error."""
import os
import subprocess

from conftest import BUILD, ROOT
from test_attrs import read_trace
from test_trace import SIM

SCRIPT = ROOT / "contrib" / "bench" / "record_traces.py"
PY = "/usr/bin/python3"


def record(*args, timeout=120):
    return subprocess.run([PY, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_recorded_traces_parse_and_replay(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    r = record("--out", out, "--only", "maildir,copy-edit", "--scale", "0.02",
               "--tmpdir", work, "--build", BUILD)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert [l.split(":")[0] for l in lines] == ["maildir", "copy-edit"], r.stdout
    for name, line in zip(("maildir", "copy-edit"), lines):
        path = out / f"{name}.trace"
        recs = read_trace(path)             # magic, version 1, 32-byte records
        assert line.split(": ")[1].startswith(f"{len(recs)} records"), (line, len(recs))
        ops = {chr(rec[4]) for rec in recs}
        assert {"R", "W", "S"} <= ops, (name, ops)
        assert len({rec[1] for rec in recs}) > 10, name       # many files
        assert all(rec[3] > 0 for rec in recs if chr(rec[4]) in "RW"), name
        s = subprocess.run([str(SIM), "--trace", str(path), "--extent", "65536",
                            "--threshold", "1,2", "--sizes", "10"],
                           capture_output=True, text=True, timeout=60)
        assert s.returncode == 0, s.stderr
        rows = [l.split(",") for l in s.stdout.splitlines()[1:]]
        assert {(w[1], w[2]) for w in rows} >= {("lru", "1"), ("lru", "2"), ("belady", "0")}
        assert all(int(w[5]) > 0 for w in rows), s.stdout
        # the tier's status at the end, counted from the trace's start
        st = dict(l.split("=", 1) for l in (out / f"{name}.status").read_text().splitlines())
        reads = sum(1 for rec in recs if chr(rec[4]) == "R")
        assert 0 < int(st["cache.read_req_hits"]) + int(st["cache.read_req_misses"]) <= reads, st
        assert "cache.mrc_x1" in st, st
    # the --stats line of a trace is the one the run printed, bar the time
    st = record("--stats", out / "maildir.trace")
    assert st.returncode == 0 and st.stdout.rsplit(",", 1)[0] == lines[0].rsplit(",", 1)[0]
    with open("/proc/mounts") as f:
        assert not [l for l in f if str(tmp_path) in l]
    assert list(work.iterdir()) == []


def test_bad_arguments_are_one_line_errors(tmp_path):
    r = record("--out", tmp_path, "--only", "maildir,nope")
    assert r.returncode == 2 and "unknown workload nope" in r.stderr, r.stderr
    r = record("--out", tmp_path, "--only", "maildir", "--build", tmp_path)
    assert r.returncode == 1 and r.stderr.strip() == f"record_traces.py: no tierfs in {tmp_path} (--build)"
    r = record("--stats", tmp_path / "none.trace")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
