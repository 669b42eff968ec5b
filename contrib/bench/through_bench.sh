#!/bin/bash
# through_bench.sh - a database-like file written, then read, in write-through:
# two builds side by side, interleaved (A B A B ...), on RAID5 x3 arrays
# (64K chunks) of HDD-modelled members with a tier of CACHE (default 1G) in
# write-through.
#
#   [MODEL=hdd7200] contrib/bench/through_bench.sh BUILD_A BUILD_B [MIB] [ROUNDS] [CACHE]
#
# MODEL= (empty): the members as they are, without the HDD model (what the
# slot's write beside the RAID costs when the members are fast).
# Each run: a fresh array; fio writes a MIB MiB file (default 64) in 16K
# O_DIRECT writes at random offsets, every page once (randrepeat, no
# repeats), QD 8; then reads it the same way, in another random order.
# Prints per run: the writes' and the reads' IOPS, the tier's counters
# (write misses: fresh slots; read hits and misses) and the load average.
# What it shows (docs/CACHE_POLICY.md, "Write-through keeps what it
# writes"): with write.c invariant 12 what write-through writes is read
# back from the SSD; before, every read of it went to the members.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [MIB] [ROUNDS] [CACHE]" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") MIB=${3:-64} ROUNDS=${4:-2} CACHE=${5:-1G}
MODEL=${MODEL-hdd7200}
D=$(mktemp -d /var/tmp/through-bench.XXXXXX)
. "$(dirname "$0")/array_lib.sh"

iops() {	# fio's IOPS of the job it ran (json), rounded
    /usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(round(j[sys.argv[2]]["iops"]))' "$1" "$2"
}
fio_run() {	# fio_run RW SEED OUT
    fio --name=db --filename="$MNT/db" --size="${MIB}M" --bs=16k --direct=1 \
        --ioengine=libaio --iodepth=8 --rw="$1" --randrepeat=0 --randseed="$2" \
        --norandommap=0 --output-format=json --output="$3" >/dev/null
}

echo "$MIB MiB in 16K random O_DIRECT writes, then reads, QD 8; RAID5 x3 64K," \
     "member_model=${MODEL:-none}, cache_size=$CACHE, write-through"
printf '%-3s %-5s %10s %10s %12s %9s %11s %5s\n' run build "write IOPS" "read IOPS" \
    write_misses read_hits read_misses load
one_run() {	# one_run N NAME BUILD
    array_tiered "$3" arr "${MODEL:+member_model=$MODEL,}cache_size=$CACHE,cache_mode=writethrough"
    fio_run randwrite 1 "$D/w.json"
    h0=$(cache_stat read_hits) m0=$(cache_stat read_misses)
    fio_run randread 2 "$D/r.json"
    printf '%-3s %-5s %10s %10s %12s %9s %11s %5s\n' "$1" "$2" \
        "$(iops "$D/w.json" write)" "$(iops "$D/r.json" read)" "$(cache_stat write_misses)" \
        $(($(cache_stat read_hits) - h0)) $(($(cache_stat read_misses) - m0)) \
        "$(cut -d' ' -f1 /proc/loadavg)"
    array_umount
}
ab_runs "$ROUNDS" "$A" "$B" one_run
