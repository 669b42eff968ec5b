#!/bin/bash
# flusher_scan.sh - the flusher on a tier of many extents of one file
# (flush.c invariant 19's look at the dirty files): a RAID5 x3 with a
# 4 GiB tier of 4K extents (1M slots), a 2 GiB file read once whole in
# random order (cache_promote=1: each extent promoted at its miss, about
# 350-500K of the 512K cached), then 512 MiB of random 4K writes (132K
# extents dirty, over dirty_low); reports how long `tierctl flush` takes
# to destage them and the daemon's CPU time (user + system) meanwhile,
# with nothing else running on the mount.
#
#   [DIRTY=512M] contrib/bench/flusher_scan.sh BUILD [BUILD...]
#   (one round each, in turn; DIRTY: the random writes' total)
set -e
D=$(mktemp -d /var/tmp/flusher_scan.XXXXXX)
. "$(dirname "$0")/array_lib.sh"
SZ=2G
for B in "$@"; do
    B=$(readlink -f "$B")
    rm -rf "$D/a"
    array_make "$B" a
    array_mount "$B" a "cache=$D/a/ssd,cache_size=4G,cache_extent=4K,cache_promote=1,cache_mode=writeback"
    F=$MNT/db
    fio --name=mk --filename="$F" --rw=write --bs=1M --size=$SZ --ioengine=psync \
        --output=/dev/null >/dev/null
    fio --name=warm --filename="$F" --rw=randread --bs=4k --direct=1 --ioengine=io_uring \
        --iodepth=32 --size=$SZ --output=/dev/null >/dev/null
    fio --name=dirty --filename="$F" --rw=randwrite --bs=4k --direct=1 --ioengine=io_uring \
        --iodepth=32 --size=$SZ --io_size=${DIRTY:-512M} --output=/dev/null >/dev/null
    c=$("$B/tierctl" status "$MNT" --raw | grep -E "^cache\.(cached_extents|dirty_extents)=" |
        tr '\n' ' ')
    t0=$(date +%s.%N)
    u0=$(daemon_cpu)
    "$B/tierctl" flush "$MNT" >/dev/null
    u1=$(daemon_cpu)
    t1=$(date +%s.%N)
    echo "$B: ${c}flush $(echo "$t1 - $t0" | bc | xargs printf %.1f) s," \
         "daemon CPU $(echo "scale=2; ($u1 - $u0) / $(getconf CLK_TCK)" | bc) s," \
         "load $(cut -d' ' -f1 /proc/loadavg)"
    array_umount
done
