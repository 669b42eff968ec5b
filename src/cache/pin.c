/* pin.c - files kept in the SSD tier (a file's user.tierfs.pinned).
 *
 * Owns: which files are pinned (cfile.pinned, their records in the store's
 * "pin" database), the extents they reserve under the cap (c->pin_*), and
 * the keep flag of their slots.
 *
 * Invariants:
 *  1. A pinned file's slots are never evicted (cext.keep: index.c's
 *     evictable); they change as any extent does otherwise: written,
 *     flushed, cut, invalidated by a write-around write.
 *  2. Pinned files reserve at most C_PIN_CAP_PCT of the slots.  A pin
 *     reserves the file's size in extents as it is then, and one that
 *     would pass the cap is refused with nothing changed; a pinned file
 *     that grows keeps its new extents too, past its reservation (the cap
 *     bounds what pins ask, not what a growing file holds).
 *  3. A pin or an unpin is durable when it returns: its record is applied
 *     and a durability point made; if either fails, the file is put back
 *     as it was.  Pinning then loads every extent of the file the tier
 *     does not hold, as the promoter would, from the caller's thread.
 *  4. A removed file's pin goes with it (tfs_cache_forget), its record's
 *     removal at the next durability point; after a power cut before that
 *     the record stays, reserving extents for a file nobody has (the
 *     status counts it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tierfs/fs.h"
#include "tierfs/log.h"
#include "tierfs/ns.h"
#include "cache_i.h"

/* f is (on) or is no longer pinned, reserving need extents.  Under
 * c->lock. */
static void mark(struct tfs_cache *c, struct cfile *f, bool on, uint32_t need)
{
	if (f->pinned) {
		c->pin_reserved -= f->pin_need;
		c->pin_files--;
	}
	f->pinned = on;
	f->pin_need = on ? need : 0;
	if (on) {
		c->pin_reserved += need;
		c->pin_files++;
	}
	for (uint32_t s = f->head; s != C_NONE; s = c->e[s].fnext)
		c->e[s].keep = on;
}

static int load_pin(void *arg, uint64_t fid, uint64_t need)
{
	struct tfs_cache *c = arg;
	struct cfile *f = c_file_get(c, fid);

	if (!f)
		return -ENOMEM;
	mark(c, f, true, need > UINT32_MAX ? UINT32_MAX : (uint32_t)need);
	return 0;
}

int c_pin_load(struct tfs_cache *c)
{
	return tfs_cstore_pin_foreach(c->cs, load_pin, c);
}

bool c_pin_forget(struct tfs_cache *c, uint64_t fid, struct tfs_cstore_op *op)
{
	struct cfile *f = c_file_find(c, fid);

	if (!f || !f->pinned)
		return false;
	mark(c, f, false, 0);
	*op = (struct tfs_cstore_op){ .op = TFS_CS_DEL_PIN, .fid = fid };
	return true;
}

/* Loads the extents [0, need) of in the tier does not hold, the file
 * opened on the members for it.  Returns how many could not be. */
static uint32_t load(struct tfs_cache *c, struct tfs_inode *in, uint32_t need)
{
	uint32_t missing = 0;

	if (need && tfs_ns_open(c->fs, in))
		return need;
	for (uint32_t idx = 0; idx < need; idx++) {
		bool held;

		pthread_mutex_lock(&c->lock);
		held = c_lookup(c, in->fid, idx) != C_NONE;
		pthread_mutex_unlock(&c->lock);
		if (!held && !c_promote_now(c, in, idx))
			missing++;
	}
	if (need)
		tfs_ns_release(c->fs, in);
	return missing;
}

int c_pin_set(struct tfs_cache *c, struct tfs_inode *in, bool on, char *err, size_t errlen)
{
	uint32_t cap = (uint32_t)((uint64_t)c->nslots * C_PIN_CAP_PCT / 100), need, was_need;
	struct tfs_cstore_op op = { .op = on ? TFS_CS_PUT_PIN : TFS_CS_DEL_PIN, .fid = in->fid };
	uint64_t size;
	struct cfile *f;
	bool was;
	int rc;

	pthread_mutex_lock(&in->lock);
	size = in->size;
	pthread_mutex_unlock(&in->lock);
	need = (uint32_t)((size + c->extent - 1) / c->extent);
	if (size > (uint64_t)cap * c->extent)
		need = cap + 1;		/* over the cap whatever else is pinned */
	pthread_mutex_lock(&c->lock);
	f = c_file_get(c, in->fid);
	if (!f) {
		pthread_mutex_unlock(&c->lock);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	was = f->pinned;
	was_need = f->pin_need;
	if (on && c->pin_reserved - (was ? was_need : 0) + need > cap) {
		snprintf(err, errlen, "pinning needs %u extents of %u KiB; %u of the cap of %u "
			 "(%u%% of the tier) are reserved by %u pinned files", need,
			 c->extent / 1024, c->pin_reserved - (was ? was_need : 0), cap,
			 C_PIN_CAP_PCT, c->pin_files - was);
		pthread_mutex_unlock(&c->lock);
		return -ENOSPC;
	}
	if (!on && !was) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	mark(c, f, on, need);
	pthread_mutex_unlock(&c->lock);
	op.size = need;
	rc = c_commit(c, &op, 1);
	if (rc == 0)
		rc = tfs_cstore_sync(c->cs);
	if (rc) {
		pthread_mutex_lock(&c->lock);
		f = c_file_find(c, in->fid);
		if (f) {
			mark(c, f, was, was_need);
			c_file_maybe_free(c, f);
		}
		pthread_mutex_unlock(&c->lock);
		snprintf(err, errlen, "the tier's store: %s", strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	f = c_file_find(c, in->fid);
	if (f && !on)
		c_file_maybe_free(c, f);
	pthread_mutex_unlock(&c->lock);
	tfs_info("cache %s: file %" PRIu64 " %s (%u extents)", c->dir, in->fid,
		 on ? "pinned" : "unpinned", need);
	if (on) {
		uint32_t missing = load(c, in, need);

		if (missing) {
			snprintf(err, errlen, "pinned, but %u of its %u extents could not be loaded "
				 "(no clean slot to spare, or the mode is off)", missing, need);
			return -ENOSPC;
		}
	}
	return 0;
}
