/* opts.c - the SSD tier's mount options and mode names.
 *
 * Owns: turning the -o cache_* options into the cache's geometry and
 * tunables (c_config), the check of them that runs before anything is
 * touched (tfs_cache_opts_check).  The modes' names are rules.c's.
 *
 * Invariants:
 *  1. tfs_cache_opts_check runs the same c_config as tfs_cache_setup, on
 *     a scratch cache, so an option the set-up would refuse is refused
 *     before anything is made (bind.c invariant 4).
 *  2. A cache c_config accepts has an extent that is a power of two from
 *     4K to 1M (a sector bitmap covers it: TFS_CEXT_WORDS), 16 to
 *     UINT32_MAX/2 slots, and dirty_low < dirty_high; c_probe holds an
 *     existing cache's geometry to the same extent range (store.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierfs/cache.h"
#include "tierfs/mrc.h"
#include "tierfs/parse.h"
#include "cache_i.h"

#define DEF_SIZE	(1ull << 30)
#define DEF_EXTENT	(256u << 10)

/* Options into c (the ranges of the numbers were checked by tierfs.c);
 * returns 0 or -EINVAL with err set. */
int c_config(struct tfs_cache *c, const struct tfs_cache_opts *o, char *err, size_t errlen)
{
	uint64_t ext = o->extent ? o->extent : DEF_EXTENT, size = o->size ? o->size : DEF_SIZE;
	char b1[32], b2[32], b3[32];

	if (ext < C_SECTOR || ext > C_SECTOR * 64 * TFS_CEXT_WORDS || (ext & (ext - 1))) {
		snprintf(err, errlen, "cache_extent=%s: a power of two from 4K to 1M",
			 tfs_fmt_size(ext, b1, sizeof(b1)));
		return -EINVAL;
	}
	c->extent = (uint32_t)ext;
	if (size / ext < 16 || size / ext > UINT32_MAX / 2) {
		snprintf(err, errlen, "cache_size=%s: from 16 extents (%s) to %u extents of %s",
			 tfs_fmt_size(size, b1, sizeof(b1)), tfs_fmt_size(ext * 16, b2, sizeof(b2)),
			 UINT32_MAX / 2, tfs_fmt_size(ext, b3, sizeof(b3)));
		return -EINVAL;
	}
	c->nslots = (uint32_t)(size / ext);
	c->seq_cutoff = o->seq_cutoff;
	c->mode = TFS_CACHE_WRITEBACK;
	if (o->mode && tfs_cache_mode_parse(o->mode, &c->mode)) {
		snprintf(err, errlen, "cache_mode=%s: writeback, writethrough, writearound or off",
			 o->mode);
		return -EINVAL;
	}
	c->policy_kind = TFS_POLICY_DEFAULT;
	if (o->policy && tfs_policy_parse(o->policy, &c->policy_kind)) {
		snprintf(err, errlen, "cache_policy=%s: wtinylfu, s3fifo or lru", o->policy);
		return -EINVAL;
	}
	c->promote = o->promote ? o->promote : TFS_TUNE_START;	/* 0 to 65535; 0: the tuner */
	c->promote_auto = o->promote == 0;
	c->halflife = (uint32_t)(o->halflife * 16);	/* 1 to 604800 s, in 1/16 s */
	c->dirty_low = o->dirty_low;
	c->dirty_high = o->dirty_high;
	c->reclaim_mode = TFS_RECLAIM_DEFAULT;
	if (o->reclaim && tfs_reclaim_parse(o->reclaim, &c->reclaim_mode)) {
		snprintf(err, errlen, "cache_reclaim=%s: 0, 1 or auto", o->reclaim);
		return -EINVAL;
	}
	if (c->dirty_low >= c->dirty_high) {	/* each in range, but not together */
		snprintf(err, errlen, "cache_dirty_low=%u, cache_dirty_high=%u: 0 <= low < high <= 100",
			 c->dirty_low, c->dirty_high);
		return -EINVAL;
	}
	return 0;
}

int tfs_cache_opts_check(const struct tfs_cache_opts *o, char *err, size_t errlen)
{
	struct tfs_cache *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = c_config(c, o, err, errlen);
	free(c);
	return rc;
}

