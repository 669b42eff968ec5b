#!/bin/bash
# profile.sh - where the daemon's time goes, per request kind (issue 14).
#
#     contrib/bench/profile.sh BUILD_DIR OUT_DIR [TMPDIR]     (run by hand, as root)
#
# On a RAID5 x3 with a 512 MiB write-back tier, and on the same array
# uncached, for each request kind:
#   hit       4K random O_DIRECT reads, QD 32, of a 256 MiB file the tier holds
#   raidread  the same reads on the uncached array
#   wbwrite   4K random O_DIRECT writes, QD 32, into that file (write-back)
#   raidwrite the same writes uncached
#   fsync     4K random writes, each followed by fdatasync, QD 1 (write-back)
#   create    4 KiB files created, written and closed, 3,000, write-back
# it prints one line: requests per second and daemon CPU per request (all
# threads, /proc/PID/stat) from a plain run, then system calls per request
# from a second run under perf trace -s, and profiles a third under perf
# record -g (both slow the daemon: their rates are not printed); writes
# OUT_DIR/KIND.perf.txt (the top functions by self time) and
# OUT_DIR/KIND.syscalls.txt.  The uncached array is a second one.
set -u
B=${1:?usage: $0 BUILD_DIR OUT_DIR [TMPDIR]}
OUT=${2:?usage: $0 BUILD_DIR OUT_DIR [TMPDIR]}
SECS=${SECS:-8}
D=$(mktemp -d "${3:-${TMPDIR:-/tmp}}/profile.XXXX")
mkdir -p "$OUT"
. "$(dirname "$0")/array_lib.sh"
for a in c u; do
    array_make "$B" "$a"
done
mkdir -m 700 "$D/ssd"
mnt() { array_mount "$B" "$@"; }    # ARRAY (c, u) [extra -o options]
umnt() { array_umount; }
cpu() { daemon_cpu; }

# measure KIND CMD...: runs CMD (which prints its request count on its last
# line) under perf record and perf trace, and prints the line
measure() {
    local kind=$1; shift
    local c0 c1 n t0 t1 sc
    c0=$(cpu); t0=$(date +%s.%N)
    n=$("$@" | tail -1)
    c1=$(cpu); t1=$(date +%s.%N)
    # the two tools apart: perf trace's tracepoints under perf record
    # would be half of the profile
    perf trace -s -p "$PID" -o "$D/trace.txt" 2>/dev/null &
    local tp=$! m
    sleep 0.5
    m=$("$@" | tail -1)
    kill -INT "$tp"; wait "$tp" 2>/dev/null
    perf record -g -p "$PID" -o "$D/perf.data" 2>/dev/null >/dev/null &
    local rp=$!
    sleep 0.5
    "$@" >/dev/null
    kill -INT "$rp"; wait "$rp" 2>/dev/null
    perf report -i "$D/perf.data" --no-children -g none --sort dso,sym --stdio 2>/dev/null | \
        grep -E "^ +[0-9]" | head -40 >"$OUT/$kind.perf.txt"
    cp "$D/trace.txt" "$OUT/$kind.syscalls.txt"
    sc=$(awk '/^ +[a-z_0-9]+ +[0-9]+ /{s += $2} END {print s + 0}' "$D/trace.txt")
    python3 -c "n = $n; print('%-9s %9.0f req/s  cpu %6.1f us/req  syscalls %5.2f /req' % \
('$kind', n / ($t1 - $t0), ($c1 - $c0) * 1e6 / $(getconf CLK_TCK) / n, $sc / $m))"
}

fio_n() {    # fio args: prints the number of requests done
    fio --name=p --filename="$MNT/f" --direct=1 --runtime="$SECS" --time_based \
        --output-format=json "$@" >"$D/fio.json"
    python3 -c "import json; j = json.load(open('$D/fio.json'))['jobs'][0]; \
print(j['read']['total_ios'] + j['write']['total_ios'])"
}

creates() {    # 3,000 new 4 KiB files, each opened O_EXCL, written, closed
    local dir
    dir=$(mktemp -d "$MNT/small.XXXX")
    python3 -c "
import os
b = b'x' * 4096
for i in range(3000):
    fd = os.open('$dir/%d' % i, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b)
    os.close(fd)
print(3000)"
}

mnt c "cache=$D/ssd,cache_size=512M,cache_promote=1"
dd if=/dev/urandom of="$MNT/f" bs=1M count=256 oflag=direct status=none
for _ in 1 2 3; do
    fio --name=w --filename="$MNT/f" --rw=randread --bs=64k --direct=1 --ioengine=psync \
        --size=256M --io_size=256M --norandommap --output=/dev/null >/dev/null
done
measure hit fio_n --rw=randread --bs=4k --ioengine=libaio --iodepth=32
measure wbwrite fio_n --rw=randwrite --bs=4k --ioengine=libaio --iodepth=32
measure fsync fio_n --rw=randwrite --bs=4k --ioengine=psync --fdatasync=1
measure create creates
umnt
mnt u
dd if=/dev/urandom of="$MNT/f" bs=1M count=256 oflag=direct status=none
measure raidread fio_n --rw=randread --bs=4k --ioengine=libaio --iodepth=32
measure raidwrite fio_n --rw=randwrite --bs=4k --ioengine=libaio --iodepth=32
umnt
grep -iE "error|warning" "$D/log" && exit 1
exit 0
