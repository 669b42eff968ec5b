/* dispatch.c - the data path: every read, write, fsync and fallocate of a
 * file goes to the SSD tier when one is attached (and not detached), else
 * to the RAID.
 *
 * Owns: the choice of the tier or the RAID for each request, and the
 * requests that need the namespace, the tier and the RAID in order: a
 * punch or zero range with a tier, and a truncate.
 * Layers: the FUSE front end (fs.c) calls it; it calls the tier
 * (cache/) and the RAID (raid/data.c), which never call it back.
 *
 * Invariants:
 *  1. With an SSD tier, a punch or zero range grows the members to the
 *     size the tier holds past them (its size record) before the tier
 *     drops the range, and syncs them: with KEEP_SIZE the zeros can take
 *     every dirty byte of a file whose size only the tier knew, and the
 *     flusher, which carries sizes to the members (flush.c invariant 9),
 *     never visits a file with nothing dirty.  On the mirror levels a
 *     punch past a member file's end does not extend it (the parity
 *     levels write zeros up to the size, which does).
 *  2. An fsync first makes durable the retirement of the file's last
 *     truncate intent (fs.h, trunc_gen): were the retirement lost, the
 *     next mount would replay the truncate over what the fsync made
 *     durable (replay.c invariant 4).
 *  3. A truncate goes: the namespace's intent (durable first when the
 *     tier holds some of the file) and every member file open; the tier
 *     drops what is cut and keeps its flusher off the file; the members
 *     are cut, synced when there is an intent; the intent retires; the
 *     tier lets the flusher back.  A crash at any point leaves the intent
 *     to cut the members at the next mount, so the members' older bytes
 *     never come back where the tier had newer ones (DESIGN 10.5).
 */
#include <errno.h>
#include <sys/stat.h>
#include <linux/falloc.h>

#include "tierfs/cache.h"
#include "tierfs/data.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"

/* The SSD tier, when attached and not detached, sits in front of the RAID. */
static bool cached(const struct tfs_fs *fs)
{
	return fs->cache && !tfs_cache_detached(fs->cache);
}

ssize_t tfs_data_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		      size_t len, uint64_t off)
{
	return cached(fs) ? tfs_cache_read(fs, in, direct, buf, len, off)
			  : tfs_raid_read(fs, in, direct, buf, len, off);
}

ssize_t tfs_data_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct, const void *buf,
		       size_t len, uint64_t off)
{
	return cached(fs) ? tfs_cache_write(fs, in, direct, buf, len, off)
			  : tfs_raid_write(fs, in, direct, buf, len, off);
}

int tfs_data_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	/* invariant 2 */
	int rc = fs->meta ? tfs_meta_sync_to(fs->meta, __atomic_load_n(&in->trunc_gen,
									 __ATOMIC_RELAXED))
			  : 0;

	if (rc)
		return rc;
	if (!cached(fs))
		return tfs_raid_fsync(fs, in, datasync);
	if (!datasync)	/* the time of the writes only the tier holds */
		tfs_ns_times_put(fs, in);
	return tfs_cache_fsync(fs, in, datasync);
}

bool tfs_data_fsync_waits(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	/* an fsync also puts the times only the tier's writes changed on
	 * the members (tfs_ns_times_put) */
	if (!datasync || !cached(fs) || (fs->meta && tfs_meta_sync_due(fs->meta,
					__atomic_load_n(&in->trunc_gen, __ATOMIC_RELAXED))))
		return true;
	return tfs_cache_fsync_waits(fs, in, datasync);
}

int tfs_data_fallocate(struct tfs_fs *fs, struct tfs_inode *in, int mode, uint64_t off,
		       uint64_t len)
{
	const int supported = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
	uint64_t tsize;
	int rc, grown;

	if (mode & ~supported)
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (off + len < off)
		return -EFBIG;
	if (!cached(fs) || !(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)))
		return tfs_raid_fallocate(fs, in, mode, off, len);
	/* zeros: the flusher off the file, the members first (synced if the
	 * cache holds some of the file), then out of the cache: dropped
	 * before, dirty sectors would leave the members' older bytes to show
	 * after a crash (cut.c invariant 2) */
	rc = tfs_ns_load_file(fs, in);
	if (rc)
		return rc;
	tfs_cache_zero_begin(fs, in, off, 0);
	rc = tfs_raid_fallocate(fs, in, mode, off, len);
	/* a size the tier holds past the members goes to them too (invariant
	 * 1): the zeros may take the last dirty byte, and a file with nothing
	 * dirty is never flushed, so nothing else would carry the size */
	if (rc == 0 && (tsize = tfs_cache_size(fs, in->fid)) != 0 &&
	    (grown = tfs_raid_grow(fs, in, tsize)) < 0)
		rc = grown;
	if (rc == 0 && tfs_cache_knows(fs, in))
		rc = tfs_raid_fsync(fs, in, true);
	tfs_cache_zero_end(fs, in, off, rc ? 0 : len);
	if (rc == 0)	/* a flush running keeps the members' times */
		tfs_ns_touch(fs, in);
	return rc;
}

int tfs_data_truncate(struct tfs_fs *fs, struct tfs_inode *in, uint64_t len)
{
	uint64_t seq;
	int rc;

	if (!S_ISREG(in->type))
		return S_ISDIR(in->type) ? -EISDIR : -EINVAL;
	rc = tfs_ns_load_file(fs, in);
	if (rc == 0)
		rc = tfs_ns_cut_begin(fs, in, len, &seq);
	if (rc)
		return rc;
	if (fs->cache)	/* invariant 3 */
		tfs_cache_zero_begin(fs, in, len, UINT64_MAX);
	rc = tfs_raid_truncate(fs, in, len, seq != 0);
	tfs_ns_cut_end(fs, in, seq);
	if (fs->cache)
		tfs_cache_zero_end(fs, in, 0, 0);
	return rc;
}
