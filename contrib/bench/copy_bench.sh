#!/bin/bash
# copy_bench.sh - a copy into the mount, then read back: two builds side by
# side, interleaved (A B A B ...), on RAID5 x3 arrays (64K chunks, rows of
# 128K) of HDD-modelled members with a tier of CACHE (default 1G) in
# write-back.
#
#   contrib/bench/copy_bench.sh BUILD_A BUILD_B [MIB] [ROUNDS] [CACHE]
#
# Each run: a fresh array; a copy of a MIB MiB file (default 512) from the
# scratch directory into the mount (dd, O_DIRECT 1M writes: they reach the
# daemon as full rows), then sync (the copy's time); then the copy read
# back start to end with O_DIRECT 1M reads (the read's time).  Prints per
# run: MB/s of the copy and of the read, the tier's counters (seq_bypass,
# stream_copies, read hits and misses) and the load average.  What it
# shows (docs/CACHE_POLICY.md, "A copy's stream kept clean"): with write.c
# invariant 11 the copy's rows leave clean copies and a read back soon
# after is served from the SSD, at the cost of the slot's write; with a
# tier smaller than the copy, the copies that leave unused stop it.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [MIB] [ROUNDS] [CACHE]" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") MIB=${3:-512} ROUNDS=${4:-2} CACHE=${5:-1G}
D=$(mktemp -d /var/tmp/copy-bench.XXXXXX)
. "$(dirname "$0")/array_lib.sh"

mbps() { awk -v b="$1" -v t0="$2" -v t1="$3" 'BEGIN { printf "%.0f", b / 1048576 / ((t1 - t0) / 1e9) }'; }

head -c $((MIB << 20)) /dev/urandom > "$D/src"
echo "copy of $MIB MiB, RAID5 x3 64K, member_model=hdd7200, cache_size=$CACHE, write-back"
printf '%-3s %-5s %8s %8s %10s %13s %9s %11s %5s\n' run build "copy MB/s" "read MB/s" \
    seq_bypass stream_copies read_hits read_misses load
one_run() {	# one_run N NAME BUILD
    array_tiered "$3" arr "member_model=hdd7200,cache_size=$CACHE"
    t0=$(date +%s%N)
    dd if="$D/src" of="$MNT/copy" bs=1M oflag=direct status=none
    sync
    t1=$(date +%s%N)
    h0=$(cache_stat read_hits) m0=$(cache_stat read_misses)
    dd if="$MNT/copy" of=/dev/null bs=1M iflag=direct status=none
    t2=$(date +%s%N)
    printf '%-3s %-5s %8s %8s %10s %13s %9s %11s %5s\n' "$1" "$2" \
        "$(mbps $((MIB << 20)) "$t0" "$t1")" "$(mbps $((MIB << 20)) "$t1" "$t2")" \
        "$(cache_stat seq_bypass)" "$(cache_stat stream_copies)" \
        $(($(cache_stat read_hits) - h0)) $(($(cache_stat read_misses) - m0)) \
        "$(cut -d' ' -f1 /proc/loadavg)"
    array_umount
}
ab_runs "$ROUNDS" "$A" "$B" one_run
