/* flush.c - the SSD tier's background threads: flusher and promoter.
 *
 * Owns: destaging dirty extents to the RAID (write-back), copying hot
 * extents from the RAID into the cache (promotion), finding the files of
 * dirty extents after a restart, and "flush everything" (tierctl flush,
 * mode changes, detach).
 *
 * Invariants:
 *  1. The flusher works on a file holding its flush lock (cfile.flock),
 *     which truncate and punch hold too: what it writes to the RAID can
 *     never land behind a cut.  A batch (invariant 12) holds the locks of
 *     its files until each is clean; it takes the second and later ones
 *     with trylock only, so it never waits for a cut while holding one.
 *  2. Extents being flushed are pinned and flagged flushing (write.c
 *     invariant 1: they take writes write-back, so nobody else writes
 *     their RAID bytes).  A sector's dirty bit is cleared only if the
 *     extent was not written since the flusher read it (wseq).
 *  3. On the parity levels, in write-back mode, a row whose every sector
 *     is valid in the cache is written whole (clean sectors included), so
 *     destaging needs no read-modify-write.
 *     Its RAID writes run up to C_WRITERS at a time (disjoint segments).
 *  4. The flusher's pace follows the dirty level: below dirty_low it only
 *     works when the array is idle or asked to; between the watermarks it
 *     paces itself, faster as dirt grows, and skips extents written in
 *     the last TFS_FLUSH_WRITE_AGE (they absorb overwrites; with the
 *     tuner's spare_hot only those used again since they came, rules.h
 *     tfs_flush_spares); from a tenth of the band below dirty_high
 *     (rules.h tfs_flush_flat) it runs flat out, so the level stays under
 *     dirty_high while the RAID keeps up; at dirty_high writes that would
 *     take a fresh slot go to the RAID and those that would dirty a clean
 *     extent wait for it (write.c invariant 9, throttle).
 *  5. A promotion allocates its slot only when no RAID write of the
 *     extent is in flight (write.c invariant 2) and no cut holds the file
 *     (cfile.cuts: c_file_hold), and fills it while owning it (busy).  The
 *     flusher's hold on the file stops neither a promotion nor a fill
 *     (invariant 14): a promotion's extent is not cached, so the flusher
 *     has nothing of it; a fill writes only sectors not valid, which the
 *     flusher never writes, and one it owns keeps the flusher's row whole
 *     pass (fill_rows) off its extent; the RAID's row locks order the RAID
 *     reads and writes.  Before, any hold did, and on a store of one big
 *     file (a database, the Iometer profiles) three promotions in four,
 *     and fills as many, came while the flusher held it and were dropped.
 *  6. A dirty bit is cleared only after the members synced what was
 *     destaged (tfs_raid_fsync), so a clean record never stands for bytes
 *     that a power cut could still take from the members.
 *  7. Every SYNC_TICKS with updates pending the flusher makes a
 *     durability point of the store (the journal's changes are synced
 *     each round before it, when there are any), so a power cut
 *     loses at most that much of what no fsync covered, as ext4's
 *     commit interval does.
 *  8. After a restart a dirty file not found by a walk stays dirty; it is
 *     dropped only when a complete walk under move_lock that identified
 *     every file it met did not meet it (resolve, DESIGN §10.5).  Walks
 *     that fail or leave files unfound back off; flushes go on for the
 *     files found, and a flush of nothing but unfound files ends.
 *  9. The store forgets a file's size (DEL_SIZE: "the members hold it")
 *     only after the members were grown to it and synced: a punch can
 *     leave the size past the last dirty byte, so destaging every dirty
 *     sector does not by itself carry the size to the members.  A file
 *     with nothing dirty is never visited: a punch that takes its last
 *     dirty byte carries the size itself (dispatch.c invariant 1).
 * 10. Dirty data is never bound to, flushed to or dropped for a file
 *     whose identity another file has too (inode.c invariant 5): a walk
 *     meets it as not identified (so proves nothing gone), and a binding
 *     made before the second file was seen is undone, so the data waits
 *     in the tier until one of them is removed and then goes to the other.
 * 11. Memory: the flusher's batch buffer (2 x FLUSH_BATCH extents) holds
 *     pages only while there is dirty data: once nothing is dirty they go
 *     back to the system (MADV_DONTNEED).  The destage threads of a batch
 *     exit with it, and their scratch goes with them (scratch.c
 *     invariant 2; it once stayed behind).
 * 12. The flusher destages up to FLUSH_FILES files before the members
 *     sync, then syncs them together (tfs_raid_fsync_many: one io_uring
 *     batch, and the members' filesystems share journal commits among its
 *     syncs); each file is cleaned after its own sync returned, as
 *     invariant 6 asks (test_powercut.py
 *     test_cut_while_a_batch_syncs_keeps_every_file).  A stream of
 *     small files cost a sync round each, which kept the flusher behind
 *     the writers it throttled.  Paced, it pauses after a batch for as
 *     long as it would have after each of its files.  A batch's files
 *     come from one look at the file table (next_dirty, invariant 19),
 *     which holds c->lock for a walk of every cached extent of every
 *     dirty file.
 * 13. A one-file flush (c_flush_file: a file's user.tierfs.flush) is the
 *     flusher's work too, first in its loop: it destages that file batch
 *     after batch, whatever the extents' age or the pace, and ends when the
 *     file has nothing dirty, a batch fails, or twice as many rounds as the
 *     file had batches to destage went by (writers keep dirtying it:
 *     EBUSY).  One request at a time; its callers queue on c->cond.  So
 *     the file's sectors are cleaned only as invariant 6 says.
 * 14. A read that misses in an extent the tier holds in part (an 8K write
 *     made it; a cut zeroed some of it) heats that extent as any miss, and
 *     at the promotion threshold the promoter fills its missing sectors from
 *     the RAID (fill_one): it owns the slot (busy) from before the RAID read
 *     to after its record is committed, so no writer, cut or flush changes
 *     the extent meanwhile, nor commits a record of it that the fill's would
 *     then undo (it let go before its commit once: a punch's deletion came
 *     back, naming a freed slot; a write's dirty sectors were recorded
 *     clean), and writes only sectors that were not valid (a valid one
 *     may be dirty, and the RAID's copy older).  Such extents were never
 *     filled: only extents not cached were promoted, and their reads missed
 *     for good (37% of the read misses of the zone trace, issue 16).
 * 15. Reclaim (cache_reclaim=1, or auto once on): eviction notes the
 *     dirty extents it looked at and could not take (refused: the policy
 *     moved them as if used), and after each batch the dirty extents among
 *     the policy's next 2 batches of victims (clean-ahead,
 *     tfs_policy_next): index.c note_reclaim flags reclaim, queues c->rq,
 *     at most rqcap; a use takes the flags back, c_used.  The flusher's
 *     first work each round, after a one-file flush, is the noted slots
 *     still flagged, dirty and not being flushed: of up to FLUSH_FILES
 *     files, FLUSH_BATCH a file, whatever their age or the pace; the
 *     others stay queued.  Any flush that cleans a flagged extent drops
 *     the flags, and demotes it if it was refused (tfs_policy_demote: the
 *     next victim of its queue, where it would have been); one cleaned
 *     ahead keeps its place, near the victims already.  A round that
 *     fails or cleans nothing drops the notes it had (the flusher's usual
 *     work destages them in time), so rounds end.  The destage is the
 *     usual one (invariants 1-3, 6): reclaim changes which extents go
 *     first and the policy's order, nothing durable.  The model does the
 *     same before its next request (model.c invariant 6).  Without
 *     clean-ahead every dirty extent eviction reached cost a clean one
 *     taken out of order (the SQLite trace at 10%, cache_reclaim=1: miss
 *     ratio .2784 without, .2280 with; docs/CACHE_POLICY.md).
 * 16. The destage rate (c->destage_kbps) is the bytes of the rounds that
 *     destaged any (flush_batch: from its first look to its files'
 *     ends, the members' sync included) over their time, taken anew
 *     each time those rounds add up to a second; the flusher thread alone
 *     keeps it, and the live curve's miniatures model it (watch.c): the
 *     RAID's pace is what keeps a tier under writes from hitting as a
 *     model with instant destages would (model.c invariant 3).
 * 17. A streamed extent (write.c invariant 10) is not spared for being
 *     young (a stream does not rewrite what it passed), and when a round
 *     leaves it clean it is demoted (tfs_policy_demote: evicted first)
 *     and no longer streamed.
 * 18. A queued promotion that brings its extent in keeps, under c->lock,
 *     a running mean of its time from a promoter's taking it to readable
 *     (an eighth of each new one's; c->promote_ns, read atomically); a
 *     promotion done at once (c_promote_now) is not counted.  The live
 *     curve's miniatures take it (watch.c invariant 7): a read that comes
 *     while its extent's promotion is on its way misses (the second half
 *     of an extent the kernel's readahead asks for right after the
 *     first), which a model promoting at once counts as a hit.  The time
 *     in the queue is left out: each miniature queues for its share of
 *     the promoters itself (model.c invariant 9), so a setting that would
 *     promote more than the promoters can do waits and drops there, not
 *     only as long as the current setting's queue made the mean (stop
 *     42: the time from the queueing, taken as a fixed delay, let
 *     threshold 1 look free during a warm-up that it flooded).
 * 19. A batch takes the files whose oldest extent it may destage now
 *     (dirty, not being flushed, not spared: destageable) was written
 *     longest ago, ties to the least identity (rules.h tfs_flush_keep),
 *     as the kernel writes back the inodes dirtied longest ago first; the
 *     model chooses the same way (model.c invariant 3).  The dirty
 *     extents written most recently stay dirty longest, and a dirty
 *     extent is not evicted, so the tier keeps what was just written
 *     (a delivered message read minutes later, a copied file read back).
 *     Before, files went in identity order after the last batch's, so a
 *     new file's extents were as likely to be cleaned, and evicted, as
 *     the oldest: on the recording mounts maildir's tier hit .482-.499 of
 *     its reads (now .522) and copy-and-edit's .761 (now .776), and in
 *     the simulator copy-and-edit missed 1.3-2.3 points more
 *     (docs/CACHE_POLICY.md).
 *     A file with dirty extents none of which may go yet is not taken; if
 *     no file has any, the flusher pauses as after a batch that found
 *     nothing.  The files are found on the dirty list, oldest write first
 *     (index.c invariant 8), not by a walk of every dirty file's extents.
 * 20. When the threshold rises (the tuner's choice, or one set by hand),
 *     the promotions still waiting whose extent's heat is under the new
 *     one are stale (c_promote_stale, under c->lock): a promoter takes a
 *     stale one off the queue without reading it (promote_dropped).  A
 *     threshold of 1 chosen for a while queues every warm and cold read,
 *     and before, once 2 was chosen again, the hot extents' promotions
 *     still waited behind the 1,024 queued under 1, at the promoters' pace
 *     (30-40 s on the HDD model: stop 43).  The model does the same at
 *     the same moment (model.c invariant 9).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tierfs/log.h"
#include "tierfs/meta.h"
#include "tierfs/fs.h"
#include "tierfs/health.h"
#include "tierfs/inode.h"
#include "tierfs/ns.h"
#include "tierfs/raid.h"
#include "tierfs/walk.h"
#include "tierfs/scratch.h"
#include "tierfs/uring.h"
#include "cache_i.h"

#define FLUSH_BATCH	TFS_FLUSH_BATCH	/* extents per flush_file call */
#define FLUSH_SCAN	4096		/* extents looked at per flush_file call */
#define C_WRITERS	4		/* RAID writes in flight per batch */
#define FLUSH_FILES	TFS_FLUSH_FILES	/* files per batch (invariant 12) */
_Static_assert(TFS_FLUSH_FILES == TFS_SYNC_MANY, "a batch's files are synced together");
#define IDLE_TICKS	TFS_FLUSH_IDLE_TICKS	/* no requests for 5 s: flush all */
#define SYNC_TICKS	(5 * 16)	/* invariant 7 */
#define RESOLVE_MAX	(64 * 16)	/* longest pause between walks for dirty files */

/* ------------------------------------------------------------------ */
/* Flushing one file                                                   */
/* ------------------------------------------------------------------ */

struct fl {
	uint32_t slot;
	uint64_t idx;
	uint32_t wseq;
	uint64_t dmask[TFS_CEXT_WORDS];	/* dirty when read */
	uint64_t wmask[TFS_CEXT_WORDS];	/* sectors to write (dirty + row fill) */
	bool whole;			/* every run of wmask made it into the batch */
};

static int fl_cmp(const void *a, const void *b)
{
	const struct fl *x = a, *y = b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Index in fl[0..n) of extent idx, or -1. */
static int fl_find(const struct fl *fl, unsigned n, uint64_t idx)
{
	for (unsigned i = 0; i < n; i++)
		if (fl[i].idx == idx)
			return (int)i;
	return -1;
}

/* Parity levels, write-back: add every row the batch touches whose
 * sectors (below size) are all valid in the cache, so it goes out whole
 * (invariant 3).  Under c->lock; n grows up to cap. */
static unsigned fill_rows(struct tfs_cache *c, uint64_t fid, uint64_t size, struct fl *fl,
			  unsigned n, unsigned cap)
{
	uint64_t rb = tfs_row_bytes(c->fs), E = c->extent;
	unsigned n0 = n;

	for (unsigned i = 0; i < n0; i++) {
		uint64_t r0 = fl[i].idx * E / rb, r1 = ((fl[i].idx + 1) * E - 1) / rb;

		for (uint64_t r = r0; r <= r1; r++) {
			uint64_t a = r * rb, b = a + rb < size ? a + rb : size;
			bool whole = b > a;

			/* every sector of [a, b) valid somewhere in the cache? */
			for (uint64_t pos = a; whole && pos < b;) {
				uint64_t idx = pos / E, end = (idx + 1) * E < b ? (idx + 1) * E : b;
				uint32_t s = c_lookup(c, fid, idx);
				unsigned s0 = (unsigned)((pos - idx * E) / C_SECTOR);
				unsigned s1 = (unsigned)((end - idx * E + C_SECTOR - 1) / C_SECTOR);

				whole = s != C_NONE && !c->e[s].busy && bm_all(c->e[s].valid, s0, s1);
				pos = end;
			}
			if (!whole)
				continue;
			for (uint64_t pos = a; pos < b;) {
				uint64_t idx = pos / E, end = (idx + 1) * E < b ? (idx + 1) * E : b;
				uint32_t s = c_lookup(c, fid, idx);
				int j = fl_find(fl, n, idx);
				unsigned s0 = (unsigned)((pos - idx * E) / C_SECTOR);
				unsigned s1 = (unsigned)((end - idx * E + C_SECTOR - 1) / C_SECTOR);

				if (j < 0) {
					if (n == cap || c->e[s].flushing)
						break;	/* partial row: still correct */
					j = (int)n++;
					memset(&fl[j], 0, sizeof(fl[j]));
					fl[j].slot = s;
					fl[j].idx = idx;
					fl[j].wseq = c->e[s].wseq;
					c->e[s].flushing = true;
					c->e[s].pins++;
				}
				bm_set(fl[j].wmask, s0, s1);
				pos = end;
			}
		}
	}
	return n;
}

/* One contiguous RAID write of the batch. */
struct seg {
	uint64_t off, len;
	char *buf;
};

/* The RAID writes of one batch, shared by up to C_WRITERS threads. */
struct destage {
	struct tfs_cache *c;
	struct tfs_inode *in;
	struct cfile *f;
	const struct seg *seg;
	unsigned ns, next;		/* next: atomic */
	int rc;				/* first error (atomic) */
	int64_t done;			/* bytes written (atomic) */
};

static void *destage_thread(void *arg)
{
	struct destage *d = arg;
	struct tfs_fs *fs = d->c->fs;

	for (;;) {
		unsigned i = __atomic_fetch_add(&d->next, 1, __ATOMIC_RELAXED);
		const struct seg *g = &d->seg[i < d->ns ? i : 0];
		ssize_t r;

		if (i >= d->ns || __atomic_load_n(&d->rc, __ATOMIC_RELAXED))
			break;
		r = tfs_raid_write(fs, d->in, false, g->buf, g->len, g->off);
		if (r < 0) {
			int zero = 0;

			/* logged once, not every second while the RAID refuses */
			if (__atomic_compare_exchange_n(&d->rc, &zero, (int)r, false, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED) && d->c->flush_err != (int)r)
				tfs_err("cache %s: destaging %" PRIu64 " bytes of file %" PRIu64 " at %"
					PRIu64 " failed: %s", d->c->dir, g->len, d->f->fid, g->off,
					strerror((int)-r));
			break;
		}
		__atomic_add_fetch(&d->done, (int64_t)g->len, __ATOMIC_RELAXED);
		if (tfs_layout_nparity(&fs->layout)) {
			uint64_t rb = tfs_row_bytes(fs);
			uint64_t r0 = (g->off + rb - 1) / rb, r1 = (g->off + g->len) / rb;

			if (r1 > r0)
				__atomic_add_fetch(&d->c->st.full_stripe_flushes, r1 - r0,
						   __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

/* The extents fl[0..n) are the flusher's no more (c->lock held). */
static void fl_unflag_locked(struct tfs_cache *c, struct fl *fl, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		c->e[fl[i].slot].flushing = false;
		c_unpin(c, fl[i].slot);
	}
}

/* f (held) belongs to a file that is gone (identity.c invariant 2): unlinked and
 * closed, or found with no name left; its extents, dirty ones too, go. */
static void file_gone(struct tfs_cache *c, struct cfile *f)
{
	(void)c_zero_file(c, f, 0, UINT64_MAX, true);	/* logged; slots kept owned */
	tfs_info("cache: file %" PRIu64 " is gone; its dirty extents were dropped", f->fid);
}

/* x may go in a batch taking extents not written for min_age ticks (the
 * model's destageable).  Under c->lock. */
static bool destageable(const struct tfs_cache *c, const struct cext *x, uint32_t min_age,
			uint32_t now)
{
	return bm_any(x->dirty) && !x->flushing &&
	       !tfs_flush_spares(x->streamed, now, x->wtime, min_age,	/* invariant 17 */
				 c_heat_now(c, x->heat, x->heat_t, now), c_spare_hot(c));
}

/* Up to max (at most FLUSH_FILES) files the flusher can reach whose
 * oldest extent a batch may take now is oldest (invariant 19), from one
 * walk of the dirty list, oldest write first (index.c invariant 8),
 * which ends once the files are found and the next extent is younger
 * than the youngest of them (none after it could take a place); each
 * referenced (refs).  Returns how many; *reachable: whether any file it
 * can reach has dirty extents (true once one is found). */
static unsigned next_dirty(struct tfs_cache *c, uint32_t min_age, struct cfile **out,
			   unsigned max, bool *reachable)
{
	uint64_t fid[FLUSH_FILES];
	uint32_t age[FLUSH_FILES], now = c_now();
	unsigned n = 0;

	*reachable = false;
	for (uint32_t s = c->dhead; s != C_NONE; s = c->e[s].dnext) {
		struct cext *x = &c->e[s];
		struct cfile *f;

		if (n == max && now - x->wtime < age[n - 1])
			break;
		f = c_file_find(c, x->fid);
		if (!f->in)
			continue;
		*reachable = true;
		if (destageable(c, x, min_age, now))
			n = tfs_flush_keep(fid, age, n, max, f->fid, now - x->wtime);
	}
	for (unsigned i = 0; i < n; i++) {
		out[i] = c_file_find(c, fid[i]);
		out[i]->refs++;
	}
	return n;
}

/* One file's flush: what its destage left for the sync and the clean. */
struct fjob {
	struct cfile *f;		/* held (flush_batch) */
	struct tfs_inode *in;		/* referenced */
	struct fl fl[2 * FLUSH_BATCH];
	unsigned n;			/* extents flagged flushing */
	unsigned ns;			/* RAID writes made */
	bool opened;			/* tfs_ns_open'd: released at the end */
	bool sync;			/* the members must sync before the clean */
	int rc;
	int64_t done;			/* bytes written */
	uint64_t fsize;			/* the size the tier knew */
	bool reclaim;			/* of noted slots (invariant 15) */
};

/* Slot s's dirty sectors into *e, to be destaged: flagged flushing and
 * pinned (invariant 2).  Under c->lock. */
static void fl_take(struct tfs_cache *c, struct fl *e, uint32_t s)
{
	struct cext *x = &c->e[s];

	*e = (struct fl){ .slot = s, .idx = x->idx, .wseq = x->wseq };
	memcpy(e->dmask, x->dirty, sizeof(e->dmask));
	memcpy(e->wmask, x->dirty, sizeof(e->wmask));
	x->flushing = true;
	x->pins++;
}

/* Destage up to FLUSH_BATCH dirty extents of f (held: c_file_hold),
 * skipping those written in the last min_age ticks (they would likely be
 * dirtied again at once).  The scan goes round the file's list from where
 * the last one stopped and looks at FLUSH_SCAN extents at most: a big file
 * that is mostly clean, or mostly being rewritten, does not hold c->lock
 * for a walk of all of it.  With want (nwant slots: a reclaim round,
 * invariant 15) it takes instead the slots of want that are f's, still
 * flagged, dirty and not being flushed, whatever their age.  Returns true
 * if j has a sync (flush_sync) and a clean (flush_end) to come; false if
 * the flush ended here, with its result in j->rc (0: nothing was to do). */
static bool flush_begin(struct tfs_cache *c, struct cfile *f, char *buf, uint32_t min_age,
			const uint32_t *want, unsigned nwant, struct fjob *j)
{
	struct tfs_fs *fs = c->fs;
	struct fl *fl = j->fl;
	struct tfs_mio mio[2 * FLUSH_BATCH * 8];
	struct seg seg[2 * FLUSH_BATCH * 8];
	struct tfs_inode *in;
	unsigned n = 0, nm = 0, ns = 0;
	uint64_t size, fsize = 0, E = c->extent;
	struct tfs_times_keep times = { .ok = false };
	uint32_t now = c_now(), sc;
	int rc = 0, grown = 0;

	j->f = f;
	j->n = j->ns = 0;
	j->opened = j->sync = false;
	j->rc = 0;
	j->done = 0;
	j->fsize = 0;
	j->reclaim = want != NULL;
	pthread_mutex_lock(&c->lock);
	in = j->in = f->in;
	if (!in) {
		pthread_mutex_unlock(&c->lock);
		return false;	/* not found yet (after a restart) */
	}
	tfs_inode_ref(fs, in);
	if (want) {		/* a reclaim round's slots of f */
		for (unsigned i = 0; i < nwant && n < FLUSH_BATCH; i++) {
			struct cext *x = &c->e[want[i]];

			if (x->used && x->fid == f->fid && x->reclaim && bm_any(x->dirty) &&
			    !x->flushing)
				fl_take(c, &fl[n++], want[i]);
		}
	} else {
		sc = f->fcur;
		if (sc == C_NONE || !c->e[sc].used || c->e[sc].fid != f->fid)
			sc = f->head;	/* the slot left the file */
		for (unsigned seen = 0; sc != C_NONE && n < FLUSH_BATCH && seen < f->ncached &&
		     seen < FLUSH_SCAN; seen++) {
			uint32_t cur = sc;
			struct cext *x = &c->e[cur];

			sc = x->fnext != C_NONE ? x->fnext : f->head;
			if (destageable(c, x, min_age, now))
				fl_take(c, &fl[n++], cur);
		}
		f->fcur = sc;
	}
	pthread_mutex_unlock(&c->lock);
	if (n == 0)
		goto out_unref;
	rc = tfs_ns_open(fs, in);
	if (rc == -ENOENT) {
		/* no name left and nobody has it open: the file is gone */
		pthread_mutex_lock(&c->lock);
		fl_unflag_locked(c, fl, n);
		pthread_mutex_unlock(&c->lock);
		file_gone(c, f);
		goto out_unref;
	}
	if (rc == -EUCLEAN) {
		/* another file has this identity too (inode.c invariant 5):
		 * the dirty data is neither's until one of them is removed, so
		 * the file it goes to is looked for again (invariant 10) */
		pthread_mutex_lock(&c->lock);
		fl_unflag_locked(c, fl, n);
		if (f->in == in) {
			tfs_inode_unref(fs, in);
			f->in = NULL;
			if (!f->unresolved) {
				f->unresolved = true;
				c->unresolved++;
			}
		}
		pthread_mutex_unlock(&c->lock);
		goto out_unref;
	}
	j->n = n;
	if (rc)
		goto out;
	j->opened = true;
	pthread_mutex_lock(&in->lock);
	size = in->size;
	pthread_mutex_unlock(&in->lock);
	pthread_mutex_lock(&c->lock);
	fsize = f->size;
	if (f->size > size)	/* a size the store knows and the inode not yet */
		size = f->size;
	if (tfs_layout_nparity(&fs->layout) &&
	    __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE) == TFS_CACHE_WRITEBACK)
		n = fill_rows(c, f->fid, size, fl, n, 2 * FLUSH_BATCH);
	pthread_mutex_unlock(&c->lock);
	j->n = n;
	qsort(fl, n, sizeof(fl[0]), fl_cmp);

	/* read the sectors to write from the SSD, one io_uring batch */
	for (unsigned i = 0; i < n; i++) {
		fl[i].whole = true;
		for (unsigned s = 0; s < c->spe;) {
			unsigned t = s;
			uint64_t a, b;

			if (!bm_test(fl[i].wmask, s)) {
				s++;
				continue;
			}
			while (t < c->spe && bm_test(fl[i].wmask, t))
				t++;
			a = fl[i].idx * E + (uint64_t)s * C_SECTOR;
			b = fl[i].idx * E + (uint64_t)t * C_SECTOR;
			if (b >= size + C_SECTOR)
				/* whole sectors of the run lie past the size: they
				 * are not written, so they are not clean either */
				fl[i].whole = false;
			if (b > size)
				b = size;
			if (b <= a) {
				/* past the size: not written, so not clean either */
				fl[i].whole = false;
			} else if (nm == sizeof(mio) / sizeof(mio[0])) {
				fl[i].whole = false;	/* the rest waits for the next batch */
			} else {
				char *p = buf + (size_t)i * E + (size_t)s * C_SECTOR;

				mio[nm++] = (struct tfs_mio){ .op = TFS_MIO_READ, .fd = c->fd, .buf = p,
							      .len = (uint32_t)(t - s) * C_SECTOR,
							      .off = c_slot_off(c, fl[i].slot) +
								     (uint64_t)s * C_SECTOR };
				if (ns && seg[ns - 1].off + seg[ns - 1].len == a &&
				    seg[ns - 1].buf + seg[ns - 1].len == p)
					seg[ns - 1].len += b - a;
				else
					seg[ns++] = (struct seg){ .off = a, .len = b - a, .buf = p };
			}
			s = t;
		}
	}
	rc = tfs_uring_run(mio, nm);
	for (unsigned i = 0; i < nm && rc == 0; i++)
		if (mio[i].res != mio[i].len)
			rc = mio[i].res < 0 ? (int)mio[i].res : -EIO;
	if (rc)
		tfs_err("cache %s: reading dirty extents back failed: %s", c->dir, strerror(-rc));
	/* the members stamp what is written with the time of the flush: the
	 * file's own times are put back after (attr.c invariant 5) */
	if (rc == 0)
		tfs_ns_times_keep(fs, in, &times);
	/* the RAID: up to C_WRITERS segments in flight (they are disjoint;
	 * full rows go out without reads) */
	if (rc == 0) {
		struct destage d = { .c = c, .in = in, .f = f, .seg = seg, .ns = ns };
		pthread_t t[C_WRITERS - 1];
		unsigned nt = 0;

		while (nt < C_WRITERS - 1 && nt + 1 < ns &&
		       pthread_create(&t[nt], NULL, destage_thread, &d) == 0)
			nt++;
		destage_thread(&d);
		while (nt)
			pthread_join(t[--nt], NULL);
		rc = d.rc;
		j->done = d.done;
	}
	/* the size the tier knows, before it forgets it (invariant 9) */
	if (rc == 0 && fsize && (grown = tfs_raid_grow(fs, in, fsize)) < 0) {
		rc = grown;
		tfs_err("cache %s: growing file %" PRIu64 " on the members: %s", c->dir, f->fid,
			strerror(-rc));
	}
	if (ns || grown > 0)
		tfs_ns_times_restore(fs, in, &times);
	j->ns = ns;
	j->fsize = fsize;
	j->sync = rc == 0 && (ns || grown > 0);
out:
	j->rc = rc;
	return true;

out_unref:
	tfs_inode_unref(fs, in);
	return false;
}

/* Slot s, noted or streamed, is clean now: let go, demoted if eviction
 * refused it or a stream wrote it (invariants 15, 17). */
static void let_go(struct tfs_cache *c, uint32_t s)
{
	struct cext *x = &c->e[s];

	if (x->refused || x->streamed)
		tfs_policy_demote(c->pol, s);
	x->reclaim = x->refused = x->streamed = false;
}

/* After flush_sync: clear what was written and not written again since
 * (invariant 2); the records commit while the extents are ours (busy).
 * Returns bytes written or -errno. */
static int64_t flush_end(struct tfs_cache *c, struct fjob *j)
{
	struct tfs_fs *fs = c->fs;
	struct cfile *f = j->f;
	struct fl *fl = j->fl;
	struct tfs_cstore_op ops[2 * FLUSH_BATCH + 1];
	struct tfs_cext_rec recs[2 * FLUSH_BATCH];
	unsigned n = j->n, nops = 0;
	int rc = j->rc, cerr;
	bool gone = j->opened && tfs_ns_release_gone(fs, j->in);	/* dropped below */

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < n; i++) {
		struct cext *x = &c->e[fl[i].slot];
		unsigned before;

		c_wait_idle(c, x);
		x->flushing = false;
		if (rc || x->wseq != fl[i].wseq || !fl[i].whole || !bm_any(fl[i].dmask))
			continue;
		before = bm_count(x->dirty);
		for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
			x->dirty[w] &= ~fl[i].dmask[w];
		c_dirty_add(c, f, (int64_t)bm_count(x->dirty) - before);
		if (before && !bm_any(x->dirty))
			c_file_cleaned(c, f, x);
		/* a reclaim round lets its own go, and counts them */
		if (!bm_any(x->dirty) && !j->reclaim && (x->reclaim || x->streamed))
			let_go(c, fl[i].slot);	/* invariants 15, 17 */
		c_record(c, fl[i].slot, &recs[nops]);
		ops[nops] = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &recs[nops] };
		nops++;
	}
	if (rc == 0 && f->ndirty == 0 && f->size) {
		f->size = 0;	/* the members hold the size now */
		ops[nops++] = (struct tfs_cstore_op){ .op = TFS_CS_DEL_SIZE, .fid = f->fid };
	}
	if (rc == 0) {
		c->st.flushed_bytes += (uint64_t)j->done;
		c->st.flush_writes += j->ns;
	}
	pthread_mutex_unlock(&c->lock);
	cerr = c_commit(c, ops, nops);
	if (cerr && rc == 0)
		rc = cerr;	/* logged; the records still say dirty: back off */
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < n; i++) {
		c_release_busy(c, fl[i].slot);
		c_unpin(c, fl[i].slot);
	}
	pthread_mutex_unlock(&c->lock);
	if (gone)	/* unlinked and closed while we had it open */
		file_gone(c, f);
	tfs_inode_unref(fs, j->in);
	return rc ? rc : j->done;
}

/* A sector is clean only once the members have it on stable storage:
 * after a power cut neither tier could give it back otherwise (invariant
 * 6).  The files of a batch sync in one batch of the members' syncs
 * (invariant 12). */
static unsigned flush_sync(struct tfs_cache *c, struct fjob *jobs, unsigned nj)
{
	struct tfs_inode *ins[FLUSH_FILES];
	int rcs[FLUSH_FILES];
	unsigned k = 0;

	for (unsigned i = 0; i < nj; i++)
		if (jobs[i].sync)
			ins[k++] = jobs[i].in;
	if (k)
		tfs_raid_fsync_many(c->fs, ins, k, true, rcs);
	k = 0;
	for (unsigned i = 0; i < nj; i++) {
		if (!jobs[i].sync)
			continue;
		if ((jobs[i].rc = rcs[k++]))
			tfs_err("cache %s: syncing destaged data of file %" PRIu64 ": %s", c->dir,
				jobs[i].f->fid, strerror(-jobs[i].rc));
	}
	return k;
}

/* Drop next_dirty's reference on f, whose flush lock we do not hold. */
static void file_drop(struct tfs_cache *c, struct cfile *f)
{
	pthread_mutex_lock(&c->lock);
	f->refs--;
	c_file_maybe_free(c, f);
	pthread_mutex_unlock(&c->lock);
}

/* A round destaged bytes in ns: the rate over the rounds of the last
 * second or more (invariant 16). */
static void destage_note(struct tfs_cache *c, uint64_t bytes, uint64_t ns)
{
	c->dst_bytes += bytes;
	c->dst_ns += ns ? ns : 1;
	if (c->dst_ns < 1000000000u)
		return;
	/* bytes per ns x 10^6 = kB/s */
	__atomic_store_n(&c->destage_kbps,
			 (uint32_t)(c->dst_bytes * 1000000 / c->dst_ns) ?: 1, __ATOMIC_RELAXED);
	c->dst_bytes = c->dst_ns = 0;
}

/* Flush files[0..nf) (referenced by next_dirty): the first under its
 * flush lock, the others if their flush locks are free, syncing their
 * members together (invariant 12).  *nfiles: the files that had something
 * to destage.  Returns bytes written or the first -errno. */
static int64_t flush_batch(struct tfs_cache *c, struct cfile **files, unsigned nf, char *buf,
			   struct fjob *jobs, uint32_t min_age, const uint32_t *want,
			   unsigned nwant, unsigned *nfiles)
{
	uint64_t t0 = c_mono_ns();
	unsigned nj = 0;
	int64_t r = 0;
	bool stop = false;

	for (unsigned i = 0; i < nf; i++) {
		struct cfile *f = files[i];

		if (stop) {
			file_drop(c, f);
			continue;
		}
		if (i == 0) {
			pthread_mutex_lock(&f->flock);
		} else if (pthread_mutex_trylock(&f->flock)) {
			file_drop(c, f);	/* a cut has it: a later round */
			continue;
		}
		if (flush_begin(c, f, buf, min_age, want, nwant, &jobs[nj]))
			stop = jobs[nj++].rc != 0;	/* ended below, with the others */
		else
			c_file_unlock(c, f);
	}
	if (flush_sync(c, jobs, nj)) {
		pthread_mutex_lock(&c->lock);
		c->st.flush_syncs++;
		pthread_mutex_unlock(&c->lock);
	}
	for (unsigned i = 0; i < nj; i++) {
		struct cfile *jf = jobs[i].f;
		int64_t e = flush_end(c, &jobs[i]);

		c_file_unlock(c, jf);
		if (r >= 0)
			r = e < 0 ? e : r + e;
	}
	if (r > 0)
		destage_note(c, (uint64_t)r, c_mono_ns() - t0);
	*nfiles = nj;
	return r;
}

/* ------------------------------------------------------------------ */
/* Finding dirty files after a restart                                 */
/* ------------------------------------------------------------------ */

/* One walk looking for the files of dirty extents. */
struct rwalk {
	struct tfs_cache *c;
	int err;		/* a file met that could not be identified, or 0 */
};

/* in (a regular file, loaded) was met by a walk or a lookup: if its fid
 * has dirty extents not found yet, the flusher can reach them now.
 * -EIO if its identity could not be read (fid 0 is the root's: ns.c
 * warned and used it). */
static int found(struct tfs_cache *c, struct tfs_inode *in)
{
	struct cfile *f;
	uint64_t fid;
	bool known;

	pthread_mutex_lock(&in->lock);
	fid = in->fid;
	known = in->fid_valid && fid != 0;
	pthread_mutex_unlock(&in->lock);
	if (!known)
		return -EIO;
	if (__atomic_load_n(&in->fid_dup, __ATOMIC_ACQUIRE))
		return -EUCLEAN;	/* neither of two is bound: flush_file */
	pthread_mutex_lock(&c->lock);
	f = c_file_find(c, fid);
	if (f && f->unresolved && !f->in) {
		f->in = in;
		tfs_inode_ref(c->fs, in);
		f->unresolved = false;
		c->unresolved--;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void tfs_cache_found(struct tfs_fs *fs, struct tfs_inode *in)
{
	struct tfs_cache *c = fs->cache;

	if (c && !tfs_cache_detached(c) && __atomic_load_n(&c->unresolved, __ATOMIC_RELAXED))
		found(c, in);
}

static int resolve_cb(void *arg, struct tfs_inode *in, const struct stat *st)
{
	struct rwalk *rw = arg;
	int rc = tfs_ns_load_file(rw->c->fs, in);

	if (rc == 0)
		rc = found(rw->c, in);
	if (rc && !rw->err)
		rw->err = rc;	/* the walk goes on; it proves nothing gone */
	return rw->c->stop ? -EINTR : 0;
}

/* Walk the tree for the files of dirty extents (DESIGN §10.5).  A file
 * not found is kept dirty and looked for again; it is dropped only when a
 * whole walk with renames and links held off (move_lock), which no named
 * file can escape, identified every file it met and did not meet it.
 * Returns 0 once every dirty file is found or dropped, else why not: the
 * walk's error, or that of a file it could not identify. */
static int resolve(struct tfs_cache *c)
{
	struct rwalk rw = { .c = c };
	uint64_t *gone = NULL;
	unsigned n = 0;
	int rc = tfs_walk_files(c->fs, resolve_cb, &rw);

	if (rc == 0 && __atomic_load_n(&c->unresolved, __ATOMIC_RELAXED)) {
		/* moved behind the walk, or not identified: again, with
		 * nothing able to move */
		rw.err = 0;
		pthread_rwlock_wrlock(&c->fs->move_lock);
		rc = tfs_walk_files(c->fs, resolve_cb, &rw);
		pthread_rwlock_unlock(&c->fs->move_lock);
		pthread_mutex_lock(&c->lock);
		if (rc == 0 && rw.err == 0 && c->unresolved)
			gone = calloc(c->unresolved, sizeof(*gone));
		for (uint32_t h = 0; gone && h <= c->fmask; h++)
			for (struct cfile *f = c->ftab[h]; f; f = f->next)
				if (f->unresolved && n < c->unresolved)
					gone[n++] = f->fid;
		pthread_mutex_unlock(&c->lock);
	}
	/* no name, and not open (opening looks it up, and a lookup finds it):
	 * the file was deleted while the daemon was down */
	for (unsigned i = 0; i < n; i++) {
		tfs_info("cache %s: dirty file %" PRIu64 " no longer exists: dropped", c->dir, gone[i]);
		tfs_cache_forget(c->fs, gone[i]);
	}
	free(gone);
	if (rc == 0)
		rc = rw.err;
	return __atomic_load_n(&c->unresolved, __ATOMIC_RELAXED) == 0 ? 0 : rc ? rc : -ENOENT;
}

/* After a walk (rc from resolve), under c->lock: while dirty files stay
 * unfound, the next walk waits 1 s, doubling up to RESOLVE_MAX; a new
 * reason is logged once. */
static void resolve_backoff(struct tfs_cache *c, int rc)
{
	if (rc == -EINTR)
		return;
	if (rc == 0 || !c->unresolved) {
		if (c->resolve_err)
			tfs_info("cache %s: every file with dirty data found", c->dir);
		c->resolve_err = 0;
		c->resolve_wait = 0;
		return;
	}
	c->resolve_wait = c->resolve_wait ? 2 * c->resolve_wait : 16;
	if (c->resolve_wait > RESOLVE_MAX)
		c->resolve_wait = RESOLVE_MAX;
	c->resolve_at = c_now() + c->resolve_wait;
	if (rc != c->resolve_err)
		tfs_err("cache %s: %u files with dirty data not found yet: %s; looking again "
			"in %u s, then less often (the data stays in the cache)", c->dir,
			c->unresolved, rc == -ENOENT ? "not met by the walk" : strerror(-rc),
			c->resolve_wait / 16);
	c->resolve_err = rc;
}

/* ------------------------------------------------------------------ */
/* The flusher                                                         */
/* ------------------------------------------------------------------ */

/* Milliseconds of the monotonic clock. */
static uint64_t mono_ms(void)
{
	return c_mono_ns() / 1000000;
}

static void wait_ticks(struct tfs_cache *c, pthread_cond_t *cv, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cv, &c->lock, &ts);
}

/* Serves the one-file flush request (c_flush_file): destages the file
 * a batch at a time, with no regard to age or pace.  Under c->lock (let
 * go while it destages). */
static void flush_one(struct tfs_cache *c, char *buf, struct fjob *jobs)
{
	uint64_t fid = c->ffid;
	struct cfile *f = c_file_find(c, fid);
	unsigned rounds = f ? 2 * (f->ndirty / FLUSH_BATCH + 1) : 0, nfiles;
	int64_t r = 0;

	while (f && f->ndirty && f->in && rounds-- && r >= 0) {
		f->refs++;	/* dropped by flush_batch, as next_dirty's are */
		pthread_mutex_unlock(&c->lock);
		r = flush_batch(c, &f, 1, buf, jobs, 0, NULL, 0, &nfiles);
		tfs_scratch_trim();
		pthread_mutex_lock(&c->lock);
		f = c_file_find(c, fid);
	}
	c->ffrc = r < 0 ? (int)r : f && f->ndirty ? -EBUSY : 0;
	if (r < 0)
		c->flush_err = (int)r;
	c->ffid = 0;
	c->ffdone = c->ffreq;
	pthread_cond_broadcast(&c->cond);
}

/* A reclaim round (invariant 15): the noted slots still flagged, dirty
 * and not being flushed, of up to FLUSH_FILES files, destaged (want:
 * room for c->rqcap slots); the others noted stay queued, and so do
 * those the round left dirty if it cleaned any.  Under c->lock (let go
 * while it destages).  Returns what flush_batch did: bytes or -errno. */
static int64_t reclaim_round(struct tfs_cache *c, char *buf, struct fjob *jobs, uint32_t *want)
{
	struct cfile *files[FLUSH_FILES];
	unsigned nf = 0, nw = 0, keep = 0, nfiles = 0, done = 0;
	int64_t r;

	for (unsigned i = 0; i < c->nrq; i++) {
		uint32_t s = c->rq[i];
		struct cext *x = &c->e[s];
		struct cfile *f;
		unsigned k;

		if (!x->used || !x->reclaim || x->flushing)
			continue;	/* gone, used since, or flush_end will see to it */
		f = bm_any(x->dirty) ? c_file_find(c, x->fid) : NULL;
		if (!f || !f->in) {	/* cleaned by a cut, or its file not found yet */
			x->reclaim = x->refused = false;
			continue;
		}
		for (k = 0; k < nf && files[k] != f; k++)
			;
		if (k == nf) {
			if (nf == FLUSH_FILES) {
				c->rq[keep++] = s;	/* the next round's */
				continue;
			}
			files[nf++] = f;
			f->refs++;	/* dropped by flush_batch, as next_dirty's are */
		}
		want[nw++] = s;
	}
	c->nrq = keep;
	if (!nf)
		return 0;
	c->rbusy = nw;
	pthread_mutex_unlock(&c->lock);
	r = flush_batch(c, files, nf, buf, jobs, 0, want, nw, &nfiles);
	tfs_scratch_trim();
	pthread_mutex_lock(&c->lock);
	c->rbusy = 0;
	/* the clean ones let go, the refused demoted, the last noted first,
	 * so the first noted (eviction met it first) is the next victim */
	for (unsigned i = nw; i-- > 0;) {
		struct cext *x = &c->e[want[i]];

		if (!x->used || !x->reclaim || x->flushing || bm_any(x->dirty))
			continue;
		let_go(c, want[i]);
		done++;
	}
	c->st.reclaimed += done;
	/* what a file's batch had no room for, or a busy flush lock kept, goes
	 * again; a round that failed or cleaned nothing drops its notes */
	for (unsigned i = 0; i < nw; i++) {
		struct cext *x = &c->e[want[i]];

		if (!x->used || !x->reclaim || x->flushing)
			continue;
		if (r > 0 && done && c->nrq < c->rqcap)
			c->rq[c->nrq++] = want[i];
		else
			x->reclaim = x->refused = false;
	}
	return r;
}

static void *flusher(void *arg)
{
	struct tfs_cache *c = arg;
	unsigned backoff = 0;
	uint32_t last_sync = c_now();
	uint64_t paced_until = 0;	/* ms (mono_ms): the end of the pace's pause */
	size_t blen = (size_t)2 * FLUSH_BATCH * c->extent;
	bool touched = false;	/* buf has pages since the last release */
	char *buf = mmap(NULL, blen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct fjob *jobs = calloc(FLUSH_FILES, sizeof(*jobs));
	uint32_t *want = malloc((size_t)c->rqcap * sizeof(*want));

	if (buf == MAP_FAILED || !jobs || !want) {
		tfs_err("cache %s: no memory for the flusher's buffers (%zu bytes)", c->dir,
			blen + FLUSH_FILES * sizeof(*jobs) + (size_t)c->rqcap * sizeof(*want));
		if (buf != MAP_FAILED)
			munmap(buf, blen);
		free(jobs);
		free(want);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	c->resolve_at = c_now();	/* dirty files to find: at once */
	while (!c->stop) {
		uint32_t now = c_now();
		bool all = c->flush_req != c->flush_done;
		bool idle = c->ndirty && now - c->last_io > IDLE_TICKS;
		unsigned nfiles, nf, pause;
		bool rounded;		/* a reclaim round ran this turn */
		bool reachable;		/* next_dirty met a dirty file it can reach */
		struct tfs_flush_step step;
		struct cfile *files[FLUSH_FILES];
		int64_t r;

		/* a file named in the journal is durably named promptly, a
		 * drain that failed is retried; the removals wait (index.c
		 * invariant 3) */
		if (__atomic_load_n(&c->journal_err, __ATOMIC_RELAXED) ||
		    !tfs_meta_synced(c->fs->meta, c->jputgen)) {
			pthread_mutex_unlock(&c->lock);
			(void)c_journal_sync(c);	/* logged once; stays queued */
			pthread_mutex_lock(&c->lock);
		}
		if (now - last_sync >= SYNC_TICKS) {
			last_sync = now;
			pthread_mutex_unlock(&c->lock);
			if (tfs_cstore_pending(c->cs))
				tfs_cstore_sync(c->cs);	/* a failure is logged there */
			c_prenamed_expire(c, SYNC_TICKS / 2);	/* index.c invariant 4 */
			(void)c_journal_sync(c);	/* the removals since */
			c_history_save(c, false);	/* history.c invariant 1 */
			pthread_mutex_lock(&c->lock);
		}
		/* dirty files not found since the restart: walk now, then
		 * after a pause, and once for every flush request */
		if (c->unresolved && all && c->resolve_req != c->flush_req) {
			c->resolve_req = c->flush_req;
			c->resolve_at = now;
		}
		if (c->unresolved && (int32_t)(now - c->resolve_at) >= 0) {
			int rc;

			pthread_mutex_unlock(&c->lock);
			rc = resolve(c);
			pthread_mutex_lock(&c->lock);
			resolve_backoff(c, rc);
			continue;
		}
		if (c->ffreq != c->ffdone) {
			flush_one(c, buf, jobs);
			touched = true;
			continue;
		}
		rounded = c->nrq && !backoff;
		if (rounded) {	/* eviction waits for these (invariant 15) */
			touched = true;
			if (reclaim_round(c, buf, jobs, want) < 0)
				backoff = 1000;	/* the RAID said no: as below */
		}
		if (all && (c->ndirty == 0 || c->ndirty_old == 0)) {
			/* a flush that ends leaves the journal naming nothing
			 * it destaged, durably */
			pthread_mutex_unlock(&c->lock);
			(void)c_journal_sync(c);	/* logged once; stays queued */
			pthread_mutex_lock(&c->lock);
			c->flush_err = 0;
			c->flush_unresolved = false;
			c->flush_done = c->flush_req;
			pthread_cond_broadcast(&c->cond);
			continue;
		}
		step = tfs_flush_plan(c->ndirty, c->nslots, c->dirty_low, c->dirty_high, idle, all);
		if (backoff || !step.run) {
			if (touched && c->ndirty == 0) {
				/* nothing left to destage: give the pages back
				 * (invariant 11), outside c->lock, which hits and
				 * writes wait for: zapping 2 x FLUSH_BATCH
				 * extents of pages takes a while */
				touched = false;
				pthread_mutex_unlock(&c->lock);
				(void)madvise(buf, blen, MADV_DONTNEED);	/* own mapping: cannot fail */
				pthread_mutex_lock(&c->lock);
				continue;	/* looked at again: it may have changed */
			}
			wait_ticks(c, &c->fcond, backoff ? backoff : 1000);
			backoff = 0;
			continue;
		}
		if (rounded && !all && !idle && mono_ms() < paced_until &&
		    !tfs_dirty_over(c->ndirty, c->nslots,
				    tfs_flush_flat(c->dirty_low, c->dirty_high))) {
			/* woken inside a paced pause by a reclaim note: the
			 * pause goes on to its end (the flat-out level ends
			 * it, as in the model) */
			wait_ticks(c, &c->fcond, (unsigned)(paced_until - mono_ms()) + 1);
			continue;
		}
		nf = next_dirty(c, step.min_age, files, FLUSH_FILES, &reachable);
		if (!nf && !reachable) {
			/* dirty files all unreachable (not found yet): the
			 * flush ends, saying so (cache.flush_error) */
			if (all) {
				c->flush_unresolved = c->unresolved != 0;
				c->flush_done = c->flush_req;
				pthread_cond_broadcast(&c->cond);
			}
			wait_ticks(c, &c->fcond, 1000);
			continue;
		}
		nfiles = 0;	/* nothing old enough yet: a batch that found nothing */
		r = 0;
		if (nf) {
			pthread_mutex_unlock(&c->lock);
			r = flush_batch(c, files, nf, buf, jobs, step.min_age, NULL, 0, &nfiles);
			touched = true;
			tfs_scratch_trim();
			pthread_mutex_lock(&c->lock);
		}
		if (r < 0) {
			/* the RAID said no: try again in a second; a "flush
			 * everything" ends here, with the reason in the status */
			backoff = 1000;
			c->flush_err = (int)r;
			if (all) {
				c->flush_done = c->flush_req;
				pthread_cond_broadcast(&c->cond);
			}
			continue;
		}
		/* between the watermarks: pace, faster as dirt grows, a pause
		 * per file the batch destaged (one if it found nothing old
		 * enough: the next look waits as long); with no file to take,
		 * a second, as the model's (a batch that ran moved its files'
		 * scans on, so the next look goes at once) */
		pause = tfs_flush_pause_ms(c->ndirty, c->nslots, c->dirty_low, c->dirty_high, idle,
					   all, nfiles);
		if (!pause && !nf)
			pause = 1000;
		if (pause) {
			paced_until = mono_ms() + pause;
			wait_ticks(c, &c->fcond, pause);
		}
	}
	pthread_mutex_unlock(&c->lock);
	munmap(buf, blen);
	free(jobs);
	free(want);
	return NULL;
}

int c_flush_all(struct tfs_cache *c)
{
	uint64_t want;

	pthread_mutex_lock(&c->lock);
	c_flush_request(c);
	want = c->flush_req;
	while (c->flush_done < want && !c->stop && c->threads)
		pthread_cond_wait(&c->cond, &c->lock);
	want = c->ndirty;
	pthread_mutex_unlock(&c->lock);
	return c->flush_err ? c->flush_err : want ? -EIO : 0;
}

int c_flush_file(struct tfs_cache *c, struct tfs_inode *in)
{
	uint64_t want;
	struct cfile *f;
	int rc;

	pthread_mutex_lock(&c->lock);
	while (c->ffreq != c->ffdone && !c->stop && c->threads)
		pthread_cond_wait(&c->cond, &c->lock);	/* another file's turn */
	f = c_file_find(c, in->fid);
	if (!f || !f->ndirty) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	c_file_attach(c, f, in);	/* the flusher reaches it through f->in */
	if (c->stop || !c->threads) {
		pthread_mutex_unlock(&c->lock);
		return -EIO;
	}
	c->ffid = in->fid;
	want = ++c->ffreq;
	pthread_cond_signal(&c->fcond);
	while (c->ffdone < want && !c->stop && c->threads)
		pthread_cond_wait(&c->cond, &c->lock);
	rc = c->ffdone >= want ? c->ffrc : -EIO;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The promoter                                                        */
/* ------------------------------------------------------------------ */

void c_promote_queue(struct tfs_cache *c, struct tfs_inode *in, uint64_t idx, bool fill)
{
	bool queued = false;
	uint32_t s;

	if (tfs_ns_open(c->fs, in))
		return;
	pthread_mutex_lock(&c->lock);
	if (c->qlen < TFS_PROMOTE_QUEUE && c->threads) {
		c->q[(c->qhead + c->qlen++) % TFS_PROMOTE_QUEUE] =
			(struct promote_job){ .fid = in->fid, .idx = idx, .in = in, .fill = fill };
		if (!fill)
			c_uheat(c, c_ekey(in->fid, idx), c_now())->queued = true;
		else if ((s = c_lookup(c, in->fid, idx)) != C_NONE)
			c->e[s].fillq = true;
		pthread_cond_signal(&c->pcond);
		queued = true;
	} else {
		c->st.promote_dropped++;
		c->st.promote_full++;
	}
	pthread_mutex_unlock(&c->lock);
	if (!queued)
		tfs_ns_release(c->fs, in);
}

void c_promote_stale(struct tfs_cache *c, unsigned promote)
{
	uint32_t now = c_now();

	for (uint32_t i = 0; i < c->qlen; i++) {
		struct promote_job *j = &c->q[(c->qhead + i) % TFS_PROMOTE_QUEUE];
		const struct tfs_heat_ent *g;

		if (j->fill || j->stale)
			continue;
		g = c_uheat(c, c_ekey(j->fid, j->idx), now);
		j->stale = tfs_promote_stale(g, c->halflife, now, promote);
	}
}

static void promote_one(struct tfs_cache *c, const struct promote_job *j);

bool c_promote_now(struct tfs_cache *c, struct tfs_inode *in, uint64_t idx)
{
	struct promote_job j = { .fid = in->fid, .idx = idx, .in = in };
	bool in_tier;

	promote_one(c, &j);
	pthread_mutex_lock(&c->lock);
	in_tier = c_lookup(c, in->fid, idx) != C_NONE;
	pthread_mutex_unlock(&c->lock);
	return in_tier;
}

/* Fills the sectors of cached extent j->idx that are not valid from the
 * RAID (invariant 14).  Under c->lock, which it lets go while it reads and
 * writes. */
static void fill_one(struct tfs_cache *c, const struct promote_job *j)
{
	uint32_t s = c_lookup(c, j->fid, j->idx);
	struct cext *x = s == C_NONE ? NULL : &c->e[s];
	uint64_t size, base = j->idx * c->extent, want[TFS_CEXT_WORDS] = { 0 };
	struct tfs_cstore_op op;
	struct tfs_cext_rec rec;
	unsigned nsec, done = 0;
	struct cfile *f = c_file_find(c, j->fid);
	char *buf;
	ssize_t r;
	int rc = 0;

	if (x)
		x->fillq = false;
	if (!x || x->busy || x->flushing || c->guard[c_ekey(j->fid, j->idx) % C_GUARDS] ||
	    (f && f->cuts) || c_mode(c) == TFS_CACHE_OFF) {
		c->st.fill_dropped++;
		return;
	}
	x->busy = true;		/* writers, cuts and the flusher stay off */
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&j->in->lock);
	size = j->in->size;
	pthread_mutex_unlock(&j->in->lock);
	nsec = base >= size ? 0 : (unsigned)(((size - base < c->extent ? size - base : c->extent) +
					      C_SECTOR - 1) / C_SECTOR);
	for (unsigned k = 0; k < nsec; k++)
		if (!bm_test(x->valid, k))
			bm_set(want, k, k + 1);
	buf = nsec ? c_buf(c->extent) : NULL;
	r = !buf ? -ENOMEM : tfs_raid_read(c->fs, j->in, false, buf, size - base < c->extent ?
					   size - base : c->extent, base);
	if (r >= 0)
		memset(buf + r, 0, (size_t)nsec * C_SECTOR - (size_t)r);	/* cut.c inv. 1 */
	/* the missing sectors only, in runs: a valid one may be dirty, and the
	 * RAID's copy of it older */
	for (unsigned k = 0; r >= 0 && rc == 0 && k < nsec;) {
		unsigned e = k;

		if (!bm_test(want, k)) {
			k++;
			continue;
		}
		while (e < nsec && bm_test(want, e))
			e++;
		rc = c_ssd_io(c, true, false, buf + (size_t)k * C_SECTOR,
			      (size_t)(e - k) * C_SECTOR, c_slot_off(c, s) + (uint64_t)k * C_SECTOR);
		done += e - k;
		k = e;
	}
	pthread_mutex_lock(&c->lock);
	if (r >= 0 && rc == 0 && done) {
		for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
			x->valid[w] |= want[w];
		c_record(c, s, &rec);
	} else {
		done = 0;
	}
	pthread_mutex_unlock(&c->lock);
	/* committed while the extent is still ours (index.c invariant 1): let
	 * go first, a punch could drop it and free its slot, and this record
	 * would then name the slot for it again (and a write's record made
	 * meanwhile lose its dirty sectors) */
	op = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &rec };
	if (done && c_commit(c, &op, 1))
		done = 0;	/* the record may not say so: the sectors stay unused */
	pthread_mutex_lock(&c->lock);
	if (!done)
		for (unsigned w = 0; w < TFS_CEXT_WORDS; w++)
			x->valid[w] &= ~want[w];
	c_release_busy(c, s);
	if (done)
		c->st.fill_promotions++;
	else
		c->st.fill_dropped++;
}

static void promote_one(struct tfs_cache *c, const struct promote_job *j)
{
	struct tfs_cstore_op op;
	struct tfs_cext_rec rec;
	struct tfs_mio mio;
	struct cfile *f;
	uint64_t size, base = j->idx * c->extent;
	unsigned nsec;
	uint32_t s;
	char *buf;
	ssize_t r;

	pthread_mutex_lock(&c->lock);
	if (j->fill) {
		fill_one(c, j);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	f = c_file_find(c, j->fid);
	if (c_lookup(c, j->fid, j->idx) != C_NONE || c->guard[c_ekey(j->fid, j->idx) % C_GUARDS] ||
	    (f && f->cuts) || __atomic_load_n(&c->mode, __ATOMIC_ACQUIRE) == TFS_CACHE_OFF ||
	    (s = c_alloc_slot(c, j->fid, j->idx)) == C_NONE) {
		c->st.promote_dropped++;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);

	pthread_mutex_lock(&j->in->lock);
	size = j->in->size;
	pthread_mutex_unlock(&j->in->lock);
	buf = c_buf(c->extent);
	r = !buf ? -ENOMEM : base >= size ? 0
	    : tfs_raid_read(c->fs, j->in, false, buf, size - base < c->extent ? size - base
										 : c->extent, base);
	nsec = r > 0 ? (unsigned)(((uint64_t)r + C_SECTOR - 1) / C_SECTOR) : 0;
	if (nsec) {
		/* slot bytes past the end of the file are zeros (cut.c invariant 1) */
		memset(buf + r, 0, (size_t)nsec * C_SECTOR - (size_t)r);
		mio = (struct tfs_mio){ .op = TFS_MIO_WRITE, .fd = c->fd, .buf = buf,
					.len = nsec * C_SECTOR, .off = c_slot_off(c, s) };
		if (tfs_uring_run(&mio, 1) || mio.res != mio.len)
			nsec = 0;
	}
	pthread_mutex_lock(&c->lock);
	if (nsec) {
		bm_set(c->e[s].valid, 0, nsec);
		c_record(c, s, &rec);
	}
	pthread_mutex_unlock(&c->lock);
	op = (struct tfs_cstore_op){ .op = TFS_CS_PUT_EXT, .rec = &rec };
	if (nsec && c_commit(c, &op, 1))
		nsec = 0;
	pthread_mutex_lock(&c->lock);
	if (nsec) {
		c->st.promotions++;
		if (j->t_ns) {	/* invariant 18 */
			uint64_t dt = c_mono_ns() - j->t_ns, mean = c->promote_ns;

			__atomic_store_n(&c->promote_ns, mean ? mean - mean / 8 + dt / 8 : dt,
					 __ATOMIC_RELAXED);
		}
	} else {
		bm_clear(c->e[s].valid, 0, c->spe);
		c_unlink_slot(c, s);
		c->st.promote_dropped++;
	}
	c_release_busy(c, s);
	pthread_mutex_unlock(&c->lock);
}

static void *promoter(void *arg)
{
	struct tfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stop || c->qlen) {
		struct promote_job j;

		if (!c->qlen) {
			pthread_cond_wait(&c->pcond, &c->lock);
			continue;
		}
		j = c->q[c->qhead];
		c->qhead = (c->qhead + 1) % TFS_PROMOTE_QUEUE;
		c->qlen--;
		c->qbusy++;
		j.t_ns = c_mono_ns();	/* its time from here (invariant 18) */
		if (j.stale)		/* invariant 20 */
			c->st.promote_dropped++;
		pthread_mutex_unlock(&c->lock);
		if (!c->stop && !j.stale)
			promote_one(c, &j);
		tfs_ns_release(c->fs, j.in);
		tfs_scratch_trim();	/* the RAID read's stripe scratch */
		pthread_mutex_lock(&c->lock);
		c->qbusy--;
		if (!j.fill)
			c_uheat(c, c_ekey(j.fid, j.idx), c_now())->queued = false;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int c_threads_start(struct tfs_cache *c)
{
	unsigned n = 0;

	c->stop = false;
	if (pthread_create(&c->flusher, NULL, flusher, c))
		return -EAGAIN;
	while (n < TFS_PROMOTERS && pthread_create(&c->promoter[n], NULL, promoter, c) == 0)
		n++;
	if (n < TFS_PROMOTERS) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_broadcast(&c->fcond);
		pthread_cond_broadcast(&c->pcond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->flusher, NULL);
		while (n)
			pthread_join(c->promoter[--n], NULL);
		return -EAGAIN;
	}
	c->threads = true;
	return 0;
}

void c_threads_stop(struct tfs_cache *c)
{
	if (!c->threads)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->fcond);
	pthread_cond_broadcast(&c->pcond);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->flusher, NULL);
	for (unsigned i = 0; i < TFS_PROMOTERS; i++)
		pthread_join(c->promoter[i], NULL);
	c->threads = false;
}
