/* write.c - the SSD tier's write paths and fsync.
 *
 * Owns: tfs_cache_write in every mode (write-back into slots,
 * write-through to both tiers, write-around to the RAID with the SSD's
 * copy invalidated, the sequential bypass, uncached extents straight to
 * the RAID), the writer throttle above the high watermark,
 * tfs_cache_write_waits, and tfs_cache_fsync.
 *
 * Invariants:
 *  1. Dirty sectors are valid; a dirty or flushing extent takes every write
 *     write-back, whatever the mode, so the RAID is written by the flusher
 *     alone for it and never behind the flusher's back.
 *  2. A RAID write of an extent that is not cached raises guard[hash] for
 *     its duration; the promoter allocates only with the guard at zero, so
 *     a promotion never fills a slot with bytes a write is replacing.
 *  3. A clean valid sector's slot bytes equal the members' (the flusher
 *     writes them as part of whole rows): a write-back write over one
 *     marks it dirty, committed, before it changes the slot.
 *  4. A write that goes to the RAID over cached sectors (write-through,
 *     write-around) clears the valid sectors it overlaps, committed, before
 *     the RAID is written; write-through makes its whole sectors valid
 *     again only after both tiers have them.  A crash in between leaves
 *     those sectors to the members.
 *  5. Detach never leaves a write in an unbound cache: tfs_cache_write
 *     reads the mode and counts itself in c->writers in one c->lock
 *     section, after waiting while the detach's gate is closed, and goes
 *     to the RAID once the cache is detached.  The detach closes the gate,
 *     waits for the writers inside, and flushes what they wrote before it
 *     unbinds (bind.c c_detach).
 *  6. An fsync makes durable, in this order, the data file and the
 *     store's records (one durability point), the journal's CDIRTY
 *     changes drained so far, then, if both succeeded, the file on the
 *     members (tfs_raid_fsync); it fails if any of them failed (DESIGN
 *     §10.5).
 *  7. A write-back write that comes down to one piece of whole sectors in
 *     a slot it owns (busy) may leave its SSD write to the caller's ring
 *     (tfs_cache_write_ring): everything before the SSD write is done as
 *     for any write (plan, dirty first, the writer counted in), the bytes
 *     are copied into the job, and tfs_cache_write_end does what follows
 *     it, on whichever thread the completion comes, with the slot still
 *     busy and the writer still counted in until then.  So the flusher,
 *     a detach and an overlapping write wait for it as for a write on a
 *     worker, and the write is acknowledged only after write_finish.
 *     With the power-cut model on, the SSD write stays here: the model
 *     sees the data file's writes through libc (pcut_wrap.c), not a ring,
 *     so the power-cut tests run the same finish after the write's
 *     pwrite rather than a ring write the model would never lose.
 *  8. A write with TFS_CW_NOWAIT (a FUSE queue's thread, whose own ring
 *     completes the ring writes of invariant 7) waits for no other tier
 *     actor: if a slot it needs is busy (another writer, the flusher), a
 *     detach is deciding or the throttle would hold it, it returns
 *     -EWOULDBLOCK before it changes anything, under the same c->lock
 *     section that would have taken the slots (a detached tier too: its
 *     writes would go to the members here), and the caller hands it to
 *     a thread that may wait.  Otherwise the flusher, holding one slot
 *     and waiting for one a queue's ring write holds, and the queue's
 *     thread, waiting for the flusher's slot, would wait for each other.
 *  9. Above the high watermark a write-back write never takes a fresh
 *     slot: those pieces go to the RAID (guarded, as uncached extents do,
 *     invariant 2; counted in full_bypass), as bcache bypasses its cache
 *     past its cutoff.  Destaging a fresh slot costs the RAID write the
 *     bypass makes and a sync of the member files besides, so waiting for
 *     the flusher to free one was the slower road (a create-heavy load
 *     spent its time throttled, docs/PROFILE.md).  Only a write that would
 *     dirty an extent the tier holds clean waits for the flusher there
 *     (throttle): the tier's copy is the one it must change.
 * 10. A write of a stream past the cutoff that is not a full row (the
 *     kernel's 128K writes of a copy, on a RAID5 x4 of 64K chunks) takes
 *     the tier, so the flusher can write the RAID whole rows; its extents
 *     are streamed (cext.streamed, set on every cached write by whether
 *     it was such a write): the flusher does not spare them young, and
 *     once clean they are demoted, evicted first (flush.c invariant 17),
 *     unless read meanwhile (c_read_hit).  A copy into the mount no longer
 *     keeps the tier's other data out for longer than it takes to destage
 *     (the copy-and-edit trace: 1.0-1.5 points fewer misses at 10-20%,
 *     docs/CACHE_POLICY.md).
 * 11. In write-back, a write of a stream that is a full row (which goes
 *     around write-back, straight to the RAID, so that the flusher never
 *     reads it back) over an extent the tier does not hold keeps a clean
 *     copy of its whole sectors: a fresh slot (evicting as any
 *     allocation; none clean: the RAID's only, as before), written as
 *     write-through writes it but on a thread of its own while the RAID
 *     is written (fresh_write: the slot's write after the RAID's cost
 *     the copy 15%), valid, and its record committed, only once both have
 *     the bytes (invariant 4); a slot write that fails drops the copy,
 *     not the write, which the members took.  Demoted once written: the
 *     next victim, unless read before eviction gets there (c_read_hit
 *     moves it as any hit).  A copy read back soon
 *     after it was written hits; one never read costs one slot for a
 *     moment, and the SSD write, which LRU, keeping every write, pays too
 *     (the copy-and-edit trace: 0.4-0.8 points fewer misses at 5-20%,
 *     docs/CACHE_POLICY.md, "A copy's stream kept clean").  Counted in
 *     seq_bypass and stream_copies.  A copy counts once for the evidence
 *     (copy_ev, rules.h tfs_copy_take): used, at its first use (c_used),
 *     or unused, when it leaves the tier (c_unlink_slot); while fewer than
 *     1 in 16 of those resolved lately were used, 1 row in 16 is copied:
 *     a backup written to the mount stops paying the slot's write (the
 *     copy ran at 0.85x with every row copied, contrib/bench/copy_bench.sh).
 *     In write-through a stream's full row is copied the same way.
 * 12. In write-through any other write over an extent the tier does not
 *     hold keeps its sectors in a fresh slot, clean (TFS_WR_FRESH), as
 *     invariant 11's copies are kept: written beside the RAID, valid and
 *     recorded only once both have the bytes, dropped and not the write
 *     if the slot's write fails.  Not demoted, unless a stream's past the
 *     cutoff (invariant 10: evicted first once clean); counted in
 *     write_misses.  A write-through write's partial sectors, in a fresh
 *     slot or a cached one, are filled as a write-back write's are
 *     (through_edges: the slot if valid there, else the RAID, nothing
 *     past the file's end) before the RAID has the write, so the slot
 *     holds them whole and valid too (an appended mail or log record
 *     hits when read back); one whose read fails stays invalid.  Before,
 *     write-through cached only what reads promoted, and a database or a
 *     mail server missed everything it wrote (pgbench at 5%: .8781 of
 *     accesses missed, LRU .7101; docs/CACHE_POLICY.md, "Write-through
 *     keeps what it writes").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tierfs/cache.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/log.h"
#include "tierfs/ns.h"
#include "tierfs/powercut.h"
#include "tierfs/raid.h"
#include "cache_i.h"

enum {
	A_CACHE,	/* write-back into the slot */
	A_THROUGH,	/* RAID, then the slot's sectors, partial ones filled
			 * (a fresh slot's: beside the RAID, invariants 11, 12) */
	A_AROUND,	/* invalidate the slot's sectors, then RAID */
	A_RAW,		/* RAID only: not cached (guarded, invariant 2) */
};

/* Bytes of the sector at logical offset pos that are not being written:
 * from the slot if valid there, else from the RAID. */
static int sector_fill(struct tfs_cache *c, struct tfs_inode *in, const struct piece *p,
		       unsigned sec, char *dst)
{
	uint64_t pos = p->idx * c->extent + (uint64_t)sec * C_SECTOR;
	ssize_t r;

	if (bm_test(p->valid, sec))
		return c_ssd_io(c, false, false, dst, C_SECTOR,
				c_slot_off(c, p->slot) + (uint64_t)sec * C_SECTOR);
	r = tfs_raid_read(c->fs, in, false, dst, C_SECTOR, pos);
	if (r < 0)
		return (int)r;
	memset(dst + r, 0, C_SECTOR - (size_t)r);
	c->st.fills++;
	return 0;
}

/* Write piece p into its slot as whole sectors (partial ones filled). */
static int slot_write(struct tfs_cache *c, struct tfs_inode *in, const struct piece *p,
		      bool direct, const char *src)
{
	uint64_t base = p->idx * c->extent;
	unsigned s0, s1;
	size_t span;
	char *b;
	int rc = 0;

	c_piece_sectors(c, p, &s0, &s1);
	span = (size_t)(s1 - s0) * C_SECTOR;
	b = c_buf(span);
	if (!b)
		return -ENOMEM;
	if ((p->a - base) % C_SECTOR)
		rc = sector_fill(c, in, p, s0, b);
	if (rc == 0 && (p->b - base) % C_SECTOR && (s1 - 1 != s0 || !((p->a - base) % C_SECTOR)))
		rc = sector_fill(c, in, p, s1 - 1, b + span - C_SECTOR);
	if (rc)
		return rc;
	memcpy(b + (p->a - base - (uint64_t)s0 * C_SECTOR), src, p->b - p->a);
	return c_ssd_io(c, true, direct, b, span, c_slot_off(c, p->slot) + (uint64_t)s0 * C_SECTOR);
}

/* Whether a piece's slot is owned by another writer or the flusher (its
 * planning would wait).  Under c->lock. */
static bool any_busy(struct tfs_cache *c, uint64_t fid, const struct piece *p, unsigned np)
{
	for (unsigned i = 0; i < np; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);

		if (s != C_NONE && c->e[s].busy)
			return true;
	}
	return false;
}

/* The dirty level is at or above dirty_high.  Under c->lock. */
static bool over_high(const struct tfs_cache *c)
{
	return tfs_dirty_over(c->ndirty, c->nslots, c->dirty_high);
}

/* Decide what each piece does and take what it needs (busy slots,
 * guards), under c->lock.  Pieces are taken in extent order, so two
 * writers never wait for each other's slots in a cycle.  Returns true if
 * every piece goes into an extent the tier holds; *around: some piece goes
 * to the RAID rather than into the tier (the trace's TFS_TR_AROUND). */
static bool plan_write(struct tfs_cache *c, struct tfs_inode *in, enum tfs_cache_mode mode,
		       bool seq, bool stream, uint64_t fid, struct piece *p, unsigned np,
		       bool *around)
{
	uint32_t now = c_now();
	struct tfs_wr_in w = { .mode = mode, .readonly = c->readonly, .seq = seq,
			       .over_high = over_high(c) };	/* invariant 9 */
	enum tfs_bypass why = TFS_BYPASS_NONE;
	bool hit = true;

	for (unsigned i = 0; i < np; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);
		enum tfs_bypass pwhy;
		enum tfs_wr_act act;
		struct cext *x;
		bool copy;

		if (s != C_NONE) {
			x = &c->e[s];
			c_wait_idle(c, x);
			/* the wait let go of c->lock: the slot may have gone */
			if (!x->used || x->fid != fid || x->idx != p[i].idx) {
				x->busy = false;
				pthread_cond_broadcast(&c->cond);
				i--;
				continue;
			}
			c_heat_bump(c, &x->heat, &x->heat_t, now);
			c_used(c, s);
			p[i].slot = s;
			memcpy(p[i].valid, x->valid, sizeof(p[i].valid));
			w.cached = true;
			w.dirty = bm_any(x->dirty) || x->flushing;
			switch (tfs_rule_write(&w, &pwhy)) {
			case TFS_WR_THROUGH:
				p[i].act = A_THROUGH;
				c->st.write_hits++;	/* a cached extent written */
				break;
			case TFS_WR_AROUND:
				p[i].act = A_AROUND;
				c->st.write_around++;
				hit = false;
				why = pwhy;
				break;
			default:
				p[i].act = A_CACHE;
				x->streamed = stream;	/* invariant 10 */
				c->st.write_hits++;
				break;
			}
			continue;
		}
		{
			uint64_t key = c_ekey(fid, p[i].idx);
			struct tfs_heat_ent *g = c_uheat(c, key, now);

			c_heat_bump(c, &g->heat, &g->t, now);
			tfs_policy_seen(c->pol, key);	/* W-TinyLFU's sketch counts misses */
		}
		w.cached = w.dirty = false;
		p[i].act = A_RAW;
		hit = false;
		act = tfs_rule_write(&w, &pwhy);
		copy = act == TFS_WR_COPY;	/* invariant 11 */
		s = C_NONE;
		if (act == TFS_WR_ALLOC || act == TFS_WR_FRESH ||
		    (copy && c_piece_whole(c, &p[i]) && tfs_copy_take(&c->copy_ev)))
			s = c_alloc_slot(c, fid, p[i].idx);
		if (s != C_NONE) {
			/* a fresh slot: write-back's, dirtied by the write, or a
			 * clean one beside the RAID (invariants 11, 12) */
			p[i].slot = s;
			memset(p[i].valid, 0, sizeof(p[i].valid));
			p[i].act = act == TFS_WR_ALLOC ? A_CACHE : A_THROUGH;
			p[i].fresh = true;
			p[i].copy = c->e[s].copy = copy;
			c->e[s].streamed = stream;	/* invariant 10 */
			c->st.write_misses++;
			if (copy) {
				c->st.seq_bypass++;
				why = pwhy;
			}
			continue;
		}
		if (act == TFS_WR_ALLOC || act == TFS_WR_FRESH)
			pwhy = TFS_BYPASS_NO_SLOT;	/* the RAID's only */
		if (pwhy == TFS_BYPASS_SEQ)
			c->st.seq_bypass++;
		else if (pwhy == TFS_BYPASS_DIRTY_HIGH)
			c->st.full_bypass++;
		else
			c->st.write_around++;
		why = pwhy;
		c->guard[c_ekey(fid, p[i].idx) % C_GUARDS]++;
	}
	if (hit)
		c->st.write_req_hits++;
	else
		c->st.write_req_misses++;
	c_count_file(in, true, hit, why);
	*around = why != TFS_BYPASS_NONE;
	return hit;
}

/* Above the high watermark a write that would dirty an extent the tier
 * holds clean waits for the flusher (up to a second); it is slowed, never
 * failed.  Pieces into dirty extents never wait, and those that would take
 * a fresh slot go to the RAID instead (invariant 9). */
static void throttle(struct tfs_cache *c, uint64_t fid, const struct piece *p, unsigned np)
{
	struct timespec until;
	bool waited = false, dirties = false;

	for (unsigned i = 0; i < np && !dirties; i++) {
		uint32_t s = c_lookup(c, fid, p[i].idx);

		dirties = s != C_NONE && !bm_any(c->e[s].dirty) && !c->e[s].flushing;
	}
	if (!dirties)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	while (over_high(c) && !c->stop) {
		pthread_cond_signal(&c->fcond);
		waited = true;	/* counted also when held the whole second */
		if (pthread_cond_timedwait(&c->cond, &c->lock, &until))
			break;
	}
	if (waited)
		c->st.throttled++;
}

/* A write-back piece over sectors that are valid and clean: they become
 * dirty (committed) before the slot is written, so a crash in between
 * leaves them dirty with their old bytes -- which the members hold too --
 * rather than clean with bytes the members never got (a later flush or
 * eviction would make the file change under its reader).  Returns true if
 * the record must be committed first.  Under c->lock. */
static bool dirty_first(struct tfs_cache *c, struct tfs_inode *in, const struct piece *p)
{
	struct cext *x = &c->e[p->slot];
	struct cfile *f = c_file_find(c, x->fid);
	unsigned s0, s1, before = bm_count(x->dirty), n = 0;

	c_piece_sectors(c, p, &s0, &s1);
	for (unsigned s = s0; s < s1; s++)
		if (bm_test(x->valid, s) && !bm_test(x->dirty, s)) {
			bm_set(x->dirty, s, s + 1);
			n++;
		}
	if (!n)
		return false;
	if (before == 0)
		c_file_dirtied(c, f, x, in);
	c_dirty_add(c, f, n);
	return true;
}

/* Clear the valid sectors p overlaps (write-around, write-through):
 * committed before the RAID is written, so a crash never leaves the old
 * bytes valid over new ones on the members.  False if none was valid
 * (nothing to commit).  Under c->lock. */
static bool invalidate_piece(struct tfs_cache *c, struct piece *p, struct tfs_cstore_op *op)
{
	struct tfs_cext_rec *rec = &p->rec;
	struct cext *x = &c->e[p->slot];
	unsigned s0, s1;

	c_piece_sectors(c, p, &s0, &s1);
	if (!bm_any_in(x->valid, s0, s1))
		return false;
	bm_clear(x->valid, s0, s1);
	if (bm_any(x->valid)) {
		c_record(c, p->slot, rec);
		*op = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = rec };
	} else {
		*op = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT, .fid = x->fid, .idx = x->idx };
	}
	return true;
}

/* Write-through's partial sectors (invariant 12): the first piece's
 * first sector and the last piece's last, where the write covers them in
 * part, read into edge (two sectors) as a write-back write fills them
 * (sector_fill: the slot if valid there, else the RAID, zeros past the
 * file's end), before the RAID is written.  A sector read is set as the
 * piece's head or tail; one that fails is left out (the slot then keeps
 * the whole sectors alone, as before). */
static void through_edges(struct tfs_cache *c, struct tfs_inode *in, struct piece *p,
			  unsigned np, char *edge)
{
	struct piece *f = &p[0], *l = &p[np - 1];
	unsigned s0, s1;

	if (f->act == A_THROUGH && f->a % C_SECTOR) {
		c_piece_sectors(c, f, &s0, &s1);
		if (sector_fill(c, in, f, s0, edge) == 0)
			f->head = edge;
	}
	if (l->act == A_THROUGH && l->b % C_SECTOR) {
		c_piece_sectors(c, l, &s0, &s1);
		if (l == f && f->head && s1 - 1 == s0)
			return;		/* one sector: the head has it */
		if (sector_fill(c, in, l, s1 - 1, edge + C_SECTOR) == 0)
			l->tail = edge + C_SECTOR;
	}
}

/* The sectors [*lo, *hi) write-through puts in p's slot: the whole ones
 * the write covers, and its edges read by through_edges. */
static void through_span(const struct tfs_cache *c, const struct piece *p, unsigned *lo,
			 unsigned *hi)
{
	unsigned s0, s1;

	c_piece_sectors(c, p, &s0, &s1);
	tfs_piece_whole(c->extent, p->idx, p->a, p->b, lo, hi);
	if (p->head)
		*lo = s0;
	if (p->tail || (p->head && s1 - 1 == s0))
		*hi = s1;
}

/* Write-through's slot write: through_span's sectors, the write's bytes
 * over its edges.  Returns 0 or -errno (logged by c_ssd_io). */
static int through_write(struct tfs_cache *c, const struct piece *p, bool direct,
			 const char *src)
{
	uint64_t base = p->idx * c->extent;
	unsigned a, b, lo, hi;
	size_t span;
	char *buf;

	through_span(c, p, &lo, &hi);
	if (hi <= lo)
		return 0;
	tfs_piece_whole(c->extent, p->idx, p->a, p->b, &a, &b);
	if (lo == a && hi == b)		/* no edge: the caller's bytes as they are */
		return c_ssd_io(c, true, direct,
				(char *)src + (base + (uint64_t)a * C_SECTOR - p->a),
				(size_t)(b - a) * C_SECTOR,
				c_slot_off(c, p->slot) + (uint64_t)a * C_SECTOR);
	span = (size_t)(hi - lo) * C_SECTOR;
	buf = c_buf(span);
	if (!buf)
		return -ENOMEM;
	if (p->head)
		memcpy(buf, p->head, C_SECTOR);
	if (p->tail)
		memcpy(buf + span - C_SECTOR, p->tail, C_SECTOR);
	memcpy(buf + (p->a - base - (uint64_t)lo * C_SECTOR), src, p->b - p->a);
	return c_ssd_io(c, true, direct, buf, span, c_slot_off(c, p->slot) + (uint64_t)lo * C_SECTOR);
}

/* After write-through's slot write (rc): through_span's sectors are
 * valid if it succeeded, and the others p touches invalid. */
static void through_valid(struct tfs_cache *c, const struct piece *p, int rc)
{
	unsigned s0, s1, lo, hi;

	c_piece_sectors(c, p, &s0, &s1);
	through_span(c, p, &lo, &hi);
	pthread_mutex_lock(&c->lock);
	bm_clear(c->e[p->slot].valid, s0, s1);
	if (rc == 0 && hi > lo)
		bm_set(c->e[p->slot].valid, lo, hi);
	pthread_mutex_unlock(&c->lock);
}

/* The slot writes of a run's fresh slots (invariants 11, 12), on a thread
 * of their own while the caller writes the RAID: pieces [i, j] of p, the
 * request's bytes buf at off; rc the first error. */
struct fresh_writes {
	struct tfs_cache *c;
	const struct piece *p;
	unsigned i, j;
	bool direct;
	const char *buf;
	uint64_t off;
	int rc;
};

/* Whether pieces [i, j] of p hold a fresh slot (invariants 11, 12). */
static bool any_fresh(const struct piece *p, unsigned i, unsigned j)
{
	for (unsigned k = i; k <= j; k++)
		if (p[k].act == A_THROUGH && p[k].fresh)
			return true;
	return false;
}

static void *fresh_write(void *arg)
{
	struct fresh_writes *w = arg;

	for (unsigned k = w->i; k <= w->j && w->rc == 0; k++)
		if (w->p[k].act == A_THROUGH && w->p[k].fresh)
			w->rc = through_write(w->c, &w->p[k], w->direct, w->buf + (w->p[k].a - w->off));
	return NULL;
}

/* Whether the sector holding pos must be read from the RAID to fill a
 * partial write: it is not valid in the cache and not past the size. */
static bool fill_from_raid(struct tfs_cache *c, uint64_t fid, uint64_t size, uint64_t pos)
{
	uint64_t idx = pos / c->extent;
	uint32_t s = c_lookup(c, fid, idx);

	if (pos / C_SECTOR * C_SECTOR >= size)
		return false;
	return s == C_NONE || !bm_test(c->e[s].valid, (unsigned)(pos % c->extent / C_SECTOR));
}

bool tfs_cache_write_waits(struct tfs_fs *fs, struct tfs_inode *in, size_t len, uint64_t off)
{
	struct tfs_cache *c = fs->cache;
	uint64_t fid, size, run, cutoff, end = off + len;
	bool waits;

	if (tfs_cache_detached(c) || c_mode(c) != TFS_CACHE_WRITEBACK)
		return true;
	pthread_mutex_lock(&in->lock);
	fid = in->fid;
	size = in->size;
	run = in->seq_next == off ? in->seq_len + len : len;
	cutoff = __atomic_load_n(&c->seq_cutoff, __ATOMIC_RELAXED);	/* status.c inv. 3 */
	waits = !in->fid_valid || !in->size_valid ||
		(cutoff && run >= cutoff && len >= tfs_row_bytes(fs));
	pthread_mutex_unlock(&in->lock);
	if (waits || len == 0)
		return waits;
	pthread_mutex_lock(&c->lock);
	waits = over_high(c) ||
		(off % C_SECTOR && fill_from_raid(c, fid, size, off)) ||
		(end % C_SECTOR && fill_from_raid(c, fid, size, end));
	pthread_mutex_unlock(&c->lock);
	return waits;
}

/* The part of a write after its SSD writes: the size, the sectors made
 * valid and dirty (or the fresh slot given back on a failure), their
 * records committed while the slots are still busy, the slots let go, the
 * writer counted out (invariants 1, 3-5).  Returns len, or the first
 * error (rc if not 0). */
static ssize_t write_finish(struct tfs_fs *fs, struct tfs_inode *in, struct piece *p,
			    unsigned np, struct tfs_cstore_op *ops, uint64_t fid, uint64_t size,
			    uint64_t off, size_t len, bool cached, bool stored, int rc)
{
	struct tfs_cache *c = fs->cache;
	uint64_t end = off + len;
	unsigned nops = 0;
	int err;

	/* the size grows before the sectors are marked dirty and let go: the
	 * flusher cuts what it writes at the size */
	if (rc == 0 && cached)
		tfs_size_grow(in, end);

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np; i++) {
		struct cext *x = p[i].slot == C_NONE ? NULL : &c->e[p[i].slot];
		struct cfile *f;
		unsigned s0, s1, before;

		if (p[i].act == A_RAW) {
			c->guard[c_ekey(fid, p[i].idx) % C_GUARDS]--;
			continue;
		}
		if (p[i].act == A_AROUND) {
			if (stored && !bm_any(x->valid))
				c_unlink_slot(c, p[i].slot);
			c_release_busy(c, p[i].slot);
			continue;
		}
		if (p[i].act == A_THROUGH) {
			/* re-validated by through_valid; a slot left with nothing
			 * valid goes after its record (below), a fresh one had none */
			if (bm_any(x->valid)) {
				c_record(c, p[i].slot, &p[i].rec);
				ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT,
								      .rec = &p[i].rec };
			} else if (!p[i].fresh) {
				ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_EXT,
								      .fid = fid, .idx = p[i].idx };
			}
			continue;
		}
		/* A_CACHE */
		f = c_file_find(c, fid);
		if (rc) {
			/* the slot may hold part of the bytes: nothing new is
			 * valid; a slot allocated for this write goes back */
			if (p[i].fresh && !bm_any(x->valid)) {
				c_unlink_slot(c, p[i].slot);
				c_release_busy(c, p[i].slot);
				p[i].slot = C_NONE;
			}
			continue;
		}
		c_piece_sectors(c, &p[i], &s0, &s1);
		before = bm_count(x->dirty);
		bm_set(x->valid, s0, s1);
		bm_set(x->dirty, s0, s1);
		x->wseq++;
		/* wtime and the dirty list's tail (index.c invariant 8): a
		 * newly dirty extent joins it with its file's count */
		if (before == 0)
			c_file_dirtied(c, f, x, in);
		else
			c_dirty_touch(c, p[i].slot);
		if (bm_count(x->dirty) != before || !bm_all(p[i].valid, s0, s1)) {
			c_file_attach(c, f, in);	/* a file found dirty at start */
			c_dirty_add(c, f, (int64_t)bm_count(x->dirty) - before);
			c_record(c, p[i].slot, &p[i].rec);
			ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &p[i].rec };
		}
		if (end > size && end > f->size) {
			f->size = end;
			ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_SIZE, .fid = fid,
							      .size = end };
		}
	}
	pthread_mutex_unlock(&c->lock);
	/* the journal names the file before the write is acknowledged; the
	 * records commit while the slots are still busy: two commits of one
	 * extent cannot pass each other */
	err = c_journal_drain(c);
	if (err && !rc)
		rc = err;	/* the file may not be named: not acknowledged */
	stored = true;
	if (nops) {
		err = c_commit(c, ops, nops);
		stored = err == 0;
		if (err && !rc)
			rc = err;
	}
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < np; i++) {
		if ((p[i].act != A_CACHE && p[i].act != A_THROUGH) || p[i].slot == C_NONE)
			continue;
		if (p[i].act == A_THROUGH && !bm_any(c->e[p[i].slot].valid)) {
			if (p[i].fresh)		/* a copy never kept: no evidence */
				c->e[p[i].slot].copy = false;
			if (stored || p[i].fresh)
				c_unlink_slot(c, p[i].slot);
		} else if (p[i].act == A_THROUGH && p[i].fresh) {
			/* invariant 11; a stream's fresh slot too, once clean
			 * as a write-back one (invariants 10, 12) */
			if (p[i].copy || c->e[p[i].slot].streamed)
				tfs_policy_demote(c->pol, p[i].slot);
			c->st.stream_copies += p[i].copy;
		}
		c_release_busy(c, p[i].slot);
	}
	if (--c->writers == 0 && c->gate)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return rc;
	/* the members were not written (or not all: the primary may not hold
	 * what was), and a flush running keeps their times (attr.c inv. 4, 5) */
	tfs_ns_touch(fs, in);
	return (ssize_t)len;
}

/* A write-back write whose SSD write the caller's ring runs (invariant
 * 7): what write_finish needs, kept from tfs_cache_write_ring. */
struct wjob {
	struct tfs_cache_wring pub;	/* first: tfs_cache_write_end's argument */
	struct tfs_inode *in;
	struct piece p;
	struct tfs_cstore_op ops[2];	/* its record and its size */
	uint64_t fid, size, off;
	size_t len;
	bool stored;
	bool owned;			/* pub.buf is a copy, freed at the end */
};

ssize_t tfs_cache_write_ring(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
			     const void *buf, size_t len, uint64_t off, unsigned flags,
			     struct tfs_cache_wring **ring)
{
	struct tfs_cache *c = fs->cache;
	enum tfs_cache_mode mode;
	struct tfs_cstore_op *ops;
	uint64_t fid, size, end = off + len;
	struct piece *p;
	unsigned np, nops = 0;
	bool seq, stream, cached = false, stored = true, hit, around;
	char edge[2 * C_SECTOR];	/* write-through's partial sectors (invariant 12) */
	int rc, err;

	if (ring)
		*ring = NULL;
	if (len == 0)
		return 0;
	if (end < off)
		return -EFBIG;
	rc = c_file_snap(c, in, off, len, &fid, &size, &seq);
	if (rc)
		return rc;
	stream = seq;	/* past the cutoff: around only if a full row too */
	seq = tfs_seq_write(seq, len, tfs_row_bytes(fs));
	p = c_pieces_of(c, off, len, &np, &ops);
	if (!p)
		return -ENOMEM;

	pthread_mutex_lock(&c->lock);
	/* invariant 8: nothing below waits for another tier actor */
	if ((flags & TFS_CW_NOWAIT) &&
	    (c->gate || tfs_cache_detached(c) || any_busy(c, fid, p, np) ||
	     (c_mode(c) == TFS_CACHE_WRITEBACK && !seq &&
	      over_high(c)))) {
		pthread_mutex_unlock(&c->lock);
		return -EWOULDBLOCK;
	}
	while (c->gate)		/* a detach is deciding (invariant 5) */
		pthread_cond_wait(&c->cond, &c->lock);
	if (tfs_cache_detached(c)) {
		pthread_mutex_unlock(&c->lock);
		return tfs_raid_write(fs, in, direct, buf, len, off);
	}
	c->writers++;
	mode = c_mode(c);
	c->last_io = c_now();
	if (mode == TFS_CACHE_WRITEBACK && !seq)
		throttle(c, fid, p, np);
	hit = plan_write(c, in, mode, seq, stream, fid, p, np, &around);
	c_trace(fid, off, len, TFS_TR_WRITE, (hit ? TFS_TR_HIT : 0) | (direct ? TFS_TR_DIRECT : 0) |
		(around ? TFS_TR_AROUND : 0));
	/* write-around and write-through: invalidate first (invariant 4; 1
	 * keeps the flusher off); write-back over clean valid sectors: dirty
	 * first (invariant 3) */
	for (unsigned i = 0; i < np; i++) {
		if (p[i].act == A_AROUND || p[i].act == A_THROUGH) {
			if (invalidate_piece(c, &p[i], &ops[nops]))
				nops++;
			c->st.invalidations += p[i].act == A_AROUND;
		} else if (p[i].act == A_CACHE && dirty_first(c, in, &p[i])) {
			c_record(c, p[i].slot, &p[i].rec);
			ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &p[i].rec };
		}
	}
	pthread_mutex_unlock(&c->lock);
	c_watch(c, fid, off, len, true, (seq ? TFS_SEQ_AROUND : 0u) | (stream ? TFS_SEQ_STREAM : 0u));
	if (nops) {
		rc = c_journal_drain(c);
		err = c_commit(c, ops, nops);
		stored = err == 0;	/* else the records may still name the slots */
		if (rc == 0)
			rc = err;
	}
	nops = 0;
	if (rc == 0)
		through_edges(c, in, p, np, edge);	/* before the RAID has the write */

	/* the RAID: runs of consecutive pieces that go there, one call each */
	for (unsigned i = 0; i < np && rc == 0;) {
		unsigned j = i;
		ssize_t r;

		if (p[i].act == A_CACHE) {
			i++;
			continue;
		}
		while (j + 1 < np && p[j + 1].act != A_CACHE)
			j++;
		struct fresh_writes fw = { .c = c, .p = p, .i = i, .j = j, .direct = direct,
					   .buf = buf, .off = off };
		pthread_t t;
		/* a fresh slot is written while the RAID is (invariants 11, 12) */
		bool side = any_fresh(p, i, j) && pthread_create(&t, NULL, fresh_write, &fw) == 0;

		r = tfs_raid_write(fs, in, direct, (const char *)buf + (p[i].a - off),
				   p[j].b - p[i].a, p[i].a);
		if (side)
			pthread_join(t, NULL);
		if (r < 0)
			rc = (int)r;
		for (unsigned k = i; k <= j && rc == 0; k++) {
			int w;

			if (p[k].act != A_THROUGH)
				continue;
			w = side && p[k].fresh ? fw.rc
			    : through_write(c, &p[k], direct, (const char *)buf + (p[k].a - off));
			through_valid(c, &p[k], w);
			if (!p[k].fresh)	/* a fresh slot that failed is dropped, the write is not */
				rc = w;
		}
		i = j + 1;
	}
	/* the SSD: one write-back piece of whole sectors is left to the
	 * caller's ring (invariant 7), unless the power-cut model is on */
	if (ring && !tfs_pcut_on() && rc == 0 && np == 1 && p[0].act == A_CACHE && !(p[0].a % C_SECTOR) &&
	    !(p[0].b % C_SECTOR)) {
		struct wjob *w = malloc(sizeof(*w));
		/* the caller's bytes when they outlive the write and are aligned
		 * (a FUSE queue entry's payload), else a copy */
		bool keep = (flags & TFS_CW_STAYS) && !((uintptr_t)buf % 4096);
		void *b = keep ? (void *)buf : NULL;

		if (w && (keep || posix_memalign(&b, 4096, len) == 0)) {
			uint64_t at = c_slot_off(c, p[0].slot) + (p[0].a - p[0].idx * c->extent);

			if (!keep)
				memcpy(b, buf, len);
			*w = (struct wjob){ .in = in, .p = p[0], .fid = fid, .size = size, .off = off,
					    .len = len, .stored = stored, .owned = !keep };
			w->pub = (struct tfs_cache_wring){ .fd = c_ssd_fd(c, direct, b, len, at),
							   .buf = b, .len = len, .off = at };
			*ring = &w->pub;
			return 0;
		}
		free(w);	/* written here */
	}
	/* the SSD: write-back pieces */
	for (unsigned i = 0; i < np && rc == 0; i++)
		if (p[i].act == A_CACHE) {
			rc = slot_write(c, in, &p[i], direct, (const char *)buf + (p[i].a - off));
			cached = true;
		}
	return write_finish(fs, in, p, np, ops, fid, size, off, len, cached, stored, rc);
}

ssize_t tfs_cache_write(struct tfs_fs *fs, struct tfs_inode *in, bool direct,
			const void *buf, size_t len, uint64_t off)
{
	return tfs_cache_write_ring(fs, in, direct, buf, len, off, 0, NULL);
}

ssize_t tfs_cache_write_end(struct tfs_fs *fs, struct tfs_cache_wring *ring, int res)
{
	struct wjob *w = (struct wjob *)ring;
	struct tfs_cache *c = fs->cache;
	ssize_t r;

	if (res < 0)
		tfs_err("cache %s: write of %zu bytes at %" PRIu64 ": %s", c->dir, ring->len,
			ring->off, strerror(-res));
	__atomic_add_fetch(&c->st.ring_writes, 1, __ATOMIC_RELAXED);
	r = write_finish(fs, w->in, &w->p, 1, w->ops, w->fid, w->size, w->off, w->len, true,
			 w->stored, res);
	if (w->owned)
		free(ring->buf);
	free(w);
	return r;
}

/* ------------------------------------------------------------------ */
/* fsync (invariant 6)                                                 */
/* ------------------------------------------------------------------ */

bool tfs_cache_fsync_waits(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	return c_journal_due(fs->cache) || tfs_raid_fsync_due(in, datasync);
}

int tfs_cache_fsync(struct tfs_fs *fs, struct tfs_inode *in, bool datasync)
{
	struct tfs_cache *c = fs->cache;
	int rc = 0, r;

	c_trace(__atomic_load_n(&in->fid, __ATOMIC_RELAXED), 0, 0,
		datasync ? TFS_TR_FDATASYNC : TFS_TR_FSYNC, 0);
	/* the SSD: data file, then the records naming it (both in the
	 * store's durability point), then the journal naming the file
	 * (DESIGN §10.5) */
	rc = tfs_cstore_sync(c->cs);	/* a failure is logged there */
	r = c_journal_sync(c);	/* logged there */
	if (rc == 0)
		rc = r;
	if (rc == 0)
		rc = tfs_raid_fsync(fs, in, datasync);
	return rc;
}
