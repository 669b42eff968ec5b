#!/bin/bash
# smallfiles_ab.sh - interleaved A/B of small-file creates (stat, read,
# unlink too) on an uncached RAID5 x4 whose members are directories under
# WORK, between two builds:
#
#     A=/path/to/old/build B=/path/to/new/build WORK=/tmp/ab \
#         [ROUNDS=3] [FILES=2000] [CACHE=1] [PROCS=1] contrib/bench/smallfiles_ab.sh
#
# PROCS=N: N smallfiles.py at once on the mount, FILES each; the line then
# has each phase's files/s summed over them, and no daemon CPU column.
# CACHE=1: with a write-back SSD tier in the run's directory too
# (CACHE_SIZE, default 512M).
#
# Each run makes a fresh array, mounts it with that build's tierfs and runs
# smallfiles.py (4 KiB files); runs alternate A, B, A, B, ... so both see
# the same machine.  One line per run: the smallfiles.py phases.
set -e
: "${A:?A=build dir}" "${B:?B=build dir}" "${WORK:?WORK=scratch dir}"
ROUNDS=${ROUNDS:-3}
FILES=${FILES:-2000}
SF=$(dirname "$0")/smallfiles.py
for r in $(seq 1 "$ROUNDS"); do
  for name in A B; do
    b=${!name}
    d=$WORK/$name-$r
    rm -rf "$d"; mkdir -p "$d"/m0 "$d"/m1 "$d"/m2 "$d"/m3 "$d"/mnt
    "$b"/mkfs.tierfs --level raid5 "$d"/m0 "$d"/m1 "$d"/m2 "$d"/m3 >/dev/null
    opts=()
    if [ "${CACHE:-0}" = 1 ]; then
        mkdir -m 700 "$d"/ssd
        opts=(-o "cache=$d/ssd,cache_size=${CACHE_SIZE:-512M}")
    fi
    "$b"/tierfs -f "${opts[@]}" "$d"/m0:"$d"/m1:"$d"/m2:"$d"/m3 "$d"/mnt > "$d"/log 2>&1 &
    pid=$!
    for _ in $(seq 100); do mountpoint -q "$d"/mnt && break; sleep 0.05; done
    sync
    if [ "${PROCS:-1}" = 1 ]; then
        out=$(python3 "$SF" "$d"/mnt --files "$FILES" --size 4096 --settle 0.2 --cpu-pid $pid)
    else
        pids=()
        for k in $(seq "$PROCS"); do
            python3 "$SF" "$d"/mnt --files "$FILES" --size 4096 --settle 0.2 > "$d"/out$k &
            pids+=($!)
        done
        wait "${pids[@]}"
        out=$(awk '{s[$1] += $2} END {n = split("create stat read unlink", ph, " ")
                for (i = 1; i <= n; i++) printf "%s %.1f\n", ph[i], s[ph[i]]}' "$d"/out*)
    fi
    echo "$name run $r: $(echo "$out" | tr '\n' ' ')"
    fusermount3 -u "$d"/mnt; wait $pid || true
    rm -rf "$d"
  done
done
