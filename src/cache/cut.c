/* cut.c - the SSD tier's side of truncate, punch, zero range and unlink.
 *
 * Owns: zeroing or dropping a byte range of a file's cached extents
 * (c_zero_file), the hooks the namespace and the data path call around a
 * cut (tfs_cache_zero_begin, tfs_cache_zero_end), and forgetting a file
 * whose last name is gone (tfs_cache_forget).
 *
 * Invariants:
 *  1. Sectors are 4K; slot bytes past the logical size are zeros, so a
 *     file that grows again reads zeros there.
 *  2. Nothing drops a dirty sector whose members' bytes are older while
 *     the members could still show them after a crash: a punch or zero
 *     range drops it only once the members are punched and synced
 *     (tfs_data_fallocate), a truncate only behind a durable intent that
 *     cuts the members (tfs_data_truncate), an unlinked file's go with it.
 *  3. A cut owns the slots it changes (busy), taken in extent order as
 *     writers and the flusher take them, and commits their records while
 *     it still owns them, before a dropped slot can be reused (index.c
 *     invariant 1); from tfs_cache_zero_begin to tfs_cache_zero_end it
 *     holds the file (c_file_hold), so the flusher writes nothing of it to
 *     the RAID in between (flush.c invariant 1).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "tierfs/cache.h"
#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "cache_i.h"

/* Zero or drop [off, off+len) of x's extent; returns true if the slot is
 * now empty.  Partial sectors keep their state; their cut bytes become
 * zeros in the slot (invariant 1). */
static bool zero_extent(struct tfs_cache *c, uint32_t s, uint64_t off, uint64_t len)
{
	struct cext *x = &c->e[s];
	struct cfile *f = c_file_find(c, x->fid);
	uint64_t base = x->idx * c->extent, a = off > base ? off - base : 0;
	uint64_t b = off + len - base < c->extent ? off + len - base : c->extent;
	unsigned before = bm_count(x->dirty);
	unsigned fa = (unsigned)((a + C_SECTOR - 1) / C_SECTOR), fb = (unsigned)(b / C_SECTOR);
	static const char zeros[C_SECTOR];

	if (fb > fa) {
		bm_clear(x->valid, fa, fb);
		bm_clear(x->dirty, fa, fb);
	}
	/* cut parts of the edge sectors (in the slot only if valid there) */
	for (unsigned sec = (unsigned)(a / C_SECTOR); sec < (b + C_SECTOR - 1) / C_SECTOR; sec++) {
		uint64_t sa = (uint64_t)sec * C_SECTOR, sb = sa + C_SECTOR;
		uint64_t za = a > sa ? a : sa, zb = b < sb ? b : sb;

		if ((za == sa && zb == sb) || !bm_test(x->valid, sec))
			continue;
		if (c_ssd_io(c, true, false, (void *)zeros, zb - za, c_slot_off(c, s) + za)) {
			bm_clear(x->valid, sec, sec + 1);	/* cannot zero: forget */
			bm_clear(x->dirty, sec, sec + 1);
		}
	}
	c_dirty_add(c, f, (int64_t)bm_count(x->dirty) - before);
	if (before && !bm_count(x->dirty))
		c_file_cleaned(c, f, x);
	c->st.invalidations++;
	return !bm_any(x->valid);
}

struct zslot {
	uint64_t idx;
	uint32_t slot;
	bool drop;
};

static int zslot_cmp(const void *a, const void *b)
{
	const struct zslot *x = a, *y = b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Zero or drop [off, off+len) of every cached extent of f; trunc: the
 * members take the size now, so the size record goes.  The caller holds
 * f->flock (the flusher is off the file) and a reference on f. */
int c_zero_file(struct tfs_cache *c, struct cfile *f, uint64_t off, uint64_t len, bool trunc)
{
	struct tfs_cstore_op *ops;
	struct tfs_cext_rec *recs;
	struct zslot *z;
	unsigned n = 0, m = 0;
	int rc = -ENOMEM;

	pthread_mutex_lock(&c->lock);
	ops = calloc(f->ncached + 1, sizeof(*ops));
	recs = calloc(f->ncached + 1, sizeof(*recs));
	z = calloc(f->ncached + 1, sizeof(*z));
	if (!ops || !recs || !z) {
		pthread_mutex_unlock(&c->lock);
		tfs_err("cache %s: out of memory dropping extents of file %" PRIu64, c->dir, f->fid);
		goto out;
	}
	for (uint32_t s = f->head; s != C_NONE; s = c->e[s].fnext) {
		uint64_t base = c->e[s].idx * c->extent;

		if (base + c->extent > off && base < off + len)
			z[n++] = (struct zslot){ .idx = c->e[s].idx, .slot = s };
	}
	/* owned in extent order, as writers and the flusher do: no cycles */
	qsort(z, n, sizeof(*z), zslot_cmp);
	for (unsigned i = 0; i < n; i++) {
		uint32_t s = z[i].slot;
		struct cext *x = &c->e[s];

		c_wait_idle(c, x);
		if (!x->used || x->fid != f->fid || x->idx != z[i].idx) {
			z[i].slot = C_NONE;	/* gone while we waited */
			c_release_busy(c, s);
			continue;
		}
		z[i].drop = zero_extent(c, s, off, len);
		if (z[i].drop) {
			ops[m++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = f->fid,
							   .idx = x->idx };
		} else {
			c_record(c, s, &recs[m]);
			ops[m] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &recs[m] };
			m++;
		}
	}
	if (trunc && f->size) {
		f->size = 0;
		ops[m++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_SIZE, .fid = f->fid };
	}
	pthread_mutex_unlock(&c->lock);
	(void)c_journal_drain(c);	/* a failed change is retried (logged) */
	/* committed while the extents are still busy, before a dropped slot
	 * can be reused (index.c invariant 1); if the commit failed the records may
	 * still name the dropped slots: they stay, empty, until an eviction
	 * deletes the records */
	rc = c_commit(c, ops, m);
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < n; i++) {
		if (z[i].slot == C_NONE)
			continue;
		c_release_busy(c, z[i].slot);
		if (z[i].drop && rc == 0)
			c_unlink_slot(c, z[i].slot);
	}
	pthread_mutex_unlock(&c->lock);
out:
	free(ops);
	free(recs);
	free(z);
	return rc;
}

/* [off, off+len) of fid is gone (len UINT64_MAX: to the end): the trace
 * and the miniatures are told (invariant 4). */
static void told(struct tfs_cache *c, uint64_t fid, uint64_t off, uint64_t len)
{
	const uint64_t most = 1u << 30;	/* a record's length is 32 bits */

	if (len == UINT64_MAX)
		c_trace(fid, off, 0, TFS_TR_CUT, TFS_TR_TO_END);
	else
		for (uint64_t done = 0; done < len; done += most)
			c_trace(fid, off + done, len - done < most ? len - done : most, TFS_TR_CUT, 0);
	c_watch_cut(c, fid, off, len);
}

void tfs_cache_zero_begin(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;
	bool trunc = len == UINT64_MAX;

	if (!in->fid_valid)
		return;
	if (trunc)
		told(c, in->fid, off, UINT64_MAX);
	if (!(f = c_file_hold(c, in->fid)))
		return;
	/* a store error is logged and keeps the dropped slots owned (the
	 * truncate's own order is DESIGN §10.3's) */
	if (len)
		(void)c_zero_file(c, f, off, trunc ? UINT64_MAX - off : len, trunc);
	/* f stays held (flusher off) until tfs_cache_zero_end */
}

void tfs_cache_zero_end(struct tfs_fs *fs, struct tfs_inode *in, uint64_t off, uint64_t len)
{
	struct tfs_cache *c = fs->cache;
	struct cfile *f;

	if (!in->fid_valid)
		return;
	if (len)
		told(c, in->fid, off, len);
	pthread_mutex_lock(&c->lock);
	f = c_file_find(c, in->fid);
	pthread_mutex_unlock(&c->lock);
	if (!f)
		return;
	/* still there: zero_begin's reference keeps it */
	if (len)
		c_zero_file(c, f, off, len, false);
	c_file_unhold(c, f);
}

void tfs_cache_forget(struct tfs_fs *fs, uint64_t fid)
{
	struct tfs_cache *c = fs->cache;
	struct tfs_cstore_op op;
	struct cfile *f;
	bool pinned;

	if (!c)
		return;
	told(c, fid, 0, UINT64_MAX);
	c_prenamed_forget(c, fid);	/* created, never written (index.c inv. 4) */

	if (!(f = c_file_hold(c, fid)))
		return;
	(void)c_zero_file(c, f, 0, UINT64_MAX, true);	/* logged; slots kept owned */
	pthread_mutex_lock(&c->lock);
	pinned = c_pin_forget(c, fid, &op);	/* pin.c invariant 4 */
	pthread_mutex_unlock(&c->lock);
	if (pinned)
		(void)c_commit(c, &op, 1);	/* logged */
	c_file_unhold(c, f);
}

