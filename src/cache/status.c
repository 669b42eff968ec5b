/* status.c - the SSD tier's status lines and control commands.
 *
 * Owns: the cache.* lines of user.tierfs.status (tfs_cache_stats;
 * fuse/control.c composes the whole status), the per-file
 * user.tierfs.cache (tfs_cache_file_stats), and the cache commands of
 * user.tierfs.ctl: flush, cache_mode, detach (the detach itself is
 * bind.c's c_detach).
 *
 * Invariants:
 *  1. The status's counts are one snapshot, taken in one c->lock section
 *     (the geometry and the tunables do not change while mounted); the
 *     cache directory is shown only when paths says so (to root,
 *     fuse/control.c).
 *  2. A command changes nothing on a read-only mount or with no cache
 *     attached.  cache_mode is one atomic store; a mode other than
 *     write-back also asks for a flush (dirty extents take writes
 *     write-back until they are flushed, write.c invariant 1).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tierfs/cache.h"
#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/ns.h"
#include "cache_i.h"

int tfs_cache_stats(struct tfs_fs *fs, char *buf, size_t len, bool paths)
{
	struct tfs_cache *c = fs->cache;
	unsigned hot = 0, warm = 0, cold = 0;
	uint32_t now = c_now();
	struct cstats st;
	uint64_t dirty;
	uint32_t used, ndirty, unresolved;
	enum tfs_cache_mode mode;
	bool flushing, flush_unresolved;
	char ferr[96] = "";
	int l, flush_err;

	if (!c || c->detached)
		return snprintf(buf, len, "cache=none\n");
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nslots; s++) {
		unsigned h;

		if (!c->e[s].used)
			continue;
		h = c_heat_now(c, c->e[s].heat, c->e[s].heat_t, now);
		if (h >= 2 * c->promote)
			hot++;
		else if (h >= c->promote)
			warm++;
		else
			cold++;
	}
	st = c->st;
	dirty = c->dirty_sectors * C_SECTOR;
	used = c->nused;
	ndirty = c->ndirty;
	unresolved = c->unresolved;
	flushing = c->flush_req != c->flush_done;
	flush_err = c->flush_err;
	flush_unresolved = c->flush_unresolved;
	mode = c_mode(c);
	pthread_mutex_unlock(&c->lock);
	if (flush_err)
		snprintf(ferr, sizeof(ferr), "%s", strerror(-flush_err));
	else if (flush_unresolved && unresolved)
		snprintf(ferr, sizeof(ferr), "%u files with dirty data not found since the restart",
			 unresolved);
	l = snprintf(buf, len,
		     "cache=%s\ncache.uuid=%s\ncache.mode=%s\ncache.policy=%s\n"
		     "cache.extent=%u\ncache.slots=%u\ncache.size=%" PRIu64 "\n"
		     "cache.cached_extents=%u\ncache.dirty_extents=%u\ncache.dirty_bytes=%" PRIu64 "\n"
		     "cache.hot_extents=%u\ncache.warm_extents=%u\ncache.cold_extents=%u\n"
		     "cache.read_hits=%" PRIu64 "\ncache.read_misses=%" PRIu64 "\n"
		     "cache.read_hit_bytes=%" PRIu64 "\ncache.read_miss_bytes=%" PRIu64 "\n"
		     "cache.ring_hits=%" PRIu64 "\ncache.ring_writes=%" PRIu64 "\n"
		     "cache.write_hits=%" PRIu64 "\ncache.write_misses=%" PRIu64 "\n"
		     "cache.write_around=%" PRIu64 "\ncache.seq_bypass=%" PRIu64 "\n"
		     "cache.full_bypass=%" PRIu64 "\n"
		     "cache.promotions=%" PRIu64 "\ncache.promote_dropped=%" PRIu64 "\n"
		     "cache.evictions=%" PRIu64 "\ncache.invalidations=%" PRIu64 "\n"
		     "cache.fills=%" PRIu64 "\ncache.flushed_bytes=%" PRIu64 "\n"
		     "cache.flush_writes=%" PRIu64 "\ncache.flush_syncs=%" PRIu64 "\n"
		     "cache.full_stripe_flushes=%" PRIu64 "\n"
		     "cache.throttled=%" PRIu64 "\ncache.flush_pending=%d\n"
		     "cache.unresolved_files=%u\ncache.promote_threshold=%u\n"
		     "cache.seq_cutoff=%" PRIu64 "\ncache.dirty_low=%u\ncache.dirty_high=%u\n"
		     "cache.flush_error=%s\n",
		     paths ? c->dir : "-", c->uuid, tfs_cache_mode_name(mode), tfs_policy_name(c->policy_kind),
		     c->extent, c->nslots, (uint64_t)c->nslots * c->extent,
		     used, ndirty, dirty, hot, warm, cold,
		     st.read_hits, st.read_misses, st.read_hit_bytes, st.read_miss_bytes,
		     st.ring_hits, st.ring_writes,
		     st.write_hits, st.write_misses, st.write_around, st.seq_bypass, st.full_bypass,
		     st.promotions, st.promote_dropped, st.evictions, st.invalidations,
		     st.fills, st.flushed_bytes, st.flush_writes, st.flush_syncs, st.full_stripe_flushes,
		     st.throttled, flushing, unresolved, c->promote, c->seq_cutoff,
		     c->dirty_low, c->dirty_high, ferr);
	return l < 0 ? 0 : (size_t)l >= len ? (int)len - 1 : l;
}

int tfs_cache_file_stats(struct tfs_fs *fs, struct tfs_inode *in, char *buf, size_t len)
{
	struct tfs_cache *c = fs->cache;
	uint64_t cached = 0, dirty = 0;
	struct cfile *f;
	int rc = tfs_ns_load_file(fs, in);

	if (rc)
		return rc;
	if (c && !c->detached) {
		pthread_mutex_lock(&c->lock);
		f = c_file_find(c, in->fid);
		for (uint32_t s = f ? f->head : C_NONE; s != C_NONE; s = c->e[s].fnext) {
			cached += (uint64_t)bm_count(c->e[s].valid) * C_SECTOR;
			dirty += (uint64_t)bm_count(c->e[s].dirty) * C_SECTOR;
		}
		pthread_mutex_unlock(&c->lock);
	}
	rc = snprintf(buf, len, "fid=%" PRIu64 "\ncached_bytes=%" PRIu64 "\ndirty_bytes=%" PRIu64
		      "\n", in->fid, cached, dirty);
	return rc >= (int)len ? -ERANGE : rc;
}

int tfs_cache_ctl(struct tfs_fs *fs, const char *cmd, const char *arg, char *err,
		  size_t errlen)
{
	struct tfs_cache *c = fs->cache;
	enum tfs_cache_mode m;

	if (!c || c->detached) {
		snprintf(err, errlen, "no cache is attached (mount with -o cache=DIR)");
		return -ENODEV;
	}
	if (c->readonly) {
		snprintf(err, errlen, "the mount is read-only");
		return -EROFS;
	}
	if (strcmp(cmd, "flush") == 0) {
		pthread_mutex_lock(&c->lock);
		c_flush_request(c);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (strcmp(cmd, "cache_mode") == 0) {
		if (!arg || tfs_cache_mode_parse(arg, &m)) {
			snprintf(err, errlen, "cache_mode: writeback, writethrough, writearound or off");
			return -EINVAL;
		}
		__atomic_store_n(&c->mode, m, __ATOMIC_RELEASE);
		tfs_info("cache %s: mode %s", c->dir, tfs_cache_mode_name(m));
		if (m != TFS_CACHE_WRITEBACK) {	/* leaving write-back: drain */
			pthread_mutex_lock(&c->lock);
			c_flush_request(c);
			pthread_mutex_unlock(&c->lock);
		}
		return 0;
	}
	if (strcmp(cmd, "detach") == 0)
		return c_detach(c, err, errlen);
	snprintf(err, errlen, "unknown cache command '%s' (flush, cache_mode MODE, detach)", cmd);
	return -EINVAL;
}
