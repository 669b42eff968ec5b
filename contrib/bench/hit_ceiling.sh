#!/bin/bash
# hit_ceiling.sh - what bounds a cache hit: the transport and the daemon,
# or the SSD reads under them.  4 KiB random O_DIRECT reads of a 256 MiB
# file, QD 1 (psync) and QD 32 (io_uring), ROUNDS (3) interleaved rounds
# of 6 s on:
#   raw    the file in a plain directory of the scratch disk
#   data   the tier's data file of "disk" read by fio directly, in the
#          range its slots hold (slots are handed out from the start; the
#          free ones are unwritten extents, whose reads return zeros
#          without touching the disk): the same reads the daemon makes,
#          without FUSE
#   disk   RAID5 x3 with a 512 MiB tier in a directory of the same disk
#   tmpfs  the same array with its tier on tmpfs: the SSD read costs a
#          copy, so what is left is the transport and the daemon
# Both arrays run on the FUSE io_uring queues (fuse_uring=on; the script
# sets the fuse module's enable_uring to Y and back to what it was).
# Prints IOPS, at QD 32 the reads in flight at the scratch disk's block
# device (sampled every 10 ms) and, for the arrays, the daemon's CPU per
# request.
# usage: contrib/bench/hit_ceiling.sh BUILD_DIR [TMPDIR]   (run by hand, as root)
set -u
B=${1:?usage: $0 BUILD_DIR [TMPDIR]}
D=$(mktemp -d "${2:-${TMPDIR:-/tmp}}/hit-ceiling.XXXX")
. "$(dirname "$0")/array_lib.sh"
P=/sys/module/fuse/parameters/enable_uring
was=$(cat "$P")
array_cleanup_hook() {    # run by array_lib.sh's EXIT trap, before $D goes
    mountpoint -q "$D/tmpfs/ssd" && umount "$D/tmpfs/ssd"
    echo "$was" >"$P"
}
echo Y >"$P"

opts() { echo "cache=$D/$1/ssd,cache_size=512M,cache_promote=1,fuse_uring=on"; }
mkdir -p "$D/raw"
dd if=/dev/urandom of="$D/raw/f" bs=1M count=256 status=none
for v in disk tmpfs; do
    array_make "$B" $v
    mkdir -m 700 "$D/$v/ssd"
    [ $v = tmpfs ] && mount -t tmpfs -o size=600M,mode=700 tmpfs "$D/$v/ssd"
    array_mount "$B" $v "$(opts $v)"
    dd if="$D/raw/f" of="$MNT/f" bs=1M oflag=direct status=none
    array_warm "$MNT/f"
    array_umount
done

DEV=$(basename "$(findmnt -no SOURCE --target "$D")")
inflight() {    # PID: the mean of the device's reads in flight while PID runs
    local n=0 sum=0 r w
    while kill -0 "$1" 2>/dev/null; do
        read -r r w <"/sys/class/block/$DEV/inflight"
        sum=$((sum + r)) n=$((n + 1))
        sleep 0.01
    done
    python3 -c "print('%.1f' % ($sum / max($n, 1)))"
}
iops() {    # FILE ENGINE DEPTH
    fio --name=m --filename="$1" --size=256M --bs=4k --direct=1 --rw=randread \
        --ioengine="$2" --iodepth="$3" --runtime=6 --time_based --output-format=json |
        python3 -c "import json, sys; print('%.0f' % (json.load(sys.stdin)['jobs'][0]['read']['total_ios'] / 6))"
}
for round in $(seq "${ROUNDS:-3}"); do
    line="round $round"
    for v in raw data disk tmpfs; do
        case $v in
        raw) f=$D/raw/f ;;
        data) f=$D/disk/ssd/data ;;
        *) array_mount "$B" $v "$(opts $v)"; f=$MNT/f ;;
        esac
        [ -n "$PID" ] && c0=$(daemon_cpu)
        a=$(iops "$f" psync 1)
        iops "$f" io_uring 32 >"$D/qd32" &
        fl=$(inflight $!)
        wait $!
        b=$(cat "$D/qd32")
        line="$line | $v qd1 $a qd32 $b (in flight $fl)"
        if [ -n "$PID" ]; then
            c1=$(daemon_cpu)
            line="$line cpu us/req $(python3 -c "print('%.1f' % (($c1 - $c0) * 1e6 / $(getconf CLK_TCK) / (($a + $b) * 6)))")"
            array_umount
        fi
    done
    echo "$line"
done
grep -iE "error|warning" "$D/log" && exit 1
exit 0
