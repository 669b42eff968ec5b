#!/bin/bash
# A/B of the hit path: cache hits, 4K random O_DIRECT reads at QD 1 (psync)
# and QD 32 (libaio) on a RAID5 x3 with a 512 MiB tier holding the whole
# 256 MiB file, alternating between variants, ROUNDS (3) rounds of 8 s.  Prints IOPS
# and the daemon's CPU per request (/proc/PID/stat, all threads).
# usage: contrib/bench/hit_ring_ab.sh BUILD_DIR [TMPDIR]      (run by hand, as root)
#   compares hit_ring=1 (the I/O thread reads and answers) with hit_ring=0
#   (the FUSE worker does) on one build.  Other variants, e.g. two builds
#   (a refactoring's before and after), each LABEL:BUILD:HIT_RING:
#   VARIANTS="old:/path/A/build:1 new:/path/B/build:1" contrib/bench/hit_ring_ab.sh -
# Each variant has its own array and tier (made and warmed by its build, so
# builds of different on-disk versions compare too).  The variant "raw"
# (no build) is the same file in a plain directory of the same disk, read
# by fio directly: the ceiling, e.g.
#   VARIANTS="raw old:/path/A/build:fuse_uring=on new:build:fuse_uring=on"
# (the io_uring queues need the fuse module's enable_uring set to Y).
#   TRACE="LABEL..." runs those variants with the trace recorder on (tierctl
#   trace, issue 16), e.g. VARIANTS="off:build:1 on:build:1" TRACE=on.
#   JOBS="rr1 rr32" (default): the hits at QD 1 and 32; also
#   rw32 (4K random O_DIRECT write-back writes, QD 32), wsync1 (4K
#   random writes, each followed by fdatasync, QD 1), wsync4 (the same
#   from 4 psync threads: concurrent fsyncs, the tier's group commit) and
#   rw8p (4K random O_DIRECT writes from 8 psync threads), into the same
#   file; reopen
#   (open, a buffered 64 KiB read at a random offset, close, in a loop: the
#   kernel's page cache across opens, FOPEN_KEEP_CACHE) and bw1 (4K random
#   buffered writes, psync).
set -u
B=${1:?usage: $0 BUILD_DIR [TMPDIR]   (BUILD_DIR - with VARIANTS)}
VARIANTS=${VARIANTS:-"hit_ring=1:$B:1 hit_ring=0:$B:0"}
D=$(mktemp -d "${2:-${TMPDIR:-/tmp}}/hit-ring-ab.XXXX")
. "$(dirname "$0")/array_lib.sh"

mnt() {    # LABEL BUILD HIT_RING|OPTIONS
    local o=$3
    case $o in [01]) o="hit_ring=$o" ;; esac
    array_mount "$2" "$1" "cache=$D/$1/ssd,cache_size=512M,cache_promote=1,$o"
}
umnt() { array_umount; }

for v in $VARIANTS; do
    IFS=: read -r label vb r <<<"$v"
    if [ "$label" = raw ]; then
        mkdir -p "$D/raw"
        dd if=/dev/urandom of="$D/raw/f" bs=1M count=256 status=none
        continue
    fi
    array_make "$vb" "$label"
    mkdir -m 700 "$D/$label/ssd"
    mnt "$label" "$vb" "$r"
    dd if=/dev/urandom of="$MNT/f" bs=1M count=256 oflag=direct status=none
    array_warm "$MNT/f"
    umnt
done
for round in $(seq "${ROUNDS:-3}"); do
    for v in $VARIANTS; do
        IFS=: read -r label vb r <<<"$v"
        f=$D/raw/f
        [ "$label" = raw ] || { mnt "$label" "$vb" "$r"; f=$MNT/f; }
        case " ${TRACE:-} " in *" $label "*)    # the trace recorder on for it
            "$vb/tierctl" trace "$MNT" start "$D/trace.$label.$round" >/dev/null || exit 1 ;;
        esac
        for job in ${JOBS:-rr1 rr32}; do
            case $job in
            rr1) a="--rw=randread --ioengine=psync" ;;
            rr32) a="--rw=randread --ioengine=libaio --iodepth=32" ;;
            rw32) a="--rw=randwrite --ioengine=libaio --iodepth=32" ;;
            wsync1) a="--rw=randwrite --ioengine=psync --fdatasync=1" ;;
            wsync4) a="--rw=randwrite --ioengine=psync --fdatasync=1 --numjobs=4 --group_reporting" ;;
            rw8p) a="--rw=randwrite --ioengine=psync --numjobs=8 --group_reporting" ;;
            reopen) a= ;;
            bw1) a="--rw=randwrite --ioengine=psync --direct=0" ;;
            *) echo "unknown job $job"; exit 1 ;;
            esac
            c0=0 c1=0
            [ -n "$PID" ] && c0=$(daemon_cpu)
            if [ "$job" = reopen ]; then
                python3 - "$f" "$D/fio.json" <<'PY'
import json, os, random, sys, time
n, end, r = 0, time.time() + 8, random.Random(1)
while time.time() < end:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    os.pread(fd, 65536, r.randrange(4096) * 65536)
    os.close(fd)
    n += 1
json.dump({"jobs": [{"read": {"total_ios": n}, "write": {"total_ios": 0}}]}, open(sys.argv[2], "w"))
PY
            else
                fio --name=m --filename="$f" --size=256M --bs=4k --direct=1 $a \
                    --runtime=8 --time_based --output-format=json >"$D/fio.json"
            fi
            [ -n "$PID" ] && c1=$(daemon_cpu)
            python3 -c "import json; j = json.load(open('$D/fio.json'))['jobs'][0]; \
n = j['read']['total_ios'] + j['write']['total_ios']; \
print('round $round $label $job iops %.0f cpu us/req %.1f' \
% (n / 8.0, ($c1 - $c0) * 1e6 / $(getconf CLK_TCK) / n))"
        done
        [ "$label" = raw ] && continue
        getfattr --absolute-names -n user.tierfs.status --only-values "$MNT" | \
            grep -E "cache.(read_hits|read_misses|ring_hits)=" | tr '\n' ' '
        [ -f "$D/trace.$label.$round" ] && "$vb/tierctl" trace "$MNT" stop | tr '\n' ' ' &&
            printf 'trace bytes %s' "$(stat -c %s "$D/trace.$label.$round")"
        echo
        umnt
    done
done
grep -iE "error|warning" "$D/log" && exit 1
exit 0
