#!/bin/bash
# A/B of the hit path on one build: cache hits, 4K random O_DIRECT reads at
# QD 1 (psync) and QD 32 (libaio), with hit_ring=1 (the I/O thread reads and answers) and hit_ring=0
# (the FUSE worker does), alternating, 3 rounds of 8 s.  Prints IOPS and the
# daemon's CPU per request (/proc/PID/stat, all threads).
# usage: contrib/bench/hit_ring_ab.sh BUILD_DIR [TMPDIR]      (run by hand, as root)
set -u
B=${1:?usage: $0 BUILD_DIR [TMPDIR]}
D=$(mktemp -d "${2:-${TMPDIR:-/tmp}}/hit-ring-ab.XXXX")
PID=
cleanup() {
    if mountpoint -q "$D/mnt"; then
        fusermount3 -u "$D/mnt" 2>/dev/null || fusermount3 -u -z "$D/mnt"
    fi
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/m0" "$D/m1" "$D/m2" "$D/mnt" "$D/ssd"
"$B/mkfs.tierfs" --level raid5 "$D/m0" "$D/m1" "$D/m2" >/dev/null

mnt() {
    "$B/tierfs" -f -o "cache=$D/ssd,cache_size=512M,cache_promote=1,hit_ring=$1" \
        "$D/m0:$D/m1:$D/m2" "$D/mnt" 2>>"$D/log" &
    PID=$!
    for _ in $(seq 50); do mountpoint -q "$D/mnt" && return; sleep 0.1; done
    echo "mount failed:"; cat "$D/log"; exit 1
}
umnt() { fusermount3 -u "$D/mnt"; wait "$PID"; PID=; }

mnt 1
dd if=/dev/urandom of="$D/mnt/f" bs=1M count=256 oflag=direct status=none
for _ in 1 2 3; do      # cache_promote=1: every extent read misses once, then is promoted
    fio --name=w --filename="$D/mnt/f" --rw=randread --bs=64k --direct=1 --ioengine=psync \
        --size=256M --io_size=256M --norandommap --output=/dev/null >/dev/null
    sleep 1
done
umnt
for round in 1 2 3; do
    for r in 1 0; do
        mnt "$r"
        for qd in 1 32; do
            eng="--ioengine=libaio --iodepth=$qd"
            [ "$qd" = 1 ] && eng="--ioengine=psync"
            c0=$(awk '{print $14+$15}' "/proc/$PID/stat")
            fio --name=m --filename="$D/mnt/f" --rw=randread --bs=4k --direct=1 $eng \
                --runtime=8 --time_based --output-format=json >"$D/fio.json"
            c1=$(awk '{print $14+$15}' "/proc/$PID/stat")
            python3 -c "import json; j = json.load(open('$D/fio.json'))['jobs'][0]['read']; \
n = j['total_ios']; print('round $round hit_ring=$r qd $qd iops %.0f cpu us/req %.1f' \
% (j['iops'], ($c1 - $c0) * 1e6 / $(getconf CLK_TCK) / n))"
        done
        getfattr --absolute-names -n user.tierfs.status --only-values "$D/mnt" | \
            grep -E "cache.(read_hits|read_misses|ring_hits)=" | tr '\n' ' '
        echo
        umnt
    done
done
grep -iE "error|warning" "$D/log" && exit 1
exit 0
