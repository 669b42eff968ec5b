#!/bin/bash
# peers.sh - benchmark tierfs against its peers, interleaved, medians.
#
# Targets (all on the same disk, each in its own mktemp -d directory):
#   raw         fio straight on a plain directory
#   tierfs64k   tierfs, 4-member RAID0, 64K chunk   (tierfs -f, backgrounded)
#   tierfs_r5c  tierfs, 4-member RAID5, 64K chunk, with a write-back SSD
#               tier (cache_size=2*SIZE, cache_promote=1) in the same
#               work directory, the data file read twice so the tier
#               holds it (issue 14's "RAID5 + tier")
#               Both on /dev/fuse (fuse_uring=off); the same with a "u"
#               (tierfs64ku, tierfs_r5cu) on the io_uring transport
#               (fuse_uring=on: the fuse module's enable_uring must be Y)
#   tierfs512k  tierfs, 4-member RAID0, 512K chunk  (EXTRA=1)
#   pll         libfuse's example passthrough_ll over a plain directory,
#               compiled at run time from the libfuse3-dev example source
#   pllb        the same with an O_DIRECT bounce in its write (pll fails
#               O_DIRECT writes: the data is unaligned in libfuse's buffer)
#   mergerfs    Debian's mergerfs over one plain directory
#
# Jobs (fio, time based, one 1 GiB file per target; plus a small-file run):
#   rr4k_qd1 rr4k_qd32 rw4k_qd1 rw4k_qd32   4K random read/write, O_DIRECT,
#                                           psync QD1 / libaio QD32
#   sr1m_direct sw1m_direct                 1M sequential read/write, O_DIRECT
#   sr1m_buf sw1m_buf                       1M sequential, buffered (EXTRA=1)
#   meta                                    smallfiles.py: create/stat/read/
#                                           unlink NFILES files of FSIZE bytes
#
# Every repetition runs every job on every target before the next
# repetition starts (round robin, target order rotated per repetition), so
# slow drifts in the machine's noise hit all targets alike; the report is
# the median of the R repetitions.
#
# Usage: contrib/bench/peers.sh            (see the variables below)
#   R=3 RUNTIME=15 SIZE=1G NFILES=50000 FSIZE=1024 EXTRA=0|1
#   TARGETS="raw tierfs64k pll mergerfs"   JOBS="rr4k_qd1 ... meta"
#   TIERFS_BUILD=<meson build dir with tierfs and mkfs.tierfs> (default: build/)
#   BENCH_TMPDIR=/var/tmp   where the mktemp -d work directory goes (pick a
#                           directory on the disk you want to measure)
#   OUT=<dir>               results (default: a new mktemp -d directory)
#   PLL_OPTS="" MERGERFS_OPTS="cache.files=partial"  TIERFS_OPTS=""
#   PLL_NOFILE=N            raise passthrough_ll's fd limit (it keeps one fd
#                           per cached inode; default: the inherited limit)
#   KEEP=1                  keep the work directory (data files, logs)
#
# Whatever happens (error, Ctrl-C, SIGTERM) the EXIT trap unmounts every
# FUSE mount it made (fusermount3 -u, retry, then -u -z), stops every
# daemon and child it started, and removes the work directory.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

R=${R:-3}
RUNTIME=${RUNTIME:-15}
SIZE=${SIZE:-1G}
NFILES=${NFILES:-50000}
FSIZE=${FSIZE:-1024}
EXTRA=${EXTRA:-0}
TIERFS_BUILD=${TIERFS_BUILD:-$REPO/build}
BENCH_TMPDIR=${BENCH_TMPDIR:-/var/tmp}
PLL_OPTS=${PLL_OPTS:-}
PLL_NOFILE=${PLL_NOFILE:-}
MERGERFS_OPTS=${MERGERFS_OPTS:-cache.files=partial}
TIERFS_OPTS=${TIERFS_OPTS:-}
KEEP=${KEEP:-0}
PY=/usr/bin/python3
UTIL="$HERE/peers_util.py"
SMALLFILES="$HERE/smallfiles.py"

if [[ "$EXTRA" == 1 ]]; then
	TARGETS=${TARGETS:-raw tierfs64k tierfs512k pll mergerfs}
	JOBS=${JOBS:-rr4k_qd1 rr4k_qd32 rw4k_qd1 rw4k_qd32 sr1m_direct sw1m_direct sr1m_buf sw1m_buf meta}
else
	TARGETS=${TARGETS:-raw tierfs64k pll mergerfs}
	JOBS=${JOBS:-rr4k_qd1 rr4k_qd32 rw4k_qd1 rw4k_qd32 sr1m_direct sw1m_direct meta}
fi

case "${1:-}" in
-h|--help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0 ;;
"") ;;
*)
	echo "peers.sh: no arguments; configure with environment variables (see --help)" >&2
	exit 2 ;;
esac

# ---------------------------------------------------------------- cleanup
WORK=""
RAW_CSV=""
REPORTED=0
MOUNTS=()	# every mountpoint we mounted or tried to mount
PIDS=()		# every daemon we started
CHILD=""	# the foreground job (fio, smallfiles.py, dd) while it runs

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

is_mounted() {
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts
}

alive() {	# running, not a zombie
	local st
	[[ -r /proc/$1/stat ]] || return 1
	st=$(</proc/"$1"/stat) 2>/dev/null || return 1
	st=${st##*) }
	[[ ${st:0:1} != Z ]]
}

unmount_one() {
	local m=$1
	is_mounted "$m" || return 0
	fusermount3 -u "$m" 2>/dev/null && return 0
	sleep 0.5
	is_mounted "$m" || return 0
	fusermount3 -u "$m" 2>/dev/null && return 0
	log "unmount of $m failed; detaching it (fusermount3 -u -z)"
	fusermount3 -u -z "$m" 2>/dev/null || true
}

stop_pid() {	# $1 pid, $2 seconds to wait before SIGTERM
	local p=$1 i
	for ((i = 0; i < ${2:-10} * 10; i++)); do
		alive "$p" || break
		sleep 0.1
	done
	if alive "$p"; then
		kill -TERM "$p" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			alive "$p" || break
			sleep 0.1
		done
	fi
	if alive "$p"; then
		log "pid $p ignored SIGTERM; killing it"
		kill -KILL "$p" 2>/dev/null || true
	fi
	wait "$p" 2>/dev/null || true
}

cleanup() {
	local rc=$? m p
	trap - EXIT INT TERM HUP
	set +e
	if [[ -n "$CHILD" ]]; then
		kill -TERM "$CHILD" 2>/dev/null
		stop_pid "$CHILD" 3
		CHILD=""
	fi
	for m in "${MOUNTS[@]}"; do
		unmount_one "$m"
	done
	for p in "${PIDS[@]}"; do
		stop_pid "$p" 10
	done
	# keep the daemons' logs with the results, and report what was measured
	# even when the run was cut short
	if [[ -n "$WORK" && -n "${OUT:-}" && -d "$OUT" ]]; then
		for p in "$WORK"/*/daemon.log; do
			[[ -f "$p" ]] && cp "$p" "$OUT/$(basename "$(dirname "$p")").daemon.log"
		done
		if ((!REPORTED)) && [[ -f "$RAW_CSV" ]] && (($(wc -l <"$RAW_CSV") > 1)); then
			log "run incomplete; partial report in $OUT/summary.md"
			"$PY" "$UTIL" report "$RAW_CSV" "$OUT/summary" >/dev/null
		fi
	fi
	if [[ -n "$WORK" && -d "$WORK" ]]; then
		if awk -v w="$WORK/" 'index($2, w) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
			log "something is still mounted under $WORK; not removing it"
		elif [[ "$KEEP" == 1 ]]; then
			log "work directory kept: $WORK"
		else
			rm -rf "$WORK"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Run a command as a waitable child, so a signal interrupts the wait and the
# trap runs at once.  Returns the command's status.
run() {
	local rc=0
	"$@" &
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=""
	return "$rc"
}

cpu_ticks() {	# utime + stime of a process (all its threads), clock ticks
	local st fl
	st=$(</proc/"$1"/stat)
	st=${st##*) }
	read -r -a fl <<<"$st"
	echo $((fl[11] + fl[12]))
}

# ---------------------------------------------------------------- checks
for t in fio fusermount3 gcc pkg-config mergerfs timeout awk numfmt; do
	command -v "$t" >/dev/null || die "$t not found"
done
[[ -x "$TIERFS_BUILD/tierfs" && -x "$TIERFS_BUILD/mkfs.tierfs" ]] ||
	die "no tierfs/mkfs.tierfs in $TIERFS_BUILD (set TIERFS_BUILD)"
SIZE_BYTES=$(numfmt --from=iec "$SIZE")
SIZE_MB=$((SIZE_BYTES / 1048576))
((SIZE_MB > 0)) || die "SIZE too small"
TICK=$(getconf CLK_TCK)

WORK=$(mktemp -d -p "$BENCH_TMPDIR" tierfs-peers.XXXXXX)
if [[ -z "${OUT:-}" ]]; then
	OUT=$(mktemp -d -p "${TMPDIR:-/tmp}" tierfs-peers-results.XXXXXX)
else
	mkdir -p "$OUT"
fi
RAW_CSV="$OUT/raw.csv"
echo "rep,job,target,status,value,unit,ios,daemon_cpu_s,cpu_us_per_op,fio_cpu_pct,load1,seconds,note" >"$RAW_CSV"
log "work directory $WORK, results in $OUT"

# ---------------------------------------------------------------- targets
declare -A DIR BACKING PID

wait_mount() {	# mountpoint pid logfile
	local i
	for ((i = 0; i < 200; i++)); do
		is_mounted "$1" && return 0
		alive "$2" || die "daemon for $1 exited: $(tail -5 "$3")"
		sleep 0.05
	done
	die "$1 did not mount in 10 s: $(tail -5 "$3")"
}

start_daemon() {	# name mountpoint logfile cmd...
	local name=$1 mnt=$2 logf=$3
	shift 3
	MOUNTS+=("$mnt")
	"$@" </dev/null >"$logf" 2>&1 &
	PID[$name]=$!
	PIDS+=("$!")
	wait_mount "$mnt" "$!" "$logf"
}

build_pll() {
	local src=/usr/share/doc/libfuse3-dev/examples h
	mkdir "$WORK/pll-build"
	if [[ -f $src/passthrough_ll.c ]]; then
		cp "$src/passthrough_ll.c" "$WORK/pll-build/"
	elif [[ -f $src/passthrough_ll.c.gz ]]; then
		gzip -dc "$src/passthrough_ll.c.gz" >"$WORK/pll-build/passthrough_ll.c"
	else
		die "no passthrough_ll.c under $src (install libfuse3-dev)"
	fi
	h=passthrough_helpers.h
	if [[ -f $src/$h ]]; then
		cp "$src/$h" "$WORK/pll-build/"
	elif [[ -f $src/$h.gz ]]; then
		gzip -dc "$src/$h.gz" >"$WORK/pll-build/$h"
	fi
	# pllb: the same with an O_DIRECT bounce in lo_write_buf (the kernel's
	# write data lands unaligned in libfuse's buffer, so an O_DIRECT
	# backing file refuses it: copied into an aligned buffer first)
	python3 - "$WORK/pll-build/passthrough_ll.c" "$WORK/pll-build/passthrough_llb.c" <<'PY' ||
import sys
src = open(sys.argv[1]).read()
old = "\tres = fuse_buf_copy(&out_buf, in_buf, 0);\n\tif(res < 0)"
new = """\t{
\t\tsize_t bn = fuse_buf_size(in_buf);
\t\tvoid *bb = NULL;
\t\tstruct fuse_bufvec mb = FUSE_BUFVEC_INIT(bn);

\t\tif (posix_memalign(&bb, 4096, bn ? bn : 1)) {
\t\t\tfuse_reply_err(req, ENOMEM);
\t\t\treturn;
\t\t}
\t\tmb.buf[0].mem = bb;
\t\tres = fuse_buf_copy(&mb, in_buf, 0);
\t\tif (res >= 0 && (res = pwrite(fi->fh, bb, (size_t)res, off)) < 0)
\t\t\tres = -errno;
\t\tfree(bb);
\t}
\tif(res < 0)"""
assert src.count(old) == 1, "lo_write_buf not as expected"
open(sys.argv[2], "w").write(src.replace(old, new))
PY
		die "passthrough_ll.c: lo_write_buf not as expected (no bounce variant)"
	for v in passthrough_ll passthrough_llb; do
		# shellcheck disable=SC2046
		gcc -O2 -Wall -o "$WORK/pll-build/$v" "$WORK/pll-build/$v.c" \
			$(pkg-config --cflags --libs fuse3) >"$WORK/pll-build/gcc.log" 2>&1 ||
			die "$v did not compile: $(tail -5 "$WORK/pll-build/gcc.log")"
	done
}

uring_of() {	# TARGET -> its fuse_uring= value
	case "$1" in *u) echo on ;; *) echo off ;; esac
}

setup_target() {
	local t=$1 d=$WORK/$1 chunk opts=()
	mkdir "$d"
	case "$t" in
	raw)
		mkdir "$d/dir"
		DIR[$t]=$d/dir
		BACKING[$t]=$d/dir
		;;
	tierfs64k | tierfs512k | tierfs64ku)
		chunk=${t#tierfs}
		chunk=${chunk%u}
		chunk=${chunk^^}
		mkdir "$d/m0" "$d/m1" "$d/m2" "$d/m3" "$d/mnt"
		"$TIERFS_BUILD/mkfs.tierfs" --level raid0 --chunk "$chunk" \
			"$d/m0" "$d/m1" "$d/m2" "$d/m3" >"$d/mkfs.log" 2>&1 ||
			die "mkfs.tierfs failed: $(cat "$d/mkfs.log")"
		opts=(-o "fuse_uring=$(uring_of "$t")${TIERFS_OPTS:+,$TIERFS_OPTS}")
		start_daemon "$t" "$d/mnt" "$d/daemon.log" \
			"$TIERFS_BUILD/tierfs" -f "${opts[@]}" "$d/m0:$d/m1:$d/m2:$d/m3" "$d/mnt"
		DIR[$t]=$d/mnt
		BACKING[$t]="$d/m0 $d/m1 $d/m2 $d/m3"
		;;
	tierfs_r5c | tierfs_r5cu)
		mkdir "$d/m0" "$d/m1" "$d/m2" "$d/m3" "$d/mnt"
		mkdir -m 700 "$d/ssd"
		"$TIERFS_BUILD/mkfs.tierfs" --level raid5 --chunk 64K \
			"$d/m0" "$d/m1" "$d/m2" "$d/m3" >"$d/mkfs.log" 2>&1 ||
			die "mkfs.tierfs failed: $(cat "$d/mkfs.log")"
		start_daemon "$t" "$d/mnt" "$d/daemon.log" \
			"$TIERFS_BUILD/tierfs" -f \
			-o "cache=$d/ssd,cache_size=$((2 * SIZE_MB))M,cache_promote=1,fuse_uring=$(uring_of "$t")${TIERFS_OPTS:+,$TIERFS_OPTS}" \
			"$d/m0:$d/m1:$d/m2:$d/m3" "$d/mnt"
		DIR[$t]=$d/mnt
		BACKING[$t]="$d/m0 $d/m1 $d/m2 $d/m3 $d/ssd"
		;;
	pll | pllb)
		[[ -x "$WORK/pll-build/passthrough_ll" ]] || build_pll
		mkdir "$d/src" "$d/mnt"
		# passthrough_ll holds an O_PATH fd for every inode the kernel
		# knows: NFILES above the fd limit (ulimit -n) makes its creates
		# fail (EBADF).  PLL_NOFILE raises the limit if the hard limit
		# (or CAP_SYS_RESOURCE) allows it.
		local -a lim=()
		if [[ -n "$PLL_NOFILE" ]]; then lim=(prlimit --nofile="$PLL_NOFILE" --); fi
		start_daemon "$t" "$d/mnt" "$d/daemon.log" "${lim[@]}" \
			"$WORK/pll-build/$([[ $t == pllb ]] && echo passthrough_llb || echo passthrough_ll)" \
			-f -o "source=$d/src${PLL_OPTS:+,$PLL_OPTS}" "$d/mnt"
		DIR[$t]=$d/mnt
		BACKING[$t]=$d/src
		;;
	mergerfs)
		mkdir "$d/src" "$d/mnt"
		start_daemon "$t" "$d/mnt" "$d/daemon.log" \
			mergerfs -f -o "fsname=peers-mergerfs${MERGERFS_OPTS:+,$MERGERFS_OPTS}" "$d/src" "$d/mnt"
		DIR[$t]=$d/mnt
		BACKING[$t]=$d/src
		;;
	*) die "unknown target $t" ;;
	esac
}

has_fio_jobs=0
for j in $JOBS; do
	if [[ $j != meta ]]; then has_fio_jobs=1; fi
done

for t in $TARGETS; do
	setup_target "$t"
	if ((has_fio_jobs)); then
		log "$t: writing the ${SIZE} data file"
		run dd if=/dev/zero of="${DIR[$t]}/data.bin" bs=1M count="$SIZE_MB" conv=fsync status=none ||
			die "$t: could not write the data file"
		if [[ $t == tierfs_r5c* ]]; then	# every extent misses once, then is promoted
			log "$t: reading the data file twice (into the tier)"
			for _ in 1 2; do
				run fio --name=warm --filename="${DIR[$t]}/data.bin" --rw=randread \
					--bs=64k --direct=1 --ioengine=psync --size="$SIZE" \
					--io_size="$SIZE" --norandommap --output=/dev/null >/dev/null
			done
		fi
	fi
done

# ---------------------------------------------------------------- jobs
fio_args() {
	case "$1" in
	rr4k_qd1) echo "--rw=randread --bs=4k --ioengine=psync --iodepth=1 --direct=1" ;;
	rr4k_qd32) echo "--rw=randread --bs=4k --ioengine=libaio --iodepth=32 --direct=1" ;;
	rw4k_qd1) echo "--rw=randwrite --bs=4k --ioengine=psync --iodepth=1 --direct=1" ;;
	rw4k_qd32) echo "--rw=randwrite --bs=4k --ioengine=libaio --iodepth=32 --direct=1" ;;
	sr1m_direct) echo "--rw=read --bs=1M --ioengine=psync --iodepth=1 --direct=1" ;;
	sw1m_direct) echo "--rw=write --bs=1M --ioengine=psync --iodepth=1 --direct=1" ;;
	sr1m_buf) echo "--rw=read --bs=1M --ioengine=psync --iodepth=1 --direct=0" ;;
	sw1m_buf) echo "--rw=write --bs=1M --ioengine=psync --iodepth=1 --direct=0 --end_fsync=1" ;;
	*) return 1 ;;
	esac
}

csv_row() {	# rep job target status value unit ios cpu_s us_per_op fio_cpu load secs note
	local note=${13//,/;}
	note=${note//$'\n'/ }
	echo "$1,$2,$3,$4,$5,$6,$7,$8,$9,${10},${11},${12},$note" >>"$RAW_CSV"
}

daemon_cpu_start() { [[ -n "${PID[$1]:-}" ]] && cpu_ticks "${PID[$1]}" || echo -; }
daemon_cpu_secs() {	# target start_ticks
	if [[ $2 == - ]]; then echo -; return; fi
	local now
	now=$(cpu_ticks "${PID[$1]}" 2>/dev/null) || { echo -; return; }
	awk -v a="$2" -v b="$now" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }'
}
per_op() {	# cpu_s ops -> microseconds per op
	if [[ $1 == - || $2 == 0 ]]; then echo -; return; fi
	awk -v c="$1" -v n="$2" 'BEGIN { printf "%.1f", c * 1e6 / n }'
}

check_alive() {
	local t=$1
	if [[ -n "${PID[$t]:-}" ]] && ! alive "${PID[$t]}"; then
		die "$t daemon died (log: $OUT/$t.daemon.log): $(tail -5 "$WORK/$t/daemon.log")"
	fi
}

run_fio() {	# rep job target
	local rep=$1 job=$2 t=$3 f=$OUT/fio/$1.$2.$3 c0 cpu t0 secs rc=0 load unit res note
	local -a a
	read -r -a a <<<"$(fio_args "$job")"
	unit=IOPS
	if [[ $job == s* ]]; then unit=MiB/s; fi
	# cold start for every target: drop the data file's pages at the bottom
	# (for the FUSE targets, the backing files; fio's own invalidate only
	# reaches the FUSE page cache)
	# shellcheck disable=SC2086
	"$PY" "$UTIL" evict data.bin ${BACKING[$t]}
	load=$(cut -d' ' -f1 /proc/loadavg)
	c0=$(daemon_cpu_start "$t")
	t0=$(date +%s.%N)
	run timeout -k 10 $((RUNTIME * 3 + 60)) fio --name="$job" --filename="${DIR[$t]}/data.bin" \
		--size="$SIZE_BYTES" --time_based --runtime="$RUNTIME" --randrepeat=0 --norandommap \
		--fallocate=none --invalidate=1 "${a[@]}" \
		--output-format=json --output="$f.json" >"$f.err" 2>&1 || rc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	cpu=$(daemon_cpu_secs "$t" "$c0")
	check_alive "$t"
	if ((rc == 124 || rc == 137)); then
		csv_row "$rep" "$job" "$t" timeout "" "$unit" 0 "$cpu" - - "$load" "$secs" "timeout after ${secs}s"
		log "  $job $t: TIMEOUT"
		return
	fi
	if ((rc != 0)); then
		note=$(sed -n 's/^fio: io_u error on file [^:]*: \([^:]*\): \([a-z]*\).*/\2: \1/p' "$f.err" |
			head -1) || true
		note="$t $job: fio exit $rc${note:+ ($note)}"
		csv_row "$rep" "$job" "$t" fail "" "$unit" 0 "$cpu" - - "$load" "$secs" "$note"
		log "  $job $t: fails ($note)"
		return
	fi
	read -r iops mibs ios fcpu <<<"$("$PY" "$UTIL" fio "$f.json")"
	res=$iops
	if [[ $unit == MiB/s ]]; then res=$mibs; fi
	csv_row "$rep" "$job" "$t" ok "$res" "$unit" "$ios" "$cpu" "$(per_op "$cpu" "$ios")" \
		"$fcpu" "$load" "$secs" ""
	log "  $job $t: $res $unit (daemon cpu ${cpu}s)"
}

run_meta() {	# rep target
	local rep=$1 t=$2 f=$OUT/meta/$1.$2 secs rc=0 load phase rate psecs pcpu t0
	load=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(date +%s.%N)
	run timeout -k 10 1800 "$PY" "$SMALLFILES" "${DIR[$t]}" --files "$NFILES" --size "$FSIZE" \
		--cpu-pid "${PID[$t]:-0}" >"$f.out" 2>"$f.err" || rc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	check_alive "$t"
	if ((rc != 0)); then
		for phase in create stat read unlink; do
			grep -q "^$phase " "$f.out" && continue
			csv_row "$rep" "meta_$phase" "$t" fail "" files/s 0 - - - "$load" "$secs" \
				"$t meta_$phase: exit $rc $(tail -1 "$f.err")"
		done
		log "  meta $t: fails (exit $rc: $(tail -1 "$f.err"))"
	fi
	# daemon CPU per phase, per file operation
	while read -r phase rate psecs pcpu; do
		csv_row "$rep" "meta_$phase" "$t" ok "$rate" files/s "$NFILES" "$pcpu" \
			"$(per_op "$pcpu" "$NFILES")" - "$load" "$psecs" ""
	done <"$f.out"
	if [[ -s "$f.out" ]]; then
		log "  meta $t: $(tr '\n' ' ' <"$f.out")(phase rate secs daemon_cpu)"
	fi
}

mkdir -p "$OUT/fio" "$OUT/meta"
{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "disk: $(df -hT "$WORK" | awk 'NR == 2 { print $1, $2, $3 }')"
	echo "tierfs: $TIERFS_BUILD/tierfs built $(date -r "$TIERFS_BUILD/tierfs" -Is); repo $REPO at $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo ?) (the build may be older)"
	echo "fio: $(fio --version); mergerfs: $(mergerfs --version 2>&1 | head -1); libfuse: $(pkg-config --modversion fuse3)"
	echo "R=$R RUNTIME=$RUNTIME SIZE=$SIZE NFILES=$NFILES FSIZE=$FSIZE"
	echo "TARGETS=$TARGETS"
	echo "JOBS=$JOBS"
	echo "PLL_OPTS=$PLL_OPTS PLL_NOFILE=$PLL_NOFILE MERGERFS_OPTS=$MERGERFS_OPTS TIERFS_OPTS=$TIERFS_OPTS"
	echo "loadavg at start: $(cat /proc/loadavg)"
} >"$OUT/env.txt"
cat "$OUT/env.txt" >&2

START=$(date +%s)
read -r -a TLIST <<<"$TARGETS"
for ((rep = 1; rep <= R; rep++)); do
	# rotate the target order each repetition, so no target always runs
	# right after the same neighbour (background writeback, cache state)
	k=$(((rep - 1) % ${#TLIST[@]}))
	ORDER=("${TLIST[@]:k}" "${TLIST[@]:0:k}")
	log "repetition $rep/$R (order: ${ORDER[*]})"
	for job in $JOBS; do
		for t in "${ORDER[@]}"; do
			if [[ $job == meta ]]; then
				run_meta "$rep" "$t"
			else
				fio_args "$job" >/dev/null || die "unknown job $job"
				run_fio "$rep" "$job" "$t"
			fi
		done
	done
done
echo "loadavg at end: $(cat /proc/loadavg); total $(($(date +%s) - START)) s" >>"$OUT/env.txt"

"$PY" "$UTIL" report "$RAW_CSV" "$OUT/summary"
REPORTED=1
log "done in $(($(date +%s) - START)) s; results: $OUT/summary.md, $OUT/summary.csv, $RAW_CSV"
