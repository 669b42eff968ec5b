/* read.c - the SSD tier's read path and the I/O thread's hit API.
 *
 * Owns: tfs_cache_read (a request over any extents: hits from the SSD,
 * the rest from the RAID in one request, the SSD's valid sectors over
 * it, promotions queued), tfs_cache_holds (would a read touch the RAID),
 * and the hit API the I/O thread reads on io_uring (fuse/hitio.c):
 * tfs_cache_hit_begin, _read, _end.
 *
 * Invariants:
 *  1. A read pins every slot it copies from, in the c->lock section that
 *     snapshots the slot's valid sectors, and unpins it after the copy; it
 *     never owns a slot (busy) nor waits for a slot's owner (a writer, a
 *     fill, an invalidation); index.c invariant 2 keeps a pinned slot
 *     from reuse.
 *  2. A piece whose every sector is valid (in mode off: of an extent with
 *     dirty sectors) is read from the SSD alone.  Any other piece is read
 *     from the RAID, in one request over the span of the misses, and the
 *     sectors valid in its slot when pinned are copied over the RAID's
 *     bytes: dirty ones are newer, clean ones the same (write.c
 *     invariant 3).
 *  3. tfs_cache_holds, and tfs_cache_hit_begin but for TFS_HIT, change
 *     nothing; TFS_HIT counts, heats and notes the request as
 *     tfs_cache_read does a hit, and its slot stays pinned until
 *     tfs_cache_hit_end.
 *  4. A read queues a promotion only of an extent not cached, outside a
 *     sequential stream (or in one, of an extent with a heat of
 *     TFS_SEQ_HOT: rules.c), in a mode other than off, on a read-write mount,
 *     with heat of at least cache_promote, not queued already and with no
 *     RAID write of it in flight (write.c invariant 2), and only after the
 *     read succeeded; the promoter looks again before it allocates
 *     (flush.c invariant 5).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "tierfs/cache.h"
#include "tierfs/log.h"
#include "tierfs/fs.h"
#include "tierfs/raid.h"
#include "cache_i.h"

/* fid and logical size of an open file if it is loaded (nothing else
 * changes); false if not. */
static bool file_peek(struct tfs_inode *in, uint64_t *fid, uint64_t *size)
{
	bool known;

	pthread_mutex_lock(&in->lock);
	*fid = in->fid;
	*size = in->size;
	known = in->fid_valid && in->size_valid;
	pthread_mutex_unlock(&in->lock);
	return known;
}

/* Whether extent x serves sectors [s0, s1) to a reader: all valid, and
 * the mode reads the cache (off still serves dirty extents). */
static bool serves(const struct cext *x, enum tfs_cache_mode mode, unsigned s0, unsigned s1)
{
	struct tfs_rd_in r = { .mode = mode, .cached = true, .full = bm_all(x->valid, s0, s1),
			       .dirty = bm_any(x->dirty) };

	return tfs_rule_read(&r) == TFS_RD_HIT;
}

/* Copy the valid sector runs of p from its slot over buf (which holds
 * p's bytes at buf + (p->a - off)). */
static int overlay(struct tfs_cache *c, const struct piece *p, bool direct, char *buf,
		   uint64_t off)
{
	uint64_t base = p->idx * c->extent;
	unsigned s0, s1, s = 0;

	c_piece_sectors(c, p, &s0, &s1);
	for (s = s0; s < s1;) {
		uint64_t a, b;
		unsigned t = s;
		int rc;

		if (!bm_test(p->valid, s)) {
			s++;
			continue;
		}
		while (t < s1 && bm_test(p->valid, t))
			t++;
		a = base + (uint64_t)s * C_SECTOR;
		b = base + (uint64_t)t * C_SECTOR;
		if (a < p->a)
			a = p->a;
		if (b > p->b)
			b = p->b;
		rc = c_ssd_io(c, false, direct, buf + (a - off), b - a,
			      c_slot_off(c, p->slot) + (a - base));
		if (rc)
			return rc;
		s = t;
	}
	return 0;
}

bool tfs_cache_holds(struct tfs_fs *fs, struct tfs_inode *in, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	uint64_t fid, size;
	struct piece *p;
	unsigned np;
	bool all;

	if (tfs_cache_detached(c))
		return false;
	all = file_peek(in, &fid, &size);
	if (!all || off >= size || len == 0)
		return all;
	if (len > size - off)
		len = (size_t)(size - off);
	p = c_pieces_of(c, off, len, &np, NULL);
	if (!p)
		return false;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np && all; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);
		unsigned s0, s1;

		c_piece_sectors(c, &p[i], &s0, &s1);
		all = s != C_NONE && serves(&c->e[s], c_mode(c), s0, s1);
	}
	pthread_mutex_unlock(&c->lock);
	return all;
}

enum tfs_hit tfs_cache_hit_begin(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
				 struct tfs_cache_hit *hit, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	uint64_t fid, size, idx = off / c->extent, base = idx * c->extent;
	uint32_t now = c_now(), s;
	struct cext *x;
	unsigned s0, s1;
	bool seq;

	if (tfs_cache_detached(c))
		return TFS_HIT_NO;
	if (!file_peek(in, &fid, &size) || off >= size || len == 0)
		return TFS_HIT_UNSURE;
	if (len > size - off)
		len = (size_t)(size - off);
	if ((off + len - 1) / c->extent != idx)
		return TFS_HIT_UNSURE;	/* more than one extent */
	s0 = (unsigned)((off - base) / C_SECTOR);
	s1 = (unsigned)((off + len - base + C_SECTOR - 1) / C_SECTOR);
	pthread_mutex_lock(&c->lock);
	s = c_lookup(c, fid, idx);
	x = s == C_NONE ? NULL : &c->e[s];
	if (!x || !serves(x, c_mode(c), s0, s1)) {
		pthread_mutex_unlock(&c->lock);
		return TFS_HIT_NO;
	}
	/* what tfs_cache_read does for a hit */
	c->last_io = now;
	x->pins++;
	c_heat_bump(c, &x->heat, &x->heat_t, now);
	c_read_hit(c, s);
	c->st.read_hits++;
	c->st.read_hit_bytes += len;
	c->st.read_req_hits++;
	pthread_mutex_unlock(&c->lock);
	c_count_file(in, false, true, TFS_BYPASS_NONE);
	c_trace(fid, off, len, TFS_TR_READ, TFS_TR_HIT | (direct ? TFS_TR_DIRECT : 0));
	pthread_mutex_lock(&in->lock);
	seq = c_seq_note(c, in, off, len);
	pthread_mutex_unlock(&in->lock);
	c_watch(c, fid, off, len, false, seq ? TFS_SEQ_AROUND : 0u);
	*hit = (struct tfs_cache_hit){ .slot = s, .len = len, .direct = direct,
				       .off = c_slot_off(c, s) + (off - base) };
	hit->fd = c_ssd_fd(c, direct, NULL, hit->len, hit->off);
	return TFS_HIT;
}

int tfs_cache_hit_read(struct tfs_fs *fs, const struct tfs_cache_hit *hit, void *buf)
{
	return c_ssd_io(fs->cache, false, hit->direct, buf, hit->len, hit->off);
}

void tfs_cache_hit_end(struct tfs_fs *fs, const struct tfs_cache_hit *hit, int res, bool ring)
{
	struct tfs_cache *c = fs->cache;

	if (res < 0 && ring)	/* c_ssd_io logged its own */
		tfs_err("cache %s: read of %zu bytes at %" PRIu64 ": %s", c->dir, hit->len,
			hit->off, strerror(-res));
	pthread_mutex_lock(&c->lock);
	c->st.ring_hits += ring;
	c_unpin(c, hit->slot);
	pthread_mutex_unlock(&c->lock);
}

ssize_t tfs_cache_read(struct tfs_fs *fs, struct tfs_inode *in, bool direct, void *buf,
		       size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	enum tfs_cache_mode mode = c_mode(c);
	uint64_t fid, size, miss_a = UINT64_MAX, miss_b = 0;
	uint32_t now = c_now();
	struct piece *p;
	unsigned np, npromote = 0;
	bool seq;
	int rc = c_file_snap(c, in, off, len, &fid, &size, &seq);

	if (rc)
		return rc;
	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	p = c_pieces_of(c, off, len, &np, NULL);
	if (!p)
		return -ENOMEM;

	pthread_mutex_lock(&c->lock);
	c->last_io = now;
	for (unsigned i = 0; i < np; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);
		struct cext *x = s == C_NONE ? NULL : &c->e[s];
		struct tfs_heat_ent *g = NULL;
		struct tfs_rd_in r = { .mode = mode, .readonly = c->readonly, .seq = seq,
				       .promote = c_promote(c), .cached = x != NULL };
		unsigned s0, s1;

		c_piece_sectors(c, &p[i], &s0, &s1);
		if (x) {
			x->pins++;
			p[i].slot = s;
			memcpy(p[i].valid, x->valid, sizeof(p[i].valid));
			r.full = bm_all(x->valid, s0, s1);
			r.dirty = bm_any(x->dirty);
			r.heat = c_heat_bump(c, &x->heat, &x->heat_t, now);
			r.blocked = x->fillq || x->busy;
			if (r.full)
				c_read_hit(c, s);
		} else {
			uint64_t key = c_ekey(fid, p[i].idx);

			g = c_uheat(c, key, now);
			r.heat = c_heat_bump(c, &g->heat, &g->t, now);
			tfs_policy_seen(c->pol, key);	/* W-TinyLFU's sketch counts misses */
			c_evidence_miss(c, key);
			r.blocked = g->queued || c->guard[key % C_GUARDS];
		}
		switch (tfs_rule_read(&r)) {
		case TFS_RD_HIT:
			p[i].full = true;
			c->st.read_hits++;
			c->st.read_hit_bytes += p[i].b - p[i].a;
			continue;
		case TFS_RD_SEQ:
			c->st.seq_bypass++;
			break;
		case TFS_RD_MISS:
			break;
		case TFS_RD_FILL:
			/* cached, but not the sectors read: filled as a
			 * promotion would (flush.c invariant 14) */
			p[i].fill = true;
			/* fall through */
		case TFS_RD_PROMOTE:
			p[i].promote = true;
			npromote++;
			break;
		}
		c->st.read_misses++;
		c->st.read_miss_bytes += p[i].b - p[i].a;
		if (miss_a == UINT64_MAX)
			miss_a = p[i].a;
		miss_b = p[i].b;
	}
	if (miss_a == UINT64_MAX)
		c->st.read_req_hits++;
	else
		c->st.read_req_misses++;
	pthread_mutex_unlock(&c->lock);
	c_count_file(in, false, miss_a == UINT64_MAX,
		     miss_a != UINT64_MAX && seq ? TFS_BYPASS_SEQ : TFS_BYPASS_NONE);
	c_trace(fid, off, len, TFS_TR_READ,
		(miss_a == UINT64_MAX ? TFS_TR_HIT : 0) | (direct ? TFS_TR_DIRECT : 0));
	c_watch(c, fid, off, len, false, seq ? TFS_SEQ_AROUND : 0u);

	/* the RAID for everything not wholly in the cache, in one request;
	 * then the cache's sectors over it (the pinned slots stay put) */
	if (miss_a != UINT64_MAX) {
		ssize_t r = tfs_raid_read(fs, in, direct, (char *)buf + (miss_a - off),
					  miss_b - miss_a, miss_a);

		if (r < 0)
			rc = (int)r;
		else if ((uint64_t)r < miss_b - miss_a)
			memset((char *)buf + (miss_a - off) + r, 0, miss_b - miss_a - (size_t)r);
	}
	for (unsigned i = 0; i < np && rc == 0; i++) {
		if (p[i].slot == C_NONE)
			continue;
		if (p[i].full)
			rc = c_ssd_io(c, false, direct, (char *)buf + (p[i].a - off),
				      p[i].b - p[i].a, c_slot_off(c, p[i].slot) + p[i].a -
				      p[i].idx * c->extent);
		else if (p[i].b > miss_a && p[i].a < miss_b)
			rc = overlay(c, &p[i], direct, buf, off);
	}
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np; i++)
		if (p[i].slot != C_NONE)
			c_unpin(c, p[i].slot);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < np && npromote && rc == 0; i++)
		if (p[i].promote)
			c_promote_queue(c, in, p[i].idx, p[i].fill);
	return rc ? rc : (ssize_t)len;
}
