# array_lib.sh - sourced by the bench scripts that mount RAID5 x3 arrays
# under one scratch directory D (hit_ring_ab.sh, hit_ceiling.sh, profile.sh).
#
#   D=...; . "$(dirname "$0")/array_lib.sh"
#   array_make BUILD NAME          mkfs a RAID5 x3 at $D/NAME (m0..m2, mnt)
#   array_mount BUILD NAME [OPTS]  tierfs -f on it (-o OPTS); sets MNT, PID
#   array_umount                   unmount, wait for the daemon
#   array_warm FILE                read FILE (256 MiB) whole three times in
#                                  64K pieces: with cache_promote=1 every
#                                  extent misses once, then is promoted
#   daemon_cpu                     the daemon's user+sys ticks
#   cache_stat KEY                 cache.KEY of the mount's status
#   array_tiered BUILD NAME OPTS   a fresh array NAME with a tier in $D/ssd,
#                                  mounted -o cache=$D/ssd,OPTS
#   ab_runs ROUNDS A B RUN         RUN N NAME BUILD for runs N = 1, 2, ...
#                                  of builds A and B alternated (A B A B ...)
# The EXIT trap unmounts what is mounted, stops the daemon, runs the
# script's array_cleanup_hook if it defines one (what else it set up under
# $D) and removes $D; the daemons' stderr goes to $D/log.
PID= MNT=
array_cleanup() {
    if [ -n "$MNT" ] && mountpoint -q "$MNT"; then
        fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"
    fi
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID"
    declare -F array_cleanup_hook >/dev/null && array_cleanup_hook
    rm -rf "$D"
}
trap array_cleanup EXIT

array_make() {
    local a=$D/$2
    mkdir -p "$a/m0" "$a/m1" "$a/m2" "$a/mnt"
    "$1/mkfs.tierfs" --level raid5 "$a/m0" "$a/m1" "$a/m2" >/dev/null
}

array_mount() {
    local a=$D/$2
    MNT=$a/mnt
    "$1/tierfs" -f ${3:+-o "$3"} "$a/m0:$a/m1:$a/m2" "$MNT" 2>>"$D/log" &
    PID=$!
    for _ in $(seq 50); do mountpoint -q "$MNT" && return; sleep 0.1; done
    echo "mount failed:"; cat "$D/log"; exit 1
}

array_umount() { fusermount3 -u "$MNT"; wait "$PID"; PID= MNT=; }
array_warm() {
    for _ in 1 2 3; do
        fio --name=w --filename="$1" --rw=randread --bs=64k --direct=1 --ioengine=psync \
            --size=256M --io_size=256M --norandommap --output=/dev/null >/dev/null
        sleep 1
    done
}

daemon_cpu() { awk '{print $14+$15}' "/proc/$PID/stat"; }
cache_stat() { getfattr --only-values -n user.tierfs.status "$MNT" 2>/dev/null |
               awk -F= -v k="cache.$1" '$1 == k { print $2 }'; }
array_tiered() {
    rm -rf "${D:?}/$2" "$D/ssd"
    array_make "$1" "$2"
    mkdir "$D/ssd"
    array_mount "$1" "$2" "cache=$D/ssd,$3"
}
ab_runs() {
    local n=0 r
    for r in $(seq "$1"); do
        n=$((n + 1)); "$4" "$n" A "$2"
        n=$((n + 1)); "$4" "$n" B "$3"
    done
}
