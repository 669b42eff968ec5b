#!/bin/bash
# on_ext4.sh - run a benchmark on a fresh journaled ext4, as members run:
#
#     contrib/bench/on_ext4.sh [SIZE] COMMAND [ARGS...]
#     e.g. contrib/bench/on_ext4.sh 24G contrib/bench/peers.sh
#
# Makes a sparse image of SIZE (default 24G) in IMG_DIR (default /var/tmp),
# formats it ext4 with mkfs.ext4's defaults (a journal), attaches it to a
# loop device with direct I/O to the image (so the host's page cache does
# not hold the image's blocks twice), mounts it and runs COMMAND with
# BENCH_TMPDIR set to the mount, which peers.sh and db_bench.py take as
# their work directory.  Whatever happens, the EXIT trap unmounts, detaches
# the loop device and removes the image.  Exits with COMMAND's status.
#
# Why: this machine's root filesystem is ext4 without a journal, and there
# ext4 hands out an inode only after skipping every free inode deleted in
# the last 60 s (360 s while its inode table block is dirty), reading each
# one's table entry (ialloc.c recently_deleted(), checked only without a
# journal).  After a benchmark phase that removed thousands of files, a
# create costs the creator milliseconds of kernel CPU, and the more member
# files a target makes per file, the more it pays (docs/PROFILE.md, eighth
# step).  A journaled ext4 has no such scan.
set -euo pipefail
IMG_SIZE=24G	# not SIZE: the benchmarks take that from the environment
if [[ "${1:-}" =~ ^[0-9]+[KMGT]?$ ]]; then IMG_SIZE=$1; shift; fi
[[ $# -gt 0 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
IMG_DIR=${IMG_DIR:-/var/tmp}

IMG= DEV= MNT=
cleanup() {
	local rc=$?
	set +e
	if [[ -n "$MNT" ]]; then
		mountpoint -q "$MNT" && umount "$MNT"
		rmdir "$MNT"
	fi
	[[ -n "$DEV" ]] && losetup -d "$DEV"
	[[ -n "$IMG" ]] && rm -f "$IMG"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

IMG=$(mktemp "$IMG_DIR/on_ext4.XXXXXX.img")
truncate -s "$IMG_SIZE" "$IMG"
mkfs.ext4 -q -F "$IMG"
DEV=$(losetup --find --show --direct-io=on "$IMG")
MNT=$(mktemp -d /tmp/on_ext4.XXXXXX)
mount "$DEV" "$MNT"
echo "on_ext4: $IMG_SIZE journaled ext4 on $DEV (direct I/O to $IMG) at $MNT" >&2
BENCH_TMPDIR=$MNT "$@"
