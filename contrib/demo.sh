#!/usr/bin/env bash
# The main job: build tierfs, make a demo array of 4 member directories,
# mount it and show the striping at work, then a RAID5 on emulated HDDs
# with an SSD tier showing tiering at work.  Leaves nothing mounted unless
# KEEP=1 is set (then it prints how to unmount).
set -euo pipefail
cd "$(dirname "$0")/.."
contrib/deps.sh
contrib/build.sh
B=$PWD/build
demo=$(mktemp -d /tmp/tierfs-demo.XXXXXX)
mnt=$demo/mnt
r5=$demo/r5
ssd=$demo/ssd
mkdir -p "$demo"/m{0,1,2,3} "$mnt" "$r5"/m{0,1,2,3} "$r5/spare" "$r5/mnt" "$ssd"/m{0,1,2,3} "$ssd/mnt"
cleanup() {
    for m in "$r5/mnt" "$ssd/mnt"; do
        if mountpoint -q "$m"; then fusermount3 -u "$m" || fusermount3 -u -z "$m"; fi
    done
    if [ "${KEEP:-0}" != 1 ]; then
        if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" || fusermount3 -u -z "$mnt"; fi
        rm -rf "$demo"
    fi
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "mkfs.tierfs: a RAID0 of 4 members with a 64K chunk"
"$B/mkfs.tierfs" --level raid0 --chunk 64K "$demo"/m{0,1,2,3}
say "mount (members may be given in any order)"
"$B/tierfs" "$demo/m2:$demo/m0:$demo/m3:$demo/m1" "$mnt"
grep " $mnt " /proc/mounts
df -h "$mnt"

say "write a 10 MiB file and a small one through the mount"
head -c $((10 << 20)) /dev/urandom > "$mnt/big.bin"
echo "hello from tierfs" > "$mnt/hello.txt"
mkdir -p "$mnt/dir/sub"; ln -s ../hello.txt "$mnt/dir/link"
ls -la "$mnt" "$mnt/dir"
sum=$(md5sum < "$mnt/big.bin")
echo "md5 through the mount: $sum"

say "each member holds the whole tree and its share of every file"
for i in 0 1 2 3; do
    printf 'member %d: big.bin holds %8d bytes, hello.txt %2d bytes, fid %s\n' "$i" \
        "$(stat -c %s "$demo/m$i/root/big.bin")" "$(stat -c %s "$demo/m$i/root/hello.txt")" \
        "$(getfattr --only-values -n trusted.tierfs.fid "$demo/m$i/root/big.bin" 2>/dev/null)"
done
echo "(10 MiB / 4 members = 2.5 MiB each; hello.txt lives on one member: its chunk 0)"

say "striping: 64K chunk 0 of big.bin on its first member equals bytes 0..64K of the file"
first=$(for i in 0 1 2 3; do
    if cmp -s -n 65536 "$demo/m$i/root/big.bin" "$mnt/big.bin"; then echo $i; fi; done)
echo "chunk 0 is on member $first; chunk 1 on member $(( (first + 1) % 4 ))"
cmp -s -n 65536 <(tail -c +65537 "$mnt/big.bin") "$demo/m$(( (first + 1) % 4 ))/root/big.bin" \
    && echo "verified: chunk 1 of the file is chunk 0 of the next member"

say "RAID5 of 4 members: a member fails, the data stays, a spare is rebuilt"
"$B/mkfs.tierfs" --level raid5 --chunk 64K "$r5"/m{0,1,2,3} | head -1
"$B/tierfs" "$r5/m0:$r5/m1:$r5/m2:$r5/m3" "$r5/mnt"
cp "$mnt/big.bin" "$r5/mnt/big.bin"
"$B/tierctl" status "$r5/mnt"
"$B/tierctl" fail "$r5/mnt" 1
echo "after tierctl fail 1:"
"$B/tierctl" status "$r5/mnt" | head -3
[ "$(md5sum < "$r5/mnt/big.bin")" = "$sum" ] && echo "md5 still matches, read from the 3 members left"
"$B/tierctl" replace "$r5/mnt" 1 "$r5/spare" --wait
"$B/tierctl" scrub "$r5/mnt" --wait
"$B/tierctl" status "$r5/mnt"
fusermount3 -u "$r5/mnt"

say "the SSD tier: a RAID5 of 4 emulated 7200 rpm disks with a cache directory"
"$B/mkfs.tierfs" --level raid5 --chunk 64K "$ssd"/m{0,1,2,3} | head -1
"$B/tierfs" -o member_model=hdd7200,cache="$ssd/cache",cache_size=256M \
    "$ssd/m0:$ssd/m1:$ssd/m2:$ssd/m3" "$ssd/mnt"
dd if=/dev/urandom of="$ssd/mnt/db.bin" bs=1M count=64 status=none
"$B/tierctl" flush "$ssd/mnt" | tail -1
echo "random 4K O_DIRECT reads over a 4 MiB hot zone in the middle of a 64 MiB file, three passes:"
/usr/bin/python3 - "$ssd/mnt/db.bin" <<'PY'
import mmap, os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
offs = [(8192 + random.randrange(1024)) * 4096 for _ in range(300)]
for p in range(3):
    t = time.monotonic()
    for o in offs:
        os.preadv(fd, [buf], o)
    dt = time.monotonic() - t
    print(f"  pass {p + 1}: {len(offs) / dt:8.0f} IOPS")
    time.sleep(0.5)   # the promoter copies hot extents in the background
PY
"$B/tierctl" status "$ssd/mnt" | sed -n '/^cache/,$p'
echo "(pass 1 reads the disks; an extent's second miss queues its promotion, so most of the hot"
echo " zone reaches the SSD during pass 1 and passes 2 and 3 hit it)"
echo "the file's own view (getfattr -d -m user.tierfs): how much of it is on the SSD, and where"
getfattr --absolute-names -d -m user.tierfs "$ssd/mnt/db.bin" |
    grep -E 'cached_bytes|extents=|heat|read_hits|read_misses|layout'
echo "  residency (byte ranges on the SSD):"
getfattr --absolute-names --only-values -n user.tierfs.residency "$ssd/mnt/db.bin" | head -4 | sed 's/^/    /'
echo "the array's statistics as JSON (user.tierfs.stats, tierctl stats), the tier's hit ratios:"
"$B/tierctl" stats "$ssd/mnt" | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)["cache"]
print("  ", {k: c[k] for k in ("read_hit_ratio", "read_hit_ratio_5m", "read_req_hits",
                               "read_req_misses", "promotions", "dirty_bytes")})'
echo "write-back: 2000 random 4K writes land on the SSD, then tierctl flush destages them"
/usr/bin/python3 - "$ssd/mnt/db.bin" <<'PY'
import os, random, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
t = time.monotonic()
for _ in range(2000):
    os.pwrite(fd, os.urandom(4096), random.randrange(16384) * 4096)
os.fsync(fd)
print(f"  {2000 / (time.monotonic() - t):.0f} writes/s acknowledged (the disks alone: about 30)")
PY
"$B/tierctl" status "$ssd/mnt" | grep " dirty$"
"$B/tierctl" flush "$ssd/mnt" | tail -1
fusermount3 -u "$ssd/mnt"

say "unmount and mount again: data persists"
fusermount3 -u "$mnt"
"$B/tierfs" "$demo/m0:$demo/m1:$demo/m2:$demo/m3" "$mnt"
[ "$(md5sum < "$mnt/big.bin")" = "$sum" ] && echo "md5 matches after remount"
if [ "${KEEP:-0}" = 1 ]; then
    echo; echo "mounted at $mnt; unmount with: fusermount3 -u $mnt"
fi
